//! `skoop`'s nftables model against the kernel's own (issue 16).
//!
//! Two cases, each trying every generated flow for real (TCP with `nc`, UDP
//! with a socket of the test's own and an echo on the backends, ICMP with
//! `ping`), reading the translation the kernel made from `conntrack -L` in
//! the namespace that holds the rules, and comparing both with what the
//! model of that namespace's collected dump (`Netfilter::from_dump`, the
//! `nft -j list ruleset` beside iptables-save) predicts:
//!
//! - a hand-built router (a client with two source addresses, one of them
//!   "outside the cluster", and two backends) loaded with `nft -f` of a
//!   ruleset in kube-proxy's nftables layout (`table ip kube-proxy`: the
//!   cluster-ips set, the service-ips / service-nodeports /
//!   no-endpoint-services maps, per-service chains with `numgen random mod
//!   N map` DNAT and `numgen ... vmap` endpoint chains, external chains that
//!   mark for masquerade, an ETP Local and an ITP Local service, a
//!   LoadBalancer with source ranges, the masquerading chain, reject-chain)
//!   and what kube-proxy does not use but the model claims: an `inet`
//!   table with a forward chain of policy drop, anonymous and named interval
//!   sets, `ct state established,related`, `reject with tcp reset` and with
//!   an ICMP code, `goto` + `return`, a mark set by a chain at priority -5
//!   and tested by one at priority 0, two tables' chains at the same
//!   priority (the newer table's first) and two chains of one table at the
//!   same priority;
//! - the real kube-proxy in nftables mode on the real-components lab
//!   (flanneld VXLAN), node-1's host namespace: flows from a pod, from the
//!   node itself and from the host outside the cluster, to the lab's
//!   ClusterIP, NodePort, LoadBalancer, traffic-policy, affinity and
//!   endpoint-less Services.
//!
//! Where `numgen` picks one of several endpoints, the flow is tried a few
//! times and the kernel's pick must be among the model's outcomes.
//! `SKOOP_LAB_VERBOSE=1` prints every attempt: what the kernel did, its
//! conntrack reply tuple, and the model's outcomes.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use skoop::net::Family;
use skoop::netstack::netfilter::{
    Context, Netfilter, Outcome, Packet, PacketPath, RouteChoice, Step, Verdict,
};
use skoop::netstack::routing::Fib;
use skoop::snapshot::netns::NetnsDump;
use skoop::snapshot::netns::iptables::Protocol;

use crate::cluster::{OUTSIDE_IP, POD_PORT};
use crate::lab::{Availability, Lab, Netns, availability};
use crate::netfilter::{Seen, connect, seen_when_stopped};
use crate::real::{IpFamilies, ProxyMode, RealCluster, RealCni};
use crate::snapshot::collect_local;

/// The router's firewall, loaded first (as a node's firewall is at boot):
/// an `inet` table whose forward chain drops what it does not accept.
const LAB_FILTER: &str = r#"
table inet lab-filter {
	comment "a node firewall of the kind kube-proxy does not write"
	set pingable {
		type ipv4_addr
		flags interval
		elements = { 10.80.1.0/25, 10.80.1.200-10.80.1.250 }
	}

	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		tcp dport 9000 drop
		tcp dport { 9001, 9002 } reject with tcp reset
		tcp dport 9003 reject with icmp type host-prohibited
		tcp dport 9004 accept comment "the chains at priority 5 decide"
		meta mark & 0x00000100 == 0x00000100 accept comment "marked at priority -5"
		ip daddr { 10.80.2.0/24, 10.80.3.1-10.80.3.9 } accept
		icmp type echo-request ip daddr @pingable accept
	}

	chain mark-early {
		type filter hook forward priority filter - 5; policy accept;
		ip daddr 10.80.1.2 tcp dport 8080 meta mark set meta mark | 0x00000100
		ip daddr 10.80.1.2 udp dport 5353 meta mark set meta mark | 0x00000100
	}

	chain probe-first {
		type filter hook forward priority filter + 5; policy accept;
		tcp dport 9004 reject with tcp reset
	}

	chain probe-second {
		type filter hook forward priority filter + 5; policy accept;
		tcp dport 9004 drop
	}
}
"#;

