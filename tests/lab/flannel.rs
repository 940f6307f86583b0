//! Flannel, done by hand exactly as flanneld and the flannel CNI plugin
//! (delegating to the bridge plugin) leave a node, with the VXLAN or the
//! host-gw backend:
//!
//! - `cni0` bridge holding the pod CIDR's first address, pod veths in
//!   hairpin mode (`hairpinMode: true` in the CNI config); MTU 1450 with
//!   VXLAN, 1500 with host-gw;
//! - VXLAN: `flannel.1` device (VNI 1, UDP 8472, local = node IP, dev eth0,
//!   nolearning, MTU 1450) with address `<pod CIDR network>/32`; per remote
//!   node: route `<its CIDR> via <its CIDR network> dev flannel.1 onlink`,
//!   permanent neighbour `<its CIDR network> lladdr <its VTEP MAC>`, FDB entry
//!   `<its VTEP MAC> dst <its node IP> self permanent`;
//! - host-gw: per remote node, route `<its CIDR> via <its node IP> dev eth0`;
//! - `--ip-masq` rules (`FLANNEL-POSTRTG`) and forward rules (`FLANNEL-FWD`).
//!
//! Dual-stack (`EnableIPv6`), flanneld does the same in IPv6: host-gw routes
//! each remote IPv6 pod CIDR via the node's IPv6 address; VXLAN adds a
//! second device, `flannel-v6.1` (same VNI and port, local = the node's IPv6
//! address, and the same MTU as `flannel.1`: flanneld takes 50 bytes off
//! the host's MTU for both, although a VXLAN packet over IPv6 carries 70),
//! with `<IPv6 pod CIDR network>/128`, and per remote node the route,
//! neighbour and FDB entry of its IPv6 VTEP, published in the node's
//! `backend-v6-data` and `public-ipv6` annotations.

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use crate::cluster::{CLUSTER_CIDR, CLUSTER_CIDR6, Cni, Node, Pod, add_vtep_peer, mac};
use crate::objects;

/// The VXLAN network identifier and UDP port flannel uses by default.
const VNI: u32 = 1;
const VXLAN_PORT: u16 = 8472;
const VTEP: &str = "flannel.1";
const VTEP6: &str = "flannel-v6.1";
const BRIDGE: &str = "cni0";
/// The kube-proxy mark flannel's first masquerade rule lets through.
const KUBE_PROXY_MARK: &str = "0x4000/0x4000";

/// Flannel's backend: how pod traffic crosses between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Vxlan,
    HostGw,
}

pub struct Flannel(pub Backend);

impl Flannel {
    pub const VXLAN: Flannel = Flannel(Backend::Vxlan);
    pub const HOST_GW: Flannel = Flannel(Backend::HostGw);

    /// The backend's name in `net-conf.json` and the node annotation.
    pub fn backend_name(&self) -> &'static str {
        match self.0 {
            Backend::Vxlan => "vxlan",
            Backend::HostGw => "host-gw",
        }
    }

    /// The pods' MTU: 1500 on the underlay, less the 50 bytes of VXLAN
    /// encapsulation where there is one.
    fn mtu(&self) -> u16 {
        match self.0 {
            Backend::Vxlan => 1450,
            Backend::HostGw => 1500,
        }
    }
}

