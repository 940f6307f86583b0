//! The lab on real components: the nodes and pods of a [`Cluster`] are
//! programmed by the real binaries, built from the Go module proxy by
//! `tests/k8s/build.sh --all`, not by scripts written from what we believe
//! they do:
//!
//! - a real kube-apiserver (`skoop-testcluster`) on the host's loopback;
//! - kube-controller-manager, whose node IPAM gives the nodes their pod CIDR
//!   and whose EndpointSlice and Endpoints controllers follow the pods;
//! - in every node's namespace, flanneld (`--kube-subnet-mgr`, `--ip-masq`)
//!   and kube-proxy (iptables mode), each with the cluster's kubeconfig;
//! - for every pod, the flannel CNI plugin invoked as a container runtime
//!   does (`CNI_COMMAND=ADD`), delegating to bridge and host-local.
//!
//! The test does only what a kubelet would: it registers the Nodes, and it
//! writes each Pod's status (IP, Ready) once the CNI plugin has set the pod
//! up. Components inside a node's namespace reach the API server through a
//! [`Forwarder`] that listens on the same port on that namespace's loopback.

use std::fs;
use std::io::{ErrorKind, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ipnet::{Ipv4Net, Ipv6Net};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::apiserver::{self, ApiServer};
use crate::calico;
use crate::cilium;
use crate::cluster::{
    self, APP_NAMESPACE, CLUSTER_CIDR, CLUSTER_CIDR6, Cluster, Dad, Node, POD_PORT, Pod, Service,
};
use crate::kube_router;
use crate::kubelet;
use crate::lab::{Lab, Netns};
use crate::objects;

/// The Services' network, kube-apiserver's `--service-cluster-ip-range`.
const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The Services' IPv6 network in a dual-stack cluster; the scripted lab's
/// IPv6 ClusterIP `fd00:10:96::100` is in it.
const SERVICE_CIDR6: &str = "fd00:10:96::/108";
/// k3s's defaults: its `--cluster-cidr` (the pods' network) and
/// `--service-cidr`, which the k3s lab keeps.
const K3S_CLUSTER_CIDR: &str = "10.42.0.0/16";
const K3S_SERVICE_CIDR: &str = "10.43.0.0/16";
/// The pods' MTU on Canal: flannel.1's, the underlay's 1500 less VXLAN's 50.
const CANAL_VETH_MTU: u32 = 1450;
/// How long a component may take to do its part.
const SETTLE: Duration = Duration::from_secs(60);

/// A CNI of the real-components lab, and its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RealCni {
    FlannelVxlan,
    FlannelHostGw,
    /// felix (the Kubernetes datastore), the calico CNI plugin and
    /// calico-ipam, an IPPool in VXLAN mode; no BIRD.
    CalicoVxlan,
    /// cilium-agent in the routing mode named, its CNI plugin, kube-proxy
    /// beside it (`tests/lab/cilium.rs`).
    Cilium(cilium::Mode),
    /// kube-router's routes (BGP) and NetworkPolicy firewall, pods on
    /// `kube-bridge` by the bridge plugin, kube-proxy for the Services
    /// (`tests/lab/kube_router.rs`).
    KubeRouter,
    /// RKE2's Canal: flanneld (VXLAN) routes between the nodes, felix
    /// enforces the NetworkPolicy with no networking backend of its own,
    /// and the calico CNI plugin attaches the pods (`cali*` veths, proxy
    /// ARP, 169.254.1.1) with host-local IPAM from the node's pod CIDR.
    Canal,
    /// k3s's embedded parts, configured as k3s runs them: flanneld (VXLAN)
    /// with the net-conf k3s writes itself (no ConfigMap, no DaemonSet),
    /// pods on `cni0` by the flannel plugin's k3s configuration, kube-router's
    /// NetworkPolicy controller alone (`--run-router=false`), kube-proxy;
    /// k3s's address plan (10.42.0.0/16, Services 10.43.0.0/16) and its
    /// markers on the Nodes.
    K3s,
}

impl RealCni {
    /// The topology's name in test output and `docs/accuracy.md`; the
    /// scripted lab's counterpart has the same name without the suffix.
    pub fn topology_name(self) -> &'static str {
        match self {
            RealCni::FlannelVxlan => "flannel-vxlan (real components)",
            RealCni::FlannelHostGw => "flannel-host-gw (real components)",
            RealCni::CalicoVxlan => "calico-vxlan (real components)",
            RealCni::Cilium(mode) => mode.topology_name(),
            RealCni::KubeRouter => "kube-router (real components)",
            RealCni::Canal => "canal (real components)",
            RealCni::K3s => "k3s (real components)",
        }
    }

    /// The pods' network: kube-controller-manager's `--cluster-cidr`.
    pub fn cluster_cidr(self) -> &'static str {
        match self {
            RealCni::K3s => K3S_CLUSTER_CIDR,
            _ => CLUSTER_CIDR,
        }
    }

    /// The Services' network: kube-apiserver's and the controller
    /// manager's `--service-cluster-ip-range`.
    fn service_cidr(self) -> &'static str {
        match self {
            RealCni::K3s => K3S_SERVICE_CIDR,
            _ => SERVICE_CIDR,
        }
    }

    /// The pods' networks in the families of `stack` (kube-controller-manager's
    /// and kube-proxy's `--cluster-cidr`).
    fn cluster_cidrs(self, stack: IpFamilies) -> String {
        match stack {
            IpFamilies::Ipv4 => self.cluster_cidr().to_string(),
            IpFamilies::DualStack => format!("{},{CLUSTER_CIDR6}", self.cluster_cidr()),
            IpFamilies::Ipv6Only => CLUSTER_CIDR6.to_string(),
        }
    }

    /// The Services' networks in the families of `stack`
    /// (`--service-cluster-ip-range`).
    fn service_cidrs(self, stack: IpFamilies) -> String {
        match stack {
            IpFamilies::Ipv4 => self.service_cidr().to_string(),
            IpFamilies::DualStack => format!("{},{SERVICE_CIDR6}", self.service_cidr()),
            IpFamilies::Ipv6Only => SERVICE_CIDR6.to_string(),
        }
    }

    /// The lab's `default/web` Service's ClusterIP, in the Services' network.
    fn web_cluster_ip(self) -> Ipv4Addr {
        match self {
            RealCni::K3s => Ipv4Addr::new(10, 43, 0, 100),
            _ => Ipv4Addr::new(10, 96, 0, 100),
        }
    }

    /// Whether kube-router's firewall runs on the nodes; kube-proxy then
    /// starts once it has programmed every node (see `build_with`).
    pub fn runs_kube_router(self) -> bool {
        matches!(self, RealCni::KubeRouter | RealCni::K3s)
    }

    /// Whether the node's stack routes to each peer's pod CIDR, by a route
    /// the CNI installs (Cilium's tunnel mode has none: its programs
    /// encapsulate).
    fn routes_to_peers(self) -> bool {
        !matches!(
            self,
            RealCni::Cilium(cilium::Mode::Vxlan | cilium::Mode::VxlanEndpointRoutes)
        )
    }

    /// Whether felix runs on the nodes (Calico's CRDs and the lab's
    /// NetworkPolicy are then in the cluster).
    fn runs_felix(self) -> bool {
        matches!(self, RealCni::CalicoVxlan | RealCni::Canal)
    }

    fn is_flannel(self) -> bool {
        matches!(self, RealCni::FlannelVxlan | RealCni::FlannelHostGw)
    }

    /// flanneld's `net-conf.json`, as kube-flannel's ConfigMap holds it;
    /// on k3s, as k3s writes it from its `--cluster-cidr` and
    /// `--flannel-backend` (`pkg/agent/flannel/setup.go`'s template: both
    /// families named, IPv6 off with `::/0`, no `EnableNFTables`).
    fn net_conf(self, stack: IpFamilies) -> Value {
        if self == RealCni::K3s {
            return json!({"Network": K3S_CLUSTER_CIDR, "EnableIPv6": false, "EnableIPv4": true,
                          "IPv6Network": "::/0", "Backend": {"Type": "vxlan"}});
        }
        let backend = match self {
            RealCni::FlannelHostGw => "host-gw",
            RealCni::FlannelVxlan
            | RealCni::CalicoVxlan
            | RealCni::Cilium(_)
            | RealCni::KubeRouter
            | RealCni::Canal
            | RealCni::K3s => "vxlan",
        };
        let mut net_conf =
            json!({"Network": CLUSTER_CIDR, "EnableNFTables": false, "Backend": {"Type": backend}});
        if stack.has_ipv6() {
            net_conf["EnableIPv6"] = true.into();
            net_conf["IPv6Network"] = CLUSTER_CIDR6.into();
        }
        if !stack.has_ipv4() {
            // flanneld's IPv6-only mode: no IPv4 network at all.
            net_conf["EnableIPv4"] = false.into();
            if let Some(conf) = net_conf.as_object_mut() {
                conf.remove("Network");
            }
        }
        net_conf
    }
}

/// The address families of a real-components cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamilies {
    Ipv4,
    /// IPv4 and IPv6 everywhere: the nodes' addresses, two cluster CIDRs
    /// (node IPAM gives each node a pod CIDR of each), two Service CIDRs
    /// (the lab's Service `PreferDualStack`), kube-proxy in both families,
    /// flanneld with `EnableIPv6`, and pods with an address of each.
    DualStack,
    /// IPv6 alone, as Kubernetes sees the cluster (EKS's IPv6 clusters): the
    /// nodes' InternalIPs, the cluster and Service CIDRs, the pods and the
    /// Service are IPv6's; flanneld runs with `EnableIPv4` off. The nodes'
    /// `eth0` keeps its IPv4 address on the underlay, unknown to Kubernetes,
    /// as an EKS node keeps its VPC's.
    Ipv6Only,
}

impl IpFamilies {
    /// Whether the cluster's pods, Services and nodes have IPv4 addresses.
    pub fn has_ipv4(self) -> bool {
        self != IpFamilies::Ipv6Only
    }

    /// Whether they have IPv6 addresses.
    pub fn has_ipv6(self) -> bool {
        self != IpFamilies::Ipv4
    }
}

