//! Loading cluster directories and single files, as kubectl writes them and
//! as they break.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::load::load_file_text;
use super::*;
use crate::snapshot::input::Boundary;
use crate::snapshot::problem::Problem;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cluster")
        .join(name)
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The kubectl fixture, which must load without a single problem.
fn kubectl_cluster() -> Cluster {
    let dir = fixture("kubectl");
    let (cluster, problems) = load(&dir, &Boundary::new(&dir));
    assert!(problems.is_empty(), "{problems:#?}");
    cluster
}

/// Loads `text` as the file `name`, returning the problems as `line:col: message`.
fn load_one(name: &str, text: &str) -> (Cluster, Vec<String>) {
    let (cluster, problems) = load_file_text(Path::new(name), text);
    let problems = problems
        .iter()
        .map(|p| {
            assert_eq!(p.file, Path::new(name));
            let position = match (p.line, p.column) {
                (Some(line), Some(column)) => format!("{line}:{column}: "),
                (Some(line), None) => format!("{line}: "),
                _ => String::new(),
            };
            format!("{position}{}", p.message)
        })
        .collect();
    (cluster, problems)
}

fn one_policy(cluster: &Cluster) -> &NetworkPolicy {
    let mut policies = cluster.network_policies();
    let policy = policies.next().expect("a NetworkPolicy");
    assert!(policies.next().is_none());
    policy
}

#[test]
fn kubectl_snapshot_loads_every_object_of_every_layout() {
    let cluster = kubectl_cluster();
    assert_eq!(cluster.nodes().count(), 3);
    assert_eq!(cluster.pods().count(), 4);
    assert_eq!(cluster.services().count(), 3);
    assert_eq!(cluster.endpoint_slices().count(), 1);
    assert_eq!(cluster.endpoints().count(), 1);
    assert_eq!(cluster.config_maps().count(), 1);
    assert_eq!(cluster.daemon_sets().count(), 1);
    assert_eq!(cluster.network_policies().count(), 1);
    assert_eq!(cluster.namespaces().count(), 3);
    assert_eq!(cluster.others().count(), 2);
}

#[test]
fn node_from_a_yaml_list_has_cidrs_addresses_and_ready() {
    let cluster = kubectl_cluster();
    let worker = cluster.node("worker-1").unwrap();
    assert_eq!(
        worker.pod_cidrs,
        vec![
            "10.244.1.0/24".parse().unwrap(),
            "fd00:10:244:1::/64".parse().unwrap()
        ]
    );
    assert_eq!(
        worker.addresses,
        vec![
            NodeAddress::InternalIp(ip("192.168.56.11")),
            NodeAddress::ExternalIp(ip("203.0.113.11")),
            NodeAddress::Hostname("worker-1".into()),
        ]
    );
    assert_eq!(worker.ready, Some(true));
    assert_eq!(
        worker.meta.annotations["flannel.alpha.coreos.com/backend-type"],
        "vxlan"
    );
    assert!(worker.meta.source.file.ends_with("kubectl/nodes.yaml"));
    assert_eq!(
        worker.meta.source.line, 161,
        "the `- apiVersion` of its item"
    );
    assert_eq!(cluster.node("cp-1").unwrap().ready, Some(true));
    // `status: Unknown`: the kubelet stopped reporting.
    assert_eq!(cluster.node("worker-2").unwrap().ready, None);
}

#[test]
fn pod_from_a_json_list_keeps_every_pod_ip_and_container_state() {
    let cluster = kubectl_cluster();
    let web = cluster.pod("default", "web-5d4f8c7b9-x2x9k").unwrap();
    assert_eq!(web.ips, vec![ip("10.244.1.5"), ip("fd00:10:244:1::5")]);
    assert_eq!(web.host_ip, Some(ip("192.168.56.11")));
    assert_eq!(web.node_name.as_deref(), Some("worker-1"));
    assert!(!web.host_network);
    assert_eq!(web.phase, Some(PodPhase::Running));
    assert_eq!((web.ready, web.containers_ready), (Some(true), Some(true)));
    assert_eq!(
        web.containers,
        vec![Container {
            name: "web".into(),
            ready: Some(true),
            ports: vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                host_port: None,
                protocol: Protocol::Tcp,
            }],
        }]
    );
    assert!(web.meta.source.file.ends_with("kubectl/pods.json"));
    assert_eq!(web.meta.source.line, 4);

    let db = cluster.pod("default", "db-0").unwrap();
    assert_eq!((db.ready, db.containers_ready), (Some(false), Some(true)));
    let ready: Vec<_> = db
        .containers
        .iter()
        .map(|c| (c.name.as_str(), c.ready))
        .collect();
    // The exporter has no containerStatus: unknown, not "not ready".
    assert_eq!(ready, vec![("postgres", Some(true)), ("exporter", None)]);

    let flannel = cluster
        .pod("kube-flannel", "kube-flannel-ds-7xk2p")
        .unwrap();
    assert!(flannel.host_network);
    assert_eq!(flannel.ips, vec![ip("192.168.56.11")]);
}

