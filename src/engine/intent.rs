//! What the rule packs say about a walked path: the hop checks of every
//! applicable pack at every hop, and the snapshot checks about the nodes and
//! pods the path went through.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;

use super::{
    AtHop, Diagnosis, Disposition, Finding, FindingStatus, HopContext, HopId, HopStep, LinkKind,
    Severity, Step,
};
use crate::net::Family;
use crate::packs::{self, About, HopScope, HopStop, LoadedPacks, StoppingRule, Subject};
use crate::snapshot::Snapshot;
use crate::snapshot::cluster::IpOwner;

/// The packs' findings about a diagnosis: those about its paths, and those
/// about a node it crosses but not about its paths (a check made per remote
/// node, for a node no path goes to).
pub(crate) struct PackFindings {
    pub on_path: Vec<Finding>,
    pub off_path: Vec<Finding>,
}

pub(crate) fn pack_findings(
    diagnosis: &Diagnosis,
    snapshot: &Arc<Snapshot>,
    packs: &LoadedPacks,
    service: Option<&(String, String)>,
) -> PackFindings {
    let mut findings = Vec::new();
    let mut off_path = Vec::new();
    let mut seen = HashSet::new();
    let mut keep = |finding: Finding, findings: &mut Vec<Finding>| {
        if seen.insert((
            finding.id.clone(),
            finding.about.hop.clone(),
            finding.message.clone(),
        )) {
            findings.push(finding);
        }
    };
    for index in diagnosis.graph.node_indices() {
        let Some(scope) = hop_scope(diagnosis, snapshot, index) else {
            continue;
        };
        for finding in packs.evaluate_hop(&Arc::new(scope)) {
            let hop = &diagnosis.graph[index].id;
            keep(at_hop(finding, hop, index.index()), &mut findings);
        }
    }
    // Snapshot checks, about the nodes and pods on the path, the Service the
    // request goes to (at the first hop, where it starts), and the packs:
    // only those are evaluated, whatever the size of the cluster.
    // A pod a packet was sent to that no hop reached (the path stopped
    // before it) is still the question's: its own checks may name the cause
    // on its side (its veth's MTU), at the hop that stopped short of it.
    let short_of = pods_short_of(diagnosis, snapshot);
    let hop_about = |subject: &Subject| {
        let on_graph = diagnosis.graph.node_indices().find(|&index| {
            let hop = &diagnosis.graph[index];
            match subject {
                Subject::Node { name } => hop.id == HopId::node(name),
                Subject::Pod { namespace, name } => hop.id == HopId::pod(namespace, name),
                Subject::Pack { .. } => true,
                Subject::Object {
                    kind,
                    namespace,
                    name,
                } => {
                    index.index() == 0
                        && kind == "Service"
                        && service.is_some_and(|(ns, n)| ns == namespace && n == name)
                }
                Subject::Hop { .. } => false,
            }
        });
        on_graph.or_else(|| match subject {
            Subject::Pod { namespace, name } => {
                short_of.get(&(namespace.clone(), name.clone())).copied()
            }
            _ => None,
        })
    };
    // A node on the path is checked against the nodes the question involves
    // (its tunnel to each), not against every node of the cluster; what it
    // says of its way to a node no path goes to is not about the paths.
    let on_paths = path_nodes(diagnosis, snapshot);
    let mut involved: HashSet<String> = snapshot
        .namespaces
        .keys()
        .map(|id| id.node().to_owned())
        .collect();
    involved.extend(on_paths.iter().cloned());
    let subject = |subject: &Subject| match subject {
        Subject::Node { name } => involved.contains(name),
        _ => hop_about(subject).is_some(),
    };
    // The only object a diagnosis checks is the Service it asks about.
    let objects: Vec<Subject> = service
        .iter()
        .map(|(namespace, name)| Subject::Object {
            kind: "Service".to_owned(),
            namespace: namespace.clone(),
            name: name.clone(),
        })
        .collect();
    let about = About {
        subject: &subject,
        peer: &subject,
        objects: Some(&objects),
    };
    for finding in packs.evaluate_snapshot_about(snapshot, &about) {
        let Some(index) = hop_about(&finding.about.subject) else {
            continue;
        };
        let id = diagnosis.graph[index].id.clone();
        // A check about one family (`ip_family:`) is about the paths only
        // when their packets are of it.
        let of_family = finding
            .about
            .family
            .is_none_or(|family| family == Family::of(diagnosis.request.dst));
        let on_path = of_family
            && finding
                .about
                .peer
                .as_ref()
                .is_none_or(|peer| on_paths.contains(peer));
        let finding = at_hop(finding, &id, index.index());
        if on_path {
            keep(finding, &mut findings);
        } else {
            keep(finding, &mut off_path);
        }
    }
    PackFindings {
        on_path: findings,
        off_path,
    }
}

