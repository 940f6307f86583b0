//! The routed underlay: a node sends a packet to a gateway that no
//! namespace or object of the snapshot holds — a router between node
//! subnets, racks or zones, which is not a cluster member.
//!
//! Routers route node addresses: a packet for another node's address (a
//! VXLAN or IPIP outer packet, or the nodes' own traffic) is carried to
//! that node over a link marked `underlay_routed` (assumed: the routers are
//! not in the snapshot). Whether they route pod addresses is the CNI's to
//! say (its `underlay` hook: Calico peering with the routers over BGP
//! teaches them the nodes' blocks; flannel teaches them nothing), and where
//! it says nothing, nothing can be said.

use super::cross::Lost;
use super::*;
use crate::engine::codes;

/// Who holds a packet's destination, as the routed underlay sees it.
enum Destination {
    /// A node's address: the routers carry the packet to that node.
    Node { ns: NetnsId, address: IpAddr },
    /// A pod's address (not a host-network pod's), and the pod's node.
    Pod { pod: String, node: String },
    /// Nothing of the cluster: the packet leaves it.
    Outside,
}

impl<'s> Walker<'s> {
    /// A node's packet for `gateway` on `device`, which nobody of the
    /// snapshot holds: carried by the routed underlay to the node that holds
    /// its destination (or the pod's node, where the CNI says the routers
    /// know pod addresses). It leaves the cluster where the routed underlay
    /// does not apply (a pod's packet, a route with no gateway, a destination
    /// outside the cluster) or the routers know no pod addresses.
    pub(super) fn routed_underlay(
        &mut self,
        place: &Place,
        device: &Device,
        gateway: IpAddr,
        flow: Flow,
    ) -> Next<'s> {
        // A route straight to the destination that nobody answers is the
        // neighbour's failure, not a router's.
        if !matches!(place.ns, NetnsId::Host { .. }) || gateway == flow.packet.ip.dst {
            return self.leaves_by(place, device, gateway, None, flow);
        }
        match self.destination(flow.packet.ip.dst) {
            Destination::Outside => self.leaves_by(place, device, gateway, None, flow),
            Destination::Node { ns, address } => {
                self.carry(place, device, gateway, (&ns, address), None, flow)
            }
            Destination::Pod { pod, node } => {
                self.pod_routes(place, device, gateway, (&pod, &node), flow)
            }
        }
    }

    /// Who holds `address`: a node (its namespace in the snapshot, or a
    /// Node object), a pod, or nothing of the cluster.
    fn destination(&self, address: IpAddr) -> Destination {
        let holders = self.topology.owners(address);
        let owners = self.snapshot.cluster.by_ip(address);
        let node = holders
            .iter()
            .find(|(ns, _)| matches!(ns, NetnsId::Host { .. }))
            .map(|(ns, _)| (*ns).clone())
            .or_else(|| {
                owners.iter().find_map(|owner| match owner {
                    IpOwner::Node { name } => Some(NetnsId::Host { node: name.clone() }),
                    _ => None,
                })
            });
        if let Some(ns) = node {
            return Destination::Node { ns, address };
        }
        let pod = holders
            .iter()
            .find_map(|(ns, _)| match ns {
                NetnsId::Pod {
                    node,
                    namespace,
                    name,
                } => Some((format!("{namespace}/{name}"), node.clone())),
                NetnsId::Host { .. } => None,
            })
            .or_else(|| {
                owners.iter().find_map(|owner| match owner {
                    IpOwner::Pod {
                        namespace,
                        name,
                        host_network: false,
                    } => {
                        let node = self
                            .snapshot
                            .cluster
                            .pod(namespace, name)?
                            .node_name
                            .clone()?;
                        Some((format!("{namespace}/{name}"), node))
                    }
                    _ => None,
                })
            });
        match pod {
            Some((pod, node)) => Destination::Pod { pod, node },
            None => Destination::Outside,
        }
    }

    /// An unencapsulated packet for `pod` (on `node`) sent to a router: it
    /// reaches the pod's node only where the CNI says the routers know pod
    /// addresses, leaves the cluster where it says they do not, and where
    /// it says nothing, nothing can be said.
    fn pod_routes(
        &mut self,
        place: &Place,
        device: &Device,
        gateway: IpAddr,
        (pod, node): (&str, &str),
        flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let context = self.graph[hop].context.as_ref();
        let in_iface = context.and_then(|context| context.in_iface.clone());
        let scope = self.scope(ns, &flow.packet, in_iface.as_deref());
        let sent = format!(
            "{} sends the packet for pod {pod} unencapsulated by {} to gateway {gateway}, a router outside the snapshot",
            hop_id(ns),
            device.ifname
        );
        let routes = match self.intent.underlay(&scope) {
            Ok(Some(routes)) => routes,
            Ok(None) => {
                let said = match self.intent.cni {
                    Some(pack) => format!("pack {}'s underlay hook has no opinion", pack.name),
                    None => "no CNI pack says".to_string(),
                };
                // What the node's route does is the engine's own fact,
                // whatever the pack says of the routers beyond it.
                let because =
                    format!("whether the routers beyond route pod addresses is not known: {said}");
                let lost = Lost {
                    device: &device.ifname,
                    next_hop: gateway,
                    because: Some(&because),
                };
                self.lost(place, lost, &flow.packet);
                let reason = format!(
                    "{sent}; whether the routers route pod addresses is not known ({said})"
                );
                let stop = Stop::unknown(
                    codes::ENGINE_UNDERLAY_POD_ROUTES_UNKNOWN,
                    reason,
                    vec![self.file(ns, DumpFile::routes(flow.packet.ip.family()))],
                );
                return self.stop(hop, flow.branch, stop);
            }
            Err(undecided) => {
                let stop = self.undecided_stop(hop, undecided);
                return self.stop(hop, flow.branch, stop);
            }
        };
        if !routes.pods {
            let because = format!(
                "pack {} says the routers route no pod address: {}",
                routes.pack, routes.why
            );
            return self.leaves_by(place, device, gateway, Some(&because), flow);
        }
        let node_ns = NetnsId::Host {
            node: node.to_string(),
        };
        let address = self
            .snapshot
            .cluster
            .node(node)
            .and_then(|node| node.internal_ip());
        let Some(address) = address else {
            let reason = format!(
                "{sent}; pack {} says the routers route pod addresses, but node {node} has no InternalIP to tell where they deliver it",
                routes.pack
            );
            let object = self
                .snapshot
                .cluster
                .node(node)
                .map(|n| n.meta.source.evidence());
            let stop = Stop::unknown(
                codes::SNAPSHOT_MISSING,
                reason,
                object.into_iter().collect(),
            );
            return self.stop(hop, flow.branch, stop);
        };
        let why = format!(
            "pack {} says the routers route pod addresses: {}",
            routes.pack, routes.why
        );
        self.carry(
            place,
            device,
            gateway,
            (&node_ns, address),
            Some(&why),
            flow,
        )
    }

    /// The routers carry the packet to `node`, which they reach at
    /// `address`: the gateway is assumed to answer, and what the snapshot
    /// cannot tell of the way (the routers' TTL decrements, the path MTU
    /// beyond the gateway) is said in an info finding.
    fn carry(
        &mut self,
        place: &Place,
        device: &Device,
        gateway: IpAddr,
        (node, address): (&NetnsId, IpAddr),
        pod_routes: Option<&str>,
        flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        if !self.snapshot.namespaces.contains_key(node) && !self.can_assume(node) {
            let stop = self.missing(
                node,
                Wanted::Other("the node's namespace dump"),
                "follow the packet further",
            );
            return self.stop(hop, flow.branch, stop);
        }
        self.step(
            hop,
            Step::Neighbour {
                address: gateway,
                interface: device.ifname.clone(),
                result: "a router of the underlay, not in the snapshot (assumed to answer)".into(),
            },
        );
        let fits = match flow.packet.bytes() {
            Some(bytes) => format!(
                "the {bytes}-byte packet fits {} (MTU {}), and whether every link beyond {gateway} takes it is not known",
                device.ifname, device.mtu
            ),
            None => format!(
                "whether a packet of {}'s MTU {} fits every link beyond {gateway} is not known",
                device.ifname, device.mtu
            ),
        };
        let carried = match pod_routes {
            Some(why) => format!(" ({why})"),
            None => String::new(),
        };
        let message = format!(
            "{} sends {} by {} to gateway {gateway}, which nothing in the snapshot holds: routers outside the snapshot are assumed to carry it to {} at {address}{carried}. Each router decrements its TTL (how many there are is not known); the path MTU beyond the gateway is not known: {fits}",
            hop_id(ns),
            flow.packet,
            device.ifname,
            hop_id(node)
        );
        let evidence = vec![self.file(ns, DumpFile::routes(flow.packet.ip.family()))];
        let finding = self.finding_at(hop, codes::ENGINE_UNDERLAY_ROUTED, message, evidence);
        self.findings.push(finding);
        let link = (LinkKind::UnderlayRouted, device.ifname.as_str());
        self.enter_node(hop, link, node, address, None, flow)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixture::*;
    use super::*;

    /// Nodes `n1` (eth0 172.18.0.11/24) and `n2` (eth0 172.18.1.12/24,
    /// bridge cni0 10.0.1.1/24) in two subnets, each with a default route to
    /// its subnet's router (.1), which is not in the snapshot; the cluster's
    /// objects are `objects` (YAML) beside Node `n2` and its pod `default/c`
    /// (10.0.1.2, no dump).
    fn two_subnets(objects: &str) -> Vec<(String, String)> {
        let (first, second) = (
            ("172.18.0.11", "172.18.0.0/24"),
            ("172.18.1.12", "172.18.1.0/24"),
        );
        let mut files = node_files("n1", first, Some("172.18.0.1"), None, ARP_DEFAULTS);
        let pods = Some(("10.0.1.0/24", "10.0.1.1"));
        files.extend(node_files(
            "n2",
            second,
            Some("172.18.1.1"),
            pods,
            ARP_DEFAULTS,
        ));
        let cluster = format!(
            "apiVersion: v1
kind: Node
metadata: {{name: n2}}
spec: {{podCIDR: 10.0.1.0/24}}
status: {{addresses: [{{type: InternalIP, address: 172.18.1.12}}]}}
---
apiVersion: v1
kind: Pod
metadata: {{name: c, namespace: default}}
spec: {{nodeName: n2, containers: [{{name: web, image: web}}]}}
status: {{phase: Running, podIP: 10.0.1.2, podIPs: [{{ip: 10.0.1.2}}]}}
{objects}"
        );
        files.push(("cluster/objects.yaml".into(), cluster));
        files
    }

    /// A CNI's DaemonSet, which makes its pack apply.
    fn daemonset(name: &str) -> String {
        format!(
            "---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}, namespace: kube-system}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: {name}, image: {name}}}]}}
"
        )
    }

    /// Flannel with `backend`, as net-conf.json says.
    fn flannel(backend: &str) -> String {
        let conf = json!({"Network": "10.0.0.0/16", "Backend": {"Type": backend}}).to_string();
        format!(
            "{}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kube-flannel-cfg, namespace: kube-system}}
data: {{net-conf.json: '{conf}'}}
",
            daemonset("kube-flannel-ds")
        )
    }

    /// Calico peering with the routers (a BGPPeer), or only in its mesh.
    fn calico(peering: bool) -> String {
        let peer = "---
apiVersion: crd.projectcalico.org/v1
kind: BGPPeer
metadata: {name: rack-router}
spec: {peerIP: 172.18.0.1, asNumber: 64512}
";
        format!(
            "{}{}",
            daemonset("calico-node"),
            if peering { peer } else { "" }
        )
    }

    /// n1 sends `packet` by eth0 to its gateway 172.18.0.1.
    fn send(fixture: &Fixture, packet: Packet, test: impl FnOnce(&mut Walker<'_>, Next<'_>)) {
        fixture.walk(None, |walker| {
            let (place, flow) = walker.test_flow(&host("n1"), packet);
            let next = walker.egress(&place, "eth0", "172.18.0.1".parse().unwrap(), flow);
            test(walker, next)
        });
    }

    /// The node a routed-underlay crossing goes to, on which interface, and
    /// the sending hop's `engine.underlay.routed` finding.
    fn carried(walker: &Walker<'_>, next: &Next<'_>) -> (NetnsId, Arrival, String) {
        let Next::Visit {
            ns, arrival, from, ..
        } = next
        else {
            panic!("{}", describe(next));
        };
        let (_, link) = from.as_ref().expect("a link");
        assert_eq!(link.kind, LinkKind::UnderlayRouted);
        assert!(link.kind.assumed());
        let finding = walker
            .findings
            .iter()
            .find(|f| f.id == codes::ENGINE_UNDERLAY_ROUTED)
            .expect("the routed underlay's finding");
        assert_eq!(finding.severity, crate::diagnostic::Severity::Info);
        (ns.clone(), arrival.clone(), finding.message.clone())
    }

    #[test]
    fn a_packet_for_another_subnets_node_is_carried_by_the_routed_underlay() {
        let fixture = Fixture::new(&two_subnets(""));
        send(
            &fixture,
            tcp("172.18.0.11", "172.18.1.12"),
            |walker, next| {
                let (ns, arrival, message) = carried(walker, &next);
                assert_eq!(ns, host("n2"));
                assert_eq!(arrival, Arrival::Received("eth0".into()));
                // The consequences the snapshot cannot measure are said, not invented.
                assert!(message.contains("decrements its TTL"), "{message}");
                assert!(
                    message.contains("path MTU beyond the gateway is not known"),
                    "{message}"
                );
                assert!(message.contains("fits eth0 (MTU 1500)"), "{message}");
            },
        );
    }

    #[test]
    fn a_vxlan_outer_packet_to_another_subnets_node_is_carried_with_its_size() {
        let fixture = Fixture::new(&two_subnets(""));
        let mut outer = tcp_sized("172.18.0.11", "172.18.1.12", 1450, false);
        outer.ip.protocol = Protocol::Udp;
        outer.ip.dport = Some(8472);
        send(&fixture, outer, |walker, next| {
            let (ns, _, message) = carried(walker, &next);
            assert_eq!(ns, host("n2"));
            assert!(
                message.contains("the 1450-byte packet fits eth0 (MTU 1500)"),
                "{message}"
            );
        });
    }

    #[test]
    fn a_pod_address_through_a_router_without_a_cni_pack_is_unknown() {
        let fixture = Fixture::new(&two_subnets(""));
        send(&fixture, tcp("172.18.0.11", "10.0.1.2"), |walker, next| {
            let stop = stopped(next);
            assert_eq!(stop.id, codes::ENGINE_UNDERLAY_POD_ROUTES_UNKNOWN);
            assert_eq!(stop.disposition, Disposition::InsufficientInfo);
            assert!(stop.reason.contains("no CNI pack says"), "{}", stop.reason);
            // The node's route leading out of the cluster is the engine's
            // own fact, reported though the routers' part is unknown.
            let lost = walker
                .findings
                .iter()
                .find(|f| f.id == codes::KERNEL_ROUTE_LEAVES_CLUSTER)
                .expect("the route's fact");
            assert!(lost.message.contains("is not known"), "{}", lost.message);
        });
    }

    /// The fatal finding of a pod's packet that leaves the cluster instead
    /// of reaching the pod, once the walk has ended there.
    fn lost_pod(walker: &Walker<'_>, next: Next<'_>) -> String {
        let Next::Finish { disposition, .. } = next else {
            panic!("{}", describe(&next));
        };
        assert_eq!(disposition, Disposition::ExitsCluster);
        let finding = walker
            .findings
            .iter()
            .find(|f| f.id == codes::KERNEL_ROUTE_LEAVES_CLUSTER)
            .expect("the packet for the pod is lost");
        assert!(
            finding.message.contains("pod default/c"),
            "{}",
            finding.message
        );
        finding.message.clone()
    }

    #[test]
    fn flannel_host_gw_across_a_router_loses_the_pods_packet() {
        let fixture = Fixture::with_builtin_packs(&two_subnets(&flannel("host-gw")));
        send(&fixture, tcp("172.18.0.11", "10.0.1.2"), |walker, next| {
            let message = lost_pod(walker, next);
            assert!(
                message.contains("pack flannel says the routers route no pod address"),
                "{message}"
            );
        });
    }

    #[test]
    fn flannel_alloc_leaves_pod_routes_in_the_underlay_unknown() {
        let fixture = Fixture::with_builtin_packs(&two_subnets(&flannel("alloc")));
        send(&fixture, tcp("172.18.0.11", "10.0.1.2"), |_, next| {
            let stop = stopped(next);
            assert_eq!(stop.id, codes::ENGINE_UNDERLAY_POD_ROUTES_UNKNOWN);
            assert!(stop.reason.contains("has no opinion"), "{}", stop.reason);
        });
    }

    #[test]
    fn calico_without_bgp_peering_loses_the_pods_packet() {
        let fixture = Fixture::with_builtin_packs(&two_subnets(&calico(false)));
        send(&fixture, tcp("172.18.0.11", "10.0.1.2"), |walker, next| {
            let message = lost_pod(walker, next);
            assert!(message.contains("no BGPPeer"), "{message}");
        });
    }

    #[test]
    fn calico_peering_with_the_routers_carries_the_pod_address_to_its_node() {
        let fixture = Fixture::with_builtin_packs(&two_subnets(&calico(true)));
        send(&fixture, tcp("172.18.0.11", "10.0.1.2"), |walker, next| {
            let (ns, arrival, message) = carried(walker, &next);
            assert_eq!(ns, host("n2"));
            assert_eq!(arrival, Arrival::Received("eth0".into()));
            assert!(message.contains("BGPPeer rack-router"), "{message}");
        });
    }

    #[test]
    fn a_destination_outside_the_cluster_still_leaves_it_through_the_router() {
        let fixture = Fixture::new(&two_subnets(""));
        send(&fixture, tcp("172.18.0.11", "8.8.8.8"), |walker, next| {
            let Next::Finish { disposition, .. } = next else {
                panic!("{}", describe(&next));
            };
            assert_eq!(disposition, Disposition::ExitsCluster);
            assert!(
                walker
                    .findings
                    .iter()
                    .all(|f| f.id != codes::ENGINE_UNDERLAY_ROUTED)
            );
        });
    }
}
