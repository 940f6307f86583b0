//! What `skoop diagnose` (without `--snapshot`) and `skoop collect
//! cluster|cleanup` share: how to reach the API server and the nodes, and a
//! run that always cleans up after itself, Ctrl-C included.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use skoop::collect::api::{
    ConnectOptions, Connection, DEFAULT_RESPONSE_MIB, DEFAULT_RUN_MIB, LiveError, ResponseCaps,
    connect,
};
use skoop::collect::collector::{CollectorOptions, DEFAULT_IMAGE};
use skoop::collect::credential::DEFAULT_EXEC_PLUGIN_TIMEOUT;
use skoop::collect::live::{LiveCollection, NodeAccess, Outcome, cleanup_run};
use skoop::collect::rbac::DEFAULT_COLLECTOR_NAMESPACE;
use skoop::snapshot::input::MIB;

use super::EXIT_USAGE;
use super::interrupt::{EXIT_INTERRUPTED, signalled};

/// How skoop reaches the cluster: the API server as kubectl does, the nodes
/// through collector pods or a command of yours.
#[derive(Debug, Clone, Args)]
pub struct LiveArgs {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else
    /// the pod's own service account when skoop runs in a cluster).
    #[arg(long, value_name = "FILE", help_heading = "Live cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME", help_heading = "Live cluster")]
    pub context: Option<String>,
    /// How long the kubeconfig's exec credential plugin may take (run
    /// without a terminal: log in first where it would ask) before it is
    /// killed and the run stops.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_EXEC_PLUGIN_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600), help_heading = "Live cluster")]
    pub exec_plugin_timeout: u64,
    /// Reach each node by running this command template on this machine in
    /// front of every dump command, instead of a collector pod: `{node}` is
    /// the node's name, `{address}` its InternalIP (e.g. 'ssh {address}
    /// sudo'), also in $SKOOP_NODE and $SKOOP_NODE_ADDRESS; both are checked
    /// (a Kubernetes node name, an IP address) before they are used. The
    /// tools (iproute2, iptables, ipset, ss, sysctl, nsenter) must be
    /// installed on the nodes.
    #[arg(long, value_name = "TEMPLATE", help_heading = "Live cluster")]
    pub node_exec: Option<String>,
    /// The image of the collector pods (needs iproute2, iptables, ipset,
    /// ipvsadm, nft, ss, sysctl and nsenter).
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_IMAGE, help_heading = "Live cluster")]
    pub collector_image: String,
    /// The namespace collector pods run in (created with the Pod Security
    /// label `privileged` when missing; deploy/rbac.yaml creates it too).
    #[arg(long, value_name = "NS", default_value = DEFAULT_COLLECTOR_NAMESPACE, help_heading = "Live cluster")]
    pub collector_namespace: String,
    /// How long a collector pod may take to be Running (image pull
    /// included) before its node counts as not collected.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 120,
        help_heading = "Live cluster"
    )]
    pub collector_timeout: u64,
    /// The most one answer of the API server may hold, in MiB (a page of a
    /// list, a discovery document); past it the run stops, saying so.
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_RESPONSE_MIB, value_parser = clap::value_parser!(u64).range(1..=1 << 20), help_heading = "Live cluster")]
    pub max_api_response: u64,
    /// The most all of one run's answers of the API server may hold
    /// together, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_RUN_MIB, value_parser = clap::value_parser!(u64).range(1..=1 << 30), help_heading = "Live cluster")]
    pub max_api_total: u64,
}

impl LiveArgs {
    /// Where the API server is and who skoop is there.
    pub fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            exec_timeout: Duration::from_secs(self.exec_plugin_timeout),
            caps: ResponseCaps {
                response: self.max_api_response * MIB,
                run: self.max_api_total * MIB,
            },
        }
    }

    fn access(&self) -> NodeAccess {
        match &self.node_exec {
            Some(template) => NodeAccess::Template(template.clone()),
            None => NodeAccess::CollectorPods(CollectorOptions {
                namespace: self.collector_namespace.clone(),
                image: self.collector_image.clone(),
                start_timeout: Duration::from_secs(self.collector_timeout),
                run: run_id(),
                asked: Default::default(),
            }),
        }
    }

    /// Connects, runs `work` on a [`LiveCollection`] writing into `dir`,
    /// and then — whether `work` succeeded, failed or Ctrl-C came — deletes
    /// this run's collector pods. An error is left to the caller to say (in
    /// its output format).
    pub fn run<T>(
        &self,
        packs: &skoop::packs::LoadedPacks,
        dir: &std::path::Path,
        work: impl AsyncFnOnce(&mut LiveCollection) -> Result<T, Stopped>,
    ) -> Result<T, Stopped> {
        let access = self.access();
        runtime()?.block_on(async {
            // While connecting (reading the kubeconfig, maybe running its
            // exec plugin) no collector pod
            // exists: a signal ends the process at once, temporaries
            // removed (`interrupt`). From here on the run hears it itself.
            let connection = connect(&self.connect_options())
                .await
                .map_err(Stopped::from)?;
            let result = tokio::select! {
                result = collect(&connection, &access, packs, dir, work) => result,
                signal = signalled() => {
                    err!("{signal}: stopping, removing collector pods");
                    Err(Stopped::Interrupted)
                }
            };
            match cleanup_run(&connection, &access).await {
                Ok(left) if !left.is_empty() && result.is_ok() => {
                    err!("note: removed {} collector pod(s)", left.len());
                }
                Ok(_) => {}
                Err(e) => err!(
                    "warning: could not remove this run's collector pods ({e}); `skoop collect cleanup` removes them"
                ),
            }
            result
        })
    }
}

