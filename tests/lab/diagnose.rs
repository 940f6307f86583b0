//! The ground truth for `skoop diagnose`: faults injected into a real
//! Flannel VXLAN lab, the kernel asked whether the flow still works (a TCP
//! connect or a ping), and the diagnosis of a snapshot collected right
//! after asked the same. They must agree, and a failing diagnosis must name
//! the faulty hop.
//!
//! With `SKOOP_WRITE_ACCURACY=1` the agreement table is written to
//! `docs/accuracy.md`; with `SKOOP_LAB_CASE=<fault name> SKOOP_LAB_SAVE=DIR`
//! that case's snapshot is saved to DIR; with `SKOOP_LAB_LIST=1` the names
//! of the cases the run would run are printed, and none is run.

use std::sync::Mutex;

use skoop::engine::{self, Disposition, Endpoint, PacketSize, Protocol, Request};
use skoop::net::Family;
use skoop::packs::{LoadedPacks, builtin_sources};

use crate::apiserver::ApiServer;
use crate::calico::{self, Calico};
use crate::cilium;
use crate::cluster::{CLUSTER_CIDR6, Cluster, Cni, OUTSIDE_IP, OUTSIDE_IP6, Pod, Topology};
use crate::flannel::Flannel;
use crate::kindnet::{self, Kindnet};
use crate::lab::{Availability, Lab, availability};
use crate::real::{self, IpFamilies, ProxyMode, RealCluster, RealCni};
use crate::{live, snapshot};

/// A fault: what to break, and which hop a diagnosis must blame.
struct Fault {
    name: &'static str,
    /// Breaks the cluster (runs after it is built and working).
    inject: Inject,
    /// The hop id the fatal finding must be about (`None`: nothing is broken).
    blamed: Option<&'static str>,
    /// The disposition skoop must give.
    expected: Disposition,
    protocol: Protocol,
    port: Option<u16>,
    /// A finding the diagnosis must carry (the cause behind the blamed hop).
    finds: Option<&'static str>,
    /// Where the flow goes (with [`Peer::Cluster`]).
    to: To,
    /// A case about packet sizes; `None`: a connect or a ping.
    mtu: Option<MtuCase>,
}

/// Where a case's flow goes inside the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    /// The last pod of the last node.
    Pod,
    /// The last pod of the `node`th node (0-based).
    PodOn { node: usize },
    /// The sending pod itself, at its own address (routed by its local
    /// table, through `lo`).
    Sender,
    /// A Service by name, at its ClusterIP: `web` is every lab's; the
    /// others exist in the real-components lab only ([`real::SERVICES`]).
    Service(&'static str),
    /// A Service's NodePort on the address of the `node`th node (the port
    /// is the case's).
    NodePort { node: usize },
    /// An address (a LoadBalancer's ingress IP).
    Address(&'static str),
}

/// How a fault is injected.
#[derive(Clone, Copy)]
enum Inject {
    /// Into the namespaces, whoever programmed them.
    Kernel(fn(&Cluster)),
    /// Through the real components (stopping one, changing objects they
    /// watch); only in groups on the real-components lab.
    Components(fn(&mut Lab, &mut RealCluster)),
    /// As `Components`, leaving these files collection cannot write (a
    /// stopped agent does not answer): it warns of them, and exits 1.
    ComponentsUncollected(fn(&mut Lab, &mut RealCluster), &'static [&'static str]),
}

/// How a case about packet sizes asks the kernel and skoop.
struct MtuCase {
    /// `Some`: skoop walks packets of this size (`--size`) and the kernel
    /// pings with DF at that size (`ping -M do`). `None`: the kernel makes a
    /// TCP transfer of [`BULK_BYTES`] to the case's port of the destination
    /// pod and skoop walks the same flow without `--size`.
    size: Option<PacketSize>,
    /// A warning finding the diagnosis must carry.
    warns: Option<&'static str>,
}

/// The size of the TCP transfer of a bulk case: hundreds of full-size segments.
const BULK_BYTES: usize = 400_000;
/// The finding that says a transfer stalls: full-size packets are lost and
/// nothing tells the sender.
const BLACK_HOLE: skoop::diagnostic::FindingCode = engine::codes::KERNEL_MTU_BLACK_HOLE;

/// The flow every case checks: the first pod of node-1 to the last pod of
/// the last node (node-2, unless a case added one).
fn endpoints(cluster: &Cluster) -> (&Pod, &Pod) {
    let first = &cluster.nodes[0].pods[0];
    let last = cluster
        .nodes
        .last()
        .and_then(|n| n.pods.last())
        .expect("the last node has pods");
    (first, last)
}

fn node_run(cluster: &Cluster, node: usize, argv: &[&str]) {
    cluster.nodes[node].ns.run(argv);
}

/// Deletes `node`'s FDB entry on the VXLAN `device` for the VTEP at
/// `remote` (as when the agent's state and the kernel's drift apart).
fn delete_vtep_fdb_entry(cluster: &Cluster, node: usize, device: &str, remote: &str) {
    let fdb = cluster.nodes[node]
        .ns
        .run(&["bridge", "fdb", "show", "dev", device]);
    let entry = fdb
        .lines()
        .find(|l| l.contains(&format!("dst {remote}")))
        .unwrap_or_else(|| panic!("FDB entry for {remote}"));
    let mac = entry.split_whitespace().next().expect("MAC");
    node_run(
        cluster,
        node,
        &["bridge", "fdb", "del", mac, "dev", device, "dst", remote],
    );
}

/// Deletes node-1's route to node-2's IPv6 pod CIDR (whatever the CNI
/// routes it by).
fn delete_ipv6_route_to_node_2_pods(cluster: &Cluster) {
    let cidr6 = cluster.nodes[1].pod_cidr6.expect("dual-stack").to_string();
    node_run(cluster, 0, &["ip", "-6", "route", "del", &cidr6]);
}

/// Node `node`'s pod CIDR (node IPAM's in the real-components lab, so
/// cases never name one).
/// Deletes node-2's /128 route to the destination pod's IPv6 address (the
/// CNI plugin's route to the pod's veth).
fn delete_destination_pod_ipv6_route(cluster: &Cluster) {
    let pod = endpoints(cluster).1.ip6.expect("dual-stack").to_string();
    node_run(
        cluster,
        1,
        &["ip", "-6", "route", "del", &format!("{pod}/128")],
    );
}

fn pod_cidr(cluster: &Cluster, node: usize) -> String {
    cluster.nodes[node].pod_cidr().to_string()
}

/// The address `offset` into node `node`'s pod CIDR (0: the network
/// address, which is flannel's VTEP address on the node).
fn pod_cidr_address(cluster: &Cluster, node: usize, offset: u32) -> String {
    let network = u32::from(cluster.nodes[node].pod_cidr().network());
    std::net::Ipv4Addr::from(network + offset).to_string()
}

/// Sets a device's MTU in a namespace.
fn set_mtu(ns: &crate::lab::Netns, device: &str, mtu: u32) {
    ns.ip(&format!("link set {device} mtu {mtu}"));
}

/// Every pod's eth0, its veth on the node and every node's cni0 (where the
/// CNI has that bridge) at `mtu`, whatever the CNI's own MTU (a CNI
/// configured for another backend).
fn pods_at_mtu(cluster: &Cluster, mtu: u32) {
    for node in &cluster.nodes {
        for pod in &node.pods {
            set_mtu(&node.ns, &pod.host_veth, mtu);
            set_mtu(&pod.ns, "eth0", mtu);
        }
        if node
            .ns
            .exec(&["ip", "link", "show", "cni0"])
            .status
            .success()
        {
            set_mtu(&node.ns, "cni0", mtu);
        }
    }
}

/// web-0's veth on node-1 narrower than web-0's eth0.
fn narrow_first_veth(cluster: &Cluster) {
    let pod = endpoints(cluster).0;
    set_mtu(&cluster.nodes[0].ns, &pod.host_veth, 1400);
}

/// Every pod of the service not Ready; waits until kube-proxy on node-1
/// has programmed the service as one without endpoints.
fn no_endpoint_ready(real: &mut RealCluster) {
    let pods: Vec<&Pod> = real.cluster.pods().collect();
    real.set_ready(&pods, false);
    let rejected = no_endpoints_comment(&real.cluster);
    real.wait_rules(0, "filter", "kube-proxy.log", |rules| {
        rules.contains(&rejected)
    });
}

/// The comment of kube-proxy's REJECT for the lab's service without
/// endpoints (the `kubernetes` Service of the test API server has one too).
fn no_endpoints_comment(cluster: &Cluster) -> String {
    let service = &cluster.service;
    format!(
        "{}/{}:{} has no endpoints",
        service.namespace, service.name, service.port_name
    )
}

