//! Whether a rule matches a packet, three-valued: each match module as the
//! kernel evaluates it, or [`Tri::Unknown`] with the reason when the dump
//! cannot tell.

use std::net::IpAddr;

use ipnet::IpNet;

use super::chains::{Branch, Walk};
use super::{Assumption, CtState, Packet, is_local, sets};
use crate::net::Family;
use crate::netstack::Tri;
use crate::netstack::routing::{FlowKey, LookupOutcome, RoutePath};
use crate::snapshot::netns::iptables::{
    AddrTypeMatch, AddrTypes, ConntrackMatch, CtDirection, CtStates, CtStatuses, IcmpType,
    Interface, Invertible, LimitInterface, Match, MultiportMatch, OwnerMatch, PacketType,
    PhysdevMatch, PortDirection, PortMatch, PortRange, Protocol, RecentCommand, RpfilterMatch,
    Rule, SocketMatch, Statistic, TableName, TcpMatch, TtlTest,
};
use crate::snapshot::netns::route::{RouteTable, RouteType};
use crate::snapshot::netns::sockets::LocalAddress;

/// What testing a rule's matches found.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RuleTest {
    pub truth: Tri,
    /// The share of packets a `statistic` test lets through (1.0 without one).
    pub probability: f64,
    /// What the model assumed to decide (`-m limit`, `-m recent`).
    pub assumption: Option<Assumption>,
    /// Why the truth is unknown.
    pub unknown: Option<String>,
}

/// One match's result.
struct Test {
    truth: Tri,
    note: Note,
}

/// What a match's result rests on, besides the packet.
enum Note {
    None,
    Assumed(&'static str),
    Unknown(String),
}

impl From<Tri> for Test {
    fn from(truth: Tri) -> Test {
        Test {
            truth,
            note: Note::None,
        }
    }
}

impl From<bool> for Test {
    fn from(value: bool) -> Test {
        Tri::from(value).into()
    }
}

fn unknown(why: impl Into<String>) -> Test {
    Test {
        truth: Tri::Unknown,
        note: Note::Unknown(why.into()),
    }
}

fn assumed(truth: bool, what: &'static str) -> Test {
    Test {
        truth: Tri::from(truth),
        note: Note::Assumed(what),
    }
}

/// `test` unless `invert`, else its negation.
fn invert(test: Test, invert: bool) -> Test {
    if invert {
        Test {
            truth: !test.truth,
            note: test.note,
        }
    } else {
        test
    }
}

/// Tests every match of `rule`. The matches are a conjunction: a false one
/// decides even after an unknown one, so all are tested until one is false.
pub(super) fn test_rule(walk: &Walk<'_, '_, '_>, branch: &Branch<'_>, rule: &Rule) -> RuleTest {
    let mut result = RuleTest {
        truth: Tri::True,
        probability: 1.0,
        assumption: None,
        unknown: None,
    };
    let tester = Tester { walk, branch };
    for m in &rule.matches {
        if let Match::Statistic(statistic) = m {
            result.probability *= share(statistic);
            continue;
        }
        let test = tester.test(m);
        match test.note {
            Note::None => {}
            Note::Assumed(what) => result.assumption = Some(Assumption::Stated(what)),
            Note::Unknown(why) => {
                if result.unknown.is_none() {
                    result.unknown = Some(why);
                }
            }
        }
        result.truth = result.truth.and(test.truth);
        if result.truth == Tri::False {
            break;
        }
    }
    result
}

/// The share of packets `-m statistic` lets through. `nth` lets one packet
/// in `every` through: per flow that is a share, not a choice by packet.
fn share(statistic: &Invertible<Statistic>) -> f64 {
    let p = match statistic.value {
        Statistic::Random { probability } => probability.clamp(0.0, 1.0),
        Statistic::Nth { every, .. } => 1.0 / f64::from(every.max(1)),
    };
    if statistic.invert { 1.0 - p } else { p }
}

struct Tester<'w, 'n, 'a, 'c> {
    walk: &'w Walk<'n, 'a, 'c>,
    branch: &'w Branch<'a>,
}

impl Tester<'_, '_, '_, '_> {
    fn packet(&self) -> &Packet {
        &self.branch.packet
    }

