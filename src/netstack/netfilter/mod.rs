//! Netfilter as the Linux kernel runs iptables rules: which tables a packet
//! meets at each hook and in what order, how it walks their chains (jump,
//! goto, RETURN, policies), what each match and target does, and how NAT and
//! MARK rewrite the packet that later rules see.
//!
//! A [`Netfilter`] is built once per namespace from the parsed ruleset and
//! indexed for speed; evaluating a packet returns every [`Outcome`] it can
//! have: one per `statistic` branch or multipath route, each with its
//! probability, the rewritten packet, the verdict and the ordered trace.
//!
//! Three-valued: a match the model cannot evaluate (u32, bpf, an unknown
//! module, an ipset that was not collected) is [`Tri::Unknown`] for that
//! packet. A rule whose match is unknown and whose target would change the
//! packet's fate (a verdict, a jump, NAT, a mark) ends that outcome as
//! [`Verdict::Unknown`] at that rule, naming it: the model does not guess
//! whether it fired. Only when the target changes nothing the model tracks
//! (LOG, NFLOG, TRACE, no target) does evaluation go on past it.
//!
//! Connection tracking is not in a dump, so the packet says what to assume
//! ([`CtState`]): a `New` packet is the first of its connection, so the nat
//! table is consulted; any other packet skips nat, and the translation its
//! connection already has is not known (a reply's un-NAT is not modelled).

mod chains;
mod decision;
mod index;
mod matching;
mod nftables;
pub mod sets;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::IpAddr;

use serde::Serialize;

use super::Tri;
use super::routing::{Fib, FlowKey, LookupOutcome, RouteError};
use crate::net::{self, Family};
use crate::snapshot::netns::NetnsDump;
use crate::snapshot::netns::addr::InterfaceAddrs;
use crate::snapshot::netns::ipset::IpSets;
use crate::snapshot::netns::iptables::{
    Policy, Protocol, RejectWith, Rule, Ruleset, TableName, TcpFlagBits,
};
use crate::snapshot::netns::nft;
use crate::snapshot::netns::sockets::ListeningSocket;
pub use decision::{RuleRef, RulesetKind, deciding_rule, ruleset_of};
use index::IndexedTable;
use nftables::{NftTable, NftWalk};

/// A netfilter hook: where in the stack the kernel runs a packet through the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    Prerouting,
    Input,
    Forward,
    Output,
    Postrouting,
}

impl Hook {
    /// The tables at this hook in the kernel's priority order (raw -300,
    /// mangle -150, nat DNAT -100, filter 0, security 50, nat SNAT 100).
    pub fn tables(self) -> &'static [TableName] {
        use TableName::*;
        match self {
            Hook::Prerouting => &[Raw, Mangle, Nat],
            Hook::Input => &[Mangle, Filter, Security, Nat],
            Hook::Forward => &[Mangle, Filter, Security],
            Hook::Output => &[Raw, Mangle, Nat, Filter, Security],
            Hook::Postrouting => &[Mangle, Nat],
        }
    }

    /// The built-in chain of this hook.
    pub fn chain(self) -> &'static str {
        match self {
            Hook::Prerouting => "PREROUTING",
            Hook::Input => "INPUT",
            Hook::Forward => "FORWARD",
            Hook::Output => "OUTPUT",
            Hook::Postrouting => "POSTROUTING",
        }
    }

    /// Whether the packet has an input interface here (`-i` can match).
    fn has_in_interface(self) -> bool {
        matches!(self, Hook::Prerouting | Hook::Input | Hook::Forward)
    }

    /// Whether the packet has an output interface here (`-o` can match).
    fn has_out_interface(self) -> bool {
        matches!(self, Hook::Forward | Hook::Output | Hook::Postrouting)
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.chain())
    }
}

/// Which way through the namespace a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PacketPath {
    /// Arrives on an interface: PREROUTING, then the routing decision on the
    /// (possibly translated) destination picks INPUT or FORWARD -> POSTROUTING.
    Received,
    /// Forwarded: FORWARD -> POSTROUTING.
    Forward,
    /// Delivered locally: INPUT.
    Input,
    /// Locally generated: OUTPUT -> POSTROUTING.
    Output,
}

/// The connection tracking state to assume for the packet (the dump has no
/// conntrack table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CtState {
    /// The first packet of a new connection, in its original direction.
    New,
    /// A later packet of a connection that has seen traffic both ways.
    Established,
    Related,
    Invalid,
    /// Marked NOTRACK/CT --notrack in the raw table.
    Untracked,
}

/// The bridge ports of a bridged packet (`-m physdev`), as br_netfilter shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BridgePorts {
    pub physdev_in: Option<String>,
    pub physdev_out: Option<String>,
}

/// The local socket that sent a locally generated packet (`-m owner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketOwner {
    pub uid: u32,
    pub gid: u32,
}

