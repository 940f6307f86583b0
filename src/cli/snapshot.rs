//! `skoop snapshot check`: what a snapshot holds and what is wrong with it;
//! `skoop snapshot cache`: its cluster model kept for later diagnoses.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use ipnet::IpNet;
use serde::Serialize;
use skoop::snapshot::cluster::cache::Verdict;
use skoop::snapshot::cluster::{self, ApiEnum as _, Cluster};
use skoop::snapshot::input::Boundary;
use skoop::snapshot::netns::{DumpFile, FileState, Rulesets};
use skoop::snapshot::{ClusterFrom, NetnsId, Problem, Snapshot};

use super::args::BudgetArgs;
use super::{EXIT_USAGE, OutputFormat, print_json};

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Load a snapshot: what was loaded, every problem, and whether it is complete.
    ///
    /// A problem is a file that cannot be read or parsed, printed as
    /// file:line:col: message. A warning is something a diagnosis will lack:
    /// a node or pod of the cluster's objects without a dump, a dump without
    /// an object, an empty namespace directory, a dump without a file every
    /// diagnosis reads. The last line sums it up.
    ///
    /// It always reads cluster/'s files. When DIR holds a cluster cache
    /// (`skoop snapshot cache --help`), it says how the cache stands: current
    /// (diagnoses read it), passed over (they read the files, and why), or
    /// holding another model than the files load into, which is a problem.
    ///
    /// Exit status: 0 when the snapshot is complete and clean, 1 when
    /// problems were found, 3 when it is readable but incomplete (warnings
    /// only), 2 when DIR is not a snapshot.
    Check(CheckArgs),
    /// Read cluster/ once and keep its model in DIR/cluster.cache, so that
    /// every later diagnosis of DIR starts fast.
    ///
    /// Most of the time a diagnosis of a large cluster takes goes into
    /// parsing the objects' JSON (537 MiB for 150,000 pods). The cache
    /// holds what that parsing makes, and the problems it found, in a
    /// compact binary form, about a sixteenth of the size. `skoop collect
    /// cluster` writes it; run this for a snapshot made or changed by hand.
    ///
    /// A diagnosis uses the cache only when it is cluster/'s own: written by
    /// a build of skoop that reads cluster/ the same way (the same snapshot
    /// code and dependencies), for the same files, each of the same size and
    /// either the same modification and change times or the same content
    /// (SHA-256). Otherwise it reads cluster/ and warns that the cache was
    /// passed over. A cache is trusted as the files it stands for: `skoop
    /// snapshot check` always reads the files, and says whether the cache
    /// holds what they load into; `skoop diagnose --no-cache` reads the
    /// files whatever the cache says. Deleting the cache is always safe.
    ///
    /// Exit status: 0 when written, 1 when written but cluster/ has
    /// problems (kept in the cache: diagnoses report them as from the
    /// files), 2 when not written.
    Cache(CacheArgs),
}

#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The snapshot directory (holding cluster/).
    dir: PathBuf,
    #[command(flatten)]
    budget: BudgetArgs,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The snapshot directory (holding cluster/ and/or nodes/).
    dir: PathBuf,
    #[command(flatten)]
    budget: BudgetArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
}

pub fn run(command: SnapshotCommand) -> ExitCode {
    match command {
        SnapshotCommand::Check(args) => check(args),
        SnapshotCommand::Cache(args) => cache(args),
    }
}

