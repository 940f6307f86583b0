//! The cluster as scripts see it: `Cluster` (`ctx.cluster`) and its
//! queries, `Node` and `Pod`, and what NetworkPolicies decide.

use std::net::IpAddr;

use ipnet::IpNet;
use rhai::{Array, Dynamic, Engine};

use super::addresses::nth_host;
use super::objects::{
    config_map_map, container, daemon_set_map, endpoint_slice_map, endpoints_map, ip_owner,
    json_to_dynamic, node_address, service_map, string_map,
};
use super::{Fallible, as_cidr, as_ip, display, fail, map, opt, text};
use crate::packs::scope::{ClusterRef, NetnsRef, NodeRef, PodRef};
use crate::snapshot::cluster::ApiEnum as _;
use crate::snapshot::cluster::pod_reads::{self, PodRead};
use crate::snapshot::cluster::{
    DirectionVerdict, MAX_LISTED, Node, PolicyFlow, PolicyOutcome, Protocol as ClusterProtocol,
};
use crate::snapshot::{NetnsId, Snapshot};

pub(super) fn register(engine: &mut Engine) {
    register_node(engine);
    register_pod(engine);
    register_cluster(engine);
    register_services(engine);
    register_objects(engine);
    register_node_namespaces(engine);
}

fn register_node(engine: &mut Engine) {
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
        // A CNI that announces pod CIDRs in annotations declares which.
        .register_fn(
            "pod_cidrs_from",
            |n: &mut NodeRef, annotations: Array| -> Fallible<Array> {
                let annotations = annotation_names(annotations)?;
                let Some(node) = n.get() else {
                    return Ok(Array::new());
                };
                let cidrs = node.pod_cidrs_with(&annotations)?;
                Ok(cidrs.into_iter().map(Dynamic::from).collect())
            },
        )
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
}

fn register_pod(engine: &mut Engine) {
    engine
        .register_type_with_name::<PodRef>("Pod")
        .register_fn("to_string", |p: &mut PodRef| {
            format!("{}/{}", p.namespace, p.name)
        })
        .register_get("namespace", |p: &mut PodRef| {
            pod_reads::record(|| PodRead::Namespace {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
            });
            p.namespace.clone()
        })
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
            pod_reads::record(|| PodRead::Labels {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
            });
            string_map(p.get().map(|pod| &pod.meta.labels))
        });
}

/// `Cluster`: its nodes and pods, and who holds an address.
fn register_cluster(engine: &mut Engine) {
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
        // The nodes one of whose pod CIDRs (spec.podCIDRs, one per family)
        // holds an address: where a CNI that routes a CIDR per node sends
        // it, without a script looping over every node of a large cluster
        // for each packet.
        .register_fn(
            "nodes_with_pod_cidr",
            |c: &mut ClusterRef, address: Dynamic| -> Fallible<Array> {
                let address = as_ip(&address)?;
                Ok(c.snapshot
                    .cluster
                    .nodes_with_pod_cidr(address, &[])?
                    .into_iter()
                    .filter_map(|n| NodeRef::new(&c.snapshot, &n.meta.name))
                    .map(Dynamic::from)
                    .collect())
            },
        )
        // The same, with the pod CIDRs the `annotations` hold too
        // (`Node.pod_cidrs_from`).
        .register_fn(
            "nodes_with_pod_cidr",
            |c: &mut ClusterRef, address: Dynamic, annotations: Array| -> Fallible<Array> {
                let address = as_ip(&address)?;
                let annotations = annotation_names(annotations)?;
                Ok(c.snapshot
                    .cluster
                    .nodes_with_pod_cidr(address, &annotations)?
                    .into_iter()
                    .filter_map(|n| NodeRef::new(&c.snapshot, &n.meta.name))
                    .map(Dynamic::from)
                    .collect())
            },
        )
        // The `n`th address of every node's first pod CIDR of a family but
        // `except`'s, in the nodes' order: the pods' addresses a CNI that
        // gives each node a pod CIDR keeps traffic between (a masquerade
        // check's `kept:`), without a script looping over every node of a
        // large cluster.
        .register_fn(
            "pod_cidr_hosts",
            |c: &mut ClusterRef, n: i64, ipv4: bool, except: &str| -> Fallible<Array> {
                let mut hosts = Array::new();
                for (name, cidrs) in c.snapshot.cluster.node_pod_cidrs() {
                    if name == except {
                        continue;
                    }
                    let family = cidrs.iter().find(|c| c.addr().is_ipv4() == ipv4);
                    if let Some(mut cidr) = family.copied() {
                        hosts.push(Dynamic::from(nth_host(&mut cidr, n)?));
                    }
                }
                Ok(hosts)
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
                    .pods_in(net)
                    .into_iter()
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
                    .pods_labelled(key, value)
                    .into_iter()
                    .filter_map(|p| PodRef::new(&c.snapshot, &p.meta.namespace, &p.meta.name))
                    .map(Dynamic::from)
                    .collect()
            },
        )
        .register_fn(
            "by_ip",
            |c: &mut ClusterRef, ip: Dynamic| -> Fallible<Array> {
                let ip = as_ip(&ip)?;
                Ok(c.snapshot.cluster.by_ip(ip).iter().map(ip_owner).collect())
            },
        )
        // Only the owners of one kind: a script after the Service of an
        // address is handed no pod's namespace (which a matrix's twins may
        // differ in) on the way.
        .register_fn(
            "by_ip",
            |c: &mut ClusterRef, ip: Dynamic, kind: &str| -> Fallible<Array> {
                let ip = as_ip(&ip)?;
                let owners = c.snapshot.cluster.by_ip(ip).iter();
                Ok(owners
                    .filter(|owner| owner.kind() == kind)
                    .map(ip_owner)
                    .collect())
            },
        )
        // The pod an address leads into, as itself: unlike `by_ip`, it hands
        // out no namespace as text (a matrix's twins may differ in theirs).
        .register_fn(
            "pod_at",
            |c: &mut ClusterRef, ip: Dynamic| -> Fallible<Dynamic> {
                let ip = as_ip(&ip)?;
                Ok(opt(c.snapshot.cluster.pod_at(ip).and_then(|pod| {
                    PodRef::new(&c.snapshot, &pod.meta.namespace, &pod.meta.name).map(Dynamic::from)
                })))
            },
        );
}

