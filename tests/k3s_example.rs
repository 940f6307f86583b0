//! `examples/k3s` (real lab output: k3s's embedded parts as k3s runs them,
//! flanneld reading the net-conf k3s writes, with no DaemonSet or
//! ConfigMap, kube-router's NetworkPolicy controller alone, kube-proxy,
//! and a NetworkPolicy isolating node-2's pods for ingress). The k3s pack
//! is detected from k3s's node annotation and composes the Flannel and
//! kube-router packs, which lend it their checks; the cluster network
//! flannel masquerades from is read from the server's `--cluster-cidr` in
//! that annotation. kube-router's pack alone misreads the cluster. And the
//! pack's own tests (real lab output, a fault each) pass. A k3s server
//! started with `--flannel-backend none` leaves the pods to another CNI,
//! whose pack answers alone.

mod common;

use std::fs;
use std::path::Path;

use serde_json::{Value, json};
use skoop::engine::{self, Disposition, Protocol};

use common::skoop;

const EXAMPLE: &str = "examples/k3s";

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

/// No finding of the k3s pack or of a part it is made of.
fn no_pack_finding(diagnosis: &engine::Diagnosis) {
    assert!(
        diagnosis.findings.iter().all(|f| {
            let id = f.id.as_str();
            !["k3s.", "flannel.", "kube-router."]
                .iter()
                .any(|p| id.starts_with(p))
        }),
        "{:#?}",
        diagnosis.findings
    );
}

#[test]
fn k3s_answers_for_the_cluster_and_its_parts_lend_their_checks() {
    let diagnosis = diagnose("default/web-1:8080");
    assert_eq!(
        diagnosis.disposition(),
        Disposition::Delivered,
        "{:#?}",
        diagnosis.findings
    );
    assert_eq!(
        diagnosis.packs,
        [
            "core",
            "kube-proxy",
            "networkpolicy",
            "flannel (part of k3s)",
            "k3s (CNI)",
            "kube-router (part of k3s)"
        ]
    );
    no_pack_finding(&diagnosis);
}

#[test]
fn the_networkpolicy_behind_kube_routers_rejecting_chain_is_named() {
    common::assert_kube_router_names_isolate_node_2(&diagnose("default/web-3:8080"));
}

/// Without a ConfigMap, flannel's network is k3s's `--cluster-cidr`: the
/// masquerade hook and check read it, and the flow leaves from the node.
#[test]
fn the_outside_is_reached_from_the_node_with_the_network_k3s_was_given() {
    let diagnosis = diagnose("198.51.100.10:8080");
    assert_eq!(diagnosis.disposition(), Disposition::ExitsCluster);
    assert!(diagnosis.succeeds(), "{:#?}", diagnosis.findings);
    let exit = diagnosis.exit().expect("the flow leaves the cluster");
    assert_eq!(
        exit.source.map(|s| s.to_string()).as_deref(),
        Some("172.18.0.11")
    );
    no_pack_finding(&diagnosis);
}

#[test]
fn the_example_is_detected_as_k3s_and_every_check_holds() {
    let (code, out) = skoop(&["packs", "eval", "plugins/k3s", "--snapshot", EXAMPLE]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("detection: node node-1 annotated k3s.io/node-args"),
        "{out}"
    );
    assert!(
        out.contains(" 0 failed, 0 cannot tell, 0 script errors"),
        "{out}"
    );
}

#[test]
fn kube_routers_pack_alone_misreads_a_k3s_cluster() {
    let (code, out) = skoop(&[
        "diagnose",
        "--snapshot",
        EXAMPLE,
        "--from",
        "default/web-0",
        "--to",
        "default/web-1:8080",
        "--cni",
        "kube-router",
    ]);
    assert_eq!(code, Some(3), "{out}");
    for finding in [
        "kube-router.bridge.device",
        "kube-router.route.remote-pod-cidr",
        "kube-router.bgp.listener",
    ] {
        assert!(out.contains(finding), "{out}");
    }
}

