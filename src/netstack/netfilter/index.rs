//! Per-chain dispatch indexes that keep first-match semantics.
//!
//! kube-proxy's `KUBE-SERVICES` holds one rule per service port, each
//! testing an exact destination (`-d 10.96.0.10/32`); `KUBE-NODEPORTS` one
//! per node port (`-p tcp --dport 30080`). Scanning 10,000 of them per packet
//! is what makes naive evaluation slow. A rule that requires a destination
//! (or port) other than the packet's cannot match, so for such a chain the
//! index lists, per key, the rules that require it; the candidates for a
//! packet are those rules merged in order with the rules that require no
//! key. Every candidate is still evaluated in chain order, so the first rule
//! that matches is the one the kernel picks. A chain's index is built the
//! first time a packet meets the chain, as its rules are read.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::OnceLock;

use crate::snapshot::netns::iptables::{Match, PortMatch, Protocol, Rule, Table};

use super::Packet;

/// Chains shorter than this are scanned rule by rule.
const MIN_INDEXED_RULES: usize = 16;

/// A table with an index per chain.
#[derive(Debug)]
pub(super) struct IndexedTable<'a> {
    pub table: &'a Table,
    chains: Vec<OnceLock<ChainIndex>>,
}

/// What a chain's rules are dispatched by.
#[derive(Debug)]
enum ChainIndex {
    Linear,
    Destination(Dispatch<IpAddr>),
    Port(Dispatch<(u8, u16)>),
}

/// Rule positions (0-based, ascending) per key, and those without a key.
#[derive(Debug)]
struct Dispatch<K> {
    keyed: HashMap<K, Vec<u32>>,
    unkeyed: Vec<u32>,
}

impl<K: std::hash::Hash + Eq + Copy> Dispatch<K> {
    /// Builds the dispatch when enough rules have a key to make it pay.
    fn build(rules: &[Rule], key: impl Fn(&Rule) -> Option<K>) -> Option<Dispatch<K>> {
        let mut keyed: HashMap<K, Vec<u32>> = HashMap::new();
        let mut unkeyed = Vec::new();
        for (position, rule) in rules.iter().enumerate() {
            let position = u32::try_from(position).ok()?;
            match key(rule) {
                Some(k) => keyed.entry(k).or_default().push(position),
                None => unkeyed.push(position),
            }
        }
        (unkeyed.len() * 2 < rules.len()).then_some(Dispatch { keyed, unkeyed })
    }

    fn next(&self, key: Option<K>, from: usize) -> Option<usize> {
        let first_from = |positions: &[u32]| {
            let at = positions.partition_point(|&p| (p as usize) < from);
            positions.get(at).map(|&p| p as usize)
        };
        let keyed = key
            .and_then(|k| self.keyed.get(&k))
            .and_then(|positions| first_from(positions));
        let unkeyed = first_from(&self.unkeyed);
        match (keyed, unkeyed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl<'a> IndexedTable<'a> {
    pub fn new(table: &'a Table) -> IndexedTable<'a> {
        let chains = table.chains.iter().map(|_| OnceLock::new()).collect();
        IndexedTable { table, chains }
    }

    /// The first rule at or after `from` of chain `chain`, whose rules are
    /// `rules`, that may match `packet`.
    pub fn next_candidate(
        &self,
        chain: usize,
        rules: &[Rule],
        from: usize,
        packet: &Packet,
    ) -> Option<usize> {
        let next = match self
            .chains
            .get(chain)?
            .get_or_init(|| ChainIndex::build(rules))
        {
            ChainIndex::Linear => Some(from),
            ChainIndex::Destination(dispatch) => dispatch.next(Some(packet.ip.dst), from),
            ChainIndex::Port(dispatch) => dispatch.next(
                packet
                    .ip
                    .dport
                    .map(|port| (packet.ip.protocol.number(), port)),
                from,
            ),
        };
        next.filter(|&position| position < rules.len())
    }
}

impl ChainIndex {
    fn build(rules: &[Rule]) -> ChainIndex {
        if rules.len() < MIN_INDEXED_RULES {
            return ChainIndex::Linear;
        }
        if let Some(dispatch) = Dispatch::build(rules, required_destination) {
            return ChainIndex::Destination(dispatch);
        }
        match Dispatch::build(rules, required_port) {
            Some(dispatch) => ChainIndex::Port(dispatch),
            None => ChainIndex::Linear,
        }
    }
}

/// The one destination address a rule requires (`-d ADDR/32`, not negated).
fn required_destination(rule: &Rule) -> Option<IpAddr> {
    rule.matches.iter().find_map(|m| match m {
        Match::Destination(d) if !d.invert && d.value.prefix_len() == d.value.max_prefix_len() => {
            Some(d.value.addr())
        }
        _ => None,
    })
}

/// The one protocol and destination port a rule requires (`-p tcp -m tcp --dport N`).
fn required_port(rule: &Rule) -> Option<(u8, u16)> {
    let protocol = rule.matches.iter().find_map(|m| match m {
        Match::Protocol(p) if !p.invert => Some(p.value),
        _ => None,
    })?;
    let single = |ports: &PortMatch| {
        ports
            .destination
            .filter(|d| !d.invert && d.value.first == d.value.last)
            .map(|d| d.value.first)
    };
    let port = rule.matches.iter().find_map(|m| match m {
        Match::Tcp(tcp) if protocol == Protocol::Tcp => single(&tcp.ports),
        Match::Udp(udp) if protocol == Protocol::Udp => single(udp),
        Match::Sctp(sctp) if protocol == Protocol::Sctp => single(sctp),
        _ => None,
    })?;
    Some((protocol.number(), port))
}
