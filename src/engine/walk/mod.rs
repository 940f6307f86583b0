//! The walk itself: one namespace at a time, as the kernel would move the packet.
//!
//! The walk is a driver loop ([`Walker::run`]) over stages. A stage takes
//! the place it works at (a [`Place`]: the namespace and its hop in the
//! graph) and what moves (a [`Flow`]: the packet and the branch of the walk
//! it is on), and returns what happens next ([`Next`]): the packet goes into
//! a namespace (a new hop) or is in the same one again (out of a tunnel,
//! into one, after IPVS's choice), one netfilter outcome is to be followed,
//! the path stops or ends, or it forks into ways walked one after the
//! other. Within a hop a stage may hand over to the next one directly (the
//! egress device to its link kind); every crossing into a namespace and
//! every fork goes back to the loop.
//!
//! The stages, one job each: `cross` (a new hop, what every packet meets
//! first, links between hops, the underlay, outside), `stack` (netfilter
//! with routing between its hooks, forwarding, rp_filter), `deliver` (a
//! tunnel device, IPVS or a socket takes the packet), `conntrack` (the
//! branch's connection, NAT undone for the reply, the reply's arrival),
//! `mtu` (sizes against devices, the ICMP error a hop answers with),
//! `tunnel` (VXLAN and IPIP in and out), `datapath` (a BPF program on a
//! device decides, as the pack that claims it says), `l2` (the egress device
//! decides the link: veth, bridge port, proxy ARP, bridged netfilter), `routed` (a
//! router of the underlay the snapshot lacks carries a node's packet on), `assumed`
//! (namespaces the snapshot lacks, stepped over with the CNI's intent),
//! `packet` (the packet and its size) and `record` (steps, forks, stops and
//! the paths they end).

mod arp;
mod assumed;
mod conntrack;
mod cross;
mod datapath;
mod deliver;
#[cfg(test)]
mod fixture;
mod l2;
mod mtu;
mod packet;
mod record;
mod routed;
mod stack;
mod tunnel;

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use petgraph::graph::{DiGraph, NodeIndex};

use super::codes;
use super::hooks::Intent;
use super::target::{PacketSize, Protocol, Resolved, Start};
use super::topology::{Port, Topology};
use super::{
    AtHop, Backend, Diagnosis, Disposition, Evidence, Exit, Finding, FindingStatus, Hop,
    HopContext, HopId, HopStep, Link, LinkKind, PacketFields, PathResult, Step,
};
use crate::diagnostic::FindingCode;
use crate::net::{self, EPHEMERAL_PORT, Family, SMALL_PACKET};
use crate::netstack::Tri;
use crate::netstack::ipvs::{Ipvs, IpvsOutcome, Scheduled};
use crate::netstack::namespace::Modelled;
use crate::netstack::netfilter::{
    self, BridgePorts, ConnectionNat, Context, CtState, Netfilter, Outcome, PacketPath,
    RouteChoice, RuleRef, Step as NetfilterStep, Translation, Verdict, deciding_rule, ruleset_of,
};
use crate::netstack::routing::{
    Fib, FlowKey, LookupOutcome, RouteError, RoutePath, describe_route, describe_unspecified,
};
use crate::packs::LoadedPacks;
use crate::snapshot::cluster::IpOwner;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::ipvs::{Forwarding, VirtualService};
use crate::snapshot::netns::link::{
    IpipInfo, Link as Device, LinkFlag, LinkKind as DeviceKind, LinkLayerAddress, MacAddr,
    TunnelEndpoint, VxlanDf, VxlanInfo,
};
use crate::snapshot::netns::neigh::NeighbourState;
use crate::snapshot::netns::route::{RouteType, Scope};
use crate::snapshot::netns::sockets::LocalAddress;
use crate::snapshot::netns::sysctl::Sysctls;
use crate::snapshot::{NetnsId, Problem, Snapshot};
use arp::{ArpAnswer, ArpRefusal, ArpRequest};

use conntrack::*;
use cross::Crossing;
use datapath::Resume;
use packet::*;
use stack::*;

/// A walk longer than this is a loop the per-visit check did not catch.
const MAX_VISITS: usize = 64;
/// The most paths one diagnosis follows. Ways through netfilter past it
/// end `insufficient_info`: sampled rules that each change the packet
/// double the paths at every namespace they are met in, request and reply.
const MAX_PATHS: usize = 4096;

struct Walker<'s> {
    snapshot: &'s Snapshot,
    /// The same snapshot, shared with the packs' hooks.
    shared: &'s Arc<Snapshot>,
    /// The packs' hooks, for namespaces the snapshot lacks.
    intent: Intent<'s>,
    topology: Topology<'s>,
    graph: DiGraph<Hop, Link>,
    paths: Vec<PathResult>,
    findings: Vec<Finding>,
    /// The namespaces stepped over with the CNI's intent so far.
    assumed_namespaces: std::collections::HashSet<NetnsId>,
    /// The path that stands for every way past the bound on paths.
    cut_short_path: Option<usize>,
    /// `--size`, if given.
    size: Option<PacketSize>,
}

