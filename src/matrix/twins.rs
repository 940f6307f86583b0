//! Twins: sources of a matrix that nothing a diagnosis reads can tell
//! apart, so that one diagnosis answers for all of them (issue 33, item 5).
//!
//! Two pods are twins when swapping their identities (name, uid, where
//! their object was read from, their addresses) leaves everything a
//! diagnosis reads as it was: the cluster's other objects, every namespace
//! dump and the packs. A diagnosis treats an identity only by equality, and
//! an address only by the prefixes that hold it, so diagnosing the one is
//! diagnosing the other with the identities swapped. A matrix's brief answer
//! for a flow from the one ([`FlowOut`]) is then the other's, its source
//! renamed, wherever nothing else in it names either identity (a finding at
//! the source's hop names the pod; that flow is diagnosed on its own).
//!
//! What is held, for two pods on one node:
//! - every field of their objects but the identity, namespace and labels is
//!   equal: annotations (each pod's own name, uid and addresses written
//!   there taken out), host network, containers and their ports,
//!   readiness, phase, the families of their addresses;
//! - their namespaces and labels may differ, flow by flow, where the twin's
//!   diagnosis of the flow read nothing that tells them apart: each read of
//!   a pod's namespace or labels, of which pods carry a label or match a
//!   selector, and of what NetworkPolicies decide (`pod_reads`) gives the
//!   same with the two swapped ([`Identity::read_alike`]);
//! - neither has a dump of its own namespace (its MACs, interface indices
//!   and names differ);
//! - no other object, no file of a namespace dump and no pack file names
//!   either's name or uid as a word (an EndpointSlice naming it as a
//!   backend, a CiliumEndpoint);
//! - no address written as text in any of those (IPv4 dotted, IPv6 alone,
//!   `ADDR:PORT`, `[ADDR]`, `ADDR/LEN`; an IPv4-mapped IPv6 address as its
//!   IPv4 one too), nor a special-purpose range the kernel knows by itself,
//!   holds one of their addresses and not the other: a route, a neighbour,
//!   an iptables match, an ipset member, a NetworkPolicy's ipBlock, another
//!   pod's or a Service's address, an address a pack compares with;
//! - for every prefix length written anywhere (`/24`, `/26`), their
//!   addresses are in the same network of that length, so that a network a
//!   script computes from an address at a length the snapshot uses is the
//!   same for both.
//!
//! What cannot be seen: an address written in a snapshot file other than as
//! text, a network computed at a length written nowhere, or a namespace
//! taken out of a pod's name as text (`to_string` of a pod, which is its
//! identity). Nothing of the snapshot format or the built-in packs does
//! any of these; `docs/matrix.md` ("Twins") says so. `tests/matrix.rs`
//! holds the answers of twins to `diagnose` run on each flow alone.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;

use super::Flow;
use crate::engine::Endpoint;
use crate::report::matrix::FlowOut;
use crate::snapshot::cluster::pod_reads::PodRead;
use crate::snapshot::cluster::{Cluster, Labels, ObjectSource, Pod, PolicyFlow};
use crate::snapshot::{NetnsId, Snapshot};

/// What names a pod as itself, which a twin has its own of; and its
/// namespace and labels, in which twins may differ where no diagnosis reads
/// them.
#[derive(Debug, Clone)]
struct Identity {
    namespace: String,
    name: String,
    uid: String,
    /// Its addresses, as text.
    ips: Vec<String>,
    addresses: Vec<IpAddr>,
    /// Where its object was read from (`FILE:LINE`), as evidence cites it.
    source: String,
    labels: Labels,
}

impl Identity {
    fn of(pod: &Pod) -> Identity {
        Identity {
            namespace: pod.meta.namespace.clone(),
            name: pod.meta.name.clone(),
            uid: pod.meta.uid.clone(),
            ips: pod.ips.iter().map(ToString::to_string).collect(),
            addresses: pod.ips.clone(),
            source: pod.meta.source.to_string(),
            labels: pod.meta.labels.clone(),
        }
    }

