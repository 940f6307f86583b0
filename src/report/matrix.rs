//! The JSON contract of `skoop matrix -o json` and `skoop diff -o json`
//! (`docs/matrix.md`): plain output types, read back by `skoop diff` (a
//! matrix saved yesterday is one side of today's comparison), so they
//! deserialize too. Fields are only ever added; `schema_version` changes
//! when one changes meaning or goes.

use serde::{Deserialize, Serialize};

use crate::confirm::Confirmation;
use crate::diagnostic::evidence_text;
use crate::engine::{Diagnosis, Finding, Protocol, Severity, Verdict};
use crate::net::Family;

/// The version of this contract.
pub const MATRIX_SCHEMA_VERSION: u32 = 1;

/// Every flow of a matrix and what stops how many of them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixReport {
    pub schema_version: u32,
    /// The snapshot directory the flows were diagnosed on.
    pub snapshot: String,
    pub counts: Counts,
    /// What stops (or, for a flow delivered all the same, mars) the flows,
    /// the most flows first.
    pub causes: Vec<CauseCount>,
    /// The sources answered by one diagnosis (`docs/matrix.md`, "Twins"):
    /// each class of twins and how many flows its first source's answers
    /// stand for. Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub twins: Vec<TwinsOut>,
    /// Every flow, sources in the order selected, each source's
    /// destinations in the order selected.
    pub flows: Vec<FlowOut>,
}

/// Sources that nothing a diagnosis reads tells apart: the flows of the
/// others are answered by the first's, the source renamed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwinsOut {
    /// The first is the one whose flows were diagnosed.
    pub sources: Vec<String>,
    /// How many flows of the others its answers stand for (the rest were
    /// diagnosed on their own: their answers name their source).
    pub flows: usize,
}

/// How many flows end each way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub flows: usize,
    /// Verdict `succeeds`.
    pub succeed: usize,
    /// Verdict `not_delivered`.
    pub not_delivered: usize,
    /// Verdict `delivered_with_severe_findings`.
    pub delivered_with_severe_findings: usize,
    /// Flows `diagnose` refuses (verdict `error`).
    pub errors: usize,
}

/// One flow: the question `skoop diagnose --from FROM --to TO --protocol
/// PROTOCOL --family FAMILY` asks, and its answer in brief.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowOut {
    pub from: String,
    pub to: String,
    pub protocol: String,
    /// The family the flow was asked in (`IPv4`, `IPv6`); absent for a
    /// flow refused before its family was known, and in a matrix saved
    /// before flows carried it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    pub verdict: FlowVerdict,
    /// As `diagnose -o json`'s `disposition`; `null` for an error.
    pub disposition: Option<String>,
    pub assumed: bool,
    /// How many paths the flow has, and how many of them fail.
    pub paths: usize,
    pub failing_paths: usize,
    /// Its first finding: what stops its deciding failing path (the most
    /// severe finding at the hop where it stops), else its most severe
    /// critical or fatal finding; `null` for a flow that succeeds.
    pub finding: Option<CauseOut>,
    /// Why `diagnose` refuses the flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `matrix --confirm`, for the flows it sent: the kernel's answer
    /// beside the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<FlowConfirmation>,
}

/// `matrix --confirm`'s answer for one flow: `diagnose --confirm`'s
/// `confirmation` in brief.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowConfirmation {
    /// As `diagnose`'s `confirmation.kernel`.
    pub kernel: String,
    /// `null` where the kernel's answer is unknown.
    pub agree: Option<bool>,
    /// Where the counters show the packet stopping.
    #[serde(default)]
    pub stopped_at: Option<String>,
    /// Why they disagree, or what is unknown.
    #[serde(default)]
    pub why: Option<String>,
}

impl FlowConfirmation {
    pub fn new(confirmation: &Confirmation) -> FlowConfirmation {
        FlowConfirmation {
            kernel: confirmation.kernel.as_str().to_string(),
            agree: confirmation.agree,
            stopped_at: confirmation.stopped_at.as_ref().map(ToString::to_string),
            why: confirmation.why.clone(),
        }
    }
}

impl FlowOut {
    /// What identifies the flow from one matrix to the next.
    pub fn key(&self) -> (&str, &str, &str, Option<&str>) {
        (&self.from, &self.to, &self.protocol, self.family.as_deref())
    }

