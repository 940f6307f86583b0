//! Issue 32, "verdicts an SRE can act on": each case the issue reproduced,
//! pinned through the command line as a user or a script meets it — the
//! exit status, the verdict line, the JSON report.

mod common;

use serde_json::Value;

/// `skoop diagnose ARGS -o json`: the exit status and the report.
fn json(args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["diagnose"];
    all.extend(args);
    all.extend(["-o", "json"]);
    let (code, out) = common::skoop(&all);
    (code, serde_json::from_str(&out).expect("a JSON report"))
}

/// `skoop diagnose ARGS`: the exit status and the text report.
fn text(args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["diagnose"];
    all.extend(args);
    common::skoop(&all)
}

#[test]
fn a_pod_the_flow_leaves_the_cluster_instead_of_reaching_is_not_delivered() {
    // Case 1: node-1's route to node-2's pod CIDR deleted (host-gw); the
    // default route takes the packet out by eth0, with node-1's address.
    let copy = common::copy_snapshot("examples/flannel-host-gw");
    common::edit_json(
        &copy.path().join("nodes/node-1/host/ip-route.json"),
        |routes| {
            routes.retain(|route| route["dst"] != "10.244.2.0/24");
        },
    );
    let dir = copy.path().to_str().unwrap();
    let args = ["-s", dir, "-f", "node/node-1", "-t", "default/web-2:8080"];
    let (code, report) = json(&args);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["disposition"], "exits_cluster");
    // Whether the outside can answer is no question for a pod of the cluster.
    assert!(report["paths"][0].get("exit").is_none(), "{report:#}");
    let (_, out) = text(&args);
    let verdict = out.lines().next().unwrap();
    assert!(
        verdict.ends_with(
            "exits_cluster: leaves the cluster at node-1 by eth0 instead of reaching default/web-2, with 1 fatal and 1 critical findings"
        ),
        "{verdict}"
    );
}

#[test]
fn a_finding_off_the_path_changes_neither_verdict_nor_exit_status() {
    // Case 2: a same-node flow never touches node-1's tunnel to node-2.
    let args = [
        "-s",
        "examples/flannel-vxlan-broken",
        "-f",
        "default/web-0",
        "-t",
        "default/web-1:8080",
    ];
    let (code, report) = json(&args);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(
        common::finding_ids(&report, "findings"),
        Vec::<String>::new()
    );
    assert_eq!(
        common::finding_ids(&report, "off_path"),
        ["flannel.vxlan.fdb"]
    );
    let (code, out) = text(&args);
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with("default/web-0 -> default/web-1:8080 (10.244.1.3:8080 tcp): delivered\n")
    );
    assert!(
        out.contains("\nalso on these nodes (not about this flow's paths):\n  critical flannel.vxlan.fdb at node-1: "),
        "{out}"
    );
    // The pictures say it apart too, in their legend and on the page.
    for (format, apart) in [
        ("svg", "also on these nodes, not about this flow"),
        ("html", "<section id=\"off-path\">"),
    ] {
        let (code, picture) = text(&[&args[..], &["-o", format]].concat());
        assert_eq!(code, Some(0));
        assert!(picture.contains(apart), "{format}: {picture}");
    }
    // A flow that does cross the tunnel keeps it among its findings.
    let (code, report) = json(&[
        "-s",
        "examples/flannel-vxlan-broken",
        "-f",
        "default/web-0",
        "-t",
        "default/web-3:8080",
    ]);
    assert_eq!(code, Some(1));
    assert!(common::finding_ids(&report, "findings").contains(&"flannel.vxlan.fdb".to_owned()));
}

#[test]
fn a_service_port_that_does_not_exist_is_named_and_not_delivered() {
    // Case 3: the Service has port 80 only.
    let (code, report) = json(&[
        "-s",
        "examples/flannel-vxlan",
        "-f",
        "default/web-0",
        "-t",
        "10.96.0.100:81",
    ]);
    assert_eq!(code, Some(1), "{report:#}");
    let cause = &report["findings"][0];
    assert_eq!(cause["id"], "kernel.netfilter.service-untranslated");
    let message = cause["message"].as_str().unwrap();
    assert!(
        message.contains("service default/web has no port 81 (its ports: 80/TCP (http))"),
        "{message}"
    );
}

