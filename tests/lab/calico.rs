//! Calico, done by hand exactly as the Calico CNI plugin, calico-node's
//! felix and (in BGP mode) BIRD leave a node, with the Kubernetes datastore
//! and an IPPool of `10.244.0.0/16` cut into /26 blocks:
//!
//! - IPAM: each node owns one block of the pool (a BlockAffinity), chosen
//!   at random by Calico (here fixed by the node's name), with a blackhole
//!   route for the whole block so that an unassigned address is dropped
//!   rather than sent to the default route;
//! - pods: eth0 holds the pod address as a /32, routes `169.254.1.1 dev eth0
//!   scope link` and `default via 169.254.1.1 dev eth0`; the node side is a
//!   `cali` + sha1("NAMESPACE.POD")[:11] veth with no address, MAC
//!   ee:ee:ee:ee:ee:ee, `proxy_arp=1` (it answers for 169.254.1.1 and
//!   everything else the node routes elsewhere), `proxy_delay=0`, strict
//!   `rp_filter`, and a route `POD_IP dev caliX scope link`;
//! - BGP: per remote node, BIRD's `BLOCK via NODE_IP dev eth0 proto bird`;
//! - VXLAN: `vxlan.calico` (VNI 4096, UDP 4789, MTU 50 under the host,
//!   nolearning) holding the block's first address as the VTEP address; per
//!   remote node felix programs `BLOCK via VTEP_IP dev vxlan.calico onlink`,
//!   a permanent neighbour and an FDB entry pointing at the node's address;
//! - felix's iptables in its own layout (cali-* chains hooked at the top of
//!   the built-in chains, workload dispatch, per-workload `cali-fw-`/`cali-tw-`
//!   chains, profiles, the lab's NetworkPolicy as a `cali-pi-` chain, the
//!   accept/pass mark bits 0x10000/0x20000) and its ipsets (IPAM pools,
//!   VXLAN peers, the policy's selector), natOutgoing via `cali-nat-outgoing`.
//!
//! Dual-stack (VXLAN), as felix programs an IPv6 pool in VXLAN mode beside
//! the IPv4 one: an IPv6 IPPool of /122 blocks with its own block per node
//! (and blackhole), `vxlan-v6.calico` (the same VNI and port, local = the
//! node's IPv6 address, MTU 70 under the host's, the IPv6 block's first
//! address /128) and per remote node its route `BLOCK via VTEP dev
//! vxlan-v6.calico onlink`, permanent neighbour and FDB entry to the node's
//! IPv6 address; pods get a /128 and `default via fe80::ecee:eeff:feee:eeee
//! dev eth0` (the host veth's link-local address, from its
//! ee:ee:ee:ee:ee:ee MAC) and the pods' MTU is the smaller tunnel's
//! (felix's `determinePodMTU`); felix's rules in ip6tables with its `cali60`
//! ipsets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde_json::{Map, Value, json};
use sha1::Sha1;
use sha2::{Digest, Sha256};

use skoop::net::Family;

use crate::cluster::{
    APP_NAMESPACE, CLUSTER_CIDR, CLUSTER_CIDR6, Cni, NODE_NETWORK, Node, POD_PORT, Pod,
    add_vtep_peer, hex_digest, mac,
};
use crate::kube_proxy::encode_prefix;
use crate::objects;

/// The IPPool's block size: each node's share of the pool.
const BLOCK_SIZE: u8 = 26;
/// The IPv6 IPPool's block size (Calico's default for IPv6).
const BLOCK_SIZE6: u8 = 122;
/// The VXLAN device, network identifier and UDP port felix uses by default.
pub const VTEP: &str = "vxlan.calico";
/// felix's VXLAN device for IPv6 pools (the same VNI and port).
pub const VTEP6: &str = "vxlan-v6.calico";
const VNI: u32 = 4096;
const VXLAN_PORT: u16 = 4789;
/// `vxlan-v6.calico`'s MTU: felix's default, the host's 1500 less 70 bytes
/// of VXLAN over IPv6.
const VTEP6_MTU: u16 = 1430;
/// The pods' gateway: nobody has it; the host veth answers ARP for it by proxy.
pub const POD_GATEWAY: &str = "169.254.1.1";
/// The MAC the Calico CNI plugin gives every host-side veth.
const HOST_VETH_MAC: &str = "ee:ee:ee:ee:ee:ee";
/// The pods' IPv6 gateway: the host veth's link-local address, which the
/// kernel derives from [`HOST_VETH_MAC`].
pub const POD_GATEWAY6: &str = "fe80::ecee:eeff:feee:eeee";
/// The route protocol felix programs its routes with (BIRD's is `bird`).
const FELIX_ROUTE_PROTOCOL: &str = "80";
/// felix's mark bits (`IptablesMarkMask` 0xffff0000): a policy accepted the
/// packet, a policy passed it to the profiles, and the scratch bit the raw
/// table sets on packets from workloads.
const ACCEPT_MARK: &str = "0x10000";
const PASS_MARK: &str = "0x20000";
const FROM_WORKLOAD_MARK: &str = "0x40000";
/// The lab's NetworkPolicy: ingress to the web pods only on their port, from
/// web pods and from the nodes (kubelet probes, masqueraded service traffic).
const POLICY_NAME: &str = "allow-web";
const IPPOOL_NAME: &str = "default-ipv4-ippool";
const IPPOOL_NAME6: &str = "default-ipv6-ippool";
const CALICO_VERSION: &str = "v3.29.1";

/// Calico's mode: how pod traffic crosses between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No tunnel: BIRD routes each remote block via the peer node's address.
    Bgp,
    /// `vxlanMode: Always`, felix programs the VXLAN routes (no BIRD).
    Vxlan,
}

/// A Calico cluster: how calico-node programs the nodes, and what its
/// IPPool says (which a stale node can contradict).
pub struct Calico {
    /// The topology's name in test output.
    pub name: &'static str,
    /// What the nodes are programmed for.
    pub mode: Mode,
    /// The IPPool's `natOutgoing`: felix masquerades traffic from the pool
    /// to anywhere outside every pool.
    pub nat_outgoing: bool,
    /// The mode the IPPool object says (`vxlanMode: Always` or `Never`).
    pub pool_mode: Mode,
    /// VXLAN only to nodes on another subnet, direct routes to those on the
    /// node's own (`vxlanMode: CrossSubnet`).
    pub cross_subnet: bool,
}

impl Calico {
    pub const BGP: Calico = Calico {
        name: "calico-bgp",
        mode: Mode::Bgp,
        nat_outgoing: true,
        pool_mode: Mode::Bgp,
        cross_subnet: false,
    };
    pub const VXLAN: Calico = Calico {
        name: "calico-vxlan",
        mode: Mode::Vxlan,
        nat_outgoing: true,
        pool_mode: Mode::Vxlan,
        cross_subnet: false,
    };
    /// `vxlanMode: CrossSubnet`: felix routes blocks of nodes on the node's
    /// subnet directly, the others through vxlan.calico.
    pub const VXLAN_CROSS_SUBNET: Calico = Calico {
        name: "calico-vxlan-cross-subnet",
        cross_subnet: true,
        ..Calico::VXLAN
    };
    /// The IPPool without natOutgoing: pod addresses leave the cluster as they are.
    pub const BGP_WITHOUT_NAT_OUTGOING: Calico = Calico {
        name: "calico-bgp natOutgoing false",
        nat_outgoing: false,
        ..Calico::BGP
    };
    /// The IPPool edited to `vxlanMode: Always` while the nodes still route
    /// as BGP: the kernel keeps delivering.
    pub const BGP_POOL_SAYS_VXLAN: Calico = Calico {
        name: "calico-bgp, IPPool says VXLAN",
        pool_mode: Mode::Vxlan,
        ..Calico::BGP
    };

