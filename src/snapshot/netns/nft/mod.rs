//! `nft -j list ruleset`: the nftables ruleset of a namespace as a typed
//! model (tables of every family, base and regular chains, rules as
//! statements over expressions, named sets and maps with their elements).
//!
//! The JSON is libnftables' (`libnftables-json(5)`): one array `nftables` of
//! objects, each a `metainfo`, `table`, `chain`, `rule`, `set`, `map`, ...
//! Every object is read on its own, so that one malformed object costs only
//! itself (one issue at its position) and the rest is kept. An expression or
//! statement the model does not know is kept as [`Expr::Unknown`] or
//! [`Statement::Unknown`] with its JSON, so that evaluation can say which
//! rule it could not follow instead of skipping it.

mod read;
#[cfg(test)]
mod tests;
mod text;

use std::fmt;
use std::net::IpAddr;

pub use read::parse;

/// A namespace's nftables ruleset.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ruleset {
    pub tables: Vec<Table>,
}

impl Ruleset {
    pub fn table(&self, family: Family, name: &str) -> Option<&Table> {
        self.tables
            .iter()
            .find(|t| t.family == family && t.name == name)
    }
}

/// An nftables address family: which packets a table's chains see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Ip,
    Ip6,
    Inet,
    Arp,
    Bridge,
    Netdev,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Ip => "ip",
            Family::Ip6 => "ip6",
            Family::Inet => "inet",
            Family::Arp => "arp",
            Family::Bridge => "bridge",
            Family::Netdev => "netdev",
        }
    }

    fn from_name(name: &str) -> Option<Family> {
        Some(match name {
            "ip" => Family::Ip,
            "ip6" => Family::Ip6,
            "inet" => Family::Inet,
            "arp" => Family::Arp,
            "bridge" => Family::Bridge,
            "netdev" => Family::Netdev,
            _ => return None,
        })
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A table: its chains and its named sets and maps.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub family: Family,
    pub name: String,
    pub handle: Option<u64>,
    pub chains: Vec<Chain>,
    pub sets: Vec<Set>,
}

impl Table {
    pub fn chain(&self, name: &str) -> Option<&Chain> {
        self.chains.iter().find(|c| c.name == name)
    }

    pub fn chain_index(&self, name: &str) -> Option<usize> {
        self.chains.iter().position(|c| c.name == name)
    }

    pub fn set(&self, name: &str) -> Option<&Set> {
        self.sets.iter().find(|s| s.name == name)
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family, self.name)
    }
}

/// A chain; a base chain is attached to a hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub name: String,
    pub handle: Option<u64>,
    pub base: Option<BaseChain>,
    pub rules: Vec<Rule>,
    /// Where the chain's object is in the dump (1-based line and column).
    pub position: (usize, usize),
}