/// The cases only the real components have: what they do when objects
/// change, and when one of them is stopped.
const REAL_COMPONENT_FAULTS: &[Fault] = &[
    Fault {
        name: "one endpoint not Ready (kube-proxy leaves it out)",
        inject: Inject::Components(|_, real| {
            let pod = endpoints(&real.cluster).1;
            real.set_ready(&[pod], false);
            let left_out = format!("-> {}:", pod.ip());
            real.wait_rules(0, "nat", "kube-proxy.log", |rules| {
                !rules.contains(&left_out)
            });
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "no endpoint Ready: kube-proxy's REJECT on node-1",
        inject: Inject::Components(|_, real| no_endpoint_ready(real)),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "kube-proxy stopped on node-1, then the endpoints Ready again (its REJECT is stale)",
        inject: Inject::Components(|lab, real| {
            no_endpoint_ready(real);
            real.stop(lab, 0, "kube-proxy");
            let pods: Vec<&Pod> = real.cluster.pods().collect();
            real.set_ready(&pods, true);
            // node-2's kube-proxy has seen them: the change is out.
            let rejected = no_endpoints_comment(&real.cluster);
            real.wait_rules(1, "filter", "kube-proxy.log", |rules| {
                !rules.contains(&rejected)
            });
        }),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: Some("kube-proxy.rules.stale"),
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "kube-proxy stopped on node-1, then the Service's targetPort changed (node-1 still sends to the old port)",
        inject: Inject::Components(|lab, real| {
            real.stop(lab, 0, "kube-proxy");
            let ports = serde_json::json!([{"name": "http", "port": 80, "protocol": "TCP",
                                             "targetPort": 9090}]);
            real.patch_service("web", serde_json::json!({"spec": {"ports": ports}}));
            // node-2's kube-proxy has the new port: the change is out.
            real.wait_rules(1, "nat", "kube-proxy.log", |rules| rules.contains(":9090"));
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: Some("kube-proxy.rules.stale"),
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "flanneld stopped on node-1, then node-3 joined (no route to its pods)",
        inject: Inject::Components(|lab, real| {
            real.stop(lab, 0, "flanneld");
            real.add_node(lab, 2);
            real.wait_programmed(&["node-1"]);
        }),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: Some("flannel.route.remote-pod-cidr"),
        to: To::Pod,
        mtu: None,
    },
];

/// The element of kube-proxy's `no-endpoint-services` map (nftables mode)
/// for the lab's service: `ClusterIP . tcp . port` ... `goto reject-chain`.
fn nft_no_endpoints(cluster: &Cluster) -> String {
    let service = &cluster.service;
    format!(
        "comment \"{}/{}:{}\" : goto reject-chain",
        service.namespace, service.name, service.port_name
    )
}

/// What kube-proxy in nftables mode does when objects change, and when it
/// is stopped: the faults of [`REAL_COMPONENT_FAULTS`] on its table.
const REAL_NFTABLES_FAULTS: &[Fault] = &[
    Fault {
        name: "no endpoint Ready: kube-proxy's reject-chain on node-1",
        inject: Inject::Components(|_, real| {
            let pods: Vec<&Pod> = real.cluster.pods().collect();
            real.set_ready(&pods, false);
            let rejected = nft_no_endpoints(&real.cluster);
            real.wait_nft(0, |rules| rules.contains(&rejected));
        }),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "kube-proxy stopped on node-1, then the endpoints Ready again (its reject is stale)",
        inject: Inject::Components(|lab, real| {
            let pods: Vec<&Pod> = real.cluster.pods().collect();
            real.set_ready(&pods, false);
            let rejected = nft_no_endpoints(&real.cluster);
            real.wait_nft(0, |rules| rules.contains(&rejected));
            real.stop(lab, 0, "kube-proxy");
            let pods: Vec<&Pod> = real.cluster.pods().collect();
            real.set_ready(&pods, true);
            // node-2's kube-proxy has seen them: the change is out.
            real.wait_nft(1, |rules| !rules.contains(&rejected));
        }),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: Some("kube-proxy.rules.stale"),
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "kube-proxy stopped on node-1, then the Service's targetPort changed (node-1 still sends to the old port)",
        inject: Inject::Components(|lab, real| {
            real.stop(lab, 0, "kube-proxy");
            let ports = serde_json::json!([{"name": "http", "port": 80, "protocol": "TCP",
                                             "targetPort": 9090}]);
            real.patch_service("web", serde_json::json!({"spec": {"ports": ports}}));
            real.wait_nft(1, |rules| rules.contains(". 9090"));
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: Some("kube-proxy.rules.stale"),
        to: To::Service("web"),
        mtu: None,
    },
];

/// A case of the real-components lab's Services: nothing broken, the flow
/// to `to` on `port` must go as kube-proxy programs it.
const fn service_case(
    name: &'static str,
    to: To,
    port: u16,
    expected: Disposition,
    blamed: Option<&'static str>,
) -> Fault {
    Fault {
        name,
        inject: Inject::Kernel(|_| {}),
        blamed,
        expected,
        protocol: Protocol::Tcp,
        port: Some(port),
        finds: None,
        to,
        mtu: None,
    }
}

/// The Services of the real-components lab ([`real::SERVICES`]) as
/// kube-proxy programs them.
const REAL_SERVICE_FAULTS: &[Fault] = &[
    service_case(
        "a NodePort on node-2's address",
        To::NodePort { node: 1 },
        30080,
        Disposition::Delivered,
        None,
    ),
    service_case(
        "a LoadBalancer's ingress IP (the status written by the test)",
        To::Address("203.0.113.10"),
        80,
        Disposition::Delivered,
        None,
    ),
    // flanneld masquerades a pod's traffic to a node's address (outside the
    // cluster CIDR): node-2 sees node-1's address, external traffic, and
    // has no local endpoint for it.
    service_case(
        "a NodePort with externalTrafficPolicy Local and endpoints on node-1 only, on node-2's address (the pod masqueraded: external there, dropped)",
        To::NodePort { node: 1 },
        30081,
        Disposition::DeniedByNetfilter,
        Some("node-2"),
    ),
    service_case(
        "internalTrafficPolicy Local with endpoints on node-2 only (none on node-1: kube-proxy drops)",
        To::Service("web-node-2-local"),
        80,
        Disposition::DeniedByNetfilter,
        Some("node-1"),
    ),
    service_case(
        "sessionAffinity ClientIP",
        To::Service("web-affinity"),
        80,
        Disposition::Delivered,
        None,
    ),
    service_case(
        "a Service whose selector matches no pod: kube-proxy's REJECT",
        To::Service("web-nobody"),
        80,
        Disposition::DeniedByNetfilter,
        Some("node-1"),
    ),
];

/// The real-components lab's Services in IPv6, on a dual-stack cluster.
const IPV6_REAL_SERVICE_FAULTS: &[Fault] = &[service_case(
    "a Service whose selector matches no pod: kube-proxy's REJECT in ip6tables",
    To::Service("web-nobody"),
    80,
    Disposition::DeniedByNetfilter,
    Some("node-1"),
)];

/// A client outside the cluster (the lab's outside host, behind the
/// underlay's router) to the real-components lab's NodePorts
/// ([`real::SERVICES`]), at the node the fault names.
const REAL_FROM_OUTSIDE_FAULTS: &[Fault] = &[
    service_case(
        "from outside to a NodePort (externalTrafficPolicy Cluster) at node-2: masqueraded to any backend, the reply un-NATed there",
        To::NodePort { node: 1 },
        30080,
        Disposition::Delivered,
        None,
    ),
    service_case(
        "from outside to a NodePort with externalTrafficPolicy Local at node-1, where its endpoints are (the client's address kept)",
        To::NodePort { node: 0 },
        30081,
        Disposition::Delivered,
        None,
    ),
    service_case(
        "from outside to a NodePort with externalTrafficPolicy Local at node-2, which has no endpoint of it (dropped)",
        To::NodePort { node: 1 },
        30081,
        Disposition::DeniedByNetfilter,
        Some("node-2"),
    ),
];

/// The cases only real Calico has.
const REAL_CALICO_FAULTS: &[Fault] = &[Fault {
    name: "felix restarted on node-1 with a NetworkPolicy added that denies node-1's pods all egress",
    inject: Inject::Components(|lab, real| {
        real.stop(lab, 0, "calico-node");
        real.create(&serde_json::json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "deny-node-1-egress", "namespace": "default"},
            "spec": {
                "podSelector": {"matchLabels": {"node": "node-1"}},
                "policyTypes": ["Egress"],
            },
        }));
        real.restart_felix(lab, 0);
        // felix's egress policy chain is there once it has synced.
        real.wait_rules(0, "filter", "felix.log", |rules| {
            rules.contains(":cali-po-")
        });
    }),
    blamed: Some("node-1"),
    expected: Disposition::DeniedByNetfilter,
    protocol: Protocol::Tcp,
    port: Some(8080),
    finds: None,
    to: To::Pod,
    mtu: None,
}];

/// How many cases CI runs of a real-components group whose faults a
/// scripted group also runs (its twin): each real case is a fresh cluster,
/// half a minute or more (a minute on kubelets), and the twin runs every one
/// of them in seconds, so CI runs an evenly spaced sample of this many,
/// the first (the healthy flow) always among them. The groups with no twin
/// (the faults only the components show, Cilium, Canal) run whole.
const CI_SAMPLE_OF_A_TWINNED_GROUP: usize = 3;

/// Which of a group's cases run in CI's full run, as a stride: every
/// `n`th case, from the first. Every case (1) of a scripted group or of a
/// real group without a scripted twin; an evenly spaced sample of
/// [`CI_SAMPLE_OF_A_TWINNED_GROUP`] of a twinned real group, all of them
/// with `SKOOP_LAB_KUBELET=all` (kubelet groups, issue 31) or
/// `SKOOP_LAB_REAL=all` (the netns nodes'), which naming a case beyond the
/// sample in `SKOOP_LAB_CASE` needs too.
fn ci_stride(group: &Group) -> usize {
    let all = match group.lab {
        LabKind::Kubelet(_) => "SKOOP_LAB_KUBELET",
        LabKind::Real(..) | LabKind::RealDualStack(..) | LabKind::RealIpv6Only(..) => {
            "SKOOP_LAB_REAL"
        }
        LabKind::Scripted(_) | LabKind::DualStack(..) | LabKind::Routed { .. } => return 1,
    };
    let names = |faults: &[Fault]| faults.iter().map(|fault| fault.name).collect::<Vec<_>>();
    let twinned = TOPOLOGIES
        .iter()
        .any(|other| other.lab.scripted().is_some() && names(other.faults) == names(group.faults));
    if !twinned || std::env::var(all).is_ok_and(|value| value == "all") {
        return 1;
    }
    group.faults.len().div_ceil(CI_SAMPLE_OF_A_TWINNED_GROUP)
}

/// Whether the groups running kube-router (kube-router's, k3s's) run: when
/// a case is asked for by name (`SKOOP_LAB_CASE`), or with
/// `SKOOP_LAB_KUBE_ROUTER=1`; not in CI's full run. kube-router v2.1.0's
/// NetworkPolicy controller restores the filter table from a copy it saved,
/// and kube-proxy's rules written meanwhile are lost (a sync failing
/// on a missing KUBE-FORWARD, or a Service not answering until kube-proxy's
/// next change): in 11 of about 116 case runs on 2026-12-06 a cluster
/// never became, or did not stay, healthy. That is the components', not skoop's, and a CI
/// run must not fail on it (`tests/lab/README.md`, "kube-router").
fn runs_kube_router(asked_by_name: bool) -> bool {
    asked_by_name || std::env::var("SKOOP_LAB_KUBE_ROUTER").is_ok_and(|on| on == "1")
}

/// The cases of the VXLAN lab.
const VXLAN_FAULTS: &[Fault] = &[
    Fault {
        name: "healthy (tcp)",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "healthy (icmp)",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "nothing listens on the port",
        inject: Inject::Kernel(|_| {}),
        blamed: Some("default/web-3"),
        expected: Disposition::NoListener,
        protocol: Protocol::Tcp,
        port: Some(9999),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "a pod to itself (its local route, through lo)",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Sender,
        mtu: None,
    },
    Fault {
        name: "a pod to itself on a port nothing listens on",
        inject: Inject::Kernel(|_| {}),
        blamed: Some("default/web-0"),
        expected: Disposition::NoListener,
        protocol: Protocol::Tcp,
        port: Some(9999),
        finds: None,
        to: To::Sender,
        mtu: None,
    },
    Fault {
        name: "route to the remote pod CIDR deleted on node-1",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "route", "del", &pod_cidr(c, 1)])),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "flannel.1 down on node-1",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "link", "set", "flannel.1", "down"])),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "flannel.1 down on node-2 (the receiving VTEP)",
        inject: Inject::Kernel(|c| node_run(c, 1, &["ip", "link", "set", "flannel.1", "down"])),
        blamed: Some("node-2"),
        expected: Disposition::NoListener,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "VXLAN neighbour entry missing on node-1",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                0,
                &[
                    "ip",
                    "neigh",
                    "del",
                    &pod_cidr_address(c, 1, 0),
                    "dev",
                    "flannel.1",
                ],
            )
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "VXLAN FDB entry missing on node-1",
        inject: Inject::Kernel(|c| {
            delete_vtep_fdb_entry(c, 0, "flannel.1", &c.nodes[1].ip.to_string())
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "VXLAN FDB entry on node-1 for node-2's VTEP pointing at node-1 itself",
        inject: Inject::Kernel(|c| {
            let (own, remote) = (c.nodes[0].ip.to_string(), c.nodes[1].ip.to_string());
            let fdb = c.nodes[0]
                .ns
                .run(&["bridge", "fdb", "show", "dev", "flannel.1"]);
            let entry = fdb
                .lines()
                .find(|l| l.contains(&format!("dst {remote}")))
                .unwrap_or_else(|| panic!("FDB entry for {remote}"));
            let mac = entry.split_whitespace().next().expect("MAC");
            node_run(
                c,
                0,
                &[
                    "bridge",
                    "fdb",
                    "del",
                    mac,
                    "dev",
                    "flannel.1",
                    "dst",
                    &remote,
                ],
            );
            node_run(
                c,
                0,
                &[
                    "bridge",
                    "fdb",
                    "append",
                    mac,
                    "dev",
                    "flannel.1",
                    "dst",
                    &own,
                ],
            );
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: Some("flannel.vxlan.fdb"),
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "ip_forward off on node-2",
        inject: Inject::Kernel(|c| {
            node_run(c, 1, &["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"])
        }),
        blamed: Some("node-2"),
        expected: Disposition::ForwardingDisabled,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "FORWARD drop for the pod on node-1",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                0,
                &[
                    "iptables",
                    "-I",
                    "FORWARD",
                    "1",
                    "-d",
                    &endpoints(c).1.ip().to_string(),
                    "-j",
                    "DROP",
                ],
            )
        }),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "INPUT drop of VXLAN on node-2",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                1,
                &[
                    "iptables", "-I", "INPUT", "1", "-p", "udp", "--dport", "8472", "-j", "DROP",
                ],
            )
        }),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "REJECT of the port in the destination pod",
        inject: Inject::Kernel(|c| {
            let pod = endpoints(c).1;
            pod.ns.run(&[
                "iptables", "-I", "INPUT", "1", "-p", "tcp", "--dport", "8080", "-j", "REJECT",
            ]);
        }),
        blamed: Some("default/web-3"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "pod's route to the cluster via a gateway nobody has",
        inject: Inject::Kernel(|c| {
            let pod = endpoints(c).0;
            pod.ns.run(&[
                "ip",
                "route",
                "replace",
                "10.244.0.0/16",
                "via",
                &pod_cidr_address(c, 0, 99),
                "dev",
                "eth0",
            ]);
        }),
        blamed: Some("default/web-0"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "pod lo down (the kernel still delivers)",
        inject: Inject::Kernel(|c| {
            let pod = endpoints(c).1;
            pod.ns.run(&["ip", "link", "set", "lo", "down"]);
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "strict rp_filter on node-2 with the route back via eth0",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                1,
                &[
                    "ip",
                    "route",
                    "replace",
                    &pod_cidr(c, 0),
                    "via",
                    &c.nodes[0].ip.to_string(),
                    "dev",
                    "eth0",
                ],
            );
            node_run(
                c,
                1,
                &["sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=1"],
            );
        }),
        blamed: Some("node-2"),
        expected: Disposition::RpFilter,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "veth of the destination pod down on node-2",
        inject: Inject::Kernel(|c| {
            let pod = endpoints(c).1;
            node_run(c, 1, &["ip", "link", "set", &pod.host_veth, "down"]);
        }),
        blamed: Some("node-2"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "VXLAN FDB entry missing on node-2 (the reply is lost)",
        inject: Inject::Kernel(|c| {
            delete_vtep_fdb_entry(c, 1, "flannel.1", &c.nodes[0].ip.to_string())
        }),
        blamed: Some("node-2"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "healthy, to the ClusterIP service",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "kube-proxy's service rules flushed on node-1",
        inject: Inject::Kernel(|c| {
            node_run(c, 0, &["iptables", "-t", "nat", "-F", "KUBE-SERVICES"])
        }),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "service without endpoints: kube-proxy's REJECT on node-1",
        inject: Inject::Kernel(|c| {
            // What kube-proxy writes once the last endpoint is gone: no DNAT,
            // a REJECT in the filter table.
            node_run(c, 0, &["iptables", "-t", "nat", "-F", "KUBE-SERVICES"]);
            let service = format!("{}/32", c.service.cluster_ip());
            node_run(
                c,
                0,
                &[
                    "iptables",
                    "-I",
                    "INPUT",
                    "1",
                    "-d",
                    &service,
                    "-p",
                    "tcp",
                    "--dport",
                    "80",
                    "-m",
                    "comment",
                    "--comment",
                    "default/web:http has no endpoints",
                    "-j",
                    "REJECT",
                    "--reject-with",
                    "icmp-port-unreachable",
                ],
            );
            node_run(
                c,
                0,
                &[
                    "iptables",
                    "-I",
                    "FORWARD",
                    "1",
                    "-d",
                    &service,
                    "-p",
                    "tcp",
                    "--dport",
                    "80",
                    "-m",
                    "comment",
                    "--comment",
                    "default/web:http has no endpoints",
                    "-j",
                    "REJECT",
                    "--reject-with",
                    "icmp-port-unreachable",
                ],
            );
        }),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "service DNAT to an address no pod has, on node-1",
        inject: Inject::Kernel(|c| {
            let rules = c.nodes[0].ns.run(&["iptables-save", "-t", "nat"]);
            let chain = rules
                .lines()
                .find_map(|l| l.strip_prefix(':').filter(|l| l.starts_with("KUBE-SVC-")))
                .and_then(|l| l.split_whitespace().next())
                .expect("the service's KUBE-SVC chain")
                .to_string();
            node_run(c, 0, &["iptables", "-t", "nat", "-F", &chain]);
            node_run(
                c,
                0,
                &[
                    "iptables",
                    "-t",
                    "nat",
                    "-A",
                    &chain,
                    "-p",
                    "tcp",
                    "-j",
                    "DNAT",
                    "--to-destination",
                    &format!("{}:8080", pod_cidr_address(c, 1, 99)),
                ],
            );
        }),
        blamed: Some("node-2"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "healthy: a DF ping of the pod's MTU",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: Some(PacketSize::InterfaceMtu),
            warns: None,
        }),
    },
    Fault {
        name: "pods at 1500 over flannel.1 at 1450: a DF ping of the pods' MTU",
        inject: Inject::Kernel(|c| pods_at_mtu(c, 1500)),
        blamed: Some("node-1"),
        expected: Disposition::MtuExceeded,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: Some(PacketSize::InterfaceMtu),
            warns: None,
        }),
    },
    Fault {
        name: "pods at 1500 over flannel.1 at 1450: a TCP transfer (path MTU discovery)",
        inject: Inject::Kernel(|c| pods_at_mtu(c, 1500)),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: None,
            warns: Some("kernel.mtu.path"),
        }),
    },
    Fault {
        name: "web-0's veth at 1400 on node-1: a DF ping of the pod's MTU",
        inject: Inject::Kernel(narrow_first_veth),
        blamed: Some("node-1"),
        expected: Disposition::MtuExceeded,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: Some(PacketSize::InterfaceMtu),
            warns: None,
        }),
    },
    Fault {
        name: "web-0's veth at 1400 on node-1: a TCP transfer (segmentation offload passes)",
        inject: Inject::Kernel(narrow_first_veth),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: None,
            warns: Some("kernel.mtu.path"),
        }),
    },
    Fault {
        name: "underlay eth0 at 1400 under flannel.1 at 1450: a DF ping of the pod's MTU (VXLAN packets fragmented)",
        inject: Inject::Kernel(|c| {
            for node in &c.nodes {
                set_mtu(&node.ns, "eth0", 1400);
            }
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: Some(PacketSize::InterfaceMtu),
            warns: Some("kernel.mtu.fragmented"),
        }),
    },
    Fault {
        name: "underlay eth0 at 1400 under flannel.1 at 1450 with df set: a DF ping of the pod's MTU (a black hole)",
        inject: Inject::Kernel(|c| {
            for node in &c.nodes {
                set_mtu(&node.ns, "eth0", 1400);
                node.ns.ip("link set flannel.1 type vxlan df set");
            }
        }),
        blamed: Some("node-1"),
        expected: Disposition::MtuExceeded,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: Some(PacketSize::InterfaceMtu),
            warns: None,
        }),
    },
];

