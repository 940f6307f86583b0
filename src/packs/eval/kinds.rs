//! The declarative kinds checked against the subject's namespace dump,
//! one function each: sysctl, route, neighbour, FDB and listener here,
//! `device` and `jump` in their own files.

use std::path::Path;

use super::{Evaluator, Failure, Outcome, Stop};
use crate::diagnostic::Evidence;
use crate::net::{Family, Protocol};
use crate::netstack::routing::table_name;
use crate::packs::host::lladdr_text;
use crate::packs::model::{CheckKind, Value};
use crate::packs::scope::{Context, NetnsRef};
use crate::snapshot::NetnsEntry;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::NetnsDump;
use crate::snapshot::netns::neigh::NeighbourState;
use crate::snapshot::netns::route::{Destination, RouteFlag};
use crate::snapshot::netns::sockets as ss;

/// The subject's namespace dump, where a declarative kind looks.
pub(super) struct NamespaceDump<'d> {
    pub(super) ctx: &'d Context,
    /// The namespace the dump is of.
    pub(super) netns: &'d NetnsRef,
    /// The dump's directory, where evidence points.
    pub(super) dir: &'d Path,
    pub(super) dump: &'d NetnsDump,
}

impl NamespaceDump<'_> {
    /// Evidence for `element` of `list`, read from the JSON dump `file`: its
    /// place in the file where there is one, else the file.
    pub(super) fn element<T>(&self, file: DumpFile, list: &[T], element: Option<&T>) -> Evidence {
        let place = element.and_then(|element| self.dump.place_of(file, list, element));
        self.at(file, place)
    }

    /// Evidence in the dump `file`: at `place` (line, column) where it is
    /// known, else the file.
    pub(super) fn at(&self, file: DumpFile, place: Option<(usize, usize)>) -> Evidence {
        let path = self.dir.join(file.name());
        match place {
            Some((line, column)) => Evidence {
                column: Some(column),
                ..Evidence::line(path, line)
            },
            None => Evidence::file(path),
        }
    }

    /// Why a kind cannot tell without `file`: not collected, or unreadable.
    pub(super) fn not_collected(&self, file: DumpFile) -> Stop {
        Stop::Lacking {
            reason: self.dump.missing(file).of(&self.ctx.subject),
            file,
        }
    }
}

/// One way the subject differs, shown by one piece of evidence.
pub(super) fn fail(actual: String, expected: String, evidence: Evidence) -> Outcome {
    Ok(vec![Failure {
        actual,
        expected,
        evidence: vec![evidence],
    }])
}

