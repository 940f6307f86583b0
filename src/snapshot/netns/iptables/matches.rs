//! What a rule tests: the built-in options and the match modules (`-m`),
//! each with its values already read (networks, port ranges, marks, flag
//! sets), so that evaluating a packet never parses text.

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;

use super::DumpText;
use super::rule::{Extension, OptionArgs, WordIssue, extensions, text};
use super::values::{
    AddressRange, BadValue, IcmpType, Interface, Invertible, MarkMask, PortRange, bad, flag_set,
    ip_addr, ip_net, number, protocol,
};
use crate::net::Protocol;

/// One test of a rule. A rule matches when all of its tests do.
#[derive(Debug, Clone, PartialEq)]
pub enum Match {
    /// `-s`
    Source(Invertible<IpNet>),
    /// `-d`
    Destination(Invertible<IpNet>),
    /// `-i`
    InInterface(Invertible<Interface>),
    /// `-o`
    OutInterface(Invertible<Interface>),
    /// `-p`
    Protocol(Invertible<Protocol>),
    /// `-f`: second and later fragments (`! -f`: unfragmented packets and first fragments).
    Fragment { invert: bool },
    /// `-m tcp`
    Tcp(TcpMatch),
    /// `-m udp`
    Udp(PortMatch),
    /// `-m sctp` (ports only)
    Sctp(PortMatch),
    /// `-m icmp --icmp-type`
    Icmp(Invertible<IcmpType>),
    /// `-m icmp6 --icmpv6-type` (ip6tables)
    Icmp6(Invertible<IcmpType>),
    /// `-m multiport`
    Multiport(MultiportMatch),
    /// `-m addrtype`
    AddrType(AddrTypeMatch),
    /// `-m conntrack`
    Conntrack(Box<ConntrackMatch>),
    /// `-m state --state`
    State(Invertible<CtStates>),
    /// `-m mark --mark`: the packet's mark.
    Mark(Invertible<MarkMask>),
    /// `-m connmark --mark`: the connection's mark.
    ConnMark(Invertible<MarkMask>),
    /// `-m set --match-set`
    Set(Box<SetMatch>),
    /// `-m comment --comment`: always matches; says which object the rule is for.
    Comment(DumpText),
    /// `-m nfacct --nfacct-name`: always matches; counts the packet into that
    /// accounting object (kube-proxy's `ct_state_invalid_dropped_pkts`).
    Nfacct(DumpText),
    /// `-m statistic`
    Statistic(Invertible<Statistic>),
    /// `-m physdev`
    Physdev(Box<PhysdevMatch>),
    /// `-m rpfilter`
    Rpfilter(RpfilterMatch),
    /// `-m iprange`
    IpRange(Box<IpRangeMatch>),
    /// `-m length --length`: the IP packet's length.
    Length(Invertible<RangeInclusive<u16>>),
    /// `-m ttl`
    Ttl(Invertible<TtlTest>),
    /// `-m pkttype --pkt-type`
    PacketType(Invertible<PacketType>),
    /// `-m owner` (locally generated packets)
    Owner(Box<OwnerMatch>),
    /// `-m recent`
    Recent(Box<RecentMatch>),
    /// `-m limit`
    Limit(LimitMatch),
    /// `-m hashlimit`
    HashLimit(Box<HashLimitMatch>),
    /// `-m socket`
    Socket(SocketMatch),
    /// `-m u32 --u32`
    U32(Box<U32Match>),
    /// `-m bpf`
    Bpf(Box<BpfMatch>),
    /// A module, option or value this parser does not understand, kept with
    /// its text as written so that evaluation can say the outcome is unknown.
    Unsupported { module: String, raw: String },
}

/// Source and destination port tests (`--sport`, `--dport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortMatch {
    pub source: Option<Invertible<PortRange>>,
    pub destination: Option<Invertible<PortRange>>,
}

/// `-m tcp`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpMatch {
    pub ports: PortMatch,
    /// `--tcp-flags` (`--syn` is `SYN` of `FIN,SYN,RST,ACK`).
    pub flags: Option<Invertible<TcpFlags>>,
    /// `--tcp-option`: the packet carries this TCP option.
    pub option: Option<Invertible<u8>>,
}

/// `--tcp-flags MASK SET`: of the flags in `mask`, exactly those in `set` are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpFlags {
    pub mask: TcpFlagBits,
    pub set: TcpFlagBits,
}

flag_set! {
    /// TCP header flags as `--tcp-flags` names them.
    TcpFlagBits: u8 {
        FIN = 0x01, "FIN";
        SYN = 0x02, "SYN";
        RST = 0x04, "RST";
        PSH = 0x08, "PSH";
        ACK = 0x10, "ACK";
        URG = 0x20, "URG";
        ALL = 0x3f, "ALL";
        NONE = 0, "NONE";
    }
}

/// `-m multiport`: up to 15 ports or ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiportMatch {
    pub invert: bool,
    pub direction: PortDirection,
    pub ports: Vec<PortRange>,
}

/// Which port a port list tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortDirection {
    /// `--sports`
    Source,
    /// `--dports`
    Destination,
    /// `--ports`: either port.
    Either,
}

