//! A pack as loaded: the manifest's content, validated, with every
//! expression and script compiled and the parameters folded in.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;
use rhai::{AST, Dynamic};

use super::yaml::Pos;

/// `rules` packs always apply; `cni` packs apply where they are detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PackKind {
    Cni,
    Rules,
}

impl PackKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PackKind::Cni => "cni",
            PackKind::Rules => "rules",
        }
    }
}

pub use crate::diagnostic::Severity;

/// A semantic version `MAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl Version {
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().split('.');
        let mut next = || parts.next()?.parse().ok();
        let version = Version {
            major: next()?,
            minor: next()?,
            patch: next()?,
        };
        parts.next().is_none().then_some(version)
    }

    /// The version of this skoop, which packs name in `engine:`.
    pub fn engine() -> Version {
        Version::parse(env!("CARGO_PKG_VERSION")).unwrap_or(Version {
            major: 0,
            minor: 0,
            patch: 0,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A version requirement: comparators joined by commas, all of which must
/// hold (`>=0.1.0, <0.3.0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionReq(Vec<(Comparator, Version)>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparator {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl VersionReq {
    pub fn parse(text: &str) -> Result<VersionReq, String> {
        let mut comparators = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (comparator, rest) = [
                (">=", Comparator::Ge),
                ("<=", Comparator::Le),
                (">", Comparator::Gt),
                ("<", Comparator::Lt),
                ("=", Comparator::Eq),
            ]
            .into_iter()
            .find_map(|(op, c)| part.strip_prefix(op).map(|rest| (c, rest)))
            .unwrap_or((Comparator::Eq, part));
            let version = Version::parse(rest).ok_or_else(|| {
                format!("{part:?} is not a comparator such as >=0.1.0 (MAJOR.MINOR.PATCH)")
            })?;
            comparators.push((comparator, version));
        }
        Ok(VersionReq(comparators))
    }

    pub fn matches(&self, version: Version) -> bool {
        self.0
            .iter()
            .all(|(comparator, required)| match comparator {
                Comparator::Eq => version == *required,
                Comparator::Lt => version < *required,
                Comparator::Le => version <= *required,
                Comparator::Gt => version > *required,
                Comparator::Ge => version >= *required,
            })
    }
}

/// The type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    Int,
    String,
    Bool,
    Ip,
    Cidr,
}

impl ParamType {
    pub const ALL: [(&'static str, ParamType); 5] = [
        ("int", ParamType::Int),
        ("string", ParamType::String),
        ("bool", ParamType::Bool),
        ("ip", ParamType::Ip),
        ("cidr", ParamType::Cidr),
    ];

    pub fn as_str(self) -> &'static str {
        ParamType::ALL
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("string", |(name, _)| name)
    }

    /// Reads a value of this type from its text (`--set`, a string in YAML).
    pub fn parse(self, text: &str) -> Result<ParamValue, String> {
        let bad = || format!("{text:?} is not {}", self.described());
        match self {
            ParamType::Int => text.trim().parse().map(ParamValue::Int).map_err(|_| bad()),
            ParamType::String => Ok(ParamValue::String(text.to_owned())),
            ParamType::Bool => match text.trim() {
                "true" => Ok(ParamValue::Bool(true)),
                "false" => Ok(ParamValue::Bool(false)),
                _ => Err(bad()),
            },
            ParamType::Ip => text.trim().parse().map(ParamValue::Ip).map_err(|_| bad()),
            ParamType::Cidr => text.trim().parse().map(ParamValue::Cidr).map_err(|_| bad()),
        }
    }

