//! nftables base chains in the kernel model: a chain's rules run statement
//! by statement (a failed match ends the rule; a verdict, a NAT or a reject
//! ends the chain), `jump` pushes a return point and `goto` does not, the
//! end of a base chain is its policy. Named sets and maps are indexed once;
//! `numgen` forks the walk into one branch per value with its share.
//!
//! Which base chains a packet meets, and in what order with the iptables
//! tables, is [`Netfilter`](super::Netfilter)'s business (`stages`); this
//! module walks one base chain.

use std::collections::HashMap;
use std::net::IpAddr;

#[cfg(test)]
mod tests;

use super::chains::{
    Branch, Cursor, Flow, NatSide, masquerade_source, nat_port, redirect_destination,
};
use super::{
    Assumption, Context, CtState, Endpoint, Hook, Packet, Step, TableId, Translation, Verdict,
};
use crate::netstack::Tri;
use crate::snapshot::netns::iptables::{PortRange, Protocol, RejectWith};
use crate::snapshot::netns::nft::{
    self, BinOp, ChainHook, Element, Expr, Family, NatKind, Op, Rule, Statement,
};

/// Upper bound on rules visited in one base chain walk (chains that jump
/// into each other in a loop; nft refuses them, a dump could show one).
const MAX_RULE_VISITS: usize = 100_000;
/// The most values one `numgen` forks a rule into.
const MAX_NUMGEN: u32 = 4096;

/// One table of the ruleset, indexed once: chains by name, named sets and
/// the anonymous sets and maps of its rules compiled, each rule's `numgen`.
#[derive(Debug)]
pub(super) struct NftTable<'a> {
    pub table: &'a nft::Table,
    chains: HashMap<&'a str, usize>,
    sets: HashMap<&'a str, CompiledSet<'a>>,
    /// Anonymous sets and maps, by the address of their expression in the
    /// ruleset (which outlives the index).
    anonymous: HashMap<usize, CompiledSet<'a>>,
    /// Per chain, per rule: how its `numgen` forks it (`None`: it does not).
    forks: Vec<Vec<Option<Fork>>>,
}

impl<'a> NftTable<'a> {
    pub fn new(table: &'a nft::Table) -> NftTable<'a> {
        let mut anonymous = HashMap::new();
        let mut forks = Vec::with_capacity(table.chains.len());
        for chain in &table.chains {
            forks.push(
                chain
                    .rules
                    .iter()
                    .map(|rule| numgen(rule).filter(|_| !passive(rule)))
                    .collect(),
            );
            for statement in chain.rules.iter().flat_map(|r| &r.statements) {
                let (key, data) = match statement {
                    Statement::Match { left, right, .. } => (left, right),
                    Statement::Vmap { key, data } => (key, data),
                    Statement::Nat(nft::Nat {
                        addr: Some(Expr::Map { key, data }),
                        ..
                    }) => (key.as_ref(), data.as_ref()),
                    _ => continue,
                };
                if let Expr::Set(elements) = data {
                    anonymous.insert(address_of(data), CompiledSet::new(Kind::of(key), elements));
                }
            }
        }
        NftTable {
            table,
            chains: table
                .chains
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name.as_str(), i))
                .collect(),
            sets: table
                .sets
                .iter()
                .map(|set| {
                    let kinds = set.key_type.iter().map(|t| Kind::of_type(t)).collect();
                    (set.name.as_str(), CompiledSet::new(kinds, &set.elements))
                })
                .collect(),
            anonymous,
            forks,
        }
    }

    /// The compiled form of an anonymous set or map of this table's rules.
    fn anonymous(&self, set: &Expr) -> Option<&CompiledSet<'a>> {
        self.anonymous.get(&address_of(set))
    }

    /// Whether a packet of this address family passes through this table's
    /// `ip`/`ip6`/`inet` chains.
    pub fn sees(&self, ipv4: bool) -> bool {
        match self.table.family {
            Family::Ip => ipv4,
            Family::Ip6 => !ipv4,
            Family::Inet | Family::Netdev => true,
            Family::Arp | Family::Bridge => false,
        }
    }
}

/// The hook of `hook` in nft's words.
pub(super) fn chain_hook(hook: Hook) -> ChainHook {
    match hook {
        Hook::Prerouting => ChainHook::Prerouting,
        Hook::Input => ChainHook::Input,
        Hook::Forward => ChainHook::Forward,
        Hook::Output => ChainHook::Output,
        Hook::Postrouting => ChainHook::Postrouting,
    }
}

/// A value read from a packet or a literal, as the kernel compares it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Val {
    Num(u128),
    Text(String),
}

/// How to read a literal: the type of what it is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Addr,
    Proto,
    Port,
    Iface,
    CtState,
    CtStatus,
    IcmpType,
    Nfproto,
    FibType,
    Int,
}

impl Kind {
    /// A set's key type, by its nft name.
    fn of_type(name: &str) -> Kind {
        match name {
            "ipv4_addr" | "ipv6_addr" => Kind::Addr,
            "inet_proto" => Kind::Proto,
            "inet_service" => Kind::Port,
            "ifname" | "iface_index" => Kind::Iface,
            "ct_state" => Kind::CtState,
            "ct_status" => Kind::CtStatus,
            "icmp_type" | "icmpv6_type" => Kind::IcmpType,
            "nf_proto" => Kind::Nfproto,
            "fib_addrtype" => Kind::FibType,
            _ => Kind::Int,
        }
    }

    /// What an expression reads, as a type for the literals beside it.
    fn of(expr: &Expr) -> Vec<Kind> {
        match expr {
            Expr::Concat(parts) => parts.iter().flat_map(Kind::of).collect(),
            Expr::Binary { left, .. } => Kind::of(left),
            one => vec![Kind::of_one(one)],
        }
    }

