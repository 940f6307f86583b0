//! `skoop diagnose --confirm` against the kernel (issue 37): on a Flannel
//! VXLAN lab served by a real API server, the flow's own packets are sent
//! from its source, and the counters on its path read before and after.
//! A run without `--confirm` sends nothing; a run with it agrees with the
//! model on the healthy lab; and a rule added after the snapshot was
//! collected is reported as a disagreement naming the hop where the
//! counters show the packet stopping.

use std::process::{Command, Output};

use serde_json::Value;

use crate::flannel::Flannel;
use crate::live::{self, ServedLab};

fn skoop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .output()
        .expect("run skoop")
}

/// `skoop diagnose ARGS... -o json`'s report, which must be JSON.
fn report(args: &[&str]) -> (Value, Output) {
    let mut argv = vec!["diagnose", "-o", "json"];
    argv.extend_from_slice(args);
    let output = skoop(&argv);
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "skoop {argv:?}: not JSON ({e}):\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (report, output)
}

/// The packets an `iptables -L -v -x` line of `chain` in `ns` counted for
/// the rule whose `-S` form contains `rule`.
fn counted(ns: &crate::lab::Netns, chain: &str, rule: &str) -> u64 {
    let rules = ns.run(&["iptables", "-S", chain, "-v"]);
    let line = rules
        .lines()
        .find(|line| line.contains(rule))
        .unwrap_or_else(|| panic!("no rule {rule:?} in {chain}:\n{rules}"));
    // `-A OUTPUT ... -c PACKETS BYTES`.
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "-c").expect("-v gives -c");
    words[at + 1].parse().expect("a packet count")
}

