//! Reading input files that may be hostile: snapshots from customers'
//! clusters and packs from other teams, often read as root.
//!
//! Only regular files are read: a FIFO would block forever, `/dev/zero`
//! never ends, and merely opening some devices acts (`/dev/watchdog`), so
//! the type is checked before the file is opened, and again on the open
//! file. Every kind of file has a size cap ([`Limit`], listed in
//! `docs/limits.md`), checked before anything is read. A [`Boundary`] keeps
//! symbolic links from leading a snapshot or a pack outside its directory.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::problem::{ParseIssue, Problem, line_col};

/// A mebibyte, in bytes.
pub const MIB: u64 = 1024 * 1024;

/// The most one file of a kind may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub bytes: u64,
    /// The kind of file, as the error names it: "a namespace dump file".
    pub what: &'static str,
}

/// A file of Kubernetes objects under `cluster/`. Objects may be split over
/// any number of files, so a bigger cluster is never stuck at this cap.
pub const CLUSTER_FILE: Limit = Limit {
    bytes: 256 * MIB,
    what: "a cluster/ file (split bigger object lists into several files)",
};

/// A snapshot's cluster cache (`cluster.cache`): the model of `cluster/`,
/// about a sixteenth of its JSON.
pub const CLUSTER_CACHE: Limit = Limit {
    bytes: 1024 * MIB,
    what: "a cluster cache",
};

/// A pack's `pack.yaml`, script, library module or test file.
pub const PACK_FILE: Limit = Limit {
    bytes: MIB,
    what: "a pack file",
};

impl Limit {
    fn exceeded(&self, path: &Path, size: u64) -> Problem {
        Problem::in_file(
            path,
            format!(
                "{size} bytes: larger than the {} that {} may hold; not read",
                size_text(self.bytes),
                self.what
            ),
        )
    }
}

