//! What a check or hook sees: the scope it runs in.
//!
//! Checks are evaluated per *subject*: a node's host namespace, a pod's
//! namespace, a cluster object, or (for the path walker) one hop of a path
//! with the packet as it is there. Scripts reach the snapshot through small
//! handles ([`NodeRef`], [`PodRef`], [`NetnsRef`], [`ClusterRef`]) that share
//! the snapshot instead of copying it, so that building a scope is cheap.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rhai::Dynamic;

use crate::netstack::netfilter::RuleRef;
use crate::snapshot::cluster::{Node, Pod};
use crate::snapshot::{NetnsEntry, NetnsId, Snapshot};

/// A packet as the packs see it: the one packet type of every layer.
pub use crate::net::Packet;

/// One hop of a path, as the walker hands it to hop-scoped checks and hooks.
#[derive(Debug, Clone)]
pub struct HopScope {
    pub snapshot: Arc<Snapshot>,
    pub netns: NetnsId,
    /// The interface the packet arrived on; `None` when it starts here.
    pub in_iface: Option<String>,
    /// The interface it leaves by; `None` when it is delivered here or dropped.
    pub out_iface: Option<String>,
    /// The packet as it leaves by `out_iface` (translated here, not yet in
    /// a tunnel); `None` when it does not leave.
    pub out_packet: Option<Packet>,
    /// The hop routes the packet on to another interface (it is not its
    /// source nor its destination).
    pub forwarding: bool,
    /// The packet is delivered to a socket of this namespace.
    pub delivers_locally: bool,
    pub packet: Packet,
    /// The hop is on the way back: the answer to a request delivered earlier
    /// on the path (conntrack's ESTABLISHED direction).
    pub reply: bool,
    /// The packet as the path's first hop sent it, before any NAT on the way;
    /// `None` when this hop is the first.
    pub origin: Option<Packet>,
    /// How the path ended here, when it did; a path that leaves the
    /// cluster ends at the last hop inside it.
    pub stopped: Option<HopStop>,
}

impl HopScope {
    /// A hop where `packet` starts: no interfaces yet, not forwarding nor
    /// delivering, on the way out, nowhere stopped. Callers set what they
    /// know with struct update syntax.
    pub fn new(snapshot: Arc<Snapshot>, netns: NetnsId, packet: Packet) -> HopScope {
        HopScope {
            snapshot,
            netns,
            in_iface: None,
            out_iface: None,
            out_packet: None,
            forwarding: false,
            delivers_locally: false,
            packet,
            reply: false,
            origin: None,
            stopped: None,
        }
    }

    /// The packet as the path's first hop sent it.
    pub fn origin(&self) -> &Packet {
        self.origin.as_ref().unwrap_or(&self.packet)
    }
}

/// The end of a path at a hop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopStop {
    /// The disposition as docs/json.md spells it (`denied_by_netfilter`).
    pub disposition: String,
    pub reason: String,
    /// The packet as it was when stopped: decapsulated, and translated by
    /// the NAT this hop did before the stop. `None` when the hop's record
    /// does not tell (a masquerade to an address the dump does not give).
    pub packet: Option<Packet>,
    /// The netfilter rule or chain policy that dropped or rejected the packet.
    pub netfilter: Option<StoppingRule>,
}

/// A netfilter rule (or chain policy) that ended a path, as the walker
/// recorded it, and the dump file it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoppingRule {
    pub rule: RuleRef,
    /// The ruleset's dump file in the snapshot.
    pub file: PathBuf,
}

impl StoppingRule {
    /// `FILE[:LINE[:COLUMN]]`.
    pub fn evidence(&self) -> String {
        self.rule.place(&self.file).to_string()
    }
}

/// What a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(tag = "scope", rename_all = "kebab-case")]
pub enum Subject {
    Node {
        name: String,
    },
    Pod {
        namespace: String,
        name: String,
    },
    Object {
        kind: String,
        namespace: String,
        name: String,
    },
    /// A hop of a path: the namespace it is in.
    Hop {
        netns: String,
    },
    /// The pack itself (a mode that no `when` selects, a detection problem).
    Pack {
        name: String,
    },
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Node { name } => write!(f, "node/{name}"),
            Subject::Pod { namespace, name } => write!(f, "{namespace}/{name}"),
            Subject::Object {
                kind,
                namespace,
                name,
            } if namespace.is_empty() => write!(f, "{kind} {name}"),
            Subject::Object {
                kind,
                namespace,
                name,
            } => write!(f, "{kind} {namespace}/{name}"),
            Subject::Hop { netns } => write!(f, "hop in {netns}"),
            Subject::Pack { name } => write!(f, "pack {name}"),
        }
    }
}

/// A node of the cluster, by name, in a shared snapshot.
#[derive(Debug, Clone)]
pub struct NodeRef {
    pub snapshot: Arc<Snapshot>,
    pub name: String,
}

