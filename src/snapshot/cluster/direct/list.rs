//! One pretty-printed List (what the collector and kubectl write) read in
//! one pass over its text, its items split between threads by where their
//! lines start.
//!
//! The general way first walks the whole List to find where each item
//! starts and ends, on one thread, then reads the items on several: every
//! byte is scanned twice, and the first scan is not shared. Here each
//! thread reads its own part of the items straight away. A part starts at
//! a line that looks like the start of an item (indented as the first item
//! is, the line before ending with a comma); whether it really is one is
//! proven as the parts are read: the part before it, read from a real item
//! start, must end exactly there. Raw newlines are never inside a JSON
//! string, so a line start is always between tokens.
//!
//! Anything else — a text of another shape, a guess that does not line up,
//! any problem at all — is left to the general way (`None`), which gives
//! the same objects for a good file and hands a bad one to the positioned
//! path, so this changes how fast a file is read, never what is read.

use std::borrow::Cow;
use std::path::Path;

use serde::de::{Deserialize, DeserializeSeed, Deserializer, IgnoredAny};

use super::super::document::Position;
use super::super::model::{Object, ObjectSource};
use super::fitted::{skip_whitespace, value_end};
use super::{Head, Inherited, OnePass, Pending, named, read_in_one_pass, read_in_two_passes};
use crate::snapshot::cluster::convert::LeanObject;
use crate::snapshot::problem::LineCursor;

/// A part of the items is at least this many bytes.
const PART_BYTES: usize = 1 << 20;
/// At most this many threads read one file.
const MAX_THREADS: usize = 8;

/// The objects of `text` when it is one List whose items can be read in
/// parts, in file order with where each starts; `None` otherwise.
pub(super) fn read(path: &Path, text: &str) -> Option<Vec<(Object, Position)>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_THREADS);
    read_in_parts(path, text, |items| threads.min(items.div_ceil(PART_BYTES)))
}

/// [`read`] in as many parts as `parts` says for the items' bytes (fewer
/// when there are not as many lines that look like an item's start).
fn read_in_parts(
    path: &Path,
    text: &str,
    parts: impl FnOnce(usize) -> usize,
) -> Option<Vec<(Object, Position)>> {
    let bytes = text.as_bytes();
    let open = items_start(text)?;
    let first = skip_whitespace(bytes, open);
    if bytes.get(first) != Some(&b'{') {
        return None;
    }
    // The items end at the text's last `]`, unless what follows the items
    // holds one: then the last part does not end there, and the general way
    // reads the file.
    let close = text.rfind(']').filter(|&close| close > first)?;
    // The List without its items says what they inherit, and is checked
    // as the general way checks it.
    let (api_version, kind) = list_kind(&format!("{}{}", &text[..open], &text[close..]))?;
    let inherited = (kind != "List").then(|| {
        let item_kind = kind.strip_suffix("List").unwrap_or_default();
        (
            Cow::Borrowed(api_version.as_str()),
            Cow::Borrowed(item_kind),
        )
    });
    let count = parts(close - first);
    let parts = split(text, first, close, count);
    let read_nth = |index: usize| {
        let end = parts.get(index + 1).map_or(End::Close(close), End::Next);
        read_part(path, text, &parts[index], end, inherited.as_ref())
    };
    let results: Vec<Option<PartRead>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (1..parts.len())
            .map(|index| scope.spawn(move || read_nth(index)))
            .collect();
        let mut results = vec![read_nth(0)];
        results.extend(workers.into_iter().map(|w| w.join().ok().flatten()));
        results
    });
    let count = results
        .iter()
        .flatten()
        .map(|part| part.objects.len())
        .sum();
    let mut objects = Vec::with_capacity(count);
    let mut lines_before = 0;
    for part in results {
        let part = part?;
        // Each part counted its lines from its own start.
        objects.extend(part.objects.into_iter().map(|(mut object, at)| {
            object.meta_mut().source.line += lines_before;
            let at = Position {
                line: at.line + lines_before,
                column: at.column,
            };
            (object, at)
        }));
        lines_before += part.lines;
    }
    Some(objects)
}

