//! What the packs answered about one snapshot, kept for the next question
//! about it: whether each CNI pack is detected, each pack's mode, and each
//! snapshot check's findings about each
//! of its subjects (a node, a node and a peer or one of its pods, a pod, a
//! pod's port, an object). None of these depends on a flow: a snapshot check
//! sees its parameters, the snapshot and its subject, never a packet, so the
//! answer for a subject is the same for every diagnosis of the snapshot. A
//! hop check's answer is kept too, for the facts of the hop it read
//! (`reads.rs`): a check that asked only whether the hop stopped the packet
//! answers once for every hop of that namespace that did not.
//! Each answer keeps what it read of pods beyond their identity
//! (`pod_reads`), and notes it again each time it is used, as if the check
//! had run.
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

use super::Detected;
use super::eval::Finding;
use super::reads::{HopFacts, HopReads};
use super::sandbox::ScriptErrorKind;
use super::scope::{Context, HopScope, Subject};
use crate::snapshot::cluster::pod_reads::{self, PodRead};
use crate::snapshot::{NetnsId, Snapshot};

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
    /// Per CNI pack (by index): what its detection found.
    detected: HashMap<usize, Read<Detected>>,
    modes: HashMap<usize, Read<ModeAnswer>>,
    /// `None`: the check's `when:` skipped the subject.
    checks: HashMap<CheckIndex, HashMap<ContextKey, Read<CheckAnswer>>>,
    /// Each hop check's findings in a namespace, by the facts of the hop it
    /// read (`reads.rs`): for each set of fields it has read, its findings
    /// for each of their values seen.
    hops: HashMap<(CheckIndex, NetnsId), HopAnswers>,
}

/// What one hop check answered in one namespace.
#[derive(Default)]
struct HopAnswers {
    by_reads: Vec<(HopReads, HopFindings)>,
    kept: usize,
}

/// A hop check's findings, by the values of the facts it read.
type HopFindings = HashMap<HopFacts, Read<Vec<Finding>>>;

/// A snapshot check's findings about a subject; `None`: skipped.
type CheckAnswer = Option<Vec<Finding>>;

/// An answer, and what making it read of pods beyond their identity.
type Read<T> = (T, Vec<PodRead>);

/// A kept answer used again: its reads are noted as if it were made anew.
fn used<T>((answer, reads): &Read<T>) -> &T {
    pod_reads::replay(reads);
    answer
}

/// At most this many answers of one hop check in one namespace are kept
/// (a check that reads the packet has one per packet): past it, the check
/// runs on every hop, as before.
const HOP_ANSWERS: usize = 4096;

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

    pub(super) fn detected(&self, pack: usize) -> Option<&Detected> {
        self.detected.get(&pack).map(used)
    }

    pub(super) fn keep_detected(&mut self, pack: usize, detected: Read<Detected>) {
        if let Some(finding) = &detected.0.problem
            && out_of_time(std::slice::from_ref(finding))
        {
            return;
        }
        self.detected.insert(pack, detected);
    }

    pub(super) fn mode(&self, pack: usize) -> Option<&ModeAnswer> {
        self.modes.get(&pack).map(used)
    }

    pub(super) fn keep_mode(&mut self, pack: usize, answer: Read<ModeAnswer>) {
        if let Err(finding) = &answer.0
            && out_of_time(std::slice::from_ref(finding))
        {
            return;
        }
        self.modes.insert(pack, answer);
    }

    pub(super) fn check(
        &self,
        check: CheckIndex,
        key: &ContextKey,
    ) -> Option<&Option<Vec<Finding>>> {
        self.checks.get(&check)?.get(key).map(used)
    }

    /// What `check` answered at a hop showing the facts it read, if it
    /// was asked at one.
    pub(super) fn hop_check(&self, check: CheckIndex, hop: &HopScope) -> Option<&Vec<Finding>> {
        let answers = self.hops.get(&(check, hop.netns.clone()))?;
        answers
            .by_reads
            .iter()
            .find_map(|(reads, answers)| answers.get(&HopFacts::of(hop, *reads)))
            .map(used)
    }

    pub(super) fn keep_hop_check(
        &mut self,
        check: CheckIndex,
        hop: &HopScope,
        reads: HopReads,
        findings: Read<Vec<Finding>>,
    ) {
        let answers = self.hops.entry((check, hop.netns.clone())).or_default();
        if answers.kept >= HOP_ANSWERS || out_of_time(&findings.0) {
            return;
        }
        answers.kept += 1;
        let facts = HopFacts::of(hop, reads);
        match answers.by_reads.iter_mut().find(|(r, _)| *r == reads) {
            Some((_, kept)) => {
                kept.insert(facts, findings);
            }
            None => answers
                .by_reads
                .push((reads, HashMap::from([(facts, findings)]))),
        }
    }

    pub(super) fn keep_check(
        &mut self,
        check: CheckIndex,
        key: ContextKey,
        findings: Read<Option<Vec<Finding>>>,
    ) {
        if findings.0.as_deref().is_some_and(out_of_time) {
            return;
        }
        self.checks.entry(check).or_default().insert(key, findings);
    }
}

/// Whether a script among `findings` was stopped for time (its call's
/// deadline, or the run's budget): that is about the run, not the subject,
/// and the next run asks again.
fn out_of_time(findings: &[Finding]) -> bool {
    findings.iter().any(|finding| {
        matches!(
            finding.about.error_kind,
            Some(ScriptErrorKind::TookTooLong | ScriptErrorKind::RunOutOfTime)
        )
    })
}
