//! The blocks a Markdown page (README.md, `docs/*.md`) asks the tests to
//! run or write: `console` blocks, whose `$ ` lines are commands followed by
//! what they print (and, where the page shows it, `[exit status N]`); `sh`/`shell`/`bash` blocks, which must be marked on the
//! line before their fence with `<!-- not run: WHY -->` (a live cluster,
//! root on a node); and blocks of any other language marked
//! `<!-- file: PATH -->`, a file the reader writes, with the block's text.

/// The languages of fenced blocks that hold commands.
const COMMAND_LANGUAGES: &[&str] = &["console", "sh", "shell", "bash"];

/// The marker of a block the tests do not run: `<!-- not run: WHY -->`.
const NOT_RUN: &str = "<!-- not run:";

/// The marker of a file the reader writes: `<!-- file: PATH -->`.
const FILE: &str = "<!-- file:";

/// A fenced block of commands, or of a file's text.
pub struct Block {
    /// The line of its opening fence, from 1.
    pub line: usize,
    /// `console`, `sh`, `shell` or `bash`; or, for a file, its language.
    pub language: String,
    /// Why the tests do not run it, when it is marked so (possibly empty:
    /// the runner holds that against the page).
    pub not_run: Option<String>,
    /// The file the reader writes with this block's text, when it is marked
    /// so (the path as the page writes it, possibly empty).
    pub file: Option<String>,
    /// Its lines, as the page shows them.
    pub text: Vec<String>,
    /// Its commands, for a `console` block.
    pub examples: Vec<Example>,
}

/// A command of a console block and the lines the page shows it printing.
pub struct Example {
    /// The line of its `$ `, from 1.
    pub line: usize,
    pub command: String,
    pub shown: Vec<String>,
    /// The exit status the page shows, on a line of its own after what the
    /// command prints: `[exit status 1]`.
    pub status: Option<i32>,
}

/// How a page shows a command's exit status: `[exit status N]`.
fn exit_status(line: &str) -> Option<i32> {
    line.strip_prefix("[exit status ")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// A marker on the last non-blank line before a fence.
enum Marker {
    NotRun(String),
    File(String),
}

/// Every block of commands and every marked file of the page, in order; and
/// the markers (line from 1, what is wrong) that stand before no block they
/// fit.
pub fn blocks(page: &str) -> (Vec<Block>, Vec<(usize, &'static str)>) {
    let mut blocks: Vec<Block> = Vec::new();
    let mut stray_markers = Vec::new();
    // The marker on the last non-blank line, with its line number.
    let mut marker: Option<(usize, Marker)> = None;
    let mut fence: Option<bool> = None; // Some(kept) inside a fence
    for (index, line) in page.lines().enumerate() {
        let number = index + 1;
        if let Some(kept) = fence {
            if line.starts_with("```") {
                fence = None;
            } else if kept && let Some(block) = blocks.last_mut() {
                block.add_line(number, line);
            }
            continue;
        }
        if let Some(info) = line.strip_prefix("```") {
            let language = info.split_whitespace().next().unwrap_or("");
            let commands = COMMAND_LANGUAGES.contains(&language);
            let (not_run, file) = match marker.take() {
                None => (None, None),
                Some((_, Marker::NotRun(why))) if commands => (Some(why), None),
                Some((_, Marker::File(path))) if !commands => (None, Some(path)),
                Some((at, Marker::NotRun(_))) => {
                    stray_markers.push((at, "a `not run` marker before no block of commands"));
                    (None, None)
                }
                Some((at, Marker::File(_))) => {
                    stray_markers.push((
                        at,
                        "a `file` marker before a block of commands, not a file's text",
                    ));
                    (None, None)
                }
            };
            let kept = commands || file.is_some();
            if kept {
                blocks.push(Block {
                    line: number,
                    language: language.to_string(),
                    not_run,
                    file,
                    text: Vec::new(),
                    examples: Vec::new(),
                });
            }
            fence = Some(kept);
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some((at, marker)) = marker.take() {
            stray_markers.push((at, marker.stray()));
        }
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(NOT_RUN) {
            marker = Some((number, Marker::NotRun(inside(rest))));
        } else if let Some(rest) = line.strip_prefix(FILE) {
            marker = Some((number, Marker::File(inside(rest))));
        }
    }
    if let Some((at, marker)) = marker {
        stray_markers.push((at, marker.stray()));
    }
    (blocks, stray_markers)
}

/// What a marker says, from after its `:` to its `-->`.
fn inside(rest: &str) -> String {
    rest.trim_end().trim_end_matches("-->").trim().to_string()
}

impl Marker {
    /// What is wrong with the marker when no block follows it.
    fn stray(&self) -> &'static str {
        match self {
            Marker::NotRun(_) => "a `not run` marker before no block of commands",
            Marker::File(_) => "a `file` marker before no block",
        }
    }
}

impl Block {
    fn add_line(&mut self, number: usize, line: &str) {
        self.text.push(line.to_string());
        if self.language != "console" {
            return;
        }
        match line.strip_prefix("$ ") {
            Some(command) => self.examples.push(Example {
                line: number,
                command: command.to_string(),
                shown: Vec::new(),
                status: None,
            }),
            None => {
                if let Some(example) = self.examples.last_mut() {
                    match exit_status(line) {
                        Some(status) => example.status = Some(status),
                        None => example.shown.push(line.to_string()),
                    }
                }
            }
        }
    }
}
impl Example {
    /// Whether `printed` is what the page shows: every line, in order, and
    /// exactly where the page elides nothing with `...`.
    pub fn check_printed(&self, printed: &str) -> Result<(), String> {
        let printed: Vec<&str> = printed.lines().collect();
        if !self.shown.iter().any(|l| l == "...") {
            if printed != self.shown {
                return Err(format!(
                    "the page shows:\n{}\nit prints:\n{}",
                    self.shown.join("\n"),
                    printed.join("\n")
                ));
            }
            return Ok(());
        }
        let mut rest = printed.iter();
        for line in self.shown.iter().filter(|l| *l != "...") {
            if !rest.any(|p| p == line) {
                return Err(format!(
                    "the page shows {line:?}, which it does not print (in that order):\n{}",
                    printed.join("\n")
                ));
            }
        }
        Ok(())
    }
}
