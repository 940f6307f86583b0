//! The cluster cache's model laid out to be read in place: a flow that asks
//! for two pods and a Service decodes those, not 150,000 pods.
//!
//! The model is a row of tables, each a list of byte records: a `u32` count
//! `n`, `n + 1` offsets (`u32`, little-endian, from the start of its data,
//! never decreasing), then the data. Each kind of object is two tables of
//! the same length, in the order the owned model keeps them (by namespace,
//! then name): its keys (the parts of its name, each a `u32` length and its
//! bytes) and its objects (each in postcard's form, decoded the first time
//! it is asked for and kept). The indexes are tables of keys and values
//! too, sorted by key: who holds an IP (in `IpAddr`'s order, so that a CIDR
//! is a run of them), the pods of a node, the pods of a label, the
//! EndpointSlices of a Service, the objects of an apiVersion and kind, the
//! nodes of an annotation; and each node's pod CIDRs.
//!
//! Invariants:
//! - Every count, offset and length is checked before it is used: the
//!   tables at [`Indexed::open`] (each within the model, offsets in order),
//!   a record's bytes at each read. Nothing here panics on any bytes, and
//!   what a read allocates is bounded by the bytes it reads: a slot per
//!   record (a record is at least its 4-byte offset), an object by its
//!   record's length.
//! - A record that does not decode is no object: the cache's checksum
//!   catches a byte changed by accident, and a forger can make a cache say
//!   anything within its bounds anyway (`docs/limits.md`).
//! - Lookups give what the owned model gives, in its order: the tables keep
//!   its order, and the IP owners and NodePorts are its own, not rebuilt.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ipnet::IpNet;
use memmap2::Mmap;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::model::{
    ConfigMap, DaemonSet, EndpointSlice, Endpoints, GenericObject, Namespace, NetworkPolicy, Node,
    ObjectMeta, Pod, Protocol, Service, UnreadableNetworkPolicy,
};
use super::{ByNamespace, GenericKey, IpOwner, Model};

/// Why a model could not be laid out or opened.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("cannot encode the cluster model: {0}")]
    Encode(postcard::Error),
    #[error("its model is over the 4 GiB a cache's tables can address")]
    TooLarge,
    #[error("not a cluster cache ({0})")]
    Malformed(String),
}

fn malformed(what: impl Into<String>) -> LayoutError {
    LayoutError::Malformed(what.into())
}

/// A table of byte records, as positions in the model's bytes.
#[derive(Debug, Clone, Copy)]
struct Records {
    /// Where its `n + 1` offsets start.
    offsets: usize,
    /// Where its data starts.
    data: usize,
    len: usize,
}

impl Records {
    /// The table at `at`, checked: its offsets inside `bytes` and in order,
    /// its data inside `bytes`. Returns it and where the next table starts.
    fn read(bytes: &[u8], at: usize) -> Result<(Records, usize), LayoutError> {
        let cut = || malformed("a table cut short");
        let len = word(bytes, at).ok_or_else(cut)? as usize;
        let offsets = at + 4;
        let data = len
            .checked_add(1)
            .and_then(|n| n.checked_mul(4))
            .and_then(|n| n.checked_add(offsets))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(cut)?;
        let mut last = 0;
        for i in 0..=len {
            let offset = word(bytes, offsets + 4 * i).ok_or_else(cut)?;
            if offset < last {
                return Err(malformed("a table's offsets out of order"));
            }
            last = offset;
        }
        let end = data.checked_add(last as usize).ok_or_else(cut)?;
        if end > bytes.len() {
            return Err(cut());
        }
        Ok((Records { offsets, data, len }, end))
    }

    /// Record `i`'s bytes (`None` past the table).
    fn get<'a>(&self, bytes: &'a [u8], i: usize) -> Option<&'a [u8]> {
        if i >= self.len {
            return None;
        }
        let start = word(bytes, self.offsets + 4 * i)? as usize;
        let end = word(bytes, self.offsets + 4 * (i + 1))? as usize;
        bytes.get(self.data + start..self.data.checked_add(end)?)
    }
}

fn word(bytes: &[u8], at: usize) -> Option<u32> {
    let four = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(four.try_into().ok()?))
}

/// Appends a table of `records` to `out`.
fn write_records<R: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    records: impl ExactSizeIterator<Item = R>,
) -> Result<(), LayoutError> {
    let count = u32::try_from(records.len()).map_err(|_| LayoutError::TooLarge)?;
    out.extend_from_slice(&count.to_le_bytes());
    let offsets_at = out.len();
    out.resize(offsets_at + 4 * (records.len() + 1), 0);
    let data_at = out.len();
    for (i, record) in records.enumerate() {
        out.extend_from_slice(record.as_ref());
        let end = u32::try_from(out.len() - data_at).map_err(|_| LayoutError::TooLarge)?;
        let at = offsets_at + 4 * (i + 1);
        out[at..at + 4].copy_from_slice(&end.to_le_bytes());
    }
    Ok(())
}

