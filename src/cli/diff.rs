//! `skoop diff A B`: which flows' answers changed between two snapshots
//! (or two saved matrices), and the finding that made the difference.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use skoop::matrix::{Flow, diff::diff};
use skoop::report::matrix::{DiffReport, MatrixReport};
use skoop::report::text;
use skoop::snapshot::input::{CLUSTER_FILE, read_text};

use super::flows::{FlowArgs, Flows};
use super::{EXIT_USAGE, json_text, terminal_lines, write_raw};

/// Compare two snapshots' answers flow by flow: every flow whose verdict
/// (or disposition) changed, with the finding that made the difference
/// (the question after an upgrade, or yesterday against today in CI).
///
/// Each side is a snapshot directory or a `skoop matrix -o json` file. Two
/// snapshots: the same matrix (the flow options below, as `skoop matrix`
/// takes them) is diagnosed on both. A saved matrix and a snapshot: the
/// saved matrix's flows are diagnosed on the snapshot. Two saved matrices:
/// compared as they are (no flow options). A flow is the same flow on both
/// sides when its source, destination and protocol are.
///
/// Examples:
///   skoop diff yesterday/ today/ --from-pod-per-node --to-services
///   skoop diff yesterday.json today-snapshot/
///   skoop diff yesterday.json today.json -o json
///
/// Exit status:
///   0  no flow changed (and none came or went)
///   1  some flow changed, or is only on one side
///   2  bad arguments or input
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DiffArgs {
    /// Before: a snapshot directory or a `skoop matrix -o json` file.
    before: PathBuf,
    /// After: the same.
    after: PathBuf,
    #[command(flatten)]
    flows: FlowArgs,
    /// `text` (each changed flow with its cause) or `json` (docs/matrix.md).
    #[arg(short = 'o', long = "format", value_enum, default_value_t = DiffFormat::Text)]
    format: DiffFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DiffFormat {
    Text,
    Json,
}

/// `diff`'s arguments validated: what the command runs on.
struct Diff {
    before: PathBuf,
    after: PathBuf,
    flows: Flows,
    format: DiffFormat,
}

impl DiffArgs {
    fn options(self) -> Diff {
        Diff {
            before: self.before,
            after: self.after,
            flows: self.flows.options(),
            format: self.format,
        }
    }
}

/// One side of the comparison.
enum Side {
    Snapshot(PathBuf),
    Saved(MatrixReport),
}

impl Side {
    fn read(path: &Path) -> Result<Side, String> {
        if path.is_dir() {
            return Ok(Side::Snapshot(path.to_path_buf()));
        }
        let text = read_text(path, CLUSTER_FILE)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{}: no such file or directory", path.display()))?;
        let matrix: MatrixReport = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}:{}:{}: not a snapshot directory nor a `skoop matrix -o json` report: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        Ok(Side::Saved(matrix))
    }

    /// The flows of a saved matrix, to ask of a snapshot.
    fn flows(matrix: &MatrixReport, path: &Path) -> Result<Vec<Flow>, String> {
        matrix
            .flows
            .iter()
            .map(|f| {
                Flow::parse(&f.from, &f.to, &f.protocol, f.family.as_deref())
                    .map_err(|e| format!("{}: flow {} -> {}: {e}", path.display(), f.from, f.to))
            })
            .collect()
    }
}

pub fn run(args: DiffArgs) -> ExitCode {
    let args = args.options();
    match compared(&args) {
        Ok(report) => {
            let written = match args.format {
                DiffFormat::Text => Ok(terminal_lines(&text::diff(&report))),
                DiffFormat::Json => json_text(&report),
            };
            match written {
                Ok(written) => write_raw(&written),
                Err(code) => return code,
            }
            let same = report.changed.is_empty()
                && report.only_before.is_empty()
                && report.only_after.is_empty();
            if same {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            err!("error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn compared(args: &Diff) -> Result<DiffReport, String> {
    let before = Side::read(&args.before)?;
    let after = Side::read(&args.after)?;
    let snapshots = [&before, &after]
        .iter()
        .any(|side| matches!(side, Side::Snapshot(_)));
    if snapshots {
        args.flows.check_packs()?;
    }
    let both_snapshots = matches!((&before, &after), (Side::Snapshot(_), Side::Snapshot(_)));
    if both_snapshots && !args.flows.selects() {
        return Err("two snapshots: give the flows to compare as `skoop matrix` takes them (a source and a destination)".into());
    }
    let run = |dir: &Path, flows| {
        let (report, snapshot) = args.flows.run(dir, flows, None)?;
        // The process ends soon: freeing a large cluster object by object
        // would take a while, and the system takes it back at once.
        std::mem::forget(snapshot);
        Ok::<_, String>(report)
    };
    let (before, after) = match (before, after) {
        (Side::Saved(a), Side::Saved(b)) => (a, b),
        (Side::Snapshot(a), Side::Snapshot(b)) => (run(&a, None)?, run(&b, None)?),
        (Side::Saved(a), Side::Snapshot(b)) => {
            let flows = Side::flows(&a, &args.before)?;
            let b = run(&b, Some(flows))?;
            (a, b)
        }
        (Side::Snapshot(a), Side::Saved(b)) => {
            let flows = Side::flows(&b, &args.after)?;
            (run(&a, Some(flows))?, b)
        }
    };
    Ok(diff(&before, &after))
}
