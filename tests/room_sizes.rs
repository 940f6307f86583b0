//! One job per room: no product file of `src/engine`, `src/packs` or
//! `src/cli` passes 800 lines, and no product function anywhere in `src/`
//! passes 150. Unit tests (`tests.rs`, `*_tests.rs`, a `#[cfg(test)]`
//! module at the end of a file, the walker's `fixture.rs`) are not product
//! code and are not counted.

mod common;

use std::fs;
use std::path::Path;

use common::source_tree::{root, rust_sources};

const MAX_FILE_LINES: usize = 800;
const MAX_FUNCTION_LINES: usize = 150;
/// The directories whose files are held to [`MAX_FILE_LINES`].
const ROOMS: &[&str] = &["src/engine", "src/packs", "src/cli"];

fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs" || name.ends_with("_tests.rs") || name == "fixture.rs"
}

/// The product part of a source: everything before its test module.
fn product(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|line| line.starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// Each function of `lines` longer than `max`: its name, first line and
/// length, from its `fn` line to the closing brace at its indentation.
fn long_functions(lines: &[&str], max: usize) -> Vec<(String, usize, usize)> {
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let Some(signature) = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "async fn ",
        ]
        .iter()
        .find_map(|prefix| trimmed.strip_prefix(prefix)) else {
            continue;
        };
        let name: String = signature
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let closing = format!("{indent}}}");
        let end = lines[start + 1..]
            .iter()
            .position(|line| *line == closing)
            .map(|offset| start + 1 + offset);
        if let Some(end) = end {
            let length = end - start + 1;
            if length > max {
                found.push((name, start + 1, length));
            }
        }
    }
    found
}

#[test]
fn no_room_is_over_its_size() {
    let mut over = Vec::new();
    for file in rust_sources("src")
        .iter()
        .filter(|file| !is_test_file(file))
    {
        let relative = file.strip_prefix(root()).unwrap();
        let text = fs::read_to_string(file).unwrap();
        let lines = product(&text);
        let in_room = ROOMS.iter().any(|room| relative.starts_with(room));
        if in_room && lines.len() > MAX_FILE_LINES {
            over.push(format!(
                "{}: {} lines of product code (at most {MAX_FILE_LINES})",
                relative.display(),
                lines.len()
            ));
        }
        for (name, line, length) in long_functions(&lines, MAX_FUNCTION_LINES) {
            over.push(format!(
                "{}:{line}: fn {name} is {length} lines (at most {MAX_FUNCTION_LINES})",
                relative.display()
            ));
        }
    }
    assert!(over.is_empty(), "{}", over.join("\n"));
}

/// The check above can fail: it measures a function to its closing brace.
#[test]
fn a_long_function_is_measured() {
    let mut source = vec!["    pub(super) fn walk(&self) {"];
    source.extend(std::iter::repeat_n("        step();", 150));
    source.push("    }");
    source.push("fn short() {}");
    assert_eq!(
        long_functions(&source, MAX_FUNCTION_LINES),
        [("walk".to_string(), 1, 152)]
    );
    assert!(long_functions(&source, 152).is_empty());
}