/// A key of parts, each its length (`u32`) and bytes, compared part by
/// part: the order of a tuple of strings.
fn key(parts: &[&[u8]]) -> Vec<u8> {
    let mut key = Vec::new();
    for part in parts {
        // A part longer than 4 GiB is in no cache: the table's own offset
        // would overflow first.
        key.extend_from_slice(&(part.len() as u32).to_le_bytes());
        key.extend_from_slice(part);
    }
    key
}

/// Compares the first `parts.len()` parts of `key` with `parts`. A key cut
/// short is less than any other.
fn compare(mut key: &[u8], parts: &[&[u8]]) -> Ordering {
    for part in parts {
        let Some(len) = word(key, 0) else {
            return Ordering::Less;
        };
        let Some(have) = key.get(4..4 + len as usize) else {
            return Ordering::Less;
        };
        match have.cmp(part) {
            Ordering::Equal => key = &key[4 + len as usize..],
            other => return other,
        }
    }
    Ordering::Equal
}

/// An IP as a key: its family, then its 16 bytes (an IPv4 address in the
/// first four), so that keys sort as `IpAddr` does.
fn ip_key(ip: IpAddr) -> [u8; 17] {
    let mut key = [0; 17];
    match ip {
        IpAddr::V4(v4) => key[1..5].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => {
            key[0] = 1;
            key[1..].copy_from_slice(&v6.octets());
        }
    }
    key
}

/// Keys and values of the same length, sorted by key.
#[derive(Debug, Clone, Copy)]
struct Table {
    keys: Records,
    values: Records,
}

impl Table {
    fn read(bytes: &[u8], at: usize) -> Result<(Table, usize), LayoutError> {
        let (keys, at) = Records::read(bytes, at)?;
        let (values, at) = Records::read(bytes, at)?;
        if keys.len != values.len {
            return Err(malformed("a table's keys and values of other lengths"));
        }
        Ok((Table { keys, values }, at))
    }

    fn write<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        out: &mut Vec<u8>,
        entries: &[(K, V)],
    ) -> Result<(), LayoutError> {
        write_records(out, entries.iter().map(|(k, _)| k.as_ref()))?;
        write_records(out, entries.iter().map(|(_, v)| v.as_ref()))
    }

    /// The entries whose keys start with `parts`.
    fn range(&self, bytes: &[u8], parts: &[&[u8]]) -> Range<usize> {
        let order = |i: usize| compare(self.keys.get(bytes, i).unwrap_or(&[]), parts);
        let start = partition_point(self.keys.len, |i| order(i) == Ordering::Less);
        let end = partition_point(self.keys.len, |i| order(i) != Ordering::Greater);
        start..end.max(start)
    }

    /// The entry whose key is exactly `parts`.
    fn find(&self, bytes: &[u8], parts: &[&[u8]]) -> Option<usize> {
        let found = self.range(bytes, parts).start;
        let key = self.keys.get(bytes, found)?;
        let exact_len: usize = parts.iter().map(|part| 4 + part.len()).sum();
        (compare(key, parts) == Ordering::Equal && key.len() == exact_len).then_some(found)
    }

    /// The object positions value `i` lists (`u32` each).
    fn positions(&self, bytes: &[u8], i: usize) -> Vec<usize> {
        let value = self.values.get(bytes, i).unwrap_or(&[]);
        value
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize)
            .collect()
    }
}

