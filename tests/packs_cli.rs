//! `skoop packs` end to end: lint on deliberately broken packs (every problem,
//! exactly positioned, at once), the scaffold's own tests, the core pack's tests.

use std::path::Path;
use std::process::{Command, Output};

fn skoop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("skoop runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn lint_reports_every_problem_of_a_broken_pack_at_its_line_and_column() {
    let output = skoop(&[
        "packs",
        "lint",
        "tests/fixtures/packs/broken",
        "--set",
        "broken.mtu=abc",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let lines: Vec<String> = stdout(&output).lines().map(str::to_owned).collect();
    let p = "tests/fixtures/packs/broken";
    assert_eq!(
        lines,
        [
            "--set broken.mtu=abc: parameter broken.mtu: \"abc\" is not an integer".to_owned(),
            format!(
                "{p}/pack.yaml:1:1: a cni pack needs `detect`: how its CNI is recognised in a snapshot"
            ),
            format!(
                "{p}/pack.yaml:2:10: version \"one\" is not a semantic version MAJOR.MINOR.PATCH"
            ),
            format!("{p}/pack.yaml:6:1: unknown field `colour` in pack.yaml"),
            format!("{p}/pack.yaml:10:14: parameter mtu: a string is not of type int"),
            format!(
                "{p}/pack.yaml:13:13: hook next_hop: no function missing_function(ctx, arg) in the pack's scripts (hooks.rhai)"
            ),
            format!(
                "{p}/pack.yaml:14:15: hook masquerade: masquerade must take 2 parameters (ctx, arg), it takes 1 in hooks.rhai"
            ),
            format!("{p}/pack.yaml:22:5: unknown field `mesage` in a check"),
            format!("{p}/pack.yaml:23:29: in ${{actul}}: Undefined variable: actul"),
            format!("{p}/syntax.rhai:2:13: Syntax error: Unexpected ';'"),
        ]
    );
}

#[test]
fn lint_positions_a_yaml_syntax_error() {
    let output = skoop(&["packs", "lint", "tests/fixtures/packs/bad-yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stdout(&output).trim(),
        "tests/fixtures/packs/bad-yaml/pack.yaml:4:3: \"-\" is only valid inside a block"
    );
}

#[test]
fn lint_refuses_imports_from_outside_the_pack_and_eval() {
    let output = skoop(&["packs", "lint", "tests/fixtures/packs/escape-import"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).starts_with(
            "tests/fixtures/packs/escape-import/escape.rhai:1:8: Module not found: /etc/passwd"
        ),
        "{}",
        stdout(&output)
    );
    let output = skoop(&["packs", "lint", "tests/fixtures/packs/escape-eval"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stdout(&output).trim(),
        "tests/fixtures/packs/escape-eval/escape.rhai:2:5: Syntax error: reserved keyword 'eval' is disabled"
    );
}

#[test]
fn lint_of_the_core_pack_is_clean() {
    let output = skoop(&["packs", "lint", "rules/core"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert_eq!(stdout(&output), "");
}

#[test]
fn core_pack_tests_pass() {
    let output = skoop(&["packs", "test", "rules/core"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let out = stdout(&output);
    for case in [
        "healthy",
        "ip-forward-off",
        "cni0-down",
        "pod-not-ready",
        "no-listener",
    ] {
        assert!(
            out.contains(&format!("test rules/core/tests/{case} ... ok")),
            "{out}"
        );
    }
    assert!(out.trim_end().ends_with("5 passed, 0 failed"), "{out}");
}

#[test]
fn new_cni_pack_passes_its_own_tests() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("demo");
    let pack = pack.to_str().expect("UTF-8 path");
    let output = skoop(&["packs", "new", "demo", "--kind", "cni", "--dir", pack]);
    assert_eq!(output.status.code(), Some(0));
    let output = skoop(&["packs", "test", pack]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(stdout(&output).trim_end().ends_with("2 passed, 0 failed"));
    let output = skoop(&["packs", "lint", pack]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn user_pack_with_a_builtin_name_overrides_it_and_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("core");
    skoop(&[
        "packs",
        "new",
        "core",
        "--kind",
        "rules",
        "--dir",
        pack.to_str().expect("UTF-8"),
    ]);
    let output = skoop(&[
        "packs",
        "list",
        "--pack-path",
        dir.path().to_str().expect("UTF-8"),
    ]);
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("note: pack core from"), "{stderr}");
    assert!(stderr.contains("overrides the built-in one"), "{stderr}");
    assert!(stdout(&output).contains("2 checks"), "{}", stdout(&output));
}

#[test]
fn show_lists_parameters_and_check_ids() {
    let output = skoop(&["packs", "show", "core", "--set", "core.vxlan_overhead=54"]);
    assert_eq!(output.status.code(), Some(0));
    let out = stdout(&output);
    assert!(out.contains("vxlan_overhead: int = 50, set to 54"), "{out}");
    assert!(out.contains("core.hop.rp-filter"), "{out}");
    let bad = skoop(&["packs", "show", "core", "--set", "core.vxlan_overhead=big"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(Path::new("rules/core/pack.yaml").is_file());
}
