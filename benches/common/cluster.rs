//! A generated large snapshot of the bundled example's shape, for the scale
//! benchmark: `examples/flannel-vxlan` (two real nodes, four `web` pods, the
//! `default/web` service) grown to `nodes` nodes with Flannel VXLAN, 30 pods
//! per node, 2 services per node with 4 endpoints each (one EndpointSlice
//! each; every 4th a NodePort), a NetworkPolicy per 10 services and 50
//! namespaces. Every generated object is a copy of one of the example's real
//! objects (a pod, a node, a service, a slice) with its identity changed, so
//! that what is read has the shape kubectl writes.
//!
//! The cluster objects are written as the live collector writes them
//! (pretty-printed `kind: List`s, `cluster/<plural>.<group>.json`, in parts
//! of `FILE_BYTES`), and once more as one List of every object for
//! `python3 -c 'json.load'`.
//! The two example nodes keep their full namespace dumps (the nodes on the
//! path), grown as flanneld and kube-proxy would grow them on such a
//! cluster: a route, a neighbour and an FDB entry per other node, and
//! kube-proxy's iptables rules for every service
//! (`iptables::generate::service_rules`). Flannel's network becomes
//! 10.128.0.0/9, which holds the example's 10.244.1.0/24 and 10.244.2.0/24
//! and 5,000 more /24s; the other nodes have no dumps.
//!
//! With `Cni::CalicoVxlan` the example is `examples/calico-vxlan` instead,
//! grown as calico-node grows it: the IPPool becomes 10.128.0.0/9, each
//! generated node has one /26 block (a BlockAffinity and its IPAMBlock, the
//! block's first address its VXLAN tunnel address, its pods the next 30)
//! and the annotations calico-node writes, and the path nodes get felix's
//! route, neighbour and FDB entry per other node's VTEP, its VXLAN hosts in
//! `cali40all-vxlan-net` and its pools in the IPAM ipsets.
//!
//! Everything that is not an address (UIDs, VTEP MACs, container IDs,
//! resource versions) comes from `seed`: the same seed writes the same bytes.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::Path;

use serde_json::{Value, json};
use skoop::snapshot::netns::iptables::generate::{ServicePort, ServiceRules, service_rules};

/// The example's own nodes, with dumps: the nodes on the path.
const PATH_NODES: [&str; 2] = ["node-1", "node-2"];
/// The pod network of both examples (Flannel's network, Calico's IPPool).
const EXAMPLE_NETWORK: &str = "10.244.0.0/16";
const NETWORK: &str = "10.128.0.0/9";
const NETWORK_START: Ipv4Addr = Ipv4Addr::new(10, 128, 0, 0);
const PODS_PER_NODE: usize = 30;
const SERVICES_PER_NODE: usize = 2;
const ENDPOINTS: usize = 4;
const NAMESPACES: usize = 50;
/// The collector writes one List per kind in files of about this size
/// (`pods.core.json`, `pods.core.2.json`, ...; `collect/api.rs`), as 150,000
/// pods make 500 MB, over the loader's 256 MiB per file (`docs/limits.md`).
const FILE_BYTES: u64 = 64 * 1024 * 1024;
/// NodePorts are 30000-32767.
const NODE_PORTS: usize = 2768;

/// The CNI of the generated cluster, and so the example it grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(
    dead_code,
    reason = "each bench binary compiles this module; scale.rs generates Flannel only"
)]
pub enum Cni {
    /// `examples/flannel-vxlan`: a /24 per node, pods from its second address.
    FlannelVxlan,
    /// `examples/calico-vxlan`: a /26 block per node, its first address the
    /// node's VXLAN tunnel address, pods from the second.
    CalicoVxlan,
}

impl Cni {
    fn example(self) -> &'static str {
        match self {
            Cni::FlannelVxlan => "examples/flannel-vxlan",
            Cni::CalicoVxlan => "examples/calico-vxlan",
        }
    }

    /// The prefix length of a node's share of the pod network.
    fn subnet_prefix(self) -> u32 {
        match self {
            Cni::FlannelVxlan => 24,
            Cni::CalicoVxlan => 26,
        }
    }

    /// The address of generated node `k`'s pod in `slot`.
    fn pod_address(self, k: usize, slot: usize) -> Ipv4Addr {
        let first = match self {
            Cni::FlannelVxlan => 2,
            Cni::CalicoVxlan => 1,
        };
        Ipv4Addr::from(u32::from(self.subnet(k)) + slot as u32 + first)
    }

    /// The network address of generated node `k`'s pod subnet (Flannel's
    /// lease, Calico's block).
    fn subnet(self, k: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(NETWORK_START) + ((k as u32) << (32 - self.subnet_prefix())))
    }
}

/// How the cluster objects are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(
    dead_code,
    reason = "each bench binary compiles this module; only scale.rs and matrix.rs write kubectl's shape"
)]
pub enum Written {
    /// As the live collector writes them: the example's objects, in
    /// two-space JSON Lists of one kind in files of about [`FILE_BYTES`].
    Collector,
    /// As `kubectl get <kind> -A -o json|yaml > <kind>.json|yaml` writes
    /// them by hand: each Pod as complete as kubectl prints one (volume,
    /// mount, probe, resources, environment, owner, tolerations, status in
    /// full), one file per kind however large (every pod in one), JSON
    /// indented by four spaces, YAML in block style with sorted keys.
    Kubectl(Syntax),
}