/// `-m addrtype`: the routing type of the source or destination address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddrTypeMatch {
    pub source: Option<Invertible<AddrTypes>>,
    pub destination: Option<Invertible<AddrTypes>>,
    /// `--limit-iface-in`/`--limit-iface-out`: look the address up only on
    /// the packet's input or output interface.
    pub limit_interface: Option<LimitInterface>,
}

/// `--limit-iface-in` or `--limit-iface-out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitInterface {
    In,
    Out,
}

flag_set! {
    /// Route types (`1 << RTN_*`), as `-m addrtype` names them.
    AddrTypes: u16 {
        UNSPEC = 1 << 0, "UNSPEC";
        UNICAST = 1 << 1, "UNICAST";
        LOCAL = 1 << 2, "LOCAL";
        BROADCAST = 1 << 3, "BROADCAST";
        ANYCAST = 1 << 4, "ANYCAST";
        MULTICAST = 1 << 5, "MULTICAST";
        BLACKHOLE = 1 << 6, "BLACKHOLE";
        UNREACHABLE = 1 << 7, "UNREACHABLE";
        PROHIBIT = 1 << 8, "PROHIBIT";
        THROW = 1 << 9, "THROW";
        NAT = 1 << 10, "NAT";
        XRESOLVE = 1 << 11, "XRESOLVE";
    }
}

/// `-m conntrack`: the packet's connection tracking entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConntrackMatch {
    pub state: Option<Invertible<CtStates>>,
    pub status: Option<Invertible<CtStatuses>>,
    pub protocol: Option<Invertible<Protocol>>,
    pub original_source: Option<Invertible<IpNet>>,
    pub original_destination: Option<Invertible<IpNet>>,
    pub reply_source: Option<Invertible<IpNet>>,
    pub reply_destination: Option<Invertible<IpNet>>,
    pub original_source_port: Option<Invertible<PortRange>>,
    pub original_destination_port: Option<Invertible<PortRange>>,
    pub reply_source_port: Option<Invertible<PortRange>>,
    pub reply_destination_port: Option<Invertible<PortRange>>,
    pub direction: Option<CtDirection>,
    /// `--ctexpire`: remaining lifetime in seconds.
    pub expire: Option<Invertible<RangeInclusive<u32>>>,
}

flag_set! {
    /// Connection states (`--ctstate`, `--state`). `SNAT`/`DNAT`: the
    /// connection's reply direction differs from its original one.
    CtStates: u8 {
        INVALID = 1 << 0, "INVALID";
        NEW = 1 << 1, "NEW";
        ESTABLISHED = 1 << 2, "ESTABLISHED";
        RELATED = 1 << 3, "RELATED";
        UNTRACKED = 1 << 4, "UNTRACKED";
        SNAT = 1 << 5, "SNAT";
        DNAT = 1 << 6, "DNAT";
    }
}

flag_set! {
    /// Connection status bits (`--ctstatus`).
    CtStatuses: u8 {
        NONE = 0, "NONE";
        EXPECTED = 1 << 0, "EXPECTED";
        SEEN_REPLY = 1 << 1, "SEEN_REPLY";
        ASSURED = 1 << 2, "ASSURED";
        CONFIRMED = 1 << 3, "CONFIRMED";
    }
}

/// Which direction of its connection a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtDirection {
    Original,
    Reply,
}

/// `-m set --match-set NAME src,dst...`: whether the packet's fields, in
/// the order of `directions`, are a member of the ipset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetMatch {
    pub invert: bool,
    pub name: String,
    pub directions: Vec<SetDirection>,
    /// `--return-nomatch`: a `nomatch` member makes the match succeed.
    pub return_nomatch: bool,
    /// False with `! --update-counters`.
    pub update_counters: bool,
    /// False with `! --update-subcounters`.
    pub update_subcounters: bool,
}

/// One field of a `--match-set` test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetDirection {
    Source,
    Destination,
}

/// `-m statistic`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    /// `--mode random --probability p`: each packet matches with probability p.
    Random { probability: f64 },
    /// `--mode nth --every n --packet p`: the p-th of every n packets.
    Nth { every: u32, packet: u32 },
}

/// `-m physdev`: the bridge ports a bridged packet uses. For the `is_*`
/// tests, `Some(true)` requires it and `Some(false)` (`!`) forbids it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhysdevMatch {
    pub physdev_in: Option<Invertible<Interface>>,
    pub physdev_out: Option<Invertible<Interface>>,
    pub is_in: Option<bool>,
    pub is_out: Option<bool>,
    pub is_bridged: Option<bool>,
}

/// `-m rpfilter`: whether a reply to the packet would leave by the
/// interface it came in on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RpfilterMatch {
    pub loose: bool,
    pub validmark: bool,
    pub accept_local: bool,
    pub invert: bool,
}

/// `-m iprange`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpRangeMatch {
    pub source: Option<Invertible<AddressRange>>,
    pub destination: Option<Invertible<AddressRange>>,
}

/// `-m ttl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlTest {
    Equal(u8),
    LessThan(u8),
    GreaterThan(u8),
}

/// `-m pkttype --pkt-type`: the link-layer packet type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketType {
    /// Addressed to this host (`unicast` or `host`).
    Unicast,
    Broadcast,
    Multicast,
    /// Addressed to another host (seen in promiscuous mode).
    OtherHost,
}

