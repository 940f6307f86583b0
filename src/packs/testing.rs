//! A pack's own tests (`skoop packs test DIR`): each `tests/<case>/` holds a
//! snapshot and an `expect.yaml` naming the finding ids that must appear
//! and those that must not, in snapshot scope.
//!
//! ```yaml
//! description: ip_forward is off on node-1
//! snapshot: snapshot            # default; relative to the case directory
//! set: {mtu: 1400}              # parameter overrides for this case
//! findings: [core.node.ip-forward]
//! absent: [core.device.up]
//! ```
//!
//! `flows:` (paths with expected dispositions) is reserved for when
//! `skoop diagnose` exists; until then a case that has it fails with a
//! message saying so, rather than passing without checking it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::yaml::{self, Fields, Issues};
use super::{FindingStatus, LoadedPacks, Override, PackSource};
use crate::snapshot::Snapshot;
use crate::snapshot::problem::{Problem, read_text};

/// The result of one test case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    pub pack: String,
    /// The case directory.
    pub dir: PathBuf,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// What `expect.yaml` says.
struct Expectation {
    snapshot: PathBuf,
    overrides: Vec<Override>,
    findings: Vec<String>,
    absent: Vec<String>,
}

/// Runs every case of one pack. `Err` with every problem when the pack's
/// tests cannot be run at all (no tests, a broken expect.yaml).
pub fn run_pack_tests(
    source: &PackSource,
    pack_name: &str,
) -> Result<Vec<CaseResult>, Vec<Problem>> {
    let tests_dir = source.dir.join("tests");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&tests_dir)
        .map_err(|e| vec![Problem::in_file(&tests_dir, format!("no tests: {e}"))])?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    if cases.is_empty() {
        return Err(vec![Problem::in_file(
            &tests_dir,
            "no test cases (tests/<case>/expect.yaml)",
        )]);
    }
    let mut results = Vec::new();
    let mut problems = Vec::new();
    for case in cases {
        match read_expectation(&case, pack_name) {
            Ok(expectation) => results.push(run_case(source, pack_name, &case, &expectation)),
            Err(more) => problems.extend(more),
        }
    }
    if problems.is_empty() {
        Ok(results)
    } else {
        Err(problems)
    }
}

fn read_expectation(case: &Path, pack: &str) -> Result<Expectation, Vec<Problem>> {
    let file = case.join("expect.yaml");
    let text = match read_text(&file) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(vec![Problem::in_file(
                &file,
                "a test case needs expect.yaml",
            )]);
        }
        Err(problem) => return Err(vec![problem]),
    };
    let root = yaml::parse(&text).map_err(|issue| vec![Problem::from_issue(&file, issue)])?;
    let mut issues = Issues::default();
    let mut expectation = Expectation {
        snapshot: case.join("snapshot"),
        overrides: Vec::new(),
        findings: Vec::new(),
        absent: Vec::new(),
    };
    if let Some(mut fields) = Fields::of(&root, "expect.yaml", &mut issues) {
        fields.string("description", &mut issues);
        if let Some(snapshot) = fields.string("snapshot", &mut issues) {
            expectation.snapshot = case.join(snapshot.value);
        }
        if let Some(set) = fields.take("set")
            && let Some(mut entries) = Fields::of(set, "set", &mut issues)
        {
            for (key, value) in entries.all() {
                let text = match &value.value {
                    yaml::Value::String(s) => s.clone(),
                    yaml::Value::Int(i) => i.to_string(),
                    yaml::Value::Bool(b) => b.to_string(),
                    other => {
                        issues.push(
                            value
                                .pos
                                .issue(format!("`set` values are scalars, found {}", other.kind())),
                        );
                        continue;
                    }
                };
                expectation.overrides.push(Override {
                    pack: pack.to_owned(),
                    param: key.name.clone(),
                    value: text,
                    origin: Some((file.clone(), key.pos)),
                });
            }
        }
        expectation.findings = fields
            .strings("findings", &mut issues)
            .into_iter()
            .map(|f| f.value)
            .collect();
        expectation.absent = fields
            .strings("absent", &mut issues)
            .into_iter()
            .map(|f| f.value)
            .collect();
        if let Some(flows) = fields.take("flows") {
            issues.push(flows.pos.issue(
                "`flows` (paths with expected dispositions) needs skoop diagnose, which this skoop does not have yet",
            ));
        }
        fields.finish(&mut issues);
    }
    if issues.0.is_empty() {
        Ok(expectation)
    } else {
        Err(issues
            .0
            .into_iter()
            .map(|i| Problem::from_issue(&file, i))
            .collect())
    }
}

fn run_case(source: &PackSource, pack: &str, case: &Path, expectation: &Expectation) -> CaseResult {
    let mut failures = Vec::new();
    let (loaded, problems) = LoadedPacks::load(vec![source.clone()], &expectation.overrides);
    failures.extend(problems.iter().map(ToString::to_string));
    match Snapshot::load(&expectation.snapshot) {
        Err(error) => failures.push(error.to_string()),
        Ok((snapshot, problems)) => {
            failures.extend(problems.iter().map(|p| format!("snapshot: {p}")));
            let findings = loaded.evaluate_snapshot(&Arc::new(snapshot));
            for finding in findings
                .iter()
                .filter(|f| f.status == FindingStatus::ScriptError)
            {
                failures.push(format!(
                    "script error in {} for {}: {}",
                    finding.id, finding.subject, finding.message
                ));
            }
            let failed = |id: &str| {
                findings
                    .iter()
                    .any(|f| f.id == id && f.status == FindingStatus::Failed)
            };
            for id in &expectation.findings {
                if !failed(id) {
                    failures.push(format!("expected finding {id}, not reported"));
                }
            }
            for id in &expectation.absent {
                for finding in findings.iter().filter(|f| f.id == *id) {
                    failures.push(format!(
                        "unexpected finding {id} ({:?}) for {}: {}",
                        finding.status, finding.subject, finding.message
                    ));
                }
            }
        }
    }
    CaseResult {
        pack: pack.to_owned(),
        dir: case.to_path_buf(),
        failures,
    }
}
