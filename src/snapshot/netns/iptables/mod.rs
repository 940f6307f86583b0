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

pub mod generate;
mod matches;
mod rule;
mod targets;
mod values;
mod words;

use std::collections::HashMap;
use std::fmt;

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
pub use values::{AddressRange, IcmpType, Interface, Invertible, MarkMask, PortRange, Protocol};

pub(crate) use values::{BadValue, ip_addr, ip_net, number, prefix_len};
pub(crate) use words::{Word, column, split_words};

use crate::snapshot::problem::{ParseIssue, Parsed};
use rule::{RuleReader, WordIssue};

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

    fn parse(name: &str) -> Option<TableName> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `*table` ... `COMMIT` section.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub name: TableName,
    /// Line of `*table`.
    pub line: usize,
    /// False when the file ends before the table's `COMMIT`: it may be
    /// missing rules (a truncated dump).
    pub committed: bool,
    /// In declaration order.
    pub chains: Vec<Chain>,
    by_name: HashMap<String, usize>,
}

impl Table {
    fn new(name: TableName, line: usize) -> Table {
        Table {
            name,
            line,
            committed: false,
            chains: Vec::new(),
            by_name: HashMap::new(),
        }
    }

    pub fn chain(&self, name: &str) -> Option<&Chain> {
        self.chain_index(name).and_then(|i| self.chains.get(i))
    }

    /// The position of chain `name` in [`Table::chains`], as [`ChainRef`] holds it.
    pub fn chain_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }
}

/// A chain and its rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub name: String,
    /// A built-in chain's policy; `None` for user-defined chains.
    pub policy: Option<Policy>,
    /// The policy's counters on a built-in chain (zero on user-defined ones).
    pub counters: Option<Counters>,
    /// Line of the `:CHAIN` declaration.
    pub line: usize,
    /// In order.
    pub rules: Vec<Rule>,
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
    pub text: String,
    pub counters: Option<Counters>,
    pub matches: Vec<Match>,
    /// `None` for a rule without `-j`/`-g`: it only counts packets.
    pub target: Option<Target>,
}

/// Reads `iptables-save` output. `None` only when the text has content but
/// not one table could be read from it: it is then not a ruleset (an error
/// message captured instead of the dump, say), not an empty one.
pub fn parse(text: &str) -> Parsed<Ruleset> {
    let mut reader = Reader::default();
    for (index, line) in text.lines().enumerate() {
        reader.line(index + 1, line);
    }
    reader.finish()
}

/// The table lines go to.
enum Open {
    None,
    Table(Table),
    /// A table this parser does not know: its lines are skipped until COMMIT.
    Unknown,
}

struct Reader<'a> {
    tables: Vec<Table>,
    open: Open,
    issues: Vec<ParseIssue>,
    words: Vec<Word<'a>>,
    rules: RuleReader,
    rule_issues: Vec<WordIssue>,
    /// The chain the last rule went to: rules of a chain come together.
    last_chain: Option<(&'a str, usize)>,
}

impl Default for Reader<'_> {
    fn default() -> Self {
        Reader {
            tables: Vec::new(),
            open: Open::None,
            issues: Vec::new(),
            words: Vec::new(),
            rules: RuleReader::default(),
            rule_issues: Vec::new(),
            last_chain: None,
        }
    }
}

