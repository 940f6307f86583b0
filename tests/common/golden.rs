//! Golden files under `tests/golden/`: what a command prints, compared
//! byte for byte; `SKOOP_BLESS=1` writes them instead (review the diff
//! before committing it).

use std::path::Path;

/// The golden files of one test: each compared (or written), every
/// difference told at the end.
pub struct Goldens {
    bless: bool,
    differ: Vec<String>,
}

impl Goldens {
    pub fn new() -> Goldens {
        Goldens {
            bless: std::env::var_os("SKOOP_BLESS").is_some(),
            differ: Vec::new(),
        }
    }

    /// Holds `actual` to `file`, or writes it there when blessing.
    pub fn check(&mut self, file: &Path, actual: &str) {
        if self.bless {
            std::fs::create_dir_all(file.parent().expect("a directory")).unwrap();
            std::fs::write(file, actual).unwrap();
        } else if std::fs::read_to_string(file).unwrap_or_default() != actual {
            self.differ.push(file.display().to_string());
        }
    }

    /// Fails, naming every file that differs.
    pub fn assert_none_differ(self) {
        assert!(
            self.differ.is_empty(),
            "output differs from the golden files (SKOOP_BLESS=1 rewrites them): {:#?}",
            self.differ
        );
    }
}
