//! `skoop diagnose`: where a flow stops in a snapshot, and why.
//! [`DiagnoseArgs`] is what clap parses; [`DiagnoseArgs::options`] makes it
//! the [`Diagnose`] the command runs on; `report::text` and the other
//! reports say the diagnosis, written here to stdout or `--output FILE`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use skoop::collect::live::LiveCollection;
use skoop::confirm::{Confirmation, NodeShells, Templated, confirm};
use skoop::engine::{self, Diagnosis, Endpoint, PacketSize, Protocol, Request};
use skoop::net::Family;
use skoop::packs::LoadedPacks;
use skoop::report::json::{ErrorReport, Report};
use skoop::report::picture::Picture;
use skoop::report::text::{self, Detail};
use skoop::report::{dot, html, svg};
use skoop::snapshot::Snapshot;
use skoop::snapshot::cluster::cache;
use skoop::snapshot::input::Boundary;
use tempfile::TempDir;

use super::args::{
    CacheArgs, CniChoice, FamilyArg, LoadArgs, Loaded, Loading, parse_endpoint, parse_port,
    protocol_parser,
};
use super::interrupt::Temporary;
use super::live::{LiveArgs, Stopped, Summary, collect_flow, print_outcomes, runtime};
use super::{
    EXIT_USAGE, ReportFile, json_text, report_empty_dumps, report_problems, terminal_lines,
    verdict_status, write_raw,
};

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
///   skoop diagnose --from default/web-0 --to default/web-3:8080 --confirm
///   skoop diagnose --snapshot ticket-1234 --from default/web-0 --to svc/default/web --confirm --node-exec 'ssh {address} sudo -n'
///   skoop diagnose --context prod --from default/web-0 --to 10.244.2.3:8080 --node-exec 'ssh {address} sudo'
///   skoop diagnose --snapshot examples/flannel-vxlan --from default/web-0 --to default/web-3:8080
///   skoop diagnose --snapshot examples/flannel-vxlan --from default/web-0 --to svc/default/web
///   skoop diagnose --snapshot snap --from node/node-1 --to 10.244.2.3 --protocol icmp -o json
///   skoop diagnose --snapshot snap --from default/web-0 --to default/web-3 --protocol icmp --size mtu
///   skoop diagnose --snapshot snap --from default/web-0 --to svc/default/signalling --protocol sctp
///   skoop diagnose --snapshot snap --from 198.51.100.7 --via node/node-2 --to node/node-2:30080
///   skoop diagnose --snapshot examples/flannel-vxlan-broken --from default/web-0 --to svc/default/web --output web.html
///
/// Formats (-o, or guessed from the extension of --output FILE: .json,
/// .dot/.gv, .svg, .html/.htm, anything else text):
///   text  the verdict, which backends fail, one line per path (its backend,
///         disposition and where it stops), then the findings, each once;
///         --detail: every hop and step of each path; -v: with packets too
///   json  the report scripts read (docs/json.md)
///   dot   the path graph for Graphviz: hops grouped by node, links labelled
///         with the packet on the wire, each path's end and disposition
///   svg   the same picture drawn by skoop (no Graphviz needed), with the
///         verdict and key findings in a legend
///   html  one self-contained page: the verdict, findings with evidence,
///         the picture, the paths, and each hop's steps on a click
///
/// Exit status (the report is written whatever it is):
///   0  every path is delivered (or, for a destination outside the cluster,
///      leaves it with a source address the outside can answer: a node's,
///      not a pod's) and no critical or fatal finding is about a hop of its
///      paths
///   1  some path is not delivered (a pod, node or Service of the cluster a
///      path leaves the cluster instead of reaching is not delivered)
///   2  bad arguments or input (unknown pod, malformed address, not a
///      snapshot, a broken pack, a cluster that cannot be reached or
///      refuses skoop)
///   3  every path is delivered, but a critical or fatal finding about a hop
///      of its paths says something on the way is broken all the same (the
///      verdict counts them; findings listed under "also on these nodes" are
///      not about the paths and count for nothing)
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DiagnoseArgs {
    /// A collected snapshot directory; without it, the live cluster.
    // Not `conflicts_with = "save_snapshot"`: clap would blame --snapshot
    // for a SKOOP_SNAPSHOT the user may have forgotten; `run` says both.
    #[arg(short, long, value_name = "DIR", env = "SKOOP_SNAPSHOT")]
    snapshot: Option<PathBuf>,
    /// Keep what a live diagnosis collected in DIR (to replay it offline
    /// with --snapshot DIR, or attach it to a ticket), with its cluster
    /// cache (`skoop snapshot cache --help`).
    #[arg(long, value_name = "DIR")]
    save_snapshot: Option<PathBuf>,
    #[command(flatten)]
    cache: CacheArgs,
    #[command(flatten)]
    live: LiveArgs,
    /// Where the packet starts: a pod (NS/NAME, pod/NS/NAME), a node (node/NAME) or an IP of one.
    #[arg(short, long, value_name = "SRC")]
    from: String,
    /// For a client outside the cluster (--from IP), the node its packets
    /// arrive at. Without it: the node whose address it sends to (a
    /// NodePort), else every node in turn, an equal share each (a load
    /// balancer's or an external IP).
    #[arg(long, value_name = "node/NAME", value_parser = parse_via)]
    via: Option<String>,
    /// Where it goes: a pod (NS/NAME or pod/NS/NAME), a node (node/NAME), a
    /// service (svc/NS/NAME, service/NS/NAME, NAME.NS.svc[.cluster.local] or
    /// NAME.NS, the port by number or name) or an address (IP, [IPv6]:PORT;
    /// a pod's or node's IP is that pod or node, a ClusterIP takes its
    /// Service's ports); each with :PORT. A name with dots is a Service only
    /// as cluster DNS spells one (NAME.NS, NAME.NS.svc...): skoop resolves no
    /// other hostname, give its IP.
    #[arg(short, long, value_name = "DST")]
    to: String,
    /// Destination port (tcp, udp, sctp); also accepted as DST:PORT. Not
    /// needed for a service with one port of the protocol or a pod declaring
    /// one container port of it. ICMP has none. (`--dport` as `netfilter
    /// trace` once read it.)
    #[arg(short, long, alias = "dport", value_parser = parse_port)]
    port: Option<u16>,
    /// Of a dual-stack pod, node or service named by name, the address of
    /// this family. Without it: the destination's first address (a pod's
    /// podIP, a service's first clusterIP); a source pod always sends from
    /// its address of the destination's family.
    #[arg(long, value_name = "FAMILY")]
    family: Option<FamilyArg>,
    /// The flow's protocol. A service's port and a pod's declared port are
    /// those of this protocol. (`--proto` as `netfilter trace` once read it.)
    #[arg(long, alias = "proto", value_parser = protocol_parser(), default_value = "tcp")]
    protocol: Protocol,
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
    #[arg(long, value_name = "auto|none|NAME", default_value = "auto", value_parser = CniChoice::parse)]
    cni: CniChoice,
    /// Show every hop of every path and its steps, not one line per path.
    #[arg(long)]
    detail: bool,
    /// Show every hop and step with its packet, the rules and tables of
    /// each route, the packet on every link (implies --detail).
    #[arg(short, long)]
    verbose: bool,
    /// After the verdict, send the flow's own packets from its source (a
    /// TCP connect, one UDP datagram or two pings, of --size with DF, with
    /// `nc` or `ping` in the source's namespace) and read the counters of the namespaces its paths
    /// cross before and after (iptables and nft rule counters, nstat,
    /// conntrack):
    /// the kernel's answer beside the model's, hop by hop (docs/live.md,
    /// "Confirming with the kernel"). Live only: on the cluster it collects
    /// from, or with --snapshot DIR through --node-exec TEMPLATE. Nothing
    /// is sent without it.
    #[arg(long)]
    confirm: bool,
    /// With --confirm: also trace why each kernel on the paths dropped
    /// packets during the probe, from its skb:kfree_skb tracepoint (Linux
    /// 5.17 and later): a tracefs instance of skoop's own on each node's
    /// kernel for the probe's seconds, removed after (docs/live.md).
    #[arg(long, requires = "confirm")]
    drop_reasons: bool,
    /// The report's format (see above); without it, guessed from --output's
    /// extension, else text.
    #[arg(short = 'o', long = "format", value_enum, value_name = "FORMAT")]
    format: Option<ReportFormat>,
    /// Write the report to FILE instead of stdout. (A bare format name,
    /// `--output json`, selects that format as older skoop read it; write
    /// `./json` for a file of that name.)
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// `diagnose`'s arguments validated: what the command runs on.
struct Diagnose {
    output: Destination,
    input: Input,
    cache: CacheArgs,
    /// Loaded, with `--cni`'s choice made.
    packs: LoadedPacks,
    request: Request,
    detail: Detail,
    /// `--confirm`.
    confirm: bool,
    /// `--drop-reasons`.
    drop_reasons: bool,
}

/// Where the snapshot a diagnosis reads comes from.
enum Input {
    /// `--snapshot DIR`, and with `--confirm` the `--node-exec` template
    /// that reaches its nodes.
    Snapshot {
        dir: PathBuf,
        node_exec: Option<String>,
        /// Its load, started before the packs were loaded; taken once.
        loading: Option<Loading>,
    },
    /// The live cluster, collected into `--save-snapshot DIR` when given,
    /// else into a temporary directory.
    Live {
        live: LiveArgs,
        save: Option<PathBuf>,
    },
}

impl DiagnoseArgs {
    /// The options the command runs on, each argument checked once, in
    /// this order: where the report goes, the snapshot, the packs and
    /// `--cni`, the endpoints. `Err` is the exit status, the error said
    /// (under `-o json` as a JSON object too).
    fn options(self) -> Result<Diagnose, ExitCode> {
        let output = match Destination::new(self.format, self.output.as_deref()) {
            Ok(output) => output,
            Err(e) => {
                err!("error: {e}");
                return Err(ExitCode::from(EXIT_USAGE));
            }
        };
        if let (Some(dir), Some(_)) = (&self.snapshot, &self.save_snapshot) {
            let error = format!(
                "--save-snapshot collects from the live cluster, but --snapshot (or SKOOP_SNAPSHOT) names {} to read: give one of them",
                dir.display()
            );
            return Err(usage_error(output, error));
        }
        // The snapshot loads while the packs do.
        let loading = self
            .snapshot
            .as_deref()
            .map(|dir| self.cache.load_beside(dir));
        let mut packs = self.packs.load()?;
        if let Err(e) = self.cni.choose(&mut packs) {
            return Err(usage_error(output, format!("--cni: {e}")));
        }
        let request = match self.request() {
            Ok(request) => request,
            Err(e) => return Err(usage_error(output, e)),
        };
        let detail = match (self.verbose, self.detail) {
            (true, _) => Detail::Packets,
            (false, true) => Detail::Hops,
            (false, false) => Detail::Paths,
        };
        if self.confirm {
            let icmp = matches!(self.protocol, Protocol::Icmp | Protocol::Icmpv6);
            let refused = if self.size.is_some() && !icmp {
                Some(
                    "--confirm sends a packet of --size only as a ping (--protocol icmp): a connect's sizes are the kernel's to choose",
                )
            } else if output.format != ReportFormat::Text && output.format != ReportFormat::Json {
                Some(
                    "--confirm's answer is in the text and JSON reports only: use -o text or -o json",
                )
            } else if self.snapshot.is_some() && self.live.node_exec.is_none() {
                Some(
                    "--confirm with --snapshot reaches the snapshot's nodes through --node-exec TEMPLATE (without --snapshot, through the live cluster): give it",
                )
            } else {
                None
            };
            if let Some(error) = refused {
                return Err(usage_error(output, error.to_string()));
            }
        }
        let input = match self.snapshot {
            Some(dir) => Input::Snapshot {
                dir,
                node_exec: self.live.node_exec.filter(|_| self.confirm),
                loading,
            },
            None => Input::Live {
                live: self.live,
                save: self.save_snapshot,
            },
        };
        Ok(Diagnose {
            output,
            input,
            cache: self.cache,
            packs,
            request,
            detail,
            confirm: self.confirm,
            drop_reasons: self.drop_reasons,
        })
    }

    /// The flow asked about; `Err` says which endpoint is not one.
    fn request(&self) -> Result<Request, String> {
        Ok(Request {
            from: self.endpoint("--from", &self.from)?,
            to: self.endpoint("--to", &self.to)?,
            port: self.port,
            protocol: self.protocol,
            size: self.size,
            via: self.via.clone(),
            family: self.family.map(FamilyArg::family),
        })
    }

    /// `--from` or `--to` (`flag`) as an endpoint. One that is none of the
    /// forms is compared with the names of `--snapshot`'s objects, to
    /// suggest the endpoint it may have meant.
    fn endpoint(&self, flag: &str, text: &str) -> Result<Endpoint, String> {
        parse_endpoint(text).map_err(|e| {
            let malformed = matches!(
                text.parse::<Endpoint>(),
                Err(engine::TargetError::Malformed(_))
            );
            let suggestion = self
                .snapshot
                .as_deref()
                .filter(|_| malformed)
                .and_then(|dir| self.cache.load(dir).ok())
                .and_then(|(snapshot, _)| engine::suggest_endpoint(&snapshot, text))
                .map(|candidates| candidates.to_string())
                .unwrap_or_default();
            format!("{flag}: {e}{suggestion}")
        })
    }
}

/// What `diagnose` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    /// The verdict, then each path hop by hop.
    Text,
    /// The JSON report (docs/json.md).
    Json,
    /// The path graph in Graphviz's DOT language.
    Dot,
    /// The path graph drawn as SVG, with a legend.
    Svg,
    /// One self-contained HTML page.
    Html,
}

