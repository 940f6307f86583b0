//! What `--from` and `--to` resolve to in a snapshot: where the walk
//! starts, the addresses and the port.

use std::fmt;
use std::net::IpAddr;

use super::{Candidates, Endpoint, PacketSize, Protocol, Request, TargetError, TargetPortNote};
use crate::net::Family;
use crate::snapshot::cluster::ApiEnum as _;
use crate::snapshot::cluster::{IpOwner, Pod, PortRef, Service, ServicePort};
use crate::snapshot::{NetnsId, Snapshot};

/// Where the walk starts and what it is for.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub start: Start,
    pub question: Question,
}

/// The question as resolved against the snapshot: the source and the
/// destination as the user named them, and the addresses, port, protocol
/// and size of the flow's first packet. Its text is the report's first line.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// `--from` and `--to`, as given.
    pub from: String,
    pub to: String,
    /// For a client outside the cluster, the nodes its packet arrives at
    /// (`node/NAME`); empty otherwise.
    pub arriving_at: Vec<String>,
    /// The source address when the source names one (a pod's IP, a client
    /// outside the cluster); `None` where routing chooses it (a node).
    pub src: Option<IpAddr>,
    pub dst: IpAddr,
    pub dport: Option<u16>,
    pub protocol: Protocol,
    pub size: Option<PacketSize>,
}

impl fmt::Display for Question {
    /// `FROM [(from outside, arriving at NODES)] -> TO (DST[:PORT] PROTOCOL[, SIZE, DF])`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.from)?;
        if !self.arriving_at.is_empty() {
            write!(
                f,
                " (from outside, arriving at {})",
                self.arriving_at.join(", ")
            )?;
        }
        write!(f, " -> {} (", self.to)?;
        match self.dport {
            Some(port) => write!(f, "{}", std::net::SocketAddr::new(self.dst, port))?,
            None => write!(f, "{}", self.dst)?,
        }
        write!(f, " {}", self.protocol)?;
        if let Some(size) = self.size {
            write!(f, ", {size}, DF")?;
        }
        f.write_str(")")
    }
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
    let outside = match &request.from {
        Endpoint::Ip { address, .. } if is_outside(snapshot, *address) => Some(*address),
        _ => None,
    };
    let (dst, target_port) = resolve_destination(
        snapshot,
        &request.to,
        request.protocol,
        (outside.is_some(), request.family),
    )?;
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
            let (source, src) = resolve_source(snapshot, &request.from, Family::of(dst))?;
            (Start::Local(source), src)
        }
    };
    if let Some(src) = src
        && Family::of(src) != Family::of(dst)
    {
        return Err(TargetError::MixedFamilies {
            from: request.from.to_string(),
            src,
            to: request.to.to_string(),
            dst,
        });
    }
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
    let arriving_at = match (&start, &request.via) {
        (_, Some(node)) => vec![format!("node/{node}")],
        (Start::Outside(entries), None) => entries.iter().map(|(ns, _)| ns.to_string()).collect(),
        (Start::Local(_), None) => Vec::new(),
    };
    let question = Question {
        from: request.from.to_string(),
        to: request.to.to_string(),
        arriving_at,
        src,
        dst,
        dport,
        // An echo request is the destination's family's, as `ping` sends it:
        // `icmp` to an IPv6 address is ICMPv6.
        protocol: match request.protocol {
            Protocol::Icmp | Protocol::Icmpv6 => Family::of(dst).icmp(),
            protocol => protocol,
        },
        size: request.size,
    };
    Ok(Resolved { start, question })
}

