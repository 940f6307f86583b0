//! What the user asks about: `--from` and `--to` as written, and what they
//! resolve to in a snapshot.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::snapshot::cluster::{
    IpOwner, Pod, PortRef, Protocol as PortProtocol, Service, ServicePort,
};
use crate::snapshot::{NetnsId, Snapshot};

/// A source or destination as the user writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `NS/NAME[:PORT]`
    Pod {
        namespace: String,
        name: String,
        port: Option<u16>,
    },
    /// `node/NAME[:PORT]`
    Node { name: String, port: Option<u16> },
    /// `svc/NS/NAME[:PORT]`, the port by number or by its name
    Service {
        namespace: String,
        name: String,
        port: Option<PortRef>,
    },
    /// `IP` or `IP:PORT` (`[IPv6]:PORT`)
    Ip { address: IpAddr, port: Option<u16> },
}

/// Why `--from`/`--to` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "{0:?} is not a pod (NS/NAME), a node (node/NAME), a service (svc/NS/NAME[:PORT]) or an address (IP[:PORT])"
    )]
    Malformed(String),
    #[error("{0:?}: {1} is not a port number (1-65535)")]
    BadPort(String, String),
    #[error("no pod {0}/{1} in the snapshot{2}")]
    UnknownPod(String, String, Candidates),
    #[error("no node {0} in the snapshot{1}")]
    UnknownNode(String, Candidates),
    #[error("no service {0}/{1} in the snapshot{2}")]
    UnknownService(String, String, Candidates),
    #[error(
        "{0:?} cannot be a source: a service sends nothing, its backends do (give one of its pods, NS/NAME)"
    )]
    ServiceSource(String),
    #[error("pod {0}/{1} has no IP (status.podIPs is empty)")]
    PodWithoutIp(String, String),
    #[error("pod {0}/{1} is not scheduled on a node")]
    PodNotScheduled(String, String),
    #[error("node {0} has no InternalIP or ExternalIP address")]
    NodeWithoutIp(String),
    #[error("service {0}/{1} has no cluster IP (headless or ExternalName)")]
    ServiceWithoutIp(String, String),
    #[error(
        "{0} is outside the cluster, and no node's dump shows where its packets would arrive: name the node with --via node/NAME"
    )]
    ExternalSource(IpAddr),
    #[error("--via is for a source outside the cluster; {0} is the cluster's own")]
    ViaForInternalSource(String),
    #[error(
        "node {0}'s dump does not show its address {1} on any interface: where packets from outside arrive cannot be told"
    )]
    NoArrivalInterface(String, IpAddr),
    #[error("the port is given twice ({0} and {1})")]
    ConflictingPorts(u16, u16),
    #[error("{0} needs a port: give --port N (or IP:PORT, svc/NS/NAME:PORT)")]
    PortRequired(Protocol),
    #[error("service {0}/{1} has no port {2} (its ports: {3}{4})")]
    UnknownServicePort(String, String, PortRef, String, TargetPortNote),
    #[error("{0} has no ports: drop the port (--port, or :PORT of --to)")]
    PortWithoutPorts(Protocol),
    #[error("service {0}/{1} has no {3} port {2} (its port {2} is {4})")]
    WrongServicePortProtocol(String, String, u16, Protocol, String),
    #[error("service {0}/{1} has no {2} port (its ports: {3})")]
    NoServicePortOfProtocol(String, String, Protocol, String),
}

/// What a snapshot has instead of a name it lacks: the closest of its
/// names by edit distance, else a few of them, so that a typo is one
/// command away from fixed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Candidates {
    /// The names closest to the one asked for, if any is close.
    pub closest: Vec<String>,
    /// Otherwise, the first names the snapshot has, sorted.
    pub listed: Vec<String>,
    /// How many more it has than `listed` shows.
    pub more: usize,
}

/// How many names an error lists at most.
const LISTED: usize = 8;

impl Candidates {
    /// `names` as candidates for `wanted`: the closest, if at most a third
    /// of its length away (at least one edit), else a few of them.
    pub fn new<I: IntoIterator<Item = String>>(wanted: &str, names: I) -> Candidates {
        let mut names: Vec<String> = names.into_iter().collect();
        names.sort();
        names.dedup();
        let within = 2 * (wanted.chars().count() / 3).max(1);
        let distances: Vec<usize> = names.iter().map(|n| edit_distance(wanted, n)).collect();
        if let Some(&nearest) = distances.iter().filter(|&&d| d <= within).min() {
            let closest = names
                .iter()
                .zip(&distances)
                .filter(|(_, d)| **d == nearest)
                .map(|(name, _)| name.clone())
                .take(3)
                .collect();
            return Candidates {
                closest,
                ..Candidates::default()
            };
        }
        let more = names.len().saturating_sub(LISTED);
        names.truncate(LISTED);
        Candidates {
            closest: Vec::new(),
            listed: names,
            more,
        }
    }
}

