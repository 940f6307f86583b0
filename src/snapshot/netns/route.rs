//! `ip -j -d route show table all` (and with `-6`): every route of every
//! routing table.
//!
//! Without `-6` iproute2 lists both families, and prints a default route as
//! `"dst": "default"` whatever its family, so each route carries the family
//! the dump shows for it, when it shows one.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::Deserialize;

use super::json;
use super::keyword::keyword_enum;
use crate::net::Family;
use crate::snapshot::problem::Parsed;

keyword_enum! {
    /// What the kernel does with a packet that matches the route.
    pub enum RouteType {
        Unicast = "unicast",
        Local = "local",
        Broadcast = "broadcast",
        Anycast = "anycast",
        Multicast = "multicast",
        Blackhole = "blackhole",
        Unreachable = "unreachable",
        Prohibit = "prohibit",
        /// Ends the lookup in this table; policy routing goes on with the next rule.
        Throw = "throw",
        Nat = "nat",
    }
}

keyword_enum! {
    /// How far away the destination of a route, or the reach of an address, is.
    pub enum Scope {
        Global = "global",
        Site = "site",
        Link = "link",
        Host = "host",
        Nowhere = "nowhere",
    }
}

keyword_enum! {
    /// Who installed a route (`proto`). Unnamed numbers are kept as `Other`.
    pub enum RouteProtocol {
        Redirect = "redirect",
        Kernel = "kernel",
        Boot = "boot",
        Static = "static",
        Ra = "ra",
        Dhcp = "dhcp",
        Zebra = "zebra",
        Bird = "bird",
        Babel = "babel",
        Bgp = "bgp",
        Ospf = "ospf",
    }
}

keyword_enum! {
    pub enum RouteFlag {
        /// The gateway is used as if on the link even when no prefix says so.
        Onlink = "onlink",
        /// The device has no carrier; the kernel skips the route.
        Linkdown = "linkdown",
        Dead = "dead",
        Pervasive = "pervasive",
        Offload = "offload",
        Notify = "notify",
        Unresolved = "unresolved",
    }
}

/// A routing table, by the name iproute2 gives it or by number.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "String")]
pub enum RouteTable {
    Main,
    Local,
    Default,
    Id(u32),
    /// A name from the collecting machine's `rt_tables`; its number is not in the dump.
    Named(String),
}

impl RouteTable {
    const DEFAULT_ID: u32 = 253;
    const MAIN_ID: u32 = 254;
    const LOCAL_ID: u32 = 255;

    /// The table's number, when the dump shows it.
    pub fn id(&self) -> Option<u32> {
        match self {
            RouteTable::Main => Some(Self::MAIN_ID),
            RouteTable::Local => Some(Self::LOCAL_ID),
            RouteTable::Default => Some(Self::DEFAULT_ID),
            RouteTable::Id(id) => Some(*id),
            RouteTable::Named(_) => None,
        }
    }
}

impl From<String> for RouteTable {
    fn from(name: String) -> Self {
        match name.as_str() {
            "main" => RouteTable::Main,
            "local" => RouteTable::Local,
            "default" => RouteTable::Default,
            _ => match name.parse() {
                Ok(Self::MAIN_ID) => RouteTable::Main,
                Ok(Self::LOCAL_ID) => RouteTable::Local,
                Ok(Self::DEFAULT_ID) => RouteTable::Default,
                Ok(id) => RouteTable::Id(id),
                Err(_) => RouteTable::Named(name),
            },
        }
    }
}

/// The TOS/DS field a route or rule matches: iproute2 prints it in hex, or by
/// its name in the collecting machine's `rt_dsfield` (`AF11`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "String")]
pub enum Tos {
    Value(u8),
    Named(String),
}

impl From<String> for Tos {
    fn from(text: String) -> Self {
        text.strip_prefix("0x")
            .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            .map_or(Tos::Named(text), Tos::Value)
    }
}

/// A route's destination as iproute2 prints it: `default`, a prefix, or a
/// bare address for a host route (/32, /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub enum Destination {
    Default,
    Prefix(IpNet),
}

impl TryFrom<String> for Destination {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text == "default" {
            return Ok(Destination::Default);
        }
        if let Ok(prefix) = text.parse::<IpNet>() {
            return Ok(Destination::Prefix(prefix));
        }
        text.parse::<IpAddr>()
            .map(|address| Destination::Prefix(IpNet::from(address)))
            .map_err(|_| format!("dst {text:?} is neither default, a prefix nor an address"))
    }
}