/// `-m owner`: the local socket that sends the packet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerMatch {
    pub uid: Option<Invertible<RangeInclusive<u32>>>,
    pub gid: Option<Invertible<RangeInclusive<u32>>>,
    /// `Some(true)`: the packet has a socket; `Some(false)` (`!`): it has none.
    pub socket_exists: Option<bool>,
    /// `--suppl-groups`: `gid` also tests supplementary groups.
    pub supplementary_groups: bool,
}

/// `-m recent`: addresses remembered in a named list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentMatch {
    pub name: String,
    pub command: Invertible<RecentCommand>,
    pub seconds: Option<u32>,
    pub reap: bool,
    pub hitcount: Option<u32>,
    pub rttl: bool,
    pub side: RecentSide,
    pub mask: Option<IpAddr>,
}

/// What `-m recent` does with the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecentCommand {
    /// `--set`: add the address; always matches.
    Set,
    /// `--rcheck`
    Check,
    /// `--update`
    Update,
    /// `--remove`
    Remove,
}

/// Which address `-m recent` remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecentSide {
    /// `--rsource` (the default).
    Source,
    /// `--rdest`
    Destination,
}

/// `-m limit`: at most `rate` on average, in bursts of up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitMatch {
    pub rate: Rate,
    pub burst: u32,
}

/// A rate: `amount` packets or bytes `per` unit of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub amount: u64,
    pub unit: RateUnit,
    pub per: TimeUnit,
}

/// What a rate counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    Packets,
    Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Second,
    Minute,
    Hour,
    Day,
}

impl Rate {
    /// Reads `5/min`, and with `bytes` also `1kb/s`, `2mb/second`.
    fn parse(text: &str, bytes: bool) -> Result<Rate, BadValue> {
        let not_rate = || BadValue(format!("`{text}` is not a rate"));
        let (amount, per) = text.split_once('/').unwrap_or((text, "sec"));
        let per = match per {
            "s" | "sec" | "second" => TimeUnit::Second,
            "m" | "min" | "minute" => TimeUnit::Minute,
            "h" | "hour" => TimeUnit::Hour,
            "d" | "day" => TimeUnit::Day,
            _ => return Err(not_rate()),
        };
        let scaled = [("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("b", 1)]
            .into_iter()
            .find_map(|(suffix, scale)| amount.strip_suffix(suffix).map(|n| (n, scale)));
        let (amount, unit) = match scaled {
            Some((number, scale)) if bytes => (
                number
                    .parse::<u64>()
                    .ok()
                    .and_then(|n| n.checked_mul(scale))
                    .ok_or_else(not_rate)?,
                RateUnit::Bytes,
            ),
            Some(_) => return Err(not_rate()),
            None => (amount.parse().map_err(|_| not_rate())?, RateUnit::Packets),
        };
        Ok(Rate { amount, unit, per })
    }
}

/// `-m hashlimit`: a `limit` per group of packets (by address/port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashLimitMatch {
    pub name: String,
    /// `--hashlimit-above`: match packets over the rate, rather than under it.
    pub above: bool,
    pub rate: Rate,
    pub burst: Option<u32>,
    pub mode: HashLimitMode,
    pub source_mask: Option<u8>,
    pub destination_mask: Option<u8>,
    pub htable_size: Option<u32>,
    pub htable_max: Option<u32>,
    pub htable_expire: Option<u32>,
    pub htable_gcinterval: Option<u32>,
}

flag_set! {
    /// What `--hashlimit-mode` groups packets by.
    HashLimitMode: u8 {
        SOURCE_IP = 1 << 0, "srcip";
        SOURCE_PORT = 1 << 1, "srcport";
        DESTINATION_IP = 1 << 2, "dstip";
        DESTINATION_PORT = 1 << 3, "dstport";
    }
}

/// `-m socket`: a local socket matches the packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketMatch {
    pub transparent: bool,
    pub nowildcard: bool,
    pub restore_skmark: bool,
}

/// `-m u32 --u32`: tests on 32-bit words read from the packet. Matches when
/// every test does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct U32Match {
    pub invert: bool,
    pub tests: Vec<U32Test>,
}

/// One `&&`-separated test: read the word at `start`, apply `steps`, and
/// compare with `ranges`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct U32Test {
    pub start: u32,
    pub steps: Vec<U32Step>,
    pub ranges: Vec<RangeInclusive<u32>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum U32Step {
    /// `&mask`
    And(u32),
    /// `<<n`
    ShiftLeft(u32),
    /// `>>n`
    ShiftRight(u32),
    /// `@n`: read the word at the current value plus `n`.
    At(u32),
}

/// `-m bpf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BpfMatch {
    pub invert: bool,
    pub program: BpfProgram,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BpfProgram {
    /// `--bytecode`: classic BPF instructions.
    Bytecode(Vec<BpfInstruction>),
    /// `--object-pinned`: an eBPF program pinned at this path.
    Pinned(String),
}

/// One classic BPF instruction (`code jt jf k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpfInstruction {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

