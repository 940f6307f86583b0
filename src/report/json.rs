//! The JSON contract of `skoop diagnose -o json` (`docs/json.md`): fields
//! are only ever added; `schema_version` changes when one changes meaning
//! or goes. Every value is plain data (strings, numbers, indices), built
//! from the engine's diagnosis by [`Report::new`]; `tests/json_golden.rs`
//! pins the result on every example.

use petgraph::visit::EdgeRef;
use serde::Serialize;

use crate::confirm::{Confirmation, Counted};
use crate::diagnostic::{Evidence, FindingStatus, evidence_text};
use crate::engine::{
    Diagnosis, Finding, Hop, HopKind, Link, LinkKind, PacketFields, PacketSize, Question, Step,
};
use crate::net::{Family, Protocol};
use crate::netstack::netfilter::RulesetKind;

/// The version of this contract.
pub const SCHEMA_VERSION: u32 = 2;

/// A probability is given to this many decimal places: the product of
/// `statistic` branches' shares is exact only to the float's last digits.
const PROBABILITY_DECIMALS: i32 = 6;

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    /// The question as resolved, as fields.
    pub request: RequestOut,
    /// The same question as one line of text (the text report's first).
    pub request_text: String,
    /// `delivered` only if every path is; otherwise the first path's that is not.
    pub disposition: &'static str,
    /// Some path goes through a namespace stepped over with a pack's intent.
    pub assumed: bool,
    /// The packs that applied, a CNI pack marked `(CNI)`.
    pub packs: Vec<String>,
    pub paths: Vec<PathOut>,
    pub hops: Vec<HopOut>,
    pub links: Vec<LinkOut>,
    /// The findings about the hops of the paths, the cause first.
    pub findings: Vec<FindingOut>,
    /// Findings about the nodes the flow crosses but not about its hops
    /// (their `paths` empty): they change neither `disposition` nor the
    /// exit status.
    pub off_path: Vec<FindingOut>,
    /// With `--confirm`: what the kernel did with the flow's own packets
    /// beside what the model said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<ConfirmationOut>,
    /// A dual-stack destination asked in both families: the report of the
    /// other family (this one is the destination's first address's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_families: Vec<Report>,
}

/// `--confirm`'s answer (`docs/json.md`, "Confirmation").
#[derive(Debug, Serialize)]
pub struct ConfirmationOut {
    /// What was sent, in words.
    pub probe: String,
    /// The hop it was sent from; `null` where there is none.
    pub from: Option<String>,
    /// `connected`, `refused`, `reset`, `timed_out`, `replied`,
    /// `unreachable`, `sent` or `unknown`.
    pub kernel: &'static str,
    /// What the tool said, for `unreachable` and `unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_detail: Option<String>,
    /// Whether the kernel delivered the flow; `null`: unknown.
    pub kernel_delivers: Option<bool>,
    /// `delivered`, `not_delivered`, or `some_backends`.
    pub model: &'static str,
    /// `null` where the kernel's answer is unknown.
    pub agree: Option<bool>,
    /// Why they do not agree, or what is unknown.
    pub why: Option<String>,
    /// Where the counters show the packet stopping.
    pub stopped_at: Option<String>,
    pub counters: Vec<CounterOut>,
    /// Namespaces whose counters could not be read.
    pub unread: Vec<UnreadOut>,
    /// With `--drop-reasons`, where a kernel could be traced: the drops
    /// traced during the probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops: Option<Vec<DropOut>>,
}

/// Drops of one reason at one kernel function during the probe.
#[derive(Debug, Serialize)]
pub struct DropOut {
    /// The nodes whose kernel it is.
    pub nodes: Vec<String>,
    /// The kernel's drop reason: `NETFILTER_DROP`, `NO_SOCKET`, ….
    pub reason: String,
    /// The kernel function that dropped them.
    pub function: String,
    pub packets: u64,
    /// How many were dropped in the probe tool's own process.
    pub in_probe: u64,
    pub text: String,
}