    /// The words that name it, the empty ones left out.
    fn words(&self) -> impl Iterator<Item = &str> {
        [self.name.as_str(), self.uid.as_str(), self.source.as_str()]
            .into_iter()
            .chain(self.ips.iter().map(String::as_str))
            .filter(|word| !word.is_empty())
    }

    fn is(&self, namespace: &str, name: &str) -> bool {
        self.namespace == namespace && self.name == name
    }

    /// `text` with each of its [`Identity::words`], where it stands alone,
    /// replaced by a mark.
    fn unworded(&self, text: &str) -> String {
        self.words()
            .fold(text.to_owned(), |text, word| replace_word(&text, word))
    }

    /// `text` with its name (`namespace/name` first) and the other words
    /// that name it replaced by a mark.
    fn unnamed(&self, text: &str) -> String {
        let qualified = format!("{}/{}", self.namespace, self.name);
        self.unworded(&text.replace(&qualified, "\u{1}"))
    }

    /// `ip` with this pod's and `other`'s addresses swapped (by their
    /// place in each one's list).
    fn swapped(&self, other: &Identity, ip: IpAddr) -> IpAddr {
        let at = |from: &Identity, to: &Identity| {
            let place = from.addresses.iter().position(|own| *own == ip)?;
            to.addresses.get(place).copied()
        };
        at(self, other).or_else(|| at(other, self)).unwrap_or(ip)
    }

    /// Whether `read`, made while diagnosing a flow from this pod, gives
    /// the same with `other` in its place (and it in `other`'s): then that
    /// read cannot tell `other`'s flow from this one's.
    fn read_alike(&self, other: &Identity, read: &PodRead, cluster: &Cluster) -> bool {
        let either =
            |namespace: &str, name: &str| self.is(namespace, name) || other.is(namespace, name);
        let labelled = |pod: &Identity, key: &str, value: &str| {
            pod.labels.get(key).is_some_and(|own| own == value)
        };
        match read {
            PodRead::Namespace { namespace, name } => {
                !either(namespace, name) || self.namespace == other.namespace
            }
            PodRead::Labels { namespace, name } => {
                !either(namespace, name) || self.labels == other.labels
            }
            PodRead::Labelled { key, value } => {
                labelled(self, key, value) == labelled(other, key, value)
            }
            PodRead::Selected {
                namespace,
                selector,
            } => {
                let selected =
                    |pod: &Identity| pod.namespace == *namespace && selector.matches(&pod.labels);
                selected(self) == selected(other)
            }
            PodRead::Policy(flow) => {
                let theirs = PolicyFlow {
                    src: self.swapped(other, flow.src),
                    dst: self.swapped(other, flow.dst),
                    ..*flow
                };
                if theirs == *flow {
                    return true;
                }
                let own = format!("{:?}", cluster.network_policy(flow));
                let swapped = format!("{:?}", cluster.network_policy(&theirs));
                self.unnamed(&own) == other.unnamed(&swapped)
            }
        }
    }
}

/// Which flows of a matrix are answered by a twin's.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// For each flow, the flow whose answer stands for it (its source's
    /// twin to the same destination, protocol and family); `None`: it is
    /// diagnosed.
    pub(super) stand_in: Vec<Option<usize>>,
    /// Each source with a twin (by its text), and its identity.
    identities: HashMap<String, Identity>,
    /// The classes of twins, each source (by its text) in the order of the
    /// flows, the one diagnosed first.
    pub(super) classes: Vec<Vec<String>>,
}

impl Plan {
    /// Flow `member`'s answer from its twin's, `answer`: the same with its
    /// source renamed, where nothing the twin's diagnosis read of pods
    /// (`reads`) tells the two apart, and nothing else in the answer names
    /// either pod.
    pub(super) fn readdress(
        &self,
        answer: &FlowOut,
        reads: &[PodRead],
        member: &Flow,
        cluster: &Cluster,
    ) -> Option<FlowOut> {
        let from = member.from.to_string();
        let theirs = self.identities.get(&answer.from)?;
        let own = self.identities.get(&from)?;
        if !reads
            .iter()
            .all(|read| theirs.read_alike(own, read, cluster))
        {
            return None;
        }
        let mut rest = answer.clone();
        rest.from.clear();
        let text = serde_json::to_string(&rest).ok()?;
        let named = theirs
            .words()
            .chain(own.words())
            .any(|word| names(&text, word));
        (!named).then_some(FlowOut { from, ..rest })
    }
}

