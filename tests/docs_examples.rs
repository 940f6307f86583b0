//! Every command README.md and `docs/*.md` show is run, and must print what
//! the page shows (every line, in order; exactly, where the page elides
//! nothing with `...`), so that the documentation cannot drift from the
//! tool. A block of commands is either a `console` block, run here, or
//! marked `<!-- not run: WHY -->` on the line before its fence (a live
//! cluster, root on a node): an unmarked `sh` block, a marker without a
//! reason or before no block of commands fails.
//!
//! Commands run without a shell, from the repository's root: `skoop ...`
//! (the binary under test), after `NAME=VALUE` words for its environment,
//! and `cat FILE`, which shows a file the commands after it read: it is
//! written as shown, and FILE in later commands names it. A file a command
//! writes (`--output FILE`) goes to a temporary directory, and must be
//! written.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::console::{Example, blocks};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root().join("README.md"));
    pages
}

#[test]
fn every_command_in_the_readme_and_docs_prints_what_they_show() {
    let mut failures: Vec<String> = Vec::new();
    let mut run = 0;
    for page in pages() {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).expect("the page");
        let (blocks, stray) = blocks(&text);
        for line in stray {
            failures.push(format!(
                "{name}:{line}: a `not run` marker before no block of commands"
            ));
        }
        let files = tempfile::tempdir().expect("a temp dir");
        let mut shown_files: Vec<(String, PathBuf)> = Vec::new();
        for block in blocks {
            let at = format!("{name}:{}", block.line);
            match (&block.not_run, block.language.as_str()) {
                (Some(why), _) if why.is_empty() => {
                    failures.push(format!("{at}: `not run` says no reason"));
                }
                (Some(_), _) => {}
                (None, "console") => {
                    for example in &block.examples {
                        run += 1;
                        if let Err(e) = run_example(example, files.path(), &mut shown_files) {
                            failures.push(format!("{at}: $ {}: {e}", example.command));
                        }
                    }
                }
                (None, language) => failures.push(format!(
                    "{at}: a `{language}` block the tests do not run: make it a `console` block \
                     (`$ ` before each command, what it prints after it) or mark it \
                     `<!-- not run: WHY -->`"
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(run >= 20, "only {run} commands ran: are the pages read?");
}

/// Runs one command of a page and holds it to what the page shows.
fn run_example(
    example: &Example,
    files: &Path,
    shown_files: &mut Vec<(String, PathBuf)>,
) -> Result<(), String> {
    let words: Vec<&str> = example.command.split_whitespace().collect();
    if let Some(word) = words
        .iter()
        .find(|w| w.contains(['|', '>', '<', '\'', '"', ';', '&', '$', '`']))
    {
        return Err(format!(
            "{word:?}: the runner uses no shell; show the command plainly, or mark the block not run"
        ));
    }
    if let ["cat", file] = words.as_slice() {
        let path = files.join(file);
        std::fs::write(&path, example.shown.join("\n") + "\n").map_err(|e| e.to_string())?;
        shown_files.push((file.to_string(), path));
        return Ok(());
    }
    let env: Vec<(&str, &str)> = words
        .iter()
        .map_while(|word| word.split_once('='))
        .collect();
    let [program, args @ ..] = &words[env.len()..] else {
        return Err("no command".into());
    };
    if *program != "skoop" {
        return Err(format!(
            "only `skoop` and `cat FILE` run here, not {program:?}; mark the block not run"
        ));
    }
    let mut written: Option<PathBuf> = None;
    let mut args: Vec<std::ffi::OsString> = args.iter().map(|arg| arg.into()).collect();
    for index in 0..args.len() {
        let word = args[index].to_string_lossy().into_owned();
        if let Some((_, path)) = shown_files.iter().find(|(name, _)| *name == word) {
            args[index] = path.into();
        } else if index > 0 && args[index - 1] == "--output" {
            let path = files.join(&word);
            args[index] = path.clone().into();
            written = Some(path);
        }
    }
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(&args)
        .env_remove("SKOOP_SNAPSHOT")
        .envs(env)
        .current_dir(root())
        .output()
        .map_err(|e| e.to_string())?;
    if output.status.code() == Some(2) {
        return Err(format!(
            "exits 2, a usage error: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    example.check_printed(&String::from_utf8_lossy(&output.stdout))?;
    if let Some(path) = written {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("writes no {}: {e}", path.display()))?;
        let start = match path.extension().and_then(|e| e.to_str()) {
            Some("html") => "<!DOCTYPE html>",
            Some("svg") => "<svg ",
            Some("json") => "{",
            _ => "",
        };
        if text.is_empty() || !text.starts_with(start) {
            return Err(format!("{} is not what its name says", path.display()));
        }
    }
    Ok(())
}

/// docs/packs.md's annotated manifest, beside the Flannel pack's scripts,
/// is a pack `skoop packs lint` finds no problem in: the fields, parameters,
/// hooks and functions it shows are ones that exist.
#[test]
fn the_packs_pages_annotated_manifest_is_a_pack_without_a_problem() {
    let page = std::fs::read_to_string(root().join("docs/packs.md")).expect("the page");
    let start = page
        .find("## The manifest, annotated")
        .expect("the section");
    let manifest = page[start..]
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("its yaml block");
    let pack = tempfile::tempdir().expect("a temp dir");
    let flannel = root().join("plugins/flannel");
    common::copy_dir(&flannel.join("lib"), &pack.path().join("lib"));
    std::fs::copy(flannel.join("checks.rhai"), pack.path().join("checks.rhai")).unwrap();
    std::fs::write(pack.path().join("pack.yaml"), manifest).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["packs", "lint"])
        .arg(pack.path())
        .output()
        .expect("skoop runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The repository stands alone: a relative path in README.md,
/// ARCHITECTURE.md or a page of docs/ (a link, or `../...` in backquotes)
/// names a file inside it that exists.
#[test]
fn relative_paths_in_the_pages_stay_in_the_repository() {
    let root = root().canonicalize().unwrap();
    let mut pages = pages();
    pages.push(root.join("ARCHITECTURE.md"));
    let mut outside = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        let links = text
            .split("](")
            .skip(1)
            .filter_map(|rest| rest.split(')').next());
        let quoted = text
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|quoted| quoted.starts_with("../"));
        for path in links.chain(quoted) {
            if path.contains("://") || path.starts_with('#') {
                continue;
            }
            let target = dir.join(path.split('#').next().unwrap());
            let inside = target.canonicalize().is_ok_and(|t| t.starts_with(&root));
            if !inside {
                outside.push(format!("{}: {path}", page.display()));
            }
        }
    }
    assert!(outside.is_empty(), "{outside:#?}");
}