/// A packet as netfilter sees it: the packet's header ([`net::Packet`]),
/// with what the kernel knows about it at a hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Packet {
    pub ip: net::Packet,
    /// TCP header flags.
    pub tcp_flags: Option<TcpFlagBits>,
    /// ICMP type and code.
    pub icmp: Option<(u8, u8)>,
    pub ttl: u8,
    /// The interface the packet arrived on. `None` where the hook has an
    /// input interface means not known.
    pub in_iface: Option<String>,
    /// The interface the packet leaves by. `None` where the hook has an
    /// output interface (and no route decides it) means not known.
    pub out_iface: Option<String>,
    pub ct_state: CtState,
    /// The connection's translations (`--ctstate DNAT/SNAT`) for a packet
    /// of an existing connection, where the caller knows them (a reply whose
    /// request it followed); `None`: not known. A new connection has none.
    pub ct_nat: Option<ConnectionNat>,
    /// The connection mark; `None`: not known (a connection older than this packet).
    pub ct_mark: Option<u32>,
    /// `Some` for a bridged packet seen through br_netfilter.
    pub bridge: Option<BridgePorts>,
    /// The sending socket of a locally generated packet, when known.
    pub owner: Option<SocketOwner>,
    /// Whether a socket of this namespace is an end of the packet's
    /// connection with the packet's own addresses (`-m socket`); `None`:
    /// not known. The first packet of a connection has none yet.
    pub connection_socket: Option<bool>,
}

/// The ICMP type and code of an echo request or reply, in `family`'s ICMP.
fn echo(family: Family, reply: bool) -> (u8, u8) {
    match (family, reply) {
        (Family::Ipv4, false) => (8, 0),
        (Family::Ipv4, true) => (0, 0),
        (Family::Ipv6, false) => (128, 0),
        (Family::Ipv6, true) => (129, 0),
    }
}

/// Which translations a connection has: what `--ctstate DNAT` and
/// `--ctstate SNAT` test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionNat {
    pub dnat: bool,
    pub snat: bool,
}

impl Packet {
    /// A packet of `proto` from `src` to `dst`, the first of its connection
    /// (a SYN for TCP, an echo request for ICMP), 64 bytes, TTL 64, no mark.
    pub fn new(src: IpAddr, dst: IpAddr, proto: Protocol) -> Packet {
        let ports = proto.has_ports();
        Packet::first_of_connection(net::Packet {
            sport: ports.then_some(net::EPHEMERAL_PORT),
            dport: ports.then_some(80),
            ..net::Packet::new(src, dst, proto)
        })
    }

    /// `ip` as the first packet of its connection: a SYN for TCP, an echo
    /// request for ICMP, TTL 64, at no interface yet.
    pub fn first_of_connection(ip: net::Packet) -> Packet {
        Packet {
            tcp_flags: (ip.protocol == Protocol::Tcp).then_some(TcpFlagBits::SYN),
            icmp: (ip.protocol == ip.family().icmp()).then_some(echo(ip.family(), false)),
            ttl: 64,
            in_iface: None,
            out_iface: None,
            ct_state: CtState::New,
            ct_nat: None,
            ct_mark: Some(0),
            bridge: None,
            owner: None,
            connection_socket: None,
            ip,
        }
    }

    /// Makes it the answer of its connection's first packet, as conntrack
    /// sees it: ESTABLISHED, a SYN-ACK for TCP, an echo reply for ICMP.
    pub fn answering(mut self) -> Packet {
        self.ct_state = CtState::Established;
        self.tcp_flags = self
            .tcp_flags
            .map(|_| TcpFlagBits(TcpFlagBits::SYN.0 | TcpFlagBits::ACK.0));
        self.icmp = self.icmp.map(|_| echo(self.ip.family(), true));
        self
    }

    /// The packet as conntrack sees it where it has no connection for it
    /// (a namespace none of whose hooks met the request: a program sent it
    /// past them). A packet that can open a connection is NEW: a TCP SYN,
    /// or a bare ACK (conntrack picks a connection up in its middle, as
    /// `nf_conntrack_tcp_loose` does by default), an ICMP echo request, any
    /// other protocol's packet; a SYN-ACK, an ICMP echo reply or error opens
    /// none and is INVALID.
    pub fn without_connection(mut self) -> Packet {
        let opens = if self.ip.protocol == self.ip.family().icmp() {
            self.icmp == Some(echo(self.ip.family(), false))
        } else if self.ip.protocol == Protocol::Tcp {
            self.tcp_flags
                .is_none_or(|flags| flags == TcpFlagBits::SYN || flags == TcpFlagBits::ACK)
        } else {
            true
        };
        self.ct_state = if opens {
            CtState::New
        } else {
            CtState::Invalid
        };
        self.ct_nat = None;
        self
    }

    /// The 5-tuple fields routing reads.
    fn flow(&self) -> FlowKey {
        FlowKey {
            src: Some(self.ip.src),
            iif: self.in_iface.clone(),
            mark: self.ip.mark,
            ip_proto: Some(self.ip.protocol),
            sport: self.ip.sport,
            dport: self.ip.dport,
            ..FlowKey::to(self.ip.dst)
        }
    }
}

