//! `pack.yaml` and `expect.yaml` as a tree whose every key and value knows
//! where it was written, and a reader over it that collects every problem
//! instead of stopping at the first.
//!
//! serde's derive stops at the first wrong field of a document; a pack author
//! wants to see every mistake of a manifest at once. So the YAML is read with
//! serde-saphyr into this tree (keys keep their own spans, so that an unknown
//! field points at its key), and [`Fields`] reads typed values out of it,
//! reporting unknown keys and wrong types as it goes.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use crate::snapshot::problem::ParseIssue;

/// 1-based line and column of a key or value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    pub fn issue(self, message: impl Into<String>) -> ParseIssue {
        ParseIssue::at(self.line.max(1), self.column.max(1), message)
    }
}

/// A YAML value and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    Seq(Vec<Node>),
    /// Entries in the order written, each key with its own position.
    Map(Vec<(Key, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub pos: Pos,
    pub name: String,
}

impl Value {
    /// How the value is called in a message about a wrong type.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "nothing",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::String(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// Parses one YAML document. A syntax error is one issue at its position.
pub fn parse(text: &str) -> Result<Node, ParseIssue> {
    let options = serde_saphyr::options! { with_snippet: false };
    match serde_saphyr::from_str_with_options::<SpannedNode>(text, options) {
        Ok(SpannedNode(node)) => Ok(node),
        Err(error) => {
            let message = crate::snapshot::problem::yaml_message(&error);
            Err(match error.location() {
                Some(at) if at.line() > 0 => Pos {
                    line: to_usize(at.line()),
                    column: to_usize(at.column()),
                }
                .issue(message),
                _ => ParseIssue::at_line(1, message),
            })
        }
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn pos_of(location: serde_saphyr::Location) -> Pos {
    Pos {
        line: to_usize(location.line()),
        column: to_usize(location.column()),
    }
}

struct SpannedNode(Node);
struct RawValue(Value);
struct SpannedKey(Key);

impl<'de> de::Deserialize<'de> for SpannedNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<RawValue>::deserialize(deserializer)?;
        Ok(SpannedNode(Node {
            pos: pos_of(spanned.referenced),
            value: spanned.value.0,
        }))
    }
}

impl<'de> de::Deserialize<'de> for SpannedKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<String>::deserialize(deserializer)?;
        Ok(SpannedKey(Key {
            pos: pos_of(spanned.referenced),
            name: spanned.value,
        }))
    }
}

impl<'de> de::Deserialize<'de> for RawValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(ValueVisitor(PhantomData))
            .map(RawValue)
    }
}

