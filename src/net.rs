//! The network vocabulary every layer shares, below them all: what a packet
//! carries above IP ([`Protocol`]). A flow's protocol, a Service port's, a
//! listening socket's, an IPVS service's, a policy rule's `ipproto` and an
//! iptables `-p` are all this one type, so that no layer translates between
//! parallel enums.

use std::fmt;

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
