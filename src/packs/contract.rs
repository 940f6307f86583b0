//! The pack contract: what the engine makes of a pack's manifest and hooks,
//! versioned so that a pack keeps the meaning it was written for.
//!
//! A pack states the contract it was written for in `contract:`; one
//! without it was written before versions existed, against the first. When
//! the engine changes what a missing hook means, the change is an entry of
//! [`CHANGED_DEFAULTS`] and the contract's number goes up: a pack of an
//! older contract that lacks the hook keeps the older meaning, and
//! `skoop packs lint` says so, with the migration `docs/packs.md` gives
//! ("Contract versions").

use super::model::{Pack, PackKind};
use crate::snapshot::problem::{ParseIssue, Problem};

/// The contract this skoop implements, and the newest a pack may state.
pub const CONTRACT: u32 = 2;

/// The contract of a pack whose manifest states none: it was written before
/// versions existed.
pub const UNVERSIONED: u32 = 1;

/// A change of what a missing hook means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookDefault {
    pub hook: &'static str,
    /// The kind of pack whose hook it is.
    pub kind: PackKind,
    /// The first contract with the new meaning.
    pub since: u32,
    /// What a missing hook meant before: what a pack of an older contract
    /// without the hook still answers.
    pub before: &'static str,
    /// What a missing hook means since.
    pub now: &'static str,
}

/// The routed-underlay change (contract 2): before it, the engine took a
/// pod's packet that a node sends to a router outside the snapshot as lost,
/// whatever the CNI; since, only the CNI's `underlay` hook can say so.
pub const UNDERLAY: HookDefault = HookDefault {
    hook: "underlay",
    kind: PackKind::Cni,
    since: 2,
    before: "the routers route no pod address: a pod's packet a node sends to a router outside the snapshot leaves the cluster (exits_cluster)",
    now: "no opinion: such a packet ends insufficient_info",
};

/// Every change of a missing hook's meaning, oldest first.
pub const CHANGED_DEFAULTS: &[HookDefault] = &[UNDERLAY];

impl HookDefault {
    /// Whether `pack` keeps the meaning a missing hook had before: it lacks
    /// the hook and was written for an older contract.
    pub fn kept_by(&self, pack: &Pack) -> bool {
        pack.kind == self.kind && pack.contract < self.since && !pack.hooks.contains_key(self.hook)
    }

    /// Why `pack` answers as a missing hook did before, for the reports.
    pub fn why(&self, pack: &Pack) -> String {
        format!(
            "it is written for contract {}, where a {} pack without an `{}` hook says so",
            pack.contract,
            self.kind.as_str(),
            self.hook
        )
    }
}

/// What `skoop packs lint` warns of in a pack that loads: each changed
/// default it keeps, positioned at its `contract:` (the manifest's start
/// when it states none).
pub fn warnings(pack: &Pack) -> Vec<Problem> {
    let manifest = pack.dir.join(super::MANIFEST);
    let (line, column) = pack.contract_at.unwrap_or((1, 1));
    CHANGED_DEFAULTS
        .iter()
        .filter(|change| change.kept_by(pack))
        .map(|change| {
            let message = format!(
                "warning: written for contract {}, without an `{}` hook, which keeps its meaning there: {}; since contract {} a missing `{}` hook means {}. To migrate, write the hook, then state `contract: {}` (docs/packs.md, \"Contract versions\")",
                pack.contract,
                change.hook,
                change.before,
                change.since,
                change.hook,
                change.now,
                CONTRACT
            );
            Problem::from_issue(&manifest, ParseIssue::at(line, column, message))
        })
        .collect()
}
