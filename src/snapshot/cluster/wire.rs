//! The kinds a large cluster has most of (Pod, Node, Service,
//! EndpointSlice, Endpoints), as the API writes them but with only the fields skoop
//! reads, and the check that every mapping's keys are unique, in one pass.
//!
//! k8s-openapi's full types read every field of a Pod (its container
//! statuses' states and timestamps, resources, volumes...) and leave
//! duplicate keys to a second pass; on a 150,000-pod cluster that was most
//! of the load. These types read like k8s-openapi's (every field optional,
//! `null` as absent, the same type names in messages) but keep only what
//! `convert.rs` uses, and drop every other value after checking its keys
//! ([`Unique`]). A key written twice is an error, as the positioned path
//! reports it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A struct read field by field from a mapping, which may already have been
/// entered (`direct.rs` reads apiVersion and kind first, then hands the rest
/// of the object's fields here).
pub(super) trait Fields<'de>: Default {
    /// What a message calls this type, as k8s-openapi does.
    const EXPECTING: &'static str;

    /// Reads the value of `key`: into its field, or checked and dropped.
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// Reads the remaining entries of `map` into `value`, each key unique
/// (`keys` holds the ones already read).
pub(super) fn read_fields<'de, T: Fields<'de>, A: MapAccess<'de>>(
    value: &mut T,
    keys: &mut Keys<'de>,
    map: &mut A,
) -> Result<(), A::Error> {
    while let Some(Key(key)) = map.next_key::<Key>()? {
        value.field(&key, map)?;
        keys.insert::<A::Error>(key)?;
    }
    Ok(())
}

struct FieldsVisitor<T>(PhantomData<T>);

impl<'de, T: Fields<'de>> Visitor<'de> for FieldsVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut value = T::default();
        read_fields(&mut value, &mut Keys::default(), &mut map)?;
        Ok(value)
    }
}

/// Declares a lean struct: each field optional, read from the JSON key
/// written beside it; every other key's value is checked and dropped.
macro_rules! lean {
    ($(#[$doc:meta])* $name:ident as $expecting:literal {
        $($field:ident: $ty:ty = $key:literal,)*
    }) => {
        $(#[$doc])*
        #[derive(Debug, Default)]
        pub(super) struct $name {
            $(pub $field: Option<$ty>,)*
        }

        impl<'de> Fields<'de> for $name {
            const EXPECTING: &'static str = $expecting;

            fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
                match key {
                    $($key => self.$field = map.next_value()?,)*
                    _ => {
                        map.next_value::<Unique>()?;
                    }
                }
                Ok(())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_map(FieldsVisitor(PhantomData))
            }
        }
    };
}

lean! {
    /// `metadata`, of every kind.
    Metadata as "ObjectMeta" {
        name: String = "name",
        namespace: String = "namespace",
        uid: String = "uid",
        labels: StringMap = "labels",
        annotations: StringMap = "annotations",
    }
}

lean! {
    Pod as "Pod" {
        metadata: Metadata = "metadata",
        spec: PodSpec = "spec",
        status: PodStatus = "status",
    }
}

lean! {
    PodSpec as "PodSpec" {
        node_name: String = "nodeName",
        host_network: bool = "hostNetwork",
        containers: Vec<Container> = "containers",
    }
}

lean! {
    Container as "Container" {
        name: String = "name",
        ports: Vec<ContainerPort> = "ports",
    }
}

lean! {
    ContainerPort as "ContainerPort" {
        name: String = "name",
        container_port: i32 = "containerPort",
        host_port: i32 = "hostPort",
        protocol: String = "protocol",
    }
}

lean! {
    PodStatus as "PodStatus" {
        pod_ip: String = "podIP",
        pod_ips: Vec<PodIp> = "podIPs",
        host_ip: String = "hostIP",
        phase: String = "phase",
        conditions: Vec<Condition> = "conditions",
        container_statuses: Vec<ContainerStatus> = "containerStatuses",
    }
}

lean! {
    PodIp as "PodIP" {
        ip: String = "ip",
    }
}

lean! {
    /// A Pod's or a Node's condition (k8s-openapi's PodCondition and
    /// NodeCondition, of which skoop reads the same two fields).
    Condition as "Condition" {
        type_: String = "type",
        status: String = "status",
    }
}

impl Condition {
    /// Its type and status, absent ones empty.
    pub fn pair(&self) -> (&str, &str) {
        (
            self.type_.as_deref().unwrap_or_default(),
            self.status.as_deref().unwrap_or_default(),
        )
    }
}

