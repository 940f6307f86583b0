//! Policy routing as the Linux kernel does it.
//!
//! Rules are tried in priority order (the kernel's `fib_rules_lookup`); a
//! matching rule's action looks a table up, jumps, or fails the lookup. A
//! table lookup is longest-prefix match, then the lowest metric
//! (`fib_table_lookup`). A `throw` route, or no matching route at all, hands
//! the lookup back to the next rule, as does a result that a rule's
//! `suppress_prefixlength` rejects. Blackhole, unreachable and prohibit routes
//! and rule actions end it with the kernel's error. A multipath route yields
//! every live nexthop as its own branch.
//!
//! A locally generated packet to the unspecified IPv4 address reads no
//! rule: the kernel sends it to its own source through `lo`
//! ([`Fib::lookup`]).
//!
//! Whatever the dump cannot tell (a TOS given by name, a rule action this
//! model does not know, a default route of unknown family) makes the lookup
//! [`LookupOutcome::Unknown`] at that point instead of a guess.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use super::Tri;
use crate::net::Family;
use crate::net::Protocol;
use crate::snapshot::netns::addr::InterfaceAddrs;
use crate::snapshot::netns::link::LinkFlag;
use crate::snapshot::netns::route::{Route, RouteFlag, RouteTable, RouteType, Scope, Tos};
use crate::snapshot::netns::rule::{PolicyRule, RuleAction};
use crate::snapshot::netns::sysctl::Sysctls;

/// The flow a lookup is for: what the kernel puts in its `flowi` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowKey {
    pub dst: IpAddr,
    /// The source address when it is already chosen (a forwarded packet, a bound socket).
    pub src: Option<IpAddr>,
    /// The interface the packet arrived on; `None` for a locally generated
    /// packet, which rules see as arriving on `lo`.
    pub iif: Option<String>,
    /// The interface the sender insists on (`SO_BINDTODEVICE`, `ip route get oif`).
    pub oif: Option<String>,
    pub mark: u32,
    pub tos: u8,
    pub uid: u32,
    pub ip_proto: Option<Protocol>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
}

impl FlowKey {
    /// A locally generated packet to `dst` with nothing else set.
    pub fn to(dst: IpAddr) -> FlowKey {
        FlowKey {
            dst,
            src: None,
            iif: None,
            oif: None,
            mark: 0,
            tos: 0,
            uid: 0,
            ip_proto: None,
            sport: None,
            dport: None,
        }
    }

    fn family(&self) -> Family {
        Family::of(self.dst)
    }
}

/// Why the kernel refuses to route: the error `ip route get` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    /// No rule produced a route (`ENETUNREACH`, "Network is unreachable").
    NoRoute,
    /// An `unreachable` route (`EHOSTUNREACH`) or rule (`ENETUNREACH`).
    Unreachable,
    /// A `prohibit` route or rule (`EACCES`, "Permission denied").
    Prohibit,
    /// A `blackhole` route or rule (`EINVAL`, "Invalid argument").
    Blackhole,
    /// A received packet with an address that may not arrive from outside
    /// (a loopback, multicast or `0/8` source; a loopback destination): the
    /// kernel drops it before routing (`EINVAL`).
    Martian,
}

impl RouteError {
    /// The stable name used in JSON output and findings.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteError::NoRoute => "no_route",
            RouteError::Unreachable => "unreachable",
            RouteError::Prohibit => "prohibit",
            RouteError::Blackhole => "blackhole",
            RouteError::Martian => "martian",
        }
    }
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RouteError::NoRoute => "no route (network is unreachable)",
            RouteError::Unreachable => "unreachable route (no route to host)",
            RouteError::Prohibit => "prohibit route (permission denied)",
            RouteError::Blackhole => "blackhole route (packet silently discarded)",
            RouteError::Martian => "martian address (dropped on input before routing)",
        })
    }
}

/// One way out chosen by a lookup. A multipath route gives several.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutePath {
    pub gateway: Option<IpAddr>,
    pub dev: Option<String>,
    /// The source address the kernel would give a locally generated packet.
    pub prefsrc: Option<IpAddr>,
    pub onlink: bool,
    /// The share of flows that take this path (1.0 for a single path).
    pub probability: f64,
    /// The route's `mtu` metric: the path MTU a socket sending by it uses
    /// in place of the device's (`ipv4_mtu`); forwarding ignores it.
    pub mtu: Option<u32>,
}

impl RoutePath {
    /// Whether any of `paths` leaves by `dev` (what reverse-path checks and
    /// ARP's `arp_filter` ask of a route back).
    pub fn any_by(paths: &[RoutePath], dev: &str) -> bool {
        paths.iter().any(|path| path.dev.as_deref() == Some(dev))
    }
}

/// What a lookup concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum LookupOutcome {
    Routed {
        /// Index into [`Fib::rules`] of the rule whose table held the route;
        /// `None` where the kernel reads no rule (an unspecified destination).
        rule: Option<usize>,
        /// Index into [`Fib::routes`]; `None` with `rule`.
        route: Option<usize>,
        route_type: RouteType,
        paths: Vec<RoutePath>,
        /// The destination the packet is sent to: the flow's, except the
        /// unspecified IPv4 address, which the kernel replaces with the
        /// packet's source (`127.0.0.1` when none is chosen).
        dst: IpAddr,
    },
    Failed {
        error: RouteError,
        /// The rule that failed the lookup or whose table held the failing route;
        /// `None` when no rule produced anything.
        rule: Option<usize>,
        /// The blackhole/unreachable/prohibit route, when a route (not a rule) failed it.
        route: Option<usize>,
    },
    /// The dump cannot tell what the kernel does; the reason says why.
    Unknown { reason: String },
}

/// One step of a lookup, in the order the kernel takes them.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteStep {
    /// A rule was tested against the flow.
    Rule { rule: usize, matched: Tri },
    /// A table was searched on behalf of a rule.
    Table {
        rule: usize,
        table: RouteTable,
        result: TableResult,
    },
}

/// What one table search found.
#[derive(Debug, Clone, PartialEq)]
pub enum TableResult {
    /// No route covers the destination: the next rule is tried.
    NoMatch,
    /// A route was found (index into [`Fib::routes`]).
    Found(usize),
    /// A `throw` route: the next rule is tried.
    Throw(usize),
    /// A route was found but the rule's `suppress_prefixlength` rejects it.
    Suppressed(usize),
}

/// A lookup's outcome and how it got there.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteLookup {
    pub outcome: LookupOutcome,
    pub steps: Vec<RouteStep>,
}

/// The routing state of one namespace for one address family: its rules
/// and tables (IPv4 and IPv6 have their own), and the addresses.
#[derive(Debug)]
pub struct Fib<'a> {
    pub family: Family,
    /// Rules in the order the kernel tries them (priority, then dump order).
    pub rules: Vec<&'a PolicyRule>,
    pub routes: &'a [Route],
    addrs: &'a [InterfaceAddrs],
    sysctls: Option<&'a Sysctls>,
    tables: HashMap<&'a RouteTable, TableIndex>,
}

/// The routes of one table of the FIB's family, grouped by prefix length,
/// longest first.
#[derive(Debug, Default)]
struct TableIndex {
    by_len: Vec<(u8, HashMap<IpNet, Vec<usize>>)>,
    /// `default` routes whose family the dump does not show.
    unknown_family_defaults: Vec<usize>,
}

/// Upper bound on rule steps, as a guard against `goto` loops (the kernel
/// only allows forward gotos; a dump could still show anything).
const MAX_RULE_STEPS: usize = 10_000;

