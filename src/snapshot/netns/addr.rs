//! `ip -j addr show`: the addresses of each interface.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;

use super::json;
use super::route::Scope;
use crate::net::Family;
use crate::snapshot::problem::Parsed;

/// One interface and the addresses on it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InterfaceAddrs {
    pub ifindex: u32,
    pub ifname: String,
    /// The device's flags (`UP`, `LOWER_UP`, ...), where they were printed.
    pub flags: Option<Vec<super::link::LinkFlag>>,
    #[serde(rename = "addr_info", default)]
    pub addresses: Vec<InterfaceAddr>,
}

/// One address on an interface.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawAddrInfo")]
pub struct InterfaceAddr {
    /// The address itself (`local`).
    pub local: IpAddr,
    /// The other end of a point-to-point address (`ip addr add A peer B/len`).
    pub peer: Option<IpAddr>,
    /// The prefix the address makes directly reachable: `local/prefixlen`,
    /// or `peer/prefixlen` for a point-to-point address, host bits cleared.
    pub network: IpNet,
    pub broadcast: Option<IpAddr>,
    pub scope: Scope,
    /// The IPv4 label (`eth0:1`); iproute2 prints none for IPv6.
    pub label: Option<String>,
    /// A further address in a prefix the interface already has; removed with
    /// the primary unless promote_secondaries is on.
    pub secondary: bool,
    /// IPv6 duplicate address detection has not finished: the address is
    /// not yet the interface's (no local route, never a source).
    pub tentative: bool,
    /// Duplicate address detection found the address in use elsewhere.
    pub dadfailed: bool,
    /// Usable before detection finishes (optimistic DAD, RFC 4429).
    pub optimistic: bool,
    /// Its preferred lifetime is over: kept for existing connections, a
    /// source for new ones only where nothing better is left.
    pub deprecated: bool,
    /// An IPv6 privacy address (RFC 8981).
    pub temporary: bool,
}

impl InterfaceAddr {
    pub fn family(&self) -> Family {
        Family::of(self.local)
    }
}

/// An `addr_info` element as iproute2 prints it.
#[derive(Deserialize)]
struct RawAddrInfo {
    local: IpAddr,
    prefixlen: u8,
    /// The peer; iproute2 prints it only when it differs from `local`.
    address: Option<IpAddr>,
    broadcast: Option<IpAddr>,
    scope: Scope,
    label: Option<String>,
    #[serde(default)]
    secondary: bool,
    #[serde(default)]
    tentative: bool,
    #[serde(default)]
    dadfailed: bool,
    #[serde(default)]
    optimistic: bool,
    #[serde(default)]
    deprecated: bool,
    #[serde(default)]
    temporary: bool,
}

impl TryFrom<RawAddrInfo> for InterfaceAddr {
    type Error = String;

    fn try_from(raw: RawAddrInfo) -> Result<Self, String> {
        let base = raw.address.unwrap_or(raw.local);
        if Family::of(base) != Family::of(raw.local) {
            return Err(format!(
                "peer {base} is not of the same family as the address {}",
                raw.local
            ));
        }
        let network = IpNet::new(base, raw.prefixlen)
            .map_err(|_| format!("prefixlen {} is too long for {base}", raw.prefixlen))?
            .trunc();
        Ok(InterfaceAddr {
            local: raw.local,
            peer: raw.address,
            network,
            broadcast: raw.broadcast,
            scope: raw.scope,
            label: raw.label,
            secondary: raw.secondary,
            tentative: raw.tentative,
            dadfailed: raw.dadfailed,
            optimistic: raw.optimistic,
            deprecated: raw.deprecated,
            temporary: raw.temporary,
        })
    }
}

