//! The connection: a branch's state, the NAT conntrack undoes for the
//! reply, the answer walked back, and the reply's arrival at its sender.

use super::*;
use crate::engine::codes;

/// The state of one branch of the walk.
#[derive(Debug, Clone)]
pub(super) struct Branch {
    pub(super) hops: Vec<NodeIndex>,
    pub(super) probability: f64,
    /// (namespace, packet, arrival) already seen on this branch.
    pub(super) seen: Vec<(NetnsId, String, Arrival)>,
    /// The sender, once routing chose its address.
    pub(super) origin: Option<Origin>,
    /// The translations netfilter made on the way there, which conntrack
    /// undoes for the reply in the same namespaces.
    pub(super) nat: Vec<(NetnsId, Translation)>,
    /// The translations a datapath program made, which that datapath
    /// undoes itself (its own connection tracking) for the reply, the
    /// first time a program of the same namespace sees it.
    pub(super) program_nat: Vec<(NetnsId, Translation)>,
    /// Walking the reply back to the sender.
    pub(super) reply: bool,
    /// The namespaces where a netfilter hook met the request's own packet
    /// (not a tunnel's outer one), and conntrack so has its connection: a
    /// program's redirect takes it past them.
    pub(super) tracked: Vec<NetnsId>,
    /// The namespaces where conntrack has the connection the reply belongs
    /// to (`tracked`, when the reply starts).
    pub(super) connection: Vec<NetnsId>,
    /// Where the request goes, as the walk has taken it so far.
    pub(super) request: RequestDestination,
}

/// A request's destination: an address and its port.
pub(super) type Destination = (IpAddr, Option<u16>);

/// Where a branch's request goes, recorded as the walk takes it: its
/// destination as the last hop holding it has it (translated there: a
/// service's DNAT), else as the link into that hop carried it. The reply
/// is not looked at. Where the path ends, this is its backend's address.
#[derive(Debug, Clone, Default)]
pub(super) struct RequestDestination {
    /// As the link into the current hop carried it (the innermost packet of
    /// a tunnel), or as it was before a hop joined without a link.
    carried: Option<Destination>,
    /// As the current hop holds it; `None` where the hop keeps no packet (an
    /// assumed hop, the world outside) or a translation gave it an address
    /// the dump does not show.
    held: Option<Destination>,
    /// The reply has started: nothing after it is the request's.
    replied: bool,
}

impl RequestDestination {
    /// A hop joins the branch, by `link` (its packet's fields) where there
    /// is one, holding `held`.
    pub(super) fn joined(&mut self, link: Option<&PacketFields>, held: Option<Destination>) {
        if self.replied {
            return;
        }
        match link {
            Some(fields) => {
                let mut fields = fields;
                while let Some(inner) = &fields.inner {
                    fields = inner;
                }
                if fields.reply {
                    self.replied = true;
                    return;
                }
                self.carried = Some((fields.ip.dst, fields.ip.dport));
            }
            None => self.carried = self.now(),
        }
        self.held = held;
    }

    /// The current hop now holds the request as `held`.
    pub(super) fn now_held(&mut self, held: Option<Destination>) {
        if !self.replied {
            self.held = held;
        }
    }

    /// The request's destination as the walk last had it.
    pub(super) fn now(&self) -> Option<Destination> {
        self.held.or(self.carried)
    }
}

impl Branch {
    /// The branch the walk starts with: the request, on its own.
    pub(super) fn new() -> Branch {
        Branch {
            hops: Vec::new(),
            probability: 1.0,
            seen: Vec::new(),
            origin: None,
            nat: Vec::new(),
            program_nat: Vec::new(),
            reply: false,
            tracked: Vec::new(),
            connection: Vec::new(),
            request: RequestDestination::default(),
        }
    }

    /// `packet` meets a conntrack hook of `ns`: where it is the request's own
    /// packet, conntrack has its connection there from then on.
    pub(super) fn track(&mut self, ns: &NetnsId, packet: &Packet) {
        if !packet.reply && packet.tunnel.is_none() && !self.tracked.contains(ns) {
            self.tracked.push(ns.clone());
        }
    }

    /// `packet` meets a netfilter hook of `ns` as `filtered`: what conntrack
    /// there knows of its connection. The request's own packet is recorded
    /// as tracked there; a reply in a namespace that never tracked its
    /// request belongs to no connection there.
    pub(super) fn conntrack(
        &mut self,
        ns: &NetnsId,
        packet: &Packet,
        filtered: netfilter::Packet,
    ) -> netfilter::Packet {
        self.track(ns, packet);
        let own = packet.tunnel.is_none();
        let mut filtered = if packet.reply && own && !self.connection.contains(ns) {
            filtered.without_connection()
        } else {
            filtered
        };
        filtered.ct_nat = self.connection_nat(ns);
        filtered.connection_socket = Some(self.has_socket_for(ns, packet));
        filtered
    }

