//! `skoop netfilter trace` as `docs/netfilter-trace.md` shows it: every
//! `$ skoop ...` of its console blocks is run, and what it prints must be
//! what the page says (every line the page shows, in order; exactly, where
//! the page elides nothing with `...`). A `$ cat FILE` shows a file the
//! commands after it read: it is written as shown.

use std::path::Path;
use std::process::Command;

/// A command of a console block and the lines the page shows it printing.
struct Example {
    command: String,
    shown: Vec<String>,
}

fn examples(page: &str) -> Vec<Example> {
    let mut examples: Vec<Example> = Vec::new();
    let mut in_console = false;
    for line in page.lines() {
        if line.starts_with("```console") {
            in_console = true;
        } else if line.starts_with("```") {
            in_console = false;
        } else if in_console {
            match line.strip_prefix("$ ") {
                Some(command) => examples.push(Example {
                    command: command.to_string(),
                    shown: Vec::new(),
                }),
                None => {
                    if let Some(example) = examples.last_mut() {
                        example.shown.push(line.to_string());
                    }
                }
            }
        }
    }
    examples
}

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
        let printed = String::from_utf8_lossy(&output.stdout);
        let printed: Vec<&str> = printed.lines().collect();
        if !example.shown.iter().any(|l| l == "...") {
            assert_eq!(printed, example.shown, "{}", example.command);
            continue;
        }
        let mut rest = printed.iter();
        for line in example.shown.iter().filter(|l| *l != "...") {
            assert!(
                rest.any(|p| p == line),
                "{}: the page shows {line:?}, which it does not print (in that order):\n{}",
                example.command,
                printed.join("\n")
            );
        }
    }
}
