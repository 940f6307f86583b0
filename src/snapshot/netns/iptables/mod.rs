//! `iptables-save` output (with or without `-c`) read into a typed ruleset:
//! tables in file order, their chains in declaration order, and each chain's
//! rules in order with typed matches and target.
//!
//! The kernel model evaluates packets through this, so every value a rule
//! tests (networks, port ranges, marks, flag sets) is read here, once.
//! Anything the parser does not understand is kept, never dropped or
//! guessed: an unknown module or option is a [`Match::Unsupported`], an
//! unknown target a [`Target::Unsupported`], both with their text as written,
//! so that evaluation can say the outcome of that rule is unknown.
//!
//! The file is read the way `iptables-restore` reads it: `*table` opens a
//! table, `:CHAIN POLICY [packets:bytes]` declares a chain, `-A CHAIN ...`
//! appends a rule (optionally preceded by `[packets:bytes]`), `COMMIT` ends
//! the table, `#` starts a comment line. A chain must be declared before a
//! rule names it. A malformed line is an issue with its line and column, and
//! the rest of the table still loads.
//!
//! A node with 10,000 services has about 150,000 rules (20 MB) in 50,000
//! chains, of which one packet meets a few: [`parse_structure`] reads the
//! tables and chains and leaves each chain's rules to be read the first
//! time they are asked for ([`Chain::rules`]); [`parse`] reads them all, a
//! large dump's on several threads (see `read.rs`), with the same result.
//! Reading avoids per-word allocations (rule texts and comments are slices
//! of the dump, which every rule shares, [`DumpText`]).

pub mod generate;
mod matches;
mod read;
mod rule;
mod targets;
mod values;
mod words;

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock};

pub use crate::net::Protocol;
pub use matches::{
    AddrTypeMatch, AddrTypes, BpfInstruction, BpfMatch, BpfProgram, ConntrackMatch, CtDirection,
    CtStates, CtStatuses, HashLimitMatch, HashLimitMode, IpRangeMatch, LimitInterface, LimitMatch,
    Match, MultiportMatch, OwnerMatch, PacketType, PhysdevMatch, PortDirection, PortMatch, Rate,
    RateUnit, RecentCommand, RecentMatch, RecentSide, RpfilterMatch, SetDirection, SetMatch,
    SocketMatch, Statistic, TcpFlagBits, TcpFlags, TcpMatch, TimeUnit, TtlTest, U32Match, U32Step,
    U32Test,
};
pub use targets::{
    ChainRef, ConnMarkAction, CtTarget, CtZone, LogTarget, MasqueradeTarget, NatRange, NatTarget,
    NfLogTarget, RedirectTarget, RejectWith, Target, XMark,
};
pub(crate) use values::protocol;
pub use values::{AddressRange, IcmpType, Interface, Invertible, MarkMask, PortRange};

pub(crate) use values::{BadValue, ip_addr, ip_net, number, prefix_len};
pub(crate) use words::{Word, column, split_words};

use crate::snapshot::input::Text;
use crate::snapshot::problem::{ParseIssue, Parsed, Problem};

/// Everything `iptables-save` printed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ruleset {
    /// In file order.
    pub tables: Vec<Table>,
}

impl Ruleset {
    pub fn table(&self, name: TableName) -> Option<&Table> {
        self.tables.iter().find(|t| t.name == name)
    }
}

/// The iptables tables, in the order netfilter visits them at a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TableName {
    Raw,
    Mangle,
    Nat,
    Filter,
    Security,
}

