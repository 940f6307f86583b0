//! The Kubernetes objects of a snapshot (`<snapshot>/cluster/`), read into
//! skoop's own compact cluster model.
//!
//! Files hold objects exactly as `kubectl get ... -o yaml|json` writes them:
//! single objects, `kind: List` (or `PodList` and friends), multi-document
//! YAML, one or more JSON values. Node, Pod, Service, EndpointSlice,
//! Endpoints, ConfigMap, DaemonSet, NetworkPolicy and Namespace are typed;
//! every other kind is a [`GenericObject`] that packs query by apiVersion and
//! kind. The code names no CNI.
//!
//! Invariants:
//! - k8s-openapi stays inside this module: the model is skoop's own, so the
//!   engine never depends on it.
//! - Loading never stops at the first problem and never panics. A broken
//!   document, a field of the wrong type or an invalid IP costs only that
//!   document, object or field, and is reported with file, line and column.

pub mod cache;
mod convert;
mod de;
mod direct;
mod document;
mod load;
mod model;
mod network_policy;
mod selector;
mod stream;
#[cfg(test)]
mod tests;
mod wire;
mod yaml;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub use load::{Budget, Reading, load, load_file_text, load_file_text_as, load_within};
pub use model::{
    AddressType, ApiEnum, ConfigMap, Container, ContainerPort, DaemonSet, Endpoint,
    EndpointAddress, EndpointConditions, EndpointPort, EndpointSlice, EndpointSubset, Endpoints,
    GenericObject, Labels, NAMESPACE_NAME_LABEL, Namespace, NetworkPolicy, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicyRule, Node, NodeAddress, Object, ObjectMeta, ObjectReference,
    ObjectSource, Pod, PodPhase, PolicyTypes, PortRef, Protocol, Service, ServicePort, ServiceType,
    SessionAffinity, TemplateContainer, TrafficPolicy, UnreadableNetworkPolicy,
};
pub use network_policy::{
    Direction, DirectionVerdict, MAX_LISTED, PolicyDecision, PolicyFlow, PolicyOutcome,
    PolicyVerdict, RuleMatch, Verdict,
};
pub use selector::{LabelSelector, LabelSelectorRequirement, RequirementError, SelectorOperator};

/// The cluster's objects, with lookups by name, by IP and by NodePort.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct Cluster {
    nodes: BTreeMap<String, Node>,
    namespaces: BTreeMap<String, Namespace>,
    pods: ByNamespace<Pod>,
    services: ByNamespace<Service>,
    endpoint_slices: ByNamespace<EndpointSlice>,
    endpoints: ByNamespace<Endpoints>,
    config_maps: ByNamespace<ConfigMap>,
    daemon_sets: ByNamespace<DaemonSet>,
    network_policies: ByNamespace<NetworkPolicy>,
    unreadable_network_policies: ByNamespace<UnreadableNetworkPolicy>,
    others: BTreeMap<GenericKey, GenericObject>,
    ips: BTreeMap<IpAddr, Vec<IpOwner>>,
    node_ports: BTreeMap<(Protocol, u16), (String, String)>,
}

/// What an IP of the cluster belongs to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IpOwner {
    /// One of a pod's `status.podIPs`. A `host_network` pod has its node's
    /// IPs, so the node owns the same address.
    Pod {
        namespace: String,
        name: String,
        host_network: bool,
    },
    /// An `InternalIP` or `ExternalIP` of a node.
    Node {
        name: String,
    },
    ServiceClusterIp {
        namespace: String,
        name: String,
    },
    ServiceExternalIp {
        namespace: String,
        name: String,
    },
    ServiceLoadBalancerIp {
        namespace: String,
        name: String,
    },
}

impl IpOwner {
    /// The service, `(namespace, name)`, whose cluster, external or load
    /// balancer IP this is.
    pub fn service(&self) -> Option<(&str, &str)> {
        match self {
            IpOwner::ServiceClusterIp { namespace, name }
            | IpOwner::ServiceExternalIp { namespace, name }
            | IpOwner::ServiceLoadBalancerIp { namespace, name } => Some((namespace, name)),
            IpOwner::Pod { .. } | IpOwner::Node { .. } => None,
        }
    }
}

