//! The networkpolicy pack end to end: its own tests pass, and a diagnosis
//! names the policy, why no rule admits the flow and the rule that dropped it.

mod common;

use std::process::Command;

fn skoop(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run skoop")
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_networkpolicy_pack_lints_clean_and_passes_its_tests() {
    let lint = skoop(&["packs", "lint", "rules/networkpolicy"]);
    assert_eq!(lint.status.code(), Some(0), "{}", stdout(&lint));
    let test = skoop(&["packs", "test", "rules/networkpolicy"]);
    let out = stdout(&test);
    assert_eq!(test.status.code(), Some(0), "{out}");
    for case in [
        "admitted-but-dropped",
        "egress-not-enforced",
        "ingress-not-enforced",
        "undecided",
    ] {
        assert!(
            out.contains(&format!("test rules/networkpolicy/tests/{case} ... ok")),
            "{out}"
        );
    }
}

/// The finding of `id` in the JSON diagnosis of `from` -> `to`.
fn finding(snapshot: &str, from: &str, to: &str, id: &str) -> serde_json::Value {
    let output = skoop(&[
        "diagnose",
        "--snapshot",
        snapshot,
        "--from",
        from,
        "--to",
        to,
        "-o",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    report["findings"]
        .as_array()
        .and_then(|findings| findings.iter().find(|f| f["id"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

#[test]
fn a_denial_names_the_policy_the_reason_and_the_dropping_rule() {
    // The pack's test snapshot shares files inside the pack, which a snapshot
    // diagnosed on its own may not: a copy of it.
    let copy = common::copy_snapshot("rules/networkpolicy/tests/admitted-but-dropped/snapshot");
    let snapshot = copy.path().to_str().expect("UTF-8");
    let denied = finding(
        snapshot,
        "default/web-1",
        "default/web-3:8080",
        "networkpolicy.ingress.denied",
    );
    assert_eq!(denied["hop"], "node-2");
    assert_eq!(
        denied["message"],
        "default/web-3 is isolated for ingress by default/web-from-node-1; no rule admits it: \
         default/web-from-node-1: spec.ingress[0]: 10.244.1.3 is in except 10.244.1.3/32 of 10.244.1.0/24; \
         netfilter drops 10.244.1.3 -> 10.244.2.3:8080 tcp at chain POLICY-TO-PODS rule 1 (table filter)"
    );
    assert_eq!(
        denied["evidence"],
        format!("{snapshot}/nodes/node-2/host/iptables-save.txt:29:1"),
        "{denied:#}"
    );
    assert_eq!(denied["places"][0]["line"], 29);
    assert_eq!(
        denied["remediation"],
        "add an ingress rule admitting this source and port to one of the policies named, if the flow is wanted"
    );
    assert_eq!(
        denied["expected"],
        format!(
            "an ingress rule admitting it in default/web-from-node-1 ({snapshot}/cluster/networkpolicies.yaml:4)"
        )
    );
}

#[test]
fn a_drop_the_policies_do_not_explain_names_the_admitting_rules() {
    // The service's DNAT happens on node-1, the drop on node-2 after VXLAN:
    // the policies are judged on the backend, as it arrives.
    let copy = common::copy_snapshot("rules/networkpolicy/tests/admitted-but-dropped/snapshot");
    let dropped = finding(
        copy.path().to_str().expect("UTF-8"),
        "default/web-0",
        "svc/default/web:80",
        "networkpolicy.admitted-but-dropped",
    );
    assert_eq!(
        dropped["message"],
        "default/web-3 is isolated for ingress by default/web-from-node-1; admitted by \
         default/web-from-node-1 (spec.ingress[0].from[0], ports[0]); default/web-0 is isolated \
         for egress by default/egress-8080; admitted by default/egress-8080 (spec.egress[0].to[0], \
         ports[0]), but netfilter drops 10.244.1.2 -> 10.244.2.3:8080 tcp at chain POLICY-TO-PODS \
         rule 1 (table filter)"
    );
}

/// The finding ids of the JSON diagnosis of `from` -> `to` over `protocol`,
/// with the given extra arguments.
fn finding_ids(snapshot: &str, from: &str, to: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "diagnose",
        "--snapshot",
        snapshot,
        "--from",
        from,
        "--to",
        to,
        "-o",
        "json",
    ];
    args.extend(extra);
    let output = skoop(&args);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    common::finding_ids(&report, "findings")
}

#[test]
fn what_a_cni_pack_declares_its_cni_admits_is_no_unenforced_policy() {
    let copy = common::copy_snapshot("rules/networkpolicy/tests/ingress-not-enforced/snapshot");
    let snapshot = copy.path().to_str().expect("UTF-8");
    let ping = ["--protocol", "icmp"];
    // Flannel says nothing of ICMP: the policy admits no ICMP, yet it passes.
    let flannel = finding_ids(snapshot, "default/web-0", "default/web-3", &ping);
    assert!(
        flannel.contains(&"networkpolicy.not-enforced".to_owned()),
        "{flannel:?}"
    );
    // The same CNI, declared to admit ICMP whatever the policies (as
    // kube-router does with echo requests): a pack of that name in place of
    // the built-in one.
    let packs = tempfile::tempdir().expect("a directory");
    let pack = packs.path().join("flannel");
    common::copy_dir(std::path::Path::new("plugins/flannel"), &pack);
    common::edit_text(&pack.join("pack.yaml"), |text| {
        text + "\nnetwork_policy:\n  admits:\n    - protocol: icmp\n      why: its agent admits ICMP echo whatever the policies\n"
    });
    let declared = ["--pack-path", packs.path().to_str().expect("UTF-8")];
    let mut ping_declared = ping.to_vec();
    ping_declared.extend(declared);
    let admitted = finding_ids(snapshot, "default/web-0", "default/web-3", &ping_declared);
    assert!(
        !admitted.contains(&"networkpolicy.not-enforced".to_owned()),
        "{admitted:?}"
    );
    // TCP is still the policies' to judge.
    let judged = finding_ids(snapshot, "default/web-0", "default/web-3:8080", &declared);
    assert!(
        judged.contains(&"networkpolicy.not-enforced".to_owned()),
        "{judged:?}"
    );
}
