//! Namespaces the snapshot lacks as a whole (a node or pod whose dump was
//! not collected), stepped over with the CNI pack's intent.
//!
//! The cluster's objects say who holds an address (a pod's IP, a node's
//! InternalIP); the packs' walker hooks say what the CNI does with a packet
//! there: a service proxy's translation (`service`), where it goes next
//! (`next_hop`), whether it is tunnelled (`encapsulation`) or masqueraded
//! (`masquerade`), and the pod's veth (`pod_interface`). Every step of such a
//! hop is marked assumed. What neither can tell — a hook with no opinion, a
//! listener the pod does not declare, a pod that is not Ready — ends the
//! path as `insufficient_info`, as a missing dump always did.
//!
//! A namespace whose dump is there but incomplete is not stepped over: the
//! hooks describe what the CNI intends, and the half that was collected may
//! hold exactly the fault that differs from it.

use std::net::IpAddr;

use petgraph::graph::NodeIndex;

mod answers;

use super::{
    Branch, Crossing, Encapsulation as Encapsulated, Flow, Next, Packet, Place, Stop, TunnelHeader,
    Tunnelled, UndoPhase, Walker, Wanted, hop_id,
};
use crate::engine::codes;
use crate::engine::hooks::{Attachment, Encapsulation, NextHop, PodInterface, Undecided};
use crate::engine::target::Protocol;
use crate::engine::{Disposition, HopStep, LinkKind, Step};
use crate::net::Family;
use crate::netstack::netfilter::{Endpoint, Translation};
use crate::netstack::routing::{FlowKey, LookupOutcome};
use crate::packs::PodRef;
use crate::snapshot::NetnsId;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::link::LinkKind as DeviceKind;
use answers::{Holder, holding, unnamed};

impl<'s> Walker<'s> {
    /// Whether a namespace is stepped over with the CNI's intent: the
    /// snapshot lacks it as a whole and a CNI pack applies.
    pub(super) fn can_assume(&self, ns: &NetnsId) -> bool {
        !self.snapshot.namespaces.contains_key(ns) && self.intent.cni.is_some()
    }

    /// A pod of node `ns` holding `address` whose dump the snapshot lacks
    /// (whether or not a CNI pack can stand in for it).
    pub(super) fn missing_local_pod(&self, ns: &NetnsId, address: IpAddr) -> Option<NetnsId> {
        let NetnsId::Host { node } = ns else {
            return None;
        };
        match self.holder(node, address) {
            Holder::LocalPod(pod) if !self.snapshot.namespaces.contains_key(&pod) => Some(pod),
            _ => None,
        }
    }

    /// Node `ns` sends the packet by `dev` (`None` when the CNI cannot name
    /// it) to one of its pods, through the veth the CNI gives the pod: a port
    /// of its bridge when the CNI bridges pods, the veth itself when it
    /// routes to it (`pod_interface`'s `kind`; without one, a port of `dev`
    /// when `dev` is a bridge). The step is the CNI's intent even in a real
    /// node's hop, whose dump does not show the port. A frame bridged from
    /// another port (`in_port`) goes through the node's netfilter where
    /// `bridge-nf-call-iptables` says so, as between two ports the dump shows.
    pub(super) fn send_to_local_pod(
        &mut self,
        place: &Place,
        dev: Option<&str>,
        pod: &NetnsId,
        in_port: Option<&str>,
        mut flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let interface = match self.pod_interface(ns, &flow.packet, pod) {
            Ok(interface) => interface,
            Err(undecided) => return self.undecided(hop, flow.branch, undecided),
        };
        let (host_veth, bridge) = match self.pod_attachment(ns, dev, pod, &interface) {
            Ok(attached) => attached,
            Err(stop) => return self.stop(hop, flow.branch, stop),
        };
        let kind = match &bridge {
            Some(bridge) => {
                self.assumed_step(
                    hop,
                    Step::Bridged {
                        bridge: bridge.clone(),
                        port: host_veth.clone(),
                    },
                );
                LinkKind::BridgePort
            }
            None => LinkKind::Veth,
        };
        if let Some(in_port) = in_port
            && let Some(bridge) = &bridge
            && let Some(stop) = self.bridge_netfilter(place, bridge, in_port, &host_veth, &mut flow)
        {
            return self.stop(hop, flow.branch, stop);
        }
        let pod_dev = interface
            .pod_dev
            .or_else(|| self.pod_veth(pod))
            .unwrap_or_else(|| unnamed("interface"));
        let crossing = Crossing {
            kind,
            from_interface: &host_veth,
            to: pod,
            interface: &pod_dev,
        };
        self.arrive(hop, crossing, flow)
    }

