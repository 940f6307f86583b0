//! `flows:` in a pack test: flows are diagnosed in the case's snapshot and a
//! disposition or finding that differs fails the case, with what was found.

use std::path::Path;
use std::process::Command;

fn skoop(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run skoop")
}

#[test]
fn a_flow_that_is_diagnosed_otherwise_fails_the_case_and_says_how() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        skoop(dir.path(), &["packs", "new", "demo", "--kind", "rules"])
            .status
            .success()
    );
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/flannel-vxlan");
    let case = dir.path().join("demo/tests/flows");
    std::fs::create_dir_all(&case).unwrap();
    std::fs::write(
        case.join("expect.yaml"),
        format!(
            "description: flows through the example\n\
             snapshot: {}\n\
             flows:\n\
             \x20 - from: default/web-0\n\
             \x20   to: default/web-3:8080\n\
             \x20   disposition: delivered\n\
             \x20 - from: default/web-0\n\
             \x20   to: default/web-3:9999\n\
             \x20   disposition: delivered\n\
             \x20   findings: [kernel.route.none]\n\
             \x20 - from: default/web-0\n\
             \x20   to: default/web-3:38412\n\
             \x20   protocol: sctp\n\
             \x20   disposition: insufficient_info\n\
             \x20   findings: [kernel.socket.unknown]\n\
             \x20   absent: [kernel.socket.no-listener]\n",
            example.display()
        ),
    )
    .unwrap();
    let output = skoop(dir.path(), &["packs", "test", "demo"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "flow default/web-0 -> default/web-3:9999: expected delivered, diagnosed no_listener"
        ),
        "{text}"
    );
    assert!(
        text.contains("expected finding kernel.route.none, not reported"),
        "{text}"
    );
    assert!(
        !text.contains("default/web-3:8080: expected"),
        "the delivered flow passes: {text}"
    );
    // An SCTP flow on a dump that lists no SCTP socket: unknown, as expected.
    assert!(!text.contains("default/web-3:38412"), "{text}");
}

#[test]
fn a_malformed_flow_is_positioned() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        skoop(dir.path(), &["packs", "new", "demo", "--kind", "rules"])
            .status
            .success()
    );
    let case = dir.path().join("demo/tests/bad");
    std::fs::create_dir_all(case.join("snapshot/cluster")).unwrap();
    std::fs::write(
        case.join("expect.yaml"),
        "flows:\n  - from: web-0\n    to: default/web-3\n    disposition: arrived\n",
    )
    .unwrap();
    let output = skoop(dir.path(), &["packs", "test", "demo"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_ne!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("expect.yaml:2:11") && text.contains("is not a pod (NS/NAME, pod/NS/NAME)"),
        "{text}"
    );
    assert!(
        text.contains("expect.yaml:4:18") && text.contains("unknown disposition \"arrived\""),
        "{text}"
    );
}

/// A rules pack `demo` in `dir` whose one case holds `flows` (YAML lines
/// under `flows:`) over the bundled example `example`; `packs test` of it.
fn test_flows(dir: &Path, example: &str, flows: &str) -> (Option<i32>, String) {
    assert!(
        skoop(dir, &["packs", "new", "demo", "--kind", "rules"])
            .status
            .success()
    );
    let snapshot = Path::new(env!("CARGO_MANIFEST_DIR")).join(example);
    let case = dir.join("demo/tests/flows");
    std::fs::create_dir_all(&case).unwrap();
    std::fs::write(
        case.join("expect.yaml"),
        format!("snapshot: {}\nflows:\n{flows}", snapshot.display()),
    )
    .unwrap();
    let output = skoop(dir, &["packs", "test", "demo"]);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn flows_can_assert_the_leaving_source_the_size_and_any_disposition_but_one() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text) = test_flows(
        dir.path(),
        "examples/flannel-vxlan",
        "  - {from: default/web-0, to: '198.51.100.10:80', exit_source: 172.18.0.11, assumed: false}\n\
         \x20 - {from: default/web-0, to: 'default/web-3:8080', size: 1400, disposition: delivered}\n\
         \x20 - {from: default/web-0, to: 'default/web-3:8080', size: 1500, not_disposition: delivered}\n",
    );
    assert_eq!(code, Some(0), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let (code, text) = test_flows(
        dir.path(),
        "examples/flannel-vxlan",
        "  - {from: default/web-0, to: '198.51.100.10:80', exit_source: 10.244.1.2}\n\
         \x20 - {from: default/web-0, to: 'default/web-3:8080', exit_source: 172.18.0.11}\n\
         \x20 - {from: default/web-0, to: 'default/web-3:8080', size: 1500, not_disposition: mtu_exceeded}\n",
    );
    assert_eq!(code, Some(1), "{text}");
    for failure in [
        "flow default/web-0 -> 198.51.100.10:80: expected to leave the cluster from 10.244.1.2, leaves from 172.18.0.11",
        "flow default/web-0 -> default/web-3:8080: expected to leave the cluster from 172.18.0.11, it does not leave it",
        "flow default/web-0 -> default/web-3:8080 (1500 bytes): expected anything but mtu_exceeded, diagnosed mtu_exceeded",
    ] {
        assert!(text.contains(failure), "{failure}\n{text}");
    }
}

#[test]
fn flows_can_assert_whether_a_hop_was_assumed() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text) = test_flows(
        dir.path(),
        "examples/flannel-vxlan-partial",
        "  - {from: default/web-0, to: 'default/web-3:8080', disposition: delivered, assumed: false}\n",
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(
            "flow default/web-0 -> default/web-3:8080: expected assumed: false, diagnosed with assumed hops"
        ),
        "{text}"
    );
}

#[test]
fn a_flow_that_expects_nothing_is_a_problem() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text) = test_flows(
        dir.path(),
        "examples/flannel-vxlan",
        "  - {from: default/web-0, to: 'default/web-3:8080'}\n",
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("a flow must say what to expect: disposition, not_disposition, findings, absent, assumed or exit_source"),
        "{text}"
    );
}
