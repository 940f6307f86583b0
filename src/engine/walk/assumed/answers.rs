//! What stands in for a namespace the snapshot lacks: who holds an
//! address by the cluster's objects, whether a pod takes a packet, the hop
//! as the packs' hooks see it, and a hook without a usable answer as a stop.

use std::net::IpAddr;
use std::sync::Arc;

use petgraph::graph::NodeIndex;

use super::super::{Branch, Next, Packet, Stop, Walker, hop_id};
use crate::engine::Evidence;
use crate::engine::codes;
use crate::engine::hooks::{NextHop, Undecided};
use crate::engine::intent::at_hop;
use crate::packs::HopScope;
use crate::snapshot::NetnsId;
use crate::snapshot::cluster::IpOwner;

/// Where a packet from an assumed hop goes, by who holds its next hop.
pub(super) enum Holder {
    /// A pod of this hop's node, behind its veth.
    LocalPod(NetnsId),
    /// A node (reached over the underlay).
    Node(NetnsId),
    /// Something of the cluster that is not reached directly from here (a
    /// pod of another node, a service address), as text.
    Elsewhere(String),
    /// Nobody in the cluster.
    Outside,
}

impl<'s> Walker<'s> {
    /// A pod without a dump takes the packet when it is Ready and declares
    /// the port: its socket, as Kubernetes describes it; else nobody can say.
    pub(super) fn pod_delivery(
        &self,
        namespace: &str,
        name: &str,
        packet: &Packet,
    ) -> Result<String, String> {
        let Some(pod) = self.snapshot.cluster.pod(namespace, name) else {
            return Err(format!(
                "no pod {namespace}/{name} in the cluster's objects"
            ));
        };
        if pod.ready != Some(true) {
            return Err(format!(
                "pod {namespace}/{name} is not Ready: whether it answers cannot be known without its dump"
            ));
        }
        let wanted = packet.ip.protocol;
        if !wanted.has_ports() {
            return Ok("the kernel's ICMP echo responder (the pod is Ready)".into());
        }
        let declared = pod.containers.iter().find_map(|container| {
            container
                .ports
                .iter()
                .find(|p| Some(p.container_port) == packet.ip.dport && p.protocol == wanted)
                .map(|_| container.name.as_str())
        });
        let port = packet.ip.dport.map_or("-".into(), |p| p.to_string());
        match declared {
            Some(container) => Ok(format!(
                "{} port {port}, declared by container {container} (the pod is Ready)",
                packet.ip.protocol
            )),
            None => Err(format!(
                "pod {namespace}/{name} declares no containerPort {port}/{}: whether something listens there is known only from its dump (ss.txt)",
                packet.ip.protocol
            )),
        }
    }

    /// Who holds `address`, seen from node `node`: a pod of that node, a
    /// node, something else of the cluster, or nobody.
    pub(super) fn holder(&self, node: &str, address: IpAddr) -> Holder {
        if let Some((owner, _)) = self.topology.owners(address).first()
            && matches!(owner, NetnsId::Host { .. })
        {
            return Holder::Node((*owner).clone());
        }
        let cluster = &self.snapshot.cluster;
        if let Some(pod) = cluster.pod_at(address) {
            let (namespace, name) = (&pod.meta.namespace, &pod.meta.name);
            if pod.node_name.as_deref() == Some(node) {
                return Holder::LocalPod(NetnsId::Pod {
                    node: node.to_string(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                });
            }
            return Holder::Elsewhere(format!(
                "pod {namespace}/{name} on {}",
                pod.node_name.as_deref().unwrap_or("no node")
            ));
        }
        let owners = cluster.by_ip(address);
        if let Some(name) = owners.iter().find_map(|owner| match owner {
            IpOwner::Node { name } => Some(name),
            _ => None,
        }) {
            return Holder::Node(NetnsId::Host { node: name.clone() });
        }
        match owners.iter().find_map(IpOwner::service) {
            Some((namespace, name)) => {
                Holder::Elsewhere(format!("service {namespace}/{name}'s address"))
            }
            None => Holder::Outside,
        }
    }

    /// Whether an assumed namespace holds an address, by the cluster's objects.
    pub(super) fn holds(&self, ns: &NetnsId, address: IpAddr) -> bool {
        let cluster = &self.snapshot.cluster;
        match ns {
            NetnsId::Host { node } => cluster
                .by_ip(address)
                .iter()
                .any(|owner| matches!(owner, IpOwner::Node { name } if name == node)),
            NetnsId::Pod {
                namespace, name, ..
            } => cluster
                .pod_at(address)
                .is_some_and(|pod| &pod.meta.namespace == namespace && &pod.meta.name == name),
        }
    }

    /// The veth of a pod whose dump the snapshot has.
    pub(super) fn pod_veth(&self, pod: &NetnsId) -> Option<String> {
        self.topology
            .links(pod)
            .find(|link| link.link_index.is_some())
            .map(|link| link.ifname.clone())
    }

    pub(super) fn node_address(&self, node: &str) -> Option<IpAddr> {
        self.snapshot.cluster.node(node)?.internal_ip()
    }

    pub(super) fn node_ready(&self, node: &str) -> Option<bool> {
        self.snapshot.cluster.node(node)?.ready
    }

    /// The hop as the hooks see it.
    pub(in super::super) fn scope(
        &self,
        ns: &NetnsId,
        packet: &Packet,
        in_iface: Option<&str>,
    ) -> Arc<HopScope> {
        // The hooks decide where the packet goes next: no path has ended
        // here, and no hook reads the path's origin.
        Arc::new(HopScope {
            in_iface: in_iface.map(str::to_string),
            forwarding: in_iface.is_some(),
            reply: packet.reply,
            ..HopScope::new(self.shared.clone(), ns.clone(), packet.pack_packet())
        })
    }

    pub(super) fn cni_name(&self) -> String {
        self.intent
            .cni
            .map_or_else(|| "(none)".into(), |pack| pack.name.clone())
    }

    /// The CNI pack's directory, as evidence for what it intends (none
    /// without a CNI pack).
    pub(super) fn cni_evidence(&self) -> Vec<Evidence> {
        let pack = self.intent.cni.iter();
        pack.map(|pack| Evidence::file(pack.dir.clone()).noting(format!("pack {}", pack.name)))
            .collect()
    }

    /// A Service a pack's `service` hook names (`NS/NAME`), as evidence: its
    /// object's source, where the snapshot has it.
    pub(super) fn service_evidence(&self, service: &str) -> Vec<Evidence> {
        let (namespace, name) = service.split_once('/').unwrap_or(("", service));
        let object = self.snapshot.cluster.service(namespace, name);
        object
            .map(|s| s.meta.source.evidence())
            .into_iter()
            .collect()
    }

    /// The CNI pack has no opinion about the packet: nothing can be said.
    pub(super) fn no_opinion(&self, ns: &NetnsId, hook: &str, packet: &Packet) -> Stop {
        Stop::unknown(
            codes::SNAPSHOT_MISSING,
            format!(
                "the snapshot has no dump of {}, and pack {}'s {hook} has no opinion about {packet}",
                hop_id(ns),
                self.cni_name()
            ),
            self.cni_evidence(),
        )
    }

    /// A hook gave no usable answer: its pack's finding (or what was wrong
    /// with the answer) is reported and the path ends there.
    pub(in super::super) fn undecided(
        &mut self,
        hop: NodeIndex,
        branch: Branch,
        undecided: Undecided,
    ) -> Next<'s> {
        let stop = self.undecided_stop(hop, undecided);
        self.stop(hop, branch, stop)
    }