    /// The node's end of `pod`'s veth and the bridge it is a port of (`None`
    /// when the node routes to the veth itself), as the CNI attaches it and
    /// as the node sends by `dev`. Where the two disagree, what is behind
    /// `dev` is not in the snapshot.
    fn pod_attachment(
        &self,
        ns: &NetnsId,
        dev: Option<&str>,
        pod: &NetnsId,
        interface: &PodInterface,
    ) -> Result<(String, Option<String>), Stop> {
        // What the node's dump shows `dev` to be, where it has it.
        let shown = dev.and_then(|dev| self.topology.link(ns, dev));
        let is_bridge = shown.map(|d| matches!(d.kind(), Some(DeviceKind::Bridge(_))));
        let disagree = |what: String| Stop {
            disposition: Disposition::InsufficientInfo,
            id: codes::SNAPSHOT_MISSING,
            reason: format!(
                "{} sends the packet for pod {} by {}, but pack {} {what}, and what is behind it is not in the snapshot",
                hop_id(ns),
                hop_id(pod),
                dev.map_or_else(|| unnamed("device"), str::to_string),
                self.cni_name()
            ),
            evidence: vec![self.file(ns, DumpFile::IpLink)],
        };
        match &interface.attachment {
            Some(Attachment::Routed) => {
                if is_bridge == Some(true) {
                    return Err(disagree(
                        "routes to the pod's veth (no bridge), and that is a bridge".into(),
                    ));
                }
                match (&interface.host_veth, dev) {
                    (Some(veth), Some(dev)) if veth != dev => {
                        Err(disagree(format!("gives the pod the veth {veth}")))
                    }
                    (Some(veth), _) => Ok((veth.clone(), None)),
                    (None, Some(dev)) => Ok((dev.to_string(), None)),
                    (None, None) => Ok((unnamed("veth"), None)),
                }
            }
            Some(Attachment::Bridged { bridge }) => {
                if dev.is_some_and(|dev| dev != bridge) || is_bridge == Some(false) {
                    return Err(disagree(format!("bridges the pod on {bridge}")));
                }
                let port = interface.host_veth.clone();
                Ok((
                    port.unwrap_or_else(|| unnamed("veth")),
                    Some(bridge.clone()),
                ))
            }
            None => {
                let dev = dev.map_or_else(|| unnamed("device"), str::to_string);
                let host_veth = interface
                    .host_veth
                    .clone()
                    .unwrap_or_else(|| unnamed("veth"));
                // A device the node's dump shows as something other than a
                // bridge is the veth itself: the CNI must name it so.
                if is_bridge == Some(false) && host_veth != dev {
                    return Err(disagree(format!("gives the pod the veth {host_veth}")));
                }
                let bridge = (host_veth != dev).then_some(dev);
                Ok((host_veth, bridge))
            }
        }
    }

    /// The veth pair the CNI gives `pod`, asked at its node `ns`.
    fn pod_interface(
        &self,
        ns: &NetnsId,
        packet: &Packet,
        pod: &NetnsId,
    ) -> Result<PodInterface, Undecided> {
        let NetnsId::Pod {
            namespace, name, ..
        } = pod
        else {
            return Ok(PodInterface::default());
        };
        match PodRef::new(self.shared, namespace, name) {
            Some(pod_ref) => self
                .intent
                .pod_interface(&self.scope(ns, packet, None), pod_ref),
            None => Ok(PodInterface::default()),
        }
    }

    /// Records a step concluded from the CNI's intent in a real hop.
    fn assumed_step(&mut self, hop: NodeIndex, step: Step) {
        self.graph[hop].steps.push(HopStep {
            step,
            assumed: true,
        });
    }

