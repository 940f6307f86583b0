//! The Rhai sandbox every pack script runs in.
//!
//! One engine is built per set of loaded packs and shared by every call on
//! the thread that loaded them (rhai is built without `sync`: nothing sends
//! packs across threads). It has no file system, no
//! network and no `eval`; operations, call depth, expression depth and the
//! sizes of strings, arrays and maps are bounded, so a hostile or buggy script
//! stops with an error instead of hanging or exhausting memory. Imports are
//! served from the pack's own `lib/` while that pack compiles, and embedded
//! into its compiled scripts; at run time no import can be resolved at all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rhai::module_resolvers::DummyModuleResolver;
use rhai::{Engine, EvalAltResult, Module, ModuleResolver, Position, Scope, Shared};

use super::budget::{self, MAX_CALL_MEMORY, MAX_CALL_TIME, OverBudget};
use crate::snapshot::problem::Problem;

/// Operations one script call may take: about 10 ms of plain work, far
/// below a second even for the most expensive operations.
pub const MAX_OPERATIONS: u64 = 1_000_000;
/// Nested function calls.
pub const MAX_CALL_LEVELS: usize = 32;
/// Expression nesting, at global level and inside functions.
pub const MAX_EXPR_DEPTH: usize = 64;
pub const MAX_FUNCTION_EXPR_DEPTH: usize = 32;
/// Characters in one string.
pub const MAX_STRING_SIZE: usize = 64 * 1024;
/// Items in one array.
pub const MAX_ARRAY_SIZE: usize = 10_000;
/// Entries in one object map.
pub const MAX_MAP_SIZE: usize = 10_000;
/// Modules one script may import (directly or not).
pub const MAX_MODULES: usize = 32;
/// How deep `lib/` modules may import each other (`a` imports `b` imports ...).
pub const MAX_IMPORT_DEPTH: usize = 8;

/// Builds the sandboxed engine, with the host API registered.
pub fn engine() -> Engine {
    let mut engine = Engine::new();
    engine
        .set_strict_variables(true)
        .set_max_operations(MAX_OPERATIONS)
        .set_max_call_levels(MAX_CALL_LEVELS)
        .set_max_expr_depths(MAX_EXPR_DEPTH, MAX_FUNCTION_EXPR_DEPTH)
        .set_max_string_size(MAX_STRING_SIZE)
        .set_max_array_size(MAX_ARRAY_SIZE)
        .set_max_map_size(MAX_MAP_SIZE)
        .set_max_modules(MAX_MODULES)
        .set_module_resolver(DummyModuleResolver::new())
        .disable_symbol("eval")
        .on_progress(|ops| budget::progress(ops).map(rhai::Dynamic::from));
    // A script's output would mix with skoop's own; scripts report through
    // their return values. What they print is kept only while a pack's
    // author asks to see it (`skoop packs eval`, [`capturing_output`]).
    engine
        .on_print(|text| record_output(format!("print: {text}")))
        .on_debug(|text, source, pos| {
            let at = match (source, pos.line()) {
                (Some(file), Some(line)) => {
                    format!("{file}:{line}:{}", pos.position().unwrap_or(0))
                }
                (Some(file), None) => file.to_owned(),
                (None, Some(line)) => format!("line {line}"),
                (None, None) => "?".to_owned(),
            };
            record_output(format!("debug {at}: {text}"));
        });
    super::host::register(&mut engine);
    engine
}

/// An engine that only parses: without strict variables, so that an
/// expression's shape (one expression, no statements) and the `lib/`
/// functions it calls can be read before the modules it names are imported.
/// Nesting is bounded as in [`engine`], so parsing cannot exhaust the stack.
pub fn parser() -> Engine {
    let mut engine = Engine::new_raw();
    engine
        .set_max_expr_depths(MAX_EXPR_DEPTH, MAX_FUNCTION_EXPR_DEPTH)
        .set_max_string_size(MAX_STRING_SIZE)
        .disable_symbol("eval");
    engine
}

/// Lines a script may print while captured; more are counted, not kept, so
/// that a script printing in a loop cannot fill memory.
pub const MAX_CAPTURED_LINES: usize = 1000;

/// What scripts printed on this thread, while [`capturing_output`] runs.
struct CapturedOutput {
    lines: Vec<String>,
    dropped: usize,
}

thread_local! {
    static CAPTURED: std::cell::RefCell<Option<CapturedOutput>> =
        const { std::cell::RefCell::new(None) };
}

