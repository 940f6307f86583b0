//! Reading a pack directory into a [`Pack`]: the manifest checked field by
//! field, every script and expression compiled once, hooks checked for
//! existence and arity, parameters type-checked with overrides folded in.
//!
//! **Invariant:** loading never stops at the first problem. A pack with
//! problems is not loaded, and every problem is returned, each positioned
//! as `file:line:col` in the manifest or the script it is in.
//!
//! Its rooms: `source` the pack's files as read from disk; `parameters`
//! their declarations and `--set` overrides; `scripts` the scripts, `lib/`
//! modules and the hooks naming their functions; `checks` each check and
//! the fields of its kind; `expressions` the `${...}` values every field
//! may hold. This file reads the manifest's other fields.

mod checks;
mod expressions;
mod parameters;
mod scripts;
mod source;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use rhai::Engine;

use super::contract::{CONTRACT, UNVERSIONED};
use super::model::*;
use super::sandbox::library_module;
use super::yaml::{self, At, Fields, Issues, Node};
use crate::net::Protocol;
use crate::snapshot::problem::Problem;
use checks::CheckContext;
use expressions::ExpressionCompiler;
pub use parameters::Override;
use parameters::params_map;
pub use source::{MANIFEST, PackSource};

/// Loads one pack. `None` when it has any problem; the problems are all
/// returned. `sources` are every pack being loaded: a composed pack imports
/// the `lib/` modules of the packs it is made of.
pub fn load_pack(
    engine: &mut Engine,
    source: &PackSource,
    sources: &[PackSource],
    overrides: &[Override],
) -> (Option<Pack>, Vec<Problem>) {
    let manifest_path = source.path(MANIFEST);
    let Some(text) = source.files.get(MANIFEST) else {
        let problem = Problem::in_file(&manifest_path, "no pack.yaml");
        return (None, vec![problem]);
    };
    let root = match yaml::parse(text) {
        Ok(root) => root,
        Err(issue) => return (None, vec![Problem::from_issue(&manifest_path, issue)]),
    };
    let mut loader = Loader {
        source,
        sources,
        borrowed_library: BTreeMap::new(),
        text,
        issues: Issues::default(),
        problems: Vec::new(),
        broken_scripts: Vec::new(),
    };
    let pack = loader.pack(engine, &root, overrides);
    let mut problems: Vec<Problem> = loader
        .issues
        .0
        .into_iter()
        .map(|issue| Problem::from_issue(&manifest_path, issue))
        .collect();
    problems.extend(loader.problems);
    problems.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    if problems.is_empty() {
        (pack, problems)
    } else {
        (None, problems)
    }
}

struct Loader<'a> {
    source: &'a PackSource,
    sources: &'a [PackSource],
    /// The `lib/` modules of the packs this one composes, by module name.
    borrowed_library: BTreeMap<String, String>,
    /// The manifest's text, to place expression errors exactly.
    text: &'a str,
    /// Problems in the manifest.
    issues: Issues,
    /// Problems in other files (scripts, overrides).
    problems: Vec<Problem>,
    /// The scripts that failed to compile: a function one of them declares
    /// is not reported missing, so that one syntax error is one problem, not
    /// one more per check and hook that calls into that script.
    broken_scripts: Vec<String>,
}

/// Reads `namespace` (optional) and `name` of a detection signal.
fn named<'a>(node: &'a Node, what: &str, issues: &mut Issues) -> Option<(NamedObject, Fields<'a>)> {
    let mut f = Fields::of(node, what, issues)?;
    let namespace = f.string("namespace", issues).map(|n| n.value);
    let name = f.required_string("name", issues)?.value;
    Some((NamedObject { namespace, name }, f))
}

