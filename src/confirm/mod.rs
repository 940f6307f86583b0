//! The model beside the kernel (`skoop diagnose --confirm`): after a
//! diagnosis, the flow's own packets are sent from its source namespace
//! (`probe`), the counters of the namespaces its paths cross are read
//! before and after (`counters`), and what moved is set beside what the
//! model said, hop by hop.
//!
//! It runs commands through the same [`NodeShell`]s collection uses (a
//! collector pod, a `--node-exec` template), entering a pod's namespace as
//! collection does. It sends nothing but the probe and changes nothing:
//! reading counters is read-only.

pub mod counters;
mod drops;
pub mod probe;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use petgraph::graph::NodeIndex;

use crate::collect::live::LiveCollection;
use crate::collect::node::{PodOnNode, enter_pod};
use crate::collect::shell::NodeShell;
use crate::engine::{Diagnosis, Disposition, HopId, PacketSize, Step};
use crate::net::{Family, Protocol};
use crate::netstack::netfilter::{RuleRef, RulesetKind};
use crate::snapshot::netns::DumpFile;
use crate::snapshot::{NetnsId, Snapshot};
use counters::{NSTAT, Reading, RuleCount, UDP_DELIVERED, UDP_REFUSED};
pub use drops::DropsSeen;
pub use probe::{Kernel, Probe};

/// Where a node's commands run, opened when first asked for.
pub trait NodeShells {
    /// The shell of `node`; `Err` says why it cannot be reached.
    fn shell(&mut self, node: &str) -> impl Future<Output = Result<Arc<NodeShell>, String>>;
}

impl NodeShells for LiveCollection {
    async fn shell(&mut self, node: &str) -> Result<Arc<NodeShell>, String> {
        LiveCollection::shell(self, node).await
    }
}

/// A `--node-exec` template for the nodes of a snapshot, without an API
/// server: each node's address is its Node object's InternalIP.
pub struct Templated<'a> {
    pub template: &'a str,
    pub snapshot: &'a Snapshot,
}

impl NodeShells for Templated<'_> {
    async fn shell(&mut self, node: &str) -> Result<Arc<NodeShell>, String> {
        let address = (self.snapshot.cluster.node(node))
            .and_then(|node| node.internal_ip())
            .map(|ip| ip.to_string());
        NodeShell::template(self.template, node, address.as_deref())
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }
}

/// What the kernel did with the flow beside what the model said.
#[derive(Debug, Clone)]
pub struct Confirmation {
    /// What was sent, in words.
    pub probe: String,
    /// The namespace it was sent from.
    pub from: Option<HopId>,
    pub kernel: Kernel,
    /// Whether the kernel delivered the flow: the sender's answer, or for a
    /// datagram the destination's counters; `None`: unknown.
    pub kernel_delivers: Option<bool>,
    /// What the model said: some path delivers, some path does not.
    pub model: ModelSays,
    /// `None` where the kernel's answer is unknown.
    pub agree: Option<bool>,
    /// Why they do not agree, or what is left unknown, in words.
    pub why: Option<String>,
    /// The counters that moved during the probe (and the model's stopping
    /// rules, moved or not), in the paths' order.
    pub counters: Vec<CounterMove>,
    /// Where the counters show the packet stopping, when the kernel did
    /// not deliver it.
    pub stopped_at: Option<HopId>,
    /// Namespaces whose counters could not be read, and why.
    pub unread: Vec<(HopId, String)>,
    /// With `--drop-reasons`, where some kernel on the paths could be
    /// traced: the drops traced during the probe (none: empty).
    pub drops: Option<Vec<DropsSeen>>,
}

/// What the model's paths say of the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSays {
    pub some_delivered: bool,
    pub some_not_delivered: bool,
}

impl ModelSays {
    /// `delivered`, `not_delivered`, or `some_backends` where paths differ.
    pub fn as_str(self) -> &'static str {
        match (self.some_delivered, self.some_not_delivered) {
            (true, false) => "delivered",
            (true, true) => "some_backends",
            (false, _) => "not_delivered",
        }
    }
}

/// A counter that moved while the probe was sent.
#[derive(Debug, Clone)]
pub struct CounterMove {
    pub hop: HopId,
    pub counted: Counted,
    /// By how much (conntrack entries: how many).
    pub packets: u64,
}