impl<'a> Fib<'a> {
    /// The dump files a `family` FIB is built from: its routes, its policy
    /// rules and the addresses.
    pub fn files(family: Family) -> [crate::snapshot::netns::DumpFile; 3] {
        use crate::snapshot::netns::DumpFile;
        match family {
            Family::Ipv4 => [DumpFile::routes(family), DumpFile::IpRule, DumpFile::IpAddr],
            Family::Ipv6 => [
                DumpFile::routes(family),
                DumpFile::IpRule6,
                DumpFile::IpAddr,
            ],
        }
    }

    /// The `family` FIB of a namespace dump: that family's policy rules
    /// and routes (`ip-rule.json` and `ip-route.json` for IPv4,
    /// `ip-rule6.json` and `ip-route6.json` for IPv6) and the addresses
    /// (and sysctls, where collected); `None` when one of the three was not.
    pub fn from_dump(
        dump: &'a crate::snapshot::netns::NetnsDump,
        family: Family,
    ) -> Option<Fib<'a>> {
        let (rules, routes) = match family {
            Family::Ipv4 => (dump.rules.as_ref()?, dump.routes.as_ref()?),
            Family::Ipv6 => (dump.rules6.as_ref()?, dump.routes6.as_ref()?),
        };
        Some(Fib::new(
            family,
            rules,
            routes,
            dump.addrs.as_ref()?,
            dump.sysctls.as_ref(),
        ))
    }

    /// The FIB of `family` from its rules and routes (routes of the other
    /// family among them are left out).
    pub fn new(
        family: Family,
        rules: &'a [PolicyRule],
        routes: &'a [Route],
        addrs: &'a [InterfaceAddrs],
        sysctls: Option<&'a Sysctls>,
    ) -> Fib<'a> {
        let mut ordered: Vec<&PolicyRule> = rules.iter().collect();
        ordered.sort_by_key(|rule| rule.priority);

        let mut tables: HashMap<&RouteTable, TableIndex> = HashMap::new();
        for (index, route) in routes.iter().enumerate() {
            match route.destination() {
                Some(prefix) if Family::of(prefix.addr()) == family => {
                    tables
                        .entry(&route.table)
                        .or_default()
                        .insert(prefix, index);
                }
                Some(_) => {}
                None => tables
                    .entry(&route.table)
                    .or_default()
                    .unknown_family_defaults
                    .push(index),
            }
        }
        for table in tables.values_mut() {
            table.by_len.sort_by_key(|(len, _)| std::cmp::Reverse(*len));
            for (_, buckets) in &mut table.by_len {
                for candidates in buckets.values_mut() {
                    // The kernel keeps routes of one prefix ordered by TOS
                    // (specific first), then by metric; the sort is stable,
                    // so equal ones stay in dump order.
                    candidates.sort_by_key(|&i| {
                        let tos = match routes[i].tos {
                            Some(Tos::Value(tos)) => tos,
                            _ => 0,
                        };
                        (std::cmp::Reverse(tos), routes[i].metric.unwrap_or(0))
                    });
                }
            }
        }
        Fib {
            family,
            rules: ordered,
            routes,
            addrs,
            sysctls,
            tables,
        }
    }

    /// Looks the flow up as the kernel would.
    pub fn lookup(&self, flow: &FlowKey) -> RouteLookup {
        let mut steps = Vec::new();
        if flow.family() != self.family {
            let reason = format!(
                "{} is an {} address, and these are the {} rules and routes",
                flow.dst,
                flow.family(),
                self.family
            );
            return RouteLookup {
                outcome: LookupOutcome::Unknown { reason },
                steps,
            };
        }
        if flow.iif.is_none() && flow.dst == IpAddr::V4(Ipv4Addr::UNSPECIFIED) {
            let outcome = self.to_unspecified(flow);
            return RouteLookup { outcome, steps };
        }
        if let Some(outcome) = self.reject_martian(flow) {
            return RouteLookup { outcome, steps };
        }
        let mut outcome = self.walk_rules(flow, &mut steps);
        // Once routed, a packet from outside claiming one of our own
        // addresses as its source is refused (`fib_validate_source`), unless
        // `accept_local` allows it. Routing errors come first, as in the
        // kernel. IPv6 has no such check.
        if let (LookupOutcome::Routed { .. }, Some(iif), Some(src)) =
            (&outcome, flow.iif.as_deref(), flow.src)
            && self.family == Family::Ipv4
            && iif != "lo"
            && !src.is_unspecified()
            && self.is_local(src) == Tri::True
            && !self.sysctl_on_any(iif, "accept_local")
        {
            outcome = LookupOutcome::Failed {
                error: RouteError::Martian,
                rule: None,
                route: None,
            };
        }
        RouteLookup { outcome, steps }
    }

    /// `ip rule` text of the rule a lookup names, where it names one.
    pub fn rule_text(&self, rule: Option<usize>) -> Option<String> {
        rule.and_then(|rule| self.rules.get(rule))
            .map(|rule| describe_rule(rule))
    }

    /// `ip route` text of the route a lookup names, where it names one.
    pub fn route_text(&self, route: Option<usize>) -> Option<String> {
        route
            .and_then(|route| self.routes.get(route))
            .map(describe_route)
    }

    /// Whether `address` is one of this namespace's own, as the kernel decides
    /// it: a `local` route for it in the local table.
    pub fn is_local(&self, address: IpAddr) -> Tri {
        match self.search_table(&RouteTable::Local, address, &FlowKey::to(address)) {
            Search::Found(index) => Tri::from(self.routes[index].route_type == RouteType::Local),
            Search::NoMatch => Tri::False,
            Search::Unknown(_) => Tri::Unknown,
        }
    }

    /// A locally generated packet to `0.0.0.0` is the sender's own, before
    /// any rule is read (`ip_route_output_key_hash_rcu`): its destination
    /// becomes its source — the one asked for (which must be one of the
    /// namespace's own, or the network is unreachable), else the output
    /// device's first address when one is asked for (the device must be
    /// up), else `127.0.0.1` for both — and it goes through `lo`. The
    /// kernel names no table for it.
    fn to_unspecified(&self, flow: &FlowKey) -> LookupOutcome {
        let unreachable = LookupOutcome::Failed {
            error: RouteError::NoRoute,
            rule: None,
            route: None,
        };
        let src = flow.src.filter(|src| !src.is_unspecified());
        if let Some(src) = src {
            match self.is_local(src) {
                Tri::True => {}
                Tri::False => return unreachable,
                Tri::Unknown => {
                    return LookupOutcome::Unknown {
                        reason: format!(
                            "cannot tell whether {src} is an address of this namespace"
                        ),
                    };
                }
            }
        }
        let mut device = None;
        if let Some(oif) = &flow.oif {
            let Some(found) = self.addrs.iter().find(|iface| iface.ifname == *oif) else {
                return unreachable;
            };
            match &found.flags {
                Some(flags) if flags.contains(&LinkFlag::Up) => device = Some(found),
                Some(_) => return unreachable,
                None => {
                    return LookupOutcome::Unknown {
                        reason: format!("ip-addr.json does not say whether {oif} is up"),
                    };
                }
            }
        }
        let source = src
            .or_else(|| device.and_then(|device| self.device_source(device)))
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        LookupOutcome::Routed {
            rule: None,
            route: None,
            route_type: RouteType::Local,
            paths: vec![RoutePath {
                gateway: None,
                dev: Some("lo".into()),
                prefsrc: Some(source),
                onlink: false,
                probability: 1.0,
                mtu: None,
            }],
            dst: source,
        }
    }

    /// The source `inet_select_addr` gives a packet bound to `device` with
    /// no destination yet: the device's first primary IPv4 address, else
    /// the first primary one of any device (in the dump's order, `lo`
    /// first) that is not of link scope.
    fn device_source(&self, device: &InterfaceAddrs) -> Option<IpAddr> {
        let primary = |addr: &&crate::snapshot::netns::addr::InterfaceAddr| {
            addr.family() == Family::Ipv4 && !addr.secondary && addr.scope != Scope::Nowhere
        };
        device
            .addresses
            .iter()
            .find(primary)
            .or_else(|| {
                self.addrs
                    .iter()
                    .flat_map(|iface| iface.addresses.iter())
                    .find(|addr| primary(addr) && addr.scope != Scope::Link)
            })
            .map(|addr| addr.local)
    }

    /// A packet arriving from outside with an address that must never
    /// appear on the wire is refused before any rule is read
    /// (`ip_route_input_slow`): multicast, limited-broadcast or `0/8`
    /// sources, `0/8` destinations, and loopback addresses unless
    /// `route_localnet` is on.
    fn reject_martian(&self, flow: &FlowKey) -> Option<LookupOutcome> {
        let iif = flow.iif.as_deref().filter(|iif| *iif != "lo")?;
        let (dst, src) = match (flow.dst, flow.src) {
            (IpAddr::V4(dst), src) => (dst, src),
            (IpAddr::V6(dst), _) => return reject_martian6(dst),
        };
        let src = match src {
            Some(IpAddr::V4(src)) => src,
            _ => std::net::Ipv4Addr::UNSPECIFIED,
        };
        let martian = || {
            Some(LookupOutcome::Failed {
                error: RouteError::Martian,
                rule: None,
                route: None,
            })
        };
        if src.is_multicast() || src.is_broadcast() {
            return martian();
        }
        if dst.is_broadcast() || dst.is_multicast() {
            return Some(LookupOutcome::Unknown {
                reason: "broadcast and multicast input routing is not modelled".into(),
            });
        }
        let zeronet = |a: std::net::Ipv4Addr| a.octets()[0] == 0;
        if zeronet(src) || zeronet(dst) {
            return martian();
        }
        if (dst.is_loopback() || src.is_loopback()) && !self.route_localnet(iif) {
            return martian();
        }
        None
    }

    fn route_localnet(&self, iif: &str) -> bool {
        self.sysctl_on_any(iif, "route_localnet")
    }

    fn walk_rules(&self, flow: &FlowKey, steps: &mut Vec<RouteStep>) -> LookupOutcome {
        let mut position = 0;
        let mut budget = MAX_RULE_STEPS;
        while let Some(rule) = self.rules.get(position) {
            budget -= 1;
            if budget == 0 {
                return LookupOutcome::Unknown {
                    reason: "policy rules loop through goto".into(),
                };
            }
            let matched = rule_matches(rule, flow);
            steps.push(RouteStep::Rule {
                rule: position,
                matched,
            });
            match matched {
                Tri::False => {
                    position += 1;
                    continue;
                }
                Tri::Unknown => {
                    return LookupOutcome::Unknown {
                        reason: format!(
                            "cannot tell whether rule {} matches (a selector the dump does not resolve)",
                            rule.priority
                        ),
                    };
                }
                Tri::True => {}
            }
            let table = match &rule.action {
                RuleAction::Lookup(table) => table,
                RuleAction::Nop
                | RuleAction::Goto {
                    unresolved: true, ..
                } => {
                    position += 1;
                    continue;
                }
                RuleAction::Goto {
                    priority,
                    unresolved: false,
                } => {
                    // The kernel jumps to the first rule with exactly that priority.
                    match self.rules.iter().position(|r| r.priority == *priority) {
                        Some(target) if target > position => position = target,
                        _ => position += 1,
                    }
                    continue;
                }
                RuleAction::Blackhole => return failed(RouteError::Blackhole, position, None),
                RuleAction::Unreachable => return failed(RouteError::Unreachable, position, None),
                RuleAction::Prohibit => return failed(RouteError::Prohibit, position, None),
                RuleAction::L3mdev | RuleAction::Other(_) => {
                    return LookupOutcome::Unknown {
                        reason: format!(
                            "rule {} has an action this model does not evaluate",
                            rule.priority
                        ),
                    };
                }
            };
            let result = match self.search_table(table, flow.dst, flow) {
                Search::Unknown(reason) => return LookupOutcome::Unknown { reason },
                Search::NoMatch => TableResult::NoMatch,
                Search::Found(index) => {
                    let route = &self.routes[index];
                    let prefix_len = route.destination().map_or(0, |p| p.prefix_len());
                    if route.route_type == RouteType::Throw {
                        TableResult::Throw(index)
                    } else if rule
                        .suppress_prefixlength
                        .is_some_and(|len| u32::from(prefix_len) <= len)
                    {
                        TableResult::Suppressed(index)
                    } else {
                        TableResult::Found(index)
                    }
                }
            };
            steps.push(RouteStep::Table {
                rule: position,
                table: table.clone(),
                result: result.clone(),
            });
            if let TableResult::Found(index) = result {
                return self.conclude(position, index, flow);
            }
            position += 1;
        }
        LookupOutcome::Failed {
            error: RouteError::NoRoute,
            rule: None,
            route: None,
        }
    }

    /// The outcome once a table produced `route`.
    fn conclude(&self, rule: usize, index: usize, flow: &FlowKey) -> LookupOutcome {
        let route = &self.routes[index];
        let error = match route.route_type {
            RouteType::Blackhole => Some(RouteError::Blackhole),
            RouteType::Unreachable => Some(RouteError::Unreachable),
            RouteType::Prohibit => Some(RouteError::Prohibit),
            RouteType::Nat => {
                return LookupOutcome::Unknown {
                    reason: "route type nat is not evaluated".into(),
                };
            }
            _ => None,
        };
        if let Some(error) = error {
            return failed(error, rule, Some(index));
        }
        // The kernel hands packets for itself to the loopback device: every
        // local route, and broadcasts that arrived from outside.
        let received = flow.iif.as_deref().is_some_and(|iif| iif != "lo");
        let delivered_locally = route.route_type == RouteType::Local
            || (route.route_type == RouteType::Broadcast && received)
            || (route.route_type == RouteType::Anycast && self.family == Family::Ipv6);
        let live = self.live_nexthops(route, flow);
        let total: u32 = live.iter().map(|hop| hop.weight).sum();
        let paths = live
            .into_iter()
            .map(|hop| RoutePath {
                prefsrc: route.prefsrc.or_else(|| match flow.dst {
                    IpAddr::V4(_) => self.select_source(hop.dev, hop.gateway.unwrap_or(flow.dst)),
                    // IPv6 chooses for the destination, not the next hop.
                    IpAddr::V6(dst) => {
                        super::source6::select(self.addrs, self.sysctls, hop.dev, dst)
                            .map(IpAddr::V6)
                    }
                }),
                gateway: hop.gateway,
                dev: if delivered_locally {
                    Some("lo".to_string())
                } else {
                    hop.dev.map(str::to_string)
                },
                onlink: hop.flags.contains(&RouteFlag::Onlink)
                    || route.has_flag(&RouteFlag::Onlink),
                probability: f64::from(hop.weight) / f64::from(total.max(1)),
                mtu: route.mtu,
            })
            .collect();
        LookupOutcome::Routed {
            rule: Some(rule),
            route: Some(index),
            route_type: route.route_type.clone(),
            paths,
            dst: flow.dst,
        }
    }

    /// Searches one table: longest prefix first, then the order the kernel
    /// keeps routes of one prefix in. A route none of whose nexthops can be
    /// used is passed over, as the kernel's trie walk does.
    fn search_table(&self, table: &RouteTable, dst: IpAddr, flow: &FlowKey) -> Search {
        let Some(index) = self.tables.get(table) else {
            return Search::NoMatch;
        };
        for (len, buckets) in &index.by_len {
            let Ok(key) = IpNet::new(dst, *len).map(|net| net.trunc()) else {
                continue;
            };
            let Some(candidates) = buckets.get(&key) else {
                continue;
            };
            if self.family == Family::Ipv6 {
                match self.choose6(candidates, flow) {
                    Search::NoMatch => continue,
                    Search::Unknown(reason) => {
                        return Search::Unknown(format!("{reason} in table {}", table_name(table)));
                    }
                    found => return found,
                }
            }
            for &candidate in candidates {
                match self.usable(&self.routes[candidate], flow) {
                    Tri::True => return Search::Found(candidate),
                    Tri::False => {}
                    Tri::Unknown => {
                        return Search::Unknown(format!(
                            "cannot tell whether route {} in table {} applies",
                            describe_route(&self.routes[candidate]),
                            table_name(table)
                        ));
                    }
                }
            }
        }
        if let Some(&first) = index.unknown_family_defaults.first() {
            return Search::Unknown(format!(
                "table {} has a default route ({}) whose family the dump does not show",
                table_name(table),
                describe_route(&self.routes[first])
            ));
        }
        Search::NoMatch
    }

    /// Of the IPv6 routes of one prefix (ordered by metric), the one
    /// `rt6_select` takes: among the lowest metric with a usable route, one
    /// by the flow's device (the requested output interface, or the one a
    /// received packet arrived on) before one by another device, the first
    /// of equals. A link-local, loopback or multicast destination must use
    /// that device (`rt6_need_strict`), and so must a local packet given an
    /// output interface but no source (`ip6_route_output_flags`). Where no
    /// route of the prefix will do, the kernel backtracks to shorter ones.
    fn choose6(&self, candidates: &[usize], flow: &FlowKey) -> Search {
        let device = flow.oif.as_deref().or(flow.iif.as_deref());
        let strict = device.is_some()
            && (need_strict(flow.dst) || (flow.oif.is_some() && flow.src.is_none()));
        let mut best: Option<(usize, bool)> = None;
        for &candidate in candidates {
            let route = &self.routes[candidate];
            if let Some((chosen, _)) = best
                && self.routes[chosen].metric != route.metric
            {
                break;
            }
            match self.usable(route, flow) {
                Tri::True => {}
                Tri::False => continue,
                Tri::Unknown => {
                    return Search::Unknown(format!(
                        "cannot tell whether route {} applies",
                        describe_route(route)
                    ));
                }
            }
            let by_device = device.is_some_and(|device| {
                self.live_nexthops(route, flow)
                    .iter()
                    .any(|hop| hop.dev == Some(device))
            });
            if strict && !by_device {
                continue;
            }
            if best.is_none_or(|(_, best_by_device)| by_device && !best_by_device) {
                best = Some((candidate, by_device));
            }
        }
        best.map_or(Search::NoMatch, |(chosen, _)| Search::Found(chosen))
    }

    /// Whether the kernel would take `route` for the flow: TOS, the
    /// requested output interface, and at least one live nexthop.
    fn usable(&self, route: &Route, flow: &FlowKey) -> Tri {
        match &route.tos {
            Some(Tos::Value(0)) | None => {}
            Some(Tos::Value(tos)) if *tos == flow.tos => {}
            Some(Tos::Value(_)) => return Tri::False,
            Some(Tos::Named(_)) => return Tri::Unknown,
        }
        let carries_traffic = matches!(
            route.route_type,
            RouteType::Unicast
                | RouteType::Local
                | RouteType::Broadcast
                | RouteType::Anycast
                | RouteType::Multicast
        );
        if carries_traffic && self.live_nexthops(route, flow).is_empty() {
            return Tri::False;
        }
        Tri::True
    }

    /// The nexthops the kernel may use: not dead, not without carrier where
    /// `ignore_routes_with_linkdown` is set, and on the requested output
    /// interface if there is one.
    fn live_nexthops<'r>(&self, route: &'r Route, flow: &FlowKey) -> Vec<Hop<'r>> {
        let hops = if route.nexthops.is_empty() {
            vec![Hop {
                gateway: route.gateway,
                dev: route.dev.as_deref(),
                weight: 1,
                flags: &route.flags,
            }]
        } else {
            route
                .nexthops
                .iter()
                .map(|n| Hop {
                    gateway: n.gateway,
                    dev: n.dev.as_deref(),
                    weight: n.weight.max(1),
                    flags: &n.flags,
                })
                .collect()
        };
        hops.into_iter()
            .filter(|hop| {
                if hop.flags.contains(&RouteFlag::Dead) {
                    return false;
                }
                if hop.flags.contains(&RouteFlag::Linkdown) && self.ignores_linkdown(hop.dev) {
                    return false;
                }
                // IPv6 prefers the requested interface rather than
                // insisting on it (see `choose6`).
                match (&flow.oif, hop.dev) {
                    (Some(oif), Some(dev)) if self.family == Family::Ipv4 => oif == dev,
                    _ => true,
                }
            })
            .collect()
    }

    fn ignores_linkdown(&self, dev: Option<&str>) -> bool {
        self.sysctl_on_any(dev.unwrap_or("all"), "ignore_routes_with_linkdown")
    }

    /// Whether a per-interface setting of the FIB's family is on for
    /// `ifname` or for `all` (the kernel ORs the two for these settings).
    /// Not collected: off, the kernel's default.
    fn sysctl_on_any(&self, ifname: &str, setting: &str) -> bool {
        let Some(sysctls) = self.sysctls else {
            return false;
        };
        ["all", ifname].iter().any(|ifname| {
            let key = Sysctls::interface_key(self.family, ifname, setting);
            matches!(sysctls.get_i64(&key), Ok(Some(value)) if value != 0)
        })
    }

    /// The kernel's source address choice when the route names none
    /// (`inet_select_addr`): a primary address on the outgoing device in the
    /// same prefix as the next hop, else the device's first usable address,
    /// else the first usable address of any other device.
    pub fn select_source(&self, dev: Option<&str>, next_hop: IpAddr) -> Option<IpAddr> {
        let family = Family::of(next_hop);
        let usable = |addr: &&crate::snapshot::netns::addr::InterfaceAddr| {
            addr.family() == family && !addr.secondary && addr.scope != Scope::Host
        };
        let on_dev: Vec<_> = self
            .addrs
            .iter()
            .filter(|iface| Some(iface.ifname.as_str()) == dev)
            .flat_map(|iface| iface.addresses.iter())
            .filter(usable)
            .collect();
        on_dev
            .iter()
            .find(|addr| addr.network.contains(&next_hop))
            .or_else(|| on_dev.first())
            .map(|addr| addr.local)
            .or_else(|| {
                self.addrs
                    .iter()
                    .flat_map(|iface| iface.addresses.iter())
                    .find(|addr| usable(addr) && addr.scope == Scope::Global)
                    .map(|addr| addr.local)
            })
    }
}

