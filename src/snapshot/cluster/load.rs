//! Reading `<snapshot>/cluster/`: files, their documents, the items of
//! Lists, and finally objects.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::Cluster;
use super::convert::read_object;
use super::document::{Data, Position, Value, parse_json, parse_yaml};
use super::model::ApiEnum as _;
use super::model::{Object, ObjectSource, Pod};
use super::{direct, stream, yaml};
use crate::snapshot::input::{self, Boundary};
use crate::snapshot::problem::{ParseIssue, Problem};

/// How much one load of `cluster/` reads at most, in all its files: the
/// bound on a hostile snapshot's memory and time, whatever its files'
/// sizes (`docs/limits.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Objects kept in the model (`--max-cluster-objects`).
    pub objects: usize,
    /// Bytes of files read (`--max-cluster-mib`).
    pub bytes: u64,
}

impl Default for Budget {
    /// Several times a cluster at Kubernetes' limits (5,000 nodes, 150,000
    /// pods: about 170,000 objects, 500 MiB of JSON).
    fn default() -> Budget {
        Budget {
            objects: 1_000_000,
            bytes: 4096 * input::MIB,
        }
    }
}

/// Reads every `*.yaml`, `*.yml` and `*.json` file under `dir`, recursively,
/// in sorted path order. Dotfiles and dot-directories are skipped; any other
/// file is reported and skipped. Returns what could be read and every problem.
/// Files and links leading outside `boundary` are not read.
pub fn load(dir: &Path, boundary: &Boundary) -> (Cluster, Vec<Problem>) {
    load_within(dir, boundary, Budget::default())
}

/// [`load`], reading no more than `budget`.
pub fn load_within(dir: &Path, boundary: &Boundary, budget: Budget) -> (Cluster, Vec<Problem>) {
    read_listed(list(dir), boundary, budget, false).0
}

/// The files of `cluster/` a load reads, in the order it reads them, and
/// what was wrong with finding them (an unreadable directory, a file of
/// another type). The cluster cache is tied to this listing.
#[derive(Debug)]
pub(super) struct Listing {
    dir: PathBuf,
    pub files: Vec<PathBuf>,
    formats: Vec<Format>,
    pub problems: Vec<Problem>,
}

pub(super) fn list(dir: &Path) -> Listing {
    let mut problems = Vec::new();
    let mut files = Vec::new();
    find_files(dir, &mut files, &mut problems);
    files.sort();
    // Sorted as the files are, so that a copy of the snapshot, whose
    // directories may list their entries in another order, lists the same.
    problems.sort_by(|a, b| a.file.cmp(&b.file));
    let (files, formats) = files.into_iter().unzip();
    Listing {
        dir: dir.to_path_buf(),
        files,
        formats,
        problems,
    }
}

/// A file's SHA-256, of the very bytes the load parsed; `None` when it
/// could not be read.
pub(super) type Digest = Option<[u8; 32]>;

/// [`load_within`] of the files listed, with each one's [`Digest`] (the
/// cluster cache).
pub(super) fn load_listed_digesting(
    listing: Listing,
    boundary: &Boundary,
    budget: Budget,
) -> ((Cluster, Vec<Problem>), Vec<Digest>) {
    read_listed(listing, boundary, budget, true)
}

/// A file as the reading thread hands it over: its text, or a file too
/// large to read whole, which the load reads a part at a time.
enum Prefetched {
    Text(Result<Option<String>, Problem>),
    Large,
}

