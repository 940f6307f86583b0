//! What connects the namespaces of a snapshot: veth pairs, bridge ports and
//! who owns which address. Built once per diagnosis.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::snapshot::netns::addr::InterfaceAddr;
use crate::snapshot::netns::link::{Link, LinkFlag, LinkKind};
use crate::snapshot::netns::route::Scope;
use crate::snapshot::{NetnsId, Snapshot, veth_peer_among};

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
            for link in entry.dump().links.iter().flatten() {
                if let Some(peer_index) = link.link_index {
                    veth_ends
                        .entry((ns.node(), link.ifindex, peer_index))
                        .or_default()
                        .push(Port { ns, link });
                }
            }
            for iface in entry.dump().addrs.iter().flatten() {
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
            .and_then(|entry| entry.dump().links.as_deref());
        links.into_iter().flatten()
    }

    pub fn link(&self, ns: &NetnsId, ifname: &str) -> Option<&'s Link> {
        self.links(ns).find(|link| link.ifname == ifname)
    }

    /// The other end of a veth whose peer is in another namespace of the same
    /// node (`snapshot::veth_peer_among`), found by its index.
    pub fn veth_peer(&self, ns: &NetnsId, link: &Link) -> Option<Port<'s>> {
        let peer_index = link.link_index?;
        let candidates = self.veth_ends.get(&(ns.node(), peer_index, link.ifindex))?;
        let ends = candidates.iter().map(|port| (port.ns, port.link));
        veth_peer_among(ns, link, ends).map(|(ns, link)| Port { ns, link })
    }

    /// The namespaces (and interfaces) that hold `address`.
    pub fn owners(&self, address: IpAddr) -> &[(&'s NetnsId, &'s str)] {
        self.owners.get(&address).map_or(&[], Vec::as_slice)
    }

    /// The interfaces of other namespaces on the link-layer segment of
    /// `device` in `ns`, a device whose far end is not in the snapshot (a
    /// node's NIC): those that share one of its connected prefixes (of global scope) and can
    /// take a frame from the wire, not loopback, a dummy, a tunnel, a
    /// bridge's port (its bridge takes the frame) or a veth into another
    /// namespace of the snapshot. A segment is not in the dumps; one subnet,
    /// one segment is the assumption (routers between subnets are not
    /// namespaces of the snapshot).
    pub fn segment(&self, ns: &NetnsId, device: &str) -> Vec<Port<'s>> {
        // Link-local prefixes (fe80::/64) are on every link: they say nothing.
        let routable = |address: &&InterfaceAddr| address.scope == Scope::Global;
        let prefixes: Vec<ipnet::IpNet> = self
            .addresses(ns, device)
            .filter(routable)
            .map(|address| address.network)
            .collect();
        let shares_prefix = |other: &NetnsId, link: &Link| {
            self.addresses(other, &link.ifname)
                .filter(routable)
                .any(|address| {
                    prefixes.iter().any(|net| {
                        net.contains(&address.local) || address.network.contains(&net.addr())
                    })
                })
        };
        let mut ports = Vec::new();
        for other in self.snapshot.namespaces.keys() {
            if other == ns {
                continue;
            }
            for link in self.links(other) {
                let takes_frames = !link.has_flag(&LinkFlag::Loopback)
                    && link.master.is_none()
                    && !matches!(
                        link.kind(),
                        Some(LinkKind::Dummy | LinkKind::Vxlan(_) | LinkKind::Ipip(_))
                    )
                    && self.veth_peer(other, link).is_none();
                if takes_frames && shares_prefix(other, link) {
                    ports.push(Port { ns: other, link });
                }
            }
        }
        ports
    }

    /// The addresses of one interface of a namespace.
    pub fn addresses(
        &self,
        ns: &NetnsId,
        ifname: &str,
    ) -> impl Iterator<Item = &'s InterfaceAddr> + use<'s> {
        let addrs = self
            .snapshot
            .namespaces
            .get(ns)
            .and_then(|entry| entry.dump().addrs.as_deref());
        let ifname = ifname.to_string();
        addrs
            .into_iter()
            .flatten()
            .filter(move |iface| iface.ifname == ifname)
            .flat_map(|iface| &iface.addresses)
    }

    /// The ports of a bridge in a namespace.
    pub fn bridge_ports(&self, ns: &NetnsId, bridge: &str) -> Vec<&'s Link> {
        self.links(ns)
            .filter(|link| link.master.as_deref() == Some(bridge))
            .collect()
    }
}