    /// What conntrack in `ns` knows of the reply's connection: its
    /// translations there, where the request passed; `None` otherwise (and
    /// for the request itself, a new connection).
    pub(super) fn connection_nat(&self, ns: &NetnsId) -> Option<ConnectionNat> {
        if !self.reply || !self.connection.contains(ns) {
            return None;
        }
        Some(self.nat_in(ns))
    }

    /// The translations netfilter made in `ns` on this branch so far.
    pub(super) fn nat_in(&self, ns: &NetnsId) -> ConnectionNat {
        let mut nat = ConnectionNat {
            dnat: false,
            snat: false,
        };
        for (_, translation) in self.nat.iter().filter(|(at, _)| at == ns) {
            match translation {
                Translation::Dnat { .. } | Translation::Redirect { .. } => nat.dnat = true,
                Translation::Snat { .. } | Translation::Masquerade { .. } => nat.snat = true,
                _ => {}
            }
        }
        nat
    }
}

/// Who opened the connection, and to what: the reply must come back to that
/// socket, from that address, or the sender's kernel does not take it.
#[derive(Debug, Clone)]
pub(super) struct Origin {
    /// The sender's namespace; `None` for a client outside the cluster.
    pub(super) ns: Option<NetnsId>,
    pub(super) address: IpAddr,
    pub(super) port: Option<u16>,
    pub(super) target: IpAddr,
    pub(super) target_port: Option<u16>,
}

impl Branch {
    /// Whether a socket of `ns` is an end of the connection `packet`
    /// belongs to, with its addresses: the sender's, for the reply that
    /// comes back to it. The request is the connection's first packet: no
    /// socket is established for it yet.
    pub(super) fn has_socket_for(&self, ns: &NetnsId, packet: &Packet) -> bool {
        packet.reply
            && packet.tunnel.is_none()
            && self
                .origin
                .as_ref()
                .is_some_and(|origin| origin.ns.as_ref() == Some(ns) && origin.is_for(packet))
    }
}

impl Origin {
    /// The reply goes to the connection's own address and port.
    fn is_for(&self, packet: &Packet) -> bool {
        self.address == packet.ip.dst && self.port == packet.ip.dport
    }

    /// The reply comes from the address and port the connection went to.
    fn is_from_target(&self, packet: &Packet) -> bool {
        Some(self.target) == packet.src() && self.target_port == packet.ip.sport
    }
}

/// When conntrack undoes a translation for a reply: the destination (un-SNAT)
/// in PREROUTING, before the routing decision; the source (un-DNAT) in
/// POSTROUTING, after it — so routing sees the reply as it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UndoPhase {
    BeforeRouting,
    AfterRouting,
}

/// Reverses `translation` on the reply `packet` where it applies in
/// `phase`: a DNAT's (or REDIRECT's) on the reply's source after routing, a
/// SNAT's (or masquerade's) on its destination before; the step's words
/// where it did.
pub(super) fn reverse(
    translation: &Translation,
    packet: &mut Packet,
    phase: UndoPhase,
) -> Option<String> {
    match *translation {
        Translation::Dnat { before, after } | Translation::Redirect { before, after }
            if phase == UndoPhase::AfterRouting
                && packet.src() == Some(after.addr)
                && after.port.is_none_or(|p| packet.ip.sport == Some(p)) =>
        {
            packet.ip.src = before.addr;
            packet.ip.sport = before.port.or(packet.ip.sport);
            Some(format!("un-dnat {after} -> {before}"))
        }
        Translation::Snat { before, after }
        | Translation::Masquerade {
            before,
            after: Some(after),
        } if phase == UndoPhase::BeforeRouting
            && packet.ip.dst == after.addr
            && after.port.is_none_or(|p| packet.ip.dport == Some(p)) =>
        {
            packet.ip.dst = before.addr;
            packet.ip.dport = before.port.or(packet.ip.dport);
            Some(format!("un-snat {after} -> {before}"))
        }
        _ => None,
    }
}

impl<'s> Walker<'s> {
    /// A socket of the hop's namespace sent the packet; the path's first
    /// such packet opens the connection its reply must come back to.
    pub(super) fn sent(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: &Packet,
        branch: &mut Branch,
    ) {
        self.step(
            hop,
            Step::Sent {
                packet: packet.to_string(),
            },
        );
        if branch.origin.is_none()
            && let Some(src) = packet.src()
        {
            branch.origin = Some(Origin {
                ns: Some(ns.clone()),
                address: src,
                port: packet.ip.sport,
                target: packet.ip.dst,
                target_port: packet.ip.dport,
            });
        }
    }

