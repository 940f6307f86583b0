//! What a picture of a diagnosis shows, read from the JSON report
//! ([`Report`]) so that a picture never says what the report does not: each
//! hop's label, each link's label (its kind, its interfaces, the packet on
//! the wire, a tunnel's outer and inner packet), which paths go through a
//! link, where each path ends and how, and the findings worth a legend. DOT
//! and SVG draw the same [`Picture`].

use std::collections::HashMap;
use std::fmt;

use crate::diagnostic::Severity;
use crate::net::Family;

use super::json::{FindingOut, HopOut, LinkOut, PacketOut, Report, StepKindOut};

/// How many findings a legend names; the rest are counted.
const KEY_FINDINGS: usize = 6;

/// How a path ended, as a picture marks it: by colour, and by a sign, a
/// border and words that still tell them apart in grey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// `exits_cluster`: left the cluster, where skoop cannot follow.
    Leaves,
    /// `insufficient_info`: the snapshot cannot tell.
    Unknown,
    /// Every other disposition: the packet is stopped.
    Stopped,
}

impl Outcome {
    /// The outcome of one of the contract's dispositions (`docs/json.md`).
    pub fn of(disposition: &str) -> Outcome {
        match disposition {
            "delivered" => Outcome::Delivered,
            "exits_cluster" => Outcome::Leaves,
            "insufficient_info" => Outcome::Unknown,
            _ => Outcome::Stopped,
        }
    }

    /// The sign put before the disposition.
    pub fn sign(self) -> &'static str {
        match self {
            Outcome::Delivered => "✔",
            Outcome::Leaves => "→",
            Outcome::Unknown => "?",
            Outcome::Stopped => "✖",
        }
    }

    /// A CSS-friendly name, also used as a class in SVG and HTML.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Leaves => "leaves",
            Outcome::Unknown => "unknown",
            Outcome::Stopped => "stopped",
        }
    }
}

/// A hop as drawn.
#[derive(Debug)]
pub struct HopPicture {
    /// The hop's id (`default/web-0`, `node-1`).
    pub title: String,
    /// What it is (`pod on node-1`, `node`, `outside the cluster`) and its
    /// index in the report (`hop 3`).
    pub what: String,
    /// The node it is on.
    pub node: Option<String>,
    /// Its NAT translations and why it stops, one line each.
    pub notes: Vec<String>,
    pub assumed: bool,
    /// How it stops the packet, when a path ends here other than delivered.
    pub stop: Option<Outcome>,
}

/// Where one path ends.
#[derive(Debug)]
pub struct PathEnd {
    /// Index into the report's `paths`.
    pub path: usize,
    /// Index into the report's `hops` of its last hop.
    pub hop: usize,
    pub outcome: Outcome,
    /// `path 2 of 4 (25%)`.
    pub title: String,
    /// `✖ neighbor_failed` (with `(assumed)`).
    pub verdict: String,
}

/// A link as drawn.
#[derive(Debug)]
pub struct LinkPicture {
    pub from: usize,
    pub to: usize,
    /// `veth eth0 → veth53842afe`, then the packet (a tunnel's outer and
    /// inner one), then the paths through it.
    pub lines: Vec<String>,
}

/// Everything a picture draws.
#[derive(Debug)]
pub struct Picture {
    /// The question as resolved.
    pub request: String,
    /// `✖ neighbor_failed` for the whole diagnosis.
    pub verdict: String,
    pub outcome: Outcome,
    pub hops: Vec<HopPicture>,
    pub links: Vec<LinkPicture>,
    /// Each path's hops, indices into `hops`.
    pub paths: Vec<Vec<usize>>,
    pub ends: Vec<PathEnd>,
    /// The findings worth a legend: fatal and critical ones, each once, at
    /// most six (`KEY_FINDINGS`).
    pub key_findings: Vec<String>,
    /// `and 3 more findings` (or `2 findings, none fatal or critical`), when
    /// the legend leaves some out.
    pub more_findings: Option<String>,
    /// The findings about the nodes the flow crosses but not about its
    /// hops, counted apart: `also on these nodes: 1 finding (...)`.
    pub off_path: Option<String>,
    /// A question asked in both families draws one: the other's verdict,
    /// `IPv4: ✔ delivered (not drawn: --family ipv4 draws it)`.
    pub other_families: Vec<String>,
}