fn read_listed(
    listing: Listing,
    boundary: &Boundary,
    budget: Budget,
    digesting: bool,
) -> ((Cluster, Vec<Problem>), Vec<Digest>) {
    let Listing {
        dir,
        files,
        formats,
        problems,
    } = listing;
    let mut loader = Loader {
        cluster: Cluster::default(),
        problems,
        citing: Citing(Some(dir.parent().unwrap_or(Path::new("")))),
        budget,
        bytes: 0,
        objects_spent: false,
    };
    let mut digests = Vec::with_capacity(files.len());
    // The next file is read while this one is parsed: reading is work for
    // one core, hundreds of megabytes on a large cluster. A rendezvous
    // channel holds at most one file read ahead.
    // Each file's memory, once read, is handed back for the next one.
    std::thread::scope(|scope| {
        let (sender, texts) = std::sync::mpsc::sync_channel(0);
        let (give_back, spent) = std::sync::mpsc::channel::<String>();
        let paths = &files;
        scope.spawn(move || {
            for path in paths {
                let large = std::fs::metadata(path).is_ok_and(|m| stream::is_large(m.len()));
                let read = if large {
                    Prefetched::Large
                } else {
                    let buffer = spent.try_recv().map(String::into_bytes).unwrap_or_default();
                    Prefetched::Text(boundary.read_text_into(path, input::CLUSTER_FILE, buffer))
                };
                if sender.send(read).is_err() {
                    break;
                }
            }
        });
        for ((path, format), read) in files.iter().zip(&formats).zip(texts) {
            if let Some(refused) = loader.over_budget(path) {
                loader.problems.push(refused);
                digests.push(None);
                continue;
            }
            let digest = match read {
                Prefetched::Large => loader.load_large(path, *format, boundary, digesting),
                Prefetched::Text(read) => {
                    let digest = match &read {
                        Ok(Some(text)) if digesting => Some(Sha256::digest(text.as_bytes()).into()),
                        _ => None,
                    };
                    if let Some(text) = file_text(path, read, &mut loader.problems) {
                        let pieces = read_text(path, &text, *format, Reading::DirectFirst);
                        loader.insert(path, pieces);
                        // The reader may be done: then the memory is freed here.
                        let _ = give_back.send(text);
                    }
                    digest
                }
            };
            digests.push(digest);
        }
    });
    let Loader {
        cluster,
        mut problems,
        citing,
        ..
    } = loader;
    problems.extend(ip_conflicts(&cluster, citing));
    ((cluster, problems), digests)
}

/// A load under way: what it has read so far, against its budget.
struct Loader<'a> {
    cluster: Cluster,
    problems: Vec<Problem>,
    citing: Citing<'a>,
    budget: Budget,
    /// Bytes of the files read so far.
    bytes: u64,
    /// Whether the budget's objects are all taken: no more are kept.
    objects_spent: bool,
}

