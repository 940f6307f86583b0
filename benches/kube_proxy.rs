//! The kube-proxy pack on a generated large cluster (`cargo bench --bench
//! kube_proxy`): 10,000 services in 10 namespaces over 100 nodes, three
//! endpoints each, every tenth a NodePort with externalTrafficPolicy Local,
//! every fourth with a named targetPort. Figures: one `service` hook call (a
//! ClusterIP, a NodePort) and every check of the pack over the snapshot.
//! Targets: a hook call well under a millisecond; the checks within seconds.

mod common;

use common::median;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rhai::Dynamic;
use skoop::net::Protocol;
use skoop::packs::{HopScope, LoadedPacks, PackSource, Packet};
use skoop::snapshot::{NetnsId, Snapshot};

const NODES: usize = 100;
const NAMESPACES: usize = 10;
const SERVICES: usize = 10_000;
const ENDPOINTS: usize = 3;

/// Service `i`: its namespace, ClusterIP and NodePort (every tenth has one).
fn service(i: usize) -> (String, String, u16) {
    let node_port = u16::try_from(30000 + i / 10).expect("a port");
    (
        format!("ns-{}", i % NAMESPACES),
        format!("10.96.{}.{}", i / 250, i % 250 + 1),
        node_port,
    )
}

/// Pod `e` of service `i`: its IP and node.
fn pod(i: usize, e: usize) -> (String, usize) {
    let n = i * ENDPOINTS + e;
    (
        format!("10.{}.{}.{}", 100 + n / 62500, n / 250 % 250, n % 250 + 1),
        n % NODES,
    )
}

/// The cluster as `kubectl get -o yaml` lists would hold it.
fn generate(dir: &Path) {
    let cluster = dir.join("cluster");
    std::fs::create_dir_all(&cluster).expect("a cluster directory");
    let list = || String::from("apiVersion: v1\nkind: List\nitems:\n");
    let (mut services, mut slices, mut pods) = (list(), list(), list());
    for i in 0..SERVICES {
        let (namespace, cluster_ip, node_port) = service(i);
        let target = if i % 4 == 0 {
            "http".to_owned()
        } else {
            "8080".to_owned()
        };
        let exposure = if i % 10 == 0 {
            format!(
                "type: NodePort, externalTrafficPolicy: Local, ports: [{{name: web, port: 80, protocol: TCP, targetPort: {target}, nodePort: {node_port}}}]"
            )
        } else {
            format!("ports: [{{name: web, port: 80, protocol: TCP, targetPort: {target}}}]")
        };
        let _ = writeln!(
            services,
            "- {{apiVersion: v1, kind: Service, metadata: {{name: svc-{i}, namespace: {namespace}}}, spec: {{clusterIP: \"{cluster_ip}\", selector: {{app: svc-{i}}}, {exposure}}}}}"
        );
        let mut endpoints = String::new();
        for e in 0..ENDPOINTS {
            let (ip, node) = pod(i, e);
            let _ = write!(
                endpoints,
                "{{addresses: [\"{ip}\"], conditions: {{ready: true}}, nodeName: node-{node}, targetRef: {{kind: Pod, name: svc-{i}-{e}, namespace: {namespace}}}}},"
            );
            let _ = writeln!(
                pods,
                "- {{apiVersion: v1, kind: Pod, metadata: {{name: svc-{i}-{e}, namespace: {namespace}, labels: {{app: svc-{i}}}}}, spec: {{nodeName: node-{node}, containers: [{{name: main, ports: [{{name: http, containerPort: 8080}}]}}]}}, status: {{phase: Running, podIP: \"{ip}\"}}}}"
            );
        }
        let _ = writeln!(
            slices,
            "- {{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {{name: svc-{i}-x, namespace: {namespace}, labels: {{kubernetes.io/service-name: svc-{i}}}}}, addressType: IPv4, ports: [{{name: web, port: 8080, protocol: TCP}}], endpoints: [{endpoints}]}}"
        );
    }
    for (file, text) in [
        ("nodes.yaml", nodes_text()),
        ("services.yaml", services),
        ("endpointslices.yaml", slices),
        ("pods.yaml", pods),
    ] {
        std::fs::write(cluster.join(file), text).expect("written");
    }
}

/// Nodes `node-0`.. with InternalIPs 172.18.0.1..
fn nodes_text() -> String {
    let mut nodes = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for n in 0..NODES {
        let _ = writeln!(
            nodes,
            "- {{apiVersion: v1, kind: Node, metadata: {{name: node-{n}}}, spec: {{podCIDR: 10.244.{n}.0/24}}, status: {{addresses: [{{type: InternalIP, address: \"172.18.{}.{}\"}}]}}}}",
            n / 250,
            n % 250 + 1
        );
    }
    nodes
}

/// The median time of the `service` hook for a packet from outside the
/// cluster to `dst:port`, arriving at `node`.
fn hook_call(
    pack: &LoadedPacks,
    snapshot: &Arc<Snapshot>,
    node: &str,
    dst: &str,
    port: u16,
) -> Duration {
    let packet = Packet {
        src: "198.18.0.1".parse().expect("ip"),
        dst: dst.parse().expect("ip"),
        protocol: Protocol::Tcp,
        sport: Some(40000),
        dport: Some(port),
        mark: 0,
        length: 60,
    };
    let hop = Arc::new(HopScope {
        in_iface: Some("eth0".into()),
        ..HopScope::new(
            snapshot.clone(),
            NetnsId::Host { node: node.into() },
            packet,
        )
    });
    let packet = Dynamic::from(hop.packet.clone());
    let answer = pack
        .call_hook("kube-proxy", "service", &hop, packet.clone())
        .expect("the hook runs");
    assert!(!answer.is_unit(), "{dst}:{port} is translated");
    median(101, || {
        let _ = pack.call_hook("kube-proxy", "service", &hop, packet.clone());
    })
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    generate(dir.path());
    let start = Instant::now();
    let (snapshot, problems) = Snapshot::load(dir.path()).expect("a snapshot");
    assert!(
        problems.is_empty(),
        "{} problems, first {:?}",
        problems.len(),
        problems.first()
    );
    println!(
        "generated cluster: {NODES} nodes, {SERVICES} services x {ENDPOINTS} endpoints, loaded in {:?}",
        start.elapsed()
    );
    let snapshot = Arc::new(snapshot);
    let source = PackSource::read(Path::new("rules/kube-proxy")).expect("the pack");
    let (pack, problems) = LoadedPacks::load(vec![source], &[]);
    assert!(problems.is_empty(), "{problems:?}");

    let (small, problems) = Snapshot::load(Path::new("rules/kube-proxy/tests/services/snapshot"))
        .expect("the pack's test snapshot");
    assert!(problems.is_empty(), "{problems:?}");
    let call = hook_call(&pack, &Arc::new(small), "node-2", "10.96.0.10", 80);
    println!(
        "one service hook call to a ClusterIP of the pack's test snapshot: {call:?} (median of 101)"
    );
    let (_, cluster_ip, node_port) = service(SERVICES / 2 + 10);
    for (what, dst, port) in [
        ("a ClusterIP", cluster_ip.as_str(), 80),
        ("a NodePort", "172.18.0.1", node_port),
    ] {
        let call = hook_call(&pack, &snapshot, "node-0", dst, port);
        println!("one service hook call to {what}: {call:?} (median of 101)");
    }

    let start = Instant::now();
    let findings = pack.evaluate_snapshot(&snapshot);
    println!(
        "every kube-proxy check over {SERVICES} services: {:?} ({} findings)",
        start.elapsed(),
        findings.len()
    );
}
