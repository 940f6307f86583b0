//! `skoop collect local`: one network namespace's dump files, from this machine.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use skoop::collect::live::Wanted;
use skoop::collect::{CollectError, CollectReport, collect_local};
use skoop::engine::{Endpoint, Protocol, Request};
use skoop::snapshot::cluster::{Budget, cache};
use skoop::snapshot::input::Boundary;
use skoop::snapshot::netns::DumpFile;

use super::EXIT_USAGE;
use super::args::{LoadArgs, protocol_parser};
use super::interrupt::{EXIT_INTERRUPTED, signalled};
use super::live::{LiveArgs, Stopped, Summary, collect_flow, print_outcomes, runtime};

#[derive(Debug, Subcommand)]
pub enum CollectCommand {
    /// Write one network namespace's dump files into a directory.
    ///
    /// Runs the standard tools (iproute2, iptables-save, ipset, ipvsadm,
    /// sysctl, ss) inside network namespace NAME (`ip netns exec NAME`), or in
    /// the namespace skoop runs in when --netns is not given, and writes each
    /// one's output to its file in DIR, flat. In a snapshot, DIR is
    /// `nodes/<node>/host` for a node's root namespace and
    /// `nodes/<node>/pods/<namespace>/<pod>` for a pod's.
    ///
    /// Collecting only reads: ipvsadm runs only when /proc/net/ip_vs exists
    /// (running it would otherwise load the ip_vs kernel module). Every tool
    /// runs with LC_ALL=C; sysctl.txt keeps the net.* lines of `sysctl -a`;
    /// iptables-save.txt holds the rules of the iptables backend the node
    /// uses (nf_tables or legacy: the one with more rules, as kube-proxy's
    /// iptables-wrapper decides), with a note when that is not
    /// `iptables-save`'s own or the other one has rules too.
    /// An empty file is a valid dump (e.g. no iptables rules at all).
    ///
    /// A tool that is not installed skips its file with a warning; so does a
    /// command that fails, quoting its stderr. Files are written atomically,
    /// and a skipped file left in DIR by an earlier collection is removed.
    ///
    /// Exit status: 0 when every file was written or skipped for a harmless
    /// reason (tool not installed, IPVS not in use); 1 when some command
    /// failed; 2 when nothing could be collected (unknown namespace, DIR not
    /// writable, namespace not enterable).
    #[command(after_long_help = by_hand_help())]
    Local(LocalArgs),
    /// Collect a snapshot of a live cluster through the Kubernetes API.
    ///
    /// Writes the cluster's objects (Nodes, Namespaces, Pods, Services,
    /// EndpointSlices, DaemonSets, NetworkPolicies, the ConfigMaps and
    /// custom resources the packs read; never Secrets, and Pods without
    /// env values, command or args) into DIR/cluster, and the network
    /// namespaces of the nodes asked for, with their pods', into
    /// DIR/nodes. Nodes are reached through one short-lived collector pod
    /// each (deleted afterwards, also on Ctrl-C), or with --node-exec.
    /// `skoop diagnose --snapshot DIR` then works offline, anywhere. The
    /// objects' model is kept in DIR/cluster.cache, so that diagnoses of a
    /// large cluster start fast (`skoop snapshot cache --help`).
    ///
    /// Examples:
    ///   skoop collect cluster --out snap --for-flow --from default/web-0 --to svc/default/web
    ///   skoop collect cluster --out snap --nodes node-1,node-2 --node-exec 'ssh {address} sudo'
    ///   skoop collect cluster --out snap --all-nodes --context prod
    ///
    /// Exit status: 0 when everything asked for was collected, 1 when some
    /// namespace or file was not (the rest is written), 2 when the cluster
    /// could not be used (unreachable, refused credentials, forbidden).
    #[command(verbatim_doc_comment)]
    Cluster(Box<ClusterArgs>),
    /// Delete collector pods left behind by interrupted runs (by label).
    Cleanup(CleanupArgs),
    /// Print the RBAC live collection needs for the loaded packs
    /// (deploy/rbac.yaml is this for the built-in packs).
    Rbac(RbacArgs),
}

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The snapshot directory to write (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Collect these nodes' namespaces and their pods'.
    #[arg(long, value_name = "A,B", value_delimiter = ',', conflicts_with_all = ["all_nodes", "for_flow"])]
    nodes: Vec<String>,
    /// Collect every node's namespaces and their pods'.
    #[arg(long, conflicts_with = "for_flow")]
    all_nodes: bool,
    /// Collect what the flow --from SRC --to DST needs, walking it as
    /// `skoop diagnose` does.
    #[arg(long, requires_all = ["from", "to"])]
    for_flow: bool,
    #[arg(long, value_name = "SRC")]
    from: Option<Endpoint>,
    #[arg(long, value_name = "DST")]
    to: Option<Endpoint>,
    #[arg(long)]
    port: Option<u16>,
    /// The flow's protocol (with --for-flow), as `skoop diagnose --protocol`.
    #[arg(long, value_parser = protocol_parser(), default_value = "tcp", requires = "for_flow")]
    protocol: Protocol,
    #[command(flatten)]
    live: LiveArgs,
    #[command(flatten)]
    packs: LoadArgs,
}

