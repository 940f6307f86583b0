//! `skoop diff`: two matrices' answers compared flow by flow — the question
//! after an upgrade. A flow is the same flow on both sides when its source,
//! destination, protocol and family are; it changed when its verdict or its
//! disposition did.

use std::collections::HashMap;

use crate::report::matrix::{
    Change, DiffReport, FlowChange, FlowOut, MATRIX_SCHEMA_VERSION, MatrixReport,
};

/// Every flow of `after` whose answer differs from `before`'s, in `after`'s
/// order, and the flows only one side has.
pub fn diff(before: &MatrixReport, after: &MatrixReport) -> DiffReport {
    let (before_flows, after_flows) = (
        with_families(&before.flows, &after.flows),
        with_families(&after.flows, &before.flows),
    );
    let earlier: HashMap<_, &FlowOut> = before_flows.iter().map(|f| (f.key(), f)).collect();
    let later: HashMap<_, &FlowOut> = after_flows.iter().map(|f| (f.key(), f)).collect();
    let mut changed = Vec::new();
    let mut only_after = Vec::new();
    let mut unchanged = 0;
    for flow in &after_flows {
        let Some(old) = earlier.get(&flow.key()) else {
            only_after.push(flow.clone());
            continue;
        };
        if (old.verdict, &old.disposition) == (flow.verdict, &flow.disposition) {
            unchanged += 1;
            continue;
        }
        changed.push(change(old, flow));
    }
    let only_before = before_flows
        .iter()
        .filter(|f| !later.contains_key(&f.key()))
        .cloned()
        .collect();
    DiffReport {
        schema_version: MATRIX_SCHEMA_VERSION,
        before: before.snapshot.clone(),
        after: after.snapshot.clone(),
        changed,
        only_before,
        only_after,
        unchanged,
    }
}

/// `flows`, where one was saved without its family (by a matrix from
/// before flows carried it, when a flow was asked in its destination's first
/// family alone), with the family of `other`'s first flow of the same
/// source, destination and protocol.
fn with_families(flows: &[FlowOut], other: &[FlowOut]) -> Vec<FlowOut> {
    let mut first_family = HashMap::new();
    for flow in other {
        if let Some(family) = &flow.family {
            first_family
                .entry((&flow.from, &flow.to, &flow.protocol))
                .or_insert(family);
        }
    }
    flows
        .iter()
        .map(|flow| {
            let mut flow = flow.clone();
            if flow.family.is_none() {
                flow.family = first_family
                    .get(&(&flow.from, &flow.to, &flow.protocol))
                    .map(|family| (*family).clone());
            }
            flow
        })
        .collect()
}

