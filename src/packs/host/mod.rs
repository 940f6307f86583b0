//! The host API: the types and functions pack scripts call.
//!
//! Every function is documented with an example in `docs/packs.md` ("Host
//! API"); the tests in `tests.rs` run each of those examples, so the
//! documentation cannot drift from the code. Script integers are `i64`:
//! conversions to and from the model's `u16`/`u32` happen here, checked.
//!
//! A query whose dump file was not collected raises [`Insufficient`]: the
//! check becomes an *unknown* finding, never a guess and never a pass.
//!
//! Each room serves one thing a script asks about: `addresses` the `Ip` and
//! `Cidr` values; `packet` the packet and the hop it is at (`Packet`,
//! `Hop`); `cluster` the cluster (`Cluster`, `Node`, `Pod`), its objects
//! shown to scripts as `objects` makes them; `namespace` a network
//! namespace's dump (`Netns`: links, addresses, routes, neighbours, FDB,
//! sysctls, listeners), `netfilter` its iptables and nftables rules,
//! `datapath` the BPF programs on its devices and its datapath's maps; this
//! file the conversions they share and the check's `ctx`.

mod addresses;
mod cluster;
mod datapath;
mod json;
mod namespace;
mod netfilter;
mod objects;
mod packet;
#[cfg(test)]
mod tests;

use std::net::IpAddr;

use base64::Engine as _;
use base64::prelude::BASE64_STANDARD;
use data_encoding::BASE32;
use ipnet::IpNet;
use rhai::{Blob, Dynamic, Engine, EvalAltResult, Map, Position};
use sha1::{Digest, Sha1};
use sha2::Sha256;

use super::scope::{Context, HopScope, NetnsRef, NodeRef, Packet, PodRef};
use crate::net::Family;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::sysctl::Sysctls;

pub(super) use datapath::datapath_file;
pub use datapath::program_map;
pub use namespace::{link_is_up, link_kind, lladdr_text};
pub(super) use netfilter::masquerade_decisions;
pub use objects::{config_map_map, daemon_set_map, json_to_dynamic, service_map};

type Fallible<T> = Result<T, Box<EvalAltResult>>;

/// Raised when the snapshot cannot answer a question (a dump not collected,
/// a route lookup the model cannot decide): the check's outcome is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insufficient {
    pub reason: String,
    /// The dump file whose absence (not collected, or unreadable) is why.
    pub lacking: Option<DumpFile>,
}

impl Insufficient {
    fn raise<T>(reason: impl Into<String>) -> Fallible<T> {
        Insufficient::raise_as(Insufficient {
            reason: reason.into(),
            lacking: None,
        })
    }

    /// For want of `file`, with why it is missing as `reason`.
    fn raise_lacking<T>(reason: impl Into<String>, file: DumpFile) -> Fallible<T> {
        Insufficient::raise_as(Insufficient {
            reason: reason.into(),
            lacking: Some(file),
        })
    }

    fn raise_as<T>(insufficient: Insufficient) -> Fallible<T> {
        Err(Box::new(EvalAltResult::ErrorRuntime(
            Dynamic::from(insufficient),
            Position::NONE,
        )))
    }

    /// The one raised, when `error` (or an error it wraps) is one of these.
    pub fn in_error(error: &EvalAltResult) -> Option<Insufficient> {
        match error {
            EvalAltResult::ErrorRuntime(value, _) => value.clone().try_cast::<Insufficient>(),
            EvalAltResult::ErrorInFunctionCall(_, _, inner, _)
            | EvalAltResult::ErrorInModule(_, inner, _) => Insufficient::in_error(inner),
            _ => None,
        }
    }
}

fn fail<T>(message: impl Into<String>) -> Fallible<T> {
    Err(message.into().into())
}

fn opt<T: Into<Dynamic>>(value: Option<T>) -> Dynamic {
    value.map_or(Dynamic::UNIT, Into::into)
}

fn text(value: impl ToString) -> Dynamic {
    value.to_string().into()
}

fn int(value: impl Into<i64>) -> Dynamic {
    Dynamic::from(value.into())
}

fn map<const N: usize>(entries: [(&str, Dynamic); N]) -> Dynamic {
    let map: Map = entries
        .into_iter()
        .map(|(key, value)| (key.into(), value))
        .collect();
    map.into()
}

fn parse_ip(text: &str) -> Fallible<IpAddr> {
    text.trim()
        .parse()
        .or_else(|_| fail(format!("{text:?} is not an IP address")))
}

fn parse_cidr(text: &str) -> Fallible<IpNet> {
    text.trim()
        .parse()
        .or_else(|_| fail(format!("{text:?} is not a network in CIDR notation")))
}

/// An IP given as `Ip` or as a string.
fn as_ip(value: &Dynamic) -> Fallible<IpAddr> {
    host_value_or_text(value, "an Ip", parse_ip)
}

/// A network given as `Cidr` or as a string.
fn as_cidr(value: &Dynamic) -> Fallible<IpNet> {
    host_value_or_text(value, "a Cidr", parse_cidr)
}

