//! `skoop diagnose` on the bundled example as a user runs it: the verdict,
//! the JSON contract (`docs/json.md`) and the exit codes.

mod common;

use std::process::{Command, Output};

use serde_json::Value;

fn diagnose(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["diagnose", "--snapshot", "examples/flannel-vxlan"])
        .args(args)
        .output()
        .expect("run skoop")
}

fn json(args: &[&str]) -> (Option<i32>, Value) {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/flannel-vxlan");
    json_in(&example, args)
}

#[test]
fn pod_to_pod_across_nodes_is_delivered_through_vxlan() {
    let output = diagnose(&[
        "--from",
        "default/web-0",
        "--to",
        "default/web-3",
        "--port",
        "8080",
        "--detail",
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with("default/web-0 -> default/web-3 (10.244.2.3:8080 tcp): delivered\n"),
        "{text}"
    );
    for expected in [
        "flannel.1 encapsulates: 172.18.0.11 -> 172.18.0.12:8472 udp",
        "flannel.1 decapsulates: 10.244.1.2 -> 10.244.2.3:8080 tcp",
        "delivered to tcp 0.0.0.0:8080",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn json_follows_the_contract() {
    let (code, report) = json(&["--from", "default/web-0", "--to", "default/web-3:8080"]);
    assert_eq!(code, Some(0));
    assert_eq!(report["disposition"], "delivered");
    let hops = report["hops"].as_array().unwrap();
    let ids: Vec<&str> = hops.iter().map(|h| h["id"].as_str().unwrap()).collect();
    // There and back: the answer is walked to the sender too.
    assert_eq!(
        ids,
        [
            "default/web-0",
            "node-1",
            "node-2",
            "default/web-3",
            "default/web-3",
            "node-2",
            "node-1",
            "default/web-0"
        ]
    );
    assert_eq!(hops[0]["kind"], "pod");
    assert_eq!(hops[1]["kind"], "node");
    let path = &report["paths"][0];
    assert_eq!(path["hops"], serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]));
    let kinds: Vec<&str> = report["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "veth",
            "underlay",
            "bridge_port",
            "local",
            "veth",
            "underlay",
            "bridge_port"
        ]
    );
    assert!(report["findings"].as_array().unwrap().is_empty());
}

