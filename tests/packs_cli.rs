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
    // Its hook stubs load once named in the manifest, each with its arity.
    let manifest = Path::new(pack).join("pack.yaml");
    let text = std::fs::read_to_string(&manifest).expect("pack.yaml");
    let hooks = [
        "next_hop",
        "encapsulation",
        "masquerade",
        "pod_interface",
        "underlay",
    ];
    let mut named = text.replace("# hooks:\n", "hooks:\n");
    for hook in hooks {
        named = named.replace(
            &format!("#   {hook}: {hook}\n"),
            &format!("  {hook}: {hook}\n"),
        );
    }
    assert_ne!(named, text, "the manifest names hooks in comments");
    std::fs::write(&manifest, named).expect("pack.yaml written");
    let output = skoop(&["packs", "show", "demo", "--pack-path", pack]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    for hook in hooks {
        assert!(
            stdout(&output).contains(hook),
            "{hook}: {}",
            stdout(&output)
        );
    }
    let output = skoop(&["packs", "test", pack]);
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

#[test]
fn eval_prints_each_check_and_the_finding_with_its_evidence() {
    let output = skoop(&[
        "packs",
        "eval",
        "plugins/flannel",
        "--snapshot",
        "examples/flannel-vxlan-broken",
        "--node",
        "node-1",
    ]);
    assert_eq!(output.status.code(), Some(1), "a check failed");
    let text = stdout(&output);
    let fdb: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("  flannel.vxlan.fdb "))
        .take(5)
        .collect();
    let snapshot = "examples/flannel-vxlan-broken";
    assert_eq!(
        fdb,
        [
            "  flannel.vxlan.fdb (node per remote node): 1 subject, 1 finding",
            "    failed [critical] node/node-1: no FDB entry for node-2's VTEP 52:04:a1:8d:72:13 on flannel.1; VXLAN packets to node-2 are not sent",
            &format!("      evidence: {snapshot}/nodes/node-1/host/bridge-fdb.json"),
            "      expected: fdb 52:04:a1:8d:72:13 dev flannel.1 dst 172.18.0.12 (node-2's public IP)",
            "      remediation: restart flanneld on node/node-1, or bridge fdb append by hand",
        ]
    );
    assert!(text.contains("  flannel.vxlan.neighbour (node per remote node): 1 subject, ok\n"));
    // An IPv4-only cluster's net-conf.json has no EnableIPv6: the IPv6
    // checks' when is false, and they say so rather than "ok".
    assert!(
        text.contains(
            "  flannel.vxlan.device-ipv6 (node): 1 subject, skipped (when: ${flannel::ipv6_enabled(ctx)})\n"
        ),
        "{text}"
    );
    assert!(
        text.trim_end()
            .ends_with("23 checks over 23 subjects (8 skipped by their when): 1 failed, 0 cannot tell, 0 script errors"),
        "{text}"
    );
    // node-2's own checks find nothing wrong: the missing entry is node-1's.
    let output = skoop(&[
        "packs",
        "eval",
        "plugins/flannel",
        "-s",
        "examples/flannel-vxlan-broken",
        "--node",
        "node-2",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn eval_as_json_lists_every_check_with_its_subjects_and_findings() {
    let output = skoop(&[
        "packs",
        "eval",
        "plugins/flannel",
        "-s",
        "examples/flannel-vxlan-broken",
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let pack = &report["packs"][0];
    assert_eq!(pack["pack"], "flannel");
    assert_eq!(pack["mode"], "vxlan");
    let checks = pack["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 23);
    let ipv6_device = checks
        .iter()
        .find(|c| c["id"] == "flannel.vxlan.device-ipv6")
        .expect("the IPv6 device check");
    assert_eq!(
        (&ipv6_device["subjects"], &ipv6_device["skipped"]),
        (&2.into(), &2.into())
    );
    let failing: Vec<&serde_json::Value> = checks
        .iter()
        .filter(|c| !c["findings"].as_array().expect("findings").is_empty())
        .collect();
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0]["id"], "flannel.vxlan.fdb");
    assert_eq!(failing[0]["subjects"], 2, "node-1 to node-2 and back");
    assert_eq!(failing[0]["findings"][0]["status"], "failed");
    assert_eq!(failing[0]["findings"][0]["subject"]["name"], "node-1");
}

#[test]
fn eval_shows_what_a_check_script_prints() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("demo");
    let output = skoop(
        &["packs", "new", "demo", "--kind", "rules", "--dir"]
            .into_iter()
            .chain([pack.to_str().expect("UTF-8 path")])
            .collect::<Vec<_>>(),
    );
    assert_eq!(output.status.code(), Some(0));
    let script = pack.join("checks.rhai");
    let text = std::fs::read_to_string(&script).expect("the scaffold's script");
    let looked_up = "    let lo = ctx.netns.link(\"lo\");\n";
    assert!(text.contains(looked_up), "{text}");
    let text = text.replace(
        looked_up,
        &format!("{looked_up}    print(\"lo is \" + lo.state);\n    debug(lo.mtu);\n"),
    );
    std::fs::write(&script, text).expect("script written");
    let snapshot = pack.join("tests/healthy/snapshot");
    let output = skoop(&[
        "packs",
        "eval",
        pack.to_str().expect("UTF-8"),
        "--snapshot",
        snapshot.to_str().expect("UTF-8"),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let text = stdout(&output);
    assert!(
        text.contains(
            "  demo.node.loopback-up (node): 1 subject, ok\n    | print: lo is UNKNOWN\n    | debug checks.rhai:6:5: 65536\n"
        ),
        "{text}"
    );
}

#[test]
fn eval_names_what_it_cannot_find_and_suggests() {
    for (flag, name, error) in [
        (
            "--node",
            "node2",
            "error: --node: no node node2 in examples/flannel-vxlan; did you mean node-2?",
        ),
        (
            "--pod",
            "default/web-O",
            "error: --pod: no pod default/web-O in examples/flannel-vxlan; did you mean default/web-0?",
        ),
    ] {
        let output = skoop(&[
            "packs",
            "eval",
            "plugins/flannel",
            "-s",
            "examples/flannel-vxlan",
            flag,
            name,
        ]);
        assert_eq!(output.status.code(), Some(2));
        assert_eq!(String::from_utf8_lossy(&output.stderr).trim_end(), error);
    }
}

#[test]
fn test_verbose_shows_what_each_case_expected_and_reported() {
    let output = skoop(&["packs", "test", "-v", "plugins/flannel"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let text = stdout(&output);
    let case: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.ends_with("plugins/flannel/tests/broken-fdb ... ok"))
        .skip(1)
        .take_while(|l| l.starts_with("      "))
        .collect();
    assert_eq!(case.len(), 3, "{case:?}");
    assert_eq!(case[0], "      expects findings flannel.vxlan.fdb");
    assert!(case[1].starts_with("      expects absent flannel.mode, "));
    assert_eq!(
        case[2],
        "      reported flannel.vxlan.fdb (failed): node/node-1: no FDB entry for node-2's VTEP 52:04:a1:8d:72:13 on flannel.1; VXLAN packets to node-2 are not sent"
    );
}

/// Copies a pack directory (files and subdirectories) to `to`.
fn copy_pack(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("directory created");
    for entry in std::fs::read_dir(from).expect("pack readable").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_pack(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("file copied");
        }
    }
}

#[test]
fn one_syntax_error_in_a_script_is_one_problem() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("flannel");
    copy_pack(Path::new("plugins/flannel"), &pack);
    let script = pack.join("checks.rhai");
    let text = std::fs::read_to_string(&script).expect("checks.rhai");
    std::fs::write(&script, format!("let broken = ;\n{text}")).expect("written");
    let output = skoop(&["packs", "lint", pack.to_str().expect("UTF-8")]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stdout(&output).trim_end(),
        format!(
            "{}:1:14: Syntax error: Unexpected ';'",
            script.to_str().expect("UTF-8")
        ),
        "the functions checks.rhai defines are not each reported missing"
    );
}

#[test]
fn object_checks_run_over_daemon_sets_and_refuse_kinds_they_would_never_see() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("agents");
    let pack_dir = pack.to_str().expect("UTF-8");
    let output = skoop(&[
        "packs", "new", "agents", "--kind", "rules", "--dir", pack_dir,
    ]);
    assert_eq!(output.status.code(), Some(0));
    let manifest = pack.join("pack.yaml");
    let text = std::fs::read_to_string(&manifest).expect("pack.yaml");
    let checks = "  - id: agents.daemonset.queue-depth\n    \
                    severity: warning\n    \
                    scope: object\n    \
                    object: {api_version: apps/v1, kind: DaemonSet}\n    \
                    kind: script\n    \
                    function: queue_depth\n    \
                    message: \"${subject}: ${actual}\"\n";
    std::fs::write(&manifest, format!("{text}{checks}")).expect("written");
    let script = pack.join("checks.rhai");
    let mut rhai = std::fs::read_to_string(&script).expect("checks.rhai");
    rhai.push_str(
        "fn queue_depth(ctx) {\n    \
           let depth = ctx.object.containers[0].env.EVENT_QUEUE_DEPTH;\n    \
           if depth != () { return `EVENT_QUEUE_DEPTH is ${depth}`; }\n\
         }\n",
    );
    std::fs::write(&script, rhai).expect("written");
    let output = skoop(&["packs", "eval", pack_dir, "-s", "examples/flannel-vxlan"]);
    let text = stdout(&output);
    assert!(
        text.contains(
            "  agents.daemonset.queue-depth (object): 1 subject, 1 finding\n    \
             failed [warning] DaemonSet kube-flannel/kube-flannel-ds: EVENT_QUEUE_DEPTH is 5000\n"
        ),
        "{text}"
    );

    let refused = std::fs::read_to_string(&manifest)
        .expect("pack.yaml")
        .replace(
            "{api_version: apps/v1, kind: DaemonSet}",
            "{kind: EndpointSlice}",
        );
    std::fs::write(&manifest, refused).expect("written");
    let output = skoop(&["packs", "lint", pack_dir]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output)
            .contains("object checks cannot be about EndpointSlice: skoop reads them itself"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn lint_refuses_a_remediation_offered_for_a_check_that_cannot_tell() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("flannel");
    copy_pack(Path::new("plugins/flannel"), &pack);
    let manifest = pack.join("pack.yaml");
    let text = std::fs::read_to_string(&manifest).expect("pack.yaml");
    let plain = "    remediation: restart flanneld on the node; it recreates its chains\n";
    assert!(text.contains(plain));
    // By status, for `failed`: the same as the plain form.
    let failed_only =
        "    remediation:\n      failed: restart flanneld on the node; it recreates its chains\n";
    std::fs::write(&manifest, text.replacen(plain, failed_only, 1)).expect("written");
    let output = skoop(&["packs", "lint", pack.to_str().expect("UTF-8")]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    // Offered for a check that cannot tell: refused, at its place.
    let unknown = format!("{failed_only}      unknown: restart flanneld anyway\n");
    std::fs::write(&manifest, text.replacen(plain, &unknown, 1)).expect("written");
    let output = skoop(&["packs", "lint", pack.to_str().expect("UTF-8")]);
    assert_eq!(output.status.code(), Some(1));
    let line = text[..text.find(plain).expect("the remediation")]
        .lines()
        .count()
        + 3;
    assert_eq!(
        stdout(&output).trim_end(),
        format!(
            "{}:{line}:16: remediation for `unknown`: a check that cannot tell is told which dump file to collect, never a remedy for what is not known; give one for `failed` only",
            manifest.to_str().expect("UTF-8")
        )
    );
}

#[test]
fn packs_test_set_overrides_a_parameter_in_every_case() {
    // kindnet's pods have the MTU of the node's eth0, 1500: set so, every
    // case passes; set otherwise, the pods' MTU check fails where it ran.
    let output = skoop(&[
        "packs",
        "test",
        "plugins/kindnet",
        "--set",
        "kindnet.pod_mtu=1500",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let output = skoop(&[
        "packs",
        "test",
        "plugins/kindnet",
        "--set",
        "kindnet.pod_mtu=1400",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(
        text.contains("unexpected finding kindnet.pod.mtu (Failed) for default/web-1"),
        "{text}"
    );
    // A pack not under test is the command's mistake.
    let output = skoop(&["packs", "test", "plugins/kindnet", "--set", "flannel.vni=1"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        "--set flannel.vni=1: no pack under test is called flannel"
    );
}

#[test]
fn every_cni_pack_is_at_least_three_quarters_declarative() {
    // `packs list` shows the counts: "NAME VERSION cni N checks (M declarative)".
    let output = skoop(&["packs", "list"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    let mut cni = 0;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.get(2) != Some(&"cni") {
            continue;
        }
        cni += 1;
        let checks: usize = words[3].parse().expect("a count of checks");
        let declarative: usize = line
            .split_once('(')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .expect("a count of declarative checks");
        assert!(
            declarative * 4 >= checks * 3,
            "{}: {declarative} of {checks} checks declarative",
            words[0]
        );
    }
    assert!(cni >= 4, "{text}");
}
