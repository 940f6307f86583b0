//! A little Kubernetes cluster out of network namespaces: an underlay bridge,
//! nodes on it, pods on each node, one ClusterIP service programmed by
//! kube-proxy's rules, and a process listening in every pod. What makes pods
//! reach each other is the [`Cni`]'s job.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ipnet::{Ipv4Net, Ipv6Net};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::kube_proxy;
use crate::lab::{Lab, Netns};

/// The pod network of the whole cluster (kube-controller-manager's
/// `--cluster-cidr`, kube-proxy's `clusterCIDR`, flannel's `Network`).
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
/// The IPv6 pod network of a dual-stack cluster: node-n's pods are in
/// `fd00:10:244:n::/64`.
pub const CLUSTER_CIDR6: &str = "fd00:10:244::/56";
/// The Kubernetes namespace of the lab's workload.
pub const APP_NAMESPACE: &str = "default";
/// The port every pod listens on and the service targets.
pub const POD_PORT: u16 = 8080;
/// The nodes' network, the underlay.
pub const NODE_NETWORK: &str = "172.18.0.0/24";
/// The nodes' subnets: node-n is at 172.18.S.(10+n)/24 on subnet S, whose
/// gateway, the underlay's router, is 172.18.S.1.
const NODE_SUBNET_PREFIX: &str = "172.18";
/// A host outside the cluster behind the underlay's router. Like most real
/// networks it routes back to the nodes' addresses only, never to pods'.
pub const OUTSIDE_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
const OUTSIDE_GATEWAY: &str = "198.51.100.1";
/// The same host's IPv6 address in a dual-stack lab (the documentation
/// prefix), routing back to the nodes' IPv6 network only.
pub const OUTSIDE_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x100, 0, 0, 0, 0, 0x10);
const OUTSIDE_GATEWAY6: &str = "2001:db8:100::1";

/// What a CNI does to the namespaces, and what it says about that in the
/// Kubernetes objects. One implementation per CNI and mode.
pub trait Cni {
    /// The lab topology's name in test output and `docs/accuracy.md`
    /// (`flannel-vxlan`, `calico-bgp`, ...).
    fn topology_name(&self) -> &'static str;
    /// The reason and message of the `NetworkUnavailable: False` condition
    /// the CNI's agent writes on every Node (`None`: it writes none).
    fn network_condition(&self) -> Option<(&'static str, &'static str)>;
    /// The address IPAM gives the `index`th pod (0-based) of `node`:
    /// by default host-local's, the pod CIDR's next free address after the
    /// gateway (.1), so pods start at .2.
    fn pod_ip(&self, node: &Node, index: usize) -> Ipv4Addr {
        let offset = 2 + u32::try_from(index).expect("few pods");
        Ipv4Addr::from(u32::from(node.pod_cidr().network()) + offset)
    }
    /// The IPv6 address of the `index`th pod of a dual-stack `node`, as
    /// host-local gives it: from `::2` on.
    fn pod_ip6(&self, node: &Node, index: usize) -> Option<Ipv6Addr> {
        let offset = 2 + u128::try_from(index).expect("few pods");
        node.pod_cidr6
            .map(|cidr| Ipv6Addr::from(u128::from(cidr.network()) + offset))
    }
    /// The CNI agent's ip6tables rules on a dual-stack `node`.
    fn ip6tables_rules(&self, _node: &Node) -> String {
        String::new()
    }
    /// The node-side name of a pod's veth; by default the bridge plugin's
    /// `veth` and eight hex digits (random there, fixed here).
    fn host_veth(&self, namespace: &str, name: &str) -> String {
        format!("veth{}", &hex_digest(&format!("{namespace}/{name}"))[..8])
    }
    /// The annotations the CNI plugin puts on a pod's Pod object.
    fn pod_annotations(&self, _pod: &Pod) -> Map<String, Value> {
        Map::new()
    }
    /// Prepares a node before any pod is attached (bridges, tunnel devices).
    fn setup_node(&self, node: &Node);
    /// Gives `pod` its interface and address on `node` (and its node-side
    /// veth's name, where the CNI plugin picks one at random).
    fn attach_pod(&self, node: &Node, pod: &mut Pod);
    /// Makes `node` reach every other node's pods, once every node exists.
    fn connect(&self, node: &Node, peers: &[&Node]);
    /// The CNI agent's iptables rules on `node`, as `iptables-restore` input.
    /// They are added after kube-proxy's, as on a real node where the agent
    /// appends to the chains kube-proxy prepends to.
    fn iptables_rules(&self, node: &Node) -> String;
    /// The annotations the CNI's agent puts on `node`'s Node object.
    fn node_annotations(&self, node: &Node) -> Map<String, Value>;
    /// The CNI's own Kubernetes objects (its ConfigMap, DaemonSet, ...) in
    /// a cluster of `nodes`.
    fn objects(&self, nodes: &[Node]) -> Vec<Value>;
}

