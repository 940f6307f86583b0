//! The packet as the walker carries it: addresses, ports, mark, size, and
//! the packet inside when it is a tunnel's outer one.

use super::*;

/// The packet as the walker carries it: its header, and what the walk knows
/// beside it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Packet {
    /// Its header. The source is unspecified until routing chooses it; the
    /// length is the one netfilter and the packs see (`--size`'s, else a
    /// small packet's, see [`Size`]). An IPIP outer packet keeps its inner
    /// packet's protocol here (protocol 4 is the tunnel's, see
    /// [`Encapsulation`]). The mark does not survive leaving the namespace.
    pub(super) ip: net::Packet,
    /// The answer to the flow: netfilter sees it as ESTABLISHED.
    pub(super) reply: bool,
    /// Set while the packet is the outer packet of a tunnel.
    pub(super) tunnel: Option<Box<Tunnelled>>,
    pub(super) size: Size,
}

/// How long the walked packet is, for the devices it must fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Size {
    /// Not known until the first device it leaves by, which sets it to
    /// that device's MTU: as a probe without `--size`, as the packet's own
    /// length with `--size mtu`.
    Unset,
    /// The packet's length is its header's (`--size`), with its DF bit
    /// (don't fragment: a device it does not fit drops it).
    Given { df: bool },
    /// A full-size probe of `bytes` beside the small packet walked without
    /// `--size`: where it does not fit is a warning, and it shrinks to fit
    /// as path MTU discovery would shrink it, instead of stopping the path.
    Probe { bytes: u32, df: bool },
}

impl Packet {
    /// Its source, once routing chose it.
    pub(super) fn src(&self) -> Option<IpAddr> {
        self.ip.source()
    }

    /// The bytes a device must fit: the packet's, or its probe's; `None`
    /// before the first device.
    pub(super) fn bytes(&self) -> Option<u32> {
        match self.size {
            Size::Unset => None,
            Size::Given { .. } => Some(self.ip.length),
            Size::Probe { bytes, .. } => Some(bytes),
        }
    }

    /// The length `--size` gave it (not a probe's).
    pub(super) fn given_bytes(&self) -> Option<u32> {
        matches!(self.size, Size::Given { .. }).then_some(self.ip.length)
    }

    /// Whether it (or its probe) has DF set; `None` before its size is known.
    pub(super) fn df(&self) -> Option<bool> {
        match self.size {
            Size::Unset => None,
            Size::Given { df } | Size::Probe { df, .. } => Some(df),
        }
    }

    /// Whether what is walked for its size is a probe.
    pub(super) fn is_probe(&self) -> bool {
        matches!(self.size, Size::Probe { .. })
    }

    /// Sets its size where the first device decides it (see [`Size::Unset`]):
    /// a probe of `bytes` with DF, or, when `probe` is false, the packet's own.
    pub(super) fn size_by_device(&mut self, bytes: u32, probe: bool) {
        if self.size == Size::Unset {
            if probe {
                self.size = Size::Probe { bytes, df: true };
            } else {
                self.ip.length = bytes;
                self.size = Size::Given { df: true };
            }
        }
    }

    /// Its size as sent again by another sender: a given length kept with
    /// `df`, a probe started again at the first device.
    pub(super) fn resent(&self, df: bool) -> Size {
        match self.size {
            Size::Given { .. } => Size::Given { df },
            Size::Unset | Size::Probe { .. } => Size::Unset,
        }
    }

    /// The length and size of the outer packet a tunnel that adds
    /// `overhead` bytes puts around this one: its DF bit `df`, else this
    /// packet's.
    pub(super) fn encapsulated_size(&self, overhead: u32, df: Option<bool>) -> (u32, Size) {
        match self.size {
            Size::Unset => (SMALL_PACKET, Size::Unset),
            Size::Given { df: inner } => (
                self.ip.length.saturating_add(overhead),
                Size::Given {
                    df: df.unwrap_or(inner),
                },
            ),
            Size::Probe { bytes, df: inner } => (
                SMALL_PACKET,
                Size::Probe {
                    bytes: bytes.saturating_add(overhead),
                    df: df.unwrap_or(inner),
                },
            ),
        }
    }

