//! Values that netfilter dumps spell as text (numbers, ports, addresses,
//! protocols, interfaces, marks), read once so that evaluation never looks
//! at strings again. `ipset` and `ipvsadm` dumps share them.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use crate::net::Protocol;

/// A value that could not be read, with a message saying why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadValue(pub String);

pub(crate) fn bad<T>(message: impl Into<String>) -> Result<T, BadValue> {
    Err(BadValue(message.into()))
}

/// A test that `!` may invert: `invert` means the rule matches when `value`
/// does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invertible<T> {
    pub invert: bool,
    pub value: T,
}

/// Reads an unsigned number the way `strtoul(text, NULL, 0)` does, as
/// iptables does: `0x` prefix for hex, a leading `0` for octal, else decimal.
pub(crate) fn unsigned(text: &str) -> Result<u64, BadValue> {
    let (digits, radix) =
        if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            (hex, 16)
        } else if text.len() > 1 && text.starts_with('0') {
            (&text[1..], 8)
        } else {
            (text, 10)
        };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return bad(format!("`{text}` is not a number"));
    }
    u64::from_str_radix(digits, radix).or_else(|_| bad(format!("`{text}` is not a number")))
}

/// Reads an unsigned number that must fit in `T`.
pub(crate) fn number<T: TryFrom<u64>>(text: &str) -> Result<T, BadValue> {
    let value = unsigned(text)?;
    T::try_from(value).or_else(|_| bad(format!("`{text}` is too large")))
}

/// An inclusive range of ports; a single port is a range of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange {
        first: 0,
        last: u16::MAX,
    };

    pub fn single(port: u16) -> PortRange {
        PortRange {
            first: port,
            last: port,
        }
    }

    pub fn contains(self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }

    /// Reads `80`, or a range with `separator` between its ends: `80:90`;
    /// an empty end means 0 or 65535 (`:90`, `1024:`). Port names are not
    /// resolved: dumps print numbers.
    pub(crate) fn parse(text: &str, separator: char) -> Result<PortRange, BadValue> {
        let range = match text.split_once(separator) {
            None => PortRange::single(port(text)?),
            Some((first, last)) => PortRange {
                first: if first.is_empty() { 0 } else { port(first)? },
                last: if last.is_empty() {
                    u16::MAX
                } else {
                    port(last)?
                },
            },
        };
        if range.first > range.last {
            return bad(format!("port range `{text}` ends before it starts"));
        }
        Ok(range)
    }
}

fn port(text: &str) -> Result<u16, BadValue> {
    number(text).or_else(|_| bad(format!("`{text}` is not a port number")))
}

/// A protocol as a rule gives it (`-p`, `--ctproto`, ipset's `proto:port`):
/// a name (any case, with the table iptables and `/etc/protocols` use) or
/// a number.
pub(crate) fn protocol(text: &str) -> Result<Protocol, BadValue> {
    Protocol::parse(text)
        .ok_or_else(|| BadValue(format!("`{text}` is not a protocol name or number")))
}

/// An interface test (`-i cali+`): a name, or with `wildcard` every name that
/// starts with it (`+` alone matches every interface).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub wildcard: bool,
}

impl Interface {
    /// Linux interface names have at most 15 bytes.
    const MAX_NAME: usize = 15;

    pub(crate) fn parse(text: &str) -> Result<Interface, BadValue> {
        let (name, wildcard) = match text.strip_suffix('+') {
            Some(prefix) => (prefix, true),
            None => (text, false),
        };
        if name.len() > Self::MAX_NAME {
            return bad(format!(
                "interface name `{text}` is longer than {} bytes",
                Self::MAX_NAME
            ));
        }
        Ok(Interface {
            name: name.to_owned(),
            wildcard,
        })
    }

    pub fn matches(&self, interface: &str) -> bool {
        if self.wildcard {
            interface.starts_with(&self.name)
        } else {
            interface == self.name
        }
    }
}

