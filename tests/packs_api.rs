//! The Rust API the path walker will call: hooks, hop-scoped checks, and
//! snapshot evaluation with hostile scripts, checked with hand-built scopes.

use std::path::Path;
use std::sync::Arc;

use rhai::Dynamic;
use skoop::net::Protocol;
use skoop::packs::{
    FindingStatus, HopScope, LoadedPacks, PackSource, Packet, ScriptErrorKind, builtin_sources,
};
use skoop::snapshot::{NetnsId, Snapshot};

fn example() -> Arc<Snapshot> {
    let (snapshot, problems) =
        Snapshot::load(Path::new("examples/flannel-vxlan")).expect("a snapshot");
    assert!(problems.is_empty(), "{problems:?}");
    Arc::new(snapshot)
}

fn pack(dir: &str) -> LoadedPacks {
    let source = PackSource::read(Path::new(dir)).expect("readable");
    let (loaded, problems) = LoadedPacks::load(vec![source], &[]);
    assert!(problems.is_empty(), "{problems:?}");
    loaded
}

fn hop(snapshot: &Arc<Snapshot>, dst: &str, forwarding: bool, delivers: bool) -> Arc<HopScope> {
    let packet = Packet {
        src: "10.244.1.2".parse().expect("ip"),
        dst: dst.parse().expect("ip"),
        protocol: Protocol::Tcp,
        sport: Some(40000),
        dport: Some(8080),
        mark: 0,
        length: 1400,
    };
    let node_1 = NetnsId::Host {
        node: "node-1".into(),
    };
    Arc::new(HopScope {
        in_iface: Some("cni0".into()),
        out_iface: Some("flannel.1".into()),
        out_packet: Some(packet.clone()),
        forwarding,
        delivers_locally: delivers,
        ..HopScope::new(snapshot.clone(), node_1, packet)
    })
}

#[test]
fn next_hop_hook_answers_with_the_packs_parameters() {
    let loaded = pack("tests/fixtures/packs/hooks");
    let snapshot = example();
    let h = hop(&snapshot, "10.244.2.3", true, false);
    let packet = Dynamic::from(h.packet.clone());
    let answer = loaded
        .call_hook("hooks", "next_hop", &h, packet)
        .expect("the hook runs");
    let answer = answer.try_cast::<rhai::Map>().expect("a map");
    assert_eq!(answer["dev"].to_string(), "flannel.1");
    let via = answer["via"].clone().try_cast::<std::net::IpAddr>();
    assert_eq!(via, "10.244.2.0".parse().ok());
    let local = hop(&snapshot, "10.244.1.3", true, false);
    let none = loaded
        .call_hook(
            "hooks",
            "next_hop",
            &local,
            Dynamic::from(local.packet.clone()),
        )
        .expect("runs");
    assert!(none.is_unit(), "no opinion for a local pod");
}

#[test]
fn masquerade_hook_decides_by_destination() {
    let loaded = pack("tests/fixtures/packs/hooks");
    let snapshot = example();
    let outside = hop(&snapshot, "8.8.8.8", true, false);
    let decision = loaded
        .call_hook(
            "hooks",
            "masquerade",
            &outside,
            Dynamic::from(outside.packet.clone()),
        )
        .expect("runs");
    assert_eq!(decision.as_bool(), Ok(true));
}

#[test]
fn hook_in_an_endless_loop_is_a_finding_and_the_engine_stays_usable() {
    let loaded = pack("tests/fixtures/packs/hooks");
    let snapshot = example();
    let h = hop(&snapshot, "10.244.2.3", true, false);
    let finding = loaded
        .call_hook(
            "hooks",
            "encapsulation",
            &h,
            Dynamic::from(h.packet.clone()),
        )
        .expect_err("stopped");
    assert_eq!(finding.status, FindingStatus::ScriptError);
    assert_eq!(
        finding.about.error_kind,
        Some(ScriptErrorKind::TooManyOperations)
    );
    assert_eq!(finding.id.as_str(), "hooks.hook.encapsulation");
    assert!(
        finding.evidence[0].to_string().ends_with("hooks.rhai:11:1"),
        "{:?}",
        finding.evidence
    );
    // The same engine answers the next call.
    assert!(
        loaded
            .call_hook("hooks", "masquerade", &h, Dynamic::from(h.packet.clone()))
            .is_ok()
    );
}

#[test]
fn hostile_scripts_are_each_stopped_with_their_kind() {
    let loaded = pack("tests/fixtures/packs/hostile");
    let findings = loaded.evaluate_snapshot(&example());
    let kind = |id: &str| {
        let found: Vec<_> = findings.iter().filter(|f| f.id.as_str() == id).collect();
        assert_eq!(found.len(), 2, "one per node: {found:?}");
        assert!(found.iter().all(|f| f.status == FindingStatus::ScriptError));
        found[0].about.error_kind
    };
    assert_eq!(
        kind("hostile.loop"),
        Some(ScriptErrorKind::TooManyOperations)
    );
    assert_eq!(
        kind("hostile.recursion"),
        Some(ScriptErrorKind::CallTooDeep)
    );
    assert_eq!(kind("hostile.string"), Some(ScriptErrorKind::DataTooLarge));
    assert_eq!(kind("hostile.array"), Some(ScriptErrorKind::DataTooLarge));
}

