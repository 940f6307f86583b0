//! The path walker: follows a packet from namespace to namespace across a
//! snapshot, asking `netstack` what each kernel does with it, and records
//! the hops, the links between them and where every path ends.
//!
//! The walk is a graph (petgraph): a hop is one visit of one network
//! namespace (or of the world outside the cluster), a link is how the packet
//! got from one hop to the next. Multipath routes fan out into paths of
//! their own; each path ends in exactly one [`Disposition`].
//!
//! **Architecture Invariant:** the engine never invents a verdict. A step
//! that needs something the snapshot does not hold ends the path as
//! [`Disposition::InsufficientInfo`], saying what was missing — unless the
//! namespace is missing as a whole and the CNI pack's hooks declare what it
//! does: then the hop, its steps and the path are marked `assumed`.

pub mod codes;
mod conclude;
mod hooks;
mod intent;
mod target;
mod topology;
mod walk;

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use petgraph::graph::{DiGraph, NodeIndex};

use crate::netstack::netfilter::RuleRef;
use crate::packs::LoadedPacks;
use crate::snapshot::cluster::IpOwner;
use crate::snapshot::{NetnsId, Snapshot};

pub use target::{
    Candidates, Endpoint, PacketSize, PacketSizeError, Protocol, Question, Request, TargetError,
    per_family, suggest_endpoint,
};

/// How a path ends. The closed set of DESIGN §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Disposition {
    Delivered,
    DeniedByNetfilter,
    NoRoute,
    /// An unreachable, blackhole or prohibit route or rule.
    UnreachableRoute,
    NeighborFailed,
    ForwardingDisabled,
    RpFilter,
    NoListener,
    MtuExceeded,
    Loop,
    ExitsCluster,
    InsufficientInfo,
    /// A BPF program attached to a device drops the packet.
    DroppedByProgram,
}

impl Disposition {
    /// Every disposition, in the contract's order (`docs/json.md`).
    pub const ALL: [Disposition; 13] = [
        Disposition::Delivered,
        Disposition::DeniedByNetfilter,
        Disposition::NoRoute,
        Disposition::UnreachableRoute,
        Disposition::NeighborFailed,
        Disposition::ForwardingDisabled,
        Disposition::RpFilter,
        Disposition::NoListener,
        Disposition::MtuExceeded,
        Disposition::Loop,
        Disposition::ExitsCluster,
        Disposition::InsufficientInfo,
        Disposition::DroppedByProgram,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Delivered => "delivered",
            Disposition::DeniedByNetfilter => "denied_by_netfilter",
            Disposition::NoRoute => "no_route",
            Disposition::UnreachableRoute => "unreachable_route",
            Disposition::NeighborFailed => "neighbor_failed",
            Disposition::ForwardingDisabled => "forwarding_disabled",
            Disposition::RpFilter => "rp_filter",
            Disposition::NoListener => "no_listener",
            Disposition::MtuExceeded => "mtu_exceeded",
            Disposition::Loop => "loop",
            Disposition::ExitsCluster => "exits_cluster",
            Disposition::InsufficientInfo => "insufficient_info",
            Disposition::DroppedByProgram => "dropped_by_program",
        }
    }
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a hop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopKind {
    Pod,
    Node,
    /// An address outside the cluster's namespaces.
    External,
}

/// Which namespace a hop visits, or the world outside: written as reports
/// show it (`default/web-0`, `node-1`, an outside address). Code compares
/// hops by this, never by their text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HopId {
    Pod {
        namespace: String,
        name: String,
    },
    Node {
        name: String,
    },
    /// An address outside the cluster's namespaces (`None`: a client whose
    /// address routing had not chosen).
    External(Option<IpAddr>),
}

impl HopId {
    /// A node's host namespace.
    pub fn node(name: impl Into<String>) -> HopId {
        HopId::Node { name: name.into() }
    }