extensions! {
    /// A match module whose options are being read.
    PendingMatch -> Match {
        "tcp" => Tcp(TcpMatch),
        "udp" => Udp(UdpState),
        "sctp" => Sctp(SctpState),
        "icmp" => Icmp(IcmpState<false>),
        "icmp6" => Icmp6(IcmpState<true>),
        "multiport" => Multiport(MultiportState),
        "addrtype" => AddrType(AddrTypeMatch),
        "conntrack" => Conntrack(ConntrackState),
        "state" => State(StateState),
        "mark" => Mark(MarkState),
        "connmark" => ConnMark(ConnMarkState),
        "set" => Set(SetState),
        "comment" => Comment(CommentState),
        "nfacct" => Nfacct(NfacctState),
        "statistic" => Statistic(StatisticState),
        "physdev" => Physdev(Box<PhysdevMatch>),
        "rpfilter" => Rpfilter(RpfilterMatch),
        "iprange" => IpRange(Box<IpRangeMatch>),
        "length" => Length(LengthState),
        "ttl" => Ttl(TtlState),
        "pkttype" => PacketType(PacketTypeState),
        "owner" => Owner(OwnerMatch),
        "recent" => Recent(Box<RecentState>),
        "limit" => Limit(LimitState),
        "hashlimit" => HashLimit(Box<HashLimitState>),
        "socket" => Socket(SocketMatch),
        "u32" => U32(U32State),
        "bpf" => Bpf(BpfState),
    }
}

fn ports(text: &str) -> Result<PortRange, BadValue> {
    PortRange::parse(text, ':')
}

/// Reads `--sport`/`--dport` and their long names for tcp, udp and sctp.
fn port_option(
    ports_match: &mut PortMatch,
    name: &str,
    args: &mut OptionArgs<'_, '_>,
) -> Option<Result<(), WordIssue>> {
    Some(match name {
        "--sport" | "--source-port" => args.once(&mut ports_match.source, |a| a.invertible(ports)),
        "--dport" | "--destination-port" => {
            args.once(&mut ports_match.destination, |a| a.invertible(ports))
        }
        _ => return None,
    })
}

/// Reads one value that the module must have, as the only thing it reads.
fn required<T>(slot: Option<T>, word: usize, what: &str) -> Result<T, WordIssue> {
    slot.ok_or_else(|| WordIssue::new(word, format!("{what} is missing")))
}

impl Extension for TcpMatch {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--tcp-flags" => args.once(&mut self.flags, |a| {
                let mask = a.arg(TcpFlagBits::parse)?;
                let set = a.arg(TcpFlagBits::parse)?;
                Ok(Invertible {
                    invert: a.invert(),
                    value: TcpFlags { mask, set },
                })
            }),
            "--syn" => args.once(&mut self.flags, |a| {
                Ok(Invertible {
                    invert: a.invert(),
                    value: TcpFlags {
                        mask: TcpFlagBits(
                            TcpFlagBits::FIN.0
                                | TcpFlagBits::SYN.0
                                | TcpFlagBits::RST.0
                                | TcpFlagBits::ACK.0,
                        ),
                        set: TcpFlagBits::SYN,
                    },
                })
            }),
            "--tcp-option" => args.once(&mut self.option, |a| a.invertible(number)),
            _ => return port_option(&mut self.ports, name, args),
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Tcp(self))
    }
}

#[derive(Default)]
pub(super) struct UdpState(PortMatch);

impl Extension for UdpState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        port_option(&mut self.0, name, args)
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Udp(self.0))
    }
}

/// `-m sctp` with its ports; `--chunk-types` is not read, so a rule that
/// uses it stays unsupported.
#[derive(Default)]
pub(super) struct SctpState(PortMatch);

impl Extension for SctpState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        port_option(&mut self.0, name, args)
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Sctp(self.0))
    }
}

/// `-m icmp --icmp-type` (`V6` false) or ip6tables' `-m icmp6
/// --icmpv6-type` (`V6` true): the same test, with ICMPv6's names.
#[derive(Default)]
pub(super) struct IcmpState<const V6: bool>(Option<Invertible<IcmpType>>);

impl<const V6: bool> IcmpState<V6> {
    const OPTION: &'static str = if V6 { "--icmpv6-type" } else { "--icmp-type" };
}

impl<const V6: bool> Extension for IcmpState<V6> {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let parse = if V6 {
            IcmpType::parse6
        } else {
            IcmpType::parse
        };
        (name == Self::OPTION).then(|| args.once(&mut self.0, |a| a.invertible(parse)))
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        let test = required(self.0, word, &format!("`{}`", Self::OPTION))?;
        Ok(if V6 {
            Match::Icmp6(test)
        } else {
            Match::Icmp(test)
        })
    }
}

#[derive(Default)]
pub(super) struct MultiportState(Option<MultiportMatch>);

/// Reads `80,443,8000:8080`: at most 15 ports and ranges.
fn port_list(list: &str) -> Result<Vec<PortRange>, BadValue> {
    let ports = list.split(',').map(ports).collect::<Result<Vec<_>, _>>()?;
    if ports.len() > 15 {
        return bad(format!("`{list}` has more than 15 ports"));
    }
    Ok(ports)
}

