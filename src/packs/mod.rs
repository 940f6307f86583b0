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

mod answers;
mod budget;
pub mod contract;
mod detect;
mod eval;
mod hooks;
mod host;
mod load;
mod model;
mod reads;
mod sandbox;
pub mod scaffold;
mod scope;
pub(crate) mod yaml;

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use rhai::{Dynamic, Engine};

pub use crate::diagnostic::{Evidence, FindingStatus};
pub use budget::{CountingAllocator, limit_run, start_run};
pub use detect::Detected;
pub use eval::{Finding, FromCheck};
pub use hooks::{HOOKS, HookSpec};
pub use host::{Insufficient, display, program_map};
pub use load::{MANIFEST, Override, PackSource};
pub use model::{
    Check, CheckKind, CheckScope, Datapath, DatapathCommand, ForEach, IntRange, Mode, Pack,
    PackKind, ParamType, ParamValue, Parameter, Part, Severity, Version,
};
pub use sandbox::{ScriptError, ScriptErrorKind};
pub use scope::{Context, HopScope, HopStop, Packet, PodRef, StoppingRule, Subject};

use crate::snapshot::Snapshot;
use crate::snapshot::cluster::pod_reads;
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
    /// The modes and snapshot checks' findings of the last snapshot asked
    /// about, per subject (`answers.rs`): what no flow changes is
    /// evaluated once, not once per diagnosis.
    answers: RefCell<answers::Answers>,
    /// Every file of every pack source given to `load`, and each parameter
    /// override as written: all the text the packs' answers can draw a
    /// literal from ([`LoadedPacks::texts`]).
    texts: Vec<String>,
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
    /// `None` for the pack's own finding: its mode cannot be decided, or
    /// its `detect` hook failed.
    pub check: Option<&'p Check>,
    /// How many subjects (node, pod, object, or node and peer) it ran on.
    pub subjects: usize,
    /// Of those, how many its `when:` skipped (not checked at all).
    pub skipped: usize,
    /// What it reported: failures, what it could not tell, script errors.
    pub findings: Vec<Finding>,
    /// What its scripts printed, when asked for.
    pub output: Vec<String>,
}

