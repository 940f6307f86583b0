//! A network namespace as scripts see it (`Netns`): what its dump holds —
//! links, addresses, routes, neighbours, FDB entries, sysctls, listening
//! sockets — and the route its kernel would take.

use rhai::{Array, Dynamic, Engine};

use super::{Fallible, Insufficient, as_ip, fail, int, map, opt, text};
use crate::net::Family;
use crate::netstack::namespace::Modelled;
use crate::netstack::routing::{Fib, FlowKey, LookupOutcome, table_name};
use crate::packs::scope::NetnsRef;
use crate::snapshot::NetnsId;
use crate::snapshot::netns::NetnsDump;
use crate::snapshot::netns::fdb::FdbEntry;
use crate::snapshot::netns::link::{Link, LinkFlag, LinkKind, OperState};
use crate::snapshot::netns::neigh::Neighbour;
use crate::snapshot::netns::route::{Destination, Route};
use crate::snapshot::netns::sockets::LocalAddress;
use crate::snapshot::netns::{DumpFile, FileState};

/// The part of a namespace dump a query needs; its absence is insufficient information.
pub(super) fn dump_part<'a, T>(
    netns: &'a NetnsRef,
    file: DumpFile,
    part: impl FnOnce(&'a NetnsDump) -> Option<&'a T>,
) -> Fallible<&'a T> {
    let Some(entry) = netns.entry() else {
        return Insufficient::raise(format!("no dump of {} in the snapshot", netns.id));
    };
    match part(entry.dump()) {
        Some(value) => Ok(value),
        None => Insufficient::raise_lacking(entry.dump().missing(file).of(&netns.id), file),
    }
}

/// The namespace's FIB of `family`, as the snapshot models it (built
/// once), or why there is none: the first of its files that was not read.
pub(super) fn namespace_fib(n: &NetnsRef, family: Family) -> Fallible<&Fib<'_>> {
    let Some(entry) = n.entry() else {
        return Insufficient::raise(format!("no dump of {} in the snapshot", n.id));
    };
    for file in Fib::files(family) {
        if let Some(lacking) = entry.dump().lacking(file) {
            return Insufficient::raise_lacking(lacking.of(&n.id), file);
        }
    }
    match entry.model().fib(family) {
        Some(fib) => Ok(fib),
        None => Insufficient::raise(format!("the routes of {} cannot be modelled", n.id)),
    }
}

/// A device is up when it is administratively up and its operational state
/// does not say it is down (tunnels and loopback report UNKNOWN).
pub fn link_is_up(link: &Link) -> bool {
    link.has_flag(&LinkFlag::Up)
        && !matches!(
            link.operstate,
            OperState::Down | OperState::LowerLayerDown | OperState::NotPresent
        )
}

/// The kind iproute2 names a device by; physical devices and loopback have none.
pub fn link_kind(link: &Link) -> &str {
    match link.kind() {
        None => "",
        Some(LinkKind::Veth) => "veth",
        Some(LinkKind::Bridge(_)) => "bridge",
        Some(LinkKind::Vxlan(_)) => "vxlan",
        Some(LinkKind::Ipip(_)) => "ipip",
        Some(LinkKind::Dummy) => "dummy",
        Some(LinkKind::Other(kind)) => kind,
    }
}

/// A device of `netns` as a script sees it; a veth with its far end.
pub(super) fn link_map(netns: &NetnsRef, link: &Link) -> Dynamic {
    let vxlan = match link.kind() {
        Some(LinkKind::Vxlan(v)) => map([
            ("vni", int(v.id)),
            ("port", opt(v.port.map(i64::from))),
            ("local", opt(v.local.map(Dynamic::from))),
            ("link", opt(v.link.clone())),
        ]),
        _ => Dynamic::UNIT,
    };
    let flags: Array = link.flags.iter().map(text).collect();
    // A veth's far end: by name when it is in this namespace (`link`), else
    // by ifindex in another, which the snapshot may hold.
    let is_veth = matches!(link.kind(), Some(LinkKind::Veth));
    let far = match is_veth {
        true => netns.snapshot.veth_peer(&netns.id, link),
        false => None,
    };
    let (peer, peer_netns) = match (is_veth, &link.link, far) {
        (true, Some(name), _) => (text(name), Dynamic::from(netns.clone())),
        (_, _, Some((id, far))) => (
            text(&far.ifname),
            Dynamic::from(NetnsRef {
                snapshot: netns.snapshot.clone(),
                id: id.clone(),
            }),
        ),
        _ => (Dynamic::UNIT, Dynamic::UNIT),
    };
    map([
        ("name", text(&link.ifname)),
        ("ifindex", int(link.ifindex)),
        ("kind", text(link_kind(link))),
        ("mtu", int(link.mtu)),
        ("up", link_is_up(link).into()),
        ("state", text(&link.operstate)),
        ("flags", Dynamic::from_array(flags)),
        ("master", opt(link.master.clone())),
        ("link", opt(link.link.clone())),
        ("address", opt(link.address.as_ref().map(lladdr_text))),
        ("vxlan", vxlan),
        ("peer", peer),
        ("peer_ifindex", opt(link.link_index.map(i64::from))),
        ("peer_netnsid", opt(link.link_netnsid.map(i64::from))),
        ("peer_netns", peer_netns),
    ])
}

