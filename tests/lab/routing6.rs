//! `skoop`'s IPv6 route lookup against the kernel's own (`ip -6 route get`):
//! a router namespace with IPv6 policy rules (fwmark, from/to, iif, not,
//! goto, suppress_prefixlength, blackhole/unreachable/prohibit actions),
//! several tables, every failing route type, throw, multipath, metrics, a
//! link-local and an onlink gateway, a route with its own source, two
//! routes of one prefix and metric by different devices, and addresses that
//! are deprecated, tentative or unique local, asked hundreds of generated
//! questions. The device, gateway, table and the source address the kernel
//! chooses must agree.

use std::net::{IpAddr, Ipv6Addr};

use skoop::net::Family;
use skoop::netstack::routing::Fib;

use crate::lab::{Availability, Lab, Netns, availability};
use crate::routing::{Query, Xorshift, collected, compare};

/// Builds the router namespace (and the peer its veths lead to).
fn build(lab: &mut Lab) -> Netns {
    let router = lab.netns("router6");
    let peer = lab.netns("peer6");
    // Addresses are usable at once (no duplicate address detection), but
    // for eth3's, which stays tentative for the whole test.
    for ns in [&router, &peer] {
        for setting in [
            "net.ipv6.conf.all.accept_dad=0",
            "net.ipv6.conf.default.accept_dad=0",
            "net.ipv6.conf.all.forwarding=1",
        ] {
            ns.run(&["sysctl", "-q", "-w", setting]);
        }
    }
    for dev in ["eth0", "eth1", "eth2", "eth3"] {
        router.ip(&format!(
            "link add {dev} type veth peer name {dev} netns {}",
            peer.name
        ));
    }
    for setting in [
        "net.ipv6.conf.eth3.accept_dad=1",
        "net.ipv6.conf.eth3.dad_transmits=250",
    ] {
        router.run(&["sysctl", "-q", "-w", setting]);
    }
    for (dev, address) in [
        ("eth0", "2001:db8:50::1/64"),
        ("eth1", "fd00:1::1/64"),
        ("eth1", "2001:db8:10::1/64"),
        ("eth2", "2001:db8:16::1/64"),
        ("eth2", "2001:db8:17::1/64 preferred_lft 0"),
        ("eth3", "2001:db8:30::1/64"),
    ] {
        router.ip(&format!("-6 addr add {address} dev {dev}"));
    }
    for dev in ["eth0", "eth1", "eth2", "eth3"] {
        router.ip(&format!("link set {dev} up"));
        peer.ip(&format!("link set {dev} up"));
    }
    for route in [
        "add default via 2001:db8:50::fe",
        "add 2001:db8:a::/48 nexthop via 2001:db8:50::2 weight 1 nexthop via fd00:1::3 weight 2",
        "add 2001:db8:52::/48 via fd00:1::9 metric 10",
        "add 2001:db8:52::/48 via 2001:db8:50::9 metric 5",
        "add 2001:db8:52:7::/64 via 2001:db8:16::7 src 2001:db8:16::1",
        "add 2001:db8:70::1 via fd00:1::7",
        "add 2001:db8:71::/48 via fd00:1::71 dev eth1 onlink",
        "add 2001:db8:e::/48 via fe80::99 dev eth1",
        "add 2001:db8:40::/48 dev eth1",
        "append 2001:db8:40::/48 dev eth2",
        "add blackhole 2001:db8:60::/48",
        "add unreachable 2001:db8:61::/48",
        "add prohibit 2001:db8:62::/48",
        "add 2001:db8:8::/48 via fd00:1::2 table 100",
        "add throw 2001:db8:8:1::/64 table 100",
        "add unreachable 2001:db8:7::/48 table 100",
        "add default via fd00:1::fe table 100",
        "add blackhole 2001:db8:9::/48 table 101",
        "add 2001:db8::/32 via 2001:db8:50::3 table 101",
        "add prohibit 2001:db8:1010::/48 table 101",
        "add default via 2001:db8:16::5 table 102",
        "add 2001:db8:11::/48 via 2001:db8:16::11 table 103",
    ] {
        router.ip(&format!("-6 route {route}"));
    }
    for rule in [
        "pref 100 fwmark 0x10/0xff lookup 100",
        "pref 110 from fd00:1::/64 to 2001:db8:9::/48 lookup 101",
        "pref 120 iif eth1 to 2001:db8:1010::/47 lookup 101",
        "pref 130 not fwmark 0x1/0x1 to 2001:db8:11::/48 lookup 103",
        "pref 140 to 2001:db8:12::/48 goto 160",
        "pref 150 to 2001:db8:12::/48 blackhole",
        "pref 160 to 2001:db8:12::/48 lookup 102",
        "pref 170 lookup main suppress_prefixlength 0",
        "pref 180 to 2001:db8:13::/48 unreachable",
        "pref 190 to 2001:db8:14::/48 prohibit",
        "pref 200 fwmark 0x20 lookup 101",
    ] {
        router.ip(&format!("-6 rule add {rule}"));
    }
    router
}

