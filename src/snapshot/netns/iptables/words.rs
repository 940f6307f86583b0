//! Splitting a dump line into words the way `iptables-restore` does.
//!
//! Words are separated by blanks. A double quote starts a quoted part in which
//! blanks are kept and a backslash escapes the next character
//! (`--comment "kube-proxy \"x\""`); the closing quote ends the word.
//! `ipset save` quotes its comments the same way.

use std::borrow::Cow;

/// One word of a line, with quotes removed and escapes resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word<'a> {
    pub text: Cow<'a, str>,
    /// Byte offset of the word (of its opening quote, if quoted) in the line.
    pub start: usize,
    /// Byte offset just past the word in the line.
    pub end: usize,
}

/// A line whose quoted part never ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("quoted string is never closed")]
pub struct UnclosedQuote {
    /// Byte offset of the opening quote in the line.
    pub start: usize,
}

fn is_blank(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

/// Splits `line` into `words` (cleared first). Words borrow from the line
/// unless they hold escapes.
pub fn split_words<'a>(line: &'a str, words: &mut Vec<Word<'a>>) -> Result<(), UnclosedQuote> {
    words.clear();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if is_blank(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !is_blank(bytes[i]) && bytes[i] != b'"' {
            i += 1;
        }
        if i == bytes.len() || bytes[i] != b'"' {
            words.push(Word {
                text: Cow::Borrowed(&line[start..i]),
                start,
                end: i,
            });
            continue;
        }
        let (text, end) = quoted(line, start, i)?;
        words.push(Word { text, start, end });
        i = end;
    }
    Ok(())
}

/// Reads the quoted part opening at `quote`, preceded by `line[start..quote]`.
/// Returns the word's text and the offset past the closing quote.
fn quoted(line: &str, start: usize, quote: usize) -> Result<(Cow<'_, str>, usize), UnclosedQuote> {
    let bytes = line.as_bytes();
    let content = quote + 1;
    let mut owned: Option<String> = (start < quote).then(|| line[start..quote].to_owned());
    let mut run = content;
    let mut i = content;
    loop {
        match bytes.get(i) {
            None => return Err(UnclosedQuote { start: quote }),
            Some(b'"') => break,
            Some(b'\\') => {
                let text = owned.get_or_insert_with(String::new);
                text.push_str(&line[run..i]);
                let Some(escaped) = line[i + 1..].chars().next() else {
                    return Err(UnclosedQuote { start: quote });
                };
                text.push(escaped);
                i += 1 + escaped.len_utf8();
                run = i;
            }
            Some(_) => i += 1,
        }
    }
    let text = match owned {
        Some(mut text) => {
            text.push_str(&line[run..i]);
            Cow::Owned(text)
        }
        None => Cow::Borrowed(&line[content..i]),
    };
    Ok((text, i + 1))
}

/// 1-based column of byte offset `at` in `line`, counting characters.
pub fn column(line: &str, at: usize) -> usize {
    line.get(..at).map_or(at, |before| before.chars().count()) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        split_words(line, &mut words).unwrap();
        words.into_iter().map(|w| w.text.into_owned()).collect()
    }

    #[test]
    fn blanks_separate_words() {
        assert_eq!(
            texts("  -A  KUBE-SERVICES\t-j ACCEPT "),
            ["-A", "KUBE-SERVICES", "-j", "ACCEPT"]
        );
    }

    #[test]
    fn quoted_word_keeps_blanks_and_resolves_escapes() {
        assert_eq!(
            texts(r#"--comment "kube-proxy \"x\" \\y" -j ACCEPT"#),
            ["--comment", r#"kube-proxy "x" \y"#, "-j", "ACCEPT"]
        );
    }

    #[test]
    fn quoted_word_without_escapes_borrows_from_the_line() {
        let mut words = Vec::new();
        split_words(r#"--comment "a b""#, &mut words).unwrap();
        assert!(matches!(words[1].text, Cow::Borrowed("a b")));
        assert_eq!((words[1].start, words[1].end), (10, 15));
    }

    #[test]
    fn closing_quote_ends_the_word() {
        assert_eq!(texts(r#"ab"c d"ef"#), ["abc d", "ef"]);
    }

    #[test]
    fn unclosed_quote_is_an_error_at_the_quote() {
        let mut words = Vec::new();
        assert_eq!(
            split_words(r#"-m comment --comment "abc"#, &mut words),
            Err(UnclosedQuote { start: 21 })
        );
        assert_eq!(
            split_words(r#"x "abc\"#, &mut words),
            Err(UnclosedQuote { start: 2 })
        );
    }

    #[test]
    fn escaped_multibyte_character_is_kept_whole() {
        assert_eq!(texts(r#""é\é""#), ["éé"]);
    }

    #[test]
    fn column_counts_characters() {
        assert_eq!(column("aé b", 0), 1);
        assert_eq!(column("aé b", 4), 4);
    }
}