    /// `-m socket`: the kernel looks the packet's addresses up among the
    /// namespace's sockets (`nf_sk_lookup_slow_v4`): an established socket
    /// with its exact address pair (only the end of its own connection in
    /// this namespace can have it), else a socket listening on its
    /// destination. One bound to the wildcard address is ignored unless
    /// `--nowildcard`, and with `--transparent` only a socket with
    /// IP_TRANSPARENT counts (`xt_socket.c`'s `socket_match`). The flow's
    /// own connection is an ordinary client's, as the question asks it (and
    /// `--confirm`'s `nc` sends it): not transparent. Whether a listener is
    /// (a transparent proxy's) `ss.txt` does not show.
    fn socket(&self, m: &SocketMatch) -> Test {
        let packet = self.packet();
        match packet.connection_socket {
            None => {
                return unknown(
                    "-m socket: whether a socket of this namespace is an end of the packet's connection is not known",
                );
            }
            Some(true) => return Tri::from(!m.transparent).into(),
            Some(false) => {}
        }
        let Some(listeners) = self.walk.context.listeners else {
            return unknown(
                "-m socket depends on the listening sockets, and ss.txt was not collected",
            );
        };
        let dst = packet.ip.dst;
        let listening = listeners.iter().filter(|socket| {
            socket.protocol == packet.ip.protocol
                && Some(socket.port) == packet.ip.dport
                && match socket.address {
                    LocalAddress::AnyDualStack => m.nowildcard,
                    LocalAddress::Ip(address) if address.is_unspecified() => {
                        m.nowildcard && Family::of(address) == Family::of(dst)
                    }
                    LocalAddress::Ip(address) => address == dst,
                }
        });
        match (listening.count(), m.transparent) {
            (0, _) => Tri::False.into(),
            (_, true) => unknown(
                "-m socket --transparent: whether the socket listening on the packet's destination is transparent (IP_TRANSPARENT) is not in ss.txt",
            ),
            (_, false) => Tri::True.into(),
        }
    }

