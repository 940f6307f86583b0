//! Many flows at once (`skoop matrix`): a set of sources and a set of
//! destinations chosen from a snapshot's objects, every pair diagnosed in
//! parallel exactly as `skoop diagnose` diagnoses one, each answered in
//! brief ([`FlowOut`]); and two such answers compared ([`diff`]).
//!
//! The snapshot is loaded once and shared by every worker. The rule packs
//! are not: a [`LoadedPacks`] holds Rhai's engine and compiled scripts,
//! which are not `Send` (rhai's `sync` feature is off, and turning it on
//! would put every script value behind an atomic reference count and a
//! lock). So each worker of the matrix's own rayon pool loads its own pack
//! set once, on its own thread, before taking flows (`load_packs`; about
//! 15 ms for the built-in packs), and the pack set never leaves that
//! thread.

pub mod diff;
mod twins;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::engine::{self, Diagnosis, Endpoint, Protocol, Request};
use crate::net::Family;
use crate::packs::LoadedPacks;
use crate::report::matrix::{FlowOut, TwinsOut};
use crate::snapshot::cluster::pod_reads::{self, PodRead};
use crate::snapshot::cluster::{
    LabelSelector, LabelSelectorRequirement, PodPhase, PortRef, SelectorOperator,
};
use crate::snapshot::{NetnsId, Snapshot};

/// A flow's index, its answer and what its diagnosis read of pods.
type Answered = (usize, FlowOut, Vec<PodRead>);

/// One question of a matrix: what `skoop diagnose --from FROM --to TO
/// --protocol PROTOCOL --family FAMILY` asks (a destination's port is part
/// of `to`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub from: Endpoint,
    pub to: Endpoint,
    pub protocol: Protocol,
    /// `None`: the destination's first address's family, as `diagnose`
    /// without `--family` asks one family (a saved matrix's flow from
    /// before flows carried their family).
    pub family: Option<Family>,
}

impl Flow {
    /// The request `diagnose` would make of the same arguments.
    pub fn request(&self) -> Request {
        Request {
            from: self.from.clone(),
            to: self.to.clone(),
            port: None,
            protocol: self.protocol,
            size: None,
            via: None,
            family: self.family,
        }
    }

    /// The flow a matrix's JSON names (`from`, `to`, `protocol`, `family`
    /// as written there), so that a saved matrix can be asked again of a
    /// snapshot.
    pub fn parse(
        from: &str,
        to: &str,
        protocol: &str,
        family: Option<&str>,
    ) -> Result<Flow, String> {
        let endpoint = |text: &str| {
            text.parse::<Endpoint>()
                .map_err(|e: engine::TargetError| e.to_string())
        };
        let protocol = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp, Protocol::Icmp]
            .into_iter()
            .find(|p| p.as_str() == protocol)
            .ok_or_else(|| format!("{protocol:?} is not a protocol (tcp, udp, sctp, icmp)"))?;
        let family = family
            .map(|name| {
                Family::from_name(&name.to_ascii_lowercase())
                    .ok_or_else(|| format!("{name:?} is not an address family (IPv4, IPv6)"))
            })
            .transpose()?;
        Ok(Flow {
            from: endpoint(from)?,
            to: endpoint(to)?,
            protocol,
            family,
        })
    }
}

/// Pods by namespace and labels: `NAMESPACE`, `NAMESPACE/LABELS` or
/// `*/LABELS` (every namespace), where LABELS is a comma-separated list of
/// `key=value`, `key!=value`, `key` (has the label) and `!key` (has not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSelector {
    /// `None`: every namespace.
    pub namespace: Option<String>,
    pub labels: LabelSelector,
}

impl FromStr for PodSelector {
    type Err = String;

