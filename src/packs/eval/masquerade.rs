//! The masquerade kind: what nat POSTROUTING decides for traffic from a
//! pod's address, asked of the namespace's own rules (skoop's model of
//! netfilter): masqueraded to the node's address, or its source kept.

use std::net::IpAddr;

use super::kinds::NamespaceDump;
use super::{Evaluator, Failure, Outcome, Stop};
use crate::diagnostic::Evidence;
use crate::net::Family;
use crate::packs::host::{display, masquerade_decisions};
use crate::packs::model::Value;
use crate::packs::scope::Context;
use crate::snapshot::netns::DumpFile;

impl Evaluator<'_> {
    pub(super) fn masquerade(
        &self,
        from: &Value,
        (masqueraded, kept): (Option<&Value>, Option<&Value>),
        at: &NamespaceDump<'_>,
    ) -> Outcome {
        let &NamespaceDump {
            ctx,
            netns,
            dir,
            dump,
        } = at;
        let sources = self.addresses(from, ctx)?;
        let masqueraded = self.optional_addresses(masqueraded, ctx)?;
        let kept = self.optional_addresses(kept, ctx)?;
        // Where nat POSTROUTING is declared in the rules of the source's
        // family (ip6tables keeps IPv6's apart), else the file.
        let evidence = |src: IpAddr| {
            let (name, rules) = match Family::of(src) {
                Family::Ipv4 => (DumpFile::IptablesSave, dump.iptables.as_ref()),
                Family::Ipv6 => (DumpFile::Ip6tablesSave, dump.ip6tables.as_ref()),
            };
            let file = dir.join(name.name());
            let postrouting = rules
                .and_then(|rules| rules.tables.iter().find(|t| t.name.as_str() == "nat"))
                .and_then(|nat| nat.chain("POSTROUTING"))
                .map(|chain| chain.line);
            match postrouting {
                Some(line) => Evidence {
                    column: Some(1),
                    ..Evidence::line(file, line)
                },
                None => Evidence::file(file),
            }
        };
        let wanted: Vec<(IpAddr, bool)> = masqueraded
            .iter()
            .map(|&dst| (dst, true))
            .chain(kept.iter().map(|&dst| (dst, false)))
            .collect();
        let dsts: Vec<IpAddr> = wanted.iter().map(|(dst, _)| *dst).collect();
        let mut failures = Vec::new();
        for src in sources {
            let decisions =
                masquerade_decisions(netns, src, &dsts).map_err(|error| Stop::of_query(&error))?;
            for (&(dst, want), found) in wanted.iter().zip(decisions) {
                if want == found {
                    continue;
                }
                let decided = |masquerade: bool| {
                    if masquerade {
                        format!("traffic from {src} to {dst} is masqueraded")
                    } else {
                        format!("traffic from {src} to {dst} keeps its source address")
                    }
                };
                failures.push(Failure {
                    actual: decided(found),
                    expected: decided(want),
                    evidence: vec![evidence(src)],
                });
            }
        }
        Ok(failures)
    }

    /// The addresses a value holds: one address, a list of them, or `()`
    /// for none.
    fn addresses(&self, value: &Value, ctx: &Context) -> Result<Vec<IpAddr>, Stop> {
        self.items(value, ctx)?
            .iter()
            .map(|item| {
                let text = display(item);
                text.parse().map_err(|_| {
                    Stop::Unknown(format!(
                        "{:?} gave {text:?}, which is no address",
                        value.source
                    ))
                })
            })
            .collect()
    }

    fn optional_addresses(
        &self,
        value: Option<&Value>,
        ctx: &Context,
    ) -> Result<Vec<IpAddr>, Stop> {
        value.map_or_else(|| Ok(Vec::new()), |value| self.addresses(value, ctx))
    }
}
