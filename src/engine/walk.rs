//! The walk itself: one namespace at a time, as the kernel would move the packet.

mod assumed;

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use petgraph::graph::{DiGraph, NodeIndex};

use super::hooks::Intent;
use super::target::{PacketSize, Protocol, Resolved};
use super::topology::Topology;
use super::{
    Diagnosis, Disposition, Finding, Hop, HopContext, HopKind, HopStep, Link, LinkKind, PathResult,
    Severity, Step,
};
use crate::netstack::Tri;
use crate::netstack::ipvs::{Ipvs, IpvsOutcome, Scheduled, Transport};
use crate::netstack::netfilter::{
    self, BridgePorts, ConnectionNat, Context, CtState, Netfilter, Outcome, PacketPath,
    RouteChoice, Step as NetfilterStep, Translation, Verdict,
};
use crate::netstack::routing::{
    Fib, FlowKey, LookupOutcome, RouteError, describe_route, describe_rule,
};
use crate::packs::{self, LoadedPacks};
use crate::snapshot::cluster::IpOwner;
use crate::snapshot::netns::addr::Family;
use crate::snapshot::netns::iptables::{
    Policy as IptablesPolicy, Protocol as IpProtocol, TcpFlagBits,
};
use crate::snapshot::netns::ipvs::{Forwarding, VirtualService};
use crate::snapshot::netns::link::{
    IpipInfo, Link as Device, LinkFlag, LinkKind as DeviceKind, LinkLayerAddress, MacAddr,
    TunnelEndpoint, VxlanDf, VxlanInfo,
};
use crate::snapshot::netns::neigh::NeighbourState;
use crate::snapshot::netns::route::RouteType;
use crate::snapshot::netns::rule::IpProto;
use crate::snapshot::netns::sockets::{LocalAddress, SocketProtocol, SocketState};
use crate::snapshot::netns::sysctl::Sysctls;
use crate::snapshot::{NetnsId, Snapshot};

/// The source port of the flow's first packet (any ephemeral port would do).
const EPHEMERAL_PORT: u16 = 40000;

/// A walk longer than this is a loop the per-visit check did not catch.
const MAX_VISITS: usize = 64;

/// Why a veth's peer does not answer an ARP request by proxy.
enum ProxyArpRefusal {
    /// The kernel stays silent: why, and the dump file that shows it.
    Silent { why: String, file: &'static str },
    /// The snapshot cannot tell.
    Unknown(Stop),
}

/// Where a bridge sends a frame, by who holds its next hop.
enum BridgePort<'s> {
    /// The namespace behind this port.
    Found {
        port: &'s Device,
        far: crate::engine::topology::Port<'s>,
    },
    /// A pod of the bridge's node whose dump the snapshot lacks, behind the
    /// port the CNI gives it.
    AssumedPod(NetnsId),
    /// Nobody: the ARP request goes unanswered.
    Unanswered,
}

/// The packet as the walker carries it.
#[derive(Debug, Clone, PartialEq)]
struct Packet {
    src: Option<IpAddr>,
    dst: IpAddr,
    /// The flow's protocol; an IPIP outer packet keeps its inner packet's
    /// here (protocol 4 is the tunnel's, see [`Encapsulation`]).
    protocol: Protocol,
    sport: Option<u16>,
    dport: Option<u16>,
    /// The answer to the flow: netfilter sees it as ESTABLISHED.
    reply: bool,
    /// The packet mark; it does not survive leaving the namespace.
    mark: u32,
    /// Set while the packet is the outer packet of a tunnel.
    tunnel: Option<Box<Tunnelled>>,
    /// Its length, once known: `--size` gives it; otherwise the first
    /// device it leaves by sets it to that device's MTU, as a probe.
    size: Option<Size>,
}

/// The length of an IP packet (headers included) and its DF bit.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Size {
    bytes: u32,
    /// Don't fragment: a device it does not fit drops it.
    df: bool,
    /// A full-size probe beside the small packet walked without `--size`:
    /// where it does not fit is a warning, and it shrinks to fit as path MTU
    /// discovery would shrink it, instead of stopping the path.
    probe: bool,
}

/// The length of a packet without `--size`: a SYN or an echo request.
const SMALL_PACKET: u32 = 64;

/// ICMP "destination unreachable", code "fragmentation needed and DF set".
const ICMP_DEST_UNREACHABLE: u8 = 3;
const ICMP_FRAG_NEEDED: u8 = 4;
/// An ICMP error quotes as much of the packet as fits in 576 bytes.
const ICMP_ERROR_LENGTH: u16 = 576;

/// What becomes of the ICMP error a namespace sends back for a packet
/// too large to forward (see [`Walker::frag_needed_out`]).
enum ErrorOut {
    /// It leaves by `dev`, sent from `src`.
    Leaves { src: IpAddr, dev: String },
    /// Routing or netfilter stops it in the namespace: the sender is never told.
    Stopped { reason: String, evidence: String },
    /// The snapshot cannot tell.
    Unknown { reason: String },
}

/// A veth hands a frame to its peer, and a bridge to a port, only if it is
/// no longer than the receiving device's MTU plus its Ethernet header and one
/// VLAN tag (the kernel's `is_skb_forwardable`): measured in the lab, a
/// 1404-byte packet passes a veth of MTU 1400 and a 1405-byte one is
/// dropped, without an ICMP error.
const VLAN_HEADER: u32 = 4;

impl Packet {
    /// Takes the addresses, ports and mark netfilter left the packet with.
    fn take_addresses(&mut self, filtered: &netfilter::Packet) {
        self.src = Some(filtered.src);
        self.dst = filtered.dst;
        self.sport = filtered.sport;
        self.dport = filtered.dport;
        self.mark = filtered.mark;
    }

    /// What path MTU discovery makes of a packet that did not fit: the
    /// sender sends smaller ones, so that this one is `bytes` long.
    fn shrink_to(&mut self, bytes: u32) {
        if let Some(tunnel) = &mut self.tunnel {
            let overhead = tunnel.encapsulation.overhead();
            tunnel.inner.shrink_to(bytes.saturating_sub(overhead));
        }
        if let Some(size) = &mut self.size {
            size.bytes = bytes;
        }
    }

    /// The packet as the rule packs see it.
    fn pack_packet(&self) -> packs::Packet {
        packs::Packet {
            src: self.src.unwrap_or(self.dst),
            dst: self.dst,
            protocol: match self.protocol {
                Protocol::Tcp => packs::TransportProtocol::Tcp,
                Protocol::Udp => packs::TransportProtocol::Udp,
                Protocol::Icmp => packs::TransportProtocol::Icmp,
            },
            src_port: self.sport,
            dst_port: self.dport,
            mark: self.mark,
            size: match self.size {
                Some(size) if !size.probe => size.bytes,
                _ => SMALL_PACKET,
            },
        }
    }

    /// The packet as netfilter sees it: the first packet of a new connection
    /// from an ephemeral port.
    fn netfilter_packet(&self, src: IpAddr) -> netfilter::Packet {
        let protocol = match self.protocol {
            Protocol::Tcp => IpProtocol::TCP,
            Protocol::Udp => IpProtocol::UDP,
            Protocol::Icmp => IpProtocol::ICMP,
        };
        let protocol = match &self.tunnel {
            Some(tunnel) if tunnel.encapsulation == Encapsulation::Ipip => IPIP,
            _ => protocol,
        };
        let mut packet = netfilter::Packet::new(src, self.dst, protocol);
        if let Some(size) = self.size.filter(|size| !size.probe) {
            packet.length = u16::try_from(size.bytes).unwrap_or(u16::MAX);
        }
        if packet.dport.is_some() {
            packet.sport = self.sport;
            packet.dport = self.dport;
        }
        packet.mark = self.mark;
        if self.reply {
            packet.ct_state = CtState::Established;
            packet.tcp_flags = packet
                .tcp_flags
                .map(|_| TcpFlagBits(TcpFlagBits::SYN.0 | TcpFlagBits::ACK.0));
            packet.icmp = packet.icmp.map(|_| (0, 0));
        }
        packet
    }
}

/// IP protocol 4, IP in IP.
const IPIP: IpProtocol = IpProtocol(4);

/// What a tunnel's outer packet carries.
#[derive(Debug, Clone, PartialEq)]
struct Tunnelled {
    encapsulation: Encapsulation,
    /// The device that encapsulated it.
    device: String,
    inner: Packet,
}

/// What a tunnel device puts around a packet it sends.
struct TunnelHeader {
    encapsulation: Encapsulation,
    device: String,
    /// The outer source; `None` until routing the outer packet chooses one.
    src: Option<IpAddr>,
    dst: IpAddr,
    /// VXLAN's UDP destination port (sent from an ephemeral one); IPIP has
    /// no ports.
    udp_port: Option<u16>,
    /// The outer DF bit; `None` copies the inner packet's.
    df: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
enum Encapsulation {
    Vxlan {
        vni: u32,
        /// The destination MAC of the inner frame: the remote VTEP device's,
        /// if the neighbour and FDB entries are right. `None` when an assumed
        /// hop encapsulated and its pack did not say.
        inner_mac: Option<MacAddr>,
    },
    Ipip,
}

impl Encapsulation {
    /// The bytes the tunnel adds to the inner packet: VXLAN an outer IPv4
    /// header (20), UDP (8), VXLAN (8) and the inner Ethernet header (14);
    /// IPIP an outer IPv4 header.
    fn overhead(&self) -> u32 {
        match self {
            Encapsulation::Vxlan { .. } => 50,
            Encapsulation::Ipip => 20,
        }
    }
}

impl fmt::Display for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.src {
            Some(src) => write!(f, "{src}")?,
            None => f.write_str("(source not chosen yet)")?,
        }
        match (self.dport, &self.tunnel) {
            (_, Some(tunnel)) if tunnel.encapsulation == Encapsulation::Ipip => {
                write!(f, " -> {} ipip", self.dst)?
            }
            (Some(port), _) => write!(
                f,
                " -> {} {}",
                std::net::SocketAddr::new(self.dst, port),
                self.protocol
            )?,
            (None, _) => write!(f, " -> {} {}", self.dst, self.protocol)?,
        }
        if self.reply {
            f.write_str(" (reply)")?;
        }
        // A size the user gave; a probe's is not the packet walked.
        if let Some(size) = self.size.filter(|size| !size.probe) {
            let df = if size.df { ", DF" } else { "" };
            write!(f, " ({} bytes{df})", size.bytes)?;
        }
        if let Some(tunnel) = &self.tunnel {
            match &tunnel.encapsulation {
                Encapsulation::Vxlan {
                    vni,
                    inner_mac: Some(mac),
                } => write!(f, " [vxlan {vni} to {mac}: {}]", tunnel.inner)?,
                Encapsulation::Vxlan {
                    vni,
                    inner_mac: None,
                } => write!(f, " [vxlan {vni}: {}]", tunnel.inner)?,
                Encapsulation::Ipip => write!(f, " [{}]", tunnel.inner)?,
            }
        }
        Ok(())
    }
}

/// How the packet came to be in a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Arrival {
    /// Generated here (by a socket, or by a tunnel device encapsulating).
    Local,
    /// Arrived on this interface.
    Received(String),
}

impl Arrival {
    /// The interface the packet arrived on, if it did.
    fn interface(&self) -> Option<&str> {
        match self {
            Arrival::Received(interface) => Some(interface),
            Arrival::Local => None,
        }
    }
}

/// The state of one branch of the walk.
#[derive(Debug, Clone)]
struct Branch {
    hops: Vec<NodeIndex>,
    probability: f64,
    /// (namespace, packet, arrival) already seen on this branch.
    seen: Vec<(NetnsId, String, Arrival)>,
    /// The sender, once routing chose its address.
    origin: Option<Origin>,
    /// The translations netfilter made on the way there, which conntrack
    /// undoes for the reply in the same namespaces.
    nat: Vec<(NetnsId, Translation)>,
    /// Walking the reply back to the sender.
    reply: bool,
    /// The namespaces the request went through, where conntrack has the
    /// connection the reply belongs to (set when the reply starts).
    connection: Vec<NetnsId>,
}

impl Branch {
    /// What conntrack in `ns` knows of the reply's connection: its
    /// translations there, where the request passed; `None` otherwise (and
    /// for the request itself, a new connection).
    fn connection_nat(&self, ns: &NetnsId) -> Option<ConnectionNat> {
        if !self.reply || !self.connection.contains(ns) {
            return None;
        }
        Some(self.nat_in(ns))
    }

    /// The translations netfilter made in `ns` on this branch so far.
    fn nat_in(&self, ns: &NetnsId) -> ConnectionNat {
        let mut nat = ConnectionNat {
            dnat: false,
            snat: false,
        };
        for (_, translation) in self.nat.iter().filter(|(at, _)| at == ns) {
            match translation {
                Translation::Dnat { .. } | Translation::Redirect { .. } => nat.dnat = true,
                Translation::Snat { .. } | Translation::Masquerade { .. } => nat.snat = true,
                _ => {}
            }
        }
        nat
    }
}

/// Who opened the connection, and to what: the reply must come back to that
/// socket, from that address, or the sender's kernel does not take it.
#[derive(Debug, Clone)]
struct Origin {
    ns: NetnsId,
    address: IpAddr,
    port: Option<u16>,
    target: IpAddr,
    target_port: Option<u16>,
}

/// When conntrack undoes a translation for a reply: the destination (un-SNAT)
/// in PREROUTING, before the routing decision; the source (un-DNAT) in
/// POSTROUTING, after it — so routing sees the reply as it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UndoPhase {
    BeforeRouting,
    AfterRouting,
}

/// The kernel models of every namespace, built once per walk.
struct Models<'s> {
    fibs: HashMap<&'s NetnsId, Fib<'s>>,
    netfilters: HashMap<&'s NetnsId, Netfilter<'s>>,
    ipvs: HashMap<&'s NetnsId, Ipvs<'s>>,
}

