//! What a check is run about: the contexts of its subjects in a snapshot
//! (nodes, pods, objects, each peer or port of them), or of a hop.

use std::sync::Arc;

use rhai::Dynamic;

use crate::packs::About;
use crate::packs::host::{config_map_map, daemon_set_map, json_to_dynamic, service_map};
use crate::packs::model::{Check, CheckScope, ForEach};
use crate::packs::scope::{Context, HopScope, NetnsRef, NodeRef, PodRef, Subject};
use crate::snapshot::cluster::{GenericObject, Node, ObjectMeta, Pod, Service};
use crate::snapshot::{NetnsId, Snapshot};

/// Every subject of a scope in a snapshot that `about` accepts, as contexts;
/// the peers of a check made per remote node are the nodes it accepts as
/// peers.
pub fn subjects(
    check: &Check,
    params: &Dynamic,
    snapshot: &Arc<Snapshot>,
    about: &About<'_>,
) -> Vec<Context> {
    match check.scope {
        CheckScope::Node => node_subjects(check, params, snapshot, about),
        CheckScope::Pod => pod_subjects(check, params, snapshot, about),
        CheckScope::Object => object_subjects(check, params, snapshot, about),
        CheckScope::Hop => Vec::new(),
    }
}

/// The nodes `about` accepts (each with each peer it accepts, for a check
/// made per remote node).
fn node_subjects(
    check: &Check,
    params: &Dynamic,
    snapshot: &Arc<Snapshot>,
    about: &About<'_>,
) -> Vec<Context> {
    let peer = about.peer;
    let about = about.subject;
    let base = |subject: Subject| Context::new(params.clone(), snapshot.clone(), subject);
    let mut contexts = Vec::new();
    // One peer refilled per node: asking about each of a large cluster's
    // nodes must not allocate a name for each, on every diagnosis.
    let asked = std::cell::RefCell::new(Subject::Node {
        name: String::new(),
    });
    let is_peer = |name: &str| {
        let mut subject = asked.borrow_mut();
        if let Subject::Node { name: asked } = &mut *subject {
            asked.clear();
            asked.push_str(name);
        }
        peer(&subject)
    };
    for id in snapshot.namespaces.keys() {
        let NetnsId::Host { node } = id else { continue };
        let subject = Subject::Node { name: node.clone() };
        if !about(&subject) {
            continue;
        }
        let mut ctx = base(subject);
        ctx.node = NodeRef::new(snapshot, node);
        ctx.netns = Some(NetnsRef {
            snapshot: snapshot.clone(),
            id: id.clone(),
        });
        match check.for_each {
            Some(ForEach::RemoteNodes) => {
                let peers = snapshot
                    .cluster
                    .node_names()
                    .filter(|name| name != node && is_peer(name));
                for peer in peers {
                    let mut ctx = ctx.clone();
                    ctx.peer = NodeRef::new(snapshot, peer);
                    contexts.push(ctx);
                }
            }
            Some(ForEach::LocalPods) => {
                let networked = snapshot
                    .cluster
                    .pods_on(node)
                    .filter(|pod| !pod.host_network && !pod.ips.is_empty());
                for pod in networked {
                    let mut ctx = ctx.clone();
                    ctx.pod = PodRef::new(snapshot, &pod.meta.namespace, &pod.meta.name);
                    contexts.push(ctx);
                }
            }
            _ => contexts.push(ctx),
        }
    }
    contexts
}

/// The pods `about` accepts (each with each container port, for a check
/// made per container port).
fn pod_subjects(
    check: &Check,
    params: &Dynamic,
    snapshot: &Arc<Snapshot>,
    about: &About<'_>,
) -> Vec<Context> {
    let about = about.subject;
    let base = |subject: Subject| Context::new(params.clone(), snapshot.clone(), subject);
    let mut contexts = Vec::new();
    for id in snapshot.namespaces.keys() {
        let NetnsId::Pod {
            node,
            namespace,
            name,
        } = id
        else {
            continue;
        };
        let subject = Subject::Pod {
            namespace: namespace.clone(),
            name: name.clone(),
        };
        if !about(&subject) {
            continue;
        }
        let mut ctx = base(subject);
        ctx.node = NodeRef::new(snapshot, node);
        ctx.pod = PodRef::new(snapshot, namespace, name);
        ctx.netns = Some(NetnsRef {
            snapshot: snapshot.clone(),
            id: id.clone(),
        });
        match check.for_each {
            Some(ForEach::ContainerPorts) => {
                let ports: Vec<Dynamic> = ctx
                    .pod
                    .as_ref()
                    .and_then(PodRef::get)
                    .map(container_ports)
                    .unwrap_or_default();
                for port in ports {
                    let mut ctx = ctx.clone();
                    ctx.port = Some(port);
                    contexts.push(ctx);
                }
            }
            _ => contexts.push(ctx),
        }
    }
    contexts
}