/// The first `i` in `0..len` for which `before(i)` is false, `before` being
/// true then false along the range (a binary search).
fn partition_point(len: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, len);
    while low < high {
        let middle = low + (high - low) / 2;
        if before(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

fn positions_value(positions: &[u32]) -> Vec<u8> {
    positions.iter().flat_map(|p| p.to_le_bytes()).collect()
}

/// A model type with metadata: its source is rebased when it is decoded.
pub(super) trait Stored: DeserializeOwned + Serialize {
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
}

macro_rules! stored {
    ($($kind:ty),+) => {
        $(impl Stored for $kind {
            fn meta(&self) -> &ObjectMeta {
                &self.meta
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.meta
            }
        })+
    };
}
stored!(
    Node,
    Namespace,
    Pod,
    Service,
    EndpointSlice,
    Endpoints,
    ConfigMap,
    DaemonSet,
    NetworkPolicy,
    UnreadableNetworkPolicy,
    GenericObject
);

/// One kind of object: its keys and records, and each record once decoded.
#[derive(Debug, Clone)]
struct Kind<T> {
    table: Table,
    decoded: Vec<OnceLock<Option<Box<T>>>>,
}

impl<T: Stored> Kind<T> {
    fn read(bytes: &[u8], at: usize) -> Result<(Kind<T>, usize), LayoutError> {
        let (table, at) = Table::read(bytes, at)?;
        let decoded = (0..table.keys.len).map(|_| OnceLock::new()).collect();
        Ok((Kind { table, decoded }, at))
    }

    fn write<'a>(
        out: &mut Vec<u8>,
        objects: impl Iterator<Item = (Vec<u8>, &'a T)>,
    ) -> Result<(), LayoutError>
    where
        T: 'a,
    {
        let entries = objects
            .map(|(key, object)| Ok((key, postcard::to_stdvec(object)?)))
            .collect::<Result<Vec<_>, postcard::Error>>()
            .map_err(LayoutError::Encode)?;
        Table::write(out, &entries)
    }

    fn len(&self) -> usize {
        self.decoded.len()
    }

    /// Object `i`, decoded the first time, its source under `cluster_dir`.
    fn at<'a>(&'a self, from: &From<'_>, i: usize) -> Option<&'a T> {
        self.decoded
            .get(i)?
            .get_or_init(|| {
                let record = self.table.values.get(from.bytes, i)?;
                let mut object: T = postcard::from_bytes(record).ok()?;
                from.rebase(object.meta_mut());
                Some(Box::new(object))
            })
            .as_deref()
    }

    fn find(&self, from: &From<'_>, parts: &[&[u8]]) -> Option<&T> {
        self.at(from, self.table.find(from.bytes, parts)?)
    }

    fn range<'a>(
        &'a self,
        from: From<'a>,
        parts: &[&[u8]],
    ) -> impl Iterator<Item = &'a T> + use<'a, T> {
        self.table
            .range(from.bytes, parts)
            .filter_map(move |i| self.at(&from, i))
    }

    fn all<'a>(&'a self, from: From<'a>) -> impl Iterator<Item = &'a T> {
        (0..self.len()).filter_map(move |i| self.at(&from, i))
    }
}

/// What a record is decoded from: the model's bytes, and where `cluster/`
/// is now, for objects' sources.
#[derive(Clone, Copy)]
struct From<'a> {
    bytes: &'a [u8],
    cluster_dir: &'a Path,
}

impl From<'_> {
    fn rebase(&self, meta: &mut ObjectMeta) {
        if let Some(file) =
            super::cache::rebased(&meta.source.file, Path::new(""), self.cluster_dir)
        {
            meta.source.file = file;
        }
    }
}

/// The cluster model of a cache, read in place.
#[derive(Debug, Clone)]
pub(super) struct Indexed {
    /// The cache file, mapped: a page is read when a lookup first touches it.
    bytes: Arc<Mmap>,
    cluster_dir: PathBuf,
    node_ports: BTreeMap<(Protocol, u16), (String, String)>,
    nodes: Kind<Node>,
    namespaces: Kind<Namespace>,
    pods: Kind<Pod>,
    services: Kind<Service>,
    endpoint_slices: Kind<EndpointSlice>,
    endpoints: Kind<Endpoints>,
    config_maps: Kind<ConfigMap>,
    daemon_sets: Kind<DaemonSet>,
    network_policies: Kind<NetworkPolicy>,
    unreadable_network_policies: Kind<UnreadableNetworkPolicy>,
    others: Kind<GenericObject>,
    ips: Table,
    owners: Vec<OnceLock<Option<Vec<IpOwner>>>>,
    pods_by_node: Table,
    pods_by_label: Table,
    slices_by_service: Table,
    others_by_kind: Table,
    nodes_by_annotation: Table,
    node_pod_cidrs: Records,
    /// `node_pod_cidrs` decoded once, on the first lookup.
    pod_cidr_index: OnceLock<PodCidrIndex>,
}

/// The nodes' pod CIDRs, by prefix length and network: a lookup truncates
/// an address to each length there is (a handful) instead of decoding every
/// node's CIDRs (`skoop matrix` asks for each flow's every hop).
#[derive(Debug, Clone, Default)]
struct PodCidrIndex {
    by_length: BTreeMap<(bool, u8), HashMap<IpNet, Vec<usize>>>,
}

impl PodCidrIndex {
    fn build(bytes: &[u8], records: &Records) -> PodCidrIndex {
        let mut index = PodCidrIndex::default();
        for position in 0..records.len {
            let cidrs = records
                .get(bytes, position)
                .and_then(|record| postcard::from_bytes::<Vec<IpNet>>(record).ok())
                .unwrap_or_default();
            for net in cidrs {
                let nodes = (index.by_length)
                    .entry((net.addr().is_ipv6(), net.prefix_len()))
                    .or_default()
                    .entry(net.trunc())
                    .or_default();
                if nodes.last() != Some(&position) {
                    nodes.push(position);
                }
            }
        }
        index
    }

