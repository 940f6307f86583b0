//! Arguments several commands share, parsed by clap into typed values:
//! the snapshot's cache, the rule packs and the CNI pack, a flow's
//! protocol, ports, endpoints and marks.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use skoop::net::{Family, Protocol};
use skoop::packs::{LoadedPacks, NO_CNI, Override};
use skoop::snapshot::cluster::Budget;
use skoop::snapshot::input::{Boundary, MIB};
use skoop::snapshot::netns::Rulesets;
use skoop::snapshot::{ClusterFrom, Problem, Snapshot, SnapshotError};

use super::EXIT_USAGE;

/// `--family`: an address family as the commands name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FamilyArg {
    Ipv4,
    Ipv6,
}

impl FamilyArg {
    pub fn family(self) -> Family {
        match self {
            FamilyArg::Ipv4 => Family::Ipv4,
            FamilyArg::Ipv6 => Family::Ipv6,
        }
    }
}

/// Whether a snapshot's cluster cache may stand for its `cluster/` files,
/// and how much of them a load reads: what every command that reads a
/// snapshot to diagnose it shares.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// Read the snapshot's cluster/ files even where its cluster cache
    /// stands for them (a snapshot from elsewhere, a cache in doubt), and
    /// write no cache. SKOOP_NO_CACHE=1 (or true, yes, on) in the
    /// environment does the same.
    #[arg(long, env = "SKOOP_NO_CACHE", value_parser = clap::builder::FalseyValueParser::new())]
    no_cache: bool,
    #[command(flatten)]
    budget: BudgetArgs,
}

impl CacheArgs {
    /// Loads the snapshot `dir`, from its cache unless told not to.
    pub(super) fn load(
        &self,
        dir: &std::path::Path,
    ) -> Result<(Snapshot, Vec<Problem>), SnapshotError> {
        Snapshot::load_within(
            dir,
            &Boundary::new(dir),
            self.cluster_from(),
            self.budget(),
            Rulesets::AsNeeded,
        )
    }

    /// [`CacheArgs::load`] on a thread of its own, started now: what a
    /// command does meanwhile (loading the packs) is done beside it.
    pub(super) fn load_beside(&self, dir: &std::path::Path) -> Loading {
        let (dir, from, budget) = (dir.to_path_buf(), self.cluster_from(), self.budget());
        let load = move || {
            Snapshot::load_within(&dir, &Boundary::new(&dir), from, budget, Rulesets::AsNeeded)
        };
        match std::thread::Builder::new().spawn(load.clone()) {
            Ok(thread) => Loading(Some(Pending::Thread(thread))),
            // No thread to be had: loaded here, first.
            Err(_) => Loading(Some(Pending::Done(load()))),
        }
    }

    pub(super) fn budget(&self) -> Budget {
        self.budget.budget()
    }

    pub(super) fn cluster_from(&self) -> ClusterFrom {
        if self.no_cache {
            ClusterFrom::Files
        } else {
            ClusterFrom::CacheWhenCurrent
        }
    }
}

/// What loading a snapshot gives.
pub(super) type Loaded = Result<(Snapshot, Vec<Problem>), SnapshotError>;

/// A snapshot being loaded ([`CacheArgs::load_beside`]). Dropped unwaited
/// (the command stopped at a usage error), it is still waited for: a load
/// may be writing the snapshot's cluster cache, which an exit must not cut
/// half way.
pub(super) struct Loading(Option<Pending>);

enum Pending {
    Thread(std::thread::JoinHandle<Loaded>),
    Done(Loaded),
}

impl Loading {
    /// The snapshot, once loaded.
    pub(super) fn wait(mut self) -> Loaded {
        match self.0.take() {
            Some(Pending::Thread(thread)) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Some(Pending::Done(loaded)) => loaded,
            None => unreachable!("only wait and drop take the load, once"),
        }
    }
}

impl Drop for Loading {
    fn drop(&mut self) {
        if let Some(Pending::Thread(thread)) = self.0.take() {
            // What it loaded, or how it failed, is no one's now.
            let _ = thread.join();
        }
    }
}

/// How much of a snapshot's `cluster/` one load reads at most, in all its
/// files (`docs/limits.md`).
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// The most objects a load keeps from cluster/; the rest are not read,
    /// and a problem says where they start.
    #[arg(long, value_name = "N", default_value_t = Budget::default().objects)]
    max_cluster_objects: usize,
    /// The most MiB of cluster/ files a load reads, in all; the files past
    /// it are not read, each named in a problem.
    #[arg(long, value_name = "MIB", default_value_t = Budget::default().bytes / MIB)]
    max_cluster_mib: u64,
}

impl BudgetArgs {
    pub fn budget(&self) -> Budget {
        Budget {
            objects: self.max_cluster_objects,
            bytes: self.max_cluster_mib.saturating_mul(MIB),
        }
    }
}