/// The objects of the check's kind `about` accepts (only those it lists, when
/// it lists some).
fn object_subjects(
    check: &Check,
    params: &Dynamic,
    snapshot: &Arc<Snapshot>,
    about: &About<'_>,
) -> Vec<Context> {
    let objects = about.objects;
    let about = about.subject;
    let mut contexts = Vec::new();
    let Some(kind) = &check.object else {
        return contexts;
    };
    let version_fits = |v: &str| kind.api_version.as_deref().is_none_or(|want| want == v);
    // One subject refilled per object: asking about each of a large
    // cluster's 150,000 pods must not allocate three strings for each.
    let asked = std::cell::RefCell::new(Subject::Object {
        kind: kind.kind.clone(),
        namespace: String::new(),
        name: String::new(),
    });
    let wanted = |meta: &ObjectMeta| {
        let mut subject = asked.borrow_mut();
        if let Subject::Object {
            namespace, name, ..
        } = &mut *subject
        {
            namespace.clone_from(&meta.namespace);
            name.clone_from(&meta.name);
        }
        about(&subject)
    };
    // With `objects`, only the objects named: looked up, not scanned for.
    let listed: Option<Vec<(&str, &str)>> = objects.map(|listed| {
        listed
            .iter()
            .filter_map(|subject| match subject {
                Subject::Object {
                    kind: k,
                    namespace,
                    name,
                } if *k == kind.kind => Some((namespace.as_str(), name.as_str())),
                _ => None,
            })
            .collect()
    });
    let cluster = &snapshot.cluster;
    match kind.kind.as_str() {
        "Node" if version_fits("v1") => {
            let nodes = named_or_all(&listed, cluster.nodes(), |_, n| cluster.node(n));
            for node in nodes.into_iter().filter(|n| wanted(&n.meta)) {
                contexts.push(node_object(node, params, snapshot));
            }
        }
        "Pod" if version_fits("v1") => {
            let pods = named_or_all(&listed, cluster.pods(), |ns, n| cluster.pod(ns, n));
            for pod in pods.into_iter().filter(|p| wanted(&p.meta)) {
                contexts.push(pod_object(pod, params, snapshot));
            }
        }
        "Service" if version_fits("v1") => {
            let services =
                named_or_all(&listed, cluster.services(), |ns, n| cluster.service(ns, n));
            for service in services.into_iter().filter(|s| wanted(&s.meta)) {
                contexts.push(service_object(service, params, snapshot));
            }
        }
        "DaemonSet" if version_fits("apps/v1") => {
            let daemon_sets = named_or_all(&listed, cluster.daemon_sets(), |ns, n| {
                cluster.daemon_set(ns, n)
            });
            for ds in daemon_sets.into_iter().filter(|d| wanted(&d.meta)) {
                let mut ctx = object_context("DaemonSet", &ds.meta, params, snapshot);
                ctx.object = Some(daemon_set_map(ds));
                contexts.push(ctx);
            }
        }
        "ConfigMap" if version_fits("v1") => {
            let config_maps = named_or_all(&listed, cluster.config_maps(), |ns, n| {
                cluster.config_map(ns, n)
            });
            for cm in config_maps.into_iter().filter(|c| wanted(&c.meta)) {
                let mut ctx = object_context("ConfigMap", &cm.meta, params, snapshot);
                ctx.object = Some(config_map_map(cm));
                contexts.push(ctx);
            }
        }
        _ => {
            // Objects as written are not indexed by name: the named
            // ones are found among those of their kind.
            let named = |meta: &ObjectMeta| {
                listed.as_ref().is_none_or(|names| {
                    names.contains(&(meta.namespace.as_str(), meta.name.as_str()))
                })
            };
            for object in cluster.others().filter(|o| {
                o.kind == kind.kind
                    && version_fits(&o.api_version)
                    && named(&o.meta)
                    && wanted(&o.meta)
            }) {
                contexts.push(generic_object(object, params, snapshot));
            }
        }
    }
    contexts
}

