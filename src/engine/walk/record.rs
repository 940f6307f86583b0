//! Recording what the walk finds: steps of a hop, forks of a hop into
//! branches, stops and the paths they end, findings.

use super::*;

impl<'s> Walker<'s> {
    /// Keeps `packet` as the hop's packet (see [`HopContext::last_packet`]),
    /// or that its addresses are not `known`. The outer packet of a tunnel
    /// the hop put its packet in (`generated` here, carrying one) leaves the
    /// record as it was.
    pub(super) fn now_holds(
        &mut self,
        hop: NodeIndex,
        packet: &Packet,
        generated: bool,
        known: bool,
        branch: &mut Branch,
    ) {
        if generated && packet.tunnel.is_some() {
            return;
        }
        if let Some(context) = &mut self.graph[hop].context {
            let held = known.then(|| packet.pack_packet());
            branch
                .request
                .now_held(held.as_ref().map(|p| (p.dst, p.dport)));
            context.last_packet = held;
        }
    }

    /// Adds `hop` to the graph and to `branch`, joined by `link` to the
    /// hop it comes from where there is one: the one way a hop joins a
    /// path, so that the request's destination is recorded as it goes.
    pub(super) fn join(
        &mut self,
        hop: Hop,
        from: Option<(NodeIndex, Link)>,
        branch: &mut Branch,
    ) -> NodeIndex {
        let held = hop
            .context
            .as_ref()
            .and_then(|context| context.last_packet.as_ref())
            .map(|packet| (packet.dst, packet.dport));
        branch
            .request
            .joined(from.as_ref().map(|(_, link)| &link.fields), held);
        let hop = self.graph.add_node(hop);
        if let Some((previous, link)) = from {
            self.graph.add_edge(previous, hop, link);
        }
        branch.hops.push(hop);
        hop
    }

    /// Gives each of `count` ways out of `hop` its own copy of the hop (with
    /// the steps so far and the link that led in), so that the steps of one
    /// branch never show up in another. The first way keeps `hop` itself.
    pub(super) fn fork(
        &mut self,
        hop: NodeIndex,
        branch: &Branch,
        count: usize,
    ) -> Vec<(NodeIndex, Branch)> {
        let base = self.graph[hop].clone();
        let incoming = branch.hops.iter().rev().nth(1).and_then(|&previous| {
            let edge = self.graph.find_edge(previous, hop)?;
            Some((previous, self.graph[edge].clone()))
        });
        let mut forks = Vec::with_capacity(count);
        for index in 0..count {
            let mut branch = branch.clone();
            let node = if index == 0 {
                hop
            } else {
                let node = self.graph.add_node(base.clone());
                if let Some((previous, link)) = &incoming {
                    self.graph.add_edge(*previous, node, link.clone());
                }
                if let Some(last) = branch.hops.last_mut() {
                    *last = node;
                }
                node
            };
            forks.push((node, branch));
        }
        forks
    }

    /// A finding that does not stop the path; said once however many
    /// branches pass the same place.
    pub(super) fn add_finding(
        &mut self,
        hop: NodeIndex,
        code: FindingCode,
        message: String,
        evidence: Vec<Evidence>,
    ) {
        let finding = self.finding_at(hop, code, message, evidence);
        if !self.findings.iter().any(|f| {
            (&f.id, &f.about.hop, &f.message) == (&finding.id, &finding.about.hop, &finding.message)
        }) {
            self.findings.push(finding);
        }
    }

    /// A finding at `hop` that the walk concluded (rather than one it could
    /// not: those are its stops for want of information).
    pub(super) fn finding_at(
        &self,
        hop: NodeIndex,
        code: FindingCode,
        message: String,
        evidence: Vec<Evidence>,
    ) -> Finding {
        Finding {
            id: code.into(),
            severity: code.severity,
            status: FindingStatus::Failed,
            message,
            evidence,
            expected: None,
            remediation: None,
            references: Vec::new(),
            about: AtHop {
                hop: self.graph[hop].id.clone(),
                hop_index: hop.index(),
            },
        }
    }

    /// Records a step; every step of an assumed hop is assumed.
    pub(super) fn step(&mut self, hop: NodeIndex, step: Step) {
        let assumed = self.graph[hop].assumed;
        self.graph[hop].steps.push(HopStep { step, assumed });
    }

    /// The request is for a socket of this hop's namespace (a reply is not:
    /// the sender's socket is no listener), whether one listens or not.
    pub(super) fn delivering(&mut self, hop: NodeIndex) {
        if let Some(context) = &mut self.graph[hop].context {
            context.delivered = true;
        }
    }

