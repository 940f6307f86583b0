//! Real node agents for the real-components lab (issue 31): in each node's
//! network namespace, containerd (with runc) and a kubelet, as a kind node
//! runs them, registered against the lab's kube-apiserver. Pods are then
//! created through the API server only: the kubelet starts them and calls
//! the CNI plugin, and `pods/exec` goes through its streaming server.
//!
//! Each node's agents have their own state, sockets and configuration in
//! the node's directory; a `cgroupRoot` of their own in every cgroup v1
//! hierarchy (`/<lab prefix>-<node>`, [`Lab::cgroup_root`], whose processes
//! the lab kills and whose groups it removes at cleanup); and a mount
//! namespace of their own (the one `ip netns exec` makes), in which the
//! host's cgroup hierarchies are mounted again (`ip netns exec` mounts a
//! fresh `/sys` without them) and `/run` is a private tmpfs, so that
//! containerd's shim sockets and the pods' namespace pins never reach the
//! host's `/run`.
//!
//! The API server (on the host's loopback) reaches a kubelet through its
//! egress selector: HTTP CONNECT over a Unix socket to an [`EgressProxy`]
//! that connects from the lab's underlay namespace, and only to a node's
//! address. A kubelet reaches the API server through the node's
//! [`crate::real::Forwarder`].

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::Node;
use crate::lab::{Lab, Netns};
use crate::real::AcceptLoop;

/// How long containerd and the kubelet may take to come up.
const START: Duration = Duration::from_secs(60);
/// The kubelet's port on its node's address, as on any node.
pub const KUBELET_PORT: u16 = 10250;

/// Mounts what the agents need in the mount namespace `ip netns exec` gave
/// them, then runs the command (after the first argument, a directory):
/// the host's cgroup hierarchies as PID 1's mount table lists them, a
/// private `/run`, and, over the kernel tunables a kubelet insists on
/// (`setupKernelTunables`: they are the host's, not a namespace's), files
/// of that directory holding the values it wants, so that it never writes
/// the host's.
const AGENT_MOUNTS: &str = r#"set -e
tunables=$1; shift
for setting in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
    kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
    key=${setting%=*}
    file=$tunables/$(printf %s "$key" | tr / .)
    printf '%s\n' "${setting#*=}" >"$file"
    mount --bind "$file" "/proc/sys/$key"
done
mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
while read -r _ target type options _; do
    case $type in
    cgroup | cgroup2) mkdir -p "$target"; mount -t "$type" -o "$options" "$type" "$target" ;;
    esac
done </proc/1/mounts
mount -t tmpfs -o mode=755 run /run
exec "$@""#;

/// The kube-apiserver flags that send its connections to kubelets through
/// an [`EgressProxy`] listening on `state/egress.sock` (the egress
/// selector's configuration is written into `state`), authenticated with
/// the administrator's client certificate (in the launcher's `dir`), to
/// each node's InternalIP (never a name to look up).
pub fn apiserver_flags(dir: &Path, state: &Path) -> Vec<String> {
    let config = state.join("egress-selector.yaml");
    let text = format!(
        "apiVersion: apiserver.k8s.io/v1beta1\n\
         kind: EgressSelectorConfiguration\n\
         egressSelections:\n\
         - name: cluster\n  \
           connection:\n    \
             proxyProtocol: HTTPConnect\n    \
             transport:\n      \
               uds:\n        \
                 udsName: {}\n",
        state.join("egress.sock").display()
    );
    fs::write(&config, text).expect("write the egress selector configuration");
    vec![
        format!("--egress-selector-config-file={}", config.display()),
        "--kubelet-preferred-address-types=InternalIP".into(),
        format!(
            "--kubelet-client-certificate={}",
            dir.join("admin.crt").display()
        ),
        format!("--kubelet-client-key={}", dir.join("admin.key").display()),
    ]
}

