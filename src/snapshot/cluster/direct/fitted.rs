//! JSON as kubectl and the collector write it, read by a deserializer
//! fitted to it: indented with runs of spaces, skipped eight bytes at a
//! time, and strings scanned eight bytes at a time for their end.
//!
//! serde_json skips whitespace a byte at a time. A pretty-printed pod is
//! about half indentation, and on a 150,000-pod List that skipping was a
//! seventh of the whole load.
//!
//! This reader takes standard JSON, within limits: nesting at most
//! [`MAX_DEPTH`] deep, and no lone surrogate in a `\u` escape. Anything
//! outside them, and any syntax error, refuses ([`Refused`]): `list.rs`
//! then hands the file to the general way, serde_json, which reads every
//! JSON and positions every problem. Where this reader takes a text it
//! gives the visitors what serde_json gives them, number for number (`-0`
//! and integers out of range as floats, as serde_json does), so it changes
//! how fast a file is read, never what is read.

use std::borrow::Cow;

use serde::de::{Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::super::wire::{Refused, deserialize_key, read_the_rest_as_any, visit_enum};

/// Nesting deeper than this is left to serde_json (which takes 127 levels).
const MAX_DEPTH: usize = 64;

type Result<T> = std::result::Result<T, Refused>;

/// The value of type `T` starting at `at` (after any whitespace), and the
/// offset just past it; `None` when it is not one, is refused, or is a
/// scalar other than a string.
pub(in crate::snapshot::cluster) fn value_end<'de, T: Deserialize<'de>>(
    text: &'de str,
    at: usize,
) -> Option<(T, usize)> {
    let mut reader = Reader { text, at, depth: 0 };
    // serde_json checks what follows a scalar alone (not a string); a
    // List's item or a key is never one.
    if !matches!(reader.peek().ok()?, b'{' | b'[' | b'"') {
        return None;
    }
    let value = T::deserialize(Value(&mut reader)).ok()?;
    Some((value, reader.at))
}

const ONES: u64 = u64::from_ne_bytes([1; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);

/// The first offset from `at` that is not JSON whitespace.
pub(in crate::snapshot::cluster) fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    loop {
        if let Some(word) = bytes.get(at..at + 8)
            && u64::from_ne_bytes(word.try_into().unwrap_or_default()) == SPACES
        {
            at += 8;
            continue;
        }
        match bytes.get(at) {
            Some(b' ' | b'\t' | b'\n' | b'\r') => at += 1,
            _ => return at,
        }
    }
}

/// The first offset from `at` of a `"`, a `\` or a control character (which
/// a JSON string may not hold raw).
fn string_stop(bytes: &[u8], mut at: usize) -> Option<usize> {
    /// The bytes of `word` that are zero, as high bits; the lowest one set
    /// is exact (a borrow only reaches the bytes above a zero).
    fn zeros(word: u64) -> u64 {
        word.wrapping_sub(ONES) & !word & HIGHS
    }
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let stops = zeros(word ^ (ONES * u64::from(b'"')))
            | zeros(word ^ (ONES * u64::from(b'\\')))
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGHS);
        if stops != 0 {
            return Some(at + (stops.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = bytes.get(at..)?;
    rest.iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|stop| at + stop)
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

/// A scalar's value, as serde_json hands it to a visitor.
enum Number {
    U64(u64),
    I64(i64),
    F64(f64),
}

impl<'a> Reader<'a> {
    /// The next byte that is not whitespace, not consumed.
    fn peek(&mut self) -> Result<u8> {
        self.at = skip_whitespace(self.text.as_bytes(), self.at);
        self.text.as_bytes().get(self.at).copied().ok_or(Refused)
    }

    /// Consumes `expected`, the next byte that is not whitespace.
    fn expect(&mut self, expected: u8) -> Result<()> {
        if self.peek()? != expected {
            return Err(Refused);
        }
        self.at += 1;
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Result<()> {
        if !self.text[self.at..].starts_with(word) {
            return Err(Refused);
        }
        self.at += word.len();
        Ok(())
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Refused);
        }
        self.at += 1;
        Ok(())
    }

    /// The string whose opening quote is at `self.at`: borrowed from the
    /// text when it has no escape.
    fn string(&mut self) -> Result<Cow<'a, str>> {
        let bytes = self.text.as_bytes();
        let start = self.at + 1;
        let mut stop = string_stop(bytes, start).ok_or(Refused)?;
        if bytes[stop] == b'"' {
            self.at = stop + 1;
            return Ok(Cow::Borrowed(&self.text[start..stop]));
        }
        let mut owned = String::with_capacity(stop - start + 16);
        let mut from = start;
        loop {
            // Every stop is ASCII: a char boundary.
            owned.push_str(&self.text[from..stop]);
            match bytes[stop] {
                b'"' => {
                    self.at = stop + 1;
                    return Ok(Cow::Owned(owned));
                }
                b'\\' => {
                    let (escaped, after) = escape(bytes, stop + 1)?;
                    owned.push(escaped);
                    from = after;
                }
                _ => return Err(Refused),
            }
            stop = string_stop(bytes, from).ok_or(Refused)?;
        }
    }

    /// The number at `self.at`, by JSON's grammar.
    fn number(&mut self) -> Result<Number> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        let negative = bytes[start] == b'-';
        let mut at = start + usize::from(negative);
        let digits = |at: usize| {
            bytes[at..]
                .iter()
                .position(|b| !b.is_ascii_digit())
                .map_or(bytes.len(), |end| at + end)
        };
        let integer_end = match bytes.get(at) {
            Some(b'0') => at + 1,
            Some(b'1'..=b'9') => digits(at),
            _ => return Err(Refused),
        };
        let integer = &self.text[at..integer_end];
        at = integer_end;
        let mut float = false;
        if bytes.get(at) == Some(&b'.') {
            let end = digits(at + 1);
            if end == at + 1 {
                return Err(Refused);
            }
            (at, float) = (end, true);
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            let end = digits(at);
            if end == at {
                return Err(Refused);
            }
            (at, float) = (end, true);
        }
        self.at = at;
        let as_float = || {
            let value: f64 = self.text[start..at].parse().map_err(|_| Refused)?;
            // serde_json refuses a number out of f64's range.
            value
                .is_finite()
                .then_some(Number::F64(value))
                .ok_or(Refused)
        };
        if float {
            return as_float();
        }
        // As serde_json: an integer out of range, and -0, are floats.
        let Ok(significand) = integer.parse::<u64>() else {
            return as_float();
        };
        if !negative {
            return Ok(Number::U64(significand));
        }
        let negated = (significand as i64).wrapping_neg();
        Ok(if negated >= 0 {
            Number::F64(-(significand as f64))
        } else {
            Number::I64(negated)
        })
    }
}

