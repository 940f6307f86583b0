//! What the cluster's NetworkPolicies say about one connection, with the
//! semantics of the Kubernetes API (`networking.k8s.io/v1`), CNI-neutral.
//!
//! - A pod is isolated for a direction only when some policy of its
//!   namespace selects it (`podSelector`, empty = every pod) and lists that
//!   direction in its `policyTypes`. A pod no policy isolates admits all.
//! - An isolated pod admits a connection when any rule of any isolating
//!   policy does: policies are a union, and so are the rules of one policy.
//! - A rule matches when one of its peers and one of its ports do; an empty
//!   `from`/`to` is every peer, an empty `ports` every port.
//! - A peer `podSelector` alone is pods of the policy's own namespace,
//!   `namespaceSelector` alone every pod of the matching namespaces, both in
//!   one peer the pods matching both; `ipBlock` is `cidr` minus `except`.
//! - `ipBlock` and pod IPs: the API leaves it to the implementation whether
//!   an ipBlock matches pod IPs. Here it does, as the common CNIs (Calico,
//!   Cilium's default, kube-router) do.
//! - Ports: protocol (TCP unless written), a number, a range up to
//!   `endPort`, or a name resolved against the *destination* pod's
//!   container ports (for egress too).
//! - Egress is judged at the source pod with the destination after any DNAT
//!   (a service's backend); ingress at the destination pod with the source
//!   as it arrives there. Replies of an admitted connection are not judged.
//!
//! Traffic from a pod's own node (an address the node's host namespace
//! holds) is always admitted to it, as the API documents.
//!
//! Pods on the host network are not selected by policies and, as peers, are
//! only their addresses (ipBlock). What the snapshot cannot tell (a peer or
//! port the API would have refused, a namespace without its Namespace
//! object) is unknown, never a guess.

use std::fmt;
use std::net::IpAddr;

use super::model::ApiEnum as _;
use super::model::{
    NAMESPACE_NAME_LABEL, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicyRule,
    ObjectSource, Pod, PortRef, Protocol,
};
use super::selector::{LabelSelector, SelectorOperator};
use super::{Cluster, Labels};

/// A connection as NetworkPolicy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PolicyFlow {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The transport protocol and destination port; `None` for traffic
    /// without ports (ICMP), which only a rule without ports admits.
    pub transport: Option<(Protocol, u16)>,
    /// The source is the destination pod's own node (an address its host
    /// namespace holds): Kubernetes admits such traffic whatever the
    /// policies (kubelet's probes), so ingress is admitted.
    pub from_destination_node: bool,
}

/// Ingress (to a pod) or egress (from a pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }

    /// The field of a policy's spec holding this direction's rules.
    fn rules(self, policy: &NetworkPolicy) -> &[NetworkPolicyRule] {
        match self {
            Direction::Ingress => &policy.ingress,
            Direction::Egress => &policy.egress,
        }
    }

    fn isolated_by(self, policy: &NetworkPolicy) -> bool {
        match self {
            Direction::Ingress => policy.policy_types.ingress,
            Direction::Egress => policy.policy_types.egress,
        }
    }

    /// What an empty peer list of a rule admits.
    fn peers_field_meaning(self) -> &'static str {
        match self {
            Direction::Ingress => "source",
            Direction::Egress => "destination",
        }
    }

    /// The name of a rule's peer list: `from` or `to`.
    fn peers_field(self) -> &'static str {
        match self {
            Direction::Ingress => "from",
            Direction::Egress => "to",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Both directions of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyVerdict {
    /// At the destination pod.
    pub ingress: DirectionVerdict,
    /// At the source pod.
    pub egress: DirectionVerdict,
}

/// The decision for one direction at one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectionVerdict {
    pub direction: Direction,
    /// The address whose pod the direction is judged at (the destination for
    /// ingress, the source for egress).
    pub address: IpAddr,
    /// That pod, `namespace/name`; `None` when the address is no pod's (only
    /// pods are selected by policies).
    pub pod: Option<String>,
    pub verdict: Verdict,
    /// Every policy isolating the pod for this direction, and what each says.
    pub policies: Vec<PolicyDecision>,
    /// Admitted as traffic from the pod's own node, whatever the policies.
    pub from_own_node: bool,
}