/// What counted.
#[derive(Debug, Clone)]
pub enum Counted {
    /// An iptables rule or chain policy.
    Rule {
        /// iptables (or ip6tables) or nftables.
        ruleset: RulesetKind,
        /// The snapshot's dump file of the namespace, and the rule's line
        /// there; `None` where the snapshot does not hold the rule (it
        /// changed since, or the namespace was not collected).
        file: Option<PathBuf>,
        line: Option<usize>,
        table: String,
        chain: String,
        text: String,
        /// The model's path stops at this rule.
        stopping: bool,
        drops: bool,
    },
    /// An SNMP counter (`nstat`), and what it counts.
    Nstat {
        name: String,
        meaning: &'static str,
        drop: bool,
    },
    /// A conntrack entry of the probe, after it.
    Conntrack { entry: String },
}

impl CounterMove {
    /// The counter says the packet stops at its hop.
    pub fn is_drop(&self) -> bool {
        match &self.counted {
            Counted::Rule { drops, .. } => *drops && self.packets > 0,
            Counted::Nstat { drop, .. } => *drop,
            Counted::Conntrack { .. } => false,
        }
    }

    /// The move in words: `the rule at FILE:LINE (-A …) counted 3 packets
    /// during the probe`.
    pub fn describe(&self) -> String {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        match &self.counted {
            Counted::Rule {
                file, line, text, ..
            } => {
                let rule = match (file, line) {
                    (Some(file), Some(line)) => {
                        format!("the rule at {}:{line} ({text})", file.display())
                    }
                    _ => format!("the rule {text} (not in the snapshot)"),
                };
                match self.packets {
                    0 => format!("{rule} counted no packet during the probe"),
                    n => format!("{rule} counted {n} packet{} during the probe", plural(n)),
                }
            }
            Counted::Nstat { name, meaning, .. } => {
                format!("nstat {name} +{} ({meaning})", self.packets)
            }
            Counted::Conntrack { entry } => format!("conntrack: {entry}"),
        }
    }
}

/// The most rules said of one hop.
const MAX_RULES_PER_HOP: usize = 20;

/// A namespace the paths cross, and how to run commands in it.
struct Place {
    hop: HopId,
    netns: NetnsId,
    shell: Arc<NodeShell>,
    enter: Vec<String>,
    /// The last hop of a delivered path, or a backend: where a datagram
    /// is delivered.
    destination: bool,
}

