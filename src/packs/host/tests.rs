//! The host API's tests: every example docs/packs.md gives, run, and what
//! each room hands scripts.

use rhai::{Array, EvalAltResult};

use super::addresses::nth_host;
use super::*;
use crate::packs::scope::ClusterRef;
use crate::snapshot::NetnsId;
use crate::snapshot::netns::DumpFile;

/// The code cells of the rows of the docs/packs.md table after
/// `marker` (backquotes removed), each row's first cell left out.
pub(super) fn documented_rows(marker: &str) -> Vec<Vec<String>> {
    let docs = include_str!("../../../docs/packs.md");
    let table = docs
        .split(marker)
        .nth(1)
        .and_then(|rest| rest.trim_start().split("\n\n").next())
        .unwrap_or_else(|| panic!("docs/packs.md has a table after {marker}"));
    // Rows after the header and its separator.
    table
        .lines()
        .skip(2)
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .skip(1)
                .map(|cell| cell.trim().trim_matches('`').to_owned())
                .collect()
        })
        .collect()
}

/// A result as the docs write it: a string quoted, anything else as the
/// script's `to_string` shows it.
pub(super) fn shown(value: &Dynamic) -> String {
    if value.is_string() {
        format!("{:?}", value.clone().into_string().unwrap_or_default())
    } else {
        display(value)
    }
}

/// Every example of the host API table of docs/packs.md, run: a row
/// `| function | `EXPR` | `RESULT` |` must evaluate to RESULT.
#[test]
fn every_documented_example_evaluates_to_its_documented_result() {
    let engine = super::super::sandbox::engine();
    let rows = documented_rows("<!-- host-api-examples -->");
    for row in &rows {
        let [expression, expected] = row.as_slice() else {
            panic!("not a row of three cells: {row:?}");
        };
        let value: Dynamic = engine
            .eval(expression)
            .unwrap_or_else(|e| panic!("{expression}: {e}"));
        assert_eq!(&shown(&value), expected, "{expression}");
    }
    assert!(rows.len() >= 10, "only {} examples found", rows.len());
}

#[test]
fn nth_host_beyond_the_network_is_an_error() {
    let mut net: IpNet = "10.0.0.0/30".parse().expect("cidr");
    assert!(nth_host(&mut net, 4).is_err());
    assert!(nth_host(&mut net, -1).is_err());
    assert_eq!(nth_host(&mut net, 3).ok(), "10.0.0.3".parse().ok());
}

mod netns_tests {
    use std::sync::Arc;

    use super::super::cluster::node_netns;
    use super::super::namespace::{dump_part, link_map, route_map};
    use super::super::netfilter::{iptables_chain, masquerades};
    use super::*;
    use crate::snapshot::Snapshot;

    /// node-1's host namespace of the bundled example (real lab output).
    fn node_1() -> NetnsRef {
        let (snapshot, problems) = Snapshot::load(std::path::Path::new("examples/flannel-vxlan"))
            .expect("the example loads");
        assert!(problems.is_empty(), "{problems:?}");
        NetnsRef {
            snapshot: Arc::new(snapshot),
            id: NetnsId::Host {
                node: "node-1".into(),
            },
        }
    }

    /// Every example of docs/packs.md's table of queries on the bundled
    /// examples, run: a row `| function | snapshot | `EXPR` | `RESULT` |`
    /// evaluates EXPR, with `cluster` that snapshot's cluster and `netns`
    /// its node-1's host namespace, to RESULT.
    #[test]
    fn every_documented_query_evaluates_to_its_documented_result() {
        let engine = crate::packs::sandbox::engine();
        let rows = super::documented_rows("<!-- host-api-snapshot-examples -->");
        for row in &rows {
            let [example, expression, expected] = row.as_slice() else {
                panic!("not a row of four cells: {row:?}");
            };
            let (snapshot, problems) =
                Snapshot::load(std::path::Path::new(example)).expect("the example loads");
            assert!(problems.is_empty(), "{problems:?}");
            let snapshot = Arc::new(snapshot);
            let mut scope = rhai::Scope::new();
            scope.push(
                "cluster",
                ClusterRef {
                    snapshot: snapshot.clone(),
                },
            );
            scope.push(
                "netns",
                NetnsRef {
                    snapshot,
                    id: NetnsId::Host {
                        node: "node-1".into(),
                    },
                },
            );
            let value: Dynamic = engine
                .eval_with_scope(&mut scope, expression)
                .unwrap_or_else(|e| panic!("{expression}: {e}"));
            assert_eq!(&super::shown(&value), expected, "{example}: {expression}");
        }
        assert!(rows.len() >= 10, "only {} examples found", rows.len());
    }

