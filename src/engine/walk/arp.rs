//! Who answers a neighbour request on a link: the kernel's `arp_process`
//! for a host holding the address (under `arp_ignore`, `arp_filter` and the
//! input route's source check) or answering by proxy, and IPv6 neighbour
//! discovery, which answers for the receiving interface's own addresses.

use super::*;
use crate::engine::codes;

/// How a request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArpAnswer {
    /// By the namespace that holds the address.
    Own,
    /// By proxy ARP, for an address the namespace routes elsewhere.
    Proxy,
}

/// Why a namespace does not answer a request.
pub(super) enum ArpRefusal {
    /// The kernel stays silent: why, and the dump file that shows it.
    Silent { why: String, file: DumpFile },
    /// The snapshot cannot tell.
    Unknown(Stop),
}

/// A neighbour request on the wire.
pub(super) struct ArpRequest<'a> {
    /// The address asked for.
    pub(super) target: IpAddr,
    /// The address the request is sent from (ARP's sender protocol address).
    pub(super) sender: IpAddr,
    /// The packet waiting for the answer.
    pub(super) packet: &'a Packet,
}

impl<'s> Walker<'s> {
    /// The request `ns` sends by `device` to resolve `next_hop` for `packet`
    /// (`arp_solicit` with `arp_announce` 0): its sender address is the
    /// packet's own source where `ns` holds it, else the one `ns` picks for
    /// the device.
    pub(super) fn arp_request<'p>(
        &self,
        ns: &NetnsId,
        device: &Device,
        next_hop: IpAddr,
        packet: &'p Packet,
    ) -> Result<ArpRequest<'p>, Stop> {
        let sender = packet
            .src()
            .filter(|src| self.owns(ns, *src))
            .or_else(|| {
                let fib = self.fib(ns, Family::of(next_hop))?;
                fib.select_source(Some(&device.ifname), next_hop)
            })
            .ok_or_else(|| match self.without_addresses(std::iter::once(ns)) {
                Some(unread) => self.missing(
                    unread,
                    Wanted::File(DumpFile::IpAddr),
                    &format!("tell which address it sends an ARP request for {next_hop} from"),
                ),
                None => Stop {
                    disposition: Disposition::NeighborFailed,
                    id: codes::KERNEL_NEIGHBOUR_UNANSWERED,
                    reason: format!(
                        "{} has no address on {} to send an ARP request for {next_hop} from",
                        hop_id(ns),
                        device.ifname
                    ),
                    evidence: vec![self.file(ns, DumpFile::IpAddr)],
                },
            })?;
        Ok(ArpRequest {
            target: next_hop,
            sender,
            packet,
        })
    }

    /// The step of `hop` whose request for `next_hop` out of `device`
    /// `answerer` answered by proxy ARP.
    pub(super) fn answered_by_proxy(
        &mut self,
        hop: NodeIndex,
        device: &Device,
        next_hop: IpAddr,
        answerer: Port<'_>,
    ) {
        let result = format!(
            "answered by proxy ARP on {}'s {}",
            hop_id(answerer.ns),
            answerer.link.ifname
        );
        let step = Step::Neighbour {
            address: next_hop,
            interface: device.ifname.clone(),
            result,
        };
        self.step(hop, step);
    }

    /// The stop for a request `ns` does not answer on its interface `via`.
    pub(super) fn refused(
        &self,
        ns: &NetnsId,
        via: &str,
        target: IpAddr,
        refusal: ArpRefusal,
    ) -> Stop {
        let (why, file) = match refusal {
            ArpRefusal::Unknown(stop) => return stop,
            ArpRefusal::Silent { why, file } => (why, file),
        };
        let reason = match self.owns(ns, target) {
            true => format!(
                "{} holds {target} but does not answer ARP for it on {via}: {why}",
                hop_id(ns)
            ),
            false => format!(
                "{target} is not an address of {}, and it does not answer ARP for it by proxy on {via}: {why}",
                hop_id(ns)
            ),
        };
        Stop {
            disposition: Disposition::NeighborFailed,
            id: codes::KERNEL_NEIGHBOUR_UNANSWERED,
            reason,
            evidence: vec![self.file(ns, file)],
        }
    }

    /// Whether `ns` answers `request` arriving on its interface `iface`.
    pub(super) fn arp_answer(
        &self,
        ns: &NetnsId,
        iface: &Device,
        request: &ArpRequest,
    ) -> Result<ArpAnswer, ArpRefusal> {
        // Whether it holds the address is read from its ip-addr.json.
        if let Some(unread) = self.without_addresses(std::iter::once(ns)) {
            let to_do = format!("tell whether it answers ARP for {}", request.target);
            let stop = self.missing(unread, Wanted::File(DumpFile::IpAddr), &to_do);
            return Err(ArpRefusal::Unknown(stop));
        }
        if self.owns(ns, request.target) {
            return self
                .own_address_answer(ns, iface, request)
                .map(|()| ArpAnswer::Own);
        }
        self.proxy_arp(ns, iface, request)
            .map(|()| ArpAnswer::Proxy)
    }

    /// A request for one of the namespace's own addresses. IPv6 neighbour
    /// discovery answers for the receiving interface's addresses; ARP
    /// answers under `arp_ignore` (the larger of `all` and the interface's):
    /// 0 for any local address, 1 for the interface's own, 2 for the
    /// interface's own in the sender's subnet, 3 for any but host-scope
    /// ones, 8 never; then `arp_filter` (`all` or the interface's) answers
    /// only if the route back to the sender leaves by the interface, and the
    /// input route checks the sender's address as for any packet
    /// (rp_filter).
    fn own_address_answer(
        &self,
        ns: &NetnsId,
        iface: &Device,
        request: &ArpRequest,
    ) -> Result<(), ArpRefusal> {
        let target = request.target;
        let on_iface = |in_sender_subnet: bool| {
            self.topology.addresses(ns, &iface.ifname).any(|a| {
                a.local == target && (!in_sender_subnet || a.network.contains(&request.sender))
            })
        };
        if target.is_ipv6() {
            // `ndisc_recv_ns`: the receiving device's address alone, and not
            // while duplicate address detection runs on it (unless
            // optimistic) or after it failed.
            let held = self
                .topology
                .addresses(ns, &iface.ifname)
                .find(|a| a.local == target);
            let why = match held {
                None => format!(
                    "IPv6 neighbour discovery answers only for addresses of the receiving interface, and {target} is not on {}",
                    iface.ifname
                ),
                Some(a) if a.dadfailed => format!(
                    "duplicate address detection failed for {target} on {}: the address is not in use",
                    iface.ifname
                ),
                Some(a) if a.tentative && !a.optimistic => format!(
                    "{target} on {} is tentative (duplicate address detection has not finished): the kernel answers no solicitation for it",
                    iface.ifname
                ),
                Some(_) => return Ok(()),
            };
            return Err(ArpRefusal::Silent {
                why,
                file: DumpFile::IpAddr,
            });
        }
        let to_do = "tell whether it answers ARP";
        let ignore = self.interface_setting(ns, &iface.ifname, "arp_ignore", to_do)?;
        let silent = |why: String| ArpRefusal::Silent {
            why: format!("arp_ignore = {ignore}: {why}"),
            file: DumpFile::Sysctl,
        };
        match ignore {
            1 if !on_iface(false) => {
                return Err(silent(format!(
                    "it answers only for addresses of the receiving interface, and {target} is not on {}",
                    iface.ifname
                )));
            }
            2 if !on_iface(true) => {
                return Err(silent(format!(
                    "it answers only for addresses of the receiving interface in the sender's subnet, and {target} is not on {} in a subnet holding {}",
                    iface.ifname, request.sender
                )));
            }
            3 if self
                .topology
                .owners(target)
                .iter()
                .filter(|(owner, _)| *owner == ns)
                .all(|(_, ifname)| {
                    self.topology
                        .addresses(ns, ifname)
                        .filter(|a| a.local == target)
                        .all(|a| a.scope == Scope::Host)
                }) =>
            {
                return Err(silent(format!(
                    "it does not answer for host-scope addresses, and {target} is one"
                )));
            }
            8 => return Err(silent("it answers no request".to_string())),
            _ => {}
        }
        if self.interface_setting(ns, &iface.ifname, "arp_filter", to_do)? != 0 {
            let family = Family::of(target);
            let fib = self.fib(ns, family).ok_or_else(|| {
                ArpRefusal::Unknown(self.missing(ns, Wanted::All(&Fib::files(family)), to_do))
            })?;
            let back = fib.lookup(&FlowKey {
                src: Some(target),
                ..FlowKey::to(request.sender)
            });
            match back.outcome {
                LookupOutcome::Routed { paths, .. } if RoutePath::any_by(&paths, &iface.ifname) => {
                }
                LookupOutcome::Unknown { reason } => {
                    return Err(ArpRefusal::Unknown(Stop::unknown(
                        codes::KERNEL_ROUTE_UNKNOWN,
                        format!(
                            "whether {} answers ARP for {target} on {} is not known (arp_filter is on): {reason}",
                            hop_id(ns),
                            iface.ifname
                        ),
                        vec![self.file(ns, DumpFile::IpRoute)],
                    )));
                }
                _ => {
                    return Err(ArpRefusal::Silent {
                        why: format!(
                            "arp_filter is on and its route back to the sender {} does not leave by {}",
                            request.sender, iface.ifname
                        ),
                        file: DumpFile::IpRoute,
                    });
                }
            }
        }
        self.sender_check(ns, iface, request)
    }

    /// The input route of the request checks its sender address as for any
    /// packet arriving on `iface` (rp_filter).
    fn sender_check(
        &self,
        ns: &NetnsId,
        iface: &Device,
        request: &ArpRequest,
    ) -> Result<(), ArpRefusal> {
        let mut probe = request.packet.clone();
        (probe.ip.src, probe.ip.dst) = (request.sender, request.target);
        match self.reverse_path_filter(ns, &probe, Some(&iface.ifname)) {
            None => Ok(()),
            Some(stop) => Err(ArpRefusal::Silent {
                why: format!(
                    "the request from {} fails the input route's source check: {}",
                    request.sender, stop.reason
                ),
                file: DumpFile::Sysctl,
            }),
        }
    }

    /// An IPv4 interface setting of `ns` as the kernel reads the ARP ones:
    /// the larger of `all` and the interface's own (for the on/off ones,
    /// either being on). A value sysctl.txt lacks is left out; where it has
    /// neither, what is `to_do` cannot be told.
    fn interface_setting(
        &self,
        ns: &NetnsId,
        ifname: &str,
        name: &str,
        to_do: &str,
    ) -> Result<i64, ArpRefusal> {
        let value = self
            .sysctls(ns)
            .and_then(|sysctls| all_or_interface(sysctls, Family::Ipv4, ifname, name));
        value.ok_or_else(|| {
            let key = format!("net.ipv4.conf.{{all,{ifname}}}.{name}");
            ArpRefusal::Unknown(self.missing(ns, Wanted::In(&key, DumpFile::Sysctl), to_do))
        })
    }

    /// The kernel's `arp_process` for a request arriving on `iface` (in
    /// `ns`) for an address `ns` does not hold: it answers by proxy when
    /// `proxy_arp` is on (`all` OR'd with the device's own), the device
    /// forwards, the input route (which validates the request's sender
    /// address, rp_filter included) is unicast and leaves by another device.
    /// Explicit proxy entries (`ip neigh add proxy`) and `proxy_arp_pvlan`
    /// are not modelled: they answer nothing here. IPv6 answers by proxy
    /// only for the proxy entries of a forwarding namespace with `proxy_ndp`
    /// on (`ip-neigh-proxy.json`; unknown in a dump without it).
    fn proxy_arp(
        &self,
        ns: &NetnsId,
        iface: &Device,
        request: &ArpRequest,
    ) -> Result<(), ArpRefusal> {
        let target = request.target;
        if target.is_ipv6() {
            return self.proxy_ndp(ns, iface, target);
        }
        let to_do = "tell whether it answers ARP by proxy";
        if self.interface_setting(ns, &iface.ifname, "proxy_arp", to_do)? == 0 {
            return Err(ArpRefusal::Silent {
                why: format!(
                    "net.ipv4.conf.all.proxy_arp and net.ipv4.conf.{}.proxy_arp are 0",
                    iface.ifname
                ),
                file: DumpFile::Sysctl,
            });
        }
        if let Some(stop) = self.forwarding(ns, &iface.ifname, Family::Ipv4) {
            return Err(match stop.disposition {
                Disposition::ForwardingDisabled => ArpRefusal::Silent {
                    why: stop.reason,
                    file: DumpFile::Sysctl,
                },
                _ => ArpRefusal::Unknown(stop),
            });
        }
        self.sender_check(ns, iface, request)?;
        let family = Family::of(target);
        let fib = self.fib(ns, family).ok_or_else(|| {
            ArpRefusal::Unknown(self.missing(ns, Wanted::All(&Fib::files(family)), to_do))
        })?;
        let lookup = fib.lookup(&FlowKey {
            src: Some(request.sender),
            iif: Some(iface.ifname.clone()),
            ..FlowKey::to(target)
        });
        let silent = |why: String| {
            Err(ArpRefusal::Silent {
                why,
                file: DumpFile::IpRoute,
            })
        };
        match lookup.outcome {
            LookupOutcome::Routed {
                route_type: RouteType::Unicast,
                paths,
                ..
            } => match RoutePath::any_by(&paths, &iface.ifname) {
                false => Ok(()),
                true => silent(format!(
                    "its route to {target} leaves by {} itself",
                    iface.ifname
                )),
            },
            LookupOutcome::Routed { route_type, .. } => silent(format!(
                "its route to {target} is {route_type:?}, not unicast"
            )),
            LookupOutcome::Failed { error, .. } => {
                silent(format!("it has no route to {target} ({})", error.as_str()))
            }
            LookupOutcome::Unknown { reason } => Err(ArpRefusal::Unknown(Stop::unknown(
                codes::KERNEL_ROUTE_UNKNOWN,
                format!(
                    "whether {} answers ARP for {target} by proxy is not known: {reason}",
                    hop_id(ns)
                ),
                vec![self.file(ns, DumpFile::IpRoute)],
            ))),
        }
    }
}