/// `; did you mean a?`, `; it has: a, b (and 3 more)`, or `; it has none`.
impl fmt::Display for Candidates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.closest.is_empty() {
            return write!(f, "; did you mean {}?", self.closest.join(" or "));
        }
        if self.listed.is_empty() {
            return f.write_str("; it has none");
        }
        write!(f, "; it has: {}", self.listed.join(", "))?;
        if self.more > 0 {
            write!(f, " (and {} more)", self.more)?;
        }
        Ok(())
    }
}

/// The edit distance between two names, in half edits: inserting,
/// deleting or replacing a character is 2, replacing one by a character
/// that looks like it (`O` and `0`, `l` and `1`) or by itself in the other
/// case is 1, so that `web-O` is closer to `web-0` than to `web-1`.
fn edit_distance(a: &str, b: &str) -> usize {
    let replace = |x: char, y: char| {
        let look_alike = |c: char| match c.to_ascii_lowercase() {
            'o' => '0',
            'l' | 'i' => '1',
            c => c,
        };
        if x == y {
            0
        } else if look_alike(x) == look_alike(y) {
            1
        } else {
            2
        }
    };
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).map(|j| 2 * j).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = 2 * (i + 1);
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 2).min(row[j] + 2).min(diagonal + replace(ca, cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Where a port the Service lacks is one of its target ports: the port a
/// pod listens on, not the one the Service takes connections on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetPortNote(Option<(u16, u16)>);

impl TargetPortNote {
    /// Whether `wanted` is the number of one of `service`'s target ports.
    fn new(service: &Service, wanted: &PortRef) -> TargetPortNote {
        TargetPortNote(service.ports.iter().find_map(|p| match wanted {
            PortRef::Number(number) if p.target_port == *wanted => Some((*number, p.port)),
            _ => None,
        }))
    }
}

impl fmt::Display for TargetPortNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((target, port)) => write!(
                f,
                "; {target} is the targetPort of its port {port}, which takes the connections"
            ),
            None => Ok(()),
        }
    }
}

impl FromStr for Endpoint {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Endpoint, TargetError> {
        let malformed = || TargetError::Malformed(text.to_string());
        if let Some(rest) = text.strip_prefix("node/") {
            let (name, port) = split_port(text, rest)?;
            return match name {
                "" => Err(malformed()),
                name if name.contains('/') => Err(malformed()),
                name => Ok(Endpoint::Node {
                    name: name.to_string(),
                    port,
                }),
            };
        }
        if let Some(rest) = text.strip_prefix("svc/") {
            // A Service's port may be given by its name (`svc/NS/NAME:http`).
            let (path, port) = match rest.rsplit_once(':') {
                Some((path, name))
                    if name.starts_with(|c: char| c.is_ascii_alphabetic())
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') =>
                {
                    (path, Some(PortRef::Name(name.to_string())))
                }
                _ => {
                    let (path, port) = split_port(text, rest)?;
                    (path, port.map(PortRef::Number))
                }
            };
            return match path.split_once('/') {
                Some((namespace, name))
                    if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
                {
                    Ok(Endpoint::Service {
                        namespace: namespace.into(),
                        name: name.into(),
                        port,
                    })
                }
                _ => Err(malformed()),
            };
        }
        if let Ok(address) = text.parse::<IpAddr>() {
            return Ok(Endpoint::Ip {
                address,
                port: None,
            });
        }
        if let Ok(socket) = text.parse::<std::net::SocketAddr>() {
            return Ok(Endpoint::Ip {
                address: socket.ip(),
                port: Some(socket.port()),
            });
        }
        let (path, port) = split_port(text, text)?;
        match path.split_once('/') {
            Some((namespace, name))
                if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Ok(Endpoint::Pod {
                    namespace: namespace.into(),
                    name: name.into(),
                    port,
                })
            }
            _ => Err(malformed()),
        }
    }
}

/// `NAME:PORT` -> (`NAME`, port).
fn split_port<'a>(whole: &str, text: &'a str) -> Result<(&'a str, Option<u16>), TargetError> {
    match text.rsplit_once(':') {
        None => Ok((text, None)),
        Some((path, port)) => match port.parse::<u16>() {
            Ok(number) if number > 0 => Ok((path, Some(number))),
            _ => Err(TargetError::BadPort(whole.to_string(), port.to_string())),
        },
    }
}

/// `:PORT`, or nothing.
fn port_suffix(port: Option<u16>) -> String {
    port.map(|p| format!(":{p}")).unwrap_or_default()
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Pod {
                namespace,
                name,
                port,
            } => write!(f, "{namespace}/{name}{}", port_suffix(*port)),
            Endpoint::Node { name, port } => write!(f, "node/{name}{}", port_suffix(*port)),
            Endpoint::Service {
                namespace,
                name,
                port: None,
            } => write!(f, "svc/{namespace}/{name}"),
            Endpoint::Service {
                namespace,
                name,
                port: Some(port),
            } => write!(f, "svc/{namespace}/{name}:{port}"),
            Endpoint::Ip {
                address,
                port: None,
            } => write!(f, "{address}"),
            Endpoint::Ip {
                address,
                port: Some(port),
            } => write!(f, "{}", std::net::SocketAddr::new(*address, *port)),
        }
    }
}

