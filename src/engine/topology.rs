//! What connects the namespaces of a snapshot: veth pairs, bridge ports and
//! who owns which address. Built once per diagnosis.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::snapshot::netns::link::Link;
use crate::snapshot::{NetnsId, Snapshot};

/// An interface of a namespace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Port<'s> {
    pub ns: &'s NetnsId,
    pub link: &'s Link,
}

pub(crate) struct Topology<'s> {
    snapshot: &'s Snapshot,
    /// (node, ifindex, peer ifindex) -> the veth ends with that ifindex. Each
    /// namespace numbers its own interfaces, so several can share a key.
    veth_ends: HashMap<(&'s str, u32, u32), Vec<Port<'s>>>,
    /// Address -> the namespaces and interfaces holding it.
    owners: HashMap<IpAddr, Vec<(&'s NetnsId, &'s str)>>,
}

impl<'s> Topology<'s> {
    pub fn new(snapshot: &'s Snapshot) -> Topology<'s> {
        let mut veth_ends: HashMap<_, Vec<Port>> = HashMap::new();
        let mut owners: HashMap<IpAddr, Vec<(&NetnsId, &str)>> = HashMap::new();
        for (ns, entry) in &snapshot.namespaces {
            for link in entry.dump.links.iter().flatten() {
                if let Some(peer_index) = link.link_index {
                    veth_ends
                        .entry((ns.node(), link.ifindex, peer_index))
                        .or_default()
                        .push(Port { ns, link });
                }
            }
            for iface in entry.dump.addrs.iter().flatten() {
                for address in &iface.addresses {
                    owners
                        .entry(address.local)
                        .or_default()
                        .push((ns, iface.ifname.as_str()));
                }
            }
        }
        Topology {
            snapshot,
            veth_ends,
            owners,
        }
    }

    /// The devices of a namespace; none where its ip-link.json is missing.
    pub fn links(&self, ns: &NetnsId) -> impl Iterator<Item = &'s Link> + use<'s> {
        let links = self
            .snapshot
            .namespaces
            .get(ns)
            .and_then(|entry| entry.dump.links.as_deref());
        links.into_iter().flatten()
    }

    pub fn link(&self, ns: &NetnsId, ifname: &str) -> Option<&'s Link> {
        self.links(ns).find(|link| link.ifname == ifname)
    }

    /// The other end of a veth whose peer is in another namespace of the same
    /// node: the interface there whose ifindex is this one's peer index and
    /// whose peer index is this one's ifindex. Interface numbers are per
    /// namespace, so the match must also join a pod to its node (never a
    /// namespace to itself or a pod to a pod); what stays ambiguous is `None`.
    pub fn veth_peer(&self, ns: &NetnsId, link: &Link) -> Option<Port<'s>> {
        let peer_index = link.link_index?;
        let candidates = self.veth_ends.get(&(ns.node(), peer_index, link.ifindex))?;
        let is_host = |id: &NetnsId| matches!(id, NetnsId::Host { .. });
        let mut matching = candidates
            .iter()
            .filter(|port| port.ns != ns && is_host(port.ns) != is_host(ns));
        let peer = matching.next().copied();
        match matching.next() {
            None => peer,
            Some(_) => None,
        }
    }

    /// The namespaces (and interfaces) that hold `address`.
    pub fn owners(&self, address: IpAddr) -> &[(&'s NetnsId, &'s str)] {
        self.owners.get(&address).map_or(&[], Vec::as_slice)
    }

    /// The ports of a bridge in a namespace.
    pub fn bridge_ports(&self, ns: &NetnsId, bridge: &str) -> Vec<&'s Link> {
        self.links(ns)
            .filter(|link| link.master.as_deref() == Some(bridge))
            .collect()
    }
}
