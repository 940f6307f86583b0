//! `bpftool -j net show`: the BPF programs attached to a namespace's devices
//! (XDP, and tc's ingress and egress hooks, by tcx or the clsact qdisc).
//! Where a program is attached the kernel does not decide for the packet
//! alone: the walker asks the pack that claims the program
//! (`engine/walk/datapath.rs`).
//!
//! The file is an array of one object whose `xdp` and `tc` lists name each
//! attachment. bpftool 7.3 and later list tcx attachments
//! (`"kind": "tcx/ingress"`, `"prog_id"`); older ones see only the clsact
//! qdisc's (`"kind": "clsact/ingress"`, `"id"`), so a tcx program is missing
//! from their list (`docs/snapshot.md` says which bpftool to collect with).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json::{issue, offset_in};
use crate::snapshot::problem::{LineCursor, ParseIssue, Parsed};

/// Which way a tc program sees packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Received by the device, before netfilter and routing.
    Ingress,
    /// Sent by the device, after routing and netfilter's POSTROUTING.
    Egress,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }
}

/// Where on the device a program runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hook {
    /// XDP, on the received frame before anything else (its attach mode:
    /// `driver`, `generic`, `offload`).
    Xdp { mode: Option<String> },
    /// tc, in a direction; `via` is how it is attached (`tcx`, `clsact`).
    Tc { direction: Direction, via: String },
    /// A kind this reader does not know (bpftool's own word): what it does
    /// to a packet is unknown.
    Other(String),
}

impl Hook {
    /// The direction of packets the program sees.
    pub fn direction(&self) -> Option<Direction> {
        match self {
            Hook::Xdp { .. } => Some(Direction::Ingress),
            Hook::Tc { direction, .. } => Some(*direction),
            Hook::Other(_) => None,
        }
    }

    /// As bpftool words it (`xdp`, `tcx/ingress`, `clsact/egress`).
    pub fn text(&self) -> String {
        match self {
            Hook::Xdp { mode: Some(mode) } => format!("xdp ({mode})"),
            Hook::Xdp { mode: None } => "xdp".into(),
            Hook::Tc { direction, via } => format!("{via}/{}", direction.name()),
            Hook::Other(kind) => kind.clone(),
        }
    }
}

/// One program attached to a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub device: String,
    pub ifindex: u32,
    pub hook: Hook,
    /// The program's name, or for a clsact filter the filter's name as its
    /// loader set it (Cilium's `cil_from_container-lxc1234`).
    pub name: String,
    /// The program's id in the kernel, when printed.
    pub id: Option<u32>,
}

#[derive(Deserialize)]
struct Listed {
    devname: String,
    ifindex: u32,
    /// tc's `tcx/ingress`, `clsact/egress`; absent for XDP.
    kind: Option<String>,
    /// XDP's attach mode.
    mode: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(alias = "prog_id")]
    id: Option<u32>,
}

#[derive(Deserialize)]
struct Sections<'a> {
    #[serde(default, borrow)]
    xdp: Vec<&'a RawValue>,
    #[serde(default, borrow)]
    tc: Vec<&'a RawValue>,
}

/// Reads the file, each attachment with where it starts (line, column).
pub fn parse(text: &str) -> Parsed<Vec<(Attachment, (usize, usize))>> {
    if text.trim().is_empty() {
        return (
            None,
            vec![ParseIssue::at_line(
                1,
                "empty file (bpftool prints `[{\"xdp\":[],\"tc\":[]}]` where nothing is attached)",
            )],
        );
    }
    let sections: Vec<Sections> = match serde_json::from_str(text) {
        Ok(sections) => sections,
        Err(error) => {
            return (
                None,
                vec![issue(text, 0, &error, "not bpftool's `net -j` array")],
            );
        }
    };
    let mut attachments = Vec::new();
    let mut cursor = LineCursor::default();
    let mut issues = Vec::new();
    for section in sections {
        let xdp = section.xdp.into_iter().map(|raw| (raw, true));
        let tc = section.tc.into_iter().map(|raw| (raw, false));
        for (raw, is_xdp) in xdp.chain(tc) {
            let start = offset_in(text, raw.get());
            let listed: Listed = match serde_json::from_str(raw.get()) {
                Ok(listed) => listed,
                Err(error) => {
                    issues.push(issue(text, start, &error, "an attachment"));
                    continue;
                }
            };
            let hook = if is_xdp {
                Hook::Xdp { mode: listed.mode }
            } else {
                tc_hook(listed.kind.as_deref().unwrap_or_default())
            };
            let attachment = Attachment {
                device: listed.devname,
                ifindex: listed.ifindex,
                hook,
                name: listed.name,
                id: listed.id,
            };
            attachments.push((attachment, cursor.advance(text, start)));
        }
    }
    (Some(attachments), issues)
}

/// `tcx/ingress`, `clsact/egress`, or the bare `ingress` of tc's older
/// ingress qdisc.
fn tc_hook(kind: &str) -> Hook {
    let (via, direction) = kind.rsplit_once('/').unwrap_or(("ingress", kind));
    let direction = match direction {
        "ingress" => Direction::Ingress,
        "egress" => Direction::Egress,
        _ => return Hook::Other(kind.to_string()),
    };
    Hook::Tc {
        direction,
        via: via.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clsact_and_tcx_attachments_are_read_with_their_direction() {
        let text = r#"[{"xdp":[{"devname":"eth0","ifindex":2,"mode":"generic","id":7}],"tc":[{"devname":"eth0","ifindex":2,"kind":"clsact/ingress","name":"cil_from_netdev-eth0","id":2299},{"devname":"cilium_host","ifindex":4,"kind":"tcx/egress","name":"cil_from_host","prog_id":2278,"prog_flags":[],"link_id":12}],"flow_dissector":[]}]"#;
        let (attachments, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        let attachments = attachments.expect("read");
        let hooks: Vec<(String, String, Option<u32>)> = attachments
            .iter()
            .map(|(a, _)| (a.device.clone(), a.hook.text(), a.id))
            .collect();
        assert_eq!(
            hooks,
            [
                ("eth0".into(), "xdp (generic)".into(), Some(7)),
                ("eth0".into(), "clsact/ingress".into(), Some(2299)),
                ("cilium_host".into(), "tcx/egress".into(), Some(2278)),
            ]
        );
        assert_eq!(attachments[2].0.hook.direction(), Some(Direction::Egress));
        // Each attachment is placed where it starts on bpftool's one line.
        assert_eq!(attachments[1].1, (1, 72));
    }

    #[test]
    fn an_unknown_kind_is_kept_as_unknown_and_a_bad_entry_is_an_issue() {
        let text = r#"[{"xdp":[],"tc":[{"devname":"nk0","ifindex":3,"kind":"netkit/primary","name":"p","prog_id":1},{"devname":"x"}]}]"#;
        let (attachments, issues) = parse(text);
        let attachments = attachments.expect("read");
        assert_eq!(attachments.len(), 1);
        assert_eq!(attachments[0].0.hook, Hook::Other("netkit/primary".into()));
        assert_eq!(attachments[0].0.hook.direction(), None);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(issues[0].message.contains("ifindex"), "{issues:?}");
    }

    #[test]
    fn an_empty_file_or_another_shape_is_refused() {
        assert!(parse("").0.is_none());
        let (none, issues) = parse(r#"{"tc":[]}"#);
        assert!(none.is_none());
        assert!(issues[0].message.contains("net -j"), "{issues:?}");
    }
}