/// The apiVersion and kind of `head`, a List with no items, when it is
/// one document and a List (`List`, or a typed one such as `PodList`).
pub(in crate::snapshot::cluster) fn list_kind(head: &str) -> Option<(String, String)> {
    let mut documents = serde_json::Deserializer::from_str(head).into_iter::<Head>();
    let list = documents.next()?.ok()?;
    if documents.next().is_some() {
        return None;
    }
    let (api_version, kind) = (named(list.api_version)?, named(list.kind)?);
    let typed = kind.strip_suffix("List").is_some_and(|k| !k.is_empty());
    let empty = matches!(&list.items, Some(Some(items)) if items.is_empty());
    (empty && (kind == "List" || typed)).then(|| (api_version.into_owned(), kind.into_owned()))
}

/// Where a part's items end.
#[derive(Clone, Copy)]
enum End<'p> {
    /// Where the next part starts, which its items must reach exactly.
    Next(&'p Part),
    /// At the `]` closing the items, at this offset.
    Close(usize),
}

/// Where a part of the items begins: `start`, an item's `{`, and `origin`,
/// the start of its line (lines are counted from there).
struct Part {
    origin: usize,
    start: usize,
}

/// What one part read: its objects, positioned from its `origin`, and the
/// lines from its origin to the next part's.
struct PartRead {
    objects: Vec<(Object, Position)>,
    lines: usize,
}

/// The offset just past the `[` of the top-level `"items"`, when `text` is
/// one mapping with that key; its keys before it are skipped as values.
pub(in crate::snapshot::cluster) fn items_start(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = skip_whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_whitespace(bytes, at);
        let (key, after_key) = value_end::<Cow<str>>(text, at)?;
        at = skip_whitespace(bytes, after_key);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_whitespace(bytes, at + 1);
        if key == "items" {
            return (bytes.get(at) == Some(&b'[')).then_some(at + 1);
        }
        let (IgnoredAny, after_value) = value_end::<IgnoredAny>(text, at)?;
        at = skip_whitespace(bytes, after_value);
        if bytes.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
}

/// The first part starts at the first item; up to `count - 1` more at
/// lines about evenly apart that look like an item's start: indented as
/// the first item is, the line before ending with a comma.
fn split(text: &str, first: usize, close: usize, count: usize) -> Vec<Part> {
    let bytes = text.as_bytes();
    let mut parts = vec![Part {
        origin: 0,
        start: first,
    }];
    let first_line = bytes[..first]
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|newline| newline + 1);
    let Some(indent) = first_line.map(|line| first - line) else {
        return parts;
    };
    let spaced = |line: usize| {
        bytes
            .get(line..line + indent)?
            .iter()
            .all(|&b| b == b' ')
            .then_some(())
    };
    for k in 1..count {
        let target = first + (close - first) / count * k;
        let from = target.max(parts.last().map_or(0, |p| p.start + 1));
        let found = bytes[from.min(close)..close]
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'\n')
            .map(|(i, _)| from + i + 1)
            .find(|&line| {
                spaced(line).is_some()
                    && bytes.get(line + indent) == Some(&b'{')
                    && bytes[..line]
                        .iter()
                        .rev()
                        .find(|b| !b.is_ascii_whitespace())
                        == Some(&b',')
            });
        match found {
            Some(line) => parts.push(Part {
                origin: line,
                start: line + indent,
            }),
            None => break,
        }
    }
    parts
}