    /// `vxlan.calico`'s MTU, and the pods' on an IPv4-only node: 1500 on
    /// the underlay, less the 50 bytes of VXLAN encapsulation where there
    /// is one.
    fn mtu(&self) -> u16 {
        match self.mode {
            Mode::Bgp => 1500,
            Mode::Vxlan => 1450,
        }
    }

    /// The pods' MTU on `node`: felix's smallest of the tunnels in use
    /// (`determinePodMTU`), `vxlan-v6.calico`'s 70 under the host's on a
    /// dual-stack node.
    fn pod_mtu(&self, node: &Node) -> u16 {
        match (self.mode, node.ip6) {
            (Mode::Vxlan, Some(_)) => VTEP6_MTU,
            _ => self.mtu(),
        }
    }

    /// The protocol the routes to blocks carry: BIRD's, or felix's own.
    fn route_protocol(&self) -> &'static str {
        match self.mode {
            Mode::Bgp => "bird",
            Mode::Vxlan => FELIX_ROUTE_PROTOCOL,
        }
    }

    /// The first block ordinal a pod gets: in VXLAN mode the node's tunnel
    /// address is allocated from its block first.
    fn first_pod_ordinal(&self) -> u32 {
        match self.mode {
            Mode::Bgp => 0,
            Mode::Vxlan => 1,
        }
    }

    /// felix's rules on `node` in a family, as `iptables-restore` (or
    /// `ip6tables-restore`) input.
    fn rules(&self, node: &Node, family: Family) -> String {
        let vxlan = self.mode == Mode::Vxlan;
        let mut rules = raw_table();
        rules.push_str(&mangle_table());
        rules.push_str(&nat_table(vxlan, self.nat_outgoing, family));
        rules.push_str(&filter_table(node, vxlan, family));
        rules
    }

    /// felix's ipsets on `node` in a family: the IPAM pools, those that
    /// masquerade, the policy's selector and the VXLAN peers.
    fn ipsets(&self, node: &Node, peers: &[&Node], family: Family) -> Vec<IpSet> {
        let (pool, address): (&str, fn(&Pod) -> Option<IpAddr>) = match family {
            Family::Ipv4 => (CLUSTER_CIDR, |pod| Some(pod.ip().into())),
            Family::Ipv6 => (CLUSTER_CIDR6, |pod| pod.ip6.map(IpAddr::from)),
        };
        let everyone = std::iter::once(node).chain(peers.iter().copied());
        let pods = everyone.flat_map(|n| n.pods.iter().filter_map(address));
        let masquerading = match self.nat_outgoing {
            true => vec![pool.to_string()],
            false => Vec::new(),
        };
        let mut sets = vec![
            IpSet::net(family, "all-ipam-pools", vec![pool.to_string()]),
            IpSet::net(family, "masq-ipam-pools", masquerading),
            IpSet {
                name: selector_ipset(family),
                kind: "hash:ip",
                family,
                members: pods.map(|ip| ip.to_string()).collect(),
            },
        ];
        if self.mode == Mode::Vxlan {
            let peers = peers.iter().filter_map(|p| match family {
                Family::Ipv4 => Some(IpAddr::from(p.ip)),
                Family::Ipv6 => p.ip6.map(IpAddr::from),
            });
            let peers = peers.map(|ip| ip.to_string()).collect();
            sets.push(IpSet::net(family, "all-vxlan-net", peers));
        }
        sets
    }
}

/// The IPAM block `node` holds: Calico picks a free /26 of the pool at
/// random (the real-components lab records which); in the scripted lab the
/// node's name picks it, so that every run is the same.
pub fn block(node: &Node) -> Ipv4Net {
    if let Some(block) = node.ipam_block {
        return block;
    }
    let digest = Sha256::digest(format!("calico-block/{}", node.name).as_bytes());
    let address = Ipv4Addr::new(10, 244, digest[0], digest[1] & 0xc0);
    Ipv4Net::new(address, BLOCK_SIZE).expect("a /26")
}

/// The VXLAN tunnel address of `node`: its block's first address.
pub fn vtep_ip(node: &Node) -> Ipv4Addr {
    block(node).network()
}

/// The IPv6 IPAM block of a dual-stack `node` (`None` on an IPv4-only
/// one): a /122 of the IPv6 pool, picked by the node's name as [`block`].
fn block6(node: &Node) -> Option<Ipv6Net> {
    node.ip6?;
    let digest = Sha256::digest(format!("calico-block6/{}", node.name).as_bytes());
    let pool: Ipv6Net = CLUSTER_CIDR6.parse().expect("the IPv6 pool");
    let offset = (u128::from(digest[0]) << 64) | (u128::from(digest[1]) << 6);
    let address = Ipv6Addr::from(u128::from(pool.network()) + offset);
    Some(Ipv6Net::new(address, BLOCK_SIZE6).expect("a /122"))
}

/// The IPv6 VXLAN tunnel address of a dual-stack `node`: its IPv6 block's
/// first address.
fn vtep_ip6(node: &Node) -> Option<Ipv6Addr> {
    block6(node).map(|block| block.network())
}

/// The MAC of `node`'s `vxlan.calico` (random in Calico, recorded in the
/// node's `projectcalico.org/VXLANTunnelMACAddr` annotation).
fn vtep_mac(node: &Node) -> String {
    mac(&format!("{}/{VTEP}", node.name))
}

/// The MAC of `node`'s `vxlan-v6.calico` (its `VXLANTunnelMACAddrV6`).
fn vtep6_mac(node: &Node) -> String {
    mac(&format!("{}/{VTEP6}", node.name))
}