impl Extension for MultiportState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let direction = match name {
            "--sports" | "--source-ports" => PortDirection::Source,
            "--dports" | "--destination-ports" => PortDirection::Destination,
            "--ports" => PortDirection::Either,
            _ => return None,
        };
        Some(args.once(&mut self.0, |a| {
            let ports = a.invertible(port_list)?;
            Ok(MultiportMatch {
                invert: ports.invert,
                direction,
                ports: ports.value,
            })
        }))
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(
            self.0,
            word,
            "a port list (`--dports`, `--sports` or `--ports`)",
        )
        .map(Match::Multiport)
    }
}

impl Extension for AddrTypeMatch {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--src-type" => args.once(&mut self.source, |a| a.invertible(AddrTypes::parse)),
            "--dst-type" => args.once(&mut self.destination, |a| a.invertible(AddrTypes::parse)),
            "--limit-iface-in" => args.once(&mut self.limit_interface, |a| {
                a.plain().map(|()| LimitInterface::In)
            }),
            "--limit-iface-out" => args.once(&mut self.limit_interface, |a| {
                a.plain().map(|()| LimitInterface::Out)
            }),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::AddrType(self))
    }
}

fn u32_range(text: &str) -> Result<RangeInclusive<u32>, BadValue> {
    match text.split_once(':') {
        None => number(text).map(|n| n..=n),
        Some((first, last)) => {
            let (first, last) = (number(first)?, number(last)?);
            if first > last {
                return bad(format!("range `{text}` ends before it starts"));
            }
            Ok(first..=last)
        }
    }
}

/// `-m conntrack`, read straight into the box its match is kept in.
#[derive(Default)]
pub(super) struct ConntrackState(Box<ConntrackMatch>);

impl Extension for ConntrackState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let ct = &mut *self.0;
        let port = |a: &mut OptionArgs<'_, '_>| a.invertible(ports);
        let net = |a: &mut OptionArgs<'_, '_>| a.invertible(ip_net);
        Some(match name {
            "--ctstate" => args.once(&mut ct.state, |a| a.invertible(CtStates::parse)),
            "--ctstatus" => args.once(&mut ct.status, |a| a.invertible(CtStatuses::parse)),
            "--ctproto" => args.once(&mut ct.protocol, |a| a.invertible(protocol)),
            "--ctorigsrc" => args.once(&mut ct.original_source, net),
            "--ctorigdst" => args.once(&mut ct.original_destination, net),
            "--ctreplsrc" => args.once(&mut ct.reply_source, net),
            "--ctrepldst" => args.once(&mut ct.reply_destination, net),
            "--ctorigsrcport" => args.once(&mut ct.original_source_port, port),
            "--ctorigdstport" => args.once(&mut ct.original_destination_port, port),
            "--ctreplsrcport" => args.once(&mut ct.reply_source_port, port),
            "--ctrepldstport" => args.once(&mut ct.reply_destination_port, port),
            "--ctexpire" => args.once(&mut ct.expire, |a| a.invertible(u32_range)),
            "--ctdir" => args.once(&mut ct.direction, |a| {
                a.value(|dir| match dir {
                    "ORIGINAL" => Ok(CtDirection::Original),
                    "REPLY" => Ok(CtDirection::Reply),
                    _ => bad(format!("`{dir}` is not ORIGINAL or REPLY")),
                })
            }),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Conntrack(self.0))
    }
}

#[derive(Default)]
pub(super) struct StateState(Option<Invertible<CtStates>>);

impl Extension for StateState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--state" => args.once(&mut self.0, |a| a.invertible(CtStates::parse)),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0, word, "`--state`").map(Match::State)
    }
}

#[derive(Default)]
pub(super) struct MarkState(Option<Invertible<MarkMask>>);

impl Extension for MarkState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--mark" => args.once(&mut self.0, |a| a.invertible(MarkMask::parse)),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0, word, "`--mark`").map(Match::Mark)
    }
}

#[derive(Default)]
pub(super) struct ConnMarkState(MarkState);

impl Extension for ConnMarkState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        self.0.option(name, args)
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0.0, word, "`--mark`").map(Match::ConnMark)
    }
}

/// `-m set`, read straight into the box its match is kept in.
pub(super) struct SetState {
    set: Box<SetMatch>,
    /// Whether `--match-set` was read.
    named: Option<()>,
}

impl Default for SetState {
    fn default() -> Self {
        SetState {
            set: Box::new(SetMatch {
                invert: false,
                name: String::new(),
                directions: Vec::new(),
                return_nomatch: false,
                update_counters: true,
                update_subcounters: true,
            }),
            named: None,
        }
    }
}

fn set_directions(text: &str) -> Result<Vec<SetDirection>, BadValue> {
    let directions = text
        .split(',')
        .map(|d| match d {
            "src" => Ok(SetDirection::Source),
            "dst" => Ok(SetDirection::Destination),
            _ => bad(format!("`{d}` is not src or dst")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if directions.len() > 6 {
        return bad("a set is matched on at most 6 fields");
    }
    Ok(directions)
}

impl Extension for SetState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let set = &mut *self.set;
        Some(match name {
            "--match-set" => args.once(&mut self.named, |a| {
                set.invert = a.invert();
                set.name = a.arg(text)?;
                set.directions = a.arg(set_directions)?;
                Ok(())
            }),
            "--return-nomatch" => a_flag(args, &mut set.return_nomatch),
            "--update-counters" => {
                set.update_counters = !args.invert();
                Ok(())
            }
            "--update-subcounters" => {
                set.update_subcounters = !args.invert();
                Ok(())
            }
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.named, word, "`--match-set`")?;
        Ok(Match::Set(self.set))
    }
}

/// Reads an option without value that cannot be negated into `flag`.
fn a_flag(args: &mut OptionArgs<'_, '_>, flag: &mut bool) -> Result<(), WordIssue> {
    args.plain()?;
    *flag = true;
    Ok(())
}

#[derive(Default)]
pub(super) struct CommentState(Option<DumpText>);

impl Extension for CommentState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--comment" => args.once(&mut self.0, OptionArgs::dump_text),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0, word, "`--comment`").map(Match::Comment)
    }
}