    fn from_str(text: &str) -> Result<PodSelector, String> {
        let (namespace, labels) = text.split_once('/').unwrap_or((text, ""));
        if namespace.is_empty() {
            return Err(format!(
                "{text:?}: no namespace (write NAMESPACE[/LABELS], or */LABELS for every namespace)"
            ));
        }
        let mut selector = LabelSelector::default();
        for term in labels.split(',').filter(|term| !term.is_empty()) {
            let requirement = |key: &str, operator, values: &[&str]| {
                let values = values.iter().map(|v| (*v).to_owned()).collect();
                LabelSelectorRequirement::new(key.trim().to_owned(), operator, values)
                    .map_err(|e| format!("{text:?}: {term:?}: {e}"))
            };
            if let Some((key, value)) = term.split_once("!=") {
                let requirement = requirement(key, SelectorOperator::NotIn, &[value.trim()])?;
                selector.match_expressions.push(requirement);
            } else if let Some((key, value)) = term.split_once('=') {
                let value = value.strip_prefix('=').unwrap_or(value);
                selector
                    .match_labels
                    .insert(key.trim().to_owned(), value.trim().to_owned());
            } else if let Some(key) = term.strip_prefix('!') {
                let requirement = requirement(key, SelectorOperator::DoesNotExist, &[])?;
                selector.match_expressions.push(requirement);
            } else {
                let requirement = requirement(term, SelectorOperator::Exists, &[])?;
                selector.match_expressions.push(requirement);
            }
        }
        let bad_key = selector
            .match_labels
            .keys()
            .chain(selector.match_expressions.iter().map(|r| &r.key))
            .find(|key| key.is_empty());
        if bad_key.is_some() {
            return Err(format!("{text:?}: a label term without a key"));
        }
        Ok(PodSelector {
            namespace: (namespace != "*").then(|| namespace.to_owned()),
            labels: selector,
        })
    }
}

/// Where a matrix's flows start. Each source is taken once, in the order
/// of the fields (then by name), however many ways select it.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// Named as `--from` names them.
    pub endpoints: Vec<Endpoint>,
    /// Every node's own namespace.
    pub nodes: bool,
    pub pods: Vec<PodSelector>,
    /// On each node, its first pod (by namespace and name) that runs with
    /// an address of its own (not in the node's namespace).
    pub pod_per_node: bool,
    /// Of the nodes and pods selected, only those whose namespace the
    /// snapshot holds a dump of.
    pub dumped_only: bool,
    /// Of the nodes and pods selected, only those on a node whose own
    /// namespace the snapshot holds a dump of (a pod's own may be missing:
    /// its hop is then the CNI pack's intent).
    pub on_dumped_nodes: bool,
}

/// Where a matrix's flows go, each source to every destination.
#[derive(Debug, Clone)]
pub struct Destinations {
    /// Named as `--to` names them (with `port` where they name none).
    pub endpoints: Vec<Endpoint>,
    /// Every port of every Service with a ClusterIP, with its protocol.
    pub services: bool,
    /// Pods: each port a container declares, with its protocol (or `port`
    /// over `protocol` when given); a pod declaring none is pinged.
    pub pods: Vec<PodSelector>,
    /// Every node: on `port` over `protocol` when given, else pinged.
    pub nodes: bool,
    pub port: Option<u16>,
    pub protocol: Protocol,
    /// Only flows of this family; `None`: each pair in every family both
    /// ends have, as `diagnose` asks a dual-stack destination.
    pub family: Option<Family>,
}

/// Every flow of the matrix: each source to each destination, in order,
/// each pair once per family it is asked in (see [`engine::per_family`]).
/// A destination that is its own source is kept: `diagnose` answers it.
pub fn flows(snapshot: &Snapshot, sources: &Sources, destinations: &Destinations) -> Vec<Flow> {
    let from = source_endpoints(snapshot, sources);
    let to = destination_endpoints(snapshot, destinations);
    from.iter()
        .flat_map(|source| {
            to.iter().flat_map(|(to, protocol)| {
                let flow = Flow {
                    from: source.clone(),
                    to: to.clone(),
                    protocol: *protocol,
                    family: destinations.family,
                };
                match flow.family {
                    Some(_) => vec![flow],
                    None => engine::per_family(snapshot, &flow.request())
                        .into_iter()
                        .map(|request| Flow {
                            family: request.family,
                            ..flow.clone()
                        })
                        .collect(),
                }
            })
        })
        .collect()
}

