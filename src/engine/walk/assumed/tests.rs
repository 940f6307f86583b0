use super::super::fixture::*;
use super::*;
use crate::engine::codes;

#[test]
fn without_a_cni_pack_nothing_is_assumed() {
    let mut files = two_pods_on_a_bridge();
    files.retain(|(path, _)| !path.contains("pods/default/b/"));
    let fixture = Fixture::new(&files);
    fixture.walk(None, |walker| {
        assert!(!walker.can_assume(&pod("b")));
        // The node sends to port veth-b, whose far end is not in the
        // snapshot: nothing can be said.
        let mut branch = branch();
        let place = walker.test_hop(&host("n1"), &mut branch);
        let bridge = walker.topology.link(&place.ns, "cni0").unwrap();
        let flow = Flow {
            packet: tcp("10.0.0.1", "10.0.0.3"),
            branch,
        };
        let stop = stopped(walker.bridge_egress(&place, bridge, "10.0.0.3".parse().unwrap(), flow));
        assert_eq!(stop.id, codes::SNAPSHOT_MISSING);
        assert_eq!(stop.disposition, Disposition::InsufficientInfo);
    });
}

/// `two_pods_on_a_bridge` without pod b's dump, with b's Pod object.
fn pod_b_without_its_dump() -> Vec<(String, String)> {
    let mut files = two_pods_on_a_bridge();
    files.retain(|(path, _)| !path.contains("pods/default/b/"));
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {namespace: default, name: b}\n\
               spec: {nodeName: n1, containers: [{name: c, image: x}]}\n\
               status: {phase: Running, podIP: 10.0.0.3, podIPs: [{ip: 10.0.0.3}]}\n";
    files.push(("cluster/pods.yaml".into(), pod.into()));
    files
}

/// Node n1 sends to pod b by `dev`, with the pack's `pod_interface`
/// answering `answer`: the link to the pod (its kind and the node's
/// interface) and the bridges the hop shows, or the stop.
fn send_to_b(answer: &str, dev: Option<&str>) -> Result<(LinkKind, String, Vec<String>), Stop> {
    let script =
        format!("fn next_hop(ctx, packet) {{ () }}\nfn pod_interface(ctx, pod) {{ {answer} }}");
    let fixture = Fixture::with_hooks(&pod_b_without_its_dump(), &script);
    fixture.walk(None, |walker| {
        let (place, flow) = walker.test_flow(&host("n1"), tcp("10.0.0.1", "10.0.0.3"));
        match walker.send_to_local_pod(&place, dev, &pod("b"), None, flow) {
            Next::Visit {
                ns,
                from: Some((_, link)),
                ..
            } => {
                assert_eq!(ns, pod("b"));
                let bridged = walker.graph[place.hop]
                    .steps
                    .iter()
                    .filter_map(|step| match &step.step {
                        Step::Bridged { bridge, port } => Some(format!("{bridge}:{port}")),
                        _ => None,
                    })
                    .collect();
                Ok((link.kind, link.from_interface, bridged))
            }
            other => Err(stopped(other)),
        }
    })
}

#[test]
fn a_routed_pod_without_a_dump_is_reached_by_its_veth_not_a_bridge_port() {
    let routed = r#"#{kind: "routed", host_veth: (), pod_dev: "eth0"}"#;
    let (kind, from, bridged) = went(send_to_b(routed, Some("veth-b")));
    assert_eq!((kind, from.as_str()), (LinkKind::Veth, "veth-b"));
    assert!(bridged.is_empty(), "{bridged:?}");
    // At a node without a dump the CNI names no device: still a veth.
    let (kind, from, bridged) = went(send_to_b(routed, None));
    assert_eq!(kind, LinkKind::Veth);
    assert_eq!(from, unnamed("veth"));
    assert!(bridged.is_empty(), "{bridged:?}");
}

#[test]
fn a_routed_pod_the_node_sends_to_by_a_bridge_is_not_in_the_snapshot() {
    let routed = r#"#{kind: "routed", host_veth: (), pod_dev: "eth0"}"#;
    let stop = send_to_b(routed, Some("cni0")).unwrap_err();
    assert_eq!(stop.id, codes::SNAPSHOT_MISSING);
    assert_eq!(stop.disposition, Disposition::InsufficientInfo);
    assert!(stop.reason.contains("that is a bridge"), "{}", stop.reason);
}

#[test]
fn a_bridged_pod_is_a_port_of_its_bridge_and_of_no_other_device() {
    let bridged = r#"#{kind: "bridged", bridge: "cni0", host_veth: "veth-b", pod_dev: "eth0"}"#;
    let (kind, from, steps) = went(send_to_b(bridged, Some("cni0")));
    assert_eq!((kind, from.as_str()), (LinkKind::BridgePort, "veth-b"));
    assert_eq!(steps, ["cni0:veth-b"]);
    let stop = send_to_b(bridged, Some("veth-b")).unwrap_err();
    assert!(
        stop.reason.contains("bridges the pod on cni0"),
        "{}",
        stop.reason
    );
}

