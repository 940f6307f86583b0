//! `ip -j -d link show`: the network devices of a namespace, with the
//! kind-specific details (`-d`) that say how packets leave them: a veth's
//! peer, a VXLAN's VNI and underlay, a bridge port's state.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::de::{Error as _, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::json;
use super::keyword::keyword_enum;
use crate::snapshot::problem::Parsed;

/// An Ethernet (EUI-48) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The all-zeros address: in a VXLAN FDB, the entry every unknown
    /// destination is flooded to.
    pub const ZERO: MacAddr = MacAddr([0; 6]);
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a MAC address (six hex bytes separated by colons)")]
pub struct MacAddrError(String);

impl FromStr for MacAddr {
    type Err = MacAddrError;

    fn from_str(text: &str) -> Result<Self, MacAddrError> {
        let error = || MacAddrError(text.to_owned());
        let mut bytes = [0; 6];
        let mut parts = text.split(':');
        for byte in &mut bytes {
            let part = parts.next().ok_or_else(error)?;
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(error());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| error())?;
        }
        match parts.next() {
            Some(_) => Err(error()),
            None => Ok(MacAddr(bytes)),
        }
    }
}

impl TryFrom<String> for MacAddr {
    type Error = MacAddrError;

    fn try_from(text: String) -> Result<Self, MacAddrError> {
        text.parse()
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// A link-layer address: a MAC on Ethernet-like devices; tunnels print
/// their IP endpoint here and other link types their own formats, kept as
/// printed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "String")]
pub enum LinkLayerAddress {
    Mac(MacAddr),
    Other(String),
}

impl From<String> for LinkLayerAddress {
    fn from(text: String) -> Self {
        text.parse()
            .map_or(LinkLayerAddress::Other(text), LinkLayerAddress::Mac)
    }
}

keyword_enum! {
    /// A device flag (`<BROADCAST,MULTICAST,UP,LOWER_UP>`).
    pub enum LinkFlag {
        /// Administratively up.
        Up = "UP",
        /// The device has carrier.
        LowerUp = "LOWER_UP",
        Broadcast = "BROADCAST",
        Multicast = "MULTICAST",
        Loopback = "LOOPBACK",
        PointToPoint = "POINTOPOINT",
        NoArp = "NOARP",
        Promisc = "PROMISC",
        NoCarrier = "NO-CARRIER",
        Dormant = "DORMANT",
        /// The device is up but its lower device (or veth peer) is down.
        MDown = "M-DOWN",
        Slave = "SLAVE",
        Master = "MASTER",
    }
}

keyword_enum! {
    /// RFC 2863 operational state (`operstate`).
    pub enum OperState {
        Up = "UP",
        Down = "DOWN",
        /// Normal for loopback and tunnels, which report no state.
        Unknown = "UNKNOWN",
        LowerLayerDown = "LOWERLAYERDOWN",
        Dormant = "DORMANT",
        NotPresent = "NOTPRESENT",
        Testing = "TESTING",
    }
}

keyword_enum! {
    /// The spanning-tree state of a bridge port; only a forwarding port
    /// passes traffic.
    pub enum BridgePortState {
        Disabled = "disabled",
        Listening = "listening",
        Learning = "learning",
        Forwarding = "forwarding",
        Blocking = "blocking",
    }
}

/// One network device.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Link {
    pub ifindex: u32,
    pub ifname: String,
    #[serde(default)]
    pub flags: Vec<LinkFlag>,
    pub mtu: u32,
    pub operstate: OperState,
    /// The device this one is tied to, by name, when it is in this
    /// namespace: a veth's peer, a macvlan's parent. `None` too for a tunnel
    /// bound to no device (`tunl0@NONE`).
    pub link: Option<String>,
    /// The ifindex of that device when it is in another namespace (a pod's
    /// veth peer), which `link_netnsid` then names.
    pub link_index: Option<u32>,
    /// The namespace of the peer, as this namespace numbers its peers.
    pub link_netnsid: Option<i32>,
    /// The bridge (or bond, VRF) this device is a port of.
    pub master: Option<String>,
    pub address: Option<LinkLayerAddress>,
    /// Kind and port details; only printed with `-d`, and absent for
    /// loopback and physical devices.
    pub linkinfo: Option<LinkInfo>,
}

impl Link {
    pub fn kind(&self) -> Option<&LinkKind> {
        self.linkinfo.as_ref().and_then(|info| info.kind.as_ref())
    }