/// The syntax of [`Written::Kubectl`] files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code, reason = "see `Written`")]
pub enum Syntax {
    Json,
    Yaml,
}

/// What to generate.
pub struct Shape {
    /// Nodes in all, the example's two included.
    pub nodes: usize,
    pub seed: u64,
    pub cni: Cni,
    pub written: Written,
}

/// What was written.
pub struct Generated {
    pub pods: usize,
    pub services: usize,
    pub policies: usize,
}

impl Shape {
    fn generated_nodes(&self) -> usize {
        self.nodes.saturating_sub(PATH_NODES.len())
    }

    fn services(&self) -> usize {
        self.nodes * SERVICES_PER_NODE
    }
}

/// The seed the benchmarks generate their clusters from, so that they all
/// measure the same clusters.
pub const SEED: u64 = 14;

/// [`generate`] of `nodes` nodes of `cni` from [`SEED`], saying on stderr
/// how long it took.
pub fn generate_timed(nodes: usize, cni: Cni, dir: &Path, all_objects: &Path) -> Generated {
    generate_written(nodes, cni, Written::Collector, dir, all_objects)
}

/// [`generate_timed`], written as `written` says.
pub fn generate_written(
    nodes: usize,
    cni: Cni,
    written: Written,
    dir: &Path,
    all_objects: &Path,
) -> Generated {
    let start = std::time::Instant::now();
    let shape = Shape {
        nodes,
        seed: SEED,
        cni,
        written,
    };
    let generated = generate(&shape, dir, all_objects).expect("the snapshot is written");
    eprintln!("{nodes} nodes generated in {:?}", start.elapsed());
    generated
}

