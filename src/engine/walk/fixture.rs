//! Small inline namespaces for the stages' unit tests: a snapshot written
//! from a few dumps into a temporary directory, and a walker over it
//! without packs (no CNI pack applies: nothing is assumed).
//!
//! `two_pods_on_a_bridge` is node `n1` with pods `default/a` (10.0.0.2) and
//! `default/b` (10.0.0.3) behind bridge `cni0` (10.0.0.1/24), each pod's
//! `eth0` the peer of a port (`veth-a`, `veth-b`), and a VXLAN device
//! `flannel.1` on the node; tests add or replace files.

use serde_json::{Value, json};

use super::*;

pub(super) struct Fixture {
    _dir: tempfile::TempDir,
    snapshot: Arc<Snapshot>,
    packs: LoadedPacks,
}

impl Fixture {
    /// A snapshot of these files (path under the snapshot's root, content).
    pub(super) fn new(files: &[(String, String)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let (snapshot, problems) = Snapshot::load(dir.path()).unwrap();
        assert!(problems.is_empty(), "{problems:#?}");
        let (packs, problems) = LoadedPacks::load(Vec::new(), &[]);
        assert!(problems.is_empty(), "{problems:?}");
        Fixture {
            _dir: dir,
            snapshot: Arc::new(snapshot),
            packs,
        }
    }

    /// A snapshot of these files, diagnosed with the built-in packs (the
    /// CNI pack the cluster's objects name applies).
    pub(super) fn with_builtin_packs(files: &[(String, String)]) -> Fixture {
        let fixture = Fixture::new(files);
        let (packs, problems) = LoadedPacks::load(crate::packs::builtin_sources(), &[]);
        assert!(problems.is_empty(), "{problems:?}");
        Fixture { packs, ..fixture }
    }

    /// A snapshot of these files with one CNI pack whose `next_hop` and
    /// `pod_interface` hooks are the functions of `script`.
    pub(super) fn with_hooks(files: &[(String, String)], script: &str) -> Fixture {
        let fixture = Fixture::new(files);
        let packs = crate::engine::hooks::answering_pack(script);
        Fixture { packs, ..fixture }
    }

    /// Runs `test` with a walker over the snapshot (`--size` as given).
    pub(super) fn walk<R>(
        &self,
        size: Option<PacketSize>,
        test: impl FnOnce(&mut Walker<'_>) -> R,
    ) -> R {
        let mut walker = Walker::new(&self.snapshot, &self.packs, size);
        test(&mut walker)
    }
}

pub(super) fn host(node: &str) -> NetnsId {
    NetnsId::Host {
        node: node.to_string(),
    }
}

pub(super) fn pod(name: &str) -> NetnsId {
    NetnsId::Pod {
        node: "n1".into(),
        namespace: "default".into(),
        name: name.into(),
    }
}

/// One file of a namespace's dump.
pub(super) fn file(ns: &NetnsId, file: DumpFile, content: impl Into<String>) -> (String, String) {
    (
        ns.dir().join(file.name()).display().to_string(),
        content.into(),
    )
}

/// A device as `ip -j -d link show` writes it: up with carrier unless
/// `flags` says otherwise.
pub(super) fn device(ifindex: u32, name: &str, mtu: u32, extra: Value) -> Value {
    let mut device = json!({
        "ifindex": ifindex,
        "ifname": name,
        "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
        "mtu": mtu,
        "operstate": "UP",
        "link_type": "ether",
        "address": format!("02:00:00:00:00:{ifindex:02x}"),
    });
    for (key, value) in extra.as_object().unwrap() {
        device[key] = value.clone();
    }
    device
}

/// The loopback device.
fn loopback() -> Value {
    let flags = json!({"link_type": "loopback", "flags": ["LOOPBACK", "UP", "LOWER_UP"]});
    device(1, "lo", 65536, flags)
}

/// A device's IPv4 address, as `ip -j addr show` writes it.
pub(super) fn address(ifindex: u32, name: &str, local: &str, prefixlen: u8) -> Value {
    json!({
        "ifindex": ifindex,
        "ifname": name,
        "flags": ["UP", "LOWER_UP"],
        "mtu": 1500,
        "addr_info": [{"family": "inet", "local": local, "prefixlen": prefixlen, "scope": "global", "label": name}],
    })
}

/// The kernel's defaults for how a namespace answers ARP.
pub(super) const ARP_DEFAULTS: &str = "net.ipv4.conf.all.arp_ignore = 0\nnet.ipv4.conf.all.arp_filter = 0\nnet.ipv4.conf.all.proxy_arp = 0\n";

/// The default policy rules.
pub(super) const RULES: &str = r#"[{"priority": 0, "src": "all", "table": "local"},
{"priority": 32766, "src": "all", "table": "main"},
{"priority": 32767, "src": "all", "table": "default"}]"#;

/// A connected route and the local route of an address on `dev`.
pub(super) fn connected(subnet: &str, dev: &str, local: &str) -> Vec<Value> {
    vec![
        json!({"type": "unicast", "dst": subnet, "dev": dev, "table": "main", "protocol": "kernel", "scope": "link", "prefsrc": local, "flags": []}),
        json!({"type": "local", "dst": local, "dev": dev, "table": "local", "protocol": "kernel", "scope": "host", "prefsrc": local, "flags": []}),
    ]
}

/// A pod of node `n1` with `eth0` (ifindex 2) the peer of the node's
/// `peer_index`, holding `ip`/24, with an empty ruleset.
fn pod_files(name: &str, ip: &str, peer_index: u32) -> Vec<(String, String)> {
    let ns = pod(name);
    let links = json!([
        loopback(),
        device(
            2,
            "eth0",
            1450,
            json!({"link_index": peer_index, "linkinfo": {"info_kind": "veth"}})
        ),
    ]);
    let routes = connected("10.0.0.0/24", "eth0", ip);
    let addrs = json!([address(2, "eth0", ip, 24)]);
    let mut files = netns_files(&ns, (links, addrs, routes), 0, ARP_DEFAULTS);
    files.push(file(
        &ns,
        DumpFile::Ss,
        "tcp LISTEN 0 128 0.0.0.0:8080 0.0.0.0:*\n",
    ));
    files
}

/// A namespace's dump with an empty ruleset: its devices, addresses and
/// routes, the default policy rules, `ip_forward` then `sysctls`.
fn netns_files(
    ns: &NetnsId,
    (links, addrs, routes): (Value, Value, Vec<Value>),
    ip_forward: u8,
    sysctls: &str,
) -> Vec<(String, String)> {
    vec![
        file(ns, DumpFile::IpLink, links.to_string()),
        file(ns, DumpFile::IpAddr, addrs.to_string()),
        file(ns, DumpFile::IpRoute, Value::from(routes).to_string()),
        file(ns, DumpFile::IpRule, RULES),
        file(ns, DumpFile::IptablesSave, ""),
        file(
            ns,
            DumpFile::Sysctl,
            format!("net.ipv4.ip_forward = {ip_forward}\n{sysctls}"),
        ),
    ]
}

/// Node `n1`, its bridge and VXLAN device, and pods `a` and `b` (see the
/// module's documentation).
pub(super) fn two_pods_on_a_bridge() -> Vec<(String, String)> {
    let node = host("n1");
    let links = json!([
        loopback(),
        device(
            3,
            "cni0",
            1450,
            json!({"linkinfo": {"info_kind": "bridge", "info_data": {"stp_state": 0, "vlan_filtering": 0}}})
        ),
        device(
            4,
            "flannel.1",
            1450,
            json!({"linkinfo": {"info_kind": "vxlan", "info_data": {"id": 1, "local": "172.18.0.11", "port": 8472, "df": "unset"}}})
        ),
        device(
            5,
            "veth-a",
            1450,
            json!({"link_index": 2, "master": "cni0", "linkinfo": {"info_kind": "veth"}})
        ),
        device(
            6,
            "veth-b",
            1450,
            json!({"link_index": 2, "master": "cni0", "linkinfo": {"info_kind": "veth"}})
        ),
    ]);
    let mut routes = connected("10.0.0.0/24", "cni0", "10.0.0.1");
    routes.push(json!({"type": "unicast", "dst": "10.0.1.0/24", "gateway": "10.0.1.0", "dev": "flannel.1", "table": "main", "protocol": "boot", "scope": "global", "flags": ["onlink"]}));
    let mut files = vec![
        file(&node, DumpFile::IpLink, links.to_string()),
        file(
            &node,
            DumpFile::IpAddr,
            json!([address(3, "cni0", "10.0.0.1", 24)]).to_string(),
        ),
        file(&node, DumpFile::IpRoute, Value::from(routes).to_string()),
        file(&node, DumpFile::IpRule, RULES),
        file(&node, DumpFile::IptablesSave, ""),
        file(
            &node,
            DumpFile::Sysctl,
            format!("net.ipv4.ip_forward = 1\n{ARP_DEFAULTS}"),
        ),
        file(&node, DumpFile::IpNeigh, "[]"),
        file(&node, DumpFile::BridgeFdb, "[]"),
    ];
    // Pod a's eth0 is veth-a's peer, pod b's veth-b's.
    files.extend(pod_files("a", "10.0.0.2", 5));
    files.extend(pod_files("b", "10.0.0.3", 6));
    files
}

/// `files` with `replaced` put in place of (or beside) what they had.
pub(super) fn with(
    mut files: Vec<(String, String)>,
    replaced: Vec<(String, String)>,
) -> Vec<(String, String)> {
    for (path, content) in replaced {
        files.retain(|(existing, _)| *existing != path);
        files.push((path, content));
    }
    files
}

/// A TCP packet from `src` to `dst`:8080, first of its connection.
pub(super) fn tcp(src: &str, dst: &str) -> Packet {
    Packet {
        ip: net::Packet {
            sport: Some(EPHEMERAL_PORT),
            dport: Some(8080),
            ..net::Packet::new(src.parse().unwrap(), dst.parse().unwrap(), Protocol::Tcp)
        },
        reply: false,
        tunnel: None,
        size: Size::Unset,
    }
}

/// `tcp(src, dst)` of `bytes` with DF, a probe or not.
pub(super) fn tcp_sized(src: &str, dst: &str, bytes: u32, probe: bool) -> Packet {
    let mut packet = tcp(src, dst);
    packet.size_by_device(bytes, probe);
    packet
}

/// A branch at its start.
pub(super) fn branch() -> Branch {
    Branch::new()
}

impl Walker<'_> {
    /// A fresh hop for `ns` and a new branch through it, carrying `packet`.
    pub(super) fn test_flow(&mut self, ns: &NetnsId, packet: Packet) -> (Place, Flow) {
        let mut branch = Branch::new();
        let place = self.test_hop(ns, &mut branch);
        (place, Flow { packet, branch })
    }