/// containerd's configuration for one node: its own root, state and
/// sockets; CNI from the lab's plugins and the node's `net.d`; runc
/// without the systemd cgroup driver; the sandbox image the lab imports
/// and every registry sent to a closed port on the node's loopback (a
/// pull fails at once and never leaves the node, nor asks the host's
/// resolver); and `restrict_oom_score_adj`, since this
/// machine withholds `CAP_SYS_RESOURCE` and runc could not lower a
/// sandbox's OOM score.
fn containerd_config(dir: &Path, bin: &Path, pause: &str) -> String {
    let d = |name: &str| dir.join(name).display().to_string();
    format!(
        r#"version = 3
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.snapshotter.v1.blockfile"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '{runc}'
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['{cni}']
    conf_dir = '{net_d}'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '{registries}'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{pause}'
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
"#,
        root = d("containerd/root"),
        state = d("containerd/state"),
        socket = d("containerd.sock"),
        runc = bin.join("runc").display(),
        cni = bin.join("cni").display(),
        net_d = d("net.d"),
        registries = d("certs.d"),
    )
}

/// containerd's hosts configuration for every registry (`_default`): the
/// discard port of the node's loopback, where nothing listens.
const NO_REGISTRY: &str = r#"server = "http://127.0.0.1:9"
[host."http://127.0.0.1:9"]
  capabilities = ["pull", "resolve"]
"#;

/// The kubelet's configuration for `node`: cgroup v1 allowed
/// (`failCgroupV1: false`; v1.35 made refusing it the default), the
/// cgroupfs driver under the lab's `cgroup_root`, its ports on the node's
/// address and loopback, client certificates of the cluster's CA accepted
/// and authorised by the API server (`Webhook`), the kernel's tunables
/// left alone (`protectKernelDefaults`: the kubelet fails rather than
/// change them, where `AGENT_MOUNTS` did not give it its own), no DNS (`resolvConf: ""`:
/// nothing in a pod may ask the host's resolver), and no eviction or image
/// garbage collection (the lab's disk is the host's).
fn kubelet_config(node: &Node, dir: &Path, cgroup_root: &str, ca: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
containerRuntimeEndpoint: unix://{socket}
address: {address}
port: {KUBELET_PORT}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
failSwapOn: false
protectKernelDefaults: true
podLogsDir: {logs}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: Webhook}}
resolvConf: ""
evictionHard: {{}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
makeIPTablesUtilChains: false
"#,
        socket = dir.join("containerd.sock").display(),
        address = node.ip,
        logs = dir.join("pod-logs").display(),
        ca = ca.display(),
    )
}

/// The image a `ctr images import` of `archive` names: its index's
/// `io.containerd.image.name` annotation (`deploy/collector/oci-archive.sh`).
pub fn image_name(archive: &Path) -> String {
    let output = Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg("./index.json")
        .output()
        .expect("run tar");
    assert!(
        output.status.success(),
        "read index.json of {}",
        archive.display()
    );
    let index: serde_json::Value = serde_json::from_slice(&output.stdout).expect("an OCI index");
    index["manifests"][0]["annotations"]["io.containerd.image.name"]
        .as_str()
        .unwrap_or_else(|| panic!("{} names no image", archive.display()))
        .to_string()
}

