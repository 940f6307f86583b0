//! The bundled example is real kernel output from the lab (a 2-node Flannel
//! VXLAN cluster): every parser must read it cleanly and see what the lab
//! built.

use std::net::IpAddr;
use std::path::Path;

use skoop::net::Protocol;
use skoop::snapshot::cluster::IpOwner;
use skoop::snapshot::netns::link::{LinkKind, LinkLayerAddress};
use skoop::snapshot::netns::neigh::NeighbourState;
use skoop::snapshot::netns::route::RouteFlag;
use skoop::snapshot::{NetnsId, Snapshot};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn load() -> Snapshot {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/flannel-vxlan");
    let (snapshot, problems) = Snapshot::load(&root).expect("the example is a snapshot");
    assert!(
        problems.is_empty(),
        "the example has problems: {problems:#?}"
    );
    snapshot
}

fn host(snapshot: &Snapshot, node: &str) -> skoop::snapshot::netns::NetnsDump {
    snapshot.namespaces[&NetnsId::Host { node: node.into() }]
        .dump()
        .clone()
}

#[test]
fn example_node_has_flannel_vxlan_device_with_remote_vtep() {
    let snapshot = load();
    let node1 = host(&snapshot, "node-1");
    let links = node1.links.as_ref().unwrap();
    let flannel = links
        .iter()
        .find(|l| l.ifname == "flannel.1")
        .expect("flannel.1");
    let Some(LinkKind::Vxlan(vxlan)) = flannel.kind() else {
        panic!("flannel.1 is {flannel:?}")
    };
    assert_eq!(
        (vxlan.id, vxlan.port, vxlan.local),
        (1, Some(8472), Some(ip("172.18.0.11")))
    );
    assert_eq!(vxlan.link.as_deref(), Some("eth0"));
    assert_eq!(flannel.mtu, 1450);

    // What flanneld installs for the remote node: route, permanent neighbour, FDB entry.
    let routes = node1.routes.as_ref().unwrap();
    let remote = routes
        .iter()
        .find(|r| r.destination() == Some("10.244.2.0/24".parse().unwrap()))
        .expect("route to node-2's pod CIDR");
    assert_eq!(
        (remote.gateway, remote.dev.as_deref()),
        (Some(ip("10.244.2.0")), Some("flannel.1"))
    );
    assert!(remote.has_flag(&RouteFlag::Onlink));
    let neighbour = node1
        .neighbours
        .as_ref()
        .unwrap()
        .iter()
        .find(|n| n.dev == "flannel.1")
        .unwrap();
    assert_eq!(neighbour.dst, ip("10.244.2.0"));
    assert!(neighbour.has_state(&NeighbourState::Permanent));
    let fdb = node1
        .fdb
        .as_ref()
        .unwrap()
        .iter()
        .find(|f| f.ifname == "flannel.1")
        .unwrap();
    assert_eq!(fdb.dst, Some(ip("172.18.0.12")));
    // The FDB entry points at node-2's flannel.1 MAC, as the neighbour entry does.
    let node2_links = host(&snapshot, "node-2").links.unwrap();
    let node2_vtep = node2_links
        .iter()
        .find(|l| l.ifname == "flannel.1")
        .unwrap();
    assert_eq!(node2_vtep.address, Some(LinkLayerAddress::Mac(fdb.mac)));
}

#[test]
fn example_pods_are_veths_into_cni0_with_a_listener() {
    let snapshot = load();
    let node1 = host(&snapshot, "node-1");
    let node_links = node1.links.as_ref().unwrap();
    let pod = &snapshot.namespaces[&NetnsId::Pod {
        node: "node-1".into(),
        namespace: "default".into(),
        name: "web-0".into(),
    }]
        .dump();
    let eth0 = pod
        .links
        .as_ref()
        .unwrap()
        .iter()
        .find(|l| l.ifname == "eth0")
        .unwrap();
    assert_eq!(eth0.kind(), Some(&LinkKind::Veth));
    // The peer is the node's veth with that ifindex, and it is a port of cni0.
    let peer = node_links
        .iter()
        .find(|l| Some(l.ifindex) == eth0.link_index)
        .expect("veth peer on node-1");
    assert_eq!(peer.master.as_deref(), Some("cni0"));
    let default = pod
        .routes
        .as_ref()
        .unwrap()
        .iter()
        .find(|r| r.destination().is_some_and(|d| d.prefix_len() == 0))
        .unwrap();
    assert_eq!(default.gateway, Some(ip("10.244.1.1")));
    let sockets = pod.sockets.as_ref().unwrap();
    assert!(
        sockets
            .iter()
            .any(|s| s.protocol == Protocol::Tcp && s.port == 8080)
    );
    let forwarding = node1
        .sysctls
        .as_ref()
        .unwrap()
        .get_i64("net.ipv4.ip_forward")
        .unwrap();
    assert_eq!(forwarding, Some(1));
}

#[test]
fn example_cluster_objects_index_every_address() {
    let cluster = load().cluster;
    assert_eq!(cluster.nodes().count(), 2);
    assert_eq!(cluster.pods().count(), 4);
    assert!(
        matches!(cluster.by_ip(ip("10.96.0.100")), [IpOwner::ServiceClusterIp { name, .. }] if name == "web")
    );
    assert!(
        matches!(cluster.by_ip(ip("10.244.2.3")), [IpOwner::Pod { name, .. }] if name == "web-3")
    );
    assert!(
        matches!(cluster.by_ip(ip("172.18.0.12")), [IpOwner::Node { name }] if name == "node-2")
    );
    let config = cluster
        .config_map("kube-flannel", "kube-flannel-cfg")
        .expect("kube-flannel-cfg");
    assert!(config.data["net-conf.json"].contains("vxlan"));
    let service = cluster.service("default", "web").unwrap();
    let slices = cluster.endpoint_slices_for(service).collect::<Vec<_>>();
    let endpoints: usize = slices.iter().map(|s| s.endpoints.len()).sum();
    assert_eq!(endpoints, 4);
}

/// A pod's connection to its own address is routed by its local table out
/// of `lo` and received back on it (issue 12): delivered to its listener,
/// or refused where nothing listens; never a loop.
#[test]
fn a_pod_reaches_itself_through_lo() {
    use std::sync::Arc;

    use skoop::engine::{self, Disposition, Protocol, Request};
    use skoop::packs::{LoadedPacks, builtin_sources};

    let snapshot = Arc::new(load());
    let (packs, problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    for (port, expected) in [
        ("8080", Disposition::Delivered),
        ("9999", Disposition::NoListener),
    ] {
        let request = Request {
            from: "default/web-0".parse().expect("a pod"),
            to: format!("default/web-0:{port}").parse().expect("a pod"),
            port: None,
            protocol: Protocol::Tcp,
            size: None,
            via: None,
            family: None,
        };
        let diagnosis = engine::diagnose(&snapshot, &request, &packs).expect("resolves");
        assert_eq!(
            diagnosis.disposition(),
            expected,
            "{:#?}",
            diagnosis.findings
        );
        assert!(
            diagnosis
                .findings
                .iter()
                .all(|f| f.id != skoop::engine::codes::ENGINE_LOOP),
            "{:#?}",
            diagnosis.findings
        );
    }
}
