//! What `skoop matrix` and `skoop diff` share: which flows, with which
//! packs, on how many threads. [`FlowArgs`] is what clap parses;
//! [`FlowArgs::options`] makes it the [`Flows`] both commands run on.

use std::path::Path;
use std::sync::Arc;

use clap::Args;
use skoop::engine::{Endpoint, Protocol};
use skoop::matrix::{self, Destinations, EachDiagnosis, Flow, PodSelector, Sources};
use skoop::packs::LoadedPacks;
use skoop::report::matrix::MatrixReport;
use skoop::snapshot::Snapshot;

use super::args::{
    CacheArgs, CniChoice, FamilyArg, LoadArgs, parse_endpoint, parse_port, protocol_parser,
};
use super::{report_empty_dumps, report_problems};

/// Which flows, with which packs, on how many threads.
#[derive(Debug, Args)]
pub struct FlowArgs {
    /// A source as diagnose's --from takes it: NS/NAME, node/NAME, an IP.
    #[arg(long, value_name = "SRC", value_parser = parse_endpoint, help_heading = "Sources")]
    from: Vec<Endpoint>,
    /// Every node's own namespace.
    #[arg(long, help_heading = "Sources")]
    from_nodes: bool,
    /// Pods by NAMESPACE[/LABELS] or */LABELS.
    #[arg(long, value_name = "SELECTOR", help_heading = "Sources")]
    from_pods: Vec<PodSelector>,
    /// One pod on each node: its first Running pod (by namespace and name).
    #[arg(long, help_heading = "Sources")]
    from_pod_per_node: bool,
    /// Only the nodes and pods (of those selected) the snapshot has dumps of.
    #[arg(long, help_heading = "Sources")]
    from_dumped_only: bool,
    /// Only the nodes and pods (of those selected) on a node the snapshot
    /// has the host dump of; a pod's own dump may be missing.
    #[arg(long, help_heading = "Sources")]
    from_dumped_nodes: bool,
    /// A destination as diagnose's --to takes it (--port where it has none).
    #[arg(long, value_name = "DST", value_parser = parse_endpoint, help_heading = "Destinations")]
    to: Vec<Endpoint>,
    /// Every port of every Service with a ClusterIP, on its own protocol.
    #[arg(long, help_heading = "Destinations")]
    to_services: bool,
    /// Pods by NAMESPACE[/LABELS] or */LABELS: each port they declare.
    #[arg(long, value_name = "SELECTOR", help_heading = "Destinations")]
    to_pods: Vec<PodSelector>,
    /// Every node, on --port (without it, pinged).
    #[arg(long, help_heading = "Destinations")]
    to_nodes: bool,
    /// The port of --to, --to-nodes and --to-pods destinations.
    #[arg(short, long, value_parser = parse_port, help_heading = "Destinations")]
    port: Option<u16>,
    /// The protocol of --to, and of --to-nodes and --to-pods with --port.
    #[arg(long, value_parser = protocol_parser(), default_value = "tcp", help_heading = "Destinations")]
    protocol: Protocol,
    /// Only the flows of this address family. Without it, a pair whose
    /// destination is dual-stack (and whose source has both families) is a
    /// flow in each family, as diagnose asks it.
    #[arg(long, value_name = "FAMILY", help_heading = "Destinations")]
    family: Option<FamilyArg>,
    /// The rule packs to consult (built-in ones always; see `skoop packs`).
    #[command(flatten)]
    packs: LoadArgs,
    /// The CNI pack to apply, as diagnose's --cni.
    #[arg(long, value_name = "auto|none|NAME", default_value = "auto", value_parser = CniChoice::parse)]
    cni: CniChoice,
    /// Worker threads (default: one per CPU); each loads its own packs.
    #[arg(short, long, value_name = "N")]
    jobs: Option<std::num::NonZeroUsize>,
    /// Diagnose every flow on its own, twins too (by default a source's
    /// twins, pods nothing in the snapshot tells apart from it, are
    /// answered by its diagnoses: docs/matrix.md, "Twins").
    #[arg(long)]
    each_flow: bool,
    #[command(flatten)]
    cache: CacheArgs,
}