impl Cni for Calico {
    fn topology_name(&self) -> &'static str {
        self.name
    }

    fn network_condition(&self) -> Option<(&'static str, &'static str)> {
        Some(("CalicoIsUp", "Calico is running on this node"))
    }

    fn pod_ip(&self, node: &Node, index: usize) -> Ipv4Addr {
        let ordinal = self.first_pod_ordinal() + u32::try_from(index).expect("few pods");
        Ipv4Addr::from(u32::from(block(node).network()) + ordinal)
    }

    fn pod_ip6(&self, node: &Node, index: usize) -> Option<Ipv6Addr> {
        let ordinal = self.first_pod_ordinal() + u32::try_from(index).expect("few pods");
        block6(node).map(|block| Ipv6Addr::from(u128::from(block.network()) + u128::from(ordinal)))
    }

    /// libcalico-go's `VethNameForWorkload`: "cali" and the first 11 hex
    /// digits of the SHA-1 of "NAMESPACE.POD".
    fn host_veth(&self, namespace: &str, name: &str) -> String {
        let digest = Sha1::digest(format!("{namespace}.{name}").as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("cali{}", &hex[..11])
    }

    fn pod_annotations(&self, pod: &Pod) -> Map<String, Value> {
        let address = format!("{}/32", pod.ip());
        let addresses = match pod.ip6 {
            Some(ip6) => format!("{address},{ip6}/128"),
            None => address.clone(),
        };
        let mut annotations = Map::new();
        annotations.insert(
            "cni.projectcalico.org/containerID".into(),
            container_id(pod).into(),
        );
        annotations.insert("cni.projectcalico.org/podIP".into(), address.into());
        annotations.insert("cni.projectcalico.org/podIPs".into(), addresses.into());
        annotations
    }

    fn setup_node(&self, node: &Node) {
        let ns = &node.ns;
        ns.ip(&format!(
            "route add blackhole {} proto {}",
            block(node),
            self.route_protocol()
        ));
        if self.mode != Mode::Vxlan {
            return;
        }
        ns.ip(&format!(
            "link add {VTEP} address {} mtu {} type vxlan id {VNI} local {} dev eth0 dstport {VXLAN_PORT} nolearning",
            vtep_mac(node),
            self.mtu(),
            node.ip
        ));
        ns.ip(&format!("addr add {}/32 dev {VTEP}", vtep_ip(node)));
        ns.ip(&format!("link set {VTEP} up"));
        if let (Some(ip6), Some(block6), Some(vtep6)) = (node.ip6, block6(node), vtep_ip6(node)) {
            ns.ip(&format!(
                "-6 route add blackhole {block6} proto {}",
                self.route_protocol()
            ));
            ns.ip(&format!(
                "link add {VTEP6} address {} mtu {VTEP6_MTU} type vxlan id {VNI} local {ip6} dev eth0 dstport {VXLAN_PORT} nolearning",
                vtep6_mac(node),
            ));
            // felix adds the tunnel address as a /128, with duplicate
            // address detection (the build waits for it).
            ns.ip(&format!("-6 addr add {vtep6}/128 dev {VTEP6}"));
            ns.ip(&format!("link set {VTEP6} up"));
        }
    }

    fn attach_pod(&self, node: &Node, pod: &mut Pod) {
        let veth = &pod.host_veth;
        let mtu = self.pod_mtu(node);
        node.ns.ip(&format!(
            "link add {veth} address {HOST_VETH_MAC} mtu {mtu} type veth peer name eth0 address {} mtu {mtu} netns {}",
            mac(&format!("{}/{}/eth0", pod.namespace, pod.name)),
            pod.ns.name
        ));
        // What the CNI plugin (`configureSysctls`, before it sets the veth
        // up) and felix's endpoint manager write for the host veth, per
        // family of the pod's addresses.
        let mut settings = vec![
            format!("net.ipv4.conf.{veth}.rp_filter=1"),
            format!("net.ipv4.conf.{veth}.route_localnet=1"),
            format!("net.ipv4.neigh.{veth}.proxy_delay=0"),
            format!("net.ipv4.conf.{veth}.proxy_arp=1"),
            format!("net.ipv4.conf.{veth}.forwarding=1"),
        ];
        if pod.ip6.is_some() {
            settings.extend([
                format!("net.ipv6.conf.{veth}.accept_dad=0"),
                format!("net.ipv6.conf.{veth}.disable_ipv6=0"),
                format!("net.ipv6.conf.{veth}.proxy_ndp=1"),
                format!("net.ipv6.conf.{veth}.forwarding=1"),
            ]);
        }
        settings.push(format!("net.ipv6.conf.{veth}.accept_ra=0"));
        for setting in settings {
            node.ns.run(&["sysctl", "-qw", &setting]);
        }
        node.ns.ip(&format!("link set {veth} up"));
        node.ns
            .ip(&format!("route add {} dev {veth} scope link", pod.ip()));

        if pod.ip6.is_some() {
            // No duplicate address detection on a point-to-point link.
            pod.ns
                .run(&["sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0"]);
        }
        pod.ns.ip(&format!("addr add {}/32 dev eth0", pod.ip()));
        pod.ns.ip("link set eth0 up");
        pod.ns
            .ip(&format!("route add {POD_GATEWAY} dev eth0 scope link"));
        pod.ns
            .ip(&format!("route add default via {POD_GATEWAY} dev eth0"));
        if let Some(ip6) = pod.ip6 {
            node.ns
                .ip(&format!("-6 route add {ip6}/128 dev {veth} scope link"));
            pod.ns.ip(&format!("-6 addr add {ip6}/128 dev eth0"));
            pod.ns
                .ip(&format!("-6 route add default via {POD_GATEWAY6} dev eth0"));
        }
    }

    /// The routes BIRD or felix program to the peers' blocks, and felix's
    /// ipsets, which need every node's addresses and pods.
    fn connect(&self, node: &Node, peers: &[&Node]) {
        let protocol = self.route_protocol();
        for peer in peers {
            let same_subnet = node.subnet() == peer.subnet();
            match self.mode {
                // BIRD's mesh sessions are multihop with `gateway recursive`:
                // a peer on another subnet is reached through the node's
                // own gateway, and so is every block it advertises.
                Mode::Bgp => node.ns.ip(&format!(
                    "route add {} via {} dev eth0 proto {protocol}",
                    block(peer),
                    if same_subnet {
                        peer.ip
                    } else {
                        node.underlay_gateway()
                    }
                )),
                // felix gives every remote VTEP its neighbour and FDB
                // entries; with CrossSubnet, a block of a node on the same
                // subnet is routed directly all the same.
                Mode::Vxlan => {
                    let peer_vtep = vtep_ip(peer);
                    let peer_mac = vtep_mac(peer);
                    let (peer_vtep, peer_ip) = (peer_vtep.to_string(), peer.ip.to_string());
                    add_vtep_peer(&node.ns, VTEP, &peer_vtep, &peer_mac, &peer_ip);
                    let route = match self.cross_subnet && same_subnet {
                        true => format!("{} via {} dev eth0", block(peer), peer.ip),
                        false => format!("{} via {peer_vtep} dev {VTEP} onlink", block(peer)),
                    };
                    node.ns.ip(&format!("route add {route} proto {protocol}"));
                }
            }
        }

        // BIRD's IPv6 mesh: each peer's IPv6 block via the peer's IPv6
        // address (its `IP6`), on the nodes' one subnet.
        if self.mode == Mode::Bgp && node.ip6.is_some() {
            for peer in peers {
                if let (Some(peer_ip6), Some(peer_block6)) = (peer.ip6, block6(peer)) {
                    node.ns.ip(&format!(
                        "-6 route add {peer_block6} via {peer_ip6} dev eth0 proto {protocol}"
                    ));
                }
            }
        }
        if self.mode == Mode::Vxlan && node.ip6.is_some() {
            for peer in peers {
                let (Some(peer_ip6), Some(peer_block6), Some(peer_vtep6)) =
                    (peer.ip6, block6(peer), vtep_ip6(peer))
                else {
                    continue;
                };
                let peer_vtep6 = peer_vtep6.to_string();
                add_vtep_peer(
                    &node.ns,
                    VTEP6,
                    &peer_vtep6,
                    &vtep6_mac(peer),
                    &peer_ip6.to_string(),
                );
                node.ns.ip(&format!(
                    "-6 route add {peer_block6} via {peer_vtep6} dev {VTEP6} onlink proto {protocol}"
                ));
            }
        }

        let families = match node.ip6 {
            Some(_) => vec![Family::Ipv4, Family::Ipv6],
            None => vec![Family::Ipv4],
        };
        for family in families {
            self.ipsets(node, peers, family)
                .iter()
                .for_each(|set| set.create(node));
        }
    }

    fn iptables_rules(&self, node: &Node) -> String {
        self.rules(node, Family::Ipv4)
    }

    fn ip6tables_rules(&self, node: &Node) -> String {
        match node.ip6 {
            Some(_) => self.rules(node, Family::Ipv6),
            None => String::new(),
        }
    }

    fn node_annotations(&self, node: &Node) -> Map<String, Value> {
        let mut annotations = Map::new();
        annotations.insert(
            "projectcalico.org/IPv4Address".into(),
            format!("{}/24", node.ip).into(),
        );
        if self.mode == Mode::Vxlan {
            annotations.insert(
                "projectcalico.org/IPv4VXLANTunnelAddr".into(),
                vtep_ip(node).to_string().into(),
            );
            annotations.insert(
                "projectcalico.org/VXLANTunnelMACAddr".into(),
                vtep_mac(node).into(),
            );
        }
        if let Some(ip6) = node.ip6 {
            annotations.insert(
                "projectcalico.org/IPv6Address".into(),
                format!("{ip6}/64").into(),
            );
        }
        if let (Mode::Vxlan, Some(vtep6)) = (self.mode, vtep_ip6(node)) {
            annotations.insert(
                "projectcalico.org/IPv6VXLANTunnelAddr".into(),
                vtep6.to_string().into(),
            );
            annotations.insert(
                "projectcalico.org/VXLANTunnelMACAddrV6".into(),
                vtep6_mac(node).into(),
            );
        }
        annotations
    }

    fn objects(&self, nodes: &[Node]) -> Vec<Value> {
        let vxlan_mode = match self.pool_mode {
            Mode::Bgp => "Never",
            Mode::Vxlan if self.cross_subnet => "CrossSubnet",
            Mode::Vxlan => "Always",
        };
        let pool = |name: &str, cidr: &str, block_size: u8| {
            json!({
                "apiVersion": "crd.projectcalico.org/v1",
                "kind": "IPPool",
                "metadata": objects::metadata("IPPool", None, name, json!({})),
                "spec": {
                    "allowedUses": ["Workload", "Tunnel"],
                    "blockSize": block_size,
                    "cidr": cidr,
                    "ipipMode": "Never",
                    "natOutgoing": self.nat_outgoing,
                    "nodeSelector": "all()",
                    "vxlanMode": vxlan_mode,
                },
            })
        };
        let dual_stack = nodes.iter().any(|n| n.ip6.is_some());
        let mut objects = vec![
            pool(IPPOOL_NAME, CLUSTER_CIDR, BLOCK_SIZE),
            json!({
                "apiVersion": "crd.projectcalico.org/v1",
                "kind": "FelixConfiguration",
                "metadata": objects::metadata("FelixConfiguration", None, "default", json!({})),
                "spec": {
                    "bpfEnabled": false,
                    "floatingIPs": "Disabled",
                    "logSeverityScreen": "Info",
                    "reportingInterval": "0s",
                },
            }),
            config_map(self.mode, dual_stack),
            daemon_set(self.mode, nodes.len(), dual_stack),
            network_policy(),
        ];
        if dual_stack {
            objects.push(pool(IPPOOL_NAME6, CLUSTER_CIDR6, BLOCK_SIZE6));
        }
        for node in nodes {
            let tunnel = self.mode == Mode::Vxlan;
            let blocks = [
                Some((
                    IpNet::from(block(node)),
                    pod_ips(node, |p| Some(p.ip().into())),
                )),
                block6(node).map(|b| (IpNet::from(b), pod_ips(node, |p| p.ip6.map(IpAddr::from)))),
            ];
            for (block, pods) in blocks.into_iter().flatten() {
                objects.push(block_affinity(node, block));
                objects.push(ipam_block(node, block, tunnel, &pods));
            }
        }
        objects
    }
}