    pub fn port(&self) -> Option<&LinkPort> {
        self.linkinfo.as_ref().and_then(|info| info.port.as_ref())
    }

    pub fn has_flag(&self, flag: &LinkFlag) -> bool {
        self.flags.contains(flag)
    }
}

/// `linkinfo`: what kind of device this is (`info_kind`, `info_data`) and,
/// when it is a port of another device, its port settings
/// (`info_slave_kind`, `info_slave_data`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    pub kind: Option<LinkKind>,
    pub port: Option<LinkPort>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkKind {
    Veth,
    Bridge(BridgeInfo),
    Vxlan(VxlanInfo),
    Ipip(IpipInfo),
    Dummy,
    /// A kind without typed details here (macvlan, wireguard, ...).
    Other(String),
}

impl LinkKind {
    /// A kind whose `info_data` is not typed here (or not printed).
    fn without_data(name: String) -> Result<LinkKind, String> {
        match name.as_str() {
            "veth" => Ok(LinkKind::Veth),
            "dummy" => Ok(LinkKind::Dummy),
            "bridge" | "vxlan" | "ipip" => Err(format!(
                "{name} device without info_data (was the dump taken without -d?)"
            )),
            _ => Ok(LinkKind::Other(name)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkPort {
    Bridge(BridgePortInfo),
    /// A port of another kind of master (bond, team, vrf).
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BridgeInfo {
    /// Spanning tree on (`stp_state` 1 for the kernel's, 2 for a user-space daemon).
    #[serde(rename = "stp_state", default, deserialize_with = "json::nonzero")]
    pub stp: bool,
    #[serde(default, deserialize_with = "json::nonzero")]
    pub vlan_filtering: bool,
    /// Bridged IPv4 traffic goes through iptables (br_netfilter).
    #[serde(default, deserialize_with = "json::nonzero")]
    pub nf_call_iptables: bool,
    #[serde(default, deserialize_with = "json::nonzero")]
    pub nf_call_ip6tables: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VxlanInfo {
    /// The VNI.
    pub id: u32,
    #[serde(alias = "local6")]
    pub local: Option<IpAddr>,
    /// The single remote endpoint, when not left to the FDB.
    #[serde(alias = "remote6")]
    pub remote: Option<IpAddr>,
    /// The multicast group unknown destinations are flooded to.
    #[serde(alias = "group6")]
    pub group: Option<IpAddr>,
    /// UDP destination port.
    pub port: Option<u16>,
    /// The underlay device.
    pub link: Option<String>,
    /// Whether source MACs are learnt into the FDB; Flannel turns it off
    /// and programs the FDB itself.
    pub learning: Option<bool>,
    /// Collect-metadata mode: the endpoint comes from each packet's metadata
    /// (Cilium, OVS), not from this device.
    #[serde(default)]
    pub external: bool,
    /// The outer packet's DF bit; iproute2 prints `unset` by default.
    pub df: Option<VxlanDf>,
}

keyword_enum! {
    /// `df` of a VXLAN device: whether its outer packets may be fragmented.
    pub enum VxlanDf {
        /// DF clear: an outer packet too large for the underlay is fragmented.
        Unset = "unset",
        Set = "set",
        /// Copied from the inner packet.
        Inherit = "inherit",
    }
}

/// An IPIP tunnel's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IpipInfo {
    pub local: TunnelEndpoint,
    pub remote: TunnelEndpoint,
    /// The underlay device the tunnel is bound to.
    pub link: Option<String>,
}

/// A tunnel endpoint: `any` (Calico's `tunl0` takes every remote) or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub enum TunnelEndpoint {
    Any,
    Address(IpAddr),
}

impl TryFrom<String> for TunnelEndpoint {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text == "any" {
            return Ok(TunnelEndpoint::Any);
        }
        text.parse()
            .map(TunnelEndpoint::Address)
            .map_err(|_| format!("tunnel endpoint {text:?} is neither any nor an address"))
    }
}

/// A bridge port's settings (`info_slave_data`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BridgePortInfo {
    pub state: BridgePortState,
    /// Frames may leave through the port they came in on; a pod reaching
    /// itself through a service needs it.
    pub hairpin: Option<bool>,
    pub learning: Option<bool>,
    /// Unknown unicast is flooded to this port.
    pub flood: Option<bool>,
    /// An isolated port talks only to non-isolated ports.
    pub isolated: Option<bool>,
    pub proxy_arp: Option<bool>,
}

/// `info_data` follows `info_kind` in iproute2's output and is read
/// according to it, so a type error inside it keeps its exact position. JSON
/// does not order keys, though: data that comes first is kept and read once
/// the kind is known (its errors then carry the object's position).
impl<'de> Deserialize<'de> for LinkInfo {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LinkInfoVisitor)
    }
}

struct LinkInfoVisitor;

impl<'de> Visitor<'de> for LinkInfoVisitor {
    type Value = LinkInfo;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a linkinfo object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LinkInfo, A::Error> {
        let mut kind_name: Option<String> = None;
        let mut kind = None;
        let mut port_name: Option<String> = None;
        let mut port = None;
        let mut early_data: Option<serde_json::Value> = None;
        let mut early_port_data: Option<serde_json::Value> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "info_kind" => kind_name = Some(map.next_value()?),
                "info_slave_kind" => port_name = Some(map.next_value()?),
                "info_data" => {
                    let Some(name) = kind_name.as_deref() else {
                        early_data = Some(map.next_value()?);
                        continue;
                    };
                    kind = Some(match name {
                        "bridge" => LinkKind::Bridge(map.next_value()?),
                        "vxlan" => LinkKind::Vxlan(map.next_value()?),
                        "ipip" => LinkKind::Ipip(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            LinkKind::without_data(name.to_owned()).map_err(A::Error::custom)?
                        }
                    });
                }
                "info_slave_data" => {
                    let Some(name) = port_name.as_deref() else {
                        early_port_data = Some(map.next_value()?);
                        continue;
                    };
                    port = Some(match name {
                        "bridge" => LinkPort::Bridge(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            LinkPort::Other(name.to_owned())
                        }
                    });
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if let (Some(data), Some(name)) = (early_data, kind_name.as_deref()) {
            kind = Some(match name {
                "bridge" => LinkKind::Bridge(from_value(data)?),
                "vxlan" => LinkKind::Vxlan(from_value(data)?),
                "ipip" => LinkKind::Ipip(from_value(data)?),
                _ => LinkKind::without_data(name.to_owned()).map_err(A::Error::custom)?,
            });
        }
        if let (Some(data), Some(name)) = (early_port_data, port_name.as_deref()) {
            port = Some(match name {
                "bridge" => LinkPort::Bridge(from_value(data)?),
                _ => LinkPort::Other(name.to_owned()),
            });
        }
        if kind.is_none() {
            kind = kind_name
                .map(LinkKind::without_data)
                .transpose()
                .map_err(A::Error::custom)?;
        }
        if port.is_none() {
            port = match port_name.as_deref() {
                Some("bridge") => {
                    return Err(A::Error::custom(
                        "bridge port without info_slave_data (was the dump taken without -d?)",
                    ));
                }
                Some(other) => Some(LinkPort::Other(other.to_owned())),
                None => None,
            };
        }
        Ok(LinkInfo { kind, port })
    }
}

/// Reads kind data that was kept aside because it came before its kind.
fn from_value<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    data: serde_json::Value,
) -> Result<T, E> {
    serde_json::from_value(data).map_err(E::custom)
}

pub fn parse(text: &str) -> Parsed<Vec<Link>> {
    json::parse_array(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = include_str!("../../../tests/fixtures/dumps/node/ip-link.json");
    const POD: &str = include_str!("../../../tests/fixtures/dumps/pod/ip-link.json");

    fn links(text: &str) -> Vec<Link> {
        let (links, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        links.expect("the fixture is an array")
    }

    /// JSON objects are unordered: a dump rewritten by a JSON tool (keys
    /// sorted) puts `info_data` before `info_kind`.
    #[test]
    fn linkinfo_data_before_its_kind_is_still_read() {
        let text = r#"[{"ifindex":5,"ifname":"vx","flags":["UP"],"mtu":1450,"operstate":"UNKNOWN",
            "linkinfo":{"info_data":{"id":7,"port":4789},"info_kind":"vxlan",
                        "info_slave_data":{"state":"forwarding"},"info_slave_kind":"bridge"}}]"#;
        let link = &links(text)[0];
        let Some(LinkKind::Vxlan(vxlan)) = link.kind() else {
            panic!("{link:?}")
        };
        assert_eq!((vxlan.id, vxlan.port), (7, Some(4789)));
        assert!(matches!(link.port(), Some(LinkPort::Bridge(_))), "{link:?}");
    }

    fn named<'a>(links: &'a [Link], ifname: &str) -> &'a Link {
        links
            .iter()
            .find(|l| l.ifname == ifname)
            .expect("link in fixture")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    fn mac(text: &str) -> MacAddr {
        text.parse().expect("a MAC")
    }

