//! The text reports, as lines: `skoop diagnose`'s (the verdict, which
//! backends fail, one line per path, then the findings, each said once),
//! `skoop matrix`'s and `skoop diff`'s. A diagnosis's is built from the
//! diagnosis as [`Report::new`](super::json::Report::new) builds the JSON
//! report, with its helpers (`finding_paths`, `link_kind`): the text says
//! what the JSON types do not carry (the pack that stood in for a
//! namespace, unrounded shares). A matrix's and a diff's are built from
//! their JSON types. Lines are returned as they are: escaping them for a
//! terminal is the command line's job.

use petgraph::graph::NodeIndex;

use crate::confirm::Confirmation;
use crate::diagnostic::evidence_text;
use crate::engine::{Diagnosis, Disposition, Finding, HopId, HopKind, PathResult, Severity, Step};
use crate::report::json::{finding_paths, link_kind};
use crate::report::matrix::{DiffReport, FlowConfirmation, FlowOut, FlowVerdict, MatrixReport};
use crate::report::picture::{Share, assumed_mark, shares};

/// How much of each path the text report shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Detail {
    /// One line per path: its backend, disposition and where it stops.
    Paths,
    /// Every hop of every path, and its steps (`--detail`).
    Hops,
    /// Every step with its packet, rules and tables too (`-v`).
    Packets,
}

/// `skoop diagnose`'s report, line by line (an empty string is an empty
/// line).
pub fn diagnosis(diagnosis: &Diagnosis, detail: Detail) -> Vec<String> {
    let shares = path_shares(diagnosis);
    let mut lines = verdict_lines(diagnosis, &shares);
    if detail == Detail::Paths && !diagnosis.paths.is_empty() {
        lines.push(String::new());
    }
    for (index, path) in diagnosis.paths.iter().enumerate() {
        if detail > Detail::Paths {
            lines.push(String::new());
        }
        lines.push(path_line(diagnosis, index, shares[index]));
        if detail > Detail::Paths {
            lines.extend(hop_lines(diagnosis, path, detail == Detail::Packets));
        }
    }
    lines.extend(findings_lines(diagnosis, &diagnosis.findings, "findings:"));
    lines.extend(findings_lines(
        diagnosis,
        &diagnosis.off_path,
        "also on these nodes (not about this flow's paths):",
    ));
    lines
}

/// `--confirm`'s answer: what was sent and what the kernel did, whether
/// the model agrees, and the counters that moved, hop by hop.
pub fn confirmation(confirmation: &Confirmation) -> Vec<String> {
    let from = (confirmation.from.as_ref())
        .map(|hop| format!(" sent from {hop}"))
        .unwrap_or_default();
    let kernel = match confirmation.kernel.detail() {
        Some(detail) => format!("{} ({detail})", confirmation.kernel.as_str()),
        None => confirmation.kernel.as_str().to_string(),
    };
    let mut lines = vec![
        String::new(),
        format!("confirmed with the kernel: {}{from}", confirmation.probe),
        format!("  kernel: {kernel}; model: {}", confirmation.model.as_str()),
    ];
    lines.push(match (confirmation.agree, &confirmation.why) {
        (Some(true), _) => "  the model and the kernel agree".to_string(),
        (Some(false), Some(why)) => format!("  the model and the kernel DISAGREE: {why}"),
        (Some(false), None) => "  the model and the kernel DISAGREE".to_string(),
        (None, Some(why)) => format!("  agreement unknown: {why}"),
        (None, None) => "  agreement unknown".to_string(),
    });
    let mut hops: Vec<&HopId> = Vec::new();
    for moved in &confirmation.counters {
        if !hops.contains(&&moved.hop) {
            hops.push(&moved.hop);
        }
    }
    if !hops.is_empty() {
        lines.push("  counters during the probe:".to_string());
    }
    for hop in hops {
        lines.push(format!("    {hop}:"));
        for moved in confirmation.counters.iter().filter(|m| &m.hop == hop) {
            lines.push(format!("      {}", moved.describe()));
        }
    }
    match confirmation.drops.as_deref() {
        Some([]) => lines.push("  the kernels traced no drop during the probe".to_string()),
        Some(drops) => {
            lines.push("  drops the kernels traced during the probe (skb:kfree_skb):".to_string());
            lines.extend(drops.iter().map(|seen| format!("    {}", seen.describe())));
        }
        None => {}
    }
    for (hop, why) in &confirmation.unread {
        lines.push(format!("  not read at {hop}: {why}"));
    }
    if let Some(hop) = &confirmation.stopped_at {
        lines.push(format!("  the counters show the packet stopping at {hop}"));
    }
    if confirmation.agree == Some(false) {
        lines.push(
            "  something changed since the snapshot was collected, or the model is wrong there: \
             collect again (a live diagnosis does) and compare"
                .to_string(),
        );
    }
    lines
}

