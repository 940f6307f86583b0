//! MTU along the path, on edited copies of the Flannel VXLAN example: what
//! `--size` stops and where, and what a walk without it warns about. Each
//! behaviour was measured in the lab first (docs/diagnose.md, "Packet size
//! and MTU"); `tests/lab/diagnose.rs` checks the same against the kernel.

mod common;

use common::{copy_snapshot, diagnose, edit_json, load, only, set_mtu, web_0_to_web_3, with_id};
use skoop::engine::HopId;
use skoop::engine::{Disposition, PacketSize, Protocol, Severity};

const NODE_1: &str = "nodes/node-1/host";
const WEB_0: &str = "nodes/node-1/pods/default/web-0";
/// web-0's veth on node-1.
const WEB_0_VETH: &str = "veth53842afe";

/// The diagnosis's one finding `id`, which must be at `hop` with `severity`.
fn the_one<'d>(
    diagnosis: &'d skoop::engine::Diagnosis,
    id: &str,
    hop: &str,
    severity: Severity,
) -> &'d skoop::engine::Finding {
    let finding = only(diagnosis, id);
    assert_eq!(
        (finding.about.hop.to_string().as_str(), finding.severity),
        (hop, severity)
    );
    finding
}

fn ping(dir: &std::path::Path, from: &str, size: Option<PacketSize>) -> skoop::engine::Diagnosis {
    diagnose(&load(dir), from, "default/web-3", Protocol::Icmp, size)
}

#[test]
fn a_packet_of_the_pods_mtu_is_delivered_and_one_byte_more_is_refused_at_the_pod() {
    let dir = copy_snapshot("examples/flannel-vxlan");
    let fits = ping(dir.path(), "default/web-0", Some(PacketSize::Bytes(1450)));
    assert_eq!(
        fits.disposition(),
        Disposition::Delivered,
        "{:#?}",
        fits.findings
    );
    let too_large = ping(dir.path(), "default/web-0", Some(PacketSize::Bytes(1451)));
    assert_eq!(too_large.disposition(), Disposition::MtuExceeded);
    let finding = the_one(
        &too_large,
        "kernel.mtu.exceeded",
        "default/web-0",
        Severity::Fatal,
    );
    assert!(
        finding
            .message
            .contains("1451-byte packet by eth0, whose MTU is 1450")
            && finding.message.contains("EMSGSIZE"),
        "{}",
        finding.message
    );
    assert!(
        skoop::diagnostic::evidence_text(&finding.evidence)
            .ends_with("web-0/ip-link.json: eth0 mtu 1450")
    );
}

/// Pods at 1500 over flannel.1 at 1450: the classic Flannel misconfiguration.
fn pods_at_1500() -> tempfile::TempDir {
    let dir = copy_snapshot("examples/flannel-vxlan");
    set_mtu(dir.path(), WEB_0, "eth0", 1500);
    set_mtu(dir.path(), NODE_1, WEB_0_VETH, 1500);
    set_mtu(dir.path(), NODE_1, "cni0", 1500);
    dir
}

#[test]
fn size_mtu_is_the_source_interfaces_mtu_and_a_smaller_hop_answers_frag_needed() {
    let dir = pods_at_1500();
    let diagnosis = ping(dir.path(), "default/web-0", Some(PacketSize::InterfaceMtu));
    assert_eq!(diagnosis.disposition(), Disposition::MtuExceeded);
    let finding = only(&diagnosis, "kernel.mtu.exceeded");
    assert_eq!(finding.about.hop, HopId::node("node-1"));
    assert!(
        finding
            .message
            .contains("1500-byte packet by flannel.1, whose MTU is 1450")
            && finding
                .message
                .contains("ICMP fragmentation-needed (MTU 1450) goes back to 10.244.1.2"),
        "{}",
        finding.message
    );
}