/// The outcome of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No policy isolates the pod (or the address is no pod's): all is admitted.
    NotIsolated,
    /// A rule of an isolating policy admits the connection.
    Admitted,
    /// No rule of any isolating policy admits it.
    Denied,
    /// No rule admits it for sure and some cannot be evaluated.
    Unknown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NotIsolated => "not-isolated",
            Verdict::Admitted => "admitted",
            Verdict::Denied => "denied",
            Verdict::Unknown => "unknown",
        }
    }
}

/// What one isolating policy says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecision {
    /// `namespace/name`.
    pub policy: String,
    pub source: ObjectSource,
    pub outcome: PolicyOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyOutcome {
    /// The first rule that admits the connection.
    Admits(RuleMatch),
    /// Why each rule does not admit it (`spec.ingress[0]: port 8080/TCP
    /// not in [80/TCP]`); a policy without rules says so.
    Denies(Vec<String>),
    /// Why some rule cannot be evaluated, and why the others do not admit.
    Unknown(Vec<String>),
}

/// Which rule, peer and port admitted a connection (indices as in the
/// policy's spec; `None` where the rule's list is empty and so matches all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleMatch {
    pub direction: Direction,
    pub rule: usize,
    pub peer: Option<usize>,
    pub port: Option<usize>,
}

impl fmt::Display for RuleMatch {
    /// In the policy's own field paths: `spec.ingress[0].from[1], ports[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "spec.{}[{}]", self.direction, self.rule)?;
        match self.peer {
            Some(peer) => write!(f, ".{}[{peer}]", self.direction.peers_field())?,
            None => write!(f, " (every {})", self.direction.peers_field_meaning())?,
        }
        match self.port {
            Some(port) => write!(f, ", ports[{port}]"),
            None => f.write_str(", every port"),
        }
    }
}

impl DirectionVerdict {
    /// One sentence for a report: who isolates, what admits or why nothing does.
    pub fn summary(&self) -> String {
        let direction = self.direction;
        let Some(pod) = &self.pod else {
            return format!(
                "{direction}: {} is no pod's address, so no NetworkPolicy applies to it",
                self.address
            );
        };
        let names = listed(
            self.policies.iter().map(|p| p.policy.clone()),
            ", ",
            "policies",
        );
        let isolated = format!("{pod} is isolated for {direction} by {names}");
        match self.verdict {
            Verdict::NotIsolated => {
                format!(
                    "no NetworkPolicy selects {pod} for {direction}: all {direction} is admitted"
                )
            }
            Verdict::Admitted if self.from_own_node => {
                format!("{isolated}; traffic from {pod}'s own node is always admitted")
            }
            Verdict::Admitted => {
                let admitting = listed(
                    self.policies.iter().filter_map(|p| match &p.outcome {
                        PolicyOutcome::Admits(rule) => Some(format!("{} ({rule})", p.policy)),
                        _ => None,
                    }),
                    " and ",
                    "policies",
                );
                format!("{isolated}; admitted by {admitting}")
            }
            Verdict::Denied => format!("{isolated}; no rule admits it: {}", self.reasons()),
            Verdict::Unknown => format!(
                "{pod} is or may be isolated for {direction} by {names}; cannot tell: {}",
                self.reasons()
            ),
        }
    }

    /// Why the isolating policies do not admit: `policy: reason; ...`.
    pub fn reasons(&self) -> String {
        listed(
            self.policies.iter().flat_map(|p| match &p.outcome {
                PolicyOutcome::Admits(_) => Vec::new(),
                PolicyOutcome::Denies(reasons) | PolicyOutcome::Unknown(reasons) => reasons
                    .iter()
                    .map(|reason| format!("{}: {reason}", p.policy))
                    .collect(),
            }),
            "; ",
            "reasons",
        )
    }
}

