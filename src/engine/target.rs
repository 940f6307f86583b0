//! What the user asks about: `--from` and `--to` as written, and what they
//! resolve to in a snapshot.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::snapshot::cluster::{IpOwner, Pod, Protocol as PortProtocol, ServicePort};
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
    /// `svc/NS/NAME[:PORT]`
    Service {
        namespace: String,
        name: String,
        port: Option<u16>,
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
    #[error("no pod {0}/{1} in the snapshot")]
    UnknownPod(String, String),
    #[error("no node {0} in the snapshot")]
    UnknownNode(String),
    #[error("no service {0}/{1} in the snapshot")]
    UnknownService(String, String),
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
    #[error("service {0}/{1} has no port {2}")]
    UnknownServicePort(String, String, u16),
    #[error("service {0}/{1} has no {3} port {2} (its port {2} is {4})")]
    WrongServicePortProtocol(String, String, u16, Protocol, String),
    #[error("service {0}/{1} has no {2} port (its ports: {3})")]
    NoServicePortOfProtocol(String, String, Protocol, String),
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
            let (path, port) = split_port(text, rest)?;
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
    snapshot
        .cluster
        .pod(namespace, name)
        .ok_or_else(|| TargetError::UnknownPod(namespace.into(), name.into()))
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
    let node = snapshot
        .cluster
        .node(via)
        .ok_or_else(|| TargetError::UnknownNode(via.to_string()))?;
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
            snapshot
                .cluster
                .node(name)
                .ok_or_else(|| TargetError::UnknownNode(name.clone()))?;
            Ok((NetnsId::Host { node: name.clone() }, None))
        }
        Endpoint::Service { .. } => Err(TargetError::Malformed(from.to_string())),
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
            let node = snapshot
                .cluster
                .node(name)
                .ok_or_else(|| TargetError::UnknownNode(name.clone()))?;
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
            let service = snapshot
                .cluster
                .service(namespace, name)
                .ok_or_else(|| TargetError::UnknownService(namespace.clone(), name.clone()))?;
            let ip = service
                .cluster_ips
                .first()
                .ok_or_else(|| TargetError::ServiceWithoutIp(namespace.clone(), name.clone()))?;
            // ICMP has no ports: any of the Service's will do.
            let carries = |p: &&ServicePort| {
                protocol
                    .port_protocol()
                    .is_none_or(|wanted| p.protocol == wanted)
            };
            let port = match port {
                Some(port) => {
                    let numbered: Vec<&ServicePort> =
                        service.ports.iter().filter(|p| p.port == *port).collect();
                    if numbered.is_empty() {
                        return Err(TargetError::UnknownServicePort(
                            namespace.clone(),
                            name.clone(),
                            *port,
                        ));
                    }
                    if !numbered.iter().any(carries) {
                        let theirs: Vec<&str> =
                            numbered.iter().map(|p| p.protocol.as_str()).collect();
                        return Err(TargetError::WrongServicePortProtocol(
                            namespace.clone(),
                            name.clone(),
                            *port,
                            protocol,
                            theirs.join(" and "),
                        ));
                    }
                    Some(*port)
                }
                None => {
                    let mut ports = service.ports.iter().filter(carries);
                    match (ports.next(), ports.next()) {
                        (Some(only), None) => Some(only.port),
                        (None, _) if !service.ports.is_empty() => {
                            let theirs: Vec<String> = service
                                .ports
                                .iter()
                                .map(|p| format!("{}/{}", p.port, p.protocol))
                                .collect();
                            return Err(TargetError::NoServicePortOfProtocol(
                                namespace.clone(),
                                name.clone(),
                                protocol,
                                theirs.join(", "),
                            ));
                        }
                        _ => None,
                    }
                }
            };
            Ok((*ip, port))
        }
        Endpoint::Ip { address, port } => Ok((*address, *port)),
    }
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
                    port: Some(80),
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
            "svc/default/web:http",
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
