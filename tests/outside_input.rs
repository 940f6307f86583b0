//! Names and bytes from outside (issue 36): what a tool prints, a pod's
//! name in a CSV, an API server's names and answers, kubeconfig files and
//! signals neither drive the terminal, escape the snapshot, run as code,
//! exhaust memory, hang nor leave anything behind. Each test is named after
//! the bug it pins; the hostile API servers run on loopback, inside the test.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn skoop_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("skoop runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An executable shell script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `PATH` with `dir` first.
fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

// Item 10: `collect local` copied a tool's stderr to the terminal raw.
#[test]
fn a_tools_stderr_is_escaped_like_the_text_output() {
    let tools = tempfile::tempdir().unwrap();
    script(
        tools.path(),
        "iptables-save",
        r"printf '\033[2J\033]0;PWN\007\nsecond\n' >&2; exit 1",
    );
    let out = tempfile::tempdir().unwrap();
    let path = path_with(tools.path());
    let output = skoop_with(
        &["collect", "local", "--out", out.path().to_str().unwrap()],
        &[("PATH", &path)],
    );
    let stderr = text(&output.stderr);
    assert!(
        !stderr.contains(['\u{1b}', '\u{7}']),
        "raw control characters reached the terminal: {stderr:?}"
    );
    assert!(
        stderr.contains(r"\u{1b}[2J\u{1b}]0;PWN\u{7}"),
        "the tool's words are shown escaped: {stderr}"
    );
    assert!(stderr.contains("\n  second\n"), "{stderr}");
}

// Item 11: `matrix -o csv` printed raw control characters from a name.
#[test]
fn csv_fields_are_escaped_like_the_text_output() {
    let snap = common::copy_snapshot("examples/flannel-vxlan");
    std::fs::write(
        snap.path().join("cluster/evil.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: \"evil\\e]0;pwned\\a\\e[2J\", namespace: default}\nspec: {clusterIP: 10.96.0.9, ports: [{port: 80}]}\n",
    )
    .unwrap();
    let output = skoop_with(
        &[
            "matrix",
            "--snapshot",
            snap.path().to_str().unwrap(),
            "--from-nodes",
            "--to-services",
            "-o",
            "csv",
        ],
        &[],
    );
    let csv = text(&output.stdout);
    assert!(csv.contains("svc/default/evil"), "{csv}");
    assert!(!csv.contains(['\u{1b}', '\u{7}']), "{csv:?}");
    assert!(
        csv.contains(r"svc/default/evil\u{1b}]0;pwned\u{7}\u{1b}[2J"),
        "{csv}"
    );
}