/// The objects `lookup` finds by the `(namespace, name)`s `listed`, or,
/// with no list, every one of `all`.
fn named_or_all<'c, T: 'c>(
    listed: &Option<Vec<(&str, &str)>>,
    all: impl Iterator<Item = &'c T>,
    lookup: impl Fn(&str, &str) -> Option<&'c T>,
) -> Vec<&'c T> {
    match listed {
        Some(names) => names.iter().filter_map(|&(ns, n)| lookup(ns, n)).collect(),
        None => all.collect(),
    }
}

fn object_subject(kind: &str, meta: &ObjectMeta) -> Subject {
    Subject::Object {
        kind: kind.into(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
    }
}

/// The context of an object check about the object `meta` names.
fn object_context(
    kind: &str,
    meta: &ObjectMeta,
    params: &Dynamic,
    snapshot: &Arc<Snapshot>,
) -> Context {
    Context::new(params.clone(), snapshot.clone(), object_subject(kind, meta))
}

fn node_object(node: &Node, params: &Dynamic, snapshot: &Arc<Snapshot>) -> Context {
    let mut ctx = object_context("Node", &node.meta, params, snapshot);
    ctx.node = NodeRef::new(snapshot, &node.meta.name);
    ctx.object = ctx.node.clone().map(Dynamic::from);
    ctx
}

fn pod_object(pod: &Pod, params: &Dynamic, snapshot: &Arc<Snapshot>) -> Context {
    let mut ctx = object_context("Pod", &pod.meta, params, snapshot);
    ctx.pod = PodRef::new(snapshot, &pod.meta.namespace, &pod.meta.name);
    ctx.object = ctx.pod.clone().map(Dynamic::from);
    ctx
}

fn service_object(service: &Service, params: &Dynamic, snapshot: &Arc<Snapshot>) -> Context {
    let mut ctx = object_context("Service", &service.meta, params, snapshot);
    ctx.object = Some(service_map(service));
    ctx
}

fn generic_object(object: &GenericObject, params: &Dynamic, snapshot: &Arc<Snapshot>) -> Context {
    let mut ctx = object_context(&object.kind, &object.meta, params, snapshot);
    ctx.object = Some(json_to_dynamic(&object.value));
    ctx
}

fn container_ports(pod: &Pod) -> Vec<Dynamic> {
    pod.containers
        .iter()
        .flat_map(|c| {
            c.ports.iter().map(move |p| {
                let map: rhai::Map = [
                    ("container".into(), Dynamic::from(c.name.clone())),
                    ("port".into(), Dynamic::from(i64::from(p.container_port))),
                    (
                        "protocol".into(),
                        Dynamic::from(p.protocol.as_str().to_lowercase()),
                    ),
                ]
                .into_iter()
                .collect();
                Dynamic::from_map(map)
            })
        })
        .collect()
}

/// The context of a hop-scoped check or hook.
pub fn hop_context(params: &Dynamic, hop: &Arc<HopScope>) -> Context {
    let snapshot = &hop.snapshot;
    let mut ctx = Context::new(
        params.clone(),
        snapshot.clone(),
        Subject::Hop {
            netns: hop.netns.to_string(),
        },
    );
    ctx.node = NodeRef::new(snapshot, hop.netns.node());
    if let NetnsId::Pod {
        namespace, name, ..
    } = &hop.netns
    {
        ctx.pod = PodRef::new(snapshot, namespace, name);
    }
    ctx.netns = Some(NetnsRef {
        snapshot: snapshot.clone(),
        id: hop.netns.clone(),
    });
    ctx.hop = Some(hop.clone());
    ctx
}
