//! `bridge -j fdb show`: the forwarding databases, of bridges (which port a
//! MAC is behind) and of VXLAN devices (which remote VTEP a MAC is behind).

use std::net::IpAddr;

use serde::Deserialize;

use super::json;
use super::keyword::keyword_enum;
use super::link::MacAddr;
use crate::snapshot::problem::Parsed;

keyword_enum! {
    pub enum FdbState {
        /// Local to this host: the address of the port itself.
        Permanent = "permanent",
        /// Added by hand (`static`); never ages out.
        Static = "static",
        Stale = "stale",
        /// Learnt and ageing: iproute2 prints an empty state for it.
        Dynamic = "",
    }
}

keyword_enum! {
    pub enum FdbFlag {
        /// In the device's own table (a VXLAN's, a NIC's), not the bridge's.
        SelfEntry = "self",
        /// In the table of the bridge the device is a port of.
        Master = "master",
        Router = "router",
        /// Added by a control plane outside the kernel.
        ExternLearn = "extern_learn",
        Offload = "offload",
        /// Never moves to another port.
        Sticky = "sticky",
    }
}

/// One forwarding entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FdbEntry {
    pub mac: MacAddr,
    /// The port or device the entry is on (`ifname`; `dev` in older iproute2).
    #[serde(alias = "dev")]
    pub ifname: String,
    /// The bridge whose table holds the entry, for bridge entries.
    pub master: Option<String>,
    /// The remote VTEP, for VXLAN entries; all-zeros MAC entries list the
    /// VTEPs that unknown destinations are flooded to.
    pub dst: Option<IpAddr>,
    pub vlan: Option<u16>,
    /// VNI, when it differs from the device's.
    pub vni: Option<u32>,
    /// UDP port, when it differs from the device's.
    pub port: Option<u16>,
    /// The underlay device to reach `dst` through.
    #[serde(rename = "viaIf")]
    pub via_if: Option<String>,
    #[serde(default)]
    pub flags: Vec<FdbFlag>,
    pub state: FdbState,
}

impl FdbEntry {
    pub fn has_flag(&self, flag: &FdbFlag) -> bool {
        self.flags.contains(flag)
    }
}

pub fn parse(text: &str) -> Parsed<Vec<FdbEntry>> {
    json::parse_array(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = include_str!("../../../tests/fixtures/dumps/node/bridge-fdb.json");
    const POD: &str = include_str!("../../../tests/fixtures/dumps/pod/bridge-fdb.json");

    fn entries(text: &str) -> Vec<FdbEntry> {
        let (entries, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        entries.expect("the fixture is an array")
    }

    fn on<'a>(entries: &'a [FdbEntry], ifname: &str) -> Vec<&'a FdbEntry> {
        entries.iter().filter(|e| e.ifname == ifname).collect()
    }

    fn mac(text: &str) -> MacAddr {
        text.parse().expect("a MAC")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn flannel_fdb_has_default_flood_entries_and_per_mac_vteps() {
        let entries = entries(NODE);
        let flannel = on(&entries, "flannel.1");
        let vteps: Vec<_> = flannel.iter().map(|e| (e.mac, e.dst)).collect();
        assert_eq!(
            vteps,
            [
                (mac("0a:00:00:00:01:02"), Some(ip("192.168.50.2"))),
                (MacAddr::ZERO, Some(ip("192.168.50.2"))),
                (MacAddr::ZERO, Some(ip("192.168.50.3"))),
            ]
        );
        assert!(flannel.iter().all(|e| e.has_flag(&FdbFlag::SelfEntry)));
        assert!(
            flannel
                .iter()
                .all(|e| e.state == FdbState::Permanent && e.master.is_none())
        );
    }

    #[test]
    fn vxlan_entry_may_name_its_own_vni_port_and_underlay() {
        let entries = entries(NODE);
        let vx100 = on(&entries, "vx100");
        assert_eq!((vx100[0].vni, vx100[0].port), (Some(300), Some(4790)));
        assert_eq!(vx100[0].dst, Some(ip("192.168.50.4")));
        assert_eq!(vx100[1].via_if.as_deref(), Some("eth0"));
        let group = on(&entries, "vx200")
            .into_iter()
            .find(|e| e.dst.is_some())
            .expect("group entry");
        assert_eq!(group.dst, Some(ip("239.1.1.1")));
        assert_eq!(on(&entries, "vx6")[0].dst, Some(ip("2001:db8:50::3")));
    }

    #[test]
    fn bridge_entries_have_their_master_and_state() {
        let entries = entries(NODE);
        let port = on(&entries, "vethpod0");
        let bridge: Vec<_> = port
            .iter()
            .filter(|e| e.master.as_deref() == Some("cni0"))
            .map(|e| (e.mac.to_string(), e.state.clone(), e.flags.clone()))
            .collect();
        assert_eq!(
            bridge,
            [
                (
                    "0a:00:00:00:0a:0a".into(),
                    FdbState::Dynamic,
                    vec![FdbFlag::ExternLearn]
                ),
                ("0a:00:00:00:0a:09".into(), FdbState::Static, vec![]),
                ("0a:00:00:00:0a:02".into(), FdbState::Dynamic, vec![]),
                ("0a:00:00:00:0a:01".into(), FdbState::Permanent, vec![]),
            ]
        );
        let sticky = on(&entries, "vx200")[0];
        assert!(sticky.has_flag(&FdbFlag::Sticky));
        assert_eq!(sticky.state, FdbState::Static);
    }

    #[test]
    fn pod_fdb_has_only_multicast_entries_of_its_own_device() {
        let entries = entries(POD);
        assert_eq!(entries.len(), 4);
        assert!(
            entries
                .iter()
                .all(|e| e.ifname == "eth0" && e.has_flag(&FdbFlag::SelfEntry))
        );
    }

    #[test]
    fn vlan_and_older_dev_field_are_read() {
        // Hand-made: this kernel has no bridge VLAN filtering, so no fixture
        // entry carries a VLAN.
        let text = r#"[{"mac":"0a:00:00:00:0a:09","dev":"vethpod0","vlan":10,"flags":["offload"],"master":"cni0","state":"stale"}]"#;
        let entry = &entries(text)[0];
        assert_eq!(entry.ifname, "vethpod0");
        assert_eq!(entry.vlan, Some(10));
        assert_eq!(entry.flags, [FdbFlag::Offload]);
        assert_eq!(entry.state, FdbState::Stale);
    }

    #[test]
    fn malformed_entries_are_issues_and_the_others_are_kept() {
        let text = concat!(
            r#"[{"mac":"0a:00:00:00:0a:09","ifname":"eth0","state":"permanent"},"#,
            r#"{"mac":"0a:00:00:00:0a","ifname":"eth0","state":"permanent"},"#,
            r#"{"mac":"0a:00:00:00:0a:0b","ifname":"eth0","vlan":70000,"state":"static"},"#,
            r#"{"mac":"0a:00:00:00:0a:0c","ifname":"eth0","state":"0x80"}]"#
        );
        let (entries, issues) = parse(text);
        let entries = entries.expect("an array");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].state, FdbState::Other("0x80".into()));
        let messages: Vec<_> = issues.iter().map(|i| i.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                r#"element 2 of the array: "0a:00:00:00:0a" is not a MAC address (six hex bytes separated by colons)"#,
                "element 3 of the array: invalid value: integer `70000`, expected u16",
            ]
        );
    }
}
