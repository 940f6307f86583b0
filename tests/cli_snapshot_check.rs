//! `skoop snapshot check` as a user runs it: what it prints and its exit codes.

use std::path::Path;
use std::process::{Command, Output};

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["snapshot", "check"])
        .args(args)
        .output()
        .expect("run skoop")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn clean_example_lists_nodes_pods_and_namespaces_and_exits_0() {
    let output = check(&["examples/flannel-vxlan"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    for expected in [
        "node node-1  172.18.0.11  pod CIDRs 10.244.1.0/24  Ready",
        "pod default/web-3  10.244.2.3  on node-2  Running",
        "service default/web  ClusterIP  10.96.0.100  80/TCP",
        "namespace dumps: 6",
        "default/web-0 (on node-1)",
        "no problems",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn json_report_has_the_same_content() {
    let output = check(&["examples/flannel-vxlan", "-o", "json"]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["cluster"]["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(report["cluster"]["counts"]["Pod"], 4);
    assert_eq!(report["namespaces"].as_array().unwrap().len(), 6);
    assert_eq!(report["problems"].as_array().unwrap().len(), 0);
    let host = &report["namespaces"][0];
    assert_eq!(host["id"], "node/node-1");
    assert!(
        host["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "ip-route.json")
    );
}

#[test]
fn broken_snapshot_reports_every_problem_with_its_position_and_exits_1() {
    let output = check(&["tests/fixtures/broken-snapshot"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let root = "tests/fixtures/broken-snapshot";
    for expected in [
        format!(
            "{root}/cluster/nodes.yaml:23:22: Pod default/web-0: spec.containers[0].ports[0].containerPort: invalid type"
        ),
        format!("{root}/cluster/service.json:3:1: EOF while parsing"),
        format!("{root}/nodes/node-1/junk: unexpected directory"),
        format!(
            "{root}/nodes/node-1/host/ip-route.json:1:300: not a JSON array of objects: EOF while parsing a string"
        ),
        format!("{root}/nodes/node-1/host/ip-routes.json: unexpected file in a namespace dump"),
        format!("{root}/nodes/node-1/host/iptables-save.txt:7:1: expected `*table`"),
        format!("{root}/nodes/node-1/pods/default/web-0/ip-addr.json:1: empty file"),
    ] {
        assert!(text.contains(&expected), "missing {expected:?} in:\n{text}");
    }
    // An unknown match module is kept on its rule, not reported as a problem.
    assert!(!text.contains("frobnicate"), "{text}");
    // What could be read still is: the node's valid dump files, and the cluster's valid objects.
    assert!(
        text.contains("node/node-1") && text.contains("ip-link.json iptables-save.txt sysctl.txt"),
        "{text}"
    );
    assert!(text.contains("node node-1  172.18.0.11"), "{text}");
}

#[test]
fn a_directory_that_is_not_a_snapshot_exits_2() {
    for dir in ["src", "no/such/dir"] {
        let output = check(&[dir]);
        assert_eq!(output.status.code(), Some(2), "{dir}");
        assert!(String::from_utf8_lossy(&output.stderr).contains(dir));
        assert!(!Path::new(dir).join("cluster").exists());
    }
}