/// Flannel VXLAN's IPv6 side on a dual-stack lab (`flannel-v6.1`, VXLAN
/// over the IPv6 underlay): the baselines, and a fault at each of the IPv6
/// tunnel's stages.
const IPV6_VXLAN_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    HEALTHY_ICMPV6,
    HEALTHY_TO_IPV6_CLUSTER_IP,
    HEALTHY_SAME_NODE,
    Fault {
        name: "flannel-v6.1's neighbour entry for node-2's IPv6 VTEP missing on node-1",
        inject: Inject::Kernel(|c| {
            let vtep6 = c.nodes[1]
                .pod_cidr6
                .expect("dual-stack")
                .network()
                .to_string();
            node_run(
                c,
                0,
                &["ip", "-6", "neigh", "del", &vtep6, "dev", "flannel-v6.1"],
            );
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        ..HEALTHY_TCP
    },
    Fault {
        name: "flannel-v6.1's FDB entry for node-2 missing on node-1",
        inject: Inject::Kernel(|c| {
            let remote = c.nodes[1].ip6.expect("dual-stack").to_string();
            delete_vtep_fdb_entry(c, 0, "flannel-v6.1", &remote);
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        finds: Some("flannel.vxlan.fdb-ipv6"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "flannel-v6.1 down on node-1",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "link", "set", "flannel-v6.1", "down"])),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        finds: Some("flannel.vxlan.device-ipv6"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "flannel-v6.1 down on node-2 (the receiving VTEP)",
        inject: Inject::Kernel(|c| node_run(c, 1, &["ip", "link", "set", "flannel-v6.1", "down"])),
        blamed: Some("node-2"),
        expected: Disposition::NoListener,
        finds: Some("kernel.vxlan.no-device"),
        ..HEALTHY_TCP
    },
    // flanneld asks 1450 of flannel-v6.1 as of flannel.1, but the kernel
    // caps a VXLAN device over IPv6 at its underlay's MTU less 70: 1430,
    // under the pods' 1450.
    Fault {
        name: "healthy: a DF ping of the pod's MTU (1450) over flannel-v6.1, which the kernel caps at 1430",
        blamed: Some("node-1"),
        expected: Disposition::MtuExceeded,
        protocol: Protocol::Icmpv6,
        port: None,
        mtu: Some(MtuCase {
            size: Some(PacketSize::InterfaceMtu),
            warns: None,
        }),
        ..HEALTHY_TCP
    },
    Fault {
        name: "healthy: a TCP transfer over flannel-v6.1 at 1430 (path MTU discovery)",
        mtu: Some(MtuCase {
            size: None,
            warns: Some("kernel.mtu.path"),
        }),
        ..HEALTHY_TCP
    },
    Fault {
        name: "ip6tables drop of UDP 8472 on node-2's INPUT (the IPv6 VXLAN packets)",
        inject: Inject::Kernel(|c| drop_udp6_input_on_node_2(c, "8472")),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        ..HEALTHY_TCP
    },
];

/// The cases of the host-gw lab: pod CIDRs routed via the peer node's address.
/// Flannel host-gw's IPv6 side on a dual-stack lab: the baselines, and an
/// IPv6 fault at each stage, each localised at its hop.
const IPV6_HOST_GW_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    HEALTHY_ICMPV6,
    HEALTHY_TO_IPV6_CLUSTER_IP,
    HEALTHY_SAME_NODE,
    Fault {
        name: "IPv6 route to the remote pod CIDR deleted on node-1",
        inject: Inject::Kernel(delete_ipv6_route_to_node_2_pods),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "IPv6 forwarding off on node-2",
        inject: Inject::Kernel(|c| node_sysctl(c, 1, "net.ipv6.conf.all.forwarding=0")),
        blamed: Some("node-2"),
        expected: Disposition::ForwardingDisabled,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "web-3's IPv6 address tentative (duplicate address detection not done)",
        inject: Inject::Kernel(|c| {
            let pod = c.nodes[1].pods.last().expect("web-3");
            let ip6 = pod.ip6.expect("dual-stack").to_string();
            // Each of DAD's probes waits retrans_time: a minute, longer than the case.
            pod.ns
                .run(&["sysctl", "-qw", "net.ipv6.neigh.eth0.retrans_time_ms=60000"]);
            pod.ns
                .run(&["sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=1"]);
            pod.ns.ip(&format!("-6 addr del {ip6}/64 dev eth0"));
            pod.ns.ip(&format!("-6 addr add {ip6}/64 dev eth0"));
        }),
        blamed: Some("node-2"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "web-3's eth0 at MTU 1200: below IPv6's 1280, the link loses IPv6",
        inject: Inject::Kernel(|c| {
            let pod = c.nodes[1].pods.last().expect("web-3");
            set_mtu(&pod.ns, "eth0", 1200);
        }),
        blamed: Some("node-2"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "a wrong IPv6 default route in web-0 (a gateway nobody holds)",
        inject: Inject::Kernel(|c| {
            let pod = &c.nodes[0].pods[0];
            let cidr6 = c.nodes[0].pod_cidr6.expect("dual-stack");
            let nobody = std::net::Ipv6Addr::from(u128::from(cidr6.network()) + 0x99);
            // The pod's route to the cluster's IPv6 network, where it has
            // one, would take the flow past the default route.
            let _ = pod.ns.exec(&["ip", "-6", "route", "del", CLUSTER_CIDR6]);
            pod.ns
                .ip(&format!("-6 route replace default via {nobody} dev eth0"));
        }),
        blamed: Some("default/web-0"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "ip6tables FORWARD drop of the IPv6 cluster CIDR on node-2",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                1,
                &[
                    "ip6tables",
                    "-I",
                    "FORWARD",
                    "1",
                    "-s",
                    CLUSTER_CIDR6,
                    "-j",
                    "DROP",
                ],
            );
        }),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
];

const HOST_GW_FAULTS: &[Fault] = &[
    Fault {
        name: "healthy (tcp)",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "healthy (icmp)",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "healthy, to the ClusterIP service",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "route to the remote pod CIDR deleted on node-1",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "route", "del", &pod_cidr(c, 1)])),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "route to the remote pod CIDR via the wrong node on node-2 (the reply is lost)",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                1,
                &[
                    "ip",
                    "route",
                    "replace",
                    &pod_cidr(c, 0),
                    "via",
                    "172.18.0.99",
                    "dev",
                    "eth0",
                ],
            )
        }),
        blamed: Some("node-2"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "ip_forward off on node-2",
        inject: Inject::Kernel(|c| {
            node_run(c, 1, &["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"])
        }),
        blamed: Some("node-2"),
        expected: Disposition::ForwardingDisabled,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "FORWARD drop of the cluster CIDR on node-2",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                1,
                &[
                    "iptables",
                    "-I",
                    "FORWARD",
                    "1",
                    "-s",
                    "10.244.0.0/16",
                    "-j",
                    "DROP",
                ],
            )
        }),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "node-1's eth0 at 1400 under pods at 1500: a DF ping of the pod's MTU",
        inject: Inject::Kernel(|c| set_mtu(&c.nodes[0].ns, "eth0", 1400)),
        blamed: Some("node-1"),
        expected: Disposition::MtuExceeded,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: Some(PacketSize::InterfaceMtu),
            warns: None,
        }),
    },
    Fault {
        name: "cni0 down on node-2",
        inject: Inject::Kernel(|c| node_run(c, 1, &["ip", "link", "set", "cni0", "down"])),
        blamed: Some("node-2"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    // Who answers ARP on the underlay (issue 12): the kernel, not the
    // cluster's idea of who holds an address, decides where a frame goes.
    Fault {
        name: "node-2's pod CIDR routed on-link out of node-1's eth0 (nobody there holds the pod's address)",
        inject: Inject::Kernel(|c| route_pod_cidr_on_link(c, &[])),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: Some("kernel.neighbour.unanswered"),
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "node-2's pod CIDR routed on-link out of node-1's eth0, proxy ARP on node-2's eth0",
        inject: Inject::Kernel(|c| {
            node_sysctl(c, 1, "net.ipv4.conf.eth0.proxy_arp=1");
            route_pod_cidr_on_link(c, &[]);
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "node-2's pod CIDR routed on-link out of node-1's eth0, a permanent neighbour entry for the pod at node-2's MAC",
        inject: Inject::Kernel(|c| {
            let mac = crate::cluster::mac("node-2/eth0");
            route_pod_cidr_on_link(c, &[&mac]);
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "node-2's pod CIDR routed on-link out of node-1's eth0, a permanent neighbour entry for the pod at a MAC nobody has",
        inject: Inject::Kernel(|c| route_pod_cidr_on_link(c, &["02:00:00:00:00:99"])),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: Some("kernel.neighbour.permanent"),
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "node-2's pod CIDR via node-2's cni0 address on node-1 (arp_ignore 0: node-2 answers for it on eth0)",
        inject: Inject::Kernel(|c| route_via_remote_gateway(c, &[])),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "node-2's pod CIDR via node-2's cni0 address on node-1, arp_ignore=1 on node-2",
        inject: Inject::Kernel(|c| {
            route_via_remote_gateway(c, &["net.ipv4.conf.all.arp_ignore=1"])
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: Some("kernel.neighbour.unanswered"),
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "node-2's pod CIDR via node-2's cni0 address on node-1, arp_ignore=3 on node-2 (it is not host-scope)",
        inject: Inject::Kernel(|c| {
            route_via_remote_gateway(c, &["net.ipv4.conf.eth0.arp_ignore=3"])
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "arp_ignore=2 on node-2 (node-1 asks from its address in node-2's subnet)",
        inject: Inject::Kernel(|c| node_sysctl(c, 1, "net.ipv4.conf.all.arp_ignore=2")),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "arp_ignore=8 on node-2's eth0 (it answers no ARP request)",
        inject: Inject::Kernel(|c| {
            node_sysctl(c, 1, "net.ipv4.conf.eth0.arp_ignore=8");
            flush_underlay_neighbours(c);
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: Some("kernel.neighbour.unanswered"),
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "arp_filter=1 on node-2 (its route back to node-1 leaves by eth0)",
        inject: Inject::Kernel(|c| node_sysctl(c, 1, "net.ipv4.conf.all.arp_filter=1")),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "arp_filter=1 on node-2 with node-1's address routed by cni0 there",
        inject: Inject::Kernel(|c| {
            node_sysctl(c, 1, "net.ipv4.conf.all.arp_filter=1");
            node_sysctl(c, 1, "net.ipv4.conf.all.rp_filter=0");
            node_sysctl(c, 1, "net.ipv4.conf.eth0.rp_filter=0");
            let node_1 = format!("{}/32", c.nodes[0].ip);
            node_run(c, 1, &["ip", "route", "add", &node_1, "dev", "cni0"]);
            flush_underlay_neighbours(c);
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: Some("kernel.neighbour.unanswered"),
        to: To::Pod,
        mtu: None,
    },
];

/// On node-1, routes node-2's pod CIDR on-link out of eth0 with no gateway,
/// so that node-1 asks the underlay for the pod's own address; with a MAC
/// address, a permanent neighbour entry for the last pod there answers
/// instead of ARP.
fn route_pod_cidr_on_link(cluster: &Cluster, permanent_mac: &[&str]) {
    let cidr = pod_cidr(cluster, 1);
    node_run(
        cluster,
        0,
        &["ip", "route", "replace", &cidr, "dev", "eth0"],
    );
    if let Some(mac) = permanent_mac.first() {
        let pod = cluster.nodes[1].pods.last().expect("node-2 has pods");
        let ip = pod.ip().to_string();
        node_run(
            cluster,
            0,
            &[
                "ip",
                "neigh",
                "replace",
                &ip,
                "lladdr",
                mac,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ],
        );
    }
}

/// On node-1, routes node-2's pod CIDR via node-2's cni0 address (on-link
/// out of eth0): node-2 must answer ARP on eth0 for an address of another
/// of its interfaces, under the `settings` (sysctls) given to it.
fn route_via_remote_gateway(cluster: &Cluster, settings: &[&str]) {
    for setting in settings {
        node_sysctl(cluster, 1, setting);
    }
    let (cidr, gateway) = (pod_cidr(cluster, 1), cluster.nodes[1].gateway().to_string());
    node_run(
        cluster,
        0,
        &[
            "ip", "route", "replace", &cidr, "via", &gateway, "dev", "eth0", "onlink",
        ],
    );
    flush_underlay_neighbours(cluster);
}

/// Forgets what the nodes learnt on the underlay, so that the flow's frames
/// need fresh ARP answers.
fn flush_underlay_neighbours(cluster: &Cluster) {
    for node in 0..cluster.nodes.len() {
        node_run(cluster, node, &["ip", "neigh", "flush", "dev", "eth0"]);
    }
}

/// Sets a sysctl in `node`'s namespace.
fn node_sysctl(cluster: &Cluster, node: usize, setting: &str) {
    node_run(cluster, node, &["sysctl", "-q", "-w", setting]);
}

/// The healthy flow, the first case of every Calico topology.
/// Flannel VXLAN with node-2 behind the router: the VXLAN packets are
/// addressed to node-2, which the router routes.
const VXLAN_ACROSS_ROUTER_FAULTS: &[Fault] = &[Fault {
    name: "healthy, VXLAN to a node behind a router (tcp)",
    finds: Some("engine.underlay.routed"),
    ..HEALTHY_TCP
}];

/// Pod addresses sent unencapsulated to a router that has no route for
/// them: flanneld's host-gw routes to a node on another subnet are refused
/// by the kernel, and Calico's mesh routes a block of a node on another
/// subnet via the node's gateway (no BGP peering with the routers). The
/// packet is lost beyond the gateway, as when a route to a pod CIDR is
/// missing.
const NO_POD_ROUTES_ACROSS_ROUTER: &[Fault] = &[Fault {
    name: "pods on a node behind a router that knows no pod routes (tcp)",
    blamed: Some("node-1"),
    expected: Disposition::ExitsCluster,
    finds: Some("kernel.route.leaves-cluster"),
    ..HEALTHY_TCP
}];

/// Calico `vxlanMode: CrossSubnet` with node-3 behind the router: VXLAN to
/// it, direct routes to node-2 on node-1's own subnet.
const CROSS_SUBNET_FAULTS: &[Fault] = &[
    Fault {
        name: "healthy, VXLAN to a node behind a router (tcp)",
        finds: Some("engine.underlay.routed"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "healthy, direct to a node on the same subnet (tcp)",
        to: To::PodOn { node: 1 },
        ..HEALTHY_TCP
    },
];

const HEALTHY_TCP: Fault = Fault {
    name: "healthy (tcp)",
    inject: Inject::Kernel(|_| {}),
    blamed: None,
    expected: Disposition::Delivered,
    protocol: Protocol::Tcp,
    port: Some(8080),
    finds: None,
    to: To::Pod,
    mtu: None,
};

/// The IPv6 baselines of the dual-stack labs beside [`HEALTHY_TCP`]: a ping
/// (ICMPv6) and the Service's IPv6 ClusterIP.
const HEALTHY_ICMPV6: Fault = Fault {
    name: "healthy (icmpv6)",
    protocol: Protocol::Icmpv6,
    port: None,
    ..HEALTHY_TCP
};
/// The same flow to a pod on the sender's own node (bridged, or routed by
/// the node to the pod's veth).
const HEALTHY_SAME_NODE: Fault = Fault {
    name: "healthy, to a pod on the same node",
    to: To::PodOn { node: 0 },
    ..HEALTHY_TCP
};
/// The baselines a dual-stack lab runs in IPv4 (its faults are IPv6's):
/// the dual-stack objects and dumps must leave the IPv4 answers as the
/// IPv4 labs give them.
const DUAL_STACK_IPV4_BASELINES: &[Fault] = &[
    HEALTHY_TCP,
    HEALTHY_SAME_NODE,
    Fault {
        name: "healthy, to the ClusterIP service",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
];
const HEALTHY_TO_IPV6_CLUSTER_IP: Fault = Fault {
    name: "healthy, to the IPv6 ClusterIP",
    port: Some(80),
    to: To::Service("web"),
    ..HEALTHY_TCP
};

/// The cases of both Calico labs (BGP and VXLAN).
const CALICO_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    Fault {
        name: "healthy, to the ClusterIP service",
        inject: Inject::Kernel(|_| {}),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(80),
        finds: None,
        to: To::Service("web"),
        mtu: None,
    },
    Fault {
        name: "ping denied by the NetworkPolicy (felix's cali-tw chain)",
        inject: Inject::Kernel(|_| {}),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "a port the NetworkPolicy does not open, where nothing listens either",
        inject: Inject::Kernel(|_| {}),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(9999),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "felix DROP at the top of web-0's cali-fw chain on node-1",
        inject: Inject::Kernel(|c| {
            let chain = format!("cali-fw-{}", endpoints(c).0.host_veth);
            node_run(c, 0, &["iptables", "-I", &chain, "1", "-j", "DROP"]);
        }),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "proxy_arp off on web-0's cali veth",
        inject: Inject::Kernel(|c| {
            let veth = &endpoints(c).0.host_veth;
            node_sysctl(c, 0, &format!("net.ipv4.conf.{veth}.proxy_arp=0"));
        }),
        blamed: Some("default/web-0"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "proxy_arp off on web-0's cali veth but on for all (the kernel ORs them)",
        inject: Inject::Kernel(|c| {
            let veth = &endpoints(c).0.host_veth;
            node_sysctl(c, 0, &format!("net.ipv4.conf.{veth}.proxy_arp=0"));
            node_sysctl(c, 0, "net.ipv4.conf.all.proxy_arp=1");
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "forwarding off on web-0's cali veth (no proxy ARP without it)",
        inject: Inject::Kernel(|c| {
            let veth = &endpoints(c).0.host_veth;
            node_sysctl(c, 0, &format!("net.ipv4.conf.{veth}.forwarding=0"));
        }),
        blamed: Some("default/web-0"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "web-0's default route via another link-local address (proxy ARP answers it too)",
        inject: Inject::Kernel(|c| {
            endpoints(c).0.ns.run(&[
                "ip",
                "route",
                "replace",
                "default",
                "via",
                "169.254.1.2",
                "dev",
                "eth0",
                "onlink",
            ]);
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "web-0's default route deleted",
        inject: Inject::Kernel(|c| {
            endpoints(c)
                .0
                .ns
                .run(&["ip", "route", "del", "default", "via", calico::POD_GATEWAY]);
        }),
        blamed: Some("default/web-0"),
        expected: Disposition::NoRoute,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "route to node-2's block deleted on node-1",
        inject: Inject::Kernel(|c| {
            let block = calico::block(&c.nodes[1]).to_string();
            node_run(c, 0, &["ip", "route", "del", &block]);
        }),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "web-3's cali veth down on node-2 (its route goes, the block's blackhole takes over)",
        inject: Inject::Kernel(|c| {
            let pod = endpoints(c).1;
            node_run(c, 1, &["ip", "link", "set", &pod.host_veth, "down"]);
        }),
        blamed: Some("node-2"),
        expected: Disposition::UnreachableRoute,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "ip_forward off on node-2",
        inject: Inject::Kernel(|c| node_sysctl(c, 1, "net.ipv4.ip_forward=0")),
        blamed: Some("node-2"),
        expected: Disposition::ForwardingDisabled,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
];

/// The cases of the Calico BGP lab only.
const CALICO_BGP_FAULTS: &[Fault] = &[Fault {
    name: "route to node-2's block via an address no node has, on node-1",
    inject: Inject::Kernel(|c| {
        let block = calico::block(&c.nodes[1]).to_string();
        node_run(
            c,
            0,
            &[
                "ip",
                "route",
                "replace",
                &block,
                "via",
                "172.18.0.99",
                "dev",
                "eth0",
                "proto",
                "bird",
            ],
        );
    }),
    blamed: Some("node-1"),
    expected: Disposition::ExitsCluster,
    protocol: Protocol::Tcp,
    port: Some(8080),
    finds: None,
    to: To::Pod,
    mtu: None,
}];

/// The cases of the Calico VXLAN lab only.
const CALICO_VXLAN_FAULTS: &[Fault] = &[
    Fault {
        name: "pods at 1500 over vxlan.calico at 1450: a TCP transfer (path MTU discovery)",
        inject: Inject::Kernel(|c| pods_at_mtu(c, 1500)),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: None,
            warns: Some("kernel.mtu.path"),
        }),
    },
    Fault {
        name: "pods at 1500 over vxlan.calico at 1450: a DF ping of the pods' MTU",
        inject: Inject::Kernel(|c| pods_at_mtu(c, 1500)),
        blamed: Some("node-1"),
        expected: Disposition::MtuExceeded,
        protocol: Protocol::Icmp,
        port: None,
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: Some(PacketSize::InterfaceMtu),
            warns: None,
        }),
    },
    Fault {
        name: "pods at 1500 over vxlan.calico at 1450, node-1 dropping the ICMP destination-unreachable it sends: a TCP transfer (a black hole)",
        inject: Inject::Kernel(|c| {
            pods_at_mtu(c, 1500);
            // A common hardening rule (no port-unreachable for scans), which
            // takes fragmentation-needed with it.
            node_run(
                c,
                0,
                &[
                    "iptables",
                    "-I",
                    "OUTPUT",
                    "1",
                    "-p",
                    "icmp",
                    "--icmp-type",
                    "destination-unreachable",
                    "-j",
                    "DROP",
                ],
            );
        }),
        blamed: None,
        expected: Disposition::Delivered,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: Some(MtuCase {
            size: None,
            warns: None,
        }),
    },
    Fault {
        name: "vxlan.calico neighbour entry missing on node-1",
        inject: Inject::Kernel(|c| {
            let vtep = calico::vtep_ip(&c.nodes[1]).to_string();
            node_run(c, 0, &["ip", "neigh", "del", &vtep, "dev", calico::VTEP]);
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "vxlan.calico FDB entry missing on node-1",
        inject: Inject::Kernel(|c| {
            delete_vtep_fdb_entry(c, 0, calico::VTEP, &c.nodes[1].ip.to_string())
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "vxlan.calico down on node-1 (its routes go, the default route takes over)",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "link", "set", calico::VTEP, "down"])),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
    Fault {
        name: "node-1 missing from felix's VXLAN peers ipset on node-2 (felix drops its VXLAN)",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                1,
                &[
                    "ipset",
                    "del",
                    "cali40all-vxlan-net",
                    &c.nodes[0].ip.to_string(),
                ],
            )
        }),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Tcp,
        port: Some(8080),
        finds: None,
        to: To::Pod,
        mtu: None,
    },
];

/// A flow from web-0 to the host outside the cluster.
const OUTSIDE_FAULTS: &[Fault] = &[TO_OUTSIDE];

/// The flow to the host outside the cluster, nothing broken.
const TO_OUTSIDE: Fault = Fault {
    name: "to a host outside the cluster",
    inject: Inject::Kernel(|_| {}),
    blamed: None,
    expected: Disposition::ExitsCluster,
    protocol: Protocol::Tcp,
    port: Some(8080),
    finds: None,
    to: To::Pod,
    mtu: None,
};

/// Deletes the rule of `chain` (iptables `table`) on `node` that jumps to
/// `target`.
fn delete_jump(cluster: &Cluster, node: usize, chain: (&str, &str), target: &str) {
    delete_jump_in(Family::Ipv4, cluster, node, chain, target);
}

/// [`delete_jump`] in the rules of `family` (ip6tables for IPv6).
fn delete_jump_in(
    family: Family,
    cluster: &Cluster,
    node: usize,
    (table, chain): (&str, &str),
    target: &str,
) {
    let iptables = match family {
        Family::Ipv4 => "iptables",
        Family::Ipv6 => "ip6tables",
    };
    let rules = cluster.nodes[node]
        .ns
        .run(&[iptables, "-t", table, "-S", chain]);
    let number = rules
        .lines()
        .filter(|l| l.starts_with("-A "))
        .position(|l| {
            l.split(' ')
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w == ["-j", target])
        })
        .unwrap_or_else(|| panic!("no rule of {chain} jumps to {target}: {rules}"))
        + 1;
    let number = number.to_string();
    node_run(
        cluster,
        node,
        &[iptables, "-t", table, "-D", chain, &number],
    );
}

/// node-1 loses its route to node-2's pod CIDR, which a CNI that routes
/// each node's pod CIDR via the node (`finds` names the CNI's check of it)
/// installed: the packet leaves by the default route.
const fn remote_pod_cidr_route_deleted(finds: &'static str) -> Fault {
    Fault {
        name: "route to node-2's pod CIDR deleted on node-1",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "route", "del", &pod_cidr(c, 1)])),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        finds: Some(finds),
        ..HEALTHY_TCP
    }
}

/// node-2 stops forwarding in a family (`finds` names the CNI's check of
/// the sysctl; IPv6's `all`, which sets every interface's): nothing from
/// node-1 reaches its pods in that family.
const fn forwarding_off_on_node_2(family: Family, finds: &'static str) -> Fault {
    let (name, inject): (&'static str, fn(&Cluster)) = match family {
        Family::Ipv4 => ("ip_forward off on node-2", |c| {
            node_sysctl(c, 1, "net.ipv4.ip_forward=0")
        }),
        Family::Ipv6 => ("IPv6 forwarding off on node-2", |c| {
            node_sysctl(c, 1, "net.ipv6.conf.all.forwarding=0")
        }),
    };
    Fault {
        name,
        inject: Inject::Kernel(inject),
        blamed: Some("node-2"),
        expected: Disposition::ForwardingDisabled,
        finds: Some(finds),
        ..HEALTHY_TCP
    }
}

/// node-2's ip6tables dropping UDP to `port` at the top of INPUT: the IPv6
/// VXLAN packets of a CNI whose tunnel listens there.
fn drop_udp6_input_on_node_2(cluster: &Cluster, port: &str) {
    let rule = [
        "-I", "INPUT", "1", "-p", "udp", "--dport", port, "-j", "DROP",
    ];
    node_run(cluster, 1, &[&["ip6tables"][..], &rule].concat());
}

/// kube-router's NetworkPolicy isolating node-2's pods, with node-2's jump
/// from FORWARD to its firewall deleted: nothing enforces the policy, and
/// the flow is delivered (the kube-router and k3s groups).
const KUBE_ROUTER_FIREWALL_JUMP_DELETED: Fault = Fault {
    name: "that NetworkPolicy, with FORWARD's jump to KUBE-ROUTER-FORWARD deleted on node-2",
    inject: Inject::Components(|_, real| {
        isolate_node_2_by_kube_router(real);
        real.freeze();
        delete_jump(
            &real.cluster,
            1,
            ("filter", "FORWARD"),
            "KUBE-ROUTER-FORWARD",
        );
    }),
    finds: Some("kube-router.firewall.jump"),
    ..HEALTHY_TCP
};

/// kindnet's cases between pods (`kindnet.rs`).
const KINDNET_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    Fault {
        name: "healthy (icmp)",
        protocol: Protocol::Icmp,
        port: None,
        ..HEALTHY_TCP
    },
    Fault {
        name: "healthy, to the ClusterIP service",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
    remote_pod_cidr_route_deleted("kindnet.route.remote-pod-cidr"),
    Fault {
        name: "the destination pod's /32 host route deleted on node-2",
        inject: Inject::Kernel(|c| {
            let pod = endpoints(c).1.ip().to_string();
            node_run(c, 1, &["ip", "route", "del", &format!("{pod}/32")]);
        }),
        blamed: Some("node-2"),
        expected: Disposition::ExitsCluster,
        finds: Some("kernel.route.leaves-cluster"),
        ..HEALTHY_TCP
    },
    forwarding_off_on_node_2(Family::Ipv4, "kindnet.sysctl.ip-forward"),
];

/// kindnet's IPv6 side on a dual-stack lab (ptp and host-local giving each
/// pod an address of each family, kindnetd routing each node's IPv6 pod
/// CIDR via its IPv6 address): the baselines and an IPv6 fault per stage.
const IPV6_KINDNET_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    HEALTHY_ICMPV6,
    HEALTHY_TO_IPV6_CLUSTER_IP,
    HEALTHY_SAME_NODE,
    Fault {
        name: "IPv6 route to node-2's IPv6 pod CIDR deleted on node-1",
        inject: Inject::Kernel(delete_ipv6_route_to_node_2_pods),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        finds: Some("kindnet.route.remote-pod-cidr-ipv6"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "the destination pod's /128 host route deleted on node-2",
        inject: Inject::Kernel(delete_destination_pod_ipv6_route),
        blamed: Some("node-2"),
        expected: Disposition::ExitsCluster,
        finds: Some("kernel.route.leaves-cluster"),
        ..HEALTHY_TCP
    },
    forwarding_off_on_node_2(Family::Ipv6, "kindnet.sysctl.ipv6-forwarding"),
];

/// Calico BGP's IPv6 side on a dual-stack lab (an IPv6 pool without
/// encapsulation: BIRD routes each peer's IPv6 block via the peer's IPv6
/// address, `proto bird`): the baselines, and a fault at the route, at
/// forwarding and at the pod's own route.
const IPV6_CALICO_BGP_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    HEALTHY_TO_IPV6_CLUSTER_IP,
    HEALTHY_SAME_NODE,
    Fault {
        name: "BIRD's IPv6 route to node-2's IPv6 block deleted on node-1",
        inject: Inject::Kernel(|c| {
            let pod = endpoints(c).1.ip6.expect("dual-stack").to_string();
            let routes = c.nodes[0]
                .ns
                .run(&["ip", "-6", "route", "show", "match", &pod]);
            let block6 = routes
                .lines()
                .find(|route| route.contains("proto bird"))
                .and_then(|route| route.split_whitespace().next())
                .unwrap_or_else(|| panic!("no BIRD route to {pod}: {routes}"))
                .to_string();
            node_run(c, 0, &["ip", "-6", "route", "del", &block6]);
        }),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        finds: Some("calico.route.remote-block-ipv6"),
        ..HEALTHY_TCP
    },
    forwarding_off_on_node_2(Family::Ipv6, "calico.sysctl.ipv6-forwarding"),
];

/// Calico VXLAN's IPv6 side on a dual-stack lab (an IPv6 pool in VXLAN
/// mode: `vxlan-v6.calico` over the IPv6 underlay, pods behind the host
/// veth's link-local gateway): the baselines, and an IPv6 fault at each
/// stage, each localised at its hop.
const IPV6_CALICO_VXLAN_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    // The lab's NetworkPolicy opens TCP 8080 alone: felix denies pings in
    // IPv6 as in IPv4.
    Fault {
        name: "ping (icmpv6) denied by the NetworkPolicy (felix's cali-tw chain in ip6tables)",
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        finds: Some("networkpolicy.ingress.denied"),
        ..HEALTHY_ICMPV6
    },
    HEALTHY_TO_IPV6_CLUSTER_IP,
    HEALTHY_SAME_NODE,
    Fault {
        name: "IPv6 route to node-2's IPv6 block deleted on node-1",
        inject: Inject::Kernel(|c| {
            // The block felix routes to web-3's address (the lab's, or the
            // one Calico's IPAM picked on the real components).
            let pod = endpoints(c).1.ip6.expect("dual-stack").to_string();
            let routes = c.nodes[0]
                .ns
                .run(&["ip", "-6", "route", "show", "match", &pod]);
            let block6 = routes
                .lines()
                .find(|route| route.contains(&format!("dev {}", calico::VTEP6)))
                .and_then(|route| route.split_whitespace().next())
                .unwrap_or_else(|| panic!("no route to {pod} by {}: {routes}", calico::VTEP6))
                .to_string();
            node_run(c, 0, &["ip", "-6", "route", "del", &block6]);
        }),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        finds: Some("calico.route.remote-block-ipv6"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "vxlan-v6.calico's neighbour entry for node-2's IPv6 VTEP missing on node-1",
        inject: Inject::Kernel(|c| {
            // node-2's is the one VTEP node-1 has a neighbour entry for.
            node_run(
                c,
                0,
                &[
                    "ip",
                    "-6",
                    "neigh",
                    "flush",
                    "dev",
                    calico::VTEP6,
                    "nud",
                    "permanent",
                ],
            );
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        finds: Some("calico.vxlan.neighbour-ipv6"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "vxlan-v6.calico's FDB entry for node-2 missing on node-1",
        inject: Inject::Kernel(|c| {
            let remote = c.nodes[1].ip6.expect("dual-stack").to_string();
            delete_vtep_fdb_entry(c, 0, calico::VTEP6, &remote);
        }),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        finds: Some("calico.vxlan.fdb-ipv6"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "vxlan-v6.calico down on node-1",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "link", "set", calico::VTEP6, "down"])),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        finds: Some("calico.vxlan.device-ipv6"),
        ..HEALTHY_TCP
    },
    forwarding_off_on_node_2(Family::Ipv6, "calico.sysctl.ipv6-forwarding"),
    Fault {
        name: "ip6tables drop of UDP 4789 on node-2's INPUT (the IPv6 VXLAN packets)",
        inject: Inject::Kernel(|c| drop_udp6_input_on_node_2(c, "4789")),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        ..HEALTHY_TCP
    },
    Fault {
        name: "the destination pod's /128 route deleted on node-2 (the IPv6 block's blackhole takes over)",
        inject: Inject::Kernel(delete_destination_pod_ipv6_route),
        blamed: Some("node-2"),
        expected: Disposition::UnreachableRoute,
        finds: Some("calico.pod.route-ipv6"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "a wrong IPv6 default route in web-0 (a link-local gateway nobody holds)",
        inject: Inject::Kernel(|c| {
            endpoints(c)
                .0
                .ns
                .ip("-6 route replace default via fe80::1 dev eth0");
        }),
        blamed: Some("default/web-0"),
        expected: Disposition::NeighborFailed,
        finds: Some("calico.pod.gateway-ipv6"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "web-0's IPv6 default route deleted",
        inject: Inject::Kernel(|c| {
            endpoints(c).0.ns.ip(&format!(
                "-6 route del default via {} dev eth0",
                calico::POD_GATEWAY6
            ));
        }),
        blamed: Some("default/web-0"),
        expected: Disposition::NoRoute,
        finds: Some("calico.pod.gateway-ipv6"),
        ..HEALTHY_TCP
    },
];

/// kindnet's cases to the host outside the cluster: masqueraded to the
/// node by `KIND-MASQ-AGENT`, or leaving with the pod's address when the
/// chain or its jump is gone (and then unanswered).
const KINDNET_OUTSIDE_FAULTS: &[Fault] = &[
    TO_OUTSIDE,
    Fault {
        name: "masquerade chain KIND-MASQ-AGENT deleted on node-1",
        inject: Inject::Kernel(|c| {
            delete_jump(c, 0, ("nat", "POSTROUTING"), kindnet::MASQ_CHAIN);
            node_run(c, 0, &["iptables", "-t", "nat", "-F", kindnet::MASQ_CHAIN]);
            node_run(c, 0, &["iptables", "-t", "nat", "-X", kindnet::MASQ_CHAIN]);
        }),
        finds: Some("kindnet.masquerade.chain"),
        ..TO_OUTSIDE
    },
    Fault {
        name: "POSTROUTING's jump to KIND-MASQ-AGENT deleted on node-1",
        inject: Inject::Kernel(|c| delete_jump(c, 0, ("nat", "POSTROUTING"), kindnet::MASQ_CHAIN)),
        finds: Some("kindnet.masquerade.jump"),
        ..TO_OUTSIDE
    },
];

/// A lab CNI, shared by the threads that run the cases.
type LabCni = &'static (dyn Cni + Sync + std::panic::RefUnwindSafe);

/// What programs a case's nodes: the lab's own scripts for a CNI (with
/// every node on one subnet, or the last one behind the underlay's router),
/// or the real components (`real.rs`).
#[derive(Clone, Copy)]
enum LabKind {
    Scripted(LabCni),
    /// A dual-stack scripted lab whose flows are asked in one family
    /// (`--family`).
    DualStack(LabCni, Family),
    /// A scripted lab of `nodes` nodes whose last node is on a second
    /// subnet, reached through the underlay's router (not in the snapshot).
    Routed {
        name: &'static str,
        cni: LabCni,
        nodes: u8,
    },
    Real(RealCni, ProxyMode),
    /// The real components on a dual-stack cluster (`IpFamilies::DualStack`),
    /// whose flows are asked in one family (`--family`).
    RealDualStack(RealCni, ProxyMode, Family),
    /// The real components on an IPv6-only cluster (`IpFamilies::Ipv6Only`):
    /// every name stands for an IPv6 address, so no `--family` is given.
    RealIpv6Only(RealCni, ProxyMode),
    /// The real components with a kubelet and containerd on each node
    /// (`RealCluster::build_kubelet`), diagnosed live through collector pods.
    Kubelet(RealCni),
}

impl LabKind {
    /// The CNI and the shape of a lab the scripts build.
    fn scripted(self) -> Option<(LabCni, Topology)> {
        let (cni, nodes, across_router) = match self {
            LabKind::Scripted(cni) | LabKind::DualStack(cni, _) => (cni, 2, false),
            LabKind::Routed { cni, nodes, .. } => (cni, nodes, true),
            LabKind::Real(..)
            | LabKind::RealDualStack(..)
            | LabKind::RealIpv6Only(..)
            | LabKind::Kubelet(..) => return None,
        };
        let topology = Topology {
            nodes,
            pods_per_node: 2,
            across_router,
            dual_stack: matches!(self, LabKind::DualStack(..)),
        };
        Some((cni, topology))
    }

    fn topology_name(self) -> &'static str {
        match self {
            LabKind::Scripted(cni) => cni.topology_name(),
            LabKind::DualStack(cni, Family::Ipv6) => match cni.topology_name() {
                "flannel-host-gw" => "flannel-host-gw, dual-stack, flows in IPv6",
                "flannel-vxlan" => "flannel-vxlan, dual-stack, flows in IPv6",
                "kindnet" => "kindnet, dual-stack, flows in IPv6",
                "calico-vxlan" => "calico-vxlan, dual-stack, flows in IPv6",
                "calico-bgp" => "calico-bgp, dual-stack, flows in IPv6",
                other => unreachable!("no dual-stack lab of {other}"),
            },
            LabKind::DualStack(cni, Family::Ipv4) => match cni.topology_name() {
                "flannel-host-gw" => "flannel-host-gw, dual-stack, flows in IPv4",
                "flannel-vxlan" => "flannel-vxlan, dual-stack, flows in IPv4",
                "kindnet" => "kindnet, dual-stack, flows in IPv4",
                "calico-vxlan" => "calico-vxlan, dual-stack, flows in IPv4",
                other => unreachable!("no dual-stack lab of {other}"),
            },
            LabKind::Routed { name, .. } => name,
            LabKind::Real(cni, ProxyMode::Iptables) => cni.topology_name(),
            LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Nftables) => {
                "flannel-vxlan (real components, kube-proxy in nftables mode)"
            }
            LabKind::Real(_, ProxyMode::Nftables) => {
                unreachable!("the nftables cases run on Flannel VXLAN")
            }
            LabKind::RealDualStack(RealCni::FlannelVxlan, ProxyMode::Iptables, Family::Ipv6) => {
                "flannel-vxlan (real components), dual-stack, flows in IPv6"
            }
            LabKind::RealDualStack(RealCni::FlannelHostGw, ProxyMode::Iptables, Family::Ipv6) => {
                "flannel-host-gw (real components), dual-stack, flows in IPv6"
            }
            LabKind::RealDualStack(RealCni::FlannelVxlan, ProxyMode::Nftables, Family::Ipv6) => {
                "flannel-vxlan (real components, kube-proxy in nftables mode), dual-stack, flows in IPv6"
            }
            LabKind::RealDualStack(RealCni::CalicoVxlan, ProxyMode::Iptables, Family::Ipv6) => {
                "calico-vxlan (real components), dual-stack, flows in IPv6"
            }
            LabKind::RealDualStack(RealCni::FlannelVxlan, ProxyMode::Iptables, Family::Ipv4) => {
                "flannel-vxlan (real components), dual-stack, flows in IPv4"
            }
            LabKind::RealDualStack(RealCni::CalicoVxlan, ProxyMode::Iptables, Family::Ipv4) => {
                "calico-vxlan (real components), dual-stack, flows in IPv4"
            }
            LabKind::RealDualStack(..) => {
                unreachable!("the real dual-stack lab runs Flannel and Calico VXLAN")
            }
            LabKind::RealIpv6Only(RealCni::FlannelVxlan, ProxyMode::Iptables) => {
                "flannel-vxlan (real components), IPv6-only"
            }
            LabKind::RealIpv6Only(..) => {
                unreachable!("the real IPv6-only lab runs Flannel VXLAN")
            }
            LabKind::Kubelet(RealCni::FlannelVxlan) => {
                "flannel-vxlan (real components, kubelet and containerd)"
            }
            LabKind::Kubelet(RealCni::CalicoVxlan) => {
                "calico-vxlan (real components, kubelet and containerd)"
            }
            LabKind::Kubelet(
                RealCni::FlannelHostGw
                | RealCni::Cilium(_)
                | RealCni::KubeRouter
                | RealCni::Canal
                | RealCni::K3s,
            ) => {
                unreachable!("the kubelet lab runs Flannel VXLAN and Calico VXLAN")
            }
        }
    }
}

impl LabKind {
    /// The family the flows of its cases are asked in.
    fn family(self) -> Family {
        match self {
            LabKind::DualStack(_, family) => family,
            LabKind::RealDualStack(_, _, family) => family,
            LabKind::RealIpv6Only(..) => Family::Ipv6,
            _ => Family::Ipv4,
        }
    }

    /// The family a case's question names (`--family`): on a dual-stack
    /// lab, where a name stands for an address of each.
    fn asked_family(self) -> Option<Family> {
        matches!(self, LabKind::DualStack(..) | LabKind::RealDualStack(..)).then(|| self.family())
    }
}

/// Where a group's flows go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    /// `default/web-3` on node-2, or the ClusterIP service where the fault says so.
    Cluster,
    /// The host outside the cluster ([`OUTSIDE_IP`]). skoop cannot see
    /// past the cluster's edge, so what it is compared on is what leaves:
    /// the flow works exactly when skoop says it exits the cluster with a
    /// source the outside can answer (`Diagnosis::succeeds`): the lab's
    /// outside network routes back to the nodes only, never to pod
    /// addresses.
    Outside,
    /// From the host outside the cluster to the node the fault's
    /// [`To::NodePort`] names, which its packets arrive at (`--via`).
    FromOutside,
    /// From the `node`th node's own namespace (`--from node/NAME`) to the
    /// fault's destination.
    FromNode(usize),
}

/// A lab topology and the cases run on it.
struct Group {
    lab: LabKind,
    peer: Peer,
    faults: &'static [Fault],
}

/// The cases of a dual-stack scripted lab, asked in `family`.
const fn dual_stack(cni: LabCni, family: Family, peer: Peer, faults: &'static [Fault]) -> Group {
    Group {
        lab: LabKind::DualStack(cni, family),
        peer,
        faults,
    }
}

/// The cases of a scripted lab of `nodes` nodes, the last behind the
/// underlay's router, flows to pods.
const fn across_router(
    name: &'static str,
    cni: LabCni,
    nodes: u8,
    faults: &'static [Fault],
) -> Group {
    Group {
        lab: LabKind::Routed { name, cni, nodes },
        peer: Peer::Cluster,
        faults,
    }
}

/// Each lab topology with its cases.
const TOPOLOGIES: &[Group] = &[
    Group {
        lab: LabKind::Scripted(&Flannel::VXLAN),
        peer: Peer::Cluster,
        faults: VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Flannel::HOST_GW),
        peer: Peer::Cluster,
        faults: HOST_GW_FAULTS,
    },
    dual_stack(
        &Flannel::HOST_GW,
        Family::Ipv6,
        Peer::Cluster,
        IPV6_HOST_GW_FAULTS,
    ),
    dual_stack(
        &Flannel::HOST_GW,
        Family::Ipv6,
        Peer::FromNode(0),
        FROM_NODE_BASELINES,
    ),
    dual_stack(
        &Flannel::HOST_GW,
        Family::Ipv6,
        Peer::Outside,
        FLANNEL_IPV6_OUTSIDE_FAULTS,
    ),
    dual_stack(
        &Flannel::HOST_GW,
        Family::Ipv4,
        Peer::Cluster,
        DUAL_STACK_IPV4_BASELINES,
    ),
    dual_stack(
        &Flannel::HOST_GW,
        Family::Ipv4,
        Peer::FromNode(0),
        FROM_NODE_BASELINES,
    ),
    dual_stack(
        &Flannel::HOST_GW,
        Family::Ipv4,
        Peer::Outside,
        OUTSIDE_FAULTS,
    ),
    dual_stack(
        &Flannel::VXLAN,
        Family::Ipv6,
        Peer::Cluster,
        IPV6_VXLAN_FAULTS,
    ),
    dual_stack(
        &Flannel::VXLAN,
        Family::Ipv6,
        Peer::FromNode(0),
        FROM_NODE_BASELINES,
    ),
    dual_stack(
        &Flannel::VXLAN,
        Family::Ipv6,
        Peer::Outside,
        FLANNEL_IPV6_OUTSIDE_FAULTS,
    ),
    dual_stack(
        &Flannel::VXLAN,
        Family::Ipv4,
        Peer::Cluster,
        DUAL_STACK_IPV4_BASELINES,
    ),
    dual_stack(
        &Flannel::VXLAN,
        Family::Ipv4,
        Peer::FromNode(0),
        FROM_NODE_BASELINES,
    ),
    dual_stack(&Flannel::VXLAN, Family::Ipv4, Peer::Outside, OUTSIDE_FAULTS),
    dual_stack(&Kindnet, Family::Ipv6, Peer::Cluster, IPV6_KINDNET_FAULTS),
    dual_stack(
        &Kindnet,
        Family::Ipv6,
        Peer::FromNode(0),
        FROM_NODE_BASELINES,
    ),
    dual_stack(
        &Kindnet,
        Family::Ipv6,
        Peer::Outside,
        KINDNET_IPV6_OUTSIDE_FAULTS,
    ),
    dual_stack(
        &Kindnet,
        Family::Ipv4,
        Peer::Cluster,
        DUAL_STACK_IPV4_BASELINES,
    ),
    dual_stack(
        &Kindnet,
        Family::Ipv4,
        Peer::FromNode(0),
        FROM_NODE_BASELINES,
    ),
    dual_stack(&Kindnet, Family::Ipv4, Peer::Outside, OUTSIDE_FAULTS),
    dual_stack(
        &Calico::VXLAN,
        Family::Ipv6,
        Peer::Cluster,
        IPV6_CALICO_VXLAN_FAULTS,
    ),
    dual_stack(
        &Calico::BGP,
        Family::Ipv6,
        Peer::Cluster,
        IPV6_CALICO_BGP_FAULTS,
    ),
    dual_stack(
        &Calico::BGP,
        Family::Ipv6,
        Peer::Outside,
        CALICO_IPV6_OUTSIDE_FAULTS,
    ),
    dual_stack(
        &Calico::VXLAN,
        Family::Ipv6,
        Peer::FromNode(0),
        CALICO_FROM_NODE_FAULTS,
    ),
    dual_stack(
        &Calico::VXLAN,
        Family::Ipv6,
        Peer::Outside,
        CALICO_IPV6_OUTSIDE_FAULTS,
    ),
    dual_stack(
        &Calico::VXLAN,
        Family::Ipv4,
        Peer::Cluster,
        DUAL_STACK_IPV4_BASELINES,
    ),
    dual_stack(
        &Calico::VXLAN,
        Family::Ipv4,
        Peer::FromNode(0),
        CALICO_FROM_NODE_FAULTS,
    ),
    dual_stack(&Calico::VXLAN, Family::Ipv4, Peer::Outside, OUTSIDE_FAULTS),
    Group {
        lab: LabKind::Scripted(&Calico::BGP),
        peer: Peer::Cluster,
        faults: CALICO_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Calico::BGP),
        peer: Peer::Cluster,
        faults: CALICO_BGP_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Calico::BGP),
        peer: Peer::Outside,
        faults: OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Calico::BGP_WITHOUT_NAT_OUTGOING),
        peer: Peer::Outside,
        faults: OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Calico::BGP_POOL_SAYS_VXLAN),
        peer: Peer::Cluster,
        faults: &[HEALTHY_TCP],
    },
    Group {
        lab: LabKind::Scripted(&Calico::VXLAN),
        peer: Peer::Cluster,
        faults: CALICO_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Calico::VXLAN),
        peer: Peer::Cluster,
        faults: CALICO_VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Calico::VXLAN),
        peer: Peer::Outside,
        faults: OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Kindnet),
        peer: Peer::Cluster,
        faults: KINDNET_FAULTS,
    },
    Group {
        lab: LabKind::Scripted(&Kindnet),
        peer: Peer::Outside,
        faults: KINDNET_OUTSIDE_FAULTS,
    },
    across_router(
        "flannel-vxlan across a router",
        &Flannel::VXLAN,
        2,
        VXLAN_ACROSS_ROUTER_FAULTS,
    ),
    across_router(
        "flannel-host-gw across a router",
        &Flannel::HOST_GW,
        2,
        NO_POD_ROUTES_ACROSS_ROUTER,
    ),
    across_router(
        "calico-vxlan-cross-subnet across a router",
        &Calico::VXLAN_CROSS_SUBNET,
        3,
        CROSS_SUBNET_FAULTS,
    ),
    across_router(
        "calico-bgp across a router, without peering",
        &Calico::BGP,
        2,
        NO_POD_ROUTES_ACROSS_ROUTER,
    ),
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::Kubelet(RealCni::FlannelVxlan),
        peer: Peer::Cluster,
        faults: VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: REAL_COMPONENT_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: REAL_SERVICE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Iptables),
        peer: Peer::FromOutside,
        faults: REAL_FROM_OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Iptables),
        peer: Peer::Outside,
        faults: OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Nftables),
        peer: Peer::Cluster,
        faults: &[HEALTHY_TCP],
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Nftables),
        peer: Peer::Cluster,
        faults: REAL_SERVICE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Nftables),
        peer: Peer::Cluster,
        faults: REAL_NFTABLES_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelVxlan, ProxyMode::Nftables),
        peer: Peer::Outside,
        faults: OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::RealDualStack(RealCni::FlannelVxlan, ProxyMode::Iptables, Family::Ipv6),
        peer: Peer::Cluster,
        faults: IPV6_VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::RealDualStack(RealCni::FlannelVxlan, ProxyMode::Iptables, Family::Ipv6),
        peer: Peer::Cluster,
        faults: IPV6_REAL_SERVICE_FAULTS,
    },
    Group {
        lab: LabKind::RealDualStack(RealCni::FlannelHostGw, ProxyMode::Iptables, Family::Ipv6),
        peer: Peer::Cluster,
        faults: IPV6_HOST_GW_FAULTS,
    },
    Group {
        lab: LabKind::RealDualStack(RealCni::CalicoVxlan, ProxyMode::Iptables, Family::Ipv6),
        peer: Peer::Cluster,
        faults: IPV6_CALICO_VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::RealDualStack(RealCni::FlannelVxlan, ProxyMode::Nftables, Family::Ipv6),
        peer: Peer::Cluster,
        faults: &[HEALTHY_TO_IPV6_CLUSTER_IP],
    },
    Group {
        lab: LabKind::RealDualStack(RealCni::FlannelVxlan, ProxyMode::Iptables, Family::Ipv4),
        peer: Peer::Cluster,
        faults: DUAL_STACK_IPV4_BASELINES,
    },
    Group {
        lab: LabKind::RealDualStack(RealCni::CalicoVxlan, ProxyMode::Iptables, Family::Ipv4),
        peer: Peer::Cluster,
        faults: DUAL_STACK_IPV4_BASELINES,
    },
    Group {
        lab: LabKind::RealIpv6Only(RealCni::FlannelVxlan, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: IPV6_VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::RealIpv6Only(RealCni::FlannelVxlan, ProxyMode::Iptables),
        peer: Peer::FromNode(0),
        faults: FROM_NODE_BASELINES,
    },
    Group {
        lab: LabKind::RealIpv6Only(RealCni::FlannelVxlan, ProxyMode::Iptables),
        peer: Peer::Outside,
        faults: FLANNEL_IPV6_OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::FlannelHostGw, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: HOST_GW_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::CalicoVxlan, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: CALICO_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::CalicoVxlan, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: CALICO_VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::Kubelet(RealCni::CalicoVxlan),
        peer: Peer::Cluster,
        faults: CALICO_VXLAN_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::CalicoVxlan, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: REAL_CALICO_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::CalicoVxlan, ProxyMode::Iptables),
        peer: Peer::Outside,
        faults: OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::Cilium(cilium::Mode::Vxlan), ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: CILIUM_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::Cilium(cilium::Mode::Vxlan), ProxyMode::Iptables),
        peer: Peer::Outside,
        faults: OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::Cilium(cilium::Mode::Vxlan), ProxyMode::Iptables),
        peer: Peer::FromNode(0),
        faults: FROM_NODE_BASELINES,
    },
    Group {
        lab: LabKind::Real(
            RealCni::Cilium(cilium::Mode::VxlanEndpointRoutes),
            ProxyMode::Iptables,
        ),
        peer: Peer::Cluster,
        faults: CILIUM_ENDPOINT_ROUTES_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::Cilium(cilium::Mode::Native), ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: CILIUM_NATIVE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::Canal, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: CANAL_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::Canal, ProxyMode::Iptables),
        peer: Peer::Outside,
        faults: CANAL_OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::KubeRouter, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: KUBE_ROUTER_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::KubeRouter, ProxyMode::Iptables),
        peer: Peer::Outside,
        faults: KUBE_ROUTER_OUTSIDE_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::K3s, ProxyMode::Iptables),
        peer: Peer::Cluster,
        faults: K3S_FAULTS,
    },
    Group {
        lab: LabKind::Real(RealCni::K3s, ProxyMode::Iptables),
        peer: Peer::Outside,
        faults: K3S_OUTSIDE_FAULTS,
    },
];

