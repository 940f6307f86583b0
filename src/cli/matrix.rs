//! `skoop matrix`: many flows of one snapshot at once, each answered as
//! `skoop diagnose` answers it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

use clap::{Args, ValueEnum};
use skoop::confirm::{Pace, confirm_each};
use skoop::engine::{Diagnosis, Verdict};
use skoop::matrix::EachDiagnosis;
use skoop::report::json::Report;
use skoop::report::matrix::{FlowConfirmation, FlowVerdict, MatrixReport};
use skoop::report::{csv, heatmap, html, text};
use skoop::snapshot::Snapshot;

use super::flows::{FlowArgs, Flows};
use super::live::runtime;
use super::{EXIT_USAGE, ReportFile, json_text, terminal_lines, verdict_status, write_raw};

/// Diagnose many flows of a snapshot at once: every source to every
/// destination, each flow answered exactly as `skoop diagnose --from SRC
/// --to DST --protocol P` answers it, on several threads.
///
/// Sources (any together; each taken once):
///   --from SRC            a pod, node or IP as diagnose's --from takes it (repeatable)
///   --from-nodes          every node
///   --from-pods SELECTOR  pods by namespace and labels (repeatable)
///   --from-pod-per-node   one pod on each node (its first Running pod by name)
///   --from-dumped-only    of those, only nodes and pods the snapshot has dumps of
///   --from-dumped-nodes   of those, only nodes with a host dump and the pods on them
///                         (every pod of the dumped nodes: --from-pods '*' --from-dumped-nodes)
///
/// Destinations (any together):
///   --to DST              as diagnose's --to takes it (repeatable), on --port/--protocol
///   --to-services         every port of every Service with a ClusterIP, its own protocol
///   --to-pods SELECTOR    pods: each container port they declare (--port: that one)
///   --to-nodes            every node, on --port over --protocol (without --port: ping)
///
/// A pair whose destination is dual-stack (and whose source can send in both
/// families) is a flow in each family, as diagnose asks it; --family ipv4|ipv6
/// keeps one family's flows. IPv6 flows are marked (tcp, IPv6).
///
/// A SELECTOR is NAMESPACE, NAMESPACE/LABELS or */LABELS (every namespace),
/// LABELS a comma-separated list of key=value, key!=value, key, !key. Pods
/// without an address of their own (Pending, host-network) are no endpoint.
///
/// Twins: source pods that nothing in the snapshot tells apart (one node,
/// the same namespace, labels and containers, no dump of their own, named
/// by no other object, their addresses in the same written networks, as
/// replicas of a Deployment often are) are answered by the first one's
/// diagnoses, the source renamed; a flow whose answer names its source is
/// diagnosed on its own. The text says how many flows twins answered and
/// json lists the classes (`twins`); every flow is still reported.
/// --each-flow diagnoses every flow on its own (the same answers; -o html
/// and --confirm always do). docs/matrix.md, "Twins", says what is held.
///
/// Examples:
///   skoop matrix --snapshot examples/flannel-vxlan --from-pods default --to-services
///   skoop matrix --snapshot snap --from-pod-per-node --from-dumped-only --to-services -o json
///   skoop matrix --snapshot snap --from-pods '*' --from-dumped-nodes --to-services -o json
///   skoop matrix --snapshot snap --from-nodes --to-pods 'kube-system/k8s-app=kube-dns' -o csv
///   skoop matrix --snapshot snap --from default/web-0 --to-nodes --port 10250
///   skoop matrix --snapshot snap --from-pods '*/app=web' --to-services -o html --output matrix/
///   skoop matrix --snapshot snap --from-pod-per-node --to-services --confirm 20 --node-exec 'ssh {address} sudo -n'
///
/// Formats (-o, or guessed from the extension of --output FILE: .json,
/// .csv, .html/.htm, anything else text):
///   text  the counts, then the flows that do not succeed grouped by their
///         first finding (which finding stops how many flows)
///   json  every flow: source, destination, verdict, disposition, its first
///         finding; the counts and causes (docs/matrix.md); `skoop diff` reads it
///   csv   a row per flow, the same fields
///   html  --output DIR: DIR/index.html, a heat map (sources by destinations)
///         whose every cell links to that flow's own report, DIR/flows/N.html
///         (diagnose -o html); DIR must be new or empty. --output FILE.html:
///         the heat map is FILE.html, the flows' reports FILE.flows/N.html
///
/// Exit status (the report is written whatever it is), the worst flow's as
/// diagnose would exit on it:
///   0  every flow succeeds (diagnose's 0)
///   1  some flow is not delivered
///   2  bad arguments or input, no flow selected, or some flow diagnose
///      refuses (each is listed with why)
///   3  every flow is delivered, but some with a critical or fatal finding
///      about a hop of its paths (as diagnose counts them)
///
/// With --confirm N|all --node-exec TEMPLATE, N flows spread evenly over
/// the matrix (or all of them) are then sent from their sources as
/// `diagnose --confirm` sends one, --confirm-jobs at a time and at most
/// --confirm-rate flows started a second, and each
/// says whether the kernel agrees (text: the counts and every flow that
/// does not; json: each flow's `confirmation`). The exit status stays the
/// model's.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct MatrixArgs {
    /// The snapshot directory to diagnose the flows on.
    #[arg(short, long, value_name = "DIR", env = "SKOOP_SNAPSHOT")]
    snapshot: PathBuf,
    #[command(flatten)]
    flows: FlowArgs,
    /// The report's format (see above); without it, guessed from --output's
    /// extension, else text.
    #[arg(short = 'o', long = "format", value_enum, value_name = "FORMAT")]
    format: Option<MatrixFormat>,
    /// Write the report to FILE (for html, a directory) instead of stdout.
    #[arg(long, value_name = "FILE|DIR")]
    output: Option<PathBuf>,
    /// After the matrix, send N of its flows (spread evenly over it), or
    /// all of them, from their sources and read the counters on their
    /// paths, as `diagnose --confirm` does (docs/live.md): the kernel's
    /// answer beside the model's. Needs --node-exec. Nothing is sent
    /// without it.
    #[arg(long, value_name = "N|all", value_parser = parse_sample)]
    confirm: Option<Sample>,
    /// How --confirm reaches the snapshot's nodes: a command template run
    /// on this machine in front of each command, as `diagnose
    /// --node-exec` (`{node}`, `{address}`: the Node object's InternalIP).
    #[arg(long, value_name = "TEMPLATE", requires = "confirm")]
    node_exec: Option<String>,
    /// How many flows --confirm sends at the same time (flows confirmed
    /// together may count each other's packets on nodes they share).
    #[arg(long, value_name = "JOBS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64), requires = "confirm")]
    confirm_jobs: u16,
    /// At most this many flows --confirm starts a second (a fraction is
    /// fine: 0.5 is one every two seconds), whatever --confirm-jobs allows:
    /// a whole matrix's probes are spread out, not sent in a burst.
    #[arg(long, value_name = "FLOWS", default_value_t = 5.0, value_parser = parse_rate, requires = "confirm")]
    confirm_rate: f64,
}

