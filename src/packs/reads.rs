//! Which facts of a hop a hop check read, so that its answer can be kept
//! for every hop that shows the same facts (`answers.rs`).
//!
//! A hop check sees the hop only through the host API's getters of `Hop`
//! and `Context` (`host/packet.rs`, `host/mod.rs`); a packet object is had
//! only from one of them (`hop.packet`, `hop.out_packet`, `hop.origin`,
//! `hop.stopped`'s `packet`, `ctx.packet`), so the getter that hands it out
//! records the whole packet as read. Each getter records its field while a
//! check runs under [`recording`]; an expression of the manifest (`when:`,
//! `message:`) sees `packet` as a variable, not through a getter, so
//! handing the variables out records the packet too
//! (`Context::variables`). A declarative kind (`eval/kinds.rs`) reads the
//! hop only through the expressions of its fields. Everything else a check sees (the snapshot, the pack's parameters, the
//! hop's namespace and what is derived from it) is the same for every hop
//! of one namespace of one snapshot.

use std::cell::Cell;
use std::hash::{Hash, Hasher};

use super::scope::{HopScope, HopStop, Packet};

/// A set of a hop's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(super) struct HopReads(u16);

impl HopReads {
    pub(super) const IN_IFACE: HopReads = HopReads(1);
    pub(super) const OUT_IFACE: HopReads = HopReads(1 << 1);
    pub(super) const OUT_PACKET: HopReads = HopReads(1 << 2);
    pub(super) const FORWARDING: HopReads = HopReads(1 << 3);
    pub(super) const DELIVERS_LOCALLY: HopReads = HopReads(1 << 4);
    pub(super) const PACKET: HopReads = HopReads(1 << 5);
    pub(super) const REPLY: HopReads = HopReads(1 << 6);
    pub(super) const ORIGIN: HopReads = HopReads(1 << 7);
    pub(super) const STOPPED: HopReads = HopReads(1 << 8);

    fn has(self, field: HopReads) -> bool {
        self.0 & field.0 == field.0
    }
}

thread_local! {
    /// The fields read by the check running on this thread, when one runs
    /// under [`recording`].
    static READ: Cell<Option<HopReads>> = const { Cell::new(None) };
}

/// Notes that the running check read `field` of its hop.
pub(super) fn record(field: HopReads) {
    READ.with(|read| {
        if let Some(fields) = read.get() {
            read.set(Some(HopReads(fields.0 | field.0)));
        }
    });
}

/// Runs `check`, and says which of its hop's fields it read.
pub(super) fn recording<R>(check: impl FnOnce() -> R) -> (R, HopReads) {
    let outer = READ.with(|read| read.replace(Some(HopReads::default())));
    let result = check();
    let fields = READ.with(|read| read.replace(outer)).unwrap_or_default();
    // A check run inside another's (none today) is read by the outer too.
    if let Some(outer) = outer {
        READ.with(|read| read.set(Some(HopReads(outer.0 | fields.0))));
    }
    (result, fields)
}

/// The values of the fields `reads` names, of one hop: equal for two hops
/// when a check that read those fields cannot tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HopFacts {
    in_iface: Option<Option<String>>,
    out_iface: Option<Option<String>>,
    out_packet: Option<Option<Packet>>,
    forwarding: Option<bool>,
    delivers_locally: Option<bool>,
    packet: Option<Packet>,
    reply: Option<bool>,
    origin: Option<Packet>,
    stopped: Option<Option<HopStop>>,
}

impl HopFacts {
    pub(super) fn of(hop: &HopScope, reads: HopReads) -> HopFacts {
        let read = |field| reads.has(field);
        HopFacts {
            in_iface: read(HopReads::IN_IFACE).then(|| hop.in_iface.clone()),
            out_iface: read(HopReads::OUT_IFACE).then(|| hop.out_iface.clone()),
            out_packet: read(HopReads::OUT_PACKET).then(|| hop.out_packet.clone()),
            forwarding: read(HopReads::FORWARDING).then_some(hop.forwarding),
            delivers_locally: read(HopReads::DELIVERS_LOCALLY).then_some(hop.delivers_locally),
            packet: read(HopReads::PACKET).then(|| hop.packet.clone()),
            reply: read(HopReads::REPLY).then_some(hop.reply),
            origin: read(HopReads::ORIGIN).then(|| hop.origin().clone()),
            stopped: read(HopReads::STOPPED).then(|| hop.stopped.clone()),
        }
    }
}

impl Hash for HopFacts {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.in_iface.hash(state);
        self.out_iface.hash(state);
        self.out_packet.hash(state);
        self.forwarding.hash(state);
        self.delivers_locally.hash(state);
        self.packet.hash(state);
        self.reply.hash(state);
        self.origin.hash(state);
        // A stop by the fields that tell most stops apart; equality
        // compares the rest.
        if let Some(stopped) = &self.stopped {
            stopped
                .as_ref()
                .map(|stop| (&stop.disposition, &stop.reason, &stop.packet))
                .hash(state);
        }
    }
}
