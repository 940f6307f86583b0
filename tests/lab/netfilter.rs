//! `skoop`'s netfilter model against the kernel's own: a client, a router
//! holding a kube-proxy-style ruleset (ClusterIP services with `statistic`
//! endpoints, masquerade marks, a NodePort via `addrtype LOCAL`, a `goto`
//! chain that RETURNs, a service without endpoints that REJECTs, a DNAT
//! whose rewritten port FORWARD then DROPs, a FORWARD policy of DROP) and two
//! backends. Every generated flow is tried for real with `nc`/`ping` from the
//! client, and the kernel's answer and its conntrack entry (the translated
//! tuple) are compared with what the model of the router's dump predicts.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use skoop::net::Family;
use skoop::netstack::netfilter::{
    Context, Netfilter, Outcome, Packet, PacketPath, RouteChoice, Step, Verdict,
};
use skoop::netstack::routing::Fib;
use skoop::snapshot::netns::NetnsDump;
use skoop::snapshot::netns::iptables::{Protocol, RejectWith};

use crate::lab::{Availability, Lab, Netns, availability};
use crate::snapshot::collect_local;

const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD
-A FORWARD -p tcp -m tcp --dport 9000 -j DROP
-A FORWARD -p tcp -m multiport --dports 9001,9002 -j REJECT --reject-with tcp-reset
-A FORWARD -p tcp -m tcp --dport 9003 -j REJECT --reject-with icmp-host-prohibited
-A FORWARD -d 10.80.2.0/24 -j ACCEPT
-A KUBE-SERVICES -d 10.96.0.12/32 -p tcp -m comment --comment \"default/empty:http has no endpoints\" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-A1 - [0:0]
:KUBE-SEP-A2 - [0:0]
:KUBE-SVC-B - [0:0]
:KUBE-SVC-C - [0:0]
:KUBE-SVC-D - [0:0]
-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment \"default/a:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp -m comment --comment \"default/b:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-B
-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp -m comment --comment \"default/c:http cluster IP\" -m tcp --dport 81 -j KUBE-SVC-C
-A KUBE-SERVICES -d 10.96.0.13/32 -p tcp -m comment --comment \"default/d:http cluster IP\" -m tcp --dport 80 -g KUBE-SVC-D
-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp -m comment --comment \"default/a:http\" -m tcp --dport 30080 -j KUBE-MARK-MASQ
-A KUBE-NODEPORTS -p tcp -m comment --comment \"default/a:http\" -m tcp --dport 30080 -j KUBE-SVC-A
-A KUBE-SVC-A ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment \"default/a:http cluster IP\" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-A -m comment --comment \"default/a:http -> 10.80.1.2:8080\" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A1
-A KUBE-SVC-A -m comment --comment \"default/a:http -> 10.80.2.2:8080\" -j KUBE-SEP-A2
-A KUBE-SEP-A1 -p tcp -m comment --comment \"default/a:http\" -m tcp -j DNAT --to-destination 10.80.1.2:8080
-A KUBE-SEP-A2 -p tcp -m comment --comment \"default/a:http\" -m tcp -j DNAT --to-destination 10.80.2.2:8080
-A KUBE-SVC-B -p tcp -m comment --comment \"default/b:http (not marked for masquerade)\" -j DNAT --to-destination 10.80.1.2:8080
-A KUBE-SVC-C -j KUBE-MARK-MASQ
-A KUBE-SVC-C -p tcp -m comment --comment \"default/c:http, to a port FORWARD drops\" -j DNAT --to-destination 10.80.2.2:9000
-A KUBE-SVC-D -j KUBE-MARK-MASQ
-A KUBE-SVC-D -s 10.70.0.0/24 -j RETURN
-A KUBE-SVC-D -p tcp -j DNAT --to-destination 10.80.2.2:8080
COMMIT
";

/// The ports each backend listens on.
const LISTENERS: &[(&str, &[u16])] = &[
    ("10.80.1.2", &[8080]),
    ("10.80.2.2", &[8080, 9000, 9001, 9003]),
];

