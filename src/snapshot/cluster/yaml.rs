//! YAML as kubectl and the API server write it, read straight into the
//! typed kinds' lean forms, as `direct.rs` reads JSON.
//!
//! kubectl writes block mappings and sequences (a sequence under a key at
//! the key's own indentation), plain, single- and double-quoted scalars on
//! one line, literal block scalars (`|`, `|-`) and the empty `{}` and `[]`.
//! That is all this reader knows. Anything else — a comment, an anchor or
//! alias, a tag, flow style, a scalar over several lines, a plain scalar
//! whose type YAML's resolution could make other than a string, an integer
//! or a boolean — refuses the file, and so does any problem at all: the
//! file then goes to the general reader (serde-saphyr, `document.rs`), which
//! reads every YAML and positions every problem. So for a file this reader
//! takes, it gives what the general reader gives (the fuzz target
//! `cluster_objects` and the tests compare them); it changes how fast a
//! file is read, never what is read.
//!
//! Objects of the kinds without a lean form are few (ConfigMaps,
//! DaemonSets, NetworkPolicies, custom resources): their text is found here
//! and read by the general reader, one object at a time.

use std::borrow::Cow;
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::convert::{LeanObject, read_object};
use super::direct::OnePass;
use super::document::{Position, parse_yaml_from};
use super::load::{Found, objects_in};
use super::model::{Object, ObjectSource};
use super::wire::{Key, Keys, Refused, Unique, deserialize_key, read_the_rest_as_any, visit_enum};
use crate::snapshot::problem::LineCursor;

/// Nesting deeper than this is left to the general reader.
const MAX_DEPTH: usize = 64;

type Result<T> = std::result::Result<T, Refused>;

/// The objects of a YAML text with where each starts, in file order;
/// `None` when anything in it is beyond what kubectl writes or would be a
/// problem.
pub(super) fn read(path: &Path, text: &str) -> Option<Vec<(Object, Position)>> {
    // Lone carriage returns break lines in YAML, not in positions: the
    // general reader translates them. Characters YAML does not allow are
    // its to report.
    if !printable(text) {
        return None;
    }
    let mut reader = Reader {
        text,
        at: 0,
        depth: 0,
    };
    let mut document = Document {
        path,
        text,
        lines: LineCursor::default(),
        objects: Vec::new(),
    };
    loop {
        match reader.document_start().ok()? {
            None => break,
            Some(start) => document.read_root(&mut reader, start).ok()?,
        }
    }
    // A file without an object is the general reader's to report.
    (!document.objects.is_empty()).then_some(document.objects)
}

/// Whether `text` holds only characters YAML allows (and no carriage
/// return, nor a byte-order mark inside).
fn printable(text: &str) -> bool {
    text.bytes()
        .all(|b| matches!(b, b'\t' | b'\n' | 0x20..=0x7e | 0x80..))
        && (text.is_ascii()
            || text.chars().all(|c| {
                !matches!(
                    c,
                    '\u{80}'..='\u{84}' | '\u{86}'..='\u{9f}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                )
            }))
}

/// The text and where the reader is in it.
struct Reader<'a> {
    text: &'a str,
    /// A byte offset: at a line's start between nodes, or inside a line
    /// after a key's `:` or an item's `-`.
    at: usize,
    depth: usize,
}

/// A line holding something, found from a line's start.
#[derive(Clone, Copy)]
struct ContentLine {
    start: usize,
    indent: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn line_end(&self, from: usize) -> usize {
        self.bytes()[from..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.text.len(), |i| from + i)
    }

    /// Just past the end of the line holding `from`.
    fn next_line(&self, from: usize) -> usize {
        (self.line_end(from) + 1).min(self.text.len())
    }

    /// The next line with content from the line start `self.at`, blank
    /// lines skipped; `None` at the end of the text or of the document (a
    /// `---` or `...` marker). A comment or a tab in the indentation is
    /// refused.
    fn content_line(&mut self) -> Result<Option<ContentLine>> {
        let bytes = self.bytes();
        loop {
            let start = self.at;
            if start >= bytes.len() {
                return Ok(None);
            }
            let indent = bytes[start..].iter().take_while(|&&b| b == b' ').count();
            match bytes.get(start + indent) {
                None => {
                    self.at = bytes.len();
                    return Ok(None);
                }
                Some(b'\n') => self.at = start + indent + 1,
                Some(b'#' | b'\t') => return Err(Refused),
                Some(_) if indent == 0 && is_marker(&bytes[start..]) => return Ok(None),
                Some(_) => return Ok(Some(ContentLine { start, indent })),
            }
        }
    }