impl Walker<'_> {
    /// `ndisc_recv_ns` for an address `ns` does not hold: answered by proxy
    /// only where IPv6 forwarding is on, `proxy_ndp` is on (`all` or the
    /// device's) and a proxy entry (`ip -6 neigh add proxy`) names the
    /// address on the device (`pneigh_lookup`). A dump without its proxy
    /// entries (`ip-neigh-proxy.json`, collected since this was modelled)
    /// leaves that last case unknown.
    fn proxy_ndp(&self, ns: &NetnsId, iface: &Device, target: IpAddr) -> Result<(), ArpRefusal> {
        let to_do = "tell whether it answers neighbour solicitations by proxy";
        let Some(sysctls) = self.sysctls(ns) else {
            return Err(ArpRefusal::Unknown(self.missing(
                ns,
                Wanted::File(DumpFile::Sysctl),
                to_do,
            )));
        };
        let proxy_ndp = all_or_interface(sysctls, Family::Ipv6, &iface.ifname, "proxy_ndp");
        let forwarding = sysctls
            .get_i64(&Sysctls::interface_key(
                Family::Ipv6,
                &iface.ifname,
                "forwarding",
            ))
            .ok()
            .flatten();
        match (proxy_ndp, forwarding) {
            (Some(0), _) | (_, Some(0)) => Err(ArpRefusal::Silent {
                why: format!(
                    "{target} is not an address of {}, and it answers no solicitation by proxy (net.ipv6.conf proxy_ndp = {}, forwarding = {})",
                    iface.ifname,
                    proxy_ndp.unwrap_or_default(),
                    forwarding.unwrap_or_default()
                ),
                file: DumpFile::Sysctl,
            }),
            (Some(_), Some(_)) => self.proxy_entry(ns, iface, target),
            _ => Err(ArpRefusal::Unknown(self.missing(
                ns,
                Wanted::In("net.ipv6.conf.{all,IFACE}.proxy_ndp", DumpFile::Sysctl),
                to_do,
            ))),
        }
    }
}

