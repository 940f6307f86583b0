//! A generated `iptables-save` of a node whose kube-proxy (iptables mode)
//! serves many services, in kube-proxy's real layout, for scale tests and
//! benchmarks: KUBE-SERVICES dispatches each ClusterIP to its KUBE-SVC-*
//! chain, which marks off-cluster sources for masquerade (KUBE-MARK-MASQ)
//! and picks an endpoint with `statistic` branches; each KUBE-SEP-* chain
//! DNATs to its endpoint; NodePorts go through KUBE-NODEPORTS and KUBE-EXT-*;
//! KUBE-POSTROUTING masquerades what was marked.

use std::fmt::Write;
use std::net::Ipv4Addr;

/// Node ports are 30000-32767: only this many services can have one.
const NODE_PORTS: usize = 2768;

/// The text `iptables-save` prints for `services` services with `endpoints`
/// endpoints each. Every service has a ClusterIP; the first 2768 also have a
/// NodePort; every tenth one is UDP. 10,000 services with 4 endpoints give
/// about 150,000 rules (about 20 MB).
pub fn kube_proxy_dump(services: usize, endpoints: usize) -> String {
    let services: Vec<ServicePort> = (0..services).map(|i| service(i, endpoints)).collect();
    let mut out = String::with_capacity(services.len() * (endpoints + 1) * 420 + 4096);
    write_filter(&mut out);
    write_nat(&mut out, &services, "10.244.0.0/16");
    out
}

/// One service port as kube-proxy programs it.
#[derive(Debug, Clone)]
pub struct ServicePort {
    /// `namespace/name:port`, as kube-proxy writes it in comments.
    pub name: String,
    /// `tcp` or `udp`.
    pub protocol: &'static str,
    pub cluster_ip: Ipv4Addr,
    pub port: u16,
    pub node_port: Option<u16>,
    pub target_port: u16,
    pub endpoints: Vec<Ipv4Addr>,
}

/// What kube-proxy adds to a node's nat table for `services`, to be spliced
/// into a ruleset that already has its fixed chains (`KUBE-SERVICES`,
/// `KUBE-NODEPORTS`, `KUBE-MARK-MASQ`): the declarations of the services'
/// own chains, and their rules (each chain's rules in order; the
/// `KUBE-SERVICES` rules go before that chain's last, NodePort rule).
/// `cluster_cidr` is kube-proxy's `--cluster-cidr`.
pub struct ServiceRules {
    pub chains: String,
    pub rules: String,
}

pub fn service_rules(services: &[ServicePort], cluster_cidr: &str) -> ServiceRules {
    let services: Vec<Chains> = services.iter().map(Chains::of).collect();
    let mut chains = String::new();
    for s in &services {
        let _ = writeln!(chains, ":{} - [0:0]", s.svc);
        if s.port.node_port.is_some() {
            let _ = writeln!(chains, ":{} - [0:0]", s.ext);
        }
        for sep in &s.seps {
            let _ = writeln!(chains, ":{sep} - [0:0]");
        }
    }
    let mut rules = String::new();
    write_node_ports(&mut rules, &services);
    write_dispatch(&mut rules, &services);
    for s in &services {
        write_service_chains(&mut rules, s, cluster_cidr);
    }
    ServiceRules { chains, rules }
}

/// A service port with the names of its chains.
struct Chains<'a> {
    port: &'a ServicePort,
    svc: String,
    ext: String,
    seps: Vec<String>,
}

impl<'a> Chains<'a> {
    fn of(port: &'a ServicePort) -> Self {
        let (name, protocol) = (&port.name, port.protocol);
        Chains {
            svc: format!("KUBE-SVC-{}", chain_hash(&format!("{name}/{protocol}"))),
            ext: format!("KUBE-EXT-{}", chain_hash(&format!("{name}/{protocol}"))),
            seps: port
                .endpoints
                .iter()
                .map(|ip| {
                    format!(
                        "KUBE-SEP-{}",
                        chain_hash(&format!("{name}/{protocol}/{ip}"))
                    )
                })
                .collect(),
            port,
        }
    }
}

fn service(index: usize, endpoints: usize) -> ServicePort {
    let protocol = if index % 10 == 9 { "udp" } else { "tcp" };
    // Cluster IPs from 10.96.0.0/12, pod IPs from 10.244.0.0/16 on.
    let port = if protocol == "udp" { 53 } else { 80 };
    ServicePort {
        name: format!("ns-{}/svc-{index}:p{}", index % 50, index % 3),
        protocol,
        cluster_ip: Ipv4Addr::from(0x0a60_0000 + index as u32 + 1),
        port,
        node_port: (index < NODE_PORTS).then(|| 30000 + index as u16),
        target_port: port + 8000,
        endpoints: (0..endpoints)
            .map(|e| Ipv4Addr::from(0x0af4_0000 + (index * endpoints + e) as u32 + 2))
            .collect(),
    }
}