impl FlowArgs {
    /// The flow options as the commands run on them.
    pub(super) fn options(self) -> Flows {
        Flows {
            sources: Sources {
                endpoints: self.from,
                nodes: self.from_nodes,
                pods: self.from_pods,
                pod_per_node: self.from_pod_per_node,
                dumped_only: self.from_dumped_only,
                on_dumped_nodes: self.from_dumped_nodes,
            },
            destinations: Destinations {
                endpoints: self.to,
                services: self.to_services,
                pods: self.to_pods,
                nodes: self.to_nodes,
                port: self.port,
                protocol: self.protocol,
                family: self.family.map(FamilyArg::family),
            },
            packs: self.packs,
            cni: self.cni,
            threads: self.jobs.map_or_else(
                || std::thread::available_parallelism().map_or(1, |n| n.get()),
                |n| n.get(),
            ),
            cache: self.cache,
            each_flow: self.each_flow,
        }
    }
}

/// Which flows, with which packs, on how many threads, validated.
pub(super) struct Flows {
    sources: Sources,
    destinations: Destinations,
    packs: LoadArgs,
    cni: CniChoice,
    threads: usize,
    cache: CacheArgs,
    /// `--each-flow`.
    each_flow: bool,
}

impl Flows {
    /// Whether any source and any destination is asked for.
    pub(super) fn selects(&self) -> bool {
        let (from, to) = (&self.sources, &self.destinations);
        let sources =
            !from.endpoints.is_empty() || from.nodes || !from.pods.is_empty() || from.pod_per_node;
        let destinations =
            !to.endpoints.is_empty() || to.services || !to.pods.is_empty() || to.nodes;
        sources && destinations
    }

    /// The packs as the run uses them: on this thread, to say every
    /// problem and note once and to check --cni, before any work.
    pub(super) fn check_packs(&self) -> Result<(), String> {
        let mut packs = self
            .packs
            .load()
            .map_err(|_| "the rule packs do not load".to_owned())?;
        self.cni
            .choose(&mut packs)
            .map_err(|e| format!("--cni: {e}"))
    }

    /// The packs each worker loads for itself (see `skoop::matrix`).
    fn worker_packs(&self) -> Result<LoadedPacks, String> {
        let (mut packs, problems) = self.packs.discover_and_load();
        if let Some(problem) = problems.first() {
            return Err(problem.to_string());
        }
        self.cni.choose(&mut packs)?;
        Ok(packs)
    }

    /// Loads `dir` and answers `flows` on it (the selected ones when
    /// `None`); with `each` (or `--each-flow`), every flow is diagnosed and
    /// `each` sees its diagnosis, else twins are answered once. The
    /// snapshot is given back with the report (`matrix --confirm` reaches
    /// its nodes).
    pub(super) fn run(
        &self,
        dir: &Path,
        flows: Option<Vec<Flow>>,
        each: Option<EachDiagnosis>,
    ) -> Result<(MatrixReport, Arc<Snapshot>), String> {
        let (snapshot, problems) = self.cache.load(dir).map_err(|e| e.to_string())?;
        report_problems(&problems);
        report_empty_dumps(&snapshot);
        let snapshot = Arc::new(snapshot);
        let flows =
            flows.unwrap_or_else(|| matrix::flows(&snapshot, &self.sources, &self.destinations));
        if flows.is_empty() {
            return Err(format!(
                "{}: the selection gives no flow (no source, or no destination, in the snapshot)",
                dir.display()
            ));
        }
        let nothing: EachDiagnosis = &|_, _| {};
        let each = each.or(self.each_flow.then_some(nothing));
        let answers = matrix::evaluate(
            &snapshot,
            &flows,
            self.threads,
            &|| self.worker_packs(),
            each,
        )
        .map_err(|e| e.to_string())?;
        let mut report = MatrixReport::new(dir.display().to_string(), answers.flows);
        report.twins = answers.twins;
        Ok((report, snapshot))
    }
}