impl Loader<'_> {
    /// Why `path` is not read, when the budget is spent; else it counts
    /// against the budget.
    fn over_budget(&mut self, path: &Path) -> Option<Problem> {
        if self.objects_spent {
            return Some(Problem::in_file(
                path,
                format!(
                    "not read: the cluster/ files before it hold {} objects, the most a load \
                     reads (--max-cluster-objects N raises it)",
                    self.budget.objects
                ),
            ));
        }
        let len = std::fs::metadata(path).map_or(0, |m| m.len());
        self.bytes = self.bytes.saturating_add(len);
        (self.bytes > self.budget.bytes).then(|| {
            Problem::in_file(
                path,
                format!(
                    "not read: with it, the cluster/ files read come to {} MiB, more than the \
                     {} MiB a load reads (--max-cluster-mib MIB raises it)",
                    self.bytes.div_ceil(input::MIB),
                    self.budget.bytes / input::MIB
                ),
            )
        })
    }

    /// Inserts what a text held, in order, while the budget allows.
    fn insert(&mut self, path: &Path, pieces: Vec<Piece>) {
        // Counted once, then kept up to date: counting walks every
        // namespace of every kind.
        let mut kept = self.cluster.object_count();
        for piece in pieces {
            match piece {
                Piece::Object(..) if self.objects_spent => {}
                Piece::Object(object, at) if kept >= self.budget.objects => {
                    self.objects_spent = true;
                    let _ = object;
                    self.problems.push(Problem::from_issue(
                        path,
                        ParseIssue::at(
                            at.line,
                            at.column,
                            format!(
                                "more than {} objects in cluster/, the most a load reads: this \
                                 one and the rest are not read (--max-cluster-objects N raises \
                                 it)",
                                self.budget.objects
                            ),
                        ),
                    ));
                }
                Piece::Object(object, at) => {
                    let problems = self.problems.len();
                    insert_at(
                        path,
                        self.citing,
                        &mut self.cluster,
                        object,
                        at,
                        &mut self.problems,
                    );
                    // An object inserted without a word is kept; one with
                    // a problem may not be (defined twice).
                    kept = if self.problems.len() == problems {
                        kept + 1
                    } else {
                        self.cluster.object_count()
                    };
                }
                Piece::Problem(problem) => self.problems.push(problem),
            }
        }
    }

    /// Reads a file too large to read whole a part at a time
    /// (`stream.rs`), its parts read on several threads and inserted in
    /// order; its [`Digest`] when `digesting`.
    fn load_large(
        &mut self,
        path: &Path,
        format: Format,
        boundary: &Boundary,
        digesting: bool,
    ) -> Digest {
        let (file, metadata) = match boundary.open(path) {
            Ok(Some(opened)) => opened,
            Ok(None) => {
                self.problems.push(Problem::in_file(
                    path,
                    "cannot read: the file disappeared while loading",
                ));
                return None;
            }
            Err(problem) => {
                self.problems.push(problem);
                return None;
            }
        };
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        let (digest, problem) = std::thread::scope(|scope| {
            let (sender, parts) = std::sync::mpsc::sync_channel::<stream::Part>(1);
            // Each part's text, once read, is handed back for a later one.
            let (give_back, spent) = std::sync::mpsc::channel::<String>();
            let reader = scope.spawn(move || {
                let spare = || spent.try_recv().ok();
                stream::read(
                    path,
                    file,
                    metadata.len(),
                    format,
                    digesting,
                    spare,
                    |part| {
                        let _ = sender.send(part);
                    },
                )
            });
            let mut reading = std::collections::VecDeque::new();
            for part in parts {
                if reading.len() >= workers {
                    self.insert_part(path, reading.pop_front());
                }
                let give_back = give_back.clone();
                reading.push_back(scope.spawn(move || {
                    let pieces = read_text(path, &part.text, format, Reading::DirectFirst)
                        .into_iter()
                        .map(|piece| piece.moved(part.lines))
                        .collect::<Vec<_>>();
                    // The reader may be done: then the memory is freed here.
                    let _ = give_back.send(part.text);
                    pieces
                }));
            }
            while let Some(part) = reading.pop_front() {
                self.insert_part(path, Some(part));
            }
            reader
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        self.problems.extend(problem);
        digest
    }

    fn insert_part(
        &mut self,
        path: &Path,
        part: Option<std::thread::ScopedJoinHandle<'_, Vec<Piece>>>,
    ) {
        if let Some(part) = part {
            let pieces = part
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            self.insert(path, pieces);
        }
    }
}

/// How a problem's message cites another object's place: from the
/// directory holding the one loaded, a snapshot's root for its `cluster/`
/// (`cluster/pods.yaml:12`), so that the message reads the same wherever
/// the snapshot is (and from its cache); else as the object's source.
#[derive(Debug, Clone, Copy)]
struct Citing<'a>(Option<&'a Path>);

impl Citing<'_> {
    fn place(self, source: &ObjectSource) -> String {
        match self.0.and_then(|root| source.file.strip_prefix(root).ok()) {
            Some(inside) => format!("{}:{}", inside.display(), source.line),
            None => source.to_string(),
        }
    }
}

