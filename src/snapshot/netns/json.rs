//! The JSON dumps of iproute2 (`ip -j ...`, `bridge -j ...`): each file is one
//! array, one element per link, route, rule, ...
//!
//! The array is split into its elements first and each element is read on its
//! own, so that one malformed element costs only itself: it becomes one issue
//! at its position in the file and the others are kept. iproute2 writes the
//! whole array on one line, so the column is what locates an element.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny};
use serde_json::value::RawValue;

use crate::snapshot::problem::{LineCursor, ParseIssue, Parsed, line_col};

/// Reads `text` as a JSON array of `T`.
///
/// An empty file, or one that is not a JSON array at all (truncated, say),
/// gives no value and one issue. Otherwise every element that reads as a `T`
/// is kept and every one that does not is one issue.
pub fn parse_array<T: DeserializeOwned>(text: &str) -> Parsed<Vec<T>> {
    let (elements, issues) = parse_placed(text);
    let values = elements.map(|elements| elements.into_iter().map(|(value, _)| value).collect());
    (values, issues)
}

/// [`parse_array`], each element with where it starts in `text` (1-based
/// line and column), so that evidence can point at it without reading the
/// file again.
pub fn parse_placed<T: DeserializeOwned>(text: &str) -> Parsed<Vec<(T, (usize, usize))>> {
    if text.trim().is_empty() {
        return (
            None,
            vec![ParseIssue::at_line(1, "empty file (an empty dump is `[]`)")],
        );
    }
    let elements: Vec<&RawValue> = match serde_json::from_str(text) {
        Ok(elements) => elements,
        Err(error) => {
            return (
                None,
                vec![issue(text, 0, &error, "not a JSON array of objects")],
            );
        }
    };
    let mut values = Vec::with_capacity(elements.len());
    let mut issues = Vec::new();
    let mut cursor = LineCursor::default();
    for (index, element) in elements.into_iter().enumerate() {
        let element = element.get();
        match serde_json::from_str(element) {
            Ok(value) => values.push((value, cursor.advance(text, offset_in(text, element)))),
            Err(error) => {
                let context = format!("element {} of the array", index + 1);
                issues.push(issue(text, offset_in(text, element), &error, &context));
            }
        }
    }
    (Some(values), issues)
}

/// Where `part`, a slice borrowed from `text`, starts within it.
pub(super) fn offset_in(text: &str, part: &str) -> usize {
    (part.as_ptr() as usize)
        .checked_sub(text.as_ptr() as usize)
        .filter(|offset| offset + part.len() <= text.len())
        .unwrap_or(0)
}

/// Turns a serde_json error in the slice of `text` starting at `start` into an
/// issue positioned in the whole text.
pub(super) fn issue(
    text: &str,
    start: usize,
    error: &serde_json::Error,
    context: &str,
) -> ParseIssue {
    let slice = text.get(start..).unwrap_or_default();
    let offset = start + byte_offset(slice, error.line(), error.column());
    let (line, column) = line_col(text, offset);
    let position = format!(" at line {} column {}", error.line(), error.column());
    let full = error.to_string();
    let message = full.strip_suffix(&position).unwrap_or(&full);
    ParseIssue::at(line, column, format!("{context}: {message}"))
}

/// The byte offset of serde_json's 1-based line and byte column in `text`.
/// Column 0 means "before the first byte of the line".
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n')
            .nth(line - 2)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    (line_start + column.saturating_sub(1)).min(text.len())
}

/// For iproute2's marker keys, printed as `"key": null` when set and left out
/// otherwise (`"not"`, `"nop"`, `"router"`, ...): use with
/// `#[serde(default, deserialize_with = "json::present")]`.
pub fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(deserializer).map(|_| true)
}

/// For the 0/1 settings iproute2 prints as numbers (`"vlan_filtering": 1`).
pub fn nonzero<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    u64::deserialize(deserializer).map(|value| value != 0)
}

