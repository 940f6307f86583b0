//! The link layer: the egress device decides the link (veth, bridge port,
//! tunnel, underlay); ARP, proxy ARP and bridged netfilter.

use super::*;

/// Why a veth's peer does not answer an ARP request by proxy.
pub(super) enum ProxyArpRefusal {
    /// The kernel stays silent: why, and the dump file that shows it.
    Silent { why: String, file: &'static str },
    /// The snapshot cannot tell.
    Unknown(Stop),
}

/// Where a bridge sends a frame, by who holds its next hop.
pub(super) enum BridgePort<'s> {
    /// The namespace behind this port.
    Found { port: &'s Device, far: Port<'s> },
    /// A pod of the bridge's node whose dump the snapshot lacks, behind the
    /// port the CNI gives it.
    AssumedPod(NetnsId),
    /// Nobody: the ARP request goes unanswered.
    Unanswered,
}

impl<'s> Walker<'s, '_> {
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
                && let Some(src) = packet.src
            {
                context.packet.src = src;
            }
        }
        let Some(device) = self.topology.link(ns, dev) else {
            return self.stop(
                hop,
                branch,
                self.missing(
                    ns,
                    &format!("device {dev} in ip-link.json"),
                    "send the packet",
                ),
            );
        };
        if let Some(stop) = self.device_down(ns, device) {
            return self.stop(hop, branch, stop);
        }
        let packet = match self.fit(ns, hop, device, packet, &branch) {
            Ok(packet) => packet,
            Err(stop) => return self.stop(hop, branch, stop),
        };
        let flow = Flow { packet, branch };
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
                        let pod_ip = flow.packet.src;
                        let link = (LinkKind::Veth, device.ifname.as_str());
                        return self.enter_node(hop, link, &node, next_hop, pod_ip, flow);
                    }
                    let stop = self.missing(
                        &node,
                        "the node's namespace dump",
                        "follow the pod's packet",
                    );
                    self.stop(hop, flow.branch, stop)
                }
                // A node's veth whose far end is a pod the snapshot lacks
                // (a CNI that routes to each pod's own veth): the pod is assumed.
                None => match self
                    .missing_local_pod(ns, next_hop)
                    .filter(|_| device.link_index.is_some())
                {
                    Some(pod) if self.can_assume(&pod) => {
                        self.send_to_local_pod(place, &device.ifname, &pod, None, flow)
                    }
                    Some(pod) => {
                        let stop =
                            self.missing(&pod, "the pod's namespace dump", "deliver the packet");
                        self.stop(hop, flow.branch, stop)
                    }
                    None => self.underlay_egress(place, device, next_hop, flow),
                },
            },
        }
    }

    /// A device that is administratively down, or has no carrier, sends nothing.
    pub(super) fn device_down(&self, ns: &NetnsId, device: &Device) -> Option<Stop> {
        let up = device.has_flag(&LinkFlag::Up);
        let carrier = device.has_flag(&LinkFlag::LowerUp) || device.ifname == "lo";
        if up && carrier {
            return None;
        }
        let state = if up {
            "has no carrier (its peer or link is down)"
        } else {
            "is down"
        };
        Some(Stop {
            disposition: Disposition::NeighborFailed,
            id: "kernel.device.down",
            reason: format!("{} sends by {}, which {state}", hop_id(ns), device.ifname),
            evidence: self.file(ns, "ip-link.json"),
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
        match self.bridge_port(ns, &bridge.ifname, next_hop, None) {
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
                self.send_to_local_pod(place, &bridge.ifname, &pod, None, flow)
            }
            BridgePort::Unanswered => {
                self.arp_unanswered(ns, hop, &bridge.ifname, next_hop, flow.branch)
            }
        }
    }

    /// The port of `bridge` (in `ns`) a frame for `next_hop` leaves by: the
    /// one whose far end holds it (never the port it came in by), or the
    /// CNI's port to a pod of this node the snapshot lacks. The one search,
    /// whether the frame comes from the node's own stack or from a port.
    pub(super) fn bridge_port(
        &self,
        ns: &NetnsId,
        bridge: &str,
        next_hop: IpAddr,
        in_port: Option<&str>,
    ) -> BridgePort<'s> {
        for port in self.topology.bridge_ports(ns, bridge) {
            if Some(port.ifname.as_str()) == in_port {
                continue;
            }
            if let Some(far) = self.topology.veth_peer(ns, port)
                && self.owns(far.ns, next_hop)
            {
                return BridgePort::Found { port, far };
            }
        }
        match self.missing_local_pod(ns, next_hop) {
            Some(pod) if self.can_assume(&pod) => BridgePort::AssumedPod(pod),
            _ => BridgePort::Unanswered,
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
            let stop = Stop::unknown("snapshot.unreadable", reason, self.file(ns, "ip-link.json"));
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
            let evidence = self.file(ns, "ip-link.json");
            let stop = Stop::unknown("snapshot.missing", reason, evidence);
            return self.stop(hop, branch, stop);
        }
        let reason = format!(
            "no device on bridge {bridge} of {} answers ARP for {next_hop}",
            hop_id(ns)
        );
        let evidence = self.file(ns, "ip-addr.json");
        let stop = Stop {
            disposition: Disposition::NeighborFailed,
            id: "kernel.neighbour.unanswered",
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
            let proxied = match self.owns(peer_ns, next_hop) {
                true => None,
                false => match self.proxy_arp(ns, device, peer_ns, peer, next_hop, &packet) {
                    Ok(()) => Some(()),
                    Err(ProxyArpRefusal::Unknown(stop)) => return self.stop(hop, branch, stop),
                    Err(ProxyArpRefusal::Silent { why, file }) => {
                        let reason = format!(
                            "{next_hop} is not an address of {} behind {}, and it does not answer ARP for it by proxy: {why}",
                            hop_id(peer_ns),
                            device.ifname
                        );
                        let evidence = self.file(peer_ns, file);
                        return self.stop(
                            hop,
                            branch,
                            Stop {
                                disposition: Disposition::NeighborFailed,
                                id: "kernel.neighbour.unanswered",
                                reason,
                                evidence,
                            },
                        );
                    }
                },
            };
            if proxied.is_some() {
                self.step(
                    hop,
                    Step::Neighbour {
                        address: next_hop,
                        interface: device.ifname.clone(),
                        result: format!(
                            "answered by proxy ARP on {}'s {}",
                            hop_id(peer_ns),
                            peer.ifname
                        ),
                    },
                );
            }
            let flow = Flow { packet, branch };
            return self.cross(place, device, LinkKind::Veth, peer_ns, &peer.ifname, flow);
        };
        // The peer is a bridge port. The frame does not go through `arrive`
        // from here, so the port's own checks come first: a port that is
        // down, or whose MTU the frame exceeds, takes nothing in.
        if let Some(stop) = self.device_down(peer_ns, peer) {
            return self.stop(hop, branch, stop);
        }
        let crossing = Crossing {
            kind: LinkKind::Veth,
            from_interface: &device.ifname,
            to: peer_ns,
            interface: &peer.ifname,
        };
        if let Some(stop) = self.oversized_frame(hop, peer_ns, peer, &mut packet) {
            return self.dropped_on_arrival(hop, &crossing, &packet, branch, stop);
        }
        let link = crossing.link(&packet);
        // The bridge itself (the node's stack) answers ARP for the next hop.
        if self.owns(peer_ns, next_hop) {
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
        let (port, far) = match self.bridge_port(peer_ns, &bridge, next_hop, Some(&peer.ifname)) {
            BridgePort::Found { port, far } => (port, far),
            BridgePort::AssumedPod(pod) => {
                let bridge_hop =
                    Place::new(peer_ns, self.bridging_hop(hop, peer_ns, link, &mut branch));
                let flow = Flow { packet, branch };
                return self.send_to_local_pod(
                    &bridge_hop,
                    &bridge,
                    &pod,
                    Some(&peer.ifname),
                    flow,
                );
            }
            BridgePort::Unanswered => {
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
        let hop = self.graph.add_node(Hop {
            id: hop_id(ns),
            kind: HopKind::Node,
            node: Some(ns.node().to_string()),
            assumed: false,
            context: None,
            steps: Vec::new(),
        });
        self.graph.add_edge(from, hop, link);
        branch.hops.push(hop);
        hop
    }

    /// The kernel's `arp_process` for a request arriving on `peer` (in
    /// `peer_ns`) for `next_hop`, an address `peer_ns` does not hold: it
    /// answers by proxy when `proxy_arp` is on (`all` OR'd with the device's
    /// own), the device forwards, the input route (which validates the
    /// request's sender address, rp_filter included) is unicast and leaves
    /// by another device. Explicit proxy entries (`ip neigh add proxy`) and
    /// `proxy_arp_pvlan` are not in the dumps and are not modelled.
    pub(super) fn proxy_arp(
        &self,
        ns: &NetnsId,
        device: &Device,
        peer_ns: &NetnsId,
        peer: &Device,
        next_hop: IpAddr,
        packet: &Packet,
    ) -> Result<(), ProxyArpRefusal> {
        let to_do = "tell whether it answers ARP by proxy";
        let sysctls = self
            .sysctls(peer_ns)
            .ok_or_else(|| ProxyArpRefusal::Unknown(self.missing(peer_ns, "sysctl.txt", to_do)))?;
        let settings: Vec<Option<i64>> = ["all", peer.ifname.as_str()]
            .iter()
            .map(|ifname| {
                let key = Sysctls::interface_key(Family::Ipv4, ifname, "proxy_arp");
                sysctls.get_i64(&key).ok().flatten()
            })
            .collect();
        if !settings.iter().any(|v| v.is_some_and(|v| v != 0)) {
            if settings.contains(&None) {
                return Err(ProxyArpRefusal::Unknown(self.missing(
                    peer_ns,
                    &format!(
                        "net.ipv4.conf.{{all,{}}}.proxy_arp in sysctl.txt",
                        peer.ifname
                    ),
                    to_do,
                )));
            }
            return Err(ProxyArpRefusal::Silent {
                why: format!(
                    "net.ipv4.conf.all.proxy_arp and net.ipv4.conf.{}.proxy_arp are 0",
                    peer.ifname
                ),
                file: "sysctl.txt",
            });
        }
        if let Some(stop) = self.forwarding(peer_ns, &peer.ifname) {
            return Err(match stop.disposition {
                Disposition::ForwardingDisabled => ProxyArpRefusal::Silent {
                    why: stop.reason,
                    file: "sysctl.txt",
                },
                _ => ProxyArpRefusal::Unknown(stop),
            });
        }
        // The request's sender address: the packet's own source where the
        // sender holds it, else the one the sender picks for the device.
        let sender = packet
            .src
            .filter(|src| self.owns(ns, *src))
            .or_else(|| {
                let fib = self.models.fibs.get(ns)?;
                fib.select_source(Some(&device.ifname), next_hop)
            })
            .ok_or_else(|| ProxyArpRefusal::Silent {
                why: format!("{} has no address to send the request from", hop_id(ns)),
                file: "ip-addr.json",
            })?;
        let request = Packet {
            src: Some(sender),
            dst: next_hop,
            ..packet.clone()
        };
        if let Some(stop) = self.reverse_path_filter(peer_ns, &request, Some(&peer.ifname)) {
            return Err(ProxyArpRefusal::Silent {
                why: format!(
                    "the request from {sender} fails the input route's source check: {}",
                    stop.reason
                ),
                file: "sysctl.txt",
            });
        }
        let fib = self.models.fibs.get(peer_ns).ok_or_else(|| {
            ProxyArpRefusal::Unknown(self.missing(peer_ns, "ip-route.json", to_do))
        })?;
        let lookup = fib.lookup(&FlowKey {
            src: Some(sender),
            iif: Some(peer.ifname.clone()),
            ..FlowKey::to(next_hop)
        });
        let silent = |why: String| {
            Err(ProxyArpRefusal::Silent {
                why,
                file: "ip-route.json",
            })
        };
        match lookup.outcome {
            LookupOutcome::Routed {
                route_type: RouteType::Unicast,
                paths,
                ..
            } => match paths.iter().any(|p| p.dev.as_deref() == Some(&peer.ifname)) {
                false => Ok(()),
                true => silent(format!(
                    "its route to {next_hop} leaves by {} itself",
                    peer.ifname
                )),
            },
            LookupOutcome::Routed { route_type, .. } => silent(format!(
                "its route to {next_hop} is {route_type:?}, not unicast"
            )),
            LookupOutcome::Failed { error, .. } => silent(format!(
                "it has no route to {next_hop} ({})",
                error.as_str()
            )),
            LookupOutcome::Unknown { reason } => Err(ProxyArpRefusal::Unknown(Stop::unknown(
                "kernel.route.unknown",
                format!(
                    "whether {} answers ARP for {next_hop} by proxy is not known: {reason}",
                    hop_id(peer_ns)
                ),
                self.file(peer_ns, "ip-route.json"),
            ))),
        }
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
        let models = self.models;
        let Some(netfilter) = models.netfilters.get(ns) else {
            return Some(self.missing(
                ns,
                "iptables-save.txt",
                "evaluate bridged traffic (bridge-nf-call-iptables = 1)",
            ));
        };
        let context = self.netfilter_context(ns, models.fibs.get(ns));
        let mut filtered = packet.netfilter_packet(packet.src.unwrap_or(packet.dst));
        filtered.ct_nat = branch.connection_nat(ns);
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
                "engine.bridge.branches",
                reason,
                self.file(ns, "iptables-save.txt"),
            ));
        };
        match &outcome.verdict {
            Verdict::Drop | Verdict::Reject { .. } => {
                let what = format!("the bridged packet ({bridge}: {in_port} -> {out_port})");
                Some(self.denial(ns, hop, outcome, &what))
            }
            Verdict::Unknown { reason } => Some(Stop::unknown(
                "kernel.netfilter.unknown",
                reason.clone(),
                self.file(ns, "iptables-save.txt"),
            )),
            Verdict::Accept | Verdict::Unroutable { .. } => {
                self.record_translations(ns, hop, outcome, branch);
                packet.take_addresses(&outcome.packet);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixture::*;
    use super::*;

    #[test]
    fn bridge_port_finds_the_port_whose_far_end_holds_the_next_hop() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let next_hop = "10.0.0.3".parse().unwrap();
            match walker.bridge_port(&host("n1"), "cni0", next_hop, None) {
                BridgePort::Found { port, far } => {
                    assert_eq!(port.ifname, "veth-b");
                    assert_eq!(far.ns, &pod("b"));
                }
                _ => panic!("no port found"),
            }
            // Never back out of the port the frame came in by.
            let from_b = walker.bridge_port(&host("n1"), "cni0", next_hop, Some("veth-b"));
            assert!(matches!(from_b, BridgePort::Unanswered));
        });
    }

    #[test]
    fn bridge_port_for_an_address_nobody_holds_is_unanswered() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let next_hop = "10.0.0.9".parse().unwrap();
            let port = walker.bridge_port(&host("n1"), "cni0", next_hop, None);
            assert!(matches!(port, BridgePort::Unanswered));
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
            assert_eq!(walker.graph[bridging].id, "n1");
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
            vec![file(&a, "ip-link.json", down.to_string())],
        );
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&a, tcp("10.0.0.2", "10.0.0.3"));
            let stop = stopped(walker.egress(&place, "eth0", "10.0.0.3".parse().unwrap(), flow));
            assert_eq!(stop.id, "kernel.device.down");
            assert_eq!(stop.disposition, Disposition::NeighborFailed);
        });
    }
}
