//! `skoop matrix`: many flows of one snapshot at once, each answered as
//! `skoop diagnose` answers it; and what `skoop diff` shares with it (which
//! flows, which packs, how many workers).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::{Args, ValueEnum};
use skoop::engine::{Diagnosis, Endpoint, Protocol};
use skoop::matrix::{self, Destinations, Flow, PodSelector, Sources};
use skoop::packs::LoadedPacks;
use skoop::report::json::Report;
use skoop::report::matrix::{FlowOut, FlowVerdict, MatrixReport};
use skoop::report::{heatmap, html};

use super::diagnose::{ReportFile, verdict_status};
use super::packs::LoadArgs;
use super::{
    CacheArgs, EXIT_USAGE, ProtocolArg, json_text, report_problems, terminal_safe, write_raw,
};

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
///
/// Destinations (any together):
///   --to DST              as diagnose's --to takes it (repeatable), on --port/--protocol
///   --to-services         every port of every Service with a ClusterIP, its own protocol
///   --to-pods SELECTOR    pods: each container port they declare (--port: that one)
///   --to-nodes            every node, on --port over --protocol (without --port: ping)
///
/// A SELECTOR is NAMESPACE, NAMESPACE/LABELS or */LABELS (every namespace),
/// LABELS a comma-separated list of key=value, key!=value, key, !key. Pods
/// without an address of their own (Pending, host-network) are no endpoint.
///
/// Examples:
///   skoop matrix --snapshot examples/flannel-vxlan --from-pods default --to-services
///   skoop matrix --snapshot snap --from-pod-per-node --from-dumped-only --to-services -o json
///   skoop matrix --snapshot snap --from-nodes --to-pods 'kube-system/k8s-app=kube-dns' -o csv
///   skoop matrix --snapshot snap --from default/web-0 --to-nodes --port 10250
///   skoop matrix --snapshot snap --from-pods '*/app=web' --to-services -o html --output matrix/
///
/// Formats (-o, or guessed from the extension of --output FILE: .json,
/// .csv, anything else text; html needs -o):
///   text  the counts, then the flows that do not succeed grouped by their
///         first finding (which finding stops how many flows)
///   json  every flow: source, destination, verdict, disposition, its first
///         finding; the counts and causes (docs/matrix.md); `skoop diff` reads it
///   csv   a row per flow, the same fields
///   html  --output DIR: DIR/index.html, a heat map (sources by destinations)
///         whose every cell links to that flow's own report, DIR/flows/N.html
///         (diagnose -o html); DIR must be new or empty
///
/// Exit status (the report is written whatever it is), the worst flow's as
/// diagnose would exit on it:
///   0  every flow succeeds (diagnose's 0)
///   1  some flow is not delivered
///   2  bad arguments or input, no flow selected, or some flow diagnose
///      refuses (each is listed with why)
///   3  every flow is delivered, but some with a critical or fatal finding
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
}

/// Which flows, with which packs, on how many threads: what `matrix` and
/// `diff` share.
#[derive(Debug, Args)]
pub struct FlowArgs {
    /// A source as diagnose's --from takes it: NS/NAME, node/NAME, an IP.
    #[arg(long, value_name = "SRC", value_parser = super::parse_endpoint, help_heading = "Sources")]
    from: Vec<Endpoint>,
    /// Every node's own namespace.
    #[arg(long, help_heading = "Sources")]
    from_nodes: bool,
    /// Pods by NAMESPACE[/LABELS] or */LABELS.
    #[arg(long, value_name = "SELECTOR", help_heading = "Sources")]
    from_pods: Vec<PodSelector>,
    /// One pod on each node: its first Running pod (by namespace and name).
    #[arg(long, help_heading = "Sources")]
    from_pod_per_node: bool,
    /// Only the nodes and pods (of those selected) the snapshot has dumps of.
    #[arg(long, help_heading = "Sources")]
    from_dumped_only: bool,
    /// A destination as diagnose's --to takes it (--port where it has none).
    #[arg(long, value_name = "DST", value_parser = super::parse_endpoint, help_heading = "Destinations")]
    to: Vec<Endpoint>,
    /// Every port of every Service with a ClusterIP, on its own protocol.
    #[arg(long, help_heading = "Destinations")]
    to_services: bool,
    /// Pods by NAMESPACE[/LABELS] or */LABELS: each port they declare.
    #[arg(long, value_name = "SELECTOR", help_heading = "Destinations")]
    to_pods: Vec<PodSelector>,
    /// Every node, on --port (without it, pinged).
    #[arg(long, help_heading = "Destinations")]
    to_nodes: bool,
    /// The port of --to, --to-nodes and --to-pods destinations.
    #[arg(short, long, value_parser = super::parse_port, help_heading = "Destinations")]
    port: Option<u16>,
    /// The protocol of --to, and of --to-nodes and --to-pods with --port.
    #[arg(long, value_enum, default_value_t = ProtocolArg::Tcp, help_heading = "Destinations")]
    protocol: ProtocolArg,
    /// The rule packs to consult (built-in ones always; see `skoop packs`).
    #[command(flatten)]
    packs: LoadArgs,
    /// The CNI pack to apply, as diagnose's --cni.
    #[arg(long, value_name = "auto|none|NAME", default_value = "auto")]
    cni: String,
    /// Worker threads (default: one per CPU); each loads its own packs.
    #[arg(short, long, value_name = "N")]
    jobs: Option<std::num::NonZeroUsize>,
    #[command(flatten)]
    cache: CacheArgs,
}