/// A counter that moved during the probe.
#[derive(Debug, Serialize)]
pub struct CounterOut {
    pub hop: String,
    /// `iptables` (ip6tables too), `nftables`, `nstat` or `conntrack`.
    pub kind: &'static str,
    pub packets: u64,
    /// The rule's dump file in the snapshot and its line (absent where the
    /// snapshot does not hold the rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// The rule as written, the SNMP counter's name, or the conntrack entry.
    pub what: String,
    /// The model's path stops at this rule.
    pub stopping: bool,
    /// The counter says the packet stops at this hop.
    pub drop: bool,
    /// The whole move in words.
    pub text: String,
}

/// A namespace whose counters could not be read.
#[derive(Debug, Serialize)]
pub struct UnreadOut {
    pub hop: String,
    pub why: String,
}

impl ConfirmationOut {
    pub fn new(confirmation: &Confirmation) -> ConfirmationOut {
        let counters = confirmation
            .counters
            .iter()
            .map(|moved| {
                let mut out = CounterOut {
                    hop: moved.hop.to_string(),
                    kind: "iptables",
                    packets: moved.packets,
                    file: None,
                    line: None,
                    table: None,
                    chain: None,
                    what: String::new(),
                    stopping: false,
                    drop: moved.is_drop(),
                    text: moved.describe(),
                };
                match &moved.counted {
                    Counted::Rule {
                        ruleset,
                        file,
                        line,
                        table,
                        chain,
                        text,
                        stopping,
                        ..
                    } => {
                        if *ruleset == RulesetKind::Nftables {
                            out.kind = "nftables";
                        }
                        out.file = file.as_ref().map(|f| f.display().to_string());
                        out.line = *line;
                        out.table = Some(table.clone());
                        out.chain = Some(chain.clone());
                        out.what = text.clone();
                        out.stopping = *stopping;
                    }
                    Counted::Nstat { name, .. } => {
                        out.kind = "nstat";
                        out.what = name.clone();
                    }
                    Counted::Conntrack { entry } => {
                        out.kind = "conntrack";
                        out.what = entry.clone();
                    }
                }
                out
            })
            .collect();
        ConfirmationOut {
            probe: confirmation.probe.clone(),
            from: confirmation.from.as_ref().map(ToString::to_string),
            kernel: confirmation.kernel.as_str(),
            kernel_detail: confirmation.kernel.detail().map(str::to_string),
            kernel_delivers: confirmation.kernel_delivers,
            model: confirmation.model.as_str(),
            agree: confirmation.agree,
            why: confirmation.why.clone(),
            stopped_at: confirmation.stopped_at.as_ref().map(ToString::to_string),
            counters,
            unread: (confirmation.unread.iter())
                .map(|(hop, why)| UnreadOut {
                    hop: hop.to_string(),
                    why: why.clone(),
                })
                .collect(),
            drops: confirmation.drops.as_ref().map(|drops| {
                (drops.iter())
                    .map(|seen| DropOut {
                        nodes: seen.nodes.clone(),
                        reason: seen.reason.clone(),
                        function: seen.function.clone(),
                        packets: seen.packets,
                        in_probe: seen.in_probe,
                        text: seen.describe(),
                    })
                    .collect()
            }),
        }
    }
}

/// The question as resolved (`docs/json.md`, "Request").
#[derive(Debug, Serialize)]
pub struct RequestOut {
    /// `--from` and `--to` as given.
    pub from: String,
    pub to: String,
    /// For a client outside the cluster: the nodes its packet arrives at.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arriving_at: Vec<String>,
    /// Absent where routing chooses it (a node's packet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    pub dst: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    pub protocol: &'static str,
    /// The family of the packet's addresses, `IPv4` or `IPv6`.
    pub family: String,
    /// With `--size`: the bytes of its packets, or `mtu`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
}

impl RequestOut {
    fn new(question: &Question) -> RequestOut {
        RequestOut {
            from: question.from.clone(),
            to: question.to.clone(),
            arriving_at: question.arriving_at.clone(),
            src: question.src.map(|src| src.to_string()),
            dst: question.dst.to_string(),
            dst_port: question.dport,
            protocol: question.protocol.as_str(),
            family: Family::of(question.dst).to_string(),
            size: question.size.map(|size| match size {
                PacketSize::Bytes(bytes) => bytes.to_string(),
                PacketSize::InterfaceMtu => "mtu".to_string(),
            }),
        }
    }
}

/// What `-o json` prints when there is no diagnosis to report (a bad
/// argument, not a snapshot): the message the command also gives on stderr.
#[derive(Debug, Serialize)]
pub struct ErrorReport {
    pub schema_version: u32,
    pub error: String,
}

