//! The console examples of a page under `docs/`: every `$ skoop ...` of its
//! `console` blocks, with the lines the page shows it printing, so that a
//! test can run each one and hold the page to what it prints.

/// A command of a console block and the lines the page shows it printing.
pub struct Example {
    pub command: String,
    pub shown: Vec<String>,
}

/// Every command of the page's console blocks, in order.
pub fn examples(page: &str) -> Vec<Example> {
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

impl Example {
    /// Holds `printed` to what the page shows: every line, in order, and
    /// exactly where the page elides nothing with `...`.
    pub fn assert_printed(&self, printed: &str) {
        let printed: Vec<&str> = printed.lines().collect();
        if !self.shown.iter().any(|l| l == "...") {
            assert_eq!(printed, self.shown, "{}", self.command);
            return;
        }
        let mut rest = printed.iter();
        for line in self.shown.iter().filter(|l| *l != "...") {
            assert!(
                rest.any(|p| p == line),
                "{}: the page shows {line:?}, which it does not print (in that order):\n{}",
                self.command,
                printed.join("\n")
            );
        }
    }
}