    fn described(self) -> &'static str {
        match self {
            ParamType::Int => "an integer",
            ParamType::String => "a string",
            ParamType::Bool => "true or false",
            ParamType::Ip => "an IP address",
            ParamType::Cidr => "a network in CIDR notation",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamValue {
    Int(i64),
    String(String),
    Bool(bool),
    Ip(IpAddr),
    Cidr(IpNet),
}

impl ParamValue {
    pub fn to_dynamic(&self) -> Dynamic {
        match self {
            ParamValue::Int(i) => (*i).into(),
            ParamValue::String(s) => s.clone().into(),
            ParamValue::Bool(b) => (*b).into(),
            ParamValue::Ip(ip) => Dynamic::from(*ip),
            ParamValue::Cidr(net) => Dynamic::from(*net),
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::String(s) => write!(f, "{s:?}"),
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Ip(ip) => write!(f, "{ip}"),
            ParamValue::Cidr(net) => write!(f, "{net}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Parameter {
    pub name: String,
    pub param_type: ParamType,
    pub default: ParamValue,
    /// The value in force: the default, or an override.
    pub value: ParamValue,
    pub doc: String,
    /// Empty: any value of the type.
    pub allowed: Vec<ParamValue>,
    /// The least and the greatest value of an `int` parameter (`min:`,
    /// `max:`), when declared.
    pub range: IntRange,
}

/// Bounds of an `int` parameter, inclusive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntRange {
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl IntRange {
    /// `Err` saying why `value` is out of range.
    pub fn check(&self, value: &ParamValue) -> Result<(), String> {
        let ParamValue::Int(n) = value else {
            return Ok(());
        };
        let below = self.min.is_some_and(|min| *n < min);
        let above = self.max.is_some_and(|max| *n > max);
        if below || above {
            Err(format!("{n} is out of range ({self})"))
        } else {
            Ok(())
        }
    }
}

impl std::fmt::Display for IntRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.min, self.max) {
            (Some(min), Some(max)) => write!(f, "{min} to {max}"),
            (Some(min), None) => write!(f, "at least {min}"),
            (None, Some(max)) => write!(f, "at most {max}"),
            (None, None) => f.write_str("any"),
        }
    }
}

/// A value of the manifest that may be a Rhai expression: a literal, one
/// `${expr}` (typed result) or a string with `${expr}` parts (a string).
#[derive(Debug, Clone)]
pub enum Template {
    Literal(Dynamic),
    Expression(Box<AST>),
    Interpolated(Vec<TemplatePart>),
}

#[derive(Debug, Clone)]
pub enum TemplatePart {
    Text(String),
    Expression(Box<AST>),
}

/// A template and where it was written, so that an error evaluating it
/// points at the manifest.
#[derive(Debug, Clone)]
pub struct Value {
    pub template: Template,
    pub source: String,
    pub pos: Pos,
}

/// A way a CNI can be set up (Flannel's vxlan, host-gw; Calico's IPIP, ...).
#[derive(Debug, Clone)]
pub struct Mode {
    pub name: String,
    pub doc: String,
    /// Selects the mode for a snapshot; the first mode whose `when` holds is
    /// active. No `when`: the mode is active unless an earlier one is.
    pub when: Option<Value>,
}

/// How a CNI pack recognises its CNI in a snapshot; any signal suffices.
#[derive(Debug, Clone, Default)]
pub struct Detection {
    pub daemon_sets: Vec<NamedObject>,
    pub config_maps: Vec<ConfigMapSignal>,
    pub node_annotations: Vec<String>,
    pub crds: Vec<ObjectKind>,
}

impl Detection {
    pub fn is_empty(&self) -> bool {
        self.daemon_sets.is_empty()
            && self.config_maps.is_empty()
            && self.node_annotations.is_empty()
            && self.crds.is_empty()
    }
}

#[derive(Debug, Clone)]
pub struct NamedObject {
    /// `None`: any namespace.
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct ConfigMapSignal {
    pub object: NamedObject,
    /// A key of `data` that must be present.
    pub key: Option<String>,
    /// Text that the key's value (or any value) must contain.
    pub contains: Option<String>,
}

/// Objects by apiVersion (optional: any version) and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKind {
    pub api_version: Option<String>,
    pub kind: String,
}

/// Where a check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckScope {
    /// Each node's host namespace.
    Node,
    /// Each pod's namespace.
    Pod,
    /// Each cluster object of the check's `object` kind.
    Object,
    /// Each hop of a path, when the walker asks (`evaluate_hop`).
    Hop,
}

impl CheckScope {
    pub const ALL: [(&'static str, CheckScope); 4] = [
        ("node", CheckScope::Node),
        ("pod", CheckScope::Pod),
        ("object", CheckScope::Object),
        ("hop", CheckScope::Hop),
    ];

    pub fn as_str(self) -> &'static str {
        CheckScope::ALL
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("node", |(name, _)| name)
    }
}

/// A check's subject repeated over related things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForEach {
    /// Node scope: every other node, as `peer`.
    RemoteNodes,
    /// Node scope: every pod of the node the CNI networks (not on the host
    /// network, with an address), as `pod`.
    LocalPods,
    /// Pod scope: every port its containers declare, as `port`.
    ContainerPorts,
}