fn record_output(line: String) {
    CAPTURED.with(|captured| {
        if let Some(captured) = captured.borrow_mut().as_mut() {
            if captured.lines.len() < MAX_CAPTURED_LINES {
                captured.lines.push(line);
            } else {
                captured.dropped += 1;
            }
        }
    });
}

/// Runs `work` and returns what the scripts it ran printed (`print: ...`,
/// `debug FILE:LINE:COL: ...`), in order; a last line counts what was over
/// [`MAX_CAPTURED_LINES`]. Outside it, scripts' output is discarded.
pub fn capturing_output<R>(work: impl FnOnce() -> R) -> (R, Vec<String>) {
    let outer = CAPTURED.with(|captured| {
        captured.borrow_mut().replace(CapturedOutput {
            lines: Vec::new(),
            dropped: 0,
        })
    });
    let result = work();
    let captured = CAPTURED.with(|captured| std::mem::replace(&mut *captured.borrow_mut(), outer));
    let mut lines = Vec::new();
    if let Some(captured) = captured {
        lines = captured.lines;
        if captured.dropped > 0 {
            lines.push(format!(
                "({} more lines not shown: at most {MAX_CAPTURED_LINES} are kept)",
                captured.dropped
            ));
        }
    }
    (result, lines)
}

/// The modules of one pack's `lib/`: `import "util"` reads `lib/util.rhai`.
/// Nothing else can be imported: no path outside `lib/`, no file system.
///
/// Resolving a module compiles it, which resolves its own imports: a module
/// that imports itself, directly or through others, would recurse until the
/// stack overflows. The modules being resolved are kept, innermost last, so
/// that a cycle or a chain deeper than [`MAX_IMPORT_DEPTH`] is an error at
/// the `import` that closes it.
pub struct PackLibrary {
    /// Module name (file stem) to its source text.
    modules: BTreeMap<String, String>,
    resolving: std::sync::Mutex<Vec<String>>,
    /// Modules compiled and run once already: every script and expression
    /// of the pack that imports one embeds the same, so it is built once.
    resolved: std::sync::Mutex<BTreeMap<String, Shared<Module>>>,
}

