//! The CNI's intent as the walker asks for it: the packs' walker hooks
//! (`docs/packs.md`, `packs::HOOKS`), called for a namespace the snapshot
//! lacks, with their answers read into typed values. An answer outside a
//! hook's contract is reported as such, never half-used.

use std::net::IpAddr;
use std::sync::Arc;

use rhai::{Dynamic, Map};

use crate::packs::contract;
use crate::packs::{self, HopScope, LoadedPacks, Pack, PodRef};
use crate::snapshot::Snapshot;
use crate::snapshot::netns::bpf;
use crate::snapshot::netns::link::MacAddr;

/// Where the CNI sends a packet from a hop (`next_hop`), by the answer's
/// `kind`. An answer without `kind` is the older `#{dev, via}`: a device
/// (either may be `()`), and `#{dev: (), via: ()}` the node's own routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NextHop {
    /// `node-routes`: not the CNI's to route; the node's own routes (its
    /// default route) take it, which only the node's dump could name.
    NodeRoutes,
    /// `peer-node`: on-link to another node of the cluster, by its name; its
    /// InternalIP is the gateway unless `via` says otherwise.
    PeerNode {
        node: String,
        dev: Option<String>,
        via: Option<IpAddr>,
    },
    /// `device`: the CNI's route, through a device (`None` when only the
    /// namespace's own dump could name it: a veth named at random), to a
    /// gateway when `via` is given.
    Device {
        dev: Option<String>,
        via: Option<IpAddr>,
    },
    /// `encapsulated`: into a tunnel, which the `encapsulation` hook
    /// describes.
    Encapsulated { dev: Option<String> },
}

/// The kinds of a `next_hop` answer, as the contract spells them.
const NEXT_HOP_KINDS: &str = "\"node-routes\", \"peer-node\", \"device\" or \"encapsulated\"";

impl NextHop {
    /// The device the CNI names, if any.
    pub fn dev(&self) -> Option<&str> {
        match self {
            NextHop::NodeRoutes => None,
            NextHop::PeerNode { dev, .. }
            | NextHop::Device { dev, .. }
            | NextHop::Encapsulated { dev } => dev.as_deref(),
        }
    }
}

/// How the CNI tunnels a packet leaving a hop (`encapsulation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Encapsulation {
    pub kind: String,
    pub dev: String,
    pub outer_src: IpAddr,
    pub outer_dst: IpAddr,
    pub port: Option<u16>,
    pub vni: Option<u32>,
    /// The inner frame's destination MAC (the remote tunnel device's), when
    /// the pack knows it.
    pub mac: Option<MacAddr>,
    /// The bytes the pack says the tunnel adds; checked by the walker
    /// against its own model of the tunnel.
    pub overhead: Option<u32>,
}

/// A service proxy's translation of a packet (`service`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceTranslation {
    /// The pack that answered.
    pub pack: String,
    pub service: String,
    pub backends: Vec<Backend>,
    /// Why these backends (or why none).
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backend {
    pub ip: IpAddr,
    pub port: u16,
    /// The proxy source-NATs the packet to the node on the way to this
    /// backend (`masquerade: true`; absent means false).
    pub masquerade: bool,
}

/// Whether the routers of the underlay route pod addresses (`underlay`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnderlayRoutes {
    /// The pack that answered.
    pub pack: String,
    pub pods: bool,
    /// Why, in the CNI's words.
    pub why: String,
}

/// The veth pair the CNI gives a pod (`pod_interface`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PodInterface {
    /// How the node's end is attached; `None` for an answer without `kind`
    /// (the older contract: bridged unless the node routes to the veth).
    pub attachment: Option<Attachment>,
    /// The node's end; `None` when the CNI names it at random.
    pub host_veth: Option<String>,
    pub pod_dev: Option<String>,
}

/// How the node's end of a pod's veth is attached (`pod_interface`'s `kind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attachment {
    /// `routed`: the node routes to the veth itself (a /32 route on it, no
    /// bridge): a point-to-point veth per pod.
    Routed,
    /// `bridged`: the veth is a port of this bridge.
    Bridged { bridge: String },
}