/// The cases of the lab of k3s's embedded parts (`real.rs`, `RealCni::K3s`):
/// flannel's VXLAN and `cni0`, kube-router's firewall, kube-proxy; a fault
/// per thing one of them programs.
const K3S_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    Fault {
        name: "healthy, to the ClusterIP service (kube-proxy)",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
    remote_pod_cidr_route_deleted("flannel.route.remote-pod-cidr"),
    Fault {
        name: "cni0 down on node-2",
        inject: Inject::Kernel(|c| node_run(c, 1, &["ip", "link", "set", "cni0", "down"])),
        blamed: Some("node-2"),
        expected: Disposition::ExitsCluster,
        finds: Some("flannel.bridge.down"),
        ..HEALTHY_TCP
    },
    forwarding_off_on_node_2(Family::Ipv4, "flannel.sysctl.ip-forward"),
    Fault {
        name: "a NetworkPolicy isolating node-2's pods for ingress (kube-router's firewall)",
        inject: Inject::Components(|_, real| isolate_node_2_by_kube_router(real)),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        finds: Some("kube-router.policy.denied"),
        ..HEALTHY_TCP
    },
    KUBE_ROUTER_FIREWALL_JUMP_DELETED,
];

/// k3s's pods to a host outside the cluster: its flannel masquerades them
/// (`FLANNEL-POSTRTG`), or, with the rule for traffic leaving the cluster
/// network deleted, they leave with their own address, unanswered.
const K3S_OUTSIDE_FAULTS: &[Fault] = &[
    TO_OUTSIDE,
    Fault {
        name: "flannel's MASQUERADE rule for traffic leaving the cluster network deleted on node-1",
        inject: Inject::Kernel(|c| delete_jump(c, 0, ("nat", "FLANNEL-POSTRTG"), "MASQUERADE")),
        finds: Some("flannel.masquerade.decision"),
        ..TO_OUTSIDE
    },
];