    /// A pod's namespace.
    pub fn pod(namespace: impl Into<String>, name: impl Into<String>) -> HopId {
        HopId::Pod {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// What kind of hop this is.
    pub fn kind(&self) -> HopKind {
        match self {
            HopId::Pod { .. } => HopKind::Pod,
            HopId::Node { .. } => HopKind::Node,
            HopId::External(_) => HopKind::External,
        }
    }

    /// The hop of a namespace of the snapshot.
    pub fn of(netns: &NetnsId) -> HopId {
        match netns {
            NetnsId::Host { node } => HopId::Node { name: node.clone() },
            NetnsId::Pod {
                namespace, name, ..
            } => HopId::Pod {
                namespace: namespace.clone(),
                name: name.clone(),
            },
        }
    }
}

impl fmt::Display for HopId {
    /// Pods `NS/NAME`, nodes their name, anything else its address.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HopId::Pod { namespace, name } => write!(f, "{namespace}/{name}"),
            HopId::Node { name } => f.write_str(name),
            HopId::External(Some(address)) => write!(f, "{address}"),
            HopId::External(None) => Ok(()),
        }
    }
}

/// One visit of one network namespace.
#[derive(Debug, Clone)]
pub struct Hop {
    /// Which namespace it visits; what kind of hop it is follows from it.
    pub id: HopId,
    /// The node the namespace is on, for pods and nodes.
    pub node: Option<String>,
    /// The snapshot holds no dump of this namespace: what happens here is
    /// the CNI pack's intent, not its kernel's state.
    pub assumed: bool,
    pub steps: Vec<HopStep>,
    /// What the pack checks at this hop need to know of it.
    pub(crate) context: Option<HopContext>,
}

/// A hop as the rule packs see it: its namespace, the packet, and how the
/// packet passes (filled in as the walk goes).
#[derive(Debug, Clone)]
pub(crate) struct HopContext {
    pub netns: NetnsId,
    pub packet: crate::packs::Packet,
    pub in_iface: Option<String>,
    pub out_iface: Option<String>,
    /// The packet as it left by `out_iface` (translated, not yet in a
    /// tunnel the device puts it in).
    pub out_packet: Option<crate::packs::Packet>,
    /// A BPF program redirected the packet out of `out_iface`: it left
    /// without the stack forwarding it (no routing, no FORWARD chain, no
    /// forwarding sysctl).
    pub redirected: bool,
    pub delivered: bool,
    /// The source of the packet as it last entered the IP layer here
    /// (arrived on a device, or out of a tunnel): where an ICMP error about
    /// it goes, which after decapsulation is the inner packet's sender.
    pub received_from: Option<IpAddr>,
    /// The hop's packet as the walk last had it here — arrived, out of a
    /// tunnel, translated (not the outer packet of a tunnel the hop put it
    /// in: that one carries it) — and so, where the path ends at this hop,
    /// the packet as it was stopped. `None` once a translation gave it an
    /// address the dump does not (a masquerade to an unknown address).
    pub last_packet: Option<crate::packs::Packet>,
}

/// A step of a hop, and whether it was concluded from a pack's intent
/// rather than from the namespace's dump.
#[derive(Debug, Clone, PartialEq)]
pub struct HopStep {
    pub step: Step,
    pub assumed: bool,
}

/// Something the kernel did with the packet, in kernel order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The packet was generated here.
    Sent { packet: String },
    /// The packet arrived on an interface.
    Received { interface: String, packet: String },
    /// A route was chosen (or refused).
    Route {
        rule: String,
        route: String,
        result: String,
    },
    /// Netfilter rewrote the packet.
    Translated {
        hook: String,
        table: String,
        translation: String,
    },
    /// A netfilter rule (or chain policy) decided the packet's fate.
    Netfilter {
        rule: RuleRef,
        /// The dump file the rule is in, in the snapshot.
        file: PathBuf,
    },
    /// A neighbour (ARP) resolution.
    Neighbour {
        address: IpAddr,
        interface: String,
        result: String,
    },
    /// A bridge forwarded the frame to a port.
    Bridged { bridge: String, port: String },
    /// The packet was put into a tunnel.
    Encapsulated { device: String, outer: String },
    /// The packet came out of a tunnel.
    Decapsulated { device: String, inner: String },
    /// A BPF program attached to a device decided for the packet, as the
    /// pack that claims it says.
    Program {
        device: String,
        hook: String,
        program: String,
        verdict: String,
        why: String,
    },
    /// The packet reached a socket.
    Delivered { socket: String },
    /// The packet stopped here.
    Stopped {
        disposition: Disposition,
        reason: String,
    },
}

