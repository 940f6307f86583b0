//! Cilium on the real-components lab's nodes: the real cilium-agent
//! (v1.20, built by `tests/k8s/build.sh --all` from the Go module proxy) as
//! a native process in each node's namespace, its datapath compiled at run
//! time by Debian's clang, VXLAN tunnel routing, IPAM from the Node's pod
//! CIDR, and kube-proxy in iptables mode beside it
//! (`kube-proxy-replacement=false`). Pods are attached by Cilium's own CNI
//! plugin.
//!
//! Nothing of the host's own BPF state is touched. Each node has a mount
//! namespace of its own, held by a process that only sleeps, where:
//!
//! - a bpffs of the node's own is mounted on `/sys/fs/bpf` (the host's and
//!   the other nodes' bpf mounts are unmounted there), so the agent's pinned
//!   maps and programs are the node's;
//! - `/run/cilium` (the agent's socket and state) is a directory of the
//!   lab's;
//! - `/proc/sys/kernel` is read-only: the agent would set
//!   `kernel.unprivileged_bpf_disabled=1`, which no one can undo until the
//!   machine reboots, and `kernel.timer_migration`; it ignores both failures.
//!
//! The agent, its CNI plugin and collection (`--node-exec`, [`node_exec`])
//! enter that mount namespace with `nsenter`. Turned off because this
//! machine or the lab cannot give them, or does not need them: socket LB
//! (it attaches cgroup programs at the host's cgroup2 root), the L7 proxy
//! (no Envoy), Hubble, the bandwidth manager, health checking (it needs
//! `cilium-health-responder` in a namespace of its own), and tcx: Debian's
//! bpftool 7.1 does not list tcx attachments, so the agent attaches its
//! programs through the clsact qdisc, which it lists.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::{CLUSTER_CIDR, Node};
use crate::kubelet::wait_until;
use crate::lab::Lab;
use crate::real;

/// How the lab's agents route between the nodes and to their endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Tunnel routing over VXLAN: a remote pod's packet is encapsulated by
    /// the programs, the ipcache naming the node (`routing-mode: tunnel`).
    Vxlan,
    /// VXLAN, and a route per endpoint to its lxc device
    /// (`enable-endpoint-routes`): the node's stack routes a packet for a
    /// local pod, and `cil_to_container` on the lxc device's egress
    /// enforces the endpoint's ingress policy.
    VxlanEndpointRoutes,
    /// Native routing (`routing-mode: native`): the node's stack routes to
    /// another node's pods, by the routes to the peers' pod CIDRs the agent
    /// installs (`auto-direct-node-routes`; the nodes share the underlay).
    Native,
}

impl Mode {
    /// The topology's name in test output and `docs/accuracy.md`.
    pub fn topology_name(self) -> &'static str {
        match self {
            Mode::Vxlan => "cilium-vxlan (real components)",
            Mode::VxlanEndpointRoutes => "cilium-vxlan, endpoint routes (real components)",
            Mode::Native => "cilium-native (real components)",
        }
    }
}

/// The ConfigMap `kube-system/cilium-config`, as Cilium's Helm chart makes
/// it for this cluster in `mode`; the agents read the same keys from a
/// directory (`--config-dir`), as the DaemonSet mounts the ConfigMap.
pub fn config(mode: Mode) -> Value {
    let mut config = json!({
        "cluster-name": "skoop-lab",
        "cluster-id": "0",
        "kube-proxy-replacement": "false",
        "bpf-lb-sock": "false",
        "enable-l7-proxy": "false",
        "enable-hubble": "false",
        "enable-bandwidth-manager": "false",
        "enable-health-checking": "false",
        "enable-endpoint-health-checking": "false",
        "enable-tcx": "false",
        "ipam": "kubernetes",
        "k8s-require-ipv4-pod-cidr": "true",
        "enable-ipv4": "true",
        "enable-ipv6": "false",
        "enable-ipv4-masquerade": "true",
        "enable-policy": "default",
        "identity-allocation-mode": "crd",
        "devices": "eth0",
        "bpf-root": "/sys/fs/bpf",
        "state-dir": "/run/cilium/state",
    });
    if mode == Mode::Native {
        config["routing-mode"] = "native".into();
        config["ipv4-native-routing-cidr"] = CLUSTER_CIDR.into();
        config["auto-direct-node-routes"] = "true".into();
    } else {
        config["routing-mode"] = "tunnel".into();
        config["tunnel-protocol"] = "vxlan".into();
    }
    if mode == Mode::VxlanEndpointRoutes {
        config["enable-endpoint-routes"] = "true".into();
    }
    config
}