/// Starts containerd and the kubelet in `node`'s namespace, with their
/// state in `dir`, imports the pause and collector images into containerd
/// and returns once the kubelet runs; the kubelet then registers the Node
/// itself, with a credential of its own (`node_kubeconfig`). `kubeconfig`
/// is the administrator's, `ca` the cluster's CA (its key beside it).
/// Returns the kubelet's `cgroupRoot`, where its pods' control groups are.
pub fn start_node_agents(
    lab: &mut Lab,
    node: &Node,
    dir: &Path,
    bin: &Path,
    kubeconfig: &Path,
    ca: &Path,
) -> String {
    for sub in [
        "containerd",
        "kubelet",
        "pod-logs",
        "net.d",
        "tunables",
        "certs.d/_default",
    ] {
        fs::create_dir_all(dir.join(sub)).expect("the node agents' directories");
    }
    fs::write(dir.join("certs.d/_default/hosts.toml"), NO_REGISTRY).expect("write hosts.toml");
    let pause = bin.join("images/pause.tar");
    let config = dir.join("containerd.toml");
    fs::write(&config, containerd_config(dir, bin, &image_name(&pause)))
        .expect("write containerd.toml");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let containerd = bin.join("containerd");
    let containerd = lab.spawn_logged(
        Some(&node.ns),
        &[
            "sh",
            "-c",
            AGENT_MOUNTS,
            "sh",
            dir.join("tunables").to_str().expect("a UTF-8 path"),
            containerd.to_str().expect("a UTF-8 path"),
            "--config",
            config.to_str().expect("a UTF-8 path"),
        ],
        &[("PATH", &path)],
        &dir.join("containerd.log"),
    );
    let socket = dir.join("containerd.sock");
    wait_until(
        START,
        || socket.exists(),
        || format!("containerd on {} made no socket", node.name),
        &dir.join("containerd.log"),
    );
    for image in ["pause", "collector"] {
        let archive = bin.join(format!("images/{image}.tar"));
        let output = Command::new(bin.join("ctr"))
            .arg("--address")
            .arg(&socket)
            .args(["-n", "k8s.io", "images", "import"])
            .arg(&archive)
            .output()
            .expect("run ctr");
        assert!(
            output.status.success(),
            "ctr images import {} on {}: {}",
            archive.display(),
            node.name,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let cgroup_root = lab.cgroup_root(&node.name);
    let kubelet_config_file = dir.join("kubelet.yaml");
    fs::write(
        &kubelet_config_file,
        kubelet_config(node, dir, &cgroup_root, ca),
    )
    .expect("write kubelet.yaml");
    lab.spawn_logged(
        None,
        &[
            "nsenter",
            &format!("--target={containerd}"),
            "--mount",
            "--net",
            bin.join("kubelet").to_str().expect("a UTF-8 path"),
            &format!("--config={}", kubelet_config_file.display()),
            &format!(
                "--kubeconfig={}",
                node_kubeconfig(node, dir, kubeconfig, ca).display()
            ),
            &format!("--root-dir={}", dir.join("kubelet").display()),
            &format!("--hostname-override={}", node.name),
            &format!("--node-ip={}", node.ip),
        ],
        &[],
        &dir.join("kubelet.log"),
    );
    cgroup_root
}

/// A kubeconfig for `node`'s kubelet, as a kubelet's bootstrap would leave
/// it: the administrator's cluster, and a client certificate of the
/// cluster's CA for `system:node:<node>` in group `system:nodes`, which the
/// API server's Node authorizer confines to what that node's kubelet may
/// do (openssl, ECDSA P-256, one day).
fn node_kubeconfig(node: &Node, dir: &Path, admin: &Path, ca: &Path) -> PathBuf {
    let (key, csr, crt) = (
        dir.join("node.key"),
        dir.join("node.csr"),
        dir.join("node.crt"),
    );
    let ca_key = ca.with_file_name("ca.key");
    let subject = format!("/O=system:nodes/CN=system:node:{}", node.name);
    let steps: [Vec<&std::ffi::OsStr>; 3] = [
        vec![
            "ecparam".as_ref(),
            "-name".as_ref(),
            "prime256v1".as_ref(),
            "-genkey".as_ref(),
            "-noout".as_ref(),
            "-out".as_ref(),
            key.as_os_str(),
        ],
        vec![
            "req".as_ref(),
            "-new".as_ref(),
            "-key".as_ref(),
            key.as_os_str(),
            "-subj".as_ref(),
            subject.as_ref(),
            "-out".as_ref(),
            csr.as_os_str(),
        ],
        vec![
            "x509".as_ref(),
            "-req".as_ref(),
            "-in".as_ref(),
            csr.as_os_str(),
            "-CA".as_ref(),
            ca.as_os_str(),
            "-CAkey".as_ref(),
            ca_key.as_os_str(),
            "-set_serial".as_ref(),
            "1".as_ref(),
            "-days".as_ref(),
            "1".as_ref(),
            "-out".as_ref(),
            crt.as_os_str(),
        ],
    ];
    for args in steps {
        let output = Command::new("openssl")
            .args(&args)
            .output()
            .expect("run openssl");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let text = fs::read_to_string(admin).expect("read the administrator's kubeconfig");
    let mut config: serde_json::Value = serde_saphyr::from_str(&text).expect("a kubeconfig");
    config["users"][0]["name"] = format!("system:node:{}", node.name).into();
    config["users"][0]["user"] = serde_json::json!({
        "client-certificate": crt, "client-key": key,
    });
    config["contexts"][0]["context"]["user"] = format!("system:node:{}", node.name).into();
    let path = dir.join("kubelet.kubeconfig");
    fs::write(&path, config.to_string()).expect("write the kubelet's kubeconfig");
    path
}

/// Waits until `ready`, failing with `what` and the tail of `log`.
pub fn wait_until(
    timeout: Duration,
    ready: impl Fn() -> bool,
    what: impl Fn() -> String,
    log: &Path,
) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < timeout,
            "{} in {timeout:?}; last lines of {}:\n{}",
            what(),
            log.display(),
            crate::real::tail(log)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The process ids in the control groups of the pod `uid` under a
/// kubelet's `cgroup_root` (the v1 `pids` hierarchy, cgroupfs layout:
/// `ROOT/kubepods[/QOS]/pod<UID>/<container>`).
pub fn pod_pids(cgroup_root: &str, uid: &str) -> Vec<u32> {
    let kubepods = Path::new("/sys/fs/cgroup/pids")
        .join(cgroup_root.trim_start_matches('/'))
        .join("kubepods");
    let pod = format!("pod{uid}");
    let candidates = [
        kubepods.join(&pod),
        kubepods.join("burstable").join(&pod),
        kubepods.join("besteffort").join(&pod),
    ];
    let mut pids = Vec::new();
    for dir in candidates.iter().filter(|d| d.is_dir()) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            if let Ok(procs) = fs::read_to_string(entry.path().join("cgroup.procs")) {
                pids.extend(
                    procs
                        .split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    pids
}

/// An HTTP CONNECT proxy on a Unix socket, for kube-apiserver's egress
/// selector: each tunnel is connected from the `from` namespace (the lab's
/// underlay), and only to an address of `allowed` on the kubelet's port;
/// anything else is answered 403.
pub struct EgressProxy {
    /// Held for its `Drop`, which stops the loop.
    _accepting: AcceptLoop,
}

impl EgressProxy {
    pub fn start(socket: &Path, from: &Netns, allowed: Vec<Ipv4Addr>) -> EgressProxy {
        let listener = UnixListener::bind(socket)
            .unwrap_or_else(|e| panic!("listen on {}: {e}", socket.display()));
        listener.set_nonblocking(true).expect("non-blocking");
        let netns = PathBuf::from(format!("/run/netns/{}", from.name));
        let allowed = Arc::new(allowed);
        let accepting = AcceptLoop::spawn(
            move || listener.accept().map(|(client, _)| client),
            move |client: UnixStream| {
                let _ = client.set_nonblocking(false);
                let (netns, allowed) = (netns.clone(), allowed.clone());
                std::thread::spawn(move || tunnel(client, &netns, &allowed));
            },
        );
        EgressProxy {
            _accepting: accepting,
        }
    }
}

/// One CONNECT: reads the request's head, connects from `netns` (this
/// thread enters it; the socket stays there) and splices.
fn tunnel(client: UnixStream, netns: &Path, allowed: &[Ipv4Addr]) {
    let mut reader = BufReader::new(client.try_clone().expect("clone"));
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let mut client = client;
    let target = request
        .strip_prefix("CONNECT ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|target| target.parse::<SocketAddr>().ok())
        .filter(|target| {
            target.port() == KUBELET_PORT
                && matches!(target.ip(), IpAddr::V4(ip) if allowed.contains(&ip))
        });
    let Some(target) = target else {
        let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n");
        return;
    };
    let file = fs::File::open(netns).expect("open the underlay's namespace");
    // SAFETY: setns changes only this thread's network namespace; the
    // thread serves this one tunnel.
    let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if entered != 0 {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
        return;
    }
    let Ok(upstream) = TcpStream::connect_timeout(&target, Duration::from_secs(5)) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    // Whatever the reader buffered past the head belongs to the tunnel.
    let buffered = reader.buffer().to_vec();
    let mut to_upstream = upstream.try_clone().expect("clone");
    if !buffered.is_empty() && to_upstream.write_all(&buffered).is_err() {
        return;
    }
    let mut from_client = client.try_clone().expect("clone");
    let copy_up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_upstream);
        let _ = to_upstream.shutdown(std::net::Shutdown::Write);
    });
    let mut from_upstream = upstream;
    let _ = std::io::copy(&mut from_upstream, &mut client);
    let _ = client.shutdown(std::net::Shutdown::Write);
    let _ = copy_up.join();
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;
    use std::process::{Command, Output};

    use kube::api::{Api, ListParams};
    use serde_json::Value;

    use crate::apiserver::block_on;
    use crate::cluster::Pod;
    use crate::lab::{Availability, Lab, availability};
    use crate::live;
    use crate::real::{RealCluster, RealCni};

    /// `skoop diagnose ... -o json` with `source` (`--kubeconfig K
    /// --save-snapshot DIR` live, or `--snapshot DIR`): the report, and the
    /// exit status.
    fn diagnose(source: &[&str], from: &str, to: &str) -> (Value, Output) {
        let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
            .arg("diagnose")
            .args(source)
            .args([
                "--from",
                from,
                "--to",
                to,
                "--protocol",
                "tcp",
                "-o",
                "json",
            ])
            .output()
            .expect("run skoop");
        let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "skoop diagnose {source:?} {from} -> {to}: no JSON report ({e}); status {}, stderr:\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (report, output)
    }

    /// `--from` and `--to` of a flow from `from` to `to`'s port 8080.
    fn flow(from: &Pod, to: &Pod) -> (String, String) {
        (
            format!("{}/{}", from.namespace, from.name),
            format!("{}/{}:8080", to.namespace, to.name),
        )
    }

    /// A live diagnosis as deploy/rbac.yaml's ServiceAccount, its snapshot
    /// saved in `saved`; checks that the collector pods collected both
    /// pods' namespaces (found by UID in the kubelet's cgroups) and that
    /// the saved snapshot gives the same report offline.
    fn diagnose_live(kubeconfig: &str, saved: &Path, from: &Pod, to: &Pod) -> (Value, Output) {
        let (from_name, to_name) = flow(from, to);
        let saved_arg = saved.to_str().expect("a UTF-8 path");
        let live = ["--kubeconfig", kubeconfig, "--save-snapshot", saved_arg];
        let (report, output) = diagnose(&live, &from_name, &to_name);
        for pod in [from, to] {
            let dump = saved.join(format!(
                "nodes/{}/pods/{}/{}/ip-addr.json",
                pod_node(pod),
                pod.namespace,
                pod.name
            ));
            let addresses = fs::read_to_string(&dump).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; skoop said:\n{}",
                    dump.display(),
                    String::from_utf8_lossy(&output.stderr)
                )
            });
            assert!(
                addresses.contains(&format!("\"{}\"", pod.ip())),
                "{}: {addresses}",
                dump.display()
            );
        }
        let (offline, replayed) = diagnose(&["--snapshot", saved_arg], &from_name, &to_name);
        assert_eq!(offline, report, "the saved snapshot, diagnosed offline");
        assert!(
            replayed.stdout == output.stdout,
            "the saved snapshot's report is not byte for byte the live one"
        );
        (report, output)
    }

    /// `skoop diagnose --confirm` live as `kubeconfig`: the flow, sent from
    /// `from`'s namespace through its node's collector pod, must agree with
    /// the model and with `kernel` (whether the lab's own connect worked).
    fn confirm_live(kubeconfig: &str, from: &Pod, to: &Pod, kernel: bool, case: &str) {
        let (from, to) = flow(from, to);
        let args = [
            "--kubeconfig",
            kubeconfig,
            "--from",
            &from,
            "--to",
            &to,
            "--protocol",
            "tcp",
            "--confirm",
        ]
        .map(String::from);
        crate::confirm::assert_agrees(&args, Some(kernel), false, case);
    }

    /// `skoop diagnose --confirm --drop-reasons` live: the drops the
    /// kernel traced through the collector pods, as `(reason, function)`.
    fn traced_drops(kubeconfig: &str, from: &Pod, to: &Pod) -> Vec<(String, String)> {
        let (from, to) = flow(from, to);
        let live = ["--kubeconfig", kubeconfig, "--confirm", "--drop-reasons"];
        let (report, _) = diagnose(&live, &from, &to);
        let confirmation = &report["confirmation"];
        let drops = confirmation["drops"].as_array().unwrap_or_else(|| {
            panic!("no kernel was traced through the collector pods: {confirmation:#}")
        });
        drops
            .iter()
            .map(|drop| {
                let field = |name: &str| drop[name].as_str().unwrap_or_default().to_string();
                (field("reason"), field("function"))
            })
            .collect()
    }

    /// The node a lab pod's namespace is named after (`<prefix>-node-N-web-M`).
    fn pod_node(pod: &Pod) -> String {
        let role = pod
            .ns
            .name
            .splitn(3, '-')
            .nth(2)
            .expect("a lab namespace name");
        role.strip_suffix(&format!("-{}", pod.name))
            .expect("named after its node")
            .to_string()
    }

    /// The collector pods anywhere, with their phases.
    fn collector_pods(real: &RealCluster) -> Vec<(String, String)> {
        block_on(async {
            let client = real.server.admin().await;
            let api: Api<k8s_openapi::api::core::v1::Pod> = Api::all(client);
            let params = ListParams::default().labels("app.kubernetes.io/managed-by=skoop");
            api.list(&params)
                .await
                .expect("list pods")
                .items
                .into_iter()
                .map(|p| {
                    let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
                    (p.metadata.name.unwrap_or_default(), phase)
                })
                .collect()
        })
    }

    /// `skoop collect cluster --kubeconfig K --out OUT ARGS...`, started.
    fn collect_cluster(kubeconfig: &str, out: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skoop"));
        command
            .args(["collect", "cluster", "--kubeconfig", kubeconfig, "--out"])
            .arg(out)
            .args(args);
        command
    }

    /// What users meet on the real stack: a collector image no node has
    /// and no registry serves is named, with the node, from the kubelet's
    /// ErrImagePull; and SIGINT while the collector pods run and commands
    /// are exec'd in them leaves no collector pod.
    fn missing_image_and_interrupted_collection(real: &RealCluster, kubeconfig: &str, dir: &Path) {
        let image = "skoop.io/no-such-collector:0";
        let output = collect_cluster(
            kubeconfig,
            &dir.join("missing-image"),
            &[
                "--nodes",
                "node-1",
                "--collector-image",
                image,
                "--collector-timeout",
                "20",
            ],
        )
        .output()
        .expect("run skoop");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("not Running on node node-1")
                && stderr.contains(image)
                && (stderr.contains("ErrImagePull") || stderr.contains("ImagePullBackOff")),
            "{stderr}"
        );
        assert_eq!(collector_pods(real), Vec::new());

        let mut child = collect_cluster(kubeconfig, &dir.join("interrupted"), &["--all-nodes"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start skoop");
        let started = std::time::Instant::now();
        while !collector_pods(real)
            .iter()
            .any(|(_, phase)| phase == "Running")
        {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "no collector pod ran: {:?}",
                collector_pods(real)
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let status = child.wait().expect("wait for skoop");
        assert_eq!(status.code(), Some(130));
        assert_eq!(collector_pods(real), Vec::new());
    }

    /// A firewall on node-2 refusing the kubelet's port: the collector pod
    /// runs (the kubelet reaches the API server), but the API server
    /// cannot reach the kubelet to exec in it.
    fn kubelet_port_refused(real: &RealCluster, kubeconfig: &str, dir: &Path) {
        let node_2 = &real.cluster.nodes[1].ns;
        let rule = format!(
            "INPUT -p tcp --dport {} -j REJECT --reject-with tcp-reset",
            super::KUBELET_PORT
        );
        node_2.run(&["sh", "-c", &format!("iptables -I {rule}")]);
        let output = collect_cluster(
            kubeconfig,
            &dir.join("port-refused"),
            &["--nodes", "node-2"],
        )
        .output()
        .expect("run skoop");
        node_2.run(&["sh", "-c", &format!("iptables -D {rule}")]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        // Said once per namespace (the node's and its two pods'), not once
        // per command.
        let said = stderr
            .lines()
            .filter(|line| line.contains("the API server cannot reach the node's kubelet"))
            .count();
        assert_eq!(said, 3, "{stderr}");
        assert!(stderr.contains("node-2"), "{stderr}");
        assert_eq!(collector_pods(real), Vec::new());
    }

    /// Nodes as users find them: a cordoned node is collected with the
    /// others by `collect cluster --all-nodes` (a collector pod names its
    /// node, which the scheduler's cordon does not keep it from); a node whose Ready condition is not True is refused at once,
    /// with the condition, and no pod is made for it; a collector pod
    /// evicted mid-collection is named as gone, with why.
    fn cordoned_not_ready_and_evicted(real: &RealCluster, kubeconfig: &str, dir: &Path) {
        use k8s_openapi::api::core::v1::Node;
        use kube::api::{DeleteParams, EvictParams, Patch, PatchParams};
        // A client lives on the runtime it was made on: one per call.
        let nodes = async || -> Api<Node> { Api::all(real.server.admin().await) };

        // The whole cluster, as `collect cluster --all-nodes` collects it
        // through collector pods, cordoned node-2 with the rest.
        block_on(async { nodes().await.cordon("node-2").await }).expect("cordon node-2");
        let cordoned = dir.join("cordoned");
        let output = collect_cluster(kubeconfig, &cordoned, &["--all-nodes"])
            .output()
            .expect("run skoop");
        block_on(async { nodes().await.uncordon("node-2").await }).expect("uncordon node-2");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "cordoned: {stderr}");
        for node in &real.cluster.nodes {
            for pod in &node.pods {
                let dump = cordoned.join(format!(
                    "nodes/{}/pods/{}/{}/ip-addr.json",
                    node.name, pod.namespace, pod.name
                ));
                let addresses = fs::read_to_string(&dump)
                    .unwrap_or_else(|e| panic!("{}: {e}; skoop said:\n{stderr}", dump.display()));
                assert!(
                    addresses.contains(&format!("\"{}\"", pod.ip())),
                    "{addresses}"
                );
            }
        }
        assert_eq!(collector_pods(real), Vec::new());

        // Ready as its kubelet would post it when its runtime fails; the
        // kubelet reports again only when its own view changes.
        let ready = |status: &str, reason: &str| {
            let patch = serde_json::json!({"status": {"conditions": [{
                "type": "Ready", "status": status, "reason": reason,
                "message": format!("lab: {reason}"),
                "lastHeartbeatTime": k8s_openapi::jiff::Timestamp::now(),
                "lastTransitionTime": k8s_openapi::jiff::Timestamp::now(),
            }]}});
            let params = PatchParams::default();
            block_on(async {
                let patch = Patch::Strategic(&patch);
                nodes().await.patch_status("node-2", &params, &patch).await
            })
            .expect("patch node-2's status");
        };
        ready("False", "KubeletNotReady");
        let output = collect_cluster(kubeconfig, &dir.join("not-ready"), &["--nodes", "node-2"])
            .output()
            .expect("run skoop");
        ready("True", "KubeletReady");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "not ready: {stderr}");
        assert!(
            stderr.contains("node node-2 is not Ready (Ready is False since")
                && stderr.contains("KubeletNotReady")
                && stderr.contains("--node-exec"),
            "{stderr}"
        );
        assert_eq!(collector_pods(real), Vec::new());

        let child = collect_cluster(kubeconfig, &dir.join("evicted"), &["--nodes", "node-2"])
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start skoop");
        let started = std::time::Instant::now();
        let running = loop {
            let running = collector_pods(real)
                .into_iter()
                .find(|(_, phase)| phase == "Running");
            if let Some((name, _)) = running {
                break name;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "no collector pod ran"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        // Past skoop's own look at the pod (every half second), into its
        // commands, which take some seconds on a node.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let evict = EvictParams {
            delete_options: Some(DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            }),
            ..EvictParams::default()
        };
        block_on(async {
            let pods: Api<k8s_openapi::api::core::v1::Pod> =
                Api::namespaced(real.server.admin().await, "skoop");
            pods.evict(&running, &evict).await
        })
        .expect("evict the collector pod");
        let output = child.wait_with_output().expect("wait for skoop");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "evicted: {stderr}");
        assert!(
            stderr.contains(&format!(
                "the collector pod skoop/{running} is gone mid-collection"
            )) && stderr.contains("evicted"),
            "{stderr}"
        );
        assert_eq!(collector_pods(real), Vec::new());
    }

    /// The first vertical slice of issue 31: kubelets and containerd run
    /// the lab's pods (Flannel VXLAN, the kubelet calling the CNI plugin),
    /// and `skoop diagnose` collects live through collector pods the
    /// kubelets start, exec'd through their streaming servers, finding the
    /// pods' namespaces in the kubelets' cgroup layout. Its answer must be
    /// the kernel's, healthy and with forwarding off on node-2, and so must
    /// `--confirm`'s probe sent through the collector pods; no collector pod
    /// is left after any run, nor after a missing image or SIGINT.
    #[test]
    fn kubelets_run_the_pods_and_a_live_diagnosis_through_collector_pods_agrees_with_the_kernel() {
        let Availability::Run = availability() else {
            return;
        };
        let mut lab = Lab::new();
        let real = RealCluster::build_kubelet(&mut lab, RealCni::FlannelVxlan, 2, 2);
        let cluster = &real.cluster;
        let (from, to) = (&cluster.nodes[0].pods[0], &cluster.nodes[1].pods[0]);
        let connects = || {
            let ip = to.ip().to_string();
            let connect = from.ns.exec(&["nc", "-z", "-w", "2", &ip, "8080"]);
            connect.status.success()
        };

        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = block_on(async {
            let client = real.server.admin().await;
            live::apply_rbac(&client).await;
            let service_account = ("skoop", "skoop");
            live::service_account_kubeconfig(&real.server, &client, dir.path(), service_account)
                .await
        });

        assert!(connects(), "the kernel: {} -> {}", from.name, to.name);
        let (report, output) = diagnose_live(&kubeconfig, &dir.path().join("healthy"), from, to);
        assert_eq!(
            report["disposition"],
            "delivered",
            "healthy: {report:#}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(output.status.code(), Some(0), "{report:#}");
        assert_eq!(collector_pods(&real), Vec::new());
        confirm_live(&kubeconfig, from, to, true, "kubelet: healthy");
        assert_eq!(collector_pods(&real), Vec::new());
        missing_image_and_interrupted_collection(&real, &kubeconfig, dir.path());
        kubelet_port_refused(&real, &kubeconfig, dir.path());
        cordoned_not_ready_and_evicted(&real, &kubeconfig, dir.path());

        // Forwarding off on node-2, with flanneld and kube-proxy frozen (the
        // kubelets and containerd are not: they run the collector pods).
        real.freeze();
        let node_2 = &cluster.nodes[1].ns;
        node_2.run(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"]);
        assert!(
            !connects(),
            "the kernel, ip_forward off: {} -> {}",
            from.name,
            to.name
        );
        let (report, output) = diagnose_live(&kubeconfig, &dir.path().join("forwarding"), from, to);
        assert_eq!(report["disposition"], "forwarding_disabled", "{report:#}");
        assert_eq!(output.status.code(), Some(1), "{report:#}");
        let stopped_at = report["paths"][0]["hops"]
            .as_array()
            .and_then(|hops| hops.last())
            .and_then(|hop| hop.as_u64())
            .and_then(|hop| report["hops"][hop as usize]["id"].as_str())
            .map(str::to_string);
        assert_eq!(stopped_at.as_deref(), Some("node-2"), "{report:#}");
        assert_eq!(collector_pods(&real), Vec::new());
        confirm_live(&kubeconfig, from, to, false, "kubelet: forwarding off");
        let drops = traced_drops(&kubeconfig, from, to);
        eprintln!("kubelet: forwarding off: the kernel's drops: {drops:?}");
        // The kernel's word for a packet to forward with forwarding off
        // (Linux 6.18: ip_error, as IP_INADDRERRORS counts it).
        assert!(
            drops.iter().any(|(reason, _)| reason == "IP_INADDRERRORS"),
            "{drops:?}"
        );
        assert_eq!(collector_pods(&real), Vec::new());
    }
}