/// Pods not finished that claim the same address.
#[derive(Debug, Clone)]
pub struct IpConflict<'a> {
    pub ip: IpAddr,
    /// The one [`Cluster::pod_at`] gives: Running if one is.
    pub chosen: &'a Pod,
    pub others: Vec<&'a Pod>,
}

impl IpConflict<'_> {
    /// Whether the cluster itself could not tell which one holds the
    /// address: the chosen pod is no more Running than another.
    pub fn ambiguous(&self) -> bool {
        self.others
            .iter()
            .any(|other| other.phase == self.chosen.phase)
    }
}

/// An object whose kind, namespace and name were already taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name} is defined twice (first at {first})")]
pub struct DuplicateObject {
    pub kind: String,
    /// `namespace/name`, or `name` alone for a cluster-scoped object.
    pub name: String,
    pub first: ObjectSource,
}

/// Generic objects are the same object when group, kind, namespace and name
/// agree: two versions of one group serve the same object, while two groups
/// (Calico's `crd.projectcalico.org` and `projectcalico.org`) are distinct.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
struct GenericKey {
    group: String,
    kind: String,
    namespace: String,
    name: String,
}

impl GenericKey {
    fn of(object: &GenericObject) -> Self {
        GenericKey {
            group: object.group().to_owned(),
            kind: object.kind.clone(),
            namespace: object.meta.namespace.clone(),
            name: object.meta.name.clone(),
        }
    }
}

/// Namespaced objects of one kind: namespace, then name.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ByNamespace<T>(BTreeMap<String, BTreeMap<String, T>>);

impl<T> Default for ByNamespace<T> {
    fn default() -> Self {
        ByNamespace(BTreeMap::new())
    }
}

impl<T> ByNamespace<T> {
    fn get(&self, namespace: &str, name: &str) -> Option<&T> {
        self.0.get(namespace)?.get(name)
    }

    fn in_namespace(&self, namespace: &str) -> impl Iterator<Item = &T> {
        self.0.get(namespace).into_iter().flat_map(BTreeMap::values)
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.values().flat_map(BTreeMap::values)
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.0.values_mut().flat_map(BTreeMap::values_mut)
    }

    fn len(&self) -> usize {
        self.0.values().map(BTreeMap::len).sum()
    }

    /// Inserts unless the name is taken; the first object stays.
    fn insert(&mut self, namespace: String, name: String, object: T) {
        self.0
            .entry(namespace)
            .or_default()
            .entry(name)
            .or_insert(object);
    }
}

impl Cluster {
    /// Adds an object and indexes its IPs and NodePorts. An object whose
    /// kind, namespace and name are taken is refused; the first one stays.
    /// A NodePort already claimed stays with its first service.
    pub fn insert(&mut self, object: Object) -> Result<(), DuplicateObject> {
        let owners = ip_owners(&object);
        let node_ports = node_ports(&object);
        if let Some(first) = self.source_of_same(&object) {
            let meta = object.meta();
            let name = if meta.namespace.is_empty() {
                meta.name.clone()
            } else {
                format!("{}/{}", meta.namespace, meta.name)
            };
            return Err(DuplicateObject {
                kind: object.kind().to_owned(),
                name,
                first: first.clone(),
            });
        }
        let (namespace, name) = (object.meta().namespace.clone(), object.meta().name.clone());
        match object {
            Object::Node(node) => {
                self.nodes.entry(name).or_insert(node);
            }
            Object::Namespace(object) => {
                self.namespaces.entry(name).or_insert(object);
            }
            Object::Pod(pod) => self.pods.insert(namespace, name, pod),
            Object::Service(service) => self.services.insert(namespace, name, service),
            Object::EndpointSlice(slice) => self.endpoint_slices.insert(namespace, name, slice),
            Object::Endpoints(endpoints) => self.endpoints.insert(namespace, name, endpoints),
            Object::ConfigMap(config_map) => self.config_maps.insert(namespace, name, config_map),
            Object::DaemonSet(daemon_set) => self.daemon_sets.insert(namespace, name, daemon_set),
            Object::NetworkPolicy(policy) => self.network_policies.insert(namespace, name, policy),
            Object::UnreadableNetworkPolicy(policy) => {
                self.unreadable_network_policies
                    .insert(namespace, name, policy);
            }
            Object::Generic(object) => {
                self.others.entry(GenericKey::of(&object)).or_insert(object);
            }
        }
        for (ip, owner) in owners {
            self.ips.entry(ip).or_default().push(owner);
        }
        for (key, service) in node_ports {
            self.node_ports.entry(key).or_insert(service);
        }
        Ok(())
    }

