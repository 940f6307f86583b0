//! Delivery in a namespace: a tunnel device, IPVS or a listening socket
//! takes the packet.

use super::*;
use crate::engine::codes;
use crate::snapshot::netns::sockets::{self as ss, ListeningSocket, SocketState, waiting_state};

impl<'s> Walker<'s> {
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
        if let Some(ipvs) = self.ipvs(ns)
            && let Some(dport) = packet.ip.dport
        {
            match ipvs.schedule(
                packet.ip.protocol,
                SocketAddr::new(packet.ip.dst, dport),
                packet.ip.mark,
            ) {
                IpvsOutcome::NotVirtual => {}
                IpvsOutcome::Scheduled { service, choices } => {
                    return self.ipvs_forward(place, Flow { packet, branch }, service, choices);
                }
                IpvsOutcome::NoRealServer { service } => {
                    let reason = format!(
                        "{}'s IPVS virtual service {} has no real server with a weight: the connection is refused",
                        hop_id(ns),
                        SocketAddr::new(packet.ip.dst, dport)
                    );
                    let evidence = vec![Evidence {
                        line: Some(service.line),
                        ..self.file(ns, DumpFile::Ipvsadm)
                    }];
                    let stop = Stop {
                        disposition: Disposition::NoListener,
                        id: codes::KERNEL_IPVS_NO_REAL_SERVER,
                        reason,
                        evidence,
                    };
                    return self.stop(hop, branch, stop);
                }
                IpvsOutcome::Unknown { reason } => {
                    let stop = Stop::unknown(
                        codes::KERNEL_IPVS_UNKNOWN,
                        reason,
                        vec![self.file(ns, DumpFile::Ipvsadm)],
                    );
                    return self.stop(hop, branch, stop);
                }
            }
        }
        self.delivering(hop);
        match waiting_state(packet.ip.protocol) {
            None => {
                let key = match packet.ip.family() {
                    Family::Ipv4 => "net.ipv4.icmp_echo_ignore_all",
                    Family::Ipv6 => "net.ipv6.icmp.echo_ignore_all",
                };
                let ignored = self.sysctls(ns).and_then(|s| s.get_i64(key).ok().flatten());
                if ignored == Some(1) {
                    let reason = format!("{} ignores echo requests: {key} = 1", hop_id(ns));
                    let evidence = vec![self.file(ns, DumpFile::Sysctl)];
                    return self.stop(
                        hop,
                        branch,
                        Stop {
                            disposition: Disposition::NoListener,
                            id: codes::KERNEL_SYSCTL_ICMP_ECHO_IGNORE_ALL,
                            reason,
                            evidence,
                        },
                    );
                }
                let socket = "the kernel's ICMP echo responder".into();
                self.step(hop, Step::Delivered { socket });
                self.answer(place, Flow { packet, branch })
            }
            Some(state) => {
                let wanted = (packet.ip.protocol, state);
                let Some(sockets) = self
                    .snapshot
                    .namespaces
                    .get(ns)
                    .and_then(|e| e.dump().sockets.as_ref())
                else {
                    return self.stop(
                        hop,
                        branch,
                        self.missing(
                            ns,
                            Wanted::File(DumpFile::Ss),
                            "tell whether anything listens",
                        ),
                    );
                };
                match listener(sockets, wanted, &packet, iif) {
                    Listener::Found(socket) => {
                        let address = match socket.address {
                            LocalAddress::AnyDualStack => "*".to_string(),
                            LocalAddress::Ip(address) => address.to_string(),
                        };
                        let socket = format!("{} {}:{}", packet.ip.protocol, address, socket.port);
                        self.step(hop, Step::Delivered { socket });
                        self.answer(place, Flow { packet, branch })
                    }
                    Listener::None => {
                        let port = packet.ip.dport.map_or("-".to_string(), |p| p.to_string());
                        let answer = match packet.ip.protocol {
                            Protocol::Tcp => "a reset",
                            Protocol::Sctp => "an ABORT",
                            _ => "port unreachable",
                        };
                        let reason = format!(
                            "nothing in {} listens on {} port {port} (the kernel answers with {answer})",
                            hop_id(ns),
                            packet.ip.protocol
                        );
                        let evidence = vec![self.file(ns, DumpFile::Ss)];
                        self.stop(
                            hop,
                            branch,
                            Stop {
                                disposition: Disposition::NoListener,
                                id: codes::KERNEL_SOCKET_NO_LISTENER,
                                reason,
                                evidence,
                            },
                        )
                    }
                    Listener::Unknown(why) => {
                        let port = packet.ip.dport.map_or("-".to_string(), |p| p.to_string());
                        let reason = format!(
                            "whether anything in {} listens on {} port {port} is unknown: {why}",
                            hop_id(ns),
                            packet.ip.protocol
                        );
                        let stop = Stop::unknown(
                            codes::KERNEL_SOCKET_UNKNOWN,
                            reason,
                            vec![self.file(ns, DumpFile::Ss)],
                        );
                        self.stop(hop, branch, stop)
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
                addr: packet.ip.dst,
                port: packet.ip.dport,
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
                next.ip.dst = real.ip();
                next.ip.dport = Some(real.port());
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

/// What a namespace's listening sockets say of a request.
enum Listener<'d> {
    /// This socket takes it.
    Found(&'d ListeningSocket),
    /// No socket does: the kernel refuses it.
    None,
    /// The dump cannot tell; why.
    Unknown(String),
}

/// The socket that takes `packet`, arrived on `iif`: one of `protocol` in
/// the `state` that waits for packets on its port, bound to its destination (or to every
/// address of its family, or of both) and to no other device.
fn listener<'d>(
    sockets: &'d [ListeningSocket],
    (protocol, state): (Protocol, SocketState),
    packet: &Packet,
    iif: &str,
) -> Listener<'d> {
    let on_port: Vec<&ListeningSocket> = sockets
        .iter()
        .filter(|s| s.protocol == protocol && s.state == state && Some(s.port) == packet.ip.dport)
        .collect();
    let found = on_port.iter().find(|s| {
        s.interface.as_deref().is_none_or(|bound| bound == iif)
            && match s.address {
                LocalAddress::AnyDualStack => true,
                LocalAddress::Ip(address) => {
                    address == packet.ip.dst
                        || (address.is_unspecified()
                            && Family::of(address) == Family::of(packet.ip.dst))
                }
            }
    });
    if let Some(socket) = found {
        return Listener::Found(socket);
    }
    if !ss::lists(sockets, protocol) {
        return Listener::Unknown(ss::SCTP_UNLISTED.into());
    }
    // A multi-homed SCTP endpoint shows one of its addresses only.
    let elsewhere = on_port.iter().find_map(|s| match s.address {
        LocalAddress::Ip(address) if protocol == Protocol::Sctp && !address.is_unspecified() => {
            Some(address)
        }
        _ => None,
    });
    match elsewhere {
        Some(address) => Listener::Unknown(format!(
            "an SCTP endpoint listens on port {} at {address}, and ss shows one address of an endpoint bound to several (sctp_bindx), so it may be bound to {} too",
            on_port[0].port, packet.ip.dst
        )),
        None => Listener::None,
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
            assert_eq!(flow.packet.ip.dst, "10.0.0.2".parse::<IpAddr>().unwrap());
            assert_eq!(from.unwrap().1.kind, LinkKind::Local);
        });
    }

    /// An SCTP request from pod a to pod b:8080, with pod b's ss.txt.
    fn sctp_to_b(ss: &str, test: impl FnOnce(Next<'_>)) {
        let b = pod("b");
        let files = with(two_pods_on_a_bridge(), vec![file(&b, DumpFile::Ss, ss)]);
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let mut packet = tcp("10.0.0.2", "10.0.0.3");
            packet.ip.protocol = Protocol::Sctp;
            let (place, flow) = walker.test_flow(&b, packet);
            test(walker.deliver(&place, flow, "eth0"));
        });
    }

