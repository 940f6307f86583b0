//! The live-cluster command line, where no cluster is needed: help, usage
//! errors, the RBAC it prints, and the kubectl plugin name. The commands
//! against a real API server are in `tests/lab/live.rs`.

use std::process::{Command, Output};

fn skoop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run skoop")
}

#[test]
fn collect_rbac_prints_deploy_rbac_yaml() {
    let output = skoop(&["collect", "rbac"]);
    assert!(output.status.success());
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml")).unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), committed);
}

#[test]
fn collect_cluster_without_a_selection_is_a_usage_error() {
    let output = skoop(&["collect", "cluster", "--out", "/nonexistent-skoop"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--nodes A,B, --all-nodes or --for-flow"),
        "{stderr}"
    );
}

#[test]
fn a_missing_kubeconfig_is_a_clear_error_not_a_hang() {
    let output = skoop(&[
        "diagnose",
        "--kubeconfig",
        "/nonexistent-skoop/kubeconfig",
        "--from",
        "default/web-0",
        "--to",
        "svc/default/web",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: kubeconfig: /nonexistent-skoop/kubeconfig"),
        "{stderr}"
    );
}

#[test]
fn a_live_error_under_json_output_is_a_json_object() {
    let output = skoop(&[
        "diagnose",
        "--kubeconfig",
        "/nonexistent-skoop/kubeconfig",
        "--from",
        "default/web-0",
        "--to",
        "svc/default/web",
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("a JSON object on stdout");
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("kubeconfig: /nonexistent-skoop/kubeconfig"),
        "{report}"
    );
}

#[test]
fn diagnose_help_teaches_the_live_mode() {
    let output = skoop(&["diagnose", "--help"]);
    let help = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "Without --snapshot",
        "--save-snapshot",
        "--kubeconfig",
        "--context",
        "--node-exec",
        "--collector-image",
        "Live cluster",
    ] {
        assert!(
            help.contains(expected),
            "{expected:?} missing from:\n{help}"
        );
    }
}

#[test]
fn installed_as_kubectl_skoop_it_is_a_kubectl_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("kubectl-skoop");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_skoop"), &plugin).unwrap();
    // kubectl runs `kubectl-skoop ARGS` for `kubectl skoop ARGS`.
    let output = Command::new(&plugin)
        .args(["diagnose", "--snapshot", "examples/flannel-vxlan"])
        .args(["--from", "default/web-0", "--to", "default/web-3:8080"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.lines().next().unwrap().ends_with(": delivered"),
        "{stdout}"
    );
}