/// The cases of the lab whose nodes run RKE2's Canal (`real.rs`): flanneld's
/// VXLAN between the nodes, felix enforcing the NetworkPolicy, the calico
/// CNI plugin's `cali*` veths with proxy ARP.
const CANAL_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    Fault {
        name: "healthy, to the ClusterIP service",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "ping denied by the NetworkPolicy (felix's cali-tw chain)",
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Icmp,
        port: None,
        ..HEALTHY_TCP
    },
    Fault {
        name: "route to node-2's pod CIDR deleted on node-1",
        inject: Inject::Kernel(|c| {
            node_run(
                c,
                0,
                &["ip", "route", "del", &c.nodes[1].pod_cidr().to_string()],
            );
        }),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        ..HEALTHY_TCP
    },
    Fault {
        name: "flannel.1 down on node-1",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "link", "set", "flannel.1", "down"])),
        blamed: Some("node-1"),
        expected: Disposition::ExitsCluster,
        ..HEALTHY_TCP
    },
    Fault {
        name: "ip_forward off on node-2",
        inject: Inject::Kernel(|c| node_sysctl(c, 1, "net.ipv4.ip_forward=0")),
        blamed: Some("node-2"),
        expected: Disposition::ForwardingDisabled,
        ..HEALTHY_TCP
    },
    Fault {
        name: "proxy_arp off on web-0's cali veth",
        inject: Inject::Kernel(|c| {
            let veth = &endpoints(c).0.host_veth;
            node_sysctl(c, 0, &format!("net.ipv4.conf.{veth}.proxy_arp=0"));
        }),
        blamed: Some("default/web-0"),
        expected: Disposition::NeighborFailed,
        ..HEALTHY_TCP
    },
    Fault {
        name: "FORWARD's jump to cali-FORWARD deleted on node-2: the ping the NetworkPolicy denies gets through",
        inject: Inject::Kernel(|c| delete_jump(c, 1, ("filter", "FORWARD"), "cali-FORWARD")),
        protocol: Protocol::Icmp,
        port: None,
        finds: Some("calico.felix.chains"),
        ..HEALTHY_TCP
    },
];

/// Canal's pods to a host outside the cluster: flanneld masquerades them.
const CANAL_OUTSIDE_FAULTS: &[Fault] = &[
    TO_OUTSIDE,
    Fault {
        name: "flanneld's masquerade jump (FLANNEL-POSTRTG) deleted on node-1",
        inject: Inject::Kernel(|c| delete_jump(c, 0, ("nat", "POSTROUTING"), "FLANNEL-POSTRTG")),
        finds: Some("flannel.masquerade.chain"),
        ..TO_OUTSIDE
    },
];

