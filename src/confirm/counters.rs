//! The kernel's counters in one network namespace, read before and after a
//! probe: every iptables rule's and built-in chain policy's packet counter
//! (`iptables-save -c`, read-only), the kernel's SNMP counters (`nstat
//! -asz`, which neither resets them nor writes its history file), and after
//! the probe conntrack's entries for it (`conntrack -L`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::probe::Probe;
use crate::collect::shell::NodeShell;
use crate::net::{Family, Protocol};
use crate::netstack::netfilter::RulesetKind;
use crate::snapshot::netns::iptables::{self, Policy, Target};
use crate::snapshot::netns::nft;

/// How long one read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The most conntrack entries kept of one namespace.
const MAX_CONNTRACK: usize = 5;

/// The SNMP counters that say where a packet went or why it stopped, with
/// what they count; whether each is a drop (the packet stops there).
pub const NSTAT: &[(&str, bool, &str)] = &[
    ("IpForwDatagrams", false, "forwarded"),
    ("Ip6OutForwDatagrams", false, "forwarded"),
    ("IpOutNoRoutes", true, "no route to send it by"),
    ("Ip6OutNoRoutes", true, "no route to send it by"),
    ("IpExtInNoRoutes", true, "no route for it as it arrived"),
    ("Ip6InNoRoutes", true, "no route for it as it arrived"),
    (
        "IpInAddrErrors",
        true,
        "not for this namespace and not forwarded (forwarding off, or a bad address)",
    ),
    (
        "Ip6InAddrErrors",
        true,
        "not for this namespace and not forwarded",
    ),
    ("IpInDiscards", true, "discarded on input"),
    ("Ip6InDiscards", true, "discarded on input"),
    ("IpOutDiscards", true, "discarded on output"),
    ("Ip6OutDiscards", true, "discarded on output"),
    (
        "IpFragFails",
        true,
        "too big to send and DF set (fragmentation needed)",
    ),
    ("Ip6FragFails", true, "too big to send"),
    (
        "IcmpOutDestUnreachs",
        false,
        "ICMP destination unreachable sent",
    ),
    (
        "IcmpInDestUnreachs",
        false,
        "ICMP destination unreachable received",
    ),
    (
        "Icmp6OutDestUnreachs",
        false,
        "ICMPv6 destination unreachable sent",
    ),
    (
        "Icmp6InDestUnreachs",
        false,
        "ICMPv6 destination unreachable received",
    ),
    ("Icmp6OutPktTooBigs", false, "ICMPv6 packet too big sent"),
    ("IcmpInEchos", false, "echo requests received"),
    ("Icmp6InEchos", false, "echo requests received"),
    (
        "TcpPassiveOpens",
        false,
        "connections accepted by a listener",
    ),
    ("TcpOutRsts", false, "TCP resets sent"),
    (
        "TcpExtListenDrops",
        true,
        "dropped by a listener (its queue full)",
    ),
    (
        "UdpInDatagrams",
        false,
        "UDP datagrams delivered to a socket",
    ),
    (
        "Udp6InDatagrams",
        false,
        "UDP datagrams delivered to a socket",
    ),
    (
        "UdpNoPorts",
        true,
        "UDP datagrams for a port nothing listens on",
    ),
    (
        "Udp6NoPorts",
        true,
        "UDP datagrams for a port nothing listens on",
    ),
];

/// The counters that say a datagram reached a socket.
pub const UDP_DELIVERED: [&str; 2] = ["UdpInDatagrams", "Udp6InDatagrams"];
/// The counters that say a datagram found no socket: where one moved, the
/// delivered counters' move is another datagram's (a node's VXLAN is a
/// UDP socket of its own).
pub const UDP_REFUSED: [&str; 2] = ["UdpNoPorts", "Udp6NoPorts"];

/// One namespace's counters at one moment.
#[derive(Debug, Default)]
pub struct Reading {
    pub rules: Vec<RuleCount>,
    pub nstat: BTreeMap<String, u64>,
    /// What could not be read, in words.
    pub problems: Vec<String>,
}

/// An iptables rule (or a built-in chain's policy), or an nftables rule
/// with a `counter`, and its packet counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCount {
    pub ruleset: RulesetKind,
    /// `filter`; for nftables the family and name, `inet kube-proxy`, as
    /// a [`RuleRef`](crate::netstack::netfilter::RuleRef) names it.
    pub table: String,
    pub chain: String,
    /// An iptables rule's position in its chain; `None` for the chain's
    /// policy, and for nftables.
    pub number: Option<usize>,
    /// An nftables rule's handle.
    pub handle: Option<u64>,
    /// The rule as written (`-A FORWARD -j DROP`), or the policy
    /// (`:FORWARD DROP`).
    pub text: String,
    pub packets: u64,
    /// A packet it counts stops here: DROP, REJECT, or a DROP policy.
    pub drops: bool,
}