impl Endpoint {
    /// The port it names, by number or (a Service's) by name.
    pub fn port(&self) -> Option<PortRef> {
        match self {
            Endpoint::Pod { port, .. }
            | Endpoint::Node { port, .. }
            | Endpoint::Ip { port, .. } => port.map(PortRef::Number),
            Endpoint::Service { port, .. } => port.clone(),
        }
    }
}

/// The protocol of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
    /// An echo request.
    Icmp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
            Protocol::Icmp => "icmp",
        }
    }

    /// Whether its packets carry ports.
    pub fn has_ports(self) -> bool {
        self != Protocol::Icmp
    }

    /// The protocol of a Kubernetes port (a Service's, an EndpointSlice's, a
    /// container's, a NetworkPolicy's) that carries this flow; ICMP has none.
    pub fn port_protocol(self) -> Option<PortProtocol> {
        match self {
            Protocol::Tcp => Some(PortProtocol::Tcp),
            Protocol::Udp => Some(PortProtocol::Udp),
            Protocol::Sctp => Some(PortProtocol::Sctp),
            Protocol::Icmp => None,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A question: can `from` reach `to` on `port`/`protocol`?
#[derive(Debug, Clone)]
pub struct Request {
    pub from: Endpoint,
    pub to: Endpoint,
    pub port: Option<u16>,
    pub protocol: Protocol,
    /// The size of the flow's packets (`--size`); `None` walks a small one
    /// and only warns where full-size packets would not fit.
    pub size: Option<PacketSize>,
    /// For a source outside the cluster, the node its packet arrives at
    /// (`--via node/NAME`).
    pub via: Option<String>,
}

/// How big the packets of a flow are, IP header included, sent with DF
/// set (as `ping -M do` sends them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketSize {
    Bytes(u32),
    /// As large as the source's interface allows: the MTU of the device the
    /// first packet leaves by.
    InterfaceMtu,
}

/// The smallest IPv4 packet every link must carry (RFC 791) and the
/// largest the IP length field can say.
const PACKET_SIZES: std::ops::RangeInclusive<u32> = 68..=65535;

/// Why `--size` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a packet size: give BYTES (68-65535, the IP packet with its header) or mtu")]
pub struct PacketSizeError(String);

impl FromStr for PacketSize {
    type Err = PacketSizeError;

    fn from_str(text: &str) -> Result<PacketSize, PacketSizeError> {
        if text == "mtu" {
            return Ok(PacketSize::InterfaceMtu);
        }
        match text.parse::<u32>() {
            Ok(bytes) if PACKET_SIZES.contains(&bytes) => Ok(PacketSize::Bytes(bytes)),
            _ => Err(PacketSizeError(text.to_string())),
        }
    }
}

impl fmt::Display for PacketSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketSize::Bytes(bytes) => write!(f, "{bytes} bytes"),
            PacketSize::InterfaceMtu => f.write_str("the source interface's MTU"),
        }
    }
}

/// Where the walk starts and what it is for.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub start: Start,
    /// The source address when the source names one (a pod's IP, a client
    /// outside the cluster).
    pub src: Option<IpAddr>,
    pub dst: IpAddr,
    pub dport: Option<u16>,
    pub protocol: Protocol,
    pub size: Option<PacketSize>,
    pub summary: String,
}

/// Where the walk starts.
#[derive(Debug, Clone)]
pub(crate) enum Start {
    /// The packet is generated in this namespace.
    Local(NetnsId),
    /// From a client outside the cluster: it arrives at each of these nodes
    /// in turn (the host namespace, and the interface holding the node's
    /// address), each the same share of the flows.
    Outside(Vec<(NetnsId, String)>),
}

