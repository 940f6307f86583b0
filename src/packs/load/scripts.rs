//! A pack's scripts: compiled once, importing only from its `lib/`, whose
//! modules compile too; and the functions hooks and script checks name,
//! found with their arity.

use std::collections::BTreeMap;

use rhai::{Engine, Scope};

use super::Loader;
use crate::packs::hooks::HookSpec;
use crate::packs::model::{Script, ScriptFunction};
use crate::packs::sandbox::{PackLibrary, ScriptError, library_module};
use crate::packs::yaml::{self, At, Fields, Node};

impl Loader<'_> {
    /// Compiles every script at the pack's root, serving `import` from its
    /// `lib/`, and every `lib/` module; the functions each module exports
    /// are returned for expressions to call. The engine is left serving the
    /// pack's `lib/`.
    pub(super) fn compile_scripts(&mut self, engine: &mut Engine) -> (Vec<Script>, Library) {
        // Its own modules, and those of the packs it composes.
        let library: BTreeMap<String, String> = self
            .source
            .files
            .iter()
            .filter_map(|(path, text)| Some((library_module(path)?.to_owned(), text.clone())))
            .chain(self.borrowed_library.clone())
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
        // Library modules nobody imports must still compile, imports
        // included; a composed pack's expressions may call its parts' too
        // (a part's broken module is the part's problem, reported where it
        // is loaded itself).
        let mut library = Library::default();
        let own =
            self.source.files.iter().filter_map(|(file, text)| {
                Some((library_module(file)?.to_owned(), text, Some(file)))
            });
        let borrowed =
            (self.borrowed_library.iter()).map(|(module, text)| (module.clone(), text, None));
        for (module, text, file) in own.chain(borrowed).collect::<Vec<_>>() {
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
                    if let Some(file) = file {
                        self.problems.push(
                            ScriptError::from_rhai(&error, &self.source.dir, file, None)
                                .to_problem(),
                        );
                    }
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

    pub(super) fn hooks(
        &mut self,
        node: &Node,
        scripts: &[Script],
    ) -> BTreeMap<String, ScriptFunction> {
        let Some(mut fields) = Fields::of(node, "hooks", &mut self.issues) else {
            return BTreeMap::new();
        };
        let mut hooks = BTreeMap::new();
        for (key, value) in fields.all() {
            let Some(spec) = HookSpec::find(&key.name) else {
                let names: Vec<&str> = crate::packs::hooks::HOOKS.iter().map(|h| h.name).collect();
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
    pub(super) fn function(
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
}

fn arity_text(arity: usize) -> String {
    ["ctx", "arg"][..arity.min(2)].join(", ")
}

/// Whether a script's text declares `fn NAME(` (spaces allowed), as read
/// without compiling it: a script that does not compile may still say which
/// functions it was meant to hold.
pub(super) fn declares(text: &str, name: &str) -> bool {
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

/// The functions a pack's `lib/` modules export, which expressions may
/// call as `MODULE::function(...)`.
#[derive(Debug, Default)]
pub(super) struct Library {
    /// Module name (its file's stem) to its functions, as (name, arity).
    pub(super) modules: BTreeMap<String, Vec<(String, usize)>>,
    /// Modules that do not compile (their problem is reported by itself).
    pub(super) broken: std::collections::BTreeSet<String>,
}
