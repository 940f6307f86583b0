//! A ClusterIP service programmed in kube-proxy's own iptables layout
//! (iptables mode, as kube-proxy 1.28+ writes it with `--cluster-cidr` set):
//! jumps from the built-in chains, `KUBE-SERVICES` -> `KUBE-SVC-<hash>` with
//! one `statistic` branch per endpoint -> `KUBE-SEP-<hash>` (hairpin
//! `KUBE-MARK-MASQ`, then `DNAT`), and `KUBE-POSTROUTING` masquerading what
//! `KUBE-MARK-MASQ` marked.

use std::net::{IpAddr, SocketAddr};

use sha2::{Digest, Sha256};

use crate::cluster::{POD_PORT, Service};

/// kube-proxy's `--iptables-masquerade-bit` 14, as a mark.
const MASQ_MARK: &str = "0x4000";

/// The `iptables-restore` input kube-proxy's rules amount to on a node that
/// has nothing else, in the order kube-proxy leaves them: it inserts its
/// jumps at the top of the built-in chains, in reverse of the order below.
/// One family's: `cluster_ip` (the service's of that family),
/// `cluster_cidr` and the `endpoints` are all IPv4 (`iptables-restore`) or
/// all IPv6 (`ip6tables-restore`).
pub fn rules(
    service: &Service,
    cluster_ip: IpAddr,
    cluster_cidr: &str,
    endpoints: &[IpAddr],
) -> String {
    let port_name = format!(
        "{}/{}:{}",
        service.namespace, service.name, service.port_name
    );
    let svc_chain = format!("KUBE-SVC-{}", chain_hash(&format!("{port_name}tcp")));
    let seps: Vec<(String, String)> = endpoints
        .iter()
        .map(|ip| {
            // `[fd00::2]:8080` for IPv6, as kube-proxy writes it.
            let endpoint = SocketAddr::new(*ip, POD_PORT).to_string();
            let chain = format!(
                "KUBE-SEP-{}",
                chain_hash(&format!("{port_name}tcp{endpoint}"))
            );
            (chain, endpoint)
        })
        .collect();

    let mut filter = String::from(
        "*filter
:KUBE-NODEPORTS - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment \"kubernetes health check service ports\" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
",
    );
    filter.push_str(&format!(
        "-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding rules\" -m mark --mark {MASQ_MARK}/{MASQ_MARK} -j ACCEPT
-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
"
    ));

    let mut nat = String::from(
        "*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
",
    );
    nat.push_str(&format!(":{svc_chain} - [0:0]\n"));
    for (chain, _) in &seps {
        nat.push_str(&format!(":{chain} - [0:0]\n"));
    }
    nat.push_str(&format!(
        "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --or-mark {MASQ_MARK}
-A KUBE-POSTROUTING -m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark {MASQ_MARK}
-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully
"
    ));
    let cluster_ip_match = format!("-m tcp -p tcp -d {cluster_ip} --dport {}", service.port);
    nat.push_str(&format!(
        "-A KUBE-SERVICES -m comment --comment \"{port_name} cluster IP\" {cluster_ip_match} -j {svc_chain}\n"
    ));
    nat.push_str(&format!(
        "-A {svc_chain} -m comment --comment \"{port_name} cluster IP\" {cluster_ip_match} ! -s {cluster_cidr} -j KUBE-MARK-MASQ\n"
    ));
    // Endpoint i of n is taken with probability 1/(n-i) of what reaches it,
    // which makes every endpoint equally likely; the last takes the rest.
    for (i, (chain, endpoint)) in seps.iter().enumerate() {
        let remaining = seps.len() - i;
        let statistic = if remaining > 1 {
            format!(
                " -m statistic --mode random --probability {:.10}",
                1.0 / remaining as f64
            )
        } else {
            String::new()
        };
        nat.push_str(&format!(
            "-A {svc_chain} -m comment --comment \"{port_name} -> {endpoint}\"{statistic} -j {chain}\n"
        ));
    }
    for ((chain, endpoint), ip) in seps.iter().zip(endpoints) {
        nat.push_str(&format!(
            "-A {chain} -m comment --comment {port_name} -s {ip} -j KUBE-MARK-MASQ
-A {chain} -m comment --comment {port_name} -m tcp -p tcp -j DNAT --to-destination {endpoint}
"
        ));
    }
    nat.push_str(
        "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
COMMIT
",
    );
    filter + nat.as_str()
}

/// kube-proxy's `portProtoHash`: the first 16 characters of the base32
/// (RFC 4648) encoding of the SHA-256 of `text`.
fn chain_hash(text: &str) -> String {
    encode_prefix(&Sha256::digest(text.as_bytes()), BASE32_ALPHABET, 16)
}

const BASE32_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// The first `chars` characters of `bytes` encoded with `alphabet` (of 32
/// or 64 symbols: base32 or base64 without padding), which is all the
/// agents' hashed names take of their encodings (a crate for a handful of
/// characters would be more than the job).
pub fn encode_prefix(bytes: &[u8], alphabet: &[u8], chars: usize) -> String {
    let bits_per_char = alphabet.len().trailing_zeros();
    let mut out = String::new();
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for &byte in bytes {
        if out.len() == chars {
            break;
        }
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= bits_per_char && out.len() < chars {
            bits -= bits_per_char;
            let index = (buffer >> bits) & ((1 << bits_per_char) - 1);
            out.push(char::from(alphabet[index as usize]));
        }
        buffer &= (1 << bits) - 1;
    }
    out
}

#[test]
fn chain_names_match_kube_proxy() {
    // From kube-proxy's own tests (pkg/proxy/iptables/proxier_test.go).
    assert_eq!(chain_hash("ns1/svc1:p80tcp"), "XPGD46QRK7WJZT7O");
    assert_eq!(
        chain_hash("ns1/svc1:p80tcp10.180.0.1:80"),
        "SXIVWICOYRO3J4NJ"
    );
}