/// A pod as an endpoint, where it has an address of its own on a node.
fn pod_endpoint(pod: &crate::snapshot::cluster::Pod) -> Option<(Endpoint, NetnsId)> {
    let node = pod.node_name.as_ref()?;
    if pod.ips.is_empty() || pod.host_network {
        return None;
    }
    let netns = NetnsId::Pod {
        node: node.clone(),
        namespace: pod.meta.namespace.clone(),
        name: pod.meta.name.clone(),
    };
    let endpoint = Endpoint::Pod {
        namespace: pod.meta.namespace.clone(),
        name: pod.meta.name.clone(),
        port: None,
    };
    Some((endpoint, netns))
}

/// The pods `selector` picks, by namespace and name.
fn selected_pods<'s>(
    snapshot: &'s Snapshot,
    selector: &'s PodSelector,
) -> impl Iterator<Item = &'s crate::snapshot::cluster::Pod> {
    snapshot.cluster.pods().filter(move |pod| {
        selector
            .namespace
            .as_deref()
            .is_none_or(|ns| ns == pod.meta.namespace)
            && selector.labels.matches(&pod.meta.labels)
    })
}

fn source_endpoints(snapshot: &Snapshot, sources: &Sources) -> Vec<Endpoint> {
    let cluster = &snapshot.cluster;
    let dumped = |netns: &NetnsId| {
        let host = NetnsId::Host {
            node: netns.node().to_owned(),
        };
        (!sources.dumped_only || snapshot.namespaces.contains_key(netns))
            && (!sources.on_dumped_nodes || snapshot.namespaces.contains_key(&host))
    };
    let mut chosen: Vec<Endpoint> = sources.endpoints.clone();
    let mut nodes: Vec<&str> = cluster.nodes().map(|n| n.meta.name.as_str()).collect();
    nodes.sort_unstable();
    if sources.nodes {
        chosen.extend(
            nodes
                .iter()
                .filter(|node| {
                    dumped(&NetnsId::Host {
                        node: (**node).to_owned(),
                    })
                })
                .map(|node| Endpoint::Node {
                    name: (*node).to_owned(),
                    port: None,
                }),
        );
    }
    for selector in &sources.pods {
        let mut pods: Vec<(Endpoint, NetnsId)> = selected_pods(snapshot, selector)
            .filter_map(pod_endpoint)
            .filter(|(_, netns)| dumped(netns))
            .collect();
        pods.sort_by(|a, b| {
            a.1.cmp(&b.1)
                .then_with(|| a.0.to_string().cmp(&b.0.to_string()))
        });
        chosen.extend(pods.into_iter().map(|(endpoint, _)| endpoint));
    }
    if sources.pod_per_node {
        for node in &nodes {
            let mut pods: Vec<(Endpoint, NetnsId)> = cluster
                .pods_on(node)
                .filter(|pod| pod.phase == Some(PodPhase::Running))
                .filter_map(pod_endpoint)
                .filter(|(_, netns)| dumped(netns))
                .collect();
            pods.sort_by(|a, b| a.1.cmp(&b.1));
            chosen.extend(pods.into_iter().next().map(|(endpoint, _)| endpoint));
        }
    }
    let mut seen = BTreeSet::new();
    chosen.retain(|endpoint| seen.insert(endpoint.to_string()));
    chosen
}

