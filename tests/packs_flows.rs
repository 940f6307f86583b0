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
        text.contains("expect.yaml:2:11") && text.contains("is not a pod (NS/NAME)"),
        "{text}"
    );
    assert!(
        text.contains("expect.yaml:4:18") && text.contains("unknown disposition \"arrived\""),
        "{text}"
    );
}
