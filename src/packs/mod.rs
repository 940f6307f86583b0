//! Rule packs: CNI behaviour and CNI-independent checks as data (YAML +
//! Rhai), loaded at run time. `docs/packs.md` is the format's reference.
//!
//! - `yaml` reads manifests into a positioned tree; `load` turns a pack
//!   directory into a [`Pack`], reporting every problem at once.
//! - `sandbox` builds the one Rhai engine the packs share; `host` is the API
//!   scripts call; `scope` what a check or hook sees.
//! - `eval` evaluates checks into [`Finding`]s; `hooks` is the walker's
//!   interface; `scaffold` writes new packs (their tests run in
//!   `crate::pack_tests`, above packs and engine).
//!
//! **Invariant:** loading never stops at the first problem; a script never
//! crashes skoop and never passes silently: its failure is a finding.

mod budget;
mod eval;
mod hooks;
mod host;
mod load;
mod model;
mod sandbox;
pub mod scaffold;
mod scope;
pub(crate) mod yaml;

use std::path::Path;
use std::sync::Arc;

use rhai::{Dynamic, Engine};

pub use crate::diagnostic::{Evidence, FindingStatus};
pub use budget::CountingAllocator;
pub use eval::{Finding, FromCheck};
pub use hooks::{HOOKS, HookSpec};
pub use host::{Insufficient, display};
pub use load::{MANIFEST, Override, PackSource};
pub use model::{
    Check, CheckKind, CheckScope, ForEach, IntRange, Mode, Pack, PackKind, ParamType, ParamValue,
    Parameter, Severity, Version,
};
pub use sandbox::{ScriptError, ScriptErrorKind};
pub use scope::{
    Context, HopScope, HopStop, Packet, PodRef, StoppingRule, Subject, TransportProtocol,
};

use crate::snapshot::Snapshot;
use crate::snapshot::cluster::Cluster;
use crate::snapshot::problem::Problem;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_packs.rs"));
}

/// The packs built into the binary (`rules/` and `plugins/` of the source tree).
pub fn builtin_sources() -> Vec<PackSource> {
    builtin::BUILTIN_PACKS
        .iter()
        .map(|(dir, files)| PackSource {
            dir: Path::new(dir).to_path_buf(),
            builtin: true,
            files: files
                .iter()
                .map(|(name, text)| ((*name).to_owned(), (*text).to_owned()))
                .collect(),
        })
        .collect()
}

/// The pack directories under `dir`: `dir` itself when it holds a
/// `pack.yaml`, else each subdirectory that does.
pub fn discover(dir: &Path) -> Result<Vec<PackSource>, Vec<Problem>> {
    if dir.join(MANIFEST).is_file() {
        return PackSource::read(dir).map(|source| vec![source]);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| {
        vec![Problem::in_file(
            dir,
            format!("cannot read pack directory: {e}"),
        )]
    })?;
    let mut dirs: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(MANIFEST).is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(vec![Problem::in_file(
            dir,
            "no pack here: neither DIR/pack.yaml nor DIR/*/pack.yaml",
        )]);
    }
    let mut sources = Vec::new();
    let mut problems = Vec::new();
    for pack_dir in dirs {
        match PackSource::read(&pack_dir) {
            Ok(source) => sources.push(source),
            Err(more) => problems.extend(more),
        }
    }
    if problems.is_empty() {
        Ok(sources)
    } else {
        Err(problems)
    }
}

/// The name `--cni` takes to apply no CNI pack at all, detected or not.
pub const NO_CNI: &str = "none";

/// A set of loaded packs and the one sandboxed engine they share.
pub struct LoadedPacks {
    engine: Engine,
    packs: Vec<Pack>,
    /// What loading did that a user should know (overrides of built-ins).
    pub notes: Vec<String>,
    /// The CNI pack chosen by hand (`--cni NAME`): it applies whatever
    /// detection says, and no other CNI pack does.
    chosen_cni: Option<String>,
}

impl std::fmt::Debug for LoadedPacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPacks")
            .field(
                "packs",
                &self.packs.iter().map(|p| &p.name).collect::<Vec<_>>(),
            )
            .field("notes", &self.notes)
            .finish()
    }
}

/// Which subjects snapshot checks are run about.
pub struct About<'a> {
    /// Whether a node, pod or object is a subject.
    pub subject: &'a dyn Fn(&Subject) -> bool,
    /// Whether a node is a peer of a check made per remote node.
    pub peer: &'a dyn Fn(&Subject) -> bool,
    /// The only objects object checks may be about (`Subject::Object`s,
    /// looked up by name), or `None` to consider every object of the
    /// cluster: a diagnosis names the few its path involves, so that its
    /// object checks do not scan a large cluster's every pod.
    pub objects: Option<&'a [Subject]>,
}

/// One check run over its subjects ([`LoadedPacks::run_snapshot_checks`]).
#[derive(Debug)]
pub struct CheckRun<'p> {
    pub pack: &'p Pack,
    /// `None` for the pack's own finding when its mode cannot be decided.
    pub check: Option<&'p Check>,
    /// How many subjects (node, pod, object, or node and peer) it ran on.
    pub subjects: usize,
    /// What it reported: failures, what it could not tell, script errors.
    pub findings: Vec<Finding>,
    /// What its scripts printed, when asked for.
    pub output: Vec<String>,
}