/// The nodes the paths involve: those their hops are on, and those holding
/// an address their packets were sent to (the node a packet stopped on the
/// way was headed for).
fn path_nodes(diagnosis: &Diagnosis, snapshot: &Snapshot) -> HashSet<String> {
    let cluster = &snapshot.cluster;
    let mut nodes = HashSet::new();
    for hop in diagnosis.graph.node_weights() {
        if let HopId::Node { name } = &hop.id {
            nodes.insert(name.clone());
        }
        let Some(context) = &hop.context else {
            continue;
        };
        nodes.insert(context.netns.node().to_owned());
        for packet in std::iter::once(&context.packet).chain(&context.last_packet) {
            for owner in cluster.by_ip(packet.dst) {
                let node = match owner {
                    IpOwner::Pod {
                        namespace, name, ..
                    } => cluster
                        .pod(namespace, name)
                        .and_then(|pod| pod.node_name.clone()),
                    IpOwner::Node { name } => Some(name.clone()),
                    _ => None,
                };
                nodes.extend(node);
            }
        }
    }
    nodes
}

/// The pods (not on the host network) a packet of a hop was sent to that
/// no hop of the graph is, each with the last hop a packet for it reached.
fn pods_short_of(
    diagnosis: &Diagnosis,
    snapshot: &Snapshot,
) -> HashMap<(String, String), NodeIndex> {
    let cluster = &snapshot.cluster;
    let mut pods = HashMap::new();
    for index in diagnosis.graph.node_indices() {
        let Some(context) = &diagnosis.graph[index].context else {
            continue;
        };
        for packet in std::iter::once(&context.packet).chain(&context.last_packet) {
            for owner in cluster.by_ip(packet.dst) {
                if let IpOwner::Pod {
                    namespace,
                    name,
                    host_network: false,
                } = owner
                {
                    pods.insert((namespace.clone(), name.clone()), index);
                }
            }
        }
    }
    let reached: HashSet<HopId> = diagnosis
        .graph
        .node_weights()
        .map(|hop| hop.id.clone())
        .collect();
    pods.retain(|(namespace, name), _| !reached.contains(&HopId::pod(namespace, name)));
    pods
}

/// The hop at `index` as its checks see it; `None` for a hop the packs do
/// not see (assumed, or a bridge crossed without routing).
fn hop_scope(
    diagnosis: &Diagnosis,
    snapshot: &Arc<Snapshot>,
    index: NodeIndex,
) -> Option<HopScope> {
    let hop = &diagnosis.graph[index];
    let context = hop.context.as_ref()?;
    let (first, reply) = lineage(diagnosis, index);
    let origin = diagnosis.graph[first]
        .context
        .as_ref()
        .filter(|_| first != index)
        .map(|first| first.packet.clone());
    Some(HopScope {
        snapshot: snapshot.clone(),
        netns: context.netns.clone(),
        in_iface: context.in_iface.clone(),
        out_iface: context.out_iface.clone(),
        out_packet: context.out_packet.clone(),
        forwarding: context.in_iface.is_some()
            && context.out_iface.is_some()
            && !context.redirected,
        delivers_locally: context.delivered,
        packet: context.packet.clone(),
        reply,
        origin,
        stopped: stop(context, &hop.steps).or_else(|| exit(diagnosis, index, context)),
    })
}

/// The first hop of the path `index` is on, and whether `index` is on the
/// way back (the walk crossed a local link: a socket answered).
fn lineage(diagnosis: &Diagnosis, index: NodeIndex) -> (NodeIndex, bool) {
    let graph = &diagnosis.graph;
    let (mut first, mut reply) = (index, false);
    // The walk grows a tree: each hop has at most one predecessor, added
    // before it, so no path back is longer than the graph.
    for _ in 0..graph.node_count() {
        let Some(edge) = graph.edges_directed(first, Direction::Incoming).next() else {
            break;
        };
        reply |= edge.weight().kind == LinkKind::Local;
        first = edge.source();
    }
    (first, reply)
}