    /// Where an object with the same identity as `object` was read from.
    fn source_of_same(&self, object: &Object) -> Option<&ObjectSource> {
        let meta = object.meta();
        let (namespace, name) = (meta.namespace.as_str(), meta.name.as_str());
        let existing = match object {
            Object::Node(_) => self.node(name).map(|o| &o.meta),
            Object::Namespace(_) => self.namespace(name).map(|o| &o.meta),
            Object::Pod(_) => self.pod(namespace, name).map(|o| &o.meta),
            Object::Service(_) => self.service(namespace, name).map(|o| &o.meta),
            Object::EndpointSlice(_) => self.endpoint_slices.get(namespace, name).map(|o| &o.meta),
            Object::Endpoints(_) => self.endpoints.get(namespace, name).map(|o| &o.meta),
            Object::ConfigMap(_) => self.config_map(namespace, name).map(|o| &o.meta),
            Object::DaemonSet(_) => self.daemon_set(namespace, name).map(|o| &o.meta),
            // One name, whether its policy could be read or not.
            Object::NetworkPolicy(_) | Object::UnreadableNetworkPolicy(_) => self
                .network_policies
                .get(namespace, name)
                .map(|o| &o.meta)
                .or_else(|| {
                    self.unreadable_network_policies
                        .get(namespace, name)
                        .map(|o| &o.meta)
                }),
            Object::Generic(generic) => self.others.get(&GenericKey::of(generic)).map(|o| &o.meta),
        };
        existing.map(|meta| &meta.source)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    pub fn namespaces(&self) -> impl Iterator<Item = &Namespace> {
        self.namespaces.values()
    }

    pub fn namespace(&self, name: &str) -> Option<&Namespace> {
        self.namespaces.get(name)
    }

    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.iter()
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods.get(namespace, name)
    }

    /// The pods scheduled on `node` (`spec.nodeName`).
    pub fn pods_on<'a>(&'a self, node: &'a str) -> impl Iterator<Item = &'a Pod> {
        self.pods()
            .filter(move |pod| pod.node_name.as_deref() == Some(node))
    }

