//! The cluster's objects as scripts see them: maps in the API's words
//! (a Service, an EndpointSlice, a DaemonSet's containers), and any other
//! object as written.

use std::net::IpAddr;

use rhai::{Array, Dynamic, Map};

use super::{int, map, opt, text};
use crate::snapshot::cluster::ApiEnum as _;
use crate::snapshot::cluster::pod_reads::{self, PodRead};
use crate::snapshot::cluster::{
    ConfigMap, DaemonSet, EndpointAddress, EndpointPort, EndpointSlice, Endpoints, IpOwner,
    NodeAddress, ObjectReference, PortRef, Service, TemplateContainer, TrafficPolicy,
};

/// A ConfigMap as scripts see it among objects: `#{namespace, name, data}`.
pub fn config_map_map(cm: &ConfigMap) -> Dynamic {
    map([
        ("namespace", text(&cm.meta.namespace)),
        ("name", text(&cm.meta.name)),
        ("data", string_map(Some(&cm.data))),
    ])
}

/// A DaemonSet as scripts see it: `#{namespace, name, labels, containers,
/// init_containers}`, each container `#{name, image, env, args}` with `env`
/// a map of each variable's literal value (`()` where it is set from
/// elsewhere).
pub fn daemon_set_map(ds: &DaemonSet) -> Dynamic {
    let containers = |containers: &[TemplateContainer]| -> Dynamic {
        let list: Array = containers
            .iter()
            .map(|c| {
                let env: Map = c
                    .env
                    .iter()
                    .map(|(name, value)| (name.into(), opt(value.clone())))
                    .collect();
                let args: Array = c.args.iter().map(text).collect();
                map([
                    ("name", text(&c.name)),
                    ("image", opt(c.image.clone())),
                    ("env", Dynamic::from_map(env)),
                    ("args", Dynamic::from_array(args)),
                ])
            })
            .collect();
        Dynamic::from_array(list)
    };
    map([
        ("namespace", text(&ds.meta.namespace)),
        ("name", text(&ds.meta.name)),
        ("labels", string_map(Some(&ds.meta.labels))),
        ("containers", containers(&ds.containers)),
        ("init_containers", containers(&ds.init_containers)),
    ])
}

pub(super) fn string_map(map: Option<&std::collections::BTreeMap<String, String>>) -> Dynamic {
    let entries: Map = map
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.into(), text(v)))
        .collect();
    Dynamic::from_map(entries)
}

pub(super) fn container(c: &crate::snapshot::cluster::Container) -> Dynamic {
    let ports: Array = c
        .ports
        .iter()
        .map(|p| {
            map([
                ("name", opt(p.name.clone())),
                ("port", int(p.container_port)),
                ("protocol", text(p.protocol.api_name())),
            ])
        })
        .collect();
    map([
        ("name", text(&c.name)),
        ("ready", opt(c.ready)),
        ("ports", Dynamic::from_array(ports)),
    ])
}

/// One of a Node's `status.addresses`: `#{type, address}` as written, the
/// address an `Ip` for `InternalIP` and `ExternalIP`.
pub(super) fn node_address(address: &NodeAddress) -> Dynamic {
    let (kind, address) = match address {
        NodeAddress::InternalIp(ip) => ("InternalIP", Dynamic::from(*ip)),
        NodeAddress::ExternalIp(ip) => ("ExternalIP", Dynamic::from(*ip)),
        NodeAddress::Hostname(name) => ("Hostname", text(name)),
        NodeAddress::InternalDns(name) => ("InternalDNS", text(name)),
        NodeAddress::ExternalDns(name) => ("ExternalDNS", text(name)),
        NodeAddress::Other { kind, address } => (kind.as_str(), text(address)),
    };
    map([("type", text(kind)), ("address", address)])
}

pub(super) fn ip_owner(owner: &IpOwner) -> Dynamic {
    let (namespace, name) = match owner {
        IpOwner::Pod {
            namespace, name, ..
        } => {
            pod_reads::record(|| PodRead::Namespace {
                namespace: namespace.clone(),
                name: name.clone(),
            });
            (namespace.as_str(), name.as_str())
        }
        IpOwner::Node { name } => ("", name.as_str()),
        IpOwner::ServiceClusterIp { namespace, name }
        | IpOwner::ServiceExternalIp { namespace, name }
        | IpOwner::ServiceLoadBalancerIp { namespace, name } => (namespace.as_str(), name.as_str()),
    };
    map([
        ("kind", text(owner.kind())),
        ("namespace", text(namespace)),
        ("name", text(name)),
    ])
}

fn ips(ips: &[IpAddr]) -> Dynamic {
    Dynamic::from_array(ips.iter().map(|ip| Dynamic::from(*ip)).collect())
}

