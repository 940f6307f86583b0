//! `examples/flannel-vxlan-real` and `examples/flannel-vxlan-nftables-real`
//! (kube-proxy in nftables mode), collected live (`skoop collect cluster
//! --node-exec`) from the lab on real components: each loads without a
//! problem, is what the real components wrote (not the scripted lab's
//! layout), and the commands its README shows run as it says.

mod common;

use skoop::engine::HopId;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use skoop::engine::{self, Disposition, Endpoint, Protocol, Request};
use skoop::packs::{LoadedPacks, builtin_sources};
use skoop::snapshot::Snapshot;

const EXAMPLE: &str = "examples/flannel-vxlan-real";
const NFTABLES_EXAMPLE: &str = "examples/flannel-vxlan-nftables-real";

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE)
}

fn diagnose(to: &str) -> engine::Diagnosis {
    diagnose_in(EXAMPLE, to)
}

fn diagnose_in(example: &str, to: &str) -> engine::Diagnosis {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(example);
    let (snapshot, problems) = Snapshot::load(&root).expect("the example loads");
    assert!(problems.is_empty(), "{problems:#?}");
    let request = Request {
        from: "default/web-0".parse::<Endpoint>().expect("a pod"),
        to: to.parse::<Endpoint>().expect("a destination"),
        port: None,
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: None,
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
            .any(|f| f.about.hop == HopId::node("node-1")
                && f.id == engine::codes::KERNEL_NETFILTER_DENIED),
        "{:#?}",
        nobody.findings
    );
}