/// The character the escape at `at` (past its backslash) stands for, and
/// the offset past it.
fn escape(bytes: &[u8], at: usize) -> Result<(char, usize)> {
    let simple = match *bytes.get(at).ok_or(Refused)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\x08',
        b'f' => '\x0c',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let unit = hex4(bytes, at + 1)?;
            let after = at + 5;
            return match unit {
                0xD800..=0xDBFF => {
                    if bytes.get(after..after + 2) != Some(b"\\u") {
                        return Err(Refused);
                    }
                    let low = hex4(bytes, after + 2)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return Err(Refused);
                    }
                    let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    Ok((char::from_u32(code).ok_or(Refused)?, after + 6))
                }
                _ => Ok((char::from_u32(unit).ok_or(Refused)?, after)),
            };
        }
        _ => return Err(Refused),
    };
    Ok((simple, at + 1))
}

fn hex4(bytes: &[u8], at: usize) -> Result<u32> {
    let digits = bytes.get(at..at + 4).ok_or(Refused)?;
    digits.iter().try_fold(0, |code, &digit| {
        let value = char::from(digit).to_digit(16).ok_or(Refused)?;
        Ok(code * 16 + value)
    })
}

/// The value at the reader's offset.
struct Value<'r, 'a>(&'r mut Reader<'a>);

impl<'de> Deserializer<'de> for Value<'_, 'de> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let reader = self.0;
        match reader.peek()? {
            b'n' => {
                reader.literal("null")?;
                visitor.visit_unit()
            }
            b't' => {
                reader.literal("true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                reader.literal("false")?;
                visitor.visit_bool(false)
            }
            b'"' => match reader.string()? {
                Cow::Borrowed(s) => visitor.visit_borrowed_str(s),
                Cow::Owned(s) => visitor.visit_string(s),
            },
            b'-' | b'0'..=b'9' => match reader.number()? {
                Number::U64(u) => visitor.visit_u64(u),
                Number::I64(i) => visitor.visit_i64(i),
                Number::F64(f) => visitor.visit_f64(f),
            },
            open @ (b'[' | b'{') => {
                reader.enter()?;
                let mut entries = Entries {
                    reader: &mut *reader,
                    first: true,
                    done: false,
                };
                let value = if open == b'[' {
                    visitor.visit_seq(&mut entries)
                } else {
                    visitor.visit_map(&mut entries)
                }?;
                // serde_json refuses a sequence or a mapping its visitor
                // left unread.
                if !entries.done {
                    return Err(Refused);
                }
                reader.depth -= 1;
                Ok(value)
            }
            _ => Err(Refused),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.0.peek()? == b'n' {
            self.0.literal("null")?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        if self.0.peek()? != b'"' {
            return Err(Refused);
        }
        visit_enum(self.0.string()?, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        // serde_json's RawValue is a newtype it treats apart: left to it.
        if name.starts_with("$serde_json") {
            return Err(Refused);
        }
        visitor.visit_newtype_struct(self)
    }

    read_the_rest_as_any!();
}

/// A sequence's elements or a mapping's entries; `done` once its `]` or
/// `}` is read.
struct Entries<'r, 'a> {
    reader: &'r mut Reader<'a>,
    first: bool,
    done: bool,
}

impl Entries<'_, '_> {
    /// Whether another element or entry follows: `false` once `close` is
    /// read (and after), else past the comma before it.
    fn another(&mut self, close: u8) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        if self.reader.peek()? == close {
            self.reader.at += 1;
            self.done = true;
            return Ok(false);
        }
        if !std::mem::take(&mut self.first) {
            self.reader.expect(b',')?;
            // `[1,]` and `{"a":1,}` are not JSON.
            if self.reader.peek()? == close {
                return Err(Refused);
            }
        }
        Ok(true)
    }
}

impl<'de> SeqAccess<'de> for &mut Entries<'_, 'de> {
    type Error = Refused;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if !self.another(b']')? {
            return Ok(None);
        }
        seed.deserialize(Value(&mut *self.reader)).map(Some)
    }
}

impl<'de> MapAccess<'de> for &mut Entries<'_, 'de> {
    type Error = Refused;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if !self.another(b'}')? {
            return Ok(None);
        }
        if self.reader.peek()? != b'"' {
            return Err(Refused);
        }
        let key = deserialize_key(seed, self.reader.string()?)?;
        self.reader.expect(b':')?;
        Ok(Some(key))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(Value(&mut *self.reader))
    }
}

#[cfg(test)]
mod tests;