fn cache(args: CacheArgs) -> ExitCode {
    if !args.dir.is_dir() {
        err!("error: {}: no such directory", args.dir.display());
        return ExitCode::from(EXIT_USAGE);
    }
    if !args.dir.join("cluster").is_dir() {
        err!(
            "error: {}: no cluster/ directory in it: nothing to cache",
            args.dir.display()
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let written =
        match cluster::cache::write(&args.dir, &Boundary::new(&args.dir), args.budget.budget()) {
            Ok(written) => written,
            Err(e) => {
                err!("error: no cluster cache written: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        };
    out!(
        "wrote {}: {} objects from {} {}, {}",
        written.path.display(),
        written.objects,
        written.files,
        if written.files == 1 { "file" } else { "files" },
        size(written.bytes)
    );
    if written.problems.is_empty() {
        return ExitCode::SUCCESS;
    }
    err!(
        "{} {} in cluster/, kept in the cache (`skoop snapshot check {}` lists them)",
        written.problems.len(),
        if written.problems.len() == 1 {
            "problem"
        } else {
            "problems"
        },
        args.dir.display()
    );
    ExitCode::from(1)
}

/// A size in bytes as a person reads it.
fn size(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    let bytes_f = bytes as f64;
    if bytes_f < KIB {
        format!("{bytes} bytes")
    } else if bytes_f < KIB * KIB {
        format!("{:.1} KiB", bytes_f / KIB)
    } else {
        format!("{:.1} MiB", bytes_f / KIB / KIB)
    }
}

/// The report `snapshot check -o json` prints.
#[derive(Debug, Serialize)]
struct CheckReport<'a> {
    snapshot: String,
    cluster: ClusterReport,
    namespaces: Vec<NamespaceReport>,
    /// How `cluster.cache` stands, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<CacheReport>,
    problems: &'a [Problem],
    /// What a diagnosis will lack, each once.
    warnings: Vec<Gap>,
}

/// What was loaded from `cluster/`: the objects a diagnosis starts from, and
/// how many of every other kind.
#[derive(Debug, Serialize)]
struct ClusterReport {
    nodes: Vec<NodeReport>,
    pods: Vec<PodReport>,
    services: Vec<ServiceReport>,
    /// Objects per kind, typed and generic alike; the API version is given
    /// for the generic ones (`IPPool (projectcalico.org/v3)`).
    counts: BTreeMap<String, usize>,
}

/// `cluster.cache` against `cluster/`: `current` (diagnoses read it),
/// `passed-over` (they read the files, and say why), `differs` (it claims
/// to be the files' own but is not: a problem).
#[derive(Debug, Serialize)]
struct CacheReport {
    state: &'static str,
    message: String,
}

#[derive(Debug, Serialize)]
struct NodeReport {
    name: String,
    addresses: Vec<IpAddr>,
    pod_cidrs: Vec<IpNet>,
    ready: Option<bool>,
}

#[derive(Debug, Serialize)]
struct PodReport {
    namespace: String,
    name: String,
    node: Option<String>,
    ips: Vec<IpAddr>,
    host_network: bool,
    phase: Option<&'static str>,
}

#[derive(Debug, Serialize)]
struct ServiceReport {
    namespace: String,
    name: String,
    #[serde(rename = "type")]
    service_type: &'static str,
    cluster_ips: Vec<IpAddr>,
    /// `PORT/PROTO`, with `:NODEPORT` where there is one.
    ports: Vec<String>,
}

#[derive(Debug, Serialize)]
struct NamespaceReport {
    id: String,
    node: String,
    dir: String,
    files: Vec<&'static str>,
}

fn check(args: CheckArgs) -> ExitCode {
    // The files, always: a check is what tells whether the cache holds them.
    let boundary = Boundary::new(&args.dir);
    let (snapshot, mut problems) = match Snapshot::load_within(
        &args.dir,
        &boundary,
        ClusterFrom::Files,
        args.budget.budget(),
        Rulesets::Whole,
    ) {
        Ok(loaded) => loaded,
        Err(e) => {
            err!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let verdict = cluster::cache::verify(&args.dir, &boundary, &snapshot.cluster, &problems);
    let cache = match verdict {
        Verdict::Absent => None,
        Verdict::Current => Some(CacheReport {
            state: "current",
            message: "holds what cluster/ loads into: diagnoses read it".into(),
        }),
        Verdict::PassedOver(why) => Some(CacheReport {
            state: "passed-over",
            message: why.message,
        }),
        Verdict::Differs(problem) => {
            let message = problem.message.clone();
            problems.push(problem);
            Some(CacheReport {
                state: "differs",
                message,
            })
        }
    };
    let report = CheckReport {
        snapshot: snapshot.root.display().to_string(),
        cluster: cluster_report(&snapshot.cluster),
        namespaces: snapshot
            .namespaces
            .iter()
            .map(|(id, entry)| NamespaceReport {
                id: id.to_string(),
                node: id.node().to_string(),
                dir: entry.dir.display().to_string(),
                files: entry
                    .dump()
                    .files_present()
                    .into_iter()
                    .map(DumpFile::name)
                    .collect(),
            })
            .collect(),
        cache,
        problems: &problems,
        warnings: gaps(&snapshot),
    };
    match args.output {
        OutputFormat::Json => {
            if let Err(code) = print_json(&report) {
                return code;
            }
        }
        OutputFormat::Text => print_text(&report),
    }
    if !problems.is_empty() {
        ExitCode::from(1)
    } else if !report.warnings.is_empty() {
        ExitCode::from(EXIT_INCOMPLETE)
    } else {
        ExitCode::SUCCESS
    }
}

/// Exit status of a snapshot that can be read but lacks something.
const EXIT_INCOMPLETE: u8 = 3;

/// What kind of thing a diagnosis will lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
enum GapKind {
    /// A Node object without a dump of its host namespace.
    NodeWithoutDump,
    /// A Pod object (scheduled, not hostNetwork, not finished) without a
    /// dump, on a node that has dumps.
    PodWithoutDump,
    /// A dump whose node or pod is not in the objects, or is elsewhere.
    DumpWithoutObject,
    /// A namespace directory without any dump file.
    EmptyDump,
    /// A dump without a file every diagnosis reads there.
    FilesMissing,
}

impl GapKind {
    /// How the summary counts `count` of them.
    fn counted(self, count: usize) -> String {
        let (one, many) = match self {
            GapKind::NodeWithoutDump => ("node without a dump", "nodes without dumps"),
            GapKind::PodWithoutDump => ("pod without a dump", "pods without dumps"),
            GapKind::DumpWithoutObject => ("dump without an object", "dumps without objects"),
            GapKind::EmptyDump => ("empty dump", "empty dumps"),
            GapKind::FilesMissing => (
                "dump lacking files a diagnosis reads",
                "dumps lacking files a diagnosis reads",
            ),
        };
        format!("{count} {}", if count == 1 { one } else { many })
    }
}

/// One thing a diagnosis will lack.
#[derive(Debug, Serialize)]
struct Gap {
    kind: GapKind,
    /// The node (`node/NAME`), pod (`NS/NAME`) or dump it is about.
    subject: String,
    message: String,
}

/// The files a diagnosis reads in every namespace it walks through, each
/// as the names any one of which will do (iptables or nftables). Without
/// one, what needs it is `insufficient_info`. The others are read where
/// they matter (IPv6 routes, ipsets, IPVS) and are not looked for here.
const READ_IN_EVERY_NAMESPACE: &[&[DumpFile]] = &[
    &[DumpFile::IpLink],
    &[DumpFile::IpAddr],
    &[DumpFile::IpRoute],
    &[DumpFile::IpRule],
    &[DumpFile::IpNeigh],
    &[DumpFile::IptablesSave, DumpFile::NftRuleset],
    &[DumpFile::Sysctl],
    &[DumpFile::Ss],
];

/// Also read in a node's host namespace: where its bridges and VXLAN
/// devices send frames.
const READ_IN_HOSTS: &[&[DumpFile]] = &[&[DumpFile::BridgeFdb]];

/// Whether the snapshot holds what a diagnosis reads: every node and pod of
/// the objects with its dump, every dump with its object, and in each dump
/// the files read at every hop. Unreadable files are problems already, not
/// repeated here.
fn gaps(snapshot: &Snapshot) -> Vec<Gap> {
    let cluster = &snapshot.cluster;
    let mut gaps = Vec::new();
    let nodes_with_dumps: BTreeSet<&str> = snapshot.namespaces.keys().map(NetnsId::node).collect();
    // Counted once: a large cluster has thousands of nodes and pods.
    let mut pods_on: HashMap<&str, usize> = HashMap::new();
    for pod in cluster.pods().filter(|pod| has_own_netns(pod)) {
        if let Some(node) = pod.node_name.as_deref() {
            *pods_on.entry(node).or_default() += 1;
        }
    }
    for node in cluster.nodes() {
        let name = node.meta.name.as_str();
        if nodes_with_dumps.contains(name) {
            if !snapshot
                .namespaces
                .contains_key(&NetnsId::Host { node: name.into() })
            {
                gaps.push(Gap {
                    kind: GapKind::NodeWithoutDump,
                    subject: format!("node/{name}"),
                    message: format!(
                        "no dump of its host namespace ({}), though some of its pods have one",
                        NetnsId::Host { node: name.into() }.dir().display()
                    ),
                });
            }
            continue;
        }
        let pods = match pods_on.get(name).copied().unwrap_or(0) {
            0 => String::new(),
            1 => " nor of its 1 pod".to_string(),
            count => format!(" nor of its {count} pods"),
        };
        gaps.push(Gap {
            kind: GapKind::NodeWithoutDump,
            subject: format!("node/{name}"),
            message: format!(
                "no dump of its host namespace (nodes/{name}/host){pods}: a diagnosis through it is assumed or insufficient_info"
            ),
        });
    }
    for pod in cluster.pods().filter(|pod| has_own_netns(pod)) {
        let Some(node) = pod.node_name.as_deref() else {
            continue;
        };
        let id = NetnsId::Pod {
            node: node.into(),
            namespace: pod.meta.namespace.clone(),
            name: pod.meta.name.clone(),
        };
        if nodes_with_dumps.contains(node) && !snapshot.namespaces.contains_key(&id) {
            gaps.push(Gap {
                kind: GapKind::PodWithoutDump,
                subject: format!("{}/{}", pod.meta.namespace, pod.meta.name),
                message: format!(
                    "on {node}, no dump of its namespace ({})",
                    id.dir().display()
                ),
            });
        }
    }
    for (id, entry) in &snapshot.namespaces {
        if let Some(why) = without_object(cluster, id) {
            gaps.push(Gap {
                kind: GapKind::DumpWithoutObject,
                subject: id.to_string(),
                message: format!("{}: {why}", entry.dir.display()),
            });
        }
        let dump = entry.dump();
        if dump.is_empty() {
            gaps.push(Gap {
                kind: GapKind::EmptyDump,
                subject: id.to_string(),
                message: format!("{}: no dump files in it", entry.dir.display()),
            });
            continue;
        }
        let host_files = match id {
            NetnsId::Host { .. } => READ_IN_HOSTS,
            NetnsId::Pod { .. } => &[],
        };
        let lacking: Vec<String> = READ_IN_EVERY_NAMESPACE
            .iter()
            .chain(host_files)
            .filter(|names| {
                !names
                    .iter()
                    .any(|file| dump.state(*file) != FileState::NotCollected)
            })
            .map(|files| {
                let names: Vec<&str> = files.iter().map(|file| file.name()).collect();
                names.join(" or ")
            })
            .collect();
        if !lacking.is_empty() {
            gaps.push(Gap {
                kind: GapKind::FilesMissing,
                subject: id.to_string(),
                message: format!(
                    "{}: no {} (not collected): what needs it is insufficient_info",
                    entry.dir.display(),
                    lacking.join(", ")
                ),
            });
        }
    }
    gaps.sort_by_key(|gap| gap.kind);
    gaps
}

/// Whether a pod has a network namespace of its own to dump: scheduled,
/// not on the host's network, not finished.
fn has_own_netns(pod: &skoop::snapshot::cluster::Pod) -> bool {
    use skoop::snapshot::cluster::PodPhase;
    pod.node_name.is_some()
        && !pod.host_network
        && !matches!(pod.phase, Some(PodPhase::Succeeded | PodPhase::Failed))
}

/// Why a dump has no object to go with it, if it has none.
fn without_object(cluster: &Cluster, id: &NetnsId) -> Option<String> {
    match id {
        NetnsId::Host { node } => cluster
            .node(node)
            .is_none()
            .then(|| format!("no Node {node} in the cluster objects")),
        NetnsId::Pod {
            node,
            namespace,
            name,
        } => match cluster.pod(namespace, name) {
            None => Some(format!("no Pod {namespace}/{name} in the cluster objects")),
            Some(pod) => match pod.node_name.as_deref() {
                Some(scheduled) if scheduled == node => None,
                Some(scheduled) => Some(format!(
                    "the objects put Pod {namespace}/{name} on {scheduled}, not {node}"
                )),
                None => Some(format!(
                    "Pod {namespace}/{name} is not scheduled in the objects"
                )),
            },
        },
    }
}

fn cluster_report(cluster: &Cluster) -> ClusterReport {
    let mut counts = BTreeMap::new();
    let typed = [
        ("Node", cluster.nodes().count()),
        ("Pod", cluster.pods().count()),
        ("Service", cluster.services().count()),
        ("EndpointSlice", cluster.endpoint_slices().count()),
        ("Endpoints", cluster.endpoints().count()),
        ("ConfigMap", cluster.config_maps().count()),
        ("DaemonSet", cluster.daemon_sets().count()),
        ("NetworkPolicy", cluster.network_policies().count()),
        ("Namespace", cluster.namespaces().count()),
    ];
    for (kind, count) in typed.into_iter().filter(|(_, count)| *count > 0) {
        counts.insert(kind.to_string(), count);
    }
    for object in cluster.others() {
        *counts
            .entry(format!("{} {}", object.api_version, object.kind))
            .or_default() += 1;
    }
    ClusterReport {
        nodes: cluster
            .nodes()
            .map(|node| NodeReport {
                name: node.meta.name.clone(),
                addresses: node.addresses.iter().filter_map(|a| a.ip()).collect(),
                pod_cidrs: node.pod_cidrs.clone(),
                ready: node.ready,
            })
            .collect(),
        pods: cluster
            .pods()
            .map(|pod| PodReport {
                namespace: pod.meta.namespace.clone(),
                name: pod.meta.name.clone(),
                node: pod.node_name.clone(),
                ips: pod.ips.clone(),
                host_network: pod.host_network,
                phase: pod.phase.map(|phase| phase.as_str()),
            })
            .collect(),
        services: cluster
            .services()
            .map(|service| ServiceReport {
                namespace: service.meta.namespace.clone(),
                name: service.meta.name.clone(),
                service_type: service.service_type.as_str(),
                cluster_ips: service.cluster_ips.clone(),
                ports: service
                    .ports
                    .iter()
                    .map(|port| {
                        let mut text = format!("{}/{}", port.port, port.protocol.api_name());
                        if let Some(node_port) = port.node_port {
                            text.push_str(&format!(":{node_port}"));
                        }
                        text
                    })
                    .collect(),
            })
            .collect(),
        counts,
    }
}

/// Items separated by commas, or `-` for none.
fn join(items: &[impl std::fmt::Display]) -> String {
    if items.is_empty() {
        return "-".into();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn print_text(report: &CheckReport) {
    out!("snapshot {}", report.snapshot);
    let cluster = &report.cluster;
    let counts: Vec<String> = cluster
        .counts
        .iter()
        .map(|(kind, count)| format!("{count} {kind}"))
        .collect();
    if counts.is_empty() {
        out!("cluster: no objects");
    } else {
        out!("cluster: {}", counts.join(", "));
    }
    for node in &cluster.nodes {
        let ready = match node.ready {
            Some(true) => "Ready",
            Some(false) => "NotReady",
            None => "Ready unknown",
        };
        out!(
            "  node {}  {}  pod CIDRs {}  {ready}",
            node.name,
            join(&node.addresses),
            join(&node.pod_cidrs)
        );
    }
    for pod in &cluster.pods {
        out!(
            "  pod {}/{}  {}  on {}  {}{}",
            pod.namespace,
            pod.name,
            join(&pod.ips),
            pod.node.as_deref().unwrap_or("(unscheduled)"),
            pod.phase.unwrap_or("phase unknown"),
            if pod.host_network {
                "  hostNetwork"
            } else {
                ""
            }
        );
    }
    for service in &cluster.services {
        out!(
            "  service {}/{}  {}  {}  {}",
            service.namespace,
            service.name,
            service.service_type,
            join(&service.cluster_ips),
            service.ports.join(" ")
        );
    }
    if let Some(cache) = &report.cache {
        out!("{}: {}", cluster::cache::FILE_NAME, cache.message);
    }
    out!("namespace dumps: {}", report.namespaces.len());
    let width = report
        .namespaces
        .iter()
        .map(|n| n.id.len())
        .max()
        .unwrap_or(0);
    for ns in &report.namespaces {
        out!("  {:width$}  {}", ns.id, ns.files.join(" "));
    }
    if report.problems.is_empty() {
        out!("no problems");
    } else {
        out!("problems: {}", report.problems.len());
        for problem in report.problems {
            out!("  {problem}");
        }
    }
    if !report.warnings.is_empty() {
        out!("warnings: {}", report.warnings.len());
    }
    let kinds: BTreeSet<GapKind> = report.warnings.iter().map(|gap| gap.kind).collect();
    for &kind in &kinds {
        let of_kind: Vec<&Gap> = report.warnings.iter().filter(|g| g.kind == kind).collect();
        for gap in of_kind.iter().take(WARNINGS_SHOWN) {
            out!("  {}: {}", gap.subject, gap.message);
        }
        if of_kind.len() > WARNINGS_SHOWN {
            out!(
                "  ... {} not shown (-o json lists every one)",
                kind.counted(of_kind.len() - WARNINGS_SHOWN)
            );
        }
    }
    out!("{}", summary(report, &kinds));
}

/// How many warnings of one kind the text shows (a large cluster collected
/// for one flow lacks thousands of pods' dumps).
const WARNINGS_SHOWN: usize = 10;

/// The last line: complete or what it lacks, and how many problems.
fn summary(report: &CheckReport, kinds: &BTreeSet<GapKind>) -> String {
    let problems = match report.problems.len() {
        0 => "no problems".to_string(),
        1 => "1 problem".to_string(),
        n => format!("{n} problems"),
    };
    if kinds.is_empty() {
        return format!(
            "complete: every node and pod of the objects has its dump, with the files a diagnosis reads; {problems}"
        );
    }
    let counted: Vec<String> = kinds
        .iter()
        .map(|&kind| kind.counted(report.warnings.iter().filter(|g| g.kind == kind).count()))
        .collect();
    format!("incomplete: {}; {problems}", counted.join(", "))
}