    /// The stop for a hook without a usable answer, its pack's finding
    /// reported.
    pub(in super::super) fn undecided_stop(
        &mut self,
        hop: NodeIndex,
        undecided: Undecided,
    ) -> Stop {
        let hop_name = self.graph[hop].id.clone();
        let (reason, evidence) = match undecided {
            Undecided::Pack(finding) => {
                let finding = at_hop(*finding, &hop_name, hop.index());
                let reason = format!("the CNI's intent is not known: {}", finding.message);
                let evidence = finding.evidence.clone();
                self.findings.push(finding);
                (reason, evidence)
            }
            Undecided::Malformed {
                pack,
                hook,
                problem,
            } => (
                format!("pack {pack}'s {hook} hook answered outside its contract: {problem}"),
                self.cni_evidence(),
            ),
        };
        Stop::unknown(codes::ENGINE_HOOK_UNDECIDED, reason, evidence)
    }

    /// Says once per namespace that what happens there is assumed, and on
    /// whose word.
    pub(in super::super) fn note_assumed(&mut self, ns: &NetnsId, hop: NodeIndex) {
        if !self.assumed_namespaces.insert(ns.clone()) {
            return;
        }
        let dir = ns.dir().display().to_string();
        let message = format!(
            "the snapshot has no dump of {ns} ({dir}): what happens there is pack {}'s intent and the cluster's objects, not its kernel's state",
            self.cni_name()
        );
        let mut evidence =
            vec![Evidence::file(self.snapshot.root.join(&dir)).noting("not collected")];
        evidence.extend(self.cni_evidence());
        let finding = self.finding_at(hop, codes::SNAPSHOT_ASSUMED, message, evidence);
        self.findings.push(finding);
    }
}

/// An interface the snapshot cannot name.
pub(super) fn unnamed(what: &str) -> String {
    format!("(its {what}, not in the snapshot)")
}

/// The interface holding an address, where the snapshot cannot name it.
pub(super) fn holding(address: IpAddr) -> String {
    format!("the interface holding {address}")
}

impl NextHop {
    /// The device, or what stands for it when the CNI cannot name it.
    pub(super) fn device(&self) -> String {
        match self {
            NextHop::NodeRoutes => unnamed("default route's device"),
            _ => self.dev().map_or_else(|| unnamed("device"), str::to_string),
        }
    }

    /// The gateway the CNI names, if any.
    pub(super) fn via(&self) -> Option<IpAddr> {
        match self {
            NextHop::PeerNode { via, .. } | NextHop::Device { via, .. } => *via,
            NextHop::NodeRoutes | NextHop::Encapsulated { .. } => None,
        }
    }

    /// The route step's result, in `ip route`'s words where they fit.
    pub(super) fn describe(&self) -> String {
        let device = self.device();
        match self {
            NextHop::NodeRoutes => "by the node's own routes (not in the snapshot)".into(),
            NextHop::PeerNode { node, via, .. } => match via {
                Some(via) => format!("on-link to node {node}, via {via} dev {device}"),
                None => format!("on-link to node {node}, via its InternalIP dev {device}"),
            },
            NextHop::Device { via: Some(via), .. } => format!("via {via} dev {device}"),
            NextHop::Device { via: None, .. } => format!("dev {device}"),
            NextHop::Encapsulated { .. } => format!("into the tunnel dev {device}"),
        }
    }
}
