//! From a document tree or JSON text to skoop's model: the kinds a large
//! cluster has most of through their lean forms (`wire.rs`: only the fields
//! skoop reads), the others through k8s-openapi (so that IntOrString,
//! quantities and timestamps are read as the API defines them), then into
//! the model; every other kind as a generic object.
//!
//! This is the only place that names k8s-openapi types.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::networking::v1 as networking;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::{ClusterResourceScope, Metadata, NamespaceResourceScope, Resource};
use serde::Deserialize;
use serde::de::{DeserializeOwned, MapAccess};

use super::wire::{self, Fields, StringMap};

use super::de::{FieldError, from_value};
use super::document::{FieldPath, Place, Position, Segment, Value};
use super::model::*;
use super::selector::{LabelSelector, LabelSelectorRequirement, SelectorOperator};
use crate::snapshot::problem::ParseIssue;

/// The label that ties an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Reads one object of the given apiVersion and kind from `value`: the
/// object, unless it had to be skipped, and every issue found, positioned
/// and prefixed with the object's kind and name.
pub(super) fn read_object(
    value: &Value,
    api_version: &str,
    kind: &str,
    source: ObjectSource,
) -> (Option<Object>, Vec<ParseIssue>) {
    let mut cx = Conversion::default();
    let typed = TYPED_KINDS
        .iter()
        .find(|t| t.api_version == api_version && t.kind == kind);
    let result = match typed {
        Some(typed) => (typed.read)(value, source, &mut cx),
        None => {
            if let Some(typed) = TYPED_KINDS
                .iter()
                .find(|t| t.kind == kind && api_group(t.api_version) == api_group(api_version))
            {
                cx.issue(
                    root().field("apiVersion"),
                    format!(
                        "skoop reads {kind} only in {}; kept as a generic object",
                        typed.api_version
                    ),
                );
            }
            read_generic(value, api_version, kind, source, &mut cx)
        }
    };
    let name = identity(kind, value);
    let mut issues: Vec<ParseIssue> = cx
        .issues
        .into_iter()
        .map(|(path, message)| issue(value.locate(&path), &name, &path, &message))
        .collect();
    let object = match result {
        Ok(object) => object,
        Err(error) => {
            let position = error.position.unwrap_or_else(|| value.locate(&error.path));
            let message = format!("{}; object skipped", error.message);
            issues.push(issue(position, &name, &error.path, &message));
            None
        }
    };
    (object, issues)
}

/// [`read_object`] straight from the object's JSON text, for an object
/// read without an issue; `None` for any other (the positioned path then
/// reads it and says what is wrong, where).
pub(super) fn read_object_json(
    raw: &str,
    api_version: &str,
    kind: &str,
    source: ObjectSource,
) -> Option<Object> {
    let mut cx = Conversion::default();
    let typed = TYPED_KINDS
        .iter()
        .find(|t| t.api_version == api_version && t.kind == kind);
    let object = match typed {
        Some(typed) => (typed.read_json)(raw, source, &mut cx).ok()?,
        // A typed kind in another version is kept generic, with an issue.
        None if TYPED_KINDS
            .iter()
            .any(|t| t.kind == kind && api_group(t.api_version) == api_group(api_version)) =>
        {
            return None;
        }
        None => read_generic_json(raw, api_version, kind, source, &mut cx).ok()?,
    };
    if cx.issues.is_empty() { object } else { None }
}

fn issue(position: Position, name: &str, path: &FieldPath, message: &str) -> ParseIssue {
    let message = if path.is_empty() {
        format!("{name}: {message}")
    } else {
        format!("{name}: {path}: {message}")
    };
    ParseIssue::at(position.line, position.column, message)
}

/// How problems name an object: `Pod default/web-0`, `Node worker-1`.
fn identity(kind: &str, value: &Value) -> String {
    let metadata = value.get("metadata");
    let field = |name| metadata.and_then(|m| m.get(name)).and_then(Value::as_str);
    match (field("namespace"), field("name")) {
        (Some(namespace), Some(name)) if !namespace.is_empty() => {
            format!("{kind} {namespace}/{name}")
        }
        (_, Some(name)) => format!("{kind} {name}"),
        (_, None) => format!("{kind} (without metadata.name)"),
    }
}

/// Issues found while converting one object, by field path.
#[derive(Default)]
struct Conversion {
    issues: Vec<(FieldPath, String)>,
}

/// A kind with a typed model, and how to read it.
struct TypedKind {
    api_version: &'static str,
    kind: &'static str,
    read: fn(&Value, ObjectSource, &mut Conversion) -> Result<Option<Object>, FieldError>,
    read_json: fn(&str, ObjectSource, &mut Conversion) -> serde_json::Result<Option<Object>>,
}

const fn typed<K: Typed>() -> TypedKind {
    TypedKind {
        api_version: K::API_VERSION,
        kind: K::KIND,
        read: read_typed::<K>,
        read_json: read_typed_json::<K>,
    }
}