/// What a BPF program attached to a device does with the packet, in the
/// words of the pack that claims it (`datapath`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DatapathAnswer {
    /// The pack that answered.
    pub pack: String,
    pub verdict: DatapathVerdict,
    pub why: String,
    pub evidence: Vec<DatapathEvidence>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DatapathVerdict {
    /// The kernel's stack goes on with the packet (`TC_ACT_OK`, `XDP_PASS`).
    Pass,
    /// Dropped, for the pack's reason `id`.
    Drop { id: String },
    /// Sent to `dev` (`bpf_redirect`), the way `to` says.
    Redirect { dev: String, to: RedirectTo },
    /// Put into the collect-metadata tunnel device `dev` for `remote`.
    Encapsulate {
        dev: String,
        remote: IpAddr,
        vni: Option<u32>,
    },
    /// Service translation to one of `backends`; the program goes on with
    /// the translated packet.
    Translate {
        service: String,
        backends: Vec<ProgramBackend>,
    },
}

impl DatapathVerdict {
    /// The verdict in a step's words.
    pub fn text(&self) -> String {
        match self {
            DatapathVerdict::Pass => "passes it to the stack".into(),
            DatapathVerdict::Drop { id } => format!("drops it ({id})"),
            DatapathVerdict::Redirect { dev, to } => match to {
                RedirectTo::Egress => format!("redirects it out of {dev}"),
                RedirectTo::Peer => format!("redirects it into {dev}'s peer"),
                RedirectTo::Ingress => format!("redirects it into {dev}'s ingress"),
            },
            DatapathVerdict::Encapsulate { dev, remote, .. } => {
                format!("encapsulates it by {dev} to {remote}")
            }
            DatapathVerdict::Translate { service, backends } => {
                format!("translates {service} to {} backend(s)", backends.len())
            }
        }
    }
}

/// A backend a program translates a service to, and the source it gives
/// the packet on the way there (a pod reaching itself through its service
/// comes from another address, or its kernel would drop it as martian).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgramBackend {
    pub ip: IpAddr,
    pub port: u16,
    pub snat: Option<IpAddr>,
}

/// Where a redirect sends the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedirectTo {
    /// Out of the device (its egress).
    Egress,
    /// Into the ingress of the device's veth peer (`bpf_redirect_peer`).
    Peer,
    /// Into the device's own ingress (`BPF_F_INGRESS`).
    Ingress,
}

/// An entry of the datapath's state an answer cites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DatapathEvidence {
    /// In the namespace's dump directory.
    pub file: String,
    pub key: Option<String>,
    pub note: Option<String>,
}

/// Why a hook gave no usable answer.
#[derive(Debug, Clone)]
pub(crate) enum Undecided {
    /// The script failed, or the snapshot could not tell it what it asked:
    /// the pack's own finding.
    Pack(Box<packs::Finding>),
    /// The hook answered outside its contract.
    Malformed {
        pack: String,
        hook: &'static str,
        problem: String,
    },
}

/// The packs' hooks for one diagnosis.
pub(crate) struct Intent<'s> {
    packs: &'s LoadedPacks,
    /// The CNI pack that applies (chosen by hand, or detected): its intent
    /// stands in for namespaces the snapshot lacks.
    pub cni: Option<&'s Pack>,
    /// Every pack applying whole with a `service` hook, in load order.
    service_proxies: Vec<&'s Pack>,
    /// Every pack applying whole that claims programs (`datapath:`), in
    /// load order.
    datapaths: Vec<&'s Pack>,
}

