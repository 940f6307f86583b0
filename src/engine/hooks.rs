//! The CNI's intent as the walker asks for it: the packs' walker hooks
//! (`docs/packs.md`, `packs::HOOKS`), called for a namespace the snapshot
//! lacks, with their answers read into typed values. An answer outside a
//! hook's contract is reported as such, never half-used.

use std::net::IpAddr;
use std::sync::Arc;

use rhai::{Dynamic, Map};

use crate::packs::{self, HopScope, LoadedPacks, Pack, PackKind, PodRef};
use crate::snapshot::Snapshot;
use crate::snapshot::netns::link::MacAddr;

/// Where the CNI sends a packet from a hop (`next_hop`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NextHop {
    /// `None` when only the namespace's own dump could name the device.
    pub dev: Option<String>,
    pub via: Option<IpAddr>,
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
    /// The node's end; `None` when the CNI names it at random.
    pub host_veth: Option<String>,
    pub pod_dev: Option<String>,
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
    /// Every applying pack with a `service` hook, in load order.
    service_proxies: Vec<&'s Pack>,
}

impl<'s> Intent<'s> {
    pub fn new(snapshot: &'s Arc<Snapshot>, packs: &'s LoadedPacks) -> Intent<'s> {
        let cluster = &snapshot.cluster;
        Intent {
            packs,
            cni: packs
                .applying(cluster)
                .find(|pack| pack.kind == PackKind::Cni),
            service_proxies: packs
                .applying(cluster)
                .filter(|pack| pack.hooks.contains_key("service"))
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
        let field = Fields::new(pack, "next_hop", &map);
        Ok(Some(NextHop {
            dev: field.optional(string, "a String", "dev")?,
            via: field.optional(ip, "an Ip", "via")?,
        }))
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
            return Ok(None);
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
            let Some(backends) = map
                .get("backends")
                .and_then(|b| b.clone().try_cast::<Vec<Dynamic>>())
            else {
                return Err(field.malformed("backends must be an array".into()));
            };
            let backends = backends
                .iter()
                .map(|backend| {
                    let Some(backend) = backend.clone().try_cast::<Map>() else {
                        return Err(field.malformed("each backend must be a map".into()));
                    };
                    let inner = Fields::new(pack, "service", &backend);
                    let address = inner.optional(ip, "an Ip", "ip")?;
                    let port = inner.optional(integer, "a port", "port")?;
                    let masquerade = inner
                        .optional(|value| value.as_bool().ok(), "a bool", "masquerade")?
                        .unwrap_or(false);
                    match (address, port) {
                        (Some(ip), Some(port)) => Ok(Backend {
                            ip,
                            port,
                            masquerade,
                        }),
                        _ => Err(field.malformed("each backend needs an ip and a port".into())),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Some(ServiceTranslation {
                pack: pack.name.clone(),
                service: field.text("service")?,
                backends,
                why: field.text("why")?,
            }));
        }
        Ok(None)
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
        let field = Fields::new(pack, "pod_interface", &map);
        Ok(PodInterface {
            host_veth: field.optional(string, "a String", "host_veth")?,
            pod_dev: field.optional(string, "a String", "pod_dev")?,
        })
    }
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
