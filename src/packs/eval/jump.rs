//! The jump kind: a chain of an iptables or nftables table sends packets
//! on to another chain.

use std::path::Path;

use super::kinds::NamespaceDump;
use super::{Evaluator, Failure, Outcome, Stop};
use crate::diagnostic::Evidence;
use crate::packs::model::Jump;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::iptables::{self, Target};
use crate::snapshot::netns::nft;

impl Evaluator<'_> {
    /// Each of `jumps` is there: one failure for each that is not.
    pub(super) fn jump(&self, jumps: &[Jump], at: &NamespaceDump<'_>) -> Outcome {
        let &NamespaceDump { ctx, dir, dump, .. } = at;
        let mut failures = Vec::new();
        for jump in jumps {
            let family = self.optional_text(jump.family.as_ref(), ctx)?;
            let table = self.required_text(&jump.table, ctx)?;
            let chain = self.required_text(&jump.chain, ctx)?;
            let target = self.required_text(&jump.target, ctx)?;
            let wanted = JumpWanted {
                table: &table,
                chain: &chain,
                target: &target,
            };
            let failure = match &family {
                None => wanted.in_iptables(
                    dir,
                    dump.iptables
                        .as_ref()
                        .ok_or_else(|| at.not_collected(DumpFile::IptablesSave))?,
                )?,
                Some(family) => wanted.in_nftables(
                    dir,
                    family,
                    dump.nftables
                        .as_ref()
                        .ok_or_else(|| at.not_collected(DumpFile::NftRuleset))?,
                ),
            };
            failures.extend(failure);
        }
        Ok(failures)
    }
}

/// A jump a check wants: `chain` of `table` sends packets on to `target`.
struct JumpWanted<'a> {
    table: &'a str,
    chain: &'a str,
    target: &'a str,
}

impl JumpWanted<'_> {
    /// `Err` when the chain cannot be read whole.
    fn in_iptables(
        &self,
        dir: &Path,
        ruleset: &iptables::Ruleset,
    ) -> Result<Option<Failure>, Stop> {
        let file = dir.join(DumpFile::IptablesSave.name());
        let at = |line: usize| Evidence {
            column: Some(1),
            ..Evidence::line(file.clone(), line)
        };
        let expected = format!(
            "-A {} -j {} in the {} table",
            self.chain, self.target, self.table
        );
        let table = ruleset
            .tables
            .iter()
            .find(|t| t.name.as_str() == self.table);
        let missing = |chain: &str| Failure {
            actual: format!("no {chain} chain in the {} table", self.table),
            expected: expected.clone(),
            evidence: vec![table.map_or_else(|| Evidence::file(file.clone()), |t| at(t.line))],
        };
        let Some(from) = table.and_then(|t| t.chain(self.chain)) else {
            return Ok(Some(missing(self.chain)));
        };
        if table.and_then(|t| t.chain(self.target)).is_none() {
            return Ok(Some(missing(self.target)));
        }
        let rules = from.rules().map_err(|unread| Stop::Lacking {
            reason: unread.of(&file),
            file: DumpFile::IptablesSave,
        })?;
        let jumps = rules.iter().any(|rule| {
            matches!(&rule.target, Some(Target::Jump(c) | Target::Goto(c)) if &*c.name == self.target)
        });
        Ok((!jumps).then(|| Failure {
            actual: format!(
                "{} {} does not jump to {}",
                self.table, self.chain, self.target
            ),
            expected,
            evidence: vec![at(from.line)],
        }))
    }

    fn in_nftables(&self, dir: &Path, family: &str, ruleset: &nft::Ruleset) -> Option<Failure> {
        let file = dir.join(DumpFile::NftRuleset.name());
        let at = |(line, column): (usize, usize)| Evidence {
            column: Some(column),
            ..Evidence::line(file.clone(), line)
        };
        let table_name = format!("{family} {}", self.table);
        let expected = format!(
            "a rule of chain {} in table {table_name} that jumps or goes to {}",
            self.chain, self.target
        );
        let table = ruleset
            .tables
            .iter()
            .find(|t| t.family.as_str() == family && t.name == self.table);
        let missing = |chain: &str| Failure {
            actual: match table {
                None => format!("no table {table_name}"),
                Some(_) => format!("no chain {chain} in table {table_name}"),
            },
            expected: expected.clone(),
            evidence: vec![Evidence::file(file.clone())],
        };
        let Some(from) = table.and_then(|t| t.chain(self.chain)) else {
            return Some(missing(self.chain));
        };
        if table.and_then(|t| t.chain(self.target)).is_none() {
            return Some(missing(self.target));
        }
        let jumps = from
            .rules
            .iter()
            .any(|rule| rule.chain_targets().contains(&self.target));
        (!jumps).then(|| Failure {
            actual: format!(
                "chain {} of table {table_name} does not jump to {}",
                self.chain, self.target
            ),
            expected,
            evidence: vec![at(from.position)],
        })
    }
}