/// `node`'s pods with their address of a family (`address`), for its IPAM
/// block of that family.
fn pod_ips(node: &Node, address: fn(&Pod) -> Option<IpAddr>) -> Vec<(&Pod, IpAddr)> {
    node.pods
        .iter()
        .filter_map(|pod| address(pod).map(|ip| (pod, ip)))
        .collect()
}

/// The id of the container the CNI plugin set up for `pod`.
fn container_id(pod: &Pod) -> String {
    hex_digest(&format!("container/{}/{}", pod.namespace, pod.name))
}

/// A felix-style identifier: the unpadded URL-safe base64 of a SHA-256,
/// cut to `chars` (felix hashes rules, long chain names and selectors so).
fn felix_id(text: &str, chars: usize) -> String {
    const BASE64_URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    encode_prefix(&Sha256::digest(text.as_bytes()), BASE64_URL, chars)
}

/// felix's name for the lab policy's chain: `cali-pi-` and the policy's
/// tier/name, hashed (`_` + 19 characters) when it would exceed 28.
fn policy_chain() -> String {
    format!(
        "cali-pi-_{}",
        felix_id(&format!("default/knp.default.{POLICY_NAME}"), 19)
    )
}

/// The ipset felix keeps for the policy's `from` selector (every pod with
/// `app == 'web'` in the namespace): `cali40s:` and the selector's hash.
fn selector_ipset(family: Family) -> String {
    let selector = format!(
        "(projectcalico.org/orchestrator == 'k8s' && app == 'web') && projectcalico.org/namespace == '{APP_NAMESPACE}'"
    );
    format!("{}s:{}", ipset_prefix(family), felix_id(&selector, 23))
}

/// felix's VXLAN device of a family.
fn vtep_device(family: Family) -> &'static str {
    match family {
        Family::Ipv4 => VTEP,
        Family::Ipv6 => VTEP6,
    }
}

/// The prefix of felix's ipset names in a family: `cali40`, `cali60`.
fn ipset_prefix(family: Family) -> &'static str {
    match family {
        Family::Ipv4 => "cali40",
        Family::Ipv6 => "cali60",
    }
}

/// One of felix's ipsets.
struct IpSet {
    name: String,
    kind: &'static str,
    family: Family,
    members: Vec<String>,
}

impl IpSet {
    /// A `hash:net` set of a family named `cali40<suffix>` or `cali60<suffix>`.
    fn net(family: Family, suffix: &str, members: Vec<String>) -> IpSet {
        IpSet {
            name: format!("{}{suffix}", ipset_prefix(family)),
            kind: "hash:net",
            family,
            members,
        }
    }

    fn create(&self, node: &Node) {
        let family = match self.family {
            Family::Ipv4 => "inet",
            Family::Ipv6 => "inet6",
        };
        node.ns.run(&[
            "ipset", "create", &self.name, self.kind, "family", family, "maxelem", "1048576",
        ]);
        for member in &self.members {
            node.ns.run(&["ipset", "add", &self.name, member]);
        }
    }
}

/// One table of felix's rules, as `iptables-restore --noflush` input: felix
/// inserts its hooks at the top of the built-in chains and tags every rule
/// with a `cali:<hash>` comment.
struct Table {
    name: &'static str,
    chains: Vec<String>,
    rules: Vec<String>,
}