/// Reads an address without a prefix.
pub(crate) fn ip_addr(text: &str) -> Result<IpAddr, BadValue> {
    if let Some(v4) = dotted_quad(text) {
        return Ok(IpAddr::V4(v4));
    }
    text.parse()
        .or_else(|_| bad(format!("`{text}` is not an IP address")))
}

/// Reads the common `a.b.c.d` form directly: dumps hold hundreds of
/// thousands of addresses. Anything else (IPv6, errors) goes to the standard
/// parser, which accepts the same IPv4 texts.
fn dotted_quad(text: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut octet = 0;
    // The value and digit count of the octet being read.
    let (mut value, mut digits) = (0u16, 0);
    for &byte in text.as_bytes() {
        match byte {
            b'0'..=b'9' => {
                // No leading zero, at most three digits.
                if digits == 3 || (digits == 1 && value == 0) {
                    return None;
                }
                value = value * 10 + u16::from(byte - b'0');
                digits += 1;
            }
            b'.' if digits > 0 => {
                *octets.get_mut(octet)? = u8::try_from(value).ok()?;
                octet += 1;
                (value, digits) = (0, 0);
            }
            _ => return None,
        }
    }
    if octet != 3 || digits == 0 {
        return None;
    }
    octets[3] = u8::try_from(value).ok()?;
    Some(Ipv4Addr::from(octets))
}

/// Reads `addr`, `addr/len` or `addr/dotted-mask` into the network netfilter
/// compares with: host bits cleared, as iptables clears them on input.
pub(crate) fn ip_net(text: &str) -> Result<IpNet, BadValue> {
    let (addr, prefix) = match text.split_once('/') {
        None => (ip_addr(text)?, None),
        Some((addr, prefix)) => (ip_addr(addr)?, Some(prefix)),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match prefix {
        None => max,
        Some(prefix) => prefix_len(prefix)?,
    };
    match IpNet::new(addr, len) {
        Ok(net) => Ok(net.trunc()),
        Err(_) => bad(format!("prefix length in `{text}` is larger than {max}")),
    }
}

/// Reads a prefix length, written as a number (`24`) or as a mask
/// (`255.255.255.0`); a mask with holes has none.
pub(crate) fn prefix_len(text: &str) -> Result<u8, BadValue> {
    match text.parse::<u8>() {
        Ok(len) => Ok(len),
        Err(_) => mask_len(text),
    }
}

fn mask_len(mask: &str) -> Result<u8, BadValue> {
    let bits = match ip_addr(mask)? {
        IpAddr::V4(v4) => u128::from(u32::from(v4)) << 96,
        IpAddr::V6(v6) => u128::from(v6),
    };
    let len = bits.leading_ones();
    if bits.checked_shl(len).unwrap_or(0) != 0 {
        return bad(format!("mask `{mask}` is not contiguous"));
    }
    // `len` is at most 128.
    Ok(len as u8)
}

/// An inclusive range of addresses (`10.0.0.1-10.0.0.9`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRange {
    pub first: IpAddr,
    pub last: IpAddr,
}

impl AddressRange {
    pub fn contains(self, addr: IpAddr) -> bool {
        (self.first..=self.last).contains(&addr)
    }

    /// The range from `first` to `last`, which must be of one family and in order.
    pub(crate) fn new(first: IpAddr, last: IpAddr) -> Result<AddressRange, BadValue> {
        if first.is_ipv4() != last.is_ipv4() || first > last {
            return bad(format!("`{first}-{last}` is not an address range"));
        }
        Ok(AddressRange { first, last })
    }

    /// Reads `a-b`, or a single address as a range of one.
    pub(crate) fn parse(text: &str) -> Result<AddressRange, BadValue> {
        match text.split_once('-') {
            None => {
                let addr = ip_addr(text)?;
                AddressRange::new(addr, addr)
            }
            Some((first, last)) => AddressRange::new(ip_addr(first)?, ip_addr(last)?),
        }
    }
}

/// A mark test or a mark with a mask: `value/mask`, the mask all ones when
/// absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkMask {
    pub value: u32,
    pub mask: u32,
}

