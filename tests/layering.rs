//! The layers import downwards only (ARCHITECTURE.md, "Layers"): every
//! `use crate::X`, `crate::X::` path and `super::` path of `src/**/*.rs` is
//! resolved to the module it names, and a module that reaches one above it
//! in [`ORDERS`] (or beside it, in the same layer) fails this test, named by
//! file and line. Comments and string literals are not code, and are passed
//! over.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Layers of modules, lowest first, within a module (`[]`: the crate's top
/// modules). A module may import the modules of the layers below its own,
/// and none of its own layer but itself.
struct Order {
    within: &'static [&'static str],
    layers: &'static [&'static [&'static str]],
}

const ORDERS: &[Order] = &[
    Order {
        within: &[],
        layers: &[
            // The words every layer speaks: findings and their evidence, and
            // the network vocabulary (one protocol).
            &["diagnostic", "net"],
            // Data in: a snapshot directory read into typed models.
            &["snapshot"],
            // The kernel model of one namespace, and its cache per snapshot.
            &["netstack"],
            &["packs"],
            // Collection writes snapshots and the engine reads them: neither
            // knows the other.
            &["collect", "engine"],
            // The model beside the kernel: a diagnosis's flow sent through
            // collection's shells (`--confirm`).
            &["confirm"],
            &["report"],
            // What composes the engine with the others: many flows, a pack's
            // own tests, a live flow's collection.
            &["live_flow", "matrix", "pack_tests"],
            // The binary: src/main.rs and src/cli/.
            &["cli"],
        ],
    },
    Order {
        within: &["collect"],
        layers: &[
            &["command", "rbac"],
            &["credential"],
            &["api"],
            &["collector"],
            &["shell"],
            &["dump"],
            &["local", "node", "objects"],
            &["live"],
        ],
    },
];

/// A module that reaches one it may not.
#[derive(Debug, PartialEq, Eq)]
struct Violation {
    file: String,
    line: usize,
    from: String,
    to: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {} imports {}, which is not below it",
            self.file, self.line, self.from, self.to
        )
    }
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let sources: Vec<(String, String)> = files
        .iter()
        .map(|path| {
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            (relative, std::fs::read_to_string(path).unwrap())
        })
        .collect();
    assert!(sources.len() > 100, "found {} files", sources.len());
    let problems = check(&sources);
    assert!(
        problems.is_empty(),
        "the layers import downwards only (ARCHITECTURE.md):\n{}",
        problems.join("\n")
    );
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// Every violation and every module no layer names, in `(path, text)`
/// sources whose paths start with `src/`.
fn check(sources: &[(String, String)]) -> Vec<String> {
    let modules = module_paths(sources);
    let mut problems = Vec::new();
    for (file, text) in sources {
        let module = &modules[file];
        for order in ORDERS {
            if let Some(name) = ranked_name(order, module)
                && rank(order, name).is_none()
            {
                problems.push(format!(
                    "{file}: module {} is in no layer of the order within {:?}: place it",
                    name, order.within
                ));
            }
        }
        problems.extend(violations(file, module, text).iter().map(|v| v.to_string()));
    }
    problems
}

/// Each file's module path: from its place under `src/`, or from the
/// `#[path]` attribute of the `mod` that declares it. `src/main.rs` and
/// `src/cli/` are the binary, `cli`.
fn module_paths(sources: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut modules: BTreeMap<String, Vec<String>> = sources
        .iter()
        .map(|(file, _)| (file.clone(), module_of(file)))
        .collect();
    for (file, text) in sources {
        let tokens = tokens(text);
        for window in tokens.windows(8) {
            let words: Vec<&str> = window.iter().map(|t| t.text.as_str()).collect();
            if let ["#", "[", "path", "=", target, "]", "mod", name] = words[..] {
                let dir = Path::new(file).parent().unwrap();
                let target = dir.join(target.trim_matches('"')).display().to_string();
                let mut module = modules[file].clone();
                module.push(name.to_string());
                modules.insert(target, module);
            }
        }
    }
    modules
}

fn module_of(file: &str) -> Vec<String> {
    let path = file
        .strip_prefix("src/")
        .unwrap()
        .strip_suffix(".rs")
        .unwrap();
    let mut module: Vec<String> = path.split('/').map(str::to_string).collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
        module.pop();
    }
    if module == ["main"] {
        module = vec!["cli".to_string()];
    }
    module
}

/// The name `module` has in `order`'s layers: its component just after
/// `order.within`.
fn ranked_name<'m>(order: &Order, module: &'m [String]) -> Option<&'m str> {
    let inside =
        module.len() > order.within.len() && module.iter().zip(order.within).all(|(a, b)| a == b);
    inside.then(|| module[order.within.len()].as_str())
}