pub(crate) fn resolve(snapshot: &Snapshot, request: &Request) -> Result<Resolved, TargetError> {
    if !request.protocol.has_ports() && (request.port.is_some() || request.to.port().is_some()) {
        return Err(TargetError::PortWithoutPorts(request.protocol));
    }
    let (dst, target_port) = resolve_destination(snapshot, &request.to, request.protocol)?;
    let outside = match &request.from {
        Endpoint::Ip { address, .. } if is_outside(snapshot, *address) => Some(*address),
        _ => None,
    };
    let (start, src) = match (outside, &request.via) {
        (Some(address), Some(via)) => {
            (Start::Outside(vec![arrival(snapshot, via)?]), Some(address))
        }
        (Some(address), None) => (
            Start::Outside(entries(snapshot, address, dst)?),
            Some(address),
        ),
        (None, Some(_)) => return Err(TargetError::ViaForInternalSource(request.from.to_string())),
        (None, None) => {
            let (source, src) = resolve_source(snapshot, &request.from)?;
            (Start::Local(source), src)
        }
    };
    let dport = match (request.port, target_port) {
        (Some(a), Some(b)) if a != b => return Err(TargetError::ConflictingPorts(a, b)),
        (Some(port), _) | (None, Some(port)) => Some(port),
        (None, None) if !request.protocol.has_ports() => None,
        (None, None) => match &request.to {
            Endpoint::Pod {
                namespace, name, ..
            } => single_declared_port(snapshot, namespace, name, request.protocol)
                .ok_or(TargetError::PortRequired(request.protocol))?,
            _ => return Err(TargetError::PortRequired(request.protocol)),
        }
        .into(),
    };
    let dport = dport.filter(|_| request.protocol.has_ports());
    let target = match dport {
        Some(port) => std::net::SocketAddr::new(dst, port).to_string(),
        None => dst.to_string(),
    };
    let size = match request.size {
        Some(size) => format!(", {size}, DF"),
        None => String::new(),
    };
    let via = match (&start, &request.via) {
        (_, Some(node)) => format!(" (from outside, arriving at node/{node})"),
        (Start::Outside(entries), None) => {
            let nodes: Vec<String> = entries.iter().map(|(ns, _)| ns.to_string()).collect();
            format!(" (from outside, arriving at {})", nodes.join(", "))
        }
        (Start::Local(_), None) => String::new(),
    };
    let summary = format!(
        "{}{via} -> {} ({target} {}{size})",
        request.from, request.to, request.protocol
    );
    Ok(Resolved {
        start,
        src,
        dst,
        dport,
        protocol: request.protocol,
        size: request.size,
        summary,
    })
}

fn pod<'s>(snapshot: &'s Snapshot, namespace: &str, name: &str) -> Result<&'s Pod, TargetError> {
    snapshot.cluster.pod(namespace, name).ok_or_else(|| {
        let names = snapshot
            .cluster
            .pods()
            .map(|pod| format!("{}/{}", pod.meta.namespace, pod.meta.name));
        let candidates = Candidates::new(&format!("{namespace}/{name}"), names);
        TargetError::UnknownPod(namespace.into(), name.into(), candidates)
    })
}

fn node<'s>(
    snapshot: &'s Snapshot,
    name: &str,
) -> Result<&'s crate::snapshot::cluster::Node, TargetError> {
    snapshot.cluster.node(name).ok_or_else(|| {
        let names = snapshot.cluster.nodes().map(|node| node.meta.name.clone());
        TargetError::UnknownNode(name.into(), Candidates::new(name, names))
    })
}

fn service<'s>(
    snapshot: &'s Snapshot,
    namespace: &str,
    name: &str,
) -> Result<&'s Service, TargetError> {
    snapshot.cluster.service(namespace, name).ok_or_else(|| {
        let names = snapshot
            .cluster
            .services()
            .map(|service| format!("{}/{}", service.meta.namespace, service.meta.name));
        let candidates = Candidates::new(&format!("{namespace}/{name}"), names);
        TargetError::UnknownService(namespace.into(), name.into(), candidates)
    })
}

/// What a `--from`/`--to` that is none of the forms may have meant: a bare
/// name is compared with the snapshot's nodes, pods and services, and the
/// closest named in its form (`node1` -> `node/node-1`); `None` when none
/// is close.
pub fn suggest_endpoint(snapshot: &Snapshot, text: &str) -> Option<Candidates> {
    let cluster = &snapshot.cluster;
    // (the name as written bare, the endpoint that names it)
    let mut names: Vec<(String, String)> = Vec::new();
    for node in cluster.nodes() {
        names.push((node.meta.name.clone(), format!("node/{}", node.meta.name)));
    }
    for pod in cluster.pods() {
        let full = format!("{}/{}", pod.meta.namespace, pod.meta.name);
        names.push((pod.meta.name.clone(), full.clone()));
        names.push((full.clone(), full));
    }
    for service in cluster.services() {
        let full = format!("{}/{}", service.meta.namespace, service.meta.name);
        names.push((service.meta.name.clone(), format!("svc/{full}")));
        names.push((full.clone(), format!("svc/{full}")));
    }
    let close = Candidates::new(text, names.iter().map(|(bare, _)| bare.clone()));
    let mut closest: Vec<String> = Vec::new();
    for bare in &close.closest {
        for (name, endpoint) in &names {
            if name == bare && !closest.contains(endpoint) {
                closest.push(endpoint.clone());
            }
        }
    }
    (!closest.is_empty()).then(|| Candidates {
        closest,
        ..Candidates::default()
    })
}

