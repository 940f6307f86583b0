//! A pack's own tests (`skoop packs test DIR`): each `tests/<case>/` holds a
//! snapshot and an `expect.yaml` naming the finding ids that must appear
//! and those that must not, in snapshot scope. This sits above both `packs`
//! and `engine`, since a case's flows are diagnosed by the engine with the
//! packs: neither of those depends on the other's tests.
//!
//! ```yaml
//! description: ip_forward is off on node-1
//! snapshot: snapshot            # default; relative to the case directory
//! set: {mtu: 1400}              # parameter overrides for this case
//! findings: [core.node.ip-forward]
//! absent: [core.device.up]
//! ```
//!
//!
//! `flows:` diagnoses flows in the case's snapshot with the pack (and the
//! built-in packs) and checks their disposition and finding ids:
//!
//! ```yaml
//! flows:
//!   - from: default/web-0
//!     to: default/web-3:8080      # any --to form of skoop diagnose
//!     protocol: tcp               # tcp (default), udp, sctp or icmp
//!     disposition: neighbor_failed     # or not_disposition: delivered
//!     findings: [kernel.fdb.missing]   # ids the diagnosis must report
//!     absent: [core.pod.listener]      # ids it must not
//!     size: 1400                       # --size: BYTES or mtu
//!     assumed: false                   # whether a path was stepped over
//!     exit_source: 172.18.0.11         # the source it leaves the cluster with
//!     family: ipv6                     # --family: a dual-stack endpoint's address
//! ```

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::{self, Endpoint, PacketSize, Protocol, Request};
use crate::net::Family;
use crate::packs::yaml::{self, At, Fields, Issues};
use crate::packs::{self, FindingStatus, LoadedPacks, Override, PackSource};
use crate::snapshot::input::{self, Boundary, read_text};
use crate::snapshot::problem::Problem;
use crate::snapshot::{ClusterFrom, Snapshot};

/// The result of one test case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    pub pack: String,
    /// The case directory.
    pub dir: PathBuf,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
    /// What the case expected and what was reported, a line each, for a
    /// pack author to read (`packs test -v`).
    pub details: Vec<String>,
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
    flows: Vec<Flow>,
}

/// One flow to diagnose and what must come of it.
struct Flow {
    request: Request,
    disposition: Option<Disposition>,
    findings: Vec<String>,
    absent: Vec<String>,
    assumed: Option<bool>,
    exit_source: Option<IpAddr>,
}

/// The disposition a flow must end in, or must not.
enum Disposition {
    Is(String),
    Not(String),
}

impl Disposition {
    fn holds(&self, disposition: &str) -> bool {
        match self {
            Disposition::Is(want) => want == disposition,
            Disposition::Not(refused) => refused != disposition,
        }
    }
}

impl std::fmt::Display for Disposition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Disposition::Is(want) => f.write_str(want),
            Disposition::Not(refused) => write!(f, "anything but {refused}"),
        }
    }
}

