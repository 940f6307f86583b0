//! nftables at kube-proxy scale (issue 16): a generated `nft list ruleset`
//! text in kube-proxy's nftables layout for 1,000 and 10,000 services, checked
//! by `nft -c -f` side by side with skoop reading the JSON nft itself prints
//! for it (loaded in a scratch network namespace), then packets evaluated
//! through it, with the memory the parsed and indexed ruleset takes counted
//! by the allocator.
//!
//! Targets: the 10,000-service ruleset parses at least 10x faster than
//! `nft -c -f` checks its text, and one packet evaluates in under 20 µs.
//!
//! Run with `cargo bench --bench nftables` as root (`-- N...` for other
//! sizes): `nft` and `unshare` are needed both for the comparison and for
//! the JSON skoop reads (nft's own output, never a stand-in); without them
//! each line says why it is missing.

#[path = "common/rulesets.rs"]
mod rulesets;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rulesets::{RUNS, best, mib};

use skoop::netstack::netfilter::{
    Context, Endpoint, Hook, Netfilter, Outcome, Packet, PacketPath, Verdict,
};
use skoop::snapshot::netns::iptables::{self, Protocol};
use skoop::snapshot::netns::nft;

/// Counts the bytes live on the heap, and the most there ever were, while
/// `MEASURING` is on. Off, it costs one relaxed load: the timed evaluations
/// are not slowed by atomic read-modify-writes on every allocation (the
/// skoop binary's own allocator counts in a thread-local cell), and
/// `realloc` stays the system's, in place where it can be.
struct Counting;

static MEASURING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
/// Allocations (and reallocations) made.
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    if MEASURING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        let bytes = bytes as isize;
        let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
        PEAK.fetch_max(live, Ordering::Relaxed);
    }
}

fn shrank(bytes: usize) {
    if MEASURING.load(Ordering::Relaxed) {
        LIVE.fetch_sub(bytes as isize, Ordering::Relaxed);
    }
}

// SAFETY: every call goes straight to the system allocator with the
// caller's arguments; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        new
    }
}

/// What [`counted`] saw: the bytes `f` left allocated, the most it had
/// allocated at once, and how many allocations it made.
struct Heap {
    kept: usize,
    peak: usize,
    allocations: usize,
}

/// Runs `f` with the heap counted (blocks allocated before and freed inside
/// would count negative: nothing measured here frees what it did not
/// allocate).
fn counted<T>(f: impl FnOnce() -> T) -> (T, Heap) {
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    ALLOCATIONS.store(0, Ordering::Relaxed);
    MEASURING.store(true, Ordering::SeqCst);
    let value = f();
    MEASURING.store(false, Ordering::SeqCst);
    let heap = Heap {
        kept: LIVE.load(Ordering::Relaxed).max(0) as usize,
        peak: PEAK.load(Ordering::Relaxed).max(0) as usize,
        allocations: ALLOCATIONS.load(Ordering::Relaxed),
    };
    (value, heap)
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SIZES: [usize; 2] = [1_000, 10_000];
/// Evaluations of one packet per timed run.
const ITERATIONS: usize = 20_000;
/// Issue 16's targets.
const PARSE_RATIO_TARGET: f64 = 10.0;
const EVALUATE_TARGET_US: f64 = 20.0;

/// The node the ruleset is on (kube-proxy's `nodeport-ips`).
const NODE: Ipv4Addr = Ipv4Addr::new(172, 18, 0, 11);
/// The cluster's pod network; this node's pods are in 10.244.0.0/24.
const POD_CIDR: &str = "10.244.0.0/16";

// ---------------------------------------------------------------------------
// The generated cluster and its ruleset.

/// One service port as kube-proxy sees it.
struct Service {
    namespace: String,
    name: String,
    /// `tcp` or `udp`.
    proto: &'static str,
    port: u16,
    port_name: &'static str,
    target_port: u16,
    cluster_ip: Ipv4Addr,
    endpoints: Vec<Ipv4Addr>,
    node_port: Option<u16>,
    load_balancer_ip: Option<Ipv4Addr>,
    /// `externalTrafficPolicy: Local`.
    external_local: bool,
    /// `sessionAffinity: ClientIP`.
    affinity: bool,
}

impl Service {
    /// `ns/name/proto/port`, what kube-proxy names its chains after.
    fn port_name(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.namespace, self.name, self.proto, self.port_name
        )
    }

    /// `HASH-ns/name/proto/port`.
    fn chain_base(&self) -> String {
        let name = self.port_name();
        format!("{}-{name}", hash(&name))
    }

    fn service_chain(&self) -> String {
        format!("service-{}", self.chain_base())
    }

    fn external_chain(&self) -> String {
        format!("external-{}", self.chain_base())
    }

    fn local_chain(&self) -> String {
        format!("local-{}", self.chain_base())
    }

    /// `HASH-ns/name/proto/port__IP/PORT` of an endpoint's chain and affinity set.
    fn endpoint_base(&self, endpoint: Ipv4Addr) -> String {
        let name = format!("{}__{endpoint}/{}", self.port_name(), self.target_port);
        format!("{}-{name}", hash(&name))
    }

    /// The endpoints on this node (10.244.0.0/24).
    fn local_endpoints(&self) -> Vec<Ipv4Addr> {
        self.endpoints
            .iter()
            .copied()
            .filter(|e| e.octets()[2] == 0)
            .collect()
    }

    /// Whether external traffic (NodePort, LB IP) has endpoints to go to.
    fn has_external_endpoints(&self) -> bool {
        !self.external_local || !self.local_endpoints().is_empty()
    }

    fn comment(&self) -> String {
        format!("{}/{}:{}", self.namespace, self.name, self.port_name)
    }
}

