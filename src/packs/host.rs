//! The host API: the types and functions pack scripts call.
//!
//! Every function is documented with an example in `docs/packs.md` ("Host
//! API"); the test at the bottom of this file runs each of those examples, so
//! the documentation cannot drift from the code. Script integers are `i64`:
//! conversions to and from the model's `u16`/`u32` happen here, checked.
//!
//! A query whose dump file was not collected raises [`Insufficient`]: the
//! check becomes an *unknown* finding, never a guess and never a pass.

use std::net::IpAddr;

use ipnet::IpNet;
use rhai::{Array, Dynamic, Engine, EvalAltResult, Map, Position};
use sha1::{Digest, Sha1};

use super::scope::{ClusterRef, Context, HopScope, HopStop, NetnsRef, NodeRef, Packet, PodRef};
use crate::netstack::namespace::Modelled;
use crate::netstack::netfilter;
use crate::netstack::routing::{Fib, FlowKey, LookupOutcome, table_name};
use crate::snapshot::NetnsId;
use crate::snapshot::cluster::ApiEnum as _;
use crate::snapshot::cluster::{
    ConfigMap, DaemonSet, DirectionVerdict, EndpointAddress, EndpointPort, EndpointSlice,
    Endpoints, IpOwner, MAX_LISTED, Node, NodeAddress, ObjectReference, PolicyFlow, PolicyOutcome,
    PortRef, Protocol as ClusterProtocol, Service, TemplateContainer, TrafficPolicy,
};
use crate::snapshot::netns::NetnsDump;
use crate::snapshot::netns::addr::Family;
use crate::snapshot::netns::fdb::FdbEntry;
use crate::snapshot::netns::iptables::{Protocol, Target};
use crate::snapshot::netns::link::{Link, LinkFlag, LinkKind, OperState};
use crate::snapshot::netns::neigh::Neighbour;
use crate::snapshot::netns::route::{Destination, Route};
use crate::snapshot::netns::sockets::LocalAddress;
use crate::snapshot::netns::sysctl::Sysctls;

type Fallible<T> = Result<T, Box<EvalAltResult>>;

/// Raised when the snapshot cannot answer a question (a dump not collected,
/// a route lookup the model cannot decide): the check's outcome is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insufficient(pub String);

impl Insufficient {
    fn raise<T>(reason: impl Into<String>) -> Fallible<T> {
        Err(Box::new(EvalAltResult::ErrorRuntime(
            Dynamic::from(Insufficient(reason.into())),
            Position::NONE,
        )))
    }

    /// The reason, when `error` (or an error it wraps) is one of these.
    pub fn in_error(error: &EvalAltResult) -> Option<String> {
        match error {
            EvalAltResult::ErrorRuntime(value, _) => {
                value.clone().try_cast::<Insufficient>().map(|i| i.0)
            }
            EvalAltResult::ErrorInFunctionCall(_, _, inner, _)
            | EvalAltResult::ErrorInModule(_, inner, _) => Insufficient::in_error(inner),
            _ => None,
        }
    }
}

fn fail<T>(message: impl Into<String>) -> Fallible<T> {
    Err(message.into().into())
}

fn opt<T: Into<Dynamic>>(value: Option<T>) -> Dynamic {
    value.map_or(Dynamic::UNIT, Into::into)
}

fn text(value: impl ToString) -> Dynamic {
    value.to_string().into()
}

fn int(value: impl Into<i64>) -> Dynamic {
    Dynamic::from(value.into())
}

fn map<const N: usize>(entries: [(&str, Dynamic); N]) -> Dynamic {
    let map: Map = entries
        .into_iter()
        .map(|(key, value)| (key.into(), value))
        .collect();
    map.into()
}

fn parse_ip(text: &str) -> Fallible<IpAddr> {
    text.trim()
        .parse()
        .or_else(|_| fail(format!("{text:?} is not an IP address")))
}

fn parse_cidr(text: &str) -> Fallible<IpNet> {
    text.trim()
        .parse()
        .or_else(|_| fail(format!("{text:?} is not a network in CIDR notation")))
}

/// An IP given as `Ip` or as a string.
fn as_ip(value: &Dynamic) -> Fallible<IpAddr> {
    host_value_or_text(value, "an Ip", parse_ip)
}

/// A network given as `Cidr` or as a string.
fn as_cidr(value: &Dynamic) -> Fallible<IpNet> {
    host_value_or_text(value, "a Cidr", parse_cidr)
}

/// A host value of type `T` given as itself or as text `parse` reads.
fn host_value_or_text<T: Clone + 'static>(
    value: &Dynamic,
    what: &str,
    parse: fn(&str) -> Fallible<T>,
) -> Fallible<T> {
    if let Some(found) = value.clone().try_cast::<T>() {
        return Ok(found);
    }
    match value.clone().into_immutable_string() {
        Ok(s) => parse(&s),
        Err(kind) => fail(format!("expected {what} or a string, found {kind}")),
    }
}

/// A script value as text, as the script's own `to_string` shows it:
/// `Dynamic`'s `Display` names the Rust type of host values instead.
pub fn display(value: &Dynamic) -> String {
    if let Some(ip) = value.clone().try_cast::<IpAddr>() {
        return ip.to_string();
    }
    if let Some(net) = value.clone().try_cast::<IpNet>() {
        return net.to_string();
    }
    if let Some(node) = value.clone().try_cast::<NodeRef>() {
        return format!("node/{}", node.name);
    }
    if let Some(pod) = value.clone().try_cast::<PodRef>() {
        return format!("{}/{}", pod.namespace, pod.name);
    }
    value.to_string()
}

/// Registers every type and function of the host API.
pub fn register(engine: &mut Engine) {
    register_addresses(engine);
    register_packet(engine);
    register_cluster(engine);
    register_node_namespaces(engine);
    register_netns(engine);
    register_context(engine);
    engine.register_fn("sha1_hex", |s: &str| {
        let digest = Sha1::digest(s.as_bytes());
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    });
    engine.register_fn("sysctl_key", sysctl_key);
    engine
        .register_type_with_name::<Insufficient>("Insufficient")
        .register_fn("to_string", |i: &mut Insufficient| i.0.clone());
}

fn sysctl_key(family: &str, ifname: &str, setting: &str) -> Fallible<String> {
    let family = match family {
        "ipv4" => Family::Ipv4,
        "ipv6" => Family::Ipv6,
        other => return fail(format!("family {other:?} is neither ipv4 nor ipv6")),
    };
    Ok(Sysctls::interface_key(family, ifname, setting))
}

fn register_addresses(engine: &mut Engine) {
    engine
        .register_type_with_name::<IpAddr>("Ip")
        .register_fn("ip", parse_ip)
        .register_fn("to_string", |ip: &mut IpAddr| ip.to_string())
        .register_fn("to_debug", |ip: &mut IpAddr| ip.to_string())
        .register_fn("==", |a: IpAddr, b: IpAddr| a == b)
        .register_fn("!=", |a: IpAddr, b: IpAddr| a != b)
        .register_get("is_ipv4", |ip: &mut IpAddr| ip.is_ipv4());
    engine
        .register_type_with_name::<IpNet>("Cidr")
        .register_fn("cidr", parse_cidr)
        .register_fn("to_string", |net: &mut IpNet| net.to_string())
        .register_fn("to_debug", |net: &mut IpNet| net.to_string())
        .register_fn("==", |a: IpNet, b: IpNet| a == b)
        .register_fn("!=", |a: IpNet, b: IpNet| a != b)
        .register_fn("contains", |net: &mut IpNet, ip: Dynamic| {
            as_ip(&ip).map(|ip| net.contains(&ip))
        })
        .register_fn("contains_net", |net: &mut IpNet, other: IpNet| {
            net.contains(&other)
        })
        .register_get("prefix_len", |net: &mut IpNet| i64::from(net.prefix_len()))
        .register_get("network", |net: &mut IpNet| net.network())
        .register_get("broadcast", |net: &mut IpNet| net.broadcast())
        .register_fn("nth_host", nth_host);
}

/// The `n`th address of `net` counted from its network address (0 is the
/// network address itself), as Flannel and Calico number gateways.
fn nth_host(net: &mut IpNet, n: i64) -> Fallible<IpAddr> {
    let Ok(n) = u128::try_from(n) else {
        return fail(format!("nth_host({n}): n must not be negative"));
    };
    let size = 1u128 << (net.max_prefix_len() - net.prefix_len()).min(127);
    if n >= size {
        return fail(format!("nth_host({n}): {net} has {size} addresses"));
    }
    Ok(match net.network() {
        IpAddr::V4(base) => IpAddr::from(std::net::Ipv4Addr::from(
            (u128::from(u32::from(base)) + n) as u32,
        )),
        IpAddr::V6(base) => IpAddr::from(std::net::Ipv6Addr::from(u128::from(base) + n)),
    })
}