    #[test]
    fn a_listening_sctp_endpoint_takes_the_request() {
        sctp_to_b("sctp LISTEN 0 128 0.0.0.0:8080 0.0.0.0:*\n", |next| {
            let Next::Visit { flow, .. } = next else {
                panic!("{}", describe(&next));
            };
            assert!(flow.packet.reply);
            assert_eq!(flow.packet.ip.protocol, Protocol::Sctp);
            assert_eq!(
                (flow.packet.ip.sport, flow.packet.ip.dport),
                (Some(8080), Some(EPHEMERAL_PORT))
            );
        });
        // A TCP socket on the port is not an SCTP endpoint.
        sctp_to_b(
            "tcp LISTEN 0 128 0.0.0.0:8080 0.0.0.0:*\n\
             sctp LISTEN 0 128 0.0.0.0:38412 0.0.0.0:*\n",
            |next| {
                let stop = stopped(next);
                assert_eq!(stop.id, codes::KERNEL_SOCKET_NO_LISTENER);
                assert_eq!(stop.disposition, Disposition::NoListener);
                assert!(stop.reason.contains("sctp port 8080"), "{}", stop.reason);
                assert!(stop.reason.contains("ABORT"), "{}", stop.reason);
            },
        );
    }

    #[test]
    fn a_dump_listing_no_sctp_socket_cannot_say_nothing_listens_on_sctp() {
        // What the contract's old `ss -H -tuln` wrote: no SCTP line, ever.
        sctp_to_b("tcp LISTEN 0 128 0.0.0.0:8080 0.0.0.0:*\n", |next| {
            let stop = stopped(next);
            assert_eq!(stop.id, codes::KERNEL_SOCKET_UNKNOWN);
            assert_eq!(stop.disposition, Disposition::InsufficientInfo);
            assert!(
                stop.reason.starts_with(
                    "whether anything in default/b listens on sctp port 8080 is unknown: ss.txt lists no SCTP socket at all"
                ),
                "{}",
                stop.reason
            );
            assert!(
                crate::diagnostic::evidence_text(&stop.evidence).ends_with(DumpFile::Ss.name()),
                "{:?}",
                stop.evidence
            );
        });
    }