/// A Service, its pods and its endpoints.
fn register_services(engine: &mut Engine) {
    engine
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
        );
}

/// ConfigMaps, DaemonSets, NetworkPolicies and objects of any kind.
fn register_objects(engine: &mut Engine) {
    engine
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
        .register_fn("has_network_policies", |c: &mut ClusterRef| {
            c.snapshot.cluster.has_network_policies()
        })
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

pub(super) fn node_netns(node: &mut NodeRef) -> Dynamic {
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
/// `port` is `()` for ICMP; `protocol` is `tcp`, `udp`, `sctp`, `icmp` or
/// `icmpv6` (ICMP of IPv6, which policies treat as ICMP: no port).
pub(super) fn network_policy(
    c: &mut ClusterRef,
    src: Dynamic,
    dst: Dynamic,
    port: Dynamic,
    protocol: &str,
) -> Fallible<Dynamic> {
    let (src, dst) = (as_ip(&src)?, as_ip(&dst)?);
    let transport = match protocol.to_ascii_lowercase().as_str() {
        "icmp" | "icmpv6" => None,
        name => {
            let Some(protocol) = [
                ClusterProtocol::Tcp,
                ClusterProtocol::Udp,
                ClusterProtocol::Sctp,
            ]
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name)) else {
                return fail(format!(
                    "protocol {name:?} is not tcp, udp, sctp, icmp or icmpv6"
                ));
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
        from_destination_node: from_pods_node(&c.snapshot, src, dst),
    });
    Ok(map([
        ("ingress", direction_verdict(&verdict.ingress)),
        ("egress", direction_verdict(&verdict.egress)),
    ]))
}

/// Whether `src` is an address of the node of the pod at `dst`: one of the
/// Node's addresses, or one its host namespace holds (the bridge's address
/// a node sends to its own pods from).
fn from_pods_node(snapshot: &Snapshot, src: IpAddr, dst: IpAddr) -> bool {
    let cluster = &snapshot.cluster;
    let Some(node) = cluster.pod_at(dst).and_then(|pod| pod.node_name.as_deref()) else {
        return false;
    };
    let named = cluster
        .node(node)
        .is_some_and(|n| n.addresses.iter().any(|a| a.ip() == Some(src)));
    let host = NetnsId::Host {
        node: node.to_owned(),
    };
    let held = snapshot
        .namespaces
        .get(&host)
        .and_then(|entry| entry.dump().addrs.as_deref())
        .is_some_and(|ifaces| {
            ifaces
                .iter()
                .any(|iface| iface.addresses.iter().any(|a| a.local == src))
        });
    named || held
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

/// The annotation names a script gives, as strings.
fn annotation_names(annotations: Array) -> Fallible<Vec<String>> {
    annotations
        .into_iter()
        .map(|name| {
            name.into_string()
                .or_else(|found| fail(format!("an annotation name is a string, not {found}")))
        })
        .collect()
}