/// What makes a chain a base chain: where it is attached and what it does
/// with a packet that reaches its end.
#[derive(Debug, Clone, PartialEq)]
pub struct BaseChain {
    pub kind: ChainType,
    pub hook: ChainHook,
    pub priority: i32,
    pub policy: Policy,
    /// The device of an ingress/egress chain.
    pub device: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainType {
    Filter,
    Nat,
    Route,
    Other(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainHook {
    Prerouting,
    Input,
    Forward,
    Output,
    Postrouting,
    Ingress,
    Egress,
}

impl ChainHook {
    pub fn as_str(self) -> &'static str {
        match self {
            ChainHook::Prerouting => "prerouting",
            ChainHook::Input => "input",
            ChainHook::Forward => "forward",
            ChainHook::Output => "output",
            ChainHook::Postrouting => "postrouting",
            ChainHook::Ingress => "ingress",
            ChainHook::Egress => "egress",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Accept,
    Drop,
}

/// A rule: statements run in order; a match that fails ends the rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub handle: Option<u64>,
    pub comment: Option<String>,
    pub statements: Vec<Statement>,
    /// The packets its `counter` statement counted, where it has one.
    pub packets: Option<u64>,
    /// Where the rule's object is in the dump (1-based line and column).
    pub position: (usize, usize),
}

impl Rule {
    /// The rule as `nft list ruleset` prints it.
    pub fn text(&self) -> String {
        text::rule(self)
    }

    /// The chains the rule jumps or goes to, also from a verdict map
    /// written in the rule.
    pub fn chain_targets(&self) -> Vec<&str> {
        fn add<'r>(targets: &mut Vec<&'r str>, verdict: &'r Verdict) {
            if let Verdict::Jump(chain) | Verdict::Goto(chain) = verdict {
                targets.push(chain.as_str());
            }
        }
        let mut targets = Vec::new();
        for statement in &self.statements {
            match statement {
                Statement::Verdict(verdict) => add(&mut targets, verdict),
                Statement::Vmap {
                    data: Expr::Set(elements),
                    ..
                } => {
                    for element in elements {
                        if let Some(Expr::Verdict(verdict)) = &element.value {
                            add(&mut targets, verdict);
                        }
                    }
                }
                _ => {}
            }
        }
        targets
    }

    /// Every `address:port` a `dnat` of the rule can translate to: its
    /// address and port, or each value of the map it draws them from.
    pub fn dnat_targets(&self) -> Vec<String> {
        let mut targets = Vec::new();
        for statement in &self.statements {
            let Statement::Nat(nat) = statement else {
                continue;
            };
            if nat.kind != NatKind::Dnat {
                continue;
            }
            let port = match &nat.port {
                Some(Expr::Number(port)) => Some(*port),
                _ => None,
            };
            let endpoint = |value: &Expr| match value {
                Expr::Address(addr) => Some(match port {
                    Some(port) => format!("{addr}:{port}"),
                    None => addr.to_string(),
                }),
                Expr::Concat(parts) => match parts.as_slice() {
                    [Expr::Address(addr), Expr::Number(port)] => Some(format!("{addr}:{port}")),
                    _ => None,
                },
                _ => None,
            };
            match &nat.addr {
                Some(Expr::Map { data, .. }) => {
                    if let Expr::Set(elements) = data.as_ref() {
                        targets.extend(
                            elements
                                .iter()
                                .filter_map(|e| e.value.as_ref().and_then(endpoint)),
                        );
                    }
                }
                Some(value) => targets.extend(endpoint(value)),
                None => {}
            }
        }
        targets
    }
}

/// One statement of a rule.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `left op right`: the rule goes on only when it holds.
    Match {
        op: Op,
        left: Expr,
        right: Expr,
    },
    Verdict(Verdict),
    /// `key vmap data`: the verdict of the element `key` selects, if any.
    Vmap {
        key: Expr,
        data: Expr,
    },
    Nat(Nat),
    /// `key set value` (`meta mark set ...`, `ct mark set ...`).
    Mangle {
        key: Expr,
        value: Expr,
    },
    Reject(Reject),
    Notrack,
    /// Counters, logging, quotas: they change nothing a packet's fate depends on.
    Passive(String),
    /// `limit rate ...`: assumed not exceeded.
    Limit(String),
    /// A statement the model does not follow, kept with its JSON.
    Unknown {
        name: String,
        json: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    /// `in`: membership in a set, or the flags of a bitmask.
    In,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Ge => ">=",
            Op::In => "in",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Drop,
    Continue,
    Return,
    Jump(String),
    Goto(String),
    Queue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NatKind {
    Dnat,
    Snat,
    Masquerade,
    Redirect,
}

impl NatKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NatKind::Dnat => "dnat",
            NatKind::Snat => "snat",
            NatKind::Masquerade => "masquerade",
            NatKind::Redirect => "redirect",
        }
    }
}

/// `dnat ip to ADDR:PORT`, `snat`, `masquerade`, `redirect to :PORT`.
#[derive(Debug, Clone, PartialEq)]
pub struct Nat {
    pub kind: NatKind,
    pub family: Option<Family>,
    pub addr: Option<Expr>,
    pub port: Option<Expr>,
    pub flags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// `icmp`, `icmpv6`, `icmpx`, `tcp reset`; `None`: the default (port unreachable).
    pub kind: Option<String>,
    pub code: Option<String>,
}

/// An expression: what a statement reads from the packet, or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Number(u64),
    Address(IpAddr),
    /// A symbolic literal: a protocol, a state, an interface name, ...
    Symbol(String),
    /// A list of flags or values (`ct state { established, related }` as `in`).
    List(Vec<Expr>),
    /// `ip daddr`, `tcp dport`, `th dport`.
    Payload {
        protocol: String,
        field: String,
    },
    Meta(String),
    Ct {
        key: String,
        dir: Option<String>,
    },
    Fib {
        result: String,
        flags: Vec<String>,
    },
    Numgen {
        mode: String,
        modulus: u32,
        offset: u32,
    },
    Prefix {
        addr: IpAddr,
        len: u8,
    },
    Range(Box<Expr>, Box<Expr>),
    /// An anonymous set or map, its elements in order.
    Set(Vec<Element>),
    /// A named set or map: `@name`.
    SetRef(String),
    /// `a . b . c`.
    Concat(Vec<Expr>),
    /// `key map data`: the value the element `key` selects.
    Map {
        key: Box<Expr>,
        data: Box<Expr>,
    },
    Binary {
        op: BinOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// A verdict as a map's value.
    Verdict(Verdict),
    /// An expression the model does not know, kept with its JSON.
    Unknown(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

impl BinOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&text::expr(self))
    }
}

/// An element of a set (`value: None`) or a map.
#[derive(Debug, Clone, PartialEq)]
pub struct Element {
    pub key: Expr,
    pub value: Option<Expr>,
    /// The element's comment (kube-proxy names the service port in it).
    pub comment: Option<String>,
}

/// A named set or map.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    pub name: String,
    pub handle: Option<u64>,
    /// The key's type, one name per part of a concatenation.
    pub key_type: Vec<String>,
    /// A map's value type (`verdict`, `ipv4_addr`, ...); `None` for a set.
    pub map: Option<String>,
    pub flags: Vec<String>,
    pub elements: Vec<Element>,
    pub position: (usize, usize),
}
