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

impl Word<'_> {
    /// Where the word's text lies in its line, when it is a plain slice of
    /// the line (no escapes were resolved): the word itself, or inside its quotes.
    pub fn span(&self, line: &str) -> Option<std::ops::Range<usize>> {
        let Cow::Borrowed(text) = self.text else {
            return None;
        };
        let quoted = line.as_bytes().get(self.start) == Some(&b'"');
        let start = if quoted { self.start + 1 } else { self.start };
        let span = start..start + text.len();
        (line.get(span.clone()) == Some(text)).then_some(span)
    }
}

/// A line whose quoted part never ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("quoted string is never closed")]
pub struct UnclosedQuote {
    /// Byte offset of the opening quote in the line.
    pub start: usize,
}

/// What a byte is to the splitter: part of a word, a blank, or a quote.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Word,
    Blank,
    Quote,
}

/// The class of every byte, so that the splitter tests each byte once.
const CLASSES: [Class; 256] = {
    let mut classes = [Class::Word; 256];
    classes[b' ' as usize] = Class::Blank;
    classes[b'\t' as usize] = Class::Blank;
    classes[b'\r' as usize] = Class::Blank;
    classes[b'\n' as usize] = Class::Blank;
    classes[b'"' as usize] = Class::Quote;
    classes
};

fn class(byte: u8) -> Class {
    CLASSES[usize::from(byte)]
}

/// Splits `line` into `words` (cleared first). Words borrow from the line
/// unless they hold escapes.
pub fn split_words<'a>(line: &'a str, words: &mut Vec<Word<'a>>) -> Result<(), UnclosedQuote> {
    split_words_upto(line, usize::MAX, words)
}