/// `request` as it is asked: once per family where it names a dual-stack
/// destination by name and says no `family` (the destination's first
/// address's family first, then the other), where the request resolves in
/// both (a source pod with an address of each; an address source only in
/// its own family); once, in the address's family, where an address of one
/// family meets a dual-stack endpoint named (`--from fd00::5 --to NS/POD`);
/// else once, as it is.
pub fn per_family(snapshot: &Snapshot, request: &Request) -> Vec<Request> {
    let in_family = |family: Family| Request {
        family: Some(family),
        ..request.clone()
    };
    let first = match (request.family, resolve(snapshot, request)) {
        (None, Ok(resolved)) => Family::of(resolved.question.dst),
        (None, Err(TargetError::MixedFamilies { src, dst, .. })) => {
            // The named side's first address is of the other family: ask
            // in each side's family, and keep the first in which both sides
            // have an address (the literal's family, where the named side
            // has one of it).
            return [Family::of(src), Family::of(dst)]
                .into_iter()
                .map(in_family)
                .find(|narrowed| resolve(snapshot, narrowed).is_ok())
                .map_or_else(|| vec![request.clone()], |narrowed| vec![narrowed]);
        }
        _ => return vec![request.clone()],
    };
    let other = in_family(first.other());
    match resolve(snapshot, &other) {
        Ok(resolved) if Family::of(resolved.question.dst) == first.other() => {
            vec![in_family(first), other]
        }
        _ => vec![request.clone()],
    }
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
        .and_then(|entry| entry.dump().addrs.as_deref())
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

/// The namespace a request starts in, and its source address where the
/// endpoint fixes one: a pod's address of the destination's `family` (its
/// first where it has none of that family, for the question to be refused
/// as mixing families).
fn resolve_source(
    snapshot: &Snapshot,
    from: &Endpoint,
    family: Family,
) -> Result<(NetnsId, Option<IpAddr>), TargetError> {
    match from {
        Endpoint::Pod {
            namespace, name, ..
        } => pod_namespace(snapshot, namespace, name, family),
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
                        let (id, _) = pod_namespace(snapshot, namespace, name, family)?;
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

/// A pod's network namespace (its node's, for a hostNetwork pod) and its IP
/// of `family` (else its first).
fn pod_namespace(
    snapshot: &Snapshot,
    namespace: &str,
    name: &str,
    family: Family,
) -> Result<(NetnsId, Option<IpAddr>), TargetError> {
    let pod = pod(snapshot, namespace, name)?;
    let node = pod
        .node_name
        .clone()
        .ok_or_else(|| TargetError::PodNotScheduled(namespace.into(), name.into()))?;
    let ip = of_family(&pod.ips, Some(family)).or(pod.ips.first().copied());
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
/// for TCP and for UDP, and an SCTP-only port takes no TCP flow). A client
/// outside the cluster sends to a Service's load-balancer address where it
/// has one, on the same port: its ClusterIP is not routed out there.
/// The first of `addresses` of `family` (of any, for `None`).
fn of_family(addresses: &[IpAddr], family: Option<Family>) -> Option<IpAddr> {
    addresses
        .iter()
        .copied()
        .find(|ip| family.is_none_or(|family| Family::of(*ip) == family))
}

/// The address of `family` among an endpoint's `addresses`; where it has
/// addresses but none of that family, why not.
fn pick(
    what: impl FnOnce() -> String,
    addresses: &[IpAddr],
    family: Option<Family>,
) -> Result<Option<IpAddr>, TargetError> {
    match (of_family(addresses, family), family) {
        (Some(ip), _) => Ok(Some(ip)),
        (None, Some(family)) if !addresses.is_empty() => Err(TargetError::NoAddressOfFamily {
            what: what(),
            family,
            addresses: addresses
                .iter()
                .map(IpAddr::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }),
        (None, _) => Ok(None),
    }
}

fn resolve_destination(
    snapshot: &Snapshot,
    to: &Endpoint,
    protocol: Protocol,
    (from_outside, family): (bool, Option<Family>),
) -> Result<(IpAddr, Option<u16>), TargetError> {
    match to {
        Endpoint::Pod {
            namespace,
            name,
            port,
        } => {
            let pod = pod(snapshot, namespace, name)?;
            let ip = pick(|| format!("pod {namespace}/{name}"), &pod.ips, family)?
                .ok_or_else(|| TargetError::PodWithoutIp(namespace.clone(), name.clone()))?;
            Ok((ip, *port))
        }
        Endpoint::Node { name, port } => {
            let node = node(snapshot, name)?;
            let addresses: Vec<IpAddr> = node.addresses.iter().filter_map(|a| a.ip()).collect();
            let ip = pick(|| format!("node {name}"), &addresses, family)?
                .ok_or_else(|| TargetError::NodeWithoutIp(name.clone()))?;
            Ok((ip, *port))
        }
        Endpoint::Service {
            namespace,
            name,
            port,
        } => {
            let service = service(snapshot, namespace, name)?;
            let what = || format!("service {namespace}/{name}");
            let ingress = match from_outside {
                true => pick(what, &service.load_balancer_ips, family)?,
                false => None,
            };
            let ip = match ingress {
                Some(ip) => ip,
                None => pick(what, &service.cluster_ips, family)?.ok_or_else(|| {
                    TargetError::ServiceWithoutIp(namespace.clone(), name.clone())
                })?,
            };
            Ok((ip, service_port(service, port.as_ref(), protocol)?))
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

/// Why `service` takes no flow of `protocol` to `port` (it has no such
/// port), or `None` where it does.
pub(crate) fn lacking_port(
    service: &Service,
    port: u16,
    protocol: Protocol,
) -> Option<TargetError> {
    service_port(service, Some(&PortRef::Number(port)), protocol).err()
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
    // A flow without ports (ICMP) is carried by every port of the Service.
    let carries = |p: &&ServicePort| !protocol.has_ports() || p.protocol == protocol;
    let Some(port) = port else {
        let mut ports = service.ports.iter().filter(carries);
        return match (ports.next(), ports.next()) {
            (Some(only), None) => Ok(Some(only.port)),
            (None, _) if !service.ports.is_empty() => {
                let theirs: Vec<String> = service
                    .ports
                    .iter()
                    .map(|p| format!("{}/{}", p.port, p.protocol.api_name()))
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
                Some(port_name) => format!("{}/{} ({port_name})", p.port, p.protocol.api_name()),
                None => format!("{}/{}", p.port, p.protocol.api_name()),
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
        let theirs: Vec<&str> = named.iter().map(|p| p.protocol.api_name()).collect();
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
    if !protocol.has_ports() {
        return None;
    }
    let mut ports = pod.containers.iter().flat_map(|c| {
        c.ports
            .iter()
            .filter(move |p| p.protocol == protocol)
            .map(|p| p.container_port)
    });
    let first = ports.next()?;
    ports.next().is_none().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            family: None,
        };
        resolve(&snapshot, &request).map(|resolved| resolved.question.dport)
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
    fn a_pods_single_declared_port_is_one_of_the_flows_protocol() {
        assert_eq!(port_to("core/amf-0", Protocol::Sctp), Ok(Some(38412)));
        assert_eq!(port_to("core/amf-0", Protocol::Tcp), Ok(Some(8080)));
        assert_eq!(
            port_to("core/amf-0", Protocol::Udp),
            Err(TargetError::PortRequired(Protocol::Udp))
        );
        assert_eq!(port_to("core/amf-0:9999", Protocol::Sctp), Ok(Some(9999)));
    }
}
