//! `skoop diagnose`: where a flow stops in a snapshot, and why.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use petgraph::graph::NodeIndex;
use skoop::engine::{
    self, Diagnosis, Disposition, Endpoint, PacketSize, Protocol, Request, Severity, Step,
};
use skoop::packs::LoadedPacks;
use skoop::report::json::{ErrorReport, Report, link_kind};
use skoop::snapshot::Snapshot;
use tempfile::TempDir;

use super::live::{LiveArgs, Stopped, Summary, collect_flow, print_outcomes};
use super::packs::LoadArgs;
use super::{EXIT_USAGE, OutputFormat, ProtocolArg, print_json, report_problems};

/// Follow a packet hop by hop through a cluster and say where it stops.
///
/// Without --snapshot, skoop asks the cluster of your kubeconfig (as kubectl
/// does: --kubeconfig, --context, KUBECONFIG, in-cluster): it lists the
/// objects, collects the network namespaces the flow goes through (walking
/// it, collecting what the walk lacked, walking again), writes them all as
/// a snapshot (--save-snapshot DIR keeps it) and diagnoses that snapshot
/// exactly as offline. With --snapshot DIR it reads a collected snapshot.
///
/// Each network namespace on the way is asked what its kernel does with the
/// packet: routing (policy rules, tables), netfilter and IPVS (kube-proxy's
/// NAT included), forwarding and rp_filter, veths, bridges, VXLAN neighbour
/// and FDB entries, IPIP tunnels, every device's MTU, a listening socket,
/// and the reply back. Every service backend and multipath nexthop is a path
/// of its own. Then the rule packs check each hop against what the CNI
/// intended. A node or pod the snapshot has no dump of is stepped over with
/// the CNI pack's intent, and every hop and path concluded that way is
/// marked "(assumed)".
///
/// Examples:
///   skoop diagnose --from default/web-0 --to svc/default/web --save-snapshot ticket-1234
///   skoop diagnose --context prod --from default/web-0 --to 10.244.2.3:8080 --node-exec 'ssh {address} sudo'
///   skoop diagnose --snapshot examples/flannel-vxlan --from default/web-0 --to default/web-3:8080
///   skoop diagnose --snapshot examples/flannel-vxlan --from default/web-0 --to svc/default/web
///   skoop diagnose --snapshot snap --from node/node-1 --to 10.244.2.3 --protocol icmp -o json
///   skoop diagnose --snapshot snap --from default/web-0 --to default/web-3 --protocol icmp --size mtu
///   skoop diagnose --snapshot snap --from default/web-0 --to svc/default/signalling --protocol sctp
///
/// Exit status: 0 when every path is delivered and nothing fatal was found,
/// 1 otherwise (the report is printed either way), 2 for bad arguments or
/// input (unknown pod, malformed address, not a snapshot, a broken pack, a
/// cluster that cannot be reached or refuses skoop).
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DiagnoseArgs {
    /// A collected snapshot directory; without it, the live cluster.
    #[arg(long, value_name = "DIR", conflicts_with = "save_snapshot")]
    snapshot: Option<PathBuf>,
    /// Keep what a live diagnosis collected in DIR (to replay it offline
    /// with --snapshot DIR, or attach it to a ticket).
    #[arg(long, value_name = "DIR")]
    save_snapshot: Option<PathBuf>,
    #[command(flatten)]
    live: LiveArgs,
    /// Where the packet starts: a pod (NS/NAME), a node (node/NAME) or an IP of one.
    #[arg(long, value_name = "SRC", value_parser = super::parse_endpoint)]
    from: Endpoint,
    /// Where it goes: a pod (NS/NAME[:PORT]), a node (node/NAME[:PORT]), a
    /// service (svc/NS/NAME[:PORT]) or an address (IP[:PORT], [IPv6]:PORT).
    #[arg(long, value_name = "DST", value_parser = super::parse_endpoint)]
    to: Endpoint,
    /// Destination port (tcp, udp, sctp); also accepted as DST:PORT. Not
    /// needed for a service with one port of the protocol or a pod declaring
    /// one container port of it.
    #[arg(long, value_parser = super::parse_port)]
    port: Option<u16>,
    /// The flow's protocol. A service's port and a pod's declared port are
    /// those of this protocol.
    #[arg(long, value_enum, default_value_t = ProtocolArg::Tcp)]
    protocol: ProtocolArg,
    /// Walk packets of this size (IP header included) with DF set, as
    /// `ping -M do -s BYTES-28` sends them: a device they do not fit stops
    /// the path (mtu_exceeded). `mtu`: the MTU of the source's interface.
    /// Without it a small packet is walked, and where a full-size one would
    /// not fit is a warning.
    #[arg(long, value_name = "BYTES|mtu")]
    size: Option<PacketSize>,
    /// The rule packs to consult (built-in ones always; see `skoop packs`).
    #[command(flatten)]
    packs: LoadArgs,
    /// The CNI pack to apply: `auto` detects it from the cluster's objects
    /// (DaemonSets, ConfigMaps, node annotations, CRDs); a name forces that
    /// pack whatever detection says; `none` applies no CNI pack, so nothing
    /// stands in for a namespace the snapshot lacks.
    #[arg(long, value_name = "auto|none|NAME", default_value = "auto")]
    cni: String,
    /// Show every step (rules and tables of each route, packets on every link).
    #[arg(short, long)]
    verbose: bool,
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
}

