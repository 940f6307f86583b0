//! skoop's own model of the Kubernetes objects a diagnosis reads.
//!
//! These types are what the engine and the packs see: only the fields that
//! matter to a packet's path, already parsed (IPs, CIDRs, ports, protocols)
//! and with the API's defaults applied where the API applies them. Nothing
//! here depends on k8s-openapi; the conversion happens once, in `convert`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;

use super::selector::LabelSelector;

/// Labels (or annotations) of an object: key to value.
pub type Labels = BTreeMap<String, String>;

/// Where an object was read from, so that a report can cite it as evidence.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectSource {
    pub file: PathBuf,
    /// 1-based line where the object starts (the document or `List` item).
    pub line: usize,
}

impl fmt::Display for ObjectSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

impl ObjectSource {
    /// The object's source as a finding's evidence.
    pub fn evidence(&self) -> crate::diagnostic::Evidence {
        crate::diagnostic::Evidence::line(self.file.clone(), self.line)
    }
}

/// The metadata every object carries.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectMeta {
    /// Empty for cluster-scoped objects, as in Kubernetes.
    pub namespace: String,
    pub name: String,
    /// `metadata.uid` (empty where the object has none): how a pod's network
    /// namespace is found on its node (`collect::node`).
    pub uid: String,
    pub labels: Labels,
    pub annotations: BTreeMap<String, String>,
    pub source: ObjectSource,
}

/// An enumerated string field of the Kubernetes API.
pub trait ApiEnum: Sized + Copy + PartialEq + 'static {
    /// Every value with its spelling in the API.
    const VALUES: &'static [(&'static str, Self)];

    /// The value as the API spells it (`TCP`).
    fn api_name(self) -> &'static str {
        Self::VALUES
            .iter()
            .find(|(_, value)| *value == self)
            .map_or("", |(spelling, _)| *spelling)
    }

    /// Reads the API spelling; `None` for anything else (the API is case-sensitive).
    fn from_api(text: &str) -> Option<Self> {
        Self::VALUES
            .iter()
            .find(|(spelling, _)| *spelling == text)
            .map(|(_, value)| *value)
    }
}

/// Declares an [`ApiEnum`], spelling each value exactly as the API does, so
/// that parsing and printing share one table.
macro_rules! api_enum {
    ($(#[$doc:meta])* pub enum $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $crate::snapshot::cluster::model::ApiEnum for $name {
            const VALUES: &'static [(&'static str, Self)] = &[$(($text, $name::$variant),)+];
        }

        impl $name {
            /// The value as the API spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(super) use api_enum;

/// A port's protocol (a Service's, an EndpointSlice's, a container's, a
/// NetworkPolicy's) is the network vocabulary's [`Protocol`]; the API
/// spells the three a port can have in capitals, and defaults to TCP.
pub use crate::net::Protocol;

impl ApiEnum for Protocol {
    const VALUES: &'static [(&'static str, Self)] = &[
        ("TCP", Protocol::Tcp),
        ("UDP", Protocol::Udp),
        ("SCTP", Protocol::Sctp),
    ];
}

/// A port given by number or by the name of a container port
/// (a Service's `targetPort`, a NetworkPolicy's `port`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum PortRef {
    Number(u16),
    Name(String),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Number(number) => write!(f, "{number}"),
            PortRef::Name(name) => f.write_str(name),
        }
    }
}

/// A Kubernetes Node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    pub meta: ObjectMeta,
    /// `spec.podCIDRs`, else `spec.podCIDR`.
    pub pod_cidrs: Vec<IpNet>,
    pub addresses: Vec<NodeAddress>,
    /// The `Ready` condition; `None` when absent or `Unknown`.
    pub ready: Option<bool>,
}

impl Node {
    /// The pod CIDRs a CNI reads: `spec.podCIDRs` (else `spec.podCIDR`),
    /// then those each of `annotations` holds (CIDRs joined by commas, as
    /// the CNIs that announce pod CIDRs in annotations write them), each
    /// once. A value that is no CIDR is an error naming the annotation.
    pub fn pod_cidrs_with(&self, annotations: &[String]) -> Result<Vec<IpNet>, String> {
        let mut cidrs = self.pod_cidrs.clone();
        for key in annotations {
            let Some(value) = self.meta.annotations.get(key) else {
                continue;
            };
            for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let cidr: IpNet = part.parse().map_err(|_| {
                    format!(
                        "node {}'s annotation {key} holds {part:?}, which is no CIDR",
                        self.meta.name
                    )
                })?;
                if !cidrs.contains(&cidr) {
                    cidrs.push(cidr);
                }
            }
        }
        Ok(cidrs)
    }

    /// The first `InternalIP` of `status.addresses`: the address other nodes
    /// and tunnels reach this node at.
    pub fn internal_ip(&self) -> Option<IpAddr> {
        self.addresses.iter().find_map(|a| match a {
            NodeAddress::InternalIp(ip) => Some(*ip),
            _ => None,
        })
    }
}