#[derive(Default)]
pub(super) struct NfacctState(Option<DumpText>);

impl Extension for NfacctState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--nfacct-name" => args.once(&mut self.0, OptionArgs::dump_text),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0, word, "`--nfacct-name`").map(Match::Nfacct)
    }
}

/// `--mode` of `-m statistic`.
#[derive(Clone, Copy)]
enum StatisticMode {
    Random,
    Nth,
}

#[derive(Default)]
pub(super) struct StatisticState {
    mode: Option<StatisticMode>,
    probability: Option<Invertible<f64>>,
    every: Option<Invertible<u32>>,
    packet: Option<u32>,
}

fn probability(text: &str) -> Result<f64, BadValue> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => bad(format!("`{text}` is not a probability between 0 and 1")),
    }
}

impl Extension for StatisticState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--mode" => args.once(&mut self.mode, |a| {
                a.value(|mode| match mode {
                    "random" => Ok(StatisticMode::Random),
                    "nth" => Ok(StatisticMode::Nth),
                    _ => bad(format!("`{mode}` is not a statistic mode (random or nth)")),
                })
            }),
            "--probability" => args.once(&mut self.probability, |a| a.invertible(probability)),
            "--every" => args.once(&mut self.every, |a| a.invertible(number)),
            "--packet" => args.once(&mut self.packet, |a| a.value(number)),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        let mode = required(self.mode, word, "`--mode`")?;
        let statistic = match (mode, self.probability, self.every) {
            (StatisticMode::Random, Some(p), None) if self.packet.is_none() => Invertible {
                invert: p.invert,
                value: Statistic::Random {
                    probability: p.value,
                },
            },
            (StatisticMode::Nth, None, Some(every)) => Invertible {
                invert: every.invert,
                value: Statistic::Nth {
                    every: every.value,
                    packet: self.packet.unwrap_or(0),
                },
            },
            _ => {
                return Err(WordIssue::new(
                    word,
                    "statistic needs `--mode random --probability P` or `--mode nth --every N`",
                ));
            }
        };
        Ok(Match::Statistic(statistic))
    }
}

/// Reads a test without value that `!` may negate: `Some(!invert)`.
fn a_test(args: &mut OptionArgs<'_, '_>, slot: &mut Option<bool>) -> Result<(), WordIssue> {
    let present = !args.invert();
    args.once(slot, |_| Ok(present))
}

impl Extension for PhysdevMatch {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--physdev-in" => args.once(&mut self.physdev_in, |a| a.invertible(Interface::parse)),
            "--physdev-out" => args.once(&mut self.physdev_out, |a| a.invertible(Interface::parse)),
            "--physdev-is-in" => a_test(args, &mut self.is_in),
            "--physdev-is-out" => a_test(args, &mut self.is_out),
            "--physdev-is-bridged" => a_test(args, &mut self.is_bridged),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Physdev(Box::new(self)))
    }
}

impl Extension for RpfilterMatch {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--loose" => a_flag(args, &mut self.loose),
            "--validmark" => a_flag(args, &mut self.validmark),
            "--accept-local" => a_flag(args, &mut self.accept_local),
            "--invert" => a_flag(args, &mut self.invert),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Rpfilter(self))
    }
}

impl Extension for IpRangeMatch {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--src-range" => args.once(&mut self.source, |a| a.invertible(AddressRange::parse)),
            "--dst-range" => {
                args.once(&mut self.destination, |a| a.invertible(AddressRange::parse))
            }
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::IpRange(Box::new(self)))
    }
}

#[derive(Default)]
pub(super) struct LengthState(Option<Invertible<RangeInclusive<u16>>>);

impl Extension for LengthState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--length" => args.once(&mut self.0, |a| {
                a.invertible(|t| {
                    let range = u32_range(t)?;
                    match (u16::try_from(*range.start()), u16::try_from(*range.end())) {
                        (Ok(first), Ok(last)) => Ok(first..=last),
                        _ => bad(format!("`{t}` is longer than an IP packet can be")),
                    }
                })
            }),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0, word, "`--length`").map(Match::Length)
    }
}

#[derive(Default)]
pub(super) struct TtlState(Option<Invertible<TtlTest>>);

impl Extension for TtlState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let test: fn(u8) -> TtlTest = match name {
            "--ttl-eq" => TtlTest::Equal,
            "--ttl-lt" => TtlTest::LessThan,
            "--ttl-gt" => TtlTest::GreaterThan,
            _ => return None,
        };
        Some(args.once(&mut self.0, |a| a.invertible(|t| number(t).map(test))))
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0, word, "`--ttl-eq`, `--ttl-lt` or `--ttl-gt`").map(Match::Ttl)
    }
}