/// kube-proxy's mode (`--proxy-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    Iptables,
    /// Its rules in the nftables table `ip kube-proxy` (the nftables issue
    /// models them; `nft` must be installed).
    Nftables,
}

impl ProxyMode {
    fn flag(self) -> &'static str {
        match self {
            ProxyMode::Iptables => "--proxy-mode=iptables",
            ProxyMode::Nftables => "--proxy-mode=nftables",
        }
    }
}

/// A lab cluster programmed by the real components, and the API server
/// that holds its objects. The components run as processes of the [`Lab`],
/// which stops them when it is dropped.
pub struct RealCluster {
    pub cluster: Cluster,
    pub server: ApiServer,
    components: Components,
    runtime: tokio::runtime::Runtime,
    /// The cluster's administrator, on `runtime`.
    client: Client,
    /// Into every node's namespace, stopped when dropped.
    forwarders: Vec<Forwarder>,
    /// From the API server to the kubelets, when the nodes run them.
    _egress: Option<kubelet::EgressProxy>,
}

impl Drop for RealCluster {
    /// A kubelet and containerd write into the state directory until they
    /// die, and would leave files behind its removal: every process of the
    /// nodes' namespaces is stopped first (the [`Lab`] stops the rest).
    fn drop(&mut self) {
        if self.components.kubelets {
            for node in &self.cluster.nodes {
                node.ns.kill_processes();
            }
        }
    }
}

/// How the lab starts the node components, and where their configuration,
/// state and logs are.
struct Components {
    /// Every component process started, for [`RealCluster::freeze`].
    pids: std::cell::RefCell<Vec<u32>>,
    cni: RealCni,
    proxy_mode: ProxyMode,
    stack: IpFamilies,
    bin: PathBuf,
    kubeconfig: PathBuf,
    state: tempfile::TempDir,
    /// Whether each node runs a kubelet and containerd (`tests/lab/kubelet.rs`)
    /// that register it and start its pods, instead of the lab doing both.
    kubelets: bool,
    /// Each kubelet's `cgroupRoot`, by node name.
    cgroup_roots: std::cell::RefCell<std::collections::BTreeMap<String, String>>,
}

impl Components {
    /// A node's directory: its flanneld subnet file, CNI state and logs.
    fn node_dir(&self, node: &Node) -> PathBuf {
        self.state.path().join(&node.name)
    }

    fn controller_manager_log(&self) -> PathBuf {
        self.state.path().join("kube-controller-manager.log")
    }

    fn program(&self, name: &str) -> String {
        self.bin
            .join(name)
            .to_str()
            .expect("a UTF-8 path")
            .to_string()
    }

    /// Starts flanneld in `node`'s namespace, as kube-flannel's DaemonSet
    /// runs it. On k3s, as k3s runs its embedded flannel: the kube subnet
    /// manager, masquerade on, the net-conf k3s writes into the node's own
    /// directory (`agent/etc/flannel/net-conf.json`), and no `--iface`
    /// (without `--flannel-iface`, the interface of the default route).
    fn start_flanneld(&self, lab: &mut Lab, node: &Node) {
        let dir = self.node_dir(node);
        let net_conf = if self.cni == RealCni::K3s {
            let file = dir.join("net-conf.json");
            fs::write(&file, self.cni.net_conf(self.stack).to_string())
                .expect("write net-conf.json");
            file
        } else {
            self.state.path().join("net-conf.json")
        };
        let mut argv = vec![
            self.program("flanneld"),
            "--kube-subnet-mgr".into(),
            format!("--kubeconfig-file={}", self.kubeconfig.display()),
            "--ip-masq".into(),
            format!("--subnet-file={}", dir.join("subnet.env").display()),
            format!("--net-config-path={}", net_conf.display()),
        ];
        if self.cni != RealCni::K3s {
            argv.insert(3, "--iface=eth0".into());
        }
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let pid = lab.spawn_logged(
            Some(&node.ns),
            &argv,
            &[("NODE_NAME", &node.name)],
            &dir.join("flanneld.log"),
        );
        self.pids.borrow_mut().push(pid);
    }

    /// Does calico-node's part on `node` as its DaemonSet pod does: the
    /// one-shot `-startup` (the node's address annotation, and on the first
    /// node the IPPool, FelixConfiguration and ClusterInformation) and
    /// `-allocate-tunnel-addrs` (the node's VXLAN tunnel address from an
    /// IPAM block), then felix (`-felix`), left running. Each sees the
    /// node's directory as `/var/lib` (calico-node writes
    /// `/var/lib/calico`, a hostPath in the DaemonSet).
    fn start_calico(&self, lab: &mut Lab, node: &Node) {
        let dir = self.node_dir(node);
        let var_lib = dir.join("var-lib");
        fs::create_dir_all(&var_lib).expect("the node's /var/lib");
        let program = self.program("calico-node");
        let node_ip = format!("{}/24", node.ip);
        let node_ip6 = node.ip6.map(|ip6| format!("{ip6}/64"));
        let mut node_env: Vec<(&str, &str)> = vec![
            ("DATASTORE_TYPE", "kubernetes"),
            ("NODENAME", &node.name),
            ("CALICO_DISABLE_FILE_LOGGING", "true"),
            ("WAIT_FOR_DATASTORE", "true"),
            ("FELIX_IPV6SUPPORT", self.ipv6_support()),
        ];
        let steps: &[&[&str]] = if self.cni == RealCni::Canal {
            // canal.yaml's calico-node: policy only, no address of its own,
            // the pods' addresses from the node's pod CIDR (flannel's).
            node_env.extend([
                ("CALICO_NETWORKING_BACKEND", "none"),
                ("CLUSTER_TYPE", "k8s,canal"),
                ("USE_POD_CIDR", "true"),
                ("IP", ""),
            ]);
            &[&["-startup"]]
        } else {
            node_env.extend([
                ("CALICO_NETWORKING_BACKEND", "vxlan"),
                ("IP", &node_ip),
                ("CALICO_IPV4POOL_CIDR", CLUSTER_CIDR),
                ("CALICO_IPV4POOL_BLOCK_SIZE", "26"),
                ("CALICO_IPV4POOL_VXLAN", "Always"),
                ("CALICO_IPV4POOL_IPIP", "Never"),
                ("CALICO_IPV4POOL_NAT_OUTGOING", "true"),
            ]);
            // In dual-stack, an IPv6 pool in VXLAN mode beside it, as
            // calico.yaml's IPv6 settings make one.
            match &node_ip6 {
                Some(node_ip6) => node_env.extend([
                    ("IP6", node_ip6.as_str()),
                    ("CALICO_IPV6POOL_CIDR", CLUSTER_CIDR6),
                    ("CALICO_IPV6POOL_BLOCK_SIZE", "122"),
                    ("CALICO_IPV6POOL_VXLAN", "Always"),
                    ("CALICO_IPV6POOL_NAT_OUTGOING", "true"),
                ]),
                None => node_env.push(("IP6", "none")),
            }
            &[
                &["-startup"],
                &["-allocate-tunnel-addrs", "-allocate-tunnel-addrs-run-once"],
            ]
        };
        for step in steps {
            let log = dir.join(format!("calico-node{}.log", step[0]));
            let output = self
                .calico_command(node, &var_lib, &program, step)
                .envs(node_env.iter().copied())
                .output()
                .expect("run calico-node");
            fs::write(&log, [output.stdout, output.stderr].concat()).expect("write the log");
            assert!(
                output.status.success(),
                "calico-node {step:?} on {} failed ({}); last lines of {}:\n{}",
                node.name,
                output.status,
                log.display(),
                tail(&log)
            );
        }
        self.start_felix(lab, node);
    }

    /// Starts felix (`calico-node -felix`) in `node`'s namespace.
    fn start_felix(&self, lab: &mut Lab, node: &Node) {
        let dir = self.node_dir(node);
        let var_lib = dir.join("var-lib");
        let program = self.program("calico-node");
        let mut felix_env: Vec<(&str, &str)> = vec![
            ("FELIX_DATASTORETYPE", "kubernetes"),
            ("FELIX_FELIXHOSTNAME", &node.name),
            ("FELIX_LOGFILEPATH", "none"),
            ("FELIX_LOGSEVERITYSYS", "none"),
            ("FELIX_LOGSEVERITYSCREEN", "Info"),
            ("FELIX_USAGEREPORTINGENABLED", "false"),
            ("FELIX_HEALTHENABLED", "true"),
            ("FELIX_HEALTHHOST", "127.0.0.1"),
            ("FELIX_PROMETHEUSMETRICSENABLED", "false"),
            ("FELIX_IPV6SUPPORT", self.ipv6_support()),
            ("FELIX_BPFENABLED", "false"),
            // Felix cleans up a BPF connect-time load balancer at start, even
            // with BPF off. Where it can mount bpffs in its mount namespace (as
            // it can on this machine now), that cleanup calls BPF functions
            // which a build without cgo, as build.sh's, only stubs: felix
            // panics with "BPF syscall stub". The lab has none to clean up.
            ("FELIX_DebugSkipCTLBCleanup", "true"),
            ("FELIX_XDPENABLED", "false"),
            // The backend the node's iptables commands use (Auto would pick
            // legacy in a namespace that has no rules yet).
            ("FELIX_IPTABLESBACKEND", "NFT"),
        ];
        if self.cni == RealCni::Canal {
            // canal.yaml's: the pods may reach their own node.
            felix_env.push(("FELIX_DEFAULTENDPOINTTOHOSTACTION", "ACCEPT"));
        }
        let mut argv = self.calico_argv(&var_lib, &program);
        argv.push("-felix".into());
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut env = felix_env;
        env.push((
            "KUBECONFIG",
            self.kubeconfig.to_str().expect("a UTF-8 path"),
        ));
        let pid = lab.spawn_logged(Some(&node.ns), &argv, &env, &dir.join("felix.log"));
        self.pids.borrow_mut().push(pid);
    }