#[test]
fn a_service_fans_out_to_every_backend() {
    let (code, report) = json(&["--from", "default/web-0", "--to", "svc/default/web"]);
    assert_eq!(code, Some(0), "{report:#}");
    let paths = report["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 4, "one path per endpoint");
    let total: f64 = paths
        .iter()
        .map(|p| p["probability"].as_f64().unwrap())
        .sum();
    assert!((total - 1.0).abs() < 1e-9, "probabilities sum to {total}");
    // The backend of each path is the hop whose socket took the request.
    let mut ends: Vec<String> = paths
        .iter()
        .map(|p| {
            let backend = p["hops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| &report["hops"][h.as_u64().unwrap() as usize])
                .find(|hop| {
                    hop["steps"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|s| s["kind"] == "delivered" && s["socket"] == "tcp 0.0.0.0:8080")
                });
            backend.expect("a backend took the request")["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    ends.sort();
    assert_eq!(
        ends,
        [
            "default/web-0",
            "default/web-1",
            "default/web-2",
            "default/web-3"
        ]
    );
    let text = serde_json::to_string(&report).unwrap();
    assert!(
        text.contains("dnat 10.96.0.100:80 -> 10.244.2.3:8080"),
        "{text}"
    );
}

#[test]
fn a_closed_port_is_no_listener_at_the_destination_pod_and_exits_1() {
    let (code, report) = json(&[
        "--from",
        "default/web-0",
        "--to",
        "default/web-3",
        "--port",
        "9999",
    ]);
    assert_eq!(code, Some(1));
    assert_eq!(report["disposition"], "no_listener");
    let finding = &report["findings"][0];
    assert_eq!(finding["id"], "kernel.socket.no-listener");
    assert_eq!(finding["severity"], "fatal");
    assert_eq!(finding["hop"], "default/web-3");
    assert!(
        finding["evidence"]
            .as_str()
            .unwrap()
            .ends_with("nodes/node-2/pods/default/web-3/ss.txt")
    );
}

#[test]
fn bad_input_is_a_clear_error_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--from", "default/nope", "--to", "default/web-3"],
            "no pod default/nope",
        ),
        (
            &["--from", "web-0", "--to", "default/web-3"],
            "is not a pod (NS/NAME, pod/NS/NAME)",
        ),
        (
            &["--from", "default/web-0", "--to", "10.0.0.300"],
            "is not a pod (NS/NAME, pod/NS/NAME)",
        ),
        (
            &["--from", "default/web-0", "--to", "svc/default/web:81"],
            "service default/web has no port 81",
        ),
        (
            &["--from", "default/web-0", "--to", "10.1.2.3"],
            "tcp needs a port",
        ),
        (
            &[
                "--from",
                "8.8.8.8",
                "--via",
                "node/node-9",
                "--to",
                "default/web-3:8080",
            ],
            "no node node-9 in the snapshot",
        ),
        (
            &[
                "--from",
                "default/web-0",
                "--to",
                "default/web-3:8080",
                "--size",
                "67",
            ],
            "\"67\" is not a packet size: give BYTES (68-65535, the IP packet with its header) or mtu",
        ),
        (
            &[
                "--from",
                "default/web-0",
                "--to",
                "default/web-3:8080",
                "--size",
                "big",
            ],
            "\"big\" is not a packet size",
        ),
        // A question that mixes address families is a bad question, not a
        // martian packet (exit 1) nor an unknown (issue 29).
        (
            &["--from", "fd00::5", "--to", "default/web-3:8080"],
            "--from fd00::5 is an IPv6 address (fd00::5) and --to default/web-3:8080 an IPv4 address (10.244.2.3)",
        ),
        (
            &["--from", "default/web-0", "--to", "[fd00::1]:80"],
            "--from default/web-0 is an IPv4 address (10.244.1.2) and --to [fd00::1]:80 an IPv6 address (fd00::1)",
        ),
    ];
    for (args, expected) in cases {
        let output = diagnose(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args([
            "diagnose",
            "--snapshot",
            "/no/such/dir",
            "--from",
            "a/b",
            "--to",
            "c/d",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

/// In the host-gw lab a node's `eth0` (ifindex 2, peer 4 in the underlay)
/// and its pod veth (ifindex 4, peer 2 in the pod) share one key of the
/// ifindex index; the veth pairing must not join a namespace to itself.
#[test]
fn host_gw_example_pairs_veths_despite_colliding_ifindexes() {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "diagnose",
            "--snapshot",
            "examples/flannel-host-gw",
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--detail",
        ])
        .output()
        .expect("run skoop");
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("route: via 172.18.0.12 dev eth0 (10.244.2.0/24 via 172.18.0.12 dev eth0)"),
        "{text}"
    );
    assert!(text.contains("| underlay eth0 -> eth0"), "{text}");
}

/// The Kubernetes object behind a service that cannot work: its
/// EndpointSlice lists no ready endpoint.
#[test]
fn a_service_without_ready_endpoints_is_a_fatal_finding_naming_its_endpointslice() {
    let dir = edited_example("cluster/endpointslices.yaml", "ready: true", "ready: false");
    // By name or by its ClusterIP, the request goes to the same Service.
    for to in ["svc/default/web", "10.96.0.100:80"] {
        let (code, report) = json_in(dir.path(), &["--from", "default/web-0", "--to", to]);
        // Delivered by the rules kube-proxy left, but broken all the same.
        assert_eq!(code, Some(3));
        let finding = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == "kube-proxy.service.no-ready-endpoints")
            .expect("the finding");
        assert_eq!(finding["severity"], "fatal");
        assert_eq!(finding["hop"], "default/web-0");
        assert!(
            finding["evidence"]
                .as_str()
                .unwrap()
                .contains("cluster/endpointslices.yaml:"),
            "{finding}"
        );
    }
    // With ready endpoints, no such finding.
    let (_, healthy) = json(&["--from", "default/web-0", "--to", "svc/default/web"]);
    assert!(!healthy.to_string().contains("no-ready-endpoints"));
}

/// A pack's finding about the Service the request goes to joins the
/// diagnosis, at the hop where the request starts.
#[test]
fn a_finding_about_the_target_service_joins_the_diagnosis() {
    let dir = edited_example(
        "cluster/services.yaml",
        "targetPort: 8080",
        "targetPort: nope",
    );
    let (_, report) = json_in(
        dir.path(),
        &["--from", "default/web-0", "--to", "10.96.0.100:80"],
    );
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "kube-proxy.service.target-port-name")
        .unwrap_or_else(|| panic!("the finding in {report:#}"));
    assert_eq!(finding["hop"], "default/web-0");
    assert!(
        finding["message"].as_str().unwrap().contains("nope"),
        "{finding}"
    );
    // A flow to a pod is about no Service.
    let (_, to_pod) = json_in(
        dir.path(),
        &["--from", "default/web-0", "--to", "default/web-3:8080"],
    );
    assert!(
        !to_pod.to_string().contains("target-port-name"),
        "{to_pod:#}"
    );
}

/// A copy of the VXLAN example with `from` replaced by `to` in one file.
fn edited_example(file: &str, from: &str, to: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/flannel-vxlan");
    for part in ["cluster", "nodes"] {
        let status = Command::new("cp")
            .arg("-r")
            .arg(example.join(part))
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
    }
    edit(dir.path(), file, from, to);
    dir
}

/// Replaces `from` by `to` in `file` of the snapshot at `dir`.
fn edit(dir: &std::path::Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{from:?} in {file}");
    std::fs::write(&path, text.replace(from, to)).unwrap();
}

/// The VXLAN example with SCTP added as a cluster would have it (the lab's
/// kernel has no sctp module, so no lab run can make this snapshot): every
/// web pod declares 38412/SCTP and listens there (the line `ss -H -tulnS`
/// prints for an SCTP endpoint), Service web has port ngap 38412/SCTP
/// beside http, its EndpointSlice the port, and kube-proxy's rules for it on
/// both nodes, written as kube-proxy writes an SCTP port's.
fn sctp_example() -> tempfile::TempDir {
    let dir = edited_example(
        "cluster/pods.yaml",
        "        name: http\n        protocol: TCP\n",
        "        name: http\n        protocol: TCP\n      - containerPort: 38412\n        name: ngap\n        protocol: SCTP\n",
    );
    let dir_path = dir.path();
    edit(
        dir_path,
        "cluster/services.yaml",
        "      targetPort: 8080\n",
        "      targetPort: 8080\n    - name: ngap\n      port: 38412\n      protocol: SCTP\n      targetPort: 38412\n",
    );
    edit(
        dir_path,
        "cluster/endpointslices.yaml",
        "  - name: http\n    port: 8080\n    protocol: TCP\n",
        "  - name: http\n    port: 8080\n    protocol: TCP\n  - name: ngap\n    port: 38412\n    protocol: SCTP\n",
    );
    let pods = [
        ("10.244.1.2", "0.25000000000"),
        ("10.244.1.3", "0.33333333349"),
        ("10.244.2.2", "0.50000000000"),
        ("10.244.2.3", ""),
    ];
    let mut chains = String::from(":KUBE-SVC-NGAPSCTP00000000 - [0:0]\n");
    let mut rules = String::from(
        "-A KUBE-SERVICES -d 10.96.0.100/32 -p sctp -m comment --comment \"default/web:ngap cluster IP\" -m sctp --dport 38412 -j KUBE-SVC-NGAPSCTP00000000\n\
         -A KUBE-SVC-NGAPSCTP00000000 ! -s 10.244.0.0/16 -d 10.96.0.100/32 -p sctp -m comment --comment \"default/web:ngap cluster IP\" -m sctp --dport 38412 -j KUBE-MARK-MASQ\n",
    );
    for (n, (ip, probability)) in pods.iter().enumerate() {
        let sep = format!("KUBE-SEP-NGAPSCTP0000000{n}");
        chains.push_str(&format!(":{sep} - [0:0]\n"));
        let statistic = match *probability {
            "" => String::new(),
            p => format!(" -m statistic --mode random --probability {p}"),
        };
        rules.push_str(&format!(
            "-A KUBE-SVC-NGAPSCTP00000000 -m comment --comment \"default/web:ngap -> {ip}:38412\"{statistic} -j {sep}\n\
             -A {sep} -s {ip}/32 -m comment --comment \"default/web:ngap\" -j KUBE-MARK-MASQ\n\
             -A {sep} -p sctp -m comment --comment \"default/web:ngap\" -m sctp -j DNAT --to-destination {ip}:38412\n"
        ));
    }
    for node in ["node-1", "node-2"] {
        let file = format!("nodes/{node}/host/iptables-save.txt");
        let svc = ":KUBE-SVC-CDGGSHYLG3RE2FKL - [0:0]\n";
        edit(dir_path, &file, svc, &format!("{svc}{chains}"));
        let nodeports = "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports";
        edit(dir_path, &file, nodeports, &format!("{rules}{nodeports}"));
    }
    for (node, pod) in [
        ("node-1", "web-0"),
        ("node-1", "web-1"),
        ("node-2", "web-2"),
        ("node-2", "web-3"),
    ] {
        let listening = "tcp LISTEN 0      1      0.0.0.0:8080 0.0.0.0:*\n";
        edit(
            dir_path,
            &format!("nodes/{node}/pods/default/{pod}/ss.txt"),
            listening,
            &format!("{listening}sctp LISTEN 0      128    0.0.0.0:38412 0.0.0.0:*\n"),
        );
    }
    dir
}

/// The socket each path was delivered to, and the hop that took it.
fn deliveries(report: &Value) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = report["hops"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|hop| {
            hop["steps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["kind"] == "delivered")
                .map(move |s| {
                    (
                        hop["id"].as_str().unwrap().to_string(),
                        s["socket"].as_str().unwrap().to_string(),
                    )
                })
        })
        .filter(|(_, socket)| !socket.contains("the sender's connection"))
        .collect();
    found.sort();
    found
}

#[test]
fn an_sctp_service_port_is_dnated_by_its_sctp_rules_to_listening_endpoints() {
    let dir = sctp_example();
    let (code, report) = json_in(
        dir.path(),
        &[
            "--from",
            "default/web-0",
            "--to",
            "svc/default/web",
            "--protocol",
            "sctp",
        ],
    );
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["disposition"], "delivered");
    assert_eq!(
        report["paths"].as_array().unwrap().len(),
        4,
        "one per endpoint"
    );
    let socket = "sctp 0.0.0.0:38412".to_string();
    assert_eq!(
        deliveries(&report),
        [
            "default/web-0",
            "default/web-1",
            "default/web-2",
            "default/web-3"
        ]
        .map(|pod| (pod.to_string(), socket.clone()))
    );
    let text = report.to_string();
    assert!(
        text.contains("dnat 10.96.0.100:38412 -> 10.244.2.3:38412"),
        "{text}"
    );
    // The links carry the protocol as a field too.
    let protocols: Vec<&str> = report["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["packet"]["protocol"].as_str())
        .collect();
    assert!(protocols.contains(&"sctp"), "{protocols:?}");
    // The same Service over TCP: port 80, the one TCP port of two.
    let (code, tcp) = json_in(
        dir.path(),
        &["--from", "default/web-0", "--to", "svc/default/web"],
    );
    assert_eq!(code, Some(0), "{tcp:#}");
    assert!(
        tcp.to_string()
            .contains("dnat 10.96.0.100:80 -> 10.244.2.3:8080")
    );
}

#[test]
fn an_sctp_flow_to_a_pod_is_delivered_where_an_sctp_endpoint_listens_and_refused_elsewhere() {
    let dir = sctp_example();
    // The pod's one declared SCTP port is the flow's.
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["diagnose", "--snapshot"])
        .arg(dir.path())
        .args([
            "--from",
            "default/web-0",
            "--to",
            "default/web-3",
            "--protocol",
            "sctp",
            "--detail",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with("default/web-0 -> default/web-3 (10.244.2.3:38412 sctp): delivered\n"),
        "{text}"
    );
    for expected in [
        "flannel.1 decapsulates: 10.244.1.2 -> 10.244.2.3:38412 sctp",
        "delivered to sctp 0.0.0.0:38412",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    // The dump lists SCTP endpoints, so none on 9999 means none listens.
    let (code, report) = json_in(
        dir.path(),
        &[
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:9999",
            "--protocol",
            "sctp",
        ],
    );
    assert_eq!(code, Some(1));
    assert_eq!(report["disposition"], "no_listener");
    let finding = &report["findings"][0];
    assert_eq!(finding["id"], "kernel.socket.no-listener");
    assert!(
        finding["message"].as_str().unwrap().contains(
            "nothing in default/web-3 listens on sctp port 9999 (the kernel answers with an ABORT)"
        ),
        "{finding}"
    );
}

/// The bundled example was collected with `ss -H -tuln`, which lists no
/// SCTP socket: whether anything listens on SCTP is unknown there, never
/// "nothing listens".
#[test]
fn an_sctp_flow_on_a_dump_without_sctp_listing_is_insufficient_info_not_no_listener() {
    let (code, report) = json(&[
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:38412",
        "--protocol",
        "sctp",
    ]);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["disposition"], "insufficient_info");
    let ids: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&"kernel.socket.no-listener"), "{ids:?}");
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "kernel.socket.unknown")
        .unwrap_or_else(|| panic!("kernel.socket.unknown in {report:#}"));
    assert_eq!(finding["hop"], "default/web-3");
    assert_eq!(finding["severity"], "warning");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("ss.txt lists no SCTP socket at all"),
        "{finding}"
    );
    // The pack's listener check at that hop cannot tell either.
    assert!(
        !report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "core.hop.listener" && f["severity"] == "critical"),
        "{report:#}"
    );
    // The walk itself crossed both nodes and the VXLAN tunnel as SCTP.
    let hops: Vec<&str> = report["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    assert_eq!(hops, ["default/web-0", "node-1", "node-2", "default/web-3"]);
}

