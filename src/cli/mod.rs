//! The command line: parses arguments into typed options, calls the
//! library, writes what the library returns, and picks the exit status.
//! The library (`skoop::report`) turns results into JSON, text lines and
//! pictures; only this layer writes to the terminal (every line escaped by
//! `report::markup::visible`), chooses where a report goes and in which format, and
//! knows exit codes.

/// `out!` for command output: one line of text, with its control characters
/// escaped (`report::markup::visible`: what skoop prints comes from
/// snapshots, packs and tools anyone may have written, and must neither drive
/// the terminal nor start a line of its own). When stdout is closed early
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
        eprintln!("{}", skoop::report::markup::visible(&format!($($arg)*)))
    };
}

mod args;
mod collect;
mod diagnose;
mod diff;
mod flows;
mod interrupt;
mod live;
mod matrix;
mod namespace;
mod netfilter;
mod packs;
mod route;
mod shell;
mod snapshot;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use skoop::engine::Verdict;
use skoop::report::markup::visible;
use skoop::snapshot::{Problem, Snapshot};
use tempfile::NamedTempFile;

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
    /// Seconds of script time the rule packs' checks and hooks share in this
    /// run (each call is also bounded by itself: docs/limits.md). Once spent,
    /// every further check stops with a script error, never a guess.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_script_time: u64,
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
/// Exit status when some path is not delivered.
const EXIT_NOT_DELIVERED: u8 = 1;
/// Exit status when every path is delivered but a critical or fatal
/// finding says something on the way is broken all the same.
const EXIT_DELIVERED_WITH_FINDINGS: u8 = 3;

/// The exit status of a verdict: `diagnose` exits with its diagnosis's,
/// `matrix` with its worst flow's (see `diagnose --help`, docs/json.md).
fn verdict_status(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Succeeds => 0,
        Verdict::NotDelivered => EXIT_NOT_DELIVERED,
        Verdict::DeliveredWithSevereFindings => EXIT_DELIVERED_WITH_FINDINGS,
    }
}

pub fn run() -> ExitCode {
    // First, before any thread is started: every thread inherits the mask.
    interrupt::install();
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
    skoop::packs::limit_run(std::time::Duration::from_secs(cli.max_script_time));
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
    write_raw(&format!("{}\n", visible(&line)));
}

/// Lines as a text report: each escaped for a terminal, as `out!` escapes.
fn terminal_lines(lines: &[String]) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(&visible(line));
        text.push('\n');
    }
    text
}

/// Writes text to stdout as it is: JSON, whose encoder already escapes every
/// control character in a string.
fn write_raw(text: &str) {
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

/// Problems met while reading input that the command could still use: shown
/// on stderr so that they never mix with the result on stdout.
fn report_problems(problems: &[Problem]) {
    for problem in problems {
        err!("warning: {problem}");
    }
}

/// How many namespace directories of `snapshot` hold no dump file, said
/// once whatever their number, with the first few (`snapshot check` lists
/// them all).
fn report_empty_dumps(snapshot: &Snapshot) {
    const NAMED: usize = 3;
    let empty: Vec<String> = snapshot
        .empty_dumps()
        .map(|(_, entry)| entry.dir.display().to_string())
        .collect();
    let named = empty[..empty.len().min(NAMED)].join(", ");
    let more = if empty.len() > NAMED { ", …" } else { "" };
    match empty.len() {
        0 => {}
        1 => {
            err!("warning: a dump directory holds no files (nothing was collected there): {named}")
        }
        count => err!(
            "warning: {count} dump directories hold no files (nothing was collected there): {named}{more}"
        ),
    }
}

/// A file a report is written to: first as a temporary file beside it,
/// renamed over it once the report is whole, so that a run that ends
/// without a report (a bad argument, a failed write) leaves the file as it
/// was. The temporary file is created at once, so that a directory that
/// cannot be written is said before any work.
struct ReportFile {
    path: PathBuf,
    file: NamedTempFile,
    /// Removed by a signal that ends the run before the report is whole.
    _temporary: interrupt::Temporary,
}

impl ReportFile {
    fn create(path: &Path) -> Result<ReportFile, String> {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        // Said of the directory, not of the temporary file that would be in it.
        if !dir.is_dir() {
            return Err(format!(
                "--output: cannot write {}: no directory {}",
                path.display(),
                dir.display()
            ));
        }
        // Read and write for all but what the umask takes, as a file
        // created by File::create would be.
        let file = tempfile::Builder::new()
            .prefix(".skoop-report-")
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(dir)
            // The kind alone: the error names the temporary file, not `path`.
            .map_err(|e| format!("--output: cannot write {}: {}", path.display(), e.kind()))?;
        Ok(ReportFile {
            path: path.to_path_buf(),
            _temporary: interrupt::Temporary::new(file.path()),
            file,
        })
    }

    /// Writes the whole report; `Err` carries the exit code when it cannot.
    fn write(mut self, text: &str) -> Result<(), ExitCode> {
        let written = self
            .file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.persist(&self.path).map(drop).map_err(|e| e.error));
        written.map_err(|e| {
            err!("error: cannot write {}: {e}", self.path.display());
            ExitCode::from(EXIT_USAGE)
        })
    }
}
