//! kube-proxy's IPVS mode, on a snapshot made from the Flannel VXLAN example:
//! node-1's iptables service rules are removed, the ClusterIP is bound to
//! `kube-ipvs0` and served by an IPVS virtual service (as kube-proxy
//! `--proxy-mode=ipvs` leaves a node). This kernel has no ip_vs module, so
//! the snapshot is edited rather than collected.

mod common;

use skoop::engine::HopId;
use std::fs;
use std::sync::Arc;

use common::{copy_snapshot, edit_json};
use serde_json::json;
use skoop::engine::{self, Disposition, Protocol};
use skoop::snapshot::Snapshot;

/// The example with node-1 in IPVS mode, and `ipvsadm` as given.
fn ipvs_snapshot(ipvsadm: &str) -> (tempfile::TempDir, Arc<Snapshot>) {
    in_ipvs_mode("examples/flannel-vxlan", "10.96.0.100", ipvsadm)
}

/// `example` with node-1 in IPVS mode for the ClusterIP `cluster_ip`, as
/// kube-proxy `--proxy-mode=ipvs` leaves a node: the service's rule gone
/// from the iptables (or ip6tables) dump, the address bound to
/// `kube-ipvs0` with its local route, and `ipvsadm` as given.
fn in_ipvs_mode(
    example: &str,
    cluster_ip: &str,
    ipvsadm: &str,
) -> (tempfile::TempDir, Arc<Snapshot>) {
    let ipv6 = cluster_ip.contains(':');
    let (rules_file, prefix_len, family, routes_file) = match ipv6 {
        false => ("iptables-save.txt", 32, "inet", "ip-route.json"),
        true => ("ip6tables-save.txt", 128, "inet6", "ip-route6.json"),
    };
    let dir = copy_snapshot(example);
    let host = dir.path().join("nodes/node-1/host");
    let rules = fs::read_to_string(host.join(rules_file)).unwrap();
    let service_rule = format!("-A KUBE-SERVICES -d {cluster_ip}/{prefix_len}");
    let without_services: String = rules
        .lines()
        .filter(|l| !l.starts_with(&service_rule))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(
        rules, without_services,
        "the example has the service's rules"
    );
    fs::write(host.join(rules_file), without_services).unwrap();
    edit_json(&host.join("ip-link.json"), |links| {
        links.push(json!({"ifindex": 90, "ifname": "kube-ipvs0", "flags": ["BROADCAST", "NOARP"], "mtu": 1500,
            "operstate": "DOWN", "linkinfo": {"info_kind": "dummy"}}));
    });
    edit_json(&host.join("ip-addr.json"), |addrs| {
        addrs.push(json!({"ifindex": 90, "ifname": "kube-ipvs0", "addr_info": [
            {"family": family, "local": cluster_ip, "prefixlen": prefix_len, "scope": "global"}]}));
    });
    // As `ip -j route show table local` gives it in each family.
    let local_route = match ipv6 {
        false => json!({"type": "local", "dst": cluster_ip, "dev": "kube-ipvs0", "table": "local",
            "protocol": "kernel", "scope": "host", "prefsrc": cluster_ip, "flags": []}),
        true => json!({"type": "local", "dst": cluster_ip, "dev": "kube-ipvs0", "table": "local",
            "protocol": "kernel", "scope": "global", "metric": 0, "flags": []}),
    };
    edit_json(&host.join(routes_file), |routes| routes.push(local_route));
    fs::write(host.join("ipvsadm.txt"), ipvsadm).unwrap();
    let snapshot = common::load(dir.path());
    (dir, snapshot)
}

/// What node-1 did with the packet, step by step, as text.
fn node_1_steps(diagnosis: &engine::Diagnosis) -> String {
    let node1 = diagnosis
        .graph
        .node_weights()
        .find(|h| h.id == HopId::node("node-1"))
        .unwrap();
    format!("{:?}", node1.steps)
}

fn to_service(snapshot: &Arc<Snapshot>) -> engine::Diagnosis {
    common::diagnose(
        snapshot,
        "default/web-1",
        "svc/default/web",
        Protocol::Tcp,
        None,
    )
}