const TYPED_KINDS: &[TypedKind] = &[
    typed::<wire::Node>(),
    typed::<wire::Pod>(),
    typed::<wire::Service>(),
    typed::<wire::EndpointSlice>(),
    typed::<wire::Endpoints>(),
    typed::<core::ConfigMap>(),
    typed::<apps::DaemonSet>(),
    typed::<networking::NetworkPolicy>(),
    typed::<core::Namespace>(),
];

/// A kind with a model here, read through its lean form or k8s-openapi's.
trait Typed: Kind + DeserializeOwned {
    /// The model of this object; `None` when it had to be skipped (an issue says why).
    fn convert(self, meta: ObjectMeta, cx: &mut Conversion) -> Option<Object>;
}

/// What reading needs of a kind's type besides converting it.
trait Kind {
    const API_VERSION: &'static str;
    const KIND: &'static str;
    const NAMESPACING: Namespacing;

    /// Takes the object's metadata out.
    fn take_metadata(&mut self) -> wire::Metadata;
}

impl<K: Resource<Scope: Scope> + Metadata<Ty = meta::ObjectMeta>> Kind for K {
    const API_VERSION: &'static str = <K as Resource>::API_VERSION;
    const KIND: &'static str = <K as Resource>::KIND;
    const NAMESPACING: Namespacing = <K::Scope as Scope>::NAMESPACING;

    fn take_metadata(&mut self) -> wire::Metadata {
        let metadata = std::mem::take(self.metadata_mut());
        wire::Metadata {
            name: metadata.name,
            namespace: metadata.namespace,
            uid: metadata.uid,
            labels: metadata.labels.map(StringMap),
            annotations: metadata.annotations.map(StringMap),
        }
    }
}

/// The [`Kind`] of a lean type: its apiVersion, kind and scope.
macro_rules! lean_kind {
    ($type:ty, $api_version:literal, $kind:literal, $namespacing:expr) => {
        impl Kind for $type {
            const API_VERSION: &'static str = $api_version;
            const KIND: &'static str = $kind;
            const NAMESPACING: Namespacing = $namespacing;

            fn take_metadata(&mut self) -> wire::Metadata {
                self.metadata.take().unwrap_or_default()
            }
        }
    };
}

lean_kind!(wire::Node, "v1", "Node", Namespacing::Ignored);
lean_kind!(wire::Pod, "v1", "Pod", Namespacing::Required);
lean_kind!(wire::Service, "v1", "Service", Namespacing::Required);
lean_kind!(
    wire::EndpointSlice,
    "discovery.k8s.io/v1",
    "EndpointSlice",
    Namespacing::Required
);
lean_kind!(wire::Endpoints, "v1", "Endpoints", Namespacing::Required);

/// An object of a kind with a lean form, read field by field once its
/// apiVersion and kind are known (`direct.rs`: one pass over its text).
macro_rules! lean_objects {
    ($($variant:ident),*) => {
        pub(super) enum LeanObject {
            $($variant(wire::$variant),)*
        }

        impl LeanObject {
            /// An empty object of this apiVersion and kind, when it has a lean form.
            pub fn of(api_version: &str, kind: &str) -> Option<LeanObject> {
                $(
                    if (api_version, kind) == (<wire::$variant as Kind>::API_VERSION, <wire::$variant as Kind>::KIND) {
                        return Some(LeanObject::$variant(wire::$variant::default()));
                    }
                )*
                None
            }

            /// Reads the value of the object's field `key`.
            pub fn field<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
                match self {
                    $(LeanObject::$variant(object) => object.field(key, map),)*
                }
            }

            /// The object in the model, as [`read_object_json`] gives it.
            pub fn into_object(self, source: ObjectSource) -> Option<Object> {
                let mut cx = Conversion::default();
                let object = match self {
                    $(LeanObject::$variant(object) => typed_object(object, source, &mut cx),)*
                };
                if cx.issues.is_empty() { object } else { None }
            }
        }
    };
}

lean_objects!(Node, Pod, Service, EndpointSlice, Endpoints);

/// What an object's `metadata.namespace` means.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Namespacing {
    /// A namespaced kind: the namespace must be written.
    Required,
    /// A cluster-scoped kind: any namespace written is meaningless.
    Ignored,
    /// A kind this model does not know: take what is written.
    AsWritten,
}

/// The [`Namespacing`] of a k8s-openapi resource scope.
trait Scope {
    const NAMESPACING: Namespacing;
}

impl Scope for NamespaceResourceScope {
    const NAMESPACING: Namespacing = Namespacing::Required;
}

impl Scope for ClusterResourceScope {
    const NAMESPACING: Namespacing = Namespacing::Ignored;
}

fn read_typed<K: Typed>(
    value: &Value,
    source: ObjectSource,
    cx: &mut Conversion,
) -> Result<Option<Object>, FieldError> {
    Ok(typed_object(from_value::<K>(value)?, source, cx))
}

fn read_typed_json<K: Typed>(
    raw: &str,
    source: ObjectSource,
    cx: &mut Conversion,
) -> serde_json::Result<Option<Object>> {
    Ok(typed_object(serde_json::from_str::<K>(raw)?, source, cx))
}

