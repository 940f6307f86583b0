//! `ipset save` output read into typed sets: each `create NAME TYPE
//! [options]` line declares a set, each `add NAME MEMBER [options]` line adds
//! a member to a set declared before it.
//!
//! Members are read according to their set's type, so that looking a packet
//! up never parses text. A set of a type this parser does not know keeps its
//! members as [`Member::Unsupported`], and so does a member that cannot be
//! read (with an issue): a lookup in such a set has an unknown outcome,
//! never an invented one.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use super::iptables::{
    BadValue, IcmpType, MarkMask, PortRange, Protocol, Word, column, ip_addr, ip_net, number,
    split_words,
};
use crate::net::Family;
use crate::snapshot::problem::{ParseIssue, Parsed};

/// Every set `ipset save` printed, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpSets {
    pub sets: Vec<IpSet>,
    by_name: HashMap<String, usize>,
}

impl IpSets {
    pub fn set(&self, name: &str) -> Option<&IpSet> {
        self.by_name.get(name).and_then(|&i| self.sets.get(i))
    }
}

/// One set with its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpSet {
    pub name: String,
    pub kind: SetType,
    /// `family inet|inet6`, for the types that have one.
    pub family: Option<Family>,
    pub options: SetOptions,
    /// Line of the `create` line.
    pub line: usize,
    /// In file order.
    pub entries: Vec<Entry>,
}

/// What a set stores, and so what its members look like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetType {
    /// `hash:ip`: addresses (networks of `netmask` when it is set).
    HashIp,
    /// `hash:net`: networks, `nomatch` members excepted.
    HashNet,
    /// `hash:ip,port`
    HashIpPort,
    /// `hash:net,port`
    HashNetPort,
    /// `hash:ip,port,ip`
    HashIpPortIp,
    /// `hash:ip,port,net`
    HashIpPortNet,
    /// `bitmap:port`: port numbers of any protocol.
    BitmapPort,
    /// `list:set`: names of other sets, tried in order.
    ListSet,
    /// A type this parser does not read members of.
    Unsupported(String),
}

impl SetType {
    fn parse(text: &str) -> SetType {
        match text {
            "hash:ip" => SetType::HashIp,
            "hash:net" => SetType::HashNet,
            "hash:ip,port" => SetType::HashIpPort,
            "hash:net,port" => SetType::HashNetPort,
            "hash:ip,port,ip" => SetType::HashIpPortIp,
            "hash:ip,port,net" => SetType::HashIpPortNet,
            "bitmap:port" => SetType::BitmapPort,
            "list:set" => SetType::ListSet,
            other => SetType::Unsupported(other.to_owned()),
        }
    }
}

/// The options of a `create` line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetOptions {
    pub hashsize: Option<u32>,
    pub maxelem: Option<u32>,
    pub bucketsize: Option<u32>,
    pub initval: Option<u32>,
    /// Default timeout of members, in seconds.
    pub timeout: Option<u32>,
    /// `hash:ip`: members are networks of this prefix length.
    pub netmask: Option<u8>,
    /// `bitmap:port`: the ports the set can hold.
    pub range: Option<PortRange>,
    /// `list:set`: how many sets it can hold.
    pub size: Option<u32>,
    pub counters: bool,
    pub comment: bool,
    pub skbinfo: bool,
    pub forceadd: bool,
}

/// One `add` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub member: Member,
    pub line: usize,
    /// Seconds left before the member expires.
    pub timeout: Option<u32>,
    /// `nomatch`: the member is an exception (a hole in a `hash:net*` set).
    pub nomatch: bool,
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
    pub comment: Option<String>,
    pub skbmark: Option<MarkMask>,
    /// `skbprio MAJOR:MINOR`
    pub skbprio: Option<(u16, u16)>,
    pub skbqueue: Option<u16>,
}