pub(crate) fn walk(shared: &Arc<Snapshot>, resolved: &Resolved, packs: &LoadedPacks) -> Diagnosis {
    let mut walker = Walker::new(shared, packs, resolved.question.size);
    let mut ip = match resolved.question.src {
        Some(src) => net::Packet::new(src, resolved.question.dst, resolved.question.protocol),
        None => net::Packet::unsourced(resolved.question.dst, resolved.question.protocol),
    };
    // The client's ephemeral port, as netfilter's model assumes it.
    ip.sport = resolved
        .question
        .protocol
        .has_ports()
        .then_some(EPHEMERAL_PORT);
    ip.dport = resolved.question.dport;
    // `--size mtu` is known once the first device is.
    let size = match resolved.question.size {
        Some(PacketSize::Bytes(bytes)) => {
            ip.length = bytes;
            Size::Given { df: true }
        }
        Some(PacketSize::InterfaceMtu) | None => Size::Unset,
    };
    let packet = Packet {
        ip,
        reply: false,
        tunnel: None,
        size,
    };
    let start = match &resolved.start {
        Start::Outside(entries) => {
            let share = 1.0 / entries.len() as f64;
            let ways = entries.iter().map(|(node, interface)| {
                walker.arrive_from_outside(node, interface, packet.clone(), share)
            });
            Next::Fork(ways.collect())
        }
        Start::Local(source) => Next::Visit {
            ns: source.clone(),
            flow: Flow {
                packet,
                branch: Branch::new(),
            },
            arrival: Arrival::Local,
            from: None,
        },
    };
    walker.run(start);
    Diagnosis {
        request: resolved.question.clone(),
        graph: walker.graph,
        assumed_by: (!walker.assumed_namespaces.is_empty())
            .then(|| walker.intent.cni.map(|pack| pack.name.clone()))
            .flatten(),
        paths: walker.paths,
        findings: walker.findings,
        off_path: Vec::new(),
        destination: None,
        packs: Vec::new(),
    }
}

/// Where a stage works: a namespace, and its hop (one visit of it) in the graph.
#[derive(Debug, Clone)]
struct Place {
    ns: NetnsId,
    hop: NodeIndex,
}

impl Place {
    fn new(ns: &NetnsId, hop: NodeIndex) -> Place {
        Place {
            ns: ns.clone(),
            hop,
        }
    }
}

/// What moves through the stages: the packet, and the branch of the walk it is on.
#[derive(Debug, Clone)]
struct Flow {
    packet: Packet,
    branch: Branch,
}

/// What a stage hands back to the driver loop: what happens next.
enum Next<'s> {
    /// The packet goes into a namespace: a new hop, joined by its link to
    /// the hop it comes from.
    Visit {
        ns: NetnsId,
        flow: Flow,
        arrival: Arrival,
        from: Option<(NodeIndex, Link)>,
    },
    /// The packet is in the hop's namespace again: out of a tunnel, into
    /// one, or sent on by IPVS.
    Enter {
        place: Place,
        flow: Flow,
        arrival: Arrival,
    },
    /// One of netfilter's outcomes for the packet, to follow.
    Netfilter(Place, Box<Followed<'s>>),
    /// The path stops at this hop, for this reason.
    Stop {
        hop: NodeIndex,
        branch: Branch,
        stop: Stop,
    },
    /// The path ends with this disposition (its stop, if any, recorded).
    Finish {
        branch: Branch,
        disposition: Disposition,
        /// How it leaves the cluster, where it does.
        exit: Option<Exit>,
    },
    /// Ways on, walked one after the other, each to its end before the next.
    Fork(Vec<Next<'s>>),
}

/// Why a path stopped, before it is recorded.
struct Stop {
    disposition: Disposition,
    /// The stop's finding; its severity is the stop's.
    id: FindingCode,
    reason: String,
    evidence: Vec<Evidence>,
}

impl Stop {
    /// The snapshot cannot tell what happens next: the path ends as
    /// `insufficient_info`, never with a guessed verdict.
    fn unknown(id: FindingCode, reason: String, evidence: Vec<Evidence>) -> Stop {
        Stop {
            disposition: Disposition::InsufficientInfo,
            id,
            reason,
            evidence,
        }
    }
}

/// What a stop for want of information lacks, as its message names it.
#[derive(Debug, Clone, Copy)]
enum Wanted<'a> {
    File(DumpFile),
    /// Several files, all of them needed: `a, b and c`.
    All(&'a [DumpFile]),
    /// Either of two files: `a or b`.
    Either(DumpFile, DumpFile),
    /// A value in a file: `net.ipv4.ip_forward in sysctl.txt`.
    In(&'a str, DumpFile),
    /// What no one file holds: a namespace's whole dump, a node's address.
    Other(&'a str),
}

impl Wanted<'_> {
    /// The dump files it names.
    fn files(self) -> Vec<DumpFile> {
        match self {
            Wanted::File(file) | Wanted::In(_, file) => vec![file],
            Wanted::All(files) => files.to_vec(),
            Wanted::Either(a, b) => vec![a, b],
            Wanted::Other(_) => Vec::new(),
        }
    }
}

impl fmt::Display for Wanted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wanted::File(file) => write!(f, "{file}"),
            Wanted::All(files) => {
                let names: Vec<&str> = files.iter().map(|file| file.name()).collect();
                match names.split_last() {
                    Some((last, [])) => f.write_str(last),
                    Some((last, rest)) => write!(f, "{} and {last}", rest.join(", ")),
                    None => Ok(()),
                }
            }
            Wanted::Either(a, b) => write!(f, "{a} or {b}"),
            Wanted::In(what, file) => write!(f, "{what} in {file}"),
            Wanted::Other(what) => f.write_str(what),
        }
    }
}