fn destination_endpoints(
    snapshot: &Snapshot,
    destinations: &Destinations,
) -> Vec<(Endpoint, Protocol)> {
    let cluster = &snapshot.cluster;
    let given = |protocol: Protocol| match destinations.port {
        Some(_) => (destinations.port, protocol),
        None => (None, Protocol::Icmp),
    };
    let mut chosen: Vec<(Endpoint, Protocol)> = destinations
        .endpoints
        .iter()
        .map(|endpoint| {
            (
                with_port(endpoint, destinations.port),
                destinations.protocol,
            )
        })
        .collect();
    if destinations.services {
        let mut services: Vec<_> = cluster
            .services()
            .filter(|s| !s.headless && !s.cluster_ips.is_empty())
            .collect();
        services.sort_by(|a, b| {
            (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name))
        });
        for service in services {
            for port in &service.ports {
                let endpoint = Endpoint::Service {
                    namespace: service.meta.namespace.clone(),
                    name: service.meta.name.clone(),
                    port: Some(PortRef::Number(port.port)),
                };
                chosen.push((endpoint, port.protocol));
            }
        }
    }
    for selector in &destinations.pods {
        let mut pods: Vec<_> = selected_pods(snapshot, selector)
            .filter_map(|pod| Some((pod, pod_endpoint(pod)?)))
            .collect();
        pods.sort_by(|a, b| (a.1).1.cmp(&(b.1).1));
        for (pod, (endpoint, _)) in pods {
            let declared: Vec<(Option<u16>, Protocol)> = match destinations.port {
                Some(_) => vec![given(destinations.protocol)],
                None => pod
                    .containers
                    .iter()
                    .flat_map(|c| &c.ports)
                    .map(|p| (Some(p.container_port), p.protocol))
                    .collect(),
            };
            let ports = if declared.is_empty() {
                vec![given(destinations.protocol)]
            } else {
                declared
            };
            for (port, protocol) in ports {
                chosen.push((with_port(&endpoint, port), protocol));
            }
        }
    }
    if destinations.nodes {
        let mut nodes: Vec<&str> = cluster.nodes().map(|n| n.meta.name.as_str()).collect();
        nodes.sort_unstable();
        for node in nodes {
            let (port, protocol) = given(destinations.protocol);
            let endpoint = Endpoint::Node {
                name: node.to_owned(),
                port,
            };
            chosen.push((endpoint, protocol));
        }
    }
    let mut seen = BTreeSet::new();
    chosen.retain(|(endpoint, protocol)| seen.insert((endpoint.to_string(), protocol.as_str())));
    chosen
}

/// `endpoint` with `port` where it names none.
fn with_port(endpoint: &Endpoint, port: Option<u16>) -> Endpoint {
    let mut endpoint = endpoint.clone();
    let Some(given) = port else { return endpoint };
    match &mut endpoint {
        Endpoint::Pod { port, .. } | Endpoint::Node { port, .. } | Endpoint::Ip { port, .. } => {
            port.get_or_insert(given);
        }
        Endpoint::Service { port, .. } => {
            port.get_or_insert(PortRef::Number(given));
        }
    }
    endpoint
}

/// Why a matrix could not be evaluated.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    #[error("cannot start {threads} worker threads: {source}")]
    Threads {
        threads: usize,
        source: rayon::ThreadPoolBuildError,
    },
    #[error("a worker could not load the rule packs: {0}")]
    Packs(String),
}

/// Each worker's stack: the main thread's usual 8 MiB, which `diagnose`
/// runs on (a rayon thread's default is 2 MiB).
const WORKER_STACK: usize = 8 << 20;

/// What sees each flow's whole diagnosis, with the flow's index, on the
/// worker that made it.
pub type EachDiagnosis<'a> = &'a (dyn Fn(usize, &Diagnosis) + Sync);

/// A matrix's answers: one per flow, in the order of the flows, and the
/// twins whose answers were made once for all of them.
#[derive(Debug)]
pub struct Answers {
    pub flows: Vec<FlowOut>,
    pub twins: Vec<TwinsOut>,
}

