//! kindnet (kind's CNI), as kindnetd and the CNI plugins it configures leave
//! a node:
//!
//! - pods: the real `ptp` CNI plugin with `host-local` IPAM over the node's
//!   pod CIDR, run with the configuration kindnetd writes
//!   (`/etc/cni/net.d/10-kindnet.conflist`: `ipMasq: false`, the default
//!   route, the MTU of the node's `eth0`). ptp gives the pod `eth0` with its
//!   address, a route to the gateway (the pod CIDR's first address) `scope
//!   link`, the pod CIDR and the default route via it; on the node a veth
//!   (named and addressed at random) holding the gateway address /32 and a
//!   `scope host` /32 route to the pod; and it turns `ip_forward` on. No
//!   bridge.
//! - routes: per other node, `<its podCIDR> via <its InternalIP>`, no device
//!   named, as kindnetd's `syncRoute` adds it (netlink, protocol boot);
//! - masquerade: kindnetd's ip-masq-agent, its chain `KIND-MASQ-AGENT` with
//!   exactly kindnetd's rules and comments (`masq.go`), POD_SUBNET being the
//!   cluster's pod network.
//!
//! kindnetd itself does not run: it cannot be built from the Go module proxy
//! (`sigs.k8s.io/kind/images/kindnetd` at a kind commit is refused, "not
//! available"), so its routes and chain are programmed here as it programs
//! them. Its chained `portmap` plugin (hostPorts only) is not run.

use serde_json::{Map, Value, json};

use crate::apiserver;
use crate::cluster::{CLUSTER_CIDR, CLUSTER_CIDR6, Cni, Node, Pod};
use crate::objects;
use crate::real::cni_add;

/// kindnetd's masquerade chain in the nat table.
pub const MASQ_CHAIN: &str = "KIND-MASQ-AGENT";

pub struct Kindnet;

impl Kindnet {
    /// host-local's state for `node` (`dataDir`), outside `/var/lib/cni`;
    /// removed once the node's pods are attached.
    fn ipam_dir(node: &Node) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("{}-ipam", node.ns.name))
    }

    /// kindnetd's CNI configuration for `node` (its ptp entry, the one
    /// plugin run here), with the MTU of the node's `eth0`.
    /// kindnetd's CNI configuration for `node`: ptp with host-local, a
    /// range and a default route per family of the node's pod CIDRs.
    fn cni_conf(node: &Node, mtu: u32) -> String {
        let mut routes = vec![json!({"dst": "0.0.0.0/0"})];
        let mut ranges = vec![json!([{"subnet": node.pod_cidr().to_string()}])];
        if let Some(cidr6) = node.pod_cidr6 {
            routes.push(json!({"dst": "::/0"}));
            ranges.push(json!([{"subnet": cidr6.to_string()}]));
        }
        json!({
            "cniVersion": "0.3.1",
            "name": "kindnet",
            "type": "ptp",
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "dataDir": Kindnet::ipam_dir(node),
                "routes": routes,
                "ranges": ranges,
            },
            "mtu": mtu,
        })
        .to_string()
    }
}

/// The MTU of `node`'s `eth0`, as kindnetd's `computeBridgeMTU` reads it.
fn eth0_mtu(node: &Node) -> u32 {
    let out = node.ns.run(&["ip", "-j", "link", "show", "eth0"]);
    let links: Value = serde_json::from_str(&out).expect("ip -j link output");
    let mtu = links[0]["mtu"].as_u64().expect("eth0 has an MTU");
    u32::try_from(mtu).expect("an MTU")
}