    /// The positions of the nodes with a pod CIDR holding `address`.
    fn holding(&self, address: IpAddr) -> impl Iterator<Item = usize> + '_ {
        (self.by_length.iter())
            .filter(move |((ipv6, _), _)| *ipv6 == address.is_ipv6())
            .filter_map(move |((_, length), networks)| {
                let network = IpNet::new(address, *length).ok()?.trunc();
                networks.get(&network)
            })
            .flatten()
            .copied()
    }
}

/// The parts of an object's key in its kind's table: namespace and name
/// (name alone for a cluster-scoped kind).
fn namespaced(meta: &ObjectMeta) -> Vec<u8> {
    key(&[meta.namespace.as_bytes(), meta.name.as_bytes()])
}

fn named(meta: &ObjectMeta) -> Vec<u8> {
    key(&[meta.name.as_bytes()])
}

fn generic(key_of: &GenericKey) -> Vec<u8> {
    key(&[
        key_of.group.as_bytes(),
        key_of.kind.as_bytes(),
        key_of.namespace.as_bytes(),
        key_of.name.as_bytes(),
    ])
}

/// An index of object positions by key, sorted by key.
fn index<'a>(
    out: &mut Vec<u8>,
    entries: impl Iterator<Item = (Vec<&'a [u8]>, u32)>,
) -> Result<(), LayoutError> {
    let mut grouped: BTreeMap<Vec<&[u8]>, Vec<u32>> = BTreeMap::new();
    for (parts, position) in entries {
        grouped.entry(parts).or_default().push(position);
    }
    let entries: Vec<(Vec<u8>, Vec<u8>)> = grouped
        .into_iter()
        .map(|(parts, positions)| (key(&parts), positions_value(&positions)))
        .collect();
    Table::write(out, &entries)
}

fn positioned<T>(objects: impl Iterator<Item = T>) -> impl Iterator<Item = (u32, T)> {
    // Positions past u32 are refused when the table is written.
    objects.enumerate().map(|(i, object)| (i as u32, object))
}

/// The model section of a cache: `model`'s tables after the load's
/// `problems` (sources relative to `cluster/`).
pub(super) fn encode(
    model: &Model,
    problems: &[super::cache::StoredProblem],
) -> Result<Vec<u8>, LayoutError> {
    let mut out = Vec::new();
    let head = postcard::to_stdvec(&(problems, &model.node_ports)).map_err(LayoutError::Encode)?;
    write_records(&mut out, [head].iter())?;
    Kind::write(&mut out, model.nodes.values().map(|o| (named(&o.meta), o)))?;
    Kind::write(
        &mut out,
        model.namespaces.values().map(|o| (named(&o.meta), o)),
    )?;
    macro_rules! namespaced_kind {
        ($($field:ident),+) => {
            $(Kind::write(
                &mut out,
                model.$field.iter().map(|o| (namespaced(&o.meta), o)),
            )?;)+
        };
    }
    namespaced_kind!(
        pods,
        services,
        endpoint_slices,
        endpoints,
        config_maps,
        daemon_sets,
        network_policies,
        unreadable_network_policies
    );
    Kind::write(&mut out, model.others.iter().map(|(k, o)| (generic(k), o)))?;
    let owners = model
        .ips
        .iter()
        .map(|(ip, owners)| Ok((ip_key(*ip), postcard::to_stdvec(owners)?)))
        .collect::<Result<Vec<_>, postcard::Error>>()
        .map_err(LayoutError::Encode)?;
    Table::write(&mut out, &owners)?;
    let pods = || positioned(model.pods.iter());
    index(
        &mut out,
        pods().filter_map(|(at, pod)| Some((vec![pod.node_name.as_deref()?.as_bytes()], at))),
    )?;
    index(
        &mut out,
        pods().flat_map(|(at, pod)| {
            pod.meta.labels.iter().map(move |(key, value)| {
                let parts = vec![
                    key.as_bytes(),
                    value.as_bytes(),
                    pod.meta.namespace.as_bytes(),
                ];
                (parts, at)
            })
        }),
    )?;
    index(
        &mut out,
        positioned(model.endpoint_slices.iter()).filter_map(|(at, slice)| {
            let service = slice.service_name.as_deref()?;
            Some((
                vec![slice.meta.namespace.as_bytes(), service.as_bytes()],
                at,
            ))
        }),
    )?;
    index(
        &mut out,
        positioned(model.others.values())
            .map(|(at, o)| (vec![o.api_version.as_bytes(), o.kind.as_bytes()], at)),
    )?;
    index(
        &mut out,
        positioned(model.nodes.values()).flat_map(|(at, node)| {
            node.meta
                .annotations
                .keys()
                .map(move |key| (vec![key.as_bytes()], at))
        }),
    )?;
    let cidrs = model
        .nodes
        .values()
        .map(|node| postcard::to_stdvec(&node.pod_cidrs))
        .collect::<Result<Vec<_>, _>>()
        .map_err(LayoutError::Encode)?;
    write_records(&mut out, cidrs.iter())?;
    Ok(out)
}

