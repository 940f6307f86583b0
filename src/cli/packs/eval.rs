//! `skoop packs eval`: a pack's snapshot checks run over a snapshot, with
//! every finding and whatever the scripts printed — the loop a pack's author
//! works in.

use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;
use skoop::engine::Candidates;
use skoop::packs::{
    self, About, Finding, FindingStatus, LoadedPacks, PackKind, PackSource, Subject,
};
use skoop::snapshot::{NetnsId, Snapshot};

use super::EvalArgs;
use crate::cli::{EXIT_USAGE, OutputFormat, print_json, report_problems};

/// What `packs eval` prints as JSON (and as text).
#[derive(Debug, Serialize)]
struct EvalReport {
    snapshot: String,
    packs: Vec<PackRun>,
}

#[derive(Debug, Serialize)]
struct PackRun {
    pack: String,
    kind: &'static str,
    /// The signs of its CNI detection found; empty when it found none (a
    /// CNI pack's checks run anyway).
    detected: Vec<String>,
    /// Why its `detect` hook says the CNI the signs name does not run
    /// here (its checks run anyway).
    ruled_out: Option<String>,
    mode: Option<String>,
    checks: Vec<CheckRun>,
}

#[derive(Debug, Serialize)]
struct CheckRun {
    /// The check's id; the pack's name for its own finding (an undecided
    /// mode, a detect hook that failed).
    id: String,
    scope: &'static str,
    per_remote_node: bool,
    per_local_pod: bool,
    /// Subjects it ran on (node and peer counted once per pair).
    subjects: usize,
    /// Of those, the subjects its `when:` skipped: not checked at all.
    skipped: usize,
    /// Its `when:` as written, which says why.
    #[serde(skip_serializing_if = "Option::is_none")]
    when: Option<String>,
    findings: Vec<Finding>,
    /// What its scripts printed with `print` and `debug`.
    output: Vec<String>,
}

impl EvalReport {
    fn count(&self, status: FindingStatus) -> usize {
        self.packs
            .iter()
            .flat_map(|p| &p.checks)
            .flat_map(|c| &c.findings)
            .filter(|f| f.status == status)
            .count()
    }
}