fn register_packet(engine: &mut Engine) {
    engine
        .register_type_with_name::<Packet>("Packet")
        .register_get("src", |p: &mut Packet| p.src)
        .register_get("dst", |p: &mut Packet| p.dst)
        .register_get("protocol", |p: &mut Packet| p.protocol.as_str().to_owned())
        .register_get("src_port", |p: &mut Packet| opt(p.src_port.map(i64::from)))
        .register_get("dst_port", |p: &mut Packet| opt(p.dst_port.map(i64::from)))
        .register_get("mark", |p: &mut Packet| i64::from(p.mark))
        .register_get("size", |p: &mut Packet| i64::from(p.size));
    engine
        .register_type_with_name::<std::sync::Arc<HopScope>>("Hop")
        .register_get("netns", |h: &mut std::sync::Arc<HopScope>| NetnsRef {
            snapshot: h.snapshot.clone(),
            id: h.netns.clone(),
        })
        .register_get("node", |h: &mut std::sync::Arc<HopScope>| {
            opt(NodeRef::new(&h.snapshot, h.netns.node()).map(Dynamic::from))
        })
        .register_get("in_iface", |h: &mut std::sync::Arc<HopScope>| {
            opt(h.in_iface.clone())
        })
        .register_get("out_iface", |h: &mut std::sync::Arc<HopScope>| {
            opt(h.out_iface.clone())
        })
        .register_get("out_packet", |h: &mut std::sync::Arc<HopScope>| {
            opt(h.out_packet.clone().map(Dynamic::from))
        })
        .register_get("forwarding", |h: &mut std::sync::Arc<HopScope>| {
            h.forwarding
        })
        .register_get("delivers_locally", |h: &mut std::sync::Arc<HopScope>| {
            h.delivers_locally
        })
        .register_get("packet", |h: &mut std::sync::Arc<HopScope>| {
            h.packet.clone()
        })
        .register_get("reply", |h: &mut std::sync::Arc<HopScope>| h.reply)
        .register_get("origin", |h: &mut std::sync::Arc<HopScope>| {
            h.origin().clone()
        })
        .register_get("stopped", |h: &mut std::sync::Arc<HopScope>| {
            opt(h.stopped.as_ref().map(hop_stop))
        });
}

/// `hop.stopped`: `#{disposition, reason, packet, table, chain, rule, line,
/// text, evidence}`, the netfilter fields `()` unless netfilter stopped the
/// packet.
fn hop_stop(stop: &HopStop) -> Dynamic {
    let rule = stop.netfilter.as_ref();
    let number = |n: Option<usize>| opt(n.map(|n| i64::try_from(n).unwrap_or(i64::MAX)));
    map([
        ("disposition", text(&stop.disposition)),
        ("reason", text(&stop.reason)),
        ("packet", opt(stop.packet.clone().map(Dynamic::from))),
        ("table", opt(rule.map(|r| r.table.clone()))),
        ("chain", opt(rule.map(|r| r.chain.clone()))),
        ("rule", number(rule.and_then(|r| r.number))),
        ("line", number(rule.and_then(|r| r.line))),
        ("text", opt(rule.map(|r| r.text.clone()))),
        ("evidence", opt(rule.map(|r| r.evidence.clone()))),
    ])
}

fn register_cluster(engine: &mut Engine) {
    engine
        .register_type_with_name::<NodeRef>("Node")
        .register_fn("to_string", |n: &mut NodeRef| format!("node/{}", n.name))
        .register_get("name", |n: &mut NodeRef| n.name.clone())
        .register_get("pod_cidrs", |n: &mut NodeRef| -> Array {
            n.get()
                .map(|node| node.pod_cidrs.iter().map(|c| Dynamic::from(*c)).collect())
                .unwrap_or_default()
        })
        .register_get("pod_cidr", |n: &mut NodeRef| {
            opt(n
                .get()
                .and_then(|node| node.pod_cidrs.first().copied())
                .map(Dynamic::from))
        })
        .register_get("internal_ip", |n: &mut NodeRef| {
            opt(n.get().and_then(Node::internal_ip).map(Dynamic::from))
        })
        .register_get("addresses", |n: &mut NodeRef| -> Array {
            n.get()
                .map(|node| node.addresses.iter().map(node_address).collect())
                .unwrap_or_default()
        })
        .register_get("ready", |n: &mut NodeRef| {
            opt(n.get().and_then(|node| node.ready))
        })
        .register_get("labels", |n: &mut NodeRef| {
            string_map(n.get().map(|node| &node.meta.labels))
        })
        .register_get("annotations", |n: &mut NodeRef| {
            string_map(n.get().map(|node| &node.meta.annotations))
        });

    engine
        .register_type_with_name::<PodRef>("Pod")
        .register_fn("to_string", |p: &mut PodRef| {
            format!("{}/{}", p.namespace, p.name)
        })
        .register_get("namespace", |p: &mut PodRef| p.namespace.clone())
        .register_get("name", |p: &mut PodRef| p.name.clone())
        .register_get("node_name", |p: &mut PodRef| {
            opt(p.get().and_then(|pod| pod.node_name.clone()))
        })
        .register_get("ip", |p: &mut PodRef| {
            opt(p
                .get()
                .and_then(|pod| pod.ips.first().copied())
                .map(Dynamic::from))
        })
        .register_get("ips", |p: &mut PodRef| -> Array {
            p.get()
                .map(|pod| pod.ips.iter().map(|ip| Dynamic::from(*ip)).collect())
                .unwrap_or_default()
        })
        .register_get("host_network", |p: &mut PodRef| {
            p.get().is_some_and(|pod| pod.host_network)
        })
        .register_get("phase", |p: &mut PodRef| {
            opt(p
                .get()
                .and_then(|pod| pod.phase)
                .map(|phase| phase.as_str().to_owned()))
        })
        .register_get("ready", |p: &mut PodRef| {
            opt(p.get().and_then(|pod| pod.ready))
        })
        .register_get("containers_ready", |p: &mut PodRef| {
            opt(p.get().and_then(|pod| pod.containers_ready))
        })
        .register_get("containers", |p: &mut PodRef| -> Array {
            p.get()
                .map(|pod| pod.containers.iter().map(container).collect())
                .unwrap_or_default()
        })
        .register_get("labels", |p: &mut PodRef| {
            string_map(p.get().map(|pod| &pod.meta.labels))
        });

    engine
        .register_type_with_name::<ClusterRef>("Cluster")
        .register_fn("node", |c: &mut ClusterRef, name: &str| {
            opt(NodeRef::new(&c.snapshot, name).map(Dynamic::from))
        })
        .register_fn("nodes", |c: &mut ClusterRef| -> Array {
            c.snapshot
                .cluster
                .nodes()
                .filter_map(|n| NodeRef::new(&c.snapshot, &n.meta.name))
                .map(Dynamic::from)
                .collect()
        })
        .register_fn("pod", |c: &mut ClusterRef, namespace: &str, name: &str| {
            opt(PodRef::new(&c.snapshot, namespace, name).map(Dynamic::from))
        })
        .register_fn("pods", |c: &mut ClusterRef| -> Array {
            c.snapshot
                .cluster
                .pods()
                .filter_map(|p| PodRef::new(&c.snapshot, &p.meta.namespace, &p.meta.name))
                .map(Dynamic::from)
                .collect()
        })
        // The nodes whose (first) pod CIDR holds an address: where a CNI
        // that routes a CIDR per node sends it, without a script looping
        // over every node of a large cluster for each packet.
        .register_fn(
            "nodes_with_pod_cidr",
            |c: &mut ClusterRef, address: Dynamic| -> Fallible<Array> {
                let address = as_ip(&address)?;
                Ok(c.snapshot
                    .cluster
                    .nodes()
                    .filter(|n| {
                        n.pod_cidrs
                            .first()
                            .is_some_and(|net| net.contains(&address))
                    })
                    .filter_map(|n| NodeRef::new(&c.snapshot, &n.meta.name))
                    .map(Dynamic::from)
                    .collect())
            },
        )
        .register_fn("pods_on", |c: &mut ClusterRef, node: &str| -> Array {
            c.snapshot
                .cluster
                .pods_on(node)
                .filter_map(|p| PodRef::new(&c.snapshot, &p.meta.namespace, &p.meta.name))
                .map(Dynamic::from)
                .collect()
        })
        // The pods with an address in `net`: a CNI's block of addresses.
        .register_fn(
            "pods_in",
            |c: &mut ClusterRef, net: Dynamic| -> Fallible<Array> {
                let net = as_cidr(&net)?;
                Ok(c.snapshot
                    .cluster
                    .pods()
                    .filter(|p| p.ips.iter().any(|ip| net.contains(ip)))
                    .filter_map(|p| PodRef::new(&c.snapshot, &p.meta.namespace, &p.meta.name))
                    .map(Dynamic::from)
                    .collect())
            },
        )
        .register_fn(
            "pods_labelled",
            |c: &mut ClusterRef, key: &str, value: &str| -> Array {
                c.snapshot
                    .cluster
                    .pods()
                    .filter(|p| p.meta.labels.get(key).map(String::as_str) == Some(value))
                    .filter_map(|p| PodRef::new(&c.snapshot, &p.meta.namespace, &p.meta.name))
                    .map(Dynamic::from)
                    .collect()
            },
        )
        .register_fn(
            "service",
            |c: &mut ClusterRef, namespace: &str, name: &str| {
                opt(c.snapshot.cluster.service(namespace, name).map(service_map))
            },
        )
        .register_fn("services", |c: &mut ClusterRef| -> Array {
            c.snapshot.cluster.services().map(service_map).collect()
        })
        .register_fn("service_by_node_port", service_by_node_port)
        .register_fn(
            "service_pods",
            |c: &mut ClusterRef, namespace: &str, name: &str| -> Array {
                let cluster = &c.snapshot.cluster;
                let Some(selector) = cluster
                    .service(namespace, name)
                    .and_then(|s| s.selector.as_ref())
                else {
                    return Array::new();
                };
                cluster
                    .pods_matching(namespace, selector)
                    .filter_map(|p| PodRef::new(&c.snapshot, &p.meta.namespace, &p.meta.name))
                    .map(Dynamic::from)
                    .collect()
            },
        )
        .register_fn(
            "endpoint_slices",
            |c: &mut ClusterRef, namespace: &str, name: &str| -> Array {
                let cluster = &c.snapshot.cluster;
                cluster
                    .service(namespace, name)
                    .map(|service| {
                        cluster
                            .endpoint_slices_for(service)
                            .map(endpoint_slice_map)
                            .collect()
                    })
                    .unwrap_or_default()
            },
        )
        .register_fn(
            "endpoints",
            |c: &mut ClusterRef, namespace: &str, name: &str| {
                let cluster = &c.snapshot.cluster;
                opt(cluster
                    .service(namespace, name)
                    .and_then(|service| cluster.endpoints_for(service))
                    .map(endpoints_map))
            },
        )
        .register_fn(
            "by_ip",
            |c: &mut ClusterRef, ip: Dynamic| -> Fallible<Array> {
                let ip = as_ip(&ip)?;
                Ok(c.snapshot.cluster.by_ip(ip).iter().map(ip_owner).collect())
            },
        )
        .register_fn(
            "config_map",
            |c: &mut ClusterRef, namespace: &str, name: &str| {
                opt(c
                    .snapshot
                    .cluster
                    .config_map(namespace, name)
                    .map(|cm| string_map(Some(&cm.data))))
            },
        )
        .register_fn("network_policy", network_policy)
        .register_fn(
            "daemon_set",
            |c: &mut ClusterRef, namespace: &str, name: &str| {
                opt(c
                    .snapshot
                    .cluster
                    .daemon_set(namespace, name)
                    .map(daemon_set_map))
            },
        )
        .register_fn("daemon_sets", |c: &mut ClusterRef| -> Array {
            c.snapshot
                .cluster
                .daemon_sets()
                .map(daemon_set_map)
                .collect()
        })
        .register_fn("objects", objects)
        // A kind of object can have one per node or more (a CNI's address
        // blocks): these find the few a check is about without handing the
        // script all of them.
        .register_fn(
            "has_objects",
            |c: &mut ClusterRef, api_version: &str, kind: &str| {
                c.snapshot
                    .cluster
                    .objects(api_version, kind)
                    .next()
                    .is_some()
            },
        )
        .register_fn("objects_where", objects_where)
        .register_fn("objects_holding", objects_holding);
}