#[test]
fn services_keep_addresses_ports_and_policies() {
    let cluster = kubectl_cluster();
    let web = cluster.service("default", "web").unwrap();
    assert_eq!(web.service_type, ServiceType::NodePort);
    assert_eq!(web.cluster_ips, vec![ip("10.96.12.34")]);
    assert!(!web.headless);
    assert_eq!(web.external_ips, vec![ip("192.168.56.200")]);
    assert_eq!(
        web.ports,
        vec![ServicePort {
            name: Some("http".into()),
            protocol: Protocol::Tcp,
            port: 80,
            target_port: PortRef::Name("http".into()),
            node_port: Some(30080),
        }]
    );
    assert_eq!(
        web.selector,
        Some(LabelSelector::from_labels(labels(&[("app", "web")])))
    );
    assert_eq!(web.external_traffic_policy, Some(TrafficPolicy::Cluster));
    assert_eq!(web.internal_traffic_policy, Some(TrafficPolicy::Cluster));
    assert_eq!(web.session_affinity, SessionAffinity::None);

    let db = cluster.service("default", "db").unwrap();
    assert!(db.headless);
    assert!(db.cluster_ips.is_empty());
    assert_eq!(db.ports[0].target_port, PortRef::Number(5432));

    let lb = cluster.service("default", "web-lb").unwrap();
    assert_eq!(lb.service_type, ServiceType::LoadBalancer);
    assert_eq!(lb.load_balancer_ips, vec![ip("192.168.56.240")]);
    assert_eq!(lb.external_traffic_policy, Some(TrafficPolicy::Local));
    assert_eq!(lb.session_affinity, SessionAffinity::ClientIp);
    assert_eq!(lb.ports[1].protocol, Protocol::Udp);
    assert_eq!(lb.ports[1].target_port, PortRef::Number(5353));
}

#[test]
fn endpoint_slice_belongs_to_its_service_and_keeps_conditions() {
    let cluster = kubectl_cluster();
    let web = cluster.service("default", "web").unwrap();
    let slices: Vec<_> = cluster.endpoint_slices_for(web).collect();
    assert_eq!(slices.len(), 1);
    let slice = slices[0];
    assert_eq!(slice.service_name.as_deref(), Some("web"));
    assert_eq!(slice.address_type, AddressType::Ipv4);
    assert_eq!(
        slice.ports,
        vec![EndpointPort {
            name: Some("http".into()),
            protocol: Protocol::Tcp,
            port: Some(8080),
        }]
    );
    let ready = &slice.endpoints[0];
    assert_eq!(ready.addresses, vec![ip("10.244.1.5")]);
    assert_eq!(ready.node_name.as_deref(), Some("worker-1"));
    assert_eq!(
        ready.target_ref.as_ref().and_then(|r| r.name.as_deref()),
        Some("web-5d4f8c7b9-x2x9k")
    );
    assert!(ready.conditions.is_ready());
    let leaving = &slice.endpoints[1].conditions;
    assert!(!leaving.is_ready() && leaving.is_serving() && leaving.is_terminating());

    let db = cluster.service("default", "db").unwrap();
    assert_eq!(cluster.endpoint_slices_for(db).count(), 0);
}

#[test]
fn endpoints_keep_ready_and_not_ready_addresses() {
    let cluster = kubectl_cluster();
    let web = cluster.service("default", "web").unwrap();
    let endpoints = cluster.endpoints_for(web).unwrap();
    let subset = &endpoints.subsets[0];
    assert_eq!(subset.addresses[0].ip, ip("10.244.1.5"));
    assert_eq!(subset.not_ready_addresses[0].ip, ip("10.244.2.17"));
    assert_eq!(
        subset.not_ready_addresses[0].node_name.as_deref(),
        Some("worker-2")
    );
    assert_eq!(subset.ports[0].port, Some(8080));
}

#[test]
fn network_policy_from_kubectl_keeps_every_peer_and_port() {
    let cluster = kubectl_cluster();
    let policy = cluster.network_policies_in("default").next().unwrap();
    assert_eq!(policy.meta.name, "db-ingress");
    assert_eq!(
        policy.pod_selector,
        LabelSelector::from_labels(labels(&[("app", "db")]))
    );
    assert_eq!(
        policy.policy_types,
        PolicyTypes {
            ingress: true,
            egress: false
        }
    );
    let rule = &policy.ingress[0];
    assert_eq!(
        rule.peers[0],
        NetworkPolicyPeer::Pods(LabelSelector::from_labels(labels(&[("app", "web")])))
    );
    let NetworkPolicyPeer::PodsInNamespaces { pods, namespaces } = &rule.peers[1] else {
        panic!("{:?}", rule.peers[1]);
    };
    assert!(pods.matches(&labels(&[("app", "prometheus")])));
    assert!(namespaces.matches(&labels(&[("kubernetes.io/metadata.name", "monitoring")])));
    assert_eq!(
        rule.peers[2],
        NetworkPolicyPeer::IpBlock {
            cidr: "10.0.0.0/8".parse().unwrap(),
            except: vec!["10.96.0.0/12".parse().unwrap()],
        }
    );
    assert_eq!(
        rule.ports,
        vec![
            NetworkPolicyPort::Port {
                protocol: Protocol::Tcp,
                port: Some(PortRef::Name("pg".into())),
                end_port: None,
            },
            NetworkPolicyPort::Port {
                protocol: Protocol::Tcp,
                port: Some(PortRef::Number(9187)),
                end_port: Some(9199),
            },
        ]
    );
    assert!(policy.egress.is_empty());
}