/// How the packet got from one hop to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    Veth,
    BridgePort,
    Vxlan,
    Underlay,
    /// Through routers of the underlay that are not in the snapshot (a
    /// node's gateway nobody holds) to the node holding the destination:
    /// assumed.
    UnderlayRouted,
    /// Within one namespace: the destination's socket answering.
    Local,
    /// Leaving the cluster.
    Outside,
}

impl LinkKind {
    /// Whether crossing the link is assumed rather than read from the
    /// snapshot (what is between its ends is not in it).
    pub fn assumed(self) -> bool {
        self == LinkKind::UnderlayRouted
    }
}

#[derive(Debug, Clone)]
pub struct Link {
    pub kind: LinkKind,
    /// Interface the packet left by.
    pub from_interface: String,
    /// Interface the packet arrived on, where there is one.
    pub to_interface: Option<String>,
    /// The packet as it is on the wire.
    pub packet: String,
    /// The same packet's fields.
    pub fields: PacketFields,
}

/// A packet's fields, beside its readable text: its header (the source
/// unspecified until routing chose it; protocol 4 for an
/// IPIP outer packet), the size `--size` gave, and the packet a tunnel's
/// outer packet carries.
#[derive(Debug, Clone, PartialEq)]
pub struct PacketFields {
    pub ip: crate::net::Packet,
    /// Its length in bytes with `--size` (not a probe's).
    pub bytes: Option<u32>,
    /// The answer to the flow.
    pub reply: bool,
    pub inner: Option<Box<PacketFields>>,
}

/// Where on the path a finding is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtHop {
    /// The hop it is about.
    pub hop: HopId,
    /// Index of that hop in [`Diagnosis::graph`] (hop ids repeat when a
    /// namespace is visited twice).
    pub hop_index: usize,
}

/// A finding of a diagnosis: what stopped a path or is worth knowing about
/// it, at a hop.
pub type Finding = crate::diagnostic::Finding<AtHop>;

pub use crate::diagnostic::{Evidence, FindingStatus, Severity};

/// One way through the graph, from the source to where it ends.
#[derive(Debug, Clone)]
pub struct PathResult {
    pub disposition: Disposition,
    /// The share of flows that take this path (multipath splits it).
    pub probability: f64,
    /// Its hops' indices in [`Diagnosis::graph`], in order.
    pub hops: Vec<usize>,
    /// The path goes through a hop or over a link whose behaviour is assumed.
    pub assumed: bool,
    /// How the packet leaves the cluster, where the path does.
    pub exit: Option<Exit>,
    /// Where the path's request goes once translated; `None` where no hop
    /// holds its packet.
    pub backend: Option<Backend>,
}

/// Where a path's request is delivered, or would be: its destination once
/// every translation on the way (a service's DNAT) is done, and whose
/// address that is. A service's paths differ by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    pub address: IpAddr,
    pub port: Option<u16>,
    /// The pod or node the address is of.
    pub owner: Option<HopId>,
}

impl Backend {
    /// Whose address it is, as `--to` names it: a pod `NS/NAME`, a node
    /// `node/NAME`.
    pub fn owner_name(&self) -> Option<String> {
        self.owner.as_ref().map(|owner| match owner {
            HopId::Node { name } => format!("node/{name}"),
            other => other.to_string(),
        })
    }

    /// The address, with its port where it has one.
    pub fn socket(&self) -> String {
        match self.port {
            Some(port) => std::net::SocketAddr::new(self.address, port).to_string(),
            None => self.address.to_string(),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.owner_name() {
            Some(owner) => write!(f, "{owner} ({})", self.socket()),
            None => f.write_str(&self.socket()),
        }
    }
}

impl PathResult {
    /// The path ends as intended: delivered, or out of the cluster with a
    /// source address the outside can answer.
    pub fn succeeds(&self) -> bool {
        self.disposition == Disposition::Delivered
            || (self.disposition == Disposition::ExitsCluster
                && self.exit.as_ref().is_some_and(|exit| exit.answerable))
    }
}

/// The source address a packet leaves the cluster with, and whether the
/// outside can answer it: a node's address (masqueraded, or the node's
/// own traffic) is routed back to the node; a pod's is not, since nothing
/// outside the cluster routes pod addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// `None` where a masquerade gave it an address the dump does not show.
    pub source: Option<IpAddr>,
    pub answerable: bool,
    /// Whose address it is, and why it can or cannot be answered.
    pub why: String,
}

