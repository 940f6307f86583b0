//! JSON read straight into the typed kinds, without the positioned tree:
//! how a collected cluster (`cluster/*.json`, a List per kind, hundreds of
//! megabytes on a large cluster) is read, its objects on several threads.
//!
//! It takes a file only when every object in it reads without an issue. Any
//! problem at all (a syntax error, a duplicate key, an object without
//! apiVersion or kind, a field of the wrong type, an invalid address, a
//! List nested in a List) hands the whole file back to the positioned path
//! (`load::load_text`), which reports it exactly as it always has. So both
//! paths give the same objects for a good file, and a bad file's problems
//! are the positioned path's.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::convert::read_object_json;
use super::document::{Position, chars};
use super::model::{Object, ObjectSource};

/// Below this many objects a file is read on the calling thread.
const PARALLEL_FROM: usize = 512;
/// At most this many threads read one file.
const MAX_THREADS: usize = 8;

/// The objects of a JSON file with where each starts, in file order; `None`
/// when anything in the file would be a problem.
pub(super) fn read(path: &Path, text: &str) -> Option<Vec<(Object, Position)>> {
    let mut pending = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Head>();
    let mut start = 0;
    while let Some(head) = stream.next() {
        let head = head.ok()?;
        let end = stream.byte_offset();
        let raw = text.get(start..end)?.trim_start();
        start = end;
        // A document names its own apiVersion and kind.
        let (api_version, kind) = (named(head.api_version)?, named(head.kind)?);
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
        match (kind.as_ref(), item_kind, head.items) {
            ("List", _, None) => return None,
            ("List", _, Some(items)) => {
                pending.extend(items.into_iter().flatten().map(|raw| Pending {
                    raw: raw.get(),
                    inherited: None,
                }));
            }
            (_, Some(item_kind), Some(items)) => {
                pending.extend(items.into_iter().flatten().map(|raw| Pending {
                    raw: raw.get(),
                    inherited: Some((api_version.clone(), Cow::Owned(item_kind.to_owned()))),
                }));
            }
            _ => pending.push(Pending {
                raw,
                inherited: None,
            }),
        }
    }
    if pending.is_empty() {
        return None;
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_THREADS)
        .min(pending.len().div_ceil(PARALLEL_FROM));
    if threads <= 1 {
        return read_objects(path, text, &pending);
    }
    let chunk = pending.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = pending
            .chunks(chunk)
            .map(|objects| scope.spawn(move || read_objects(path, text, objects)))
            .collect();
        let mut all = Vec::with_capacity(pending.len());
        for worker in workers {
            all.extend(worker.join().ok()??);
        }
        Some(all)
    })
}

/// An object still to read, and the apiVersion and kind its typed List
/// (`PodList`) gives it when it leaves them out.
struct Pending<'a> {
    raw: &'a str,
    inherited: Option<(Cow<'a, str>, Cow<'a, str>)>,
}

/// Reads `objects` (in file order) of `text`.
fn read_objects(path: &Path, text: &str, objects: &[Pending]) -> Option<Vec<(Object, Position)>> {
    let mut read = Vec::with_capacity(objects.len());
    let mut lines = Lines::default();
    for object in objects {
        let head: Head = serde_json::from_str(object.raw).ok()?;
        let inherited = object.inherited.as_ref();
        let api_version = named(head.api_version).or_else(|| inherited.map(|i| i.0.clone()))?;
        let kind = named(head.kind).or_else(|| inherited.map(|i| i.1.clone()))?;
        // A List in a List: the positioned path says what it makes of it.
        if kind == "List" || (kind.ends_with("List") && head.items.is_some()) {
            return None;
        }
        let offset = (object.raw.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
        let at = lines.position(text, offset);
        let source = ObjectSource {
            file: path.to_path_buf(),
            line: at.line,
        };
        read.push((
            read_object_json(object.raw, &api_version, &kind, source)?,
            at,
        ));
    }
    Some(read)
}

/// A non-empty name; empty and null count as absent, as for the positioned path.
fn named(name: Option<Cow<'_, str>>) -> Option<Cow<'_, str>> {
    name.filter(|name| !name.is_empty())
}

/// Lines and columns counted forward through a text, for offsets that only
/// grow: each byte is looked at once, however long the lines.
#[derive(Default)]
struct Lines {
    offset: usize,
    /// Lines before `offset`, and characters between its line's start and it.
    line: usize,
    column: usize,
}

impl Lines {
    fn position(&mut self, text: &str, offset: usize) -> Position {
        let passed = text.as_bytes().get(self.offset..offset).unwrap_or_default();
        match passed.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                self.line += passed.iter().filter(|&&b| b == b'\n').count();
                self.column = chars(&passed[last + 1..]);
            }
            None => self.column += chars(passed),
        }
        self.offset = offset;
        Position {
            line: self.line + 1,
            column: self.column + 1,
        }
    }
}

/// What the reader needs of a document or an object: its apiVersion, kind
/// and items (`Some(None)` for `items: null`), every key of it and of
/// everything in it (but the items) checked to be unique.
struct Head<'a> {
    api_version: Option<Cow<'a, str>>,
    kind: Option<Cow<'a, str>>,
    items: Option<Option<Vec<&'a RawValue>>>,
}

impl<'de> Deserialize<'de> for Head<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(HeadVisitor)
    }
}

struct HeadVisitor;

impl<'de> Visitor<'de> for HeadVisitor {
    type Value = Head<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Head<'de>, A::Error> {
        let mut head = Head {
            api_version: None,
            kind: None,
            items: None,
        };
        let mut keys = Keys::default();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            keys.insert::<A::Error>(key.clone())?;
            match key.as_ref() {
                "apiVersion" => head.api_version = map.next_value::<Option<Key>>()?.map(|k| k.0),
                "kind" => head.kind = map.next_value::<Option<Key>>()?.map(|k| k.0),
                "items" => head.items = Some(map.next_value()?),
                _ => {
                    map.next_value::<Unique>()?;
                }
            }
        }
        Ok(head)
    }
}

/// A string, borrowed from the text where it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_owned())))
    }
}

/// The keys of one mapping so far: a short list, a set once it grows (a
/// hostile mapping with a million keys stays linear).
#[derive(Default)]
struct Keys<'a> {
    few: Vec<Cow<'a, str>>,
    many: HashSet<Cow<'a, str>>,
}

impl<'a> Keys<'a> {
    const FEW: usize = 16;

    fn contains(&self, key: &str) -> bool {
        self.few.iter().any(|k| k == key) || self.many.contains(key)
    }

    fn insert<E: de::Error>(&mut self, key: Cow<'a, str>) -> Result<(), E> {
        if self.contains(&key) {
            return Err(E::custom("duplicate key"));
        }
        if self.few.len() < Self::FEW {
            self.few.push(key);
        } else {
            self.many.insert(key);
        }
        Ok(())
    }
}

/// Any JSON value whose mappings have unique keys; the value is dropped.
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut keys = Keys::default();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            keys.insert::<A::Error>(key)?;
            map.next_value::<Unique>()?;
        }
        Ok(Unique)
    }
}
