//! nftables evaluation on small rulesets written as `nft -j` JSON, and on
//! the ruleset the real kube-proxy v1.37 wrote in the lab.

use super::super::tests::{ip, tcp};
use super::super::*;
use crate::snapshot::netns::iptables;
use crate::snapshot::netns::nft;

const KUBE_PROXY: &str = include_str!("../../../../tests/fixtures/nft/kube-proxy-node-1.json");
const NODE_IP: &str = "172.18.0.11";

fn parse(text: &str) -> nft::Ruleset {
    let (ruleset, issues) = nft::parse(text);
    assert!(issues.is_empty(), "{issues:?}");
    ruleset.expect("a ruleset")
}

fn no_iptables() -> iptables::Ruleset {
    iptables::parse("").0.unwrap_or_default()
}

/// Every outcome of `packet` received by a namespace with `nft` (and
/// `iptables`), whose only local address is the node's.
fn traverse<'a>(
    iptables: &'a iptables::Ruleset,
    nft: &'a nft::Ruleset,
    packet: Packet,
) -> Vec<Outcome<'a>> {
    let netfilter = Netfilter::new(iptables, None).with_nftables(nft);
    let locals = [ip(NODE_IP)];
    let context = Context {
        local_addresses: &locals,
        listeners: None,
        ..Context::default()
    };
    netfilter.traverse(PacketPath::Received, packet, &context)
}