#[test]
fn confirm_sends_only_when_asked_agrees_and_names_a_rule_added_after_the_snapshot() {
    let Some(ServedLab {
        server,
        cluster,
        offline: _offline,
        mut lab,
    }) = live::served_lab(&Flannel::VXLAN, 2)
    else {
        return;
    };
    let kubeconfig = server.kubeconfig.to_str().expect("utf-8 path");
    let template = live::node_exec(&cluster);
    let (web0, web3) = (&cluster.nodes[0].pods[0], &cluster.nodes[1].pods[1]);
    let flow = ["--from", "default/web-0", "--to", "default/web-3:8080"];
    let to_web3 = format!("-d {}/32 -p tcp -m tcp --dport 8080", web3.ip());

    // A rule that only counts the flow's connection attempts (SYNs) as
    // web-0 sends them.
    let count = format!("OUTPUT -d {} -p tcp --dport 8080 --syn", web3.ip());
    let words: Vec<&str> = count.split_whitespace().collect();
    web0.ns
        .run(&[&["iptables", "-I"], words.as_slice()].concat());

    // A UDP listener in web-3 (the pods' own listen on TCP only), there
    // when the snapshot is collected.
    lab.spawn(&web3.ns, &["nc", "-4", "-u", "-k", "-l", "9000"]);
    web3.ns
        .wait_for(&["ss", "-Hlun"], std::time::Duration::from_secs(5), |ss| {
            ss.contains(":9000")
        });

    // Without --confirm: a live diagnosis collects, and sends nothing.
    let saved = tempfile::tempdir().expect("temp dir");
    let saved_dir = saved.path().join("snapshot");
    let saved_dir = saved_dir.to_str().expect("utf-8 path");
    let mut live = vec!["--kubeconfig", kubeconfig, "--node-exec", &template];
    live.extend(flow);
    let mut args = live.clone();
    args.extend(["--save-snapshot", saved_dir]);
    let (plain, output) = report(&args);
    assert_eq!(output.status.code(), Some(0), "{plain:#}");
    assert!(plain.get("confirmation").is_none(), "{plain:#}");
    assert_eq!(
        counted(&web0.ns, "OUTPUT", &to_web3),
        0,
        "a diagnosis without --confirm sent a packet"
    );

    // With --confirm on the live cluster: the model and the kernel agree.
    let mut args = live.clone();
    args.push("--confirm");
    let (confirmed, output) = report(&args);
    assert_eq!(output.status.code(), Some(0), "{confirmed:#}");
    let confirmation = &confirmed["confirmation"];
    eprintln!("{confirmation:#}");
    assert_eq!(confirmation["kernel"], "connected", "{confirmation:#}");
    assert_eq!(confirmation["model"], "delivered", "{confirmation:#}");
    assert_eq!(confirmation["agree"], true, "{confirmation:#}");
    assert_eq!(confirmation["from"], "default/web-0", "{confirmation:#}");
    let sent = counted(&web0.ns, "OUTPUT", &to_web3);
    assert!(
        (1..=2).contains(&sent),
        "the probe sent {sent} SYNs (a connect, and at most one retransmission)"
    );
    // The destination accepted the connection, and its counters say so.
    let accepted = moved(confirmation, "default/web-3", "nstat", "TcpPassiveOpens");
    assert!(accepted.is_some(), "{confirmation:#}");

    // On the saved snapshot, without an API server.
    let confirm_saved = [
        "--snapshot",
        saved_dir,
        "--node-exec",
        &template,
        "--confirm",
    ];

    // UDP: the datagram leaves without an error either way; the
    // destination's counters say whether it reached a socket.
    for (port, delivered, counted) in [
        ("9000", true, "UdpInDatagrams"),
        ("9001", false, "UdpNoPorts"),
    ] {
        let to = format!("default/web-3:{port}");
        let mut args = confirm_saved.to_vec();
        args.extend(["--from", "default/web-0", "--to", &to, "--protocol", "udp"]);
        let (udp, _) = report(&args);
        let confirmation = &udp["confirmation"];
        assert_eq!(confirmation["kernel"], "sent", "{confirmation:#}");
        assert_eq!(
            confirmation["kernel_delivers"], delivered,
            "{confirmation:#}"
        );
        assert_eq!(confirmation["agree"], true, "{confirmation:#}");
        let at_web3 = moved(confirmation, "default/web-3", "nstat", counted);
        assert!(
            at_web3.is_some(),
            "{port}: no {counted} at web-3: {confirmation:#}"
        );
    }

    // A fault the snapshot cannot see: node-2 drops the flow from now on.
    let node2 = &cluster.nodes[1];
    let drop = format!("FORWARD -d {} -p tcp --dport 8080 -j DROP", web3.ip());
    let words: Vec<&str> = drop.split_whitespace().collect();
    node2
        .ns
        .run(&[&["iptables", "-I"], words.as_slice()].concat());
    let traced = ["--drop-reasons"];
    let (stale, output) = report(&[&confirm_saved[..], &flow[..], &traced[..]].concat());
    // The model still says delivered (exit 0): the snapshot is older.
    assert_eq!(stale["disposition"], "delivered", "{stale:#}");
    assert_eq!(output.status.code(), Some(0), "{stale:#}");
    let confirmation = &stale["confirmation"];
    assert_eq!(confirmation["kernel"], "timed_out", "{confirmation:#}");
    assert_eq!(confirmation["agree"], false, "{confirmation:#}");
    assert_eq!(confirmation["stopped_at"], "node-2", "{confirmation:#}");
    let rule = moved(
        confirmation,
        "node-2",
        "iptables",
        &format!("-A FORWARD {to_web3} -j DROP"),
    )
    .unwrap_or_else(|| panic!("no drop counted at node-2: {confirmation:#}"));
    assert_eq!(rule["drop"], true, "{rule:#}");
    assert!(
        rule.get("file").is_none(),
        "the rule is not in the snapshot: {rule:#}"
    );
    assert!(rule["packets"].as_u64().is_some_and(|n| n >= 1), "{rule:#}");
    // The kernel's own word (--drop-reasons): node-2's kernel (the lab's
    // nodes share one) dropped the SYNs in netfilter.
    let netfilter_drop = (confirmation["drops"].as_array().into_iter().flatten()).find(|drop| {
        drop["reason"] == "NETFILTER_DROP"
            && drop["packets"].as_u64().is_some_and(|n| n >= 1)
            && (drop["nodes"].as_array().into_iter().flatten()).any(|node| node == "node-2")
    });
    assert!(
        netfilter_drop.is_some(),
        "no NETFILTER_DROP traced: {confirmation:#}"
    );

    // The text report says it too, and suggests collecting again.
    let mut args = vec![
        "diagnose",
        "--snapshot",
        saved_dir,
        "--node-exec",
        &template,
    ];
    args.extend(["--confirm", "--drop-reasons"]);
    args.extend(flow);
    let text = skoop(&args);
    let text = String::from_utf8_lossy(&text.stdout);
    eprintln!("{text}");
    assert!(
        text.contains("drops the kernels traced during the probe"),
        "{text}"
    );
    assert!(text.contains(": NETFILTER_DROP ("), "{text}");
    assert!(text.contains("the model and the kernel DISAGREE"), "{text}");
    assert!(text.contains("(not in the snapshot) counted"), "{text}");
    assert!(text.contains("stopping at node-2"), "{text}");
    assert!(text.contains("collect again"), "{text}");

    // `skoop matrix --confirm all`: web-0 to every pod, each flow sent; only
    // the flow to web-3 meets the new rule.
    let mut args = vec!["matrix", "--snapshot", saved_dir, "--node-exec", &template];
    args.extend([
        "--from",
        "default/web-0",
        "--to-pods",
        "default",
        "--port",
        "8080",
    ]);
    args.extend(["--confirm", "all", "-o", "json"]);
    let output = skoop(&args);
    let matrix: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let answers: Vec<(String, Value, Value)> = matrix["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .map(|flow| {
            let confirmation = &flow["confirmation"];
            (
                flow["to"].as_str().unwrap_or_default().to_string(),
                confirmation["agree"].clone(),
                confirmation["stopped_at"].clone(),
            )
        })
        .collect();
    let expected: Vec<(String, Value, Value)> = (0..4)
        .map(|i| {
            let to = format!("default/web-{i}:8080");
            match i {
                3 => (to, Value::Bool(false), Value::from("node-2")),
                _ => (to, Value::Bool(true), Value::Null),
            }
        })
        .collect();
    assert_eq!(answers, expected, "{matrix:#}");
    // A sample: two flows of the four, spread over the matrix.
    args.splice(args.len() - 4..args.len() - 2, ["--confirm", "2"]);
    let output = skoop(&args);
    let matrix: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let sent = matrix["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .filter(|flow| flow.get("confirmation").is_some())
        .count();
    assert_eq!(sent, 2, "{matrix:#}");
    // Four flows at once, but at most 2 started a second: the fourth
    // starts 1.5 s after the first, however fast the probes are.
    args.splice(args.len() - 4..args.len() - 2, ["--confirm", "all"]);
    args.extend(["--confirm-jobs", "4", "--confirm-rate", "2"]);
    let started = std::time::Instant::now();
    let output = skoop(&args);
    let paced = started.elapsed();
    let matrix: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let agreed = matrix["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .filter(|flow| flow["confirmation"]["agree"].is_boolean())
        .count();
    assert_eq!(agreed, 4, "{matrix:#}");
    assert!(
        paced >= std::time::Duration::from_millis(1500),
        "4 flows at 2 a second took {paced:?}"
    );
}

/// The counter of `kind` (`iptables`, `nstat`, …) and `what` (a rule, a
/// counter's name) that moved at `hop`, as a confirmation lists it.
fn moved<'c>(confirmation: &'c Value, hop: &str, kind: &str, what: &str) -> Option<&'c Value> {
    (confirmation["counters"].as_array().into_iter().flatten())
        .find(|c| c["hop"] == hop && c["kind"] == kind && c["what"] == what)
}