pub fn parse(text: &str) -> Parsed<Vec<InterfaceAddrs>> {
    json::parse_array(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = include_str!("../../../tests/fixtures/dumps/node/ip-addr.json");

    fn node() -> Vec<InterfaceAddrs> {
        let (addrs, issues) = parse(NODE);
        assert!(issues.is_empty(), "{issues:?}");
        addrs.expect("the fixture is an array")
    }

    fn on<'a>(addrs: &'a [InterfaceAddrs], ifname: &str) -> &'a InterfaceAddrs {
        addrs
            .iter()
            .find(|a| a.ifname == ifname)
            .expect("interface in fixture")
    }

    fn net(text: &str) -> IpNet {
        text.parse().expect("a prefix")
    }

    #[test]
    fn every_interface_of_the_node_is_read_with_its_addresses() {
        let addrs = node();
        let names: Vec<_> = addrs.iter().map(|a| a.ifname.as_str()).collect();
        assert_eq!(
            names,
            [
                "lo",
                "eth0",
                "cni0",
                "vethpod0",
                "vd1",
                "vd0",
                "br-stp",
                "flannel.1",
                "vx100",
                "vx200",
                "vx6",
                "mv0"
            ]
        );
        let lo = on(&addrs, "lo");
        assert_eq!(lo.ifindex, 1);
        assert_eq!(lo.addresses.len(), 2);
        assert_eq!(lo.addresses[0].network, net("127.0.0.0/8"));
        assert_eq!(lo.addresses[0].scope, Scope::Host);
        assert_eq!(
            lo.addresses[1].local,
            "::1".parse::<IpAddr>().expect("address")
        );
        assert_eq!(lo.addresses[1].family(), Family::Ipv6);
        assert!(on(&addrs, "br-stp").addresses.is_empty());
    }

    #[test]
    fn ipv4_address_keeps_local_and_clears_host_bits_of_its_network() {
        let addrs = node();
        let cni0 = &on(&addrs, "cni0").addresses[0];
        assert_eq!(cni0.local, "10.244.0.1".parse::<IpAddr>().expect("address"));
        assert_eq!(cni0.network, net("10.244.0.0/24"));
        assert_eq!(cni0.scope, Scope::Global);
        assert_eq!(cni0.label.as_deref(), Some("cni0"));
        assert_eq!(cni0.family(), Family::Ipv4);
        let flannel = &on(&addrs, "flannel.1").addresses[0];
        assert_eq!(flannel.network, net("10.244.0.0/32"));
    }

    #[test]
    fn broadcast_secondary_and_label_are_kept() {
        let addrs = node();
        let eth0 = &on(&addrs, "eth0").addresses;
        assert_eq!(
            eth0[1].broadcast,
            Some("192.168.60.255".parse().expect("address"))
        );
        assert!(!eth0[1].secondary);
        assert_eq!(
            eth0[2].local,
            "192.168.60.9".parse::<IpAddr>().expect("address")
        );
        assert!(eth0[2].secondary);
        assert_eq!(eth0[2].label.as_deref(), Some("eth0:sec"));
        let link_local = eth0
            .iter()
            .find(|a| a.scope == Scope::Link)
            .expect("fe80::1");
        assert_eq!(link_local.network, net("fe80::/64"));
        assert_eq!(link_local.label, None);
    }

    #[test]
    fn point_to_point_address_takes_its_network_from_the_peer() {
        let addrs = node();
        let p2p = on(&addrs, "vd0")
            .addresses
            .iter()
            .find(|a| a.peer.is_some())
            .expect("peer address on vd0");
        assert_eq!(p2p.local, "10.9.8.1".parse::<IpAddr>().expect("address"));
        assert_eq!(p2p.peer, Some("10.9.8.2".parse().expect("address")));
        assert_eq!(p2p.network, net("10.9.8.2/32"));
    }

    #[test]
    fn prefixlen_too_long_for_the_family_is_an_issue_for_that_interface_only() {
        let text = r#"[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":33,"scope":"host"}]},
{"ifindex":2,"ifname":"eth0","addr_info":[]}]"#;
        let (addrs, issues) = parse(text);
        assert_eq!(addrs.expect("an array").len(), 1);
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].line, 1);
        assert!(
            issues[0]
                .message
                .ends_with("prefixlen 33 is too long for 127.0.0.1"),
            "{}",
            issues[0].message
        );
    }

    #[test]
    fn address_that_is_not_an_ip_is_an_issue() {
        let text = r#"[{"ifindex":1,"ifname":"lo","addr_info":[{"local":"localhost","prefixlen":8,"scope":"host"}]}]"#;
        let (addrs, issues) = parse(text);
        assert_eq!(addrs, Some(vec![]));
        assert_eq!(issues.len(), 1);
        assert!(
            issues[0].message.contains("invalid IP address syntax"),
            "{}",
            issues[0].message
        );
    }
}
