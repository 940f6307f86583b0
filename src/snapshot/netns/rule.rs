//! `ip -j rule show`: the policy routing rules, tried in priority order to
//! pick the routing table a packet is looked up in.

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;
use serde::Deserialize;

use super::json;
use super::route::{RouteTable, Tos};
use crate::net::Protocol;
use crate::snapshot::problem::Parsed;

/// One policy routing rule: selectors, all of which must match (or, with
/// `not`, not all), and the action taken when they do.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawRule")]
pub struct PolicyRule {
    pub priority: u32,
    /// The selectors are inverted (`not`).
    pub not: bool,
    /// Source prefix; `None` is `from all`.
    pub src: Option<IpNet>,
    /// Destination prefix; `None` is `to all`.
    pub dst: Option<IpNet>,
    /// Incoming interface (`iif`; `lo` for locally generated packets).
    pub iif: Option<String>,
    /// The `iif` device does not exist, so the rule matches nothing.
    pub iif_detached: bool,
    pub oif: Option<String>,
    pub oif_detached: bool,
    pub fwmark: Option<Fwmark>,
    pub tos: Option<Tos>,
    pub uidrange: Option<RangeInclusive<u32>>,
    /// The IP protocol it matches (`ipproto`).
    pub ipproto: Option<Protocol>,
    pub sport: Option<RangeInclusive<u16>>,
    pub dport: Option<RangeInclusive<u16>>,
    /// A lookup result is ignored when its prefix is this long or shorter
    /// (`suppress_prefixlength 0` ignores default routes).
    pub suppress_prefixlength: Option<u32>,
    /// A lookup result is ignored when its device is in this group.
    pub suppress_ifgroup: Option<String>,
    pub action: RuleAction,
}

/// The packet's mark under a mask: the rule matches when
/// `packet_mark & mask == mark`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fwmark {
    pub mark: u32,
    /// All ones unless given; iproute2 prints it only then.
    pub mask: u32,
}

/// What a matching rule does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleAction {
    /// Look the packet up in this table (`lookup`, the kernel's `to_tbl`);
    /// if no route there matches, go on with the next rule.
    Lookup(RouteTable),
    /// Look the packet up in the table of the VRF device it is on (`l3mdev`).
    L3mdev,
    /// Go on with the rule of this priority. `unresolved`: there is none.
    Goto {
        priority: u32,
        unresolved: bool,
    },
    /// Do nothing and go on with the next rule.
    Nop,
    Blackhole,
    Unreachable,
    Prohibit,
    /// An action this version of skoop does not know, kept as printed.
    Other(String),
}

#[derive(Deserialize)]
struct RawRule {
    priority: u32,
    #[serde(default, deserialize_with = "json::present")]
    not: bool,
    src: Option<String>,
    srclen: Option<u8>,
    dst: Option<String>,
    dstlen: Option<u8>,
    iif: Option<String>,
    #[serde(default, deserialize_with = "json::present")]
    iif_detached: bool,
    oif: Option<String>,
    #[serde(default, deserialize_with = "json::present")]
    oif_detached: bool,
    fwmark: Option<String>,
    fwmask: Option<String>,
    tos: Option<Tos>,
    uid_start: Option<u32>,
    uid_end: Option<u32>,
    ipproto: Option<String>,
    sport: Option<u16>,
    sport_start: Option<u16>,
    sport_end: Option<u16>,
    dport: Option<u16>,
    dport_start: Option<u16>,
    dport_end: Option<u16>,
    #[serde(default, deserialize_with = "json::present")]
    l3mdev: bool,
    table: Option<RouteTable>,
    goto: Option<u32>,
    #[serde(default, deserialize_with = "json::present")]
    unresolved: bool,
    #[serde(default, deserialize_with = "json::present")]
    nop: bool,
    action: Option<String>,
    suppress_prefixlen: Option<u32>,
    suppress_ifgroup: Option<String>,
}

impl TryFrom<RawRule> for PolicyRule {
    type Error = String;

    fn try_from(raw: RawRule) -> Result<Self, String> {
        let fwmark = match (raw.fwmark.as_deref(), raw.fwmask.as_deref()) {
            (None, None) => None,
            (None, Some(_)) => return Err("fwmask without fwmark".into()),
            (Some(mark), mask) => Some(Fwmark {
                mark: json::parse_number(mark)?,
                mask: mask.map_or(Ok(u32::MAX), json::parse_number)?,
            }),
        };
        let uidrange = match (raw.uid_start, raw.uid_end) {
            (Some(start), Some(end)) => Some(start..=end),
            (None, None) => None,
            _ => return Err("uid_start and uid_end come together".into()),
        };
        Ok(PolicyRule {
            priority: raw.priority,
            not: raw.not,
            src: selector_prefix("src", raw.src.as_deref(), raw.srclen)?,
            dst: selector_prefix("dst", raw.dst.as_deref(), raw.dstlen)?,
            iif: raw.iif,
            iif_detached: raw.iif_detached,
            oif: raw.oif,
            oif_detached: raw.oif_detached,
            fwmark,
            tos: raw.tos,
            uidrange,
            // ip names the protocol as /etc/protocols does, or by number.
            ipproto: raw
                .ipproto
                .map(|word| {
                    Protocol::parse(&word)
                        .ok_or_else(|| format!("ipproto {word:?} is not a protocol name or number"))
                })
                .transpose()?,
            sport: port_range("sport", raw.sport, raw.sport_start, raw.sport_end)?,
            dport: port_range("dport", raw.dport, raw.dport_start, raw.dport_end)?,
            suppress_prefixlength: raw.suppress_prefixlen,
            suppress_ifgroup: raw.suppress_ifgroup,
            action: action(
                raw.goto,
                raw.unresolved,
                raw.nop,
                raw.action,
                raw.table,
                raw.l3mdev,
            )?,
        })
    }
}