impl PackLibrary {
    pub fn new(modules: BTreeMap<String, String>) -> Self {
        PackLibrary {
            modules,
            resolving: std::sync::Mutex::new(Vec::new()),
            resolved: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    fn resolved(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Shared<Module>>> {
        self.resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The modules being resolved, outermost first.
    fn resolving(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.resolving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The error for importing `path` now, if that would never end: a cycle
    /// is told the same whichever module it was entered by (from its first
    /// module by name, at the import that closes it), so that it is one
    /// problem however many scripts run into it.
    fn refuse(&self, path: &str) -> Option<Box<EvalAltResult>> {
        let resolving = self.resolving();
        let files = |modules: &[String]| {
            modules
                .iter()
                .map(|m| library_file(m))
                .collect::<Vec<_>>()
                .join(" imports ")
        };
        let (importer, imported, message) =
            if let Some(start) = resolving.iter().position(|m| m == path) {
                let mut cycle = resolving[start..].to_vec();
                let first = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap_or(0);
                cycle.rotate_left(first);
                let closing = cycle.last().cloned().unwrap_or_default();
                let imported = cycle[0].clone();
                cycle.push(imported.clone());
                (
                    closing,
                    imported,
                    format!("import cycle: {}", files(&cycle)),
                )
            } else if resolving.len() >= MAX_IMPORT_DEPTH {
                let mut chain = resolving.clone();
                chain.push(path.to_owned());
                let importer = resolving.last().cloned().unwrap_or_default();
                let message = format!(
                    "imports nested deeper than {MAX_IMPORT_DEPTH}: {}",
                    files(&chain)
                );
                (importer, path.to_owned(), message)
            } else {
                return None;
            };
        let pos = self
            .modules
            .get(&importer)
            .and_then(|source| {
                let offset = source.find(&format!("\"{imported}\""))?;
                let (line, column) = crate::snapshot::problem::line_col(source, offset);
                Some(Position::new(
                    u16::try_from(line).ok()?,
                    u16::try_from(column).ok()?,
                ))
            })
            .unwrap_or(Position::NONE);
        let refused = EvalAltResult::ErrorRuntime(rhai::Dynamic::from(ImportLoop(message)), pos);
        Some(Box::new(EvalAltResult::ErrorInModule(
            library_file(&importer),
            refused.into(),
            Position::NONE,
        )))
    }
}

/// What an import that would never end raises: a cycle, or a chain deeper
/// than [`MAX_IMPORT_DEPTH`].
#[derive(Debug, Clone)]
struct ImportLoop(String);

impl ModuleResolver for PackLibrary {
    fn resolve(
        &self,
        engine: &Engine,
        _source: Option<&str>,
        path: &str,
        pos: Position,
    ) -> Result<Shared<Module>, Box<EvalAltResult>> {
        let not_found = || Box::new(EvalAltResult::ErrorModuleNotFound(path.to_owned(), pos));
        let source = self.modules.get(path).ok_or_else(not_found)?;
        if let Some(module) = self.resolved().get(path) {
            return Ok(module.clone());
        }
        if let Some(refused) = self.refuse(path) {
            return Err(refused);
        }
        let in_module = |error: Box<EvalAltResult>| {
            Box::new(EvalAltResult::ErrorInModule(library_file(path), error, pos))
        };
        self.resolving().push(path.to_owned());
        let compiled = engine.compile_into_self_contained(&Scope::new(), source);
        self.resolving().pop();
        let mut ast = compiled.map_err(in_module)?;
        ast.set_source(library_file(path));
        let module = Module::eval_ast_as_new(Scope::new(), &ast, engine)
            .map(Shared::new)
            .map_err(in_module)?;
        self.resolved().insert(path.to_owned(), module.clone());
        Ok(module)
    }
}

/// The file of a library module, relative to the pack.
pub fn library_file(module: &str) -> String {
    format!("lib/{module}.rhai")
}

/// The module a file of the pack is, when it is one of its `lib/`'s
/// (the inverse of [`library_file`]).
pub fn library_module(file: &str) -> Option<&str> {
    file.strip_prefix("lib/")?.strip_suffix(".rhai")
}

/// Why a script stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScriptErrorKind {
    /// It ran out of operations (an endless loop, say).
    TooManyOperations,
    /// It ran longer than [`MAX_CALL_TIME`].
    TookTooLong,
    /// It held more than [`MAX_CALL_MEMORY`].
    TooMuchMemory,
    /// The scripts of this run have spent the time they share
    /// (`--max-script-time`).
    RunOutOfTime,
    /// It nested calls too deeply (runaway recursion).
    CallTooDeep,
    /// A string, array or map grew past its limit.
    DataTooLarge,
    /// It imported something that is not in the pack's `lib/`.
    ModuleNotFound,
    /// Its `lib/` modules import each other in a circle, or deeper than
    /// [`MAX_IMPORT_DEPTH`].
    ImportLoop,
    /// It does not compile.
    Syntax,
    /// Anything else that went wrong while it ran.
    Runtime,
}

/// A script that failed, positioned in its file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScriptError {
    pub kind: ScriptErrorKind,
    pub file: PathBuf,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.to_problem().fmt(f)
    }
}

impl ScriptError {
    /// Classifies a rhai error raised by (or while compiling) the script in
    /// `file` of the pack in `pack_dir`. A position rhai does not know (the
    /// limits carry none) falls back to `fallback`, the function that was called.
    pub fn from_rhai(
        error: &EvalAltResult,
        pack_dir: &Path,
        file: &str,
        fallback: Option<(usize, usize)>,
    ) -> ScriptError {
        let (innermost, module) = innermost(error, None);
        let kind = match innermost {
            EvalAltResult::ErrorTooManyOperations(_) => ScriptErrorKind::TooManyOperations,
            EvalAltResult::ErrorTerminated(token, _) => match token.clone().try_cast() {
                Some(OverBudget::Time) => ScriptErrorKind::TookTooLong,
                Some(OverBudget::Memory) => ScriptErrorKind::TooMuchMemory,
                Some(OverBudget::RunTime) => ScriptErrorKind::RunOutOfTime,
                None => ScriptErrorKind::Runtime,
            },
            EvalAltResult::ErrorStackOverflow(_) => ScriptErrorKind::CallTooDeep,
            EvalAltResult::ErrorDataTooLarge(..) => ScriptErrorKind::DataTooLarge,
            EvalAltResult::ErrorModuleNotFound(..) => ScriptErrorKind::ModuleNotFound,
            EvalAltResult::ErrorRuntime(token, _) if token.is::<ImportLoop>() => {
                ScriptErrorKind::ImportLoop
            }
            EvalAltResult::ErrorParsing(..) => ScriptErrorKind::Syntax,
            _ => ScriptErrorKind::Runtime,
        };
        let position = innermost.position();
        let (line, column) = match (position.line(), position.position()) {
            (Some(line), column) => (Some(line), column),
            (None, _) if module.is_none() => {
                fallback.map_or((None, None), |(l, c)| (Some(l), Some(c)))
            }
            (None, _) => (None, None),
        };
        let message = match kind {
            ScriptErrorKind::TooManyOperations => {
                format!("script stopped: more than {MAX_OPERATIONS} operations (an endless loop?)")
            }
            ScriptErrorKind::TookTooLong => format!(
                "script stopped: ran longer than {} ms",
                MAX_CALL_TIME.as_millis()
            ),
            ScriptErrorKind::TooMuchMemory => format!(
                "script stopped: held more than {} MiB",
                MAX_CALL_MEMORY / (1024 * 1024)
            ),
            ScriptErrorKind::RunOutOfTime => format!(
                "script stopped: the pack scripts of this run have spent the {} s they share (--max-script-time raises it)",
                budget::run_limit().unwrap_or_default().as_secs()
            ),
            ScriptErrorKind::CallTooDeep => format!(
                "script stopped: calls nested deeper than {MAX_CALL_LEVELS} (runaway recursion?)"
            ),
            ScriptErrorKind::DataTooLarge => format!(
                "script stopped: {} (strings up to {MAX_STRING_SIZE} characters, arrays up to {MAX_ARRAY_SIZE} items, maps up to {MAX_MAP_SIZE} entries)",
                without_position(innermost)
            ),
            ScriptErrorKind::ModuleNotFound => format!(
                "{}: a pack imports only its own lib/ modules, by name (`import \"util\"` reads lib/util.rhai)",
                without_position(innermost)
            ),
            ScriptErrorKind::ImportLoop => match innermost {
                EvalAltResult::ErrorRuntime(token, _) => token
                    .clone()
                    .try_cast::<ImportLoop>()
                    .map_or_else(|| without_position(innermost), |refused| refused.0),
                _ => without_position(innermost),
            },
            _ => without_position(innermost),
        };
        ScriptError {
            kind,
            file: pack_dir.join(module.unwrap_or(file)),
            line,
            column,
            message,
        }
    }

    pub fn to_problem(&self) -> Problem {
        Problem {
            file: self.file.clone(),
            line: self.line,
            column: self.line.and(self.column),
            message: self.message.clone(),
        }
    }
}

/// The error that really happened, under the layers of function calls and
/// module loads around it, and the library file it happened in, if any.
fn innermost<'a>(
    error: &'a EvalAltResult,
    module: Option<&'a str>,
) -> (&'a EvalAltResult, Option<&'a str>) {
    match error {
        EvalAltResult::ErrorInFunctionCall(_, _, inner, _) => innermost(inner, module),
        EvalAltResult::ErrorInModule(name, inner, _) => innermost(inner, Some(name)),
        other => (other, module),
    }
}

/// rhai's message without the "(line 3, position 7)" it appends: the
/// position goes in front, as `file:line:col:`.
fn without_position(error: &EvalAltResult) -> String {
    let text = error.to_string();
    match text.rfind(" (line ") {
        Some(at) if text.ends_with(')') => text[..at].to_owned(),
        _ => text,
    }
}

/// Where `fn name(` is written in `source`, as a fallback position for
/// errors that carry none.
pub fn function_position(source: &str, name: &str) -> Option<(usize, usize)> {
    let needle = format!("fn {name}(");
    let offset = source.find(&needle)?;
    Some(crate::snapshot::problem::line_col(source, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rhai::{CallFnOptions, Dynamic};

    fn run(source: &str) -> ScriptError {
        let engine = engine();
        let ast = match engine.compile_into_self_contained(&Scope::new(), source) {
            Ok(ast) => ast,
            Err(error) => return ScriptError::from_rhai(&error, Path::new("p"), "s.rhai", None),
        };
        let result: Result<Dynamic, _> =
            engine.call_fn_with_options(CallFnOptions::new(), &mut Scope::new(), &ast, "f", ());
        let error = result.expect_err("the script must fail");
        ScriptError::from_rhai(
            &error,
            Path::new("p"),
            "s.rhai",
            function_position(source, "f"),
        )
    }

    #[test]
    fn endless_loop_runs_out_of_operations() {
        let error = run("fn f() {\n  loop { }\n}");
        assert_eq!(error.kind, ScriptErrorKind::TooManyOperations);
        assert_eq!((error.line, error.column), (Some(1), Some(1)));
    }

    #[test]
    fn runaway_recursion_is_too_deep() {
        assert_eq!(run("fn f() { f() }").kind, ScriptErrorKind::CallTooDeep);
    }

    #[test]
    fn doubling_string_is_too_large() {
        let error = run("fn f() { let s = \"x\"; loop { s += s; } }");
        assert_eq!(error.kind, ScriptErrorKind::DataTooLarge);
    }

    #[test]
    fn growing_array_is_too_large() {
        let error = run("fn f() { let a = []; loop { a += [1, 2, 3, 4, 5, 6, 7, 8]; } }");
        assert_eq!(error.kind, ScriptErrorKind::DataTooLarge);
    }

    #[test]
    fn importing_a_file_is_not_found() {
        let error = run("import \"/etc/passwd\" as p;\nfn f() { 1 }");
        assert_eq!(error.kind, ScriptErrorKind::ModuleNotFound);
    }

    #[test]
    fn eval_does_not_compile() {
        let error = run("fn f() {\n  eval(\"1 + 1\")\n}");
        assert_eq!(error.kind, ScriptErrorKind::Syntax);
        assert_eq!((error.line, error.column), (Some(2), Some(3)));
        assert!(error.message.contains("eval"), "{}", error.message);
    }

    #[test]
    fn undefined_variable_does_not_compile() {
        let error = run("fn f() { 1 }\nlet x = y;");
        assert_eq!(error.kind, ScriptErrorKind::Syntax);
        assert_eq!(
            error.to_string(),
            "p/s.rhai:2:9: Syntax error: Undefined variable: y"
        );
    }

    #[test]
    fn library_module_is_imported_by_name_only() {
        let mut engine = engine();
        let lib = BTreeMap::from([("util".to_owned(), "fn double(x) { x * 2 }".to_owned())]);
        engine.set_module_resolver(PackLibrary::new(lib));
        let ast = engine
            .compile_into_self_contained(
                &Scope::new(),
                "import \"util\" as u;\nfn f() { u::double(21) }",
            )
            .expect("compiles");
        engine.set_module_resolver(DummyModuleResolver::new());
        let value: i64 = engine
            .call_fn(&mut Scope::new(), &ast, "f", ())
            .expect("the embedded module is used");
        assert_eq!(value, 42);
        let error = engine
            .compile_into_self_contained(&Scope::new(), "import \"util\" as u;")
            .expect_err("nothing to import outside a pack's compilation");
        assert!(matches!(*error, EvalAltResult::ErrorModuleNotFound(..)));
    }

    #[test]
    fn a_library_module_is_built_once_for_every_script_and_expression_importing_it() {
        let engine = engine();
        let lib = BTreeMap::from([("util".to_owned(), "fn double(x) { x * 2 }".to_owned())]);
        let library = PackLibrary::new(lib);
        let first = library
            .resolve(&engine, None, "util", Position::NONE)
            .expect("resolves");
        let again = library
            .resolve(&engine, None, "util", Position::NONE)
            .expect("resolves");
        assert!(Shared::ptr_eq(&first, &again), "compiled and run once");
    }

    #[test]
    fn printed_lines_are_kept_only_while_captured_and_only_so_many() {
        let engine = engine();
        let printing = "for i in 0..1500 { print(`line ${i}`) }";
        engine.run(printing).expect("runs");
        let ((), lines) = capturing_output(|| engine.run(printing).expect("runs"));
        assert_eq!(lines.len(), MAX_CAPTURED_LINES + 1);
        assert_eq!(lines[0], "print: line 0");
        assert_eq!(lines[MAX_CAPTURED_LINES - 1], "print: line 999");
        assert_eq!(
            lines[MAX_CAPTURED_LINES],
            "(500 more lines not shown: at most 1000 are kept)"
        );
        // Nothing printed outside a capture is kept for the next one.
        engine.run(printing).expect("runs");
        let ((), lines) = capturing_output(|| engine.run("debug(42)").expect("runs"));
        assert_eq!(lines, ["debug line 1: 42"]);
    }
}