impl ForEach {
    pub const ALL: [(&'static str, ForEach); 3] = [
        ("remote_nodes", ForEach::RemoteNodes),
        ("local_pods", ForEach::LocalPods),
        ("container_ports", ForEach::ContainerPorts),
    ];
}

/// The expected state of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceState {
    Up,
    Down,
}

/// What a check tests.
#[derive(Debug, Clone)]
pub enum CheckKind {
    /// A sysctl has a value (compared as text, surrounding blanks ignored).
    Sysctl { key: Value, expect: Value },
    /// A device exists with these properties (boxed: the largest kind).
    Device(Box<DeviceCheck>),
    /// A route to exactly `dst` (`default` too) exists in `table` (main).
    Route {
        dst: Value,
        via: Option<Value>,
        dev: Option<Value>,
        table: Option<Value>,
        /// `true`: the route must be `onlink` (a gateway not on the device's subnet).
        onlink: Option<Value>,
        /// Who installed it (`proto`: `bird`, `boot`, `kernel`, a number).
        protocol: Option<Value>,
        /// Its type (`unicast`, `blackhole`, `unreachable`, ...).
        route_type: Option<Value>,
    },
    /// A neighbour entry for `dst` that is not failed.
    Neighbour {
        dst: Value,
        dev: Option<Value>,
        lladdr: Option<Value>,
    },
    /// A forwarding entry on `dev` (for `mac` when given) towards `dst`.
    Fdb {
        dev: Value,
        mac: Option<Value>,
        dst: Option<Value>,
    },
    /// A socket listens on `port` (`protocol`, default tcp).
    Listener {
        port: Value,
        protocol: Option<Value>,
    },
    /// Each chain jumps (or goes) to its target chain, which exists.
    Jump { jumps: Vec<Jump> },
    /// An iptables rule of a chain with its target, text and position.
    Rule(Box<RuleCheck>),
    /// A Node's or Pod's annotation `key` is there, with the value
    /// `expect` where given (`()`: not compared).
    Annotation { key: Value, expect: Option<Value> },
    /// A Ready pod labelled `label` (`KEY=VALUE`) runs on the node (a
    /// node's agent: a CNI's DaemonSet pod).
    ReadyPod { label: Value },
    /// An address or network (`value`; a list: each) lies within one of
    /// `networks`; `()` for either is not checked.
    Within { value: Value, networks: Value },
    /// An entry of a datapath's file (`datapath/FILE.json`): each `key` is a
    /// member of its top-level object, and `field` of it (of the document
    /// without `key`) is there, `expect`ed where given; `contains` is text
    /// the field (the member itself without `field`) holds, in a string or
    /// in one string of a list (a map's value as its tool prints it,
    /// `identity=2 tunnelendpoint=172.18.0.12`).
    DatapathEntry {
        file: Value,
        key: Option<Value>,
        field: Option<Value>,
        expect: Option<Value>,
        contains: Option<Value>,
    },
    /// What nat POSTROUTING decides for traffic from `from` (an address or
    /// a list): masqueraded to each of `masqueraded`, its source kept to
    /// each of `kept`.
    Masquerade {
        from: Value,
        masqueraded: Option<Value>,
        kept: Option<Value>,
    },
    /// An object's status condition has the expected truth.
    Condition { condition: String, expect: bool },
    /// A Rhai function `fn NAME(ctx)` of the pack's scripts decides.
    Script { function: String },
}