#[test]
fn an_sctp_flow_to_a_tcp_only_service_port_is_a_usage_error() {
    let output = diagnose(&[
        "--from",
        "default/web-0",
        "--to",
        "svc/default/web:80",
        "--protocol",
        "sctp",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("service default/web has no sctp port 80 (its port 80 is TCP)"),
        "{stderr}"
    );
    let output = diagnose(&[
        "--from",
        "default/web-0",
        "--to",
        "svc/default/web",
        "--protocol",
        "sctp",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("service default/web has no sctp port (its ports: 80/TCP)"),
        "{stderr}"
    );
}

/// `skoop diagnose --snapshot DIR ARGS -o json`: the exit code and the report.
fn json_in(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["diagnose", "--snapshot"])
        .arg(dir)
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    let value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    (output.status.code(), value)
}

#[test]
fn size_walks_packets_of_that_size_and_stops_where_one_does_not_fit() {
    let args = [
        "--from",
        "default/web-0",
        "--to",
        "default/web-3",
        "--protocol",
        "icmp",
        "--size",
    ];
    let fits = diagnose(&[&args[..], &["mtu"]].concat());
    let text = String::from_utf8_lossy(&fits.stdout);
    assert_eq!(fits.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with(
            "default/web-0 -> default/web-3 (10.244.2.3 icmp, the source interface's MTU, DF): delivered\n"
        ),
        "{text}"
    );
    let too_large = diagnose(&[&args[..], &["1451"]].concat());
    let text = String::from_utf8_lossy(&too_large.stdout);
    assert_eq!(too_large.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with(
            "default/web-0 -> default/web-3 (10.244.2.3 icmp, 1451 bytes, DF): mtu_exceeded, with 1 fatal and 1 critical findings\n  packs: core, kube-proxy, networkpolicy, flannel (CNI)\n\npath 1 of 1 (100% of flows) to default/web-3 (10.244.2.3): mtu_exceeded at default/web-0\n\nfindings:\n  fatal kernel.mtu.exceeded at default/web-0: default/web-0 cannot send a 1451-byte packet by eth0, whose MTU is 1450, and DF is set: the sending socket gets EMSGSIZE (message too long)\n"
        ),
        "{text}"
    );
    let (code, report) = json(&[&args[..], &["1451"]].concat());
    assert_eq!(code, Some(1));
    assert_eq!(report["disposition"], "mtu_exceeded");
    assert_eq!(report["findings"][0]["id"], "kernel.mtu.exceeded");
    assert_eq!(report["findings"][0]["severity"], "fatal");
    assert!(
        report["findings"][0]["evidence"]
            .as_str()
            .unwrap()
            .ends_with("web-0/ip-link.json: eth0 mtu 1450"),
        "{report:#}"
    );
}

/// Issue 17 too: the exit statuses are documented where a user looks first
/// (what each run prints and exits with is in the text goldens).
#[test]
fn help_explains_size_and_every_exit_status() {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["diagnose", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0));
    for expected in [
        "--size <BYTES|mtu>",
        "Walk packets of this size (IP header included) with DF set",
        "stops the path (mtu_exceeded)",
        "--protocol icmp --size mtu",
        "--protocol sctp",
        "Whether an SCTP endpoint listens",
        "--family <FAMILY>",
        "  0  every path is delivered",
        "  1  some path is not delivered",
        "  2  bad arguments or input",
        "  3  every path is delivered, but a critical or fatal finding",
    ] {
        assert!(help.contains(expected), "missing {expected:?} in:\n{help}");
    }
}