/// 16 base32 characters, as kube-proxy's chain names end (it hashes with
/// SHA-256; any well-mixed hash gives the same shape).
fn chain_hash(seed: &str) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut state = seed.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (0..16)
        .map(|_| {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            char::from(ALPHABET[((z ^ (z >> 31)) >> 59) as usize])
        })
        .collect()
}

fn write_filter(out: &mut String) {
    out.push_str(
        "*filter\n\
:INPUT ACCEPT [0:0]\n\
:FORWARD ACCEPT [0:0]\n\
:OUTPUT ACCEPT [0:0]\n\
:KUBE-EXTERNAL-SERVICES - [0:0]\n\
:KUBE-FIREWALL - [0:0]\n\
:KUBE-FORWARD - [0:0]\n\
:KUBE-NODEPORTS - [0:0]\n\
:KUBE-PROXY-FIREWALL - [0:0]\n\
:KUBE-SERVICES - [0:0]\n\
-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL\n\
-A INPUT -m comment --comment \"kubernetes health check service ports\" -j KUBE-NODEPORTS\n\
-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES\n\
-A INPUT -j KUBE-FIREWALL\n\
-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL\n\
-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\n\
-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES\n\
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL\n\
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
-A OUTPUT -j KUBE-FIREWALL\n\
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment \"block incoming localnet connections\" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n\
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n\
-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding rules\" -m mark --mark 0x4000/0x4000 -j ACCEPT\n\
-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n\
COMMIT\n",
    );
}

// `write!` to a String cannot fail.
fn write_nat(out: &mut String, services: &[ServicePort], cluster_cidr: &str) {
    let ServiceRules { chains, rules } = service_rules(services, cluster_cidr);
    out.push_str(
        "*nat\n\
:PREROUTING ACCEPT [0:0]\n\
:INPUT ACCEPT [0:0]\n\
:OUTPUT ACCEPT [0:0]\n\
:POSTROUTING ACCEPT [0:0]\n\
:KUBE-MARK-MASQ - [0:0]\n\
:KUBE-NODEPORTS - [0:0]\n\
:KUBE-POSTROUTING - [0:0]\n\
:KUBE-SERVICES - [0:0]\n",
    );
    out.push_str(&chains);
    out.push_str(
        "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n\
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\n\
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n\
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0\n\
-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n",
    );
    out.push_str(&rules);
    out.push_str(
        "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n\
COMMIT\n",
    );
}

fn write_node_ports(out: &mut String, services: &[Chains]) {
    for s in services {
        if let Some(node_port) = s.port.node_port {
            let (name, protocol, ext) = (&s.port.name, s.port.protocol, &s.ext);
            let _ = writeln!(
                out,
                "-A KUBE-NODEPORTS -p {protocol} -m comment --comment \"{name}\" -m {protocol} --dport {node_port} -j {ext}"
            );
        }
    }
}

fn write_dispatch(out: &mut String, services: &[Chains]) {
    for s in services {
        let ServicePort {
            name,
            protocol,
            cluster_ip: ip,
            port,
            ..
        } = s.port;
        let svc = &s.svc;
        let _ = writeln!(
            out,
            "-A KUBE-SERVICES -d {ip}/32 -p {protocol} -m comment --comment \"{name} cluster IP\" -m {protocol} --dport {port} -j {svc}"
        );
    }
}

fn write_service_chains(out: &mut String, s: &Chains, cluster_cidr: &str) {
    let ServicePort {
        name,
        protocol,
        cluster_ip: ip,
        port,
        target_port,
        ..
    } = s.port;
    let svc = &s.svc;
    if s.port.node_port.is_some() {
        let ext = &s.ext;
        let _ = writeln!(
            out,
            "-A {ext} -m comment --comment \"masquerade traffic for {name} external destinations\" -j KUBE-MARK-MASQ"
        );
        let _ = writeln!(out, "-A {ext} -j {svc}");
    }
    let _ = writeln!(
        out,
        "-A {svc} ! -s {cluster_cidr} -d {ip}/32 -p {protocol} -m comment --comment \"{name} cluster IP\" -m {protocol} --dport {port} -j KUBE-MARK-MASQ"
    );
    let count = s.seps.len();
    for (e, (endpoint, sep)) in s.port.endpoints.iter().zip(&s.seps).enumerate() {
        let _ = write!(
            out,
            "-A {svc} -m comment --comment \"{name} -> {endpoint}:{target_port}\""
        );
        if e + 1 < count {
            let probability = 1.0 / (count - e) as f64;
            let _ = write!(
                out,
                " -m statistic --mode random --probability {probability:.11}"
            );
        }
        let _ = writeln!(out, " -j {sep}");
    }
    for (endpoint, sep) in s.port.endpoints.iter().zip(&s.seps) {
        let _ = writeln!(
            out,
            "-A {sep} -s {endpoint}/32 -m comment --comment \"{name}\" -j KUBE-MARK-MASQ"
        );
        let _ = writeln!(
            out,
            "-A {sep} -p {protocol} -m comment --comment \"{name}\" -m {protocol} -j DNAT --to-destination {endpoint}:{target_port}"
        );
    }
}