#[test]
fn k3s_pack_lints_clean_and_its_tests_pass() {
    common::assert_pack_lints_clean_and_passes(
        "plugins/k3s",
        &[
            "healthy",
            "route-missing",
            "cni0-down",
            "ip-forward-off",
            "policy-denied",
            "firewall-jump-missing",
            "masquerade-missing",
        ],
    );
}

/// A copy of the example whose server runs with `server_args` (the JSON
/// array of its `k3s.io/node-args`, as the annotation's text), with
/// `edit` applied to the Node objects besides; `packs eval plugins/k3s`'s
/// output on it.
fn eval_with_server_args(server_args: &str, edit: impl FnOnce(String) -> String) -> String {
    let copy = common::copy_snapshot(EXAMPLE);
    common::edit_text(&copy.path().join("cluster/nodes.core.json"), |text| {
        let lab = r#""[\"server\",\"--cluster-cidr\",\"10.42.0.0/16\",\"--service-cidr\",\"10.43.0.0/16\"]""#;
        assert!(text.contains(lab), "the example's server arguments changed");
        edit(text.replace(lab, server_args))
    });
    let snapshot = copy.path().to_str().expect("a UTF-8 path");
    let (_, out) = skoop(&["packs", "eval", "plugins/k3s", "--snapshot", snapshot]);
    out
}

/// The cluster network is the server's `--cluster-cidr`, the one k3s
/// writes into flanneld's net-conf.json: a pod CIDR outside it is named.
#[test]
fn the_cluster_network_is_the_servers_cluster_cidr() {
    let out = eval_with_server_args(
        r#""[\"server\",\"--cluster-cidr\",\"10.99.0.0/16\"]""#,
        |text| text,
    );
    assert!(
        out.contains("node-1's pod CIDR 10.42.0.0/24 is outside the cluster network 10.99.0.0/16"),
        "{out}"
    );
}

/// A server given no `--cluster-cidr` runs k3s's default, 10.42.0.0/16.
#[test]
fn without_cluster_cidr_the_network_is_k3ss_default() {
    let out = eval_with_server_args(r#""[\"server\"]""#, |text| {
        text.replace("10.42.1.0/24", "10.52.1.0/24")
    });
    assert!(
        out.contains("node-2's pod CIDR 10.52.1.0/24 is outside the cluster network 10.42.0.0/16"),
        "{out}"
    );
}

/// Agents' arguments say nothing of the network: with no server among the
/// nodes, the network is not guessed, and no pod CIDR is held against one.
#[test]
fn with_agents_alone_the_network_is_not_guessed() {
    let agent =
        r#""[\"agent\",\"--server\",\"https://172.18.0.11:6443\",\"--token\",\"********\"]""#;
    let out = eval_with_server_args(agent, |text| text.replace("10.42.1.0/24", "10.52.1.0/24"));
    assert!(!out.contains("outside the cluster network"), "{out}");
    assert!(
        out.contains("flannel.node.pod-cidr (object): 2 subjects, ok"),
        "{out}"
    );
}

/// Where node-2 was not dumped, the k3s pack's hooks (Flannel's, from its
/// lib) step over it: decapsulated from flannel.1, onto cni0, into the pod
/// by its bridge port, and the reply back through flannel.1.
#[test]
fn the_k3s_hooks_step_over_a_node_without_a_dump() {
    let copy = common::copy_snapshot("plugins/k3s/tests/healthy/snapshot");
    std::fs::remove_dir_all(copy.path().join("nodes/node-2")).expect("remove node-2's dumps");
    let snapshot = copy.path().to_str().expect("a UTF-8 path");
    let (code, out) = skoop(&[
        "diagnose",
        "--snapshot",
        snapshot,
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
        "-v",
    ]);
    assert_eq!(code, Some(0), "{out}");
    for step in [
        "delivered (assumed)",
        "pack k3s's intent stands in there",
        "flannel.1 decapsulates: 10.42.0.2 -> 10.42.1.3:8080 tcp",
        "route: dev cni0 (the next_hop of pack k3s)",
        "bridge cni0 forwards to port",
        "route: via 10.42.1.1 dev eth0 (the next_hop of pack k3s)",
        "route: via 10.42.0.0 dev flannel.1 (the next_hop of pack k3s)",
    ] {
        assert!(out.contains(step), "{step}: {out}");
    }
}