    #[test]
    fn loopback_has_flags_state_and_no_kind() {
        let links = links(NODE);
        let lo = named(&links, "lo");
        assert_eq!(lo.ifindex, 1);
        assert_eq!(lo.mtu, 65536);
        assert_eq!(lo.operstate, OperState::Unknown);
        assert_eq!(
            lo.flags,
            [LinkFlag::Loopback, LinkFlag::Up, LinkFlag::LowerUp]
        );
        assert_eq!(lo.address, Some(LinkLayerAddress::Mac(MacAddr::ZERO)));
        assert_eq!(lo.kind(), None);
    }

    #[test]
    fn veth_peer_in_another_namespace_is_known_by_ifindex_and_netnsid() {
        let node = links(NODE);
        let port = named(&node, "vethpod0");
        assert_eq!(port.kind(), Some(&LinkKind::Veth));
        assert_eq!(port.link, None);
        assert_eq!(port.link_index, Some(2));
        assert_eq!(port.link_netnsid, Some(1));
        assert_eq!(port.master.as_deref(), Some("cni0"));
        assert_eq!(
            port.address,
            Some(LinkLayerAddress::Mac(mac("0a:00:00:00:0a:01")))
        );
        // And from the pod's side, the peer is the node's ifindex 4.
        let pod = links(POD);
        let eth0 = named(&pod, "eth0");
        assert_eq!((eth0.link_index, eth0.link_netnsid), (Some(4), Some(0)));
    }