/// `cluster.objects(api_version, kind)`: the objects of a kind. The kinds
/// skoop reads itself come as their typed accessors give them (a Node, a
/// Pod, a Service map, a ConfigMap's data, a DaemonSet map); a kind it reads
/// but does not hand out this way is an error that says where to ask,
/// never an empty list that would read as "there are none".
fn objects(c: &mut ClusterRef, api_version: &str, kind: &str) -> Fallible<Array> {
    let snapshot = &c.snapshot;
    let cluster = &snapshot.cluster;
    Ok(match (api_version, kind) {
        ("v1", "Node") => cluster
            .nodes()
            .filter_map(|n| NodeRef::new(snapshot, &n.meta.name))
            .map(Dynamic::from)
            .collect(),
        ("v1", "Pod") => cluster
            .pods()
            .filter_map(|p| PodRef::new(snapshot, &p.meta.namespace, &p.meta.name))
            .map(Dynamic::from)
            .collect(),
        ("v1", "Service") => cluster.services().map(service_map).collect(),
        ("v1", "ConfigMap") => cluster.config_maps().map(config_map_map).collect(),
        ("apps/v1", "DaemonSet") => cluster.daemon_sets().map(daemon_set_map).collect(),
        ("v1", "Endpoints" | "Namespace")
        | ("discovery.k8s.io/v1", "EndpointSlice")
        | ("networking.k8s.io/v1", "NetworkPolicy") => {
            return Err(format!(
                "cluster.objects does not list {api_version} {kind}: skoop reads them itself; ask \
                 cluster.service(ns, name) for a Service's endpoints, \
                 cluster.network_policy(src, dst, port, protocol) for what policies decide"
            )
            .into());
        }
        _ => cluster
            .objects(api_version, kind)
            .map(|o| json_to_dynamic(&o.value))
            .collect(),
    })
}

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

/// The JSON pointer of a dotted field path (`spec.node` -> `/spec/node`).
fn field_pointer(field: &str) -> String {
    field.split('.').fold(String::new(), |mut pointer, key| {
        pointer.push('/');
        pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
        pointer
    })
}

/// `cluster.objects_where(api_version, kind, field, value)`: the objects of
/// that kind whose `field` (a dotted path, `spec.node`) is the string `value`.
fn objects_where(
    c: &mut ClusterRef,
    api_version: &str,
    kind: &str,
    field: &str,
    value: &str,
) -> Array {
    objects_whose(c, api_version, kind, field, |text| text == value)
}

/// `cluster.objects_holding(api_version, kind, field, address)`: the objects
/// of that kind whose `field` is a network (`10.244.60.64/26`) holding
/// `address`. A field that is not a network holds nothing.
fn objects_holding(
    c: &mut ClusterRef,
    api_version: &str,
    kind: &str,
    field: &str,
    address: Dynamic,
) -> Fallible<Array> {
    let address = as_ip(&address)?;
    Ok(objects_whose(c, api_version, kind, field, |text| {
        text.parse::<IpNet>()
            .is_ok_and(|net| net.contains(&address))
    }))
}

/// The objects of a kind whose text `field` `keep` accepts, as scripts see them.
fn objects_whose(
    c: &ClusterRef,
    api_version: &str,
    kind: &str,
    field: &str,
    keep: impl Fn(&str) -> bool,
) -> Array {
    let pointer = field_pointer(field);
    c.snapshot
        .cluster
        .objects(api_version, kind)
        .filter(|o| {
            o.value
                .pointer(&pointer)
                .and_then(serde_json::Value::as_str)
                .is_some_and(&keep)
        })
        .map(|o| json_to_dynamic(&o.value))
        .collect()
}

/// `Node.netns`: the node's host namespace, so that a check about a pod (or
/// a hook at a pod's hop) can look at what the node programs for it — the
/// host side of its veth, its routes. `()` when the snapshot holds no dump
/// of that namespace.
fn register_node_namespaces(engine: &mut Engine) {
    engine.register_get("netns", node_netns);
}

fn node_netns(node: &mut NodeRef) -> Dynamic {
    let id = NetnsId::Host {
        node: node.name.clone(),
    };
    let held = node.snapshot.namespaces.contains_key(&id);
    opt(held.then(|| {
        Dynamic::from(NetnsRef {
            snapshot: node.snapshot.clone(),
            id,
        })
    }))
}

/// `cluster.network_policy(src, dst, port, protocol)`: what the cluster's
/// NetworkPolicies say about a connection, `#{ingress, egress}`, each
/// `#{pod, address, verdict, summary, reasons, policies}` (see docs/packs.md).
/// `port` is `()` for ICMP; `protocol` is `tcp`, `udp`, `sctp` or `icmp`.
fn network_policy(
    c: &mut ClusterRef,
    src: Dynamic,
    dst: Dynamic,
    port: Dynamic,
    protocol: &str,
) -> Fallible<Dynamic> {
    let (src, dst) = (as_ip(&src)?, as_ip(&dst)?);
    let transport = match protocol.to_ascii_lowercase().as_str() {
        "icmp" => None,
        name => {
            let Some(protocol) = [
                ClusterProtocol::Tcp,
                ClusterProtocol::Udp,
                ClusterProtocol::Sctp,
            ]
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name)) else {
                return fail(format!("protocol {name:?} is not tcp, udp, sctp or icmp"));
            };
            let Some(number) = port.as_int().ok().and_then(|n| u16::try_from(n).ok()) else {
                return fail(format!(
                    "{protocol} needs a port from 0 to 65535, not {}",
                    display(&port)
                ));
            };
            Some((protocol, number))
        }
    };
    let verdict = c.snapshot.cluster.network_policy(&PolicyFlow {
        src,
        dst,
        transport,
    });
    Ok(map([
        ("ingress", direction_verdict(&verdict.ingress)),
        ("egress", direction_verdict(&verdict.egress)),
    ]))
}

/// The isolating policies are given up to [`MAX_LISTED`], those that admit
/// first, with their count: a pod may be selected by thousands, whose every
/// reason would outgrow the sandbox's limits on a script's data (the verdict
/// and the summary account for all of them).
fn direction_verdict(verdict: &DirectionVerdict) -> Dynamic {
    let mut decisions: Vec<_> = verdict.policies.iter().collect();
    decisions.sort_by_key(|decision| !matches!(decision.outcome, PolicyOutcome::Admits(_)));
    let policies: Array = decisions
        .into_iter()
        .take(MAX_LISTED)
        .map(|decision| {
            let (outcome, rule, reasons) = match &decision.outcome {
                PolicyOutcome::Admits(rule) => ("admits", text(rule), Vec::new()),
                PolicyOutcome::Denies(reasons) => ("denies", Dynamic::UNIT, reasons.clone()),
                PolicyOutcome::Unknown(reasons) => ("unknown", Dynamic::UNIT, reasons.clone()),
            };
            map([
                ("policy", text(&decision.policy)),
                ("evidence", text(&decision.source)),
                ("outcome", text(outcome)),
                ("rule", rule),
                (
                    "reasons",
                    Dynamic::from_array(reasons.into_iter().map(text).collect()),
                ),
            ])
        })
        .collect();
    map([
        ("pod", opt(verdict.pod.clone())),
        ("address", Dynamic::from(verdict.address)),
        ("verdict", text(verdict.verdict.as_str())),
        ("summary", text(verdict.summary())),
        ("reasons", text(verdict.reasons())),
        ("policies", Dynamic::from_array(policies)),
        ("policy_count", Dynamic::from(verdict.policies.len() as i64)),
    ])
}

