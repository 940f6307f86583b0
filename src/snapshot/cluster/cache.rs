//! The cluster cache, `<snapshot>/cluster.cache`: the model `cluster/` loads
//! into, and the problems found loading it, written once (by `skoop collect`
//! or `skoop snapshot cache`) so that a later load reads a compact binary
//! model instead of parsing every object's JSON again. On a 5,000-node
//! cluster that is 42.1 MiB instead of 537 MiB, read in place
//! (`super::indexed`): a flow decodes the objects it asks for.
//!
//! Invariants:
//! - A cache is used only when it is `cluster/`'s own: written by a build
//!   whose snapshot code is this one's ([`SNAPSHOT_CODE`]), for the same
//!   files, each of the same size and either the same inode and the same
//!   modification and change times (`stat`'s mtime and ctime, taken more
//!   than a second after the file was last written) or the same SHA-256 of
//!   its content.
//! - Loading from a cache gives what loading `cluster/` gives: the same
//!   model and the same problems, with the sources of objects and problems
//!   where the snapshot is now (`snapshot check` compares the two). A file
//!   the load could not read holds nothing but its problem; it is read again
//!   (and must fail again) on every load, so that its problem is today's.
//! - A cache that cannot be used is never an error: `cluster/` is read, and a
//!   problem says why the cache was passed over. How much of it is read and
//!   decoded is bounded by what `cluster/` holds today, whatever the cache
//!   claims: the file by what a cache of the listed files could take, its
//!   header by the files listed (their count checked before any stamp is
//!   decoded), its model by the readable files' sizes, once checked.
//!   [`write`] refuses a model [`read`] would. A model inside the bounds is
//!   trusted: a forged one is believed, its tables checked before they are
//!   used and each object when it is decoded (`docs/limits.md`).
//! - A cache carries the CRC-32 of its header and model, checked before
//!   either is decoded: a byte changed since it was written (a bad disk, a
//!   careless edit) passes the cache over rather than becoming another
//!   cluster. It guards against accidents, not forgers (see above), so a
//!   CRC does: every read of a cache checks all of it, and at 5,000 nodes a
//!   SHA-256 of its 42 MiB was a tenth of one flow's CPU.
//! - The model's sources are relative to `cluster/`: a cache's size does
//!   not depend on where its snapshot is, and it is read wherever it moved.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Cluster;
use super::indexed::{Indexed, LayoutError, encode};
use super::load::{Budget, Listing, list, load_listed_digesting};
use crate::snapshot::input::{self, Boundary};
use crate::snapshot::problem::Problem;

/// The cache's file name in a snapshot, beside `cluster/`.
pub const FILE_NAME: &str = "cluster.cache";

/// What a cache file starts with: the layout's version. The CRC-32 of
/// the rest of the file follows it, then the header and the model.
const MAGIC: &[u8; 8] = b"skoop-c5";

/// The length of the checksum after [`MAGIC`].
const CHECKSUM: usize = 4;

/// The length of what comes before a cache's header: [`MAGIC`] and the
/// checksum.
pub const FRAME: usize = MAGIC.len() + CHECKSUM;

/// This build's snapshot code (`build.rs`): a cache written by a build with
/// another is passed over, since that build may read `cluster/` otherwise.
pub const SNAPSHOT_CODE: &str = env!("SKOOP_SNAPSHOT_CODE");

/// What a cache is checked against before its model is read. It is
/// stored as a [`Preamble`], then each stamp, then each listing problem, so
/// that how many there are is checked against `cluster/` before any is
/// decoded.
#[derive(Debug)]
struct Header {
    snapshot_code: String,
    /// Every file the load read, relative to `cluster/`, in its order.
    files: Vec<Stamp>,
    /// What was wrong with listing `cluster/`, relative to it.
    listing_problems: Vec<StoredProblem>,
}

/// The start of a header: the build that wrote it, and how many stamps and
/// listing problems follow.
#[derive(Serialize, Deserialize)]
struct Preamble {
    snapshot_code: String,
    files: u32,
    listing_problems: u32,
}

/// How many more stamps or listing problems than `cluster/` has today a
/// header may hold, so that a few files gone still say which.
const HEADER_LEEWAY: usize = 64;

/// One file of `cluster/` as it was when its objects were read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    path: PathBuf,
    len: u64,
    identity: Identity,
    /// Whether equal times alone tell the file unchanged: it was last
    /// written more than a second before it was stamped (a write within
    /// the same tick of the clock would leave the times as they are).
    times_tell: bool,
    /// The SHA-256 of the bytes the load parsed; `None` for a file it could
    /// not read (a link out of the snapshot, a FIFO, one over its cap).
    sha256: Option<[u8; 32]>,
    /// For a file the load could not read: where its problem goes among the
    /// load's problems (the cache does not hold it: it is made anew).
    problem_at: Option<u32>,
}

