//! IPv6 source address selection as Linux does it (`ipv6_dev_get_saddr`,
//! RFC 6724 section 5): the candidates, then one rule after another until
//! one prefers an address.
//!
//! The candidates are the addresses of the outgoing device when the
//! destination is link-local or multicast, else every device's; never a
//! tentative address (unless optimistic), the unspecified address or a
//! multicast one. The rules, in the kernel's order: the destination itself;
//! the smallest scope that reaches the destination; not deprecated; on the
//! outgoing device; the same policy label; public rather than temporary
//! (unless `use_tempaddr` is 2 or more); ORCHID or not alike; the longest
//! common prefix; not optimistic. On a tie, the first candidate in the
//! order `ip addr show` lists them (devices by index, and each device's
//! addresses in its list) stays. Policy labels are the kernel's defaults:
//! `ip addrlabel` changes are not collected.

use std::net::Ipv6Addr;

use ipnet::Ipv6Net;

use crate::net::Family;
use crate::snapshot::netns::addr::{InterfaceAddr, InterfaceAddrs};
use crate::snapshot::netns::sysctl::Sysctls;

/// The source Linux gives a packet to `dst` leaving by `dev` (`None`: no
/// device decided yet), or `None` where no address can be one.
pub fn select(
    addrs: &[InterfaceAddrs],
    sysctls: Option<&Sysctls>,
    dev: Option<&str>,
    dst: Ipv6Addr,
) -> Option<Ipv6Addr> {
    let dst_scope = scope(dst);
    let only_outgoing = dev.is_some() && (dst.is_multicast() || dst_scope <= LINK_LOCAL);
    let mut best: Option<Candidate> = None;
    for iface in addrs {
        let outgoing = Some(iface.ifname.as_str()) == dev;
        if only_outgoing && !outgoing {
            continue;
        }
        let prefer_temporary = use_tempaddr(sysctls, &iface.ifname) >= 2;
        for address in &iface.addresses {
            let Some(local) = candidate(address) else {
                continue;
            };
            let scored = Candidate {
                address: local,
                score: score(address, local, dst, dst_scope, outgoing, prefer_temporary),
            };
            if best.as_ref().is_none_or(|best| scored.score > best.score) {
                best = Some(scored);
            }
        }
    }
    best.map(|best| best.address)
}

struct Candidate {
    address: Ipv6Addr,
    score: [i32; 10],
}

/// The address, if it may be a source at all.
fn candidate(address: &InterfaceAddr) -> Option<Ipv6Addr> {
    let std::net::IpAddr::V6(local) = address.local else {
        return None;
    };
    if address.family() != Family::Ipv6
        || (address.tentative && !address.optimistic)
        || address.dadfailed
        || local.is_unspecified()
        || local.is_multicast()
    {
        return None;
    }
    Some(local)
}

/// The candidate's value under each rule, in the kernel's order: a larger
/// value is preferred, compared rule by rule.
fn score(
    address: &InterfaceAddr,
    local: Ipv6Addr,
    dst: Ipv6Addr,
    dst_scope: u8,
    outgoing: bool,
    prefer_temporary: bool,
) -> [i32; 10] {
    let own_scope = scope(local);
    let scope_rule = if own_scope >= dst_scope {
        -i32::from(own_scope)
    } else {
        i32::from(own_scope) - 128
    };
    // Loopback (and IPv4-mapped or -compatible) addresses count as preferred
    // whatever their flags say.
    let preferred = local.is_loopback() || !(address.deprecated || address.optimistic);
    let common = common_prefix(local, dst).min(u32::from(address.network.prefix_len()));
    [
        i32::from(local == dst),
        scope_rule,
        i32::from(preferred),
        // Rule 4, home addresses (mobile IPv6), prefers none of these.
        0,
        i32::from(outgoing),
        i32::from(label(local) == label(dst)),
        i32::from(address.temporary == prefer_temporary),
        i32::from(orchid(local) == orchid(dst)),
        i32::try_from(common).unwrap_or(i32::MAX),
        i32::from(!address.optimistic),
    ]
}

/// Interface-local, link-local, site-local and global, as RFC 4291 numbers
/// the scopes: multicast carries its own, the loopback address is
/// link-local here (RFC 6724 section 3.4), everything else unicast global.
const LINK_LOCAL: u8 = 2;
const SITE_LOCAL: u8 = 5;
const GLOBAL: u8 = 14;

fn scope(address: Ipv6Addr) -> u8 {
    let first = address.segments()[0];
    if address.is_multicast() {
        (first & 0x000f) as u8
    } else if address.is_loopback() || first & 0xffc0 == 0xfe80 {
        LINK_LOCAL
    } else if first & 0xffc0 == 0xfec0 {
        SITE_LOCAL
    } else {
        GLOBAL
    }
}