    /// Where the next document's root starts, past blank lines and one
    /// `---`; `None` at the end of the text.
    fn document_start(&mut self) -> Result<Option<ContentLine>> {
        let mut marked = false;
        loop {
            match self.content_line()? {
                Some(line) if line.indent == 0 => return Ok(Some(line)),
                Some(_) => return Err(Refused),
                None if self.at >= self.text.len() => return Ok(None),
                None => {
                    // A marker: `---` alone on its line, once per document.
                    let end = self.line_end(self.at);
                    if marked || self.text[self.at..end].trim_end_matches(' ') != "---" {
                        return Err(Refused);
                    }
                    marked = true;
                    self.at = self.next_line(self.at);
                }
            }
        }
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Refused);
        }
        Ok(())
    }

    /// What the node after a key's `:` or an item's `-` is, with the
    /// reader past it when it is a scalar, or at its first entry when it is
    /// a block collection.
    fn node(&mut self, context: Context) -> Result<Start<'a>> {
        let bytes = self.bytes();
        let mut at = self.at;
        while bytes.get(at) == Some(&b' ') {
            at += 1;
        }
        match bytes.get(at) {
            None => {
                self.at = bytes.len();
                self.block(context)
            }
            Some(b'\n') => {
                self.at = at + 1;
                self.block(context)
            }
            Some(&first) => {
                self.at = at;
                self.inline(first, context)
            }
        }
    }

    /// A node on the lines after its key or dash: a block collection more
    /// indented (or a sequence at its key's indentation), else null.
    fn block(&mut self, context: Context) -> Result<Start<'a>> {
        let Some(line) = self.content_line()? else {
            return Ok(Start::Null);
        };
        let parent = context.parent();
        let dash = is_dash(&self.bytes()[line.start + line.indent..]);
        let deeper = line.indent > parent;
        let compact = matches!(context, Context::Value { key: column } if line.indent == column);
        if !(deeper || compact && dash) {
            return Ok(Start::Null);
        }
        self.at = line.start;
        if dash {
            Ok(Start::Seq {
                column: line.indent,
            })
        } else {
            Ok(Start::Map {
                column: line.indent,
                inline: false,
            })
        }
    }

    /// A node starting at `self.at`, on the line of its key or dash.
    fn inline(&mut self, first: u8, context: Context) -> Result<Start<'a>> {
        let bytes = self.bytes();
        let end = self.line_end(self.at);
        let start = match first {
            b'"' => {
                let (value, after) = quoted(self.text, self.at + 1, b'"')?;
                self.at = after;
                Start::Str(value)
            }
            b'\'' => {
                let (value, after) = quoted(self.text, self.at + 1, b'\'')?;
                self.at = after;
                Start::Str(value)
            }
            b'|' => return self.literal(context),
            b'{' | b'[' => {
                let empty = match first {
                    b'{' => Start::EmptyMap,
                    _ => Start::EmptySeq,
                };
                let close = if first == b'{' { b'}' } else { b']' };
                if bytes.get(self.at + 1) != Some(&close) {
                    return Err(Refused);
                }
                self.at += 2;
                empty
            }
            _ => {
                let line = &self.text[self.at..end];
                if !plain_start(line) {
                    return Err(Refused);
                }
                if key_end(line).is_some() {
                    // `- key: value`: a mapping whose first key is here.
                    return match context {
                        Context::Item { .. } => Ok(Start::Map {
                            column: self.at
                                - (self.text[..self.at].rfind('\n').map_or(0, |i| i + 1)),
                            inline: true,
                        }),
                        _ => Err(Refused),
                    };
                }
                let value = line.trim_end_matches(' ');
                if value.contains(" #") {
                    return Err(Refused);
                }
                self.at += value.len();
                match resolve(value)? {
                    Plain::Str => Start::Str(Cow::Borrowed(value)),
                    Plain::Null => Start::Null,
                    Plain::Bool(b) => Start::Bool(b),
                    Plain::U64(u) => Start::U64(u),
                    Plain::I64(i) => Start::I64(i),
                }
            }
        };
        self.end_of_scalar(context)?;
        Ok(start)
    }

    /// After a scalar on its line: nothing but spaces to the line's end, and
    /// no line after it indented as a continuation.
    fn end_of_scalar(&mut self, context: Context) -> Result<()> {
        let end = self.line_end(self.at);
        if self.bytes()[self.at..end].iter().any(|&b| b != b' ') {
            return Err(Refused);
        }
        self.at = self.next_line(end);
        let resume = self.at;
        if let Some(line) = self.content_line()?
            && line.indent > context.parent()
        {
            return Err(Refused);
        }
        self.at = resume;
        Ok(())
    }

    /// A literal block scalar (`|`, `|-`, `|+`, with an indentation
    /// indicator or not), `self.at` at its `|`.
    fn literal(&mut self, context: Context) -> Result<Start<'a>> {
        let bytes = self.bytes();
        let end = self.line_end(self.at);
        let header = &self.text[self.at + 1..end];
        let header = header.trim_end_matches(' ');
        let (mut chomp, mut indicator) = (b' ', None);
        for &b in header.as_bytes() {
            match b {
                b'-' | b'+' if chomp == b' ' => chomp = b,
                b'1'..=b'9' if indicator.is_none() => indicator = Some(usize::from(b - b'0')),
                _ => return Err(Refused),
            }
        }
        if end >= bytes.len() {
            return Err(Refused);
        }
        let parent = context.parent();
        let mut indent = indicator.map(|i| parent + i);
        let mut at = end + 1;
        let mut lines: Vec<&str> = Vec::new();
        loop {
            if at >= bytes.len() {
                break;
            }
            let line_end = self.line_end(at);
            if line_end >= bytes.len() {
                // The text ends inside the scalar, without a line break.
                return Err(Refused);
            }
            let line = &self.text[at..line_end];
            let spaces = line.bytes().take_while(|&b| b == b' ').count();
            let blank = spaces == line.len();
            match indent {
                None if blank => {}
                None if spaces > parent => indent = Some(spaces),
                None => break,
                Some(indent) if blank && spaces <= indent => {}
                Some(indent) if spaces >= indent => {}
                Some(_) => break,
            }
            lines.push(line);
            at = line_end + 1;
        }
        let Some(indent) = indent else {
            // Nothing but blank lines: an empty scalar, the blank lines
            // belonging to it (kept by `|+` only).
            self.at = at;
            return match chomp {
                b'+' => Ok(Start::String("\n".repeat(lines.len()))),
                _ => Ok(Start::Str(Cow::Borrowed(""))),
            };
        };
        let mut value = String::new();
        for line in &lines {
            // A blank line before the first content line may not be
            // indented more than the content.
            if line.len() > indent || !line.bytes().all(|b| b == b' ') {
                value.push_str(line.get(indent..).ok_or(Refused)?);
            }
            value.push('\n');
        }
        match chomp {
            b'+' => {}
            b'-' => value.truncate(value.trim_end_matches('\n').len()),
            _ => {
                value.truncate(value.trim_end_matches('\n').len());
                if !value.is_empty() {
                    value.push('\n');
                }
            }
        }
        if lines
            .iter()
            .take_while(|line| line.bytes().all(|b| b == b' '))
            .any(|line| line.len() > indent)
        {
            return Err(Refused);
        }
        self.at = at;
        Ok(Start::String(value))
    }
}