impl ReportFormat {
    /// The format a file's extension names; text for any other.
    fn of_file(path: &Path) -> ReportFormat {
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("json") => ReportFormat::Json,
            Some("dot" | "gv") => ReportFormat::Dot,
            Some("svg") => ReportFormat::Svg,
            Some("html" | "htm") => ReportFormat::Html,
            _ => ReportFormat::Text,
        }
    }
}

/// Where the report goes, and in which format.
struct Destination {
    format: ReportFormat,
    /// `None`: stdout.
    file: Option<ReportFile>,
}

impl Destination {
    /// From `-o` and `--output`; the temporary file is created at once, so
    /// that a directory that cannot be written is said before any work.
    fn new(format: Option<ReportFormat>, output: Option<&Path>) -> Result<Destination, String> {
        let Some(path) = output else {
            return Ok(Destination {
                format: format.unwrap_or(ReportFormat::Text),
                file: None,
            });
        };
        // `--output json` was the long form of `-o json` before --output took
        // a file: a bare format name keeps meaning that.
        if format.is_none()
            && let Some(name) = path.to_str()
            && let Ok(format) = ReportFormat::from_str(name, false)
        {
            return Ok(Destination { format, file: None });
        }
        Ok(Destination {
            format: format.unwrap_or_else(|| ReportFormat::of_file(path)),
            file: Some(ReportFile::create(path)?),
        })
    }