/// The most items one sentence lists; [`DirectionVerdict::policies`] has
/// them all.
pub const MAX_LISTED: usize = 10;

/// `a, b, c`, or with more than [`MAX_LISTED`] items the first of them and
/// `(and 1990 more policies)`: a pod may be selected by thousands of
/// policies, and a sentence naming them all helps no one (and once broke
/// the packs' string limit).
fn listed(items: impl Iterator<Item = String>, separator: &str, what: &str) -> String {
    let mut shown = Vec::new();
    let mut more = 0usize;
    for item in items {
        if shown.len() < MAX_LISTED {
            shown.push(item);
        } else {
            more += 1;
        }
    }
    let mut text = shown.join(separator);
    if more > 0 {
        text.push_str(&format!(" (and {more} more {what})"));
    }
    text
}

/// A three-valued match that says why it failed.
enum Check<T> {
    Match(T),
    Miss(String),
    Unknown(String),
}

impl Cluster {
    /// What the NetworkPolicies say about `flow`: ingress at the destination
    /// pod, egress at the source pod.
    pub fn network_policy(&self, flow: &PolicyFlow) -> PolicyVerdict {
        super::pod_reads::record(|| super::pod_reads::PodRead::Policy(*flow));
        PolicyVerdict {
            ingress: self.direction_verdict(Direction::Ingress, flow),
            egress: self.direction_verdict(Direction::Egress, flow),
        }
    }

    fn direction_verdict(&self, direction: Direction, flow: &PolicyFlow) -> DirectionVerdict {
        let (address, peer) = match direction {
            Direction::Ingress => (flow.dst, flow.src),
            Direction::Egress => (flow.src, flow.dst),
        };
        let mut verdict = DirectionVerdict {
            direction,
            address,
            pod: None,
            verdict: Verdict::NotIsolated,
            policies: Vec::new(),
            from_own_node: false,
        };
        let Some(pod) = self.pod_at(address) else {
            return verdict;
        };
        let pod_name = format!("{}/{}", pod.meta.namespace, pod.meta.name);
        verdict.pod = Some(pod_name.clone());
        let judge = Judge {
            cluster: self,
            direction,
            peer,
            peer_pod: self.pod_at(peer),
            destination_pod: self.pod_at(flow.dst),
            flow,
        };
        verdict.policies = self
            .network_policies_in(&pod.meta.namespace)
            .filter(|policy| {
                direction.isolated_by(policy) && policy.pod_selector.matches(&pod.meta.labels)
            })
            .map(|policy| PolicyDecision {
                policy: format!("{}/{}", policy.meta.namespace, policy.meta.name),
                source: policy.meta.source.clone(),
                outcome: judge.policy(policy),
            })
            .collect();
        // A policy that could not be read may isolate the pod and deny the
        // connection: only another policy admitting it can still tell.
        verdict.policies.extend(
            self.unreadable_network_policies_in(&pod.meta.namespace)
                .map(|policy| PolicyDecision {
                    policy: format!("{}/{}", policy.meta.namespace, policy.meta.name),
                    source: policy.meta.source.clone(),
                    outcome: PolicyOutcome::Unknown(vec![format!(
                        "unreadable ({}: {}), so whether it isolates {pod_name} and what it admits is unknown",
                        policy.meta.source, policy.reason
                    )]),
                }),
        );
        let outcomes = || verdict.policies.iter().map(|p| &p.outcome);
        verdict.verdict = if verdict.policies.is_empty() {
            Verdict::NotIsolated
        } else if outcomes().any(|o| matches!(o, PolicyOutcome::Admits(_))) {
            Verdict::Admitted
        } else if outcomes().any(|o| matches!(o, PolicyOutcome::Unknown(_))) {
            Verdict::Unknown
        } else {
            Verdict::Denied
        };
        // "Traffic to and from the node where a Pod is running is always
        // allowed, regardless of the IP address of the Pod or the node."
        if direction == Direction::Ingress
            && flow.from_destination_node
            && matches!(verdict.verdict, Verdict::Denied | Verdict::Unknown)
        {
            verdict.verdict = Verdict::Admitted;
            verdict.from_own_node = true;
        }
        verdict
    }