impl Indexed {
    /// The model at `bytes[at..]` (the whole rest of `bytes`), its tables
    /// checked, nothing decoded but the load's problems and the NodePorts;
    /// objects' sources are read as under `cluster_dir`.
    pub(super) fn open(
        bytes: Mmap,
        at: usize,
        cluster_dir: &Path,
    ) -> Result<(Indexed, Vec<super::cache::StoredProblem>), LayoutError> {
        let (head, at) = Records::read(&bytes, at)?;
        let head = head
            .get(&bytes, 0)
            .ok_or_else(|| malformed("no problems"))?;
        type Head = (
            Vec<super::cache::StoredProblem>,
            BTreeMap<(Protocol, u16), (String, String)>,
        );
        let (problems, node_ports): Head =
            postcard::from_bytes(head).map_err(|e| malformed(e.to_string()))?;
        let (nodes, at) = Kind::read(&bytes, at)?;
        let (namespaces, at) = Kind::read(&bytes, at)?;
        let (pods, at) = Kind::read(&bytes, at)?;
        let (services, at) = Kind::read(&bytes, at)?;
        let (endpoint_slices, at) = Kind::read(&bytes, at)?;
        let (endpoints, at) = Kind::read(&bytes, at)?;
        let (config_maps, at) = Kind::read(&bytes, at)?;
        let (daemon_sets, at) = Kind::read(&bytes, at)?;
        let (network_policies, at) = Kind::read(&bytes, at)?;
        let (unreadable_network_policies, at) = Kind::read(&bytes, at)?;
        let (others, at) = Kind::read(&bytes, at)?;
        let (ips, at) = Table::read(&bytes, at)?;
        let (pods_by_node, at) = Table::read(&bytes, at)?;
        let (pods_by_label, at) = Table::read(&bytes, at)?;
        let (slices_by_service, at) = Table::read(&bytes, at)?;
        let (others_by_kind, at) = Table::read(&bytes, at)?;
        let (nodes_by_annotation, at) = Table::read(&bytes, at)?;
        let (node_pod_cidrs, at) = Records::read(&bytes, at)?;
        if at != bytes.len() {
            return Err(malformed(format!(
                "{} bytes after its model",
                bytes.len() - at
            )));
        }
        let owners = (0..ips.keys.len).map(|_| OnceLock::new()).collect();
        let indexed = Indexed {
            bytes: Arc::new(bytes),
            cluster_dir: cluster_dir.to_path_buf(),
            node_ports,
            nodes,
            namespaces,
            pods,
            services,
            endpoint_slices,
            endpoints,
            config_maps,
            daemon_sets,
            network_policies,
            unreadable_network_policies,
            others,
            ips,
            owners,
            pods_by_node,
            pods_by_label,
            slices_by_service,
            others_by_kind,
            nodes_by_annotation,
            node_pod_cidrs,
            pod_cidr_index: OnceLock::new(),
        };
        Ok((indexed, problems))
    }

    /// How many pods are decoded so far.
    #[cfg(test)]
    pub(super) fn decoded_pods(&self) -> usize {
        self.pods
            .decoded
            .iter()
            .filter(|slot| slot.get().is_some())
            .count()
    }

