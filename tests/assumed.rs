//! `skoop diagnose` where the snapshot lacks a namespace's dump: the CNI
//! pack's intent stands in, and everything concluded from it is marked
//! assumed. `examples/flannel-vxlan-partial` is the VXLAN example without
//! node-2's dumps (node-2's host and its pods web-2 and web-3).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;

const PARTIAL: &str = "examples/flannel-vxlan-partial";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `skoop diagnose --snapshot SNAPSHOT ARGS -o json`: exit code and report.
fn diagnose(snapshot: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(root())
        .args(["diagnose", "--snapshot"])
        .arg(snapshot)
        .args(args)
        .args(["-o", "json"])
        .output()
        .expect("run skoop");
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code(), report)
}

fn partial(args: &[&str]) -> (Option<i32>, Value) {
    diagnose(Path::new(PARTIAL), args)
}

/// Each path's hops as `ID` or `ID*` (assumed).
fn path_hops(report: &Value, path: &Value) -> Vec<String> {
    path["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|index| {
            let hop = &report["hops"][index.as_u64().unwrap() as usize];
            let mark = if hop["assumed"] == true { "*" } else { "" };
            format!("{}{mark}", hop["id"].as_str().unwrap())
        })
        .collect()
}

/// The first finding with this id.
fn finding<'r>(report: &'r Value, id: &str) -> &'r Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

/// The first step of this kind in a hop.
fn step<'h>(hop: &'h Value, kind: &str) -> &'h Value {
    hop["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} step in {hop:#}"))
}

#[test]
fn pod_to_a_pod_on_a_node_without_dump_is_delivered_assumed_and_the_reply_comes_back() {
    let (code, report) = partial(&["--from", "default/web-0", "--to", "default/web-3:8080"]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["disposition"], "delivered");
    assert_eq!(report["assumed"], true);
    let [path] = report["paths"].as_array().unwrap().as_slice() else {
        panic!("one path: {report:#}");
    };
    assert_eq!(path["assumed"], true);
    assert_eq!(
        path_hops(&report, path),
        [
            "default/web-0",
            "node-1",
            "node-2*",
            "default/web-3*",
            "default/web-3*",
            "node-2*",
            "node-1",
            "default/web-0"
        ]
    );
    // Every step of an assumed hop is marked, no step of a real one is.
    for hop in report["hops"].as_array().unwrap() {
        for step in hop["steps"].as_array().unwrap() {
            assert_eq!(
                step.get("assumed").is_some(),
                hop["assumed"] == true,
                "{hop:#}"
            );
        }
    }
    // node-2 takes the VXLAN packet by flannel.1, as flannel intends, and the
    // reply arrives at the sender's socket.
    let decapsulated = step(&report["hops"][2], "decapsulated");
    assert_eq!(decapsulated["device"], "flannel.1");
    let last = report["hops"].as_array().unwrap().last().unwrap();
    assert_eq!(
        last["steps"].as_array().unwrap().last().unwrap()["socket"],
        "the sender's connection (the reply arrived)"
    );
    // One info finding per assumed namespace, naming the pack.
    let assumed: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "snapshot.assumed")
        .collect();
    let hops: Vec<&str> = assumed.iter().map(|f| f["hop"].as_str().unwrap()).collect();
    assert_eq!(hops, ["node-2", "default/web-3"]);
    for finding in assumed {
        assert_eq!(finding["severity"], "info");
        assert!(
            finding["message"]
                .as_str()
                .unwrap()
                .contains("pack flannel"),
            "{finding}"
        );
    }
}