/// Writes the snapshot into `dir` (which must not exist) and every cluster
/// object as one List into `all_objects`.
pub fn generate(shape: &Shape, dir: &Path, all_objects: &Path) -> io::Result<Generated> {
    assert!(
        (1..20 * 256).contains(&shape.generated_nodes()),
        "10.128.0.0/9 less the services' 10.96.0.0/12 holds up to 5,120 /24s"
    );
    let cni = shape.cni;
    let mut random = SplitMix(shape.seed);
    let example = Example::read(cni)?;
    let cluster_dir = dir.join("cluster");
    fs::create_dir_all(&cluster_dir)?;
    copy_tree(&Path::new(cni.example()).join("nodes"), &dir.join("nodes"))?;

    let nodes: Vec<GeneratedNode> = (0..shape.generated_nodes())
        .map(|k| GeneratedNode::new(k, cni, &mut random))
        .collect();
    let services: Vec<ServicePort> = (0..shape.services())
        .map(|s| service_port(s, nodes.len(), cni))
        .collect();
    let place = |k: usize| Place {
        node: &nodes[k],
        k,
        nodes: nodes.len(),
        services: services.len(),
    };

    let style = match shape.written {
        Written::Collector => Style::Collector,
        Written::Kubectl(Syntax::Json) => Style::KubectlJson,
        Written::Kubectl(Syntax::Yaml) => Style::KubectlYaml,
    };
    let mut all = ListWriter::create(all_objects, Style::Collector)?;
    let mut write = |file: &str, items: &mut dyn Iterator<Item = Value>| -> io::Result<()> {
        let (stem, _) = file.rsplit_once('.').unwrap_or((file, "json"));
        // kubectl's files are named by kind alone, and hold every object.
        let (stem, extension, split) = match style {
            Style::Collector => (stem, "json", FILE_BYTES),
            Style::KubectlJson => (stem.split('.').next().unwrap_or(stem), "json", u64::MAX),
            Style::KubectlYaml => (stem.split('.').next().unwrap_or(stem), "yaml", u64::MAX),
        };
        let named = |part: usize| match (style, part) {
            (Style::Collector, 1) => file.to_owned(),
            (_, 1) => format!("{stem}.{extension}"),
            _ => format!("{stem}.{part}.{extension}"),
        };
        let mut list = ListWriter::create(&cluster_dir.join(named(1)), style)?;
        let mut part = 1;
        for mut item in items {
            if list.written >= split {
                list.finish()?;
                part += 1;
                list = ListWriter::create(&cluster_dir.join(named(part)), style)?;
            }
            if style != Style::Collector && item["kind"] == "Pod" {
                complete_pod(&mut item);
            }
            list.push(&item)?;
            if style == Style::Collector {
                all.push(&item)?;
            }
        }
        list.finish()
    };
    write(
        "nodes.core.json",
        &mut example.nodes.iter().cloned().chain(
            nodes
                .iter()
                .map(|node| node.object(&example.nodes[0], cni, &mut random)),
        ),
    )?;
    write(
        "namespaces.core.json",
        &mut example
            .namespaces
            .iter()
            .cloned()
            .chain((0..NAMESPACES).map(|n| namespace(&example.namespaces[0], n, &mut random))),
    )?;
    let path_pods = path_node_pods(&example.pods, cni, shape.seed);
    let added_pods = path_pods.len();
    write(
        "pods.core.json",
        &mut example
            .pods
            .iter()
            .cloned()
            .chain(path_pods)
            .chain((0..nodes.len()).flat_map(|k| {
                let place = place(k);
                let (template, mut random) = (&example.pods[0], SplitMix(place.node.seed));
                (0..PODS_PER_NODE).map(move |slot| pod(template, &place, slot, cni, &mut random))
            })),
    )?;
    write(
        "services.core.json",
        &mut example.services.iter().cloned().chain(
            services
                .iter()
                .enumerate()
                .map(|(s, port)| service(&example.services[0], s, port, &mut random)),
        ),
    )?;
    write(
        "endpointslices.discovery.k8s.io.json",
        &mut example.slices.iter().cloned().chain(
            services
                .iter()
                .enumerate()
                .map(|(s, port)| slice(&example.slices[0], s, port, &nodes, &mut random)),
        ),
    )?;
    let policies = services.len() / 10;
    write(
        "networkpolicies.networking.k8s.io.json",
        &mut (0..policies).map(|p| policy(p * 10, &mut random)),
    )?;
    write(
        "daemonsets.apps.json",
        &mut example.daemon_sets.iter().cloned(),
    )?;
    // The collector writes each ConfigMap it reads in a file of its own;
    // kubectl, all of them in one.
    if style == Style::Collector {
        for config_map in &example.config_maps {
            let name = config_map["metadata"]["name"].as_str().unwrap_or("unnamed");
            write(
                &format!("configmaps.core.{name}.json"),
                &mut std::iter::once(config_map.clone()),
            )?;
        }
    } else {
        write(
            "configmaps.core.json",
            &mut example.config_maps.iter().cloned(),
        )?;
    }
    if cni == Cni::CalicoVxlan {
        let calico = &example.calico;
        write(
            "ippools.crd.projectcalico.org.json",
            &mut calico.pools.iter().cloned(),
        )?;
        write(
            "felixconfigurations.crd.projectcalico.org.json",
            &mut calico.felix_configurations.iter().cloned(),
        )?;
        write(
            "blockaffinities.crd.projectcalico.org.json",
            &mut calico.block_affinities.iter().cloned().chain(
                nodes
                    .iter()
                    .map(|node| block_affinity(&calico.block_affinities[0], node, &mut random)),
            ),
        )?;
        write(
            "ipamblocks.crd.projectcalico.org.json",
            &mut calico.ipam_blocks.iter().cloned().chain(
                (0..nodes.len())
                    .map(|k| ipam_block(&calico.ipam_blocks[0], &place(k), &mut random)),
            ),
        )?;
    }
    all.finish()?;

    for node in PATH_NODES {
        grow_path_node(
            &dir.join("nodes").join(node).join("host"),
            cni,
            &nodes,
            &services,
        )?;
    }
    Ok(Generated {
        pods: example.pods.len() + added_pods + nodes.len() * PODS_PER_NODE,
        services: example.services.len() + services.len(),
        policies,
    })
}

/// The example's objects, by kind, as JSON values.
struct Example {
    nodes: Vec<Value>,
    namespaces: Vec<Value>,
    pods: Vec<Value>,
    services: Vec<Value>,
    slices: Vec<Value>,
    daemon_sets: Vec<Value>,
    config_maps: Vec<Value>,
    /// Empty for Flannel.
    calico: CalicoObjects,
}

/// The Calico example's custom resources, its IPPools over the generated
/// network.
#[derive(Default)]
struct CalicoObjects {
    pools: Vec<Value>,
    felix_configurations: Vec<Value>,
    block_affinities: Vec<Value>,
    ipam_blocks: Vec<Value>,
}

impl Example {
    fn read(cni: Cni) -> io::Result<Example> {
        let items = |file: &str| -> io::Result<Vec<Value>> {
            let text = fs::read_to_string(Path::new(cni.example()).join("cluster").join(file))?;
            let list: Value = serde_saphyr::from_str(&text)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            match list.get("items") {
                Some(Value::Array(items)) if !items.is_empty() => Ok(items.clone()),
                _ => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{file}: expected a List with items"),
                )),
            }
        };
        let mut config_maps = items("configmaps.yaml")?;
        for config_map in &mut config_maps {
            if let Some(Value::String(conf)) = config_map.pointer_mut("/data/net-conf.json") {
                *conf = conf.replace(EXAMPLE_NETWORK, NETWORK);
            }
        }
        let calico = match cni {
            Cni::FlannelVxlan => CalicoObjects::default(),
            Cni::CalicoVxlan => {
                let mut pools = items("ippools.yaml")?;
                for pool in &mut pools {
                    if pool["spec"]["cidr"] == EXAMPLE_NETWORK {
                        pool["spec"]["cidr"] = json!(NETWORK);
                    }
                }
                CalicoObjects {
                    pools,
                    felix_configurations: items("felixconfigurations.yaml")?,
                    block_affinities: items("blockaffinities.yaml")?,
                    ipam_blocks: items("ipamblocks.yaml")?,
                }
            }
        };
        Ok(Example {
            nodes: items("nodes.yaml")?,
            namespaces: items("namespaces.yaml")?,
            pods: items("pods.yaml")?,
            services: items("services.yaml")?,
            slices: items("endpointslices.yaml")?,
            daemon_sets: items("daemonsets.yaml")?,
            config_maps,
            calico,
        })
    }
}