    /// The packet is in a namespace the snapshot lacks, arrived on
    /// `in_iface` or generated there.
    pub(super) fn process_assumed(
        &mut self,
        place: &Place,
        flow: Flow,
        in_iface: Option<&str>,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow { packet, branch } = flow;
        // A service proxy translates in PREROUTING (OUTPUT for the node's
        // own packets), before the node takes a packet for itself (NodePorts).
        if matches!(ns, NetnsId::Host { .. }) && !branch.reply && packet.tunnel.is_none() {
            let scope = self.scope(ns, &packet, in_iface);
            match self.intent.service(&scope) {
                Err(undecided) => return self.undecided(hop, branch, undecided),
                Ok(Some(translation)) => {
                    let before = Endpoint {
                        addr: packet.ip.dst,
                        port: packet.ip.dport,
                    };
                    if translation.backends.is_empty() {
                        let stop = Stop {
                            disposition: Disposition::NoListener,
                            id: codes::KUBERNETES_SERVICE_NO_BACKEND,
                            reason: format!(
                                "pack {}: service {} has no backend for {before}: {}",
                                translation.pack, translation.service, translation.why
                            ),
                            evidence: self.service_evidence(&translation.service),
                        };
                        return self.stop(hop, branch, stop);
                    }
                    let share = 1.0 / translation.backends.len() as f64;
                    let in_iface = in_iface.map(str::to_string);
                    let forks = self.fork(hop, &branch, translation.backends.len());
                    let mut ways = Vec::with_capacity(forks.len());
                    for (backend, (hop, mut branch)) in translation.backends.iter().zip(forks) {
                        let after = Endpoint {
                            addr: backend.ip,
                            port: Some(backend.port),
                        };
                        let dnat = Translation::Dnat { before, after };
                        self.step(
                            hop,
                            Step::Translated {
                                hook: "PREROUTING".into(),
                                table: "nat".into(),
                                translation: format!(
                                    "{dnat} (service {}, pack {}: {})",
                                    translation.service, translation.pack, translation.why
                                ),
                            },
                        );
                        branch.probability *= share;
                        branch.nat.push((ns.clone(), dnat));
                        let mut packet = packet.clone();
                        packet.ip.dst = backend.ip;
                        packet.ip.dport = Some(backend.port);
                        if backend.masquerade {
                            let by = format!(
                                "service {}, pack {}",
                                translation.service, translation.pack
                            );
                            if let Err(stop) =
                                self.masquerade_to_node(ns, hop, &mut packet, &mut branch, &by)
                            {
                                ways.push(self.stop(hop, branch, stop));
                                continue;
                            }
                        }
                        let place = Place::new(ns, hop);
                        let flow = Flow { packet, branch };
                        ways.push(self.deliver_or_route(&place, flow, in_iface.as_deref()));
                    }
                    return Next::Fork(ways);
                }
                Ok(None) => {}
            }
        }
        self.deliver_or_route(place, Flow { packet, branch }, in_iface)
    }