impl Cni for Flannel {
    fn topology_name(&self) -> &'static str {
        match self.0 {
            Backend::Vxlan => "flannel-vxlan",
            Backend::HostGw => "flannel-host-gw",
        }
    }

    fn network_condition(&self) -> Option<(&'static str, &'static str)> {
        Some(("FlannelIsUp", "Flannel is running on this node"))
    }

    fn setup_node(&self, node: &Node) {
        let ns = &node.ns;
        let mtu = self.mtu();
        ns.ip(&format!(
            "link add {BRIDGE} address {} mtu {mtu} type bridge",
            mac(&format!("{}/{BRIDGE}", node.name))
        ));
        // With its broadcast address, as the bridge plugin adds it.
        ns.ip(&format!(
            "addr add {}/{} brd + dev {BRIDGE}",
            node.gateway(),
            node.pod_cidr().prefix_len()
        ));
        ns.ip(&format!("link set {BRIDGE} up"));
        if let (Some(gateway6), Some(cidr6)) = (node.gateway6(), node.pod_cidr6) {
            ns.ip(&format!(
                "-6 addr add {gateway6}/{} dev {BRIDGE} nodad",
                cidr6.prefix_len()
            ));
        }
        if self.0 != Backend::Vxlan {
            return;
        }
        let vtep: (&str, IpAddr, IpAddr, u8) =
            (VTEP, node.ip.into(), node.pod_cidr().network().into(), 32);
        let vtep6 = node
            .ip6
            .zip(node.pod_cidr6)
            .map(|(ip6, cidr6)| (VTEP6, IpAddr::from(ip6), IpAddr::from(cidr6.network()), 128));
        for (vtep, local, address, prefix) in std::iter::once(vtep).chain(vtep6) {
            ns.ip(&format!(
                "link add {vtep} address {} mtu {mtu} type vxlan id {VNI} local {local} dev eth0 dstport {VXLAN_PORT} nolearning",
                mac(&format!("{}/{vtep}", node.name)),
            ));
            // flanneld turns router advertisements off on its VXLAN devices.
            ns.run(&[
                "sysctl",
                "-qw",
                &format!("net/ipv6/conf/{vtep}/accept_ra=0"),
            ]);
            ns.ip(&format!("addr add {address}/{prefix} dev {vtep} nodad"));
            ns.ip(&format!("link set {vtep} up"));
        }
    }

    fn attach_pod(&self, node: &Node, pod: &mut Pod) {
        let veth = &pod.host_veth;
        let mtu = self.mtu();
        node.ns.ip(&format!(
            "link add {veth} address {} mtu {mtu} type veth peer name eth0 address {} mtu {mtu} netns {}",
            mac(&format!("{}/{veth}", node.name)),
            mac(&format!("{}/{}/eth0", pod.namespace, pod.name)),
            pod.ns.name
        ));
        node.ns.ip(&format!("link set {veth} master {BRIDGE} up"));
        node.ns
            .run(&["bridge", "link", "set", "dev", veth, "hairpin", "on"]);

        let gateway = node.gateway();
        pod.ns.ip(&format!(
            "addr add {}/{} dev eth0",
            pod.ip(),
            node.pod_cidr().prefix_len()
        ));
        pod.ns.ip("link set eth0 up");
        // The bridge plugin's default route (isDefaultGateway) and the route
        // to the cluster network the flannel plugin adds to host-local IPAM.
        pod.ns
            .ip(&format!("route add default via {gateway} dev eth0"));
        pod.ns
            .ip(&format!("route add {CLUSTER_CIDR} via {gateway} dev eth0"));
        if let (Some(ip6), Some(gateway6), Some(cidr6)) = (pod.ip6, node.gateway6(), node.pod_cidr6)
        {
            pod.ns.ip(&format!(
                "-6 addr add {ip6}/{} dev eth0 nodad",
                cidr6.prefix_len()
            ));
            pod.ns
                .ip(&format!("-6 route add default via {gateway6} dev eth0"));
            pod.ns.ip(&format!(
                "-6 route add {CLUSTER_CIDR6} via {gateway6} dev eth0"
            ));
        }
    }

    fn connect(&self, node: &Node, peers: &[&Node]) {
        if self.0 == Backend::HostGw {
            for peer in peers {
                // A peer on another subnet is no neighbour: the kernel refuses
                // the route ("Nexthop has invalid gateway"), and flanneld
                // logs the error and goes on without it (route_network.go).
                let cidr = peer.pod_cidr().to_string();
                let via = peer.ip.to_string();
                let route = ["ip", "route", "add", &cidr, "via", &via, "dev", "eth0"];
                let added = node.ns.exec(&route).status.success();
                assert_eq!(
                    added,
                    node.subnet() == peer.subnet(),
                    "{}: ip route add {cidr} via {via}",
                    node.name
                );
                if let (Some(cidr6), Some(via6)) = (peer.pod_cidr6, peer.ip6) {
                    node.ns
                        .ip(&format!("-6 route add {cidr6} via {via6} dev eth0"));
                }
            }
            return;
        }
        for peer in peers {
            let v4 = (
                VTEP,
                peer.pod_cidr().to_string(),
                peer.pod_cidr().network().to_string(),
                peer.ip.to_string(),
            );
            let v6 = peer.pod_cidr6.zip(peer.ip6).map(|(cidr6, ip6)| {
                (
                    VTEP6,
                    cidr6.to_string(),
                    cidr6.network().to_string(),
                    ip6.to_string(),
                )
            });
            for (vtep, cidr, peer_vtep_ip, public_ip) in std::iter::once(v4).chain(v6) {
                let vtep_mac = link_mac(peer, vtep);
                node.ns.ip(&format!(
                    "route add {cidr} via {peer_vtep_ip} dev {vtep} onlink"
                ));
                add_vtep_peer(&node.ns, vtep, &peer_vtep_ip, &vtep_mac, &public_ip);
            }
        }
    }

    fn iptables_rules(&self, node: &Node) -> String {
        masquerade_rules(node.pod_cidr(), CLUSTER_CIDR, "224.0.0.0/4")
    }

    fn ip6tables_rules(&self, node: &Node) -> String {
        node.pod_cidr6
            .map(|subnet| masquerade_rules(subnet, CLUSTER_CIDR6, "ff00::/8"))
            .unwrap_or_default()
    }

    fn node_annotations(&self, node: &Node) -> Map<String, Value> {
        // host-gw has no backend data: flanneld writes JSON null.
        let backend_data = match self.0 {
            Backend::Vxlan => json!({"VNI": VNI, "VtepMAC": link_mac(node, VTEP)}).to_string(),
            Backend::HostGw => "null".to_string(),
        };
        let mut annotations = Map::new();
        for (key, value) in [
            ("backend-data", backend_data),
            ("backend-type", self.backend_name().to_string()),
            ("kube-subnet-manager", "true".to_string()),
            ("public-ip", node.ip.to_string()),
        ] {
            annotations.insert(format!("flannel.alpha.coreos.com/{key}"), value.into());
        }
        if let Some(ip6) = node.ip6 {
            // flanneld's IPv6 twins of the two above (host-gw: no backend data).
            let backend_v6_data = match self.0 {
                Backend::Vxlan => json!({"VNI": VNI, "VtepMAC": link_mac(node, VTEP6)}).to_string(),
                Backend::HostGw => "null".to_string(),
            };
            annotations.insert(
                "flannel.alpha.coreos.com/backend-v6-data".into(),
                backend_v6_data.into(),
            );
            annotations.insert(
                "flannel.alpha.coreos.com/public-ipv6".into(),
                ip6.to_string().into(),
            );
        }
        annotations
    }

    fn objects(&self, nodes: &[Node]) -> Vec<Value> {
        let ipv6 = match nodes.iter().any(|n| n.ip6.is_some()) {
            true => format!("\n  \"EnableIPv6\": true,\n  \"IPv6Network\": \"{CLUSTER_CIDR6}\","),
            false => String::new(),
        };
        // Verbatim as in flannel's manifest, key order included.
        let cni_conf = r#"{
  "name": "cbr0",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "flannel",
      "delegate": {
        "hairpinMode": true,
        "isDefaultGateway": true
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
"#;
        let net_conf = format!(
            r#"{{
  "Network": "{CLUSTER_CIDR}",{ipv6}
  "Backend": {{
    "Type": "{}"
  }}
}}
"#,
            self.backend_name()
        );
        let labels = json!({"app": "flannel", "k8s-app": "flannel", "tier": "node"});
        vec![
            objects::namespace(
                "kube-flannel",
                json!({"pod-security.kubernetes.io/enforce": "privileged"}),
            ),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": objects::metadata("ConfigMap", Some("kube-flannel"), "kube-flannel-cfg", labels.clone()),
                "data": {
                    "cni-conf.json": cni_conf,
                    "net-conf.json": net_conf,
                },
            }),
            daemon_set(labels, nodes.len()),
        ]
    }
}

