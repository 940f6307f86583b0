//! What the user asks about: `--from` and `--to` as written, and what they
//! resolve to in a snapshot.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::net::Family;
pub use crate::net::Protocol;
use crate::snapshot::cluster::{PortRef, Service};

mod candidates;
mod resolve;

pub use candidates::{Candidates, suggest_endpoint};
pub use resolve::{Question, per_family};
pub(crate) use resolve::{Resolved, Start, lacking_port, resolve};

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
        "{0:?} is not a pod (NS/NAME, pod/NS/NAME), a node (node/NAME), a service (svc/NS/NAME, service/NS/NAME, NAME.NS.svc[.cluster.local], NAME.NS; each [:PORT]) or an address (IP[:PORT])"
    )]
    Malformed(String),
    #[error(
        "{0:?} is a hostname, and skoop resolves none but a Service's (NAME.NS, NAME.NS.svc[.cluster.local]): give its IP"
    )]
    Hostname(String),
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
    #[error("{what} has no {family} address (its addresses: {addresses})")]
    NoAddressOfFamily {
        what: String,
        family: Family,
        addresses: String,
    },
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
    #[error(
        "--from {from} is an {} address ({src}) and --to {to} an {} address ({dst}): a packet's two addresses are of one family, so ask with a source and a destination of the same family",
        Family::of(*.src),
        Family::of(*.dst)
    )]
    MixedFamilies {
        from: String,
        src: IpAddr,
        to: String,
        dst: IpAddr,
    },
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

    /// `node/NAME`, `pod/NS/NAME` or `NS/NAME`, `svc/NS/NAME` or
    /// `service/NS/NAME`, `NAME.NS.svc[.cluster.local]` or `NAME.NS` (a
    /// Service, as cluster DNS names it), or an IP; each with `:PORT`. A
    /// name with dots is a Service only in those two forms: skoop resolves
    /// no other hostname (give its IP).
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
        if let Some(rest) = ["svc/", "service/"]
            .iter()
            .find_map(|prefix| text.strip_prefix(prefix))
        {
            let (path, port) = split_service_port(text, rest)?;
            let (namespace, name) = namespaced(path).ok_or_else(malformed)?;
            return Ok(Endpoint::Service {
                namespace,
                name,
                port,
            });
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
        // Digits and dots are a mistyped address, not a name.
        let numeric = text
            .split(['.', ':'])
            .all(|part| part.chars().all(|c| c.is_ascii_digit()));
        if !text.contains('/') && text.contains('.') && !numeric {
            let (host, port) = split_service_port(text, text)?;
            let host = host
                .strip_suffix(".svc.cluster.local")
                .or_else(|| host.strip_suffix(".svc"))
                .unwrap_or(host);
            return match host.split_once('.') {
                Some((name, namespace)) if dns_label(name) && dns_label(namespace) => {
                    Ok(Endpoint::Service {
                        namespace: namespace.into(),
                        name: name.into(),
                        port,
                    })
                }
                _ => Err(TargetError::Hostname(text.to_string())),
            };
        }
        let rest = text.strip_prefix("pod/").unwrap_or(text);
        let (path, port) = split_port(text, rest)?;
        let (namespace, name) = namespaced(path).ok_or_else(malformed)?;
        Ok(Endpoint::Pod {
            namespace,
            name,
            port,
        })
    }
}

/// `NS/NAME` -> (`NS`, `NAME`).
fn namespaced(path: &str) -> Option<(String, String)> {
    match path.split_once('/') {
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Some((namespace.into(), name.into()))
        }
        _ => None,
    }
}

/// Whether `text` is a DNS label as Kubernetes names namespaces and
/// Services (RFC 1123: lower-case letters, digits and `-`, at most 63).
fn dns_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

/// A Service's `NAME:PORT`, the port by number or by name (`:http`).
fn split_service_port<'a>(
    whole: &str,
    text: &'a str,
) -> Result<(&'a str, Option<PortRef>), TargetError> {
    match text.rsplit_once(':') {
        Some((path, name))
            if name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') =>
        {
            Ok((path, Some(PortRef::Name(name.to_string()))))
        }
        _ => {
            let (path, port) = split_port(whole, text)?;
            Ok((path, port.map(PortRef::Number)))
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
    /// The address family of a dual-stack endpoint named by name
    /// (`--family`): its address of that family. `None`: the destination's
    /// first address (a pod's primary `podIP`, a Service's first
    /// `clusterIPs`), and a source pod's address of the destination's family.
    pub family: Option<Family>,
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
    fn endpoints_parse_as_people_type_them() {
        let web = |port| Endpoint::Service {
            namespace: "default".into(),
            name: "web".into(),
            port,
        };
        let cases = [
            ("web.default.svc.cluster.local", web(None)),
            (
                "web.default.svc.cluster.local:80",
                web(Some(PortRef::Number(80))),
            ),
            ("web.default.svc", web(None)),
            (
                "web.default.svc:http",
                web(Some(PortRef::Name("http".into()))),
            ),
            ("web.default", web(None)),
            ("web.default:80", web(Some(PortRef::Number(80)))),
            ("service/default/web", web(None)),
            ("service/default/web:80", web(Some(PortRef::Number(80)))),
            (
                "pod/default/web-3:8080",
                Endpoint::Pod {
                    namespace: "default".into(),
                    name: "web-3".into(),
                    port: Some(8080),
                },
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<Endpoint>(), Ok(expected), "{text}");
        }
    }

    #[test]
    fn a_hostname_that_names_no_service_is_refused_with_the_forms_that_do() {
        for text in ["example.com.", "www.example.com", "Web.Default"] {
            let error = text.parse::<Endpoint>().unwrap_err();
            assert!(
                matches!(error, TargetError::Hostname(_)),
                "{text}: {error:?}"
            );
            assert!(error.to_string().contains("NAME.NS.svc"), "{error}");
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

    #[test]
    fn every_flow_protocol_but_icmp_has_ports_and_a_kubernetes_port_spelling() {
        use crate::snapshot::cluster::ApiEnum;
        for (protocol, spelling) in [
            (Protocol::Tcp, Some("TCP")),
            (Protocol::Udp, Some("UDP")),
            (Protocol::Sctp, Some("SCTP")),
            (Protocol::Icmp, None),
        ] {
            assert_eq!(
                Protocol::from_api(spelling.unwrap_or("ICMP")).is_some(),
                spelling.is_some()
            );
            assert_eq!(protocol.has_ports(), spelling.is_some());
        }
        assert_eq!(Protocol::Sctp.to_string(), "sctp");
        assert_eq!(Protocol::Sctp.api_name(), "SCTP");
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
            "10.0.0.300",
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