struct Walker<'s, 'm> {
    snapshot: &'s Snapshot,
    /// The same snapshot, shared with the packs' hooks.
    shared: &'s Arc<Snapshot>,
    /// The packs' hooks, for namespaces the snapshot lacks.
    intent: Intent<'s>,
    topology: Topology<'s>,
    models: &'m Models<'s>,
    graph: DiGraph<Hop, Link>,
    paths: Vec<PathResult>,
    findings: Vec<Finding>,
    /// The namespaces stepped over with the CNI's intent so far.
    assumed_namespaces: std::collections::HashSet<NetnsId>,
    /// `--size`, if given.
    size: Option<PacketSize>,
}

pub(crate) fn walk(shared: &Arc<Snapshot>, resolved: &Resolved, packs: &LoadedPacks) -> Diagnosis {
    let snapshot: &Snapshot = shared;
    let mut fibs = HashMap::new();
    for (id, entry) in &snapshot.namespaces {
        let dump = &entry.dump;
        if let (Some(rules), Some(routes), Some(addrs)) = (&dump.rules, &dump.routes, &dump.addrs) {
            fibs.insert(id, Fib::new(rules, routes, addrs, dump.sysctls.as_ref()));
        }
    }
    let netfilters = snapshot
        .namespaces
        .iter()
        .filter_map(|(id, entry)| {
            let ruleset = entry.dump.iptables.as_ref()?;
            Some((id, Netfilter::new(ruleset, entry.dump.ipsets.as_ref())))
        })
        .collect();
    let ipvs = snapshot
        .namespaces
        .iter()
        .filter_map(|(id, entry)| Some((id, Ipvs::new(entry.dump.ipvs.as_ref()?))))
        .collect();
    let models = Models {
        fibs,
        netfilters,
        ipvs,
    };
    let mut walker = Walker {
        snapshot,
        shared,
        intent: Intent::new(shared, packs),
        topology: Topology::new(snapshot),
        models: &models,
        graph: DiGraph::new(),
        paths: Vec::new(),
        findings: Vec::new(),
        assumed_namespaces: Default::default(),
        size: resolved.size,
    };
    let packet = Packet {
        src: resolved.src,
        dst: resolved.dst,
        protocol: resolved.protocol,
        // The client's ephemeral port, as netfilter's model assumes it.
        sport: matches!(resolved.protocol, Protocol::Tcp | Protocol::Udp).then_some(EPHEMERAL_PORT),
        dport: resolved.dport,
        reply: false,
        mark: 0,
        tunnel: None,
        // `--size mtu` is known once the first device is.
        size: match resolved.size {
            Some(PacketSize::Bytes(bytes)) => Some(Size {
                bytes,
                df: true,
                probe: false,
            }),
            Some(PacketSize::InterfaceMtu) | None => None,
        },
    };
    let branch = Branch {
        hops: Vec::new(),
        probability: 1.0,
        seen: Vec::new(),
        origin: None,
        nat: Vec::new(),
        reply: false,
        connection: Vec::new(),
    };
    walker.visit(&resolved.source, packet, Arrival::Local, None, branch);
    Diagnosis {
        summary: resolved.summary.clone(),
        graph: walker.graph,
        assumed_by: (!walker.assumed_namespaces.is_empty())
            .then(|| walker.intent.cni.map(|pack| pack.name.clone()))
            .flatten(),
        paths: walker.paths,
        findings: walker.findings,
    }
}

/// Why a path stopped, before it is recorded.
struct Stop {
    disposition: Disposition,
    id: &'static str,
    reason: String,
    evidence: String,
}

impl Stop {
    /// The snapshot cannot tell what happens next: the path ends as
    /// `insufficient_info`, never with a guessed verdict.
    fn unknown(id: &'static str, reason: String, evidence: String) -> Stop {
        Stop {
            disposition: Disposition::InsufficientInfo,
            id,
            reason,
            evidence,
        }
    }
}

