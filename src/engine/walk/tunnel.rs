//! Tunnels: VXLAN and IPIP encapsulation, and the device that takes the
//! outer packet at the far end.

use super::*;
use crate::engine::codes;

impl<'s> Walker<'s> {
    /// A tunnel's outer packet was delivered here: the device that takes it
    /// (at an assumed hop, the one the CNI intends) decapsulates it, and the
    /// inner packet arrives on that device.
    pub(super) fn decapsulate(
        &mut self,
        place: &Place,
        outer: &Packet,
        tunnel: &Tunnelled,
        branch: Branch,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let taken = if self.graph[hop].assumed {
            self.intended_tunnel_device(ns, hop, outer, tunnel)
        } else {
            let device = match &tunnel.encapsulation {
                Encapsulation::Vxlan { vni, inner_mac } => {
                    self.vxlan_receiver(ns, outer, *vni, *inner_mac)
                }
                Encapsulation::Ipip => self.ipip_receiver(ns, outer),
            };
            device.map(|device| device.ifname.clone())
        };
        let device = match taken {
            Ok(device) => device,
            Err(stop) => return self.stop(hop, branch, stop),
        };
        self.step(
            hop,
            Step::Decapsulated {
                device: device.clone(),
                inner: tunnel.inner.to_string(),
            },
        );
        Next::Enter {
            place: place.clone(),
            flow: Flow {
                packet: tunnel.inner.clone(),
                branch,
            },
            arrival: Arrival::Received(device),
        }
    }

