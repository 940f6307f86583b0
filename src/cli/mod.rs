//! The command line: parses arguments, calls the library, prints. Nothing
//! else in skoop knows about terminals or output formats.

/// `out!` for command output. When stdout is closed early
/// (`skoop ... | head`) the process ends quietly with status 141, as a
/// SIGPIPE would end it, instead of panicking.
macro_rules! out {
    () => {
        $crate::cli::write_stdout(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*))
    };
}

mod collect;
mod diagnose;
mod live;
mod netfilter;
mod packs;
mod route;
mod snapshot;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// skoop works out, hop by hop, what each Linux network stack in a Kubernetes
/// cluster does with a packet, and reports where it stops and why.
///
/// Everything skoop concludes comes from a snapshot: a directory holding the
/// cluster's Kubernetes objects and, per network namespace, the plain output
/// of `ip`, `iptables-save`, `sysctl` and friends. Collect one with
/// `skoop collect local`, or by hand (see README.md), then check it with
/// `skoop snapshot check`.
#[derive(Debug, Parser)]
#[command(name = "skoop", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Collect snapshots: one namespace of this machine, or a live cluster.
    #[command(subcommand)]
    Collect(collect::CollectCommand),
    // Its help text is DiagnoseArgs's own doc comment, examples included.
    Diagnose(Box<diagnose::DiagnoseArgs>),
    /// Ask the kernel model what one namespace's iptables rules do with a packet.
    #[command(subcommand)]
    Netfilter(netfilter::NetfilterCommand),
    /// List, show, lint, test and create rule packs.
    #[command(subcommand)]
    Packs(packs::PacksCommand),
    /// Ask the kernel model how one namespace dump routes a packet.
    #[command(subcommand)]
    Route(route::RouteCommand),
    /// Inspect snapshot directories.
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCommand),
}

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    /// Human-readable text.
    Text,
    /// One JSON document on stdout.
    Json,
}

/// Exit code when the arguments or the input cannot be used at all.
const EXIT_USAGE: u8 = 2;

pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Collect(command) => collect::run(command),
        Command::Diagnose(args) => diagnose::run(args),
        Command::Netfilter(command) => netfilter::run(command),
        Command::Packs(command) => packs::run(command),
        Command::Route(command) => route::run(command),
        Command::Snapshot(command) => snapshot::run(command),
    }
}

/// Writes one line to stdout; see [`out!`].
fn write_stdout(args: std::fmt::Arguments) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"));
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(141),
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            std::process::exit(i32::from(EXIT_USAGE));
        }
    }
}

/// Prints a value as pretty JSON on stdout; `Err` carries the exit code when
/// it cannot be encoded.
fn print_json(value: &impl serde::Serialize) -> Result<(), ExitCode> {
    match serde_json::to_string_pretty(value) {
        Ok(json) => {
            out!("{json}");
            Ok(())
        }
        Err(e) => {
            eprintln!("error: cannot encode the result as JSON: {e}");
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

/// Problems met while reading input that the command could still use: shown
/// on stderr so that they never mix with the result on stdout.
fn report_problems(problems: &[skoop::snapshot::Problem]) {
    for problem in problems {
        eprintln!("warning: {problem}");
    }
}

/// A packet mark as iptables and iproute2 print it: decimal or 0x-hex.
fn parse_mark(text: &str) -> Result<u32, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("{text:?} is not a 32-bit mark (decimal or 0x-hex)"))
}
