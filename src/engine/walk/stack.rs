//! The namespace's own IP stack: netfilter with routing between its hooks,
//! route failures, forwarding and reverse-path filtering.

use std::net::Ipv6Addr;

use super::*;
use crate::engine::codes;
use crate::netstack::netfilter::RulesetKind;

/// One netfilter outcome for the packet of a hop, to follow: the packet as
/// it was before netfilter (`arrived`), the interface it came in by (none
/// for a packet generated here) and, for such a packet, the route already
/// chosen, which netfilter only reports when it re-routes.
pub(super) struct Followed<'s> {
    pub(super) arrived: Packet,
    pub(super) outcome: Outcome<'s>,
    pub(super) iif: Option<String>,
    pub(super) routed: Option<RouteChoice>,
    pub(super) branch: Branch,
}

/// The rule that decided, for a message.
pub(super) fn decided_by(decision: Option<&RuleRef>) -> String {
    decision.map_or_else(|| "no rule is recorded".to_owned(), RuleRef::description)
}

/// Where a socket sends a packet asked for `dst`: to `::1` for `::` ("a
/// BSD'ism": `tcp_v6_connect`, `udpv6_sendmsg`, `rawv6_sendmsg`, measured
/// for TCP, UDP and ping), before any route is looked up. `0.0.0.0` is
/// routing's to replace (`LookupOutcome::Routed`'s `dst`).
fn socket_destination(dst: IpAddr, protocol: Protocol) -> IpAddr {
    let sockets = matches!(protocol, Protocol::Tcp | Protocol::Udp | Protocol::Icmpv6);
    match dst {
        IpAddr::V6(any) if any.is_unspecified() && sockets => IpAddr::V6(Ipv6Addr::LOCALHOST),
        dst => dst,
    }
}

