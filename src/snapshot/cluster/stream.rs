//! A `cluster/` file too large to hold whole, read a part at a time:
//! `kubectl get pods -A -o yaml` of a 150,000-pod cluster is one List of
//! 342 MB. What a load holds is then the model it keeps and a few parts,
//! not the file.
//!
//! A file over [`WHOLE_UP_TO`] must be one List as kubectl writes it (JSON
//! or YAML): its head (the List's fields before its items) is read first
//! and its end (after the items) from the file's last bytes, which say the
//! List's apiVersion and kind. Its items are then cut into parts of about
//! [`PART`] bytes at lines where an item starts (in YAML a `- ` at the
//! first column; in JSON a `{` indented as the first item's, after a line
//! ending with a comma), and each part becomes a List of its own, which the
//! general loader reads as it reads any file (`load::read_text`: kubectl's
//! shape straight into the model, anything else and every problem through
//! the positioned tree), its lines moved back to where they are in the file.
//! A cut in the wrong place (a line that looked like an item's start but
//! was not, which kubectl never writes) shows as a syntax error at the
//! cut, never as other objects.
//!
//! A file of another shape over [`WHOLE_UP_TO`] is read whole up to
//! `input::CLUSTER_FILE`, as any file is; above that it is refused, naming
//! why.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::direct::fitted::skip_whitespace;
use super::direct::list::{items_start, list_kind};
use super::document::parse_yaml;
use super::load::Format;
use crate::snapshot::input::{self, MIB};
use crate::snapshot::problem::{ParseIssue, Problem, line_col, newlines};

/// Files up to this size are read whole.
pub(super) const WHOLE_UP_TO: u64 = 64 * MIB;
/// Items are handed to the loader in parts of about this many bytes.
const PART: usize = 8 << 20;
/// The List's fields after its items are looked for in the file's last
/// bytes, this many.
const TAIL: u64 = MIB;
/// The List's fields before its items are looked for in the file's first
/// bytes, this many.
const HEAD: usize = 16 << 20;

/// A part of a file as a text of its own, and how many lines further down
/// the file its lines are.
pub(super) struct Part {
    pub text: String,
    pub lines: isize,
}

/// Whether a file of `len` bytes is read a part at a time.
pub(super) fn is_large(len: u64) -> bool {
    len > WHOLE_UP_TO
}

/// Reads the List in `file` (of `len` bytes) a part at a time, handing
/// each part to `each`, its text written into a buffer from `spare` when
/// it has one (a part's text handed back once read: fresh memory costs the
/// kernel a page fault for every 4 kB): with `digesting`, the SHA-256 of
/// all the file's bytes (read to its end whatever happens once a part was
/// read; none for a file refused before any, which is unreadable), and the
/// problem that stopped the reading, if one did.
pub(super) fn read(
    path: &Path,
    file: File,
    len: u64,
    format: Format,
    digesting: bool,
    spare: impl FnMut() -> Option<String>,
    each: impl FnMut(Part),
) -> (Option<[u8; 32]>, Option<Problem>) {
    read_in_parts_of(path, file, len, format, digesting, PART, spare, each)
}

/// [`read`], in parts of about `part_bytes`.
#[allow(
    clippy::too_many_arguments,
    reason = "read's arguments and the part size the tests choose"
)]
fn read_in_parts_of(
    path: &Path,
    file: File,
    len: u64,
    format: Format,
    digesting: bool,
    part_bytes: usize,
    spare: impl FnMut() -> Option<String>,
    mut each: impl FnMut(Part),
) -> (Option<[u8; 32]>, Option<Problem>) {
    let mut window = Window::new(file, digesting);
    let mut handed = false;
    let mut problem = read_parts(path, &mut window, len, format, part_bytes, spare, |part| {
        handed = true;
        each(part);
    })
    .err();
    if problem.is_some() && !handed {
        // Not read at all (not a List): unreadable, as a file over the cap
        // of one read whole is.
        return (None, problem);
    }
    let digest = window.finish().unwrap_or_else(|e| {
        problem.get_or_insert_with(|| Problem::in_file(path, format!("cannot read: {e}")));
        None
    });
    (digest, problem)
}

