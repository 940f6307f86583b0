//! Issue 29, "the question" on a dual-stack cluster (`examples/flannel-dualstack`,
//! collected from the real-components lab's dual-stack Flannel host-gw topology): a
//! destination named by name is diagnosed in both families, each with its
//! verdict; `--family` narrows it to one; a fault of one family fails that
//! family's verdict alone and names the fault; a question that mixes
//! families is refused; a matrix asks each pair in each family, and `diff`
//! tells the families apart.

mod common;

use serde_json::Value;

const EXAMPLE: &str = "examples/flannel-dualstack";

fn diagnose(args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["diagnose"];
    all.extend(args);
    common::skoop(&all)
}

/// `diagnose`'s arguments for the flow every test asks: web-0 (node-1) to
/// web-3:8080 (node-2), on the snapshot `dir`.
fn web_0_to_web_3(dir: &str) -> [&str; 6] {
    [
        "-s",
        dir,
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
    ]
}

/// The lines of a text report that give a family's verdict: `IPv4:` or
/// `IPv6:`, then the question and its verdict.
fn verdicts(out: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = out.lines().collect();
    lines
        .windows(2)
        .filter(|pair| pair[0] == "IPv4:" || pair[0] == "IPv6:")
        .map(|pair| (pair[0].to_string(), pair[1].to_string()))
        .collect()
}

#[test]
fn a_dual_stack_pod_named_by_name_gets_a_verdict_per_family() {
    let (code, out) = diagnose(&web_0_to_web_3(EXAMPLE));
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        verdicts(&out),
        [
            (
                "IPv4:".to_string(),
                "default/web-0 -> default/web-3:8080 (10.244.1.3:8080 tcp): delivered".to_string()
            ),
            (
                "IPv6:".to_string(),
                "default/web-0 -> default/web-3:8080 ([fd00:10:244:1::3]:8080 tcp): delivered"
                    .to_string()
            ),
        ],
        "{out}"
    );
}

#[test]
fn family_narrows_the_question_to_one_family() {
    let (code, out) = diagnose(&[
        "-s",
        EXAMPLE,
        "--from",
        "default/web-0",
        "--to",
        "svc/default/web",
        "--family",
        "ipv6",
    ]);
    assert_eq!(code, Some(0), "{out}");
    let first = out.lines().next().unwrap_or_default();
    assert_eq!(
        first, "default/web-0 -> svc/default/web ([fd00:10:96::100]:80 tcp): delivered",
        "{out}"
    );
    assert!(!out.contains("IPv4:"), "{out}");
    // Its four backends, each at its IPv6 address.
    assert_eq!(out.matches("]:8080): delivered").count(), 4, "{out}");
}

/// The example with an ip6tables rule on node-2 that drops every IPv6 pod
/// packet it forwards, and that rule's file.
fn with_ipv6_forward_dropped() -> (tempfile::TempDir, std::path::PathBuf) {
    let copy = common::copy_snapshot(EXAMPLE);
    let rules = copy.path().join("nodes/node-2/host/ip6tables-save.txt");
    common::edit_text(&rules, |text| {
        text.replacen(
            ":FORWARD ACCEPT [0:0]\n",
            ":FORWARD ACCEPT [0:0]\n-A FORWARD -s fd00:10:244::/56 -j DROP\n",
            1,
        )
    });
    (copy, rules)
}

#[test]
fn an_ipv6_fault_fails_the_ipv6_verdict_alone_and_names_the_rule() {
    let (copy, rules) = with_ipv6_forward_dropped();
    let dir = copy.path().to_str().unwrap();
    let args = web_0_to_web_3(dir);
    let (code, out) = diagnose(&args);
    assert_eq!(code, Some(1), "{out}");
    let verdicts = verdicts(&out);
    assert!(verdicts[0].1.ends_with(": delivered"), "{out}");
    assert!(
        verdicts[1].1.contains(": denied_by_netfilter"),
        "the IPv6 verdict: {out}"
    );
    let (_, json) = diagnose(&[&args[..], &["-o", "json"]].concat());
    let report: Value = serde_json::from_str(&json).expect("a JSON report");
    assert_eq!(report["request"]["family"], "IPv4");
    assert_eq!(report["disposition"], "delivered");
    let ipv6 = &report["other_families"][0];
    assert_eq!(ipv6["request"]["family"], "IPv6", "{report:#}");
    assert_eq!(ipv6["disposition"], "denied_by_netfilter");
    let cause = &ipv6["findings"][0];
    assert_eq!(cause["id"], "kernel.netfilter.denied", "{ipv6:#}");
    assert_eq!(cause["hop"], "node-2");
    let place = &cause["places"][0];
    assert!(
        place["file"]
            .as_str()
            .is_some_and(|file| file.ends_with("nodes/node-2/host/ip6tables-save.txt")),
        "{cause:#}"
    );
    let line = place["line"].as_u64().expect("the rule's line") as usize;
    let written = std::fs::read_to_string(&rules).unwrap();
    assert_eq!(
        written.lines().nth(line - 1),
        Some("-A FORWARD -s fd00:10:244::/56 -j DROP")
    );
}