/// kube-proxy's chain-name hash: 8 base32 characters (FNV-1a here, sha256
/// there; only the shape matters).
fn hash(name: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    (0..8)
        .map(|i| char::from(ALPHABET[((h >> (i * 5)) & 31) as usize]))
        .collect()
}

/// A deterministic scramble of `i` (splitmix64).
fn mix(i: usize) -> u64 {
    let mut z = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `n` services: every one a ClusterIP with 1 to 4 endpoints (on other
/// nodes, but for some externalTrafficPolicy Local services), every tenth
/// UDP/53, every fourth a NodePort, every twentieth a LoadBalancer (half of
/// those externalTrafficPolicy Local), every fiftieth with ClientIP affinity.
fn services(n: usize) -> Vec<Service> {
    let mut remote = 0u32;
    let mut local = 0u32;
    (0..n)
        .map(|i| {
            let udp = i % 10 == 3;
            let node_port = (i % 4 == 1).then(|| u16::try_from(30000 + i / 4).expect("a port"));
            assert!(node_port.is_none_or(|p| p <= 32767), "too many NodePorts");
            let load_balancer = i % 20 == 1;
            let lb = u32::try_from(i / 20).expect("small");
            let external_local = i % 40 == 1;
            let count = 1 + (mix(i) % 4) as usize;
            let endpoints = (0..count)
                .map(|e| {
                    if e == 0 && i % 80 == 1 {
                        // A pod of this node.
                        local += 1;
                        assert!(local < 250, "too many local endpoints");
                        Ipv4Addr::new(10, 244, 0, 1 + local as u8)
                    } else {
                        // A pod of another node's 10.244.X.0/24.
                        let n = remote;
                        remote += 1;
                        let third = 1 + n / 254;
                        assert!(third < 256, "too many endpoints");
                        Ipv4Addr::new(10, 244, third as u8, (1 + n % 254) as u8)
                    }
                })
                .collect();
            Service {
                namespace: format!("ns-{}", i % 50),
                name: format!("svc-{i}"),
                proto: if udp { "udp" } else { "tcp" },
                port: if udp { 53 } else { 80 },
                port_name: if udp { "dns" } else { "http" },
                target_port: if udp { 53 } else { 8080 },
                cluster_ip: Ipv4Addr::from(0x0a60_0010 + u32::try_from(i).expect("small")),
                endpoints,
                node_port,
                load_balancer_ip: load_balancer.then(|| {
                    Ipv4Addr::new(
                        198,
                        18 + (lb / 62500) as u8,
                        (lb / 250) as u8,
                        (lb % 250 + 1) as u8,
                    )
                }),
                external_local,
                affinity: i % 50 == 7,
            }
        })
        .collect()
}

/// The tables on the node besides kube-proxy's: flannel's (through
/// iptables-nft) as the fixture has them.
const FLANNEL: &str = "table ip nat {
\tchain FLANNEL-POSTRTG {
\t\tmeta mark & 0x00004000 == 0x00004000 counter packets 0 bytes 0 return
\t\tip saddr 10.244.0.0/24 ip daddr 10.244.0.0/16 counter packets 0 bytes 0 return
\t\tip saddr 10.244.0.0/16 ip daddr 10.244.0.0/24 counter packets 0 bytes 0 return
\t\tip saddr != 10.244.0.0/16 ip daddr 10.244.0.0/24 counter packets 0 bytes 0 return
\t\tip saddr 10.244.0.0/16 ip daddr != 224.0.0.0/4 counter packets 0 bytes 0 masquerade fully-random
\t\tip saddr != 10.244.0.0/16 ip daddr 10.244.0.0/16 counter packets 0 bytes 0 masquerade fully-random
\t}

\tchain POSTROUTING {
\t\ttype nat hook postrouting priority srcnat; policy accept;
\t\tcounter packets 0 bytes 0 jump FLANNEL-POSTRTG
\t}
}
table ip filter {
\tchain FLANNEL-FWD {
\t\tip saddr 10.244.0.0/16 counter packets 0 bytes 0 accept
\t\tip daddr 10.244.0.0/16 counter packets 0 bytes 0 accept
\t}

\tchain FORWARD {
\t\ttype filter hook forward priority filter; policy accept;
\t\tcounter packets 0 bytes 0 jump FLANNEL-FWD
\t}
}
";

/// kube-proxy's base chains, the same in its `ip` and `ip6` tables.
macro_rules! kube_proxy_base_chains {
    () => {
        "\tchain filter-prerouting-pre-dnat {
\t\ttype filter hook prerouting priority dstnat - 10; policy accept;
\t\tct state new jump firewall-check
\t}

\tchain filter-output-pre-dnat {
\t\ttype filter hook output priority -110; policy accept;
\t\tct state new jump firewall-check
\t}

\tchain filter-input {
\t\ttype filter hook input priority filter; policy accept;
\t\tct state new jump nodeport-endpoints-check
\t\tct state new jump service-endpoints-check
\t}

\tchain filter-forward {
\t\ttype filter hook forward priority filter; policy accept;
\t\tct state new jump service-endpoints-check
\t\tct state new jump cluster-ips-check
\t}

\tchain filter-output {
\t\ttype filter hook output priority filter; policy accept;
\t\tct state new jump service-endpoints-check
\t\tct state new jump cluster-ips-check
\t}

\tchain nat-prerouting {
\t\ttype nat hook prerouting priority dstnat; policy accept;
\t\tjump services
\t}

\tchain nat-output {
\t\ttype nat hook output priority -100; policy accept;
\t\tjump services
\t}

\tchain nat-postrouting {
\t\ttype nat hook postrouting priority srcnat; policy accept;
\t\tjump masquerading
\t}

"
    };
}