#[test]
fn without_size_a_path_smaller_than_the_source_interface_is_a_warning() {
    let dir = pods_at_1500();
    let diagnosis = web_0_to_web_3(dir.path());
    assert_eq!(diagnosis.disposition(), Disposition::Delivered);
    assert!(
        diagnosis
            .findings
            .iter()
            .all(|f| f.severity != Severity::Fatal)
    );
    let warnings = with_id(&diagnosis, "kernel.mtu.path");
    assert_eq!(
        warnings.len(),
        1,
        "said once, where it happens: {warnings:#?}"
    );
    assert_eq!(
        (
            warnings[0].about.hop.to_string().as_str(),
            warnings[0].severity
        ),
        ("node-1", Severity::Warning)
    );
    assert!(
        warnings[0].message.contains("path MTU discovery")
            && warnings[0].message.contains("--size 1500"),
        "{}",
        warnings[0].message
    );
    // The error leaves node-1 from cni0's address, the route back's source.
    assert!(
        warnings[0]
            .message
            .contains("goes back to 10.244.1.2, from 10.244.1.1 by cni0"),
        "{}",
        warnings[0].message
    );
}

#[test]
fn frag_needed_after_vxlan_decapsulation_goes_to_the_sending_pod_not_the_remote_node() {
    // node-2 takes web-0's packet out of flannel.1 and routes it to cni0,
    // which is too small: the error is about the inner packet, so it goes
    // to web-0, not to node-1 that sent the outer one.
    let dir = copy_snapshot("examples/flannel-vxlan");
    set_mtu(dir.path(), "nodes/node-2/host", "cni0", 1400);
    let diagnosis = ping(dir.path(), "default/web-0", Some(PacketSize::InterfaceMtu));
    assert_eq!(diagnosis.disposition(), Disposition::MtuExceeded);
    let finding = the_one(&diagnosis, "kernel.mtu.exceeded", "node-2", Severity::Fatal);
    assert!(
        finding.message.contains("by cni0, whose MTU is 1400")
            && finding
                .message
                .contains("ICMP fragmentation-needed (MTU 1400) goes back to 10.244.1.2,"),
        "{}",
        finding.message
    );
}

/// Puts `rule` first in node-1's filter OUTPUT chain; returns its line.
fn first_in_node_1_output(dir: &std::path::Path, rule: &str) -> usize {
    let rules = dir.join(NODE_1).join("iptables-save.txt");
    let text = std::fs::read_to_string(&rules).expect("node-1's rules");
    let first_output = text.find("-A OUTPUT").expect("an OUTPUT rule");
    let line = text[..first_output].lines().count() + 1;
    std::fs::write(
        &rules,
        format!("{}{rule}\n{}", &text[..first_output], &text[first_output..]),
    )
    .expect("write node-1's rules");
    line
}

#[test]
fn a_node_dropping_the_frag_needed_it_sends_is_a_black_hole_naming_the_rule() {
    let dir = pods_at_1500();
    // A hardening rule against port scans takes fragmentation-needed with it.
    let drop = "-A OUTPUT -p icmp -m icmp --icmp-type 3 -j DROP";
    let line = first_in_node_1_output(dir.path(), drop);
    let diagnosis = web_0_to_web_3(dir.path());
    // The connection's small packets pass; its full-size ones vanish.
    assert_eq!(diagnosis.disposition(), Disposition::Delivered);
    assert!(with_id(&diagnosis, "kernel.mtu.path").is_empty());
    let finding = the_one(
        &diagnosis,
        "kernel.mtu.black-hole",
        "node-1",
        Severity::Critical,
    );
    assert!(
        finding
            .message
            .contains("never leaves node-1: its netfilter drops it: rule 1 of chain OUTPUT"),
        "{}",
        finding.message
    );
    assert!(
        skoop::diagnostic::evidence_text(&finding.evidence)
            .ends_with(&format!("iptables-save.txt:{line}: {drop}")),
        "{:?}",
        finding.evidence
    );
}

#[test]
fn a_frag_needed_dropped_on_some_netfilter_branches_only_is_not_called_a_black_hole() {
    let dir = pods_at_1500();
    first_in_node_1_output(
        dir.path(),
        "-A OUTPUT -p icmp -m statistic --mode random --probability 0.5 -j DROP",
    );
    let diagnosis = web_0_to_web_3(dir.path());
    assert!(with_id(&diagnosis, "kernel.mtu.black-hole").is_empty());
    let finding = the_one(&diagnosis, "kernel.mtu.path", "node-1", Severity::Warning);
    assert!(
        finding
            .message
            .contains("whether it leaves node-1 is not known: it leaves on 1 of its 2 ways")
            && finding
                .message
                .contains("whether TCP recovers by path MTU discovery depends on that error"),
        "{}",
        finding.message
    );
}