    /// How the reports name what the flow carries: `tcp`, or `tcp, IPv6`
    /// for an IPv6 flow (IPv4 goes unsaid, as it did before flows had a
    /// family).
    pub fn carried(&self) -> String {
        match self.family.as_deref() {
            Some(family) if family != Family::Ipv4.to_string() => {
                format!("{}, {family}", self.protocol)
            }
            _ => self.protocol.clone(),
        }
    }
}

/// A flow's verdict: `diagnose`'s (its exit status 0, 3, 1), or that
/// `diagnose` refuses it (2). Ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowVerdict {
    Succeeds,
    DeliveredWithSevereFindings,
    NotDelivered,
    Error,
}

impl From<Verdict> for FlowVerdict {
    fn from(verdict: Verdict) -> FlowVerdict {
        match verdict {
            Verdict::Succeeds => FlowVerdict::Succeeds,
            Verdict::DeliveredWithSevereFindings => FlowVerdict::DeliveredWithSevereFindings,
            Verdict::NotDelivered => FlowVerdict::NotDelivered,
        }
    }
}

impl FlowVerdict {
    /// As the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowVerdict::Succeeds => "succeeds",
            FlowVerdict::DeliveredWithSevereFindings => "delivered_with_severe_findings",
            FlowVerdict::NotDelivered => "not_delivered",
            FlowVerdict::Error => "error",
        }
    }
}

/// A finding as a matrix names it (`diagnose -o json`'s finding, less what
/// is expected).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CauseOut {
    pub id: String,
    pub severity: String,
    pub hop: String,
    pub message: String,
    pub evidence: String,
}

/// A cause (a finding id at a hop) and how many flows it is the first
/// finding of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CauseCount {
    pub id: String,
    pub severity: String,
    pub hop: String,
    /// The message of the first flow's finding (others may name other
    /// addresses).
    pub message: String,
    pub flows: usize,
}

/// `skoop diff A B`: every flow whose verdict changed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiffReport {
    pub schema_version: u32,
    /// The two sides, as given.
    pub before: String,
    pub after: String,
    /// Flows in both whose verdict or disposition differs, in the after
    /// side's order.
    pub changed: Vec<FlowChange>,
    /// Flows only one side has (a pod or a service that came or went).
    pub only_before: Vec<FlowOut>,
    pub only_after: Vec<FlowOut>,
    /// Flows in both with the same verdict and disposition.
    pub unchanged: usize,
}

/// How a flow's answer changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// It was delivered before and is not now.
    Broke,
    /// It is delivered now and was not before.
    Fixed,
    /// Still delivered, but now with a critical or fatal finding.
    Flagged,
    /// Still delivered, and its critical or fatal findings are gone.
    Cleared,
    /// Neither delivered before nor now, but ending another way (another
    /// disposition, refused by diagnose on one side).
    Changed,
}

impl Change {
    /// How a flow went from verdict `before` to `after` (which differ, or
    /// whose dispositions do).
    pub fn between(before: FlowVerdict, after: FlowVerdict) -> Change {
        let delivered = |v| {
            matches!(
                v,
                FlowVerdict::Succeeds | FlowVerdict::DeliveredWithSevereFindings
            )
        };
        match (delivered(before), delivered(after)) {
            (true, false) => Change::Broke,
            (false, true) => Change::Fixed,
            (false, false) => Change::Changed,
            (true, true) if after == FlowVerdict::DeliveredWithSevereFindings => Change::Flagged,
            (true, true) => Change::Cleared,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Change::Broke => "broke",
            Change::Fixed => "fixed",
            Change::Flagged => "flagged",
            Change::Cleared => "cleared",
            Change::Changed => "changed",
        }
    }
}

/// A flow whose answer changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowChange {
    pub from: String,
    pub to: String,
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    pub change: Change,
    pub before: FlowOut,
    pub after: FlowOut,
    /// The finding that made the difference: the before side's for a flow
    /// fixed or cleared, else the after side's.
    pub cause: Option<CauseOut>,
}

