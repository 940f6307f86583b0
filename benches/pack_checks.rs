//! Every built-in check on the path of one flow on a large generated
//! cluster (`cargo bench --bench pack_checks`): for Flannel VXLAN and Calico
//! VXLAN clusters of 5,000 nodes (30 pods per node, 2 services per node;
//! `common/cluster.rs` says what is generated), diagnoses default/web-0 ->
//! svc/default/web in this process with the built-in packs and lists every
//! finding, and apart every check that failed to run (a script stopped by
//! the sandbox's limits, say). On a healthy generated cluster both lists
//! should be empty. Beside them: the checks of the packs that apply (in the
//! pack's active mode), and how long the diagnosis took with those packs
//! and with none (the difference is what the packs' hooks and checks cost).
//! Not a test: the figures go to `docs/performance.md`.
//!
//! `SKOOP_PACK_CHECKS_NODES=500` picks the size, `SKOOP_PACK_CHECKS_CNI=calico`
//! one CNI (`flannel`, `calico`), `SKOOP_PACK_CHECKS_DIR=DIR` keeps the
//! generated snapshots there (`DIR/<cni>-<nodes>/`) instead of a temporary
//! directory, and `SKOOP_PACK_CHECKS_PACKS=DIR` runs the packs found in DIR
//! (each subdirectory with a pack.yaml: say, another version's `rules/*` and
//! `plugins/*` copied there) instead of the built-in ones.

#[path = "common/cluster.rs"]
mod cluster;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use skoop::engine::{self, Diagnosis, Protocol, Request};
use skoop::packs::LoadedPacks;
use skoop::snapshot::Snapshot;

/// The prefix `engine::intent` gives a check whose script did not finish
/// (what `skoop diagnose` prints; the engine's `Finding` keeps no status).
const FAILED_TO_RUN: &str = "check failed to run: ";

fn main() {
    let nodes: usize = std::env::var("SKOOP_PACK_CHECKS_NODES").map_or(5000, |n| {
        n.trim()
            .parse()
            .expect("SKOOP_PACK_CHECKS_NODES: a node count")
    });
    let cnis: Vec<(&str, cluster::Cni)> = [
        ("flannel", cluster::Cni::FlannelVxlan),
        ("calico", cluster::Cni::CalicoVxlan),
    ]
    .into_iter()
    .filter(|(name, _)| {
        std::env::var("SKOOP_PACK_CHECKS_CNI").map_or(true, |chosen| chosen == *name)
    })
    .collect();
    let temporary = tempfile::tempdir().expect("a temporary directory");
    let base: PathBuf = std::env::var_os("SKOOP_PACK_CHECKS_DIR")
        .map_or_else(|| temporary.path().into(), PathBuf::from);
    for (name, cni) in cnis {
        let dir = base.join(format!("{name}-{nodes}"));
        if !dir.exists() {
            // The one List of every object is for the scale bench's Python.
            let generated = cluster::generate_timed(nodes, cni, &dir, Path::new("/dev/null"));
            println!(
                "{name}, {nodes} nodes ({} pods, {} services, {} policies)",
                generated.pods, generated.services, generated.policies,
            );
        }
        run(name, &dir);
    }
}

fn run(name: &str, dir: &Path) {
    let start = Instant::now();
    let (snapshot, problems) = Snapshot::load(dir).expect("the snapshot loads");
    assert!(problems.is_empty(), "{problems:#?}");
    let snapshot = Arc::new(snapshot);
    println!(
        "{name}: snapshot loaded in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let sources = match std::env::var_os("SKOOP_PACK_CHECKS_PACKS") {
        Some(dir) => skoop::packs::discover(Path::new(&dir)).expect("the packs are readable"),
        None => skoop::packs::builtin_sources(),
    };
    let (packs, problems) = LoadedPacks::load(sources, &[]);
    assert!(problems.is_empty(), "{problems:?}");
    let (none, _) = LoadedPacks::load(Vec::new(), &[]);

    println!("{name}: checks of the packs that apply, in their active mode:");
    for pack in packs.applying(&snapshot) {
        let mode = packs.active_mode(pack, &snapshot).ok().flatten();
        let ids: Vec<&str> = pack
            .checks
            .iter()
            .filter(|c| c.modes.is_empty() || mode.as_ref().is_some_and(|m| c.modes.contains(m)))
            .map(|c| c.id.as_str())
            .collect();
        println!(
            "  {} (mode {}): {} checks",
            pack.name,
            mode.as_deref().unwrap_or("-"),
            ids.len()
        );
    }

    let (diagnosis, with_packs) = timed(|| diagnose(&snapshot, &packs));
    let (bare, without_packs) = timed(|| diagnose(&snapshot, &none));
    println!(
        "{name}: diagnose default/web-0 -> svc/default/web: {} ({} paths), {:.0} ms with the packs, {:.0} ms with none ({})",
        diagnosis.disposition().as_str(),
        diagnosis.paths.len(),
        with_packs,
        without_packs,
        bare.disposition().as_str(),
    );
    let (failed, findings): (Vec<_>, Vec<_>) = diagnosis
        .findings
        .iter()
        .partition(|f| f.message.starts_with(FAILED_TO_RUN));
    println!("{name}: {} findings", findings.len());
    for f in findings {
        println!(
            "  {} {} at {}: {}",
            f.severity.as_str(),
            f.id,
            f.about.hop,
            f.message
        );
    }
    println!("{name}: {} checks failed to run", failed.len());
    for f in failed {
        println!("  {} at {}: {}", f.id, f.about.hop, f.message);
    }
}

fn diagnose(snapshot: &Arc<Snapshot>, packs: &LoadedPacks) -> Diagnosis {
    let request = Request {
        from: "default/web-0".parse().expect("a pod"),
        to: "svc/default/web".parse().expect("a service"),
        port: None,
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: None,
    };
    engine::diagnose(snapshot, &request, packs).expect("the request resolves")
}

/// What `f` returns and the milliseconds it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed().as_secs_f64() * 1000.0)
}