    fn test(&self, m: &Match) -> Test {
        let packet = self.packet();
        match m {
            Match::Source(net) => invert(net.value.contains(&packet.ip.src).into(), net.invert),
            Match::Destination(net) => {
                invert(net.value.contains(&packet.ip.dst).into(), net.invert)
            }
            Match::InInterface(iface) => invert(
                self.interface(&iface.value, true, packet.in_iface.as_deref()),
                iface.invert,
            ),
            Match::OutInterface(iface) => invert(
                self.interface(&iface.value, false, packet.out_iface.as_deref()),
                iface.invert,
            ),
            Match::Protocol(p) => invert(
                (p.value == Protocol::ALL || p.value == packet.ip.protocol).into(),
                p.invert,
            ),
            // The model's packets are never non-first fragments.
            Match::Fragment { invert } => Tri::from(*invert).into(),
            Match::Tcp(tcp) => self.tcp(tcp),
            Match::Udp(ports) => self.ports(Protocol::Udp, ports),
            Match::Sctp(ports) => self.ports(Protocol::Sctp, ports),
            Match::Icmp(icmp) => self.icmp(Protocol::Icmp, icmp),
            Match::Icmp6(icmp) => self.icmp(Protocol::Icmpv6, icmp),
            Match::Multiport(multiport) => self.multiport(multiport),
            Match::AddrType(addrtype) => self.addrtype(addrtype),
            Match::Conntrack(conntrack) => self.conntrack(conntrack),
            Match::State(states) => invert(self.state(states.value), states.invert),
            Match::Mark(mark) => invert(mark.value.matches(packet.ip.mark).into(), mark.invert),
            Match::ConnMark(mark) => {
                if self.untracked() {
                    return false.into();
                }
                match packet.ct_mark {
                    Some(ct) => invert(mark.value.matches(ct).into(), mark.invert),
                    None => unknown("the connection mark is not known"),
                }
            }
            Match::Set(set) => match sets::member(self.walk.netfilter.ipsets, set, packet) {
                Ok(hit) => invert(hit.into(), set.invert),
                Err(why) => unknown(why),
            },
            Match::Comment(_) | Match::Nfacct(_) => true.into(),
            // Folded into the rule's probability by the caller.
            Match::Statistic(_) => true.into(),
            Match::Physdev(physdev) => physdev_test(physdev, packet),
            Match::Rpfilter(rpfilter) => self.rpfilter(rpfilter),
            Match::IpRange(range) => {
                let mut test = Test::from(true);
                if let Some(src) = range.source {
                    test = and(
                        test,
                        invert(src.value.contains(packet.ip.src).into(), src.invert),
                    );
                }
                if let Some(dst) = range.destination {
                    test = and(
                        test,
                        invert(dst.value.contains(packet.ip.dst).into(), dst.invert),
                    );
                }
                test
            }
            Match::Length(length) => {
                // `-m length` reads the 16-bit length field; a longer
                // (IPv6 jumbo) packet is in no range.
                let within = u16::try_from(packet.ip.length)
                    .is_ok_and(|bytes| length.value.contains(&bytes));
                invert(within.into(), length.invert)
            }
            Match::Ttl(ttl) => {
                let hit = match ttl.value {
                    TtlTest::Equal(n) => packet.ttl == n,
                    TtlTest::LessThan(n) => packet.ttl < n,
                    TtlTest::GreaterThan(n) => packet.ttl > n,
                };
                invert(hit.into(), ttl.invert)
            }
            Match::PacketType(kind) => invert(self.packet_type(kind.value), kind.invert),
            Match::Owner(owner) => self.owner(owner),
            Match::Recent(recent) => {
                let test = match recent.command.value {
                    RecentCommand::Set => assumed(
                        true,
                        "recent --set: always matches (it records the address)",
                    ),
                    RecentCommand::Check | RecentCommand::Update | RecentCommand::Remove => {
                        assumed(
                            false,
                            "recent: assumed the address is not in the list (a dump has no history)",
                        )
                    }
                };
                invert(test, recent.command.invert)
            }
            Match::Limit(_) => assumed(true, "limit: assumed the rate is not exceeded"),
            Match::HashLimit(limit) => {
                assumed(!limit.above, "hashlimit: assumed the rate is not exceeded")
            }
            Match::Socket(socket) => self.socket(socket),
            Match::U32(_) => unknown("-m u32 is not modelled"),
            Match::Bpf(_) => unknown("-m bpf is not modelled"),
            Match::Unsupported { module, raw } => {
                unknown(format!("`{raw}` ({module}) is not modelled"))
            }
        }
    }

    /// `-i`/`-o`: where the hook has no such interface the kernel compares
    /// with the empty name.
    fn interface(&self, iface: &Interface, input: bool, name: Option<&str>) -> Test {
        let hook = self.walk.hook;
        let present = if input {
            hook.has_in_interface()
        } else {
            hook.has_out_interface()
        };
        match (present, name) {
            (false, _) => iface.matches("").into(),
            (true, Some(name)) => iface.matches(name).into(),
            (true, None) if iface.wildcard && iface.name.is_empty() => true.into(),
            (true, None) => unknown(format!(
                "the {} interface is not known",
                if input { "input" } else { "output" }
            )),
        }
    }

