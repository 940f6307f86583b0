//! Delivery in a namespace: a tunnel device, IPVS or a listening socket
//! takes the packet.

use super::*;

impl<'s> Walker<'s, '_> {
    /// The packet is for this namespace: a tunnel device or a socket takes
    /// it (at an assumed hop, as the CNI's intent and the cluster's objects
    /// say), or the sender's connection takes the reply.
    pub(super) fn deliver(&mut self, place: &Place, flow: Flow, iif: &str) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        if let Some(tunnel) = &flow.packet.tunnel {
            return self.decapsulate(place, &flow.packet, tunnel, flow.branch);
        }
        if flow.branch.reply {
            return self.reply_arrived(place, flow);
        }
        if self.graph[hop].assumed {
            return self.deliver_assumed(place, flow);
        }
        let Flow { packet, branch } = flow;
        if let Some(ipvs) = self.models.ipvs.get(ns)
            && let (Some(transport), Some(dport)) = (transport(packet.protocol), packet.dport)
        {
            match ipvs.schedule(transport, SocketAddr::new(packet.dst, dport), packet.mark) {
                IpvsOutcome::NotVirtual => {}
                IpvsOutcome::Scheduled { service, choices } => {
                    return self.ipvs_forward(place, Flow { packet, branch }, service, choices);
                }
                IpvsOutcome::NoRealServer { service } => {
                    let reason = format!(
                        "{}'s IPVS virtual service {} has no real server with a weight: the connection is refused",
                        hop_id(ns),
                        SocketAddr::new(packet.dst, dport)
                    );
                    let evidence = format!("{}:{}", self.file(ns, "ipvsadm.txt"), service.line);
                    let stop = Stop {
                        disposition: Disposition::NoListener,
                        id: "kernel.ipvs.no-real-server",
                        reason,
                        evidence,
                    };
                    return self.stop(hop, branch, stop);
                }
                IpvsOutcome::Unknown { reason } => {
                    let stop =
                        Stop::unknown("kernel.ipvs.unknown", reason, self.file(ns, "ipvsadm.txt"));
                    return self.stop(hop, branch, stop);
                }
            }
        }
        self.delivering(hop);
        match packet.protocol {
            Protocol::Icmp => {
                let ignored = self
                    .sysctls(ns)
                    .and_then(|s| s.get_i64("net.ipv4.icmp_echo_ignore_all").ok().flatten());
                if ignored == Some(1) {
                    let reason = format!(
                        "{} ignores echo requests: net.ipv4.icmp_echo_ignore_all = 1",
                        hop_id(ns)
                    );
                    let evidence = self.file(ns, "sysctl.txt");
                    return self.stop(
                        hop,
                        branch,
                        Stop {
                            disposition: Disposition::NoListener,
                            id: "kernel.sysctl.icmp_echo_ignore_all",
                            reason,
                            evidence,
                        },
                    );
                }
                let socket = "the kernel's ICMP echo responder".into();
                self.step(hop, Step::Delivered { socket });
                self.answer(place, Flow { packet, branch })
            }
            Protocol::Tcp | Protocol::Udp => {
                let Some(sockets) = self
                    .snapshot
                    .namespaces
                    .get(ns)
                    .and_then(|e| e.dump.sockets.as_ref())
                else {
                    return self.stop(
                        hop,
                        branch,
                        self.missing(ns, "ss.txt", "tell whether anything listens"),
                    );
                };
                let (wanted, state) = match packet.protocol {
                    Protocol::Tcp => (SocketProtocol::Tcp, SocketState::Listen),
                    _ => (SocketProtocol::Udp, SocketState::Unconn),
                };
                let listener = sockets.iter().find(|s| {
                    s.protocol == wanted
                        && s.state == state
                        && Some(s.port) == packet.dport
                        && s.interface.as_deref().is_none_or(|bound| bound == iif)
                        && match s.address {
                            LocalAddress::AnyDualStack => true,
                            LocalAddress::Ip(address) => {
                                address == packet.dst
                                    || (address.is_unspecified()
                                        && Family::of(address) == Family::of(packet.dst))
                            }
                        }
                });
                match listener {
                    Some(socket) => {
                        let address = match socket.address {
                            LocalAddress::AnyDualStack => "*".to_string(),
                            LocalAddress::Ip(address) => address.to_string(),
                        };
                        let socket = format!("{} {}:{}", packet.protocol, address, socket.port);
                        self.step(hop, Step::Delivered { socket });
                        self.answer(place, Flow { packet, branch })
                    }
                    None => {
                        let port = packet.dport.map_or("-".to_string(), |p| p.to_string());
                        let reason = format!(
                            "nothing in {} listens on {} port {port} (the kernel answers with a reset or port unreachable)",
                            hop_id(ns),
                            packet.protocol
                        );
                        let evidence = self.file(ns, "ss.txt");
                        self.stop(
                            hop,
                            branch,
                            Stop {
                                disposition: Disposition::NoListener,
                                id: "kernel.socket.no-listener",
                                reason,
                                evidence,
                            },
                        )
                    }
                }
            }
        }
    }

    /// IPVS sends the connection to each real server it may choose: the
    /// destination is rewritten (masquerade forwarding) and the packet is
    /// routed out again through OUTPUT and POSTROUTING.
    pub(super) fn ipvs_forward(
        &mut self,
        place: &Place,
        flow: Flow,
        service: &VirtualService,
        choices: Vec<Scheduled<'_>>,
    ) -> Next<'s> {
        let Flow { packet, branch } = flow;
        let (ns, hop) = (&place.ns, place.hop);
        let forks = self.fork(hop, &branch, choices.len());
        let mut ways = Vec::with_capacity(forks.len());
        for (choice, (hop, mut branch)) in choices.into_iter().zip(forks) {
            let real = choice.real_server.address;
            let before = netfilter::Endpoint {
                addr: packet.dst,
                port: packet.dport,
            };
            let after = netfilter::Endpoint {
                addr: real.ip(),
                port: Some(real.port()),
            };
            let translation = match choice.real_server.forwarding {
                Forwarding::DirectRouting => format!("ipvs direct routing of {before} to {real}"),
                _ => format!(
                    "ipvs dnat {before} -> {after} (ipvsadm.txt line {}, {:?} scheduler)",
                    choice.real_server.line, service.scheduler
                ),
            };
            self.step(
                hop,
                Step::Translated {
                    hook: "INPUT".into(),
                    table: "ipvs".into(),
                    translation,
                },
            );
            branch.probability *= choice.probability;
            let mut next = packet.clone();
            if !matches!(choice.real_server.forwarding, Forwarding::DirectRouting) {
                next.dst = real.ip();
                next.dport = Some(real.port());
                branch
                    .nat
                    .push((ns.clone(), Translation::Dnat { before, after }));
            }
            ways.push(Next::Enter {
                place: Place::new(ns, hop),
                flow: Flow {
                    packet: next,
                    branch,
                },
                arrival: Arrival::Local,
            });
        }
        Next::Fork(ways)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;
    use super::*;

    #[test]
    fn a_listening_socket_takes_the_request_and_the_reply_starts_back() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&pod("b"), tcp("10.0.0.2", "10.0.0.3"));
            let next = walker.deliver(&place, flow, "eth0");
            let Next::Visit { ns, flow, from, .. } = next else {
                panic!("{}", describe(&next));
            };
            assert_eq!(ns, pod("b"));
            assert!(flow.packet.reply && flow.branch.reply);
            assert_eq!(flow.packet.dst, "10.0.0.2".parse::<IpAddr>().unwrap());
            assert_eq!(from.unwrap().1.kind, LinkKind::Local);
        });
    }

    #[test]
    fn nothing_listening_on_the_port_is_no_listener() {
        let b = pod("b");
        let files = with(two_pods_on_a_bridge(), vec![file(&b, "ss.txt", "")]);
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&b, tcp("10.0.0.2", "10.0.0.3"));
            let stop = stopped(walker.deliver(&place, flow, "eth0"));
            assert_eq!(stop.id, "kernel.socket.no-listener");
            assert_eq!(stop.disposition, Disposition::NoListener);
        });
    }
}
