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
mod indexed;
mod load;
mod model;
mod network_policy;
pub mod pod_reads;
mod selector;
mod stream;
#[cfg(test)]
mod tests;
mod wire;
mod yaml;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub use indexed::LayoutError;
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

/// The cluster's objects, with lookups by name, by IP, by node, by label
/// and by NodePort: owned when read from `cluster/`'s files, read in place
/// when taken from its cache (`indexed`), where an object is decoded the
/// first time it is asked for.
#[derive(Default, Clone)]
pub struct Cluster {
    store: Store,
}

#[derive(Clone)]
enum Store {
    Owned(Box<Model>),
    Indexed(Box<indexed::Indexed>),
}

impl Default for Store {
    fn default() -> Self {
        Store::Owned(Box::default())
    }
}

/// The cluster's objects, owned, in maps by name.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
struct Model {
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
    /// The owner's kind as Kubernetes names it: `Pod`, `Node` or `Service`.
    pub fn kind(&self) -> &'static str {
        match self {
            IpOwner::Pod { .. } => "Pod",
            IpOwner::Node { .. } => "Node",
            IpOwner::ServiceClusterIp { .. }
            | IpOwner::ServiceExternalIp { .. }
            | IpOwner::ServiceLoadBalancerIp { .. } => "Service",
        }
    }

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

    fn in_namespace<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a T> + use<'a, T> {
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

impl Model {
    /// Adds an object and indexes its IPs and NodePorts. An object whose
    /// kind, namespace and name are taken is refused; the first one stays.
    /// A NodePort already claimed stays with its first service.
    fn insert(&mut self, object: Object) -> Result<(), DuplicateObject> {
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
            Object::Node(_) => self.nodes.get(name).map(|o| &o.meta),
            Object::Namespace(_) => self.namespaces.get(name).map(|o| &o.meta),
            Object::Pod(_) => self.pods.get(namespace, name).map(|o| &o.meta),
            Object::Service(_) => self.services.get(namespace, name).map(|o| &o.meta),
            Object::EndpointSlice(_) => self.endpoint_slices.get(namespace, name).map(|o| &o.meta),
            Object::Endpoints(_) => self.endpoints.get(namespace, name).map(|o| &o.meta),
            Object::ConfigMap(_) => self.config_maps.get(namespace, name).map(|o| &o.meta),
            Object::DaemonSet(_) => self.daemon_sets.get(namespace, name).map(|o| &o.meta),
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

    /// How many objects the cluster holds, of every kind.
    fn object_count(&self) -> usize {
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

/// An iterator over the objects of either store.
type Objects<'a, T> = Box<dyn Iterator<Item = &'a T> + 'a>;

impl Cluster {
    /// The cluster of a cache's model, read in place.
    fn indexed(indexed: indexed::Indexed) -> Cluster {
        Cluster {
            store: Store::Indexed(Box::new(indexed)),
        }
    }

    /// The whole model, owned: borrowed when it is, else every object of
    /// the cache decoded.
    fn model(&self) -> std::borrow::Cow<'_, Model> {
        match &self.store {
            Store::Owned(model) => std::borrow::Cow::Borrowed(model),
            Store::Indexed(indexed) => std::borrow::Cow::Owned(indexed.to_model()),
        }
    }

    /// The owned model, to change (a cache's is decoded whole first).
    fn model_mut(&mut self) -> &mut Model {
        if let Store::Indexed(indexed) = &self.store {
            self.store = Store::Owned(Box::new(indexed.to_model()));
        }
        match &mut self.store {
            Store::Owned(model) => model,
            Store::Indexed(_) => unreachable!("made owned above"),
        }
    }

    /// Adds an object and indexes its IPs and NodePorts. An object whose
    /// kind, namespace and name are taken is refused; the first one stays.
    /// A NodePort already claimed stays with its first service.
    pub fn insert(&mut self, object: Object) -> Result<(), DuplicateObject> {
        self.model_mut().insert(object)
    }

    pub fn nodes(&self) -> Objects<'_, Node> {
        match &self.store {
            Store::Owned(m) => Box::new(m.nodes.values()),
            Store::Indexed(i) => Box::new(i.nodes()),
        }
    }

    /// The nodes' names, in order, without reading the nodes: asking
    /// which of 5,000 nodes is a check's peer reads one or two of them.
    pub fn node_names(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match &self.store {
            Store::Owned(m) => Box::new(m.nodes.keys().map(String::as_str)),
            Store::Indexed(i) => Box::new(i.node_names()),
        }
    }

    /// Each node's name and pod CIDRs (`spec.podCIDRs`, else
    /// `spec.podCIDR`), in order, without reading the rest of the nodes.
    pub fn node_pod_cidrs(&self) -> Box<dyn Iterator<Item = (&str, Vec<ipnet::IpNet>)> + '_> {
        match &self.store {
            Store::Owned(m) => Box::new(
                (m.nodes.iter()).map(|(name, node)| (name.as_str(), node.pod_cidrs.clone())),
            ),
            Store::Indexed(i) => Box::new(i.node_pod_cidrs()),
        }
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        match &self.store {
            Store::Owned(m) => m.nodes.get(name),
            Store::Indexed(i) => i.node(name),
        }
    }

