//! The cluster cache, `<snapshot>/cluster.cache`: the model `cluster/` loads
//! into, and the problems found loading it, written once (by `skoop collect`
//! or `skoop snapshot cache`) so that a later load reads a compact binary
//! model instead of parsing every object's JSON again. On a 5,000-node
//! cluster that is a few tens of megabytes instead of half a gigabyte.
//!
//! Invariants:
//! - A cache is used only when it is `cluster/`'s own: written by a build
//!   whose snapshot code is this one's ([`SNAPSHOT_CODE`]), for the same
//!   files, each of the same size and either the same modification time or
//!   the same SHA-256 of its content.
//! - Loading from a cache gives what loading `cluster/` gives: the same
//!   model and the same problems, with the sources of objects and problems
//!   where the snapshot is now (`snapshot check` compares the two).
//! - A cache that cannot be used is never an error: `cluster/` is read, and a
//!   problem says why the cache was passed over.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Cluster;
use super::load::{Listing, list, load_listed};
use crate::snapshot::input::{self, Boundary};
use crate::snapshot::problem::Problem;

/// The cache's file name in a snapshot, beside `cluster/`.
pub const FILE_NAME: &str = "cluster.cache";

/// What a cache file starts with.
const MAGIC: &[u8; 8] = b"skoop-c1";

/// This build's snapshot code (`build.rs`): a cache written by a build with
/// another is passed over, since that build may read `cluster/` otherwise.
pub const SNAPSHOT_CODE: &str = env!("SKOOP_SNAPSHOT_CODE");

/// What a cache is checked against before its model is read.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    snapshot_code: String,
    /// `cluster/`'s path when the cache was written: the sources of objects
    /// and problems start with it.
    cluster_dir: PathBuf,
    /// Every file the load read, relative to `cluster/`, in its order.
    files: Vec<Stamp>,
    /// What was wrong with listing `cluster/`, relative to it.
    listing_problems: Vec<StoredProblem>,
}

/// One file of `cluster/` as it was when its objects were read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    path: PathBuf,
    len: u64,
    modified: Modified,
    /// `None` for a file the load could not read (a link out of the
    /// snapshot, a FIFO, one over its cap): its problem is in the cache, and
    /// only its size and time tell that it is unchanged.
    sha256: Option<[u8; 32]>,
}

/// A [`Problem`] as the cache stores it (its JSON form leaves out what is
/// absent, which a binary form cannot).
type StoredProblem = (PathBuf, Option<usize>, Option<usize>, String);

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

/// The model and problems of a load.
#[derive(Serialize, Deserialize)]
struct Payload {
    cluster: Cluster,
    problems: Vec<StoredProblem>,
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
    #[error("{0}: changed while its objects were read; run again")]
    Changed(PathBuf),
    #[error("{0}: cannot write: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("cannot encode the cluster model: {0}")]
    Encode(postcard::Error),
}

/// Loads `<root>/cluster/` and writes `<root>/cluster.cache` for it,
/// atomically (a cache half written is never read).
pub fn write(root: &Path, boundary: &Boundary) -> Result<Written, WriteError> {
    let cluster_dir = root.join("cluster");
    let listing = list(&cluster_dir);
    let files = stamps(&cluster_dir, &listing.files, boundary);
    let header = Header {
        snapshot_code: SNAPSHOT_CODE.to_owned(),
        cluster_dir: cluster_dir.clone(),
        files,
        listing_problems: relative(&cluster_dir, &listing.problems),
    };
    let (cluster, problems) = load_listed(listing.clone(), boundary);
    // Read again after the load: a file changed meanwhile may have been
    // loaded as it is now or as it was.
    for (stamp, path) in header.files.iter().zip(&listing.files) {
        if stat(path, boundary) != (stamp.len, stamp.modified) {
            return Err(WriteError::Changed(path.clone()));
        }
    }
    let objects = cluster.object_count();
    let payload = Payload {
        cluster,
        problems: problems.iter().cloned().map(stored).collect(),
    };
    let mut bytes = MAGIC.to_vec();
    bytes = postcard::to_extend(&header, bytes).map_err(WriteError::Encode)?;
    bytes = postcard::to_extend(&payload, bytes).map_err(WriteError::Encode)?;
    let path = root.join(FILE_NAME);
    let io = |e: std::io::Error| WriteError::Io(path.clone(), e);
    let mut file = tempfile::NamedTempFile::new_in(root).map_err(io)?;
    // Readable as the snapshot's other files are (a temporary file is the
    // owner's alone).
    let readable = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    file.as_file().set_permissions(readable).map_err(io)?;
    std::io::Write::write_all(&mut file, &bytes).map_err(io)?;
    file.persist(&path).map_err(|e| io(e.error))?;
    Ok(Written {
        path,
        bytes: bytes.len(),
        files: header.files.len(),
        objects,
        problems,
    })
}

