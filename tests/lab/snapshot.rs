//! A snapshot of a built lab cluster (DESIGN §3), assembled the way a user
//! would: the Kubernetes objects, and `skoop collect local` run against every
//! node's and pod's network namespace.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::cluster::{Cluster, Cni, Dad};
use crate::objects;

/// Collects `cluster` into the snapshot directory `root`.
pub fn collect(cluster: &Cluster, cni: &dyn Cni, root: &Path) {
    objects::write(cluster, cni, &root.join("cluster"));
    cluster.settle(Dad::LinkLocal);
    for node in &cluster.nodes {
        let node_dir = root.join("nodes").join(&node.name);
        collect_local(&node.ns.name, &node_dir.join("host"));
        for pod in &node.pods {
            let pod_dir = node_dir.join("pods").join(&pod.namespace).join(&pod.name);
            collect_local(&pod.ns.name, &pod_dir);
        }
    }
}

/// Runs the built skoop binary's `collect local`, as the contract says.
pub fn collect_local(netns: &str, out: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["collect", "local", "--netns", netns, "--out"])
        .arg(out)
        .output()
        .expect("run skoop");
    assert!(
        output.status.success(),
        "skoop collect local --netns {netns} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// With `SKOOP_LAB_SAVE=DIR`, replaces the snapshot in DIR with a copy of
/// the one at `root` (this is how `examples/flannel-vxlan` is regenerated).
/// Only DIR's `cluster/` and `nodes/` are replaced; anything else in DIR
/// (its README) is left alone.
pub fn save_if_asked(root: &Path) {
    let Some(dest) = std::env::var_os("SKOOP_LAB_SAVE") else {
        return;
    };
    let dest = Path::new(&dest);
    for part in ["cluster", "nodes"] {
        let old = dest.join(part);
        if old.exists() {
            fs::remove_dir_all(&old).unwrap_or_else(|e| panic!("remove {}: {e}", old.display()));
        }
        copy_dir(&root.join(part), &old);
    }
    eprintln!("lab snapshot saved to {}", dest.display());
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create directory");
    for entry in fs::read_dir(from).expect("read directory") {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}