impl TableName {
    const ALL: [TableName; 5] = [
        TableName::Raw,
        TableName::Mangle,
        TableName::Nat,
        TableName::Filter,
        TableName::Security,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TableName::Raw => "raw",
            TableName::Mangle => "mangle",
            TableName::Nat => "nat",
            TableName::Filter => "filter",
            TableName::Security => "security",
        }
    }

    /// The chains the kernel creates in this table, which have a policy.
    pub fn builtin_chains(self) -> &'static [&'static str] {
        match self {
            TableName::Raw => &["PREROUTING", "OUTPUT"],
            TableName::Mangle => &["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
            TableName::Nat => &["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
            TableName::Filter | TableName::Security => &["INPUT", "FORWARD", "OUTPUT"],
        }
    }

    /// The table of this name, if iptables has one.
    pub fn parse(name: &str) -> Option<TableName> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `*table` ... `COMMIT` section.
#[derive(Clone)]
pub struct Table {
    pub name: TableName,
    /// Line of `*table`.
    pub line: usize,
    /// False when the file ends before the table's `COMMIT`: it may be
    /// missing rules (a truncated dump).
    pub committed: bool,
    /// In declaration order.
    pub chains: Vec<Chain>,
    text: Arc<TableText>,
}

impl Table {
    pub fn chain(&self, name: &str) -> Option<&Chain> {
        self.chain_index(name).and_then(|i| self.chains.get(i))
    }

    /// The position of chain `name` in [`Table::chains`], as [`ChainRef`] holds it.
    pub fn chain_index(&self, name: &str) -> Option<usize> {
        self.text.by_name.get(name).copied()
    }
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("line", &self.line)
            .field("committed", &self.committed)
            .field("chains", &self.chains)
            .finish()
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Self) -> bool {
        (self.name, self.line, self.committed) == (other.name, other.line, other.committed)
            && self.chains == other.chains
    }
}

/// What reading a table's rules needs, shared by its chains: the dump, the
/// table's chains by name (a rule's `-j` names one), and every rule line
/// the first pass found, grouped by chain.
struct TableText {
    dump: Arc<Text>,
    table: TableName,
    by_name: ChainIndex,
    lines: Vec<RuleLine>,
}

/// A rule line found by the first pass: where it is, and how many chains
/// its table had declared before it (a rule may only name those). A dump
/// holds hundreds of thousands, so each is 16 bytes: the first pass reads
/// no dump over 4 GiB (`read::structure`).
#[derive(Debug, Clone, Copy, Default)]
struct RuleLine {
    number: u32,
    /// Byte offsets of the line in the dump.
    start: u32,
    end: u32,
    visible: u32,
}

impl RuleLine {
    fn new(number: usize, start: usize, end: usize, visible: usize) -> RuleLine {
        let narrow = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        RuleLine {
            number: narrow(number),
            start: narrow(start),
            end: narrow(end),
            visible: narrow(visible),
        }
    }

    fn number(&self) -> usize {
        self.number as usize
    }

    /// Its bytes in the dump.
    fn span(&self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    fn visible(&self) -> usize {
        self.visible as usize
    }
}

/// Chain names to positions in [`Table::chains`]. Every rule and every jump
/// looks a chain up, so the hash is a cheap multiplicative one (as rustc's
/// FxHash) rather than SipHash: a dump is data to diagnose, not input from
/// an attacker, and a crafted one could at worst slow its own parse down.
pub(crate) type ChainIndex = HashMap<Arc<str>, usize, BuildHasherDefault<ChainNameHasher>>;

#[derive(Default)]
pub(crate) struct ChainNameHasher(u64);

impl ChainNameHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for ChainNameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(<[u8; 8]>::try_from(chunk).map_or(0, u64::from_le_bytes));
        }
        let tail = chunks
            .remainder()
            .iter()
            .fold(0, |word, &b| (word << 8) | u64::from(b));
        self.add(tail);
    }
}

/// A chain and its rules. The rules are read from the dump the first time
/// they are asked for ([`Chain::rules`]): a kube-proxy node's dump holds
/// tens of thousands of chains, of which a packet meets a few.
#[derive(Clone)]
pub struct Chain {
    /// Shared with every [`ChainRef`] to this chain.
    pub name: Arc<str>,
    /// A built-in chain's policy; `None` for user-defined chains.
    pub policy: Option<Policy>,
    /// The policy's counters on a built-in chain (zero on user-defined ones).
    pub counters: Option<Counters>,
    /// Line of the `:CHAIN` declaration.
    pub line: usize,
    /// Its rule lines, in [`TableText::lines`].
    lines: std::ops::Range<usize>,
    text: Arc<TableText>,
    read: OnceLock<ChainRules>,
}

/// A chain with a rule line that could not be read.
#[derive(Debug, Clone, Copy)]
pub struct UnreadChain<'a> {
    pub table: TableName,
    pub chain: &'a str,
    /// The first problem of its rule lines.
    pub issue: &'a ParseIssue,
}

impl UnreadChain<'_> {
    /// `TABLE CHAIN cannot be read whole (FILE:LINE:COL: why), so what it
    /// does is not known`, its rules read from `file`: said one way
    /// wherever it is said.
    pub fn of(&self, file: &std::path::Path) -> String {
        let problem = Problem::from_issue(file, self.issue.clone());
        format!(
            "{} {} cannot be read whole ({problem}), so what it does is not known",
            self.table, self.chain
        )
    }
}

/// A chain's rules as read, and the problems of the lines that could not be.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChainRules {
    rules: Vec<Rule>,
    issues: Vec<ParseIssue>,
}