impl<'s> Intent<'s> {
    pub fn new(snapshot: &'s Arc<Snapshot>, packs: &'s LoadedPacks) -> Intent<'s> {
        Intent {
            packs,
            cni: packs.cni(snapshot),
            service_proxies: packs
                .applying_whole(snapshot)
                .filter(|pack| pack.hooks.contains_key("service"))
                .collect(),
            datapaths: packs
                .applying_whole(snapshot)
                .filter(|pack| pack.datapath.is_some())
                .collect(),
        }
    }

    /// Calls the CNI pack's `hook`; `None` for no opinion (`()`, no such
    /// hook, or no CNI pack).
    fn call_cni(
        &self,
        hook: &'static str,
        hop: &Arc<HopScope>,
        arg: Dynamic,
    ) -> Result<Option<(&'s Pack, Map)>, Undecided> {
        let Some(pack) = self.cni else {
            return Ok(None);
        };
        call(self.packs, pack, hook, hop, arg).map(|answer| answer.map(|map| (pack, map)))
    }

    pub fn next_hop(&self, hop: &Arc<HopScope>) -> Result<Option<NextHop>, Undecided> {
        let arg = Dynamic::from(hop.packet.clone());
        let Some((pack, map)) = self.call_cni("next_hop", hop, arg)? else {
            return Ok(None);
        };
        next_hop(&Fields::new(pack, "next_hop", &map)).map(Some)
    }

    pub fn encapsulation(&self, hop: &Arc<HopScope>) -> Result<Option<Encapsulation>, Undecided> {
        let arg = Dynamic::from(hop.packet.clone());
        let Some((pack, map)) = self.call_cni("encapsulation", hop, arg)? else {
            return Ok(None);
        };
        let field = Fields::new(pack, "encapsulation", &map);
        let required_ip = |name: &str| {
            field
                .optional(ip, "an Ip", name)?
                .ok_or_else(|| field.malformed(format!("{name} is missing")))
        };
        Ok(Some(Encapsulation {
            kind: field.text("kind")?,
            dev: field.text("dev")?,
            outer_src: required_ip("outer_src")?,
            outer_dst: required_ip("outer_dst")?,
            port: field.optional(integer, "a port", "port")?,
            vni: field.optional(integer, "a VNI", "vni")?,
            mac: field.optional(|v| string(v)?.parse().ok(), "a MAC address", "mac")?,
            overhead: field.optional(integer, "a byte count", "overhead")?,
        }))
    }

    /// Whether the routers beyond a node's gateway (not in the snapshot)
    /// route the packet's pod address to its node.
    pub fn underlay(&self, hop: &Arc<HopScope>) -> Result<Option<UnderlayRoutes>, Undecided> {
        let arg = Dynamic::from(hop.packet.clone());
        let Some((pack, map)) = self.call_cni("underlay", hop, arg)? else {
            // A pack of the first contract without the hook keeps its meaning.
            let older = contract::UNDERLAY;
            return Ok(self
                .cni
                .filter(|pack| older.kept_by(pack))
                .map(|pack| UnderlayRoutes {
                    pack: pack.name.clone(),
                    pods: false,
                    why: older.why(pack),
                }));
        };
        let field = Fields::new(pack, "underlay", &map);
        let pods = field
            .optional(|value| value.as_bool().ok(), "a bool", "routes_pods")?
            .ok_or_else(|| field.malformed("routes_pods is missing".into()))?;
        Ok(Some(UnderlayRoutes {
            pack: pack.name.clone(),
            pods,
            why: field.text("why")?,
        }))
    }

    /// The first answer of a service proxy pack; `None` when no pack takes
    /// the destination for a service address.
    pub fn service(&self, hop: &Arc<HopScope>) -> Result<Option<ServiceTranslation>, Undecided> {
        for pack in &self.service_proxies {
            let arg = Dynamic::from(hop.packet.clone());
            let Some(map) = call(self.packs, pack, "service", hop, arg)? else {
                continue;
            };
            let field = Fields::new(pack, "service", &map);
            let backends = each_backend(&field, |inner| {
                let masquerade = inner
                    .optional(|value| value.as_bool().ok(), "a bool", "masquerade")?
                    .unwrap_or(false);
                let (ip, port) = ip_and_port(&field, inner)?;
                Ok(Backend {
                    ip,
                    port,
                    masquerade,
                })
            })?;
            return Ok(Some(ServiceTranslation {
                pack: pack.name.clone(),
                service: field.text("service")?,
                backends,
                why: field.text("why")?,
            }));
        }
        Ok(None)
    }

    /// What the attached `program` does with the hop's packet: the first
    /// pack that claims it by name and answers; `None` when none does.
    pub fn datapath(
        &self,
        hop: &Arc<HopScope>,
        program: &bpf::Attachment,
    ) -> Result<Option<DatapathAnswer>, Undecided> {
        let claiming = self.datapaths.iter().filter(|pack| {
            pack.datapath
                .as_ref()
                .is_some_and(|datapath| datapath.claims(&program.name))
        });
        for pack in claiming {
            let arg = packs::program_map(program);
            let Some(map) = call(self.packs, pack, "datapath", hop, arg)? else {
                continue;
            };
            return datapath(&Fields::new(pack, "datapath", &map)).map(Some);
        }
        Ok(None)
    }

    /// Whether some pack models programmable datapaths: then a dump that
    /// does not say which programs are attached leaves them unknown.
    pub fn models_datapaths(&self) -> bool {
        !self.datapaths.is_empty()
    }

    /// Whether the CNI source-NATs the packet to the node's address.
    pub fn masquerade(&self, hop: &Arc<HopScope>) -> Result<bool, Undecided> {
        let Some(pack) = self.cni else {
            return Ok(false);
        };
        let arg = Dynamic::from(hop.packet.clone());
        let answer = call_raw(self.packs, pack, "masquerade", hop, arg)?;
        if answer.is_unit() {
            return Ok(false);
        }
        answer.as_bool().map_err(|kind| Undecided::Malformed {
            pack: pack.name.clone(),
            hook: "masquerade",
            problem: format!("it must return a bool, not {kind}"),
        })
    }

    pub fn pod_interface(
        &self,
        hop: &Arc<HopScope>,
        pod: PodRef,
    ) -> Result<PodInterface, Undecided> {
        let Some((pack, map)) = self.call_cni("pod_interface", hop, Dynamic::from(pod))? else {
            return Ok(PodInterface::default());
        };
        pod_interface(&Fields::new(pack, "pod_interface", &map))
    }
}