impl LoadedPacks {
    /// Loads `sources` in order; a later pack of the same name replaces an
    /// earlier built-in one (and a note says so), while two user packs of one
    /// name are a problem. Returns the packs that loaded and every problem.
    pub fn load(sources: Vec<PackSource>, overrides: &[Override]) -> (LoadedPacks, Vec<Problem>) {
        let mut engine = sandbox::engine();
        let mut packs: Vec<Pack> = Vec::new();
        let mut notes = Vec::new();
        let mut problems = Vec::new();
        for source in &sources {
            let (pack, pack_problems) = load::load_pack(&mut engine, source, overrides);
            problems.extend(pack_problems);
            let Some(pack) = pack else { continue };
            match packs.iter().position(|p| p.name == pack.name) {
                Some(index) if packs[index].builtin && !pack.builtin => {
                    notes.push(format!(
                        "pack {} from {} overrides the built-in one",
                        pack.name,
                        pack.dir.display()
                    ));
                    packs[index] = pack;
                }
                Some(index) => problems.push(Problem::in_file(
                    &pack.dir.join(MANIFEST),
                    format!(
                        "a pack named {} is already loaded from {}",
                        pack.name,
                        packs[index].dir.display()
                    ),
                )),
                None => packs.push(pack),
            }
        }
        for o in overrides {
            if !packs.iter().any(|p| p.name == o.pack)
                && !sources
                    .iter()
                    .any(|s| source_name(s).as_deref() == Some(&o.pack))
            {
                problems.push(o.problem(format!("no pack is called {}", o.pack)));
            }
        }
        let loaded = LoadedPacks {
            engine,
            packs,
            notes,
            chosen_cni: None,
        };
        (loaded, problems)
    }

    /// The built-in packs plus those found in each `pack_path` directory.
    pub fn discover_and_load(
        pack_paths: &[std::path::PathBuf],
        overrides: &[Override],
    ) -> (LoadedPacks, Vec<Problem>) {
        let mut sources = builtin_sources();
        let mut problems = Vec::new();
        for dir in pack_paths {
            match discover(dir) {
                Ok(found) => sources.extend(found),
                Err(more) => problems.extend(more),
            }
        }
        let (loaded, more) = LoadedPacks::load(sources, overrides);
        problems.extend(more);
        (loaded, problems)
    }

    pub fn packs(&self) -> &[Pack] {
        &self.packs
    }

    pub fn get(&self, name: &str) -> Option<&Pack> {
        self.packs.iter().find(|p| p.name == name)
    }