fn typed_object<K: Typed>(
    mut object: K,
    source: ObjectSource,
    cx: &mut Conversion,
) -> Option<Object> {
    let metadata = object.take_metadata();
    let meta = cx.object_meta(metadata, K::NAMESPACING, source)?;
    object.convert(meta, cx)
}

fn read_generic(
    value: &Value,
    api_version: &str,
    kind: &str,
    source: ObjectSource,
    cx: &mut Conversion,
) -> Result<Option<Object>, FieldError> {
    let metadata = match value.get("metadata") {
        Some(metadata) => from_value::<wire::Metadata>(metadata)
            .map_err(|e| e.within(Segment::Field("metadata".into())))?,
        None => wire::Metadata::default(),
    };
    Ok(generic_object(
        metadata,
        value.to_json(),
        api_version,
        kind,
        source,
        cx,
    ))
}

fn read_generic_json(
    raw: &str,
    api_version: &str,
    kind: &str,
    source: ObjectSource,
    cx: &mut Conversion,
) -> serde_json::Result<Option<Object>> {
    let value: serde_json::Value = serde_json::from_str(raw)?;
    let metadata = match value.get("metadata") {
        Some(metadata) => wire::Metadata::deserialize(metadata)?,
        None => wire::Metadata::default(),
    };
    Ok(generic_object(
        metadata,
        value,
        api_version,
        kind,
        source,
        cx,
    ))
}

fn generic_object(
    metadata: wire::Metadata,
    value: serde_json::Value,
    api_version: &str,
    kind: &str,
    source: ObjectSource,
    cx: &mut Conversion,
) -> Option<Object> {
    let meta = cx.object_meta(metadata, Namespacing::AsWritten, source)?;
    Some(Object::Generic(GenericObject {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        meta,
        value,
    }))
}

fn root() -> &'static Place<'static> {
    &Place::Root
}

/// `Some(s)` unless absent or empty, as the API treats optional names.
fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

impl Conversion {
    fn issue(&mut self, place: Place<'_>, message: impl Into<String>) {
        self.issue_at(place.path(), message);
    }

    /// [`Conversion::issue`] at a path already made (a selector's, a
    /// policy peer's error).
    fn issue_at(&mut self, path: FieldPath, message: impl Into<String>) {
        self.issues.push((path, message.into()));
    }

    fn object_meta(
        &mut self,
        metadata: wire::Metadata,
        namespacing: Namespacing,
        source: ObjectSource,
    ) -> Option<ObjectMeta> {
        let path = root().field("metadata");
        let Some(name) = non_empty(metadata.name) else {
            self.issue(path.field("name"), "object has no name; object skipped");
            return None;
        };
        let namespace = match (namespacing, non_empty(metadata.namespace)) {
            (Namespacing::Ignored, _) => String::new(),
            (_, Some(namespace)) => namespace,
            (Namespacing::AsWritten, None) => String::new(),
            (Namespacing::Required, None) => {
                self.issue(
                    path.field("namespace"),
                    "namespaced object has no namespace (kubectl always writes it); object skipped",
                );
                return None;
            }
        };
        Some(ObjectMeta {
            namespace,
            name,
            uid: metadata.uid.unwrap_or_default(),
            labels: metadata.labels.unwrap_or_default().0,
            annotations: metadata.annotations.unwrap_or_default().0,
            source,
        })
    }

    fn ip(&mut self, text: &str, path: Place<'_>) -> Option<IpAddr> {
        match text.parse() {
            Ok(ip) => Some(ip),
            Err(_) => {
                self.issue(path, format!("{text:?} is not an IP address; ignored"));
                None
            }
        }
    }

    /// A CIDR with its host bits cleared, as Go's `net.ParseCIDR` returns it.
    fn cidr(&mut self, text: &str, path: Place<'_>) -> Option<IpNet> {
        match parse_cidr(text) {
            Ok(net) => Some(net),
            Err(message) => {
                self.issue(path, format!("{message}; ignored"));
                None
            }
        }
    }

    /// A port number; `consequence` says what is dropped when it is not one.
    fn port(&mut self, number: i32, path: Place<'_>, consequence: &str) -> Option<u16> {
        match port_number(number) {
            Ok(port) => Some(port),
            Err(message) => {
                self.issue(path, format!("{message}; {consequence}"));
                None
            }
        }
    }

    /// A value of an API enumeration; `consequence` says what is dropped when it is not one.
    fn enumerated<T: ApiEnum>(
        &mut self,
        text: &str,
        path: Place<'_>,
        consequence: &str,
    ) -> Option<T> {
        match parse_enum(text) {
            Ok(value) => Some(value),
            Err(message) => {
                self.issue(path, format!("{message}; {consequence}"));
                None
            }
        }
    }

    /// A port's protocol; the API's default is TCP.
    fn protocol(
        &mut self,
        protocol: Option<&str>,
        path: Place<'_>,
        consequence: &str,
    ) -> Option<Protocol> {
        match protocol {
            None => Some(Protocol::Tcp),
            Some(text) => self.enumerated(text, path, consequence),
        }
    }