    fn from(&self) -> From<'_> {
        From {
            bytes: &self.bytes,
            cluster_dir: &self.cluster_dir,
        }
    }

    pub(super) fn object_count(&self) -> usize {
        [
            self.nodes.len(),
            self.namespaces.len(),
            self.pods.len(),
            self.services.len(),
            self.endpoint_slices.len(),
            self.endpoints.len(),
            self.config_maps.len(),
            self.daemon_sets.len(),
            self.network_policies.len(),
            self.unreadable_network_policies.len(),
            self.others.len(),
        ]
        .iter()
        .sum()
    }

    pub(super) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.all(self.from())
    }

    /// The name in the `i`th node's key.
    fn node_name(&self, i: usize) -> Option<&str> {
        let key = self.nodes.table.keys.get(&self.bytes, i)?;
        std::str::from_utf8(part(key, 0)?).ok()
    }

    pub(super) fn node_names(&self) -> impl Iterator<Item = &str> {
        (0..self.nodes.len()).filter_map(|i| self.node_name(i))
    }

    /// Record `i` is the `i`th node's (they are written in the nodes'
    /// order), paired by index: a key that does not read leaves its own
    /// node out, not the records after it shifted onto other nodes.
    pub(super) fn node_pod_cidrs(&self) -> impl Iterator<Item = (&str, Vec<IpNet>)> {
        (0..self.nodes.len()).filter_map(|i| {
            let cidrs = (self.node_pod_cidrs.get(&self.bytes, i))
                .and_then(|record| postcard::from_bytes(record).ok())
                .unwrap_or_default();
            Some((self.node_name(i)?, cidrs))
        })
    }

    pub(super) fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.find(&self.from(), &[name.as_bytes()])
    }

    pub(super) fn namespaces(&self) -> impl Iterator<Item = &Namespace> {
        self.namespaces.all(self.from())
    }

    pub(super) fn namespace(&self, name: &str) -> Option<&Namespace> {
        self.namespaces.find(&self.from(), &[name.as_bytes()])
    }

    pub(super) fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.all(self.from())
    }

    pub(super) fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods
            .find(&self.from(), &[namespace.as_bytes(), name.as_bytes()])
    }

    /// The pods an index's entry at `parts` lists, in the pods' order.
    fn indexed_pods<'a>(&'a self, table: &Table, parts: &[&[u8]]) -> Vec<&'a Pod> {
        let from = self.from();
        let mut positions: Vec<usize> = table
            .range(&self.bytes, parts)
            .flat_map(|i| table.positions(&self.bytes, i))
            .collect();
        positions.sort_unstable();
        positions.dedup();
        positions
            .into_iter()
            .filter_map(|i| self.pods.at(&from, i))
            .collect()
    }

    pub(super) fn pods_on(&self, node: &str) -> Vec<&Pod> {
        self.indexed_pods(&self.pods_by_node, &[node.as_bytes()])
    }

    /// The pods of `namespace` that may match a selector with label `key`
    /// set to `value`, or every pod of `namespace` (`None`).
    pub(super) fn pods_labelled_in(
        &self,
        namespace: &str,
        label: Option<(&str, &str)>,
    ) -> Vec<&Pod> {
        match label {
            Some((key, value)) => self.indexed_pods(
                &self.pods_by_label,
                &[key.as_bytes(), value.as_bytes(), namespace.as_bytes()],
            ),
            None => self
                .pods
                .range(self.from(), &[namespace.as_bytes()])
                .collect(),
        }
    }

    pub(super) fn pods_labelled(&self, key: &str, value: &str) -> Vec<&Pod> {
        self.indexed_pods(&self.pods_by_label, &[key.as_bytes(), value.as_bytes()])
    }

    /// The pods with an address in `net`, in the pods' order.
    pub(super) fn pods_in(&self, net: IpNet) -> Vec<&Pod> {
        let (low, high) = (ip_key(net.network()), ip_key(net.broadcast()));
        let keys = &self.ips.keys;
        let key_at = |i: usize| keys.get(&self.bytes, i).unwrap_or(&[]);
        let start = partition_point(keys.len, |i| key_at(i) < low.as_slice());
        let end = partition_point(keys.len, |i| key_at(i) <= high.as_slice());
        let mut positions: Vec<usize> = (start..end.max(start))
            .flat_map(|i| self.owners_at(i))
            .filter_map(|owner| match owner {
                IpOwner::Pod {
                    namespace, name, ..
                } => self
                    .pods
                    .table
                    .find(&self.bytes, &[namespace.as_bytes(), name.as_bytes()]),
                _ => None,
            })
            .collect();
        positions.sort_unstable();
        positions.dedup();
        let from = self.from();
        positions
            .into_iter()
            .filter_map(|i| self.pods.at(&from, i))
            .collect()
    }

    pub(super) fn services(&self) -> impl Iterator<Item = &Service> {
        self.services.all(self.from())
    }

    pub(super) fn service(&self, namespace: &str, name: &str) -> Option<&Service> {
        self.services
            .find(&self.from(), &[namespace.as_bytes(), name.as_bytes()])
    }

    pub(super) fn endpoint_slices(&self) -> impl Iterator<Item = &EndpointSlice> {
        self.endpoint_slices.all(self.from())
    }

    pub(super) fn endpoint_slices_for(
        &self,
        namespace: &str,
        service: &str,
    ) -> Vec<&EndpointSlice> {
        let from = self.from();
        let table = &self.slices_by_service;
        table
            .range(&self.bytes, &[namespace.as_bytes(), service.as_bytes()])
            .flat_map(|i| table.positions(&self.bytes, i))
            .filter_map(|i| self.endpoint_slices.at(&from, i))
            .collect()
    }

    pub(super) fn endpoints(&self) -> impl Iterator<Item = &Endpoints> {
        self.endpoints.all(self.from())
    }

    pub(super) fn endpoints_named(&self, namespace: &str, name: &str) -> Option<&Endpoints> {
        self.endpoints
            .find(&self.from(), &[namespace.as_bytes(), name.as_bytes()])
    }

    pub(super) fn config_maps(&self) -> impl Iterator<Item = &ConfigMap> {
        self.config_maps.all(self.from())
    }

    pub(super) fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.config_maps
            .find(&self.from(), &[namespace.as_bytes(), name.as_bytes()])
    }

    pub(super) fn daemon_sets(&self) -> impl Iterator<Item = &DaemonSet> {
        self.daemon_sets.all(self.from())
    }

    pub(super) fn daemon_set(&self, namespace: &str, name: &str) -> Option<&DaemonSet> {
        self.daemon_sets
            .find(&self.from(), &[namespace.as_bytes(), name.as_bytes()])
    }

    pub(super) fn network_policies(&self) -> impl Iterator<Item = &NetworkPolicy> {
        self.network_policies.all(self.from())
    }

    pub(super) fn has_network_policies(&self) -> bool {
        self.network_policies.len() + self.unreadable_network_policies.len() > 0
    }

    pub(super) fn network_policies_in<'a>(
        &'a self,
        namespace: &str,
    ) -> impl Iterator<Item = &'a NetworkPolicy> + use<'a> {
        self.network_policies
            .range(self.from(), &[namespace.as_bytes()])
    }

    pub(super) fn unreadable_network_policies_in<'a>(
        &'a self,
        namespace: &str,
    ) -> impl Iterator<Item = &'a UnreadableNetworkPolicy> + use<'a> {
        self.unreadable_network_policies
            .range(self.from(), &[namespace.as_bytes()])
    }

    pub(super) fn others(&self) -> impl Iterator<Item = &GenericObject> {
        self.others.all(self.from())
    }

    pub(super) fn objects(&self, api_version: &str, kind: &str) -> Vec<&GenericObject> {
        let from = self.from();
        let table = &self.others_by_kind;
        table
            .range(&self.bytes, &[api_version.as_bytes(), kind.as_bytes()])
            .flat_map(|i| table.positions(&self.bytes, i))
            .filter_map(|i| self.others.at(&from, i))
            .collect()
    }

    /// The apiVersions of the generic objects of `kind`.
    pub(super) fn api_versions_of(&self, kind: &str) -> Vec<String> {
        let table = &self.others_by_kind;
        (0..table.keys.len)
            .filter_map(|i| {
                let key = table.keys.get(&self.bytes, i)?;
                let version = part(key, 0)?;
                (part(key, 1)? == kind.as_bytes())
                    .then(|| String::from_utf8_lossy(version).into_owned())
            })
            .collect()
    }

    /// The first node (in the nodes' order) annotated `key`.
    pub(super) fn node_annotated(&self, key: &str) -> Option<&Node> {
        let table = &self.nodes_by_annotation;
        let found = table.find(&self.bytes, &[key.as_bytes()])?;
        let first = *table.positions(&self.bytes, found).iter().min()?;
        self.nodes.at(&self.from(), first)
    }

    /// The nodes annotated with any of `keys` or with a pod CIDR holding
    /// `address`, in the nodes' order.
    pub(super) fn nodes_with_pod_cidr(&self, address: IpAddr, keys: &[String]) -> Vec<&Node> {
        let index = (self.pod_cidr_index)
            .get_or_init(|| PodCidrIndex::build(&self.bytes, &self.node_pod_cidrs));
        let mut positions: Vec<usize> = index.holding(address).collect();
        let table = &self.nodes_by_annotation;
        for key in keys {
            if let Some(found) = table.find(&self.bytes, &[key.as_bytes()]) {
                positions.extend(table.positions(&self.bytes, found));
            }
        }
        positions.sort_unstable();
        positions.dedup();
        let from = self.from();
        positions
            .into_iter()
            .filter_map(|i| self.nodes.at(&from, i))
            .collect()
    }

    fn owners_at(&self, i: usize) -> &[IpOwner] {
        self.owners
            .get(i)
            .and_then(|slot| {
                slot.get_or_init(|| {
                    let record = self.ips.values.get(&self.bytes, i)?;
                    postcard::from_bytes(record).ok()
                })
                .as_deref()
            })
            .unwrap_or(&[])
    }

    pub(super) fn by_ip(&self, ip: IpAddr) -> &[IpOwner] {
        match self.ips.find_fixed(&self.bytes, &ip_key(ip)) {
            Some(i) => self.owners_at(i),
            None => &[],
        }
    }

    /// Every IP with more than one owner.
    pub(super) fn shared_ips(&self) -> Vec<(IpAddr, &[IpOwner])> {
        (0..self.ips.keys.len)
            .filter_map(|i| {
                let owners = self.owners_at(i);
                let key = self.ips.keys.get(&self.bytes, i)?;
                (owners.len() > 1).then_some((ip_of(key)?, owners))
            })
            .collect()
    }

    pub(super) fn service_by_node_port(&self, protocol: Protocol, port: u16) -> Option<&Service> {
        let (namespace, name) = self.node_ports.get(&(protocol, port))?;
        self.service(namespace, name)
    }

    /// The whole model, every object decoded.
    pub(super) fn to_model(&self) -> Model {
        let mut model = Model {
            node_ports: self.node_ports.clone(),
            ..Model::default()
        };
        for node in self.nodes() {
            model.nodes.insert(node.meta.name.clone(), node.clone());
        }
        for namespace in self.namespaces() {
            model
                .namespaces
                .insert(namespace.meta.name.clone(), namespace.clone());
        }
        fn fill<T: Stored + Clone>(to: &mut ByNamespace<T>, from: impl Iterator<Item = T>) {
            for object in from {
                let meta = object.meta();
                let (namespace, name) = (meta.namespace.clone(), meta.name.clone());
                to.insert(namespace, name, object);
            }
        }
        fill(&mut model.pods, self.pods().cloned());
        fill(&mut model.services, self.services().cloned());
        fill(&mut model.endpoint_slices, self.endpoint_slices().cloned());
        fill(&mut model.endpoints, self.endpoints().cloned());
        fill(&mut model.config_maps, self.config_maps().cloned());
        fill(&mut model.daemon_sets, self.daemon_sets().cloned());
        fill(
            &mut model.network_policies,
            self.network_policies().cloned(),
        );
        fill(
            &mut model.unreadable_network_policies,
            self.unreadable_network_policies.all(self.from()).cloned(),
        );
        for object in self.others() {
            model.others.insert(GenericKey::of(object), object.clone());
        }
        for i in 0..self.ips.keys.len {
            let Some(ip) = self.ips.keys.get(&self.bytes, i).and_then(ip_of) else {
                continue;
            };
            model.ips.insert(ip, self.owners_at(i).to_vec());
        }
        model
    }
}