/// IPv6 input routing checks no addresses: the loopback and multicast-source
/// drops of `ip6_rcv_core` come before it, on the receive path (`ip -6
/// route get ... iif` does not make them). Multicast destinations are not
/// modelled.
fn reject_martian6(dst: std::net::Ipv6Addr) -> Option<LookupOutcome> {
    dst.is_multicast().then(|| LookupOutcome::Unknown {
        reason: "multicast input routing is not modelled".into(),
    })
}

/// Whether an IPv6 destination must be reached by the flow's own device:
/// multicast, link-local and loopback ones (`rt6_need_strict`).
fn need_strict(dst: IpAddr) -> bool {
    match dst {
        IpAddr::V6(dst) => {
            dst.is_multicast() || dst.is_loopback() || dst.segments()[0] & 0xffc0 == 0xfe80
        }
        IpAddr::V4(_) => false,
    }
}

/// One nexthop of a route as the lookup sees it.
struct Hop<'r> {
    gateway: Option<IpAddr>,
    dev: Option<&'r str>,
    weight: u32,
    flags: &'r [RouteFlag],
}

enum Search {
    Found(usize),
    NoMatch,
    Unknown(String),
}

fn failed(error: RouteError, rule: usize, route: Option<usize>) -> LookupOutcome {
    LookupOutcome::Failed {
        error,
        rule: Some(rule),
        route,
    }
}