#[test]
fn daemon_set_and_config_map_are_what_packs_detect_a_cni_by() {
    let cluster = kubectl_cluster();
    let ds = cluster
        .daemon_set("kube-flannel", "kube-flannel-ds")
        .unwrap();
    let images: Vec<_> = ds.containers.iter().map(|c| c.image.as_deref()).collect();
    assert_eq!(images, vec![Some("docker.io/flannel/flannel:v0.25.1")]);
    let init: Vec<_> = ds.init_containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(init, vec!["install-cni-plugin", "install-cni"]);
    let selector = ds.selector.as_ref().unwrap();
    assert!(selector.matches(&labels(&[
        ("app", "flannel"),
        ("k8s-app", "flannel"),
        ("tier", "node")
    ])));

    let config = cluster
        .config_map("kube-flannel", "kube-flannel-cfg")
        .unwrap();
    assert!(config.data["net-conf.json"].contains(r#""Type": "vxlan""#));
}

#[test]
fn typed_list_items_without_kind_take_it_from_the_list() {
    // `kubectl get --raw /api/v1/namespaces` writes a NamespaceList whose
    // items carry neither apiVersion nor kind.
    let cluster = kubectl_cluster();
    let names: Vec<_> = cluster.namespaces().map(|n| n.meta.name.as_str()).collect();
    assert_eq!(names, vec!["default", "kube-flannel", "monitoring"]);
    let monitoring = cluster.namespace("monitoring").unwrap();
    assert_eq!(monitoring.meta.labels["team"], "ops");
    assert_eq!(monitoring.meta.namespace, "");
}

#[test]
fn calico_ip_pools_of_both_api_groups_are_distinct_generic_objects() {
    let cluster = kubectl_cluster();
    let crd: Vec<_> = cluster
        .objects("crd.projectcalico.org/v1", "IPPool")
        .collect();
    let v3: Vec<_> = cluster.objects("projectcalico.org/v3", "IPPool").collect();
    assert_eq!((crd.len(), v3.len()), (1, 1));
    for pool in [crd[0], v3[0]] {
        assert_eq!(pool.meta.name, "default-ipv4-ippool");
        assert_eq!(pool.value["spec"]["cidr"], "10.244.0.0/16");
        assert_eq!(pool.value["spec"]["blockSize"], 26);
        assert_eq!(pool.value["spec"]["ipipMode"], "Always");
    }
    assert_eq!(crd[0].meta.source.line, 3);
    assert_eq!(v3[0].meta.source.line, 27);
    assert_eq!(
        cluster.objects("projectcalico.org/v3", "BGPPeer").count(),
        0
    );
}

#[test]
fn ip_index_names_every_owner() {
    let cluster = kubectl_cluster();
    let pod = |namespace: &str, name: &str, host_network| IpOwner::Pod {
        namespace: namespace.into(),
        name: name.into(),
        host_network,
    };
    let web = || ("default".to_string(), "web".to_string());
    // A finished pod keeps the IP a running pod now uses: both are owners.
    assert_eq!(
        cluster.by_ip(ip("10.244.1.5")),
        [
            pod("default", "web-5d4f8c7b9-x2x9k", false),
            pod("default", "migrate-7tq4d", false)
        ]
    );
    assert_eq!(
        cluster.by_ip(ip("fd00:10:244:1::5")),
        [pod("default", "web-5d4f8c7b9-x2x9k", false)]
    );
    assert_eq!(
        cluster.by_ip(ip("192.168.56.11")),
        [
            IpOwner::Node {
                name: "worker-1".into()
            },
            pod("kube-flannel", "kube-flannel-ds-7xk2p", true)
        ]
    );
    assert_eq!(
        cluster.by_ip(ip("203.0.113.11")),
        [IpOwner::Node {
            name: "worker-1".into()
        }]
    );
    let (namespace, name) = web();
    assert_eq!(
        cluster.by_ip(ip("10.96.12.34")),
        [IpOwner::ServiceClusterIp { namespace, name }]
    );
    let (namespace, name) = web();
    assert_eq!(
        cluster.by_ip(ip("192.168.56.200")),
        [IpOwner::ServiceExternalIp { namespace, name }]
    );
    assert_eq!(
        cluster.by_ip(ip("192.168.56.240")),
        [IpOwner::ServiceLoadBalancerIp {
            namespace: "default".into(),
            name: "web-lb".into()
        }]
    );
    assert!(cluster.by_ip(ip("10.244.9.9")).is_empty());
}

#[test]
fn pod_at_prefers_the_running_pod_over_a_finished_one_reusing_its_ip() {
    let text = "
apiVersion: v1
kind: Pod
metadata: {name: job-1, namespace: default}
spec: {containers: [{name: c}]}
status: {phase: Succeeded, podIP: 10.244.1.7}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec: {containers: [{name: c}]}
status: {phase: Running, podIP: 10.244.1.7}
---
apiVersion: v1
kind: Pod
metadata: {name: agent, namespace: kube-system}
spec: {hostNetwork: true, containers: [{name: c}]}
status: {phase: Running, podIP: 192.168.56.11}
";
    let (cluster, problems) = load_one("pods.yaml", text);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(cluster.by_ip(ip("10.244.1.7")).len(), 2);
    let pod = cluster
        .pod_at(ip("10.244.1.7"))
        .expect("a pod at 10.244.1.7");
    assert_eq!(pod.meta.name, "web");
    // A pod on the host network has its node's address, not one of its own.
    assert!(cluster.pod_at(ip("192.168.56.11")).is_none());
}

#[test]
fn node_ports_find_their_service_by_protocol() {
    let cluster = kubectl_cluster();
    let name = |s: Option<&Service>| s.map(|s| s.meta.name.clone());
    assert_eq!(
        name(cluster.service_by_node_port(Protocol::Tcp, 30080)),
        Some("web".into())
    );
    assert_eq!(
        name(cluster.service_by_node_port(Protocol::Udp, 31053)),
        Some("web-lb".into())
    );
    assert_eq!(
        name(cluster.service_by_node_port(Protocol::Tcp, 31053)),
        None
    );
    assert_eq!(
        name(cluster.service_by_node_port(Protocol::Tcp, 32154)),
        None,
        "a health check port is no NodePort"
    );
}

#[test]
fn pods_matching_looks_only_in_the_namespace() {
    let cluster = kubectl_cluster();
    let web = LabelSelector::from_labels(labels(&[("app", "web")]));
    let names = |ns: &str, selector: &LabelSelector| -> Vec<String> {
        cluster
            .pods_matching(ns, selector)
            .map(|p| p.meta.name.clone())
            .collect()
    };
    assert_eq!(names("default", &web), vec!["web-5d4f8c7b9-x2x9k"]);
    assert!(names("kube-flannel", &web).is_empty());
    assert_eq!(names("default", &LabelSelector::default()).len(), 3);
}

#[test]
fn broken_files_cost_only_what_is_broken() {
    let dir = fixture("broken");
    let (cluster, problems) = load(&dir, &Boundary::new(&dir));
    let problems: Vec<String> = problems
        .iter()
        .map(|p| {
            let relative = p.file.strip_prefix(&dir).unwrap().display().to_string();
            Problem {
                file: relative.into(),
                ..p.clone()
            }
            .to_string()
        })
        .collect();
    assert_eq!(
        problems,
        vec![
            "README.txt: not a YAML or JSON file (expected .yaml, .yml or .json); ignored",
            r#"bad-ips.yaml:15:9: Pod default/odd: status.podIPs[0].ip: "10.244.1.300" is not an IP address; ignored"#,
            r#"bad-ips.yaml:22:12: Node worker-9: spec.podCIDR: "10.244.3.0/33" is not a CIDR; ignored"#,
            // Cited from the directory holding the one loaded.
            "duplicate.yaml:10:3: ConfigMap default/settings is defined twice (first at broken/duplicate.yaml:3); this one is ignored",
            "empty.yaml: no Kubernetes object in this file",
            "latin1.yaml:4:16: not valid UTF-8",
            "no-kind.yaml:1:1: no apiVersion and no kind: not a Kubernetes object; skipped",
            "pods-table.yaml:1:1: expected a Kubernetes object (a mapping with apiVersion and kind), found a string",
            "truncated.json:12:21: EOF while parsing a string",
            "truncated.yaml:10:22: unclosed quote",
            r#"wrong-types.yaml:11:22: Pod default/web-0: spec.containers[0].ports[0].containerPort: invalid type: string "abc", expected i32; object skipped"#,
        ]
    );
    // The dotfile is never read; what was sound still loaded.
    let config_maps: Vec<_> = cluster
        .config_maps()
        .map(|c| c.meta.name.as_str())
        .collect();
    assert_eq!(config_maps, vec!["after-the-bad-pod", "kept", "settings"]);
    assert_eq!(
        cluster.config_map("default", "settings").unwrap().data["a"],
        "1"
    );
    let odd = cluster.pod("default", "odd").unwrap();
    assert!(odd.ips.is_empty());
    assert_eq!(odd.host_ip, Some(ip("192.168.56.11")));
    let node = cluster.node("worker-9").unwrap();
    assert!(node.pod_cidrs.is_empty());
    assert_eq!(
        node.addresses,
        vec![NodeAddress::InternalIp(ip("192.168.56.19"))]
    );
    let widgets: Vec<_> = cluster.objects("example.com/v1", "Widget").collect();
    assert_eq!(widgets[0].value["spec"]["size"], 3);
    assert!(cluster.pod("default", "web-0").is_none());
}

const POLICY_HEAD: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: p
  namespace: default
";

#[test]
fn network_policy_without_policy_types_isolates_ingress_only() {
    let text = format!("{POLICY_HEAD}spec:\n  podSelector: {{}}\n  ingress:\n  - {{}}\n");
    let (cluster, problems) = load_one("p.yaml", &text);
    assert!(problems.is_empty(), "{problems:?}");
    let policy = one_policy(&cluster);
    assert_eq!(
        policy.policy_types,
        PolicyTypes {
            ingress: true,
            egress: false
        }
    );
    assert!(policy.pod_selector.is_empty());
    // `- {}`: one rule that matches every peer and port.
    assert_eq!(
        policy.ingress,
        vec![NetworkPolicyRule {
            peers: vec![],
            ports: vec![]
        }]
    );
}

#[test]
fn network_policy_with_egress_rules_defaults_to_both_types() {
    let text = format!(
        "{POLICY_HEAD}spec:\n  podSelector: {{}}\n  egress:\n  - to:\n    - ipBlock:\n        cidr: 0.0.0.0/0\n"
    );
    let (cluster, _) = load_one("p.yaml", &text);
    let types = one_policy(&cluster).policy_types;
    assert_eq!((types.ingress, types.egress), (true, true));

    // An empty egress list is no egress rule: Ingress only.
    let text = format!("{POLICY_HEAD}spec:\n  podSelector: {{}}\n  egress: []\n");
    let (cluster, _) = load_one("p.yaml", &text);
    let types = one_policy(&cluster).policy_types;
    assert_eq!((types.ingress, types.egress), (true, false));

    // Written policyTypes are taken as they are.
    let text = format!("{POLICY_HEAD}spec:\n  podSelector: {{}}\n  policyTypes:\n  - Egress\n");
    let (cluster, _) = load_one("p.yaml", &text);
    let types = one_policy(&cluster).policy_types;
    assert_eq!((types.ingress, types.egress), (false, true));
}

#[test]
fn network_policy_peer_absent_and_empty_selectors_differ() {
    let text = format!(
        "{POLICY_HEAD}spec:
  podSelector:
    matchLabels:
      app: db
  ingress:
  - from:
    - podSelector: {{}}
    - namespaceSelector: {{}}
    - namespaceSelector: {{}}
      podSelector: {{}}
"
    );
    let (cluster, problems) = load_one("p.yaml", &text);
    assert!(problems.is_empty(), "{problems:?}");
    let empty = LabelSelector::default;
    assert_eq!(
        one_policy(&cluster).ingress[0].peers,
        vec![
            // Every pod of the policy's namespace.
            NetworkPolicyPeer::Pods(empty()),
            // Every pod of every namespace.
            NetworkPolicyPeer::Namespaces(empty()),
            NetworkPolicyPeer::PodsInNamespaces {
                pods: empty(),
                namespaces: empty()
            },
        ]
    );
}

#[test]
fn network_policy_keeps_unreadable_peers_and_ports_as_invalid() {
    let text = format!(
        "{POLICY_HEAD}spec:
  podSelector: {{}}
  ingress:
  - from:
    - ipBlock:
        cidr: 10.0.0.0/8
      podSelector: {{}}
    - ipBlock:
        cidr: 10.0.0.0/8
        except:
        - 10.1.0.0/xx
    - {{}}
    ports:
    - port: http
      endPort: 90
    - protocol: ICMP
"
    );
    let (cluster, problems) = load_one("p.yaml", &text);
    let rule = &one_policy(&cluster).ingress[0];
    let invalid = |reason: &str| NetworkPolicyPeer::Invalid {
        reason: reason.into(),
    };
    assert_eq!(
        rule.peers,
        vec![
            invalid("ipBlock cannot be combined with podSelector or namespaceSelector"),
            invalid(r#""10.1.0.0/xx" is not a CIDR"#),
            invalid("a peer needs podSelector, namespaceSelector or ipBlock"),
        ]
    );
    assert_eq!(
        rule.ports,
        vec![
            NetworkPolicyPort::Invalid {
                reason: "endPort needs a numeric port".into()
            },
            NetworkPolicyPort::Invalid {
                reason: r#""ICMP" is not one of TCP, UDP, SCTP"#.into()
            },
        ]
    );
    assert_eq!(
        problems,
        vec![
            "11:9: NetworkPolicy default/p: spec.ingress[0].from[0].ipBlock: ipBlock cannot be combined with podSelector or namespaceSelector; this peer is unknown to evaluation",
            r#"16:11: NetworkPolicy default/p: spec.ingress[0].from[1].ipBlock.except[0]: "10.1.0.0/xx" is not a CIDR; this peer is unknown to evaluation"#,
            "17:7: NetworkPolicy default/p: spec.ingress[0].from[2]: a peer needs podSelector, namespaceSelector or ipBlock; this peer is unknown to evaluation",
            "20:16: NetworkPolicy default/p: spec.ingress[0].ports[0].endPort: endPort needs a numeric port; this port is unknown to evaluation",
            r#"21:17: NetworkPolicy default/p: spec.ingress[0].ports[1].protocol: "ICMP" is not one of TCP, UDP, SCTP; this port is unknown to evaluation"#,
        ]
    );
}

#[test]
fn network_policy_with_unreadable_pod_selector_is_kept_as_unreadable() {
    let text = format!(
        "{POLICY_HEAD}spec:\n  podSelector:\n    matchExpressions:\n    - key: app\n      operator: Gt\n      values: [\"1\"]\n"
    );
    let (cluster, problems) = load_one("p.yaml", &text);
    assert_eq!(cluster.network_policies().count(), 0);
    let unreadable: Vec<_> = cluster.unreadable_network_policies_in("default").collect();
    assert_eq!(unreadable.len(), 1);
    assert_eq!(unreadable[0].meta.name, "p");
    assert_eq!(
        unreadable[0].reason,
        r#"spec.podSelector.matchExpressions[0].operator: "Gt" is not one of In, NotIn, Exists, DoesNotExist"#
    );
    assert_eq!(
        problems,
        vec![
            r#"10:17: NetworkPolicy default/p: spec.podSelector.matchExpressions[0].operator: "Gt" is not one of In, NotIn, Exists, DoesNotExist; policy unreadable: verdicts in its namespace are unknown"#
        ]
    );
}

#[test]
fn service_written_as_a_manifest_gets_the_api_defaults() {
    let text = "apiVersion: v1
kind: Service
metadata:
  name: plain
  namespace: default
spec:
  clusterIP: 10.96.0.20
  ports:
  - port: 53
";
    let (cluster, problems) = load_one("svc.yaml", text);
    assert!(problems.is_empty(), "{problems:?}");
    let service = cluster.service("default", "plain").unwrap();
    assert_eq!(service.service_type, ServiceType::ClusterIp);
    assert_eq!(service.cluster_ips, vec![ip("10.96.0.20")]);
    assert_eq!(service.session_affinity, SessionAffinity::None);
    assert_eq!(service.selector, None, "no selector: nothing is selected");
    assert_eq!(
        service.ports,
        vec![ServicePort {
            name: None,
            protocol: Protocol::Tcp,
            port: 53,
            target_port: PortRef::Number(53),
            node_port: None,
        }]
    );
}

#[test]
fn endpoint_conditions_absent_default_as_the_api_says() {
    let text = "addressType: IPv6
apiVersion: discovery.k8s.io/v1
endpoints:
- addresses:
  - fd00:10:244:1::7
  - 10.244.1.7
kind: EndpointSlice
metadata:
  labels:
    kubernetes.io/service-name: web
  name: web-v6
  namespace: default
ports:
- port: 8080
";
    let (cluster, problems) = load_one("slice.yaml", text);
    assert_eq!(
        problems,
        vec![
            "6:5: EndpointSlice default/web-v6: endpoints[0].addresses[1]: 10.244.1.7 is not an address of this IPv6 slice; ignored"
        ]
    );
    let slice = cluster.endpoint_slices().next().unwrap();
    let endpoint = &slice.endpoints[0];
    assert_eq!(endpoint.addresses, vec![ip("fd00:10:244:1::7")]);
    assert_eq!(endpoint.conditions, EndpointConditions::default());
    assert!(endpoint.conditions.is_ready());
    assert!(endpoint.conditions.is_serving());
    assert!(!endpoint.conditions.is_terminating());
    assert_eq!(slice.ports[0].protocol, Protocol::Tcp);
}

#[test]
fn items_of_a_plain_list_need_their_own_kind() {
    let text = "apiVersion: v1
items:
- metadata:
    name: a
kind: List
";
    let (cluster, problems) = load_one("list.yaml", text);
    assert_eq!(cluster.others().count(), 0);
    assert_eq!(
        problems,
        vec!["3:3: no apiVersion and no kind: not a Kubernetes object; skipped"]
    );
}

#[test]
fn pod_list_items_inherit_kind_and_api_version() {
    let text = r#"{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[
  {"metadata":{"name":"a","namespace":"default"},"status":{"podIP":"10.244.0.4"}}
]}"#;
    let (cluster, problems) = load_one("pods.json", text);
    assert!(problems.is_empty(), "{problems:?}");
    let pod = cluster.pod("default", "a").unwrap();
    assert_eq!(pod.ips, vec![ip("10.244.0.4")]);
    assert_eq!(pod.meta.source.line, 2);
}

#[test]
fn typed_kind_in_another_version_is_kept_generic_and_reported() {
    let text = "addressType: IPv4
apiVersion: discovery.k8s.io/v1beta1
kind: EndpointSlice
metadata:
  name: old
  namespace: default
";
    let (cluster, problems) = load_one("old.yaml", text);
    assert_eq!(cluster.endpoint_slices().count(), 0);
    assert_eq!(
        cluster
            .objects("discovery.k8s.io/v1beta1", "EndpointSlice")
            .count(),
        1
    );
    assert_eq!(
        problems,
        vec![
            "2:13: EndpointSlice default/old: apiVersion: skoop reads EndpointSlice only in discovery.k8s.io/v1; kept as a generic object"
        ]
    );
}

#[test]
fn namespaced_object_without_namespace_is_skipped() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n";
    let (cluster, problems) = load_one("cm.yaml", text);
    assert_eq!(cluster.config_maps().count(), 0);
    assert_eq!(
        problems,
        vec![
            "4:3: ConfigMap c: metadata.namespace: namespaced object has no namespace (kubectl always writes it); object skipped"
        ]
    );
}