/// Issue 12: a packet of the sender's MTU fits every device of a healthy
/// VXLAN path (the outer packet on the underlay, the inner one on the
/// bridge), so nothing about sizes is reported; a packet that does not fit
/// is, with the device's line in ip-link.json as evidence.
#[test]
fn a_size_that_fits_every_device_on_a_healthy_path_is_not_a_finding() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for example in ["examples/flannel-vxlan", "examples/calico-vxlan"] {
        let args = [
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--size",
            "mtu",
        ];
        let (code, report) = json_in(&root.join(example), &args);
        assert_eq!(report["disposition"], "delivered", "{example}: {report:#}");
        assert_eq!(code, Some(0), "{example}");
        let findings = report["findings"].as_array().unwrap();
        assert!(
            findings.iter().all(|f| f["id"] != "core.hop.mtu"),
            "{example}: {findings:#?}"
        );
    }
    let (_, report) = json(&[
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
        "--size",
        "1500",
    ]);
    let too_big = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "core.hop.mtu")
        .expect("core.hop.mtu for 1500 bytes out of a 1450-byte eth0");
    let evidence = too_big["evidence"].as_str().unwrap();
    assert!(
        evidence.ends_with("nodes/node-1/pods/default/web-0/ip-link.json:1:510"),
        "{evidence}"
    );
}