    #[test]
    fn veth_peer_in_the_same_namespace_is_known_by_name() {
        let links = links(NODE);
        let vd0 = named(&links, "vd0");
        assert_eq!(vd0.link.as_deref(), Some("vd1"));
        assert_eq!(vd0.link_index, None);
        assert_eq!(vd0.operstate, OperState::LowerLayerDown);
        assert!(vd0.has_flag(&LinkFlag::Up));
        assert!(vd0.has_flag(&LinkFlag::NoCarrier));
        assert!(!vd0.has_flag(&LinkFlag::LowerUp));
    }

    #[test]
    fn bridge_port_state_and_settings_are_typed() {
        let links = links(NODE);
        let Some(LinkPort::Bridge(port)) = named(&links, "vethpod0").port() else {
            panic!("vethpod0 is a bridge port");
        };
        assert_eq!(port.state, BridgePortState::Forwarding);
        assert_eq!(port.hairpin, Some(false));
        assert_eq!(port.learning, Some(true));
        assert_eq!(port.flood, Some(true));
        assert_eq!(port.isolated, Some(false));
        assert_eq!(port.proxy_arp, Some(false));
    }

    #[test]
    fn bridge_details_say_whether_stp_and_vlan_filtering_are_on() {
        let links = links(NODE);
        let expected = |stp| {
            LinkKind::Bridge(BridgeInfo {
                stp,
                vlan_filtering: false,
                nf_call_iptables: false,
                nf_call_ip6tables: false,
            })
        };
        let cni0 = named(&links, "cni0");
        assert_eq!(cni0.kind(), Some(&expected(false)));
        assert_eq!(cni0.operstate, OperState::Up);
        assert_eq!(named(&links, "br-stp").kind(), Some(&expected(true)));
    }