/// A built cluster.
pub struct Cluster {
    pub underlay: Netns,
    /// The host at [`OUTSIDE_IP`] (and [`OUTSIDE_IP6`] in a dual-stack
    /// lab), listening on [`POD_PORT`] too.
    pub outside: Netns,
    pub nodes: Vec<Node>,
    pub service: Service,
}

pub struct Node {
    /// The Kubernetes node name, also its directory in a snapshot.
    pub name: String,
    pub ns: Netns,
    /// The node's address on the underlay (its InternalIP), on `eth0`.
    pub ip: Ipv4Addr,
    /// Its IPv4 pod CIDR; `None` in an IPv6-only cluster
    /// ([`Node::pod_cidr`]).
    pub pod_cidr4: Option<Ipv4Net>,
    /// In a dual-stack cluster: the node's IPv6 address on `eth0` and its
    /// IPv6 pod CIDR.
    pub ip6: Option<Ipv6Addr>,
    pub pod_cidr6: Option<Ipv6Net>,
    /// The IPAM block the node's pods take their addresses from where the
    /// CNI's IPAM is block-based and picks blocks itself (Calico in the
    /// real-components lab); `None` where the lab chooses.
    pub ipam_block: Option<Ipv4Net>,
    pub pods: Vec<Pod>,
}

impl Node {
    /// The IPv4 pod CIDR, which every cluster but an IPv6-only one has.
    pub fn pod_cidr(&self) -> Ipv4Net {
        self.pod_cidr4
            .unwrap_or_else(|| panic!("{} has no IPv4 pod CIDR (an IPv6-only cluster)", self.name))
    }

    /// The first address of the pod CIDR: the pods' gateway.
    pub fn gateway(&self) -> Ipv4Addr {
        self.pod_cidr().hosts().next().expect("pod CIDR has hosts")
    }

    /// The first address of the IPv6 pod CIDR: the pods' IPv6 gateway.
    pub fn gateway6(&self) -> Option<Ipv6Addr> {
        self.pod_cidr6
            .map(|cidr| Ipv6Addr::from(u128::from(cidr.network()) + 1))
    }

    /// The node's subnet on the underlay.
    pub fn subnet(&self) -> Ipv4Net {
        Ipv4Net::new(self.ip, 24).expect("a /24").trunc()
    }

    /// The underlay's router on the node's subnet: its default gateway.
    pub fn underlay_gateway(&self) -> Ipv4Addr {
        self.subnet().hosts().next().expect("the subnet has hosts")
    }
}

pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub ns: Netns,
    /// Its IPv4 address; `None` in an IPv6-only cluster ([`Pod::ip`]).
    pub ipv4: Option<Ipv4Addr>,
    /// Its IPv6 address, in a dual-stack or IPv6-only cluster.
    pub ip6: Option<Ipv6Addr>,
    /// The node-side end of the pod's veth, as the CNI bridge plugin names it.
    pub host_veth: String,
}

impl Pod {
    /// Its IPv4 address, which every cluster but an IPv6-only one gives it.
    pub fn ip(&self) -> Ipv4Addr {
        self.ipv4
            .unwrap_or_else(|| panic!("{} has no IPv4 address (an IPv6-only cluster)", self.name))
    }
}