struct ValueVisitor(PhantomData<()>);

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| E::custom(format_args!("{v} is too large (at most {})", i64::MAX)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(SpannedNode(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries: Vec<(Key, Node)> = Vec::new();
        while let Some(SpannedKey(key)) = map.next_key()? {
            if entries.iter().any(|(k, _)| k.name == key.name) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}` at line {}",
                    key.name, key.pos.line
                )));
            }
            let SpannedNode(value) = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Value::Map(entries))
    }
}

/// Where the problems of one file are collected while it is read.
#[derive(Debug, Default)]
pub struct Issues(pub Vec<ParseIssue>);

impl Issues {
    pub fn push(&mut self, issue: ParseIssue) {
        self.0.push(issue);
    }
}

/// Reads the fields of one mapping: each field is taken at most once, and
/// [`Fields::finish`] reports every key that no one took as unknown, at the key.
pub struct Fields<'a> {
    entries: &'a [(Key, Node)],
    taken: Vec<bool>,
    /// What the mapping is, for messages: "check", "parameter mtu".
    what: String,
    pub pos: Pos,
}

impl<'a> Fields<'a> {
    /// The fields of `node`; `None` (and an issue) when it is not a mapping.
    pub fn of(node: &'a Node, what: impl Into<String>, issues: &mut Issues) -> Option<Self> {
        let what = what.into();
        match &node.value {
            Value::Map(entries) => Some(Fields {
                entries,
                taken: vec![false; entries.len()],
                what,
                pos: node.pos,
            }),
            other => {
                issues.push(
                    node.pos
                        .issue(format!("{what} must be a mapping, found {}", other.kind())),
                );
                None
            }
        }
    }

    /// The value of `key`, marking it as taken.
    pub fn take(&mut self, key: &str) -> Option<&'a Node> {
        let index = self.entries.iter().position(|(k, _)| k.name == key)?;
        if let Some(taken) = self.taken.get_mut(index) {
            *taken = true;
        }
        self.entries.get(index).map(|(_, node)| node)
    }

    /// A field that must be there.
    pub fn require(&mut self, key: &str, issues: &mut Issues) -> Option<&'a Node> {
        let node = self.take(key);
        if node.is_none() {
            issues.push(
                self.pos
                    .issue(format!("{} is missing the field `{key}`", self.what)),
            );
        }
        node
    }

    pub fn string(&mut self, key: &str, issues: &mut Issues) -> Option<At<String>> {
        self.take(key).and_then(|node| string(node, key, issues))
    }

    pub fn required_string(&mut self, key: &str, issues: &mut Issues) -> Option<At<String>> {
        self.require(key, issues)
            .and_then(|node| string(node, key, issues))
    }

    pub fn strings(&mut self, key: &str, issues: &mut Issues) -> Vec<At<String>> {
        match self.take(key) {
            None => Vec::new(),
            Some(node) => seq(node, key, issues)
                .iter()
                .filter_map(|item| string(item, key, issues))
                .collect(),
        }
    }

    pub fn bool(&mut self, key: &str, issues: &mut Issues) -> Option<bool> {
        match &self.take(key)?.value {
            Value::Bool(b) => Some(*b),
            other => {
                let pos = self.entries.iter().find(|(k, _)| k.name == key)?.1.pos;
                issues.push(pos.issue(format!(
                    "`{key}` must be true or false, found {}",
                    other.kind()
                )));
                None
            }
        }
    }

    /// Every key of the mapping, taken (for maps keyed by name: parameters, modes, hooks).
    pub fn all(&mut self) -> impl Iterator<Item = &'a (Key, Node)> {
        self.taken.iter_mut().for_each(|t| *t = true);
        self.entries.iter()
    }

    /// Reports every key nobody took.
    pub fn finish(self, issues: &mut Issues) {
        for ((key, _), taken) in self.entries.iter().zip(&self.taken) {
            if !taken {
                issues.push(
                    key.pos
                        .issue(format!("unknown field `{}` in {}", key.name, self.what)),
                );
            }
        }
    }
}

/// A value read from the tree and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct At<T> {
    pub value: T,
    pub pos: Pos,
}

/// The items of a list; an issue and nothing when `node` is not one.
pub fn seq<'a>(node: &'a Node, key: &str, issues: &mut Issues) -> &'a [Node] {
    match &node.value {
        Value::Seq(items) => items,
        Value::Null => &[],
        other => {
            issues.push(
                node.pos
                    .issue(format!("`{key}` must be a list, found {}", other.kind())),
            );
            &[]
        }
    }
}

/// A string; numbers and booleans are not silently turned into strings.
pub fn string(node: &Node, key: &str, issues: &mut Issues) -> Option<At<String>> {
    match &node.value {
        Value::String(s) => Some(At {
            value: s.clone(),
            pos: node.pos,
        }),
        other => {
            issues.push(
                node.pos
                    .issue(format!("`{key}` must be a string, found {}", other.kind())),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_keep_their_positions() {
        let node = parse("name: demo\nchecks:\n  - id: x\n    severity: info\n").expect("yaml");
        let Value::Map(entries) = &node.value else {
            panic!("a map")
        };
        assert_eq!(entries[1].0.pos, Pos { line: 2, column: 1 });
        let Value::Seq(items) = &entries[1].1.value else {
            panic!("a list")
        };
        let Value::Map(check) = &items[0].value else {
            panic!("a map")
        };
        assert_eq!(check[1].0.pos, Pos { line: 4, column: 5 });
        assert_eq!(
            check[1].1.pos,
            Pos {
                line: 4,
                column: 15
            }
        );
    }

    #[test]
    fn unknown_and_missing_fields_are_all_reported() {
        let node = parse("name: demo\nsevrity: info\ncolour: red\n").expect("yaml");
        let mut issues = Issues::default();
        let mut fields = Fields::of(&node, "check", &mut issues).expect("a map");
        fields.string("name", &mut issues);
        fields.required_string("id", &mut issues);
        fields.finish(&mut issues);
        let messages: Vec<String> = issues
            .0
            .iter()
            .map(|i| format!("{}:{}: {}", i.line, i.column.unwrap_or(0), i.message))
            .collect();
        assert_eq!(
            messages,
            [
                "1:1: check is missing the field `id`",
                "2:1: unknown field `sevrity` in check",
                "3:1: unknown field `colour` in check",
            ]
        );
    }

    #[test]
    fn syntax_error_is_positioned() {
        let issue = parse("name: demo\nchecks: [a, b\n").expect_err("broken");
        assert!(issue.line >= 2, "{issue:?}");
    }

    #[test]
    fn integer_where_a_string_is_expected_is_an_issue() {
        let node = parse("name: 12\n").expect("yaml");
        let mut issues = Issues::default();
        let mut fields = Fields::of(&node, "pack", &mut issues).expect("a map");
        assert_eq!(fields.string("name", &mut issues), None);
        assert_eq!(
            issues.0[0].message,
            "`name` must be a string, found an integer"
        );
        assert_eq!((issues.0[0].line, issues.0[0].column), (1, Some(7)));
    }
}