/// kube-proxy's fixed chains of its `ip` table.
const KUBE_PROXY_CHAINS: &str = concat!(kube_proxy_base_chains!(), "\tchain nodeport-endpoints-check {
\t\tip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
\t}

\tchain service-endpoints-check {
\t\tip daddr . meta l4proto . th dport vmap @no-endpoint-services
\t}

\tchain firewall-check {
\t\tip daddr . meta l4proto . th dport vmap @firewall-ips
\t}

\tchain services {
\t\tip daddr @cluster-ips ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000 comment \"masquerade clusterIP traffic from outside cluster\"
\t\tip daddr . meta l4proto . th dport vmap @service-ips
\t\tip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
\t}

\tchain masquerading {
\t\tmeta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
\t\tct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random
\t}

\tchain cluster-ips-check {
\t\tip daddr @cluster-ips reject comment \"Reject traffic to invalid ports of ClusterIPs\"
\t\tip daddr 10.96.0.0/12 drop comment \"Drop traffic to unallocated ClusterIPs\"
\t}

\tchain reject-chain {
\t\tcomment \"helper for @no-endpoint-services / @no-endpoint-nodeports\"
\t\treject
\t}
");

/// kube-proxy's `ip6` table of a single-stack IPv4 cluster: empty sets and maps.
const KUBE_PROXY_IP6: &str = concat!("table ip6 kube-proxy {
\tcomment \"rules for kube-proxy\"
\tset hairpin-connections {
\t\ttype ipv6_addr . ipv6_addr . inet_proto . inet_service
\t\tcomment \"service hairpin connections\"
\t}

\tset cluster-ips {
\t\ttype ipv6_addr
\t\tcomment \"Active ClusterIPs\"
\t}

\tmap no-endpoint-services {
\t\ttype ipv6_addr . inet_proto . inet_service : verdict
\t\tcomment \"vmap to drop or reject packets to services with no endpoints\"
\t}

\tmap no-endpoint-nodeports {
\t\ttype inet_proto . inet_service : verdict
\t\tcomment \"vmap to drop or reject packets to service nodeports with no endpoints\"
\t}

\tmap firewall-ips {
\t\ttype ipv6_addr . inet_proto . inet_service : verdict
\t\tcomment \"destinations that are subject to LoadBalancerSourceRanges\"
\t}

\tmap service-ips {
\t\ttype ipv6_addr . inet_proto . inet_service : verdict
\t\tcomment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\"
\t}

\tmap service-nodeports {
\t\ttype inet_proto . inet_service : verdict
\t\tcomment \"NodePort traffic\"
\t}

", kube_proxy_base_chains!(), "\tchain nodeport-endpoints-check {
\t\tip6 daddr != ::1 meta l4proto . th dport vmap @no-endpoint-nodeports
\t}

\tchain service-endpoints-check {
\t\tip6 daddr . meta l4proto . th dport vmap @no-endpoint-services
\t}

\tchain firewall-check {
\t\tip6 daddr . meta l4proto . th dport vmap @firewall-ips
\t}

\tchain services {
\t\tip6 daddr . meta l4proto . th dport vmap @service-ips
\t\tfib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports
\t}

\tchain masquerading {
\t\tmeta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
\t\tct status dnat ip6 saddr . ip6 daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random
\t}

\tchain cluster-ips-check {
\t\tip6 daddr @cluster-ips reject comment \"Reject traffic to invalid ports of ClusterIPs\"
\t}

\tchain reject-chain {
\t\tcomment \"helper for @no-endpoint-services / @no-endpoint-nodeports\"
\t\treject
\t}
}
");