    /// felix's and calico-node's `FELIX_IPV6SUPPORT`: on in a dual-stack
    /// cluster.
    fn ipv6_support(&self) -> &'static str {
        match self.stack.has_ipv6() {
            false => "false",
            true => "true",
        }
    }

    /// `program` with its `/var/lib` bound to `var_lib`, in a mount
    /// namespace of its own (`ip netns exec` makes one for every command).
    fn calico_argv(&self, var_lib: &Path, program: &str) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            r#"mount --bind "$1" /var/lib && shift && exec "$@""#.into(),
            "sh".into(),
            var_lib.to_str().expect("a UTF-8 path").into(),
            program.into(),
        ]
    }

    fn calico_command(&self, node: &Node, var_lib: &Path, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &node.ns.name])
            .args(self.calico_argv(var_lib, program))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null());
        command
    }

    /// Starts kube-proxy in `node`'s namespace.
    fn start_kube_proxy(&self, lab: &mut Lab, node: &Node) {
        let pid = lab.spawn_logged(
            Some(&node.ns),
            &[
                &self.program("kube-proxy"),
                &format!("--kubeconfig={}", self.kubeconfig.display()),
                &format!("--hostname-override={}", node.name),
                self.proxy_mode.flag(),
                &format!("--cluster-cidr={}", self.cni.cluster_cidrs(self.stack)),
                // The host's conntrack settings are not the lab's to change.
                "--conntrack-max-per-core=0",
                "--conntrack-tcp-timeout-established=0",
                "--conntrack-tcp-timeout-close-wait=0",
            ],
            &[],
            &self.node_dir(node).join("kube-proxy.log"),
        );
        self.pids.borrow_mut().push(pid);
    }
}

impl RealCluster {
    /// Builds `nodes` nodes of `pods_per_node` pods each, programmed by the
    /// real components, and waits until they have done their work: routes
    /// to every other node's pods, and kube-proxy's rules for every pod of
    /// the service.
    pub fn build(lab: &mut Lab, cni: RealCni, nodes: u8, pods_per_node: u8) -> RealCluster {
        RealCluster::build_with(
            lab,
            cni,
            ProxyMode::Iptables,
            IpFamilies::Ipv4,
            nodes,
            pods_per_node,
        )
    }

    /// [`RealCluster::build`] with kube-proxy in `proxy_mode`, in the
    /// families of `stack`.
    pub fn build_with(
        lab: &mut Lab,
        cni: RealCni,
        proxy_mode: ProxyMode,
        stack: IpFamilies,
        nodes: u8,
        pods_per_node: u8,
    ) -> RealCluster {
        let mut real = RealCluster::start(lab, cni, proxy_mode, stack, false);
        for _ in 0..nodes {
            real.add_node(lab, pods_per_node);
        }
        if cni.runs_kube_router() {
            // kube-router's NetworkPolicy controller restores the filter
            // table from a copy it saved: chains kube-proxy made meanwhile are gone, and
            // kube-proxy v1.37.2 does not write them again (its sync fails on
            // a missing KUBE-FORWARD, and its retry finds nothing changed:
            // no Service rule). So kube-proxy starts once kube-router has
            // programmed every node, which narrows the race without closing
            // it (`runs_kube_router` in diagnose.rs).
            real.wait_agents(&[]);
            for node in &real.cluster.nodes {
                real.components.start_kube_proxy(lab, node);
            }
        }
        real.wait_programmed(&[]);
        if stack.has_ipv6() {
            real.cluster.settle(Dad::Every);
        }
        real
    }

    /// [`RealCluster::build`] with a kubelet and containerd on every node
    /// (`tests/lab/kubelet.rs`): the kubelets register the nodes, and the
    /// pods are created through the API server, started by the kubelets,
    /// which call the CNI plugin.
    pub fn build_kubelet(lab: &mut Lab, cni: RealCni, nodes: u8, pods_per_node: u8) -> RealCluster {
        let mut real = RealCluster::start(lab, cni, ProxyMode::Iptables, IpFamilies::Ipv4, true);
        for _ in 0..nodes {
            real.add_node(lab, pods_per_node);
        }
        real.wait_programmed(&[]);
        real
    }