/// How the path ended at a hop, from the hop's steps: the stop, and for a
/// netfilter denial the rule (or chain policy) that decided it.
fn stop(context: &HopContext, steps: &[HopStep]) -> Option<HopStop> {
    let (position, disposition, reason) =
        steps
            .iter()
            .enumerate()
            .find_map(|(position, step)| match &step.step {
                Step::Stopped {
                    disposition,
                    reason,
                } => Some((position, *disposition, reason)),
                _ => None,
            })?;
    // The step before the stop that names the deciding rule, as the walker
    // recorded it.
    let netfilter = match disposition {
        Disposition::DeniedByNetfilter => {
            steps[..position]
                .iter()
                .rev()
                .find_map(|step| match &step.step {
                    Step::Netfilter { rule, file } => Some(StoppingRule {
                        rule: rule.clone(),
                        file: file.clone(),
                    }),
                    _ => None,
                })
        }
        _ => None,
    };
    Some(HopStop {
        disposition: disposition.as_str().to_owned(),
        reason: reason.clone(),
        packet: context.last_packet.clone(),
        netfilter,
    })
}

/// A path that leaves the cluster ends (`exits_cluster`) at the last hop
/// inside it, the one whose link goes outside.
fn exit(diagnosis: &Diagnosis, index: NodeIndex, context: &HopContext) -> Option<HopStop> {
    let link = diagnosis
        .graph
        .edges_directed(index, Direction::Outgoing)
        .map(|edge| edge.weight())
        .find(|link| link.kind == LinkKind::Outside)?;
    Some(HopStop {
        disposition: Disposition::ExitsCluster.as_str().to_owned(),
        reason: format!("the packet leaves the cluster by {}", link.from_interface),
        packet: context.last_packet.clone(),
        netfilter: None,
    })
}

