//! `skoop`'s route lookup against the kernel's own: a namespace with several
//! policy rules (fwmark, from/to, iif, not, goto, suppress_prefixlength,
//! blackhole/unreachable/prohibit actions), several tables, every failing
//! route type, throw, multipath and metrics, asked hundreds of generated
//! questions both through `ip route get` and through the model of its dump.

use std::net::{IpAddr, Ipv4Addr};

use serde_json::Value;
use skoop::net::Family;
use skoop::netstack::routing::{Fib, FlowKey, LookupOutcome, RouteError};
use skoop::snapshot::netns::NetnsDump;

use crate::lab::{Availability, Lab, Netns, availability};
use crate::snapshot::collect_local;

/// Builds the router namespace (and the peer its veths lead to).
fn build(lab: &mut Lab) -> Netns {
    let router = lab.netns("router");
    let peer = lab.netns("peer");
    for (dev, address, peer_address) in [
        ("eth0", "192.168.50.1/24", "192.168.50.2/24"),
        ("eth1", "10.1.0.1/24", "10.1.0.2/24"),
        ("eth2", "172.16.0.1/24", "172.16.0.2/24"),
    ] {
        router.ip(&format!(
            "link add {dev} type veth peer name {dev} netns {}",
            peer.name
        ));
        router.ip(&format!("addr add {address} dev {dev}"));
        router.ip(&format!("link set {dev} up"));
        peer.ip(&format!("addr add {peer_address} dev {dev}"));
        peer.ip(&format!("link set {dev} up"));
    }
    // `ip route get ... iif` answers for a forwarded packet only where forwarding is on.
    router.run(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    for route in [
        "default via 192.168.50.254",
        "10.244.1.0/24 via 10.1.0.2",
        "10.50.0.0/16 nexthop via 192.168.50.2 weight 1 nexthop via 10.1.0.3 weight 2",
        "10.52.0.0/16 via 10.1.0.9 metric 10",
        "10.52.0.0/16 via 192.168.50.9 metric 5",
        "10.52.7.0/24 via 172.16.0.7 src 172.16.0.1",
        "10.70.0.1 via 10.1.0.7",
        "10.71.0.0/16 via 10.1.0.71 dev eth1 onlink",
        "blackhole 10.60.0.0/16",
        "unreachable 10.61.0.0/16",
        "prohibit 10.62.0.0/16",
        "10.8.0.0/16 via 10.1.0.2 table 100",
        "throw 10.8.1.0/24 table 100",
        "unreachable 10.7.0.0/16 table 100",
        "default via 10.1.0.254 table 100",
        "blackhole 10.9.0.0/16 table 101",
        "10.0.0.0/8 via 192.168.50.3 table 101",
        "prohibit 10.10.0.0/16 table 101",
        "default via 172.16.0.5 table 102",
        "10.11.0.0/16 via 172.16.0.11 table 103",
    ] {
        router.ip(&format!("route add {route}"));
    }
    for rule in [
        "pref 100 fwmark 0x10/0xff lookup 100",
        "pref 110 from 10.1.0.0/24 to 10.9.0.0/16 lookup 101",
        "pref 120 iif eth1 to 10.10.0.0/15 lookup 101",
        "pref 130 not fwmark 0x1/0x1 to 10.11.0.0/16 lookup 103",
        "pref 140 to 10.12.0.0/16 goto 160",
        "pref 150 to 10.12.0.0/16 blackhole",
        "pref 160 to 10.12.0.0/16 lookup 102",
        "pref 170 lookup main suppress_prefixlength 0",
        "pref 180 to 10.13.0.0/16 unreachable",
        "pref 190 to 10.14.0.0/16 prohibit",
        "pref 200 fwmark 0x20 lookup 101",
        "pref 210 to 10.15.0.0/16 goto 250",
    ] {
        router.ip(&format!("rule add {rule}"));
    }
    router
}

/// A small deterministic generator, so that a failure names a reproducible query.
pub(super) struct Xorshift(pub(super) u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

/// Destinations near every prefix the router knows, and a few anywhere.
fn destination(rng: &mut Xorshift) -> Ipv4Addr {
    const BASES: &[[u8; 2]] = &[
        [10, 244],
        [10, 50],
        [10, 52],
        [10, 70],
        [10, 71],
        [10, 60],
        [10, 61],
        [10, 62],
        [10, 8],
        [10, 7],
        [10, 9],
        [10, 10],
        [10, 11],
        [10, 12],
        [10, 13],
        [10, 14],
        [10, 15],
        [10, 1],
        [192, 168],
        [172, 16],
        [127, 0],
        [8, 8],
    ];
    let base = rng.pick(BASES);
    let third = *rng.pick(&[0u8, 1, 7, 50, 255]);
    let fourth = *rng.pick(&[0u8, 1, 2, 5, 255]);
    Ipv4Addr::new(base[0], base[1], third, fourth)
}

/// One question, asked of both.
#[derive(Debug, Clone)]
pub(super) struct Query {
    pub(super) dst: IpAddr,
    pub(super) mark: u32,
    /// A forwarded packet from this source arriving on this interface, else
    /// locally generated.
    pub(super) forwarded_from: Option<(IpAddr, &'static str)>,
    /// The output interface asked for (`ip route get ... oif`).
    pub(super) oif: Option<&'static str>,
}

/// The kernel's answer, reduced to what both sides state.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Answer {
    Routed {
        kind: String,
        gateway: Option<String>,
        dev: Option<String>,
        table: String,
        /// The source a local socket gets; `None` unless compared.
        prefsrc: Option<String>,
    },
    Error(&'static str),
}

/// `ip route get` in `router`; `with_source` keeps the source the kernel
/// chose (`prefsrc`) in the answer.
pub(super) fn ask_kernel(router: &Netns, query: &Query, with_source: bool) -> Answer {
    let dst = query.dst.to_string();
    let mark = format!("{:#x}", query.mark);
    let family = if query.dst.is_ipv6() { "-6" } else { "-4" };
    let mut argv = vec![
        "ip",
        family,
        "-j",
        "route",
        "get",
        dst.as_str(),
        "mark",
        mark.as_str(),
    ];
    let src;
    if let Some((from, iif)) = query.forwarded_from {
        src = from.to_string();
        argv.extend(["from", src.as_str(), "iif", iif]);
    }
    if let Some(oif) = query.oif {
        argv.extend(["oif", oif]);
    }
    let output = router.exec(&argv);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Answer::Error(match stderr.trim() {
            s if s.ends_with("Network is unreachable") => "ENETUNREACH",
            s if s.ends_with("No route to host") => "EHOSTUNREACH",
            s if s.ends_with("Permission denied") => "EACCES",
            s if s.ends_with("Invalid argument") => "EINVAL",
            other => panic!("ip route get {query:?}: unexpected error {other:?}"),
        });
    }
    let routes: Value =
        serde_json::from_slice(&output.stdout).expect("ip -j route get prints JSON");
    let route = &routes[0];
    let text = |field: &str| route[field].as_str().map(str::to_string);
    Answer::Routed {
        kind: text("type").unwrap_or_else(|| "unicast".into()),
        gateway: text("gateway"),
        dev: text("dev"),
        // iproute2 leaves the table out for main.
        table: text("table").unwrap_or_else(|| "main".into()),
        prefsrc: text("prefsrc").filter(|_| with_source),
    }
}

/// The model's answers: one per multipath branch.
pub(super) fn ask_model(fib: &Fib, query: &Query, with_source: bool) -> Vec<Answer> {
    let flow = FlowKey {
        src: query.forwarded_from.map(|(src, _)| src),
        iif: query.forwarded_from.map(|(_, iif)| iif.to_string()),
        oif: query.oif.map(str::to_string),
        mark: query.mark,
        ..FlowKey::to(query.dst)
    };
    // For a received packet the kernel tells only a source the route names.
    let forwarded = query.forwarded_from.is_some();
    match fib.lookup(&flow).outcome {
        LookupOutcome::Routed {
            route,
            route_type,
            paths,
            ..
        } => paths
            .into_iter()
            .map(|path| Answer::Routed {
                kind: route_type.as_str().to_string(),
                gateway: path.gateway.map(|g| g.to_string()),
                // The kernel delivers to its own addresses through the loopback device.
                dev: if route_type.as_str() == "local" {
                    Some("lo".into())
                } else {
                    path.dev
                },
                // No route (0.0.0.0's answer) names no table, which
                // iproute2 prints as it prints main: not at all.
                table: route.map_or_else(
                    || "main".into(),
                    |route| skoop::netstack::routing::table_name(&fib.routes[route].table),
                ),
                prefsrc: if forwarded {
                    route.and_then(|route| fib.routes[route].prefsrc)
                } else {
                    path.prefsrc
                }
                .filter(|_| with_source)
                .map(|src| src.to_string()),
            })
            .collect(),
        LookupOutcome::Failed { error, route, .. } => vec![Answer::Error(match (error, route) {
            (RouteError::NoRoute, _) => "ENETUNREACH",
            // An unreachable *rule* fails with ENETUNREACH, an unreachable route with EHOSTUNREACH.
            (RouteError::Unreachable, None) => "ENETUNREACH",
            (RouteError::Unreachable, Some(_)) => "EHOSTUNREACH",
            (RouteError::Prohibit, _) => "EACCES",
            (RouteError::Blackhole | RouteError::Martian, _) => "EINVAL",
        })],
        LookupOutcome::Unknown { reason } => {
            panic!("model answers unknown for {query:?}: {reason}")
        }
    }
}

/// `router`'s dump, collected with `skoop collect local`, read without a problem.
pub(super) fn collected(router: &Netns) -> NetnsDump {
    let dir = tempfile::tempdir().expect("temp dir");
    collect_local(&router.name, dir.path());
    let (dump, problems) = NetnsDump::load(dir.path());
    assert!(
        problems.is_empty(),
        "problems in the collected dump: {problems:?}"
    );
    dump
}

/// Asks the kernel and the model each of `queries`, and fails on any
/// disagreement; returns how often the kernel gave each kind of answer.
pub(super) fn compare(
    router: &Netns,
    fib: &Fib,
    queries: impl Iterator<Item = Query>,
    with_source: bool,
) -> std::collections::BTreeMap<String, usize> {
    let mut disagreements = Vec::new();
    let mut asked = 0;
    let mut by_answer = std::collections::BTreeMap::<String, usize>::new();
    for query in queries {
        let kernel = ask_kernel(router, &query, with_source);
        let model = ask_model(fib, &query, with_source);
        asked += 1;
        let key = match &kernel {
            Answer::Routed { kind, table, .. } => format!("{kind} table {table}"),
            Answer::Error(errno) => errno.to_string(),
        };
        *by_answer.entry(key).or_default() += 1;
        if !model.contains(&kernel) {
            disagreements.push(format!(
                "{query:?}\n  kernel: {kernel:?}\n  model:  {model:?}"
            ));
        }
    }
    eprintln!("{asked} route lookups compared; kernel answers: {by_answer:?}");
    assert!(
        disagreements.is_empty(),
        "{} of {asked} lookups disagree:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    by_answer
}

#[test]
fn route_lookup_agrees_with_the_kernel_on_generated_queries() {
    let Availability::Run = availability() else {
        return;
    };
    let mut lab = Lab::new();
    let router = build(&mut lab);
    let dump = collected(&router);
    let fib = Fib::from_dump(&dump, Family::Ipv4).expect("rules, routes and addresses collected");

    let mut rng = Xorshift(0x5eed_cafe_f00d);
    let queries = (0..400).map(|_| Query {
        dst: destination(&mut rng).into(),
        mark: *rng.pick(&[0, 0x10, 0x110, 0x11, 0x1, 0x20, 0x21]),
        forwarded_from: rng
            .pick(&[None, None, Some([10, 1, 0, 5]), Some([10, 1, 0, 1])])
            .map(|src| (IpAddr::from(src), "eth1")),
        oif: None,
    });
    let by_answer = compare(&router, &fib, queries, false);
    // The generated queries must exercise every kind of answer, or the comparison proves little.
    for expected in [
        "ENETUNREACH",
        "EHOSTUNREACH",
        "EACCES",
        "EINVAL",
        "local table local",
        "unicast table 100",
        "unicast table 101",
        "unicast table 102",
        "unicast table main",
        "broadcast table local",
    ] {
        assert!(
            by_answer.contains_key(expected),
            "no query produced {expected}: {by_answer:?}"
        );
    }
}

/// Issue 36: a locally generated packet to 0.0.0.0 is the sender's own (the
/// kernel sends it to its source through `lo`, reading no rule: not even
/// the fwmark rules), from the output device's address when one is asked
/// for (a device without one takes another's; a down one is unreachable),
/// and martian when received.
#[test]
fn the_unspecified_destination_agrees_with_the_kernel() {
    let Availability::Run = availability() else {
        return;
    };
    let mut lab = Lab::new();
    let router = build(&mut lab);
    router.ip("link add bare type veth peer name bare-peer");
    router.ip("link set bare up");
    router.ip("link add idle type veth peer name idle-peer");
    router.ip("addr add 10.99.0.1/24 dev idle");
    let dump = collected(&router);
    let fib = Fib::from_dump(&dump, Family::Ipv4).expect("rules, routes and addresses collected");

    let unspecified = IpAddr::from(Ipv4Addr::UNSPECIFIED);
    let mut queries = Vec::new();
    for mark in [0, 0x10, 0x20] {
        for oif in [
            None,
            Some("eth0"),
            Some("eth2"),
            Some("lo"),
            Some("bare"),
            Some("idle"),
        ] {
            queries.push(Query {
                dst: unspecified,
                mark,
                forwarded_from: None,
                oif,
            });
        }
    }
    queries.push(Query {
        dst: unspecified,
        mark: 0,
        forwarded_from: Some((IpAddr::from([10, 1, 0, 5]), "eth1")),
        oif: None,
    });
    let by_answer = compare(&router, &fib, queries.into_iter(), true);
    assert_eq!(
        by_answer.keys().collect::<Vec<_>>(),
        ["EINVAL", "ENETUNREACH", "local table main"],
        "the queries exercise a local answer, a down device and a received packet"
    );
}
