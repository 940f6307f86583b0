//! The engine's finding ids are one catalogue, `src/engine/codes.rs`:
//! `docs/findings.md` is generated from it, every id it lists is one the
//! engine emits, and no code spells an id as a string of its own: a stage
//! names its finding by the catalogue's constant, so a script that matches
//! on an id can find what it means, and a misspelt id is a compile error.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use common::source_tree::{literals, root, rust_sources};
use skoop::engine::codes;

/// The prefixes of the engine's own ids (the packs' ids are their own).
const PREFIXES: &[&str] = &["kernel.", "engine.", "snapshot.", "kubernetes."];

/// The catalogue's own file: the one place an id is spelt.
const CATALOGUE: &str = "src/engine/codes.rs";

/// The string literals of a Rust source that read like an engine's id: a
/// prefix, then lower-case words joined by `.`, `-`, `_`.
fn id_literals(text: &str) -> Vec<(usize, String)> {
    literals(text, |literal| {
        PREFIXES.iter().any(|prefix| literal.starts_with(prefix))
            && literal
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
    })
}

#[test]
fn the_findings_page_is_the_catalogue() {
    let page = root().join("docs/findings.md");
    let generated = codes::markdown();
    if std::env::var_os("SKOOP_BLESS").is_some() {
        fs::write(&page, &generated).unwrap();
    }
    let written = fs::read_to_string(&page).unwrap();
    assert!(
        written == generated,
        "docs/findings.md is not what {CATALOGUE} generates; \
         run `SKOOP_BLESS=1 cargo test --test finding_catalogue`"
    );
}

/// No source spells an engine id: in `src/engine` no literal reads like
/// one at all, and nowhere in `src/` is a catalogued id written out.
#[test]
fn no_code_spells_a_finding_id_outside_the_catalogue() {
    let catalogued: BTreeSet<&str> = codes::ALL.iter().map(|code| code.id).collect();
    let mut spelt = Vec::new();
    for file in &rust_sources("src") {
        let relative = file.strip_prefix(root()).unwrap();
        if relative == Path::new(CATALOGUE) {
            continue;
        }
        let in_engine = relative.starts_with("src/engine");
        for (line, literal) in id_literals(&fs::read_to_string(file).unwrap()) {
            if in_engine || catalogued.contains(literal.as_str()) {
                spelt.push(format!("{}:{line}: \"{literal}\"", relative.display()));
            }
        }
    }
    assert!(
        spelt.is_empty(),
        "finding ids spelt as strings (name them by their constant in {CATALOGUE}):\n{}",
        spelt.join("\n")
    );
}

/// The check above can fail: it finds an id in a line of code.
#[test]
fn an_id_written_as_a_string_is_found() {
    let code = "if f.id == \"kernel.route.none\" && x == \"not-an-id\" { stop(\"engine.loop\") }";
    let found: Vec<String> = id_literals(code).into_iter().map(|(_, id)| id).collect();
    assert_eq!(found, ["kernel.route.none", "engine.loop"]);
}

/// Every id of the catalogue is used by the engine: the page lists none
/// that nothing emits.
#[test]
fn every_catalogued_id_is_emitted() {
    let code: String = rust_sources("src/engine")
        .iter()
        .filter(|file| !file.ends_with("codes.rs"))
        .map(|file| {
            let text = fs::read_to_string(file).unwrap();
            // Only the product code: unit tests name ids to check them.
            match text.find("#[cfg(test)]\nmod tests") {
                Some(tests) => text[..tests].to_owned(),
                None if file.ends_with("tests.rs") || file.ends_with("fixture.rs") => String::new(),
                None => text,
            }
        })
        .collect();
    // The catalogue's entries as written: `    NAME = "id", Severity,`.
    let catalogue = fs::read_to_string(root().join(CATALOGUE)).unwrap();
    let entries: Vec<(&str, &str)> = catalogue
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(" = \"")?;
            let constant = name.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            constant.then_some((name, rest.split('"').next()?))
        })
        .collect();
    assert_eq!(entries.len(), codes::ALL.len(), "{entries:?}");
    let unused: Vec<&str> = entries
        .iter()
        .filter(|(name, _)| !code.contains(&format!("codes::{name}")))
        .map(|(_, id)| *id)
        .collect();
    assert!(
        unused.is_empty(),
        "in {CATALOGUE} but emitted nowhere in src/engine: {unused:?}"
    );
}
