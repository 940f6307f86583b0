//! Golden files under `tests/golden/`: what a command prints, compared
//! byte for byte; `SKOOP_BLESS=1` writes them instead (review the diff
//! before committing it). A file that differs is shown as a line diff.

use std::fmt::Write as _;
use std::path::Path;

/// Lines of context around each change in a diff.
const CONTEXT: usize = 3;
/// The most lines of changes one file's diff shows; the rest are counted.
const MAX_SHOWN: usize = 200;
/// Past this many line pairs the changed middle of two texts is shown as
/// all removed, then all added, rather than aligned line by line.
const MAX_ALIGNED: usize = 4_000_000;

/// The golden files of one test: each compared (or written), every
/// difference told at the end.
pub struct Goldens {
    bless: bool,
    /// Each file that differs, with its diff.
    differ: Vec<(String, String)>,
}

impl Goldens {
    /// Compares, or writes when `SKOOP_BLESS` is set.
    pub fn new() -> Goldens {
        Goldens::blessing(std::env::var_os("SKOOP_BLESS").is_some())
    }

    /// Writes the golden files when `bless`, else compares with them.
    pub fn blessing(bless: bool) -> Goldens {
        Goldens {
            bless,
            differ: Vec::new(),
        }
    }

    /// Holds `actual` to `file`, or writes it there when blessing.
    pub fn check(&mut self, file: &Path, actual: &str) {
        if self.bless {
            std::fs::create_dir_all(file.parent().expect("a directory")).unwrap();
            std::fs::write(file, actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(file).unwrap_or_default();
        if expected != actual {
            self.differ
                .push((file.display().to_string(), diff(&expected, actual)));
        }
    }

    /// What differs, each file named with its diff; empty when nothing does.
    pub fn report(&self) -> String {
        let mut report = String::new();
        for (file, diff) in &self.differ {
            let _ = write!(report, "--- {file} (expected)\n+++ {file} (actual)\n{diff}");
        }
        report
    }

    /// Fails, naming every file that differs and showing how.
    pub fn assert_none_differ(self) {
        assert!(
            self.differ.is_empty(),
            "output differs from {} golden file(s) (SKOOP_BLESS=1 rewrites them):\n{}",
            self.differ.len(),
            self.report()
        );
    }
}

/// One line of a diff: the same in both, only expected, only actual.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// `expected` against `actual` line by line, in the unified format: hunks
/// of changes (`-` expected, `+` actual) with [`CONTEXT`] lines around,
/// under `@@ -line,count +line,count @@`. A last line without its newline
/// is marked, so that a missing newline is seen.
pub fn diff(expected: &str, actual: &str) -> String {
    let old = lines(expected);
    let new = lines(actual);
    let script = align(&old, &new);
    let mut out = String::new();
    let mut shown = 0;
    let mut hidden = 0;
    // Each hunk: the script's changes at most 2 * CONTEXT same lines apart.
    let changed: Vec<usize> = (0..script.len())
        .filter(|&i| !matches!(script[i], Line::Same(_)))
        .collect();
    let mut at = 0;
    while at < changed.len() {
        let mut last = at;
        while last + 1 < changed.len() && changed[last + 1] - changed[last] <= 2 * CONTEXT + 1 {
            last += 1;
        }
        let start = changed[at].saturating_sub(CONTEXT);
        let end = (changed[last] + CONTEXT + 1).min(script.len());
        let hunk = &script[start..end];
        let changes = hunk.iter().filter(|l| !matches!(l, Line::Same(_))).count();
        if shown >= MAX_SHOWN {
            hidden += changes;
        } else {
            shown += changes;
            let (old_line, new_line) = line_numbers(&script[..start]);
            let old_count = hunk.iter().filter(|l| !matches!(l, Line::Added(_))).count();
            let new_count = hunk
                .iter()
                .filter(|l| !matches!(l, Line::Removed(_)))
                .count();
            let _ = writeln!(
                out,
                "@@ -{},{old_count} +{},{new_count} @@",
                old_line + usize::from(old_count > 0),
                new_line + usize::from(new_count > 0)
            );
            for line in hunk {
                let (sign, text) = match line {
                    Line::Same(text) => (' ', text),
                    Line::Removed(text) => ('-', text),
                    Line::Added(text) => ('+', text),
                };
                match text.strip_suffix('\n') {
                    Some(text) => {
                        let _ = writeln!(out, "{sign}{text}");
                    }
                    None => {
                        let _ = writeln!(out, "{sign}{text}\n\\ No newline at end of file");
                    }
                }
            }
        }
        at = last + 1;
    }
    if hidden > 0 {
        let _ = writeln!(out, "... and {hidden} more changed lines");
    }
    out
}

/// The lines of `text`, each with its newline (the last may have none).
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// How many lines of each side come before `script`'s end.
fn line_numbers(script: &[Line<'_>]) -> (usize, usize) {
    let old = script
        .iter()
        .filter(|l| !matches!(l, Line::Added(_)))
        .count();
    let new = script
        .iter()
        .filter(|l| !matches!(l, Line::Removed(_)))
        .count();
    (old, new)
}

/// The edit script from `old` to `new`: their common start and end kept,
/// and the middle aligned by a longest common subsequence of lines (or,
/// when too large for that, removed and added whole).
fn align<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<Line<'a>> {
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (a, b) = (
        &old[prefix..old.len() - suffix],
        &new[prefix..new.len() - suffix],
    );
    let mut script: Vec<Line<'a>> = old[..prefix].iter().map(|l| Line::Same(l)).collect();
    if a.len() * b.len() > MAX_ALIGNED {
        script.extend(a.iter().map(|l| Line::Removed(l)));
        script.extend(b.iter().map(|l| Line::Added(l)));
    } else {
        // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
        let width = b.len() + 1;
        let mut lcs = vec![0u32; (a.len() + 1) * width];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                lcs[i * width + j] = if a[i] == b[j] {
                    lcs[(i + 1) * width + j + 1] + 1
                } else {
                    lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if i < a.len() && j < b.len() && a[i] == b[j] {
                script.push(Line::Same(a[i]));
                (i, j) = (i + 1, j + 1);
            } else if j == b.len()
                || (i < a.len() && lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])
            {
                script.push(Line::Removed(a[i]));
                i += 1;
            } else {
                script.push(Line::Added(b[j]));
                j += 1;
            }
        }
    }
    script.extend(old[old.len() - suffix..].iter().map(|l| Line::Same(l)));
    script
}
