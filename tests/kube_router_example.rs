//! `examples/kube-router` (real lab output: the real kube-router on two
//! nodes, kube-proxy for the Services, and a NetworkPolicy isolating
//! node-2's pods for ingress). kube-router's firewall is iptables and
//! ipsets, which the engine models; the kube-router pack is detected from
//! the DaemonSet and names, at the hop where the path is rejected, the
//! NetworkPolicy behind the pod's firewall chain and the ipset holding the
//! pod. Pods of one node reach each other on kube-bridge. And the pack's
//! own tests (real lab output, a fault each) pass.

mod common;

use std::path::Path;

use skoop::engine::{self, Disposition, Protocol};

use common::skoop;

const EXAMPLE: &str = "examples/kube-router";

/// web-0 (node-1) to `to`, over TCP, with the built-in packs.
fn diagnose(to: &str) -> engine::Diagnosis {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    common::diagnose(
        &common::load(&root),
        "default/web-0",
        to,
        Protocol::Tcp,
        None,
    )
}

#[test]
fn pods_of_one_node_reach_each_other_on_kube_bridge() {
    let diagnosis = diagnose("default/web-1:8080");
    assert_eq!(
        diagnosis.disposition(),
        Disposition::Delivered,
        "{:#?}",
        diagnosis.findings
    );
    assert!(
        diagnosis
            .findings
            .iter()
            .all(|f| !f.id.as_str().starts_with("kube-router.")),
        "{:#?}",
        diagnosis.findings
    );
}

#[test]
fn the_networkpolicy_behind_the_rejecting_chain_is_named_with_its_ipset() {
    common::assert_kube_router_names_isolate_node_2(&diagnose("default/web-3:8080"));
}

#[test]
fn the_binary_names_the_policy_and_exits_1() {
    let (code, out) = skoop(&[
        "diagnose",
        "--snapshot",
        EXAMPLE,
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("denied_by_netfilter"), "{out}");
    assert!(out.contains("default/isolate-node-2"), "{out}");
    assert!(
        out.contains("packs: core, kube-proxy, networkpolicy, kube-router (CNI)"),
        "{out}"
    );
}

#[test]
fn the_example_is_detected_as_kube_router_and_every_check_holds() {
    let (code, out) = skoop(&[
        "packs",
        "eval",
        "plugins/kube-router",
        "--snapshot",
        EXAMPLE,
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(
            "detection: DaemonSet kube-system/kube-router, ConfigMap kube-system/kube-router-cfg"
        ),
        "{out}"
    );
}

#[test]
fn kube_router_pack_lints_clean_and_its_tests_pass() {
    common::assert_pack_lints_clean_and_passes(
        "plugins/kube-router",
        &[
            "healthy",
            "route-missing",
            "bridge-down",
            "ip-forward-off",
            "firewall-jump-missing",
            "masquerade-missing",
        ],
    );
}
