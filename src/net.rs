//! The network vocabulary every layer shares, below them all: an address
//! [`Family`], what a packet carries above IP ([`Protocol`]) and the
//! [`Packet`] itself. A flow's protocol, a Service port's, a listening
//! socket's, an IPVS service's, a policy rule's `ipproto` and an iptables
//! `-p` are all one `Protocol`; routing, netfilter, the packs and the reports
//! read one `Packet`, each adding only what its layer knows beside it, so
//! that no layer translates between parallel types.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address family, as the kernel separates its tables and settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    pub fn of(address: IpAddr) -> Family {
        match address {
            IpAddr::V4(_) => Family::Ipv4,
            IpAddr::V6(_) => Family::Ipv6,
        }
    }

    /// The family's unspecified address (`0.0.0.0`, `::`).
    pub fn unspecified(self) -> IpAddr {
        match self {
            Family::Ipv4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Family::Ipv6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        }
    }

    /// The families as packs and sysctl paths name them (`ipv4`, `ipv6`).
    pub const NAMES: [(&'static str, Family); 2] = [("ipv4", Family::Ipv4), ("ipv6", Family::Ipv6)];

    /// The family of that name (`ipv4`, `ipv6`).
    pub fn from_name(name: &str) -> Option<Family> {
        Family::NAMES
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, family)| *family)
    }

    /// The other family.
    pub fn other(self) -> Family {
        match self {
            Family::Ipv4 => Family::Ipv6,
            Family::Ipv6 => Family::Ipv4,
        }
    }

    /// Its ICMP: ICMP for IPv4, ICMPv6 for IPv6.
    pub fn icmp(self) -> Protocol {
        match self {
            Family::Ipv4 => Protocol::Icmp,
            Family::Ipv6 => Protocol::Icmpv6,
        }
    }
}

/// As it is written: `IPv4`, `IPv6`.
impl serde::Serialize for Family {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
        })
    }
}

/// An IP packet, of either family, by the header fields every layer reads:
/// its addresses, its protocol with its ports, its mark and its length.
/// Each layer views this one type and keeps beside it only what it adds:
/// netfilter the hook's interfaces and the connection's state, the walker
/// the tunnel around it and its probe size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Packet {
    /// The source; the family's unspecified address (`0.0.0.0`, `::`) while
    /// a local socket has not chosen one, as in the kernel's flow key before
    /// its route lookup chooses it (see [`Packet::source`]).
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: Protocol,
    /// TCP, UDP and SCTP ports; `None` for protocols without them.
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// The packet mark (fwmark).
    pub mark: u32,
    /// Its total length in bytes, headers included.
    pub length: u32,
}

/// The length of a packet whose size nobody gave: a SYN or an echo request.
pub const SMALL_PACKET: u32 = 64;

/// The source port of a client's packet where none is given: an ephemeral
/// one, as Linux chooses from `ip_local_port_range`.
pub const EPHEMERAL_PORT: u16 = 40000;

impl Packet {
    /// A small packet of `protocol` from `src` to `dst`, without ports or mark.
    pub fn new(src: IpAddr, dst: IpAddr, protocol: Protocol) -> Packet {
        Packet {
            src,
            dst,
            protocol,
            sport: None,
            dport: None,
            mark: 0,
            length: SMALL_PACKET,
        }
    }

    /// A packet whose source a local socket has not chosen yet.
    pub fn unsourced(dst: IpAddr, protocol: Protocol) -> Packet {
        Packet::new(Family::of(dst).unspecified(), dst, protocol)
    }

    /// Its source, once chosen.
    pub fn source(&self) -> Option<IpAddr> {
        (!self.src.is_unspecified()).then_some(self.src)
    }

    /// The family of its destination (a packet's addresses share one).
    pub fn family(&self) -> Family {
        Family::of(self.dst)
    }

    /// The same packet's answer: addresses and ports swapped, no mark.
    pub fn reversed(&self) -> Packet {
        Packet {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            mark: 0,
            ..self.clone()
        }
    }
}

/// An IP protocol, by what the kernel numbers it. The ones skoop follows
/// packets of have their own variants; every other number is `Other`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
    /// ICMP for IPv4; a flow of it is an echo request.
    Icmp,
    /// ICMP for IPv6.
    Icmpv6,
    /// Any other protocol number (IP in IP's 4, GRE's 47, iptables' `all`, 0).
    Other(u8),
}

