//! Sizes: a packet against a device's MTU, a frame against a veth's or
//! bridge port's, and the ICMP error a hop answers with.

use super::*;
use crate::engine::codes;

/// The ICMP error (type, code) for a packet too big for the next hop:
/// "destination unreachable, fragmentation needed and DF set" for IPv4,
/// "packet too big" for IPv6.
fn too_big(family: Family) -> (u8, u8) {
    match family {
        Family::Ipv4 => (3, 4),
        Family::Ipv6 => (2, 0),
    }
}
/// An ICMP error quotes as much of the packet as fits in 576 bytes; an
/// ICMPv6 error in IPv6's minimum MTU, 1280.
fn icmp_error_length(family: Family) -> u32 {
    match family {
        Family::Ipv4 => 576,
        Family::Ipv6 => 1280,
    }
}

/// What becomes of the ICMP error a namespace sends back for a packet
/// too large to forward (see [`Walker::frag_needed_out`]).
pub(super) enum ErrorOut {
    /// It leaves by `dev`, sent from `src`.
    Leaves { src: IpAddr, dev: String },
    /// Routing or netfilter stops it in the namespace: the sender is never told.
    Stopped {
        reason: String,
        evidence: Vec<Evidence>,
    },
    /// The snapshot cannot tell.
    Unknown { reason: String },
}

/// A veth hands a frame to its peer, and a bridge to a port, only if it is
/// no longer than the receiving device's MTU plus its Ethernet header and one
/// VLAN tag (the kernel's `is_skb_forwardable`): measured in the lab, a
/// 1404-byte packet passes a veth of MTU 1400 and a 1405-byte one is
/// dropped, without an ICMP error.
pub(super) const VLAN_HEADER: u32 = 4;