/// Answers every flow on `threads` worker threads, each with its own pack
/// set from `load_packs` (see the module's documentation), in the order of
/// `flows` whichever worker took it. Without `each`, a source's twins
/// (`twins.rs`) are answered by its diagnoses, renamed; with it, every flow
/// is diagnosed, and `each` sees its whole diagnosis (to write its report,
/// or send it), on the worker that made it, in no particular order.
pub fn evaluate(
    snapshot: &Arc<Snapshot>,
    flows: &[Flow],
    threads: usize,
    load_packs: &(dyn Fn() -> Result<LoadedPacks, String> + Sync),
    each: Option<EachDiagnosis>,
) -> Result<Answers, MatrixError> {
    let threads = threads.clamp(1, flows.len().max(1));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .stack_size(WORKER_STACK)
        .thread_name(|i| format!("skoop-matrix-{i}"))
        .build()
        .map_err(|source| MatrixError::Threads { threads, source })?;
    let plan = match each {
        Some(_) => twins::Plan::default(),
        None => twins::plan(
            snapshot,
            flows,
            load_packs().map_err(MatrixError::Packs)?.texts(),
        ),
    };
    let stand_in = |i: usize| plan.stand_in.get(i).copied().flatten();
    let each = each.unwrap_or(&|_, _| {});
    let mut slots: Vec<Option<FlowOut>> = vec![None; flows.len()];
    let first: Vec<usize> = (0..flows.len())
        .filter(|&i| stand_in(i).is_none())
        .collect();
    // What each diagnosis read of pods beyond their identity, where a
    // twin's answer may stand for another's.
    let recording = !plan.classes.is_empty();
    let mut reads: Vec<Vec<PodRead>> = vec![Vec::new(); flows.len()];
    for (index, answer, read) in
        diagnose_each(&pool, snapshot, flows, &first, load_packs, each, recording)?
    {
        slots[index] = Some(answer);
        reads[index] = read;
    }
    // A twin's answer that names its source (a finding at its hop), or whose
    // diagnosis read what tells the two apart, stands for no other: those
    // flows are diagnosed on their own.
    let mut alone = Vec::new();
    let mut stood_for: HashMap<String, usize> = HashMap::new();
    let mut stood_in: HashSet<String> = HashSet::new();
    for index in 0..flows.len() {
        let Some(twin) = stand_in(index) else {
            continue;
        };
        let answer = slots[twin].as_ref();
        let readdressed = answer.and_then(|answer| {
            plan.readdress(answer, &reads[twin], &flows[index], &snapshot.cluster)
        });
        match readdressed {
            Some(answer) => {
                *stood_for.entry(flows[twin].from.to_string()).or_default() += 1;
                stood_in.insert(answer.from.clone());
                slots[index] = Some(answer);
            }
            None => alone.push(index),
        }
    }
    for (index, answer, _) in
        diagnose_each(&pool, snapshot, flows, &alone, load_packs, each, false)?
    {
        slots[index] = Some(answer);
    }
    let twins = plan
        .classes
        .iter()
        .filter_map(|class| {
            let flows = *stood_for.get(&class[0])?;
            // Those none of whose flows it answered are not its twins.
            let sources = class
                .iter()
                .enumerate()
                .filter(|(i, source)| *i == 0 || stood_in.contains(*source))
                .map(|(_, source)| source.clone())
                .collect();
            Some(TwinsOut { sources, flows })
        })
        .collect();
    // Every flow was diagnosed, or answered by the twin it stands in for.
    Ok(Answers {
        flows: slots.into_iter().flatten().collect(),
        twins,
    })
}