    #[test]
    fn flannel_vxlan_has_vni_local_port_underlay_and_no_learning() {
        let links = links(NODE);
        let flannel = named(&links, "flannel.1");
        assert_eq!(flannel.mtu, 1450);
        let expected = VxlanInfo {
            id: 1,
            local: Some(ip("192.168.50.1")),
            remote: None,
            group: None,
            port: Some(8472),
            link: Some("eth0".into()),
            learning: Some(false),
            external: false,
            df: Some(VxlanDf::Unset),
        };
        assert_eq!(flannel.kind(), Some(&LinkKind::Vxlan(expected)));
    }

    #[test]
    fn vxlan_df_word_skoop_does_not_know_keeps_the_device() {
        // The fixture's flannel.1 with a `df` word of a future iproute2.
        let mut elements: Vec<serde_json::Value> = serde_json::from_str(NODE).unwrap();
        let mut flannel = elements
            .drain(..)
            .find(|link| link["ifname"] == "flannel.1")
            .expect("flannel.1 in the fixture");
        assert_eq!(flannel["linkinfo"]["info_data"]["df"], "unset");
        flannel["linkinfo"]["info_data"]["df"] = "auto".into();
        let text = serde_json::Value::Array(vec![flannel]).to_string();
        let links = links(&text);
        let Some(LinkKind::Vxlan(info)) = named(&links, "flannel.1").kind() else {
            panic!("flannel.1 is a vxlan");
        };
        assert_eq!(info.df, Some(VxlanDf::Other("auto".into())));
    }

    #[test]
    fn vxlan_remote_group_and_ipv6_endpoints_are_read() {
        let links = links(NODE);
        let Some(LinkKind::Vxlan(vx100)) = named(&links, "vx100").kind() else {
            panic!("vx100 is a vxlan");
        };
        assert_eq!(
            (vx100.id, vx100.remote, vx100.learning),
            (100, Some(ip("192.168.50.3")), Some(true))
        );
        let vx200 = named(&links, "vx200");
        let Some(LinkKind::Vxlan(info)) = vx200.kind() else {
            panic!("vx200 is a vxlan");
        };
        assert_eq!((info.group, info.remote), (Some(ip("239.1.1.1")), None));
        assert!(matches!(vx200.port(), Some(LinkPort::Bridge(_))));
        let Some(LinkKind::Vxlan(vx6)) = named(&links, "vx6").kind() else {
            panic!("vx6 is a vxlan");
        };
        assert_eq!(vx6.local, Some(ip("2001:db8:50::1")));
        assert_eq!(vx6.remote, Some(ip("2001:db8:50::3")));
    }

    #[test]
    fn kind_without_typed_details_is_kept_by_name() {
        let links = links(NODE);
        let mv0 = named(&links, "mv0");
        assert_eq!(mv0.kind(), Some(&LinkKind::Other("macvlan".into())));
        assert_eq!(mv0.link.as_deref(), Some("eth0"));
    }