pub fn run(args: Box<DiagnoseArgs>) -> ExitCode {
    let mut packs = match args.packs.load() {
        Ok(packs) => packs,
        Err(code) => return code,
    };
    if args.cni != "auto"
        && let Err(e) = packs.choose_cni(&args.cni)
    {
        return usage_error(args.output, format!("--cni: {e}"));
    }
    let protocol = Protocol::from(args.protocol);
    let request = Request {
        from: args.from.clone(),
        to: args.to.clone(),
        port: args.port,
        protocol,
        size: args.size,
    };
    // A live diagnosis collects into a directory, then reads it as any
    // snapshot: the answer can be replayed offline.
    let (dir, _temporary) = match &args.snapshot {
        Some(dir) => (dir.clone(), None),
        None => match collect_live(&args, &packs, &request) {
            Ok(collected) => collected,
            Err(Stopped::Error(message)) => return usage_error(args.output, message),
            Err(stopped) => return stopped.report(),
        },
    };
    let (snapshot, problems) = match Snapshot::load(&dir) {
        Ok((snapshot, problems)) => (Arc::new(snapshot), problems),
        Err(e) => return usage_error(args.output, e.to_string()),
    };
    report_problems(&problems);
    let diagnosis = match engine::diagnose(&snapshot, &request, &packs) {
        Ok(diagnosis) => diagnosis,
        Err(e) => return usage_error(args.output, e.to_string()),
    };
    match args.output {
        OutputFormat::Json => {
            if let Err(code) = print_json(&Report::new(&diagnosis)) {
                return code;
            }
        }
        OutputFormat::Text => print_text(&diagnosis, args.verbose),
    }
    let fatal = diagnosis
        .findings
        .iter()
        .any(|f| f.severity == Severity::Fatal);
    let code = if diagnosis.disposition() == Disposition::Delivered && !fatal {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    // The process ends here: freeing a large cluster object by object
    // would take a tenth of the run, and the system takes it back at once.
    std::mem::forget((snapshot, diagnosis));
    code
}

/// A bad argument or input: said on stderr, and under `-o json` as a JSON
/// object on stdout too, so that a script reading stdout gets JSON either way.
/// Collects what `request` needs from the live cluster into
/// `--save-snapshot DIR`, or a temporary directory (returned too, so that
/// it lives as long as the diagnosis reads it).
fn collect_live(
    args: &DiagnoseArgs,
    packs: &LoadedPacks,
    request: &Request,
) -> Result<(PathBuf, Option<TempDir>), Stopped> {
    let (dir, temporary) = match &args.save_snapshot {
        Some(dir) => (dir.clone(), None),
        None => {
            let temporary = tempfile::Builder::new()
                .prefix("skoop-snapshot-")
                .tempdir()
                .map_err(|e| {
                    Stopped::Error(format!("cannot create a temporary snapshot directory: {e}"))
                })?;
            (temporary.path().to_path_buf(), Some(temporary))
        }
    };
    args.live.run(packs, &dir, async |collection| {
        collect_flow(collection, packs, request).await?;
        print_outcomes(collection, Summary::Brief);
        Ok(())
    })?;
    if args.save_snapshot.is_some() {
        err!(
            "saved the snapshot in {0}; replay with --snapshot {0}",
            dir.display()
        );
    }
    Ok((dir, temporary))
}

fn usage_error(output: OutputFormat, error: String) -> ExitCode {
    eprintln!("error: {error}");
    if let OutputFormat::Json = output
        && let Err(code) = print_json(&ErrorReport::new(error))
    {
        return code;
    }
    ExitCode::from(EXIT_USAGE)
}

fn print_text(diagnosis: &Diagnosis, verbose: bool) {
    // The verdict first, then where it stops.
    let disposition = diagnosis.disposition();
    out!(
        "{}: {disposition}{}",
        diagnosis.summary,
        assumed_mark(diagnosis.assumed())
    );
    if let Some(pack) = &diagnosis.assumed_by {
        let namespaces: Vec<&str> = diagnosis
            .findings
            .iter()
            .filter(|f| f.id == "snapshot.assumed")
            .map(|f| f.hop.as_str())
            .collect();
        out!(
            "  assumed: the snapshot has no dump of {}; pack {pack}'s intent stands in there",
            namespaces.join(", ")
        );
    }
    for finding in diagnosis
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Fatal)
    {
        out!("  stops at {}: {}", finding.hop, finding.message);
    }
    let count = diagnosis.paths.len();
    for (number, path) in diagnosis.paths.iter().enumerate() {
        out!();
        out!(
            "path {} of {count} ({:.0}% of flows): {}{}",
            number + 1,
            path.probability * 100.0,
            path.disposition,
            assumed_mark(path.assumed)
        );
        let mut previous: Option<usize> = None;
        for &index in &path.hops {
            if let Some(from) = previous
                && let Some(edge) = diagnosis
                    .graph
                    .find_edge(NodeIndex::new(from), NodeIndex::new(index))
            {
                let link = &diagnosis.graph[edge];
                let to = link.to_interface.as_deref().unwrap_or("");
                let kind = link_kind(link.kind);
                if verbose {
                    out!(
                        "   | {kind} {} -> {to}: {}",
                        link.from_interface,
                        link.packet
                    );
                } else {
                    out!("   | {kind} {} -> {to}", link.from_interface);
                }
            }
            previous = Some(index);
            let hop = diagnosis.hop(index);
            let what = match hop.kind {
                engine::HopKind::Pod => format!("pod on {}", hop.node.as_deref().unwrap_or("?")),
                engine::HopKind::Node => "node".to_string(),
                engine::HopKind::External => "outside the cluster".to_string(),
            };
            out!("  {} [{what}]{}", hop.id, assumed_mark(hop.assumed));
            for step in &hop.steps {
                // In an assumed hop every step is: the hop says so once.
                let mark = assumed_mark(step.assumed && !hop.assumed);
                out!("      {}{mark}", step_line(&step.step, verbose));
            }
        }
    }
    if !diagnosis.findings.is_empty() {
        out!();
        out!("findings:");
        for finding in &diagnosis.findings {
            let severity = finding.severity.as_str();
            out!(
                "  {severity} {} at {}: {}",
                finding.id,
                finding.hop,
                finding.message
            );
            out!("      evidence: {}", finding.evidence);
        }
    }
}