/// Reads a decimal counter.
fn parse_counter(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Reads `[packets:bytes]`.
fn parse_counters(text: &str) -> Option<Counters> {
    let (packets, bytes) = text.strip_prefix('[')?.strip_suffix(']')?.split_once(':')?;
    Some(Counters {
        packets: parse_counter(packets)?,
        bytes: parse_counter(bytes)?,
    })
}

impl<'a> Reader<'a> {
    fn issue_at(
        &mut self,
        line_number: usize,
        line: &str,
        offset: usize,
        message: impl Into<String>,
    ) {
        self.issues
            .push(ParseIssue::at(line_number, column(line, offset), message));
    }

    fn line(&mut self, number: usize, line: &'a str) {
        let content = line.trim_start();
        let offset = line.len() - content.len();
        if content.is_empty() || content.starts_with('#') {
            return;
        }
        if let Some(name) = content.strip_prefix('*') {
            self.table_header(number, line, offset, name.trim_end());
            return;
        }
        if content.trim_end() == "COMMIT" {
            self.commit(number, line, offset);
            return;
        }
        let kind = match content.as_bytes()[0] {
            b':' => "chain",
            b'[' | b'-' => "rule",
            _ => {
                self.issue_at(
                    number,
                    line,
                    offset,
                    "expected `*table`, `:CHAIN POLICY`, a rule or `COMMIT`",
                );
                return;
            }
        };
        let Open::Table(_) = self.open else {
            if matches!(self.open, Open::None) {
                self.issue_at(
                    number,
                    line,
                    offset,
                    format!("{kind} outside of a table (no `*table` line before it)"),
                );
            }
            return;
        };
        if let Err(unclosed) = split_words(line, &mut self.words) {
            self.issue_at(number, line, unclosed.start, unclosed.to_string());
            return;
        }
        if kind == "chain" {
            self.chain(number, line);
        } else {
            self.rule(number, line);
        }
    }

    fn table_header(&mut self, number: usize, line: &str, offset: usize, name: &str) {
        if let Open::Table(table) = std::mem::replace(&mut self.open, Open::None) {
            self.issue_at(
                number,
                line,
                offset,
                format!(
                    "table `{}` (line {}) has no COMMIT before this table starts",
                    table.name, table.line
                ),
            );
            self.close(table);
        }
        self.last_chain = None;
        self.open = match TableName::parse(name) {
            Some(name) => Open::Table(Table::new(name, number)),
            None => {
                self.issue_at(
                    number,
                    line,
                    offset + 1,
                    format!("unknown table `{name}` (expected raw, mangle, nat, filter or security); its lines are skipped"),
                );
                Open::Unknown
            }
        };
    }

    fn commit(&mut self, number: usize, line: &str, offset: usize) {
        match std::mem::replace(&mut self.open, Open::None) {
            Open::Table(mut table) => {
                table.committed = true;
                self.close(table);
            }
            Open::Unknown => {}
            Open::None => self.issue_at(number, line, offset, "COMMIT outside of a table"),
        }
    }

    /// Adds a finished table; a table given twice replaces the earlier one,
    /// as `iptables-restore` flushes a table before restoring it.
    fn close(&mut self, table: Table) {
        match self.tables.iter_mut().find(|t| t.name == table.name) {
            Some(earlier) => {
                self.issues.push(ParseIssue::at_line(
                    table.line,
                    format!(
                        "table `{}` appears again (first at line {}); this one replaces it",
                        table.name, earlier.line
                    ),
                ));
                *earlier = table;
            }
            None => self.tables.push(table),
        }
    }

    /// `:NAME POLICY [packets:bytes]`
    fn chain(&mut self, number: usize, line: &str) {
        let Open::Table(table) = &mut self.open else {
            return;
        };
        let words = &self.words;
        let mut issues = Vec::new();
        let name = words[0].text.get(1..).unwrap_or_default();
        if name.is_empty() {
            issues.push((
                words[0].start,
                "chain declaration without a name".to_owned(),
            ));
        }
        let builtin = table.name.builtin_chains().contains(&name);
        let policy = match words.get(1).map(|w| (&*w.text, w.start)) {
            Some(("ACCEPT", _)) => Some(Policy::Accept),
            Some(("DROP", _)) => Some(Policy::Drop),
            Some(("-", _)) => None,
            Some((other, at)) => {
                issues.push((
                    at,
                    format!(
                        "`{other}` is not a policy (ACCEPT, DROP, or `-` for a user-defined chain)"
                    ),
                ));
                None
            }
            None => {
                issues.push((
                    line.len(),
                    "chain declaration without a policy (`-` for a user-defined chain)".to_owned(),
                ));
                None
            }
        };
        let policy = match (builtin, policy, words.get(1)) {
            (true, None, Some(word)) if &*word.text == "-" => {
                issues.push((
                    word.start,
                    format!("built-in chain `{name}` needs a policy, ACCEPT or DROP"),
                ));
                None
            }
            (false, Some(_), Some(word)) => {
                issues.push((
                    word.start,
                    format!("user-defined chain `{name}` cannot have a policy"),
                ));
                None
            }
            (_, policy, _) => policy,
        };
        let counters = match words.get(2) {
            None => None,
            Some(word) => {
                let counters = parse_counters(&word.text);
                if counters.is_none() {
                    issues.push((
                        word.start,
                        format!("`{}` is not `[packets:bytes]`", word.text),
                    ));
                }
                counters
            }
        };
        if let Some(extra) = words.get(3) {
            issues.push((
                extra.start,
                format!("unexpected `{}` after the chain's counters", extra.text),
            ));
        }
        if !name.is_empty() {
            match table.by_name.get(name) {
                Some(&earlier) => {
                    let first = table.chains.get(earlier).map_or(0, |c| c.line);
                    issues.push((
                        words[0].start,
                        format!("chain `{name}` is declared twice (first at line {first})"),
                    ));
                }
                None => {
                    table.by_name.insert(name.to_owned(), table.chains.len());
                    table.chains.push(Chain {
                        name: name.to_owned(),
                        policy,
                        counters,
                        line: number,
                        rules: Vec::new(),
                    });
                }
            }
        }
        for (offset, message) in issues {
            self.issue_at(number, line, offset, message);
        }
    }

    /// `[packets:bytes] -A CHAIN ...`
    fn rule(&mut self, number: usize, line: &'a str) {
        let Open::Table(table) = &mut self.open else {
            return;
        };
        let words = &self.words;
        let (counters, command) = match parse_counters(&words[0].text) {
            Some(counters) => (Some(counters), 1),
            None if words[0].text.starts_with('[') => {
                let at = words[0].start;
                let text = words[0].text.to_string();
                self.issue_at(
                    number,
                    line,
                    at,
                    format!("`{text}` is not `[packets:bytes]`"),
                );
                return;
            }
            None => (None, 0),
        };
        let Some(word) = words.get(command) else {
            let at = line.len();
            self.issue_at(number, line, at, "counters without a rule");
            return;
        };
        if !matches!(&*word.text, "-A" | "--append") {
            let (at, text) = (word.start, word.text.to_string());
            self.issue_at(
                number,
                line,
                at,
                format!("`{text}`: iptables-save writes only `-A` rules; this line is skipped"),
            );
            return;
        }
        let Some(chain_word) = words.get(command + 1) else {
            let at = word.end;
            self.issue_at(number, line, at, "`-A` without a chain");
            return;
        };
        let chain_name: &'a str = match &chain_word.text {
            std::borrow::Cow::Borrowed(name) => name,
            std::borrow::Cow::Owned(_) => line
                .get(chain_word.start..chain_word.end)
                .unwrap_or_default(),
        };
        let chain = match self.last_chain {
            Some((last, index)) if last == chain_name => Some(index),
            _ => table.by_name.get(chain_name).copied(),
        };
        let Some(chain) = chain else {
            let at = chain_word.start;
            let message = format!(
                "chain `{chain_name}` was never declared in table `{}`; the rule is skipped",
                table.name
            );
            self.issue_at(number, line, at, message);
            return;
        };
        self.last_chain = Some((chain_name, chain));
        self.rule_issues.clear();
        let spec = self.rules.read(
            line,
            words,
            command + 2,
            &table.by_name,
            &mut self.rule_issues,
        );
        let Some(rules) = table.chains.get_mut(chain).map(|c| &mut c.rules) else {
            return;
        };
        rules.push(Rule {
            line: number,
            number: rules.len() + 1,
            text: line[word.start..].trim_end().to_owned(),
            counters: counters.or(spec.counters),
            matches: spec.matches,
            target: spec.target,
        });
        for index in 0..self.rule_issues.len() {
            let issue = &self.rule_issues[index];
            let at = self.words.get(issue.word).map_or(line.len(), |w| w.start);
            let message = issue.message.clone();
            self.issue_at(number, line, at, message);
        }
    }

    fn finish(mut self) -> Parsed<Ruleset> {
        if let Open::Table(table) = std::mem::replace(&mut self.open, Open::None) {
            self.issues.push(ParseIssue::at_line(
                table.line,
                format!(
                    "table `{}` has no COMMIT: the file ends first, so it may be missing rules",
                    table.name
                ),
            ));
            self.close(table);
        }
        if self.tables.is_empty() && !self.issues.is_empty() {
            return (None, self.issues);
        }
        (
            Some(Ruleset {
                tables: self.tables,
            }),
            self.issues,
        )
    }
}

#[cfg(test)]
mod tests;