/// flanneld's `--ip-masq` rules (`FLANNEL-POSTRTG`) and forward rules
/// (`FLANNEL-FWD`) for a node's pod `subnet` of the `cluster` network, as
/// `iptables-restore` (or, for IPv6, `ip6tables-restore`) input: the same
/// chains in both families, with that family's `multicast` range left
/// unmasqueraded.
fn masquerade_rules(subnet: impl std::fmt::Display, cluster: &str, multicast: &str) -> String {
    let masq = "-m comment --comment \"flanneld masq\"";
    let fwd = "-m comment --comment \"flanneld forward\"";
    format!(
        "*nat
:FLANNEL-POSTRTG - [0:0]
-A POSTROUTING {masq} -j FLANNEL-POSTRTG
-A FLANNEL-POSTRTG -m mark --mark {KUBE_PROXY_MARK} {masq} -j RETURN
-A FLANNEL-POSTRTG -s {subnet} -d {cluster} {masq} -j RETURN
-A FLANNEL-POSTRTG -s {cluster} -d {subnet} {masq} -j RETURN
-A FLANNEL-POSTRTG ! -s {cluster} -d {subnet} {masq} -j RETURN
-A FLANNEL-POSTRTG -s {cluster} ! -d {multicast} {masq} -j MASQUERADE --random-fully
-A FLANNEL-POSTRTG ! -s {cluster} -d {cluster} {masq} -j MASQUERADE --random-fully
COMMIT
*filter
:FLANNEL-FWD - [0:0]
-A FORWARD {fwd} -j FLANNEL-FWD
-A FLANNEL-FWD -s {cluster} {fwd} -j ACCEPT
-A FLANNEL-FWD -d {cluster} {fwd} -j ACCEPT
COMMIT
"
    )
}