#[test]
fn node_port_claimed_twice_stays_with_the_first_service() {
    let service = |name: &str| {
        format!(
            "apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: default
spec:
  ports:
  - nodePort: 30080
    port: 80
  type: NodePort
"
        )
    };
    let text = format!("{}---\n{}", service("first"), service("second"));
    let (cluster, problems) = load_one("svc.yaml", &text);
    assert_eq!(cluster.services().count(), 2);
    assert_eq!(
        cluster
            .service_by_node_port(Protocol::Tcp, 30080)
            .map(|s| s.meta.name.as_str()),
        Some("first")
    );
    assert_eq!(
        problems,
        vec![
            "12:1: NodePort 30080/TCP of Service default/second is already used by Service default/first (svc.yaml:1)"
        ]
    );
}

#[test]
fn wrong_field_types_are_reported_in_json_too() {
    let text = r#"{
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "n"
    },
    "status": {
        "addresses": "192.168.0.1"
    }
}"#;
    let (cluster, problems) = load_one("node.json", text);
    assert_eq!(cluster.nodes().count(), 0);
    assert_eq!(
        problems,
        vec![
            r#"8:22: Node n: status.addresses: invalid type: string "192.168.0.1", expected a sequence; object skipped"#
        ]
    );
}

#[test]
fn scalar_and_sequence_documents_are_not_objects() {
    let (_, problems) = load_one("x.yaml", "42\n---\n- a\n- b\n");
    assert_eq!(
        problems,
        vec![
            "1:1: expected a Kubernetes object (a mapping with apiVersion and kind), found a number",
            "3:1: expected a Kubernetes object (a mapping with apiVersion and kind), found a list",
        ]
    );
}