    fn port_tests(&self, ports: &PortMatch) -> Test {
        let packet = self.packet();
        let one = |test: Option<Invertible<PortRange>>, port: Option<u16>| match (test, port) {
            (None, _) => Test::from(true),
            (Some(range), Some(port)) => invert(range.value.contains(port).into(), range.invert),
            (Some(_), None) => false.into(),
        };
        and(
            one(ports.source, packet.ip.sport),
            one(ports.destination, packet.ip.dport),
        )
    }

    fn ports(&self, protocol: Protocol, ports: &PortMatch) -> Test {
        if self.packet().ip.protocol != protocol {
            return false.into();
        }
        self.port_tests(ports)
    }

    fn tcp(&self, tcp: &TcpMatch) -> Test {
        let mut test = self.ports(Protocol::Tcp, &tcp.ports);
        if test.truth == Tri::False {
            return test;
        }
        if let Some(flags) = tcp.flags {
            let flag_test = match self.packet().tcp_flags {
                Some(bits) => invert(
                    (bits.0 & flags.value.mask.0 == flags.value.set.0).into(),
                    flags.invert,
                ),
                None => unknown("the packet's TCP flags are not known"),
            };
            test = and(test, flag_test);
        }
        if tcp.option.is_some() {
            test = and(test, unknown("TCP options are not modelled"));
        }
        test
    }

    /// `-m icmp` (`protocol` ICMP) or `-m icmp6` (ICMPv6).
    fn icmp(&self, protocol: Protocol, icmp: &Invertible<IcmpType>) -> Test {
        let packet = self.packet();
        if packet.ip.protocol != protocol {
            return false.into();
        }
        let Some((kind, code)) = packet.icmp else {
            return unknown("the ICMP type is not known");
        };
        let hit = match icmp.value {
            IcmpType::Any => true,
            IcmpType::Type(t) => t == kind,
            IcmpType::TypeCode(t, c) => t == kind && c == code,
        };
        invert(hit.into(), icmp.invert)
    }

    fn multiport(&self, multiport: &MultiportMatch) -> Test {
        let packet = self.packet();
        if !matches!(
            packet.ip.protocol,
            Protocol::Tcp | Protocol::Udp | Protocol::Sctp | Protocol::Other(136)
        ) {
            return false.into();
        }
        let (Some(sport), Some(dport)) = (packet.ip.sport, packet.ip.dport) else {
            return false.into();
        };
        let hit = multiport
            .ports
            .iter()
            .any(|range| match multiport.direction {
                PortDirection::Source => range.contains(sport),
                PortDirection::Destination => range.contains(dport),
                PortDirection::Either => range.contains(sport) || range.contains(dport),
            });
        invert(hit.into(), multiport.invert)
    }

    fn addrtype(&self, addrtype: &AddrTypeMatch) -> Test {
        let packet = self.packet();
        let limit = match addrtype.limit_interface {
            None => Ok(None),
            Some(LimitInterface::In) => packet.in_iface.as_deref().map(Some).ok_or("input"),
            Some(LimitInterface::Out) => packet.out_iface.as_deref().map(Some).ok_or("output"),
        };
        let limit = match limit {
            Ok(limit) => limit,
            Err(side) => {
                return unknown(format!(
                    "addrtype --limit-iface: the {side} interface is not known"
                ));
            }
        };
        let mut test = Test::from(true);
        for (types, addr) in [
            (addrtype.source, packet.ip.src),
            (addrtype.destination, packet.ip.dst),
        ] {
            if let Some(types) = types {
                let hit = match self.address_type(addr, limit) {
                    Ok(kind) => Test::from(types.value.intersects(kind)),
                    Err(why) => unknown(why),
                };
                test = and(test, invert(hit, types.invert));
            }
        }
        test
    }