/// A line that is a document marker, `---` or `...`, alone or followed by
/// a space.
fn is_marker(line: &[u8]) -> bool {
    (line.starts_with(b"---") || line.starts_with(b"..."))
        && matches!(line.get(3), None | Some(b' ' | b'\n'))
}

/// A sequence entry's dash, followed by a space or the line's end.
fn is_dash(line: &[u8]) -> bool {
    line.first() == Some(&b'-') && matches!(line.get(1), None | Some(b' ' | b'\n'))
}

/// Where a plain key ends on `line` (its `:` followed by a space or the
/// line's end), when the line is a mapping entry.
fn key_end(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    (0..bytes.len())
        .find(|&i| bytes[i] == b':' && matches!(bytes.get(i + 1), None | Some(b' ')) && i > 0)
}

/// Whether a plain scalar may start as `value` does (no indicator of
/// other syntax).
fn plain_start(value: &str) -> bool {
    match value.as_bytes() {
        [] => false,
        [b'-' | b'?' | b':', next, ..] => *next != b' ' && value.as_bytes()[0] == b'-',
        [b'-' | b'?' | b':'] => false,
        [first, ..] => !b",[]{}#&*!|>'\"%@`".contains(first),
    }
}

/// What a plain scalar resolves to.
enum Plain {
    Str,
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
}