impl CheckKind {
    /// Whether the kind is data, not a script's.
    pub fn is_declarative(&self) -> bool {
        !matches!(self, CheckKind::Script { .. })
    }

    pub fn name(&self) -> &'static str {
        match self {
            CheckKind::Sysctl { .. } => "sysctl",
            CheckKind::Device(_) => "device",
            CheckKind::Route { .. } => "route",
            CheckKind::Neighbour { .. } => "neighbour",
            CheckKind::Fdb { .. } => "fdb",
            CheckKind::Listener { .. } => "listener",
            CheckKind::Jump { .. } => "jump",
            CheckKind::Rule(_) => "rule",
            CheckKind::Masquerade { .. } => "masquerade",
            CheckKind::DatapathEntry { .. } => "datapath_entry",
            CheckKind::Within { .. } => "within",
            CheckKind::ReadyPod { .. } => "ready_pod",
            CheckKind::Annotation { .. } => "annotation",
            CheckKind::Condition { .. } => "condition",
            CheckKind::Script { .. } => "script",
        }
    }
}

/// What a device check wants. A `name` with `*` is a pattern: every
/// matching device must have the properties (none matching is fine).
#[derive(Debug, Clone)]
pub struct DeviceCheck {
    pub name: Value,
    pub kind: Option<Value>,
    pub mtu: Option<Value>,
    /// The least MTU the device may have (a tunnel under the pods' packets).
    pub min_mtu: Option<Value>,
    pub state: Option<DeviceState>,
    pub master: Option<Value>,
    /// An address the device holds: `IP`, or `IP/LEN` for that prefix too.
    pub address: Option<Value>,
    /// The device's own MAC (compared in any case).
    pub mac: Option<Value>,
    /// A VXLAN device's VNI, UDP port and local address.
    pub vni: Option<Value>,
    pub port: Option<Value>,
    pub local: Option<Value>,
    /// A bridge port's settings (`ip -d link`'s `info_slave_data`).
    pub hairpin: Option<Value>,
    pub learning: Option<Value>,
    pub isolated: Option<Value>,
}

/// A rule `chain` of `table` must hold: its target, text it holds
/// (`-d 10.244.0.0/16`, `! --dst-type LOCAL`) and its place among the
/// chain's rules, in the rules of the check's family (`ip_family: ipv6`:
/// ip6tables-save.txt).
#[derive(Debug, Clone)]
pub struct RuleCheck {
    /// One rule, or several (`rules:`).
    pub rules: Vec<Rule>,
    pub family: crate::net::Family,
}

/// One rule a rule check wants; a `holding` or `destination` that is a
/// list wants a rule for each.
#[derive(Debug, Clone)]
pub struct Rule {
    pub table: Value,
    pub chain: Value,
    pub target: Value,
    pub holding: Option<Value>,
    /// A network the rule's `-d` holds (a list: a rule for each).
    pub destination: Option<Value>,
    /// 1-based, or `last`.
    pub position: Option<Value>,
}

/// A chain that must send packets on to another: an iptables chain of
/// `table`, or with `family` an nftables chain of the table of that family.
#[derive(Debug, Clone)]
pub struct Jump {
    pub family: Option<Value>,
    pub table: Value,
    pub chain: Value,
    pub target: Value,
}