pub(super) fn eval(args: &EvalArgs) -> ExitCode {
    let sources = match packs::discover(&args.dir) {
        Ok(sources) => sources,
        Err(problems) => {
            report_problems(&problems);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let snapshot = match args.cache.load(&args.snapshot) {
        Ok((snapshot, problems)) => {
            report_problems(&problems);
            Arc::new(snapshot)
        }
        Err(e) => {
            err!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let scope = match Scope::new(args, &snapshot) {
        Ok(scope) => scope,
        Err(message) => {
            err!("error: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut report = EvalReport {
        snapshot: snapshot.root.display().to_string(),
        packs: Vec::new(),
    };
    for source in sources {
        match run_pack(source, args, &snapshot, &scope) {
            Ok(run) => report.packs.push(run),
            Err(code) => return code,
        }
    }
    match args.output {
        OutputFormat::Json => {
            if let Err(code) = print_json(&report) {
                return code;
            }
        }
        OutputFormat::Text => print_text(&report),
    }
    if report.count(FindingStatus::Failed) + report.count(FindingStatus::ScriptError) > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Loads one pack alone (a CNI pack chosen, so that it applies) and runs its
/// snapshot checks over what `scope` accepts.
fn run_pack(
    source: PackSource,
    args: &EvalArgs,
    snapshot: &Arc<Snapshot>,
    scope: &Scope,
) -> Result<PackRun, ExitCode> {
    let (mut loaded, problems) = LoadedPacks::load_alone(source, &args.overrides);
    if !problems.is_empty() {
        for problem in &problems {
            err!("error: {problem}");
        }
        return Err(ExitCode::from(EXIT_USAGE));
    }
    let Some(pack) = loaded.packs().first().cloned() else {
        return Err(ExitCode::from(EXIT_USAGE));
    };
    if pack.kind == PackKind::Cni
        && let Err(message) = loaded.choose_cni(&pack.name)
    {
        err!("error: {message}");
        return Err(ExitCode::from(EXIT_USAGE));
    }
    let detected = if pack.kind == PackKind::Cni {
        loaded.detect(&pack, snapshot)
    } else {
        packs::Detected::default()
    };
    let mode = loaded.active_mode(&pack, snapshot).ok().flatten();
    let subject = |subject: &Subject| scope.accepts(subject, snapshot);
    let about = About {
        subject: &subject,
        // A node's checks made per remote node run with every peer.
        peer: &|_| true,
        objects: None,
    };
    // A detect hook that failed is the pack's own finding, as a diagnosis
    // reports it.
    let detect_failed = (detected.problem).map(|finding| packs::CheckRun::of_pack(&pack, *finding));
    let checks = detect_failed
        .into_iter()
        .chain(loaded.run_snapshot_checks(snapshot, &about, true))
        .map(|run| CheckRun {
            id: run
                .check
                .map_or_else(|| pack.name.clone(), |c| c.id.clone()),
            scope: run.check.map_or("pack", |c| c.scope.as_str()),
            per_remote_node: run
                .check
                .is_some_and(|c| c.for_each == Some(packs::ForEach::RemoteNodes)),
            per_local_pod: run
                .check
                .is_some_and(|c| c.for_each == Some(packs::ForEach::LocalPods)),
            subjects: run.subjects,
            skipped: run.skipped,
            when: run
                .check
                .and_then(|c| c.when.as_ref())
                .map(|w| w.source.clone()),
            findings: run.findings,
            output: run.output,
        })
        .collect();
    Ok(PackRun {
        kind: pack.kind.as_str(),
        pack: pack.name,
        detected: detected.signs,
        ruled_out: detected.ruled_out,
        mode,
        checks,
    })
}

/// Which subjects `--node` or `--pod` leaves.
enum Scope {
    All,
    Node(String),
    Pod { namespace: String, name: String },
}

impl Scope {
    fn new(args: &EvalArgs, snapshot: &Snapshot) -> Result<Scope, String> {
        let cluster = &snapshot.cluster;
        if let Some(node) = &args.node {
            let known = cluster.node(node).is_some()
                || snapshot
                    .namespaces
                    .contains_key(&NetnsId::Host { node: node.clone() });
            if !known {
                let names = cluster.nodes().map(|n| n.meta.name.clone());
                return Err(format!(
                    "--node: no node {node} in {}{}",
                    snapshot.root.display(),
                    Candidates::new(node, names)
                ));
            }
            return Ok(Scope::Node(node.clone()));
        }
        if let Some(pod) = &args.pod {
            let Some((namespace, name)) = pod.split_once('/') else {
                return Err(format!("--pod: {pod:?} is not NS/NAME"));
            };
            let in_dumps = snapshot.namespaces.keys().any(|id| {
                matches!(id, NetnsId::Pod { namespace: ns, name: n, .. } if ns == namespace && n == name)
            });
            if cluster.pod(namespace, name).is_none() && !in_dumps {
                let names = cluster
                    .pods()
                    .map(|p| format!("{}/{}", p.meta.namespace, p.meta.name));
                return Err(format!(
                    "--pod: no pod {pod} in {}{}",
                    snapshot.root.display(),
                    Candidates::new(pod, names)
                ));
            }
            return Ok(Scope::Pod {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            });
        }
        Ok(Scope::All)
    }

    fn accepts(&self, subject: &Subject, snapshot: &Snapshot) -> bool {
        let pod_on = |node: &str, namespace: &str, name: &str| {
            snapshot
                .cluster
                .pod(namespace, name)
                .and_then(|p| p.node_name.as_deref())
                .or_else(|| {
                    snapshot.namespaces.keys().find_map(|id| match id {
                        NetnsId::Pod {
                            node,
                            namespace: ns,
                            name: n,
                        } if ns == namespace && n == name => Some(node.as_str()),
                        _ => None,
                    })
                })
                == Some(node)
        };
        match (self, subject) {
            (Scope::All, _) => true,
            (Scope::Node(node), Subject::Node { name }) => name == node,
            (Scope::Node(node), Subject::Pod { namespace, name }) => pod_on(node, namespace, name),
            (
                Scope::Node(node),
                Subject::Object {
                    kind,
                    namespace,
                    name,
                },
            ) => match kind.as_str() {
                "Node" => name == node,
                "Pod" => pod_on(node, namespace, name),
                _ => false,
            },
            (
                Scope::Pod { namespace, name },
                Subject::Pod {
                    namespace: ns,
                    name: n,
                },
            ) => ns == namespace && n == name,
            (
                Scope::Pod { namespace, name },
                Subject::Object {
                    kind,
                    namespace: ns,
                    name: n,
                },
            ) => kind == "Pod" && ns == namespace && n == name,
            _ => false,
        }
    }
}

fn print_text(report: &EvalReport) {
    for pack in &report.packs {
        let mut header = format!("pack {} ({})", pack.pack, pack.kind);
        if let Some(mode) = &pack.mode {
            header.push_str(&format!(", mode {mode}"));
        }
        out!("{header}");
        if pack.kind == "cni" {
            if pack.detected.is_empty() {
                out!("  detection: no sign of its CNI in this snapshot (its checks run anyway)");
            } else {
                out!("  detection: {}", pack.detected.join(", "));
            }
            if let Some(why) = &pack.ruled_out {
                out!("  ruled out: {why} (its checks run anyway)");
            }
        }
        for check in &pack.checks {
            print_check(check);
        }
        out!();
    }
    let checks: usize = report.packs.iter().map(|p| p.checks.len()).sum();
    let subjects: usize = report
        .packs
        .iter()
        .flat_map(|p| &p.checks)
        .map(|c| c.subjects)
        .sum();
    let skipped: usize = (report.packs.iter())
        .flat_map(|p| &p.checks)
        .map(|c| c.skipped)
        .sum();
    let skipped = match skipped {
        0 => String::new(),
        skipped => format!(" ({skipped} skipped by their when)"),
    };
    out!(
        "{} over {}{skipped}: {} failed, {} cannot tell, {} script errors",
        counted(checks, "check"),
        counted(subjects, "subject"),
        report.count(FindingStatus::Failed),
        report.count(FindingStatus::Unknown),
        report.count(FindingStatus::ScriptError)
    );
}

fn print_check(check: &CheckRun) {
    let scope = if check.per_remote_node {
        format!("{} per remote node", check.scope)
    } else if check.per_local_pod {
        format!("{} per local pod", check.scope)
    } else {
        check.scope.to_owned()
    };
    let subjects = counted(check.subjects, "subject");
    // A subject its `when:` left out was not checked: never "ok".
    let when = check.when.as_deref().unwrap_or_default();
    let verdict = match (check.subjects, check.skipped, check.findings.len()) {
        (0, ..) => "no subject".to_owned(),
        (all, skipped, _) if skipped == all => format!("{subjects}, skipped (when: {when})"),
        (_, 0, 0) => format!("{subjects}, ok"),
        (_, 0, findings) => format!("{subjects}, {}", counted(findings, "finding")),
        (_, skipped, 0) => format!("{subjects}, {skipped} skipped (when: {when}), the rest ok"),
        (_, skipped, findings) => format!(
            "{subjects}, {skipped} skipped (when: {when}), {}",
            counted(findings, "finding")
        ),
    };
    out!("  {} ({scope}): {verdict}", check.id);
    for finding in &check.findings {
        // Packs' messages conventionally start with `${subject}`.
        let subject = finding.about.subject.to_string();
        if finding.message.starts_with(&subject) {
            out!(
                "    {} [{}] {}",
                finding.status,
                finding.severity,
                finding.message
            );
        } else {
            out!(
                "    {} [{}] {subject}: {}",
                finding.status,
                finding.severity,
                finding.message
            );
        }
        if !finding.evidence.is_empty() {
            let evidence: Vec<String> = finding.evidence.iter().map(ToString::to_string).collect();
            out!("      evidence: {}", evidence.join(", "));
        }
        if let Some(expected) = &finding.expected {
            out!("      expected: {expected}");
        }
        if let Some(remediation) = &finding.remediation {
            out!("      remediation: {remediation}");
        }
    }
    for line in &check.output {
        out!("    | {line}");
    }
}

/// `n` things, in the singular for one.
fn counted(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}