/// A member, typed by its set's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    Ip(IpAddr),
    Net(IpNet),
    IpPort(IpAddr, SetPort),
    NetPort(IpNet, SetPort),
    IpPortIp(IpAddr, SetPort, IpAddr),
    IpPortNet(IpAddr, SetPort, IpNet),
    Port(u16),
    /// A member of a `list:set`: another set's name.
    Set(String),
    /// A member of an unsupported set type, or one that could not be read,
    /// as written.
    Unsupported(String),
}

/// The `proto:port` part of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetPort {
    /// A port of tcp, udp, sctp or udplite, or 0 for a protocol without
    /// ports (`gre:0`). A bare port means tcp.
    Port { protocol: Protocol, port: u16 },
    /// `icmp:TYPE/CODE` or a name standing for one.
    Icmp { kind: u8, code: u8 },
    /// `icmpv6:TYPE/CODE` or a name standing for one.
    Icmpv6 { kind: u8, code: u8 },
}

impl SetPort {
    /// The ICMPv6 names `ipset` prints, with their type and code.
    const ICMPV6_NAMES: &'static [(&'static str, (u8, u8))] = &[
        ("no-route", (1, 0)),
        ("communication-prohibited", (1, 1)),
        ("address-unreachable", (1, 3)),
        ("port-unreachable", (1, 4)),
        ("packet-too-big", (2, 0)),
        ("ttl-zero-during-transit", (3, 0)),
        ("ttl-zero-during-reassembly", (3, 1)),
        ("bad-header", (4, 0)),
        ("unknown-header-type", (4, 1)),
        ("unknown-option", (4, 2)),
        ("echo-request", (128, 0)),
        ("echo-reply", (129, 0)),
        ("router-solicitation", (133, 0)),
        ("router-advertisement", (134, 0)),
        ("neighbour-solicitation", (135, 0)),
        ("neighbour-advertisement", (136, 0)),
        ("redirect", (137, 0)),
    ];

    fn parse(text: &str) -> Result<SetPort, BadValue> {
        let (protocol, port) = match text.split_once(':') {
            Some((protocol, port)) => (super::iptables::protocol(protocol)?, port),
            None => (Protocol::Tcp, text),
        };
        let type_code = |kind, code| -> Result<(u8, u8), BadValue> {
            match code {
                Some(code) => Ok((number(kind)?, number(code)?)),
                None => Err(BadValue(format!("`{text}` is not an ICMP type"))),
            }
        };
        match protocol {
            Protocol::Icmp => {
                let (kind, code) = match IcmpType::parse(port)? {
                    IcmpType::TypeCode(kind, code) => (kind, code),
                    IcmpType::Type(kind) => (kind, 0),
                    IcmpType::Any => {
                        return Err(BadValue(format!("`{text}` is not an ICMP type and code")));
                    }
                };
                Ok(SetPort::Icmp { kind, code })
            }
            Protocol::Icmpv6 => {
                let (kind, code) = match Self::ICMPV6_NAMES.iter().find(|(name, _)| *name == port) {
                    Some((_, type_code)) => *type_code,
                    None => {
                        let (kind, code) = port
                            .split_once('/')
                            .map_or((port, None), |(k, c)| (k, Some(c)));
                        type_code(kind, code)?
                    }
                };
                Ok(SetPort::Icmpv6 { kind, code })
            }
            protocol => Ok(SetPort::Port {
                protocol,
                port: number(port)?,
            }),
        }
    }
}

impl Member {
    /// Reads a member of a set of type `kind`.
    fn parse(kind: &SetType, text: &str) -> Result<Member, BadValue> {
        let parts: Vec<&str> = text.split(',').collect();
        let wrong = || BadValue(format!("`{text}` is not a member of a {} set", kind.name()));
        Ok(match (kind, &parts[..]) {
            (SetType::HashIp, &[ip]) => Member::Ip(ip_addr(ip)?),
            (SetType::HashNet, &[net]) => Member::Net(ip_net(net)?),
            (SetType::HashIpPort, &[ip, port]) => {
                Member::IpPort(ip_addr(ip)?, SetPort::parse(port)?)
            }
            (SetType::HashNetPort, &[net, port]) => {
                Member::NetPort(ip_net(net)?, SetPort::parse(port)?)
            }
            (SetType::HashIpPortIp, &[ip, port, ip2]) => {
                Member::IpPortIp(ip_addr(ip)?, SetPort::parse(port)?, ip_addr(ip2)?)
            }
            (SetType::HashIpPortNet, &[ip, port, net]) => {
                Member::IpPortNet(ip_addr(ip)?, SetPort::parse(port)?, ip_net(net)?)
            }
            (SetType::BitmapPort, &[port]) => Member::Port(number(port)?),
            (SetType::ListSet, &[name]) => Member::Set(name.to_owned()),
            (SetType::Unsupported(_), _) => Member::Unsupported(text.to_owned()),
            _ => return Err(wrong()),
        })
    }
}

