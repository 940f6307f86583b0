//! The Calico examples (real lab output): they load without a problem, pods
//! reach each other and the service across nodes, and the NetworkPolicy
//! felix enforces drops a ping in the destination's `cali-tw-` chain.

use std::path::Path;
use std::sync::Arc;

use skoop::engine::{self, Disposition, Endpoint, Protocol, Request, Severity};
use skoop::packs::{LoadedPacks, builtin_sources};
use skoop::snapshot::Snapshot;

const EXAMPLES: [&str; 2] = ["examples/calico-bgp", "examples/calico-vxlan"];

fn load(example: &str) -> Arc<Snapshot> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(example);
    let (snapshot, problems) = Snapshot::load(&root).unwrap();
    assert!(problems.is_empty(), "{example}: {problems:#?}");
    Arc::new(snapshot)
}

fn diagnose(
    snapshot: &Arc<Snapshot>,
    to: &str,
    port: Option<u16>,
    protocol: Protocol,
) -> engine::Diagnosis {
    let request = Request {
        from: "default/web-0".parse::<Endpoint>().unwrap(),
        to: to.parse::<Endpoint>().unwrap(),
        port,
        protocol,
    };
    let (packs, problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    engine::diagnose(snapshot, &request, &packs).unwrap()
}

fn fatal(diagnosis: &engine::Diagnosis) -> Vec<&engine::Finding> {
    diagnosis
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Fatal)
        .collect()
}

#[test]
fn pods_reach_each_other_across_nodes() {
    for example in EXAMPLES {
        let diagnosis = diagnose(&load(example), "default/web-3", Some(8080), Protocol::Tcp);
        assert_eq!(diagnosis.disposition(), Disposition::Delivered, "{example}");
        assert!(
            fatal(&diagnosis).is_empty(),
            "{example}: {:#?}",
            diagnosis.findings
        );
    }
}

#[test]
fn every_backend_of_the_service_is_reached() {
    for example in EXAMPLES {
        let diagnosis = diagnose(&load(example), "svc/default/web", Some(80), Protocol::Tcp);
        assert_eq!(diagnosis.paths.len(), 4, "{example}");
        assert!(
            diagnosis
                .paths
                .iter()
                .all(|p| p.disposition == Disposition::Delivered),
            "{example}: {:#?}",
            diagnosis.findings
        );
    }
}

#[test]
fn the_network_policy_drops_a_ping_in_felixs_chain_for_the_destination() {
    for example in EXAMPLES {
        let diagnosis = diagnose(&load(example), "default/web-3", None, Protocol::Icmp);
        assert_eq!(
            diagnosis.disposition(),
            Disposition::DeniedByNetfilter,
            "{example}"
        );
        let denials = fatal(&diagnosis);
        assert!(
            denials
                .iter()
                .any(|f| f.hop == "node-2" && f.message.contains("chain cali-tw-cali")),
            "{example}: {denials:#?}"
        );
    }
}
