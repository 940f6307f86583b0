//! The kube-proxy pack's `service` hook, called as the walker calls it at a
//! node without netfilter dumps, on the pack's own test snapshot
//! (`rules/kube-proxy/tests/services/snapshot`: two nodes, a service of each
//! kind), and its checks on that snapshot.

use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rhai::{Array, Dynamic, Map};
use skoop::net::Protocol;
use skoop::packs::{FindingStatus, HopScope, LoadedPacks, Packet, Subject, builtin_sources};
use skoop::snapshot::{NetnsId, Snapshot};

fn snapshot() -> Arc<Snapshot> {
    static SNAPSHOT: OnceLock<Arc<Snapshot>> = OnceLock::new();
    SNAPSHOT
        .get_or_init(|| {
            let (snapshot, problems) =
                Snapshot::load(Path::new("rules/kube-proxy/tests/services/snapshot"))
                    .expect("a snapshot");
            assert!(problems.is_empty(), "{problems:?}");
            Arc::new(snapshot)
        })
        .clone()
}

/// The built-in packs, loaded once per test thread (a Rhai engine is not
/// shared between threads).
fn packs() -> &'static LoadedPacks {
    thread_local! {
        static PACKS: &'static LoadedPacks = {
            let (loaded, problems) = LoadedPacks::load(builtin_sources(), &[]);
            assert!(problems.is_empty(), "{problems:?}");
            Box::leak(Box::new(loaded))
        };
    }
    PACKS.with(|packs| *packs)
}

/// A packet from `src` to `dst:port` as it arrives in `node`'s root
/// namespace on eth0 (`in_iface: None`: the node sends it itself).
struct Flow<'a> {
    node: &'a str,
    in_iface: Option<&'a str>,
    src: &'a str,
    dst: &'a str,
    port: Option<u16>,
    protocol: Protocol,
}