impl Picture {
    pub fn new(report: &Report) -> Picture {
        let outcome = Outcome::of(report.disposition);
        let count = report.paths.len();
        let probabilities: Vec<f64> = report.paths.iter().map(|p| p.probability).collect();
        let shares = shares(&probabilities);
        let ends: Vec<PathEnd> = report
            .paths
            .iter()
            .enumerate()
            .filter_map(|(number, path)| {
                let outcome = Outcome::of(path.disposition);
                Some(PathEnd {
                    path: number,
                    hop: *path.hops.last()?,
                    outcome,
                    title: format!(
                        "path {} of {count} ({}){}",
                        number + 1,
                        shares[number],
                        entry(report, &path.hops)
                    ),
                    verdict: format!(
                        "{} {}{}",
                        outcome.sign(),
                        path.disposition,
                        assumed_mark(path.assumed)
                    ),
                })
            })
            .collect();
        // How each hop stops the packet, and the paths through each link,
        // gathered in one pass over the paths: a diagnosis may have
        // thousands of them.
        let mut stops: Vec<Option<Outcome>> = vec![None; report.hops.len()];
        for end in ends.iter().rev() {
            if end.outcome != Outcome::Delivered
                && let Some(stop) = stops.get_mut(end.hop)
            {
                *stop = Some(end.outcome);
            }
        }
        let mut through: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
        for (number, path) in report.paths.iter().enumerate() {
            for pair in path.hops.windows(2) {
                let paths = through.entry((pair[0], pair[1])).or_default();
                if paths.last() != Some(&number) {
                    paths.push(number);
                }
            }
        }
        let hops = report
            .hops
            .iter()
            .zip(stops)
            .enumerate()
            .map(|(index, (hop, stop))| HopPicture::new(index, hop, stop))
            .collect();
        let links = report
            .links
            .iter()
            .map(|link| {
                let paths = through
                    .get(&(link.from, link.to))
                    .map_or(&[][..], Vec::as_slice);
                LinkPicture::new(link, paths, report.paths.len())
            })
            .collect();
        let mut key: Vec<&FindingOut> = Vec::new();
        for severity in ["fatal", "critical"] {
            for finding in report.findings.iter().filter(|f| f.severity == severity) {
                let seen = key
                    .iter()
                    .any(|k| k.id == finding.id && k.message == finding.message);
                if !seen && key.len() < KEY_FINDINGS {
                    key.push(finding);
                }
            }
        }
        let key_findings: Vec<String> = key
            .iter()
            .map(|f| format!("{} {} at {}: {}", f.severity, f.id, f.hop, f.message))
            .collect();
        // The family goes unsaid for an IPv4 question asked in IPv4 alone,
        // as it did before IPv6 was modelled.
        let family = &report.request.family;
        let request = if report.other_families.is_empty() && *family == Family::Ipv4.to_string() {
            report.request_text.clone()
        } else {
            format!("{family}: {}", report.request_text)
        };
        let other_families = report
            .other_families
            .iter()
            .map(|other| {
                let family = &other.request.family;
                format!(
                    "{family}: {} {}{} (not drawn: --family {} draws it)",
                    Outcome::of(other.disposition).sign(),
                    other.disposition,
                    assumed_mark(other.assumed),
                    family.to_ascii_lowercase()
                )
            })
            .collect();
        Picture {
            request,
            verdict: format!(
                "{} {}{}",
                outcome.sign(),
                report.disposition,
                assumed_mark(report.assumed)
            ),
            outcome,
            hops,
            links,
            paths: report.paths.iter().map(|path| path.hops.clone()).collect(),
            ends,
            more_findings: match (key_findings.len(), report.findings.len()) {
                (shown, all) if shown == all => None,
                (0, 1) => Some("1 finding, neither fatal nor critical".to_string()),
                (0, all) => Some(format!("{all} findings, none fatal or critical")),
                (shown, all) if all - shown == 1 => Some("and 1 more finding".to_string()),
                (shown, all) => Some(format!("and {} more findings", all - shown)),
            },
            key_findings,
            off_path: off_path_line(&report.off_path),
            other_families,
        }
    }
}

impl HopPicture {
    fn new(index: usize, hop: &HopOut, stop: Option<Outcome>) -> HopPicture {
        let what = match (hop.kind, &hop.node) {
            ("pod", Some(node)) => format!("pod on {node}"),
            ("external", _) => "outside the cluster".to_string(),
            (kind, _) => kind.to_string(),
        };
        let notes = hop
            .steps
            .iter()
            .filter_map(|step| match &step.step {
                StepKindOut::Translated { translation, .. } => Some(translation.clone()),
                StepKindOut::Stopped { reason, .. } => Some(reason.clone()),
                _ => None,
            })
            .collect();
        HopPicture {
            title: hop.id.clone(),
            what: format!("{what}{} · hop {index}", assumed_mark(hop.assumed)),
            node: hop.node.clone(),
            notes,
            assumed: hop.assumed,
            stop,
        }
    }
}

impl LinkPicture {
    /// `paths`: the paths through the link, of `count` in all.
    fn new(link: &LinkOut, paths: &[usize], count: usize) -> LinkPicture {
        let mut lines = vec![match &link.to_interface {
            Some(to) => format!("{} {} → {to}", link.kind, link.from_interface),
            None => format!("{} {}", link.kind, link.from_interface),
        }];
        let fields = &link.packet;
        match &fields.inner {
            Some(inner) => {
                lines.push(format!("outer {}", packet_text(fields)));
                lines.push(format!("inner {}", packet_text(inner)));
            }
            None => lines.push(link.packet_text.clone()),
        }
        if count > 1 && !paths.is_empty() {
            lines.push(paths_text(paths));
        }
        LinkPicture {
            from: link.from,
            to: link.to,
            lines,
        }
    }
}