/// Parses a number as iproute2 prints it: `0x`-prefixed hex (`"0x200"`) or
/// decimal.
pub fn parse_number(text: &str) -> Result<u32, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("{text:?} is not a 32-bit number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Item {
        name: String,
        mtu: u32,
    }

    #[test]
    fn every_element_of_a_good_array_is_read() {
        let (items, issues) = parse_array::<Item>(r#"[{"name":"a","mtu":1},{"name":"b","mtu":2}]"#);
        assert!(issues.is_empty(), "{issues:?}");
        let items = items.expect("an array");
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[1],
            Item {
                name: "b".into(),
                mtu: 2
            }
        );
    }

    #[test]
    fn element_with_wrong_type_is_one_issue_at_its_position_and_the_rest_is_kept() {
        let text = r#"[{"name":"a","mtu":1},{"name":"b","mtu":"abc"},{"name":"c","mtu":3}]"#;
        let (items, issues) = parse_array::<Item>(text);
        let names: Vec<_> = items
            .expect("an array")
            .into_iter()
            .map(|i| i.name)
            .collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(issues.len(), 1);
        // serde_json points at the end of the bad value: the closing quote of "abc".
        let column = text.find(r#""abc""#).expect("in text") + 5;
        assert_eq!((issues[0].line, issues[0].column), (1, Some(column)));
        assert_eq!(
            issues[0].message,
            r#"element 2 of the array: invalid type: string "abc", expected u32"#
        );
    }

    #[test]
    fn element_position_counts_lines_of_a_pretty_printed_array() {
        let text = "[\n  {\"name\": \"a\", \"mtu\": 1},\n  {\"name\": \"b\",\n   \"mtu\": -4}\n]\n";
        let (items, issues) = parse_array::<Item>(text);
        assert_eq!(items.expect("an array").len(), 1);
        assert_eq!(issues.len(), 1);
        assert_eq!((issues[0].line, issues[0].column), (4, Some(12)));
    }

    #[test]
    fn element_that_is_not_an_object_is_one_issue() {
        let (items, issues) = parse_array::<Item>(r#"[7,{"name":"a","mtu":1}]"#);
        assert_eq!(items.expect("an array").len(), 1);
        assert_eq!(issues.len(), 1);
        assert_eq!((issues[0].line, issues[0].column), (1, Some(2)));
        assert!(
            issues[0]
                .message
                .starts_with("element 1 of the array: invalid type: integer `7`")
        );
    }

    #[test]
    fn truncated_array_is_one_issue_and_no_value() {
        let text = "[{\"name\":\"a\",\"mtu\":1},\n{\"name\":\"b\",";
        let (items, issues) = parse_array::<Item>(text);
        assert!(items.is_none());
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].line, 2);
        assert!(issues[0].message.contains("EOF"), "{}", issues[0].message);
    }

    #[test]
    fn object_instead_of_array_is_one_issue_and_no_value() {
        let (items, issues) = parse_array::<Item>(r#"{"name":"a","mtu":1}"#);
        assert!(items.is_none());
        assert_eq!(issues.len(), 1);
        assert!(
            issues[0]
                .message
                .starts_with("not a JSON array of objects: invalid type: map")
        );
    }

    #[test]
    fn empty_file_is_one_issue_and_no_value() {
        for text in ["", "\n", "  \n\t"] {
            let (items, issues) = parse_array::<Item>(text);
            assert!(items.is_none());
            assert_eq!(
                issues,
                [ParseIssue::at_line(1, "empty file (an empty dump is `[]`)")]
            );
        }
    }

    #[test]
    fn empty_array_is_an_empty_dump() {
        let (items, issues) = parse_array::<Item>("[]\n");
        assert_eq!(items, Some(vec![]));
        assert!(issues.is_empty());
    }

    #[test]
    fn numbers_are_read_in_hex_or_decimal() {
        assert_eq!(parse_number("0x200"), Ok(0x200));
        assert_eq!(parse_number("42"), Ok(42));
        assert_eq!(
            parse_number("0xfffffffff"),
            Err(r#""0xfffffffff" is not a 32-bit number"#.to_owned())
        );
    }
}
