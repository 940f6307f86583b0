//! `skoop snapshot check`: what a snapshot holds and what is wrong with it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use ipnet::IpNet;
use serde::Serialize;
use skoop::snapshot::cluster::Cluster;
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
    cluster: ClusterReport,
    namespaces: Vec<NamespaceReport>,
    problems: &'a [Problem],
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
    let (snapshot, problems) = match Snapshot::load(&args.dir) {
        Ok(loaded) => loaded,
        Err(e) => {
            err!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
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
                        let mut text = format!("{}/{}", port.port, port.protocol.as_str());
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
}
