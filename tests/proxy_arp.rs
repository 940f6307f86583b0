//! Proxy ARP on a plain veth, on copies of the Calico BGP example: a pod's
//! gateway 169.254.1.1 is nobody's address, and the node's `cali` veth
//! answers for it by proxy (the kernel's `arp_process`). Each test edits one
//! thing the kernel's answer depends on.

use skoop::engine::HopId;
use std::fs;
use std::path::Path;
use std::sync::Arc;

mod common;

use sha1::{Digest, Sha1};
use skoop::engine::{self, Disposition, Endpoint, Protocol, Request, Severity, Step};
use skoop::packs::LoadedPacks;
use skoop::snapshot::Snapshot;

/// The node-side veth of `default/web-0`, as the Calico CNI plugin names it.
fn web_0_veth() -> String {
    let hex: String = Sha1::digest(b"default.web-0")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("cali{}", &hex[..11])
}

/// The example, with `edit` applied to node-1's dump directory.
fn edited(edit: impl FnOnce(&Path)) -> (tempfile::TempDir, Arc<Snapshot>) {
    let dir = common::copy_snapshot("examples/calico-bgp");
    edit(&dir.path().join("nodes/node-1/host"));
    let (snapshot, problems) = Snapshot::load(dir.path()).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    (dir, Arc::new(snapshot))
}

/// Sets `key` in a dump's sysctl.txt, which must have it.
fn set_sysctl(host: &Path, key: &str, value: &str) {
    let path = host.join("sysctl.txt");
    let text = fs::read_to_string(&path).unwrap();
    let prefix = format!("{key} = ");
    assert!(
        text.lines().any(|l| l.starts_with(&prefix)),
        "{key} in {text}"
    );
    let edited: String = text
        .lines()
        .map(|l| match l.starts_with(&prefix) {
            true => format!("{prefix}{value}\n"),
            false => format!("{l}\n"),
        })
        .collect();
    fs::write(path, edited).unwrap();
}

fn web_0_to_web_3(snapshot: &Arc<Snapshot>) -> engine::Diagnosis {
    let request = Request {
        from: "default/web-0".parse::<Endpoint>().unwrap(),
        to: "default/web-3".parse::<Endpoint>().unwrap(),
        port: Some(8080),
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: None,
    };
    let (packs, _) = LoadedPacks::load(Vec::new(), &[]);
    engine::diagnose(snapshot, &request, &packs).unwrap()
}

/// The fatal finding's message, which must be about web-0, where the packet stops.
fn unanswered(diagnosis: &engine::Diagnosis) -> String {
    assert_eq!(diagnosis.disposition(), Disposition::NeighborFailed);
    let finding = diagnosis
        .findings
        .iter()
        .find(|f| f.severity == Severity::Fatal)
        .expect("a fatal finding");
    assert_eq!(
        finding.id,
        skoop::engine::codes::KERNEL_NEIGHBOUR_UNANSWERED
    );
    assert_eq!(finding.about.hop, HopId::pod("default", "web-0"));
    finding.message.clone()
}

#[test]
fn the_cali_veth_answers_for_the_pods_link_local_gateway_by_proxy() {
    let (_dir, snapshot) = edited(|_| {});
    let diagnosis = web_0_to_web_3(&snapshot);
    assert_eq!(diagnosis.disposition(), Disposition::Delivered);
    let proxied = diagnosis.graph.node_weights().any(|hop| {
        hop.steps.iter().any(|step| {
            matches!(&step.step, Step::Neighbour { address, result, .. }
                if address.to_string() == "169.254.1.1"
                    && result == &format!("answered by proxy ARP on node-1's {}", web_0_veth()))
        })
    });
    assert!(proxied, "{:#?}", diagnosis.graph);
}

#[test]
fn without_proxy_arp_on_the_host_veth_the_gateway_goes_unanswered() {
    let veth = web_0_veth();
    let (_dir, snapshot) =
        edited(|host| set_sysctl(host, &format!("net.ipv4.conf.{veth}.proxy_arp"), "0"));
    let message = unanswered(&web_0_to_web_3(&snapshot));
    assert!(
        message.contains(&format!("net.ipv4.conf.{veth}.proxy_arp are 0")),
        "{message}"
    );
}

#[test]
fn proxy_arp_on_all_interfaces_is_ored_with_the_devices_own() {
    let veth = web_0_veth();
    let (_dir, snapshot) = edited(|host| {
        set_sysctl(host, &format!("net.ipv4.conf.{veth}.proxy_arp"), "0");
        set_sysctl(host, "net.ipv4.conf.all.proxy_arp", "1");
    });
    assert_eq!(
        web_0_to_web_3(&snapshot).disposition(),
        Disposition::Delivered
    );
}

#[test]
fn a_device_that_does_not_forward_answers_no_arp_by_proxy() {
    let veth = web_0_veth();
    let (_dir, snapshot) =
        edited(|host| set_sysctl(host, &format!("net.ipv4.conf.{veth}.forwarding"), "0"));
    let message = unanswered(&web_0_to_web_3(&snapshot));
    assert!(message.contains("does not forward packets"), "{message}");
}

#[test]
fn proxy_arp_needs_a_route_to_the_target_by_another_device() {
    // Without its default route node-1 has no route to 169.254.1.1.
    let (_dir, snapshot) = edited(|host| {
        let path = host.join("ip-route.json");
        let routes: Vec<serde_json::Value> =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        let kept: Vec<_> = routes
            .into_iter()
            .filter(|r| r["dst"] != "default")
            .collect();
        fs::write(path, serde_json::to_string(&kept).unwrap()).unwrap();
    });
    let message = unanswered(&web_0_to_web_3(&snapshot));
    assert!(
        message.contains("it has no route to 169.254.1.1"),
        "{message}"
    );
}

#[test]
fn proxy_arp_is_unknown_without_the_nodes_sysctls() {
    let (_dir, snapshot) = edited(|host| fs::remove_file(host.join("sysctl.txt")).unwrap());
    let diagnosis = web_0_to_web_3(&snapshot);
    assert_eq!(diagnosis.disposition(), Disposition::InsufficientInfo);
}
