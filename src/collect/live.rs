//! Live collection into a snapshot directory: the cluster's objects
//! through the API, then the network namespaces asked for, node by node
//! (several nodes at once), through each node's [`NodeShell`].
//!
//! Which namespaces one flow needs is the engine's to find, above this
//! layer (`crate::live_flow`: walk, collect what the walk lacked, walk
//! again); this module only collects what it is asked for.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::stream::{self, StreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use super::api::{Connection, LiveError};
use super::collector::{
    CollectorOptions, CollectorPod, RUN_LABEL, delete_labelled, ensure_namespace,
};
use super::dump::{CollectError, CollectReport};
use super::node::{PodOnNode, collect_host, collect_pod};
use super::objects::{ObjectsReport, collect_objects};
use super::shell::NodeShell;
use crate::packs::{Datapath, LoadedPacks};

/// Nodes collected at the same time.
const PARALLEL_NODES: usize = 8;

/// How skoop reaches the nodes.
#[derive(Debug, Clone)]
pub enum NodeAccess {
    /// A collector pod per node, through `pods/exec` (the default).
    CollectorPods(CollectorOptions),
    /// `--node-exec TEMPLATE` on this machine, `{node}` and `{address}`
    /// replaced (`ssh {node} sudo`).
    Template(String),
}

/// A network namespace to collect.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wanted {
    Host { node: String },
    Pod { namespace: String, name: String },
}

impl fmt::Display for Wanted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wanted::Host { node } => write!(f, "node/{node}"),
            Wanted::Pod { namespace, name } => write!(f, "pod {namespace}/{name}"),
        }
    }
}

/// What became of one namespace asked for.
#[derive(Debug)]
pub struct Outcome {
    pub wanted: Wanted,
    pub result: Result<CollectReport, String>,
}

/// Pods by namespace and name.
type PodsByName = BTreeMap<(String, String), PodOnNode>;
/// Nodes by name, with their first InternalIP.
type NodeAddresses = BTreeMap<String, Option<String>>;

/// A live collection in progress: the connection, what is known of the
/// cluster's pods and nodes, and the node shells opened so far.
pub struct LiveCollection {
    connection: Connection,
    access: NodeAccess,
    root: PathBuf,
    pods: PodsByName,
    nodes: NodeAddresses,
    shells: BTreeMap<String, Arc<NodeShell>>,
    /// Nodes that could not be reached, and why.
    pub unreachable: BTreeMap<String, String>,
    attempted: BTreeSet<Wanted>,
    pub objects: ObjectsReport,
    pub outcomes: Vec<Outcome>,
    /// How many rounds of a flow's collection (`crate::live_flow`) collected
    /// something.
    pub rounds: usize,
    progress: ProgressBar,
    /// The programmable datapaths the packs model, whose state is collected
    /// where their programs are attached.
    datapaths: Vec<Datapath>,
}

impl LiveCollection {
    /// Writes the cluster's objects into `root/cluster/` and gets ready to
    /// collect namespaces.
    pub async fn start(
        connection: Connection,
        access: NodeAccess,
        packs: &LoadedPacks,
        root: &Path,
    ) -> Result<LiveCollection, LiveError> {
        let progress = ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {msg} [{pos}/{len}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        progress.set_message("listing the cluster's objects");
        progress.enable_steady_tick(std::time::Duration::from_millis(120));
        let (mut pods, mut nodes) = (PodsByName::new(), NodeAddresses::new());
        let objects = collect_objects(&connection, packs, root, |resource, items| {
            if !resource.group.is_empty() {
                return;
            }
            match resource.kind.as_str() {
                "Pod" => pods.extend(items.iter().filter_map(pod_on_node)),
                "Node" => nodes.extend(items.iter().filter_map(node_address)),
                _ => {}
            }
        })
        .await?;
        if let NodeAccess::CollectorPods(options) = &access {
            ensure_namespace(&connection, options).await?;
        }
        Ok(LiveCollection {
            connection,
            access,
            root: root.to_path_buf(),
            pods,
            nodes,
            shells: BTreeMap::new(),
            unreachable: BTreeMap::new(),
            attempted: BTreeSet::new(),
            objects,
            outcomes: Vec::new(),
            rounds: 0,
            progress,
            datapaths: packs.datapaths(),
        })
    }

    /// The snapshot directory collected into.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn nodes(&self) -> impl Iterator<Item = &String> {
        self.nodes.keys()
    }