/// `"src": "all"`, or an address with its length in `srclen` (left out for
/// a host).
fn selector_prefix(
    field: &str,
    address: Option<&str>,
    len: Option<u8>,
) -> Result<Option<IpNet>, String> {
    let address = match address {
        None | Some("all") if len.is_none() => return Ok(None),
        None | Some("all") => return Err(format!("{field}len without an address in {field}")),
        Some(address) => address
            .parse::<IpAddr>()
            .map_err(|_| format!("{field} {address:?} is neither all nor an address"))?,
    };
    match len {
        None => Ok(Some(IpNet::from(address))),
        Some(len) => IpNet::new(address, len)
            .map(Some)
            .map_err(|_| format!("{field}len {len} is too long for {address}")),
    }
}

/// A single port (`"dport": 80`) or a range (`"dport_start"`, `"dport_end"`).
fn port_range(
    field: &str,
    port: Option<u16>,
    start: Option<u16>,
    end: Option<u16>,
) -> Result<Option<RangeInclusive<u16>>, String> {
    match (port, start, end) {
        (None, None, None) => Ok(None),
        (Some(port), None, None) => Ok(Some(port..=port)),
        (None, Some(start), Some(end)) => Ok(Some(start..=end)),
        _ => Err(format!(
            "{field} is either one port or a {field}_start and {field}_end pair"
        )),
    }
}

/// The kernel's action decides: a table only matters to a lookup rule.
fn action(
    goto: Option<u32>,
    unresolved: bool,
    nop: bool,
    action: Option<String>,
    table: Option<RouteTable>,
    l3mdev: bool,
) -> Result<RuleAction, String> {
    if let Some(priority) = goto {
        return Ok(RuleAction::Goto {
            priority,
            unresolved,
        });
    }
    if nop {
        return Ok(RuleAction::Nop);
    }
    if let Some(action) = action {
        return Ok(match action.as_str() {
            "blackhole" => RuleAction::Blackhole,
            "unreachable" => RuleAction::Unreachable,
            "prohibit" => RuleAction::Prohibit,
            _ => RuleAction::Other(action),
        });
    }
    match (table, l3mdev) {
        (Some(table), _) => Ok(RuleAction::Lookup(table)),
        (None, true) => Ok(RuleAction::L3mdev),
        (None, false) => {
            Err("rule has no action: none of table, goto, nop, action or l3mdev".into())
        }
    }
}

