//! Problems found while reading a snapshot.
//!
//! Parsers never stop at the first problem and never panic: they return what
//! they could read together with a list of [`ParseIssue`]s. The loader attaches
//! the file path and turns them into [`Problem`]s.

use std::fmt;
use std::path::{Path, PathBuf};

/// One thing wrong in the text handed to a parser, positioned within that text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseIssue {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, where the position within the line is meaningful.
    pub column: Option<usize>,
    pub message: String,
}

impl ParseIssue {
    pub fn at_line(line: usize, message: impl Into<String>) -> Self {
        ParseIssue {
            line,
            column: None,
            message: message.into(),
        }
    }

    pub fn at(line: usize, column: usize, message: impl Into<String>) -> Self {
        ParseIssue {
            line,
            column: Some(column),
            message: message.into(),
        }
    }
}

/// What every dump parser returns: the value when the file could be read at
/// all (possibly missing the parts that were malformed), and every issue found.
pub type Parsed<T> = (Option<T>, Vec<ParseIssue>);

/// A problem in a snapshot file, ready to show to a user as `file:line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub file: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    pub message: String,
}

impl Problem {
    /// A problem with the file as a whole (unreadable, not UTF-8, ...).
    pub fn in_file(file: &Path, message: impl Into<String>) -> Self {
        Problem {
            file: file.to_path_buf(),
            line: None,
            column: None,
            message: message.into(),
        }
    }

    pub fn from_issue(file: &Path, issue: ParseIssue) -> Self {
        Problem {
            file: file.to_path_buf(),
            line: Some(issue.line),
            column: issue.column,
            message: issue.message,
        }
    }

    /// Where the problem is, as a finding's evidence.
    pub fn place(&self) -> crate::diagnostic::Evidence {
        crate::diagnostic::Evidence {
            line: self.line,
            column: self.column,
            ..crate::diagnostic::Evidence::file(self.file.clone())
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::diagnostic::write_place(f, &self.file, self.line, self.column)?;
        write!(f, ": {}", self.message)
    }
}

/// A YAML parser's error as a user reads it: serde-saphyr's own words, but
/// for a duplicate key, which it explains in terms of its options.
pub fn yaml_message(error: &serde_saphyr::Error) -> String {
    use serde_saphyr::MessageFormatter;
    match error {
        serde_saphyr::Error::DuplicateMappingKey { key: Some(key), .. } => {
            format!("duplicate key `{key}`")
        }
        serde_saphyr::Error::DuplicateMappingKey { key: None, .. } => "duplicate key".to_owned(),
        _ => serde_saphyr::DefaultMessageFormatter
            .format_message(error)
            .into_owned(),
    }
}

/// 1-based (line, column) of a byte offset in `text`; columns count characters.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = newlines(before.as_bytes()) + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, chars(&before.as_bytes()[line_start..]) + 1)
}

/// The line breaks in `bytes`. A large cluster's pretty-printed files are
/// over a gigabyte, each byte of which is counted to place its objects.
pub fn newlines(bytes: &[u8]) -> usize {
    bytecount::count(bytes, b'\n')
}

/// The characters of UTF-8 `bytes` (columns count characters).
pub fn chars(bytes: &[u8]) -> usize {
    bytecount::num_chars(bytes)
}

/// Where the last position was, so that each next one is found from there:
/// `nft -j` and `ip -j` write a whole dump on one line, and counting from
/// the start for every object would be quadratic in the file's size.
#[derive(Default)]
pub struct LineCursor {
    offset: usize,
    line: usize,
    /// The column (in characters, from 0) of `offset` in its line.
    column: usize,
}

impl LineCursor {
    /// A cursor whose line 1, column 1 is `offset` of the text, for
    /// offsets from there only: a part of a file placed later by the lines
    /// before it.
    pub fn from(offset: usize) -> LineCursor {
        LineCursor {
            offset,
            line: 1,
            column: 0,
        }
    }

    /// The 1-based line and column of `offset`, at or after the last one.
    pub fn advance(&mut self, text: &str, offset: usize) -> (usize, usize) {
        if offset < self.offset || self.line == 0 {
            let (line, column) = line_col(text, offset);
            (self.offset, self.line, self.column) = (offset, line, column - 1);
            return (line, column);
        }
        let end = text.floor_char_boundary(offset);
        let start = text.floor_char_boundary(self.offset).min(end);
        let between = &text[start..end];
        match between.rfind('\n') {
            Some(last) => {
                self.line += newlines(between.as_bytes());
                self.column = chars(&between.as_bytes()[last + 1..]);
            }
            None => self.column += chars(between.as_bytes()),
        }
        self.offset = end;
        (self.line, self.column + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cursor_gives_what_line_col_gives_in_any_order() {
        let text = "ab\ncdé\nf[{\"x\": 1}, {\"é\": 2}]";
        let mut cursor = LineCursor::default();
        for offset in [0, 2, 3, 7, 8, 9, 12, 30, 4, 5, 6, 100, 1] {
            assert_eq!(
                cursor.advance(text, offset),
                line_col(text, offset),
                "{offset}"
            );
        }
    }

    #[test]
    fn line_col_counts_from_one() {
        let text = "ab\ncdé\nf";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        assert_eq!(line_col(text, 8), (3, 1));
        assert_eq!(line_col(text, 7), (2, 4));
        assert_eq!(line_col(text, 100), (3, 2));
    }

    #[test]
    fn problem_displays_as_file_line_col() {
        let p = Problem::from_issue(Path::new("a/b.json"), ParseIssue::at(3, 7, "expected ]"));
        assert_eq!(p.to_string(), "a/b.json:3:7: expected ]");
        let p = Problem::in_file(Path::new("x.txt"), "not UTF-8");
        assert_eq!(p.to_string(), "x.txt: not UTF-8");
    }
}