    /// Every non-host-network pod on `node`.
    pub fn pods_on(&self, node: &str) -> Vec<Wanted> {
        self.pods
            .values()
            .filter(|pod| pod.node == node)
            .map(|pod| Wanted::Pod {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
            })
            .collect()
    }

    /// Collects what is `wanted` and was not asked for before; returns how
    /// many namespaces that was.
    pub async fn collect(&mut self, wanted: impl IntoIterator<Item = Wanted>) -> usize {
        let mut by_node: BTreeMap<String, Vec<Wanted>> = BTreeMap::new();
        for want in wanted {
            if !self.attempted.insert(want.clone()) {
                continue;
            }
            match self.node_of(&want) {
                Some(node) => by_node.entry(node).or_default().push(want),
                None => {
                    let why = match &want {
                        Wanted::Host { .. } => "the cluster has no such node",
                        Wanted::Pod { .. } => {
                            "the cluster has no such pod on a node, or it uses its node's network namespace (hostNetwork)"
                        }
                    };
                    self.outcomes.push(Outcome {
                        result: Err(why.into()),
                        wanted: want,
                    });
                }
            }
        }
        let count: usize = by_node.values().map(Vec::len).sum();
        self.progress.inc_length(count as u64);
        let jobs: Vec<_> = by_node
            .into_iter()
            .map(|(node, wanted)| {
                let shell = self.shells.get(&node).cloned();
                let known_unreachable = self.unreachable.get(&node).cloned();
                (node, wanted, shell, known_unreachable)
            })
            .collect();
        let this = &*self;
        let results: Vec<_> = stream::iter(jobs)
            .map(|(node, wanted, shell, known_unreachable)| async move {
                this.collect_on_node(node, wanted, shell, known_unreachable)
                    .await
            })
            .buffer_unordered(PARALLEL_NODES)
            .collect()
            .await;
        for (node, shell, outcomes) in results {
            match shell {
                Ok(shell) => {
                    self.shells.insert(node, shell);
                }
                Err(reason) => {
                    self.unreachable.insert(node, reason);
                }
            }
            self.outcomes.extend(outcomes);
        }
        count
    }

    /// The shell of `node`, opened the first time it is asked for (and kept
    /// for the rest of the run); `Err` says why the node cannot be reached.
    pub async fn shell(&mut self, node: &str) -> Result<Arc<NodeShell>, String> {
        if let Some(shell) = self.shells.get(node) {
            return Ok(shell.clone());
        }
        if let Some(reason) = self.unreachable.get(node) {
            return Err(reason.clone());
        }
        if !self.nodes.contains_key(node) {
            return Err(format!("the cluster has no node {node}"));
        }
        match self.open_shell(node).await.map(Arc::new) {
            Ok(shell) => {
                self.shells.insert(node.to_string(), shell.clone());
                Ok(shell)
            }
            Err(reason) => {
                self.unreachable.insert(node.to_string(), reason.clone());
                Err(reason)
            }
        }
    }

    async fn collect_on_node(
        &self,
        node: String,
        wanted: Vec<Wanted>,
        shell: Option<Arc<NodeShell>>,
        known_unreachable: Option<String>,
    ) -> (String, Result<Arc<NodeShell>, String>, Vec<Outcome>) {
        let shell = match (shell, known_unreachable) {
            (Some(shell), _) => Ok(shell),
            (None, Some(reason)) => Err(reason),
            (None, None) => {
                self.progress.set_message(format!("reaching node {node}"));
                self.open_shell(&node).await.map(Arc::new)
            }
        };
        let mut outcomes = Vec::new();
        for want in wanted {
            let result = match &shell {
                Err(reason) => Err(format!("node {node} not reached: {reason}")),
                Ok(shell) => {
                    self.progress.set_message(format!("collecting {want}"));
                    self.collect_one(shell, &want)
                        .await
                        .map_err(|e| e.to_string())
                }
            };
            self.progress.inc(1);
            outcomes.push(Outcome {
                wanted: want,
                result,
            });
        }
        (node, shell, outcomes)
    }