/// A plain scalar's type as the general reader resolves it, for the
/// spellings kubectl writes; any other spelling that could be read as
/// something else than a string (YAML 1.1 booleans, floats, octal, hex,
/// sexagesimal, `Null`) is refused.
fn resolve(value: &str) -> Result<Plain> {
    match value {
        "null" | "~" => return Ok(Plain::Null),
        "true" => return Ok(Plain::Bool(true)),
        "false" => return Ok(Plain::Bool(false)),
        _ => {}
    }
    // Without allocating: most scalars are longer than any of these words.
    let unsigned = value.trim_start_matches(['+', '-']);
    let spelled = |words: &[&str], text: &str| words.iter().any(|w| text.eq_ignore_ascii_case(w));
    if spelled(
        &["y", "n", "yes", "no", "on", "off", "true", "false", "null"],
        value,
    ) || spelled(
        &["inf", ".inf", "infinity", "nan", ".nan", "infinite"],
        unsigned,
    ) {
        return Err(Refused);
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = |s: &str| s.len() > 1 && s.starts_with('0');
    if digits(value) {
        if leading_zero(value) {
            return Err(Refused);
        }
        return value.parse().map(Plain::U64).map_err(|_| Refused);
    }
    if let Some(magnitude) = value.strip_prefix('-')
        && digits(magnitude)
    {
        if leading_zero(magnitude) {
            return Err(Refused);
        }
        return value.parse().map(Plain::I64).map_err(|_| Refused);
    }
    let numeric_start = matches!(value.as_bytes()[0], b'0'..=b'9' | b'.' | b'+' | b'-');
    if !numeric_start {
        return Ok(Plain::Str);
    }
    // Digits and dots with two dots or more (an IPv4 address) are no
    // number; nor is anything holding a character no number spelling has,
    // or an IPv6 address (colons with hexadecimal letters).
    let bytes = value.as_bytes();
    let dots = bytes.iter().filter(|&&b| b == b'.').count();
    if dots >= 2 && bytes.iter().all(|&b| b.is_ascii_digit() || b == b'.') {
        return Ok(Plain::Str);
    }
    let numeric = |b: u8| b.is_ascii_hexdigit() || b"._+-:xXoO".contains(&b);
    if !bytes.iter().all(|&b| numeric(b)) {
        return Ok(Plain::Str);
    }
    if bytes.contains(&b':')
        && bytes.iter().any(|b| b.is_ascii_alphabetic())
        && bytes.iter().all(|&b| b.is_ascii_hexdigit() || b == b':')
    {
        return Ok(Plain::Str);
    }
    Err(Refused)
}

/// A double- or single-quoted scalar (`quote`) on one line, from just past
/// its opening quote: its value and the offset past its closing quote.
fn quoted(text: &str, from: usize, quote: u8) -> Result<(Cow<'_, str>, usize)> {
    let bytes = text.as_bytes();
    let mut at = from;
    let mut owned: Option<String> = None;
    let mut run = from;
    loop {
        match bytes.get(at) {
            None | Some(b'\n') => return Err(Refused),
            // `''` is a quote in a single-quoted scalar.
            Some(b'\'') if quote == b'\'' && bytes.get(at + 1) == Some(&b'\'') => {
                owned
                    .get_or_insert_with(String::new)
                    .push_str(&text[run..=at]);
                at += 2;
                run = at;
            }
            Some(&b) if b == quote => {
                let value = match owned {
                    Some(mut owned) => {
                        owned.push_str(&text[run..at]);
                        Cow::Owned(owned)
                    }
                    None => Cow::Borrowed(&text[from..at]),
                };
                return Ok((value, at + 1));
            }
            Some(b'\\') if quote == b'"' => {
                let owned = owned.get_or_insert_with(String::new);
                owned.push_str(&text[run..at]);
                let (c, after) = escaped(text, at + 1)?;
                owned.push(c);
                at = after;
                run = at;
            }
            Some(_) => at += 1,
        }
    }
}

/// The character a double-quoted scalar's escape at `at` (past its
/// backslash) stands for, and the offset past it.
fn escaped(text: &str, at: usize) -> Result<(char, usize)> {
    let escape = *text.as_bytes().get(at).ok_or(Refused)?;
    let simple = match escape {
        b'0' => '\0',
        b'a' => '\x07',
        b'b' => '\x08',
        b't' | b'\t' => '\t',
        b'n' => '\n',
        b'v' => '\x0b',
        b'f' => '\x0c',
        b'r' => '\r',
        b'e' => '\x1b',
        b' ' => ' ',
        b'"' => '"',
        b'/' => '/',
        b'\\' => '\\',
        b'N' => '\u{85}',
        b'_' => '\u{a0}',
        b'L' => '\u{2028}',
        b'P' => '\u{2029}',
        b'x' | b'u' | b'U' => {
            let n = match escape {
                b'x' => 2,
                b'u' => 4,
                _ => 8,
            };
            let digits = text.get(at + 1..at + 1 + n).ok_or(Refused)?;
            if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Refused);
            }
            let code = u32::from_str_radix(digits, 16).map_err(|_| Refused)?;
            return Ok((char::from_u32(code).ok_or(Refused)?, at + 1 + n));
        }
        _ => return Err(Refused),
    };
    Ok((simple, at + 1))
}