    #[test]
    fn iptables_chain_lists_rules_with_their_targets() {
        let mut netns = node_1();
        let rules = iptables_chain(&mut netns, "nat", "POSTROUTING")
            .ok()
            .and_then(|r| r.try_cast::<Array>())
            .expect("nat POSTROUTING exists");
        let targets: Vec<String> = rules
            .iter()
            .filter_map(|r| r.clone().try_cast::<Map>())
            .map(|r| display(&r["target"]))
            .collect();
        assert_eq!(targets, ["KUBE-POSTROUTING", "FLANNEL-POSTRTG"]);
        let first = rules[0].clone().try_cast::<Map>().expect("a map");
        assert_eq!(first["number"].as_int(), Ok(1));
        assert!(display(&first["text"]).starts_with("-A POSTROUTING"));
    }

    #[test]
    fn iptables_chain_that_does_not_exist_is_unit() {
        let mut netns = node_1();
        let missing = iptables_chain(&mut netns, "nat", "NO-SUCH-CHAIN").expect("answers");
        assert!(missing.is_unit());
        let no_table = iptables_chain(&mut netns, "raw", "PREROUTING").expect("answers");
        assert!(no_table.is_unit());
    }

    #[test]
    fn routes_carry_scope_source_and_metric() {
        let netns = node_1();
        let routes: Vec<Map> = dump_part(&netns, DumpFile::IpRoute, |d| d.routes.as_ref())
            .expect("routes collected")
            .iter()
            .map(route_map)
            .filter_map(|r| r.try_cast::<Map>())
            .collect();
        let fields = |dst: &str, dev: &str| {
            let route = routes
                .iter()
                .find(|r| display(&r["dst"]) == dst && display(&r["dev"]) == dev)
                .unwrap_or_else(|| panic!("a route to {dst} by {dev}"));
            // `display` shows `()` as nothing.
            ["scope", "prefsrc", "metric"].map(|field| display(&route[field]))
        };
        assert_eq!(fields("172.18.0.0/24", "eth0"), ["link", "172.18.0.11", ""]);
        assert_eq!(fields("default", "eth0"), ["global", "", ""]);
        assert_eq!(fields("fe80::/64", "eth0"), ["global", "", "256"]);
    }

    #[test]
    fn routes_name_the_protocol_that_installed_them() {
        let netns = node_1();
        let routes = dump_part(&netns, DumpFile::IpRoute, |d| d.routes.as_ref())
            .expect("routes collected")
            .iter()
            .map(route_map)
            .filter_map(|r| r.try_cast::<Map>())
            .map(|r| (display(&r["dst"]), display(&r["protocol"])))
            .collect::<Vec<_>>();
        assert!(
            routes.contains(&("default".into(), "boot".into())),
            "{routes:?}"
        );
        assert!(
            routes.contains(&("172.18.0.0/24".into(), "kernel".into())),
            "{routes:?}"
        );
    }

    #[test]
    fn a_veth_leads_to_its_far_end_and_back_and_other_devices_to_nothing() {
        let netns = node_1();
        let link = |netns: &NetnsRef, name: &str| {
            let links = dump_part(netns, DumpFile::IpLink, |d| d.links.as_ref()).expect("links");
            let link = links.iter().find(|l| l.ifname == name).expect(name);
            link_map(netns, link).try_cast::<Map>().expect("a map")
        };
        let host_end = link(&netns, "veth53842afe");
        assert_eq!(display(&host_end["peer"]), "eth0");
        let pod = host_end["peer_netns"].clone().cast::<NetnsRef>();
        assert_eq!(pod.id.to_string(), "default/web-0 (on node-1)");
        let pod_end = link(&pod, "eth0");
        assert_eq!(display(&pod_end["peer"]), "veth53842afe");
        let back = pod_end["peer_netns"].clone().cast::<NetnsRef>();
        assert_eq!(back.id, netns.id);
        // The node's eth0 is a veth into the lab's underlay, which the
        // snapshot does not hold; flannel.1 is no veth: neither leads anywhere.
        for name in ["eth0", "flannel.1"] {
            let device = link(&netns, name);
            assert!(device["peer"].is_unit(), "{name}");
            assert!(device["peer_netns"].is_unit(), "{name}");
        }
        assert_eq!(display(&link(&netns, "eth0")["peer_ifindex"]), "4");
        assert!(link(&netns, "flannel.1")["peer_ifindex"].is_unit());
    }

