//! Every finding id the engine can emit is documented in `docs/findings.md`,
//! and every id documented there is one the engine emits: a script that
//! matches on an id can find what it means.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The prefixes of the engine's own ids (the packs' ids are their own).
const PREFIXES: &[&str] = &["kernel.", "engine.", "snapshot.", "kubernetes."];

/// Every string literal in `dir`'s Rust sources that reads like an id of
/// the engine's: a prefix, then lower-case words joined by `.`, `-`, `_`.
fn ids_in(dir: &Path, ids: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            ids_in(&path, ids);
            continue;
        }
        if path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        for literal in text.split('"').skip(1).step_by(2) {
            let is_id = PREFIXES.iter().any(|prefix| literal.starts_with(prefix))
                && literal
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
            if is_id {
                ids.insert(literal.to_string());
            }
        }
    }
}

/// The ids the catalogue documents: the first column of its tables.
fn documented() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(root.join("docs/findings.md")).unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_finding_id_the_engine_emits_is_documented_and_no_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut emitted = BTreeSet::new();
    ids_in(&root.join("src/engine"), &mut emitted);
    assert!(emitted.contains("kernel.netfilter.denied"), "{emitted:?}");
    let documented = documented();
    let undocumented: Vec<_> = emitted.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "emitted by src/engine but not in docs/findings.md: {undocumented:?}"
    );
    let stale: Vec<_> = documented.difference(&emitted).collect();
    assert!(
        stale.is_empty(),
        "in docs/findings.md but emitted nowhere in src/engine: {stale:?}"
    );
}