/// Each path's share of the flows.
fn path_shares(diagnosis: &Diagnosis) -> Vec<Share> {
    let probabilities: Vec<f64> = diagnosis.paths.iter().map(|p| p.probability).collect();
    shares(&probabilities)
}

/// The verdict, then what stood in for missing namespaces and which paths
/// fail.
fn verdict_lines(diagnosis: &Diagnosis, shares: &[Share]) -> Vec<String> {
    let mut lines = vec![format!(
        "{}: {}{}{}{}",
        diagnosis.request,
        diagnosis.disposition(),
        exit_note(diagnosis),
        assumed_mark(diagnosis.assumed()),
        severity_note(diagnosis)
    )];
    if !diagnosis.packs.is_empty() {
        lines.push(format!("  packs: {}", diagnosis.packs.join(", ")));
    }
    if let Some(pack) = &diagnosis.assumed_by {
        lines.push(format!(
            "  assumed: the snapshot has no dump of {}; pack {pack}'s intent stands in there",
            assumed_namespaces(diagnosis)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(summary) = failing_summary(diagnosis, shares) {
        lines.push(format!("  {summary}"));
    }
    lines
}

/// The hops stepped over with a pack's intent, each namespace once, in the
/// order the walk first met them.
fn assumed_namespaces(diagnosis: &Diagnosis) -> Vec<&HopId> {
    let mut namespaces: Vec<&HopId> = Vec::new();
    for hop in diagnosis.graph.node_weights().filter(|hop| hop.assumed) {
        if !namespaces.contains(&&hop.id) {
            namespaces.push(&hop.id);
        }
    }
    namespaces
}

/// A path in one line: its share, backend, disposition and where it stops.
fn path_line(diagnosis: &Diagnosis, index: usize, share: Share) -> String {
    let path = &diagnosis.paths[index];
    let to = path
        .backend
        .as_ref()
        .map(|backend| format!(" to {backend}"))
        .unwrap_or_default();
    // A path out of the cluster to an address outside it ends as it should.
    let stops = match diagnosis.stop_hop(path) {
        Some(_) if path.exit.is_some() => String::new(),
        Some(stop) => format!(" at {}", diagnosis.hop(stop).id),
        None => String::new(),
    };
    let entry = diagnosis
        .entry(path)
        .map(|node| format!(" entering at {node}"))
        .unwrap_or_default();
    format!(
        "path {} of {} ({share} of flows){entry}{to}: {}{}{stops}",
        index + 1,
        diagnosis.paths.len(),
        path.disposition,
        assumed_mark(path.assumed)
    )
}

/// Each hop of a path with its steps, and the link into it; `verbose`: with
/// the packet on each link and step, and each route's rule.
fn hop_lines(diagnosis: &Diagnosis, path: &PathResult, verbose: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let mut previous: Option<usize> = None;
    for &index in &path.hops {
        if let Some(from) = previous {
            lines.extend(link_line(diagnosis, from, index, verbose));
        }
        previous = Some(index);
        let hop = diagnosis.hop(index);
        let what = match hop.id.kind() {
            HopKind::Pod => format!("pod on {}", hop.node.as_deref().unwrap_or("?")),
            HopKind::Node => "node".to_string(),
            HopKind::External => "outside the cluster".to_string(),
        };
        lines.push(format!(
            "  {} [{what}]{}",
            hop.id,
            assumed_mark(hop.assumed)
        ));
        for step in &hop.steps {
            // In an assumed hop every step is: the hop says so once.
            let mark = assumed_mark(step.assumed && !hop.assumed);
            lines.push(format!("      {}{mark}", step_line(&step.step, verbose)));
        }
    }
    lines
}

/// The link from hop `from` to hop `to`, where the graph has one.
fn link_line(diagnosis: &Diagnosis, from: usize, to: usize, verbose: bool) -> Option<String> {
    let edge = diagnosis
        .graph
        .find_edge(NodeIndex::new(from), NodeIndex::new(to))?;
    let link = &diagnosis.graph[edge];
    let to = link.to_interface.as_deref().unwrap_or("");
    let kind = link_kind(link.kind);
    Some(if verbose {
        format!(
            "   | {kind} {} -> {to}: {}",
            link.from_interface, link.packet
        )
    } else {
        format!("   | {kind} {} -> {to}", link.from_interface)
    })
}

/// `findings` under `heading`, each said once with the paths it is about.
fn findings_lines(diagnosis: &Diagnosis, findings: &[Finding], heading: &str) -> Vec<String> {
    let said = said_findings(diagnosis, findings);
    if said.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![String::new(), heading.to_string()];
    for said in &said {
        lines.extend(finding_lines(said, diagnosis.paths.len()));
    }
    lines
}

/// A finding with its evidence and remediation; `count` paths in all.
fn finding_lines(Said { finding, paths }: &Said, count: usize) -> Vec<String> {
    // Which paths, where it is about some of several.
    let which = match paths.as_slice() {
        [] => String::new(),
        _ if count < 2 || paths.len() == count => String::new(),
        [one] => format!(" (path {one})"),
        many => {
            let numbers: Vec<String> = many.iter().map(usize::to_string).collect();
            format!(" (paths {})", numbers.join(", "))
        }
    };
    let mut lines = vec![format!(
        "  {} {} at {}{which}: {}{}",
        finding.severity.as_str(),
        finding.id,
        finding.about.hop,
        finding.status.prefix(),
        finding.message
    )];
    // An object's check that cannot tell has no file to point at.
    if !finding.evidence.is_empty() {
        lines.push(format!(
            "      evidence: {}",
            evidence_text(&finding.evidence)
        ));
    }
    if let Some(expected) = &finding.expected {
        lines.push(format!("      expected: {expected}"));
    }
    if let Some(remediation) = &finding.remediation {
        lines.push(format!("      remediation: {remediation}"));
    }
    lines
}

/// A finding as the text report says it: once, with the paths (numbered
/// from 1) it is about. The walker records a stop on every path it ends, so
/// that paths forked from one hop repeat it word for word: those are one
/// finding about all their paths (`finding_paths` of each).
struct Said<'d> {
    finding: &'d Finding,
    paths: Vec<usize>,
}

/// Each distinct finding of `findings` once, in their order.
fn said_findings<'d>(diagnosis: &Diagnosis, findings: &'d [Finding]) -> Vec<Said<'d>> {
    let mut said: Vec<Said> = Vec::new();
    for finding in findings {
        let paths = finding_paths(diagnosis, finding)
            .into_iter()
            .map(|index| index + 1)
            .collect();
        // The same finding at the same hop id, wherever on the graph.
        let same = |s: &&mut Said| {
            s.finding.about.hop == finding.about.hop
                && s.finding.clone().about(()) == finding.clone().about(())
        };
        match said.iter_mut().find(same) {
            Some(earlier) => {
                earlier.paths.extend(paths);
                earlier.paths.sort_unstable();
                earlier.paths.dedup();
            }
            None => said.push(Said { finding, paths }),
        }
    }
    said
}