/// A named set or map of kube-proxy's `ip` table, with its elements.
fn set(text: &mut String, kind: &str, name: &str, type_: &str, comment: &str, elements: &[String]) {
    let _ = writeln!(
        text,
        "\t{kind} {name} {{\n\t\ttype {type_}\n\t\tcomment \"{comment}\""
    );
    if !elements.is_empty() {
        text.push_str("\t\telements = { ");
        for (i, element) in elements.iter().enumerate() {
            if i > 0 {
                text.push_str(",\n\t\t\t     ");
            }
            text.push_str(element);
        }
        text.push_str(" }\n");
    }
    text.push_str("\t}\n\n");
}

/// `numgen random mod K map { 0 : IP . PORT, ... }`.
fn dnat_map(text: &mut String, proto: &str, endpoints: &[Ipv4Addr], port: u16) {
    let _ = write!(
        text,
        "\t\tmeta l4proto {proto} dnat ip to numgen random mod {} map {{ ",
        endpoints.len()
    );
    for (i, endpoint) in endpoints.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        let _ = write!(text, "{i} : {endpoint} . {port}");
    }
    text.push_str(" }\n");
}

/// The ruleset of the node as `nft list ruleset` prints it, kube-proxy
/// v1.37's nftables layout (tests/fixtures/nft/kube-proxy-node-1.nft).
fn ruleset_text(services: &[Service]) -> String {
    let mut text = String::with_capacity(services.len() * 1024);
    text.push_str(FLANNEL);
    text.push_str("table ip kube-proxy {\n\tcomment \"rules for kube-proxy\"\n");

    let mut hairpin = Vec::new();
    let mut cluster_ips = Vec::new();
    let mut no_endpoint_services = Vec::new();
    let mut no_endpoint_nodeports = Vec::new();
    let mut service_ips = Vec::new();
    let mut service_nodeports = Vec::new();
    for s in services {
        for endpoint in s.local_endpoints() {
            hairpin.push(format!(
                "{endpoint} . {endpoint} . {} . {}",
                s.proto, s.target_port
            ));
        }
        cluster_ips.push(s.cluster_ip.to_string());
        service_ips.push(format!(
            "{} . {} . {} : goto {}",
            s.cluster_ip,
            s.proto,
            s.port,
            s.service_chain()
        ));
        if s.has_external_endpoints() {
            if let Some(ip) = s.load_balancer_ip {
                service_ips.push(format!(
                    "{ip} . {} . {} : goto {}",
                    s.proto,
                    s.port,
                    s.external_chain()
                ));
            }
            if let Some(port) = s.node_port {
                service_nodeports.push(format!(
                    "{} . {port} : goto {}",
                    s.proto,
                    s.external_chain()
                ));
            }
        } else {
            if let Some(ip) = s.load_balancer_ip {
                no_endpoint_services.push(format!(
                    "{ip} . {} . {} comment \"{}\" : drop",
                    s.proto,
                    s.port,
                    s.comment()
                ));
            }
            if let Some(port) = s.node_port {
                no_endpoint_nodeports.push(format!(
                    "{} . {port} comment \"{}\" : drop",
                    s.proto,
                    s.comment()
                ));
            }
        }
    }
    let addr3 = "ipv4_addr . inet_proto . inet_service";
    set(
        &mut text,
        "set",
        "hairpin-connections",
        "ipv4_addr . ipv4_addr . inet_proto . inet_service",
        "service hairpin connections",
        &hairpin,
    );
    set(
        &mut text,
        "set",
        "cluster-ips",
        "ipv4_addr",
        "Active ClusterIPs",
        &cluster_ips,
    );
    set(
        &mut text,
        "set",
        "nodeport-ips",
        "ipv4_addr",
        "IPs that accept NodePort traffic",
        &[NODE.to_string()],
    );
    set(
        &mut text,
        "map",
        "no-endpoint-services",
        &format!("{addr3} : verdict"),
        "vmap to drop or reject packets to services with no endpoints",
        &no_endpoint_services,
    );
    set(
        &mut text,
        "map",
        "no-endpoint-nodeports",
        "inet_proto . inet_service : verdict",
        "vmap to drop or reject packets to service nodeports with no endpoints",
        &no_endpoint_nodeports,
    );
    set(
        &mut text,
        "map",
        "firewall-ips",
        &format!("{addr3} : verdict"),
        "destinations that are subject to LoadBalancerSourceRanges",
        &[],
    );
    set(
        &mut text,
        "map",
        "service-ips",
        &format!("{addr3} : verdict"),
        "ClusterIP, ExternalIP and LoadBalancer IP traffic",
        &service_ips,
    );
    set(
        &mut text,
        "map",
        "service-nodeports",
        "inet_proto . inet_service : verdict",
        "NodePort traffic",
        &service_nodeports,
    );
    for s in services.iter().filter(|s| s.affinity) {
        for endpoint in &s.endpoints {
            let _ = write!(
                text,
                "\tset affinity-{} {{\n\t\ttype ipv4_addr\n\t\tsize 65535\n\t\tflags dynamic,timeout\n\t\ttimeout 3h\n\t}}\n\n",
                s.endpoint_base(*endpoint)
            );
        }
    }
    text.push_str(KUBE_PROXY_CHAINS);

    for s in services {
        let service_chain = s.service_chain();
        let _ = writeln!(text, "\n\tchain {service_chain} {{");
        if s.affinity {
            for endpoint in &s.endpoints {
                let base = s.endpoint_base(*endpoint);
                let _ = writeln!(text, "\t\tip saddr @affinity-{base} goto endpoint-{base}");
            }
            let _ = write!(text, "\t\tnumgen random mod {} vmap {{ ", s.endpoints.len());
            for (i, endpoint) in s.endpoints.iter().enumerate() {
                if i > 0 {
                    text.push_str(", ");
                }
                let _ = write!(text, "{i} : goto endpoint-{}", s.endpoint_base(*endpoint));
            }
            text.push_str(" }\n");
        } else {
            dnat_map(&mut text, s.proto, &s.endpoints, s.target_port);
        }
        text.push_str("\t}\n");

        if s.affinity {
            for endpoint in &s.endpoints {
                let base = s.endpoint_base(*endpoint);
                let _ = writeln!(
                    text,
                    "\n\tchain endpoint-{base} {{\n\t\tupdate @affinity-{base} {{ ip saddr }}\n\t\tmeta l4proto {} dnat to {endpoint}:{}\n\t}}",
                    s.proto, s.target_port
                );
            }
        }

        let external = s.node_port.is_some() || s.load_balancer_ip.is_some();
        if !external || !s.has_external_endpoints() {
            continue;
        }
        let external_chain = s.external_chain();
        if s.external_local {
            let local_chain = s.local_chain();
            let _ = writeln!(text, "\n\tchain {local_chain} {{");
            dnat_map(&mut text, s.proto, &s.local_endpoints(), s.target_port);
            text.push_str("\t}\n");
            let _ = writeln!(
                text,
                "\n\tchain {external_chain} {{
\t\tip saddr {POD_CIDR} goto {service_chain} comment \"short-circuit pod traffic\"
\t\tfib saddr type local meta mark set meta mark | 0x00004000 comment \"masquerade local traffic\"
\t\tfib saddr type local goto {service_chain} comment \"short-circuit local traffic\"
\t\tgoto {local_chain}
\t}}"
            );
        } else {
            let _ = writeln!(
                text,
                "\n\tchain {external_chain} {{
\t\tmeta mark set meta mark | 0x00004000 comment \"masquerade\"
\t\tgoto {service_chain}
\t}}"
            );
        }
    }
    text.push_str("}\n");
    text.push_str(KUBE_PROXY_IP6);
    text
}