/// Two pods claiming one address: said at each pod that loses it.
fn ip_conflicts(cluster: &Cluster, citing: Citing) -> Vec<Problem> {
    let phase = |pod: &Pod| pod.phase.map_or("no phase", |p| p.as_str());
    let name = |pod: &Pod| format!("{}/{}", pod.meta.namespace, pod.meta.name);
    let mut problems = Vec::new();
    for conflict in cluster.ip_conflicts() {
        let chosen = conflict.chosen;
        let outcome = if conflict.ambiguous() {
            format!(
                "which one has it cannot be told; {} is taken (the first read)",
                name(chosen)
            )
        } else {
            format!("it is taken as {}'s ({})", name(chosen), phase(chosen))
        };
        for other in &conflict.others {
            problems.push(Problem::from_issue(
                &other.meta.source.file,
                ParseIssue::at_line(
                    other.meta.source.line,
                    format!(
                        "Pod {} ({}) has IP {}, which Pod {} ({}, {}) has too: {outcome}",
                        name(other),
                        phase(other),
                        conflict.ip,
                        name(chosen),
                        phase(chosen),
                        citing.place(&chosen.meta.source),
                    ),
                ),
            ));
        }
    }
    problems
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Format {
    Yaml,
    Json,
}

fn find_files(dir: &Path, files: &mut Vec<(PathBuf, Format)>, problems: &mut Vec<Problem>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(Problem::in_file(dir, format!("cannot read directory: {e}")));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                problems.push(Problem::in_file(dir, format!("cannot read directory: {e}")));
                continue;
            }
        };
        let path = entry.path();
        if entry.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let file_type = match entry.file_type() {
            Ok(file_type) => file_type,
            Err(e) => {
                problems.push(Problem::in_file(&path, format!("cannot read: {e}")));
                continue;
            }
        };
        if file_type.is_dir() {
            find_files(&path, files, problems);
        } else if file_type.is_symlink() && path.is_dir() {
            // Links to files are read; links to directories could loop.
            problems.push(Problem::in_file(
                &path,
                "symbolic link to a directory: not followed",
            ));
        } else {
            match format_of(&path) {
                Some(format) => files.push((path, format)),
                None => problems.push(Problem::in_file(
                    &path,
                    "not a YAML or JSON file (expected .yaml, .yml or .json); ignored",
                )),
            }
        }
    }
}

fn format_of(path: &Path) -> Option<Format> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    match extension.as_str() {
        "yaml" | "yml" => Some(Format::Yaml),
        "json" => Some(Format::Json),
        _ => None,
    }
}

/// Whether the load can read `path`, found again as it found it: `Ok(None)`
/// when it is gone, the problem when it cannot be read (the cluster cache
/// checks that an unreadable file still is).
pub(super) fn reread(path: &Path, boundary: &Boundary) -> Result<Option<()>, Problem> {
    let large = std::fs::metadata(path).is_ok_and(|m| stream::is_large(m.len()));
    if !large {
        return boundary
            .read_text_into(path, input::CLUSTER_FILE, Vec::new())
            .map(|read| read.map(drop));
    }
    let Some((file, metadata)) = boundary.open(path)? else {
        return Ok(None);
    };
    let format = format_of(path).unwrap_or(Format::Json);
    match stream::read(path, file, metadata.len(), format, false, || None, drop) {
        (None, Some(problem)) => Err(problem),
        _ => Ok(Some(())),
    }
}

/// The text of a file read, or the problem of reading it.
fn file_text(
    path: &Path,
    read: Result<Option<String>, Problem>,
    problems: &mut Vec<Problem>,
) -> Option<String> {
    match read {
        Ok(Some(text)) => Some(text),
        Ok(None) => {
            problems.push(Problem::in_file(
                path,
                "cannot read: the file disappeared while loading",
            ));
            None
        }
        Err(problem) => {
            problems.push(problem);
            None
        }
    }
}

/// How a file's text is read. Both give the same objects and problems
/// (the fuzz target `cluster_objects` and the tests compare them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// JSON straight into the typed kinds (`direct`) when nothing in it is a
    /// problem; otherwise, and for YAML, through the positioned tree.
    DirectFirst,
    /// Through the positioned tree only.
    Positioned,
}

/// What a text holds, in the order it was found: objects with where each
/// starts, and problems.
#[allow(
    clippy::large_enum_variant,
    reason = "most pieces are objects: boxing them would allocate once more for each"
)]
pub(super) enum Piece {
    Object(Object, Position),
    Problem(Problem),
}

impl Piece {
    /// Moves the piece `lines` lines down (a part read on its own, which
    /// starts that far into its file).
    pub fn moved(self, lines: isize) -> Piece {
        let down = |line: usize| line.saturating_add_signed(lines).max(1);
        match self {
            Piece::Object(mut object, mut at) => {
                let source = &mut object.meta_mut().source;
                source.line = down(source.line);
                at.line = down(at.line);
                Piece::Object(object, at)
            }
            Piece::Problem(mut problem) => {
                problem.line = problem.line.map(down);
                Piece::Problem(problem)
            }
        }
    }
}

/// Reads the objects of one file's text into `cluster`.
fn load_text(
    path: &Path,
    text: &str,
    format: Format,
    reading: Reading,
    citing: Citing,
    cluster: &mut Cluster,
    problems: &mut Vec<Problem>,
) {
    let pieces = read_text(path, text, format, reading);
    insert_pieces(path, pieces, citing, cluster, problems);
}