/// How many of a matrix's flows `--confirm` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sample {
    /// This many, spread evenly over the matrix.
    Spread(usize),
    All,
}

impl Sample {
    /// The indices of the flows to send, of `flows` in all.
    fn indices(self, flows: usize) -> Vec<usize> {
        match self {
            Sample::All => (0..flows).collect(),
            Sample::Spread(n) => {
                let mut picked: Vec<usize> = (0..n.min(flows))
                    .map(|k| k * flows / n.min(flows))
                    .collect();
                picked.dedup();
                picked
            }
        }
    }
}

/// `--confirm N|all`.
fn parse_sample(text: &str) -> Result<Sample, String> {
    match text {
        "all" => Ok(Sample::All),
        _ => match text.parse::<usize>() {
            Ok(n) if n > 0 => Ok(Sample::Spread(n)),
            _ => Err(format!(
                "{text:?}: give a number of flows (1 or more) or `all`"
            )),
        },
    }
}

/// `--confirm-rate FLOWS`: flows a second, more than none and at most 1000.
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate <= 1000.0 => Ok(rate),
        _ => Err(format!(
            "{text:?}: give the flows a second, more than 0 and at most 1000 (e.g. 5, or 0.5 for one every two seconds)"
        )),
    }
}

/// `--confirm` and how it is sent.
struct Confirming {
    sample: Sample,
    /// `--node-exec`.
    node_exec: Option<String>,
    /// `--confirm-jobs`.
    jobs: usize,
    /// `--confirm-rate`.
    rate: f64,
}

/// What `matrix` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MatrixFormat {
    /// The counts and the failing flows grouped by cause.
    Text,
    /// Every flow (docs/matrix.md); `skoop diff` reads it.
    Json,
    /// A row per flow.
    Csv,
    /// A heat map linking to each flow's report (--output DIR).
    Html,
}

