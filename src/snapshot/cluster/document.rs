//! A YAML or JSON document as a tree of values that remember where they were
//! written, so that every problem found later (a wrong type three levels
//! down, an invalid IP) points at its own line and column.
//!
//! YAML is read with serde-saphyr and JSON with serde_json; both build the
//! same tree, and everything after this module works on the tree alone.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{DuplicateKeyPolicy, Spanned};

use crate::snapshot::problem::{LineCursor, ParseIssue, chars, yaml_message};

/// 1-based line and column (in characters) in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// Where `offset` of `text` is, counted on from `cursor`'s last place.
    pub fn after(cursor: &mut LineCursor, text: &str, offset: usize) -> Position {
        let (line, column) = cursor.advance(text, offset);
        Position { line, column }
    }
}

/// A value of a document and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Value {
    pub position: Position,
    pub data: Data,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Data {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    String(String),
    Seq(Vec<Value>),
    /// Entries in the order written; keys are unique (a repeated key is a parse error).
    Map(Vec<(String, Value)>),
}

/// A path to a field inside an object, as Kubernetes writes them:
/// `spec.containers[0].ports[1].containerPort`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FieldPath(Vec<Segment>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
    /// A field's name: mostly one the code names, so no allocation.
    Field(Cow<'static, str>),
    Index(usize),
}

impl FieldPath {
    /// Puts `segment` in front: paths of deserialization errors are built
    /// from the inside out.
    pub fn prepend(&mut self, segment: Segment) {
        self.0.insert(0, segment);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A field path as a conversion goes down an object, on the stack: made a
/// [`FieldPath`] only for an issue, not for every field read (150,000 pods
/// are read without one).
#[derive(Debug, Clone, Copy)]
pub(super) enum Place<'a> {
    Root,
    Field(&'a Place<'a>, &'static str),
    Index(&'a Place<'a>, usize),
}

impl<'a> Place<'a> {
    pub fn field(&'a self, name: &'static str) -> Place<'a> {
        Place::Field(self, name)
    }

    pub fn index(&'a self, index: usize) -> Place<'a> {
        Place::Index(self, index)
    }

    pub fn path(&self) -> FieldPath {
        let mut segments = Vec::new();
        let mut place = self;
        loop {
            place = match place {
                Place::Root => break,
                Place::Field(parent, name) => {
                    segments.push(Segment::Field(Cow::Borrowed(name)));
                    parent
                }
                Place::Index(parent, index) => {
                    segments.push(Segment::Index(*index));
                    parent
                }
            };
        }
        segments.reverse();
        FieldPath(segments)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(index) => write!(f, "[{index}]")?,
                // Label keys such as `app.kubernetes.io/name` would read as
                // several fields: quote them.
                Segment::Field(name)
                    if !name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    write!(f, "[{name:?}]")?
                }
                Segment::Field(name) if i == 0 => f.write_str(name)?,
                Segment::Field(name) => write!(f, ".{name}")?,
            }
        }
        Ok(())
    }
}

impl Value {
    /// The value of `key` when this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match &self.data {
            Data::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.data {
            Data::String(s) => Some(s),
            _ => None,
        }
    }

    /// Where the field at `path` is written, or its nearest written ancestor.
    pub fn locate(&self, path: &FieldPath) -> Position {
        let mut value = self;
        for segment in &path.0 {
            let next = match (segment, &value.data) {
                (Segment::Field(name), _) => value.get(name),
                (Segment::Index(index), Data::Seq(items)) => items.get(*index),
                (Segment::Index(_), _) => None,
            };
            match next {
                Some(next) => value = next,
                None => break,
            }
        }
        value.position
    }

    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as Json;
        match &self.data {
            Data::Null => Json::Null,
            Data::Bool(b) => Json::Bool(*b),
            Data::Int(i) => Json::from(*i),
            Data::UInt(u) => Json::from(*u),
            // Both parsers reject non-finite numbers, so this is never null.
            Data::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
            Data::String(s) => Json::String(s.clone()),
            Data::Seq(items) => Json::Array(items.iter().map(Value::to_json).collect()),
            Data::Map(entries) => Json::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// Moves every position of the tree through `to`.
    fn relocate(&mut self, to: &impl Fn(Position) -> Position) {
        self.position = to(self.position);
        match &mut self.data {
            Data::Seq(items) => items.iter_mut().for_each(|v| v.relocate(to)),
            Data::Map(entries) => entries.iter_mut().for_each(|(_, v)| v.relocate(to)),
            _ => {}
        }
    }
}