/// A pack's finding as the diagnosis reports it, at a hop. What a check
/// could not conclude (the snapshot cannot tell, or its script failed) is
/// never as severe as a failure: it is reported at most as a warning.
pub(crate) fn at_hop(finding: packs::Finding, hop: &HopId, hop_index: usize) -> Finding {
    let severity = match finding.status {
        FindingStatus::Failed => finding.severity,
        FindingStatus::Unknown => finding.severity.min(Severity::Info),
        FindingStatus::ScriptError => finding.severity.min(Severity::Warning),
    };
    Finding {
        severity,
        ..finding.about(AtHop {
            hop: hop.clone(),
            hop_index,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::path::Path;

    use super::*;
    use crate::engine::{Protocol, Request, diagnose};
    use crate::netstack::netfilter::RulesetKind;
    use crate::snapshot::NetnsId;
    use crate::snapshot::netns::DumpFile;
    use crate::snapshot::netns::iptables;

    /// The flannel-vxlan example with `rule` first in its chain of `node`'s
    /// filter table (the table iptables-save writes first).
    fn example_with_filter_rule(node: &str, rule: &str) -> Arc<Snapshot> {
        let (mut snapshot, problems) =
            Snapshot::load(Path::new("examples/flannel-vxlan")).expect("the example loads");
        assert!(problems.is_empty(), "{problems:?}");
        let host = NetnsId::Host { node: node.into() };
        let entry = snapshot.namespaces.get_mut(&host).expect("the node's dump");
        let text = std::fs::read_to_string(entry.dir.join(DumpFile::IptablesSave.name())).unwrap();
        let first = text.find("\n-A ").expect("a rule") + 1;
        let edited = format!("{}{rule}\n{}", &text[..first], &text[first..]);
        let (ruleset, issues) = iptables::parse(&edited);
        assert!(issues.is_empty(), "{issues:?}");
        entry.dump_mut().iptables = ruleset;
        Arc::new(snapshot)
    }

    /// A flow as the stopped packet shows it: source, destination, port, protocol.
    type Flow = (IpAddr, IpAddr, Option<u16>, Protocol);

    /// Where netfilter ends the one TCP path it ends from `default/web-0` to
    /// `to`, with `rule` added to `node`: the hop, and the flow of the packet
    /// its checks see as stopped.
    fn stopped_once(node: &str, rule: &str, to: &str) -> (String, Flow) {
        let snapshot = example_with_filter_rule(node, rule);
        let (hop, stopped) = the_one_stop(&snapshot, to);
        assert_eq!(stopped.disposition, "denied_by_netfilter");
        let packet = stopped
            .packet
            .as_ref()
            .expect("the stopped packet is known");
        let flow = (packet.src, packet.dst, packet.dport, packet.protocol);
        (hop, flow)
    }

    /// The one hop where the TCP request from `default/web-0` to `to` ends,
    /// and how its checks see it end.
    fn the_one_stop(snapshot: &Arc<Snapshot>, to: &str) -> (String, HopStop) {
        let request = Request {
            from: "default/web-0".parse().unwrap(),
            to: to.parse().unwrap(),
            port: None,
            protocol: Protocol::Tcp,
            size: None,
            via: None,
            family: None,
        };
        let (packs, problems) = LoadedPacks::load(packs::builtin_sources(), &[]);
        assert!(problems.is_empty(), "{problems:?}");
        let diagnosis = diagnose(snapshot, &request, &packs).expect("a diagnosis");
        let mut stops: Vec<(String, HopStop)> = diagnosis
            .graph
            .node_indices()
            .filter_map(|index| {
                let stopped = hop_scope(&diagnosis, snapshot, index)?.stopped?;
                Some((diagnosis.graph[index].id.to_string(), stopped))
            })
            .collect();
        assert_eq!(stops.len(), 1, "one path ends: {stops:#?}");
        stops.remove(0)
    }

    #[test]
    fn the_checks_see_the_iptables_rule_that_stopped_the_packet() {
        let snapshot = example_with_filter_rule("node-1", "-A FORWARD -d 10.244.2.3/32 -j DROP");
        let (hop, stopped) = the_one_stop(&snapshot, "default/web-3:8080");
        assert_eq!(hop, "node-1");
        let stopping = stopped.netfilter.expect("the stopping rule");
        let rule = &stopping.rule;
        assert_eq!(rule.ruleset, RulesetKind::Iptables);
        assert_eq!(
            (rule.table.as_str(), rule.chain.as_str()),
            ("filter", "FORWARD")
        );
        assert_eq!(rule.number, Some(1));
        assert_eq!(rule.text, "-A FORWARD -d 10.244.2.3/32 -j DROP");
        let line = rule.line.expect("its line");
        assert!(
            stopping
                .evidence()
                .ends_with(&format!("nodes/node-1/host/iptables-save.txt:{line}")),
            "{stopping:?}"
        );
    }

    #[test]
    fn the_checks_see_the_nftables_rule_that_stopped_the_packet() {
        // kube-proxy in nftables mode rejects a Service without endpoints.
        let (snapshot, problems) =
            Snapshot::load(Path::new("examples/flannel-vxlan-nftables-real")).expect("loads");
        assert!(problems.is_empty(), "{problems:?}");
        let (hop, stopped) = the_one_stop(&Arc::new(snapshot), "svc/default/web-nobody");
        assert_eq!(hop, "node-1");
        let stopping = stopped.netfilter.expect("the stopping rule");
        let rule = &stopping.rule;
        assert_eq!(rule.ruleset, RulesetKind::Nftables);
        assert_eq!(rule.table, "ip kube-proxy");
        assert_eq!(rule.chain, "reject-chain");
        assert_eq!(rule.handle, Some(44));
        assert_eq!(rule.number, Some(1));
        assert_eq!(rule.text, "reject with icmp port-unreachable");
        assert!(
            stopping
                .evidence()
                .ends_with("nodes/node-1/host/nft-ruleset.json:1:18247"),
            "{stopping:?}"
        );
    }

    /// `hop`, and a TCP flow from `src` to `dst:port`.
    fn at(hop: &str, src: &str, dst: &str, port: u16) -> (String, Flow) {
        let ip = |text: &str| text.parse().unwrap();
        let flow = (ip(src), ip(dst), Some(port), Protocol::Tcp);
        (hop.to_string(), flow)
    }

    #[test]
    fn a_packet_dropped_after_its_service_dnat_is_stopped_with_the_backends_address() {
        let drop = "-A FORWARD -d 10.244.2.3/32 -j DROP";
        let stop = stopped_once("node-1", drop, "svc/default/web:80");
        assert_eq!(stop, at("node-1", "10.244.1.2", "10.244.2.3", 8080));
    }

    #[test]
    fn a_packet_dropped_after_vxlan_decapsulation_is_stopped_as_the_inner_packet() {
        let drop = "-A FORWARD -d 10.244.2.2/32 -j DROP";
        let stop = stopped_once("node-2", drop, "default/web-2:8080");
        assert_eq!(stop, at("node-2", "10.244.1.2", "10.244.2.2", 8080));
    }

    #[test]
    fn a_tunnels_outer_packet_dropped_where_it_was_made_stops_the_packet_it_carries() {
        let drop = "-A OUTPUT -p udp -m udp --dport 8472 -j DROP";
        let stop = stopped_once("node-1", drop, "default/web-2:8080");
        assert_eq!(stop, at("node-1", "10.244.1.2", "10.244.2.2", 8080));
    }
}