/// How long the router needs between ICMP errors for failed routes.
const ERROR_INTERVAL: Duration = Duration::from_millis(1100);

/// What the client sees of an attempt: a TCP connect, a UDP datagram
/// answered by an echo (`nftables.rs`), a ping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seen {
    /// Connected, echoed, answered.
    Connected,
    /// TCP reset, ICMP port unreachable.
    Refused,
    /// Another ICMP error (host prohibited, unreachable).
    Unreachable,
    /// Nothing came back.
    Timeout,
}

/// The client (10.70.0.2 and 10.71.0.2 on its eth0), the router between it
/// (10.70.0.1, 10.71.0.1) and the two backends (10.80.N.2 behind the
/// router's ethN, 10.80.N.1), forwarding: the topology of this file's
/// case and of `nftables.rs`'s hand-built one.
pub fn client_router_backends(lab: &mut Lab) -> (Netns, Netns, [Netns; 2]) {
    let client = lab.netns("client");
    let router = lab.netns("router");
    let backends = [lab.netns("backend1"), lab.netns("backend2")];
    router.ip(&format!(
        "link add eth0 type veth peer name eth0 netns {}",
        client.name
    ));
    router.ip("addr add 10.70.0.1/24 dev eth0");
    router.ip("addr add 10.71.0.1/24 dev eth0");
    router.ip("link set eth0 up");
    client.ip("addr add 10.70.0.2/24 dev eth0");
    client.ip("addr add 10.71.0.2/24 dev eth0");
    client.ip("link set eth0 up");
    client.ip("route add default via 10.70.0.1");
    for (n, backend) in backends.iter().enumerate() {
        let n = n + 1;
        router.ip(&format!(
            "link add eth{n} type veth peer name eth0 netns {}",
            backend.name
        ));
        router.ip(&format!("addr add 10.80.{n}.1/24 dev eth{n}"));
        router.ip(&format!("link set eth{n} up"));
        backend.ip(&format!("addr add 10.80.{n}.2/24 dev eth0"));
        backend.ip("link set eth0 up");
        backend.ip(&format!("route add default via 10.80.{n}.1"));
    }
    router.run(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    (client, router, backends)
}

fn build(lab: &mut Lab) -> (Netns, Netns) {
    let (client, router, backends) = client_router_backends(lab);
    // ICMP errors (REJECT's, routing's) are rate limited per peer by default:
    // after a burst the client would see timeouts instead.
    router.run(&["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"]);
    router.restore_iptables(RULES);
    for ((_, ports), backend) in LISTENERS.iter().zip(&backends) {
        for port in *ports {
            lab.spawn(backend, &["nc", "-lk", &port.to_string()]);
        }
        let wanted: Vec<String> = ports.iter().map(|p| format!(":{p} ")).collect();
        backend.wait_for(&["ss", "-Htln"], Duration::from_secs(5), |out| {
            wanted.iter().all(|w| out.contains(w.as_str()))
        });
    }
    (client, router)
}

/// Tries a TCP connection from the client, as `nc -z` reports it.
pub fn connect(client: &Netns, src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Seen {
    let (src, sport, dst, dport) = (
        src.to_string(),
        sport.to_string(),
        dst.to_string(),
        dport.to_string(),
    );
    let out = client.exec(&[
        "nc", "-z", "-n", "-v", "-w", "1", "-s", &src, "-p", &sport, &dst, &dport,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_lowercase();
    if out.status.success() {
        Seen::Connected
    } else if stderr.contains("refused") {
        Seen::Refused
    } else if stderr.contains("unreachable")
        || stderr.contains("no route")
        || stderr.contains("not permitted")
    {
        Seen::Unreachable
    } else {
        Seen::Timeout
    }
}

/// The reply tuple of the router's conntrack entry for the flow from
/// `sport`: (reply source, reply source port, reply destination).
fn conntrack_reply(router: &Netns, sport: u16) -> Option<(IpAddr, u16, IpAddr)> {
    let out = router.exec(&[
        "conntrack",
        "-L",
        "-p",
        "tcp",
        "--orig-port-src",
        &sport.to_string(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains(&format!("sport={sport} ")))?;
    let field = |key: &str, nth: usize| {
        line.split_whitespace()
            .filter_map(|w| w.strip_prefix(key))
            .nth(nth)
            .map(str::to_string)
    };
    Some((
        field("src=", 1)?.parse().ok()?,
        field("sport=", 1)?.parse().ok()?,
        field("dst=", 1)?.parse().ok()?,
    ))
}

/// What the client should see for one outcome of the model.
fn expected(outcome: &Outcome<'_>) -> Seen {
    match &outcome.verdict {
        Verdict::Accept => {
            let routed_out = outcome.trace.iter().any(|s| {
                matches!(
                    s,
                    Step::Route {
                        choice: RouteChoice::Out { .. },
                        ..
                    }
                )
            });
            let dst = outcome.packet.ip.dst.to_string();
            let listening = LISTENERS.iter().any(|(addr, ports)| {
                *addr == dst && outcome.packet.ip.dport.is_some_and(|p| ports.contains(&p))
            });
            if routed_out && listening {
                Seen::Connected
            } else {
                // A closed port (on a backend or the router itself) answers RST.
                Seen::Refused
            }
        }
        Verdict::Unknown { reason } => panic!("the model is unknown for a lab flow: {reason}"),
        stopped => seen_when_stopped(stopped).expect("a verdict that stops the packet"),
    }
}

/// What the client sees of a packet the rules (or routing between them)
/// stop: `None` for accept and unknown, which each case judges itself.
pub fn seen_when_stopped(verdict: &Verdict) -> Option<Seen> {
    match verdict {
        Verdict::Drop => Some(Seen::Timeout),
        Verdict::Reject {
            with: RejectWith::TcpReset | RejectWith::IcmpPortUnreachable,
        } => Some(Seen::Refused),
        Verdict::Reject { .. } | Verdict::Unroutable { .. } => Some(Seen::Unreachable),
        Verdict::Accept | Verdict::Unknown { .. } => None,
    }
}

#[test]
fn kube_proxy_style_rules_agree_with_the_kernel_on_every_flow() {
    if let Availability::Skip = availability() {
        return;
    }
    let mut lab = Lab::new();
    let (client, router) = build(&mut lab);
    let dir = tempfile::tempdir().expect("temp dir");
    collect_local(&router.name, dir.path());
    let (dump, problems) = NetnsDump::load(dir.path());
    assert!(problems.is_empty(), "{problems:?}");
    let ruleset = dump.iptables.as_ref().expect("iptables-save collected");
    let fib = Fib::from_dump(&dump, Family::Ipv4).expect("rules, routes and addresses collected");
    let context = Context {
        fib: Some(&fib),
        interfaces: dump.addrs.as_deref().unwrap_or_default(),
        local_addresses: &[],
        listeners: None,
    };
    let netfilter = Netfilter::new(ruleset, dump.ipsets.as_ref());

    let sources = [Ipv4Addr::new(10, 70, 0, 2), Ipv4Addr::new(10, 71, 0, 2)];
    let destinations = [
        Ipv4Addr::new(10, 96, 0, 10),
        Ipv4Addr::new(10, 96, 0, 11),
        Ipv4Addr::new(10, 96, 0, 12),
        Ipv4Addr::new(10, 96, 0, 13),
        Ipv4Addr::new(10, 70, 0, 1),
        Ipv4Addr::new(10, 80, 1, 2),
        Ipv4Addr::new(10, 80, 2, 2),
    ];
    let ports = [80, 81, 8080, 9000, 9001, 9003, 30080];
    let mut sport = 41000;
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut seen_all = BTreeSet::new();
    let mut endpoints_seen = BTreeSet::new();
    let mut last_unroutable: Option<Instant> = None;
    for src in sources {
        for dst in destinations {
            for dport in ports {
                // Flows that may take either service endpoint are tried a few times.
                for attempt in 0..4 {
                    sport += 1;
                    let mut packet = Packet::new(src.into(), dst.into(), Protocol::Tcp);
                    packet.ip.sport = Some(sport);
                    packet.ip.dport = Some(dport);
                    packet.in_iface = Some("eth0".into());
                    let outcomes = netfilter.traverse(PacketPath::Received, packet, &context);
                    if attempt > 0 && outcomes.len() == 1 {
                        break;
                    }
                    let predicted: BTreeSet<Seen> = outcomes.iter().map(expected).collect();
                    // The kernel answers a routing failure with at most one
                    // ICMP error per second per peer (`ip_error`, not tunable
                    // in a namespace): space those flows out.
                    let unroutable = outcomes
                        .iter()
                        .any(|o| matches!(o.verdict, Verdict::Unroutable { .. }));
                    if unroutable {
                        if let Some(last) = last_unroutable {
                            std::thread::sleep(ERROR_INTERVAL.saturating_sub(last.elapsed()));
                        }
                        last_unroutable = Some(Instant::now());
                    }
                    let seen = connect(&client, src, sport, dst, dport);
                    seen_all.insert(seen);
                    compared += 1;
                    let flow = format!("{src}:{sport} -> {dst}:{dport}");
                    if !predicted.contains(&seen) {
                        failures.push(format!("{flow}: kernel {seen:?}, model {predicted:?}"));
                        continue;
                    }
                    let Some((reply_src, reply_sport, reply_dst)) = conntrack_reply(&router, sport)
                    else {
                        continue;
                    };
                    // The kernel's translation must be one of the model's outcomes.
                    let agrees = outcomes.iter().any(|o| {
                        o.packet.ip.dst == reply_src
                            && o.packet.ip.dport == Some(reply_sport)
                            && o.packet.ip.src == reply_dst
                    });
                    if agrees {
                        endpoints_seen.insert((dst, reply_src));
                    } else {
                        let model: Vec<String> = outcomes
                            .iter()
                            .map(|o| {
                                format!(
                                    "{}:{:?} from {}",
                                    o.packet.ip.dst, o.packet.ip.dport, o.packet.ip.src
                                )
                            })
                            .collect();
                        failures.push(format!(
                            "{flow}: conntrack reply {reply_src}:{reply_sport} -> {reply_dst}, model {model:?}"
                        ));
                    }
                }
            }
        }
    }
    // ICMP: ping answers only where the model accepts and the destination exists.
    for dst in destinations {
        let mut packet = Packet::new(sources[0].into(), dst.into(), Protocol::Icmp);
        packet.in_iface = Some("eth0".into());
        let outcomes = netfilter.traverse(PacketPath::Received, packet, &context);
        let answered = client
            .exec(&["ping", "-c", "1", "-W", "1", &dst.to_string()])
            .status
            .success();
        compared += 1;
        let model = outcomes.iter().all(|o| {
            o.verdict == Verdict::Accept
                && (LISTENERS
                    .iter()
                    .any(|(a, _)| *a == o.packet.ip.dst.to_string())
                    || o.packet.ip.dst == IpAddr::from([10, 70, 0, 1]))
        });
        if answered != model {
            failures.push(format!(
                "ping {dst}: kernel answered {answered}, model {model}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} flows disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The flows exercised every kind of answer, and service A's endpoints.
    assert_eq!(
        seen_all,
        BTreeSet::from([
            Seen::Connected,
            Seen::Refused,
            Seen::Unreachable,
            Seen::Timeout
        ])
    );
    let a = Ipv4Addr::new(10, 96, 0, 10);
    assert!(
        endpoints_seen.contains(&(a, IpAddr::from([10, 80, 2, 2])))
            || endpoints_seen.contains(&(a, IpAddr::from([10, 80, 1, 2]))),
        "service A was never reached: {endpoints_seen:?}"
    );
}
