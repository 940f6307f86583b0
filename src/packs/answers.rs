//! What the packs answered about one snapshot, kept for the next question
//! about it: whether each CNI pack is detected, each pack's mode, and each
//! snapshot check's findings about each
//! of its subjects (a node, a node and a peer or one of its pods, a pod, a
//! pod's port, an object). None of these depends on a flow: a snapshot check
//! sees its parameters, the snapshot and its subject, never a packet, so the
//! answer for a subject is the same for every diagnosis of the snapshot.
//! `skoop matrix` asks thousands of diagnoses of one snapshot about the same
//! few nodes and pods; each check runs once per subject on each worker.
//!
//! Soundness rests on the key being all a check's answer depends on: the
//! check (by its pack's and its own place in the loaded packs, which never
//! change once loaded), and the identity of its context ([`ContextKey`]:
//! every field of a snapshot check's [`Context`] that differs between two of
//! its subjects). The parameters are the pack's, the snapshot is the one
//! these answers are about (held weakly, so that its address cannot be
//! another snapshot's while they are kept), and choosing a CNI by hand
//! (`LoadedPacks::choose_cni`, which changes which packs apply) forgets
//! them.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use super::eval::Finding;
use super::scope::{Context, Subject};
use crate::snapshot::Snapshot;

/// A check among the loaded packs: its pack's index and its own.
pub(super) type CheckIndex = (usize, usize);

/// What tells one context of a snapshot check from another of the same
/// check: the subject, and where it is made per peer, per local pod or per
/// container port, which one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ContextKey {
    subject: Subject,
    peer: Option<String>,
    pod: Option<(String, String)>,
    /// A container port as the check sees it (a map's text, whose keys are
    /// sorted).
    port: Option<String>,
}

impl ContextKey {
    pub(super) fn of(ctx: &Context) -> ContextKey {
        debug_assert!(ctx.hop.is_none(), "a hop's context depends on its packet");
        ContextKey {
            subject: ctx.subject.clone(),
            peer: ctx.peer.as_ref().map(|peer| peer.name.clone()),
            pod: ctx
                .pod
                .as_ref()
                .map(|pod| (pod.namespace.clone(), pod.name.clone())),
            port: ctx.port.as_ref().map(ToString::to_string),
        }
    }
}

/// A pack's mode as `LoadedPacks::active_mode` answers it.
pub(super) type ModeAnswer = Result<Option<String>, Box<Finding>>;

/// The answers kept about one snapshot.
#[derive(Default)]
pub(super) struct Answers {
    snapshot: Weak<Snapshot>,
    /// Per CNI pack (by index): whether it is detected.
    detected: HashMap<usize, bool>,
    modes: HashMap<usize, ModeAnswer>,
    /// `None`: the check's `when:` skipped the subject.
    checks: HashMap<CheckIndex, HashMap<ContextKey, Option<Vec<Finding>>>>,
}

impl Answers {
    /// The answers about `snapshot`: these, or none when they are about
    /// another.
    pub(super) fn about(&mut self, snapshot: &Arc<Snapshot>) -> &mut Answers {
        if !Weak::ptr_eq(&self.snapshot, &Arc::downgrade(snapshot)) {
            *self = Answers {
                snapshot: Arc::downgrade(snapshot),
                ..Answers::default()
            };
        }
        self
    }

    pub(super) fn detected(&self, pack: usize) -> Option<bool> {
        self.detected.get(&pack).copied()
    }

    pub(super) fn keep_detected(&mut self, pack: usize, detected: bool) {
        self.detected.insert(pack, detected);
    }

    pub(super) fn mode(&self, pack: usize) -> Option<&ModeAnswer> {
        self.modes.get(&pack)
    }

    pub(super) fn keep_mode(&mut self, pack: usize, answer: ModeAnswer) {
        self.modes.insert(pack, answer);
    }

    pub(super) fn check(
        &self,
        check: CheckIndex,
        key: &ContextKey,
    ) -> Option<&Option<Vec<Finding>>> {
        self.checks.get(&check)?.get(key)
    }

    pub(super) fn keep_check(
        &mut self,
        check: CheckIndex,
        key: ContextKey,
        findings: Option<Vec<Finding>>,
    ) {
        self.checks.entry(check).or_default().insert(key, findings);
    }
}