impl<'s> Walker<'s, '_> {
    /// Enters a namespace: a new hop in the graph.
    fn visit(
        &mut self,
        ns: &NetnsId,
        mut packet: Packet,
        arrival: Arrival,
        from: Option<(NodeIndex, Link)>,
        mut branch: Branch,
    ) {
        // The kernel clears the mark of a packet that changes namespace.
        packet.mark = 0;
        // A namespace the snapshot lacks as a whole is stepped over with the
        // CNI pack's intent, where one applies.
        let assumed = self.can_assume(ns);
        let hop = self.graph.add_node(Hop {
            id: hop_id(ns),
            kind: hop_kind(ns),
            node: Some(ns.node().to_string()),
            assumed,
            steps: Vec::new(),
            // Pack checks need the namespace's dump: none at an assumed hop.
            context: (!assumed).then(|| HopContext {
                netns: ns.clone(),
                packet: packet.pack_packet(),
                in_iface: arrival.interface().map(str::to_string),
                out_iface: None,
                delivered: false,
                received_from: None,
                last_packet: Some(packet.pack_packet()),
            }),
        });
        if let Some((previous, link)) = from {
            self.graph.add_edge(previous, hop, link);
        }
        branch.hops.push(hop);
        if assumed {
            self.note_assumed(ns, hop);
        }
        self.enter(ns, hop, packet, arrival, branch);
    }

    /// The packet is in the hop's namespace (arrived, generated there, or
    /// out of a tunnel). What happens to every packet first: a loop is
    /// caught, the arrival recorded (a locally generated packet is recorded
    /// once routing has chosen its source address), and a reply's
    /// destination un-SNATed. Then the namespace's kernel decides the rest,
    /// or at an assumed hop the CNI's intent.
    fn enter(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        mut packet: Packet,
        arrival: Arrival,
        mut branch: Branch,
    ) {
        let generated = arrival == Arrival::Local;
        self.now_holds(hop, &packet, generated, true);
        let key = (ns.clone(), packet.to_string(), arrival.clone());
        if branch.seen.contains(&key) || branch.seen.len() >= MAX_VISITS {
            let reason = format!(
                "the packet comes back to {} as it was: a forwarding loop",
                hop_id(ns)
            );
            let stop = Stop {
                disposition: Disposition::Loop,
                id: "engine.loop",
                reason,
                evidence: hop_id(ns),
            };
            return self.stop(hop, branch, stop);
        }
        branch.seen.push(key);
        if let Arrival::Received(interface) = &arrival {
            if let Some(context) = &mut self.graph[hop].context {
                context.received_from = packet.src;
            }
            let received = packet.to_string();
            self.step(
                hop,
                Step::Received {
                    interface: interface.clone(),
                    packet: received,
                },
            );
        }
        if branch.reply {
            self.undo_nat(ns, hop, &mut packet, &branch, UndoPhase::BeforeRouting);
            self.now_holds(hop, &packet, generated, true);
        }
        if !self.graph[hop].assumed {
            return self.process(ns, hop, packet, arrival, branch);
        }
        self.process_assumed(ns, hop, packet, arrival.interface(), branch);
    }

    /// Keeps `packet` as the hop's packet (see [`HopContext::last_packet`]),
    /// or that its addresses are not `known`. The outer packet of a tunnel
    /// the hop put its packet in (`generated` here, carrying one) leaves the
    /// record as it was.
    fn now_holds(&mut self, hop: NodeIndex, packet: &Packet, generated: bool, known: bool) {
        if generated && packet.tunnel.is_some() {
            return;
        }
        if let Some(context) = &mut self.graph[hop].context {
            context.last_packet = known.then(|| packet.pack_packet());
        }
    }

    /// What the namespace's kernel does with a packet that is in it.
    fn process(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: Packet,
        arrival: Arrival,
        branch: Branch,
    ) {
        let models = self.models;
        let Some(fib) = models.fibs.get(ns) else {
            let stop = self.missing(
                ns,
                "ip-route.json, ip-rule.json and ip-addr.json",
                "route the packet",
            );
            return self.stop(hop, branch, stop);
        };
        let Some(netfilter) = models.netfilters.get(ns) else {
            let stop = self.missing(ns, "iptables-save.txt", "evaluate its netfilter rules");
            return self.stop(hop, branch, stop);
        };
        let context = self.netfilter_context(ns, Some(fib));
        match &arrival {
            Arrival::Received(iif) => {
                let mut filtered = packet.netfilter_packet(packet.src.unwrap_or(packet.dst));
                filtered.in_iface = Some(iif.clone());
                filtered.ct_nat = branch.connection_nat(ns);
                let outcomes = netfilter.traverse(PacketPath::Received, filtered, &context);
                let forks = self.fork(hop, &branch, outcomes.len());
                for (outcome, (hop, branch)) in outcomes.into_iter().zip(forks) {
                    self.after_netfilter(ns, hop, &packet, outcome, Some(iif), None, branch);
                }
            }
            Arrival::Local => {
                // A socket's packet is routed first (that picks its source
                // address), then meets OUTPUT and POSTROUTING.
                let lookup = fib.lookup(&FlowKey {
                    dport: packet.dport,
                    ..FlowKey::to(packet.dst)
                });
                let paths = match lookup.outcome {
                    LookupOutcome::Routed {
                        paths, rule, route, ..
                    } => {
                        let rule_text = describe_rule(fib.rules[rule]);
                        let route_text = describe_route(&fib.routes[route]);
                        paths
                            .into_iter()
                            .map(|path| (path, rule_text.clone(), route_text.clone()))
                            .collect::<Vec<_>>()
                    }
                    LookupOutcome::Failed { error, rule, route } => {
                        let choice = RouteChoice::Failed {
                            error,
                            rule: rule.map(|r| describe_rule(fib.rules[r])),
                            route: route.map(|r| describe_route(&fib.routes[r])),
                        };
                        return self.route_failed(ns, hop, &packet, &choice, branch);
                    }
                    LookupOutcome::Unknown { reason } => {
                        let evidence = self.file(ns, "ip-route.json");
                        let stop = Stop::unknown("kernel.route.unknown", reason, evidence);
                        return self.stop(hop, branch, stop);
                    }
                };
                // Every (path, netfilter outcome) pair is a branch of its own.
                let mut ways = Vec::new();
                for (path, rule, route) in paths {
                    let mut packet = packet.clone();
                    packet.src = packet.src.or(path.prefsrc);
                    let routed = RouteChoice::Out {
                        dev: path.dev.clone(),
                        gateway: path.gateway,
                        rule: Some(rule),
                        route: Some(route),
                    };
                    let Some(src) = packet.src else {
                        ways.push((packet, path.probability, routed, None));
                        continue;
                    };
                    let mut filtered = packet.netfilter_packet(src);
                    filtered.out_iface = path.dev.clone();
                    filtered.ct_nat = branch.connection_nat(ns);
                    for outcome in netfilter.traverse(PacketPath::Output, filtered, &context) {
                        ways.push((
                            packet.clone(),
                            path.probability,
                            routed.clone(),
                            Some(outcome),
                        ));
                    }
                }
                let forks = self.fork(hop, &branch, ways.len());
                for ((packet, share, routed, outcome), (hop, mut branch)) in
                    ways.into_iter().zip(forks)
                {
                    branch.probability *= share;
                    self.sent(ns, hop, &packet, &mut branch);
                    match outcome {
                        Some(outcome) => self.after_netfilter(
                            ns,
                            hop,
                            &packet,
                            outcome,
                            None,
                            Some(routed),
                            branch,
                        ),
                        None => {
                            let reason = format!(
                                "{} has no address to send from by {}",
                                hop_id(ns),
                                match &routed {
                                    RouteChoice::Out { dev: Some(dev), .. } => dev.as_str(),
                                    _ => "?",
                                }
                            );
                            let stop = Stop {
                                disposition: Disposition::NoRoute,
                                id: "kernel.route.no-source",
                                reason,
                                evidence: self.file(ns, "ip-addr.json"),
                            };
                            self.stop(hop, branch, stop);
                        }
                    }
                }
            }
        }
    }

    /// A socket of the hop's namespace sent the packet; the path's first
    /// such packet opens the connection its reply must come back to.
    fn sent(&mut self, ns: &NetnsId, hop: NodeIndex, packet: &Packet, branch: &mut Branch) {
        self.step(
            hop,
            Step::Sent {
                packet: packet.to_string(),
            },
        );
        if branch.origin.is_none()
            && let Some(src) = packet.src
        {
            branch.origin = Some(Origin {
                ns: ns.clone(),
                address: src,
                port: packet.sport,
                target: packet.dst,
                target_port: packet.dport,
            });
        }
    }

    /// Gives each of `count` ways out of `hop` its own copy of the hop (with
    /// the steps so far and the link that led in), so that the steps of one
    /// branch never show up in another. The first way keeps `hop` itself.
    fn fork(&mut self, hop: NodeIndex, branch: &Branch, count: usize) -> Vec<(NodeIndex, Branch)> {
        let base = self.graph[hop].clone();
        let incoming = branch.hops.iter().rev().nth(1).and_then(|&previous| {
            let edge = self.graph.find_edge(previous, hop)?;
            Some((previous, self.graph[edge].clone()))
        });
        let mut forks = Vec::with_capacity(count);
        for index in 0..count {
            let mut branch = branch.clone();
            let node = if index == 0 {
                hop
            } else {
                let node = self.graph.add_node(base.clone());
                if let Some((previous, link)) = &incoming {
                    self.graph.add_edge(*previous, node, link.clone());
                }
                if let Some(last) = branch.hops.last_mut() {
                    *last = node;
                }
                node
            };
            forks.push((node, branch));
        }
        forks
    }

    /// Records what netfilter rewrote (marks aside) as steps of the hop, and
    /// on the way there the address translations conntrack will undo for
    /// the reply.
    fn record_translations(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        outcome: &Outcome<'_>,
        branch: &mut Branch,
    ) {
        for step in &outcome.trace {
            let NetfilterStep::Translation {
                hook,
                table,
                translation,
            } = step
            else {
                continue;
            };
            if matches!(
                translation,
                Translation::Mark { .. } | Translation::ConnMark { .. }
            ) {
                continue;
            }
            self.step(
                hop,
                Step::Translated {
                    hook: hook.to_string(),
                    table: table.as_str().to_string(),
                    translation: translation.to_string(),
                },
            );
            let rewrites_addresses = matches!(
                translation,
                Translation::Dnat { .. }
                    | Translation::Redirect { .. }
                    | Translation::Snat { .. }
                    | Translation::Masquerade { .. }
            );
            if rewrites_addresses && !branch.reply {
                branch.nat.push((ns.clone(), *translation));
            }
        }
    }

    /// The stop for a drop or reject, naming the rule (or policy) that decided
    /// it with its line in the dump.
    fn denial(&mut self, ns: &NetnsId, hop: NodeIndex, outcome: &Outcome<'_>, what: &str) -> Stop {
        let decision = deciding_rule(&outcome.trace);
        let verb = if matches!(outcome.verdict, Verdict::Drop) {
            "drops"
        } else {
            "rejects"
        };
        let evidence = self.rule_evidence(ns, decision.line, &decision.text);
        let reason = format!(
            "{}'s netfilter {verb} {what}: {}",
            hop_id(ns),
            decision.description
        );
        self.step(
            hop,
            Step::Netfilter {
                decision: decision.description,
                table: decision.table,
                chain: decision.chain,
                rule: decision.text,
                line: decision.line,
            },
        );
        Stop {
            disposition: Disposition::DeniedByNetfilter,
            id: "kernel.netfilter.denied",
            reason,
            evidence,
        }
    }

    /// Follows one netfilter outcome: a verdict, or the (translated) packet
    /// delivered here or sent on. `routed` is the route already chosen for a
    /// locally generated packet, which netfilter only reports when it re-routes.
    #[allow(clippy::too_many_arguments)]
    fn after_netfilter(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: &Packet,
        outcome: Outcome<'s>,
        iif: Option<&String>,
        routed: Option<RouteChoice>,
        mut branch: Branch,
    ) {
        branch.probability *= outcome.probability;
        let rules_file = self.file(ns, "iptables-save.txt");
        self.record_translations(ns, hop, &outcome, &mut branch);
        let route = outcome.trace.iter().rev().find_map(|step| match step {
            NetfilterStep::Route { choice, .. } => Some(choice.clone()),
            _ => None,
        });
        let arrived = packet;
        let mut packet = packet.clone();
        packet.take_addresses(&outcome.packet);
        // The packet as netfilter left it: what a drop here stops.
        let masqueraded_unknown = outcome.trace.iter().any(|step| {
            matches!(
                step,
                NetfilterStep::Translation {
                    translation: Translation::Masquerade { after: None, .. },
                    ..
                }
            )
        });
        self.now_holds(hop, &packet, iif.is_none(), !masqueraded_unknown);
        match &outcome.verdict {
            Verdict::Drop | Verdict::Reject { .. } => {
                let stop = self.denial(ns, hop, &outcome, "the packet");
                return self.stop(hop, branch, stop);
            }
            Verdict::Unknown { reason } => {
                let stop = Stop::unknown("kernel.netfilter.unknown", reason.clone(), rules_file);
                return self.stop(hop, branch, stop);
            }
            Verdict::Unroutable { .. } | Verdict::Accept => {}
        }
        // Input routing validates the source the packet arrived with: the
        // source NAT of POSTROUTING (and conntrack's un-DNAT of a reply)
        // comes after it.
        let as_routed = Packet {
            src: arrived.src,
            ..packet.clone()
        };
        if branch.reply {
            self.undo_nat(ns, hop, &mut packet, &branch, UndoPhase::AfterRouting);
            self.now_holds(hop, &packet, iif.is_none(), !masqueraded_unknown);
        }
        let Some(choice) = route.or(routed) else {
            let reason = "netfilter reported no routing decision for the packet".to_string();
            let stop = Stop::unknown("engine.route.missing", reason, rules_file);
            return self.stop(hop, branch, stop);
        };
        match choice {
            RouteChoice::Local { rule, route } => {
                self.step(
                    hop,
                    Step::Route {
                        rule: rule.unwrap_or_default(),
                        route: route.unwrap_or_default(),
                        result: "local delivery".into(),
                    },
                );
                if let Some(stop) =
                    self.reverse_path_filter(ns, &as_routed, iif.map(String::as_str))
                {
                    return self.stop(hop, branch, stop);
                }
                self.deliver(ns, hop, packet, iif.map_or("lo", String::as_str), branch)
            }
            RouteChoice::Out {
                dev,
                gateway,
                rule,
                route,
            } => {
                let dev = dev.unwrap_or_default();
                let via = match gateway {
                    Some(gateway) => format!("via {gateway} dev {dev}"),
                    None => format!("dev {dev}"),
                };
                if rule.is_some() || route.is_some() {
                    self.step(
                        hop,
                        Step::Route {
                            rule: rule.unwrap_or_default(),
                            route: route.unwrap_or_default(),
                            result: via,
                        },
                    );
                }
                if let Some(iif) = iif
                    && let Some(stop) = self
                        .forwarding(ns, iif)
                        .or_else(|| self.reverse_path_filter(ns, &as_routed, Some(iif)))
                {
                    return self.stop(hop, branch, stop);
                }
                let next_hop = gateway.unwrap_or(packet.dst);
                self.egress(ns, hop, &dev, next_hop, packet, branch)
            }
            failed @ RouteChoice::Failed { .. } => {
                self.route_failed(ns, hop, &packet, &failed, branch)
            }
            RouteChoice::Unknown { reason } => {
                let stop = Stop::unknown(
                    "kernel.route.unknown",
                    reason,
                    self.file(ns, "ip-route.json"),
                );
                self.stop(hop, branch, stop)
            }
        }
    }

    /// The kernel refused to route the packet.
    fn route_failed(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: &Packet,
        choice: &RouteChoice,
        branch: Branch,
    ) {
        let RouteChoice::Failed { error, rule, route } = choice else {
            return;
        };
        let rule = rule.clone().unwrap_or_else(|| "-".into());
        self.step(
            hop,
            Step::Route {
                rule: rule.clone(),
                route: route.clone().unwrap_or_else(|| "-".into()),
                result: error.to_string(),
            },
        );
        let (disposition, id) = match error {
            RouteError::NoRoute => (Disposition::NoRoute, "kernel.route.none"),
            RouteError::Martian => (Disposition::NoRoute, "kernel.route.martian"),
            RouteError::Unreachable => (Disposition::UnreachableRoute, "kernel.route.unreachable"),
            RouteError::Prohibit => (Disposition::UnreachableRoute, "kernel.route.prohibit"),
            RouteError::Blackhole => (Disposition::UnreachableRoute, "kernel.route.blackhole"),
        };
        let reason = match route {
            Some(route) => format!(
                "{} has {error}: {route} (selected by rule {rule})",
                hop_id(ns)
            ),
            None => format!("{} has {error} to {}", hop_id(ns), packet.dst),
        };
        let stop = Stop {
            disposition,
            id,
            reason,
            evidence: self.file(ns, "ip-route.json"),
        };
        self.stop(hop, branch, stop)
    }

    /// The service whose address `packet` is still sent to: kube-proxy's
    /// translation never applied to it.
    fn untranslated_service(&self, packet: &Packet) -> Option<String> {
        self.snapshot
            .cluster
            .by_ip(packet.dst)
            .iter()
            .find_map(IpOwner::service)
            .map(|(namespace, name)| format!("{namespace}/{name}"))
    }

    /// IPv4 forwarding on the interface the packet came in on.
    fn forwarding(&self, ns: &NetnsId, iif: &str) -> Option<Stop> {
        let Some(sysctls) = self.sysctls(ns) else {
            return Some(self.missing(ns, "sysctl.txt", "tell whether it forwards packets"));
        };
        let key = Sysctls::interface_key(Family::Ipv4, iif, "forwarding");
        let (key, value) = match sysctls.get_i64(&key) {
            Ok(Some(value)) => (key, value),
            _ => match sysctls.get_i64("net.ipv4.ip_forward") {
                Ok(Some(value)) => ("net.ipv4.ip_forward".to_string(), value),
                _ => {
                    return Some(self.missing(
                        ns,
                        "net.ipv4.ip_forward in sysctl.txt",
                        "tell whether it forwards packets",
                    ));
                }
            },
        };
        (value == 0).then(|| Stop {
            disposition: Disposition::ForwardingDisabled,
            id: "kernel.sysctl.forwarding",
            reason: format!(
                "{} does not forward packets arriving on {iif}: {key} = 0",
                hop_id(ns)
            ),
            evidence: format!("{}: {key} = 0", self.file(ns, "sysctl.txt")),
        })
    }

    /// Reverse-path filtering (`rp_filter`): strict mode drops a packet
    /// whose source is not routed back out of the interface it came in on,
    /// loose mode one whose source is not routable at all.
    fn reverse_path_filter(
        &self,
        ns: &NetnsId,
        packet: &Packet,
        iif: Option<&str>,
    ) -> Option<Stop> {
        let (iif, src) = (iif?, packet.src?);
        if iif == "lo" {
            return None;
        }
        let sysctls = self.sysctls(ns)?;
        let mode = ["all", iif]
            .iter()
            .filter_map(|ifname| {
                sysctls
                    .get_i64(&Sysctls::interface_key(Family::Ipv4, ifname, "rp_filter"))
                    .ok()
                    .flatten()
            })
            .max()
            .unwrap_or(0);
        if mode == 0 {
            return None;
        }
        let fib = self.models.fibs.get(ns)?;
        let back = fib.lookup(&FlowKey {
            src: Some(packet.dst),
            ..FlowKey::to(src)
        });
        let passes = match &back.outcome {
            LookupOutcome::Routed {
                paths, route_type, ..
            } => {
                *route_type == RouteType::Local
                    || mode == 2
                    || paths.iter().any(|p| p.dev.as_deref() == Some(iif))
            }
            LookupOutcome::Failed { .. } => false,
            LookupOutcome::Unknown { .. } => return None,
        };
        (!passes).then(|| Stop {
            disposition: Disposition::RpFilter,
            id: "kernel.sysctl.rp_filter",
            reason: format!(
                "{} drops packets from {src} arriving on {iif}: rp_filter = {mode} ({}) and the route back to {src} does not leave by {iif}",
                hop_id(ns),
                if mode == 1 { "strict" } else { "loose" }
            ),
            evidence: format!("{}: rp_filter = {mode}", self.file(ns, "sysctl.txt")),
        })
    }

    /// The packet is for this namespace: a tunnel device or a socket takes
    /// it (at an assumed hop, as the CNI's intent and the cluster's objects
    /// say), or the sender's connection takes the reply.
    fn deliver(&mut self, ns: &NetnsId, hop: NodeIndex, packet: Packet, iif: &str, branch: Branch) {
        if let Some(tunnel) = &packet.tunnel {
            return self.decapsulate(ns, hop, &packet, tunnel, branch);
        }
        if branch.reply {
            return self.reply_arrived(ns, hop, &packet, branch);
        }
        if self.graph[hop].assumed {
            return self.deliver_assumed(ns, hop, packet, branch);
        }
        if let Some(ipvs) = self.models.ipvs.get(ns)
            && let (Some(transport), Some(dport)) = (transport(packet.protocol), packet.dport)
        {
            match ipvs.schedule(transport, SocketAddr::new(packet.dst, dport), packet.mark) {
                IpvsOutcome::NotVirtual => {}
                IpvsOutcome::Scheduled { service, choices } => {
                    return self.ipvs_forward(ns, hop, &packet, service, choices, branch);
                }
                IpvsOutcome::NoRealServer { service } => {
                    let reason = format!(
                        "{}'s IPVS virtual service {} has no real server with a weight: the connection is refused",
                        hop_id(ns),
                        SocketAddr::new(packet.dst, dport)
                    );
                    let evidence = format!("{}:{}", self.file(ns, "ipvsadm.txt"), service.line);
                    let stop = Stop {
                        disposition: Disposition::NoListener,
                        id: "kernel.ipvs.no-real-server",
                        reason,
                        evidence,
                    };
                    return self.stop(hop, branch, stop);
                }
                IpvsOutcome::Unknown { reason } => {
                    let stop =
                        Stop::unknown("kernel.ipvs.unknown", reason, self.file(ns, "ipvsadm.txt"));
                    return self.stop(hop, branch, stop);
                }
            }
        }
        self.delivering(hop);
        match packet.protocol {
            Protocol::Icmp => {
                let ignored = self
                    .sysctls(ns)
                    .and_then(|s| s.get_i64("net.ipv4.icmp_echo_ignore_all").ok().flatten());
                if ignored == Some(1) {
                    let reason = format!(
                        "{} ignores echo requests: net.ipv4.icmp_echo_ignore_all = 1",
                        hop_id(ns)
                    );
                    let evidence = self.file(ns, "sysctl.txt");
                    return self.stop(
                        hop,
                        branch,
                        Stop {
                            disposition: Disposition::NoListener,
                            id: "kernel.sysctl.icmp_echo_ignore_all",
                            reason,
                            evidence,
                        },
                    );
                }
                let socket = "the kernel's ICMP echo responder".into();
                self.step(hop, Step::Delivered { socket });
                self.answer(ns, hop, &packet, branch);
            }
            Protocol::Tcp | Protocol::Udp => {
                let Some(sockets) = self
                    .snapshot
                    .namespaces
                    .get(ns)
                    .and_then(|e| e.dump.sockets.as_ref())
                else {
                    return self.stop(
                        hop,
                        branch,
                        self.missing(ns, "ss.txt", "tell whether anything listens"),
                    );
                };
                let (wanted, state) = match packet.protocol {
                    Protocol::Tcp => (SocketProtocol::Tcp, SocketState::Listen),
                    _ => (SocketProtocol::Udp, SocketState::Unconn),
                };
                let listener = sockets.iter().find(|s| {
                    s.protocol == wanted
                        && s.state == state
                        && Some(s.port) == packet.dport
                        && s.interface.as_deref().is_none_or(|bound| bound == iif)
                        && match s.address {
                            LocalAddress::AnyDualStack => true,
                            LocalAddress::Ip(address) => {
                                address == packet.dst
                                    || (address.is_unspecified()
                                        && Family::of(address) == Family::of(packet.dst))
                            }
                        }
                });
                match listener {
                    Some(socket) => {
                        let address = match socket.address {
                            LocalAddress::AnyDualStack => "*".to_string(),
                            LocalAddress::Ip(address) => address.to_string(),
                        };
                        let socket = format!("{} {}:{}", packet.protocol, address, socket.port);
                        self.step(hop, Step::Delivered { socket });
                        self.answer(ns, hop, &packet, branch);
                    }
                    None => {
                        let port = packet.dport.map_or("-".to_string(), |p| p.to_string());
                        let reason = format!(
                            "nothing in {} listens on {} port {port} (the kernel answers with a reset or port unreachable)",
                            hop_id(ns),
                            packet.protocol
                        );
                        let evidence = self.file(ns, "ss.txt");
                        self.stop(
                            hop,
                            branch,
                            Stop {
                                disposition: Disposition::NoListener,
                                id: "kernel.socket.no-listener",
                                reason,
                                evidence,
                            },
                        );
                    }
                }
            }
        }
    }

    /// IPVS sends the connection to each real server it may choose: the
    /// destination is rewritten (masquerade forwarding) and the packet is
    /// routed out again through OUTPUT and POSTROUTING.
    fn ipvs_forward(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: &Packet,
        service: &VirtualService,
        choices: Vec<Scheduled<'_>>,
        branch: Branch,
    ) {
        let forks = self.fork(hop, &branch, choices.len());
        for (choice, (hop, mut branch)) in choices.into_iter().zip(forks) {
            let real = choice.real_server.address;
            let before = netfilter::Endpoint {
                addr: packet.dst,
                port: packet.dport,
            };
            let after = netfilter::Endpoint {
                addr: real.ip(),
                port: Some(real.port()),
            };
            let translation = match choice.real_server.forwarding {
                Forwarding::DirectRouting => format!("ipvs direct routing of {before} to {real}"),
                _ => format!(
                    "ipvs dnat {before} -> {after} (ipvsadm.txt line {}, {:?} scheduler)",
                    choice.real_server.line, service.scheduler
                ),
            };
            self.step(
                hop,
                Step::Translated {
                    hook: "INPUT".into(),
                    table: "ipvs".into(),
                    translation,
                },
            );
            branch.probability *= choice.probability;
            let mut next = packet.clone();
            if !matches!(choice.real_server.forwarding, Forwarding::DirectRouting) {
                next.dst = real.ip();
                next.dport = Some(real.port());
                branch
                    .nat
                    .push((ns.clone(), Translation::Dnat { before, after }));
            }
            self.enter(ns, hop, next, Arrival::Local, branch);
        }
    }

    /// The destination answers: the reply is walked back to the sender,
    /// since a flow only works when its answers arrive too.
    fn answer(&mut self, ns: &NetnsId, hop: NodeIndex, packet: &Packet, mut branch: Branch) {
        let Some(sender) = packet.src else {
            return self.finish(branch, Disposition::Delivered);
        };
        let reply = Packet {
            src: Some(packet.dst),
            dst: sender,
            protocol: packet.protocol,
            sport: packet.dport,
            dport: packet.sport,
            reply: true,
            mark: 0,
            tunnel: None,
            // An answer as large as the request; the kernel's echo responder
            // lets its replies be fragmented (DF clear). A probe starts
            // again at the answering interface's MTU.
            size: packet.size.filter(|size| !size.probe).map(|size| Size {
                df: packet.protocol != Protocol::Icmp,
                ..size
            }),
        };
        branch.reply = true;
        branch.connection = branch.seen.iter().map(|(ns, ..)| ns.clone()).collect();
        let link = Link {
            kind: LinkKind::Local,
            from_interface: "socket".into(),
            to_interface: None,
            packet: reply.to_string(),
        };
        self.visit(ns, reply, Arrival::Local, Some((hop, link)), branch);
    }

    /// conntrack undoes the forward direction's NAT for the reply in the
    /// namespace that made it: the reply's destination is un-SNATed, its
    /// source un-DNATed.
    fn undo_nat(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: &mut Packet,
        branch: &Branch,
        phase: UndoPhase,
    ) {
        for (at, translation) in &branch.nat {
            if at != ns {
                continue;
            }
            let undone = match *translation {
                Translation::Dnat { before, after } | Translation::Redirect { before, after }
                    if phase == UndoPhase::AfterRouting
                        && packet.src == Some(after.addr)
                        && after.port.is_none_or(|p| packet.sport == Some(p)) =>
                {
                    packet.src = Some(before.addr);
                    packet.sport = before.port.or(packet.sport);
                    Some(format!("un-dnat {after} -> {before}"))
                }
                Translation::Snat { before, after }
                | Translation::Masquerade {
                    before,
                    after: Some(after),
                } if phase == UndoPhase::BeforeRouting
                    && packet.dst == after.addr
                    && after.port.is_none_or(|p| packet.dport == Some(p)) =>
                {
                    packet.dst = before.addr;
                    packet.dport = before.port.or(packet.dport);
                    Some(format!("un-snat {after} -> {before}"))
                }
                _ => None,
            };
            if let Some(translation) = undone {
                self.step(
                    hop,
                    Step::Translated {
                        hook: "conntrack".into(),
                        table: "reply".into(),
                        translation,
                    },
                );
            }
        }
    }

    /// The reply is in a namespace that takes it: it must be the sender's.
    fn reply_arrived(&mut self, ns: &NetnsId, hop: NodeIndex, packet: &Packet, branch: Branch) {
        let Some(origin) = &branch.origin else {
            return self.finish(branch, Disposition::Delivered);
        };
        let reason = if &origin.ns != ns
            || origin.address != packet.dst
            || origin.port != packet.dport
        {
            format!(
                "the reply is delivered in {} to {}, but the connection was opened from {} in {}: the sender never sees the answer",
                hop_id(ns),
                packet.dst,
                origin.address,
                hop_id(&origin.ns)
            )
        } else if Some(origin.target) != packet.src || origin.target_port != packet.sport {
            format!(
                "the reply reaches {} from {}, but the connection went to {}: the sender's kernel does not match it to the connection (no un-DNAT on the way back)",
                hop_id(ns),
                endpoint(packet.src, packet.sport),
                endpoint(Some(origin.target), origin.target_port)
            )
        } else {
            let socket = "the sender's connection (the reply arrived)".to_string();
            self.step(hop, Step::Delivered { socket });
            return self.finish(branch, Disposition::Delivered);
        };
        let stop = Stop {
            disposition: Disposition::NoListener,
            id: "engine.reply.misdelivered",
            reason,
            evidence: hop_id(ns),
        };
        self.stop(hop, branch, stop);
    }

    /// A tunnel's outer packet was delivered here: the device that takes it
    /// (at an assumed hop, the one the CNI intends) decapsulates it, and the
    /// inner packet arrives on that device.
    fn decapsulate(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        outer: &Packet,
        tunnel: &Tunnelled,
        branch: Branch,
    ) {
        let taken = if self.graph[hop].assumed {
            self.intended_tunnel_device(ns, hop, outer, tunnel)
        } else {
            let device = match &tunnel.encapsulation {
                Encapsulation::Vxlan { vni, inner_mac } => {
                    self.vxlan_receiver(ns, outer, *vni, *inner_mac)
                }
                Encapsulation::Ipip => self.ipip_receiver(ns, outer),
            };
            device.map(|device| device.ifname.clone())
        };
        let device = match taken {
            Ok(device) => device,
            Err(stop) => return self.stop(hop, branch, stop),
        };
        self.step(
            hop,
            Step::Decapsulated {
                device: device.clone(),
                inner: tunnel.inner.to_string(),
            },
        );
        self.enter(
            ns,
            hop,
            tunnel.inner.clone(),
            Arrival::Received(device),
            branch,
        );
    }

    /// A VXLAN packet reached its VTEP: the device with that UDP port and VNI
    /// takes the inner frame, if it is addressed to the device's MAC.
    fn vxlan_receiver(
        &self,
        ns: &NetnsId,
        outer: &Packet,
        vni: u32,
        inner_mac: Option<MacAddr>,
    ) -> Result<&'s Device, Stop> {
        let device = self.topology.links(ns).find(|link| match link.kind() {
            Some(DeviceKind::Vxlan(info)) => {
                info.id == vni
                    && info.port == outer.dport
                    && info.local.is_none_or(|local| local == outer.dst)
            }
            _ => false,
        });
        let Some(device) = device else {
            return Err(Stop {
                disposition: Disposition::NoListener,
                id: "kernel.vxlan.no-device",
                reason: format!(
                    "no VXLAN device in {} takes VNI {vni} on UDP port {}",
                    hop_id(ns),
                    outer.dport.unwrap_or_default()
                ),
                evidence: self.file(ns, "ip-link.json"),
            });
        };
        if let Some(inner_mac) = inner_mac
            && device.address != Some(LinkLayerAddress::Mac(inner_mac))
        {
            return Err(Stop {
                disposition: Disposition::NeighborFailed,
                id: "kernel.vxlan.mac-mismatch",
                reason: format!(
                    "the tunnelled frame is addressed to {inner_mac} but {}'s {} has another MAC ({}): the sender's neighbour/FDB entries are stale",
                    hop_id(ns),
                    device.ifname,
                    device.address.as_ref().map_or("none".to_string(), mac_text)
                ),
                evidence: self.file(ns, "ip-link.json"),
            });
        }
        Ok(device)
    }

    /// An IPIP packet reached its destination: the kernel hands it to the
    /// IPIP device that is up and whose `local` is the outer destination and
    /// `remote` the outer source, `any` matching every address (the most
    /// specific such device wins, `ip_tunnel_lookup`). Without one, nothing
    /// takes IP protocol 4: the packet is dropped with an ICMP unreachable.
    fn ipip_receiver(&self, ns: &NetnsId, outer: &Packet) -> Result<&'s Device, Stop> {
        let matches = |endpoint: TunnelEndpoint, address: Option<IpAddr>| match endpoint {
            TunnelEndpoint::Any => Some(0),
            TunnelEndpoint::Address(own) => (Some(own) == address).then_some(1),
        };
        let candidates: Vec<(&'s Device, u8)> = self
            .topology
            .links(ns)
            .filter_map(|link| match link.kind() {
                Some(DeviceKind::Ipip(info)) => {
                    let remote = matches(info.remote, outer.src)?;
                    let local = matches(info.local, Some(outer.dst))?;
                    Some((link, 2 * remote + local))
                }
                _ => None,
            })
            .collect();
        let up = candidates
            .iter()
            .filter(|(link, _)| link.has_flag(&LinkFlag::Up))
            .max_by_key(|(_, specificity)| *specificity);
        if let Some((device, _)) = up {
            return Ok(device);
        }
        let from = endpoint(outer.src, None);
        let reason = match candidates.first() {
            Some((device, _)) => format!(
                "{}'s IPIP device {} would take the tunnelled packet from {from}, but it is down: the packet is dropped",
                hop_id(ns),
                device.ifname
            ),
            None => format!(
                "no IPIP device in {} takes the tunnelled packet from {from} to {}: nothing receives IP protocol 4, and the packet is dropped",
                hop_id(ns),
                outer.dst
            ),
        };
        Err(Stop {
            disposition: Disposition::NoListener,
            id: "kernel.ipip.no-device",
            reason,
            evidence: self.file(ns, "ip-link.json"),
        })
    }

    /// Sends the packet out of `dev` towards `next_hop`.
    fn egress(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        dev: &str,
        next_hop: IpAddr,
        packet: Packet,
        branch: Branch,
    ) {
        // The first device the hop sends by is the one its checks are about
        // (a tunnel's outer packet leaves by another one after it). A packet
        // generated here has its source once routing chose it; a received
        // one keeps the source it arrived with (what rp_filter checks), not
        // a source NAT's or the tunnel's outer one.
        if let Some(context) = &mut self.graph[hop].context
            && context.out_iface.is_none()
        {
            context.out_iface = Some(dev.to_string());
            if context.in_iface.is_none()
                && let Some(src) = packet.src
            {
                context.packet.src = src;
            }
        }
        let Some(device) = self.topology.link(ns, dev) else {
            return self.stop(
                hop,
                branch,
                self.missing(
                    ns,
                    &format!("device {dev} in ip-link.json"),
                    "send the packet",
                ),
            );
        };
        if let Some(stop) = self.device_down(ns, device) {
            return self.stop(hop, branch, stop);
        }
        let packet = match self.fit(ns, hop, device, packet, &branch) {
            Ok(packet) => packet,
            Err(stop) => return self.stop(hop, branch, stop),
        };
        match device.kind() {
            Some(DeviceKind::Vxlan(info)) => {
                self.vxlan_egress(ns, hop, device, info, next_hop, packet, branch)
            }
            Some(DeviceKind::Ipip(info)) => {
                self.ipip_egress(ns, hop, device, info, next_hop, packet, branch)
            }
            Some(DeviceKind::Bridge(_)) => {
                self.bridge_egress(ns, hop, device, next_hop, packet, branch)
            }
            _ => match self.topology.veth_peer(ns, device) {
                Some(peer) => self.veth_egress(
                    ns, hop, device, peer.ns, peer.link, next_hop, packet, branch,
                ),
                // A pod's veth leads to its node: without the node's dump
                // nothing can be said of what happens there.
                None if matches!(ns, NetnsId::Pod { .. }) && device.link_index.is_some() => {
                    let node = NetnsId::Host {
                        node: ns.node().to_string(),
                    };
                    if self.can_assume(&node) {
                        let pod_ip = packet.src;
                        return self.enter_node(
                            hop,
                            LinkKind::Veth,
                            &device.ifname,
                            &node,
                            next_hop,
                            pod_ip,
                            packet,
                            branch,
                        );
                    }
                    let stop = self.missing(
                        &node,
                        "the node's namespace dump",
                        "follow the pod's packet",
                    );
                    self.stop(hop, branch, stop)
                }
                // A node's veth whose far end is a pod the snapshot lacks
                // (a CNI that routes to each pod's own veth): the pod is assumed.
                None => match self
                    .missing_local_pod(ns, next_hop)
                    .filter(|_| device.link_index.is_some())
                {
                    Some(pod) if self.can_assume(&pod) => {
                        self.send_to_local_pod(ns, hop, &device.ifname, &pod, None, packet, branch)
                    }
                    Some(pod) => {
                        let stop =
                            self.missing(&pod, "the pod's namespace dump", "deliver the packet");
                        self.stop(hop, branch, stop)
                    }
                    None => self.underlay_egress(ns, hop, device, next_hop, packet, branch),
                },
            },
        }
    }

    /// The IP layer sends a packet by a device only if it fits the device's
    /// MTU. A larger one is fragmented when DF is clear; with DF set it is
    /// dropped, and the sender told: ICMP fragmentation-needed to a
    /// forwarded packet's source, EMSGSIZE to a local socket, and an IPIP
    /// device answers the same for the packet it carries — a VXLAN device
    /// with `df set` tells nobody (measured in the lab: `ping -M do` through
    /// a smaller hop gets "Frag needed and DF set (mtu = N)" from that hop,
    /// and through such a VXLAN device nothing). The first device a packet
    /// leaves by sets its size when `--size` did not.
    fn fit(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        device: &Device,
        mut packet: Packet,
        branch: &Branch,
    ) -> Result<Packet, Stop> {
        let size = *packet.size.get_or_insert(Size {
            bytes: device.mtu,
            df: true,
            probe: self.size.is_none(),
        });
        if size.bytes <= device.mtu {
            return Ok(packet);
        }
        let what = sized(&packet);
        let mut evidence = self.mtu_evidence(ns, device);
        let local = self.graph[hop]
            .context
            .as_ref()
            .is_some_and(|context| context.in_iface.is_none());
        // Measured in the lab: a VXLAN device whose outer packet does not fit
        // lowers the path MTU of the route its inner packet took. Forwarding
        // ignores that, but a socket of this namespace does not: its first DF
        // packet leaves fragmented, every later one gets EMSGSIZE.
        let route_mtu_lowered = !size.df
            && local
            && packet.tunnel.as_ref().is_some_and(|tunnel| {
                matches!(tunnel.encapsulation, Encapsulation::Vxlan { .. })
                    && tunnel.inner.size.is_some_and(|inner| inner.df)
            });
        if !size.df && !route_mtu_lowered {
            let message = format!(
                "{} fragments {what} to send it by {} (MTU {}): DF is clear, so the receiver must reassemble it",
                hop_id(ns),
                device.ifname,
                device.mtu
            );
            self.add_finding(
                hop,
                "kernel.mtu.fragmented",
                Severity::Warning,
                message,
                evidence,
            );
            // The fragments go on; a tunnel's inner packet is whole again
            // once the remote node reassembles the outer one.
            if let Some(size) = &mut packet.size {
                size.bytes = device.mtu;
            }
            return Ok(packet);
        }
        // Whether the sender learns of it, so that TCP's path MTU discovery
        // sends smaller segments.
        let (answer, told) = match &packet.tunnel {
            Some(tunnel) if route_mtu_lowered => (
                format!(
                    "the first such packet leaves fragmented, but {} then lowers the path MTU of {}'s route to {} to {}, and the sending socket gets EMSGSIZE (message too long) for every later one",
                    tunnel.device,
                    hop_id(ns),
                    tunnel.inner.dst,
                    device.mtu.saturating_sub(tunnel.encapsulation.overhead())
                ),
                Tri::True,
            ),
            Some(tunnel) if tunnel.encapsulation == Encapsulation::Ipip => (
                format!(
                    "{} drops the packet it carries and answers ICMP fragmentation-needed (MTU {}) to {}",
                    tunnel.device,
                    device.mtu.saturating_sub(tunnel.encapsulation.overhead()),
                    endpoint(tunnel.inner.src, None)
                ),
                Tri::True,
            ),
            // Measured in the lab: `df set`, and the underlay too small: pings
            // and TCP transfers alike are lost without an ICMP error.
            Some(tunnel) => (
                format!(
                    "the outer packet is dropped ({} has df set), and the VXLAN driver tells the inner packet's sender nothing",
                    tunnel.device
                ),
                Tri::False,
            ),
            None if local => (
                "the sending socket gets EMSGSIZE (message too long)".to_string(),
                Tri::True,
            ),
            None => {
                // The error goes to the source the packet entered the IP
                // layer with (out of a tunnel, the inner one's): the kernel
                // answers before FORWARD and POSTROUTING's source NAT.
                let sender = self.graph[hop]
                    .context
                    .as_ref()
                    .and_then(|context| context.received_from)
                    .or(packet.src);
                let error = format!("ICMP fragmentation-needed (MTU {})", device.mtu);
                // Related to the flow's connection, which has this
                // namespace's translations so far.
                let nat = branch.nat_in(ns);
                match sender.map(|sender| (sender, self.frag_needed_out(ns, sender, nat))) {
                    Some((sender, ErrorOut::Leaves { src, dev })) => (
                        format!(
                            "it is dropped and {error} goes back to {sender}, from {src} by {dev}"
                        ),
                        Tri::True,
                    ),
                    Some((
                        sender,
                        ErrorOut::Stopped {
                            reason,
                            evidence: stopped,
                        },
                    )) => {
                        evidence = format!("{evidence}; {stopped}");
                        (
                            format!(
                                "it is dropped, and the {error} the kernel answers to {sender} never leaves {}: {reason}",
                                hop_id(ns)
                            ),
                            Tri::False,
                        )
                    }
                    Some((sender, ErrorOut::Unknown { reason })) => (
                        format!(
                            "it is dropped and {error} is sent to {sender}, but whether it leaves {} is not known: {reason}",
                            hop_id(ns)
                        ),
                        Tri::Unknown,
                    ),
                    None => (
                        format!(
                            "it is dropped and {error} is sent to the packet's sender, whose address the walk lost"
                        ),
                        Tri::Unknown,
                    ),
                }
            }
        };
        let df = if size.df {
            "DF is set"
        } else {
            "the packet inside has DF set"
        };
        let reason = format!(
            "{} cannot send {what} by {}, whose MTU is {}, and {df}: {answer}",
            hop_id(ns),
            device.ifname,
            device.mtu
        );
        if size.probe {
            let bytes = size.bytes;
            match told {
                Tri::True => {
                    let message = format!(
                        "full-size packets do not fit the path: {reason}; TCP recovers by path MTU discovery, a datagram of that size with DF is lost (--size {bytes} walks one)"
                    );
                    self.add_finding(hop, "kernel.mtu.path", Severity::Warning, message, evidence);
                }
                Tri::Unknown => {
                    let message = format!(
                        "full-size packets do not fit the path: {reason}; whether TCP recovers by path MTU discovery depends on that error reaching the sender, a datagram of that size with DF is lost (--size {bytes} walks one)"
                    );
                    self.add_finding(hop, "kernel.mtu.path", Severity::Warning, message, evidence);
                }
                Tri::False => {
                    let message = format!(
                        "full-size packets vanish on the path: {reason}; nothing tells the sender to send smaller ones, so TCP transfers stall too (--size {bytes} walks one)"
                    );
                    self.add_finding(
                        hop,
                        "kernel.mtu.black-hole",
                        Severity::Critical,
                        message,
                        evidence,
                    );
                }
            }
            packet.shrink_to(device.mtu);
            return Ok(packet);
        }
        Err(Stop {
            disposition: Disposition::MtuExceeded,
            id: "kernel.mtu.exceeded",
            reason,
            evidence,
        })
    }

    /// What netfilter consults in `ns` beside its rules: routing between
    /// hooks and the namespace's addresses.
    fn netfilter_context<'c>(&'c self, ns: &NetnsId, fib: Option<&'c Fib<'s>>) -> Context<'c> {
        Context {
            fib,
            interfaces: self.snapshot.namespaces[ns]
                .dump
                .addrs
                .as_deref()
                .unwrap_or_default(),
            local_addresses: &[],
        }
    }

    /// Whether the ICMP fragmentation-needed error `ns` answers a forwarded
    /// packet with gets out of `ns` toward its `sender`. The kernel's
    /// `icmp_send` routes it like any packet of the namespace (which picks
    /// its source: measured in the Calico lab, a node answers from its
    /// eth0's address, the cali veth having none) and sends it through
    /// OUTPUT and POSTROUTING, RELATED to the flow; a rule dropping it there
    /// leaves the sender to retry full-size packets for ever. The error is
    /// followed out of this namespace only.
    fn frag_needed_out(&self, ns: &NetnsId, sender: IpAddr, nat: ConnectionNat) -> ErrorOut {
        let models = self.models;
        let (Some(fib), Some(netfilter)) = (models.fibs.get(ns), models.netfilters.get(ns)) else {
            return ErrorOut::Unknown {
                reason: format!(
                    "the snapshot lacks {}'s routes or netfilter rules",
                    hop_id(ns)
                ),
            };
        };
        let lookup = fib.lookup(&FlowKey {
            ip_proto: Some(IpProto::Icmp),
            ..FlowKey::to(sender)
        });
        let paths = match lookup.outcome {
            LookupOutcome::Routed { paths, .. } => paths,
            LookupOutcome::Failed { error, route, .. } => {
                let route = route.map(|r| format!(" ({})", describe_route(&fib.routes[r])));
                return ErrorOut::Stopped {
                    reason: format!("it has no route back: {error}{}", route.unwrap_or_default()),
                    evidence: self.file(ns, "ip-route.json"),
                };
            }
            LookupOutcome::Unknown { reason } => return ErrorOut::Unknown { reason },
        };
        let context = self.netfilter_context(ns, Some(fib));
        // Every multipath way and netfilter branch: the error leaves only if
        // all let it, and is stopped only if all stop it.
        let mut ways = Vec::new();
        for path in paths {
            let Some(src) = path.prefsrc else {
                ways.push(ErrorOut::Stopped {
                    reason: "it has no address to be sent from".to_string(),
                    evidence: self.file(ns, "ip-addr.json"),
                });
                continue;
            };
            let mut error = netfilter::Packet::new(src, sender, IpProtocol::ICMP);
            error.icmp = Some((ICMP_DEST_UNREACHABLE, ICMP_FRAG_NEEDED));
            error.ct_state = CtState::Related;
            error.length = ICMP_ERROR_LENGTH;
            error.out_iface = path.dev.clone();
            error.ct_nat = Some(nat);
            for outcome in netfilter.traverse(PacketPath::Output, error, &context) {
                ways.push(match &outcome.verdict {
                    Verdict::Accept => ErrorOut::Leaves {
                        src,
                        dev: path.dev.clone().unwrap_or_default(),
                    },
                    verdict @ (Verdict::Drop | Verdict::Reject { .. }) => {
                        let decision = deciding_rule(&outcome.trace);
                        let verb = match verdict {
                            Verdict::Drop => "drops",
                            _ => "rejects",
                        };
                        ErrorOut::Stopped {
                            reason: format!("its netfilter {verb} it: {}", decision.description),
                            evidence: self.rule_evidence(ns, decision.line, &decision.text),
                        }
                    }
                    Verdict::Unroutable { error } => ErrorOut::Stopped {
                        reason: format!("rerouted after OUTPUT, it has no route: {error}"),
                        evidence: self.file(ns, "ip-route.json"),
                    },
                    Verdict::Unknown { reason } => ErrorOut::Unknown {
                        reason: reason.clone(),
                    },
                });
            }
        }
        let kind = |way: &ErrorOut| std::mem::discriminant(way);
        let leaving = ways
            .iter()
            .filter(|way| matches!(way, ErrorOut::Leaves { .. }))
            .count();
        let total = ways.len();
        let alike = ways.windows(2).all(|pair| kind(&pair[0]) == kind(&pair[1]));
        let unknown = ways
            .iter()
            .position(|way| matches!(way, ErrorOut::Unknown { .. }));
        match (alike, unknown) {
            (true, _) => ways.into_iter().next().unwrap_or(ErrorOut::Unknown {
                reason: "routing gave it no way out".to_string(),
            }),
            (false, Some(first)) => ways.swap_remove(first),
            (false, None) => ErrorOut::Unknown {
                reason: format!(
                    "it leaves on {leaving} of its {total} ways (multipath routes, netfilter branches)"
                ),
            },
        }
    }

    /// A rule's place in the namespace's iptables-save dump, as evidence.
    fn rule_evidence(&self, ns: &NetnsId, line: Option<usize>, text: &str) -> String {
        let rules_file = self.file(ns, "iptables-save.txt");
        match line {
            Some(line) => format!("{rules_file}:{line}: {text}"),
            None => format!("{rules_file}: {text}"),
        }
    }

    /// A frame longer than a veth's peer (or a bridge's port) takes is
    /// dropped without a word to the sender (see [`VLAN_HEADER`]). The
    /// packet walked is one datagram: TCP's segmentation-offload packets are
    /// not checked here by the kernel, which is why a TCP transfer can work
    /// where a ping of the same size does not.
    fn oversized_frame(
        &mut self,
        hop: NodeIndex,
        ns: &NetnsId,
        device: &Device,
        packet: &mut Packet,
    ) -> Option<Stop> {
        let size = packet.size?;
        let limit = device.mtu.saturating_add(VLAN_HEADER);
        if size.bytes <= limit {
            return None;
        }
        let reason = format!(
            "{} drops {} at {} (MTU {}): a veth or bridge port passes frames of at most its MTU + {VLAN_HEADER} bytes, and no ICMP error tells the sender",
            hop_id(ns),
            sized(packet),
            device.ifname,
            device.mtu
        );
        let evidence = self.mtu_evidence(ns, device);
        if size.probe {
            let message = format!(
                "full-size packets do not fit the path: {reason}; only TCP (segmentation offload, MSS) gets through, a datagram of that size is lost (--size {} walks one)",
                size.bytes
            );
            self.add_finding(hop, "kernel.mtu.path", Severity::Warning, message, evidence);
            packet.shrink_to(device.mtu);
            return None;
        }
        Some(Stop {
            disposition: Disposition::MtuExceeded,
            id: "kernel.mtu.frame-dropped",
            reason,
            evidence,
        })
    }

    /// A frame dropped as it arrives: the receiving namespace joins the
    /// path, and the stop is its own.
    #[allow(clippy::too_many_arguments)]
    fn dropped_on_arrival(
        &mut self,
        hop: NodeIndex,
        from_interface: &str,
        kind: LinkKind,
        to: &NetnsId,
        interface: &str,
        packet: &Packet,
        mut branch: Branch,
        stop: Stop,
    ) {
        let arrived = self.graph.add_node(Hop {
            id: hop_id(to),
            kind: hop_kind(to),
            node: Some(to.node().to_string()),
            steps: vec![HopStep {
                step: Step::Received {
                    interface: interface.to_string(),
                    packet: packet.to_string(),
                },
                assumed: false,
            }],
            context: None,
            assumed: false,
        });
        let link = Link {
            kind,
            from_interface: from_interface.to_string(),
            to_interface: Some(interface.to_string()),
            packet: packet.to_string(),
        };
        self.graph.add_edge(hop, arrived, link);
        branch.hops.push(arrived);
        self.stop(arrived, branch, stop);
    }

    /// The device and its MTU, where the dump shows them.
    fn mtu_evidence(&self, ns: &NetnsId, device: &Device) -> String {
        format!(
            "{}: {} mtu {}",
            self.file(ns, "ip-link.json"),
            device.ifname,
            device.mtu
        )
    }

    /// A finding that does not stop the path; said once however many
    /// branches pass the same place.
    fn add_finding(
        &mut self,
        hop: NodeIndex,
        id: &str,
        severity: Severity,
        message: String,
        evidence: String,
    ) {
        let hop_name = self.graph[hop].id.clone();
        if self
            .findings
            .iter()
            .any(|f| f.id == id && f.hop == hop_name && f.message == message)
        {
            return;
        }
        self.findings.push(Finding {
            id: id.to_string(),
            severity,
            hop: hop_name,
            hop_index: hop.index(),
            message,
            evidence,
            expected: None,
        });
    }

    /// A device that is administratively down, or has no carrier, sends nothing.
    fn device_down(&self, ns: &NetnsId, device: &Device) -> Option<Stop> {
        let up = device.has_flag(&LinkFlag::Up);
        let carrier = device.has_flag(&LinkFlag::LowerUp) || device.ifname == "lo";
        if up && carrier {
            return None;
        }
        let state = if up {
            "has no carrier (its peer or link is down)"
        } else {
            "is down"
        };
        Some(Stop {
            disposition: Disposition::NeighborFailed,
            id: "kernel.device.down",
            reason: format!("{} sends by {}, which {state}", hop_id(ns), device.ifname),
            evidence: self.file(ns, "ip-link.json"),
        })
    }

    /// VXLAN: the next hop's neighbour entry gives the remote VTEP device's
    /// MAC, the FDB gives the VTEP's address; the packet leaves inside UDP.
    #[allow(clippy::too_many_arguments)]
    fn vxlan_egress(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        device: &Device,
        info: &VxlanInfo,
        next_hop: IpAddr,
        packet: Packet,
        branch: Branch,
    ) {
        let dump = &self.snapshot.namespaces[ns].dump;
        let Some(neighbours) = &dump.neighbours else {
            return self.stop(
                hop,
                branch,
                self.missing(ns, "ip-neigh.json", "resolve the VXLAN next hop"),
            );
        };
        let entry = neighbours
            .iter()
            .find(|n| n.dev == device.ifname && n.dst == next_hop);
        let mac = match entry.and_then(|n| n.lladdr.as_ref()) {
            Some(LinkLayerAddress::Mac(mac))
                if !entry.is_some_and(|n| {
                    n.has_state(&NeighbourState::Failed) || n.has_state(&NeighbourState::Incomplete)
                }) =>
            {
                *mac
            }
            _ => {
                let reason = format!(
                    "{} has no usable neighbour entry for {next_hop} on {} (VXLAN devices without learning do not ARP: the entry must be programmed)",
                    hop_id(ns),
                    device.ifname
                );
                self.step(
                    hop,
                    Step::Neighbour {
                        address: next_hop,
                        interface: device.ifname.clone(),
                        result: "missing".into(),
                    },
                );
                let evidence = self.file(ns, "ip-neigh.json");
                return self.stop(
                    hop,
                    branch,
                    Stop {
                        disposition: Disposition::NeighborFailed,
                        id: "kernel.neighbour.missing",
                        reason,
                        evidence,
                    },
                );
            }
        };
        self.step(
            hop,
            Step::Neighbour {
                address: next_hop,
                interface: device.ifname.clone(),
                result: mac.to_string(),
            },
        );
        let Some(fdb) = &dump.fdb else {
            return self.stop(
                hop,
                branch,
                self.missing(ns, "bridge-fdb.json", "find the remote VTEP"),
            );
        };
        let Some(vtep) = fdb
            .iter()
            .find(|e| e.ifname == device.ifname && e.mac == mac)
            .and_then(|e| e.dst)
        else {
            let reason = format!(
                "{} has no FDB entry on {} for {mac}: the remote VTEP is unknown",
                hop_id(ns),
                device.ifname
            );
            let evidence = self.file(ns, "bridge-fdb.json");
            return self.stop(
                hop,
                branch,
                Stop {
                    disposition: Disposition::NeighborFailed,
                    id: "kernel.fdb.missing",
                    reason,
                    evidence,
                },
            );
        };
        let Some(port) = info.port else {
            return self.stop(
                hop,
                branch,
                self.missing(
                    ns,
                    &format!("the UDP port of {}", device.ifname),
                    "encapsulate",
                ),
            );
        };
        // Measured in the lab: with `df unset` (flannel's) an outer packet
        // too large for the underlay is fragmented and reassembled by the
        // remote node, and the pods' flow still works.
        let df = match &info.df {
            Some(VxlanDf::Set) => Some(true),
            Some(VxlanDf::Inherit) => None,
            Some(VxlanDf::Unset) | None => Some(false),
            Some(VxlanDf::Other(word)) => {
                let reason = format!(
                    "{} shows df {word:?} on {}, a word skoop does not know: whether its outer packets may be fragmented is unknown",
                    hop_id(ns),
                    device.ifname
                );
                let evidence = self.file(ns, "ip-link.json");
                return self.stop(
                    hop,
                    branch,
                    Stop::unknown("kernel.vxlan.unknown", reason, evidence),
                );
            }
        };
        let header = TunnelHeader {
            encapsulation: Encapsulation::Vxlan {
                vni: info.id,
                inner_mac: Some(mac),
            },
            device: device.ifname.clone(),
            src: info.local,
            dst: vtep,
            udp_port: Some(port),
            df,
        };
        self.encapsulate(ns, hop, packet, header, branch);
    }

    /// IPIP: the packet leaves inside an IPv4 header (protocol 4) for the
    /// device's fixed remote or, with `remote any` (flannel's `flannel.ipip`,
    /// Calico's `tunl0`), for the route's next hop, which an `onlink` route
    /// sets to the remote node's address. The outer source is the device's
    /// `local`, or chosen when the outer packet is routed. The kernel copies
    /// the inner packet's DF bit to the outer one (an IPIP device has no
    /// `ignore_df`), so a packet too large for the underlay with the 20
    /// bytes added is refused with ICMP fragmentation-needed, not
    /// fragmented (`ip_tunnel_xmit`; read in the kernel's source: this
    /// kernel has no ipip module to measure it).
    #[allow(clippy::too_many_arguments)]
    fn ipip_egress(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        device: &Device,
        info: &IpipInfo,
        next_hop: IpAddr,
        packet: Packet,
        branch: Branch,
    ) {
        let remote = match info.remote {
            TunnelEndpoint::Address(remote) => remote,
            TunnelEndpoint::Any => next_hop,
        };
        let local = match info.local {
            TunnelEndpoint::Address(local) => Some(local),
            TunnelEndpoint::Any => None,
        };
        let header = TunnelHeader {
            encapsulation: Encapsulation::Ipip,
            device: device.ifname.clone(),
            src: local,
            dst: remote,
            udp_port: None,
            df: None,
        };
        self.encapsulate(ns, hop, packet, header, branch);
    }

    /// Puts the packet into a tunnel: the outer packet, as long as the inner
    /// one and the tunnel's overhead, is recorded and sent on. A tunnel
    /// device routes it like a packet generated in its namespace; at an
    /// assumed hop it goes to the node holding the tunnel's far end.
    fn encapsulate(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        packet: Packet,
        header: TunnelHeader,
        branch: Branch,
    ) {
        let encapsulation = header.encapsulation;
        let outer = Packet {
            src: header.src,
            dst: header.dst,
            protocol: match encapsulation {
                Encapsulation::Vxlan { .. } => Protocol::Udp,
                Encapsulation::Ipip => packet.protocol,
            },
            sport: header.udp_port.map(|_| EPHEMERAL_PORT),
            dport: header.udp_port,
            // Each tunnel packet is a packet of its own to netfilter.
            reply: false,
            mark: 0,
            size: packet.size.map(|inner| Size {
                bytes: inner.bytes.saturating_add(encapsulation.overhead()),
                df: header.df.unwrap_or(inner.df),
                ..inner
            }),
            tunnel: Some(Box::new(Tunnelled {
                encapsulation,
                device: header.device.clone(),
                inner: packet,
            })),
        };
        self.step(
            hop,
            Step::Encapsulated {
                device: header.device,
                outer: outer.to_string(),
            },
        );
        if self.graph[hop].assumed {
            return self.send_tunnelled_assumed(ns, hop, outer, branch);
        }
        self.enter(ns, hop, outer, Arrival::Local, branch);
    }

    /// A bridge device of this namespace: the frame goes to the port behind
    /// which the next hop answers ARP.
    fn bridge_egress(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        bridge: &Device,
        next_hop: IpAddr,
        packet: Packet,
        branch: Branch,
    ) {
        match self.bridge_port(ns, &bridge.ifname, next_hop, None) {
            BridgePort::Found { port, far } => {
                self.step(
                    hop,
                    Step::Bridged {
                        bridge: bridge.ifname.clone(),
                        port: port.ifname.clone(),
                    },
                );
                self.cross(
                    ns,
                    hop,
                    port,
                    LinkKind::BridgePort,
                    far.ns,
                    &far.link.ifname,
                    packet,
                    branch,
                )
            }
            BridgePort::AssumedPod(pod) => {
                self.send_to_local_pod(ns, hop, &bridge.ifname, &pod, None, packet, branch)
            }
            BridgePort::Unanswered => {
                self.arp_unanswered(ns, hop, &bridge.ifname, next_hop, branch)
            }
        }
    }

    /// The port of `bridge` (in `ns`) a frame for `next_hop` leaves by: the
    /// one whose far end holds it (never the port it came in by), or the
    /// CNI's port to a pod of this node the snapshot lacks. The one search,
    /// whether the frame comes from the node's own stack or from a port.
    fn bridge_port(
        &self,
        ns: &NetnsId,
        bridge: &str,
        next_hop: IpAddr,
        in_port: Option<&str>,
    ) -> BridgePort<'s> {
        for port in self.topology.bridge_ports(ns, bridge) {
            if Some(port.ifname.as_str()) == in_port {
                continue;
            }
            if let Some(far) = self.topology.veth_peer(ns, port)
                && self.owns(far.ns, next_hop)
            {
                return BridgePort::Found { port, far };
            }
        }
        match self.missing_local_pod(ns, next_hop) {
            Some(pod) if self.can_assume(&pod) => BridgePort::AssumedPod(pod),
            _ => BridgePort::Unanswered,
        }
    }

    /// Nothing behind any port of `bridge` (in `ns`) holds the next hop, so
    /// its ARP request goes unanswered and the packet is dropped.
    fn arp_unanswered(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        bridge: &str,
        next_hop: IpAddr,
        branch: Branch,
    ) {
        // A port whose far end is a namespace the snapshot lacks (a pod whose
        // dump was not collected) might hold the next hop: nothing can be said.
        let unknown: Vec<&str> = self
            .topology
            .bridge_ports(ns, bridge)
            .into_iter()
            .filter(|port| port.link_index.is_some() && self.topology.veth_peer(ns, port).is_none())
            .map(|port| port.ifname.as_str())
            .collect();
        if !unknown.is_empty() {
            let owner =
                self.snapshot
                    .cluster
                    .by_ip(next_hop)
                    .iter()
                    .find_map(|owner| match owner {
                        IpOwner::Pod {
                            namespace, name, ..
                        } => Some(format!(" ({next_hop} is pod {namespace}/{name}'s)")),
                        _ => None,
                    });
            let reason = format!(
                "no namespace in the snapshot behind bridge {bridge} of {} holds {next_hop}{}, and port(s) {} lead to namespaces whose dumps are not in the snapshot",
                hop_id(ns),
                owner.unwrap_or_default(),
                unknown.join(", ")
            );
            let evidence = self.file(ns, "ip-link.json");
            let stop = Stop::unknown("snapshot.missing", reason, evidence);
            return self.stop(hop, branch, stop);
        }
        let reason = format!(
            "no device on bridge {bridge} of {} answers ARP for {next_hop}",
            hop_id(ns)
        );
        let evidence = self.file(ns, "ip-addr.json");
        let stop = Stop {
            disposition: Disposition::NeighborFailed,
            id: "kernel.neighbour.unanswered",
            reason,
            evidence,
        };
        self.stop(hop, branch, stop)
    }

    /// A veth whose other end is in another namespace of the snapshot.
    #[allow(clippy::too_many_arguments)]
    fn veth_egress(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        device: &Device,
        peer_ns: &'s NetnsId,
        peer: &'s Device,
        next_hop: IpAddr,
        packet: Packet,
        branch: Branch,
    ) {
        let Some(bridge) = peer.master.clone() else {
            // A plain veth pair: the peer answers ARP for its own addresses,
            // and for others by proxy where proxy ARP is on.
            let proxied = match self.owns(peer_ns, next_hop) {
                true => None,
                false => match self.proxy_arp(ns, device, peer_ns, peer, next_hop, &packet) {
                    Ok(()) => Some(()),
                    Err(ProxyArpRefusal::Unknown(stop)) => return self.stop(hop, branch, stop),
                    Err(ProxyArpRefusal::Silent { why, file }) => {
                        let reason = format!(
                            "{next_hop} is not an address of {} behind {}, and it does not answer ARP for it by proxy: {why}",
                            hop_id(peer_ns),
                            device.ifname
                        );
                        let evidence = self.file(peer_ns, file);
                        return self.stop(
                            hop,
                            branch,
                            Stop {
                                disposition: Disposition::NeighborFailed,
                                id: "kernel.neighbour.unanswered",
                                reason,
                                evidence,
                            },
                        );
                    }
                },
            };
            if proxied.is_some() {
                self.step(
                    hop,
                    Step::Neighbour {
                        address: next_hop,
                        interface: device.ifname.clone(),
                        result: format!(
                            "answered by proxy ARP on {}'s {}",
                            hop_id(peer_ns),
                            peer.ifname
                        ),
                    },
                );
            }
            return self.cross(
                ns,
                hop,
                device,
                LinkKind::Veth,
                peer_ns,
                &peer.ifname,
                packet,
                branch,
            );
        };
        // The peer is a bridge port. The frame does not go through `arrive`
        // from here, so the port's own checks come first: a port that is
        // down, or whose MTU the frame exceeds, takes nothing in.
        if let Some(stop) = self.device_down(peer_ns, peer) {
            return self.stop(hop, branch, stop);
        }
        let mut packet = packet;
        if let Some(stop) = self.oversized_frame(hop, peer_ns, peer, &mut packet) {
            return self.dropped_on_arrival(
                hop,
                &device.ifname,
                LinkKind::Veth,
                peer_ns,
                &peer.ifname,
                &packet,
                branch,
                stop,
            );
        }
        // The bridge itself (the node's stack) or another port answers ARP
        // for the next hop.
        if self.owns(peer_ns, next_hop) {
            let link = Link {
                kind: LinkKind::Veth,
                from_interface: device.ifname.clone(),
                to_interface: Some(peer.ifname.clone()),
                packet: packet.to_string(),
            };
            return self.visit(
                peer_ns,
                packet,
                Arrival::Received(bridge),
                Some((hop, link)),
                branch,
            );
        }
        // Another port holds it: the frame crosses the node's bridge
        // without entering its IP stack.
        let target = self.bridge_port(peer_ns, &bridge, next_hop, Some(&peer.ifname));
        if matches!(target, BridgePort::Unanswered) {
            return self.arp_unanswered(peer_ns, hop, &bridge, next_hop, branch);
        }
        let link = Link {
            kind: LinkKind::Veth,
            from_interface: device.ifname.clone(),
            to_interface: Some(peer.ifname.clone()),
            packet: packet.to_string(),
        };
        let bridge_hop = self.graph.add_node(Hop {
            id: hop_id(peer_ns),
            kind: HopKind::Node,
            node: Some(peer_ns.node().to_string()),
            assumed: false,
            // Bridged, not routed: no IP-stack checks apply here.
            context: None,
            steps: Vec::new(),
        });
        self.graph.add_edge(hop, bridge_hop, link);
        let mut branch = branch;
        branch.hops.push(bridge_hop);
        let (port, far) = match target {
            BridgePort::Found { port, far } => (port, far),
            BridgePort::AssumedPod(pod) => {
                return self.send_to_local_pod(
                    peer_ns,
                    bridge_hop,
                    &bridge,
                    &pod,
                    Some(&peer.ifname),
                    packet,
                    branch,
                );
            }
            BridgePort::Unanswered => unreachable!("answered above"),
        };
        self.step(
            bridge_hop,
            Step::Bridged {
                bridge: bridge.clone(),
                port: port.ifname.clone(),
            },
        );
        if let Some(stop) = self.bridge_netfilter(
            peer_ns,
            bridge_hop,
            &bridge,
            &peer.ifname,
            &port.ifname,
            &mut packet,
            &mut branch,
        ) {
            return self.stop(bridge_hop, branch, stop);
        }
        self.cross(
            peer_ns,
            bridge_hop,
            port,
            LinkKind::BridgePort,
            far.ns,
            &far.link.ifname,
            packet,
            branch,
        )
    }

    /// The kernel's `arp_process` for a request arriving on `peer` (in
    /// `peer_ns`) for `next_hop`, an address `peer_ns` does not hold: it
    /// answers by proxy when `proxy_arp` is on (`all` OR'd with the device's
    /// own), the device forwards, the input route (which validates the
    /// request's sender address, rp_filter included) is unicast and leaves
    /// by another device. Explicit proxy entries (`ip neigh add proxy`) and
    /// `proxy_arp_pvlan` are not in the dumps and are not modelled.
    fn proxy_arp(
        &self,
        ns: &NetnsId,
        device: &Device,
        peer_ns: &NetnsId,
        peer: &Device,
        next_hop: IpAddr,
        packet: &Packet,
    ) -> Result<(), ProxyArpRefusal> {
        let to_do = "tell whether it answers ARP by proxy";
        let sysctls = self
            .sysctls(peer_ns)
            .ok_or_else(|| ProxyArpRefusal::Unknown(self.missing(peer_ns, "sysctl.txt", to_do)))?;
        let settings: Vec<Option<i64>> = ["all", peer.ifname.as_str()]
            .iter()
            .map(|ifname| {
                let key = Sysctls::interface_key(Family::Ipv4, ifname, "proxy_arp");
                sysctls.get_i64(&key).ok().flatten()
            })
            .collect();
        if !settings.iter().any(|v| v.is_some_and(|v| v != 0)) {
            if settings.contains(&None) {
                return Err(ProxyArpRefusal::Unknown(self.missing(
                    peer_ns,
                    &format!(
                        "net.ipv4.conf.{{all,{}}}.proxy_arp in sysctl.txt",
                        peer.ifname
                    ),
                    to_do,
                )));
            }
            return Err(ProxyArpRefusal::Silent {
                why: format!(
                    "net.ipv4.conf.all.proxy_arp and net.ipv4.conf.{}.proxy_arp are 0",
                    peer.ifname
                ),
                file: "sysctl.txt",
            });
        }
        if let Some(stop) = self.forwarding(peer_ns, &peer.ifname) {
            return Err(match stop.disposition {
                Disposition::ForwardingDisabled => ProxyArpRefusal::Silent {
                    why: stop.reason,
                    file: "sysctl.txt",
                },
                _ => ProxyArpRefusal::Unknown(stop),
            });
        }
        // The request's sender address: the packet's own source where the
        // sender holds it, else the one the sender picks for the device.
        let sender = packet
            .src
            .filter(|src| self.owns(ns, *src))
            .or_else(|| {
                let fib = self.models.fibs.get(ns)?;
                fib.select_source(Some(&device.ifname), next_hop)
            })
            .ok_or_else(|| ProxyArpRefusal::Silent {
                why: format!("{} has no address to send the request from", hop_id(ns)),
                file: "ip-addr.json",
            })?;
        let request = Packet {
            src: Some(sender),
            dst: next_hop,
            ..packet.clone()
        };
        if let Some(stop) = self.reverse_path_filter(peer_ns, &request, Some(&peer.ifname)) {
            return Err(ProxyArpRefusal::Silent {
                why: format!(
                    "the request from {sender} fails the input route's source check: {}",
                    stop.reason
                ),
                file: "sysctl.txt",
            });
        }
        let fib = self.models.fibs.get(peer_ns).ok_or_else(|| {
            ProxyArpRefusal::Unknown(self.missing(peer_ns, "ip-route.json", to_do))
        })?;
        let lookup = fib.lookup(&FlowKey {
            src: Some(sender),
            iif: Some(peer.ifname.clone()),
            ..FlowKey::to(next_hop)
        });
        let silent = |why: String| {
            Err(ProxyArpRefusal::Silent {
                why,
                file: "ip-route.json",
            })
        };
        match lookup.outcome {
            LookupOutcome::Routed {
                route_type: RouteType::Unicast,
                paths,
                ..
            } => match paths.iter().any(|p| p.dev.as_deref() == Some(&peer.ifname)) {
                false => Ok(()),
                true => silent(format!(
                    "its route to {next_hop} leaves by {} itself",
                    peer.ifname
                )),
            },
            LookupOutcome::Routed { route_type, .. } => silent(format!(
                "its route to {next_hop} is {route_type:?}, not unicast"
            )),
            LookupOutcome::Failed { error, .. } => silent(format!(
                "it has no route to {next_hop} ({})",
                error.as_str()
            )),
            LookupOutcome::Unknown { reason } => Err(ProxyArpRefusal::Unknown(Stop::unknown(
                "kernel.route.unknown",
                format!(
                    "whether {} answers ARP for {next_hop} by proxy is not known: {reason}",
                    hop_id(peer_ns)
                ),
                self.file(peer_ns, "ip-route.json"),
            ))),
        }
    }

    /// With `bridge-nf-call-iptables` on, a frame crossing a bridge goes
    /// through the node's netfilter (FORWARD and POSTROUTING, `-m physdev`
    /// sees the ports) and conntrack, which undoes NAT for replies there too.
    #[allow(clippy::too_many_arguments)]
    fn bridge_netfilter(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        bridge: &str,
        in_port: &str,
        out_port: &str,
        packet: &mut Packet,
        branch: &mut Branch,
    ) -> Option<Stop> {
        let enabled = self
            .sysctls(ns)?
            .get_i64("net.bridge.bridge-nf-call-iptables")
            .ok()
            .flatten();
        if enabled != Some(1) {
            return None;
        }
        if branch.reply {
            self.undo_nat(ns, hop, packet, branch, UndoPhase::BeforeRouting);
            self.undo_nat(ns, hop, packet, branch, UndoPhase::AfterRouting);
        }
        let models = self.models;
        let Some(netfilter) = models.netfilters.get(ns) else {
            return Some(self.missing(
                ns,
                "iptables-save.txt",
                "evaluate bridged traffic (bridge-nf-call-iptables = 1)",
            ));
        };
        let context = self.netfilter_context(ns, models.fibs.get(ns));
        let mut filtered = packet.netfilter_packet(packet.src.unwrap_or(packet.dst));
        filtered.ct_nat = branch.connection_nat(ns);
        filtered.in_iface = Some(bridge.to_string());
        filtered.out_iface = Some(bridge.to_string());
        filtered.bridge = Some(BridgePorts {
            physdev_in: Some(in_port.to_string()),
            physdev_out: Some(out_port.to_string()),
        });
        let outcomes = netfilter.traverse(PacketPath::Forward, filtered, &context);
        let [outcome] = outcomes.as_slice() else {
            let reason = format!(
                "bridged traffic splits into {} netfilter branches in {}: not modelled",
                outcomes.len(),
                hop_id(ns)
            );
            return Some(Stop::unknown(
                "engine.bridge.branches",
                reason,
                self.file(ns, "iptables-save.txt"),
            ));
        };
        match &outcome.verdict {
            Verdict::Drop | Verdict::Reject { .. } => {
                let what = format!("the bridged packet ({bridge}: {in_port} -> {out_port})");
                Some(self.denial(ns, hop, outcome, &what))
            }
            Verdict::Unknown { reason } => Some(Stop::unknown(
                "kernel.netfilter.unknown",
                reason.clone(),
                self.file(ns, "iptables-save.txt"),
            )),
            Verdict::Accept | Verdict::Unroutable { .. } => {
                self.record_translations(ns, hop, outcome, branch);
                packet.take_addresses(&outcome.packet);
                None
            }
        }
    }

    /// A device whose far end is not in the snapshot (a node's NIC): the
    /// next hop is whichever node holds that address, or outside the cluster.
    fn underlay_egress(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        device: &Device,
        next_hop: IpAddr,
        packet: Packet,
        branch: Branch,
    ) {
        let owner = self
            .topology
            .owners(next_hop)
            .iter()
            .find(|(owner, _)| *owner != ns)
            .copied();
        if let Some((owner, interface)) = owner {
            return self.cross(
                ns,
                hop,
                device,
                LinkKind::Underlay,
                owner,
                interface,
                packet,
                branch,
            );
        }
        // A next hop that is a node of the cluster whose dump is missing:
        // the snapshot cannot tell what happens there.
        let missing_node =
            self.snapshot
                .cluster
                .by_ip(next_hop)
                .iter()
                .find_map(|owner| match owner {
                    IpOwner::Node { name } => Some(name.clone()),
                    _ => None,
                });
        if let Some(node) = missing_node {
            let node = NetnsId::Host { node };
            if self.can_assume(&node) {
                return self.enter_node(
                    hop,
                    LinkKind::Underlay,
                    &device.ifname,
                    &node,
                    next_hop,
                    None,
                    packet,
                    branch,
                );
            }
            let stop = self.missing(
                &node,
                "the node's namespace dump",
                "follow the packet further",
            );
            return self.stop(hop, branch, stop);
        }
        // Otherwise the packet leaves the cluster's namespaces. For a
        // destination inside the cluster that is the fault itself.
        self.lost(ns, hop, &device.ifname, next_hop, &packet);
        self.leave_cluster(hop, &device.ifname, packet, branch);
    }

    /// The finding for a packet that leaves the cluster though its
    /// destination is a pod, a node or a service address of it.
    fn lost(
        &mut self,
        ns: &NetnsId,
        hop: NodeIndex,
        device: &str,
        next_hop: IpAddr,
        packet: &Packet,
    ) {
        let cluster_owner = self
            .snapshot
            .cluster
            .by_ip(packet.dst)
            .iter()
            .find_map(|owner| match owner {
                IpOwner::Pod {
                    namespace, name, ..
                } => Some(format!("pod {namespace}/{name}")),
                IpOwner::Node { name } => Some(format!("node {name}")),
                _ => None,
            });
        let lost = match (cluster_owner, self.untranslated_service(packet)) {
            (Some(owner), _) => Some((
                "kernel.route.leaves-cluster",
                format!(
                    "{} sends the packet for {owner} out of the cluster: its route to {} leads by {} to {next_hop}, which no node or pod holds",
                    hop_id(ns),
                    packet.dst,
                    device
                ),
                "a route to the destination through the cluster network",
                self.file(ns, "ip-route.json"),
            )),
            (None, Some(service)) => Some((
                "kernel.netfilter.service-untranslated",
                format!(
                    "{} is service {service}'s address, but no netfilter rule of {} translated it to a backend, so the packet leaves by {} as if for the internet",
                    packet.dst,
                    hop_id(ns),
                    device
                ),
                "a DNAT to one of the service's ready endpoints (kube-proxy's KUBE-SERVICES rules)",
                self.file(ns, "iptables-save.txt"),
            )),
            (None, None) => None,
        };
        if let Some((id, message, expected, evidence)) = lost {
            self.findings.push(Finding {
                id: id.into(),
                severity: Severity::Fatal,
                hop: hop_id(ns),
                hop_index: hop.index(),
                message,
                evidence,
                expected: Some(expected.into()),
            });
        }
    }

    /// The packet leaves the cluster's namespaces by `device`.
    fn leave_cluster(&mut self, hop: NodeIndex, device: &str, packet: Packet, branch: Branch) {
        let outside = self.graph.add_node(Hop {
            id: packet.dst.to_string(),
            kind: HopKind::External,
            node: None,
            assumed: false,
            steps: Vec::new(),
            context: None,
        });
        let link = Link {
            kind: LinkKind::Outside,
            from_interface: device.to_string(),
            to_interface: None,
            packet: packet.to_string(),
        };
        self.graph.add_edge(hop, outside, link);
        let mut branch = branch;
        branch.hops.push(outside);
        self.finish(branch, Disposition::ExitsCluster);
    }

    /// Moves the packet over a link into another namespace.
    #[allow(clippy::too_many_arguments)]
    fn cross(
        &mut self,
        from: &NetnsId,
        hop: NodeIndex,
        device: &Device,
        kind: LinkKind,
        to: &NetnsId,
        interface: &str,
        packet: Packet,
        branch: Branch,
    ) {
        // Both ends of the link must be up and have carrier (a bridge port
        // that is down is disabled, and forwards nothing).
        if let Some(stop) = self.device_down(from, device) {
            return self.stop(hop, branch, stop);
        }
        // A bridge sends a frame out of a port only if it fits that port's MTU.
        let mut packet = packet;
        if kind == LinkKind::BridgePort
            && let Some(stop) = self.oversized_frame(hop, from, device, &mut packet)
        {
            return self.stop(hop, branch, stop);
        }
        self.arrive(hop, kind, &device.ifname, to, interface, packet, branch);
    }

    /// The packet arrives over a link on `interface` of `to`, if that end is
    /// up (the sending end is checked by the caller, where it is known).
    #[allow(clippy::too_many_arguments)]
    fn arrive(
        &mut self,
        hop: NodeIndex,
        kind: LinkKind,
        from_interface: &str,
        to: &NetnsId,
        interface: &str,
        packet: Packet,
        branch: Branch,
    ) {
        let receiver = self.topology.link(to, interface);
        if let Some(stop) = receiver.and_then(|link| self.device_down(to, link)) {
            return self.stop(hop, branch, stop);
        }
        let mut packet = packet;
        if matches!(kind, LinkKind::Veth | LinkKind::BridgePort)
            && let Some(receiver) = receiver
            && let Some(stop) = self.oversized_frame(hop, to, receiver, &mut packet)
        {
            return self.dropped_on_arrival(
                hop,
                from_interface,
                kind,
                to,
                interface,
                &packet,
                branch,
                stop,
            );
        }
        let link = Link {
            kind,
            from_interface: from_interface.to_string(),
            to_interface: Some(interface.to_string()),
            packet: packet.to_string(),
        };
        self.visit(
            to,
            packet,
            Arrival::Received(interface.to_string()),
            Some((hop, link)),
            branch,
        );
    }

    /// Whether a namespace holds an address (and so answers ARP for it).
    fn owns(&self, ns: &NetnsId, address: IpAddr) -> bool {
        self.topology
            .owners(address)
            .iter()
            .any(|(owner, _)| *owner == ns)
    }

    fn sysctls(&self, ns: &NetnsId) -> Option<&'s Sysctls> {
        self.snapshot.namespaces.get(ns)?.dump.sysctls.as_ref()
    }

    /// The path of a dump file, as evidence.
    fn file(&self, ns: &NetnsId, name: &str) -> String {
        match self.snapshot.namespaces.get(ns) {
            Some(entry) => entry.dir.join(name).display().to_string(),
            None => format!("{} (no dump)", hop_id(ns)),
        }
    }

    /// A stop for want of a dump file.
    fn missing(&self, ns: &NetnsId, what: &str, to_do: &str) -> Stop {
        Stop::unknown(
            "snapshot.missing",
            format!(
                "the snapshot lacks {what} for {}, needed to {to_do}",
                hop_id(ns)
            ),
            self.snapshot
                .namespaces
                .get(ns)
                .map_or_else(|| hop_id(ns), |e| e.dir.display().to_string()),
        )
    }

    /// Records a step; every step of an assumed hop is assumed.
    fn step(&mut self, hop: NodeIndex, step: Step) {
        let assumed = self.graph[hop].assumed;
        self.graph[hop].steps.push(HopStep { step, assumed });
    }

    /// The request is for a socket of this hop's namespace (a reply is not:
    /// the sender's socket is no listener), whether one listens or not.
    fn delivering(&mut self, hop: NodeIndex) {
        if let Some(context) = &mut self.graph[hop].context {
            context.delivered = true;
        }
    }

    fn stop(&mut self, hop: NodeIndex, branch: Branch, mut stop: Stop) {
        if branch.reply {
            stop.reason = format!("on the way back: {}", stop.reason);
        }
        self.step(
            hop,
            Step::Stopped {
                disposition: stop.disposition,
                reason: stop.reason.clone(),
            },
        );
        let severity = match stop.disposition {
            Disposition::InsufficientInfo => Severity::Warning,
            _ => Severity::Fatal,
        };
        self.findings.push(Finding {
            id: stop.id.to_string(),
            severity,
            hop: self.graph[hop].id.clone(),
            hop_index: hop.index(),
            message: stop.reason,
            evidence: stop.evidence,
            expected: None,
        });
        self.finish(branch, stop.disposition);
    }

    fn finish(&mut self, branch: Branch, disposition: Disposition) {
        self.paths.push(PathResult {
            disposition,
            probability: branch.probability,
            hops: branch.hops.iter().map(|h| h.index()).collect(),
            assumed: branch.hops.iter().any(|&h| self.graph[h].assumed),
        });
    }
}