/// The MAC address the kernel reports for `node`'s VXLAN device `vtep`:
/// what flanneld publishes in the node's `backend-data` (or, for
/// `flannel-v6.1`, `backend-v6-data`) annotation.
fn link_mac(node: &Node, vtep: &str) -> String {
    let out = node.ns.run(&["ip", "-j", "link", "show", vtep]);
    let links: Value = serde_json::from_str(&out).expect("ip -j link output");
    links[0]["address"]
        .as_str()
        .unwrap_or_else(|| panic!("{vtep} has a MAC address"))
        .to_string()
}

/// The kube-flannel-ds DaemonSet of flannel's own manifest (kube-flannel.yml),
/// running on all `nodes` nodes.
fn daemon_set(labels: Value, nodes: usize) -> Value {
    let image = "ghcr.io/flannel-io/flannel:v0.26.4";
    let cni_plugin_image = "ghcr.io/flannel-io/flannel-cni-plugin:v1.6.2-flannel1";
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": objects::metadata("DaemonSet", Some("kube-flannel"), "kube-flannel-ds", labels),
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "flannel"}},
            "template": {
                "metadata": {"labels": {"app": "flannel", "tier": "node"}},
                "spec": {
                    "containers": [{
                        "name": "kube-flannel",
                        "image": image,
                        "command": ["/opt/bin/flanneld"],
                        "args": ["--ip-masq", "--kube-subnet-mgr"],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
                            {"name": "EVENT_QUEUE_DEPTH", "value": "5000"}
                        ],
                        "imagePullPolicy": "IfNotPresent",
                        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                        "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}, "privileged": false},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "volumeMounts": [
                            {"mountPath": "/run/flannel", "name": "run"},
                            {"mountPath": "/etc/kube-flannel/", "name": "flannel-cfg"},
                            {"mountPath": "/run/xtables.lock", "name": "xtables-lock"}
                        ]
                    }],
                    "initContainers": [
                        {
                            "name": "install-cni-plugin",
                            "image": cni_plugin_image,
                            "command": ["cp"],
                            "args": ["-f", "/flannel", "/opt/cni/bin/flannel"],
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                            "volumeMounts": [{"mountPath": "/opt/cni/bin", "name": "cni-plugin"}]
                        },
                        {
                            "name": "install-cni",
                            "image": image,
                            "command": ["cp"],
                            "args": ["-f", "/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/10-flannel.conflist"],
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                            "volumeMounts": [
                                {"mountPath": "/etc/cni/net.d", "name": "cni"},
                                {"mountPath": "/etc/kube-flannel/", "name": "flannel-cfg"}
                            ]
                        }
                    ],
                    "dnsPolicy": "ClusterFirst",
                    "hostNetwork": true,
                    "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "serviceAccount": "flannel",
                    "serviceAccountName": "flannel",
                    "terminationGracePeriodSeconds": 30,
                    "tolerations": [{"effect": "NoSchedule", "operator": "Exists"}],
                    "volumes": [
                        {"hostPath": {"path": "/run/flannel", "type": ""}, "name": "run"},
                        {"hostPath": {"path": "/opt/cni/bin", "type": ""}, "name": "cni-plugin"},
                        {"hostPath": {"path": "/etc/cni/net.d", "type": ""}, "name": "cni"},
                        {"configMap": {"defaultMode": 420, "name": "kube-flannel-cfg"}, "name": "flannel-cfg"},
                        {"hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}, "name": "xtables-lock"}
                    ]
                }
            },
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"}
        },
        "status": objects::daemon_set_status(nodes)
    })
}