/// Which flows of `flows` a twin's answer stands for (see the module's
/// documentation); `pack_texts` is every pack file's text
/// ([`crate::packs::LoadedPacks::texts`]).
pub(super) fn plan(snapshot: &Snapshot, flows: &[Flow], pack_texts: &[String]) -> Plan {
    let mut plan = Plan {
        stand_in: vec![None; flows.len()],
        ..Plan::default()
    };
    // The candidates in the order of the flows, grouped by node and by
    // what is left of their objects without their identities.
    let mut seen = HashSet::new();
    let mut groups: BTreeMap<(String, String), Vec<(String, &Pod)>> = BTreeMap::new();
    for flow in flows {
        let text = flow.from.to_string();
        if !seen.insert(text.clone()) {
            continue;
        }
        if let Some((node, pod)) = candidate(snapshot, &flow.from) {
            groups
                .entry((node.to_owned(), shape(pod)))
                .or_default()
                .push((text, pod));
        }
    }
    groups.retain(|_, members| members.len() > 1);
    if groups.is_empty() {
        return plan;
    }
    let own_shapes: HashSet<(&str, &str)> = groups
        .values()
        .flatten()
        .map(|(_, pod)| (pod.meta.namespace.as_str(), pod.meta.name.as_str()))
        .collect();
    let words: HashSet<&str> = groups
        .values()
        .flatten()
        .flat_map(|(_, pod)| [pod.meta.name.as_str(), pod.meta.uid.as_str()])
        .filter(|word| !word.is_empty())
        .collect();
    let mut scan = Scan::new(words);
    scan_cluster(snapshot, &own_shapes, &mut scan);
    for entry in snapshot.namespaces.values() {
        scan_files(&entry.dir, &mut scan);
    }
    for text in pack_texts {
        scan.text(text);
    }
    let Scan {
        mentioned,
        literals,
        ..
    } = scan;
    let literals: Vec<IpNet> = literals.into_iter().chain(special_ranges()).collect();
    let lengths: BTreeSet<(bool, u8)> = literals
        .iter()
        .filter(|net| net.prefix_len() < net.max_prefix_len())
        .map(|net| (matches!(net, IpNet::V4(_)), net.prefix_len()))
        .collect();
    for members in groups.into_values() {
        // Split by what the snapshot tells of their addresses; a pod named
        // elsewhere is no one's twin.
        let mut classes: BTreeMap<Vec<Vec<u128>>, Vec<(String, &Pod)>> = BTreeMap::new();
        for (text, pod) in members {
            if mentioned.contains(&pod.meta.name) || mentioned.contains(&pod.meta.uid) {
                continue;
            }
            classes
                .entry(signature(&pod.ips, &literals, &lengths))
                .or_default()
                .push((text, pod));
        }
        for members in classes.into_values().filter(|m| m.len() > 1) {
            for (text, pod) in &members {
                plan.identities.insert(text.clone(), Identity::of(pod));
            }
            plan.classes
                .push(members.into_iter().map(|(text, _)| text).collect());
        }
    }
    plan.classes.sort_by_key(|class| {
        flows
            .iter()
            .position(|flow| flow.from.to_string() == class[0])
    });
    let first: HashMap<&str, (&str, &[String])> = plan
        .classes
        .iter()
        .flat_map(|class| {
            class
                .iter()
                .map(move |m| (m.as_str(), (class[0].as_str(), class.as_slice())))
        })
        .collect();
    let key = |flow: &Flow, from: &str| {
        (
            from.to_owned(),
            flow.to.to_string(),
            flow.protocol,
            flow.family,
        )
    };
    let index: HashMap<_, usize> = flows
        .iter()
        .enumerate()
        .map(|(i, flow)| (key(flow, &flow.from.to_string()), i))
        .collect();
    for (i, flow) in flows.iter().enumerate() {
        let from = flow.from.to_string();
        let Some((twin, class)) = first.get(from.as_str()) else {
            continue;
        };
        if *twin == from || names_a_member(&flow.to, class, &plan.identities) {
            continue;
        }
        plan.stand_in[i] = index.get(&key(flow, twin)).copied();
    }
    plan
}