    /// A fresh hop for `ns`, on `branch`, as `visit` makes one.
    pub(super) fn test_hop(&mut self, ns: &NetnsId, branch: &mut Branch) -> Place {
        let hop = Hop {
            id: hop_id(ns),
            node: Some(ns.node().to_string()),
            assumed: false,
            steps: Vec::new(),
            context: None,
        };
        let hop = self.join(hop, None, branch);
        Place::new(ns, hop)
    }
}

/// The stop a stage returned, or what else it returned, for the assertion.
pub(super) fn stopped(next: Next<'_>) -> Stop {
    match next {
        Next::Stop { stop, .. } => stop,
        other => panic!("expected a stop, got {}", describe(&other)),
    }
}

/// What a `Next` is, for failure messages.
pub(super) fn describe(next: &Next<'_>) -> String {
    match next {
        Next::Visit { ns, arrival, .. } => format!("visit {ns} ({arrival:?})"),
        Next::Enter { place, .. } => format!("enter {}", place.ns),
        Next::Netfilter(place, _) => format!("netfilter outcome at {}", place.ns),
        Next::Stop { stop, .. } => format!("stop {} ({})", stop.id, stop.reason),
        Next::Finish { disposition, .. } => format!("finish {disposition}"),
        Next::Fork(ways) => format!("fork of {}", ways.len()),
    }
}

