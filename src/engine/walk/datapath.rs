//! Programs attached to devices. Where a BPF program sees the packet (XDP
//! and tc ingress on the device it arrives on, tc egress on the device it
//! leaves by), the kernel does not decide for it alone: the pack that
//! claims the program says what it does (the `datapath` hook), and the walk
//! follows that answer like any other hop. A program no pack claims is
//! unknown, never assumed to hand the packet to the stack.

use super::*;
use crate::engine::hooks::{DatapathAnswer, DatapathVerdict, ProgramBackend, RedirectTo};
use crate::snapshot::netns::bpf::{Attachment, Direction, Hook};

/// How often the programs of one device may translate a packet before the
/// walk calls it a loop: each translation asks the program again.
const MAX_TRANSLATIONS: usize = 4;

/// Where the walk goes on once the programs of a device have passed the
/// packet to the stack.
#[derive(Debug, Clone)]
pub(super) enum Resume {
    /// Received on `arrival`'s device: the stack processes it.
    Ingress { arrival: Arrival },
    /// Routed out of `dev` to `next_hop`: the device sends it.
    Egress { dev: String, next_hop: IpAddr },
    /// Redirected out of `dev` by a program: the device sends it as it is.
    Redirected { dev: String },
    /// Redirected into the collect-metadata tunnel device `dev` for `remote`.
    Tunnel {
        dev: String,
        remote: IpAddr,
        vni: Option<u32>,
    },
}

impl Resume {
    fn device(&self) -> Option<(&str, Direction)> {
        match self {
            Resume::Ingress { arrival } => arrival.interface().map(|d| (d, Direction::Ingress)),
            Resume::Egress { dev, .. }
            | Resume::Redirected { dev }
            | Resume::Tunnel { dev, .. } => Some((dev, Direction::Egress)),
        }
    }
}

