//! A node's network namespaces, reached through its [`NodeShell`]: the
//! host's own, and a pod's, found by the pod's UID and always checked
//! against the pod's IPs.

use std::path::{Path, PathBuf};

use super::dump::{CollectError, CollectReport, collect_namespace, create_dirs_under};
use super::shell::{COMMAND_TIMEOUT, NodeShell};
use crate::packs::Datapath;
use crate::snapshot::NetnsId;

/// A pod whose network namespace is to be collected, as the API tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOnNode {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: String,
    pub ips: Vec<String>,
}

/// Finds a pod's network namespace on its node and prints its path.
///
/// First the pod's processes: the kubelet puts them in a cgroup whose path
/// holds `pod<UID>` (cgroupfs) or `pod<UID with _>` (systemd), so
/// `/proc/PID/ns/net` of such a process is the pod's namespace. Then the
/// named namespaces CNI runtimes bind under `/run/netns` (the host's, seen
/// through PID 1's root from a collector pod). A candidate counts only
/// when it holds one of the pod's IPs, and never the host's namespace.
/// Exit status 3: none found; 4: no process of the pod, and several named
/// namespaces hold its IPs (skoop will not guess which).
const FIND_POD_NETNS: &str = r#"
uid=$1; shift
uid_systemd=$(printf %s "$uid" | tr - _)
host=$(stat -L -c %d:%i /proc/1/ns/net 2>/dev/null)
seen=" $host "
found=""
# Prints the candidate when it holds one of the pod's IPs.
holds() {
    candidate=$1; shift
    id=$(stat -L -c %d:%i "$candidate" 2>/dev/null) || return 1
    case "$seen" in *" $id "*) return 1;; esac
    seen="$seen$id "
    addrs=$(nsenter --net="$candidate" ip -o addr show 2>/dev/null) || return 1
    for ip in "$@"; do
        case "$addrs" in *" $ip/"*) return 0;; esac
    done
    return 1
}
for cgroup in /proc/[0-9]*/cgroup; do
    if grep -q -e "pod$uid" -e "pod$uid_systemd" "$cgroup" 2>/dev/null; then
        netns="${cgroup%/cgroup}/ns/net"
        if holds "$netns" "$@"; then printf '%s\n' "$netns"; exit 0; fi
    fi
