//! Reading a pack directory into a [`Pack`]: the manifest checked field by
//! field, every script and expression compiled once, hooks checked for
//! existence and arity, parameters type-checked with overrides folded in.
//!
//! **Invariant:** loading never stops at the first problem. A pack with
//! problems is not loaded, and every problem is returned, each positioned
//! as `file:line:col` in the manifest or the script it is in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rhai::{Dynamic, Engine, Map, Scope};

use super::hooks::HookSpec;
use super::model::*;
use super::sandbox::{PackLibrary, ScriptError};
use super::scope::Context;
use super::yaml::{self, At, Fields, Issues, Node, Pos};
use crate::snapshot::input::{Boundary, PACK_FILE};
use crate::snapshot::problem::Problem;

/// The files of a pack: `pack.yaml`, its scripts (`*.rhai`) and its library
/// modules (`lib/*.rhai`), by path relative to the pack directory.
#[derive(Debug, Clone)]
pub struct PackSource {
    pub dir: PathBuf,
    pub builtin: bool,
    pub files: BTreeMap<String, String>,
}

pub const MANIFEST: &str = "pack.yaml";

impl PackSource {
    /// Reads a pack directory from disk. `Err` with every problem when the
    /// directory or one of its files cannot be read. Its files must be
    /// regular files inside `dir` (a link to `/etc/shadow` is refused, not
    /// read) of at most [`PACK_FILE`].
    pub fn read(dir: &Path) -> Result<PackSource, Vec<Problem>> {
        let mut files = BTreeMap::new();
        let mut problems = Vec::new();
        let boundary = Boundary::new(dir);
        let manifest = dir.join(MANIFEST);
        match boundary.read_text(&manifest, PACK_FILE) {
            Ok(Some(text)) => {
                files.insert(MANIFEST.to_owned(), text);
            }
            Ok(None) => problems.push(Problem::in_file(
                &manifest,
                "no pack.yaml: a pack directory holds pack.yaml and its scripts",
            )),
            Err(problem) => problems.push(problem),
        }
        let library = match boundary.is_dir(&dir.join("lib")) {
            Ok(true) => rhai_files(&dir.join("lib"), "lib/", &mut problems),
            Ok(false) => Vec::new(),
            Err(problem) => {
                problems.push(problem);
                Vec::new()
            }
        };
        for (relative, path) in rhai_files(dir, "", &mut problems)
            .into_iter()
            .chain(library)
        {
            match boundary.read_text(&path, PACK_FILE) {
                Ok(Some(text)) => {
                    files.insert(relative, text);
                }
                Ok(None) => {}
                Err(problem) => problems.push(problem),
            }
        }
        if problems.is_empty() {
            Ok(PackSource {
                dir: dir.to_path_buf(),
                builtin: false,
                files,
            })
        } else {
            Err(problems)
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }
}

/// The `*.rhai` entries directly in `dir`, sorted; a missing `dir` has none.
/// Whatever they are (a link, a FIFO) is for reading them to judge.
fn rhai_files(dir: &Path, prefix: &str, problems: &mut Vec<Problem>) -> Vec<(String, PathBuf)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            problems.push(Problem::in_file(dir, format!("cannot read directory: {e}")));
            return Vec::new();
        }
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| !path.is_dir() && path.extension().is_some_and(|e| e == "rhai"))
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            Some((format!("{prefix}{name}"), path))
        })
        .collect();
    files.sort();
    files
}

/// `--set PACK.PARAM=VALUE`, or a `set:` entry of a pack test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub pack: String,
    pub param: String,
    pub value: String,
    /// Where it was written: a file position, or `None` for the command line.
    pub origin: Option<(PathBuf, Pos)>,
}

impl Override {
    /// Parses `PACK.PARAM=VALUE`.
    pub fn parse(text: &str) -> Result<Override, String> {
        let (target, value) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?} is not PACK.PARAM=VALUE"))?;
        let (pack, param) = target
            .split_once('.')
            .filter(|(pack, param)| !pack.is_empty() && !param.is_empty())
            .ok_or_else(|| format!("{text:?} is not PACK.PARAM=VALUE"))?;
        Ok(Override {
            pack: pack.to_owned(),
            param: param.to_owned(),
            value: value.to_owned(),
            origin: None,
        })
    }

    pub fn problem(&self, message: impl Into<String>) -> Problem {
        let message = message.into();
        match &self.origin {
            Some((file, pos)) => Problem::from_issue(file, pos.issue(message)),
            None => Problem {
                file: PathBuf::from(format!("--set {}.{}={}", self.pack, self.param, self.value)),
                line: None,
                column: None,
                message,
            },
        }
    }
}