    /// Writes the whole report; `Err` carries the exit code when it cannot.
    fn write(self, text: &str) -> Result<(), ExitCode> {
        match self.file {
            Some(file) => file.write(text),
            None => {
                write_raw(text);
                Ok(())
            }
        }
    }

    /// Writes a value as pretty JSON.
    fn write_json(self, value: &impl serde::Serialize) -> Result<(), ExitCode> {
        self.write(&json_text(value)?)
    }

    /// Writes the diagnoses (one per family asked) in the destination's
    /// format: in text each family's report under its name, in JSON the
    /// others' in the first's `other_families`; a picture draws the family
    /// with the worst verdict (the first of equals) and gives the others'
    /// verdicts.
    fn write_report(
        self,
        diagnoses: &[Diagnosis],
        confirmations: &[Option<Confirmation>],
        detail: Detail,
    ) -> Result<(), ExitCode> {
        let Some(first) = diagnoses.first() else {
            return Ok(());
        };
        let drawn = || {
            // `max_by_key` keeps the last of equals: reversed, the first.
            let (worst, _) = diagnoses
                .iter()
                .enumerate()
                .rev()
                .max_by_key(|(_, diagnosis)| diagnosis.verdict())
                .unwrap_or((0, first));
            let others = (diagnoses.iter().enumerate())
                .filter(move |(index, _)| *index != worst)
                .map(|(_, diagnosis)| diagnosis);
            Report::of_families(std::iter::once(&diagnoses[worst]).chain(others))
        };
        match self.format {
            ReportFormat::Text => {
                let mut lines = Vec::new();
                for (index, diagnosis) in diagnoses.iter().enumerate() {
                    if diagnoses.len() > 1 {
                        if !lines.is_empty() {
                            lines.push(String::new());
                        }
                        lines.push(format!("{}:", Family::of(diagnosis.request.dst)));
                    }
                    lines.extend(text::diagnosis(diagnosis, detail));
                    if let Some(Some(confirmation)) = confirmations.get(index) {
                        lines.extend(text::confirmation(confirmation));
                    }
                }
                self.write(&terminal_lines(&lines))
            }
            ReportFormat::Json => match Report::of_families(diagnoses) {
                Some(report) => self.write_json(&report.with_confirmations(confirmations)),
                None => Ok(()),
            },
            ReportFormat::Dot | ReportFormat::Svg | ReportFormat::Html => {
                let Some(drawn) = drawn() else { return Ok(()) };
                let written = match self.format {
                    ReportFormat::Dot => dot::render(&Picture::new(&drawn)),
                    ReportFormat::Svg => svg::render(&Picture::new(&drawn)),
                    _ => html::render(&drawn),
                };
                self.write(&written)
            }
        }
    }
}