#[derive(Debug, Clone)]
pub struct Check {
    pub id: String,
    pub severity: Severity,
    pub scope: CheckScope,
    pub kind: CheckKind,
    /// Object scope: which objects.
    pub object: Option<ObjectKind>,
    /// Empty: every mode (and packs without modes).
    pub modes: Vec<String>,
    pub for_each: Option<ForEach>,
    /// The address family the check is about (`ip_family: ipv6`): a hop check
    /// runs only for a packet of it, and a diagnosis takes a snapshot
    /// check's finding as about its paths only when its packets are of it.
    pub family: Option<crate::net::Family>,
    /// `on: node`: a pod check's declarative kind reads the dump of the
    /// pod's node (the host end of its veth, its route there).
    pub on_node: bool,
    /// The check applies only where this holds.
    pub when: Option<Value>,
    /// What a declarative check wanted, in the pack's words; without it the
    /// kind says it (`fdb 52:04:… dev flannel.1 dst 172.18.0.12`).
    pub expected: Option<Value>,
    /// Sees `actual` and `expected` besides the scope's variables.
    pub message: Value,
    pub remediation: Option<Value>,
    pub references: Vec<String>,
    pub doc: String,
    pub pos: Pos,
}

/// A compiled script file of the pack.
#[derive(Debug, Clone)]
pub struct Script {
    /// Relative to the pack directory.
    pub file: String,
    pub source: String,
    pub ast: AST,
}

/// A loaded pack.
#[derive(Debug, Clone)]
pub struct Pack {
    pub name: String,
    pub version: Version,
    pub description: String,
    pub engine: String,
    /// The pack contract it was written for (`contract:`; without it, the
    /// first: `packs::contract`).
    pub contract: u32,
    /// Where `contract:` is written (line, column), for lint's warnings.
    pub contract_at: Option<(usize, usize)>,
    pub kind: PackKind,
    pub dir: PathBuf,
    pub builtin: bool,
    pub detect: Detection,
    pub parameters: Vec<Parameter>,
    /// The parameters as scripts see them (`params`, `ctx.params`).
    pub params: Dynamic,
    pub modes: Vec<Mode>,
    /// Hook name to the function implementing it.
    pub hooks: BTreeMap<String, ScriptFunction>,
    pub checks: Vec<Check>,
    pub scripts: Vec<Script>,
    /// What a CNI admits whatever the cluster's NetworkPolicies say
    /// (`network_policy.admits`), which the networkpolicy pack reads.
    pub policy_admits: Vec<PolicyAdmit>,
    /// The BPF programs the pack claims, and what collection asks the
    /// datapath's own tools where they are attached (`datapath:`).
    pub datapath: Option<Datapath>,
    /// The CNI packs this one is made of (`composes:`): where it applies,
    /// each of them lends only the checks named here, and this pack's hooks
    /// answer for the whole.
    pub composes: Vec<Part>,
}

/// A CNI pack a composed pack is made of, and the checks it lends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub pack: String,
    /// Check ids of the part, each whole or a prefix ending in `*`.
    pub checks: Vec<String>,
}

impl Part {
    /// Whether the part lends check `id`.
    pub fn lends(&self, id: &str) -> bool {
        self.checks.iter().any(|pattern| name_matches(pattern, id))
    }
}

/// Whether `name` is `pattern`, or starts with it where it ends in `*`.
fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// A programmable datapath a pack models: which attached programs it
/// answers for (its `datapath` hook), and the files of the datapath's state
/// collection writes where one of them is attached (`datapath/NAME.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datapath {
    /// Program names as `bpf-net.json` lists them; a trailing `*` matches
    /// any rest.
    pub programs: Vec<String>,
    pub collect: Vec<DatapathCommand>,
}

impl Datapath {
    /// Whether the pack claims a program of this name.
    pub fn claims(&self, program: &str) -> bool {
        self.programs
            .iter()
            .any(|pattern| name_matches(pattern, program))
    }
}

/// One file of a datapath's state and the read-only command that prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatapathCommand {
    /// `NAME` of `datapath/NAME.json`.
    pub file: String,
    pub command: Vec<String>,
}

/// Traffic a CNI admits beyond the NetworkPolicy API's rules: all of one
/// protocol (ICMP echo, where a CNI's chains accept it before any policy), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyAdmit {
    pub protocol: crate::net::Protocol,
    pub why: String,
}

/// A function of one of the pack's scripts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptFunction {
    /// Index into [`Pack::scripts`].
    pub script: usize,
    pub name: String,
}