    #[test]
    fn links_carry_their_mac_address() {
        let netns = node_1();
        let links = dump_part(&netns, DumpFile::IpLink, |d| d.links.as_ref()).expect("links");
        let flannel = links
            .iter()
            .find(|l| l.ifname == "flannel.1")
            .map(|l| link_map(&netns, l))
            .and_then(|l| l.try_cast::<Map>())
            .expect("flannel.1");
        // node-1's VTEP MAC, as its backend-data annotation announces it.
        assert_eq!(display(&flannel["address"]), "f2:50:c6:f2:ef:fd");
    }

    #[test]
    fn node_netns_is_its_host_namespace_or_unit_without_a_dump() {
        let snapshot = node_1().snapshot;
        let mut node_1 = NodeRef::new(&snapshot, "node-1").expect("node-1");
        let netns = node_netns(&mut node_1)
            .try_cast::<NetnsRef>()
            .expect("node-1's host namespace is in the snapshot");
        assert_eq!(
            netns.id,
            NetnsId::Host {
                node: "node-1".into()
            }
        );
        let mut unknown = NodeRef {
            snapshot,
            name: "node-9".into(),
        };
        assert!(node_netns(&mut unknown).is_unit());
    }

    #[test]
    fn masquerades_only_traffic_leaving_the_cluster_network() {
        let mut netns = node_1();
        let mut asks = |src: &str, dst: &str| {
            masquerades(&mut netns, text(src), text(dst)).expect("the model decides")
        };
        assert!(
            !asks("10.244.1.2", "10.244.2.2"),
            "pod to pod keeps its source"
        );
        assert!(
            asks("10.244.1.2", "203.0.113.1"),
            "pod to outside is masqueraded"
        );
        assert!(
            !asks("172.18.0.11", "203.0.113.1"),
            "the node's own traffic is not"
        );
    }
}

mod network_policy_tests {
    use std::sync::Arc;

    use super::super::cluster::network_policy;
    use super::*;
    use crate::snapshot::Snapshot;

    /// The Flannel example with two policies (the networkpolicy pack's test).
    fn cluster() -> ClusterRef {
        let dir = std::path::Path::new("rules/networkpolicy/tests/admitted-but-dropped/snapshot");
        let pack =
            crate::snapshot::input::Boundary::new(std::path::Path::new("rules/networkpolicy"));
        let (snapshot, problems) = Snapshot::load_inside(dir, &pack).expect("loads");
        assert!(problems.is_empty(), "{problems:?}");
        ClusterRef {
            snapshot: Arc::new(snapshot),
        }
    }

    fn field(map: &Dynamic, key: &str) -> Dynamic {
        map.clone()
            .try_cast::<Map>()
            .and_then(|m| m.get(key).cloned())
            .unwrap_or_else(|| panic!("no {key} in {map:?}"))
    }