impl FlowArgs {
    fn sources(&self) -> Sources {
        Sources {
            endpoints: self.from.clone(),
            nodes: self.from_nodes,
            pods: self.from_pods.clone(),
            pod_per_node: self.from_pod_per_node,
            dumped_only: self.from_dumped_only,
        }
    }

    fn destinations(&self) -> Destinations {
        Destinations {
            endpoints: self.to.clone(),
            services: self.to_services,
            pods: self.to_pods.clone(),
            nodes: self.to_nodes,
            port: self.port,
            protocol: Protocol::from(self.protocol),
        }
    }

    /// Whether any source and any destination is asked for.
    pub(super) fn selects(&self) -> bool {
        let sources = !self.from.is_empty()
            || self.from_nodes
            || !self.from_pods.is_empty()
            || self.from_pod_per_node;
        let destinations =
            !self.to.is_empty() || self.to_services || !self.to_pods.is_empty() || self.to_nodes;
        sources && destinations
    }

    /// The packs as the run uses them: on this thread, to say every
    /// problem and note once and to check --cni, before any work.
    pub(super) fn check_packs(&self) -> Result<(), String> {
        let mut packs = self
            .packs
            .load()
            .map_err(|_| "the rule packs do not load".to_owned())?;
        if self.cni != "auto" {
            packs
                .choose_cni(&self.cni)
                .map_err(|e| format!("--cni: {e}"))?;
        }
        Ok(())
    }

    /// The packs each worker loads for itself (see `skoop::matrix`).
    fn worker_packs(&self) -> Result<LoadedPacks, String> {
        let (mut packs, problems) = self.packs.discover_and_load();
        if let Some(problem) = problems.first() {
            return Err(problem.to_string());
        }
        if self.cni != "auto" {
            packs.choose_cni(&self.cni)?;
        }
        Ok(packs)
    }

    /// Loads `dir` and diagnoses `flows` on it (the selected ones when
    /// `None`); `each` sees every flow's diagnosis.
    pub(super) fn run(
        &self,
        dir: &Path,
        flows: Option<Vec<Flow>>,
        each: &(dyn Fn(usize, &Diagnosis) + Sync),
    ) -> Result<MatrixReport, String> {
        let (snapshot, problems) = self.cache.load(dir).map_err(|e| e.to_string())?;
        report_problems(&problems);
        let snapshot = Arc::new(snapshot);
        let flows = flows
            .unwrap_or_else(|| matrix::flows(&snapshot, &self.sources(), &self.destinations()));
        if flows.is_empty() {
            return Err(format!(
                "{}: the selection gives no flow (no source, or no destination, in the snapshot)",
                dir.display()
            ));
        }
        let threads = self.jobs.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            |n| n.get(),
        );
        let answers = matrix::evaluate(&snapshot, &flows, threads, &|| self.worker_packs(), each)
            .map_err(|e| e.to_string())?;
        // The process ends soon: freeing a large cluster object by object
        // would take a while, and the system takes it back at once.
        std::mem::forget(snapshot);
        Ok(MatrixReport::new(dir.display().to_string(), answers))
    }
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

