//! A dump file is named by its `DumpFile` variant, never by a string spelt
//! again: the contract's table of file names (`src/snapshot/netns/mod.rs`)
//! is the one place a name is written, so that renaming or adding a file
//! cannot leave a stale copy behind.

use std::fs;
use std::path::{Path, PathBuf};

use skoop::snapshot::netns::DumpFile;

/// The table of dump files: the one place their names are spelt.
const TABLE: &str = "src/snapshot/netns/mod.rs";

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The lines of `text` with a string literal that is a dump file's name.
fn names_spelt(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for literal in line.split('"').skip(1).step_by(2) {
            if let Some(file) = DumpFile::from_name(literal) {
                found.push((number + 1, file.name()));
            }
        }
    }
    found
}

#[test]
fn no_source_spells_a_dump_file_name_outside_its_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut spelt = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(root).unwrap();
        if relative == Path::new(TABLE) {
            continue;
        }
        for (line, name) in names_spelt(&fs::read_to_string(file).unwrap()) {
            spelt.push(format!("{}:{line}: \"{name}\"", relative.display()));
        }
    }
    assert!(
        spelt.is_empty(),
        "dump file names spelt as strings (name them by DumpFile, {TABLE}):\n{}",
        spelt.join("\n")
    );
}

/// The check above can fail: it finds a name in a line of code.
#[test]
fn a_dump_file_name_written_as_a_string_is_found() {
    let code = r#"let evidence = dir.join("iptables-save.txt"); let x = "iptables";"#;
    assert_eq!(names_spelt(code), [(1, "iptables-save.txt")]);
}