/// Sends `diagnosis`'s flow from its source, reading the counters of the
/// namespaces its paths cross before and after (and with `drop_reasons`,
/// tracing their kernels' drops meanwhile), and sets what the kernel did
/// beside what the model says.
pub async fn confirm(
    snapshot: &Snapshot,
    diagnosis: &Diagnosis,
    shells: &mut impl NodeShells,
    drop_reasons: bool,
) -> Confirmation {
    let question = &diagnosis.request;
    let probe = Probe {
        protocol: question.protocol,
        dst: question.dst,
        dport: question.dport,
        sport: matches!(question.protocol, Protocol::Tcp | Protocol::Udp).then(source_port),
        size: sent_size(diagnosis),
    };
    let model = ModelSays {
        some_delivered: diagnosis.paths.iter().any(|p| p.succeeds()),
        some_not_delivered: diagnosis.paths.iter().any(|p| !p.succeeds()),
    };
    let (places, mut unread) = places(snapshot, diagnosis, shells).await;
    let from = diagnosis
        .paths
        .first()
        .and_then(|path| path.hops.first())
        .map(|&hop| diagnosis.hop(hop).id.clone());
    let source = from
        .as_ref()
        .and_then(|id| places.iter().find(|place| &place.hop == id));
    let family = Family::of(question.dst);
    let mut before = Vec::with_capacity(places.len());
    for place in &places {
        before.push(counters::read(&place.shell, &place.enter, family).await);
    }
    let mut traced = Vec::new();
    if drop_reasons {
        let instance = format!("skoop-{}-{}", std::process::id(), source_port());
        let (armed, failed) = drops::arm(&nodes_of(&places), family, &instance).await;
        unread.extend(failed);
        traced = armed;
    }
    let kernel = match (&from, source) {
        (_, Some(source)) => probe.send(&source.shell, &source.enter).await,
        (Some(HopId::External(_)), None) => Kernel::Unknown(
            "the flow starts outside the cluster, where skoop cannot send from".into(),
        ),
        (Some(id), None) => Kernel::Unknown(match unread.iter().find(|(hop, _)| hop == id) {
            Some((_, why)) => format!("its source {id} cannot be reached: {why}"),
            None => format!("its source {id} cannot be reached"),
        }),
        (None, None) => Kernel::Unknown("the diagnosis has no path".into()),
    };
    let mut moves = Vec::new();
    let mut delivered_at_destination = None;
    for (place, before) in places.iter().zip(&before) {
        let after = counters::read(&place.shell, &place.enter, family).await;
        for problem in after.problems.iter().chain(&before.problems) {
            let problem = (place.hop.clone(), problem.clone());
            if !unread.contains(&problem) {
                unread.push(problem);
            }
        }
        moves.extend(rule_moves(snapshot, diagnosis, place, before, &after));
        moves.extend(nstat_moves(&place.hop, before, &after));
        if place.destination && !after.nstat.is_empty() {
            let moved = |names: [&str; 2]| {
                (names.iter()).any(|name| delta(&before.nstat, &after.nstat, name) > 0)
            };
            let moved = moved(UDP_DELIVERED) && !moved(UDP_REFUSED);
            delivered_at_destination = Some(delivered_at_destination.unwrap_or(false) || moved);
        }
        match counters::conntrack(&place.shell, &place.enter, &probe).await {
            Ok(entries) => moves.extend(entries.into_iter().map(|entry| CounterMove {
                hop: place.hop.clone(),
                counted: Counted::Conntrack { entry },
                packets: 1,
            })),
            Err(why) => unread.push((place.hop.clone(), format!("conntrack -L: {why}"))),
        }
    }
    let traced_any = !traced.is_empty();
    let (drops, failed) = drops::read(traced, probe.tool()).await;
    let drops = traced_any.then_some(drops);
    unread.extend(failed);
    let kernel_delivers = match kernel {
        Kernel::Sent => delivered_at_destination,
        _ => kernel.delivers(),
    };
    let stopped_at = (kernel_delivers == Some(false))
        .then(|| moves.iter().find(|m| m.is_drop()).map(|m| m.hop.clone()))
        .flatten();
    let (agree, why) = judge(model, kernel_delivers, &kernel, &moves);
    Confirmation {
        probe: probe.describe(),
        from,
        kernel,
        kernel_delivers,
        model,
        agree,
        why,
        counters: moves,
        stopped_at,
        unread,
        drops,
    }
}

/// The nodes of `places`, each once, with its shell.
fn nodes_of(places: &[Place]) -> Vec<(String, Arc<NodeShell>)> {
    let mut nodes: Vec<(String, Arc<NodeShell>)> = Vec::new();
    for place in places {
        let node = place.netns.node();
        if !nodes.iter().any(|(seen, _)| seen == node) {
            nodes.push((node.to_string(), place.shell.clone()));
        }
    }
    nodes
}

/// How fast `matrix --confirm` sends: `jobs` flows at a time, and at most
/// `per_second` flows started a second.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub jobs: usize,
    pub per_second: f64,
}

impl Pace {
    /// When the flow at `index` may start, counted from the first's start:
    /// an even spacing, so that no burst follows a slow flow.
    fn start_of(self, index: usize) -> Duration {
        Duration::from_secs_f64(index as f64 / self.per_second)
    }
}

/// Confirms each of `diagnoses` through the `--node-exec` `template` over
/// `snapshot`'s nodes at `pace` (`matrix --confirm`), in their order;
/// `started` is told each one's index as it starts. (Drops are not traced:
/// flows sent together would see each other's.)
pub async fn confirm_each(
    snapshot: &Snapshot,
    diagnoses: &[&Diagnosis],
    template: &str,
    pace: Pace,
    started: &dyn Fn(usize),
) -> Vec<Confirmation> {
    use futures::stream::{self, StreamExt};
    let first = tokio::time::Instant::now();
    stream::iter(diagnoses.iter().enumerate())
        .map(|(index, diagnosis)| async move {
            tokio::time::sleep_until(first + pace.start_of(index)).await;
            started(index);
            let mut shells = Templated { template, snapshot };
            confirm(snapshot, diagnosis, &mut shells, false).await
        })
        .buffered(pace.jobs.max(1))
        .collect()
        .await
}