    /// Whether namespace `name`'s labels match `selector`. Without its
    /// Namespace object only the name label is known.
    fn namespace_matches(&self, name: &str, selector: &LabelSelector) -> Check<()> {
        let missing;
        let labels = match self.namespace(name) {
            Some(namespace) => &namespace.meta.labels,
            None => {
                let other_key = selector
                    .match_labels
                    .keys()
                    .chain(selector.match_expressions.iter().map(|r| &r.key))
                    .find(|key| *key != NAMESPACE_NAME_LABEL);
                if let Some(key) = other_key {
                    return Check::Unknown(format!(
                        "the snapshot has no Namespace object {name}, so whether it has label {key} is unknown"
                    ));
                }
                missing = Labels::from([(NAMESPACE_NAME_LABEL.to_owned(), name.to_owned())]);
                &missing
            }
        };
        match mismatch(selector, labels) {
            None => Check::Match(()),
            Some(why) => Check::Miss(format!("namespace {name} {why}")),
        }
    }
}

/// Evaluates the policies of one direction of one flow.
struct Judge<'a> {
    cluster: &'a Cluster,
    direction: Direction,
    /// The other end: the source for ingress, the destination for egress.
    peer: IpAddr,
    peer_pod: Option<&'a Pod>,
    /// Named ports are resolved against it.
    destination_pod: Option<&'a Pod>,
    flow: &'a PolicyFlow,
}