impl MarkMask {
    /// Whether `mark` matches: `mark & mask == value`.
    pub fn matches(self, mark: u32) -> bool {
        mark & self.mask == self.value
    }

    pub(crate) fn parse(text: &str) -> Result<MarkMask, BadValue> {
        match text.split_once('/') {
            None => Ok(MarkMask {
                value: number(text)?,
                mask: u32::MAX,
            }),
            Some((value, mask)) => Ok(MarkMask {
                value: number(value)?,
                mask: number(mask)?,
            }),
        }
    }
}

/// An ICMP type test (`--icmp-type`, ipset's `icmp:type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpType {
    /// `any`: every ICMP packet.
    Any,
    /// A type with every code.
    Type(u8),
    /// A type with one code.
    TypeCode(u8, u8),
}

impl IcmpType {
    /// The names iptables and ipset accept, with what they stand for.
    const NAMES: &'static [(&'static str, IcmpType)] = {
        use IcmpType::{Any, Type, TypeCode};
        &[
            ("any", Any),
            ("echo-reply", Type(0)),
            ("pong", Type(0)),
            ("destination-unreachable", Type(3)),
            ("network-unreachable", TypeCode(3, 0)),
            ("host-unreachable", TypeCode(3, 1)),
            ("protocol-unreachable", TypeCode(3, 2)),
            ("port-unreachable", TypeCode(3, 3)),
            ("fragmentation-needed", TypeCode(3, 4)),
            ("source-route-failed", TypeCode(3, 5)),
            ("network-unknown", TypeCode(3, 6)),
            ("host-unknown", TypeCode(3, 7)),
            ("host-isolated", TypeCode(3, 8)),
            ("network-prohibited", TypeCode(3, 9)),
            ("host-prohibited", TypeCode(3, 10)),
            ("TOS-network-unreachable", TypeCode(3, 11)),
            ("TOS-host-unreachable", TypeCode(3, 12)),
            ("communication-prohibited", TypeCode(3, 13)),
            ("host-precedence-violation", TypeCode(3, 14)),
            ("precedence-cutoff", TypeCode(3, 15)),
            ("source-quench", Type(4)),
            ("redirect", Type(5)),
            ("network-redirect", TypeCode(5, 0)),
            ("host-redirect", TypeCode(5, 1)),
            ("TOS-network-redirect", TypeCode(5, 2)),
            ("TOS-host-redirect", TypeCode(5, 3)),
            ("echo-request", Type(8)),
            ("ping", Type(8)),
            ("router-advertisement", Type(9)),
            ("router-solicitation", Type(10)),
            ("time-exceeded", Type(11)),
            ("ttl-exceeded", Type(11)),
            ("ttl-zero-during-transit", TypeCode(11, 0)),
            ("ttl-zero-during-reassembly", TypeCode(11, 1)),
            ("parameter-problem", Type(12)),
            ("ip-header-bad", TypeCode(12, 0)),
            ("required-option-missing", TypeCode(12, 1)),
            ("timestamp-request", Type(13)),
            ("timestamp-reply", Type(14)),
            ("address-mask-request", Type(17)),
            ("address-mask-reply", Type(18)),
        ]
    };

    /// The ICMPv6 names ip6tables accepts (`--icmpv6-type`), with what
    /// they stand for.
    const NAMES6: &'static [(&'static str, IcmpType)] = {
        use IcmpType::{Type, TypeCode};
        &[
            ("destination-unreachable", Type(1)),
            ("no-route", TypeCode(1, 0)),
            ("communication-prohibited", TypeCode(1, 1)),
            ("beyond-scope", TypeCode(1, 2)),
            ("address-unreachable", TypeCode(1, 3)),
            ("port-unreachable", TypeCode(1, 4)),
            ("failed-policy", TypeCode(1, 5)),
            ("reject-route", TypeCode(1, 6)),
            ("packet-too-big", Type(2)),
            ("time-exceeded", Type(3)),
            ("ttl-exceeded", Type(3)),
            ("ttl-zero-during-transit", TypeCode(3, 0)),
            ("ttl-zero-during-reassembly", TypeCode(3, 1)),
            ("parameter-problem", Type(4)),
            ("bad-header", TypeCode(4, 0)),
            ("unknown-header-type", TypeCode(4, 1)),
            ("unknown-option", TypeCode(4, 2)),
            ("echo-request", Type(128)),
            ("ping", Type(128)),
            ("echo-reply", Type(129)),
            ("pong", Type(129)),
            ("mld-listener-query", Type(130)),
            ("mld-listener-report", Type(131)),
            ("mld-listener-done", Type(132)),
            ("mld-listener-reduction", Type(132)),
            ("router-solicitation", Type(133)),
            ("router-advertisement", Type(134)),
            ("neighbour-solicitation", Type(135)),
            ("neighbor-solicitation", Type(135)),
            ("neighbour-advertisement", Type(136)),
            ("neighbor-advertisement", Type(136)),
            ("redirect", Type(137)),
        ]
    };

    /// Reads a name, `type` or `type/code`.
    pub(crate) fn parse(text: &str) -> Result<IcmpType, BadValue> {
        IcmpType::parse_named(Self::NAMES, text)
    }

    /// Reads an ICMPv6 name, `type` or `type/code` (`--icmpv6-type`).
    pub(crate) fn parse6(text: &str) -> Result<IcmpType, BadValue> {
        IcmpType::parse_named(Self::NAMES6, text)
    }

    fn parse_named(names: &[(&str, IcmpType)], text: &str) -> Result<IcmpType, BadValue> {
        if let Some((_, icmp)) = names
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text))
        {
            return Ok(*icmp);
        }
        let not_icmp = || BadValue(format!("`{text}` is not an ICMP type"));
        match text.split_once('/') {
            None => number(text).map(IcmpType::Type).map_err(|_| not_icmp()),
            Some((kind, code)) => Ok(IcmpType::TypeCode(
                number(kind).map_err(|_| not_icmp())?,
                number(code).map_err(|_| not_icmp())?,
            )),
        }
    }
}