impl<'s> Walker<'s> {
    /// What the namespace's kernel does with a packet that is in it.
    pub(super) fn process(&mut self, place: &Place, flow: Flow, arrival: Arrival) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow { packet, mut branch } = flow;
        let family = packet.ip.family();
        let Some(fib) = self.fib(ns, family) else {
            let stop = self.missing(ns, Wanted::All(&Fib::files(family)), "route the packet");
            return self.stop(hop, branch, stop);
        };
        let Some(netfilter) = self.netfilter(ns) else {
            let stop = self.missing(
                ns,
                Wanted::Either(RulesetKind::iptables(family).file(), DumpFile::NftRuleset),
                "evaluate its netfilter rules",
            );
            return self.stop(hop, branch, stop);
        };
        match &arrival {
            Arrival::Received(iif) => {
                let context = self.netfilter_context(ns, Some(fib));
                let filtered = packet.netfilter_packet(packet.src().unwrap_or(packet.ip.dst));
                let mut filtered = branch.conntrack(ns, &packet, filtered);
                filtered.in_iface = Some(iif.clone());
                let outcomes = netfilter.traverse(PacketPath::Received, filtered, &context);
                let forks = self.fork(hop, &branch, outcomes.len());
                let ways = outcomes
                    .into_iter()
                    .zip(forks)
                    .map(|(outcome, (hop, branch))| {
                        let followed = Followed {
                            arrived: packet.clone(),
                            outcome,
                            iif: Some(iif.clone()),
                            routed: None,
                            branch,
                        };
                        Next::Netfilter(Place::new(ns, hop), Box::new(followed))
                    });
                Next::Fork(ways.collect())
            }
            Arrival::Local => self.send(place, Flow { packet, branch }, fib, netfilter),
        }
    }

    /// A socket's packet: routed first (that picks its source address, and
    /// the address `0.0.0.0` stands for), then OUTPUT and POSTROUTING.
    fn send(
        &mut self,
        place: &Place,
        flow: Flow,
        fib: &'s Fib<'s>,
        netfilter: &'s Netfilter<'s>,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow {
            mut packet,
            mut branch,
        } = flow;
        packet.ip.dst = socket_destination(packet.ip.dst, packet.ip.protocol);
        let context = self.netfilter_context(ns, Some(fib));
        let lookup = fib.lookup(&FlowKey {
            ip_proto: Some(packet.ip.protocol),
            dport: packet.ip.dport,
            ..FlowKey::to(packet.ip.dst)
        });
        let (paths, dst) = match lookup.outcome {
            LookupOutcome::Routed {
                paths,
                rule,
                route,
                dst,
                ..
            } => {
                let rule_text = fib.rule_text(rule);
                let route_text = fib
                    .route_text(route)
                    .unwrap_or_else(|| describe_unspecified(dst));
                let paths = paths
                    .into_iter()
                    .map(|path| (path, rule_text.clone(), route_text.clone()))
                    .collect::<Vec<_>>();
                (paths, dst)
            }
            LookupOutcome::Failed { error, rule, route } => {
                let choice = RouteChoice::Failed {
                    error,
                    rule: fib.rule_text(rule),
                    route: fib.route_text(route),
                };
                return self.route_failed(place, &packet, &choice, branch);
            }
            LookupOutcome::Unknown { reason } => {
                let evidence = vec![self.file(ns, DumpFile::routes(packet.ip.family()))];
                let stop = Stop::unknown(codes::KERNEL_ROUTE_UNKNOWN, reason, evidence);
                return self.stop(hop, branch, stop);
            }
        };
        // Every (path, netfilter outcome) pair is a branch of its own.
        let mut ways = Vec::new();
        for (path, rule, route) in paths {
            let mut packet = packet.clone();
            if dst != packet.ip.dst {
                // The socket connects to the address routing put in
                // place of the unspecified one, from the source
                // routing chose with it.
                packet.ip.dst = dst;
                packet.ip.src = path.prefsrc.unwrap_or(dst);
            } else if let (None, Some(prefsrc)) = (packet.src(), path.prefsrc) {
                packet.ip.src = prefsrc;
            }
            // A socket sends by the route's MTU where the route has one
            // (Cilium's pod routes: `mtu 1450` on a 1500-byte veth), so its
            // largest packet is that size, not the device's.
            if let (None, Some(mtu)) = (self.size, path.mtu) {
                packet.size_by_device(mtu, true);
            }
            let routed = RouteChoice::Out {
                dev: path.dev.clone(),
                gateway: path.gateway,
                rule,
                route: Some(route),
            };
            let Some(src) = packet.src() else {
                // OUTPUT's rules are not evaluated without a source, but
                // its conntrack meets the packet all the same.
                branch.track(ns, &packet);
                ways.push((packet, path.probability, routed, None));
                continue;
            };
            let mut filtered = branch.conntrack(ns, &packet, packet.netfilter_packet(src));
            filtered.out_iface = path.dev.clone();
            for outcome in netfilter.traverse(PacketPath::Output, filtered, &context) {
                ways.push((
                    packet.clone(),
                    path.probability,
                    routed.clone(),
                    Some(outcome),
                ));
            }
        }
        let forks = self.fork(hop, &branch, ways.len());
        let mut nexts = Vec::with_capacity(ways.len());
        for ((packet, share, routed, outcome), (hop, mut branch)) in ways.into_iter().zip(forks) {
            branch.probability *= share;
            self.sent(ns, hop, &packet, &mut branch);
            nexts.push(match outcome {
                Some(outcome) => {
                    let followed = Followed {
                        arrived: packet,
                        outcome,
                        iif: None,
                        routed: Some(routed),
                        branch,
                    };
                    Next::Netfilter(Place::new(ns, hop), Box::new(followed))
                }
                None => {
                    let reason = format!(
                        "{} has no address to send from by {}",
                        hop_id(ns),
                        match &routed {
                            RouteChoice::Out { dev: Some(dev), .. } => dev.as_str(),
                            _ => "?",
                        }
                    );
                    let stop = Stop {
                        disposition: Disposition::NoRoute,
                        id: codes::KERNEL_ROUTE_NO_SOURCE,
                        reason,
                        evidence: vec![self.file(ns, DumpFile::IpAddr)],
                    };
                    self.stop(hop, branch, stop)
                }
            });
        }
        Next::Fork(nexts)
    }

    /// The stop for a drop or reject, naming the rule (or policy) that decided
    /// it with its place in the dump, and recording it as the hop's step.
    pub(super) fn denial(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        outcome: &Outcome<'_>,
        what: &str,
    ) -> Stop {
        let decision = deciding_rule(&outcome.trace);
        let verb = if matches!(outcome.verdict, Verdict::Drop) {
            "drops"
        } else {
            "rejects"
        };
        let evidence = self.rule_evidence(ns, &outcome.trace, decision.as_ref());
        let reason = format!(
            "{}'s netfilter {verb} {what}: {}",
            hop_id(ns),
            decided_by(decision.as_ref())
        );
        if let Some(rule) = decision {
            let file = self.file(ns, rule.ruleset.file()).file;
            self.step(hop, Step::Netfilter { rule, file });
        }
        Stop {
            disposition: Disposition::DeniedByNetfilter,
            id: codes::KERNEL_NETFILTER_DENIED,
            reason,
            evidence,
        }
    }

    /// Follows one netfilter outcome: a verdict, or the (translated) packet
    /// delivered here or sent on.
    pub(super) fn after_netfilter(&mut self, place: &Place, followed: Followed<'s>) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Followed {
            arrived,
            outcome,
            iif,
            routed,
            mut branch,
        } = followed;
        let iif = iif.as_ref();
        branch.probability *= outcome.probability;
        let rules_file = self.file(ns, ruleset_of(&outcome.trace).file());
        self.record_translations(ns, hop, &outcome, &mut branch);
        let route = outcome.trace.iter().rev().find_map(|step| match step {
            NetfilterStep::Route { choice, .. } => Some(choice.clone()),
            _ => None,
        });
        let mut packet = arrived.clone();
        packet.take_addresses(&outcome.packet);
        // The packet as netfilter left it: what a drop here stops.
        let masqueraded_unknown = outcome.trace.iter().any(|step| {
            matches!(
                step,
                NetfilterStep::Translation {
                    translation: Translation::Masquerade { after: None, .. },
                    ..
                }
            )
        });
        self.now_holds(
            hop,
            &packet,
            iif.is_none(),
            !masqueraded_unknown,
            &mut branch,
        );
        match &outcome.verdict {
            Verdict::Drop | Verdict::Reject { .. } => {
                let stop = self.denial(ns, hop, &outcome, "the packet");
                return self.stop(hop, branch, stop);
            }
            Verdict::Unknown { reason } => {
                let stop = Stop::unknown(
                    codes::KERNEL_NETFILTER_UNKNOWN,
                    reason.clone(),
                    vec![rules_file],
                );
                return self.stop(hop, branch, stop);
            }
            Verdict::Unroutable { .. } | Verdict::Accept => {}
        }
        // Input routing validates the source the packet arrived with: the
        // source NAT of POSTROUTING (and conntrack's un-DNAT of a reply)
        // comes after it.
        let mut as_routed = packet.clone();
        as_routed.ip.src = arrived.ip.src;
        if branch.reply {
            self.undo_nat(ns, hop, &mut packet, &branch, UndoPhase::AfterRouting);
            self.now_holds(
                hop,
                &packet,
                iif.is_none(),
                !masqueraded_unknown,
                &mut branch,
            );
        }
        let Some(choice) = route.or(routed) else {
            let reason = "netfilter reported no routing decision for the packet".to_string();
            let stop = Stop::unknown(codes::ENGINE_ROUTE_MISSING, reason, vec![rules_file]);
            return self.stop(hop, branch, stop);
        };
        match choice {
            RouteChoice::Local { rule, route } => {
                self.step(
                    hop,
                    Step::Route {
                        rule: rule.unwrap_or_default(),
                        route: route.unwrap_or_default(),
                        result: "local delivery".into(),
                    },
                );
                if let Some(stop) =
                    self.reverse_path_filter(ns, &as_routed, iif.map(String::as_str))
                {
                    return self.stop(hop, branch, stop);
                }
                self.deliver(
                    place,
                    Flow { packet, branch },
                    iif.map_or("lo", String::as_str),
                )
            }
            RouteChoice::Out {
                dev,
                gateway,
                rule,
                route,
            } => {
                let dev = dev.unwrap_or_default();
                let via = match gateway {
                    Some(gateway) => format!("via {gateway} dev {dev}"),
                    None => format!("dev {dev}"),
                };
                if rule.is_some() || route.is_some() {
                    self.step(
                        hop,
                        Step::Route {
                            rule: rule.unwrap_or_default(),
                            route: route.unwrap_or_default(),
                            result: via,
                        },
                    );
                }
                if let Some(iif) = iif
                    && let Some(stop) = self
                        .forwarding(ns, iif, packet.ip.family())
                        .or_else(|| self.reverse_path_filter(ns, &as_routed, Some(iif)))
                {
                    return self.stop(hop, branch, stop);
                }
                let next_hop = gateway.unwrap_or(packet.ip.dst);
                self.egress(place, &dev, next_hop, Flow { packet, branch })
            }
            failed @ RouteChoice::Failed { .. } => {
                self.route_failed(place, &packet, &failed, branch)
            }
            RouteChoice::Unknown { reason } => {
                let stop = Stop::unknown(
                    codes::KERNEL_ROUTE_UNKNOWN,
                    reason,
                    vec![self.file(ns, DumpFile::routes(packet.ip.family()))],
                );
                self.stop(hop, branch, stop)
            }
        }
    }

    /// The kernel refused to route the packet.
    pub(super) fn route_failed(
        &mut self,
        place: &Place,
        packet: &Packet,
        choice: &RouteChoice,
        branch: Branch,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let RouteChoice::Failed { error, rule, route } = choice else {
            return Next::Fork(Vec::new());
        };
        let rule = rule.clone().unwrap_or_else(|| "-".into());
        self.step(
            hop,
            Step::Route {
                rule: rule.clone(),
                route: route.clone().unwrap_or_else(|| "-".into()),
                result: error.to_string(),
            },
        );
        let (disposition, id) = match error {
            RouteError::NoRoute => (Disposition::NoRoute, codes::KERNEL_ROUTE_NONE),
            RouteError::Martian => (Disposition::NoRoute, codes::KERNEL_ROUTE_MARTIAN),
            RouteError::Unreachable => (
                Disposition::UnreachableRoute,
                codes::KERNEL_ROUTE_UNREACHABLE,
            ),
            RouteError::Prohibit => (Disposition::UnreachableRoute, codes::KERNEL_ROUTE_PROHIBIT),
            RouteError::Blackhole => (Disposition::UnreachableRoute, codes::KERNEL_ROUTE_BLACKHOLE),
        };
        let reason = match route {
            Some(route) => format!(
                "{} has {error}: {route} (selected by rule {rule})",
                hop_id(ns)
            ),
            None => format!("{} has {error} to {}", hop_id(ns), packet.ip.dst),
        };
        let stop = Stop {
            disposition,
            id,
            reason,
            evidence: vec![self.file(ns, DumpFile::routes(packet.ip.family()))],
        };
        self.stop(hop, branch, stop)
    }

    /// The service whose address `packet` is still sent to: kube-proxy's
    /// translation never applied to it.
    pub(super) fn untranslated_service(&self, packet: &Packet) -> Option<String> {
        self.snapshot
            .cluster
            .by_ip(packet.ip.dst)
            .iter()
            .find_map(IpOwner::service)
            .map(|(namespace, name)| format!("{namespace}/{name}"))
    }

    /// Why the service whose address `packet` is sent to takes no packet of
    /// its protocol to its port: it has no such port.
    pub(super) fn lacking_service_port(
        &self,
        packet: &Packet,
    ) -> Option<crate::engine::TargetError> {
        let cluster = &self.snapshot.cluster;
        let (namespace, name) = cluster
            .by_ip(packet.ip.dst)
            .iter()
            .find_map(IpOwner::service)?;
        let service = cluster.service(namespace, name)?;
        crate::engine::target::lacking_port(service, packet.ip.dport?, packet.ip.protocol)
    }

    /// Whether `family`'s packets arriving on `iif` are forwarded: IPv4 asks
    /// the interface's `forwarding`; IPv6 only `net.ipv6.conf.all.forwarding`
    /// (`ip6_forward`: an interface's own setting changes how it acts as a
    /// router, not whether packets are forwarded).
    pub(super) fn forwarding(&self, ns: &NetnsId, iif: &str, family: Family) -> Option<Stop> {
        let Some(sysctls) = self.sysctls(ns) else {
            return Some(self.missing(
                ns,
                Wanted::File(DumpFile::Sysctl),
                "tell whether it forwards packets",
            ));
        };
        let (key, fallback) = match family {
            Family::Ipv4 => (
                Sysctls::interface_key(family, iif, "forwarding"),
                "net.ipv4.ip_forward",
            ),
            Family::Ipv6 => (
                Sysctls::interface_key(family, "all", "forwarding"),
                "net.ipv6.conf.all.forwarding",
            ),
        };
        let (key, value) = match sysctls.get_i64(&key) {
            Ok(Some(value)) => (key, value),
            _ => match sysctls.get_i64(fallback) {
                Ok(Some(value)) => (fallback.to_string(), value),
                _ => {
                    return Some(self.missing(
                        ns,
                        Wanted::In(fallback, DumpFile::Sysctl),
                        "tell whether it forwards packets",
                    ));
                }
            },
        };
        (value == 0).then(|| Stop {
            disposition: Disposition::ForwardingDisabled,
            id: codes::KERNEL_SYSCTL_FORWARDING,
            reason: format!(
                "{} does not forward packets arriving on {iif}: {key} = 0",
                hop_id(ns)
            ),
            evidence: vec![self.file(ns, DumpFile::Sysctl).noting(format!("{key} = 0"))],
        })
    }

    /// Reverse-path filtering (`rp_filter`): strict mode drops a packet
    /// whose source is not routed back out of the interface it came in on,
    /// loose mode one whose source is not routable at all. IPv4's alone:
    /// IPv6 has no such sysctl (ip6tables' `rpfilter` match does it there).
    pub(super) fn reverse_path_filter(
        &self,
        ns: &NetnsId,
        packet: &Packet,
        iif: Option<&str>,
    ) -> Option<Stop> {
        let (iif, src) = (iif?, packet.src()?);
        if iif == "lo" || packet.ip.family() == Family::Ipv6 {
            return None;
        }
        let sysctls = self.sysctls(ns)?;
        let mode = ["all", iif]
            .iter()
            .filter_map(|ifname| {
                sysctls
                    .get_i64(&Sysctls::interface_key(Family::Ipv4, ifname, "rp_filter"))
                    .ok()
                    .flatten()
            })
            .max()
            .unwrap_or(0);
        if mode == 0 {
            return None;
        }
        let fib = self.fib(ns, Family::of(src))?;
        let back = fib.lookup(&FlowKey {
            src: Some(packet.ip.dst),
            ..FlowKey::to(src)
        });
        let passes = match &back.outcome {
            LookupOutcome::Routed {
                paths, route_type, ..
            } => *route_type == RouteType::Local || mode == 2 || RoutePath::any_by(paths, iif),
            LookupOutcome::Failed { .. } => false,
            LookupOutcome::Unknown { .. } => return None,
        };
        (!passes).then(|| Stop {
            disposition: Disposition::RpFilter,
            id: codes::KERNEL_SYSCTL_RP_FILTER,
            reason: format!(
                "{} drops packets from {src} arriving on {iif}: rp_filter = {mode} ({}) and the route back to {src} does not leave by {iif}",
                hop_id(ns),
                if mode == 1 { "strict" } else { "loose" }
            ),
            evidence: vec![self.file(ns, DumpFile::Sysctl).noting(format!("rp_filter = {mode}"))],
        })
    }

    /// What netfilter consults in `ns` beside its rules: routing between
    /// hooks and the namespace's addresses.
    pub(super) fn netfilter_context<'c>(
        &'c self,
        ns: &NetnsId,
        fib: Option<&'c Fib<'s>>,
    ) -> Context<'c> {
        let dump = self.snapshot.namespaces[ns].dump();
        Context {
            fib,
            interfaces: dump.addrs.as_deref().unwrap_or_default(),
            local_addresses: &[],
            listeners: dump.sockets.as_deref(),
        }
    }

    /// A rule's place in the namespace's netfilter dump, as evidence (the
    /// ruleset the trace last tested where no rule decided).
    pub(super) fn rule_evidence(
        &self,
        ns: &NetnsId,
        trace: &[NetfilterStep<'_>],
        decision: Option<&RuleRef>,
    ) -> Vec<Evidence> {
        let Some(rule) = decision else {
            return vec![self.file(ns, ruleset_of(trace).file())];
        };
        let file = self.file(ns, rule.ruleset.file());
        vec![rule.place(file.file).noting(rule.text.clone())]
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;
    use super::*;

    #[test]
    fn a_namespace_without_routes_cannot_route() {
        let a = pod("a");
        let mut files = two_pods_on_a_bridge();
        files.retain(|(path, _)| !path.ends_with("pods/default/a/ip-route.json"));
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&a, tcp("10.0.0.2", "10.0.0.3"));
            let stop = stopped(walker.process(&place, flow, Arrival::Local));
            assert_eq!(stop.id, codes::SNAPSHOT_MISSING);
            assert_eq!(stop.disposition, Disposition::InsufficientInfo);
        });
    }

    #[test]
    fn a_socket_packet_is_routed_then_sent_then_followed_out_of_its_device() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&pod("a"), tcp("10.0.0.2", "10.0.0.3"));
            let Next::Fork(mut ways) = walker.process(&place, flow, Arrival::Local) else {
                panic!("no ways out");
            };
            assert_eq!(ways.len(), 1);
            let Some(Next::Netfilter(place, followed)) = ways.pop() else {
                panic!("not a netfilter outcome");
            };
            assert!(followed.branch.origin.is_some(), "the connection is opened");
            // Accepted, routed by eth0: the frame goes to pod b.
            let next = walker.after_netfilter(&place, *followed);
            assert!(
                matches!(&next, Next::Visit { ns, .. } if *ns == pod("b")),
                "{}",
                describe(&next)
            );
            let steps = &walker.graph[place.hop].steps;
            assert!(matches!(steps[0].step, Step::Sent { .. }));
            assert!(matches!(&steps[1].step, Step::Route { result, .. } if result == "dev eth0"));
        });
    }

    #[test]
    fn a_sockets_route_lookup_is_for_its_protocol() {
        // `ip rule add ipproto sctp unreachable`: SCTP cannot leave, TCP can.
        let a = pod("a");
        let rules = r#"[{"priority": 0, "src": "all", "table": "local"},
{"priority": 100, "src": "all", "ipproto": "sctp", "action": "unreachable"},
{"priority": 32766, "src": "all", "table": "main"}]"#;
        let files = with(
            two_pods_on_a_bridge(),
            vec![file(&a, DumpFile::IpRule, rules)],
        );
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let mut sctp = tcp("10.0.0.2", "10.0.0.3");
            sctp.ip.protocol = Protocol::Sctp;
            let (place, flow) = walker.test_flow(&a, sctp);
            let stop = stopped(walker.process(&place, flow, Arrival::Local));
            assert_eq!(stop.id, codes::KERNEL_ROUTE_UNREACHABLE);
            let (place, flow) = walker.test_flow(&a, tcp("10.0.0.2", "10.0.0.3"));
            let next = walker.process(&place, flow, Arrival::Local);
            assert!(matches!(next, Next::Fork(_)), "{}", describe(&next));
        });
    }

    #[test]
    fn a_namespace_that_does_not_forward_stops_a_packet_routed_through_it() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let stop = walker.forwarding(&pod("a"), "eth0", Family::Ipv4).unwrap();
            assert_eq!(stop.id, codes::KERNEL_SYSCTL_FORWARDING);
            assert_eq!(stop.disposition, Disposition::ForwardingDisabled);
            assert!(
                walker
                    .forwarding(&host("n1"), "cni0", Family::Ipv4)
                    .is_none()
            );
        });
    }

    #[test]
    fn strict_rp_filter_drops_a_source_routed_back_by_another_device() {
        let node = host("n1");
        let sysctls = "net.ipv4.ip_forward = 1\nnet.ipv4.conf.all.rp_filter = 1\n";
        let files = with(
            two_pods_on_a_bridge(),
            vec![file(&node, DumpFile::Sysctl, sysctls)],
        );
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            // 10.0.0.2 is routed back by cni0, not flannel.1.
            let packet = tcp("10.0.0.2", "10.0.1.5");
            let stop = walker
                .reverse_path_filter(&node, &packet, Some("flannel.1"))
                .unwrap();
            assert_eq!(stop.id, codes::KERNEL_SYSCTL_RP_FILTER);
            assert!(
                walker
                    .reverse_path_filter(&node, &packet, Some("cni0"))
                    .is_none()
            );
        });
    }
}