impl<'a> Flow<'a> {
    fn tcp(node: &'a str, src: &'a str, dst: &'a str, port: u16) -> Flow<'a> {
        Flow {
            node,
            in_iface: Some("eth0"),
            src,
            dst,
            port: Some(port),
            protocol: Protocol::Tcp,
        }
    }

    fn hop(&self, netns: NetnsId) -> Arc<HopScope> {
        let ip = |text: &str| text.parse::<IpAddr>().expect("an IP");
        let packet = Packet {
            src: ip(self.src),
            dst: ip(self.dst),
            protocol: self.protocol,
            sport: self.port.map(|_| 40000),
            dport: self.port,
            mark: 0,
            length: 60,
        };
        Arc::new(HopScope {
            in_iface: self.in_iface.map(str::to_owned),
            ..HopScope::new(snapshot(), netns, packet)
        })
    }

    /// The hook's answer in the node's root namespace.
    fn service(&self) -> Dynamic {
        self.ask(NetnsId::Host {
            node: self.node.into(),
        })
    }

    fn ask(&self, netns: NetnsId) -> Dynamic {
        let hop = self.hop(netns);
        packs()
            .call_hook(
                "kube-proxy",
                "service",
                &hop,
                Dynamic::from(hop.packet.clone()),
            )
            .unwrap_or_else(|finding| panic!("the hook fails: {finding:#?}"))
    }

    /// kube-proxy leaves the packet alone here: the hook answers `()`.
    fn untranslated(&self) -> bool {
        self.service().is_unit()
    }

    /// The hook's translation, which must not be `()`.
    fn translation(&self) -> Translation {
        let answer = self.service();
        let map = answer
            .clone()
            .try_cast::<Map>()
            .unwrap_or_else(|| panic!("a translation, not {answer}"));
        let text = |key: &str| map.get(key).map(|v| v.to_string()).unwrap_or_default();
        let backends: Vec<Map> = map["backends"]
            .clone()
            .try_cast::<Array>()
            .expect("backends")
            .into_iter()
            .map(|b| b.try_cast::<Map>().expect("a backend"))
            .collect();
        Translation {
            service: text("service"),
            port: map["port"].clone(),
            backends: backends
                .iter()
                .map(|b| {
                    let ip = b["ip"].clone().try_cast::<IpAddr>().expect("an Ip");
                    let port = b["port"].as_int().expect("a port");
                    (
                        format!("{ip}:{port}"),
                        b["pod"].to_string(),
                        b["node"].to_string(),
                    )
                })
                .collect(),
            masqueraded: backends
                .iter()
                .map(|b| b["masquerade"].as_bool().expect("masquerade is a bool"))
                .collect(),
            why: text("why"),
        }
    }
}

#[derive(Debug)]
struct Translation {
    service: String,
    port: Dynamic,
    /// `(ip:port, pod, node)` of each backend.
    backends: Vec<(String, String, String)>,
    /// Whether the packet is masqueraded on the way to each backend.
    masqueraded: Vec<bool>,
    why: String,
}

impl Translation {
    fn addresses(&self) -> Vec<&str> {
        self.backends.iter().map(|(a, _, _)| a.as_str()).collect()
    }
}

const OUTSIDE: &str = "198.18.0.1";
const CLIENT_ON_NODE_2: &str = "10.244.2.9";

#[test]
fn cluster_ip_branches_to_every_ready_endpoint_at_the_port_its_named_target_port_resolved_to() {
    let t = Flow::tcp("node-2", CLIENT_ON_NODE_2, "10.96.0.10", 80).translation();
    assert_eq!(t.service, "default/web");
    assert_eq!(t.port.to_string(), "http");
    assert_eq!(
        t.backends,
        [
            (
                "10.244.1.2:8080".into(),
                "default/web-0".into(),
                "node-1".into()
            ),
            (
                "10.244.2.2:8080".into(),
                "default/web-1".into(),
                "node-2".into()
            ),
        ]
    );
    assert!(t.why.starts_with("ClusterIP 10.96.0.10:80/tcp of default/web (port http): to any of its 2 endpoints (EndpointSlice web-7x2kq ("), "{}", t.why);
    assert!(
        !t.why.contains("masquerade"),
        "a pod's traffic keeps its source: {}",
        t.why
    );
    assert_eq!(t.masqueraded, [false, false]);
}

#[test]
fn not_ready_endpoint_is_no_branch() {
    let t = Flow::tcp("node-1", CLIENT_ON_NODE_2, "10.96.0.10", 80).translation();
    assert!(
        !t.addresses().contains(&"10.244.2.3:8080"),
        "web-2 is not ready: {:?}",
        t.backends
    );
}

#[test]
fn traffic_to_a_cluster_ip_from_outside_the_pods_is_masqueraded() {
    let from_node = Flow {
        in_iface: None,
        ..Flow::tcp("node-1", "172.18.0.11", "10.96.0.10", 80)
    };
    let t = from_node.translation();
    assert_eq!(t.backends.len(), 2);
    assert_eq!(t.masqueraded, [true, true]);
    assert!(
        t.why
            .ends_with("; masqueraded to the node's address (the source is not local traffic)"),
        "{}",
        t.why
    );
}

#[test]
fn node_port_is_served_on_every_address_of_the_node_and_masqueraded_under_cluster_policy() {
    for address in ["172.18.0.11", "203.0.113.11"] {
        let t = Flow::tcp("node-1", OUTSIDE, address, 30080).translation();
        assert_eq!(t.service, "default/web");
        assert_eq!(t.addresses(), ["10.244.1.2:8080", "10.244.2.2:8080"]);
        assert_eq!(t.masqueraded, [true, true]);
        assert!(t.why.starts_with(&format!("NodePort {address}:30080/tcp of default/web (port http): externalTrafficPolicy Cluster")), "{}", t.why);
        assert!(
            t.why
                .ends_with("and the packet is masqueraded to the node's address"),
            "{}",
            t.why
        );
    }
}

#[test]
fn node_port_of_another_node_is_not_translated_here() {
    assert!(Flow::tcp("node-1", OUTSIDE, "172.18.0.12", 30080).untranslated());
    assert!(
        Flow::tcp("node-1", OUTSIDE, "172.18.0.11", 30099).untranslated(),
        "no service has NodePort 30099"
    );
}

#[test]
fn external_traffic_policy_local_keeps_to_the_nodes_own_endpoint() {
    let t = Flow::tcp("node-1", OUTSIDE, "172.18.0.11", 30081).translation();
    assert_eq!(t.service, "default/local");
    assert!(t.port.is_unit(), "the port is unnamed");
    assert_eq!(t.addresses(), ["10.244.1.3:8080"]);
    assert!(
        t.why
            .contains("externalTrafficPolicy Local, so only its one endpoint on node-1 ("),
        "{}",
        t.why
    );
    assert!(
        t.why.ends_with("the client's source address kept"),
        "{}",
        t.why
    );
}

#[test]
fn external_traffic_policy_local_without_a_local_endpoint_drops() {
    let t = Flow::tcp("node-2", OUTSIDE, "172.18.0.12", 30081).translation();
    assert!(t.backends.is_empty(), "{:?}", t.backends);
    assert!(t.why.contains("externalTrafficPolicy Local and no ready endpoint on node-2 (1 of 1 endpoint ready in the cluster"), "{}", t.why);
    assert!(t.why.ends_with("so kube-proxy DROPs it"), "{}", t.why);
}

#[test]
fn external_traffic_policy_local_does_not_bind_pods_nor_the_node_itself() {
    let from_pod = Flow::tcp("node-2", CLIENT_ON_NODE_2, "172.18.0.12", 30081).translation();
    assert_eq!(from_pod.addresses(), ["10.244.1.3:8080"]);
    assert!(
        from_pod
            .why
            .contains("does not apply to traffic from a pod"),
        "{}",
        from_pod.why
    );
    let from_node = Flow {
        in_iface: None,
        ..Flow::tcp("node-2", "172.18.0.12", "172.18.0.12", 30081)
    };
    let t = from_node.translation();
    assert_eq!(t.addresses(), ["10.244.1.3:8080"]);
    assert!(
        t.why.contains("does not apply to the node's own traffic"),
        "{}",
        t.why
    );
    assert!(
        t.why.ends_with("masqueraded to the node's address"),
        "{}",
        t.why
    );
}

#[test]
fn node_cidr_detection_counts_only_the_nodes_own_pods_as_local() {
    let source = skoop::packs::PackSource::read(Path::new("rules/kube-proxy")).expect("readable");
    let overrides = [
        skoop::packs::Override::parse("kube-proxy.detect_local_mode=NodeCIDR")
            .expect("an override"),
    ];
    let (loaded, problems) = LoadedPacks::load(vec![source], &overrides);
    assert!(problems.is_empty(), "{problems:?}");
    // A pod of node-2 reaching node-1's NodePort is not node-1's local traffic.
    let flow = Flow::tcp("node-1", CLIENT_ON_NODE_2, "10.96.0.10", 80);
    let hop = flow.hop(NetnsId::Host {
        node: "node-1".into(),
    });
    let answer = loaded
        .call_hook(
            "kube-proxy",
            "service",
            &hop,
            Dynamic::from(hop.packet.clone()),
        )
        .expect("runs");
    let why = answer.try_cast::<Map>().expect("a translation")["why"].to_string();
    assert!(why.ends_with("(the source is not local traffic)"), "{why}");
}

#[test]
fn internal_traffic_policy_local_keeps_to_the_clients_node() {
    let on_node_1 = Flow::tcp("node-1", "10.244.1.2", "10.96.0.12", 80).translation();
    assert_eq!(on_node_1.addresses(), ["10.244.1.4:8080"]);
    assert!(
        on_node_1
            .why
            .contains("internalTrafficPolicy Local, so only its one endpoint on node-1 ("),
        "{}",
        on_node_1.why
    );
    let on_node_2 = Flow::tcp("node-2", CLIENT_ON_NODE_2, "10.96.0.12", 80).translation();
    assert!(on_node_2.backends.is_empty());
    assert!(
        on_node_2.why.ends_with("so kube-proxy DROPs it"),
        "{}",
        on_node_2.why
    );
}

#[test]
fn external_ip_is_external_traffic() {
    let t = Flow::tcp("node-2", OUTSIDE, "192.0.2.10", 80).translation();
    assert_eq!(t.service, "default/web");
    assert_eq!(t.addresses(), ["10.244.1.2:8080", "10.244.2.2:8080"]);
    assert!(
        t.why.starts_with(
            "externalIP 192.0.2.10:80/tcp of default/web (port http): externalTrafficPolicy Cluster"
        ),
        "{}",
        t.why
    );
}

#[test]
fn load_balancer_ip_follows_the_external_traffic_policy() {
    let here = Flow::tcp("node-1", OUTSIDE, "198.51.100.11", 80).translation();
    assert_eq!(here.addresses(), ["10.244.1.3:8080"]);
    assert!(
        here.why
            .starts_with("LoadBalancer IP 198.51.100.11:80/tcp of default/local:"),
        "{}",
        here.why
    );
    let elsewhere = Flow::tcp("node-2", OUTSIDE, "198.51.100.11", 80).translation();
    assert!(elsewhere.backends.is_empty());
}

#[test]
fn endpoints_object_is_read_when_the_service_has_no_endpoint_slice() {
    let t = Flow::tcp("node-1", "10.244.1.2", "10.96.0.13", 5432).translation();
    assert_eq!(
        t.backends,
        [(
            "10.244.2.5:5432".into(),
            "default/legacy-0".into(),
            "node-2".into()
        )],
        "its notReadyAddresses are no branch"
    );
    assert!(t.why.contains("(Endpoints legacy ("), "{}", t.why);
    assert!(t.why.contains("; no EndpointSlice)"), "{}", t.why);
}

#[test]
fn headless_service_is_not_proxied() {
    // The headless service's endpoint is reached at its own address.
    assert!(Flow::tcp("node-1", CLIENT_ON_NODE_2, "10.244.1.2", 8080).untranslated());
}

#[test]
fn protocol_must_match_the_service_port() {
    assert!(
        Flow::tcp("node-2", CLIENT_ON_NODE_2, "10.96.0.14", 53).untranslated(),
        "dns serves UDP 53 only"
    );
    let udp = Flow {
        protocol: Protocol::Udp,
        ..Flow::tcp("node-2", CLIENT_ON_NODE_2, "10.96.0.14", 53)
    };
    let t = udp.translation();
    assert_eq!(t.addresses(), ["10.244.2.6:53"]);
    assert_eq!(t.port.to_string(), "dns");
    let icmp = Flow {
        port: None,
        protocol: Protocol::Icmp,
        ..Flow::tcp("node-2", CLIENT_ON_NODE_2, "10.96.0.10", 0)
    };
    assert!(icmp.untranslated(), "kube-proxy translates no ICMP");
}

#[test]
fn port_the_service_does_not_expose_is_not_translated() {
    assert!(Flow::tcp("node-1", CLIENT_ON_NODE_2, "10.96.0.10", 81).untranslated());
}

#[test]
fn service_without_endpoints_is_rejected() {
    let t = Flow::tcp("node-1", CLIENT_ON_NODE_2, "10.96.0.15", 80).translation();
    assert_eq!(t.service, "default/empty");
    assert!(t.backends.is_empty());
    assert!(
        t.why.starts_with(
            "ClusterIP 10.96.0.15:80/tcp of default/empty: no endpoint (EndpointSlice empty-h5v7n ("
        ),
        "{}",
        t.why
    );
    assert!(
        t.why
            .ends_with("so kube-proxy REJECTs it (ICMP port unreachable: connection refused)"),
        "{}",
        t.why
    );
}

#[test]
fn terminating_endpoint_still_serving_is_used_when_none_is_ready() {
    let t = Flow::tcp("node-2", CLIENT_ON_NODE_2, "10.96.0.17", 80).translation();
    assert_eq!(t.addresses(), ["10.244.1.6:8080"]);
    assert!(
        t.why.contains("serving while terminating: none is ready"),
        "{}",
        t.why
    );
}

#[test]
fn pod_namespace_has_no_kube_proxy_rules() {
    let flow = Flow::tcp("node-2", CLIENT_ON_NODE_2, "10.96.0.10", 80);
    let in_pod = flow.ask(NetnsId::Pod {
        node: "node-2".into(),
        namespace: "default".into(),
        name: "client-2".into(),
    });
    assert!(in_pod.is_unit());
}

#[test]
fn checks_name_the_service_and_what_kube_proxy_does() {
    let findings = packs().evaluate_snapshot(&snapshot());
    let ours: Vec<(String, String, String)> = findings
        .iter()
        .filter(|f| f.about.pack == "kube-proxy")
        .inspect(|f| assert_eq!(f.status, FindingStatus::Failed, "{f:#?}"))
        .map(|f| {
            (
                f.id.to_string(),
                f.about.subject.to_string(),
                f.message.clone(),
            )
        })
        .collect();
    let expected = [
        (
            "kube-proxy.service.target-port-name",
            "Service default/metrics",
            "Service default/metrics: port 80/TCP targets the container port named \"metrics\", which none of its 1 selected pod declares (metrics-0), so it has no endpoint",
        ),
        (
            "kube-proxy.service.external-traffic-local",
            "Service default/local",
            "Service default/local: port 80/TCP has externalTrafficPolicy Local and no ready endpoint on 1 of 2 nodes (node-2; endpoints on node-1), so kube-proxy drops its external traffic at that node",
        ),
        (
            "kube-proxy.service.internal-traffic-local",
            "Service default/itp",
            "Service default/itp: port 80/TCP has internalTrafficPolicy Local and no ready endpoint on 1 of 2 nodes (node-2; endpoints on node-1), so kube-proxy drops its internal traffic at that node",
        ),
    ];
    for (id, subject, message) in expected {
        assert!(
            ours.iter()
                .any(|(i, s, m)| i == id && s == subject && m == message),
            "{id} about {subject}: {ours:#?}"
        );
    }
    let fallback = ours
        .iter()
        .find(|(id, _, _)| id == "kube-proxy.service.endpoints-without-slices")
        .expect("reported");
    assert_eq!(fallback.1, "Service default/legacy");
    // Rejected outright: the two whose slices list no endpoint. The one
    // whose only endpoint is terminating but serving is used, not rejected.
    let mut unready: Vec<&str> = ours
        .iter()
        .filter(|(id, _, _)| id == "kube-proxy.service.no-ready-endpoints")
        .map(|(_, subject, _)| subject.as_str())
        .collect();
    unready.sort_unstable();
    assert_eq!(
        unready,
        ["Service default/empty", "Service default/metrics"]
    );
    assert_eq!(ours.len(), 6, "nothing else: {ours:#?}");
    assert!(
        findings
            .iter()
            .filter(|f| f.id.as_str().starts_with("kube-proxy."))
            .all(|f| matches!(&f.about.subject, Subject::Object { kind, .. } if kind == "Service"))
    );
}

#[test]
fn pod_reaching_itself_through_its_service_is_masqueraded_on_that_branch() {
    let t = Flow::tcp("node-1", "10.244.1.2", "10.96.0.10", 80).translation();
    assert_eq!(t.addresses(), ["10.244.1.2:8080", "10.244.2.2:8080"]);
    assert_eq!(
        t.masqueraded,
        [true, false],
        "only the branch back to itself"
    );
    assert!(
        t.why.ends_with(
            "; the client is one of the endpoints: on that branch it is masqueraded (hairpin)"
        ),
        "{}",
        t.why
    );
}