#[derive(Debug, Args)]
pub struct CleanupArgs {
    #[command(flatten)]
    live: LiveArgs,
}

#[derive(Debug, Args)]
pub struct RbacArgs {
    /// The namespace collector pods run in.
    #[arg(long, value_name = "NS", default_value = skoop::collect::rbac::DEFAULT_COLLECTOR_NAMESPACE)]
    collector_namespace: String,
    #[command(flatten)]
    packs: LoadArgs,
}

#[derive(Debug, Args)]
pub struct LocalArgs {
    /// The network namespace to collect, by its `ip netns list` name
    /// (default: the one skoop runs in). Entering one needs root.
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// The directory to write the files into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The packs whose datapaths' state is collected where their programs
    /// are attached (`datapath:` in pack.yaml).
    #[command(flatten)]
    packs: LoadArgs,
}

/// The same collection as a shell script, from the contract's own table.
fn by_hand_help() -> String {
    let mut help = String::from(
        "Collecting by hand (e.g. on a node without skoop), as root, inside the namespace \
         (prefix each command with `ip netns exec NAME`):\n\n  cd DIR\n",
    );
    for file in DumpFile::ALL {
        help.push_str(&format!("  {} > {file}\n", file.command().join(" ")));
    }
    help.push_str(
        "\nOmit a file whose command is missing or fails: a missing file means \"not collected\". \
         A full `sysctl -a` is fine too (skoop keeps only net.*).",
    );
    help
}

pub fn run(command: CollectCommand) -> ExitCode {
    match command {
        CollectCommand::Local(args) => local(args),
        CollectCommand::Cluster(args) => cluster(args),
        CollectCommand::Cleanup(args) => cleanup(args),
        CollectCommand::Rbac(args) => rbac(args),
    }
}