    /// A packet received for an address of the namespace is delivered there;
    /// any other goes where the CNI sends it.
    fn deliver_or_route(&mut self, place: &Place, flow: Flow, in_iface: Option<&str>) -> Next<'s> {
        if let Some(iif) = in_iface
            && self.holds(&place.ns, flow.packet.ip.dst)
        {
            return self.deliver(place, flow, iif);
        }
        self.route_assumed(place, flow, in_iface)
    }

    /// Where the CNI sends the packet from an assumed hop, and how.
    fn route_assumed(&mut self, place: &Place, flow: Flow, in_iface: Option<&str>) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow {
            mut packet,
            mut branch,
        } = flow;
        if packet.src().is_none() {
            let stop = self.missing(
                ns,
                Wanted::Other("the namespace's dump"),
                "choose a source address",
            );
            return self.stop(hop, branch, stop);
        }
        if in_iface.is_none() {
            self.sent(ns, hop, &packet, &mut branch);
        }
        if branch.reply {
            self.undo_nat(ns, hop, &mut packet, &branch, UndoPhase::AfterRouting);
        }
        let scope = self.scope(ns, &packet, in_iface);
        let next = match self.intent.next_hop(&scope) {
            Ok(Some(next)) => next,
            Ok(None) => {
                let stop = self.no_opinion(ns, "next_hop", &packet);
                return self.stop(hop, branch, stop);
            }
            Err(undecided) => return self.undecided(hop, branch, undecided),
        };
        self.step(
            hop,
            Step::Route {
                rule: String::new(),
                route: format!("the next_hop of pack {}", self.cni_name()),
                result: next.describe(),
            },
        );
        match self.intent.encapsulation(&scope) {
            Err(undecided) => return self.undecided(hop, branch, undecided),
            Ok(Some(encapsulation)) => {
                return self.encapsulate_assumed(place, Flow { packet, branch }, encapsulation);
            }
            Ok(None) if matches!(next, NextHop::Encapsulated { .. }) => {
                let undecided = Undecided::Malformed {
                    pack: self.cni_name(),
                    hook: "next_hop",
                    problem: "it says encapsulated, but the encapsulation hook has no answer for the packet".into(),
                };
                return self.undecided(hop, branch, undecided);
            }
            Ok(None) => {}
        }
        // A reply is un-NATed by conntrack, never masqueraded anew.
        let masquerade = match branch.reply {
            true => Ok(false),
            false => self.intent.masquerade(&scope),
        };
        match masquerade {
            Err(undecided) => return self.undecided(hop, branch, undecided),
            Ok(true) => {
                let by = format!("pack {}", self.cni_name());
                if let Err(stop) = self.masquerade_to_node(ns, hop, &mut packet, &mut branch, &by) {
                    return self.stop(hop, branch, stop);
                }
            }
            Ok(false) => {}
        }
        self.leave_assumed(place, &next, Flow { packet, branch })
    }

    /// Source-NATs the packet to the node's InternalIP, as the CNI or a
    /// service proxy (`by`) intends, recording it for the reply's un-NAT.
    fn masquerade_to_node(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: &mut Packet,
        branch: &mut Branch,
        by: &str,
    ) -> Result<(), Stop> {
        let Some(address) = self.node_address(ns.node()) else {
            return Err(self.missing(
                ns,
                Wanted::Other("an InternalIP of the node"),
                &format!("masquerade the packet as {by} intends"),
            ));
        };
        let masquerade = Translation::Masquerade {
            before: Endpoint {
                addr: packet.src().unwrap_or(address),
                port: packet.ip.sport,
            },
            after: Some(Endpoint {
                addr: address,
                port: packet.ip.sport,
            }),
        };
        self.step(
            hop,
            Step::Translated {
                hook: "POSTROUTING".into(),
                table: "nat".into(),
                translation: format!("{masquerade} ({by})"),
            },
        );
        branch.nat.push((ns.clone(), masquerade));
        packet.ip.src = address;
        Ok(())
    }

    /// The packet leaves an assumed hop by `next.dev` towards whoever holds
    /// the next hop.
    fn leave_assumed(&mut self, place: &Place, next: &NextHop, flow: Flow) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let (target, holder) = match (ns, next) {
            // A pod's packets go to its node, whatever the gateway.
            (NetnsId::Pod { node, .. }, _) => (
                next.via().unwrap_or(flow.packet.ip.dst),
                Holder::Node(NetnsId::Host { node: node.clone() }),
            ),
            (
                NetnsId::Host { .. },
                NextHop::PeerNode {
                    node: peer, via, ..
                },
            ) => match via.or_else(|| self.node_address(peer)) {
                Some(address) => (address, Holder::Node(NetnsId::Host { node: peer.clone() })),
                None => {
                    let undecided = Undecided::Malformed {
                        pack: self.cni_name(),
                        hook: "next_hop",
                        problem: format!(
                            "its peer node {peer:?} is no node of the cluster with an InternalIP, and it gives no via"
                        ),
                    };
                    return self.undecided(hop, flow.branch, undecided);
                }
            },
            (NetnsId::Host { node }, _) => {
                let target = next.via().unwrap_or(flow.packet.ip.dst);
                (target, self.holder(node, target))
            }
        };
        match holder {
            Holder::LocalPod(pod) => self.send_to_local_pod(place, next.dev(), &pod, None, flow),
            Holder::Node(node) => {
                let kind = match ns {
                    NetnsId::Pod { .. } => LinkKind::Veth,
                    NetnsId::Host { .. } => LinkKind::Underlay,
                };
                let pod_ip = match ns {
                    NetnsId::Pod { .. } => flow.packet.src(),
                    NetnsId::Host { .. } => None,
                };
                let device = next.device();
                self.enter_node(hop, (kind, &device), &node, target, pod_ip, flow)
            }
            Holder::Elsewhere(what) => {
                let reason = format!(
                    "pack {} sends the packet from {} by {} to {target}, {what}, which is not reached directly from there",
                    self.cni_name(),
                    hop_id(ns),
                    next.device()
                );
                let stop = Stop::unknown(
                    codes::ENGINE_INTENT_UNREACHABLE,
                    reason,
                    self.cni_evidence(),
                );
                self.stop(hop, flow.branch, stop)
            }
            Holder::Outside => self.leave_cluster(hop, &next.device(), flow),
        }
    }

    /// The packet goes over a link to a node: on the interface that holds
    /// the next hop, or for a pod's packet the one the node reaches the pod
    /// by; into the node's real namespace when the snapshot has it. `link`
    /// is the link's kind and the interface it leaves by.
    pub(super) fn enter_node(
        &mut self,
        hop: NodeIndex,
        link: (LinkKind, &str),
        node: &NetnsId,
        target: IpAddr,
        pod_ip: Option<IpAddr>,
        flow: Flow,
    ) -> Next<'s> {
        let interface = match pod_ip {
            Some(pod_ip) => self.interface_to(node, pod_ip, &flow.packet),
            None => self
                .topology
                .owners(target)
                .iter()
                .find(|(owner, _)| *owner == node)
                .map(|(_, interface)| interface.to_string()),
        };
        let interface = interface.unwrap_or_else(|| holding(target));
        let (kind, from_interface) = link;
        let crossing = Crossing {
            kind,
            from_interface,
            to: node,
            interface: &interface,
        };
        self.arrive(hop, crossing, flow)
    }

    /// The device by which `node` reaches a pod's address: the one a packet
    /// from that pod arrives on (a bridge, or the pod's routed veth). From
    /// the node's routes when its dump is there, else from the CNI's intent.
    fn interface_to(&self, node: &NetnsId, pod_ip: IpAddr, packet: &Packet) -> Option<String> {
        if let Some(fib) = self.fib(node, Family::of(pod_ip)) {
            return match fib.lookup(&FlowKey::to(pod_ip)).outcome {
                LookupOutcome::Routed { paths, .. } => paths.into_iter().find_map(|path| path.dev),
                _ => None,
            };
        }
        let mut towards = packet.clone();
        towards.ip.src = packet.ip.dst;
        towards.ip.dst = pod_ip;
        let scope = self.scope(node, &towards, None);
        let next = self.intent.next_hop(&scope).ok().flatten()?;
        next.dev().map(str::to_string)
    }

    /// The CNI tunnels the packet: the outer packet goes to the node that
    /// holds the tunnel's far end.
    fn encapsulate_assumed(
        &mut self,
        place: &Place,
        flow: Flow,
        encapsulation: Encapsulation,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        if matches!(ns, NetnsId::Pod { .. }) {
            let reason = format!(
                "pack {} tunnels from pod {}: only nodes tunnel here",
                self.cni_name(),
                hop_id(ns)
            );
            return self.stop(hop, flow.branch, self.unmodelled_tunnel(reason));
        }
        // VXLAN needs the VNI and UDP port the pack gives; IPIP has neither.
        let (encapsulated, udp_port) = match (
            encapsulation.kind.as_str(),
            encapsulation.vni,
            encapsulation.port,
        ) {
            ("vxlan", Some(vni), Some(port)) => (
                Encapsulated::Vxlan {
                    vni,
                    inner_mac: encapsulation.mac,
                },
                Some(port),
            ),
            ("ipip", ..) => (Encapsulated::Ipip, None),
            _ => {
                let reason = format!(
                    "pack {} tunnels the packet from {} by {} ({}), which the walker does not model: it follows IPIP, and VXLAN with a VNI and UDP port",
                    self.cni_name(),
                    hop_id(ns),
                    encapsulation.dev,
                    encapsulation.kind
                );
                return self.stop(hop, flow.branch, self.unmodelled_tunnel(reason));
            }
        };
        // The bytes a tunnel adds follow from its kind: an answer that says
        // otherwise is wrong, not a setting, and is not replaced silently.
        let adds = encapsulated.overhead(Family::of(encapsulation.outer_dst));
        if let Some(overhead) = encapsulation.overhead
            && overhead != adds
        {
            let problem = format!(
                "overhead is {overhead}, but {} to {} adds {adds} bytes",
                encapsulation.kind, encapsulation.outer_dst,
            );
            let undecided = Undecided::Malformed {
                pack: self.cni_name(),
                hook: "encapsulation",
                problem,
            };
            return self.undecided(hop, flow.branch, undecided);
        }
        let header = TunnelHeader {
            encapsulation: encapsulated,
            device: encapsulation.dev,
            src: Some(encapsulation.outer_src),
            dst: encapsulation.outer_dst,
            udp_port,
            // The pack does not say how its device sets DF on the outer
            // packet: the inner packet's is kept.
            df: None,
        };
        self.encapsulate(place, flow, header)
    }

    /// A tunnel's outer packet leaves an assumed node for the node holding
    /// its far end.
    pub(super) fn send_tunnelled_assumed(&mut self, place: &Place, flow: Flow) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let outer = &flow.packet;
        match self.holder(ns.node(), outer.ip.dst) {
            Holder::Node(remote) => {
                let from = outer.src().map_or_else(|| unnamed("device"), holding);
                let target = outer.ip.dst;
                let link = (LinkKind::Underlay, from.as_str());
                self.enter_node(hop, link, &remote, target, None, flow)
            }
            Holder::LocalPod(_) | Holder::Elsewhere(_) | Holder::Outside => {
                let reason = format!(
                    "pack {} tunnels to {}, which no node of the cluster holds",
                    self.cni_name(),
                    outer.ip.dst
                );
                self.stop(hop, flow.branch, self.unmodelled_tunnel(reason))
            }
        }
    }

    /// A tunnel the CNI intends that the walker cannot follow.
    fn unmodelled_tunnel(&self, reason: String) -> Stop {
        Stop::unknown(codes::ENGINE_TUNNEL_UNMODELLED, reason, self.cni_evidence())
    }

    /// A request for a socket of an assumed namespace.
    pub(super) fn deliver_assumed(&mut self, place: &Place, flow: Flow) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow { packet, branch } = flow;
        self.delivering(hop);
        let delivery = match ns {
            NetnsId::Pod {
                namespace, name, ..
            } => self.pod_delivery(namespace, name, &packet),
            NetnsId::Host { node } => match (packet.ip.protocol, self.node_ready(node)) {
                (Protocol::Icmp | Protocol::Icmpv6, Some(true)) => Ok(format!(
                    "the kernel's ICMP echo responder (node {node} is Ready)"
                )),
                (Protocol::Icmp | Protocol::Icmpv6, _) => Err(format!(
                    "node {node} is not Ready: whether its kernel answers cannot be known without its dump"
                )),
                _ => Err(format!(
                    "what listens on node {node} is known only from its dump (ss.txt)"
                )),
            },
        };
        match delivery {
            Ok(socket) => {
                self.step(hop, Step::Delivered { socket });
                self.answer(place, Flow { packet, branch })
            }
            Err(reason) => {
                let stop = Stop::unknown(
                    codes::SNAPSHOT_MISSING,
                    reason,
                    vec![self.file(ns, DumpFile::Ss)],
                );
                self.stop(hop, branch, stop)
            }
        }
    }

    /// The device that takes a tunnel packet at an assumed node: the CNI's
    /// device for that tunnel — the one the CNI would send the answer back
    /// by, if its kind, VNI and port are the packet's.
    pub(super) fn intended_tunnel_device(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        outer: &Packet,
        tunnel: &Tunnelled,
    ) -> Result<String, Stop> {
        let mut back = tunnel.inner.clone();
        back.ip.src = tunnel.inner.ip.dst;
        back.ip.dst = tunnel
            .inner
            .src()
            .unwrap_or(outer.src().unwrap_or(outer.ip.dst));
        let scope = self.scope(ns, &back, None);
        let intends = |e: &Encapsulation| match &tunnel.encapsulation {
            Encapsulated::Vxlan { vni, .. } => {
                e.kind == "vxlan" && e.vni == Some(*vni) && e.port == outer.ip.dport
            }
            Encapsulated::Ipip => e.kind == "ipip",
        };
        let wanted = match &tunnel.encapsulation {
            Encapsulated::Vxlan { vni, .. } => format!(
                "VXLAN VNI {vni} on UDP port {}",
                outer.ip.dport.unwrap_or_default()
            ),
            Encapsulated::Ipip => "IPIP".to_string(),
        };
        match self.intent.encapsulation(&scope) {
            Err(undecided) => Err(self.undecided_stop(hop, undecided)),
            Ok(Some(e)) if intends(&e) => Ok(e.dev),
            Ok(_) => {
                let reason = format!(
                    "pack {}'s intent for {} has no device that takes {}",
                    self.cni_name(),
                    hop_id(ns),
                    wanted
                );
                Err(Stop::unknown(
                    codes::SNAPSHOT_MISSING,
                    reason,
                    self.cni_evidence(),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests;