#[test]
fn the_healthy_example_has_no_mtu_findings() {
    let dir = copy_snapshot("examples/flannel-vxlan");
    let diagnosis = ping(dir.path(), "default/web-0", None);
    assert_eq!(diagnosis.disposition(), Disposition::Delivered);
    assert!(
        diagnosis
            .findings
            .iter()
            .all(|f| !f.id.as_str().starts_with("kernel.mtu.")),
        "{:#?}",
        diagnosis.findings
    );
}

#[test]
fn a_veth_takes_frames_up_to_its_mtu_plus_a_vlan_tag_and_drops_longer_ones_silently() {
    let dir = copy_snapshot("examples/flannel-vxlan");
    set_mtu(dir.path(), NODE_1, WEB_0_VETH, 1400);
    // Measured: 1404 bytes pass a veth of MTU 1400, 1405 do not.
    let fits = ping(dir.path(), "default/web-0", Some(PacketSize::Bytes(1404)));
    assert_eq!(
        fits.disposition(),
        Disposition::Delivered,
        "{:#?}",
        fits.findings
    );
    let dropped = ping(dir.path(), "default/web-0", Some(PacketSize::Bytes(1405)));
    assert_eq!(dropped.disposition(), Disposition::MtuExceeded);
    let finding = only(&dropped, "kernel.mtu.frame-dropped");
    assert_eq!(
        finding.about.hop,
        HopId::node("node-1"),
        "the receiving end drops it"
    );
    assert!(
        finding
            .message
            .contains(&format!("at {WEB_0_VETH} (MTU 1400)"))
            && finding.message.contains("no ICMP error"),
        "{}",
        finding.message
    );
    // The path ends in node-1, which received the frame on the veth.
    let last = dropped.hop(*dropped.paths[0].hops.last().unwrap());
    assert_eq!(last.id, HopId::node("node-1"));
}

#[test]
fn vxlan_packets_too_large_for_the_underlay_are_fragmented_with_df_unset() {
    let dir = copy_snapshot("examples/flannel-vxlan");
    set_mtu(dir.path(), NODE_1, "eth0", 1400);
    let diagnosis = ping(dir.path(), "default/web-0", Some(PacketSize::InterfaceMtu));
    assert_eq!(diagnosis.disposition(), Disposition::Delivered);
    let finding = only(&diagnosis, "kernel.mtu.fragmented");
    assert_eq!(
        (finding.about.hop.to_string().as_str(), finding.severity),
        ("node-1", Severity::Warning)
    );
    assert!(
        finding
            .message
            .contains("1500-byte VXLAN packet (1450 bytes inside, 50 of encapsulation)")
            && finding.message.contains("by eth0 (MTU 1400)"),
        "{}",
        finding.message
    );
}

#[test]
fn a_node_sending_through_vxlan_too_large_for_the_underlay_gets_emsgsize_after_the_first_packet() {
    // Measured: the node's first DF ping of 1450 passes fragmented, then
    // `ip route get` shows `mtu 1350` and ping "message too long, mtu=1350".
    let dir = copy_snapshot("examples/flannel-vxlan");
    set_mtu(dir.path(), NODE_1, "eth0", 1400);
    let diagnosis = ping(dir.path(), "node/node-1", Some(PacketSize::InterfaceMtu));
    assert_eq!(diagnosis.disposition(), Disposition::MtuExceeded);
    let finding = only(&diagnosis, "kernel.mtu.exceeded");
    assert!(
        finding
            .message
            .contains("flannel.1 then lowers the path MTU of node-1's route to 10.244.2.3 to 1350")
            && finding.message.contains("EMSGSIZE"),
        "{}",
        finding.message
    );
}

/// node-1's flannel.1 with `df set` over an underlay of 1400.
fn vxlan_df_set() -> tempfile::TempDir {
    let dir = copy_snapshot("examples/flannel-vxlan");
    set_mtu(dir.path(), NODE_1, "eth0", 1400);
    edit_json(&dir.path().join(NODE_1).join("ip-link.json"), |links| {
        let vtep = links
            .iter_mut()
            .find(|l| l["ifname"] == "flannel.1")
            .unwrap();
        vtep["linkinfo"]["info_data"]["df"] = "set".into();
    });
    dir
}