/// A source that may have a twin: a pod with addresses of its own, on a
/// node, whose namespace the snapshot holds no dump of; with its node.
fn candidate<'s>(snapshot: &'s Snapshot, from: &Endpoint) -> Option<(&'s str, &'s Pod)> {
    let Endpoint::Pod {
        namespace,
        name,
        port: None,
    } = from
    else {
        return None;
    };
    let pod = snapshot.cluster.pod(namespace, name)?;
    let node = pod.node_name.as_deref()?;
    let own = NetnsId::Pod {
        node: node.to_owned(),
        namespace: namespace.clone(),
        name: name.clone(),
    };
    (!pod.host_network && !pod.ips.is_empty() && !snapshot.namespaces.contains_key(&own))
        .then_some((node, pod))
}

/// Whether a destination is a pod of the class or one of its addresses: a
/// flow to its own source is answered by no other.
fn names_a_member(to: &Endpoint, class: &[String], identities: &HashMap<String, Identity>) -> bool {
    match to {
        Endpoint::Pod {
            namespace, name, ..
        } => class.contains(&format!("{namespace}/{name}")),
        Endpoint::Ip { address, .. } => {
            let address = address.to_string();
            class
                .iter()
                .filter_map(|member| identities.get(member))
                .any(|identity| identity.ips.contains(&address))
        }
        Endpoint::Node { .. } | Endpoint::Service { .. } => false,
    }
}

/// A pod's object without its identity, namespace and labels: its name,
/// uid, source and addresses cleared (their families kept), and each of
/// them written in its annotations replaced by a mark. Twins may differ in
/// namespace and labels where no diagnosis reads them
/// ([`Identity::read_alike`]).
fn shape(pod: &Pod) -> String {
    let identity = Identity::of(pod);
    let mut shape = pod.clone();
    let families: Vec<bool> = pod.ips.iter().map(IpAddr::is_ipv4).collect();
    shape.meta.namespace.clear();
    shape.meta.labels.clear();
    shape.meta.name.clear();
    shape.meta.uid.clear();
    shape.meta.source = ObjectSource {
        file: Default::default(),
        line: 0,
    };
    shape.ips.clear();
    shape.meta.annotations = shape
        .meta
        .annotations
        .iter()
        .map(|(k, v)| (identity.unworded(k), identity.unworded(v)))
        .collect();
    format!(
        "{families:?} {}",
        serde_json::to_string(&shape).unwrap_or_default()
    )
}

/// Every object of the cluster as text into `scan`; the candidates' own
/// (`own`, by namespace and name) by their shapes.
fn scan_cluster(snapshot: &Snapshot, own: &HashSet<(&str, &str)>, scan: &mut Scan) {
    fn each<'a, T: serde::Serialize + 'a>(objects: impl Iterator<Item = &'a T>, scan: &mut Scan) {
        for object in objects {
            scan.text(&serde_json::to_string(object).unwrap_or_default());
        }
    }
    let cluster = &snapshot.cluster;
    for pod in cluster.pods() {
        if own.contains(&(pod.meta.namespace.as_str(), pod.meta.name.as_str())) {
            scan.text(&shape(pod));
        } else {
            scan.text(&serde_json::to_string(pod).unwrap_or_default());
        }
    }
    each(cluster.nodes(), scan);
    each(cluster.namespaces(), scan);
    each(cluster.services(), scan);
    each(cluster.endpoint_slices(), scan);
    each(cluster.endpoints(), scan);
    each(cluster.config_maps(), scan);
    each(cluster.daemon_sets(), scan);
    each(cluster.network_policies(), scan);
    each(cluster.others(), scan);
    let namespaces: BTreeSet<&str> = cluster
        .namespaces()
        .map(|n| n.meta.name.as_str())
        .chain(cluster.pods().map(|p| p.meta.namespace.as_str()))
        .collect();
    for namespace in namespaces {
        each(cluster.unreadable_network_policies_in(namespace), scan);
    }
}