/// Inserts what a text held into `cluster`, in order.
fn insert_pieces(
    path: &Path,
    pieces: Vec<Piece>,
    citing: Citing,
    cluster: &mut Cluster,
    problems: &mut Vec<Problem>,
) {
    for piece in pieces {
        match piece {
            Piece::Object(object, at) => insert_at(path, citing, cluster, object, at, problems),
            Piece::Problem(problem) => problems.push(problem),
        }
    }
}

/// The objects and problems of one file's text.
pub(super) fn read_text(path: &Path, text: &str, format: Format, reading: Reading) -> Vec<Piece> {
    // Editors do not count a byte-order mark as a column, and serde_json refuses it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let direct = match (format, reading) {
        (_, Reading::Positioned) => None,
        (Format::Json, Reading::DirectFirst) => direct::read(path, text),
        (Format::Yaml, Reading::DirectFirst) => yaml::read(path, text),
    };
    if let Some(objects) = direct {
        return objects
            .into_iter()
            .map(|(object, at)| Piece::Object(object, at))
            .collect();
    }
    let mut pieces = Vec::new();
    let (documents, parse_issues) = match format {
        Format::Yaml => parse_yaml(text),
        Format::Json => parse_json(text),
    };
    if documents.is_empty() && parse_issues.is_empty() {
        pieces.push(Piece::Problem(Problem::in_file(
            path,
            "no Kubernetes object in this file",
        )));
    }
    let mut issues = parse_issues;
    let mut objects = Vec::new();
    for document in &documents {
        objects_in(document, None, &mut objects, &mut issues);
    }
    pieces.extend(
        issues
            .into_iter()
            .map(|issue| Piece::Problem(Problem::from_issue(path, issue))),
    );
    for found in objects {
        let source = ObjectSource {
            file: path.to_path_buf(),
            line: found.value.position.line,
        };
        let (object, issues) = read_object(found.value, &found.api_version, &found.kind, source);
        pieces.extend(
            issues
                .into_iter()
                .map(|issue| Piece::Problem(Problem::from_issue(path, issue))),
        );
        if let Some(object) = object {
            pieces.push(Piece::Object(object, found.value.position));
        }
    }
    pieces
}

/// Inserts `object`, read at `at` of `path`, saying there what is wrong with
/// doing so.
fn insert_at(
    path: &Path,
    citing: Citing,
    cluster: &mut Cluster,
    object: Object,
    at: Position,
    problems: &mut Vec<Problem>,
) {
    for message in insert(cluster, object, citing) {
        problems.push(Problem::from_issue(
            path,
            ParseIssue::at(at.line, at.column, message),
        ));
    }
}

/// Inserts `object`, returning what is wrong with doing so.
fn insert(cluster: &mut Cluster, object: Object, citing: Citing) -> Vec<String> {
    let claims: Vec<_> = match &object {
        Object::Service(service) => service
            .ports
            .iter()
            .filter_map(|port| Some((port.protocol, port.node_port?)))
            .collect(),
        _ => Vec::new(),
    };
    let (namespace, name) = (object.meta().namespace.clone(), object.meta().name.clone());
    if let Err(duplicate) = cluster.insert(object) {
        return vec![format!(
            "{} {} is defined twice (first at {}); this one is ignored",
            duplicate.kind,
            duplicate.name,
            citing.place(&duplicate.first)
        )];
    }
    claims
        .into_iter()
        .filter_map(|(protocol, port)| {
            let owner = cluster.service_by_node_port(protocol, port)?;
            let same = owner.meta.namespace == namespace && owner.meta.name == name;
            (!same).then(|| {
                format!(
                    "NodePort {port}/{} of Service {namespace}/{name} is already used by Service {}/{} ({})",
                    protocol.api_name(),
                    owner.meta.namespace,
                    owner.meta.name,
                    citing.place(&owner.meta.source)
                )
            })
        })
        .collect()
}

/// An object found in a document, with the apiVersion and kind it has or
/// inherits from its List.
pub(super) struct Found<'a> {
    pub value: &'a Value,
    pub api_version: String,
    pub kind: String,
}

