//! IPIP links in the walker, on the hand-built Flannel IPIP snapshot
//! (`tests/fixtures/flannel-ipip`, edited from the VXLAN example: this
//! kernel has no ipip module) and edits of it.

mod common;

use skoop::engine::HopId;
use std::path::Path;

use common::{copy_snapshot, diagnose, edit_json, load, only, set_mtu, web_0_to_web_3, with_id};
use serde_json::json;
use skoop::engine::{Diagnosis, Disposition, PacketSize, Protocol, Step};

const FIXTURE: &str = "tests/fixtures/flannel-ipip";
const NODE_1: &str = "nodes/node-1/host";
const NODE_2: &str = "nodes/node-2/host";

/// The steps of the first visit of `hop`.
fn steps(diagnosis: &Diagnosis, hop: &str) -> Vec<Step> {
    let index = diagnosis.paths[0]
        .hops
        .iter()
        .find(|&&index| diagnosis.hop(index).id.to_string() == hop)
        .unwrap_or_else(|| panic!("{hop} is on the path"));
    diagnosis
        .hop(*index)
        .steps
        .iter()
        .map(|step| step.step.clone())
        .collect()
}

/// Takes `node`'s flannel.ipip down as the kernel does: flags without UP,
/// and the routes through it gone.
fn take_down(dir: &Path, node: &str) {
    edit_json(&dir.join(node).join("ip-link.json"), |links| {
        let tunnel = links
            .iter_mut()
            .find(|l| l["ifname"] == "flannel.ipip")
            .unwrap();
        tunnel["flags"] = json!(["NOARP"]);
        tunnel["operstate"] = "DOWN".into();
    });
    edit_json(&dir.join(node).join("ip-route.json"), |routes| {
        routes.retain(|r| r["dev"] != "flannel.ipip")
    });
}

#[test]
fn pod_to_pod_across_ipip_is_encapsulated_to_the_remote_node_and_delivered() {
    let dir = copy_snapshot(FIXTURE);
    let diagnosis = web_0_to_web_3(dir.path());
    assert_eq!(
        diagnosis.disposition(),
        Disposition::Delivered,
        "{:#?}",
        diagnosis.findings
    );
    assert!(diagnosis.findings.is_empty(), "{:#?}", diagnosis.findings);
    assert!(steps(&diagnosis, "node-1").contains(&Step::Encapsulated {
        device: "flannel.ipip".into(),
        outer: "172.18.0.11 -> 172.18.0.12 ipip [10.244.1.2 -> 10.244.2.3:8080 tcp]".into(),
    }));
    assert!(steps(&diagnosis, "node-2").contains(&Step::Decapsulated {
        device: "flannel.ipip".into(),
        inner: "10.244.1.2 -> 10.244.2.3:8080 tcp".into(),
    }));
}

#[test]
fn an_ipip_device_down_on_the_receiving_node_drops_the_tunnelled_packet() {
    let dir = copy_snapshot(FIXTURE);
    take_down(dir.path(), NODE_2);
    let diagnosis = web_0_to_web_3(dir.path());
    assert_eq!(diagnosis.disposition(), Disposition::NoListener);
    let finding = only(&diagnosis, "kernel.ipip.no-device");
    assert_eq!(finding.about.hop, HopId::node("node-2"));
    assert!(
        finding.message.contains("flannel.ipip") && finding.message.contains("is down"),
        "{}",
        finding.message
    );
}

#[test]
fn an_ipip_device_down_on_the_sending_node_takes_its_routes_with_it() {
    let dir = copy_snapshot(FIXTURE);
    take_down(dir.path(), NODE_1);
    let diagnosis = web_0_to_web_3(dir.path());
    assert_eq!(diagnosis.disposition(), Disposition::ExitsCluster);
    assert_eq!(
        with_id(&diagnosis, "kernel.route.leaves-cluster")[0]
            .about
            .hop,
        HopId::node("node-1")
    );
}