/// Issue 12: leaving the cluster is a success when the source is one the
/// outside can answer (masqueraded to the node's address), and a failure
/// saying why when it keeps a pod's address (Calico's natOutgoing rule
/// missing).
#[test]
fn leaving_the_cluster_succeeds_only_with_a_source_the_outside_can_answer() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let outside = ["--from", "default/web-0", "--to", "203.0.113.10:443"];
    let run = |dir: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
            .args(["diagnose", "--snapshot"])
            .arg(root.join(dir))
            .args(outside)
            .output()
            .expect("run skoop");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        (output.status.code(), text)
    };
    let (code, text) = run("examples/flannel-vxlan");
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.lines().next().unwrap().ends_with(
            "exits_cluster from 172.18.0.11 (node-1's address: replies are routed back to the node)"
        ),
        "{text}"
    );
    let broken = "plugins/calico/tests/nat-outgoing-rule-missing/snapshot";
    let (code, text) = run(broken);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.lines().next().unwrap().contains(
            "exits_cluster with source 10.244.60.65, which the outside cannot answer (pod default/web-0's address"
        ),
        "{text}"
    );
    let (_, report) = json_in(&root.join(broken), &outside);
    let exit = &report["paths"][0]["exit"];
    assert_eq!(exit["source"], "10.244.60.65");
    assert_eq!(exit["answerable"], false);
}