/// Collects the objects of `value`: itself, or the items of a List. Items of
/// a typed list (`PodList`) may leave out apiVersion and kind, as the API
/// server writes them; items of a `kind: List` may not.
pub(super) fn objects_in<'a>(
    value: &'a Value,
    inherited: Option<(&str, &str)>,
    found: &mut Vec<Found<'a>>,
    issues: &mut Vec<ParseIssue>,
) {
    let at = |message: String| ParseIssue::at(value.position.line, value.position.column, message);
    if !matches!(value.data, Data::Map(_)) {
        issues.push(at(format!(
            "expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
            describe(&value.data)
        )));
        return;
    }
    let field = |name: &str, inherited: Option<&str>| match value.get(name) {
        Some(Value {
            data: Data::String(text),
            ..
        }) if !text.is_empty() => Ok(text.clone()),
        Some(Value {
            data: Data::String(_) | Data::Null,
            ..
        })
        | None => inherited
            .map(str::to_owned)
            .ok_or(format!("object has no {name}")),
        Some(other) => Err(format!("{name} is {}, not a string", describe(&other.data))),
    };
    let api_version = field("apiVersion", inherited.map(|(api_version, _)| api_version));
    let kind = field("kind", inherited.map(|(_, kind)| kind));
    let (api_version, kind) = match (api_version, kind) {
        (Ok(api_version), Ok(kind)) => (api_version, kind),
        (Err(_), Err(_)) if value.get("apiVersion").is_none() && value.get("kind").is_none() => {
            issues.push(at(
                "no apiVersion and no kind: not a Kubernetes object; skipped".to_owned(),
            ));
            return;
        }
        (Err(message), _) | (_, Err(message)) => {
            issues.push(at(format!("{message}; skipped")));
            return;
        }
    };
    let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
    let items = value.get("items");
    match (kind.as_str(), item_kind, items) {
        ("List", _, None) => issues.push(at("List without items; skipped".to_owned())),
        ("List", _, Some(items)) => each_item(items, None, found, issues),
        (_, Some(item_kind), Some(items)) => {
            each_item(items, Some((&api_version, item_kind)), found, issues);
        }
        _ => found.push(Found {
            value,
            api_version,
            kind,
        }),
    }
}

fn each_item<'a>(
    items: &'a Value,
    inherited: Option<(&str, &str)>,
    found: &mut Vec<Found<'a>>,
    issues: &mut Vec<ParseIssue>,
) {
    match &items.data {
        Data::Seq(items) => {
            for item in items {
                objects_in(item, inherited, found, issues);
            }
        }
        Data::Null => {}
        other => issues.push(ParseIssue::at(
            items.position.line,
            items.position.column,
            format!(
                "items of a List is {}, not a list; skipped",
                describe(other)
            ),
        )),
    }
}

fn describe(data: &Data) -> &'static str {
    match data {
        Data::Null => "null",
        Data::Bool(_) => "a boolean",
        Data::Int(_) | Data::UInt(_) | Data::Float(_) => "a number",
        Data::String(_) => "a string",
        Data::Seq(_) => "a list",
        Data::Map(_) => "a mapping",
    }
}

/// Loads one file's text as if read from `path`, whose extension decides
/// the format (for tests and fuzzing: whatever the text, no panic, and
/// every problem inside it).
pub fn load_file_text(path: &Path, text: &str) -> (Cluster, Vec<Problem>) {
    load_file_text_as(path, text, Reading::DirectFirst)
}

/// [`load_file_text`] read the way `reading` says.
pub fn load_file_text_as(path: &Path, text: &str, reading: Reading) -> (Cluster, Vec<Problem>) {
    let mut cluster = Cluster::default();
    let mut problems = Vec::new();
    match format_of(path) {
        Some(format) => load_text(
            path,
            text,
            format,
            reading,
            Citing(None),
            &mut cluster,
            &mut problems,
        ),
        None => problems.push(Problem::in_file(
            path,
            "not a YAML or JSON file (expected .yaml, .yml or .json)",
        )),
    }
    problems.extend(ip_conflicts(&cluster, Citing(None)));
    (cluster, problems)
}