/// The protocol names iptables, `ip rule` and `/etc/protocols` use, with
/// their numbers; the first name of a number is the one shown (IP in IP is
/// `ipencap`, 4; `ipip` is 94, as in `/etc/protocols`).
const NAMES: &[(&str, u8)] = &[
    ("all", 0),
    ("icmp", 1),
    ("igmp", 2),
    ("ipencap", 4),
    ("tcp", 6),
    ("egp", 8),
    ("udp", 17),
    ("dccp", 33),
    ("ipv6", 41),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmpv6", 58),
    ("ipv6-icmp", 58),
    ("ospf", 89),
    ("ipip", 94),
    ("pim", 103),
    ("vrrp", 112),
    ("l2tp", 115),
    ("sctp", 132),
    ("mh", 135),
    ("ipv6-mh", 135),
    ("udplite", 136),
];

impl Protocol {
    /// iptables' `-p all` (protocol 0): any protocol.
    pub const ALL: Protocol = Protocol::Other(0);
    /// IP in IP (an IPIP tunnel's outer packet).
    pub const IPIP: Protocol = Protocol::Other(4);

    /// The protocol of an IP protocol number.
    pub fn from_number(number: u8) -> Protocol {
        match number {
            1 => Protocol::Icmp,
            6 => Protocol::Tcp,
            17 => Protocol::Udp,
            58 => Protocol::Icmpv6,
            132 => Protocol::Sctp,
            other => Protocol::Other(other),
        }
    }

    /// Its IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Icmp => 1,
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Icmpv6 => 58,
            Protocol::Sctp => 132,
            Protocol::Other(number) => number,
        }
    }

    /// A protocol name (any case: `tcp`, `ipv6-icmp`) or number.
    pub fn parse(text: &str) -> Option<Protocol> {
        let named = NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text))
            .map(|(_, number)| *number);
        named
            .or_else(|| text.parse().ok())
            .map(Protocol::from_number)
    }

    /// Its usual name (`tcp`, `icmpv6`, `ipencap`), if it has one.
    pub fn name(self) -> Option<&'static str> {
        let number = self.number();
        NAMES
            .iter()
            .find(|(_, n)| *n == number)
            .map(|(name, _)| *name)
    }

    /// Its name, as packets and flows are written (`tcp`, `icmp`); a
    /// protocol without one is `unknown`.
    pub fn as_str(self) -> &'static str {
        self.name().unwrap_or("unknown")
    }

    /// Whether its packets carry ports.
    pub fn has_ports(self) -> bool {
        matches!(self, Protocol::Tcp | Protocol::Udp | Protocol::Sctp)
    }
}

impl fmt::Display for Protocol {
    /// Its name, else its number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "{}", self.number()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_read_as_the_kernel_numbers_them() {
        assert_eq!(Protocol::parse("TCP"), Some(Protocol::Tcp));
        assert_eq!(Protocol::parse("ipv6-icmp"), Some(Protocol::Icmpv6));
        assert_eq!(Protocol::parse("icmpv6"), Some(Protocol::Icmpv6));
        assert_eq!(Protocol::parse("132"), Some(Protocol::Sctp));
        assert_eq!(Protocol::parse("all"), Some(Protocol::ALL));
        assert_eq!(Protocol::parse("47"), Some(Protocol::Other(47)));
        assert_eq!(Protocol::parse("256"), None);
        assert_eq!(Protocol::parse("tcpx"), None);
        for number in 0..=u8::MAX {
            assert_eq!(Protocol::from_number(number).number(), number);
        }
    }

    #[test]
    fn a_protocol_is_written_by_its_name_else_its_number() {
        assert_eq!(Protocol::Tcp.to_string(), "tcp");
        assert_eq!(Protocol::Icmpv6.to_string(), "icmpv6");
        assert_eq!(Protocol::IPIP.to_string(), "ipencap");
        assert_eq!(Protocol::Other(253).to_string(), "253");
        assert!(Protocol::Sctp.has_ports() && !Protocol::Icmp.has_ports());
    }
}