/// A diagnosis's conclusion (see [`Diagnosis::verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// Every path ends as intended and no finding is critical or fatal.
    Succeeds,
    /// Every path ends as intended, but a critical or fatal finding says
    /// something on the way is broken all the same.
    DeliveredWithSevereFindings,
    /// Some path does not end as intended.
    NotDelivered,
}

/// The answer to a [`Request`].
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// The question as resolved against the snapshot.
    pub request: target::Question,
    pub graph: DiGraph<Hop, Link>,
    pub paths: Vec<PathResult>,
    /// The findings about the hops of its paths: the cause first (the
    /// findings at the hops where paths stop), then the rest by severity.
    pub findings: Vec<Finding>,
    /// Findings about the nodes the flow crosses but not about its hops (a
    /// node's tunnel to a node no path goes to): said apart, they change
    /// neither the verdict nor the exit status.
    pub off_path: Vec<Finding>,
    /// The CNI pack whose intent stood in for the namespaces the snapshot
    /// lacks, when any was stepped over.
    pub assumed_by: Option<String>,
    /// What the flow is meant to reach inside the cluster, as `--to` names
    /// it (`default/web-2`, `node/node-2`, `service default/web`): the
    /// destination, or the owner of its address. `None` for an address
    /// outside the cluster, the only kind a path leaving the cluster can
    /// reach.
    pub destination: Option<String>,
    /// The packs that applied to the cluster, in load order: a CNI pack's
    /// name marked `(CNI)` (detected, or chosen with `--cni`), a pack that
    /// only lends checks to a composed one `(part of NAME)`.
    pub packs: Vec<String>,
}

impl Diagnosis {
    /// Whether there is a path and every path ends as intended (see
    /// [`PathResult::succeeds`]): delivered, or out of the cluster where the
    /// outside can answer.
    pub fn succeeds(&self) -> bool {
        !self.paths.is_empty() && self.paths.iter().all(PathResult::succeeds)
    }

    /// What the diagnosis concludes as a whole: the one place that decides
    /// it (`diagnose`'s exit status, each flow of `skoop matrix`).
    pub fn verdict(&self) -> Verdict {
        if !self.succeeds() {
            Verdict::NotDelivered
        } else if self
            .findings
            .iter()
            .any(|f| f.severity >= Severity::Critical)
        {
            Verdict::DeliveredWithSevereFindings
        } else {
            Verdict::Succeeds
        }
    }

    /// How the first path that leaves the cluster leaves it.
    pub fn exit(&self) -> Option<&Exit> {
        self.paths.iter().find_map(|path| path.exit.as_ref())
    }

    /// The hop where `path` stops: its last, or for a path that leaves the
    /// cluster the last hop inside it; `None` for a delivered path.
    pub fn stop_hop(&self, path: &PathResult) -> Option<usize> {
        match path.disposition {
            Disposition::Delivered => None,
            _ => path
                .hops
                .iter()
                .rev()
                .copied()
                .find(|&hop| self.hop(hop).id.kind() != HopKind::External),
        }
    }

    /// The node a path from a client outside the cluster enters at.
    pub fn entry(&self, path: &PathResult) -> Option<&HopId> {
        match path.hops.as_slice() {
            [client, entry, ..] if self.hop(*client).id.kind() == HopKind::External => {
                Some(&self.hop(*entry).id)
            }
            _ => None,
        }
    }

    /// Where `path` leaves the cluster: the last hop inside it and the
    /// device it leaves by.
    pub fn left_at(&self, path: &PathResult) -> Option<(&HopId, &str)> {
        path.hops.windows(2).find_map(|pair| {
            let (from, to) = (NodeIndex::new(pair[0]), NodeIndex::new(pair[1]));
            let link = &self.graph[self.graph.find_edge(from, to)?];
            (link.kind == LinkKind::Outside)
                .then(|| (&self.graph[from].id, link.from_interface.as_str()))
        })
    }