impl Judge<'_> {
    fn policy(&self, policy: &NetworkPolicy) -> PolicyOutcome {
        let direction = self.direction;
        let rules = direction.rules(policy);
        if rules.is_empty() {
            return PolicyOutcome::Denies(vec![format!(
                "it has no {direction} rule, so it admits no {direction} traffic"
            )]);
        }
        let mut misses = Vec::new();
        let mut unknowns = Vec::new();
        for (index, rule) in rules.iter().enumerate() {
            let at = format!("spec.{direction}[{index}]");
            match self.rule(policy, rule) {
                Check::Match((peer, port)) => {
                    return PolicyOutcome::Admits(RuleMatch {
                        direction,
                        rule: index,
                        peer,
                        port,
                    });
                }
                Check::Miss(why) => misses.push(format!("{at}: {why}")),
                Check::Unknown(why) => unknowns.push(format!("{at}: {why}")),
            }
        }
        if unknowns.is_empty() {
            PolicyOutcome::Denies(misses)
        } else {
            unknowns.extend(misses);
            PolicyOutcome::Unknown(unknowns)
        }
    }

    /// A rule matches when a peer and a port do.
    fn rule(
        &self,
        policy: &NetworkPolicy,
        rule: &NetworkPolicyRule,
    ) -> Check<(Option<usize>, Option<usize>)> {
        let peers = any(&rule.peers, |peer| self.peer(policy, peer));
        let ports = match any(&rule.ports, |port| self.port(port)) {
            Check::Miss(_) => Check::Miss(self.port_miss(&rule.ports)),
            other => other,
        };
        both(peers, ports)
    }

    fn peer(&self, policy: &NetworkPolicy, peer: &NetworkPolicyPeer) -> Check<()> {
        let not_a_pod = || Check::Miss(format!("{} is no pod's address", self.peer));
        match peer {
            NetworkPolicyPeer::Pods(selector) => {
                let Some(pod) = self.peer_pod else {
                    return not_a_pod();
                };
                if pod.meta.namespace != policy.meta.namespace {
                    return Check::Miss(format!(
                        "pod {}/{} is not in the policy's namespace {}",
                        pod.meta.namespace, pod.meta.name, policy.meta.namespace
                    ));
                }
                pod_matches(pod, selector)
            }
            NetworkPolicyPeer::Namespaces(namespaces) => match self.peer_pod {
                Some(pod) => self
                    .cluster
                    .namespace_matches(&pod.meta.namespace, namespaces),
                None => not_a_pod(),
            },
            NetworkPolicyPeer::PodsInNamespaces { pods, namespaces } => {
                let Some(pod) = self.peer_pod else {
                    return not_a_pod();
                };
                let namespace = self
                    .cluster
                    .namespace_matches(&pod.meta.namespace, namespaces);
                match both(namespace, pod_matches(pod, pods)) {
                    Check::Match(_) => Check::Match(()),
                    Check::Miss(why) => Check::Miss(why),
                    Check::Unknown(why) => Check::Unknown(why),
                }
            }
            NetworkPolicyPeer::IpBlock { cidr, except } => {
                let ip = self.peer;
                if !cidr.contains(&ip) {
                    return Check::Miss(format!("{ip} is not in {cidr}"));
                }
                match except.iter().find(|net| net.contains(&ip)) {
                    Some(net) => Check::Miss(format!("{ip} is in except {net} of {cidr}")),
                    None => Check::Match(()),
                }
            }
            NetworkPolicyPeer::Invalid { reason } => Check::Unknown(reason.clone()),
        }
    }

    /// Whether the flow matches one port entry. A miss carries no reason of
    /// its own: `port_miss` says it once for the whole list.
    fn port(&self, port: &NetworkPolicyPort) -> Check<()> {
        let (protocol, start, end_port) = match port {
            NetworkPolicyPort::Port {
                protocol,
                port,
                end_port,
            } => (*protocol, port, *end_port),
            NetworkPolicyPort::Invalid { reason } => return Check::Unknown(reason.clone()),
        };
        let Some((flow_protocol, flow_port)) = self.flow.transport else {
            return Check::Miss(String::new());
        };
        if flow_protocol != protocol {
            return Check::Miss(String::new());
        }
        let first = match start {
            None => return Check::Match(()),
            Some(PortRef::Number(number)) => *number,
            Some(PortRef::Name(name)) => match self.named_port(name, protocol) {
                Some(number) => number,
                None => return Check::Miss(String::new()),
            },
        };
        let last = end_port.unwrap_or(first);
        if (first..=last).contains(&flow_port) {
            Check::Match(())
        } else {
            Check::Miss(String::new())
        }
    }

    /// A named port is the destination pod's container port of that name
    /// and protocol.
    fn named_port(&self, name: &str, protocol: Protocol) -> Option<u16> {
        self.destination_pod?
            .containers
            .iter()
            .flat_map(|c| &c.ports)
            .find(|p| p.name.as_deref() == Some(name) && p.protocol == protocol)
            .map(|p| p.container_port)
    }

    /// `port 8080/TCP not in [80/TCP, http/TCP (= 8081)]`.
    fn port_miss(&self, ports: &[NetworkPolicyPort]) -> String {
        let listed: Vec<String> = ports
            .iter()
            .map(|port| match port {
                NetworkPolicyPort::Port {
                    protocol,
                    port: None,
                    ..
                } => format!("any {} port", protocol.api_name()),
                NetworkPolicyPort::Port {
                    protocol,
                    port: Some(PortRef::Number(first)),
                    end_port: Some(last),
                } => format!("{first}-{last}/{}", protocol.api_name()),
                NetworkPolicyPort::Port {
                    protocol,
                    port: Some(PortRef::Number(number)),
                    end_port: None,
                } => format!("{number}/{}", protocol.api_name()),
                NetworkPolicyPort::Port {
                    protocol,
                    port: Some(PortRef::Name(name)),
                    ..
                } => {
                    let named = format!("{name}/{}", protocol.api_name());
                    match (self.destination_pod, self.named_port(name, *protocol)) {
                        (_, Some(number)) => format!("{named} (= {number})"),
                        (Some(pod), None) => format!(
                            "{named} (no such container port on {}/{})",
                            pod.meta.namespace, pod.meta.name
                        ),
                        (None, None) => format!("{named} (the destination is no pod)"),
                    }
                }
                NetworkPolicyPort::Invalid { reason } => format!("invalid port ({reason})"),
            })
            .collect();
        let traffic = match self.flow.transport {
            Some((protocol, port)) => format!("port {port}/{}", protocol.api_name()),
            None => "traffic without ports (ICMP)".to_owned(),
        };
        format!("{traffic} not in [{}]", listed.join(", "))
    }
}