/// A node beside the example's: `node-{k + 3}`.
struct GeneratedNode {
    name: String,
    /// The network address of its pod CIDR (a /24).
    subnet: Ipv4Addr,
    address: Ipv4Addr,
    vtep_mac: String,
    /// Seeds what its pods draw.
    seed: u64,
}

impl GeneratedNode {
    fn new(k: usize, cni: Cni, random: &mut SplitMix) -> Self {
        GeneratedNode {
            name: format!("node-{}", k + 3),
            subnet: cni.subnet(k),
            address: Ipv4Addr::new(172, 20, (k / 250) as u8, (k % 250 + 1) as u8),
            vtep_mac: random.mac(),
            seed: random.next(),
        }
    }

    fn object(&self, template: &Value, cni: Cni, random: &mut SplitMix) -> Value {
        let mut node = template.clone();
        let (name, address, subnet) = (&self.name, self.address.to_string(), self.subnet);
        let annotations = &mut node["metadata"]["annotations"];
        match cni {
            Cni::FlannelVxlan => {
                annotations["flannel.alpha.coreos.com/backend-data"] =
                    json!(format!("{{\"VNI\":1,\"VtepMAC\":\"{}\"}}", self.vtep_mac));
                annotations["flannel.alpha.coreos.com/public-ip"] = json!(address);
            }
            // As calico-node writes them; the node addresses are in
            // 172.20.0.0/16.
            Cni::CalicoVxlan => {
                annotations["projectcalico.org/IPv4Address"] = json!(format!("{address}/16"));
                annotations["projectcalico.org/IPv4VXLANTunnelAddr"] = json!(subnet.to_string());
                annotations["projectcalico.org/VXLANTunnelMACAddr"] = json!(self.vtep_mac);
            }
        }
        node["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
        identify(&mut node, name, None, random);
        node["spec"] =
            json!({"podCIDR": format!("{subnet}/24"), "podCIDRs": [format!("{subnet}/24")]});
        node["status"]["addresses"] = json!([
            {"address": address, "type": "InternalIP"},
            {"address": name, "type": "Hostname"},
        ]);
        node["status"]["nodeInfo"]["bootID"] = json!(random.uuid());
        node["status"]["nodeInfo"]["systemUUID"] = json!(random.uuid());
        node
    }
}

/// Where backend `b` of the services runs: backends are spread over the
/// generated nodes first, 8 slots deep, so that a service's 4 endpoints are
/// on 4 nodes.
fn backend_place(backend: usize, nodes: usize) -> (usize, usize) {
    (backend % nodes, backend / nodes)
}

/// The service and endpoint a pod in `slot` of node `k` backs, if any.
fn backing(k: usize, slot: usize, nodes: usize, services: usize) -> Option<(usize, usize)> {
    let backend = slot * nodes + k;
    (backend < services * ENDPOINTS).then_some((backend / ENDPOINTS, backend % ENDPOINTS))
}

fn service_namespace(s: usize) -> String {
    format!("ns-{}", s % NAMESPACES)
}

/// Service `s` as kube-proxy sees it: `ns-*/svc-{s}:http`, ClusterIP from
/// 10.96.1.0 on, port 80 to 8080, every 4th with a NodePort.
fn service_port(s: usize, nodes: usize, cni: Cni) -> ServicePort {
    ServicePort {
        name: format!("{}/svc-{s}:http", service_namespace(s)),
        protocol: "tcp",
        cluster_ip: Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 96, 1, 0)) + s as u32),
        port: 80,
        node_port: (s.is_multiple_of(4) && s / 4 < NODE_PORTS).then(|| 30000 + (s / 4) as u16),
        target_port: 8080,
        endpoints: (0..ENDPOINTS)
            .map(|e| {
                let (k, slot) = backend_place(s * ENDPOINTS + e, nodes);
                cni.pod_address(k, slot)
            })
            .collect(),
    }
}

/// Generated node `k` of `nodes`, beside `services` services.
#[derive(Clone, Copy)]
struct Place<'a> {
    node: &'a GeneratedNode,
    k: usize,
    nodes: usize,
    services: usize,
}

/// The name, namespace and `app` label of generated node `k`'s pod in `slot`.
fn pod_identity(place: &Place, slot: usize) -> (String, String, String) {
    let Place {
        k, nodes, services, ..
    } = *place;
    match backing(k, slot, nodes, services) {
        Some((s, e)) => (
            format!("svc-{s}-{e}"),
            service_namespace(s),
            format!("svc-{s}"),
        ),
        None => {
            let n = k * PODS_PER_NODE + slot;
            (
                format!("job-{n}"),
                format!("ns-{}", n % NAMESPACES),
                format!("job-{}", n % 100),
            )
        }
    }
}