#[derive(Default)]
pub(super) struct PacketTypeState(Option<Invertible<PacketType>>);

impl Extension for PacketTypeState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--pkt-type" => args.once(&mut self.0, |a| {
                a.invertible(|t| match t.to_ascii_lowercase().as_str() {
                    "unicast" | "host" => Ok(PacketType::Unicast),
                    "broadcast" => Ok(PacketType::Broadcast),
                    "multicast" => Ok(PacketType::Multicast),
                    "otherhost" => Ok(PacketType::OtherHost),
                    _ => bad(format!("`{t}` is not a packet type")),
                })
            }),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0, word, "`--pkt-type`").map(Match::PacketType)
    }
}

/// Reads a numeric id or id range (`10-20`); names are not resolved, as
/// dumps print numbers.
fn id_range(text: &str) -> Result<RangeInclusive<u32>, BadValue> {
    u32_range(&text.replacen('-', ":", 1))
        .or_else(|_| bad(format!("`{text}` is not a numeric id or id range")))
}

impl Extension for OwnerMatch {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--uid-owner" => args.once(&mut self.uid, |a| a.invertible(id_range)),
            "--gid-owner" => args.once(&mut self.gid, |a| a.invertible(id_range)),
            "--socket-exists" => a_test(args, &mut self.socket_exists),
            "--suppl-groups" => a_flag(args, &mut self.supplementary_groups),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Owner(Box::new(self)))
    }
}

#[derive(Default)]
pub(super) struct RecentState {
    name: Option<String>,
    command: Option<Invertible<RecentCommand>>,
    seconds: Option<u32>,
    reap: bool,
    hitcount: Option<u32>,
    rttl: bool,
    side: Option<RecentSide>,
    mask: Option<IpAddr>,
}

impl Extension for RecentState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let command = match name {
            "--set" => Some(RecentCommand::Set),
            "--rcheck" => Some(RecentCommand::Check),
            "--update" => Some(RecentCommand::Update),
            "--remove" => Some(RecentCommand::Remove),
            _ => None,
        };
        if let Some(command) = command {
            let invert = args.invert();
            return Some(args.once(&mut self.command, |_| {
                Ok(Invertible {
                    invert,
                    value: command,
                })
            }));
        }
        Some(match name {
            "--name" => args.once(&mut self.name, |a| a.value(text)),
            "--seconds" => args.once(&mut self.seconds, |a| a.value(number)),
            "--hitcount" => args.once(&mut self.hitcount, |a| a.value(number)),
            "--reap" => a_flag(args, &mut self.reap),
            "--rttl" => a_flag(args, &mut self.rttl),
            "--rsource" => args.once(&mut self.side, |a| a.plain().map(|()| RecentSide::Source)),
            "--rdest" => args.once(&mut self.side, |a| {
                a.plain().map(|()| RecentSide::Destination)
            }),
            "--mask" => args.once(&mut self.mask, |a| a.value(ip_addr)),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Recent(Box::new(RecentMatch {
            name: self.name.unwrap_or_else(|| "DEFAULT".to_owned()),
            command: required(
                self.command,
                word,
                "`--set`, `--rcheck`, `--update` or `--remove`",
            )?,
            seconds: self.seconds,
            reap: self.reap,
            hitcount: self.hitcount,
            rttl: self.rttl,
            side: self.side.unwrap_or(RecentSide::Source),
            mask: self.mask,
        })))
    }
}

#[derive(Default)]
pub(super) struct LimitState {
    rate: Option<Rate>,
    burst: Option<u32>,
}

impl Extension for LimitState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--limit" => args.once(&mut self.rate, |a| a.value(|t| Rate::parse(t, false))),
            "--limit-burst" => args.once(&mut self.burst, |a| a.value(number)),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        // iptables' defaults: 3/hour in bursts of 5.
        Ok(Match::Limit(LimitMatch {
            rate: self.rate.unwrap_or(Rate {
                amount: 3,
                unit: RateUnit::Packets,
                per: TimeUnit::Hour,
            }),
            burst: self.burst.unwrap_or(5),
        }))
    }
}

#[derive(Default)]
pub(super) struct HashLimitState {
    name: Option<String>,
    rate: Option<(bool, Rate)>,
    burst: Option<u32>,
    mode: Option<HashLimitMode>,
    source_mask: Option<u8>,
    destination_mask: Option<u8>,
    htable_size: Option<u32>,
    htable_max: Option<u32>,
    htable_expire: Option<u32>,
    htable_gcinterval: Option<u32>,
}