    /// The signals by which a CNI pack recognises its CNI in `cluster`;
    /// empty when it is not there. A rules pack always applies.
    pub fn detect(&self, pack: &Pack, cluster: &Cluster) -> Vec<String> {
        if pack.kind == PackKind::Rules {
            return vec!["rules packs always apply".to_owned()];
        }
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
            if let Some(node) = cluster
                .nodes()
                .find(|n| n.meta.annotations.contains_key(annotation))
            {
                signals.push(format!("node {} annotated {annotation}", node.meta.name));
            }
        }
        for crd in &d.crds {
            if cluster.others().any(|o| {
                o.kind == crd.kind
                    && crd
                        .api_version
                        .as_deref()
                        .is_none_or(|v| v == o.api_version)
            }) {
                signals.push(format!("{} objects", crd.kind));
            }
        }
        signals
    }

    /// Makes `name` the CNI pack that applies, detected or not (`--cni NAME`);
    /// [`NO_CNI`] makes none apply. `Err` lists the CNI packs there are when
    /// no CNI pack has that name.
    pub fn choose_cni(&mut self, name: &str) -> Result<(), String> {
        let cni: Vec<&str> = self
            .packs
            .iter()
            .filter(|p| p.kind == PackKind::Cni)
            .map(|p| p.name.as_str())
            .collect();
        if !cni.contains(&name) && name != NO_CNI {
            return Err(format!(
                "no CNI pack is called {name:?} (CNI packs: {}; {NO_CNI} applies none)",
                cni.join(", ")
            ));
        }
        self.chosen_cni = Some(name.to_owned());
        Ok(())
    }

    /// The packs that apply to `cluster`, in load order (see `applies`).
    pub fn applying<'a>(&'a self, cluster: &'a Cluster) -> impl Iterator<Item = &'a Pack> {
        self.packs
            .iter()
            .filter(move |pack| self.applies(pack, cluster))
    }

    /// Whether a pack's checks run on this cluster: rules packs always; a
    /// CNI pack when it is the one chosen by hand, or, with none chosen, when
    /// detected.
    fn applies(&self, pack: &Pack, cluster: &Cluster) -> bool {
        match (&self.chosen_cni, pack.kind) {
            (_, PackKind::Rules) => true,
            (Some(chosen), PackKind::Cni) => *chosen == pack.name,
            (None, PackKind::Cni) => !self.detect(pack, cluster).is_empty(),
        }
    }

    /// The pack's active mode in `snapshot`: the one its `mode` hook names,
    /// else the first whose `when` holds. `Ok(None)` for a pack without
    /// modes; a hook or `when` that fails (or names no mode) is a finding.
    pub fn active_mode(
        &self,
        pack: &Pack,
        snapshot: &Arc<Snapshot>,
    ) -> Result<Option<String>, Box<Finding>> {
        let ctx = Context::new(
            pack.params.clone(),
            snapshot.clone(),
            Subject::Pack {
                name: pack.name.clone(),
            },
        );
        let evaluator = eval::Evaluator {
            engine: &self.engine,
            pack,
        };
        if let Some(function) = pack.hooks.get("mode") {
            let chosen = evaluator
                .call(function, vec![Dynamic::from(ctx.clone())])
                .map_err(|stop| Box::new(evaluator.pack_finding(&ctx, "mode", stop)))?;
            if !chosen.is_unit() {
                let name = host::display(&chosen);
                if pack.modes.iter().any(|m| m.name == name) {
                    return Ok(Some(name));
                }
                let known: Vec<&str> = pack.modes.iter().map(|m| m.name.as_str()).collect();
                let stop = eval::Stop::Error(ScriptError {
                    kind: sandbox::ScriptErrorKind::Runtime,
                    file: pack.dir.join(MANIFEST),
                    line: None,
                    column: None,
                    message: format!(
                        "hook mode ({}) chose {name:?}, which is not a mode of the pack ({})",
                        function.name,
                        known.join(", ")
                    ),
                });
                return Err(Box::new(evaluator.pack_finding(&ctx, "mode", stop)));
            }
        }
        for mode in &pack.modes {
            let Some(when) = &mode.when else {
                return Ok(Some(mode.name.clone()));
            };
            if evaluator
                .condition(when, &ctx)
                .map_err(|stop| Box::new(evaluator.pack_finding(&ctx, "mode", stop)))?
            {
                return Ok(Some(mode.name.clone()));
            }
        }
        Ok(None)
    }

    /// Every check of every applicable pack over every node, pod and object
    /// of the snapshot (hop checks wait for the walker).
    pub fn evaluate_snapshot(&self, snapshot: &Arc<Snapshot>) -> Vec<Finding> {
        let everything = |_: &Subject| true;
        self.evaluate_snapshot_about(
            snapshot,
            &About {
                subject: &everything,
                peer: &everything,
                objects: None,
            },
        )
    }

    /// [`LoadedPacks::evaluate_snapshot`] about only the subjects `about`
    /// accepts: a diagnosis asks about what its path involves, so that its
    /// checks cost what the path holds, not what the cluster does. A pack's
    /// own findings (its mode, its detection) are always made.
    pub fn evaluate_snapshot_about(
        &self,
        snapshot: &Arc<Snapshot>,
        about: &About<'_>,
    ) -> Vec<Finding> {
        self.run_snapshot_checks(snapshot, about, false)
            .into_iter()
            .flat_map(|run| run.findings)
            .collect()
    }

    /// Each snapshot check of every applicable pack, run over the subjects
    /// `about` accepts, with what it found and (with `capture`) what its
    /// scripts printed: a pack author's view (`skoop packs eval`). A check
    /// outside the pack's active mode is not run and not listed.
    pub fn run_snapshot_checks<'p>(
        &'p self,
        snapshot: &Arc<Snapshot>,
        about: &About<'_>,
        capture: bool,
    ) -> Vec<CheckRun<'p>> {
        self.each_check(snapshot, |pack, check, evaluator| {
            if check.scope == CheckScope::Hop {
                return None;
            }
            let contexts = eval::subjects(check, &pack.params, snapshot, about);
            let run = || -> Vec<Finding> {
                contexts
                    .iter()
                    .flat_map(|ctx| evaluator.run(check, ctx))
                    .collect()
            };
            let (findings, output) = if capture {
                sandbox::capturing_output(run)
            } else {
                (run(), Vec::new())
            };
            Some(CheckRun {
                pack,
                check: Some(check),
                subjects: contexts.len(),
                findings,
                output,
            })
        })
    }

    /// The hop-scoped checks of every applicable pack at one hop of a path.
    pub fn evaluate_hop(&self, hop: &Arc<HopScope>) -> Vec<Finding> {
        self.each_check(&hop.snapshot, |pack, check, evaluator| {
            (check.scope == CheckScope::Hop).then(|| CheckRun {
                pack,
                check: Some(check),
                subjects: 1,
                findings: evaluator.run(check, &eval::hop_context(&pack.params, hop)),
                output: Vec::new(),
            })
        })
        .into_iter()
        .flat_map(|run| run.findings)
        .collect()
    }

    /// Runs `per_check` for each check of each applicable pack that its
    /// active mode selects. A pack whose mode cannot be decided runs no
    /// check: its finding says why.
    fn each_check<'p>(
        &'p self,
        snapshot: &Arc<Snapshot>,
        per_check: impl Fn(&'p Pack, &'p Check, &eval::Evaluator<'p>) -> Option<CheckRun<'p>>,
    ) -> Vec<CheckRun<'p>> {
        let mut runs = Vec::new();
        for pack in &self.packs {
            if !self.applies(pack, &snapshot.cluster) {
                continue;
            }
            let mode = match self.active_mode(pack, snapshot) {
                Ok(mode) => mode,
                Err(finding) => {
                    runs.push(CheckRun {
                        pack,
                        check: None,
                        subjects: 1,
                        findings: vec![*finding],
                        output: Vec::new(),
                    });
                    continue;
                }
            };
            let evaluator = eval::Evaluator {
                engine: &self.engine,
                pack,
            };
            for check in &pack.checks {
                let in_mode = check.modes.is_empty()
                    || mode.as_ref().is_some_and(|m| check.modes.contains(m));
                if in_mode {
                    runs.extend(per_check(pack, check, &evaluator));
                }
            }
        }
        runs
    }

    /// Calls hook `hook` of `pack` with `ctx` (see [`HookSpec`]) and `arg`.
    /// A pack without the hook has no opinion: `Ok(())`. A script that fails
    /// (or cannot decide) is returned as the finding to report.
    pub fn call_hook(
        &self,
        pack: &str,
        hook: &str,
        hop: &Arc<HopScope>,
        arg: Dynamic,
    ) -> Result<Dynamic, Box<Finding>> {
        let Some(pack) = self.get(pack) else {
            return Ok(Dynamic::UNIT);
        };
        let Some(function) = pack.hooks.get(hook) else {
            return Ok(Dynamic::UNIT);
        };
        let evaluator = eval::Evaluator {
            engine: &self.engine,
            pack,
        };
        let ctx = eval::hop_context(&pack.params, hop);
        evaluator
            .call(function, vec![Dynamic::from(ctx.clone()), arg])
            .map_err(|stop| Box::new(evaluator.pack_finding(&ctx, &format!("hook.{hook}"), stop)))
    }
}

