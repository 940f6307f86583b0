//! Data in: a snapshot directory (DESIGN §3) read into typed models.
//!
//! ```text
//! <snapshot>/
//!   cluster/**/*.yaml|*.yml|*.json     Kubernetes objects as kubectl writes them
//!   nodes/<node>/host/                 the node's root network namespace
//!   nodes/<node>/pods/<ns>/<pod>/      one pod's network namespace
//! ```
//!
//! Every name in that layout is a Kubernetes name of its kind ([`name`]):
//! collection builds a path only from checked names ([`NetnsId::path_in`]),
//! and loading reads only directories so named.
//!
//! Loading never stops at the first problem: [`Snapshot::load`] returns what it
//! could read and every [`Problem`] it met, each with file, line and column.

pub mod cluster;
pub mod input;
pub mod name;
pub mod netns;
pub mod problem;

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub use problem::{ParseIssue, Parsed, Problem};

use cluster::{Budget, Cluster};
use input::Boundary;
use name::{BadName, NameKind, check_name};
use netns::link::Link;
use netns::{DumpFile, NetnsDump, Rulesets, datapath};

/// Which network namespace a dump belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NetnsId {
    /// A node's root network namespace.
    Host { node: String },
    /// A pod's network namespace on a node.
    Pod {
        node: String,
        namespace: String,
        name: String,
    },
}

impl NetnsId {
    pub fn node(&self) -> &str {
        match self {
            NetnsId::Host { node } | NetnsId::Pod { node, .. } => node,
        }
    }

    /// Where the layout puts the namespace's dump under the snapshot's
    /// `root`, once every name in it is checked as the Kubernetes name of
    /// its kind: the only way a path is built from names.
    pub fn path_in(&self, root: &Path) -> Result<PathBuf, BadName> {
        match self {
            NetnsId::Host { node } => check_name(NameKind::Node, node)?,
            NetnsId::Pod {
                node,
                namespace,
                name,
            } => {
                check_name(NameKind::Node, node)?;
                check_name(NameKind::Namespace, namespace)?;
                check_name(NameKind::Pod, name)?;
            }
        }
        Ok(root.join(self.dir()))
    }

    /// Where the layout puts the namespace's dump, under the snapshot's
    /// root, as it is shown (a path to write is [`NetnsId::path_in`]'s).
    pub fn dir(&self) -> PathBuf {
        match self {
            NetnsId::Host { node } => ["nodes", node, "host"].iter().collect(),
            NetnsId::Pod {
                node,
                namespace,
                name,
            } => ["nodes", node, "pods", namespace, name].iter().collect(),
        }
    }
}

impl fmt::Display for NetnsId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetnsId::Host { node } => write!(f, "node/{node}"),
            NetnsId::Pod {
                node,
                namespace,
                name,
            } => write!(f, "{namespace}/{name} (on {node})"),
        }
    }
}

/// One namespace dump, the directory it came from, and what a layer above
/// builds from the dump — the kernel model of the namespace
/// (`netstack::namespace::Modelled`) —, built the first time it is asked for
/// and then shared by every reader of the snapshot (the path walker, the
/// packs' host API, the CLI; and every flow of `skoop matrix`). This data-in
/// layer only keeps it beside the dump: what it is, and how it is built, are
/// the layer's above.
#[derive(Debug)]
pub struct NetnsEntry {
    pub dir: PathBuf,
    dump: Arc<NetnsDump>,
    built: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl NetnsEntry {
    pub fn new(dir: PathBuf, dump: NetnsDump) -> NetnsEntry {
        NetnsEntry {
            dir,
            dump: Arc::new(dump),
            built: OnceLock::new(),
        }
    }

    pub fn dump(&self) -> &NetnsDump {
        &self.dump
    }

    /// The dump, to change; what was built from it is built anew from what
    /// it becomes.
    pub fn dump_mut(&mut self) -> &mut NetnsDump {
        self.built = OnceLock::new();
        Arc::make_mut(&mut self.dump)
    }

    /// What `build` makes of the dump, made once: the first caller builds
    /// it, every later one shares it. `None` when something of another type
    /// was built from this dump first (the entry keeps one thing).
    pub fn built_once<T: Any + Send + Sync>(
        &self,
        build: impl FnOnce(Arc<NetnsDump>) -> T,
    ) -> Option<&T> {
        self.built
            .get_or_init(|| Box::new(build(Arc::clone(&self.dump))))
            .downcast_ref()
    }
}

impl Clone for NetnsEntry {
    /// The same dump; the copy builds its own when asked.
    fn clone(&self) -> NetnsEntry {
        NetnsEntry {
            dir: self.dir.clone(),
            dump: Arc::clone(&self.dump),
            built: OnceLock::new(),
        }
    }
}

/// Everything a diagnosis reads.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub root: PathBuf,
    pub cluster: Cluster,
    pub namespaces: BTreeMap<NetnsId, NetnsEntry>,
}

