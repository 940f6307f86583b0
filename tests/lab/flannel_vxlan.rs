//! A 2-node Flannel VXLAN cluster with 2 pods per node and a ClusterIP
//! service: the kernel really carries the traffic, and the collected
//! snapshot shows what was built.

use std::fs;
use std::path::Path;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use serde_json::{Value, json};
use skoop::snapshot::netns::DumpFile;
use skoop::snapshot::{NetnsId, Snapshot};

use crate::cluster::{Cluster, Node, Pod, Topology};
use crate::flannel::Flannel;
use crate::lab::{Availability, Lab, availability};
use crate::snapshot;

/// A `kind: List` as kubectl writes it (k8s-openapi's own `List<T>` wants
/// `kind: NodeList` and the like, which only the API server writes).
#[derive(serde::Deserialize)]
struct List<T> {
    items: Vec<T>,
}

/// The Kubernetes API types the cluster objects must deserialise into.
mod k8s {
    pub use super::apps::DaemonSet;
    pub use super::core::{ConfigMap, Namespace, Node, Pod, Service};
    pub use super::discovery::EndpointSlice;
}

const TOPOLOGY: Topology = Topology {
    nodes: 2,
    pods_per_node: 2,
    across_router: false,
    dual_stack: false,
};

/// Builds the lab, or `None` when the lab is skipped.
fn build() -> Option<(Lab, Cluster)> {
    if let Availability::Skip = availability() {
        return None;
    }
    let mut lab = Lab::new();
    let cluster = Cluster::build(&mut lab, &TOPOLOGY, &Flannel::VXLAN);
    Some((lab, cluster))
}