/// kube-proxy's table, in its nftables layout (as
/// `tests/fixtures/nft/kube-proxy-node-1.nft`, with the endpoint chains of
/// its earlier versions for one service), loaded after the firewall. The
/// "cluster" is 10.70.0.0/24: the client's 10.71.0.2 is outside it.
const KUBE_PROXY: &str = r#"
table ip kube-proxy {
	comment "rules for kube-proxy"
	set cluster-ips {
		type ipv4_addr
		comment "Active ClusterIPs"
		elements = { 10.96.0.10, 10.96.0.11, 10.96.0.12, 10.96.0.13,
			     10.96.0.14, 10.96.0.15, 10.96.0.16 }
	}

	set hairpin-connections {
		type ipv4_addr . ipv4_addr . inet_proto . inet_service
		comment "service hairpin connections"
		elements = { 10.80.1.2 . 10.80.1.2 . tcp . 8080, 10.80.2.2 . 10.80.2.2 . tcp . 8080 }
	}

	map no-endpoint-services {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "vmap to drop or reject packets to services with no endpoints"
		elements = { 10.96.0.12 . tcp . 80 comment "default/e-empty:http" : goto reject-chain,
			     10.96.0.12 . udp . 53 comment "default/e-empty:dns" : goto reject-chain,
			     10.96.0.14 . tcp . 80 comment "default/h-local-elsewhere:http" : drop }
	}

	map no-endpoint-nodeports {
		type inet_proto . inet_service : verdict
		comment "vmap to drop or reject packets to service nodeports with no endpoints"
		elements = { tcp . 30090 : goto reject-chain,
			     udp . 30090 : goto reject-chain,
			     tcp . 30091 : drop }
	}

	map firewall-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "destinations that are subject to LoadBalancerSourceRanges"
		elements = { 203.0.113.11 . tcp . 80 : goto firewall-LBSRC001-default/a-ranges/tcp/http }
	}

	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
		elements = { 10.96.0.10 . tcp . 80 : goto service-AAAATCP1-default/a/tcp/http,
			     10.96.0.10 . udp . 53 : goto service-AAAAUDP1-default/a/udp/dns,
			     10.96.0.11 . tcp . 80 : goto service-BBBBTCP1-default/b/tcp/http,
			     10.96.0.11 . tcp . 81 : goto service-CCCCTCP1-default/c/tcp/http,
			     10.96.0.13 . tcp . 80 : goto service-DDDDTCP1-default/d/tcp/http,
			     10.96.0.15 . tcp . 80 : goto local-GGGGTCP1-default/g-itp-local/tcp/http,
			     10.96.0.16 . tcp . 80 : goto service-FFFFTCP1-default/f-etp-local/tcp/http,
			     203.0.113.10 . tcp . 80 : goto external-AAAATCP1-default/a/tcp/http,
			     203.0.113.11 . tcp . 80 : goto external-AAAATCP1-default/a/tcp/http }
	}

	map service-nodeports {
		type inet_proto . inet_service : verdict
		comment "NodePort traffic"
		elements = { tcp . 30080 : goto external-AAAATCP1-default/a/tcp/http,
			     udp . 30053 : goto external-AAAAUDP1-default/a/udp/dns,
			     tcp . 30081 : goto external-FFFFTCP1-default/f-etp-local/tcp/http }
	}

	chain filter-prerouting-pre-dnat {
		type filter hook prerouting priority dstnat - 10; policy accept;
		ct state new jump firewall-check
	}

	chain filter-output-pre-dnat {
		type filter hook output priority -110; policy accept;
		ct state new jump firewall-check
	}

	chain filter-input {
		type filter hook input priority filter; policy accept;
		ct state new jump nodeport-endpoints-check
		ct state new jump service-endpoints-check
	}

	chain filter-forward {
		type filter hook forward priority filter; policy accept;
		ct state new jump service-endpoints-check
		ct state new jump cluster-ips-check
	}

	chain filter-output {
		type filter hook output priority filter; policy accept;
		ct state new jump service-endpoints-check
		ct state new jump cluster-ips-check
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}

	chain nat-output {
		type nat hook output priority -100; policy accept;
		jump services
	}

	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		jump masquerading
	}

	chain nodeport-endpoints-check {
		fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports
	}

	chain service-endpoints-check {
		ip daddr . meta l4proto . th dport vmap @no-endpoint-services
	}

	chain firewall-check {
		ip daddr . meta l4proto . th dport vmap @firewall-ips
	}

	chain services {
		ip daddr @cluster-ips ip saddr != 10.70.0.0/24 meta mark set meta mark | 0x00004000 comment "masquerade clusterIP traffic from outside cluster"
		ip daddr . meta l4proto . th dport vmap @service-ips
		ip daddr 10.96.0.13 tcp dport 80 dnat ip to 10.80.1.2:8080 comment "reached only if a return from service-D came back here"
		fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports
	}

	chain masquerading {
		meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
		ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random
	}

	chain cluster-ips-check {
		ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
		ip daddr 10.96.0.0/12 drop comment "Drop traffic to unallocated ClusterIPs"
	}

	chain reject-chain {
		comment "helper for @no-endpoint-services / @no-endpoint-nodeports"
		reject
	}

	chain mark-for-masquerade {
		meta mark set meta mark | 0x00004000
	}

	chain firewall-LBSRC001-default/a-ranges/tcp/http {
		ip saddr != { 10.70.0.0/24 } drop
	}

	chain service-AAAATCP1-default/a/tcp/http {
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.80.1.2 . 8080, 1 : 10.80.2.2 . 8080 }
	}

	chain external-AAAATCP1-default/a/tcp/http {
		meta mark set meta mark | 0x00004000 comment "masquerade"
		goto service-AAAATCP1-default/a/tcp/http
	}

	chain service-AAAAUDP1-default/a/udp/dns {
		meta l4proto udp dnat ip to numgen random mod 2 map { 0 : 10.80.1.2 . 5353, 1 : 10.80.2.2 . 5353 }
	}

	chain external-AAAAUDP1-default/a/udp/dns {
		meta mark set meta mark | 0x00004000 comment "masquerade"
		goto service-AAAAUDP1-default/a/udp/dns
	}

	chain endpoint-BBBBEP01-default/b/tcp/http__10.80.1.2/8080 {
		ip saddr 10.80.1.2 jump mark-for-masquerade
		meta l4proto tcp dnat to 10.80.1.2:8080
	}

	chain endpoint-BBBBEP02-default/b/tcp/http__10.80.2.2/8080 {
		ip saddr 10.80.2.2 jump mark-for-masquerade
		meta l4proto tcp dnat to 10.80.2.2:8080
	}

	chain service-BBBBTCP1-default/b/tcp/http {
		numgen random mod 2 vmap { 0 : goto endpoint-BBBBEP01-default/b/tcp/http__10.80.1.2/8080, 1 : goto endpoint-BBBBEP02-default/b/tcp/http__10.80.2.2/8080 }
	}

	chain service-CCCCTCP1-default/c/tcp/http {
		meta l4proto tcp dnat to 10.80.2.2:9000
	}

	chain service-DDDDTCP1-default/d/tcp/http {
		ip saddr 10.70.0.0/24 return
		meta l4proto tcp dnat to 10.80.2.2:8080
	}

	chain service-FFFFTCP1-default/f-etp-local/tcp/http {
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.80.1.2 . 8080, 1 : 10.80.2.2 . 8080 }
	}

	chain local-FFFFTCP1-default/f-etp-local/tcp/http {
		meta l4proto tcp dnat ip to numgen random mod 1 map { 0 : 10.80.1.2 . 8080 }
	}

	chain external-FFFFTCP1-default/f-etp-local/tcp/http {
		ip saddr 10.70.0.0/24 goto service-FFFFTCP1-default/f-etp-local/tcp/http comment "short-circuit pod traffic"
		fib saddr type local meta mark set meta mark | 0x00004000 comment "masquerade local traffic"
		fib saddr type local goto service-FFFFTCP1-default/f-etp-local/tcp/http comment "short-circuit local traffic"
		goto local-FFFFTCP1-default/f-etp-local/tcp/http
	}

	chain local-GGGGTCP1-default/g-itp-local/tcp/http {
		meta l4proto tcp dnat ip to numgen random mod 1 map { 0 : 10.80.2.2 . 8080 }
	}
}
"#;

