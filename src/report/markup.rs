//! Text from a snapshot inside XML (SVG) and HTML. Pod names, rule comments
//! and finding messages are written by whoever made the snapshot: every one
//! goes through [`escape`] before it becomes markup, so that it can only
//! ever be text.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` as XML and HTML character data or a quoted attribute value: the
/// five markup characters as entities, and what [`hidden`] names but
/// newline and tab as visible Rust escapes (`\u{1b}`).
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            '\n' | '\t' => escaped.push(c),
            c if hidden(c) => {
                let _ = write!(escaped, "{}", c.escape_default());
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// A character a picture shows as its escape: a control character (XML 1.0
/// forbids most even as references) or a bidirectional override, which
/// would reorder what follows it and so spoof a name, as `cli` treats them
/// on a terminal.
pub fn hidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with what [`hidden`] names but tab written as its Rust escape
/// (`\n`, `\u{1b}`, `\u{202e}`), everything else kept: the one escaping of
/// plain text, for a terminal (`cli`'s `out!` and `err!`) and for a CSV
/// field alike, so that text from a snapshot, a pack or a tool can neither
/// drive a terminal nor start a line of its own.
pub fn visible(text: &str) -> Cow<'_, str> {
    let shown_as_escape = |c: char| c != '\t' && hidden(c);
    if !text.chars().any(shown_as_escape) {
        return Cow::Borrowed(text);
    }
    let mut safe = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if shown_as_escape(c) {
            safe.extend(c.escape_default());
        } else {
            safe.push(c);
        }
    }
    Cow::Owned(safe)
}

/// At most `max` characters of `text`, the cut marked with `…`.
pub fn shortened(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut short: String = text.chars().take(max.saturating_sub(1)).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_become_text() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\"\u{1b}[31m"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;\\u{1b}[31m"
        );
        assert_eq!(escape("web\u{202e}0-bew"), "web\\u{202e}0-bew");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(shortened("abcdef", 4), "abc…");
        assert_eq!(shortened("abcd", 4), "abcd");
    }
}