/// What the namespace offers beyond its rules: routing (which decides
/// INPUT or FORWARD, the output interface, MASQUERADE's address) and its
/// local addresses (for `-m addrtype`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Context<'a> {
    pub fib: Option<&'a Fib<'a>>,
    /// The namespace's addresses per interface (REDIRECT's address).
    pub interfaces: &'a [InterfaceAddrs],
    /// Addresses to treat as local besides what the routing tables say.
    /// Without a `fib`, these are all the local addresses there are.
    pub local_addresses: &'a [IpAddr],
    /// The namespace's listening sockets (`-m socket`); `None`: not collected.
    pub listeners: Option<&'a [ListeningSocket]>,
}

/// How a packet left the rules.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Passed every hook on its path (delivered locally, or sent out).
    Accept,
    Drop,
    Reject {
        with: RejectWith,
    },
    /// Routing refused the packet between hooks (the kernel drops it).
    Unroutable {
        error: RouteError,
    },
    /// The model cannot tell; `reason` names the rule or the missing data.
    Unknown {
        reason: String,
    },
}

impl Verdict {
    /// The word the CLI contract uses: accept, drop, reject or unknown.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Accept => "accept",
            Verdict::Drop | Verdict::Unroutable { .. } => "drop",
            Verdict::Reject { .. } => "reject",
            Verdict::Unknown { .. } => "unknown",
        }
    }
}

/// One address and port of a packet, before or after a translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: Option<u16>,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.addr, self.port) {
            (addr, None) => write!(f, "{addr}"),
            (IpAddr::V4(addr), Some(port)) => write!(f, "{addr}:{port}"),
            (IpAddr::V6(addr), Some(port)) => write!(f, "[{addr}]:{port}"),
        }
    }
}

/// What a target changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Translation {
    Dnat {
        before: Endpoint,
        after: Endpoint,
    },
    /// Also REDIRECT (a DNAT to the namespace itself).
    Redirect {
        before: Endpoint,
        after: Endpoint,
    },
    Snat {
        before: Endpoint,
        after: Endpoint,
    },
    /// `after` is `None` when the outgoing device's address is not known.
    Masquerade {
        before: Endpoint,
        after: Option<Endpoint>,
    },
    Mark {
        before: u32,
        after: u32,
    },
    /// `None`: the connection mark is not known.
    ConnMark {
        before: Option<u32>,
        after: Option<u32>,
    },
    /// NOTRACK or CT --notrack: the connection is not tracked.
    Untracked,
}

impl fmt::Display for Translation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = |mark: Option<u32>| mark.map_or("unknown".to_string(), |m| format!("{m:#x}"));
        match self {
            Translation::Dnat { before, after } => write!(f, "dnat {before} -> {after}"),
            Translation::Redirect { before, after } => write!(f, "redirect {before} -> {after}"),
            Translation::Snat { before, after } => write!(f, "snat {before} -> {after}"),
            Translation::Masquerade {
                before,
                after: Some(after),
            } => {
                write!(f, "masquerade {before} -> {after}")
            }
            Translation::Masquerade {
                before,
                after: None,
            } => {
                write!(
                    f,
                    "masquerade {before} -> the outgoing device's address (not known)"
                )
            }
            Translation::Mark { before, after } => {
                write!(f, "mark {} -> {}", mark(Some(*before)), mark(Some(*after)))
            }
            Translation::ConnMark { before, after } => {
                write!(f, "connmark {} -> {}", mark(*before), mark(*after))
            }
            Translation::Untracked => f.write_str("notrack"),
        }
    }
}

/// The routing decision between hooks.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteChoice {
    /// Delivered to this namespace (INPUT).
    Local {
        rule: Option<String>,
        route: Option<String>,
    },
    /// Sent out of `dev` (FORWARD or OUTPUT -> POSTROUTING).
    Out {
        dev: Option<String>,
        gateway: Option<IpAddr>,
        rule: Option<String>,
        route: Option<String>,
    },
    Failed {
        error: RouteError,
        rule: Option<String>,
        route: Option<String>,
    },
    Unknown {
        reason: String,
    },
}

