//! What the rule packs say about a walked path: the hop checks of every
//! applicable pack at every hop, and the snapshot checks about the nodes and
//! pods the path went through.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Diagnosis, Finding, HopKind};
use crate::packs::{self, FindingStatus, HopScope, LoadedPacks, Severity, Subject};
use crate::snapshot::Snapshot;

pub(crate) fn pack_findings(
    diagnosis: &Diagnosis,
    snapshot: &Arc<Snapshot>,
    packs: &LoadedPacks,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut seen = HashSet::new();
    let mut keep = |finding: Finding, findings: &mut Vec<Finding>| {
        if seen.insert((
            finding.id.clone(),
            finding.hop.clone(),
            finding.message.clone(),
        )) {
            findings.push(finding);
        }
    };
    for index in diagnosis.graph.node_indices() {
        let hop = &diagnosis.graph[index];
        let Some(context) = &hop.context else {
            continue;
        };
        let scope = Arc::new(HopScope {
            snapshot: snapshot.clone(),
            netns: context.netns.clone(),
            in_iface: context.in_iface.clone(),
            out_iface: context.out_iface.clone(),
            forwarding: context.in_iface.is_some() && context.out_iface.is_some(),
            delivers_locally: context.delivered,
            packet: context.packet.clone(),
        });
        for finding in packs.evaluate_hop(&scope) {
            keep(convert(finding, &hop.id, index.index()), &mut findings);
        }
    }
    // Snapshot checks, about the nodes and pods on the path (and the packs themselves).
    for finding in packs.evaluate_snapshot(snapshot) {
        let hop = diagnosis.graph.node_indices().find(|&index| {
            let hop = &diagnosis.graph[index];
            match &finding.subject {
                Subject::Node { name } => hop.kind == HopKind::Node && &hop.id == name,
                Subject::Pod { namespace, name } => {
                    hop.kind == HopKind::Pod && hop.id == format!("{namespace}/{name}")
                }
                Subject::Pack { .. } => true,
                Subject::Object { .. } | Subject::Hop { .. } => false,
            }
        });
        if let Some(index) = hop {
            let id = diagnosis.graph[index].id.clone();
            keep(convert(finding, &id, index.index()), &mut findings);
        }
    }
    findings
}

/// A pack's finding as the diagnosis reports it. What a check could not
/// conclude (the snapshot cannot tell, or its script failed) is never as
/// severe as a failure: it is reported at most as a warning.
pub(crate) fn convert(finding: packs::Finding, hop: &str, hop_index: usize) -> Finding {
    let (severity, prefix) = match finding.status {
        FindingStatus::Failed => (finding.severity, ""),
        FindingStatus::Unknown => (finding.severity.min(Severity::Info), "cannot tell: "),
        FindingStatus::ScriptError => (
            finding.severity.min(Severity::Warning),
            "check failed to run: ",
        ),
    };
    let mut evidence: Vec<String> = finding.evidence.iter().map(ToString::to_string).collect();
    if let Some(remediation) = &finding.remediation {
        evidence.push(format!("remediation: {remediation}"));
    }
    Finding {
        id: finding.id,
        severity,
        hop: hop.to_string(),
        hop_index,
        message: format!("{prefix}{}", finding.message),
        evidence: evidence.join("; "),
        expected: finding.expected,
    }
}