/// Why a directory could not be read as a snapshot at all.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{0}: no such directory")]
    NotFound(PathBuf),
    #[error("{0}: cannot read directory: {1}")]
    Unreadable(PathBuf, std::io::Error),
    #[error("{0}: not a snapshot (expected a cluster/ or nodes/ directory in it)")]
    NotASnapshot(PathBuf),
}

/// Where a load takes the cluster's objects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterFrom {
    /// `cluster.cache` when it is `cluster/`'s own (`cluster::cache`), else
    /// the files of `cluster/`.
    CacheWhenCurrent,
    /// The files of `cluster/`, whatever the cache holds.
    Files,
}

/// The objects of `<root>/cluster/` and the problems met reading them.
fn load_cluster(
    root: &Path,
    cluster_dir: &Path,
    boundary: &Boundary,
    from: ClusterFrom,
    budget: Budget,
) -> (Cluster, Vec<Problem>) {
    match boundary.is_dir(cluster_dir) {
        Ok(true) => {}
        Ok(false) => return (Cluster::default(), Vec::new()),
        Err(problem) => return (Cluster::default(), vec![problem]),
    }
    if from == ClusterFrom::Files {
        return cluster::load_within(cluster_dir, boundary, budget);
    }
    let passed_over = match cluster::cache::read(root, boundary) {
        Ok(Some(loaded)) => return loaded,
        Ok(None) => None,
        Err(problem) => Some(problem),
    };
    // The files, then: their cache is written on the way, for the next load.
    let (cluster, mut problems) = cluster::cache::load_writing(root, boundary, budget);
    problems.extend(passed_over);
    (cluster, problems)
}

/// Every namespace dump under `nodes/`, read on the cores there are (a
/// flow's path nodes on a large cluster each hold tens of megabytes of
/// rules); the dumps and their problems come out in the namespaces' order
/// whichever thread read them.
fn load_dumps(
    nodes_dir: &Path,
    boundary: &Boundary,
    rulesets: Rulesets,
) -> (BTreeMap<NetnsId, NetnsEntry>, Vec<Problem>) {
    let mut problems = Vec::new();
    let found = discover_namespaces(nodes_dir, boundary, &mut problems);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut loaded = Vec::new();
        loop {
            let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some((_, dir)) = found.get(at) else {
                return loaded;
            };
            loaded.push((at, load_dump(dir, boundary, rulesets)));
        }
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(found.len());
    let mut loaded = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut loaded = work();
        for helper in helpers {
            loaded.extend(
                helper
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        loaded
    });
    loaded.sort_by_key(|&(at, _)| at);
    let mut namespaces = BTreeMap::new();
    for ((id, dir), (_, (dump, dump_problems))) in found.into_iter().zip(loaded) {
        problems.extend(dump_problems);
        namespaces.insert(id, NetnsEntry::new(dir, dump));
    }
    (namespaces, problems)
}

/// The dump in `dir`, and the problems met reading it.
fn load_dump(dir: &Path, boundary: &Boundary, rulesets: Rulesets) -> (NetnsDump, Vec<Problem>) {
    // A directory holding nothing (collection made it and failed) is not
    // asked for each of its files: a snapshot may have thousands.
    let holds_nothing = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
    if holds_nothing {
        return (NetnsDump::default(), Vec::new());
    }
    let (dump, mut problems) = NetnsDump::load_inside(dir, boundary, rulesets);
    report_unexpected_files(dir, &mut problems);
    (dump, problems)
}