#[test]
fn the_cause_comes_first_and_no_networkpolicy_finding_without_a_policy() {
    // Case 4: a Service without endpoints, in a cluster without NetworkPolicy.
    let (code, report) = json(&[
        "-s",
        "examples/flannel-vxlan-real",
        "-f",
        "default/web-0",
        "-t",
        "svc/default/web-nobody",
    ]);
    assert_eq!(code, Some(1));
    let ids = common::finding_ids(&report, "findings");
    assert_eq!(
        ids,
        [
            "kernel.netfilter.denied",
            "kube-proxy.service.no-ready-endpoints"
        ],
        "{report:#}"
    );
}

#[test]
fn text_shows_what_was_expected_under_each_finding() {
    // Case 6.
    let (code, out) = text(&[
        "-s",
        "examples/flannel-vxlan-broken",
        "-f",
        "default/web-0",
        "-t",
        "default/web-3:8080",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        out.contains(
            "      evidence: examples/flannel-vxlan-broken/nodes/node-1/host/bridge-fdb.json\n      expected: fdb 52:04:a1:8d:72:13 dev flannel.1 dst 172.18.0.12 (node-2's public IP)\n      remediation: "
        ),
        "{out}"
    );
}

#[test]
fn a_check_that_cannot_tell_for_want_of_a_file_says_to_collect_it() {
    // Case 7: iptables-save.txt not collected on node-1.
    let copy = common::copy_snapshot("examples/flannel-vxlan");
    std::fs::remove_file(copy.path().join("nodes/node-1/host/iptables-save.txt")).unwrap();
    let (_, report) = json(&[
        "-s",
        copy.path().to_str().unwrap(),
        "-f",
        "default/web-0",
        "-t",
        "default/web-3:8080",
    ]);
    let findings = report["findings"].as_array().unwrap();
    let forward = findings
        .iter()
        .find(|f| f["id"] == "flannel.forward.chain")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(forward["status"], "unknown");
    assert_eq!(
        forward["remediation"],
        "collect iptables-save.txt in the namespace of node/node-1 (`iptables-save`) and run again"
    );
    // No check that cannot tell advises what only a failure would.
    for finding in findings.iter().filter(|f| f["status"] == "unknown") {
        let remediation = finding["remediation"].as_str().unwrap_or_default();
        assert!(!remediation.contains("restart"), "{finding:#}");
    }
}

#[test]
fn a_destination_pod_whose_eth0_is_down_is_stopped_at_the_pod() {
    // Case 8.
    let copy = common::copy_snapshot("examples/flannel-vxlan");
    let links = copy
        .path()
        .join("nodes/node-2/pods/default/web-2/ip-link.json");
    common::edit_json(&links, |links| {
        for link in links.iter_mut().filter(|l| l["ifname"] == "eth0") {
            link["flags"] = serde_json::json!(["BROADCAST", "MULTICAST"]);
            link["operstate"] = "DOWN".into();
        }
    });
    let (code, report) = json(&[
        "-s",
        copy.path().to_str().unwrap(),
        "-f",
        "default/web-0",
        "-t",
        "default/web-2:8080",
    ]);
    assert_eq!(code, Some(1));
    let cause = &report["findings"][0];
    assert_eq!(cause["id"], "kernel.device.down");
    assert_eq!(cause["hop"], "default/web-2");
    assert_eq!(
        cause["message"],
        "default/web-2's eth0 is down, so node-2 cannot reach it"
    );
    assert!(
        cause["evidence"]
            .as_str()
            .unwrap()
            .ends_with("nodes/node-2/pods/default/web-2/ip-link.json")
    );
}

#[test]
fn targets_are_taken_as_people_type_them() {
    // Case 9: each form names the one Service, or the one pod.
    for to in [
        "web.default.svc.cluster.local",
        "web.default.svc",
        "web.default",
        "web.default:80",
        "service/default/web",
        "svc/default/web:http",
    ] {
        let (code, report) = json(&[
            "-s",
            "examples/flannel-vxlan",
            "-f",
            "default/web-0",
            "-t",
            to,
        ]);
        assert_eq!(code, Some(0), "{to}: {report:#}");
        let request = report["request_text"].as_str().unwrap();
        assert!(request.ends_with("(10.96.0.100:80 tcp)"), "{to}: {request}");
    }
    for to in ["pod/default/web-3:8080", "10.244.2.3:8080"] {
        let (code, report) = json(&[
            "-s",
            "examples/flannel-vxlan",
            "-f",
            "default/web-0",
            "-t",
            to,
        ]);
        assert_eq!(code, Some(0), "{to}");
        assert_eq!(
            report["paths"][0]["backend"]["owner"], "default/web-3",
            "{to}"
        );
    }
    let (code, report) = json(&[
        "-s",
        "examples/flannel-vxlan",
        "-f",
        "pod/default/web-0",
        "-t",
        "node/node-2",
        "--protocol",
        "icmp",
    ]);
    assert_eq!(
        (code, report["disposition"].as_str()),
        (Some(0), Some("delivered"))
    );
    // A near miss is answered with what it was meant as.
    let (code, report) = json(&[
        "-s",
        "examples/flannel-vxlan",
        "-f",
        "default/web-0",
        "-t",
        "pod/default/web-O",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("did you mean default/web-0?")
    );
    // A hostname is no Service's name: skoop resolves none.
    let (code, report) = json(&[
        "-s",
        "examples/flannel-vxlan",
        "-f",
        "default/web-0",
        "-t",
        "www.example.com",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        report["error"].as_str().unwrap().contains("give its IP"),
        "{report:#}"
    );
}

#[test]
fn a_client_outside_reaches_a_load_balancer_at_its_ingress_address_by_every_node() {
    // Case 10.
    let args = [
        "-s",
        "examples/flannel-vxlan-real",
        "-f",
        "198.51.100.7",
        "-t",
        "svc/default/web-lb",
    ];
    let (code, out) = text(&args);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .ends_with("-> svc/default/web-lb (203.0.113.10:80 tcp): delivered"),
        "{out}"
    );
    let paths: Vec<&str> = out.lines().filter(|l| l.starts_with("path ")).collect();
    assert_eq!(paths.len(), 8, "{out}");
    for (index, line) in paths.iter().enumerate() {
        let node = if index < 4 { "node-1" } else { "node-2" };
        let head = format!(
            "path {} of 8 (12.5% of flows) entering at {node} to ",
            index + 1
        );
        assert!(line.starts_with(&head), "{line}");
    }
}

#[test]
fn output_takes_its_format_from_the_extension_and_names_a_missing_directory() {
    // Case 11.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("m.html");
    let (code, _) = common::skoop(&[
        "matrix",
        "-s",
        "examples/flannel-vxlan",
        "--from",
        "default/web-0",
        "--to-services",
        "--output",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0));
    let written = std::fs::read_to_string(&page).unwrap();
    assert!(written.starts_with("<!DOCTYPE html>"), "{written}");
    assert!(written.contains("href=\"m.flows/0.html\""), "{written}");
    assert!(dir.path().join("m.flows/0.html").is_file());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args([
            "diagnose",
            "-s",
            "examples/flannel-vxlan",
            "-f",
            "default/web-0",
            "-t",
            "default/web-3:8080",
            "--output",
            "/nonexistent/x.json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no directory /nonexistent"), "{stderr}");
    assert!(!stderr.contains(".skoop-report-"), "{stderr}");
    // The header names the packs that applied, the CNI pack marked.
    let (_, out) = text(&[
        "-s",
        "examples/calico-vxlan",
        "-f",
        "default/web-0",
        "-t",
        "default/web-3:8080",
    ]);
    assert_eq!(
        out.lines().nth(1),
        Some("  packs: core, kube-proxy, networkpolicy, calico (CNI)")
    );
}