impl<'s> Walker<'s> {
    fn new(
        shared: &'s Arc<Snapshot>,
        packs: &'s LoadedPacks,
        size: Option<PacketSize>,
    ) -> Walker<'s> {
        Walker {
            snapshot: shared,
            shared,
            intent: Intent::new(shared, packs),
            topology: Topology::new(shared),
            graph: DiGraph::new(),
            paths: Vec::new(),
            findings: Vec::new(),
            assumed_namespaces: Default::default(),
            cut_short_path: None,
            size,
        }
    }
}

impl<'s> Walker<'s> {
    /// The namespace's FIB of `family`, where its dump has one (built once
    /// per snapshot: [`Modelled::model`]).
    fn fib(&self, ns: &NetnsId, family: Family) -> Option<&'s Fib<'s>> {
        self.snapshot.namespaces.get(ns)?.model().fib(family)
    }

    /// The namespace's netfilter rules, where its dump has them.
    fn netfilter(&self, ns: &NetnsId) -> Option<&'s Netfilter<'s>> {
        self.snapshot.namespaces.get(ns)?.model().netfilter.as_ref()
    }

    /// The namespace's IPVS services, where its dump has them.
    fn ipvs(&self, ns: &NetnsId) -> Option<&'s Ipvs<'s>> {
        self.snapshot.namespaces.get(ns)?.model().ipvs.as_ref()
    }

    /// The driver loop: runs each stage the walk comes to, depth first, so
    /// that a fork's ways are walked (and their paths recorded) in order.
    fn run(&mut self, first: Next<'s>) {
        let mut pending = vec![first];
        while let Some(next) = pending.pop() {
            match next {
                Next::Visit {
                    ns,
                    flow,
                    arrival,
                    from,
                } => pending.push(self.visit(&ns, flow, arrival, from)),
                Next::Enter {
                    place,
                    flow,
                    arrival,
                } => pending.push(self.enter(&place, flow, arrival)),
                Next::Netfilter(place, followed) if self.paths.len() >= MAX_PATHS => {
                    self.cut_short(&place, *followed);
                }
                Next::Netfilter(place, followed) => {
                    pending.push(self.after_netfilter(&place, *followed))
                }
                Next::Stop { hop, branch, stop } => self.record_stop(hop, branch, stop),
                Next::Finish {
                    branch,
                    disposition,
                    exit,
                } => self.record_path(branch, disposition, exit),
                Next::Fork(ways) => pending.extend(ways.into_iter().rev()),
            }
        }
    }

    /// A way through netfilter past the bound on paths: the walk stops
    /// forking. The first such way is a path that says so in one finding;
    /// every later one adds its share of the flows to that path, so that
    /// the shares of all paths still add up to the whole.
    fn cut_short(&mut self, place: &Place, followed: Followed) {
        let mut branch = followed.branch;
        branch.probability *= followed.outcome.probability;
        if let Some(path) = self.cut_short_path {
            self.paths[path].probability += branch.probability;
            return;
        }
        let reason = format!(
            "the diagnosis has followed {MAX_PATHS} paths already (its bound): this way through the netfilter rules of {}, and every further way, is not followed (their shares of the flows are this path's)",
            hop_id(&place.ns)
        );
        let evidence = vec![self.file(&place.ns, DumpFile::IptablesSave)];
        let stop = Stop::unknown(codes::ENGINE_TOO_MANY_PATHS, reason, evidence);
        self.record_stop(place.hop, branch, stop);
        self.cut_short_path = Some(self.paths.len() - 1);
    }

