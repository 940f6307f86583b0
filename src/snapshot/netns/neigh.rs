//! `ip -j neigh show`: the ARP / NDP table, the link-layer address each
//! next hop resolves to.
//!
//! Note that iproute2 leaves NOARP entries out unless asked for `nud all`.

use std::net::IpAddr;

use serde::Deserialize;

use super::json;
use super::keyword::keyword_enum;
use super::link::LinkLayerAddress;
use crate::snapshot::problem::Parsed;

keyword_enum! {
    /// Neighbour unreachability detection state (`nud`).
    pub enum NeighbourState {
        /// Being resolved; no address yet.
        Incomplete = "INCOMPLETE",
        Reachable = "REACHABLE",
        /// Usable, to be confirmed on next use.
        Stale = "STALE",
        Delay = "DELAY",
        Probe = "PROBE",
        /// Resolution failed: packets to this neighbour are dropped.
        Failed = "FAILED",
        Noarp = "NOARP",
        /// Set by hand (or by a CNI) and never expires.
        Permanent = "PERMANENT",
        None = "NONE",
    }
}

/// One neighbour entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Neighbour {
    pub dst: IpAddr,
    pub dev: String,
    /// Absent while resolving and after a failure.
    pub lladdr: Option<LinkLayerAddress>,
    /// Usually one state; the kernel may combine some.
    #[serde(default)]
    pub state: Vec<NeighbourState>,
    /// The neighbour is an IPv6 router.
    #[serde(default, deserialize_with = "json::present")]
    pub router: bool,
    /// A proxy entry: this host answers for `dst` (`ip neigh add proxy`).
    #[serde(default, deserialize_with = "json::present")]
    pub proxy: bool,
    /// Learnt by a control plane outside the kernel (EVPN, some CNIs).
    #[serde(default, deserialize_with = "json::present")]
    pub extern_learn: bool,
}

impl Neighbour {
    pub fn has_state(&self, state: &NeighbourState) -> bool {
        self.state.contains(state)
    }
}

pub fn parse(text: &str) -> Parsed<Vec<Neighbour>> {
    json::parse_array(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::netns::link::MacAddr;

    const NODE: &str = include_str!("../../../tests/fixtures/dumps/node/ip-neigh.json");
    const POD: &str = include_str!("../../../tests/fixtures/dumps/pod/ip-neigh.json");

    fn node() -> Vec<Neighbour> {
        let (neighbours, issues) = parse(NODE);
        assert!(issues.is_empty(), "{issues:?}");
        neighbours.expect("the fixture is an array")
    }

    fn of<'a>(neighbours: &'a [Neighbour], dst: &str) -> &'a Neighbour {
        let dst: IpAddr = dst.parse().expect("an address");
        neighbours
            .iter()
            .find(|n| n.dst == dst)
            .expect("neighbour in fixture")
    }

    fn mac(text: &str) -> Option<LinkLayerAddress> {
        Some(LinkLayerAddress::Mac(
            text.parse::<MacAddr>().expect("a MAC"),
        ))
    }

    #[test]
    fn flannel_permanent_neighbour_maps_the_remote_vtep_address() {
        let neighbours = node();
        let vtep = of(&neighbours, "10.244.1.0");
        assert_eq!(vtep.dev, "flannel.1");
        assert_eq!(vtep.lladdr, mac("0a:00:00:00:01:02"));
        assert_eq!(vtep.state, [NeighbourState::Permanent]);
        assert!(!vtep.router && !vtep.proxy && !vtep.extern_learn);
    }

    #[test]
    fn learnt_neighbour_is_reachable_with_the_peer_mac() {
        let neighbours = node();
        let peer = of(&neighbours, "192.168.50.2");
        assert_eq!(peer.lladdr, mac("0a:00:00:00:50:02"));
        assert!(peer.has_state(&NeighbourState::Reachable));
    }

    #[test]
    fn unresolved_neighbours_have_no_lladdr() {
        let neighbours = node();
        let failed = of(&neighbours, "192.168.50.12");
        assert_eq!(
            (failed.lladdr.as_ref(), failed.state.as_slice()),
            (None, &[NeighbourState::Failed][..])
        );
        let incomplete = of(&neighbours, "192.168.50.13");
        assert_eq!(incomplete.state, [NeighbourState::Incomplete]);
        assert_eq!(
            of(&neighbours, "192.168.50.7").state,
            [NeighbourState::Stale]
        );
    }

    #[test]
    fn router_and_extern_learn_flags_are_read() {
        let neighbours = node();
        assert!(of(&neighbours, "192.168.50.8").router);
        let ipv6 = of(&neighbours, "2001:db8:50::7");
        assert!(ipv6.router);
        assert_eq!(ipv6.state, [NeighbourState::Permanent]);
        assert!(of(&neighbours, "192.168.50.15").extern_learn);
    }

    #[test]
    fn pod_without_neighbours_has_an_empty_table() {
        assert_eq!(parse(POD), (Some(vec![]), vec![]));
    }

    #[test]
    fn proxy_and_noarp_entries_are_read() {
        // `ip neigh show proxy` and `ip neigh show nud all` give these; the
        // plain dump leaves them out.
        let text = r#"[{"dst":"10.244.0.99","dev":"cni0","proxy":null},{"dst":"224.0.0.22","dev":"cni0","lladdr":"01:00:5e:00:00:16","state":["NOARP"]}]"#;
        let (neighbours, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        let neighbours = neighbours.expect("an array");
        assert!(neighbours[0].proxy);
        assert!(neighbours[0].state.is_empty());
        assert_eq!(neighbours[1].state, [NeighbourState::Noarp]);
    }

    #[test]
    fn malformed_neighbours_are_issues_and_the_others_are_kept() {
        let text = concat!(
            r#"[{"dst":"10.0.0.1","dev":"eth0","state":["REACHABLE"],"lladdr":"0a:00:00:00:00:01"},"#,
            r#"{"dst":"10.0.0.2","dev":"eth0","state":"REACHABLE"},"#,
            r#"{"dst":"ten","dev":"eth0"},"#,
            r#"{"dst":"10.0.0.4","dev":"eth0","state":["MYSTERY"]}]"#
        );
        let (neighbours, issues) = parse(text);
        let neighbours = neighbours.expect("an array");
        assert_eq!(neighbours.len(), 2);
        assert_eq!(
            neighbours[1].state,
            [NeighbourState::Other("MYSTERY".into())]
        );
        let messages: Vec<_> = issues.iter().map(|i| i.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                r#"element 2 of the array: invalid type: string "REACHABLE", expected a sequence"#,
                "element 3 of the array: invalid IP address syntax",
            ]
        );
    }
}
