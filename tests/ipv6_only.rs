//! Issue 29, an IPv6-only cluster (`examples/flannel-ipv6`, collected from the
//! real-components lab with `IpFamilies::Ipv6Only`: IPv6 cluster and Service
//! CIDRs, InternalIPs and pods; flanneld with `EnableIPv4: false`): a name
//! stands for its IPv6 address alone, so a question gets one verdict and no
//! family heading; IPv4 is refused with the reason; and the nodes' IPv4
//! settings, which nothing there uses (`net.ipv4.ip_forward = 0`, no
//! `flannel.1`, no IPv4 masquerade), are no finding.

mod common;

use serde_json::Value;

const EXAMPLE: &str = "examples/flannel-ipv6";

fn diagnose(args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["diagnose", "-s", EXAMPLE];
    all.extend(args);
    common::skoop(&all)
}

#[test]
fn a_pod_named_by_name_gets_one_ipv6_verdict() {
    let (code, out) = diagnose(&["--from", "default/web-0", "--to", "default/web-3:8080"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out.lines().next(),
        Some("default/web-0 -> default/web-3:8080 ([fd00:10:244:1::3]:8080 tcp): delivered"),
        "{out}"
    );
    assert!(
        !out.lines().any(|line| line == "IPv4:" || line == "IPv6:"),
        "one family, no family headings: {out}"
    );
}

#[test]
fn the_service_is_its_ipv6_cluster_ip_with_every_backend() {
    let (code, out) = diagnose(&["--from", "default/web-0", "--to", "svc/default/web"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out.lines().next(),
        Some("default/web-0 -> svc/default/web ([fd00:10:96::100]:80 tcp): delivered"),
        "{out}"
    );
    let delivered = out
        .lines()
        .filter(|line| line.starts_with("path ") && line.ends_with("): delivered"))
        .count();
    assert_eq!(delivered, 4, "a path to each of the four pods: {out}");
}

#[test]
fn ipv4_is_refused_with_the_reason() {
    let (code, out) = diagnose(&[
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
        "--family",
        "ipv4",
        "-o",
        "json",
    ]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("pod default/web-3 has no IPv4 address (its addresses: fd00:10:244:1::3)"),
        "{out}"
    );
    let (code, out) = diagnose(&[
        "--from",
        "default/web-0",
        "--to",
        "10.244.1.3:8080",
        "-o",
        "json",
    ]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("of the same family"), "{out}");
}

/// The nodes forward IPv4 off and have no `flannel.1`, no IPv4 masquerade
/// and no IPv4 annotations: in a cluster without IPv4 none of that is a
/// fault, on the path or off it. What is said is the IPv6 tunnel's MTU.
#[test]
fn ipv4_settings_nothing_uses_are_no_finding() {
    let (code, out) = diagnose(&[
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
        "-o",
        "json",
    ]);
    assert_eq!(code, Some(0), "{out}");
    let report: Value = serde_json::from_str(&out).expect("JSON");
    let ids: Vec<&str> = ["findings", "off_path"]
        .iter()
        .flat_map(|key| report[key].as_array().expect("a list"))
        .filter_map(|finding| finding["id"].as_str())
        .collect();
    assert!(!ids.is_empty(), "the IPv6 tunnel's MTU is warned of: {out}");
    for id in &ids {
        assert!(
            ["kernel.mtu.path", "flannel.vxlan.mtu-ipv6"].contains(id),
            "{id} said of an IPv6-only cluster: {ids:?}"
        );
    }
}