/// The tool that saves `family`'s iptables rules.
pub fn iptables_save(family: Family) -> &'static str {
    match family {
        Family::Ipv4 => "iptables-save",
        Family::Ipv6 => "ip6tables-save",
    }
}

/// Reads the counters of the namespace `enter` leads to.
pub async fn read(shell: &NodeShell, enter: &[String], family: Family) -> Reading {
    let mut reading = Reading::default();
    let save = iptables_save(family);
    match run(shell, enter, &[save, "-c"]).await {
        Ok(text) => reading.rules = rule_counts(&text),
        Err(why) => reading.problems.push(format!("{save} -c: {why}")),
    }
    // nft's own rules (kube-proxy's nftables mode, Calico's nftables
    // dataplane); iptables-nft's tables are read above.
    match run(shell, enter, &["nft", "-j", "list", "ruleset"]).await {
        Ok(text) => reading.rules.extend(nft_counts(&text)),
        Err(why) => reading.problems.push(format!("nft -j list ruleset: {why}")),
    }
    match run(shell, enter, &["nstat", "-asz"]).await {
        Ok(text) => reading.nstat = nstat(&text),
        Err(why) => reading.problems.push(format!("nstat -asz: {why}")),
    }
    reading
}

/// The conntrack entries of `probe` in the namespace `enter` leads to, as
/// `conntrack -L` prints them (a handful at most); `Err` says why none
/// could be read.
pub async fn conntrack(
    shell: &NodeShell,
    enter: &[String],
    probe: &Probe,
) -> Result<Vec<String>, String> {
    let family = match Family::of(probe.dst) {
        Family::Ipv4 => "ipv4",
        Family::Ipv6 => "ipv6",
    };
    let protocol = match probe.protocol {
        Protocol::Icmpv6 => "icmpv6".to_string(),
        other => other.to_string(),
    };
    let mut argv = vec!["conntrack", "-L", "-f", family, "-p", &protocol];
    let sport = probe.sport.map(|port| port.to_string());
    if let Some(sport) = &sport {
        argv.extend(["--sport", sport]);
    }
    let text = run(shell, enter, &argv).await?;
    Ok(text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .take(MAX_CONNTRACK)
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect())
}

