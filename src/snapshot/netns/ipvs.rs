//! `ipvsadm -Sn` output read into virtual services and their real servers:
//! `-A -t|-u|--sctp-service ADDR:PORT -s SCHEDULER [-p TIMEOUT] ...` declares a
//! virtual service (or `-A -f MARK [-6]` a firewall-mark one), and
//! `-a <service> -r ADDR:PORT -m|-g|-i -w WEIGHT` adds a real server to a
//! service declared before it. IPv6 addresses are in brackets.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::iptables::{BadValue, Word, column, number, prefix_len, split_words};
use crate::snapshot::problem::{ParseIssue, Parsed};

/// Every virtual service `ipvsadm -Sn` printed, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpvsConfig {
    pub services: Vec<VirtualService>,
    by_address: HashMap<ServiceAddress, usize>,
}

impl IpvsConfig {
    pub fn service(&self, address: &ServiceAddress) -> Option<&VirtualService> {
        self.by_address
            .get(address)
            .and_then(|&i| self.services.get(i))
    }
}

/// What packets a virtual service takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceAddress {
    Tcp(SocketAddr),
    Udp(SocketAddr),
    Sctp(SocketAddr),
    /// Packets carrying this firewall mark (of IPv6 packets with `ipv6`).
    FirewallMark {
        mark: u32,
        ipv6: bool,
    },
}

/// One `-A` line and the real servers added to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualService {
    pub line: usize,
    pub address: ServiceAddress,
    pub scheduler: Scheduler,
    /// `-p`: a client sticks to its real server for a while.
    pub persistence: Option<Persistence>,
    /// `-b`: scheduler flags (`sh-port`, `sh-fallback`, `flag-1`, ...).
    pub scheduler_flags: Vec<String>,
    /// `--pe`: persistence engine.
    pub persistence_engine: Option<String>,
    /// `-o`: one-packet scheduling (UDP).
    pub one_packet: bool,
    /// In file order.
    pub real_servers: Vec<RealServer>,
}

/// How a virtual service picks a real server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheduler {
    RoundRobin,
    WeightedRoundRobin,
    LeastConnection,
    WeightedLeastConnection,
    LocalityBasedLeastConnection,
    LocalityBasedLeastConnectionWithReplication,
    DestinationHashing,
    SourceHashing,
    ShortestExpectedDelay,
    NeverQueue,
    WeightedFailover,
    WeightedOverflow,
    MaglevHashing,
    /// A scheduler this parser does not know, by name.
    Other(String),
}

impl Scheduler {
    fn parse(name: &str) -> Scheduler {
        match name {
            "rr" => Scheduler::RoundRobin,
            "wrr" => Scheduler::WeightedRoundRobin,
            "lc" => Scheduler::LeastConnection,
            "wlc" => Scheduler::WeightedLeastConnection,
            "lblc" => Scheduler::LocalityBasedLeastConnection,
            "lblcr" => Scheduler::LocalityBasedLeastConnectionWithReplication,
            "dh" => Scheduler::DestinationHashing,
            "sh" => Scheduler::SourceHashing,
            "sed" => Scheduler::ShortestExpectedDelay,
            "nq" => Scheduler::NeverQueue,
            "fo" => Scheduler::WeightedFailover,
            "ovf" => Scheduler::WeightedOverflow,
            "mh" => Scheduler::MaglevHashing,
            other => Scheduler::Other(other.to_owned()),
        }
    }
}

/// `-p TIMEOUT [-M NETMASK]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Persistence {
    /// Seconds.
    pub timeout: u32,
    /// Clients in the same network of this prefix length share a real
    /// server; `None` means each address on its own.
    pub netmask: Option<u8>,
}

/// One `-a` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealServer {
    pub line: usize,
    pub address: SocketAddr,
    pub forwarding: Forwarding,
    /// 0 takes no new connections.
    pub weight: u32,
    /// `-x`: connections above which the server takes no more.
    pub upper_threshold: Option<u32>,
    /// `-y`: connections below which it takes them again.
    pub lower_threshold: Option<u32>,
}

/// How packets reach a real server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarding {
    /// `-m`: NAT (what kube-proxy uses).
    Masquerade,
    /// `-g`: direct routing, the destination address unchanged.
    DirectRouting,
    /// `-i`: encapsulated.
    Tunnel(Tunnel),
}