    /// What one expression (not a concatenation) reads.
    fn of_one(expr: &Expr) -> Kind {
        match expr {
            Expr::Concat(parts) => parts.first().map_or(Kind::Int, Kind::of_one),
            Expr::Payload { field, .. } => match field.as_str() {
                "saddr" | "daddr" => Kind::Addr,
                "sport" | "dport" => Kind::Port,
                "protocol" | "nexthdr" => Kind::Proto,
                "type" => Kind::IcmpType,
                _ => Kind::Int,
            },
            Expr::Meta(key) => match key.as_str() {
                "l4proto" | "protocol" => Kind::Proto,
                "iifname" | "oifname" | "iif" | "oif" => Kind::Iface,
                "nfproto" => Kind::Nfproto,
                _ => Kind::Int,
            },
            Expr::Ct { key, .. } => match key.as_str() {
                "state" => Kind::CtState,
                "status" => Kind::CtStatus,
                "saddr" | "daddr" => Kind::Addr,
                "proto-src" | "proto-dst" => Kind::Port,
                "protocol" | "l4proto" => Kind::Proto,
                _ => Kind::Int,
            },
            Expr::Fib { result, .. } if result == "type" => Kind::FibType,
            Expr::Fib { .. } => Kind::Iface,
            Expr::Binary { left, .. } => Kind::of_one(left),
            _ => Kind::Int,
        }
    }
}

/// A part of a set element's key: one value or an interval.
#[derive(Debug, Clone, PartialEq)]
enum Pattern {
    Exact(Val),
    Range(u128, u128),
    /// An interface name ending in `*`: every name that starts with it.
    IfacePrefix(String),
    /// A literal the model cannot read: never known to match or not.
    Opaque,
}

impl Pattern {
    fn test(&self, value: &Val) -> Tri {
        match (self, value) {
            (Pattern::Exact(expected), value) => Tri::from(expected == value),
            (Pattern::Range(low, high), Val::Num(n)) => Tri::from(low <= n && n <= high),
            (Pattern::IfacePrefix(prefix), Val::Text(name)) => Tri::from(name.starts_with(prefix)),
            (Pattern::Opaque, _) => Tri::Unknown,
            _ => Tri::False,
        }
    }
}

/// A set or map ready for lookups: exact keys hashed, intervals scanned.
#[derive(Debug)]
struct CompiledSet<'a> {
    elements: Vec<(Vec<Pattern>, Option<&'a Expr>)>,
    exact: HashMap<Vec<Val>, usize>,
    /// Elements with an interval or an unreadable part, by index.
    scanned: Vec<usize>,
}

impl<'a> CompiledSet<'a> {
    fn new(kinds: Vec<Kind>, elements: &'a [Element]) -> CompiledSet<'a> {
        let mut set = CompiledSet {
            elements: Vec::with_capacity(elements.len()),
            exact: HashMap::with_capacity(elements.len()),
            scanned: Vec::new(),
        };
        for element in elements {
            let patterns = patterns(&element.key, &kinds);
            let index = set.elements.len();
            let exact: Option<Vec<Val>> = patterns
                .iter()
                .map(|p| match p {
                    Pattern::Exact(v) => Some(v.clone()),
                    _ => None,
                })
                .collect();
            match exact {
                Some(key) => {
                    set.exact.entry(key).or_insert(index);
                }
                None => set.scanned.push(index),
            }
            set.elements.push((patterns, element.value.as_ref()));
        }
        set
    }

    /// The element `key` selects: `Ok(Some(index))`, `Ok(None)` for none,
    /// `Err` when unknown parts of the key leave it open.
    fn lookup(&self, key: &[Option<Val>]) -> Result<Option<usize>, ()> {
        if let Some(known) = key.iter().cloned().collect::<Option<Vec<Val>>>() {
            let mut found = self.exact.get(&known).copied();
            for &index in &self.scanned {
                if found.is_some_and(|f| f < index) {
                    break;
                }
                match test_element(&self.elements[index].0, key) {
                    Tri::True => {
                        found = Some(index);
                        break;
                    }
                    Tri::False => {}
                    Tri::Unknown => return Err(()),
                }
            }
            return Ok(found);
        }
        let mut open = false;
        for (index, (patterns, _)) in self.elements.iter().enumerate() {
            match test_element(patterns, key) {
                Tri::True => return if open { Err(()) } else { Ok(Some(index)) },
                Tri::Unknown => open = true,
                Tri::False => {}
            }
        }
        if open { Err(()) } else { Ok(None) }
    }

    fn value(&self, index: usize) -> Option<&'a Expr> {
        self.elements.get(index).and_then(|(_, value)| *value)
    }
}

fn test_element(patterns: &[Pattern], key: &[Option<Val>]) -> Tri {
    if patterns.len() != key.len() {
        return Tri::False;
    }
    let mut truth = Tri::True;
    for (pattern, value) in patterns.iter().zip(key) {
        let part = match value {
            Some(value) => pattern.test(value),
            None => Tri::Unknown,
        };
        truth = truth.and(part);
        if truth == Tri::False {
            return Tri::False;
        }
    }
    truth
}

/// An element key's patterns, each read as its part's kind.
fn patterns(key: &Expr, kinds: &[Kind]) -> Vec<Pattern> {
    match key {
        Expr::Concat(parts) => parts
            .iter()
            .enumerate()
            .map(|(i, part)| pattern(part, kinds.get(i).copied().unwrap_or(Kind::Int)))
            .collect(),
        one => vec![pattern(one, kinds.first().copied().unwrap_or(Kind::Int))],
    }
}

fn pattern(expr: &Expr, kind: Kind) -> Pattern {
    match expr {
        Expr::Prefix { addr, len } => {
            let (bits, value) = address_bits(*addr);
            let host = bits - u32::from(*len);
            let mask = if host >= 128 {
                u128::MAX
            } else {
                (1u128 << host) - 1
            };
            Pattern::Range(value & !mask, value | mask)
        }
        Expr::Range(low, high) => match (literal(low, kind), literal(high, kind)) {
            (Some(Val::Num(low)), Some(Val::Num(high))) => Pattern::Range(low, high),
            _ => Pattern::Opaque,
        },
        Expr::Symbol(name) if kind == Kind::Iface && name.ends_with('*') => {
            Pattern::IfacePrefix(name.trim_end_matches('*').to_string())
        }
        other => literal(other, kind).map_or(Pattern::Opaque, Pattern::Exact),
    }
}