/// Whether `path`, as it is written (its `..` taken away, no link
/// followed), is inside `dir`.
fn named_inside(path: &Path, dir: &Path) -> bool {
    fn lexical(path: &Path) -> PathBuf {
        let mut plain = PathBuf::new();
        for component in std::path::absolute(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .components()
        {
            match component {
                std::path::Component::ParentDir => {
                    plain.pop();
                }
                std::path::Component::CurDir => {}
                other => plain.push(other),
            }
        }
        plain
    }
    lexical(path).starts_with(lexical(dir))
}

/// Runs every case of one pack, its snapshots' objects taken from where
/// `from` says. `Err` with every problem when the pack's tests cannot be
/// run at all (no tests, a broken expect.yaml).
/// `overrides` are the pack's parameters set for every case (`packs test
/// --set`); a case's own `set:` follows them, and so wins.
pub fn run_pack_tests(
    source: &PackSource,
    pack_name: &str,
    overrides: &[Override],
    from: ClusterFrom,
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
            Ok(mut expectation) => {
                expectation
                    .overrides
                    .splice(0..0, overrides.iter().cloned());
                results.push(run_case(source, pack_name, &case, &expectation, from));
            }
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
    let text = match read_text(&file, input::PACK_FILE) {
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
        flows: Vec::new(),
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
            for item in yaml::seq(flows, "flows", &mut issues) {
                if let Some(flow) = read_flow(item, &mut issues) {
                    expectation.flows.push(flow);
                }
            }
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

/// One entry of `flows:`; every problem in it is an issue at its position.
fn read_flow(node: &yaml::Node, issues: &mut Issues) -> Option<Flow> {
    let mut fields = Fields::of(node, "a flow", issues)?;
    let endpoint = |field: Option<yaml::At<String>>, issues: &mut Issues| {
        let field = field?;
        field
            .value
            .parse::<Endpoint>()
            .map_err(|e| issues.push(field.pos.issue(e.to_string())))
            .ok()
    };
    let from = endpoint(fields.required_string("from", issues), issues);
    let to = endpoint(fields.required_string("to", issues), issues);
    let protocol = match fields.string("protocol", issues) {
        None => Some(Protocol::Tcp),
        Some(At { value, pos }) => match value.as_str() {
            "tcp" => Some(Protocol::Tcp),
            "udp" => Some(Protocol::Udp),
            "sctp" => Some(Protocol::Sctp),
            "icmp" => Some(Protocol::Icmp),
            other => {
                issues
                    .push(pos.issue(format!("protocol is tcp, udp, sctp or icmp, not {other:?}")));
                None
            }
        },
    };
    let port = match fields.take("port") {
        None => None,
        Some(yaml::Node {
            value: yaml::Value::Int(n),
            pos,
        }) => match u16::try_from(*n) {
            Ok(port) if port > 0 => Some(port),
            _ => {
                issues.push(pos.issue(format!("port {n} is not 1-65535")));
                return None;
            }
        },
        Some(other) => {
            issues.push(other.pos.issue(format!(
                "port must be a number, found {}",
                other.value.kind()
            )));
            return None;
        }
    };
    let known = |field: At<String>, issues: &mut Issues| {
        let names = engine::Disposition::ALL.map(engine::Disposition::as_str);
        if !names.contains(&field.value.as_str()) {
            issues.push(field.pos.issue(format!(
                "unknown disposition {:?} (one of: {})",
                field.value,
                names.join(", ")
            )));
        }
        field.value
    };
    let disposition = match (
        fields.string("disposition", issues),
        fields.string("not_disposition", issues),
    ) {
        (Some(_), Some(not)) => {
            issues.push(
                not.pos
                    .issue("give disposition or not_disposition, not both"),
            );
            return None;
        }
        (Some(is), None) => Some(Disposition::Is(known(is, issues))),
        (None, Some(not)) => Some(Disposition::Not(known(not, issues))),
        (None, None) => None,
    };
    let size = match fields.take("size") {
        None => None,
        Some(node) => {
            let size = match &node.value {
                yaml::Value::Int(n) => n.to_string().parse::<PacketSize>(),
                yaml::Value::String(text) => text.parse::<PacketSize>(),
                other => {
                    issues.push(
                        node.pos
                            .issue(format!("size is BYTES or mtu, found {}", other.kind())),
                    );
                    return None;
                }
            };
            match size {
                Ok(size) => Some(size),
                Err(e) => {
                    issues.push(node.pos.issue(format!("size: {e}")));
                    return None;
                }
            }
        }
    };
    let assumed = fields.bool("assumed", issues);
    let family = match fields.string("family", issues) {
        None => None,
        Some(At { value, pos }) => match Family::from_name(&value) {
            Some(family) => Some(family),
            None => {
                issues.push(pos.issue(format!("family {value:?} is ipv4 or ipv6")));
                return None;
            }
        },
    };
    let exit_source = match fields.string("exit_source", issues) {
        None => None,
        Some(At { value, pos }) => match value.parse::<IpAddr>() {
            Ok(address) => Some(address),
            Err(_) => {
                issues.push(pos.issue(format!("exit_source {value:?} is not an IP address")));
                return None;
            }
        },
    };
    let findings = fields
        .strings("findings", issues)
        .into_iter()
        .map(|f| f.value)
        .collect();
    let absent = fields
        .strings("absent", issues)
        .into_iter()
        .map(|f| f.value)
        .collect();
    let flow = Flow {
        request: Request {
            from: from?,
            to: to?,
            port,
            protocol: protocol?,
            size,
            via: None,
            family,
        },
        disposition,
        findings,
        absent,
        assumed,
        exit_source,
    };
    if flow.disposition.is_none()
        && flow.findings.is_empty()
        && flow.absent.is_empty()
        && flow.assumed.is_none()
        && flow.exit_source.is_none()
    {
        issues.push(node.pos.issue(
            "a flow must say what to expect: disposition, not_disposition, findings, absent, assumed or exit_source",
        ));
    }
    fields.finish(issues);
    Some(flow)
}

/// Diagnoses each flow and says how it differs from what the case expects
/// (`failures`) and what it reported (`details`).
fn check_flows(
    flows: &[Flow],
    snapshot: &Arc<Snapshot>,
    packs: &LoadedPacks,
    failures: &mut Vec<String>,
    details: &mut Vec<String>,
) {
    for flow in flows {
        let size = flow
            .request
            .size
            .map_or_else(String::new, |size| format!(" ({size})"));
        let name = format!("flow {} -> {}{size}", flow.request.from, flow.request.to);
        details.push(format!(
            "{name} expects {}{}{}{}{}",
            flow.disposition
                .as_ref()
                .map_or_else(|| "any disposition".to_owned(), ToString::to_string),
            flow.assumed
                .map_or_else(String::new, |assumed| format!(", assumed: {assumed}")),
            flow.exit_source
                .map_or_else(String::new, |source| format!(", leaving from {source}")),
            listed(", findings ", &flow.findings),
            listed(", absent ", &flow.absent)
        ));
        let diagnosis = match engine::diagnose(snapshot, &flow.request, packs) {
            Ok(diagnosis) => diagnosis,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let disposition = diagnosis.disposition();
        let exit_source = diagnosis.exit().and_then(|exit| exit.source);
        let ids: Vec<String> = diagnosis
            .findings
            .iter()
            .map(|f| f.id.to_string())
            .collect();
        details.push(format!(
            "{name} reported {disposition}{}{}{}",
            if diagnosis.assumed() {
                " (assumed)"
            } else {
                ""
            },
            exit_source.map_or_else(String::new, |source| format!(", leaving from {source}")),
            listed(", findings ", &ids)
        ));
        if let Some(expected) = &flow.disposition
            && !expected.holds(disposition.as_str())
        {
            failures.push(format!(
                "{name}: expected {expected}, diagnosed {disposition}"
            ));
        }
        if let Some(assumed) = flow.assumed
            && assumed != diagnosis.assumed()
        {
            failures.push(format!(
                "{name}: expected assumed: {assumed}, diagnosed {}",
                if diagnosis.assumed() {
                    "with assumed hops"
                } else {
                    "without assumed hops"
                }
            ));
        }
        if let Some(expected) = flow.exit_source {
            match diagnosis.exit() {
                None => failures.push(format!(
                    "{name}: expected to leave the cluster from {expected}, it does not leave it"
                )),
                Some(exit) if exit.source != Some(expected) => failures.push(format!(
                    "{name}: expected to leave the cluster from {expected}, leaves from {}",
                    exit.source.map_or_else(
                        || "an address the dump does not show".to_owned(),
                        |s| s.to_string()
                    )
                )),
                Some(_) => {}
            }
        }
        let reported = |id: &str| diagnosis.findings.iter().any(|f| f.id.as_str() == id);
        for id in &flow.findings {
            if !reported(id) {
                failures.push(format!("{name}: expected finding {id}, not reported"));
            }
        }
        for id in flow.absent.iter().filter(|id| reported(id)) {
            failures.push(format!("{name}: unexpected finding {id}"));
        }
    }
}

/// `ids` after `prefix`, comma-separated; nothing when there are none.
fn listed(prefix: &str, ids: &[String]) -> String {
    if ids.is_empty() {
        String::new()
    } else {
        format!("{prefix}{}", ids.join(", "))
    }
}

fn run_case(
    source: &PackSource,
    pack: &str,
    case: &Path,
    expectation: &Expectation,
    from: ClusterFrom,
) -> CaseResult {
    let mut failures = Vec::new();
    let mut details = Vec::new();
    if !expectation.findings.is_empty() {
        details.push(listed("expects findings ", &expectation.findings));
    }
    if !expectation.absent.is_empty() {
        details.push(listed("expects absent ", &expectation.absent));
    }
    let (loaded, problems) = LoadedPacks::load_alone(source.clone(), &expectation.overrides);
    // Flows are diagnosed as skoop diagnose would: the built-in packs, with
    // this one in place of its built-in namesake.
    let mut sources: Vec<PackSource> = packs::builtin_sources()
        .into_iter()
        .filter(|builtin| builtin.dir.file_name() != source.dir.file_name())
        .collect();
    sources.push(source.clone());
    let (with_builtins, _) = LoadedPacks::load(sources, &expectation.overrides);
    failures.extend(problems.iter().map(ToString::to_string));
    // A test's snapshot may share files with others inside its pack; one
    // named outside the pack is read as any snapshot is, on its own. One
    // named inside it (`snapshot/`, by default) stays inside it: a link
    // leading out is not followed.
    let inside_pack = named_inside(&expectation.snapshot, &source.dir);
    let boundary = Boundary::new(if inside_pack {
        &source.dir
    } else {
        &expectation.snapshot
    });
    let loaded_snapshot = match boundary.check(&expectation.snapshot) {
        Ok(()) => {
            Snapshot::load_with(&expectation.snapshot, &boundary, from).map_err(|e| e.to_string())
        }
        Err(problem) => Err(format!("snapshot: {problem}")),
    };
    match loaded_snapshot {
        Err(error) => failures.push(error),
        Ok((snapshot, problems)) => {
            failures.extend(problems.iter().map(|p| format!("snapshot: {p}")));
            let snapshot = Arc::new(snapshot);
            check_flows(
                &expectation.flows,
                &snapshot,
                &with_builtins,
                &mut failures,
                &mut details,
            );
            let findings = loaded.evaluate_snapshot(&snapshot);
            details.extend(
                findings
                    .iter()
                    .map(|f| format!("reported {} ({}): {}", f.id, f.status, f.message)),
            );
            for finding in findings
                .iter()
                .filter(|f| f.status == FindingStatus::ScriptError)
            {
                failures.push(format!(
                    "script error in {} for {}: {}",
                    finding.id, finding.about.subject, finding.message
                ));
            }
            let failed = |id: &str| {
                findings
                    .iter()
                    .any(|f| f.id.as_str() == id && f.status == FindingStatus::Failed)
            };
            for id in &expectation.findings {
                if !failed(id) {
                    failures.push(format!("expected finding {id}, not reported"));
                }
            }
            for id in &expectation.absent {
                for finding in findings.iter().filter(|f| f.id.as_str() == id) {
                    failures.push(format!(
                        "unexpected finding {id} ({:?}) for {}: {}",
                        finding.status, finding.about.subject, finding.message
                    ));
                }
            }
        }
    }
    CaseResult {
        pack: pack.to_owned(),
        dir: case.to_path_buf(),
        failures,
        details,
    }
}