    /// The route type of `addr` as `inet_dev_addr_type` finds it: broadcast
    /// and multicast by the address itself, else the local table's route for
    /// it (on `limit` only, if given), else unicast.
    fn address_type(&self, addr: IpAddr, limit: Option<&str>) -> Result<AddrTypes, String> {
        if addr.is_multicast() {
            return Ok(AddrTypes::MULTICAST);
        }
        if let IpAddr::V4(v4) = addr
            && (v4.is_broadcast() || v4.octets()[0] == 0)
        {
            return Ok(AddrTypes::BROADCAST);
        }
        let context = self.walk.context;
        let Some(fib) = context.fib else {
            return match is_local(context, addr) {
                Tri::True if limit.is_some() => Err(format!(
                    "addrtype --limit-iface: which interface holds {addr} is not known"
                )),
                Tri::True => Ok(AddrTypes::LOCAL),
                Tri::False => Ok(AddrTypes::UNICAST),
                Tri::Unknown => Err(format!("whether {addr} is a local address is not known")),
            };
        };
        // The local table holds only local, broadcast and anycast routes: a
        // scan for the longest one covering the address is cheap.
        let best = fib
            .routes
            .iter()
            .filter(|r| r.table == RouteTable::Local)
            .filter_map(|r| {
                r.destination()
                    .filter(|d| d.contains(&addr))
                    .map(|d| (d, r))
            })
            .max_by_key(|(d, _)| d.prefix_len());
        let Some((_, route)) = best else {
            return Ok(match context.local_addresses.contains(&addr) {
                true if limit.is_none() => AddrTypes::LOCAL,
                _ => AddrTypes::UNICAST,
            });
        };
        if limit.is_some_and(|dev| route.dev.as_deref() != Some(dev)) {
            return Ok(AddrTypes::UNICAST);
        }
        Ok(match &route.route_type {
            RouteType::Local => AddrTypes::LOCAL,
            RouteType::Broadcast => AddrTypes::BROADCAST,
            RouteType::Anycast => AddrTypes::ANYCAST,
            RouteType::Multicast => AddrTypes::MULTICAST,
            RouteType::Blackhole => AddrTypes::BLACKHOLE,
            RouteType::Unreachable => AddrTypes::UNREACHABLE,
            RouteType::Prohibit => AddrTypes::PROHIBIT,
            RouteType::Throw => AddrTypes::THROW,
            RouteType::Nat => AddrTypes::NAT,
            RouteType::Unicast => AddrTypes::UNICAST,
            RouteType::Other(kind) => {
                return Err(format!("route type {kind} of {addr} is not modelled"));
            }
        })
    }

    /// Whether the packet has no conntrack entry here: the raw table runs
    /// before conntrack, and NOTRACK leaves packets untracked.
    fn untracked(&self) -> bool {
        self.walk.table.table.name == TableName::Raw
            || matches!(
                self.packet().ct_state,
                CtState::Untracked | CtState::Invalid
            )
    }

    /// `--state`/`--ctstate`: the packet's state, plus SNAT/DNAT when the
    /// connection has that translation.
    fn state(&self, wanted: CtStates) -> Test {
        let packet = self.packet();
        let state = if self.walk.table.table.name == TableName::Raw {
            // Before conntrack: no entry yet, unless NOTRACK already ran.
            if packet.ct_state == CtState::Untracked {
                CtStates::UNTRACKED
            } else {
                CtStates::INVALID
            }
        } else {
            match packet.ct_state {
                CtState::New => CtStates::NEW,
                CtState::Established => CtStates::ESTABLISHED,
                CtState::Related => CtStates::RELATED,
                CtState::Invalid => CtStates::INVALID,
                CtState::Untracked => CtStates::UNTRACKED,
            }
        };
        if wanted.intersects(state) {
            return true.into();
        }
        if self.untracked() {
            return false.into();
        }
        let mut truth = Tri::False;
        for (bit, nat) in [
            (CtStates::DNAT, self.branch.ct_dnat),
            (CtStates::SNAT, self.branch.ct_snat),
        ] {
            if wanted.intersects(bit) {
                truth = or(truth, nat);
            }
        }
        match truth {
            Tri::Unknown => unknown("whether the connection is NATed is not known"),
            truth => truth.into(),
        }
    }