impl<'s> Walker<'s> {
    /// The IP layer sends a packet by a device only if it fits the device's
    /// MTU. A larger one is fragmented when DF is clear; with DF set it is
    /// dropped, and the sender told: ICMP fragmentation-needed to a
    /// forwarded packet's source, EMSGSIZE to a local socket, and an IPIP
    /// device answers the same for the packet it carries — a VXLAN device
    /// with `df set` tells nobody (measured in the lab: `ping -M do` through
    /// a smaller hop gets "Frag needed and DF set (mtu = N)" from that hop,
    /// and through such a VXLAN device nothing). The first device a packet
    /// leaves by sets its size when `--size` did not.
    pub(super) fn fit(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        device: &Device,
        mut packet: Packet,
        branch: &Branch,
    ) -> Result<Packet, Stop> {
        packet.size_by_device(device.mtu, self.size.is_none());
        let (Some(bytes), Some(df)) = (packet.bytes(), packet.df()) else {
            return Ok(packet);
        };
        if bytes <= device.mtu {
            return Ok(packet);
        }
        let what = sized(&packet);
        let mut evidence = self.mtu_evidence(ns, device);
        let local = self.graph[hop]
            .context
            .as_ref()
            .is_some_and(|context| context.in_iface.is_none());
        // IPv6 routers never fragment (RFC 8200): only the source may, so a
        // forwarded IPv6 packet is as if DF were set.
        let df = df || (packet.ip.family() == Family::Ipv6 && !local);
        // Measured in the lab: a VXLAN device whose outer packet does not fit
        // lowers the path MTU of the route its inner packet took. Forwarding
        // ignores that, but a socket of this namespace does not: its first DF
        // packet leaves fragmented, every later one gets EMSGSIZE.
        let route_mtu_lowered = !df
            && local
            && packet.tunnel.as_ref().is_some_and(|tunnel| {
                matches!(tunnel.encapsulation, Encapsulation::Vxlan { .. })
                    && tunnel.inner.df() == Some(true)
            });
        if !df && !route_mtu_lowered {
            let message = format!(
                "{} fragments {what} to send it by {} (MTU {}): DF is clear, so the receiver must reassemble it",
                hop_id(ns),
                device.ifname,
                device.mtu
            );
            self.add_finding(hop, codes::KERNEL_MTU_FRAGMENTED, message, evidence);
            // The fragments go on; a tunnel's inner packet is whole again
            // once the remote node reassembles the outer one.
            packet.fragment_to(device.mtu);
            return Ok(packet);
        }
        // Whether the sender learns of it, so that TCP's path MTU discovery
        // sends smaller segments.
        let (answer, told) = match &packet.tunnel {
            Some(tunnel) if route_mtu_lowered => (
                format!(
                    "the first such packet leaves fragmented, but {} then lowers the path MTU of {}'s route to {} to {}, and the sending socket gets EMSGSIZE (message too long) for every later one",
                    tunnel.device,
                    hop_id(ns),
                    tunnel.inner.ip.dst,
                    device
                        .mtu
                        .saturating_sub(tunnel.encapsulation.overhead(Family::of(packet.ip.dst)))
                ),
                Tri::True,
            ),
            Some(tunnel) if tunnel.encapsulation == Encapsulation::Ipip => (
                format!(
                    "{} drops the packet it carries and answers ICMP fragmentation-needed (MTU {}) to {}",
                    tunnel.device,
                    device
                        .mtu
                        .saturating_sub(tunnel.encapsulation.overhead(Family::of(packet.ip.dst))),
                    endpoint(tunnel.inner.src(), None)
                ),
                Tri::True,
            ),
            // Measured in the lab: `df set`, and the underlay too small: pings
            // and TCP transfers alike are lost without an ICMP error.
            Some(tunnel) => (
                format!(
                    "the outer packet is dropped ({} has df set), and the VXLAN driver tells the inner packet's sender nothing",
                    tunnel.device
                ),
                Tri::False,
            ),
            None if local => (
                "the sending socket gets EMSGSIZE (message too long)".to_string(),
                Tri::True,
            ),
            None => self.frag_needed_answer(ns, hop, &packet, branch, device, &mut evidence),
        };
        let df = if packet.ip.family() == Family::Ipv6 && !local {
            "IPv6 is never fragmented on the way"
        } else if df {
            "DF is set"
        } else {
            "the packet inside has DF set"
        };
        let reason = format!(
            "{} cannot send {what} by {}, whose MTU is {}, and {df}: {answer}",
            hop_id(ns),
            device.ifname,
            device.mtu
        );
        if packet.is_probe() {
            self.probe_finding(hop, told, &reason, bytes, evidence);
            packet.shrink_to(device.mtu);
            return Ok(packet);
        }
        Err(Stop {
            disposition: Disposition::MtuExceeded,
            id: codes::KERNEL_MTU_EXCEEDED,
            reason,
            evidence,
        })
    }

    /// What a forwarding hop answers a packet too big for `device` with:
    /// ICMP fragmentation-needed to the source the packet entered the IP
    /// layer with, and whether that error gets out of the hop (where it
    /// does not, why is added to `evidence`).
    fn frag_needed_answer(
        &self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: &Packet,
        branch: &Branch,
        device: &Device,
        evidence: &mut Vec<Evidence>,
    ) -> (String, Tri) {
        // The error goes to the source the packet entered the IP
        // layer with (out of a tunnel, the inner one's): the kernel
        // answers before FORWARD and POSTROUTING's source NAT.
        let sender = self.graph[hop]
            .context
            .as_ref()
            .and_then(|context| context.received_from)
            .or(packet.src());
        let error = match packet.ip.family() {
            Family::Ipv4 => format!("ICMP fragmentation-needed (MTU {})", device.mtu),
            Family::Ipv6 => format!("ICMPv6 packet-too-big (MTU {})", device.mtu),
        };
        // Related to the flow's connection, which has this
        // namespace's translations so far.
        let nat = branch.nat_in(ns);
        match sender.map(|sender| (sender, self.frag_needed_out(ns, sender, nat))) {
            Some((sender, ErrorOut::Leaves { src, dev })) => (
                format!("it is dropped and {error} goes back to {sender}, from {src} by {dev}"),
                Tri::True,
            ),
            Some((
                sender,
                ErrorOut::Stopped {
                    reason,
                    evidence: stopped,
                },
            )) => {
                evidence.extend(stopped);
                (
                    format!(
                        "it is dropped, and the {error} the kernel answers to {sender} never leaves {}: {reason}",
                        hop_id(ns)
                    ),
                    Tri::False,
                )
            }
            Some((sender, ErrorOut::Unknown { reason })) => (
                format!(
                    "it is dropped and {error} is sent to {sender}, but whether it leaves {} is not known: {reason}",
                    hop_id(ns)
                ),
                Tri::Unknown,
            ),
            None => (
                format!(
                    "it is dropped and {error} is sent to the packet's sender, whose address the walk lost"
                ),
                Tri::Unknown,
            ),
        }
    }