impl Cni for Kindnet {
    fn topology_name(&self) -> &'static str {
        "kindnet"
    }

    /// kindnetd writes no NetworkUnavailable condition.
    fn network_condition(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    fn setup_node(&self, _node: &Node) {}

    fn attach_pod(&self, node: &Node, pod: &mut Pod) {
        let conf = Kindnet::cni_conf(node, eth0_mtu(node));
        let plugin = apiserver::built().join("cni/ptp").display().to_string();
        let command = [
            "ip".into(),
            "netns".into(),
            "exec".into(),
            node.ns.name.clone(),
            plugin,
        ];
        let attached = cni_add(apiserver::built(), &command, node, pod, &conf);
        assert_eq!(
            (attached.ip, attached.ip6),
            (pod.ipv4, pod.ip6),
            "host-local gives {} its next free address of each family",
            pod.name
        );
        pod.host_veth = attached.host_veth;
    }

    fn connect(&self, node: &Node, peers: &[&Node]) {
        for peer in peers {
            node.ns
                .ip(&format!("route add {} via {}", peer.pod_cidr(), peer.ip));
            if let (Some(cidr6), Some(ip6)) = (peer.pod_cidr6, peer.ip6) {
                node.ns.ip(&format!("-6 route add {cidr6} via {ip6}"));
            }
        }
        let dir = Kindnet::ipam_dir(node);
        std::fs::remove_dir_all(&dir)
            .unwrap_or_else(|e| panic!("remove host-local's state {}: {e}", dir.display()));
    }

    fn iptables_rules(&self, _node: &Node) -> String {
        masquerade_rules(CLUSTER_CIDR)
    }

    fn ip6tables_rules(&self, node: &Node) -> String {
        match node.pod_cidr6 {
            Some(_) => masquerade_rules(CLUSTER_CIDR6),
            None => String::new(),
        }
    }

    fn node_annotations(&self, _node: &Node) -> Map<String, Value> {
        Map::new()
    }

    fn objects(&self, nodes: &[Node]) -> Vec<Value> {
        let dual_stack = nodes.iter().any(|n| n.pod_cidr6.is_some());
        vec![daemon_set(nodes.len(), dual_stack)]
    }
}

/// kindnetd's ip-masq-agent (masq.go) for the pod network `cluster`, as
/// `iptables-restore` (or, for IPv6, `ip6tables-restore`) input: kindnetd
/// writes the same chain in both families, POD_SUBNET's CIDRs of each.
fn masquerade_rules(cluster: &str) -> String {
    format!(
        "*nat
:{MASQ_CHAIN} - [0:0]
-A POSTROUTING -m addrtype ! --dst-type LOCAL -m comment --comment \"kind-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom KIND-MASQ-AGENT chain\" -j {MASQ_CHAIN}
-A {MASQ_CHAIN} -d {cluster} -m comment --comment \"kind-masq-agent: local traffic is not subject to MASQUERADE\" -j RETURN
-A {MASQ_CHAIN} -m comment --comment \"kind-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)\" -j MASQUERADE
COMMIT
"
    )
}

/// The kindnet DaemonSet of kind's manifest (`pkg/build/nodeimage/const_cni.go`),
/// POD_SUBNET the cluster's pod network, running on all `nodes` nodes.
fn daemon_set(nodes: usize, dual_stack: bool) -> Value {
    // kind's POD_SUBNET: networking.podSubnet, both families comma-separated.
    let pod_subnet = match dual_stack {
        true => format!("{CLUSTER_CIDR},{CLUSTER_CIDR6}"),
        false => CLUSTER_CIDR.to_string(),
    };
    let labels = json!({"app": "kindnet", "k8s-app": "kindnet", "tier": "node"});
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": objects::metadata("DaemonSet", Some("kube-system"), "kindnet", labels.clone()),
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "kindnet"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{
                        "name": "kindnet-cni",
                        "image": "docker.io/kindest/kindnetd:v20260820-69b56db7",
                        "env": [
                            {"name": "HOST_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}}},
                            {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
                            {"name": "POD_SUBNET", "value": pod_subnet}
                        ],
                        "imagePullPolicy": "IfNotPresent",
                        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                        "securityContext": {"capabilities": {"add": ["NET_RAW", "NET_ADMIN"]}, "privileged": false},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "volumeMounts": [
                            {"mountPath": "/etc/cni/net.d", "name": "cni-cfg"},
                            {"mountPath": "/run/xtables.lock", "name": "xtables-lock"},
                            {"mountPath": "/lib/modules", "name": "lib-modules", "readOnly": true},
                            {"mountPath": "/var/run/nri", "name": "nri-plugin"}
                        ]
                    }],
                    "dnsPolicy": "ClusterFirst",
                    "hostNetwork": true,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "serviceAccount": "kindnet",
                    "serviceAccountName": "kindnet",
                    "terminationGracePeriodSeconds": 30,
                    "tolerations": [{"operator": "Exists"}],
                    "volumes": [
                        {"hostPath": {"path": "/etc/cni/net.d", "type": ""}, "name": "cni-cfg"},
                        {"hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}, "name": "xtables-lock"},
                        {"hostPath": {"path": "/lib/modules", "type": ""}, "name": "lib-modules"},
                        {"hostPath": {"path": "/var/run/nri", "type": ""}, "name": "nri-plugin"}
                    ]
                }
            },
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"}
        },
        "status": objects::daemon_set_status(nodes)
    })
}