/// The model and problems of `<root>/cluster/` from its cache: `Ok(None)`
/// when there is no cache, a problem saying why when it cannot be used.
pub fn read(root: &Path, boundary: &Boundary) -> Result<Option<(Cluster, Vec<Problem>)>, Problem> {
    let path = root.join(FILE_NAME);
    let passed_over = |why: String| {
        Problem::in_file(
            &path,
            format!("{why}; cluster/ was read instead (`skoop snapshot cache` writes it anew)"),
        )
    };
    let Some(bytes) = boundary
        .read_bytes_into(&path, input::CLUSTER_CACHE, Vec::new())
        .map_err(|problem| passed_over(problem.message))?
    else {
        return Ok(None);
    };
    let malformed = |e: postcard::Error| passed_over(format!("not a cluster cache ({e})"));
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| passed_over("not a cluster cache of this version of skoop".into()))?;
    let (header, rest) = postcard::take_from_bytes::<Header>(body).map_err(malformed)?;
    if header.snapshot_code != SNAPSHOT_CODE {
        return Err(passed_over(format!(
            "written by another build of skoop ({}, this is {SNAPSHOT_CODE})",
            header.snapshot_code
        )));
    }
    let cluster_dir = root.join("cluster");
    if let Some(why) = changed(&cluster_dir, &header, &list(&cluster_dir), boundary) {
        return Err(passed_over(why));
    }
    let payload: Payload = postcard::from_bytes(rest).map_err(malformed)?;
    let mut cluster = payload.cluster;
    let mut problems: Vec<Problem> = payload.problems.into_iter().map(unstored).collect();
    if header.cluster_dir != cluster_dir {
        cluster.rebase(&header.cluster_dir, &cluster_dir);
        for problem in &mut problems {
            rebase_problem(problem, &header.cluster_dir, &cluster_dir);
        }
    }
    Ok(Some((cluster, problems)))
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

/// What differs between `cluster/` now and when the cache was written, if
/// anything.
fn changed(
    cluster_dir: &Path,
    header: &Header,
    listing: &Listing,
    boundary: &Boundary,
) -> Option<String> {
    if relative(cluster_dir, &listing.problems) != header.listing_problems {
        return Some("cluster/ is listed otherwise than when it was written".into());
    }
    let was: Vec<&Path> = header.files.iter().map(|s| s.path.as_path()).collect();
    let is: Vec<&Path> = listing
        .files
        .iter()
        .map(|f| f.strip_prefix(cluster_dir).unwrap_or(f))
        .collect();
    if was != is {
        let gone = was.iter().find(|f| !is.contains(f));
        let new = is.iter().find(|f| !was.contains(f));
        return Some(match (new, gone) {
            (Some(new), _) => format!("cluster/{} is new since it was written", new.display()),
            (None, Some(gone)) => {
                format!("cluster/{} is gone since it was written", gone.display())
            }
            (None, None) => "cluster/'s files are in another order".into(),
        });
    }
    for (stamp, path) in header.files.iter().zip(&listing.files) {
        let file = format!("cluster/{}", stamp.path.display());
        let (len, modified) = stat(path, boundary);
        if len != stamp.len {
            return Some(format!("{file} changed since it was written (its size)"));
        }
        // The same size and time: the same file, as make and git take it. A
        // copy has another time: its content decides.
        if modified != stamp.modified
            && (stamp.sha256.is_none() || sha256(path, boundary) != stamp.sha256)
        {
            return Some(format!("{file} changed since it was written (its content)"));
        }
    }
    None
}

/// Each file's size, time and hash, in the listing's order.
fn stamps(cluster_dir: &Path, files: &[PathBuf], boundary: &Boundary) -> Vec<Stamp> {
    files
        .iter()
        .map(|path| {
            let (len, modified) = stat(path, boundary);
            Stamp {
                path: path.strip_prefix(cluster_dir).unwrap_or(path).to_path_buf(),
                len,
                modified,
                sha256: sha256(path, boundary),
            }
        })
        .collect()
}

/// A file's size and time: of what it leads to when that is inside the
/// snapshot, else of the link itself (nothing outside is looked at); zero
/// when it is gone.
fn stat(path: &Path, boundary: &Boundary) -> (u64, Modified) {
    let metadata = match boundary.check(path) {
        Ok(()) => std::fs::metadata(path),
        Err(_) => std::fs::symlink_metadata(path),
    };
    metadata.map_or((0, [0; 12]), |metadata| {
        (metadata.len(), modified(&metadata))
    })
}

/// A file's modification time: seconds and nanoseconds, as bytes of a
/// fixed size, so that a cache's size does not depend on when its files
/// were written.
type Modified = [u8; 12];

fn modified(metadata: &std::fs::Metadata) -> Modified {
    let mut bytes = [0; 12];
    bytes[..8].copy_from_slice(&metadata.mtime().to_le_bytes());
    // 0..1e9 fits.
    bytes[8..].copy_from_slice(&(metadata.mtime_nsec() as u32).to_le_bytes());
    bytes
}

/// The SHA-256 of a file the load can read (`None`: it cannot).
fn sha256(path: &Path, boundary: &Boundary) -> Option<[u8; 32]> {
    let bytes = boundary
        .read_bytes_into(path, input::CLUSTER_FILE, Vec::new())
        .ok()??;
    Some(Sha256::digest(&bytes).into())
}

fn relative(cluster_dir: &Path, problems: &[Problem]) -> Vec<StoredProblem> {
    problems
        .iter()
        .cloned()
        .map(|mut problem| {
            if let Ok(inside) = problem.file.strip_prefix(cluster_dir) {
                problem.file = inside.to_path_buf();
            }
            stored(problem)
        })
        .collect()
}

/// A problem of the load where `cluster/` was, as it reads where it is: its
/// file, and the places its message cites (an object defined twice cites
/// the first).
fn rebase_problem(problem: &mut Problem, from: &Path, to: &Path) {
    if let Ok(inside) = problem.file.strip_prefix(from) {
        problem.file = to.join(inside);
    }
    let (from, to) = (format!("{}/", from.display()), format!("{}/", to.display()));
    if problem.message.contains(&from) {
        problem.message = problem.message.replace(&from, &to);
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