    /// The status of the condition of type `wanted`: `None` when absent or `Unknown`.
    fn condition<'a>(
        &mut self,
        conditions: impl Iterator<Item = (&'a str, &'a str)>,
        wanted: &str,
        path: Place<'_>,
    ) -> Option<bool> {
        let (index, status) = conditions
            .enumerate()
            .find(|(_, (kind, _))| *kind == wanted)
            .map(|(i, (_, status))| (i, status))?;
        match status {
            "True" => Some(true),
            "False" => Some(false),
            "Unknown" => None,
            other => {
                self.issue(
                    path.index(index).field("status"),
                    format!("condition status {other:?} is not True, False or Unknown; ignored"),
                );
                None
            }
        }
    }
}

fn parse_cidr(text: &str) -> Result<IpNet, String> {
    text.parse::<IpNet>()
        .map(|net| net.trunc())
        .map_err(|_| format!("{text:?} is not a CIDR"))
}

fn port_number(number: i32) -> Result<u16, String> {
    u16::try_from(number)
        .ok()
        .filter(|&port| port != 0)
        .ok_or_else(|| format!("port {number} is not in 1-65535"))
}

fn parse_enum<T: ApiEnum>(text: &str) -> Result<T, String> {
    T::from_api(text).ok_or_else(|| {
        let expected: Vec<&str> = T::VALUES.iter().map(|(spelling, _)| *spelling).collect();
        format!("{text:?} is not one of {}", expected.join(", "))
    })
}

/// A selector as the API defines it; `Err` names the offending field.
fn label_selector(
    selector: meta::LabelSelector,
    path: Place<'_>,
) -> Result<LabelSelector, (FieldPath, String)> {
    let mut match_expressions = Vec::new();
    for (i, requirement) in selector
        .match_expressions
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let expressions = path.field("matchExpressions");
        let at = expressions.index(i);
        let operator = parse_enum::<SelectorOperator>(&requirement.operator)
            .map_err(|message| (at.field("operator").path(), message))?;
        let values: BTreeSet<String> = requirement.values.unwrap_or_default().into_iter().collect();
        let requirement = LabelSelectorRequirement::new(requirement.key, operator, values)
            .map_err(|e| (at.path(), e.to_string()))?;
        match_expressions.push(requirement);
    }
    Ok(LabelSelector {
        match_labels: selector.match_labels.unwrap_or_default(),
        match_expressions,
    })
}

fn object_reference(reference: wire::ObjectReference) -> ObjectReference {
    ObjectReference {
        kind: reference.kind,
        namespace: reference.namespace,
        name: reference.name,
    }
}

impl Typed for wire::Node {
    fn convert(self, meta: ObjectMeta, cx: &mut Conversion) -> Option<Object> {
        let spec = self.spec.unwrap_or_default();
        let status = self.status.unwrap_or_default();
        let spec_path = root().field("spec");
        let pod_cidrs = match spec.pod_cidrs.filter(|cidrs| !cidrs.is_empty()) {
            Some(cidrs) => {
                let path = spec_path.field("podCIDRs");
                cidrs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, cidr)| cx.cidr(cidr, path.index(i)))
                    .collect()
            }
            None => non_empty(spec.pod_cidr)
                .and_then(|cidr| cx.cidr(&cidr, spec_path.field("podCIDR")))
                .into_iter()
                .collect(),
        };
        let status_path = root().field("status");
        let addresses_path = status_path.field("addresses");
        let addresses = status
            .addresses
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .filter_map(|(i, address)| node_address(address, addresses_path.index(i), cx))
            .collect();
        let conditions = status.conditions.unwrap_or_default();
        let ready = cx.condition(
            conditions.iter().map(wire::Condition::pair),
            "Ready",
            status_path.field("conditions"),
        );
        Some(Object::Node(Node {
            meta,
            pod_cidrs,
            addresses,
            ready,
        }))
    }
}

fn node_address(
    address: wire::NodeAddress,
    path: Place<'_>,
    cx: &mut Conversion,
) -> Option<NodeAddress> {
    let ip_path = path.field("address");
    let (kind, address) = (
        address.type_.unwrap_or_default(),
        address.address.unwrap_or_default(),
    );
    Some(match kind.as_str() {
        "InternalIP" => NodeAddress::InternalIp(cx.ip(&address, ip_path)?),
        "ExternalIP" => NodeAddress::ExternalIp(cx.ip(&address, ip_path)?),
        "Hostname" => NodeAddress::Hostname(address),
        "InternalDNS" => NodeAddress::InternalDns(address),
        "ExternalDNS" => NodeAddress::ExternalDns(address),
        _ => NodeAddress::Other { kind, address },
    })
}