impl Table {
    fn new(name: &'static str, chains: &[&str]) -> Table {
        Table {
            name,
            chains: chains.iter().map(|c| c.to_string()).collect(),
            rules: Vec::new(),
        }
    }

    fn chain(&mut self, chain: &str) {
        self.chains.push(chain.to_string());
    }

    /// A rule at `position` (`-A CHAIN`, `-I CHAIN 1`), tagged like felix's.
    fn rule(&mut self, position: &str, body: &str) {
        let id = felix_id(
            &format!("{}/{position}/{}/{body}", self.name, self.rules.len()),
            16,
        );
        self.rules.push(format!(
            "{position} -m comment --comment \"cali:{id}\" {body}"
        ));
    }

    /// felix's hook into a built-in chain, inserted at its top.
    fn hook(&mut self, builtin: &str, chain: &str) {
        self.rule(&format!("-I {builtin} 1"), &format!("-j {chain}"));
    }

    fn append(&mut self, chain: &str, body: &str) {
        self.rule(&format!("-A {chain}"), body);
    }

    fn render(&self) -> String {
        let mut text = format!("*{}\n", self.name);
        for chain in &self.chains {
            text.push_str(&format!(":{chain} - [0:0]\n"));
        }
        for rule in &self.rules {
            text.push_str(rule.trim_end());
            text.push('\n');
        }
        text.push_str("COMMIT\n");
        text
    }
}

/// Marks a packet as accepted by policy.
fn set_accept() -> String {
    format!("-j MARK --set-xmark {ACCEPT_MARK}/{ACCEPT_MARK}")
}

/// Matches a packet a policy or profile accepted.
fn if_accepted() -> String {
    format!("-m mark --mark {ACCEPT_MARK}/{ACCEPT_MARK}")
}

/// raw: clear felix's bits, mark packets from workloads and drop those that
/// fail the strict reverse-path check (anti-spoofing).
fn raw_table() -> String {
    let mut t = Table::new(
        "raw",
        &[
            "cali-OUTPUT",
            "cali-PREROUTING",
            "cali-from-host-endpoint",
            "cali-rpf-skip",
            "cali-to-host-endpoint",
        ],
    );
    t.hook("PREROUTING", "cali-PREROUTING");
    t.hook("OUTPUT", "cali-OUTPUT");
    t.append("cali-OUTPUT", "-j MARK --set-xmark 0x0/0xf0000");
    t.append("cali-OUTPUT", "-j cali-to-host-endpoint");
    t.append("cali-OUTPUT", &format!("{} -j ACCEPT", if_accepted()));
    t.append("cali-PREROUTING", "-j MARK --set-xmark 0x0/0xf0000");
    let from_workload = format!("-m mark --mark {FROM_WORKLOAD_MARK}/{FROM_WORKLOAD_MARK}");
    t.append(
        "cali-PREROUTING",
        &format!("-i cali+ -j MARK --set-xmark {FROM_WORKLOAD_MARK}/{FROM_WORKLOAD_MARK}"),
    );
    t.append(
        "cali-PREROUTING",
        &format!("{from_workload} -j cali-rpf-skip"),
    );
    t.append(
        "cali-PREROUTING",
        &format!("{from_workload} -m rpfilter --validmark --invert -j DROP"),
    );
    t.append(
        "cali-PREROUTING",
        &format!("-m mark --mark 0x0/{FROM_WORKLOAD_MARK} -j cali-from-host-endpoint"),
    );
    t.append("cali-PREROUTING", &format!("{} -j ACCEPT", if_accepted()));
    t.render()
}

/// mangle: host endpoint policy (none in the lab) before routing and after.
fn mangle_table() -> String {
    let mut t = Table::new(
        "mangle",
        &[
            "cali-POSTROUTING",
            "cali-PREROUTING",
            "cali-from-host-endpoint",
            "cali-to-host-endpoint",
        ],
    );
    t.hook("PREROUTING", "cali-PREROUTING");
    t.hook("POSTROUTING", "cali-POSTROUTING");
    let host_accepted = format!(
        "-m comment --comment \"Host endpoint policy accepted packet.\" {}",
        if_accepted()
    );
    t.append("cali-POSTROUTING", &format!("{} -j RETURN", if_accepted()));
    t.append("cali-POSTROUTING", "-j MARK --set-xmark 0x0/0xf0000");
    t.append(
        "cali-POSTROUTING",
        "-m conntrack --ctstate DNAT -j cali-to-host-endpoint",
    );
    t.append("cali-POSTROUTING", &format!("{host_accepted} -j RETURN"));
    t.append(
        "cali-PREROUTING",
        "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
    );
    t.append("cali-PREROUTING", &format!("{} -j ACCEPT", if_accepted()));
    t.append("cali-PREROUTING", "-j cali-from-host-endpoint");
    t.append("cali-PREROUTING", &format!("{host_accepted} -j ACCEPT"));
    t.render()
}

/// nat: floating IPs (none) and the IPPool's natOutgoing: traffic from a
/// masquerading pool to anywhere outside every pool is masqueraded (felix
/// leaves `cali-nat-outgoing` empty when no pool has natOutgoing).
fn nat_table(vxlan: bool, nat_outgoing: bool, family: Family) -> String {
    let sets = ipset_prefix(family);
    let mut t = Table::new(
        "nat",
        &[
            "cali-OUTPUT",
            "cali-POSTROUTING",
            "cali-PREROUTING",
            "cali-fip-dnat",
            "cali-fip-snat",
            "cali-nat-outgoing",
        ],
    );
    t.hook("PREROUTING", "cali-PREROUTING");
    t.hook("OUTPUT", "cali-OUTPUT");
    t.hook("POSTROUTING", "cali-POSTROUTING");
    t.append("cali-OUTPUT", "-j cali-fip-dnat");
    t.append("cali-POSTROUTING", "-j cali-fip-snat");
    t.append("cali-POSTROUTING", "-j cali-nat-outgoing");
    if vxlan {
        // The node's own traffic into the tunnel with a source the other
        // end cannot route back to takes the tunnel address.
        t.append(
            "cali-POSTROUTING",
            &format!("-o {} -m addrtype ! --src-type LOCAL --limit-iface-out -m addrtype --src-type LOCAL -j MASQUERADE --random-fully", vtep_device(family)),
        );
    }
    t.append("cali-PREROUTING", "-j cali-fip-dnat");
    if nat_outgoing {
        t.append(
            "cali-nat-outgoing",
            &format!("-m set --match-set {sets}masq-ipam-pools src -m set ! --match-set {sets}all-ipam-pools dst -j MASQUERADE --random-fully"),
        );
    }
    t.render()
}

