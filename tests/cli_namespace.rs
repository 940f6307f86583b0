//! `route lookup` and `netfilter trace` read one namespace dump: by its
//! directory (`--netns DIR`), or in a snapshot by the node or pod it
//! belongs to (`--snapshot DIR --node NAME | --pod NS/NAME`, the snapshot
//! also from `SKOOP_SNAPSHOT`), with names suggested as `diagnose` does.

use std::process::{Command, Output};

fn skoop(args: &[&str], snapshot_env: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skoop"));
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env_remove("SKOOP_SNAPSHOT");
    if let Some(dir) = snapshot_env {
        command.env("SKOOP_SNAPSHOT", dir);
    }
    command.output().expect("run skoop")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const LOOKUP: &[&str] = &["route", "lookup", "--dst", "10.244.2.3"];
const TRACE: &[&str] = &[
    "netfilter",
    "trace",
    "--src",
    "10.244.1.3",
    "--dst",
    "10.96.0.100",
    "--port",
    "80",
    "--protocol",
    "tcp",
    "--in-iface",
    "cni0",
];

#[test]
fn a_node_or_pod_of_a_snapshot_is_the_same_dump_as_its_directory() {
    for (command, by_dir, by_name) in [
        (
            LOOKUP,
            "examples/flannel-vxlan/nodes/node-1/host",
            &["--node", "node-1"],
        ),
        (
            LOOKUP,
            "examples/flannel-vxlan/nodes/node-1/pods/default/web-0",
            &["--pod", "default/web-0"],
        ),
        (
            TRACE,
            "examples/flannel-vxlan/nodes/node-1/host",
            &["--node", "node-1"],
        ),
    ] {
        let direct = skoop(&[command, &["--netns", by_dir]].concat(), None);
        assert_eq!(direct.status.code(), Some(0), "{}", text(&direct.stderr));
        let flag = skoop(
            &[command, &["--snapshot", "examples/flannel-vxlan"], by_name].concat(),
            None,
        );
        let env = skoop(&[command, by_name].concat(), Some("examples/flannel-vxlan"));
        for output in [&flag, &env] {
            assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
            assert_eq!(text(&output.stdout), text(&direct.stdout));
        }
    }
}

#[test]
fn netns_wins_over_skoop_snapshot() {
    let output = skoop(
        &[
            LOOKUP,
            &["--netns", "examples/flannel-vxlan/nodes/node-2/host"],
        ]
        .concat(),
        Some("examples/flannel-vxlan"),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("10.244.2.3 dev cni0 table main src 10.244.2.1\n"));
}

#[test]
fn misspelt_names_are_answered_with_the_closest_the_snapshot_has() {
    for (args, error) in [
        (
            &["--node", "node1"][..],
            "error: --node node1: examples/flannel-vxlan has no dump of that node's host namespace; did you mean node-1?\n",
        ),
        (
            &["--pod", "default/web-O"][..],
            "error: --pod default/web-O: examples/flannel-vxlan has no dump of that pod; did you mean default/web-0?\n",
        ),
        (
            &["--pod", "kube-system/coredns"][..],
            "error: --pod kube-system/coredns: examples/flannel-vxlan has no dump of that pod; it has: default/web-0, default/web-1, default/web-2, default/web-3\n",
        ),
    ] {
        for command in [LOOKUP, TRACE] {
            let output = skoop(
                &[command, &["-s", "examples/flannel-vxlan"], args].concat(),
                None,
            );
            assert_eq!(output.status.code(), Some(2));
            assert_eq!(text(&output.stderr), error);
            assert!(output.stdout.is_empty());
        }
    }
}

#[test]
fn a_name_without_a_snapshot_or_a_snapshot_without_a_name_says_what_to_give() {
    let output = skoop(&[LOOKUP, &["--node", "node-1"]].concat(), None);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr),
        "error: give --netns DIR, or --snapshot DIR (or SKOOP_SNAPSHOT) with --node NAME or --pod NS/NAME\n"
    );
    let output = skoop(&[LOOKUP, &["-s", "examples/flannel-vxlan"]].concat(), None);
    assert_eq!(output.status.code(), Some(2), "clap asks for one of them");
    assert!(text(&output.stderr).contains("--netns <DIR>|--node <NAME>|--pod <NS/NAME>"));
    let output = skoop(&[LOOKUP, &["-s", "src", "--node", "node-1"]].concat(), None);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr),
        "error: --snapshot src: no nodes/ directory, so no namespace dumps\n"
    );
}