fn read_parts(
    path: &Path,
    window: &mut Window,
    len: u64,
    format: Format,
    part_bytes: usize,
    mut spare: impl FnMut() -> Option<String>,
    mut each: impl FnMut(Part),
) -> Result<(), Problem> {
    let cannot = |e: std::io::Error| Problem::in_file(path, format!("cannot read: {e}"));
    window.fill(HEAD.min(len as usize)).map_err(cannot)?;
    if window.bytes().starts_with("\u{feff}".as_bytes()) {
        window.take(3, "", Vec::new());
    }
    let list = match format {
        Format::Json => json_list(window, len),
        Format::Yaml => yaml_list(window, len),
    }
    .ok_or_else(|| {
        Problem::in_file(
            path,
            format!(
                "{len} bytes: over {} MiB, a file is read a part at a time, which takes one List \
                 as kubectl writes it (`kubectl get ... -o yaml|json`), and this is not one; \
                 split it into files of at most {} MiB",
                WHOLE_UP_TO / MIB,
                WHOLE_UP_TO / MIB,
            ),
        )
    })?;
    // From here on the window holds the prefix a part stands alone with,
    // then the file's bytes: a part is handed in the buffer it was read
    // into, not copied.
    window.take(list.first_item, &list.prefix, Vec::new());
    loop {
        window.fill(part_bytes).map_err(cannot)?;
        let remaining = list.items_end.saturating_sub(window.start);
        let available = window.bytes().len() as u64;
        let items = remaining.min(available) as usize;
        let end_in_window = remaining <= available || window.eof;
        let cut = if end_in_window && items <= part_bytes {
            None
        } else {
            list.cut(&window.bytes()[..items.min(part_bytes)])
                .or_else(|| list.cut(&window.bytes()[..items]))
        };
        let (cut, last) = match cut {
            Some(cut) => (cut, false),
            None if end_in_window => (items, true),
            None if window.bytes().len() as u64 >= input::CLUSTER_FILE.bytes => {
                return Err(Problem::from_issue(
                    path,
                    ParseIssue::at_line(
                        window.lines_before + 1,
                        format!(
                            "an item of this List is over {} MiB, more than one piece of a \
                             cluster/ file read at once may hold; the rest is not read",
                            input::CLUSTER_FILE.bytes / MIB
                        ),
                    ),
                ));
            }
            None => {
                window.fill(window.bytes().len() * 2).map_err(cannot)?;
                continue;
            }
        };
        let part = std::str::from_utf8(&window.bytes()[..cut]).map_err(|e| {
            let valid = e.valid_up_to();
            let text = std::str::from_utf8(&window.bytes()[..valid]).unwrap_or_default();
            let (line, column) = line_col(text, valid);
            Problem::from_issue(
                path,
                ParseIssue::at(window.lines_before + line, column, "not valid UTF-8"),
            )
        })?;
        let blank = part.trim().is_empty();
        let lines = window.lines_before as isize - list.prefix_lines as isize;
        let buffer = spare().map(String::into_bytes).unwrap_or_default();
        let text = window.take(cut, &list.prefix, buffer);
        if !blank {
            each(Part {
                text: list.standalone(text, last),
                lines,
            });
        }
        if last {
            return Ok(());
        }
    }
}

/// Where a List's items are, and how a part of them stands alone.
struct List {
    format: Format,
    /// Offset of the first item's line in the window as first filled.
    first_item: usize,
    /// File offset where the items end (JSON: the `]`; YAML: the List's
    /// first field after them).
    items_end: u64,
    /// The text before a part: the List's head, naming its apiVersion and kind.
    prefix: String,
    prefix_lines: usize,
    /// JSON: the items' indentation.
    indent: usize,
}

impl List {
    /// The last offset in `bytes` where an item's line starts (not 0).
    fn cut(&self, bytes: &[u8]) -> Option<usize> {
        let mut end = bytes.len();
        while let Some(newline) = bytes[..end].iter().rposition(|&b| b == b'\n') {
            let line = newline + 1;
            end = newline;
            let starts_item = match self.format {
                Format::Yaml => {
                    bytes.get(line) == Some(&b'-')
                        && matches!(bytes.get(line + 1), Some(b' ' | b'\n'))
                }
                Format::Json => {
                    bytes
                        .get(line..line + self.indent)
                        .is_some_and(|spaces| spaces.iter().all(|&b| b == b' '))
                        && bytes.get(line + self.indent) == Some(&b'{')
                        && bytes[..line]
                            .iter()
                            .rev()
                            .find(|b| !b.is_ascii_whitespace())
                            == Some(&b',')
                }
            };
            if starts_item && line > 0 && line < bytes.len() {
                return Some(line);
            }
        }
        None
    }