impl Table {
    /// The entry whose key is exactly `key` (a fixed-size key compared as
    /// bytes: an IP's).
    fn find_fixed(&self, bytes: &[u8], key: &[u8]) -> Option<usize> {
        let at = |i: usize| self.keys.get(bytes, i).unwrap_or(&[]);
        let found = partition_point(self.keys.len, |i| at(i) < key);
        (found < self.keys.len && at(found) == key).then_some(found)
    }
}

/// Part `n` of a key.
fn part(mut key: &[u8], n: usize) -> Option<&[u8]> {
    for _ in 0..n {
        let len = word(key, 0)? as usize;
        key = key.get(4 + len..)?;
    }
    let len = word(key, 0)? as usize;
    key.get(4..4 + len)
}

/// The IP of a key [`ip_key`] made.
fn ip_of(key: &[u8]) -> Option<IpAddr> {
    let octets: [u8; 16] = key.get(1..17)?.try_into().ok()?;
    match key.first()? {
        0 => Some(IpAddr::from([octets[0], octets[1], octets[2], octets[3]])),
        1 => Some(IpAddr::from(octets)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_tuples_of_strings() {
        let ab = key(&[b"a", b"b"]);
        assert_eq!(compare(&ab, &[b"a", b"b"]), Ordering::Equal);
        assert_eq!(compare(&ab, &[b"a"]), Ordering::Equal);
        assert_eq!(compare(&ab, &[b"a", b"c"]), Ordering::Less);
        assert_eq!(compare(&ab, &[b"ab"]), Ordering::Less);
        assert_eq!(compare(&ab, &[b""]), Ordering::Greater);
        // Cut short: less than anything, never a panic.
        assert_eq!(compare(&ab[..3], &[b"a"]), Ordering::Less);
        assert_eq!(compare(&ab[..6], &[b"a", b"b"]), Ordering::Less);
    }

    #[test]
    fn ip_keys_sort_as_addresses() {
        let mut ips: Vec<IpAddr> = ["10.0.0.2", "::1", "9.255.255.255", "10.0.0.10", "fe80::1"]
            .iter()
            .map(|ip| ip.parse().unwrap())
            .collect();
        let mut keys: Vec<[u8; 17]> = ips.iter().map(|ip| ip_key(*ip)).collect();
        ips.sort();
        keys.sort();
        let back: Vec<IpAddr> = keys.iter().map(|k| ip_of(k).unwrap()).collect();
        assert_eq!(back, ips);
    }

    #[test]
    fn a_table_is_found_by_its_keys_and_checked_when_read() {
        let mut out = vec![0xAA];
        let entries = [
            (key(&[b"a", b"x"]), vec![1u8]),
            (key(&[b"b", b"x"]), vec![2]),
            (key(&[b"b", b"y"]), vec![3]),
        ];
        Table::write(&mut out, &entries).unwrap();
        let (table, end) = Table::read(&out, 1).unwrap();
        assert_eq!(end, out.len());
        assert_eq!(table.range(&out, &[b"b"]), 1..3);
        assert_eq!(table.find(&out, &[b"b", b"y"]), Some(2));
        assert_eq!(table.find(&out, &[b"b"]), None);
        assert_eq!(table.values.get(&out, 2), Some(&[3u8][..]));
        // Every cut is a table cut short, never a panic.
        for cut in 1..out.len() {
            assert!(Table::read(&out[..cut], 1).is_err(), "{cut}");
        }
        // Offsets out of order are refused.
        let mut swapped = out.clone();
        swapped[5..9].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Records::read(&swapped, 1).is_err());
    }
}