/// The lab as kindnet leaves it: traffic really flows, and the dumps show
/// what ptp and kindnetd's routes and chain are said to be above.
#[cfg(test)]
mod tests {
    use skoop::snapshot::Snapshot;
    use skoop::snapshot::netns::route::Destination;

    use super::*;
    use crate::cluster::{Cluster, OUTSIDE_IP, POD_PORT, Topology};
    use crate::flannel_vxlan::assert_succeeds as succeeds;
    use crate::lab::{Availability, Lab, availability};
    use crate::snapshot;

    #[test]
    fn kindnet_lab_carries_traffic_as_kindnetd_and_ptp_program_it() {
        let Availability::Run = availability() else {
            return;
        };
        let mut lab = Lab::new();
        let topology = Topology {
            nodes: 2,
            pods_per_node: 2,
            across_router: false,
            dual_stack: false,
        };
        let cluster = Cluster::build(&mut lab, &topology, &Kindnet);
        let (a, b) = (&cluster.nodes[0].pods[0], &cluster.nodes[1].pods[1]);
        let port = POD_PORT.to_string();
        for (from, to) in [(a, b), (b, a)] {
            let ip = to.ip().to_string();
            succeeds(from, &["ping", "-c", "1", "-W", "2", &ip]);
            succeeds(from, &["nc", "-z", "-w", "2", &ip, &port]);
        }
        // The outside routes back to the nodes only: it answers a pod only
        // through KIND-MASQ-AGENT's masquerade.
        succeeds(a, &["nc", "-z", "-w", "2", &OUTSIDE_IP.to_string(), &port]);

        let dir = tempfile::tempdir().expect("temp dir");
        snapshot::collect(&cluster, &Kindnet, dir.path());
        snapshot::save_if_asked(dir.path());
        let (snapshot, problems) = Snapshot::load(dir.path()).expect("the snapshot loads");
        assert!(problems.is_empty(), "{problems:?}");
        for node in &cluster.nodes {
            let host = &snapshot.namespaces[&skoop::snapshot::NetnsId::Host {
                node: node.name.clone(),
            }]
                .dump();
            let routes = host.routes.as_ref().expect("ip-route.json");
            let links = host.links.as_ref().expect("ip-link.json");
            assert!(
                links.iter().all(|l| !matches!(
                    l.kind(),
                    Some(skoop::snapshot::netns::link::LinkKind::Bridge(_))
                )),
                "{}: no bridge",
                node.name
            );
            for pod in &node.pods {
                let to_pod = routes
                    .iter()
                    .find(|r| {
                        r.dst == Destination::Prefix(format!("{}/32", pod.ip()).parse().unwrap())
                    })
                    .unwrap_or_else(|| panic!("{}: no /32 route to {}", node.name, pod.name));
                assert_eq!(to_pod.dev.as_deref(), Some(pod.host_veth.as_str()));
                assert_eq!(to_pod.scope.to_string(), "host", "ptp's AddHostRoute");
            }
            for peer in cluster.nodes.iter().filter(|p| p.name != node.name) {
                let to_peer = routes
                    .iter()
                    .find(|r| r.dst == Destination::Prefix(peer.pod_cidr().into()))
                    .unwrap_or_else(|| panic!("{}: no route to {}", node.name, peer.pod_cidr()));
                assert_eq!(to_peer.gateway, Some(peer.ip.into()));
            }
            let rules = node.ns.run(&["iptables-save", "-t", "nat"]);
            assert!(rules.contains(&format!(":{MASQ_CHAIN} - ")), "{rules}");
        }
    }
}