/// A flow whose answer went from `old` to `new`, and the finding that made
/// the difference.
fn change(old: &FlowOut, new: &FlowOut) -> FlowChange {
    let change = Change::between(old.verdict, new.verdict);
    let cause = match change {
        Change::Fixed | Change::Cleared => &old.finding,
        Change::Broke | Change::Flagged | Change::Changed => &new.finding,
    };
    FlowChange {
        from: new.from.clone(),
        to: new.to.clone(),
        protocol: new.protocol.clone(),
        family: new.family.clone(),
        change,
        before: old.clone(),
        after: new.clone(),
        cause: cause.clone().or_else(|| new.finding.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::codes;
    use crate::report::matrix::{CauseOut, FlowVerdict};

    fn flow(to: &str, verdict: FlowVerdict, disposition: &str, finding: Option<&str>) -> FlowOut {
        FlowOut {
            from: "default/web-0".into(),
            to: to.into(),
            protocol: "tcp".into(),
            family: Some("IPv4".into()),
            verdict,
            disposition: Some(disposition.into()),
            assumed: false,
            paths: 1,
            failing_paths: usize::from(verdict != FlowVerdict::Succeeds),
            finding: finding.map(|id| CauseOut {
                id: id.into(),
                severity: "critical".into(),
                hop: "node-1".into(),
                message: String::new(),
                evidence: String::new(),
            }),
            error: None,
            confirmation: None,
        }
    }

    fn matrix(name: &str, flows: Vec<FlowOut>) -> MatrixReport {
        MatrixReport::new(name.into(), flows)
    }

    #[test]
    fn diff_names_broken_fixed_and_one_sided_flows_with_their_cause() {
        let ok = FlowVerdict::Succeeds;
        let bad = FlowVerdict::NotDelivered;
        let before = matrix(
            "a",
            vec![
                flow("default/web-2:8080", ok, "delivered", None),
                flow(
                    "default/web-3:8080",
                    bad,
                    "no_route",
                    Some(codes::KERNEL_ROUTE_NONE.id),
                ),
                flow("default/gone:8080", ok, "delivered", None),
                flow("default/same:8080", ok, "delivered", None),
            ],
        );
        let after = matrix(
            "b",
            vec![
                flow(
                    "default/web-2:8080",
                    bad,
                    "neighbor_failed",
                    Some(codes::KERNEL_FDB_MISSING.id),
                ),
                flow("default/web-3:8080", ok, "delivered", None),
                flow("default/same:8080", ok, "delivered", None),
                flow("default/new:8080", ok, "delivered", None),
            ],
        );
        let report = diff(&before, &after);
        let changes: Vec<(&str, &str, Option<&str>)> = report
            .changed
            .iter()
            .map(|c| {
                (
                    c.to.as_str(),
                    c.change.as_str(),
                    c.cause.as_ref().map(|f| f.id.as_str()),
                )
            })
            .collect();
        assert_eq!(
            changes,
            [
                (
                    "default/web-2:8080",
                    "broke",
                    Some(codes::KERNEL_FDB_MISSING.id)
                ),
                (
                    "default/web-3:8080",
                    "fixed",
                    Some(codes::KERNEL_ROUTE_NONE.id)
                ),
            ]
        );
        assert_eq!(report.only_before[0].to, "default/gone:8080");
        assert_eq!(report.only_after[0].to, "default/new:8080");
        assert_eq!(report.unchanged, 1);
    }

    #[test]
    fn a_delivered_flow_gaining_a_severe_finding_is_flagged_by_it() {
        let ok = FlowVerdict::Succeeds;
        let marred = FlowVerdict::DeliveredWithSevereFindings;
        let before = matrix("a", vec![flow("x", ok, "delivered", None)]);
        let after = matrix(
            "b",
            vec![flow("x", marred, "delivered", Some("flannel.vxlan.fdb"))],
        );
        let report = diff(&before, &after);
        assert_eq!(report.changed[0].change, Change::Flagged);
        assert_eq!(
            report.changed[0].cause.as_ref().map(|c| c.id.as_str()),
            Some("flannel.vxlan.fdb")
        );
        let back = diff(&after, &before);
        assert_eq!(back.changed[0].change, Change::Cleared);
        assert_eq!(
            back.changed[0].cause.as_ref().map(|c| c.id.as_str()),
            Some("flannel.vxlan.fdb")
        );
    }

    #[test]
    fn another_disposition_of_a_failing_flow_is_a_change() {
        let bad = FlowVerdict::NotDelivered;
        let before = matrix(
            "a",
            vec![flow(
                "x",
                bad,
                "no_route",
                Some(codes::KERNEL_ROUTE_NONE.id),
            )],
        );
        let after = matrix(
            "b",
            vec![flow(
                "x",
                bad,
                "denied_by_netfilter",
                Some(codes::KERNEL_NETFILTER_DENIED.id),
            )],
        );
        let report = diff(&before, &after);
        assert_eq!(report.changed.len(), 1);
        assert_eq!(report.changed[0].change, Change::Changed);
        assert_eq!(
            report.changed[0].cause.as_ref().map(|c| c.id.as_str()),
            Some(codes::KERNEL_NETFILTER_DENIED.id)
        );
    }

    #[test]
    fn a_flow_is_the_same_flow_in_its_own_family_only() {
        let ok = FlowVerdict::Succeeds;
        let bad = FlowVerdict::NotDelivered;
        let in_family = |family: Option<&str>, verdict, disposition| FlowOut {
            family: family.map(str::to_owned),
            ..flow("default/web-3:8080", verdict, disposition, None)
        };
        let before = matrix(
            "a",
            vec![
                in_family(Some("IPv4"), ok, "delivered"),
                in_family(Some("IPv6"), ok, "delivered"),
            ],
        );
        let after = matrix(
            "b",
            vec![
                in_family(Some("IPv4"), ok, "delivered"),
                in_family(Some("IPv6"), bad, "no_route"),
            ],
        );
        let report = diff(&before, &after);
        assert_eq!(report.unchanged, 1);
        assert_eq!(report.changed.len(), 1);
        assert_eq!(report.changed[0].family.as_deref(), Some("IPv6"));
        assert_eq!(report.changed[0].change, Change::Broke);

        // A matrix saved before flows carried their family asked each pair
        // in its destination's first family: its flow is that one.
        let saved = matrix("old", vec![in_family(None, ok, "delivered")]);
        let report = diff(&saved, &after);
        assert_eq!(report.unchanged, 1);
        assert!(report.changed.is_empty() && report.only_before.is_empty());
        assert_eq!(report.only_after.len(), 1);
        assert_eq!(report.only_after[0].family.as_deref(), Some("IPv6"));
    }
}