    /// The finding a probe leaves where full-size packets do not fit, by
    /// whether the sender is `told` (TCP then recovers by path MTU
    /// discovery).
    fn probe_finding(
        &mut self,
        hop: NodeIndex,
        told: Tri,
        reason: &str,
        bytes: u32,
        evidence: Vec<Evidence>,
    ) {
        match told {
            Tri::True => {
                let message = format!(
                    "full-size packets do not fit the path: {reason}; TCP recovers by path MTU discovery, a datagram of that size with DF is lost (--size {bytes} walks one)"
                );
                self.add_finding(hop, codes::KERNEL_MTU_PATH, message, evidence);
            }
            Tri::Unknown => {
                let message = format!(
                    "full-size packets do not fit the path: {reason}; whether TCP recovers by path MTU discovery depends on that error reaching the sender, a datagram of that size with DF is lost (--size {bytes} walks one)"
                );
                self.add_finding(hop, codes::KERNEL_MTU_PATH, message, evidence);
            }
            Tri::False => {
                let message = format!(
                    "full-size packets vanish on the path: {reason}; nothing tells the sender to send smaller ones, so TCP transfers stall too (--size {bytes} walks one)"
                );
                self.add_finding(hop, codes::KERNEL_MTU_BLACK_HOLE, message, evidence);
            }
        }
    }