/// `cluster.service_by_node_port(protocol, port)`: the Service that claimed
/// this NodePort (`"TCP"`, `"UDP"` or `"SCTP"`, in any case), or `()`.
fn service_by_node_port(c: &mut ClusterRef, protocol: &str, port: i64) -> Fallible<Dynamic> {
    let Some(protocol) = ClusterProtocol::from_api(&protocol.to_ascii_uppercase()) else {
        return fail(format!("{protocol:?} is not TCP, UDP or SCTP"));
    };
    let Ok(port) = u16::try_from(port) else {
        return fail(format!("{port} is not a port number"));
    };
    Ok(opt(c
        .snapshot
        .cluster
        .service_by_node_port(protocol, port)
        .map(service_map)))
}

fn string_map(map: Option<&std::collections::BTreeMap<String, String>>) -> Dynamic {
    let entries: Map = map
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.into(), text(v)))
        .collect();
    Dynamic::from_map(entries)
}

fn container(c: &crate::snapshot::cluster::Container) -> Dynamic {
    let ports: Array = c
        .ports
        .iter()
        .map(|p| {
            map([
                ("name", opt(p.name.clone())),
                ("port", int(p.container_port)),
                ("protocol", text(p.protocol)),
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
fn node_address(address: &NodeAddress) -> Dynamic {
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

fn ip_owner(owner: &IpOwner) -> Dynamic {
    let (kind, namespace, name) = match owner {
        IpOwner::Pod {
            namespace, name, ..
        } => ("Pod", namespace.as_str(), name.as_str()),
        IpOwner::Node { name } => ("Node", "", name.as_str()),
        IpOwner::ServiceClusterIp { namespace, name }
        | IpOwner::ServiceExternalIp { namespace, name }
        | IpOwner::ServiceLoadBalancerIp { namespace, name } => {
            ("Service", namespace.as_str(), name.as_str())
        }
    };
    map([
        ("kind", text(kind)),
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
                ("protocol", text(p.protocol)),
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
                    ("protocol", text(p.protocol)),
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
fn endpoint_slice_map(slice: &EndpointSlice) -> Dynamic {
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
fn endpoints_map(endpoints: &Endpoints) -> Dynamic {
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

/// The part of a namespace dump a query needs; its absence is insufficient information.
fn dump_part<'a, T>(
    netns: &'a NetnsRef,
    file: &str,
    part: impl FnOnce(&'a NetnsDump) -> Option<&'a T>,
) -> Fallible<&'a T> {
    let Some(entry) = netns.entry() else {
        return Insufficient::raise(format!("no dump of {} in the snapshot", netns.id));
    };
    match (part(entry.dump()), entry.dump().unreadable.get(file)) {
        (Some(value), _) => Ok(value),
        (None, Some(why)) => Insufficient::raise(format!(
            "{file} of {} is in the snapshot but unreadable ({why})",
            netns.id
        )),
        (None, None) => Insufficient::raise(format!("{file} of {} was not collected", netns.id)),
    }
}

/// The namespace's FIB, as the snapshot models it (built once), or why
/// there is none: the first of its files that was not collected.
fn namespace_fib(n: &NetnsRef) -> Fallible<&Fib<'_>> {
    dump_part(n, "ip-rule.json", |d| d.rules.as_ref())?;
    dump_part(n, "ip-route.json", |d| d.routes.as_ref())?;
    dump_part(n, "ip-addr.json", |d| d.addrs.as_ref())?;
    match n.entry().and_then(|e| e.model().fib.as_ref()) {
        Some(fib) => Ok(fib),
        None => Insufficient::raise(format!("the routes of {} cannot be modelled", n.id)),
    }
}

/// The namespace's netfilter rules (its iptables-save, and its nftables
/// ruleset where collected), as the snapshot models them, or why there
/// are none.
fn namespace_netfilter(n: &NetnsRef) -> Fallible<&netfilter::Netfilter<'_>> {
    dump_part(n, "iptables-save.txt", |d| d.iptables.as_ref())?;
    match n.entry().and_then(|e| e.model().netfilter.as_ref()) {
        Some(netfilter) => Ok(netfilter),
        // iptables-save is there, so the nftables ruleset is unreadable.
        None => {
            dump_part(n, "nft-ruleset.json", |d| d.nftables.as_ref())?;
            Insufficient::raise(format!(
                "the netfilter rules of {} cannot be modelled",
                n.id
            ))
        }
    }
}

/// A device is up when it is administratively up and its operational state
/// does not say it is down (tunnels and loopback report UNKNOWN).
pub fn link_is_up(link: &Link) -> bool {
    link.has_flag(&LinkFlag::Up)
        && !matches!(
            link.operstate,
            OperState::Down | OperState::LowerLayerDown | OperState::NotPresent
        )
}

/// The kind iproute2 names a device by; physical devices and loopback have none.
pub fn link_kind(link: &Link) -> &str {
    match link.kind() {
        None => "",
        Some(LinkKind::Veth) => "veth",
        Some(LinkKind::Bridge(_)) => "bridge",
        Some(LinkKind::Vxlan(_)) => "vxlan",
        Some(LinkKind::Ipip(_)) => "ipip",
        Some(LinkKind::Dummy) => "dummy",
        Some(LinkKind::Other(kind)) => kind,
    }
}

/// A device of `netns` as a script sees it; a veth with its far end.
fn link_map(netns: &NetnsRef, link: &Link) -> Dynamic {
    let vxlan = match link.kind() {
        Some(LinkKind::Vxlan(v)) => map([
            ("vni", int(v.id)),
            ("port", opt(v.port.map(i64::from))),
            ("local", opt(v.local.map(Dynamic::from))),
            ("link", opt(v.link.clone())),
        ]),
        _ => Dynamic::UNIT,
    };
    let flags: Array = link.flags.iter().map(text).collect();
    // A veth's far end: by name when it is in this namespace (`link`), else
    // by ifindex in another, which the snapshot may hold.
    let is_veth = matches!(link.kind(), Some(LinkKind::Veth));
    let far = match is_veth {
        true => netns.snapshot.veth_peer(&netns.id, link),
        false => None,
    };
    let (peer, peer_netns) = match (is_veth, &link.link, far) {
        (true, Some(name), _) => (text(name), Dynamic::from(netns.clone())),
        (_, _, Some((id, far))) => (
            text(&far.ifname),
            Dynamic::from(NetnsRef {
                snapshot: netns.snapshot.clone(),
                id: id.clone(),
            }),
        ),
        _ => (Dynamic::UNIT, Dynamic::UNIT),
    };
    map([
        ("name", text(&link.ifname)),
        ("kind", text(link_kind(link))),
        ("mtu", int(link.mtu)),
        ("up", link_is_up(link).into()),
        ("state", text(&link.operstate)),
        ("flags", Dynamic::from_array(flags)),
        ("master", opt(link.master.clone())),
        ("link", opt(link.link.clone())),
        ("address", opt(link.address.as_ref().map(lladdr_text))),
        ("vxlan", vxlan),
        ("peer", peer),
        ("peer_ifindex", opt(link.link_index.map(i64::from))),
        ("peer_netnsid", opt(link.link_netnsid.map(i64::from))),
        ("peer_netns", peer_netns),
    ])
}

fn destination_text(route: &Route) -> String {
    match &route.dst {
        Destination::Default => "default".to_owned(),
        Destination::Prefix(net) => net.to_string(),
    }
}

fn route_map(route: &Route) -> Dynamic {
    map([
        ("dst", text(destination_text(route))),
        ("type", text(&route.route_type)),
        ("gateway", opt(route.gateway.map(Dynamic::from))),
        ("dev", opt(route.dev.clone())),
        ("table", text(table_name(&route.table))),
        ("protocol", text(&route.protocol)),
        ("scope", text(&route.scope)),
        ("prefsrc", opt(route.prefsrc.map(Dynamic::from))),
        ("metric", opt(route.metric.map(i64::from))),
        ("mtu", opt(route.mtu.map(i64::from))),
        (
            "onlink",
            route
                .has_flag(&crate::snapshot::netns::route::RouteFlag::Onlink)
                .into(),
        ),
    ])
}

fn neighbour_map(nb: &Neighbour) -> Dynamic {
    let states: Array = nb.state.iter().map(text).collect();
    map([
        ("dst", Dynamic::from(nb.dst)),
        ("dev", text(&nb.dev)),
        ("lladdr", opt(nb.lladdr.as_ref().map(lladdr_text))),
        ("state", Dynamic::from_array(states)),
    ])
}

fn fdb_map(e: &FdbEntry) -> Dynamic {
    map([
        ("mac", text(e.mac)),
        ("dev", text(&e.ifname)),
        ("dst", opt(e.dst.map(Dynamic::from))),
        ("master", opt(e.master.clone())),
    ])
}

fn register_netns(engine: &mut Engine) {
    engine
        .register_type_with_name::<NetnsRef>("Netns")
        .register_fn("to_string", |n: &mut NetnsRef| n.id.to_string())
        .register_get("name", |n: &mut NetnsRef| n.id.to_string())
        .register_get("node", |n: &mut NetnsRef| n.id.node().to_owned())
        .register_get("is_host", |n: &mut NetnsRef| {
            matches!(n.id, NetnsId::Host { .. })
        })
        .register_get("collected", |n: &mut NetnsRef| n.entry().is_some())
        // Whether the dump has a file (readable or not): a script asks
        // before it reads a file older snapshots do not have.
        .register_fn("has_file", |n: &mut NetnsRef, name: &str| {
            n.entry().is_some_and(|e| {
                e.dump().files_present().contains(&name) || e.dump().unreadable.contains_key(name)
            })
        })
        .register_fn("links", |n: &mut NetnsRef| -> Fallible<Array> {
            let links = dump_part(n, "ip-link.json", |d| d.links.as_ref())?;
            Ok(links.iter().map(|link| link_map(n, link)).collect())
        })
        .register_fn(
            "link",
            |n: &mut NetnsRef, name: &str| -> Fallible<Dynamic> {
                let links = dump_part(n, "ip-link.json", |d| d.links.as_ref())?;
                let link = links.iter().find(|l| l.ifname == name);
                Ok(opt(link.map(|link| link_map(n, link))))
            },
        )
        .register_fn(
            "sysctl",
            |n: &mut NetnsRef, key: &str| -> Fallible<Dynamic> {
                let sysctls = dump_part(n, "sysctl.txt", |d| d.sysctls.as_ref())?;
                Ok(opt(sysctls.get(key).map(str::to_owned)))
            },
        )
        .register_fn(
            "sysctl_int",
            |n: &mut NetnsRef, key: &str| -> Fallible<Dynamic> {
                let sysctls = dump_part(n, "sysctl.txt", |d| d.sysctls.as_ref())?;
                match sysctls.get_i64(key) {
                    Ok(value) => Ok(opt(value)),
                    Err(error) => fail(error.to_string()),
                }
            },
        )
        .register_fn("routes", |n: &mut NetnsRef| -> Fallible<Array> {
            let routes = dump_part(n, "ip-route.json", |d| d.routes.as_ref())?;
            Ok(routes.iter().map(route_map).collect())
        })
        // One destination's routes, neighbour entries or FDB entries: on a
        // node of a large cluster the whole table outgrows a script's limits.
        .register_fn(
            "routes_to",
            |n: &mut NetnsRef, dst: &str| -> Fallible<Array> {
                let routes = dump_part(n, "ip-route.json", |d| d.routes.as_ref())?;
                Ok(routes
                    .iter()
                    .filter(|r| destination_text(r) == dst)
                    .map(route_map)
                    .collect())
            },
        )
        .register_fn("route_get", route_get)
        .register_fn("iptables_chain", iptables_chain)
        .register_fn("iptables_rules_with", iptables_rules_with)
        .register_fn("nft_chain", nft_chain)
        .register_fn("nft_map", nft_map)
        .register_fn("nft_map_element", nft_map_element)
        .register_fn("masquerades", masquerades)
        .register_fn("masquerades_each", masquerades_each)
        .register_fn("addresses", |n: &mut NetnsRef| -> Fallible<Array> {
            let addrs = dump_part(n, "ip-addr.json", |d| d.addrs.as_ref())?;
            Ok(addrs
                .iter()
                .flat_map(|iface| {
                    iface.addresses.iter().map(|a| {
                        map([
                            ("dev", text(&iface.ifname)),
                            ("ip", Dynamic::from(a.local)),
                            ("network", Dynamic::from(a.network)),
                        ])
                    })
                })
                .collect())
        })
        .register_fn("neighbours", |n: &mut NetnsRef| -> Fallible<Array> {
            let neighbours = dump_part(n, "ip-neigh.json", |d| d.neighbours.as_ref())?;
            Ok(neighbours.iter().map(neighbour_map).collect())
        })
        .register_fn(
            "neighbours_of",
            |n: &mut NetnsRef, ip: Dynamic| -> Fallible<Array> {
                let ip = as_ip(&ip)?;
                let neighbours = dump_part(n, "ip-neigh.json", |d| d.neighbours.as_ref())?;
                Ok(neighbours
                    .iter()
                    .filter(|nb| nb.dst == ip)
                    .map(neighbour_map)
                    .collect())
            },
        )
        .register_fn("fdb", |n: &mut NetnsRef| -> Fallible<Array> {
            let fdb = dump_part(n, "bridge-fdb.json", |d| d.fdb.as_ref())?;
            Ok(fdb.iter().map(fdb_map).collect())
        })
        .register_fn("fdb_of", |n: &mut NetnsRef, mac: &str| -> Fallible<Array> {
            let fdb = dump_part(n, "bridge-fdb.json", |d| d.fdb.as_ref())?;
            Ok(fdb
                .iter()
                .filter(|e| e.mac.to_string().eq_ignore_ascii_case(mac))
                .map(fdb_map)
                .collect())
        })
        .register_fn("listeners", |n: &mut NetnsRef| -> Fallible<Array> {
            let sockets = dump_part(n, "ss.txt", |d| d.sockets.as_ref())?;
            Ok(sockets
                .iter()
                .map(|s| {
                    let address = match s.address {
                        LocalAddress::AnyDualStack => "*".to_owned(),
                        LocalAddress::Ip(ip) => ip.to_string(),
                    };
                    map([
                        ("protocol", text(s.protocol.as_str())),
                        ("address", text(address)),
                        ("port", int(s.port)),
                    ])
                })
                .collect())
        });
}

pub fn lladdr_text(address: &crate::snapshot::netns::link::LinkLayerAddress) -> String {
    use crate::snapshot::netns::link::LinkLayerAddress;
    match address {
        LinkLayerAddress::Mac(mac) => mac.to_string(),
        LinkLayerAddress::Other(other) => other.clone(),
    }
}

/// `netns.route_get(dst)`: the route the kernel takes to `dst` from this
/// namespace, as `ip route get` would say.
fn route_get(n: &mut NetnsRef, dst: Dynamic) -> Fallible<Dynamic> {
    let dst = as_ip(&dst)?;
    let fib = namespace_fib(n)?;
    let routes = fib.routes;
    match fib.lookup(&FlowKey::to(dst)).outcome {
        LookupOutcome::Routed {
            route,
            route_type,
            paths,
            ..
        } => {
            let first = paths.first();
            Ok(map([
                ("type", text(route_type)),
                ("dev", opt(first.and_then(|p| p.dev.clone()))),
                (
                    "gateway",
                    opt(first.and_then(|p| p.gateway).map(Dynamic::from)),
                ),
                ("route", opt(routes.get(route).map(route_map))),
            ]))
        }
        LookupOutcome::Failed { error, .. } => Ok(map([("error", text(error.as_str()))])),
        LookupOutcome::Unknown { reason } => Insufficient::raise(reason),
    }
}

/// `netns.iptables_chain(table, chain)`: the chain's rules in order, each
/// `#{number, line, text, target}` (`target` is the `-j`/`-g` name, a chain's
/// or a built-in's, or `()`), or `()` when the table has no such chain.
fn iptables_chain(n: &mut NetnsRef, table: &str, chain: &str) -> Fallible<Dynamic> {
    iptables_rules(n, table, chain, |_| true)
}

/// `netns.iptables_rules_with(table, chain, text)`: the rules of the chain
/// whose text holds `text` (a comment, an address), as `iptables_chain`
/// gives them; `()` when the table has no such chain. A service proxy's
/// dispatch chain holds a rule per service: a check asks for one.
fn iptables_rules_with(
    n: &mut NetnsRef,
    table: &str,
    chain: &str,
    needle: &str,
) -> Fallible<Dynamic> {
    iptables_rules(n, table, chain, |text| text.contains(needle))
}

fn iptables_rules(
    n: &NetnsRef,
    table: &str,
    chain: &str,
    keep: impl Fn(&str) -> bool,
) -> Fallible<Dynamic> {
    let ruleset = dump_part(n, "iptables-save.txt", |d| d.iptables.as_ref())?;
    let Some(chain) = ruleset
        .tables
        .iter()
        .find(|t| t.name.as_str() == table)
        .and_then(|t| t.chain(chain))
    else {
        return Ok(Dynamic::UNIT);
    };
    let rules: Array = chain
        .rules
        .iter()
        .filter(|rule| keep(rule.text.as_str()))
        .map(|rule| {
            map([
                (
                    "number",
                    int(i64::try_from(rule.number).unwrap_or(i64::MAX)),
                ),
                ("line", int(i64::try_from(rule.line).unwrap_or(i64::MAX))),
                ("text", text(rule.text.as_str())),
                ("target", opt(rule.target.as_ref().map(target_name))),
            ])
        })
        .collect();
    Ok(Dynamic::from_array(rules))
}

/// The nftables table `family name` of a namespace's ruleset, if any.
fn nft_table<'a>(
    n: &'a NetnsRef,
    family: &str,
    table: &str,
) -> Fallible<Option<&'a crate::snapshot::netns::nft::Table>> {
    let ruleset = dump_part(n, "nft-ruleset.json", |d| d.nftables.as_ref())?;
    Ok(ruleset
        .tables
        .iter()
        .find(|t| t.family.as_str() == family && t.name == table))
}

/// `netns.nft_chain(family, table, chain)`: the chain's rules in order, each
/// `#{handle, line, column, text, comment, targets, dnat}` (`targets`: the
/// chains it jumps or goes to; `dnat`: the `address:port`s it can translate
/// to); `()` when the table or chain does not exist.
fn nft_chain(n: &mut NetnsRef, family: &str, table: &str, chain: &str) -> Fallible<Dynamic> {
    let Some(chain) = nft_table(n, family, table)?.and_then(|t| t.chain(chain)) else {
        return Ok(Dynamic::UNIT);
    };
    let count = |value: usize| int(i64::try_from(value).unwrap_or(i64::MAX));
    let rules: Array = chain
        .rules
        .iter()
        .map(|rule| {
            let targets: Array = rule.chain_targets().into_iter().map(text).collect();
            let dnat: Array = rule.dnat_targets().into_iter().map(text).collect();
            map([
                (
                    "handle",
                    opt(rule.handle.map(|h| i64::try_from(h).unwrap_or(i64::MAX))),
                ),
                ("line", count(rule.position.0)),
                ("column", count(rule.position.1)),
                ("text", text(rule.text())),
                ("comment", opt(rule.comment.clone())),
                ("targets", Dynamic::from_array(targets)),
                ("dnat", Dynamic::from_array(dnat)),
            ])
        })
        .collect();
    Ok(Dynamic::from_array(rules))
}

/// `netns.nft_map(family, table, name)`: the elements of a named set or map,
/// each `#{key, value, comment}` as nft prints them (`value` is `()` in a
/// set); `()` when there is no such set.
fn nft_map(n: &mut NetnsRef, family: &str, table: &str, name: &str) -> Fallible<Dynamic> {
    let Some(set) = nft_table(n, family, table)?.and_then(|t| t.set(name)) else {
        return Ok(Dynamic::UNIT);
    };
    Ok(Dynamic::from_array(
        set.elements.iter().map(nft_element_map).collect(),
    ))
}

/// `netns.nft_map_element(family, table, name, key)`: the element of a named
/// set or map whose key nft prints as `key` (`10.96.0.100 . tcp . 80`), as
/// `nft_map` gives it; `()` when there is no such set or element.
fn nft_map_element(
    n: &mut NetnsRef,
    family: &str,
    table: &str,
    name: &str,
    key: &str,
) -> Fallible<Dynamic> {
    let Some(set) = nft_table(n, family, table)?.and_then(|t| t.set(name)) else {
        return Ok(Dynamic::UNIT);
    };
    Ok(opt(set
        .elements
        .iter()
        .find(|element| element.key.to_string() == key)
        .map(nft_element_map)))
}

fn nft_element_map(element: &crate::snapshot::netns::nft::Element) -> Dynamic {
    map([
        ("key", text(element.key.to_string())),
        (
            "value",
            opt(element.value.as_ref().map(ToString::to_string)),
        ),
        ("comment", opt(element.comment.clone())),
    ])
}

/// The name a rule's target is written with after `-j` or `-g`.
fn target_name(target: &Target) -> String {
    match target {
        Target::Accept => "ACCEPT",
        Target::Drop => "DROP",
        Target::Return => "RETURN",
        Target::Jump(chain) | Target::Goto(chain) => return chain.name.to_string(),
        Target::Reject(_) => "REJECT",
        Target::Dnat(_) => "DNAT",
        Target::Snat(_) => "SNAT",
        Target::Masquerade(_) => "MASQUERADE",
        Target::Redirect(_) => "REDIRECT",
        Target::Mark(_) => "MARK",
        Target::ConnMark(_) => "CONNMARK",
        Target::NoTrack => "NOTRACK",
        Target::Ct(_) => "CT",
        Target::Log(_) => "LOG",
        Target::NfLog(_) => "NFLOG",
        Target::Trace => "TRACE",
        Target::Unsupported { name, .. } => return name.clone(),
    }
    .to_owned()
}

/// `netns.masquerades(src, dst)`: whether nat POSTROUTING source-NATs (SNAT
/// or MASQUERADE) a new TCP connection from `src` to `dst` that this
/// namespace forwards, arriving and leaving by the interfaces its routes to
/// `src` and `dst` name. True when any way the rules can send it is
/// translated; a rule the model cannot evaluate makes the answer unknown.
fn masquerades(n: &mut NetnsRef, src: Dynamic, dst: Dynamic) -> Fallible<bool> {
    Ok(masquerade_decisions(n, src, &[dst])?[0])
}

/// [`masquerades`] for each of `dsts`, the namespace's models built once.
fn masquerades_each(n: &mut NetnsRef, src: Dynamic, dsts: Array) -> Fallible<Array> {
    Ok(masquerade_decisions(n, src, &dsts)?
        .into_iter()
        .map(Dynamic::from)
        .collect())
}

fn masquerade_decisions(n: &NetnsRef, src: Dynamic, dsts: &[Dynamic]) -> Fallible<Vec<bool>> {
    let src = as_ip(&src)?;
    let dsts = dsts.iter().map(as_ip).collect::<Fallible<Vec<IpAddr>>>()?;
    let netfilter = namespace_netfilter(n)?;
    let fib = namespace_fib(n)?;
    let addrs = dump_part(n, "ip-addr.json", |d| d.addrs.as_ref())?;
    let device_to = |ip: IpAddr| match fib.lookup(&FlowKey::to(ip)).outcome {
        LookupOutcome::Routed { paths, .. } => paths.first().and_then(|p| p.dev.clone()),
        _ => None,
    };
    let context = netfilter::Context {
        fib: Some(fib),
        interfaces: addrs,
        local_addresses: &[],
    };
    let in_iface = device_to(src);
    let mut decisions = Vec::with_capacity(dsts.len());
    for dst in dsts {
        let mut packet = netfilter::Packet::new(src, dst, Protocol::TCP);
        packet.in_iface = in_iface.clone();
        packet.out_iface = device_to(dst);
        let outcomes = netfilter.hook(netfilter::Hook::Postrouting, packet, &context);
        if let Some(reason) = outcomes.iter().find_map(|o| match &o.verdict {
            netfilter::Verdict::Unknown { reason } => Some(reason.clone()),
            _ => None,
        }) {
            return Insufficient::raise(format!("nat POSTROUTING of {}: {reason}", n.id));
        }
        decisions.push(outcomes.iter().any(netfilter::Outcome::masquerade));
    }
    Ok(decisions)
}

fn register_context(engine: &mut Engine) {
    fn absent<T>(what: &str, ctx: &Context) -> Fallible<T> {
        fail(format!("ctx.{what} is not available for {}", ctx.subject))
    }
    engine
        .register_type_with_name::<Context>("Context")
        .register_get("params", |c: &mut Context| c.params.clone())
        .register_get("subject", |c: &mut Context| c.subject.to_string())
        .register_get("cluster", |c: &mut Context| c.cluster())
        .register_get("node", |c: &mut Context| -> Fallible<NodeRef> {
            c.node.clone().map_or_else(|| absent("node", c), Ok)
        })
        .register_get("pod", |c: &mut Context| -> Fallible<PodRef> {
            c.pod.clone().map_or_else(|| absent("pod", c), Ok)
        })
        .register_get("netns", |c: &mut Context| -> Fallible<NetnsRef> {
            c.netns.clone().map_or_else(|| absent("netns", c), Ok)
        })
        .register_get("object", |c: &mut Context| -> Fallible<Dynamic> {
            c.object.clone().map_or_else(|| absent("object", c), Ok)
        })
        .register_get("peer", |c: &mut Context| -> Fallible<NodeRef> {
            c.peer.clone().map_or_else(|| absent("peer", c), Ok)
        })
        .register_get("port", |c: &mut Context| -> Fallible<Dynamic> {
            c.port.clone().map_or_else(|| absent("port", c), Ok)
        })
        .register_get(
            "hop",
            |c: &mut Context| -> Fallible<std::sync::Arc<HopScope>> {
                c.hop.clone().map_or_else(|| absent("hop", c), Ok)
            },
        )
        .register_get("packet", |c: &mut Context| -> Fallible<Packet> {
            c.hop
                .as_ref()
                .map(|h| h.packet.clone())
                .map_or_else(|| absent("packet", c), Ok)
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code cells of the rows of the docs/packs.md table after
    /// `marker` (backquotes removed), each row's first cell left out.
    pub(super) fn documented_rows(marker: &str) -> Vec<Vec<String>> {
        let docs = include_str!("../../docs/packs.md");
        let table = docs
            .split(marker)
            .nth(1)
            .and_then(|rest| rest.trim_start().split("\n\n").next())
            .unwrap_or_else(|| panic!("docs/packs.md has a table after {marker}"));
        // Rows after the header and its separator.
        table
            .lines()
            .skip(2)
            .map(|line| {
                line.trim_matches('|')
                    .split(" | ")
                    .skip(1)
                    .map(|cell| cell.trim().trim_matches('`').to_owned())
                    .collect()
            })
            .collect()
    }

    /// A result as the docs write it: a string quoted, anything else as the
    /// script's `to_string` shows it.
    pub(super) fn shown(value: &Dynamic) -> String {
        if value.is_string() {
            format!("{:?}", value.clone().into_string().unwrap_or_default())
        } else {
            display(value)
        }
    }

    /// Every example of the host API table of docs/packs.md, run: a row
    /// `| function | `EXPR` | `RESULT` |` must evaluate to RESULT.
    #[test]
    fn every_documented_example_evaluates_to_its_documented_result() {
        let engine = super::super::sandbox::engine();
        let rows = documented_rows("<!-- host-api-examples -->");
        for row in &rows {
            let [expression, expected] = row.as_slice() else {
                panic!("not a row of three cells: {row:?}");
            };
            let value: Dynamic = engine
                .eval(expression)
                .unwrap_or_else(|e| panic!("{expression}: {e}"));
            assert_eq!(&shown(&value), expected, "{expression}");
        }
        assert!(rows.len() >= 10, "only {} examples found", rows.len());
    }

    #[test]
    fn nth_host_beyond_the_network_is_an_error() {
        let mut net: IpNet = "10.0.0.0/30".parse().expect("cidr");
        assert!(nth_host(&mut net, 4).is_err());
        assert!(nth_host(&mut net, -1).is_err());
        assert_eq!(nth_host(&mut net, 3).ok(), "10.0.0.3".parse().ok());
    }
}

#[cfg(test)]
mod netns_tests {
    use std::sync::Arc;

    use super::*;
    use crate::snapshot::Snapshot;

    /// node-1's host namespace of the bundled example (real lab output).
    fn node_1() -> NetnsRef {
        let (snapshot, problems) = Snapshot::load(std::path::Path::new("examples/flannel-vxlan"))
            .expect("the example loads");
        assert!(problems.is_empty(), "{problems:?}");
        NetnsRef {
            snapshot: Arc::new(snapshot),
            id: NetnsId::Host {
                node: "node-1".into(),
            },
        }
    }

    /// Every example of docs/packs.md's table of queries on the bundled
    /// examples, run: a row `| function | snapshot | `EXPR` | `RESULT` |`
    /// evaluates EXPR, with `cluster` that snapshot's cluster and `netns`
    /// its node-1's host namespace, to RESULT.
    #[test]
    fn every_documented_query_evaluates_to_its_documented_result() {
        let engine = crate::packs::sandbox::engine();
        let rows = super::tests::documented_rows("<!-- host-api-snapshot-examples -->");
        for row in &rows {
            let [example, expression, expected] = row.as_slice() else {
                panic!("not a row of four cells: {row:?}");
            };
            let (snapshot, problems) =
                Snapshot::load(std::path::Path::new(example)).expect("the example loads");
            assert!(problems.is_empty(), "{problems:?}");
            let snapshot = Arc::new(snapshot);
            let mut scope = rhai::Scope::new();
            scope.push(
                "cluster",
                ClusterRef {
                    snapshot: snapshot.clone(),
                },
            );
            scope.push(
                "netns",
                NetnsRef {
                    snapshot,
                    id: NetnsId::Host {
                        node: "node-1".into(),
                    },
                },
            );
            let value: Dynamic = engine
                .eval_with_scope(&mut scope, expression)
                .unwrap_or_else(|e| panic!("{expression}: {e}"));
            assert_eq!(
                &super::tests::shown(&value),
                expected,
                "{example}: {expression}"
            );
        }
        assert!(rows.len() >= 10, "only {} examples found", rows.len());
    }

    #[test]
    fn iptables_chain_lists_rules_with_their_targets() {
        let mut netns = node_1();
        let rules = iptables_chain(&mut netns, "nat", "POSTROUTING")
            .ok()
            .and_then(|r| r.try_cast::<Array>())
            .expect("nat POSTROUTING exists");
        let targets: Vec<String> = rules
            .iter()
            .filter_map(|r| r.clone().try_cast::<Map>())
            .map(|r| display(&r["target"]))
            .collect();
        assert_eq!(targets, ["KUBE-POSTROUTING", "FLANNEL-POSTRTG"]);
        let first = rules[0].clone().try_cast::<Map>().expect("a map");
        assert_eq!(first["number"].as_int(), Ok(1));
        assert!(display(&first["text"]).starts_with("-A POSTROUTING"));
    }

    #[test]
    fn iptables_chain_that_does_not_exist_is_unit() {
        let mut netns = node_1();
        let missing = iptables_chain(&mut netns, "nat", "NO-SUCH-CHAIN").expect("answers");
        assert!(missing.is_unit());
        let no_table = iptables_chain(&mut netns, "raw", "PREROUTING").expect("answers");
        assert!(no_table.is_unit());
    }

    #[test]
    fn routes_carry_scope_source_and_metric() {
        let netns = node_1();
        let routes: Vec<Map> = dump_part(&netns, "ip-route.json", |d| d.routes.as_ref())
            .expect("routes collected")
            .iter()
            .map(route_map)
            .filter_map(|r| r.try_cast::<Map>())
            .collect();
        let fields = |dst: &str, dev: &str| {
            let route = routes
                .iter()
                .find(|r| display(&r["dst"]) == dst && display(&r["dev"]) == dev)
                .unwrap_or_else(|| panic!("a route to {dst} by {dev}"));
            // `display` shows `()` as nothing.
            ["scope", "prefsrc", "metric"].map(|field| display(&route[field]))
        };
        assert_eq!(fields("172.18.0.0/24", "eth0"), ["link", "172.18.0.11", ""]);
        assert_eq!(fields("default", "eth0"), ["global", "", ""]);
        assert_eq!(fields("fe80::/64", "eth0"), ["global", "", "256"]);
    }

    #[test]
    fn routes_name_the_protocol_that_installed_them() {
        let netns = node_1();
        let routes = dump_part(&netns, "ip-route.json", |d| d.routes.as_ref())
            .expect("routes collected")
            .iter()
            .map(route_map)
            .filter_map(|r| r.try_cast::<Map>())
            .map(|r| (display(&r["dst"]), display(&r["protocol"])))
            .collect::<Vec<_>>();
        assert!(
            routes.contains(&("default".into(), "boot".into())),
            "{routes:?}"
        );
        assert!(
            routes.contains(&("172.18.0.0/24".into(), "kernel".into())),
            "{routes:?}"
        );
    }

    #[test]
    fn a_veth_leads_to_its_far_end_and_back_and_other_devices_to_nothing() {
        let netns = node_1();
        let link = |netns: &NetnsRef, name: &str| {
            let links = dump_part(netns, "ip-link.json", |d| d.links.as_ref()).expect("links");
            let link = links.iter().find(|l| l.ifname == name).expect(name);
            link_map(netns, link).try_cast::<Map>().expect("a map")
        };
        let host_end = link(&netns, "veth53842afe");
        assert_eq!(display(&host_end["peer"]), "eth0");
        let pod = host_end["peer_netns"].clone().cast::<NetnsRef>();
        assert_eq!(pod.id.to_string(), "default/web-0 (on node-1)");
        let pod_end = link(&pod, "eth0");
        assert_eq!(display(&pod_end["peer"]), "veth53842afe");
        let back = pod_end["peer_netns"].clone().cast::<NetnsRef>();
        assert_eq!(back.id, netns.id);
        // The node's eth0 is a veth into the lab's underlay, which the
        // snapshot does not hold; flannel.1 is no veth: neither leads anywhere.
        for name in ["eth0", "flannel.1"] {
            let device = link(&netns, name);
            assert!(device["peer"].is_unit(), "{name}");
            assert!(device["peer_netns"].is_unit(), "{name}");
        }
        assert_eq!(display(&link(&netns, "eth0")["peer_ifindex"]), "4");
        assert!(link(&netns, "flannel.1")["peer_ifindex"].is_unit());
    }

    #[test]
    fn links_carry_their_mac_address() {
        let netns = node_1();
        let links = dump_part(&netns, "ip-link.json", |d| d.links.as_ref()).expect("links");
        let flannel = links
            .iter()
            .find(|l| l.ifname == "flannel.1")
            .map(|l| link_map(&netns, l))
            .and_then(|l| l.try_cast::<Map>())
            .expect("flannel.1");
        // node-1's VTEP MAC, as its backend-data annotation announces it.
        assert_eq!(display(&flannel["address"]), "f2:50:c6:f2:ef:fd");
    }

    #[test]
    fn node_netns_is_its_host_namespace_or_unit_without_a_dump() {
        let snapshot = node_1().snapshot;
        let mut node_1 = NodeRef::new(&snapshot, "node-1").expect("node-1");
        let netns = node_netns(&mut node_1)
            .try_cast::<NetnsRef>()
            .expect("node-1's host namespace is in the snapshot");
        assert_eq!(
            netns.id,
            NetnsId::Host {
                node: "node-1".into()
            }
        );
        let mut unknown = NodeRef {
            snapshot,
            name: "node-9".into(),
        };
        assert!(node_netns(&mut unknown).is_unit());
    }

    #[test]
    fn masquerades_only_traffic_leaving_the_cluster_network() {
        let mut netns = node_1();
        let mut asks = |src: &str, dst: &str| {
            masquerades(&mut netns, text(src), text(dst)).expect("the model decides")
        };
        assert!(
            !asks("10.244.1.2", "10.244.2.2"),
            "pod to pod keeps its source"
        );
        assert!(
            asks("10.244.1.2", "203.0.113.1"),
            "pod to outside is masqueraded"
        );
        assert!(
            !asks("172.18.0.11", "203.0.113.1"),
            "the node's own traffic is not"
        );
    }
}

#[cfg(test)]
mod network_policy_tests {
    use std::sync::Arc;

    use super::*;
    use crate::snapshot::Snapshot;

    /// The Flannel example with two policies (the networkpolicy pack's test).
    fn cluster() -> ClusterRef {
        let dir = std::path::Path::new("rules/networkpolicy/tests/admitted-but-dropped/snapshot");
        let pack =
            crate::snapshot::input::Boundary::new(std::path::Path::new("rules/networkpolicy"));
        let (snapshot, problems) = Snapshot::load_inside(dir, &pack).expect("loads");
        assert!(problems.is_empty(), "{problems:?}");
        ClusterRef {
            snapshot: Arc::new(snapshot),
        }
    }

    fn field(map: &Dynamic, key: &str) -> Dynamic {
        map.clone()
            .try_cast::<Map>()
            .and_then(|m| m.get(key).cloned())
            .unwrap_or_else(|| panic!("no {key} in {map:?}"))
    }

    /// What a script over the example's cluster (`cluster`) evaluates to.
    fn eval(script: &str) -> Result<Dynamic, String> {
        let engine = super::super::sandbox::engine();
        let mut scope = rhai::Scope::new();
        scope.push("cluster", cluster());
        engine
            .eval_with_scope::<Dynamic>(&mut scope, script)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn daemon_sets_show_their_containers_env_and_args() {
        let flannel = r#"cluster.daemon_set("kube-flannel", "kube-flannel-ds").containers[0]"#;
        let env = eval(&format!("{flannel}.env")).expect("evaluates");
        assert_eq!(display(&field(&env, "EVENT_QUEUE_DEPTH")), "5000");
        assert!(
            field(&env, "POD_NAME").is_unit(),
            "set from a field of the pod: not in the template"
        );
        let args = eval(&format!("{flannel}.args")).expect("evaluates");
        assert_eq!(display(&args), "[\"--ip-masq\", \"--kube-subnet-mgr\"]");
        assert_eq!(
            display(&eval(r#"cluster.objects("apps/v1", "DaemonSet").map(|d| d.name)"#).unwrap()),
            "[\"kube-flannel-ds\"]"
        );
        assert!(
            eval(r#"cluster.daemon_set("kube-flannel", "nothing")"#)
                .unwrap()
                .is_unit()
        );
    }

    #[test]
    fn objects_of_a_kind_skoop_reads_itself_are_its_typed_forms_or_an_error() {
        assert_eq!(
            display(&eval(r#"cluster.objects("v1", "Node").map(|n| n.name)"#).unwrap()),
            "[\"node-1\", \"node-2\"]"
        );
        assert_eq!(
            display(&eval(r#"cluster.objects("v1", "Service").len() > 0"#).unwrap()),
            "true"
        );
        let error = eval(r#"cluster.objects("networking.k8s.io/v1", "NetworkPolicy")"#)
            .expect_err("not listed as objects");
        assert!(
            error.contains("cluster.objects does not list networking.k8s.io/v1 NetworkPolicy"),
            "{error}"
        );
    }

    #[test]
    fn network_policy_gives_both_directions_with_their_policies() {
        let verdict = network_policy(
            &mut cluster(),
            text("10.244.1.3"),
            text("10.244.2.3"),
            int(8080),
            "tcp",
        )
        .expect("judged");
        let ingress = field(&verdict, "ingress");
        assert_eq!(display(&field(&ingress, "verdict")), "denied");
        assert_eq!(display(&field(&ingress, "pod")), "default/web-3");
        let policies = field(&ingress, "policies").into_array().expect("array");
        assert_eq!(
            display(&field(&policies[0], "policy")),
            "default/web-from-node-1"
        );
        assert_eq!(display(&field(&policies[0], "outcome")), "denies");
        assert!(field(&policies[0], "rule").is_unit());
        let egress = field(&verdict, "egress");
        assert_eq!(display(&field(&egress, "verdict")), "admitted");
        let admitting = field(&egress, "policies").into_array().expect("array");
        assert_eq!(
            display(&field(&admitting[0], "rule")),
            "spec.egress[0].to[0], ports[0]"
        );
    }

    #[test]
    fn network_policy_needs_a_port_except_for_icmp() {
        let ask = |port: Dynamic, protocol: &str| {
            network_policy(
                &mut cluster(),
                text("10.244.1.2"),
                text("10.244.2.3"),
                port,
                protocol,
            )
        };
        assert!(ask(Dynamic::UNIT, "tcp").is_err());
        assert!(ask(int(70000), "udp").is_err());
        assert!(ask(int(80), "gre").is_err());
        let ping = ask(Dynamic::UNIT, "icmp").expect("judged");
        // ICMP has no port: the ingress rule with ports does not admit it.
        assert_eq!(
            display(&field(&field(&ping, "ingress"), "verdict")),
            "denied"
        );
    }
}

#[cfg(test)]
mod cluster_tests {
    use std::sync::Arc;

    use rhai::Scope;

    use super::*;
    use crate::snapshot::Snapshot;

    /// Evaluates `expression` with `cluster` bound to the kube-proxy pack's
    /// test snapshot (two nodes, a service of each kind).
    fn try_eval(expression: &str) -> Result<Dynamic, Box<EvalAltResult>> {
        let (snapshot, problems) = Snapshot::load(std::path::Path::new(
            "rules/kube-proxy/tests/services/snapshot",
        ))
        .expect("the fixture loads");
        assert!(problems.is_empty(), "{problems:?}");
        let mut scope = Scope::new();
        scope.push(
            "cluster",
            ClusterRef {
                snapshot: Arc::new(snapshot),
            },
        );
        super::super::sandbox::engine().eval_with_scope::<Dynamic>(&mut scope, expression)
    }

    fn eval(expression: &str) -> Dynamic {
        try_eval(expression).unwrap_or_else(|e| panic!("{expression}: {e}"))
    }

    fn shown(expression: &str) -> String {
        display(&eval(expression))
    }

    #[test]
    fn service_has_its_whole_spec_with_the_default_traffic_policies() {
        let web = r#"cluster.service("default", "web")"#;
        let local = r#"cluster.service("default", "local")"#;
        for (field, expected) in [
            (format!("{web}.type"), "NodePort"),
            (format!("{web}.external_ips[0]"), "192.0.2.10"),
            (format!("{web}.selector.app"), "web"),
            (format!("{web}.ports[0].target_port"), "web"),
            (format!("{local}.ports[0].target_port"), "8080"),
            (format!("{local}.load_balancer_ips[0]"), "198.51.100.11"),
            (format!("{local}.external_traffic_policy"), "Local"),
            // Unset in services.yaml: the API's default.
            (format!("{local}.internal_traffic_policy"), "Cluster"),
            (
                r#"cluster.service("default", "headless").headless"#.to_owned(),
                "true",
            ),
            ("cluster.services().len()".to_owned(), "10"),
        ] {
            assert_eq!(shown(&field), expected, "{field}");
        }
        assert_eq!(
            eval(&format!("type_of({local}.ports[0].target_port)")).to_string(),
            "i64"
        );
        assert!(shown(&format!("{web}.source")).ends_with("cluster/services.yaml:5"));
    }

    #[test]
    fn node_port_finds_its_service_in_either_case_of_protocol() {
        assert_eq!(
            shown(r#"cluster.service_by_node_port("tcp", 30081).name"#),
            "local"
        );
        assert_eq!(
            shown(r#"cluster.service_by_node_port("TCP", 30080).name"#),
            "web"
        );
        assert!(eval(r#"cluster.service_by_node_port("udp", 30080)"#).is_unit());
        let error = try_eval(r#"cluster.service_by_node_port("icmp", 30080)"#)
            .expect_err("no NodePort protocol");
        assert!(
            error
                .to_string()
                .contains(r#""icmp" is not TCP, UDP or SCTP"#),
            "{error}"
        );
        let error = try_eval(r#"cluster.service_by_node_port("tcp", 70000)"#).expect_err("no port");
        assert!(
            error.to_string().contains("70000 is not a port number"),
            "{error}"
        );
    }

    #[test]
    fn endpoint_slices_keep_unset_conditions_unset() {
        let slice = r#"cluster.endpoint_slices("default", "itp")[0]"#;
        assert_eq!(shown(&format!("{slice}.name")), "itp-c8d2m");
        assert_eq!(shown(&format!("{slice}.address_type")), "IPv4");
        assert_eq!(
            eval(&format!("{slice}.endpoints[0].conditions.ready")).as_bool(),
            Ok(true)
        );
        assert!(eval(&format!("{slice}.endpoints[0].conditions.serving")).is_unit());
        assert_eq!(shown(&format!("{slice}.endpoints[0].node_name")), "node-1");
        assert_eq!(
            shown(&format!("{slice}.endpoints[0].target_ref.name")),
            "itp-0"
        );
        assert!(eval(&format!("{slice}.ports[0].name")).is_unit());
        assert_eq!(eval(&format!("{slice}.ports[0].port")).as_int(), Ok(8080));
        assert_eq!(
            eval(r#"cluster.endpoint_slices("default", "legacy").len()"#).as_int(),
            Ok(0)
        );
    }

    #[test]
    fn endpoints_object_has_ready_and_not_ready_addresses() {
        let subset = r#"cluster.endpoints("default", "legacy").subsets[0]"#;
        assert_eq!(shown(&format!("{subset}.addresses[0].ip")), "10.244.2.5");
        assert_eq!(
            shown(&format!("{subset}.not_ready_addresses[0].ip")),
            "10.244.2.7"
        );
        assert_eq!(shown(&format!("{subset}.ports[0].name")), "pg");
        assert!(eval(r#"cluster.endpoints("default", "web")"#).is_unit());
    }

    #[test]
    fn service_pods_are_the_pods_its_selector_selects() {
        assert_eq!(
            shown(r#"cluster.service_pods("default", "web").map(|p| p.name)"#),
            r#"["web-0", "web-1", "web-2"]"#
        );
        assert_eq!(
            eval(r#"cluster.service_pods("default", "external").len()"#).as_int(),
            Ok(0),
            "an ExternalName service selects nothing"
        );
    }

    #[test]
    fn node_addresses_are_listed_as_written() {
        assert_eq!(
            shown(r#"cluster.node("node-1").addresses.map(|a| a.type)"#),
            r#"["InternalIP", "ExternalIP", "Hostname"]"#
        );
        assert_eq!(
            shown(r#"cluster.node("node-1").addresses[1].address"#),
            "203.0.113.11"
        );
        assert_eq!(
            shown(r#"type_of(cluster.node("node-1").addresses[2].address)"#),
            "string"
        );
    }
}