fn address_bits(addr: IpAddr) -> (u32, u128) {
    match addr {
        IpAddr::V4(a) => (32, u128::from(u32::from(a))),
        IpAddr::V6(a) => (128, u128::from(a)),
    }
}

/// A literal read as `kind`.
fn literal(expr: &Expr, kind: Kind) -> Option<Val> {
    match expr {
        Expr::Number(n) => Some(Val::Num(u128::from(*n))),
        Expr::Address(addr) => Some(Val::Num(address_bits(*addr).1)),
        Expr::Symbol(name) => symbol(name, kind),
        _ => None,
    }
}

fn symbol(name: &str, kind: Kind) -> Option<Val> {
    let number = |n: u32| Some(Val::Num(u128::from(n)));
    match kind {
        Kind::Iface | Kind::FibType => Some(Val::Text(name.to_string())),
        Kind::Proto => Protocol::parse(name).map(|p| Val::Num(u128::from(p.number()))),
        Kind::Port => match name {
            "http" => number(80),
            "https" => number(443),
            "domain" => number(53),
            "ssh" => number(22),
            _ => name.parse().ok().and_then(number),
        },
        Kind::CtState => number(ct_state_bit(name)?),
        Kind::IcmpType => number(match name {
            "echo-reply" => 0,
            "destination-unreachable" => 3,
            "redirect" => 5,
            "echo-request" => 8,
            "time-exceeded" => 11,
            "parameter-problem" => 12,
            _ => return None,
        }),
        Kind::Nfproto => number(match name {
            "ipv4" => 2,
            "ipv6" => 10,
            _ => return None,
        }),
        Kind::CtStatus | Kind::Addr | Kind::Int => name.parse().ok().and_then(number),
    }
}

/// The kernel's ct state bits (`NF_CT_STATE_BIT`).
fn ct_state_bit(name: &str) -> Option<u32> {
    Some(match name {
        "invalid" => 1,
        "established" => 2,
        "related" => 4,
        "new" => 8,
        "untracked" => 64,
        _ => return None,
    })
}

/// What an acting statement did.
enum Act {
    /// Go on with the rule's next statement.
    Continue,
    /// The rule ends here without a verdict (a map with no element for the key).
    Break,
    Flow(Flow),
}

/// What reading an expression from the packet gave.
enum Read {
    Value(Vec<Option<Val>>),
    /// The header it reads is not in this packet: the rule does not match.
    Absent,
    Unknown(String),
}

/// One base chain at one hook.
pub(super) struct NftWalk<'n, 'a, 'c> {
    pub table: &'n NftTable<'a>,
    pub chain: usize,
    pub hook: Hook,
    pub context: &'n Context<'c>,
}