/// The name a pack source declares, for messages before it loads.
fn source_name(source: &PackSource) -> Option<String> {
    let root = yaml::parse(source.files.get(MANIFEST)?).ok()?;
    match root.value {
        yaml::Value::Map(entries) => {
            entries
                .into_iter()
                .find_map(|(k, v)| match (k.name.as_str(), v.value) {
                    ("name", yaml::Value::String(name)) => Some(name),
                    _ => None,
                })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::netns::DumpFile;

    /// A pack of kind rules (it always applies) from its manifest and one script.
    fn inline_pack(manifest: &str, script: &str) -> LoadedPacks {
        load_inline(manifest, &[("checks.rhai", script)]).expect("loads")
    }

    /// A rules pack from its manifest and its `lib/` modules, as loaded:
    /// the packs, or every problem as `file:line:col: message`.
    fn pack_with_lib(manifest: &str, lib: &[(&str, &str)]) -> Result<LoadedPacks, Vec<String>> {
        let files: Vec<(String, &str)> = lib
            .iter()
            .map(|(name, text)| (format!("lib/{name}.rhai"), *text))
            .collect();
        let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (f.as_str(), *t)).collect();
        load_inline(manifest, &files)
    }

    /// A pack from its manifest and other files (by path in the pack).
    fn load_inline(manifest: &str, files: &[(&str, &str)]) -> Result<LoadedPacks, Vec<String>> {
        let files = std::iter::once((MANIFEST, manifest))
            .chain(files.iter().copied())
            .map(|(file, text)| (file.to_owned(), text.to_owned()))
            .collect();
        let source = PackSource {
            dir: "inline".into(),
            builtin: false,
            files,
        };
        let (loaded, problems) = LoadedPacks::load(vec![source], &[]);
        if problems.is_empty() {
            Ok(loaded)
        } else {
            Err(problems.iter().map(ToString::to_string).collect())
        }
    }

    /// A pack whose one check compares ip_forward with `expect`.
    fn forwarding_expected(expect: &str) -> String {
        format!(
            r#"name: derived
version: 0.1.0
description: ip_forward as a lib function derives it.
engine: ">=0.1.0"
kind: rules
parameters:
  on: {{type: bool, default: true, doc: Forwarding is on.}}
checks:
  - id: derived.node.forwarding
    severity: warning
    scope: node
    kind: sysctl
    key: net.ipv4.ip_forward
    expect: "{expect}"
    message: "${{subject}}: ${{actual}}"
"#
        )
    }

    const FORWARDING_LIB: &str =
        "fn wanted(params) { if params.on { 1 } else { 0 } }\nfn spin() { loop { } }";

    #[test]
    fn an_expression_calls_a_lib_function() {
        let snapshot = example();
        let manifest = forwarding_expected("${forwarding::wanted(params)}");
        let loaded = pack_with_lib(&manifest, &[("forwarding", FORWARDING_LIB)]).expect("loads");
        assert!(
            loaded.evaluate_snapshot(&snapshot).is_empty(),
            "1 is wanted and found"
        );

        // The parameter reaches the function: with it off, every node fails.
        let source = PackSource {
            dir: "inline".into(),
            builtin: false,
            files: [
                (MANIFEST.to_owned(), manifest),
                ("lib/forwarding.rhai".to_owned(), FORWARDING_LIB.to_owned()),
            ]
            .into_iter()
            .collect(),
        };
        let off = Override::parse("derived.on=false").expect("an override");
        let (loaded, problems) = LoadedPacks::load(vec![source], &[off]);
        assert!(problems.is_empty(), "{problems:?}");
        let findings = loaded.evaluate_snapshot(&snapshot);
        let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "node/node-1: net.ipv4.ip_forward = 1",
                "node/node-2: net.ipv4.ip_forward = 1"
            ]
        );
    }

    #[test]
    fn a_lib_function_in_an_expression_keeps_the_sandbox_limits() {
        let manifest = forwarding_expected("${forwarding::spin()}");
        let loaded = pack_with_lib(&manifest, &[("forwarding", FORWARDING_LIB)]).expect("loads");
        let findings = loaded.evaluate_snapshot(&example());
        assert_eq!(findings.len(), 2, "{findings:?}");
        for finding in findings {
            assert_eq!(finding.status, FindingStatus::ScriptError);
            assert_eq!(
                finding.about.error_kind,
                Some(sandbox::ScriptErrorKind::TooManyOperations),
                "{}",
                finding.message
            );
        }
    }

    /// The problems of loading the pack whose check expects `expect`.
    fn expression_problems(expect: &str, lib: &str) -> Vec<String> {
        match pack_with_lib(&forwarding_expected(expect), &[("forwarding", lib)]) {
            Ok(_) => Vec::new(),
            Err(problems) => problems,
        }
    }

    #[test]
    fn a_misspelt_lib_function_is_a_load_problem_at_its_position() {
        assert_eq!(
            expression_problems("${forwarding::wantd(params)}", FORWARDING_LIB),
            ["inline/pack.yaml:14:16: in ${forwarding::wantd(params)}: \
              lib/forwarding.rhai has no function wantd (it has: spin, wanted)"]
        );
        assert_eq!(
            expression_problems("${1 + forwarding::wanted()}", FORWARDING_LIB),
            ["inline/pack.yaml:14:20: in ${1 + forwarding::wanted()}: \
              forwarding::wanted takes 1 argument(s), not 0"]
        );
        assert_eq!(
            expression_problems("${forwardin::wanted(params)}", FORWARDING_LIB),
            ["inline/pack.yaml:14:16: in ${forwardin::wanted(params)}: \
              forwardin::wanted: the pack has no lib/forwardin.rhai (its modules: forwarding)"]
        );
        // A private function is not the module's to give.
        assert_eq!(
            expression_problems(
                "${forwarding::wanted(params)}",
                "private fn wanted(params) { 1 }"
            ),
            ["inline/pack.yaml:14:16: in ${forwarding::wanted(params)}: \
              lib/forwarding.rhai has no function wanted (it has: none)"]
        );
    }

    #[test]
    fn a_misspelt_parameter_is_a_load_problem_at_its_position() {
        assert_eq!(
            expression_problems("${if params.onn { 1 } else { 0 }}", FORWARDING_LIB),
            [
                "inline/pack.yaml:14:26: in ${if params.onn { 1 } else { 0 }}: \
              params.onn: the pack has no parameter onn (its parameters: on)"
            ]
        );
        // A declared one, alone or at the head of a chain, is fine.
        for fine in [
            "${if params.on { 1 } else { 0 }}",
            "${params.on.to_string()}",
        ] {
            assert_eq!(
                expression_problems(fine, FORWARDING_LIB),
                Vec::<String>::new(),
                "{fine}"
            );
        }
    }

    #[test]
    fn an_expression_is_one_expression_and_a_broken_module_one_problem() {
        let statements = expression_problems("${let x = 1; x}", FORWARDING_LIB);
        assert_eq!(statements.len(), 1, "{statements:?}");
        assert!(
            statements[0].starts_with("inline/pack.yaml:14:16: in ${let x = 1; x}:"),
            "{statements:?}"
        );
        // A variable the scope lacks is refused though a module is imported.
        let undefined = expression_problems("${forwarding::wanted(parms)}", FORWARDING_LIB);
        assert_eq!(
            undefined,
            ["inline/pack.yaml:14:35: in ${forwarding::wanted(parms)}: Undefined variable: parms"]
        );
        // The module's syntax error is the one problem, not one per caller.
        let broken =
            expression_problems("${forwarding::wanted(params)}", "fn wanted(params) { 1 +");
        assert_eq!(broken.len(), 1, "{broken:?}");
        assert!(
            broken[0].starts_with("inline/lib/forwarding.rhai:"),
            "{broken:?}"
        );
    }

    /// The findings of one node check, `kind` and its fields, on node-1 of
    /// the example at `snapshot`, as `STATUS: MESSAGE; expected EXPECTED @ EVIDENCE`.
    fn node_1_findings(snapshot: &str, kind: &str) -> Vec<String> {
        let manifest = format!(
            r#"name: kinds
version: 0.1.0
description: One declarative check.
engine: ">=0.1.0"
kind: rules
checks:
  - id: kinds.node.check
    severity: warning
    scope: node
    when: ${{netns.node == "node-1"}}
{kind}
    message: "${{actual}}"
"#
        );
        let (snapshot, problems) = Snapshot::load(Path::new(snapshot)).expect("the example loads");
        assert!(problems.is_empty(), "{problems:?}");
        inline_pack(&manifest, "")
            .evaluate_snapshot(&Arc::new(snapshot))
            .into_iter()
            .map(|f| {
                let evidence: Vec<String> = f
                    .evidence
                    .iter()
                    .map(|e| {
                        let file = e.file.file_name().map(|n| n.to_string_lossy().into_owned());
                        format!("{}:{:?}:{:?}", file.unwrap_or_default(), e.line, e.column)
                    })
                    .collect();
                format!(
                    "{}: {}; expected {} @ {}",
                    f.status,
                    f.message,
                    f.expected.unwrap_or_default(),
                    evidence.join(" ")
                )
            })
            .collect()
    }

    const VXLAN: &str = "examples/flannel-vxlan";
    const NFTABLES: &str = "examples/flannel-vxlan-nftables-real";

    #[test]
    fn a_jump_kind_finds_the_iptables_jump_and_points_at_the_chain() {
        let kind = |table: &str, chain: &str, target: &str| {
            format!("    kind: jump\n    table: {table}\n    chain: {chain}\n    target: {target}")
        };
        assert!(node_1_findings(VXLAN, &kind("nat", "POSTROUTING", "FLANNEL-POSTRTG")).is_empty());
        let line_of = |needle: &str| {
            let text =
                std::fs::read_to_string(format!("{VXLAN}/nodes/node-1/host/iptables-save.txt"))
                    .expect("the dump");
            text.lines()
                .position(|l| l.starts_with(needle))
                .expect("in the dump")
                + 1
        };
        assert_eq!(
            node_1_findings(VXLAN, &kind("nat", "PREROUTING", "FLANNEL-POSTRTG")),
            [format!(
                "failed: nat PREROUTING does not jump to FLANNEL-POSTRTG; \
                 expected -A PREROUTING -j FLANNEL-POSTRTG in the nat table @ iptables-save.txt:Some({}):Some(1)",
                line_of(":PREROUTING")
            )]
        );
        assert_eq!(
            node_1_findings(VXLAN, &kind("filter", "FORWARD", "CALI-FORWARD")),
            [format!(
                "failed: no CALI-FORWARD chain in the filter table; \
                 expected -A FORWARD -j CALI-FORWARD in the filter table @ iptables-save.txt:Some({}):Some(1)",
                line_of("*filter")
            )]
        );
        // Several jumps, one failure each.
        let both = "    kind: jump\n    jumps:\n      - {table: nat, chain: OUTPUT, target: FLANNEL-POSTRTG}\n      - {table: filter, chain: FORWARD, target: FLANNEL-FWD}";
        let found = node_1_findings(VXLAN, both);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("failed: nat OUTPUT does not jump to FLANNEL-POSTRTG"),
            "{found:?}"
        );
    }

    #[test]
    fn a_jump_kind_with_a_family_reads_the_nftables_ruleset() {
        let kind = |chain: &str, target: &str| {
            format!(
                "    kind: jump\n    family: ip\n    table: kube-proxy\n    chain: {chain}\n    target: {target}"
            )
        };
        assert!(node_1_findings(NFTABLES, &kind("nat-prerouting", "services")).is_empty());
        // A goto in a verdict map written in the rule is a jump too.
        assert!(
            node_1_findings(
                NFTABLES,
                &kind(
                    "service-37MS2T3Z-default/web-affinity/tcp/http",
                    "endpoint-OCJASRAS-default/web-affinity/tcp/http__10.244.0.3/8080"
                )
            )
            .is_empty()
        );
        let found = node_1_findings(NFTABLES, &kind("nat-output", "masquerading"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "failed: chain nat-output of table ip kube-proxy does not jump to masquerading; \
                 expected a rule of chain nat-output in table ip kube-proxy that jumps or goes to masquerading @ nft-ruleset.json:Some(1):Some("
            ),
            "{found:?}"
        );
        assert_eq!(
            node_1_findings(NFTABLES, &kind("nat-output", "no-such-chain")),
            [
                "failed: no chain no-such-chain in table ip kube-proxy; expected a rule of chain \
              nat-output in table ip kube-proxy that jumps or goes to no-such-chain @ nft-ruleset.json:None:None"
            ]
        );
        // Without nft-ruleset.json: cannot tell, never a pass.
        let unknown = node_1_findings(VXLAN, &kind("nat-prerouting", "services"));
        assert_eq!(unknown.len(), 1, "{unknown:?}");
        assert!(
            unknown[0]
                .starts_with("cannot tell: nft-ruleset.json of node/node-1 was not collected"),
            "{unknown:?}"
        );
    }

    #[test]
    fn a_device_kind_checks_a_vxlan_devices_vni_port_local_address_and_mac() {
        let device = |fields: &str| format!("    kind: device\n    name: flannel.1\n{fields}");
        let right = "    vni: 1\n    port: 8472\n    local: 172.18.0.11\n    address: 10.244.1.0/32\n    mac: F2:50:C6:F2:EF:FD";
        assert!(
            node_1_findings(VXLAN, &device(right)).is_empty(),
            "flannel.1 as the lab made it"
        );
        let wrong = "    vni: 4096\n    port: 4789\n    local: 172.18.0.12\n    address: 10.244.1.0/24\n    mac: 52:04:a1:8d:72:13";
        let found = node_1_findings(VXLAN, &device(wrong));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "failed: flannel.1: VNI 1, UDP port 8472, local 172.18.0.11, MAC f2:50:c6:f2:ef:fd, \
                 address 10.244.1.0/32, fe80::f050:c6ff:fef2:effd/64; \
                 expected flannel.1: VNI 4096, UDP port 4789, local 172.18.0.12, MAC 52:04:a1:8d:72:13, address 10.244.1.0/24 @ ip-link.json:Some(1):Some("
            ),
            "{found:?}"
        );
        // A field that is () where it is evaluated is not checked.
        assert!(node_1_findings(VXLAN, &device("    vni: ${()}\n    mtu: 1450")).is_empty());
        // A missing device says what it should have been.
        let missing = node_1_findings(
            VXLAN,
            "    kind: device\n    name: flannel.4096\n    device_kind: vxlan\n    vni: 4096",
        );
        assert_eq!(
            missing,
            [
                "failed: no device flannel.4096; expected flannel.4096: kind vxlan, VNI 4096 @ ip-link.json:None:None"
            ]
        );
    }

    #[test]
    fn neighbour_and_fdb_kinds_name_the_entry_found_instead() {
        assert!(node_1_findings(VXLAN, "    kind: neighbour\n    dst: 10.244.2.0\n    dev: flannel.1\n    lladdr: 52:04:A1:8D:72:13").is_empty());
        let neighbour = node_1_findings(
            VXLAN,
            "    kind: neighbour\n    dst: 10.244.2.0\n    dev: flannel.1\n    lladdr: 52:04:a1:8d:72:14",
        );
        assert_eq!(neighbour.len(), 1, "{neighbour:?}");
        assert!(
            neighbour[0].starts_with("failed: neighbour 10.244.2.0 on flannel.1 has lladdr 52:04:a1:8d:72:13 (PERMANENT); \
                 expected neighbour 10.244.2.0 dev flannel.1 lladdr 52:04:a1:8d:72:14 @ ip-neigh.json:Some(1):Some("),
            "{neighbour:?}"
        );
        let fdb = node_1_findings(
            VXLAN,
            "    kind: fdb\n    dev: flannel.1\n    mac: 52:04:a1:8d:72:13\n    dst: 172.18.0.13",
        );
        assert_eq!(fdb.len(), 1, "{fdb:?}");
        assert!(
            fdb[0].starts_with("failed: the FDB entry for 52:04:a1:8d:72:13 on flannel.1 sends to 172.18.0.12; \
                 expected fdb 52:04:a1:8d:72:13 dev flannel.1 dst 172.18.0.13 @ bridge-fdb.json:Some(1):Some("),
            "{fdb:?}"
        );
        let route = node_1_findings(
            VXLAN,
            "    kind: route\n    dst: 10.244.2.0/24\n    via: 10.244.2.0\n    onlink: ${false}",
        );
        assert!(route.is_empty(), "{route:?}");
        let not_onlink = node_1_findings(
            VXLAN,
            "    kind: route\n    dst: 10.244.9.0/24\n    via: 10.244.9.0\n    onlink: true",
        );
        assert_eq!(
            not_onlink,
            [
                "failed: no route to 10.244.9.0/24 in table main; expected 10.244.9.0/24 via 10.244.9.0 onlink (table main) @ ip-route.json:None:None"
            ]
        );
    }

    #[test]
    fn a_script_check_says_what_it_expected_itself() {
        let manifest = r#"name: said
version: 0.1.0
description: A script check with expected.
engine: ">=0.1.0"
kind: rules
checks:
  - id: said.node.check
    severity: warning
    scope: node
    kind: script
    function: check
    expected: the pack's words
    message: "${actual}"
"#;
        assert_eq!(
            load_inline(manifest, &[("checks.rhai", "fn check(ctx) { }")]).err(),
            Some(vec![
                "inline/pack.yaml:12:15: `expected` is for the declarative kinds; \
                 a script check returns its own"
                    .to_owned()
            ])
        );
    }

    fn example() -> Arc<Snapshot> {
        let (snapshot, problems) =
            Snapshot::load(Path::new("examples/flannel-vxlan")).expect("the example loads");
        assert!(problems.is_empty(), "{problems:?}");
        Arc::new(snapshot)
    }

    /// A CNI pack that no cluster has (its DaemonSet is nowhere) and whose
    /// one check fails on every node of the example.
    const UNDETECTED_CNI: &str = r#"