impl Walker<'_> {
    /// With `proxy_ndp` on and forwarding: whether a proxy entry names
    /// `target` on `iface` (`ip-neigh-proxy.json`).
    fn proxy_entry(&self, ns: &NetnsId, iface: &Device, target: IpAddr) -> Result<(), ArpRefusal> {
        let entries = self
            .snapshot
            .namespaces
            .get(ns)
            .and_then(|entry| entry.dump().proxy_neighbours.as_ref());
        let Some(entries) = entries else {
            return Err(ArpRefusal::Unknown(Stop::unknown(
                codes::KERNEL_NEIGHBOUR_UNKNOWN,
                format!(
                    "{} has proxy_ndp on for {}: whether it answers for {target} depends on its proxy entries (`ip -j neigh show proxy`, {}), which are not collected",
                    hop_id(ns),
                    iface.ifname,
                    DumpFile::IpNeighProxy.name()
                ),
                vec![self.file(ns, DumpFile::Sysctl)],
            )));
        };
        match entries
            .iter()
            .any(|entry| entry.dst == target && entry.dev == iface.ifname)
        {
            true => Ok(()),
            false => Err(ArpRefusal::Silent {
                why: format!(
                    "{target} is not an address of {}, and no proxy entry of it names {target} (proxy_ndp is on)",
                    iface.ifname
                ),
                file: DumpFile::IpNeighProxy,
            }),
        }
    }
}