/// Where a client outside the cluster that names no node (`--via`) arrives:
/// at the node whose address it sends to, else (a load balancer's or an
/// external IP) at every node whose dump shows where it would arrive, in
/// turn.
fn entries(
    snapshot: &Snapshot,
    client: IpAddr,
    dst: IpAddr,
) -> Result<Vec<(NetnsId, String)>, TargetError> {
    let addressed = snapshot
        .cluster
        .by_ip(dst)
        .iter()
        .find_map(|owner| match owner {
            IpOwner::Node { name } => Some(name.clone()),
            _ => None,
        });
    if let Some(node) = addressed {
        return Ok(vec![arrival(snapshot, &node)?]);
    }
    let entries: Vec<(NetnsId, String)> = snapshot
        .cluster
        .nodes()
        .filter_map(|node| arrival(snapshot, &node.meta.name).ok())
        .collect();
    match entries.is_empty() {
        true => Err(TargetError::ExternalSource(client)),
        false => Ok(entries),
    }
}

/// An address no pod (of the pod network), node or service of the cluster holds.
fn is_outside(snapshot: &Snapshot, address: IpAddr) -> bool {
    snapshot.cluster.by_ip(address).is_empty()
}

/// Where packets from outside arrive at node `via`: its host namespace, on
/// the interface holding one of the node's addresses (InternalIP first).
fn arrival(snapshot: &Snapshot, via: &str) -> Result<(NetnsId, String), TargetError> {
    let node = node(snapshot, via)?;
    let addresses: Vec<IpAddr> = node.addresses.iter().filter_map(|a| a.ip()).collect();
    let first = *addresses
        .first()
        .ok_or_else(|| TargetError::NodeWithoutIp(via.to_string()))?;
    let id = NetnsId::Host {
        node: via.to_string(),
    };
    let interfaces = snapshot
        .namespaces
        .get(&id)
        .and_then(|entry| entry.dump.addrs.as_deref())
        .unwrap_or_default();
    let interface = addresses
        .iter()
        .find_map(|address| {
            interfaces
                .iter()
                .find(|iface| iface.addresses.iter().any(|a| a.local == *address))
        })
        .map(|iface| iface.ifname.clone())
        .ok_or(TargetError::NoArrivalInterface(via.to_string(), first))?;
    Ok((id, interface))
}

fn resolve_source(
    snapshot: &Snapshot,
    from: &Endpoint,
) -> Result<(NetnsId, Option<IpAddr>), TargetError> {
    match from {
        Endpoint::Pod {
            namespace, name, ..
        } => pod_namespace(snapshot, namespace, name),
        Endpoint::Node { name, .. } => {
            node(snapshot, name)?;
            Ok((NetnsId::Host { node: name.clone() }, None))
        }
        Endpoint::Service { .. } => Err(TargetError::ServiceSource(from.to_string())),
        Endpoint::Ip { address, .. } => {
            for owner in snapshot.cluster.by_ip(*address) {
                match owner {
                    IpOwner::Pod {
                        namespace,
                        name,
                        host_network: false,
                    } => {
                        let (id, _) = pod_namespace(snapshot, namespace, name)?;
                        return Ok((id, Some(*address)));
                    }
                    IpOwner::Node { name } => {
                        return Ok((NetnsId::Host { node: name.clone() }, Some(*address)));
                    }
                    _ => {}
                }
            }
            Err(TargetError::ExternalSource(*address))
        }
    }
}

/// A pod's network namespace (its node's, for a hostNetwork pod) and its IP.
fn pod_namespace(
    snapshot: &Snapshot,
    namespace: &str,
    name: &str,
) -> Result<(NetnsId, Option<IpAddr>), TargetError> {
    let pod = pod(snapshot, namespace, name)?;
    let node = pod
        .node_name
        .clone()
        .ok_or_else(|| TargetError::PodNotScheduled(namespace.into(), name.into()))?;
    let ip = pod.ips.first().copied();
    if pod.host_network {
        return Ok((NetnsId::Host { node }, ip));
    }
    Ok((
        NetnsId::Pod {
            node,
            namespace: namespace.into(),
            name: name.into(),
        },
        ip,
    ))
}

/// The destination's address, and its port when the endpoint names one: a
/// Service's port is one of the flow's protocol (a Service may have port 53
/// for TCP and for UDP, and an SCTP-only port takes no TCP flow).
fn resolve_destination(
    snapshot: &Snapshot,
    to: &Endpoint,
    protocol: Protocol,
) -> Result<(IpAddr, Option<u16>), TargetError> {
    match to {
        Endpoint::Pod {
            namespace,
            name,
            port,
        } => {
            let pod = pod(snapshot, namespace, name)?;
            let ip = pod
                .ips
                .first()
                .ok_or_else(|| TargetError::PodWithoutIp(namespace.clone(), name.clone()))?;
            Ok((*ip, *port))
        }
        Endpoint::Node { name, port } => {
            let node = node(snapshot, name)?;
            let ip = node
                .addresses
                .iter()
                .find_map(|a| a.ip())
                .ok_or_else(|| TargetError::NodeWithoutIp(name.clone()))?;
            Ok((ip, *port))
        }
        Endpoint::Service {
            namespace,
            name,
            port,
        } => {
            let service = service(snapshot, namespace, name)?;
            let ip = service
                .cluster_ips
                .first()
                .ok_or_else(|| TargetError::ServiceWithoutIp(namespace.clone(), name.clone()))?;
            Ok((*ip, service_port(service, port.as_ref(), protocol)?))
        }
        // A Service's ClusterIP without a port: its ports, as `svc/` has them.
        Endpoint::Ip {
            address,
            port: None,
        } => {
            let owner = snapshot
                .cluster
                .by_ip(*address)
                .iter()
                .find_map(|owner| match owner {
                    IpOwner::ServiceClusterIp { namespace, name } => {
                        snapshot.cluster.service(namespace, name)
                    }
                    _ => None,
                });
            match owner {
                Some(service) => Ok((*address, service_port(service, None, protocol)?)),
                None => Ok((*address, None)),
            }
        }
        Endpoint::Ip { address, port } => Ok((*address, *port)),
    }
}