/// What marks a verdict, path, hop or step concluded from a pack's intent.
fn assumed_mark(assumed: bool) -> &'static str {
    if assumed { " (assumed)" } else { "" }
}

fn step_line(step: &Step, verbose: bool) -> String {
    match step {
        Step::Sent { packet } => format!("sends {packet}"),
        Step::Received { interface, packet } => {
            if verbose {
                format!("receives on {interface}: {packet}")
            } else {
                format!("receives on {interface}")
            }
        }
        Step::Route {
            rule,
            route,
            result,
        } => {
            if verbose && !rule.is_empty() {
                format!("route: {result} ({route}; rule {rule})")
            } else {
                format!("route: {result} ({route})")
            }
        }
        Step::Translated {
            hook,
            table,
            translation,
        } => format!("netfilter {hook} {table}: {translation}"),
        Step::Netfilter {
            decision,
            rule,
            line,
            ..
        } => match line {
            Some(line) => format!("netfilter: {decision}, line {line}: {rule}"),
            None => format!("netfilter: {decision}"),
        },
        Step::Neighbour {
            address,
            interface,
            result,
        } => format!("neighbour {address} on {interface}: {result}"),
        Step::Bridged { bridge, port } => format!("bridge {bridge} forwards to port {port}"),
        Step::Encapsulated { device, outer } => format!("{device} encapsulates: {outer}"),
        Step::Decapsulated { device, inner } => format!("{device} decapsulates: {inner}"),
        Step::Delivered { socket } => format!("delivered to {socket}"),
        Step::Stopped {
            disposition,
            reason,
        } => format!("STOPPED ({disposition}): {reason}"),
    }
}
