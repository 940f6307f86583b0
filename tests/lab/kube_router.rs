//! kube-router on the real-components lab's nodes: the real kube-router
//! (v2.1.0, built by `tests/k8s/build.sh --all` from the Go module proxy)
//! as a native process in each node's namespace, with its route controller
//! (BGP between the nodes, each node's pod CIDR routed via its address, the
//! `kube-bridge` bridge) and its NetworkPolicy firewall (`KUBE-ROUTER-*`,
//! `KUBE-POD-FW-*`, `KUBE-NWPLCY-*` chains and ipsets), and kube-proxy in
//! iptables mode for the Services (`--run-service-proxy=false`). Pods are
//! attached by the bridge and host-local plugins with the configuration
//! kube-router writes: its `cni-conf.json`, into which it inserts the node's
//! pod CIDR and the MTU.
//!
//! kube-router listens where its DaemonSet's pod would, in the node's own
//! namespace: BGP on the node's address (port 179) and GoBGP's gRPC on the
//! node's address and loopback (50051), both inside the lab's namespaces;
//! its health port is turned off.

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use crate::cluster::Node;
use crate::lab::Lab;

/// The release `tests/k8s/kube-router/go.mod` builds.
const VERSION: &str = "v2.1.0";

/// kube-router's `cni-conf.json` as its DaemonSet manifests hold it
/// (`daemonset/kubeadm-kuberouter.yaml`): the bridge plugin on `kube-bridge`
/// as the pods' default gateway, with host-local IPAM whose range
/// kube-router fills in.
fn cni_conf_list() -> Value {
    json!({
        "cniVersion": "0.3.0",
        "name": "mynet",
        "plugins": [{
            "name": "kubernetes",
            "type": "bridge",
            "bridge": "kube-bridge",
            "isDefaultGateway": true,
            "ipam": {"type": "host-local"},
        }],
    })
}

/// The objects kube-router's manifests install that skoop reads: the
/// ConfigMap with its CNI configuration and its DaemonSet (no pods: the
/// lab runs kube-router itself), with the arguments the lab gives it.
pub fn objects() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kube-router-cfg", "namespace": "kube-system",
                         "labels": {"tier": "node", "k8s-app": "kube-router"}},
            "data": {"cni-conf.json": cni_conf_list().to_string()},
        }),
        json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "kube-router", "namespace": "kube-system",
                         "labels": {"k8s-app": "kube-router", "tier": "node"}},
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "kube-router", "tier": "node"}},
                "template": {
                    "metadata": {"labels": {"k8s-app": "kube-router", "tier": "node"}},
                    "spec": {"containers": [{
                        "name": "kube-router",
                        "image": format!("docker.io/cloudnativelabs/kube-router:{VERSION}"),
                        "args": args(),
                    }]},
                },
            },
        }),
    ]
}

/// kube-router's arguments in the manifest, besides the kubeconfig and the
/// node's name: routes and the firewall, Services left to kube-proxy.
fn args() -> Vec<&'static str> {
    vec![
        "--run-router=true",
        "--run-firewall=true",
        "--run-service-proxy=false",
        "--bgp-graceful-restart=true",
    ]
}

/// The node's CNI configuration file, which kube-router rewrites.
fn conf_file(dir: &Path) -> std::path::PathBuf {
    dir.join("10-kuberouter.conflist")
}

/// Starts kube-router in `node`'s namespace, as its DaemonSet runs it,
/// after writing the ConfigMap's `cni-conf.json` where its install-cni
/// container copies it (here the node's directory, named to kube-router
/// by `KUBE_ROUTER_CNI_CONF_FILE`); returns its pid.
pub fn start(lab: &mut Lab, node: &Node, dir: &Path, bin: &Path, kubeconfig: &Path) -> u32 {
    let conf = conf_file(dir);
    fs::write(&conf, cni_conf_list().to_string()).expect("write the CNI configuration");
    let mut argv = vec![
        // kube-router refreshes its ipsets of the nodes' pod CIDRs and
        // addresses (which its pod egress rule masquerades by) every
        // period, 5 minutes by default: until then a node masquerades its
        // pods' traffic to the pods of a node added after it started. The
        // lab's cases start once every node knows every other.
        "--routes-sync-period=5s",
    ];
    argv.extend(args());
    let env = [(
        "KUBE_ROUTER_CNI_CONF_FILE",
        conf.to_str().expect("a UTF-8 path"),
    )];
    spawn(lab, node, dir, (bin, kubeconfig), &argv, &env)
}

/// kube-router in `node`'s namespace as `kubeconfig`'s client, named as the
/// node, with `args` and `env` besides; its log in `dir`. Returns its pid.
fn spawn(
    lab: &mut Lab,
    node: &Node,
    dir: &Path,
    (bin, kubeconfig): (&Path, &Path),
    args: &[&str],
    env: &[(&str, &str)],
) -> u32 {
    let program = bin.join("kube-router");
    let kubeconfig = format!("--kubeconfig={}", kubeconfig.display());
    let hostname = format!("--hostname-override={}", node.name);
    let mut argv = vec![
        program.to_str().expect("a UTF-8 path"),
        &kubeconfig,
        &hostname,
        // Nothing listens outside the node's namespace; no health server.
        "--health-port=0",
    ];
    argv.extend_from_slice(args);
    lab.spawn_logged(Some(&node.ns), &argv, env, &dir.join("kube-router.log"))
}

/// The configuration a container runtime gives the bridge plugin for a
/// pod on the node: the conflist's bridge plugin once kube-router has put
/// the node's pod CIDR in, with the conflist's name and version (as a
/// runtime passes them), and host-local's state in the node's directory
/// instead of `/var/lib/cni`. `None` until kube-router has written the range.
pub fn cni_conf(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(conf_file(dir)).ok()?;
    let list: Value = serde_json::from_str(&text).ok()?;
    let mut plugin = list["plugins"][0].clone();
    plugin["ipam"].get("ranges")?;
    plugin["cniVersion"] = list["cniVersion"].clone();
    plugin["name"] = list["name"].clone();
    plugin["ipam"]["dataDir"] = dir.join("ipam").to_str().expect("a UTF-8 path").into();
    Some(plugin.to_string())
}

/// Starts kube-router as k3s embeds it: its NetworkPolicy controller only
/// (`--run-router=false --run-firewall=true --run-service-proxy=false`,
/// k3s's `pkg/agent/netpol`), told the Services' network (k3s's
/// `--service-cidr`); no BGP, no bridge, no CNI configuration, no pod egress
/// masquerade: flannel does the networking. Returns its pid.
pub fn start_firewall(
    lab: &mut Lab,
    node: &Node,
    dir: &Path,
    bin: &Path,
    kubeconfig: &Path,
    service_cidr: &str,
) -> u32 {
    let services = format!("--service-cluster-ip-range={service_cidr}");
    let argv = [
        "--run-router=false",
        "--run-firewall=true",
        "--run-service-proxy=false",
        &services,
    ];
    spawn(lab, node, dir, (bin, kubeconfig), &argv, &[])
}