/// The port of `service` a flow of `protocol` goes to: `port` (a number or
/// a name) if it has it, else its only port of the protocol, else none
/// (ICMP has no ports: any of the Service's will do).
fn service_port(
    service: &Service,
    port: Option<&PortRef>,
    protocol: Protocol,
) -> Result<Option<u16>, TargetError> {
    let (namespace, name) = (&service.meta.namespace, &service.meta.name);
    let carries = |p: &&ServicePort| {
        protocol
            .port_protocol()
            .is_none_or(|wanted| p.protocol == wanted)
    };
    let Some(port) = port else {
        let mut ports = service.ports.iter().filter(carries);
        return match (ports.next(), ports.next()) {
            (Some(only), None) => Ok(Some(only.port)),
            (None, _) if !service.ports.is_empty() => {
                let theirs: Vec<String> = service
                    .ports
                    .iter()
                    .map(|p| format!("{}/{}", p.port, p.protocol))
                    .collect();
                Err(TargetError::NoServicePortOfProtocol(
                    namespace.clone(),
                    name.clone(),
                    protocol,
                    theirs.join(", "),
                ))
            }
            _ => Ok(None),
        };
    };
    let named: Vec<&ServicePort> = service
        .ports
        .iter()
        .filter(|p| match port {
            PortRef::Number(number) => p.port == *number,
            PortRef::Name(wanted) => p.name.as_deref() == Some(wanted.as_str()),
        })
        .collect();
    let Some(first) = named.first() else {
        let theirs: Vec<String> = service
            .ports
            .iter()
            .map(|p| match &p.name {
                Some(port_name) => format!("{}/{} ({port_name})", p.port, p.protocol),
                None => format!("{}/{}", p.port, p.protocol),
            })
            .collect();
        return Err(TargetError::UnknownServicePort(
            namespace.clone(),
            name.clone(),
            port.clone(),
            theirs.join(", "),
            TargetPortNote::new(service, port),
        ));
    };
    if !named.iter().any(carries) {
        let theirs: Vec<&str> = named.iter().map(|p| p.protocol.as_str()).collect();
        return Err(TargetError::WrongServicePortProtocol(
            namespace.clone(),
            name.clone(),
            first.port,
            protocol,
            theirs.join(" and "),
        ));
    }
    Ok(Some(first.port))
}

