//! The link layer: the egress device decides the link (veth, bridge port,
//! tunnel, underlay); ARP, proxy ARP and bridged netfilter.

use super::*;
use crate::engine::codes;

/// Where a bridge sends a frame, by who holds its next hop.
pub(super) enum BridgePort<'s> {
    /// The namespace behind this port.
    Found { port: &'s Device, far: Port<'s> },
    /// A pod of the bridge's node whose dump the snapshot lacks, behind the
    /// port the CNI gives it.
    AssumedPod(NetnsId),
    /// Nobody: the ARP request goes unanswered; the stop says why where the
    /// namespace holding the address stays silent.
    Unanswered(Option<Stop>),
}

impl<'s> Walker<'s> {
    /// Sends the packet out of `dev` towards `next_hop`.
    pub(super) fn egress(
        &mut self,
        place: &Place,
        dev: &str,
        next_hop: IpAddr,
        flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow { packet, branch } = flow;
        // The first device the hop sends by is the one its checks are about
        // (a tunnel's outer packet leaves by another one after it). A packet
        // generated here has its source once routing chose it; a received
        // one keeps the source it arrived with (what rp_filter checks), not
        // a source NAT's or the tunnel's outer one.
        if let Some(context) = &mut self.graph[hop].context
            && context.out_iface.is_none()
        {
            context.out_iface = Some(dev.to_string());
            if context.in_iface.is_none()
                && let Some(src) = packet.src()
            {
                context.packet.src = src;
            }
            context.out_packet = Some(packet.pack_packet());
        }
        let device = match self.device(ns, dev, "send the packet") {
            Ok(device) => device,
            Err(stop) => return self.stop(hop, branch, stop),
        };
        if let Some(stop) = self.device_down(ns, device) {
            return self.stop(hop, branch, stop);
        }
        let packet = match self.fit(ns, hop, device, packet, &branch) {
            Ok(packet) => packet,
            Err(stop) => return self.stop(hop, branch, stop),
        };
        // The device's egress programs see the packet before it is sent.
        let resume = Resume::Egress {
            dev: dev.to_string(),
            next_hop,
        };
        self.run_programs(place, Flow { packet, branch }, resume, 0, 0)
    }

    /// The device `dev` sends the packet to `next_hop`: its kind decides
    /// the link.
    pub(super) fn transmit(
        &mut self,
        place: &Place,
        dev: &str,
        next_hop: IpAddr,
        flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let device = match self.device(ns, dev, "send the packet") {
            Ok(device) => device,
            Err(stop) => return self.stop(hop, flow.branch, stop),
        };
        // What is sent by the loopback device (a route to one of the
        // namespace's own addresses) is received by the same namespace on
        // it: PREROUTING, routing, INPUT, the socket.
        if device.has_flag(&LinkFlag::Loopback) {
            return Next::Enter {
                place: place.clone(),
                flow,
                arrival: Arrival::Received(device.ifname.clone()),
            };
        }
        match device.kind() {
            Some(DeviceKind::Vxlan(info)) => match self.vxlan_header(place, device, info, next_hop)
            {
                Ok(header) => self.encapsulate(place, flow, header),
                Err(stop) => self.stop(hop, flow.branch, stop),
            },
            Some(DeviceKind::Ipip(info)) => {
                let header = Self::ipip_header(device, info, next_hop);
                self.encapsulate(place, flow, header)
            }
            Some(DeviceKind::Bridge(_)) => self.bridge_egress(place, device, next_hop, flow),
            _ => match self.topology.veth_peer(ns, device) {
                Some(peer) => self.veth_egress(place, device, peer, next_hop, flow),
                // A pod's veth leads to its node: without the node's dump
                // nothing can be said of what happens there.
                None if matches!(ns, NetnsId::Pod { .. }) && device.link_index.is_some() => {
                    let node = NetnsId::Host {
                        node: ns.node().to_string(),
                    };
                    if self.can_assume(&node) {
                        let pod_ip = flow.packet.src();
                        let link = (LinkKind::Veth, device.ifname.as_str());
                        return self.enter_node(hop, link, &node, next_hop, pod_ip, flow);
                    }
                    // The node's dump is there, but not its links: the
                    // peer could not be found in what was not read.
                    let links_unread = self
                        .snapshot
                        .namespaces
                        .get(&node)
                        .is_some_and(|entry| entry.dump().links.is_none());
                    let wanted = if links_unread {
                        Wanted::File(DumpFile::IpLink)
                    } else {
                        Wanted::Other("the node's namespace dump")
                    };
                    let stop = self.missing(&node, wanted, "follow the pod's packet");
                    self.stop(hop, flow.branch, stop)
                }
                // A node's veth whose far end is a pod the snapshot lacks
                // (a CNI that routes to each pod's own veth): the pod is assumed.
                None => match self
                    .missing_local_pod(ns, next_hop)
                    .filter(|_| device.link_index.is_some())
                {
                    Some(pod) if self.can_assume(&pod) => {
                        self.send_to_local_pod(place, Some(&device.ifname), &pod, None, flow)
                    }
                    Some(pod) => {
                        let stop = self.missing(
                            &pod,
                            Wanted::Other("the pod's namespace dump"),
                            "deliver the packet",
                        );
                        self.stop(hop, flow.branch, stop)
                    }
                    None => self.underlay_egress(place, device, next_hop, flow),
                },
            },
        }
    }

