//! `skoop netfilter trace` as `docs/netfilter-trace.md` shows it: every
//! `$ skoop ...` of its console blocks is run, and what it prints must be
//! what the page says (every line the page shows, in order; exactly, where
//! the page elides nothing with `...`). A `$ cat FILE` shows a file the
//! commands after it read: it is written as shown.

mod common;

use std::path::Path;
use std::process::Command;

use common::console::examples;

#[test]
fn the_pages_examples_print_what_the_page_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/netfilter-trace.md")).expect("the page");
    let examples = examples(&page);
    assert!(examples.len() >= 2, "the page shows its examples");
    let files = tempfile::tempdir().expect("a temp dir");
    let mut shown_files: Vec<(String, std::path::PathBuf)> = Vec::new();
    for example in examples {
        let words: Vec<&str> = example.command.split_whitespace().collect();
        if let ["cat", name] = words.as_slice() {
            let path = files.path().join(name);
            std::fs::write(&path, example.shown.join("\n") + "\n").expect("write the file");
            shown_files.push((name.to_string(), path));
            continue;
        }
        assert_eq!(words[0], "skoop", "{}", example.command);
        let args: Vec<std::ffi::OsString> = words[1..]
            .iter()
            .map(|word| {
                shown_files
                    .iter()
                    .find(|(name, _)| name == word)
                    .map_or_else(|| word.into(), |(_, path)| path.into())
            })
            .collect();
        let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
            .args(&args)
            .current_dir(root)
            .output()
            .expect("skoop runs");
        example.assert_printed(&String::from_utf8_lossy(&output.stdout));
    }
}