/// Issue 12: a client outside the cluster to a NodePort, arriving at the
/// node `--via` names (the real-components example, whose kube-proxy
/// programmed an externalTrafficPolicy Cluster NodePort, 30080, and a Local
/// one, 30081, whose endpoints are on node-1 only).
#[test]
fn a_client_outside_the_cluster_reaches_a_nodeport_as_its_traffic_policy_says() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = root.join("examples/flannel-vxlan-real");
    let from_outside = |via: &str, port: &str| {
        let to = format!("node/{via}:{port}");
        let via = format!("node/{via}");
        json_in(
            &example,
            &["--from", "198.51.100.7", "--via", &via, "--to", &to],
        )
    };
    // Cluster: every backend, masqueraded at node-2, the reply un-NATed
    // there and handed to the client's connection.
    let (code, report) = from_outside("node-2", "30080");
    assert_eq!(code, Some(0), "{report:#}");
    let paths = report["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 4);
    let hops = report["hops"].as_array().unwrap();
    for path in paths {
        assert_eq!(path["disposition"], "delivered");
        let indices = path["hops"].as_array().unwrap();
        let first = &hops[indices[0].as_u64().unwrap() as usize];
        let last = &hops[indices.last().unwrap().as_u64().unwrap() as usize];
        assert_eq!(
            (first["id"].as_str(), first["kind"].as_str()),
            (Some("198.51.100.7"), Some("external"))
        );
        assert_eq!(last["id"], "198.51.100.7");
        assert!(
            last["steps"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["kind"] == "delivered"),
            "{last:#}"
        );
    }
    let masqueraded = report.to_string().contains("masquerade 198.51.100.7:40000");
    assert!(masqueraded, "externalTrafficPolicy Cluster masquerades");
    // Local: delivered at node-1 with the client's address kept; dropped
    // at node-2, which has no endpoint.
    let (code, report) = from_outside("node-1", "30081");
    assert_eq!(code, Some(0), "{report:#}");
    assert!(!report.to_string().contains("masquerade 198.51.100.7"));
    let (code, report) = from_outside("node-2", "30081");
    assert_eq!(code, Some(1));
    assert_eq!(report["disposition"], "denied_by_netfilter");
    assert_eq!(report["findings"][0]["hop"], "node-2");
}