/// Where a node is: what its lines must be indented more than.
#[derive(Clone, Copy)]
enum Context {
    /// A mapping value, its key at this column.
    Value { key: usize },
    /// A sequence entry, its dash at this column.
    Item { dash: usize },
}

impl Context {
    fn parent(self) -> usize {
        match self {
            Context::Value { key: column } | Context::Item { dash: column } => column,
        }
    }
}

/// A node, as far as its first token tells.
enum Start<'a> {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    Str(Cow<'a, str>),
    String(String),
    EmptyMap,
    EmptySeq,
    /// A block mapping at `column`; `inline` when its first key is on the
    /// line the reader is at (after a dash).
    Map {
        column: usize,
        inline: bool,
    },
    Seq {
        column: usize,
    },
}

/// A node for serde: the reader at it, where it is, and its start once read.
struct Node<'r, 'a> {
    reader: &'r mut Reader<'a>,
    context: Context,
    start: Option<Start<'a>>,
}

impl<'r, 'a> Node<'r, 'a> {
    fn at(reader: &'r mut Reader<'a>, context: Context) -> Self {
        Node {
            reader,
            context,
            start: None,
        }
    }

    fn start(&mut self) -> Result<Start<'a>> {
        match self.start.take() {
            Some(start) => Ok(start),
            None => self.reader.node(self.context),
        }
    }
}