/// What tells a file from another and from itself before a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Identity {
    /// Its modification and change times (`stat`'s mtime and ctime, each
    /// seconds and nanoseconds), as bytes of a fixed size, so that a
    /// cache's size does not depend on when its files were written. The
    /// change time moves with `chmod`, `chown` and every write, and cannot
    /// be set back.
    times: [u8; 24],
    /// Its device and inode: they tell apart two files written in the same
    /// tick of the clock (a link retargeted from one to the other).
    device: u64,
    inode: u64,
}

/// A [`Problem`] as the cache stores it (its JSON form leaves out what is
/// absent, which a binary form cannot).
pub(super) type StoredProblem = (PathBuf, Option<usize>, Option<usize>, String);

fn stored(problem: Problem) -> StoredProblem {
    (problem.file, problem.line, problem.column, problem.message)
}

fn unstored((file, line, column, message): StoredProblem) -> Problem {
    Problem {
        file,
        line,
        column,
        message,
    }
}

/// What [`write`] wrote.
#[derive(Debug)]
pub struct Written {
    pub path: PathBuf,
    pub bytes: usize,
    pub files: usize,
    pub objects: usize,
    /// The problems of the load, as a diagnosis from the cache will give them.
    pub problems: Vec<Problem>,
}

/// Why no cache could be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{0}")]
    NoClusterDir(Problem),
    #[error("{0}: changed while its objects were read; run again")]
    Changed(PathBuf),
    #[error("{0}: cannot write: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("no user cache directory (neither XDG_CACHE_HOME nor HOME is an absolute path)")]
    NoUserCache,
    #[error("cannot encode the cluster cache's header: {0}")]
    Encode(postcard::Error),
    #[error(transparent)]
    Layout(LayoutError),
    #[error(
        "{0}: its model would be {1} bytes, more than a cache of files of {2} bytes may hold; \
         no cache written (diagnoses read the files)"
    )]
    TooLarge(PathBuf, usize, u64),
}

/// The most a cache's header may take, `listing` being what `cluster/`
/// lists today: a stamp's fixed fields and its path for each file, each
/// listing problem, and the preamble.
fn header_bound(listing: &Listing) -> usize {
    const PER_FILE: usize = 128;
    const PER_PROBLEM: usize = 64;
    const PREAMBLE: usize = 8 * 1024;
    let files = listing
        .files
        .iter()
        .map(|file| file.as_os_str().len().saturating_add(PER_FILE))
        .fold(0, usize::saturating_add);
    let problems = listing
        .problems
        .iter()
        .map(|problem| problem.file.as_os_str().len() + problem.message.len() + PER_PROBLEM)
        .fold(0, usize::saturating_add);
    PREAMBLE.saturating_add(files).saturating_add(problems)
}

/// The most a cache's model may take for files of `files_bytes` bytes in
/// all: what loading them could make (an object's generic fields are kept
/// as JSON text, a YAML file's sometimes longer than the YAML).
fn model_bound(files_bytes: u64) -> u64 {
    files_bytes.saturating_mul(2).saturating_add(256 * 1024)
}

/// A snapshot just collected would otherwise be hashed on every load; for
/// this many bytes of files written less than a second before they were
/// stamped, [`write`] waits for their times to tell and stamps them again.
const RESTAMP_FRESH_ABOVE: u64 = 16 * 1024 * 1024;

/// `<root>/cluster`, when it is a directory inside the snapshot: the only
/// `cluster/` a load reads, and so the only one a cache is for.
fn cluster_dir(root: &Path, boundary: &Boundary) -> Result<PathBuf, Problem> {
    let dir = root.join("cluster");
    match boundary.is_dir(&dir)? {
        true => Ok(dir),
        false => Err(Problem::in_file(&dir, "not a directory")),
    }
}

/// Loads `<root>/cluster/` and writes `<root>/cluster.cache` for it,
/// atomically (a cache half written is never read).
pub fn write(root: &Path, boundary: &Boundary, budget: Budget) -> Result<Written, WriteError> {
    write_restamping(root, boundary, budget, RESTAMP_FRESH_ABOVE)
}

