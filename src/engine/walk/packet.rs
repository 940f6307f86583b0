//! The packet as the walker carries it: addresses, ports, mark, size, and
//! the packet inside when it is a tunnel's outer one.

use super::*;

/// The packet as the walker carries it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Packet {
    pub(super) src: Option<IpAddr>,
    pub(super) dst: IpAddr,
    /// The flow's protocol; an IPIP outer packet keeps its inner packet's
    /// here (protocol 4 is the tunnel's, see [`Encapsulation`]).
    pub(super) protocol: Protocol,
    pub(super) sport: Option<u16>,
    pub(super) dport: Option<u16>,
    /// The answer to the flow: netfilter sees it as ESTABLISHED.
    pub(super) reply: bool,
    /// The packet mark; it does not survive leaving the namespace.
    pub(super) mark: u32,
    /// Set while the packet is the outer packet of a tunnel.
    pub(super) tunnel: Option<Box<Tunnelled>>,
    /// Its length, once known: `--size` gives it; otherwise the first
    /// device it leaves by sets it to that device's MTU, as a probe.
    pub(super) size: Option<Size>,
}

/// The length of an IP packet (headers included) and its DF bit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Size {
    pub(super) bytes: u32,
    /// Don't fragment: a device it does not fit drops it.
    pub(super) df: bool,
    /// A full-size probe beside the small packet walked without `--size`:
    /// where it does not fit is a warning, and it shrinks to fit as path MTU
    /// discovery would shrink it, instead of stopping the path.
    pub(super) probe: bool,
}

/// The length of a packet without `--size`: a SYN or an echo request.
pub(super) const SMALL_PACKET: u32 = 64;

impl Packet {
    /// Takes the addresses, ports and mark netfilter left the packet with.
    pub(super) fn take_addresses(&mut self, filtered: &netfilter::Packet) {
        self.src = Some(filtered.src);
        self.dst = filtered.dst;
        self.sport = filtered.sport;
        self.dport = filtered.dport;
        self.mark = filtered.mark;
    }

    /// What path MTU discovery makes of a packet that did not fit: the
    /// sender sends smaller ones, so that this one is `bytes` long.
    pub(super) fn shrink_to(&mut self, bytes: u32) {
        if let Some(tunnel) = &mut self.tunnel {
            let overhead = tunnel.encapsulation.overhead();
            tunnel.inner.shrink_to(bytes.saturating_sub(overhead));
        }
        if let Some(size) = &mut self.size {
            size.bytes = bytes;
        }
    }

    /// The packet as the rule packs see it.
    pub(super) fn pack_packet(&self) -> packs::Packet {
        packs::Packet {
            src: self.src.unwrap_or(self.dst),
            dst: self.dst,
            protocol: self.protocol,
            src_port: self.sport,
            dst_port: self.dport,
            mark: self.mark,
            size: match self.size {
                Some(size) if !size.probe => size.bytes,
                _ => SMALL_PACKET,
            },
        }
    }

    /// The packet as netfilter sees it: the first packet of a new connection
    /// from an ephemeral port.
    pub(super) fn netfilter_packet(&self, src: IpAddr) -> netfilter::Packet {
        let protocol = match &self.tunnel {
            Some(tunnel) if tunnel.encapsulation == Encapsulation::Ipip => Protocol::IPIP,
            _ => self.protocol,
        };
        let mut packet = netfilter::Packet::new(src, self.dst, protocol);
        if let Some(size) = self.size.filter(|size| !size.probe) {
            packet.length = u16::try_from(size.bytes).unwrap_or(u16::MAX);
        }
        if packet.dport.is_some() {
            packet.sport = self.sport;
            packet.dport = self.dport;
        }
        packet.mark = self.mark;
        if self.reply {
            packet.ct_state = CtState::Established;
            packet.tcp_flags = packet
                .tcp_flags
                .map(|_| TcpFlagBits(TcpFlagBits::SYN.0 | TcpFlagBits::ACK.0));
            packet.icmp = packet.icmp.map(|_| (0, 0));
        }
        packet
    }
}

/// What a tunnel's outer packet carries.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tunnelled {
    pub(super) encapsulation: Encapsulation,
    /// The device that encapsulated it.
    pub(super) device: String,
    pub(super) inner: Packet,
}