/// Destinations near every prefix and address the router knows, and a few
/// anywhere (the anycast and link-local ones included).
fn destination(rng: &mut Xorshift) -> IpAddr {
    const BASES: &[[u16; 4]] = &[
        [0x2001, 0xdb8, 0xa, 0],
        [0x2001, 0xdb8, 0x52, 0],
        [0x2001, 0xdb8, 0x52, 7],
        [0x2001, 0xdb8, 0x70, 0],
        [0x2001, 0xdb8, 0x71, 0],
        [0x2001, 0xdb8, 0xe, 0],
        [0x2001, 0xdb8, 0x40, 0],
        [0x2001, 0xdb8, 0x60, 0],
        [0x2001, 0xdb8, 0x61, 0],
        [0x2001, 0xdb8, 0x62, 0],
        [0x2001, 0xdb8, 0x8, 0],
        [0x2001, 0xdb8, 0x8, 1],
        [0x2001, 0xdb8, 0x7, 0],
        [0x2001, 0xdb8, 0x9, 0],
        [0x2001, 0xdb8, 0x1010, 0],
        [0x2001, 0xdb8, 0x1011, 0],
        [0x2001, 0xdb8, 0x11, 0],
        [0x2001, 0xdb8, 0x12, 0],
        [0x2001, 0xdb8, 0x13, 0],
        [0x2001, 0xdb8, 0x14, 0],
        [0x2001, 0xdb8, 0x50, 0],
        [0x2001, 0xdb8, 0x10, 0],
        [0x2001, 0xdb8, 0x16, 0],
        [0x2001, 0xdb8, 0x17, 0],
        [0x2001, 0xdb8, 0x30, 0],
        [0x2001, 0xdb8, 0x99, 0],
        [0xfd00, 1, 0, 0],
        [0xfd12, 0, 0, 0],
        [0xfe80, 0, 0, 0],
        [0x2a00, 0x1450, 0, 0],
    ];
    if *rng.pick(&[
        false, false, false, false, false, false, false, false, false, true,
    ]) {
        return IpAddr::V6(Ipv6Addr::LOCALHOST);
    }
    let base = rng.pick(BASES);
    let last = *rng.pick(&[0u16, 1, 2, 5, 0x99, 0xffff]);
    IpAddr::V6(Ipv6Addr::new(
        base[0], base[1], base[2], base[3], 0, 0, 0, last,
    ))
}

#[test]
fn ipv6_route_lookup_and_source_agree_with_the_kernel_on_generated_queries() {
    let Availability::Run = availability() else {
        return;
    };
    let mut lab = Lab::new();
    let router = build(&mut lab);
    let dump = collected(&router);
    let fib = Fib::from_dump(&dump, Family::Ipv6).expect("IPv6 rules, routes and addresses");

    let mut rng = Xorshift(0x6eed_cafe_f00d);
    let forwarded: [Option<(IpAddr, &str)>; 6] = [
        None,
        None,
        None,
        Some(("fd00:1::5".parse().unwrap(), "eth1")),
        Some(("2001:db8:16::9".parse().unwrap(), "eth2")),
        Some(("2001:db8:50::1".parse().unwrap(), "eth1")),
    ];
    let queries = (0..400).map(|_| {
        let forwarded_from = *rng.pick(&forwarded);
        Query {
            dst: destination(&mut rng),
            mark: *rng.pick(&[0, 0x10, 0x110, 0x11, 0x1, 0x20, 0x21]),
            forwarded_from,
            oif: if forwarded_from.is_none() {
                *rng.pick(&[None, None, None, Some("eth2")])
            } else {
                None
            },
        }
    });
    let by_answer = compare(&router, &fib, queries, true);
    // The generated queries must exercise every kind of answer, or the comparison proves little.
    for expected in [
        "ENETUNREACH",
        "EHOSTUNREACH",
        "EACCES",
        "EINVAL",
        "local table local",
        "anycast table local",
        "unicast table 100",
        "unicast table 101",
        "unicast table 102",
        "unicast table 103",
        "unicast table main",
    ] {
        assert!(
            by_answer.contains_key(expected),
            "no query produced {expected}: {by_answer:?}"
        );
    }
}