/// One route.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawRoute")]
pub struct Route {
    pub route_type: RouteType,
    pub dst: Destination,
    /// IPv4 or IPv6, when the dump shows which: from the destination, a
    /// same-family gateway, the preferred source, or IPv6's router
    /// preference. `None` for e.g. `unreachable default` in a dump of both
    /// families.
    pub family: Option<Family>,
    /// The next hop; it may be of the other family (`via inet6 fe80::1`).
    pub gateway: Option<IpAddr>,
    pub dev: Option<String>,
    pub table: RouteTable,
    pub metric: Option<u32>,
    pub scope: Scope,
    pub protocol: RouteProtocol,
    pub prefsrc: Option<IpAddr>,
    pub flags: Vec<RouteFlag>,
    pub tos: Option<Tos>,
    /// The path MTU the route imposes (`mtu` metric).
    pub mtu: Option<u32>,
    /// The nexthop object the route uses (`ip nexthop`); its gateways are
    /// already resolved into `gateway`/`dev` or `nexthops`.
    pub nhid: Option<u32>,
    /// The paths of a multipath (ECMP) route; empty for a single path.
    pub nexthops: Vec<Nexthop>,
}

impl Route {
    /// The destination as a prefix, `default` included when the family is known.
    pub fn destination(&self) -> Option<IpNet> {
        match (self.dst, self.family) {
            (Destination::Prefix(prefix), _) => Some(prefix),
            // The default prefixes are 0.0.0.0/0 and ::/0.
            (Destination::Default, Some(Family::Ipv4)) => Some(IpNet::V4(Ipv4Net::default())),
            (Destination::Default, Some(Family::Ipv6)) => Some(IpNet::V6(Ipv6Net::default())),
            (Destination::Default, None) => None,
        }
    }

    pub fn has_flag(&self, flag: &RouteFlag) -> bool {
        self.flags.contains(flag)
    }
}

/// One path of a multipath route.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawNexthop")]
pub struct Nexthop {
    pub gateway: Option<IpAddr>,
    pub dev: Option<String>,
    /// Relative share of the flows; 1 unless set.
    pub weight: u32,
    pub flags: Vec<RouteFlag>,
}

/// A gateway of another family than the route: `"via": {"family": "inet6", "host": "fe80::1"}`.
#[derive(Deserialize)]
struct RawVia {
    host: IpAddr,
}

/// The route metrics iproute2 prints as `"metrics": [{"mtu": 1400, ...}]`.
#[derive(Deserialize)]
struct RawMetrics {
    mtu: Option<u32>,
}

#[derive(Deserialize)]
struct RawRoute {
    #[serde(rename = "type")]
    route_type: Option<RouteType>,
    dst: Destination,
    gateway: Option<IpAddr>,
    via: Option<RawVia>,
    dev: Option<String>,
    table: Option<RouteTable>,
    metric: Option<u32>,
    scope: Option<Scope>,
    protocol: Option<RouteProtocol>,
    prefsrc: Option<IpAddr>,
    #[serde(default)]
    flags: Vec<RouteFlag>,
    tos: Option<Tos>,
    #[serde(default)]
    metrics: Vec<RawMetrics>,
    nhid: Option<u32>,
    /// IPv6 router preference: the kernel gives it for every IPv6 route and
    /// for no IPv4 one.
    pref: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    nexthops: Vec<RawNexthop>,
}

#[derive(Deserialize)]
struct RawNexthop {
    gateway: Option<IpAddr>,
    via: Option<RawVia>,
    dev: Option<String>,
    weight: Option<u32>,
    #[serde(default)]
    flags: Vec<RouteFlag>,
}

/// Without `-d`, iproute2 leaves out the values that are the common case:
/// those are the defaults here, so that such a dump reads the same.
impl TryFrom<RawRoute> for Route {
    type Error = String;

    fn try_from(raw: RawRoute) -> Result<Self, String> {
        let family = route_family(&raw)?;
        let nexthops = raw
            .nexthops
            .into_iter()
            .map(Nexthop::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Route {
            route_type: raw.route_type.unwrap_or(RouteType::Unicast),
            dst: raw.dst,
            family,
            gateway: gateway(raw.gateway, raw.via)?,
            dev: raw.dev,
            table: raw.table.unwrap_or(RouteTable::Main),
            metric: raw.metric,
            scope: raw.scope.unwrap_or(Scope::Global),
            protocol: raw.protocol.unwrap_or(RouteProtocol::Boot),
            prefsrc: raw.prefsrc,
            flags: raw.flags,
            tos: raw.tos,
            mtu: raw.metrics.iter().find_map(|m| m.mtu),
            nhid: raw.nhid,
            nexthops,
        })
    }
}