/// [`write`], stamping again files just written when they hold at least
/// `restamp_fresh_above` bytes in all.
fn write_restamping(
    root: &Path,
    boundary: &Boundary,
    budget: Budget,
    restamp_fresh_above: u64,
) -> Result<Written, WriteError> {
    let cluster_dir = cluster_dir(root, boundary).map_err(WriteError::NoClusterDir)?;
    let mut stamped = load_stamped(&cluster_dir, boundary, budget, restamp_fresh_above);
    let path = root.join(FILE_NAME);
    let header = stamped.header.take().ok_or_else(|| {
        WriteError::Changed(
            stamped
                .changed
                .clone()
                .unwrap_or_else(|| cluster_dir.clone()),
        )
    })?;
    let bytes = encoded(&cluster_dir, &header, &mut stamped, &path)?;
    persist(root, &path, &bytes)?;
    Ok(Written {
        path,
        bytes: bytes.len(),
        files: header.files.len(),
        objects: stamped.cluster.object_count(),
        problems: stamped.problems,
    })
}

/// Below this many bytes of files in `cluster/`, a load writes no cache of
/// its own accord: reading them costs less than a cache file beside them.
const WRITE_UNASKED_FROM: u64 = 16 * 1024 * 1024;

/// The most the caches in the user's cache directory take together: the
/// least recently used go first.
const USER_CACHES_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Loads `<root>/cluster/` (within `budget`) and, when its files are large
/// enough to be worth it ([`WRITE_UNASKED_FROM`]), writes its cache on the
/// way, so that the next load reads that: in the snapshot when it can be
/// written to, else in the user's cache directory ([`user_cache`]). What
/// stops a cache from being written (a file changed while it was read, a
/// directory that cannot be written to) is no problem of the load's.
pub fn load_writing(root: &Path, boundary: &Boundary, budget: Budget) -> (Cluster, Vec<Problem>) {
    load_writing_into(root, boundary, budget, WRITE_UNASKED_FROM, user_cache(root))
}

/// [`load_writing`] for files of `from_bytes` or more, the user's cache
/// being `user` (`None`: there is none).
fn load_writing_into(
    root: &Path,
    boundary: &Boundary,
    budget: Budget,
    from_bytes: u64,
    user: Option<PathBuf>,
) -> (Cluster, Vec<Problem>) {
    let cluster_dir = root.join("cluster");
    let listing = list(&cluster_dir);
    let bytes = listing
        .files
        .iter()
        .map(|file| stat(file, boundary).0)
        .fold(0, u64::saturating_add);
    if bytes < from_bytes {
        return super::load::load_within(&cluster_dir, boundary, budget);
    }
    // No waiting for fresh files' times: this is a diagnosis, not `skoop
    // snapshot cache`. Those files are hashed on every load instead.
    let mut stamped = load_stamped(&cluster_dir, boundary, budget, u64::MAX);
    if let Some(header) = stamped.header.take() {
        let _ = write_unasked(root, &cluster_dir, &header, &mut stamped, user);
    }
    (stamped.cluster, stamped.problems)
}

/// Writes the cache of a load in the snapshot, else in the user's cache
/// directory.
fn write_unasked(
    root: &Path,
    cluster_dir: &Path,
    header: &Header,
    stamped: &mut Stamped,
    user: Option<PathBuf>,
) -> Result<(), WriteError> {
    let beside = root.join(FILE_NAME);
    let bytes = encoded(cluster_dir, header, stamped, &beside)?;
    if persist(root, &beside, &bytes).is_ok() {
        return Ok(());
    }
    let user = user.ok_or(WriteError::NoUserCache)?;
    let dir = user.parent().ok_or(WriteError::NoUserCache)?;
    let io = |e: std::io::Error| WriteError::Io(user.clone(), e);
    std::fs::create_dir_all(dir).map_err(io)?;
    persist(dir, &user, &bytes)?;
    evict(dir, &user, USER_CACHES_BYTES);
    Ok(())
}

/// Where the cache of the snapshot at `root` goes when the snapshot cannot
/// be written to: `$XDG_CACHE_HOME/skoop/` (else `~/.cache/skoop/`), named
/// by the SHA-256 of the snapshot's canonical path. Its stamps, not its
/// name, say whether it is the files' own.
pub fn user_cache(root: &Path) -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    let base = absolute("XDG_CACHE_HOME").or_else(|| Some(absolute("HOME")?.join(".cache")))?;
    let root = root.canonicalize().ok()?;
    let key = Sha256::digest(root.as_os_str().as_encoded_bytes());
    let name: String = key[..20].iter().map(|b| format!("{b:02x}")).collect();
    Some(base.join("skoop").join(format!("{name}.cache")))
}