/// `matrix`'s arguments validated: what the command runs on.
struct Matrix {
    snapshot: PathBuf,
    flows: Flows,
    format: MatrixFormat,
    output: Option<PathBuf>,
    confirm: Option<Confirming>,
}

impl MatrixArgs {
    /// The options the command runs on: the format settled (from -o, else
    /// --output's extension, else text).
    fn options(self) -> Matrix {
        let output = self.output;
        let format = self.format.unwrap_or_else(|| {
            match output
                .as_deref()
                .and_then(Path::extension)
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("json") => MatrixFormat::Json,
                Some("csv") => MatrixFormat::Csv,
                Some("html" | "htm") => MatrixFormat::Html,
                _ => MatrixFormat::Text,
            }
        });
        Matrix {
            snapshot: self.snapshot,
            flows: self.flows.options(),
            format,
            output,
            confirm: self.confirm.map(|sample| Confirming {
                sample,
                node_exec: self.node_exec,
                jobs: usize::from(self.confirm_jobs),
                rate: self.confirm_rate,
            }),
        }
    }
}

pub fn run(args: MatrixArgs) -> ExitCode {
    match written(&args.options()) {
        Ok(code) => code,
        Err(e) => {
            err!("error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Runs the matrix and writes its report; `Err` is a usage or input error.
fn written(matrix: &Matrix) -> Result<ExitCode, String> {
    if !matrix.flows.selects() {
        return Err("give at least one source (--from, --from-nodes, --from-pods, --from-pod-per-node) and one destination (--to, --to-services, --to-pods, --to-nodes)".into());
    }
    // Where the report goes is settled before any work.
    let (file, site) = match (matrix.format, &matrix.output) {
        (MatrixFormat::Html, None) => {
            return Err("-o html writes a directory: give it with --output DIR".into());
        }
        (MatrixFormat::Html, Some(dir)) => (None, Some(Site::create(dir)?)),
        (_, Some(path)) => (Some(ReportFile::create(path)?), None),
        (_, None) => (None, None),
    };
    let confirm = match &matrix.confirm {
        Some(_) if !matches!(matrix.format, MatrixFormat::Text | MatrixFormat::Json) => {
            return Err(
                "--confirm's answers are in the text and JSON reports only: use -o text or -o json"
                    .into(),
            );
        }
        Some(Confirming {
            node_exec: None, ..
        }) => {
            return Err(
                "--confirm reaches the snapshot's nodes through --node-exec TEMPLATE: give it"
                    .into(),
            );
        }
        Some(confirming) => Some(confirming),
        None => None,
    };
    matrix.flows.check_packs()?;
    let failed_write: Mutex<Option<String>> = Mutex::new(None);
    // The diagnoses --confirm sends, kept until the matrix is whole.
    let kept: Mutex<Vec<(usize, Diagnosis)>> = Mutex::new(Vec::new());
    let each = |index: usize, diagnosis: &Diagnosis| {
        if confirm.is_some() {
            (kept.lock().unwrap_or_else(|p| p.into_inner())).push((index, diagnosis.clone()));
        }
        if let Some(site) = &site
            && let Err(e) = site.write_flow(index, diagnosis)
        {
            failed_write
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        }
    };
    // The heat map's pages and --confirm want every flow's own diagnosis.
    let each = (site.is_some() || confirm.is_some()).then_some(&each as EachDiagnosis);
    let (mut report, snapshot) = matrix.flows.run(&matrix.snapshot, None, each)?;
    if let Some(e) = failed_write.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if let Some(confirming) = confirm {
        let mut kept = kept.into_inner().unwrap_or_else(|p| p.into_inner());
        kept.sort_by_key(|(index, _)| *index);
        confirm_flows(&mut report, &snapshot, &kept, confirming)?;
    }
    // The process ends soon: freeing a large cluster object by object
    // would take a while, and the system takes it back at once.
    std::mem::forget(snapshot);
    let written = match matrix.format {
        MatrixFormat::Text => terminal_lines(&text::matrix(&report)),
        MatrixFormat::Json => json_text(&report).map_err(|_| "cannot encode the report")?,
        MatrixFormat::Csv => csv::render(&report),
        MatrixFormat::Html => heatmap::render(&report, |index| {
            site.as_ref().map(|site| site.flow_page(index))
        }),
    };
    let done = match (file, site) {
        (Some(file), _) => file.write(&written),
        (None, Some(site)) => site.write_index(&written),
        (None, None) => {
            write_raw(&written);
            Ok(())
        }
    };
    Ok(done.err().unwrap_or_else(|| status(&report)))
}

/// Sends the sample of the diagnosed flows (`kept`, by index) that
/// `confirming` asks for, as it says, and adds each one's answer to its flow.
fn confirm_flows(
    report: &mut MatrixReport,
    snapshot: &Snapshot,
    kept: &[(usize, Diagnosis)],
    confirming: &Confirming,
) -> Result<(), String> {
    let template = confirming.node_exec.as_deref().unwrap_or_default();
    let chosen: Vec<&(usize, Diagnosis)> = (confirming.sample)
        .indices(kept.len())
        .into_iter()
        .filter_map(|i| kept.get(i))
        .collect();
    let diagnoses: Vec<&Diagnosis> = chosen.iter().map(|(_, diagnosis)| diagnosis).collect();
    let total = diagnoses.len();
    let started = |i: usize| {
        if let Some((index, _)) = chosen.get(i) {
            let flow = &report.flows[*index];
            err!(
                "confirming flow {} of {total} with the kernel: {} -> {}",
                i + 1,
                flow.from,
                flow.to
            );
        }
    };
    let confirmations = runtime()
        .map_err(|_| "cannot start the async runtime".to_string())?
        .block_on(confirm_each(
            snapshot,
            &diagnoses,
            template,
            Pace {
                jobs: confirming.jobs,
                per_second: confirming.rate,
            },
            &started,
        ));
    for ((index, _), confirmation) in chosen.iter().zip(&confirmations) {
        report.flows[*index].confirmation = Some(FlowConfirmation::new(confirmation));
    }
    Ok(())
}

/// The exit status of a matrix: its worst flow's, as diagnose would exit.
fn status(report: &MatrixReport) -> ExitCode {
    let worst = report.flows.iter().map(|f| f.verdict).max();
    ExitCode::from(match worst {
        None | Some(FlowVerdict::Error) => EXIT_USAGE,
        Some(FlowVerdict::Succeeds) => verdict_status(Verdict::Succeeds),
        Some(FlowVerdict::DeliveredWithSevereFindings) => {
            verdict_status(Verdict::DeliveredWithSevereFindings)
        }
        Some(FlowVerdict::NotDelivered) => verdict_status(Verdict::NotDelivered),
    })
}

/// Where the heat map goes: `DIR/index.html` and `DIR/flows/N.html`, or for
/// `--output FILE.html`, that file and `FILE.flows/N.html`.
struct Site {
    index: PathBuf,
    flows: PathBuf,
    /// The flows' directory as the index links to it.
    flows_link: String,
}

impl Site {
    /// The flows' directory, new or empty (a report is never mixed with, or
    /// written over, what was there).
    fn create(output: &Path) -> Result<Site, String> {
        let page = output
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
        let site = match output.file_stem().and_then(|stem| stem.to_str()) {
            Some(stem) if page => Site {
                index: output.to_path_buf(),
                flows: output.with_extension("flows"),
                flows_link: format!("{stem}.flows"),
            },
            _ => Site {
                index: output.join("index.html"),
                flows: output.join("flows"),
                flows_link: "flows".to_string(),
            },
        };
        let dir = if page { &site.flows } else { output };
        let empty = match std::fs::read_dir(dir) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(format!("--output: cannot read {}: {e}", dir.display())),
        };
        if !empty {
            return Err(format!(
                "--output: {} is not empty: -o html writes a new directory (remove it, or name another)",
                dir.display()
            ));
        }
        std::fs::create_dir_all(&site.flows)
            .map_err(|e| format!("--output: cannot create {}: {e}", site.flows.display()))?;
        Ok(site)
    }

    /// Where flow `index`'s report is, relative to the index.
    fn flow_page(&self, index: usize) -> String {
        format!("{}/{index}.html", self.flows_link)
    }

    fn write_flow(&self, index: usize, diagnosis: &Diagnosis) -> Result<(), String> {
        let path = self.flows.join(format!("{index}.html"));
        std::fs::write(&path, html::render(&Report::new(diagnosis)))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn write_index(&self, page: &str) -> Result<(), ExitCode> {
        ReportFile::create(&self.index)
            .map_err(|e| {
                err!("error: {e}");
                ExitCode::from(EXIT_USAGE)
            })?
            .write(page)
    }
}
