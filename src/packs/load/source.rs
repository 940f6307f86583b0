//! A pack's files as read from its directory: `pack.yaml`, its scripts and
//! its `lib/` modules, each inside the directory and of bounded size.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::snapshot::input::{Boundary, PACK_FILE};
use crate::snapshot::problem::Problem;

/// The files of a pack: `pack.yaml`, its scripts (`*.rhai`) and its library
/// modules (`lib/*.rhai`), by path relative to the pack directory.
#[derive(Debug, Clone)]
pub struct PackSource {
    pub dir: PathBuf,
    pub builtin: bool,
    pub files: BTreeMap<String, String>,
}

pub const MANIFEST: &str = "pack.yaml";

impl PackSource {
    /// Reads a pack directory from disk. `Err` with every problem when the
    /// directory or one of its files cannot be read. Its files must be
    /// regular files inside `dir` (a link to `/etc/shadow` is refused, not
    /// read) of at most [`PACK_FILE`].
    pub fn read(dir: &Path) -> Result<PackSource, Vec<Problem>> {
        let mut files = BTreeMap::new();
        let mut problems = Vec::new();
        let boundary = Boundary::new(dir);
        let manifest = dir.join(MANIFEST);
        match boundary.read_text(&manifest, PACK_FILE) {
            Ok(Some(text)) => {
                files.insert(MANIFEST.to_owned(), text);
            }
            Ok(None) => problems.push(Problem::in_file(
                &manifest,
                "no pack.yaml: a pack directory holds pack.yaml and its scripts",
            )),
            Err(problem) => problems.push(problem),
        }
        let library = match boundary.is_dir(&dir.join("lib")) {
            Ok(true) => rhai_files(&dir.join("lib"), "lib/", &mut problems),
            Ok(false) => Vec::new(),
            Err(problem) => {
                problems.push(problem);
                Vec::new()
            }
        };
        for (relative, path) in rhai_files(dir, "", &mut problems)
            .into_iter()
            .chain(library)
        {
            match boundary.read_text(&path, PACK_FILE) {
                Ok(Some(text)) => {
                    files.insert(relative, text);
                }
                Ok(None) => {}
                Err(problem) => problems.push(problem),
            }
        }
        if problems.is_empty() {
            Ok(PackSource {
                dir: dir.to_path_buf(),
                builtin: false,
                files,
            })
        } else {
            Err(problems)
        }
    }

    pub(super) fn path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }
}

/// The `*.rhai` entries directly in `dir`, sorted; a missing `dir` has none.
/// Whatever they are (a link, a FIFO) is for reading them to judge.
fn rhai_files(dir: &Path, prefix: &str, problems: &mut Vec<Problem>) -> Vec<(String, PathBuf)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            problems.push(Problem::in_file(dir, format!("cannot read directory: {e}")));
            return Vec::new();
        }
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| !path.is_dir() && path.extension().is_some_and(|e| e == "rhai"))
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            Some((format!("{prefix}{name}"), path))
        })
        .collect();
    files.sort();
    files
}