impl Typed for wire::Pod {
    fn convert(self, meta: ObjectMeta, cx: &mut Conversion) -> Option<Object> {
        let spec = self.spec.unwrap_or_default();
        let status = self.status.unwrap_or_default();
        let status_path = root().field("status");
        let ips = match status.pod_ips.filter(|ips| !ips.is_empty()) {
            Some(ips) => {
                let path = status_path.field("podIPs");
                ips.iter()
                    .enumerate()
                    .filter_map(|(i, ip)| {
                        let text = ip.ip.as_deref().unwrap_or_default();
                        cx.ip(text, path.index(i).field("ip"))
                    })
                    .collect()
            }
            None => non_empty(status.pod_ip)
                .and_then(|ip| cx.ip(&ip, status_path.field("podIP")))
                .into_iter()
                .collect(),
        };
        let host_ip =
            non_empty(status.host_ip).and_then(|ip| cx.ip(&ip, status_path.field("hostIP")));
        let phase = status
            .phase
            .as_deref()
            .and_then(|phase| cx.enumerated(phase, status_path.field("phase"), "phase ignored"));
        let conditions = status.conditions.unwrap_or_default();
        let conditions_path = status_path.field("conditions");
        let pairs = || conditions.iter().map(wire::Condition::pair);
        let ready = cx.condition(pairs(), "Ready", conditions_path);
        let containers_ready = cx.condition(pairs(), "ContainersReady", conditions_path);
        let statuses = status.container_statuses.unwrap_or_default();
        let spec_path = root().field("spec");
        let containers_path = spec_path.field("containers");
        let containers = spec
            .containers
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, container)| {
                let name = container.name.unwrap_or_default();
                let ready = statuses
                    .iter()
                    .find(|s| s.name.as_deref().unwrap_or_default() == name)
                    .map(|s| s.ready.unwrap_or_default());
                let container_path = containers_path.index(i);
                let ports_path = container_path.field("ports");
                let ports = container
                    .ports
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                    .filter_map(|(j, port)| container_port(port, ports_path.index(j), cx))
                    .collect();
                Container { name, ready, ports }
            })
            .collect();
        Some(Object::Pod(Pod {
            meta,
            node_name: non_empty(spec.node_name),
            host_network: spec.host_network.unwrap_or(false),
            ips,
            host_ip,
            phase,
            ready,
            containers_ready,
            containers,
        }))
    }
}

fn container_port(
    port: wire::ContainerPort,
    path: Place<'_>,
    cx: &mut Conversion,
) -> Option<ContainerPort> {
    let container_port = cx.port(
        port.container_port.unwrap_or_default(),
        path.field("containerPort"),
        "port ignored",
    )?;
    let protocol = cx.protocol(
        port.protocol.as_deref(),
        path.field("protocol"),
        "port ignored",
    )?;
    let host_port = match port.host_port {
        Some(number) => Some(cx.port(number, path.field("hostPort"), "port ignored")?),
        None => None,
    };
    Some(ContainerPort {
        name: non_empty(port.name),
        container_port,
        host_port,
        protocol,
    })
}

impl Typed for wire::Service {
    fn convert(self, meta: ObjectMeta, cx: &mut Conversion) -> Option<Object> {
        let spec = self.spec.unwrap_or_default();
        let spec_path = root().field("spec");
        let service_type = match spec.type_.as_deref() {
            None => ServiceType::ClusterIp,
            Some(text) => cx.enumerated(text, spec_path.field("type"), "object skipped")?,
        };
        let session_affinity = match spec.session_affinity.as_deref() {
            None => SessionAffinity::None,
            Some(text) => {
                cx.enumerated(text, spec_path.field("sessionAffinity"), "object skipped")?
            }
        };
        let listed = spec.cluster_ips.filter(|ips| !ips.is_empty());
        let listed_path = spec_path.field("clusterIPs");
        let (cluster_ip_texts, cluster_ip_path) = match listed {
            Some(ips) => (ips, None),
            None => (
                non_empty(spec.cluster_ip).into_iter().collect(),
                Some(spec_path.field("clusterIP")),
            ),
        };
        let headless = cluster_ip_texts.iter().any(|ip| ip == "None");
        let cluster_ips = if headless {
            Vec::new()
        } else {
            let mut ips = Vec::new();
            for (i, text) in cluster_ip_texts.iter().enumerate() {
                let ip = match cluster_ip_path {
                    Some(path) => cx.ip(text, path),
                    None => cx.ip(text, listed_path.index(i)),
                };
                ips.extend(ip);
            }
            ips
        };
        let external_ips_path = spec_path.field("externalIPs");
        let external_ips = spec
            .external_ips
            .iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, ip)| cx.ip(ip, external_ips_path.index(i)))
            .collect();
        let ingress = self
            .status
            .and_then(|status| status.load_balancer)
            .and_then(|lb| lb.ingress)
            .unwrap_or_default();
        let status_path = root().field("status");
        let load_balancer_path = status_path.field("loadBalancer");
        let ingress_path = load_balancer_path.field("ingress");
        let load_balancer_ips = ingress
            .iter()
            .enumerate()
            .filter_map(|(i, entry)| {
                let ip = entry.ip.as_deref().filter(|ip| !ip.is_empty())?;
                cx.ip(ip, ingress_path.index(i).field("ip"))
            })
            .collect();
        let ports_path = spec_path.field("ports");
        let ports = spec
            .ports
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .filter_map(|(i, port)| service_port(port, ports_path.index(i), cx))
            .collect();
        let traffic_policy = |cx: &mut Conversion, policy: Option<String>, field: &'static str| {
            non_empty(policy)
                .and_then(|text| cx.enumerated(&text, spec_path.field(field), "ignored"))
        };
        let external_traffic_policy =
            traffic_policy(cx, spec.external_traffic_policy, "externalTrafficPolicy");
        let internal_traffic_policy =
            traffic_policy(cx, spec.internal_traffic_policy, "internalTrafficPolicy");
        Some(Object::Service(Service {
            meta,
            service_type,
            cluster_ips,
            headless,
            external_ips,
            load_balancer_ips,
            external_name: non_empty(spec.external_name),
            ports,
            selector: spec
                .selector
                .map(|selector| selector.0)
                .filter(|selector| !selector.is_empty())
                .map(LabelSelector::from_labels),
            external_traffic_policy,
            internal_traffic_policy,
            session_affinity,
        }))
    }
}