#[test]
fn a_matrix_asks_each_pair_in_each_family_and_diff_tells_them_apart() {
    let (copy, _) = with_ipv6_forward_dropped();
    let broken = copy.path().to_str().unwrap();
    let selection = ["--from", "default/web-0", "--to-pods", "default"];
    let (code, csv) =
        common::skoop(&[&["matrix", "-s", broken, "-o", "csv"], &selection[..]].concat());
    assert_eq!(code, Some(1), "{csv}");
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|row| row.split(',').collect())
        .collect();
    // web-0 to each of the four pods, in IPv4 and in IPv6.
    let asked: Vec<(&str, &str)> = rows
        .iter()
        .map(|row| (row[1], row[row.len() - 1]))
        .collect();
    assert_eq!(asked.len(), 8, "{csv}");
    assert_eq!(asked[0], ("default/web-0:8080", "IPv4"), "{csv}");
    assert_eq!(asked[1], ("default/web-0:8080", "IPv6"), "{csv}");
    // Only IPv6 flows that cross node-2 are stopped there.
    for row in &rows {
        let (to, verdict, family) = (row[1], row[3], row[row.len() - 1]);
        let on_node_2 = to == "default/web-2:8080" || to == "default/web-3:8080";
        let expected = if family == "IPv6" && on_node_2 {
            "not_delivered"
        } else {
            "succeeds"
        };
        assert_eq!(verdict, expected, "{to} in {family}: {csv}");
    }

    let (code, text) = common::skoop(&[&["diff", EXAMPLE, broken], &selection[..]].concat());
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("2 flows changed, 6 unchanged, 0 only before, 0 only after"),
        "{text}"
    );
    assert!(
        text.contains(
            "broke default/web-0 -> default/web-3:8080 (tcp, IPv6): delivered -> denied_by_netfilter"
        ),
        "{text}"
    );
}

#[test]
fn a_picture_draws_the_failing_family_and_gives_the_others_verdict() {
    let (copy, _) = with_ipv6_forward_dropped();
    let broken = copy.path().to_str().unwrap();
    let args = web_0_to_web_3(broken);
    let (code, dot) = diagnose(&[&args[..], &["-o", "dot"]].concat());
    assert_eq!(code, Some(1), "{dot}");
    let label = dot.lines().nth(1).unwrap_or_default();
    assert!(
        label.contains(
            "label=\"IPv6: default/web-0 -> default/web-3:8080 ([fd00:10:244:1::3]:8080 tcp)"
        ),
        "{label}"
    );
    assert!(label.contains("verdict: ✖ denied_by_netfilter"), "{label}");
    assert!(
        label.contains("IPv4: ✔ delivered (not drawn: --family ipv4 draws it)"),
        "{label}"
    );
    let (_, svg) = diagnose(&[&args[..], &["-o", "svg"]].concat());
    assert!(svg.contains("<title>IPv6: default/web-0"), "{svg}");
    assert!(svg.contains("IPv4: ✔ delivered (not drawn"), "{svg}");
    // Asked in IPv4 alone, the picture is as it always was.
    let (code, dot) = diagnose(&[&args[..], &["-o", "dot", "--family", "ipv4"]].concat());
    assert_eq!(code, Some(0), "{dot}");
    assert!(
        dot.contains("label=\"default/web-0 -> default/web-3:8080 (10.244.1.3:8080 tcp)"),
        "{dot}"
    );
    assert!(!dot.contains("IPv6"), "{dot}");
}

