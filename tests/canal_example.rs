//! `examples/canal` (real lab output: flanneld's VXLAN between two nodes,
//! felix enforcing a NetworkPolicy with no networking backend of its own,
//! the calico CNI plugin's veths with host-local addresses). The Canal pack
//! is detected from its ConfigMap and composes the Flannel and Calico
//! packs, which lend it their checks; either part alone misreads the
//! cluster. And the pack's own tests (real lab output, a fault each) pass.

mod common;

use std::path::Path;

use skoop::engine::{self, Disposition, Protocol};

use common::skoop;

const EXAMPLE: &str = "examples/canal";

/// web-0 (node-1) to `to` with the built-in packs.
fn diagnose(to: &str, protocol: Protocol) -> engine::Diagnosis {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    common::diagnose(&common::load(&root), "default/web-0", to, protocol, None)
}

#[test]
fn canal_answers_for_the_cluster_and_its_parts_lend_their_checks() {
    let diagnosis = diagnose("default/web-3:8080", Protocol::Tcp);
    assert_eq!(
        diagnosis.disposition(),
        Disposition::Delivered,
        "{:#?}",
        diagnosis.findings
    );
    assert_eq!(
        diagnosis.packs,
        [
            "core",
            "kube-proxy",
            "networkpolicy",
            "calico (part of canal)",
            "canal (CNI)",
            "flannel (part of canal)"
        ]
    );
    assert!(
        diagnosis.findings.iter().all(|f| {
            let id = f.id.as_str();
            !["canal.", "flannel.", "calico."]
                .iter()
                .any(|p| id.starts_with(p))
        }),
        "{:#?}",
        diagnosis.findings
    );
}

#[test]
fn a_ping_is_dropped_by_felix_and_the_policy_is_named() {
    let diagnosis = diagnose("default/web-3", Protocol::Icmp);
    assert_eq!(diagnosis.disposition(), Disposition::DeniedByNetfilter);
    let denied = common::only(&diagnosis, "networkpolicy.ingress.denied");
    assert_eq!(denied.about.hop.to_string(), "node-2");
    for named in ["default/allow-web", "cali-tw-"] {
        assert!(denied.message.contains(named), "{}", denied.message);
    }
}

#[test]
fn either_part_alone_misreads_a_canal_cluster() {
    let alone = |cni: &str| {
        skoop(&[
            "diagnose",
            "--snapshot",
            EXAMPLE,
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--cni",
            cni,
        ])
    };
    // Flannel expects cni0, which Canal never makes.
    let (code, out) = alone("flannel");
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("fatal flannel.bridge.down at node-1"), "{out}");
    // Calico expects its own encapsulation's MTU, not flannel's.
    let (_, out) = alone("calico");
    assert!(out.contains("warning calico.pod.mtu"), "{out}");
    let (code, out) = alone("canal");
    assert_eq!(code, Some(0), "{out}");
}

#[test]
fn canal_pack_lints_clean_and_its_tests_pass() {
    let (code, out) = skoop(&["packs", "eval", "plugins/canal", "--snapshot", EXAMPLE]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("detection: ConfigMap kube-system/rke2-canal-config"),
        "{out}"
    );
    assert!(
        out.contains("flannel.vxlan.fdb (node per remote node)"),
        "{out}"
    );
    assert!(
        out.contains("calico.pod.proxy-arp (node per local pod)"),
        "{out}"
    );
    assert!(!out.contains("flannel.bridge.down"), "{out}");
    let (code, out) = skoop(&["packs", "show", "canal"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("composes (where this pack applies")
            && out.contains("  flannel: flannel.sysctl.ip-forward, flannel.node.*")
            && out.contains("--set PART.NAME=VALUE"),
        "{out}"
    );
    common::assert_pack_lints_clean_and_passes(
        "plugins/canal",
        &[
            "healthy",
            "route-missing",
            "vxlan-down",
            "ip-forward-off",
            "proxy-arp-off",
            "felix-jump-missing",
            "masquerade-missing",
        ],
    );
}