lean! {
    ContainerStatus as "ContainerStatus" {
        name: String = "name",
        ready: bool = "ready",
    }
}

lean! {
    Node as "Node" {
        metadata: Metadata = "metadata",
        spec: NodeSpec = "spec",
        status: NodeStatus = "status",
    }
}

lean! {
    NodeSpec as "NodeSpec" {
        pod_cidr: String = "podCIDR",
        pod_cidrs: Vec<String> = "podCIDRs",
    }
}

lean! {
    NodeStatus as "NodeStatus" {
        addresses: Vec<NodeAddress> = "addresses",
        conditions: Vec<Condition> = "conditions",
    }
}

lean! {
    NodeAddress as "NodeAddress" {
        type_: String = "type",
        address: String = "address",
    }
}

lean! {
    Service as "Service" {
        metadata: Metadata = "metadata",
        spec: ServiceSpec = "spec",
        status: ServiceStatus = "status",
    }
}

lean! {
    ServiceSpec as "ServiceSpec" {
        type_: String = "type",
        session_affinity: String = "sessionAffinity",
        cluster_ip: String = "clusterIP",
        cluster_ips: Vec<String> = "clusterIPs",
        external_ips: Vec<String> = "externalIPs",
        external_name: String = "externalName",
        ports: Vec<ServicePort> = "ports",
        selector: StringMap = "selector",
        external_traffic_policy: String = "externalTrafficPolicy",
        internal_traffic_policy: String = "internalTrafficPolicy",
    }
}

lean! {
    ServicePort as "ServicePort" {
        name: String = "name",
        protocol: String = "protocol",
        port: i32 = "port",
        target_port: IntOrString = "targetPort",
        node_port: i32 = "nodePort",
    }
}

lean! {
    ServiceStatus as "ServiceStatus" {
        load_balancer: LoadBalancerStatus = "loadBalancer",
    }
}

lean! {
    LoadBalancerStatus as "LoadBalancerStatus" {
        ingress: Vec<LoadBalancerIngress> = "ingress",
    }
}

lean! {
    LoadBalancerIngress as "LoadBalancerIngress" {
        ip: String = "ip",
    }
}

lean! {
    EndpointSlice as "EndpointSlice" {
        metadata: Metadata = "metadata",
        address_type: String = "addressType",
        ports: Vec<EndpointPort> = "ports",
        endpoints: Vec<Endpoint> = "endpoints",
    }
}

lean! {
    Endpoints as "Endpoints" {
        metadata: Metadata = "metadata",
        subsets: Vec<EndpointSubset> = "subsets",
    }
}

lean! {
    EndpointSubset as "EndpointSubset" {
        addresses: Vec<EndpointAddress> = "addresses",
        not_ready_addresses: Vec<EndpointAddress> = "notReadyAddresses",
        ports: Vec<EndpointPort> = "ports",
    }
}

lean! {
    EndpointAddress as "EndpointAddress" {
        ip: String = "ip",
        node_name: String = "nodeName",
        target_ref: ObjectReference = "targetRef",
    }
}

lean! {
    /// A port of an EndpointSlice or of an Endpoints subset.
    EndpointPort as "EndpointPort" {
        name: String = "name",
        protocol: String = "protocol",
        port: i32 = "port",
    }
}

lean! {
    Endpoint as "Endpoint" {
        addresses: Vec<String> = "addresses",
        conditions: EndpointConditions = "conditions",
        node_name: String = "nodeName",
        target_ref: ObjectReference = "targetRef",
    }
}

lean! {
    EndpointConditions as "EndpointConditions" {
        ready: bool = "ready",
        serving: bool = "serving",
        terminating: bool = "terminating",
    }
}

lean! {
    ObjectReference as "ObjectReference" {
        kind: String = "kind",
        namespace: String = "namespace",
        name: String = "name",
    }
}

/// A port by number or by name (`targetPort`), read as k8s-openapi reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum IntOrString {
    Int(i32),
    String(String),
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IntOrStringVisitor)
    }
}

struct IntOrStringVisitor;

impl Visitor<'_> for IntOrStringVisitor {
    type Value = IntOrString;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IntOrString")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrString, E> {
        i32::try_from(v)
            .map(IntOrString::Int)
            .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &"a 32-bit integer"))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrString, E> {
        i32::try_from(v)
            .map(IntOrString::Int)
            .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &"a 32-bit integer"))
    }

    fn visit_str<E>(self, v: &str) -> Result<IntOrString, E> {
        Ok(IntOrString::String(v.to_owned()))
    }
}