fn service_port(
    port: wire::ServicePort,
    path: Place<'_>,
    cx: &mut Conversion,
) -> Option<ServicePort> {
    let number = cx.port(
        port.port.unwrap_or_default(),
        path.field("port"),
        "port ignored",
    )?;
    let protocol = cx.protocol(
        port.protocol.as_deref(),
        path.field("protocol"),
        "port ignored",
    )?;
    let target_port = match port.target_port {
        None => PortRef::Number(number),
        Some(wire::IntOrString::Int(target)) => {
            PortRef::Number(cx.port(target, path.field("targetPort"), "port ignored")?)
        }
        Some(wire::IntOrString::String(name)) => PortRef::Name(name),
    };
    let node_port = match port.node_port {
        Some(node_port) => Some(cx.port(node_port, path.field("nodePort"), "port ignored")?),
        None => None,
    };
    Some(ServicePort {
        name: non_empty(port.name),
        protocol,
        port: number,
        target_port,
        node_port,
    })
}

impl Typed for wire::EndpointSlice {
    fn convert(self, meta: ObjectMeta, cx: &mut Conversion) -> Option<Object> {
        let address_type: AddressType = cx.enumerated(
            self.address_type.as_deref().unwrap_or_default(),
            root().field("addressType"),
            "object skipped",
        )?;
        let ports_path = root().field("ports");
        let ports = self
            .ports
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .filter_map(|(i, port)| {
                let path = ports_path.index(i);
                let protocol = cx.protocol(
                    port.protocol.as_deref(),
                    path.field("protocol"),
                    "port ignored",
                )?;
                let number = match port.port {
                    Some(number) => Some(cx.port(number, path.field("port"), "port ignored")?),
                    None => None,
                };
                Some(EndpointPort {
                    name: non_empty(port.name),
                    protocol,
                    port: number,
                })
            })
            .collect();
        let endpoints_path = root().field("endpoints");
        let endpoints = self
            .endpoints
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, endpoint)| {
                let endpoint_path = endpoints_path.index(i);
                let path = endpoint_path.field("addresses");
                let texts = endpoint.addresses.unwrap_or_default();
                let (addresses, fqdns) = match address_type {
                    AddressType::Fqdn => (Vec::new(), texts),
                    AddressType::Ipv4 | AddressType::Ipv6 => {
                        (slice_addresses(&texts, address_type, path, cx), Vec::new())
                    }
                };
                let conditions = endpoint.conditions.unwrap_or_default();
                Endpoint {
                    addresses,
                    fqdns,
                    conditions: EndpointConditions {
                        ready: conditions.ready,
                        serving: conditions.serving,
                        terminating: conditions.terminating,
                    },
                    node_name: non_empty(endpoint.node_name),
                    target_ref: endpoint.target_ref.map(object_reference),
                }
            })
            .collect();
        Some(Object::EndpointSlice(EndpointSlice {
            service_name: meta.labels.get(SERVICE_NAME_LABEL).cloned(),
            meta,
            address_type,
            ports,
            endpoints,
        }))
    }
}

/// The addresses of an IPv4 or IPv6 slice; one of the other family is an issue.
fn slice_addresses(
    texts: &[String],
    address_type: AddressType,
    path: Place<'_>,
    cx: &mut Conversion,
) -> Vec<IpAddr> {
    texts
        .iter()
        .enumerate()
        .filter_map(|(i, text)| {
            let ip = cx.ip(text, path.index(i))?;
            let fits = match address_type {
                AddressType::Ipv4 => ip.is_ipv4(),
                AddressType::Ipv6 => ip.is_ipv6(),
                AddressType::Fqdn => false,
            };
            if !fits {
                cx.issue(
                    path.index(i),
                    format!("{ip} is not an address of this {address_type} slice; ignored"),
                );
            }
            fits.then_some(ip)
        })
        .collect()
}