#[test]
fn an_answer_without_kind_is_bridged_on_the_device_as_before() {
    let older = r#"#{host_veth: (), pod_dev: "eth0"}"#;
    let (kind, from, steps) = went(send_to_b(older, Some("cni0")));
    assert_eq!(
        (kind, from.clone()),
        (LinkKind::BridgePort, unnamed("veth"))
    );
    assert_eq!(steps, [format!("cni0:{from}")]);
}

/// Nodes n1 (10.1.0.1) and n2 (10.1.0.2), neither with a dump.
fn two_nodes_without_dumps() -> Vec<(String, String)> {
    let node = |name: &str, ip: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n\
             status: {{addresses: [{{type: InternalIP, address: {ip}}}]}}\n"
        )
    };
    vec![(
        "cluster/nodes.yaml".into(),
        format!("{}---\n{}", node("n1", "10.1.0.1"), node("n2", "10.1.0.2")),
    )]
}

/// Routes a packet from n1 (without a dump) to `dst` by the pack's
/// `next_hop` answering `answer`: the namespace it goes into, the
/// link's kind and the interface it leaves by; or what happened instead.
fn route_from_n1(answer: &str, dst: &str) -> Result<(NetnsId, LinkKind, String), String> {
    let script =
        format!("fn next_hop(ctx, packet) {{ {answer} }}\nfn pod_interface(ctx, pod) {{ () }}");
    let fixture = Fixture::with_hooks(&two_nodes_without_dumps(), &script);
    fixture.walk(None, |walker| {
        let (place, flow) = walker.test_flow(&host("n1"), tcp("10.1.0.1", dst));
        match walker.route_assumed(&place, flow, None) {
            Next::Visit {
                ns,
                from: Some((_, link)),
                ..
            } => Ok((ns, link.kind, link.from_interface)),
            other => Err(describe(&other)),
        }
    })
}

/// What went on, or the stop's reason as the failure.
fn went<T>(result: Result<T, Stop>) -> T {
    result.unwrap_or_else(|stop| panic!("stopped: {} ({})", stop.id.id, stop.reason))
}

fn routed<T>(result: Result<T, String>) -> T {
    result.unwrap_or_else(|other| panic!("{other}"))
}

#[test]
fn next_hop_on_link_to_a_peer_node_goes_to_that_node_over_the_underlay() {
    let answer = r#"#{kind: "peer-node", node: "n2", dev: "eth0"}"#;
    let (ns, kind, from) = routed(route_from_n1(answer, "10.2.0.5"));
    assert_eq!(
        (ns, kind, from.as_str()),
        (host("n2"), LinkKind::Underlay, "eth0")
    );
    let stop = route_from_n1(r#"#{kind: "peer-node", node: "n9"}"#, "10.2.0.5").unwrap_err();
    assert!(stop.starts_with("stop engine.hook.undecided"), "{stop}");
    assert!(stop.contains("\"n9\" is no node"), "{stop}");
}

#[test]
fn next_hop_by_the_nodes_own_routes_goes_to_the_destinations_holder() {
    // A node's address: over the underlay to it, by the default route's device.
    let (ns, kind, from) = routed(route_from_n1(r#"#{kind: "node-routes"}"#, "10.1.0.2"));
    assert_eq!((ns, kind), (host("n2"), LinkKind::Underlay));
    assert_eq!(from, unnamed("default route's device"));
    // Nobody's address: out of the cluster.
    let other = route_from_n1(r#"#{kind: "node-routes"}"#, "203.0.113.9").unwrap_err();
    assert_eq!(other, "finish exits_cluster");
}

#[test]
fn next_hop_through_a_device_to_a_gateway_goes_to_the_gateways_holder() {
    let answer = r#"#{kind: "device", dev: "eth0", via: "10.1.0.2"}"#;
    let (ns, kind, from) = routed(route_from_n1(answer, "10.2.0.5"));
    assert_eq!(
        (ns, kind, from.as_str()),
        (host("n2"), LinkKind::Underlay, "eth0")
    );
}

#[test]
fn next_hop_encapsulated_without_an_encapsulation_answer_is_outside_the_contract() {
    let stop = route_from_n1(r#"#{kind: "encapsulated", dev: "tun0"}"#, "10.2.0.5").unwrap_err();
    assert!(stop.starts_with("stop engine.hook.undecided"), "{stop}");
    assert!(
        stop.contains("the encapsulation hook has no answer"),
        "{stop}"
    );
}