/// Node `name`'s dump: `eth0` (MAC 02:00:00:00:<name less its first
/// letter>:02) holding `ip` in `subnet` (a /24), a default route via
/// `gateway` where one is given, bridge `cni0` holding `local` in the pod
/// `subnet` of `bridge` where one is given, forwarding on, then `sysctls`.
pub(super) fn node_files(
    name: &str,
    (ip, subnet): (&str, &str),
    gateway: Option<&str>,
    bridge: Option<(&str, &str)>,
    sysctls: &str,
) -> Vec<(String, String)> {
    let ns = host(name);
    let mac = format!("02:00:00:00:{}:02", &name[1..]);
    let eth0 = device(2, "eth0", 1500, json!({ "address": mac }));
    let mut links = vec![loopback(), eth0];
    let mut addrs = vec![address(2, "eth0", ip, 24)];
    let mut routes = connected(subnet, "eth0", ip);
    if let Some(gateway) = gateway {
        routes.push(json!({"type": "unicast", "dst": "default", "gateway": gateway, "dev": "eth0", "table": "main", "protocol": "boot", "scope": "global", "flags": []}));
    }
    if let Some((subnet, local)) = bridge {
        links.push(device(
            3,
            "cni0",
            1450,
            json!({"linkinfo": {"info_kind": "bridge", "info_data": {"stp_state": 0, "vlan_filtering": 0}}}),
        ));
        addrs.push(address(3, "cni0", local, 24));
        routes.extend(connected(subnet, "cni0", local));
    }
    let dump = (Value::from(links), Value::from(addrs), routes);
    let mut files = netns_files(&ns, dump, 1, sysctls);
    files.push(file(&ns, DumpFile::IpNeigh, "[]"));
    files
}

/// Nodes `n1` (eth0 172.18.0.11/24, MAC 02:00:00:00:1:02) and `n2` (eth0
/// 172.18.0.12/24, MAC 02:00:00:00:2:02, and bridge cni0 10.0.1.1/24
/// holding the route to its pods) on one segment, `n2`'s sysctl.txt being
/// `n2_sysctls` after forwarding on.
pub(super) fn two_nodes_on_a_segment(n2_sysctls: &str) -> Vec<(String, String)> {
    let segment = "172.18.0.0/24";
    let mut files = node_files("n1", ("172.18.0.11", segment), None, None, ARP_DEFAULTS);
    files.extend(node_files(
        "n2",
        ("172.18.0.12", segment),
        None,
        Some(("10.0.1.0/24", "10.0.1.1")),
        n2_sysctls,
    ));
    files
}