    /// The device `dev` of `ns`, or the stop that says `to_do` needs it.
    pub(super) fn device(&self, ns: &NetnsId, dev: &str, to_do: &str) -> Result<&'s Device, Stop> {
        self.topology.link(ns, dev).ok_or_else(|| {
            self.missing(
                ns,
                Wanted::In(&format!("device {dev}"), DumpFile::IpLink),
                to_do,
            )
        })
    }

    /// A device that is administratively down, or has no carrier, sends nothing.
    pub(super) fn device_down(&self, ns: &NetnsId, device: &Device) -> Option<Stop> {
        let state = down_state(device)?;
        Some(Stop {
            disposition: Disposition::NeighborFailed,
            id: codes::KERNEL_DEVICE_DOWN,
            reason: format!("{} sends by {}, which {state}", hop_id(ns), device.ifname),
            evidence: vec![self.file(ns, DumpFile::IpLink)],
        })
    }

    /// The receiving end of a link that is down, or has no carrier, takes
    /// nothing in: the stop is the receiver's (`to`'s), not the sender's.
    pub(super) fn receiver_down(
        &self,
        hop: NodeIndex,
        to: &NetnsId,
        device: &Device,
    ) -> Option<Stop> {
        let state = down_state(device)?;
        Some(Stop {
            disposition: Disposition::NeighborFailed,
            id: codes::KERNEL_DEVICE_DOWN,
            reason: format!(
                "{}'s {} {state}, so {} cannot reach it",
                hop_id(to),
                device.ifname,
                self.graph[hop].id
            ),
            evidence: vec![self.file(to, DumpFile::IpLink)],
        })
    }

    /// A bridge device of this namespace: the frame goes to the port behind
    /// which the next hop answers ARP.
    pub(super) fn bridge_egress(
        &mut self,
        place: &Place,
        bridge: &Device,
        next_hop: IpAddr,
        flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let request = match self.arp_request(ns, bridge, next_hop, &flow.packet) {
            Ok(request) => request,
            Err(stop) => return self.stop(hop, flow.branch, stop),
        };
        match self.bridge_port(ns, &bridge.ifname, &request, None) {
            BridgePort::Found { port, far } => {
                self.step(
                    hop,
                    Step::Bridged {
                        bridge: bridge.ifname.clone(),
                        port: port.ifname.clone(),
                    },
                );
                let kind = LinkKind::BridgePort;
                self.cross(place, port, kind, far.ns, &far.link.ifname, flow)
            }
            BridgePort::AssumedPod(pod) => {
                self.send_to_local_pod(place, Some(&bridge.ifname), &pod, None, flow)
            }
            BridgePort::Unanswered(Some(stop)) => self.stop(hop, flow.branch, stop),
            BridgePort::Unanswered(None) => {
                self.arp_unanswered(ns, hop, &bridge.ifname, next_hop, flow.branch)
            }
        }
    }

    /// The port of `bridge` (in `ns`) a frame resolved by `request` leaves
    /// by: the one whose far end holds the address and answers (never the
    /// port it came in by), or the CNI's port to a pod of this node the
    /// snapshot lacks. The one search, whether the frame comes from the
    /// node's own stack or from a port.
    pub(super) fn bridge_port(
        &self,
        ns: &NetnsId,
        bridge: &str,
        request: &ArpRequest,
        in_port: Option<&str>,
    ) -> BridgePort<'s> {
        let next_hop = request.target;
        let mut silent = None;
        for port in self.topology.bridge_ports(ns, bridge) {
            if Some(port.ifname.as_str()) == in_port {
                continue;
            }
            let Some(far) = self.topology.veth_peer(ns, port) else {
                continue;
            };
            if !self.owns(far.ns, next_hop) {
                continue;
            }
            match self.arp_answer(far.ns, far.link, request) {
                Ok(_) => return BridgePort::Found { port, far },
                Err(refusal) => {
                    silent.get_or_insert(self.refused(far.ns, &far.link.ifname, next_hop, refusal));
                }
            }
        }
        if silent.is_some() {
            return BridgePort::Unanswered(silent);
        }
        match self.missing_local_pod(ns, next_hop) {
            Some(pod) if self.can_assume(&pod) => BridgePort::AssumedPod(pod),
            _ => BridgePort::Unanswered(None),
        }
    }

    /// Nothing behind any port of `bridge` (in `ns`) holds the next hop, so
    /// its ARP request goes unanswered and the packet is dropped.
    pub(super) fn arp_unanswered(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        bridge: &str,
        next_hop: IpAddr,
        branch: Branch,
    ) -> Next<'s> {
        // A port whose far end is a namespace the snapshot lacks (a pod whose
        // dump was not collected) might hold the next hop: nothing can be said.
        let unknown: Vec<&str> = self
            .topology
            .bridge_ports(ns, bridge)
            .into_iter()
            .filter(|port| port.link_index.is_some() && self.topology.veth_peer(ns, port).is_none())
            .map(|port| port.ifname.as_str())
            .collect();
        // A veth naming itself as its peer, in its own namespace (no
        // link-netnsid): no kernel reports that; the dump is inconsistent,
        // not missing.
        let self_peered: Vec<&str> = self
            .topology
            .bridge_ports(ns, bridge)
            .into_iter()
            .filter(|port| port.link_index == Some(port.ifindex) && port.link_netnsid.is_none())
            .map(|port| port.ifname.as_str())
            .collect();
        if !self_peered.is_empty() && self_peered.len() == unknown.len() {
            let (names, its, it) = match self_peered.len() {
                1 => ("names itself as its", "its", "it"),
                _ => ("name themselves as their", "their", "them"),
            };
            let reason = format!(
                "{} of {} {names} veth peer (the link index is {its} own, in the same namespace), which no kernel reports: ip-link.json is inconsistent, and what is behind {it} cannot be told",
                self_peered.join(", "),
                hop_id(ns)
            );
            let stop = Stop::unknown(
                codes::SNAPSHOT_UNREADABLE,
                reason,
                vec![self.file(ns, DumpFile::IpLink)],
            );
            return self.stop(hop, branch, stop);
        }
        if !unknown.is_empty() {
            let owner =
                self.snapshot
                    .cluster
                    .by_ip(next_hop)
                    .iter()
                    .find_map(|owner| match owner {
                        IpOwner::Pod {
                            namespace, name, ..
                        } => Some(format!(" ({next_hop} is pod {namespace}/{name}'s)")),
                        _ => None,
                    });
            let reason = format!(
                "no namespace in the snapshot behind bridge {bridge} of {} holds {next_hop}{}, and port(s) {} lead to namespaces whose dumps are not in the snapshot",
                hop_id(ns),
                owner.unwrap_or_default(),
                unknown.join(", ")
            );
            let evidence = vec![self.file(ns, DumpFile::IpLink)];
            let stop = Stop::unknown(codes::SNAPSHOT_MISSING, reason, evidence);
            return self.stop(hop, branch, stop);
        }
        // Who answers is read from the addresses of every namespace on the
        // bridge: one whose ip-addr.json was not read might hold it.
        let on_bridge = std::iter::once(ns).chain(
            self.topology
                .bridge_ports(ns, bridge)
                .into_iter()
                .filter_map(|port| self.topology.veth_peer(ns, port).map(|peer| peer.ns)),
        );
        if let Some(unread) = self.without_addresses(on_bridge) {
            let to_do =
                format!("tell whether a device on bridge {bridge} answers ARP for {next_hop}");
            let stop = self.missing(unread, Wanted::File(DumpFile::IpAddr), &to_do);
            return self.stop(hop, branch, stop);
        }
        let reason = format!(
            "no device on bridge {bridge} of {} answers ARP for {next_hop}",
            hop_id(ns)
        );
        let evidence = vec![self.file(ns, DumpFile::IpAddr)];
        let stop = Stop {
            disposition: Disposition::NeighborFailed,
            id: codes::KERNEL_NEIGHBOUR_UNANSWERED,
            reason,
            evidence,
        };
        self.stop(hop, branch, stop)
    }

    /// A veth whose other end (`peer`) is in another namespace of the snapshot.
    pub(super) fn veth_egress(
        &mut self,
        place: &Place,
        device: &Device,
        peer: Port<'s>,
        next_hop: IpAddr,
        flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let (peer_ns, peer) = (peer.ns, peer.link);
        let Flow {
            mut packet,
            mut branch,
        } = flow;
        let Some(bridge) = peer.master.clone() else {
            // A plain veth pair: the peer answers ARP for its own addresses,
            // and for others by proxy where proxy ARP is on.
            let request = match self.arp_request(ns, device, next_hop, &packet) {
                Ok(request) => request,
                Err(stop) => return self.stop(hop, branch, stop),
            };
            match self.arp_answer(peer_ns, peer, &request) {
                Ok(ArpAnswer::Own) => {}
                Ok(ArpAnswer::Proxy) => self.answered_by_proxy(
                    hop,
                    device,
                    next_hop,
                    Port {
                        ns: peer_ns,
                        link: peer,
                    },
                ),
                Err(refusal) => {
                    let stop = self.refused(peer_ns, &peer.ifname, next_hop, refusal);
                    return self.stop(hop, branch, stop);
                }
            }
            let flow = Flow { packet, branch };
            return self.cross(place, device, LinkKind::Veth, peer_ns, &peer.ifname, flow);
        };
        // The peer is a bridge port. The frame does not go through `arrive`
        // from here, so the port's own checks come first: a port that is
        // down, or whose MTU the frame exceeds, takes nothing in.
        let crossing = Crossing {
            kind: LinkKind::Veth,
            from_interface: &device.ifname,
            to: peer_ns,
            interface: &peer.ifname,
        };
        if let Some(stop) = self.receiver_down(hop, peer_ns, peer) {
            return self.stopped_at_arrival(hop, &crossing, &packet, branch, stop, false);
        }
        if let Some(stop) = self.oversized_frame(hop, peer_ns, peer, &mut packet) {
            return self.stopped_at_arrival(hop, &crossing, &packet, branch, stop, true);
        }
        let link = crossing.link(&packet);
        let request = match self.arp_request(ns, device, next_hop, &packet) {
            Ok(request) => request,
            Err(stop) => return self.stop(hop, branch, stop),
        };
        // The bridge itself (the node's stack) answers ARP for the next hop.
        if self.owns(peer_ns, next_hop) {
            let answer = match self.topology.link(peer_ns, &bridge) {
                Some(bridge_device) => self.arp_answer(peer_ns, bridge_device, &request),
                None => Err(ArpRefusal::Unknown(self.missing(
                    peer_ns,
                    Wanted::In(&format!("device {bridge}"), DumpFile::IpLink),
                    "tell whether it answers ARP",
                ))),
            };
            if let Err(refusal) = answer {
                let stop = self.refused(peer_ns, &bridge, next_hop, refusal);
                return self.stop(hop, branch, stop);
            }
            return Next::Visit {
                ns: peer_ns.clone(),
                flow: Flow { packet, branch },
                arrival: Arrival::Received(bridge),
                from: Some((hop, link)),
            };
        }
        // Or another port: the frame crosses the node's bridge without
        // entering its IP stack (bridged, not routed: no IP-stack checks
        // apply in that hop).
        let in_port = Some(peer.ifname.as_str());
        let (port, far) = match self.bridge_port(peer_ns, &bridge, &request, in_port) {
            BridgePort::Found { port, far } => (port, far),
            BridgePort::AssumedPod(pod) => {
                let bridge_hop =
                    Place::new(peer_ns, self.bridging_hop(hop, peer_ns, link, &mut branch));
                let flow = Flow { packet, branch };
                return self.send_to_local_pod(
                    &bridge_hop,
                    Some(&bridge),
                    &pod,
                    Some(&peer.ifname),
                    flow,
                );
            }
            BridgePort::Unanswered(Some(stop)) => return self.stop(hop, branch, stop),
            BridgePort::Unanswered(None) => {
                return self.arp_unanswered(peer_ns, hop, &bridge, next_hop, branch);
            }
        };
        let bridge_hop = Place::new(peer_ns, self.bridging_hop(hop, peer_ns, link, &mut branch));
        self.step(
            bridge_hop.hop,
            Step::Bridged {
                bridge: bridge.clone(),
                port: port.ifname.clone(),
            },
        );
        let mut flow = Flow { packet, branch };
        if let Some(stop) =
            self.bridge_netfilter(&bridge_hop, &bridge, &peer.ifname, &port.ifname, &mut flow)
        {
            return self.stop(bridge_hop.hop, flow.branch, stop);
        }
        let kind = LinkKind::BridgePort;
        self.cross(&bridge_hop, port, kind, far.ns, &far.link.ifname, flow)
    }

    /// The hop of a node whose bridge a frame crosses from one port to
    /// another, joined by `link` to the hop it comes from.
    fn bridging_hop(
        &mut self,
        from: NodeIndex,
        ns: &NetnsId,
        link: Link,
        branch: &mut Branch,
    ) -> NodeIndex {
        let hop = Hop {
            id: hop_id(ns),
            node: Some(ns.node().to_string()),
            assumed: false,
            context: None,
            steps: Vec::new(),
        };
        self.join(hop, Some((from, link)), branch)
    }

    /// With `bridge-nf-call-iptables` on, a frame crossing a bridge goes
    /// through the node's netfilter (FORWARD and POSTROUTING, `-m physdev`
    /// sees the ports) and conntrack, which undoes NAT for replies there too.
    pub(super) fn bridge_netfilter(
        &mut self,
        place: &Place,
        bridge: &str,
        in_port: &str,
        out_port: &str,
        flow: &mut Flow,
    ) -> Option<Stop> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow { packet, branch } = flow;
        let enabled = self
            .sysctls(ns)?
            .get_i64("net.bridge.bridge-nf-call-iptables")
            .ok()
            .flatten();
        if enabled != Some(1) {
            return None;
        }
        if branch.reply {
            self.undo_nat(ns, hop, packet, branch, UndoPhase::BeforeRouting);
            self.undo_nat(ns, hop, packet, branch, UndoPhase::AfterRouting);
        }
        let Some(netfilter) = self.netfilter(ns) else {
            return Some(self.missing(
                ns,
                Wanted::File(DumpFile::IptablesSave),
                "evaluate bridged traffic (bridge-nf-call-iptables = 1)",
            ));
        };
        let context = self.netfilter_context(ns, self.fib(ns, packet.ip.family()));
        let filtered = packet.netfilter_packet(packet.src().unwrap_or(packet.ip.dst));
        let mut filtered = branch.conntrack(ns, packet, filtered);
        filtered.in_iface = Some(bridge.to_string());
        filtered.out_iface = Some(bridge.to_string());
        filtered.bridge = Some(BridgePorts {
            physdev_in: Some(in_port.to_string()),
            physdev_out: Some(out_port.to_string()),
        });
        let outcomes = netfilter.traverse(PacketPath::Forward, filtered, &context);
        let [outcome] = outcomes.as_slice() else {
            let reason = format!(
                "bridged traffic splits into {} netfilter branches in {}: not modelled",
                outcomes.len(),
                hop_id(ns)
            );
            return Some(Stop::unknown(
                codes::ENGINE_BRIDGE_BRANCHES,
                reason,
                vec![self.file(ns, DumpFile::IptablesSave)],
            ));
        };
        match &outcome.verdict {
            Verdict::Drop | Verdict::Reject { .. } => {
                let what = format!("the bridged packet ({bridge}: {in_port} -> {out_port})");
                Some(self.denial(ns, hop, outcome, &what))
            }
            Verdict::Unknown { reason } => Some(Stop::unknown(
                codes::KERNEL_NETFILTER_UNKNOWN,
                reason.clone(),
                vec![self.file(ns, DumpFile::IptablesSave)],
            )),
            Verdict::Accept | Verdict::Unroutable { .. } => {
                self.record_translations(ns, hop, outcome, branch);
                packet.take_addresses(&outcome.packet);
                None
            }
        }
    }
}