fn pod(template: &Value, place: &Place, slot: usize, cni: Cni, random: &mut SplitMix) -> Value {
    let (node, k) = (place.node, place.k);
    let (name, namespace, app) = pod_identity(place, slot);
    let mut pod = template.clone();
    identify(&mut pod, &name, Some(&namespace), random);
    pod["metadata"]["labels"] = json!({"app": app});
    pod["spec"]["nodeName"] = json!(node.name);
    let ip = cni.pod_address(k, slot);
    place_pod(&mut pod, ip, &node.address.to_string(), cni, random);
    pod
}

/// The pods added on each of the example's nodes, so that it holds
/// [`PODS_PER_NODE`] as every generated node does: copies of the example's
/// last pod there (its node and host address), each at the next address of
/// the node's pod subnet, in the generated pods' namespaces and labels. They
/// have no dumps of their own: a flow from one starts at the CNI pack's
/// intent (`skoop matrix --from-pods '*' --from-dumped-nodes`).
fn path_node_pods(example: &[Value], cni: Cni, seed: u64) -> Vec<Value> {
    let mut pods = Vec::new();
    for (n, node) in PATH_NODES.iter().enumerate() {
        let mut random = SplitMix(seed ^ (n as u64 + 1));
        let on_node: Vec<&Value> = example
            .iter()
            .filter(|pod| pod["spec"]["nodeName"] == *node)
            .collect();
        let address = |pod: &Value| -> Ipv4Addr {
            pod["status"]["podIP"]
                .as_str()
                .and_then(|ip| ip.parse().ok())
                .expect("the example's pods have IPv4 addresses")
        };
        let Some(last) = on_node.iter().max_by_key(|pod| address(pod)) else {
            continue;
        };
        let host = last["status"]["hostIP"].as_str().expect("a host address");
        for i in 0..PODS_PER_NODE.saturating_sub(on_node.len()) {
            let mut pod = (*last).clone();
            let name = format!("job-{node}-{i}");
            identify(
                &mut pod,
                &name,
                Some(&format!("ns-{}", i % NAMESPACES)),
                &mut random,
            );
            pod["metadata"]["labels"] = json!({"app": format!("job-{}", i % 100)});
            let ip = Ipv4Addr::from(u32::from(address(last)) + 1 + i as u32);
            place_pod(&mut pod, ip, host, cni, &mut random);
            pods.push(pod);
        }
    }
    pods
}

/// `pod` at address `ip` on the node at `host`, with a container of its own.
fn place_pod(pod: &mut Value, ip: Ipv4Addr, host: &str, cni: Cni, random: &mut SplitMix) {
    let ip = ip.to_string();
    let status = &mut pod["status"];
    status["hostIP"] = json!(host);
    status["hostIPs"] = json!([{"ip": host}]);
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{"ip": ip}]);
    let container = format!("{:016x}{:016x}", random.next(), random.next());
    status["containerStatuses"][0]["containerID"] = json!(format!("containerd://{container}"));
    if cni == Cni::CalicoVxlan {
        let annotations = &mut pod["metadata"]["annotations"];
        annotations["cni.projectcalico.org/containerID"] = json!(container);
        annotations["cni.projectcalico.org/podIP"] = json!(format!("{ip}/32"));
        annotations["cni.projectcalico.org/podIPs"] = json!(format!("{ip}/32"));
    }
}

/// The BlockAffinity calico-ipam writes for `node`'s block.
fn block_affinity(template: &Value, node: &GeneratedNode, random: &mut SplitMix) -> Value {
    let mut affinity = template.clone();
    let block = format!("{}/26", node.subnet);
    let name = format!("{}-{}", node.name, block.replace(['.', '/'], "-"));
    identify(&mut affinity, &name, None, random);
    affinity["spec"]["cidr"] = json!(block);
    affinity["spec"]["node"] = json!(node.name);
    affinity
}

/// The IPAMBlock of a generated node: its first address the node's VXLAN
/// tunnel address, the next 30 its pods', the rest unallocated.
fn ipam_block(template: &Value, place: &Place, random: &mut SplitMix) -> Value {
    let node = place.node;
    let mut block = template.clone();
    let cidr = format!("{}/26", node.subnet);
    identify(&mut block, &cidr.replace(['.', '/'], "-"), None, random);
    let spec = &mut block["spec"];
    spec["cidr"] = json!(cidr);
    spec["affinity"] = json!(format!("host:{}", node.name));
    let used = PODS_PER_NODE + 1;
    spec["allocations"] = (0..64)
        .map(|i| if i < used { json!(i) } else { Value::Null })
        .collect();
    spec["unallocated"] = json!((used..64).collect::<Vec<_>>());
    let tunnel = json!({"handle_id": format!("vxlan-tunnel-addr-{}", node.name),
        "secondary": {"node": node.name, "type": "vxlanTunnelAddress"}});
    spec["attributes"] = std::iter::once(tunnel)
        .chain((0..PODS_PER_NODE).map(|slot| {
            let (pod, namespace, _) = pod_identity(place, slot);
            json!({"handle_id": format!("k8s-pod-network.{:016x}{:016x}", random.next(), random.next()),
                "secondary": {"namespace": namespace, "node": node.name, "pod": pod,
                    "timestamp": "2025-06-02 09:00:05.000000000 +0000 UTC"}})
        }))
        .collect();
    block
}