pub fn run(args: Box<DiagnoseArgs>) -> ExitCode {
    match args.options() {
        Ok(diagnose) => diagnose.run(),
        Err(code) => code,
    }
}

impl Diagnose {
    /// Reads (or collects) the snapshot, diagnoses the flow, writes the
    /// report; the exit status says the verdict.
    fn run(mut self) -> ExitCode {
        // A live diagnosis collects into a directory, then reads it as any
        // snapshot: the answer can be replayed offline. With --confirm it is
        // diagnosed while the nodes are still reachable (its collector pods
        // still there), and the flow sent through them.
        let loading = match &mut self.input {
            Input::Snapshot { loading, .. } => loading.take(),
            Input::Live { .. } => None,
        };
        let found = match &self.input {
            Input::Snapshot { dir, node_exec, .. } => self
                .diagnose_loaded(loading.map_or_else(|| self.cache.load(dir), Loading::wait))
                .map_err(Stopped::Error)
                .and_then(|(snapshot, diagnoses)| {
                    let confirmations = match node_exec {
                        Some(template) => runtime()?.block_on(confirm_all(
                            &snapshot,
                            &diagnoses,
                            &mut Templated {
                                template,
                                snapshot: &snapshot,
                            },
                            self.drop_reasons,
                        )),
                        None => Vec::new(),
                    };
                    Ok((snapshot, diagnoses, confirmations))
                }),
            Input::Live { live, save } => {
                collect_live(live, save.as_deref(), &self, async |dir, collection| {
                    if !self.confirm {
                        return Ok(None);
                    }
                    let (snapshot, diagnoses) = self.diagnose_dir(dir).map_err(Stopped::Error)?;
                    let confirmations =
                        confirm_all(&snapshot, &diagnoses, collection, self.drop_reasons).await;
                    Ok(Some((snapshot, diagnoses, confirmations)))
                })
                .and_then(|(dir, found, _temporary)| match found {
                    Some(found) => Ok(found),
                    None => {
                        let (snapshot, diagnoses) =
                            self.diagnose_dir(&dir).map_err(Stopped::Error)?;
                        Ok((snapshot, diagnoses, Vec::new()))
                    }
                })
            }
        };
        let (snapshot, diagnoses, confirmations) = match found {
            Ok(found) => found,
            Err(Stopped::Error(message)) => return usage_error(self.output, message),
            Err(stopped) => return stopped.report(),
        };
        if let Err(code) = self
            .output
            .write_report(&diagnoses, &confirmations, self.detail)
        {
            return code;
        }
        // The worst family's verdict.
        let verdict = diagnoses.iter().map(Diagnosis::verdict).max();
        let code = ExitCode::from(verdict.map_or(0, verdict_status));
        // The process ends here: freeing a large cluster object by object
        // would take a tenth of the run, and the system takes it back at once.
        std::mem::forget((snapshot, diagnoses));
        code
    }
}