/// How many distinct fatal and critical findings the diagnosis has.
fn severe_findings(diagnosis: &Diagnosis) -> (usize, usize) {
    let said = said_findings(diagnosis, &diagnosis.findings);
    let count = |severity| {
        said.iter()
            .filter(|s| s.finding.severity == severity)
            .count()
    };
    (count(Severity::Fatal), count(Severity::Critical))
}

/// What the verdict adds about fatal and critical findings: a delivered
/// flow with one is not healthy (exit status 3), and says so at once.
fn severity_note(diagnosis: &Diagnosis) -> String {
    let (fatal, critical) = severe_findings(diagnosis);
    let counts: Vec<String> = [(fatal, "fatal"), (critical, "critical")]
        .into_iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, severity)| format!("{count} {severity}"))
        .collect();
    if counts.is_empty() {
        return String::new();
    }
    let noun = if fatal + critical == 1 {
        "finding"
    } else {
        "findings"
    };
    let joint = if diagnosis.succeeds() { "but" } else { "with" };
    format!(", {joint} {} {noun}", counts.join(" and "))
}

/// What a path's request reached, as a summary names it: the pod or node
/// whose address it is, else the address; a path without one, by number.
fn backend_name(path: &PathResult, number: usize) -> String {
    match &path.backend {
        Some(backend) => backend.owner_name().unwrap_or_else(|| backend.socket()),
        None => format!("path {number}"),
    }
}