pub fn run(args: MatrixArgs) -> ExitCode {
    let format = args.format.unwrap_or_else(|| {
        match args
            .output
            .as_deref()
            .and_then(Path::extension)
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("json") => MatrixFormat::Json,
            Some("csv") => MatrixFormat::Csv,
            _ => MatrixFormat::Text,
        }
    });
    match written(&args, format) {
        Ok(code) => code,
        Err(e) => {
            err!("error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Runs the matrix and writes its report; `Err` is a usage or input error.
fn written(args: &MatrixArgs, format: MatrixFormat) -> Result<ExitCode, String> {
    if !args.flows.selects() {
        return Err("give at least one source (--from, --from-nodes, --from-pods, --from-pod-per-node) and one destination (--to, --to-services, --to-pods, --to-nodes)".into());
    }
    // Where the report goes is settled before any work.
    let (file, site) = match (format, &args.output) {
        (MatrixFormat::Html, None) => {
            return Err("-o html writes a directory: give it with --output DIR".into());
        }
        (MatrixFormat::Html, Some(dir)) => (None, Some(Site::create(dir)?)),
        (_, Some(path)) => (Some(ReportFile::create(path)?), None),
        (_, None) => (None, None),
    };
    args.flows.check_packs()?;
    let failed_write: Mutex<Option<String>> = Mutex::new(None);
    let each = |index: usize, diagnosis: &Diagnosis| {
        if let Some(site) = &site
            && let Err(e) = site.write_flow(index, diagnosis)
        {
            failed_write
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        }
    };
    let report = args.flows.run(&args.snapshot, None, &each)?;
    if let Some(e) = failed_write.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let text = match format {
        MatrixFormat::Text => text(&report),
        MatrixFormat::Json => json_text(&report).map_err(|_| "cannot encode the report")?,
        MatrixFormat::Csv => csv(&report),
        MatrixFormat::Html => heatmap::render(&report, |index| Some(Site::flow_page(index))),
    };
    let done = match (file, site) {
        (Some(file), _) => file.write(&text),
        (None, Some(site)) => site.write_index(&text),
        (None, None) => {
            write_raw(&text);
            Ok(())
        }
    };
    Ok(done.err().unwrap_or_else(|| status(&report)))
}

/// The exit status of a matrix: its worst flow's, as diagnose would exit.
pub(super) fn status(report: &MatrixReport) -> ExitCode {
    let worst = report.flows.iter().map(|f| f.verdict).max();
    ExitCode::from(match worst {
        None | Some(FlowVerdict::Error) => EXIT_USAGE,
        Some(FlowVerdict::Succeeds) => verdict_status(skoop::engine::Verdict::Succeeds),
        Some(FlowVerdict::DeliveredWithSevereFindings) => {
            verdict_status(skoop::engine::Verdict::DeliveredWithSevereFindings)
        }
        Some(FlowVerdict::NotDelivered) => verdict_status(skoop::engine::Verdict::NotDelivered),
    })
}

/// The heat map's directory: `index.html` and `flows/N.html`.
struct Site {
    dir: PathBuf,
}

impl Site {
    /// The directory, new or empty (a report is never mixed with, or
    /// written over, what was there).
    fn create(dir: &Path) -> Result<Site, String> {
        let flows = dir.join("flows");
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
        std::fs::create_dir_all(&flows)
            .map_err(|e| format!("--output: cannot create {}: {e}", flows.display()))?;
        Ok(Site {
            dir: dir.to_path_buf(),
        })
    }

    /// Where flow `index`'s report is, relative to the index.
    fn flow_page(index: usize) -> String {
        format!("flows/{index}.html")
    }

    fn write_flow(&self, index: usize, diagnosis: &Diagnosis) -> Result<(), String> {
        let path = self.dir.join(Site::flow_page(index));
        std::fs::write(&path, html::render(&Report::new(diagnosis)))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn write_index(&self, page: &str) -> Result<(), ExitCode> {
        let path = self.dir.join("index.html");
        ReportFile::create(&path)
            .map_err(|e| {
                err!("error: {e}");
                ExitCode::from(EXIT_USAGE)
            })?
            .write(page)
    }
}

/// The text report, each line escaped for a terminal.
fn text(report: &MatrixReport) -> String {
    /// Flows listed under each cause; -o json lists every one.
    const LISTED: usize = 10;
    let mut lines: Vec<String> = Vec::new();
    lines.push(format!("{}: {}", report.snapshot, counts_line(report)));
    let failing = |f: &&FlowOut| f.verdict != FlowVerdict::Succeeds;
    for cause in &report.causes {
        lines.push(String::new());
        let noun = if cause.flows == 1 { "flow" } else { "flows" };
        lines.push(format!(
            "{} {noun}: {} {} at {}: {}",
            cause.flows, cause.severity, cause.id, cause.hop, cause.message
        ));
        let flows: Vec<&FlowOut> = report
            .flows
            .iter()
            .filter(failing)
            .filter(|f| {
                f.finding
                    .as_ref()
                    .is_some_and(|c| (&c.id, &c.hop) == (&cause.id, &cause.hop))
            })
            .collect();
        lines.extend(flows.iter().take(LISTED).map(|f| flow_line(f)));
        if flows.len() > LISTED {
            lines.push(format!(
                "    ... and {} more (-o json lists every flow)",
                flows.len() - LISTED
            ));
        }
    }
    let unexplained: Vec<&FlowOut> = report
        .flows
        .iter()
        .filter(failing)
        .filter(|f| f.finding.is_none())
        .collect();
    if !unexplained.is_empty() {
        lines.push(String::new());
        lines.push(format!("{} without a finding:", unexplained.len()));
        lines.extend(unexplained.iter().map(|f| flow_line(f)));
    }
    terminal_lines(&lines)
}

/// Lines as a text report: each escaped for a terminal, as `out!` escapes.
pub(super) fn terminal_lines(lines: &[String]) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(&terminal_safe(line));
        text.push('\n');
    }
    text
}

/// "12 flows: 8 succeed, 4 not delivered" (the kinds there are).
fn counts_line(report: &MatrixReport) -> String {
    let counts = &report.counts;
    let mut parts = vec![format!("{} succeed", counts.succeed)];
    for (count, what) in [
        (counts.not_delivered, "not delivered"),
        (
            counts.delivered_with_severe_findings,
            "delivered with a critical or fatal finding",
        ),
        (counts.errors, "refused (diagnose says why)"),
    ] {
        if count > 0 {
            parts.push(format!("{count} {what}"));
        }
    }
    format!("{} flows: {}", counts.flows, parts.join(", "))
}

/// A flow as the text report lists it.
pub(super) fn flow_line(flow: &FlowOut) -> String {
    format!(
        "    {} -> {} ({}): {}",
        flow.from,
        flow.to,
        flow.protocol,
        outcome(flow)
    )
}

/// How a flow ends, in words: its disposition, marked where assumed or
/// marred by a critical or fatal finding; or why diagnose refuses it.
pub(super) fn outcome(flow: &FlowOut) -> String {
    let Some(disposition) = &flow.disposition else {
        return format!("error: {}", flow.error.as_deref().unwrap_or("refused"));
    };
    let assumed = if flow.assumed { " (assumed)" } else { "" };
    let marred = match (&flow.verdict, &flow.finding) {
        (FlowVerdict::DeliveredWithSevereFindings, Some(finding)) => {
            format!(", but with a {} finding", finding.severity)
        }
        _ => String::new(),
    };
    format!("{disposition}{assumed}{marred}")
}

/// A row per flow, as RFC 4180 quotes it.
fn csv(report: &MatrixReport) -> String {
    let mut csv = String::from(
        "from,to,protocol,verdict,disposition,assumed,paths,failing_paths,finding,severity,hop,message,evidence,error\r\n",
    );
    for flow in &report.flows {
        let finding = flow.finding.as_ref();
        let field = |f: fn(&skoop::report::matrix::CauseOut) -> &str| {
            finding.map(f).unwrap_or_default().to_owned()
        };
        let row = [
            flow.from.clone(),
            flow.to.clone(),
            flow.protocol.clone(),
            flow.verdict.as_str().to_owned(),
            flow.disposition.clone().unwrap_or_default(),
            flow.assumed.to_string(),
            flow.paths.to_string(),
            flow.failing_paths.to_string(),
            field(|c| &c.id),
            field(|c| &c.severity),
            field(|c| &c.hop),
            field(|c| &c.message),
            field(|c| &c.evidence),
            flow.error.clone().unwrap_or_default(),
        ];
        let quoted: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        csv.push_str(&quoted.join(","));
        csv.push_str("\r\n");
    }
    csv
}

/// A CSV field: quoted where it holds a comma, quote or line break (the
/// quotes doubled), as RFC 4180 has it.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}