    /// A VXLAN packet reached its VTEP: the device with that UDP port and VNI
    /// takes the inner frame, if it is addressed to the device's MAC. A
    /// VXLAN device listens only while it is up (the kernel opens its UDP
    /// socket when the device is set up, and closes it when set down:
    /// measured in the lab, a flannel.1 set down on the receiving node
    /// loses the flow), and in its own family, that of its `local`,
    /// `remote` or `group` address (IPv4 without one); one in
    /// collect-metadata mode in both, whatever the VNI.
    pub(super) fn vxlan_receiver(
        &self,
        ns: &NetnsId,
        outer: &Packet,
        vni: u32,
        inner_mac: Option<MacAddr>,
    ) -> Result<&'s Device, Stop> {
        let family = Family::of(outer.ip.dst);
        let takes = |link: &&'s Device| match link.kind() {
            // A collect-metadata (`external`) device listens in both
            // families and takes every VNI, handing it to the programs
            // on it as metadata (`vxlan_open`, `vxlan_vs_find_vni`).
            Some(DeviceKind::Vxlan(info)) if info.external => {
                info.port == outer.ip.dport && info.local.is_none_or(|local| local == outer.ip.dst)
            }
            Some(DeviceKind::Vxlan(info)) => {
                let own = info.local.or(info.remote).or(info.group);
                info.id == vni
                    && info.port == outer.ip.dport
                    && own.map_or(Family::Ipv4, Family::of) == family
                    && info.local.is_none_or(|local| local == outer.ip.dst)
            }
            _ => false,
        };
        let mut candidates = self.topology.links(ns).filter(takes);
        let first = candidates.next();
        let device = first
            .into_iter()
            .chain(candidates)
            .find(|link| link.has_flag(&LinkFlag::Up));
        let Some(device) = device else {
            let down = first.map_or(String::new(), |down| {
                format!(
                    ": {} has them but is down, and a VXLAN device listens only while up",
                    down.ifname
                )
            });
            return Err(Stop {
                disposition: Disposition::NoListener,
                id: codes::KERNEL_VXLAN_NO_DEVICE,
                reason: format!(
                    "no VXLAN device in {} takes VNI {vni} on UDP port {}{down}",
                    hop_id(ns),
                    outer.ip.dport.unwrap_or_default()
                ),
                evidence: vec![self.file(ns, DumpFile::IpLink)],
            });
        };
        if let Some(inner_mac) = inner_mac
            && device.address != Some(LinkLayerAddress::Mac(inner_mac))
        {
            return Err(Stop {
                disposition: Disposition::NeighborFailed,
                id: codes::KERNEL_VXLAN_MAC_MISMATCH,
                reason: format!(
                    "the tunnelled frame is addressed to {inner_mac} but {}'s {} has another MAC ({}): the sender's neighbour/FDB entries are stale",
                    hop_id(ns),
                    device.ifname,
                    device.address.as_ref().map_or("none".to_string(), mac_text)
                ),
                evidence: vec![self.file(ns, DumpFile::IpLink)],
            });
        }
        Ok(device)
    }

    /// An IPIP packet reached its destination: the kernel hands it to the
    /// IPIP device that is up and whose `local` is the outer destination and
    /// `remote` the outer source, `any` matching every address (the most
    /// specific such device wins, `ip_tunnel_lookup`). Without one, nothing
    /// takes IP protocol 4: the packet is dropped with an ICMP unreachable.
    pub(super) fn ipip_receiver(&self, ns: &NetnsId, outer: &Packet) -> Result<&'s Device, Stop> {
        let matches = |endpoint: TunnelEndpoint, address: Option<IpAddr>| match endpoint {
            TunnelEndpoint::Any => Some(0),
            TunnelEndpoint::Address(own) => (Some(own) == address).then_some(1),
        };
        let candidates: Vec<(&'s Device, u8)> = self
            .topology
            .links(ns)
            .filter_map(|link| match link.kind() {
                Some(DeviceKind::Ipip(info)) => {
                    let remote = matches(info.remote, outer.src())?;
                    let local = matches(info.local, Some(outer.ip.dst))?;
                    Some((link, 2 * remote + local))
                }
                _ => None,
            })
            .collect();
        let up = candidates
            .iter()
            .filter(|(link, _)| link.has_flag(&LinkFlag::Up))
            .max_by_key(|(_, specificity)| *specificity);
        if let Some((device, _)) = up {
            return Ok(device);
        }
        let from = endpoint(outer.src(), None);
        let reason = match candidates.first() {
            Some((device, _)) => format!(
                "{}'s IPIP device {} would take the tunnelled packet from {from}, but it is down: the packet is dropped",
                hop_id(ns),
                device.ifname
            ),
            None => format!(
                "no IPIP device in {} takes the tunnelled packet from {from} to {}: nothing receives IP protocol 4, and the packet is dropped",
                hop_id(ns),
                outer.ip.dst
            ),
        };
        Err(Stop {
            disposition: Disposition::NoListener,
            id: codes::KERNEL_IPIP_NO_DEVICE,
            reason,
            evidence: vec![self.file(ns, DumpFile::IpLink)],
        })
    }

    /// VXLAN: the next hop's neighbour entry gives the remote VTEP device's
    /// MAC, the FDB gives the VTEP's address; the packet leaves inside UDP.
    /// The header is what is asked of the tunnel: a missing entry stops
    /// the packet here.
    pub(super) fn vxlan_header(
        &mut self,
        place: &Place,
        device: &Device,
        info: &VxlanInfo,
        next_hop: IpAddr,
    ) -> Result<TunnelHeader, Stop> {
        let (ns, hop) = (&place.ns, place.hop);
        let dump = &self.snapshot.namespaces[ns].dump();
        let Some(neighbours) = &dump.neighbours else {
            return Err(self.missing(
                ns,
                Wanted::File(DumpFile::IpNeigh),
                "resolve the VXLAN next hop",
            ));
        };
        let entry = neighbours
            .iter()
            .find(|n| n.dev == device.ifname && n.dst == next_hop);
        let mac = match entry.and_then(|n| n.lladdr.as_ref()) {
            Some(LinkLayerAddress::Mac(mac))
                if !entry.is_some_and(|n| {
                    n.has_state(&NeighbourState::Failed) || n.has_state(&NeighbourState::Incomplete)
                }) =>
            {
                *mac
            }
            _ => {
                let reason = format!(
                    "{} has no usable neighbour entry for {next_hop} on {} (VXLAN devices without learning do not ARP: the entry must be programmed)",
                    hop_id(ns),
                    device.ifname
                );
                self.step(
                    hop,
                    Step::Neighbour {
                        address: next_hop,
                        interface: device.ifname.clone(),
                        result: "missing".into(),
                    },
                );
                let evidence = vec![self.file(ns, DumpFile::IpNeigh)];
                return Err(Stop {
                    disposition: Disposition::NeighborFailed,
                    id: codes::KERNEL_NEIGHBOUR_MISSING,
                    reason,
                    evidence,
                });
            }
        };
        self.step(
            hop,
            Step::Neighbour {
                address: next_hop,
                interface: device.ifname.clone(),
                result: mac.to_string(),
            },
        );
        let Some(fdb) = &dump.fdb else {
            return Err(self.missing(
                ns,
                Wanted::File(DumpFile::BridgeFdb),
                "find the remote VTEP",
            ));
        };
        let Some(vtep) = fdb
            .iter()
            .find(|e| e.ifname == device.ifname && e.mac == mac)
            .and_then(|e| e.dst)
        else {
            let reason = format!(
                "{} has no FDB entry on {} for {mac}: the remote VTEP is unknown",
                hop_id(ns),
                device.ifname
            );
            let evidence = vec![self.file(ns, DumpFile::BridgeFdb)];
            return Err(Stop {
                disposition: Disposition::NeighborFailed,
                id: codes::KERNEL_FDB_MISSING,
                reason,
                evidence,
            });
        };
        let Some(port) = info.port else {
            return Err(self.missing(
                ns,
                Wanted::Other(&format!("the UDP port of {}", device.ifname)),
                "encapsulate",
            ));
        };
        let df = self.vxlan_df(ns, device, info)?;
        let header = TunnelHeader {
            encapsulation: Encapsulation::Vxlan {
                vni: info.id,
                inner_mac: Some(mac),
            },
            device: device.ifname.clone(),
            src: info.local,
            dst: vtep,
            udp_port: Some(port),
            df,
        };
        Ok(header)
    }

    /// Whether a VXLAN device's outer packets carry DF: set, clear, or
    /// (`None`) copied from the inner packet.
    pub(super) fn vxlan_df(
        &self,
        ns: &NetnsId,
        device: &Device,
        info: &VxlanInfo,
    ) -> Result<Option<bool>, Stop> {
        // Measured in the lab: with `df unset` (flannel's) an outer packet
        // too large for the underlay is fragmented and reassembled by the
        // remote node, and the pods' flow still works.
        match &info.df {
            Some(VxlanDf::Set) => Ok(Some(true)),
            Some(VxlanDf::Inherit) => Ok(None),
            Some(VxlanDf::Unset) | None => Ok(Some(false)),
            Some(VxlanDf::Other(word)) => {
                let reason = format!(
                    "{} shows df {word:?} on {}, a word skoop does not know: whether its outer packets may be fragmented is unknown",
                    hop_id(ns),
                    device.ifname
                );
                let evidence = vec![self.file(ns, DumpFile::IpLink)];
                Err(Stop::unknown(codes::KERNEL_VXLAN_UNKNOWN, reason, evidence))
            }
        }
    }

    /// IPIP: the packet leaves inside an IPv4 header (protocol 4) for the
    /// device's fixed remote or, with `remote any` (flannel's `flannel.ipip`,
    /// Calico's `tunl0`), for the route's next hop, which an `onlink` route
    /// sets to the remote node's address. The outer source is the device's
    /// `local`, or chosen when the outer packet is routed. The kernel copies
    /// the inner packet's DF bit to the outer one (an IPIP device has no
    /// `ignore_df`), so a packet too large for the underlay with the 20
    /// bytes added is refused with ICMP fragmentation-needed, not
    /// fragmented (`ip_tunnel_xmit`; read in the kernel's source: this
    /// kernel has no ipip module to measure it).
    pub(super) fn ipip_header(device: &Device, info: &IpipInfo, next_hop: IpAddr) -> TunnelHeader {
        let remote = match info.remote {
            TunnelEndpoint::Address(remote) => remote,
            TunnelEndpoint::Any => next_hop,
        };
        let local = match info.local {
            TunnelEndpoint::Address(local) => Some(local),
            TunnelEndpoint::Any => None,
        };
        TunnelHeader {
            encapsulation: Encapsulation::Ipip,
            device: device.ifname.clone(),
            src: local,
            dst: remote,
            udp_port: None,
            df: None,
        }
    }

    /// Puts the packet into a tunnel: the outer packet, as long as the inner
    /// one and the tunnel's overhead, is recorded and sent on. A tunnel
    /// device routes it like a packet generated in its namespace; at an
    /// assumed hop it goes to the node holding the tunnel's far end.
    pub(super) fn encapsulate(
        &mut self,
        place: &Place,
        flow: Flow,
        header: TunnelHeader,
    ) -> Next<'s> {
        let hop = place.hop;
        let Flow { packet, branch } = flow;
        let encapsulation = header.encapsulation;
        let overhead = encapsulation.overhead(Family::of(header.dst));
        let (length, size) = packet.encapsulated_size(overhead, header.df);
        let protocol = match encapsulation {
            Encapsulation::Vxlan { .. } => Protocol::Udp,
            Encapsulation::Ipip => packet.ip.protocol,
        };
        let outer = Packet {
            ip: net::Packet {
                src: header.src.unwrap_or(Family::of(header.dst).unspecified()),
                dst: header.dst,
                protocol,
                sport: header.udp_port.map(|_| EPHEMERAL_PORT),
                dport: header.udp_port,
                mark: 0,
                length,
            },
            // Each tunnel packet is a packet of its own to netfilter.
            reply: false,
            size,
            tunnel: Some(Box::new(Tunnelled {
                encapsulation,
                device: header.device.clone(),
                inner: packet,
            })),
        };
        self.step(
            hop,
            Step::Encapsulated {
                device: header.device,
                outer: outer.to_string(),
            },
        );
        if self.graph[hop].assumed {
            return self.send_tunnelled_assumed(
                place,
                Flow {
                    packet: outer,
                    branch,
                },
            );
        }
        Next::Enter {
            place: place.clone(),
            flow: Flow {
                packet: outer,
                branch,
            },
            arrival: Arrival::Local,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixture::*;
    use super::*;

    #[test]
    fn vxlan_without_a_neighbour_entry_is_neighbor_failed() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let mut branch = branch();
            let place = walker.test_hop(&host("n1"), &mut branch);
            let device = walker.topology.link(&place.ns, "flannel.1").unwrap();
            let Some(DeviceKind::Vxlan(info)) = device.kind() else {
                panic!("not a VXLAN device");
            };
            let next_hop = "10.0.1.0".parse().unwrap();
            let Err(stop) = walker.vxlan_header(&place, device, info, next_hop) else {
                panic!("a header without a neighbour entry");
            };
            assert_eq!(stop.id, codes::KERNEL_NEIGHBOUR_MISSING);
            assert_eq!(stop.disposition, Disposition::NeighborFailed);
        });
    }

    #[test]
    fn vxlan_header_goes_to_the_vtep_of_the_fdb_entry() {
        let node = host("n1");
        let neighbours = json!([{"dst": "10.0.1.0", "dev": "flannel.1", "lladdr": "52:04:a1:8d:72:13", "state": ["PERMANENT"]}]);
        let fdb = json!([{"mac": "52:04:a1:8d:72:13", "ifname": "flannel.1", "dst": "172.18.0.12", "flags": [], "state": "permanent"}]);
        let files = with(
            two_pods_on_a_bridge(),
            vec![
                file(&node, DumpFile::IpNeigh, neighbours.to_string()),
                file(&node, DumpFile::BridgeFdb, fdb.to_string()),
            ],
        );
        let fixture = Fixture::new(&files);
        fixture.walk(None, |walker| {
            let mut branch = branch();
            let place = walker.test_hop(&node, &mut branch);
            let device = walker.topology.link(&node, "flannel.1").unwrap();
            let Some(DeviceKind::Vxlan(info)) = device.kind() else {
                panic!("not a VXLAN device");
            };
            let next_hop = "10.0.1.0".parse().unwrap();
            let header = walker
                .vxlan_header(&place, device, info, next_hop)
                .ok()
                .unwrap();
            assert_eq!(header.dst, "172.18.0.12".parse::<IpAddr>().unwrap());
            assert_eq!(header.udp_port, Some(8472));
            // flannel's `df unset`: the outer packet may be fragmented.
            assert_eq!(header.df, Some(false));
            // Then the outer packet is in the node again, to be routed.
            let flow = Flow {
                packet: tcp("10.0.0.2", "10.0.1.5"),
                branch,
            };
            let Next::Enter { flow, arrival, .. } = walker.encapsulate(&place, flow, header) else {
                panic!("the outer packet is not entered");
            };
            assert_eq!(arrival, Arrival::Local);
            assert_eq!(flow.packet.ip.protocol, Protocol::Udp);
            assert_eq!(flow.packet.ip.dport, Some(8472));
            let inner = &flow.packet.tunnel.as_ref().unwrap().inner;
            assert_eq!(inner.ip.dst, "10.0.1.5".parse::<IpAddr>().unwrap());
        });
    }

    #[test]
    fn ipip_with_remote_any_goes_to_the_routes_next_hop() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            // Any device stands in; only the info decides.
            let device = walker.topology.link(&host("n1"), "flannel.1").unwrap();
            let info = IpipInfo {
                local: TunnelEndpoint::Any,
                remote: TunnelEndpoint::Any,
                link: None,
            };
            let next_hop: IpAddr = "172.18.0.12".parse().unwrap();
            let header = Walker::ipip_header(device, &info, next_hop);
            assert_eq!(header.dst, next_hop);
            assert_eq!(header.src, None);
            assert_eq!(header.encapsulation, Encapsulation::Ipip);
        });
    }
}
