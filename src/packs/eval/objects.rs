//! The kinds about the cluster's objects, whatever the namespace dumps
//! say: `within` (an address or network lies within one of a set of
//! networks: a pod's IP in a pool, a node's pod CIDR in the cluster
//! network), `ready_pod` (a node's agent runs there, Ready) and
//! `annotation` (a Node's or Pod's annotation and its value).

use ipnet::IpNet;

use super::{Evaluator, Failure, Outcome, Stop};
use crate::diagnostic::Evidence;
use crate::packs::host::display;
use crate::packs::model::Value;
use crate::packs::scope::{Context, NodeRef};
use crate::snapshot::cluster::pod_reads::{self, PodRead};

impl Evaluator<'_> {
    pub(super) fn within(&self, value: &Value, networks: &Value, ctx: &Context) -> Outcome {
        let values = self.networks(value, ctx)?;
        let networks = self.networks(networks, ctx)?;
        if networks.is_empty() {
            return Ok(Vec::new());
        }
        let listed: Vec<String> = networks.iter().map(ToString::to_string).collect();
        // The object the value is read from, where it is a Pod or a Node.
        let evidence: Vec<Evidence> = match (&ctx.pod, &ctx.node) {
            (Some(pod), _) => pod.get().map(|pod| pod.meta.source.evidence()),
            (None, Some(node)) => node.get().map(|node| node.meta.source.evidence()),
            (None, None) => None,
        }
        .into_iter()
        .collect();
        Ok(values
            .into_iter()
            .filter(|value| !networks.iter().any(|net| net.contains(value)))
            .map(|value| Failure {
                actual: format!("{} is in none of {}", shown(value), listed.join(", ")),
                expected: format!("{} within {}", shown(value), listed.join(" or ")),
                evidence: evidence.clone(),
            })
            .collect())
    }

    /// The networks (an address is its host prefix) a value holds: one, a
    /// list of them, or none for `()`.
    fn networks(&self, value: &Value, ctx: &Context) -> Result<Vec<IpNet>, Stop> {
        self.items(value, ctx)?
            .iter()
            .map(|item| {
                let text = display(item);
                text.parse::<IpNet>()
                    .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        Stop::Unknown(format!(
                            "{:?} gave {text:?}, which is no network",
                            value.source
                        ))
                    })
            })
            .collect()
    }
}

impl Evaluator<'_> {
    pub(super) fn ready_pod(&self, label: &Value, ctx: &Context) -> Outcome {
        let label = self.required_text(label, ctx)?;
        let Some((key, wanted)) = label.split_once('=') else {
            return Err(Stop::Unknown(format!("label {label:?} is not KEY=VALUE")));
        };
        let node = ctx
            .node
            .as_ref()
            .and_then(NodeRef::get)
            .ok_or_else(|| Stop::Unknown(format!("{} is no node", ctx.subject)))?;
        let name = &node.meta.name;
        let expected = format!("a Ready pod labelled {label} on {name}");
        pod_reads::record(|| PodRead::Labelled {
            key: key.to_owned(),
            value: wanted.to_owned(),
        });
        let here: Vec<_> = ctx
            .snapshot
            .cluster
            .pods_on(name)
            .filter(|pod| pod.meta.labels.get(key).is_some_and(|v| v == wanted))
            .collect();
        if here.iter().any(|pod| pod.ready == Some(true)) {
            return Ok(Vec::new());
        }
        let failure = match here.first() {
            None => Failure {
                actual: format!("no pod labelled {label} runs on {name}"),
                expected,
                evidence: vec![node.meta.source.evidence()],
            },
            Some(pod) => Failure {
                actual: format!(
                    "{}/{} on {name} is not Ready ({})",
                    pod.meta.namespace,
                    pod.meta.name,
                    pod.phase
                        .as_ref()
                        .map_or("no phase", |phase| phase.as_str())
                ),
                expected,
                evidence: vec![pod.meta.source.evidence()],
            },
        };
        Ok(vec![failure])
    }
}

impl Evaluator<'_> {
    pub(super) fn annotation(&self, key: &Value, expect: Option<&Value>, ctx: &Context) -> Outcome {
        let key = self.required_text(key, ctx)?;
        let expect = self.optional_text(expect, ctx)?;
        let meta = match (&ctx.pod, &ctx.node) {
            (Some(pod), _) => pod.get().map(|pod| &pod.meta),
            (None, Some(node)) => node.get().map(|node| &node.meta),
            (None, None) => None,
        }
        .ok_or_else(|| Stop::Unknown(format!("{} is neither a Node nor a Pod", ctx.subject)))?;
        let expected = match &expect {
            Some(value) => format!("annotation {key}: {value}"),
            None => format!("annotation {key}"),
        };
        let actual = match (meta.annotations.get(&key), &expect) {
            (None, _) => format!("no annotation {key}"),
            (Some(found), Some(value)) if found != value => format!("annotation {key}: {found}"),
            (Some(_), _) => return Ok(Vec::new()),
        };
        Ok(vec![Failure {
            actual,
            expected,
            evidence: vec![meta.source.evidence()],
        }])
    }
}

/// An address as written, a network with its prefix.
fn shown(net: IpNet) -> String {
    if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
    }
}
