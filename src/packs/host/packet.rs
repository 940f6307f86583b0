//! The packet a hook or hop check is about (`Packet`), and the hop it is
//! at (`Hop`): the namespace, its interfaces and where the walk stopped.

use rhai::{Dynamic, Engine};

use super::{map, opt, text};
use crate::packs::reads::{HopReads, record};
use crate::packs::scope::{HopScope, HopStop, NetnsRef, NodeRef, Packet, StoppingRule};

pub(super) fn register(engine: &mut Engine) {
    engine
        .register_type_with_name::<Packet>("Packet")
        .register_get("src", |p: &mut Packet| p.src)
        .register_get("dst", |p: &mut Packet| p.dst)
        .register_get("protocol", |p: &mut Packet| p.protocol.as_str().to_owned())
        .register_get("src_port", |p: &mut Packet| opt(p.sport.map(i64::from)))
        .register_get("dst_port", |p: &mut Packet| opt(p.dport.map(i64::from)))
        .register_get("mark", |p: &mut Packet| i64::from(p.mark))
        .register_get("size", |p: &mut Packet| i64::from(p.length));
    engine
        .register_type_with_name::<std::sync::Arc<HopScope>>("Hop")
        .register_get("netns", |h: &mut std::sync::Arc<HopScope>| NetnsRef {
            snapshot: h.snapshot.clone(),
            id: h.netns.clone(),
        })
        .register_get("node", |h: &mut std::sync::Arc<HopScope>| {
            opt(NodeRef::new(&h.snapshot, h.netns.node()).map(Dynamic::from))
        })
        // Each of the hop's own facts says it was read (`packs/reads.rs`):
        // a check's answer is kept for the hops that show the same.
        .register_get("in_iface", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::IN_IFACE);
            opt(h.in_iface.clone())
        })
        .register_get("out_iface", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::OUT_IFACE);
            opt(h.out_iface.clone())
        })
        .register_get("out_packet", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::OUT_PACKET);
            opt(h.out_packet.clone().map(Dynamic::from))
        })
        .register_get("forwarding", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::FORWARDING);
            h.forwarding
        })
        .register_get("delivers_locally", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::DELIVERS_LOCALLY);
            h.delivers_locally
        })
        .register_get("packet", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::PACKET);
            h.packet.clone()
        })
        .register_get("reply", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::REPLY);
            h.reply
        })
        .register_get("origin", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::ORIGIN);
            h.origin().clone()
        })
        .register_get("stopped", |h: &mut std::sync::Arc<HopScope>| {
            record(HopReads::STOPPED);
            opt(h.stopped.as_ref().map(hop_stop))
        });
}

/// `hop.stopped`: `#{disposition, reason, packet, file, table, chain, rule,
/// handle, line, column, text, evidence}`, the netfilter fields `()` unless
/// netfilter stopped the packet (`file` is the ruleset's dump file,
/// `iptables-save.txt` or `nft-ruleset.json`).
fn hop_stop(stop: &HopStop) -> Dynamic {
    let stopping = stop.netfilter.as_ref();
    let rule = stopping.map(|s| &s.rule);
    let number = |n: Option<usize>| opt(n.map(|n| i64::try_from(n).unwrap_or(i64::MAX)));
    let handle = rule
        .and_then(|r| r.handle)
        .map(|h| i64::try_from(h).unwrap_or(i64::MAX));
    map([
        ("disposition", text(&stop.disposition)),
        ("reason", text(&stop.reason)),
        ("packet", opt(stop.packet.clone().map(Dynamic::from))),
        (
            "file",
            opt(rule.map(|r| r.ruleset.file().name().to_owned())),
        ),
        ("table", opt(rule.map(|r| r.table.clone()))),
        ("chain", opt(rule.map(|r| r.chain.clone()))),
        ("rule", number(rule.and_then(|r| r.number))),
        ("handle", opt(handle)),
        ("line", number(rule.and_then(|r| r.line))),
        ("column", number(rule.and_then(|r| r.column))),
        ("text", opt(rule.map(|r| r.text.clone()))),
        ("evidence", opt(stopping.map(StoppingRule::evidence))),
    ])
}