/// A host value of type `T` given as itself or as text `parse` reads.
fn host_value_or_text<T: Clone + 'static>(
    value: &Dynamic,
    what: &str,
    parse: fn(&str) -> Fallible<T>,
) -> Fallible<T> {
    if let Some(found) = value.clone().try_cast::<T>() {
        return Ok(found);
    }
    match value.clone().into_immutable_string() {
        Ok(s) => parse(&s),
        Err(kind) => fail(format!("expected {what} or a string, found {kind}")),
    }
}

/// A script value as text, as the script's own `to_string` shows it:
/// `Dynamic`'s `Display` names the Rust type of host values instead.
pub fn display(value: &Dynamic) -> String {
    if let Some(ip) = value.clone().try_cast::<IpAddr>() {
        return ip.to_string();
    }
    if let Some(net) = value.clone().try_cast::<IpNet>() {
        return net.to_string();
    }
    if let Some(node) = value.clone().try_cast::<NodeRef>() {
        return format!("node/{}", node.name);
    }
    if let Some(pod) = value.clone().try_cast::<PodRef>() {
        return format!("{}/{}", pod.namespace, pod.name);
    }
    value.to_string()
}

/// Registers every type and function of the host API.
pub fn register(engine: &mut Engine) {
    addresses::register(engine);
    packet::register(engine);
    cluster::register(engine);
    namespace::register(engine);
    datapath::register(engine);
    json::register(engine);
    netfilter::register(engine);
    register_context(engine);
    engine
        .register_fn("sha1_hex", |s: &str| hex(&Sha1::digest(s.as_bytes())))
        .register_fn("sha256_hex", |s: &str| hex(&Sha256::digest(s.as_bytes())))
        .register_fn("sha256", |s: &str| -> Blob {
            Sha256::digest(s.as_bytes()).to_vec()
        })
        .register_fn("base32", |b: Blob| BASE32.encode(&b))
        .register_fn("base32", |s: &str| BASE32.encode(s.as_bytes()))
        .register_fn("base64", |b: Blob| BASE64_STANDARD.encode(&b))
        .register_fn("base64", |s: &str| BASE64_STANDARD.encode(s.as_bytes()));
    engine.register_fn("sysctl_key", sysctl_key);
    // A script's own "the snapshot cannot tell": the check (or hook) it
    // runs for is unknown for this reason, never passed.
    engine.register_fn("cannot_tell", |reason: &str| -> Fallible<Dynamic> {
        Insufficient::raise(reason)
    });
    engine
        .register_type_with_name::<Insufficient>("Insufficient")
        .register_fn("to_string", |i: &mut Insufficient| i.reason.clone());
}

/// Bytes in lowercase hexadecimal, as `sha1sum` prints a digest.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sysctl_key(family: &str, ifname: &str, setting: &str) -> Fallible<String> {
    let Some(family) = Family::from_name(family) else {
        return fail(format!("family {family:?} is neither ipv4 nor ipv6"));
    };
    Ok(Sysctls::interface_key(family, ifname, setting))
}

fn register_context(engine: &mut Engine) {
    fn absent<T>(what: &str, ctx: &Context) -> Fallible<T> {
        fail(format!("ctx.{what} is not available for {}", ctx.subject))
    }
    engine
        .register_type_with_name::<Context>("Context")
        .register_get("params", |c: &mut Context| c.params.clone())
        .register_get("cni_admits", |c: &mut Context| c.cni_admits.clone())
        .register_get("subject", |c: &mut Context| c.subject.to_string())
        .register_get("cluster", |c: &mut Context| c.cluster())
        .register_get("node", |c: &mut Context| -> Fallible<NodeRef> {
            c.node.clone().map_or_else(|| absent("node", c), Ok)
        })
        .register_get("pod", |c: &mut Context| -> Fallible<PodRef> {
            c.pod.clone().map_or_else(|| absent("pod", c), Ok)
        })
        .register_get("netns", |c: &mut Context| -> Fallible<NetnsRef> {
            c.netns.clone().map_or_else(|| absent("netns", c), Ok)
        })
        .register_get("object", |c: &mut Context| -> Fallible<Dynamic> {
            c.object.clone().map_or_else(|| absent("object", c), Ok)
        })
        .register_get("peer", |c: &mut Context| -> Fallible<NodeRef> {
            c.peer.clone().map_or_else(|| absent("peer", c), Ok)
        })
        .register_get("port", |c: &mut Context| -> Fallible<Dynamic> {
            c.port.clone().map_or_else(|| absent("port", c), Ok)
        })
        .register_get(
            "hop",
            |c: &mut Context| -> Fallible<std::sync::Arc<HopScope>> {
                c.hop.clone().map_or_else(|| absent("hop", c), Ok)
            },
        )
        .register_get("packet", |c: &mut Context| -> Fallible<Packet> {
            super::reads::record(super::reads::HopReads::PACKET);
            c.hop
                .as_ref()
                .map(|h| h.packet.clone())
                .map_or_else(|| absent("packet", c), Ok)
        });
}