    /// Whether the ICMP fragmentation-needed error `ns` answers a forwarded
    /// packet with gets out of `ns` toward its `sender`. The kernel's
    /// `icmp_send` routes it like any packet of the namespace (which picks
    /// its source: measured in the Calico lab, a node answers from its
    /// eth0's address, the cali veth having none) and sends it through
    /// OUTPUT and POSTROUTING, RELATED to the flow; a rule dropping it there
    /// leaves the sender to retry full-size packets for ever. The error is
    /// followed out of this namespace only.
    pub(super) fn frag_needed_out(
        &self,
        ns: &NetnsId,
        sender: IpAddr,
        nat: ConnectionNat,
    ) -> ErrorOut {
        let family = Family::of(sender);
        let (Some(fib), Some(netfilter)) = (self.fib(ns, family), self.netfilter(ns)) else {
            return ErrorOut::Unknown {
                reason: format!(
                    "the snapshot lacks {}'s routes or netfilter rules",
                    hop_id(ns)
                ),
            };
        };
        let lookup = fib.lookup(&FlowKey {
            ip_proto: Some(family.icmp()),
            ..FlowKey::to(sender)
        });
        let paths = match lookup.outcome {
            LookupOutcome::Routed { paths, .. } => paths,
            LookupOutcome::Failed { error, route, .. } => {
                let route = route.map(|r| format!(" ({})", describe_route(&fib.routes[r])));
                return ErrorOut::Stopped {
                    reason: format!("it has no route back: {error}{}", route.unwrap_or_default()),
                    evidence: vec![self.file(ns, DumpFile::routes(family))],
                };
            }
            LookupOutcome::Unknown { reason } => return ErrorOut::Unknown { reason },
        };
        let context = self.netfilter_context(ns, Some(fib));
        // Every multipath way and netfilter branch: the error leaves only if
        // all let it, and is stopped only if all stop it.
        let mut ways = Vec::new();
        for path in paths {
            let Some(src) = path.prefsrc else {
                ways.push(ErrorOut::Stopped {
                    reason: "it has no address to be sent from".to_string(),
                    evidence: vec![self.file(ns, DumpFile::IpAddr)],
                });
                continue;
            };
            let mut error = netfilter::Packet::new(src, sender, family.icmp());
            error.icmp = Some(too_big(family));
            error.ct_state = CtState::Related;
            error.ip.length = icmp_error_length(family);
            error.out_iface = path.dev.clone();
            error.ct_nat = Some(nat);
            for outcome in netfilter.traverse(PacketPath::Output, error, &context) {
                ways.push(match &outcome.verdict {
                    Verdict::Accept => ErrorOut::Leaves {
                        src,
                        dev: path.dev.clone().unwrap_or_default(),
                    },
                    verdict @ (Verdict::Drop | Verdict::Reject { .. }) => {
                        let decision = deciding_rule(&outcome.trace);
                        let verb = match verdict {
                            Verdict::Drop => "drops",
                            _ => "rejects",
                        };
                        ErrorOut::Stopped {
                            reason: format!(
                                "its netfilter {verb} it: {}",
                                decided_by(decision.as_ref())
                            ),
                            evidence: self.rule_evidence(ns, &outcome.trace, decision.as_ref()),
                        }
                    }
                    Verdict::Unroutable { error } => ErrorOut::Stopped {
                        reason: format!("rerouted after OUTPUT, it has no route: {error}"),
                        evidence: vec![self.file(ns, DumpFile::routes(family))],
                    },
                    Verdict::Unknown { reason } => ErrorOut::Unknown {
                        reason: reason.clone(),
                    },
                });
            }
        }
        let kind = |way: &ErrorOut| std::mem::discriminant(way);
        let leaving = ways
            .iter()
            .filter(|way| matches!(way, ErrorOut::Leaves { .. }))
            .count();
        let total = ways.len();
        let alike = ways.windows(2).all(|pair| kind(&pair[0]) == kind(&pair[1]));
        let unknown = ways
            .iter()
            .position(|way| matches!(way, ErrorOut::Unknown { .. }));
        match (alike, unknown) {
            (true, _) => ways.into_iter().next().unwrap_or(ErrorOut::Unknown {
                reason: "routing gave it no way out".to_string(),
            }),
            (false, Some(first)) => ways.swap_remove(first),
            (false, None) => ErrorOut::Unknown {
                reason: format!(
                    "it leaves on {leaving} of its {total} ways (multipath routes, netfilter branches)"
                ),
            },
        }
    }

    /// A frame longer than a veth's peer (or a bridge's port) takes is
    /// dropped without a word to the sender (see [`VLAN_HEADER`]). The
    /// packet walked is one datagram: TCP's segmentation-offload packets are
    /// not checked here by the kernel, which is why a TCP transfer can work
    /// where a ping of the same size does not.
    pub(super) fn oversized_frame(
        &mut self,
        hop: NodeIndex,
        ns: &NetnsId,
        device: &Device,
        packet: &mut Packet,
    ) -> Option<Stop> {
        let bytes = packet.bytes()?;
        let limit = device.mtu.saturating_add(VLAN_HEADER);
        if bytes <= limit {
            return None;
        }
        let reason = format!(
            "{} drops {} at {} (MTU {}): a veth or bridge port passes frames of at most its MTU + {VLAN_HEADER} bytes, and no ICMP error tells the sender",
            hop_id(ns),
            sized(packet),
            device.ifname,
            device.mtu
        );
        let evidence = self.mtu_evidence(ns, device);
        if packet.is_probe() {
            let message = format!(
                "full-size packets do not fit the path: {reason}; only TCP (segmentation offload, MSS) gets through, a datagram of that size is lost (--size {} walks one)",
                bytes
            );
            self.add_finding(hop, codes::KERNEL_MTU_PATH, message, evidence);
            packet.shrink_to(device.mtu);
            return None;
        }
        Some(Stop {
            disposition: Disposition::MtuExceeded,
            id: codes::KERNEL_MTU_FRAME_DROPPED,
            reason,
            evidence,
        })
    }