/// The lab's one ClusterIP service, selecting every pod.
pub struct Service {
    pub namespace: String,
    pub name: String,
    pub port_name: String,
    /// Its IPv4 ClusterIP; `None` in an IPv6-only cluster
    /// ([`Service::cluster_ip`]).
    pub cluster_ipv4: Option<Ipv4Addr>,
    /// Its IPv6 ClusterIP, in a dual-stack or IPv6-only cluster.
    pub cluster_ip6: Option<Ipv6Addr>,
    pub port: u16,
}

impl Service {
    /// Its IPv4 ClusterIP, which every cluster but an IPv6-only one gives it.
    pub fn cluster_ip(&self) -> Ipv4Addr {
        self.cluster_ipv4
            .unwrap_or_else(|| panic!("{} has no IPv4 ClusterIP (an IPv6-only cluster)", self.name))
    }
}

/// The shape of a cluster to build.
pub struct Topology {
    pub nodes: u8,
    pub pods_per_node: u8,
    /// The last node is on a second subnet (172.18.1.0/24), reached through
    /// the underlay's router, which routes the nodes' addresses only (no
    /// pod CIDR); the others share 172.18.0.0/24.
    pub across_router: bool,
    /// Nodes, pods and the service have IPv6 addresses too: underlay
    /// `fd00:18:S::/64`, pods `fd00:10:244:n::/64`, ClusterIP
    /// `fd00:10:96::100`, IPv6 forwarding on, kube-proxy's ip6tables rules.
    pub dual_stack: bool,
}

impl Cluster {
    /// Builds the cluster in `lab`: underlay, nodes, pods, the CNI, the
    /// service's kube-proxy rules, and a listener in every pod.
    pub fn build(lab: &mut Lab, topology: &Topology, cni: &dyn Cni) -> Cluster {
        let (underlay, outside) = underlay(lab);
        if topology.across_router {
            add_node_subnet(&underlay, 1);
        }
        if topology.dual_stack {
            underlay_ipv6(&underlay, &outside);
        }

        let mut pod_number = 0;
        let mut nodes = Vec::new();
        for n in 1..=topology.nodes {
            let subnet = u8::from(topology.across_router && n == topology.nodes);
            let mut node = add_node(lab, &underlay, n, subnet);
            node.ns.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
            if topology.dual_stack {
                add_ipv6(&mut node, subnet, n);
            }
            cni.setup_node(&node);
            nodes.push(node);
        }
        for node in &mut nodes {
            for _ in 0..topology.pods_per_node {
                let mut pod = add_pod(lab, cni, node, pod_number);
                cni.attach_pod(node, &mut pod);
                node.pods.push(pod);
                pod_number += 1;
            }
        }
        for node in &nodes {
            let peers: Vec<&Node> = nodes.iter().filter(|p| p.name != node.name).collect();
            cni.connect(node, &peers);
        }

        let cluster = Cluster {
            underlay,
            outside,
            nodes,
            service: Service {
                namespace: APP_NAMESPACE.into(),
                name: "web".into(),
                port_name: "http".into(),
                cluster_ipv4: Some(Ipv4Addr::new(10, 96, 0, 100)),
                cluster_ip6: topology
                    .dual_stack
                    .then_some(Ipv6Addr::new(0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0x100)),
                port: 80,
            },
        };
        let endpoints: Vec<IpAddr> = cluster.pods().map(|p| p.ip().into()).collect();
        let service = &cluster.service;
        let rules = kube_proxy::rules(
            service,
            service.cluster_ip().into(),
            CLUSTER_CIDR,
            &endpoints,
        );
        let rules6 = service.cluster_ip6.map(|cluster_ip6| {
            let endpoints: Vec<IpAddr> = cluster
                .pods()
                .filter_map(|p| p.ip6)
                .map(IpAddr::from)
                .collect();
            kube_proxy::rules(service, cluster_ip6.into(), CLUSTER_CIDR6, &endpoints)
        });
        for node in &cluster.nodes {
            node.ns.restore_iptables(&rules);
            node.ns.restore_iptables(&cni.iptables_rules(node));
            if let Some(rules6) = &rules6 {
                node.ns.restore_ip6tables(rules6);
                node.ns.restore_ip6tables(&cni.ip6tables_rules(node));
            }
            // kube-proxy's iptables mode allows NodePorts on localhost.
            node.ns
                .run(&["sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"]);
        }
        if topology.dual_stack {
            cluster.settle(Dad::Every);
        }
        cluster.start_listeners(lab);
        cluster
    }