/// filter: workload dispatch, per-workload chains with the profiles and the
/// lab's policy, host endpoints (none), VXLAN from known hosts only.
fn filter_table(node: &Node, vxlan: bool, family: Family) -> String {
    let sets = ipset_prefix(family);
    let version = match family {
        Family::Ipv4 => "IPv4",
        Family::Ipv6 => "IPv6",
    };
    let mut t = Table::new(
        "filter",
        &[
            "cali-FORWARD",
            "cali-INPUT",
            "cali-OUTPUT",
            "cali-cidr-block",
            "cali-from-hep-forward",
            "cali-from-host-endpoint",
            "cali-from-wl-dispatch",
            "cali-to-hep-forward",
            "cali-to-host-endpoint",
            "cali-to-wl-dispatch",
            "cali-wl-to-host",
        ],
    );
    let namespace_profile = format!("kns.{APP_NAMESPACE}");
    let account_profile = format!("ksa.{APP_NAMESPACE}.default");
    let policy = policy_chain();
    for profile in [&namespace_profile, &account_profile] {
        t.chain(&format!("cali-pri-{profile}"));
        t.chain(&format!("cali-pro-{profile}"));
    }
    t.chain(&policy);
    for pod in &node.pods {
        t.chain(&format!("cali-fw-{}", pod.host_veth));
        t.chain(&format!("cali-tw-{}", pod.host_veth));
    }

    t.hook("INPUT", "cali-INPUT");
    t.hook("FORWARD", "cali-FORWARD");
    t.hook("OUTPUT", "cali-OUTPUT");
    // Appended, after kube-proxy's rules: what felix's chains accepted.
    t.append(
        "FORWARD",
        &format!(
            "-m comment --comment \"Policy explicitly accepted packet.\" {} -j ACCEPT",
            if_accepted()
        ),
    );
    t.append("FORWARD", &set_accept());

    t.append("cali-FORWARD", "-j MARK --set-xmark 0x0/0xe0000");
    t.append(
        "cali-FORWARD",
        &format!("-m mark --mark 0x0/{ACCEPT_MARK} -j cali-from-hep-forward"),
    );
    t.append("cali-FORWARD", "-i cali+ -j cali-from-wl-dispatch");
    t.append("cali-FORWARD", "-o cali+ -j cali-to-wl-dispatch");
    t.append("cali-FORWARD", "-j cali-to-hep-forward");
    t.append("cali-FORWARD", "-j cali-cidr-block");

    let host_accepted = format!(
        "-m comment --comment \"Host endpoint policy accepted packet.\" {} -j ACCEPT",
        if_accepted()
    );
    if vxlan {
        t.append(
            "cali-INPUT",
            &format!("-p udp -m comment --comment \"Allow {version} VXLAN packets from allowed hosts\" -m multiport --dports {VXLAN_PORT} -m set --match-set {sets}all-vxlan-net src -m addrtype --dst-type LOCAL -j ACCEPT"),
        );
        t.append(
            "cali-INPUT",
            &format!("-p udp -m comment --comment \"Drop {version} VXLAN packets from non-allowed hosts\" -m multiport --dports {VXLAN_PORT} -m addrtype --dst-type LOCAL -j DROP"),
        );
    }
    t.append("cali-INPUT", "-i cali+ -g cali-wl-to-host");
    t.append("cali-INPUT", &format!("{} -j ACCEPT", if_accepted()));
    t.append("cali-INPUT", "-j MARK --set-xmark 0x0/0xf0000");
    t.append("cali-INPUT", "-j cali-from-host-endpoint");
    t.append("cali-INPUT", &host_accepted);

    t.append("cali-OUTPUT", &format!("{} -j ACCEPT", if_accepted()));
    t.append("cali-OUTPUT", "-o cali+ -j RETURN");
    if vxlan {
        t.append(
            "cali-OUTPUT",
            &format!("-p udp -m comment --comment \"Allow {version} VXLAN packets to other allowed hosts\" -m multiport --dports {VXLAN_PORT} -m addrtype --src-type LOCAL -m set --match-set {sets}all-vxlan-net dst -j ACCEPT"),
        );
    }
    t.append("cali-OUTPUT", "-j MARK --set-xmark 0x0/0xf0000");
    t.append(
        "cali-OUTPUT",
        "-m conntrack ! --ctstate DNAT -j cali-to-host-endpoint",
    );
    t.append("cali-OUTPUT", &host_accepted);

    for pod in &node.pods {
        let veth = &pod.host_veth;
        t.append(
            "cali-from-wl-dispatch",
            &format!("-i {veth} -g cali-fw-{veth}"),
        );
    }
    let unknown = "-m comment --comment \"Unknown interface\" -j DROP";
    t.append("cali-from-wl-dispatch", unknown);
    for pod in &node.pods {
        let veth = &pod.host_veth;
        t.append(
            "cali-to-wl-dispatch",
            &format!("-o {veth} -g cali-tw-{veth}"),
        );
    }
    t.append("cali-to-wl-dispatch", unknown);
    if family == Family::Ipv6 {
        // Neighbour discovery, MLD and router solicitations from workloads
        // reach the host before any policy (felix's `ICMPv6Filter`).
        for icmp_type in [130, 131, 132, 133, 135, 136] {
            t.append(
                "cali-wl-to-host",
                &format!("-p ipv6-icmp -m icmp6 --icmpv6-type {icmp_type} -j ACCEPT"),
            );
        }
    }
    t.append("cali-wl-to-host", "-j cali-from-wl-dispatch");
    t.append(
        "cali-wl-to-host",
        "-m comment --comment \"Configured DefaultEndpointToHostAction\" -j ACCEPT",
    );

    for pod in &node.pods {
        workload_chains(
            &mut t,
            &pod.host_veth,
            &policy,
            &[&namespace_profile, &account_profile],
        );
    }

    // Profiles: the namespace's allows everything, the service account's
    // has no rules.
    for (profile, direction, chain) in [
        (&namespace_profile, "ingress", "pri"),
        (&namespace_profile, "egress", "pro"),
    ] {
        t.append(
            &format!("cali-{chain}-{profile}"),
            &format!(
                "-m comment --comment \"Profile {profile} {direction}\" {}",
                set_accept()
            ),
        );
    }
    for (direction, chain) in [("ingress", "pri"), ("egress", "pro")] {
        t.append(
            &format!("cali-{chain}-{account_profile}"),
            &format!("-m comment --comment \"Profile {account_profile} {direction}\""),
        );
    }

    // The policy: one felix rule per peer of the Kubernetes rule.
    let comment = format!(
        "-m comment --comment \"Policy {APP_NAMESPACE}/knp.default.{POLICY_NAME} ingress\""
    );
    let port = format!("-m multiport --dports {POD_PORT}");
    t.append(
        &policy,
        &format!(
            "-p tcp {comment} -m set --match-set {} src {port} {}",
            selector_ipset(family),
            set_accept()
        ),
    );
    t.append(&policy, &format!("{} -j RETURN", if_accepted()));
    // felix renders a rule of IPv4 CIDRs in IPv4 only.
    if family == Family::Ipv4 {
        t.append(
            &policy,
            &format!("-p tcp {comment} -s {NODE_NETWORK} {port} {}", set_accept()),
        );
    }
    t.render()
}

