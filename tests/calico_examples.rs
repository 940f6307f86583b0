//! The Calico examples (real lab output): they load without a problem, pods
//! reach each other and the service across nodes, and the NetworkPolicy
//! felix enforces drops a ping in the destination's `cali-tw-` chain.

use skoop::engine::HopId;
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
        size: None,
        via: None,
        family: None,
    };
    let (packs, problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    engine::diagnose(snapshot, &request, &packs).unwrap()
}

/// The findings at `severity` or worse.
fn at_least(diagnosis: &engine::Diagnosis, severity: Severity) -> Vec<&engine::Finding> {
    diagnosis
        .findings
        .iter()
        .filter(|f| f.severity >= severity)
        .collect()
}

// Nothing on these paths is flagged either: a hop's checks see the source
// the packet arrived with, not the tunnel's outer one or a masquerade's.
#[test]
fn pods_reach_each_other_across_nodes_and_nothing_is_flagged() {
    for example in EXAMPLES {
        let diagnosis = diagnose(&load(example), "default/web-3", Some(8080), Protocol::Tcp);
        assert_eq!(diagnosis.disposition(), Disposition::Delivered, "{example}");
        assert!(
            at_least(&diagnosis, Severity::Critical).is_empty(),
            "{example}: {:#?}",
            diagnosis.findings
        );
    }
}

// The backends on node-1 answer through strict rp_filter on their cali veths:
// it checks the reply's source before conntrack un-DNATs it.
#[test]
fn every_backend_of_the_service_is_reached_and_nothing_is_flagged() {
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
        assert!(
            at_least(&diagnosis, Severity::Critical).is_empty(),
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
        let denials = at_least(&diagnosis, Severity::Fatal);
        assert!(
            denials.iter().any(|f| f.about.hop == HopId::node("node-2")
                && f.message.contains("chain cali-tw-cali")),
            "{example}: {denials:#?}"
        );
    }
}