async fn collect<T>(
    connection: &Connection,
    access: &NodeAccess,
    packs: &skoop::packs::LoadedPacks,
    dir: &std::path::Path,
    work: impl AsyncFnOnce(&mut LiveCollection) -> Result<T, Stopped>,
) -> Result<T, Stopped> {
    let mut collection = LiveCollection::start(connection.clone(), access.clone(), packs, dir)
        .await
        .map_err(Stopped::from)?;
    let result = work(&mut collection).await;
    // This run's pods are deleted by label by the caller, also on Ctrl-C.
    collection.stop_progress();
    result
}

/// The runtime live commands run on: one thread, as the engine and the
/// packs are not shared across threads.
pub fn runtime() -> Result<tokio::runtime::Runtime, Stopped> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Stopped::Error(format!("cannot start the async runtime: {e}")))
}

/// Collects what `request` needs; a request that does not resolve
/// against the cluster (no such pod) stops the run.
pub async fn collect_flow(
    collection: &mut LiveCollection,
    packs: &skoop::packs::LoadedPacks,
    request: &skoop::engine::Request,
) -> Result<(), Stopped> {
    skoop::live_flow::collect_for_flow(collection, packs, request)
        .await
        .map_err(|e| Stopped::Error(e.to_string()))
}

/// Why a live run ended before its work was done.
#[derive(Debug)]
pub enum Stopped {
    /// The cluster or the request could not be used at all (exit status 2);
    /// not yet said, so that the caller says it in its output format.
    Error(String),
    /// Ctrl-C or SIGTERM, already said (exit status 130).
    Interrupted,
}

impl From<LiveError> for Stopped {
    fn from(error: LiveError) -> Stopped {
        Stopped::Error(error.to_string())
    }
}

impl Stopped {
    /// Says an error on stderr, as text; the exit code.
    pub fn report(self) -> ExitCode {
        match self {
            Stopped::Error(message) => {
                err!("error: {message}");
                ExitCode::from(EXIT_USAGE)
            }
            Stopped::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        }
    }
}

/// How much [`print_outcomes`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Summary {
    /// One line, and what went wrong (a diagnosis, whose report follows).
    Brief,
    /// Every file written and every kind the cluster does not serve too
    /// (a support bundle).
    Full,
}

/// Prints what was and was not collected, to stderr.
pub fn print_outcomes(collection: &LiveCollection, summary: Summary) {
    if summary == Summary::Full {
        for (file, count) in &collection.objects.written {
            err!("  cluster/{file}: {count} objects");
        }
        if !collection.objects.not_served.is_empty() {
            err!(
                "note: not served by this cluster (packs read them when present): {}",
                collection.objects.not_served.join(", ")
            );
        }
    }
    let mut collected = 0;
    for Outcome { wanted, result } in &collection.outcomes {
        match result {
            Ok(report) => {
                collected += 1;
                for written in &report.written {
                    if let Some(note) = &written.note {
                        err!("note: {wanted}: {}: {note}", written.file);
                    }
                }
                for skipped in report.skipped.iter().filter(|s| !s.reason.is_note()) {
                    err!(
                        "warning: {wanted}: {} not collected: {}",
                        skipped.file,
                        skipped.reason
                    );
                }
            }
            Err(reason) => err!("warning: {wanted} not collected: {reason}"),
        }
    }
    let objects: usize = collection.objects.written.iter().map(|(_, n)| n).sum();
    let rounds = match collection.rounds {
        0 => String::new(),
        1 => " (walking the flow once)".to_string(),
        n => format!(" (walking the flow {n} times)"),
    };
    err!(
        "collected {objects} objects and {collected} of {} network namespaces{rounds}",
        collection.outcomes.len()
    );
}

/// A short random id for this run's labels.
fn run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    format!("{:012x}", hasher.finish() & 0xffff_ffff_ffff)
}