impl Typed for wire::Endpoints {
    fn convert(self, meta: ObjectMeta, cx: &mut Conversion) -> Option<Object> {
        let subsets_path = root().field("subsets");
        let subsets = self
            .subsets
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, subset)| {
                let path = subsets_path.index(i);
                let mut addresses = |list: Option<Vec<wire::EndpointAddress>>,
                                     field: &'static str| {
                    let list_path = path.field(field);
                    list.unwrap_or_default()
                        .into_iter()
                        .enumerate()
                        .filter_map(|(j, address)| {
                            let text = address.ip.unwrap_or_default();
                            let ip = cx.ip(&text, list_path.index(j).field("ip"))?;
                            Some(EndpointAddress {
                                ip,
                                node_name: non_empty(address.node_name),
                                target_ref: address.target_ref.map(object_reference),
                            })
                        })
                        .collect()
                };
                let ready = addresses(subset.addresses, "addresses");
                let not_ready = addresses(subset.not_ready_addresses, "notReadyAddresses");
                let ports = subset
                    .ports
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                    .filter_map(|(j, port)| {
                        let ports_path = path.field("ports");
                        let at = ports_path.index(j);
                        Some(EndpointPort {
                            protocol: cx.protocol(
                                port.protocol.as_deref(),
                                at.field("protocol"),
                                "port ignored",
                            )?,
                            port: Some(cx.port(
                                port.port.unwrap_or_default(),
                                at.field("port"),
                                "port ignored",
                            )?),
                            name: non_empty(port.name),
                        })
                    })
                    .collect();
                EndpointSubset {
                    addresses: ready,
                    not_ready_addresses: not_ready,
                    ports,
                }
            })
            .collect();
        Some(Object::Endpoints(Endpoints { meta, subsets }))
    }
}

impl Typed for core::ConfigMap {
    fn convert(self, meta: ObjectMeta, _cx: &mut Conversion) -> Option<Object> {
        Some(Object::ConfigMap(ConfigMap {
            meta,
            data: self.data.unwrap_or_default(),
        }))
    }
}

impl Typed for apps::DaemonSet {
    fn convert(self, meta: ObjectMeta, cx: &mut Conversion) -> Option<Object> {
        let spec_path = root().field("spec");
        let selector = match label_selector(self.spec.selector, spec_path.field("selector")) {
            Ok(selector) => Some(selector),
            Err((path, message)) => {
                cx.issue_at(path, format!("{message}; selector ignored"));
                None
            }
        };
        let pod_spec = self.spec.template.spec.unwrap_or_default();
        let template_containers = |containers: Vec<core::Container>| {
            containers
                .into_iter()
                .map(|c| TemplateContainer {
                    name: c.name,
                    image: non_empty(c.image),
                    env: c
                        .env
                        .unwrap_or_default()
                        .into_iter()
                        .map(|var| {
                            let literal = if var.value_from.is_some() {
                                None
                            } else {
                                Some(var.value.unwrap_or_default())
                            };
                            (var.name, literal)
                        })
                        .collect(),
                    args: c.args.unwrap_or_default(),
                })
                .collect()
        };
        Some(Object::DaemonSet(DaemonSet {
            meta,
            selector,
            containers: template_containers(pod_spec.containers),
            init_containers: template_containers(pod_spec.init_containers.unwrap_or_default()),
        }))
    }
}

impl Typed for core::Namespace {
    fn convert(self, mut meta: ObjectMeta, _cx: &mut Conversion) -> Option<Object> {
        // The API server sets this label on every namespace (Kubernetes 1.21+),
        // so that a namespaceSelector can name a namespace; an object written
        // by hand or by an older server may lack it.
        meta.labels
            .entry(NAMESPACE_NAME_LABEL.to_owned())
            .or_insert_with(|| meta.name.clone());
        Some(Object::Namespace(Namespace { meta }))
    }
}

impl Typed for networking::NetworkPolicy {
    fn convert(self, meta: ObjectMeta, cx: &mut Conversion) -> Option<Object> {
        let spec = self.spec.unwrap_or_default();
        let spec_path = root().field("spec");
        // Without a readable pod selector or policy types nothing about the
        // policy can be evaluated; it is kept as unreadable, so that the
        // verdicts it might change are unknown rather than "not isolated".
        let unreadable = |meta, path: FieldPath, message: String, cx: &mut Conversion| {
            let reason = format!("{path}: {message}");
            cx.issue_at(
                path,
                format!("{message}; policy unreadable: verdicts in its namespace are unknown"),
            );
            Some(Object::UnreadableNetworkPolicy(UnreadableNetworkPolicy {
                meta,
                reason,
            }))
        };
        let pod_selector = match spec.pod_selector {
            None => LabelSelector::default(),
            Some(selector) => match label_selector(selector, spec_path.field("podSelector")) {
                Ok(selector) => selector,
                Err((path, message)) => return unreadable(meta, path, message, cx),
            },
        };
        let ingress = spec.ingress.unwrap_or_default();
        let egress = spec.egress.unwrap_or_default();
        let policy_types = match spec.policy_types.filter(|types| !types.is_empty()) {
            // The API's defaulting.
            None => PolicyTypes {
                ingress: true,
                egress: !egress.is_empty(),
            },
            Some(types) => {
                let mut policy_types = PolicyTypes {
                    ingress: false,
                    egress: false,
                };
                for (i, text) in types.iter().enumerate() {
                    match text.as_str() {
                        "Ingress" => policy_types.ingress = true,
                        "Egress" => policy_types.egress = true,
                        other => {
                            return unreadable(
                                meta,
                                spec_path.field("policyTypes").index(i).path(),
                                format!("{other:?} is not one of Ingress, Egress"),
                                cx,
                            );
                        }
                    }
                }
                policy_types
            }
        };
        let ingress_path = spec_path.field("ingress");
        let ingress = ingress
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                let path = ingress_path.index(i);
                policy_rule(rule.from, rule.ports, path, "from", cx)
            })
            .collect();
        let egress_path = spec_path.field("egress");
        let egress = egress
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                let path = egress_path.index(i);
                policy_rule(rule.to, rule.ports, path, "to", cx)
            })
            .collect();
        Some(Object::NetworkPolicy(NetworkPolicy {
            meta,
            pod_selector,
            policy_types,
            ingress,
            egress,
        }))
    }
}