/// Which rule packs a command loads: the built-in ones, those under
/// `--pack-path`, with `--set` overrides.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// A directory of packs (or one pack) to add to the built-in ones; a pack
    /// with a built-in's name replaces it.
    #[arg(long = "pack-path", value_name = "DIR")]
    pack_paths: Vec<PathBuf>,
    /// Override a parameter: PACK.PARAM=VALUE (validated like any value).
    #[arg(long = "set", value_name = "PACK.PARAM=VALUE", value_parser = Override::parse)]
    overrides: Vec<Override>,
}

impl LoadArgs {
    /// The packs and every problem, said nowhere (a matrix's workers load
    /// again what `load` has said once).
    pub(super) fn discover_and_load(&self) -> (LoadedPacks, Vec<skoop::snapshot::Problem>) {
        LoadedPacks::discover_and_load(&self.pack_paths, &self.overrides)
    }

    /// Loads the packs; problems and notes go to stderr. `Err` is the exit code.
    pub(super) fn load(&self) -> Result<LoadedPacks, ExitCode> {
        let (loaded, problems) = self.discover_and_load();
        for note in &loaded.notes {
            err!("note: {note}");
        }
        if problems.is_empty() {
            Ok(loaded)
        } else {
            for problem in &problems {
                err!("error: {problem}");
            }
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

/// `--cni`: which CNI pack applies, as clap parses `auto`, `none` or a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CniChoice {
    /// The one detected from the cluster's objects.
    Auto,
    /// None: nothing stands in for a namespace the snapshot lacks.
    None,
    /// This pack, whatever detection says.
    Pack(String),
}

impl CniChoice {
    /// The argument's three forms; a name is checked against the packs
    /// once they are loaded (`choose`).
    pub(super) fn parse(text: &str) -> Result<CniChoice, String> {
        Ok(match text {
            "auto" => CniChoice::Auto,
            NO_CNI => CniChoice::None,
            name => CniChoice::Pack(name.to_owned()),
        })
    }

    /// Makes `packs` apply this choice; `Err` when no CNI pack has the name.
    pub(super) fn choose(&self, packs: &mut LoadedPacks) -> Result<(), String> {
        match self {
            CniChoice::Auto => Ok(()),
            CniChoice::None => packs.choose_cni(NO_CNI),
            CniChoice::Pack(name) => packs.choose_cni(name),
        }
    }
}

/// A TCP or UDP port: 1-65535 (0 is no port a packet can be sent to).
pub(super) fn parse_port(text: &str) -> Result<u16, String> {
    text.parse::<u16>()
        .ok()
        .filter(|&port| port != 0)
        .ok_or_else(|| format!("{text:?} is not a port number (1-65535)"))
}

/// `--from`/`--to`, with the port rule of [`parse_port`] for `DST:PORT`.
pub(super) fn parse_endpoint(text: &str) -> Result<skoop::engine::Endpoint, String> {
    use skoop::snapshot::cluster::PortRef;
    let endpoint: skoop::engine::Endpoint = text
        .parse()
        .map_err(|e: skoop::engine::TargetError| e.to_string())?;
    match endpoint.port() {
        Some(PortRef::Number(0)) => Err(format!("{text:?}: 0 is not a port number (1-65535)")),
        _ => Ok(endpoint),
    }
}

/// `--protocol`: the IP protocol of a flow, one of those skoop follows,
/// each shown with what it means in `--help` and offered by completion.
pub(super) fn protocol_parser() -> impl TypedValueParser<Value = Protocol> {
    let values = [
        PossibleValue::new("tcp"),
        PossibleValue::new("udp"),
        PossibleValue::new("sctp").help(
            "Whether an SCTP endpoint listens is known from an ss.txt that lists SCTP \
             (`ss -H -tulnS`), else unknown",
        ),
        PossibleValue::new("icmp")
            .help("An echo request (ping): ICMPv6's to an IPv6 destination, as ping sends it"),
        PossibleValue::new("icmpv6").help("An ICMPv6 echo request (ping to an IPv6 address)"),
    ];
    // Each value offered is a protocol's name.
    PossibleValuesParser::new(values).map(|name| Protocol::parse(&name).unwrap_or(Protocol::Tcp))
}

/// A packet mark as iptables and iproute2 print it: decimal or 0x-hex.
pub(super) fn parse_mark(text: &str) -> Result<u32, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("{text:?} is not a 32-bit mark (decimal or 0x-hex)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cni_takes_auto_none_or_a_pack_name() {
        assert_eq!(CniChoice::parse("auto"), Ok(CniChoice::Auto));
        assert_eq!(CniChoice::parse("none"), Ok(CniChoice::None));
        assert_eq!(
            CniChoice::parse("flannel"),
            Ok(CniChoice::Pack("flannel".into()))
        );
    }
}