    /// Waits until IPv6 duplicate address detection of the `addresses` is
    /// over in every namespace. The lab's own addresses skip it (`nodad`),
    /// but the kernel's link-local ones and those a real CNI plugin adds
    /// (ptp's) do not: until they are done, the first flows of a
    /// dual-stack lab are lost (measured: a ping right after the build gets
    /// no answer, the same ping once settled does), and a snapshot would
    /// catch them in that passing state. A node up for a while has none.
    pub fn settle(&self, addresses: Dad) {
        let mut show = vec!["ip", "-6", "addr", "show"];
        if addresses == Dad::LinkLocal {
            show.extend(["scope", "link"]);
        }
        show.push("tentative");
        for ns in self.all_netns() {
            ns.wait_for(&show, Duration::from_secs(10), |out| out.trim().is_empty());
        }
    }

    /// Starts a listener in every pod, as its container would, and waits
    /// until each one accepts connections.
    pub fn start_listeners(&self, lab: &mut Lab) {
        for pod in self.pods() {
            spawn_pod_listeners(lab, pod);
        }
        let dual_stack = self.service.cluster_ip6.is_some();
        start_outside_listeners(lab, &self.outside, dual_stack);
        for pod in self.pods() {
            wait_listening(&pod.ns);
        }
    }

    /// Runs `occupy` while `pod`'s own listeners are stopped, so that it can
    /// listen on [`POD_PORT`] itself (a receiver that counts what arrives,
    /// where the pod's listener discards it), then starts the listeners
    /// again and waits until they accept connections.
    pub fn without_listener<T>(&self, lab: &mut Lab, pod: &Pod, occupy: impl FnOnce() -> T) -> T {
        lab.stop_program(&pod.ns, "nc");
        let result = occupy();
        spawn_pod_listeners(lab, pod);
        wait_listening(&pod.ns);
        result
    }

    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.nodes.iter().flat_map(|n| &n.pods)
    }

    /// Every pod as a service endpoint, with the node it runs on.
    pub fn endpoints(&self) -> Vec<(&Node, &Pod)> {
        self.nodes
            .iter()
            .flat_map(|n| n.pods.iter().map(move |p| (n, p)))
            .collect()
    }

    /// Every namespace of the cluster, for waiting on all of them.
    pub fn all_netns(&self) -> Vec<&Netns> {
        let mut all = vec![&self.underlay, &self.outside];
        for node in &self.nodes {
            all.push(&node.ns);
            all.extend(node.pods.iter().map(|p| &p.ns));
        }
        all
    }
}

/// Which IPv6 addresses [`Cluster::settle`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dad {
    /// Every tentative address: after the build, before any fault.
    Every,
    /// The kernel's link-local ones: before a snapshot, when a case may
    /// have made a global address tentative on purpose (and a fault such
    /// as a link set down and up restarts link-local DAD).
    LinkLocal,
}

/// Starts a pod's listeners on [`POD_PORT`] (see [`spawn_listeners`]).
pub fn spawn_pod_listeners(lab: &mut Lab, pod: &Pod) {
    spawn_listeners(lab, &pod.ns, pod.ip6.is_some());
}

/// Starts listeners on [`POD_PORT`] in `ns`: openbsd nc listens in one
/// family, so a namespace with IPv6 (`ipv6`) gets a second one on IPv6.
fn spawn_listeners(lab: &mut Lab, ns: &Netns, ipv6: bool) {
    spawn_listener(lab, ns);
    if ipv6 {
        lab.spawn(ns, &["nc", "-6", "-lk", &POD_PORT.to_string()]);
    }
}