    /// The pods of `namespace` whose labels `selector` matches.
    pub fn pods_matching<'a>(
        &'a self,
        namespace: &str,
        selector: &'a LabelSelector,
    ) -> impl Iterator<Item = &'a Pod> {
        self.pods
            .in_namespace(namespace)
            .filter(|pod| selector.matches(&pod.meta.labels))
    }

    pub fn services(&self) -> impl Iterator<Item = &Service> {
        self.services.iter()
    }

    pub fn service(&self, namespace: &str, name: &str) -> Option<&Service> {
        self.services.get(namespace, name)
    }

    pub fn endpoint_slices(&self) -> impl Iterator<Item = &EndpointSlice> {
        self.endpoint_slices.iter()
    }

    /// The EndpointSlices labelled as belonging to `service`.
    pub fn endpoint_slices_for<'a>(
        &'a self,
        service: &'a Service,
    ) -> impl Iterator<Item = &'a EndpointSlice> {
        self.endpoint_slices
            .in_namespace(&service.meta.namespace)
            .filter(|slice| slice.service_name.as_deref() == Some(service.meta.name.as_str()))
    }

    pub fn endpoints(&self) -> impl Iterator<Item = &Endpoints> {
        self.endpoints.iter()
    }

    /// The Endpoints object of `service` (it bears the service's name).
    pub fn endpoints_for(&self, service: &Service) -> Option<&Endpoints> {
        self.endpoints
            .get(&service.meta.namespace, &service.meta.name)
    }

    pub fn config_maps(&self) -> impl Iterator<Item = &ConfigMap> {
        self.config_maps.iter()
    }

    pub fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.config_maps.get(namespace, name)
    }

    pub fn daemon_sets(&self) -> impl Iterator<Item = &DaemonSet> {
        self.daemon_sets.iter()
    }

    pub fn daemon_set(&self, namespace: &str, name: &str) -> Option<&DaemonSet> {
        self.daemon_sets.get(namespace, name)
    }

    pub fn network_policies(&self) -> impl Iterator<Item = &NetworkPolicy> {
        self.network_policies.iter()
    }

    /// Whether the cluster has any NetworkPolicy, readable or not: without
    /// one, NetworkPolicy has nothing to say of any flow.
    pub fn has_network_policies(&self) -> bool {
        self.network_policies.len() + self.unreadable_network_policies.len() > 0
    }

    /// The NetworkPolicies of `namespace`: the ones that can select its pods.
    pub fn network_policies_in(&self, namespace: &str) -> impl Iterator<Item = &NetworkPolicy> {
        self.network_policies.in_namespace(namespace)
    }

    /// The NetworkPolicies of `namespace` that could not be read.
    pub fn unreadable_network_policies_in(
        &self,
        namespace: &str,
    ) -> impl Iterator<Item = &UnreadableNetworkPolicy> {
        self.unreadable_network_policies.in_namespace(namespace)
    }

    /// Every object without a typed model.
    pub fn others(&self) -> impl Iterator<Item = &GenericObject> {
        self.others.values()
    }

    /// The generic objects of exactly this apiVersion and kind.
    pub fn objects<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
    ) -> impl Iterator<Item = &'a GenericObject> {
        self.others
            .values()
            .filter(move |o| o.api_version == api_version && o.kind == kind)
    }

    /// Everything that owns `ip`: several owners are normal (a hostNetwork
    /// pod and its node; a finished pod and the running one that reuses its IP).
    pub fn by_ip(&self, ip: IpAddr) -> &[IpOwner] {
        self.ips.get(&ip).map_or(&[], Vec::as_slice)
    }

    /// The pod whose own network namespace has `ip`, as the cluster resolves
    /// it: not one on the host network (those share their node's address),
    /// and of pods claiming the same address (a stale pod keeping an address
    /// that was given again) the Running one, then one not yet finished,
    /// then a finished one. [`Cluster::ip_conflicts`] says where this choice
    /// is not clear-cut.
    pub fn pod_at(&self, ip: IpAddr) -> Option<&Pod> {
        self.pods_at(ip).into_iter().next()
    }

    /// The pods with `ip` in their own network namespace, in the order
    /// [`Cluster::pod_at`] prefers them (stable: by namespace and name).
    fn pods_at(&self, ip: IpAddr) -> Vec<&Pod> {
        let mut pods: Vec<&Pod> = self
            .by_ip(ip)
            .iter()
            .filter_map(|owner| match owner {
                IpOwner::Pod {
                    namespace,
                    name,
                    host_network: false,
                } => self.pod(namespace, name),
                _ => None,
            })
            .collect();
        pods.sort_by_key(|pod| match pod.phase {
            Some(PodPhase::Running) => 0,
            Some(PodPhase::Succeeded | PodPhase::Failed) => 2,
            _ => 1,
        });
        pods
    }

    /// Addresses that more than one pod not yet finished claims: one is a
    /// stale record, and which is real the snapshot can only guess (the
    /// Running one, which [`Cluster::pod_at`] gives).
    pub fn ip_conflicts(&self) -> Vec<IpConflict<'_>> {
        // Only an address with several owners can have two pods.
        self.ips
            .iter()
            .filter(|(_, owners)| owners.len() > 1)
            .filter_map(|(&ip, _)| {
                let live: Vec<&Pod> = self
                    .pods_at(ip)
                    .into_iter()
                    .filter(|pod| {
                        !matches!(pod.phase, Some(PodPhase::Succeeded | PodPhase::Failed))
                    })
                    .collect();
                let (chosen, others) = live.split_first()?;
                (!others.is_empty()).then(|| IpConflict {
                    ip,
                    chosen,
                    others: others.to_vec(),
                })
            })
            .collect()
    }

    /// The service that claimed this NodePort first.
    pub fn service_by_node_port(&self, protocol: Protocol, port: u16) -> Option<&Service> {
        let (namespace, name) = self.node_ports.get(&(protocol, port))?;
        self.service(namespace, name)
    }

    /// How many objects the cluster holds, of every kind.
    pub fn object_count(&self) -> usize {
        let namespaced = [
            self.pods.len(),
            self.services.len(),
            self.endpoint_slices.len(),
            self.endpoints.len(),
            self.config_maps.len(),
            self.daemon_sets.len(),
            self.network_policies.len(),
            self.unreadable_network_policies.len(),
        ];
        self.nodes.len()
            + self.namespaces.len()
            + self.others.len()
            + namespaced.iter().sum::<usize>()
    }

    /// Every object read from a file under `from` as read from the same file
    /// under `to` (the cluster cache of a snapshot since moved).
    fn rebase(&mut self, from: &Path, to: &Path) {
        // Objects come from a few files, mostly one file's after another:
        // the last file's new path is reused.
        let mut last: Option<(PathBuf, PathBuf)> = None;
        let mut rebase = |meta: &mut ObjectMeta| {
            if let Some((old, new)) = &last
                && *old == meta.source.file
            {
                meta.source.file.clone_from(new);
            } else if let Some(new) = cache::rebased(&meta.source.file, from, to) {
                let old = std::mem::replace(&mut meta.source.file, new.clone());
                last = Some((old, new));
            }
        };
        self.nodes.values_mut().for_each(|o| rebase(&mut o.meta));
        self.namespaces
            .values_mut()
            .for_each(|o| rebase(&mut o.meta));
        self.others.values_mut().for_each(|o| rebase(&mut o.meta));
        self.pods.values_mut().for_each(|o| rebase(&mut o.meta));
        self.services.values_mut().for_each(|o| rebase(&mut o.meta));
        self.endpoint_slices
            .values_mut()
            .for_each(|o| rebase(&mut o.meta));
        self.endpoints
            .values_mut()
            .for_each(|o| rebase(&mut o.meta));
        self.config_maps
            .values_mut()
            .for_each(|o| rebase(&mut o.meta));
        self.daemon_sets
            .values_mut()
            .for_each(|o| rebase(&mut o.meta));
        self.network_policies
            .values_mut()
            .for_each(|o| rebase(&mut o.meta));
        self.unreadable_network_policies
            .values_mut()
            .for_each(|o| rebase(&mut o.meta));
    }
}

