//! A live diagnosis's collection: which network namespaces one flow needs
//! is found by walking it. Walk the flow through what has been collected
//! so far, collect the namespaces the walk lacked, walk again; at most
//! [`MAX_ROUNDS`] times. A flow on a cluster of thousands of nodes so
//! touches the handful of nodes on its way.
//!
//! Above both the engine, which walks, and `collect`, which only collects
//! what it is asked for and never runs a diagnosis.

use std::sync::Arc;

use crate::collect::live::{LiveCollection, Wanted};
use crate::engine::{self, Diagnosis, Endpoint, Hop, HopId, Request};
use crate::packs::LoadedPacks;
use crate::snapshot::cluster::IpOwner;
use crate::snapshot::{NetnsId, Snapshot};

/// How many times a flow is walked and its missing namespaces collected.
pub const MAX_ROUNDS: usize = 6;

/// Walks `request` through what `collection` holds, collects what the walk
/// lacked, and again, until nothing new is missing or [`MAX_ROUNDS`].
pub async fn collect_for_flow(
    collection: &mut LiveCollection,
    packs: &LoadedPacks,
    request: &Request,
) -> Result<(), engine::TargetError> {
    for round in 0..MAX_ROUNDS {
        let (snapshot, _) = match Snapshot::load(collection.root()) {
            Ok(loaded) => loaded,
            Err(_) => break,
        };
        let snapshot = Arc::new(snapshot);
        // A dual-stack flow is diagnosed in both families: each walk's
        // namespaces are wanted.
        let mut wanted = Vec::new();
        for request in engine::per_family(&snapshot, request) {
            let diagnosis = engine::diagnose(&snapshot, &request, packs)?;
            wanted.extend(missing_namespaces(&snapshot, &diagnosis));
            wanted.extend(pods_behind_unknowns(&snapshot, &diagnosis));
        }
        if round == 0 {
            wanted.extend(endpoint_namespaces(&snapshot, &request.from));
            wanted.extend(endpoint_namespaces(&snapshot, &request.to));
        }
        if collection.collect(wanted).await == 0 {
            break;
        }
        collection.rounds += 1;
    }
    Ok(())
}

/// The namespaces a diagnosis went through (or stopped at) that the
/// snapshot holds no dump of.
pub fn missing_namespaces(snapshot: &Snapshot, diagnosis: &Diagnosis) -> Vec<Wanted> {
    let mut wanted = Vec::new();
    for (id, want) in diagnosis.graph.node_weights().filter_map(hop_namespace) {
        if !snapshot.namespaces.contains_key(&id) && !wanted.contains(&want) {
            wanted.push(want);
        }
    }
    wanted
}

/// Where the walk could not tell for want of a namespace it cannot name,
/// at a hop whose own dump, and its node's, were collected (a bridge port
/// whose far end is a pod not collected: an ARP answer from behind it is
/// possible), the pods of that node not yet collected: one of them is
/// behind it. A hop or node itself not collected is
/// [`missing_namespaces`]'s, and wants no more than itself.
pub fn pods_behind_unknowns(snapshot: &Snapshot, diagnosis: &Diagnosis) -> Vec<Wanted> {
    let collected = |id: &NetnsId| snapshot.namespaces.contains_key(id);
    let mut nodes: Vec<&str> = Vec::new();
    let stopped_unknown = (diagnosis.findings.iter())
        .filter(|finding| finding.id == engine::codes::SNAPSHOT_MISSING)
        .filter_map(|finding| {
            let index = petgraph::graph::NodeIndex::new(finding.about.hop_index);
            diagnosis.graph.node_weight(index)
        });
    for hop in stopped_unknown {
        let (Some(node), Some((own, _))) = (hop.node.as_deref(), hop_namespace(hop)) else {
            continue;
        };
        let host = NetnsId::Host {
            node: node.to_string(),
        };
        if collected(&own) && collected(&host) && !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    let pods = nodes.into_iter().flat_map(|node| {
        (snapshot.cluster.pods_on(node))
            .filter(|pod| !pod.host_network)
            .map(move |pod| pod_namespace(node, &pod.meta.namespace, &pod.meta.name))
    });
    pods.filter(|(id, _)| !collected(id))
        .map(|(_, want)| want)
        .collect()
}

/// A hop's namespace, and how to ask for it; `None` outside the cluster.
fn hop_namespace(hop: &Hop) -> Option<(NetnsId, Wanted)> {
    let node = hop.node.clone()?;
    match &hop.id {
        HopId::Node { .. } => Some((NetnsId::Host { node: node.clone() }, Wanted::Host { node })),
        HopId::Pod { namespace, name } => Some(pod_namespace(&node, namespace, name)),
        HopId::External(_) => None,
    }
}

/// Pod `namespace/name`'s network namespace on `node`, and how to ask for it.
fn pod_namespace(node: &str, namespace: &str, name: &str) -> (NetnsId, Wanted) {
    let id = NetnsId::Pod {
        node: node.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    };
    let want = Wanted::Pod {
        namespace: namespace.to_string(),
        name: name.to_string(),
    };
    (id, want)
}

/// The namespaces an endpoint of the request names: a pod's and its
/// node's, a node's, or those of whoever holds an address.
fn endpoint_namespaces(snapshot: &Snapshot, endpoint: &Endpoint) -> Vec<Wanted> {
    let cluster = &snapshot.cluster;
    let pod = |namespace: &str, name: &str| {
        let node = cluster.pod(namespace, name)?.node_name.clone()?;
        Some([
            Wanted::Pod {
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
            Wanted::Host { node },
        ])
    };
    match endpoint {
        Endpoint::Pod {
            namespace, name, ..
        } => pod(namespace, name).into_iter().flatten().collect(),
        Endpoint::Node { name, .. } => vec![Wanted::Host { node: name.clone() }],
        Endpoint::Ip { address, .. } => cluster
            .by_ip(*address)
            .iter()
            .flat_map(|owner| match owner {
                IpOwner::Pod {
                    namespace,
                    name,
                    host_network: false,
                } => pod(namespace, name).into_iter().flatten().collect(),
                IpOwner::Node { name } => vec![Wanted::Host { node: name.clone() }],
                _ => Vec::new(),
            })
            .collect(),
        Endpoint::Service { .. } => Vec::new(),
    }
}