impl TryFrom<RawNexthop> for Nexthop {
    type Error = String;

    fn try_from(raw: RawNexthop) -> Result<Self, String> {
        Ok(Nexthop {
            gateway: gateway(raw.gateway, raw.via)?,
            dev: raw.dev,
            weight: raw.weight.unwrap_or(1),
            flags: raw.flags,
        })
    }
}

fn gateway(gateway: Option<IpAddr>, via: Option<RawVia>) -> Result<Option<IpAddr>, String> {
    match (gateway, via) {
        (Some(gateway), Some(via)) => Err(format!(
            "both gateway {gateway} and via {} are given",
            via.host
        )),
        (gateway, via) => Ok(gateway.or(via.map(|v| v.host))),
    }
}

/// Every family the route shows must agree; `gateway` (unlike `via`) is
/// always of the route's own family.
fn route_family(raw: &RawRoute) -> Result<Option<Family>, String> {
    let mut evidence = Vec::new();
    if let Destination::Prefix(prefix) = raw.dst {
        evidence.push(("dst", Family::of(prefix.addr())));
    }
    if let Some(gateway) = raw.gateway {
        evidence.push(("gateway", Family::of(gateway)));
    }
    if let Some(prefsrc) = raw.prefsrc {
        evidence.push(("prefsrc", Family::of(prefsrc)));
    }
    evidence.extend(
        raw.nexthops
            .iter()
            .filter_map(|n| n.gateway)
            .map(|gateway| ("nexthop gateway", Family::of(gateway))),
    );
    if raw.pref.is_some() {
        evidence.push(("pref", Family::Ipv6));
    }
    let Some(&(first, family)) = evidence.first() else {
        return Ok(None);
    };
    match evidence.iter().find(|(_, other)| *other != family) {
        Some((field, _)) => Err(format!("{field} is of another address family than {first}")),
        None => Ok(Some(family)),
    }
}