impl<'de> Deserializer<'de> for Node<'_, 'de> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
        let start = self.start()?;
        visit(self.reader, start, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value> {
        match self.start()? {
            Start::Null => visitor.visit_none(),
            start => visitor.visit_some(Node {
                start: Some(start),
                ..self
            }),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        mut self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let start = self.start()?;
        enum_from(start, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    read_the_rest_as_any!();
}

/// Kubernetes enumerations are strings, as for the general reader.
fn enum_from<'de, V: Visitor<'de>>(start: Start<'de>, visitor: V) -> Result<V::Value> {
    match start {
        Start::Str(s) => visit_enum(s, visitor),
        Start::String(s) => visit_enum(Cow::Owned(s), visitor),
        _ => Err(Refused),
    }
}

fn visit<'de, V: Visitor<'de>>(
    reader: &mut Reader<'de>,
    start: Start<'de>,
    visitor: V,
) -> Result<V::Value> {
    match start {
        Start::Null => visitor.visit_unit(),
        Start::Bool(b) => visitor.visit_bool(b),
        Start::U64(u) => visitor.visit_u64(u),
        Start::I64(i) => visitor.visit_i64(i),
        Start::Str(Cow::Borrowed(s)) => visitor.visit_borrowed_str(s),
        Start::Str(Cow::Owned(s)) | Start::String(s) => visitor.visit_string(s),
        Start::EmptyMap => visitor.visit_map(de::value::MapDeserializer::<
            std::iter::Empty<((), ())>,
            Refused,
        >::new(std::iter::empty())),
        Start::EmptySeq => visitor.visit_seq(de::value::SeqDeserializer::<
            std::iter::Empty<()>,
            Refused,
        >::new(std::iter::empty())),
        Start::Map { column, inline } => {
            reader.enter()?;
            let value = visitor.visit_map(BlockMap {
                reader: &mut *reader,
                column,
                inline,
            })?;
            reader.depth -= 1;
            Ok(value)
        }
        Start::Seq { column } => {
            reader.enter()?;
            let value = visitor.visit_seq(BlockSeq {
                reader: &mut *reader,
                column,
            })?;
            reader.depth -= 1;
            Ok(value)
        }
    }
}

/// A block mapping's entries, each key at `column`.
struct BlockMap<'r, 'a> {
    reader: &'r mut Reader<'a>,
    column: usize,
    /// The first key is where the reader is, after a dash.
    inline: bool,
}

impl<'a> BlockMap<'_, 'a> {
    /// The next key, the reader just past its `:`; `None` past the last.
    fn key(&mut self) -> Result<Option<Cow<'a, str>>> {
        let reader = &mut *self.reader;
        if self.inline {
            self.inline = false;
        } else {
            let Some(line) = reader.content_line()? else {
                return Ok(None);
            };
            if line.indent < self.column {
                reader.at = line.start;
                return Ok(None);
            }
            if line.indent > self.column {
                return Err(Refused);
            }
            reader.at = line.start + line.indent;
        }
        let text = reader.text;
        let bytes = text.as_bytes();
        let end = reader.line_end(reader.at);
        let (key, after) = match bytes.get(reader.at) {
            Some(b'"') => quoted(text, reader.at + 1, b'"')?,
            Some(b'\'') => quoted(text, reader.at + 1, b'\'')?,
            _ => {
                let line = &text[reader.at..end];
                let colon = key_end(line).ok_or(Refused)?;
                let key = line[..colon].trim_end_matches(' ');
                if !plain_start(key) || key.contains(" #") || !matches!(resolve(key)?, Plain::Str) {
                    return Err(Refused);
                }
                (Cow::Borrowed(key), reader.at + colon)
            }
        };
        if bytes.get(after) != Some(&b':')
            || !matches!(bytes.get(after + 1), None | Some(b' ' | b'\n'))
        {
            return Err(Refused);
        }
        reader.at = after + 1;
        Ok(Some(key))
    }
}

impl<'de> MapAccess<'de> for BlockMap<'_, 'de> {
    type Error = Refused;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        match self.key()? {
            None => Ok(None),
            Some(key) => deserialize_key(seed, key).map(Some),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(Node::at(
            &mut *self.reader,
            Context::Value { key: self.column },
        ))
    }
}

/// A block sequence's entries, each dash at `column`.
struct BlockSeq<'r, 'a> {
    reader: &'r mut Reader<'a>,
    column: usize,
}

impl BlockSeq<'_, '_> {
    /// Moves the reader past the next entry's dash; `false` past the last.
    fn next_entry(&mut self) -> Result<bool> {
        let reader = &mut *self.reader;
        let Some(line) = reader.content_line()? else {
            return Ok(false);
        };
        if line.indent > self.column {
            return Err(Refused);
        }
        let at = line.start + line.indent;
        if line.indent < self.column || !is_dash(&reader.bytes()[at..]) {
            reader.at = line.start;
            return Ok(false);
        }
        reader.at = at + 1;
        Ok(true)
    }
}

impl<'de> SeqAccess<'de> for BlockSeq<'_, 'de> {
    type Error = Refused;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if !self.next_entry()? {
            return Ok(None);
        }
        seed.deserialize(Node::at(
            &mut *self.reader,
            Context::Item { dash: self.column },
        ))
        .map(Some)
    }
}

