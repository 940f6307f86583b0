//! Crossing between hops: a link's far end, a new hop entered, the
//! underlay to another node, or outside the cluster.

use super::*;
use crate::engine::codes;

/// A link the packet crosses into another namespace: its kind, the
/// interface it leaves by, and the far end.
pub(super) struct Crossing<'a> {
    pub(super) kind: LinkKind,
    pub(super) from_interface: &'a str,
    pub(super) to: &'a NetnsId,
    pub(super) interface: &'a str,
}

impl Crossing<'_> {
    /// The link as the graph shows it, carrying `packet`.
    pub(super) fn link(&self, packet: &Packet) -> Link {
        Link {
            kind: self.kind,
            from_interface: self.from_interface.to_string(),
            to_interface: Some(self.interface.to_string()),
            packet: packet.to_string(),
            fields: packet.fields(),
        }
    }
}

/// How a packet leaves the cluster: by `device` to `next_hop`, which
/// nothing of the snapshot holds, and why the routers there do not take it
/// on where the CNI says.
pub(super) struct Lost<'a> {
    pub device: &'a str,
    pub next_hop: IpAddr,
    pub because: Option<&'a str>,
}

impl<'s> Walker<'s> {
    /// Enters a namespace: a new hop in the graph.
    pub(super) fn visit(
        &mut self,
        ns: &NetnsId,
        flow: Flow,
        arrival: Arrival,
        from: Option<(NodeIndex, Link)>,
    ) -> Next<'s> {
        let Flow {
            mut packet,
            mut branch,
        } = flow;
        // The kernel clears the mark of a packet that changes namespace.
        packet.ip.mark = 0;
        // A namespace the snapshot lacks as a whole is stepped over with the
        // CNI pack's intent, where one applies.
        let assumed = self.can_assume(ns);
        let new_hop = Hop {
            id: hop_id(ns),
            node: Some(ns.node().to_string()),
            assumed,
            steps: Vec::new(),
            // Pack checks need the namespace's dump: none at an assumed hop.
            context: (!assumed).then(|| HopContext {
                netns: ns.clone(),
                packet: packet.pack_packet(),
                in_iface: arrival.interface().map(str::to_string),
                out_iface: None,
                out_packet: None,
                redirected: false,
                delivered: false,
                received_from: None,
                last_packet: Some(packet.pack_packet()),
            }),
        };
        let hop = self.join(new_hop, from, &mut branch);
        if assumed {
            self.note_assumed(ns, hop);
        }
        Next::Enter {
            place: Place::new(ns, hop),
            flow: Flow { packet, branch },
            arrival,
        }
    }

    /// The packet is in the hop's namespace (arrived, generated there, or
    /// out of a tunnel). What happens to every packet first: a loop is
    /// caught, the arrival recorded (a locally generated packet is recorded
    /// once routing has chosen its source address), and a reply's
    /// destination un-SNATed. Then the programs attached to the device it
    /// arrived on and the namespace's kernel decide the rest, or at an
    /// assumed hop the CNI's intent.
    pub(super) fn enter(&mut self, place: &Place, flow: Flow, arrival: Arrival) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow {
            mut packet,
            mut branch,
        } = flow;
        let generated = arrival == Arrival::Local;
        self.now_holds(hop, &packet, generated, true, &mut branch);
        let key = (ns.clone(), packet.to_string(), arrival.clone());
        if branch.seen.contains(&key) || branch.seen.len() >= MAX_VISITS {
            let reason = format!(
                "the packet comes back to {} as it was: a forwarding loop",
                hop_id(ns)
            );
            let stop = Stop {
                disposition: Disposition::Loop,
                id: codes::ENGINE_LOOP,
                reason,
                evidence: vec![self.place(ns)],
            };
            return self.stop(hop, branch, stop);
        }
        branch.seen.push(key);
        if let Arrival::Received(interface) = &arrival {
            if let Some(context) = &mut self.graph[hop].context {
                context.received_from = packet.src();
            }
            let received = packet.to_string();
            self.step(
                hop,
                Step::Received {
                    interface: interface.clone(),
                    packet: received,
                },
            );
        }
        if branch.reply {
            self.undo_nat(ns, hop, &mut packet, &branch, UndoPhase::BeforeRouting);
            self.now_holds(hop, &packet, generated, true, &mut branch);
        }
        let flow = Flow { packet, branch };
        if !self.graph[hop].assumed {
            // The programs on the device it arrived on see it first.
            return self.run_programs(place, flow, Resume::Ingress { arrival }, 0, 0);
        }
        self.process_assumed(place, flow, arrival.interface())
    }

    /// A device whose far end is not in the snapshot (a node's NIC): the
    /// frame goes to whichever interface on the device's segment answers ARP
    /// for the next hop (or has the MAC address of a permanent neighbour
    /// entry, which sends no request), else to a node the snapshot lacks,
    /// else through a router of the underlay (`routed.rs`), else out of the
    /// cluster.
    pub(super) fn underlay_egress(
        &mut self,
        place: &Place,
        device: &Device,
        next_hop: IpAddr,
        flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let segment = self.topology.segment(ns, &device.ifname);
        let mut silent = None;
        match self.permanent_neighbour(ns, &device.ifname, next_hop) {
            Some(mac) => {
                let holder = segment
                    .iter()
                    .find(|port| port.link.address == Some(LinkLayerAddress::Mac(mac)));
                if let Some(port) = holder {
                    self.step(
                        hop,
                        Step::Neighbour {
                            address: next_hop,
                            interface: device.ifname.clone(),
                            result: format!(
                                "permanent entry {mac}: {}'s {}",
                                hop_id(port.ns),
                                port.link.ifname
                            ),
                        },
                    );
                    let (to, interface) = (port.ns, port.link.ifname.as_str());
                    return self.cross(place, device, LinkKind::Underlay, to, interface, flow);
                }
                let reason = format!(
                    "{}'s permanent neighbour entry for {next_hop} on {} sends the frame to {mac}, which no interface on its segment in the snapshot has",
                    hop_id(ns),
                    device.ifname
                );
                silent = Some(Stop {
                    disposition: Disposition::NeighborFailed,
                    id: codes::KERNEL_NEIGHBOUR_PERMANENT,
                    reason,
                    evidence: vec![self.file(ns, DumpFile::IpNeigh)],
                });
            }
            None => {
                let request = match self.arp_request(ns, device, next_hop, &flow.packet) {
                    Ok(request) => request,
                    Err(stop) => return self.stop(hop, flow.branch, stop),
                };
                // Those holding the address answer first; the others only
                // by proxy.
                let (holders, others): (Vec<&Port>, Vec<&Port>) = segment
                    .iter()
                    .partition(|port| self.owns(port.ns, next_hop));
                for port in holders.into_iter().chain(others) {
                    match self.arp_answer(port.ns, port.link, &request) {
                        Ok(answer) => {
                            if answer == ArpAnswer::Proxy {
                                self.answered_by_proxy(hop, device, next_hop, *port);
                            }
                            let (to, interface) = (port.ns, port.link.ifname.as_str());
                            return self.cross(
                                place,
                                device,
                                LinkKind::Underlay,
                                to,
                                interface,
                                flow,
                            );
                        }
                        // Why a holder stays silent is the answer; a
                        // non-holder that cannot be judged leaves it unknown.
                        Err(refusal) => {
                            let unknown = matches!(refusal, ArpRefusal::Unknown(_));
                            if unknown || self.owns(port.ns, next_hop) {
                                let stop =
                                    self.refused(port.ns, &port.link.ifname, next_hop, refusal);
                                if silent.is_none() || unknown {
                                    silent = Some(stop);
                                }
                            }
                        }
                    }
                }
            }
        }
        self.unanswered(place, device, next_hop, flow, silent)
    }

    /// No interface on the segment took the frame for `next_hop`: the
    /// namespace's own address loops, a holder's silence (`silent`) or a
    /// node the snapshot lacks stops or steps over it, and a next hop
    /// nobody holds is a router of the underlay.
    fn unanswered(
        &mut self,
        place: &Place,
        device: &Device,
        next_hop: IpAddr,
        flow: Flow,
        silent: Option<Stop>,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        // The namespace's own address (a route via it, an FDB entry of a
        // tunnel pointing at its own node): the packet comes back to where
        // it was sent from, never reaching another host.
        if self.owns(ns, next_hop) {
            let reason = format!(
                "{} sends the packet out of {} to {next_hop}, its own address: it comes back to {} instead of reaching another host",
                hop_id(ns),
                device.ifname,
                hop_id(ns)
            );
            let stop = Stop {
                disposition: Disposition::Loop,
                id: codes::ENGINE_LOOP,
                reason,
                evidence: vec![self.file(ns, DumpFile::IpAddr)],
            };
            return self.stop(hop, flow.branch, stop);
        }
        // A namespace of the snapshot holds the next hop, or the cluster
        // says a pod does, yet nobody on the segment answers for it (an
        // on-link route to a pod of another node, arp_ignore): the frame is
        // never sent.
        let held = !self.topology.owners(next_hop).is_empty()
            || !self.snapshot.cluster.by_ip(next_hop).is_empty();
        if let Some(stop) =
            silent.filter(|stop| held || stop.disposition == Disposition::InsufficientInfo)
        {
            return self.stop(hop, flow.branch, stop);
        }
        // A next hop that is a node of the cluster whose dump the snapshot
        // lacks: it cannot tell what happens there.
        let missing_node = self
            .snapshot
            .cluster
            .by_ip(next_hop)
            .iter()
            .find_map(|owner| match owner {
                IpOwner::Node { name } => Some(NetnsId::Host { node: name.clone() }),
                _ => None,
            })
            .filter(|node| !self.snapshot.namespaces.contains_key(node));
        if let Some(node) = missing_node {
            if self.can_assume(&node) {
                let link = (LinkKind::Underlay, device.ifname.as_str());
                return self.enter_node(hop, link, &node, next_hop, None, flow);
            }
            let stop = self.missing(
                &node,
                Wanted::Other("the node's namespace dump"),
                "follow the packet further",
            );
            return self.stop(hop, flow.branch, stop);
        }
        if let Some((unread, file)) = self.unread_holder(next_hop) {
            let to_do = format!(
                "tell whether {next_hop} is on the link of {}'s {}",
                hop_id(ns),
                device.ifname
            );
            let stop = self.missing(unread, Wanted::File(file), &to_do);
            return self.stop(hop, flow.branch, stop);
        }
        if held {
            let reason = format!(
                "no interface on the segment of {}'s {} answers ARP for {next_hop}: the namespace holding it is not on that link, and none answers by proxy",
                hop_id(ns),
                device.ifname
            );
            let stop = Stop {
                disposition: Disposition::NeighborFailed,
                id: codes::KERNEL_NEIGHBOUR_UNANSWERED,
                reason,
                evidence: vec![self.file(ns, DumpFile::routes(flow.packet.ip.family()))],
            };
            return self.stop(hop, flow.branch, stop);
        }
        // A next hop nobody holds is a router of the underlay, which
        // carries a node's packet on to the node or pod holding its
        // destination, else out of the cluster.
        self.routed_underlay(place, device, next_hop, flow)
    }

    /// The packet leaves the cluster's namespaces by `device` to `next_hop`,
    /// which nothing of the snapshot holds. For a destination inside the
    /// cluster that is the fault itself; `because` is the CNI's word on why
    /// the routers there do not take it on, where it gave one.
    pub(super) fn leaves_by(
        &mut self,
        place: &Place,
        device: &Device,
        next_hop: IpAddr,
        because: Option<&str>,
        flow: Flow,
    ) -> Next<'s> {
        let lost = Lost {
            device: &device.ifname,
            next_hop,
            because,
        };
        self.lost(place, lost, &flow.packet);
        self.leave_cluster(place.hop, &device.ifname, flow)
    }

    /// The MAC address of a neighbour entry of `ns` for `next_hop` on `dev`
    /// that is never resolved (permanent, or for a device without ARP).
    fn permanent_neighbour(&self, ns: &NetnsId, dev: &str, next_hop: IpAddr) -> Option<MacAddr> {
        let neighbours = self
            .snapshot
            .namespaces
            .get(ns)?
            .dump()
            .neighbours
            .as_ref()?;
        neighbours
            .iter()
            .filter(|n| n.dst == next_hop && n.dev == dev)
            .filter(|n| {
                n.has_state(&NeighbourState::Permanent) || n.has_state(&NeighbourState::Noarp)
            })
            .find_map(|n| match &n.lladdr {
                Some(LinkLayerAddress::Mac(mac)) => Some(*mac),
                _ => None,
            })
    }

    /// The finding for a packet that leaves the cluster though its
    /// destination is a pod, a node or a service address of it.
    pub(super) fn lost(&mut self, place: &Place, lost: Lost<'_>, packet: &Packet) {
        let (ns, hop) = (&place.ns, place.hop);
        let Lost {
            device,
            next_hop,
            because,
        } = lost;
        let because = because.map(|why| format!(" ({why})")).unwrap_or_default();
        let cluster_owner = self
            .snapshot
            .cluster
            .by_ip(packet.ip.dst)
            .iter()
            .find_map(|owner| match owner {
                IpOwner::Pod {
                    namespace, name, ..
                } => Some(format!("pod {namespace}/{name}")),
                IpOwner::Node { name } => Some(format!("node {name}")),
                _ => None,
            });
        let lost = match (cluster_owner, self.untranslated_service(packet)) {
            (Some(owner), _) => Some((
                codes::KERNEL_ROUTE_LEAVES_CLUSTER,
                format!(
                    "{} sends the packet for {owner} out of the cluster: its route to {} leads by {} to {next_hop}, which no node or pod holds{because}",
                    hop_id(ns),
                    packet.ip.dst,
                    device
                ),
                "a route to the destination through the cluster network",
                self.file(ns, DumpFile::routes(packet.ip.family())),
            )),
            (None, Some(service)) => Some((
                codes::KERNEL_NETFILTER_SERVICE_UNTRANSLATED,
                format!(
                    "{} is service {service}'s address, but {}no netfilter rule of {} translated it to a backend, so the packet leaves by {} as if for the internet",
                    packet.ip.dst,
                    self.lacking_service_port(packet)
                        .map(|lacking| format!("{lacking}: "))
                        .unwrap_or_default(),
                    hop_id(ns),
                    device
                ),
                "a DNAT to one of the service's ready endpoints (kube-proxy's KUBE-SERVICES rules)",
                self.file(ns, DumpFile::IptablesSave),
            )),
            (None, None) => None,
        };
        if let Some((id, message, expected, evidence)) = lost {
            let finding = self.finding_at(hop, id, message, vec![evidence]);
            self.findings.push(Finding {
                expected: Some(expected.into()),
                ..finding
            });
        }
    }

    /// A packet from a client outside the cluster arrives at `node` on
    /// `interface`, for `share` of the flows. The client is the path's first
    /// hop, and the connection it opens is the one the reply must come back
    /// to.
    pub(super) fn arrive_from_outside(
        &mut self,
        node: &NetnsId,
        interface: &str,
        packet: Packet,
        share: f64,
    ) -> Next<'s> {
        let mut branch = Branch::new();
        branch.probability = share;
        let client = Hop {
            id: HopId::External(packet.src()),
            node: None,
            assumed: false,
            steps: Vec::new(),
            context: None,
        };
        let client = self.join(client, None, &mut branch);
        self.sent_from_outside(client, &packet, &mut branch);
        let link = Link {
            kind: LinkKind::Outside,
            from_interface: String::new(),
            to_interface: Some(interface.to_string()),
            packet: packet.to_string(),
            fields: packet.fields(),
        };
        Next::Visit {
            ns: node.clone(),
            flow: Flow { packet, branch },
            arrival: Arrival::Received(interface.to_string()),
            from: Some((client, link)),
        }
    }

    /// The packet leaves the cluster's namespaces by `device`.
    pub(super) fn leave_cluster(&mut self, hop: NodeIndex, device: &str, flow: Flow) -> Next<'s> {
        let Flow { packet, branch } = flow;
        let outside = Hop {
            id: HopId::External(Some(packet.ip.dst)),
            node: None,
            assumed: false,
            steps: Vec::new(),
            context: None,
        };
        let link = Link {
            kind: LinkKind::Outside,
            from_interface: device.to_string(),
            to_interface: None,
            packet: packet.to_string(),
            fields: packet.fields(),
        };
        let mut branch = branch;
        let outside = self.join(outside, Some((hop, link)), &mut branch);
        // The answer to a client outside the cluster: what leaves must be
        // what the client's connection expects.
        if branch.reply
            && let Some(origin) = branch.origin.clone().filter(|origin| origin.ns.is_none())
        {
            return self.reply_left(outside, &origin, &packet, branch);
        }
        Next::Finish {
            branch,
            disposition: Disposition::ExitsCluster,
            exit: Some(self.exit(packet.src())),
        }
    }

    /// Whether the outside can answer a packet leaving with `source`.
    fn exit(&self, source: Option<IpAddr>) -> Exit {
        let Some(source) = source else {
            return Exit {
                source,
                answerable: true,
                why: "masqueraded to an address of the node the dump does not give".into(),
            };
        };
        let owners = self.snapshot.cluster.by_ip(source);
        let node = owners.iter().find_map(|owner| match owner {
            IpOwner::Node { name } => Some(name.clone()),
            _ => None,
        });
        let node = node.or_else(|| {
            self.topology
                .owners(source)
                .iter()
                .find(|(ns, _)| matches!(ns, NetnsId::Host { .. }))
                .map(|(ns, _)| ns.node().to_string())
        });
        if let Some(node) = node {
            return Exit {
                source: Some(source),
                answerable: true,
                why: format!("{node}'s address: replies are routed back to the node"),
            };
        }
        let pod = owners
            .iter()
            .find_map(|owner| match owner {
                IpOwner::Pod {
                    namespace, name, ..
                } => Some(format!("{namespace}/{name}")),
                _ => None,
            })
            .or_else(|| {
                self.topology
                    .owners(source)
                    .iter()
                    .find_map(|(ns, _)| match ns {
                        NetnsId::Pod {
                            namespace, name, ..
                        } => Some(format!("{namespace}/{name}")),
                        NetnsId::Host { .. } => None,
                    })
            });
        match pod {
            Some(pod) => Exit {
                source: Some(source),
                answerable: false,
                why: format!(
                    "pod {pod}'s address: nothing outside the cluster routes pod addresses back, and no rule masqueraded it"
                ),
            },
            None => Exit {
                source: Some(source),
                answerable: true,
                why: "not an address of a pod of the cluster".into(),
            },
        }
    }

    /// Moves the packet over a link into another namespace.
    pub(super) fn cross(
        &mut self,
        place: &Place,
        device: &Device,
        kind: LinkKind,
        to: &NetnsId,
        interface: &str,
        flow: Flow,
    ) -> Next<'s> {
        let (from, hop) = (&place.ns, place.hop);
        let Flow { packet, branch } = flow;
        // Both ends of the link must be up and have carrier (a bridge port
        // that is down is disabled, and forwards nothing).
        if let Some(stop) = self.device_down(from, device) {
            return self.stop(hop, branch, stop);
        }
        // A bridge sends a frame out of a port only if it fits that port's MTU.
        let mut packet = packet;
        if kind == LinkKind::BridgePort
            && let Some(stop) = self.oversized_frame(hop, from, device, &mut packet)
        {
            return self.stop(hop, branch, stop);
        }
        let crossing = Crossing {
            kind,
            from_interface: &device.ifname,
            to,
            interface,
        };
        self.arrive(hop, crossing, Flow { packet, branch })
    }

    /// The packet arrives over a link on `interface` of `to`, if that end is
    /// up (the sending end is checked by the caller, where it is known).
    pub(super) fn arrive(
        &mut self,
        hop: NodeIndex,
        crossing: Crossing<'_>,
        flow: Flow,
    ) -> Next<'s> {
        let (to, interface) = (crossing.to, crossing.interface);
        let Flow { packet, branch } = flow;
        let receiver = self.topology.link(to, interface);
        if let Some(stop) = receiver.and_then(|link| self.receiver_down(hop, to, link)) {
            return self.stopped_at_arrival(hop, &crossing, &packet, branch, stop, false);
        }
        let mut packet = packet;
        if matches!(crossing.kind, LinkKind::Veth | LinkKind::BridgePort)
            && let Some(receiver) = receiver
            && let Some(stop) = self.oversized_frame(hop, to, receiver, &mut packet)
        {
            return self.stopped_at_arrival(hop, &crossing, &packet, branch, stop, true);
        }
        Next::Visit {
            ns: to.clone(),
            from: Some((hop, crossing.link(&packet))),
            arrival: Arrival::Received(interface.to_string()),
            flow: Flow { packet, branch },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixture::*;
    use super::*;

    #[test]
    fn a_packet_back_in_a_namespace_as_it_was_is_a_loop() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let mut branch = branch();
            let place = walker.test_hop(&host("n1"), &mut branch);
            let packet = tcp("10.0.0.2", "10.0.0.3");
            let arrival = Arrival::Received("cni0".into());
            branch
                .seen
                .push((place.ns.clone(), packet.to_string(), arrival.clone()));
            let stop = stopped(walker.enter(&place, Flow { packet, branch }, arrival));
            assert_eq!(stop.id, codes::ENGINE_LOOP);
            assert_eq!(stop.disposition, Disposition::Loop);
        });
    }

    #[test]
    fn a_packet_entering_a_namespace_is_received_then_processed() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let flow = Flow {
                packet: tcp("10.0.0.2", "10.0.0.3"),
                branch: branch(),
            };
            let arrival = Arrival::Received("eth0".into());
            let Next::Enter {
                place,
                flow,
                arrival,
            } = walker.visit(&pod("b"), flow, arrival, None)
            else {
                panic!("visit does not enter");
            };
            assert_eq!(flow.branch.hops, [place.hop]);
            let next = walker.enter(&place, flow, arrival);
            assert!(matches!(
                &walker.graph[place.hop].steps[0].step,
                Step::Received { interface, .. } if interface == "eth0"
            ));
            // The pod's (empty) ruleset accepts: one outcome to follow.
            let Next::Fork(ways) = next else {
                panic!("{}", describe(&next));
            };
            assert_eq!(ways.len(), 1);
        });
    }

    #[test]
    fn a_receiving_device_that_is_down_takes_nothing() {
        let b = pod("b");
        let down = json!([device(
            2,
            "eth0",
            1450,
            json!({"link_index": 6, "flags": ["BROADCAST"]})
        )]);
        let files = with(
            two_pods_on_a_bridge(),
            vec![file(&b, DumpFile::IpLink, down.to_string())],
        );
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let mut branch = branch();
            let place = walker.test_hop(&host("n1"), &mut branch);
            let crossing = Crossing {
                kind: LinkKind::BridgePort,
                from_interface: "veth-b",
                to: &b,
                interface: "eth0",
            };
            let flow = Flow {
                packet: tcp("10.0.0.1", "10.0.0.3"),
                branch,
            };
            let stop = stopped(walker.arrive(place.hop, crossing, flow));
            assert_eq!(stop.id, codes::KERNEL_DEVICE_DOWN);
        });
    }

    /// n1 sends a packet from `source` to 8.8.8.8, which nobody holds.
    fn leave_from(source: &str, test: impl FnOnce(&Walker<'_>, Branch, Option<Exit>)) {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let mut branch = branch();
            let place = walker.test_hop(&host("n1"), &mut branch);
            let device = walker.topology.link(&place.ns, "cni0").unwrap();
            let flow = Flow {
                packet: tcp(source, "8.8.8.8"),
                branch,
            };
            let next = walker.underlay_egress(&place, device, "8.8.8.8".parse().unwrap(), flow);
            let Next::Finish {
                disposition,
                branch,
                exit,
            } = next
            else {
                panic!("{}", describe(&next));
            };
            assert_eq!(disposition, Disposition::ExitsCluster);
            test(walker, branch, exit)
        });
    }

    #[test]
    fn a_next_hop_nobody_holds_leaves_the_cluster_answerably_from_a_nodes_address() {
        leave_from("10.0.0.1", |walker, branch, exit| {
            let outside = *branch.hops.last().unwrap();
            assert_eq!(walker.graph[outside].id.to_string(), "8.8.8.8");
            let exit = exit.expect("how it leaves");
            assert!(exit.answerable);
            assert!(exit.why.starts_with("n1's address"), "{}", exit.why);
        });
    }

    #[test]
    fn leaving_with_a_pods_address_cannot_be_answered() {
        leave_from("10.0.0.2", |_, _, exit| {
            let exit = exit.expect("how it leaves");
            assert!(!exit.answerable);
            assert!(
                exit.why.starts_with("pod default/a's address"),
                "{}",
                exit.why
            );
        });
    }
}
