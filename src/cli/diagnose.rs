//! `skoop diagnose`: where a flow stops in a snapshot, and why.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use petgraph::graph::NodeIndex;
use skoop::diagnostic::evidence_text;
use skoop::engine::{
    self, Diagnosis, Disposition, Endpoint, Finding, PacketSize, PathResult, Protocol, Request,
    Severity, Step, Verdict,
};
use skoop::packs::LoadedPacks;
use skoop::report::json::{ErrorReport, Report, finding_paths, link_kind};
use skoop::report::picture::{Picture, assumed_mark};
use skoop::report::{dot, html, svg};
use skoop::snapshot::cluster::cache;
use skoop::snapshot::input::Boundary;
use tempfile::{NamedTempFile, TempDir};

use super::live::{LiveArgs, Stopped, Summary, collect_flow, print_outcomes};
use super::packs::LoadArgs;
use super::{
    CacheArgs, EXIT_USAGE, ProtocolArg, json_text, report_problems, terminal_safe, write_raw,
};

/// Follow a packet hop by hop through a cluster and say where it stops.
///
/// Without --snapshot, skoop asks the cluster of your kubeconfig (as kubectl
/// does: --kubeconfig, --context, KUBECONFIG, in-cluster): it lists the
/// objects, collects the network namespaces the flow goes through (walking
/// it, collecting what the walk lacked, walking again), writes them all as
/// a snapshot (--save-snapshot DIR keeps it) and diagnoses that snapshot
/// exactly as offline. With --snapshot DIR it reads a collected snapshot.
///
/// Each network namespace on the way is asked what its kernel does with the
/// packet: routing (policy rules, tables), netfilter and IPVS (kube-proxy's
/// NAT included), forwarding and rp_filter, veths, bridges, VXLAN neighbour
/// and FDB entries, IPIP tunnels, every device's MTU, a listening socket,
/// and the reply back. Every service backend and multipath nexthop is a path
/// of its own. Then the rule packs check each hop against what the CNI
/// intended. A node or pod the snapshot has no dump of is stepped over with
/// the CNI pack's intent, and every hop and path concluded that way is
/// marked "(assumed)".
///
/// Examples:
///   skoop diagnose --from default/web-0 --to svc/default/web --save-snapshot ticket-1234
///   skoop diagnose --context prod --from default/web-0 --to 10.244.2.3:8080 --node-exec 'ssh {address} sudo'
///   skoop diagnose --snapshot examples/flannel-vxlan --from default/web-0 --to default/web-3:8080
///   skoop diagnose --snapshot examples/flannel-vxlan --from default/web-0 --to svc/default/web
///   skoop diagnose --snapshot snap --from node/node-1 --to 10.244.2.3 --protocol icmp -o json
///   skoop diagnose --snapshot snap --from default/web-0 --to default/web-3 --protocol icmp --size mtu
///   skoop diagnose --snapshot snap --from default/web-0 --to svc/default/signalling --protocol sctp
///   skoop diagnose --snapshot snap --from 198.51.100.7 --via node/node-2 --to node/node-2:30080
///   skoop diagnose --snapshot examples/flannel-vxlan-broken --from default/web-0 --to svc/default/web --output web.html
///
/// Formats (-o, or guessed from the extension of --output FILE: .json,
/// .dot/.gv, .svg, .html/.htm, anything else text):
///   text  the verdict, which backends fail, one line per path (its backend,
///         disposition and where it stops), then the findings, each once;
///         --detail: every hop and step of each path; -v: with packets too
///   json  the report scripts read (docs/json.md)
///   dot   the path graph for Graphviz: hops grouped by node, links labelled
///         with the packet on the wire, each path's end and disposition
///   svg   the same picture drawn by skoop (no Graphviz needed), with the
///         verdict and key findings in a legend
///   html  one self-contained page: the verdict, findings with evidence,
///         the picture, the paths, and each hop's steps on a click
///
/// Exit status (the report is written whatever it is):
///   0  every path is delivered (or leaves the cluster with a source address
///      the outside can answer: a node's, not a pod's) and no finding is
///      critical or fatal
///   1  some path is not delivered
///   2  bad arguments or input (unknown pod, malformed address, not a
///      snapshot, a broken pack, a cluster that cannot be reached or
///      refuses skoop)
///   3  every path is delivered, but a critical or fatal finding says
///      something on the way is broken all the same (the verdict counts them)
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DiagnoseArgs {
    /// A collected snapshot directory; without it, the live cluster.
    // Not `conflicts_with = "save_snapshot"`: clap would blame --snapshot
    // for a SKOOP_SNAPSHOT the user may have forgotten; `run` says both.
    #[arg(short, long, value_name = "DIR", env = "SKOOP_SNAPSHOT")]
    snapshot: Option<PathBuf>,
    /// Keep what a live diagnosis collected in DIR (to replay it offline
    /// with --snapshot DIR, or attach it to a ticket), with its cluster
    /// cache (`skoop snapshot cache --help`).
    #[arg(long, value_name = "DIR")]
    save_snapshot: Option<PathBuf>,
    #[command(flatten)]
    cache: CacheArgs,
    #[command(flatten)]
    live: LiveArgs,
    /// Where the packet starts: a pod (NS/NAME), a node (node/NAME) or an IP of one.
    #[arg(short, long, value_name = "SRC")]
    from: String,
    /// For a client outside the cluster (--from IP), the node its packets
    /// arrive at. Without it: the node whose address it sends to (a
    /// NodePort), else every node in turn, an equal share each (a load
    /// balancer's or an external IP).
    #[arg(long, value_name = "node/NAME", value_parser = parse_via)]
    via: Option<String>,
    /// Where it goes: a pod (NS/NAME[:PORT]), a node (node/NAME[:PORT]), a
    /// service (svc/NS/NAME[:PORT], the port by number or name) or an
    /// address (IP[:PORT], [IPv6]:PORT; a ClusterIP takes its Service's ports).
    #[arg(short, long, value_name = "DST")]
    to: String,
    /// Destination port (tcp, udp, sctp); also accepted as DST:PORT. Not
    /// needed for a service with one port of the protocol or a pod declaring
    /// one container port of it. ICMP has none. (`--dport` as `netfilter
    /// trace` once read it.)
    #[arg(short, long, alias = "dport", value_parser = super::parse_port)]
    port: Option<u16>,
    /// The flow's protocol. A service's port and a pod's declared port are
    /// those of this protocol. (`--proto` as `netfilter trace` once read it.)
    #[arg(long, alias = "proto", value_enum, default_value_t = ProtocolArg::Tcp)]
    protocol: ProtocolArg,
    /// Walk packets of this size (IP header included) with DF set, as
    /// `ping -M do -s BYTES-28` sends them: a device they do not fit stops
    /// the path (mtu_exceeded). `mtu`: the MTU of the source's interface.
    /// Without it a small packet is walked, and where a full-size one would
    /// not fit is a warning.
    #[arg(long, value_name = "BYTES|mtu")]
    size: Option<PacketSize>,
    /// The rule packs to consult (built-in ones always; see `skoop packs`).
    #[command(flatten)]
    packs: LoadArgs,
    /// The CNI pack to apply: `auto` detects it from the cluster's objects
    /// (DaemonSets, ConfigMaps, node annotations, CRDs); a name forces that
    /// pack whatever detection says; `none` applies no CNI pack, so nothing
    /// stands in for a namespace the snapshot lacks.
    #[arg(long, value_name = "auto|none|NAME", default_value = "auto")]
    cni: String,
    /// Show every hop of every path and its steps, not one line per path.
    #[arg(long)]
    detail: bool,
    /// Show every hop and step with its packet, the rules and tables of
    /// each route, the packet on every link (implies --detail).
    #[arg(short, long)]
    verbose: bool,
    /// The report's format (see above); without it, guessed from --output's
    /// extension, else text.
    #[arg(short = 'o', long = "format", value_enum, value_name = "FORMAT")]
    format: Option<ReportFormat>,
    /// Write the report to FILE instead of stdout. (A bare format name,
    /// `--output json`, selects that format as older skoop read it; write
    /// `./json` for a file of that name.)
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

impl DiagnoseArgs {
    /// How much of each path the text report shows.
    fn detail(&self) -> Detail {
        match (self.verbose, self.detail) {
            (true, _) => Detail::Packets,
            (false, true) => Detail::Hops,
            (false, false) => Detail::Paths,
        }
    }
}

/// What `diagnose` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    /// The verdict, then each path hop by hop.
    Text,
    /// The JSON report (docs/json.md).
    Json,
    /// The path graph in Graphviz's DOT language.
    Dot,
    /// The path graph drawn as SVG, with a legend.
    Svg,
    /// One self-contained HTML page.
    Html,
}