/// One step of an evaluation, in the order the kernel takes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<'a> {
    /// A rule was tested (rules the index rules out, because they test
    /// another destination or port, are not listed).
    Rule {
        hook: Hook,
        /// Whose rules: iptables' (IPv4) or ip6tables'.
        family: Family,
        table: TableName,
        chain: &'a str,
        rule: &'a Rule,
        matched: Tri,
        /// What the model assumed to decide the match.
        assumption: Option<Assumption>,
    },
    /// No rule decided: the built-in chain's policy did.
    Policy {
        hook: Hook,
        family: Family,
        table: TableName,
        chain: &'a str,
        policy: Policy,
        /// The line of the chain's declaration, where the dump declares it.
        line: Option<usize>,
    },
    /// An nftables rule was tested.
    NftRule {
        hook: Hook,
        table: &'a nft::Table,
        chain: &'a str,
        rule: &'a nft::Rule,
        matched: Tri,
        /// The share of packets whose `numgen` draw takes this way.
        assumption: Option<Assumption>,
    },
    /// No rule decided: the nftables base chain's policy did.
    NftPolicy {
        hook: Hook,
        table: &'a nft::Table,
        chain: &'a str,
        policy: nft::Policy,
    },
    /// A target (or nftables statement) rewrote the packet or its connection.
    Translation {
        hook: Hook,
        table: TableId<'a>,
        translation: Translation,
    },
    /// The routing decision between hooks.
    Route {
        destination: IpAddr,
        choice: RouteChoice,
    },
}

/// A table a step happened in: an iptables table, or an nftables table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TableId<'a> {
    Iptables(TableName),
    Nft(&'a nft::Table),
}

impl fmt::Display for TableId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableId::Iptables(name) => f.write_str(name.as_str()),
            TableId::Nft(table) => write!(f, "{table}"),
        }
    }
}

/// What a rule's match result rests on besides the packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Assumption {
    /// A `statistic` rule forks the packets: this branch is the `share` of
    /// them for which the rule fires, or (`fires: false`) does not.
    Statistic { fires: bool, share: f64 },
    /// A match decided by a stated assumption (`-m limit`, `-m recent`).
    Stated(&'static str),
}

impl fmt::Display for Assumption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assumption::Statistic { fires: true, share } => {
                write!(f, "statistic: fires for {share:.4} of packets")
            }
            Assumption::Statistic {
                fires: false,
                share,
            } => {
                write!(f, "statistic: does not fire for {share:.4} of packets")
            }
            Assumption::Stated(what) => f.write_str(what),
        }
    }
}

/// One way the packet can go, with its share of packets of this flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<'a> {
    pub probability: f64,
    pub verdict: Verdict,
    /// The packet as it leaves (or stops), after every translation.
    pub packet: Packet,
    pub trace: Vec<Step<'a>>,
}

impl Outcome<'_> {
    /// The destination after DNAT or REDIRECT, if either applied.
    pub fn dnat(&self) -> Option<Endpoint> {
        self.translations().rev().find_map(|t| match t {
            Translation::Dnat { after, .. } | Translation::Redirect { after, .. } => Some(*after),
            _ => None,
        })
    }

    /// Whether SNAT or MASQUERADE applied.
    pub fn masquerade(&self) -> bool {
        self.translations()
            .any(|t| matches!(t, Translation::Snat { .. } | Translation::Masquerade { .. }))
    }

    fn translations(&self) -> impl DoubleEndedIterator<Item = &Translation> {
        self.trace.iter().filter_map(|step| match step {
            Step::Translation { translation, .. } => Some(translation),
            _ => None,
        })
    }
}

/// The iptables and nftables rules of one namespace, indexed for evaluation.
#[derive(Debug)]
pub struct Netfilter<'a> {
    /// The iptables tables of IPv4 (`iptables-save`) and of IPv6
    /// (`ip6tables-save`), by [`family_slot`].
    tables: [Vec<IndexedTable<'a>>; 2],
    /// Whether each family's iptables rules were collected.
    collected: [bool; 2],
    ipsets: Option<&'a IpSets>,
    nft: Vec<NftTable<'a>>,
    /// Per hook (in `Hook::ALL` order), for IPv4 and for IPv6: the tables and
    /// base chains a packet meets, in the kernel's order.
    stages: Vec<[Vec<Stage>; 2]>,
    /// Whether the nftables ruleset has `bridge` family base chains, which
    /// the model does not evaluate: a bridged packet's fate is then unknown.
    bridge_chains: Option<String>,
}

/// One table or base chain on a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Iptables(usize),
    Nft { table: usize, chain: usize },
}

impl Hook {
    const ALL: [Hook; 5] = [
        Hook::Prerouting,
        Hook::Input,
        Hook::Forward,
        Hook::Output,
        Hook::Postrouting,
    ];

    fn index(self) -> usize {
        Hook::ALL.iter().position(|h| *h == self).unwrap_or(0)
    }

    /// The priority of an iptables table's chain on this hook.
    fn priority(self, table: TableName) -> i32 {
        match table {
            TableName::Raw => -300,
            TableName::Mangle => -150,
            TableName::Nat if matches!(self, Hook::Prerouting | Hook::Output) => -100,
            TableName::Nat => 100,
            TableName::Filter => 0,
            TableName::Security => 50,
        }
    }
}