/// Reads `contract:`, the pack contract the pack was written for: a whole
/// number from 1 to the one this skoop implements.
fn contract(node: &Node, issues: &mut Issues) -> Option<(u32, yaml::Pos)> {
    let version = match node.value {
        yaml::Value::Int(n) => u32::try_from(n).ok().filter(|n| *n >= UNVERSIONED),
        _ => None,
    };
    match version {
        Some(version) if version <= CONTRACT => Some((version, node.pos)),
        Some(version) => {
            issues.push(node.pos.issue(format!(
                "the pack is written for contract {version}, this skoop implements contracts {UNVERSIONED} to {CONTRACT}"
            )));
            None
        }
        None => {
            let found = match &node.value {
                yaml::Value::Int(n) => n.to_string(),
                other => other.kind().to_string(),
            };
            issues.push(node.pos.issue(format!(
                "contract must be a whole number from {UNVERSIONED} to {CONTRACT}, found {found}"
            )));
            None
        }
    }
}

/// Reads a keyword field against its table of spellings.
fn keyword<T: Copy>(
    at: &At<String>,
    table: &[(&'static str, T)],
    what: &str,
    issues: &mut Issues,
) -> Option<T> {
    let found = table
        .iter()
        .find(|(name, _)| *name == at.value)
        .map(|(_, v)| *v);
    if found.is_none() {
        let names: Vec<&str> = table.iter().map(|(name, _)| *name).collect();
        issues.push(at.pos.issue(format!(
            "{what} {:?} is not one of {}",
            at.value,
            names.join(", ")
        )));
    }
    found
}

impl Loader<'_> {
    fn pack(&mut self, engine: &mut Engine, root: &Node, overrides: &[Override]) -> Option<Pack> {
        let issues = &mut self.issues;
        let mut top = Fields::of(root, "pack.yaml", issues)?;
        let name = top.required_string("name", issues);
        if let Some(name) = &name {
            let valid = !name.value.is_empty()
                && name
                    .value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !valid {
                issues.push(name.pos.issue(format!(
                    "pack name {:?} must be lowercase letters, digits and dashes",
                    name.value
                )));
            }
        }
        let version = top.required_string("version", issues).and_then(|v| {
            let parsed = Version::parse(&v.value);
            if parsed.is_none() {
                issues.push(v.pos.issue(format!(
                    "version {:?} is not a semantic version MAJOR.MINOR.PATCH",
                    v.value
                )));
            }
            parsed
        });
        let description = top.required_string("description", issues);
        let engine_req = top.required_string("engine", issues);
        if let Some(req) = &engine_req {
            match VersionReq::parse(&req.value) {
                Ok(parsed) if !parsed.matches(Version::engine()) => {
                    issues.push(req.pos.issue(format!(
                        "the pack needs engine {}, this is skoop {}",
                        req.value,
                        Version::engine()
                    )))
                }
                Ok(_) => {}
                Err(message) => issues.push(req.pos.issue(message)),
            }
        }
        let contract = top.take("contract").and_then(|node| contract(node, issues));
        let kind = top.required_string("kind", issues).and_then(|k| {
            keyword(
                &k,
                &[("cni", PackKind::Cni), ("rules", PackKind::Rules)],
                "kind",
                issues,
            )
        });
        let detect = top
            .take("detect")
            .map(|node| self.detection(node))
            .unwrap_or_default();
        let pack_name = name.as_ref().map_or("", |n| n.value.as_str()).to_owned();
        let parameters = top
            .take("parameters")
            .map(|node| self.parameters(node, &pack_name, overrides))
            .unwrap_or_default();
        let params = params_map(&parameters);
        let composes = top
            .take("composes")
            .map(|node| self.composes(node, &pack_name, kind))
            .unwrap_or_default();

        // The pack's `lib/` stays importable until its expressions are
        // compiled: an expression calling `MODULE::f(...)` embeds the module.
        let (scripts, library) = self.compile_scripts(engine);
        let compiler = ExpressionCompiler::new(params.clone(), library);

        let modes = top
            .take("modes")
            .map(|node| self.modes(node, engine, &compiler))
            .unwrap_or_default();
        let mode_names: Vec<String> = modes.iter().map(|m| m.name.clone()).collect();
        // `intent:` is obsolete: the walker asks the hooks what the CNI
        // does, and what it programs is checked by `checks:`. An older
        // pack's `intent:` is still accepted, and not read.
        top.take("intent");
        let hooks = top
            .take("hooks")
            .map(|node| self.hooks(node, &scripts))
            .unwrap_or_default();
        let checks = top
            .take("checks")
            .map(|node| {
                let context = CheckContext {
                    engine,
                    compiler: &compiler,
                    pack: &pack_name,
                    modes: &mode_names,
                    scripts: &scripts,
                };
                self.checks(node, &context)
            })
            .unwrap_or_default();
        let policy_admits = top
            .take("network_policy")
            .map(|node| self.network_policy(node))
            .unwrap_or_default();
        let datapath = top.take("datapath").map(|node| self.datapath(node));
        top.finish(&mut self.issues);
        engine.set_module_resolver(rhai::module_resolvers::DummyModuleResolver::new());
        // The engine asks the hook about the programs the pack claims.
        match (&datapath, hooks.contains_key("datapath")) {
            (Some(_), false) => self.issues.push(root.pos.issue(
                "`datapath` claims programs, but `hooks` has no `datapath` hook to say what they do",
            )),
            (None, true) => self.issues.push(root.pos.issue(
                "the `datapath` hook answers for no program: say which in `datapath: {programs: [...]}`",
            )),
            _ => {}
        }

        if kind == Some(PackKind::Cni) && detect.is_empty() {
            self.issues.push(
                root.pos
                    .issue("a cni pack needs `detect`: how its CNI is recognised in a snapshot"),
            );
        }
        Some(Pack {
            name: name?.value,
            version: version?,
            description: description?.value,
            engine: engine_req?.value,
            contract: contract.map_or(UNVERSIONED, |(version, _)| version),
            contract_at: contract.map(|(_, pos)| (pos.line, pos.column)),
            kind: kind?,
            dir: self.source.dir.clone(),
            builtin: self.source.builtin,
            detect,
            parameters,
            params,
            modes,
            hooks,
            checks,
            scripts,
            policy_admits,
            datapath,
            composes,
        })
    }

    /// `composes: [{pack: NAME, checks: [ID or PREFIX*]}]`: the CNI packs
    /// this one is made of. Their `lib/` modules become importable here.
    fn composes(&mut self, node: &Node, own: &str, kind: Option<PackKind>) -> Vec<Part> {
        let mut parts = Vec::new();
        if kind != Some(PackKind::Cni) {
            self.issues
                .push(node.pos.issue("only a cni pack composes others"));
            return parts;
        }
        for item in yaml::seq(node, "composes", &mut self.issues) {
            let Some(mut f) = Fields::of(item, "a composes entry", &mut self.issues) else {
                continue;
            };
            let pack = f.required_string("pack", &mut self.issues);
            let checks = f.strings("checks", &mut self.issues);
            f.finish(&mut self.issues);
            let Some(pack) = pack else { continue };
            // A part being loaded beside it, else the built-in one (a pack
            // loaded alone to be tested or evaluated).
            let named = |s: &PackSource| super::source_name(s).as_deref() == Some(&pack.value);
            let part = (self.sources.iter().find(|s| named(s)).cloned())
                .or_else(|| super::builtin_sources().into_iter().find(named))
                .filter(|_| pack.value != own);
            let Some(part) = part else {
                self.issues.push(pack.pos.issue(format!(
                    "no other pack named {:?} is loaded: a composed pack is made of loaded CNI packs",
                    pack.value
                )));
                continue;
            };
            for check in &checks {
                let prefix = format!("{}.", pack.value);
                let literal = check.value.strip_suffix('*').unwrap_or(&check.value);
                if !literal.starts_with(&prefix) || literal[prefix.len()..].contains('*') {
                    self.issues.push(check.pos.issue(format!(
                        "{:?} must be a check id of {}, or a prefix of them followed by one `*`",
                        check.value, pack.value
                    )));
                }
            }
            for (file, text) in &part.files {
                let Some(module) = library_module(file) else {
                    continue;
                };
                let own_file = self.source.files.contains_key(file);
                if own_file || self.borrowed_library.contains_key(module) {
                    self.issues.push(pack.pos.issue(format!(
                        "{}'s lib/{module}.rhai has the name of a module this pack already imports",
                        pack.value
                    )));
                    continue;
                }
                self.borrowed_library
                    .insert(module.to_owned(), text.clone());
            }
            parts.push(Part {
                pack: pack.value,
                checks: checks.into_iter().map(|c| c.value).collect(),
            });
        }
        parts
    }

    /// `datapath: {programs: [NAME or PREFIX*], collect: [{file, command}]}`.
    fn datapath(&mut self, node: &Node) -> Datapath {
        let issues = &mut self.issues;
        let mut datapath = Datapath {
            programs: Vec::new(),
            collect: Vec::new(),
        };
        let Some(mut fields) = Fields::of(node, "datapath", issues) else {
            return datapath;
        };
        for program in fields.strings("programs", issues) {
            let literal = program.value.strip_suffix('*').unwrap_or(&program.value);
            if literal.is_empty() || literal.contains('*') {
                issues.push(program.pos.issue(format!(
                    "program {:?} must be a name, or a prefix followed by one `*`",
                    program.value
                )));
                continue;
            }
            datapath.programs.push(program.value);
        }
        if datapath.programs.is_empty() {
            issues.push(
                node.pos
                    .issue("`datapath` needs `programs`: the names it claims"),
            );
        }
        for item in fields
            .take("collect")
            .map(|list| yaml::seq(list, "collect", issues))
            .unwrap_or_default()
        {
            let Some(mut f) = Fields::of(item, "a collect entry", issues) else {
                continue;
            };
            let file = f.required_string("file", issues);
            let command = f.strings("command", issues);
            f.finish(issues);
            let Some(file) = file else { continue };
            let valid = !file.value.is_empty()
                && file
                    .value
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !valid {
                issues.push(file.pos.issue(format!(
                    "file {:?} must be lowercase letters, digits and dashes: it names datapath/FILE.json",
                    file.value
                )));
                continue;
            }
            if command.is_empty() {
                issues.push(
                    file.pos
                        .issue(format!("file {:?} has no command", file.value)),
                );
                continue;
            }
            if datapath.collect.iter().any(|c| c.file == file.value) {
                issues.push(
                    file.pos
                        .issue(format!("file {:?} is collected twice", file.value)),
                );
                continue;
            }
            datapath.collect.push(DatapathCommand {
                file: file.value,
                command: command.into_iter().map(|word| word.value).collect(),
            });
        }
        fields.finish(issues);
        datapath
    }

    /// `network_policy: {admits: [{protocol, why}]}`: what the CNI admits
    /// whatever the policies say.
    fn network_policy(&mut self, node: &Node) -> Vec<PolicyAdmit> {
        let issues = &mut self.issues;
        let Some(mut fields) = Fields::of(node, "network_policy", issues) else {
            return Vec::new();
        };
        let mut admits = Vec::new();
        for item in fields
            .take("admits")
            .map(|list| yaml::seq(list, "admits", issues))
            .unwrap_or_default()
        {
            let Some(mut f) = Fields::of(item, "an admits entry", issues) else {
                continue;
            };
            let protocol = f.required_string("protocol", issues).and_then(|p| {
                let table = [
                    ("tcp", Protocol::Tcp),
                    ("udp", Protocol::Udp),
                    ("sctp", Protocol::Sctp),
                    ("icmp", Protocol::Icmp),
                ];
                keyword(&p, &table, "protocol", issues)
            });
            let why = f.required_string("why", issues);
            f.finish(issues);
            if let (Some(protocol), Some(why)) = (protocol, why) {
                admits.push(PolicyAdmit {
                    protocol,
                    why: why.value,
                });
            }
        }
        fields.finish(issues);
        admits
    }

    fn detection(&mut self, node: &Node) -> Detection {
        let issues = &mut self.issues;
        let Some(mut fields) = Fields::of(node, "detect", issues) else {
            return Detection::default();
        };
        let mut detection = Detection::default();
        if let Some(list) = fields.take("daemonsets") {
            for item in yaml::seq(list, "daemonsets", issues) {
                if let Some((object, f)) = named(item, "a detect daemonset", issues) {
                    f.finish(issues);
                    detection.daemon_sets.push(object);
                }
            }
        }
        if let Some(list) = fields.take("configmaps") {
            for item in yaml::seq(list, "configmaps", issues) {
                if let Some((object, mut f)) = named(item, "a detect configmap", issues) {
                    let key = f.string("key", issues).map(|k| k.value);
                    let contains = f.string("contains", issues).map(|c| c.value);
                    f.finish(issues);
                    detection.config_maps.push(ConfigMapSignal {
                        object,
                        key,
                        contains,
                    });
                }
            }
        }
        detection.node_annotations = fields
            .strings("node_annotations", issues)
            .into_iter()
            .map(|a| a.value)
            .collect();
        if let Some(list) = fields.take("crds") {
            for item in yaml::seq(list, "crds", issues) {
                if let Some(kind) = object_kind(item, "a detect crd", issues) {
                    detection.crds.push(kind);
                }
            }
        }
        fields.finish(issues);
        detection
    }

    fn modes(&mut self, node: &Node, engine: &Engine, compiler: &ExpressionCompiler) -> Vec<Mode> {
        let Some(mut fields) = Fields::of(node, "modes", &mut self.issues) else {
            return Vec::new();
        };
        let mut modes = Vec::new();
        for (key, value) in fields.all() {
            let what = format!("mode {}", key.name);
            let Some(mut f) = Fields::of(value, &what, &mut self.issues) else {
                continue;
            };
            let doc = f
                .required_string("doc", &mut self.issues)
                .map(|d| d.value)
                .unwrap_or_default();
            let when = f
                .take("when")
                .and_then(|w| self.value(w, "when", engine, compiler));
            f.finish(&mut self.issues);
            modes.push(Mode {
                name: key.name.clone(),
                doc,
                when,
            });
        }
        modes
    }

    fn mode_list(&mut self, fields: &mut Fields<'_>, modes: &[String]) -> Vec<String> {
        let listed = fields.strings("modes", &mut self.issues);
        for mode in &listed {
            if !modes.contains(&mode.value) {
                self.issues.push(mode.pos.issue(format!(
                    "mode {:?} is not declared in `modes` (declared: {})",
                    mode.value,
                    modes.join(", ")
                )));
            }
        }
        listed.into_iter().map(|m| m.value).collect()
    }
}

/// The kinds an object check cannot be about (see `object_kind`).
const NOT_OBJECT_SUBJECTS: &[&str] = &["EndpointSlice", "Endpoints", "Namespace", "NetworkPolicy"];

fn object_kind(node: &Node, what: &str, issues: &mut Issues) -> Option<ObjectKind> {
    let mut f = Fields::of(node, what, issues)?;
    let api_version = f.string("api_version", issues).map(|a| a.value);
    let kind = f.required_string("kind", issues);
    f.finish(issues);
    // Kinds skoop reads into its own model and hands to scripts only
    // through queries: a check over them would silently see none.
    if let Some(at) = &kind
        && NOT_OBJECT_SUBJECTS.contains(&at.value.as_str())
    {
        issues.push(at.pos.issue(format!(
            "object checks cannot be about {}: skoop reads them itself; check a Service \
             (cluster.service(ns, name) has its endpoints) or ask cluster.network_policy",
            at.value
        )));
        return None;
    }
    Some(ObjectKind {
        api_version,
        kind: kind?.value,
    })
}
