//! The blocks of commands in a Markdown page (README.md, `docs/*.md`):
//! `console` blocks, whose `$ ` lines are commands followed by what they
//! print, and `sh`/`shell`/`bash` blocks. A block the tests cannot run (a
//! live cluster, root on a node) is marked on the line before its fence
//! with `<!-- not run: WHY -->`.

/// The languages of fenced blocks that hold commands.
const COMMAND_LANGUAGES: &[&str] = &["console", "sh", "shell", "bash"];

/// The marker of a block the tests do not run: `<!-- not run: WHY -->`.
const NOT_RUN: &str = "<!-- not run:";

/// A fenced block of commands.
pub struct Block {
    /// The line of its opening fence, from 1.
    pub line: usize,
    /// `console`, `sh`, `shell` or `bash`.
    pub language: String,
    /// Why the tests do not run it, when it is marked so (possibly empty:
    /// the runner holds that against the page).
    pub not_run: Option<String>,
    /// Its commands, for a `console` block.
    pub examples: Vec<Example>,
}

/// A command of a console block and the lines the page shows it printing.
pub struct Example {
    pub command: String,
    pub shown: Vec<String>,
}

/// Every block of commands of the page, in order; and the lines (from 1)
/// of `not run` markers that stand before no such block.
pub fn blocks(page: &str) -> (Vec<Block>, Vec<usize>) {
    let mut blocks: Vec<Block> = Vec::new();
    let mut stray_markers = Vec::new();
    // The marker on the last non-blank line, with its line number.
    let mut marker: Option<(usize, String)> = None;
    let mut fence: Option<bool> = None; // Some(holds commands) inside a fence
    for (index, line) in page.lines().enumerate() {
        let number = index + 1;
        if let Some(commands) = fence {
            if line.starts_with("```") {
                fence = None;
            } else if commands && let Some(block) = blocks.last_mut() {
                block.add_line(line);
            }
            continue;
        }
        if let Some(info) = line.strip_prefix("```") {
            let language = info.split_whitespace().next().unwrap_or("");
            let commands = COMMAND_LANGUAGES.contains(&language);
            let not_run = marker.take().map(|(at, why)| {
                if !commands {
                    stray_markers.push(at);
                }
                why
            });
            if commands {
                blocks.push(Block {
                    line: number,
                    language: language.to_string(),
                    not_run,
                    examples: Vec::new(),
                });
            }
            fence = Some(commands);
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some((at, _)) = marker.take() {
            stray_markers.push(at);
        }
        if let Some(rest) = line.trim().strip_prefix(NOT_RUN) {
            let why = rest.trim_end().trim_end_matches("-->").trim();
            marker = Some((number, why.to_string()));
        }
    }
    if let Some((at, _)) = marker {
        stray_markers.push(at);
    }
    (blocks, stray_markers)
}

impl Block {
    fn add_line(&mut self, line: &str) {
        if self.language != "console" {
            return;
        }
        match line.strip_prefix("$ ") {
            Some(command) => self.examples.push(Example {
                command: command.to_string(),
                shown: Vec::new(),
            }),
            None => {
                if let Some(example) = self.examples.last_mut() {
                    example.shown.push(line.to_string());
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
