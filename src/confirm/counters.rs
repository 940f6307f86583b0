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
use crate::snapshot::netns::iptables::{self, Policy, Target};

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

/// One namespace's counters at one moment.
#[derive(Debug, Default)]
pub struct Reading {
    pub rules: Vec<RuleCount>,
    pub nstat: BTreeMap<String, u64>,
    /// What could not be read, in words.
    pub problems: Vec<String>,
}

/// An iptables rule (or a built-in chain's policy) and its packet counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCount {
    pub table: iptables::TableName,
    pub chain: String,
    /// The rule's position in its chain; `None` for the chain's policy.
    pub number: Option<usize>,
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
async fn run(shell: &NodeShell, enter: &[String], argv: &[&str]) -> Result<String, String> {
    let argv: Vec<String> = argv.iter().map(|w| w.to_string()).collect();
    match shell.run(enter, &argv, None, READ_TIMEOUT).await {
        Ok(output) if output.success() => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        Ok(output) => Err(format!(
            "{} ({})",
            String::from_utf8_lossy(&output.stderr).trim(),
            output.status
        )),
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
                    table: table.name,
                    chain: chain.name.to_string(),
                    number: None,
                    text: format!(":{} {word}", chain.name),
                    packets: counters.packets,
                    drops: policy == Policy::Drop,
                });
            }
            for rule in &chain.rules {
                let Some(counters) = rule.counters else {
                    continue;
                };
                counts.push(RuleCount {
                    table: table.name,
                    chain: chain.name.to_string(),
                    number: Some(rule.number),
                    text: rule.text.to_string(),
                    packets: counters.packets,
                    drops: matches!(rule.target, Some(Target::Drop | Target::Reject(_))),
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