/// The backends' listeners: (address, TCP ports, UDP echo ports).
const BACKENDS: &[(Ipv4Addr, &[u16], &[u16])] = &[
    (Ipv4Addr::new(10, 80, 1, 2), &[8080], &[5353]),
    (
        Ipv4Addr::new(10, 80, 2, 2),
        &[8080, 9000, 9001, 9003, 9004],
        &[5353],
    ),
];

/// Kernel attempts run at once on the hand-built router (most wait on a
/// timeout). The real lab's pods listen with `nc -lk`, one connection at a
/// time: its flows are tried one after the other.
const PARALLEL: usize = 12;
/// How often a flow the model forks (`numgen`) is tried.
const FORKED_ATTEMPTS: usize = 4;

/// One flow: who sends it, and how the namespace whose rules are modelled
/// meets it.
#[derive(Debug, Clone)]
struct Flow {
    /// Where the client runs.
    from: Netns,
    proto: Protocol,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dport: Option<u16>,
    path: PacketPath,
    in_iface: Option<&'static str>,
}

impl Flow {
    fn new(from: &Source, proto: Protocol, dst: Ipv4Addr, dport: Option<u16>) -> Flow {
        Flow {
            from: from.ns.clone(),
            proto,
            src: from.ip,
            dst,
            dport,
            path: from.path,
            in_iface: from.in_iface,
        }
    }

    fn packet(&self, sport: Option<u16>) -> Packet {
        let mut packet = Packet::new(self.src.into(), self.dst.into(), self.proto);
        if self.proto != Protocol::Icmp {
            packet.ip.sport = sport;
            packet.ip.dport = self.dport;
        }
        packet.in_iface = self.in_iface.map(str::to_string);
        packet
    }

    fn text(&self, sport: Option<u16>) -> String {
        let proto = match self.proto {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            _ => "icmp",
        };
        match (sport, self.dport) {
            (Some(sport), Some(dport)) => {
                format!("{proto} {}:{sport} -> {}:{dport}", self.src, self.dst)
            }
            _ => format!("{proto} {} -> {}", self.src, self.dst),
        }
    }
}

/// A sender of flows.
struct Source {
    ns: Netns,
    ip: Ipv4Addr,
    path: PacketPath,
    in_iface: Option<&'static str>,
}

/// Who answers beyond (and in) the modelled namespace, to tell what the
/// client sees of an outcome.
#[derive(Default)]
struct Ground {
    /// Listening sockets elsewhere: (address, protocol, port).
    listeners: Vec<(IpAddr, Protocol, u16)>,
    /// Hosts elsewhere that exist (answer pings, reset closed ports).
    hosts: Vec<IpAddr>,
    /// The namespace's own listening sockets (an unspecified address: all).
    local_listeners: Vec<(IpAddr, Protocol, u16)>,
}

impl Ground {
    /// What the client should see for one outcome of the model; `None`
    /// when the model does not know.
    fn expected(&self, outcome: &Outcome<'_>, proto: Protocol) -> Option<Seen> {
        Some(match &outcome.verdict {
            Verdict::Accept => {
                let dst = outcome.packet.ip.dst;
                let local = delivered_locally(outcome);
                if proto == Protocol::Icmp {
                    return Some(if local || self.hosts.contains(&dst) {
                        Seen::Connected
                    } else {
                        Seen::Timeout
                    });
                }
                let listening = |list: &[(IpAddr, Protocol, u16)]| {
                    list.iter().any(|(addr, p, port)| {
                        (*addr == dst || addr.is_unspecified())
                            && *p == proto
                            && outcome.packet.ip.dport == Some(*port)
                    })
                };
                if local {
                    if listening(&self.local_listeners) {
                        Seen::Connected
                    } else {
                        Seen::Refused
                    }
                } else if listening(&self.listeners) {
                    Seen::Connected
                } else if self.hosts.contains(&dst) {
                    // A closed port answers RST or port unreachable.
                    Seen::Refused
                } else {
                    // Sent to a gateway that is not the destination and
                    // does not forward.
                    Seen::Timeout
                }
            }
            stopped => return seen_when_stopped(stopped),
        })
    }
}