/// `skoop ARGS... -o json` (a `diagnose --confirm`) says that the model and
/// the kernel agree; that the kernel delivered the flow exactly when
/// `kernel` says (where given); and, where the model stops the flow at a
/// netfilter rule, that the rule counted the probe's packets.
pub fn assert_agrees(args: &[String], kernel: Option<bool>, stops_at_a_rule: bool, case: &str) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (report, _) = report(args.strip_prefix(&["diagnose"][..]).unwrap_or(&args));
    let confirmation = &report["confirmation"];
    eprintln!(
        "{case}: --confirm: kernel {}, model {}, agree {}",
        confirmation["kernel"], confirmation["model"], confirmation["agree"]
    );
    assert_eq!(
        confirmation["agree"], true,
        "{case}: --confirm disagrees: {confirmation:#}"
    );
    if let Some(kernel) = kernel {
        assert_eq!(
            confirmation["kernel_delivers"], kernel,
            "{case}: the probe's answer is not the lab's: {confirmation:#}"
        );
    }
    if stops_at_a_rule {
        let counted = confirmation["counters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["stopping"] == true && c["packets"].as_u64().is_some_and(|n| n >= 1));
        assert!(
            counted,
            "{case}: the rule the model stops at counted no packet: {confirmation:#}"
        );
    }
}
