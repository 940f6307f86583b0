//! Every command README.md and `docs/*.md` show is run, and must print what
//! the page shows (every line, in order; exactly, where the page elides
//! nothing with `...`) and exit as it shows (`[exit status N]` after its
//! output; a command that shows none must not exit 2, a usage error), so
//! that the documentation cannot drift from the tool. A block of commands is either a `console` block, run here, or
//! marked `<!-- not run: WHY -->` on the line before its fence (a live
//! cluster, root on a node): an unmarked `sh` block, a marker without a
//! reason or before no block of commands fails.
//!
//! Each page runs in a fresh working directory of its own, where the
//! repository's inputs (`examples/`, `plugins/`, `rules/`, `tests/`) are
//! links to the repository, read only, so that a page can create files as
//! its reader would (`skoop packs new`, `--output FILE`). Commands run
//! without a shell: `skoop ...` (the binary under test), after `NAME=VALUE`
//! words for its environment; `cat FILE`, which shows a file the commands
//! after it read (it is written as shown); `cp -r FROM TO`, a copy of a
//! directory (an example, to change); and `rm [-r] PATH...`. A block
//! of any other language marked `<!-- file: PATH -->` on the line before
//! its fence is a file the reader writes: its text is written to PATH
//! before the commands after it run, so that what the reader copies is
//! what is tested. A file a command writes (`--output FILE`) must be
//! written.

mod common;

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use common::console::{Example, blocks};

/// What a page's working directory links to in the repository.
const REPOSITORY_INPUTS: &[&str] = &["examples", "plugins", "rules", "tests"];

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
        run += check_page(&name, &text, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(run >= 20, "only {run} commands ran: are the pages read?");
}

/// The runner's own failures name the page, the line and what is wrong:
/// a command printing other than shown, a file written outside the page's
/// working directory or into the repository, a marker before no block it
/// fits; and a file a block writes is what later commands read.
#[test]
fn the_runner_says_where_a_page_goes_wrong() {
    let page = "\
<!-- file: pack/pack.yaml -->
```yaml
name: [not a name
```

```console
$ skoop packs lint pack
pack/pack.yaml:1:7: this is not what lint says
$ rm -r pack
$ skoop packs lint pack
```

<!-- file: ../outside.txt -->
```text
a
```

<!-- file: examples/new.txt -->
```text
b
```

<!-- file: x.txt -->
```console
$ skoop --version
...
```

```console
$ skoop --version
...
[exit status 1]
```

<!-- not run: nothing follows -->
";
    let mut failures = Vec::new();
    let run = check_page("page.md", page, &mut failures);
    assert_eq!(run, 5);
    let expected = [
        "page.md:23: a `file` marker before a block of commands, not a file's text",
        "page.md:35: a `not run` marker before no block of commands",
        "page.md:7 (the block at line 6): $ skoop packs lint pack: the page shows:\n\
         pack/pack.yaml:1:7: this is not what lint says\nit prints:\npack/pack.yaml:1:7: ",
        "page.md:10 (the block at line 6): $ skoop packs lint pack: the page shows:\n\n\
         it prints:\npack: cannot read pack directory",
        "page.md:14: the file \"../outside.txt\": \"../outside.txt\": not a relative path",
        "page.md:19: the file \"examples/new.txt\": \"examples/new.txt\" is in the \
         repository's examples/",
        "page.md:30 (the block at line 29): $ skoop --version: the page shows exit status 1, \
         it exits Some(0)",
    ];
    assert_eq!(failures.len(), expected.len(), "{failures:#?}");
    for (failure, start) in failures.iter().zip(expected) {
        assert!(
            failure.starts_with(start),
            "{failure:?} is not {start:?}..."
        );
    }
}

/// Runs a page's blocks in a working directory of its own, adding what
/// fails to `failures`; returns how many commands ran.
fn check_page(name: &str, text: &str, failures: &mut Vec<String>) -> usize {
    let mut run = 0;
    let (blocks, stray) = blocks(text);
    for (line, what) in stray {
        failures.push(format!("{name}:{line}: {what}"));
    }
    let work = working_directory();
    for block in blocks {
        let at = format!("{name}:{}", block.line);
        match (&block.not_run, &block.file, block.language.as_str()) {
            (Some(why), _, _) if why.is_empty() => {
                failures.push(format!("{at}: `not run` says no reason"));
            }
            (Some(_), _, _) => {}
            (None, Some(path), _) => {
                if let Err(e) = write_file(work.path(), path, &block.text) {
                    failures.push(format!("{at}: the file {path:?}: {e}"));
                }
            }
            (None, None, "console") => {
                for example in &block.examples {
                    run += 1;
                    if let Err(e) = run_example(example, work.path()) {
                        failures.push(format!(
                            "{name}:{} (the block at line {}): $ {}: {e}",
                            example.line, block.line, example.command
                        ));
                    }
                }
            }
            (None, None, language) => failures.push(format!(
                "{at}: a `{language}` block the tests do not run: make it a `console` block \
                 (`$ ` before each command, what it prints after it) or mark it \
                 `<!-- not run: WHY -->`"
            )),
        }
    }
    run
}