#[test]
fn text_marks_the_verdict_the_assumed_hops_and_names_the_pack() {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(root())
        .args(["diagnose", "--snapshot", PARTIAL])
        .args([
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--detail",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("default/web-0 -> default/web-3:8080 (10.244.2.3:8080 tcp): delivered (assumed)")
    );
    assert_eq!(
        lines.next(),
        Some("  packs: core, kube-proxy, networkpolicy, flannel (CNI)")
    );
    assert_eq!(
        lines.next(),
        Some(
            "  assumed: the snapshot has no dump of node-2, default/web-3; pack flannel's intent stands in there"
        )
    );
    assert!(text.contains("\n  node-2 [node] (assumed)\n"), "{text}");
    assert!(text.contains("\n  node-1 [node]\n"), "{text}");
}

#[test]
fn a_pod_on_a_node_without_dump_can_be_the_source() {
    let (code, report) = partial(&["--from", "default/web-3", "--to", "default/web-0:8080"]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["disposition"], "delivered");
    let path = &report["paths"][0];
    assert_eq!(
        path_hops(&report, path),
        [
            "default/web-3*",
            "node-2*",
            "node-1",
            "default/web-0",
            "default/web-0",
            "node-1",
            "node-2*",
            "default/web-3*"
        ]
    );
}

#[test]
fn a_service_fans_out_to_backends_on_the_node_without_dump_as_well() {
    let (code, report) = partial(&["--from", "default/web-0", "--to", "svc/default/web"]);
    assert_eq!(code, Some(0), "{report:#}");
    let paths = report["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 4, "{report:#}");
    let mut backends: Vec<(String, bool)> = paths
        .iter()
        .map(|path| {
            assert_eq!(path["disposition"], "delivered", "{path}");
            let probability = path["probability"].as_f64().unwrap();
            assert!((probability - 0.25).abs() < 1e-6, "{path}");
            // The backend is the hop after node-1 (or beyond node-2).
            let hops = path_hops(&report, path);
            let backend = hops[2..]
                .iter()
                .find(|id| id.starts_with("default/"))
                .unwrap()
                .clone();
            (backend, path["assumed"] == true)
        })
        .collect();
    backends.sort();
    assert_eq!(
        backends,
        [
            ("default/web-0".to_string(), false),
            ("default/web-1".to_string(), false),
            ("default/web-2*".to_string(), true),
            ("default/web-3*".to_string(), true),
        ]
    );
    // node-1 made the DNAT, so node-1 undoes it for every reply.
    let text = report.to_string();
    assert_eq!(text.matches("un-dnat").count(), 4, "{text}");
}

/// With no CNI pack applied (`--cni none`), a missing dump ends the path as
/// insufficient_info where the missing namespace would be needed, naming
/// it — never a guessed verdict, never an error.
#[test]
fn without_a_cni_pack_a_missing_dump_is_insufficient_info_where_it_is_needed() {
    let cases = [
        (
            "nodes/node-2/pods/default/web-3",
            "node-2",
            "pod default/web-3's",
        ),
        ("nodes/node-1/host", "default/web-0", "node-1"),
        (
            "nodes/node-1/pods/default/web-0",
            "default/web-0",
            "default/web-0",
        ),
        ("nodes/node-2/host", "node-1", "node-2"),
    ];
    for (removed, hop, named) in cases {
        let dir = copy_without("examples/flannel-vxlan", &[removed]);
        let (code, report) = diagnose(
            dir.path(),
            &[
                "--from",
                "default/web-0",
                "--to",
                "default/web-3:8080",
                "--cni",
                "none",
            ],
        );
        assert_eq!(code, Some(1), "{removed}");
        assert_eq!(
            report["disposition"], "insufficient_info",
            "{removed}: {report:#}"
        );
        assert_eq!(report["assumed"], false, "{removed}");
        let finding = &report["findings"][0];
        assert_eq!(finding["id"], "snapshot.missing", "{removed}: {finding}");
        assert_eq!(finding["hop"], hop, "{removed}: {finding}");
        assert!(
            finding["message"].as_str().unwrap().contains(named),
            "{removed}: {finding}"
        );
    }
}

#[test]
fn a_port_the_pod_does_not_declare_is_insufficient_info_not_a_guess() {
    let (code, report) = partial(&["--from", "default/web-0", "--to", "default/web-3:9999"]);
    assert_eq!(code, Some(1));
    assert_eq!(report["disposition"], "insufficient_info");
    assert_eq!(report["paths"][0]["assumed"], true);
    let finding = finding(&report, "snapshot.missing");
    assert_eq!(finding["hop"], "default/web-3");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("declares no containerPort 9999/tcp"),
        "{finding}"
    );
}

#[test]
fn a_pod_that_is_not_ready_is_insufficient_info() {
    let dir = copy_without(PARTIAL, &[]);
    let pods = dir.path().join("cluster/pods.yaml");
    let text = std::fs::read_to_string(&pods).unwrap();
    // web-3 is the last pod: its conditions turn False.
    let at = text.find("name: web-3").unwrap();
    let (head, tail) = text.split_at(at);
    std::fs::write(
        &pods,
        format!(
            "{head}{}",
            tail.replace("status: \"True\"", "status: \"False\"")
        ),
    )
    .unwrap();
    let (_, report) = diagnose(
        dir.path(),
        &["--from", "default/web-0", "--to", "default/web-3:8080"],
    );
    assert_eq!(report["disposition"], "insufficient_info", "{report:#}");
    assert!(report.to_string().contains("is not Ready"), "{report:#}");
}

/// The built-in kube-proxy pack's `service` hook stands in for node-2's
/// missing rules: every endpoint of default/web is a path of its own, and
/// conntrack's un-DNAT of the reply is assumed at node-2 too.
#[test]
fn the_kube_proxy_pack_translates_a_service_at_a_node_without_dump() {
    let (code, report) = partial(&["--from", "default/web-3", "--to", "svc/default/web"]);
    assert_eq!(code, Some(0), "{report:#}");
    let paths = report["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 4, "{report:#}");
    assert!(paths.iter().all(|path| path["disposition"] == "delivered"));
    let to_web_2 = paths
        .iter()
        .find(|path| path_hops(&report, path).contains(&"default/web-2*".to_string()))
        .expect("a path to web-2");
    assert_eq!(
        path_hops(&report, to_web_2),
        [
            "default/web-3*",
            "node-2*",
            "default/web-2*",
            "default/web-2*",
            "node-2*",
            "default/web-3*"
        ]
    );
    let text = report.to_string();
    assert!(
        text.contains(
            "dnat 10.96.0.100:80 -> 10.244.2.2:8080 (service default/web, pack kube-proxy"
        ),
        "{text}"
    );
    assert!(
        text.contains("un-dnat 10.244.2.2:8080 -> 10.96.0.100:80"),
        "{text}"
    );
    // web-3 reaching itself is masqueraded on that branch (kube-proxy's
    // hairpin rule), and the reply is un-SNATed at node-2 before its un-DNAT.
    assert!(
        text.contains(
            "masquerade 10.244.2.3:40000 -> 172.18.0.12:40000 (service default/web, pack kube-proxy)"
        ),
        "{text}"
    );
    assert!(
        text.contains("un-snat 172.18.0.12:40000 -> 10.244.2.3:40000"),
        "{text}"
    );
    // A backend on node-1 is reached through node-1's real dump.
    assert!(
        text.contains(
            "dnat 10.96.0.100:80 -> 10.244.1.2:8080 (service default/web, pack kube-proxy"
        ),
        "{text}"
    );
}

#[test]
fn host_gw_routes_to_a_node_without_dump_by_its_public_ip() {
    let dir = copy_without("examples/flannel-host-gw", &["nodes/node-2"]);
    let (code, report) = diagnose(
        dir.path(),
        &["--from", "default/web-0", "--to", "default/web-3:8080"],
    );
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["disposition"], "delivered");
    let text = report.to_string();
    // The reply leaves node-2 routed straight to node-1, unencapsulated.
    assert!(text.contains(r#""result":"via 172.18.0.11"#), "{text}");
    assert!(!text.contains("encapsulated"), "{text}");
}

#[test]
fn a_node_without_dump_holds_a_pod_the_bridge_of_a_real_node_cannot_reach() {
    // node-2 is there, web-3's own dump is not: node-2's bridge hands the
    // packet to the port the CNI gives it.
    let dir = copy_without(
        "examples/flannel-vxlan",
        &["nodes/node-2/pods/default/web-3"],
    );
    let (code, report) = diagnose(
        dir.path(),
        &["--from", "default/web-0", "--to", "default/web-3:8080"],
    );
    assert_eq!(code, Some(0), "{report:#}");
    let node_2 = &report["hops"][2];
    assert_eq!(node_2["id"], "node-2");
    assert_eq!(node_2["assumed"], false);
    let bridged = step(node_2, "bridged");
    assert_eq!(bridged["assumed"], true, "{bridged}");
}

/// A copy of a snapshot under the crate root without the given parts.
fn copy_without(snapshot: &str, removed: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let source: PathBuf = root().join(snapshot);
    let status = Command::new("cp")
        .arg("-r")
        .arg(source.join("cluster"))
        .arg(source.join("nodes"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    for part in removed {
        std::fs::remove_dir_all(dir.path().join(part)).unwrap();
    }
    dir
}

/// A CNI that routes to each pod's own veth (Calico's `cali…`): a real node
/// reaching a pod whose dump is missing steps into it by the veth the pack
/// names, and without a CNI pack stops there as insufficient_info, never as
/// a packet leaving the cluster.
#[test]
fn a_pod_without_dump_behind_a_routed_veth_is_assumed_or_insufficient_info() {
    let dir = copy_without(
        "examples/calico-vxlan",
        &["nodes/node-2/pods/default/web-3"],
    );
    let args = ["--from", "default/web-0", "--to", "default/web-3:8080"];
    let (code, report) = diagnose(dir.path(), &args);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["disposition"], "delivered");
    let path = &report["paths"][0];
    assert_eq!(path["assumed"], true);
    assert_eq!(
        path_hops(&report, path),
        [
            "default/web-0",
            "node-1",
            "node-2",
            "default/web-3*",
            "default/web-3*",
            "node-2",
            "node-1",
            "default/web-0"
        ]
    );
    let (code, report) = diagnose(dir.path(), &[&args[..], &["--cni", "none"]].concat());
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["disposition"], "insufficient_info", "{report:#}");
    let missing = finding(&report, "snapshot.missing");
    assert_eq!(missing["hop"], "node-2");
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .contains("the pod's namespace dump for default/web-3"),
        "{missing}"
    );
}

/// Flannel's ipip backend (the hand-built `tests/fixtures/flannel-ipip`):
/// the node without dump takes the IPIP packet by `flannel.ipip` and sends
/// the reply back in IPIP too, as the pack intends.
#[test]
fn a_node_without_dump_answers_by_ipip() {
    let dir = copy_without("tests/fixtures/flannel-ipip", &["nodes/node-2"]);
    let (code, report) = diagnose(
        dir.path(),
        &["--from", "default/web-0", "--to", "default/web-3:8080"],
    );
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["disposition"], "delivered", "{report:#}");
    let [path] = report["paths"].as_array().unwrap().as_slice() else {
        panic!("one path: {report:#}");
    };
    assert_eq!(
        path_hops(&report, path),
        [
            "default/web-0",
            "node-1",
            "node-2*",
            "default/web-3*",
            "default/web-3*",
            "node-2*",
            "node-1",
            "default/web-0"
        ]
    );
    let hop = |i: usize| &report["hops"][path["hops"][i].as_u64().unwrap() as usize];
    assert_eq!(step(hop(2), "decapsulated")["device"], "flannel.ipip");
    let encapsulated = step(hop(5), "encapsulated");
    assert_eq!(encapsulated["device"], "flannel.ipip", "{encapsulated}");
    assert_eq!(encapsulated["assumed"], true, "{encapsulated}");
    let outer = encapsulated["outer"].as_str().unwrap();
    assert!(
        outer.starts_with("172.18.0.12 -> 172.18.0.11 ipip [10.244.2.3 -> 10.244.1.2"),
        "{outer}"
    );
    assert_eq!(step(hop(6), "decapsulated")["device"], "flannel.ipip");
}

/// Issue 11's bug: the bridge-port search existed twice, and only the
/// search from a node's own stack stepped over a pod without a dump. A pod
/// on the same bridge reaches that pod as the node does: the bridge hands
/// the frame to the port the CNI gives it, assumed.
#[test]
fn bridge_port_search_steps_over_a_pod_without_dump_from_a_pod_on_the_same_bridge() {
    let dir = copy_without(
        "examples/flannel-vxlan",
        &["nodes/node-1/pods/default/web-1"],
    );
    for from in ["node/node-1", "default/web-0"] {
        let (code, report) = diagnose(dir.path(), &["--from", from, "--to", "default/web-1:8080"]);
        assert_eq!(code, Some(0), "{from}: {report:#}");
        assert_eq!(report["disposition"], "delivered", "{from}: {report:#}");
        assert_eq!(report["assumed"], true, "{from}: {report:#}");
        let path = &report["paths"][0];
        let hops = path_hops(&report, path);
        assert!(
            hops.contains(&"default/web-1*".to_string()),
            "{from}: {hops:?}"
        );
    }
}

/// A live diagnosis collects only the namespaces its walk asks for. Where
/// the walk cannot tell for want of a pod it cannot name — web-0 routes to
/// a gateway no one holds, and the ARP request floods node-1's cni0, where
/// web-1's veth leads to a namespace not collected — the live collection's
/// next round wants node-1's pods not yet collected (web-1), and with it
/// the answer is definite.
#[test]
fn a_live_round_wants_the_pods_behind_a_bridge_port_the_walk_could_not_see_past() {
    use skoop::collect::live::Wanted;
    use skoop::engine::{self, Disposition, Endpoint, Protocol, Request};
    use skoop::live_flow::pods_behind_unknowns;
    use skoop::packs::{LoadedPacks, builtin_sources};
    use skoop::snapshot::Snapshot;

    let copy = common::copy_snapshot("examples/flannel-vxlan");
    let route = copy
        .path()
        .join("nodes/node-1/pods/default/web-0/ip-route.json");
    common::edit_json(&route, |routes| {
        for route in routes.iter_mut().filter(|r| r["dst"] == "10.244.0.0/16") {
            route["gateway"] = "10.244.1.99".into();
        }
    });
    let (packs, problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    let request = Request {
        from: Endpoint::Pod {
            namespace: "default".into(),
            name: "web-0".into(),
            port: None,
        },
        to: Endpoint::Pod {
            namespace: "default".into(),
            name: "web-3".into(),
            port: None,
        },
        port: Some(8080),
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: None,
    };
    let walk = |dir: &Path| {
        let (snapshot, _) = Snapshot::load(dir).expect("the snapshot loads");
        let snapshot = Arc::new(snapshot);
        let diagnosis = engine::diagnose(&snapshot, &request, &packs).expect("it resolves");
        let wanted = pods_behind_unknowns(&snapshot, &diagnosis);
        (diagnosis.disposition(), wanted)
    };

    // Every pod collected: no one answers for 10.244.1.99.
    assert_eq!(walk(copy.path()), (Disposition::NeighborFailed, Vec::new()));
    // web-1 not collected: it might; the next round wants it.
    std::fs::remove_dir_all(copy.path().join("nodes/node-1/pods/default/web-1")).unwrap();
    let web_1 = Wanted::Pod {
        namespace: "default".into(),
        name: "web-1".into(),
    };
    assert_eq!(
        walk(copy.path()),
        (Disposition::InsufficientInfo, vec![web_1])
    );
}