    /// The path stops at `hop`: what a stage returns for it.
    pub(super) fn stop(&self, hop: NodeIndex, branch: Branch, stop: Stop) -> Next<'s> {
        Next::Stop { hop, branch, stop }
    }

    /// The path ends: what a stage returns for it.
    pub(super) fn finish(&self, branch: Branch, disposition: Disposition) -> Next<'s> {
        Next::Finish {
            branch,
            disposition,
            exit: None,
        }
    }

    /// Records a stop: its step, its finding and the path it ends.
    pub(super) fn record_stop(&mut self, hop: NodeIndex, branch: Branch, mut stop: Stop) {
        if branch.reply {
            stop.reason = format!("on the way back: {}", stop.reason);
        }
        self.step(
            hop,
            Step::Stopped {
                disposition: stop.disposition,
                reason: stop.reason.clone(),
            },
        );
        // A path that ends for want of information is a finding that
        // cannot tell; every other stop is the kernel's (or the cluster's)
        // own doing.
        let status = match stop.disposition {
            Disposition::InsufficientInfo => FindingStatus::Unknown,
            _ => FindingStatus::Failed,
        };
        let finding = self.finding_at(hop, stop.id, stop.reason, stop.evidence);
        self.findings.push(Finding { status, ..finding });
        self.record_path(branch, stop.disposition, None);
    }

    /// Records a path that ended.
    pub(super) fn record_path(
        &mut self,
        branch: Branch,
        disposition: Disposition,
        exit: Option<Exit>,
    ) {
        let assumed_link = branch.hops.windows(2).any(|pair| {
            self.graph
                .find_edge(pair[0], pair[1])
                .is_some_and(|edge| self.graph[edge].kind.assumed())
        });
        self.paths.push(PathResult {
            disposition,
            probability: branch.probability,
            hops: branch.hops.iter().map(|h| h.index()).collect(),
            assumed: assumed_link || branch.hops.iter().any(|&h| self.graph[h].assumed),
            exit,
            backend: branch.request.now().map(|(address, port)| Backend {
                address,
                port,
                owner: self.owner(address),
            }),
        });
    }

    /// Whose address a backend's is: a pod's (not a host-network one, which
    /// shares its node's), else a node's.
    fn owner(&self, address: IpAddr) -> Option<HopId> {
        let owners = self.snapshot.cluster.by_ip(address);
        let pod = owners.iter().find_map(|owner| match owner {
            IpOwner::Pod {
                namespace,
                name,
                host_network: false,
            } => Some(HopId::pod(namespace, name)),
            _ => None,
        });
        let node = || {
            owners.iter().find_map(|owner| match owner {
                IpOwner::Node { name } => Some(HopId::node(name)),
                _ => None,
            })
        };
        pod.or_else(node)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;
    use super::*;

    #[test]
    fn a_fork_gives_each_way_its_own_copy_of_the_hop() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let mut branch = branch();
            let place = walker.test_hop(&host("n1"), &mut branch);
            walker.step(
                place.hop,
                Step::Delivered {
                    socket: "before the fork".into(),
                },
            );
            let forks = walker.fork(place.hop, &branch, 2);
            assert_eq!(forks[0].0, place.hop);
            assert_ne!(forks[1].0, place.hop);
            assert_eq!(forks[1].1.hops, [forks[1].0]);
            assert_eq!(walker.graph[forks[1].0].steps.len(), 1);
        });
    }

    #[test]
    fn the_driver_walks_a_forks_ways_in_order_and_records_each_stop() {
        let fixture = Fixture::new(&two_pods_on_a_bridge());
        fixture.walk(None, |walker| {
            let mut first = branch();
            let place = walker.test_hop(&host("n1"), &mut first);
            let mut second = first.clone();
            second.probability = 0.5;
            let stop = Stop::unknown(
                codes::SNAPSHOT_MISSING,
                "why".into(),
                vec![Evidence::file("where")],
            );
            walker.run(Next::Fork(vec![
                walker.stop(place.hop, first, stop),
                walker.finish(second, Disposition::Delivered),
            ]));
            let dispositions: Vec<_> = walker.paths.iter().map(|p| p.disposition).collect();
            assert_eq!(
                dispositions,
                [Disposition::InsufficientInfo, Disposition::Delivered]
            );
            assert_eq!(walker.findings[0].id, codes::SNAPSHOT_MISSING);
            assert_eq!(
                walker.findings[0].severity,
                crate::diagnostic::Severity::Warning
            );
            assert!(matches!(
                walker.graph[place.hop].steps[0].step,
                Step::Stopped { .. }
            ));
        });
    }
}