impl Diagnose {
    /// Reads the snapshot at `dir` and diagnoses the flow in it, once per
    /// family where a dual-stack destination named by name is asked in both.
    fn diagnose_dir(&self, dir: &Path) -> Result<(Arc<Snapshot>, Vec<Diagnosis>), String> {
        self.diagnose_loaded(self.cache.load(dir))
    }

    /// [`Diagnose::diagnose_dir`] of a snapshot as loaded.
    fn diagnose_loaded(&self, loaded: Loaded) -> Result<(Arc<Snapshot>, Vec<Diagnosis>), String> {
        let (snapshot, problems) = loaded.map_err(|e| e.to_string())?;
        let snapshot = Arc::new(snapshot);
        report_problems(&problems);
        report_empty_dumps(&snapshot);
        let requests = engine::per_family(&snapshot, &self.request);
        let mut diagnoses = Vec::with_capacity(requests.len());
        for request in &requests {
            diagnoses.push(
                engine::diagnose(&snapshot, request, &self.packs).map_err(|e| e.to_string())?,
            );
        }
        Ok((snapshot, diagnoses))
    }
}

/// Each diagnosis's flow sent and its counters read (`--confirm`, with
/// `--drop-reasons` its kernels' drops traced), one family after the other.
async fn confirm_all(
    snapshot: &Snapshot,
    diagnoses: &[Diagnosis],
    shells: &mut impl NodeShells,
    drop_reasons: bool,
) -> Vec<Option<Confirmation>> {
    let mut confirmations = Vec::with_capacity(diagnoses.len());
    for diagnosis in diagnoses {
        err!("confirming with the kernel: sending the flow from its source");
        confirmations.push(Some(
            confirm(snapshot, diagnosis, shells, drop_reasons).await,
        ));
    }
    confirmations
}