    fn conntrack(&self, ct: &ConntrackMatch) -> Test {
        let mut test = Test::from(true);
        if let Some(state) = ct.state {
            test = invert(self.state(state.value), state.invert);
            if test.truth == Tri::False {
                return test;
            }
        }
        // Without an entry, only a state test can match (`conntrack_mt`).
        if self.untracked() {
            return and(test, ct.state.is_some().into());
        }
        let packet = self.packet();
        let new = packet.ct_state == CtState::New;
        let original = &self.branch.original;
        let tuple = |known: Option<Test>| {
            known.unwrap_or_else(|| unknown("the connection's tuple is not known (not a new one)"))
        };
        let net = |test: Option<Invertible<IpNet>>, addr: IpAddr| {
            test.map(|t| tuple(new.then(|| invert(t.value.contains(&addr).into(), t.invert))))
        };
        let port = |test: Option<Invertible<PortRange>>, port: Option<u16>| {
            test.map(|t| {
                tuple(
                    new.then(|| invert(port.is_some_and(|p| t.value.contains(p)).into(), t.invert)),
                )
            })
        };
        // A new connection's reply tuple is the current packet reversed.
        let tests = [
            ct.protocol.map(|p| {
                invert(
                    (p.value == Protocol::ALL || p.value == packet.ip.protocol).into(),
                    p.invert,
                )
            }),
            net(ct.original_source, original.ip.src),
            net(ct.original_destination, original.ip.dst),
            net(ct.reply_source, packet.ip.dst),
            net(ct.reply_destination, packet.ip.src),
            port(ct.original_source_port, original.ip.sport),
            port(ct.original_destination_port, original.ip.dport),
            port(ct.reply_source_port, packet.ip.dport),
            port(ct.reply_destination_port, packet.ip.sport),
            ct.status
                .map(|status| invert(self.status(status.value), status.invert)),
            ct.direction.map(|direction| match (new, direction) {
                (true, direction) => Test::from(direction == CtDirection::Original),
                (false, _) => unknown("the packet's direction in its connection is not known"),
            }),
            ct.expire
                .as_ref()
                .map(|_| unknown("the connection's remaining lifetime is not known")),
        ];
        for t in tests.into_iter().flatten() {
            test = and(test, t);
            if test.truth == Tri::False {
                break;
            }
        }
        test
    }

    /// `--ctstatus`: matches when the connection has any of the bits. A new
    /// connection has none yet; an established one has seen a reply and is
    /// confirmed, the rest is not known.
    fn status(&self, wanted: CtStatuses) -> Test {
        match self.packet().ct_state {
            CtState::New => false.into(),
            _ if wanted.intersects(CtStatuses(
                CtStatuses::SEEN_REPLY.0 | CtStatuses::CONFIRMED.0,
            )) =>
            {
                true.into()
            }
            _ => unknown("the connection's status bits are not known"),
        }
    }

    fn packet_type(&self, kind: PacketType) -> Test {
        let dst = self.packet().ip.dst;
        let actual = if dst.is_multicast() {
            PacketType::Multicast
        } else if let Ok(types) = self.address_type(dst, None)
            && types == AddrTypes::BROADCAST
        {
            PacketType::Broadcast
        } else {
            PacketType::Unicast
        };
        (actual == kind).into()
    }