/// With `--size`, the bytes the walk sent (for `mtu`, the source's
/// interface's MTU, as the first link carries it).
fn sent_size(diagnosis: &Diagnosis) -> Option<u32> {
    match diagnosis.request.size? {
        PacketSize::Bytes(bytes) => Some(bytes),
        PacketSize::InterfaceMtu => {
            let path = diagnosis.paths.first()?;
            let (from, to) = (*path.hops.first()?, *path.hops.get(1)?);
            let edge = (diagnosis.graph).find_edge(NodeIndex::new(from), NodeIndex::new(to))?;
            diagnosis.graph[edge].fields.bytes
        }
    }
}

/// Whether the model and the kernel agree, and why not.
fn judge(
    model: ModelSays,
    kernel_delivers: Option<bool>,
    kernel: &Kernel,
    moves: &[CounterMove],
) -> (Option<bool>, Option<String>) {
    let stopping: Vec<&CounterMove> = moves
        .iter()
        .filter(|m| matches!(m.counted, Counted::Rule { stopping: true, .. }))
        .collect();
    match kernel_delivers {
        None => (
            None,
            Some(match kernel {
                Kernel::Sent => "the datagram left, but the destination's counters could not be read".into(),
                _ => "the kernel's answer is unknown, for the reason given with it".into(),
            }),
        ),
        Some(true) if model.some_delivered => (Some(true), None),
        Some(true) => (
            Some(false),
            Some("the kernel delivered the flow, but the model says it stops".into()),
        ),
        Some(false) if !model.some_not_delivered => (
            Some(false),
            Some("the model says the flow is delivered, but the kernel did not deliver it".into()),
        ),
        Some(false) if !stopping.is_empty() && stopping.iter().all(|m| m.packets == 0) => (
            Some(false),
            Some(
                "the kernel did not deliver the flow, as the model says, but not at the rule the model stops at: it counted no packet".into(),
            ),
        ),
        Some(false) => (Some(true), None),
    }
}