impl Snapshot {
    /// The namespaces whose directories hold no dump file at all: nothing
    /// was collected there.
    pub fn empty_dumps(&self) -> impl Iterator<Item = (&NetnsId, &NetnsEntry)> {
        self.namespaces
            .iter()
            .filter(|(_, entry)| entry.dump().is_empty())
    }

    /// Loads a snapshot directory. `Err` only when `root` is not a snapshot at
    /// all; every problem inside one is returned beside the snapshot. Nothing
    /// is read from outside `root`, whatever its symbolic links say.
    pub fn load(root: &Path) -> Result<(Snapshot, Vec<Problem>), SnapshotError> {
        Snapshot::load_inside(root, &Boundary::new(root))
    }

    /// [`Snapshot::load`] of a snapshot whose links may lead anywhere inside
    /// `boundary` (a pack's test snapshots share files inside their pack).
    pub fn load_inside(
        root: &Path,
        boundary: &Boundary,
    ) -> Result<(Snapshot, Vec<Problem>), SnapshotError> {
        Snapshot::load_with(root, boundary, ClusterFrom::CacheWhenCurrent)
    }

    /// [`Snapshot::load`], taking the cluster's objects from where `from` says.
    pub fn load_with(
        root: &Path,
        boundary: &Boundary,
        from: ClusterFrom,
    ) -> Result<(Snapshot, Vec<Problem>), SnapshotError> {
        Snapshot::load_within(root, boundary, from, Budget::default(), Rulesets::AsNeeded)
    }

    /// [`Snapshot::load_with`], reading no more of `cluster/` than `budget`,
    /// and as much of the iptables dumps as `rulesets` says.
    pub fn load_within(
        root: &Path,
        boundary: &Boundary,
        from: ClusterFrom,
        budget: Budget,
        rulesets: Rulesets,
    ) -> Result<(Snapshot, Vec<Problem>), SnapshotError> {
        if !root.is_dir() {
            return Err(SnapshotError::NotFound(root.to_path_buf()));
        }
        std::fs::read_dir(root).map_err(|e| SnapshotError::Unreadable(root.to_path_buf(), e))?;
        let cluster_dir = root.join("cluster");
        let nodes_dir = root.join("nodes");
        if !cluster_dir.is_dir() && !nodes_dir.is_dir() {
            return Err(SnapshotError::NotASnapshot(root.to_path_buf()));
        }

        // The objects and the dumps are read side by side: on a large
        // cluster each is a good part of a diagnosis's time.
        let ((cluster, mut problems), (namespaces, dump_problems)) = std::thread::scope(|scope| {
            let cluster = scope.spawn(|| load_cluster(root, &cluster_dir, boundary, from, budget));
            let dumps = load_dumps(&nodes_dir, boundary, rulesets);
            let cluster = cluster
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (cluster, dumps)
        });
        problems.extend(dump_problems);

        let snapshot = Snapshot {
            root: root.to_path_buf(),
            cluster,
            namespaces,
        };
        Ok((snapshot, problems))
    }

    /// The other end of a veth of `ns` whose peer is in another namespace of
    /// the same node, where the snapshot holds it (see [`veth_peer_among`]).
    pub fn veth_peer(&self, ns: &NetnsId, link: &Link) -> Option<(&NetnsId, &Link)> {
        // Ids order hosts before pods, and pods by node first.
        let node = ns.node().to_string();
        let host = NetnsId::Host { node: node.clone() };
        let first_pod = NetnsId::Pod {
            node: node.clone(),
            namespace: String::new(),
            name: String::new(),
        };
        let same_node = self
            .namespaces
            .get_key_value(&host)
            .into_iter()
            .chain(
                self.namespaces
                    .range(first_pod..)
                    .take_while(|(id, _)| id.node() == node),
            )
            .flat_map(|(id, entry)| entry.dump.links.iter().flatten().map(move |l| (id, l)));
        veth_peer_among(ns, link, same_node)
    }
}