/// A `next_hop` answer read by its `kind` (see [`NextHop`]).
fn next_hop(field: &Fields) -> Result<NextHop, Undecided> {
    let dev = field.optional(string, "a String", "dev")?;
    let via = field.optional(ip, "an Ip", "via")?;
    let Some(kind) = field.optional(string, "a String", "kind")? else {
        return Ok(match (dev, via) {
            (None, None) => NextHop::NodeRoutes,
            (dev, via) => NextHop::Device { dev, via },
        });
    };
    match kind.as_str() {
        "node-routes" => match (&dev, via) {
            (None, None) => Ok(NextHop::NodeRoutes),
            _ => Err(field.malformed(
                "kind \"node-routes\" takes neither dev nor via: the node's own routes choose them (say kind \"device\" to name them)".into(),
            )),
        },
        "peer-node" => Ok(NextHop::PeerNode {
            node: field.text("node")?,
            dev,
            via,
        }),
        "device" => Ok(NextHop::Device { dev, via }),
        "encapsulated" => match via {
            None => Ok(NextHop::Encapsulated { dev }),
            Some(_) => Err(field.malformed(
                "kind \"encapsulated\" takes no via: the encapsulation hook gives the tunnel's far end".into(),
            )),
        },
        other => Err(field.malformed(format!(
            "kind is {other:?}; it must be {NEXT_HOP_KINDS}"
        ))),
    }
}