impl fmt::Display for Member {
    /// As `ipset save` writes it (`10.244.1.2`, `10.244.1.2,tcp:8080`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Member::Ip(ip) => write!(f, "{ip}"),
            Member::Net(net) => write!(f, "{net}"),
            Member::IpPort(ip, port) => write!(f, "{ip},{port}"),
            Member::NetPort(net, port) => write!(f, "{net},{port}"),
            Member::IpPortIp(ip, port, ip2) => write!(f, "{ip},{port},{ip2}"),
            Member::IpPortNet(ip, port, net) => write!(f, "{ip},{port},{net}"),
            Member::Port(port) => write!(f, "{port}"),
            Member::Set(name) | Member::Unsupported(name) => f.write_str(name),
        }
    }
}

impl fmt::Display for SetPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetPort::Port { protocol, port } => write!(f, "{protocol}:{port}"),
            SetPort::Icmp { kind, code } => write!(f, "icmp:{kind}/{code}"),
            SetPort::Icmpv6 { kind, code } => write!(f, "icmpv6:{kind}/{code}"),
        }
    }
}

impl SetType {
    pub fn name(&self) -> &str {
        match self {
            SetType::HashIp => "hash:ip",
            SetType::HashNet => "hash:net",
            SetType::HashIpPort => "hash:ip,port",
            SetType::HashNetPort => "hash:net,port",
            SetType::HashIpPortIp => "hash:ip,port,ip",
            SetType::HashIpPortNet => "hash:ip,port,net",
            SetType::BitmapPort => "bitmap:port",
            SetType::ListSet => "list:set",
            SetType::Unsupported(name) => name,
        }
    }
}

/// Reads `ipset save` output. `None` only when the text has content but not
/// one set could be read from it.
pub fn parse(text: &str) -> Parsed<IpSets> {
    let mut sets = IpSets::default();
    let mut issues = Vec::new();
    let mut words = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let mut issue = |at: usize, message: String| {
            issues.push(ParseIssue::at(number, column(line, at), message))
        };
        if let Err(unclosed) = split_words(line, &mut words) {
            issue(unclosed.start, unclosed.to_string());
            continue;
        }
        let Some(command) = words.first() else {
            continue;
        };
        match &*command.text {
            "create" | "-N" => create(&mut sets, number, line, &words, &mut issue),
            "add" | "-A" => add(&mut sets, number, &words, &mut issue),
            text if text.starts_with('#') => {}
            other => issue(
                command.start,
                format!("expected `create` or `add`, found `{other}`"),
            ),
        }
    }
    if sets.sets.is_empty() && !issues.is_empty() {
        return (None, issues);
    }
    (Some(sets), issues)
}