// ---------------------------------------------------------------------------
// nft itself, in a network namespace of its own.

/// Runs `sh -c SCRIPT sh FILE` in a new network namespace, so that nothing
/// on this machine is touched; `Err` says why it could not run or what nft said.
fn in_netns(script: &str, file: &Path) -> Result<Vec<u8>, String> {
    let output = Command::new("unshare")
        .args(["--net", "sh", "-c", script, "sh"])
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run unshare: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first: Vec<&str> = stderr.lines().take(4).collect();
        return Err(format!(
            "`unshare --net sh -c '{script}'` failed ({}): {}",
            output.status,
            first.join(" / ")
        ));
    }
    Ok(output.stdout)
}

/// The fastest of `RUNS` runs of `nft -c -f FILE`.
fn nft_check(file: &Path) -> Result<Duration, String> {
    let mut fastest = Duration::MAX;
    for _ in 0..RUNS {
        let start = Instant::now();
        in_netns("nft -c -f \"$1\"", file)?;
        fastest = fastest.min(start.elapsed());
    }
    Ok(fastest)
}

/// What nft prints for the ruleset once loaded: `nft -j list ruleset`.
fn nft_json(file: &Path) -> Result<(Duration, String), String> {
    let start = Instant::now();
    let stdout = in_netns("nft -f \"$1\" && nft -j list ruleset", file)?;
    let elapsed = start.elapsed();
    String::from_utf8(stdout)
        .map(|json| (elapsed, json))
        .map_err(|e| format!("nft -j printed something that is not UTF-8: {e}"))
}