impl TableIndex {
    fn insert(&mut self, prefix: IpNet, route: usize) {
        let len = prefix.prefix_len();
        let position = match self.by_len.iter().position(|(l, _)| *l == len) {
            Some(position) => position,
            None => {
                self.by_len.push((len, HashMap::new()));
                self.by_len.len() - 1
            }
        };
        self.by_len[position]
            .1
            .entry(prefix.trunc())
            .or_default()
            .push(route);
    }
}

/// Whether a rule's selectors match the flow (`fib_rule_match`), before `not`
/// inverts the result.
fn rule_matches(rule: &PolicyRule, flow: &FlowKey) -> Tri {
    if rule.iif_detached || rule.oif_detached {
        // A rule bound to a device that does not exist matches nothing, `not` or not.
        return Tri::False;
    }
    let selectors = selectors_match(rule, flow);
    if rule.not { !selectors } else { selectors }
}

fn selectors_match(rule: &PolicyRule, flow: &FlowKey) -> Tri {
    let family_matches =
        |net: &IpNet, address: IpAddr| Family::of(net.addr()) == Family::of(address);
    if let Some(src) = &rule.src {
        // A lookup with no source yet matches as the unspecified address, as in the kernel.
        let address = flow.src.unwrap_or(match flow.dst {
            IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        });
        if !(family_matches(src, address) && src.contains(&address)) {
            return Tri::False;
        }
    }
    if let Some(dst) = &rule.dst
        && !(family_matches(dst, flow.dst) && dst.contains(&flow.dst))
    {
        return Tri::False;
    }
    if let Some(iif) = &rule.iif {
        let arrived_on = flow.iif.as_deref().unwrap_or("lo");
        if iif != arrived_on {
            return Tri::False;
        }
    }
    if let Some(oif) = &rule.oif
        && flow.oif.as_deref() != Some(oif.as_str())
    {
        return Tri::False;
    }
    if let Some(fwmark) = &rule.fwmark
        && (flow.mark ^ fwmark.mark) & fwmark.mask != 0
    {
        return Tri::False;
    }
    match &rule.tos {
        None | Some(Tos::Value(0)) => {}
        Some(Tos::Value(tos)) if *tos == flow.tos => {}
        Some(Tos::Value(_)) => return Tri::False,
        Some(Tos::Named(_)) => return Tri::Unknown,
    }
    if let Some(range) = &rule.uidrange
        && !range.contains(&flow.uid)
    {
        return Tri::False;
    }
    if let Some(proto) = &rule.ipproto
        && flow.ip_proto.as_ref() != Some(proto)
    {
        return Tri::False;
    }
    for (range, port) in [(&rule.sport, flow.sport), (&rule.dport, flow.dport)] {
        if let Some(range) = range
            && !port.is_some_and(|port| range.contains(&port))
        {
            return Tri::False;
        }
    }
    if rule.suppress_ifgroup.is_some() {
        // Matching is unaffected; the group only matters after a lookup, and
        // the dump does not tell which devices are in which group.
        return Tri::Unknown;
    }
    Tri::True
}