/// The namespaces the diagnosis's paths cross (and the backends they go
/// to), each with its shell and the words that enter it; those that cannot
/// be reached, with why.
async fn places(
    snapshot: &Snapshot,
    diagnosis: &Diagnosis,
    shells: &mut impl NodeShells,
) -> (Vec<Place>, Vec<(HopId, String)>) {
    let mut wanted: Vec<(HopId, bool)> = Vec::new();
    let mut want = |hop: &HopId, destination: bool| match wanted.iter_mut().find(|(h, _)| h == hop)
    {
        Some((_, was)) => *was |= destination,
        None => wanted.push((hop.clone(), destination)),
    };
    for path in &diagnosis.paths {
        // A delivered path's last hop is where a datagram is delivered; a
        // stopped one's is not (a node's counters count its tunnels' UDP).
        let delivered = path.disposition == Disposition::Delivered;
        for (i, &index) in path.hops.iter().enumerate() {
            want(
                &diagnosis.hop(index).id,
                delivered && i + 1 == path.hops.len(),
            );
        }
        if let Some(owner) = path.backend.as_ref().and_then(|b| b.owner.as_ref()) {
            want(owner, true);
        }
    }
    let mut places = Vec::new();
    let mut unread = Vec::new();
    for (hop, destination) in wanted {
        let netns = match &hop {
            HopId::External(_) => continue,
            HopId::Node { name } => NetnsId::Host { node: name.clone() },
            HopId::Pod { namespace, name } => match snapshot.cluster.pod(namespace, name) {
                Some(pod) if !pod.host_network => match &pod.node_name {
                    Some(node) => NetnsId::Pod {
                        node: node.clone(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                    },
                    None => {
                        unread.push((hop, "the pod is on no node".into()));
                        continue;
                    }
                },
                Some(pod) => NetnsId::Host {
                    node: pod.node_name.clone().unwrap_or_default(),
                },
                None => {
                    unread.push((hop, "the snapshot has no such pod".into()));
                    continue;
                }
            },
        };
        let shell = match shells.shell(netns.node()).await {
            Ok(shell) => shell,
            Err(why) => {
                unread.push((hop, why));
                continue;
            }
        };
        let enter = match &netns {
            NetnsId::Host { .. } => Ok(Vec::new()),
            NetnsId::Pod {
                node,
                namespace,
                name,
            } => {
                let pod = snapshot.cluster.pod(namespace, name);
                let pod = PodOnNode {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    uid: pod.map(|p| p.meta.uid.clone()).unwrap_or_default(),
                    node: node.clone(),
                    ips: (pod.into_iter())
                        .flat_map(|p| p.ips.iter().map(|ip| ip.to_string()))
                        .collect(),
                };
                enter_pod(&shell, &pod).await.map_err(|e| e.to_string())
            }
        };
        match enter {
            Ok(enter) => places.push(Place {
                hop,
                netns,
                shell,
                enter,
                destination,
            }),
            Err(why) => unread.push((hop, why)),
        }
    }
    (places, unread)
}

/// The rules of `place` that counted packets during the probe and drop
/// them, and every rule the model's paths stop at there, moved or not.
fn rule_moves(
    snapshot: &Snapshot,
    diagnosis: &Diagnosis,
    place: &Place,
    before: &Reading,
    after: &Reading,
) -> Vec<CounterMove> {
    let family = Family::of(diagnosis.request.dst);
    let stopping: Vec<&RuleRef> = diagnosis
        .graph
        .node_weights()
        .filter(|hop| hop.id == place.hop)
        .flat_map(|hop| &hop.steps)
        .filter_map(|step| match &step.step {
            Step::Netfilter { rule, .. } => Some(rule),
            _ => None,
        })
        .collect();
    let iptables_file = match family {
        Family::Ipv4 => DumpFile::IptablesSave,
        Family::Ipv6 => DumpFile::Ip6tablesSave,
    };
    let entry = snapshot.namespaces.get(&place.netns);
    let snapshot_rules = entry.and_then(|entry| match family {
        Family::Ipv4 => entry.dump().iptables.as_ref(),
        Family::Ipv6 => entry.dump().ip6tables.as_ref(),
    });
    let mut moves = Vec::new();
    for rule in &after.rules {
        let Some(was) = before.rules.iter().find(|r| same_rule(r, rule)) else {
            continue;
        };
        let packets = rule.packets.saturating_sub(was.packets);
        let is_stopping = stopping.iter().any(|s| {
            (s.ruleset == RulesetKind::Nftables) == (rule.ruleset == RulesetKind::Nftables)
                && s.table == rule.table
                && s.chain == rule.chain
                // (an nftables rule is named by its handle: its number is
                // its place in the walk's chain)
                && (rule.ruleset == RulesetKind::Nftables || s.number == rule.number)
                && s.handle == rule.handle
                && s.text == rule.text
        });
        if !(is_stopping || (rule.drops && packets > 0)) {
            continue;
        }
        let (file, line) = match rule.ruleset {
            RulesetKind::Nftables => (DumpFile::NftRuleset, nft_line(entry, rule)),
            _ => (iptables_file, iptables_line(snapshot_rules, rule)),
        };
        moves.push(CounterMove {
            hop: place.hop.clone(),
            counted: Counted::Rule {
                ruleset: rule.ruleset,
                file: entry
                    .filter(|_| line.is_some())
                    .map(|entry| entry.dir.join(file.name())),
                line,
                table: rule.table.to_string(),
                chain: rule.chain.clone(),
                text: rule.text.clone(),
                stopping: is_stopping,
                drops: rule.drops,
            },
            packets,
        });
    }
    // The model's rules first, then those that counted most: a busy node's
    // drop rules may count other traffic during the probe too.
    moves.sort_by_key(|m| {
        let stopping = matches!(m.counted, Counted::Rule { stopping: true, .. });
        (!stopping, std::cmp::Reverse(m.packets))
    });
    moves.truncate(MAX_RULES_PER_HOP);
    moves
}

/// An iptables rule's line in the snapshot's dump: at its position in its
/// chain with the same text, else anywhere in its chain; a policy's, its
/// chain's declaration.
fn iptables_line(
    ruleset: Option<&crate::snapshot::netns::iptables::Ruleset>,
    rule: &RuleCount,
) -> Option<usize> {
    let table = crate::snapshot::netns::iptables::TableName::parse(&rule.table)?;
    let chain = ruleset?.table(table)?.chain(&rule.chain)?;
    match rule.number {
        None => chain.policy.map(|_| chain.line),
        Some(number) => (chain.rules_read().iter())
            .find(|r| r.number == number && r.text.as_str() == rule.text)
            .or_else(|| (chain.rules_read().iter()).find(|r| r.text.as_str() == rule.text))
            .map(|r| r.line),
    }
}

/// An nftables rule's line in the snapshot's dump: the same handle in the
/// same table and chain, with the same text.
fn nft_line(entry: Option<&crate::snapshot::NetnsEntry>, rule: &RuleCount) -> Option<usize> {
    let ruleset = entry?.dump().nftables.as_ref()?;
    let table = ruleset
        .tables
        .iter()
        .find(|t| t.to_string() == rule.table)?;
    let chain = table.chains.iter().find(|c| c.name == rule.chain)?;
    (chain.rules.iter())
        .find(|r| r.handle == rule.handle && r.text() == rule.text)
        .map(|r| r.position.0)
}

/// The same rule in two readings: its table, chain, position and text.
fn same_rule(a: &RuleCount, b: &RuleCount) -> bool {
    a.ruleset == b.ruleset
        && a.table == b.table
        && a.chain == b.chain
        && a.number == b.number
        && a.handle == b.handle
        && a.text == b.text
}

/// The SNMP counters of [`NSTAT`] that moved.
fn nstat_moves(hop: &HopId, before: &Reading, after: &Reading) -> Vec<CounterMove> {
    NSTAT
        .iter()
        .filter_map(|&(name, drop, meaning)| {
            let packets = delta(&before.nstat, &after.nstat, name);
            (packets > 0).then(|| CounterMove {
                hop: hop.clone(),
                counted: Counted::Nstat {
                    name: name.to_string(),
                    meaning,
                    drop,
                },
                packets,
            })
        })
        .collect()
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, name: &str) -> u64 {
    match (before.get(name), after.get(name)) {
        (Some(before), Some(after)) => after.saturating_sub(*before),
        _ => 0,
    }
}

/// A source port for the probe, from the top of the ephemeral range
/// kernels do not hand out by default (`ip_local_port_range` 32768-60999):
/// random, so that a probe's conntrack entries are its own.
fn source_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    61000 + (hasher.finish() % 4000) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopping_rule(packets: u64) -> CounterMove {
        CounterMove {
            hop: HopId::node("node-1"),
            counted: Counted::Rule {
                ruleset: RulesetKind::Iptables,
                file: None,
                line: Some(12),
                table: "filter".into(),
                chain: "FORWARD".into(),
                text: "-A FORWARD -j DROP".into(),
                stopping: true,
                drops: true,
            },
            packets,
        }
    }

    #[test]
    fn flows_start_evenly_spaced_at_the_pace_asked() {
        let pace = Pace {
            jobs: 8,
            per_second: 2.0,
        };
        let starts: Vec<u128> = (0..4).map(|i| pace.start_of(i).as_millis()).collect();
        assert_eq!(starts, [0, 500, 1000, 1500]);
        let slow = Pace {
            jobs: 1,
            per_second: 0.5,
        };
        assert_eq!(slow.start_of(3), Duration::from_secs(6));
    }

    #[test]
    fn the_kernel_agrees_when_its_outcome_is_one_the_models_paths_give() {
        let delivered = ModelSays {
            some_delivered: true,
            some_not_delivered: false,
        };
        let stops = ModelSays {
            some_delivered: false,
            some_not_delivered: true,
        };
        let either = ModelSays {
            some_delivered: true,
            some_not_delivered: true,
        };
        let judged = |model, kernel: Kernel, moves: &[CounterMove]| {
            judge(model, kernel.delivers(), &kernel, moves).0
        };
        assert_eq!(judged(delivered, Kernel::Connected, &[]), Some(true));
        assert_eq!(judged(delivered, Kernel::TimedOut, &[]), Some(false));
        assert_eq!(judged(stops, Kernel::Replied, &[]), Some(false));
        assert_eq!(judged(either, Kernel::Refused, &[]), Some(true));
        assert_eq!(judged(either, Kernel::Connected, &[]), Some(true));
        // Where the model stops the flow at a rule, that rule must count it.
        let counted = [stopping_rule(2)];
        assert_eq!(judged(stops, Kernel::TimedOut, &counted), Some(true));
        let (agree, why) = judge(stops, Some(false), &Kernel::TimedOut, &[stopping_rule(0)]);
        assert_eq!(agree, Some(false));
        assert!(why.unwrap().contains("counted no packet"));
        // An answer skoop could not get is no agreement either way.
        let unknown = Kernel::Unknown("`nc` is not installed".into());
        let (agree, why) = judge(delivered, None, &unknown, &[]);
        assert_eq!(agree, None);
        assert!(why.unwrap().contains("answer is unknown"));
    }

    #[test]
    fn the_probes_source_port_is_above_the_default_ephemeral_range() {
        for _ in 0..100 {
            assert!((61000..65000).contains(&source_port()));
        }
    }
}