/// Runs `argv` in `from`'s namespace and asserts it succeeds.
pub fn assert_succeeds(from: &Pod, argv: &[&str]) {
    let output = from.ns.exec(argv);
    assert!(
        output.status.success(),
        "{argv:?} from {} failed ({}): {}{}",
        from.name,
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn pods_reach_each_other_across_nodes() {
    let Some((_lab, cluster)) = build() else {
        return;
    };
    let [node1, node2] = cluster.nodes.as_slice() else {
        panic!("two nodes");
    };
    for (from, to) in node1
        .pods
        .iter()
        .flat_map(|a| node2.pods.iter().map(move |b| (a, b)))
    {
        for (a, b) in [(from, to), (to, from)] {
            let ip = b.ip().to_string();
            assert_succeeds(a, &["ping", "-c", "1", "-W", "2", &ip]);
            assert_succeeds(a, &["nc", "-z", "-w", "2", &ip, "8080"]);
        }
    }
}

#[test]
fn pods_reach_the_service_cluster_ip() {
    let Some((_lab, cluster)) = build() else {
        return;
    };
    let ip = cluster.service.cluster_ip().to_string();
    let port = cluster.service.port.to_string();
    // Each connection picks an endpoint at random: enough tries from every
    // pod that each backend, the pod itself included, is almost surely hit.
    for pod in cluster.pods() {
        for _ in 0..8 {
            assert_succeeds(pod, &["nc", "-z", "-w", "2", &ip, &port]);
        }
    }
}

#[test]
fn collected_snapshot_shows_what_the_lab_built() {
    let Some((_lab, cluster)) = build() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path();
    snapshot::collect(&cluster, &Flannel::VXLAN, root);
    snapshot::save_if_asked(root);

    assert_layout(&cluster, root);
    for node in &cluster.nodes {
        let host = root.join("nodes").join(&node.name).join("host");
        let peers: Vec<&Node> = cluster
            .nodes
            .iter()
            .filter(|p| p.name != node.name)
            .collect();
        assert_node_dump(node, &peers, &host);
        for pod in &node.pods {
            let pod_dir = root
                .join("nodes")
                .join(&node.name)
                .join("pods")
                .join(&pod.namespace)
                .join(&pod.name);
            assert_pod_dump(node, pod, &pod_dir);
        }
    }
    assert_cluster_objects(&cluster, root);

    let (snapshot, _) = Snapshot::load(root).expect("the lab's snapshot loads");
    let ids: Vec<NetnsId> = snapshot.namespaces.keys().cloned().collect();
    let mut expected = Vec::new();
    for node in &cluster.nodes {
        expected.push(NetnsId::Host {
            node: node.name.clone(),
        });
        expected.extend(node.pods.iter().map(|pod| NetnsId::Pod {
            node: node.name.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
        }));
    }
    expected.sort();
    assert_eq!(ids, expected);
}

/// Every namespace directory holds every dump file, except `ipvsadm.txt`
/// where IPVS is not in use (collect does not load ip_vs).
fn assert_layout(cluster: &Cluster, root: &Path) {
    let ipvs_in_use = Path::new("/proc/net/ip_vs").exists();
    let mut expected_files: Vec<&str> = DumpFile::ALL
        .into_iter()
        .filter(|file| ipvs_in_use || *file != DumpFile::Ipvsadm)
        .map(DumpFile::name)
        .collect();
    expected_files.sort_unstable();
    let nodes_dir = root.join("nodes");
    assert_eq!(
        entries(&nodes_dir),
        cluster
            .nodes
            .iter()
            .map(|n| n.name.clone())
            .collect::<Vec<_>>()
    );
    for node in &cluster.nodes {
        let node_dir = nodes_dir.join(&node.name);
        assert_eq!(entries(&node_dir), ["host", "pods"]);
        assert_eq!(entries(&node_dir.join("host")), expected_files);
        assert_eq!(entries(&node_dir.join("pods")), ["default"]);
        let pods_dir = node_dir.join("pods").join("default");
        assert_eq!(
            entries(&pods_dir),
            node.pods.iter().map(|p| p.name.clone()).collect::<Vec<_>>()
        );
        for pod in &node.pods {
            assert_eq!(entries(&pods_dir.join(&pod.name)), expected_files);
        }
    }
    assert_eq!(
        entries(&root.join("cluster")),
        [
            "configmaps.yaml",
            "daemonsets.yaml",
            "endpointslices.yaml",
            "namespaces.yaml",
            "nodes.yaml",
            "pods.yaml",
            "services.yaml"
        ]
    );
}

/// The node's dumps hold flannel's VXLAN device, its per-peer route,
/// neighbour and FDB entry, the cni0 bridge with the pods' veths,
/// forwarding, and the flannel and kube-proxy rules.
fn assert_node_dump(node: &Node, peers: &[&Node], dir: &Path) {
    let links = json_file(&dir.join("ip-link.json"));
    let vtep = find(&links, "ifname", "flannel.1");
    assert_eq!(vtep["mtu"], 1450);
    let vxlan = &vtep["linkinfo"];
    assert_eq!(vxlan["info_kind"], "vxlan");
    assert_eq!(vxlan["info_data"]["id"], 1);
    assert_eq!(vxlan["info_data"]["port"], 8472);
    assert_eq!(vxlan["info_data"]["local"], node.ip.to_string());
    assert_eq!(vxlan["info_data"]["learning"], false);
    assert_eq!(vxlan["info_data"]["link"], "eth0");
    let bridge = find(&links, "ifname", "cni0");
    assert_eq!(bridge["linkinfo"]["info_kind"], "bridge");
    for pod in &node.pods {
        let veth = find(&links, "ifname", &pod.host_veth);
        assert_eq!(veth["master"], "cni0");
        assert_eq!(veth["linkinfo"]["info_slave_data"]["hairpin"], true);
    }

    let addrs = json_file(&dir.join("ip-addr.json"));
    let vtep_addrs = &find(&addrs, "ifname", "flannel.1")["addr_info"];
    assert_eq!(
        vtep_addrs[0]["local"],
        node.pod_cidr().network().to_string()
    );
    assert_eq!(vtep_addrs[0]["prefixlen"], 32);

    let routes = json_file(&dir.join("ip-route.json"));
    let neighbours = json_file(&dir.join("ip-neigh.json"));
    let fdb = json_file(&dir.join("bridge-fdb.json"));
    for peer in peers {
        let peer_vtep = peer.pod_cidr().network().to_string();
        let peer_mac = vtep_mac_in(&peer_links(peer, dir));
        let route = find(&routes, "dst", &peer.pod_cidr().to_string());
        assert_eq!(route["gateway"], peer_vtep);
        assert_eq!(route["dev"], "flannel.1");
        assert!(has(&route["flags"], "onlink"), "{route}");
        let neighbour = find(&neighbours, "dst", &peer_vtep);
        assert_eq!(neighbour["lladdr"], peer_mac);
        assert!(has(&neighbour["state"], "PERMANENT"), "{neighbour}");
        let entry = find(&fdb, "mac", &peer_mac);
        assert_eq!(entry["ifname"], "flannel.1");
        assert_eq!(entry["dst"], peer.ip.to_string());
        assert_eq!(entry["state"], "permanent");
        assert!(has(&entry["flags"], "self"), "{entry}");
    }

    let iptables = text_file(&dir.join("iptables-save.txt"));
    for line in [
        "-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING",
        "-A POSTROUTING -m comment --comment \"flanneld masq\" -j FLANNEL-POSTRTG",
        "-A FORWARD -m comment --comment \"flanneld forward\" -j FLANNEL-FWD",
        "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
        "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
    ] {
        assert!(iptables.lines().any(|l| l == line), "missing {line}");
    }
    let subnet_return = format!(
        "-A FLANNEL-POSTRTG -s {} -d 10.244.0.0/16 -m comment --comment \"flanneld masq\" -j RETURN",
        node.pod_cidr()
    );
    assert!(iptables.contains(&subnet_return), "missing {subnet_return}");
    let statistic_branches = iptables
        .lines()
        .filter(|l| l.starts_with("-A KUBE-SVC-") && l.contains("-m statistic --mode random"))
        .count();
    assert_eq!(statistic_branches, 3, "4 endpoints take 3 random branches");
    for peer_or_self in peers.iter().copied().chain([node]) {
        for pod in &peer_or_self.pods {
            let dnat = format!("-j DNAT --to-destination {}:8080", pod.ip());
            assert!(iptables.contains(&dnat), "missing {dnat}");
        }
    }

    let sysctl = text_file(&dir.join("sysctl.txt"));
    assert!(sysctl.lines().any(|l| l == "net.ipv4.ip_forward = 1"));
    assert!(sysctl.lines().all(|l| l.starts_with("net.")));
}

/// The peer's own collected `ip-link.json`, beside this node's directory.
fn peer_links(peer: &Node, node_host_dir: &Path) -> Value {
    let nodes_dir = node_host_dir
        .parent()
        .and_then(Path::parent)
        .expect("nodes/<node>/host");
    json_file(&nodes_dir.join(&peer.name).join("host").join("ip-link.json"))
}

fn vtep_mac_in(links: &Value) -> String {
    find(links, "ifname", "flannel.1")["address"]
        .as_str()
        .expect("flannel.1 has a MAC address")
        .to_string()
}

/// The pod's dumps hold its address, MTU and routes, and its listener.
fn assert_pod_dump(node: &Node, pod: &Pod, dir: &Path) {
    let addrs = json_file(&dir.join("ip-addr.json"));
    let eth0 = find(&addrs, "ifname", "eth0");
    assert_eq!(eth0["mtu"], 1450);
    let inet = eth0["addr_info"]
        .as_array()
        .expect("addr_info")
        .iter()
        .find(|a| a["family"] == "inet")
        .expect("an IPv4 address");
    assert_eq!(inet["local"], pod.ip().to_string());
    assert_eq!(inet["prefixlen"], 24);

    let routes = json_file(&dir.join("ip-route.json"));
    let default = find(&routes, "dst", "default");
    assert_eq!(default["gateway"], node.gateway().to_string());
    assert_eq!(default["dev"], "eth0");
    assert_eq!(
        find(&routes, "dst", "10.244.0.0/16")["gateway"],
        node.gateway().to_string()
    );

    let sockets = text_file(&dir.join("ss.txt"));
    assert!(
        sockets
            .lines()
            .any(|l| l.starts_with("tcp") && l.contains(":8080 ")),
        "no listener on 8080:\n{sockets}"
    );
    assert_eq!(text_file(&dir.join("iptables-save.txt")), "");
}

/// The Kubernetes objects are well-formed for their kinds and agree with
/// what the kernel holds.
fn assert_cluster_objects(cluster: &Cluster, root: &Path) {
    let dir = root.join("cluster");
    let nodes: List<k8s::Node> = yaml_file(&dir.join("nodes.yaml"));
    assert_eq!(nodes.items.len(), cluster.nodes.len());
    for (object, node) in nodes.items.iter().zip(&cluster.nodes) {
        let host_links = json_file(
            &root
                .join("nodes")
                .join(&node.name)
                .join("host")
                .join("ip-link.json"),
        );
        let annotations = object.metadata.annotations.as_ref().expect("annotations");
        let backend: Value =
            serde_json::from_str(&annotations["flannel.alpha.coreos.com/backend-data"])
                .expect("backend-data is JSON");
        assert_eq!(backend["VtepMAC"], vtep_mac_in(&host_links));
        assert_eq!(backend["VNI"], 1);
        assert_eq!(
            annotations["flannel.alpha.coreos.com/backend-type"],
            "vxlan"
        );
        assert_eq!(
            annotations["flannel.alpha.coreos.com/public-ip"],
            node.ip.to_string()
        );
        let spec = object.spec.as_ref().expect("spec");
        assert_eq!(
            spec.pod_cidr.as_deref(),
            Some(node.pod_cidr().to_string().as_str())
        );
    }

    let pods: List<k8s::Pod> = yaml_file(&dir.join("pods.yaml"));
    let pod_ips: Vec<(String, String, String)> = pods
        .items
        .iter()
        .map(|p| {
            let status = p.status.as_ref().expect("status");
            (
                p.metadata.name.clone().expect("name"),
                status.pod_ip.clone().expect("podIP"),
                status.host_ip.clone().expect("hostIP"),
            )
        })
        .collect();
    let expected: Vec<(String, String, String)> = cluster
        .endpoints()
        .into_iter()
        .map(|(node, pod)| (pod.name.clone(), pod.ip().to_string(), node.ip.to_string()))
        .collect();
    assert_eq!(pod_ips, expected);

    let services: List<k8s::Service> = yaml_file(&dir.join("services.yaml"));
    let spec = services.items[0].spec.as_ref().expect("spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.100"));
    let slices: List<k8s::EndpointSlice> = yaml_file(&dir.join("endpointslices.yaml"));
    let addresses: Vec<&str> = slices.items[0]
        .endpoints
        .iter()
        .flatten()
        .flat_map(|e| e.addresses.iter().map(String::as_str))
        .collect();
    assert_eq!(
        addresses,
        ["10.244.1.2", "10.244.1.3", "10.244.2.2", "10.244.2.3"]
    );

    let config_maps: List<k8s::ConfigMap> = yaml_file(&dir.join("configmaps.yaml"));
    let data = config_maps.items[0].data.as_ref().expect("data");
    let net_conf: Value = serde_json::from_str(&data["net-conf.json"]).expect("net-conf.json");
    assert_eq!(
        net_conf,
        json!({"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan"}})
    );
    let daemon_sets: List<k8s::DaemonSet> = yaml_file(&dir.join("daemonsets.yaml"));
    assert_eq!(
        daemon_sets.items[0].metadata.name.as_deref(),
        Some("kube-flannel-ds")
    );
    let namespaces: List<k8s::Namespace> = yaml_file(&dir.join("namespaces.yaml"));
    let names: Vec<&str> = namespaces
        .items
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["default", "kube-system", "kube-flannel"]);
}

/// The sorted names in `dir`.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

fn text_file(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&text_file(path))
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn yaml_file<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    serde_saphyr::from_str(&text_file(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The element of the JSON array `list` whose `key` is `value`.
fn find<'a>(list: &'a Value, key: &str, value: &str) -> &'a Value {
    list.as_array()
        .and_then(|items| items.iter().find(|item| item[key] == value))
        .unwrap_or_else(|| panic!("no element with {key} = {value} in {list}"))
}

/// Whether the JSON array `flags` holds `flag`.
fn has(flags: &Value, flag: &str) -> bool {
    flags
        .as_array()
        .is_some_and(|f| f.iter().any(|v| v == flag))
}