/// A page's working directory: empty but for links to the repository's
/// inputs.
fn working_directory() -> tempfile::TempDir {
    let work = tempfile::tempdir().expect("a temp dir");
    for input in REPOSITORY_INPUTS {
        std::os::unix::fs::symlink(root().join(input), work.path().join(input))
            .expect("a link to the repository");
    }
    work
}

/// Where `path`, as a page names a file it writes, is in the working
/// directory: a relative path that stays inside it and out of the links to
/// the repository.
fn inside(work: &Path, path: &str) -> Result<PathBuf, String> {
    let relative = Path::new(path);
    let mut components = relative.components();
    let first = match components.next() {
        Some(Component::Normal(first)) => first,
        _ => {
            return Err(format!(
                "{path:?}: not a relative path of the working directory"
            ));
        }
    };
    if !components.all(|c| matches!(c, Component::Normal(_))) {
        return Err(format!(
            "{path:?}: not a relative path of the working directory"
        ));
    }
    if REPOSITORY_INPUTS.iter().any(|input| first == *input) {
        return Err(format!(
            "{path:?} is in the repository's {}/, which a page only reads",
            first.display()
        ));
    }
    Ok(work.join(relative))
}

/// Writes a file the page shows (a marked block's text, what `cat` prints),
/// creating its directories.
fn write_file(work: &Path, path: &str, lines: &[String]) -> Result<(), String> {
    let target = inside(work, path)?;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(&target, lines.join("\n") + "\n").map_err(|e| e.to_string())
}

/// Runs one command of a page in its working directory and holds it to
/// what the page shows.
fn run_example(example: &Example, work: &Path) -> Result<(), String> {
    let words: Vec<&str> = example.command.split_whitespace().collect();
    if let Some(word) = words
        .iter()
        .find(|w| w.contains(['|', '>', '<', '\'', '"', ';', '&', '$', '`']))
    {
        return Err(format!(
            "{word:?}: the runner uses no shell; show the command plainly, or mark the block not run"
        ));
    }
    match words.as_slice() {
        ["cat", file] => return write_file(work, file, &example.shown),
        ["rm", paths @ ..] => return remove(work, paths),
        ["cp", "-r", from, to] => return copy(&work.join(from), &inside(work, to)?),
        _ => {}
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
            "only `skoop`, `cat FILE`, `cp -r` and `rm` run here, not {program:?}; mark the block not run"
        ));
    }
    let written = args
        .windows(2)
        .find(|pair| pair[0] == "--output")
        .map(|pair| inside(work, pair[1]))
        .transpose()?;
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .env_remove("SKOOP_SNAPSHOT")
        .envs(env)
        .current_dir(work)
        .output()
        .map_err(|e| e.to_string())?;
    match example.status {
        Some(shown) if output.status.code() != Some(shown) => {
            return Err(format!(
                "the page shows exit status {shown}, it exits {:?}: {}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        None if output.status.code() == Some(2) => {
            return Err(format!(
                "exits 2, a usage error: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        _ => {}
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

/// `cp -r FROM TO`: the tree at `from` (links followed: an example is read
/// through the working directory's link to it) copied to `to`.
fn copy(from: &Path, to: &Path) -> Result<(), String> {
    if !from.is_dir() {
        return Err(format!("`cp -r`: {} is not a directory", from.display()));
    }
    common::copy_dir(from, to);
    Ok(())
}

/// `rm PATH...` and `rm -r PATH...`, inside the working directory.
fn remove(work: &Path, words: &[&str]) -> Result<(), String> {
    let (recursive, paths) = match words {
        ["-r", paths @ ..] => (true, paths),
        paths => (false, paths),
    };
    if paths.is_empty() {
        return Err("`rm` names nothing to remove".into());
    }
    for path in paths {
        let target = inside(work, path)?;
        let removed = if recursive && target.is_dir() {
            std::fs::remove_dir_all(&target)
        } else {
            std::fs::remove_file(&target)
        };
        removed.map_err(|e| format!("{path}: {e}"))?;
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