    async fn open_shell(&self, node: &str) -> Result<NodeShell, String> {
        match &self.access {
            NodeAccess::Template(template) => {
                let address = self.nodes.get(node).cloned().flatten();
                NodeShell::template(template, node, address.as_deref()).map_err(|e| e.to_string())
            }
            NodeAccess::CollectorPods(options) => {
                CollectorPod::start(&self.connection, node, options)
                    .await
                    .map(|pod| NodeShell::Pod(Box::new(pod)))
                    .map_err(|e| e.to_string())
            }
        }
    }

    async fn collect_one(
        &self,
        shell: &NodeShell,
        want: &Wanted,
    ) -> Result<CollectReport, CollectError> {
        match want {
            Wanted::Host { node } => collect_host(shell, &self.root, node, &self.datapaths).await,
            Wanted::Pod { namespace, name } => {
                let pod = &self.pods[&(namespace.clone(), name.clone())];
                collect_pod(shell, &self.root, pod, &self.datapaths).await
            }
        }
    }

    fn node_of(&self, want: &Wanted) -> Option<String> {
        match want {
            Wanted::Host { node } => self.nodes.contains_key(node).then(|| node.clone()),
            Wanted::Pod { namespace, name } => self
                .pods
                .get(&(namespace.clone(), name.clone()))
                .map(|pod| pod.node.clone()),
        }
    }

    /// Takes the progress display off the terminal.
    pub fn stop_progress(&self) {
        self.progress.finish_and_clear();
    }
}

/// Deletes the collector pods of the run `access` describes (none for
/// `--node-exec`, nor before the run asked for one): after success,
/// failure, timeout or Ctrl-C alike.
pub async fn cleanup_run(
    connection: &Connection,
    access: &NodeAccess,
) -> Result<Vec<String>, LiveError> {
    match access {
        NodeAccess::CollectorPods(options) if options.asked.load(Ordering::Relaxed) => {
            let labels = BTreeMap::from([(RUN_LABEL, options.run.as_str())]);
            delete_labelled(connection, Some(&options.namespace), &labels).await
        }
        NodeAccess::CollectorPods(_) | NodeAccess::Template(_) => Ok(Vec::new()),
    }
}

/// A string field of an object, by JSON pointer.
fn text(value: &Value, pointer: &str) -> Option<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A listed pod whose network namespace can be collected: on a node, with
/// a UID, not on the host network.
fn pod_on_node(pod: &Value) -> Option<((String, String), PodOnNode)> {
    let host_network = pod
        .pointer("/spec/hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if host_network {
        return None;
    }
    let namespace = text(pod, "/metadata/namespace")?;
    let name = text(pod, "/metadata/name")?;
    let uid = text(pod, "/metadata/uid")?;
    let node = text(pod, "/spec/nodeName")?;
    let mut ips: Vec<String> = pod
        .pointer("/status/podIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|ip| text(ip, "/ip"))
        .collect();
    if ips.is_empty() {
        ips.extend(text(pod, "/status/podIP"));
    }
    let key = (namespace.clone(), name.clone());
    Some((
        key,
        PodOnNode {
            namespace,
            name,
            uid,
            node,
            ips,
        },
    ))
}

/// A listed node's name and first InternalIP.
fn node_address(node: &Value) -> Option<(String, Option<String>)> {
    let name = text(node, "/metadata/name")?;
    let address = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
        .and_then(|a| text(a, "/address"));
    Some((name, address))
}