impl NodeRef {
    /// `None` when the snapshot has no Node object of that name.
    pub fn new(snapshot: &Arc<Snapshot>, name: &str) -> Option<NodeRef> {
        snapshot.cluster.node(name)?;
        Some(NodeRef {
            snapshot: snapshot.clone(),
            name: name.to_owned(),
        })
    }

    pub fn get(&self) -> Option<&Node> {
        self.snapshot.cluster.node(&self.name)
    }
}

/// A pod of the cluster, by namespace and name.
#[derive(Debug, Clone)]
pub struct PodRef {
    pub snapshot: Arc<Snapshot>,
    pub namespace: String,
    pub name: String,
}

impl PodRef {
    pub fn new(snapshot: &Arc<Snapshot>, namespace: &str, name: &str) -> Option<PodRef> {
        snapshot.cluster.pod(namespace, name)?;
        Some(PodRef {
            snapshot: snapshot.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }

    pub fn get(&self) -> Option<&Pod> {
        self.snapshot.cluster.pod(&self.namespace, &self.name)
    }
}

/// One namespace dump of the snapshot.
#[derive(Debug, Clone)]
pub struct NetnsRef {
    pub snapshot: Arc<Snapshot>,
    pub id: NetnsId,
}

impl NetnsRef {
    pub fn entry(&self) -> Option<&NetnsEntry> {
        self.snapshot.namespaces.get(&self.id)
    }
}

/// The cluster's objects.
#[derive(Debug, Clone)]
pub struct ClusterRef {
    pub snapshot: Arc<Snapshot>,
}

/// What a check's scripts and expressions see: `ctx` in a function, and the
/// same names as variables in a `${...}` expression.
#[derive(Debug, Clone)]
pub struct Context {
    /// The pack's parameters, with defaults and overrides applied (a map).
    pub params: Dynamic,
    pub snapshot: Arc<Snapshot>,
    pub subject: Subject,
    pub node: Option<NodeRef>,
    pub pod: Option<PodRef>,
    pub netns: Option<NetnsRef>,
    /// The cluster object of an object-scoped check.
    pub object: Option<Dynamic>,
    /// The other node of a `for_each: remote_nodes` check.
    pub peer: Option<NodeRef>,
    /// The container port of a `for_each: container_ports` check (a map).
    pub port: Option<Dynamic>,
    pub hop: Option<Arc<HopScope>>,
    /// What the applying CNI pack declares its CNI admits whatever the
    /// NetworkPolicies (`network_policy.admits`), as `[#{protocol, why}]`.
    pub cni_admits: Dynamic,
}

impl Context {
    pub fn new(params: Dynamic, snapshot: Arc<Snapshot>, subject: Subject) -> Context {
        Context {
            params,
            snapshot,
            subject,
            node: None,
            pod: None,
            netns: None,
            object: None,
            peer: None,
            port: None,
            hop: None,
            cni_admits: Dynamic::from_array(Vec::new()),
        }
    }

    pub fn cluster(&self) -> ClusterRef {
        ClusterRef {
            snapshot: self.snapshot.clone(),
        }
    }

    /// The variables a `${...}` expression sees, by name; absent ones are `()`.
    /// At a hop, `packet` is the hop's packet handed out whole: it counts as
    /// read (`packs/reads.rs`) whether the expression reads it or not.
    pub fn variables(&self) -> [(&'static str, Dynamic); 12] {
        if self.hop.is_some() {
            super::reads::record(super::reads::HopReads::PACKET);
        }
        let opt = |value: Option<Dynamic>| value.unwrap_or(Dynamic::UNIT);
        [
            ("params", self.params.clone()),
            // What a script check's function gets: for `lib/` functions
            // that take it (`${flannel::backend(ctx)}`).
            ("ctx", Dynamic::from(self.clone())),
            ("subject", self.subject.to_string().into()),
            ("cluster", Dynamic::from(self.cluster())),
            ("node", opt(self.node.clone().map(Dynamic::from))),
            ("pod", opt(self.pod.clone().map(Dynamic::from))),
            ("netns", opt(self.netns.clone().map(Dynamic::from))),
            ("object", opt(self.object.clone())),
            ("peer", opt(self.peer.clone().map(Dynamic::from))),
            ("port", opt(self.port.clone())),
            ("hop", opt(self.hop.clone().map(Dynamic::from))),
            (
                "packet",
                opt(self
                    .hop
                    .as_ref()
                    .map(|hop| Dynamic::from(hop.packet.clone()))),
            ),
        ]
    }

    /// The names of [`Context::variables`], for compiling expressions with
    /// strict variables. `packet` is `hop.packet` under its own name, `ctx`
    /// all of them as one value.
    pub const VARIABLES: [&'static str; 12] = [
        "params", "ctx", "subject", "cluster", "node", "pod", "netns", "object", "peer", "port",
        "hop", "packet",
    ];
}