/// The backend is the server's `--flannel-backend`: a node whose flanneld
/// announces another has not been restarted since it changed.
#[test]
fn the_backend_is_the_servers_flannel_backend() {
    let out = eval_with_server_args(
        r#""[\"server\",\"--flannel-backend\",\"host-gw\"]""#,
        |text| text,
    );
    assert!(
        out.contains(
            "Node node-2: annotation flannel.alpha.coreos.com/backend-type: vxlan, \
             expected annotation flannel.alpha.coreos.com/backend-type: host-gw"
        ),
        "{out}"
    );
}

/// A dual-stack `--cluster-cidr` turns flannel's IPv6 on, as k3s writes
/// it into net-conf.json: the IPv6 VXLAN device is then expected.
#[test]
fn a_dual_stack_cluster_cidr_turns_flannels_ipv6_on() {
    let out = eval_with_server_args(
        r#""[\"server\",\"--cluster-cidr\",\"10.42.0.0/16,2001:cafe:42::/56\"]""#,
        |text| text,
    );
    assert!(out.contains("no device flannel-v6.1"), "{out}");
    assert!(!out.contains("outside the cluster network"), "{out}");
}

/// The Cilium example as k3s would annotate its nodes: node-1 a server run
/// with `server_args`, node-2 an agent.
fn k3s_beside_cilium(server_args: &[&str]) -> tempfile::TempDir {
    let dir = common::copy_snapshot("examples/cilium-vxlan");
    let nodes = dir.path().join("cluster/nodes.core.json");
    let mut list: Value = serde_json::from_str(&fs::read_to_string(&nodes).unwrap()).unwrap();
    for node in list["items"].as_array_mut().unwrap() {
        let args: Vec<&str> = if node["metadata"]["name"] == "node-1" {
            std::iter::once("server")
                .chain(server_args.iter().copied())
                .collect()
        } else {
            vec!["agent", "--server", "https://172.18.0.11:6443"]
        };
        node["metadata"]["annotations"]["k3s.io/node-args"] =
            json!(serde_json::to_string(&args).unwrap());
    }
    fs::write(&nodes, serde_json::to_string(&list).unwrap()).unwrap();
    dir
}

/// web-0 to web-1 (both on node-1) in the snapshot at `dir`.
fn web_0_to_web_1(dir: &Path) -> engine::Diagnosis {
    common::diagnose(
        &common::load(dir),
        "default/web-0",
        "default/web-1:8080",
        Protocol::Tcp,
        None,
    )
}

#[test]
fn a_k3s_server_without_its_flannel_is_ruled_out_and_the_cni_beside_it_answers() {
    let ids = |d: &engine::Diagnosis| -> Vec<String> {
        d.findings
            .iter()
            .map(|f| f.id.as_str().to_owned())
            .collect()
    };
    let cilium =
        web_0_to_web_1(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cilium-vxlan"));
    let without_flannel =
        k3s_beside_cilium(&["--flannel-backend", "none", "--disable-network-policy"]);
    let diagnosis = web_0_to_web_1(without_flannel.path());
    assert!(diagnosis.packs.contains(&"cilium (CNI)".to_owned()));
    assert_eq!(diagnosis.packs, cilium.packs);
    assert_eq!(diagnosis.disposition(), cilium.disposition());
    assert_eq!(ids(&diagnosis), ids(&cilium));

    // With its own flannel k3s applies on the same annotations.
    let with_flannel = k3s_beside_cilium(&["--cluster-cidr", "10.244.0.0/16"]);
    let diagnosis = web_0_to_web_1(with_flannel.path());
    assert!(
        diagnosis.packs.contains(&"k3s (CNI)".to_owned()),
        "{:?}",
        diagnosis.packs
    );

    let snapshot = without_flannel.path().to_str().unwrap();
    let (_, out) = skoop(&["packs", "eval", "plugins/k3s", "--snapshot", snapshot]);
    assert!(
        out.contains("detection: node node-1 annotated k3s.io/node-args\n  ruled out: k3s's server runs with --flannel-backend none: another CNI moves the pods' packets (its checks run anyway)"),
        "{out}"
    );
}
