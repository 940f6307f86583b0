//! What a diagnosis read of pods beyond their identity: a pod's namespace
//! or labels as values, which pods carry a label or match a selector, and
//! what NetworkPolicies decide about a flow. `skoop matrix` records them
//! while it diagnoses a flow, to tell whether another pod, alike in all but
//! these, would have been diagnosed alike (`matrix/twins.rs`); nothing else
//! records, and a read outside a recording costs a thread-local lookup.
//!
//! Every reader of these facts records: the cluster's own queries
//! ([`Cluster::pods_labelled`](super::Cluster::pods_labelled),
//! [`Cluster::pods_matching`](super::Cluster::pods_matching),
//! [`Cluster::network_policy`](super::Cluster::network_policy)), and the
//! packs' host API where it hands a script a pod's namespace or labels. A
//! value kept across diagnoses (a pack check's answer for its subject) keeps
//! the reads that made it, and replays them when it is used again.

use std::cell::RefCell;
use std::collections::HashSet;

use super::PolicyFlow;
use super::selector::LabelSelector;

/// One read of pods beyond their identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PodRead {
    /// A pod's namespace as a value (not only as part of its name).
    Namespace { namespace: String, name: String },
    /// A pod's labels, all of them.
    Labels { namespace: String, name: String },
    /// Which pods carry label `key` with `value`.
    Labelled { key: String, value: String },
    /// Which pods of `namespace` a selector matches.
    Selected {
        namespace: String,
        selector: LabelSelector,
    },
    /// What the NetworkPolicies decide about a flow.
    Policy(PolicyFlow),
}

thread_local! {
    /// The open recordings, innermost last.
    static RECORDINGS: RefCell<Vec<HashSet<PodRead>>> = const { RefCell::new(Vec::new()) };
}

/// Notes `read` in the innermost open recording, if any.
pub fn record(read: impl FnOnce() -> PodRead) {
    RECORDINGS.with(|recordings| {
        if let Some(open) = recordings.borrow_mut().last_mut() {
            open.insert(read());
        }
    });
}

/// Notes every read of `reads` again: a kept answer used once more.
pub fn replay(reads: &[PodRead]) {
    RECORDINGS.with(|recordings| {
        if let Some(open) = recordings.borrow_mut().last_mut() {
            open.extend(reads.iter().cloned());
        }
    });
}

/// Runs `f`, and returns what it read, which the enclosing recording (if
/// one is open) reads too.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<PodRead>) {
    RECORDINGS.with(|recordings| recordings.borrow_mut().push(HashSet::new()));
    // Closed also when `f` unwinds, so that a caught panic leaves no
    // recording open on the thread.
    struct Close;
    impl Drop for Close {
        fn drop(&mut self) {
            RECORDINGS.with(|recordings| {
                let mut recordings = recordings.borrow_mut();
                if let Some(closed) = recordings.pop()
                    && let Some(outer) = recordings.last_mut()
                {
                    outer.extend(closed);
                }
            });
        }
    }
    let close = Close;
    let value = f();
    let reads: Vec<PodRead> = RECORDINGS.with(|recordings| {
        recordings
            .borrow()
            .last()
            .map(|open| open.iter().cloned().collect())
            .unwrap_or_default()
    });
    drop(close);
    (value, reads)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(value: &str) -> PodRead {
        PodRead::Labelled {
            key: "app".into(),
            value: value.into(),
        }
    }

    #[test]
    fn reads_outside_a_recording_are_not_kept() {
        record(|| labelled("a"));
        let ((), reads) = capture(|| {});
        assert!(reads.is_empty());
    }

    #[test]
    fn a_nested_recording_reads_into_the_outer_one_too() {
        let (inner, outer) = capture(|| {
            record(|| labelled("a"));
            let ((), inner) = capture(|| record(|| labelled("b")));
            replay(&[labelled("c")]);
            inner
        });
        assert_eq!(inner, vec![labelled("b")]);
        let outer: HashSet<_> = outer.into_iter().collect();
        assert_eq!(
            outer,
            HashSet::from([labelled("a"), labelled("b"), labelled("c")])
        );
    }

    #[test]
    fn a_recording_is_closed_when_its_function_unwinds() {
        let caught = std::panic::catch_unwind(|| capture(|| panic!("unwinds")));
        assert!(caught.is_err());
        record(|| labelled("a"));
        RECORDINGS.with(|recordings| assert!(recordings.borrow().is_empty()));
    }
}
