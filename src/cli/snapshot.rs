//! `skoop snapshot check`: what a snapshot holds and what is wrong with it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;
use skoop::snapshot::{Problem, Snapshot};

use super::{EXIT_USAGE, OutputFormat, print_json};

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Load a snapshot and list what was loaded and every problem found.
    ///
    /// Exit status: 0 when the snapshot is clean, 1 when problems were found
    /// (each printed as file:line:col: message), 2 when DIR is not a snapshot.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The snapshot directory (holding cluster/ and/or nodes/).
    dir: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
}

pub fn run(command: SnapshotCommand) -> ExitCode {
    match command {
        SnapshotCommand::Check(args) => check(args),
    }
}

/// The report `snapshot check -o json` prints.
#[derive(Debug, Serialize)]
struct CheckReport<'a> {
    snapshot: String,
    namespaces: Vec<NamespaceReport>,
    problems: &'a [Problem],
}

#[derive(Debug, Serialize)]
struct NamespaceReport {
    id: String,
    node: String,
    dir: String,
    files: Vec<&'static str>,
}

fn check(args: CheckArgs) -> ExitCode {
    let (snapshot, problems) = match Snapshot::load(&args.dir) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let report = CheckReport {
        snapshot: snapshot.root.display().to_string(),
        namespaces: snapshot
            .namespaces
            .iter()
            .map(|(id, entry)| NamespaceReport {
                id: id.to_string(),
                node: id.node().to_string(),
                dir: entry.dir.display().to_string(),
                files: entry.dump.files_present(),
            })
            .collect(),
        problems: &problems,
    };
    match args.output {
        OutputFormat::Json => {
            if let Err(code) = print_json(&report) {
                return code;
            }
        }
        OutputFormat::Text => print_text(&report),
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn print_text(report: &CheckReport) {
    println!("snapshot {}", report.snapshot);
    println!("namespaces: {}", report.namespaces.len());
    let width = report
        .namespaces
        .iter()
        .map(|n| n.id.len())
        .max()
        .unwrap_or(0);
    for ns in &report.namespaces {
        println!("  {:width$}  {}", ns.id, ns.files.join(" "));
    }
    if report.problems.is_empty() {
        println!("no problems");
    } else {
        println!("problems: {}", report.problems.len());
        for problem in report.problems {
            println!("  {problem}");
        }
    }
}