#[test]
fn ipvs_virtual_service_sends_each_connection_to_a_real_server_and_the_reply_back() {
    let (_dir, snapshot) = ipvs_snapshot(
        "-A -t 10.96.0.100:80 -s rr\n\
         -a -t 10.96.0.100:80 -r 10.244.1.2:8080 -m -w 1\n\
         -a -t 10.96.0.100:80 -r 10.244.2.2:8080 -m -w 1\n\
         -a -t 10.96.0.100:80 -r 10.244.2.3:8080 -m -w 1\n",
    );
    let diagnosis = to_service(&snapshot);
    assert_eq!(diagnosis.paths.len(), 3, "one path per real server");
    assert_eq!(
        diagnosis.disposition(),
        Disposition::Delivered,
        "{:#?}",
        diagnosis.findings
    );
    let text = node_1_steps(&diagnosis);
    assert!(text.contains("ipvs dnat 10.96.0.100:80 -> "), "{text}");
}

#[test]
fn ipvs_virtual_service_without_real_servers_refuses_the_connection() {
    let (_dir, snapshot) = ipvs_snapshot("-A -t 10.96.0.100:80 -s rr\n");
    let diagnosis = to_service(&snapshot);
    assert_eq!(diagnosis.disposition(), Disposition::NoListener);
    let finding = &diagnosis.findings[0];
    assert_eq!(
        (finding.id.as_str(), finding.about.hop.to_string().as_str()),
        ("kernel.ipvs.no-real-server", "node-1")
    );
    assert!(
        skoop::diagnostic::evidence_text(&finding.evidence).ends_with("ipvsadm.txt:1"),
        "{:?}",
        finding.evidence
    );
}

/// Issue 29: IPVS in IPv6. `examples/flannel-dualstack` with node-1 in IPVS
/// mode for the IPv6 ClusterIP (its ip6tables service rule removed, the
/// address on `kube-ipvs0`, an IPv6 virtual service with the pods' IPv6
/// addresses as real servers, written `[ADDR]:PORT` as ipvsadm writes them).
#[test]
fn an_ipv6_virtual_service_sends_each_connection_to_an_ipv6_real_server() {
    let (dir, snapshot) = in_ipvs_mode(
        "examples/flannel-dualstack",
        "fd00:10:96::100",
        "-A -t [fd00:10:96::100]:80 -s rr\n\
         -a -t [fd00:10:96::100]:80 -r [fd00:10:244:1::2]:8080 -m -w 1\n\
         -a -t [fd00:10:96::100]:80 -r [fd00:10:244:1::3]:8080 -m -w 1\n",
    );
    let request = engine::Request {
        from: "default/web-0".parse().unwrap(),
        to: "svc/default/web".parse().unwrap(),
        port: None,
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: Some(skoop::net::Family::Ipv6),
    };
    let (packs, problems) = skoop::packs::LoadedPacks::load(skoop::packs::builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    let diagnosis = engine::diagnose(&snapshot, &request, &packs).unwrap();
    assert_eq!(diagnosis.paths.len(), 2, "one path per real server");
    assert_eq!(
        diagnosis.disposition(),
        Disposition::Delivered,
        "{:#?}",
        diagnosis.findings
    );
    let text = node_1_steps(&diagnosis);
    assert!(
        text.contains("ipvs dnat [fd00:10:96::100]:80 -> [fd00:10:244:1::"),
        "{text}"
    );

    // Without real servers the IPv6 connection is refused at node-1, while
    // IPv4 (iptables, untouched) still reaches the service.
    let ipvsadm = dir.path().join("nodes/node-1/host/ipvsadm.txt");
    fs::write(ipvsadm, "-A -t [fd00:10:96::100]:80 -s rr\n").unwrap();
    let snapshot = common::load(dir.path());
    let diagnosis = engine::diagnose(&snapshot, &request, &packs).unwrap();
    assert_eq!(diagnosis.disposition(), Disposition::NoListener);
    assert_eq!(
        diagnosis.findings[0].id.as_str(),
        "kernel.ipvs.no-real-server"
    );
    let ipv4 = engine::Request {
        family: Some(skoop::net::Family::Ipv4),
        ..request
    };
    let diagnosis = engine::diagnose(&snapshot, &ipv4, &packs).unwrap();
    assert_eq!(diagnosis.disposition(), Disposition::Delivered);
}
