//! A generated `iptables-save` of a node whose kube-proxy (iptables mode)
//! serves many services, in kube-proxy's real layout, for scale tests and
//! benchmarks: KUBE-SERVICES dispatches each ClusterIP to its KUBE-SVC-*
//! chain, which marks off-cluster sources for masquerade (KUBE-MARK-MASQ)
//! and picks an endpoint with `statistic` branches; each KUBE-SEP-* chain
//! DNATs to its endpoint; NodePorts go through KUBE-NODEPORTS and KUBE-EXT-*;
//! KUBE-POSTROUTING masquerades what was marked.

use std::fmt::Write;

/// Node ports are 30000-32767: only this many services can have one.
const NODE_PORTS: usize = 2768;

/// The text `iptables-save` prints for `services` services with `endpoints`
/// endpoints each. Every service has a ClusterIP; the first 2768 also have a
/// NodePort; every tenth one is UDP. 10,000 services with 4 endpoints give
/// about 150,000 rules (about 20 MB).
pub fn kube_proxy_dump(services: usize, endpoints: usize) -> String {
    let mut out = String::with_capacity(services * (endpoints + 1) * 420 + 4096);
    write_filter(&mut out);
    write_nat(&mut out, services, endpoints);
    out
}

/// One service port as kube-proxy names its chains and comments.
struct Service {
    name: String,
    protocol: &'static str,
    cluster_ip: String,
    port: u16,
    node_port: Option<u16>,
    svc: String,
    ext: String,
    endpoints: Vec<(String, String)>,
}

fn service(index: usize, endpoints: usize) -> Service {
    let name = format!("ns-{}/svc-{index}:p{}", index % 50, index % 3);
    let protocol = if index % 10 == 9 { "udp" } else { "tcp" };
    // Cluster IPs from 10.96.0.0/12, pod IPs from 10.244.0.0/16 on.
    let cluster_ip = ipv4(0x0a60_0000 + index as u32 + 1);
    let port = if protocol == "udp" { 53 } else { 80 };
    let endpoints = (0..endpoints)
        .map(|e| {
            let ip = ipv4(0x0af4_0000 + (index * endpoints + e) as u32 + 2);
            let chain = format!(
                "KUBE-SEP-{}",
                chain_hash(&format!("{name}/{protocol}/{ip}"))
            );
            (ip, chain)
        })
        .collect();
    Service {
        svc: format!("KUBE-SVC-{}", chain_hash(&format!("{name}/{protocol}"))),
        ext: format!("KUBE-EXT-{}", chain_hash(&format!("{name}/{protocol}"))),
        node_port: (index < NODE_PORTS).then(|| 30000 + index as u16),
        name,
        protocol,
        cluster_ip,
        port,
        endpoints,
    }
}

fn ipv4(address: u32) -> String {
    std::net::Ipv4Addr::from(address).to_string()
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
fn write_nat(out: &mut String, services: usize, endpoints: usize) {
    let services: Vec<Service> = (0..services).map(|i| service(i, endpoints)).collect();
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
    for s in &services {
        let _ = writeln!(out, ":{} - [0:0]", s.svc);
        if s.node_port.is_some() {
            let _ = writeln!(out, ":{} - [0:0]", s.ext);
        }
        for (_, sep) in &s.endpoints {
            let _ = writeln!(out, ":{sep} - [0:0]");
        }
    }
    out.push_str(
        "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n\
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\n",
    );
    for s in &services {
        if let Some(node_port) = s.node_port {
            let (name, protocol, ext) = (&s.name, s.protocol, &s.ext);
            let _ = writeln!(
                out,
                "-A KUBE-NODEPORTS -p {protocol} -m comment --comment \"{name}\" -m {protocol} --dport {node_port} -j {ext}"
            );
        }
    }
    out.push_str(
        "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n\
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0\n\
-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n",
    );
    for s in &services {
        let (name, protocol, ip, port, svc) = (&s.name, s.protocol, &s.cluster_ip, s.port, &s.svc);
        let _ = writeln!(
            out,
            "-A KUBE-SERVICES -d {ip}/32 -p {protocol} -m comment --comment \"{name} cluster IP\" -m {protocol} --dport {port} -j {svc}"
        );
    }
    out.push_str(
        "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n",
    );
    for s in &services {
        write_service_chains(out, s);
    }
    out.push_str("COMMIT\n");
}

fn write_service_chains(out: &mut String, s: &Service) {
    let (name, protocol, ip, port, svc) = (&s.name, s.protocol, &s.cluster_ip, s.port, &s.svc);
    if s.node_port.is_some() {
        let ext = &s.ext;
        let _ = writeln!(
            out,
            "-A {ext} -m comment --comment \"masquerade traffic for {name} external destinations\" -j KUBE-MARK-MASQ"
        );
        let _ = writeln!(out, "-A {ext} -j {svc}");
    }
    let _ = writeln!(
        out,
        "-A {svc} ! -s 10.244.0.0/16 -d {ip}/32 -p {protocol} -m comment --comment \"{name} cluster IP\" -m {protocol} --dport {port} -j KUBE-MARK-MASQ"
    );
    let count = s.endpoints.len();
    for (e, (endpoint, sep)) in s.endpoints.iter().enumerate() {
        let target_port = port + 8000;
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
    for (endpoint, sep) in &s.endpoints {
        let target_port = port + 8000;
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