    /// Takes the header netfilter left the packet with (its translations
    /// and mark).
    pub(super) fn take_addresses(&mut self, filtered: &netfilter::Packet) {
        // Netfilter sees an IPIP outer packet as protocol 4; the walker's
        // keeps its inner packet's.
        self.ip = net::Packet {
            protocol: self.ip.protocol,
            length: self.ip.length,
            ..filtered.ip.clone()
        };
    }

    /// What path MTU discovery makes of a packet that did not fit (or what
    /// fragmenting leaves of it): the sender sends smaller ones, so that
    /// this one is `bytes` long.
    pub(super) fn shrink_to(&mut self, bytes: u32) {
        if let Some(tunnel) = &mut self.tunnel {
            let overhead = tunnel.encapsulation.overhead(Family::of(self.ip.dst));
            tunnel.inner.shrink_to(bytes.saturating_sub(overhead));
        }
        self.fragment_to(bytes);
    }

    /// Makes it (or its probe) `bytes` long, as a fragment is; a tunnel's
    /// inner packet is whole again once the far end reassembles the outer.
    pub(super) fn fragment_to(&mut self, bytes: u32) {
        match &mut self.size {
            Size::Unset => {}
            Size::Given { .. } => self.ip.length = bytes,
            Size::Probe { bytes: probe, .. } => *probe = bytes,
        }
    }

    /// The packet as netfilter sees it: the first packet of a new connection,
    /// or its answer; an IPIP outer packet as protocol 4.
    pub(super) fn netfilter_packet(&self, src: IpAddr) -> netfilter::Packet {
        let mut ip = net::Packet {
            src,
            ..self.ip.clone()
        };
        if let Some(tunnel) = &self.tunnel
            && tunnel.encapsulation == Encapsulation::Ipip
        {
            ip.protocol = Protocol::IPIP;
            (ip.sport, ip.dport) = (None, None);
        }
        let packet = netfilter::Packet::first_of_connection(ip);
        if self.reply {
            packet.answering()
        } else {
            packet
        }
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
    /// The bytes the tunnel adds to the inner packet when its outer packet
    /// is of family `outer`: VXLAN an outer IP header (IPv4 20, IPv6 40),
    /// UDP (8), VXLAN (8) and the inner Ethernet header (14), so 50 or 70,
    /// the kernel's VXLAN_HEADROOM and VXLAN6_HEADROOM; IPIP an outer IPv4
    /// header.
    pub(super) fn overhead(&self, outer: Family) -> u32 {
        let ip_header = match outer {
            Family::Ipv4 => 20,
            Family::Ipv6 => 40,
        };
        match self {
            Encapsulation::Vxlan { .. } => ip_header + 30,
            Encapsulation::Ipip => ip_header,
        }
    }
}

impl Packet {
    /// The packet as the rule packs see it: a source not chosen yet is
    /// given as its destination.
    pub(super) fn pack_packet(&self) -> net::Packet {
        net::Packet {
            src: self.src().unwrap_or(self.ip.dst),
            ..self.ip.clone()
        }
    }