/// What a tunnel device puts around a packet it sends.
pub(super) struct TunnelHeader {
    pub(super) encapsulation: Encapsulation,
    pub(super) device: String,
    /// The outer source; `None` until routing the outer packet chooses one.
    pub(super) src: Option<IpAddr>,
    pub(super) dst: IpAddr,
    /// VXLAN's UDP destination port (sent from an ephemeral one); IPIP has
    /// no ports.
    pub(super) udp_port: Option<u16>,
    /// The outer DF bit; `None` copies the inner packet's.
    pub(super) df: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Encapsulation {
    Vxlan {
        vni: u32,
        /// The destination MAC of the inner frame: the remote VTEP device's,
        /// if the neighbour and FDB entries are right. `None` when an assumed
        /// hop encapsulated and its pack did not say.
        inner_mac: Option<MacAddr>,
    },
    Ipip,
}

impl Encapsulation {
    /// The bytes the tunnel adds to the inner packet: VXLAN an outer IPv4
    /// header (20), UDP (8), VXLAN (8) and the inner Ethernet header (14);
    /// IPIP an outer IPv4 header.
    pub(super) fn overhead(&self) -> u32 {
        match self {
            Encapsulation::Vxlan { .. } => 50,
            Encapsulation::Ipip => 20,
        }
    }
}

impl Packet {
    /// The packet's fields as links report them.
    pub(super) fn fields(&self) -> PacketFields {
        let ipip = self
            .tunnel
            .as_ref()
            .is_some_and(|tunnel| tunnel.encapsulation == Encapsulation::Ipip);
        PacketFields {
            src: self.src,
            dst: self.dst,
            protocol: if ipip { "ipip" } else { self.protocol.as_str() },
            src_port: self.sport,
            dst_port: self.dport,
            bytes: self.size.filter(|size| !size.probe).map(|size| size.bytes),
            reply: self.reply,
            inner: self
                .tunnel
                .as_ref()
                .map(|tunnel| Box::new(tunnel.inner.fields())),
        }
    }
}

impl fmt::Display for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.src {
            Some(src) => write!(f, "{src}")?,
            None => f.write_str("(source not chosen yet)")?,
        }
        match (self.dport, &self.tunnel) {
            (_, Some(tunnel)) if tunnel.encapsulation == Encapsulation::Ipip => {
                write!(f, " -> {} ipip", self.dst)?
            }
            (Some(port), _) => write!(
                f,
                " -> {} {}",
                std::net::SocketAddr::new(self.dst, port),
                self.protocol
            )?,
            (None, _) => write!(f, " -> {} {}", self.dst, self.protocol)?,
        }
        if self.reply {
            f.write_str(" (reply)")?;
        }
        // A size the user gave; a probe's is not the packet walked.
        if let Some(size) = self.size.filter(|size| !size.probe) {
            let df = if size.df { ", DF" } else { "" };
            write!(f, " ({} bytes{df})", size.bytes)?;
        }
        if let Some(tunnel) = &self.tunnel {
            match &tunnel.encapsulation {
                Encapsulation::Vxlan {
                    vni,
                    inner_mac: Some(mac),
                } => write!(f, " [vxlan {vni} to {mac}: {}]", tunnel.inner)?,
                Encapsulation::Vxlan {
                    vni,
                    inner_mac: None,
                } => write!(f, " [vxlan {vni}: {}]", tunnel.inner)?,
                Encapsulation::Ipip => write!(f, " [{}]", tunnel.inner)?,
            }
        }
        Ok(())
    }
}

/// How the packet came to be in a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Arrival {
    /// Generated here (by a socket, or by a tunnel device encapsulating).
    Local,
    /// Arrived on this interface.
    Received(String),
}

impl Arrival {
    /// The interface the packet arrived on, if it did.
    pub(super) fn interface(&self) -> Option<&str> {
        match self {
            Arrival::Received(interface) => Some(interface),
            Arrival::Local => None,
        }
    }
}

/// A packet's size in words: `a 1500-byte packet`, or for a tunnel's outer
/// packet what it carries and what the tunnel adds.
pub(super) fn sized(packet: &Packet) -> String {
    let bytes = packet.size.map_or(SMALL_PACKET, |size| size.bytes);
    match &packet.tunnel {
        Some(tunnel) => {
            let kind = match tunnel.encapsulation {
                Encapsulation::Vxlan { .. } => "VXLAN",
                Encapsulation::Ipip => "IPIP",
            };
            format!(
                "the {bytes}-byte {kind} packet ({} bytes inside, {} of encapsulation)",
                bytes.saturating_sub(tunnel.encapsulation.overhead()),
                tunnel.encapsulation.overhead()
            )
        }
        None => format!("a {bytes}-byte packet"),
    }
}

pub(super) fn mac_text(address: &LinkLayerAddress) -> String {
    match address {
        LinkLayerAddress::Mac(mac) => mac.to_string(),
        LinkLayerAddress::Other(text) => text.clone(),
    }
}