fn summary(outcomes: &[Outcome<'_>]) -> Vec<String> {
    outcomes
        .iter()
        .map(|o| {
            let verdict = match &o.verdict {
                Verdict::Unknown { reason } => format!("unknown ({reason})"),
                verdict => verdict.as_str().to_string(),
            };
            let dnat = o.dnat().map_or_else(String::new, |d| format!(" to {d}"));
            let masquerade = if o.masquerade() { " masquerade" } else { "" };
            format!("{:.2} {verdict}{dnat}{masquerade}", o.probability)
        })
        .collect()
}

/// A ruleset of one table whose chains and rules are given as JSON objects.
fn ruleset(family: &str, objects: &[String]) -> String {
    let mut all = vec![format!(
        r#"{{"table": {{"family": "{family}", "name": "t", "handle": 1}}}}"#
    )];
    all.extend(objects.iter().cloned());
    format!("{{\"nftables\": [{}]}}", all.join(",\n"))
}

fn base(family: &str, name: &str, kind: &str, hook: &str, prio: i32, policy: &str) -> String {
    format!(
        r#"{{"chain": {{"family": "{family}", "table": "t", "name": "{name}", "type": "{kind}", "hook": "{hook}", "prio": {prio}, "policy": "{policy}"}}}}"#
    )
}

fn chain(family: &str, name: &str) -> String {
    format!(r#"{{"chain": {{"family": "{family}", "table": "t", "name": "{name}"}}}}"#)
}

fn rule(family: &str, chain: &str, handle: u32, exprs: &str) -> String {
    format!(
        r#"{{"rule": {{"family": "{family}", "table": "t", "chain": "{chain}", "handle": {handle}, "expr": [{exprs}]}}}}"#
    )
}

const DPORT: &str = r#"{"payload": {"protocol": "tcp", "field": "dport"}}"#;
const MARK: &str = r#"{"meta": {"key": "mark"}}"#;

#[test]
fn a_cluster_ip_is_translated_to_each_endpoint_with_its_share() {
    let nft = parse(KUBE_PROXY);
    let none = no_iptables();
    let outcomes = traverse(&none, &nft, tcp("10.244.0.2", "10.96.0.100", 80));
    assert_eq!(
        summary(&outcomes),
        [
            "0.25 accept to 10.244.2.3:8080",
            "0.25 accept to 10.244.2.2:8080",
            "0.25 accept to 10.244.0.3:8080",
            // The pod reaches itself through the service: hairpin masquerade.
            "0.25 accept to 10.244.0.2:8080 masquerade",
        ]
    );
}

#[test]
fn kube_proxys_answers_for_services_it_cannot_serve() {
    let nft = parse(KUBE_PROXY);
    let none = no_iptables();
    let verdict =
        |dst: &str, port: u16| summary(&traverse(&none, &nft, tcp("10.244.0.2", dst, port)));
    // No endpoints at all: goto reject-chain.
    assert_eq!(verdict("10.96.0.106", 80), ["1.00 reject"]);
    // internalTrafficPolicy Local with no endpoint on this node: drop.
    assert_eq!(verdict("10.96.0.104", 80), ["1.00 drop"]);
    // A port the ClusterIP does not serve, and an unallocated ClusterIP.
    assert_eq!(verdict("10.96.0.100", 81), ["1.00 reject"]);
    assert_eq!(verdict("10.96.0.200", 80), ["1.00 drop"]);
}

#[test]
fn a_node_port_from_outside_the_cluster_is_marked_and_masqueraded() {
    let nft = parse(KUBE_PROXY);
    let none = no_iptables();
    let outcomes = traverse(&none, &nft, tcp("172.18.0.99", NODE_IP, 30080));
    assert_eq!(outcomes.len(), 4);
    for outcome in &outcomes {
        assert!(outcome.masquerade(), "{:?}", summary(&outcomes));
        assert_eq!(
            outcome.packet.ip.mark, 0,
            "the masquerading chain clears the mark"
        );
    }
    // externalTrafficPolicy Local: only this node's endpoints, not masqueraded.
    let local = traverse(&none, &nft, tcp("172.18.0.99", NODE_IP, 30081));
    assert_eq!(
        summary(&local),
        [
            "0.50 accept to 10.244.0.3:8080",
            "0.50 accept to 10.244.0.2:8080"
        ]
    );
}

#[test]
fn base_chains_run_in_priority_order() {
    let drop_marked =
        format!(r#"{{"match": {{"op": "==", "left": {MARK}, "right": 1}}}}, {{"drop": null}}"#);
    let set_mark = format!(r#"{{"mangle": {{"key": {MARK}, "value": 1}}}}"#);
    let build = |mark_prio: i32| {
        parse(&ruleset(
            "inet",
            &[
                base("inet", "check", "filter", "forward", 0, "accept"),
                base("inet", "marker", "filter", "forward", mark_prio, "accept"),
                rule("inet", "check", 2, &drop_marked),
                rule("inet", "marker", 3, &set_mark),
            ],
        ))
    };
    let none = no_iptables();
    let before = build(-10);
    assert_eq!(
        summary(&traverse(&none, &before, tcp("10.0.0.1", "10.0.1.1", 80))),
        ["1.00 drop"]
    );
    let after = build(10);
    assert_eq!(
        summary(&traverse(&none, &after, tcp("10.0.0.1", "10.0.1.1", 80))),
        ["1.00 accept"]
    );
}

#[test]
fn an_iptables_nft_table_in_both_dumps_is_evaluated_once_from_iptables_save() {
    // The nft view of iptables-nft's filter table drops everything; the
    // iptables-save of the same kernel says ACCEPT: one of them is evaluated.
    let nft = parse(&format!(
        "{{\"nftables\": [{}, {}, {}]}}",
        r#"{"table": {"family": "ip", "name": "filter", "handle": 1}}"#,
        r#"{"chain": {"family": "ip", "table": "filter", "name": "FORWARD", "type": "filter", "hook": "forward", "prio": 0, "policy": "drop"}}"#,
        r#"{"rule": {"family": "ip", "table": "filter", "chain": "FORWARD", "handle": 2, "expr": [{"xt": {"type": "match", "name": "comment"}}, {"counter": null}]}}"#,
    ));
    let (iptables, _) = iptables::parse(
        "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n",
    );
    let iptables = iptables.expect("a ruleset");
    let packet = tcp("10.0.0.1", "10.0.1.1", 80);
    assert_eq!(
        summary(&traverse(&iptables, &nft, packet.clone())),
        ["1.00 accept"]
    );
    // Without an iptables dump, the nft view is all there is.
    assert_eq!(
        summary(&traverse(&no_iptables(), &nft, packet)),
        ["1.00 drop"]
    );
}

#[test]
fn a_rule_that_cannot_be_evaluated_is_named_unless_it_changes_nothing() {
    let unknown = r#"{"match": {"op": "==", "left": {"osf": {"key": "name"}}, "right": "Linux"}}"#;
    let nft = parse(&ruleset(
        "ip",
        &[
            base("ip", "fwd", "filter", "forward", 0, "accept"),
            rule(
                "ip",
                "fwd",
                7,
                &format!(r#"{unknown}, {{"counter": null}}"#),
            ),
            rule("ip", "fwd", 8, &format!(r#"{unknown}, {{"drop": null}}"#)),
        ],
    ));
    let none = no_iptables();
    let outcomes = traverse(&none, &nft, tcp("10.0.0.1", "10.0.1.1", 80));
    let [outcome] = outcomes.as_slice() else {
        panic!("{:?}", summary(&outcomes));
    };
    let Verdict::Unknown { reason } = &outcome.verdict else {
        panic!("{:?}", outcome.verdict);
    };
    assert!(
        reason.starts_with("ip t chain fwd rule handle 8 (line"),
        "{reason}"
    );
    assert!(reason.contains("osf"), "{reason}");
    let matched: Vec<Tri> = outcome
        .trace
        .iter()
        .filter_map(|s| match s {
            Step::NftRule { matched, .. } => Some(*matched),
            _ => None,
        })
        .collect();
    assert_eq!(matched, [Tri::Unknown, Tri::Unknown]);
}

#[test]
fn once_a_nat_chain_translated_later_nat_chains_at_the_hook_are_skipped() {
    let dnat = |to: &str| {
        format!(
            r#"{{"match": {{"op": "==", "left": {DPORT}, "right": 80}}}}, {{"dnat": {{"family": "ip", "addr": "{to}", "port": 8080}}}}"#
        )
    };
    let nft = parse(&ruleset(
        "ip",
        &[
            base("ip", "first", "nat", "prerouting", -100, "accept"),
            base("ip", "second", "nat", "prerouting", -90, "accept"),
            rule("ip", "first", 3, &dnat("10.1.0.1")),
            rule("ip", "second", 4, &dnat("10.2.0.2")),
        ],
    ));
    let none = no_iptables();
    assert_eq!(
        summary(&traverse(&none, &nft, tcp("10.0.0.1", "10.0.1.1", 80))),
        ["1.00 accept to 10.1.0.1:8080"]
    );
    // A later packet of the connection meets no nat chain at all.
    let mut established = tcp("10.0.0.1", "10.0.1.1", 80);
    established.ct_state = CtState::Established;
    assert_eq!(
        summary(&traverse(&none, &nft, established)),
        ["1.00 accept"]
    );
}

#[test]
fn a_vmap_without_the_key_ends_the_rule_and_the_next_one_runs() {
    let vmap = format!(
        r#"{{"vmap": {{"key": {DPORT}, "data": {{"set": [[22, {{"accept": null}}], [{{"range": [9000, 9010]}}, {{"drop": null}}]]}}}}}}"#
    );
    let nft = parse(&ruleset(
        "ip",
        &[
            base("ip", "fwd", "filter", "forward", 0, "accept"),
            rule("ip", "fwd", 2, &vmap),
            rule("ip", "fwd", 3, r#"{"reject": {"type": "tcp reset"}}"#),
        ],
    ));
    let none = no_iptables();
    let verdict = |port: u16| summary(&traverse(&none, &nft, tcp("10.0.0.1", "10.0.1.1", port)));
    assert_eq!(verdict(22), ["1.00 accept"]);
    assert_eq!(verdict(9005), ["1.00 drop"]);
    assert_eq!(verdict(80), ["1.00 reject"]);
}

#[test]
fn goto_does_not_come_back_and_return_goes_to_the_last_jump() {
    let nft = parse(&ruleset(
        "ip",
        &[
            base("ip", "fwd", "filter", "forward", 0, "drop"),
            chain("ip", "a"),
            chain("ip", "b"),
            rule("ip", "fwd", 2, r#"{"jump": {"target": "a"}}"#),
            rule("ip", "fwd", 3, r#"{"accept": null}"#),
            rule("ip", "a", 4, r#"{"goto": {"target": "b"}}"#),
            rule("ip", "a", 5, r#"{"drop": null}"#),
            rule("ip", "b", 6, r#"{"return": null}"#),
        ],
    ));
    // b returns to fwd (after the jump to a), not to a's drop.
    assert_eq!(
        summary(&traverse(
            &no_iptables(),
            &nft,
            tcp("10.0.0.1", "10.0.1.1", 80)
        )),
        ["1.00 accept"]
    );
}

#[test]
fn an_ip_table_does_not_see_ipv6_and_an_inet_one_does() {
    let drop = [base("X", "fwd", "filter", "forward", 0, "drop")];
    let v6 = tcp("fd00::1", "fd00:1::1", 80);
    for (family, expected) in [("ip", "accept"), ("inet", "drop"), ("ip6", "drop")] {
        let objects: Vec<String> = drop
            .iter()
            .map(|o| o.replace("\"X\"", &format!("\"{family}\"")))
            .collect();
        let nft = parse(&ruleset(family, &objects));
        let none = no_iptables();
        let outcomes = traverse(&none, &nft, v6.clone());
        assert_eq!(summary(&outcomes), [format!("1.00 {expected}")], "{family}");
    }
}

#[test]
fn of_two_chains_at_one_priority_the_newer_runs_first() {
    // As the kernel inserts hooks: the chain made last (the higher handle
    // in its table) runs before the older one at the same priority.
    let chain_with = |name: &str, handle: u32| {
        format!(
            r#"{{"chain": {{"family": "inet", "table": "t", "name": "{name}", "handle": {handle}, "type": "filter", "hook": "forward", "prio": 5, "policy": "accept"}}}}"#
        )
    };
    let nft = parse(&ruleset(
        "inet",
        &[
            chain_with("older", 2),
            chain_with("newer", 3),
            rule("inet", "older", 4, r#"{"reject": {"type": "tcp reset"}}"#),
            rule("inet", "newer", 5, r#"{"drop": null}"#),
        ],
    ));
    assert_eq!(
        summary(&traverse(
            &no_iptables(),
            &nft,
            tcp("10.0.0.1", "10.0.1.1", 80)
        )),
        ["1.00 drop"]
    );
}

#[test]
fn sctp_ports_are_matched_like_tcp_and_udp_ones() {
    let nft = parse(&ruleset(
        "inet",
        &[
            base("inet", "fwd", "filter", "forward", 0, "accept"),
            rule(
                "inet",
                "fwd",
                2,
                r#"{"match": {"op": "==", "left": {"payload": {"protocol": "sctp", "field": "dport"}}, "right": 38412}}, {"drop": null}"#,
            ),
        ],
    ));
    let none = no_iptables();
    let sctp = |dport: u16| {
        let mut packet = tcp("10.0.0.1", "10.0.1.1", dport);
        packet.ip.protocol = Protocol::Sctp;
        packet.tcp_flags = None;
        summary(&traverse(&none, &nft, packet))
    };
    assert_eq!(sctp(38412), ["1.00 drop"]);
    assert_eq!(sctp(38413), ["1.00 accept"]);
    // A TCP packet to that port has no SCTP header: no match.
    assert_eq!(
        summary(&traverse(&none, &nft, tcp("10.0.0.1", "10.0.1.1", 38412))),
        ["1.00 accept"]
    );
}