/// How a device that sends and takes nothing is: down, or without carrier;
/// `None` for one that is up with carrier.
fn down_state(device: &Device) -> Option<&'static str> {
    let up = device.has_flag(&LinkFlag::Up);
    let carrier = device.has_flag(&LinkFlag::LowerUp) || device.ifname == "lo";
    match (up, carrier) {
        (true, true) => None,
        (true, false) => Some("has no carrier (its peer or link is down)"),
        (false, _) => Some("is down"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixture::*;
    use super::*;

    /// The port of n1's cni0 a frame from the node to `to` leaves by, the
    /// frame having come in by `in_port`.
    fn port_towards<'s>(walker: &Walker<'s>, to: &str, in_port: Option<&str>) -> BridgePort<'s> {
        let node = host("n1");
        let bridge = walker.topology.link(&node, "cni0").expect("cni0");
        let packet = tcp("10.0.0.1", to);
        let request = walker
            .arp_request(&node, bridge, packet.ip.dst, &packet)
            .unwrap_or_else(|stop| panic!("{}", stop.reason));
        walker.bridge_port(&node, "cni0", &request, in_port)
    }

    #[test]
    fn bridge_port_finds_the_port_whose_far_end_holds_the_next_hop() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            match port_towards(walker, "10.0.0.3", None) {
                BridgePort::Found { port, far } => {
                    assert_eq!(port.ifname, "veth-b");
                    assert_eq!(far.ns, &pod("b"));
                }
                _ => panic!("no port found"),
            }
            // Never back out of the port the frame came in by.
            let from_b = port_towards(walker, "10.0.0.3", Some("veth-b"));
            assert!(matches!(from_b, BridgePort::Unanswered(None)));
        });
    }

    #[test]
    fn bridge_port_for_an_address_nobody_holds_is_unanswered() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let port = port_towards(walker, "10.0.0.9", None);
            assert!(matches!(port, BridgePort::Unanswered(None)));
        });
    }

    #[test]
    fn a_pod_with_arp_ignore_8_leaves_the_bridge_port_unanswered_and_says_why() {
        let b = pod("b");
        let files = with(
            two_pods_on_a_bridge(),
            vec![file(
                &b,
                DumpFile::Sysctl,
                "net.ipv4.ip_forward = 0\nnet.ipv4.conf.all.arp_ignore = 8\nnet.ipv4.conf.all.arp_filter = 0\n",
            )],
        );
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let BridgePort::Unanswered(Some(stop)) = port_towards(walker, "10.0.0.3", None) else {
                panic!("pod b answered");
            };
            assert_eq!(stop.id, codes::KERNEL_NEIGHBOUR_UNANSWERED);
            assert_eq!(stop.disposition, Disposition::NeighborFailed);
            assert!(stop.reason.contains("arp_ignore = 8"), "{}", stop.reason);
        });
    }

    #[test]
    fn a_pods_frame_crosses_the_bridge_to_the_other_pod_in_a_bridging_hop() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&pod("a"), tcp("10.0.0.2", "10.0.0.3"));
            let next = walker.egress(&place, "eth0", "10.0.0.3".parse().unwrap(), flow);
            let Next::Visit {
                ns, arrival, from, ..
            } = next
            else {
                panic!("{}", describe(&next));
            };
            assert_eq!(ns, pod("b"));
            assert_eq!(arrival, Arrival::Received("eth0".into()));
            let (bridging, link) = from.unwrap();
            assert_eq!(link.kind, LinkKind::BridgePort);
            assert_eq!(walker.graph[bridging].id, HopId::node("n1"));
            assert!(walker.graph[bridging].context.is_none());
            assert!(matches!(
                &walker.graph[bridging].steps[0].step,
                Step::Bridged { bridge, port } if bridge == "cni0" && port == "veth-b"
            ));
        });
    }

    #[test]
    fn a_device_that_is_down_sends_nothing() {
        let a = pod("a");
        let down = json!([device(
            2,
            "eth0",
            1450,
            json!({"link_index": 5, "flags": ["BROADCAST"]})
        )]);
        let files = with(
            two_pods_on_a_bridge(),
            vec![file(&a, DumpFile::IpLink, down.to_string())],
        );
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&a, tcp("10.0.0.2", "10.0.0.3"));
            let stop = stopped(walker.egress(&place, "eth0", "10.0.0.3".parse().unwrap(), flow));
            assert_eq!(stop.id, codes::KERNEL_DEVICE_DOWN);
            assert_eq!(stop.disposition, Disposition::NeighborFailed);
        });
    }
}