fn create(
    sets: &mut IpSets,
    number: usize,
    line: &str,
    words: &[Word<'_>],
    issue: &mut impl FnMut(usize, String),
) {
    let (Some(name), Some(kind)) = (words.get(1), words.get(2)) else {
        issue(
            line.len(),
            "`create` needs a set name and a type".to_owned(),
        );
        return;
    };
    if let Some(&earlier) = sets.by_name.get(&*name.text) {
        let first = sets.sets.get(earlier).map_or(0, |s| s.line);
        issue(
            name.start,
            format!(
                "set `{}` is created twice (first at line {first})",
                name.text
            ),
        );
        return;
    }
    let kind = SetType::parse(&kind.text);
    let mut set = IpSet {
        name: name.text.to_string(),
        kind,
        family: None,
        options: SetOptions::default(),
        line: number,
        entries: Vec::new(),
    };
    // The options of a type this parser does not know are not read either.
    if !matches!(set.kind, SetType::Unsupported(_)) {
        read_options(&words[3..], issue, |option, value| {
            create_option(&mut set, option, value)
        });
    }
    sets.by_name.insert(set.name.clone(), sets.sets.len());
    sets.sets.push(set);
}

/// What an option of a `create` or `add` line is.
enum OptionKind {
    /// Takes no value.
    Flag,
    /// Takes a value, read into the set or entry.
    Valued,
    Unknown,
}

/// Reads `key [value]` options, reporting each one that `apply` rejects.
fn read_options(
    words: &[Word<'_>],
    issue: &mut impl FnMut(usize, String),
    mut apply: impl FnMut(&str, Option<&str>) -> Result<OptionKind, BadValue>,
) {
    let mut i = 0;
    while let Some(word) = words.get(i) {
        let value = words.get(i + 1);
        match apply(&word.text, value.map(|v| &*v.text)) {
            Ok(OptionKind::Flag) => i += 1,
            Ok(OptionKind::Valued) => i += 2,
            Ok(OptionKind::Unknown) => {
                issue(word.start, format!("unknown option `{}`", word.text));
                i += 1;
            }
            Err(BadValue(message)) => {
                issue(value.map_or(word.end, |v| v.start), message);
                i += 2;
            }
        }
    }
}

fn valued<T>(
    value: Option<&str>,
    option: &str,
    parse: impl FnOnce(&str) -> Result<T, BadValue>,
) -> Result<T, BadValue> {
    let value = value.ok_or_else(|| BadValue(format!("`{option}` needs a value")))?;
    parse(value)
}

fn create_option(
    set: &mut IpSet,
    option: &str,
    value: Option<&str>,
) -> Result<OptionKind, BadValue> {
    let options = &mut set.options;
    let flag = |flag: &mut bool| {
        *flag = true;
        Ok(OptionKind::Flag)
    };
    match option {
        "counters" => return flag(&mut options.counters),
        "comment" => return flag(&mut options.comment),
        "skbinfo" => return flag(&mut options.skbinfo),
        "forceadd" => return flag(&mut options.forceadd),
        _ => {}
    }
    match option {
        "family" => {
            set.family = Some(valued(value, option, |v| match v {
                "inet" => Ok(Family::Ipv4),
                "inet6" => Ok(Family::Ipv6),
                _ => Err(BadValue(format!("`{v}` is not a family (inet or inet6)"))),
            })?)
        }
        "hashsize" => options.hashsize = Some(valued(value, option, number)?),
        "maxelem" => options.maxelem = Some(valued(value, option, number)?),
        "bucketsize" => options.bucketsize = Some(valued(value, option, number)?),
        "initval" => options.initval = Some(valued(value, option, number)?),
        "timeout" => options.timeout = Some(valued(value, option, number)?),
        "netmask" => options.netmask = Some(valued(value, option, number)?),
        "size" => options.size = Some(valued(value, option, number)?),
        "range" => options.range = Some(valued(value, option, |v| PortRange::parse(v, '-'))?),
        _ => return Ok(OptionKind::Unknown),
    }
    Ok(OptionKind::Valued)
}

fn add(
    sets: &mut IpSets,
    number: usize,
    words: &[Word<'_>],
    issue: &mut impl FnMut(usize, String),
) {
    let (Some(name), Some(member)) = (words.get(1), words.get(2)) else {
        let at = words.last().map_or(0, |w| w.end);
        issue(at, "`add` needs a set name and a member".to_owned());
        return;
    };
    let Some(set) = sets
        .by_name
        .get(&*name.text)
        .and_then(|&i| sets.sets.get_mut(i))
    else {
        issue(
            name.start,
            format!(
                "set `{}` was never created; the member is skipped",
                name.text
            ),
        );
        return;
    };
    let member = Member::parse(&set.kind, &member.text).unwrap_or_else(|BadValue(message)| {
        issue(member.start, message);
        Member::Unsupported(member.text.to_string())
    });
    let mut entry = Entry {
        member,
        line: number,
        timeout: None,
        nomatch: false,
        packets: None,
        bytes: None,
        comment: None,
        skbmark: None,
        skbprio: None,
        skbqueue: None,
    };
    read_options(&words[3..], issue, |option, value| {
        entry_option(&mut entry, option, value)
    });
    set.entries.push(entry);
}

fn entry_option(
    entry: &mut Entry,
    option: &str,
    value: Option<&str>,
) -> Result<OptionKind, BadValue> {
    match option {
        "nomatch" => {
            entry.nomatch = true;
            return Ok(OptionKind::Flag);
        }
        "timeout" => entry.timeout = Some(valued(value, option, number)?),
        "packets" => entry.packets = Some(valued(value, option, number)?),
        "bytes" => entry.bytes = Some(valued(value, option, number)?),
        "comment" => entry.comment = Some(valued(value, option, |v| Ok(v.to_owned()))?),
        "skbmark" => entry.skbmark = Some(valued(value, option, MarkMask::parse)?),
        "skbqueue" => entry.skbqueue = Some(valued(value, option, number)?),
        "skbprio" => {
            entry.skbprio = Some(valued(value, option, |v| match v.split_once(':') {
                Some((major, minor)) => Ok((number(major)?, number(minor)?)),
                None => Err(BadValue(format!("`{v}` is not MAJOR:MINOR"))),
            })?)
        }
        _ => return Ok(OptionKind::Unknown),
    }
    Ok(OptionKind::Valued)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::netns::iptables::tests::{assert_issues_within, netfilter_text};

    fn fixture(layout: &str) -> IpSets {
        let path = format!(
            "{}/tests/fixtures/netfilter/{layout}/ipset-save.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let (sets, issues) = parse(&text);
        assert_eq!(issues, [], "{layout}");
        sets.expect("sets")
    }

    fn set<'s>(sets: &'s IpSets, name: &str) -> &'s IpSet {
        sets.set(name).unwrap_or_else(|| panic!("no set {name}"))
    }

    fn members(set: &IpSet) -> Vec<Member> {
        set.entries.iter().map(|e| e.member.clone()).collect()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn net(text: &str) -> IpNet {
        text.parse().unwrap()
    }

    fn tcp(port: u16) -> SetPort {
        SetPort::Port {
            protocol: Protocol::Tcp,
            port,
        }
    }

    #[test]
    fn kube_proxy_ipvs_sets_have_typed_members() {
        let sets = fixture("kube-proxy-ipvs");
        let cluster_ip = set(&sets, "KUBE-CLUSTER-IP");
        assert_eq!(cluster_ip.kind, SetType::HashIpPort);
        assert_eq!(cluster_ip.family, Some(Family::Ipv4));
        assert_eq!(
            (
                cluster_ip.options.hashsize,
                cluster_ip.options.maxelem,
                cluster_ip.options.comment
            ),
            (Some(1024), Some(65536), true)
        );
        assert!(members(cluster_ip).contains(&Member::IpPort(ip("10.96.0.1"), tcp(443))));
        let dns = cluster_ip.entries.iter().find(|e| {
            e.member
                == Member::IpPort(
                    ip("10.96.0.10"),
                    SetPort::Port {
                        protocol: Protocol::Udp,
                        port: 53,
                    },
                )
        });
        assert_eq!(
            dns.and_then(|e| e.comment.as_deref()),
            Some("Kubernetes service cluster ip + port for masquerade purpose")
        );
        let loopback = set(&sets, "KUBE-LOOP-BACK");
        assert!(members(loopback).contains(&Member::IpPortIp(
            ip("10.244.1.5"),
            tcp(8080),
            ip("10.244.1.5")
        )));
        let node_ports = set(&sets, "KUBE-NODE-PORT-TCP");
        assert_eq!(node_ports.kind, SetType::BitmapPort);
        assert_eq!(node_ports.options.range, Some(PortRange::ANY));
        assert_eq!(members(node_ports), [Member::Port(30080)]);
        let source_cidr = set(&sets, "KUBE-LOAD-BALANCER-SOURCE-CIDR");
        assert_eq!(
            members(source_cidr),
            [Member::IpPortNet(
                ip("203.0.113.10"),
                tcp(80),
                net("198.51.100.0/24")
            )]
        );
        assert!(set(&sets, "KUBE-EXTERNAL-IP").entries.is_empty());
    }

    #[test]
    fn calico_sets_have_networks_and_addresses() {
        let sets = fixture("calico");
        let pools = set(&sets, "cali40all-ipam-pools");
        assert_eq!(
            (pools.kind.clone(), pools.options.maxelem),
            (SetType::HashNet, Some(1048576))
        );
        assert_eq!(members(pools), [Member::Net(net("10.244.0.0/16"))]);
        // A host address in a hash:net set is a /32 network.
        assert!(
            members(set(&sets, "cali40all-hosts-net"))
                .contains(&Member::Net(net("192.168.56.10/32")))
        );
        assert!(members(set(&sets, "cali40this-host")).contains(&Member::Ip(ip("127.0.0.1"))));
        assert_eq!(sets.sets.len(), 5);
    }

    #[test]
    fn ports_of_every_protocol_are_typed() {
        let sets = fixture("extensions");
        let ports = members(set(&sets, "ext-ip-port"));
        for member in [
            Member::IpPort(ip("10.96.0.11"), SetPort::Icmp { kind: 8, code: 0 }),
            Member::IpPort(ip("10.96.0.12"), SetPort::Icmp { kind: 3, code: 13 }),
            Member::IpPort(
                ip("10.96.0.13"),
                SetPort::Port {
                    protocol: Protocol::Other(47),
                    port: 0,
                },
            ),
            Member::IpPort(
                ip("10.96.0.14"),
                SetPort::Port {
                    protocol: Protocol::Sctp,
                    port: 99,
                },
            ),
        ] {
            assert!(ports.contains(&member), "{member:?} in {ports:?}");
        }
        let v6 = set(&sets, "ext-net-port");
        assert_eq!(v6.family, Some(Family::Ipv6));
        // Hash sets print their members in hash order.
        assert!(members(v6).contains(&Member::NetPort(
            net("fd00::/64"),
            SetPort::Port {
                protocol: Protocol::Udp,
                port: 53
            }
        )));
        assert_eq!(
            SetPort::parse("icmpv6:echo-request"),
            Ok(SetPort::Icmpv6 { kind: 128, code: 0 })
        );
        assert_eq!(
            SetPort::parse("icmpv6:1/3"),
            Ok(SetPort::Icmpv6 { kind: 1, code: 3 })
        );
        assert_eq!(SetPort::parse("8080"), Ok(tcp(8080)));
        assert!(SetPort::parse("icmp:any").is_err());
    }

    #[test]
    fn entry_options_are_read() {
        let sets = fixture("extensions");
        let timed = set(&sets, "ext-net");
        assert_eq!(
            (timed.options.timeout, timed.options.counters),
            (Some(300), true)
        );
        let hole = timed
            .entries
            .iter()
            .find(|e| e.member == Member::Net(net("10.1.0.0/16")))
            .unwrap();
        assert!(hole.nomatch && hole.timeout.is_some());
        let counted = timed
            .entries
            .iter()
            .find(|e| e.member == Member::Net(net("10.0.0.0/8")))
            .unwrap();
        assert_eq!(
            (counted.packets, counted.bytes, counted.nomatch),
            (Some(5), Some(300), false)
        );
        let skb = &set(&sets, "ext-ip6").entries[0];
        assert_eq!(skb.member, Member::Ip(ip("fd00::1")));
        assert_eq!(
            skb.skbmark,
            Some(MarkMask {
                value: 0x10,
                mask: 0xff
            })
        );
        assert_eq!((skb.skbprio, skb.skbqueue), (Some((1, 2)), Some(3)));
        assert_eq!(set(&sets, "ext-netmask").options.netmask, Some(24));
    }

    #[test]
    fn list_set_holds_set_names() {
        let sets = fixture("extensions");
        let list = set(&sets, "ext-list");
        assert_eq!(
            (list.kind.clone(), list.options.size),
            (SetType::ListSet, Some(8))
        );
        assert_eq!(
            members(list),
            [
                Member::Set("ext-ip-port".into()),
                Member::Set("ext-net".into())
            ]
        );
    }

    #[test]
    fn unsupported_set_type_keeps_members_as_written() {
        let sets = fixture("extensions");
        let iface = set(&sets, "ext-iface");
        assert_eq!(iface.kind, SetType::Unsupported("hash:net,iface".into()));
        assert_eq!(
            members(iface),
            [Member::Unsupported("10.0.0.0/8,eth0".into())]
        );
    }

    #[test]
    fn unreadable_member_is_an_issue_and_kept_unsupported() {
        let text =
            "create s hash:ip,port family inet\nadd s 10.0.0.1,tcp:99999\nadd s 10.0.0.2,tcp:80\n";
        let (sets, issues) = parse(text);
        assert_eq!(issues, [ParseIssue::at(2, 7, "`99999` is too large")]);
        let sets = sets.unwrap();
        assert_eq!(
            members(set(&sets, "s")),
            [
                Member::Unsupported("10.0.0.1,tcp:99999".into()),
                Member::IpPort(ip("10.0.0.2"), tcp(80))
            ]
        );
        let (_, issues) = parse("create s hash:ip\nadd s 10.0.0.1,tcp:80\n");
        assert_eq!(
            issues,
            [ParseIssue::at(
                2,
                7,
                "`10.0.0.1,tcp:80` is not a member of a hash:ip set"
            )]
        );
    }

    #[test]
    fn member_of_an_unknown_set_is_an_issue() {
        let (sets, issues) = parse("add nowhere 10.0.0.1\ncreate s hash:ip\nadd s 10.0.0.1\n");
        assert_eq!(
            issues,
            [ParseIssue::at(
                1,
                5,
                "set `nowhere` was never created; the member is skipped"
            )]
        );
        assert_eq!(sets.unwrap().sets[0].entries.len(), 1);
    }

    #[test]
    fn option_problems_are_issues_at_their_word() {
        let text = "create s hash:net family inet7 bogus maxelem 5\nadd s 10.0.0.0/8 timeout x sparkle\ncreate s hash:ip\n";
        let (sets, issues) = parse(text);
        assert_eq!(
            issues,
            [
                ParseIssue::at(1, 26, "`inet7` is not a family (inet or inet6)"),
                ParseIssue::at(1, 32, "unknown option `bogus`"),
                ParseIssue::at(2, 26, "`x` is not a number"),
                ParseIssue::at(2, 28, "unknown option `sparkle`"),
                ParseIssue::at(3, 8, "set `s` is created twice (first at line 1)"),
            ]
        );
        let sets = sets.unwrap();
        assert_eq!(set(&sets, "s").options.maxelem, Some(5));
        assert_eq!(set(&sets, "s").entries.len(), 1);
    }

    #[test]
    fn empty_save_has_no_sets_and_garbage_is_not_a_save() {
        assert_eq!(parse(""), (Some(IpSets::default()), vec![]));
        let (sets, issues) = parse("ipset v7.17: Kernel error received: Operation not permitted\n");
        assert_eq!(sets, None);
        assert_eq!(issues.len(), 1);
        let (_, issues) = parse("create s hash:ip\nadd s 10.0.0.1 comment \"never closed\n");
        assert_eq!(
            issues,
            [ParseIssue::at(2, 24, "quoted string is never closed")]
        );
    }

    proptest::proptest! {
        #[test]
        fn any_text_reads_without_panic_and_issues_point_into_it(text in netfilter_text()) {
            let (_, issues) = parse(&text);
            assert_issues_within(&text, &issues);
        }
    }
}