/// A `datapath` answer read by its `verdict` (see [`DatapathVerdict`]).
fn datapath(field: &Fields) -> Result<DatapathAnswer, Undecided> {
    let verdict = match field.text("verdict")?.as_str() {
        "pass" => DatapathVerdict::Pass,
        "drop" => DatapathVerdict::Drop {
            id: field.text("id")?,
        },
        "redirect" => {
            let to = match field.optional(string, "a String", "to")?.as_deref() {
                None | Some("egress") => RedirectTo::Egress,
                Some("peer") => RedirectTo::Peer,
                Some("ingress") => RedirectTo::Ingress,
                Some(other) => {
                    return Err(field.malformed(format!(
                        "to is {other:?}; it must be \"egress\", \"peer\" or \"ingress\""
                    )));
                }
            };
            DatapathVerdict::Redirect {
                dev: field.text("dev")?,
                to,
            }
        }
        "encapsulate" => DatapathVerdict::Encapsulate {
            dev: field.text("dev")?,
            remote: field
                .optional(ip, "an Ip", "remote")?
                .ok_or_else(|| field.malformed("remote is missing".into()))?,
            vni: field.optional(integer, "a VNI", "vni")?,
        },
        "translate" => {
            let backends = each_backend(field, |inner| {
                let snat = inner.optional(ip, "an Ip", "snat")?;
                let (ip, port) = ip_and_port(field, inner)?;
                Ok(ProgramBackend { ip, port, snat })
            })?;
            DatapathVerdict::Translate {
                service: field.text("service")?,
                backends,
            }
        }
        other => {
            return Err(field.malformed(format!(
                "verdict is {other:?}; it must be \"pass\", \"drop\", \"redirect\", \"encapsulate\" or \"translate\""
            )));
        }
    };
    let evidence = match field.map.get("evidence") {
        None => Vec::new(),
        Some(value) if value.is_unit() => Vec::new(),
        Some(value) => {
            let Some(items) = value.clone().try_cast::<Vec<Dynamic>>() else {
                return Err(field.malformed("evidence must be an array".into()));
            };
            items
                .iter()
                .map(|item| {
                    let Some(item) = item.clone().try_cast::<Map>() else {
                        return Err(field.malformed("each evidence must be a map".into()));
                    };
                    let inner = Fields::new(field.pack, "datapath", &item);
                    Ok(DatapathEvidence {
                        file: inner.text("file")?,
                        key: inner.optional(string, "a String", "key")?,
                        note: inner.optional(string, "a String", "note")?,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    Ok(DatapathAnswer {
        pack: field.pack.name.clone(),
        verdict,
        why: field.text("why")?,
        evidence,
    })
}

/// Each map of the answer's `backends` array, read by `read`.
fn each_backend<T>(
    field: &Fields,
    read: impl Fn(&Fields) -> Result<T, Undecided>,
) -> Result<Vec<T>, Undecided> {
    let Some(backends) = field
        .map
        .get("backends")
        .and_then(|b| b.clone().try_cast::<Vec<Dynamic>>())
    else {
        return Err(field.malformed("backends must be an array".into()));
    };
    backends
        .iter()
        .map(|backend| {
            let Some(backend) = backend.clone().try_cast::<Map>() else {
                return Err(field.malformed("each backend must be a map".into()));
            };
            read(&Fields::new(field.pack, field.hook, &backend))
        })
        .collect()
}

/// A backend's `ip` and `port`, both required.
fn ip_and_port(field: &Fields, inner: &Fields) -> Result<(IpAddr, u16), Undecided> {
    match (
        inner.optional(ip, "an Ip", "ip")?,
        inner.optional(integer, "a port", "port")?,
    ) {
        (Some(ip), Some(port)) => Ok((ip, port)),
        _ => Err(field.malformed("each backend needs an ip and a port".into())),
    }
}

/// A `pod_interface` answer read by its `kind` (see [`Attachment`]).
fn pod_interface(field: &Fields) -> Result<PodInterface, Undecided> {
    let attachment = match field.optional(string, "a String", "kind")?.as_deref() {
        None => {
            if field.map.contains_key("bridge") {
                return Err(
                    field.malformed("bridge is given without kind: say kind \"bridged\"".into())
                );
            }
            None
        }
        Some("routed") => match field.optional(string, "a String", "bridge")? {
            None => Some(Attachment::Routed),
            Some(bridge) => {
                return Err(field.malformed(format!(
                    "kind \"routed\" has no bridge, but bridge is {bridge:?}"
                )));
            }
        },
        Some("bridged") => Some(Attachment::Bridged {
            bridge: field.text("bridge")?,
        }),
        Some(other) => {
            return Err(field.malformed(format!(
                "kind is {other:?}; it must be \"routed\" or \"bridged\""
            )));
        }
    };
    Ok(PodInterface {
        attachment,
        host_veth: field.optional(string, "a String", "host_veth")?,
        pod_dev: field.optional(string, "a String", "pod_dev")?,
    })
}

fn call_raw(
    packs: &LoadedPacks,
    pack: &Pack,
    hook: &'static str,
    hop: &Arc<HopScope>,
    arg: Dynamic,
) -> Result<Dynamic, Undecided> {
    packs
        .call_hook(&pack.name, hook, hop, arg)
        .map_err(Undecided::Pack)
}

/// A hook's answer as a map; `None` for `()`.
fn call(
    packs: &LoadedPacks,
    pack: &Pack,
    hook: &'static str,
    hop: &Arc<HopScope>,
    arg: Dynamic,
) -> Result<Option<Map>, Undecided> {
    let answer = call_raw(packs, pack, hook, hop, arg)?;
    if answer.is_unit() {
        return Ok(None);
    }
    let kind = answer.type_name();
    answer
        .try_cast::<Map>()
        .map(Some)
        .ok_or_else(|| Undecided::Malformed {
            pack: pack.name.clone(),
            hook,
            problem: format!("it must return a map or (), not {kind}"),
        })
}

/// The fields of one hook answer, read with errors that name the hook.
struct Fields<'a> {
    pack: &'a Pack,
    hook: &'static str,
    map: &'a Map,
}

impl<'a> Fields<'a> {
    fn new(pack: &'a Pack, hook: &'static str, map: &'a Map) -> Fields<'a> {
        Fields { pack, hook, map }
    }

    fn malformed(&self, problem: String) -> Undecided {
        Undecided::Malformed {
            pack: self.pack.name.clone(),
            hook: self.hook,
            problem,
        }
    }

    /// A field that may be absent or `()`; present, it must convert.
    fn optional<T>(
        &self,
        convert: impl Fn(&Dynamic) -> Option<T>,
        what: &str,
        name: &str,
    ) -> Result<Option<T>, Undecided> {
        match self.map.get(name) {
            None => Ok(None),
            Some(value) if value.is_unit() => Ok(None),
            Some(value) => convert(value).map(Some).ok_or_else(|| {
                self.malformed(format!(
                    "{name} must be {what}, not {}",
                    packs::display(value)
                ))
            }),
        }
    }

    fn text(&self, name: &str) -> Result<String, Undecided> {
        self.optional(string, "a String", name)?
            .ok_or_else(|| self.malformed(format!("{name} is missing")))
    }
}

fn string(value: &Dynamic) -> Option<String> {
    value.clone().into_string().ok()
}

/// An `Ip` value, or text that parses as one.
fn ip(value: &Dynamic) -> Option<IpAddr> {
    value
        .clone()
        .try_cast::<IpAddr>()
        .or_else(|| string(value)?.parse().ok())
}

fn integer<T: TryFrom<i64>>(value: &Dynamic) -> Option<T> {
    T::try_from(value.as_int().ok()?).ok()
}

/// The packs of a test: one CNI pack, chosen by hand, whose `next_hop` and
/// `pod_interface` hooks are the functions of `script`.
#[cfg(test)]
pub(crate) fn answering_pack(script: &str) -> LoadedPacks {
    use std::collections::BTreeMap;
    let manifest = "name: answers\nversion: 0.1.0\ndescription: Hook answers.\n\
         engine: \">=0.1.0\"\nkind: cni\ndetect: {node_annotations: [answers]}\n\
         hooks: {next_hop: next_hop, pod_interface: pod_interface}\n";
    let source = packs::PackSource {
        dir: "answers".into(),
        builtin: false,
        files: BTreeMap::from([
            ("pack.yaml".to_string(), manifest.to_string()),
            ("hooks.rhai".to_string(), script.to_string()),
        ]),
    };
    let (mut packs, problems) = LoadedPacks::load(vec![source], &[]);
    assert!(problems.is_empty(), "{problems:?}");
    packs.choose_cni("answers").expect("the pack is a CNI pack");
    packs
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::net::Protocol;
    use crate::packs::Packet;
    use crate::snapshot::NetnsId;

    /// A CNI pack whose `next_hop` and `pod_interface` answer `answer`,
    /// asked at node-1 of the bundled Flannel example.
    fn ask<R>(answer: &str, hook: impl FnOnce(&Intent, &Arc<HopScope>) -> R) -> R {
        let packs = answering_pack(&format!(
            "fn next_hop(ctx, packet) {{ {answer} }}\nfn pod_interface(ctx, pod) {{ {answer} }}\n"
        ));
        let (snapshot, _) = Snapshot::load(Path::new("examples/flannel-vxlan")).expect("loads");
        let snapshot = Arc::new(snapshot);
        let packet = Packet {
            sport: Some(40000),
            dport: Some(8080),
            length: 60,
            ..Packet::new(
                "10.244.1.2".parse().unwrap(),
                "10.244.2.2".parse().unwrap(),
                Protocol::Tcp,
            )
        };
        let node = NetnsId::Host {
            node: "node-1".into(),
        };
        let hop = Arc::new(HopScope::new(snapshot.clone(), node, packet));
        hook(&Intent::new(&snapshot, &packs), &hop)
    }

    fn next_hop(answer: &str) -> Result<Option<NextHop>, String> {
        ask(answer, |intent, hop| intent.next_hop(hop)).map_err(problem)
    }

    fn pod_interface(answer: &str) -> Result<PodInterface, String> {
        ask(answer, |intent, hop| {
            let pod = PodRef::new(&hop.snapshot, "default", "web-0").expect("web-0");
            intent.pod_interface(hop, pod)
        })
        .map_err(problem)
    }

    fn problem(undecided: Undecided) -> String {
        match undecided {
            Undecided::Malformed { problem, .. } => problem,
            Undecided::Pack(finding) => panic!("the script failed: {}", finding.message),
        }
    }

    #[test]
    fn next_hop_by_the_nodes_own_routes() {
        assert_eq!(
            next_hop(r#"#{kind: "node-routes"}"#),
            Ok(Some(NextHop::NodeRoutes))
        );
        let refused = next_hop(r#"#{kind: "node-routes", dev: "eth0"}"#).unwrap_err();
        assert!(refused.contains("say kind \"device\""), "{refused}");
    }

    #[test]
    fn next_hop_on_link_to_a_peer_node() {
        assert_eq!(
            next_hop(r#"#{kind: "peer-node", node: "node-2", dev: "eth0"}"#),
            Ok(Some(NextHop::PeerNode {
                node: "node-2".into(),
                dev: Some("eth0".into()),
                via: None,
            }))
        );
        let refused = next_hop(r#"#{kind: "peer-node"}"#).unwrap_err();
        assert_eq!(refused, "node is missing");
    }

    #[test]
    fn next_hop_through_a_device() {
        assert_eq!(
            next_hop(r#"#{kind: "device", dev: "cni0", via: ip("10.244.1.1")}"#),
            Ok(Some(NextHop::Device {
                dev: Some("cni0".into()),
                via: "10.244.1.1".parse().ok(),
            }))
        );
        // The CNI's own route through a device it cannot name (a pod's veth,
        // named at random).
        assert_eq!(
            next_hop(r#"#{kind: "device"}"#),
            Ok(Some(NextHop::Device {
                dev: None,
                via: None
            }))
        );
    }

    #[test]
    fn next_hop_into_a_tunnel() {
        assert_eq!(
            next_hop(r#"#{kind: "encapsulated", dev: "flannel.1"}"#),
            Ok(Some(NextHop::Encapsulated {
                dev: Some("flannel.1".into())
            }))
        );
        let refused = next_hop(r#"#{kind: "encapsulated", via: "172.18.0.12"}"#).unwrap_err();
        assert!(refused.contains("takes no via"), "{refused}");
    }

    #[test]
    fn next_hop_in_the_older_shape_keeps_its_meaning() {
        assert_eq!(
            next_hop(r#"#{dev: "cni0", via: ()}"#),
            Ok(Some(NextHop::Device {
                dev: Some("cni0".into()),
                via: None
            }))
        );
        assert_eq!(
            next_hop(r#"#{dev: (), via: "172.18.0.12"}"#),
            Ok(Some(NextHop::Device {
                dev: None,
                via: "172.18.0.12".parse().ok()
            }))
        );
        // What worked by accident is now said: the node's own routes.
        assert_eq!(
            next_hop(r#"#{dev: (), via: ()}"#),
            Ok(Some(NextHop::NodeRoutes))
        );
        assert_eq!(next_hop("()"), Ok(None));
    }

    #[test]
    fn next_hop_of_an_unknown_kind_lists_the_kinds() {
        let refused = next_hop(r#"#{kind: "gateway", via: "10.0.0.1"}"#).unwrap_err();
        assert_eq!(
            refused,
            r#"kind is "gateway"; it must be "node-routes", "peer-node", "device" or "encapsulated""#
        );
    }

    #[test]
    fn pod_interface_routed_or_bridged() {
        let routed = pod_interface(r#"#{kind: "routed", pod_dev: "eth0", mtu: 1500}"#).unwrap();
        assert_eq!(routed.attachment, Some(Attachment::Routed));
        assert_eq!(routed.host_veth, None);
        assert_eq!(routed.pod_dev.as_deref(), Some("eth0"));
        let bridged = pod_interface(r#"#{kind: "bridged", bridge: "cni0", pod_dev: "eth0"}"#);
        assert_eq!(
            bridged.unwrap().attachment,
            Some(Attachment::Bridged {
                bridge: "cni0".into()
            })
        );
        let refused = pod_interface(r#"#{kind: "bridged"}"#).unwrap_err();
        assert_eq!(refused, "bridge is missing");
        let refused = pod_interface(r#"#{kind: "routed", bridge: "cni0"}"#).unwrap_err();
        assert!(refused.contains("has no bridge"), "{refused}");
        let refused = pod_interface(r#"#{bridge: "cni0"}"#).unwrap_err();
        assert!(refused.contains("say kind \"bridged\""), "{refused}");
    }

    #[test]
    fn pod_interface_in_the_older_shape_has_no_attachment() {
        let older = pod_interface(r#"#{host_veth: (), pod_dev: "eth0", mtu: 1450}"#).unwrap();
        assert_eq!(older.attachment, None);
        assert_eq!(older.pod_dev.as_deref(), Some("eth0"));
    }
}
