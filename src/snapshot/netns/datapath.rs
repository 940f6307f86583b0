//! `datapath/NAME.json`: what a programmable datapath's own tools print
//! about its state (Cilium's `cilium-dbg bpf ipcache list -o json`, say),
//! one JSON document per file, named by the pack that reads it. The
//! snapshot contract does not know what is inside: a pack reads it through
//! `ctx.hop.netns.datapath(NAME)` and cites its entries as evidence, each
//! placed where it starts in the file.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::value::RawValue;

use super::json::{issue, offset_in};
use crate::snapshot::input::{Boundary, Limit, MIB};
use crate::snapshot::problem::{LineCursor, ParseIssue, Parsed, Problem};

/// The directory of a namespace's dump that holds the files.
pub const DIR: &str = "datapath";

/// At most this many files are read; the others are a problem.
pub const MAX_FILES: usize = 32;

/// The most one file may hold.
pub const LIMIT: Limit = Limit {
    bytes: 64 * MIB,
    what: "a datapath/ file",
};

/// One file: its document, and where each of its entries (the elements of
/// a top-level array in order, or the members of a top-level object by
/// key, as `serde_json` iterates them)
/// starts in it.
#[derive(Debug, Clone, PartialEq)]
pub struct DatapathFile {
    pub value: serde_json::Value,
    pub places: Vec<(usize, usize)>,
}

/// The files of one namespace, by NAME (the file name without `.json`);
/// one that could not be read is kept with its problem, never as if absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DatapathFiles {
    pub files: BTreeMap<String, DatapathFile>,
    pub unreadable: BTreeMap<String, Problem>,
}

impl DatapathFiles {
    /// Reads `DIR/*.json` of the namespace directory `dir`; problems go to
    /// `problems` as well as to `unreadable`.
    pub fn load(dir: &Path, boundary: &Boundary, problems: &mut Vec<Problem>) -> DatapathFiles {
        let mut files = DatapathFiles::default();
        let path = dir.join(DIR);
        match boundary.is_dir(&path) {
            Ok(true) => {}
            Ok(false) => return files,
            Err(problem) => {
                problems.push(problem);
                return files;
            }
        }
        let mut names: Vec<String> = match std::fs::read_dir(&path) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect(),
            Err(e) => {
                problems.push(Problem::in_file(&path, format!("cannot list: {e}")));
                return files;
            }
        };
        names.sort();
        let mut read = 0;
        for file_name in names {
            let file = path.join(&file_name);
            let Some(name) = file_name
                .strip_suffix(".json")
                .filter(|name| valid_name(name))
            else {
                problems.push(Problem::in_file(
                    &file,
                    "not a datapath file: its name must be NAME.json, NAME of letters, digits, '.', '_' and '-'",
                ));
                continue;
            };
            read += 1;
            if read > MAX_FILES {
                problems.push(Problem::in_file(
                    &file,
                    format!("not read: a namespace holds at most {MAX_FILES} datapath files"),
                ));
                continue;
            }
            let text = match boundary.read_text(&file, LIMIT) {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(problem) => {
                    files.unreadable.insert(name.to_string(), problem.clone());
                    problems.push(problem);
                    continue;
                }
            };
            match parse(&text) {
                (Some(parsed), _) => {
                    files.files.insert(name.to_string(), parsed);
                }
                (None, issues) => {
                    let issue = issues
                        .into_iter()
                        .next()
                        .unwrap_or_else(|| ParseIssue::at_line(1, "not read"));
                    let problem = Problem::from_issue(&file, issue);
                    files.unreadable.insert(name.to_string(), problem.clone());
                    problems.push(problem);
                }
            }
        }
        files
    }

    /// The file NAME, read.
    pub fn get(&self, name: &str) -> Option<&DatapathFile> {
        self.files.get(name)
    }

    /// The file at `path` in the namespace's directory (`datapath/NAME.json`),
    /// read.
    pub fn at(&self, path: &str) -> Option<&DatapathFile> {
        let name = path
            .strip_prefix(DIR)?
            .strip_prefix('/')?
            .strip_suffix(".json")?;
        self.get(name)
    }
}

impl DatapathFile {
    /// Where the member `key` of the top-level object starts (line, column).
    pub fn place_of(&self, key: &str) -> Option<(usize, usize)> {
        let index = self.value.as_object()?.keys().position(|k| k == key)?;
        self.places.get(index).copied()
    }
}

/// The path of the file NAME in a namespace directory, as evidence names it.
pub fn relative_path(name: &str) -> String {
    format!("{DIR}/{name}.json")
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Reads one document, placing its entries.
pub fn parse(text: &str) -> Parsed<DatapathFile> {
    if text.trim().is_empty() {
        return (None, vec![ParseIssue::at_line(1, "empty file (not JSON)")]);
    }
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(error) => return (None, vec![issue(text, 0, &error, "not JSON")]),
    };
    let starts: Vec<&str> = match &value {
        serde_json::Value::Array(_) => serde_json::from_str::<Vec<&RawValue>>(text)
            .map(|entries| entries.into_iter().map(RawValue::get).collect())
            .unwrap_or_default(),
        // serde_json's objects iterate by key, as this map does.
        serde_json::Value::Object(_) => serde_json::from_str::<BTreeMap<String, &RawValue>>(text)
            .map(|members| members.into_values().map(RawValue::get).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let mut cursor = LineCursor::default();
    let places = starts
        .into_iter()
        .map(|entry| cursor.advance(text, offset_in(text, entry)))
        .collect();
    (Some(DatapathFile { value, places }), Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_an_array_or_an_object_are_placed() {
        let text = "[\n {\"a\": 1},\n {\"a\": 2}\n]\n";
        let (file, issues) = parse(text);
        assert!(issues.is_empty());
        assert_eq!(file.expect("read").places, [(2, 2), (3, 2)]);
        let text = "{\"z\": [1],\n \"b\": {}}";
        let file = parse(text).0.expect("read");
        // By key, as the value's members iterate.
        let keys: Vec<&String> = file.value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "z"]);
        assert_eq!(file.places, [(2, 7), (1, 7)]);
        assert_eq!(file.place_of("z"), Some((1, 7)));
        assert_eq!(file.place_of("nope"), None);
    }

    #[test]
    fn a_file_that_is_not_json_is_an_issue_at_its_place() {
        let (none, issues) = parse("[1,\n 2,,]");
        assert!(none.is_none());
        assert_eq!(issues[0].line, 2, "{issues:?}");
        assert!(parse("  ").0.is_none());
    }

    #[test]
    fn files_are_read_by_name_and_bad_names_are_problems() {
        let dir = tempfile::tempdir().unwrap();
        let datapath = dir.path().join(DIR);
        std::fs::create_dir(&datapath).unwrap();
        std::fs::write(datapath.join("ipcache.json"), "[{\"k\": 1}]").unwrap();
        std::fs::write(datapath.join("broken.json"), "[").unwrap();
        std::fs::write(datapath.join("notes.txt"), "x").unwrap();
        let mut problems = Vec::new();
        let files = DatapathFiles::load(dir.path(), &Boundary::new(dir.path()), &mut problems);
        assert_eq!(files.files.keys().collect::<Vec<_>>(), ["ipcache"]);
        assert!(files.at(&relative_path("ipcache")).is_some());
        assert!(files.at("ipcache.json").is_none());
        assert_eq!(files.unreadable.keys().collect::<Vec<_>>(), ["broken"]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems.iter().any(|p| p.to_string().contains("NAME.json")),
            "{problems:?}"
        );
    }
}