/// `-i [--tun-type T] [--tun-port P] [--tun-nocsum|--tun-csum|--tun-remcsum]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tunnel {
    pub kind: TunnelType,
    pub port: Option<u16>,
    pub checksum: Option<TunnelChecksum>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TunnelType {
    #[default]
    Ipip,
    Gue,
    Gre,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelChecksum {
    None,
    Checksum,
    RemoteChecksum,
}

/// Reads `ipvsadm -Sn` output. `None` only when the text has content but
/// not one virtual service could be read from it.
pub fn parse(text: &str) -> Parsed<IpvsConfig> {
    let mut config = IpvsConfig::default();
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
            "-A" | "--add-service" => {
                let options = LineOptions::read(&words, &mut issue);
                add_service(&mut config, number, options, command.start, &mut issue);
            }
            "-a" | "--add-server" => {
                let options = LineOptions::read(&words, &mut issue);
                add_server(&mut config, number, options, command.start, &mut issue);
            }
            other => issue(
                command.start,
                format!("expected `-A` or `-a`, found `{other}`"),
            ),
        }
    }
    if config.services.is_empty() && !issues.is_empty() {
        return (None, issues);
    }
    (Some(config), issues)
}

/// The options of one line.
#[derive(Default)]
struct LineOptions {
    /// The service and where its option is.
    service: Option<(ServiceAddress, usize)>,
    ipv6: bool,
    scheduler: Option<Scheduler>,
    persistence: Option<u32>,
    netmask: Option<u8>,
    scheduler_flags: Vec<String>,
    persistence_engine: Option<String>,
    one_packet: bool,
    real_server: Option<SocketAddr>,
    forwarding: Option<Forwarding>,
    weight: Option<u32>,
    upper_threshold: Option<u32>,
    lower_threshold: Option<u32>,
    /// Tunnel options, and where the first of them is.
    tunnel: Option<(Tunnel, usize)>,
}

fn socket_addr(text: &str) -> Result<SocketAddr, BadValue> {
    text.parse()
        .map_err(|_| BadValue(format!("`{text}` is not ADDRESS:PORT")))
}