impl<'a> Netfilter<'a> {
    /// Indexes `ruleset`, IPv4's iptables rules; `ipsets` is `None` when
    /// `ipset save` was not collected (every `-m set` test is then unknown).
    pub fn new(ruleset: &'a Ruleset, ipsets: Option<&'a IpSets>) -> Netfilter<'a> {
        Netfilter::build([Some(ruleset), None], None, ipsets)
    }

    /// Adds ip6tables' rules, which IPv6 packets meet instead of iptables'.
    pub fn with_ip6tables(mut self, ruleset: &'a Ruleset) -> Netfilter<'a> {
        self.tables[1] = ruleset.tables.iter().map(IndexedTable::new).collect();
        self.collected[1] = true;
        self.order();
        self
    }

    /// The rules of a namespace dump: its iptables-save, ip6tables-save and
    /// nftables ruleset, whichever were collected; `None` when none was.
    pub fn from_dump(dump: &'a NetnsDump) -> Option<Netfilter<'a>> {
        if dump.iptables.is_none() && dump.ip6tables.is_none() && dump.nftables.is_none() {
            return None;
        }
        Some(Netfilter::build(
            [dump.iptables.as_ref(), dump.ip6tables.as_ref()],
            dump.nftables.as_ref(),
            dump.ipsets.as_ref(),
        ))
    }

    /// Adds an nftables ruleset to the iptables rules.
    pub fn with_nftables(mut self, ruleset: &'a nft::Ruleset) -> Netfilter<'a> {
        self.nft = ruleset.tables.iter().map(NftTable::new).collect();
        self.order();
        self
    }

    /// `iptables`: IPv4's rules and IPv6's, by [`family_slot`].
    fn build(
        iptables: [Option<&'a Ruleset>; 2],
        nftables: Option<&'a nft::Ruleset>,
        ipsets: Option<&'a IpSets>,
    ) -> Netfilter<'a> {
        let mut netfilter = Netfilter {
            tables: iptables.map(|ruleset| {
                ruleset
                    .map(|r| r.tables.iter().map(IndexedTable::new).collect())
                    .unwrap_or_default()
            }),
            collected: iptables.map(|ruleset| ruleset.is_some()),
            ipsets,
            nft: nftables
                .map(|r| r.tables.iter().map(NftTable::new).collect())
                .unwrap_or_default(),
            stages: Vec::new(),
            bridge_chains: None,
        };
        netfilter.order();
        netfilter
    }

    /// Puts the tables and base chains of every hook in the kernel's order:
    /// by priority; of equal priorities, the one registered last runs first
    /// (`nf_hook_entries_grow`), which the handles tell: the newer table,
    /// then the newer chain within a table (handles count up per table, so
    /// a chain added to an older table after a newer table was made is
    /// taken as older than it: the dump cannot tell). iptables legacy
    /// tables, not in the nftables dump, are taken as the oldest.
    /// An iptables-nft table is in both dumps; it is evaluated once, from
    /// iptables-save.
    fn order(&mut self) {
        // The nftables family an iptables-nft table of each slot is in.
        const IPTABLES_NFT: [nft::Family; 2] = [nft::Family::Ip, nft::Family::Ip6];
        let iptables_handle = |slot: usize, name: TableName| {
            self.nft
                .iter()
                .find(|t| t.table.family == IPTABLES_NFT[slot] && t.table.name == name.as_str())
                .and_then(|t| t.table.handle)
                .unwrap_or(0)
        };
        let shadowed = |table: &nft::Table| {
            (0..2).any(|slot| {
                table.family == IPTABLES_NFT[slot]
                    && self.tables[slot]
                        .iter()
                        .any(|t| t.table.name.as_str() == table.name)
            })
        };
        self.bridge_chains = self
            .nft
            .iter()
            .filter(|t| t.table.family == nft::Family::Bridge)
            .flat_map(|t| t.table.chains.iter().map(move |c| (t.table, c)))
            .find(|(_, c)| c.base.is_some() && !c.rules.is_empty())
            .map(|(t, c)| format!("the bridge family chain {} of table {t}", c.name));
        let mut stages = Vec::with_capacity(Hook::ALL.len());
        for hook in Hook::ALL {
            let mut by_family: [Vec<Stage>; 2] = Default::default();
            for (slot, ipv4) in [(0, true), (1, false)] {
                // (before every hook: netdev ingress, priority, newest first
                // (table, then chain in it), stage)
                type Newest = std::cmp::Reverse<(u64, u64)>;
                let mut keyed: Vec<(bool, i32, Newest, Stage)> = Vec::new();
                for (index, table) in self.tables[slot].iter().enumerate() {
                    if table.table.chain_index(hook.chain()).is_none() {
                        continue;
                    }
                    let name = table.table.name;
                    keyed.push((
                        false,
                        hook.priority(name),
                        std::cmp::Reverse((iptables_handle(slot, name), 0)),
                        Stage::Iptables(index),
                    ));
                }
                for (t, table) in self.nft.iter().enumerate() {
                    if !table.sees(ipv4) || shadowed(table.table) {
                        continue;
                    }
                    for (c, chain) in table.table.chains.iter().enumerate() {
                        let Some(base) = &chain.base else { continue };
                        let ingress = table.table.family == nft::Family::Netdev
                            && base.hook == nft::ChainHook::Ingress
                            && hook == Hook::Prerouting;
                        if !ingress
                            && (table.table.family == nft::Family::Netdev
                                || base.hook != nftables::chain_hook(hook))
                        {
                            continue;
                        }
                        keyed.push((
                            !ingress,
                            base.priority,
                            std::cmp::Reverse((
                                table.table.handle.unwrap_or(0),
                                chain.handle.unwrap_or(0),
                            )),
                            Stage::Nft { table: t, chain: c },
                        ));
                    }
                }
                keyed.sort_by_key(|(group, priority, handle, _)| (*group, *priority, *handle));
                by_family[slot] = keyed.into_iter().map(|(_, _, _, stage)| stage).collect();
            }
            stages.push(by_family);
        }
        self.stages = stages;
    }

    /// Runs `packet` through every table at `hook`. Outcomes that pass all
    /// tables have [`Verdict::Accept`].
    pub fn hook(&self, hook: Hook, packet: Packet, context: &Context<'_>) -> Vec<Outcome<'a>> {
        let local_origin =
            hook == Hook::Output || (hook == Hook::Postrouting && packet.in_iface.is_none());
        let mut start = chains::Branch::start(packet, local_origin);
        if let Some(reason) = self.unmodelled_family(&start.packet) {
            start.stop_unknown(reason);
            return vec![start.finish()];
        }
        let mut outcomes = Vec::new();
        for branch in self.run_hook(hook, start, context) {
            outcomes.push(branch.finish());
        }
        outcomes
    }

    /// Runs `packet` along `path` through this namespace: the hooks it
    /// meets, with the routing decisions between them.
    pub fn traverse(
        &self,
        path: PacketPath,
        packet: Packet,
        context: &Context<'_>,
    ) -> Vec<Outcome<'a>> {
        let mut start = chains::Branch::start(packet, path == PacketPath::Output);
        if let Some(reason) = self.unmodelled_family(&start.packet) {
            start.stop_unknown(reason);
            return vec![start.finish()];
        }
        let mut outcomes = Vec::new();
        match path {
            PacketPath::Received => {
                for branch in self.run_hook(Hook::Prerouting, start, context) {
                    for routed in route_received(branch, context) {
                        let next = match routed.next {
                            Some(next) => next,
                            None => {
                                outcomes.push(routed.branch.finish());
                                continue;
                            }
                        };
                        self.after_routing(next, routed.branch, context, &mut outcomes);
                    }
                }
            }
            PacketPath::Forward | PacketPath::Input => {
                let mut branch = start;
                if path == PacketPath::Forward && branch.packet.out_iface.is_none() {
                    branch = choose_out_interface(branch, context);
                }
                let next = if path == PacketPath::Forward {
                    Hook::Forward
                } else {
                    Hook::Input
                };
                self.after_routing(next, branch, context, &mut outcomes);
            }
            PacketPath::Output => {
                let mut branch = start;
                if branch.packet.out_iface.is_none() {
                    branch = choose_out_interface(branch, context);
                }
                branch.routed_as = Some((branch.packet.ip.dst, branch.packet.ip.mark));
                for after_output in self.run_hook(Hook::Output, branch, context) {
                    self.continue_to(Hook::Postrouting, after_output, context, &mut outcomes);
                }
            }
        }
        outcomes
    }

    /// Why the rules cannot tell what becomes of `packet`: its family's
    /// iptables rules (iptables-save for IPv4, ip6tables-save for IPv6)
    /// were not collected while the other family's were, and hold rules —
    /// so this family may well have some too (a snapshot from before skoop
    /// collected ip6tables-save). Where neither was collected, the nft
    /// ruleset is the whole truth and is evaluated.
    fn unmodelled_family(&self, packet: &Packet) -> Option<String> {
        let slot = family_slot(packet.ip.family());
        let other = 1 - slot;
        (!self.collected[slot] && self.collected[other] && !self.tables[other].is_empty()).then(
            || {
                let family = packet.ip.family();
                let file = RulesetKind::iptables(family).file();
                let other_file = RulesetKind::iptables(family.other()).file();
                format!(
                    "{} is an {} packet, whose iptables rules ({file}) were not collected, while {other_file} holds rules",
                    packet.ip.dst,
                    packet.ip.family()
                )
            },
        )
    }

    /// INPUT, or FORWARD then POSTROUTING.
    fn after_routing(
        &self,
        next: Hook,
        branch: chains::Branch<'a>,
        context: &Context<'_>,
        outcomes: &mut Vec<Outcome<'a>>,
    ) {
        match next {
            Hook::Forward => {
                for forwarded in self.run_hook(Hook::Forward, branch, context) {
                    self.continue_to(Hook::Postrouting, forwarded, context, outcomes);
                }
            }
            hook => self.continue_to(hook, branch, context, outcomes),
        }
    }

    /// Runs the last hook of a path and collects the outcomes.
    fn continue_to(
        &self,
        hook: Hook,
        branch: chains::Branch<'a>,
        context: &Context<'_>,
        outcomes: &mut Vec<Outcome<'a>>,
    ) {
        if branch.verdict.is_some() {
            outcomes.push(branch.finish());
            return;
        }
        for done in self.run_hook(hook, branch, context) {
            outcomes.push(done.finish());
        }
    }

    /// Every table and base chain of `hook` in order; branches stopped by a
    /// verdict pass through.
    fn run_hook(
        &self,
        hook: Hook,
        mut branch: chains::Branch<'a>,
        context: &Context<'_>,
    ) -> Vec<chains::Branch<'a>> {
        if let (Some(chain), Some(_)) = (&self.bridge_chains, &branch.packet.bridge)
            && branch.verdict.is_none()
        {
            branch.stop_unknown(format!(
                "a bridged packet: {chain} is not evaluated by the model"
            ));
        }
        let slot = family_slot(branch.packet.ip.family());
        let stages = &self.stages[hook.index()][slot];
        let mut live = vec![branch];
        for stage in stages {
            let mut next = Vec::with_capacity(live.len());
            let mut reroute = false;
            for branch in live {
                if branch.verdict.is_some() {
                    next.push(branch);
                    continue;
                }
                match *stage {
                    Stage::Iptables(index) => {
                        let table = &self.tables[slot][index];
                        let name = table.table.name;
                        // The nat table sees only a connection's first packet.
                        if name == TableName::Nat && !nat_applies(hook, &branch) {
                            next.push(branch);
                            continue;
                        }
                        // A locally generated packet is routed again when mangle
                        // changed its mark or nat its destination (`ip_route_me_harder`).
                        reroute |= hook == Hook::Output
                            && matches!(name, TableName::Mangle | TableName::Nat);
                        let walk = chains::Walk {
                            netfilter: self,
                            table,
                            hook,
                            context,
                        };
                        walk.run(branch, &mut next);
                    }
                    Stage::Nft { table, chain } => {
                        let nft_table = &self.nft[table];
                        let base_chain = &nft_table.table.chains[chain];
                        let Some(base) = &base_chain.base else {
                            next.push(branch);
                            continue;
                        };
                        if base.kind == nft::ChainType::Nat && !nat_applies(hook, &branch) {
                            next.push(branch);
                            continue;
                        }
                        if let Some(device) = &base.device {
                            match branch.packet.in_iface.as_deref() {
                                Some(iif) if iif == device => {}
                                Some(_) => {
                                    next.push(branch);
                                    continue;
                                }
                                None => {
                                    let mut branch = branch;
                                    branch.stop_unknown(format!(
                                        "whether the ingress chain {} of table {} (device {device}) sees the packet: its input interface is not known",
                                        base_chain.name, nft_table.table
                                    ));
                                    next.push(branch);
                                    continue;
                                }
                            }
                        }
                        reroute |= hook == Hook::Output
                            && matches!(base.kind, nft::ChainType::Nat | nft::ChainType::Route);
                        let walk = NftWalk {
                            table: nft_table,
                            chain,
                            hook,
                            context,
                        };
                        walk.run(branch, &mut next);
                    }
                }
            }
            if reroute {
                next = next
                    .into_iter()
                    .map(|branch| reroute_if_changed(branch, context))
                    .collect();
            }
            live = next;
        }
        live
    }
}

/// Whether a nat table or chain sees the packet: only the first packet of a
/// connection, and only until a chain at this hook set up a translation of
/// the hook's kind (destination before routing, source after; the kernel's
/// `nf_nat_initialized`).
/// Where a family's rules and stages are kept: IPv4's first, then IPv6's.
fn family_slot(family: Family) -> usize {
    match family {
        Family::Ipv4 => 0,
        Family::Ipv6 => 1,
    }
}

fn nat_applies(hook: Hook, branch: &chains::Branch<'_>) -> bool {
    if branch.packet.ct_state != CtState::New {
        return false;
    }
    let done = if matches!(hook, Hook::Prerouting | Hook::Output) {
        branch.ct_dnat
    } else {
        branch.ct_snat
    };
    done != Tri::True
}

/// A branch after the routing decision, and the hook it goes to next
/// (`None`: stopped).
struct Routed<'a> {
    branch: chains::Branch<'a>,
    next: Option<Hook>,
}