/// Every file under `dir` (a namespace's dump) as text into `scan`.
fn scan_files(dir: &Path, scan: &mut Scan) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => scan_files(&path, scan),
            Ok(_) => {
                if let Ok(bytes) = std::fs::read(&path) {
                    scan.text(&String::from_utf8_lossy(&bytes));
                }
            }
            Err(_) => {}
        }
    }
}

/// What the texts a diagnosis reads say of the candidates: which of their
/// words they name, and every address and network written in them.
struct Scan<'w> {
    words: HashSet<&'w str>,
    /// The words with a dot, which a split into words would cut.
    dotted: Vec<&'w str>,
    mentioned: HashSet<String>,
    literals: HashSet<IpNet>,
}

impl<'w> Scan<'w> {
    fn new(words: HashSet<&'w str>) -> Scan<'w> {
        let dotted = words.iter().copied().filter(|w| w.contains('.')).collect();
        Scan {
            words,
            dotted,
            mentioned: HashSet::new(),
            literals: HashSet::new(),
        }
    }

    fn text(&mut self, text: &str) {
        for word in text.split(|c: char| !is_word(c)) {
            if self.words.contains(word) {
                self.mentioned.insert(word.to_owned());
            }
        }
        for word in &self.dotted {
            if names(text, word) {
                self.mentioned.insert((*word).to_owned());
            }
        }
        addresses(text, &mut self.literals);
    }
}

/// A character of a word: a name, a uid or an address is never cut inside.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '-' || c == '_'
}

/// Whether `text` holds `word` with no word character either side.
fn names(text: &str, word: &str) -> bool {
    bounded(text, word).next().is_some()
}

/// Where `word` stands in `text` with no word character either side.
fn bounded<'t>(text: &'t str, word: &'t str) -> impl Iterator<Item = usize> + 't {
    text.match_indices(word).filter_map(move |(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        (!before.is_some_and(is_word) && !after.is_some_and(is_word)).then_some(at)
    })
}

/// `text` with `word`, where it stands alone, replaced by a mark.
fn replace_word(text: &str, word: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for at in bounded(text, word).collect::<Vec<_>>() {
        out.push_str(&text[from..at]);
        out.push('\u{1}');
        from = at + word.len();
    }
    out.push_str(&text[from..]);
    out
}

/// Every address written in `text`, each as its host network and, written
/// with a length, as that network too.
fn addresses(text: &str, found: &mut HashSet<IpNet>) {
    let bytes = text.as_bytes();
    let address_byte = |b: u8| b.is_ascii_hexdigit() || b == b':' || b == b'.';
    let mut i = 0;
    while i < bytes.len() {
        if !address_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && address_byte(bytes[i]) {
            i += 1;
        }
        let run = &text[start..i];
        if !(run.contains('.') || run.matches(':').count() >= 2) {
            continue;
        }
        let length = (bytes.get(i) == Some(&b'/'))
            .then(|| {
                let digits = text[i + 1..].bytes().take_while(u8::is_ascii_digit).count();
                text[i + 1..i + 1 + digits].parse::<u8>().ok()
            })
            .flatten();
        // A sentence's full stop, a list's colon.
        let trimmed = run.trim_end_matches(['.', ':']).trim_start_matches('.');
        let mut readings = vec![trimmed];
        // `ADDR:PORT`: the address before the last colon.
        if let Some((address, _)) = trimmed.rsplit_once(':') {
            readings.push(address);
        }
        for reading in readings {
            let Ok(address) = reading.parse::<IpAddr>() else {
                continue;
            };
            let mut hosts = vec![address];
            if let IpAddr::V6(v6) = address
                && let Some(v4) = v6.to_ipv4_mapped()
            {
                hosts.push(IpAddr::V4(v4));
            }
            for host in hosts {
                found.insert(IpNet::from(host));
                if let Some(net) = length.and_then(|len| IpNet::new(host, len).ok()) {
                    found.insert(net.trunc());
                }
            }
        }
    }
}