    /// `delivered` only if every path is; otherwise the disposition of the
    /// [`Diagnosis::deciding_path`] among those that are not.
    pub fn disposition(&self) -> Disposition {
        match self.deciding_path(|p| p.disposition != Disposition::Delivered) {
            Some(path) => path.disposition,
            None if self.paths.is_empty() => Disposition::InsufficientInfo,
            None => Disposition::Delivered,
        }
    }

    /// The path a verdict about the paths `counts` picks is told by: of
    /// their dispositions, a definite one before `insufficient_info`, then
    /// the one most flows meet, then the one met first; its first path.
    /// Backends are listed in the proxy's order, which follows addresses
    /// an IPAM may hand out in any order: the flows' shares, not that
    /// order, decide.
    pub fn deciding_path(&self, counts: impl Fn(&PathResult) -> bool) -> Option<&PathResult> {
        let mut shares: Vec<(Disposition, f64, usize)> = Vec::new();
        for (index, path) in self.paths.iter().enumerate().filter(|(_, p)| counts(p)) {
            match shares.iter_mut().find(|(d, _, _)| *d == path.disposition) {
                Some((_, share, _)) => *share += path.probability,
                None => shares.push((path.disposition, path.probability, index)),
            }
        }
        let unknown = |d: Disposition| d == Disposition::InsufficientInfo;
        shares
            .into_iter()
            .min_by(|a, b| {
                (unknown(a.0).cmp(&unknown(b.0)))
                    .then(b.1.total_cmp(&a.1))
                    .then(a.2.cmp(&b.2))
            })
            .map(|(_, _, index)| &self.paths[index])
    }

    /// Whether any path goes through an assumed hop.
    pub fn assumed(&self) -> bool {
        self.paths.iter().any(|p| p.assumed)
    }

    pub fn hop(&self, index: usize) -> &Hop {
        &self.graph[NodeIndex::new(index)]
    }
}

/// Walks `request` through `snapshot`, then asks `packs` what they expected
/// at every hop of it.
pub fn diagnose(
    snapshot: &Arc<Snapshot>,
    request: &Request,
    packs: &LoadedPacks,
) -> Result<Diagnosis, TargetError> {
    let resolved = target::resolve(snapshot, request)?;
    let mut diagnosis = walk::walk(snapshot, &resolved, packs);
    diagnosis.destination = conclude::destination(snapshot, request, &resolved);
    diagnosis.packs = packs
        .applying(snapshot)
        .map(|pack| match (pack.kind, packs.role(pack, snapshot)) {
            (_, Some(crate::packs::Role::Part { of, .. })) => {
                format!("{} (part of {})", pack.name, of.name)
            }
            (crate::packs::PackKind::Cni, _) => format!("{} (CNI)", pack.name),
            (crate::packs::PackKind::Rules, _) => pack.name.clone(),
        })
        .collect();
    if diagnosis.destination.is_some() {
        // Whether the outside can answer is a question only for a
        // destination outside: one inside the cluster is not reached.
        for path in &mut diagnosis.paths {
            path.exit = None;
        }
    }
    let service = target_service(snapshot, request, &resolved);
    let findings = intent::pack_findings(&diagnosis, snapshot, packs, service.as_ref());
    diagnosis.findings.extend(findings.on_path);
    diagnosis.off_path = findings.off_path;
    conclude::cause_first(&mut diagnosis);
    Ok(diagnosis)
}

/// The Service the request goes to: named (`svc/NS/NAME`), or the owner of
/// the destination address (a ClusterIP, external IP or load-balancer IP).
fn target_service(
    snapshot: &Snapshot,
    request: &Request,
    resolved: &target::Resolved,
) -> Option<(String, String)> {
    if let Endpoint::Service {
        namespace, name, ..
    } = &request.to
    {
        return Some((namespace.clone(), name.clone()));
    }
    snapshot
        .cluster
        .by_ip(resolved.question.dst)
        .iter()
        .find_map(IpOwner::service)
        .map(|(namespace, name)| (namespace.to_owned(), name.to_owned()))
}