impl ReportFormat {
    /// The format a file's extension names; text for any other.
    fn of_file(path: &Path) -> ReportFormat {
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("json") => ReportFormat::Json,
            Some("dot" | "gv") => ReportFormat::Dot,
            Some("svg") => ReportFormat::Svg,
            Some("html" | "htm") => ReportFormat::Html,
            _ => ReportFormat::Text,
        }
    }
}

/// Where the report goes, and in which format.
struct Destination {
    format: ReportFormat,
    /// `None`: stdout.
    file: Option<ReportFile>,
}

/// A file a report is written to: first as a temporary file beside it,
/// renamed over it once the report is whole, so that a run that ends
/// without a report (a bad argument, a failed write) leaves the file as it
/// was. The temporary file is created at once, so that a directory that
/// cannot be written is said before any work.
pub(super) struct ReportFile {
    path: PathBuf,
    file: NamedTempFile,
}

impl ReportFile {
    pub(super) fn create(path: &Path) -> Result<ReportFile, String> {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        // Read and write for all but what the umask takes, as a file
        // created by File::create would be.
        let file = tempfile::Builder::new()
            .prefix(".skoop-report-")
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(dir)
            .map_err(|e| format!("--output: cannot write {}: {e}", path.display()))?;
        Ok(ReportFile {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Writes the whole report; `Err` carries the exit code when it cannot.
    pub(super) fn write(mut self, text: &str) -> Result<(), ExitCode> {
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

impl Destination {
    /// From `-o` and `--output`; the temporary file is created at once, so
    /// that a directory that cannot be written is said before any work.
    fn new(format: Option<ReportFormat>, output: Option<&Path>) -> Result<Destination, String> {
        let Some(path) = output else {
            return Ok(Destination {
                format: format.unwrap_or(ReportFormat::Text),
                file: None,
            });
        };
        // `--output json` was the long form of `-o json` before --output took
        // a file: a bare format name keeps meaning that.
        if format.is_none()
            && let Some(name) = path.to_str()
            && let Ok(format) = ReportFormat::from_str(name, false)
        {
            return Ok(Destination { format, file: None });
        }
        Ok(Destination {
            format: format.unwrap_or_else(|| ReportFormat::of_file(path)),
            file: Some(ReportFile::create(path)?),
        })
    }

    /// Writes the whole report; `Err` carries the exit code when it cannot.
    fn write(self, text: &str) -> Result<(), ExitCode> {
        match self.file {
            Some(file) => file.write(text),
            None => {
                write_raw(text);
                Ok(())
            }
        }
    }

    /// Writes a value as pretty JSON.
    fn write_json(self, value: &impl serde::Serialize) -> Result<(), ExitCode> {
        self.write(&json_text(value)?)
    }
}

pub fn run(args: Box<DiagnoseArgs>) -> ExitCode {
    let output = match Destination::new(args.format, args.output.as_deref()) {
        Ok(output) => output,
        Err(e) => {
            err!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let (Some(dir), Some(_)) = (&args.snapshot, &args.save_snapshot) {
        let error = format!(
            "--save-snapshot collects from the live cluster, but --snapshot (or SKOOP_SNAPSHOT) names {} to read: give one of them",
            dir.display()
        );
        return usage_error(output, error);
    }
    let mut packs = match args.packs.load() {
        Ok(packs) => packs,
        Err(code) => return code,
    };
    if args.cni != "auto"
        && let Err(e) = packs.choose_cni(&args.cni)
    {
        return usage_error(output, format!("--cni: {e}"));
    }
    let protocol = Protocol::from(args.protocol);
    let endpoints = endpoint(&args, "--from", &args.from)
        .and_then(|from| Ok((from, endpoint(&args, "--to", &args.to)?)));
    let (from, to) = match endpoints {
        Ok(endpoints) => endpoints,
        Err(e) => return usage_error(output, e),
    };
    let request = Request {
        from,
        to,
        port: args.port,
        protocol,
        size: args.size,
        via: args.via.clone(),
    };
    // A live diagnosis collects into a directory, then reads it as any
    // snapshot: the answer can be replayed offline.
    let (dir, _temporary) = match &args.snapshot {
        Some(dir) => (dir.clone(), None),
        None => match collect_live(&args, &packs, &request) {
            Ok(collected) => collected,
            Err(Stopped::Error(message)) => return usage_error(output, message),
            Err(stopped) => return stopped.report(),
        },
    };
    let (snapshot, problems) = match args.cache.load(&dir) {
        Ok((snapshot, problems)) => (Arc::new(snapshot), problems),
        Err(e) => return usage_error(output, e.to_string()),
    };
    report_problems(&problems);
    let diagnosis = match engine::diagnose(&snapshot, &request, &packs) {
        Ok(diagnosis) => diagnosis,
        Err(e) => return usage_error(output, e.to_string()),
    };
    let written = match output.format {
        ReportFormat::Text => output.write(&text(&diagnosis, args.detail())),
        ReportFormat::Json => output.write_json(&Report::new(&diagnosis)),
        ReportFormat::Dot => output.write(&dot::render(&Picture::new(&Report::new(&diagnosis)))),
        ReportFormat::Svg => output.write(&svg::render(&Picture::new(&Report::new(&diagnosis)))),
        ReportFormat::Html => output.write(&html::render(&Report::new(&diagnosis))),
    };
    if let Err(code) = written {
        return code;
    }
    let code = exit_status(&diagnosis);
    // The process ends here: freeing a large cluster object by object
    // would take a tenth of the run, and the system takes it back at once.
    std::mem::forget((snapshot, diagnosis));
    code
}

/// `--from` or `--to` (`flag`) as an endpoint. One that is none of the
/// forms is compared with the names of `--snapshot`'s objects, to suggest
/// the endpoint it may have meant.
fn endpoint(args: &DiagnoseArgs, flag: &str, text: &str) -> Result<Endpoint, String> {
    super::parse_endpoint(text).map_err(|e| {
        let malformed = matches!(
            text.parse::<Endpoint>(),
            Err(engine::TargetError::Malformed(_))
        );
        let suggestion = args
            .snapshot
            .as_deref()
            .filter(|_| malformed)
            .and_then(|dir| args.cache.load(dir).ok())
            .and_then(|(snapshot, _)| engine::suggest_endpoint(&snapshot, text))
            .map(|candidates| candidates.to_string())
            .unwrap_or_default();
        format!("{flag}: {e}{suggestion}")
    })
}

/// Collects what `request` needs from the live cluster into
/// `--save-snapshot DIR`, or a temporary directory (returned too, so that
/// it lives as long as the diagnosis reads it).
fn collect_live(
    args: &DiagnoseArgs,
    packs: &LoadedPacks,
    request: &Request,
) -> Result<(PathBuf, Option<TempDir>), Stopped> {
    let (dir, temporary) = match &args.save_snapshot {
        Some(dir) => (dir.clone(), None),
        None => {
            let temporary = tempfile::Builder::new()
                .prefix("skoop-snapshot-")
                .tempdir()
                .map_err(|e| {
                    Stopped::Error(format!("cannot create a temporary snapshot directory: {e}"))
                })?;
            (temporary.path().to_path_buf(), Some(temporary))
        }
    };
    args.live.run(packs, &dir, async |collection| {
        collect_flow(collection, packs, request).await?;
        print_outcomes(collection, Summary::Brief);
        Ok(())
    })?;
    if args.save_snapshot.is_some() {
        // A saved snapshot is replayed, maybe many times: it keeps its
        // objects' model as `collect cluster` does (and is diagnosed from it
        // here too).
        if let Err(e) = cache::write(&dir, &Boundary::new(&dir)) {
            err!("warning: no cluster cache written: {e}");
        }
        err!(
            "saved the snapshot in {0}; replay with --snapshot {0}",
            dir.display()
        );
    }
    Ok((dir, temporary))
}

/// A bad argument or input: said on stderr, and under `-o json` as a JSON
/// object where the report goes too (stdout or `--output FILE`), so that a
/// script reading the report gets JSON either way.
fn usage_error(output: Destination, error: String) -> ExitCode {
    err!("error: {error}");
    if output.format == ReportFormat::Json
        && let Err(code) = output.write_json(&ErrorReport::new(error))
    {
        return code;
    }
    ExitCode::from(EXIT_USAGE)
}

/// How much of each path the text report shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Detail {
    /// One line per path: its backend, disposition and where it stops.
    Paths,
    /// Every hop of every path, and its steps (`--detail`).
    Hops,
    /// Every step with its packet, rules and tables too (`-v`).
    Packets,
}

/// Exit status when some path is not delivered.
const EXIT_NOT_DELIVERED: u8 = 1;
/// Exit status when every path is delivered but a critical or fatal
/// finding says something on the way is broken all the same.
const EXIT_DELIVERED_WITH_FINDINGS: u8 = 3;

/// The exit status of a diagnosis (see `diagnose --help`, docs/json.md).
fn exit_status(diagnosis: &Diagnosis) -> ExitCode {
    ExitCode::from(verdict_status(diagnosis.verdict()))
}

/// The exit status of a verdict (`skoop matrix` exits with its worst flow's).
pub(super) fn verdict_status(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Succeeds => 0,
        Verdict::NotDelivered => EXIT_NOT_DELIVERED,
        Verdict::DeliveredWithSevereFindings => EXIT_DELIVERED_WITH_FINDINGS,
    }
}

/// A finding as the text report says it: once, with the paths (numbered
/// from 1) it is about. The walker records a stop on every path it ends, so
/// that paths forked from one hop repeat it word for word: those are one
/// finding about all their paths (`finding_paths` of each).
struct Said<'d> {
    finding: &'d Finding,
    paths: Vec<usize>,
}

/// Each distinct finding once, in the order first found.
fn said_findings(diagnosis: &Diagnosis) -> Vec<Said<'_>> {
    let mut said: Vec<Said> = Vec::new();
    for finding in &diagnosis.findings {
        let paths = finding_paths(diagnosis, finding)
            .into_iter()
            .map(|index| index + 1)
            .collect();
        // The same finding at the same hop id, wherever on the graph.
        let same = |s: &&mut Said| {
            s.finding.about.hop == finding.about.hop
                && s.finding.clone().about(()) == finding.clone().about(())
        };
        match said.iter_mut().find(same) {
            Some(earlier) => {
                earlier.paths.extend(paths);
                earlier.paths.sort_unstable();
                earlier.paths.dedup();
            }
            None => said.push(Said { finding, paths }),
        }
    }
    said
}

/// How many distinct fatal and critical findings the diagnosis has.
fn severe_findings(diagnosis: &Diagnosis) -> (usize, usize) {
    let said = said_findings(diagnosis);
    let count = |severity| {
        said.iter()
            .filter(|s| s.finding.severity == severity)
            .count()
    };
    (count(Severity::Fatal), count(Severity::Critical))
}

/// What the verdict adds about fatal and critical findings: a delivered
/// flow with one is not healthy (exit status 3), and says so at once.
fn severity_note(diagnosis: &Diagnosis) -> String {
    let (fatal, critical) = severe_findings(diagnosis);
    let counts: Vec<String> = [(fatal, "fatal"), (critical, "critical")]
        .into_iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, severity)| format!("{count} {severity}"))
        .collect();
    if counts.is_empty() {
        return String::new();
    }
    let noun = if fatal + critical == 1 {
        "finding"
    } else {
        "findings"
    };
    let joint = if diagnosis.succeeds() { "but" } else { "with" };
    format!(", {joint} {} {noun}", counts.join(" and "))
}

/// What a path's request reached, as a summary names it: the pod or node
/// whose address it is, else the address; a path without one, by number.
fn backend_name(path: &PathResult, number: usize) -> String {
    match &path.backend {
        Some(backend) => backend.owner.clone().unwrap_or_else(|| backend.socket()),
        None => format!("path {number}"),
    }
}

/// Which of several paths fail, by backend where they reach several (a
/// service's fan-out): "2 of 4 backends (50% of flows) fail: a, b".
fn failing_summary(diagnosis: &Diagnosis) -> Option<String> {
    if diagnosis.paths.len() < 2 || diagnosis.succeeds() {
        return None;
    }
    // Each backend with whether any of its paths fails, in path order.
    let mut backends: Vec<(String, bool)> = Vec::new();
    for (index, path) in diagnosis.paths.iter().enumerate() {
        let name = backend_name(path, index + 1);
        let fails = !path.succeeds();
        match backends.iter_mut().find(|(known, _)| *known == name) {
            Some((_, failing)) => *failing |= fails,
            None => backends.push((name, fails)),
        }
    }
    let share: f64 = diagnosis
        .paths
        .iter()
        .filter(|path| !path.succeeds())
        .map(|path| path.probability)
        .sum();
    let failing: Vec<&str> = backends
        .iter()
        .filter(|(_, fails)| *fails)
        .map(|(name, _)| name.as_str())
        .collect();
    if backends.len() > 1 {
        Some(format!(
            "{} of {} backends ({:.0}% of flows) fail: {}",
            failing.len(),
            backends.len(),
            share * 100.0,
            failing.join(", ")
        ))
    } else {
        let paths = diagnosis.paths.iter().filter(|p| !p.succeeds()).count();
        Some(format!(
            "{paths} of {} paths ({:.0}% of flows) fail",
            diagnosis.paths.len(),
            share * 100.0
        ))
    }
}

/// The text report, each line escaped for a terminal (see `terminal_safe`).
fn text(diagnosis: &Diagnosis, detail: Detail) -> String {
    let mut text = String::new();
    // One line of the report, escaped as `out!` escapes it.
    macro_rules! say {
        () => {
            text.push('\n')
        };
        ($($arg:tt)*) => {{
            text.push_str(&terminal_safe(&format!($($arg)*)));
            text.push('\n');
        }};
    }
    // The verdict first, then which paths fail.
    let disposition = diagnosis.disposition();
    say!(
        "{}: {disposition}{}{}{}",
        diagnosis.summary,
        exit_note(diagnosis),
        assumed_mark(diagnosis.assumed()),
        severity_note(diagnosis)
    );
    if let Some(pack) = &diagnosis.assumed_by {
        let namespaces: Vec<&str> = diagnosis
            .findings
            .iter()
            .filter(|f| f.id == skoop::engine::codes::SNAPSHOT_ASSUMED)
            .map(|f| f.about.hop.as_str())
            .collect();
        say!(
            "  assumed: the snapshot has no dump of {}; pack {pack}'s intent stands in there",
            namespaces.join(", ")
        );
    }
    if let Some(summary) = failing_summary(diagnosis) {
        say!("  {summary}");
    }
    let count = diagnosis.paths.len();
    if detail == Detail::Paths && count > 0 {
        say!();
    }
    for (number, path) in diagnosis.paths.iter().enumerate() {
        if detail > Detail::Paths {
            say!();
        }
        let to = path
            .backend
            .as_ref()
            .map(|backend| format!(" to {backend}"))
            .unwrap_or_default();
        let stops = match (path.disposition, path.hops.last()) {
            (Disposition::Delivered | Disposition::ExitsCluster, _) | (_, None) => String::new(),
            (_, Some(&last)) => format!(" at {}", diagnosis.hop(last).id),
        };
        say!(
            "path {} of {count} ({:.0}% of flows){to}: {}{}{stops}",
            number + 1,
            path.probability * 100.0,
            path.disposition,
            assumed_mark(path.assumed)
        );
        if detail == Detail::Paths {
            continue;
        }
        let verbose = detail == Detail::Packets;
        let mut previous: Option<usize> = None;
        for &index in &path.hops {
            if let Some(from) = previous
                && let Some(edge) = diagnosis
                    .graph
                    .find_edge(NodeIndex::new(from), NodeIndex::new(index))
            {
                let link = &diagnosis.graph[edge];
                let to = link.to_interface.as_deref().unwrap_or("");
                let kind = link_kind(link.kind);
                if verbose {
                    say!(
                        "   | {kind} {} -> {to}: {}",
                        link.from_interface,
                        link.packet
                    );
                } else {
                    say!("   | {kind} {} -> {to}", link.from_interface);
                }
            }
            previous = Some(index);
            let hop = diagnosis.hop(index);
            let what = match hop.kind {
                engine::HopKind::Pod => format!("pod on {}", hop.node.as_deref().unwrap_or("?")),
                engine::HopKind::Node => "node".to_string(),
                engine::HopKind::External => "outside the cluster".to_string(),
            };
            say!("  {} [{what}]{}", hop.id, assumed_mark(hop.assumed));
            for step in &hop.steps {
                // In an assumed hop every step is: the hop says so once.
                let mark = assumed_mark(step.assumed && !hop.assumed);
                say!("      {}{mark}", step_line(&step.step, verbose));
            }
        }
    }
    let said = said_findings(diagnosis);
    if !said.is_empty() {
        say!();
        say!("findings:");
        for Said { finding, paths } in &said {
            let severity = finding.severity.as_str();
            // Which paths, where it is about some of several.
            let which = match paths.as_slice() {
                [] => String::new(),
                _ if count < 2 || paths.len() == count => String::new(),
                [one] => format!(" (path {one})"),
                many => {
                    let numbers: Vec<String> = many.iter().map(usize::to_string).collect();
                    format!(" (paths {})", numbers.join(", "))
                }
            };
            say!(
                "  {severity} {} at {}{which}: {}{}",
                finding.id,
                finding.about.hop,
                finding.status.prefix(),
                finding.message
            );
            // An object's check that cannot tell has no file to point at.
            if !finding.evidence.is_empty() {
                say!("      evidence: {}", evidence_text(&finding.evidence));
            }
            if let Some(remediation) = &finding.remediation {
                say!("      remediation: {remediation}");
            }
        }
    }
    text
}

/// How the flow leaves the cluster, where that is the verdict: with which
/// source address, and whether the outside can answer it.
fn exit_note(diagnosis: &Diagnosis) -> String {
    let Some(exit) = diagnosis
        .exit()
        .filter(|_| diagnosis.disposition() == Disposition::ExitsCluster)
    else {
        return String::new();
    };
    let source = exit
        .source
        .map_or_else(|| "a masqueraded address".to_string(), |s| s.to_string());
    match exit.answerable {
        true => format!(" from {source} ({})", exit.why),
        false => format!(
            " with source {source}, which the outside cannot answer ({})",
            exit.why
        ),
    }
}

fn step_line(step: &Step, verbose: bool) -> String {
    match step {
        Step::Sent { packet } => format!("sends {packet}"),
        Step::Received { interface, packet } => {
            if verbose {
                format!("receives on {interface}: {packet}")
            } else {
                format!("receives on {interface}")
            }
        }
        Step::Route {
            rule,
            route,
            result,
        } => {
            if verbose && !rule.is_empty() {
                format!("route: {result} ({route}; rule {rule})")
            } else {
                format!("route: {result} ({route})")
            }
        }
        Step::Translated {
            hook,
            table,
            translation,
        } => format!("netfilter {hook} {table}: {translation}"),
        Step::Netfilter { rule, file } => {
            format!("netfilter: {rule} at {}: {}", rule.place(file), rule.text)
        }
        Step::Neighbour {
            address,
            interface,
            result,
        } => format!("neighbour {address} on {interface}: {result}"),
        Step::Bridged { bridge, port } => format!("bridge {bridge} forwards to port {port}"),
        Step::Encapsulated { device, outer } => format!("{device} encapsulates: {outer}"),
        Step::Decapsulated { device, inner } => format!("{device} decapsulates: {inner}"),
        Step::Delivered { socket } => format!("delivered to {socket}"),
        Step::Stopped {
            disposition,
            reason,
        } => format!("STOPPED ({disposition}): {reason}"),
    }
}

/// `--via node/NAME`: the node's name.
fn parse_via(text: &str) -> Result<String, String> {
    match text.strip_prefix("node/") {
        Some(name) if !name.is_empty() && !name.contains('/') => Ok(name.to_string()),
        _ => Err(format!("{text:?} is not a node: write node/NAME")),
    }
}