/// A Service as scripts see it (`cluster.service`, `cluster.services`, and
/// `object` of a Service check): its spec in the API's words, the traffic
/// policies with the API's default (`Cluster`) when unset.
pub fn service_map(service: &Service) -> Dynamic {
    let ports: Array = service
        .ports
        .iter()
        .map(|p| {
            let target_port = match &p.target_port {
                PortRef::Number(number) => int(*number),
                PortRef::Name(name) => text(name),
            };
            map([
                ("name", opt(p.name.clone())),
                ("port", int(p.port)),
                ("protocol", text(p.protocol.api_name())),
                ("target_port", target_port),
                ("node_port", opt(p.node_port.map(i64::from))),
            ])
        })
        .collect();
    let policy = |policy: Option<TrafficPolicy>| text(policy.unwrap_or(TrafficPolicy::Cluster));
    map([
        ("namespace", text(&service.meta.namespace)),
        ("name", text(&service.meta.name)),
        ("type", text(service.service_type)),
        ("cluster_ips", ips(&service.cluster_ips)),
        ("headless", service.headless.into()),
        ("external_ips", ips(&service.external_ips)),
        ("load_balancer_ips", ips(&service.load_balancer_ips)),
        ("external_name", opt(service.external_name.clone())),
        (
            "selector",
            string_map(service.selector.as_ref().map(|s| &s.match_labels)),
        ),
        (
            "external_traffic_policy",
            policy(service.external_traffic_policy),
        ),
        (
            "internal_traffic_policy",
            policy(service.internal_traffic_policy),
        ),
        ("session_affinity", text(service.session_affinity)),
        ("ports", Dynamic::from_array(ports)),
        ("source", text(&service.meta.source)),
    ])
}

fn endpoint_ports(ports: &[EndpointPort]) -> Dynamic {
    Dynamic::from_array(
        ports
            .iter()
            .map(|p| {
                map([
                    ("name", opt(p.name.clone())),
                    ("port", opt(p.port.map(i64::from))),
                    ("protocol", text(p.protocol.api_name())),
                ])
            })
            .collect(),
    )
}

fn object_reference(reference: Option<&ObjectReference>) -> Dynamic {
    opt(reference.map(|r| {
        map([
            ("kind", opt(r.kind.clone())),
            ("namespace", opt(r.namespace.clone())),
            ("name", opt(r.name.clone())),
        ])
    }))
}

/// An EndpointSlice as written; unset conditions stay `()`, so that the
/// script applies the API's reading of them.
pub(super) fn endpoint_slice_map(slice: &EndpointSlice) -> Dynamic {
    let endpoints: Array = slice
        .endpoints
        .iter()
        .map(|e| {
            let conditions = map([
                ("ready", opt(e.conditions.ready)),
                ("serving", opt(e.conditions.serving)),
                ("terminating", opt(e.conditions.terminating)),
            ]);
            map([
                ("addresses", ips(&e.addresses)),
                ("conditions", conditions),
                ("node_name", opt(e.node_name.clone())),
                ("target_ref", object_reference(e.target_ref.as_ref())),
            ])
        })
        .collect();
    map([
        ("name", text(&slice.meta.name)),
        ("address_type", text(slice.address_type)),
        ("ports", endpoint_ports(&slice.ports)),
        ("endpoints", Dynamic::from_array(endpoints)),
        ("source", text(&slice.meta.source)),
    ])
}

/// A core/v1 Endpoints object as written.
pub(super) fn endpoints_map(endpoints: &Endpoints) -> Dynamic {
    let addresses = |addresses: &[EndpointAddress]| -> Dynamic {
        Dynamic::from_array(
            addresses
                .iter()
                .map(|a| {
                    map([
                        ("ip", Dynamic::from(a.ip)),
                        ("node_name", opt(a.node_name.clone())),
                        ("target_ref", object_reference(a.target_ref.as_ref())),
                    ])
                })
                .collect(),
        )
    };
    let subsets: Array = endpoints
        .subsets
        .iter()
        .map(|s| {
            map([
                ("addresses", addresses(&s.addresses)),
                ("not_ready_addresses", addresses(&s.not_ready_addresses)),
                ("ports", endpoint_ports(&s.ports)),
            ])
        })
        .collect();
    map([
        ("name", text(&endpoints.meta.name)),
        ("subsets", Dynamic::from_array(subsets)),
        ("source", text(&endpoints.meta.source)),
    ])
}

/// A Kubernetes object as written, for scripts: JSON to rhai values.
pub fn json_to_dynamic(value: &serde_json::Value) -> Dynamic {
    use serde_json::Value as Json;
    match value {
        Json::Null => Dynamic::UNIT,
        Json::Bool(b) => (*b).into(),
        Json::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().map_or(Dynamic::UNIT, Dynamic::from),
        },
        Json::String(s) => s.clone().into(),
        Json::Array(items) => Dynamic::from_array(items.iter().map(json_to_dynamic).collect()),
        Json::Object(entries) => Dynamic::from_map(
            entries
                .iter()
                .map(|(k, v)| (k.into(), json_to_dynamic(v)))
                .collect(),
        ),
    }
}