    /// The control plane, the underlay and the Service; no node yet.
    fn start(
        lab: &mut Lab,
        cni: RealCni,
        proxy_mode: ProxyMode,
        stack: IpFamilies,
        kubelets: bool,
    ) -> RealCluster {
        let state = tempfile::Builder::new()
            .prefix("skoop-real-lab-")
            .tempdir()
            .expect("temp dir");
        assert!(
            !(kubelets && stack != IpFamilies::Ipv4),
            "the kubelet lab is IPv4 only"
        );
        let server = if kubelets {
            ApiServer::start_with(|dir| kubelet::apiserver_flags(dir, state.path()))
        } else {
            let range = cni.service_cidrs(stack);
            ApiServer::start_with(|_| vec![format!("--service-cluster-ip-range={range}")])
        };
        let components = Components {
            pids: Default::default(),
            cni,
            proxy_mode,
            stack,
            bin: apiserver::built().clone(),
            kubeconfig: server.kubeconfig.clone(),
            state,
            kubelets,
            cgroup_roots: Default::default(),
        };
        // One runtime for the cluster's life: the client's connection pool
        // lives on the runtime it was made on.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let client = runtime.block_on(server.admin());
        let pid = lab.spawn_logged(
            None,
            &[
                &components.program("kube-controller-manager"),
                &format!("--kubeconfig={}", components.kubeconfig.display()),
                "--controllers=endpointslice-controller,endpoints-controller,node-ipam-controller",
                "--allocate-node-cidrs",
                &format!("--cluster-cidr={}", cni.cluster_cidrs(stack)),
                // A node's pod CIDRs: a /24 of IPv4, and in dual-stack a
                // /64 of IPv6, the per-family defaults (kcm refuses
                // --node-cidr-mask-size with two cluster CIDRs).
                match stack {
                    IpFamilies::Ipv4 => "--node-cidr-mask-size=24",
                    IpFamilies::DualStack => "--node-cidr-mask-size-ipv4=24",
                    IpFamilies::Ipv6Only => "--node-cidr-mask-size=64",
                },
                &format!("--service-cluster-ip-range={}", cni.service_cidrs(stack)),
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
            ],
            &[],
            &components.controller_manager_log(),
        );
        components.pids.borrow_mut().push(pid);
        let net_conf = components.state.path().join("net-conf.json");
        fs::write(&net_conf, cni.net_conf(stack).to_string()).expect("write net-conf.json");

        let (underlay, outside) = cluster::underlay(lab);
        if stack.has_ipv6() {
            cluster::underlay_ipv6(&underlay, &outside);
        }
        let egress = kubelets.then(|| {
            // The nodes' addresses, as `cluster::add_node` gives them.
            let nodes = (1..=9).map(|n| Ipv4Addr::new(172, 18, 0, 10 + n)).collect();
            let socket = components.state.path().join("egress.sock");
            kubelet::EgressProxy::start(&socket, &underlay, nodes)
        });
        cluster::start_outside_listeners(lab, &outside, stack.has_ipv6());
        let service = Service {
            namespace: APP_NAMESPACE.into(),
            name: "web".into(),
            port_name: "http".into(),
            cluster_ipv4: stack.has_ipv4().then(|| cni.web_cluster_ip()),
            cluster_ip6: stack
                .has_ipv6()
                .then_some(Ipv6Addr::new(0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0x100)),
            port: 80,
        };
        runtime.block_on(async {
            apiserver::create(&client, &service_object(&service)).await;
            // The other Services' ClusterIPs are in 10.96.0.0/12, outside
            // k3s's Service network and an IPv6-only cluster's; their cases
            // ask `web` only.
            for other in SERVICES
                .iter()
                .filter(|_| cni != RealCni::K3s && stack.has_ipv4())
            {
                apiserver::create(&client, &other.object(stack)).await;
            }
        });
        if cni.is_flannel() {
            // What kube-flannel's manifest mounts into flanneld's pod; here
            // flanneld reads the same text from a file.
            runtime.block_on(async {
                let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "kube-flannel"}});
                apiserver::create(&client, &namespace).await;
                let config_map = json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "kube-flannel-cfg", "namespace": "kube-flannel",
                                 "labels": {"app": "flannel", "tier": "node"}},
                    "data": {"net-conf.json": cni.net_conf(stack).to_string()},
                });
                apiserver::create(&client, &config_map).await;
            });
        }
        if cni == RealCni::Canal {
            // RKE2's rke2-canal chart: flanneld's net-conf.json and the CNI
            // settings in one ConfigMap of kube-system.
            runtime.block_on(async {
                let config_map = json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "rke2-canal-config", "namespace": "kube-system"},
                    "data": {
                        "net-conf.json": cni.net_conf(stack).to_string(),
                        "canal_iface": "",
                        "masquerade": "true",
                        "veth_mtu": CANAL_VETH_MTU.to_string(),
                    },
                });
                apiserver::create(&client, &config_map).await;
            });
        }
        if cni.runs_felix() {
            runtime.block_on(async {
                for crd in calico_crds(&components.bin) {
                    apiserver::create(&client, &crd).await;
                }
                // felix enforces it; calico-node creates the IPPool.
                apiserver::create(&client, &calico::network_policy()).await;
            });
        }
        if cni == RealCni::KubeRouter {
            runtime.block_on(async {
                for object in kube_router::objects() {
                    apiserver::create(&client, &object).await;
                }
            });
        }
        if let RealCni::Cilium(mode) = cni {
            assert!(
                !kubelets,
                "the lab runs Cilium's agents on netns nodes only"
            );
            runtime.block_on(async {
                for object in cilium::crds(&components.bin)
                    .iter()
                    .chain(&cilium::objects(mode))
                {
                    apiserver::create(&client, object).await;
                }
            });
        }
        RealCluster {
            cluster: Cluster {
                underlay,
                outside,
                nodes: Vec::new(),
                service,
            },
            server,
            components,
            runtime,
            client,
            forwarders: Vec::new(),
            _egress: egress,
        }
    }

    /// Adds the next node, as a kubelet registers it, with its flanneld
    /// and kube-proxy, and `pods` pods set up by the CNI plugins, each with
    /// its listener. Does not wait for the other nodes to learn of it.
    pub fn add_node(&mut self, lab: &mut Lab, pods: u8) {
        let number = u8::try_from(self.cluster.nodes.len() + 1).expect("few nodes");
        let mut node = cluster::add_node(lab, &self.cluster.underlay, number, 0);
        if self.components.stack.has_ipv6() {
            cluster::add_ipv6(&mut node, 0, number);
        }
        let dir = self.components.node_dir(&node);
        fs::create_dir_all(&dir).expect("node state dir");
        let port = api_port(&self.components.kubeconfig);
        self.forwarders.push(Forwarder::start(&node.ns, port));
        // One node at a time, so node IPAM hands out CIDRs in node order.
        if self.components.kubelets {
            let cgroup_root = kubelet::start_node_agents(
                lab,
                &node,
                &dir,
                &self.components.bin,
                &self.components.kubeconfig,
                &self.server.dir().join("ca.crt"),
            );
            self.components
                .cgroup_roots
                .borrow_mut()
                .insert(node.name.clone(), cgroup_root);
        } else {
            let k3s = (self.components.cni == RealCni::K3s).then(|| k3s_markers(&node));
            self.runtime.block_on(register_node(
                &self.client,
                &node,
                self.components.stack,
                k3s,
            ));
        }
        (node.pod_cidr4, node.pod_cidr6) = self.runtime.block_on(wait_pod_cidrs(
            &self.client,
            &node.name,
            self.components.stack,
            &self.components.controller_manager_log(),
        ));
        if let RealCni::Cilium(mode) = self.components.cni {
            // As where Cilium is installed into a cluster: kube-proxy runs
            // first, and the agent puts its FORWARD rules ahead of
            // kube-proxy's, whose INVALID drop would otherwise take the
            // replies the agent hands to the stack with endpoint routes
            // (their requests went into the tunnel past netfilter).
            self.components.start_kube_proxy(lab, &node);
            self.wait(
                &node,
                &["iptables", "-S", "FORWARD"],
                "kube-proxy.log",
                |out| out.contains("-j KUBE-FORWARD"),
            );
            cilium::start_agent(
                lab,
                mode,
                &node,
                &dir,
                &self.components.bin,
                &self.components.kubeconfig,
            );
        } else if self.components.cni == RealCni::KubeRouter {
            let pid = kube_router::start(
                lab,
                &node,
                &dir,
                &self.components.bin,
                &self.components.kubeconfig,
            );
            self.components.pids.borrow_mut().push(pid);
        } else if self.components.cni == RealCni::K3s {
            // What k3s's agent sets up before its embedded parts start
            // (`pkg/agent/syssetup`): forwarding, and bridged traffic
            // through iptables (kube-router's firewall of pods on cni0).
            node.ns.run(&[
                "sysctl",
                "-qw",
                "net.ipv4.conf.all.forwarding=1",
                "net.ipv4.conf.default.forwarding=1",
                "net.bridge.bridge-nf-call-iptables=1",
            ]);
            self.components.start_flanneld(lab, &node);
            wait_for_file(&dir.join("subnet.env"), &dir.join("flanneld.log"));
            let pid = kube_router::start_firewall(
                lab,
                &node,
                &dir,
                &self.components.bin,
                &self.components.kubeconfig,
                self.components.cni.service_cidr(),
            );
            self.components.pids.borrow_mut().push(pid);
        } else if self.components.cni == RealCni::Canal {
            self.components.start_flanneld(lab, &node);
            wait_for_file(&dir.join("subnet.env"), &dir.join("flanneld.log"));
            self.components.start_calico(lab, &node);
            self.wait(
                &node,
                &["iptables-save", "-t", "filter"],
                "felix.log",
                |out| out.contains(":cali-FORWARD "),
            );
        } else if self.components.cni == RealCni::CalicoVxlan {
            self.components.start_calico(lab, &node);
            // felix makes the tunnel device once it has the node's tunnel
            // address and the pool.
            let dual_stack = self.components.stack.has_ipv6();
            self.wait(&node, &["ip", "-br", "link"], "felix.log", |out| {
                out.contains(calico::VTEP) && (!dual_stack || out.contains(calico::VTEP6))
            });
            if self.components.kubelets {
                // Where calico-node's install-cni container writes it.
                let conf = calico_cni_conf(&self.components, &node);
                fs::write(dir.join("net.d/10-calico.conf"), conf)
                    .expect("write the node's CNI configuration");
            }
        } else {
            self.components.start_flanneld(lab, &node);
            wait_for_file(&dir.join("subnet.env"), &dir.join("flanneld.log"));
            if self.components.kubelets {
                // Where kube-flannel's install-cni container copies it.
                fs::write(dir.join("net.d/10-flannel.conf"), flannel_cni_conf(&dir))
                    .expect("write the node's CNI configuration");
            }
        }
        if !self.components.cni.runs_kube_router()
            && !matches!(self.components.cni, RealCni::Cilium(_))
        {
            self.components.start_kube_proxy(lab, &node);
        }

        for _ in 0..pods {
            let name = format!("web-{}", self.cluster.pods().count() + node.pods.len());
            let pod = self.add_pod(lab, &node, name);
            node.pods.push(pod);
        }
        if self.components.cni == RealCni::CalicoVxlan && !node.pods.is_empty() {
            node.ipam_block = Some(self.calico_block(&node));
        }
        self.cluster.nodes.push(node);
    }

    /// Adds a pod to the `node`th node, as its kubelet would start a pod
    /// scheduled there later; it is that node's last pod. Does not wait for
    /// the other nodes' components to learn of it.
    pub fn add_pod_on(&mut self, lab: &mut Lab, node: usize) {
        let name = format!("web-{}", self.cluster.pods().count());
        let pod = self.add_pod(lab, &self.cluster.nodes[node], name);
        self.cluster.nodes[node].pods.push(pod);
    }

    /// A pod on `node` as its kubelet and container runtime make it: the
    /// Pod object, the sandbox (a namespace with a pause process in the
    /// pod's cgroup), the CNI plugin's ADD, the Pod's status, and its
    /// container (a listener).
    fn add_pod(&self, lab: &mut Lab, node: &Node, name: String) -> Pod {
        if self.components.kubelets {
            return self.add_kubelet_pod(lab, node, name);
        }
        let ns = lab.netns(&format!("{}-{name}", node.name));
        let mut pod = Pod {
            namespace: APP_NAMESPACE.into(),
            name,
            ns,
            ipv4: None,
            ip6: None,
            host_veth: String::new(),
        };
        let mut object = pod_object(node, &pod);
        // Scheduled, not running yet: the status comes once CNI ADD is done.
        if let Some(fields) = object.as_object_mut() {
            fields.remove("status");
        }
        let created = self
            .runtime
            .block_on(apiserver::create(&self.client, &object))
            .expect("a new pod");
        let uid = created["metadata"]["uid"].as_str().expect("a uid");
        lab.pause_in_pod_cgroup(&pod.ns, uid);
        let dir = self.components.node_dir(node);
        let bin = &self.components.bin;
        let in_node = |plugin: &str| {
            let plugin = bin.join("cni").join(plugin).display().to_string();
            vec![
                "ip".into(),
                "netns".into(),
                "exec".into(),
                node.ns.name.clone(),
                plugin,
            ]
        };
        let (conf, command) = match self.components.cni {
            RealCni::CalicoVxlan | RealCni::Canal => {
                (calico_cni_conf(&self.components, node), in_node("calico"))
            }
            RealCni::Cilium(_) => (cilium::cni_conf(), cilium::cni_command(node, &dir, bin)),
            RealCni::FlannelVxlan | RealCni::FlannelHostGw => {
                (flannel_cni_conf(&dir), in_node("flannel"))
            }
            RealCni::K3s => (k3s_cni_conf(&dir), in_node("flannel")),
            RealCni::KubeRouter => {
                // kube-router writes the node's pod CIDR into its CNI
                // configuration once it has started.
                kubelet::wait_until(
                    SETTLE,
                    || kube_router::cni_conf(&dir).is_some(),
                    || "kube-router wrote no pod CIDR into its CNI configuration".into(),
                    &dir.join("kube-router.log"),
                );
                let conf = kube_router::cni_conf(&dir).expect("the configuration just read");
                (conf, in_node("bridge"))
            }
        };
        let attached = cni_add(bin, &command, node, &pod, &conf);
        (pod.ipv4, pod.ip6, pod.host_veth) = (attached.ip, attached.ip6, attached.host_veth);
        let status = pod_object(node, &pod)["status"].take();
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &pod.namespace, &resource);
        let patch = Patch::Merge(json!({ "status": status }));
        self.runtime
            .block_on(api.patch_status(&pod.name, &PatchParams::default(), &patch))
            .unwrap_or_else(|e| panic!("write the status of {}: {e}", pod.name));
        cluster::spawn_pod_listeners(lab, &pod);
        cluster::wait_listening(&pod.ns);
        pod
    }

    /// A pod on `node` as a user makes one: the Pod object, its container
    /// the pause image (the lab's listener runs in its namespace beside it).
    /// The kubelet starts it and the CNI plugin gives it its address; its
    /// namespace is then named as the lab's, found through a process in the
    /// pod's control group.
    fn add_kubelet_pod(&self, lab: &mut Lab, node: &Node, name: String) -> Pod {
        let mut object = pod_object(
            node,
            &Pod {
                namespace: APP_NAMESPACE.into(),
                name: name.clone(),
                ns: Netns {
                    name: String::new(),
                },
                ipv4: None,
                ip6: None,
                host_veth: String::new(),
            },
        );
        if let Some(fields) = object.as_object_mut() {
            fields.remove("status");
        }
        let container = &mut object["spec"]["containers"][0];
        container["image"] =
            kubelet::image_name(&self.components.bin.join("images/pause.tar")).into();
        container["imagePullPolicy"] = "Never".into();
        if let Some(fields) = container.as_object_mut() {
            fields.remove("args");
        }
        let created = self
            .runtime
            .block_on(apiserver::create(&self.client, &object))
            .expect("a new pod");
        let uid = created["metadata"]["uid"]
            .as_str()
            .expect("a uid")
            .to_string();
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), APP_NAMESPACE, &resource);
        let log = self.components.node_dir(node).join("kubelet.log");
        let start = Instant::now();
        let ip = loop {
            let pod = self.runtime.block_on(api.get(&name)).expect("get the pod");
            let running = pod.data["status"]["phase"] == "Running";
            if let (true, Some(ip)) = (running, pod.data["status"]["podIP"].as_str()) {
                break ip.parse::<Ipv4Addr>().expect("an IPv4 pod address");
            }
            assert!(
                start.elapsed() < SETTLE,
                "the kubelet did not run pod {name} in {SETTLE:?}: status {}; last lines of {}:\n{}",
                pod.data["status"],
                log.display(),
                tail(&log)
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        let cgroup_root = self.components.cgroup_roots.borrow()[&node.name].clone();
        let pid = *kubelet::pod_pids(&cgroup_root, &uid)
            .first()
            .unwrap_or_else(|| panic!("no process of pod {name} under {cgroup_root}"));
        let ns = lab.attach_netns(&format!("{}-{name}", node.name), pid);
        let host_veth = node_side_veth(node, &ns);
        cluster::spawn_listener(lab, &ns);
        cluster::wait_listening(&ns);
        Pod {
            namespace: APP_NAMESPACE.into(),
            name,
            ns,
            ipv4: Some(ip),
            ip6: None,
            host_veth,
        }
    }

    /// The IPAM block felix blackholes on `node`: the one its pods' and
    /// tunnel's addresses came from (Calico picks it at random).
    fn calico_block(&self, node: &Node) -> Ipv4Net {
        let routes = node.ns.run(&["ip", "route", "show", "type", "blackhole"]);
        let pod_ip = node.pods[0].ip();
        routes
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(|cidr| cidr.parse::<Ipv4Net>().ok())
            .find(|block| block.contains(&pod_ip))
            .unwrap_or_else(|| {
                panic!(
                    "no blackhole route for {pod_ip}'s block on {}:\n{routes}",
                    node.name
                )
            })
    }

    /// Waits until every node routes to every other node's pod CIDR
    /// (flanneld has seen the others' leases) and has kube-proxy's rules for
    /// every pod behind the service (the EndpointSlice controller has seen
    /// the pods Ready, and kube-proxy the slice); except on the nodes named
    /// in `stale`, whose components were stopped.
    pub fn wait_programmed(&self, stale: &[&str]) {
        self.wait_agents(stale);
        self.wait_services(stale);
    }

    /// The CNI's part of [`RealCluster::wait_programmed`].
    fn wait_agents(&self, stale: &[&str]) {
        for node in &self.cluster.nodes {
            if stale.contains(&node.name.as_str()) {
                continue;
            }
            if matches!(self.components.cni, RealCni::Cilium(_)) {
                let pods: Vec<String> = self.cluster.pods().map(|p| p.ip().to_string()).collect();
                let dir = self.components.node_dir(node);
                cilium::wait_programmed(node, &dir, &self.components.bin, &pods);
            }
            let agent_log = match self.components.cni {
                RealCni::CalicoVxlan => "felix.log",
                RealCni::Cilium(_) => "cilium-agent.log",
                RealCni::FlannelVxlan | RealCni::FlannelHostGw | RealCni::Canal | RealCni::K3s => {
                    "flanneld.log"
                }
                RealCni::KubeRouter => "kube-router.log",
            };
            if self.components.cni == RealCni::Canal {
                // felix's chains for each of the node's pods: policy is
                // enforced from then on.
                self.wait(
                    node,
                    &["iptables-save", "-t", "filter"],
                    "felix.log",
                    |out| {
                        node.pods
                            .iter()
                            .all(|pod| out.contains(&format!(":cali-tw-{} ", pod.host_veth)))
                    },
                );
            }
            if self.components.cni.runs_kube_router() {
                // Its firewall: a chain per pod of the node.
                self.wait(
                    node,
                    &["iptables-save", "-t", "filter"],
                    "kube-router.log",
                    |out| {
                        node.pods
                            .iter()
                            .all(|pod| out.contains(&format!("POD name:{} namespace:", pod.name)))
                    },
                );
            }
            if self.components.cni == RealCni::KubeRouter {
                // Its pod egress rule's ipset: every node's pod CIDR.
                let set = ["ipset", "save", "kube-router-pod-subnets"];
                self.wait(node, &set, agent_log, |out| {
                    self.cluster
                        .nodes
                        .iter()
                        .all(|n| out.contains(&format!(" {} ", n.pod_cidr())))
                });
            }
            for peer in self
                .cluster
                .nodes
                .iter()
                .filter(|p| p.name != node.name && self.components.cni.routes_to_peers())
            {
                if let Some(cidr) = peer.ipam_block.or(peer.pod_cidr4) {
                    let cidr = cidr.to_string();
                    self.wait(node, &["ip", "route", "show", &cidr], agent_log, |out| {
                        !out.trim().is_empty()
                    });
                }
                // The peer's pods' IPv6 addresses by a route of their own
                // (its pod CIDR, or the Calico block), not the default one.
                for pod6 in peer.pods.iter().filter_map(|p| p.ip6) {
                    let pod6 = pod6.to_string();
                    self.wait(
                        node,
                        &["ip", "-6", "route", "show", "match", &pod6],
                        agent_log,
                        |out| out.lines().any(|route| !route.starts_with("default")),
                    );
                }
            }
        }
    }

    /// kube-proxy's part of [`RealCluster::wait_programmed`], in each
    /// family the Service has.
    fn wait_services(&self, stale: &[&str]) {
        let service = &self.cluster.service;
        let ipv4: Vec<String> = self
            .cluster
            .pods()
            .filter_map(|p| p.ipv4)
            .map(|ip| ip.to_string())
            .collect();
        let ipv6: Vec<String> = self
            .cluster
            .pods()
            .filter_map(|p| p.ip6)
            .map(|ip| ip.to_string())
            .collect();
        let families = (service.cluster_ipv4.map(|_| ("iptables-save", "ip", ipv4)))
            .into_iter()
            .chain(service.cluster_ip6.map(|_| ("ip6tables-save", "ip6", ipv6)));
        for (save, nft_family, endpoints) in families {
            for node in &self.cluster.nodes {
                if stale.contains(&node.name.as_str()) {
                    continue;
                }
                match self.components.proxy_mode {
                    // A rule of the service port's chain per endpoint.
                    ProxyMode::Iptables => {
                        let rule = format!(
                            "\"{}/{}:{} -> ",
                            service.namespace, service.name, service.port_name
                        );
                        self.wait(node, &[save, "-t", "nat"], "kube-proxy.log", |out| {
                            out.lines()
                                .filter(|l| l.starts_with("-A KUBE-SVC-") && l.contains(&rule))
                                .count()
                                == endpoints.len()
                        })
                    }
                    // The service port's chain DNATs to every endpoint (a
                    // numgen map; an endpoint chain each where there is
                    // affinity).
                    ProxyMode::Nftables => {
                        let chain = format!(
                            "-{}/{}/tcp/{} {{",
                            service.namespace, service.name, service.port_name
                        );
                        let dnat: Vec<String> = endpoints
                            .iter()
                            .map(|e| format!("{e} . {POD_PORT}"))
                            .collect();
                        self.wait(
                            node,
                            &["nft", "list", "table", nft_family, "kube-proxy"],
                            "kube-proxy.log",
                            |out| {
                                let Some(start) = out.find(&chain) else {
                                    return false;
                                };
                                let block = &out[start..];
                                let block = &block[..block.find('}').unwrap_or(block.len())];
                                dnat.iter().all(|e| block.contains(e.as_str()))
                            },
                        )
                    }
                }
            }
        }
    }

    /// Freezes every component (SIGSTOP): what they programmed stays as it
    /// is, and a fault a case injects is not repaired (felix rewrites a
    /// deleted route at once, flanneld's host-gw and kube-proxy on their
    /// next sync) while the kernel is asked and the snapshot collected.
    /// The lab's cleanup kills them frozen or not.
    pub fn freeze(&self) {
        for pid in self.components.pids.borrow().iter() {
            // A component a case stopped is gone; nothing to freeze.
            let _ = Command::new("kill")
                .args(["-STOP", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }

    /// `skoop collect --node-exec`'s template that reaches the nodes as
    /// their components see them.
    pub fn node_exec(&self) -> String {
        let node = &self.cluster.nodes[0];
        let prefix = node
            .ns
            .name
            .strip_suffix(&format!("-{}", node.name))
            .expect("node namespaces are <prefix>-<node>");
        match self.components.cni {
            RealCni::Cilium(_) => {
                cilium::node_exec(prefix, self.components.state.path(), &self.components.bin)
            }
            _ => format!("ip netns exec {prefix}-{{node}}"),
        }
    }

    /// Runs `argv` in the `node`th node as its Cilium agent sees it (its
    /// mount namespace: `cilium-dbg` reads the node's own maps); its output.
    pub fn in_cilium_node(&self, node: usize, argv: &[&str]) -> String {
        let node = &self.cluster.nodes[node];
        cilium::run(
            node,
            &self.components.node_dir(node),
            &self.components.bin,
            argv,
        )
    }

    /// Creates `policy` and waits until the `node`th node's Cilium agent
    /// has rewritten every endpoint's policy map with it.
    pub fn create_cilium_policy(&self, node: usize, policy: &Value) {
        let node = &self.cluster.nodes[node];
        let (dir, bin) = (self.components.node_dir(node), &self.components.bin);
        let before = cilium::policy_maps(node, &dir, bin);
        self.create(policy);
        cilium::wait_policy(node, &dir, bin, &before);
    }

    /// Starts felix again on the `node`th node (after [`RealCluster::stop`]
    /// of `calico-node`).
    pub fn restart_felix(&self, lab: &mut Lab, node: usize) {
        self.components.start_felix(lab, &self.cluster.nodes[node]);
    }

    /// Merge-patches the Service `name` of the lab's namespace, as a user
    /// edits it.
    pub fn patch_service(&self, name: &str, patch: Value) {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Service"));
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), APP_NAMESPACE, &resource);
        self.runtime
            .block_on(api.patch(name, &PatchParams::default(), &Patch::Merge(patch)))
            .unwrap_or_else(|e| panic!("patch Service {name}: {e}"));
    }

    /// Creates `object` in the cluster, as a user applies it.
    pub fn create(&self, object: &Value) {
        self.runtime
            .block_on(apiserver::create(&self.client, object));
    }

    /// Stops `program` (`kube-proxy`, `flanneld`, `calico-node`) on the
    /// `node`th node.
    pub fn stop(&self, lab: &mut Lab, node: usize, program: &str) {
        lab.stop_program(&self.cluster.nodes[node].ns, program);
    }

    /// Writes `pods`' readiness as their kubelet would once a readiness
    /// probe fails or passes again.
    pub fn set_ready(&self, pods: &[&Pod], ready: bool) {
        let status = if ready { "True" } else { "False" };
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
        for pod in pods {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &pod.namespace, &resource);
            let now = "2026-01-01T00:01:00Z";
            let condition = |type_: &str, status: &str| json!({"type": type_, "status": status, "lastTransitionTime": now});
            let patch = json!({"status": {
                "conditions": [
                    condition("PodReadyToStartContainers", "True"),
                    condition("Initialized", "True"),
                    condition("Ready", status),
                    condition("ContainersReady", status),
                    condition("PodScheduled", "True"),
                ],
            }});
            self.runtime
                .block_on(api.patch_status(
                    &pod.name,
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                ))
                .unwrap_or_else(|e| panic!("write the readiness of {}: {e}", pod.name));
        }
    }

    /// Waits until `ready` holds of the `node`th node's iptables `table`
    /// (a component has programmed a change; on timeout, the tail of its
    /// `log` is shown).
    pub fn wait_rules(&self, node: usize, table: &str, log: &str, ready: impl Fn(&str) -> bool) {
        let node = &self.cluster.nodes[node];
        self.wait(node, &["iptables-save", "-t", table], log, ready);
    }

    /// Waits until kube-proxy's nftables table on `node` (`nft list table
    /// ip kube-proxy`) satisfies `ready`.
    pub fn wait_nft(&self, node: usize, ready: impl Fn(&str) -> bool) {
        let node = &self.cluster.nodes[node];
        self.wait(
            node,
            &["nft", "list", "table", "ip", "kube-proxy"],
            "kube-proxy.log",
            ready,
        );
    }

    /// Waits for `ready` of `argv`'s output in `node`; on timeout, fails
    /// with the tail of the component's `log`.
    fn wait(&self, node: &Node, argv: &[&str], log: &str, ready: impl Fn(&str) -> bool) {
        let start = Instant::now();
        loop {
            // A command that fails (kube-proxy's table not created yet) is
            // not ready either.
            let run = node.ns.exec(argv);
            let output = String::from_utf8_lossy(&run.stdout);
            if run.status.success() && ready(&output) {
                return;
            }
            if start.elapsed() > SETTLE {
                let log = self.components.node_dir(node).join(log);
                panic!(
                    "{argv:?} on {} not ready after {SETTLE:?}; it printed:\n{output}\n\
                     last lines of {}:\n{}",
                    node.name,
                    log.display(),
                    tail(&log)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// What each component of the real-components lab says its version is
/// (and the tools and kernel the lab ran on), as `(component, version)`.
pub fn component_versions() -> Vec<(&'static str, String)> {
    let bin = apiserver::built();
    let program = |name: &str| bin.join(name).to_str().expect("a UTF-8 path").to_string();
    let run = |argv: &[&str]| {
        let output = Command::new(argv[0])
            .args(&argv[1..])
            .output()
            .unwrap_or_else(|e| panic!("run {argv:?}: {e}"));
        let text = [output.stdout, output.stderr].concat();
        String::from_utf8_lossy(&text)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    vec![
        (
            "kube-apiserver",
            run(&[&program("kube-apiserver"), "--version"]),
        ),
        (
            "kube-controller-manager",
            run(&[&program("kube-controller-manager"), "--version"]),
        ),
        ("kube-proxy", run(&[&program("kube-proxy"), "--version"])),
        ("flanneld", run(&[&program("flanneld"), "--version"])),
        ("CNI bridge", run(&[&program("cni/bridge"), "--version"])),
        (
            "CNI host-local",
            run(&[&program("cni/host-local"), "--version"]),
        ),
        ("CNI flannel", run(&[&program("cni/flannel"), "--version"])),
        ("calico-node (felix)", run(&[&program("calico-node"), "-v"])),
        (
            "cilium-agent",
            run(&[&program("cilium-agent"), "--version"]),
        ),
        (
            "clang (Cilium's datapath)",
            run(&["/usr/lib/llvm-19/bin/clang", "--version"]),
        ),
        ("bpftool", run(&["bpftool", "version"])),
        (
            "kube-router",
            // "Running PATH version v2.1.0, built on DATE, GO": the release.
            run(&[&program("kube-router"), "--version"])
                .split(" version ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or_default()
                .to_string(),
        ),
        ("kubelet", run(&[&program("kubelet"), "--version"])),
        ("containerd", run(&[&program("containerd"), "--version"])),
        ("runc", run(&[&program("runc"), "--version"])),
        ("iptables", run(&["iptables", "--version"])),
        ("nftables", run(&["nft", "--version"])),
        ("iproute2", run(&["ip", "-V"])),
        ("kernel", run(&["uname", "-r"])),
    ]
}

/// The port of the API server a kubeconfig names (`https://127.0.0.1:PORT`).
fn api_port(kubeconfig: &Path) -> u16 {
    let text = fs::read_to_string(kubeconfig).expect("read kubeconfig");
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:"))
        .expect("the kubeconfig names a loopback server");
    server.trim().parse().expect("a port")
}

/// What k3s adds to its Node object, as `(labels, annotations)`: the
/// instance type, and its node-config annotations
/// (`pkg/nodeconfig`): the arguments the node's k3s runs with as a JSON
/// array (a `--flag=value` split in two, a token's value omitted), its
/// environment, and a base32 SHA-256 over both; its hostname and
/// address. The first node is the server, with k3s's default network
/// spelt out as a user gives it; the others are agents, whose arguments
/// say nothing of the network.
fn k3s_markers(node: &Node) -> (Value, Value) {
    let args: Vec<&str> = if node.name == "node-1" {
        vec![
            "server",
            "--cluster-cidr",
            K3S_CLUSTER_CIDR,
            "--service-cidr",
            K3S_SERVICE_CIDR,
        ]
    } else {
        vec![
            "agent",
            "--server",
            "https://172.18.0.11:6443",
            "--token",
            "********",
        ]
    };
    let args = serde_json::to_string(&args).expect("JSON");
    let env = json!({"K3S_NODE_NAME": node.name}).to_string();
    use sha2::Digest;
    let hash = data_encoding::BASE32.encode(&sha2::Sha256::digest(format!("{args}{env}")));
    let labels = json!({
        "node.kubernetes.io/instance-type": "k3s",
        "beta.kubernetes.io/instance-type": "k3s",
    });
    let annotations = json!({
        "k3s.io/node-args": args,
        "k3s.io/node-env": env,
        "k3s.io/node-config-hash": hash,
        "k3s.io/hostname": node.name,
        "k3s.io/internal-ip": node.ip.to_string(),
    });
    (labels, annotations)
}

/// Registers `node` as its kubelet would: labels, the annotations a
/// kubelet sets (flanneld expects a node to have annotations), addresses
/// and a Ready condition; with `k3s`'s labels and annotations besides
/// ([`k3s_markers`]). No pod CIDR: node IPAM gives it one.
async fn register_node(
    client: &Client,
    node: &Node,
    stack: IpFamilies,
    k3s: Option<(Value, Value)>,
) {
    let now = "2026-01-01T00:00:00Z";
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": "lab",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    // An InternalIP of each family the cluster has (a kubelet's `--node-ip`).
    let ipv4 = stack.has_ipv4().then(|| node.ip.to_string());
    let addresses: Vec<Value> = [ipv4, node.ip6.map(|ip| ip.to_string())]
        .into_iter()
        .flatten()
        .map(|ip| json!({"type": "InternalIP", "address": ip}))
        .chain([json!({"type": "Hostname", "address": node.name})])
        .collect();
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "status": {
            "addresses": addresses,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady"),
            ],
            "nodeInfo": {
                "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "lab://netns",
                "kernelVersion": fs::read_to_string("/proc/sys/kernel/osrelease")
                    .map(|v| v.trim().to_string()).unwrap_or_default(),
                "kubeProxyVersion": "", "kubeletVersion": "v1.37.2", "machineID": "",
                "operatingSystem": "linux", "osImage": "skoop lab (Linux network namespaces)",
                "systemUUID": "",
            },
        },
    });
    if let Some((labels, annotations)) = k3s {
        for (field, extra) in [("labels", labels), ("annotations", annotations)] {
            if let (Some(have), Some(extra)) =
                (object["metadata"][field].as_object_mut(), extra.as_object())
            {
                have.extend(extra.clone());
            }
        }
    }
    apiserver::create(client, &object).await;
}

/// Waits until node IPAM has given `node` its pod CIDRs: its IPv4 one, and
/// in a dual-stack cluster its IPv6 one.
async fn wait_pod_cidrs(
    client: &Client,
    node: &str,
    stack: IpFamilies,
    log: &Path,
) -> (Option<Ipv4Net>, Option<Ipv6Net>) {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Node"));
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let start = Instant::now();
    loop {
        // A kubelet registers its node itself, some time after it starts.
        let object = api.get_opt(node).await.expect("get the node");
        let cidrs: Vec<&str> = object
            .as_ref()
            .and_then(|o| o.data["spec"]["podCIDRs"].as_array())
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let ipv4 = cidrs.iter().find_map(|c| c.parse::<Ipv4Net>().ok());
        let ipv6 = cidrs.iter().find_map(|c| c.parse::<Ipv6Net>().ok());
        match (ipv4, ipv6, stack) {
            (Some(ipv4), _, IpFamilies::Ipv4) => return (Some(ipv4), None),
            (Some(ipv4), Some(ipv6), IpFamilies::DualStack) => return (Some(ipv4), Some(ipv6)),
            (_, Some(ipv6), IpFamilies::Ipv6Only) => return (None, Some(ipv6)),
            _ => {}
        }
        assert!(
            start.elapsed() < SETTLE,
            "node IPAM gave {node} no pod CIDRs of {stack:?} in {SETTLE:?}; last lines of {}:\n{}",
            log.display(),
            tail(log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `file` exists (flanneld writes its subnet file once it holds
/// its lease and has set the node up).
fn wait_for_file(file: &Path, log: &Path) {
    let start = Instant::now();
    while !file.exists() {
        assert!(
            start.elapsed() < SETTLE,
            "{} not written in {SETTLE:?}; last lines of {}:\n{}",
            file.display(),
            log.display(),
            tail(log)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The flannel CNI plugin's configuration for a node, as kube-flannel's
/// `cni-conf.json` has it, with the node's subnet file and the plugins'
/// state kept in the node's directory instead of `/run` and `/var/lib/cni`.
fn flannel_cni_conf(dir: &Path) -> String {
    json!({
        "cniVersion": "0.3.1",
        "name": "cbr0",
        "type": "flannel",
        "subnetFile": dir.join("subnet.env"),
        "dataDir": dir.join("flannel"),
        "ipam": {"dataDir": dir.join("ipam")},
        "delegate": {"hairpinMode": true, "isDefaultGateway": true},
    })
    .to_string()
}

/// The flannel CNI plugin's configuration as k3s writes it
/// (`10-flannel.conflist`'s flannel plugin: `forceAddress` besides
/// kube-flannel's delegate settings), with the node's subnet file and the
/// plugins' state in the node's directory. k3s writes `cniVersion` 1.0.0
/// for the flannel plugin it bundles; the one built here (flannel-cni
/// plugin v0.9.1) takes at most 0.4.0, which changes
/// nothing the plugins do to the pod. The conflist's `portmap` and
/// `bandwidth` plugins are not run (no hostPort, no bandwidth limit in the
/// lab).
fn k3s_cni_conf(dir: &Path) -> String {
    json!({
        "cniVersion": "0.4.0",
        "name": "cbr0",
        "type": "flannel",
        "subnetFile": dir.join("subnet.env"),
        "dataDir": dir.join("flannel"),
        "ipam": {"dataDir": dir.join("ipam")},
        "delegate": {"hairpinMode": true, "forceAddress": true, "isDefaultGateway": true},
    })
    .to_string()
}

/// The calico CNI plugin's configuration for `node`, as Calico's
/// manifest installs it (`10-calico.conflist`'s calico plugin), with the
/// node's name, the MTU (felix's file of it is per host, not per node
/// here) and the IPAM lock and log in the node's directory.
fn calico_cni_conf(components: &Components, node: &Node) -> String {
    let dir = components.node_dir(node);
    let ipam = if components.cni == RealCni::Canal {
        // Canal's `cni_network_config`: host-local over the node's pod CIDR.
        json!({"type": "host-local", "subnet": "usePodCidr", "dataDir": dir.join("ipam")})
    } else {
        json!({"type": "calico-ipam",
               "assign_ipv4": components.stack.has_ipv4().to_string(),
               "assign_ipv6": components.stack.has_ipv6().to_string()})
    };
    // What calico-node's install-cni writes: felix's MTU, the smallest of
    // its tunnels' (vxlan-v6.calico's 1430 beside vxlan.calico's 1450).
    let mtu = match (components.cni, components.stack) {
        (RealCni::Canal, _) => CANAL_VETH_MTU,
        (_, IpFamilies::Ipv4) => 1450,
        (_, IpFamilies::DualStack | IpFamilies::Ipv6Only) => 1430,
    };
    json!({
        "cniVersion": "0.3.1",
        "name": "k8s-pod-network",
        "type": "calico",
        "log_level": "info",
        "log_file_path": dir.join("cni.log"),
        "datastore_type": "kubernetes",
        "nodename": node.name,
        "nodename_file_optional": true,
        "mtu": mtu,
        "ipam": ipam,
        // Read by calico-ipam from the whole configuration, not its section.
        "ipam_lock_file": dir.join("ipam.lock"),
        "policy": {"type": "k8s"},
        "kubernetes": {"kubeconfig": components.kubeconfig},
    })
    .to_string()
}

/// Calico's CustomResourceDefinitions, as its manifests apply them (from
/// the module build.sh built it from).
fn calico_crds(bin: &Path) -> Vec<Value> {
    let dir = bin.join("calico-crds");
    let files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("an entry").path())
        .collect();
    yaml_objects(files)
}

/// The objects of YAML files (CRDs as a project ships them), in the
/// files' order by name.
pub fn yaml_objects(mut files: Vec<PathBuf>) -> Vec<Value> {
    files.sort();
    files
        .iter()
        .map(|file| {
            let text = fs::read_to_string(file).expect("read a CRD");
            serde_saphyr::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", file.display()))
        })
        .collect()
}

/// Sets `pod` up as a container runtime does: CNI `plugin`'s ADD with the
/// pod's namespace, run in the node's.
pub fn cni_add(bin: &Path, command: &[String], node: &Node, pod: &Pod, conf: &str) -> Attached {
    let cni_dir = bin.join("cni");
    let container = format!("{}-{}", node.name, pod.name);
    let plugin = command.last().expect("the plugin");
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .env("CNI_COMMAND", "ADD")
        .env("CNI_CONTAINERID", &container)
        .env("CNI_NETNS", netns_path(pod))
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", &cni_dir)
        .env(
            "CNI_ARGS",
            format!(
                "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={container}",
                pod.namespace, pod.name
            ),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the CNI plugin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(conf.as_bytes())
        .expect("write the CNI configuration");
    let output = child.wait_with_output().expect("the CNI plugin's result");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "CNI ADD ({plugin}) of {} on {} failed ({}): {stdout}{}",
        pod.name,
        node.name,
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(&stdout).expect("a CNI result");
    let addresses: Vec<&str> = result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["address"].as_str())
        .collect();
    let ip = addresses.iter().find_map(|a| a.parse::<Ipv4Net>().ok());
    let ip6 = addresses.iter().find_map(|a| a.parse::<Ipv6Net>().ok());
    assert!(
        ip.is_some() || ip6.is_some(),
        "no address in the CNI result {result}"
    );
    let host_veth = result["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter(|i| i.get("sandbox").is_none())
        .filter_map(|i| i["name"].as_str())
        .find(|n| n.starts_with("veth") || n.starts_with("cali") || n.starts_with("lxc"))
        .unwrap_or_else(|| panic!("no node-side veth in the CNI result {result}"))
        .to_string();
    Attached {
        ip: ip.map(|ip| ip.addr()),
        ip6: ip6.map(|ip6| ip6.addr()),
        host_veth,
    }
}

/// What a CNI ADD gave a pod: its addresses (IPv4 where the plugin's IPAM
/// has an IPv4 range, IPv6 where it has an IPv6 one) and the node side of
/// its veth.
pub struct Attached {
    pub ip: Option<Ipv4Addr>,
    pub ip6: Option<Ipv6Addr>,
    pub host_veth: String,
}

/// The pod's network namespace as a runtime names it to a CNI plugin: by a
/// process in it (its pause), which also reaches a plugin in a mount
/// namespace of its own (Cilium's), where `/run/netns` mounts made later
/// do not propagate (there the path is a plain file: "set netns: invalid
/// argument"). A pod without a pause (kindnet's lab) by its path.
fn netns_path(pod: &Pod) -> String {
    let output = Command::new("ip")
        .args(["netns", "pids", &pod.ns.name])
        .output()
        .expect("ip netns pids");
    match String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
    {
        Some(pid) => format!("/proc/{pid}/ns/net"),
        None => format!("/run/netns/{}", pod.ns.name),
    }
}

/// A Service of the real-components lab besides `web`, each on port 80 to
/// the pods' 8080: the kinds and policies kube-proxy programs differently.
pub struct LabService {
    pub name: &'static str,
    pub cluster_ip: Ipv4Addr,
    kind: &'static str,
    node_port: Option<u16>,
    /// The pods it selects: those of this node only, or (`Some("")`) none.
    selects_node: Option<&'static str>,
    external_local: bool,
    internal_local: bool,
    client_ip_affinity: bool,
    /// The ingress IP a load-balancer controller would write in its status.
    load_balancer_ip: Option<&'static str>,
}

const fn lab_service(name: &'static str, last_octet: u8, kind: &'static str) -> LabService {
    LabService {
        name,
        cluster_ip: Ipv4Addr::new(10, 96, 0, last_octet),
        kind,
        node_port: None,
        selects_node: None,
        external_local: false,
        internal_local: false,
        client_ip_affinity: false,
        load_balancer_ip: None,
    }
}

/// The real-components lab's other Services.
pub const SERVICES: &[LabService] = &[
    LabService {
        node_port: Some(30080),
        ..lab_service("web-nodeport", 101, "NodePort")
    },
    LabService {
        node_port: Some(30082),
        load_balancer_ip: Some("203.0.113.10"),
        ..lab_service("web-lb", 102, "LoadBalancer")
    },
    LabService {
        node_port: Some(30081),
        selects_node: Some("node-1"),
        external_local: true,
        ..lab_service("web-node-1-external-local", 103, "NodePort")
    },
    LabService {
        selects_node: Some("node-2"),
        internal_local: true,
        ..lab_service("web-node-2-local", 104, "ClusterIP")
    },
    LabService {
        client_ip_affinity: true,
        ..lab_service("web-affinity", 105, "ClusterIP")
    },
    LabService {
        selects_node: Some(""),
        ..lab_service("web-nobody", 106, "ClusterIP")
    },
];

/// The Service of [`SERVICES`] named `name`.
pub fn service(name: &str) -> &'static LabService {
    SERVICES
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("the real-components lab has no Service {name}"))
}

impl LabService {
    /// Its IPv6 ClusterIP in a dual-stack cluster: `fd00:10:96::N`, N the
    /// last octet of its IPv4 one.
    pub fn cluster_ip6(&self) -> Ipv6Addr {
        let last = u16::from(self.cluster_ip.octets()[3]);
        Ipv6Addr::new(0xfd00, 0x10, 0x96, 0, 0, 0, 0, last)
    }

    /// The Service as a user creates it, with the status a load-balancer
    /// controller would write; `PreferDualStack` with a ClusterIP of each
    /// family in a dual-stack cluster.
    fn object(&self, stack: IpFamilies) -> Value {
        let selector = match self.selects_node {
            None => json!({"app": "web"}),
            Some("") => json!({"app": "nobody"}),
            Some(node) => json!({"app": "web", "node": node}),
        };
        let mut port =
            json!({"name": "http", "port": 80, "protocol": "TCP", "targetPort": POD_PORT});
        if let Some(node_port) = self.node_port {
            port["nodePort"] = node_port.into();
        }
        let mut spec = json!({
            "type": self.kind,
            "clusterIP": self.cluster_ip.to_string(),
            "ports": [port],
            "selector": selector,
            "internalTrafficPolicy": if self.internal_local { "Local" } else { "Cluster" },
            "sessionAffinity": if self.client_ip_affinity { "ClientIP" } else { "None" },
        });
        if stack == IpFamilies::DualStack {
            spec["clusterIPs"] =
                json!([self.cluster_ip.to_string(), self.cluster_ip6().to_string()]);
            spec["ipFamilies"] = json!(["IPv4", "IPv6"]);
            spec["ipFamilyPolicy"] = "PreferDualStack".into();
        }
        if self.node_port.is_some() {
            spec["externalTrafficPolicy"] = if self.external_local {
                "Local"
            } else {
                "Cluster"
            }
            .into();
        }
        let mut object = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": self.name, "namespace": APP_NAMESPACE},
            "spec": spec,
        });
        if let Some(ip) = self.load_balancer_ip {
            object["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
        }
        object
    }
}

/// The lab's Service, as a user would create it (ClusterIP fixed, so that
/// cases can name it); in a dual-stack cluster `PreferDualStack`, with a
/// ClusterIP of each family.
fn service_object(service: &Service) -> Value {
    // Its first ClusterIP: the IPv4 one, in an IPv6-only cluster the IPv6 one.
    let cluster_ip = match (service.cluster_ipv4, service.cluster_ip6) {
        (Some(ipv4), _) => ipv4.to_string(),
        (None, Some(ipv6)) => ipv6.to_string(),
        (None, None) => panic!("{} has no ClusterIP", service.name),
    };
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service.name, "namespace": service.namespace, "labels": {"app": "web"}},
        "spec": {
            "clusterIP": cluster_ip,
            "ports": [{"name": service.port_name, "port": service.port, "protocol": "TCP",
                       "targetPort": POD_PORT}],
            "selector": {"app": "web"},
            "type": "ClusterIP",
        },
    });
    let spec = &mut object["spec"];
    match (service.cluster_ipv4, service.cluster_ip6) {
        (Some(ipv4), Some(ipv6)) => {
            spec["clusterIPs"] = json!([ipv4.to_string(), ipv6.to_string()]);
            spec["ipFamilies"] = json!(["IPv4", "IPv6"]);
            spec["ipFamilyPolicy"] = "PreferDualStack".into();
        }
        (None, Some(_)) => {
            spec["ipFamilies"] = json!(["IPv6"]);
            spec["ipFamilyPolicy"] = "SingleStack".into();
        }
        _ => {}
    }
    object
}

/// `pod` as scheduled to `node` (labelled with its node, for the
/// Services that select one node's pods), with the status its kubelet
/// writes once the sandbox is up and the container Ready.
fn pod_object(node: &Node, pod: &Pod) -> Value {
    let mut object = objects::pod_with_annotations(node, pod, serde_json::Map::new());
    object["metadata"]["labels"]["node"] = node.name.clone().into();
    object
}

/// The node side of the veth whose other end is `pod`'s `eth0`: the
/// interface of `node` with the index `eth0` names as its peer.
fn node_side_veth(node: &Node, pod: &Netns) -> String {
    let eth0 = pod.run(&["ip", "-o", "link", "show", "eth0"]);
    // `3: eth0@if7: <...>`: the peer's index on the node.
    let peer = eth0
        .split_once("@if")
        .and_then(|(_, rest)| rest.split(':').next())
        .unwrap_or_else(|| panic!("no veth peer in {eth0:?}"))
        .to_string();
    let links = node.ns.run(&["ip", "-o", "link", "show"]);
    links
        .lines()
        .find_map(|line| {
            let (index, rest) = line.split_once(": ")?;
            let name = rest.split([':', '@']).next()?;
            (index == peer).then(|| name.to_string())
        })
        .unwrap_or_else(|| panic!("no interface {peer} on {}: {links}", node.name))
}

/// The last 30 lines of a log file.
pub fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read: {e})"));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Forwards connections made to `127.0.0.1:PORT` inside a network namespace
/// to the same port on the host's loopback, where the API server listens.
/// The listening socket is made in the namespace, the connections to the
/// API server in the host's: nothing listens outside a loopback.
pub struct Forwarder {
    /// Held for its `Drop`, which stops the loop.
    _accepting: AcceptLoop,
}

impl Forwarder {
    pub fn start(ns: &Netns, port: u16) -> Forwarder {
        let listener = listen_in(ns, port);
        listener.set_nonblocking(true).expect("non-blocking");
        let accepting = AcceptLoop::spawn(
            move || listener.accept().map(|(client, _)| client),
            move |client: TcpStream| {
                let _ = client.set_nonblocking(false);
                if let Ok(upstream) = TcpStream::connect(("127.0.0.1", port)) {
                    splice(client, upstream);
                }
            },
        );
        Forwarder {
            _accepting: accepting,
        }
    }
}

/// A thread taking connections from a non-blocking listener's `accept` and
/// handing each to `serve`, until dropped: the lab's forwarders and proxies.
pub struct AcceptLoop {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AcceptLoop {
    /// `accept` must not block (its listener set non-blocking): the loop
    /// looks at its stop flag between tries.
    pub fn spawn<C>(
        mut accept: impl FnMut() -> std::io::Result<C> + Send + 'static,
        serve: impl Fn(C) + Send + 'static,
    ) -> AcceptLoop {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match accept() {
                    Ok(client) => serve(client),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(_) => return,
                }
            }
        });
        AcceptLoop {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for AcceptLoop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A listener on `127.0.0.1:port` in `ns`, made by a thread that enters the
/// namespace and ends (the socket stays in the namespace it was made in).
fn listen_in(ns: &Netns, port: u16) -> TcpListener {
    let path = format!("/run/netns/{}", ns.name);
    std::thread::spawn(move || {
        let file = fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
        // SAFETY: setns only changes this thread's network namespace; the
        // thread ends right after making the listener.
        let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(
            entered,
            0,
            "setns into {path}: {}",
            std::io::Error::last_os_error()
        );
        TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("listen on 127.0.0.1:{port} in {path}: {e}"))
    })
    .join()
    .expect("the listener thread")
}

/// Copies both ways between two connections until either side closes.
fn splice(a: TcpStream, b: TcpStream) {
    for (mut from, mut to) in [
        (a.try_clone().expect("clone"), b.try_clone().expect("clone")),
        (b, a),
    ] {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::{Availability, availability};

    /// The real components alone make the lab work: pods reach each other
    /// across nodes and through the ClusterIP, each component having done
    /// its part.
    #[test]
    fn real_flannel_vxlan_connects_pods_across_nodes_and_through_the_service() {
        let Availability::Run = availability() else {
            return;
        };
        let mut lab = Lab::new();
        let real = RealCluster::build(&mut lab, RealCni::FlannelVxlan, 2, 2);
        let cluster = &real.cluster;
        let from = &cluster.nodes[0].pods[0];
        for to in cluster.pods() {
            let ip = to.ip().to_string();
            let connect = from.ns.exec(&["nc", "-z", "-w", "2", &ip, "8080"]);
            assert!(connect.status.success(), "{} -> {}", from.name, to.name);
        }
        let service = cluster.service.cluster_ip().to_string();
        let connect = from.ns.exec(&["nc", "-z", "-w", "2", &service, "80"]);
        assert!(connect.status.success(), "{} -> the service", from.name);
        let routes = cluster.nodes[0].ns.run(&["ip", "route"]);
        assert!(routes.contains("dev flannel.1 onlink"), "{routes}");
    }

    /// felix, the calico CNI plugin and calico-ipam alone make the lab
    /// work, and felix enforces the NetworkPolicy (TCP 8080 only).
    #[test]
    fn real_calico_vxlan_connects_pods_and_enforces_the_network_policy() {
        let Availability::Run = availability() else {
            return;
        };
        let mut lab = Lab::new();
        let real = RealCluster::build(&mut lab, RealCni::CalicoVxlan, 2, 2);
        let cluster = &real.cluster;
        let from = &cluster.nodes[0].pods[0];
        let to = cluster.nodes[1].pods.last().expect("a pod on node-2");
        let ip = to.ip().to_string();
        let connect = from.ns.exec(&["nc", "-z", "-w", "2", &ip, "8080"]);
        assert!(connect.status.success(), "{} -> {}", from.name, to.name);
        let ping = from.ns.exec(&["ping", "-c", "1", "-W", "2", &ip]);
        assert!(!ping.status.success(), "the policy admits TCP 8080 only");
        let routes = cluster.nodes[0].ns.run(&["ip", "route"]);
        assert!(routes.contains("dev vxlan.calico"), "{routes}");
    }

    /// kube-proxy in nftables mode programs the node (the lab the nftables
    /// issue's cases run on): pods reach the ClusterIP through its table
    /// `ip kube-proxy`, and it writes no iptables rules for the service.
    #[test]
    fn real_kube_proxy_in_nftables_mode_serves_the_cluster_ip() {
        let Availability::Run = availability() else {
            return;
        };
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
        let from = &cluster.nodes[0].pods[0];
        let service = cluster.service.cluster_ip().to_string();
        let connect = from.ns.exec(&["nc", "-z", "-w", "2", &service, "80"]);
        assert!(connect.status.success(), "{} -> the service", from.name);
        let table = cluster.nodes[0]
            .ns
            .run(&["nft", "list", "table", "ip", "kube-proxy"]);
        assert!(table.contains(&service), "{table}");
        let nat = cluster.nodes[0].ns.run(&["iptables-save", "-t", "nat"]);
        assert!(!nat.contains("KUBE-SVC-"), "{nat}");
    }
}