fn rank(order: &Order, name: &str) -> Option<usize> {
    order.layers.iter().position(|layer| layer.contains(&name))
}

/// The imports of `text` (the file `file`, module `module`) that reach a
/// module not below its own.
fn violations(file: &str, module: &[String], text: &str) -> Vec<Violation> {
    let mut found = Vec::new();
    for (line, target) in references(module, text) {
        for order in ORDERS {
            let (Some(from), Some(to)) = (ranked_name(order, module), ranked_name(order, &target))
            else {
                continue;
            };
            let (Some(from_rank), Some(to_rank)) = (rank(order, from), rank(order, to)) else {
                continue;
            };
            let violation = Violation {
                file: file.to_string(),
                line,
                from: from.to_string(),
                to: to.to_string(),
            };
            // One line for a `use` of several names from one module.
            if from != to && to_rank >= from_rank && found.last() != Some(&violation) {
                found.push(violation);
            }
        }
    }
    found
}

/// Every module path `text` names from the crate's root or through
/// `super`, with its line: `crate::a::{b, c::d}` names `a::b` and
/// `a::c::d`; in module `x::y`, `super::z` names `x::z`.
fn references(module: &[String], text: &str) -> Vec<(usize, Vec<String>)> {
    let tokens = tokens(text);
    // The inline modules (`mod tests { ... }`) open at each token.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i].text;
        match token.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last().is_some_and(|(_, at)| *at == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t.text == "{") => {
                inline.push((tokens[i + 1].text.clone(), depth));
            }
            _ => {}
        }
        let starts_path = i == 0 || tokens[i - 1].text != "::";
        if starts_path && matches!(token.as_str(), "crate" | "$crate" | "super") {
            let mut base: Vec<String> = module
                .iter()
                .cloned()
                .chain(inline.iter().map(|(name, _)| name.clone()))
                .collect();
            // The first token after the prefix (`crate::`, `super::super::`).
            let mut at = i;
            if token.ends_with("crate") {
                base.clear();
                at += 2;
            } else {
                while tokens.get(at).is_some_and(|t| t.text == "super") {
                    base.pop();
                    at += 2;
                }
            }
            if tokens.get(at - 1).is_some_and(|t| t.text == "::") {
                let mut paths = Vec::new();
                let line = tokens[i].line;
                i = tree(&tokens, at, base, &mut paths);
                found.extend(paths.into_iter().map(|path| (line, path)));
                continue;
            }
        }
        i += 1;
    }
    found
}

/// Reads a use tree at `at` (`a::b`, `a::{b, c::d}`, `*`, `self`) after
/// `prefix`, adding each path it names; returns where it ends.
fn tree(
    tokens: &[Token],
    mut at: usize,
    mut prefix: Vec<String>,
    paths: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(at).map(|t| t.text.as_str()) {
            Some("{") => {
                at += 1;
                while tokens.get(at).is_some_and(|t| t.text != "}") {
                    at = tree(tokens, at, prefix.clone(), paths);
                    if tokens.get(at).is_some_and(|t| t.text == ",") {
                        at += 1;
                    }
                }
                return at + 1;
            }
            Some(word) if is_ident(word) && word != "self" => {
                prefix.push(word.to_string());
                at += 1;
                if tokens.get(at).is_some_and(|t| t.text == "::") {
                    at += 1;
                    continue;
                }
                paths.push(prefix);
                return at;
            }
            _ => {
                paths.push(prefix);
                return at + 1;
            }
        }
    }
}