/// Reads the items of `part` up to where it ends.
fn read_part(
    path: &Path,
    text: &str,
    part: &Part,
    end: End,
    inherited: Option<&Inherited>,
) -> Option<PartRead> {
    let bytes = text.as_bytes();
    let mut objects = Vec::new();
    let mut lines = LineCursor::from(part.origin);
    let mut at = part.start;
    loop {
        if let End::Next(next) = end {
            match at.cmp(&next.start) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => break,
                std::cmp::Ordering::Greater => return None,
            }
        }
        let (Skimmed(lean), after) = value_end::<Skimmed>(text, at)?;
        let position = Position::after(&mut lines, text, at);
        let source = ObjectSource {
            file: path.to_path_buf(),
            line: position.line,
        };
        let object = match lean {
            Some(lean) => lean.into_object(source)?,
            None => {
                let pending = Pending {
                    raw: &text[at..after],
                    inherited: inherited.cloned(),
                };
                match read_in_one_pass(&pending)? {
                    Some(lean) => lean.into_object(source)?,
                    None => read_in_two_passes(&pending, source)?,
                }
            }
        };
        objects.push((object, position));
        let separator = skip_whitespace(bytes, after);
        match (bytes.get(separator), end) {
            (Some(b','), _) => at = skip_whitespace(bytes, separator + 1),
            (Some(b']'), End::Close(close)) if separator == close => break,
            _ => return None,
        }
    }
    let lines = match end {
        End::Next(next) => lines.advance(text, next.origin).0 - 1,
        End::Close(_) => 0,
    };
    Some(PartRead { objects, lines })
}

/// An item read as one of the kinds with a lean form, when its own
/// apiVersion and kind come first and name one (`None` otherwise: it is
/// read as the general way reads it).
struct Skimmed(Option<LeanObject>);