/// YAML breaks lines at a lone carriage return too; a user's editor and
/// skoop's positions break them at line feeds only. Where a piece of YAML
/// has lone CRs, the parser's (line, column) is translated to those.
struct LoneCrLines {
    /// Per YAML line (0-based): the line-feed line it is on (0-based, from
    /// the piece's start), and the characters before it on that line.
    starts: Vec<(usize, usize)>,
}

impl LoneCrLines {
    /// `None` when `piece` has no lone CR: the parser's lines are the file's.
    fn of(piece: &str) -> Option<LoneCrLines> {
        let bytes = piece.as_bytes();
        let lone = |i: usize| bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n');
        if !(0..bytes.len()).any(lone) {
            return None;
        }
        let mut starts = vec![(0, 0)];
        let (mut line, mut column) = (0, 0);
        let mut chars = piece.char_indices().peekable();
        while let Some((_, c)) = chars.next() {
            column += 1;
            match c {
                '\n' => {
                    (line, column) = (line + 1, 0);
                    starts.push((line, 0));
                }
                '\r' if chars.peek().map(|&(_, next)| next) != Some('\n') => {
                    starts.push((line, column));
                }
                _ => {}
            }
        }
        Some(LoneCrLines { starts })
    }

    fn translate(&self, at: Position) -> Position {
        match self.starts.get(at.line.saturating_sub(1)) {
            Some(&(line, before)) => Position {
                line: line + 1,
                column: at.column + before,
            },
            None => at,
        }
    }
}

/// Builds [`Data`] from whichever parser drives it; `S` reads the children,
/// so that each parser can attach positions its own way.
struct DataVisitor<S>(S);