/// Both must match (AND, three-valued): a known miss of either decides,
/// whatever the other cannot tell; two misses give both reasons.
fn both<A, B>(first: Check<A>, second: Check<B>) -> Check<(A, B)> {
    match (first, second) {
        (Check::Match(a), Check::Match(b)) => Check::Match((a, b)),
        (Check::Miss(a), Check::Miss(b)) => Check::Miss(format!("{a}; {b}")),
        (Check::Miss(why), _) | (_, Check::Miss(why)) => Check::Miss(why),
        (Check::Unknown(why), _) | (_, Check::Unknown(why)) => Check::Unknown(why),
    }
}

/// Any of `items` matches; an empty list matches everything (`None`). The
/// misses of every item are kept, joined.
fn any<T>(items: &[T], check: impl Fn(&T) -> Check<()>) -> Check<Option<usize>> {
    if items.is_empty() {
        return Check::Match(None);
    }
    let mut misses = Vec::new();
    let mut unknown = None;
    for (index, item) in items.iter().enumerate() {
        match check(item) {
            Check::Match(()) => return Check::Match(Some(index)),
            Check::Miss(why) => misses.push(why),
            Check::Unknown(why) => unknown = unknown.or(Some(why)),
        }
    }
    match unknown {
        Some(why) => Check::Unknown(why),
        None => Check::Miss(misses.join(", and ")),
    }
}

fn pod_matches(pod: &Pod, selector: &LabelSelector) -> Check<()> {
    match mismatch(selector, &pod.meta.labels) {
        None => Check::Match(()),
        Some(why) => Check::Miss(format!(
            "pod {}/{} {why}",
            pod.meta.namespace, pod.meta.name
        )),
    }
}

/// The first term of `selector` that `labels` fails, in words
/// (`lacks label team=a`); `None` when the selector matches.
fn mismatch(selector: &LabelSelector, labels: &Labels) -> Option<String> {
    for (key, value) in &selector.match_labels {
        match labels.get(key) {
            None => return Some(format!("lacks label {key}={value}")),
            Some(actual) if actual != value => {
                return Some(format!("has label {key}={actual}, not {key}={value}"));
            }
            Some(_) => {}
        }
    }
    let requirement = selector
        .match_expressions
        .iter()
        .find(|requirement| !requirement.matches(labels))?;
    let key = &requirement.key;
    let values: Vec<&str> = requirement.values.iter().map(String::as_str).collect();
    let values = values.join(", ");
    Some(match (requirement.operator, labels.get(key)) {
        (SelectorOperator::In, None) => format!("lacks label {key} (wanted one of {values})"),
        (SelectorOperator::In, Some(actual)) => {
            format!("has label {key}={actual}, not one of {values}")
        }
        (SelectorOperator::NotIn, actual) => format!(
            "has label {key}={}, which is excluded",
            actual.map_or("", String::as_str)
        ),
        (SelectorOperator::Exists, _) => format!("lacks label {key}"),
        (SelectorOperator::DoesNotExist, _) => format!("has label {key}, which must be absent"),
    })
}

#[cfg(test)]
#[path = "network_policy_tests.rs"]
mod tests;