impl<'s> Walker<'s> {
    /// The programs attached to `dev` of `ns` that see packets going
    /// `direction`, in the order they run (XDP before tc). A dump without
    /// `bpf-net.json` has none, unless a pack models a datapath: then which
    /// programs are there is unknown.
    fn programs(
        &self,
        ns: &NetnsId,
        dev: &str,
        direction: Direction,
    ) -> Result<Vec<&'s Attachment>, Stop> {
        let Some(entry) = self.snapshot.namespaces.get(ns) else {
            return Ok(Vec::new());
        };
        let dump = entry.dump();
        let Some(programs) = &dump.programs else {
            let state = dump.state(DumpFile::BpfNet);
            if state.is_damaged() || self.intent.models_datapaths() {
                let reason = format!(
                    "{} of {}: whether a BPF program decides for the packet on {dev} is unknown",
                    dump.missing(DumpFile::BpfNet).of(hop_id(ns)),
                    hop_id(ns),
                );
                return Err(Stop::unknown(
                    codes::DATAPATH_UNKNOWN,
                    reason,
                    vec![self.file(ns, DumpFile::BpfNet)],
                ));
            }
            return Ok(Vec::new());
        };
        let mut found: Vec<&'s Attachment> = programs
            .iter()
            .filter(|a| a.device == dev && a.hook.direction() == Some(direction))
            .collect();
        // XDP runs on the frame before tc's ingress.
        found.sort_by_key(|a| !matches!(a.hook, Hook::Xdp { .. }));
        if let Some(other) = programs
            .iter()
            .find(|a| a.device == dev && a.hook.direction().is_none())
        {
            let reason = format!(
                "{} has program {} on {dev} at a hook skoop does not know ({}): what it does to the packet is unknown",
                hop_id(ns),
                other.name,
                other.hook.text()
            );
            return Err(Stop::unknown(
                codes::DATAPATH_UNKNOWN,
                reason,
                vec![self.file(ns, DumpFile::BpfNet)],
            ));
        }
        Ok(found)
    }

    /// Runs the programs of `resume`'s device from the `from`th on, then
    /// goes on as `resume` says once they pass the packet to the stack.
    pub(super) fn run_programs(
        &mut self,
        place: &Place,
        flow: Flow,
        resume: Resume,
        from: usize,
        translations: usize,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Some((dev, direction)) = resume.device() else {
            return self.resume(place, flow, resume);
        };
        let dev = dev.to_string();
        let mut flow = flow;
        self.undo_program_nat(ns, hop, &mut flow);
        let programs = match self.programs(ns, &dev, direction) {
            Ok(programs) => programs,
            Err(stop) => return self.stop(hop, flow.branch, stop),
        };
        for (index, attachment) in programs.into_iter().enumerate().skip(from) {
            let in_iface = (direction == Direction::Ingress).then_some(dev.as_str());
            let scope = self.scope(ns, &flow.packet, in_iface);
            let answer = match self.intent.datapath(&scope, attachment) {
                Err(undecided) => return self.undecided(hop, flow.branch, undecided),
                Ok(None) => {
                    let reason = format!(
                        "program {} ({}) on {dev} of {} sees the packet, and no pack claims it: what it does is unknown",
                        attachment.name,
                        attachment.hook.text(),
                        hop_id(ns)
                    );
                    let evidence = vec![self.program_evidence(ns, attachment)];
                    let stop = Stop::unknown(codes::DATAPATH_UNCLAIMED, reason, evidence);
                    return self.stop(hop, flow.branch, stop);
                }
                Ok(Some(answer)) => answer,
            };
            self.step(
                hop,
                Step::Program {
                    device: dev.clone(),
                    hook: attachment.hook.text(),
                    program: attachment.name.clone(),
                    verdict: answer.verdict.text(),
                    why: format!("pack {}: {}", answer.pack, answer.why),
                },
            );
            match &answer.verdict {
                DatapathVerdict::Pass => continue,
                DatapathVerdict::Drop { id } => {
                    let reason = format!(
                        "program {} ({}) on {dev} of {} drops the packet: {} (pack {}, {id})",
                        attachment.name,
                        attachment.hook.text(),
                        hop_id(ns),
                        answer.why,
                        answer.pack
                    );
                    let mut evidence = vec![self.program_evidence(ns, attachment)];
                    evidence.extend(self.answer_evidence(ns, &answer));
                    let stop = Stop {
                        disposition: Disposition::DroppedByProgram,
                        id: codes::DATAPATH_DROP,
                        reason,
                        evidence,
                    };
                    return self.stop(hop, flow.branch, stop);
                }
                DatapathVerdict::Redirect { dev: to, to: how } => {
                    return self.redirect(place, flow, to, *how);
                }
                DatapathVerdict::Encapsulate { dev, remote, vni } => {
                    let resume = Resume::Tunnel {
                        dev: dev.clone(),
                        remote: *remote,
                        vni: *vni,
                    };
                    return self.run_programs(place, flow, resume, 0, 0);
                }
                DatapathVerdict::Translate { service, backends } => {
                    if translations >= MAX_TRANSLATIONS {
                        let reason = format!(
                            "program {} on {dev} of {} translates the packet again and again: a loop",
                            attachment.name,
                            hop_id(ns)
                        );
                        let stop = Stop {
                            disposition: Disposition::Loop,
                            id: codes::ENGINE_LOOP,
                            reason,
                            evidence: vec![self.program_evidence(ns, attachment)],
                        };
                        return self.stop(hop, flow.branch, stop);
                    }
                    return self.translate_by_program(
                        place,
                        flow,
                        (&answer, service, backends),
                        (resume, index, translations),
                    );
                }
            }
        }
        self.resume(place, flow, resume)
    }

    /// Every backend a program translates a service to is a way of its
    /// own; conntrack undoes the translation for the reply in this
    /// namespace, as it does netfilter's.
    fn translate_by_program(
        &mut self,
        place: &Place,
        flow: Flow,
        (answer, service, backends): (&DatapathAnswer, &str, &[ProgramBackend]),
        (resume, index, translations): (Resume, usize, usize),
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let Flow { packet, branch } = flow;
        let before = netfilter::Endpoint {
            addr: packet.ip.dst,
            port: packet.ip.dport,
        };
        if backends.is_empty() {
            let stop = Stop {
                disposition: Disposition::NoListener,
                id: codes::KUBERNETES_SERVICE_NO_BACKEND,
                reason: format!(
                    "pack {}: service {service} has no backend for {before}: {}",
                    answer.pack, answer.why
                ),
                evidence: self.answer_evidence(ns, answer),
            };
            return self.stop(hop, branch, stop);
        }
        let share = 1.0 / backends.len() as f64;
        let forks = self.fork(hop, &branch, backends.len());
        let mut ways = Vec::with_capacity(forks.len());
        for (backend, (hop, mut branch)) in backends.iter().zip(forks) {
            let after = netfilter::Endpoint {
                addr: backend.ip,
                port: Some(backend.port),
            };
            let dnat = Translation::Dnat { before, after };
            let mut packet = packet.clone();
            let mut translation = format!("{dnat}");
            if let Some(snat) = backend.snat {
                let source = netfilter::Endpoint {
                    addr: packet.ip.src,
                    port: None,
                };
                let to = netfilter::Endpoint {
                    addr: snat,
                    port: None,
                };
                translation = format!("{translation}, snat {} -> {snat}", packet.ip.src);
                branch.program_nat.push((
                    ns.clone(),
                    Translation::Snat {
                        before: source,
                        after: to,
                    },
                ));
                packet.ip.src = snat;
            }
            self.step(
                hop,
                Step::Translated {
                    hook: "BPF".into(),
                    table: answer.pack.clone(),
                    translation: format!("{translation} (service {service}: {})", answer.why),
                },
            );
            branch.probability *= share;
            branch.program_nat.push((ns.clone(), dnat));
            packet.ip.dst = backend.ip;
            packet.ip.dport = Some(backend.port);
            let place = Place::new(ns, hop);
            let flow = Flow { packet, branch };
            ways.push(self.run_programs(&place, flow, resume.clone(), index, translations + 1));
        }
        Next::Fork(ways)
    }

    /// A reply meets the translations a program of this namespace made for
    /// its request: the datapath undoes them (its own connection tracking)
    /// before its programs decide, once.
    fn undo_program_nat(&mut self, ns: &NetnsId, hop: NodeIndex, flow: &mut Flow) {
        if !flow.packet.reply {
            return;
        }
        let packet = &mut flow.packet;
        let mut undone = Vec::new();
        flow.branch.program_nat.retain(|(at, translation)| {
            // The datapath's own connection tracking undoes both kinds at once.
            let reversed = (at == ns)
                .then(|| {
                    reverse(translation, packet, UndoPhase::BeforeRouting)
                        .or_else(|| reverse(translation, packet, UndoPhase::AfterRouting))
                })
                .flatten();
            match reversed {
                Some(words) => {
                    undone.push(words);
                    false
                }
                None => true,
            }
        });
        for translation in undone {
            self.step(
                hop,
                Step::Translated {
                    hook: "BPF".into(),
                    table: "conntrack".into(),
                    translation,
                },
            );
        }
    }

    /// Where the walk goes once the programs pass the packet on.
    fn resume(&mut self, place: &Place, flow: Flow, resume: Resume) -> Next<'s> {
        match resume {
            Resume::Ingress { arrival } => self.process(place, flow, arrival),
            Resume::Egress { dev, next_hop } => self.transmit(place, &dev, next_hop, flow),
            Resume::Redirected { dev } => self.redirected_out(place, &dev, flow),
            Resume::Tunnel { dev, remote, vni } => {
                self.tunnel_by_program(place, &dev, remote, vni, flow)
            }
        }
    }

    /// A program's redirect.
    fn redirect(&mut self, place: &Place, flow: Flow, dev: &str, to: RedirectTo) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        match to {
            RedirectTo::Egress => {
                let resume = Resume::Redirected {
                    dev: dev.to_string(),
                };
                self.run_programs(place, flow, resume, 0, 0)
            }
            RedirectTo::Ingress => Next::Enter {
                place: place.clone(),
                flow,
                arrival: Arrival::Received(dev.to_string()),
            },
            RedirectTo::Peer => {
                let peer = self
                    .topology
                    .link(ns, dev)
                    .and_then(|device| self.topology.veth_peer(ns, device));
                let Some(peer) = peer else {
                    let stop = self.unfollowed_redirect(ns, dev, "into its veth peer");
                    return self.stop(hop, flow.branch, stop);
                };
                let crossing = Crossing {
                    kind: LinkKind::Veth,
                    from_interface: dev,
                    to: peer.ns,
                    interface: &peer.link.ifname,
                };
                self.arrive(hop, crossing, flow)
            }
        }
    }

    /// A packet a program redirected out of `dev`: the frame is sent as the
    /// program left it (no neighbour lookup), to the veth's far end.
    fn redirected_out(&mut self, place: &Place, dev: &str, flow: Flow) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        // The hop's packet leaves by the device the program chose, as the
        // packs see it (a packet out of a tunnel is seen decapsulated).
        if let Some(context) = &mut self.graph[hop].context
            && context.out_iface.is_none()
        {
            context.out_iface = Some(dev.to_string());
            context.out_packet = Some(flow.packet.pack_packet());
            context.redirected = true;
        }
        let device = match self.device(ns, dev, "follow a program's redirect") {
            Ok(device) => device,
            Err(stop) => return self.stop(hop, flow.branch, stop),
        };
        let Some(peer) = self.topology.veth_peer(ns, device) else {
            let stop = self.unfollowed_redirect(ns, dev, "out of it");
            return self.stop(hop, flow.branch, stop);
        };
        self.cross(
            place,
            device,
            LinkKind::Veth,
            peer.ns,
            &peer.link.ifname,
            flow,
        )
    }

    /// A program put the packet into a collect-metadata tunnel device with
    /// its far end: the device encapsulates it for `remote`, on its own UDP
    /// port, the VNI the program set (else the device's).
    fn tunnel_by_program(
        &mut self,
        place: &Place,
        dev: &str,
        remote: IpAddr,
        vni: Option<u32>,
        flow: Flow,
    ) -> Next<'s> {
        let (ns, hop) = (&place.ns, place.hop);
        let device = match self.device(ns, dev, "encapsulate") {
            Ok(device) => device,
            Err(stop) => return self.stop(hop, flow.branch, stop),
        };
        if let Some(stop) = self.device_down(ns, device) {
            return self.stop(hop, flow.branch, stop);
        }
        let header = match device.kind() {
            Some(DeviceKind::Vxlan(info)) if info.external => {
                match self.vxlan_df(ns, device, info) {
                    Ok(df) => TunnelHeader {
                        encapsulation: Encapsulation::Vxlan {
                            vni: vni.unwrap_or(info.id),
                            inner_mac: None,
                        },
                        device: device.ifname.clone(),
                        src: info.local,
                        dst: remote,
                        udp_port: info.port,
                        df,
                    },
                    Err(stop) => return self.stop(hop, flow.branch, stop),
                }
            }
            _ => {
                let stop = self.unfollowed_redirect(
                    ns,
                    dev,
                    "as a tunnel: only a VXLAN device in collect-metadata (external) mode takes its far end from a program",
                );
                return self.stop(hop, flow.branch, stop);
            }
        };
        self.encapsulate(place, flow, header)
    }

    fn unfollowed_redirect(&self, ns: &NetnsId, dev: &str, how: &str) -> Stop {
        let reason = format!(
            "a program of {} redirects the packet to {dev} {how}, which skoop does not follow",
            hop_id(ns)
        );
        Stop::unknown(
            codes::DATAPATH_UNKNOWN,
            reason,
            vec![self.file(ns, DumpFile::IpLink)],
        )
    }

    /// The attachment, at its place in `bpf-net.json`.
    fn program_evidence(&self, ns: &NetnsId, attachment: &Attachment) -> Evidence {
        let mut evidence = self.file(ns, DumpFile::BpfNet);
        if let Some(entry) = self.snapshot.namespaces.get(ns)
            && let Some(programs) = &entry.dump().programs
            && let Some((line, column)) =
                entry
                    .dump()
                    .place_of(DumpFile::BpfNet, programs, attachment)
        {
            evidence.line = Some(line);
            evidence.column = Some(column);
        }
        evidence.noting(format!("{} on {}", attachment.name, attachment.device))
    }

    /// The datapath entries a pack's answer cites, each at its place.
    fn answer_evidence(&self, ns: &NetnsId, answer: &DatapathAnswer) -> Vec<Evidence> {
        let Some(entry) = self.snapshot.namespaces.get(ns) else {
            return Vec::new();
        };
        answer
            .evidence
            .iter()
            .map(|cited| {
                let mut evidence = Evidence::file(entry.dir.join(&cited.file));
                let place = cited
                    .key
                    .as_ref()
                    .and_then(|key| entry.dump().datapath.at(&cited.file)?.place_of(key));
                if let Some((line, column)) = place {
                    evidence.line = Some(line);
                    evidence.column = Some(column);
                }
                let note = match (&cited.key, &cited.note) {
                    (Some(key), Some(note)) => Some(format!("{key}: {note}")),
                    (Some(key), None) => Some(key.clone()),
                    (None, note) => note.clone(),
                };
                match note {
                    Some(note) => evidence.noting(note),
                    None => evidence,
                }
            })
            .collect()
    }
}