/// Whether the outcome's last routing decision delivers it to the namespace.
fn delivered_locally(outcome: &Outcome<'_>) -> bool {
    outcome
        .trace
        .iter()
        .rev()
        .find_map(|step| match step {
            Step::Route { choice, .. } => Some(match choice {
                RouteChoice::Local { .. } => true,
                RouteChoice::Out { dev, .. } => dev.as_deref() == Some("lo"),
                _ => false,
            }),
            _ => None,
        })
        .unwrap_or(false)
}

/// The reply tuple of a conntrack entry, and the entry as listed.
#[derive(Debug, Clone)]
struct Entry {
    line: String,
    reply_src: IpAddr,
    reply_sport: u16,
    reply_dst: IpAddr,
}

/// The conntrack entry of `flow` from `sport` in `ns`.
fn conntrack_entry(ns: &Netns, flow: &Flow, sport: u16) -> Option<Entry> {
    let proto = if flow.proto == Protocol::Tcp {
        "tcp"
    } else {
        "udp"
    };
    let out = ns.exec(&[
        "conntrack",
        "-L",
        "-p",
        proto,
        "--orig-src",
        &flow.src.to_string(),
        "--orig-port-src",
        &sport.to_string(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains(&format!("sport={sport} ")))?;
    let field = |key: &str, nth: usize| {
        line.split_whitespace()
            .filter_map(|w| w.strip_prefix(key))
            .nth(nth)
            .map(str::to_string)
    };
    Some(Entry {
        line: line.to_string(),
        reply_src: field("src=", 1)?.parse().ok()?,
        reply_sport: field("sport=", 1)?.parse().ok()?,
        reply_dst: field("dst=", 1)?.parse().ok()?,
    })
}

/// Runs `make` on a thread that has entered network namespace `ns` (a
/// socket made there stays in it).
fn in_netns<T: Send + 'static>(ns: &Netns, make: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{}", ns.name);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
        // SAFETY: setns only changes this thread's network namespace; the
        // thread ends once `make` has run.
        let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(
            entered,
            0,
            "setns into {path}: {}",
            std::io::Error::last_os_error()
        );
        make()
    })
    .join()
    .expect("the thread in the namespace")
}

/// The backends' servers, in the lab's namespaces, stopped when dropped:
/// TCP listeners that accept every connection (`nc -lk` takes one at a
/// time and its backlog overflows under parallel attempts) and UDP echoes.
#[derive(Default)]
struct Servers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Servers {
    fn tcp(&mut self, ns: &Netns, port: u16) {
        let listener = in_netns(ns, move || TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)))
            .unwrap_or_else(|e| panic!("listen on TCP port {port} in {}: {e}", ns.name));
        listener.set_nonblocking(true).expect("non-blocking");
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    // Accepted and closed at once: the client only connects.
                    Ok(_) => {}
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }));
    }

    fn udp_echo(&mut self, ns: &Netns, port: u16) {
        let socket = in_netns(ns, move || UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)))
            .unwrap_or_else(|e| panic!("UDP echo on port {port} in {}: {e}", ns.name));
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a read timeout");
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, peer)) = socket.recv_from(&mut buf) {
                    let _ = socket.send_to(&buf[..n], peer);
                }
            }
        }));
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Tries `flow` from `sport` for real.
fn kernel(flow: &Flow, sport: Option<u16>) -> Seen {
    let (src, dst) = (flow.src.to_string(), flow.dst.to_string());
    match flow.proto {
        Protocol::Tcp => connect(
            &flow.from,
            flow.src,
            sport.expect("a source port"),
            flow.dst,
            flow.dport.expect("a port"),
        ),
        Protocol::Udp => udp(flow, sport.expect("a source port")),
        _ => {
            let out = flow
                .from
                .exec(&["ping", "-n", "-c", "1", "-W", "1", "-I", &src, &dst]);
            let stdout = String::from_utf8_lossy(&out.stdout).to_lowercase();
            if out.status.success() {
                Seen::Connected
            } else if stdout.contains("port unreachable") {
                Seen::Refused
            } else if stdout.contains("unreachable") || stdout.contains("prohibited") {
                Seen::Unreachable
            } else {
                Seen::Timeout
            }
        }
    }
}