    /// Records what netfilter rewrote (marks aside) as steps of the hop, and
    /// on the way there the address translations conntrack will undo for
    /// the reply.
    pub(super) fn record_translations(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        outcome: &Outcome<'_>,
        branch: &mut Branch,
    ) {
        for step in &outcome.trace {
            let NetfilterStep::Translation {
                hook,
                table,
                translation,
            } = step
            else {
                continue;
            };
            if matches!(
                translation,
                Translation::Mark { .. } | Translation::ConnMark { .. }
            ) {
                continue;
            }
            self.step(
                hop,
                Step::Translated {
                    hook: hook.to_string(),
                    table: table.to_string(),
                    translation: translation.to_string(),
                },
            );
            let rewrites_addresses = matches!(
                translation,
                Translation::Dnat { .. }
                    | Translation::Redirect { .. }
                    | Translation::Snat { .. }
                    | Translation::Masquerade { .. }
            );
            if rewrites_addresses && !branch.reply {
                branch.nat.push((ns.clone(), *translation));
            }
        }
    }

    /// The destination answers: the reply is walked back to the sender,
    /// since a flow only works when its answers arrive too.
    pub(super) fn answer(&mut self, place: &Place, flow: Flow) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow { packet, mut branch } = flow;
        let Some(sender) = packet.src() else {
            return self.finish(branch, Disposition::Delivered);
        };
        let reply = Packet {
            ip: net::Packet {
                dst: sender,
                ..packet.ip.reversed()
            },
            reply: true,
            tunnel: None,
            // An answer as large as the request; the kernel's echo responder
            // lets its replies be fragmented (DF clear). A probe starts
            // again at the answering interface's MTU.
            size: packet.resent(packet.ip.protocol != packet.ip.family().icmp()),
        };
        branch.reply = true;
        branch.connection = branch.tracked.clone();
        let link = Link {
            kind: LinkKind::Local,
            from_interface: "socket".into(),
            to_interface: None,
            packet: reply.to_string(),
            fields: reply.fields(),
        };
        Next::Visit {
            ns: ns.clone(),
            flow: Flow {
                packet: reply,
                branch,
            },
            arrival: Arrival::Local,
            from: Some((hop, link)),
        }
    }

    /// conntrack undoes the forward direction's NAT for the reply in the
    /// namespace that made it: the reply's destination is un-SNATed, its
    /// source un-DNATed.
    pub(super) fn undo_nat(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: &mut Packet,
        branch: &Branch,
        phase: UndoPhase,
    ) {
        for (at, translation) in &branch.nat {
            if at != ns {
                continue;
            }
            let undone = reverse(translation, packet, phase);
            if let Some(translation) = undone {
                self.step(
                    hop,
                    Step::Translated {
                        hook: "conntrack".into(),
                        table: "reply".into(),
                        translation,
                    },
                );
            }
        }
    }

    /// The client outside the cluster sent `packet`: the connection its
    /// reply must come back to.
    pub(super) fn sent_from_outside(
        &mut self,
        client: NodeIndex,
        packet: &Packet,
        branch: &mut Branch,
    ) {
        self.step(
            client,
            Step::Sent {
                packet: packet.to_string(),
            },
        );
        if let Some(src) = packet.src() {
            branch.origin = Some(Origin {
                ns: None,
                address: src,
                port: packet.ip.sport,
                target: packet.ip.dst,
                target_port: packet.ip.dport,
            });
        }
    }

    /// The reply left the cluster for the client outside it (`client`, the
    /// hop it went to): the client takes it only as the answer of its own
    /// connection, to its address and port, from the address and port it
    /// sent to.
    pub(super) fn reply_left(
        &mut self,
        client: NodeIndex,
        origin: &Origin,
        packet: &Packet,
        branch: Branch,
    ) -> Next<'s> {
        let mismatch = if !origin.is_for(packet) {
            Some(format!(
                "the reply leaves the cluster for {}, but the connection was opened from {}: the client never sees the answer",
                endpoint(Some(packet.ip.dst), packet.ip.dport),
                endpoint(Some(origin.address), origin.port)
            ))
        } else if !origin.is_from_target(packet) {
            Some(format!(
                "the reply leaves the cluster from {}, but the client sent to {}: its kernel does not match it to the connection (no un-DNAT on the way back)",
                endpoint(packet.src(), packet.ip.sport),
                endpoint(Some(origin.target), origin.target_port)
            ))
        } else {
            None
        };
        let taken = "the client's connection (the reply left the cluster for it)";
        // The client is outside the snapshot: the connection it opened is
        // the walk's own record, said in the reason.
        let opened = format!(
            "the connection the client opened: {} -> {}",
            endpoint(Some(origin.address), origin.port),
            endpoint(Some(origin.target), origin.target_port)
        );
        let mismatch = mismatch.map(|reason| format!("{reason} ({opened})"));
        self.reply_taken(client, branch, mismatch, taken, Vec::new())
    }

    /// The reply is in a namespace that takes it: it must be the sender's.
    pub(super) fn reply_arrived(&mut self, place: &Place, flow: Flow) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow { packet, branch } = flow;
        let Some(origin) = &branch.origin else {
            return self.finish(branch, Disposition::Delivered);
        };
        let mismatch = if origin.ns.as_ref() != Some(ns) || !origin.is_for(&packet) {
            Some(format!(
                "the reply is delivered in {} to {}, but the connection was opened from {} in {}: the sender never sees the answer",
                hop_id(ns),
                packet.ip.dst,
                origin.address,
                origin
                    .ns
                    .as_ref()
                    .map_or("outside the cluster".into(), |ns| hop_id(ns).to_string())
            ))
        } else if !origin.is_from_target(&packet) {
            Some(format!(
                "the reply reaches {} from {}, but the connection went to {}: the sender's kernel does not match it to the connection (no un-DNAT on the way back)",
                hop_id(ns),
                endpoint(packet.src(), packet.ip.sport),
                endpoint(Some(origin.target), origin.target_port)
            ))
        } else {
            None
        };
        let taken = "the sender's connection (the reply arrived)";
        let evidence = vec![self.place(ns)];
        self.reply_taken(hop, branch, mismatch, taken, evidence)
    }

    /// The reply at `hop` is taken by `connection`, or, where it does not
    /// match it, misdelivered: the sender never sees it.
    fn reply_taken(
        &mut self,
        hop: NodeIndex,
        branch: Branch,
        mismatch: Option<String>,
        connection: &str,
        evidence: Vec<Evidence>,
    ) -> Next<'s> {
        let Some(reason) = mismatch else {
            let socket = connection.to_string();
            self.step(hop, Step::Delivered { socket });
            return self.finish(branch, Disposition::Delivered);
        };
        let stop = Stop {
            disposition: Disposition::NoListener,
            id: codes::ENGINE_REPLY_MISDELIVERED,
            reason,
            evidence,
        };
        self.stop(hop, branch, stop)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;
    use super::*;

    fn endpoint(addr: &str, port: Option<u16>) -> netfilter::Endpoint {
        netfilter::Endpoint {
            addr: addr.parse().unwrap(),
            port,
        }
    }

    #[test]
    fn the_replys_destination_is_un_snated_before_routing_only() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let node = host("n1");
            let mut branch = branch();
            let place = walker.test_hop(&node, &mut branch);
            let masquerade = Translation::Snat {
                before: endpoint("10.0.0.2", Some(EPHEMERAL_PORT)),
                after: endpoint("172.18.0.11", Some(EPHEMERAL_PORT)),
            };
            branch.nat.push((node.clone(), masquerade));
            let mut reply = tcp("10.0.1.5", "172.18.0.11");
            reply.ip.sport = Some(8080);
            reply.ip.dport = Some(EPHEMERAL_PORT);
            walker.undo_nat(
                &node,
                place.hop,
                &mut reply,
                &branch,
                UndoPhase::AfterRouting,
            );
            assert_eq!(reply.ip.dst, "172.18.0.11".parse::<IpAddr>().unwrap());
            walker.undo_nat(
                &node,
                place.hop,
                &mut reply,
                &branch,
                UndoPhase::BeforeRouting,
            );
            assert_eq!(reply.ip.dst, "10.0.0.2".parse::<IpAddr>().unwrap());
            assert!(matches!(
                &walker.graph[place.hop].steps[0].step,
                Step::Translated { hook, .. } if hook == "conntrack"
            ));
        });
    }

    #[test]
    fn a_reply_from_another_address_than_the_connection_went_to_is_misdelivered() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let a = pod("a");
            let mut branch = branch();
            let place = walker.test_hop(&a, &mut branch);
            // The connection went to a service address; the reply comes
            // from the backend, never un-DNATed.
            branch.origin = Some(Origin {
                ns: Some(a.clone()),
                address: "10.0.0.2".parse().unwrap(),
                port: Some(EPHEMERAL_PORT),
                target: "10.96.0.100".parse().unwrap(),
                target_port: Some(80),
            });
            branch.reply = true;
            let mut reply = tcp("10.0.0.3", "10.0.0.2");
            reply.ip.sport = Some(8080);
            reply.ip.dport = Some(EPHEMERAL_PORT);
            reply.reply = true;
            let stop = stopped(walker.reply_arrived(
                &place,
                Flow {
                    packet: reply,
                    branch,
                },
            ));
            assert_eq!(stop.id, codes::ENGINE_REPLY_MISDELIVERED);
        });
    }
}