fn is_ident(word: &str) -> bool {
    word.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A token of Rust source and the line it starts on.
#[derive(Debug)]
struct Token {
    text: String,
    line: usize,
}

/// The tokens of `text` that matter here: identifiers (`$crate` one), `::`,
/// punctuation, and string literals (kept whole, so that `#[path = "x"]`
/// reads); comments are dropped, and so are char literals and lifetimes.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let newlines = |from: usize, to: usize| chars[from..to].iter().filter(|&&c| c == '\n').count();
    while i < chars.len() {
        let c = chars[i];
        let rest = |n: usize| chars.get(i + n).copied();
        let start = i;
        if c == '/' && rest(1) == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && rest(1) == Some('*') {
            let mut nesting = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    nesting += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    nesting -= 1;
                    i += 2;
                    if nesting == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += newlines(start, i);
            continue;
        }
        // Raw strings: r"...", r#"..."#, br"...".
        let raw_at = match (c, rest(1)) {
            ('r', Some('"' | '#')) => Some(i + 1),
            ('b', Some('r')) if matches!(rest(2), Some('"' | '#')) => Some(i + 2),
            _ => None,
        };
        if let Some(mut at) = raw_at {
            let mut hashes = 0;
            while chars.get(at) == Some(&'#') {
                hashes += 1;
                at += 1;
            }
            if chars.get(at) == Some(&'"') {
                let close: Vec<char> = std::iter::once('"')
                    .chain((0..hashes).map(|_| '#'))
                    .collect();
                at += 1;
                while at < chars.len() && !chars[at..].starts_with(&close) {
                    at += 1;
                }
                i = (at + close.len()).min(chars.len());
                tokens.push(Token {
                    text: chars[start..i].iter().collect(),
                    line,
                });
                line += newlines(start, i);
                continue;
            }
        }
        if c == '"' || (c == 'b' && rest(1) == Some('"')) {
            i += if c == 'b' { 2 } else { 1 };
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
            tokens.push(Token {
                text: chars[start..i].iter().collect(),
                line,
            });
            line += newlines(start, i);
            continue;
        }
        if c == '\'' {
            // A char literal ('a', '\n', '\u{1F600}'), else a lifetime.
            if rest(1) == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if rest(2) == Some('\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
            continue;
        }
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_alphanumeric() || c == '_' || (c == '$' && rest(1).is_some_and(char::is_alphabetic))
        {
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c == ':' && rest(1) == Some(':') {
            i += 2;
        } else {
            i += 1;
        }
        tokens.push(Token {
            text: chars[start..i].iter().collect(),
            line,
        });
    }
    tokens
}

/// A made-up source, as `check` reads it.
fn source(file: &str, text: &str) -> (String, String) {
    (file.to_string(), text.to_string())
}

#[test]
fn an_import_from_a_layer_above_is_named_with_its_file_and_line() {
    let sources = [source(
        "src/snapshot/mod.rs",
        "//! Data in.\n\nuse crate::netstack::namespace::{Modelled, Namespace};\nuse crate::diagnostic::Evidence;\n",
    )];
    assert_eq!(
        check(&sources),
        ["src/snapshot/mod.rs:3: snapshot imports netstack, which is not below it"]
    );
}

#[test]
fn grouped_inline_and_super_paths_are_resolved() {
    let text = "\
use crate::{diagnostic, engine::Diagnosis};
fn f() -> crate::report::json::Report { todo!() }
mod tests {
    use super::super::super::matrix::evaluate;
    use super::*;
}
";
    let found = violations("src/packs/host.rs", &module_of("src/packs/host.rs"), text);
    let reached: Vec<(usize, &str)> = found.iter().map(|v| (v.line, v.to.as_str())).collect();
    assert_eq!(reached, [(1, "engine"), (2, "report"), (4, "matrix")]);
}

#[test]
fn a_sibling_in_the_same_layer_is_not_below() {
    let found = violations(
        "src/collect/dump.rs",
        &module_of("src/collect/dump.rs"),
        "use crate::engine::diagnose;\nuse super::local::find_tool;\nuse super::shell::NodeShell;\n",
    );
    let reached: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(
        reached,
        [
            "src/collect/dump.rs:1: collect imports engine, which is not below it",
            "src/collect/dump.rs:2: dump imports local, which is not below it",
        ]
    );
}

#[test]
fn comments_strings_and_the_module_itself_are_not_imports() {
    let text = r##"
// use crate::engine::Walker;
/* crate::report:: /* nested */ crate::matrix:: */
const HELP: &str = "see crate::engine::diagnose";
const RAW: &str = r#"crate::cli::main "quoted""#;
const C: char = '"';
fn f<'a>(x: &'a str) -> &'a str { x }
use crate::packs::LoadedPacks;
use crate::snapshot::Snapshot;
"##;
    assert!(violations("src/packs/eval.rs", &module_of("src/packs/eval.rs"), text).is_empty());
}

#[test]
fn a_module_in_no_layer_must_be_placed() {
    let sources = [source(
        "src/newthing.rs",
        "use crate::snapshot::Snapshot;\n",
    )];
    assert_eq!(
        check(&sources),
        ["src/newthing.rs: module newthing is in no layer of the order within []: place it"]
    );
}

#[test]
fn a_path_attribute_gives_the_declared_module() {
    let sources = [
        source(
            "src/snapshot/cluster/cache.rs",
            "#[path = \"cache_tests.rs\"]\nmod tests;\n",
        ),
        source(
            "src/snapshot/cluster/cache_tests.rs",
            "use super::super::super::Snapshot;\n",
        ),
    ];
    let modules = module_paths(&sources);
    assert_eq!(
        modules["src/snapshot/cluster/cache_tests.rs"],
        ["snapshot", "cluster", "cache", "tests"]
    );
    assert!(check(&sources).is_empty());
}