fn cluster(args: Box<ClusterArgs>) -> ExitCode {
    let packs = match args.packs.load() {
        Ok(packs) => packs,
        Err(code) => return code,
    };
    if args.nodes.is_empty() && !args.all_nodes && !args.for_flow {
        err!(
            "error: say what to collect: --nodes A,B, --all-nodes or --for-flow --from SRC --to DST"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let result = args.live.run(&packs, &args.out, async |collection| {
        if args.for_flow {
            let (Some(from), Some(to)) = (args.from.clone(), args.to.clone()) else {
                unreachable!("clap requires --from and --to with --for-flow");
            };
            let request = Request {
                from,
                to,
                port: args.port,
                protocol: args.protocol,
                size: None,
                via: None,
                family: None,
            };
            collect_flow(collection, &packs, &request).await?;
        } else {
            let nodes: Vec<String> = if args.all_nodes {
                collection.nodes().cloned().collect()
            } else {
                args.nodes.clone()
            };
            let mut wanted = Vec::new();
            for node in nodes {
                wanted.extend(collection.pods_on(&node));
                wanted.push(Wanted::Host { node });
            }
            collection.collect(wanted).await;
        }
        print_outcomes(collection, Summary::Full);
        Ok(collection
            .outcomes
            .iter()
            .all(|o| o.result.as_ref().is_ok_and(|r| !r.has_failures())))
    });
    match result {
        Ok(complete) => {
            // The objects' model, so that every diagnosis of the snapshot
            // starts without parsing them again (`skoop snapshot cache`).
            match cache::write(&args.out, &Boundary::new(&args.out), Budget::default()) {
                Ok(written) => out!(
                    "wrote {}: the model of {} objects, read by diagnoses",
                    written.path.display(),
                    written.objects
                ),
                Err(e) => err!("warning: no cluster cache written: {e}"),
            }
            out!("wrote the snapshot to {}", args.out.display());
            if complete {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(stopped) => stopped.report(),
    }
}

fn cleanup(args: CleanupArgs) -> ExitCode {
    use skoop::collect::api::connect;
    use skoop::collect::collector::{TOOL_LABEL, delete_labelled};
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(stopped) => return stopped.report(),
    };
    let labels = std::collections::BTreeMap::from([TOOL_LABEL]);
    let deleted = runtime.block_on(async {
        let connection = connect(&args.live.connect_options()).await?;
        delete_labelled(&connection, Some(&args.live.collector_namespace), &labels).await
    });
    match deleted {
        Ok(deleted) => {
            for pod in &deleted {
                out!("deleted pod {pod}");
            }
            out!("{} collector pod(s) deleted", deleted.len());
            ExitCode::SUCCESS
        }
        Err(e) => Stopped::from(e).report(),
    }
}

fn rbac(args: RbacArgs) -> ExitCode {
    let packs = match args.packs.load() {
        Ok(packs) => packs,
        Err(code) => return code,
    };
    for line in skoop::collect::rbac::rbac_yaml(&packs, &args.collector_namespace).lines() {
        out!("{line}");
    }
    ExitCode::SUCCESS
}

fn local(args: LocalArgs) -> ExitCode {
    let packs = match args.packs.load() {
        Ok(packs) => packs,
        Err(code) => return code,
    };
    let datapaths = packs.datapaths();
    match collect_local(args.netns.as_deref(), &args.out, &datapaths, signalled()) {
        Ok(report) => {
            print_report(&report);
            if report.has_failures() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e @ CollectError::Stopped(_)) => {
            err!("{e}");
            ExitCode::from(EXIT_INTERRUPTED)
        }
        Err(e) => {
            err!("error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Quoted stderr is cut to this many lines; the rest is counted.
const STDERR_LINES: usize = 3;

fn print_report(report: &CollectReport) {
    // What a tool printed is the tool's, not skoop's: each of its lines goes
    // through `err!`, escaped as every line skoop prints is.
    for written in &report.written {
        if let Some(note) = &written.note {
            err!("note: {}: {note}", written.file);
        }
        if !written.stderr.is_empty() {
            said(
                &format!(
                    "warning: {} may be incomplete; its command said:",
                    written.file
                ),
                &written.stderr,
            );
        }
    }
    for skipped in &report.skipped {
        let kind = if skipped.reason.is_note() {
            "note"
        } else {
            "warning"
        };
        said(
            &format!("{kind}: {} not collected:", skipped.file),
            &skipped.reason.to_string(),
        );
        if skipped.removed_stale {
            err!(
                "{kind}: removed {} left by an earlier collection",
                report.out.join(&skipped.file).display()
            );
        }
    }
    out!(
        "collected {} of {} files from {} into {}",
        report.written.len(),
        DumpFile::ALL.len(),
        report.namespace,
        report.out.display()
    );
    if !report.skipped.is_empty() {
        let skipped: Vec<&str> = report.skipped.iter().map(|s| s.file.as_str()).collect();
        out!("not collected: {}", skipped.join(", "));
    }
}

/// `head` and the first lines of a multi-line message after it, a line of
/// its own each, saying how many were left out.
fn said(head: &str, text: &str) {
    let mut lines = text.lines();
    err!("{head} {}", lines.next().unwrap_or_default());
    for line in lines.by_ref().take(STDERR_LINES - 1) {
        err!("  {line}");
    }
    let more = lines.count();
    if more > 0 {
        err!("  ({more} more lines)");
    }
}