/// `ip route`-style text of a route, for messages and traces.
pub fn describe_route(route: &Route) -> String {
    let mut text = String::new();
    if route.route_type != RouteType::Unicast {
        text.push_str(route.route_type.as_str());
        text.push(' ');
    }
    match route.destination() {
        Some(prefix) if prefix.prefix_len() == 0 => text.push_str("default"),
        Some(prefix) => text.push_str(&host_or_prefix(&prefix)),
        None => text.push_str("default"),
    }
    if let Some(gateway) = route.gateway {
        text.push_str(&format!(" via {gateway}"));
    }
    if let Some(dev) = &route.dev {
        text.push_str(&format!(" dev {dev}"));
    }
    for hop in &route.nexthops {
        text.push_str(" nexthop");
        if let Some(gateway) = hop.gateway {
            text.push_str(&format!(" via {gateway}"));
        }
        if let Some(dev) = &hop.dev {
            text.push_str(&format!(" dev {dev}"));
        }
        text.push_str(&format!(" weight {}", hop.weight));
    }
    if let Some(metric) = route.metric {
        text.push_str(&format!(" metric {metric}"));
    }
    if route.has_flag(&RouteFlag::Onlink) {
        text.push_str(" onlink");
    }
    text
}

/// What stands for the route of a packet to `0.0.0.0`, which the kernel
/// sends to `dst`, the sender's own address, reading no rule.
pub fn describe_unspecified(dst: IpAddr) -> String {
    format!("0.0.0.0 is the sender's own address: sent to {dst} through lo, no rule read")
}

/// `ip rule`-style text of a rule: `100: from all fwmark 0x10/0xff lookup 100`.
pub fn describe_rule(rule: &PolicyRule) -> String {
    let mut text = format!("{}:", rule.priority);
    if rule.not {
        text.push_str(" not");
    }
    match &rule.src {
        Some(src) => text.push_str(&format!(" from {}", host_or_prefix(src))),
        None => text.push_str(" from all"),
    }
    if let Some(dst) = &rule.dst {
        text.push_str(&format!(" to {}", host_or_prefix(dst)));
    }
    if let Some(tos) = &rule.tos {
        match tos {
            Tos::Value(value) => text.push_str(&format!(" tos 0x{value:02x}")),
            Tos::Named(name) => text.push_str(&format!(" tos {name}")),
        }
    }
    if let Some(fwmark) = &rule.fwmark {
        text.push_str(&format!(" fwmark {:#x}", fwmark.mark));
        if fwmark.mask != u32::MAX {
            text.push_str(&format!("/{:#x}", fwmark.mask));
        }
    }
    if let Some(iif) = &rule.iif {
        text.push_str(&format!(" iif {iif}"));
    }
    if let Some(oif) = &rule.oif {
        text.push_str(&format!(" oif {oif}"));
    }
    if let Some(uids) = &rule.uidrange {
        text.push_str(&format!(" uidrange {}-{}", uids.start(), uids.end()));
    }
    if let Some(proto) = &rule.ipproto {
        text.push_str(&format!(" ipproto {proto}"));
    }
    for (name, range) in [("sport", &rule.sport), ("dport", &rule.dport)] {
        if let Some(range) = range {
            text.push_str(&format!(" {name} {}", range.start()));
            if range.start() != range.end() {
                text.push_str(&format!("-{}", range.end()));
            }
        }
    }
    match &rule.action {
        RuleAction::Lookup(table) => text.push_str(&format!(" lookup {}", table_name(table))),
        RuleAction::L3mdev => text.push_str(" lookup [l3mdev-table]"),
        RuleAction::Goto {
            priority,
            unresolved,
        } => {
            text.push_str(&format!(" goto {priority}"));
            if *unresolved {
                text.push_str(" [unresolved]");
            }
        }
        RuleAction::Nop => text.push_str(" nop"),
        RuleAction::Blackhole => text.push_str(" blackhole"),
        RuleAction::Unreachable => text.push_str(" unreachable"),
        RuleAction::Prohibit => text.push_str(" prohibit"),
        RuleAction::Other(action) => text.push_str(&format!(" {action}")),
    }
    if let Some(len) = rule.suppress_prefixlength {
        text.push_str(&format!(" suppress_prefixlength {len}"));
    }
    text
}