fn size_text(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Reads a regular file of at most `limit` as UTF-8 text. `Ok(None)` when it
/// does not exist. Anything else that is not a regular file of that size, a
/// file that cannot be read, and one that is not UTF-8 (positioned at the
/// first bad byte) is a problem.
pub fn read_text(path: &Path, limit: Limit) -> Result<Option<String>, Problem> {
    read_text_into(path, limit, Vec::new())
}

/// [`read_text`] into `buffer`, whose memory is reused: reading hundreds of
/// megabytes into fresh memory costs the kernel a page fault per page.
pub fn read_text_into(
    path: &Path,
    limit: Limit,
    buffer: Vec<u8>,
) -> Result<Option<String>, Problem> {
    let Some(bytes) = read_bytes_into(path, limit, buffer)? else {
        return Ok(None);
    };
    text_of(path, bytes).map(Some)
}

/// `bytes`, read from `path`, as text: a problem at the first byte that is
/// not UTF-8.
fn text_of(path: &Path, bytes: Vec<u8>) -> Result<String, Problem> {
    String::from_utf8(bytes).map_err(|e| not_utf8(path, e.as_bytes(), e.utf8_error().valid_up_to()))
}

/// `bytes`, read from `path`, are not UTF-8 from `valid_up_to` on: the
/// problem positions the first bad byte.
fn not_utf8(path: &Path, bytes: &[u8], valid_up_to: usize) -> Problem {
    let valid = std::str::from_utf8(&bytes[..valid_up_to]).unwrap_or_default();
    let (line, column) = line_col(valid, valid_up_to);
    Problem::from_issue(path, ParseIssue::at(line, column, "not valid UTF-8"))
}

/// Files of at least this many bytes are mapped by [`read_text_mapped`]
/// rather than copied: a kube-proxy node's iptables dump is 21 MB at
/// 10,000 Services, and copying it into fresh memory was a sixth of a
/// flow's time (a page fault per page, then the copy).
pub const MAP_FROM: u64 = MIB;

/// How much of a mapped text [`Text::release`] is asked for at a time by a
/// reader going through it, and how much its check as UTF-8 reads before
/// releasing what it read.
pub const RELEASE_EVERY: usize = 4 * 1024 * 1024;

/// A file's UTF-8 text, read into memory of its own or, from
/// [`MAP_FROM`] bytes on, mapped from the file ([`read_text_mapped`]).
///
/// A mapped text assumes what every reader of a snapshot assumes: the
/// snapshot is not changed while it is read. Its bytes were checked as
/// UTF-8 when it was mapped, and a page is read from the file again
/// whenever it is touched after [`Text::release`]; a file cut short under
/// the mapping (written in place, not replaced by a rename, as collection
/// writes it) would stop the process with SIGBUS at the first page past its
/// new end, and one rewritten in place could make a text that is no longer
/// what was checked. Only regular files are mapped, never a FIFO or a
/// device, and only files too large to copy cheaply.
pub struct Text(Held);

enum Held {
    Read(String),
    /// Checked as UTF-8 whole when mapped.
    Mapped(Mmap),
}

impl Text {
    /// Lets the pages holding `range` of a mapped text leave the process's
    /// memory: they stay in the page cache and are mapped again when
    /// touched. A reader that went through a large text once (the
    /// structure of an iptables dump) keeps in memory only the few pages it
    /// comes back to. Nothing for a text that was read.
    pub fn release(&self, range: std::ops::Range<usize>) {
        if let Held::Mapped(map) = &self.0 {
            release_pages(map, range);
        }
    }
}

/// Hands back the pages of `map` in `range` (byte offsets, rounded out to
/// whole pages), as [`Text::release`] does: read through once, they need
/// not stay in the process's memory.
pub fn release_pages(map: &Mmap, range: std::ops::Range<usize>) {
    if range.start < range.end && range.end <= map.len() {
        // SAFETY: the mapping is private and read-only, never written:
        // dropping its pages loses nothing, a touch reads them again from
        // the file. madvise failing only keeps them in memory.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len())
        };
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text(Held::Read(text))
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        match &self.0 {
            Held::Read(text) => text,
            // SAFETY: checked as UTF-8 when mapped (`map_text`), and the
            // file is not changed while a snapshot is read (see `Text`).
            Held::Mapped(map) => unsafe { std::str::from_utf8_unchecked(map) },
        }
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// [`read_text`], mapping a file of [`MAP_FROM`] bytes or more ([`Text`])
/// instead of copying it into memory.
pub fn read_text_mapped(path: &Path, limit: Limit) -> Result<Option<Text>, Problem> {
    let Some((file, opened)) = open_regular(path, Some(limit))? else {
        return Ok(None);
    };
    if opened.len() < MAP_FROM {
        let bytes = read_opened(path, file, &opened, limit, Vec::new())?;
        return text_of(path, bytes).map(|text| Some(Text::from(text)));
    }
    let cannot = |e: std::io::Error| Problem::in_file(path, format!("cannot read: {e}"));
    // SAFETY: a regular file, mapped private and read-only; the snapshot
    // is not changed while it is read (see `Text`).
    let map = unsafe { Mmap::map(&file) }.map_err(cannot)?;
    if map.len() as u64 > limit.bytes {
        return Err(limit.exceeded(path, map.len() as u64));
    }
    let text = Text(Held::Mapped(map));
    check_utf8_releasing(path, &text)?;
    Ok(Some(text))
}

/// Checks a mapped text as UTF-8 a part at a time, each part released
/// once checked: the check alone would keep the whole file in memory.
fn check_utf8_releasing(path: &Path, text: &Text) -> Result<(), Problem> {
    let Held::Mapped(bytes) = &text.0 else {
        return Ok(());
    };
    let mut at = 0;
    while at < bytes.len() {
        let end = bytes.len().min(at + RELEASE_EVERY);
        let checked = match std::str::from_utf8(&bytes[at..end]) {
            Ok(_) => end,
            // A character cut by the part's end is checked with the next.
            Err(e) if e.error_len().is_none() && end < bytes.len() && e.valid_up_to() > 0 => {
                at + e.valid_up_to()
            }
            Err(e) => return Err(not_utf8(path, bytes, at + e.valid_up_to())),
        };
        text.release(at..checked);
        at = checked;
    }
    Ok(())
}

/// [`read_text_into`] of a file that need not be text.
pub fn read_bytes_into(
    path: &Path,
    limit: Limit,
    buffer: Vec<u8>,
) -> Result<Option<Vec<u8>>, Problem> {
    let Some((file, opened)) = open_regular(path, Some(limit))? else {
        return Ok(None);
    };
    read_opened(path, file, &opened, limit, buffer).map(Some)
}

/// The bytes of `file`, opened at `path` by [`open_regular`], within
/// `limit`, read into `buffer`.
fn read_opened(
    path: &Path,
    file: File,
    opened: &Metadata,
    limit: Limit,
    buffer: Vec<u8>,
) -> Result<Vec<u8>, Problem> {
    let cannot = |e: std::io::Error| Problem::in_file(path, format!("cannot read: {e}"));
    let bytes = read_at_most(file, opened.len(), limit.bytes, buffer).map_err(cannot)?;
    if bytes.len() as u64 > limit.bytes {
        return Err(limit.exceeded(path, bytes.len() as u64));
    }
    Ok(bytes)
}

/// Opens `path` for reading when it is a regular file (within `limit`,
/// when there is one), checked before it is opened and again once it is:
/// the open file and its metadata; `None` when there is no such file.
pub fn open_regular(
    path: &Path,
    limit: Option<Limit>,
) -> Result<Option<(File, Metadata)>, Problem> {
    let cannot = |e: std::io::Error| Problem::in_file(path, format!("cannot read: {e}"));
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match path.symlink_metadata() {
                Ok(_) => Err(Problem::in_file(
                    path,
                    "symbolic link to nothing (its target does not exist)",
                )),
                Err(_) => Ok(None),
            };
        }
        Err(e) => return Err(cannot(e)),
    };
    regular(path, &metadata, limit)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(cannot)?;
    let opened = file.metadata().map_err(cannot)?;
    if (opened.dev(), opened.ino()) != (metadata.dev(), metadata.ino()) {
        return Err(Problem::in_file(
            path,
            "cannot read: it changed while opened",
        ));
    }
    regular(path, &opened, limit)?;
    Ok(Some((file, opened)))
}