    /// Whether a namespace holds an address (and so answers ARP for it).
    fn owns(&self, ns: &NetnsId, address: IpAddr) -> bool {
        self.topology
            .owners(address)
            .iter()
            .any(|(owner, _)| *owner == ns)
    }

    /// The first of `namespaces` whose addresses (`ip-addr.json`) were not
    /// read: what it holds, and so whether it answers, cannot be told.
    fn without_addresses<'n>(
        &self,
        mut namespaces: impl Iterator<Item = &'n NetnsId>,
    ) -> Option<&'n NetnsId> {
        namespaces.find(|ns| {
            self.snapshot
                .namespaces
                .get(ns)
                .is_some_and(|entry| entry.dump().addrs.is_none())
        })
    }

    /// A namespace the cluster says holds `address` whose addresses or
    /// links were not read, with the file it lacks: whether it is on a
    /// link, and answers there, cannot be told.
    fn unread_holder(&self, address: IpAddr) -> Option<(&'s NetnsId, DumpFile)> {
        let owners = self.snapshot.cluster.by_ip(address);
        let holds = |id: &NetnsId| {
            owners.iter().any(|owner| match (owner, id) {
                (IpOwner::Node { name }, NetnsId::Host { node }) => name == node,
                (
                    IpOwner::Pod {
                        namespace, name, ..
                    },
                    NetnsId::Pod {
                        namespace: ns,
                        name: pod,
                        ..
                    },
                ) => namespace == ns && name == pod,
                _ => false,
            })
        };
        self.snapshot
            .namespaces
            .iter()
            .filter(|(id, _)| holds(id))
            .find_map(|(id, entry)| {
                let dump = entry.dump();
                if dump.addrs.is_none() {
                    Some((id, DumpFile::IpAddr))
                } else if dump.links.is_none() {
                    Some((id, DumpFile::IpLink))
                } else {
                    None
                }
            })
    }

    fn sysctls(&self, ns: &NetnsId) -> Option<&'s Sysctls> {
        self.snapshot.namespaces.get(ns)?.dump().sysctls.as_ref()
    }

    /// The path of a dump file, as evidence.
    fn file(&self, ns: &NetnsId, file: DumpFile) -> Evidence {
        match self.snapshot.namespaces.get(ns) {
            Some(entry) => Evidence::file(entry.dir.join(file.name())),
            None => Evidence::file(hop_id(ns).to_string()).noting("no dump"),
        }
    }

    /// The namespace's dump directory, as evidence.
    fn place(&self, ns: &NetnsId) -> Evidence {
        match self.snapshot.namespaces.get(ns) {
            Some(entry) => Evidence::file(entry.dir.clone()),
            None => Evidence::file(hop_id(ns).to_string()).noting("no dump"),
        }
    }

    /// A stop for want of what a dump should hold; a file that is there
    /// but unreadable, or was read with problems, is said to be so, with
    /// why and where, not to be missing.
    fn missing(&self, ns: &NetnsId, wanted: Wanted<'_>, to_do: &str) -> Stop {
        let files = wanted.files();
        let lacking = self.snapshot.namespaces.get(ns).and_then(|entry| {
            let dump = entry.dump();
            DumpFile::ALL
                .into_iter()
                .filter(|file| files.contains(file))
                .filter_map(|file| dump.lacking(file))
                .find(|lacking| lacking.state.is_damaged())
        });
        if let Some(lacking) = lacking {
            return Stop::unknown(
                codes::SNAPSHOT_UNREADABLE,
                format!("{}, needed to {to_do}", lacking.of(hop_id(ns))),
                lacking.problem().map(Problem::place).into_iter().collect(),
            );
        }
        // Of several files all needed, those the dump does not have.
        let not_collected: Vec<DumpFile> = match (wanted, self.snapshot.namespaces.get(ns)) {
            (Wanted::All(files), Some(entry)) => files
                .iter()
                .copied()
                .filter(|file| entry.dump().lacking(*file).is_some())
                .collect(),
            _ => Vec::new(),
        };
        let wanted = match not_collected.is_empty() {
            true => wanted,
            false => Wanted::All(&not_collected),
        };
        Stop::unknown(
            codes::SNAPSHOT_MISSING,
            format!(
                "the snapshot lacks {wanted} for {}, needed to {to_do}",
                hop_id(ns)
            ),
            vec![self.place(ns)],
        )
    }
}

/// Hop ids as the JSON contract names them: pods `NS/NAME`, nodes their name.
fn hop_id(ns: &NetnsId) -> HopId {
    HopId::of(ns)
}