impl FlowOut {
    /// A flow's answer in brief.
    pub fn new(from: String, to: String, protocol: Protocol, diagnosis: &Diagnosis) -> FlowOut {
        let verdict = diagnosis.verdict();
        FlowOut {
            from,
            to,
            protocol: protocol.as_str().to_owned(),
            family: Some(Family::of(diagnosis.request.dst).to_string()),
            verdict: verdict.into(),
            disposition: Some(diagnosis.disposition().as_str().to_owned()),
            assumed: diagnosis.assumed(),
            paths: diagnosis.paths.len(),
            failing_paths: diagnosis.paths.iter().filter(|p| !p.succeeds()).count(),
            finding: first_finding(diagnosis, verdict).map(CauseOut::new),
            error: None,
            confirmation: None,
        }
    }

    /// A flow `diagnose` refuses, with why (and the family it was asked
    /// in, where one was given).
    pub fn refused(
        from: String,
        to: String,
        protocol: Protocol,
        family: Option<Family>,
        error: String,
    ) -> FlowOut {
        FlowOut {
            from,
            to,
            protocol: protocol.as_str().to_owned(),
            family: family.map(|family| family.to_string()),
            verdict: FlowVerdict::Error,
            disposition: None,
            assumed: false,
            paths: 0,
            failing_paths: 0,
            finding: None,
            error: Some(error),
            confirmation: None,
        }
    }
}

/// The finding a flow is summed up by (see [`FlowOut::finding`]).
fn first_finding(diagnosis: &Diagnosis, verdict: Verdict) -> Option<&Finding> {
    // The most severe of some findings, the first of equals.
    fn most_severe<'d>(findings: impl Iterator<Item = &'d Finding>) -> Option<&'d Finding> {
        findings.fold(None, |best: Option<&Finding>, f| match best {
            Some(b) if b.severity >= f.severity => Some(b),
            _ => Some(f),
        })
    }
    let severe =
        || most_severe(diagnosis.findings.iter()).filter(|f| f.severity >= Severity::Critical);
    match verdict {
        Verdict::Succeeds => None,
        Verdict::DeliveredWithSevereFindings => severe(),
        Verdict::NotDelivered => {
            let stop = diagnosis
                .deciding_path(|p| !p.succeeds())
                .and_then(|p| diagnosis.stop_hop(p));
            stop.and_then(|hop| {
                most_severe(
                    diagnosis
                        .findings
                        .iter()
                        .filter(|f| f.about.hop_index == hop),
                )
            })
            .or_else(|| most_severe(diagnosis.findings.iter()))
        }
    }
}

impl CauseOut {
    fn new(finding: &Finding) -> CauseOut {
        CauseOut {
            id: finding.id.to_string(),
            severity: finding.severity.as_str().to_owned(),
            hop: finding.about.hop.to_string(),
            message: finding.message.clone(),
            evidence: evidence_text(&finding.evidence),
        }
    }
}

impl MatrixReport {
    /// The flows' answers, counted and grouped by cause.
    pub fn new(snapshot: String, flows: Vec<FlowOut>) -> MatrixReport {
        let mut counts = Counts {
            flows: flows.len(),
            ..Counts::default()
        };
        let mut causes: Vec<CauseCount> = Vec::new();
        for flow in &flows {
            *match flow.verdict {
                FlowVerdict::Succeeds => &mut counts.succeed,
                FlowVerdict::NotDelivered => &mut counts.not_delivered,
                FlowVerdict::DeliveredWithSevereFindings => {
                    &mut counts.delivered_with_severe_findings
                }
                FlowVerdict::Error => &mut counts.errors,
            } += 1;
            let Some(finding) = &flow.finding else {
                continue;
            };
            match causes
                .iter_mut()
                .find(|c| (&c.id, &c.hop) == (&finding.id, &finding.hop))
            {
                Some(cause) => cause.flows += 1,
                None => causes.push(CauseCount {
                    id: finding.id.to_string(),
                    severity: finding.severity.clone(),
                    hop: finding.hop.clone(),
                    message: finding.message.clone(),
                    flows: 1,
                }),
            }
        }
        // The most flows first; a stable sort keeps equals in flow order.
        causes.sort_by_key(|cause| std::cmp::Reverse(cause.flows));
        MatrixReport {
            schema_version: MATRIX_SCHEMA_VERSION,
            snapshot,
            counts,
            causes,
            twins: Vec::new(),
            flows,
        }
    }
}
