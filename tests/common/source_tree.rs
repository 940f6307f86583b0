//! The crate's own sources read as text, for the tests that hold rules
//! about the code itself (ids and file names spelt once, room sizes).

use std::fs;
use std::path::{Path, PathBuf};

/// The package's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every Rust source under `dir` (relative to the package root).
pub fn rust_sources(dir: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&root().join(dir), &mut found);
    found.sort();
    found
}

/// The string literals of `text` that `wanted` picks, each with its
/// 1-based line (a literal is what stands between a pair of quotes on a
/// line, which is all these checks need).
pub fn literals(text: &str, wanted: impl Fn(&str) -> bool) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for literal in line.split('"').skip(1).step_by(2) {
            if wanted(literal) {
                found.push((number + 1, literal.to_string()));
            }
        }
    }
    found
}