/// A fault the CNI's IPv4 checks find (node-1's IPv4 route to node-2's pod
/// CIDR gone) fails the IPv4 verdict; for the IPv6 packet the finding is
/// off its path, and its verdict is as clean as before.
#[test]
fn an_ipv4_checks_finding_is_off_the_ipv6_path() {
    let copy = common::copy_snapshot(EXAMPLE);
    common::edit_json(
        &copy.path().join("nodes/node-1/host/ip-route.json"),
        |routes| {
            routes.retain(|route| route["dst"] != "10.244.1.0/24");
        },
    );
    let dir = copy.path().to_str().unwrap();
    let asked = |family: &str| {
        let (code, out) = diagnose(
            &[
                &web_0_to_web_3(dir)[..],
                &["--family", family, "-o", "json"],
            ]
            .concat(),
        );
        (code, serde_json::from_str::<Value>(&out).expect("JSON"))
    };
    let (code, ipv4) = asked("ipv4");
    assert_eq!(code, Some(1), "{ipv4:#}");
    assert!(
        common::finding_ids(&ipv4, "findings")
            .contains(&"flannel.route.remote-pod-cidr".to_owned()),
        "{ipv4:#}"
    );
    let (code, ipv6) = asked("ipv6");
    assert_eq!(code, Some(0), "{ipv6:#}");
    assert_eq!(ipv6["disposition"], "delivered", "{ipv6:#}");
    assert!(
        common::finding_ids(&ipv6, "findings").is_empty(),
        "{ipv6:#}"
    );
    assert!(
        common::finding_ids(&ipv6, "off_path")
            .contains(&"flannel.route.remote-pod-cidr".to_owned()),
        "{ipv6:#}"
    );
}

/// Two addresses of different families, and an IPv6 address beside a pod
/// of IPv4 alone (examples/flannel-host-gw), are refused.
#[test]
fn a_question_that_mixes_families_is_refused() {
    for (snapshot, to) in [
        (EXAMPLE, "10.244.1.3:8080"),
        ("examples/flannel-host-gw", "default/web-3:8080"),
    ] {
        let args = ["-s", snapshot, "--from", "fd00:10:244::2", "--to", to];
        let (code, out) = diagnose(&[&args[..], &["-o", "json"]].concat());
        assert_eq!(code, Some(2), "{to}: {out}");
        assert!(out.contains("of the same family"), "{to}: {out}");
    }
}

/// An address of one family beside a dual-stack pod named by name is a
/// question in the address's family: the pod's IPv6 address, not a refusal
/// because its first address is IPv4.
#[test]
fn an_address_beside_a_dual_stack_pod_narrows_the_question_to_its_family() {
    let (code, out) = diagnose(&[
        "-s",
        EXAMPLE,
        "--from",
        "fd00:10:244::2",
        "--to",
        "default/web-3:8080",
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(
            "fd00:10:244::2 -> default/web-3:8080 ([fd00:10:244:1::3]:8080 tcp): delivered"
        ),
        "{out}"
    );
    assert!(!out.contains("10.244.1.3"), "{out}");
}

#[test]
fn a_family_the_destination_lacks_is_said() {
    let (code, out) = diagnose(
        &[
            &web_0_to_web_3("examples/flannel-host-gw")[..],
            &["--family", "ipv6", "-o", "json"],
        ]
        .concat(),
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("pod default/web-3 has no IPv6 address (its addresses: 10.244.2.3)"),
        "{out}"
    );
}

/// Issue 36: a socket sends to `::` as to `::1` (Linux's TCP, UDP and ping
/// sockets, measured in a namespace), so the pod's own listener answers;
/// it left the cluster by the default route before.
#[test]
fn a_connection_to_the_unspecified_ipv6_address_reaches_the_senders_own_listener() {
    let (code, out) = diagnose(&[
        "-s",
        EXAMPLE,
        "--from",
        "default/web-0",
        "--to",
        "[::]:8080",
        "-o",
        "json",
    ]);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["disposition"], "delivered");
    assert_eq!(report["paths"][0]["backend"]["address"], "::1");
    let hops = report["hops"].as_array().unwrap();
    assert!(
        hops.iter().all(|hop| hop["id"] == "default/web-0"),
        "{hops:?}"
    );
}