#[test]
fn a_node_without_an_ipip_device_cannot_decapsulate() {
    let dir = copy_snapshot(FIXTURE);
    let host = dir.path().join(NODE_2);
    for file in ["ip-link.json", "ip-addr.json"] {
        edit_json(&host.join(file), |items| {
            items.retain(|i| i["ifname"] != "flannel.ipip")
        });
    }
    edit_json(&host.join("ip-route.json"), |routes| {
        routes.retain(|r| r["dev"] != "flannel.ipip")
    });
    let diagnosis = web_0_to_web_3(dir.path());
    assert_eq!(diagnosis.disposition(), Disposition::NoListener);
    let finding = only(&diagnosis, "kernel.ipip.no-device");
    assert_eq!(finding.about.hop, HopId::node("node-2"));
    assert!(
        finding
            .message
            .contains("no IPIP device in node-2 takes the tunnelled packet from 172.18.0.11"),
        "{}",
        finding.message
    );
}

#[test]
fn a_tunnel_with_a_fixed_remote_needs_no_gateway_and_the_most_specific_device_decapsulates() {
    let dir = copy_snapshot(FIXTURE);
    let node_1 = dir.path().join(NODE_1);
    edit_json(&node_1.join("ip-link.json"), |links| {
        let tunnel = links
            .iter_mut()
            .find(|l| l["ifname"] == "flannel.ipip")
            .unwrap();
        tunnel["linkinfo"]["info_data"]["remote"] = "172.18.0.12".into();
    });
    edit_json(&node_1.join("ip-route.json"), |routes| {
        let route = routes
            .iter_mut()
            .find(|r| r["dst"] == "10.244.2.0/24")
            .unwrap();
        route.as_object_mut().unwrap().remove("gateway");
        route["flags"] = json!([]);
        route["scope"] = "link".into();
    });
    // node-2 also has Calico's catch-all tunl0 (remote any, local any).
    edit_json(&dir.path().join(NODE_2).join("ip-link.json"), |links| {
        links.push(
            json!({"ifindex": 40, "ifname": "tunl0", "flags": ["NOARP", "UP", "LOWER_UP"],
            "mtu": 1480, "operstate": "UNKNOWN", "link_type": "ipip", "address": "0.0.0.0",
            "linkinfo": {"info_kind": "ipip", "info_data": {"proto": "ipip", "remote": "any",
            "local": "any", "ttl": 0, "pmtudisc": true}}}),
        );
    });
    let diagnosis = web_0_to_web_3(dir.path());
    assert_eq!(
        diagnosis.disposition(),
        Disposition::Delivered,
        "{:#?}",
        diagnosis.findings
    );
    assert!(steps(&diagnosis, "node-1").iter().any(|step| matches!(step,
        Step::Encapsulated { outer, .. } if outer.starts_with("172.18.0.11 -> 172.18.0.12 ipip"))));
    assert!(steps(&diagnosis, "node-2").iter().any(|step| matches!(step,
        Step::Decapsulated { device, .. } if device == "flannel.ipip")));
}

#[test]
fn the_outer_ipip_header_counts_against_the_underlay_mtu() {
    let dir = copy_snapshot(FIXTURE);
    set_mtu(dir.path(), NODE_1, "eth0", 1490);
    let ping = |size| {
        diagnose(
            &load(dir.path()),
            "default/web-0",
            "default/web-3",
            Protocol::Icmp,
            size,
        )
    };
    let fits = ping(Some(PacketSize::Bytes(1470)));
    assert_eq!(
        fits.disposition(),
        Disposition::Delivered,
        "{:#?}",
        fits.findings
    );
    let refused = ping(Some(PacketSize::InterfaceMtu));
    assert_eq!(refused.disposition(), Disposition::MtuExceeded);
    let finding = only(&refused, "kernel.mtu.exceeded");
    assert_eq!(finding.about.hop, HopId::node("node-1"));
    assert!(
        finding.message.contains(
            "the 1500-byte IPIP packet (1480 bytes inside, 20 of encapsulation) by eth0, whose MTU is 1490"
        ) && finding.message.contains(
            "flannel.ipip drops the packet it carries and answers ICMP fragmentation-needed (MTU 1470) to 10.244.1.2"
        ),
        "{}",
        finding.message
    );
    // Without --size, path MTU discovery copes: a warning.
    let probed = ping(None);
    assert_eq!(probed.disposition(), Disposition::Delivered);
    assert_eq!(
        with_id(&probed, "kernel.mtu.path")[0].about.hop,
        HopId::node("node-1")
    );
}