name: ghost
version: 0.1.0
description: A CNI nobody runs.
engine: ">=0.1.0"
kind: cni
detect:
  daemonsets: [{namespace: kube-system, name: ghost-node}]
checks:
  - id: ghost.node.forwarding
    doc: Fails wherever ip_forward is 1.
    severity: warning
    scope: node
    kind: sysctl
    key: net.ipv4.ip_forward
    expect: 7
    message: "${subject}: ${actual}"
"#;

    #[test]
    fn a_cni_pack_chosen_by_hand_applies_though_not_detected() {
        let mut loaded = inline_pack(UNDETECTED_CNI, "");
        let snapshot = example();
        assert!(
            loaded.evaluate_snapshot(&snapshot).is_empty(),
            "not detected, not applied"
        );
        assert!(
            loaded
                .choose_cni("calico")
                .unwrap_err()
                .contains("CNI packs: ghost")
        );
        loaded.choose_cni("ghost").unwrap();
        let findings = loaded.evaluate_snapshot(&snapshot);
        assert_eq!(findings.len(), 2, "one per node: {findings:?}");
        assert!(
            findings
                .iter()
                .all(|f| f.id.as_str() == "ghost.node.forwarding")
        );
    }

    const TWO_MODES: &str = r#"
name: two
version: 0.1.0
description: Two modes and a hook that picks one.
engine: ">=0.1.0"
kind: rules
modes:
  first: {doc: Chosen by its when., when: "${true}"}
  second: {doc: Never chosen by its when., when: "${false}"}