/// Sends one datagram from `sport` and waits a second for the echo or the
/// ICMP error (`IP_RECVERR`: every error, not only the "hard" ones).
fn udp(flow: &Flow, sport: u16) -> Seen {
    let src = SocketAddrV4::new(flow.src, sport);
    let socket = in_netns(&flow.from, move || UdpSocket::bind(src))
        .unwrap_or_else(|e| panic!("bind {src} in {}: {e}", flow.from.name));
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and option of the size given.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_RECVERR,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "IP_RECVERR: {}", std::io::Error::last_os_error());
    let dst = SocketAddrV4::new(flow.dst, flow.dport.expect("a port"));
    socket.connect(dst).expect("connect a UDP socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("a read timeout");
    let classify = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => Seen::Refused,
        Some(libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EACCES | libc::EPERM) => {
            Seen::Unreachable
        }
        _ => Seen::Timeout,
    };
    match socket.send(b"skoop") {
        Ok(_) => {}
        // Netfilter stopped a locally generated datagram (`ip_local_out`
        // says EPERM for a drop and a reject alike): what comes back, if
        // anything, is the reject's ICMP error.
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
        Err(e) => return classify(e),
    }
    let mut buf = [0u8; 64];
    match socket.recv(&mut buf) {
        Ok(_) => Seen::Connected,
        Err(e) => classify(e),
    }
}

/// One step of a trace, in words.
fn step_text(step: &Step<'_>) -> String {
    #[allow(unreachable_patterns)]
    match step {
        Step::Rule {
            hook,
            table,
            chain,
            rule,
            matched,
            ..
        } => format!(
            "{hook} iptables {} {chain}: {} => {matched:?}",
            table.as_str(),
            rule.text
        ),
        Step::Policy {
            hook,
            table,
            chain,
            policy,
            ..
        } => format!(
            "{hook} iptables {} {chain}: policy {policy:?}",
            table.as_str()
        ),
        Step::NftRule {
            hook,
            table,
            chain,
            rule,
            matched,
            assumption,
        } => format!(
            "{hook} {table} {chain}: {} => {matched:?}{}",
            rule.text(),
            assumption.map(|a| format!(" ({a})")).unwrap_or_default()
        ),
        Step::NftPolicy {
            hook,
            table,
            chain,
            policy,
        } => format!("{hook} {table} {chain}: policy {policy:?}"),
        Step::Translation {
            hook,
            table,
            translation,
        } => format!("{hook} {table}: {translation}"),
        Step::Route {
            destination,
            choice,
        } => format!("route {destination}: {choice:?}"),
        other => format!("{other:?}"),
    }
}