/// One entry of a Node's `status.addresses`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NodeAddress {
    InternalIp(IpAddr),
    ExternalIp(IpAddr),
    Hostname(String),
    InternalDns(String),
    ExternalDns(String),
    /// An address type this model does not know, kept as written.
    Other {
        kind: String,
        address: String,
    },
}

impl NodeAddress {
    /// The IP of an `InternalIP` or `ExternalIP` address.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            NodeAddress::InternalIp(ip) | NodeAddress::ExternalIp(ip) => Some(*ip),
            _ => None,
        }
    }
}

api_enum! {
    /// `status.phase` of a Pod.
    pub enum PodPhase {
        Pending = "Pending",
        Running = "Running",
        Succeeded = "Succeeded",
        Failed = "Failed",
        Unknown = "Unknown",
    }
}

/// A Kubernetes Pod.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pod {
    pub meta: ObjectMeta,
    pub node_name: Option<String>,
    /// The pod runs in its node's network namespace and shares its IPs.
    pub host_network: bool,
    /// Every IP of `status.podIPs` (else `status.podIP`), primary first.
    pub ips: Vec<IpAddr>,
    pub host_ip: Option<IpAddr>,
    pub phase: Option<PodPhase>,
    /// The `Ready` condition; `None` when absent or `Unknown`.
    pub ready: Option<bool>,
    /// The `ContainersReady` condition; `None` when absent or `Unknown`.
    pub containers_ready: Option<bool>,
    pub containers: Vec<Container>,
}

/// A container of a Pod.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Container {
    pub name: String,
    /// From `status.containerStatuses`; `None` when the pod reports no status for it.
    pub ready: Option<bool>,
    pub ports: Vec<ContainerPort>,
}

/// A port a container declares.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContainerPort {
    pub name: Option<String>,
    pub container_port: u16,
    /// A port on the node forwarded to this one.
    pub host_port: Option<u16>,
    pub protocol: Protocol,
}

api_enum! {
    /// `spec.type` of a Service. The API defaults it to ClusterIP.
    pub enum ServiceType {
        ClusterIp = "ClusterIP",
        NodePort = "NodePort",
        LoadBalancer = "LoadBalancer",
        ExternalName = "ExternalName",
    }
}

api_enum! {
    /// `externalTrafficPolicy` / `internalTrafficPolicy` of a Service.
    pub enum TrafficPolicy {
        Cluster = "Cluster",
        Local = "Local",
    }
}

api_enum! {
    /// `spec.sessionAffinity` of a Service. The API defaults it to None.
    pub enum SessionAffinity {
        None = "None",
        ClientIp = "ClientIP",
    }
}

/// A Kubernetes Service.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Service {
    pub meta: ObjectMeta,
    pub service_type: ServiceType,
    /// `spec.clusterIPs` (else `spec.clusterIP`); empty when headless or unallocated.
    pub cluster_ips: Vec<IpAddr>,
    /// `clusterIP: None`: DNS names the endpoints directly, nothing is load-balanced.
    pub headless: bool,
    pub external_ips: Vec<IpAddr>,
    /// The IPs of `status.loadBalancer.ingress` (hostname-only entries carry none).
    pub load_balancer_ips: Vec<IpAddr>,
    pub external_name: Option<String>,
    pub ports: Vec<ServicePort>,
    /// `None` when the selector is absent or empty: the endpoints are then
    /// managed by something else, and no pod is selected.
    pub selector: Option<LabelSelector>,
    pub external_traffic_policy: Option<TrafficPolicy>,
    pub internal_traffic_policy: Option<TrafficPolicy>,
    pub session_affinity: SessionAffinity,
}

/// A port of a Service.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServicePort {
    pub name: Option<String>,
    pub protocol: Protocol,
    pub port: u16,
    /// Defaults to `port`, as in the API.
    pub target_port: PortRef,
    pub node_port: Option<u16>,
}

api_enum! {
    /// `addressType` of an EndpointSlice.
    pub enum AddressType {
        Ipv4 = "IPv4",
        Ipv6 = "IPv6",
        Fqdn = "FQDN",
    }
}