/// A mapping of strings to strings (labels, annotations, a selector) whose
/// keys are unique.
#[derive(Debug, Default)]
pub(super) struct StringMap(pub BTreeMap<String, String>);

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(StringMapVisitor)
    }
}

struct StringMapVisitor;

impl<'de> Visitor<'de> for StringMapVisitor {
    type Value = StringMap;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringMap, A::Error> {
        let mut entries = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value::<String>()?;
            if entries.insert(key, value).is_some() {
                return Err(de::Error::custom("duplicate key"));
            }
        }
        Ok(StringMap(entries))
    }
}

/// A string, borrowed from the text where it has no escapes.
pub(super) struct Key<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_owned())))
    }
}

/// Keys of one mapping kept in place before a set is built: a container,
/// a pod's spec or its status has more than 8 keys, and few mappings have
/// more than 16.
const FEW_KEYS: usize = 16;

/// The keys of one mapping read so far, to find one written twice.
pub(super) struct Keys<'a> {
    /// The first keys borrowed from the text, each with its [`head`].
    few: [&'a str; FEW_KEYS],
    heads: [u64; FEW_KEYS],
    len: usize,
    /// Every key so far was borrowed and greater than the one before it:
    /// a key greater than the last is then new without a search. kubectl
    /// writes every mapping's keys sorted.
    ascending: bool,
    /// The keys past the first few, and those with an escape: a set, so
    /// that a hostile mapping with a million keys stays linear.
    many: BTreeSet<Cow<'a, str>>,
}

impl Default for Keys<'_> {
    fn default() -> Self {
        Keys {
            few: [""; FEW_KEYS],
            heads: [0; FEW_KEYS],
            len: 0,
            ascending: true,
            many: BTreeSet::new(),
        }
    }
}

/// A key's first 8 bytes (zeros past its end), big-endian: of two keys,
/// the one with the greater head is the greater; with equal heads, either
/// may be.
fn head(key: &str) -> u64 {
    let bytes = key.as_bytes();
    match bytes.first_chunk::<8>() {
        Some(first) => u64::from_be_bytes(*first),
        // Byte by byte: a copy of a length not known here is a call.
        None => bytes
            .iter()
            .zip((0..8).rev())
            .fold(0, |word, (&byte, place)| {
                word | u64::from(byte) << (8 * place)
            }),
    }
}

impl<'a> Keys<'a> {
    /// Whether `key` (of head `head`) is one of the first few.
    fn among_few(&self, key: &str, head: u64) -> bool {
        self.heads[..self.len]
            .iter()
            .zip(&self.few)
            .any(|(&h, &k)| h == head && k == key)
    }

    pub fn insert<E: de::Error>(&mut self, key: Cow<'a, str>) -> Result<(), E> {
        let head = head(&key);
        let duplicate = || E::custom("duplicate key");
        match key {
            Cow::Borrowed(key) if self.len < FEW_KEYS => {
                if self.ascending && self.len > 0 {
                    let last = self.len - 1;
                    let (last_head, last_key) = (self.heads[last], self.few[last]);
                    self.ascending = head > last_head || (head == last_head && key > last_key);
                }
                if !self.ascending && (self.among_few(key, head) || self.many.contains(key)) {
                    return Err(duplicate());
                }
                self.few[self.len] = key;
                self.heads[self.len] = head;
                self.len += 1;
            }
            key => {
                self.ascending = false;
                // The set's insert says whether it held the key already.
                if self.among_few(&key, head) || !self.many.insert(key) {
                    return Err(duplicate());
                }
            }
        }
        Ok(())
    }
}

/// Why a reader fitted to what kubectl writes (`yaml.rs`,
/// `direct/fitted.rs`) leaves a text to the general one: something beyond
/// what it takes, or a problem (which the general reader positions).
#[derive(Debug)]
pub(super) struct Refused;

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not as kubectl writes it")
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Refused
    }
}

/// A mapping's key as a fitted reader hands it to `seed`: borrowed from
/// the text when it is.
pub(super) fn deserialize_key<'de, K: de::DeserializeSeed<'de>>(
    seed: K,
    key: Cow<'de, str>,
) -> Result<K::Value, Refused> {
    match key {
        Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::<Refused>::new(key)),
        Cow::Owned(key) => seed.deserialize(StringDeserializer::<Refused>::new(key)),
    }
}