    #[test]
    fn ipip_tunnel_has_its_endpoints() {
        // Hand-made: this kernel has no ipip module, so no fixture can show
        // one. Shaped like Calico's tunl0 (`ip -j -d link show tunl0`).
        let text = r#"[{"ifindex":5,"link":null,"ifname":"tunl0","flags":["NOARP","UP","LOWER_UP"],"mtu":1480,"qdisc":"noqueue","operstate":"UNKNOWN","linkmode":"DEFAULT","group":"default","txqlen":1000,"link_type":"ipip","address":"0.0.0.0","broadcast":"0.0.0.0","promiscuity":0,"min_mtu":0,"max_mtu":0,"linkinfo":{"info_kind":"ipip","info_data":{"proto":"ipip","remote":"any","local":"any","ttl":0,"pmtudisc":true}}},
{"ifindex":6,"ifname":"ipip0","flags":["POINTOPOINT","NOARP","UP","LOWER_UP"],"mtu":1480,"operstate":"UNKNOWN","link_type":"ipip","address":"192.168.50.1","linkinfo":{"info_kind":"ipip","info_data":{"proto":"ipip","remote":"192.168.50.3","local":"192.168.50.1","link":"eth0","ttl":64,"pmtudisc":true}}}]"#;
        let links = links(text);
        let tunl0 = named(&links, "tunl0");
        assert_eq!(tunl0.link, None);
        assert_eq!(
            tunl0.address,
            Some(LinkLayerAddress::Other("0.0.0.0".into()))
        );
        let any = IpipInfo {
            local: TunnelEndpoint::Any,
            remote: TunnelEndpoint::Any,
            link: None,
        };
        assert_eq!(tunl0.kind(), Some(&LinkKind::Ipip(any)));
        let Some(LinkKind::Ipip(ipip0)) = named(&links, "ipip0").kind() else {
            panic!("ipip0 is an ipip tunnel");
        };
        assert_eq!(ipip0.remote, TunnelEndpoint::Address(ip("192.168.50.3")));
        assert_eq!(ipip0.link.as_deref(), Some("eth0"));
    }

    #[test]
    fn dummy_device_is_recognised() {
        // Hand-made: this kernel has no dummy module.
        let links = links(
            r#"[{"ifindex":3,"ifname":"kube-ipvs0","flags":["BROADCAST","NOARP"],"mtu":1500,"operstate":"DOWN","linkinfo":{"info_kind":"dummy"}}]"#,
        );
        assert_eq!(links[0].kind(), Some(&LinkKind::Dummy));
        assert!(links[0].has_flag(&LinkFlag::NoArp));
    }

    #[test]
    fn physical_bridge_port_has_a_port_but_no_kind() {
        let links = links(
            r#"[{"ifindex":2,"ifname":"eno1","mtu":1500,"operstate":"UP","linkinfo":{"info_slave_kind":"bond","info_slave_data":{"state":"ACTIVE"}}}]"#,
        );
        assert_eq!(links[0].kind(), None);
        assert_eq!(links[0].port(), Some(&LinkPort::Other("bond".into())));
    }

    #[test]
    fn malformed_links_are_issues_and_the_others_are_kept() {
        let text = concat!(
            r#"[{"ifindex":1,"ifname":"lo","mtu":65536,"operstate":"UNKNOWN"},"#,
            r#"{"ifindex":2,"ifname":"eth0","mtu":"abc","operstate":"UP"},"#,
            r#""eth1","#,
            r#"{"ifindex":4,"ifname":"vx","mtu":1450,"operstate":"UP","linkinfo":{"info_kind":"vxlan","info_data":{"id":"one"}}},"#,
            r#"{"ifindex":5,"ifname":"br","mtu":1500,"operstate":"UP","linkinfo":{"info_kind":"bridge"}},"#,
            r#"{"ifindex":6,"ifname":"t","mtu":1480,"operstate":"UP","linkinfo":{"info_kind":"ipip","info_data":{"local":"any","remote":"somewhere"}}}]"#
        );
        let (links, issues) = parse(text);
        let names: Vec<_> = links
            .expect("an array")
            .into_iter()
            .map(|l| l.ifname)
            .collect();
        assert_eq!(names, ["lo"]);
        let messages: Vec<_> = issues.iter().map(|i| i.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                r#"element 2 of the array: invalid type: string "abc", expected u32"#,
                r#"element 3 of the array: invalid type: string "eth1", expected struct Link"#,
                r#"element 4 of the array: invalid type: string "one", expected u32"#,
                "element 5 of the array: bridge device without info_data (was the dump taken without -d?)",
                r#"element 6 of the array: tunnel endpoint "somewhere" is neither any nor an address"#,
            ]
        );
        // Each issue points inside its own element.
        let abc = text.find(r#""abc""#).expect("in text");
        assert_eq!(issues[0].column, Some(abc + 5));
        let one = text.find(r#""one""#).expect("in text");
        assert_eq!(issues[2].column, Some(one + 5));
    }

    #[test]
    fn mac_addresses_parse_and_print_in_iproute2_form() {
        assert_eq!(mac("0a:58:0A:f4:1:00").to_string(), "0a:58:0a:f4:01:00");
        for bad in [
            "",
            "+a:58:0a:f4:01:00",
            "0a:58:0a:f4:01",
            "0a:58:0a:f4:01:00:00",
            "0a:58:0a:f4:01:100",
            "0a::0a:f4:01:00",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?}");
        }
    }
}