fn destination_text(route: &Route) -> String {
    match &route.dst {
        Destination::Default => "default".to_owned(),
        Destination::Prefix(net) => net.to_string(),
    }
}

pub(super) fn route_map(route: &Route) -> Dynamic {
    map([
        ("dst", text(destination_text(route))),
        ("type", text(&route.route_type)),
        ("gateway", opt(route.gateway.map(Dynamic::from))),
        ("dev", opt(route.dev.clone())),
        ("table", text(table_name(&route.table))),
        ("protocol", text(&route.protocol)),
        ("scope", text(&route.scope)),
        ("prefsrc", opt(route.prefsrc.map(Dynamic::from))),
        ("metric", opt(route.metric.map(i64::from))),
        ("mtu", opt(route.mtu.map(i64::from))),
        (
            "onlink",
            route
                .has_flag(&crate::snapshot::netns::route::RouteFlag::Onlink)
                .into(),
        ),
    ])
}

fn neighbour_map(nb: &Neighbour) -> Dynamic {
    let states: Array = nb.state.iter().map(text).collect();
    map([
        ("dst", Dynamic::from(nb.dst)),
        ("dev", text(&nb.dev)),
        ("lladdr", opt(nb.lladdr.as_ref().map(lladdr_text))),
        ("state", Dynamic::from_array(states)),
    ])
}

fn fdb_map(e: &FdbEntry) -> Dynamic {
    map([
        ("mac", text(e.mac)),
        ("dev", text(&e.ifname)),
        ("dst", opt(e.dst.map(Dynamic::from))),
        ("master", opt(e.master.clone())),
    ])
}