/// One ingress or egress rule. Peers and ports that cannot be read are kept
/// as `Invalid` (and reported): dropping one would widen or narrow the rule.
fn policy_rule(
    peers: Option<Vec<networking::NetworkPolicyPeer>>,
    ports: Option<Vec<networking::NetworkPolicyPort>>,
    path: Place<'_>,
    peers_field: &'static str,
    cx: &mut Conversion,
) -> NetworkPolicyRule {
    let peers = peers
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, peer)| {
            let peers_path = path.field(peers_field);
            policy_peer(peer, peers_path.index(i)).unwrap_or_else(|(path, reason)| {
                cx.issue_at(
                    path,
                    format!("{reason}; this peer is unknown to evaluation"),
                );
                NetworkPolicyPeer::Invalid { reason }
            })
        })
        .collect();
    let ports = ports
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, port)| {
            let ports_path = path.field("ports");
            policy_port(port, ports_path.index(i)).unwrap_or_else(|(path, reason)| {
                cx.issue_at(
                    path,
                    format!("{reason}; this port is unknown to evaluation"),
                );
                NetworkPolicyPort::Invalid { reason }
            })
        })
        .collect();
    NetworkPolicyRule { peers, ports }
}

fn policy_peer(
    peer: networking::NetworkPolicyPeer,
    path: Place<'_>,
) -> Result<NetworkPolicyPeer, (FieldPath, String)> {
    let pods = peer
        .pod_selector
        .map(|s| label_selector(s, path.field("podSelector")))
        .transpose()?;
    let namespaces = peer
        .namespace_selector
        .map(|s| label_selector(s, path.field("namespaceSelector")))
        .transpose()?;
    match (pods, namespaces, peer.ip_block) {
        (Some(pods), None, None) => Ok(NetworkPolicyPeer::Pods(pods)),
        (None, Some(namespaces), None) => Ok(NetworkPolicyPeer::Namespaces(namespaces)),
        (Some(pods), Some(namespaces), None) => {
            Ok(NetworkPolicyPeer::PodsInNamespaces { pods, namespaces })
        }
        (None, None, Some(block)) => {
            let block_path = path.field("ipBlock");
            let cidr = parse_cidr(&block.cidr).map_err(|m| (block_path.field("cidr").path(), m))?;
            let except = block
                .except
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    let except = block_path.field("except");
                    parse_cidr(text).map_err(|m| (except.index(i).path(), m))
                })
                .collect::<Result<_, _>>()?;
            Ok(NetworkPolicyPeer::IpBlock { cidr, except })
        }
        (None, None, None) => Err((
            path.path(),
            "a peer needs podSelector, namespaceSelector or ipBlock".to_owned(),
        )),
        (_, _, Some(_)) => Err((
            path.field("ipBlock").path(),
            "ipBlock cannot be combined with podSelector or namespaceSelector".to_owned(),
        )),
    }
}

fn policy_port(
    port: networking::NetworkPolicyPort,
    path: Place<'_>,
) -> Result<NetworkPolicyPort, (FieldPath, String)> {
    let protocol = match port.protocol.as_deref() {
        None => Protocol::Tcp,
        Some(text) => parse_enum(text).map_err(|m| (path.field("protocol").path(), m))?,
    };
    let number =
        |n: i32, field: &'static str| port_number(n).map_err(|m| (path.field(field).path(), m));
    let start = match port.port {
        None => None,
        Some(IntOrString::Int(n)) => Some(PortRef::Number(number(n, "port")?)),
        Some(IntOrString::String(name)) => Some(PortRef::Name(name)),
    };
    let end_port = port.end_port.map(|n| number(n, "endPort")).transpose()?;
    if let Some(end) = end_port {
        match start {
            Some(PortRef::Number(start)) if start <= end => {}
            Some(PortRef::Number(start)) => {
                return Err((
                    path.field("endPort").path(),
                    format!("endPort {end} is below port {start}"),
                ));
            }
            _ => {
                return Err((
                    path.field("endPort").path(),
                    "endPort needs a numeric port".to_owned(),
                ));
            }
        }
    }
    Ok(NetworkPolicyPort::Port {
        protocol,
        port: start,
        end_port,
    })
}