/// Runs `argv`; its standard output, or why there is none.
pub(super) async fn run(
    shell: &NodeShell,
    enter: &[String],
    argv: &[&str],
) -> Result<String, String> {
    let argv: Vec<String> = argv.iter().map(|w| w.to_string()).collect();
    match shell.run(enter, &argv, None, READ_TIMEOUT).await {
        Ok(output) if output.success() => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        Ok(output) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            Err(match stderr.trim() {
                "" => output.status,
                said => format!("{said} ({})", output.status),
            })
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Every rule's and built-in chain policy's packet counter in an
/// `iptables-save -c` dump, read by the snapshot's own parser.
pub fn rule_counts(text: &str) -> Vec<RuleCount> {
    let mut counts = Vec::new();
    let (Some(ruleset), _) = iptables::parse(text) else {
        return counts;
    };
    for table in &ruleset.tables {
        for chain in &table.chains {
            if let (Some(policy), Some(counters)) = (chain.policy, chain.counters) {
                let word = match policy {
                    Policy::Accept => "ACCEPT",
                    Policy::Drop => "DROP",
                };
                counts.push(RuleCount {
                    ruleset: RulesetKind::Iptables,
                    table: table.name.to_string(),
                    chain: chain.name.to_string(),
                    number: None,
                    handle: None,
                    text: format!(":{} {word}", chain.name),
                    packets: counters.packets,
                    drops: policy == Policy::Drop,
                });
            }
            for rule in chain.rules_read() {
                let Some(counters) = rule.counters else {
                    continue;
                };
                counts.push(RuleCount {
                    ruleset: RulesetKind::Iptables,
                    table: table.name.to_string(),
                    chain: chain.name.to_string(),
                    number: Some(rule.number),
                    handle: None,
                    text: rule.text.to_string(),
                    packets: counters.packets,
                    drops: matches!(rule.target, Some(Target::Drop | Target::Reject(_))),
                });
            }
        }
    }
    counts
}

/// Every nftables rule with a `counter` and what it counted, in an `nft -j
/// list ruleset` dump, read by the snapshot's own parser. iptables-nft's
/// tables are left out: `iptables-save -c` reads them.
pub fn nft_counts(text: &str) -> Vec<RuleCount> {
    let (Some(ruleset), _) = nft::parse(text) else {
        return Vec::new();
    };
    let mut counts = Vec::new();
    let iptables_nft = |table: &nft::Table| {
        matches!(table.family, nft::Family::Ip | nft::Family::Ip6)
            && iptables::TableName::parse(&table.name).is_some()
    };
    for table in ruleset.tables.iter().filter(|t| !iptables_nft(t)) {
        for chain in &table.chains {
            for rule in &chain.rules {
                let Some(packets) = rule.packets else {
                    continue;
                };
                let drops = rule.statements.iter().any(|statement| {
                    matches!(
                        statement,
                        nft::Statement::Verdict(nft::Verdict::Drop) | nft::Statement::Reject(_)
                    )
                });
                counts.push(RuleCount {
                    ruleset: RulesetKind::Nftables,
                    table: table.to_string(),
                    chain: chain.name.clone(),
                    number: None,
                    handle: rule.handle,
                    text: rule.text(),
                    packets,
                    drops,
                });
            }
        }
    }
    counts
}

/// `nstat -asz`'s counters by name (`#kernel`, then `NAME VALUE RATE`).
pub fn nstat(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let value = words.next()?.parse().ok()?;
            Some((name.to_string(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_and_policy_counters_are_read_with_their_rules() {
        let dump = "*filter\n\
                    :INPUT ACCEPT [10:800]\n\
                    :FORWARD DROP [3:180]\n\
                    :OUTPUT ACCEPT [0:0]\n\
                    [2:120] -A FORWARD -d 10.244.2.3/32 -j DROP\n\
                    [7:420] -A FORWARD -j ACCEPT\n\
                    COMMIT\n";
        let counts = rule_counts(dump);
        let forward: Vec<_> = counts
            .iter()
            .filter(|c| c.chain == "FORWARD")
            .map(|c| (c.number, c.text.as_str(), c.packets, c.drops))
            .collect();
        assert_eq!(
            forward,
            [
                (None, ":FORWARD DROP", 3, true),
                (Some(1), "-A FORWARD -d 10.244.2.3/32 -j DROP", 2, true),
                (Some(2), "-A FORWARD -j ACCEPT", 7, false),
            ]
        );
    }

    // What `nft -j list ruleset` prints (nftables 1.0.6), less its metainfo.
    #[test]
    fn nft_rules_with_a_counter_are_read_and_iptables_nft_tables_left_to_iptables_save() {
        let dump = r#"{"nftables": [
{"table": {"family": "inet", "name": "t", "handle": 1}},
{"chain": {"family": "inet", "table": "t", "name": "input", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}},
{"rule": {"family": "inet", "table": "t", "chain": "input", "handle": 2, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 8080}}, {"counter": {"packets": 3, "bytes": 180}}, {"drop": null}]}},
{"rule": {"family": "inet", "table": "t", "chain": "input", "handle": 3, "expr": [{"accept": null}]}},
{"table": {"family": "ip", "name": "filter", "handle": 2}},
{"chain": {"family": "ip", "table": "filter", "name": "FORWARD", "handle": 1, "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}},
{"rule": {"family": "ip", "table": "filter", "chain": "FORWARD", "handle": 2, "expr": [{"counter": {"packets": 9, "bytes": 540}}, {"drop": null}]}}
]}"#;
        let counts = nft_counts(dump);
        let read: Vec<_> = counts
            .iter()
            .map(|c| {
                (
                    c.table.as_str(),
                    c.chain.as_str(),
                    c.handle,
                    c.packets,
                    c.drops,
                )
            })
            .collect();
        assert_eq!(read, [("inet t", "input", Some(2), 3, true)]);
        assert_eq!(counts[0].text, "tcp dport 8080 counter drop");
    }

    #[test]
    fn nstat_counters_are_read_by_name() {
        let text = "#kernel\nIpInReceives                    13                 0.0\n\
                    UdpNoPorts                      1                  0.0\n";
        let counters = nstat(text);
        assert_eq!(counters.get("UdpNoPorts"), Some(&1));
        assert_eq!(counters.get("IpInReceives"), Some(&13));
        assert_eq!(counters.len(), 2);
    }
}