#[test]
fn requirement_values_are_a_set() {
    let text = format!(
        "{POLICY_HEAD}spec:\n  podSelector:\n    matchExpressions:\n    - key: tier\n      operator: NotIn\n      values: [a, b, a]\n"
    );
    let (cluster, problems) = load_one("p.yaml", &text);
    assert!(problems.is_empty(), "{problems:?}");
    let requirement = &one_policy(&cluster).pod_selector.match_expressions[0];
    let expected: BTreeSet<String> = ["a".to_string(), "b".to_string()].into();
    assert_eq!(requirement.values, expected);
}

/// Every fixture file, as (name to load it as, text).
fn fixture_texts() -> Vec<(String, String)> {
    let mut texts = Vec::new();
    for dir in ["kubectl", "broken"] {
        let mut stack = vec![fixture(dir)];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name.ends_with(".yaml") || name.ends_with(".json") {
                    texts.push((name, text));
                }
            }
        }
    }
    texts.sort();
    texts
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// Cut anywhere and with one character changed, a kubectl file loads
    /// what it can and reports the rest at real positions; it never panics.
    #[test]
    fn damaged_kubectl_files_never_panic(
        which in proptest::prelude::any::<proptest::sample::Index>(),
        cut in 0.0..=1.0f64,
        change in proptest::option::of((0.0..1.0f64, proptest::sample::select(b"{}[]:,-\"' \n#&*!|>0aZ".to_vec()))),
    ) {
        let texts = fixture_texts();
        let (name, text) = which.get(&texts);
        let mut bytes = text.as_bytes().to_vec();
        bytes.truncate((bytes.len() as f64 * cut) as usize);
        if let Some((at, byte)) = change {
            let at = (bytes.len() as f64 * at) as usize;
            if let Some(b) = bytes.get_mut(at) {
                *b = byte;
            }
        }
        let text = String::from_utf8(bytes).unwrap();
        let (_, problems) = load_file_text(Path::new(name), &text);
        let lines = text.lines().count().max(1);
        for problem in problems {
            if let Some(line) = problem.line {
                proptest::prop_assert!((1..=lines + 1).contains(&line), "{problem}");
            }
            proptest::prop_assert!(problem.column.is_none_or(|c| c >= 1), "{problem}");
        }
    }
}