    /// A frame stopped as it arrives (`received`: by the device, too long
    /// for it; else at a device that is down, which takes nothing in): the
    /// receiving namespace joins the path, and the stop is its own.
    pub(super) fn stopped_at_arrival(
        &mut self,
        hop: NodeIndex,
        crossing: &Crossing<'_>,
        packet: &Packet,
        mut branch: Branch,
        stop: Stop,
        received: bool,
    ) -> Next<'s> {
        let to = crossing.to;
        let step = HopStep {
            step: Step::Received {
                interface: crossing.interface.to_string(),
                packet: packet.to_string(),
            },
            assumed: false,
        };
        let arrived = Hop {
            id: hop_id(to),
            node: Some(to.node().to_string()),
            steps: received.then_some(step).into_iter().collect(),
            context: None,
            assumed: false,
        };
        let arrived = self.join(arrived, Some((hop, crossing.link(packet))), &mut branch);
        self.stop(arrived, branch, stop)
    }

    /// The device and its MTU, where the dump shows them.
    pub(super) fn mtu_evidence(&self, ns: &NetnsId, device: &Device) -> Vec<Evidence> {
        let note = format!("{} mtu {}", device.ifname, device.mtu);
        vec![self.file(ns, DumpFile::IpLink).noting(note)]
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;
    use super::*;
    use crate::diagnostic::FindingId;

    /// `fit` of a 1500-byte packet (a probe or not) from pod a's eth0
    /// (MTU 1450), and the findings it left.
    fn fit_1500_from_a(probe: bool) -> (Result<Packet, Stop>, Vec<FindingId>) {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let a = pod("a");
            let (place, flow) =
                walker.test_flow(&a, tcp_sized("10.0.0.2", "10.0.0.3", 1500, probe));
            let eth0 = walker.topology.link(&a, "eth0").unwrap();
            let fitted = walker.fit(&a, place.hop, eth0, flow.packet, &flow.branch);
            let findings = walker.findings.iter().map(|f| f.id.clone()).collect();
            (fitted, findings)
        })
    }

    #[test]
    fn a_df_packet_larger_than_the_device_is_mtu_exceeded_from_a_socket() {
        let Err(stop) = fit_1500_from_a(false).0 else {
            panic!("1500 bytes fit an MTU of 1450");
        };
        assert_eq!(stop.id, codes::KERNEL_MTU_EXCEEDED);
        assert_eq!(stop.disposition, Disposition::MtuExceeded);
    }

    #[test]
    fn a_probe_that_does_not_fit_leaves_a_warning_and_shrinks() {
        let (fitted, findings) = fit_1500_from_a(true);
        let packet = fitted.ok().unwrap();
        assert_eq!(packet.bytes(), Some(1450));
        assert_eq!(findings, [codes::KERNEL_MTU_PATH]);
    }

    #[test]
    fn a_frame_longer_than_a_veths_mtu_and_a_vlan_header_is_dropped() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let b = pod("b");
            let mut branch = branch();
            let place = walker.test_hop(&host("n1"), &mut branch);
            let eth0 = walker.topology.link(&b, "eth0").unwrap();
            let mut fits = tcp_sized("10.0.0.2", "10.0.0.3", 1454, false);
            assert!(
                walker
                    .oversized_frame(place.hop, &b, eth0, &mut fits)
                    .is_none()
            );
            let mut too_long = tcp_sized("10.0.0.2", "10.0.0.3", 1455, false);
            let stop = walker
                .oversized_frame(place.hop, &b, eth0, &mut too_long)
                .unwrap();
            assert_eq!(stop.id, codes::KERNEL_MTU_FRAME_DROPPED);
        });
    }
}