/// A live diagnosis's snapshot directory, what `work` made of it, and the
/// temporary directory that holds it (if it is one).
type Collected<T> = (PathBuf, T, Option<(TempDir, Temporary)>);

/// Collects what the request needs from the live cluster into
/// `--save-snapshot DIR`, or a temporary directory (returned too, so that
/// it lives as long as the diagnosis reads it), then runs `work` on it
/// while the nodes are still reachable.
fn collect_live<T>(
    live: &LiveArgs,
    save: Option<&Path>,
    diagnose: &Diagnose,
    work: impl AsyncFnOnce(&Path, &mut LiveCollection) -> Result<T, Stopped>,
) -> Result<Collected<T>, Stopped> {
    let (packs, request) = (&diagnose.packs, &diagnose.request);
    let (dir, temporary) = match save {
        Some(dir) => (dir.to_path_buf(), None),
        None => {
            let temporary = tempfile::Builder::new()
                .prefix("skoop-snapshot-")
                .tempdir()
                .map_err(|e| {
                    Stopped::Error(format!("cannot create a temporary snapshot directory: {e}"))
                })?;
            let registered = Temporary::new(temporary.path());
            (
                temporary.path().to_path_buf(),
                Some((temporary, registered)),
            )
        }
    };
    let done = live.run(packs, &dir, async |collection| {
        collect_flow(collection, packs, request).await?;
        print_outcomes(collection, Summary::Brief);
        work(&dir, collection).await
    })?;
    if save.is_some() {
        // A saved snapshot is replayed, maybe many times: it keeps its
        // objects' model as `collect cluster` does (and is diagnosed from it
        // here too).
        if let Err(e) = cache::write(&dir, &Boundary::new(&dir), diagnose.cache.budget()) {
            err!("warning: no cluster cache written: {e}");
        }
        err!(
            "saved the snapshot in {0}; replay with --snapshot {0}",
            dir.display()
        );
    }
    Ok((dir, done, temporary))
}

/// A bad argument or input: said on stderr, and under `-o json` as a JSON
/// object where the report goes too (stdout or `--output FILE`), so that a
/// script reading the report gets JSON either way.
fn usage_error(output: Destination, error: String) -> ExitCode {
    err!("error: {error}");
    if output.format == ReportFormat::Json
        && let Err(code) = output.write_json(&ErrorReport::new(error))
    {
        return code;
    }
    ExitCode::from(EXIT_USAGE)
}

/// `--via node/NAME`: the node's name.
fn parse_via(text: &str) -> Result<String, String> {
    match text.strip_prefix("node/") {
        Some(name) if !name.is_empty() && !name.contains('/') => Ok(name.to_string()),
        _ => Err(format!("{text:?} is not a node: write node/NAME")),
    }
}