fn ip_owners(object: &Object) -> Vec<(IpAddr, IpOwner)> {
    let key = |meta: &ObjectMeta| (meta.namespace.clone(), meta.name.clone());
    match object {
        Object::Pod(pod) => pod
            .ips
            .iter()
            .map(|ip| {
                let (namespace, name) = key(&pod.meta);
                let owner = IpOwner::Pod {
                    namespace,
                    name,
                    host_network: pod.host_network,
                };
                (*ip, owner)
            })
            .collect(),
        Object::Node(node) => node
            .addresses
            .iter()
            .filter_map(NodeAddress::ip)
            .map(|ip| {
                let owner = IpOwner::Node {
                    name: node.meta.name.clone(),
                };
                (ip, owner)
            })
            .collect(),
        Object::Service(service) => {
            let owned = |ips: &[IpAddr], owner: fn(String, String) -> IpOwner| {
                ips.iter()
                    .map(|ip| {
                        let (namespace, name) = key(&service.meta);
                        (*ip, owner(namespace, name))
                    })
                    .collect::<Vec<_>>()
            };
            let mut owners = owned(&service.cluster_ips, |namespace, name| {
                IpOwner::ServiceClusterIp { namespace, name }
            });
            owners.extend(owned(&service.external_ips, |namespace, name| {
                IpOwner::ServiceExternalIp { namespace, name }
            }));
            owners.extend(owned(&service.load_balancer_ips, |namespace, name| {
                IpOwner::ServiceLoadBalancerIp { namespace, name }
            }));
            owners
        }
        _ => Vec::new(),
    }
}

fn node_ports(object: &Object) -> Vec<((Protocol, u16), (String, String))> {
    let Object::Service(service) = object else {
        return Vec::new();
    };
    service
        .ports
        .iter()
        .filter_map(|port| {
            let key = (port.protocol, port.node_port?);
            Some((
                key,
                (service.meta.namespace.clone(), service.meta.name.clone()),
            ))
        })
        .collect()
}