/// The routing decision for a received packet: INPUT for a local
/// destination, FORWARD (one branch per multipath nexthop) otherwise.
fn route_received<'a>(mut branch: chains::Branch<'a>, context: &Context<'_>) -> Vec<Routed<'a>> {
    if branch.verdict.is_some() {
        return vec![Routed { branch, next: None }];
    }
    let destination = branch.packet.ip.dst;
    let Some(fib) = context.fib else {
        // Without routing tables, the local address list decides.
        let local = is_local(context, destination);
        let (choice, next) = match local {
            Tri::True => (
                RouteChoice::Local {
                    rule: None,
                    route: None,
                },
                Some(Hook::Input),
            ),
            Tri::False => (
                RouteChoice::Out {
                    dev: branch.packet.out_iface.clone(),
                    gateway: None,
                    rule: None,
                    route: None,
                },
                Some(Hook::Forward),
            ),
            Tri::Unknown => {
                let reason = format!(
                    "no routing tables and no local addresses: cannot tell whether {destination} is local"
                );
                branch.stop_unknown(reason.clone());
                (RouteChoice::Unknown { reason }, None)
            }
        };
        branch.trace.push(Step::Route {
            destination,
            choice,
        });
        return vec![Routed { branch, next }];
    };
    let lookup = fib.lookup(&branch.packet.flow());
    match lookup.outcome {
        LookupOutcome::Routed {
            rule, route, paths, ..
        } => {
            let rule_text = fib.rule_text(rule);
            let route_text = fib.route_text(route);
            let mut routed = Vec::with_capacity(paths.len());
            for path in paths {
                let mut b = branch.clone();
                b.probability *= path.probability;
                let local = path.dev.as_deref() == Some("lo");
                let choice = if local {
                    RouteChoice::Local {
                        rule: rule_text.clone(),
                        route: route_text.clone(),
                    }
                } else {
                    b.packet.out_iface = path.dev.clone();
                    b.next_hop = Some(path.gateway.unwrap_or(destination));
                    RouteChoice::Out {
                        dev: path.dev.clone(),
                        gateway: path.gateway,
                        rule: rule_text.clone(),
                        route: route_text.clone(),
                    }
                };
                b.trace.push(Step::Route {
                    destination,
                    choice,
                });
                let next = Some(if local { Hook::Input } else { Hook::Forward });
                routed.push(Routed { branch: b, next });
            }
            if routed.is_empty() {
                let reason = "the route has no live nexthop".to_string();
                branch.stop_unknown(reason.clone());
                branch.trace.push(Step::Route {
                    destination,
                    choice: RouteChoice::Unknown { reason },
                });
                routed.push(Routed { branch, next: None });
            }
            routed
        }
        LookupOutcome::Failed { error, rule, route } => {
            branch.trace.push(Step::Route {
                destination,
                choice: RouteChoice::Failed {
                    error,
                    rule: fib.rule_text(rule),
                    route: fib.route_text(route),
                },
            });
            branch.verdict = Some(Verdict::Unroutable { error });
            vec![Routed { branch, next: None }]
        }
        LookupOutcome::Unknown { reason } => {
            branch.trace.push(Step::Route {
                destination,
                choice: RouteChoice::Unknown {
                    reason: reason.clone(),
                },
            });
            branch.stop_unknown(format!("routing: {reason}"));
            vec![Routed { branch, next: None }]
        }
    }
}

