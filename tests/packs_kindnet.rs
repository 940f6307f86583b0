//! The kindnet pack (`plugins/kindnet`, written with the pack format alone):
//! its own tests pass, and where the snapshot lacks a pod or a node its hooks
//! make the walker follow kindnet's routed veths (no bridge) and its
//! masquerade, on edited copies of the lab's example.

mod common;

use skoop::engine::HopId;
use std::path::Path;

use skoop::engine::{Disposition, LinkKind, Protocol};

use common::skoop;

const EXAMPLE: &str = "examples/kindnet";

#[test]
fn kindnet_pack_lints_clean_and_its_tests_pass() {
    assert_eq!(skoop(&["packs", "lint", "plugins/kindnet"]).0, Some(0));
    let (code, out) = skoop(&["packs", "test", "plugins/kindnet"]);
    assert_eq!(code, Some(0), "{out}");
    for case in [
        "healthy",
        "route-missing",
        "host-route-missing",
        "masquerade-chain-missing",
        "masquerade-jump-missing",
        "ip-forward-off",
        "pod-without-dump",
        "node-without-dump",
        "pod-subnet-not-collected",
        "healthy-dual-stack",
        "ipv6-route-missing",
        "ipv6-host-route-missing",
        "ipv6-default-route-missing",
        "ipv6-masquerade-bypassed",
        "dual-stack-node-without-dump",
    ] {
        assert!(
            out.contains(&format!("test plugins/kindnet/tests/{case} ... ok")),
            "{out}"
        );
    }
    assert!(out.trim_end().ends_with("15 passed, 0 failed"), "{out}");
}

#[test]
fn the_example_is_detected_as_kindnet_and_every_check_holds() {
    let (code, out) = skoop(&["packs", "eval", "plugins/kindnet", "--snapshot", EXAMPLE]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("detection: DaemonSet kube-system/kindnet"),
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with("17 checks over 43 subjects (18 skipped by their when): 0 failed, 0 cannot tell, 0 script errors"),
        "{out}"
    );
}

/// Regression (issue 18): a pod stepped over with the CNI's intent was shown
/// behind a `bridge_port` of an invented bridge, though kindnet has none.
/// Without web-3's dump, node-2 routes its /32 by the real veth; without
/// node-2's, by the veth the pack cannot name; a veth either way.
#[test]
fn a_kindnet_pod_without_a_dump_is_reached_by_a_routed_veth_not_a_bridge_port() {
    for (missing, from_interface) in [
        ("nodes/node-2/pods/default/web-3", "veth"),
        ("nodes/node-2", "(its veth, not in the snapshot)"),
    ] {
        let dir = common::copy_snapshot(EXAMPLE);
        std::fs::remove_dir_all(dir.path().join(missing)).unwrap();
        let diagnosis = common::web_0_to_web_3(dir.path());
        assert_eq!(diagnosis.disposition(), Disposition::Delivered, "{missing}");
        assert_eq!(diagnosis.assumed_by.as_deref(), Some("kindnet"));
        let kinds: Vec<LinkKind> = diagnosis.graph.edge_weights().map(|l| l.kind).collect();
        assert!(
            !kinds.contains(&LinkKind::BridgePort),
            "{missing}: {kinds:?}"
        );
        let into_pod = diagnosis
            .graph
            .edge_indices()
            .find(|&e| {
                let (_, to) = diagnosis.graph.edge_endpoints(e).unwrap();
                diagnosis.graph[to].id == HopId::pod("default", "web-3")
            })
            .map(|e| &diagnosis.graph[e])
            .expect("a link into web-3");
        assert_eq!(into_pod.kind, LinkKind::Veth, "{missing}");
        assert!(
            into_pod.from_interface.starts_with(from_interface),
            "{missing}: {into_pod:?}"
        );
        assert_eq!(into_pod.to_interface.as_deref(), Some("eth0"));
        let bridged = diagnosis
            .graph
            .node_weights()
            .flat_map(|hop| &hop.steps)
            .any(|s| format!("{:?}", s.step).starts_with("Bridged"));
        assert!(!bridged, "{missing}: a bridge step");
    }
}

#[test]
fn a_pod_of_a_node_without_a_dump_leaves_the_cluster_masqueraded_by_kindnet() {
    let dir = common::copy_snapshot(EXAMPLE);
    std::fs::remove_dir_all(dir.path().join("nodes/node-2")).unwrap();
    let snapshot = common::load(Path::new(dir.path()));
    let diagnosis = common::diagnose(
        &snapshot,
        "default/web-2",
        "198.51.100.10:8080",
        Protocol::Tcp,
        None,
    );
    assert_eq!(diagnosis.disposition(), Disposition::ExitsCluster);
    let exit = diagnosis.exit().expect("the path leaves the cluster");
    assert_eq!(exit.source, Some("172.18.0.12".parse().unwrap()));
    // Between pods nothing is masqueraded: the reply comes back to web-2.
    let diagnosis = common::diagnose(
        &snapshot,
        "default/web-2",
        "default/web-0:8080",
        Protocol::Tcp,
        None,
    );
    assert_eq!(diagnosis.disposition(), Disposition::Delivered);
    let steps: Vec<String> = diagnosis
        .graph
        .node_weights()
        .flat_map(|hop| hop.steps.iter().map(|s| format!("{:?}", s.step)))
        .collect();
    assert!(
        !steps.iter().any(|s| s.contains("masquerade")),
        "{steps:#?}"
    );
}

#[test]
fn a_path_stopped_before_the_destination_pod_still_runs_its_checks() {
    // web-3's veth on node-2 at 1400: node-2 cannot forward a 1500-byte
    // packet to it, and the path ends there, before web-3. The pod's own
    // check names the cause on its side.
    let dir = common::copy_snapshot(EXAMPLE);
    common::set_mtu(dir.path(), "nodes/node-2/host", "vethb6b629b1", 1400);
    let diagnosis = common::diagnose(
        &common::load(dir.path()),
        "default/web-0",
        "default/web-3",
        Protocol::Icmp,
        Some(skoop::engine::PacketSize::Bytes(1500)),
    );
    assert_eq!(diagnosis.disposition(), Disposition::MtuExceeded);
    assert!(
        diagnosis
            .graph
            .node_weights()
            .all(|hop| hop.id != HopId::pod("default", "web-3")),
        "the path stops before web-3"
    );
    let finding = common::only(&diagnosis, "kindnet.pod.mtu");
    assert!(
        finding
            .message
            .contains("its veth vethb6b629b1 on the node has MTU 1400"),
        "{}",
        finding.message
    );
}
