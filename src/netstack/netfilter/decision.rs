//! Which rule decided: the rule (or chain policy) that gave an outcome its
//! verdict, kept as the parser read it — its ruleset, table, chain, number or
//! handle, and its place in the dump — so that everything downstream (the
//! walker's step, the packs' `hop.stopped`, the reports) names it without
//! looking it up again.

use std::fmt;
use std::path::PathBuf;

use super::{Hook, Step};
use crate::diagnostic::Evidence;
use crate::net::Family;
use crate::netstack::Tri;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::iptables;
use crate::snapshot::netns::nft;

/// The rulesets netfilter is read from, each its own dump file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RulesetKind {
    /// `iptables-save.txt`.
    Iptables,
    /// `ip6tables-save.txt`.
    Ip6tables,
    /// `nft-ruleset.json`.
    Nftables,
}

impl RulesetKind {
    /// The dump file the ruleset is read from.
    pub fn file(self) -> DumpFile {
        match self {
            RulesetKind::Iptables => DumpFile::IptablesSave,
            RulesetKind::Ip6tables => DumpFile::Ip6tablesSave,
            RulesetKind::Nftables => DumpFile::NftRuleset,
        }
    }

    /// The iptables ruleset of `family`'s packets.
    pub fn iptables(family: Family) -> RulesetKind {
        match family {
            Family::Ipv4 => RulesetKind::Iptables,
            Family::Ipv6 => RulesetKind::Ip6tables,
        }
    }
}

/// A rule, or a chain's policy, that decided a packet's fate, where the
/// dump has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    pub ruleset: RulesetKind,
    pub hook: Hook,
    /// `filter`; for nftables the family and name, `inet kube-proxy`.
    pub table: String,
    pub chain: String,
    /// The rule's 1-based position in its chain; `None` for the policy.
    pub number: Option<usize>,
    /// An nftables rule's handle, where the dump gave one.
    pub handle: Option<u64>,
    /// The policy that decided (`DROP`, `drop`), when no rule did.
    pub policy: Option<&'static str>,
    /// 1-based line of the rule (of the chain's declaration, for a
    /// policy) in the dump; `None` where the chain is not declared.
    pub line: Option<usize>,
    /// 1-based column, where a line holds many (nft's one-line JSON).
    pub column: Option<usize>,
    /// The rule as its tool writes it (`-A FORWARD -j DROP`, `reject`), or
    /// the policy (`:FORWARD DROP`, `chain X { policy drop; }`).
    pub text: String,
}

impl RuleRef {
    /// For messages: `rule 3 of chain X (table filter, FORWARD)`, `the drop
    /// policy of chain input (nftables table inet t, INPUT)`.
    pub fn description(&self) -> String {
        let (hook, chain, table) = (self.hook, &self.chain, &self.table);
        let table = match self.ruleset {
            RulesetKind::Iptables => format!("table {table}"),
            RulesetKind::Ip6tables => format!("ip6tables table {table}"),
            RulesetKind::Nftables => format!("nftables table {table}"),
        };
        match (self.policy, self.ruleset) {
            (Some(policy), _) => format!("the {policy} policy of chain {chain} ({table}, {hook})"),
            (None, RulesetKind::Iptables | RulesetKind::Ip6tables) => format!(
                "rule {} of chain {chain} ({table}, {hook})",
                self.number.unwrap_or_default()
            ),
            (None, RulesetKind::Nftables) => {
                let handle = self
                    .handle
                    .map_or_else(String::new, |h| format!(" (handle {h})"));
                format!("the rule{handle} of chain {chain} ({table}, {hook})")
            }
        }
    }
}

impl RuleRef {
    /// Where the rule is, in `file` (the ruleset's dump in a snapshot).
    pub fn place(&self, file: impl Into<PathBuf>) -> Evidence {
        Evidence {
            line: self.line,
            column: self.column.filter(|_| self.line.is_some()),
            ..Evidence::file(file)
        }
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description())
    }
}

/// The rule or chain policy that gave a trace its verdict: the last rule
/// that matched, or the policy that ended it. `None` for a trace that no
/// rule decided.
pub fn deciding_rule(trace: &[Step<'_>]) -> Option<RuleRef> {
    trace.iter().rev().find_map(|step| match step {
        Step::Rule {
            hook,
            family,
            table,
            chain,
            rule,
            matched: Tri::True,
            ..
        } => Some(RuleRef {
            ruleset: RulesetKind::iptables(*family),
            hook: *hook,
            table: table.to_string(),
            chain: chain.to_string(),
            number: Some(rule.number),
            handle: None,
            policy: None,
            line: Some(rule.line),
            column: None,
            text: rule.text.to_string(),
        }),
        Step::NftRule {
            hook,
            table,
            chain,
            rule,
            matched: Tri::True,
            ..
        } => Some(RuleRef {
            ruleset: RulesetKind::Nftables,
            hook: *hook,
            table: table.to_string(),
            chain: chain.to_string(),
            number: nft_rule_number(table, chain, rule),
            handle: rule.handle,
            policy: None,
            line: Some(rule.position.0),
            column: Some(rule.position.1),
            text: rule.text(),
        }),
        Step::Policy {
            hook,
            family,
            table,
            chain,
            policy,
            line,
        } => {
            let policy = match policy {
                iptables::Policy::Accept => "ACCEPT",
                iptables::Policy::Drop => "DROP",
            };
            Some(RuleRef {
                ruleset: RulesetKind::iptables(*family),
                hook: *hook,
                table: table.to_string(),
                chain: chain.to_string(),
                number: None,
                handle: None,
                policy: Some(policy),
                line: *line,
                column: None,
                text: format!(":{chain} {policy}"),
            })
        }
        Step::NftPolicy {
            hook,
            table,
            chain,
            policy,
        } => {
            let policy = match policy {
                nft::Policy::Accept => "accept",
                nft::Policy::Drop => "drop",
            };
            let declared = table.chain(chain);
            Some(RuleRef {
                ruleset: RulesetKind::Nftables,
                hook: *hook,
                table: table.to_string(),
                chain: chain.to_string(),
                number: None,
                handle: declared.and_then(|c| c.handle),
                policy: Some(policy),
                line: declared.map(|c| c.position.0),
                column: declared.map(|c| c.position.1),
                text: format!("chain {chain} {{ policy {policy}; }}"),
            })
        }
        _ => None,
    })
}

/// An nftables rule's 1-based position in its chain.
fn nft_rule_number(table: &nft::Table, chain: &str, rule: &nft::Rule) -> Option<usize> {
    let chain = table.chain(chain)?;
    let index = chain.rules.iter().position(|r| std::ptr::eq(r, rule))?;
    Some(index + 1)
}

/// The ruleset of the last rule a trace tested: where to look for why it
/// stopped (iptables when it tested none).
pub fn ruleset_of(trace: &[Step<'_>]) -> RulesetKind {
    let last = trace.iter().rev().find_map(|step| match step {
        Step::Rule { family, .. } | Step::Policy { family, .. } => {
            Some(RulesetKind::iptables(*family))
        }
        Step::NftRule { .. } | Step::NftPolicy { .. } => Some(RulesetKind::Nftables),
        _ => None,
    });
    last.unwrap_or(RulesetKind::Iptables)
}
