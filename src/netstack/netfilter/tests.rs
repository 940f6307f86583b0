use std::net::IpAddr;

use proptest::prelude::*;

use super::*;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::iptables::{self, Ruleset};

fn ruleset(text: &str) -> Ruleset {
    let (ruleset, issues) = iptables::parse(text);
    assert!(issues.is_empty(), "{issues:?}");
    ruleset.expect("a ruleset")
}

pub(super) fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

/// A TCP SYN to `dst:dport`, received on eth0 and sent out of eth1.
pub(super) fn tcp(src: &str, dst: &str, dport: u16) -> Packet {
    let mut packet = Packet::new(ip(src), ip(dst), Protocol::Tcp);
    packet.ip.dport = Some(dport);
    packet.in_iface = Some("eth0".into());
    packet.out_iface = Some("eth1".into());
    packet
}

/// A filter table whose FORWARD chain holds `rules` (one per line).
fn forward(rules: &str) -> Ruleset {
    ruleset(&format!(
        "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:SUB - [0:0]\n{rules}\nCOMMIT\n"
    ))
}

fn verdicts(outcomes: &[Outcome<'_>]) -> Vec<&'static str> {
    outcomes.iter().map(|o| o.verdict.as_str()).collect()
}

/// The verdict of the FORWARD hook for `packet` under `rules`.
fn forward_verdict(rules: &str, packet: Packet) -> String {
    let ruleset = forward(rules);
    let netfilter = Netfilter::new(&ruleset, None);
    let locals = [ip("192.0.2.1")];
    let context = Context {
        local_addresses: &locals,
        listeners: None,
        ..Context::default()
    };
    let outcomes = netfilter.hook(Hook::Forward, packet, &context);
    assert_eq!(outcomes.len(), 1);
    match &outcomes[0].verdict {
        Verdict::Unknown { reason } => format!("unknown: {reason}"),
        verdict => verdict.as_str().to_string(),
    }
}

/// Whether a rule made of `matches` fires for `packet` (DROP if it does).
fn fires(matches: &str, packet: Packet) -> Tri {
    match forward_verdict(&format!("-A FORWARD {matches} -j DROP"), packet).as_str() {
        "drop" => Tri::True,
        "accept" => Tri::False,
        _ => Tri::Unknown,
    }
}

#[test]
fn addresses_and_negation_match_like_iptables() {
    let p = || tcp("10.0.0.5", "10.1.0.9", 80);
    assert_eq!(fires("-s 10.0.0.0/24", p()), Tri::True);
    assert_eq!(fires("! -s 10.0.0.0/24", p()), Tri::False);
    assert_eq!(fires("-d 10.1.0.9/32", p()), Tri::True);
    assert_eq!(fires("-d 10.1.0.8/32", p()), Tri::False);
}

#[test]
fn interface_wildcards_match_prefixes() {
    let p = || tcp("10.0.0.5", "10.1.0.9", 80);
    assert_eq!(fires("-i eth+", p()), Tri::True);
    assert_eq!(fires("-i eth0", p()), Tri::True);
    assert_eq!(fires("-o eth0", p()), Tri::False);
    assert_eq!(fires("! -o cali+", p()), Tri::True);
    let mut unknown_out = p();
    unknown_out.out_iface = None;
    assert_eq!(fires("-o eth1", unknown_out), Tri::Unknown);
}

#[test]
fn ports_ranges_and_multiport_match() {
    let p = || tcp("10.0.0.5", "10.1.0.9", 8080);
    assert_eq!(fires("-p tcp -m tcp --dport 8000:9000", p()), Tri::True);
    assert_eq!(fires("-p tcp -m tcp --dport ! 8080", p()), Tri::False);
    assert_eq!(fires("-p udp -m udp --dport 8080", p()), Tri::False);
    assert_eq!(fires("-p tcp -m tcp --sport 40000", p()), Tri::True);
    assert_eq!(
        fires("-p tcp -m multiport --dports 80,443,8000:8100", p()),
        Tri::True
    );
    assert_eq!(fires("-p tcp -m multiport ! --ports 8080", p()), Tri::False);
}

#[test]
fn tcp_flags_and_syn_test_the_packets_flags() {
    let syn = || tcp("10.0.0.5", "10.1.0.9", 80);
    assert_eq!(fires("-p tcp -m tcp --syn", syn()), Tri::True);
    let mut ack = syn();
    ack.tcp_flags = Some(TcpFlagBits::ACK);
    assert_eq!(fires("-p tcp -m tcp --syn", ack.clone()), Tri::False);
    assert_eq!(
        fires("-p tcp -m tcp --tcp-flags SYN,ACK ACK", ack),
        Tri::True
    );
}

#[test]
fn icmp_type_matches_type_and_code() {
    let ping = Packet::new(ip("10.0.0.5"), ip("10.1.0.9"), Protocol::Icmp);
    assert_eq!(
        fires("-p icmp -m icmp --icmp-type echo-request", ping.clone()),
        Tri::True
    );
    assert_eq!(
        fires("-p icmp -m icmp --icmp-type 3/4", ping.clone()),
        Tri::False
    );
    assert_eq!(fires("-p icmp -m icmp --icmp-type any", ping), Tri::True);
}

#[test]
fn addrtype_uses_the_local_addresses() {
    let to_node = tcp("10.0.0.5", "192.0.2.1", 80);
    assert_eq!(
        fires("-m addrtype --dst-type LOCAL", to_node.clone()),
        Tri::True
    );
    assert_eq!(fires("-m addrtype ! --dst-type LOCAL", to_node), Tri::False);
    let elsewhere = tcp("10.0.0.5", "10.1.0.9", 80);
    assert_eq!(
        fires("-m addrtype --dst-type UNICAST", elsewhere),
        Tri::True
    );
    let broadcast = tcp("10.0.0.5", "255.255.255.255", 80);
    assert_eq!(
        fires("-m addrtype --dst-type BROADCAST", broadcast),
        Tri::True
    );
}

#[test]
fn conntrack_state_follows_the_assumed_state() {
    let new = || tcp("10.0.0.5", "10.1.0.9", 80);
    assert_eq!(fires("-m conntrack --ctstate NEW", new()), Tri::True);
    assert_eq!(fires("-m state --state ESTABLISHED", new()), Tri::False);
    let mut established = new();
    established.ct_state = CtState::Established;
    assert_eq!(
        fires(
            "-m conntrack --ctstate RELATED,ESTABLISHED",
            established.clone()
        ),
        Tri::True
    );
    // Whether an older connection was DNATed is not in a dump.
    assert_eq!(
        fires("-m conntrack --ctstate DNAT", established.clone()),
        Tri::Unknown
    );
    assert_eq!(
        fires(
            "-m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT",
            established
        ),
        Tri::False
    );
    assert_eq!(fires("-m conntrack --ctorigdst 10.1.0.9", new()), Tri::True);
}

#[test]
fn a_connection_whose_nat_the_caller_knows_answers_ctstate_dnat_and_snat() {
    let mut reply = tcp("10.1.0.9", "10.0.0.5", 40000);
    reply.ct_state = CtState::Established;
    reply.ct_nat = Some(ConnectionNat {
        dnat: true,
        snat: false,
    });
    assert_eq!(
        fires("-m conntrack --ctstate DNAT", reply.clone()),
        Tri::True
    );
    assert_eq!(
        fires("-m conntrack --ctstate SNAT", reply.clone()),
        Tri::False
    );
    assert_eq!(fires("-m conntrack ! --ctstate DNAT", reply), Tri::False);
}

#[test]
fn a_reply_conntrack_never_saw_the_request_of_is_invalid_but_a_udp_one_is_new() {
    let syn_ack = tcp("10.1.0.9", "10.0.0.5", 40000).answering();
    let rules = "-A FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name x -j DROP";
    assert_eq!(forward_verdict(rules, syn_ack.clone()), "accept");
    assert_eq!(forward_verdict(rules, syn_ack.without_connection()), "drop");
    let echo_reply = Packet::new(ip("10.1.0.9"), ip("10.0.0.5"), Protocol::Icmp).answering();
    assert_eq!(echo_reply.without_connection().ct_state, CtState::Invalid);
    let udp = Packet::new(ip("10.1.0.9"), ip("10.0.0.5"), Protocol::Udp).answering();
    assert_eq!(udp.without_connection().ct_state, CtState::New);
}

#[test]
fn mark_and_connmark_compare_under_their_masks() {
    let mut marked = tcp("10.0.0.5", "10.1.0.9", 80);
    marked.ip.mark = 0x4001;
    assert_eq!(
        fires("-m mark --mark 0x4000/0x4000", marked.clone()),
        Tri::True
    );
    assert_eq!(
        fires("-m mark ! --mark 0x4000/0x4000", marked.clone()),
        Tri::False
    );
    assert_eq!(fires("-m mark --mark 0x1", marked.clone()), Tri::False);
    assert_eq!(fires("-m connmark --mark 0x0", marked.clone()), Tri::True);
    marked.ct_mark = None;
    assert_eq!(fires("-m connmark --mark 0x0", marked), Tri::Unknown);
}

#[test]
fn small_matches_read_the_packet() {
    let p = || tcp("10.0.0.5", "10.1.0.9", 80);
    assert_eq!(fires("-m comment --comment \"any\"", p()), Tri::True);
    assert_eq!(fires("-m length --length 0:100", p()), Tri::True);
    assert_eq!(fires("-m ttl --ttl-lt 10", p()), Tri::False);
    assert_eq!(fires("-m pkttype --pkt-type unicast", p()), Tri::True);
    assert_eq!(
        fires("-m iprange --src-range 10.0.0.1-10.0.0.9", p()),
        Tri::True
    );
    assert_eq!(
        fires("-m iprange --dst-range 10.0.0.1-10.0.0.9", p()),
        Tri::False
    );
    // Not bridged: physdev matches only where every test is negated.
    assert_eq!(fires("-m physdev --physdev-is-bridged", p()), Tri::False);
    assert_eq!(fires("-m physdev ! --physdev-is-bridged", p()), Tri::True);
    // A forwarded packet has no socket.
    assert_eq!(fires("-m owner --uid-owner 0", p()), Tri::False);
    assert_eq!(fires("-m limit --limit 5/sec", p()), Tri::True);
    assert_eq!(fires("-m recent --name x --rcheck", p()), Tri::False);
}

#[test]
fn unmodelled_match_with_a_verdict_is_unknown_naming_the_rule() {
    let verdict = forward_verdict(
        "-A FORWARD -m u32 --u32 \"0>>22&0x3C@12>>26&0x3F=0x10\" -j DROP",
        tcp("10.0.0.5", "10.1.0.9", 80),
    );
    assert!(verdict.starts_with("unknown"), "{verdict}");
    assert!(verdict.contains("rule 1 (line 6)"), "{verdict}");
}

/// A rule that cannot be read makes its chain unknown to the packets that
/// meet it, and only to them: the dump read as a diagnosis reads it.
#[test]
fn a_chain_with_a_rule_that_cannot_be_read_is_unknown_where_a_packet_meets_it() {
    let text = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:WEB - [0:0]\n-A FORWARD -p tcp --dport 80 -j WEB\n-A FORWARD -j DROP\n-A WEB -p tcp --dport eighty -j ACCEPT\nCOMMIT\n";
    let (ruleset, issues) = iptables::parse_structure(text.to_owned().into());
    assert!(issues.is_empty(), "{issues:?}");
    let ruleset = ruleset.expect("a ruleset");
    let netfilter = Netfilter::new(&ruleset, None);
    let context = Context::default();
    let verdict = |port: u16| {
        let outcomes = netfilter.hook(Hook::Forward, tcp("10.0.0.5", "10.1.0.9", port), &context);
        assert_eq!(outcomes.len(), 1);
        match &outcomes[0].verdict {
            Verdict::Unknown { reason } => format!("unknown: {reason}"),
            verdict => verdict.as_str().to_string(),
        }
    };
    assert_eq!(verdict(443), "drop");
    assert_eq!(
        verdict(80),
        "unknown: filter WEB cannot be read whole (iptables-save.txt:8:23: `eighty` is not a port number), so what it does is not known"
    );
}

#[test]
fn unknown_match_before_a_log_target_is_passed_over() {
    let verdict = forward_verdict(
        "-A FORWARD -m bpf --bytecode \"1,6 0 0 0\" -j LOG\n-A FORWARD -j DROP",
        tcp("10.0.0.5", "10.1.0.9", 80),
    );
    assert_eq!(verdict, "drop");
}

#[test]
fn uncollected_ipset_is_unknown() {
    let verdict = forward_verdict(
        "-A FORWARD -m set --match-set blocked src -j DROP",
        tcp("10.0.0.5", "10.1.0.9", 80),
    );
    assert!(verdict.contains("blocked"), "{verdict}");
}

#[test]
fn jump_returns_goto_does_not() {
    let p = || tcp("10.0.0.5", "10.1.0.9", 80);
    // RETURN from a jumped-to chain continues after the jump.
    let jump = "-A FORWARD -j SUB\n-A FORWARD -j DROP\n-A SUB -j RETURN";
    assert_eq!(forward_verdict(jump, p()), "drop");
    // RETURN from a goto'd chain returns past the caller: the policy decides.
    let goto = "-A FORWARD -g SUB\n-A FORWARD -j DROP\n-A SUB -j RETURN";
    assert_eq!(forward_verdict(goto, p()), "accept");
}

#[test]
fn policy_decides_when_no_rule_does() {
    let ruleset = ruleset(
        "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -d 10.9.0.0/16 -j ACCEPT\nCOMMIT\n",
    );
    let netfilter = Netfilter::new(&ruleset, None);
    let outcomes = netfilter.hook(
        Hook::Forward,
        tcp("10.0.0.5", "10.1.0.9", 80),
        &Context::default(),
    );
    assert_eq!(verdicts(&outcomes), ["drop"]);
    assert!(matches!(
        outcomes[0].trace.last(),
        Some(Step::Policy {
            policy: Policy::Drop,
            ..
        })
    ));
}

#[test]
fn reject_carries_its_type() {
    let ruleset = forward("-A FORWARD -p tcp -j REJECT --reject-with tcp-reset");
    let netfilter = Netfilter::new(&ruleset, None);
    let outcomes = netfilter.hook(
        Hook::Forward,
        tcp("10.0.0.5", "10.1.0.9", 80),
        &Context::default(),
    );
    assert_eq!(
        outcomes[0].verdict,
        Verdict::Reject {
            with: RejectWith::TcpReset
        }
    );
}

#[test]
fn mark_target_rewrites_and_later_rules_see_it() {
    let verdict = forward_verdict(
        "-A FORWARD -j MARK --set-xmark 0x4000/0x4000\n-A FORWARD -m mark --mark 0x4000/0x4000 -j DROP",
        tcp("10.0.0.5", "10.1.0.9", 80),
    );
    assert_eq!(verdict, "drop");
}

#[test]
fn connmark_save_and_restore_move_marks() {
    let ruleset = forward(
        "-A FORWARD -j MARK --set-mark 0x7\n-A FORWARD -j CONNMARK --save-mark\n-A FORWARD -j MARK --set-mark 0x0\n-A FORWARD -j CONNMARK --restore-mark",
    );
    let netfilter = Netfilter::new(&ruleset, None);
    let outcomes = netfilter.hook(
        Hook::Forward,
        tcp("10.0.0.5", "10.1.0.9", 80),
        &Context::default(),
    );
    assert_eq!(outcomes[0].packet.ct_mark, Some(7));
    assert_eq!(outcomes[0].packet.ip.mark, 7);
}

/// A node with kube-proxy-style nat rules: a service with two endpoints.
const KUBE_PROXY: &str = "*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MASQUERADE
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC
-A KUBE-SERVICES -d 10.96.0.2/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 15001
-A KUBE-SERVICES -d 10.96.0.3/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.2.0.1-10.2.0.4
-A KUBE-SVC ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC -m statistic --mode random --probability 0.25 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-SVC -j DNAT --to-destination 10.244.2.2:8080
COMMIT
";

fn received(dst: &str, src: &str) -> Vec<(f64, String, bool, &'static str)> {
    let ruleset = ruleset(KUBE_PROXY);
    let netfilter = Netfilter::new(&ruleset, None);
    let locals = [ip("192.0.2.1")];
    let context = Context {
        local_addresses: &locals,
        listeners: None,
        ..Context::default()
    };
    let outcomes = netfilter.traverse(PacketPath::Received, tcp(src, dst, 80), &context);
    outcomes
        .iter()
        .map(|o| {
            (
                o.probability,
                o.dnat().map(|e| e.to_string()).unwrap_or_default(),
                o.masquerade(),
                o.verdict.as_str(),
            )
        })
        .collect()
}

#[test]
fn statistic_branches_carry_their_probabilities_and_dnat() {
    let outcomes = received("10.96.0.1", "10.244.3.3");
    assert_eq!(
        outcomes,
        [
            (0.25, "10.244.1.2:8080".to_string(), false, "accept"),
            (0.75, "10.244.2.2:8080".to_string(), false, "accept"),
        ]
    );
}

#[test]
fn masquerade_mark_from_outside_the_cluster_leads_to_masquerade() {
    let outcomes = received("10.96.0.1", "172.16.0.9");
    assert!(outcomes.iter().all(|(_, _, masquerade, _)| *masquerade));
}

#[test]
fn dnat_address_range_forks_one_branch_per_address() {
    let outcomes = received("10.96.0.3", "10.244.3.3");
    assert_eq!(outcomes.len(), 4);
    assert!(outcomes.iter().all(|(p, _, _, _)| (*p - 0.25).abs() < 1e-9));
    assert_eq!(outcomes[3].1, "10.2.0.4:80");
}

#[test]
fn redirect_needs_the_receiving_interfaces_address() {
    // No interfaces collected: the model cannot say where REDIRECT goes.
    let outcomes = received("10.96.0.2", "10.244.3.3");
    assert_eq!(outcomes[0].3, "unknown");
}

#[test]
fn established_packets_skip_the_nat_table() {
    let ruleset = ruleset(KUBE_PROXY);
    let netfilter = Netfilter::new(&ruleset, None);
    let mut packet = tcp("10.244.3.3", "10.96.0.1", 80);
    packet.ct_state = CtState::Established;
    let outcomes = netfilter.hook(Hook::Prerouting, packet, &Context::default());
    assert_eq!(outcomes.len(), 1);
    assert!(outcomes[0].trace.is_empty());
}

#[test]
fn received_packet_for_a_local_address_goes_to_input() {
    let ruleset = ruleset(
        "*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n",
    );
    let netfilter = Netfilter::new(&ruleset, None);
    let locals = [ip("192.0.2.1")];
    let context = Context {
        local_addresses: &locals,
        listeners: None,
        ..Context::default()
    };
    let to_node = netfilter.traverse(
        PacketPath::Received,
        tcp("10.0.0.5", "192.0.2.1", 22),
        &context,
    );
    assert_eq!(verdicts(&to_node), ["drop"]);
    let through = netfilter.traverse(
        PacketPath::Received,
        tcp("10.0.0.5", "10.9.9.9", 22),
        &context,
    );
    assert_eq!(verdicts(&through), ["accept"]);
}

#[test]
fn raw_table_sees_packets_before_conntrack() {
    let ruleset = ruleset(
        "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -m conntrack --ctstate INVALID -j NOTRACK\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -m state --state UNTRACKED -j DROP\nCOMMIT\n",
    );
    let netfilter = Netfilter::new(&ruleset, None);
    let context = Context {
        local_addresses: &[],
        listeners: None,
        ..Context::default()
    };
    let mut packet = tcp("10.0.0.5", "10.9.9.9", 22);
    packet.out_iface = Some("eth1".into());
    let locals = [ip("192.0.2.1")];
    let context = Context {
        local_addresses: &locals,
        listeners: None,
        ..context
    };
    let outcomes = netfilter.traverse(PacketPath::Received, packet, &context);
    assert_eq!(verdicts(&outcomes), ["drop"]);
}

#[test]
fn index_keeps_first_match_order() {
    // 40 rules keyed by destination, with an unkeyed rule in the middle.
    let mut rules = String::new();
    for i in 0..40 {
        if i == 20 {
            rules.push_str("-A FORWARD -p tcp -m tcp --dport 443 -j DROP\n");
        }
        rules.push_str(&format!("-A FORWARD -d 10.0.0.{i}/32 -j ACCEPT\n"));
    }
    let p = |dst: &str, port| tcp("10.9.0.1", dst, port);
    assert_eq!(forward_verdict(&rules, p("10.0.0.30", 443)), "drop");
    assert_eq!(forward_verdict(&rules, p("10.0.0.10", 443)), "accept");
    assert_eq!(forward_verdict(&rules, p("10.0.0.30", 80)), "accept");
}

/// What a reference evaluator works on: rules with a few matches and targets.
#[derive(Debug, Clone)]
struct RefRule {
    source: Option<u8>,
    destination: Option<u8>,
    mark: Option<u32>,
    target: RefTarget,
}

#[derive(Debug, Clone, Copy)]
enum RefTarget {
    Accept,
    Drop,
    Return,
    Jump(usize),
    Goto(usize),
    Mark(u32),
    Nothing,
}

const CHAINS: [&str; 4] = ["FORWARD", "C1", "C2", "C3"];

impl RefRule {
    fn text(&self, chain: usize) -> String {
        let mut text = format!("-A {}", CHAINS[chain]);
        if let Some(s) = self.source {
            text.push_str(&format!(" -s 10.0.0.{s}/32"));
        }
        if let Some(d) = self.destination {
            text.push_str(&format!(" -d 10.1.0.{d}/32"));
        }
        if let Some(m) = self.mark {
            text.push_str(&format!(" -m mark --mark {m:#x}"));
        }
        match self.target {
            RefTarget::Accept => text.push_str(" -j ACCEPT"),
            RefTarget::Drop => text.push_str(" -j DROP"),
            RefTarget::Return => text.push_str(" -j RETURN"),
            RefTarget::Jump(c) => text.push_str(&format!(" -j {}", CHAINS[c])),
            RefTarget::Goto(c) => text.push_str(&format!(" -g {}", CHAINS[c])),
            RefTarget::Mark(m) => text.push_str(&format!(" -j MARK --set-mark {m:#x}")),
            RefTarget::Nothing => {}
        }
        text
    }

    fn matches(&self, src: u8, dst: u8, mark: u32) -> bool {
        self.source.is_none_or(|s| s == src)
            && self.destination.is_none_or(|d| d == dst)
            && self.mark.is_none_or(|m| m == mark)
    }
}

/// What a chain did: a verdict, or it returned (explicitly or at its end).
enum RefResult {
    Verdict(&'static str),
    Returned,
}

/// The naive evaluator: recursion for jumps, a tail call for gotos.
fn reference(chains: &[Vec<RefRule>], chain: usize, src: u8, dst: u8, mark: &mut u32) -> RefResult {
    for rule in &chains[chain] {
        if !rule.matches(src, dst, *mark) {
            continue;
        }
        match rule.target {
            RefTarget::Accept => return RefResult::Verdict("accept"),
            RefTarget::Drop => return RefResult::Verdict("drop"),
            RefTarget::Return => return RefResult::Returned,
            RefTarget::Jump(c) => {
                if let RefResult::Verdict(v) = reference(chains, c, src, dst, mark) {
                    return RefResult::Verdict(v);
                }
            }
            RefTarget::Goto(c) => return reference(chains, c, src, dst, mark),
            RefTarget::Mark(m) => *mark = m,
            RefTarget::Nothing => {}
        }
    }
    RefResult::Returned
}

/// A rule of chain `chain`: jumps and gotos go to later chains only, so the
/// chains never loop.
fn rule(chain: usize) -> impl Strategy<Value = RefRule> {
    let target = if chain + 1 < CHAINS.len() {
        prop_oneof![
            Just(RefTarget::Accept),
            Just(RefTarget::Drop),
            Just(RefTarget::Return),
            Just(RefTarget::Nothing),
            (0u32..3).prop_map(RefTarget::Mark),
            (chain + 1..CHAINS.len()).prop_map(RefTarget::Jump),
            (chain + 1..CHAINS.len()).prop_map(RefTarget::Goto),
        ]
        .boxed()
    } else {
        prop_oneof![
            Just(RefTarget::Accept),
            Just(RefTarget::Drop),
            Just(RefTarget::Return),
            Just(RefTarget::Nothing),
            (0u32..3).prop_map(RefTarget::Mark),
        ]
        .boxed()
    };
    (
        proptest::option::of(0u8..3),
        proptest::option::weighted(0.8, 0u8..6),
        proptest::option::weighted(0.2, 0u32..3),
        target,
    )
        .prop_map(|(source, destination, mark, target)| RefRule {
            source,
            destination,
            mark,
            target,
        })
}

fn chains() -> impl Strategy<Value = Vec<Vec<RefRule>>> {
    // FORWARD is long enough (up to 40 rules) for the index to take over.
    (
        proptest::collection::vec(rule(0), 0..40),
        proptest::collection::vec(rule(1), 0..6),
        proptest::collection::vec(rule(2), 0..6),
        proptest::collection::vec(rule(3), 0..6),
    )
        .prop_map(|(a, b, c, d)| vec![a, b, c, d])
}

proptest! {
    #[test]
    fn chain_traversal_agrees_with_a_naive_evaluator(
        chains in chains(),
        drop_policy in any::<bool>(),
        src in 0u8..3,
        dst in 0u8..6,
        mark in 0u32..3,
    ) {
        let policy = if drop_policy { "DROP" } else { "ACCEPT" };
        let mut text = format!(
            "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD {policy} [0:0]\n:OUTPUT ACCEPT [0:0]\n:C1 - [0:0]\n:C2 - [0:0]\n:C3 - [0:0]\n"
        );
        for (index, rules) in chains.iter().enumerate() {
            for rule in rules {
                text.push_str(&rule.text(index));
                text.push('\n');
            }
        }
        text.push_str("COMMIT\n");
        let ruleset = ruleset(&text);
        let netfilter = Netfilter::new(&ruleset, None);
        let mut packet = tcp(&format!("10.0.0.{src}"), &format!("10.1.0.{dst}"), 80);
        packet.ip.mark = mark;
        let outcomes = netfilter.hook(Hook::Forward, packet, &Context::default());
        let mut expected_mark = mark;
        let expected = match reference(&chains, 0, src, dst, &mut expected_mark) {
            RefResult::Verdict(verdict) => verdict,
            RefResult::Returned => if drop_policy { "drop" } else { "accept" },
        };
        prop_assert_eq!(outcomes.len(), 1);
        prop_assert_eq!(outcomes[0].verdict.as_str(), expected);
        prop_assert_eq!(outcomes[0].packet.ip.mark, expected_mark);
    }
}

/// Real `ipset save` output with one set of most types.
const IPSETS: &str = include_str!("../../../tests/fixtures/netfilter/extensions/ipset-save.txt");

fn in_set(set: &str, packet: Packet) -> Tri {
    let (sets, issues) = crate::snapshot::netns::ipset::parse(IPSETS);
    assert!(issues.is_empty(), "{issues:?}");
    let ruleset = forward(&format!("-A FORWARD -m set --match-set {set} -j DROP"));
    let netfilter = Netfilter::new(&ruleset, sets.as_ref());
    let outcomes = netfilter.hook(Hook::Forward, packet, &Context::default());
    match outcomes[0].verdict {
        Verdict::Drop => Tri::True,
        Verdict::Accept => Tri::False,
        _ => Tri::Unknown,
    }
}

#[test]
fn ipset_members_match_by_type_and_direction() {
    let udp = |dst: &str, port| {
        let mut p = Packet::new(ip("10.0.0.5"), ip(dst), Protocol::Udp);
        p.ip.dport = Some(port);
        p
    };
    assert_eq!(
        in_set("ext-ip-port dst,dst", udp("10.96.0.10", 53)),
        Tri::True
    );
    assert_eq!(
        in_set("ext-ip-port dst,dst", udp("10.96.0.10", 54)),
        Tri::False
    );
    // The port must be of the member's protocol.
    assert_eq!(
        in_set("ext-ip-port dst,dst", tcp("10.0.0.5", "10.96.0.10", 53)),
        Tri::False
    );
    // Fewer flags than the set has dimensions never match.
    assert_eq!(in_set("ext-ip-port dst", udp("10.96.0.10", 53)), Tri::False);
    assert_eq!(
        in_set("ext-ip-port src,dst", udp("10.96.0.10", 53)),
        Tri::False
    );
    let ping = Packet::new(ip("10.0.0.5"), ip("10.96.0.11"), Protocol::Icmp);
    assert_eq!(in_set("ext-ip-port dst,dst", ping), Tri::True);
}

#[test]
fn ipset_nomatch_member_is_a_hole_in_the_net_set() {
    assert_eq!(
        in_set("ext-net src", tcp("10.9.0.1", "1.1.1.1", 80)),
        Tri::True
    );
    assert_eq!(
        in_set("ext-net src", tcp("10.1.0.1", "1.1.1.1", 80)),
        Tri::False
    );
    assert_eq!(
        in_set(
            "ext-net src --return-nomatch",
            tcp("10.1.0.1", "1.1.1.1", 80)
        ),
        Tri::True
    );
    assert_eq!(
        in_set("ext-net src", tcp("11.0.0.1", "1.1.1.1", 80)),
        Tri::False
    );
}

#[test]
fn ipset_netmask_list_and_unmodelled_types() {
    assert_eq!(
        in_set("ext-netmask dst", tcp("10.0.0.5", "10.2.3.77", 80)),
        Tri::True
    );
    assert_eq!(
        in_set("ext-netmask dst", tcp("10.0.0.5", "10.2.4.1", 80)),
        Tri::False
    );
    // A list:set matches when one of its sets does.
    assert_eq!(
        in_set("ext-list src", tcp("10.9.0.1", "1.1.1.1", 80)),
        Tri::True
    );
    // Sets of another family never match.
    assert_eq!(
        in_set("ext-ip6 src", tcp("10.9.0.1", "1.1.1.1", 80)),
        Tri::False
    );
    assert_eq!(
        in_set("ext-iface src,src", tcp("10.9.0.1", "1.1.1.1", 80)),
        Tri::Unknown
    );
    assert_eq!(
        in_set("no-such-set src", tcp("10.9.0.1", "1.1.1.1", 80)),
        Tri::Unknown
    );
}

#[test]
fn an_ipv6_packet_never_gets_the_verdict_of_the_ipv4_rules() {
    // iptables-save holds the IPv4 rules only; ip6tables' are not collected.
    assert_eq!(
        forward_verdict("-A FORWARD -j DROP", tcp("fd00::5", "fd00:1::9", 80)),
        "unknown: fd00:1::9 is an IPv6 packet, whose iptables rules (ip6tables-save.txt) were not collected, while iptables-save.txt holds rules"
    );
    assert_eq!(
        forward_verdict("-A FORWARD -j DROP", tcp("10.0.0.5", "10.1.0.9", 80)),
        "drop"
    );
}

#[test]
fn each_family_meets_its_own_iptables_rules() {
    let ipv4 = forward("-A FORWARD -d 10.1.0.9/32 -j DROP");
    let ipv6 = forward(
        "-A FORWARD -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j ACCEPT\n-A FORWARD -d fd00:1::9/128 -j REJECT --reject-with icmp6-port-unreachable",
    );
    let netfilter = Netfilter::new(&ipv4, None).with_ip6tables(&ipv6);
    let verdict = |packet: Packet| {
        let outcomes = netfilter.hook(Hook::Forward, packet, &Context::default());
        assert_eq!(outcomes.len(), 1);
        let rule = deciding_rule(&outcomes[0].trace).expect("a rule decided");
        (outcomes[0].verdict.as_str(), rule.ruleset.file(), rule.line)
    };
    assert_eq!(
        verdict(tcp("fd00::5", "fd00:1::9", 80)),
        ("reject", DumpFile::Ip6tablesSave, Some(7))
    );
    assert_eq!(
        verdict(tcp("10.0.0.5", "10.1.0.9", 80)),
        ("drop", DumpFile::IptablesSave, Some(6))
    );
    let mut ping = Packet::new(ip("fd00::5"), ip("fd00:1::9"), Protocol::Icmpv6);
    ping.icmp = Some((128, 0));
    assert_eq!(verdict(ping), ("accept", DumpFile::Ip6tablesSave, Some(6)));
}