/// Which of several paths fail, by backend where they reach several (a
/// service's fan-out): "2 of 4 backends (50% of flows) fail: a, b".
fn failing_summary(diagnosis: &Diagnosis, shares: &[Share]) -> Option<String> {
    if diagnosis.paths.len() < 2 || diagnosis.succeeds() {
        return None;
    }
    // Each backend with whether any of its paths fails, in path order.
    let mut backends: Vec<(String, bool)> = Vec::new();
    for (index, path) in diagnosis.paths.iter().enumerate() {
        let name = backend_name(path, index + 1);
        let fails = !path.succeeds();
        match backends.iter_mut().find(|(known, _)| *known == name) {
            Some((_, failing)) => *failing |= fails,
            None => backends.push((name, fails)),
        }
    }
    let share: Share = diagnosis
        .paths
        .iter()
        .zip(shares)
        .filter(|(path, _)| !path.succeeds())
        .map(|(_, share)| *share)
        .sum();
    let failing: Vec<&str> = backends
        .iter()
        .filter(|(_, fails)| *fails)
        .map(|(name, _)| name.as_str())
        .collect();
    if backends.len() > 1 {
        Some(format!(
            "{} of {} backends ({share} of flows) fail: {}",
            failing.len(),
            backends.len(),
            failing.join(", ")
        ))
    } else {
        let paths = diagnosis.paths.iter().filter(|p| !p.succeeds()).count();
        Some(format!(
            "{paths} of {} paths ({share} of flows) fail",
            diagnosis.paths.len(),
        ))
    }
}

/// How the flow leaves the cluster, where that is the verdict: for a
/// destination inside the cluster, where it left instead of reaching it;
/// else with which source address, and whether the outside can answer it.
fn exit_note(diagnosis: &Diagnosis) -> String {
    if diagnosis.disposition() != Disposition::ExitsCluster {
        return String::new();
    }
    // A destination inside the cluster: where the packet went instead.
    if let Some(destination) = &diagnosis.destination {
        let left = diagnosis
            .paths
            .iter()
            .find_map(|path| diagnosis.left_at(path));
        return match left {
            Some((hop, device)) => {
                format!(
                    ": leaves the cluster at {hop} by {device} instead of reaching {destination}"
                )
            }
            None => format!(": leaves the cluster instead of reaching {destination}"),
        };
    }
    let Some(exit) = diagnosis.exit() else {
        return String::new();
    };
    let source = exit
        .source
        .map_or_else(|| "a masqueraded address".to_string(), |s| s.to_string());
    match exit.answerable {
        true => format!(" from {source} ({})", exit.why),
        false => format!(
            " with source {source}, which the outside cannot answer ({})",
            exit.why
        ),
    }
}