/// A `discovery.k8s.io/v1` EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EndpointSlice {
    pub meta: ObjectMeta,
    /// From the `kubernetes.io/service-name` label.
    pub service_name: Option<String>,
    pub address_type: AddressType,
    pub ports: Vec<EndpointPort>,
    pub endpoints: Vec<Endpoint>,
}

/// A port of an EndpointSlice or of an Endpoints subset.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EndpointPort {
    /// Matches the name of the Service port; `None` when unnamed.
    pub name: Option<String>,
    pub protocol: Protocol,
    /// `None` in an EndpointSlice means every port.
    pub port: Option<u16>,
}

/// One endpoint of an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Endpoint {
    /// The addresses of an IPv4 or IPv6 slice.
    pub addresses: Vec<IpAddr>,
    /// The addresses of an FQDN slice (kube-proxy does not program these).
    pub fqdns: Vec<String>,
    pub conditions: EndpointConditions,
    pub node_name: Option<String>,
    pub target_ref: Option<ObjectReference>,
}

/// The conditions of an endpoint as written; the methods apply the API's
/// rules for absent values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct EndpointConditions {
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

impl EndpointConditions {
    /// Absent means ready.
    pub fn is_ready(&self) -> bool {
        self.ready.unwrap_or(true)
    }

    /// Absent means serving.
    pub fn is_serving(&self) -> bool {
        self.serving.unwrap_or(true)
    }

    /// Absent means not terminating.
    pub fn is_terminating(&self) -> bool {
        self.terminating.unwrap_or(false)
    }
}

/// A reference to another object (an endpoint's `targetRef`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectReference {
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// A core/v1 Endpoints object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Endpoints {
    pub meta: ObjectMeta,
    pub subsets: Vec<EndpointSubset>,
}

/// A set of addresses sharing a set of ports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EndpointSubset {
    pub addresses: Vec<EndpointAddress>,
    pub not_ready_addresses: Vec<EndpointAddress>,
    pub ports: Vec<EndpointPort>,
}

/// An address of an Endpoints subset.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EndpointAddress {
    pub ip: IpAddr,
    pub node_name: Option<String>,
    pub target_ref: Option<ObjectReference>,
}

/// A ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfigMap {
    pub meta: ObjectMeta,
    pub data: BTreeMap<String, String>,
}

/// An `apps/v1` DaemonSet: how packs recognise a CNI's agents.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DaemonSet {
    pub meta: ObjectMeta,
    /// `None` when the selector could not be read (a problem says why).
    pub selector: Option<LabelSelector>,
    pub containers: Vec<TemplateContainer>,
    pub init_containers: Vec<TemplateContainer>,
}

/// A container of a pod template.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TemplateContainer {
    pub name: String,
    pub image: Option<String>,
    /// Its environment as written: each variable with its literal `value`,
    /// `None` where it is set from elsewhere (`valueFrom`: a ConfigMap, a
    /// Secret, a field of the pod), which the template does not hold.
    pub env: Vec<(String, Option<String>)>,
    pub args: Vec<String>,
}

/// The label the API server gives every namespace, with its name as value.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A Namespace. Its labels always carry [`NAMESPACE_NAME_LABEL`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Namespace {
    pub meta: ObjectMeta,
}

/// A `networking.k8s.io/v1` NetworkPolicy, with the API's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetworkPolicy {
    pub meta: ObjectMeta,
    /// The pods in the policy's namespace it applies to; empty selects all.
    pub pod_selector: LabelSelector,
    pub policy_types: PolicyTypes,
    /// Allowed incoming traffic; empty allows none (when `policy_types.ingress`).
    pub ingress: Vec<NetworkPolicyRule>,
    /// Allowed outgoing traffic; empty allows none (when `policy_types.egress`).
    pub egress: Vec<NetworkPolicyRule>,
}

/// A NetworkPolicy whose `podSelector` or `policyTypes` cannot be read: whom
/// it isolates, and for which direction, is unknown, so every verdict for
/// pods of its namespace that no other policy admits is unknown too.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnreadableNetworkPolicy {
    pub meta: ObjectMeta,
    /// The field and what is wrong with it: `spec.policyTypes[0]: "Both" is
    /// not one of Ingress, Egress`.
    pub reason: String,
}

/// Which directions a NetworkPolicy isolates. When `policyTypes` is not
/// written, the API sets Ingress always and Egress when egress rules exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PolicyTypes {
    pub ingress: bool,
    pub egress: bool,
}

/// One ingress (`from`) or egress (`to`) rule. Traffic matches when it
/// matches any peer and any port.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetworkPolicyRule {
    /// Empty matches every peer.
    pub peers: Vec<NetworkPolicyPeer>,
    /// Empty matches every port.
    pub ports: Vec<NetworkPolicyPort>,
}

