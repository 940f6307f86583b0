//! A dump file is named by its `DumpFile` variant, never by a string spelt
//! again: the contract's table of file names (`src/snapshot/netns/mod.rs`)
//! is the one place a name is written, so that renaming or adding a file
//! cannot leave a stale copy behind.

mod common;

use std::fs;
use std::path::Path;

use common::source_tree::{literals, root, rust_sources};
use skoop::snapshot::netns::DumpFile;

/// The table of dump files: the one place their names are spelt.
const TABLE: &str = "src/snapshot/netns/mod.rs";

/// The lines of `text` with a string literal that is a dump file's name.
fn names_spelt(text: &str) -> Vec<(usize, String)> {
    literals(text, |literal| DumpFile::from_name(literal).is_some())
}

#[test]
fn no_source_spells_a_dump_file_name_outside_its_table() {
    let mut spelt = Vec::new();
    for file in &rust_sources("src") {
        let relative = file.strip_prefix(root()).unwrap();
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
    assert_eq!(names_spelt(code), [(1, "iptables-save.txt".to_string())]);
}