/// A step as one sentence; `verbose`: with its packet and route rule.
fn step_line(step: &Step, verbose: bool) -> String {
    match step {
        Step::Sent { packet } => format!("sends {packet}"),
        Step::Received { interface, packet } => {
            if verbose {
                format!("receives on {interface}: {packet}")
            } else {
                format!("receives on {interface}")
            }
        }
        Step::Route {
            rule,
            route,
            result,
        } => {
            if verbose && !rule.is_empty() {
                format!("route: {result} ({route}; rule {rule})")
            } else {
                format!("route: {result} ({route})")
            }
        }
        Step::Translated {
            hook,
            table,
            translation,
        } => format!("netfilter {hook} {table}: {translation}"),
        Step::Netfilter { rule, file } => {
            format!("netfilter: {rule} at {}: {}", rule.place(file), rule.text)
        }
        Step::Neighbour {
            address,
            interface,
            result,
        } => format!("neighbour {address} on {interface}: {result}"),
        Step::Bridged { bridge, port } => format!("bridge {bridge} forwards to port {port}"),
        Step::Encapsulated { device, outer } => format!("{device} encapsulates: {outer}"),
        Step::Decapsulated { device, inner } => format!("{device} decapsulates: {inner}"),
        Step::Program {
            device,
            hook,
            program,
            verdict,
            why,
        } => format!("program {program} ({hook} on {device}) {verdict}: {why}"),
        Step::Delivered { socket } => format!("delivered to {socket}"),
        Step::Stopped {
            disposition,
            reason,
        } => format!("STOPPED ({disposition}): {reason}"),
    }
}

/// `skoop matrix`'s report: the counts, then the flows that do not succeed
/// grouped by their first finding.
pub fn matrix(report: &MatrixReport) -> Vec<String> {
    /// Flows listed under each cause; -o json lists every one.
    const LISTED: usize = 10;
    let mut lines: Vec<String> = Vec::new();
    lines.push(format!("{}: {}", report.snapshot, counts_line(report)));
    lines.extend(twins_lines(report));
    let failing = |f: &&FlowOut| f.verdict != FlowVerdict::Succeeds;
    for cause in &report.causes {
        lines.push(String::new());
        let noun = if cause.flows == 1 { "flow" } else { "flows" };
        lines.push(format!(
            "{} {noun}: {} {} at {}: {}",
            cause.flows, cause.severity, cause.id, cause.hop, cause.message
        ));
        let flows: Vec<&FlowOut> = report
            .flows
            .iter()
            .filter(failing)
            .filter(|f| {
                f.finding
                    .as_ref()
                    .is_some_and(|c| (&c.id, &c.hop) == (&cause.id, &cause.hop))
            })
            .collect();
        lines.extend(flows.iter().take(LISTED).map(|f| flow_line(f)));
        if flows.len() > LISTED {
            lines.push(format!(
                "    ... and {} more (-o json lists every flow)",
                flows.len() - LISTED
            ));
        }
    }
    let unexplained: Vec<&FlowOut> = report
        .flows
        .iter()
        .filter(failing)
        .filter(|f| f.finding.is_none())
        .collect();
    if !unexplained.is_empty() {
        lines.push(String::new());
        lines.push(format!("{} without a finding:", unexplained.len()));
        lines.extend(unexplained.iter().map(|f| flow_line(f)));
    }
    lines.extend(confirmed_lines(report));
    lines
}

