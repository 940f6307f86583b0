//! The rule kind: an iptables rule of a chain with its target, text it
//! holds, and its place among the chain's rules (kindnetd's MASQUERADE
//! last; a jump that must come before a catch-all).

use ipnet::IpNet;

use super::kinds::NamespaceDump;
use super::{Evaluator, Failure, Outcome, Stop};
use crate::diagnostic::Evidence;
use crate::net::Family;
use crate::packs::model::{RuleCheck, Value};
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::iptables::{Match, Rule, Ruleset};

/// Where the rule must be among its chain's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    /// 1-based.
    Number(usize),
    Last,
}

impl Evaluator<'_> {
    /// Each rule the check wants (one per item of a `holding` list): one
    /// failure for each that is not there.
    pub(super) fn rule(&self, check: &RuleCheck, at: &NamespaceDump<'_>) -> Outcome {
        let &NamespaceDump { ctx, dump, .. } = at;
        let file = match check.family {
            Family::Ipv4 => DumpFile::IptablesSave,
            Family::Ipv6 => DumpFile::Ip6tablesSave,
        };
        let ruleset = match check.family {
            Family::Ipv4 => dump.iptables.as_ref(),
            Family::Ipv6 => dump.ip6tables.as_ref(),
        }
        .ok_or_else(|| at.not_collected(file))?;
        let mut failures = Vec::new();
        for rule in &check.rules {
            let each = |value: Option<&Value>| -> Result<Vec<Option<String>>, Stop> {
                Ok(match value {
                    None => vec![None],
                    Some(value) => self
                        .required_texts(value, ctx)?
                        .into_iter()
                        .map(Some)
                        .collect(),
                })
            };
            let holdings = each(rule.holding.as_ref())?;
            let destinations = each(rule.destination.as_ref())?
                .into_iter()
                .map(|text| {
                    text.map(|text| {
                        text.parse::<IpNet>().map_err(|_| {
                            Stop::Unknown(format!("rule destination {text:?} is no network"))
                        })
                    })
                    .transpose()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let position = match self.optional_text(rule.position.as_ref(), ctx)? {
                None => None,
                Some(text) if text == "last" => Some(Position::Last),
                Some(text) => match text.parse::<usize>() {
                    Ok(n) if n >= 1 => Some(Position::Number(n)),
                    _ => {
                        return Err(Stop::Unknown(format!(
                            "rule position {text:?} is neither a number from 1 nor `last`"
                        )));
                    }
                },
            };
            for holding in &holdings {
                for destination in &destinations {
                    let wanted = RuleWanted {
                        table: self.required_text(&rule.table, ctx)?,
                        chain: self.required_text(&rule.chain, ctx)?,
                        target: self.required_text(&rule.target, ctx)?,
                        holding: holding.clone(),
                        destination: *destination,
                        position,
                    };
                    failures.extend(wanted.in_iptables(at, file, ruleset)?);
                }
            }
        }
        Ok(failures)
    }
}

/// One rule, its fields evaluated.
struct RuleWanted {
    table: String,
    chain: String,
    target: String,
    holding: Option<String>,
    destination: Option<IpNet>,
    position: Option<Position>,
}

impl RuleWanted {
    /// `Err` when the chain cannot be read whole.
    fn in_iptables(
        &self,
        at: &NamespaceDump<'_>,
        file: DumpFile,
        ruleset: &Ruleset,
    ) -> Result<Option<Failure>, Stop> {
        let RuleWanted {
            table,
            chain,
            target,
            holding,
            destination,
            position,
        } = self;
        let path = at.dir.join(file.name());
        let line = |line: usize| Evidence {
            column: Some(1),
            ..Evidence::line(path.clone(), line)
        };
        let mut expected = format!("-A {chain}");
        if let Some(destination) = destination {
            expected.push_str(&format!(" -d (a network holding {destination})"));
        }
        if let Some(holding) = holding {
            expected.push_str(&format!(" {holding}"));
        }
        expected.push_str(&format!(" -j {target} in the {table} table"));
        match position {
            Some(Position::Number(n)) => expected.push_str(&format!(", rule {n} of the chain")),
            Some(Position::Last) => expected.push_str(", the chain's last rule"),
            None => {}
        }
        let failure = |actual: String, evidence: Evidence| {
            Ok(Some(Failure {
                actual,
                expected: expected.clone(),
                evidence: vec![evidence],
            }))
        };
        let found = ruleset.tables.iter().find(|t| t.name.as_str() == table);
        let Some(declared) = found.and_then(|t| t.chain(chain)) else {
            let evidence = found.map_or_else(|| Evidence::file(path.clone()), |t| line(t.line));
            return failure(format!("no {chain} chain in the {table} table"), evidence);
        };
        let rules = declared.rules().map_err(|unread| Stop::Lacking {
            reason: unread.of(&path),
            file,
        })?;
        let with_target: Vec<&Rule> = rules
            .iter()
            .filter(|rule| rule.target.as_ref().is_some_and(|t| t.name() == target))
            .collect();
        let holds = |rule: &&&Rule| {
            holding
                .as_ref()
                .is_none_or(|text| rule.text.as_str().contains(text.as_str()))
                && destination.is_none_or(|wanted| {
                    rule.matches.iter().any(|m| {
                        matches!(m, Match::Destination(d) if !d.invert && d.value.contains(&wanted))
                    })
                })
        };
        let candidates: Vec<&Rule> = with_target.iter().filter(holds).copied().collect();
        let count = rules.len();
        let placed = |rule: &Rule| match position {
            None => true,
            Some(Position::Number(n)) => rule.number == *n,
            Some(Position::Last) => rule.number == count,
        };
        if candidates.iter().any(|rule| placed(rule)) {
            return Ok(None);
        }
        match (candidates.first(), with_target.first()) {
            (Some(rule), _) => failure(
                format!(
                    "{table} {chain}'s rule {} of {count} is `{}`",
                    rule.number,
                    rule.text.as_str()
                ),
                line(rule.line),
            ),
            (None, Some(rule)) => failure(
                format!(
                    "{table} {chain} sends to {target} only by `{}`",
                    rule.text.as_str()
                ),
                line(rule.line),
            ),
            (None, None) => failure(
                format!("{table} {chain} has no rule -j {target}"),
                line(declared.line),
            ),
        }
    }
}