/// The one port of `protocol` a pod's containers declare, if exactly one.
fn single_declared_port(
    snapshot: &Snapshot,
    namespace: &str,
    name: &str,
    protocol: Protocol,
) -> Option<u16> {
    let pod = snapshot.cluster.pod(namespace, name)?;
    let wanted = protocol.port_protocol()?;
    let mut ports = pod.containers.iter().flat_map(|c| {
        c.ports
            .iter()
            .filter(move |p| p.protocol == wanted)
            .map(|p| p.container_port)
    });
    let first = ports.next()?;
    ports.next().is_none().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_in_every_documented_form() {
        let cases = [
            (
                "default/web-0",
                Endpoint::Pod {
                    namespace: "default".into(),
                    name: "web-0".into(),
                    port: None,
                },
            ),
            (
                "node/node-1",
                Endpoint::Node {
                    name: "node-1".into(),
                    port: None,
                },
            ),
            (
                "node/node-1:30080",
                Endpoint::Node {
                    name: "node-1".into(),
                    port: Some(30080),
                },
            ),
            (
                "default/web-0:8080",
                Endpoint::Pod {
                    namespace: "default".into(),
                    name: "web-0".into(),
                    port: Some(8080),
                },
            ),
            (
                "svc/default/web",
                Endpoint::Service {
                    namespace: "default".into(),
                    name: "web".into(),
                    port: None,
                },
            ),
            (
                "svc/default/web:80",
                Endpoint::Service {
                    namespace: "default".into(),
                    name: "web".into(),
                    port: Some(PortRef::Number(80)),
                },
            ),
            (
                "svc/default/web:http",
                Endpoint::Service {
                    namespace: "default".into(),
                    name: "web".into(),
                    port: Some(PortRef::Name("http".into())),
                },
            ),
            (
                "10.0.0.1",
                Endpoint::Ip {
                    address: "10.0.0.1".parse().unwrap(),
                    port: None,
                },
            ),
            (
                "10.0.0.1:53",
                Endpoint::Ip {
                    address: "10.0.0.1".parse().unwrap(),
                    port: Some(53),
                },
            ),
            (
                "[fd00::1]:443",
                Endpoint::Ip {
                    address: "fd00::1".parse().unwrap(),
                    port: Some(443),
                },
            ),
            (
                "fd00::1",
                Endpoint::Ip {
                    address: "fd00::1".parse().unwrap(),
                    port: None,
                },
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<Endpoint>(), Ok(expected.clone()), "{text}");
            assert_eq!(expected.to_string(), text);
        }
    }

    #[test]
    fn packet_sizes_are_bytes_within_ip_limits_or_mtu() {
        assert_eq!("1500".parse(), Ok(PacketSize::Bytes(1500)));
        assert_eq!("68".parse(), Ok(PacketSize::Bytes(68)));
        assert_eq!("mtu".parse(), Ok(PacketSize::InterfaceMtu));
        for bad in ["67", "65536", "-1", "1500b", "MTU", ""] {
            let error = bad.parse::<PacketSize>().unwrap_err().to_string();
            assert!(
                error.contains("68-65535") && error.contains("mtu"),
                "{bad}: {error}"
            );
        }
    }

    /// A node, a pod declaring 8080/TCP and 38412/SCTP, DNS on 53 over TCP
    /// and UDP, and an SCTP-only Service (an AMF's NGAP port).
    const CLUSTER: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status:
    addresses: [{type: InternalIP, address: 172.18.0.11}]
- apiVersion: v1
  kind: Pod
  metadata: {name: amf-0, namespace: core}
  spec:
    nodeName: n1
    containers:
    - name: amf
      ports:
      - {containerPort: 8080}
      - {containerPort: 38412, protocol: SCTP}
  status:
    phase: Running
    podIP: 10.0.0.2
    podIPs: [{ip: 10.0.0.2}]
- apiVersion: v1
  kind: Service
  metadata: {name: dns, namespace: core}
  spec:
    clusterIP: 10.96.0.10
    clusterIPs: [10.96.0.10]
    ports:
    - {name: dns-tcp, port: 53, protocol: TCP}
    - {name: dns, port: 53, protocol: UDP}
- apiVersion: v1
  kind: Service
  metadata: {name: ngap, namespace: core}
  spec:
    clusterIP: 10.96.0.50
    clusterIPs: [10.96.0.50]
    ports:
    - {port: 38412, protocol: SCTP}
"#;

    /// Resolves `--to` from node n1 over `protocol` in [`CLUSTER`]: the
    /// destination port, or the error.
    fn port_to(to: &str, protocol: Protocol) -> Result<Option<u16>, TargetError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cluster")).unwrap();
        std::fs::write(dir.path().join("cluster/objects.yaml"), CLUSTER).unwrap();
        let (snapshot, problems) = Snapshot::load(dir.path()).unwrap();
        assert!(problems.is_empty(), "{problems:#?}");
        let request = Request {
            from: "node/n1".parse().unwrap(),
            to: to.parse().unwrap(),
            port: None,
            protocol,
            size: None,
            via: None,
        };
        resolve(&snapshot, &request).map(|resolved| resolved.dport)
    }

    #[test]
    fn a_service_port_is_one_of_the_flows_protocol() {
        assert_eq!(port_to("svc/core/ngap", Protocol::Sctp), Ok(Some(38412)));
        assert_eq!(
            port_to("svc/core/ngap:38412", Protocol::Sctp),
            Ok(Some(38412))
        );
        // A TCP flow never takes the SCTP-only port.
        assert_eq!(
            port_to("svc/core/ngap:38412", Protocol::Tcp)
                .unwrap_err()
                .to_string(),
            "service core/ngap has no tcp port 38412 (its port 38412 is SCTP)"
        );
        assert_eq!(
            port_to("svc/core/ngap", Protocol::Tcp)
                .unwrap_err()
                .to_string(),
            "service core/ngap has no tcp port (its ports: 38412/SCTP)"
        );
        // Port 53 for TCP and for UDP: the flow's protocol picks one.
        assert_eq!(port_to("svc/core/dns", Protocol::Udp), Ok(Some(53)));
        assert_eq!(port_to("svc/core/dns", Protocol::Tcp), Ok(Some(53)));
        assert!(matches!(
            port_to("svc/core/dns:53", Protocol::Sctp),
            Err(TargetError::WrongServicePortProtocol(.., Protocol::Sctp, ref theirs)) if theirs == "TCP and UDP"
        ));
        assert!(matches!(
            port_to("svc/core/dns", Protocol::Sctp),
            Err(TargetError::NoServicePortOfProtocol(..))
        ));
        // ICMP has no ports: any Service will do.
        assert_eq!(port_to("svc/core/ngap", Protocol::Icmp), Ok(None));
        assert_eq!(port_to("svc/core/dns", Protocol::Icmp), Ok(None));
    }

    #[test]
    fn a_service_port_may_be_named_and_a_missing_one_lists_those_it_has() {
        assert_eq!(port_to("svc/core/dns:dns", Protocol::Udp), Ok(Some(53)));
        assert_eq!(port_to("svc/core/dns:dns-tcp", Protocol::Tcp), Ok(Some(53)));
        assert_eq!(
            port_to("svc/core/dns:nope", Protocol::Udp)
                .unwrap_err()
                .to_string(),
            "service core/dns has no port nope (its ports: 53/TCP (dns-tcp), 53/UDP (dns))"
        );
    }

    #[test]
    fn a_clusterip_without_a_port_takes_the_services_port_of_the_protocol() {
        assert_eq!(port_to("10.96.0.50", Protocol::Sctp), Ok(Some(38412)));
        assert_eq!(port_to("10.96.0.10", Protocol::Udp), Ok(Some(53)));
        assert!(matches!(
            port_to("10.96.0.50", Protocol::Tcp),
            Err(TargetError::NoServicePortOfProtocol(..))
        ));
    }

    #[test]
    fn icmp_with_a_port_is_an_error_not_ignored() {
        assert_eq!(
            port_to("core/amf-0:8080", Protocol::Icmp),
            Err(TargetError::PortWithoutPorts(Protocol::Icmp))
        );
        assert_eq!(
            port_to("svc/core/dns:dns", Protocol::Icmp),
            Err(TargetError::PortWithoutPorts(Protocol::Icmp))
        );
    }

    #[test]
    fn unknown_names_suggest_the_closest_or_list_a_few() {
        let names = || ["default/web-0", "default/web-1", "kube-system/dns"].map(String::from);
        assert_eq!(
            Candidates::new("default/web-O", names()).to_string(),
            "; did you mean default/web-0?"
        );
        assert_eq!(
            Candidates::new("default/web-7", names()).to_string(),
            "; did you mean default/web-0 or default/web-1?"
        );
        assert_eq!(
            Candidates::new("prod/api", names()).to_string(),
            "; it has: default/web-0, default/web-1, kube-system/dns"
        );
        let many = (0..20).map(|i| format!("pod-{i:02}"));
        assert_eq!(
            Candidates::new("something-else", many).to_string(),
            "; it has: pod-00, pod-01, pod-02, pod-03, pod-04, pod-05, pod-06, pod-07 (and 12 more)"
        );
        assert_eq!(Candidates::new("x", []).to_string(), "; it has none");
    }

    #[test]
    fn edit_distance_counts_look_alike_characters_as_half_an_edit() {
        assert_eq!(edit_distance("web-0", "web-0"), 0);
        assert_eq!(edit_distance("web-O", "web-0"), 1);
        assert_eq!(edit_distance("web-O", "web-1"), 2);
        assert_eq!(edit_distance("node1", "node-1"), 2);
        assert_eq!(edit_distance("", "abc"), 6);
    }

    #[test]
    fn a_pods_single_declared_port_is_one_of_the_flows_protocol() {
        assert_eq!(port_to("core/amf-0", Protocol::Sctp), Ok(Some(38412)));
        assert_eq!(port_to("core/amf-0", Protocol::Tcp), Ok(Some(8080)));
        assert_eq!(
            port_to("core/amf-0", Protocol::Udp),
            Err(TargetError::PortRequired(Protocol::Udp))
        );
        assert_eq!(port_to("core/amf-0:9999", Protocol::Sctp), Ok(Some(9999)));
    }

    #[test]
    fn every_flow_protocol_but_icmp_has_ports_and_a_kubernetes_port_protocol() {
        for (protocol, port) in [
            (Protocol::Tcp, Some(PortProtocol::Tcp)),
            (Protocol::Udp, Some(PortProtocol::Udp)),
            (Protocol::Sctp, Some(PortProtocol::Sctp)),
            (Protocol::Icmp, None),
        ] {
            assert_eq!(protocol.port_protocol(), port);
            assert_eq!(protocol.has_ports(), port.is_some());
        }
        assert_eq!(Protocol::Sctp.to_string(), "sctp");
    }

    #[test]
    fn malformed_endpoints_say_what_forms_exist() {
        for text in [
            "",
            "web-0",
            "a/b/c",
            "node/",
            "svc/default",
            "svc/default/web:-x",
            "default/web-0:http",
            "10.0.0.1:99999",
        ] {
            let error = text.parse::<Endpoint>().unwrap_err();
            assert!(
                matches!(error, TargetError::Malformed(_) | TargetError::BadPort(..)),
                "{text}: {error:?}"
            );
        }
        let message = "web-0".parse::<Endpoint>().unwrap_err().to_string();
        assert!(
            message.contains("NS/NAME") && message.contains("node/NAME"),
            "{message}"
        );
    }
}