    /// What a script over the example's cluster (`cluster`) evaluates to.
    fn eval(script: &str) -> Result<Dynamic, String> {
        let engine = crate::packs::sandbox::engine();
        let mut scope = rhai::Scope::new();
        scope.push("cluster", cluster());
        engine
            .eval_with_scope::<Dynamic>(&mut scope, script)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn daemon_sets_show_their_containers_env_and_args() {
        let flannel = r#"cluster.daemon_set("kube-flannel", "kube-flannel-ds").containers[0]"#;
        let env = eval(&format!("{flannel}.env")).expect("evaluates");
        assert_eq!(display(&field(&env, "EVENT_QUEUE_DEPTH")), "5000");
        assert!(
            field(&env, "POD_NAME").is_unit(),
            "set from a field of the pod: not in the template"
        );
        let args = eval(&format!("{flannel}.args")).expect("evaluates");
        assert_eq!(display(&args), "[\"--ip-masq\", \"--kube-subnet-mgr\"]");
        assert_eq!(
            display(&eval(r#"cluster.objects("apps/v1", "DaemonSet").map(|d| d.name)"#).unwrap()),
            "[\"kube-flannel-ds\"]"
        );
        assert!(
            eval(r#"cluster.daemon_set("kube-flannel", "nothing")"#)
                .unwrap()
                .is_unit()
        );
    }

    #[test]
    fn objects_of_a_kind_skoop_reads_itself_are_its_typed_forms_or_an_error() {
        assert_eq!(
            display(&eval(r#"cluster.objects("v1", "Node").map(|n| n.name)"#).unwrap()),
            "[\"node-1\", \"node-2\"]"
        );
        assert_eq!(
            display(&eval(r#"cluster.objects("v1", "Service").len() > 0"#).unwrap()),
            "true"
        );
        let error = eval(r#"cluster.objects("networking.k8s.io/v1", "NetworkPolicy")"#)
            .expect_err("not listed as objects");
        assert!(
            error.contains("cluster.objects does not list networking.k8s.io/v1 NetworkPolicy"),
            "{error}"
        );
    }

    #[test]
    fn network_policy_gives_both_directions_with_their_policies() {
        let verdict = network_policy(
            &mut cluster(),
            text("10.244.1.3"),
            text("10.244.2.3"),
            int(8080),
            "tcp",
        )
        .expect("judged");
        let ingress = field(&verdict, "ingress");
        assert_eq!(display(&field(&ingress, "verdict")), "denied");
        assert_eq!(display(&field(&ingress, "pod")), "default/web-3");
        let policies = field(&ingress, "policies").into_array().expect("array");
        assert_eq!(
            display(&field(&policies[0], "policy")),
            "default/web-from-node-1"
        );
        assert_eq!(display(&field(&policies[0], "outcome")), "denies");
        assert!(field(&policies[0], "rule").is_unit());
        let egress = field(&verdict, "egress");
        assert_eq!(display(&field(&egress, "verdict")), "admitted");
        let admitting = field(&egress, "policies").into_array().expect("array");
        assert_eq!(
            display(&field(&admitting[0], "rule")),
            "spec.egress[0].to[0], ports[0]"
        );
    }

    #[test]
    fn network_policy_needs_a_port_except_for_icmp() {
        let ask = |port: Dynamic, protocol: &str| {
            network_policy(
                &mut cluster(),
                text("10.244.1.2"),
                text("10.244.2.3"),
                port,
                protocol,
            )
        };
        assert!(ask(Dynamic::UNIT, "tcp").is_err());
        assert!(ask(int(70000), "udp").is_err());
        assert!(ask(int(80), "gre").is_err());
        let ping = ask(Dynamic::UNIT, "icmp").expect("judged");
        // ICMP has no port: the ingress rule with ports does not admit it.
        assert_eq!(
            display(&field(&field(&ping, "ingress"), "verdict")),
            "denied"
        );
    }
}

mod cluster_tests {
    use std::sync::Arc;

    use rhai::Scope;

    use super::*;
    use crate::snapshot::Snapshot;

    /// Evaluates `expression` with `cluster` bound to the kube-proxy pack's
    /// test snapshot (two nodes, a service of each kind).
    fn try_eval(expression: &str) -> Result<Dynamic, Box<EvalAltResult>> {
        let (snapshot, problems) = Snapshot::load(std::path::Path::new(
            "rules/kube-proxy/tests/services/snapshot",
        ))
        .expect("the fixture loads");
        assert!(problems.is_empty(), "{problems:?}");
        let mut scope = Scope::new();
        scope.push(
            "cluster",
            ClusterRef {
                snapshot: Arc::new(snapshot),
            },
        );
        crate::packs::sandbox::engine().eval_with_scope::<Dynamic>(&mut scope, expression)
    }

    fn eval(expression: &str) -> Dynamic {
        try_eval(expression).unwrap_or_else(|e| panic!("{expression}: {e}"))
    }

    fn shown(expression: &str) -> String {
        display(&eval(expression))
    }

    #[test]
    fn service_has_its_whole_spec_with_the_default_traffic_policies() {
        let web = r#"cluster.service("default", "web")"#;
        let local = r#"cluster.service("default", "local")"#;
        for (field, expected) in [
            (format!("{web}.type"), "NodePort"),
            (format!("{web}.external_ips[0]"), "192.0.2.10"),
            (format!("{web}.selector.app"), "web"),
            (format!("{web}.ports[0].target_port"), "web"),
            (format!("{local}.ports[0].target_port"), "8080"),
            (format!("{local}.load_balancer_ips[0]"), "198.51.100.11"),
            (format!("{local}.external_traffic_policy"), "Local"),
            // Unset in services.yaml: the API's default.
            (format!("{local}.internal_traffic_policy"), "Cluster"),
            (
                r#"cluster.service("default", "headless").headless"#.to_owned(),
                "true",
            ),
            ("cluster.services().len()".to_owned(), "10"),
        ] {
            assert_eq!(shown(&field), expected, "{field}");
        }
        assert_eq!(
            eval(&format!("type_of({local}.ports[0].target_port)")).to_string(),
            "i64"
        );
        assert!(shown(&format!("{web}.source")).ends_with("cluster/services.yaml:5"));
    }

    #[test]
    fn an_address_leads_to_its_pod_and_its_owners_of_a_kind() {
        assert_eq!(shown(r#"cluster.pod_at("10.244.2.3")"#), "default/web-2");
        assert!(eval(r#"cluster.pod_at("10.96.0.10")"#).is_unit());
        assert_eq!(
            shown(r#"cluster.by_ip("10.96.0.10", "Service")[0].name"#),
            shown(r#"cluster.by_ip("10.96.0.10")[0].name"#)
        );
        assert_eq!(shown(r#"cluster.by_ip("10.96.0.10", "Pod").len()"#), "0");
        assert_eq!(
            shown(r#"cluster.by_ip("10.244.2.3", "Service").len()"#),
            "0"
        );
        assert_eq!(
            shown(r#"cluster.by_ip("10.244.2.3", "Pod")[0].name"#),
            "web-2"
        );
    }

    #[test]
    fn node_port_finds_its_service_in_either_case_of_protocol() {
        assert_eq!(
            shown(r#"cluster.service_by_node_port("tcp", 30081).name"#),
            "local"
        );
        assert_eq!(
            shown(r#"cluster.service_by_node_port("TCP", 30080).name"#),
            "web"
        );
        assert!(eval(r#"cluster.service_by_node_port("udp", 30080)"#).is_unit());
        let error = try_eval(r#"cluster.service_by_node_port("icmp", 30080)"#)
            .expect_err("no NodePort protocol");
        assert!(
            error
                .to_string()
                .contains(r#""icmp" is not TCP, UDP or SCTP"#),
            "{error}"
        );
        let error = try_eval(r#"cluster.service_by_node_port("tcp", 70000)"#).expect_err("no port");
        assert!(
            error.to_string().contains("70000 is not a port number"),
            "{error}"
        );
    }

    #[test]
    fn endpoint_slices_keep_unset_conditions_unset() {
        let slice = r#"cluster.endpoint_slices("default", "itp")[0]"#;
        assert_eq!(shown(&format!("{slice}.name")), "itp-c8d2m");
        assert_eq!(shown(&format!("{slice}.address_type")), "IPv4");
        assert_eq!(
            eval(&format!("{slice}.endpoints[0].conditions.ready")).as_bool(),
            Ok(true)
        );
        assert!(eval(&format!("{slice}.endpoints[0].conditions.serving")).is_unit());
        assert_eq!(shown(&format!("{slice}.endpoints[0].node_name")), "node-1");
        assert_eq!(
            shown(&format!("{slice}.endpoints[0].target_ref.name")),
            "itp-0"
        );
        assert!(eval(&format!("{slice}.ports[0].name")).is_unit());
        assert_eq!(eval(&format!("{slice}.ports[0].port")).as_int(), Ok(8080));
        assert_eq!(
            eval(r#"cluster.endpoint_slices("default", "legacy").len()"#).as_int(),
            Ok(0)
        );
    }

    #[test]
    fn endpoints_object_has_ready_and_not_ready_addresses() {
        let subset = r#"cluster.endpoints("default", "legacy").subsets[0]"#;
        assert_eq!(shown(&format!("{subset}.addresses[0].ip")), "10.244.2.5");
        assert_eq!(
            shown(&format!("{subset}.not_ready_addresses[0].ip")),
            "10.244.2.7"
        );
        assert_eq!(shown(&format!("{subset}.ports[0].name")), "pg");
        assert!(eval(r#"cluster.endpoints("default", "web")"#).is_unit());
    }

    #[test]
    fn service_pods_are_the_pods_its_selector_selects() {
        assert_eq!(
            shown(r#"cluster.service_pods("default", "web").map(|p| p.name)"#),
            r#"["web-0", "web-1", "web-2"]"#
        );
        assert_eq!(
            eval(r#"cluster.service_pods("default", "external").len()"#).as_int(),
            Ok(0),
            "an ExternalName service selects nothing"
        );
    }

    #[test]
    fn node_addresses_are_listed_as_written() {
        assert_eq!(
            shown(r#"cluster.node("node-1").addresses.map(|a| a.type)"#),
            r#"["InternalIP", "ExternalIP", "Hostname"]"#
        );
        assert_eq!(
            shown(r#"cluster.node("node-1").addresses[1].address"#),
            "203.0.113.11"
        );
        assert_eq!(
            shown(r#"type_of(cluster.node("node-1").addresses[2].address)"#),
            "string"
        );
    }
}