/// From node-1's own namespace on the Calico VXLAN labs. To a pod on
/// node-2 the node's packets leave through the VXLAN device with its
/// tunnel address as source (the route's `src`), which the lab's
/// NetworkPolicy, admitting the nodes by their network (an IPv4 `ipBlock`),
/// does not hold: felix denies them at node-2, as in any Calico VXLAN cluster
/// whose policies admit nodes by their addresses. To a pod on node-1 they
/// are delivered. The Service is not asked: which backend the kernel picks,
/// local or remote, decides.
const CALICO_FROM_NODE_FAULTS: &[Fault] = &[
    Fault {
        name: "from node-1 to a pod on node-2: its VXLAN tunnel address is outside the policy's ipBlock",
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        ..HEALTHY_TCP
    },
    Fault {
        name: "from node-1 to a pod on node-1",
        to: To::PodOn { node: 0 },
        ..HEALTHY_TCP
    },
];

/// Flannel's pods to a host outside the cluster in IPv6: flanneld
/// masquerades them in ip6tables too (`EnableIPv6`), or they leave with
/// their own address, unanswered.
const FLANNEL_IPV6_OUTSIDE_FAULTS: &[Fault] = &[
    TO_OUTSIDE,
    Fault {
        name: "flanneld's IPv6 masquerade jump (FLANNEL-POSTRTG in ip6tables) deleted on node-1",
        inject: Inject::Kernel(|c| {
            delete_jump_in(
                Family::Ipv6,
                c,
                0,
                ("nat", "POSTROUTING"),
                "FLANNEL-POSTRTG",
            );
        }),
        finds: Some("flannel.masquerade.chain-ipv6"),
        ..TO_OUTSIDE
    },
    Fault {
        name: "flannel's IPv6 MASQUERADE rule for traffic leaving the cluster network deleted on node-1",
        inject: Inject::Kernel(|c| {
            delete_jump_in(Family::Ipv6, c, 0, ("nat", "FLANNEL-POSTRTG"), "MASQUERADE");
        }),
        finds: Some("flannel.masquerade.decision-ipv6"),
        ..TO_OUTSIDE
    },
];

/// kindnet's pods to a host outside the cluster in IPv6: kindnetd's
/// KIND-MASQ-AGENT in ip6tables masquerades them.
const KINDNET_IPV6_OUTSIDE_FAULTS: &[Fault] = &[
    TO_OUTSIDE,
    Fault {
        name: "ip6tables' POSTROUTING jump to KIND-MASQ-AGENT deleted on node-1",
        inject: Inject::Kernel(|c| {
            delete_jump_in(
                Family::Ipv6,
                c,
                0,
                ("nat", "POSTROUTING"),
                kindnet::MASQ_CHAIN,
            );
        }),
        finds: Some("kindnet.masquerade.jump-ipv6"),
        ..TO_OUTSIDE
    },
];

/// Calico's pods to a host outside the cluster in IPv6: felix's
/// cali-nat-outgoing in ip6tables masquerades the IPv6 pool's traffic
/// (natOutgoing).
const CALICO_IPV6_OUTSIDE_FAULTS: &[Fault] = &[
    TO_OUTSIDE,
    Fault {
        name: "ip6tables' jump to cali-nat-outgoing deleted on node-1",
        inject: Inject::Kernel(|c| {
            delete_jump_in(
                Family::Ipv6,
                c,
                0,
                ("nat", "cali-POSTROUTING"),
                "cali-nat-outgoing",
            );
        }),
        finds: Some("calico.nat-outgoing.missing-ipv6"),
        ..TO_OUTSIDE
    },
];

/// Flows from node-1's own namespace (`Peer::FromNode(0)`): to a pod on
/// each node and to the Service. On the Cilium lab its stack routes them
/// into cilium_host (a remote pod: then encapsulated by the host's program)
/// or to the pod's lxc device; kube-proxy translates a Service. The
/// dual-stack labs run them in each family.
const FROM_NODE_BASELINES: &[Fault] = &[
    Fault {
        name: "from node-1 to a pod on node-2",
        ..HEALTHY_TCP
    },
    Fault {
        name: "from node-1 to a pod on node-1",
        to: To::PodOn { node: 0 },
        ..HEALTHY_TCP
    },
    Fault {
        name: "from node-1 to the ClusterIP service",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
];

/// A NetworkPolicy isolating node-2's pods for ingress: nothing admits
/// traffic to them but from their own node.
fn isolate_node_2() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "isolate-node-2", "namespace": "default"},
        "spec": {"podSelector": {"matchLabels": {"node": "node-2"}},
                 "policyTypes": ["Ingress"]},
    })
}

/// Creates [`isolate_node_2`] as [`programmed_by_kube_router`] does.
fn isolate_node_2_by_kube_router(real: &RealCluster) {
    programmed_by_kube_router(real, 1, &isolate_node_2());
}

/// Creates the NetworkPolicy `policy` and waits until the `node`th node's
/// kube-router sends its pods' traffic through the policy's chain, and every
/// kube-router has its ipsets of the nodes back: kube-router v2.1.0's
/// policy sync restores every ipset as its controller last saved them,
/// `kube-router-pod-subnets` too, which its route controller refills on its
/// next sync.
fn programmed_by_kube_router(real: &RealCluster, node: usize, policy: &serde_json::Value) {
    let name = policy["metadata"]["name"].as_str().expect("a named policy");
    let chained = format!("run through nw policy {name}");
    real.create(policy);
    real.wait_rules(node, "filter", "kube-router.log", |rules| {
        rules.contains(&chained)
    });
    real.wait_programmed(&[]);
}

/// The cases of the lab whose nodes run kube-router (`kube_router.rs`):
/// node-1's first pod to node-2's last (web-0 to web-3), or as each says;
/// a fault per thing kube-router programs.
const KUBE_ROUTER_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    Fault {
        name: "healthy, to a pod on the same node (bridged on kube-bridge)",
        to: To::PodOn { node: 0 },
        ..HEALTHY_TCP
    },
    Fault {
        name: "healthy, to the ClusterIP service (kube-proxy)",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
    remote_pod_cidr_route_deleted("kube-router.route.remote-pod-cidr"),
    Fault {
        name: "kube-bridge down on node-2",
        inject: Inject::Kernel(|c| node_run(c, 1, &["ip", "link", "set", "kube-bridge", "down"])),
        blamed: Some("node-2"),
        expected: Disposition::ExitsCluster,
        finds: Some("kube-router.bridge.device"),
        ..HEALTHY_TCP
    },
    forwarding_off_on_node_2(Family::Ipv4, "kube-router.sysctl.ip-forward"),
    Fault {
        name: "a NetworkPolicy isolating node-2's pods for ingress",
        inject: Inject::Components(|_, real| isolate_node_2_by_kube_router(real)),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        finds: Some("kube-router.policy.denied"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "that NetworkPolicy, a ping (kube-router admits no ICMP past a policy)",
        inject: Inject::Components(|_, real| isolate_node_2_by_kube_router(real)),
        blamed: Some("node-2"),
        expected: Disposition::DeniedByNetfilter,
        protocol: Protocol::Icmp,
        port: None,
        finds: Some("kube-router.policy.denied"),
        ..HEALTHY_TCP
    },
    KUBE_ROUTER_FIREWALL_JUMP_DELETED,
    Fault {
        name: "a NetworkPolicy isolating node-1's pods for egress",
        inject: Inject::Components(|_, real| {
            let policy = serde_json::json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": "isolate-node-1-egress", "namespace": "default"},
                "spec": {"podSelector": {"matchLabels": {"node": "node-1"}},
                         "policyTypes": ["Egress"]},
            });
            programmed_by_kube_router(real, 0, &policy);
        }),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        finds: Some("kube-router.policy.denied"),
        ..HEALTHY_TCP
    },
];

/// kube-router's cases to the host outside the cluster: masqueraded to the
/// node by its pod egress rule, or leaving with the pod's address when the
/// rule is gone (and then unanswered).
const KUBE_ROUTER_OUTSIDE_FAULTS: &[Fault] = &[
    TO_OUTSIDE,
    Fault {
        name: "kube-router's MASQUERADE rule for pod egress deleted on node-1",
        inject: Inject::Kernel(|c| delete_jump(c, 0, ("nat", "POSTROUTING"), "MASQUERADE")),
        finds: Some("kube-router.masquerade.decision"),
        ..TO_OUTSIDE
    },
];