    #[test]
    fn an_sctp_endpoint_on_the_port_at_another_address_may_be_multi_homed() {
        sctp_to_b("sctp LISTEN 0 128 127.0.0.1:8080 0.0.0.0:*\n", |next| {
            let stop = stopped(next);
            assert_eq!(stop.id, codes::KERNEL_SOCKET_UNKNOWN);
            assert!(
                stop.reason.contains("at 127.0.0.1") && stop.reason.contains("sctp_bindx"),
                "{}",
                stop.reason
            );
        });
        // A TCP socket at another address is simply not the destination's.
        let b = pod("b");
        let files = with(
            two_pods_on_a_bridge(),
            vec![file(
                &b,
                DumpFile::Ss,
                "tcp LISTEN 0 128 127.0.0.1:8080 0.0.0.0:*\n",
            )],
        );
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&b, tcp("10.0.0.2", "10.0.0.3"));
            let stop = stopped(walker.deliver(&place, flow, "eth0"));
            assert_eq!(stop.id, codes::KERNEL_SOCKET_NO_LISTENER);
            assert!(stop.reason.contains("a reset"), "{}", stop.reason);
        });
    }

    #[test]
    fn nothing_listening_on_the_port_is_no_listener() {
        let b = pod("b");
        let files = with(two_pods_on_a_bridge(), vec![file(&b, DumpFile::Ss, "")]);
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&b, tcp("10.0.0.2", "10.0.0.3"));
            let stop = stopped(walker.deliver(&place, flow, "eth0"));
            assert_eq!(stop.id, codes::KERNEL_SOCKET_NO_LISTENER);
            assert_eq!(stop.disposition, Disposition::NoListener);
        });
    }
}
