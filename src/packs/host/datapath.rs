//! A programmable datapath as scripts see it: the BPF programs attached to
//! a namespace's devices (`bpf-net.json`) and what the datapath's own tools
//! print about its maps (`datapath/NAME.json`). The engine asks a pack's
//! `datapath` hook what a program does; the hook reads these.

use std::net::IpAddr;

use ipnet::IpNet;
use rhai::{Array, Dynamic, Engine};

use super::namespace::dump_part;
use super::objects::json_to_dynamic;
use super::{Fallible, Insufficient, as_ip, int, map, opt, text};
use crate::packs::scope::NetnsRef;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::bpf::Attachment;
use crate::snapshot::netns::datapath::{self, DatapathFile};

/// An attachment as scripts see it.
pub fn program_map(attachment: &Attachment) -> Dynamic {
    map([
        ("dev", text(&attachment.device)),
        ("ifindex", int(attachment.ifindex)),
        ("hook", text(attachment.hook.text())),
        (
            "direction",
            opt(attachment.hook.direction().map(|d| d.name().to_string())),
        ),
        ("name", text(&attachment.name)),
        ("id", opt(attachment.id.map(i64::from))),
    ])
}

/// The file NAME of the namespace's datapath files, or why it cannot be
/// read: not collected, or unreadable (its problem).
pub(in crate::packs) fn datapath_file<'a>(
    netns: &'a NetnsRef,
    name: &str,
) -> Fallible<&'a DatapathFile> {
    let Some(entry) = netns.entry() else {
        return Insufficient::raise(format!("no dump of {} in the snapshot", netns.id));
    };
    let files = &entry.dump().datapath;
    if let Some(file) = files.get(name) {
        return Ok(file);
    }
    let path = datapath::relative_path(name);
    match files.unreadable.get(name) {
        Some(problem) => Insufficient::raise(format!(
            "{path} of {} is in the snapshot but unreadable ({problem})",
            netns.id
        )),
        None => Insufficient::raise(format!("{path} of {} was not collected", netns.id)),
    }
}

/// The member of an object keyed by a network (`10.244.1.0/24`) or an
/// address (a host prefix) holding `ip` with the longest prefix: how an LPM
/// trie map is looked up.
fn longest_prefix(file: &DatapathFile, ip: IpAddr) -> Option<(&String, &serde_json::Value)> {
    let members = file.value.as_object()?;
    members
        .iter()
        .filter_map(|(key, value)| {
            let net = key
                .parse::<IpNet>()
                .ok()
                .or_else(|| key.parse::<IpAddr>().ok().map(IpNet::from))?;
            net.contains(&ip).then_some((net.prefix_len(), key, value))
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, key, value)| (key, value))
}

pub(super) fn register(engine: &mut Engine) {
    engine
        .register_fn("programs", |n: &mut NetnsRef| -> Fallible<Array> {
            let programs = dump_part(n, DumpFile::BpfNet, |d| d.programs.as_ref())?;
            Ok(programs.iter().map(program_map).collect())
        })
        .register_fn(
            "datapath",
            |n: &mut NetnsRef, name: &str| -> Fallible<Dynamic> {
                Ok(json_to_dynamic(&datapath_file(n, name)?.value))
            },
        )
        .register_fn(
            "datapath_get",
            |n: &mut NetnsRef, name: &str, key: &str| -> Fallible<Dynamic> {
                let file = datapath_file(n, name)?;
                Ok(opt(file
                    .value
                    .as_object()
                    .and_then(|members| members.get(key))
                    .map(json_to_dynamic)))
            },
        )
        .register_fn(
            "datapath_lpm",
            |n: &mut NetnsRef, name: &str, ip: Dynamic| -> Fallible<Dynamic> {
                let ip = as_ip(&ip)?;
                let file = datapath_file(n, name)?;
                Ok(opt(longest_prefix(file, ip).map(|(key, value)| {
                    map([("key", text(key)), ("value", json_to_dynamic(value))])
                })))
            },
        );
}