pub fn parse(text: &str) -> Parsed<Vec<Route>> {
    json::parse_array(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = include_str!("../../../tests/fixtures/dumps/node/ip-route.json");
    const NODE6: &str = include_str!("../../../tests/fixtures/dumps/node/ip-route6.json");
    const POD: &str = include_str!("../../../tests/fixtures/dumps/pod/ip-route.json");

    fn routes(text: &str) -> Vec<Route> {
        let (routes, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        routes.expect("the fixture is an array")
    }

    fn net(text: &str) -> IpNet {
        text.parse().expect("a prefix")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    /// The route to `dst` in `table`.
    fn find<'a>(routes: &'a [Route], table: &RouteTable, dst: &str) -> &'a Route {
        let dst = Destination::try_from(dst.to_owned()).expect("a destination");
        routes
            .iter()
            .find(|r| r.dst == dst && &r.table == table)
            .expect("route in fixture")
    }

    #[test]
    fn default_route_of_the_main_table_has_gateway_metric_and_protocol() {
        let routes = routes(NODE);
        let default = routes
            .iter()
            .find(|r| r.dst == Destination::Default && r.family == Some(Family::Ipv4))
            .expect("IPv4 default");
        assert_eq!(default.route_type, RouteType::Unicast);
        assert_eq!(default.table, RouteTable::Main);
        assert_eq!(default.gateway, Some(ip("192.168.50.254")));
        assert_eq!(default.dev.as_deref(), Some("eth0"));
        assert_eq!(default.metric, Some(100));
        assert_eq!(default.protocol, RouteProtocol::Static);
        assert_eq!(default.scope, Scope::Global);
        assert_eq!(default.destination(), Some(net("0.0.0.0/0")));
    }

    #[test]
    fn host_route_without_prefix_length_is_a_full_length_prefix() {
        let routes = routes(NODE);
        let host = find(&routes, &RouteTable::Main, "10.52.0.1");
        assert_eq!(host.dst, Destination::Prefix(net("10.52.0.1/32")));
        assert_eq!(host.tos, Some(Tos::Value(0x10)));
        assert_eq!(host.metric, Some(7));
        assert_eq!(host.protocol, RouteProtocol::Other("200".into()));
        let local = find(&routes, &RouteTable::Local, "2001:db8:50::1");
        assert_eq!(local.destination(), Some(net("2001:db8:50::1/128")));
        assert_eq!(local.route_type, RouteType::Local);
    }

    #[test]
    fn route_with_multipath_keeps_every_nexthop() {
        let routes = routes(NODE);
        let ecmp = find(&routes, &RouteTable::Main, "10.50.0.0/16");
        assert_eq!(ecmp.gateway, None);
        assert_eq!(ecmp.dev, None);
        assert_eq!(ecmp.family, Some(Family::Ipv4));
        let hops: Vec<_> = ecmp
            .nexthops
            .iter()
            .map(|n| (n.gateway, n.dev.as_deref(), n.weight))
            .collect();
        assert_eq!(
            hops,
            [
                (Some(ip("192.168.50.2")), Some("eth0"), 1),
                (Some(ip("192.168.50.3")), Some("eth0"), 2)
            ]
        );
    }

    #[test]
    fn flannel_route_is_onlink_through_the_vxlan_device() {
        let routes = routes(NODE);
        let flannel = find(&routes, &RouteTable::Main, "10.244.1.0/24");
        assert_eq!(flannel.gateway, Some(ip("10.244.1.0")));
        assert_eq!(flannel.dev.as_deref(), Some("flannel.1"));
        assert_eq!(flannel.flags, [RouteFlag::Onlink]);
        assert!(flannel.has_flag(&RouteFlag::Onlink));
    }

    #[test]
    fn route_on_a_device_without_carrier_is_linkdown() {
        let routes = routes(NODE);
        let down = find(&routes, &RouteTable::Main, "10.9.9.0/24");
        assert!(down.has_flag(&RouteFlag::Linkdown));
        assert_eq!(down.scope, Scope::Link);
        assert_eq!(down.protocol, RouteProtocol::Kernel);
        assert_eq!(down.prefsrc, Some(ip("10.9.9.1")));
    }

    #[test]
    fn every_route_type_of_the_fixture_is_recognised() {
        let routes = routes(NODE);
        let table_100 = RouteTable::Id(100);
        let types = [
            ("10.60.0.0/16", RouteType::Blackhole),
            ("10.61.0.0/16", RouteType::Unreachable),
            ("10.62.0.0/16", RouteType::Prohibit),
            ("10.63.0.0/16", RouteType::Throw),
            ("10.66.0.0/16", RouteType::Anycast),
            ("224.1.0.0/16", RouteType::Multicast),
        ];
        for (dst, route_type) in types {
            let route = find(&routes, &table_100, dst);
            assert_eq!(route.route_type, route_type, "{dst}");
            assert_eq!(route.table.id(), Some(100));
        }
        let broadcast = find(&routes, &RouteTable::Local, "10.244.0.255");
        assert_eq!(broadcast.route_type, RouteType::Broadcast);
        assert!(
            routes
                .iter()
                .all(|r| !matches!(r.route_type, RouteType::Other(_)))
        );
    }

    #[test]
    fn default_table_and_numeric_tables_are_told_apart() {
        let routes = routes(NODE);
        let in_default = find(&routes, &RouteTable::Default, "10.64.0.0/16");
        assert_eq!(in_default.table.id(), Some(253));
        assert_eq!(in_default.prefsrc, Some(ip("192.168.50.1")));
        assert_eq!(
            find(&routes, &RouteTable::Id(200), "10.70.0.0/16")
                .table
                .id(),
            Some(200)
        );
        assert_eq!(RouteTable::from("254".to_owned()), RouteTable::Main);
        assert_eq!(RouteTable::from("cilium".to_owned()).id(), None);
    }

    #[test]
    fn gateway_of_the_other_family_comes_from_via() {
        let routes = routes(NODE);
        let via = find(&routes, &RouteTable::Main, "10.53.0.0/16");
        assert_eq!(via.gateway, Some(ip("fe80::2")));
        assert_eq!(via.family, Some(Family::Ipv4));
    }

    #[test]
    fn mtu_metric_is_kept() {
        let routes = routes(NODE);
        assert_eq!(
            find(&routes, &RouteTable::Main, "10.54.0.0/16").mtu,
            Some(1400)
        );
        assert_eq!(find(&routes, &RouteTable::Main, "10.244.1.0/24").mtu, None);
    }

    #[test]
    fn nexthop_object_routes_keep_their_id_and_resolved_paths() {
        let routes = routes(NODE);
        let single = find(&routes, &RouteTable::Main, "10.56.0.0/16");
        assert_eq!(single.nhid, Some(7));
        assert_eq!(single.gateway, Some(ip("192.168.50.2")));
        let group = find(&routes, &RouteTable::Main, "10.57.0.0/16");
        assert_eq!(group.nhid, Some(9));
        assert_eq!(group.nexthops.len(), 2);
    }

    #[test]
    fn default_route_family_comes_from_gateway_or_ipv6_preference_or_stays_unknown() {
        let routes = routes(NODE);
        let defaults: Vec<_> = routes
            .iter()
            .filter(|r| r.dst == Destination::Default)
            .map(|r| (r.route_type.clone(), r.table.clone(), r.family))
            .collect();
        assert_eq!(
            defaults,
            [
                (RouteType::Unreachable, RouteTable::Id(101), None),
                (RouteType::Unicast, RouteTable::Main, Some(Family::Ipv4)),
                (
                    RouteType::Blackhole,
                    RouteTable::Id(100),
                    Some(Family::Ipv6)
                ),
                (RouteType::Unicast, RouteTable::Main, Some(Family::Ipv6)),
            ]
        );
        let unknown = find(&routes, &RouteTable::Id(101), "default");
        assert_eq!(unknown.destination(), None);
    }

    #[test]
    fn ipv6_dump_has_only_ipv6_routes() {
        let routes = routes(NODE6);
        assert!(!routes.is_empty());
        assert!(routes.iter().all(|r| r.family == Some(Family::Ipv6)));
        let ecmp = find(&routes, &RouteTable::Main, "2001:db8:1::/64");
        assert_eq!(ecmp.metric, Some(1024));
        assert_eq!(ecmp.nexthops.len(), 2);
        assert_eq!(ecmp.nexthops[1].gateway, Some(ip("2001:db8:50::3")));
        let default = find(&routes, &RouteTable::Main, "default");
        assert_eq!(default.destination(), Some(net("::/0")));
        assert_eq!(default.gateway, Some(ip("fe80::2")));
    }

    #[test]
    fn pod_has_a_default_route_to_the_bridge() {
        let routes = routes(POD);
        let default = find(&routes, &RouteTable::Main, "default");
        assert_eq!(default.gateway, Some(ip("10.244.0.1")));
        assert_eq!(default.dev.as_deref(), Some("eth0"));
    }

    #[test]
    fn values_left_out_without_details_take_iproute2_defaults() {
        let (routes, issues) =
            parse(r#"[{"dst":"10.0.0.0/8","gateway":"10.1.1.1","dev":"eth0","flags":[]}]"#);
        assert!(issues.is_empty(), "{issues:?}");
        let route = &routes.expect("an array")[0];
        assert_eq!(route.route_type, RouteType::Unicast);
        assert_eq!(route.table, RouteTable::Main);
        assert_eq!(route.scope, Scope::Global);
        assert_eq!(route.protocol, RouteProtocol::Boot);
    }

    #[test]
    fn unknown_route_type_and_named_tos_are_kept() {
        let (routes, issues) = parse(
            r#"[{"type":"xresolve","dst":"10.0.0.0/8","tos":"AF11","table":"cilium","flags":["rt_trap"]}]"#,
        );
        assert!(issues.is_empty(), "{issues:?}");
        let route = &routes.expect("an array")[0];
        assert_eq!(route.route_type, RouteType::Other("xresolve".into()));
        assert_eq!(route.tos, Some(Tos::Named("AF11".into())));
        assert_eq!(route.table, RouteTable::Named("cilium".into()));
        assert_eq!(route.flags, [RouteFlag::Other("rt_trap".into())]);
    }

    #[test]
    fn nat_route_is_recognised() {
        // The kernel no longer accepts NAT routes, so no fixture can have one.
        let (routes, issues) =
            parse(r#"[{"type":"nat","dst":"10.65.0.0/16","gateway":"1.2.3.4","table":"100"}]"#);
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(routes.expect("an array")[0].route_type, RouteType::Nat);
    }

    #[test]
    fn malformed_routes_are_issues_and_the_others_are_kept() {
        let text = concat!(
            r#"[{"dst":"10.0.0.0/8","dev":"eth0"},"#,
            r#"{"dst":"ten","dev":"eth0"},"#,
            r#"{"dst":"10.1.0.0/16","metric":"abc"},"#,
            r#"{"dst":"10.2.0.0/16","gateway":"fe80::1"},"#,
            r#"{"dev":"eth0"}]"#
        );
        let (routes, issues) = parse(text);
        assert_eq!(routes.expect("an array").len(), 1);
        let messages: Vec<_> = issues.iter().map(|i| i.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                r#"element 2 of the array: dst "ten" is neither default, a prefix nor an address"#,
                r#"element 3 of the array: invalid type: string "abc", expected u32"#,
                "element 4 of the array: gateway is of another address family than dst",
                "element 5 of the array: missing field `dst`",
            ]
        );
        assert!(issues.iter().all(|i| i.line == 1));
        let columns: Vec<_> = issues.iter().map(|i| i.column.expect("a column")).collect();
        assert!(columns.windows(2).all(|w| w[0] < w[1]), "{columns:?}");
    }
}