/// Starts a container's listener on [`POD_PORT`] in `ns` (IPv4).
pub fn spawn_listener(lab: &mut Lab, ns: &Netns) {
    lab.spawn(ns, &["nc", "-lk", &POD_PORT.to_string()]);
}

/// Starts the outside host's listeners on [`POD_PORT`], in IPv6 too when
/// `ipv6`, and waits until each accepts connections.
pub fn start_outside_listeners(lab: &mut Lab, outside: &Netns, ipv6: bool) {
    spawn_listeners(lab, outside, ipv6);
    wait_listening(outside);
    if ipv6 {
        // `[::]:8080`, or `*:8080` for a socket taking both families.
        let listening = format!(":{POD_PORT} ");
        outside.wait_for(&["ss", "-H", "-6", "-tln"], Duration::from_secs(5), |out| {
            out.contains(&listening)
        });
    }
}

/// Waits until `ns` has a socket listening on [`POD_PORT`].
pub fn wait_listening(ns: &Netns) {
    let listening = format!(":{POD_PORT} ");
    ns.wait_for(&["ss", "-H", "-tln"], Duration::from_secs(5), |out| {
        out.contains(&listening)
    });
}

/// The underlay (a bridge, the nodes' default gateway) and the host
/// outside the cluster behind it.
pub fn underlay(lab: &mut Lab) -> (Netns, Netns) {
    let underlay = lab.netns("underlay");
    add_node_subnet(&underlay, 0);
    let outside = add_outside(lab, &underlay);
    (underlay, outside)
}