/// How many flows twins' diagnoses answered (`docs/matrix.md`, "Twins"),
/// and the largest classes: the source diagnosed for the others.
fn twins_lines(report: &MatrixReport) -> Vec<String> {
    /// Classes listed, and sources named in each; -o json has them all.
    const CLASSES: usize = 10;
    const NAMED: usize = 3;
    if report.twins.is_empty() {
        return Vec::new();
    }
    let stood_for: usize = report.twins.iter().map(|t| t.flows).sum();
    let sources: usize = report.twins.iter().map(|t| t.sources.len()).sum();
    let classes = match report.twins.len() {
        1 => "1 class".to_owned(),
        n => format!("{n} classes"),
    };
    let mut lines = vec![format!(
        "{stood_for} flows answered by a twin's diagnosis: {sources} sources in {classes} of twins (docs/matrix.md, \"Twins\")"
    )];
    let mut largest: Vec<_> = report.twins.iter().collect();
    largest.sort_by_key(|t| std::cmp::Reverse(t.flows));
    for twins in largest.iter().take(CLASSES) {
        let Some((first, others)) = twins.sources.split_first() else {
            continue;
        };
        let mut named = others
            .iter()
            .take(NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if others.len() > NAMED {
            named.push_str(&format!(" and {} more", others.len() - NAMED));
        }
        lines.push(format!("    {first} for {named}: {} flows", twins.flows));
    }
    if report.twins.len() > CLASSES {
        lines.push(format!(
            "    ... and {} more classes (-o json lists every one)",
            report.twins.len() - CLASSES
        ));
    }
    lines
}

/// `matrix --confirm`'s answers: how many flows agree, and every flow that
/// does not or whose answer is unknown.
fn confirmed_lines(report: &MatrixReport) -> Vec<String> {
    let confirmed: Vec<(&FlowOut, &FlowConfirmation)> = (report.flows.iter())
        .filter_map(|f| f.confirmation.as_ref().map(|c| (f, c)))
        .collect();
    if confirmed.is_empty() {
        return Vec::new();
    }
    let count = |agree| confirmed.iter().filter(|(_, c)| c.agree == agree).count();
    let mut lines = vec![
        String::new(),
        format!(
            "confirmed with the kernel: {} flows, {} agree, {} disagree, {} unknown",
            confirmed.len(),
            count(Some(true)),
            count(Some(false)),
            count(None)
        ),
    ];
    for (flow, confirmation) in confirmed.iter().filter(|(_, c)| c.agree != Some(true)) {
        let verdict = if confirmation.agree == Some(false) {
            "DISAGREE"
        } else {
            "unknown"
        };
        let at = (confirmation.stopped_at.as_ref())
            .map(|hop| format!(", stopping at {hop}"))
            .unwrap_or_default();
        let why = confirmation.why.as_deref().unwrap_or_default();
        lines.push(format!(
            "    {} -> {} ({}): {verdict}: kernel {}{at}: {why}",
            flow.from,
            flow.to,
            flow.carried(),
            confirmation.kernel
        ));
    }
    lines
}

/// "12 flows: 8 succeed, 4 not delivered" (the kinds there are).
fn counts_line(report: &MatrixReport) -> String {
    let counts = &report.counts;
    let mut parts = vec![format!("{} succeed", counts.succeed)];
    for (count, what) in [
        (counts.not_delivered, "not delivered"),
        (
            counts.delivered_with_severe_findings,
            "delivered with a critical or fatal finding",
        ),
        (counts.errors, "refused (diagnose says why)"),
    ] {
        if count > 0 {
            parts.push(format!("{count} {what}"));
        }
    }
    format!("{} flows: {}", counts.flows, parts.join(", "))
}

/// A flow as the matrix's and the diff's reports list it.
fn flow_line(flow: &FlowOut) -> String {
    format!(
        "    {} -> {} ({}): {}",
        flow.from,
        flow.to,
        flow.carried(),
        outcome(flow)
    )
}

/// How a flow ends, in words: its disposition, marked where assumed or
/// marred by a critical or fatal finding; or why diagnose refuses it.
fn outcome(flow: &FlowOut) -> String {
    let Some(disposition) = &flow.disposition else {
        return format!("error: {}", flow.error.as_deref().unwrap_or("refused"));
    };
    let assumed = if flow.assumed { " (assumed)" } else { "" };
    let marred = match (&flow.verdict, &flow.finding) {
        (FlowVerdict::DeliveredWithSevereFindings, Some(finding)) => {
            format!(", but with a {} finding", finding.severity)
        }
        _ => String::new(),
    };
    format!("{disposition}{assumed}{marred}")
}

/// `skoop diff`'s report: the two sides' counts, then each changed flow
/// with its cause, then the flows only one side has.
pub fn diff(report: &DiffReport) -> Vec<String> {
    let mut lines = vec![
        format!("before: {}", report.before),
        format!("after:  {}", report.after),
    ];
    let changed = report.changed.len();
    lines.push(format!(
        "{changed} flow{} changed, {} unchanged, {} only before, {} only after",
        if changed == 1 { "" } else { "s" },
        report.unchanged,
        report.only_before.len(),
        report.only_after.len()
    ));
    for change in &report.changed {
        lines.push(String::new());
        lines.push(format!(
            "{} {} -> {} ({}): {} -> {}",
            change.change.as_str(),
            change.from,
            change.to,
            change.after.carried(),
            outcome(&change.before),
            outcome(&change.after)
        ));
        if let Some(cause) = &change.cause {
            lines.push(format!(
                "    {} {} at {}: {}",
                cause.severity, cause.id, cause.hop, cause.message
            ));
            lines.push(format!("    evidence: {}", cause.evidence));
        }
    }
    for (title, flows) in [
        ("only before:", &report.only_before),
        ("only after:", &report.only_after),
    ] {
        if !flows.is_empty() {
            lines.push(String::new());
            lines.push(title.to_owned());
            lines.extend(flows.iter().map(flow_line));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::engine::codes::KERNEL_FDB_MISSING;
    use crate::engine::{Protocol, Request, diagnose};
    use crate::packs::LoadedPacks;
    use crate::snapshot::Snapshot;

    /// `default/web-0` to `svc/default/web` in a bundled example.
    fn web_0_to_web(example: &str) -> Diagnosis {
        let (snapshot, _) = Snapshot::load(&Path::new("examples").join(example)).expect("loads");
        let (packs, problems) = LoadedPacks::discover_and_load(&[], &[]);
        assert!(problems.is_empty(), "{problems:?}");
        let request = Request {
            from: "default/web-0".parse().expect("an endpoint"),
            to: "svc/default/web".parse().expect("an endpoint"),
            port: None,
            protocol: Protocol::Tcp,
            size: None,
            via: None,
            family: None,
        };
        diagnose(&Arc::new(snapshot), &request, &packs).expect("diagnosed")
    }

    #[test]
    fn assumed_line_names_each_namespace_stepped_over_once() {
        let diagnosis = web_0_to_web("flannel-vxlan-partial");
        // node-2 is on two paths: its hop is forked, the namespace said once.
        let assumed_hops = diagnosis.graph.node_weights().filter(|h| h.assumed);
        assert!(assumed_hops.count() > 3);
        assert_eq!(
            verdict_lines(&diagnosis, &path_shares(&diagnosis))[2],
            "  assumed: the snapshot has no dump of node-2, default/web-2, default/web-3; pack flannel's intent stands in there"
        );
    }

    #[test]
    fn a_stop_on_forked_paths_is_said_once_with_its_paths() {
        let lines = diagnosis(&web_0_to_web("flannel-vxlan-broken"), Detail::Paths);
        let fdb: Vec<&String> = lines
            .iter()
            .filter(|line| line.contains(KERNEL_FDB_MISSING.id))
            .collect();
        assert_eq!(fdb.len(), 1, "{lines:#?}");
        let said = format!("  fatal {KERNEL_FDB_MISSING} at node-1 (paths 3, 4): ");
        assert!(fdb[0].starts_with(&said), "{}", fdb[0]);
    }

    #[test]
    fn hops_are_shown_only_at_detail() {
        let broken = web_0_to_web("flannel-vxlan-broken");
        let paths = diagnosis(&broken, Detail::Paths);
        let hops = diagnosis(&broken, Detail::Hops);
        assert!(!paths.iter().any(|line| line.starts_with("  node-1 [node]")));
        assert!(hops.iter().any(|line| line.starts_with("  node-1 [node]")));
    }
}