// ---------------------------------------------------------------------------
// Evaluation.

/// The client of every evaluated packet: outside the cluster.
const CLIENT: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);

fn packet_to(dst: Ipv4Addr, proto: &str, dport: u16) -> Packet {
    let proto = if proto == "udp" {
        Protocol::Udp
    } else {
        Protocol::Tcp
    };
    let mut packet = Packet::new(CLIENT.into(), dst.into(), proto);
    packet.ip.dport = Some(dport);
    packet.in_iface = Some("eth0".into());
    packet.out_iface = Some("flannel.1".into());
    packet
}

/// Asserts that `outcomes` are the service's: one per endpoint, each
/// accepted, DNATed to that endpoint and (from outside the cluster)
/// masqueraded, the shares adding up to one.
fn check(what: &str, service: &Service, outcomes: &[Outcome<'_>], full_path: bool) {
    let describe = || {
        outcomes
            .iter()
            .map(|o| format!("{:?} dnat {:?}", o.verdict, o.dnat()))
            .collect::<Vec<_>>()
            .join("; ")
    };
    assert_eq!(
        outcomes.len(),
        service.endpoints.len(),
        "{what}: expected one outcome per endpoint of {} ({:?}), got: {}",
        service.comment(),
        service.endpoints,
        describe()
    );
    let expected: BTreeSet<(IpAddr, Option<u16>)> = service
        .endpoints
        .iter()
        .map(|e| (IpAddr::from(*e), Some(service.target_port)))
        .collect();
    let got: BTreeSet<(IpAddr, Option<u16>)> = outcomes
        .iter()
        .filter_map(Outcome::dnat)
        .map(|Endpoint { addr, port }| (addr, port))
        .collect();
    assert_eq!(
        got,
        expected,
        "{what}: the outcomes should DNAT to {}'s endpoints; got: {}",
        service.comment(),
        describe()
    );
    for outcome in outcomes {
        assert_eq!(
            outcome.verdict,
            Verdict::Accept,
            "{what}: every way should be accepted; got: {}",
            describe()
        );
        if full_path {
            assert!(
                outcome.masquerade(),
                "{what}: traffic from outside the cluster to a service is masqueraded; got: {}",
                describe()
            );
        }
    }
    let total: f64 = outcomes.iter().map(|o| o.probability).sum();
    assert!(
        (total - 1.0).abs() < 1e-9,
        "{what}: the shares should add up to 1, not {total}"
    );
}

/// µs per evaluation of `f` (best of `RUNS` runs of `ITERATIONS`).
fn per_packet<T>(mut f: impl FnMut() -> T) -> f64 {
    let (time, ()) = best(|| {
        for _ in 0..ITERATIONS {
            black_box(f());
        }
    });
    time.as_secs_f64() * 1e6 / ITERATIONS as f64
}

/// What one size measured, for the summary.
struct Row {
    services: usize,
    text_mib: f64,
    json_mib: Option<f64>,
    nft_check: Result<Duration, String>,
    parse: Option<Duration>,
    cluster_ip_us: Option<f64>,
    node_port_us: Option<f64>,
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn run(n: usize, dir: &Path) -> Row {
    let services = services(n);
    let text = ruleset_text(&services);
    let endpoints: usize = services.iter().map(|s| s.endpoints.len()).sum();
    let node_ports = services.iter().filter(|s| s.node_port.is_some()).count();
    let lbs = services
        .iter()
        .filter(|s| s.load_balancer_ip.is_some())
        .count();
    let affinity = services.iter().filter(|s| s.affinity).count();
    println!();
    println!(
        "== {n} services: {endpoints} endpoints, {node_ports} NodePorts, {lbs} LB IPs, {affinity} with affinity; text {} lines, {:.1} MiB",
        text.lines().count(),
        mib(text.len())
    );
    let file = dir.join(format!("ruleset-{n}.nft"));
    std::fs::write(&file, &text).expect("write the ruleset");

    let mut row = Row {
        services: n,
        text_mib: mib(text.len()),
        json_mib: None,
        nft_check: nft_check(&file),
        parse: None,
        cluster_ip_us: None,
        node_port_us: None,
    };
    match &row.nft_check {
        Ok(time) => println!(
            "nft -c -f (text):                  {:>9.1} ms",
            time.as_secs_f64() * 1e3
        ),
        Err(why) => println!("nft -c -f (text):                  not measured: {why}"),
    }
    let json = match nft_json(&file) {
        Ok((time, json)) => {
            println!(
                "nft -f + nft -j list ruleset:      {:>9.1} ms (once; JSON {:.1} MiB)",
                time.as_secs_f64() * 1e3,
                mib(json.len())
            );
            json
        }
        Err(why) => {
            println!(
                "skoop nft::parse, evaluation:      not measured: no JSON from nft to read: {why}"
            );
            return row;
        }
    };
    row.json_mib = Some(mib(json.len()));

    // Parsing, side by side.
    let (parse_time, (ruleset, issues)) = best(|| nft::parse(&json));
    let ruleset = ruleset.expect("nft's JSON parses");
    assert!(
        issues.is_empty(),
        "nft's own JSON of the generated ruleset has {} issues, the first: {:?}",
        issues.len(),
        issues.iter().take(3).collect::<Vec<_>>()
    );
    row.parse = Some(parse_time);
    let ratio = row
        .nft_check
        .as_ref()
        .ok()
        .map(|check| check.as_secs_f64() / parse_time.as_secs_f64());
    match ratio {
        Some(ratio) => println!(
            "skoop nft::parse (JSON):           {:>9.1} ms  ({ratio:.1}x faster than nft -c -f; target >= {PARSE_RATIO_TARGET}x: {})",
            parse_time.as_secs_f64() * 1e3,
            met(ratio >= PARSE_RATIO_TARGET)
        ),
        None => println!(
            "skoop nft::parse (JSON):           {:>9.1} ms  (no nft -c -f to compare with)",
            parse_time.as_secs_f64() * 1e3
        ),
    }
    drop(ruleset);

    // Memory: what the parsed ruleset and its index keep, and the peak while building them.
    let ((ruleset, _), parsed) = counted(|| nft::parse(&json));
    let ruleset = ruleset.expect("nft's JSON parses");
    let empty = iptables::Ruleset::default();
    let ((netfilter, build), index) = counted(|| {
        let start = Instant::now();
        let netfilter = Netfilter::new(&empty, None).with_nftables(&ruleset);
        (netfilter, start.elapsed())
    });
    println!(
        "memory: ruleset {:.1} MiB ({:.2}x the JSON), peak while parsing {:.1} MiB; index {:.1} MiB more, peak {:.1} MiB",
        mib(parsed.kept),
        parsed.kept as f64 / json.len() as f64,
        mib(parsed.peak),
        mib(index.kept),
        mib(index.peak)
    );
    println!(
        "Netfilter::with_nftables (index):  {:>9.1} ms",
        build.as_secs_f64() * 1e3
    );

    // Evaluation: a packet from outside the cluster to a ClusterIP in the
    // middle of the map, and one to a NodePort on the node's address.
    let locals = [IpAddr::from(NODE)];
    let context = Context {
        local_addresses: &locals,
        ..Context::default()
    };
    let middle = |node_port: bool| {
        services[n / 2..]
            .iter()
            .find(|s| {
                s.endpoints.len() == 4
                    && !s.affinity
                    && !s.external_local
                    && s.node_port.is_some() == node_port
            })
            .expect("a service in the second half")
    };
    let cluster = middle(false);
    let cluster_packet = packet_to(cluster.cluster_ip, cluster.proto, cluster.port);
    let with_node_port = middle(true);
    let node_port = with_node_port.node_port.expect("a NodePort");
    let node_port_packet = packet_to(NODE, with_node_port.proto, node_port);

    let evaluate = |name: String, service: &Service, packet: &Packet| -> f64 {
        let (outcomes, heap) =
            counted(|| netfilter.traverse(PacketPath::Received, packet.clone(), &context));
        check(&name, service, &outcomes, true);
        let traverse =
            per_packet(|| netfilter.traverse(PacketPath::Received, packet.clone(), &context));
        println!(
            "evaluate {name:<26} {traverse:>9.2} µs per packet (traverse, {} ways, {} allocations; target < {EVALUATE_TARGET_US} µs: {})",
            outcomes.len(),
            heap.allocations,
            met(traverse < EVALUATE_TARGET_US)
        );
        let (outcomes, heap) =
            counted(|| netfilter.hook(Hook::Prerouting, packet.clone(), &context));
        check(&format!("{name} at prerouting"), service, &outcomes, false);
        let prerouting = per_packet(|| netfilter.hook(Hook::Prerouting, packet.clone(), &context));
        println!(
            "         {:<26} {prerouting:>9.2} µs per packet (PREROUTING only, {} allocations)",
            "", heap.allocations
        );
        traverse
    };
    row.cluster_ip_us = Some(evaluate(
        format!("ClusterIP {}:", cluster.cluster_ip),
        cluster,
        &cluster_packet,
    ));
    row.node_port_us = Some(evaluate(
        format!("NodePort {NODE}:{node_port}:"),
        with_node_port,
        &node_port_packet,
    ));

    // For scale: every service's ClusterIP in turn (affinity ones aside:
    // their dynamic sets are not in the dump).
    let spread: Vec<Packet> = services
        .iter()
        .filter(|s| !s.affinity)
        .map(|s| packet_to(s.cluster_ip, s.proto, s.port))
        .collect();
    let (time, ()) = best(|| {
        for packet in &spread {
            black_box(netfilter.traverse(PacketPath::Received, packet.clone(), &context));
        }
    });
    println!(
        "evaluate {:<26} {:>9.2} µs per packet (traverse, {} packets)",
        "every ClusterIP in turn:",
        time.as_secs_f64() * 1e6 / spread.len() as f64,
        spread.len()
    );
    row
}

fn main() {
    let dir = std::env::temp_dir().join(format!("skoop-bench-nft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    // `cargo bench --bench nftables -- 2000` measures other sizes (the
    // `--bench` cargo passes is not a number).
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = SIZES.to_vec();
    }
    let rows: Vec<Row> = sizes.iter().map(|&n| run(n, &dir)).collect();
    let _ = std::fs::remove_dir_all(&dir);

    let ms = |d: Option<Duration>| {
        d.map_or_else(
            || "-".to_string(),
            |d| format!("{:.1}", d.as_secs_f64() * 1e3),
        )
    };
    let us = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    println!();
    println!(
        "{:>8} {:>9} {:>9} {:>14} {:>12} {:>8} {:>13} {:>12}",
        "services",
        "text MiB",
        "JSON MiB",
        "nft -c -f ms",
        "skoop ms",
        "ratio",
        "ClusterIP µs",
        "NodePort µs"
    );
    for row in &rows {
        let ratio = match (&row.nft_check, row.parse) {
            (Ok(check), Some(parse)) => {
                format!("{:.1}x", check.as_secs_f64() / parse.as_secs_f64())
            }
            _ => "-".to_string(),
        };
        println!(
            "{:>8} {:>9.1} {:>9} {:>14} {:>12} {:>8} {:>13} {:>12}",
            row.services,
            row.text_mib,
            row.json_mib
                .map_or_else(|| "-".to_string(), |m| format!("{m:.1}")),
            ms(row.nft_check.as_ref().ok().copied()),
            ms(row.parse),
            ratio,
            us(row.cluster_ip_us),
            us(row.node_port_us)
        );
    }
    println!(
        "targets (issue 16, at 10,000 services): parse >= {PARSE_RATIO_TARGET}x faster than nft -c -f; one packet < {EVALUATE_TARGET_US} µs"
    );
}