impl<'a> NftWalk<'_, 'a, '_> {
    fn id(&self) -> TableId<'a> {
        TableId::Nft(self.table.table)
    }

    pub fn run(&self, branch: Branch<'a>, out: &mut Vec<Branch<'a>>) {
        let cursor = Cursor::at(self.chain);
        let mut pending = vec![(branch, cursor)];
        while let Some((branch, cursor)) = pending.pop() {
            self.walk(branch, cursor, &mut pending, out);
        }
    }

    fn walk(
        &self,
        mut branch: Branch<'a>,
        mut cursor: Cursor,
        pending: &mut Vec<(Branch<'a>, Cursor)>,
        out: &mut Vec<Branch<'a>>,
    ) {
        let table = self.table.table;
        loop {
            cursor.visits += 1;
            if cursor.visits > MAX_RULE_VISITS {
                branch.stop_unknown(format!(
                    "more than {MAX_RULE_VISITS} rules visited in table {table}: the chains loop"
                ));
                out.push(branch);
                return;
            }
            let chain = &table.chains[cursor.chain];
            let Some(rule) = chain.rules.get(cursor.position) else {
                if self.return_or_policy(&mut branch, &mut cursor) {
                    out.push(branch);
                    return;
                }
                continue;
            };
            cursor.position += 1;
            let fork = self
                .table
                .forks
                .get(cursor.chain)
                .and_then(|rules| rules.get(cursor.position - 1))
                .and_then(Option::as_ref);
            let (first, first_share) = match fork {
                None => (None, 1.0),
                Some(Err(why)) => {
                    self.record(&mut branch, &chain.name, rule, Tri::Unknown, None);
                    branch.stop_unknown(self.at(&chain.name, rule, why));
                    out.push(branch);
                    return;
                }
                Some(Ok((modulus, offset))) => {
                    // Every value but the first goes on as a branch of its own.
                    let share = 1.0 / f64::from(*modulus);
                    for value in (offset.saturating_add(1)..offset.saturating_add(*modulus)).rev() {
                        let mut other = branch.clone();
                        other.probability *= share;
                        let mut other_cursor = cursor.clone();
                        match self.rule(&mut other, &chain.name, rule, Some(value), share) {
                            Flow::TableAccept | Flow::Stop => out.push(other),
                            flow => {
                                if self.follow(flow, &mut other, &mut other_cursor) {
                                    out.push(other);
                                } else {
                                    pending.push((other, other_cursor));
                                }
                            }
                        }
                    }
                    (Some(*offset), share)
                }
            };
            branch.probability *= first_share;
            let flow = self.rule(&mut branch, &chain.name, rule, first, first_share);
            if self.follow(flow, &mut branch, &mut cursor) {
                out.push(branch);
                return;
            }
        }
    }

    /// Moves the cursor as `flow` says; true when the chain is done with the branch.
    fn follow(&self, flow: Flow, branch: &mut Branch<'a>, cursor: &mut Cursor) -> bool {
        match flow {
            Flow::Next => false,
            Flow::Enter { chain, push } => {
                if push {
                    cursor.returns.push((cursor.chain, cursor.position));
                }
                cursor.chain = chain;
                cursor.position = 0;
                false
            }
            Flow::Return => self.return_or_policy(branch, cursor),
            Flow::TableAccept | Flow::Stop => true,
        }
    }

    fn return_or_policy(&self, branch: &mut Branch<'a>, cursor: &mut Cursor) -> bool {
        if let Some((chain, position)) = cursor.returns.pop() {
            cursor.chain = chain;
            cursor.position = position;
            return false;
        }
        let chain = &self.table.table.chains[self.chain];
        let policy = chain
            .base
            .as_ref()
            .map_or(nft::Policy::Accept, |b| b.policy);
        branch.trace.push(Step::NftPolicy {
            hook: self.hook,
            table: self.table.table,
            chain: &chain.name,
            policy,
        });
        if policy == nft::Policy::Drop {
            branch.verdict = Some(Verdict::Drop);
        }
        true
    }

    fn at(&self, chain: &str, rule: &Rule, why: &str) -> String {
        let handle = rule
            .handle
            .map_or_else(String::new, |h| format!(" handle {h}"));
        format!(
            "{} chain {chain} rule{handle} (line {}, column {}): {why}",
            self.table.table, rule.position.0, rule.position.1
        )
    }

    fn record(
        &self,
        branch: &mut Branch<'a>,
        chain: &'a str,
        rule: &'a Rule,
        matched: Tri,
        assumption: Option<Assumption>,
    ) {
        branch.trace.push(Step::NftRule {
            hook: self.hook,
            table: self.table.table,
            chain,
            rule,
            matched,
            assumption,
        });
    }

    /// Runs one rule and records it, with the translations it made.
    fn rule(
        &self,
        branch: &mut Branch<'a>,
        chain: &'a str,
        rule: &'a Rule,
        numgen: Option<u32>,
        share: f64,
    ) -> Flow {
        let mut translations = Vec::new();
        let (matched, flow) = self.statements(branch, chain, rule, numgen, &mut translations);
        let assumption = numgen
            .filter(|_| matched != Tri::Unknown)
            .map(|_| Assumption::Statistic { fires: true, share });
        self.record(branch, chain, rule, matched, assumption);
        for translation in translations {
            branch.trace.push(Step::Translation {
                hook: self.hook,
                table: self.id(),
                translation,
            });
        }
        flow
    }

    /// Runs one rule's statements in order: whether it matched, and what
    /// the walk does next. A failed match, or a map lookup that finds no
    /// element, ends the rule (what statements before it did stays done).
    fn statements(
        &self,
        branch: &mut Branch<'a>,
        chain: &'a str,
        rule: &'a Rule,
        numgen: Option<u32>,
        translations: &mut Vec<Translation>,
    ) -> (Tri, Flow) {
        let mut unknown: Option<String> = None;
        let mut acted = false;
        for statement in &rule.statements {
            if let Statement::Match { op, left, right } = statement {
                match self.test(*op, left, right, branch, numgen) {
                    Tri::True => continue,
                    Tri::False if unknown.is_none() => return (Tri::from(acted), Flow::Next),
                    // After an unknown match, a failed one still ends the rule.
                    Tri::False => return (Tri::Unknown, Flow::Next),
                    Tri::Unknown => {
                        unknown.get_or_insert_with(|| self.why_unknown(left, right, branch));
                        continue;
                    }
                }
            }
            if matches!(statement, Statement::Passive(_) | Statement::Limit(_)) {
                continue;
            }
            // A statement that acts: the rule must be known to reach it.
            if let Some(why) = unknown.take() {
                branch.stop_unknown(self.at(chain, rule, &why));
                return (Tri::Unknown, Flow::Stop);
            }
            match self.act(statement, branch, chain, rule, numgen, translations) {
                Act::Continue => acted = true,
                Act::Break => return (Tri::from(acted), Flow::Next),
                Act::Flow(flow) => return (Tri::True, flow),
            }
        }
        let matched = if unknown.is_some() {
            Tri::Unknown
        } else {
            Tri::True
        };
        (matched, Flow::Next)
    }

    /// Does what an acting statement says.
    fn act(
        &self,
        statement: &'a Statement,
        branch: &mut Branch<'a>,
        chain: &str,
        rule: &Rule,
        numgen: Option<u32>,
        translations: &mut Vec<Translation>,
    ) -> Act {
        match statement {
            Statement::Verdict(verdict) => Act::Flow(self.verdict(verdict, branch, chain, rule)),
            Statement::Vmap { key, data } => {
                let key = match self.read(key, branch, numgen) {
                    Read::Value(key) => key,
                    Read::Absent => return Act::Break,
                    Read::Unknown(why) => return Act::Flow(self.stop(branch, chain, rule, &why)),
                };
                match self.select(data, &key, &[]) {
                    Ok(Some(Expr::Verdict(verdict))) => {
                        Act::Flow(self.verdict(verdict, branch, chain, rule))
                    }
                    Ok(Some(other)) => Act::Flow(self.stop(
                        branch,
                        chain,
                        rule,
                        &format!("the map's value {other:?} is not a verdict"),
                    )),
                    // No element: the rule ends here.
                    Ok(None) => Act::Break,
                    Err(why) => Act::Flow(self.stop(branch, chain, rule, &why)),
                }
            }
            Statement::Nat(nat) => self.nat(nat, branch, chain, rule, numgen, translations),
            Statement::Mangle { key, value } => {
                let value = match self.read(value, branch, numgen) {
                    Read::Value(v) => match v.as_slice() {
                        [Some(Val::Num(n))] => u32::try_from(*n).ok(),
                        _ => None,
                    },
                    _ => None,
                };
                let Some(value) = value else {
                    return Act::Flow(self.stop(branch, chain, rule, "the value set is not known"));
                };
                match key {
                    Expr::Meta(k) if k == "mark" => {
                        let before = branch.packet.ip.mark;
                        branch.packet.ip.mark = value;
                        translations.push(Translation::Mark {
                            before,
                            after: value,
                        });
                        Act::Continue
                    }
                    Expr::Ct { key: k, .. } if k == "mark" => {
                        let before = branch.packet.ct_mark;
                        branch.packet.ct_mark = Some(value);
                        translations.push(Translation::ConnMark {
                            before,
                            after: Some(value),
                        });
                        Act::Continue
                    }
                    _ => Act::Flow(self.stop(
                        branch,
                        chain,
                        rule,
                        "this set statement is not modelled",
                    )),
                }
            }
            Statement::Reject(reject) => {
                branch.verdict = Some(Verdict::Reject {
                    with: reject_with(reject, &branch.packet),
                });
                Act::Flow(Flow::Stop)
            }
            Statement::Notrack => {
                branch.packet.ct_state = CtState::Untracked;
                branch.ct_dnat = Tri::False;
                branch.ct_snat = Tri::False;
                translations.push(Translation::Untracked);
                Act::Continue
            }
            Statement::Unknown { name, .. } => Act::Flow(self.stop(
                branch,
                chain,
                rule,
                &format!("statement {name} is not modelled"),
            )),
            Statement::Match { .. } | Statement::Passive(_) | Statement::Limit(_) => Act::Continue,
        }
    }

    fn stop(&self, branch: &mut Branch<'a>, chain: &str, rule: &Rule, why: &str) -> Flow {
        branch.stop_unknown(self.at(chain, rule, why));
        Flow::Stop
    }

    fn verdict(
        &self,
        verdict: &nft::Verdict,
        branch: &mut Branch<'a>,
        chain: &str,
        rule: &Rule,
    ) -> Flow {
        let enter = |target: &str, push: bool| match self.table.chains.get(target) {
            Some(&chain) => Flow::Enter { chain, push },
            None => Flow::Stop,
        };
        let flow = match verdict {
            nft::Verdict::Accept => Flow::TableAccept,
            nft::Verdict::Drop => {
                branch.verdict = Some(Verdict::Drop);
                Flow::Stop
            }
            nft::Verdict::Continue => Flow::Next,
            nft::Verdict::Return => Flow::Return,
            nft::Verdict::Jump(target) => enter(target, true),
            nft::Verdict::Goto(target) => enter(target, false),
            nft::Verdict::Queue => {
                return self.stop(branch, chain, rule, "queue to user space is not modelled");
            }
        };
        if matches!(flow, Flow::Stop) && branch.verdict.is_none() {
            return self.stop(
                branch,
                chain,
                rule,
                "the chain it jumps to is not in the table",
            );
        }
        flow
    }

    fn nat(
        &self,
        nat: &'a nft::Nat,
        branch: &mut Branch<'a>,
        chain: &str,
        rule: &Rule,
        numgen: Option<u32>,
        translations: &mut Vec<Translation>,
    ) -> Act {
        let side = match nat.kind {
            NatKind::Dnat | NatKind::Redirect => NatSide::Destination,
            NatKind::Snat | NatKind::Masquerade => NatSide::Source,
        };
        let before = side.endpoint(&branch.packet);
        // The address (and, from a concatenation, the port) to translate to.
        let (address, mapped_port) = match &nat.addr {
            None => (None, None),
            Some(expr) => match self.nat_target(expr, branch, numgen) {
                Ok(Some((addr, port))) => (Some(addr), port),
                // The map has no element for the key: the rule ends.
                Ok(None) => return Act::Break,
                Err(why) => return Act::Flow(self.stop(branch, chain, rule, &why)),
            },
        };
        let range = match (&nat.port, mapped_port) {
            (_, Some(port)) => Some(PortRange {
                first: port,
                last: port,
            }),
            (None, None) => None,
            (Some(expr), None) => match port_range(expr) {
                Some(range) => Some(range),
                None => {
                    return Act::Flow(self.stop(branch, chain, rule, "the NAT port is not known"));
                }
            },
        };
        let port = match nat_port(before.port, range) {
            Ok(port) => port,
            Err(why) => return Act::Flow(self.stop(branch, chain, rule, &why)),
        };
        let translation = match nat.kind {
            NatKind::Dnat | NatKind::Snat => {
                let Some(addr) = address else {
                    return Act::Flow(self.stop(branch, chain, rule, "the NAT has no address"));
                };
                let after = Endpoint { addr, port };
                side.set(&mut branch.packet, after);
                if nat.kind == NatKind::Dnat {
                    branch.ct_dnat = Tri::True;
                    Translation::Dnat { before, after }
                } else {
                    branch.ct_snat = Tri::True;
                    Translation::Snat { before, after }
                }
            }
            NatKind::Masquerade => {
                let after =
                    masquerade_source(self.context, branch).map(|addr| Endpoint { addr, port });
                if let Some(after) = after {
                    side.set(&mut branch.packet, after);
                }
                branch.ct_snat = Tri::True;
                Translation::Masquerade { before, after }
            }
            NatKind::Redirect => {
                let addr = match redirect_destination(self.context, self.hook, branch, before) {
                    Ok(Some(addr)) => addr,
                    Ok(None) => {
                        branch.verdict = Some(Verdict::Drop);
                        return Act::Flow(Flow::Stop);
                    }
                    Err(why) => return Act::Flow(self.stop(branch, chain, rule, why)),
                };
                let after = Endpoint { addr, port };
                side.set(&mut branch.packet, after);
                branch.ct_dnat = Tri::True;
                Translation::Redirect { before, after }
            }
        };
        translations.push(translation);
        Act::Flow(Flow::TableAccept)
    }

    /// The address of a NAT, and its port when the address expression is
    /// an `address . port` concatenation.
    fn nat_target(
        &self,
        expr: &'a Expr,
        branch: &Branch<'a>,
        numgen: Option<u32>,
    ) -> Result<Option<(IpAddr, Option<u16>)>, String> {
        let value = match expr {
            Expr::Map { key, data } => {
                let key = match self.read(key, branch, numgen) {
                    Read::Value(key) => key,
                    Read::Absent => return Err("the map's key is not in this packet".into()),
                    Read::Unknown(why) => return Err(why),
                };
                match self.select(data, &key, &Kind::of(key_expr(expr)))? {
                    Some(value) => value,
                    None => return Ok(None),
                }
            }
            other => other,
        };
        match value {
            Expr::Address(addr) => Ok(Some((*addr, None))),
            Expr::Concat(parts) => match parts.as_slice() {
                [Expr::Address(addr), Expr::Number(port)] => {
                    let port = u16::try_from(*port).map_err(|_| format!("port {port}"))?;
                    Ok(Some((*addr, Some(port))))
                }
                _ => Err("the NAT target is not an address and a port".into()),
            },
            _ => Err(format!("the NAT target {value:?} is not modelled")),
        }
    }

    /// The value of the element `key` selects in `data` (an anonymous set
    /// or a named map).
    fn select(
        &self,
        data: &'a Expr,
        key: &[Option<Val>],
        key_kinds: &[Kind],
    ) -> Result<Option<&'a Expr>, String> {
        match data {
            Expr::SetRef(name) => {
                let set = self
                    .table
                    .sets
                    .get(name.as_str())
                    .ok_or_else(|| format!("map @{name} is not in the table"))?;
                match set.lookup(key) {
                    Ok(found) => Ok(found.and_then(|i| set.value(i))),
                    Err(()) => Err(format!(
                        "cannot tell which element of @{name} the packet selects"
                    )),
                }
            }
            Expr::Set(elements) => {
                let compiled;
                let set = match self.table.anonymous(data) {
                    Some(set) => set,
                    None => {
                        let kinds = if key_kinds.is_empty() {
                            vec![Kind::Int; key.len()]
                        } else {
                            key_kinds.to_vec()
                        };
                        compiled = CompiledSet::new(kinds, elements);
                        &compiled
                    }
                };
                match set.lookup(key) {
                    Ok(found) => Ok(found.and_then(|i| set.value(i))),
                    Err(()) => {
                        Err("cannot tell which element of the map the packet selects".into())
                    }
                }
            }
            _ => Err("the map is not modelled".into()),
        }
    }

    fn why_unknown(&self, left: &Expr, right: &Expr, branch: &Branch<'_>) -> String {
        for expr in [left, right] {
            if let Read::Unknown(why) = self.read(expr, branch, None) {
                return why;
            }
        }
        if let Expr::Unknown(json) = right {
            return format!("the expression {json} is not modelled");
        }
        "a match cannot be evaluated".to_string()
    }

    /// Whether `left op right` holds for the packet.
    fn test(
        &self,
        op: Op,
        left: &Expr,
        right: &Expr,
        branch: &Branch<'a>,
        numgen: Option<u32>,
    ) -> Tri {
        // Connection status bits the model tracks: DNAT and SNAT.
        if let Expr::Ct { key, .. } = left
            && key == "status"
        {
            let truth = ct_status(right, branch);
            return if op == Op::Ne { !truth } else { truth };
        }
        let key = match self.read(left, branch, numgen) {
            Read::Value(key) => key,
            Read::Absent => return Tri::False,
            Read::Unknown(_) => return Tri::Unknown,
        };
        let kind = Kind::of_one(left);
        let truth = match right {
            Expr::SetRef(name) => match self.table.sets.get(name.as_str()) {
                Some(set) => match set.lookup(&key) {
                    Ok(found) => Tri::from(found.is_some()),
                    Err(()) => Tri::Unknown,
                },
                None => Tri::Unknown,
            },
            Expr::Set(elements) => {
                let compiled;
                let set = match self.table.anonymous(right) {
                    Some(set) => set,
                    None => {
                        compiled = CompiledSet::new(Kind::of(left), elements);
                        &compiled
                    }
                };
                match set.lookup(&key) {
                    Ok(found) => Tri::from(found.is_some()),
                    Err(()) => Tri::Unknown,
                }
            }
            // Flags: `ct state established,related`, `ct state new`. A
            // packet has one state bit, so equality and membership agree.
            Expr::List(_) | Expr::Symbol(_) if kind == Kind::CtState => {
                let items: Vec<&Expr> = match right {
                    Expr::List(items) => items.iter().collect(),
                    one => vec![one],
                };
                let Some(Some(Val::Num(value))) = key.first().cloned() else {
                    return Tri::Unknown;
                };
                let mut mask = 0u128;
                for item in items {
                    match literal(item, kind) {
                        Some(Val::Num(bit)) => mask |= bit,
                        _ => return Tri::Unknown,
                    }
                }
                Tri::from(value & mask != 0)
            }
            Expr::List(items) => {
                let elements: Vec<Element> = items
                    .iter()
                    .map(|item| Element {
                        key: item.clone(),
                        value: None,
                        comment: None,
                    })
                    .collect();
                let set = CompiledSet::new(Kind::of(left), &elements);
                match set.lookup(&key) {
                    Ok(found) => Tri::from(found.is_some()),
                    Err(()) => Tri::Unknown,
                }
            }
            right => {
                let (several, single);
                let expected: &[Pattern] = match right {
                    Expr::Concat(_) => {
                        several = patterns(right, &Kind::of(left));
                        &several
                    }
                    one => {
                        single = pattern(one, kind);
                        std::slice::from_ref(&single)
                    }
                };
                let truth = test_element(expected, &key);
                match op {
                    Op::Eq | Op::In | Op::Ne => truth,
                    ordering => {
                        return match (key.as_slice(), expected) {
                            ([Some(Val::Num(a))], [Pattern::Exact(Val::Num(b))]) => {
                                Tri::from(match ordering {
                                    Op::Lt => a < b,
                                    Op::Gt => a > b,
                                    Op::Le => a <= b,
                                    _ => a >= b,
                                })
                            }
                            _ => Tri::Unknown,
                        };
                    }
                }
            }
        };
        if op == Op::Ne { !truth } else { truth }
    }

    /// Reads an expression from the packet (a concatenation gives one value
    /// per part; an unknown part is `None`).
    fn read(&self, expr: &Expr, branch: &Branch<'a>, numgen: Option<u32>) -> Read {
        let packet = &branch.packet;
        let num = |n: u128| Read::Value(vec![Some(Val::Num(n))]);
        let ipv4 = packet.ip.dst.is_ipv4();
        match expr {
            Expr::Concat(parts) => {
                let mut values = Vec::with_capacity(parts.len());
                for part in parts {
                    match self.read(part, branch, numgen) {
                        Read::Value(v) => values.extend(v),
                        Read::Absent => return Read::Absent,
                        // Left open: the lookup may still be decided by the other parts.
                        Read::Unknown(_) => values.push(None),
                    }
                }
                Read::Value(values)
            }
            Expr::Payload { protocol, field } => {
                let proto = packet.ip.protocol;
                let transport = matches!(proto, Protocol::Tcp | Protocol::Udp | Protocol::Sctp)
                    || proto == Protocol::Other(136);
                match (protocol.as_str(), field.as_str()) {
                    ("ip", _) if !ipv4 => Read::Absent,
                    ("ip6", _) if ipv4 => Read::Absent,
                    ("ip" | "ip6", "saddr") => num(address_bits(packet.ip.src).1),
                    ("ip" | "ip6", "daddr") => num(address_bits(packet.ip.dst).1),
                    ("ip", "protocol") | ("ip6", "nexthdr") => num(u128::from(proto.number())),
                    ("ip", "ttl") | ("ip6", "hoplimit") => num(u128::from(packet.ttl)),
                    ("ip", "length") => num(u128::from(packet.ip.length)),
                    ("tcp", _) if proto != Protocol::Tcp => Read::Absent,
                    ("udp", _) if proto != Protocol::Udp => Read::Absent,
                    ("sctp", _) if proto != Protocol::Sctp => Read::Absent,
                    ("udplite", _) if proto != Protocol::Other(136) => Read::Absent,
                    ("th", _) if !transport => Read::Unknown(format!(
                        "th {field} of a protocol {} packet: the header has no ports",
                        proto.number()
                    )),
                    ("tcp" | "udp" | "sctp" | "udplite" | "th", "sport") => match packet.ip.sport {
                        Some(port) => num(u128::from(port)),
                        None => Read::Unknown("the source port is not known".into()),
                    },
                    ("tcp" | "udp" | "sctp" | "udplite" | "th", "dport") => match packet.ip.dport {
                        Some(port) => num(u128::from(port)),
                        None => Read::Unknown("the destination port is not known".into()),
                    },
                    ("icmp", _) if proto != Protocol::Icmp => Read::Absent,
                    ("icmpv6", _) if proto != Protocol::Icmpv6 => Read::Absent,
                    ("icmp" | "icmpv6", "type") => match packet.icmp {
                        Some((kind, _)) => num(u128::from(kind)),
                        None => Read::Unknown("the ICMP type is not known".into()),
                    },
                    ("icmp" | "icmpv6", "code") => match packet.icmp {
                        Some((_, code)) => num(u128::from(code)),
                        None => Read::Unknown("the ICMP code is not known".into()),
                    },
                    _ => Read::Unknown(format!("{protocol} {field} is not modelled")),
                }
            }
            Expr::Meta(key) => match key.as_str() {
                "l4proto" => num(u128::from(packet.ip.protocol.number())),
                "nfproto" => num(if ipv4 { 2 } else { 10 }),
                "protocol" => num(if ipv4 { 0x0800 } else { 0x86dd }),
                "mark" => num(u128::from(packet.ip.mark)),
                "length" => num(u128::from(packet.ip.length)),
                "iifname" | "iif" => self.interface(
                    packet.in_iface.as_deref(),
                    self.hook.has_in_interface(),
                    "input",
                ),
                "oifname" | "oif" => self.interface(
                    packet.out_iface.as_deref(),
                    self.hook.has_out_interface(),
                    "output",
                ),
                "skuid" | "skgid" => match (branch.local_origin, packet.owner) {
                    (true, Some(owner)) => num(u128::from(if key == "skuid" {
                        owner.uid
                    } else {
                        owner.gid
                    })),
                    (false, _) => Read::Absent,
                    (true, None) => Read::Unknown("the sending socket is not known".into()),
                },
                other => Read::Unknown(format!("meta {other} is not modelled")),
            },
            Expr::Ct { key, dir } => {
                if packet.ct_state == CtState::Untracked && key != "state" {
                    return Read::Absent;
                }
                match (key.as_str(), dir.as_deref()) {
                    ("state", _) => num(u128::from(match packet.ct_state {
                        CtState::New => 8u32,
                        CtState::Established => 2,
                        CtState::Related => 4,
                        CtState::Invalid => 1,
                        CtState::Untracked => 64,
                    })),
                    ("mark", _) => match packet.ct_mark {
                        Some(mark) => num(u128::from(mark)),
                        None => Read::Unknown("the connection mark is not known".into()),
                    },
                    ("direction", _) if packet.ct_state == CtState::New => num(0),
                    (
                        "saddr" | "daddr" | "proto-src" | "proto-dst" | "protocol" | "l4proto",
                        Some("original"),
                    )
                    | ("protocol" | "l4proto", None) => {
                        let original = &branch.original;
                        match key.as_str() {
                            "saddr" => num(address_bits(original.ip.src).1),
                            "daddr" => num(address_bits(original.ip.dst).1),
                            "proto-src" => original
                                .ip
                                .sport
                                .map_or(Read::Absent, |p| num(u128::from(p))),
                            "proto-dst" => original
                                .ip
                                .dport
                                .map_or(Read::Absent, |p| num(u128::from(p))),
                            _ => num(u128::from(original.ip.protocol.number())),
                        }
                    }
                    _ => Read::Unknown(format!("ct {key} is not modelled")),
                }
            }
            Expr::Fib { result, flags } if result == "type" => {
                let address = match flags.iter().find(|f| *f == "saddr" || *f == "daddr") {
                    Some(flag) if flag == "saddr" => packet.ip.src,
                    _ => packet.ip.dst,
                };
                if flags.iter().any(|f| f == "iif" || f == "oif") {
                    return Read::Unknown("fib with iif/oif is not modelled".into());
                }
                match super::is_local(self.context, address) {
                    Tri::True => Read::Value(vec![Some(Val::Text("local".into()))]),
                    // Not local: the model takes it as unicast (it does not
                    // tell broadcast or multicast addresses apart).
                    Tri::False => Read::Value(vec![Some(Val::Text("unicast".into()))]),
                    Tri::Unknown => {
                        Read::Unknown(format!("whether {address} is local is not known"))
                    }
                }
            }
            Expr::Numgen { .. } => match numgen {
                Some(value) => num(u128::from(value)),
                None => Read::Unknown("numgen: which value the kernel draws".into()),
            },
            Expr::Binary { op, left, right } => {
                let (Read::Value(l), Read::Value(r)) = (
                    self.read(left, branch, numgen),
                    self.read(right, branch, numgen),
                ) else {
                    return Read::Unknown("an operand is not known".into());
                };
                match (l.as_slice(), r.as_slice()) {
                    ([Some(Val::Num(a))], [Some(Val::Num(b))]) => num(match op {
                        BinOp::And => a & b,
                        BinOp::Or => a | b,
                        BinOp::Xor => a ^ b,
                        BinOp::Shl => a
                            .checked_shl(u32::try_from(*b).unwrap_or(u32::MAX))
                            .unwrap_or(0),
                        BinOp::Shr => a
                            .checked_shr(u32::try_from(*b).unwrap_or(u32::MAX))
                            .unwrap_or(0),
                    }),
                    _ => Read::Unknown("an operand is not a number".into()),
                }
            }
            Expr::Number(n) => num(u128::from(*n)),
            Expr::Address(addr) => num(address_bits(*addr).1),
            Expr::Unknown(json) => Read::Unknown(format!("the expression {json} is not modelled")),
            other => Read::Unknown(format!("{other:?} is not read from a packet")),
        }
    }

    fn interface(&self, name: Option<&str>, present: bool, which: &str) -> Read {
        match (present, name) {
            (false, _) => Read::Absent,
            (true, Some(name)) => Read::Value(vec![Some(Val::Text(name.to_string()))]),
            (true, None) => Read::Unknown(format!("the {which} interface is not known")),
        }
    }
}

