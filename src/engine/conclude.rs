//! What a walked and checked diagnosis concludes beyond its paths: what the
//! flow is meant to reach inside the cluster (a path that leaves the cluster
//! does not reach it, whatever its source), and the order its findings are
//! said in, the cause first.

use std::cmp::Reverse;

use super::target::Resolved;
use super::{Diagnosis, Endpoint, Finding, Request, Severity};
use crate::snapshot::Snapshot;
use crate::snapshot::cluster::IpOwner;

/// What `--to` names inside the cluster, as the verdict names it: a pod
/// (`NS/NAME`), a node (`node/NAME`) or a Service (`service NS/NAME`), by its
/// name or as the owner of its address; `None` for an address outside the
/// cluster.
pub(super) fn destination(
    snapshot: &Snapshot,
    request: &Request,
    resolved: &Resolved,
) -> Option<String> {
    match &request.to {
        Endpoint::Pod {
            namespace, name, ..
        } => return Some(format!("{namespace}/{name}")),
        Endpoint::Node { name, .. } => return Some(format!("node/{name}")),
        Endpoint::Service {
            namespace, name, ..
        } => return Some(format!("service {namespace}/{name}")),
        Endpoint::Ip { .. } => {}
    }
    let owners = snapshot.cluster.by_ip(resolved.question.dst);
    // A hostNetwork pod's address is its node's: the node is what it names.
    let named = |owner: &IpOwner| match owner {
        IpOwner::Pod {
            host_network: true, ..
        } => None,
        IpOwner::Pod {
            namespace, name, ..
        } => Some(format!("{namespace}/{name}")),
        IpOwner::Node { name } => Some(format!("node/{name}")),
        service => service
            .service()
            .map(|(namespace, name)| format!("service {namespace}/{name}")),
    };
    owners.iter().find_map(named)
}

/// Orders the findings the cause first: the most severe finding at each hop
/// where a path stops (the first of equals), then the rest by severity, in
/// the order found among equals.
pub(super) fn cause_first(diagnosis: &mut Diagnosis) {
    let mut causes: Vec<usize> = Vec::new();
    for path in &diagnosis.paths {
        let Some(stop) = diagnosis.stop_hop(path) else {
            continue;
        };
        let at_stop = diagnosis
            .findings
            .iter()
            .enumerate()
            .filter(|(_, finding)| finding.about.hop_index == stop);
        let cause =
            at_stop.fold(
                None,
                |best: Option<(usize, &Finding)>, (index, finding)| match best {
                    Some((_, b)) if b.severity >= finding.severity => best,
                    _ => Some((index, finding)),
                },
            );
        causes.extend(cause.map(|(index, _)| index));
    }
    let mut ranked: Vec<(bool, Reverse<Severity>, Finding)> =
        std::mem::take(&mut diagnosis.findings)
            .into_iter()
            .enumerate()
            .map(|(index, finding)| (!causes.contains(&index), Reverse(finding.severity), finding))
            .collect();
    ranked.sort_by_key(|(not_cause, severity, _)| (*not_cause, *severity));
    diagnosis.findings = ranked.into_iter().map(|(_, _, finding)| finding).collect();
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use crate::engine::codes::KERNEL_NETFILTER_DENIED;
    use crate::engine::{Protocol, Request, Severity, diagnose};
    use crate::packs::LoadedPacks;
    use crate::snapshot::Snapshot;

    fn diagnosed(example: &str, to: &str) -> crate::engine::Diagnosis {
        let (snapshot, _) = Snapshot::load(&Path::new("examples").join(example)).expect("loads");
        let (packs, problems) = LoadedPacks::discover_and_load(&[], &[]);
        assert!(problems.is_empty(), "{problems:?}");
        let request = Request {
            from: "default/web-0".parse().expect("an endpoint"),
            to: to.parse().expect("an endpoint"),
            port: None,
            protocol: Protocol::Tcp,
            size: None,
            via: None,
            family: None,
        };
        diagnose(&Arc::new(snapshot), &request, &packs).expect("diagnosed")
    }

    #[test]
    fn a_service_address_names_its_service_and_an_outside_address_nothing() {
        let to_service = diagnosed("flannel-vxlan", "10.96.0.100:80");
        assert_eq!(
            to_service.destination.as_deref(),
            Some("service default/web")
        );
        let outside = diagnosed("flannel-vxlan", "198.51.100.7:443");
        assert_eq!(outside.destination, None);
    }

    #[test]
    fn the_disposition_is_the_one_most_flows_meet_whatever_the_backends_order() {
        use crate::engine::Disposition::*;
        // The example's Service has two backends; their order and fates are
        // set by hand.
        let mut diagnosis = diagnosed("flannel-vxlan", "svc/default/web");
        let template = diagnosis.paths[0].clone();
        let path = |disposition, probability| crate::engine::PathResult {
            disposition,
            probability,
            ..template.clone()
        };
        let mut verdict = |paths: Vec<crate::engine::PathResult>| {
            diagnosis.paths = paths;
            diagnosis.disposition()
        };
        // A martian to itself first, the three others' replies misdelivered.
        let mixed = [NoRoute, NoListener, NoListener, NoListener].map(|d| path(d, 0.25));
        assert_eq!(verdict(mixed.to_vec()), NoListener);
        let mut reversed = mixed.to_vec();
        reversed.reverse();
        assert_eq!(verdict(reversed), NoListener);
        // Equal shares: the first met; unknown only when nothing is known.
        assert_eq!(
            verdict(vec![path(NoRoute, 0.5), path(NoListener, 0.5)]),
            NoRoute
        );
        assert_eq!(
            verdict(vec![
                path(InsufficientInfo, 0.75),
                path(DeniedByNetfilter, 0.25)
            ]),
            DeniedByNetfilter
        );
        assert_eq!(
            verdict(vec![path(Delivered, 0.5), path(InsufficientInfo, 0.5)]),
            InsufficientInfo
        );
        assert_eq!(verdict(vec![path(Delivered, 1.0)]), Delivered);
        assert_eq!(verdict(Vec::new()), InsufficientInfo);
    }

    #[test]
    fn the_stop_comes_first_then_the_rest_by_severity() {
        // A Service without endpoints: netfilter rejects the request at
        // node-1, and the Service's own finding is about the first hop.
        let diagnosis = diagnosed("flannel-vxlan-real", "svc/default/web-nobody");
        let path = &diagnosis.paths[0];
        let stop = diagnosis.stop_hop(path).expect("the path stops");
        assert_eq!(diagnosis.findings[0].about.hop_index, stop);
        assert_eq!(diagnosis.findings[0].id, KERNEL_NETFILTER_DENIED);
        let rest: Vec<Severity> = diagnosis.findings[1..].iter().map(|f| f.severity).collect();
        assert!(!rest.is_empty(), "{:#?}", diagnosis.findings);
        assert!(rest.windows(2).all(|pair| pair[0] >= pair[1]), "{rest:?}");
    }
}