fn service(template: &Value, s: usize, port: &ServicePort, random: &mut SplitMix) -> Value {
    let mut service = template.clone();
    let (name, namespace) = (format!("svc-{s}"), service_namespace(s));
    identify(&mut service, &name, Some(&namespace), random);
    service["metadata"]["labels"] = json!({"app": name});
    let spec = &mut service["spec"];
    let ip = port.cluster_ip.to_string();
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    spec["selector"] = json!({"app": name});
    spec["ports"] = json!([{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]);
    if let Some(node_port) = port.node_port {
        spec["ports"][0]["nodePort"] = json!(node_port);
        spec["type"] = json!("NodePort");
        spec["externalTrafficPolicy"] = json!("Cluster");
    }
    service
}

fn slice(
    template: &Value,
    s: usize,
    port: &ServicePort,
    nodes: &[GeneratedNode],
    random: &mut SplitMix,
) -> Value {
    let mut slice = template.clone();
    let (service, namespace) = (format!("svc-{s}"), service_namespace(s));
    identify(
        &mut slice,
        &format!("{service}-{}", random.word(5)),
        Some(&namespace),
        random,
    );
    let metadata = &mut slice["metadata"];
    metadata["generateName"] = json!(format!("{service}-"));
    metadata["labels"]["app"] = json!(service);
    metadata["labels"]["kubernetes.io/service-name"] = json!(service);
    metadata["ownerReferences"][0]["name"] = json!(service);
    metadata["ownerReferences"][0]["uid"] = json!(random.uuid());
    let template_endpoint = template["endpoints"][0].clone();
    slice["endpoints"] = port
        .endpoints
        .iter()
        .enumerate()
        .map(|(e, ip)| {
            let (k, _) = backend_place(s * ENDPOINTS + e, nodes.len());
            let mut endpoint = template_endpoint.clone();
            endpoint["addresses"] = json!([ip.to_string()]);
            endpoint["nodeName"] = json!(nodes[k].name);
            endpoint["targetRef"] = json!({"kind": "Pod", "name": format!("{service}-{e}"),
                "namespace": namespace, "uid": random.uuid()});
            endpoint
        })
        .collect();
    slice
}

/// Policy for service `s`: its pods admit TCP 8080 from `role: client` pods
/// of their namespace and from the `monitoring` namespace.
fn policy(s: usize, random: &mut SplitMix) -> Value {
    let mut policy = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"creationTimestamp": "2025-06-02T09:00:00Z", "generation": 1},
        "spec": {
            "podSelector": {"matchLabels": {"app": format!("svc-{s}")}},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [
                    {"podSelector": {"matchLabels": {"role": "client"}}},
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
                ],
                "ports": [{"port": 8080, "protocol": "TCP"}],
            }],
        },
    });
    identify(
        &mut policy,
        &format!("allow-svc-{s}"),
        Some(&service_namespace(s)),
        random,
    );
    policy
}

fn namespace(template: &Value, n: usize, random: &mut SplitMix) -> Value {
    let mut namespace = template.clone();
    let name = format!("ns-{n}");
    identify(&mut namespace, &name, None, random);
    namespace["metadata"]["labels"] = json!({"kubernetes.io/metadata.name": name});
    namespace
}

/// Gives an object its name, namespace, UID and resource version.
fn identify(object: &mut Value, name: &str, namespace: Option<&str>, random: &mut SplitMix) {
    let metadata = &mut object["metadata"];
    metadata["name"] = json!(name);
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    metadata["uid"] = json!(random.uuid());
    metadata["resourceVersion"] = json!((random.next() % 1_000_000).to_string());
}