impl<'p> CheckRun<'p> {
    /// The pack's own finding, as a run of no check.
    pub fn of_pack(pack: &'p Pack, finding: Finding) -> CheckRun<'p> {
        CheckRun {
            pack,
            check: None,
            subjects: 1,
            skipped: 0,
            findings: vec![finding],
            output: Vec::new(),
        }
    }
}

/// How a pack takes part where it applies ([`LoadedPacks::role`]).
#[derive(Debug, Clone, Copy)]
pub enum Role<'p> {
    /// All of it: its checks, and a CNI pack's hooks.
    Whole,
    /// A part of the composed CNI pack `of`: only the checks `part` lends.
    Part { of: &'p Pack, part: &'p Part },
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
            let (pack, pack_problems) = load::load_pack(&mut engine, source, &sources, overrides);
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
        let texts = sources
            .iter()
            .flat_map(|source| source.files.values().cloned())
            .chain(overrides.iter().map(|o| o.value.clone()))
            .collect();
        let loaded = LoadedPacks {
            engine,
            packs,
            notes,
            chosen_cni: None,
            answers: RefCell::default(),
            texts,
        };
        (loaded, problems)
    }

    /// Loads one pack on its own, as it is tested and evaluated: with the
    /// built-in packs it composes (`composes:`), which lend it checks, after
    /// it.
    pub fn load_alone(source: PackSource, overrides: &[Override]) -> (LoadedPacks, Vec<Problem>) {
        let (alone, problems) = LoadedPacks::load(vec![source.clone()], overrides);
        let parts: Vec<&str> = (alone.packs.iter())
            .flat_map(|pack| &pack.composes)
            .map(|part| part.pack.as_str())
            .collect();
        if parts.is_empty() {
            return (alone, problems);
        }
        let mut sources = vec![source];
        sources.extend(
            builtin_sources().into_iter().filter(|builtin| {
                source_name(builtin).is_some_and(|n| parts.contains(&n.as_str()))
            }),
        );
        LoadedPacks::load(sources, overrides)
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

    /// The text of every pack file loaded (manifests, scripts, libraries)
    /// and of every `--set` override: where an address a pack compares
    /// with can be written (`skoop matrix`'s twins, `matrix/twins.rs`).
    pub fn texts(&self) -> &[String] {
        &self.texts
    }

    /// The programmable datapaths the loaded packs model (`datapath:`),
    /// for collection: their state is collected where their programs are
    /// attached.
    pub fn datapaths(&self) -> Vec<Datapath> {
        self.packs()
            .iter()
            .filter_map(|pack| pack.datapath.clone())
            .collect()
    }

    pub fn packs(&self) -> &[Pack] {
        &self.packs
    }

    pub fn get(&self, name: &str) -> Option<&Pack> {
        self.packs.iter().find(|p| p.name == name)
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
        // Which packs apply changed: what they answered may not hold.
        self.answers = RefCell::default();
        Ok(())
    }

    /// The packs that apply to `snapshot`, in load order (see `role`).
    pub fn applying<'a>(&'a self, snapshot: &'a Arc<Snapshot>) -> impl Iterator<Item = &'a Pack> {
        self.packs
            .iter()
            .filter(move |pack| self.role(pack, snapshot).is_some())
    }

    /// The packs that apply to `snapshot` whole, in load order: theirs are
    /// the hooks the walker asks (a part lends checks only).
    pub fn applying_whole<'a>(
        &'a self,
        snapshot: &'a Arc<Snapshot>,
    ) -> impl Iterator<Item = &'a Pack> {
        (self.packs.iter())
            .filter(move |pack| matches!(self.role(pack, snapshot), Some(Role::Whole)))
    }

    /// The CNI pack whose hooks answer for `snapshot`'s CNI: the first that
    /// applies whole, in load order.
    pub fn cni<'a>(&'a self, snapshot: &'a Arc<Snapshot>) -> Option<&'a Pack> {
        self.applying_whole(snapshot)
            .find(|pack| pack.kind == PackKind::Cni)
    }

    /// How `pack` takes part in diagnosing `snapshot`; `None` where it does
    /// not apply. A CNI pack that a composed pack applying here is made of
    /// lends it the checks it names, and nothing else.
    pub fn role<'a>(&'a self, pack: &'a Pack, snapshot: &Arc<Snapshot>) -> Option<Role<'a>> {
        let composed = (self.packs.iter().enumerate())
            .filter(|(index, other)| {
                other.name != pack.name && self.applies_whole(*index, other, snapshot)
            })
            .find_map(|(_, of)| {
                let part = of.composes.iter().find(|part| part.pack == pack.name)?;
                Some(Role::Part { of, part })
            });
        let index = self.packs.iter().position(|p| std::ptr::eq(p, pack));
        composed.or_else(|| {
            index
                .is_some_and(|index| self.applies_whole(index, pack, snapshot))
                .then_some(Role::Whole)
        })
    }

    /// Whether all of a pack (the `index`th) applies, as itself: rules packs
    /// always; a CNI pack when it is the one chosen by hand, or, with none
    /// chosen, when detected (once per snapshot: every hop of every flow
    /// asks).
    fn applies_whole(&self, index: usize, pack: &Pack, snapshot: &Arc<Snapshot>) -> bool {
        match (&self.chosen_cni, pack.kind) {
            (_, PackKind::Rules) => true,
            (Some(chosen), PackKind::Cni) => *chosen == pack.name,
            (None, PackKind::Cni) => self.detection(index, pack, snapshot, Detected::applies),
        }
    }

    /// The pack's own context in `snapshot` (`ctx.params`, `ctx.cluster`),
    /// for the hooks about the pack itself (`detect`, `mode`), and its
    /// evaluator.
    fn own_context<'a>(
        &'a self,
        pack: &'a Pack,
        snapshot: &Arc<Snapshot>,
    ) -> (Context, eval::Evaluator<'a>) {
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
        (ctx, evaluator)
    }

    /// The pack's active mode in `snapshot`: the one its `mode` hook names,
    /// else the first whose `when` holds. `Ok(None)` for a pack without
    /// modes; a hook or `when` that fails (or names no mode) is a finding.
    pub fn active_mode(
        &self,
        pack: &Pack,
        snapshot: &Arc<Snapshot>,
    ) -> Result<Option<String>, Box<Finding>> {
        let (ctx, evaluator) = self.own_context(pack, snapshot);
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
                let message = format!(
                    "hook mode ({}) chose {name:?}, which is not a mode of the pack ({})",
                    function.name,
                    known.join(", ")
                );
                return Err(Box::new(evaluator.unusable_answer(&ctx, "mode", message)));
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
        self.each_check(snapshot, |index, pack, check, evaluator| {
            if check.scope == CheckScope::Hop {
                return None;
            }
            let contexts = eval::subjects(check, &pack.params, snapshot, about);
            // What scripts print is captured as they run: a captured run
            // runs them, whatever was kept.
            let run_once = |ctx: &Context| {
                if capture {
                    return evaluator.run_unless_skipped(check, ctx);
                }
                let key = answers::ContextKey::of(ctx);
                let kept = self
                    .answers
                    .borrow_mut()
                    .about(snapshot)
                    .check(index, &key)
                    .cloned();
                kept.unwrap_or_else(|| {
                    let (found, reads) =
                        pod_reads::capture(|| evaluator.run_unless_skipped(check, ctx));
                    let mut answers = self.answers.borrow_mut();
                    answers
                        .about(snapshot)
                        .keep_check(index, key, (found.clone(), reads));
                    found
                })
            };
            let run = || -> (Vec<Finding>, usize) {
                let mut skipped = 0;
                let mut findings = Vec::new();
                for ctx in &contexts {
                    match run_once(ctx) {
                        Some(found) => findings.extend(found),
                        None => skipped += 1,
                    }
                }
                (findings, skipped)
            };
            let ((findings, skipped), output) = if capture {
                sandbox::capturing_output(run)
            } else {
                (run(), Vec::new())
            };
            Some(CheckRun {
                pack,
                check: Some(check),
                subjects: contexts.len(),
                skipped,
                findings,
                output,
            })
        })
    }

    /// The hop-scoped checks of every applicable pack at one hop of a path.
    pub fn evaluate_hop(&self, hop: &Arc<HopScope>) -> Vec<Finding> {
        let cni_admits: rhai::Array = self
            .cni(&hop.snapshot)
            .into_iter()
            .flat_map(|pack| &pack.policy_admits)
            .map(|admit| {
                let mut map = rhai::Map::new();
                map.insert("protocol".into(), admit.protocol.as_str().into());
                map.insert("why".into(), admit.why.clone().into());
                Dynamic::from_map(map)
            })
            .collect();
        let cni_admits = Dynamic::from_array(cni_admits);
        let family = hop.packet.family();
        self.each_check(&hop.snapshot, |index, pack, check, evaluator| {
            let of_packet = check.family.is_none_or(|wanted| wanted == family);
            if check.scope != CheckScope::Hop || !of_packet {
                return None;
            }
            // Kept for the facts of the hop the check read (`reads.rs`).
            let kept = self
                .answers
                .borrow_mut()
                .about(&hop.snapshot)
                .hop_check(index, hop)
                .cloned();
            let findings = kept.unwrap_or_else(|| {
                let ctx = Context {
                    cni_admits: cni_admits.clone(),
                    ..eval::hop_context(&pack.params, hop)
                };
                let ((findings, read), pods) =
                    pod_reads::capture(|| reads::recording(|| evaluator.run(check, &ctx)));
                let mut answers = self.answers.borrow_mut();
                let answers = answers.about(&hop.snapshot);
                answers.keep_hop_check(index, hop, read, (findings.clone(), pods));
                findings
            });
            Some(CheckRun {
                pack,
                check: Some(check),
                subjects: 1,
                skipped: 0,
                findings,
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
        per_check: impl Fn(
            answers::CheckIndex,
            &'p Pack,
            &'p Check,
            &eval::Evaluator<'p>,
        ) -> Option<CheckRun<'p>>,
    ) -> Vec<CheckRun<'p>> {
        let mut runs = Vec::new();
        for (pack_index, pack) in self.packs.iter().enumerate() {
            let lends = match self.role(pack, snapshot) {
                None => continue,
                Some(Role::Whole) => None,
                Some(Role::Part { part, .. }) => Some(part),
            };
            // A detect hook that failed leaves its pack applying on its
            // signs alone, and says so.
            let detect_failed =
                (pack.kind == PackKind::Cni && lends.is_none() && self.chosen_cni.is_none())
                    .then(|| self.detection(pack_index, pack, snapshot, |d| d.problem.clone()))
                    .flatten();
            if let Some(finding) = detect_failed {
                runs.push(CheckRun::of_pack(pack, *finding));
            }
            let lent = |check: &Check| lends.is_none_or(|part| part.lends(&check.id));
            // A part's mode is asked only when a check it lends is of one.
            let modeless_part = lends.is_some()
                && pack
                    .checks
                    .iter()
                    .filter(|c| lent(c))
                    .all(|c| c.modes.is_empty());
            let kept = self
                .answers
                .borrow_mut()
                .about(snapshot)
                .mode(pack_index)
                .cloned();
            let mode = if modeless_part {
                Ok(None)
            } else {
                kept.unwrap_or_else(|| {
                    let (mode, reads) = pod_reads::capture(|| self.active_mode(pack, snapshot));
                    let mut answers = self.answers.borrow_mut();
                    answers
                        .about(snapshot)
                        .keep_mode(pack_index, (mode.clone(), reads));
                    mode
                })
            };
            let mode = match mode {
                Ok(mode) => mode,
                Err(finding) => {
                    runs.push(CheckRun::of_pack(pack, *finding));
                    continue;
                }
            };
            let evaluator = eval::Evaluator {
                engine: &self.engine,
                pack,
            };
            for (check_index, check) in pack.checks.iter().enumerate() {
                if !lent(check) {
                    continue;
                }
                let in_mode = check.modes.is_empty()
                    || mode.as_ref().is_some_and(|m| check.modes.contains(m));
                if in_mode {
                    runs.extend(per_check(
                        (pack_index, check_index),
                        pack,
                        check,
                        &evaluator,
                    ));
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
/// The `name:` a pack's manifest gives, read without loading the pack.
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
mod tests;
