//! The JSON contract (`docs/json.md`) pinned: `skoop diagnose -o json` on
//! every example (and the IPIP fixture) for a matrix of flows, compared byte
//! for byte with `tests/golden/`. A change to the engine that changes what a
//! user's script reads shows up here as a diff.
//!
//! The text report is pinned too, on fewer flows (`tests/golden/text/`).
//!
//! `SKOOP_BLESS=1 cargo test --test json_golden` rewrites the files; review
//! the diff before committing it.

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// Every snapshot the goldens cover.
const SNAPSHOTS: &[&str] = &[
    "examples/flannel-vxlan",
    "examples/flannel-host-gw",
    "examples/flannel-vxlan-broken",
    "examples/flannel-vxlan-partial",
    "examples/calico-bgp",
    "examples/calico-vxlan",
    "examples/kindnet",
    "examples/flannel-dualstack",
    "examples/flannel-ipv6",
    "tests/fixtures/flannel-ipip",
];

/// (name, arguments after `--snapshot DIR`): the same flows on every snapshot.
const FLOWS: &[(&str, &[&str])] = &[
    (
        "web-0_web-1_tcp",
        &["--from", "default/web-0", "--to", "default/web-1:8080"],
    ),
    (
        "web-0_web-3_tcp",
        &["--from", "default/web-0", "--to", "default/web-3:8080"],
    ),
    (
        "web-0_web-3_udp",
        &[
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--protocol",
            "udp",
        ],
    ),
    (
        "web-0_web-3_icmp",
        &[
            "--from",
            "default/web-0",
            "--to",
            "default/web-3",
            "--protocol",
            "icmp",
        ],
    ),
    (
        "web-0_web-3_icmp_size_mtu",
        &[
            "--from",
            "default/web-0",
            "--to",
            "default/web-3",
            "--protocol",
            "icmp",
            "--size",
            "mtu",
        ],
    ),
    (
        "web-0_web-3_tcp_size_1500",
        &[
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--size",
            "1500",
        ],
    ),
    (
        "web-0_svc_web",
        &["--from", "default/web-0", "--to", "svc/default/web"],
    ),
    (
        "web-3_svc_web",
        &["--from", "default/web-3", "--to", "svc/default/web"],
    ),
    (
        "web-2_web-0_tcp",
        &["--from", "default/web-2", "--to", "default/web-0:8080"],
    ),
    (
        "node-1_web-1_tcp",
        &["--from", "node/node-1", "--to", "default/web-1:8080"],
    ),
    (
        "node-1_web-3_tcp",
        &["--from", "node/node-1", "--to", "default/web-3:8080"],
    ),
    (
        "node-1_node-2_icmp",
        &[
            "--from",
            "node/node-1",
            "--to",
            "node/node-2",
            "--protocol",
            "icmp",
        ],
    ),
    (
        "unknown_pod_error",
        &["--from", "default/nope", "--to", "default/web-1:8080"],
    ),
    (
        "web-0_svc_web_named_port",
        &["--from", "default/web-0", "--to", "svc/default/web:http"],
    ),
    (
        "web-0_clusterip_without_port",
        &["--from", "default/web-0", "--to", "10.96.0.100"],
    ),
    (
        "misspelt_pod_error",
        &["--from", "default/web-O", "--to", "default/web-1:8080"],
    ),
    (
        "icmp_with_port_error",
        &[
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--protocol",
            "icmp",
        ],
    ),
    (
        "node-1_ipv6",
        &["--from", "node/node-1", "--to", "[fd00::1]:80"],
    ),
    (
        "web-0_outside_udp",
        &[
            "--from",
            "default/web-0",
            "--to",
            "8.8.8.8:53",
            "--protocol",
            "udp",
        ],
    ),
];

/// (file name, snapshot, arguments after it) of the text goldens: the
/// verdict, per-backend summary and exit status of issue 17 on the examples,
/// the three levels of detail, and errors that suggest.
const TEXT: &[(&str, &str, &[&str])] = &[
    (
        "broken_web-0_svc_web",
        "examples/flannel-vxlan-broken",
        &["-f", "default/web-0", "-t", "svc/default/web"],
    ),
    (
        "broken_web-0_svc_web_detail",
        "examples/flannel-vxlan-broken",
        &["-f", "default/web-0", "-t", "svc/default/web", "--detail"],
    ),
    (
        "healthy_web-0_svc_web",
        "examples/flannel-vxlan",
        &["-f", "default/web-0", "-t", "svc/default/web"],
    ),
    (
        "healthy_web-0_web-3_verbose",
        "examples/flannel-vxlan",
        &["-f", "default/web-0", "-t", "default/web-3:8080", "-v"],
    ),
    (
        "delivered_with_fatal_findings",
        "examples/flannel-vxlan",
        &[
            "-f",
            "default/web-0",
            "-t",
            "default/web-3:8080",
            "--set",
            "flannel.bridge=br0",
        ],
    ),
    (
        "ipv6_destination",
        "examples/flannel-vxlan",
        &["-f", "default/web-0", "-t", "[fd00::1]:80"],
    ),
    (
        "bare_name_error",
        "examples/flannel-vxlan",
        &["-f", "node1", "-t", "default/web-3:8080"],
    ),
    (
        "unknown_node_error",
        "examples/flannel-vxlan",
        &["-f", "node/node-3", "-t", "default/web-3:8080"],
    ),
    (
        "unknown_service_error",
        "examples/flannel-vxlan",
        &["-f", "default/web-0", "-t", "svc/default/webb"],
    ),
    (
        "target_port_error",
        "examples/flannel-vxlan",
        &["-f", "default/web-0", "-t", "svc/default/web:8080"],
    ),
    (
        "service_source_error",
        "examples/flannel-vxlan",
        &["-f", "svc/default/web", "-t", "default/web-3:8080"],
    ),
];

/// What the command printed, and how it ended, as one text to compare.
fn run(snapshot: &str, args: &[&str]) -> String {
    run_as(snapshot, &[&["-o", "json"], args].concat())
}

/// [`run`] in the format `args` ask for.
fn run_as(snapshot: &str, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["diagnose", "--snapshot", snapshot])
        .args(args)
        .output()
        .expect("run skoop");
    let mut text = String::new();
    let code = output.status.code();
    writeln!(text, "exit: {code:?}").unwrap();
    if !output.stderr.is_empty() {
        writeln!(text, "stderr: {}", String::from_utf8_lossy(&output.stderr)).unwrap();
    }
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    text
}

#[test]
fn json_output_matches_the_goldens_on_every_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut goldens = common::golden::Goldens::new();
    for snapshot in SNAPSHOTS {
        let name = Path::new(snapshot).file_name().unwrap().to_str().unwrap();
        let dir = root.join(name);
        for (flow, args) in FLOWS {
            goldens.check(&dir.join(format!("{flow}.json")), &run(snapshot, args));
        }
    }
    goldens.assert_none_differ();
}

#[test]
fn text_output_matches_the_goldens() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/text");
    let mut goldens = common::golden::Goldens::new();
    for (name, snapshot, args) in TEXT {
        goldens.check(&dir.join(format!("{name}.txt")), &run_as(snapshot, args));
    }
    goldens.assert_none_differ();
}