fn core() -> LoadedPacks {
    let (loaded, problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    loaded
}

#[test]
fn example_snapshot_has_no_core_findings() {
    let findings = core().evaluate_snapshot(&example());
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn ip_forward_off_finding_cites_the_sysctl_line() {
    let (snapshot, _) =
        Snapshot::load(Path::new("rules/core/tests/ip-forward-off/snapshot")).expect("snapshot");
    let findings = core().evaluate_snapshot(&Arc::new(snapshot));
    let finding = findings
        .iter()
        .find(|f| f.id.as_str() == "core.node.ip-forward")
        .expect("reported");
    assert_eq!(finding.status, FindingStatus::Failed);
    assert_eq!(finding.about.subject.to_string(), "node/node-1");
    assert_eq!(
        finding.message,
        "node/node-1: net.ipv4.ip_forward = 0, so it drops every packet it should route for its pods"
    );
    assert_eq!(finding.expected.as_deref(), Some("net.ipv4.ip_forward = 1"));
    let evidence = finding.evidence[0].to_string();
    let text = std::fs::read_to_string(
        "rules/core/tests/ip-forward-off/snapshot/nodes/node-1/host/sysctl.txt",
    )
    .expect("fixture");
    let line = text
        .lines()
        .position(|l| l.starts_with("net.ipv4.ip_forward = "))
        .expect("present")
        + 1;
    assert!(
        evidence.ends_with(&format!("sysctl.txt:{line}:1")),
        "{evidence}"
    );
}

#[test]
fn hop_checks_follow_the_hop() {
    let packs = core();
    let snapshot = example();
    // Forwarding on node-1 and a listener on 8080 on its host: nothing to say.
    assert!(
        packs
            .evaluate_hop(&hop(&snapshot, "10.244.2.3", true, false))
            .is_empty()
    );
    // Delivered on node-1's host to TCP 8080: node-1 listens only on UDP 8472.
    let delivered = packs.evaluate_hop(&hop(&snapshot, "172.18.0.11", false, true));
    let ids: Vec<&str> = delivered.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["core.hop.listener"]);
    // A packet leaving too large for flannel.1 (MTU 1450), whatever size
    // it arrived with.
    let mut big = (*hop(&snapshot, "10.244.2.3", true, false)).clone();
    if let Some(leaving) = &mut big.out_packet {
        leaving.length = 1500;
    }
    let findings = packs.evaluate_hop(&Arc::new(big));
    let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["core.hop.mtu"]);
    assert!(
        findings[0]
            .message
            .contains("a 1500-byte packet leaves by flannel.1, whose MTU is 1450"),
        "{}",
        findings[0].message
    );
    let evidence = findings[0].evidence[0].to_string();
    assert!(
        evidence.ends_with("node-1/host/ip-link.json:1:2550"),
        "{evidence}"
    );
}

#[test]
fn strict_rp_filter_drops_a_packet_whose_route_back_leaves_elsewhere() {
    let packs = core();
    let (mut snapshot, _) = Snapshot::load(Path::new("examples/flannel-vxlan")).expect("snapshot");
    let node = NetnsId::Host {
        node: "node-1".into(),
    };
    let entry = snapshot.namespaces.get_mut(&node).expect("node-1 host");
    let text = "net.ipv4.ip_forward = 1\nnet.ipv4.conf.all.rp_filter = 1\nnet.ipv4.conf.flannel/1.rp_filter = 0\nnet.ipv4.conf.flannel/1.forwarding = 1\n";
    entry.dump_mut().sysctls = skoop::snapshot::netns::sysctl::parse(text).0;
    let snapshot = Arc::new(snapshot);
    // Arrives on flannel.1 from a pod of node-2: the route back is via flannel.1: fine.
    let mut fine = (*hop(&snapshot, "10.244.1.2", true, false)).clone();
    fine.in_iface = Some("flannel.1".into());
    fine.out_iface = Some("cni0".into());
    fine.packet.src = "10.244.2.3".parse().expect("ip");
    assert!(
        packs
            .evaluate_hop(&Arc::new(fine.clone()))
            .iter()
            .all(|f| f.id.as_str() != "core.hop.rp-filter")
    );
    // The same source arriving on eth0: strict rp_filter drops it.
    let mut spoofed = fine;
    spoofed.in_iface = Some("eth0".into());
    let findings = packs.evaluate_hop(&Arc::new(spoofed));
    let rp = findings
        .iter()
        .find(|f| f.id.as_str() == "core.hop.rp-filter")
        .expect("reported");
    assert!(
        rp.message
            .contains("leaves by flannel.1, the packet came in on eth0"),
        "{}",
        rp.message
    );
}