fn read_at_most(
    file: File,
    expected: u64,
    max: u64,
    mut bytes: Vec<u8>,
) -> std::io::Result<Vec<u8>> {
    bytes.clear();
    bytes.reserve(usize::try_from(expected.min(max)).unwrap_or(0));
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn regular(path: &Path, metadata: &Metadata, limit: Option<Limit>) -> Result<(), Problem> {
    let file_type = metadata.file_type();
    let what = if file_type.is_file() {
        return match limit {
            Some(limit) if metadata.len() > limit.bytes => {
                Err(limit.exceeded(path, metadata.len()))
            }
            _ => Ok(()),
        };
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a file"
    };
    Err(Problem::in_file(
        path,
        format!("{what}, not a regular file; not read"),
    ))
}

/// The directory an input must stay inside, symbolic links resolved.
#[derive(Debug, Clone)]
pub struct Boundary {
    root: PathBuf,
    /// As the user named it, for messages.
    named: PathBuf,
}

impl Boundary {
    /// The tree under `root`. A `root` that does not exist yet holds nothing
    /// to read, so it is taken as written.
    pub fn new(root: &Path) -> Boundary {
        Boundary {
            root: root.canonicalize().unwrap_or_else(|_| root.to_path_buf()),
            named: root.to_path_buf(),
        }
    }

    /// `Ok` when `path`, every symbolic link on the way resolved, is inside
    /// the boundary, or does not exist; a problem naming where it leads
    /// otherwise.
    pub fn check(&self, path: &Path) -> Result<(), Problem> {
        let resolved = match path.canonicalize() {
            Ok(resolved) => resolved,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Problem::in_file(path, format!("cannot read: {e}"))),
        };
        if resolved.starts_with(&self.root) {
            Ok(())
        } else {
            Err(Problem::in_file(
                path,
                format!(
                    "symbolic link leading outside {} (to {}); not followed",
                    self.named.display(),
                    resolved.display()
                ),
            ))
        }
    }

    /// [`read_text`] of a file that must be inside the boundary.
    pub fn read_text(&self, path: &Path, limit: Limit) -> Result<Option<String>, Problem> {
        self.read_text_into(path, limit, Vec::new())
    }

    /// [`read_text_mapped`] of a file that must be inside the boundary.
    pub fn read_text_mapped(&self, path: &Path, limit: Limit) -> Result<Option<Text>, Problem> {
        self.check(path)?;
        read_text_mapped(path, limit)
    }

    /// [`read_text_into`] of a file that must be inside the boundary.
    pub fn read_text_into(
        &self,
        path: &Path,
        limit: Limit,
        buffer: Vec<u8>,
    ) -> Result<Option<String>, Problem> {
        self.check(path)?;
        read_text_into(path, limit, buffer)
    }

    /// [`open_regular`] of a file inside the boundary, within `limit`,
    /// mapped into memory to be read in place. A page of it is read from the file when it is first
    /// touched. The file must not be cut short while it is mapped (its
    /// writers replace it whole, by renaming another over it): reading a
    /// page past its new end would stop the process.
    pub fn map(&self, path: &Path, limit: Limit) -> Result<Option<Mmap>, Problem> {
        self.check(path)?;
        let Some((file, _)) = open_regular(path, Some(limit))? else {
            return Ok(None);
        };
        // SAFETY: the mapping is read-only and private to this process; the
        // file is a regular file checked within its limit. What it holds is
        // checked before it is trusted (a cache's checksum and tables), and
        // a file replaced by rename leaves this mapping on the old one.
        let map = unsafe { Mmap::map(&file) }
            .map_err(|e| Problem::in_file(path, format!("cannot read: {e}")))?;
        Ok(Some(map))
    }

    /// Whether `path` is a directory inside the boundary: a link to a
    /// directory outside it is a problem, and not followed.
    /// [`open_regular`] of a file inside the boundary.
    pub fn open(&self, path: &Path) -> Result<Option<(File, Metadata)>, Problem> {
        self.check(path)?;
        open_regular(path, None)
    }

    pub fn is_dir(&self, path: &Path) -> Result<bool, Problem> {
        if !path.is_dir() {
            return Ok(false);
        }
        self.check(path).map(|()| true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limit = Limit {
        bytes: 8,
        what: "a test file",
    };

    #[test]
    fn regular_file_within_its_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "12345678").unwrap();
        assert_eq!(
            read_text(&path, SMALL).unwrap().as_deref(),
            Some("12345678")
        );
        assert_eq!(read_text(&dir.path().join("missing"), SMALL), Ok(None));
    }

    #[test]
    fn file_over_its_limit_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "123456789").unwrap();
        let problem = read_text(&path, SMALL).unwrap_err();
        assert!(
            problem
                .message
                .starts_with("9 bytes: larger than the 8 bytes that a test file"),
            "{problem}"
        );
    }

    #[test]
    fn character_device_is_refused_before_it_is_opened() {
        let problem = read_text(Path::new("/dev/zero"), SMALL).unwrap_err();
        assert_eq!(
            problem.message,
            "a character device, not a regular file; not read"
        );
    }

    /// `line` again and again, over two parts of [`RELEASE_EVERY`] bytes.
    fn large_text(line: &str) -> String {
        line.repeat(2 * RELEASE_EVERY / line.len() + 1)
    }

    #[test]
    fn large_file_is_mapped_and_stays_its_text_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content = large_text("-A KUBE-SVC-X -m comment --comment \"é\" -j ACCEPT\n");
        std::fs::write(&path, &content).unwrap();
        let text = read_text_mapped(&path, CLUSTER_FILE).unwrap().unwrap();
        assert!(matches!(text.0, Held::Mapped(_)));
        assert!(*text == *content);
        text.release(0..text.len());
        text.release(5..5);
        text.release(0..text.len() + 1);
        assert!(*text == *content);
        // A small one is read.
        std::fs::write(&path, "*filter\n").unwrap();
        let text = read_text_mapped(&path, CLUSTER_FILE).unwrap().unwrap();
        assert!(matches!(text.0, Held::Read(_)));
        assert_eq!(&*text, "*filter\n");
        assert!(matches!(
            read_text_mapped(&dir.path().join("missing"), SMALL),
            Ok(None)
        ));
    }

    #[test]
    fn large_file_that_is_not_utf8_is_positioned_as_a_read_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // Lines of 3 bytes, `é` and a newline: the first part ends inside
        // an `é` (2^22 is 1 more than a multiple of 3), which is no problem.
        let mut content = large_text("é\n").into_bytes();
        assert_eq!(RELEASE_EVERY % 3, 1);
        let line = RELEASE_EVERY * 3 / 2 / 3;
        content[line * 3 + 2] = 0xff;
        std::fs::write(&path, &content).unwrap();
        let read = read_text(&path, CLUSTER_FILE).unwrap_err();
        assert_eq!(
            (read.line, read.column),
            (Some(line + 1), Some(2)),
            "{read}"
        );
        assert_eq!(read_text_mapped(&path, CLUSTER_FILE).unwrap_err(), read);
        content[line * 3 + 2] = b'\n';
        std::fs::write(&path, &content).unwrap();
        assert!(*read_text_mapped(&path, CLUSTER_FILE).unwrap().unwrap() == *large_text("é\n"));
        // The last character cut short.
        let cut = content.len() - 2;
        std::fs::write(&path, &content[..cut]).unwrap();
        let read = read_text(&path, CLUSTER_FILE).unwrap_err();
        assert_eq!(read_text_mapped(&path, CLUSTER_FILE).unwrap_err(), read);
    }

    #[test]
    fn large_file_over_its_limit_or_no_file_is_refused_unmapped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, large_text("x\n")).unwrap();
        let limit = Limit {
            bytes: MAP_FROM,
            what: "a test file",
        };
        let problem = read_text_mapped(&path, limit).unwrap_err();
        assert!(
            problem.message.contains("larger than the 1 MiB"),
            "{problem}"
        );
        let problem = read_text_mapped(Path::new("/dev/zero"), limit).unwrap_err();
        assert_eq!(
            problem.message,
            "a character device, not a regular file; not read"
        );
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|status| status.success()));
        let problem = read_text_mapped(&fifo, limit).unwrap_err();
        assert_eq!(problem.message, "a FIFO, not a regular file; not read");
    }

    #[test]
    fn link_out_of_the_boundary_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("real"), "x").unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("in")).unwrap();
        let boundary = Boundary::new(dir.path());
        let problem = boundary.check(&dir.path().join("out")).unwrap_err();
        assert!(
            problem.message.contains("symbolic link leading outside"),
            "{problem}"
        );
        assert_eq!(
            boundary.read_text(&dir.path().join("in"), SMALL),
            Ok(Some("x".to_owned()))
        );
    }
}
