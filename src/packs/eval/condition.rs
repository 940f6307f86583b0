//! The condition kind: a Pod's, Node's or object's status condition.

use super::{Failure, Outcome, Stop};
use crate::diagnostic::Evidence;
use crate::packs::scope::{Context, NodeRef, PodRef};

pub(super) fn condition_outcome(ctx: &Context, condition: &str, expect: bool) -> Outcome {
    let snapshot = &ctx.snapshot;
    let (status, source): (Option<bool>, Option<Evidence>) =
        if let Some(pod) = ctx.pod.as_ref().and_then(PodRef::get) {
            let status = match condition {
                "Ready" => pod.ready,
                "ContainersReady" => pod.containers_ready,
                other => {
                    return Err(Stop::Unknown(format!(
                        "the model keeps only Ready and ContainersReady of a Pod, not {other}"
                    )));
                }
            };
            (status, Some(pod.meta.source.evidence()))
        } else if let Some(node) = ctx.node.as_ref().and_then(NodeRef::get) {
            if condition != "Ready" {
                return Err(Stop::Unknown(format!(
                    "the model keeps only Ready of a Node, not {condition}"
                )));
            }
            (node.ready, Some(node.meta.source.evidence()))
        } else if let Some(object) = &ctx.object {
            let status = object
                .clone()
                .try_cast::<rhai::Map>()
                .and_then(|m| m.get("status")?.clone().try_cast::<rhai::Map>())
                .and_then(|s| s.get("conditions")?.clone().try_cast::<rhai::Array>())
                .and_then(|conditions| {
                    conditions.into_iter().find_map(|c| {
                        let c = c.try_cast::<rhai::Map>()?;
                        (c.get("type")?.to_string() == condition)
                            .then(|| c.get("status").map(|s| s.to_string()))?
                    })
                })
                .and_then(|s| match s.as_str() {
                    "True" => Some(true),
                    "False" => Some(false),
                    _ => None,
                });
            (status, None)
        } else {
            let _ = snapshot;
            return Err(Stop::Unknown(format!(
                "{} is not an object with conditions",
                ctx.subject
            )));
        };
    match status {
        Some(actual) if actual == expect => Ok(Vec::new()),
        Some(actual) => Ok(vec![Failure {
            actual: format!("{condition} is {}", if actual { "True" } else { "False" }),
            expected: format!("{condition} is {}", if expect { "True" } else { "False" }),
            evidence: source.into_iter().collect(),
        }]),
        None => Err(Stop::Unknown(format!(
            "{} reports no {condition} condition (or Unknown)",
            ctx.subject
        ))),
    }
}