    /// The first node (by name) annotated `key`.
    pub fn node_annotated(&self, key: &str) -> Option<&Node> {
        match &self.store {
            Store::Owned(m) => m
                .nodes
                .values()
                .find(|n| n.meta.annotations.contains_key(key)),
            Store::Indexed(i) => i.node_annotated(key),
        }
    }

    /// The nodes one of whose pod CIDRs holds `address`: `spec.podCIDRs`
    /// (else `spec.podCIDR`), and those each of `annotations` holds
    /// ([`Node::pod_cidrs_with`]); an error names the first node (by name)
    /// whose annotation holds no CIDR.
    pub fn nodes_with_pod_cidr(
        &self,
        address: IpAddr,
        annotations: &[String],
    ) -> Result<Vec<&Node>, String> {
        // Only a node with such a pod CIDR or annotation can hold it.
        let candidates: Vec<&Node> = match &self.store {
            Store::Owned(m) => m.nodes.values().collect(),
            Store::Indexed(i) => i.nodes_with_pod_cidr(address, annotations),
        };
        let mut nodes = Vec::new();
        for node in candidates {
            if node
                .pod_cidrs_with(annotations)?
                .iter()
                .any(|net| net.contains(&address))
            {
                nodes.push(node);
            }
        }
        Ok(nodes)
    }