    /// `text`, the prefix then a part (whole items, UTF-8), as a List of
    /// its own.
    fn standalone(&self, mut text: Vec<u8>, last: bool) -> String {
        if self.format == Format::Json {
            // The comma before the next part's first item goes; a blank
            // keeps every column where it was.
            let part = self.prefix.len()..text.len();
            let end = text[part.clone()]
                .iter()
                .rposition(|b| !b.is_ascii_whitespace())
                .map(|at| part.start + at);
            if let Some(at) = end.filter(|&at| !last && text[at] == b',') {
                text[at] = b' ';
            }
            text.extend_from_slice(b"\n]}\n");
        }
        // SAFETY: the prefix is a str, the part was checked as UTF-8, and
        // only ASCII was written over ASCII or added.
        unsafe { String::from_utf8_unchecked(text) }
    }
}

/// A JSON List's head in the window and its end in the file's last bytes.
fn json_list(window: &Window, len: u64) -> Option<List> {
    let text = valid_prefix(window.bytes());
    let open = items_start(text)?;
    let first = skip_whitespace(text.as_bytes(), open);
    let first_line = text[..first].rfind('\n')? + 1;
    let (tail_start, tail) = tail(&window.file, len).ok()?;
    let close = tail.rfind(']')?;
    let items_end = tail_start + close as u64;
    if items_end < (window.start + first as u64) {
        return None;
    }
    let (api_version, kind) = list_kind(&format!("{}{}", &text[..open], &tail[close..]))?;
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    Some(List {
        format: Format::Json,
        first_item: first_line,
        items_end,
        prefix: format!(
            "{{\"apiVersion\": {}, \"kind\": {}, \"items\": [\n",
            quoted(&api_version),
            quoted(&kind)
        ),
        prefix_lines: 1,
        indent: first - first_line,
    })
}

/// A YAML List's head (its fields before `items:`, at the first column) in
/// the window, and its fields after the items in the file's last bytes.
fn yaml_list(window: &Window, len: u64) -> Option<List> {
    let text = valid_prefix(window.bytes());
    let mut at = 0;
    let items_line = loop {
        let end = text[at..].find('\n')? + at;
        let line = &text[at..end];
        if line.trim_end_matches(' ') == "items:" {
            break at;
        }
        // A document marker before the List's first field only.
        let leading = at == 0 && line.trim_end_matches(' ') == "---";
        if !leading && (is_marker(line) || line.starts_with('%')) {
            return None;
        }
        at = end + 1;
    };
    let first_item = text[items_line..].find('\n')? + items_line + 1;
    if !(text[first_item..].starts_with("- ") || text[first_item..].starts_with("-\n")) {
        return None;
    }
    let (tail_start, tail) = tail(&window.file, len).ok()?;
    // The List's fields after the items: from the first line at the first
    // column after the last item's dash.
    let mut after_items = None;
    let mut offset = 0;
    for (i, line) in tail.split_inclusive('\n').enumerate() {
        let here = offset;
        offset += line.len();
        if i == 0 && tail_start > 0 {
            continue;
        }
        if is_marker(line) {
            return None;
        }
        match line.as_bytes().first() {
            Some(b'-') if line.starts_with("- ") || line == "-\n" || line == "-" => {
                after_items = None;
            }
            Some(b' ' | b'\n' | b'#') | None => {}
            Some(_) => {
                after_items.get_or_insert(here);
            }
        }
    }
    let (items_end, fields_after) = match after_items {
        Some(at) => (tail_start + at as u64, &tail[at..]),
        None => (len, ""),
    };
    if items_end < window.start + first_item as u64 {
        return None;
    }
    let (documents, issues) =
        parse_yaml(&format!("{}items: []\n{fields_after}", &text[..items_line]));
    let [list] = documents.as_slice() else {
        return None;
    };
    if !issues.is_empty() {
        return None;
    }
    let field = |name: &str| list.get(name)?.as_str().filter(|s| !s.is_empty());
    let (api_version, kind) = (field("apiVersion")?, field("kind")?);
    if !(kind == "List" || kind.strip_suffix("List").is_some_and(|k| !k.is_empty())) {
        return None;
    }
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    Some(List {
        format: Format::Yaml,
        first_item,
        items_end,
        prefix: format!(
            "apiVersion: {}\nkind: {}\nitems:\n",
            quoted(api_version),
            quoted(kind)
        ),
        prefix_lines: 3,
        indent: 0,
    })
}