/// A node on the path as it would be on the generated cluster: flanneld's
/// (or felix's) route, neighbour and FDB entry for every other node, and
/// kube-proxy's rules for every service in its nat table.
fn grow_path_node(
    host: &Path,
    cni: Cni,
    nodes: &[GeneratedNode],
    services: &[ServicePort],
) -> io::Result<()> {
    let append = |file: &str, entries: &mut dyn Iterator<Item = Value>| -> io::Result<()> {
        let path = host.join(file);
        let mut array: Vec<Value> = serde_json::from_str(&fs::read_to_string(&path)?)?;
        array.extend(entries);
        fs::write(&path, serde_json::to_string(&array)?)
    };
    // The VTEP of each node is the first address of its subnet: flanneld's
    // (protocol boot) or felix's (protocol 80) route goes through it.
    let (device, prefix, protocol) = match cni {
        Cni::FlannelVxlan => ("flannel.1", 24, "boot"),
        Cni::CalicoVxlan => ("vxlan.calico", 26, "80"),
    };
    append(
        "ip-route.json",
        &mut nodes.iter().map(|node| {
            json!({"type": "unicast", "dst": format!("{}/{prefix}", node.subnet), "gateway": node.subnet.to_string(),
                "dev": device, "table": "main", "protocol": protocol, "scope": "global", "flags": ["onlink"]})
        }),
    )?;
    append(
        "ip-neigh.json",
        &mut nodes.iter().map(|node| {
            json!({"dst": node.subnet.to_string(), "dev": device, "lladdr": node.vtep_mac, "state": ["PERMANENT"]})
        }),
    )?;
    append(
        "bridge-fdb.json",
        &mut nodes.iter().map(|node| {
            json!({"mac": node.vtep_mac, "ifname": device, "dst": node.address.to_string(),
                "flags": ["self"], "state": "permanent"})
        }),
    )?;
    if cni == Cni::CalicoVxlan {
        // felix's ipsets: the pools, and every other node's address as a
        // host VXLAN packets may come from.
        let path = host.join("ipset-save.txt");
        let mut text = fs::read_to_string(&path)?.replace(EXAMPLE_NETWORK, NETWORK);
        for node in nodes {
            let _ = writeln!(text, "add cali40all-vxlan-net {}", node.address);
        }
        fs::write(path, text)?;
    }

    let path = host.join("iptables-save.txt");
    let text = fs::read_to_string(&path)?.replace(EXAMPLE_NETWORK, NETWORK);
    let ServiceRules { chains, rules } = service_rules(services, NETWORK);
    let mut out = String::with_capacity(text.len() + chains.len() + rules.len());
    let mut table = "";
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('*') {
            table = if name == "nat" { "nat" } else { "" };
        }
        // The services' chains after the nat table's last declaration, their
        // rules before KUBE-SERVICES' last rule (the NodePort one).
        if table == "nat"
            && line
                .starts_with("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports")
        {
            out.push_str(&rules);
        }
        let _ = writeln!(out, "{line}");
        if table == "nat" && line == ":KUBE-SERVICES - [0:0]" {
            out.push_str(&chains);
        }
    }
    fs::write(path, out)
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// How a [`ListWriter`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    /// As `serde_json::to_vec_pretty` writes the collector's lists (keys
    /// sorted, two-space indents).
    Collector,
    /// As `kubectl get -o json` writes a List: four-space indents, the
    /// List's `metadata` after its items.
    KubectlJson,
    /// As `kubectl get -o yaml` writes a List.
    KubectlYaml,
}

/// A `kind: List` written item by item, in its [`Style`], without holding
/// the list in memory.
struct ListWriter {
    out: BufWriter<fs::File>,
    style: Style,
    first: bool,
    /// Bytes of items written so far.
    written: u64,
}

impl ListWriter {
    fn create(path: &Path, style: Style) -> io::Result<ListWriter> {
        let mut out = BufWriter::new(fs::File::create(path)?);
        out.write_all(match style {
            Style::Collector => b"{\n  \"apiVersion\": \"v1\",\n  \"items\": [",
            Style::KubectlJson => b"{\n    \"apiVersion\": \"v1\",\n    \"items\": [",
            Style::KubectlYaml => b"apiVersion: v1\nitems:\n",
        })?;
        Ok(ListWriter {
            out,
            style,
            first: true,
            written: 0,
        })
    }

    fn push(&mut self, item: &Value) -> io::Result<()> {
        let text = match self.style {
            Style::Collector => serde_json::to_string_pretty(item)?,
            Style::KubectlJson => {
                let mut out = Vec::new();
                let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
                let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
                serde::Serialize::serialize(item, &mut serializer)?;
                String::from_utf8(out).map_err(io::Error::other)?
            }
            Style::KubectlYaml => {
                let mut text = String::new();
                yaml_node(item, 2, &mut text);
                text.replace_range(..2, "- ");
                self.first = false;
                self.out.write_all(text.as_bytes())?;
                self.written += text.len() as u64;
                return Ok(());
            }
        };
        let pad: &[u8] = match self.style {
            Style::Collector => b"    ",
            _ => b"        ",
        };
        self.out
            .write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        for (i, line) in text.lines().enumerate() {
            if i > 0 {
                self.out.write_all(b"\n")?;
            }
            self.out.write_all(pad)?;
            self.out.write_all(line.as_bytes())?;
            self.written += (line.len() + pad.len() + 1) as u64;
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<()> {
        match self.style {
            Style::Collector => {
                self.out
                    .write_all(if self.first { b"]" } else { b"\n  ]" })?;
                self.out.write_all(b",\n  \"kind\": \"List\"\n}")?;
            }
            Style::KubectlJson => {
                self.out
                    .write_all(if self.first { b"]" } else { b"\n    ]" })?;
                self.out.write_all(
                    b",\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n",
                )?;
            }
            Style::KubectlYaml => {
                if self.first {
                    self.out.write_all(b"[]\n")?;
                }
                self.out
                    .write_all(b"kind: List\nmetadata:\n  resourceVersion: \"\"\n")?;
            }
        }
        self.out.flush()
    }
}

/// `value` in YAML's block style as kubectl (go-yaml) writes it, a mapping's
/// keys and a sequence's dashes at `indent`.
fn yaml_node(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::Object(inner) if !inner.is_empty() => {
                        let _ = writeln!(out, "{pad}{key}:");
                        yaml_node(value, indent + 2, out);
                    }
                    // A sequence under a key is written at the key's indentation.
                    Value::Array(items) if !items.is_empty() => {
                        let _ = writeln!(out, "{pad}{key}:");
                        yaml_node(value, indent, out);
                    }
                    Value::String(text) if literal(text) => {
                        let chomp = if text.ends_with('\n') { "" } else { "-" };
                        let _ = writeln!(out, "{pad}{key}: |{chomp}");
                        for line in text.lines() {
                            let _ = writeln!(out, "{pad}  {line}");
                        }
                    }
                    _ => {
                        let _ = writeln!(out, "{pad}{key}: {}", yaml_scalar(value));
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                let mut text = String::new();
                match item {
                    Value::Object(map) if !map.is_empty() => yaml_node(item, indent + 2, &mut text),
                    _ => {
                        let _ = writeln!(text, "{pad}  {}", yaml_scalar(item));
                    }
                }
                let _ = write!(out, "{pad}- {}", &text[indent + 2..]);
            }
        }
        _ => {
            let _ = writeln!(out, "{pad}{}", yaml_scalar(value));
        }
    }
}