/// The far end of a veth `link` of `ns` among `candidates`: the interface
/// whose ifindex is this one's peer index and whose peer index is this one's
/// ifindex. Interface numbers are per namespace, so the match must also join
/// a pod to its node (never a namespace to itself or a pod to a pod) of the
/// same node; what stays ambiguous is `None`.
pub fn veth_peer_among<'a>(
    ns: &NetnsId,
    link: &Link,
    candidates: impl IntoIterator<Item = (&'a NetnsId, &'a Link)>,
) -> Option<(&'a NetnsId, &'a Link)> {
    let peer_index = link.link_index?;
    let is_host = |id: &NetnsId| matches!(id, NetnsId::Host { .. });
    let mut matching = candidates.into_iter().filter(|(other, peer)| {
        *other != ns
            && other.node() == ns.node()
            && is_host(other) != is_host(ns)
            && peer.ifindex == peer_index
            && peer.link_index == Some(link.ifindex)
    });
    let peer = matching.next();
    match matching.next() {
        None => peer,
        Some(_) => None,
    }
}

/// Finds `nodes/<node>/host` and `nodes/<node>/pods/<ns>/<pod>` directories;
/// one whose name is not a Kubernetes name of its kind is a problem, not read.
fn discover_namespaces(
    nodes_dir: &Path,
    boundary: &Boundary,
    problems: &mut Vec<Problem>,
) -> Vec<(NetnsId, PathBuf)> {
    let mut found = Vec::new();
    for (node, node_dir) in named_subdirectories(NameKind::Node, nodes_dir, boundary, problems) {
        for (entry, entry_dir) in subdirectories(&node_dir, boundary, problems) {
            match entry.as_str() {
                "host" => found.push((NetnsId::Host { node: node.clone() }, entry_dir)),
                "pods" => {
                    let namespaces =
                        named_subdirectories(NameKind::Namespace, &entry_dir, boundary, problems);
                    for (namespace, ns_dir) in namespaces {
                        let pods = named_subdirectories(NameKind::Pod, &ns_dir, boundary, problems);
                        for (name, pod_dir) in pods {
                            let id = NetnsId::Pod {
                                node: node.clone(),
                                namespace: namespace.clone(),
                                name,
                            };
                            found.push((id, pod_dir));
                        }
                    }
                }
                _ => problems.push(Problem::in_file(
                    &entry_dir,
                    "unexpected directory: a node holds only host/ and pods/<namespace>/<pod>/",
                )),
            }
        }
    }
    found
}

/// The [`subdirectories`] of `dir` named as Kubernetes names `kind`; any
/// other is a problem, and not read.
fn named_subdirectories(
    kind: NameKind,
    dir: &Path,
    boundary: &Boundary,
    problems: &mut Vec<Problem>,
) -> Vec<(String, PathBuf)> {
    let mut named = subdirectories(dir, boundary, problems);
    named.retain(|(name, path)| match check_name(kind, name) {
        Ok(()) => true,
        Err(bad) => {
            problems.push(Problem::in_file(path, format!("{bad}; not read")));
            false
        }
    });
    named
}

/// The sorted subdirectories of `dir` with their names; a missing `dir` has
/// none. A link to a directory outside the snapshot is a problem, not one.
fn subdirectories(
    dir: &Path,
    boundary: &Boundary,
    problems: &mut Vec<Problem>,
) -> Vec<(String, PathBuf)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            problems.push(Problem::in_file(dir, format!("cannot read directory: {e}")));
            return Vec::new();
        }
    };
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        match boundary.is_dir(&path) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        }
        match entry.file_name().into_string() {
            Ok(name) => dirs.push((name, path)),
            Err(_) => problems.push(Problem::in_file(&path, "directory name is not UTF-8")),
        }
    }
    dirs.sort();
    dirs
}

/// A file in a namespace directory that the contract does not name is most
/// likely a misspelt dump: say so rather than silently treat it as absent.
fn report_unexpected_files(dir: &Path, problems: &mut Vec<Problem>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut unexpected: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|path| {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            DumpFile::from_name(name).is_none() && !(name == datapath::DIR && path.is_dir())
        })
        .collect();
    unexpected.sort();
    for path in unexpected {
        let expected: Vec<&str> = DumpFile::ALL.iter().map(|f| f.name()).collect();
        problems.push(Problem::in_file(
            &path,
            format!(
                "unexpected file in a namespace dump (expected only: {}, and a directory {}/)",
                expected.join(", "),
                datapath::DIR
            ),
        ));
    }
}
