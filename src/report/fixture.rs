//! Reports built in code for the pictures' unit tests: shapes no example
//! has (thousands of paths, hops on no path).

use super::json::{
    FindingOut, HopOut, LinkOut, PacketOut, PathOut, Report, RequestOut, StepKindOut, StepOut,
};
use crate::snapshot::netns::DumpFile;

fn hop(id: String, findings: Vec<usize>) -> HopOut {
    HopOut {
        id,
        kind: "node",
        node: Some("node-1".to_string()),
        assumed: false,
        steps: vec![StepOut {
            step: StepKindOut::Sent {
                packet: "10.0.0.1 -> 10.0.0.2:80 tcp".to_string(),
            },
            assumed: false,
        }],
        findings,
    }
}

/// `paths` paths fanned out from one source hop, each `depth` hops more,
/// each stopped (`no_route`) with a fatal finding of its own.
pub fn fanned_out(paths: usize, depth: usize) -> Report {
    let mut report = Report {
        schema_version: super::json::SCHEMA_VERSION,
        request: RequestOut {
            from: "a".to_string(),
            to: "b".to_string(),
            arriving_at: Vec::new(),
            src: None,
            dst: "10.0.0.2".to_string(),
            dst_port: Some(80),
            protocol: "tcp",
            size: None,
            family: "IPv4".to_string(),
        },
        request_text: "a -> b (10.0.0.2:80 tcp)".to_string(),
        disposition: "no_route",
        assumed: false,
        packs: Vec::new(),
        paths: Vec::new(),
        hops: vec![hop("source".to_string(), Vec::new())],
        links: Vec::new(),
        findings: Vec::new(),
        off_path: Vec::new(),
        confirmation: None,
        other_families: Vec::new(),
    };
    for path in 0..paths {
        let mut hops = vec![0];
        for level in 0..depth {
            let index = report.hops.len();
            let findings = if level + 1 == depth {
                vec![path]
            } else {
                Vec::new()
            };
            report
                .hops
                .push(hop(format!("hop-{path}-{level}"), findings));
            report.links.push(LinkOut {
                from: *hops.last().unwrap_or(&0),
                to: index,
                kind: "veth",
                from_interface: "eth0".to_string(),
                to_interface: Some("eth1".to_string()),
                packet_text: "10.0.0.1 -> 10.0.0.2:80 tcp".to_string(),
                packet: PacketOut {
                    src: Some("10.0.0.1".to_string()),
                    dst: "10.0.0.2".to_string(),
                    protocol: "tcp",
                    src_port: Some(40000),
                    dst_port: Some(80),
                    bytes: None,
                    reply: false,
                    inner: None,
                },
            });
            hops.push(index);
        }
        report.findings.push(FindingOut {
            id: crate::engine::codes::KERNEL_ROUTE_NONE.to_string(),
            severity: "fatal",
            status: crate::diagnostic::FindingStatus::Failed,
            hop: format!("hop-{path}-{}", depth.saturating_sub(1)),
            message: format!("no route {path}"),
            evidence: DumpFile::IpRoute.name().to_string(),
            places: vec![crate::diagnostic::Evidence::file(DumpFile::IpRoute.name())],
            expected: None,
            remediation: None,
            // The path this finding ends, pushed just below.
            paths: vec![report.paths.len()],
        });
        report.paths.push(PathOut {
            disposition: "no_route",
            probability: 1.0 / paths as f64,
            hops,
            assumed: false,
            exit: None,
            backend: None,
        });
    }
    report
}