/// Every JSON file of the fixtures and examples, and a List large enough to
/// be read on several threads, read directly into the typed kinds, give
/// what the positioned path gives, problems included.
#[test]
fn json_read_directly_equals_json_read_through_the_positioned_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut dirs = vec![root.join("tests/fixtures/cluster"), root.join("examples")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "json")
                && path.components().any(|c| c.as_os_str() == "cluster")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path, text));
            }
        }
    }
    let mut pods = String::from(r#"{"apiVersion": "v1", "kind": "PodList", "items": ["#);
    for i in 0..1500 {
        let comma = if i == 0 { "" } else { "," };
        pods.push_str(&format!(
            "{comma}\n  {{\"metadata\": {{\"name\": \"p{i}\", \"namespace\": \"ns-{}\", \"labels\": {{\"app\": \"a{}\"}}}}, \"spec\": {{\"nodeName\": \"n{}\", \"containers\": [{{\"name\": \"c\", \"ports\": [{{\"containerPort\": 8080}}]}}]}}, \"status\": {{\"phase\": \"Running\", \"podIP\": \"10.{}.{}.{}\"}}}}",
            i % 7, i % 13, i % 50, i / 65536, i / 256 % 256, i % 256
        ));
    }
    pods.push_str("\n]}\n");
    files.push((PathBuf::from("pods.json"), pods));
    assert!(files.len() > 10, "{} JSON files", files.len());
    for (path, text) in &files {
        let direct = load_file_text(path, text);
        let positioned = load_file_text_as(path, text, Reading::Positioned);
        assert_eq!(
            format!("{direct:?}"),
            format!("{positioned:?}"),
            "{}",
            path.display()
        );
    }
}