impl Chain {
    /// The chain's rules in order; `Err` when a rule line of the chain
    /// could not be read: what the chain does is then not known whole, as
    /// with a file read with problems, but only for a reader of this chain.
    pub fn rules(&self) -> Result<&[Rule], UnreadChain<'_>> {
        let read = self.read();
        match read.issues.first() {
            Some(issue) => Err(UnreadChain {
                table: self.text.table,
                chain: &self.name,
                issue,
            }),
            None => Ok(&read.rules),
        }
    }

    /// How many rule lines the chain has, read or not.
    pub fn rule_lines(&self) -> usize {
        self.lines.len()
    }

    /// Reads the chain's rules, once.
    fn read(&self) -> &ChainRules {
        self.read.get_or_init(|| {
            let lines = self.text.lines.get(self.lines.clone()).unwrap_or_default();
            read::read_chain(&self.text, lines)
        })
    }

    /// The rules of the chain that could be read, whatever could not: for
    /// what is about each rule alone (its counters, its line), never for
    /// what the chain does, which [`Chain::rules`] tells.
    pub fn rules_read(&self) -> &[Rule] {
        &self.read().rules
    }
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chain")
            .field("name", &self.name)
            .field("policy", &self.policy)
            .field("counters", &self.counters)
            .field("line", &self.line)
            .field("rules", &self.read().rules)
            .field("issues", &self.read().issues)
            .finish()
    }
}

impl PartialEq for Chain {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, self.policy, self.counters, self.line)
            == (&other.name, other.policy, other.counters, other.line)
            && self.read().rules == other.read().rules
            && self.read().issues == other.read().issues
    }
}

/// What a built-in chain does with a packet no rule decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Accept,
    Drop,
}

/// Packet and byte counters (`[packets:bytes]`, `iptables-save -c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub packets: u64,
    pub bytes: u64,
}

/// One `-A` rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// 1-based line in the file.
    pub line: usize,
    /// 1-based position in its chain, as `iptables -L --line-numbers` shows.
    pub number: usize,
    /// The rule as written, from `-A` on (without its counters).
    pub text: DumpText,
    pub counters: Option<Counters>,
    pub matches: Vec<Match>,
    /// `None` for a rule without `-j`/`-g`: it only counts packets.
    pub target: Option<Target>,
}

/// Text read from the dump (a rule as written, a comment): a slice of the
/// dump, which every rule shares instead of copying its piece of it (a large
/// dump has 150,000 rules), or its own text when escapes had to be resolved.
#[derive(Clone)]
pub struct DumpText {
    dump: Arc<Text>,
    start: usize,
    end: usize,
}

impl DumpText {
    pub fn as_str(&self) -> &str {
        self.dump.get(self.start..self.end).unwrap_or_default()
    }
}

impl From<&str> for DumpText {
    fn from(text: &str) -> Self {
        DumpText {
            dump: Arc::new(Text::from(text.to_owned())),
            start: 0,
            end: text.len(),
        }
    }
}

impl std::ops::Deref for DumpText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for DumpText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for DumpText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for DumpText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<&str> for DumpText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A line being read, and where it is in the dump.
#[derive(Clone, Copy)]
pub(crate) struct DumpLine<'a> {
    pub text: &'a str,
    /// Byte offset of the line in the dump.
    pub start: usize,
    pub dump: &'a Arc<Text>,
}

impl DumpLine<'_> {
    /// The text at byte `range` of the line.
    pub fn slice(&self, range: std::ops::Range<usize>) -> DumpText {
        DumpText {
            dump: Arc::clone(self.dump),
            start: self.start + range.start,
            end: self.start + range.end,
        }
    }
}

/// Reads `iptables-save` output whole: every rule of every chain, and every
/// problem. `None` only when the text has content but not one table could
/// be read from it: it is then not a ruleset (an error message captured
/// instead of the dump, say), not an empty one.
pub fn parse(text: &str) -> Parsed<Ruleset> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    read::read(Text::from(text.to_owned()), threads)
}

/// Reads the structure of `iptables-save` output (tables, chains, which
/// chain each rule line is in), leaving each chain's rules to be read when
/// they are first asked for. Its problems are those of the structure: a
/// line that is no table, chain, rule or COMMIT, a table without COMMIT, a
/// rule whose chain cannot be told. A problem inside a rule is its chain's
/// ([`Chain::rules`]). `None` as for [`parse`]. The rules keep `text`,
/// which they are read from when asked for; a mapped text's pages are
/// released as the structure is read ([`Text::release`]).
pub fn parse_structure(text: Text) -> Parsed<Ruleset> {
    read::scan(text)
}

#[cfg(test)]
pub(crate) mod tests;