/// Diagnoses the flows of `indices` on `pool`'s workers, each loading its
/// packs first; each answer with its flow's index and, `recording`, what
/// its diagnosis read of pods beyond their identity (`pod_reads`).
fn diagnose_each(
    pool: &rayon::ThreadPool,
    snapshot: &Arc<Snapshot>,
    flows: &[Flow],
    indices: &[usize],
    load_packs: &(dyn Fn() -> Result<LoadedPacks, String> + Sync),
    each: EachDiagnosis,
    recording: bool,
) -> Result<Vec<Answered>, MatrixError> {
    if indices.is_empty() {
        return Ok(Vec::new());
    }
    // Workers take the next flow as they finish one, so that a slow flow
    // (a service of many backends) holds up only its own worker.
    let next = AtomicUsize::new(0);
    let answered: Vec<Result<Vec<Answered>, String>> = pool.broadcast(|_| {
        let packs = load_packs()?;
        let mut answered = Vec::new();
        while let Some(&index) = indices.get(next.fetch_add(1, Ordering::Relaxed)) {
            let flow = &flows[index];
            let (from, to) = (flow.from.to_string(), flow.to.to_string());
            // Each flow's scripts have the time they would have in
            // `diagnose` (--max-script-time), not what the flows before it
            // on this worker left of it.
            crate::packs::start_run();
            let diagnose = || match engine::diagnose(snapshot, &flow.request(), &packs) {
                Ok(diagnosis) => {
                    each(index, &diagnosis);
                    FlowOut::new(from, to, flow.protocol, &diagnosis)
                }
                Err(e) => FlowOut::refused(from, to, flow.protocol, flow.family, e.to_string()),
            };
            let (answer, read) = match recording {
                true => pod_reads::capture(diagnose),
                false => (diagnose(), Vec::new()),
            };
            answered.push((index, answer, read));
        }
        Ok(answered)
    });
    let mut all = Vec::with_capacity(indices.len());
    for worker in answered {
        all.extend(worker.map_err(MatrixError::Packs)?);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_selector_reads_namespace_and_label_terms() {
        let selector: PodSelector = "default/app=web,tier!=db,canary,!legacy".parse().unwrap();
        assert_eq!(selector.namespace.as_deref(), Some("default"));
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(
            selector
                .labels
                .matches(&labels(&[("app", "web"), ("canary", "")]))
        );
        assert!(!selector.labels.matches(&labels(&[
            ("app", "web"),
            ("canary", ""),
            ("tier", "db")
        ])));
        assert!(!selector.labels.matches(&labels(&[
            ("app", "web"),
            ("canary", ""),
            ("legacy", "1")
        ])));
        assert!(!selector.labels.matches(&labels(&[("app", "web")])));
        let every: PodSelector = "*/app==web".parse().unwrap();
        assert_eq!(every.namespace, None);
        assert_eq!(every.labels.match_labels, labels(&[("app", "web")]));
    }

    #[test]
    fn pod_selector_without_namespace_or_key_is_an_error() {
        assert!(
            "/app=web"
                .parse::<PodSelector>()
                .unwrap_err()
                .contains("no namespace")
        );
        assert!(
            "default/=web"
                .parse::<PodSelector>()
                .unwrap_err()
                .contains("without a key")
        );
    }

    #[test]
    fn flow_parse_reads_what_a_matrix_writes() {
        let flow = Flow::parse("default/web-0", "svc/default/web:80", "udp", None).unwrap();
        assert_eq!(flow.to.to_string(), "svc/default/web:80");
        assert_eq!(flow.protocol, Protocol::Udp);
        assert_eq!(flow.family, None);
        let flow = Flow::parse("default/web-0", "default/web-3", "tcp", Some("IPv6")).unwrap();
        assert_eq!(flow.family, Some(Family::Ipv6));
        assert!(
            Flow::parse("default/web-0", "node/n", "gre", None)
                .unwrap_err()
                .contains("gre")
        );
        assert!(
            Flow::parse("default/web-0", "node/n", "tcp", Some("inet6"))
                .unwrap_err()
                .contains("inet6")
        );
    }
}