impl LineOptions {
    /// Reads the options after the command word, reporting each one it
    /// cannot read.
    fn read(words: &[Word<'_>], issue: &mut impl FnMut(usize, String)) -> LineOptions {
        let mut options = LineOptions::default();
        let mut i = 1;
        while let Some(word) = words.get(i) {
            i += 1;
            let option = &*word.text;
            if options.flag(option, word.start) {
                continue;
            }
            // The timeout of `-p` is optional; ipvsadm's default is 300 seconds.
            if matches!(option, "-p" | "--persistent") {
                let timeout = words.get(i).and_then(|w| number::<u32>(&w.text).ok());
                options.persistence = Some(timeout.unwrap_or(300));
                i += usize::from(timeout.is_some());
                continue;
            }
            let value = words.get(i);
            match options.valued(option, value.map(|v| &*v.text), word.start) {
                Ok(true) => i += 1,
                Ok(false) => issue(word.start, format!("unknown option `{option}`")),
                Err(BadValue(message)) => {
                    issue(value.map_or(word.end, |v| v.start), message);
                    i += usize::from(value.is_some());
                }
            }
        }
        options
    }

    /// Reads an option without value; false if `option` is none.
    fn flag(&mut self, option: &str, at: usize) -> bool {
        match option {
            "-g" | "--gatewaying" => self.forwarding = Some(Forwarding::DirectRouting),
            "-m" | "--masquerading" => self.forwarding = Some(Forwarding::Masquerade),
            "-i" | "--ipip" => self.forwarding = Some(Forwarding::Tunnel(Tunnel::default())),
            "-6" | "--ipv6" => self.ipv6 = true,
            "-o" | "--ops" | "ops" => self.one_packet = true,
            "--tun-nocsum" => self.tunnel(at).checksum = Some(TunnelChecksum::None),
            "--tun-csum" => self.tunnel(at).checksum = Some(TunnelChecksum::Checksum),
            "--tun-remcsum" => self.tunnel(at).checksum = Some(TunnelChecksum::RemoteChecksum),
            _ => return false,
        }
        true
    }

    fn tunnel(&mut self, at: usize) -> &mut Tunnel {
        &mut self.tunnel.get_or_insert((Tunnel::default(), at)).0
    }

    /// Reads an option with a value; `Ok(false)` if `option` is none.
    fn valued(&mut self, option: &str, value: Option<&str>, at: usize) -> Result<bool, BadValue> {
        let value = || value.ok_or_else(|| BadValue(format!("`{option}` needs a value")));
        match option {
            "-t" | "--tcp-service" => {
                self.service = Some((ServiceAddress::Tcp(socket_addr(value()?)?), at))
            }
            "-u" | "--udp-service" => {
                self.service = Some((ServiceAddress::Udp(socket_addr(value()?)?), at))
            }
            "--sctp-service" => {
                self.service = Some((ServiceAddress::Sctp(socket_addr(value()?)?), at))
            }
            "-f" | "--fwmark-service" => {
                let mark = number(value()?)?;
                self.service = Some((ServiceAddress::FirewallMark { mark, ipv6: false }, at));
            }
            "-s" | "--scheduler" => self.scheduler = Some(Scheduler::parse(value()?)),
            "-M" | "--netmask" => self.netmask = Some(prefix_len(value()?)?),
            "-b" | "--sched-flags" => {
                self.scheduler_flags = value()?.split(',').map(str::to_owned).collect()
            }
            "--pe" => self.persistence_engine = Some(value()?.to_owned()),
            "-r" | "--real-server" => self.real_server = Some(socket_addr(value()?)?),
            "-w" | "--weight" => self.weight = Some(number(value()?)?),
            "-x" | "--u-threshold" => self.upper_threshold = Some(number(value()?)?),
            "-y" | "--l-threshold" => self.lower_threshold = Some(number(value()?)?),
            "--tun-port" => self.tunnel(at).port = Some(number(value()?)?),
            "--tun-type" => {
                self.tunnel(at).kind = match value()? {
                    "ipip" => TunnelType::Ipip,
                    "gue" => TunnelType::Gue,
                    "gre" => TunnelType::Gre,
                    other => {
                        return Err(BadValue(format!(
                            "`{other}` is not a tunnel type (ipip, gue or gre)"
                        )));
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The service, with `-6` applied to a firewall mark.
    fn service(&self) -> Option<ServiceAddress> {
        self.service.map(|(address, _)| match address {
            ServiceAddress::FirewallMark { mark, .. } => ServiceAddress::FirewallMark {
                mark,
                ipv6: self.ipv6,
            },
            address => address,
        })
    }
}

fn add_service(
    config: &mut IpvsConfig,
    number: usize,
    options: LineOptions,
    command: usize,
    issue: &mut impl FnMut(usize, String),
) {
    let Some(address) = options.service() else {
        issue(
            command,
            "`-A` needs a service: -t, -u, --sctp-service or -f".to_owned(),
        );
        return;
    };
    if let Some(earlier) = config.service(&address) {
        let at = options.service.map_or(command, |(_, at)| at);
        issue(
            at,
            format!(
                "virtual service is declared twice (first at line {})",
                earlier.line
            ),
        );
        return;
    }
    config.by_address.insert(address, config.services.len());
    config.services.push(VirtualService {
        line: number,
        address,
        // ipvsadm's default scheduler.
        scheduler: options
            .scheduler
            .unwrap_or(Scheduler::WeightedLeastConnection),
        persistence: options.persistence.map(|timeout| Persistence {
            timeout,
            netmask: options.netmask,
        }),
        scheduler_flags: options.scheduler_flags,
        persistence_engine: options.persistence_engine,
        one_packet: options.one_packet,
        real_servers: Vec::new(),
    });
}

fn add_server(
    config: &mut IpvsConfig,
    number: usize,
    options: LineOptions,
    command: usize,
    issue: &mut impl FnMut(usize, String),
) {
    let Some(address) = options.service() else {
        issue(
            command,
            "`-a` needs the service it adds to: -t, -u, --sctp-service or -f".to_owned(),
        );
        return;
    };
    let Some(service) = config
        .by_address
        .get(&address)
        .and_then(|&i| config.services.get_mut(i))
    else {
        let at = options.service.map_or(command, |(_, at)| at);
        issue(
            at,
            "no such virtual service was declared before this line; the real server is skipped"
                .to_owned(),
        );
        return;
    };
    let Some(server) = options.real_server else {
        issue(
            command,
            "`-a` needs a real server: -r ADDRESS:PORT".to_owned(),
        );
        return;
    };
    // ipvsadm's default forwarding method is direct routing.
    let mut forwarding = options.forwarding.unwrap_or(Forwarding::DirectRouting);
    match (&mut forwarding, options.tunnel) {
        (Forwarding::Tunnel(tunnel), Some((options, _))) => *tunnel = options,
        (_, Some((_, at))) => issue(at, "tunnel options need `-i`".to_owned()),
        (_, None) => {}
    }
    service.real_servers.push(RealServer {
        line: number,
        address: server,
        forwarding,
        weight: options.weight.unwrap_or(1),
        upper_threshold: options.upper_threshold,
        lower_threshold: options.lower_threshold,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::netns::iptables::tests::{assert_issues_within, netfilter_text};

    /// The fixture is written by hand in `ipvsadm -Sn` format: this kernel
    /// has no IPVS (see tests/fixtures/netfilter/generate.sh).
    fn fixture() -> IpvsConfig {
        let path = format!(
            "{}/tests/fixtures/netfilter/kube-proxy-ipvs/ipvsadm.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let (config, issues) = parse(&text);
        assert_eq!(issues, []);
        config.expect("a config")
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    fn service(config: &IpvsConfig, address: ServiceAddress) -> &VirtualService {
        config
            .service(&address)
            .unwrap_or_else(|| panic!("no service {address:?}"))
    }

    #[test]
    fn kube_proxy_services_have_their_real_servers() {
        let config = fixture();
        assert_eq!(config.services.len(), 8);
        let api = service(&config, ServiceAddress::Tcp(addr("10.96.0.1:443")));
        assert_eq!(
            (api.line, api.scheduler.clone(), api.persistence),
            (1, Scheduler::RoundRobin, None)
        );
        assert_eq!(
            api.real_servers,
            [RealServer {
                line: 2,
                address: addr("192.168.56.10:6443"),
                forwarding: Forwarding::Masquerade,
                weight: 1,
                upper_threshold: None,
                lower_threshold: None,
            }]
        );
        let web = service(&config, ServiceAddress::Tcp(addr("10.96.100.10:80")));
        let backends: Vec<SocketAddr> = web.real_servers.iter().map(|r| r.address).collect();
        assert_eq!(backends, [addr("10.244.1.5:8080"), addr("10.244.2.6:8080")]);
        let node_port = service(&config, ServiceAddress::Tcp(addr("192.168.56.10:30080")));
        assert_eq!(node_port.real_servers[1].weight, 0);
    }

    #[test]
    fn persistence_and_scheduler_flags_are_read() {
        let config = fixture();
        let dns = service(&config, ServiceAddress::Udp(addr("10.96.0.10:53")));
        assert_eq!(
            dns.persistence,
            Some(Persistence {
                timeout: 10800,
                netmask: None
            })
        );
        let lb = service(&config, ServiceAddress::Tcp(addr("203.0.113.10:80")));
        assert_eq!(
            (lb.scheduler.clone(), lb.scheduler_flags.clone()),
            (Scheduler::SourceHashing, vec!["sh-port".to_owned()])
        );
        let v6 = service(&config, ServiceAddress::Tcp(addr("[fd00:10:96::1]:443")));
        assert_eq!(v6.scheduler, Scheduler::WeightedRoundRobin);
        assert_eq!(
            v6.persistence,
            Some(Persistence {
                timeout: 300,
                netmask: Some(64)
            })
        );
        assert_eq!(v6.real_servers[0].address, addr("[fd00:10:244:1::5]:6443"));
        let sctp = service(&config, ServiceAddress::Sctp(addr("10.96.7.7:3868")));
        assert_eq!(
            (sctp.scheduler.clone(), sctp.real_servers[0].weight),
            (Scheduler::LeastConnection, 2)
        );
    }

    #[test]
    fn firewall_mark_service_forwards_by_routing_and_tunnel() {
        let config = fixture();
        let marked = service(
            &config,
            ServiceAddress::FirewallMark {
                mark: 100,
                ipv6: false,
            },
        );
        assert_eq!(marked.scheduler, Scheduler::WeightedLeastConnection);
        let forwarding: Vec<Forwarding> =
            marked.real_servers.iter().map(|r| r.forwarding).collect();
        assert_eq!(
            forwarding,
            [
                Forwarding::DirectRouting,
                Forwarding::Tunnel(Tunnel {
                    kind: TunnelType::Gue,
                    port: Some(6080),
                    checksum: Some(TunnelChecksum::None),
                }),
            ]
        );
    }

    #[test]
    fn ipv6_firewall_mark_and_other_options_are_read() {
        let text = "-A -f 7 -6 -s mh -p --pe sip -o\n-a -f 7 -6 -r [fd00::9]:0 -x 100 -y 10\n-A -u 10.0.0.1:53 -s foo -M 255.255.255.0 -p 60\n";
        let (config, issues) = parse(text);
        assert_eq!(issues, []);
        let config = config.unwrap();
        let marked = service(
            &config,
            ServiceAddress::FirewallMark {
                mark: 7,
                ipv6: true,
            },
        );
        assert_eq!(marked.scheduler, Scheduler::MaglevHashing);
        assert_eq!(
            marked.persistence,
            Some(Persistence {
                timeout: 300,
                netmask: None
            })
        );
        assert_eq!(
            (marked.persistence_engine.as_deref(), marked.one_packet),
            (Some("sip"), true)
        );
        let server = marked.real_servers[0];
        // ipvsadm's defaults: direct routing, weight 1.
        assert_eq!(
            (server.forwarding, server.weight),
            (Forwarding::DirectRouting, 1)
        );
        assert_eq!(
            (server.upper_threshold, server.lower_threshold),
            (Some(100), Some(10))
        );
        let other = service(&config, ServiceAddress::Udp(addr("10.0.0.1:53")));
        assert_eq!(other.scheduler, Scheduler::Other("foo".into()));
        assert_eq!(
            other.persistence,
            Some(Persistence {
                timeout: 60,
                netmask: Some(24)
            })
        );
    }

    #[test]
    fn real_server_of_an_undeclared_service_is_an_issue() {
        let text = "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n-A -t 10.0.0.1:80 -s rr\n";
        let (config, issues) = parse(text);
        assert_eq!(
            issues,
            [ParseIssue::at(
                1,
                4,
                "no such virtual service was declared before this line; the real server is skipped"
            )]
        );
        assert!(config.unwrap().services[0].real_servers.is_empty());
    }

    #[test]
    fn line_problems_are_issues_at_their_word() {
        let text = "-A -t 10.0.0.1 -s rr\n-A -t 10.0.0.2:80 --bogus -s rr\n-A -s rr\n-a -t 10.0.0.2:80 -m\n-a -t 10.0.0.2:80 -r 10.1.0.1:80 -m --tun-port 1\n-A -t 10.0.0.2:80\n-D -t 10.0.0.2:80\n-a -t 10.0.0.2:80 -r 10.1.0.1:80 -w\n";
        let (config, issues) = parse(text);
        assert_eq!(
            issues,
            [
                ParseIssue::at(1, 7, "`10.0.0.1` is not ADDRESS:PORT"),
                ParseIssue::at(1, 1, "`-A` needs a service: -t, -u, --sctp-service or -f"),
                ParseIssue::at(2, 19, "unknown option `--bogus`"),
                ParseIssue::at(3, 1, "`-A` needs a service: -t, -u, --sctp-service or -f"),
                ParseIssue::at(4, 1, "`-a` needs a real server: -r ADDRESS:PORT"),
                ParseIssue::at(5, 37, "tunnel options need `-i`"),
                ParseIssue::at(6, 4, "virtual service is declared twice (first at line 2)"),
                ParseIssue::at(7, 1, "expected `-A` or `-a`, found `-D`"),
                ParseIssue::at(8, 36, "`-w` needs a value"),
            ]
        );
        let config = config.unwrap();
        assert_eq!(config.services.len(), 1);
        assert_eq!(config.services[0].real_servers.len(), 2);
    }

    #[test]
    fn empty_dump_has_no_services_and_garbage_is_not_a_dump() {
        assert_eq!(parse(""), (Some(IpvsConfig::default()), vec![]));
        let (config, issues) = parse("Can't initialize ipvs: Protocol not available\n");
        assert_eq!(config, None);
        assert_eq!(issues.len(), 1);
    }

    proptest::proptest! {
        #[test]
        fn any_text_reads_without_panic_and_issues_point_into_it(text in netfilter_text()) {
            let (_, issues) = parse(&text);
            assert_issues_within(&text, &issues);
        }
    }
}