impl<'de> Deserialize<'de> for Skimmed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        OnePass(None).deserialize(deserializer).map(Skimmed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::cluster::{Reading, load_file_text_as};

    /// A List of pods, services and namespaces as `to_string_pretty` writes
    /// each item, indented by `indent` spaces (the collector writes items
    /// at 0, kubectl at 8), and the List's other fields after the items.
    fn pretty_list(items: usize, indent: usize) -> String {
        let pad = " ".repeat(indent);
        let mut text = String::from("{\n  \"apiVersion\": \"v1\",\n  \"items\": [\n");
        for i in 0..items {
            let item = match i % 3 {
                0 => serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("p{i}"), "namespace": "d", "labels": {"app": "web"}},
                    "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 81}]}]},
                    "status": {"phase": "Running", "podIP": format!("10.0.{}.{}", i / 250, i % 250),
                        "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}}),
                1 => serde_json::json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": format!("s{i}"), "namespace": "d"},
                    "spec": {"clusterIP": format!("10.96.{}.{}", i / 250, i % 250), "ports": [{"port": 80}]}}),
                _ => serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": format!("ns{i}"), "labels": {"a": "b"}}}),
            };
            let item = serde_json::to_string_pretty(&item).unwrap();
            if i > 0 {
                text.push_str(",\n");
            }
            let lines: Vec<String> = item.lines().map(|line| format!("{pad}{line}")).collect();
            text.push_str(&lines.join("\n"));
        }
        text.push_str(
            "\n  ],\n  \"kind\": \"List\",\n  \"metadata\": {\"resourceVersion\": \"\"}\n}\n",
        );
        text
    }

    fn positioned(text: &str) -> String {
        let (cluster, problems) = load_file_text_as(Path::new("l.json"), text, Reading::Positioned);
        assert!(problems.is_empty(), "{problems:?}");
        format!("{cluster:?}")
    }

    /// The file, loaded as `snapshot` loads it, is what the positioned path
    /// gives, without a problem.
    fn assert_loaded_as_positioned(text: &str) {
        let (cluster, problems) =
            crate::snapshot::cluster::load_file_text(Path::new("l.json"), text);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(format!("{cluster:?}"), positioned(text));
    }

    fn in_parts(text: &str, count: usize) -> Option<String> {
        let objects = read_in_parts(Path::new("l.json"), text, |_| count)?;
        let mut cluster = crate::snapshot::cluster::Cluster::default();
        for (object, _) in objects {
            cluster.insert(object).unwrap();
        }
        Some(format!("{cluster:?}"))
    }

    #[test]
    fn a_list_read_in_parts_gives_what_the_positioned_path_gives() {
        for indent in [0, 4, 8] {
            let text = pretty_list(200, indent);
            let expected = positioned(&text);
            for count in [1, 2, 3, 7, 64] {
                assert_eq!(
                    in_parts(&text, count).as_deref(),
                    Some(expected.as_str()),
                    "indent {indent}, {count} parts"
                );
            }
            let first = skip_whitespace(text.as_bytes(), items_start(&text).unwrap());
            let close = text.rfind(']').unwrap();
            assert_eq!(split(&text, first, close, 7).len(), 7, "indent {indent}");
        }
    }

    /// Every object's line, counted in each part from its own start, is
    /// the line the object starts at in the file.
    #[test]
    fn objects_read_in_parts_keep_their_lines() {
        let text = pretty_list(90, 4);
        let objects = read_in_parts(Path::new("l.json"), &text, |_| 5).unwrap();
        let starts: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| *line == "    {")
            .map(|(i, _)| i + 1)
            .collect();
        let lines: Vec<usize> = objects.iter().map(|(_, at)| at.line).collect();
        assert_eq!(lines, starts);
        assert!(objects.iter().all(|(_, at)| at.column == 5));
        assert!(
            objects
                .iter()
                .zip(&starts)
                .all(|((object, _), &line)| object.meta().source.line == line)
        );
    }

    /// A line that looks like an item's start but is inside one (items on
    /// one line each, a nested list's elements on lines of their own at the
    /// same indentation) does not line up with the part before it: the
    /// general way reads the file.
    #[test]
    fn a_part_that_does_not_start_at_an_item_leaves_the_file_to_the_general_way() {
        let mut text = String::from("{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n");
        for i in 0..60 {
            if i > 0 {
                text.push_str(",\n");
            }
            text.push_str(&format!(
                "{{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {{\"name\": \"p{i}\", \"namespace\": \"d\"}}, \"spec\": {{\"containers\": [\n{{\"name\": \"a\"}},\n{{\"name\": \"b\"}}]}}}}"
            ));
        }
        text.push_str("]}");
        let first = skip_whitespace(text.as_bytes(), items_start(&text).unwrap());
        let close = text.rfind(']').unwrap();
        assert!(
            split(&text, first, close, 4).len() > 1,
            "some line looks like an item's start"
        );
        assert_eq!(in_parts(&text, 4), None);
        assert_eq!(
            in_parts(&text, 1).as_deref(),
            Some(positioned(&text).as_str())
        );
        assert_loaded_as_positioned(&text);
    }

    /// A `]` after the items (in the List's own fields) is not where they
    /// end: the general way reads the file, and gives the same.
    #[test]
    fn a_bracket_after_the_items_leaves_the_file_to_the_general_way() {
        let text =
            pretty_list(30, 4).replace("\"resourceVersion\": \"\"", "\"resourceVersion\": \"]\"");
        assert_eq!(
            read_in_parts(Path::new("l.json"), &text, |_| 2).map(|o| o.len()),
            None
        );
        assert_loaded_as_positioned(&text);
    }

    /// A problem in a late part (here a duplicate key in the last item, and
    /// separately a trailing comma) is the positioned path's to report:
    /// reading in parts gives up on the file.
    #[test]
    fn a_problem_in_any_part_is_left_to_the_positioned_path() {
        let text = pretty_list(60, 4);
        let duplicate = text.replacen(
            "\"name\": \"ns59\"",
            "\"name\": \"ns59\", \"name\": \"x\"",
            1,
        );
        assert_ne!(duplicate, text);
        assert!(in_parts(&duplicate, 4).is_none());
        let trailing = text.replace("\n  ],", ",\n  ],");
        assert!(in_parts(&trailing, 4).is_none());
        for bad in [&duplicate, &trailing] {
            let direct = crate::snapshot::cluster::load_file_text(Path::new("l.json"), bad);
            assert!(!direct.1.is_empty());
            let positioned = load_file_text_as(Path::new("l.json"), bad, Reading::Positioned);
            assert_eq!(format!("{direct:?}"), format!("{positioned:?}"));
        }
    }
}