done
# No process of the pod: the named namespaces, which must not be ambiguous.
for netns in /proc/1/root/run/netns/* /proc/1/root/var/run/netns/* /run/netns/*; do
    [ -e "$netns" ] && holds "$netns" "$@" && found="$found $netns"
done
set -- $found
[ $# -eq 1 ] && { printf '%s\n' "$1"; exit 0; }
[ $# -gt 1 ] && { echo "several network namespaces hold the pod's IPs:$found" >&2; exit 4; }
exit 3
"#;

/// Where a namespace's files go in the snapshot at `root`, created: a path
/// built only from names checked as Kubernetes names
/// ([`NetnsId::path_in`]), through real directories only.
fn namespace_dir(root: &Path, id: &NetnsId) -> Result<PathBuf, CollectError> {
    let dir = id.path_in(root)?;
    create_dirs_under(root, &id.dir()).map_err(|source| CollectError::CreateOutDir { dir, source })
}

/// Collects `node`'s root namespace into the snapshot at `root`.
pub async fn collect_host(
    shell: &NodeShell,
    root: &Path,
    node: &str,
    datapaths: &[Datapath],
) -> Result<CollectReport, CollectError> {
    let id = NetnsId::Host {
        node: node.to_string(),
    };
    let out = namespace_dir(root, &id)?;
    collect_namespace(shell, &[], format!("node {node}"), &out, datapaths).await
}

/// Finds `pod`'s namespace on its node and collects it into the snapshot.
pub async fn collect_pod(
    shell: &NodeShell,
    root: &Path,
    pod: &PodOnNode,
    datapaths: &[Datapath],
) -> Result<CollectReport, CollectError> {
    let id = NetnsId::Pod {
        node: pod.node.clone(),
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
    };
    // Checked before anything runs on the node.
    id.path_in(root)?;
    let path = find_pod_netns(shell, pod).await?;
    let enter = nsenter(&path);
    let out = namespace_dir(root, &id)?;
    let namespace = format!(
        "pod {}/{} on node {} ({path})",
        pod.namespace, pod.name, pod.node
    );
    collect_namespace(shell, &enter, namespace, &out, datapaths).await
}

async fn find_pod_netns(shell: &NodeShell, pod: &PodOnNode) -> Result<String, CollectError> {
    let not_found = |reason: String| CollectError::PodNetnsNotFound {
        pod: format!("{}/{}", pod.namespace, pod.name),
        node: pod.node.clone(),
        reason,
    };
    if pod.ips.is_empty() {
        return Err(not_found("the pod has no IP in its status".into()));
    }
    let mut argv = vec!["sh", "-s", "--", pod.uid.as_str()];
    argv.extend(pod.ips.iter().map(String::as_str));
    let argv: Vec<String> = argv.into_iter().map(str::to_string).collect();
    let output = shell
        .run(&[], &argv, Some(FIND_POD_NETNS.as_bytes()), COMMAND_TIMEOUT)
        .await
        .map_err(|e| not_found(e.to_string()))?;
    let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if output.success() && path.starts_with('/') && !path.contains('\n') {
        return Ok(path);
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    Err(not_found(if output.code == Some(3) {
        format!(
            "no process of pod UID {} and no namespace under /run/netns holds {}",
            pod.uid,
            pod.ips.join(" or ")
        )
    } else {
        format!("the search failed ({}): {stderr}", output.status)
    }))
}

/// The words that run a command in `pod`'s network namespace on its node,
/// found by [`FIND_POD_NETNS`].
pub async fn enter_pod(shell: &NodeShell, pod: &PodOnNode) -> Result<Vec<String>, CollectError> {
    Ok(nsenter(&find_pod_netns(shell, pod).await?))
}

/// `nsenter --net=PATH`: the words that enter the namespace at `path`.
fn nsenter(path: &str) -> Vec<String> {
    vec!["nsenter".to_string(), format!("--net={path}")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_collected_where_the_layout_puts_them() {
        let root = tempfile::tempdir().unwrap();
        let host = NetnsId::Host { node: "n1".into() };
        assert_eq!(
            namespace_dir(root.path(), &host).unwrap(),
            root.path().join("nodes/n1/host")
        );
        let pod = NetnsId::Pod {
            node: "n1".into(),
            namespace: "default".into(),
            name: "web-0".into(),
        };
        assert_eq!(
            namespace_dir(root.path(), &pod).unwrap(),
            root.path().join("nodes/n1/pods/default/web-0")
        );
        assert!(root.path().join("nodes/n1/pods/default/web-0").is_dir());
    }

    // Issue 36 item 3: a node named `../../../escaped-node` by the API
    // server was written three levels above the snapshot.
    #[test]
    fn a_name_that_is_no_kubernetes_name_is_refused_before_a_directory_is_made() {
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("a/b/snap");
        let escaping = NetnsId::Host {
            node: "../../../escaped-node".into(),
        };
        let err = namespace_dir(&root, &escaping).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("\"../../../escaped-node\" is not a Kubernetes node name"),
            "{err}"
        );
        let nested = NetnsId::Pod {
            node: "n1".into(),
            namespace: "default".into(),
            name: "a/b".into(),
        };
        assert!(matches!(
            namespace_dir(&root, &nested),
            Err(CollectError::BadName(_))
        ));
        assert!(!parent.path().join("escaped-node").exists());
        assert!(!parent.path().join("a").exists(), "nothing was created");
    }

    #[test]
    fn a_link_planted_in_the_snapshot_is_refused_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("nodes")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("nodes/n1")).unwrap();
        let err = namespace_dir(root.path(), &NetnsId::Host { node: "n1".into() }).unwrap_err();
        assert!(err.to_string().contains("not followed"), "{err}");
        assert!(!elsewhere.path().join("host").exists());
    }

    #[test]
    fn a_pod_nobody_holds_is_not_found_and_says_why() {
        let pod = PodOnNode {
            namespace: "default".into(),
            name: "ghost".into(),
            uid: "00000000-skoop-no-such-uid".into(),
            node: "n1".into(),
            // TEST-NET-3: no namespace of this machine holds it.
            ips: vec!["203.0.113.254".into()],
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let err = runtime
            .block_on(find_pod_netns(&NodeShell::Local, &pod))
            .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("default/ghost"), "{message}");
        assert!(message.contains("203.0.113.254"), "{message}");
    }
}