/// The model's outcomes with their traces, for a failure message.
fn describe(outcomes: &[Outcome<'_>]) -> String {
    let mut text = String::new();
    for o in outcomes {
        let port = |p: Option<u16>| p.map_or(String::new(), |p| format!(":{p}"));
        let _ = write!(
            text,
            "\n    {:?} (share {:.3}): {}{} -> {}{} mark {:#x}",
            o.verdict,
            o.probability,
            o.packet.ip.src,
            port(o.packet.ip.sport),
            o.packet.ip.dst,
            port(o.packet.ip.dport),
            o.packet.ip.mark
        );
        for step in &o.trace {
            let _ = write!(text, "\n      {}", step_text(step));
        }
    }
    text
}

/// What comparing a case's flows gave.
#[derive(Default)]
struct Comparison {
    /// Kernel attempts compared with the model.
    compared: usize,
    failures: Vec<String>,
    seen: BTreeSet<Seen>,
    /// Connections the kernel translated: (destination asked, reply source,
    /// whether the source was rewritten).
    translated: BTreeSet<(Ipv4Addr, IpAddr, bool)>,
}

/// Asks the model about every flow, tries each for real (those the model
/// forks a few times, from other source ports), reads the kernel's
/// translation from `conntrack` in `ns`, and compares.
fn compare(
    flows: &[Flow],
    netfilter: &Netfilter<'_>,
    context: &Context<'_>,
    ground: &Ground,
    ns: &Netns,
    first_sport: u16,
    parallel: usize,
) -> Comparison {
    let mut sport = first_sport;
    // (flow, source port, the model's outcomes)
    let mut attempts = Vec::new();
    for (index, flow) in flows.iter().enumerate() {
        let ports = flow.proto != Protocol::Icmp;
        let probe = netfilter.traverse(flow.path, flow.packet(Some(sport)), context);
        let tries = if probe.len() > 1 && ports {
            FORKED_ATTEMPTS
        } else {
            1
        };
        for _ in 0..tries {
            let this = ports.then_some(sport);
            sport += 1;
            let outcomes = netfilter.traverse(flow.path, flow.packet(this), context);
            attempts.push((index, this, outcomes));
        }
    }
    let mut results: Vec<(Seen, Option<Entry>)> = Vec::with_capacity(attempts.len());
    for chunk in attempts.chunks(parallel) {
        let jobs: Vec<(&Flow, Option<u16>)> = chunk
            .iter()
            .map(|(index, sport, _)| (&flows[*index], *sport))
            .collect();
        let done: Vec<(Seen, Option<Entry>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|&(flow, sport)| {
                    scope.spawn(move || {
                        let seen = kernel(flow, sport);
                        let entry = sport.and_then(|sport| conntrack_entry(ns, flow, sport));
                        (seen, entry)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a flow's thread"))
                .collect()
        });
        results.extend(done);
    }

    let verbose = std::env::var_os("SKOOP_LAB_VERBOSE").is_some();
    let mut comparison = Comparison::default();
    for ((index, sport, outcomes), (seen, entry)) in attempts.iter().zip(results) {
        let flow = &flows[*index];
        comparison.compared += 1;
        comparison.seen.insert(seen);
        let name = flow.text(*sport);
        let ct = entry
            .as_ref()
            .map_or("no conntrack entry".to_string(), |e| {
                format!("conntrack: {}", e.line)
            });
        if verbose {
            let model: Vec<String> = outcomes
                .iter()
                .map(|o| match o.verdict {
                    Verdict::Accept => format!(
                        "accept {}->{}:{}",
                        o.packet.ip.src,
                        o.packet.ip.dst,
                        o.packet.ip.dport.unwrap_or(0)
                    ),
                    ref other => other.as_str().to_string(),
                })
                .collect();
            let reply = entry.as_ref().map_or(String::new(), |e| {
                format!(
                    " reply {}:{} -> {}",
                    e.reply_src, e.reply_sport, e.reply_dst
                )
            });
            eprintln!("{name}: kernel {seen:?}{reply}; model {model:?}");
        }
        let predicted: Option<BTreeSet<Seen>> = outcomes
            .iter()
            .map(|o| ground.expected(o, flow.proto))
            .collect();
        let Some(predicted) = predicted else {
            comparison.failures.push(format!(
                "{name}: the model does not know; kernel {seen:?}, {ct}; model:{}",
                describe(outcomes)
            ));
            continue;
        };
        if !predicted.contains(&seen) {
            comparison.failures.push(format!(
                "{name}: kernel {seen:?} ({ct}), model {predicted:?}:{}",
                describe(outcomes)
            ));
            continue;
        }
        if flow.proto == Protocol::Icmp {
            continue;
        }
        match &entry {
            Some(e) => {
                // The kernel's translation must be one of the model's
                // accepted outcomes.
                let agrees = outcomes.iter().any(|o| {
                    o.verdict == Verdict::Accept
                        && o.packet.ip.dst == e.reply_src
                        && o.packet.ip.dport == Some(e.reply_sport)
                        && o.packet.ip.src == e.reply_dst
                });
                if agrees {
                    comparison.translated.insert((
                        flow.dst,
                        e.reply_src,
                        e.reply_dst != IpAddr::from(flow.src),
                    ));
                } else {
                    comparison.failures.push(format!(
                        "{name}: kernel {seen:?}, {ct}; no accepted outcome of the model has that translation:{}",
                        describe(outcomes)
                    ));
                }
            }
            // No entry: the kernel did not let the connection through (a
            // connection reset at once, at a closed port, leaves none either).
            None if seen != Seen::Refused
                && outcomes.iter().all(|o| o.verdict == Verdict::Accept) =>
            {
                comparison.failures.push(format!(
                    "{name}: kernel {seen:?} with no conntrack entry (not accepted), model accepts:{}",
                    describe(outcomes)
                ));
            }
            None => {}
        }
    }
    comparison
}

/// Feeds `rules` to `nft -f -` in `ns`.
fn load_nft(ns: &Netns, rules: &str) {
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nft");
    child
        .stdin
        .take()
        .expect("nft's stdin")
        .write_all(rules.as_bytes())
        .expect("write the ruleset");
    let output = child.wait_with_output().expect("wait for nft");
    assert!(
        output.status.success(),
        "nft -f in {} failed: {}",
        ns.name,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The client (10.70.0.2 inside "the cluster", 10.71.0.2 outside it), the
/// router holding the rules (default route via backend 2, which does not
/// forward) and the backends with their listeners.
fn build(lab: &mut Lab, servers: &mut Servers) -> (Netns, Netns) {
    let (client, router, backends) = crate::netfilter::client_router_backends(lab);
    // ICMP errors are rate limited per peer: a burst of flows would see
    // timeouts instead.
    for backend in &backends {
        backend.run(&["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"]);
    }
    router.ip("route add default via 10.80.2.2 dev eth2");
    router.run(&["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"]);
    load_nft(&router, LAB_FILTER);
    load_nft(&router, KUBE_PROXY);
    for ((_, tcp, udp), backend) in BACKENDS.iter().zip(&backends) {
        for port in *tcp {
            servers.tcp(backend, *port);
        }
        for port in *udp {
            servers.udp_echo(backend, *port);
        }
    }
    (client, router)
}

/// Loads the dump `collect local` wrote for `ns` into `dir`.
fn dump_of(ns: &Netns, dir: &std::path::Path) -> NetnsDump {
    collect_local(&ns.name, dir);
    let (dump, problems) = NetnsDump::load(dir);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(dump.nftables.is_some(), "nft-ruleset.json collected");
    dump
}

fn report(case: &str, comparison: &Comparison, flows: usize, started: Instant) {
    eprintln!(
        "{case}: {} flows, {} kernel attempts compared, {} disagree, {:.0?}; kernel answers {:?}",
        flows,
        comparison.compared,
        comparison.failures.len(),
        started.elapsed(),
        comparison.seen
    );
}

#[test]
fn hand_built_nftables_rules_agree_with_the_kernel_on_every_flow() {
    if let Availability::Skip = availability() {
        return;
    }
    let started = Instant::now();
    let mut lab = Lab::new();
    let mut servers = Servers::default();
    let (client, router) = build(&mut lab, &mut servers);
    let dir = tempfile::tempdir().expect("temp dir");
    let dump = dump_of(&router, dir.path());
    let fib = Fib::from_dump(&dump, Family::Ipv4).expect("rules, routes and addresses collected");
    let context = Context {
        fib: Some(&fib),
        interfaces: dump.addrs.as_deref().unwrap_or_default(),
        local_addresses: &[],
        listeners: None,
    };
    let netfilter = Netfilter::from_dump(&dump).expect("rules collected");

    let sources = [Ipv4Addr::new(10, 70, 0, 2), Ipv4Addr::new(10, 71, 0, 2)].map(|ip| Source {
        ns: client.clone(),
        ip,
        path: PacketPath::Received,
        in_iface: Some("eth0"),
    });
    let destinations = [
        [10, 96, 0, 10],
        [10, 96, 0, 11],
        [10, 96, 0, 12],
        [10, 96, 0, 13],
        [10, 96, 0, 14],
        [10, 96, 0, 15],
        [10, 96, 0, 16],
        [10, 96, 0, 99],
        [203, 0, 113, 10],
        [203, 0, 113, 11],
        [203, 0, 113, 12],
        [10, 70, 0, 1],
        [10, 80, 1, 1],
        [10, 80, 1, 2],
        [10, 80, 2, 2],
    ]
    .map(Ipv4Addr::from);
    let tcp_ports = [
        80, 81, 8080, 9000, 9001, 9002, 9003, 9004, 30080, 30081, 30090, 30091,
    ];
    let udp_ports = [53, 5353, 30053, 30090];
    let mut flows = Vec::new();
    for source in &sources {
        for dst in destinations {
            for port in tcp_ports {
                flows.push(Flow::new(source, Protocol::Tcp, dst, Some(port)));
            }
            for port in udp_ports {
                flows.push(Flow::new(source, Protocol::Udp, dst, Some(port)));
            }
            flows.push(Flow::new(source, Protocol::Icmp, dst, None));
        }
    }
    let mut ground = Ground::default();
    for (addr, tcp, udp) in BACKENDS {
        ground.hosts.push((*addr).into());
        for port in *tcp {
            ground
                .listeners
                .push(((*addr).into(), Protocol::Tcp, *port));
        }
        for port in *udp {
            ground
                .listeners
                .push(((*addr).into(), Protocol::Udp, *port));
        }
    }
    let comparison = compare(
        &flows, &netfilter, &context, &ground, &router, 20000, PARALLEL,
    );
    report(
        "hand-built nftables router",
        &comparison,
        flows.len(),
        started,
    );
    assert!(
        comparison.failures.is_empty(),
        "{} of {} kernel attempts disagree with the model:\n{}",
        comparison.failures.len(),
        comparison.compared,
        comparison.failures.join("\n")
    );
    assert_eq!(
        comparison.seen,
        BTreeSet::from([
            Seen::Connected,
            Seen::Refused,
            Seen::Unreachable,
            Seen::Timeout
        ])
    );
    // DNAT with and without masquerade both happened, to both backends.
    for (backend, _, _) in BACKENDS {
        for masqueraded in [false, true] {
            assert!(
                comparison
                    .translated
                    .iter()
                    .any(|(asked, reply, masq)| *asked != *backend
                        && *reply == IpAddr::from(*backend)
                        && *masq == masqueraded),
                "no translated flow to {backend} (masqueraded: {masqueraded}): {:?}",
                comparison.translated
            );
        }
    }
}

/// The namespace's listening sockets, from `ss`.
fn local_listeners(ns: &Netns) -> Vec<(IpAddr, Protocol, u16)> {
    let mut listeners = Vec::new();
    for (flag, proto) in [("-Htln", Protocol::Tcp), ("-Huln", Protocol::Udp)] {
        for line in ns.run(&["ss", "-4", flag]).lines() {
            let Some(local) = line.split_whitespace().nth(3) else {
                continue;
            };
            let Some((addr, port)) = local.rsplit_once(':') else {
                continue;
            };
            let addr = addr.split('%').next().unwrap_or(addr);
            let addr: IpAddr = match addr {
                "*" | "0.0.0.0" => Ipv4Addr::UNSPECIFIED.into(),
                other => match other.parse() {
                    Ok(addr) => addr,
                    Err(_) => continue,
                },
            };
            if let Ok(port) = port.parse() {
                listeners.push((addr, proto, port));
            }
        }
    }
    listeners
}

#[test]
fn real_kube_proxy_nftables_rules_agree_with_the_kernel_on_every_flow() {
    if let Availability::Skip = availability() {
        return;
    }
    let started = Instant::now();
    let mut lab = Lab::new();
    let real = RealCluster::build_with(
        &mut lab,
        RealCni::FlannelVxlan,
        ProxyMode::Nftables,
        IpFamilies::Ipv4,
        2,
        2,
    );
    let cluster = &real.cluster;
    let node = &cluster.nodes[0];
    let other = &cluster.nodes[1];
    // Every Service programmed: the LoadBalancer IP, the ETP Local
    // service's local chain, the affinity service's endpoint chains, the
    // endpoint-less service's reject.
    node.ns.wait_for(
        &["nft", "list", "table", "ip", "kube-proxy"],
        Duration::from_secs(60),
        |out| {
            out.contains("203.0.113.10 . tcp . 80")
                && out.contains("chain local-")
                && out.contains("chain endpoint-")
                && out.contains("web-nobody:http\" : goto reject-chain")
                && out.contains("web-node-2-local:http\" : drop")
        },
    );
    // The host outside reaches the Services' addresses through node-1, as
    // a router announcing them (or a load balancer) would send it.
    cluster
        .outside
        .ip("route add 10.96.0.0/12 via 198.51.100.1");
    cluster
        .outside
        .ip("route add 203.0.113.10/32 via 198.51.100.1");
    cluster
        .underlay
        .ip(&format!("route add 10.96.0.0/12 via {}", node.ip));
    cluster
        .underlay
        .ip(&format!("route add 203.0.113.10/32 via {}", node.ip));
    // Many rejects in a row to one peer: not rate limited.
    node.ns
        .run(&["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"]);
    // What kube-proxy and flanneld programmed stays as it is while the
    // dump is collected and the kernel asked.
    real.freeze();
    let dir = tempfile::tempdir().expect("temp dir");
    let dump = dump_of(&node.ns, dir.path());
    let fib = Fib::from_dump(&dump, Family::Ipv4).expect("rules, routes and addresses collected");
    let context = Context {
        fib: Some(&fib),
        interfaces: dump.addrs.as_deref().unwrap_or_default(),
        local_addresses: &[],
        listeners: None,
    };
    let netfilter = Netfilter::from_dump(&dump).expect("rules collected");

    let pod = &node.pods[0];
    let from_pod = Source {
        ns: pod.ns.clone(),
        ip: pod.ip(),
        path: PacketPath::Received,
        in_iface: Some("cni0"),
    };
    let from_node = Source {
        ns: node.ns.clone(),
        ip: node.ip,
        path: PacketPath::Output,
        in_iface: None,
    };
    let from_outside = Source {
        ns: cluster.outside.clone(),
        ip: OUTSIDE_IP,
        path: PacketPath::Received,
        in_iface: Some("eth0"),
    };
    let service = |last: u8| Ipv4Addr::new(10, 96, 0, last);
    let mut services = vec![
        (service(100), 80),
        (service(101), 80),
        (service(102), 80),
        (service(103), 80),
        (service(104), 80),
        (service(105), 80),
        (service(106), 80),
        (service(1), 443),
        (service(100), 81),
        (service(50), 80),
        (Ipv4Addr::new(203, 0, 113, 10), 80),
        (node.ip, 30080),
        (node.ip, 30081),
        (node.ip, 30082),
        (node.ip, 30099),
    ];
    for peer in &other.pods {
        services.push((peer.ip(), POD_PORT));
    }
    let mut flows = Vec::new();
    for source in [&from_pod, &from_node, &from_outside] {
        for (dst, port) in &services {
            // Pod addresses are not routed outside the cluster.
            if source.ip == OUTSIDE_IP && dst.octets()[..2] == [10, 244] {
                continue;
            }
            flows.push(Flow::new(source, Protocol::Tcp, *dst, Some(*port)));
        }
        let mut pings = vec![service(100), service(50), node.ip, other.pods[0].ip()];
        for (dst, port) in [(service(100), 80), (service(106), 80), (node.ip, 30080)] {
            flows.push(Flow::new(source, Protocol::Udp, dst, Some(port)));
        }
        if source.ip != OUTSIDE_IP {
            // A pod and the node reach the host outside (masqueraded).
            flows.push(Flow::new(source, Protocol::Tcp, OUTSIDE_IP, Some(POD_PORT)));
            pings.push(OUTSIDE_IP);
        } else {
            pings.retain(|ip| ip.octets()[..2] != [10, 244]);
        }
        if source.ip == node.ip {
            // The node reaches its own pods (a pod's would be bridged).
            flows.push(Flow::new(
                source,
                Protocol::Tcp,
                node.pods[1].ip(),
                Some(POD_PORT),
            ));
            pings.push(node.pods[1].ip());
        }
        for dst in pings {
            flows.push(Flow::new(source, Protocol::Icmp, dst, None));
        }
    }
    let mut ground = Ground {
        local_listeners: local_listeners(&node.ns),
        ..Ground::default()
    };
    for p in cluster.pods() {
        ground.hosts.push(p.ip().into());
        ground
            .listeners
            .push((p.ip().into(), Protocol::Tcp, POD_PORT));
    }
    ground.hosts.push(OUTSIDE_IP.into());
    ground
        .listeners
        .push((OUTSIDE_IP.into(), Protocol::Tcp, POD_PORT));
    let comparison = compare(&flows, &netfilter, &context, &ground, &node.ns, 25000, 1);
    report(
        "real kube-proxy (nftables mode) on node-1",
        &comparison,
        flows.len(),
        started,
    );
    assert!(
        comparison.failures.is_empty(),
        "{} of {} kernel attempts disagree with the model:\n{}",
        comparison.failures.len(),
        comparison.compared,
        comparison.failures.join("\n")
    );
    assert!(comparison.seen.contains(&Seen::Connected));
    assert!(comparison.seen.contains(&Seen::Refused));
    assert!(comparison.seen.contains(&Seen::Timeout));
    // The ETP Local NodePort kept the outside client's address; the
    // Cluster one masqueraded it to reach node-2's pods.
    let translated = |asked: Ipv4Addr, to: &[Ipv4Addr], masqueraded: bool| {
        comparison.translated.iter().any(|(a, reply, masq)| {
            *a == asked && to.iter().any(|t| IpAddr::from(*t) == *reply) && *masq == masqueraded
        })
    };
    let local_pods: Vec<Ipv4Addr> = node.pods.iter().map(|p| p.ip()).collect();
    let remote_pods: Vec<Ipv4Addr> = other.pods.iter().map(|p| p.ip()).collect();
    assert!(
        translated(node.ip, &local_pods, false),
        "{:?}",
        comparison.translated
    );
    assert!(
        translated(node.ip, &remote_pods, true),
        "{:?}",
        comparison.translated
    );
}