/// Removes the least recently used caches of `dir` (by modification time:
/// a read touches it) until they take at most `most` bytes; `keep` stays.
fn evict(dir: &Path, keep: &Path, most: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut caches: Vec<(SystemTime, u64, PathBuf)> = entries
        .flatten()
        .filter(|entry| entry.path().extension().is_some_and(|e| e == "cache"))
        .filter_map(|entry| {
            let metadata = entry.metadata().ok()?;
            let used = metadata.modified().ok()?;
            Some((used, metadata.len(), entry.path()))
        })
        .collect();
    caches.sort();
    let mut total = caches
        .iter()
        .map(|(_, len, _)| *len)
        .fold(0, u64::saturating_add);
    for (_, len, path) in caches {
        if total <= most {
            break;
        }
        if path != keep && std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

/// A load of `cluster/` with what a cache of it is checked against.
struct Stamped {
    cluster: Cluster,
    problems: Vec<Problem>,
    /// `None` when a file changed while it was read (named in `changed`).
    header: Option<Header>,
    changed: Option<PathBuf>,
}

/// Loads `cluster_dir`, stamping each file as it was read.
fn load_stamped(
    cluster_dir: &Path,
    boundary: &Boundary,
    budget: Budget,
    restamp_fresh_above: u64,
) -> Stamped {
    let stamped_at = SystemTime::now();
    let listing = list(cluster_dir);
    let files = listing.files.clone();
    let listing_problems = relative(cluster_dir, listing.problems.iter().cloned());
    let before: Vec<(u64, Identity)> = files.iter().map(|path| stat(path, boundary)).collect();
    let ((cluster, problems), digests) = load_listed_digesting(listing, boundary, budget);
    // Stat again after the load: a file changed meanwhile may have been
    // loaded as it is now or as it was.
    let changed = files
        .iter()
        .zip(&before)
        .find(|(path, before)| stat(path, boundary) != **before)
        .map(|(path, _)| path.clone());
    if changed.is_some() {
        return Stamped {
            cluster,
            problems,
            header: None,
            changed,
        };
    }
    let mut stamps = Vec::new();
    for ((path, (len, identity)), sha256) in files.iter().zip(before).zip(digests) {
        // An unreadable file's only problem is its reading's.
        let problem_at = match sha256 {
            Some(_) => None,
            None => problems.iter().position(|problem| problem.file == *path),
        };
        stamps.push(Stamp {
            path: path.strip_prefix(cluster_dir).unwrap_or(path).to_path_buf(),
            len,
            identity,
            times_tell: written_before(&identity, stamped_at),
            sha256,
            problem_at: problem_at.and_then(|at| u32::try_from(at).ok()),
        });
    }
    restamp_fresh(&files, &mut stamps, boundary, restamp_fresh_above);
    Stamped {
        cluster,
        problems,
        header: Some(Header {
            snapshot_code: SNAPSHOT_CODE.to_owned(),
            files: stamps,
            listing_problems,
        }),
        changed: None,
    }
}

/// The cache file of a stamped load, to be written at `path` (a cache
/// already there is removed when the model is too large for one).
fn encoded(
    cluster_dir: &Path,
    header: &Header,
    stamped: &mut Stamped,
    path: &Path,
) -> Result<Vec<u8>, WriteError> {
    let unreadable: BTreeSet<usize> = header
        .files
        .iter()
        .filter_map(|stamp| Some(stamp.problem_at? as usize))
        .collect();
    let stored_problems = stamped
        .problems
        .iter()
        .enumerate()
        .filter(|(at, _)| !unreadable.contains(at))
        .map(|(_, problem)| problem.clone());
    let files_bytes = readable_bytes(&header.files);
    let problems = relative(cluster_dir, stored_problems);
    let mut body = encode_header(header).map_err(WriteError::Encode)?;
    let model = stamped.cluster.model_mut();
    model.rebase(cluster_dir, Path::new(""));
    let laid_out = encode(model, &problems);
    model.rebase(Path::new(""), cluster_dir);
    let laid_out = laid_out.map_err(WriteError::Layout)?;
    let model_bytes = laid_out.len();
    body.extend_from_slice(&laid_out);
    if model_bytes as u64 > model_bound(files_bytes) {
        // A cache written before would be passed over, saying to write
        // it anew: it goes.
        let _ = std::fs::remove_file(path);
        return Err(WriteError::TooLarge(
            path.to_path_buf(),
            model_bytes,
            files_bytes,
        ));
    }
    Ok(framed(&body))
}

/// Writes `bytes` at `path` in `dir`, atomically.
fn persist(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    // tempfile's errors name its temporary file; the cache's name is enough.
    let io = |e: std::io::Error| WriteError::Io(path.to_path_buf(), std::io::Error::from(e.kind()));
    let file = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    // Readable as the snapshot's other files are (a temporary file is the
    // owner's alone).
    let readable = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    file.as_file().set_permissions(readable).map_err(io)?;
    std::io::Write::write_all(&mut file.as_file(), bytes).map_err(io)?;
    file.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Stamps again, once their times can tell, the files first stamped less
/// than a second after they were written, when they hold at least `above`
/// bytes in all (hashing fewer on every load costs less than the wait).
fn restamp_fresh(files: &[PathBuf], stamps: &mut [Stamp], boundary: &Boundary, above: u64) {
    let fresh: Vec<usize> = (0..stamps.len())
        .filter(|&at| stamps[at].sha256.is_some() && !stamps[at].times_tell)
        .collect();
    let fresh_bytes = fresh
        .iter()
        .map(|&at| stamps[at].len)
        .fold(0, u64::saturating_add);
    if fresh.is_empty() || fresh_bytes < above {
        return;
    }
    let Some(latest) = fresh
        .iter()
        .map(|&at| latest_write(&stamps[at].identity))
        .max()
    else {
        return;
    };
    // Until the clock's whole seconds are two past the latest write's: a
    // write in the tick of a stamped time is then over.
    let past = Duration::from_secs(u64::try_from(latest).unwrap_or(0).saturating_add(2));
    match (SystemTime::UNIX_EPOCH + past).duration_since(SystemTime::now()) {
        Ok(wait) if wait <= Duration::from_secs(2) => std::thread::sleep(wait),
        // Written in the future: by a clock elsewhere (a file server's)
        // that this one cannot be told against. Those files are hashed.
        Ok(_) => return,
        Err(_) => {}
    }
    let stamped_at = SystemTime::now();
    for at in fresh {
        let stamp = &mut stamps[at];
        // Its bytes read after `stamped_at` are those the load hashed, and
        // its stat afterwards is the first stamp's: nothing wrote it since
        // the tick of its stamped times.
        if digest(&files[at], boundary) == stamp.sha256
            && stat(&files[at], boundary) == (stamp.len, stamp.identity)
        {
            stamp.times_tell = written_before(&stamp.identity, stamped_at);
        }
    }
}

/// The bytes of the files a load could read: what a model is made of (a
/// file over its cap is not read, whatever a stamp says).
fn readable_bytes(stamps: &[Stamp]) -> u64 {
    stamps
        .iter()
        .filter(|stamp| stamp.sha256.is_some())
        .map(|stamp| stamp.len)
        .fold(0, u64::saturating_add)
}

/// The model and problems of `<root>/cluster/` from its cache: `Ok(None)`
/// when there is no cache, a problem saying why when it cannot be used.
pub fn read(root: &Path, boundary: &Boundary) -> Result<Option<(Cluster, Vec<Problem>)>, Problem> {
    let beside = root.join(FILE_NAME);
    if std::fs::symlink_metadata(&beside).is_ok() {
        return read_from(root, boundary, &beside, boundary);
    }
    // One a load wrote in the user's cache directory: outside the
    // snapshot, so not bound to it.
    let Some(user) = user_cache(root).filter(|user| user.is_file()) else {
        return Ok(None);
    };
    let read = read_from(root, boundary, &user, &Boundary::new(Path::new("/")));
    if let Ok(Some(_)) = &read {
        // Used: the last to be evicted.
        let _ = std::fs::File::options()
            .append(true)
            .open(&user)
            .and_then(|file| file.set_modified(SystemTime::now()));
    }
    read
}

/// [`read`] of the cache at `path`, read inside `within`.
fn read_from(
    root: &Path,
    boundary: &Boundary,
    path: &Path,
    within: &Boundary,
) -> Result<Option<(Cluster, Vec<Problem>)>, Problem> {
    let path = path.to_path_buf();
    let passed_over = |why: String| {
        Problem::in_file(
            &path,
            format!("{why}; cluster/ was read instead (`skoop snapshot cache` writes it anew)"),
        )
    };
    let cluster_dir =
        cluster_dir(root, boundary).map_err(|problem| passed_over(problem.to_string()))?;
    let listing = list(&cluster_dir);
    let stats: Vec<(u64, Identity)> = listing
        .files
        .iter()
        .map(|file| stat(file, boundary))
        .collect();
    // No more of the cache is read than a cache of cluster/ as it is could
    // take, whatever it is.
    let listed_bytes = stats
        .iter()
        .map(|(len, _)| *len)
        .fold(0, u64::saturating_add);
    let most = (FRAME as u64)
        .saturating_add(header_bound(&listing) as u64)
        .saturating_add(model_bound(listed_bytes));
    let limit = input::Limit {
        bytes: most.min(input::CLUSTER_CACHE.bytes),
        what: "a cluster cache of cluster/'s files",
    };
    let Some(bytes) = within
        .map(&path, limit)
        .map_err(|problem| passed_over(problem.message))?
    else {
        return Ok(None);
    };
    let body = unframed(&bytes).map_err(passed_over)?;
    let (header, header_len) = decode_header(body, &listing).map_err(passed_over)?;
    let rest = &body[header_len..];
    let unreadable =
        unchanged(&cluster_dir, &header, &listing, &stats, boundary).map_err(passed_over)?;
    // Every readable file's size is now checked against the file: a model
    // larger than they could make is no cache of them, and decoding it is
    // not even tried.
    let files_bytes = readable_bytes(&header.files);
    if rest.len() as u64 > model_bound(files_bytes) {
        return Err(passed_over(format!(
            "its model is {} bytes, more than its files ({files_bytes} bytes) could make",
            rest.len()
        )));
    }
    // Only its tables are read now; an object is decoded when asked for.
    let model_at = bytes.len() - rest.len();
    let (indexed, stored_problems) =
        Indexed::open(bytes, model_at, &cluster_dir).map_err(|e| passed_over(e.to_string()))?;
    let mut problems: Vec<Problem> = stored_problems
        .into_iter()
        .map(unstored)
        .map(|mut problem| {
            if let Some(file) = rebased(&problem.file, Path::new(""), &cluster_dir) {
                problem.file = file;
            }
            problem
        })
        .collect();
    for (at, problem) in unreadable {
        if at > problems.len() {
            return Err(passed_over(
                "not a cluster cache (a problem out of place)".into(),
            ));
        }
        problems.insert(at, problem);
    }
    Ok(Some((Cluster::indexed(indexed), problems)))
}

/// A cache file of `body` (its header and model): [`MAGIC`], the CRC-32 of
/// `body`, and `body`. Public for the fuzz target, which forges caches.
pub fn framed(body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(FRAME + body.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    bytes.extend_from_slice(body);
    bytes
}

/// The body of the mapped cache file `map`, once its version and checksum
/// are checked. A byte changed since it was written (a bad disk, a careless
/// edit) would be decoded into another cluster: nothing is decoded unless
/// the whole is as written. The checksum is made of the mapping a part at a
/// time, each part's pages handed back once summed, not kept in the
/// process's memory: a flow touches only the pages it asks for (and
/// reading the file into a buffer instead copied all of it).
fn unframed(map: &memmap2::Mmap) -> Result<&[u8], String> {
    let checksummed = map
        .strip_prefix(MAGIC)
        .ok_or("not a cluster cache of this version of skoop")?;
    let (checksum, body) = checksummed
        .split_at_checked(CHECKSUM)
        .ok_or("not a cluster cache (cut short)")?;
    let mut hasher = crc32fast::Hasher::new();
    let mut at = FRAME;
    while at < map.len() {
        let end = (at + input::RELEASE_EVERY).min(map.len());
        hasher.update(map.get(at..end).unwrap_or_default());
        input::release_pages(map, at..end);
        at = end;
    }
    if hasher.finalize().to_le_bytes().as_slice() != checksum {
        return Err(
            "its checksum does not match its content: it changed since it was written".into(),
        );
    }
    Ok(body)
}

/// `header` as [`Header`] says it is stored.
fn encode_header(header: &Header) -> Result<Vec<u8>, postcard::Error> {
    let count = |n: usize| u32::try_from(n).map_err(|_| postcard::Error::SerializeBufferFull);
    let preamble = Preamble {
        snapshot_code: header.snapshot_code.clone(),
        files: count(header.files.len())?,
        listing_problems: count(header.listing_problems.len())?,
    };
    let mut bytes = postcard::to_extend(&preamble, Vec::new())?;
    for stamp in &header.files {
        bytes = postcard::to_extend(stamp, bytes)?;
    }
    for problem in &header.listing_problems {
        bytes = postcard::to_extend(problem, bytes)?;
    }
    Ok(bytes)
}

/// The header at the start of `body` (after MAGIC and the checksum) and its length in bytes,
/// decoded only as far as a header of `listing` could go: the build that
/// wrote it is compared first, then how many stamps and listing problems it
/// holds, before any is decoded.
fn decode_header(body: &[u8], listing: &Listing) -> Result<(Header, usize), String> {
    let bounded = &body[..body.len().min(header_bound(listing))];
    let cut_short = |e: postcard::Error| match e {
        postcard::Error::DeserializeUnexpectedEnd if bounded.len() < body.len() => format!(
            "its header is more than the {} bytes cluster/'s files could make",
            bounded.len()
        ),
        e => format!("not a cluster cache ({e})"),
    };
    let (preamble, mut rest) = postcard::take_from_bytes::<Preamble>(bounded).map_err(cut_short)?;
    if preamble.snapshot_code != SNAPSHOT_CODE {
        return Err(format!(
            "written by another build of skoop ({}, this is {SNAPSHOT_CODE})",
            preamble.snapshot_code
        ));
    }
    let (files, listing_problems) = (preamble.files as usize, preamble.listing_problems as usize);
    if files > listing.files.len() + HEADER_LEEWAY
        || listing_problems > listing.problems.len() + HEADER_LEEWAY
    {
        return Err(format!(
            "written for {files} files and {listing_problems} listing problems, \
             and cluster/ has {} and {}",
            listing.files.len(),
            listing.problems.len()
        ));
    }
    let mut header = Header {
        snapshot_code: preamble.snapshot_code,
        files: Vec::with_capacity(files),
        listing_problems: Vec::with_capacity(listing_problems),
    };
    for _ in 0..files {
        let (stamp, after) = postcard::take_from_bytes::<Stamp>(rest).map_err(cut_short)?;
        header.files.push(stamp);
        rest = after;
    }
    for _ in 0..listing_problems {
        let (problem, after) =
            postcard::take_from_bytes::<StoredProblem>(rest).map_err(cut_short)?;
        header.listing_problems.push(problem);
        rest = after;
    }
    Ok((header, bounded.len() - rest.len()))
}

/// `path` under `from` as the same path under `to`.
pub(super) fn rebased(path: &Path, from: &Path, to: &Path) -> Option<PathBuf> {
    let inside = path.strip_prefix(from).ok()?;
    Some(if inside.as_os_str().is_empty() {
        to.to_path_buf()
    } else {
        to.join(inside)
    })
}

/// The whole second of a file's last modification or change.
fn latest_write(identity: &Identity) -> i64 {
    let seconds = |at: usize| {
        let mut word = [0; 8];
        word.copy_from_slice(&identity.times[at..at + 8]);
        i64::from_le_bytes(word)
    };
    seconds(0).max(seconds(12))
}

fn written_before(identity: &Identity, stamped_at: SystemTime) -> bool {
    let stamped = stamped_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    latest_write(identity).saturating_add(1) < i64::try_from(stamped).unwrap_or(i64::MAX)
}

/// How a snapshot's cache stands against its `cluster/` loaded from the
/// files (`snapshot check`).
#[derive(Debug)]
pub enum Verdict {
    /// No cache.
    Absent,
    /// Its model and problems are those of the files: diagnoses read it.
    Current,
    /// It cannot be used, and why: diagnoses read the files.
    PassedOver(Problem),
    /// It claims to be the files' own but holds another model: written by a
    /// faulty build, or by hand.
    Differs(Problem),
}

/// Compares the cache of `root` with `cluster`, its `cluster/` loaded from
/// the files, and the problems of that load (`problems` may hold others,
/// of `nodes/`: those outside `cluster/` are not compared).
pub fn verify(
    root: &Path,
    boundary: &Boundary,
    cluster: &Cluster,
    problems: &[Problem],
) -> Verdict {
    let cluster_dir = root.join("cluster");
    let problems: Vec<Problem> = problems
        .iter()
        .filter(|problem| problem.file.starts_with(&cluster_dir))
        .cloned()
        .collect();
    let (cached_cluster, cached_problems) = match read(root, boundary) {
        Ok(None) => return Verdict::Absent,
        Ok(Some(cached)) => cached,
        Err(problem) => return Verdict::PassedOver(problem),
    };
    let encoded = |cluster: &Cluster, problems: &[Problem]| {
        let problems: Vec<StoredProblem> = problems.iter().cloned().map(stored).collect();
        postcard::to_stdvec(&(cluster, problems)).ok()
    };
    if encoded(&cached_cluster, &cached_problems) == encoded(cluster, &problems) {
        Verdict::Current
    } else {
        Verdict::Differs(Problem::in_file(
            &root.join(FILE_NAME),
            "does not hold what cluster/ loads into, though written for these files; \
             diagnoses would read it: delete it, or write it anew with `skoop snapshot cache`",
        ))
    }
}

/// `Ok` when `cluster/` is as the cache was written for, with the problems
/// of its unreadable files as they are today, each where it goes; what
/// differs otherwise. `stats` are the listed files' [`stat`]s.
fn unchanged(
    cluster_dir: &Path,
    header: &Header,
    listing: &Listing,
    stats: &[(u64, Identity)],
    boundary: &Boundary,
) -> Result<Vec<(usize, Problem)>, String> {
    if relative(cluster_dir, listing.problems.iter().cloned()) != header.listing_problems {
        return Err("cluster/ is listed otherwise than when it was written".into());
    }
    let was: Vec<&Path> = header.files.iter().map(|s| s.path.as_path()).collect();
    let is: Vec<&Path> = listing
        .files
        .iter()
        .map(|f| f.strip_prefix(cluster_dir).unwrap_or(f))
        .collect();
    if was != is {
        let (was_set, is_set): (BTreeSet<&Path>, BTreeSet<&Path>) =
            (was.iter().copied().collect(), is.iter().copied().collect());
        return Err(
            match (
                is_set.difference(&was_set).next(),
                was_set.difference(&is_set).next(),
            ) {
                (Some(new), _) => format!("cluster/{} is new since it was written", new.display()),
                (None, Some(gone)) => {
                    format!("cluster/{} is gone since it was written", gone.display())
                }
                (None, None) => "cluster/ is listed otherwise than when it was written".into(),
            },
        );
    }
    let mut unreadable = Vec::new();
    for ((stamp, path), &(len, identity)) in header.files.iter().zip(&listing.files).zip(stats) {
        let file = format!("cluster/{}", stamp.path.display());
        let Some(sha256) = stamp.sha256 else {
            // Read again: it must still fail, and its problem is today's.
            match super::load::reread(path, boundary) {
                Err(problem) => {
                    if let Some(at) = stamp.problem_at {
                        unreadable.push((at as usize, problem));
                    }
                    continue;
                }
                Ok(Some(_)) => return Err(format!("{file} can be read now")),
                Ok(None) => return Err(format!("{file} is gone since it was written")),
            }
        };
        if len != stamp.len {
            return Err(format!("{file} changed since it was written (its size)"));
        }
        // The same size, inode and times: the same file. A copy has other
        // times: its content decides.
        if !(stamp.times_tell && identity == stamp.identity)
            && digest(path, boundary) != Some(sha256)
        {
            return Err(format!("{file} changed since it was written (its content)"));
        }
    }
    Ok(unreadable)
}

/// A file's size and identity: of what it leads to when that is inside the
/// snapshot, else of the link itself (nothing outside is looked at); zero
/// when it is gone.
fn stat(path: &Path, boundary: &Boundary) -> (u64, Identity) {
    let metadata = match boundary.check(path) {
        Ok(()) => std::fs::metadata(path),
        Err(_) => std::fs::symlink_metadata(path),
    };
    let gone = Identity {
        times: [0; 24],
        device: 0,
        inode: 0,
    };
    metadata.map_or((0, gone), |metadata| {
        let mut times = [0; 24];
        times[..8].copy_from_slice(&metadata.mtime().to_le_bytes());
        // Nanoseconds, 0..1e9: they fit.
        times[8..12].copy_from_slice(&(metadata.mtime_nsec() as u32).to_le_bytes());
        times[12..20].copy_from_slice(&metadata.ctime().to_le_bytes());
        times[20..].copy_from_slice(&(metadata.ctime_nsec() as u32).to_le_bytes());
        let identity = Identity {
            times,
            device: metadata.dev(),
            inode: metadata.ino(),
        };
        (metadata.len(), identity)
    })
}

/// The SHA-256 of a file as the load reads it (`None`: it cannot).
fn digest(path: &Path, boundary: &Boundary) -> Option<[u8; 32]> {
    let (file, _) = boundary.open(path).ok()??;
    super::stream::digest(file).ok()
}

fn relative(cluster_dir: &Path, problems: impl IntoIterator<Item = Problem>) -> Vec<StoredProblem> {
    problems
        .into_iter()
        .map(|mut problem| {
            if let Ok(inside) = problem.file.strip_prefix(cluster_dir) {
                problem.file = inside.to_path_buf();
            }
            stored(problem)
        })
        .collect()
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