/// A YAML document marker, `---` or `...` alone or before a space.
fn is_marker(line: &str) -> bool {
    (line.starts_with("---") || line.starts_with("..."))
        && matches!(line.as_bytes().get(3), None | Some(b' ' | b'\n'))
}

/// The file's last [`TAIL`] bytes (from a character's start), and their
/// offset in the file.
fn tail(file: &File, len: u64) -> std::io::Result<(u64, String)> {
    let start = len.saturating_sub(TAIL);
    let mut bytes = vec![0; (len - start) as usize];
    let mut read = 0;
    while read < bytes.len() {
        match file.read_at(&mut bytes[read..], start + read as u64)? {
            0 => break,
            n => read += n,
        }
    }
    bytes.truncate(read);
    let skip = bytes.iter().take_while(|&&b| b & 0xC0 == 0x80).count();
    let text = valid_prefix(&bytes[skip..]).to_owned();
    Ok((start + skip as u64, text))
}

/// The longest prefix of `bytes` that is UTF-8.
fn valid_prefix(bytes: &[u8]) -> &str {
    match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// A window onto a file read from its start: the bytes not yet consumed,
/// after a text of the reader's (`front`) that the bytes taken from it
/// are handed with.
struct Window {
    file: File,
    held: Vec<u8>,
    /// How many bytes of `held` are the reader's, before the file's.
    front: usize,
    /// The file offset of the first byte not consumed.
    start: u64,
    /// The lines of the file before `start`.
    lines_before: usize,
    eof: bool,
    digest: Option<Sha256>,
}

impl Window {
    fn new(file: File, digesting: bool) -> Window {
        Window {
            file,
            held: Vec::new(),
            front: 0,
            start: 0,
            lines_before: 0,
            eof: false,
            digest: digesting.then(Sha256::new),
        }
    }

    /// The file's bytes read and not yet consumed.
    fn bytes(&self) -> &[u8] {
        &self.held[self.front..]
    }

    /// Reads until the window holds at least `want` bytes or the file ends.
    fn fill(&mut self, want: usize) -> std::io::Result<()> {
        const CHUNK: usize = 1 << 20;
        while self.bytes().len() < want && !self.eof {
            let before = self.held.len();
            // Into the buffer's spare room, not zeroed first.
            let n = match (&self.file).take(CHUNK as u64).read_to_end(&mut self.held) {
                Ok(n) => n,
                Err(e) => {
                    self.held.truncate(before);
                    return Err(e);
                }
            };
            if let Some(digest) = &mut self.digest {
                digest.update(&self.held[before..]);
            }
            // Fewer bytes than asked for: the file ended.
            self.eof = n < CHUNK;
        }
        Ok(())
    }

    /// Consumes the first `n` bytes: returns them after the old front, in
    /// the buffer that held them, and goes on in `buffer` with `front`
    /// before the bytes left. Only what is left is copied.
    fn take(&mut self, n: usize, front: &str, mut buffer: Vec<u8>) -> Vec<u8> {
        let end = self.front + n;
        self.lines_before += newlines(&self.held[self.front..end]);
        buffer.clear();
        buffer.extend_from_slice(front.as_bytes());
        buffer.extend_from_slice(&self.held[end..]);
        let mut taken = std::mem::replace(&mut self.held, buffer);
        taken.truncate(end);
        self.front = front.len();
        self.start += n as u64;
        taken
    }

    /// The digest of the whole file, the rest of it read for it.
    fn finish(&mut self) -> std::io::Result<Option<[u8; 32]>> {
        if self.digest.is_none() {
            return Ok(None);
        }
        while !self.eof {
            self.held.clear();
            self.front = 0;
            self.fill(1 << 20)?;
        }
        Ok(self.digest.take().map(|digest| digest.finalize().into()))
    }
}

/// The SHA-256 of all of `file`, read from where it is.
pub(super) fn digest(file: File) -> std::io::Result<[u8; 32]> {
    Ok(Window::new(file, true).finish()?.unwrap_or_default())
}

#[cfg(test)]
mod tests;