/// A neighbour setting as the kernel reads it: the larger of `all`'s and
/// the interface's own (for an on/off one, either being on); `None` where
/// sysctl.txt has neither.
fn all_or_interface(sysctls: &Sysctls, family: Family, ifname: &str, name: &str) -> Option<i64> {
    ["all", ifname]
        .iter()
        .filter_map(|ifname| {
            let key = Sysctls::interface_key(family, ifname, name);
            sysctls.get_i64(&key).ok().flatten()
        })
        .max()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::fixture::*;
    use super::*;

    /// What n1 sending by eth0 to `next_hop` (for a packet to `dst`) meets,
    /// with n2's ARP settings `n2_sysctls` and `replaced` files.
    fn send(
        n2_sysctls: &str,
        replaced: Vec<(String, String)>,
        next_hop: &str,
        test: impl FnOnce(Next<'_>, &Walker<'_>, NodeIndex),
    ) {
        let files = with(two_nodes_on_a_segment(n2_sysctls), replaced);
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&host("n1"), tcp("172.18.0.11", "10.0.1.5"));
            let device = walker.topology.link(&place.ns, "eth0").unwrap();
            let next = walker.underlay_egress(&place, device, next_hop.parse().unwrap(), flow);
            test(next, walker, place.hop)
        });
    }

    fn arp(ignore: u8, filter: u8, proxy: u8) -> String {
        format!(
            "net.ipv4.conf.all.arp_ignore = {ignore}\nnet.ipv4.conf.all.arp_filter = {filter}\nnet.ipv4.conf.all.proxy_arp = {proxy}\n"
        )
    }

    /// The namespace and interface a frame crossed into.
    fn crossed_to(next: &Next<'_>) -> (NetnsId, String) {
        match next {
            Next::Visit { ns, arrival, .. } => {
                (ns.clone(), arrival.interface().unwrap().to_string())
            }
            other => panic!("{}", describe(other)),
        }
    }

    #[test]
    fn the_node_holding_the_next_hop_on_the_segment_answers() {
        send(&arp(0, 0, 0), vec![], "172.18.0.12", |next, _, _| {
            assert_eq!(crossed_to(&next), (host("n2"), "eth0".into()));
        });
    }

    #[test]
    fn with_arp_ignore_0_a_node_answers_for_an_address_of_another_interface() {
        send(&arp(0, 0, 0), vec![], "10.0.1.1", |next, _, _| {
            assert_eq!(crossed_to(&next), (host("n2"), "eth0".into()));
        });
    }

    #[test]
    fn with_arp_ignore_1_a_node_answers_only_for_the_receiving_interfaces_addresses() {
        send(&arp(1, 0, 0), vec![], "10.0.1.1", |next, _, _| {
            let stop = stopped(next);
            assert_eq!(stop.id, codes::KERNEL_NEIGHBOUR_UNANSWERED);
            assert_eq!(stop.disposition, Disposition::NeighborFailed);
            assert!(stop.reason.contains("arp_ignore = 1"), "{}", stop.reason);
            assert!(
                crate::diagnostic::evidence_text(&stop.evidence).ends_with(DumpFile::Sysctl.name()),
                "{:?}",
                stop.evidence
            );
        });
        // Its own interface's address is still answered.
        send(&arp(1, 0, 0), vec![], "172.18.0.12", |next, _, _| {
            assert_eq!(crossed_to(&next), (host("n2"), "eth0".into()));
        });
    }

    #[test]
    fn arp_ignore_takes_the_larger_of_all_and_the_interface() {
        let sysctls = format!("{}net.ipv4.conf.eth0.arp_ignore = 1\n", arp(0, 0, 0));
        send(&sysctls, vec![], "10.0.1.1", |next, _, _| {
            assert!(stopped(next).reason.contains("arp_ignore = 1"));
        });
    }

    #[test]
    fn with_arp_ignore_2_the_sender_must_be_in_the_addresses_subnet() {
        send(&arp(2, 0, 0), vec![], "172.18.0.12", |next, _, _| {
            assert_eq!(crossed_to(&next), (host("n2"), "eth0".into()));
        });
        // n1's address, 172.18.0.11, is not in 172.18.0.12/32's subnet.
        let narrow = json!([
            address(2, "eth0", "172.18.0.12", 32),
            address(3, "cni0", "10.0.1.1", 24)
        ]);
        let eth0_route = json!({"type": "unicast", "dst": "172.18.0.0/24", "dev": "eth0", "table": "main", "protocol": "boot", "scope": "link", "flags": []});
        let mut routes = vec![eth0_route];
        routes.extend(connected("10.0.1.0/24", "cni0", "10.0.1.1"));
        routes.push(json!({"type": "local", "dst": "172.18.0.12", "dev": "eth0", "table": "local", "protocol": "kernel", "scope": "host", "prefsrc": "172.18.0.12", "flags": []}));
        let n2 = host("n2");
        let replaced = vec![
            file(&n2, DumpFile::IpAddr, narrow.to_string()),
            file(&n2, DumpFile::IpRoute, Value::from(routes).to_string()),
        ];
        send(&arp(2, 0, 0), replaced, "172.18.0.12", |next, _, _| {
            let stop = stopped(next);
            assert!(stop.reason.contains("arp_ignore = 2"), "{}", stop.reason);
        });
    }

    #[test]
    fn with_arp_ignore_8_a_node_answers_nothing() {
        send(&arp(8, 0, 0), vec![], "172.18.0.12", |next, _, _| {
            let stop = stopped(next);
            assert_eq!(stop.disposition, Disposition::NeighborFailed);
            assert!(
                stop.reason.contains("answers no request"),
                "{}",
                stop.reason
            );
        });
    }

    #[test]
    fn with_arp_filter_the_route_back_to_the_sender_must_leave_by_the_receiving_interface() {
        send(&arp(0, 1, 0), vec![], "172.18.0.12", |next, _, _| {
            assert_eq!(crossed_to(&next), (host("n2"), "eth0".into()));
        });
        let n2 = host("n2");
        let mut routes = connected("172.18.0.0/24", "eth0", "172.18.0.12");
        routes.extend(connected("10.0.1.0/24", "cni0", "10.0.1.1"));
        routes.push(json!({"type": "unicast", "dst": "172.18.0.11", "dev": "cni0", "table": "main", "protocol": "boot", "scope": "link", "flags": []}));
        let replaced = vec![file(
            &n2,
            DumpFile::IpRoute,
            Value::from(routes).to_string(),
        )];
        send(&arp(0, 1, 0), replaced, "172.18.0.12", |next, _, _| {
            let stop = stopped(next);
            assert!(stop.reason.contains("arp_filter"), "{}", stop.reason);
            assert!(
                crate::diagnostic::evidence_text(&stop.evidence)
                    .ends_with(DumpFile::IpRoute.name()),
                "{:?}",
                stop.evidence
            );
        });
    }

    #[test]
    fn an_address_nobody_on_the_segment_holds_is_answered_by_proxy_where_proxy_arp_is_on() {
        send(&arp(0, 0, 1), vec![], "10.0.1.5", |next, walker, hop| {
            assert_eq!(crossed_to(&next), (host("n2"), "eth0".into()));
            assert!(walker.graph[hop].steps.iter().any(|step| matches!(
                &step.step,
                Step::Neighbour { result, .. } if result.contains("proxy ARP on n2's eth0")
            )));
        });
    }

    #[test]
    fn a_permanent_neighbour_entry_sends_to_its_mac_without_asking() {
        let n1 = host("n1");
        let entry = |mac: &str| {
            let neigh =
                json!([{"dst": "10.0.1.1", "dev": "eth0", "lladdr": mac, "state": ["PERMANENT"]}]);
            vec![file(&n1, DumpFile::IpNeigh, neigh.to_string())]
        };
        // arp_ignore 8 on n2: no ARP answer, yet the entry reaches it.
        send(
            &arp(8, 0, 0),
            entry("02:00:00:00:02:02"),
            "10.0.1.1",
            |next, _, _| {
                assert_eq!(crossed_to(&next), (host("n2"), "eth0".into()));
            },
        );
        send(
            &arp(0, 0, 0),
            entry("02:00:00:00:09:09"),
            "10.0.1.1",
            |next, _, _| {
                let stop = stopped(next);
                assert_eq!(stop.id, codes::KERNEL_NEIGHBOUR_PERMANENT);
                assert_eq!(stop.disposition, Disposition::NeighborFailed);
            },
        );
    }

    #[test]
    fn a_node_without_arp_settings_in_its_dump_cannot_be_judged() {
        send("", vec![], "172.18.0.12", |next, _, _| {
            let stop = stopped(next);
            assert_eq!(stop.disposition, Disposition::InsufficientInfo);
            assert!(stop.reason.contains("arp_ignore"), "{}", stop.reason);
        });
    }
}