/// `path 2`, `paths 1-4`, `paths 1, 3`: numbered from 1.
fn paths_text(paths: &[usize]) -> String {
    let (first, last) = (paths[0] + 1, paths[paths.len() - 1] + 1);
    if paths.len() == 1 {
        format!("path {first}")
    } else if last - first + 1 == paths.len() {
        format!("paths {first}-{last}")
    } else {
        let numbers: Vec<String> = paths.iter().map(|p| (p + 1).to_string()).collect();
        format!("paths {}", numbers.join(", "))
    }
}

/// A packet's addresses, ports and protocol from its fields, for a tunnel's
/// outer and inner packet shown apart.
fn packet_text(packet: &PacketOut) -> String {
    let endpoint = |address: &str, port: Option<u16>| match port {
        Some(port) if address.contains(':') => format!("[{address}]:{port}"),
        Some(port) => format!("{address}:{port}"),
        None => address.to_string(),
    };
    let src = packet.src.as_deref().unwrap_or("?");
    let reply = if packet.reply { " (reply)" } else { "" };
    format!(
        "{} -> {} {}{reply}",
        endpoint(src, packet.src_port),
        endpoint(&packet.dst, packet.dst_port),
        packet.protocol
    )
}

/// ` entering at NODE` for a path from a client outside the cluster.
fn entry(report: &Report, hops: &[usize]) -> String {
    match hops {
        [client, entry, ..] if report.hops[*client].kind == "external" => {
            format!(" entering at {}", report.hops[*entry].id)
        }
        _ => String::new(),
    }
}

/// What a legend says of the findings not about the flow's hops: how many,
/// and the most severe.
fn off_path_line(findings: &[FindingOut]) -> Option<String> {
    let worst = findings.iter().max_by_key(|f| severity_rank(f.severity))?;
    let count = match findings.len() {
        1 => "1 finding".to_string(),
        many => format!("{many} findings"),
    };
    Some(format!(
        "also on these nodes, not about this flow's paths: {count} ({} {} at {})",
        worst.severity, worst.id, worst.hop
    ))
}

/// How severe a finding's `severity` is, for ordering.
fn severity_rank(severity: &str) -> usize {
    Severity::ALL
        .iter()
        .position(|(name, _)| *name == severity)
        .unwrap_or(0)
}

/// A path's share of flows, in tenths of a percent: `25%`, `12.5%`, `33.4%`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Share(u32);

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 % 10 {
            0 => write!(f, "{}%", self.0 / 10),
            tenth => write!(f, "{}.{tenth}%", self.0 / 10),
        }
    }
}

impl std::iter::Sum for Share {
    fn sum<I: Iterator<Item = Share>>(shares: I) -> Share {
        Share(shares.map(|share| share.0).sum())
    }
}

/// The paths' probabilities as shares of flows that add up as the
/// probabilities do (to 100% for a whole diagnosis): each rounded down to a
/// tenth of a percent, the tenths left over given to those rounded down the
/// most (three equal paths are 33.4%, 33.3%, 33.3%; eight are 12.5% each).
pub fn shares(probabilities: &[f64]) -> Vec<Share> {
    let tenths: Vec<f64> = probabilities.iter().map(|p| p * 1000.0).collect();
    let mut shares: Vec<u32> = tenths.iter().map(|t| t.floor() as u32).collect();
    let total = tenths.iter().sum::<f64>().round() as u32;
    let mut order: Vec<usize> = (0..tenths.len()).collect();
    order.sort_by(|&a, &b| {
        let left = |i: usize| tenths[i] - tenths[i].floor();
        left(b).total_cmp(&left(a)).then(a.cmp(&b))
    });
    let short = total.saturating_sub(shares.iter().sum());
    for &index in order.iter().take(short as usize) {
        shares[index] += 1;
    }
    shares.into_iter().map(Share).collect()
}

/// What marks a verdict, path or hop concluded from a pack's intent.
pub fn assumed_mark(assumed: bool) -> &'static str {
    if assumed { " (assumed)" } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_through_a_link_are_named_compactly() {
        assert_eq!(paths_text(&[2]), "path 3");
        assert_eq!(paths_text(&[0, 1, 2, 3]), "paths 1-4");
        assert_eq!(paths_text(&[0, 2]), "paths 1, 3");
    }

    #[test]
    fn dispositions_map_to_outcomes() {
        assert_eq!(Outcome::of("delivered"), Outcome::Delivered);
        assert_eq!(Outcome::of("exits_cluster"), Outcome::Leaves);
        assert_eq!(Outcome::of("insufficient_info"), Outcome::Unknown);
        assert_eq!(Outcome::of("neighbor_failed"), Outcome::Stopped);
    }

    #[test]
    fn shares_of_flows_read_as_percentages_that_add_up_to_the_whole() {
        let text = |probabilities: &[f64]| -> Vec<String> {
            shares(probabilities)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(text(&[0.25; 4]), ["25%"; 4]);
        assert_eq!(text(&[0.125; 8]), ["12.5%"; 8]);
        assert_eq!(text(&[1.0 / 3.0; 3]), ["33.4%", "33.3%", "33.3%"]);
        assert_eq!(text(&[0.5, 0.25]), ["50%", "25%"]);
    }
}