/// The kernel's default policy table (`ip addrlabel`): the label of the
/// longest prefix that holds the address.
fn label(address: Ipv6Addr) -> u8 {
    const TABLE: &[(&str, u8)] = &[
        ("::1/128", 0),
        ("::ffff:0.0.0.0/96", 4),
        ("::/96", 3),
        ("2001:10::/28", 7),
        ("2001::/32", 6),
        ("2002::/16", 2),
        ("3ffe::/16", 12),
        ("fec0::/10", 11),
        ("fc00::/7", 5),
        ("::/0", 1),
    ];
    TABLE
        .iter()
        .filter_map(|(prefix, label)| {
            let prefix: Ipv6Net = prefix.parse().ok()?;
            prefix
                .contains(&address)
                .then_some((prefix.prefix_len(), *label))
        })
        .max_by_key(|(len, _)| *len)
        .map_or(1, |(_, label)| label)
}

/// Whether the address is an ORCHID (2001:10::/28).
fn orchid(address: Ipv6Addr) -> bool {
    address.segments()[0] == 0x2001 && address.segments()[1] & 0xfff0 == 0x0010
}

/// How many leading bits two addresses share.
fn common_prefix(a: Ipv6Addr, b: Ipv6Addr) -> u32 {
    (u128::from(a) ^ u128::from(b)).leading_zeros()
}

/// `net.ipv6.conf.IFACE.use_tempaddr`; not collected: 0, the kernel's default.
fn use_tempaddr(sysctls: Option<&Sysctls>, ifname: &str) -> i64 {
    let key = Sysctls::interface_key(Family::Ipv6, ifname, "use_tempaddr");
    sysctls
        .and_then(|sysctls| sysctls.get_i64(&key).ok().flatten())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::netns::addr;

    fn addrs(json: &str) -> Vec<InterfaceAddrs> {
        let (addrs, issues) = addr::parse(json);
        assert!(issues.is_empty(), "{issues:?}");
        addrs.unwrap()
    }

    fn pick(addrs: &[InterfaceAddrs], dev: Option<&str>, dst: &str) -> Option<String> {
        select(addrs, None, dev, dst.parse().unwrap()).map(|a| a.to_string())
    }

    const TWO_DEVICES: &str = r#"[
        {"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet6","local":"::1","prefixlen":128,"scope":"host"}]},
        {"ifindex":2,"ifname":"eth0","addr_info":[
            {"family":"inet6","local":"2001:db8:1::1","prefixlen":64,"scope":"global"},
            {"family":"inet6","local":"fd00:1::1","prefixlen":64,"scope":"global"},
            {"family":"inet6","local":"fe80::1","prefixlen":64,"scope":"link"}]},
        {"ifindex":3,"ifname":"eth1","addr_info":[
            {"family":"inet6","local":"2001:db8:2::1","prefixlen":64,"scope":"global","tentative":true},
            {"family":"inet6","local":"2001:db8:3::1","prefixlen":64,"scope":"global","deprecated":true},
            {"family":"inet6","local":"fe80::2","prefixlen":64,"scope":"link"}]}]"#;

    #[test]
    fn the_destination_itself_then_scope_then_the_outgoing_device() {
        let addrs = addrs(TWO_DEVICES);
        assert_eq!(
            pick(&addrs, Some("lo"), "fd00:1::1").as_deref(),
            Some("fd00:1::1")
        );
        // Link-local destinations take the outgoing device's link-local address.
        assert_eq!(
            pick(&addrs, Some("eth1"), "fe80::9").as_deref(),
            Some("fe80::2")
        );
        // A global destination by eth1: its tentative address is no
        // candidate and its deprecated one loses to eth0's preferred ones.
        assert_eq!(
            pick(&addrs, Some("eth1"), "2001:db8:9::1").as_deref(),
            Some("2001:db8:1::1")
        );
    }

    #[test]
    fn the_label_then_the_longest_common_prefix_decide() {
        let addrs = addrs(TWO_DEVICES);
        // fd00::/8 is the ULA label 5, as is fd00:1::1.
        assert_eq!(
            pick(&addrs, Some("eth0"), "fd12::1").as_deref(),
            Some("fd00:1::1")
        );
        // Same label (1) for both global ones: the longer common prefix.
        assert_eq!(
            pick(&addrs, Some("eth0"), "2001:db8:1::99").as_deref(),
            Some("2001:db8:1::1")
        );
    }

    #[test]
    fn without_any_candidate_there_is_no_source() {
        let only_tentative = addrs(
            r#"[{"ifindex":2,"ifname":"eth0","addr_info":[{"family":"inet6","local":"2001:db8::1","prefixlen":64,"scope":"global","tentative":true}]}]"#,
        );
        assert_eq!(pick(&only_tentative, Some("eth0"), "2001:db8::2"), None);
        assert_eq!(label("::1".parse().unwrap()), 0);
        assert_eq!(label("2001::5".parse().unwrap()), 6);
        assert_eq!(label("2001:db8::1".parse().unwrap()), 1);
        assert_eq!(label("2a00::1".parse().unwrap()), 1);
        assert_eq!(scope("ff02::1".parse().unwrap()), 2);
        assert_eq!(
            common_prefix("2001:db8::".parse().unwrap(), "2001:db9::".parse().unwrap()),
            31
        );
    }
}