/// The `cali-fw-` (from the workload) and `cali-tw-` (to it) chains of one
/// workload interface: conntrack first, then policies (ingress only in the
/// lab) and profiles, each setting the accept mark or dropping.
fn workload_chains(t: &mut Table, veth: &str, policy: &str, profiles: &[&String]) {
    let profile_accepted = format!(
        "-m comment --comment \"Return if profile accepted\" {} -j RETURN",
        if_accepted()
    );
    let no_profile = "-m comment --comment \"Drop if no profiles matched\" -j DROP";
    let clear = "-j MARK --set-xmark 0x0/0x30000";
    let conntrack = [
        "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        "-m conntrack --ctstate INVALID -j DROP",
    ];

    let from = format!("cali-fw-{veth}");
    for rule in conntrack {
        t.append(&from, rule);
    }
    t.append(&from, clear);
    t.append(
        &from,
        &format!("-p udp -m comment --comment \"Drop VXLAN encapped packets originating in workloads\" -m multiport --dports {VXLAN_PORT} -j DROP"),
    );
    t.append(
        &from,
        "-p ipencap -m comment --comment \"Drop IPinIP encapped packets originating in workloads\" -j DROP",
    );
    for profile in profiles {
        t.append(&from, &format!("-j cali-pro-{profile}"));
        t.append(&from, &profile_accepted);
    }
    t.append(&from, no_profile);

    let to = format!("cali-tw-{veth}");
    for rule in conntrack {
        t.append(&to, rule);
    }
    t.append(&to, clear);
    t.append(&to, &format!("-m mark --mark 0x0/{PASS_MARK} -j {policy}"));
    t.append(
        &to,
        &format!(
            "-m comment --comment \"Return if policy accepted\" {} -j RETURN",
            if_accepted()
        ),
    );
    t.append(
        &to,
        &format!("-m comment --comment \"Drop if no policies passed packet\" -m mark --mark 0x0/{PASS_MARK} -j DROP"),
    );
    for profile in profiles {
        t.append(&to, &format!("-j cali-pri-{profile}"));
        t.append(&to, &profile_accepted);
    }
    t.append(&to, no_profile);
}

/// The lab's NetworkPolicy, as `kubectl get networkpolicy -o yaml` shows it.
pub fn network_policy() -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": objects::metadata("NetworkPolicy", Some(APP_NAMESPACE), POLICY_NAME, json!({})),
        "spec": {
            "ingress": [{
                "from": [
                    {"podSelector": {"matchLabels": {"app": "web"}}},
                    {"ipBlock": {"cidr": NODE_NETWORK}},
                ],
                "ports": [{"port": POD_PORT, "protocol": "TCP"}],
            }],
            "podSelector": {"matchLabels": {"app": "web"}},
            "policyTypes": ["Ingress"],
        },
    })
}

/// `node`'s claim on its `block`.
fn block_affinity(node: &Node, block: IpNet) -> Value {
    let name = format!("{}-{}", node.name, cidr_name(block));
    json!({
        "apiVersion": "crd.projectcalico.org/v1",
        "kind": "BlockAffinity",
        "metadata": objects::metadata("BlockAffinity", None, &name, json!({})),
        "spec": {
            "cidr": block.to_string(),
            "deleted": "false",
            "node": node.name,
            "state": "confirmed",
        },
    })
}

/// The IPAM block `block` of `node`: which ordinal holds which handle (the
/// tunnel address first where there is one, then the `pods` in order).
fn ipam_block(node: &Node, block: IpNet, tunnel: bool, pods: &[(&Pod, IpAddr)]) -> Value {
    let size = 1usize << (block.max_prefix_len() - block.prefix_len());
    let ordinal = |ip: IpAddr| -> usize {
        let offset = match (ip, block.network()) {
            (IpAddr::V4(ip), IpAddr::V4(first)) => u128::from(u32::from(ip) - u32::from(first)),
            (IpAddr::V6(ip), IpAddr::V6(first)) => u128::from(ip) - u128::from(first),
            _ => unreachable!("a pod's address of the block's family"),
        };
        usize::try_from(offset).expect("an ordinal")
    };
    let mut allocations = vec![Value::Null; size];
    let mut attributes = Vec::new();
    if tunnel {
        allocations[0] = json!(attributes.len());
        attributes.push(json!({
            "handle_id": format!("vxlan-tunnel-addr-{}", node.name),
            "secondary": {"node": node.name, "type": "vxlanTunnelAddress"},
        }));
    }
    for (pod, ip) in pods {
        allocations[ordinal(*ip)] = json!(attributes.len());
        attributes.push(json!({
            "handle_id": format!("k8s-pod-network.{}", container_id(pod)),
            "secondary": {
                "namespace": pod.namespace,
                "node": node.name,
                "pod": pod.name,
                "timestamp": "2025-06-02 09:00:05.000000000 +0000 UTC",
            },
        }));
    }
    let unallocated: Vec<usize> = (0..size).filter(|i| allocations[*i].is_null()).collect();
    json!({
        "apiVersion": "crd.projectcalico.org/v1",
        "kind": "IPAMBlock",
        "metadata": objects::metadata("IPAMBlock", None, &cidr_name(block), json!({})),
        "spec": {
            "affinity": format!("host:{}", node.name),
            "allocations": allocations,
            "attributes": attributes,
            "cidr": block.to_string(),
            "deleted": false,
            "sequenceNumber": 1748854800000000000u64,
            "strictAffinity": false,
            "unallocated": unallocated,
        },
    })
}

/// A CIDR as Calico writes it in object names: `10-244-84-128-26`,
/// `fd00-10-244-3c--1c0-122`.
fn cidr_name(cidr: IpNet) -> String {
    cidr.to_string().replace(['.', ':', '/'], "-")
}

/// calico.yaml's `calico-config` ConfigMap (the manifest install).
fn config_map(mode: Mode, dual_stack: bool) -> Value {
    let backend = match mode {
        Mode::Bgp => "bird",
        Mode::Vxlan => "vxlan",
    };
    // calico.yaml's dual-stack edit: calico-ipam assigns an address of each family.
    let assign = match dual_stack {
        true => ",\n          \"assign_ipv4\": \"true\",\n          \"assign_ipv6\": \"true\"",
        false => "",
    };
    let cni_network_config = r#"{
  "name": "k8s-pod-network",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "calico",
      "log_level": "info",
      "log_file_path": "/var/log/calico/cni/cni.log",
      "datastore_type": "kubernetes",
      "nodename": "__KUBERNETES_NODE_NAME__",
      "mtu": __CNI_MTU__,
      "ipam": {
          "type": "calico-ipam"__ASSIGN__
      },
      "policy": {
          "type": "k8s"
      },
      "kubernetes": {
          "kubeconfig": "__KUBECONFIG_FILEPATH__"
      }
    },
    {
      "type": "portmap",
      "snat": true,
      "capabilities": {"portMappings": true}
    },
    {
      "type": "bandwidth",
      "capabilities": {"bandwidth": true}
    }
  ]
}"#;
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": objects::metadata("ConfigMap", Some("kube-system"), "calico-config", json!({})),
        "data": {
            "calico_backend": backend,
            "cni_network_config": cni_network_config.replace("__ASSIGN__", assign),
            "typha_service_name": "none",
            "veth_mtu": "0",
        },
    })
}