/// The ranges the kernel and the engine treat apart by themselves
/// (loopback, link-local, multicast, private ranges, mapped addresses).
fn special_ranges() -> impl Iterator<Item = IpNet> {
    [
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "255.255.255.255/32",
        "::/128",
        "::1/128",
        "::ffff:0:0/96",
        "64:ff9b::/96",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    ]
    .into_iter()
    .filter_map(|net| net.parse().ok())
}

/// What the written networks tell of a pod's addresses: for each address,
/// the networks that hold it (by index), then its network at each length
/// written anywhere.
fn signature(ips: &[IpAddr], literals: &[IpNet], lengths: &BTreeSet<(bool, u8)>) -> Vec<Vec<u128>> {
    let mut signature = Vec::new();
    for ip in ips {
        signature.push(
            literals
                .iter()
                .enumerate()
                .filter(|(_, net)| net.contains(ip))
                .map(|(i, _)| i as u128)
                .collect(),
        );
        let networks = lengths
            .iter()
            .filter(|(v4, _)| *v4 == ip.is_ipv4())
            .filter_map(|(_, len)| IpNet::new(*ip, *len).ok())
            .map(|net| match net.trunc().network() {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            });
        signature.push(networks.collect());
    }
    signature
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::cluster::LabelSelector;

    fn found(text: &str) -> BTreeSet<String> {
        let mut nets = HashSet::new();
        addresses(text, &mut nets);
        nets.into_iter().map(|net| net.to_string()).collect()
    }

    #[test]
    fn addresses_are_read_in_every_form_a_dump_writes_them() {
        let nets = found(
            "-A KUBE-SEP -s 10.244.1.5/32 -j MARK; dst 10.244.2.0/24; \"10.0.0.1:8080\"; [fd00::1]:80; ::ffff:192.0.2.7 at 09:00:00 52:04:a1:8d:72:13",
        );
        for net in [
            "10.244.1.5/32",
            "10.244.2.0/24",
            "10.244.2.0/32",
            "10.0.0.1/32",
            "fd00::1/128",
            "192.0.2.7/32",
        ] {
            assert!(nets.contains(net), "{net} in {nets:?}");
        }
        assert!(
            !nets
                .iter()
                .any(|n| n.starts_with("52:") || n.starts_with("9:"))
        );
    }

    #[test]
    fn a_word_is_named_only_where_it_stands_alone() {
        assert!(names("default/job-1:80", "job-1"));
        assert!(names("job-1.default.svc", "job-1"));
        assert!(!names("job-10", "job-1"));
        assert!(!names("10.0.0.10", "10.0.0.1"));
        assert!(names("10.0.0.1/32", "10.0.0.1"));
        assert_eq!(replace_word("a job-1 job-10", "job-1"), "a \u{1} job-10");
    }

    fn identity(namespace: &str, name: &str, ip: &str, app: &str) -> Identity {
        Identity {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            ips: vec![ip.to_owned()],
            addresses: vec![ip.parse().unwrap()],
            source: format!("cluster/pods.yaml:{}", ip.len()),
            labels: Labels::from([("app".to_owned(), app.to_owned())]),
        }
    }

    #[test]
    fn a_read_tells_twins_apart_only_where_they_differ_in_what_it_read() {
        let cluster = Cluster::default();
        let a = identity("default", "a", "10.244.1.20", "client");
        let other_labels = identity("default", "b", "10.244.1.21", "other");
        let other_namespace = identity("team", "c", "10.244.1.22", "client");
        let bystander = identity("default", "d", "10.244.1.23", "client");
        let alike = |b: &Identity, read: PodRead| a.read_alike(b, &read, &cluster);
        let namespace_of = |pod: &Identity| PodRead::Namespace {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
        };
        let labels_of = |pod: &Identity| PodRead::Labels {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
        };
        assert!(alike(&other_labels, namespace_of(&a)));
        assert!(!alike(&other_namespace, namespace_of(&a)));
        assert!(!alike(&other_namespace, namespace_of(&other_namespace)));
        assert!(alike(&other_namespace, namespace_of(&bystander)));
        assert!(!alike(&other_labels, labels_of(&other_labels)));
        assert!(alike(&other_namespace, labels_of(&a)));
        let labelled = |value: &str| PodRead::Labelled {
            key: "app".into(),
            value: value.into(),
        };
        assert!(!alike(&other_labels, labelled("client")));
        assert!(alike(&other_labels, labelled("web")));
        assert!(alike(&other_namespace, labelled("client")));
        let selected = |namespace: &str| PodRead::Selected {
            namespace: namespace.into(),
            selector: LabelSelector {
                match_labels: Labels::from([("app".to_owned(), "client".to_owned())]),
                ..LabelSelector::default()
            },
        };
        assert!(!alike(&other_namespace, selected("default")));
        assert!(alike(&other_namespace, selected("kube-system")));
        assert!(!alike(&other_labels, selected("default")));
        // No policy in the cluster: the verdicts differ in the pod alone.
        let policy = PodRead::Policy(PolicyFlow {
            src: "10.244.1.20".parse().unwrap(),
            dst: "10.244.2.3".parse().unwrap(),
            transport: None,
            from_destination_node: false,
        });
        assert!(alike(&other_namespace, policy));
    }

    #[test]
    fn an_answer_naming_either_twin_stands_for_no_other() {
        let identity = |name: &str, ip: &str| identity("default", name, ip, "client");
        let plan = Plan {
            identities: HashMap::from([
                ("default/a".to_owned(), identity("a", "10.244.1.20")),
                ("default/b".to_owned(), identity("b", "10.244.1.21")),
            ]),
            ..Plan::default()
        };
        let member = Flow::parse("default/b", "svc/default/web:80", "tcp", Some("IPv4")).unwrap();
        let answer = |message: &str| FlowOut {
            from: "default/a".to_owned(),
            to: "svc/default/web:80".to_owned(),
            protocol: "tcp".to_owned(),
            family: Some("IPv4".to_owned()),
            verdict: crate::report::matrix::FlowVerdict::NotDelivered,
            disposition: Some("no_listener".to_owned()),
            assumed: true,
            paths: 1,
            failing_paths: 1,
            finding: Some(crate::report::matrix::CauseOut {
                id: "kernel.socket.none".to_owned(),
                severity: "fatal".to_owned(),
                hop: "default/web-2".to_owned(),
                message: message.to_owned(),
                evidence: String::new(),
            }),
            error: None,
            confirmation: None,
        };
        let cluster = Cluster::default();
        let renamed = plan.readdress(
            &answer("nothing listens on tcp port 80"),
            &[],
            &member,
            &cluster,
        );
        assert_eq!(renamed.map(|a| a.from), Some("default/b".to_owned()));
        for named in [
            "10.244.1.20 -> 10.244.2.3:80",
            "from 10.244.1.21",
            "default/a's veth",
            "uid-b",
        ] {
            let renamed = plan.readdress(&answer(named), &[], &member, &cluster);
            assert_eq!(renamed, None, "{named}");
        }
    }

    #[test]
    fn a_network_between_two_addresses_tells_them_apart() {
        let literals: Vec<IpNet> = vec!["10.244.1.4/31".parse().unwrap()];
        let lengths = BTreeSet::from([(true, 24)]);
        let at = |ip: &str| signature(&[ip.parse().unwrap()], &literals, &lengths);
        assert_eq!(at("10.244.1.4"), at("10.244.1.5"));
        assert_ne!(at("10.244.1.5"), at("10.244.1.6"));
        let lengths = BTreeSet::from([(true, 26)]);
        let at = |ip: &str| signature(&[ip.parse().unwrap()], &[], &lengths);
        assert_ne!(at("10.244.1.62"), at("10.244.1.65"), "another /26");
    }
}