impl Extension for HashLimitState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let rate = |above: bool| {
            move |a: &mut OptionArgs<'_, '_>| a.value(|t| Rate::parse(t, true)).map(|r| (above, r))
        };
        Some(match name {
            "--hashlimit-upto" | "--hashlimit" => args.once(&mut self.rate, rate(false)),
            "--hashlimit-above" => args.once(&mut self.rate, rate(true)),
            "--hashlimit-name" => args.once(&mut self.name, |a| a.value(text)),
            "--hashlimit-burst" => args.once(&mut self.burst, |a| a.value(number)),
            "--hashlimit-mode" => args.once(&mut self.mode, |a| a.value(HashLimitMode::parse)),
            "--hashlimit-srcmask" => args.once(&mut self.source_mask, |a| a.value(number)),
            "--hashlimit-dstmask" => args.once(&mut self.destination_mask, |a| a.value(number)),
            "--hashlimit-htable-size" => args.once(&mut self.htable_size, |a| a.value(number)),
            "--hashlimit-htable-max" => args.once(&mut self.htable_max, |a| a.value(number)),
            "--hashlimit-htable-expire" => args.once(&mut self.htable_expire, |a| a.value(number)),
            "--hashlimit-htable-gcinterval" => {
                args.once(&mut self.htable_gcinterval, |a| a.value(number))
            }
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        let (above, rate) = required(self.rate, word, "`--hashlimit-upto` or `--hashlimit-above`")?;
        Ok(Match::HashLimit(Box::new(HashLimitMatch {
            name: required(self.name, word, "`--hashlimit-name`")?,
            above,
            rate,
            burst: self.burst,
            mode: self.mode.unwrap_or_default(),
            source_mask: self.source_mask,
            destination_mask: self.destination_mask,
            htable_size: self.htable_size,
            htable_max: self.htable_max,
            htable_expire: self.htable_expire,
            htable_gcinterval: self.htable_gcinterval,
        })))
    }
}

impl Extension for SocketMatch {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--transparent" => a_flag(args, &mut self.transparent),
            "--nowildcard" => a_flag(args, &mut self.nowildcard),
            "--restore-skmark" => a_flag(args, &mut self.restore_skmark),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Match, WordIssue> {
        Ok(Match::Socket(self))
    }
}

#[derive(Default)]
pub(super) struct U32State(Option<U32Match>);

/// Reads the `--u32` language: `&&`-separated `location=ranges` tests, a
/// location being a number followed by `&n`, `<<n`, `>>n` and `@n` steps.
fn u32_tests(text: &str) -> Result<Vec<U32Test>, BadValue> {
    text.split("&&").map(u32_test).collect()
}

fn u32_test(test: &str) -> Result<U32Test, BadValue> {
    let Some((location, ranges)) = test.split_once('=') else {
        return bad(format!("u32 test `{test}` has no `=`"));
    };
    let ranges = ranges
        .split(',')
        .map(u32_range)
        .collect::<Result<Vec<_>, _>>()?;
    let operator = |c: char| matches!(c, '&' | '<' | '>' | '@');
    let start_end = location.find(operator).unwrap_or(location.len());
    let start = number(location[..start_end].trim())?;
    let mut steps = Vec::new();
    let mut rest = &location[start_end..];
    while !rest.is_empty() {
        let (step, after): (fn(u32) -> U32Step, &str) = if let Some(after) = rest.strip_prefix("<<")
        {
            (U32Step::ShiftLeft, after)
        } else if let Some(after) = rest.strip_prefix(">>") {
            (U32Step::ShiftRight, after)
        } else if let Some(after) = rest.strip_prefix('&') {
            (U32Step::And, after)
        } else if let Some(after) = rest.strip_prefix('@') {
            (U32Step::At, after)
        } else {
            return bad(format!("u32 location `{location}` has an unknown operator"));
        };
        let end = after.find(operator).unwrap_or(after.len());
        steps.push(step(number(after[..end].trim())?));
        rest = &after[end..];
    }
    Ok(U32Test {
        start,
        steps,
        ranges,
    })
}

impl Extension for U32State {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--u32" => args.once(&mut self.0, |a| {
                let tests = a.invertible(u32_tests)?;
                Ok(U32Match {
                    invert: tests.invert,
                    tests: tests.value,
                })
            }),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        required(self.0, word, "`--u32`").map(|m| Match::U32(Box::new(m)))
    }
}

#[derive(Default)]
pub(super) struct BpfState(Option<Invertible<BpfProgram>>);

/// Reads `--bytecode "N,code jt jf k,..."` as `nfbpf_compile` prints it.
fn bytecode(text: &str) -> Result<BpfProgram, BadValue> {
    let mut parts = text.split(',');
    let count: usize = number(parts.next().unwrap_or_default().trim())?;
    let instructions = parts
        .map(|instruction| {
            let fields: Vec<&str> = instruction.split_whitespace().collect();
            let [code, jt, jf, k] = fields[..] else {
                return bad(format!(
                    "BPF instruction `{instruction}` does not have 4 fields"
                ));
            };
            Ok(BpfInstruction {
                code: number(code)?,
                jt: number(jt)?,
                jf: number(jf)?,
                k: number(k)?,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if instructions.len() != count {
        return bad(format!(
            "BPF program says {count} instructions but has {}",
            instructions.len()
        ));
    }
    Ok(BpfProgram::Bytecode(instructions))
}

impl Extension for BpfState {
    type Output = Match;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--bytecode" => args.once(&mut self.0, |a| a.invertible(bytecode)),
            "--object-pinned" => args.once(&mut self.0, |a| {
                a.invertible(|t| Ok(BpfProgram::Pinned(t.to_owned())))
            }),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Match, WordIssue> {
        let program = required(self.0, word, "`--bytecode` or `--object-pinned`")?;
        Ok(Match::Bpf(Box::new(BpfMatch {
            invert: program.invert,
            program: program.value,
        })))
    }
}