#[test]
fn a_vxlan_device_with_df_set_drops_what_the_underlay_cannot_carry_without_telling_the_sender() {
    let dir = vxlan_df_set();
    let diagnosis = ping(dir.path(), "default/web-0", Some(PacketSize::InterfaceMtu));
    assert_eq!(diagnosis.disposition(), Disposition::MtuExceeded);
    let finding = only(&diagnosis, "kernel.mtu.exceeded");
    assert_eq!(finding.about.hop, HopId::node("node-1"));
    assert!(
        finding.message.contains("flannel.1 has df set")
            && finding
                .message
                .contains("tells the inner packet's sender nothing"),
        "{}",
        finding.message
    );
    // Without --size: the connection opens, but full-size segments vanish.
    let tcp = diagnose(
        &load(dir.path()),
        "default/web-0",
        "default/web-3:8080",
        Protocol::Tcp,
        None,
    );
    assert_eq!(tcp.disposition(), Disposition::Delivered);
    let black_hole = only(&tcp, "kernel.mtu.black-hole");
    assert_eq!(black_hole.severity, Severity::Critical);
}

#[test]
fn a_vxlan_df_word_skoop_does_not_know_stops_the_walk_as_unknown_at_the_device() {
    let dir = copy_snapshot("examples/flannel-vxlan");
    edit_json(&dir.path().join(NODE_1).join("ip-link.json"), |links| {
        let vtep = links
            .iter_mut()
            .find(|l| l["ifname"] == "flannel.1")
            .unwrap();
        vtep["linkinfo"]["info_data"]["df"] = "auto".into();
    });
    let diagnosis = ping(dir.path(), "default/web-0", None);
    assert_eq!(diagnosis.disposition(), Disposition::InsufficientInfo);
    let finding = the_one(
        &diagnosis,
        "kernel.vxlan.unknown",
        "node-1",
        Severity::Warning,
    );
    assert!(
        finding.message.contains(r#"df "auto" on flannel.1"#),
        "{}",
        finding.message
    );
}

#[test]
fn a_reply_too_large_for_the_way_back_is_fragmented_for_ping_and_refused_for_tcp() {
    // node-1 sends replies to web-0 by cni0, which the request never
    // leaves by. The kernel's echo responder sends its replies with DF
    // clear; TCP sets DF.
    let dir = copy_snapshot("examples/flannel-vxlan");
    set_mtu(dir.path(), NODE_1, "cni0", 1400);
    let size = Some(PacketSize::Bytes(1450));
    let echo = ping(dir.path(), "default/web-0", size);
    assert_eq!(
        echo.disposition(),
        Disposition::Delivered,
        "{:#?}",
        echo.findings
    );
    let fragmented = only(&echo, "kernel.mtu.fragmented");
    assert!(fragmented.message.contains("by cni0 (MTU 1400)"));
    let tcp = diagnose(
        &load(dir.path()),
        "default/web-0",
        "default/web-3:8080",
        Protocol::Tcp,
        size,
    );
    assert_eq!(tcp.disposition(), Disposition::MtuExceeded);
    let refused = only(&tcp, "kernel.mtu.exceeded");
    assert_eq!(refused.about.hop, HopId::node("node-1"));
    assert!(
        refused.message.starts_with("on the way back: "),
        "{}",
        refused.message
    );
}

#[test]
fn absurd_mtus_in_a_dump_are_compared_not_overflowed() {
    let dir = copy_snapshot("examples/flannel-vxlan");
    for (netns, ifname) in [(WEB_0, "eth0"), (NODE_1, WEB_0_VETH), (NODE_1, "flannel.1")] {
        set_mtu(dir.path(), netns, ifname, u32::MAX);
    }
    let diagnosis = ping(dir.path(), "default/web-0", Some(PacketSize::InterfaceMtu));
    // The VXLAN packet is fragmented on node-1's underlay (df unset); the
    // packet inside is still too large for node-2's cni0.
    assert_eq!(diagnosis.disposition(), Disposition::MtuExceeded);
    assert_eq!(
        with_id(&diagnosis, "kernel.mtu.exceeded")[0].about.hop,
        HopId::node("node-2")
    );
}