/// How a rule's `numgen` forks it: `(modulus, offset)`, or why the model
/// does not follow it.
type Fork = Result<(u32, u32), String>;

/// The key under which an anonymous set's compiled form is kept.
fn address_of(expr: &Expr) -> usize {
    std::ptr::from_ref(expr) as usize
}

/// The key expression of a map expression.
fn key_expr(expr: &Expr) -> &Expr {
    match expr {
        Expr::Map { key, .. } => key,
        other => other,
    }
}

/// `ct status dnat`, `ct status snat`: what the model tracks of the status bits.
fn ct_status(right: &Expr, branch: &Branch<'_>) -> Tri {
    let items: Vec<&Expr> = match right {
        Expr::List(items) => items.iter().collect(),
        one => vec![one],
    };
    // Any of the bits: true when one is known set, false when all are known clear.
    let mut truth = Tri::False;
    for item in items {
        let bit = match item {
            Expr::Symbol(name) if name == "dnat" => branch.ct_dnat,
            Expr::Symbol(name) if name == "snat" => branch.ct_snat,
            _ => Tri::Unknown,
        };
        truth = !(!truth).and(!bit);
    }
    truth
}

/// The numgen of a rule: `Some(Ok((modulus, offset)))`, or `Err` when the
/// rule has more than one or too large a one.
fn numgen(rule: &Rule) -> Option<Fork> {
    let mut found = Vec::new();
    for statement in &rule.statements {
        match statement {
            Statement::Match { left, right, .. } => {
                collect_numgen(left, &mut found);
                collect_numgen(right, &mut found);
            }
            Statement::Vmap { key, .. } => collect_numgen(key, &mut found),
            Statement::Nat(nat) => {
                for expr in nat.addr.iter().chain(nat.port.iter()) {
                    collect_numgen(expr, &mut found);
                }
            }
            Statement::Mangle { value, .. } => collect_numgen(value, &mut found),
            _ => {}
        }
    }
    match found.as_slice() {
        [] => None,
        [(modulus, _)] if *modulus > MAX_NUMGEN => Some(Err(format!(
            "numgen mod {modulus}: more than {MAX_NUMGEN} ways"
        ))),
        [one] => Some(Ok(*one)),
        _ => Some(Err("more than one numgen in a rule is not modelled".into())),
    }
}