/// [`split_words`] of the first `most` words of `line` only: words are
/// found from the left, so they are the first words of the whole line, and
/// a quote left open after them is not looked for.
pub fn split_words_upto<'a>(
    line: &'a str,
    most: usize,
    words: &mut Vec<Word<'a>>,
) -> Result<(), UnclosedQuote> {
    words.clear();
    let bytes = line.as_bytes();
    let mut i = 0;
    while let Some(&byte) = bytes.get(i)
        && words.len() < most
    {
        if class(byte) == Class::Blank {
            i += 1;
            continue;
        }
        let start = i;
        i = word_end(bytes, i);
        if bytes.get(i) != Some(&b'"') {
            words.push(Word {
                text: Cow::Borrowed(line.get(start..i).unwrap_or_default()),
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

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `i` as one number, lowest address lowest.
fn chunk_at(bytes: &[u8], i: usize) -> Option<u64> {
    let chunk: [u8; 8] = bytes.get(i..i + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// The high bit of each byte of `chunk` that is zero. Only the lowest flag
/// is sure to be right: a borrow out of a zero byte may flag the next one.
fn zero_bytes(chunk: u64) -> u64 {
    chunk.wrapping_sub(ONES) & !chunk & HIGH_BITS
}

/// Position of the byte that the lowest flag of `flags` marks, in a chunk at `i`.
fn flagged(i: usize, flags: u64) -> usize {
    // At most 7.
    i + (flags.trailing_zeros() / 8) as usize
}

/// Where the unquoted run of word bytes starting at `i` ends: at the first
/// blank or quote, or at the end of the line.
fn word_end(bytes: &[u8], mut i: usize) -> usize {
    // Eight bytes at a time: flag the bytes below 0x23, the only ones that
    // can be blanks or quotes (the lowest flag is right, as for zero_bytes).
    // It may be another byte below 0x23, such as `!`, which is part of the word.
    while let Some(chunk) = chunk_at(bytes, i) {
        let low = chunk.wrapping_sub(ONES * 0x23) & !chunk & HIGH_BITS;
        if low == 0 {
            i += 8;
            continue;
        }
        i = flagged(i, low);
        match bytes.get(i) {
            Some(&byte) if class(byte) == Class::Word => i += 1,
            _ => return i,
        }
    }
    while let Some(&byte) = bytes.get(i) {
        if class(byte) != Class::Word {
            break;
        }
        i += 1;
    }
    i
}

/// The first `"` or `\` at or after `i`.
fn quote_or_escape(bytes: &[u8], mut i: usize) -> Option<usize> {
    while let Some(chunk) = chunk_at(bytes, i) {
        let found = zero_bytes(chunk ^ (ONES * u64::from(b'"')))
            | zero_bytes(chunk ^ (ONES * u64::from(b'\\')));
        if found != 0 {
            return Some(flagged(i, found));
        }
        i += 8;
    }
    let rest = bytes.get(i..)?;
    rest.iter()
        .position(|&b| b == b'"' || b == b'\\')
        .map(|p| i + p)
}

/// Reads the quoted part opening at `quote`, preceded by `line[start..quote]`.
/// Returns the word's text and the offset past the closing quote.
fn quoted(line: &str, start: usize, quote: usize) -> Result<(Cow<'_, str>, usize), UnclosedQuote> {
    let unclosed = UnclosedQuote { start: quote };
    let bytes = line.as_bytes();
    let content = quote + 1;
    let mut owned: Option<String> =
        (start < quote).then(|| line.get(start..quote).unwrap_or_default().to_owned());
    let mut run = content;
    let end = loop {
        let i = quote_or_escape(bytes, run).ok_or(unclosed)?;
        if bytes.get(i) == Some(&b'"') {
            break i;
        }
        // A backslash: keep the character after it as it is.
        let escaped = line
            .get(i + 1..)
            .and_then(|rest| rest.chars().next())
            .ok_or(unclosed)?;
        let text = owned.get_or_insert_with(String::new);
        text.push_str(line.get(run..i).unwrap_or_default());
        text.push(escaped);
        run = i + 1 + escaped.len_utf8();
    };
    let text = match owned {
        Some(mut text) => {
            text.push_str(line.get(run..end).unwrap_or_default());
            Cow::Owned(text)
        }
        None => Cow::Borrowed(line.get(content..end).unwrap_or_default()),
    };
    Ok((text, end + 1))
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
    fn long_words_split_at_every_blank_and_quote() {
        let line = "--to-destination 10.244.123.45:8080\t!x! aaaaaaaaaaaaaaaaaaaaaaaa \"q r\" é-é-é-é-é-é-é-é-é";
        assert_eq!(
            texts(line),
            [
                "--to-destination",
                "10.244.123.45:8080",
                "!x!",
                "aaaaaaaaaaaaaaaaaaaaaaaa",
                "q r",
                "é-é-é-é-é-é-é-é-é"
            ]
        );
    }

    #[test]
    fn span_locates_plain_and_quoted_words() {
        let line = r#"--comment "a b" x"y" "c\"d""#;
        let mut words = Vec::new();
        split_words(line, &mut words).unwrap();
        let spans: Vec<Option<&str>> = words
            .iter()
            .map(|w| w.span(line).map(|s| &line[s]))
            .collect();
        assert_eq!(spans, [Some("--comment"), Some("a b"), None, None]);
    }

    /// The splitting rules, one character at a time.
    fn reference(line: &str) -> Result<Vec<(String, usize, usize)>, usize> {
        let blank = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n');
        let mut words = Vec::new();
        let mut i = 0;
        while let Some(c) = line[i..].chars().next() {
            if blank(c) {
                i += 1;
                continue;
            }
            let start = i;
            let mut text = String::new();
            while let Some(c) = line[i..].chars().next().filter(|&c| !blank(c) && c != '"') {
                text.push(c);
                i += c.len_utf8();
            }
            if line[i..].starts_with('"') {
                let quote = i;
                i += 1;
                loop {
                    match line[i..].chars().next() {
                        None => return Err(quote),
                        Some('"') => break,
                        Some('\\') => {
                            let escaped = line[i + 1..].chars().next().ok_or(quote)?;
                            text.push(escaped);
                            i += 1 + escaped.len_utf8();
                        }
                        Some(c) => {
                            text.push(c);
                            i += c.len_utf8();
                        }
                    }
                }
                i += 1;
            }
            words.push((text, start, i));
        }
        Ok(words)
    }

    proptest::proptest! {
        #[test]
        fn splits_like_the_reference(chars in proptest::collection::vec(
            proptest::sample::select(vec![' ', '\t', '\r', '\n', '"', '\\', '!', 'a', '-', '0', 'é', '\u{1}', '#']),
            0..80,
        )) {
            let line: String = chars.into_iter().collect();
            let mut words = Vec::new();
            let ours = split_words(&line, &mut words)
                .map(|()| words.iter().map(|w| (w.text.to_string(), w.start, w.end)).collect::<Vec<_>>())
                .map_err(|e| e.start);
            proptest::prop_assert_eq!(ours, reference(&line));
        }
    }

    #[test]
    fn column_counts_characters() {
        assert_eq!(column("aé b", 0), 1);
        assert_eq!(column("aé b", 4), 4);
    }
}