/// What one text's documents give, in order.
struct Document<'p, 'a> {
    path: &'p Path,
    text: &'a str,
    lines: LineCursor,
    objects: Vec<(Object, Position)>,
}

/// A List's item whose object is read later: by the general reader, once
/// the List's kind (which kubectl writes after the items) is known.
struct Later {
    /// The item's text: from its dash's line to its end.
    text: std::ops::Range<usize>,
    lines_before: usize,
    dash: usize,
    /// Where its objects go among the List's.
    index: usize,
}

/// A List's items so far: each read, or left for later.
type Items = Vec<Option<(Object, Position)>>;

impl<'a> Document<'_, 'a> {
    /// Reads the document whose root mapping starts at `line`.
    fn read_root(&mut self, reader: &mut Reader<'a>, line: ContentLine) -> Result<()> {
        let root_at = line.start;
        let position = Position::after(&mut self.lines, self.text, root_at);
        reader.at = root_at;
        let mut map = BlockMap {
            reader,
            column: 0,
            inline: true,
        };
        let mut keys = Keys::default();
        let (mut api_version, mut kind) = (None, None);
        let mut lean: Option<LeanObject> = None;
        let mut items: Option<Items> = None;
        let mut later = Vec::new();
        let mut decided = false;
        while let Some(key) = map.key()? {
            match (&mut lean, key.as_ref()) {
                (Some(lean), _) => lean.field(&key, &mut map)?,
                (None, "apiVersion") => api_version = map.next_value::<Option<Key>>()?.map(|k| k.0),
                (None, "kind") => kind = map.next_value::<Option<Key>>()?.map(|k| k.0),
                (None, "items") => items = Some(self.items(&mut map, &mut later)?),
                (None, _) => {
                    // At the first other key, apiVersion and kind first
                    // decide a lean form, as in `direct.rs`.
                    if !decided && items.is_none() {
                        lean = named(&api_version)
                            .zip(named(&kind))
                            .and_then(|(api_version, kind)| LeanObject::of(api_version, kind));
                    }
                    decided = true;
                    match &mut lean {
                        Some(lean) => lean.field(&key, &mut map)?,
                        None => {
                            map.next_value::<Unique>()?;
                        }
                    }
                }
            }
            keys.insert::<Refused>(key)?;
        }
        let root_end = map.reader.at;
        if let Some(lean) = lean {
            let object = lean.into_object(self.source(position)).ok_or(Refused)?;
            self.objects.push((object, position));
            return Ok(());
        }
        let (Some(api_version), Some(kind)) = (named(&api_version), named(&kind)) else {
            return Err(Refused);
        };
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
        match (kind, item_kind, items) {
            ("List", _, Some(items)) => self.list(items, later, None),
            (_, Some(item_kind), Some(items)) => {
                self.list(items, later, Some((api_version, item_kind)))
            }
            // An object without a lean form: the general reader reads the
            // document. (A List without items is a problem it reports.)
            (kind, _, _) if kind != "List" => {
                let found =
                    self.general(&self.text[root_at..root_end], position.line - 1, 0, None)?;
                self.objects.extend(found);
                Ok(())
            }
            _ => Err(Refused),
        }
    }

    /// The items of a List, each read into its lean form where its own
    /// apiVersion and kind come first, else left for later.
    fn items(&mut self, map: &mut BlockMap<'_, 'a>, later: &mut Vec<Later>) -> Result<Items> {
        let reader = &mut *map.reader;
        let mut read = Vec::new();
        let column = match reader.node(Context::Value { key: 0 })? {
            Start::Null | Start::EmptySeq => return Ok(read),
            Start::Seq { column } => column,
            _ => return Err(Refused),
        };
        let mut seq = BlockSeq { reader, column };
        while seq.next_entry()? {
            let dash_at = seq.reader.at - 1;
            let bytes = seq.reader.bytes();
            // The general reader places the item's mapping at its first
            // key: kubectl writes it on the dash's line.
            let first = dash_at
                + 1
                + bytes[dash_at + 1..]
                    .iter()
                    .take_while(|&&b| b == b' ')
                    .count();
            if matches!(bytes.get(first), None | Some(b'\n')) {
                return Err(Refused);
            }
            let position = Position::after(&mut self.lines, self.text, first);
            let node = Node::at(&mut *seq.reader, Context::Item { dash: column });
            match OnePass(None).deserialize(node)? {
                Some(lean) => {
                    let object = lean.into_object(self.source(position)).ok_or(Refused)?;
                    read.push(Some((object, position)));
                }
                None => {
                    later.push(Later {
                        text: dash_at - column..seq.reader.at,
                        lines_before: position.line - 1,
                        dash: column,
                        index: read.len(),
                    });
                    read.push(None);
                }
            }
        }
        Ok(read)
    }

    /// A List's objects in order, those left for later read by the general
    /// reader with what the List gives them.
    fn list(
        &mut self,
        items: Vec<Option<(Object, Position)>>,
        later: Vec<Later>,
        inherited: Option<(&str, &str)>,
    ) -> Result<()> {
        let mut found: Vec<Vec<(Object, Position)>> = Vec::new();
        for item in &later {
            found.push(self.general(
                &self.text[item.text.clone()],
                item.lines_before,
                item.dash + 1,
                inherited,
            )?);
        }
        let mut found = later.iter().map(|l| l.index).zip(found).peekable();
        for (index, item) in items.into_iter().enumerate() {
            match item {
                Some(read) => self.objects.push(read),
                None => {
                    let (_, objects) = found.next().filter(|(i, _)| *i == index).ok_or(Refused)?;
                    self.objects.extend(objects);
                }
            }
        }
        Ok(())
    }

    /// The objects of `piece` (a document, or a List's item whose dash is
    /// blanked at `dash`, when not 0), read by the general reader; refused
    /// at any issue.
    fn general(
        &self,
        piece: &str,
        lines_before: usize,
        dash: usize,
        inherited: Option<(&str, &str)>,
    ) -> Result<Vec<(Object, Position)>> {
        let piece = match dash {
            0 => Cow::Borrowed(piece),
            dash => {
                let mut blanked = piece.to_owned();
                blanked.replace_range(dash - 1..dash, " ");
                Cow::Owned(blanked)
            }
        };
        let (documents, issues) = parse_yaml_from(&piece, lines_before);
        let [document] = documents.as_slice() else {
            return Err(Refused);
        };
        if !issues.is_empty() {
            return Err(Refused);
        }
        let mut found: Vec<Found> = Vec::new();
        let mut issues = Vec::new();
        objects_in(document, inherited, &mut found, &mut issues);
        if !issues.is_empty() {
            return Err(Refused);
        }
        let mut objects = Vec::new();
        for found in found {
            let position = found.value.position;
            let (object, issues) = read_object(
                found.value,
                &found.api_version,
                &found.kind,
                self.source(position),
            );
            match object {
                Some(object) if issues.is_empty() => objects.push((object, position)),
                _ => return Err(Refused),
            }
        }
        Ok(objects)
    }

    fn source(&self, position: Position) -> ObjectSource {
        ObjectSource {
            file: self.path.to_path_buf(),
            line: position.line,
        }
    }
}

/// A non-empty name; empty and null count as absent, as for the general reader.
fn named<'n>(name: &'n Option<Cow<'_, str>>) -> Option<&'n str> {
    name.as_deref().filter(|name| !name.is_empty())
}

/// `Deserialize` of a whole root value, for the tests.
#[cfg(test)]
fn value_of<'a, T: serde::Deserialize<'a>>(text: &'a str) -> Result<T> {
    let mut reader = Reader {
        text,
        at: 0,
        depth: 0,
    };
    let line = reader.document_start()?.ok_or(Refused)?;
    reader.at = line.start;
    T::deserialize(Node {
        reader: &mut reader,
        context: Context::Value { key: 0 },
        start: Some(Start::Map {
            column: 0,
            inline: true,
        }),
    })
}

#[cfg(test)]
mod tests;
