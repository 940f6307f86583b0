//! The Calico pack: its own tests pass, and its walker hooks answer what
//! calico-node does with a packet on the lab's VXLAN and BGP examples
//! (node-1 holds block 10.244.60.64/26, node-2 10.244.177.128/26).

mod common;

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use rhai::{Dynamic, Map};
use skoop::net::Protocol;
use skoop::packs::{HopScope, LoadedPacks, PackSource, Packet, PodRef};
use skoop::snapshot::{NetnsId, Snapshot};

use common::skoop;

const VXLAN: &str = "examples/calico-vxlan";
const BGP: &str = "examples/calico-bgp";

#[test]
fn calico_pack_lints_clean_and_its_tests_pass() {
    assert_eq!(skoop(&["packs", "lint", "plugins/calico"]).0, Some(0));
    let (code, out) = skoop(&["packs", "test", "plugins/calico"]);
    assert_eq!(code, Some(0), "{out}");
    for case in [
        "healthy-vxlan",
        "healthy-bgp",
        "ipip-healthy",
        "vxlan-fdb-missing",
    ] {
        assert!(
            out.contains(&format!("test plugins/calico/tests/{case} ... ok")),
            "{out}"
        );
    }
    assert!(out.trim_end().ends_with(" passed, 0 failed"), "{out}");
}

fn calico() -> LoadedPacks {
    let source = PackSource::read(Path::new("plugins/calico")).expect("readable");
    let (loaded, problems) = LoadedPacks::load(vec![source], &[]);
    assert!(problems.is_empty(), "{problems:?}");
    loaded
}