impl Evaluator<'_> {
    /// What a declarative kind finds in the dump of `netns` (the subject's,
    /// or its node's).
    pub(super) fn dump_outcome(
        &self,
        kind: &CheckKind,
        ctx: &Context,
        netns: &NetnsRef,
        entry: &NetnsEntry,
    ) -> Outcome {
        let at = NamespaceDump {
            ctx,
            netns,
            dir: &entry.dir,
            dump: entry.dump(),
        };
        match kind {
            CheckKind::Sysctl { key, expect } => self.sysctl(key, expect, &at),
            CheckKind::Device(device) => self.device(device, &at),
            CheckKind::Route {
                dst,
                via,
                dev,
                table,
                onlink,
                protocol,
                route_type,
            } => self.route(
                &RouteWanted {
                    dst,
                    via: via.as_ref(),
                    dev: dev.as_ref(),
                    table: table.as_ref(),
                    onlink: onlink.as_ref(),
                    protocol: protocol.as_ref(),
                    route_type: route_type.as_ref(),
                },
                &at,
            ),
            CheckKind::Neighbour { dst, dev, lladdr } => {
                self.neighbour(dst, dev.as_ref(), lladdr.as_ref(), &at)
            }
            CheckKind::Fdb { dev, mac, dst } => self.fdb(dev, mac.as_ref(), dst.as_ref(), &at),
            CheckKind::Listener { port, protocol } => self.listener(port, protocol.as_ref(), &at),
            CheckKind::Jump { jumps } => self.jump(jumps, &at),
            CheckKind::Rule(rule) => self.rule(rule, &at),
            CheckKind::DatapathEntry {
                file,
                key,
                field,
                expect,
                contains,
            } => self.datapath_entry(
                file,
                key.as_ref(),
                (field.as_ref(), expect.as_ref(), contains.as_ref()),
                &at,
            ),
            CheckKind::Masquerade {
                from,
                masqueraded,
                kept,
            } => self.masquerade(from, (masqueraded.as_ref(), kept.as_ref()), &at),
            CheckKind::Condition { .. }
            | CheckKind::Script { .. }
            | CheckKind::Within { .. }
            | CheckKind::ReadyPod { .. }
            | CheckKind::Annotation { .. } => Ok(Vec::new()),
        }
    }

    /// A sysctl has a value.
    fn sysctl(&self, key: &Value, expect: &Value, at: &NamespaceDump<'_>) -> Outcome {
        let &NamespaceDump { ctx, dump, .. } = at;
        let key = self.required_text(key, ctx)?;
        let expect = self.required_text(expect, ctx)?;
        let sysctls = dump
            .sysctls
            .as_ref()
            .ok_or_else(|| at.not_collected(DumpFile::Sysctl))?;
        // Where the dump has the key: the line it was read from.
        let evidence = at.at(DumpFile::Sysctl, sysctls.line(&key).map(|line| (line, 1)));
        match sysctls.get(&key) {
            Some(actual) if actual.trim() == expect.trim() => Ok(Vec::new()),
            Some(actual) => fail(
                format!("{key} = {}", actual.trim()),
                format!("{key} = {expect}"),
                evidence,
            ),
            None => fail(
                format!("{key} is not set"),
                format!("{key} = {expect}"),
                evidence,
            ),
        }
    }

    /// A route to exactly `dst` (to each, for a list) with what else the
    /// check wants.
    fn route(&self, wanted: &RouteWanted<'_>, at: &NamespaceDump<'_>) -> Outcome {
        let &NamespaceDump { ctx, .. } = at;
        let &RouteWanted {
            dst,
            via,
            dev,
            table,
            onlink,
            protocol,
            route_type,
        } = wanted;
        // A list of destinations wants a route to each.
        let dsts = self.required_texts(dst, ctx)?;
        let via = self.optional_text(via, ctx)?;
        let dev = self.optional_text(dev, ctx)?;
        let protocol = self.optional_text(protocol, ctx)?;
        let route_type = self.optional_text(route_type, ctx)?;
        let onlink = self.optional_bool(onlink, ctx)?.unwrap_or(false);
        let table = self
            .optional_text(table, ctx)?
            .unwrap_or_else(|| "main".into());
        let mut failures = Vec::new();
        for dst in dsts {
            let one = RouteSpec {
                dst,
                via: via.as_deref(),
                dev: dev.as_deref(),
                protocol: protocol.as_deref(),
                route_type: route_type.as_deref(),
                onlink,
                table: &table,
            };
            failures.extend(self.route_to(&one, at)?);
        }
        Ok(failures)
    }

    /// A route to exactly one `dst`.
    fn route_to(&self, spec: &RouteSpec<'_>, at: &NamespaceDump<'_>) -> Outcome {
        let &NamespaceDump { dump, .. } = at;
        let RouteSpec {
            dst,
            via,
            dev,
            protocol,
            route_type,
            onlink,
            table,
        } = spec;
        let (dst, onlink, table) = (dst.clone(), *onlink, *table);
        let (via, dev, protocol, route_type) = (*via, *dev, *protocol, *route_type);
        let wanted = (dst != "default")
            .then(|| dst.parse::<ipnet::IpNet>())
            .transpose()
            .map_err(|_| {
                Stop::Unknown(format!("route dst {dst:?} is neither default nor a prefix"))
            })?;
        // IPv6 routes are in their own file: the family of the prefix, or
        // of the gateway of a default route.
        let family = match (wanted, via.map(str::parse::<std::net::IpAddr>)) {
            (Some(prefix), _) => Family::of(prefix.addr()),
            (None, Some(Ok(gateway))) => Family::of(gateway),
            (None, _) => Family::Ipv4,
        };
        let file = DumpFile::routes(family);
        let routes = match family {
            Family::Ipv4 => dump.routes.as_ref(),
            Family::Ipv6 => dump.routes6.as_ref(),
        }
        .ok_or_else(|| at.not_collected(file))?;
        let candidates: Vec<_> = routes
            .iter()
            .filter(|r| table_name(&r.table) == table)
            .filter(|r| match (&r.dst, wanted) {
                (Destination::Default, None) => true,
                (Destination::Prefix(p), Some(w)) => p.trunc() == w.trunc(),
                _ => false,
            })
            .collect();
        let mut expected = match route_type {
            Some(kind) if kind != "unicast" => format!("{kind} {dst}"),
            _ => dst.clone(),
        };
        if let Some(via) = via {
            expected.push_str(&format!(" via {via}"));
        }
        if let Some(dev) = dev {
            expected.push_str(&format!(" dev {dev}"));
        }
        if let Some(protocol) = protocol {
            expected.push_str(&format!(" proto {protocol}"));
        }
        if onlink {
            expected.push_str(" onlink");
        }
        expected.push_str(&format!(" (table {table})"));
        let fits = candidates.iter().any(|r| {
            via.is_none_or(|v| r.gateway.map(|g| g.to_string()).as_deref() == Some(v))
                && dev.is_none_or(|d| r.dev.as_deref() == Some(d))
                && (!onlink || r.has_flag(&RouteFlag::Onlink))
                && protocol.is_none_or(|p| r.protocol.as_str() == p)
                && route_type.is_none_or(|t| r.route_type.as_str() == t)
        });
        if fits {
            return Ok(Vec::new());
        }
        let actual = match candidates.first() {
            None => format!("no route to {dst} in table {table}"),
            Some(r) => {
                let described = crate::netstack::routing::describe_route(r);
                match protocol {
                    Some(_) => format!("{described} proto {}", r.protocol),
                    None => described,
                }
            }
        };
        let evidence = at.element(file, routes, candidates.first().copied());
        fail(actual, expected, evidence)
    }

    /// A usable neighbour entry for `dst`.
    fn neighbour(
        &self,
        dst: &Value,
        dev: Option<&Value>,
        lladdr: Option<&Value>,
        at: &NamespaceDump<'_>,
    ) -> Outcome {
        let &NamespaceDump { ctx, dump, .. } = at;
        let dst = self.required_text(dst, ctx)?;
        let dev = self.optional_text(dev, ctx)?;
        let lladdr = self.optional_text(lladdr, ctx)?;
        let neighbours = dump
            .neighbours
            .as_ref()
            .ok_or_else(|| at.not_collected(DumpFile::IpNeigh))?;
        let entries: Vec<_> = neighbours
            .iter()
            .filter(|n| n.dst.to_string() == dst && dev.as_ref().is_none_or(|d| n.dev == *d))
            .collect();
        let usable = entries.iter().any(|n| {
            lladdr.as_ref().is_none_or(|l| {
                n.lladdr
                    .as_ref()
                    .is_some_and(|own| lladdr_text(own).eq_ignore_ascii_case(l))
            }) && !n.has_state(&NeighbourState::Failed)
                && !n.has_state(&NeighbourState::Incomplete)
        });
        if usable {
            return Ok(Vec::new());
        }
        let on = dev.as_ref().map(|d| format!(" on {d}")).unwrap_or_default();
        let actual = match entries.first() {
            None => format!("no neighbour entry for {dst}{on}"),
            Some(n) => {
                let states: Vec<String> = n.state.iter().map(ToString::to_string).collect();
                format!(
                    "neighbour {dst}{on} has lladdr {} ({})",
                    n.lladdr.as_ref().map_or("none".to_owned(), lladdr_text),
                    states.join(", ")
                )
            }
        };
        let expected = format!(
            "neighbour {dst}{}{}",
            dev.map(|d| format!(" dev {d}")).unwrap_or_default(),
            lladdr.map(|l| format!(" lladdr {l}")).unwrap_or_default()
        );
        let evidence = at.element(DumpFile::IpNeigh, neighbours, entries.first().copied());
        fail(actual, expected, evidence)
    }

    /// An FDB entry on `dev` (for `mac`, sending to `dst`).
    fn fdb(
        &self,
        dev: &Value,
        mac: Option<&Value>,
        dst: Option<&Value>,
        at: &NamespaceDump<'_>,
    ) -> Outcome {
        let &NamespaceDump { ctx, dump, .. } = at;
        let dev = self.required_text(dev, ctx)?;
        let mac = self.optional_text(mac, ctx)?;
        let dst = self.optional_text(dst, ctx)?;
        let fdb = dump
            .fdb
            .as_ref()
            .ok_or_else(|| at.not_collected(DumpFile::BridgeFdb))?;
        let entries: Vec<_> = fdb
            .iter()
            .filter(|e| {
                e.ifname == dev
                    && mac
                        .as_ref()
                        .is_none_or(|m| e.mac.to_string().eq_ignore_ascii_case(m))
            })
            .collect();
        let remote = |e: &crate::snapshot::netns::fdb::FdbEntry| e.dst.map(|x| x.to_string());
        if entries.iter().any(|e| {
            dst.as_ref()
                .is_none_or(|d| remote(e).as_deref() == Some(d.as_str()))
        }) {
            return Ok(Vec::new());
        }
        // Per remote node, an entry sending a MAC to an address is
        // that node's VTEP.
        let entry = match (&mac, &ctx.peer, &dst) {
            (Some(mac), Some(peer), Some(_)) => format!("{}'s VTEP {mac}", peer.name),
            (Some(mac), ..) => mac.clone(),
            (None, ..) => String::new(),
        };
        let actual = match entries.first() {
            None if entry.is_empty() => format!("no FDB entry on {dev}"),
            None => format!("no FDB entry for {entry} on {dev}"),
            Some(e) => format!(
                "the FDB entry for {} on {dev} sends to {}",
                mac.as_deref().unwrap_or("it"),
                remote(e).as_deref().unwrap_or("no remote")
            ),
        };
        let expected = format!(
            "fdb {}dev {dev}{}",
            mac.as_ref().map(|m| format!("{m} ")).unwrap_or_default(),
            dst.map(|d| format!(" dst {d}")).unwrap_or_default()
        );
        let evidence = at.element(DumpFile::BridgeFdb, fdb, entries.first().copied());
        fail(actual, expected, evidence)
    }

    /// A socket listens on `port`.
    fn listener(&self, port: &Value, protocol: Option<&Value>, at: &NamespaceDump<'_>) -> Outcome {
        let &NamespaceDump { ctx, dir, dump, .. } = at;
        let port_text = self.required_text(port, ctx)?;
        let protocol = self
            .optional_text(protocol, ctx)?
            .unwrap_or_else(|| "tcp".into())
            .to_lowercase();
        let sockets = dump
            .sockets
            .as_ref()
            .ok_or_else(|| at.not_collected(DumpFile::Ss))?;
        let listening = sockets
            .iter()
            .any(|s| s.port.to_string() == port_text && s.protocol.as_str() == protocol);
        if listening {
            return Ok(Vec::new());
        }
        if protocol == Protocol::Sctp.as_str() && !ss::lists(sockets, Protocol::Sctp) {
            return Err(Stop::Unknown(format!(
                "{}: {}",
                ctx.subject,
                ss::SCTP_UNLISTED
            )));
        }
        fail(
            format!("nothing listens on {protocol} port {port_text}"),
            format!("a {protocol} socket on port {port_text}"),
            Evidence::file(dir.join(DumpFile::Ss.name())),
        )
    }
}

/// The fields of a route check, as written.
/// One route a route check wants, its fields evaluated.
struct RouteSpec<'a> {
    dst: String,
    via: Option<&'a str>,
    dev: Option<&'a str>,
    protocol: Option<&'a str>,
    route_type: Option<&'a str>,
    onlink: bool,
    table: &'a str,
}

struct RouteWanted<'v> {
    dst: &'v Value,
    via: Option<&'v Value>,
    dev: Option<&'v Value>,
    table: Option<&'v Value>,
    onlink: Option<&'v Value>,
    protocol: Option<&'v Value>,
    route_type: Option<&'v Value>,
}