hooks: {mode: mode}
"#;

    fn chosen(hook_body: &str) -> Result<Option<String>, Box<Finding>> {
        let loaded = inline_pack(TWO_MODES, &format!("fn mode(ctx) {{ {hook_body} }}"));
        let pack = loaded.get("two").expect("loaded");
        loaded.active_mode(pack, &example())
    }

    #[test]
    fn mode_hook_overrules_the_modes_when() {
        assert_eq!(
            chosen(r#""second""#).ok().flatten().as_deref(),
            Some("second")
        );
    }

    #[test]
    fn mode_hook_returning_unit_leaves_the_choice_to_when() {
        assert_eq!(chosen("()").ok().flatten().as_deref(), Some("first"));
    }

    #[test]
    fn mode_hook_naming_no_mode_is_a_pack_finding() {
        let finding = chosen(r#""third""#).expect_err("not a mode");
        assert_eq!(finding.id.as_str(), "two.mode");
        assert_eq!(finding.status, FindingStatus::ScriptError);
        assert!(finding.message.contains("\"third\""), "{}", finding.message);
    }

    #[test]
    fn an_older_packs_intent_section_loads_and_is_not_read() {
        let manifest = format!(
            "{TWO_MODES}intent:\n  encapsulation:\n    - {{kind: vxlan, device: flannel.1, overhead: 50}}\n  pod_mtu: 1450\n"
        );
        let loaded = inline_pack(&manifest, "fn mode(ctx) { () }");
        assert!(loaded.get("two").is_some());
    }

    fn evidence_of(file: &str) -> Finding {
        let manifest = r#"
name: ev
version: 0.1.0
description: One script check that names its evidence.
engine: ">=0.1.0"
kind: rules
checks:
  - id: ev.node.neighbour
    severity: warning
    scope: node
    kind: script
    function: neighbour
    message: "${actual}"
"#;
        let script = format!(
            r#"fn neighbour(ctx) {{
                if ctx.netns.node != "node-1" {{ return; }}
                #{{actual: "a", expected: "b", file: "{file}", find: `"dst":"10.244.2.0"`}}
            }}"#
        );
        let findings = inline_pack(manifest, &script).evaluate_snapshot(&example());
        assert_eq!(findings.len(), 1, "{findings:?}");
        findings.into_iter().next().expect("one finding")
    }

    #[test]
    fn script_check_evidence_is_located_in_the_subjects_dump() {
        let finding = evidence_of(DumpFile::IpNeigh.name());
        assert_eq!(finding.status, FindingStatus::Failed);
        let [evidence] = finding.evidence.as_slice() else {
            panic!("one piece of evidence: {:?}", finding.evidence);
        };
        assert!(
            evidence
                .file
                .ends_with("examples/flannel-vxlan/nodes/node-1/host/ip-neigh.json"),
            "{evidence}"
        );
        assert_eq!((evidence.line, evidence.column), (Some(1), Some(3)));
    }

    #[test]
    fn script_check_evidence_outside_the_dump_files_is_a_script_error() {
        let finding = evidence_of("../../../cluster/nodes.yaml");
        assert_eq!(finding.status, FindingStatus::ScriptError);
        assert!(
            finding.message.contains("not a dump file"),
            "{}",
            finding.message
        );
    }

    /// A Service check whose script names `objects` as its evidence.
    fn object_evidence_of(objects: &str) -> Finding {
        let manifest = r#"
name: ev
version: 0.1.0
description: One object check that names the objects it rests on.
engine: ">=0.1.0"
kind: rules
checks:
  - id: ev.service.slices
    severity: warning
    scope: object
    object: {kind: Service}
    kind: script
    function: slices
    message: "${actual}"
"#;
        let script = format!(
            r#"fn slices(ctx) {{
                let svc = ctx.object;
                let slices = ctx.cluster.endpoint_slices(svc.namespace, svc.name);
                #{{actual: "a", objects: {objects}}}
            }}"#
        );
        let findings = inline_pack(manifest, &script).evaluate_snapshot(&example());
        assert_eq!(findings.len(), 1, "{findings:?}");
        findings.into_iter().next().expect("one finding")
    }

    #[test]
    fn script_check_evidence_may_be_the_objects_it_rests_on() {
        let finding = object_evidence_of("slices.map(|s| s.source)");
        assert_eq!(finding.status, FindingStatus::Failed, "{finding:?}");
        let [evidence] = finding.evidence.as_slice() else {
            panic!("the service's one slice: {:?}", finding.evidence);
        };
        assert!(
            evidence
                .file
                .ends_with("examples/flannel-vxlan/cluster/endpointslices.yaml"),
            "{evidence}"
        );
        assert!(evidence.line.is_some_and(|line| line > 1), "{evidence}");
    }

    #[test]
    fn script_check_objects_that_are_no_objects_source_are_a_script_error() {
        for objects in [
            r#"["/etc/passwd:1"]"#,
            r#"[`${ctx.cluster.service("default", "web").source}x`]"#,
            r#""not an array""#,
        ] {
            let finding = object_evidence_of(objects);
            assert_eq!(finding.status, FindingStatus::ScriptError, "{objects}");
            assert!(finding.message.contains("source"), "{}", finding.message);
        }
    }

    fn hop_on_node_1(dst: &str) -> Arc<HopScope> {
        hop_in(
            example(),
            crate::snapshot::NetnsId::Host {
                node: "node-1".into(),
            },
            dst,
        )
    }

    fn hop_in(
        snapshot: Arc<Snapshot>,
        netns: crate::snapshot::NetnsId,
        dst: &str,
    ) -> Arc<HopScope> {
        let packet = Packet {
            src: "10.244.1.2".parse().expect("ip"),
            dst: dst.parse().expect("ip"),
            protocol: TransportProtocol::Tcp,
            src_port: Some(40000),
            dst_port: Some(8080),
            mark: 0,
            size: 1400,
        };
        Arc::new(HopScope {
            in_iface: Some("cni0".into()),
            forwarding: true,
            ..HopScope::new(snapshot, netns, packet)
        })
    }

    /// The Flannel pack's walker hooks on the VXLAN example, whose
    /// net-conf.json says vxlan and 10.244.0.0/16.
    #[test]
    fn flannel_hooks_encapsulate_to_the_peer_and_masquerade_what_leaves_the_network() {
        let source = PackSource::read(Path::new("plugins/flannel")).expect("readable");
        let (loaded, problems) = LoadedPacks::load(vec![source], &[]);
        assert!(problems.is_empty(), "{problems:?}");
        let call = |hook: &str, dst: &str| {
            let hop = hop_on_node_1(dst);
            let packet = Dynamic::from(hop.packet.clone());
            loaded
                .call_hook("flannel", hook, &hop, packet)
                .unwrap_or_else(|finding| panic!("{hook}: {}", finding.message))
        };
        let encap = call("encapsulation", "10.244.2.3")
            .try_cast::<rhai::Map>()
            .expect("remote pod traffic is encapsulated");
        let field = |name: &str| encap.get(name).map(host::display).unwrap_or_default();
        assert_eq!(field("kind"), "vxlan");
        assert_eq!(field("dev"), "flannel.1");
        assert_eq!(field("outer_src"), "172.18.0.11");
        assert_eq!(field("outer_dst"), "172.18.0.12");
        assert_eq!(
            (field("vni"), field("port"), field("overhead")),
            ("1".into(), "8472".into(), "50".into())
        );
        assert!(
            call("encapsulation", "10.244.1.3").is_unit(),
            "a local pod is not"
        );
        assert_eq!(call("masquerade", "10.244.2.3").as_bool(), Ok(false));
        assert_eq!(call("masquerade", "8.8.8.8").as_bool(), Ok(true));
    }

    /// Flannel's next_hop and pod_interface on node-2 of the partial VXLAN
    /// example, whose dump is missing: the walker's stand-in for it. Each
    /// backend routes another node's pod CIDR its own way; the host
    /// interface cannot be named without the node's dump.
    #[test]
    fn flannel_next_hop_routes_each_pod_cidr_as_the_backend_does_without_the_nodes_dump() {
        let (snapshot, problems) =
            Snapshot::load(Path::new("examples/flannel-vxlan-partial")).expect("the example loads");
        assert!(problems.is_empty(), "{problems:?}");
        let snapshot = Arc::new(snapshot);
        let node_2 = crate::snapshot::NetnsId::Host {
            node: "node-2".into(),
        };
        let web_3 = crate::snapshot::NetnsId::Pod {
            node: "node-2".into(),
            namespace: "default".into(),
            name: "web-3".into(),
        };
        let next_hop = |backend: &str, netns: &crate::snapshot::NetnsId, dst: &str| {
            let source = PackSource::read(Path::new("plugins/flannel")).expect("readable");
            let set = Override::parse(&format!("flannel.backend={backend}")).expect("override");
            let (loaded, problems) = LoadedPacks::load(vec![source], &[set]);
            assert!(problems.is_empty(), "{problems:?}");
            let hop = hop_in(snapshot.clone(), netns.clone(), dst);
            let packet = Dynamic::from(hop.packet.clone());
            let answer = loaded
                .call_hook("flannel", "next_hop", &hop, packet)
                .unwrap_or_else(|finding| panic!("{backend}: {}", finding.message));
            if answer.is_unit() {
                return "()".to_string();
            }
            let map = answer.try_cast::<rhai::Map>().expect("a map");
            let field = |name: &str| map.get(name).map(host::display).unwrap_or_default();
            format!("dev {} via {}", field("dev"), field("via"))
        };
        assert_eq!(
            next_hop("vxlan", &node_2, "10.244.1.2"),
            "dev flannel.1 via 10.244.1.0"
        );
        assert_eq!(
            next_hop("ipip", &node_2, "10.244.1.2"),
            "dev flannel.ipip via 172.18.0.11"
        );
        assert_eq!(
            next_hop("host-gw", &node_2, "10.244.1.2"),
            "dev  via 172.18.0.11"
        );
        assert_eq!(next_hop("vxlan", &node_2, "10.244.2.2"), "dev cni0 via ");
        assert_eq!(
            next_hop("vxlan", &node_2, "8.8.8.8"),
            "()",
            "not flannel's to route"
        );
        assert_eq!(
            next_hop("vxlan", &web_3, "10.244.1.2"),
            "dev eth0 via 10.244.2.1"
        );

        let source = PackSource::read(Path::new("plugins/flannel")).expect("readable");
        let (loaded, _) = LoadedPacks::load(vec![source], &[]);
        let hop = hop_in(snapshot.clone(), node_2, "10.244.2.3");
        let pod = PodRef::new(&snapshot, "default", "web-3").expect("web-3");
        let interface = loaded
            .call_hook("flannel", "pod_interface", &hop, Dynamic::from(pod))
            .expect("answers")
            .try_cast::<rhai::Map>()
            .expect("a map");
        assert!(interface["host_veth"].is_unit(), "named at random");
        assert_eq!(host::display(&interface["pod_dev"]), "eth0");
        assert!(
            interface["mtu"].is_unit(),
            "no host MTU without the node's dump"
        );
    }
}
