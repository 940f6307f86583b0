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
use std::fmt;
use std::path::Path;

use serde::de::{Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::convert::{LeanObject, read_object_json};
use super::document::Position;
use super::model::{Object, ObjectSource};
use super::wire::{Key, Keys, Unique};
use crate::snapshot::problem::LineCursor;

pub(super) mod fitted;
pub(super) mod list;

/// Below this many objects a file is read on the calling thread.
const PARALLEL_FROM: usize = 512;
/// At most this many threads read one file.
const MAX_THREADS: usize = 8;

/// The objects of a JSON file with where each starts, in file order; `None`
/// when anything in the file would be a problem.
pub(super) fn read(path: &Path, text: &str) -> Option<Vec<(Object, Position)>> {
    if let Some(objects) = list::read(path, text) {
        return Some(objects);
    }
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
    inherited: Option<Inherited<'a>>,
}

/// The apiVersion and kind a typed List gives its items.
pub(super) type Inherited<'a> = (Cow<'a, str>, Cow<'a, str>);

/// Reads `objects` (in file order) of `text`.
fn read_objects(path: &Path, text: &str, objects: &[Pending]) -> Option<Vec<(Object, Position)>> {
    let mut read = Vec::with_capacity(objects.len());
    let mut lines = LineCursor::default();
    for object in objects {
        let offset = (object.raw.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
        let at = Position::after(&mut lines, text, offset);
        let source = ObjectSource {
            file: path.to_path_buf(),
            line: at.line,
        };
        let read_object = match read_in_one_pass(object)? {
            Some(lean) => lean.into_object(source)?,
            None => read_in_two_passes(object, source)?,
        };
        read.push((read_object, at));
    }
    Some(read)
}

/// An object of a kind with a lean form whose apiVersion and kind come
/// before its other fields (as kubectl and the collector write them), read
/// in one pass; `Some(None)` for any other object, `None` for a problem.
fn read_in_one_pass<'a>(object: &Pending<'a>) -> Option<Option<LeanObject>> {
    let mut deserializer = serde_json::Deserializer::from_str(object.raw);
    let lean = OnePass(object.inherited.as_ref())
        .deserialize(&mut deserializer)
        .ok()?;
    deserializer.end().ok()?;
    Some(lean)
}

/// An object read first for its head (apiVersion, kind, unique keys), then
/// for its kind.
fn read_in_two_passes(object: &Pending, source: ObjectSource) -> Option<Object> {
    let head: Head = serde_json::from_str(object.raw).ok()?;
    let (api_version, kind) = kind_of(object.inherited.as_ref(), head.api_version, head.kind)?;
    // A List in a List: the positioned path says what it makes of it.
    if kind == "List" || (kind.ends_with("List") && head.items.is_some()) {
        return None;
    }
    read_object_json(object.raw, &api_version, &kind, source)
}

/// The apiVersion and kind an object has, else those its List gives it
/// (`inherited`); `None` when it has neither.
fn kind_of<'b>(
    inherited: Option<&Inherited<'b>>,
    api_version: Option<Cow<'b, str>>,
    kind: Option<Cow<'b, str>>,
) -> Option<(Cow<'b, str>, Cow<'b, str>)> {
    let api_version = named(api_version).or_else(|| inherited.map(|i| i.0.clone()))?;
    let kind = named(kind).or_else(|| inherited.map(|i| i.1.clone()))?;
    Some((api_version, kind))
}

/// Reads an object's apiVersion and kind, then, at its first other field,
/// the rest of it into its kind's lean form, every key checked to be
/// unique; an object of another kind, or whose other fields come first, is
/// skipped unchecked (`None`), for [`read_in_two_passes`].
pub(super) struct OnePass<'p, 'a>(pub Option<&'p Inherited<'a>>);

impl<'de> DeserializeSeed<'de> for OnePass<'_, '_> {
    type Value = Option<LeanObject>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for OnePass<'_, '_> {
    type Value = Option<LeanObject>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut keys = Keys::default();
        let (mut api_version, mut kind) = (None, None);
        let mut lean: Option<LeanObject> = None;
        while let Some(Key(key)) = map.next_key::<Key>()? {
            match (&mut lean, key.as_ref()) {
                (None, "apiVersion") => api_version = map.next_value::<Option<Key>>()?.map(|k| k.0),
                (None, "kind") => kind = map.next_value::<Option<Key>>()?.map(|k| k.0),
                // Decided without it (a List gave it): the two passes say
                // which one counts.
                (Some(_), "apiVersion" | "kind") => return skip_rest(map),
                (Some(lean), _) => lean.field(&key, &mut map)?,
                (None, _) => {
                    let Some(mut decided) = self.lean(api_version.take(), kind.take()) else {
                        return skip_rest(map);
                    };
                    decided.field(&key, &mut map)?;
                    lean = Some(decided);
                }
            }
            keys.insert::<A::Error>(key)?;
        }
        match lean {
            Some(lean) => Ok(Some(lean)),
            None => Ok(self.lean(api_version, kind)),
        }
    }
}

/// Skips the value of the key just read and the rest of the mapping: the
/// object is left to the two passes.
fn skip_rest<'de, A: MapAccess<'de>>(mut map: A) -> Result<Option<LeanObject>, A::Error> {
    map.next_value::<IgnoredAny>()?;
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(None)
}

impl OnePass<'_, '_> {
    /// The lean form of the object's kind, if it has one and it is known
    /// (the two passes say what is wrong with an object without one).
    fn lean(
        &self,
        api_version: Option<Cow<'_, str>>,
        kind: Option<Cow<'_, str>>,
    ) -> Option<LeanObject> {
        let (api_version, kind) = kind_of(self.0, api_version, kind)?;
        LeanObject::of(&api_version, &kind)
    }
}

/// A non-empty name; empty and null count as absent, as for the positioned path.
fn named(name: Option<Cow<'_, str>>) -> Option<Cow<'_, str>> {
    name.filter(|name| !name.is_empty())
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