impl ErrorReport {
    pub fn new(error: String) -> ErrorReport {
        ErrorReport {
            schema_version: SCHEMA_VERSION,
            error,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct PathOut {
    pub disposition: &'static str,
    pub probability: f64,
    /// Indices into `hops`.
    pub hops: Vec<usize>,
    pub assumed: bool,
    /// How the packet leaves the cluster, where the path does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitOut>,
    /// Where the path's request goes once translated (a service's backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendOut>,
}

/// The destination a path's request is delivered to, or would be.
#[derive(Debug, Serialize)]
pub struct BackendOut {
    pub address: String,
    pub port: Option<u16>,
    /// The pod (`NS/NAME`) or node (`node/NAME`) whose address it is.
    pub owner: Option<String>,
}

/// The source address a packet leaves the cluster with.
#[derive(Debug, Serialize)]
pub struct ExitOut {
    /// `null` where a masquerade chose an address the dump does not show.
    pub source: Option<String>,
    /// The outside can answer it (a node's address, not a pod's).
    pub answerable: bool,
    pub why: String,
}

#[derive(Debug, Serialize)]
pub struct HopOut {
    pub id: String,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub assumed: bool,
    pub steps: Vec<StepOut>,
    /// Indices into `findings` of the findings about this hop.
    pub findings: Vec<usize>,
}

/// A step: its `kind` and that kind's fields (`docs/json.md`).
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepKindOut {
    Sent {
        packet: String,
    },
    Received {
        interface: String,
        packet: String,
    },
    Route {
        rule: String,
        route: String,
        result: String,
    },
    Translated {
        hook: String,
        table: String,
        translation: String,
    },
    Netfilter {
        decision: String,
        table: String,
        chain: String,
        rule: String,
        /// The ruleset's dump file (`iptables-save.txt`, `nft-ruleset.json`).
        file: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        line: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        column: Option<usize>,
        /// An nftables rule's handle.
        #[serde(skip_serializing_if = "Option::is_none")]
        handle: Option<u64>,
    },
    Neighbour {
        address: String,
        interface: String,
        result: String,
    },
    Bridged {
        bridge: String,
        port: String,
    },
    Encapsulated {
        device: String,
        outer: String,
    },
    Decapsulated {
        device: String,
        inner: String,
    },
    Program {
        device: String,
        hook: String,
        program: String,
        verdict: String,
        why: String,
    },
    Delivered {
        socket: String,
    },
    Stopped {
        disposition: &'static str,
        reason: String,
    },
}

#[derive(Debug, Serialize)]
pub struct StepOut {
    #[serde(flatten)]
    pub step: StepKindOut,
    /// Concluded from a pack's intent; absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub assumed: bool,
}

#[derive(Debug, Serialize)]
pub struct LinkOut {
    pub from: usize,
    pub to: usize,
    pub kind: &'static str,
    pub from_interface: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_interface: Option<String>,
    /// The packet as it is on the wire, as fields.
    pub packet: PacketOut,
    /// The same packet as text.
    pub packet_text: String,
}

/// A packet's fields (`docs/json.md`, "Links").
#[derive(Debug, Serialize)]
pub struct PacketOut {
    /// Absent until routing chose it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    pub dst: String,
    /// `tcp`, `udp`, `icmp`, or `ipip` for an IPIP outer packet.
    pub protocol: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    /// With `--size`: its length in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u32>,
    pub reply: bool,
    /// The packet a tunnel's outer packet carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner: Option<Box<PacketOut>>,
}

impl PacketOut {
    fn new(fields: &PacketFields) -> PacketOut {
        PacketOut {
            src: fields.ip.source().map(|src| src.to_string()),
            dst: fields.ip.dst.to_string(),
            // Tunnels call protocol 4 `ipip` (`ip link add type ipip`),
            // though /etc/protocols names it `ipencap`.
            protocol: if fields.ip.protocol == Protocol::IPIP {
                "ipip"
            } else {
                fields.ip.protocol.as_str()
            },
            src_port: fields.ip.sport,
            dst_port: fields.ip.dport,
            bytes: fields.bytes,
            reply: fields.reply,
            inner: fields
                .inner
                .as_deref()
                .map(|inner| Box::new(PacketOut::new(inner))),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct FindingOut {
    pub id: String,
    pub severity: &'static str,
    /// `failed`, `unknown` (the snapshot cannot tell) or `script-error` (a
    /// pack's check failed to run).
    pub status: FindingStatus,
    pub hop: String,
    pub message: String,
    /// The places below as one line of text.
    pub evidence: String,
    /// Each place the finding rests on: `{file, line?, column?, note?}`.
    pub places: Vec<Evidence>,
    pub expected: Option<String>,
    pub remediation: Option<String>,
    /// Indices into `paths`: the paths the finding is about (see
    /// [`finding_paths`]).
    pub paths: Vec<usize>,
}

impl Report {
    pub fn new(diagnosis: &Diagnosis) -> Report {
        let graph = &diagnosis.graph;
        Report {
            schema_version: SCHEMA_VERSION,
            request: RequestOut::new(&diagnosis.request),
            request_text: diagnosis.request.to_string(),
            disposition: diagnosis.disposition().as_str(),
            assumed: diagnosis.assumed(),
            packs: diagnosis.packs.clone(),
            paths: diagnosis
                .paths
                .iter()
                .map(|path| PathOut {
                    disposition: path.disposition.as_str(),
                    probability: rounded(path.probability),
                    hops: path.hops.clone(),
                    assumed: path.assumed,
                    exit: path.exit.as_ref().map(|exit| ExitOut {
                        source: exit.source.map(|source| source.to_string()),
                        answerable: exit.answerable,
                        why: exit.why.clone(),
                    }),
                    backend: path.backend.as_ref().map(|backend| BackendOut {
                        address: backend.address.to_string(),
                        port: backend.port,
                        owner: backend.owner_name(),
                    }),
                })
                .collect(),
            hops: graph
                .node_indices()
                .map(|index| {
                    let findings = diagnosis
                        .findings
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| f.about.hop_index == index.index())
                        .map(|(i, _)| i)
                        .collect();
                    HopOut::new(&graph[index], findings)
                })
                .collect(),
            links: graph
                .edge_references()
                .map(|edge| {
                    LinkOut::new(edge.source().index(), edge.target().index(), edge.weight())
                })
                .collect(),
            findings: diagnosis
                .findings
                .iter()
                .map(|finding| FindingOut::new(finding, finding_paths(diagnosis, finding)))
                .collect(),
            off_path: diagnosis
                .off_path
                .iter()
                .map(|finding| FindingOut::new(finding, Vec::new()))
                .collect(),
            confirmation: None,
            other_families: Vec::new(),
        }
    }

    /// The report with each family's `--confirm` answer, in the order of
    /// [`Report::of_families`]: this report's first, then its
    /// `other_families`'.
    pub fn with_confirmations(mut self, confirmations: &[Option<Confirmation>]) -> Report {
        let mut confirmations = confirmations.iter();
        let mut next = || {
            confirmations
                .next()
                .and_then(|c| c.as_ref().map(ConfirmationOut::new))
        };
        self.confirmation = next();
        for other in &mut self.other_families {
            other.confirmation = next();
        }
        self
    }

    /// The report of one question asked in several families: the first's,
    /// with the others' reports in `other_families`.
    pub fn of_families<'d>(diagnoses: impl IntoIterator<Item = &'d Diagnosis>) -> Option<Report> {
        let mut diagnoses = diagnoses.into_iter();
        let mut report = Report::new(diagnoses.next()?);
        report.other_families = diagnoses.map(Report::new).collect();
        Some(report)
    }
}

impl HopOut {
    fn new(hop: &Hop, findings: Vec<usize>) -> HopOut {
        HopOut {
            id: hop.id.to_string(),
            kind: hop_kind(hop.id.kind()),
            node: hop.node.clone(),
            assumed: hop.assumed,
            steps: hop
                .steps
                .iter()
                .map(|step| StepOut {
                    step: StepKindOut::new(&step.step),
                    assumed: step.assumed,
                })
                .collect(),
            findings,
        }
    }
}

impl StepKindOut {
    fn new(step: &Step) -> StepKindOut {
        match step.clone() {
            Step::Sent { packet } => StepKindOut::Sent { packet },
            Step::Received { interface, packet } => StepKindOut::Received { interface, packet },
            Step::Route {
                rule,
                route,
                result,
            } => StepKindOut::Route {
                rule,
                route,
                result,
            },
            Step::Translated {
                hook,
                table,
                translation,
            } => StepKindOut::Translated {
                hook,
                table,
                translation,
            },
            Step::Netfilter { rule, file } => StepKindOut::Netfilter {
                decision: rule.description(),
                file: file.display().to_string(),
                line: rule.line,
                column: rule.column,
                handle: rule.handle,
                table: rule.table,
                chain: rule.chain,
                rule: rule.text,
            },
            Step::Neighbour {
                address,
                interface,
                result,
            } => StepKindOut::Neighbour {
                address: address.to_string(),
                interface,
                result,
            },
            Step::Bridged { bridge, port } => StepKindOut::Bridged { bridge, port },
            Step::Encapsulated { device, outer } => StepKindOut::Encapsulated { device, outer },
            Step::Decapsulated { device, inner } => StepKindOut::Decapsulated { device, inner },
            Step::Program {
                device,
                hook,
                program,
                verdict,
                why,
            } => StepKindOut::Program {
                device,
                hook,
                program,
                verdict,
                why,
            },
            Step::Delivered { socket } => StepKindOut::Delivered { socket },
            Step::Stopped {
                disposition,
                reason,
            } => StepKindOut::Stopped {
                disposition: disposition.as_str(),
                reason,
            },
        }
    }
}

impl LinkOut {
    fn new(from: usize, to: usize, link: &Link) -> LinkOut {
        LinkOut {
            from,
            to,
            kind: link_kind(link.kind),
            from_interface: link.from_interface.clone(),
            to_interface: link.to_interface.clone(),
            packet: PacketOut::new(&link.fields),
            packet_text: link.packet.clone(),
        }
    }
}

impl FindingOut {
    fn new(finding: &Finding, paths: Vec<usize>) -> FindingOut {
        FindingOut {
            paths,
            id: finding.id.to_string(),
            severity: finding.severity.as_str(),
            status: finding.status,
            hop: finding.about.hop.to_string(),
            message: finding.message.clone(),
            evidence: evidence_text(&finding.evidence),
            places: finding.evidence.clone(),
            expected: finding.expected.clone(),
            remediation: finding.remediation.clone(),
        }
    }
}

/// The paths (indices into `diagnosis.paths`) a finding is about: those it
/// ends, else those through the namespace it is about. The walker records a
/// stop on every path it ends; a finding that stops no path is recorded
/// once, at the first visit of its place, and is about every path through
/// that place.
pub fn finding_paths(diagnosis: &Diagnosis, finding: &Finding) -> Vec<usize> {
    let ended: Vec<usize> = (0..diagnosis.paths.len())
        .filter(|&index| diagnosis.paths[index].hops.last() == Some(&finding.about.hop_index))
        .collect();
    if !ended.is_empty() {
        return ended;
    }
    (0..diagnosis.paths.len())
        .filter(|&index| {
            diagnosis.paths[index]
                .hops
                .iter()
                .any(|&hop| diagnosis.hop(hop).id == finding.about.hop)
        })
        .collect()
}

/// A hop's `kind`.
pub fn hop_kind(kind: HopKind) -> &'static str {
    match kind {
        HopKind::Pod => "pod",
        HopKind::Node => "node",
        HopKind::External => "external",
    }
}

/// A link's `kind`.
pub fn link_kind(kind: LinkKind) -> &'static str {
    match kind {
        LinkKind::Veth => "veth",
        LinkKind::BridgePort => "bridge_port",
        LinkKind::Vxlan => "vxlan",
        LinkKind::Underlay => "underlay",
        LinkKind::UnderlayRouted => "underlay_routed",
        LinkKind::Local => "local",
        LinkKind::Outside => "outside",
    }
}

fn rounded(probability: f64) -> f64 {
    let scale = 10f64.powi(PROBABILITY_DECIMALS);
    (probability * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_are_rounded_to_six_decimals() {
        assert_eq!(rounded(0.24999999994125002), 0.25);
        assert_eq!(rounded(1.0 / 3.0), 0.333333);
        assert_eq!(rounded(1.0), 1.0);
    }
}