    /// `-m owner`: a packet without a local socket matches only where every
    /// test is negated (`owner_mt`).
    fn owner(&self, owner: &OwnerMatch) -> Test {
        if !self.branch.local_origin {
            let mut all_negated = true;
            if let Some(uid) = &owner.uid {
                all_negated &= uid.invert;
            }
            if let Some(gid) = &owner.gid {
                all_negated &= gid.invert;
            }
            if let Some(exists) = owner.socket_exists {
                all_negated &= !exists;
            }
            return all_negated.into();
        }
        let Some(socket) = self.packet().owner else {
            return unknown("the sending socket's owner is not known");
        };
        let mut test = Test::from(true);
        if let Some(exists) = owner.socket_exists {
            test = and(test, exists.into());
        }
        if let Some(uid) = &owner.uid {
            test = and(
                test,
                invert(uid.value.contains(&socket.uid).into(), uid.invert),
            );
        }
        if let Some(gid) = &owner.gid {
            let hit = gid.value.contains(&socket.gid);
            let test_gid = if owner.supplementary_groups && !hit {
                unknown("supplementary groups are not known")
            } else {
                hit.into()
            };
            test = and(test, invert(test_gid, gid.invert));
        }
        test
    }

    /// `-m rpfilter`: would a reply to the packet leave by the interface it
    /// came in on (`rpfilter_lookup_reverse`)?
    fn rpfilter(&self, rpfilter: &RpfilterMatch) -> Test {
        let packet = self.packet();
        let Some(fib) = self.walk.context.fib else {
            return unknown("rpfilter needs the routing tables");
        };
        let Some(iif) = packet.in_iface.as_deref() else {
            return unknown("rpfilter: the input interface is not known");
        };
        if iif == "lo" {
            return invert(true.into(), rpfilter.invert);
        }
        let flow = FlowKey {
            src: Some(packet.ip.dst),
            mark: if rpfilter.validmark {
                packet.ip.mark
            } else {
                0
            },
            ..FlowKey::to(packet.ip.src)
        };
        let hit = match fib.lookup(&flow).outcome {
            LookupOutcome::Routed {
                route_type, paths, ..
            } => {
                if route_type == RouteType::Local {
                    Test::from(rpfilter.accept_local)
                } else {
                    Test::from(rpfilter.loose || RoutePath::any_by(&paths, iif))
                }
            }
            LookupOutcome::Failed { .. } => false.into(),
            LookupOutcome::Unknown { reason } => unknown(format!("rpfilter: {reason}")),
        };
        invert(hit, rpfilter.invert)
    }
}

/// `-m physdev`: a packet that was not bridged matches only where every
/// test is negated (`physdev_mt`).
fn physdev_test(physdev: &PhysdevMatch, packet: &Packet) -> Test {
    let Some(bridge) = &packet.bridge else {
        let required = [
            physdev.physdev_in.as_ref().map(|i| !i.invert),
            physdev.physdev_out.as_ref().map(|i| !i.invert),
            physdev.is_in,
            physdev.is_out,
            physdev.is_bridged,
        ];
        return (!required.into_iter().flatten().any(|r| r)).into();
    };
    let port = |test: Option<&Invertible<Interface>>, port: Option<&str>| {
        test.map_or(Test::from(true), |t| {
            invert(t.value.matches(port.unwrap_or("")).into(), t.invert)
        })
    };
    let flag = |test: Option<bool>, value: bool| test.is_none_or(|want| want == value);
    let mut test = port(physdev.physdev_in.as_ref(), bridge.physdev_in.as_deref());
    test = and(
        test,
        port(physdev.physdev_out.as_ref(), bridge.physdev_out.as_deref()),
    );
    let flags = flag(physdev.is_in, bridge.physdev_in.is_some())
        && flag(physdev.is_out, bridge.physdev_out.is_some())
        && flag(physdev.is_bridged, bridge.physdev_out.is_some());
    and(test, flags.into())
}

fn and(a: Test, b: Test) -> Test {
    let truth = a.truth.and(b.truth);
    let note = match (a.note, b.note) {
        (Note::Unknown(why), _) | (_, Note::Unknown(why)) => Note::Unknown(why),
        (Note::Assumed(what), _) | (_, Note::Assumed(what)) => Note::Assumed(what),
        (Note::None, Note::None) => Note::None,
    };
    Test { truth, note }
}

fn or(a: Tri, b: Tri) -> Tri {
    !(!a).and(!b)
}
