//! `-m set --match-set NAME FLAGS`: whether the packet's fields, taken from
//! its source or destination as FLAGS say dimension by dimension, are a
//! member of the ipset, as `ip_set_test` and each set type's `kadt` decide.

use std::net::IpAddr;

use ipnet::IpNet;

use super::Packet;
use crate::snapshot::netns::ipset::{Entry, IpSet, IpSets, Member, SetPort, SetType};
use crate::snapshot::netns::iptables::{Protocol, SetDirection, SetMatch};

/// How deep `list:set` sets may nest before the model gives up (the kernel
/// refuses a list:set inside a list:set).
const MAX_DEPTH: usize = 4;

/// Whether the packet is in the set `set` names; `Err` says why the dump
/// cannot tell. `--return-nomatch` is applied; `!` is left to the caller.
pub(super) fn member(
    sets: Option<&IpSets>,
    set: &SetMatch,
    packet: &Packet,
) -> Result<bool, String> {
    let Some(sets) = sets else {
        return Err(format!(
            "ipset `{}`: ipset-save.txt was not collected",
            set.name
        ));
    };
    in_set(
        sets,
        &set.name,
        &set.directions,
        set.return_nomatch,
        packet,
        0,
    )
}

/// Whether `address` is a member of the one-dimensional set `name`
/// (`hash:ip`, `hash:net`, or a `list:set` of them), as `--match-set NAME
/// dst` decides for a packet to it: the most specific member wins, and a
/// `nomatch` member is a hole. `Err` says why the dump cannot tell.
pub fn holds(sets: &IpSets, name: &str, address: IpAddr) -> Result<bool, String> {
    let packet = Packet::new(
        crate::net::Family::of(address).unspecified(),
        address,
        Protocol::Icmp,
    );
    in_set(sets, name, &[SetDirection::Destination], false, &packet, 0)
}

fn in_set(
    sets: &IpSets,
    name: &str,
    directions: &[SetDirection],
    return_nomatch: bool,
    packet: &Packet,
    depth: usize,
) -> Result<bool, String> {
    let Some(set) = sets.set(name) else {
        return Err(format!("ipset `{name}` is not in ipset-save.txt"));
    };
    let dimension = match set.kind {
        SetType::HashIp | SetType::HashNet | SetType::BitmapPort => 1,
        SetType::HashIpPort | SetType::HashNetPort => 2,
        SetType::HashIpPortIp | SetType::HashIpPortNet => 3,
        SetType::ListSet => {
            if depth >= MAX_DEPTH {
                return Err(format!("ipset `{name}`: list:set sets nest too deep"));
            }
            // The member sets are tried in order; the first that matches decides.
            let mut unknown = None;
            for entry in &set.entries {
                let Member::Set(member) = &entry.member else {
                    continue;
                };
                match in_set(sets, member, directions, return_nomatch, packet, depth + 1) {
                    Ok(true) => return Ok(true),
                    Ok(false) => {}
                    Err(why) => unknown = unknown.or(Some(why)),
                }
            }
            return unknown.map_or(Ok(false), Err);
        }
        SetType::Unsupported(ref kind) => {
            return Err(format!("ipset `{name}`: type {kind} is not modelled"));
        }
    };
    // Fewer flags than the set has dimensions never match; extra ones are ignored.
    if directions.len() < dimension {
        return Ok(false);
    }
    if set
        .family
        .is_some_and(|family| family != packet.ip.family())
    {
        return Ok(false);
    }
    let fields = Fields { packet, directions };
    // A `nomatch` member is an exception: the most specific member decides.
    let mut best: Option<(u32, &Entry)> = None;
    let mut unsupported = None;
    for entry in &set.entries {
        match fields.specificity(set, &entry.member) {
            Ok(Some(rank)) if best.is_none_or(|(b, _)| rank > b) => best = Some((rank, entry)),
            Ok(_) => {}
            Err(why) => unsupported = unsupported.or(Some(why)),
        }
    }
    match (best, unsupported) {
        (Some((_, entry)), _) => Ok(!entry.nomatch || return_nomatch),
        (None, Some(why)) => Err(format!("ipset `{name}`: {why}")),
        (None, None) => Ok(false),
    }
}

/// The packet's fields as one `--match-set` reads them.
struct Fields<'p> {
    packet: &'p Packet,
    directions: &'p [SetDirection],
}

impl Fields<'_> {
    fn addr(&self, dimension: usize) -> IpAddr {
        match self.directions.get(dimension) {
            Some(SetDirection::Source) => self.packet.ip.src,
            _ => self.packet.ip.dst,
        }
    }

    fn port(&self, dimension: usize) -> Option<u16> {
        match self.directions.get(dimension) {
            Some(SetDirection::Source) => self.packet.ip.sport,
            _ => self.packet.ip.dport,
        }
    }

    /// Whether the packet's `proto:port` in `dimension` is `want`.
    fn port_is(&self, dimension: usize, want: SetPort) -> bool {
        let packet = self.packet;
        match want {
            SetPort::Port { protocol, port } => {
                protocol == packet.ip.protocol && self.port(dimension).unwrap_or(0) == port
            }
            SetPort::Icmp { kind, code } => {
                packet.ip.protocol == Protocol::Icmp && packet.icmp == Some((kind, code))
            }
            SetPort::Icmpv6 { kind, code } => {
                packet.ip.protocol == Protocol::Icmpv6 && packet.icmp == Some((kind, code))
            }
        }
    }

    /// How specific a member that holds the packet is (its prefix lengths
    /// summed), `None` when it does not hold it.
    fn specificity(&self, set: &IpSet, member: &Member) -> Result<Option<u32>, String> {
        let net =
            |net: &IpNet, addr: IpAddr| net.contains(&addr).then(|| u32::from(net.prefix_len()));
        let host = |ip: &IpAddr, addr: IpAddr| (*ip == addr).then_some(128);
        Ok(match member {
            Member::Ip(ip) => match set.options.netmask {
                Some(len) => IpNet::new(*ip, len)
                    .ok()
                    .and_then(|n| net(&n.trunc(), self.addr(0))),
                None => host(ip, self.addr(0)),
            },
            Member::Net(n) => net(n, self.addr(0)),
            Member::IpPort(ip, port) => host(ip, self.addr(0)).filter(|_| self.port_is(1, *port)),
            Member::NetPort(n, port) => net(n, self.addr(0)).filter(|_| self.port_is(1, *port)),
            Member::IpPortIp(ip, port, ip2) => host(ip, self.addr(0))
                .filter(|_| self.port_is(1, *port))
                .and_then(|_| host(ip2, self.addr(2))),
            Member::IpPortNet(ip, port, n) => host(ip, self.addr(0))
                .filter(|_| self.port_is(1, *port))
                .and_then(|_| net(n, self.addr(2))),
            Member::Port(port) => match self.port(0) {
                Some(p) => (p == *port).then_some(0),
                None => return Err("bitmap:port of a packet without ports".into()),
            },
            Member::Set(_) => None,
            Member::Unsupported(text) => return Err(format!("member `{text}` is not modelled")),
        })
    }
}