/// Declares a set of named flags stored as bits, read from a comma-separated
/// list of names (any case), as iptables spells them (`NEW,ESTABLISHED`).
macro_rules! flag_set {
    ($(#[$doc:meta])* $name:ident: $repr:ty { $($(#[$flag_doc:meta])* $flag:ident = $bit:expr, $text:literal;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name(pub $repr);

        impl $name {
            $($(#[$flag_doc])* pub const $flag: $name = $name($bit);)*
            const NAMES: &'static [(&'static str, $repr)] = &[$(($text, $bit)),*];

            /// Whether every flag of `other` is in `self`.
            pub fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether `self` and `other` share a flag.
            pub fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            pub(crate) fn parse(text: &str) -> Result<$name, $crate::snapshot::netns::iptables::BadValue> {
                let mut bits = 0;
                for part in text.split(',') {
                    match Self::NAMES.iter().find(|(name, _)| name.eq_ignore_ascii_case(part)) {
                        Some((_, bit)) => bits |= *bit,
                        None => {
                            return Err($crate::snapshot::netns::iptables::BadValue(format!(
                                "`{part}` is not one of {}",
                                Self::NAMES.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
                            )))
                        }
                    }
                }
                Ok($name(bits))
            }
        }
    };
}
pub(crate) use flag_set;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_strtoul_base_zero() {
        assert_eq!(unsigned("0x4000"), Ok(0x4000));
        assert_eq!(unsigned("010"), Ok(8));
        assert_eq!(unsigned("0"), Ok(0));
        assert_eq!(unsigned("42"), Ok(42));
        assert!(unsigned("").is_err());
        assert!(unsigned("-1").is_err());
        assert!(unsigned("12a").is_err());
        assert!(unsigned("09").is_err());
        assert_eq!(number::<u8>("256"), bad("`256` is too large"));
    }

    #[test]
    fn port_ranges_have_open_ends() {
        assert_eq!(PortRange::parse("80", ':'), Ok(PortRange::single(80)));
        assert_eq!(
            PortRange::parse("80:90", ':'),
            Ok(PortRange {
                first: 80,
                last: 90
            })
        );
        assert_eq!(
            PortRange::parse(":90", ':'),
            Ok(PortRange { first: 0, last: 90 })
        );
        assert_eq!(
            PortRange::parse("1024:", ':'),
            Ok(PortRange {
                first: 1024,
                last: 65535
            })
        );
        assert_eq!(
            PortRange::parse("1000-2000", '-'),
            Ok(PortRange {
                first: 1000,
                last: 2000
            })
        );
        assert!(PortRange::parse("90:80", ':').is_err());
        assert!(PortRange::parse("http", ':').is_err());
        assert!(PortRange::parse("70000", ':').is_err());
    }

    proptest::proptest! {
        #[test]
        fn dotted_quads_read_like_the_standard_parser(text in "[0-9.]{0,17}") {
            proptest::prop_assert_eq!(ip_addr(&text).ok(), text.parse::<IpAddr>().ok());
        }
    }

    #[test]
    fn networks_read_with_length_or_mask_and_lose_host_bits() {
        assert_eq!(ip_net("10.1.2.3/8"), Ok("10.0.0.0/8".parse().unwrap()));
        assert_eq!(ip_net("10.1.2.3"), Ok("10.1.2.3/32".parse().unwrap()));
        assert_eq!(
            ip_net("10.0.0.0/255.255.0.0"),
            Ok("10.0.0.0/16".parse().unwrap())
        );
        assert_eq!(ip_net("fd00::1/64"), Ok("fd00::/64".parse().unwrap()));
        assert!(ip_net("10.0.0.0/255.0.255.0").is_err());
        assert!(ip_net("10.0.0.0/33").is_err());
        assert!(ip_net("ten").is_err());
    }

    #[test]
    fn protocols_read_by_name_or_number() {
        assert_eq!(protocol("TCP"), Ok(Protocol::Tcp));
        assert_eq!(protocol("ipencap"), Ok(Protocol::IPIP));
        assert_eq!(protocol("47"), Ok(Protocol::Other(47)));
        assert_eq!(Protocol::Other(47).name(), Some("gre"));
        assert!(protocol("nonsense").is_err());
    }

    #[test]
    fn interface_wildcard_matches_prefix() {
        let cali = Interface::parse("cali+").unwrap();
        assert!(cali.matches("cali1a2b") && !cali.matches("eth0"));
        assert!(Interface::parse("+").unwrap().matches("anything"));
        assert!(Interface::parse("eth0").unwrap().matches("eth0"));
        assert!(Interface::parse("a-very-long-interface-name").is_err());
    }

    #[test]
    fn marks_default_to_a_full_mask() {
        assert_eq!(
            MarkMask::parse("0x4000/0x4000"),
            Ok(MarkMask {
                value: 0x4000,
                mask: 0x4000
            })
        );
        assert_eq!(
            MarkMask::parse("1"),
            Ok(MarkMask {
                value: 1,
                mask: u32::MAX
            })
        );
        assert!(MarkMask::parse("0x1/zz").is_err());
    }

    #[test]
    fn icmp_types_read_by_name_or_number() {
        assert_eq!(IcmpType::parse("echo-request"), Ok(IcmpType::Type(8)));
        assert_eq!(
            IcmpType::parse("communication-prohibited"),
            Ok(IcmpType::TypeCode(3, 13))
        );
        assert_eq!(IcmpType::parse("3/4"), Ok(IcmpType::TypeCode(3, 4)));
        assert_eq!(IcmpType::parse("any"), Ok(IcmpType::Any));
        assert!(IcmpType::parse("3/x").is_err());
    }

    #[test]
    fn address_ranges_are_ordered_and_of_one_family() {
        let range = AddressRange::parse("10.0.0.1-10.0.0.9").unwrap();
        assert!(range.contains("10.0.0.5".parse().unwrap()));
        assert!(AddressRange::parse("10.0.0.9-10.0.0.1").is_err());
        assert!(AddressRange::parse("10.0.0.1-fd00::1").is_err());
    }
}