/// The methods a fitted reader's `Deserializer` has alike: an ignored value
/// read as any other (so that it is checked as the general reader checks
/// it), and the rest forwarded to `deserialize_any`.
macro_rules! read_the_rest_as_any {
    () => {
        fn deserialize_ignored_any<V: serde::de::Visitor<'de>>(
            self,
            visitor: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            self.deserialize_any(serde::de::IgnoredAny)?;
            visitor.visit_unit()
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
        }
    };
}
pub(super) use read_the_rest_as_any;

/// An enumeration read from its string, as the general readers read
/// Kubernetes enumerations.
pub(super) fn visit_enum<'de, V: Visitor<'de>>(
    name: Cow<'de, str>,
    visitor: V,
) -> Result<V::Value, Refused> {
    match name {
        Cow::Borrowed(name) => visitor.visit_enum(BorrowedStrDeserializer::<Refused>::new(name)),
        Cow::Owned(name) => visitor.visit_enum(StringDeserializer::<Refused>::new(name)),
    }
}

pub(super) struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut keys = Keys::default();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            keys.insert::<A::Error>(key)?;
            map.next_value::<Unique>()?;
        }
        Ok(Unique)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_twice_is_refused_anywhere_in_an_object() {
        for text in [
            r#"{"metadata": {"name": "a", "name": "b"}}"#,
            r#"{"metadata": {"labels": {"app": "a", "app": "b"}}}"#,
            r#"{"spec": {"volumes": [{"x": 1, "x": 2}]}}"#,
            r#"{"unknown": 1, "unknown": 2}"#,
            r#"{"spec": {}, "spec": {}}"#,
        ] {
            assert!(serde_json::from_str::<Pod>(text).is_err(), "{text}");
        }
    }

    proptest::proptest! {
        /// Keys that share a head (their first 8 bytes) or are prefixes of
        /// one another, in order and out of it, borrowed and with escapes
        /// (owned), past the few kept in place: each is refused exactly
        /// when it was inserted before.
        #[test]
        fn a_key_is_refused_exactly_when_it_came_before(
            mut keys in proptest::collection::vec(
                ("(sameHead)?[ab]{0,3}\\x00?", proptest::bool::ANY),
                0..3 * FEW_KEYS,
            ),
            sorted in proptest::bool::ANY,
        ) {
            if sorted {
                keys.sort();
            }
            let mut set = Keys::default();
            let mut seen = std::collections::HashSet::new();
            for (key, owned) in &keys {
                let cow = if *owned { Cow::Owned(key.clone()) } else { Cow::Borrowed(key.as_str()) };
                let refused = set.insert::<serde_json::Error>(cow).is_err();
                proptest::prop_assert_eq!(refused, !seen.insert(key), "{:?}", key);
            }
        }
    }

    #[test]
    fn nulls_read_as_absent_and_unread_fields_are_dropped() {
        let pod: Pod = serde_json::from_str(
            r#"{"metadata": {"name": "p", "labels": null},
                "spec": {"nodeName": null, "volumes": [{"name": "v", "emptyDir": {}}],
                         "containers": [{"name": "c", "image": "i", "ports": null}]},
                "status": {"containerStatuses": [{"name": "c", "ready": true,
                           "state": {"running": {"startedAt": "2024-05-02T09:14:03Z"}}}]}}"#,
        )
        .unwrap();
        let metadata = pod.metadata.unwrap();
        assert_eq!(metadata.name.as_deref(), Some("p"));
        assert!(metadata.labels.is_none());
        let spec = pod.spec.unwrap();
        assert!(spec.node_name.is_none());
        let containers = spec.containers.unwrap();
        assert_eq!(containers[0].name.as_deref(), Some("c"));
        assert!(containers[0].ports.is_none());
        let statuses = pod.status.unwrap().container_statuses.unwrap();
        assert_eq!(statuses[0].ready, Some(true));
    }

    #[test]
    fn target_port_reads_a_number_or_a_name_and_says_what_it_expected() {
        let port = |text| serde_json::from_str::<ServicePort>(text);
        let read = port(r#"{"targetPort": 8080}"#).unwrap();
        assert_eq!(read.target_port, Some(IntOrString::Int(8080)));
        let read = port(r#"{"targetPort": "http"}"#).unwrap();
        assert_eq!(read.target_port, Some(IntOrString::String("http".into())));
        let error = port(r#"{"targetPort": true}"#).unwrap_err().to_string();
        assert!(error.contains("expected IntOrString"), "{error}");
        let error = port(r#"{"port": "80"}"#).unwrap_err().to_string();
        assert!(error.contains("expected i32"), "{error}");
    }
}
