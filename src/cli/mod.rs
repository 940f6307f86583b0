//! The command line: parses arguments, calls the library, prints. Nothing
//! else in skoop knows about terminals or output formats.

/// `out!` for command output: one line of text, with its control characters
/// escaped (see [`terminal_safe`]). When stdout is closed early
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

/// `err!` for errors, warnings and notes on stderr: one line, escaped as
/// `out!` escapes.
macro_rules! err {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::cli::terminal_safe(&format!($($arg)*)))
    };
}

mod collect;
mod diagnose;
mod diff;
mod live;
mod matrix;
mod namespace;
mod netfilter;
mod packs;
mod route;
mod shell;
mod snapshot;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use skoop::snapshot::input::Boundary;
use skoop::snapshot::{ClusterFrom, Problem, Snapshot, SnapshotError};

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
    /// Print a shell's completion script for skoop (bash, zsh, fish, elvish,
    /// powershell), e.g. `skoop completions bash > /etc/bash_completion.d/skoop`.
    Completions(shell::CompletionsArgs),
    // Its help text is DiagnoseArgs's own doc comment, examples included.
    Diagnose(Box<diagnose::DiagnoseArgs>),
    // Its help text is DiffArgs's own doc comment, as for matrix below.
    Diff(Box<diff::DiffArgs>),
    Matrix(Box<matrix::MatrixArgs>),
    /// Ask the kernel model what one namespace's iptables rules do with a packet.
    #[command(subcommand)]
    Netfilter(netfilter::NetfilterCommand),
    /// Print a manual page in roff: `skoop man | man -l -`, `skoop man diagnose`.
    Man(shell::ManArgs),
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
        Command::Completions(args) => shell::completions(args),
        Command::Man(args) => shell::man(args),
        Command::Diagnose(args) => diagnose::run(args),
        Command::Diff(args) => diff::run(*args),
        Command::Matrix(args) => matrix::run(*args),
        Command::Netfilter(command) => netfilter::run(command),
        Command::Packs(command) => packs::run(command),
        Command::Route(command) => route::run(command),
        Command::Snapshot(command) => snapshot::run(command),
    }
}

/// Writes one line to stdout; see [`out!`].
fn write_stdout(args: std::fmt::Arguments) {
    let line = args.to_string();
    write_raw(&format!("{}\n", terminal_safe(&line)));
}

/// Text as a terminal may show it: what skoop prints comes from snapshots
/// and packs that anyone may have written, and must not be able to drive the
/// terminal (escape sequences recolour, move the cursor, retitle the window)
/// or start a line of its own (a pod directory named `x\nnode-1 ok` would
/// spoof a line of `snapshot check`). Control characters (C0 but tab, DEL,
/// C1) and the bidirectional overrides that reorder a line are written as
/// Rust escapes (`\n`, `\u{1b}`, `\u{202e}`); everything else is kept.
/// One `out!` or `err!` is therefore exactly one line.
pub(crate) fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    // The characters the pictures escape too, but tab.
    let unsafe_char = |c: char| c != '\t' && skoop::report::markup::hidden(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut safe = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            safe.extend(c.escape_default());
        } else {
            safe.push(c);
        }
    }
    std::borrow::Cow::Owned(safe)
}

/// Writes text to stdout as it is: JSON, whose encoder already escapes every
/// control character in a string.
fn write_raw(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_all(text.as_bytes());
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
    write_raw(&json_text(value)?);
    Ok(())
}

/// A value as pretty JSON, one line feed after it; `Err` carries the exit
/// code when it cannot be encoded (and says why on stderr).
fn json_text(value: &impl serde::Serialize) -> Result<String, ExitCode> {
    match serde_json::to_string_pretty(value) {
        Ok(json) => Ok(format!("{json}\n")),
        Err(e) => {
            err!("error: cannot encode the result as JSON: {e}");
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

/// Whether a snapshot's cluster cache may stand for its `cluster/` files:
/// what every command that reads a snapshot to diagnose it shares.
#[derive(Debug, clap::Args)]
struct CacheArgs {
    /// Read the snapshot's cluster/ files even where its cluster cache
    /// stands for them (a snapshot from elsewhere, a cache in doubt).
    /// SKOOP_NO_CACHE=1 (or true, yes, on) in the environment does the same.
    #[arg(long, env = "SKOOP_NO_CACHE", value_parser = clap::builder::FalseyValueParser::new())]
    no_cache: bool,
}

impl CacheArgs {
    /// Loads the snapshot `dir`, from its cache unless told not to.
    fn load(&self, dir: &std::path::Path) -> Result<(Snapshot, Vec<Problem>), SnapshotError> {
        Snapshot::load_with(dir, &Boundary::new(dir), self.cluster_from())
    }

    fn cluster_from(&self) -> ClusterFrom {
        if self.no_cache {
            ClusterFrom::Files
        } else {
            ClusterFrom::CacheWhenCurrent
        }
    }
}

/// Problems met while reading input that the command could still use: shown
/// on stderr so that they never mix with the result on stdout.
fn report_problems(problems: &[Problem]) {
    for problem in problems {
        err!("warning: {problem}");
    }
}

/// A TCP or UDP port: 1-65535 (0 is no port a packet can be sent to).
fn parse_port(text: &str) -> Result<u16, String> {
    text.parse::<u16>()
        .ok()
        .filter(|&port| port != 0)
        .ok_or_else(|| format!("{text:?} is not a port number (1-65535)"))
}

/// `--from`/`--to`, with the port rule of [`parse_port`] for `DST:PORT`.
fn parse_endpoint(text: &str) -> Result<skoop::engine::Endpoint, String> {
    use skoop::snapshot::cluster::PortRef;
    let endpoint: skoop::engine::Endpoint = text
        .parse()
        .map_err(|e: skoop::engine::TargetError| e.to_string())?;
    match endpoint.port() {
        Some(PortRef::Number(0)) => Err(format!("{text:?}: 0 is not a port number (1-65535)")),
        _ => Ok(endpoint),
    }
}

/// `--protocol`: the IP protocol of a flow.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProtocolArg {
    Tcp,
    Udp,
    /// Whether an SCTP endpoint listens is known from an ss.txt that lists
    /// SCTP (`ss -H -tulnS`), else unknown.
    Sctp,
    /// An echo request (ping).
    Icmp,
}

impl From<ProtocolArg> for skoop::engine::Protocol {
    fn from(arg: ProtocolArg) -> Self {
        use skoop::engine::Protocol;
        match arg {
            ProtocolArg::Tcp => Protocol::Tcp,
            ProtocolArg::Udp => Protocol::Udp,
            ProtocolArg::Sctp => Protocol::Sctp,
            ProtocolArg::Icmp => Protocol::Icmp,
        }
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