/// `ADDR:PORT`, or the address alone.
pub(super) fn endpoint(address: Option<IpAddr>, port: Option<u16>) -> String {
    match (address, port) {
        (Some(address), Some(port)) => SocketAddr::new(address, port).to_string(),
        (Some(address), None) => address.to_string(),
        (None, _) => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::tcp_sized as packet;
    use super::*;

    fn ipip(inner: Packet) -> Packet {
        let mut outer = packet("172.18.0.11", "172.18.0.12", 0, true);
        outer.size = inner.size.map(|size| Size {
            bytes: size.bytes + 20,
            ..size
        });
        outer.tunnel = Some(Box::new(Tunnelled {
            encapsulation: Encapsulation::Ipip,
            device: "tunl0".into(),
            inner,
        }));
        outer
    }

    #[test]
    fn path_mtu_discovery_shrinks_a_tunnelled_packet_inside_and_out() {
        let mut outer = ipip(packet("10.244.1.2", "10.244.2.3", 1480, true));
        outer.shrink_to(1400);
        assert_eq!(outer.size.map(|s| s.bytes), Some(1400));
        let inner = &outer.tunnel.as_ref().unwrap().inner;
        assert_eq!(inner.size.map(|s| s.bytes), Some(1380));
    }

    #[test]
    fn a_tunnels_packet_is_told_with_what_the_tunnel_adds() {
        let outer = ipip(packet("10.244.1.2", "10.244.2.3", 1480, false));
        assert_eq!(
            sized(&outer),
            "the 1500-byte IPIP packet (1480 bytes inside, 20 of encapsulation)"
        );
        assert_eq!(
            sized(&packet("10.244.1.2", "10.244.2.3", 1450, false)),
            "a 1450-byte packet"
        );
        let vxlan = Encapsulation::Vxlan {
            vni: 1,
            inner_mac: Some("02:00:00:00:00:01".parse().unwrap()),
        };
        assert_eq!(vxlan.overhead(), 50);
    }

    #[test]
    fn packs_and_netfilter_see_a_given_size_but_a_small_packet_beside_a_probe() {
        let given = packet("10.244.1.2", "10.244.2.3", 1450, false);
        assert_eq!(given.pack_packet().size, 1450);
        assert_eq!(given.netfilter_packet(given.src.unwrap()).length, 1450);
        let probe = packet("10.244.1.2", "10.244.2.3", 1450, true);
        assert_eq!(probe.pack_packet().size, SMALL_PACKET);
        assert_eq!(probe.netfilter_packet(probe.src.unwrap()).length, 64);
    }

    #[test]
    fn an_ipip_packet_is_protocol_4_to_netfilter_and_says_so() {
        let outer = ipip(packet("10.244.1.2", "10.244.2.3", 100, false));
        assert_eq!(
            outer.netfilter_packet(outer.src.unwrap()).proto,
            Protocol::IPIP
        );
        assert_eq!(
            outer.to_string(),
            "172.18.0.11 -> 172.18.0.12 ipip (120 bytes, DF) [10.244.1.2 -> 10.244.2.3:8080 tcp (100 bytes, DF)]"
        );
        let probed = ipip(packet("10.244.1.2", "10.244.2.3", 1480, true));
        assert_eq!(
            probed.to_string(),
            "172.18.0.11 -> 172.18.0.12 ipip [10.244.1.2 -> 10.244.2.3:8080 tcp]",
            "a probe's size is not the packet's"
        );
    }

    #[test]
    fn an_sctp_packet_is_protocol_132_with_its_ports_everywhere() {
        let sctp = Packet {
            protocol: Protocol::Sctp,
            ..packet("10.244.1.2", "10.244.2.3", 100, false)
        };
        let filtered = sctp.netfilter_packet(sctp.src.unwrap());
        assert_eq!(filtered.proto, Protocol::Sctp);
        assert_eq!(
            (filtered.sport, filtered.dport),
            (Some(EPHEMERAL_PORT), Some(8080))
        );
        assert_eq!(filtered.tcp_flags, None);
        assert_eq!(sctp.pack_packet().protocol, Protocol::Sctp);
        assert_eq!(sctp.fields().protocol, "sctp");
        assert_eq!(
            sctp.to_string(),
            "10.244.1.2 -> 10.244.2.3:8080 sctp (100 bytes, DF)"
        );
    }

    #[test]
    fn an_ipip_packets_fields_say_ipip_and_carry_the_inner_packets() {
        let fields = ipip(packet("10.244.1.2", "10.244.2.3", 100, false)).fields();
        assert_eq!(fields.protocol, "ipip");
        assert_eq!(fields.bytes, Some(120));
        let inner = fields.inner.unwrap();
        assert_eq!(
            (inner.protocol, inner.dst_port, inner.bytes),
            ("tcp", Some(8080), Some(100))
        );
        let probed = ipip(packet("10.244.1.2", "10.244.2.3", 1480, true)).fields();
        assert_eq!(probed.bytes, None, "a probe's size is not the packet's");
    }
}