/// kube-proxy in nftables mode: its rules are in node-1's nftables table
/// `ip kube-proxy`, none in iptables, and the walker follows them.
#[test]
fn kube_proxy_in_nftables_mode_is_followed_through_its_table() {
    let host = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(NFTABLES_EXAMPLE)
        .join("nodes/node-1/host");
    let iptables = std::fs::read_to_string(host.join("iptables-save.txt")).expect("iptables");
    assert!(
        !iptables.contains("KUBE-"),
        "no kube-proxy chain in iptables"
    );
    let nft = std::fs::read_to_string(host.join("nft-ruleset.json")).expect("nft");
    assert!(nft.contains(r#""name": "kube-proxy""#));
    let web = diagnose_in(NFTABLES_EXAMPLE, "svc/default/web");
    assert_eq!(web.disposition(), Disposition::Delivered);
    assert_eq!(web.paths.len(), 4, "one path per endpoint");
    let nobody = diagnose_in(NFTABLES_EXAMPLE, "svc/default/web-nobody");
    assert_eq!(nobody.disposition(), Disposition::DeniedByNetfilter);
    let denied = nobody
        .findings
        .iter()
        .find(|f| {
            f.about.hop == HopId::node("node-1") && f.id == engine::codes::KERNEL_NETFILTER_DENIED
        })
        .unwrap_or_else(|| panic!("{:#?}", nobody.findings));
    assert!(
        denied
            .message
            .contains("chain reject-chain (nftables table ip kube-proxy, FORWARD)"),
        "{}",
        denied.message
    );
    assert!(
        skoop::diagnostic::evidence_text(&denied.evidence).contains("nft-ruleset.json:1:")
            && skoop::diagnostic::evidence_text(&denied.evidence)
                .ends_with("reject with icmp port-unreachable"),
        "{:?}",
        denied.evidence
    );
}

/// The rule that stops a flow is named by its dump file and place, in the
/// text report's steps and the JSON report's, whichever ruleset holds it:
/// kube-proxy's reject for a Service without endpoints is an nftables rule
/// in its nftables mode and an iptables rule in its iptables mode.
#[test]
fn a_denial_names_its_stopping_rule_by_file_and_place_in_text_and_json() {
    let cases = [
        (
            NFTABLES_EXAMPLE,
            "nft-ruleset.json",
            "the rule (handle 44) of chain reject-chain (nftables table ip kube-proxy, FORWARD)",
            "reject with icmp port-unreachable",
        ),
        (
            EXAMPLE,
            "iptables-save.txt",
            "rule 1 of chain KUBE-SERVICES (table filter, FORWARD)",
            "-A KUBE-SERVICES -d 10.96.0.106/32",
        ),
    ];
    for (example, file, decision, rule) in cases {
        let run = |extra: &[&str]| {
            let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .args(["diagnose", "--snapshot", example, "--from", "default/web-0"])
                .args(["--to", "svc/default/web-nobody"])
                .args(extra)
                .output()
                .expect("run skoop");
            assert_eq!(output.status.code(), Some(1), "{output:?}");
            String::from_utf8(output.stdout).expect("UTF-8")
        };
        let report: serde_json::Value = serde_json::from_str(&run(&["-o", "json"])).expect("JSON");
        let steps: Vec<&serde_json::Value> = report["hops"]
            .as_array()
            .expect("hops")
            .iter()
            .flat_map(|hop| hop["steps"].as_array().expect("steps"))
            .filter(|step| step["kind"] == "netfilter")
            .collect();
        let [step] = steps.as_slice() else {
            panic!("one netfilter step: {steps:#?}");
        };
        let path = format!("{example}/nodes/node-1/host/{file}");
        assert_eq!(step["file"], path.as_str(), "{step:#}");
        assert_eq!(step["decision"], decision, "{step:#}");
        assert!(
            step["rule"].as_str().expect("rule").starts_with(rule),
            "{step:#}"
        );
        let line = step["line"].as_u64().expect("a line");
        // nft writes its JSON on one line: a rule is at a column of it.
        let place = match step["column"].as_u64() {
            Some(column) => format!("{path}:{line}:{column}"),
            None => format!("{path}:{line}"),
        };
        assert_eq!(
            step["column"].is_u64(),
            file == "nft-ruleset.json",
            "{step:#}"
        );
        let text = run(&["--detail"]);
        let shown = format!("netfilter: {decision} at {place}: {rule}");
        assert!(text.contains(&shown), "no {shown:?} in:\n{text}");
    }
}

/// The README's commands, as a user runs them.
#[test]
fn the_readme_commands_run() {
    for example in [EXAMPLE, NFTABLES_EXAMPLE] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(example);
        let readme = std::fs::read_to_string(root.join("README.md")).expect("the README");
        let commands: Vec<&str> = readme
            .lines()
            .filter(|l| l.starts_with("skoop ") && l.contains(example))
            .collect();
        assert!(
            commands.len() >= 2,
            "{example}: the README shows its commands"
        );
        for command in commands {
            let args: Vec<&str> = command.split_whitespace().skip(1).collect();
            let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
                .args(&args)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .expect("run skoop");
            let stdout = String::from_utf8_lossy(&output.stdout);
            // Exit 0 for a delivered flow (or accepted packet), 1 for one
            // that is not, 3 for one delivered with a critical or fatal
            // finding: all report.
            assert!(
                matches!(output.status.code(), Some(0 | 1 | 3)),
                "{command}: {}\n{stdout}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
            let reported = if args[0] == "diagnose" {
                stdout.contains("path 1 of")
            } else {
                stdout.contains("trace:")
            };
            assert!(reported, "{command}:\n{stdout}");
        }
    }
}

/// kube-proxy's `kube-proxy.rules.stale` reads the nftables table too: an
/// endpoint its service chain still translates to, which the slices do not
/// list, is named.
#[test]
fn a_stale_endpoint_in_kube_proxys_nftables_table_is_named() {
    let dir = common::copy_snapshot(NFTABLES_EXAMPLE);
    let rules = dir.path().join("nodes/node-1/host/nft-ruleset.json");
    let text = std::fs::read_to_string(&rules).expect("node-1's nft ruleset");
    let stale = text.replace(r#"["10.244.1.3", 8080]"#, r#"["10.244.1.9", 8080]"#);
    assert_ne!(stale, text, "the example's service chains name web-3");
    std::fs::write(&rules, stale).expect("write the ruleset");
    let diagnosis = common::diagnose(
        &common::load(dir.path()),
        "default/web-0",
        "svc/default/web",
        Protocol::Tcp,
        None,
    );
    // One finding per service chain that names it; `web`'s among them.
    let stale = common::with_id(&diagnosis, "kube-proxy.rules.stale");
    let web = stale
        .iter()
        .find(|f| f.message.contains("/web/tcp/http of table ip kube-proxy"))
        .unwrap_or_else(|| panic!("{stale:#?}"));
    assert_eq!(web.about.hop, HopId::node("node-1"));
    assert!(
        web.message
            .contains("send default/web (port http) to 10.244.1.9:8080"),
        "{}",
        web.message
    );
}