/// A prefix as iproute2 prints selectors: a host without its length.
fn host_or_prefix(net: &IpNet) -> String {
    if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
    }
}

/// The name iproute2 prints for a table.
pub fn table_name(table: &RouteTable) -> String {
    match table {
        RouteTable::Main => "main".into(),
        RouteTable::Local => "local".into(),
        RouteTable::Default => "default".into(),
        RouteTable::Id(id) => id.to_string(),
        RouteTable::Named(name) => name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::netns::{addr, route, rule};
    use proptest::prelude::*;

    /// A namespace from iproute2 JSON, as `ip -j` prints it.
    struct Namespace {
        rules: Vec<PolicyRule>,
        routes: Vec<Route>,
        addrs: Vec<InterfaceAddrs>,
    }

    const ADDRS: &str = r#"[{"ifindex":2,"ifname":"eth0","flags":["BROADCAST","UP"],"addr_info":[{"family":"inet","local":"10.0.0.1","prefixlen":24,"scope":"global"}]},
        {"ifindex":3,"ifname":"eth1","flags":["BROADCAST"],"addr_info":[{"family":"inet","local":"192.168.1.1","prefixlen":24,"scope":"global"}]},
        {"ifindex":4,"ifname":"eth2","flags":["UP"],"addr_info":[]},
        {"ifindex":5,"ifname":"eth3","addr_info":[]}]"#;
    const DEFAULT_RULES: &str = r#"[{"priority":0,"src":"all","table":"local"},{"priority":32766,"src":"all","table":"main"},{"priority":32767,"src":"all","table":"default"}]"#;

    fn namespace(rules: &str, routes: &str) -> Namespace {
        let (rules, issues) = rule::parse(rules);
        assert!(issues.is_empty(), "{issues:?}");
        let (routes, issues) = route::parse(routes);
        assert!(issues.is_empty(), "{issues:?}");
        let (addrs, _) = addr::parse(ADDRS);
        Namespace {
            rules: rules.unwrap(),
            routes: routes.unwrap(),
            addrs: addrs.unwrap(),
        }
    }

    fn lookup(ns: &Namespace, flow: FlowKey) -> LookupOutcome {
        Fib::new(flow.family(), &ns.rules, &ns.routes, &ns.addrs, None)
            .lookup(&flow)
            .outcome
    }

    fn to(dst: &str) -> FlowKey {
        FlowKey::to(dst.parse().unwrap())
    }

    /// The route (as text) a lookup picked, or its error.
    fn answer(ns: &Namespace, flow: FlowKey) -> String {
        match lookup(ns, flow) {
            LookupOutcome::Routed { route, dst, .. } => route.map_or_else(
                || describe_unspecified(dst),
                |r| describe_route(&ns.routes[r]),
            ),
            LookupOutcome::Failed { error, .. } => error.as_str().to_string(),
            LookupOutcome::Unknown { reason } => format!("unknown: {reason}"),
        }
    }

    #[test]
    fn longest_prefix_wins_then_lowest_metric() {
        let ns = namespace(
            DEFAULT_RULES,
            r#"[{"dst":"default","gateway":"10.0.0.254","dev":"eth0","table":"main"},
                {"dst":"10.9.0.0/16","gateway":"10.0.0.2","dev":"eth0","metric":20,"table":"main"},
                {"dst":"10.9.0.0/16","gateway":"192.168.1.2","dev":"eth1","metric":10,"table":"main"},
                {"dst":"10.9.1.0/24","gateway":"10.0.0.3","dev":"eth0","table":"main"}]"#,
        );
        assert_eq!(
            answer(&ns, to("10.9.1.5")),
            "10.9.1.0/24 via 10.0.0.3 dev eth0"
        );
        assert_eq!(
            answer(&ns, to("10.9.2.5")),
            "10.9.0.0/16 via 192.168.1.2 dev eth1 metric 10"
        );
        assert_eq!(
            answer(&ns, to("8.8.8.8")),
            "default via 10.0.0.254 dev eth0"
        );
    }

    #[test]
    fn a_routes_mtu_metric_is_its_paths_mtu() {
        let ns = namespace(
            DEFAULT_RULES,
            r#"[{"dst":"default","gateway":"10.0.0.254","dev":"eth0","table":"main","metrics":[{"mtu":1450}]},
                {"dst":"10.9.0.0/16","gateway":"10.0.0.2","dev":"eth0","table":"main"}]"#,
        );
        let mtu = |dst| match lookup(&ns, to(dst)) {
            LookupOutcome::Routed { paths, .. } => paths[0].mtu,
            other => panic!("{other:?}"),
        };
        assert_eq!(mtu("8.8.8.8"), Some(1450));
        assert_eq!(mtu("10.9.0.1"), None);
    }

    #[test]
    fn failing_route_types_give_the_kernels_errors() {
        let ns = namespace(
            DEFAULT_RULES,
            r#"[{"type":"blackhole","dst":"10.1.0.0/16","table":"main"},
                {"type":"unreachable","dst":"10.2.0.0/16","table":"main"},
                {"type":"prohibit","dst":"10.3.0.0/16","table":"main"}]"#,
        );
        assert_eq!(answer(&ns, to("10.1.0.1")), "blackhole");
        assert_eq!(answer(&ns, to("10.2.0.1")), "unreachable");
        assert_eq!(answer(&ns, to("10.3.0.1")), "prohibit");
        assert_eq!(answer(&ns, to("10.4.0.1")), "no_route");
    }

    #[test]
    fn throw_and_no_match_go_on_with_the_next_rule() {
        let ns = namespace(
            r#"[{"priority":100,"src":"all","table":"100"},{"priority":32766,"src":"all","table":"main"}]"#,
            r#"[{"type":"throw","dst":"10.5.0.0/16","table":"100"},
                {"dst":"10.0.0.0/8","gateway":"192.168.1.9","dev":"eth1","table":"100"},
                {"dst":"default","gateway":"10.0.0.254","dev":"eth0","table":"main"}]"#,
        );
        assert_eq!(
            answer(&ns, to("10.6.0.1")),
            "10.0.0.0/8 via 192.168.1.9 dev eth1"
        );
        assert_eq!(
            answer(&ns, to("10.5.0.1")),
            "default via 10.0.0.254 dev eth0"
        );
        assert_eq!(
            answer(&ns, to("8.8.4.4")),
            "default via 10.0.0.254 dev eth0"
        );
    }

    #[test]
    fn rule_selectors_and_actions() {
        let ns = namespace(
            r#"[{"priority":10,"src":"all","fwmark":"0x10","fwmask":"0xf0","table":"100"},
                {"priority":20,"src":"all","dst":"172.20.0.0","dstlen":16,"goto":50},
                {"priority":30,"src":"all","dst":"172.20.0.0","dstlen":16,"action":"blackhole"},
                {"priority":50,"src":"all","iif":"eth1","action":"unreachable"},
                {"priority":60,"src":"all","goto":99,"unresolved":null},
                {"priority":70,"not":null,"src":"10.0.0.0","srclen":8,"table":"101"},
                {"priority":80,"src":"all","dst":"172.30.0.0","dstlen":16,"action":"prohibit"},
                {"priority":32766,"src":"all","table":"main"}]"#,
            r#"[{"dst":"default","gateway":"10.0.0.200","dev":"eth0","table":"100"},
                {"dst":"default","gateway":"192.168.1.254","dev":"eth1","table":"101"},
                {"dst":"default","gateway":"10.0.0.254","dev":"eth0","table":"main"}]"#,
        );
        let from = |src: &str, dst: &str| FlowKey {
            src: Some(src.parse().unwrap()),
            ..to(dst)
        };
        // fwmark under a mask: 0x1f & 0xf0 == 0x10; 0x20 & 0xf0 != 0x10.
        assert_eq!(
            answer(
                &ns,
                FlowKey {
                    mark: 0x1f,
                    ..from("10.0.0.7", "8.8.8.8")
                }
            ),
            "default via 10.0.0.200 dev eth0"
        );
        assert_eq!(
            answer(
                &ns,
                FlowKey {
                    mark: 0x20,
                    ..from("10.0.0.7", "8.8.8.8")
                }
            ),
            "default via 10.0.0.254 dev eth0"
        );
        // `not from 10/8`: everything else goes to table 101.
        assert_eq!(
            answer(&ns, from("192.168.1.7", "8.8.8.8")),
            "default via 192.168.1.254 dev eth1"
        );
        // goto 50 jumps over the blackhole at 30; 50 only matches packets from eth1, 60 goes nowhere.
        assert_eq!(
            answer(&ns, from("10.0.0.7", "172.20.0.1")),
            "default via 10.0.0.254 dev eth0"
        );
        let arriving = FlowKey {
            iif: Some("eth1".into()),
            ..from("192.168.1.7", "172.20.0.1")
        };
        assert_eq!(answer(&ns, arriving), "unreachable");
        assert_eq!(answer(&ns, from("10.0.0.7", "172.30.0.1")), "prohibit");
    }

    #[test]
    fn suppress_prefixlength_skips_default_routes_only() {
        let ns = namespace(
            r#"[{"priority":10,"src":"all","table":"main","suppress_prefixlen":0},
                {"priority":20,"src":"all","table":"100"}]"#,
            r#"[{"dst":"default","gateway":"10.0.0.254","dev":"eth0","table":"main"},
                {"dst":"10.7.0.0/16","gateway":"10.0.0.7","dev":"eth0","table":"main"},
                {"dst":"default","gateway":"192.168.1.254","dev":"eth1","table":"100"}]"#,
        );
        assert_eq!(
            answer(&ns, to("10.7.1.1")),
            "10.7.0.0/16 via 10.0.0.7 dev eth0"
        );
        assert_eq!(
            answer(&ns, to("8.8.8.8")),
            "default via 192.168.1.254 dev eth1"
        );
    }

    #[test]
    fn multipath_gives_every_nexthop_its_share_and_source() {
        let ns = namespace(
            DEFAULT_RULES,
            r#"[{"dst":"10.50.0.0/16","table":"main","nexthops":[{"gateway":"10.0.0.2","dev":"eth0","weight":1},{"gateway":"192.168.1.3","dev":"eth1","weight":3}]}]"#,
        );
        let LookupOutcome::Routed { paths, .. } = lookup(&ns, to("10.50.1.1")) else {
            panic!("routed")
        };
        let shares: Vec<(Option<String>, f64, Option<IpAddr>)> = paths
            .into_iter()
            .map(|p| (p.dev, p.probability, p.prefsrc))
            .collect();
        assert_eq!(
            shares,
            [
                (Some("eth0".into()), 0.25, Some("10.0.0.1".parse().unwrap())),
                (
                    Some("eth1".into()),
                    0.75,
                    Some("192.168.1.1".parse().unwrap())
                ),
            ]
        );
    }

    #[test]
    fn local_addresses_are_delivered_through_lo_and_martians_refused() {
        let ns = namespace(
            DEFAULT_RULES,
            r#"[{"type":"local","dst":"10.0.0.1","dev":"eth0","table":"local","scope":"host","prefsrc":"10.0.0.1"},
                {"type":"local","dst":"127.0.0.0/8","dev":"lo","table":"local","scope":"host","prefsrc":"127.0.0.1"},
                {"dst":"default","gateway":"10.0.0.254","dev":"eth0","table":"main"}]"#,
        );
        let fib = Fib::new(Family::Ipv4, &ns.rules, &ns.routes, &ns.addrs, None);
        assert_eq!(fib.is_local("10.0.0.1".parse().unwrap()), Tri::True);
        assert_eq!(fib.is_local("10.0.0.2".parse().unwrap()), Tri::False);
        let LookupOutcome::Routed { paths, .. } = lookup(&ns, to("10.0.0.1")) else {
            panic!("routed")
        };
        assert_eq!(paths[0].dev.as_deref(), Some("lo"));
        let arriving = |src: &str, dst: &str| FlowKey {
            iif: Some("eth0".into()),
            src: Some(src.parse().unwrap()),
            ..to(dst)
        };
        assert_eq!(answer(&ns, arriving("10.0.0.9", "127.0.0.1")), "martian");
        assert_eq!(answer(&ns, arriving("224.0.0.9", "10.0.0.1")), "martian");
        assert_eq!(answer(&ns, arriving("0.1.2.3", "10.0.0.1")), "martian");
        assert_eq!(answer(&ns, arriving("10.0.0.1", "10.0.0.1")), "martian");
        assert_eq!(
            answer(&ns, arriving("10.0.0.9", "8.8.8.8")),
            "default via 10.0.0.254 dev eth0"
        );
    }

    /// Issue 36: `ip route get 0.0.0.0` answers `local 0.0.0.0 dev lo src
    /// 127.0.0.1`, before any rule; a connection to it reaches the sender.
    #[test]
    fn the_unspecified_destination_is_the_senders_own_through_lo() {
        let ns = namespace(
            r#"[{"priority":0,"src":"all","table":"local"},{"priority":10,"src":"all","action":"prohibit"},{"priority":32766,"src":"all","table":"main"}]"#,
            r#"[{"type":"local","dst":"10.0.0.1","dev":"eth0","table":"local","scope":"host","prefsrc":"10.0.0.1"},
                {"dst":"default","gateway":"10.0.0.254","dev":"eth0","table":"main"}]"#,
        );
        let sent = |flow: FlowKey| match lookup(&ns, flow) {
            LookupOutcome::Routed {
                rule: None,
                route: None,
                route_type: RouteType::Local,
                paths,
                dst,
            } => {
                assert_eq!(paths.len(), 1);
                assert_eq!(paths[0].dev.as_deref(), Some("lo"));
                assert_eq!(paths[0].prefsrc, Some(dst));
                dst.to_string()
            }
            other => format!("{other:?}"),
        };
        // The prohibit rule is never read.
        assert_eq!(sent(to("0.0.0.0")), "127.0.0.1");
        let from = |src: &str| FlowKey {
            src: Some(src.parse().unwrap()),
            ..to("0.0.0.0")
        };
        assert_eq!(sent(from("10.0.0.1")), "10.0.0.1");
        assert_eq!(answer(&ns, from("10.0.0.9")), "no_route");
        let by = |oif: &str| FlowKey {
            oif: Some(oif.into()),
            ..to("0.0.0.0")
        };
        assert_eq!(sent(by("eth0")), "10.0.0.1");
        // A device without an address of its own takes the first of another.
        assert_eq!(sent(by("eth2")), "10.0.0.1");
        // Down, missing, or of a state the dump does not show.
        assert_eq!(answer(&ns, by("eth1")), "no_route");
        assert_eq!(answer(&ns, by("eth9")), "no_route");
        assert!(answer(&ns, by("eth3")).starts_with("unknown"));
        // Received from outside, it is martian; `::` reads the rules as any
        // other destination does (`ip -6 route get ::`).
        let received = FlowKey {
            iif: Some("eth0".into()),
            src: Some("10.0.0.9".parse().unwrap()),
            ..to("0.0.0.0")
        };
        assert_eq!(answer(&ns, received), "martian");
        assert_eq!(answer(&ns, to("::")), "prohibit");
    }

    const RULES6: &str = r#"[{"priority":0,"src":"all","table":"local"},{"priority":32766,"src":"all","table":"main"}]"#;

    #[test]
    fn ipv6_prefers_the_flows_device_and_insists_on_it_where_the_kernel_does() {
        let ns = namespace(
            RULES6,
            r#"[{"dst":"2001:db8:40::/48","dev":"eth0","table":"main","metric":1024},
                {"dst":"2001:db8:40::/48","dev":"eth1","table":"main","metric":1024},
                {"dst":"fe80::/64","dev":"eth0","table":"main","metric":256},
                {"dst":"fe80::/64","dev":"eth1","table":"main","metric":256},
                {"dst":"default","gateway":"2001:db8:50::fe","dev":"eth0","table":"main","metric":1024},
                {"type":"anycast","dst":"2001:db8:50::","dev":"eth0","table":"local","metric":0}]"#,
        );
        // Two routes of one prefix and metric: the first, unless the packet
        // arrived on the other's device.
        assert_eq!(
            answer(&ns, to("2001:db8:40::1")),
            "2001:db8:40::/48 dev eth0 metric 1024"
        );
        let arrived_on_eth1 = FlowKey {
            iif: Some("eth1".into()),
            src: Some("2001:db8:99::1".parse().unwrap()),
            ..to("2001:db8:40::1")
        };
        assert_eq!(
            answer(&ns, arrived_on_eth1),
            "2001:db8:40::/48 dev eth1 metric 1024"
        );
        // An output interface without a source must be used: here nothing
        // shorter goes by eth1 either.
        let by_eth1 = FlowKey {
            oif: Some("eth1".into()),
            ..to("2001:db8:99::1")
        };
        assert_eq!(answer(&ns, by_eth1), "no_route");
        let link_local = FlowKey {
            oif: Some("eth1".into()),
            ..to("fe80::9")
        };
        assert_eq!(answer(&ns, link_local), "fe80::/64 dev eth1 metric 256");
        // The subnet-router anycast address is delivered through lo.
        let LookupOutcome::Routed { paths, .. } = lookup(&ns, to("2001:db8:50::")) else {
            panic!("routed")
        };
        assert_eq!(paths[0].dev.as_deref(), Some("lo"));
    }

    #[test]
    fn what_the_dump_cannot_tell_is_unknown() {
        let ns = namespace(
            r#"[{"priority":10,"src":"all","tos":"AF11","table":"100"},{"priority":32766,"src":"all","table":"main"}]"#,
            r#"[{"dst":"default","gateway":"10.0.0.254","dev":"eth0","table":"main"}]"#,
        );
        assert!(answer(&ns, to("8.8.8.8")).starts_with("unknown"));
        // A FIB is one family's: asked for the other, it says so.
        let v4 = Fib::new(Family::Ipv4, &ns.rules, &ns.routes, &ns.addrs, None);
        let LookupOutcome::Unknown { reason } = v4.lookup(&to("2001:db8::1")).outcome else {
            panic!("an IPv6 flow in the IPv4 FIB is unknown")
        };
        assert_eq!(
            reason,
            "2001:db8::1 is an IPv6 address, and these are the IPv4 rules and routes"
        );
    }

    /// The simplest model that could work: every rule in priority order, each
    /// table scanned in full for the longest matching prefix, lowest metric.
    fn reference(
        rules: &[(u32, Option<u32>, u32)],
        routes: &[(u32, IpNet, RouteType, u32)],
        dst: IpAddr,
        mark: u32,
    ) -> String {
        let mut ordered = rules.to_vec();
        ordered.sort_by_key(|r| r.0);
        for (_, fwmark, table) in ordered {
            if fwmark.is_some_and(|m| m != mark) {
                continue;
            }
            let best = routes
                .iter()
                .enumerate()
                .filter(|(_, r)| r.0 == table && r.1.contains(&dst))
                .max_by_key(|(i, r)| {
                    (
                        r.1.prefix_len(),
                        std::cmp::Reverse(r.3),
                        std::cmp::Reverse(*i),
                    )
                });
            match best {
                None => continue,
                Some((_, r)) if r.2 == RouteType::Throw => continue,
                Some((i, r)) => {
                    return match r.2 {
                        RouteType::Unicast => format!("route {i}"),
                        RouteType::Blackhole => "blackhole".into(),
                        RouteType::Unreachable => "unreachable".into(),
                        _ => "prohibit".into(),
                    };
                }
            }
        }
        "no_route".into()
    }

    fn route_strategy() -> impl Strategy<Value = (u32, IpNet, RouteType, u32)> {
        let kind = prop::sample::select(vec![
            RouteType::Unicast,
            RouteType::Unicast,
            RouteType::Unicast,
            RouteType::Blackhole,
            RouteType::Unreachable,
            RouteType::Prohibit,
            RouteType::Throw,
        ]);
        (100u32..103, any::<u8>(), 0u8..=32, kind, 0u32..3).prop_map(
            |(table, third, len, kind, metric)| {
                let net = IpNet::new(std::net::Ipv4Addr::new(10, 0, third & 0x0f, 0).into(), len)
                    .unwrap()
                    .trunc();
                (table, net, kind, metric)
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn lookup_agrees_with_a_linear_reference(
            rules in prop::collection::vec((1u32..50, prop::option::of(1u32..3), 100u32..103), 1..5),
            routes in prop::collection::vec(route_strategy(), 0..12),
            dst_third in 0u8..16,
            mark in 0u32..3,
        ) {
            let rules_json: Vec<String> = rules.iter().map(|(priority, fwmark, table)| match fwmark {
                Some(m) => format!(r#"{{"priority":{priority},"src":"all","fwmark":"{m:#x}","table":"{table}"}}"#),
                None => format!(r#"{{"priority":{priority},"src":"all","table":"{table}"}}"#),
            }).collect();
            let routes_json: Vec<String> = routes.iter().map(|(table, net, kind, metric)| match kind {
                RouteType::Unicast => format!(r#"{{"dst":"{net}","gateway":"10.0.0.9","dev":"eth0","metric":{metric},"table":"{table}"}}"#),
                other => format!(r#"{{"type":"{}","dst":"{net}","metric":{metric},"table":"{table}"}}"#, other.as_str()),
            }).collect();
            let ns = namespace(&format!("[{}]", rules_json.join(",")), &format!("[{}]", routes_json.join(",")));
            let dst: IpAddr = std::net::Ipv4Addr::new(10, 0, dst_third, 7).into();
            let model = match lookup(&ns, FlowKey { mark, ..FlowKey::to(dst) }) {
                LookupOutcome::Routed { route: Some(route), .. } => format!("route {route}"),
                LookupOutcome::Routed { route: None, .. } => "no route read".to_string(),
                LookupOutcome::Failed { error, .. } => error.as_str().to_string(),
                LookupOutcome::Unknown { reason } => format!("unknown: {reason}"),
            };
            prop_assert_eq!(model, reference(&rules, &routes, dst, mark));
        }
    }
}