/// The cases of the lab whose nodes run Cilium's agent (`cilium.rs`):
/// node-1's first pod to node-2's last (web-0 to web-3), or as each says.
const CILIUM_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    Fault {
        name: "healthy (icmp)",
        protocol: Protocol::Icmp,
        port: None,
        ..HEALTHY_TCP
    },
    Fault {
        name: "healthy, to a pod on the same node",
        to: To::PodOn { node: 0 },
        ..HEALTHY_TCP
    },
    Fault {
        name: "healthy, to the ClusterIP service (translated by Cilium's program)",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "a ClusterIP service missing from node-1's lb map (kube-proxy translates it; the replies Cilium's programs redirect skip its un-DNAT)",
        port: Some(80),
        to: To::Service("web-affinity"),
        inject: Inject::ComponentsUncollected(
            |lab, real| {
                // The agent writes its map back (freezing stops only the other
                // components, and a frozen agent could not answer collection
                // either): stopped first, its programs and maps staying.
                real.stop(lab, 0, "cilium-agent");
                // Every slot of the frontend (its key: the address, the port in
                // network order, then the slot) out of node-1's service map.
                let map = "/sys/fs/bpf/tc/globals/cilium_lb4_services_v2";
                let frontend = real::service("web-affinity").cluster_ip.octets();
                let prefix: Vec<String> = (frontend.iter().chain(&[0, 80]))
                    .map(|byte| format!("0x{byte:02x}"))
                    .collect();
                let dump = real.in_cilium_node(0, &["bpftool", "-j", "map", "dump", "pinned", map]);
                let dump: serde_json::Value = serde_json::from_str(&dump).expect("JSON");
                let keys: Vec<Vec<String>> = (dump.as_array().into_iter().flatten())
                    .filter_map(|entry| {
                        let key: Vec<String> = (entry["key"].as_array()?.iter())
                            .map(|byte| byte.as_str().map(str::to_string))
                            .collect::<Option<_>>()?;
                        key.starts_with(&prefix).then_some(key)
                    })
                    .collect();
                assert!(
                    !keys.is_empty(),
                    "no slot of the frontend in {map}: {dump:#}"
                );
                for key in keys {
                    let mut argv = vec!["bpftool", "map", "delete", "pinned", map, "key", "hex"];
                    argv.extend(key.iter().map(|byte| byte.trim_start_matches("0x")));
                    real.in_cilium_node(0, &argv);
                }
            },
            &["datapath/status.json"],
        ),
        // Every backend fails: web-0 itself as a martian (no hairpin
        // SNAT), the three others' replies reach web-0 untranslated, which
        // is what most flows meet whichever order their addresses put the
        // backends in.
        blamed: Some("default/web-0"),
        expected: Disposition::NoListener,
        finds: Some("engine.reply.misdelivered"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "cilium-agent stopped on node-2 (the programs and maps it left keep forwarding)",
        inject: Inject::ComponentsUncollected(
            |lab, real| real.stop(lab, 1, "cilium-agent"),
            &["datapath/status.json"],
        ),
        finds: Some("cilium.agent.health"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "cilium-agent stopped on node-2, then a NetworkPolicy isolating node-2's pods (its policy maps still admit)",
        inject: Inject::ComponentsUncollected(
            |lab, real| {
                real.stop(lab, 1, "cilium-agent");
                real.create(&isolate_node_2());
            },
            &["datapath/status.json"],
        ),
        finds: Some("cilium.policy.objects"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "cilium-agent stopped on node-1, then a pod added on node-2 (node-1's ipcache lacks it)",
        inject: Inject::ComponentsUncollected(
            |lab, real| {
                real.stop(lab, 0, "cilium-agent");
                real.add_pod_on(lab, 1);
            },
            &["datapath/status.json"],
        ),
        finds: Some("cilium.ipcache.pods"),
        to: To::PodOn { node: 1 },
        ..HEALTHY_TCP
    },
    Fault {
        name: "a NetworkPolicy isolating node-2's pods for ingress",
        inject: Inject::Components(|_, real| real.create_cilium_policy(1, &isolate_node_2())),
        blamed: Some("node-2"),
        expected: Disposition::DroppedByProgram,
        finds: Some("datapath.drop"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "a CiliumNetworkPolicy denying node-1's pods ingress to node-2's",
        inject: Inject::Components(|_, real| {
            let policy = serde_json::json!({
                "apiVersion": "cilium.io/v2",
                "kind": "CiliumNetworkPolicy",
                "metadata": {"name": "deny-from-node-1", "namespace": "default"},
                "spec": {
                    "endpointSelector": {"matchLabels": {"node": "node-2"}},
                    "ingress": [{"fromEntities": ["all"]}],
                    "ingressDeny": [{"fromEndpoints": [{"matchLabels": {"node": "node-1"}}]}],
                },
            });
            real.create_cilium_policy(1, &policy);
        }),
        blamed: Some("node-2"),
        expected: Disposition::DroppedByProgram,
        finds: Some("datapath.drop"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "web-3's ipcache entry deleted on node-1 (node-2's pod CIDR still leads to it)",
        inject: Inject::Components(|_, real| {
            let ip = format!("{}/32", real.cluster.nodes[1].pods[1].ip());
            real.in_cilium_node(0, &["cilium-dbg", "bpf", "ipcache", "delete", &ip]);
        }),
        ..HEALTHY_TCP
    },
    Fault {
        name: "web-3's and node-2's pod CIDR's ipcache entries deleted on node-1",
        inject: Inject::Components(|_, real| {
            let ip = format!("{}/32", real.cluster.nodes[1].pods[1].ip());
            let cidr = real.cluster.nodes[1].pod_cidr().to_string();
            let ipcache =
                real.in_cilium_node(0, &["cilium-dbg", "bpf", "ipcache", "list", "-o", "json"]);
            let ipcache: serde_json::Value = serde_json::from_str(&ipcache).expect("JSON");
            // The agent's entry for node-2's pods (its pod CIDR as node IPAM gave it).
            let tunnelled = ipcache
                .as_object()
                .expect("an object")
                .keys()
                .find(|key| {
                    key.ends_with("/24")
                        && key.starts_with(
                            cidr.split('.')
                                .take(2)
                                .collect::<Vec<_>>()
                                .join(".")
                                .as_str(),
                        )
                })
                .cloned()
                .unwrap_or(cidr);
            real.in_cilium_node(0, &["cilium-dbg", "bpf", "ipcache", "delete", &ip]);
            real.in_cilium_node(0, &["cilium-dbg", "bpf", "ipcache", "delete", &tunnelled]);
        }),
        blamed: Some("node-1"),
        expected: Disposition::Loop,
        finds: Some("cilium.ipcache.tunnel"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "cilium_vxlan down on node-1",
        inject: Inject::Kernel(|c| node_run(c, 0, &["ip", "link", "set", "cilium_vxlan", "down"])),
        blamed: Some("node-1"),
        expected: Disposition::NeighborFailed,
        ..HEALTHY_TCP
    },
    Fault {
        name: "web-0's from-container program detached (the node's stack takes its packets)",
        inject: Inject::Kernel(|c| {
            let veth = c.nodes[0].pods[0].host_veth.clone();
            node_run(c, 0, &["tc", "filter", "del", "dev", &veth, "ingress"]);
        }),
        ..HEALTHY_TCP
    },
];

/// The cases of the Cilium lab with a route per endpoint
/// (`enable-endpoint-routes`): the node's stack routes a packet for a local
/// pod to its lxc device, where `cil_to_container` enforces the pod's
/// ingress policy.
const CILIUM_ENDPOINT_ROUTES_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    Fault {
        name: "healthy, to a pod on the same node",
        to: To::PodOn { node: 0 },
        ..HEALTHY_TCP
    },
    Fault {
        name: "healthy, to the ClusterIP service (translated by Cilium's program)",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "cilium-agent stopped on node-2, then web-3's endpoint route deleted (the agent puts it back within seconds)",
        inject: Inject::ComponentsUncollected(
            |lab, real| {
                real.stop(lab, 1, "cilium-agent");
                let ip = format!("{}/32", real.cluster.nodes[1].pods[1].ip());
                node_run(&real.cluster, 1, &["ip", "route", "del", &ip]);
            },
            &["datapath/status.json"],
        ),
        blamed: Some("node-2"),
        expected: Disposition::ExitsCluster,
        finds: Some("cilium.route.endpoint"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "kube-proxy's FORWARD rules moved ahead of Cilium's on node-1 (its INVALID drop takes the replies from the tunnel)",
        inject: Inject::Kernel(|c| {
            let jump = [
                "FORWARD",
                "-m",
                "comment",
                "--comment",
                "kubernetes forwarding rules",
                "-j",
                "KUBE-FORWARD",
            ];
            node_run(c, 0, &[&["iptables", "-D"][..], &jump[..]].concat());
            node_run(c, 0, &[&["iptables", "-I"][..], &jump[..]].concat());
        }),
        blamed: Some("node-1"),
        expected: Disposition::DeniedByNetfilter,
        finds: Some("kernel.netfilter.denied"),
        ..HEALTHY_TCP
    },
    Fault {
        name: "a NetworkPolicy isolating node-2's pods for ingress (cil_to_container drops)",
        inject: Inject::Components(|_, real| real.create_cilium_policy(1, &isolate_node_2())),
        blamed: Some("node-2"),
        expected: Disposition::DroppedByProgram,
        finds: Some("datapath.drop"),
        ..HEALTHY_TCP
    },
];

/// The cases of the Cilium lab in native routing: the node's stack routes
/// a remote pod's packet to its node, by the route to its pod CIDR the agent
/// installs (`auto-direct-node-routes`).
const CILIUM_NATIVE_FAULTS: &[Fault] = &[
    HEALTHY_TCP,
    Fault {
        name: "healthy, to the ClusterIP service (translated by Cilium's program)",
        port: Some(80),
        to: To::Service("web"),
        ..HEALTHY_TCP
    },
    remote_pod_cidr_route_deleted("cilium.route.remote-pod-cidr"),
    Fault {
        name: "a NetworkPolicy isolating node-2's pods for ingress",
        inject: Inject::Components(|_, real| real.create_cilium_policy(1, &isolate_node_2())),
        blamed: Some("node-2"),
        expected: Disposition::DroppedByProgram,
        finds: Some("datapath.drop"),
        ..HEALTHY_TCP
    },
];

/// The address a case's flow goes to.
fn destination(cluster: &Cluster, to: &Pod, peer: Peer, fault: &Fault, family: Family) -> String {
    if family == Family::Ipv6 {
        return match (peer, fault.to) {
            (Peer::Outside, _) => OUTSIDE_IP6.to_string(),
            (Peer::Cluster | Peer::FromNode(_), To::Pod | To::PodOn { .. }) => {
                to.ip6.expect("a dual-stack pod").to_string()
            }
            (Peer::Cluster | Peer::FromNode(_), To::Service("web")) => cluster
                .service
                .cluster_ip6
                .expect("a dual-stack service")
                .to_string(),
            (Peer::Cluster | Peer::FromNode(_), To::Service(name)) => {
                real::service(name).cluster_ip6().to_string()
            }
            _ => panic!(
                "{}: the IPv6 cases go to a pod, a Service or the outside host",
                fault.name
            ),
        };
    }
    match (peer, fault.to) {
        (Peer::Outside, _) => OUTSIDE_IP.to_string(),
        (Peer::FromOutside, To::NodePort { node }) => cluster.nodes[node].ip.to_string(),
        (Peer::FromOutside, _) => panic!("{}: a client outside goes to a NodePort", fault.name),
        (Peer::Cluster | Peer::FromNode(_), To::Pod | To::Sender | To::PodOn { .. }) => {
            to.ip().to_string()
        }
        (Peer::Cluster | Peer::FromNode(_), To::Service("web")) => {
            cluster.service.cluster_ip().to_string()
        }
        (Peer::Cluster | Peer::FromNode(_), To::Service(name)) => {
            real::service(name).cluster_ip.to_string()
        }
        (Peer::Cluster | Peer::FromNode(_), To::NodePort { node }) => {
            cluster.nodes[node].ip.to_string()
        }
        (Peer::Cluster | Peer::FromNode(_), To::Address(address)) => address.to_string(),
    }
}

/// What the kernel says: does the flow work?
fn kernel_delivers(
    lab: &mut Lab,
    cluster: &Cluster,
    (from, to): (&Pod, &Pod),
    ip: &str,
    fault: &Fault,
) -> bool {
    match &fault.mtu {
        Some(MtuCase { size: None, .. }) => {
            assert!(
                fault.to == To::Pod,
                "{}: a transfer goes to the destination pod itself",
                fault.name
            );
            let port = fault.port.expect("a transfer case has a port");
            // The pod's own listener discards what it reads: a one-shot
            // receiver that counts takes its place on the port skoop walks.
            return cluster.without_listener(lab, to, || transfers(from, to, ip, port));
        }
        Some(MtuCase {
            size: Some(size), ..
        }) => {
            let bytes = match size {
                PacketSize::Bytes(bytes) => *bytes,
                PacketSize::InterfaceMtu => interface_mtu(from),
            };
            // ping's -s is the ICMP payload: the IP packet less its headers,
            // 28 bytes in IPv4 and 48 in IPv6.
            let headers = if ip.contains(':') { 48 } else { 28 };
            let payload = (bytes - headers).to_string();
            let ping = ["ping", "-c", "1", "-W", "2", "-M", "do", "-s", &payload, ip];
            return from.ns.exec(&ping).status.success();
        }
        None => {}
    }
    let output = match fault.protocol {
        Protocol::Icmp | Protocol::Icmpv6 => from.ns.exec(&["ping", "-c", "1", "-W", "2", ip]),
        _ => {
            let port = fault.port.expect("tcp cases have a port").to_string();
            from.ns.exec(&["nc", "-z", "-w", "2", ip, &port])
        }
    };
    output.status.success()
}

/// The MTU of a pod's eth0.
fn interface_mtu(pod: &Pod) -> u32 {
    let mtu = pod.ns.run(&["cat", "/sys/class/net/eth0/mtu"]);
    mtu.trim().parse().expect("eth0's MTU is a number")
}

/// Whether a TCP transfer of [`BULK_BYTES`] from `from` arrives whole at a
/// one-shot receiver on `port` in `to`.
fn transfers(from: &Pod, to: &Pod, ip: &str, port: u16) -> bool {
    let receiver = to.ns.clone();
    // openbsd nc listens in one family: IPv4 unless told.
    let family = if ip.contains(':') { "-6" } else { "-4" };
    let counted = std::thread::spawn(move || {
        let count = format!("nc {family} -l {port} | wc -c");
        receiver.exec(&["timeout", "10", "sh", "-c", &count])
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let send = format!("head -c {BULK_BYTES} /dev/zero | nc -N -w 3 {ip} {port}");
    from.ns.exec(&["timeout", "8", "sh", "-c", &send]);
    let counted = counted.join().expect("the receiver thread");
    String::from_utf8_lossy(&counted.stdout).trim() == BULK_BYTES.to_string()
}

/// With `SKOOP_LAB_CASE` naming this case and `SKOOP_LAB_SAVE=DIR`, keeps
/// its snapshot (how the examples are made).
fn save_if_this_case(name: &str, snapshot: &std::path::Path) {
    if std::env::var("SKOOP_LAB_CASE").is_ok_and(|wanted| wanted == name) {
        snapshot::save_if_asked(snapshot);
    }
}

/// One row of the agreement table.
struct Row {
    topology: String,
    fault: &'static str,
    kernel: bool,
    skoop: Disposition,
    /// What skoop says of the flow beyond its disposition (the source a
    /// flow leaving the cluster has).
    detail: Option<String>,
    /// Whether skoop's answer means the flow works.
    skoop_delivers: bool,
    blamed: String,
}

/// `<topology>: <fault name>`, how `SKOOP_LAB_CASE` names a case.
fn case_name(lab: LabKind, fault: &Fault) -> String {
    format!("{}: {}", lab.topology_name(), fault.name)
}

/// Where a case's time went, printed with it (`lab 14.2 s, kernel 3.1 s,
/// …`): what CI's lab run spends is the sum of these, and a case that
/// grows slow shows which phase did.
struct Phases {
    last: std::time::Instant,
    spent: Vec<(&'static str, std::time::Duration)>,
}

impl Phases {
    fn start() -> Self {
        Self {
            last: std::time::Instant::now(),
            spent: Vec::new(),
        }
    }

    /// Ends the phase `name`, begun at the last mark.
    fn mark(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.spent.push((name, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: std::time::Duration = self.spent.iter().map(|(_, spent)| *spent).sum();
        write!(f, "{:.1} s (", total.as_secs_f64())?;
        for (index, (name, spent)) in self.spent.iter().enumerate() {
            let separator = if index == 0 { "" } else { ", " };
            write!(f, "{separator}{name} {:.1} s", spent.as_secs_f64())?;
        }
        write!(f, ")")
    }
}

fn run_case(kind: LabKind, peer: Peer, fault: &Fault) -> Option<Row> {
    let Availability::Run = availability() else {
        return None;
    };
    let name = case_name(kind, fault);
    let mut phases = Phases::start();
    let mut lab = Lab::new();
    let (scripted, mut real) = match (kind.scripted(), kind) {
        (Some((cni, topology)), _) => (Some(Cluster::build(&mut lab, &topology, cni)), None),
        (None, LabKind::Real(cni, mode)) => (
            None,
            Some(RealCluster::build_with(
                &mut lab,
                cni,
                mode,
                IpFamilies::Ipv4,
                2,
                2,
            )),
        ),
        (None, LabKind::RealDualStack(cni, mode, _)) => (
            None,
            Some(RealCluster::build_with(
                &mut lab,
                cni,
                mode,
                IpFamilies::DualStack,
                2,
                2,
            )),
        ),
        (None, LabKind::RealIpv6Only(cni, mode)) => (
            None,
            Some(RealCluster::build_with(
                &mut lab,
                cni,
                mode,
                IpFamilies::Ipv6Only,
                2,
                2,
            )),
        ),
        (None, LabKind::Kubelet(cni)) => {
            (None, Some(RealCluster::build_kubelet(&mut lab, cni, 2, 2)))
        }
        (None, _) => unreachable!("every lab but the real components' is scripted"),
    };
    // The real components are frozen once the case's fault is in place, so
    // that none of them repairs it while the kernel and skoop are asked.
    match (fault.inject, &mut real, &scripted) {
        (Inject::Kernel(inject), Some(real), _) => {
            real.freeze();
            inject(&real.cluster);
        }
        (Inject::Kernel(inject), None, Some(cluster)) => inject(cluster),
        (Inject::Components(inject) | Inject::ComponentsUncollected(inject, _), Some(real), _) => {
            inject(&mut lab, real);
            real.freeze();
        }
        (Inject::Components(_) | Inject::ComponentsUncollected(..), None, _) => {
            panic!("{name}: a fault of the real components' only")
        }
        (Inject::Kernel(_), None, None) => unreachable!("one of the two is built"),
    }
    phases.mark("lab");
    let cluster = match (&scripted, &real) {
        (Some(cluster), _) => cluster,
        (_, Some(real)) => &real.cluster,
        (None, None) => unreachable!("one of the two is built"),
    };
    let (from, to) = endpoints(cluster);
    let to = match fault.to {
        To::Sender => from,
        To::PodOn { node } => cluster.nodes[node].pods.last().expect("the node has pods"),
        _ => to,
    };
    // The outside host, as the client a flow from outside starts at.
    let outside = Pod {
        namespace: String::new(),
        name: "outside".into(),
        ns: cluster.outside.clone(),
        ipv4: Some(OUTSIDE_IP),
        ip6: None,
        host_veth: String::new(),
    };
    // A node, as the client a flow from a node starts at.
    let node_client = |node: usize| Pod {
        namespace: String::new(),
        name: cluster.nodes[node].name.clone(),
        ns: cluster.nodes[node].ns.clone(),
        ipv4: Some(cluster.nodes[node].ip),
        ip6: cluster.nodes[node].ip6,
        host_veth: String::new(),
    };
    let on_node;
    let from = match peer {
        Peer::FromOutside => &outside,
        Peer::FromNode(node) => {
            on_node = node_client(node);
            &on_node
        }
        Peer::Cluster | Peer::Outside => from,
    };
    let ip = destination(cluster, to, peer, fault, kind.family());
    let kernel = kernel_delivers(&mut lab, cluster, (from, to), &ip, fault);
    phases.mark("kernel");

    let via = match (peer, fault.to) {
        (Peer::FromOutside, To::NodePort { node }) => Some(cluster.nodes[node].name.clone()),
        _ => None,
    };
    let request = Request {
        from: match peer {
            Peer::FromOutside => Endpoint::Ip {
                address: from.ip().into(),
                port: None,
            },
            Peer::Cluster | Peer::Outside => Endpoint::Pod {
                namespace: from.namespace.clone(),
                name: from.name.clone(),
                port: None,
            },
            Peer::FromNode(node) => Endpoint::Node {
                name: cluster.nodes[node].name.clone(),
                port: None,
            },
        },
        to: match peer {
            Peer::Outside => Endpoint::Ip {
                address: match kind.family() {
                    Family::Ipv4 => OUTSIDE_IP.into(),
                    Family::Ipv6 => OUTSIDE_IP6.into(),
                },
                port: None,
            },
            Peer::Cluster | Peer::FromOutside | Peer::FromNode(_) => match fault.to {
                To::Pod | To::Sender | To::PodOn { .. } => Endpoint::Pod {
                    namespace: to.namespace.clone(),
                    name: to.name.clone(),
                    port: None,
                },
                To::Service(name) => Endpoint::Service {
                    namespace: cluster.service.namespace.clone(),
                    name: name.into(),
                    port: None,
                },
                To::NodePort { node } => Endpoint::Node {
                    name: cluster.nodes[node].name.clone(),
                    port: None,
                },
                To::Address(address) => Endpoint::Ip {
                    address: address.parse().expect("an address"),
                    port: None,
                },
            },
        },
        port: fault.port,
        protocol: fault.protocol,
        size: fault.mtu.as_ref().and_then(|mtu| mtu.size),
        via,
        family: kind.asked_family(),
    };
    let (packs, pack_problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(pack_problems.is_empty(), "{pack_problems:?}");
    let dir = tempfile::tempdir().expect("temp dir");
    let diagnosis = match (kind.scripted(), &real) {
        (Some((cni, _)), _) => {
            snapshot::collect(cluster, cni, dir.path());
            save_if_this_case(&name, dir.path());
            let diagnosis = engine::diagnose(&live::load(dir.path()), &request, &packs)
                .expect("the request resolves");
            phases.mark("collect and diagnose");
            // The same cluster collected through a real API server holding
            // its objects (`skoop collect cluster --node-exec`) must answer
            // the same.
            let server = live::serve_lab(&mut lab, cluster, dir.path());
            phases.mark("API server");
            let live_dir = tempfile::tempdir().expect("temp dir");
            live::collect_live(&server, cluster, live_dir.path());
            live::assert_same_diagnosis(&diagnosis, live_dir.path(), &request, &name);
            phases.mark("through the API server");
            if confirms(fault) {
                let source = snapshot_reached_by(live_dir.path(), &live::node_exec(cluster));
                confirm_case(&source, &request, kind, fault, kernel, &name);
                phases.mark("--confirm");
            }
            drop(server);
            phases.mark("API server's stop");
            diagnosis
        }
        (None, Some(real)) => {
            // The real components' cluster is only ever seen as a user sees
            // it: collected through its API server, and on kubelet-run nodes
            // diagnosed live through collector pods, as by default.
            match (kind, fault.inject) {
                (LabKind::Kubelet(_), _) => {
                    diagnose_live_and_replay(&real.server, dir.path(), &request, &name)
                }
                (_, Inject::ComponentsUncollected(_, files)) => live::collect_through_without(
                    &real.server,
                    &real.node_exec(),
                    dir.path(),
                    files,
                ),
                _ => live::collect_through(&real.server, &real.node_exec(), dir.path()),
            }
            phases.mark("collect");
            save_if_this_case(&name, dir.path());
            // The components keep working while the case runs: a fault one
            // of them repaired between the kernel's answer and the snapshot
            // would make the two disagree for no fault of skoop's.
            let again = kernel_delivers(&mut lab, cluster, (from, to), &ip, fault);
            assert_eq!(
                again, kernel,
                "{name}: the kernel's answer changed while the snapshot was collected \
                 (a component repaired or changed the fault)"
            );
            // Confirmed as collected: on kubelet-run nodes live, through
            // collector pods (whose image has nc and ping), elsewhere through
            // --node-exec. A client outside the cluster cannot be sent from.
            if peer != Peer::FromOutside && confirms(fault) {
                let source = if matches!(kind, LabKind::Kubelet(_)) {
                    let kubeconfig = real.server.kubeconfig.display().to_string();
                    vec!["--kubeconfig".to_string(), kubeconfig]
                } else {
                    snapshot_reached_by(dir.path(), &real.node_exec())
                };
                confirm_case(&source, &request, kind, fault, kernel, &name);
                phases.mark("--confirm");
            }
            let diagnosis = engine::diagnose(&live::load(dir.path()), &request, &packs)
                .expect("the request resolves");
            phases.mark("diagnose");
            diagnosis
        }
        (None, None) => unreachable!("a real cluster was built"),
    };
    let status = exit_status(dir.path(), &request);
    phases.mark("skoop's exit status");
    eprintln!("{name}: {phases}");
    // Each hop once, in the order the findings name them.
    let mut blamed: Vec<String> = Vec::new();
    for finding in (diagnosis.findings.iter()).filter(|f| f.severity == engine::Severity::Fatal) {
        let hop = finding.about.hop.to_string();
        if !blamed.contains(&hop) {
            blamed.push(hop);
        }
    }
    let blamed = blamed.join(", ");
    let disposition = diagnosis.disposition();
    // A transfer stalls where full-size packets vanish unannounced, though
    // the small packet walked (the connection's first) is delivered.
    let black_hole = diagnosis
        .findings
        .iter()
        .find(|f| f.id == BLACK_HOLE)
        .filter(|_| fault.mtu.as_ref().is_some_and(|mtu| mtu.size.is_none()));
    let (skoop_delivers, detail) = match peer {
        Peer::Cluster | Peer::FromOutside | Peer::FromNode(_) => (
            disposition == Disposition::Delivered && black_hole.is_none(),
            black_hole.map(|f| format!("{BLACK_HOLE} at {}", f.about.hop)),
        ),
        Peer::Outside => {
            let detail = match diagnosis.exit() {
                Some(exit) => format!(
                    "leaves from {}",
                    exit.source
                        .map_or_else(|| "a masqueraded address".into(), |s| s.to_string())
                ),
                None => "leaves from nowhere".to_string(),
            };
            (
                disposition == Disposition::ExitsCluster && diagnosis.succeeds(),
                Some(detail),
            )
        }
    };
    let row = Row {
        topology: kind.topology_name().to_string(),
        fault: fault.name,
        kernel,
        skoop: disposition,
        detail,
        skoop_delivers,
        blamed,
    };
    // The kernel is the ground truth: skoop's answer means the flow works
    // exactly when the kernel delivers it.
    assert_eq!(
        row.skoop_delivers,
        kernel,
        "{}: kernel {} but skoop says {} {}; findings: {:#?}",
        fault.name,
        if kernel {
            "delivers"
        } else {
            "does not deliver"
        },
        row.skoop,
        row.detail.as_deref().unwrap_or_default(),
        diagnosis.findings
    );
    // Read only through skoop's exit status, as a script reads it: 0 (or 3,
    // a critical finding about a hop of the path) where the kernel
    // delivers, 1 where it does not. A black hole is the one flow that
    // opens and then stalls: the walked packet is delivered and the
    // critical finding on its path says the rest vanishes (3).
    let agrees = match (kernel, black_hole.is_some()) {
        (true, _) => status == 0 || status == 3,
        (false, true) => status == 3,
        (false, false) => status == 1,
    };
    assert!(
        agrees,
        "{}: kernel {} but skoop exits {status}; findings: {:#?}",
        fault.name,
        if kernel {
            "delivers"
        } else {
            "does not deliver"
        },
        diagnosis.findings
    );
    assert_eq!(
        row.skoop, fault.expected,
        "{}: findings {:#?}",
        fault.name, diagnosis.findings
    );
    if let Some(id) = fault.finds {
        assert!(
            diagnosis.findings.iter().any(|f| f.id.as_str() == id),
            "{}: no {id} finding: {:#?}",
            fault.name,
            diagnosis.findings
        );
    }
    if let Some(id) = fault.mtu.as_ref().and_then(|mtu| mtu.warns) {
        assert!(
            diagnosis
                .findings
                .iter()
                .any(|f| f.id.as_str() == id && f.severity == engine::Severity::Warning),
            "{}: no {id} warning: {:#?}",
            fault.name,
            diagnosis.findings
        );
    }
    // Where the kernel delivers a packet of the size walked, every device
    // on the path took it: no finding may say it does not fit one.
    if kernel && fault.mtu.as_ref().is_some_and(|mtu| mtu.size.is_some()) {
        let misfits: Vec<_> = diagnosis
            .findings
            .iter()
            .filter(|f| f.id.as_str() == "core.hop.mtu")
            .collect();
        assert!(
            misfits.is_empty(),
            "{}: the kernel delivers the packet, yet: {misfits:#?}",
            fault.name
        );
    }
    match fault.blamed {
        Some(hop) => assert!(
            diagnosis
                .findings
                .iter()
                .any(|f| f.severity == engine::Severity::Fatal && f.about.hop.to_string() == hop),
            "{}: no fatal finding about {hop}: {:#?}",
            fault.name,
            diagnosis.findings
        ),
        None => assert!(
            row.blamed.is_empty(),
            "{}: unexpected fatal findings {:#?}",
            fault.name,
            diagnosis.findings
        ),
    }
    Some(row)
}

/// Whether a case is also asked with `--confirm`: every case with
/// `SKOOP_LAB_CONFIRM=all` (214 cases agreed when it was written, a few
/// seconds each); else the healthy TCP case of each group and every case a
/// netfilter rule stops (whose counter must move), which keeps the full
/// lab within CI's time.
fn confirms(fault: &Fault) -> bool {
    std::env::var("SKOOP_LAB_CONFIRM").is_ok_and(|all| all == "all")
        || fault.name == HEALTHY_TCP.name
        || fault.expected == Disposition::DeniedByNetfilter
}

/// The kernel asked through skoop itself (`--confirm` from `source`: the
/// snapshot collected live, the nodes reached as collection reached them,
/// or the live cluster itself) must agree with the model; `kernel` is what the case's own connect or
/// ping said. A size is sent as a ping (`ping -M do`), as the case's own.
fn confirm_case(
    source: &[String],
    request: &Request,
    kind: LabKind,
    fault: &Fault,
    kernel: bool,
    name: &str,
) {
    let mut args = diagnose_args(source, request);
    args.push("--confirm".into());
    // A transfer that stalls still connects: the probe's answer is
    // compared only where the case's is a connect or a ping.
    let transfer = fault.mtu.as_ref().is_some_and(|mtu| mtu.size.is_none());
    let asked = (!transfer).then_some(kernel);
    // kube-proxy's nftables rules have no `counter`: nothing counts there.
    let nft = matches!(
        kind,
        LabKind::Real(_, ProxyMode::Nftables) | LabKind::RealDualStack(_, ProxyMode::Nftables, _)
    );
    let stops_at_a_counted_rule = fault.expected == Disposition::DeniedByNetfilter && !nft;
    crate::confirm::assert_agrees(&args, asked, stops_at_a_counted_rule, name);
}

/// `--snapshot DIR`.
fn snapshot(dir: &std::path::Path) -> Vec<String> {
    vec!["--snapshot".into(), dir.display().to_string()]
}

/// `--snapshot DIR --node-exec TEMPLATE`: the snapshot, its nodes reached
/// through the template.
fn snapshot_reached_by(dir: &std::path::Path, template: &str) -> Vec<String> {
    let mut source = snapshot(dir);
    source.extend(["--node-exec".into(), template.into()]);
    source
}

/// `skoop diagnose -o json` of `request` live, as a user first runs it on
/// kubelet-run nodes: collector pods collect what the flow needs into `dir`
/// (`--save-snapshot`), through the kubelets' streaming servers. The saved
/// snapshot replayed (`--snapshot dir`) must give the same report, byte for
/// byte, and the same exit status.
fn diagnose_live_and_replay(
    server: &ApiServer,
    dir: &std::path::Path,
    request: &Request,
    name: &str,
) {
    let run = |source: Vec<String>| {
        let mut args = diagnose_args(&source, request);
        args.extend(["-o".into(), "json".into()]);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_skoop"))
            .args(&args)
            .output()
            .expect("run skoop");
        (args, output)
    };
    let kubeconfig = server.kubeconfig.display().to_string();
    let saved = dir.display().to_string();
    let (args, live) = run(vec![
        "--kubeconfig".into(),
        kubeconfig,
        "--save-snapshot".into(),
        saved,
    ]);
    let said = String::from_utf8_lossy(&live.stderr);
    assert!(
        matches!(live.status.code(), Some(0 | 1 | 3)),
        "{name}: skoop {args:?} gave no verdict ({:?}):\n{said}",
        live.status
    );
    let (_, replayed) = run(snapshot(dir));
    assert_eq!(
        replayed.status.code(),
        live.status.code(),
        "{name}: the saved snapshot's exit status"
    );
    assert!(
        replayed.stdout == live.stdout,
        "{name}: the saved snapshot's report differs from the live one:\nlive:\n{}\nreplayed:\n{}",
        String::from_utf8_lossy(&live.stdout),
        String::from_utf8_lossy(&replayed.stdout)
    );
}

/// `skoop diagnose`'s exit status for `request` on the snapshot in `dir`:
/// the binary, run as a user or a script runs it.
fn exit_status(dir: &std::path::Path, request: &Request) -> i32 {
    let args = diagnose_args(&snapshot(dir), request);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(&args)
        .output()
        .expect("run skoop");
    output
        .status
        .code()
        .unwrap_or_else(|| panic!("skoop {args:?} ended by a signal"))
}

/// `skoop diagnose SOURCE...` of `request`'s flow, as a user writes it.
fn diagnose_args(source: &[String], request: &Request) -> Vec<String> {
    let mut args: Vec<String> = vec!["diagnose".into()];
    args.extend_from_slice(source);
    args.extend([
        "--from".into(),
        request.from.to_string(),
        "--to".into(),
        request.to.to_string(),
        "--protocol".into(),
        request.protocol.as_str().into(),
    ]);
    if let Some(port) = request.port {
        args.extend(["--port".into(), port.to_string()]);
    }
    if let Some(size) = request.size {
        let size = match size {
            PacketSize::Bytes(bytes) => bytes.to_string(),
            PacketSize::InterfaceMtu => "mtu".into(),
        };
        args.extend(["--size".into(), size]);
    }
    if let Some(via) = &request.via {
        args.extend(["--via".into(), format!("node/{via}")]);
    }
    if let Some(family) = request.family {
        args.extend(["--family".into(), family.to_string().to_lowercase()]);
    }
    args
}

/// How many cases run at once: `SKOOP_LAB_JOBS`, else 4.
fn lab_jobs() -> usize {
    match std::env::var("SKOOP_LAB_JOBS") {
        Ok(jobs) => jobs
            .parse()
            .ok()
            .filter(|&jobs| jobs > 0)
            .unwrap_or_else(|| panic!("SKOOP_LAB_JOBS={jobs}: a number of cases, 1 or more")),
        Err(_) => 4,
    }
}

#[test]
fn diagnosis_agrees_with_the_kernel_on_every_lab_fault() {
    // `SKOOP_LAB_CASE` runs that one case only, or (a topology's name) that
    // topology's cases.
    let wanted = std::env::var("SKOOP_LAB_CASE").ok();
    let wanted_any = wanted.is_some();
    let cases: Vec<(LabKind, Peer, &Fault)> = TOPOLOGIES
        .iter()
        .flat_map(|group| {
            let kube_router = matches!(group.lab, LabKind::Real(cni, _) if cni.runs_kube_router());
            let stride = ci_stride(group);
            (group.faults.iter().enumerate())
                .filter(move |(index, _)| index.is_multiple_of(stride))
                .filter(move |_| !kube_router || runs_kube_router(wanted_any))
                .map(move |(_, fault)| (group.lab, group.peer, fault))
        })
        .filter(|(lab, _, fault)| {
            wanted
                .as_ref()
                .is_none_or(|w| *w == case_name(*lab, fault) || w == lab.topology_name())
        })
        .collect();
    assert!(!cases.is_empty(), "no lab case is named {wanted:?}");
    if std::env::var_os("SKOOP_LAB_LIST").is_some() {
        // What this run would run (CI's full run when nothing else is set).
        for (lab, _, fault) in &cases {
            println!("{}", case_name(*lab, fault));
        }
        return;
    }
    let rows = Mutex::new(Vec::new());
    let failures = Mutex::new(Vec::new());
    // Each case builds its own lab. A scripted case waits on its processes
    // about half of its time, so `lab_jobs()` of them run at once; the real
    // components' clusters keep more of the CPU busy, and run two at a time.
    let (scripted, real): (Vec<_>, Vec<_>) =
        cases.iter().partition(|(lab, ..)| lab.scripted().is_some());
    for (round, jobs) in [(scripted, lab_jobs()), (real, lab_jobs().min(2))] {
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                let (rows, failures, next, round) = (&rows, &failures, &next, &round);
                scope.spawn(move || {
                    while let Some((lab, peer, fault)) =
                        round.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                    {
                        match std::panic::catch_unwind(|| run_case(*lab, *peer, fault)) {
                            Ok(Some(row)) => rows.lock().unwrap().push(row),
                            Ok(None) => {}
                            Err(panic) => {
                                let message = panic
                                    .downcast_ref::<String>()
                                    .cloned()
                                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                                    .unwrap_or_default();
                                let case = case_name(*lab, fault);
                                failures.lock().unwrap().push(format!("{case}: {message}"));
                            }
                        }
                    }
                });
            }
        });
    }
    let failures = failures.into_inner().unwrap();
    let mut rows = rows.into_inner().unwrap();
    rows.sort_by_key(|row| {
        cases
            .iter()
            .position(|(lab, _, f)| f.name == row.fault && lab.topology_name() == row.topology)
    });
    let table = accuracy_table(&rows);
    eprintln!("{table}");
    if std::env::var("SKOOP_WRITE_ACCURACY").is_ok_and(|v| v == "1") {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/accuracy.md");
        std::fs::write(&path, &table).expect("write docs/accuracy.md");
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

fn accuracy_table(rows: &[Row]) -> String {
    let mut text = String::from(
        "# Accuracy: skoop diagnose against the kernel\n\n\
         Generated by `tests/lab/diagnose.rs` (`SKOOP_WRITE_ACCURACY=1 cargo test --test lab diagnosis_agrees`).\n\
         Each row is a fresh 2-node lab (2 pods per node, a ClusterIP service in front of all four) with\n\
         one fault injected, on one of two labs:\n\n\
         - **scripted** (topology without a suffix): the lab's own scripts program the namespaces as\n\
         the CNI and kube-proxy would: Flannel VXLAN or host-gw (flanneld's routes, neighbours, FDB\n\
         entries and masquerade rules), or Calico BGP-style or VXLAN (cali veths with proxy ARP, /26\n\
         IPAM blocks, BIRD's or felix's routes, felix's iptables chains and ipsets enforcing a\n\
         NetworkPolicy that admits TCP 8080 from the web pods and the nodes only), and kube-proxy's\n\
         iptables layout. The snapshot is collected with `skoop collect local`, and once more through\n\
         a real API server holding the lab's objects (`skoop collect cluster --node-exec`); both must\n\
         diagnose the same. In the topologies *across a router*, the last node is on a second\n\
         subnet (172.18.1.0/24), reached through the underlay's router, which is not in the snapshot\n\
         and routes the nodes' addresses only (no pod CIDR); `calico-vxlan-cross-subnet across a\n\
         router` has three nodes, node-2 on node-1's subnet.\n\
         - **real components** (`(real components)`, `tests/lab/real.rs`): the real binaries program\n\
         the nodes: kube-controller-manager (node IPAM, EndpointSlices), kube-proxy (iptables mode,\n\
         or nftables mode where the topology says so: its rules in the table `ip kube-proxy`) and\n\
         flanneld (`--kube-subnet-mgr --ip-masq`) or felix in every node's namespace, and the CNI\n\
         plugins (flannel delegating to bridge and host-local, or calico with calico-ipam) set up every\n\
         pod through CNI ADD; the test only registers the Nodes and writes the Pods' status, as a\n\
         kubelet would. Calico runs without BIRD, in VXLAN mode, with the same NetworkPolicy. The\n\
         snapshot is collected through the cluster's API server only (`skoop collect cluster\n\
         --node-exec`). The components are frozen (SIGSTOP) once the fault is in place, so that none\n\
         repairs it while the kernel and skoop are asked; the kernel is asked again after the\n\
         collection and must answer the same.\n\n\
         In the topologies *dual-stack, flows in IPv6*, nodes, pods and the service have an IPv6\n\
         address beside their IPv4 one (nodes `fd00:18::/64`, pods `fd00:10:244::/56`, ClusterIP\n\
         `fd00:10:96::100`, the host outside `2001:db8:100::10`), and the flows are asked in IPv6\n\
         (`--family ipv6`); in the topologies *dual-stack, flows in IPv4* the same labs are asked\n\
         their baselines in IPv4 (`--family ipv4`). On the real\n\
         components, kube-apiserver and kube-controller-manager have a Service CIDR and a cluster\n\
         CIDR of each family (node IPAM gives each node a /24 and a /64), flanneld runs with\n\
         `EnableIPv6` (its `flannel-v6.1` VXLAN device over the IPv6 underlay, or host-gw routes via\n\
         the nodes' IPv6 addresses), kube-proxy programs both families (ip6tables, or the table `ip6\n\
         kube-proxy`), and the flannel plugin gives every pod an address of each family. In the\n\
         topology *IPv6-only* the real components run a cluster of IPv6 alone (IPv6 cluster and\n\
         Service CIDRs, InternalIPs and pods; flanneld with `EnableIPv4: false`), and the flows are\n\
         asked without `--family`.\n\n\
         The flow is `default/web-0` (node-1) to the last pod of the last node (`default/web-3` on\n\
         node-2), or to the service's ClusterIP (10.96.0.100:80) where the fault says so. *Kernel* is\n\
         what a real TCP connect (`nc -z`) or ping between the namespaces did; for a DF ping of a size,\n\
         `ping -M do` of that size (skoop given the same `--size`); for a TCP transfer, 400 KB sent with\n\
         `nc` arriving whole (skoop without `--size`, warning where full-size packets do not fit; the\n\
         transfer works for skoop when the path is delivered and has no `kernel.mtu.black-hole`).\n\
         *skoop* is the diagnosis of the snapshot collected right after. *Blamed* is the hop of the\n\
         fatal finding.\n\n\
         A flow to the host outside the cluster (198.51.100.10, behind the underlay's router, which like\n\
         most networks routes back to the nodes' addresses only) cannot be followed past the cluster's\n\
         edge: there skoop agrees with the kernel when it says the flow exits the cluster with a source\n\
         the outside can answer (a node's address, masqueraded: exit status 0) exactly when the kernel's\n\
         connect succeeds; it names the source the flow leaves with. A flow *from* that host (`--from\n\
         198.51.100.10 --via node/NAME`) to a NodePort is followed through the node and back out to it.\n\n",
    );
    if rows
        .iter()
        .any(|row| row.topology.contains("(real components"))
    {
        text.push_str("The real components' versions, and the tools and kernel of this run:\n\n| component | version |\n|---|---|\n");
        for (component, version) in crate::real::component_versions() {
            text.push_str(&format!("| {component} | {version} |\n"));
        }
        text.push('\n');
    }
    text.push_str(
        "| topology | fault | kernel | skoop | blamed hop | agree |\n|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let kernel = if row.kernel { "delivered" } else { "fails" };
        let agree = row.skoop_delivers == row.kernel;
        let skoop = match &row.detail {
            Some(detail) => format!("{} ({detail})", row.skoop),
            None => row.skoop.to_string(),
        };
        text.push_str(&format!(
            "| {} | {} | {kernel} | {skoop} | {} | {} |\n",
            row.topology,
            row.fault,
            if row.blamed.is_empty() {
                "-"
            } else {
                &row.blamed
            },
            if agree { "yes" } else { "NO" }
        ));
    }
    text
}