/// The underlay's IPv6 side: its router at `fd00:18:0::1/64` on the nodes'
/// subnet, forwarding IPv6, and the outside host at [`OUTSIDE_IP6`], which
/// like its IPv4 side routes back to the nodes' network only.
pub fn underlay_ipv6(underlay: &Netns, outside: &Netns) {
    underlay.ip("-6 addr add fd00:18:0::1/64 dev br0 nodad");
    underlay.ip(&format!(
        "-6 addr add {OUTSIDE_GATEWAY6}/64 dev outside nodad"
    ));
    underlay.run(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
    outside.ip(&format!("-6 addr add {OUTSIDE_IP6}/64 dev eth0 nodad"));
    outside.ip(&format!(
        "-6 route add fd00:18::/48 via {OUTSIDE_GATEWAY6} dev eth0"
    ));
}

/// Node subnet `subnet` on the underlay: bridge `br<subnet>` holding its
/// gateway. The underlay routes between its subnets (and to the outside):
/// the routes it has are its connected ones, the nodes' addresses only.
fn add_node_subnet(underlay: &Netns, subnet: u8) {
    let bridge = format!("br{subnet}");
    underlay.ip(&format!(
        "link add {bridge} address {} type bridge",
        mac(&format!("underlay/{bridge}"))
    ));
    underlay.ip(&format!(
        "addr add {NODE_SUBNET_PREFIX}.{subnet}.1/24 dev {bridge}"
    ));
    underlay.ip(&format!("link set {bridge} up"));
}

/// The host outside the cluster: a veth from the underlay's router, which
/// forwards between the nodes' network and the outside one.
fn add_outside(lab: &mut Lab, underlay: &Netns) -> Netns {
    let ns = lab.netns("outside");
    underlay.ip(&format!(
        "link add outside address {} type veth peer name eth0 address {} netns {}",
        mac("underlay/outside"),
        mac("outside/eth0"),
        ns.name
    ));
    underlay.ip(&format!("addr add {OUTSIDE_GATEWAY}/24 dev outside"));
    underlay.ip("link set outside up");
    underlay.run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    ns.ip(&format!("addr add {OUTSIDE_IP}/24 dev eth0"));
    ns.ip("link set eth0 up");
    ns.ip(&format!(
        "route add 172.18.0.0/24 via {OUTSIDE_GATEWAY} dev eth0"
    ));
    ns
}

/// Node `n` (1-based): `node-n`, `eth0` at 172.18.S.(10+n) on the
/// underlay's subnet S, pod CIDR 10.244.n.0/24 (the scripted lab's; node
/// IPAM's in the real one), default route to the underlay router. Forwarding
/// is left as the kernel has it: on a real node, something sets it (the
/// scripted lab, or the CNI).
pub fn add_node(lab: &mut Lab, underlay: &Netns, n: u8, subnet: u8) -> Node {
    let name = format!("node-{n}");
    let ns = lab.netns(&name);
    let ip = Ipv4Addr::new(172, 18, subnet, 10 + n);
    underlay.ip(&format!(
        "link add {name} address {} type veth peer name eth0 address {} netns {}",
        mac(&format!("underlay/{name}")),
        mac(&format!("{name}/eth0")),
        ns.name
    ));
    underlay.ip(&format!("link set {name} master br{subnet} up"));
    ns.ip(&format!("addr add {ip}/24 dev eth0"));
    ns.ip("link set eth0 up");
    ns.ip(&format!(
        "route add default via {NODE_SUBNET_PREFIX}.{subnet}.1 dev eth0"
    ));
    Node {
        name,
        ns,
        ip,
        pod_cidr4: Some(format!("10.244.{n}.0/24").parse().expect("pod CIDR")),
        ip6: None,
        pod_cidr6: None,
        ipam_block: None,
        pods: Vec::new(),
    }
}

/// Gives node `n` on underlay subnet `subnet` its IPv6 side: `eth0` at
/// `fd00:18:S::(10+n)/64` (without duplicate address detection, so that it
/// is usable at once), the default route by the underlay's router, IPv6
/// forwarding, and pod CIDR `fd00:10:244:n::/64`.
pub fn add_ipv6(node: &mut Node, subnet: u8, n: u8) {
    let ip6 = Ipv6Addr::new(0xfd00, 0x18, subnet.into(), 0, 0, 0, 0, 10 + u16::from(n));
    node.ns.ip(&format!("-6 addr add {ip6}/64 dev eth0 nodad"));
    node.ns.ip(&format!(
        "-6 route add default via fd00:18:{subnet}::1 dev eth0"
    ));
    node.ns
        .run(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
    node.ip6 = Some(ip6);
    node.pod_cidr6 = Some(format!("fd00:10:244:{n}::/64").parse().expect("pod CIDR"));
}

/// Pod `web-<number>` on `node`, at the address the CNI's IPAM gives it.
fn add_pod(lab: &mut Lab, cni: &dyn Cni, node: &Node, number: usize) -> Pod {
    let name = format!("web-{number}");
    let ns = lab.netns(&format!("{}-{name}", node.name));
    let ip = cni.pod_ip(node, node.pods.len());
    let ip6 = cni.pod_ip6(node, node.pods.len());
    let host_veth = cni.host_veth(APP_NAMESPACE, &name);
    Pod {
        namespace: APP_NAMESPACE.into(),
        name,
        ns,
        ipv4: Some(ip),
        ip6,
        host_veth,
    }
}

/// A MAC address fixed by `seed` (locally administered, unicast), so that
/// every run of the lab builds the same link layer and the example snapshot
/// only changes when the lab does.
/// What a VXLAN CNI (flanneld, felix) programs on `ns` for a remote VTEP
/// on its device `dev`: a permanent neighbour, the VTEP's address `vtep_ip`
/// at its MAC, and an FDB entry sending that MAC to the node at `dst`.
pub fn add_vtep_peer(ns: &Netns, dev: &str, vtep_ip: &str, vtep_mac: &str, dst: &str) {
    ns.ip(&format!(
        "neigh add {vtep_ip} lladdr {vtep_mac} dev {dev} nud permanent"
    ));
    ns.run(&[
        "bridge",
        "fdb",
        "add",
        vtep_mac,
        "dev",
        dev,
        "dst",
        dst,
        "self",
        "permanent",
    ]);
}

pub fn mac(seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let mut bytes = [0u8; 6];
    bytes.copy_from_slice(&digest[..6]);
    bytes[0] = (bytes[0] & 0xfe) | 0x02;
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The SHA-256 of `text` in hex: stable, realistic-looking identifiers.
pub fn hex_digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