fn snapshot(dir: &str) -> Arc<Snapshot> {
    let (snapshot, problems) = Snapshot::load(Path::new(dir)).expect("a snapshot");
    assert!(problems.is_empty(), "{problems:?}");
    Arc::new(snapshot)
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

/// A TCP packet from `src` to `dst` at a hop in `netns`.
fn hop(snapshot: &Arc<Snapshot>, netns: NetnsId, src: &str, dst: &str) -> Arc<HopScope> {
    let packet = Packet {
        src: ip(src),
        dst: ip(dst),
        protocol: Protocol::Tcp,
        sport: Some(40000),
        dport: Some(8080),
        mark: 0,
        length: 1400,
    };
    Arc::new(HopScope {
        forwarding: true,
        ..HopScope::new(snapshot.clone(), netns, packet)
    })
}

fn node_1() -> NetnsId {
    NetnsId::Host {
        node: "node-1".into(),
    }
}

fn web_0() -> NetnsId {
    NetnsId::Pod {
        node: "node-1".into(),
        namespace: "default".into(),
        name: "web-0".into(),
    }
}

/// Calls `hook` with the hop's packet and returns its answer.
fn call(packs: &LoadedPacks, hook: &str, hop: &Arc<HopScope>) -> Dynamic {
    packs
        .call_hook("calico", hook, hop, Dynamic::from(hop.packet.clone()))
        .unwrap_or_else(|finding| panic!("{hook}: {}", finding.message))
}

/// The named fields of a map answer, as text (addresses as written).
fn fields(answer: Dynamic, names: &[&str]) -> Vec<String> {
    let map = answer.try_cast::<Map>().expect("a map");
    let text = |value: &Dynamic| match value.clone().try_cast::<IpAddr>() {
        Some(address) => address.to_string(),
        None => value.to_string(),
    };
    names
        .iter()
        .map(|name| map.get(*name).map(text).unwrap_or_default())
        .collect()
}

#[test]
fn vxlan_packets_to_a_remote_block_are_encapsulated_to_the_peers_address() {
    let (packs, snapshot) = (calico(), snapshot(VXLAN));
    // web-0 to web-3.
    let remote = hop(&snapshot, node_1(), "10.244.60.65", "10.244.177.130");
    assert_eq!(
        fields(
            call(&packs, "encapsulation", &remote),
            &[
                "kind",
                "dev",
                "outer_src",
                "outer_dst",
                "vni",
                "port",
                "overhead"
            ]
        ),
        [
            "vxlan",
            "vxlan.calico",
            "172.18.0.11",
            "172.18.0.12",
            "4096",
            "4789",
            "50"
        ]
    );
    assert_eq!(
        fields(call(&packs, "next_hop", &remote), &["dev", "via"]),
        ["vxlan.calico", "10.244.177.128"]
    );
    // web-0 to web-1.
    let local = hop(&snapshot, node_1(), "10.244.60.65", "10.244.60.66");
    assert!(
        call(&packs, "encapsulation", &local).is_unit(),
        "a local pod is not"
    );
    assert_eq!(
        fields(call(&packs, "next_hop", &local), &["dev"]),
        ["cali0761ccbeace"],
        "a local pod is reached through its cali veth"
    );
}

#[test]
fn bgp_packets_to_a_remote_block_are_routed_to_the_peer_unencapsulated() {
    let (packs, snapshot) = (calico(), snapshot(BGP));
    let remote = hop(&snapshot, node_1(), "10.244.60.64", "10.244.177.129");
    assert!(call(&packs, "encapsulation", &remote).is_unit());
    assert_eq!(
        fields(call(&packs, "next_hop", &remote), &["dev", "via"]),
        ["eth0", "172.18.0.12"]
    );
}

#[test]
fn a_pod_sends_everything_to_the_link_local_gateway() {
    let (packs, snapshot) = (calico(), snapshot(VXLAN));
    let out = hop(&snapshot, web_0(), "10.244.60.65", "10.244.177.130");
    assert_eq!(
        fields(call(&packs, "next_hop", &out), &["dev", "via"]),
        ["eth0", "169.254.1.1"]
    );
    assert_eq!(call(&packs, "masquerade", &out).as_bool(), Ok(false));
}

#[test]
fn nat_outgoing_masquerades_only_what_leaves_every_pool() {
    let (packs, snapshot) = (calico(), snapshot(VXLAN));
    let masquerades = |dst: &str| {
        call(
            &packs,
            "masquerade",
            &hop(&snapshot, node_1(), "10.244.60.65", dst),
        )
    };
    assert_eq!(masquerades("8.8.8.8").as_bool(), Ok(true));
    assert_eq!(masquerades("10.244.177.130").as_bool(), Ok(false));
}

#[test]
fn pod_interface_is_the_hashed_cali_veth_at_the_tunnels_mtu() {
    let (packs, snapshot) = (calico(), snapshot(VXLAN));
    let at = hop(&snapshot, node_1(), "10.244.177.130", "10.244.60.65");
    let pod = packs
        .call_hook("calico", "pod_interface", &at, {
            let pod = PodRef::new(&snapshot, "default", "web-0").expect("web-0");
            Dynamic::from(pod)
        })
        .unwrap_or_else(|finding| panic!("{}", finding.message));
    assert_eq!(
        fields(pod, &["host_veth", "pod_dev", "mtu"]),
        ["cali0d7763386da", "eth0", "1450"]
    );
}

/// The walker asks about namespaces the snapshot lacks: the cluster's
/// objects still tell where a packet goes and how it is tunnelled.
#[test]
fn a_node_without_a_dump_still_routes_by_the_cluster_objects() {
    let packs = calico();
    let node_2 = || NetnsId::Host {
        node: "node-2".into(),
    };
    let vxlan = snapshot("plugins/calico/tests/vxlan-fdb-missing/snapshot");
    assert!(
        !vxlan.namespaces.contains_key(&node_2()),
        "only node-1 is dumped"
    );
    let back = hop(&vxlan, node_2(), "10.244.177.130", "10.244.60.65");
    assert_eq!(
        fields(
            call(&packs, "encapsulation", &back),
            &["kind", "outer_src", "outer_dst"]
        ),
        ["vxlan", "172.18.0.12", "172.18.0.11"]
    );
    let bgp = snapshot("plugins/calico/tests/bgp-route-missing/snapshot");
    let back = hop(&bgp, node_2(), "10.244.177.129", "10.244.60.64");
    let answer = call(&packs, "next_hop", &back)
        .try_cast::<Map>()
        .expect("a map");
    assert_eq!(
        answer["via"].clone().try_cast::<IpAddr>(),
        Some(ip("172.18.0.11"))
    );
    assert!(
        answer["dev"].is_unit(),
        "only node-2's dump could name its device"
    );
}
