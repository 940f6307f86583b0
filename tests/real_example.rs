//! `examples/flannel-vxlan-real`, collected live (`skoop collect cluster
//! --node-exec`) from the lab on real components: it loads without a
//! problem, it is what the real components wrote (not the scripted lab's
//! layout), and the commands its README shows diagnose as it says.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use skoop::engine::{self, Disposition, Endpoint, Protocol, Request};
use skoop::packs::{LoadedPacks, builtin_sources};
use skoop::snapshot::Snapshot;

const EXAMPLE: &str = "examples/flannel-vxlan-real";

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE)
}

fn diagnose(to: &str) -> engine::Diagnosis {
    let (snapshot, problems) = Snapshot::load(&root()).expect("the example loads");
    assert!(problems.is_empty(), "{problems:#?}");
    let request = Request {
        from: "default/web-0".parse::<Endpoint>().expect("a pod"),
        to: to.parse::<Endpoint>().expect("a destination"),
        port: None,
        protocol: Protocol::Tcp,
        size: None,
    };
    let (packs, problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    engine::diagnose(&Arc::new(snapshot), &request, &packs).expect("the request resolves")
}

#[test]
fn the_real_components_wrote_it() {
    let rules = std::fs::read_to_string(root().join("nodes/node-1/host/iptables-save.txt"))
        .expect("node-1's rules");
    // kube-proxy's own canary and firewall chains, which the scripted lab
    // never wrote, and flanneld's masquerade chain.
    for chain in [
        ":KUBE-PROXY-CANARY",
        ":KUBE-PROXY-FIREWALL",
        ":FLANNEL-POSTRTG",
    ] {
        assert!(rules.contains(chain), "no {chain} in node-1's rules");
    }
    let nodes = std::fs::read_to_string(root().join("cluster/nodes.core.json")).expect("nodes");
    // flanneld's annotations, and the pod CIDR node IPAM gave.
    assert!(nodes.contains("flannel.alpha.coreos.com/backend-data"));
    assert!(nodes.contains("\"podCIDR\""));
    let slices =
        std::fs::read_to_string(root().join("cluster/endpointslices.discovery.k8s.io.json"))
            .expect("slices");
    assert!(slices.contains("endpointslice-controller.k8s.io"));
}

#[test]
fn pods_and_services_diagnose_as_kube_proxy_programmed_them() {
    assert_eq!(
        diagnose("default/web-3:8080").disposition(),
        Disposition::Delivered
    );
    assert_eq!(
        diagnose("svc/default/web").disposition(),
        Disposition::Delivered
    );
    assert_eq!(
        diagnose("svc/default/web-affinity").disposition(),
        Disposition::Delivered
    );
    let nobody = diagnose("svc/default/web-nobody");
    assert_eq!(nobody.disposition(), Disposition::DeniedByNetfilter);
    assert!(
        nobody
            .findings
            .iter()
            .any(|f| f.hop == "node-1" && f.id == "kernel.netfilter.denied"),
        "{:#?}",
        nobody.findings
    );
}

/// The README's commands, as a user runs them.
#[test]
fn the_readme_commands_run() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("the README");
    let commands: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("skoop diagnose --snapshot examples/flannel-vxlan-real"))
        .collect();
    assert!(commands.len() >= 2, "the README shows its commands");
    for command in commands {
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run skoop");
        let stdout = String::from_utf8_lossy(&output.stdout);
        // Exit 0 for a delivered flow, 1 for one that is not: both report.
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "{command}: {}\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("path 1 of"), "{command}:\n{stdout}");
    }
}