    pub fn namespaces(&self) -> Objects<'_, Namespace> {
        match &self.store {
            Store::Owned(m) => Box::new(m.namespaces.values()),
            Store::Indexed(i) => Box::new(i.namespaces()),
        }
    }

    pub fn namespace(&self, name: &str) -> Option<&Namespace> {
        match &self.store {
            Store::Owned(m) => m.namespaces.get(name),
            Store::Indexed(i) => i.namespace(name),
        }
    }

    pub fn pods(&self) -> Objects<'_, Pod> {
        match &self.store {
            Store::Owned(m) => Box::new(m.pods.iter()),
            Store::Indexed(i) => Box::new(i.pods()),
        }
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        match &self.store {
            Store::Owned(m) => m.pods.get(namespace, name),
            Store::Indexed(i) => i.pod(namespace, name),
        }
    }

    /// The pods scheduled on `node` (`spec.nodeName`).
    pub fn pods_on<'a>(&'a self, node: &'a str) -> Objects<'a, Pod> {
        match &self.store {
            Store::Owned(m) => Box::new(
                m.pods
                    .iter()
                    .filter(move |pod| pod.node_name.as_deref() == Some(node)),
            ),
            Store::Indexed(i) => Box::new(i.pods_on(node).into_iter()),
        }
    }

    /// The pods of `namespace` whose labels `selector` matches.
    pub fn pods_matching<'a>(
        &'a self,
        namespace: &str,
        selector: &'a LabelSelector,
    ) -> Objects<'a, Pod> {
        pod_reads::record(|| pod_reads::PodRead::Selected {
            namespace: namespace.to_owned(),
            selector: selector.clone(),
        });
        let pods: Objects<'a, Pod> = match &self.store {
            Store::Owned(m) => Box::new(m.pods.in_namespace(namespace)),
            // Only a pod with one of the labels the selector requires can
            // match it.
            Store::Indexed(i) => {
                let label = selector.match_labels.iter().next();
                let label = label.map(|(key, value)| (key.as_str(), value.as_str()));
                Box::new(i.pods_labelled_in(namespace, label).into_iter())
            }
        };
        Box::new(pods.filter(|pod| selector.matches(&pod.meta.labels)))
    }

    /// The pods, in any namespace, labelled `key` with `value`.
    pub fn pods_labelled(&self, key: &str, value: &str) -> Vec<&Pod> {
        pod_reads::record(|| pod_reads::PodRead::Labelled {
            key: key.to_owned(),
            value: value.to_owned(),
        });
        match &self.store {
            Store::Owned(m) => m
                .pods
                .iter()
                .filter(|p| p.meta.labels.get(key).map(String::as_str) == Some(value))
                .collect(),
            Store::Indexed(i) => i.pods_labelled(key, value),
        }
    }

    /// The pods with an address in `net` (a CNI's block of addresses).
    pub fn pods_in(&self, net: ipnet::IpNet) -> Vec<&Pod> {
        match &self.store {
            Store::Owned(m) => m
                .pods
                .iter()
                .filter(|p| p.ips.iter().any(|ip| net.contains(ip)))
                .collect(),
            Store::Indexed(i) => i.pods_in(net),
        }
    }

    pub fn services(&self) -> Objects<'_, Service> {
        match &self.store {
            Store::Owned(m) => Box::new(m.services.iter()),
            Store::Indexed(i) => Box::new(i.services()),
        }
    }

    pub fn service(&self, namespace: &str, name: &str) -> Option<&Service> {
        match &self.store {
            Store::Owned(m) => m.services.get(namespace, name),
            Store::Indexed(i) => i.service(namespace, name),
        }
    }

    pub fn endpoint_slices(&self) -> Objects<'_, EndpointSlice> {
        match &self.store {
            Store::Owned(m) => Box::new(m.endpoint_slices.iter()),
            Store::Indexed(i) => Box::new(i.endpoint_slices()),
        }
    }

    /// The EndpointSlices labelled as belonging to `service`.
    pub fn endpoint_slices_for<'a>(&'a self, service: &'a Service) -> Objects<'a, EndpointSlice> {
        let (namespace, name) = (&service.meta.namespace, &service.meta.name);
        match &self.store {
            Store::Owned(m) => Box::new(
                m.endpoint_slices
                    .in_namespace(namespace)
                    .filter(|slice| slice.service_name.as_deref() == Some(name.as_str())),
            ),
            Store::Indexed(i) => Box::new(i.endpoint_slices_for(namespace, name).into_iter()),
        }
    }

    pub fn endpoints(&self) -> Objects<'_, Endpoints> {
        match &self.store {
            Store::Owned(m) => Box::new(m.endpoints.iter()),
            Store::Indexed(i) => Box::new(i.endpoints()),
        }
    }

    /// The Endpoints object of `service` (it bears the service's name).
    pub fn endpoints_for(&self, service: &Service) -> Option<&Endpoints> {
        let (namespace, name) = (&service.meta.namespace, &service.meta.name);
        match &self.store {
            Store::Owned(m) => m.endpoints.get(namespace, name),
            Store::Indexed(i) => i.endpoints_named(namespace, name),
        }
    }

    pub fn config_maps(&self) -> Objects<'_, ConfigMap> {
        match &self.store {
            Store::Owned(m) => Box::new(m.config_maps.iter()),
            Store::Indexed(i) => Box::new(i.config_maps()),
        }
    }

    pub fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        match &self.store {
            Store::Owned(m) => m.config_maps.get(namespace, name),
            Store::Indexed(i) => i.config_map(namespace, name),
        }
    }

    pub fn daemon_sets(&self) -> Objects<'_, DaemonSet> {
        match &self.store {
            Store::Owned(m) => Box::new(m.daemon_sets.iter()),
            Store::Indexed(i) => Box::new(i.daemon_sets()),
        }
    }

    pub fn daemon_set(&self, namespace: &str, name: &str) -> Option<&DaemonSet> {
        match &self.store {
            Store::Owned(m) => m.daemon_sets.get(namespace, name),
            Store::Indexed(i) => i.daemon_set(namespace, name),
        }
    }

    pub fn network_policies(&self) -> Objects<'_, NetworkPolicy> {
        match &self.store {
            Store::Owned(m) => Box::new(m.network_policies.iter()),
            Store::Indexed(i) => Box::new(i.network_policies()),
        }
    }

    /// Whether the cluster has any NetworkPolicy, readable or not: without
    /// one, NetworkPolicy has nothing to say of any flow.
    pub fn has_network_policies(&self) -> bool {
        match &self.store {
            Store::Owned(m) => m.network_policies.len() + m.unreadable_network_policies.len() > 0,
            Store::Indexed(i) => i.has_network_policies(),
        }
    }

    /// The NetworkPolicies of `namespace`: the ones that can select its pods.
    pub fn network_policies_in(&self, namespace: &str) -> Objects<'_, NetworkPolicy> {
        match &self.store {
            Store::Owned(m) => Box::new(m.network_policies.in_namespace(namespace)),
            Store::Indexed(i) => Box::new(i.network_policies_in(namespace)),
        }
    }

    /// The NetworkPolicies of `namespace` that could not be read.
    pub fn unreadable_network_policies_in(
        &self,
        namespace: &str,
    ) -> Objects<'_, UnreadableNetworkPolicy> {
        match &self.store {
            Store::Owned(m) => Box::new(m.unreadable_network_policies.in_namespace(namespace)),
            Store::Indexed(i) => Box::new(i.unreadable_network_policies_in(namespace)),
        }
    }

    /// Every object without a typed model.
    pub fn others(&self) -> Objects<'_, GenericObject> {
        match &self.store {
            Store::Owned(m) => Box::new(m.others.values()),
            Store::Indexed(i) => Box::new(i.others()),
        }
    }

    /// The generic objects of exactly this apiVersion and kind.
    pub fn objects<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
    ) -> Objects<'a, GenericObject> {
        match &self.store {
            Store::Owned(m) => Box::new(
                m.others
                    .values()
                    .filter(move |o| o.api_version == api_version && o.kind == kind),
            ),
            Store::Indexed(i) => Box::new(i.objects(api_version, kind).into_iter()),
        }
    }

    /// Whether there are generic objects of `kind`, of `api_version` when
    /// one is given, else of any.
    pub fn has_objects_of(&self, kind: &str, api_version: Option<&str>) -> bool {
        match &self.store {
            Store::Owned(m) => m
                .others
                .values()
                .any(|o| o.kind == kind && api_version.is_none_or(|v| v == o.api_version)),
            Store::Indexed(i) => i
                .api_versions_of(kind)
                .iter()
                .any(|v| api_version.is_none_or(|want| want == v)),
        }
    }

    /// Everything that owns `ip`: several owners are normal (a hostNetwork
    /// pod and its node; a finished pod and the running one that reuses its IP).
    pub fn by_ip(&self, ip: IpAddr) -> &[IpOwner] {
        match &self.store {
            Store::Owned(m) => m.ips.get(&ip).map_or(&[], Vec::as_slice),
            Store::Indexed(i) => i.by_ip(ip),
        }
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
        let shared: Vec<IpAddr> = match &self.store {
            Store::Owned(m) => m
                .ips
                .iter()
                .filter(|(_, owners)| owners.len() > 1)
                .map(|(ip, _)| *ip)
                .collect(),
            Store::Indexed(i) => i.shared_ips().into_iter().map(|(ip, _)| ip).collect(),
        };
        shared
            .into_iter()
            .filter_map(|ip| {
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
        match &self.store {
            Store::Owned(m) => {
                let (namespace, name) = m.node_ports.get(&(protocol, port))?;
                m.services.get(namespace, name)
            }
            Store::Indexed(i) => i.service_by_node_port(protocol, port),
        }
    }

    /// How many objects the cluster holds, of every kind.
    pub fn object_count(&self) -> usize {
        match &self.store {
            Store::Owned(m) => m.object_count(),
            Store::Indexed(i) => i.object_count(),
        }
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.model().fmt(f)
    }
}

/// A cluster's model as the owned model serializes it, whichever store it
/// is in (`cache::verify` compares two this way).
impl serde::Serialize for Cluster {
    fn serialize<S: serde::Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
        self.model().serialize(to)
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