/// calico.yaml's `calico-node` DaemonSet in kube-system, on all `nodes`.
fn daemon_set(mode: Mode, nodes: usize, dual_stack: bool) -> Value {
    let image = format!("docker.io/calico/node:{CALICO_VERSION}");
    let cni_image = format!("docker.io/calico/cni:{CALICO_VERSION}");
    let labels = json!({"k8s-app": "calico-node"});
    let (vxlan_mode, cluster_type, probe) = match mode {
        Mode::Bgp => ("Never", "k8s,bgp", vec!["-felix-live", "-bird-live"]),
        Mode::Vxlan => ("Always", "k8s", vec!["-felix-live"]),
    };
    let mut liveness = vec!["/bin/calico-node"];
    liveness.extend(probe);
    let readiness = match mode {
        Mode::Bgp => vec!["/bin/calico-node", "-felix-ready", "-bird-ready"],
        Mode::Vxlan => vec!["/bin/calico-node", "-felix-ready"],
    };
    // calico.yaml's dual-stack edit: an IPv6 address autodetected, felix's
    // IPv6 support, and the IPv6 pool in the IPv4 pool's mode.
    let (ipv6_pool_vxlan, ipv6_support) = match dual_stack {
        true => (vxlan_mode, "true"),
        false => ("Never", "false"),
    };
    let from_config = |key: &str| json!({"configMapKeyRef": {"key": key, "name": "calico-config"}});
    let mut daemon_set = json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": objects::metadata("DaemonSet", Some("kube-system"), "calico-node", labels.clone()),
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{
                        "name": "calico-node",
                        "image": image,
                        "env": [
                            {"name": "DATASTORE_TYPE", "value": "kubernetes"},
                            {"name": "WAIT_FOR_DATASTORE", "value": "true"},
                            {"name": "NODENAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                            {"name": "CALICO_NETWORKING_BACKEND", "valueFrom": from_config("calico_backend")},
                            {"name": "CLUSTER_TYPE", "value": cluster_type},
                            {"name": "IP", "value": "autodetect"},
                            {"name": "CALICO_IPV4POOL_IPIP", "value": "Never"},
                            {"name": "CALICO_IPV4POOL_VXLAN", "value": vxlan_mode},
                            {"name": "CALICO_IPV6POOL_VXLAN", "value": ipv6_pool_vxlan},
                            {"name": "FELIX_IPINIPMTU", "valueFrom": from_config("veth_mtu")},
                            {"name": "FELIX_VXLANMTU", "valueFrom": from_config("veth_mtu")},
                            {"name": "FELIX_WIREGUARDMTU", "valueFrom": from_config("veth_mtu")},
                            {"name": "CALICO_IPV4POOL_CIDR", "value": CLUSTER_CIDR},
                            {"name": "CALICO_DISABLE_FILE_LOGGING", "value": "true"},
                            {"name": "FELIX_DEFAULTENDPOINTTOHOSTACTION", "value": "ACCEPT"},
                            {"name": "FELIX_IPV6SUPPORT", "value": ipv6_support},
                            {"name": "FELIX_HEALTHENABLED", "value": "true"}
                        ],
                        "envFrom": [{"configMapRef": {"name": "kubernetes-services-endpoint", "optional": true}}],
                        "imagePullPolicy": "IfNotPresent",
                        "livenessProbe": {
                            "exec": {"command": liveness},
                            "failureThreshold": 6,
                            "initialDelaySeconds": 10,
                            "periodSeconds": 10,
                            "successThreshold": 1,
                            "timeoutSeconds": 10
                        },
                        "readinessProbe": {
                            "exec": {"command": readiness},
                            "failureThreshold": 3,
                            "periodSeconds": 10,
                            "successThreshold": 1,
                            "timeoutSeconds": 10
                        },
                        "resources": {"requests": {"cpu": "250m"}},
                        "securityContext": {"privileged": true},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "volumeMounts": [
                            {"mountPath": "/host/etc/cni/net.d", "name": "cni-net-dir"},
                            {"mountPath": "/lib/modules", "name": "lib-modules", "readOnly": true},
                            {"mountPath": "/run/xtables.lock", "name": "xtables-lock"},
                            {"mountPath": "/var/run/calico", "name": "var-run-calico"},
                            {"mountPath": "/var/lib/calico", "name": "var-lib-calico"},
                            {"mountPath": "/var/run/nodeagent", "name": "policysync"},
                            {"mountPath": "/var/log/calico/cni", "name": "cni-log-dir", "readOnly": true}
                        ]
                    }],
                    "initContainers": [
                        {
                            "name": "upgrade-ipam",
                            "image": cni_image,
                            "command": ["/opt/cni/bin/calico-ipam", "-upgrade"],
                            "env": [
                                {"name": "KUBERNETES_NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                                {"name": "CALICO_NETWORKING_BACKEND", "valueFrom": from_config("calico_backend")}
                            ],
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {},
                            "securityContext": {"privileged": true},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                            "volumeMounts": [
                                {"mountPath": "/var/lib/cni/networks", "name": "host-local-net-dir"},
                                {"mountPath": "/host/opt/cni/bin", "name": "cni-bin-dir"}
                            ]
                        },
                        {
                            "name": "install-cni",
                            "image": cni_image,
                            "command": ["/opt/cni/bin/install"],
                            "env": [
                                {"name": "CNI_CONF_NAME", "value": "10-calico.conflist"},
                                {"name": "CNI_NETWORK_CONFIG", "valueFrom": from_config("cni_network_config")},
                                {"name": "KUBERNETES_NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
                                {"name": "CNI_MTU", "valueFrom": from_config("veth_mtu")},
                                {"name": "SLEEP", "value": "false"}
                            ],
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {},
                            "securityContext": {"privileged": true},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                            "volumeMounts": [
                                {"mountPath": "/host/opt/cni/bin", "name": "cni-bin-dir"},
                                {"mountPath": "/host/etc/cni/net.d", "name": "cni-net-dir"}
                            ]
                        }
                    ],
                    "dnsPolicy": "ClusterFirst",
                    "hostNetwork": true,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "serviceAccount": "calico-node",
                    "serviceAccountName": "calico-node",
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": [
                        {"effect": "NoSchedule", "operator": "Exists"},
                        {"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"effect": "NoExecute", "operator": "Exists"}
                    ],
                    "volumes": [
                        {"hostPath": {"path": "/lib/modules", "type": ""}, "name": "lib-modules"},
                        {"hostPath": {"path": "/var/run/calico", "type": "DirectoryOrCreate"}, "name": "var-run-calico"},
                        {"hostPath": {"path": "/var/lib/calico", "type": "DirectoryOrCreate"}, "name": "var-lib-calico"},
                        {"hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}, "name": "xtables-lock"},
                        {"hostPath": {"path": "/opt/cni/bin", "type": "DirectoryOrCreate"}, "name": "cni-bin-dir"},
                        {"hostPath": {"path": "/etc/cni/net.d", "type": ""}, "name": "cni-net-dir"},
                        {"hostPath": {"path": "/var/log/calico/cni", "type": ""}, "name": "cni-log-dir"},
                        {"hostPath": {"path": "/var/lib/cni/networks", "type": ""}, "name": "host-local-net-dir"},
                        {"hostPath": {"path": "/var/run/nodeagent", "type": "DirectoryOrCreate"}, "name": "policysync"}
                    ]
                }
            },
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"}
        },
        "status": objects::daemon_set_status(nodes)
    });
    if dual_stack {
        let env = daemon_set
            .pointer_mut("/spec/template/spec/containers/0/env")
            .and_then(Value::as_array_mut)
            .expect("calico-node's env");
        env.push(json!({"name": "IP6", "value": "autodetect"}));
        env.push(json!({"name": "CALICO_IPV6POOL_CIDR", "value": CLUSTER_CIDR6}));
    }
    daemon_set
}