/// Hop ids as the JSON contract names them: pods `NS/NAME`, nodes their name.
fn hop_id(ns: &NetnsId) -> String {
    match ns {
        NetnsId::Host { node } => node.clone(),
        NetnsId::Pod {
            namespace, name, ..
        } => format!("{namespace}/{name}"),
    }
}

fn hop_kind(ns: &NetnsId) -> HopKind {
    match ns {
        NetnsId::Pod { .. } => HopKind::Pod,
        NetnsId::Host { .. } => HopKind::Node,
    }
}

/// A packet's size in words: `a 1500-byte packet`, or for a tunnel's outer
/// packet what it carries and what the tunnel adds.
fn sized(packet: &Packet) -> String {
    let bytes = packet.size.map_or(SMALL_PACKET, |size| size.bytes);
    match &packet.tunnel {
        Some(tunnel) => {
            let kind = match tunnel.encapsulation {
                Encapsulation::Vxlan { .. } => "VXLAN",
                Encapsulation::Ipip => "IPIP",
            };
            format!(
                "the {bytes}-byte {kind} packet ({} bytes inside, {} of encapsulation)",
                bytes.saturating_sub(tunnel.encapsulation.overhead()),
                tunnel.encapsulation.overhead()
            )
        }
        None => format!("a {bytes}-byte packet"),
    }
}