/// Loads one pack. `None` when it has any problem; the problems are all returned.
pub fn load_pack(
    engine: &mut Engine,
    source: &PackSource,
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
        top.finish(&mut self.issues);
        engine.set_module_resolver(rhai::module_resolvers::DummyModuleResolver::new());

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
        })
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

    fn parameters(&mut self, node: &Node, pack: &str, overrides: &[Override]) -> Vec<Parameter> {
        let issues = &mut self.issues;
        let Some(mut fields) = Fields::of(node, "parameters", issues) else {
            return Vec::new();
        };
        let mut parameters = Vec::new();
        // Every parameter declared with a valid type, for checking overrides
        // even when its default is wrong.
        let mut declared: Vec<(String, ParamType, Vec<ParamValue>, IntRange)> = Vec::new();
        for (key, value) in fields.all() {
            let what = format!("parameter {}", key.name);
            let Some(mut f) = Fields::of(value, &what, issues) else {
                continue;
            };
            let param_type = f
                .required_string("type", issues)
                .and_then(|t| keyword(&t, &ParamType::ALL, "type", issues));
            let default = f.require("default", issues);
            let doc = f
                .required_string("doc", issues)
                .map(|d| d.value)
                .unwrap_or_default();
            let allowed_node = f.take("allowed");
            let bounds = [f.take("min"), f.take("max")];
            f.finish(issues);
            let Some(param_type) = param_type else {
                continue;
            };
            let [min, max] = bounds.map(|bound| {
                let bound = bound?;
                match (&bound.value, param_type) {
                    (yaml::Value::Int(n), ParamType::Int) => Some(*n),
                    (_, ParamType::Int) => {
                        issues.push(bound.pos.issue(format!(
                            "parameter {}: a bound is an integer, not {}",
                            key.name,
                            bound.value.kind()
                        )));
                        None
                    }
                    _ => {
                        issues.push(bound.pos.issue(format!(
                            "parameter {}: min and max bound int parameters only",
                            key.name
                        )));
                        None
                    }
                }
            });
            let range = IntRange { min, max };
            let typed = |node: &Node, issues: &mut Issues| -> Option<ParamValue> {
                let result = match (&node.value, param_type) {
                    (yaml::Value::Int(i), ParamType::Int) => Ok(ParamValue::Int(*i)),
                    (yaml::Value::Bool(b), ParamType::Bool) => Ok(ParamValue::Bool(*b)),
                    (
                        yaml::Value::String(s),
                        ParamType::String | ParamType::Ip | ParamType::Cidr,
                    ) => param_type.parse(s),
                    (other, _) => Err(format!(
                        "{} is not of type {}",
                        other.kind(),
                        param_type.as_str()
                    )),
                };
                result
                    .map_err(|message| {
                        issues.push(node.pos.issue(format!("parameter {}: {message}", key.name)))
                    })
                    .ok()
            };
            let allowed: Vec<ParamValue> = allowed_node
                .map(|list| {
                    yaml::seq(list, "allowed", issues)
                        .iter()
                        .filter_map(|item| typed(item, issues))
                        .collect()
                })
                .unwrap_or_default();
            declared.push((key.name.clone(), param_type, allowed.clone(), range));
            let Some(default) = default.and_then(|d| {
                let value = typed(d, issues)?;
                check_allowed(&value, &allowed, range)
                    .map_err(|m| issues.push(d.pos.issue(format!("parameter {}: {m}", key.name))))
                    .ok()?;
                Some(value)
            }) else {
                continue;
            };
            parameters.push(Parameter {
                name: key.name.clone(),
                param_type,
                value: default.clone(),
                default,
                doc,
                allowed,
                range,
            });
        }
        for o in overrides.iter().filter(|o| o.pack == pack) {
            let Some((_, param_type, allowed, range)) =
                declared.iter().find(|(name, ..)| *name == o.param)
            else {
                let known: Vec<&str> = declared.iter().map(|(name, ..)| name.as_str()).collect();
                self.problems.push(o.problem(format!(
                    "pack {pack} has no parameter {} (it has: {})",
                    o.param,
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
                continue;
            };
            match param_type
                .parse(&o.value)
                .and_then(|v| check_allowed(&v, allowed, *range).map(|()| v))
            {
                Ok(value) => {
                    if let Some(parameter) = parameters.iter_mut().find(|p| p.name == o.param) {
                        parameter.value = value;
                    }
                }
                Err(message) => self
                    .problems
                    .push(o.problem(format!("parameter {pack}.{}: {message}", o.param))),
            }
        }
        parameters
    }

    /// Compiles every script at the pack's root, serving `import` from its
    /// `lib/`, and every `lib/` module; the functions each module exports
    /// are returned for expressions to call. The engine is left serving the
    /// pack's `lib/`.
    fn compile_scripts(&mut self, engine: &mut Engine) -> (Vec<Script>, Library) {
        let library: BTreeMap<String, String> = self
            .source
            .files
            .iter()
            .filter_map(|(path, text)| {
                let module = path.strip_prefix("lib/")?.strip_suffix(".rhai")?;
                Some((module.to_owned(), text.clone()))
            })
            .collect();
        engine.set_module_resolver(PackLibrary::new(library));
        let mut scripts = Vec::new();
        for (file, text) in &self.source.files {
            if !file.ends_with(".rhai") || file.starts_with("lib/") {
                continue;
            }
            match engine.compile_into_self_contained(&Scope::new(), text) {
                Ok(mut ast) => {
                    ast.set_source(file.as_str());
                    scripts.push(Script {
                        file: file.clone(),
                        source: text.clone(),
                        ast,
                    });
                }
                Err(error) => {
                    self.broken_scripts.push(text.clone());
                    // rhai gives an unresolvable import no position: find it.
                    let fallback = match &*error {
                        rhai::EvalAltResult::ErrorModuleNotFound(path, _) => text
                            .find(&format!("\"{path}\""))
                            .map(|offset| crate::snapshot::problem::line_col(text, offset)),
                        _ => None,
                    };
                    self.problems.push(
                        ScriptError::from_rhai(&error, &self.source.dir, file, fallback)
                            .to_problem(),
                    )
                }
            }
        }
        // Library modules nobody imports must still compile, imports included.
        let mut library = Library::default();
        for (file, text) in &self.source.files {
            let Some(module) = file
                .strip_prefix("lib/")
                .and_then(|f| f.strip_suffix(".rhai"))
            else {
                continue;
            };
            match engine.compile_into_self_contained(&Scope::new(), text) {
                Ok(ast) => {
                    let exported = ast
                        .iter_functions()
                        // Closures are compiled into functions named anon$...
                        .filter(|f| {
                            f.access != rhai::FnAccess::Private && !f.name.starts_with("anon$")
                        })
                        .map(|f| (f.name.to_owned(), f.params.len()))
                        .collect();
                    library.modules.insert(module.to_owned(), exported);
                }
                Err(error) => {
                    library.broken.insert(module.to_owned());
                    self.problems.push(
                        ScriptError::from_rhai(&error, &self.source.dir, file, None).to_problem(),
                    );
                }
            }
        }
        // A problem in a module also shows where it is imported, and a cycle
        // shows from each of its modules; keep each problem once.
        let mut seen = std::collections::BTreeSet::new();
        self.problems
            .retain(|problem| seen.insert(problem.to_string()));
        (scripts, library)
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

    fn hooks(&mut self, node: &Node, scripts: &[Script]) -> BTreeMap<String, ScriptFunction> {
        let Some(mut fields) = Fields::of(node, "hooks", &mut self.issues) else {
            return BTreeMap::new();
        };
        let mut hooks = BTreeMap::new();
        for (key, value) in fields.all() {
            let Some(spec) = HookSpec::find(&key.name) else {
                let names: Vec<&str> = super::hooks::HOOKS.iter().map(|h| h.name).collect();
                self.issues.push(key.pos.issue(format!(
                    "no hook is called {:?} (hooks: {})",
                    key.name,
                    names.join(", ")
                )));
                continue;
            };
            let Some(function) = yaml::string(value, &key.name, &mut self.issues) else {
                continue;
            };
            if let Some(found) = self.function(
                &function,
                spec.arity(),
                scripts,
                &format!("hook {}", spec.name),
            ) {
                hooks.insert(spec.name.to_owned(), found);
            }
        }
        hooks
    }

    /// Finds `fn NAME` of `arity` parameters in the pack's scripts.
    fn function(
        &mut self,
        name: &At<String>,
        arity: usize,
        scripts: &[Script],
        what: &str,
    ) -> Option<ScriptFunction> {
        let mut arities = Vec::new();
        for (index, script) in scripts.iter().enumerate() {
            for f in script.ast.iter_functions().filter(|f| f.name == name.value) {
                if f.params.len() == arity {
                    return Some(ScriptFunction {
                        script: index,
                        name: name.value.clone(),
                    });
                }
                arities.push(format!("{} in {}", f.params.len(), script.file));
            }
        }
        if arities.is_empty()
            && self
                .broken_scripts
                .iter()
                .any(|text| declares(text, &name.value))
        {
            return None;
        }
        let message = if arities.is_empty() {
            let files: Vec<&str> = scripts.iter().map(|s| s.file.as_str()).collect();
            format!(
                "{what}: no function {}({}) in the pack's scripts ({})",
                name.value,
                arity_text(arity),
                if files.is_empty() {
                    "there are none".to_owned()
                } else {
                    files.join(", ")
                }
            )
        } else {
            format!(
                "{what}: {} must take {arity} parameter{} ({}), it takes {}",
                name.value,
                if arity == 1 { "" } else { "s" },
                arity_text(arity),
                arities.join(", ")
            )
        };
        self.issues.push(name.pos.issue(message));
        None
    }

    fn checks(&mut self, node: &Node, cx: &CheckContext<'_>) -> Vec<Check> {
        let mut checks: Vec<Check> = Vec::new();
        let items = yaml::seq(node, "checks", &mut self.issues);
        for item in items {
            let Some(check) = self.check(item, cx) else {
                continue;
            };
            if let Some(first) = checks.iter().find(|c| c.id == check.id) {
                self.issues.push(check.pos.issue(format!(
                    "check id {} is used twice (first at line {})",
                    check.id, first.pos.line
                )));
                continue;
            }
            checks.push(check);
        }
        checks
    }

    fn check(&mut self, node: &Node, cx: &CheckContext<'_>) -> Option<Check> {
        let mut f = Fields::of(node, "a check", &mut self.issues)?;
        let engine = cx.engine;
        let compiler = cx.compiler;
        let id = f.required_string("id", &mut self.issues);
        if let Some(id) = &id {
            let prefix = format!("{}.", cx.pack);
            let valid = id.value.starts_with(&prefix)
                && id.value.len() > prefix.len()
                && id
                    .value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
            if !valid {
                self.issues.push(id.pos.issue(format!(
                    "check id {:?} must start with {prefix:?} and use lowercase letters, digits, dashes and dots",
                    id.value
                )));
            }
        }
        let severity = f
            .required_string("severity", &mut self.issues)
            .and_then(|s| keyword(&s, &Severity::ALL, "severity", &mut self.issues));
        let scope_at = f.required_string("scope", &mut self.issues);
        let scope = scope_at
            .as_ref()
            .and_then(|s| keyword(s, &CheckScope::ALL, "scope", &mut self.issues));
        let kind_at = f.required_string("kind", &mut self.issues);
        let object = f
            .take("object")
            .and_then(|n| object_kind(n, "object", &mut self.issues));
        let modes = self.mode_list(&mut f, cx.modes);
        let for_each = f
            .string("for_each", &mut self.issues)
            .and_then(|s| keyword(&s, &ForEach::ALL, "for_each", &mut self.issues));
        let when = f
            .take("when")
            .and_then(|n| self.value(n, "when", engine, compiler));
        let expected_node = f.take("expected");
        let expected = expected_node.and_then(|n| self.value(n, "expected", engine, compiler));
        let message = f
            .require("message", &mut self.issues)
            .and_then(|n| self.value(n, "message", engine, compiler));
        let remediation = f
            .take("remediation")
            .and_then(|n| self.value(n, "remediation", engine, compiler));
        let references = f
            .strings("references", &mut self.issues)
            .into_iter()
            .map(|r| r.value)
            .collect();
        let doc = f
            .string("doc", &mut self.issues)
            .map(|d| d.value)
            .unwrap_or_default();

        let value = |f: &mut Fields<'_>, key: &str, required: bool, this: &mut Self| {
            this.field_value(f, key, required, engine, compiler)
        };
        let kind = match kind_at.as_ref().map(|k| k.value.as_str()) {
            Some("sysctl") => {
                let key = value(&mut f, "key", true, self);
                let expect = value(&mut f, "expect", true, self);
                Some(CheckKind::Sysctl {
                    key: key?,
                    expect: expect?,
                })
            }
            Some("device") => {
                let name = value(&mut f, "name", true, self);
                let kind = value(&mut f, "device_kind", false, self);
                let mtu = value(&mut f, "mtu", false, self);
                let master = value(&mut f, "master", false, self);
                let address = value(&mut f, "address", false, self);
                let mac = value(&mut f, "mac", false, self);
                let vni = value(&mut f, "vni", false, self);
                let port = value(&mut f, "port", false, self);
                let local = value(&mut f, "local", false, self);
                let state = f.string("state", &mut self.issues).and_then(|s| {
                    keyword(
                        &s,
                        &[("up", DeviceState::Up), ("down", DeviceState::Down)],
                        "state",
                        &mut self.issues,
                    )
                });
                Some(CheckKind::Device(Box::new(DeviceCheck {
                    name: name?,
                    kind,
                    mtu,
                    state,
                    master,
                    address,
                    mac,
                    vni,
                    port,
                    local,
                })))
            }
            Some("route") => {
                let dst = value(&mut f, "dst", true, self);
                let via = value(&mut f, "via", false, self);
                let dev = value(&mut f, "dev", false, self);
                let table = value(&mut f, "table", false, self);
                let onlink = value(&mut f, "onlink", false, self);
                Some(CheckKind::Route {
                    dst: dst?,
                    via,
                    dev,
                    table,
                    onlink,
                })
            }
            Some("neighbour") => {
                let dst = value(&mut f, "dst", true, self);
                let dev = value(&mut f, "dev", false, self);
                let lladdr = value(&mut f, "lladdr", false, self);
                Some(CheckKind::Neighbour {
                    dst: dst?,
                    dev,
                    lladdr,
                })
            }
            Some("fdb") => {
                let dev = value(&mut f, "dev", true, self);
                let mac = value(&mut f, "mac", false, self);
                let dst = value(&mut f, "dst", false, self);
                Some(CheckKind::Fdb {
                    dev: dev?,
                    mac,
                    dst,
                })
            }
            Some("listener") => {
                let port = value(&mut f, "port", true, self);
                let protocol = value(&mut f, "protocol", false, self);
                Some(CheckKind::Listener {
                    port: port?,
                    protocol,
                })
            }
            Some("jump") => {
                let jumps = match f.take("jumps") {
                    // Several: a list of {family, table, chain, target}.
                    Some(list) => {
                        let mut jumps = Vec::new();
                        for item in yaml::seq(list, "jumps", &mut self.issues) {
                            if let Some(mut j) = Fields::of(item, "a jump", &mut self.issues) {
                                let jump = self.jump(&mut j, engine, compiler);
                                j.finish(&mut self.issues);
                                jumps.extend(jump);
                            }
                        }
                        jumps
                    }
                    None => self.jump(&mut f, engine, compiler).into_iter().collect(),
                };
                (!jumps.is_empty()).then_some(CheckKind::Jump { jumps })
            }
            Some("condition") => {
                let condition = f.required_string("condition", &mut self.issues);
                let expect = f.bool("expect", &mut self.issues).unwrap_or(true);
                if scope != Some(CheckScope::Object)
                    && let Some(at) = &kind_at
                {
                    self.issues
                        .push(at.pos.issue("a condition check needs `scope: object`"));
                }
                Some(CheckKind::Condition {
                    condition: condition?.value,
                    expect,
                })
            }
            Some("script") => {
                let function = f.required_string("function", &mut self.issues)?;
                let found = self.function(&function, 1, cx.scripts, "script check")?;
                Some(CheckKind::Script {
                    function: found.name,
                })
            }
            Some(other) => {
                if let Some(at) = &kind_at {
                    self.issues.push(at.pos.issue(format!(
                        "check kind {other:?} is not one of sysctl, device, route, neighbour, fdb, listener, jump, condition, script"
                    )));
                }
                None
            }
            None => None,
        };
        f.finish(&mut self.issues);

        if let (Some(node), Some(CheckKind::Script { .. } | CheckKind::Condition { .. })) =
            (expected_node, &kind)
        {
            self.issues.push(
                node.pos.issue(
                    "`expected` is for the declarative kinds; a script check returns its own",
                ),
            );
        }
        let (scope, kind) = (scope?, kind?);
        if let Some(at) = &scope_at {
            if scope == CheckScope::Object && object.is_none() {
                self.issues
                    .push(at.pos.issue("an object check needs `object: {kind: ...}`"));
            }
            let fits = match for_each {
                None => true,
                Some(ForEach::RemoteNodes) => scope == CheckScope::Node,
                Some(ForEach::ContainerPorts) => scope == CheckScope::Pod,
            };
            if !fits {
                self.issues.push(at.pos.issue(
                    "for_each remote_nodes needs `scope: node`, container_ports `scope: pod`",
                ));
            }
        }
        Some(Check {
            id: id?.value,
            severity: severity?,
            scope,
            kind,
            object,
            modes,
            for_each,
            when,
            expected,
            message: message?,
            remediation,
            references,
            doc,
            pos: node.pos,
        })
    }

    /// The `family` (optional), `table`, `chain` and `target` of a jump.
    fn jump(
        &mut self,
        f: &mut Fields<'_>,
        engine: &Engine,
        compiler: &ExpressionCompiler,
    ) -> Option<Jump> {
        let family = self.field_value(f, "family", false, engine, compiler);
        let table = self.field_value(f, "table", true, engine, compiler);
        let chain = self.field_value(f, "chain", true, engine, compiler);
        let target = self.field_value(f, "target", true, engine, compiler);
        Some(Jump {
            family,
            table: table?,
            chain: chain?,
            target: target?,
        })
    }

    /// A check's field `key` compiled as a value; a required one that is
    /// absent is an issue.
    fn field_value(
        &mut self,
        f: &mut Fields<'_>,
        key: &str,
        required: bool,
        engine: &Engine,
        compiler: &ExpressionCompiler,
    ) -> Option<Value> {
        let node = if required {
            f.require(key, &mut self.issues)
        } else {
            f.take(key)
        };
        node.and_then(|n| self.value(n, key, engine, compiler))
    }

    /// Compiles a manifest value: a literal, `${expr}` or a string with `${expr}` parts.
    fn value(
        &mut self,
        node: &Node,
        key: &str,
        engine: &Engine,
        compiler: &ExpressionCompiler,
    ) -> Option<Value> {
        let source = match &node.value {
            yaml::Value::String(s) => s.clone(),
            yaml::Value::Int(i) => {
                return Some(literal((*i).into(), i.to_string(), node.pos));
            }
            yaml::Value::Bool(b) => {
                return Some(literal((*b).into(), b.to_string(), node.pos));
            }
            other => {
                self.issues.push(node.pos.issue(format!(
                    "`{key}` must be a string, a number, a boolean or a ${{expression}}, found {}",
                    other.kind()
                )));
                return None;
            }
        };
        let pieces = match split_template(&source) {
            Ok(pieces) => pieces,
            Err(offset) => {
                self.issues.push(
                    self.position_in(node, &source, offset, 1, 1)
                        .issue("`${` without its closing `}`"),
                );
                return None;
            }
        };
        let mut parts = Vec::new();
        let mut ok = true;
        for piece in &pieces {
            match piece {
                Piece::Text(text) => parts.push(TemplatePart::Text(text.clone())),
                Piece::Expression { offset, text } => match compiler.compile(engine, text) {
                    Ok(ast) => parts.push(TemplatePart::Expression(Box::new(ast))),
                    // Its module's own problem is reported already.
                    Err(ExpressionError::InBrokenModule) => ok = false,
                    Err(ExpressionError::Problem { message, position }) => {
                        ok = false;
                        let line = position.line().unwrap_or(1);
                        let column = position.position().unwrap_or(1);
                        let pos = self.position_in(node, &source, *offset, line, column);
                        self.issues
                            .push(pos.issue(format!("in ${{{text}}}: {message}")));
                    }
                },
            }
        }
        if !ok {
            return None;
        }
        let template = match parts.as_slice() {
            [TemplatePart::Expression(ast)] => Template::Expression(ast.clone()),
            [] => Template::Literal(String::new().into()),
            [TemplatePart::Text(text)] => Template::Literal(text.clone().into()),
            _ => Template::Interpolated(parts),
        };
        Some(Value {
            template,
            source,
            pos: node.pos,
        })
    }

    /// The position in the manifest of (`line`, `column`) of an expression
    /// that starts `offset` bytes into the string value of `node`.
    fn position_in(
        &self,
        node: &Node,
        source: &str,
        offset: usize,
        line: usize,
        column: usize,
    ) -> Pos {
        // A quoted scalar's position is its opening quote.
        let quoted = self
            .text
            .lines()
            .nth(node.pos.line.saturating_sub(1))
            .and_then(|l| l.chars().nth(node.pos.column.saturating_sub(1)))
            .is_some_and(|c| c == '"' || c == '\'');
        let before = source.get(..offset).unwrap_or_default().chars().count();
        if line > 1 {
            return Pos {
                line: node.pos.line + line - 1,
                column,
            };
        }
        Pos {
            line: node.pos.line,
            column: node.pos.column + usize::from(quoted) + before + column - 1,
        }
    }
}

fn literal(value: Dynamic, source: String, pos: Pos) -> Value {
    Value {
        template: Template::Literal(value),
        source,
        pos,
    }
}

fn arity_text(arity: usize) -> String {
    ["ctx", "arg"][..arity.min(2)].join(", ")
}

fn check_allowed(
    value: &ParamValue,
    allowed: &[ParamValue],
    range: IntRange,
) -> Result<(), String> {
    range.check(value)?;
    if allowed.is_empty() || allowed.contains(value) {
        return Ok(());
    }
    let names: Vec<String> = allowed.iter().map(ToString::to_string).collect();
    Err(format!(
        "{value} is not allowed (allowed: {})",
        names.join(", ")
    ))
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

fn params_map(parameters: &[Parameter]) -> Dynamic {
    let map: Map = parameters
        .iter()
        .map(|p| (p.name.as_str().into(), p.value.to_dynamic()))
        .collect();
    Dynamic::from_map(map)
}

/// Whether a script's text declares `fn NAME(` (spaces allowed), as read
/// without compiling it: a script that does not compile may still say which
/// functions it was meant to hold.
fn declares(text: &str, name: &str) -> bool {
    text.match_indices("fn ").any(|(at, _)| {
        let declared_at =
            at == 0 || !text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let rest = text[at + 3..].trim_start();
        declared_at
            && rest
                .strip_prefix(name)
                .is_some_and(|after| after.trim_start().starts_with('('))
    })
}

/// What every check of a pack is compiled against.
struct CheckContext<'a> {
    engine: &'a Engine,
    compiler: &'a ExpressionCompiler,
    pack: &'a str,
    modes: &'a [String],
    scripts: &'a [Script],
}

/// The functions a pack's `lib/` modules export, which expressions may
/// call as `MODULE::function(...)`.
#[derive(Debug, Default)]
struct Library {
    /// Module name (its file's stem) to its functions, as (name, arity).
    modules: BTreeMap<String, Vec<(String, usize)>>,
    /// Modules that do not compile (their problem is reported by itself).
    broken: std::collections::BTreeSet<String>,
}

/// Why an expression did not compile.
enum ExpressionError {
    /// A problem at a position in the expression's text.
    Problem {
        message: String,
        position: rhai::Position,
    },
    /// It calls a `lib/` module that does not compile: not one more problem.
    InBrokenModule,
}

/// Compiles `${...}` expressions with strict variables: the scope's names
/// are declared, and `params` is a constant, so the optimizer folds the
/// parameters into the expression. An expression calling `MODULE::f(...)`
/// of the pack's `lib/` is compiled with that module embedded, as a script
/// importing it, once its call was checked against the module's functions.
struct ExpressionCompiler {
    scope: Scope<'static>,
    /// Reads the expression's shape before its modules are imported.
    parser: Engine,
    library: Library,
}

impl ExpressionCompiler {
    fn new(params: Dynamic, library: Library) -> Self {
        let mut scope = Scope::new();
        scope.push_constant_dynamic("params", params);
        for name in Context::VARIABLES.iter().filter(|n| **n != "params") {
            scope.push_dynamic(*name, Dynamic::UNIT);
        }
        for name in ["actual", "expected"] {
            scope.push_dynamic(name, Dynamic::UNIT);
        }
        ExpressionCompiler {
            scope,
            parser: super::sandbox::parser(),
            library,
        }
    }

    fn compile(&self, engine: &Engine, text: &str) -> Result<rhai::AST, ExpressionError> {
        let parse_error = |error: rhai::ParseError| ExpressionError::Problem {
            message: error.0.to_string(),
            position: error.1,
        };
        // One expression: the parser refuses statements.
        let shape = self.parser.compile_expression(text).map_err(parse_error)?;
        self.parameters_declared(&shape)?;
        let modules = self.modules_called(&shape)?;
        if modules.is_empty() {
            return engine
                .compile_expression_with_scope(&self.scope, text)
                .map_err(parse_error);
        }
        // The imports on a line of their own: the expression's own lines
        // are one further down.
        let imports: String = modules
            .iter()
            .map(|m| format!("import \"{m}\" as {m}; "))
            .collect();
        engine
            .compile_into_self_contained(&self.scope, format!("{imports}\n{text}"))
            .map_err(|error| match *error {
                rhai::EvalAltResult::ErrorParsing(kind, position) if position.line() > Some(1) => {
                    let line = position.line().unwrap_or(2) - 1;
                    let column = position.position().unwrap_or(1);
                    ExpressionError::Problem {
                        message: kind.to_string(),
                        position: rhai::Position::new(
                            u16::try_from(line).unwrap_or(u16::MAX),
                            u16::try_from(column).unwrap_or(u16::MAX),
                        ),
                    }
                }
                other => ExpressionError::Problem {
                    message: other.to_string(),
                    position: rhai::Position::NONE,
                },
            })
    }

    /// Every `params.NAME` the expression reads is a parameter the pack
    /// declares: a misspelt one would read as `()` and fail every subject.
    fn parameters_declared(&self, shape: &rhai::AST) -> Result<(), ExpressionError> {
        let declared: rhai::Map = self.scope.get_value("params").unwrap_or_default();
        let mut unknown = None;
        shape.walk(&mut |path: &[rhai::ASTNode]| {
            if let Some(rhai::ASTNode::Expr(rhai::Expr::Dot(dot, ..))) = path.last()
                && let rhai::Expr::Variable(variable, ..) = &dot.lhs
                && variable.1 == "params"
                && variable.2.is_empty()
            {
                // `params.NAME`, or the first link of `params.NAME.more`.
                let property = match &dot.rhs {
                    rhai::Expr::Dot(chain, ..) => &chain.lhs,
                    rhs => rhs,
                };
                if let rhai::Expr::Property(property, position) = property
                    && !declared.contains_key(property.2.as_str())
                {
                    unknown = Some((property.2.to_string(), *position));
                    return false;
                }
            }
            true
        });
        let Some((name, position)) = unknown else {
            return Ok(());
        };
        let mut names: Vec<&str> = declared.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        Err(ExpressionError::Problem {
            message: format!(
                "params.{name}: the pack has no parameter {name} (its parameters: {})",
                listed(&names)
            ),
            position,
        })
    }

    /// The `lib/` modules the expression calls into, each call checked: a
    /// module the pack has, a function it exports, with that many arguments.
    fn modules_called(&self, ast: &rhai::AST) -> Result<Vec<String>, ExpressionError> {
        let mut calls = Vec::new();
        ast.walk(&mut |path: &[rhai::ASTNode]| {
            // A call alone is a statement, inside an expression an expression.
            let call = match path.last() {
                Some(rhai::ASTNode::Expr(rhai::Expr::FnCall(call, _))) => Some(call),
                Some(rhai::ASTNode::Stmt(rhai::Stmt::FnCall(call, _))) => Some(call),
                _ => None,
            };
            if let Some(call) = call
                && !call.namespace.is_empty()
            {
                calls.push((
                    call.namespace.to_string(),
                    call.namespace.root().to_owned(),
                    call.name.to_string(),
                    call.args.len(),
                    call.namespace.position(),
                ));
            }
            true
        });
        let mut modules = Vec::new();
        for (namespace, root, name, arity, position) in calls {
            let problem = |message: String| Err(ExpressionError::Problem { message, position });
            if self.library.broken.contains(&root) {
                return Err(ExpressionError::InBrokenModule);
            }
            let Some(functions) = self.library.modules.get(&root) else {
                let names: Vec<&str> = self.library.modules.keys().map(String::as_str).collect();
                return problem(format!(
                    "{namespace}::{name}: the pack has no lib/{root}.rhai (its modules: {})",
                    listed(&names)
                ));
            };
            if namespace != root {
                return problem(format!(
                    "{namespace}::{name}: a lib/ module is called as MODULE::function, one level deep"
                ));
            }
            let arities: Vec<usize> = functions
                .iter()
                .filter(|(f, _)| *f == name)
                .map(|(_, a)| *a)
                .collect();
            if arities.is_empty() {
                let mut names: Vec<&str> = functions.iter().map(|(f, _)| f.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                return problem(format!(
                    "lib/{root}.rhai has no function {name} (it has: {})",
                    listed(&names)
                ));
            }
            if !arities.contains(&arity) {
                let takes: Vec<String> = arities.iter().map(ToString::to_string).collect();
                return problem(format!(
                    "{root}::{name} takes {} argument(s), not {arity}",
                    takes.join(" or ")
                ));
            }
            if !modules.contains(&root) {
                modules.push(root);
            }
        }
        Ok(modules)
    }
}

/// Names joined with commas, or `none`.
fn listed(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

enum Piece {
    Text(String),
    /// An expression and its byte offset in the value.
    Expression {
        offset: usize,
        text: String,
    },
}

/// Splits `a ${x + 1} b` into text and expressions; braces inside an
/// expression (`#{a: 1}`) are balanced. `Err` is the offset of an unclosed `${`.
fn split_template(source: &str) -> Result<Vec<Piece>, usize> {
    let mut pieces = Vec::new();
    let mut rest = source;
    let mut consumed = 0;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            pieces.push(Piece::Text(rest[..start].to_owned()));
        }
        let body = &rest[start + 2..];
        let mut depth = 1usize;
        let end = body.char_indices().find_map(|(i, c)| {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        });
        let Some(end) = end else {
            return Err(consumed + start);
        };
        pieces.push(Piece::Expression {
            offset: consumed + start + 2,
            text: body[..end].to_owned(),
        });
        let advance = start + 2 + end + 1;
        consumed += advance;
        rest = &rest[advance..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_owned()));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_splits_text_and_balanced_expressions() {
        let pieces = split_template("mtu ${ #{a: 1}.a + 1 } ok").expect("closed");
        let shown: Vec<String> = pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => format!("T{t:?}"),
                Piece::Expression { offset, text } => format!("E{offset}{text:?}"),
            })
            .collect();
        assert_eq!(shown, ["T\"mtu \"", "E6\" #{a: 1}.a + 1 \"", "T\" ok\""]);
        assert_eq!(split_template("a ${b").err(), Some(2));
    }

    #[test]
    fn override_is_pack_dot_param_equals_value() {
        let o = Override::parse("flannel.mtu=1400").expect("valid");
        assert_eq!(
            (o.pack.as_str(), o.param.as_str(), o.value.as_str()),
            ("flannel", "mtu", "1400")
        );
        assert!(Override::parse("flannel=1400").is_err());
        assert!(Override::parse(".mtu=1").is_err());
    }

    #[test]
    fn engine_requirement_is_all_of_its_comparators() {
        let req = VersionReq::parse(">=0.1.0, <0.3.0").expect("valid");
        assert!(req.matches(Version::parse("0.2.9").expect("v")));
        assert!(!req.matches(Version::parse("0.3.0").expect("v")));
        assert!(VersionReq::parse(">=one").is_err());
    }

    #[test]
    fn a_declaration_is_read_from_a_script_that_does_not_compile() {
        let script =
            "fn vxlan_fdb(ctx) { let x = ; }\nfn  peer_route (ctx, arg) {}\nmy_fn other(ctx) {}";
        assert!(declares(script, "vxlan_fdb"));
        assert!(declares(script, "peer_route"));
        assert!(!declares(script, "vxlan"), "a prefix of a declared name");
        assert!(!declares(script, "other"), "not declared by `fn`");
        assert!(!declares(script, "x"));
    }
}
