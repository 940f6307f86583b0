//! `examples/cilium-vxlan` (real lab output: the real cilium-agent on two
//! nodes, a CiliumNetworkPolicy denying node-1's pods ingress to node-2's).
//! Cilium decides in BPF programs; the engine names no CNI, and the Cilium
//! pack claims the programs and reads their maps: pods of one node reach each
//! other, the service is translated by Cilium's own program, and the flow
//! across nodes is dropped by node-2's program with the policy named. Without
//! the pack, nothing claims the programs and nothing is concluded past them.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use skoop::engine::{self, Disposition, Endpoint, Protocol, Request};
use skoop::packs::{LoadedPacks, builtin_sources};
use skoop::snapshot::Snapshot;

const EXAMPLE: &str = "examples/cilium-vxlan";

fn load() -> Arc<Snapshot> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (snapshot, problems) = Snapshot::load(&root).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    Arc::new(snapshot)
}

fn diagnose(to: &str, port: Option<u16>, packs: &LoadedPacks) -> engine::Diagnosis {
    let request = Request {
        from: "default/web-0".parse::<Endpoint>().unwrap(),
        to: to.parse::<Endpoint>().unwrap(),
        port,
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: None,
    };
    engine::diagnose(&load(), &request, packs).unwrap()
}

fn builtin() -> LoadedPacks {
    let (packs, problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    packs
}

#[test]
fn pods_of_one_node_reach_each_other_through_cilium_s_programs() {
    let diagnosis = diagnose("default/web-1", Some(8080), &builtin());
    assert_eq!(
        diagnosis.disposition(),
        Disposition::Delivered,
        "{:#?}",
        diagnosis.findings
    );
    let steps: Vec<String> = diagnosis
        .graph
        .node_weights()
        .flat_map(|hop| hop.steps.iter().map(|step| format!("{:?}", step.step)))
        .collect();
    let text = steps.join("\n");
    assert!(text.contains("cil_from_container"), "{text}");
}

#[test]
fn the_ciliumnetworkpolicy_that_denies_a_flow_is_named_at_its_hop() {
    let diagnosis = diagnose("default/web-3", Some(8080), &builtin());
    assert_eq!(diagnosis.disposition(), Disposition::DroppedByProgram);
    let drop = diagnosis
        .findings
        .iter()
        .find(|f| f.id.as_str() == "datapath.drop")
        .expect("a datapath.drop finding");
    assert_eq!(drop.about.hop.to_string(), "node-2");
    assert!(
        drop.message
            .contains("CiliumNetworkPolicy default/deny-from-node-1"),
        "{}",
        drop.message
    );
    // The policy map entry that denies it is cited.
    assert!(
        drop.evidence
            .iter()
            .any(|e| e.file.ends_with("datapath/policy.json")),
        "{:#?}",
        drop.evidence
    );
}

#[test]
fn a_service_is_translated_by_cilium_s_program_to_every_backend() {
    let diagnosis = diagnose("svc/default/web", None, &builtin());
    assert_eq!(diagnosis.paths.len(), 4, "{:#?}", diagnosis.paths);
    let delivered = diagnosis
        .paths
        .iter()
        .filter(|p| p.disposition == Disposition::Delivered)
        .count();
    // web-0 and web-1 on node-1; the policy denies node-2's from node-1.
    assert_eq!(delivered, 2, "{:#?}", diagnosis.paths);
}

#[test]
fn without_a_pack_claiming_them_cilium_s_programs_are_unknown() {
    let sources = builtin_sources()
        .into_iter()
        .filter(|source| !source.dir.ends_with("cilium"))
        .collect();
    let (packs, problems) = LoadedPacks::load(sources, &[]);
    assert!(problems.is_empty(), "{problems:?}");
    let diagnosis = diagnose("default/web-1", Some(8080), &packs);
    assert_eq!(diagnosis.disposition(), Disposition::InsufficientInfo);
    assert!(
        diagnosis
            .findings
            .iter()
            .any(|f| f.id.as_str() == "datapath.unclaimed"
                && f.message.contains("cil_from_container")),
        "{:#?}",
        diagnosis.findings
    );
}

#[test]
fn the_binary_names_the_policy_and_exits_1() {
    let output = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args([
            "diagnose",
            "--snapshot",
            EXAMPLE,
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("dropped_by_program"), "{stdout}");
    assert!(
        stdout.contains("CiliumNetworkPolicy default/deny-from-node-1"),
        "{stdout}"
    );
}