fn mac_text(address: &LinkLayerAddress) -> String {
    match address {
        LinkLayerAddress::Mac(mac) => mac.to_string(),
        LinkLayerAddress::Other(text) => text.clone(),
    }
}

/// The rule (or chain policy) that decided a drop or reject: the last rule
/// that matched, or the policy that ended the walk.
fn deciding_rule(trace: &[NetfilterStep<'_>]) -> Decision {
    for step in trace.iter().rev() {
        match step {
            NetfilterStep::Rule {
                hook,
                table,
                chain,
                rule,
                matched: Tri::True,
                ..
            } => {
                return Decision {
                    description: format!(
                        "rule {} of chain {chain} (table {table}, {hook})",
                        rule.number
                    ),
                    table: table.to_string(),
                    chain: chain.to_string(),
                    line: Some(rule.line),
                    text: rule.text.to_string(),
                };
            }
            NetfilterStep::Policy {
                hook,
                table,
                chain,
                policy,
            } => {
                let policy = match policy {
                    IptablesPolicy::Accept => "ACCEPT",
                    IptablesPolicy::Drop => "DROP",
                };
                return Decision {
                    description: format!(
                        "the {policy} policy of chain {chain} (table {table}, {hook})"
                    ),
                    table: table.to_string(),
                    chain: chain.to_string(),
                    line: None,
                    text: format!(":{chain} {policy}"),
                };
            }
            _ => {}
        }
    }
    Decision {
        description: "no rule is recorded".into(),
        table: String::new(),
        chain: String::new(),
        line: None,
        text: String::new(),
    }
}

/// The rule or chain policy that gave a netfilter verdict.
struct Decision {
    /// For messages: `rule 3 of chain X (table filter, FORWARD)`.
    description: String,
    table: String,
    chain: String,
    /// The rule's line in iptables-save.txt; `None` for a chain's policy.
    line: Option<usize>,
    /// The rule as written, or `:CHAIN POLICY`.
    text: String,
}

/// The transport IPVS schedules a protocol by, if any.
fn transport(protocol: Protocol) -> Option<Transport> {
    match protocol {
        Protocol::Tcp => Some(Transport::Tcp),
        Protocol::Udp => Some(Transport::Udp),
        Protocol::Icmp => None,
    }
}

/// `ADDR:PORT`, or the address alone.
fn endpoint(address: Option<IpAddr>, port: Option<u16>) -> String {
    match (address, port) {
        (Some(address), Some(port)) => SocketAddr::new(address, port).to_string(),
        (Some(address), None) => address.to_string(),
        (None, _) => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(src: &str, dst: &str, bytes: u32, probe: bool) -> Packet {
        Packet {
            src: Some(src.parse().unwrap()),
            dst: dst.parse().unwrap(),
            protocol: Protocol::Tcp,
            sport: Some(EPHEMERAL_PORT),
            dport: Some(8080),
            reply: false,
            mark: 0,
            tunnel: None,
            size: Some(Size {
                bytes,
                df: true,
                probe,
            }),
        }
    }

    fn ipip(inner: Packet) -> Packet {
        let mut outer = packet("172.18.0.11", "172.18.0.12", 0, true);
        outer.size = inner.size.map(|size| Size {
            bytes: size.bytes + 20,
            ..size
        });
        outer.tunnel = Some(Box::new(Tunnelled {
            encapsulation: Encapsulation::Ipip,
            device: "tunl0".into(),
            inner,
        }));
        outer
    }

    #[test]
    fn path_mtu_discovery_shrinks_a_tunnelled_packet_inside_and_out() {
        let mut outer = ipip(packet("10.244.1.2", "10.244.2.3", 1480, true));
        outer.shrink_to(1400);
        assert_eq!(outer.size.map(|s| s.bytes), Some(1400));
        let inner = &outer.tunnel.as_ref().unwrap().inner;
        assert_eq!(inner.size.map(|s| s.bytes), Some(1380));
    }

    #[test]
    fn a_tunnels_packet_is_told_with_what_the_tunnel_adds() {
        let outer = ipip(packet("10.244.1.2", "10.244.2.3", 1480, false));
        assert_eq!(
            sized(&outer),
            "the 1500-byte IPIP packet (1480 bytes inside, 20 of encapsulation)"
        );
        assert_eq!(
            sized(&packet("10.244.1.2", "10.244.2.3", 1450, false)),
            "a 1450-byte packet"
        );
        let vxlan = Encapsulation::Vxlan {
            vni: 1,
            inner_mac: Some("02:00:00:00:00:01".parse().unwrap()),
        };
        assert_eq!(vxlan.overhead(), 50);
    }

    #[test]
    fn packs_and_netfilter_see_a_given_size_but_a_small_packet_beside_a_probe() {
        let given = packet("10.244.1.2", "10.244.2.3", 1450, false);
        assert_eq!(given.pack_packet().size, 1450);
        assert_eq!(given.netfilter_packet(given.src.unwrap()).length, 1450);
        let probe = packet("10.244.1.2", "10.244.2.3", 1450, true);
        assert_eq!(probe.pack_packet().size, SMALL_PACKET);
        assert_eq!(probe.netfilter_packet(probe.src.unwrap()).length, 64);
    }

    #[test]
    fn an_ipip_packet_is_protocol_4_to_netfilter_and_says_so() {
        let outer = ipip(packet("10.244.1.2", "10.244.2.3", 100, false));
        assert_eq!(outer.netfilter_packet(outer.src.unwrap()).proto, IPIP);
        assert_eq!(
            outer.to_string(),
            "172.18.0.11 -> 172.18.0.12 ipip (120 bytes, DF) [10.244.1.2 -> 10.244.2.3:8080 tcp (100 bytes, DF)]"
        );
        let probed = ipip(packet("10.244.1.2", "10.244.2.3", 1480, true));
        assert_eq!(
            probed.to_string(),
            "172.18.0.11 -> 172.18.0.12 ipip [10.244.1.2 -> 10.244.2.3:8080 tcp]",
            "a probe's size is not the packet's"
        );
    }
}