/// The objects Cilium's manifests install that skoop reads: the ConfigMap
/// and the agent's DaemonSet (no pods: the agents run as the lab's own
/// processes).
pub fn objects(mode: Mode) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cilium-config", "namespace": "kube-system"},
            "data": config(mode),
        }),
        json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "cilium", "namespace": "kube-system",
                         "labels": {"k8s-app": "cilium"}},
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "cilium"}},
                "template": {
                    "metadata": {"labels": {"k8s-app": "cilium"}},
                    "spec": {"containers": [{"name": "cilium-agent",
                                             "image": "quay.io/cilium/cilium:v1.20.2"}]},
                },
            },
        }),
    ]
}

/// The CRDs the agent needs (v2 and v2alpha1), as the operator registers
/// them.
pub fn crds(bin: &Path) -> Vec<Value> {
    let mut files = Vec::new();
    for version in ["v2", "v2alpha1"] {
        let dir = bin.join("cilium-crds").join(version);
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
            let path = entry.expect("an entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    real::yaml_objects(files)
}

/// The node's mount namespace, entered by path: a link to its holder's
/// `/proc/PID/ns/mnt` (no mount on the host).
fn mount_namespace(dir: &Path) -> PathBuf {
    dir.join("mnt")
}

/// PATH inside the node: LLVM first, for the agent's compiler (`clang` and
/// `llc`), then the system's tools, then the built components (cilium-dbg
/// for collection; never before the system's: the CNI plugins' directory
/// has a `bridge` of its own).
fn path(bin: &Path) -> String {
    format!(
        "{LLVM}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:{}",
        bin.display()
    )
}

/// Where Debian's clang-19 and llc-19 are (the agent compiles its datapath
/// with `clang` and `llc` from PATH).
const LLVM: &str = "/usr/lib/llvm-19/bin";

/// The words that run a command, inside `node`'s network namespace, in its
/// agent's mount namespace with the lab's PATH.
fn in_mount(dir: &Path, bin: &Path) -> Vec<String> {
    vec![
        "nsenter".into(),
        format!("--mount={}", mount_namespace(dir).display()),
        "env".into(),
        format!("PATH={}", path(bin)),
    ]
}

/// `skoop collect --node-exec`'s template for the Cilium nodes, whose state
/// directories are `state/NODE`: the node's network namespace and its
/// agent's mount namespace (so that bpftool and cilium-dbg see its bpffs).
pub fn node_exec(prefix: &str, state: &Path, bin: &Path) -> String {
    format!(
        "nsenter --net=/run/netns/{prefix}-{{node}} --mount={}/{{node}}/mnt env PATH={}",
        state.display(),
        path(bin)
    )
}

/// Sets up `node`'s mount namespace and starts its agent; returns the
/// agent's pid.
pub fn start_agent(
    lab: &mut Lab,
    mode: Mode,
    node: &Node,
    dir: &Path,
    bin: &Path,
    kubeconfig: &Path,
) -> u32 {
    let run_cilium = dir.join("run-cilium");
    let config_dir = dir.join("cilium-config");
    fs::create_dir_all(&run_cilium).expect("the node's /run/cilium");
    fs::create_dir_all(&config_dir).expect("the agent's configuration directory");
    if let Value::Object(options) = config(mode) {
        for (key, value) in options {
            fs::write(config_dir.join(&key), value.as_str().unwrap_or_default())
                .expect("write an option");
        }
    }
    let ready = dir.join("mount-namespace-ready");
    let script = r#"set -e
mount -t bpf skoop-lab-bpffs /sys/fs/bpf
for m in $(awk '$3 == "bpf" && $2 != "/sys/fs/bpf" { print $2 }' /proc/self/mounts); do umount -l "$m"; done
mkdir -p /run/cilium
mount --bind "$1" /run/cilium
mount --bind /proc/sys/kernel /proc/sys/kernel
mount -o remount,bind,ro /proc/sys/kernel
touch "$2"
exec sleep infinity"#;
    let holder = lab.spawn_logged(
        Some(&node.ns),
        &[
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            run_cilium.to_str().expect("a UTF-8 path"),
            ready.to_str().expect("a UTF-8 path"),
        ],
        &[],
        &dir.join("mount-namespace.log"),
    );
    wait_until(
        Duration::from_secs(10),
        || ready.exists(),
        || format!("the mount namespace of {} was not set up", node.name),
        &dir.join("mount-namespace.log"),
    );
    std::os::unix::fs::symlink(format!("/proc/{holder}/ns/mnt"), mount_namespace(dir))
        .expect("link the node's mount namespace");

    let mut argv = in_mount(dir, bin);
    argv.extend([
        bin.join("cilium-agent").display().to_string(),
        format!("--config-dir={}", config_dir.display()),
        format!("--k8s-kubeconfig-path={}", kubeconfig.display()),
        format!("--lib-dir={}", bin.join("cilium-lib").display()),
    ]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let log = dir.join("cilium-agent.log");
    let pid = lab.spawn_logged(
        Some(&node.ns),
        &argv,
        &[
            ("K8S_NODE_NAME", &node.name),
            ("CILIUM_K8S_NODE_NAME", &node.name),
        ],
        &log,
    );
    wait_until(
        Duration::from_secs(120),
        || {
            fs::read_to_string(&log)
                .is_ok_and(|text| text.contains("Daemon initialization completed"))
        },
        || format!("cilium-agent on {} did not start", node.name),
        &log,
    );
    pid
}

/// Runs `argv` inside `node` as the agent sees it; its stdout.
pub fn run(node: &Node, dir: &Path, bin: &Path, argv: &[&str]) -> String {
    let words = in_mount(dir, bin);
    let words: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .chain(argv.iter().copied())
        .collect();
    node.ns.run(&words)
}

/// Cilium's CNI configuration, as the agent writes it for a container
/// runtime.
pub fn cni_conf() -> String {
    json!({"cniVersion": "0.3.1", "name": "cilium", "type": "cilium-cni"}).to_string()
}

/// The CNI plugin's command line, entering the node as the agent sees it
/// (the plugin talks to the agent's socket in `/run/cilium`).
pub fn cni_command(node: &Node, dir: &Path, bin: &Path) -> Vec<String> {
    let mut words = vec![
        "ip".into(),
        "netns".into(),
        "exec".into(),
        node.ns.name.clone(),
    ];
    words.extend(in_mount(dir, bin));
    words.push(bin.join("cni/cilium-cni").display().to_string());
    words
}

/// Waits until the agent of `node` has every endpoint ready and its
/// ipcache knows every address of `pods` (its own and the other nodes').
pub fn wait_programmed(node: &Node, dir: &Path, bin: &Path, pods: &[String]) {
    let log = dir.join("cilium-agent.log");
    wait_until(
        Duration::from_secs(120),
        || {
            let endpoints = run(
                node,
                dir,
                bin,
                &["cilium-dbg", "endpoint", "list", "-o", "json"],
            );
            let endpoints: Value = serde_json::from_str(&endpoints).unwrap_or_default();
            let all_ready = endpoints.as_array().is_some_and(|list| {
                list.iter()
                    .all(|e| e["status"]["state"].as_str() == Some("ready"))
            });
            let ipcache = run(
                node,
                dir,
                bin,
                &["cilium-dbg", "bpf", "ipcache", "list", "-o", "json"],
            );
            all_ready
                && pods
                    .iter()
                    .all(|ip| ipcache.contains(&format!("\"{ip}/32\"")))
        },
        || {
            format!(
                "cilium-agent on {} has not programmed every endpoint and pod address {pods:?}",
                node.name,
            )
        },
        &log,
    );
}

/// The policy maps of `node`'s endpoints, by endpoint id.
pub fn policy_maps(node: &Node, dir: &Path, bin: &Path) -> Vec<(String, Value)> {
    let text = run(
        node,
        dir,
        bin,
        &["cilium-dbg", "bpf", "policy", "get", "--all", "-o", "json"],
    );
    let maps: Value = serde_json::from_str(&text).unwrap_or_default();
    maps.as_array()
        .map(|maps| {
            maps.iter()
                .map(|m| {
                    (
                        m["EndpointID"].as_str().unwrap_or_default().to_string(),
                        m["Content"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until the agent of `node` has rewritten an endpoint's policy map
/// since `before` (a policy it was given is in its maps), then a little
/// more for the other endpoints it selects.
pub fn wait_policy(node: &Node, dir: &Path, bin: &Path, before: &[(String, Value)]) {
    // A policy that changes what an endpoint enforces regenerates it: its
    // programs are compiled again, which takes a while on a busy machine.
    wait_until(
        Duration::from_secs(240),
        || {
            let now = policy_maps(node, dir, bin);
            now.iter().any(|entry| !before.contains(entry))
        },
        || {
            format!(
                "the policy maps of {} did not change:\n{:#?}\n",
                node.name,
                policy_maps(node, dir, bin),
            )
        },
        &dir.join("cilium-agent.log"),
    );
    std::thread::sleep(Duration::from_secs(3));
}