/// For a forced forward or output path without `--out-iface`: the route
/// decides the output interface (the first nexthop of a multipath route).
fn choose_out_interface<'a>(
    mut branch: chains::Branch<'a>,
    context: &Context<'_>,
) -> chains::Branch<'a> {
    let Some(fib) = context.fib else {
        return branch;
    };
    let destination = branch.packet.ip.dst;
    let lookup = fib.lookup(&branch.packet.flow());
    let choice = match lookup.outcome {
        LookupOutcome::Routed {
            rule, route, paths, ..
        } => {
            let first = paths.into_iter().next();
            let dev = first.as_ref().and_then(|p| p.dev.clone());
            let gateway = first.as_ref().and_then(|p| p.gateway);
            branch.packet.out_iface = dev.clone();
            branch.next_hop = Some(gateway.unwrap_or(destination));
            RouteChoice::Out {
                dev,
                gateway,
                rule: fib.rule_text(rule),
                route: fib.route_text(route),
            }
        }
        LookupOutcome::Failed { error, rule, route } => RouteChoice::Failed {
            error,
            rule: fib.rule_text(rule),
            route: fib.route_text(route),
        },
        LookupOutcome::Unknown { reason } => RouteChoice::Unknown { reason },
    };
    branch.trace.push(Step::Route {
        destination,
        choice,
    });
    branch
}

/// After OUTPUT, the kernel routes a locally generated packet again when
/// mangle changed its mark or nat its destination (`ip_route_me_harder`).
fn reroute_if_changed<'a>(branch: chains::Branch<'a>, context: &Context<'_>) -> chains::Branch<'a> {
    if branch.verdict.is_some() || !branch.rerouting_needed() {
        return branch;
    }
    let mut branch = branch;
    branch.packet.out_iface = None;
    branch.routed_as = Some((branch.packet.ip.dst, branch.packet.ip.mark));
    choose_out_interface(branch, context)
}

/// Whether `address` is one of the namespace's own.
fn is_local(context: &Context<'_>, address: IpAddr) -> Tri {
    if context.local_addresses.contains(&address) {
        return Tri::True;
    }
    match context.fib {
        Some(fib) => fib.is_local(address),
        None if context.local_addresses.is_empty() => Tri::Unknown,
        None => Tri::False,
    }
}