/// A peer of a NetworkPolicy rule. Absent and empty selectors differ here,
/// hence one variant per combination the API allows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NetworkPolicyPeer {
    /// `podSelector` alone: pods in the policy's own namespace.
    Pods(LabelSelector),
    /// `namespaceSelector` alone: every pod in the selected namespaces.
    Namespaces(LabelSelector),
    /// Both: the selected pods in the selected namespaces.
    PodsInNamespaces {
        pods: LabelSelector,
        namespaces: LabelSelector,
    },
    /// Addresses in `cidr` but in none of `except`.
    IpBlock { cidr: IpNet, except: Vec<IpNet> },
    /// A peer that cannot be evaluated (the API would have rejected it);
    /// whether it matches is unknown, never guessed.
    Invalid { reason: String },
}

/// A port of a NetworkPolicy rule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NetworkPolicyPort {
    /// `port: None` matches every port of the protocol; `end_port` makes
    /// `port`..=`end_port` a range.
    Port {
        protocol: Protocol,
        port: Option<PortRef>,
        end_port: Option<u16>,
    },
    /// A port entry that cannot be evaluated; whether it matches is unknown.
    Invalid { reason: String },
}

/// An object of any kind without a typed model here (a CNI's custom
/// resources, CRDs, ...), queried by apiVersion and kind.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GenericObject {
    pub api_version: String,
    pub kind: String,
    pub meta: ObjectMeta,
    /// The whole object as written.
    #[serde(with = "json_text")]
    pub value: serde_json::Value,
}

/// A JSON value as its text, for the cluster cache's format, which cannot
/// describe a value's shape by itself (`super::cache`).
mod json_text {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(value: &serde_json::Value, to: S) -> Result<S::Ok, S::Error> {
        to.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<serde_json::Value, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(from)?;
        serde_json::from_str(&text).map_err(D::Error::custom)
    }
}

impl GenericObject {
    /// The API group: `crd.projectcalico.org` of `crd.projectcalico.org/v1`.
    pub fn group(&self) -> &str {
        api_group(&self.api_version)
    }
}

/// The API group of an apiVersion: `apps` of `apps/v1`, empty for the core `v1`.
pub(super) fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Any object the loader read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    Node(Node),
    Pod(Pod),
    Service(Service),
    EndpointSlice(EndpointSlice),
    Endpoints(Endpoints),
    ConfigMap(ConfigMap),
    DaemonSet(DaemonSet),
    NetworkPolicy(NetworkPolicy),
    UnreadableNetworkPolicy(UnreadableNetworkPolicy),
    Namespace(Namespace),
    Generic(GenericObject),
}

impl Object {
    pub fn meta(&self) -> &ObjectMeta {
        match self {
            Object::Node(o) => &o.meta,
            Object::Pod(o) => &o.meta,
            Object::Service(o) => &o.meta,
            Object::EndpointSlice(o) => &o.meta,
            Object::Endpoints(o) => &o.meta,
            Object::ConfigMap(o) => &o.meta,
            Object::DaemonSet(o) => &o.meta,
            Object::NetworkPolicy(o) => &o.meta,
            Object::UnreadableNetworkPolicy(o) => &o.meta,
            Object::Namespace(o) => &o.meta,
            Object::Generic(o) => &o.meta,
        }
    }

    pub(super) fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Object::Node(o) => &mut o.meta,
            Object::Pod(o) => &mut o.meta,
            Object::Service(o) => &mut o.meta,
            Object::EndpointSlice(o) => &mut o.meta,
            Object::Endpoints(o) => &mut o.meta,
            Object::ConfigMap(o) => &mut o.meta,
            Object::DaemonSet(o) => &mut o.meta,
            Object::NetworkPolicy(o) => &mut o.meta,
            Object::UnreadableNetworkPolicy(o) => &mut o.meta,
            Object::Namespace(o) => &mut o.meta,
            Object::Generic(o) => &mut o.meta,
        }
    }

    /// The object's kind as Kubernetes names it.
    pub fn kind(&self) -> &str {
        match self {
            Object::Node(_) => "Node",
            Object::Pod(_) => "Pod",
            Object::Service(_) => "Service",
            Object::EndpointSlice(_) => "EndpointSlice",
            Object::Endpoints(_) => "Endpoints",
            Object::ConfigMap(_) => "ConfigMap",
            Object::DaemonSet(_) => "DaemonSet",
            Object::NetworkPolicy(_) | Object::UnreadableNetworkPolicy(_) => "NetworkPolicy",
            Object::Namespace(_) => "Namespace",
            Object::Generic(o) => &o.kind,
        }
    }
}