    /// The packet's fields as links report them: an IPIP outer packet as
    /// protocol 4, carrying its inner packet's.
    pub(super) fn fields(&self) -> PacketFields {
        let mut ip = self.ip.clone();
        if let Some(tunnel) = &self.tunnel
            && tunnel.encapsulation == Encapsulation::Ipip
        {
            ip.protocol = Protocol::IPIP;
        }
        PacketFields {
            ip,
            bytes: self.given_bytes(),
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
        match self.src() {
            Some(src) => write!(f, "{src}")?,
            None => f.write_str("(source not chosen yet)")?,
        }
        match (self.ip.dport, &self.tunnel) {
            (_, Some(tunnel)) if tunnel.encapsulation == Encapsulation::Ipip => {
                write!(f, " -> {} ipip", self.ip.dst)?
            }
            (Some(port), _) => write!(
                f,
                " -> {} {}",
                std::net::SocketAddr::new(self.ip.dst, port),
                self.ip.protocol
            )?,
            (None, _) => write!(f, " -> {} {}", self.ip.dst, self.ip.protocol)?,
        }
        if self.reply {
            f.write_str(" (reply)")?;
        }
        // A size the user gave; a probe's is not the packet walked.
        if let (Some(bytes), Some(df)) = (self.given_bytes(), self.df()) {
            let df = if df { ", DF" } else { "" };
            write!(f, " ({bytes} bytes{df})")?;
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
    let bytes = packet.bytes().unwrap_or(packet.ip.length);
    match &packet.tunnel {
        Some(tunnel) => {
            let kind = match tunnel.encapsulation {
                Encapsulation::Vxlan { .. } => "VXLAN",
                Encapsulation::Ipip => "IPIP",
            };
            let overhead = tunnel.encapsulation.overhead(Family::of(packet.ip.dst));
            format!(
                "the {bytes}-byte {kind} packet ({} bytes inside, {overhead} of encapsulation)",
                bytes.saturating_sub(overhead),
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
        (outer.ip.length, outer.size) = inner.encapsulated_size(20, None);
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
        assert_eq!(outer.bytes(), Some(1400));
        let inner = &outer.tunnel.as_ref().unwrap().inner;
        assert_eq!(inner.bytes(), Some(1380));
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
        // The kernel's VXLAN_HEADROOM and VXLAN6_HEADROOM.
        assert_eq!(vxlan.overhead(Family::Ipv4), 50);
        assert_eq!(vxlan.overhead(Family::Ipv6), 70);
    }

    #[test]
    fn packs_and_netfilter_see_a_given_size_but_a_small_packet_beside_a_probe() {
        let given = packet("10.244.1.2", "10.244.2.3", 1450, false);
        assert_eq!(given.pack_packet().length, 1450);
        assert_eq!(given.netfilter_packet(given.src().unwrap()).ip.length, 1450);
        let probe = packet("10.244.1.2", "10.244.2.3", 1450, true);
        assert_eq!(probe.pack_packet().length, SMALL_PACKET);
        assert_eq!(probe.netfilter_packet(probe.src().unwrap()).ip.length, 64);
    }

    #[test]
    fn an_ipip_packet_is_protocol_4_to_netfilter_and_says_so() {
        let outer = ipip(packet("10.244.1.2", "10.244.2.3", 100, false));
        assert_eq!(
            outer.netfilter_packet(outer.src().unwrap()).ip.protocol,
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
        let mut sctp = packet("10.244.1.2", "10.244.2.3", 100, false);
        sctp.ip.protocol = Protocol::Sctp;
        let filtered = sctp.netfilter_packet(sctp.src().unwrap());
        assert_eq!(filtered.ip.protocol, Protocol::Sctp);
        assert_eq!(
            (filtered.ip.sport, filtered.ip.dport),
            (Some(EPHEMERAL_PORT), Some(8080))
        );
        assert_eq!(filtered.tcp_flags, None);
        assert_eq!(sctp.pack_packet().protocol, Protocol::Sctp);
        assert_eq!(sctp.fields().ip.protocol, Protocol::Sctp);
        assert_eq!(
            sctp.to_string(),
            "10.244.1.2 -> 10.244.2.3:8080 sctp (100 bytes, DF)"
        );
    }

    #[test]
    fn an_ipip_packets_fields_say_ipip_and_carry_the_inner_packets() {
        let fields = ipip(packet("10.244.1.2", "10.244.2.3", 100, false)).fields();
        assert_eq!(fields.ip.protocol, Protocol::IPIP);
        assert_eq!(fields.bytes, Some(120));
        let inner = fields.inner.unwrap();
        assert_eq!(
            (inner.ip.protocol, inner.ip.dport, inner.bytes),
            (Protocol::Tcp, Some(8080), Some(100))
        );
        let probed = ipip(packet("10.244.1.2", "10.244.2.3", 1480, true)).fields();
        assert_eq!(probed.bytes, None, "a probe's size is not the packet's");
    }
}
