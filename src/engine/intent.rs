//! What the rule packs say about a walked path: the hop checks of every
//! applicable pack at every hop, and the snapshot checks about the nodes and
//! pods the path went through.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;

use super::{Diagnosis, Disposition, Finding, HopContext, HopKind, HopStep, LinkKind, Step};
use crate::packs::{
    self, FindingStatus, HopScope, HopStop, LoadedPacks, Packet, Severity, StoppingRule, Subject,
    TransportProtocol,
};
use crate::snapshot::netns::iptables::{Chain, Policy, Table};
use crate::snapshot::{NetnsId, Snapshot};

pub(crate) fn pack_findings(
    diagnosis: &Diagnosis,
    snapshot: &Arc<Snapshot>,
    packs: &LoadedPacks,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut seen = HashSet::new();
    let mut keep = |finding: Finding, findings: &mut Vec<Finding>| {
        if seen.insert((
            finding.id.clone(),
            finding.hop.clone(),
            finding.message.clone(),
        )) {
            findings.push(finding);
        }
    };
    for index in diagnosis.graph.node_indices() {
        let hop = &diagnosis.graph[index];
        let Some(context) = &hop.context else {
            continue;
        };
        let (first, reply) = lineage(diagnosis, index);
        let origin = diagnosis.graph[first]
            .context
            .as_ref()
            .filter(|_| first != index)
            .map(|first| first.packet.clone());
        let scope = Arc::new(HopScope {
            snapshot: snapshot.clone(),
            netns: context.netns.clone(),
            in_iface: context.in_iface.clone(),
            out_iface: context.out_iface.clone(),
            forwarding: context.in_iface.is_some() && context.out_iface.is_some(),
            delivers_locally: context.delivered,
            packet: context.packet.clone(),
            reply,
            origin,
            stopped: stop(snapshot, context, &hop.steps)
                .or_else(|| exit(diagnosis, index, context, &hop.steps)),
        });
        for finding in packs.evaluate_hop(&scope) {
            keep(convert(finding, &hop.id, index.index()), &mut findings);
        }
    }
    // Snapshot checks, about the nodes and pods on the path (and the packs themselves).
    for finding in packs.evaluate_snapshot(snapshot) {
        let hop = diagnosis.graph.node_indices().find(|&index| {
            let hop = &diagnosis.graph[index];
            match &finding.subject {
                Subject::Node { name } => hop.kind == HopKind::Node && &hop.id == name,
                Subject::Pod { namespace, name } => {
                    hop.kind == HopKind::Pod && hop.id == format!("{namespace}/{name}")
                }
                Subject::Pack { .. } => true,
                Subject::Object { .. } | Subject::Hop { .. } => false,
            }
        });
        if let Some(index) = hop {
            let id = diagnosis.graph[index].id.clone();
            keep(convert(finding, &id, index.index()), &mut findings);
        }
    }
    findings
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
/// netfilter denial the rule (or chain policy) found in the hop's dump.
fn stop(snapshot: &Snapshot, context: &HopContext, steps: &[HopStep]) -> Option<HopStop> {
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
    let netfilter = match disposition {
        Disposition::DeniedByNetfilter => {
            steps[..position]
                .iter()
                .rev()
                .find_map(|step| match &step.step {
                    Step::Netfilter { rule, line, .. } => {
                        stopping_rule(snapshot, &context.netns, rule, *line)
                    }
                    _ => None,
                })
        }
        _ => None,
    };
    Some(HopStop {
        disposition: disposition.as_str().to_owned(),
        reason: reason.clone(),
        packet: packet_at(&context.packet, &steps[..position]),
        netfilter,
    })
}

/// A path that leaves the cluster ends (`exits_cluster`) at the last hop
/// inside it, the one whose link goes outside.
fn exit(
    diagnosis: &Diagnosis,
    index: NodeIndex,
    context: &HopContext,
    steps: &[HopStep],
) -> Option<HopStop> {
    let link = diagnosis
        .graph
        .edges_directed(index, Direction::Outgoing)
        .map(|edge| edge.weight())
        .find(|link| link.kind == LinkKind::Outside)?;
    Some(HopStop {
        disposition: Disposition::ExitsCluster.as_str().to_owned(),
        reason: format!("the packet leaves the cluster by {}", link.from_interface),
        packet: packet_at(&context.packet, steps),
        netfilter: None,
    })
}

/// The packet after `steps`, from the packet the hop received: the inner
/// packet of a decapsulation, the addresses of a NAT. The steps keep packets
/// and translations as the text the walker and netfilter write
/// (`10.244.1.2 -> 10.244.2.3:8080 tcp`, `dnat 10.96.0.100:80 ->
/// 10.244.2.3:8080`), read back here; `None` when the text does not give it.
fn packet_at(received: &Packet, steps: &[HopStep]) -> Option<Packet> {
    let mut packet = received.clone();
    for step in steps {
        match &step.step {
            Step::Decapsulated { inner, .. } => {
                let (src, rest) = inner.split_once(" -> ")?;
                let mut words = rest.split_whitespace();
                let (dst, protocol) = (words.next()?, words.next()?);
                let dst = endpoint(dst)?;
                packet.src = src.parse().ok()?;
                packet.dst = dst.0;
                packet.dst_port = dst.1;
                packet.protocol = match protocol {
                    "tcp" => TransportProtocol::Tcp,
                    "udp" => TransportProtocol::Udp,
                    "icmp" => TransportProtocol::Icmp,
                    _ => return None,
                };
            }
            Step::Translated { translation, .. } => {
                let Some((kind, change)) = translation.split_once(' ') else {
                    continue;
                };
                let after = || endpoint(change.split_once(" -> ")?.1);
                match kind {
                    "dnat" | "redirect" => {
                        let (dst, port) = after()?;
                        packet.dst = dst;
                        packet.dst_port = port.or(packet.dst_port);
                    }
                    "snat" | "masquerade" => {
                        let (src, port) = after()?;
                        packet.src = src;
                        packet.src_port = port.or(packet.src_port);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Some(packet)
}

/// `10.0.0.1`, `10.0.0.1:80` or `[fd00::1]:80`.
fn endpoint(text: &str) -> Option<(IpAddr, Option<u16>)> {
    if let Ok(ip) = text.parse() {
        return Some((ip, None));
    }
    let address: SocketAddr = text.parse().ok()?;
    Some((address.ip(), Some(address.port())))
}

/// The rule at `line` of the hop's iptables-save.txt, or (without a line)
/// the chain whose policy `text` (`:CHAIN DROP`) names.
fn stopping_rule(
    snapshot: &Snapshot,
    netns: &NetnsId,
    text: &str,
    line: Option<usize>,
) -> Option<StoppingRule> {
    let entry = snapshot.namespaces.get(netns)?;
    let ruleset = entry.dump.iptables.as_ref()?;
    let file = entry.dir.join("iptables-save.txt");
    let mut chains = ruleset
        .tables
        .iter()
        .flat_map(|table| table.chains.iter().map(move |chain| (table, chain)));
    let found = |table: Option<&Table>, chain: &Chain, number, line: Option<usize>| {
        Some(StoppingRule {
            table: table.map(|t| t.name.as_str().to_owned()),
            chain: chain.name.to_string(),
            number,
            line,
            text: text.to_owned(),
            evidence: match line {
                Some(line) => format!("{}:{line}", file.display()),
                None => file.display().to_string(),
            },
        })
    };
    if let Some(line) = line {
        return chains.find_map(|(table, chain)| {
            let rule = chain.rules.iter().find(|rule| rule.line == line)?;
            found(Some(table), chain, Some(rule.number), Some(line))
        });
    }
    let (name, policy) = text.strip_prefix(':')?.split_once(' ')?;
    let policy = match policy {
        "ACCEPT" => Policy::Accept,
        "DROP" => Policy::Drop,
        _ => return None,
    };
    let matching: Vec<_> = chains
        .filter(|(_, chain)| *chain.name == *name && chain.policy == Some(policy))
        .collect();
    let &(table, chain) = matching.first()?;
    // Several tables with that chain and policy: which one decided is unknown.
    match matching.len() {
        1 => found(Some(table), chain, None, Some(chain.line)),
        _ => found(None, chain, None, None),
    }
}

/// A pack's finding as the diagnosis reports it. What a check could not
/// conclude (the snapshot cannot tell, or its script failed) is never as
/// severe as a failure: it is reported at most as a warning.
pub(crate) fn convert(finding: packs::Finding, hop: &str, hop_index: usize) -> Finding {
    let (severity, prefix) = match finding.status {
        FindingStatus::Failed => (finding.severity, ""),
        FindingStatus::Unknown => (finding.severity.min(Severity::Info), "cannot tell: "),
        FindingStatus::ScriptError => (
            finding.severity.min(Severity::Warning),
            "check failed to run: ",
        ),
    };
    let mut evidence: Vec<String> = finding.evidence.iter().map(ToString::to_string).collect();
    if let Some(remediation) = &finding.remediation {
        evidence.push(format!("remediation: {remediation}"));
    }
    Finding {
        id: finding.id,
        severity,
        hop: hop.to_string(),
        hop_index,
        message: format!("{prefix}{}", finding.message),
        evidence: evidence.join("; "),
        expected: finding.expected,
    }
}

#[cfg(test)]
mod tests {

    /// A step the kernel model concluded (not assumed).
    fn observed(step: Step) -> HopStep {
        HopStep {
            step,
            assumed: false,
        }
    }
    use super::*;
    use crate::netstack::netfilter::{Endpoint, Translation};

    fn received() -> Packet {
        Packet {
            src: "10.244.1.2".parse().unwrap(),
            dst: "10.96.0.100".parse().unwrap(),
            protocol: TransportProtocol::Tcp,
            src_port: Some(40000),
            dst_port: Some(80),
            mark: 0,
            size: 64,
        }
    }

    fn translated(translation: Translation) -> Step {
        Step::Translated {
            hook: "PREROUTING".into(),
            table: "nat".into(),
            translation: translation.to_string(),
        }
    }

    fn endpoint(addr: &str, port: Option<u16>) -> Endpoint {
        Endpoint {
            addr: addr.parse().unwrap(),
            port,
        }
    }

    #[test]
    fn the_stopped_packet_carries_the_dnat_netfilter_wrote_before_the_stop() {
        let dnat = translated(Translation::Dnat {
            before: endpoint("10.96.0.100", Some(80)),
            after: endpoint("10.244.2.3", Some(8080)),
        });
        let packet = packet_at(&received(), &[observed(dnat)]).expect("readable");
        assert_eq!(packet.dst, "10.244.2.3".parse::<IpAddr>().unwrap());
        assert_eq!(packet.dst_port, Some(8080));
        assert_eq!(packet.src, received().src);
    }

    #[test]
    fn the_stopped_packet_after_decapsulation_is_the_inner_one() {
        let decapsulated = Step::Decapsulated {
            device: "flannel.1".into(),
            inner: "10.244.1.2 -> [fd00::3]:8080 udp".into(),
        };
        let packet = packet_at(&received(), &[observed(decapsulated)]).expect("readable");
        assert_eq!(packet.dst, "fd00::3".parse::<IpAddr>().unwrap());
        assert_eq!(packet.dst_port, Some(8080));
        assert_eq!(packet.protocol, TransportProtocol::Udp);
    }

    #[test]
    fn a_masquerade_to_an_unknown_address_leaves_the_stopped_packet_unknown() {
        let masquerade = translated(Translation::Masquerade {
            before: endpoint("10.244.1.2", None),
            after: None,
        });
        assert_eq!(packet_at(&received(), &[observed(masquerade)]), None);
        let marked = translated(Translation::Mark {
            before: 0,
            after: 0x4000,
        });
        assert_eq!(
            packet_at(&received(), &[observed(marked)]),
            Some(received())
        );
    }
}