#[test]
fn via_is_for_a_source_outside_the_cluster_and_names_a_node() {
    let output = diagnose(&[
        "--from",
        "default/web-0",
        "--via",
        "node/node-1",
        "--to",
        "default/web-3:8080",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--via is for a source outside the cluster"),
        "{stderr}"
    );
    let output = diagnose(&[
        "--from",
        "198.51.100.7",
        "--via",
        "node-1",
        "--to",
        "default/web-3:8080",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("is not a node: write node/NAME"),
        "{stderr}"
    );
}

/// Without --via, a client outside sending to a load balancer's IP
/// arrives at every node in turn, each an equal share of the flows.
#[test]
fn without_via_a_client_outside_arrives_at_every_node_in_turn() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = root.join("examples/flannel-vxlan-real");
    let args = ["--from", "198.51.100.7", "--to", "203.0.113.10:80"];
    let (code, report) = json_in(&example, &args);
    assert_eq!(code, Some(0), "{report:#}");
    let request = report["request_text"].as_str().unwrap();
    assert!(
        request.contains("(from outside, arriving at node/node-1, node/node-2)"),
        "{request}"
    );
    let hops = report["hops"].as_array().unwrap();
    let mut arrivals = std::collections::BTreeMap::new();
    for path in report["paths"].as_array().unwrap() {
        let second = path["hops"][1].as_u64().unwrap() as usize;
        *arrivals
            .entry(hops[second]["id"].as_str().unwrap().to_string())
            .or_insert(0.0) += path["probability"].as_f64().unwrap();
    }
    assert_eq!(arrivals.len(), 2, "{arrivals:?}");
    for share in arrivals.values() {
        assert!((share - 0.5).abs() < 1e-6, "{arrivals:?}");
    }
}

/// A client outside the cluster with no node dump to arrive at, and none
/// named: where its packets arrive cannot be told.
#[test]
fn a_client_outside_with_nowhere_to_arrive_is_a_usage_error() {
    let dir = edited_example("cluster/nodes.yaml", "", "");
    std::fs::remove_dir_all(dir.path().join("nodes")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["diagnose", "--snapshot"])
        .arg(dir.path())
        .args(["--from", "198.51.100.7", "--to", "10.96.0.100:80"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("198.51.100.7 is outside the cluster, and no node's dump shows where its packets would arrive: name the node with --via node/NAME"),
        "{stderr}"
    );
}

/// Issue 17: which backends of a service fail, each path naming its
/// backend, and a finding several paths share said once with them.
#[test]
fn a_service_fan_out_says_which_backends_fail_and_each_finding_once() {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["diagnose", "-s", "examples/flannel-vxlan-broken"])
        .args(["-f", "default/web-0", "-t", "svc/default/web"])
        .output()
        .expect("run skoop");
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("\n  2 of 4 backends (50% of flows) fail: default/web-2, default/web-3\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "\npath 3 of 4 (25% of flows) to default/web-2 (10.244.2.2:8080): neighbor_failed at node-1\n"
        ),
        "{text}"
    );
    assert_eq!(text.matches("kernel.fdb.missing").count(), 1, "{text}");
    assert!(
        text.contains("fatal kernel.fdb.missing at node-1 (paths 3, 4):"),
        "{text}"
    );
    let (_, report) = json_in(
        std::path::Path::new("examples/flannel-vxlan-broken"),
        &["--from", "default/web-0", "--to", "svc/default/web"],
    );
    let owners: Vec<&Value> = report["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|path| &path["backend"]["owner"])
        .collect();
    assert_eq!(
        owners,
        [
            "default/web-0",
            "default/web-1",
            "default/web-2",
            "default/web-3"
        ]
    );
}

/// Issue 17: a named service port, and a ClusterIP without a port, resolve
/// as `svc/` does; ICMP with a port is an error, not ignored.
#[test]
fn named_ports_and_bare_clusterips_resolve_and_icmp_takes_no_port() {
    for to in ["svc/default/web:http", "10.96.0.100"] {
        let (code, report) = json(&["--from", "default/web-0", "--to", to]);
        assert_eq!(code, Some(0), "{to}");
        assert!(
            report["request_text"]
                .as_str()
                .unwrap()
                .contains("(10.96.0.100:80 tcp)"),
            "{report}"
        );
    }
    let output = diagnose(&[
        "--from",
        "default/web-0",
        "--to",
        "default/web-3",
        "--protocol",
        "icmp",
        "-p",
        "8080",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("icmp has no ports"));
}

/// Issue 17: the short and shared flag names, and SKOOP_SNAPSHOT.
#[test]
fn short_flags_aliases_and_the_snapshot_from_the_environment() {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("SKOOP_SNAPSHOT", "examples/flannel-vxlan")
        .args(["diagnose", "-f", "default/web-0", "-t", "default/web-3"])
        .args(["--dport", "8080", "--proto", "tcp"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with("default/web-0 -> default/web-3 (10.244.2.3:8080 tcp): delivered\n"),
        "{text}"
    );
    let trace = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "netfilter",
            "trace",
            "--netns",
            "examples/flannel-vxlan/nodes/node-1/host",
        ])
        .args([
            "--src",
            "10.244.1.3",
            "--dst",
            "10.96.0.100",
            "--in-iface",
            "cni0",
        ])
        .args(["--protocol", "tcp", "--port", "80"])
        .output()
        .unwrap();
    assert_eq!(trace.status.code(), Some(0), "{trace:?}");
    // A snapshot from the environment and a live collection cannot both be.
    let both = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("SKOOP_SNAPSHOT", "examples/flannel-vxlan")
        .args(["diagnose", "--save-snapshot", "/nonexistent-skoop/saved"])
        .args(["-f", "default/web-0", "-t", "default/web-3:8080"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("(or SKOOP_SNAPSHOT) names"),
        "{both:?}"
    );
}

/// Issue 17: the names an error suggests come from the snapshot, which
/// anyone may have written: they are escaped for the terminal as the report is.
#[test]
fn suggested_names_cannot_drive_the_terminal() {
    let dir = common::copy_snapshot("examples/flannel-vxlan");
    common::edit_text(&dir.path().join("cluster/pods.yaml"), |text| {
        text.replacen("    name: web-1\n", "    name: \"web-1\\e[31m\"\n", 1)
    });
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["diagnose", "--snapshot"])
        .arg(dir.path())
        .args(["--from", "default/web-0", "--to", "default/nope:8080"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("default/web-1\\u{1b}[31m"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
}

/// Issue 36: Linux sends a connection to 0.0.0.0 to the sender itself (its
/// route is `local 0.0.0.0 dev lo src 127.0.0.1`, read before any rule),
/// so the pod's own listener answers it, or its absence is said there; it
/// was called martian at the node.
#[test]
fn a_connection_to_0_0_0_0_reaches_the_senders_own_listener_not_martian() {
    let (code, report) = json(&["--from", "default/web-0", "--to", "0.0.0.0:8080"]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["disposition"], "delivered");
    let hops: Vec<&str> = report["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hop| hop["id"].as_str().unwrap())
        .collect();
    assert!(hops.iter().all(|hop| *hop == "default/web-0"), "{hops:?}");
    assert_eq!(report["paths"][0]["backend"]["address"], "127.0.0.1");

    let (code, report) = json(&["--from", "default/web-0", "--to", "0.0.0.0:9999"]);
    assert_eq!(code, Some(1));
    assert_eq!(report["disposition"], "no_listener");
    assert_eq!(report["findings"][0]["id"], "kernel.socket.no-listener");
    assert_eq!(report["findings"][0]["hop"], "default/web-0");

    let lookup = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["route", "lookup", "-s", "examples/flannel-vxlan"])
        .args(["--pod", "default/web-0", "--dst", "0.0.0.0"])
        .output()
        .expect("run skoop");
    assert_eq!(lookup.status.code(), Some(0));
    let text = String::from_utf8_lossy(&lookup.stdout);
    assert_eq!(
        text.lines().next(),
        Some("local 0.0.0.0 dev lo src 127.0.0.1"),
        "{text}"
    );
}

/// Issue 37: `--confirm` sends packets, so what it cannot do is refused
/// before anything runs: a TCP or UDP flow with `--size` (only a ping is
/// sent at a size), in a picture (which cannot show it), and on a snapshot
/// without `--node-exec` to reach its nodes.
#[test]
fn confirm_is_refused_where_it_cannot_run_and_its_help_says_what_it_sends() {
    let flow = ["--from", "default/web-0", "--to", "default/web-3:8080"];
    for (args, expected) in [
        (
            &["--confirm", "--size", "1400"][..],
            "only as a ping (--protocol icmp)",
        ),
        (&["--confirm", "-o", "svg"][..], "use -o text or -o json"),
        (&["--confirm"][..], "through --node-exec TEMPLATE"),
    ] {
        let output = diagnose(&[&flow[..], args].concat());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty() || args.contains(&"-o"), "{args:?}");
    }
    let help = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["diagnose", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for expected in [
        "--confirm",
        "Nothing is sent without it",
        "Confirming with the kernel",
    ] {
        assert!(help.contains(expected), "missing {expected:?} in:\n{help}");
    }
}
