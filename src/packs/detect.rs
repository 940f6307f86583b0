//! Whether a CNI pack's CNI is in a snapshot: the signs its manifest names
//! (`detect:`), then, where there are some, the pack's `detect` hook, which
//! may rule them out (a CNI that left its signs but does not move the pods'
//! packets). `docs/packs.md`, "Detection and the `detect` hook".

use std::sync::Arc;

use rhai::Dynamic;

use super::{Finding, LoadedPacks, Pack, PackKind, host};
use crate::snapshot::Snapshot;
use crate::snapshot::cluster::{Cluster, pod_reads};

/// What a CNI pack's detection found in a snapshot.
#[derive(Debug, Clone, Default)]
pub struct Detected {
    /// The manifest's signs of the CNI (`detect:`); none: not there.
    pub signs: Vec<String>,
    /// Why the CNI the signs name does not run here, as the pack's
    /// `detect` hook says.
    pub ruled_out: Option<String>,
    /// The `detect` hook failed: the signs alone decide, and this finding
    /// says why.
    pub problem: Option<Box<Finding>>,
}

impl Detected {
    /// Whether the pack applies: signs found, not ruled out.
    pub fn applies(&self) -> bool {
        !self.signs.is_empty() && self.ruled_out.is_none()
    }
}

impl LoadedPacks {
    /// What a CNI pack's detection finds in `snapshot`: the manifest's
    /// signs of its CNI, and, where there are some, what its `detect` hook
    /// makes of them. A rules pack always applies.
    pub fn detect(&self, pack: &Pack, snapshot: &Arc<Snapshot>) -> Detected {
        if pack.kind == PackKind::Rules {
            return Detected {
                signs: vec!["rules packs always apply".to_owned()],
                ..Detected::default()
            };
        }
        let signs = Self::signs(pack, &snapshot.cluster);
        let Some(function) = pack.hooks.get("detect").filter(|_| !signs.is_empty()) else {
            return Detected {
                signs,
                ..Detected::default()
            };
        };
        let (ctx, evaluator) = self.own_context(pack, snapshot);
        let (ruled_out, problem) = match evaluator.call(function, vec![Dynamic::from(ctx.clone())])
        {
            Err(stop) => (
                None,
                Some(Box::new(evaluator.pack_finding(&ctx, "detect", stop))),
            ),
            Ok(answer) if answer.is_unit() || answer.as_bool() == Ok(true) => (None, None),
            Ok(answer) if answer.as_bool() == Ok(false) => (
                Some(format!(
                    "its detect hook ({}) says its CNI does not run here",
                    function.name
                )),
                None,
            ),
            Ok(answer) if answer.is_string() => (Some(host::display(&answer)), None),
            Ok(answer) => {
                let message = format!(
                    "hook detect ({}) returned {}, not (), a bool or a string saying why its CNI does not run",
                    function.name,
                    host::display(&answer)
                );
                (
                    None,
                    Some(Box::new(evaluator.unusable_answer(&ctx, "detect", message))),
                )
            }
        };
        Detected {
            signs,
            ruled_out,
            problem,
        }
    }

    /// The manifest's signs of a CNI pack's CNI in `cluster`; empty when
    /// it is not there.
    fn signs(pack: &Pack, cluster: &Cluster) -> Vec<String> {
        let d = &pack.detect;
        let mut signals = Vec::new();
        let namespace_fits =
            |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        for ds in &d.daemon_sets {
            for found in cluster.daemon_sets().filter(|x| {
                x.meta.name == ds.name && namespace_fits(&ds.namespace, &x.meta.namespace)
            }) {
                signals.push(format!(
                    "DaemonSet {}/{}",
                    found.meta.namespace, found.meta.name
                ));
            }
        }
        for signal in &d.config_maps {
            for cm in cluster.config_maps().filter(|x| {
                x.meta.name == signal.object.name
                    && namespace_fits(&signal.object.namespace, &x.meta.namespace)
            }) {
                let values: Vec<&String> = match &signal.key {
                    Some(key) => cm.data.get(key).into_iter().collect(),
                    None => cm.data.values().collect(),
                };
                let fits = (signal.key.is_none() || !values.is_empty())
                    && signal
                        .contains
                        .as_ref()
                        .is_none_or(|text| values.iter().any(|v| v.contains(text.as_str())));
                if fits {
                    signals.push(format!("ConfigMap {}/{}", cm.meta.namespace, cm.meta.name));
                }
            }
        }
        for annotation in &d.node_annotations {
            if let Some(node) = cluster.node_annotated(annotation) {
                signals.push(format!("node {} annotated {annotation}", node.meta.name));
            }
        }
        for crd in &d.crds {
            if cluster.has_objects_of(&crd.kind, crd.api_version.as_deref()) {
                signals.push(format!("{} objects", crd.kind));
            }
        }
        signals
    }

    /// What `answer` makes of the `index`th pack's detection in `snapshot`,
    /// detected once per snapshot.
    pub(super) fn detection<T>(
        &self,
        index: usize,
        pack: &Pack,
        snapshot: &Arc<Snapshot>,
        answer: impl Fn(&Detected) -> T,
    ) -> T {
        if let Some(kept) = self.answers.borrow_mut().about(snapshot).detected(index) {
            return answer(kept);
        }
        let (detected, reads) = pod_reads::capture(|| self.detect(pack, snapshot));
        let answered = answer(&detected);
        let mut answers = self.answers.borrow_mut();
        answers
            .about(snapshot)
            .keep_detected(index, (detected, reads));
        answered
    }
}