pub(super) fn register(engine: &mut Engine) {
    engine
        .register_type_with_name::<NetnsRef>("Netns")
        .register_fn("to_string", |n: &mut NetnsRef| n.id.to_string())
        .register_get("name", |n: &mut NetnsRef| n.id.to_string())
        .register_get("node", |n: &mut NetnsRef| n.id.node().to_owned())
        .register_get("is_host", |n: &mut NetnsRef| {
            matches!(n.id, NetnsId::Host { .. })
        })
        .register_get("collected", |n: &mut NetnsRef| n.entry().is_some())
        // Whether the dump has a file (readable or not): a script asks
        // before it reads a file older snapshots do not have.
        .register_fn("has_file", |n: &mut NetnsRef, name: &str| {
            let file = DumpFile::from_name(name);
            n.entry().is_some_and(|e| {
                file.is_some_and(|file| e.dump().state(file) != FileState::NotCollected)
            })
        })
        .register_fn("links", |n: &mut NetnsRef| -> Fallible<Array> {
            let links = dump_part(n, DumpFile::IpLink, |d| d.links.as_ref())?;
            Ok(links.iter().map(|link| link_map(n, link)).collect())
        })
        .register_fn(
            "link",
            |n: &mut NetnsRef, name: &str| -> Fallible<Dynamic> {
                let links = dump_part(n, DumpFile::IpLink, |d| d.links.as_ref())?;
                let link = links.iter().find(|l| l.ifname == name);
                Ok(opt(link.map(|link| link_map(n, link))))
            },
        )
        .register_fn(
            "sysctl",
            |n: &mut NetnsRef, key: &str| -> Fallible<Dynamic> {
                let sysctls = dump_part(n, DumpFile::Sysctl, |d| d.sysctls.as_ref())?;
                Ok(opt(sysctls.get(key).map(str::to_owned)))
            },
        )
        .register_fn(
            "sysctl_int",
            |n: &mut NetnsRef, key: &str| -> Fallible<Dynamic> {
                let sysctls = dump_part(n, DumpFile::Sysctl, |d| d.sysctls.as_ref())?;
                match sysctls.get_i64(key) {
                    Ok(value) => Ok(opt(value)),
                    Err(error) => fail(error.to_string()),
                }
            },
        )
        .register_fn("routes", |n: &mut NetnsRef| -> Fallible<Array> {
            let routes = dump_part(n, DumpFile::IpRoute, |d| d.routes.as_ref())?;
            Ok(routes.iter().map(route_map).collect())
        })
        // One destination's routes, neighbour entries or FDB entries: on a
        // node of a large cluster the whole table outgrows a script's limits.
        .register_fn(
            "routes_to",
            |n: &mut NetnsRef, dst: &str| -> Fallible<Array> {
                // An IPv6 destination's routes are in their own file.
                let routes = match dst.contains(':') {
                    false => dump_part(n, DumpFile::IpRoute, |d| d.routes.as_ref())?,
                    true => dump_part(n, DumpFile::IpRoute6, |d| d.routes6.as_ref())?,
                };
                Ok(routes
                    .iter()
                    .filter(|r| destination_text(r) == dst)
                    .map(route_map)
                    .collect())
            },
        )
        .register_fn("route_get", route_get)
        .register_fn("addresses", |n: &mut NetnsRef| -> Fallible<Array> {
            let addrs = dump_part(n, DumpFile::IpAddr, |d| d.addrs.as_ref())?;
            Ok(addrs
                .iter()
                .flat_map(|iface| {
                    iface.addresses.iter().map(|a| {
                        map([
                            ("dev", text(&iface.ifname)),
                            ("ip", Dynamic::from(a.local)),
                            ("network", Dynamic::from(a.network)),
                        ])
                    })
                })
                .collect())
        })
        .register_fn("neighbours", |n: &mut NetnsRef| -> Fallible<Array> {
            let neighbours = dump_part(n, DumpFile::IpNeigh, |d| d.neighbours.as_ref())?;
            Ok(neighbours.iter().map(neighbour_map).collect())
        })
        .register_fn(
            "neighbours_of",
            |n: &mut NetnsRef, ip: Dynamic| -> Fallible<Array> {
                let ip = as_ip(&ip)?;
                let neighbours = dump_part(n, DumpFile::IpNeigh, |d| d.neighbours.as_ref())?;
                Ok(neighbours
                    .iter()
                    .filter(|nb| nb.dst == ip)
                    .map(neighbour_map)
                    .collect())
            },
        )
        .register_fn("fdb", |n: &mut NetnsRef| -> Fallible<Array> {
            let fdb = dump_part(n, DumpFile::BridgeFdb, |d| d.fdb.as_ref())?;
            Ok(fdb.iter().map(fdb_map).collect())
        })
        .register_fn("fdb_of", |n: &mut NetnsRef, mac: &str| -> Fallible<Array> {
            let fdb = dump_part(n, DumpFile::BridgeFdb, |d| d.fdb.as_ref())?;
            Ok(fdb
                .iter()
                .filter(|e| e.mac.to_string().eq_ignore_ascii_case(mac))
                .map(fdb_map)
                .collect())
        })
        .register_fn("listeners", |n: &mut NetnsRef| -> Fallible<Array> {
            let sockets = dump_part(n, DumpFile::Ss, |d| d.sockets.as_ref())?;
            Ok(sockets
                .iter()
                .map(|s| {
                    let address = match s.address {
                        LocalAddress::AnyDualStack => "*".to_owned(),
                        LocalAddress::Ip(ip) => ip.to_string(),
                    };
                    map([
                        ("protocol", text(s.protocol.as_str())),
                        ("address", text(address)),
                        ("port", int(s.port)),
                    ])
                })
                .collect())
        });
}

pub fn lladdr_text(address: &crate::snapshot::netns::link::LinkLayerAddress) -> String {
    use crate::snapshot::netns::link::LinkLayerAddress;
    match address {
        LinkLayerAddress::Mac(mac) => mac.to_string(),
        LinkLayerAddress::Other(other) => other.clone(),
    }
}

/// `netns.route_get(dst)`: the route the kernel takes to `dst` from this
/// namespace, as `ip route get` would say.
fn route_get(n: &mut NetnsRef, dst: Dynamic) -> Fallible<Dynamic> {
    let dst = as_ip(&dst)?;
    let fib = namespace_fib(n, Family::of(dst))?;
    let routes = fib.routes;
    match fib.lookup(&FlowKey::to(dst)).outcome {
        LookupOutcome::Routed {
            route,
            route_type,
            paths,
            ..
        } => {
            let first = paths.first();
            Ok(map([
                ("type", text(route_type)),
                ("dev", opt(first.and_then(|p| p.dev.clone()))),
                (
                    "gateway",
                    opt(first.and_then(|p| p.gateway).map(Dynamic::from)),
                ),
                (
                    "route",
                    opt(route.and_then(|route| routes.get(route)).map(route_map)),
                ),
            ]))
        }
        LookupOutcome::Failed { error, .. } => Ok(map([("error", text(error.as_str()))])),
        LookupOutcome::Unknown { reason } => Insufficient::raise(reason),
    }
}