fn collect_numgen(expr: &Expr, found: &mut Vec<(u32, u32)>) {
    match expr {
        Expr::Numgen {
            modulus, offset, ..
        } => found.push((*modulus, *offset)),
        Expr::Concat(parts) | Expr::List(parts) => {
            for part in parts {
                collect_numgen(part, found);
            }
        }
        Expr::Map { key, .. } => collect_numgen(key, found),
        Expr::Binary { left, right, .. } => {
            collect_numgen(left, found);
            collect_numgen(right, found);
        }
        _ => {}
    }
}

/// Whether a rule changes nothing a packet's fate depends on (matches,
/// counters and logging only).
fn passive(rule: &Rule) -> bool {
    rule.statements.iter().all(|s| {
        matches!(
            s,
            Statement::Match { .. } | Statement::Passive(_) | Statement::Limit(_)
        )
    })
}

fn port_range(expr: &Expr) -> Option<PortRange> {
    let port = |e: &Expr| match e {
        Expr::Number(n) => u16::try_from(*n).ok(),
        _ => None,
    };
    match expr {
        Expr::Range(low, high) => Some(PortRange {
            first: port(low)?,
            last: port(high)?,
        }),
        one => {
            let p = port(one)?;
            Some(PortRange { first: p, last: p })
        }
    }
}

/// What a `reject` statement sends: nft's default is an ICMP port
/// unreachable (for TCP too, unlike `reject with tcp reset`).
fn reject_with(reject: &nft::Reject, packet: &Packet) -> RejectWith {
    let code = reject.code.as_deref().unwrap_or("port-unreachable");
    match (reject.kind.as_deref(), code) {
        (Some("tcp reset"), _) if packet.ip.protocol == Protocol::Tcp => RejectWith::TcpReset,
        (_, "net-unreachable" | "no-route") => RejectWith::IcmpNetUnreachable,
        (_, "host-unreachable" | "addr-unreachable") => RejectWith::IcmpHostUnreachable,
        (_, "prot-unreachable") => RejectWith::IcmpProtoUnreachable,
        (_, "net-prohibited") => RejectWith::IcmpNetProhibited,
        (_, "host-prohibited") => RejectWith::IcmpHostProhibited,
        (_, "admin-prohibited") => RejectWith::IcmpAdminProhibited,
        _ => RejectWith::IcmpPortUnreachable,
    }
}