impl<'de, S> Visitor<'de> for DataVisitor<S>
where
    S: DeserializeSeed<'de> + Copy,
    S::Value: Into<Value>,
{
    type Value = Data;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Data, E> {
        Ok(Data::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Data, E> {
        Ok(Data::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Data, E> {
        Ok(Data::UInt(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Data, E> {
        Ok(Data::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Data, E> {
        Ok(Data::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Data, E> {
        Ok(Data::String(v))
    }

    fn visit_unit<E>(self) -> Result<Data, E> {
        Ok(Data::Null)
    }

    fn visit_none<E>(self) -> Result<Data, E> {
        Ok(Data::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Data, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.0)? {
            items.push(item.into());
        }
        Ok(Data::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Data, A::Error> {
        let mut entries = Vec::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
            }
            let value = map.next_value_seed(self.0)?;
            entries.push((key, value.into()));
        }
        Ok(Data::Map(entries))
    }
}

/// A YAML value: serde-saphyr's `Spanned` gives each node its position.
struct YamlValue(Value);

struct YamlData(Data);

impl From<YamlValue> for Value {
    fn from(value: YamlValue) -> Value {
        value.0
    }
}

impl<'de> de::Deserialize<'de> for YamlValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<YamlData>::deserialize(deserializer)?;
        let position = Position {
            line: usize::try_from(spanned.referenced.line()).unwrap_or(usize::MAX),
            column: usize::try_from(spanned.referenced.column()).unwrap_or(usize::MAX),
        };
        Ok(YamlValue(Value {
            position,
            data: spanned.value.0,
        }))
    }
}

impl<'de> de::Deserialize<'de> for YamlData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(DataVisitor(PhantomData::<YamlValue>))
            .map(YamlData)
    }
}

/// Reads every document of a YAML stream.
///
/// The stream is cut at its `---` markers first and each piece parsed on its
/// own, so a syntax error costs only its own document: a marker at the start
/// of a line ends any scalar in YAML, so the cut never falls inside a value.
pub(super) fn parse_yaml(text: &str) -> (Vec<Value>, Vec<ParseIssue>) {
    parse_yaml_from(text, 0)
}

/// [`parse_yaml`] of a piece of a file after its first `lines_before` lines.
pub(super) fn parse_yaml_from(text: &str, lines_before: usize) -> (Vec<Value>, Vec<ParseIssue>) {
    let mut documents = Vec::new();
    let mut issues = Vec::new();
    let options = serde_saphyr::options! {
        with_snippet: false,
        // The parser positions a duplicate key at the duplicate itself;
        // the visitor would only know the mapping it is in.
        duplicate_keys: DuplicateKeyPolicy::Error,
        // A `kubectl get -A -o yaml` of a large cluster is one huge document;
        // bound the work by the input's size instead of a fixed count.
        // Alias expansion keeps its own limits.
        budget: serde_saphyr::budget! {
            max_events: text.len().max(1_000_000),
            max_nodes: text.len().max(250_000),
            max_total_scalar_bytes: text.len().max(64 * 1024 * 1024),
            max_documents: text.len().max(1_024),
        },
    };
    for (first_line, piece) in yaml_pieces(text) {
        let first_line = first_line + lines_before;
        let lone_cr = LoneCrLines::of(piece);
        let in_file = |at: Position| {
            let at = lone_cr.as_ref().map_or(at, |lines| lines.translate(at));
            Position {
                line: at.line.saturating_add(first_line),
                column: at.column,
            }
        };
        match serde_saphyr::from_multiple_with_options::<YamlValue>(piece, options.clone()) {
            Ok(values) => documents.extend(values.into_iter().map(|YamlValue(mut value)| {
                value.relocate(&in_file);
                value
            })),
            Err(error) => {
                let message = yaml_message(&error);
                let issue = match error.location() {
                    Some(at) if at.line() > 0 => {
                        let at = in_file(Position {
                            line: usize::try_from(at.line()).unwrap_or(usize::MAX),
                            column: usize::try_from(at.column()).unwrap_or(usize::MAX),
                        });
                        ParseIssue::at(at.line, at.column, message)
                    }
                    _ => ParseIssue::at_line(first_line + 1, message),
                };
                issues.push(issue);
            }
        }
    }
    (documents, issues)
}

/// Cuts a YAML stream before each `---` document marker that follows
/// content, returning each piece with the number of lines before it.
/// Markers after nothing but comments, blank lines and directives stay with
/// what follows them.
fn yaml_pieces(text: &str) -> Vec<(usize, &str)> {
    let mut pieces = Vec::new();
    let (mut start, mut start_line, mut has_content) = (0, 0, false);
    let mut offset = 0;
    for (line_number, line) in text.split_inclusive('\n').enumerate() {
        let is_marker =
            line.starts_with("---") && line[3..].chars().next().is_none_or(char::is_whitespace);
        if is_marker && has_content {
            pieces.push((start_line, &text[start..offset]));
            (start, start_line, has_content) = (offset, line_number, false);
        }
        let trimmed = line.trim_start();
        if !(trimmed.is_empty() || trimmed.starts_with('#') || line.starts_with('%')) {
            has_content = true;
        }
        offset += line.len();
    }
    if start < text.len() {
        pieces.push((start_line, &text[start..]));
    }
    pieces
}

/// Reads every JSON value of a file (usually one; `kubectl get -o json`
/// output concatenated into one file holds several).
pub(super) fn parse_json(text: &str) -> (Vec<Value>, Vec<ParseIssue>) {
    let consumed = Cell::new(0);
    let lines = LineIndex::new(text);
    let seed = JsonSeed {
        text: text.as_bytes(),
        consumed: &consumed,
        lines: &lines,
    };
    let reader = CountingReader {
        rest: text.as_bytes(),
        consumed: &consumed,
    };
    let mut deserializer = serde_json::Deserializer::from_reader(reader);
    let mut documents = Vec::new();
    let mut issues = Vec::new();
    // `end` succeeds only when nothing but whitespace is left.
    while deserializer.end().is_err() {
        match seed.deserialize(&mut deserializer) {
            Ok(value) => documents.push(value),
            Err(error) => {
                // serde_json appends the position to its message; it goes in the issue instead.
                let suffix = format!(" at line {} column {}", error.line(), error.column());
                let message = error.to_string();
                let message = message.strip_suffix(&suffix).unwrap_or(&message);
                issues.push(ParseIssue::at(
                    error.line().max(1),
                    error.column().max(1),
                    message,
                ));
                break;
            }
        }
    }
    (documents, issues)
}

/// Counts the bytes serde_json has taken. serde_json reads a reader one
/// byte at a time (peeking at most one ahead), so the count tells where the
/// value being deserialized starts; see [`JsonSeed`].
struct CountingReader<'a> {
    rest: &'a [u8],
    consumed: &'a Cell<usize>,
}

impl Read for CountingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.rest.read(buf)?;
        self.consumed.set(self.consumed.get() + n);
        Ok(n)
    }
}

/// Deserializes a JSON value with its position.
#[derive(Clone, Copy)]
struct JsonSeed<'a> {
    text: &'a [u8],
    consumed: &'a Cell<usize>,
    lines: &'a LineIndex,
}

impl<'de> DeserializeSeed<'de> for JsonSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        // A document or an array element has been peeked at (its first byte
        // is the last one read); a mapping value follows the `:` just read.
        let mut start = self.consumed.get().saturating_sub(1);
        if self.text.get(start) == Some(&b':') {
            start += 1;
            while self.text.get(start).is_some_and(u8::is_ascii_whitespace) {
                start += 1;
            }
        }
        let position = self.lines.position(self.text, start);
        let data = deserializer.deserialize_any(DataVisitor(self))?;
        Ok(Value { position, data })
    }
}

/// Byte offsets of line starts, to turn offsets into positions quickly.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    fn position(&self, text: &[u8], offset: usize) -> Position {
        let offset = offset.min(text.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let line_start = self.starts.get(line - 1).copied().unwrap_or(0);
        let before = text.get(line_start..offset).unwrap_or_default();
        Position {
            line,
            column: chars(before) + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: usize, column: usize) -> Position {
        Position { line, column }
    }

    #[test]
    fn yaml_values_know_their_line_and_column() {
        let (docs, issues) = parse_yaml("a: 1\nb:\n- x: é\n  y: [1, 2]\n");
        assert!(issues.is_empty(), "{issues:?}");
        let doc = &docs[0];
        assert_eq!(doc.position, pos(1, 1));
        assert_eq!(doc.get("a").unwrap().data, Data::UInt(1));
        let b = Place::Root.field("b");
        let b0 = b.index(0);
        let y = b0.field("y");
        assert_eq!(doc.locate(&y.index(1).path()), pos(4, 10));
        assert_eq!(doc.locate(&b0.path()), pos(3, 3));
    }

    #[test]
    fn yaml_documents_after_a_broken_one_still_load() {
        let text = "a: 1\n---\nb: [1, 2\nc: 3\n---\nd: 4\n";
        let (docs, issues) = parse_yaml(text);
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].get("d").unwrap().position, pos(6, 4));
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].line, 4, "{issues:?}");
        assert!(!issues[0].message.contains("line"), "{issues:?}");
    }

    #[test]
    fn yaml_empty_documents_and_comments_yield_nothing() {
        let (docs, issues) = parse_yaml("---\n# only a comment\n---\n");
        assert!(docs.is_empty());
        assert!(issues.is_empty());
    }

    #[test]
    fn yaml_marker_after_directive_stays_with_its_document() {
        let (docs, issues) = parse_yaml("%YAML 1.2\n---\na: 1\n");
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(docs[0].get("a").unwrap().position, pos(3, 4));
    }

    // Found by the cluster_objects fuzzer: lone CRs are YAML line breaks,
    // which put an error at line 57 of a 19-line file.
    #[test]
    fn yaml_positions_count_line_feeds_not_lone_carriage_returns() {
        let (_, issues) = parse_yaml("a: 1\r\r\r\nb: [\r\r\n");
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(issues[0].line <= 3, "{issues:?}");
        let (docs, issues) = parse_yaml("x: 1\ra: 1\r\nb: 2\n");
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(docs[0].get("a").unwrap().position, pos(1, 9));
        assert_eq!(docs[0].get("b").unwrap().position, pos(2, 4));
    }

    #[test]
    fn yaml_duplicate_key_is_an_issue() {
        let (docs, issues) = parse_yaml("a: 1\na: 2\n");
        assert!(docs.is_empty());
        assert!(
            issues[0].message.contains("duplicate key `a`"),
            "{issues:?}"
        );
    }

    #[test]
    fn json_values_know_their_line_and_column() {
        let text = "{\n  \"a\": 1,\n  \"b\" :  [ {\"c\": \"x\"},\n    7 ]\n}\n";
        let (docs, issues) = parse_json(text);
        assert!(issues.is_empty(), "{issues:?}");
        let doc = &docs[0];
        assert_eq!(doc.position, pos(1, 1));
        assert_eq!(doc.get("a").unwrap().position, pos(2, 8));
        let b = Place::Root.field("b");
        let b0 = b.index(0);
        assert_eq!(doc.locate(&b.path()), pos(3, 10));
        assert_eq!(doc.locate(&b0.path()), pos(3, 12));
        assert_eq!(doc.locate(&b0.field("c").path()), pos(3, 18));
        assert_eq!(doc.locate(&b.index(1).path()), pos(4, 5));
    }

    #[test]
    fn json_stream_of_values_reads_each() {
        let (docs, issues) = parse_json("{\"a\": 1}\n  {\"b\": 2}\n");
        assert!(issues.is_empty());
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].position, pos(2, 3));
    }

    #[test]
    fn json_truncated_is_an_issue_with_position_but_no_position_text() {
        let (docs, issues) = parse_json("{\"a\": [1,\n");
        assert!(docs.is_empty());
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].line, 2);
        assert_eq!(issues[0].message, "EOF while parsing a value");
    }

    #[test]
    fn json_duplicate_key_is_an_issue() {
        let (_, issues) = parse_json("{\"a\": 1, \"a\": 2}");
        assert!(
            issues[0].message.contains("duplicate key `a`"),
            "{issues:?}"
        );
    }

    #[test]
    fn to_json_keeps_every_value() {
        let (docs, _) = parse_yaml("a: [1, -2, 1.5, true, null, \"s\"]\n");
        assert_eq!(
            docs[0].to_json(),
            serde_json::json!({"a": [1, -2, 1.5, true, null, "s"]})
        );
    }

    #[test]
    fn field_path_quotes_keys_that_are_not_identifiers() {
        let metadata = Place::Root.field("metadata");
        let labels = metadata.field("labels");
        assert_eq!(
            labels.field("app.kubernetes.io/name").path().to_string(),
            r#"metadata.labels["app.kubernetes.io/name"]"#
        );
        let spec = Place::Root.field("spec");
        let ports = spec.field("ports");
        let port = ports.index(2);
        assert_eq!(port.field("port").path().to_string(), "spec.ports[2].port");
    }
}