#[test]
fn a_duplicate_key_deep_in_a_json_list_is_reported_where_it_is() {
    let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b", "labels": {"x": "1", "x": "2"}}}
]}"#;
    let (cluster, problems) = load_one("list.json", text);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("3:"), "{problems:?}");
    assert!(problems[0].contains("duplicate key `x`"), "{problems:?}");
    assert_eq!(cluster.namespaces().count(), 0);
}

/// Objects of the lean kinds are read in one pass: apiVersion and kind
/// first, then the fields skoop reads, every key checked on the way. A
/// duplicate key in a field skoop does not read is still a problem, and an
/// object whose kind comes after its other fields is read all the same.
#[test]
fn one_pass_reading_refuses_duplicate_keys_anywhere_and_takes_any_key_order() {
    let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "d"}, "spec": {"volumes": [{"name": "v", "name": "w"}]}},
  {"metadata": {"name": "b", "namespace": "d"}, "status": {"podIP": "10.0.0.2"}, "kind": "Pod", "apiVersion": "v1"},
  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"}, "spec": {"clusterIP": "10.96.0.9", "ports": [{"port": 80, "targetPort": "http"}]}}
]}"#;
    // In a PodList, an item's own kind counts, wherever it is written.
    let typed_list = r#"{"apiVersion": "v1", "kind": "PodList", "items": [
  {"metadata": {"name": "p", "namespace": "d"}},
  {"metadata": {"name": "c", "namespace": "d"}, "kind": "ConfigMap", "data": {"k": "v"}}
]}"#;
    let (cluster, problems) = load_one("typed.json", typed_list);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(cluster.pod("d", "p").is_some());
    assert!(cluster.pod("d", "c").is_none());
    assert_eq!(cluster.config_map("d", "c").unwrap().data["k"], "v");
    let positioned = load_file_text_as(Path::new("typed.json"), typed_list, Reading::Positioned);
    assert_eq!(
        format!("{:?}", load_file_text(Path::new("typed.json"), typed_list)),
        format!("{positioned:?}")
    );
    let (cluster, problems) = load_one("list.json", text);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("2:"), "{problems:?}");
    assert!(problems[0].contains("duplicate key `name`"), "{problems:?}");
    // The positioned path, which reports it, reads no object of a document
    // with a duplicate key.
    assert_eq!(cluster.pods().count(), 0);
    // Without it the direct path takes the file, and gives what the
    // positioned path gives.
    let good = text.replace(r#""name": "v", "name": "w""#, r#""name": "v""#);
    let (cluster, problems) = load_one("list.json", &good);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(cluster.pod("d", "a").is_some());
    let b = cluster
        .pod("d", "b")
        .expect("the pod whose kind comes last");
    assert_eq!(b.ips, vec!["10.0.0.2".parse::<IpAddr>().unwrap()]);
    let s = cluster.service("d", "s").expect("the service");
    assert_eq!(s.ports[0].target_port, PortRef::Name("http".into()));
    let path = Path::new("list.json");
    let direct = load_file_text(path, &good);
    assert!(direct.1.is_empty(), "{:?}", direct.1);
    assert_eq!(direct.0.pods().count(), 2);
    let positioned = load_file_text_as(path, &good, Reading::Positioned);
    assert_eq!(format!("{direct:?}"), format!("{positioned:?}"));
}