pub fn parse(text: &str) -> Parsed<Vec<PolicyRule>> {
    json::parse_array(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = include_str!("../../../tests/fixtures/dumps/node/ip-rule.json");
    const POD: &str = include_str!("../../../tests/fixtures/dumps/pod/ip-rule.json");

    fn rules(text: &str) -> Vec<PolicyRule> {
        let (rules, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        rules.expect("the fixture is an array")
    }

    fn at(rules: &[PolicyRule], priority: u32) -> &PolicyRule {
        rules
            .iter()
            .find(|r| r.priority == priority)
            .expect("rule in fixture")
    }

    fn net(text: &str) -> IpNet {
        text.parse().expect("a prefix")
    }

    #[test]
    fn default_rules_look_up_local_main_and_default() {
        for text in [NODE, POD] {
            let rules = rules(text);
            let defaults: Vec<_> = rules
                .iter()
                .filter(|r| [0, 32766, 32767].contains(&r.priority))
                .map(|r| (r.priority, r.src, r.action.clone()))
                .collect();
            assert_eq!(
                defaults,
                [
                    (0, None, RuleAction::Lookup(RouteTable::Local)),
                    (32766, None, RuleAction::Lookup(RouteTable::Main)),
                    (32767, None, RuleAction::Lookup(RouteTable::Default)),
                ]
            );
        }
    }

    #[test]
    fn source_and_destination_prefixes_are_read_with_their_lengths() {
        let rules = rules(NODE);
        let rule = at(&rules, 100);
        assert_eq!(rule.src, Some(net("10.244.0.0/16")));
        assert_eq!(rule.dst, Some(net("10.50.0.0/16")));
        assert_eq!(rule.action, RuleAction::Lookup(RouteTable::Id(100)));
        assert_eq!(at(&rules, 183).src, Some(net("10.1.2.3/32")));
    }

    #[test]
    fn interfaces_and_detached_interfaces_are_kept() {
        let rules = rules(NODE);
        assert_eq!(at(&rules, 110).iif.as_deref(), Some("eth0"));
        assert_eq!(at(&rules, 120).oif.as_deref(), Some("eth0"));
        assert!(!at(&rules, 110).iif_detached);
        let ghost = at(&rules, 184);
        assert_eq!(ghost.iif.as_deref(), Some("ghost0"));
        assert!(ghost.iif_detached);
    }

    #[test]
    fn fwmark_mask_is_all_ones_unless_given() {
        let rules = rules(NODE);
        assert_eq!(
            at(&rules, 130).fwmark,
            Some(Fwmark {
                mark: 0x200,
                mask: 0xf00
            })
        );
        assert_eq!(
            at(&rules, 131).fwmark,
            Some(Fwmark {
                mark: 0x4000,
                mask: u32::MAX
            })
        );
    }

    #[test]
    fn not_inverts_the_selectors() {
        let rules = rules(NODE);
        let rule = at(&rules, 140);
        assert!(rule.not);
        assert_eq!(rule.src, Some(net("10.0.0.0/8")));
        let rule = at(&rules, 141);
        assert!(rule.not);
        assert_eq!(rule.fwmark, Some(Fwmark { mark: 1, mask: 1 }));
        assert!(!at(&rules, 100).not);
    }

    #[test]
    fn goto_knows_whether_its_target_exists() {
        let rules = rules(NODE);
        let goto = |priority, unresolved| RuleAction::Goto {
            priority,
            unresolved,
        };
        assert_eq!(at(&rules, 150).action, goto(200, false));
        assert_eq!(at(&rules, 151).action, goto(300, true));
    }

    #[test]
    fn suppressors_belong_to_lookup_rules() {
        let rules = rules(NODE);
        let rule = at(&rules, 160);
        assert_eq!(rule.suppress_prefixlength, Some(0));
        assert_eq!(rule.action, RuleAction::Lookup(RouteTable::Main));
        assert_eq!(at(&rules, 161).suppress_ifgroup.as_deref(), Some("5"));
    }

    #[test]
    fn terminal_actions_and_nop_are_typed() {
        let rules = rules(NODE);
        assert_eq!(at(&rules, 170).action, RuleAction::Blackhole);
        assert_eq!(at(&rules, 170).src, Some(net("10.99.0.0/16")));
        assert_eq!(at(&rules, 171).action, RuleAction::Unreachable);
        assert_eq!(at(&rules, 172).action, RuleAction::Prohibit);
        assert_eq!(at(&rules, 185).action, RuleAction::L3mdev);
        assert_eq!(at(&rules, 190).action, RuleAction::Nop);
    }

    #[test]
    fn tos_uid_protocol_and_port_selectors_are_read() {
        let rules = rules(NODE);
        assert_eq!(at(&rules, 180).tos, Some(Tos::Value(0x10)));
        assert_eq!(at(&rules, 181).uidrange, Some(1000..=2000));
        let ports = at(&rules, 182);
        assert_eq!(ports.ipproto, Some(Protocol::Tcp));
        assert_eq!(ports.sport, Some(1000..=2000));
        assert_eq!(ports.dport, Some(80..=80));
    }

    #[test]
    fn every_rule_of_the_node_is_read_in_priority_order() {
        let priorities: Vec<_> = rules(NODE).iter().map(|r| r.priority).collect();
        assert_eq!(priorities.len(), 25);
        assert!(priorities.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn malformed_rules_are_issues_and_the_others_are_kept() {
        let text = concat!(
            r#"[{"priority":0,"src":"all","table":"local"},"#,
            r#"{"priority":1,"src":"10.0.0.0","srclen":40,"table":"main"},"#,
            r#"{"priority":2,"src":"all","fwmark":"0xzz","table":"main"},"#,
            r#"{"priority":3,"src":"all"},"#,
            r#"{"priority":"4","src":"all","table":"main"},"#,
            r#"{"priority":5,"src":"all","action":"teleport"}]"#
        );
        let (rules, issues) = parse(text);
        let kept: Vec<_> = rules
            .expect("an array")
            .into_iter()
            .map(|r| (r.priority, r.action))
            .collect();
        assert_eq!(
            kept,
            [
                (0, RuleAction::Lookup(RouteTable::Local)),
                (5, RuleAction::Other("teleport".into()))
            ]
        );
        let messages: Vec<_> = issues.iter().map(|i| i.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "element 2 of the array: srclen 40 is too long for 10.0.0.0",
                r#"element 3 of the array: "0xzz" is not a 32-bit number"#,
                "element 4 of the array: rule has no action: none of table, goto, nop, action or l3mdev",
                r#"element 5 of the array: invalid type: string "4", expected u32"#,
            ]
        );
    }
}