/// A string kubectl writes as a literal block.
fn literal(text: &str) -> bool {
    text.contains('\n')
        && !text.ends_with("\n\n")
        && text
            .lines()
            .all(|line| !line.starts_with(' ') && !line.is_empty())
}

/// A scalar as go-yaml writes it: plain where YAML would read it back as
/// the same string, else double-quoted (JSON's escapes are YAML's).
fn yaml_scalar(value: &Value) -> String {
    match value {
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        Value::String(text) => {
            let special = [
                "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~",
            ]
            .contains(&text.to_ascii_lowercase().as_str());
            let bytes = text.as_bytes();
            let safe = |b: &u8| b.is_ascii_alphanumeric() || b"-_./:@=+".contains(b);
            let address = bytes.iter().filter(|&&b| b == b'.').count() >= 2
                && bytes.iter().all(|b| b.is_ascii_digit() || *b == b'.');
            let word = bytes
                .first()
                .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'/')
                && bytes.iter().all(safe)
                && !text.contains(": ")
                && !text.ends_with(':');
            if !special && (address || word) {
                text.clone()
            } else {
                serde_json::to_string(text).unwrap_or_default()
            }
        }
        other => other.to_string(),
    }
}

/// Completes a pod as kubectl prints one from a real cluster: the service
/// account's projected volume and its mount, a probe, resources, an
/// environment variable, its ReplicaSet and the default tolerations.
fn complete_pod(pod: &mut Value) {
    let name = pod["metadata"]["name"].as_str().unwrap_or("pod").to_owned();
    let owner = name
        .rsplit_once('-')
        .map_or(name.as_str(), |(owner, _)| owner)
        .to_owned();
    let uid = pod["metadata"]["uid"].clone();
    let volume = format!("kube-api-access-{}", &name.len().to_string());
    let metadata = &mut pod["metadata"];
    metadata["generateName"] = json!(format!("{owner}-"));
    metadata["labels"]["pod-template-hash"] = json!("7c5ddbdf54");
    metadata["ownerReferences"] = json!([{"apiVersion": "apps/v1", "blockOwnerDeletion": true,
        "controller": true, "kind": "ReplicaSet", "name": format!("{owner}-7c5ddbdf54"), "uid": uid}]);
    let probe = json!({"failureThreshold": 3, "httpGet": {"path": "/healthz", "port": 8080,
        "scheme": "HTTP"}, "initialDelaySeconds": 5, "periodSeconds": 10, "successThreshold": 1,
        "timeoutSeconds": 1});
    let spec = &mut pod["spec"];
    if let Some(container) = spec["containers"].get_mut(0) {
        container["env"] = json!([{"name": "LOG_LEVEL", "value": "info"}]);
        container["readinessProbe"] = probe;
        container["resources"] = json!({"limits": {"memory": "256Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"}});
        container["volumeMounts"] = json!([{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            "name": volume, "readOnly": true}]);
    }
    spec["tolerations"] = json!([
        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
    ]);
    spec["volumes"] = json!([{"name": volume, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}},
    ]}}]);
    pod["status"]["qosClass"] = json!("Burstable");
}

/// splitmix64: small, seeded, good enough for identifiers.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// A locally administered unicast MAC address.
    fn mac(&mut self) -> String {
        let bytes = self.next().to_be_bytes();
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            (bytes[0] & 0xfe) | 0x02,
            bytes[1],
            bytes[2],
            bytes[3],
            bytes[4],
            bytes[5]
        )
    }

    /// `len` lowercase letters and digits, as generateName suffixes are.
    fn word(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..len)
            .map(|_| char::from(ALPHABET[(self.next() % ALPHABET.len() as u64) as usize]))
            .collect()
    }
}
