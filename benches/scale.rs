//! One flow on a large generated cluster, end to end and cold (`cargo bench
//! --bench scale`): for 500, 1,000, 2,500 and 5,000 nodes (30 pods per node,
//! 2 services per node; `common/cluster.rs` says what is generated), the
//! release `skoop diagnose` is run as a fresh process (load the snapshot and
//! the built-in packs, walk default/web-0 -> svc/default/web, print the
//! answer): first reading `cluster/`'s files, as `skoop snapshot check`
//! (also run) always does, then from the cluster cache that `skoop collect`
//! writes, written here by `skoop snapshot cache` (timed once), also with
//! `--cni none`. Beside it, on the same cluster objects as one JSON file,
//! `python3 -c 'import json; json.load(open(F))'`. Each is timed by wall
//! clock, its CPU time (user and system, which a loaded machine stretches
//! less) and peak memory read from the kernel (`wait4`'s rusage); the
//! fastest of `RUNS` runs is reported, so the page cache is warm.
//! Targets: the flow in at most 1 s and 1 GiB at 5,000 nodes, faster than
//! Python reads the objects, its cost growing linearly with the cluster.
//!
//! `SKOOP_SCALE_NODES=500,1000` picks the sizes; `SKOOP_SCALE_DIR=DIR` keeps
//! the generated snapshots there (`DIR/<nodes>/`) instead of a temporary
//! directory; `SKOOP_SCALE_BEFORE=BIN` runs the same `diagnose` with another
//! `skoop` binary (an older build) beside it, for a before/after in one run.

#[path = "common/cluster.rs"]
mod cluster;
#[path = "common/process.rs"]
mod process;

use std::path::{Path, PathBuf};
use std::process::Command;

use process::{Run, mib, run};

const RUNS: usize = 3;
/// The fastest of `RUNS` runs (its peak memory beside it), each a fresh
/// process.
fn fastest(mut command: impl FnMut() -> Command) -> Run {
    let mut best: Option<Run> = None;
    for _ in 0..RUNS {
        let mut one = command();
        // `snapshot check` exits 3 for a readable but incomplete snapshot:
        // the generated nodes have no dumps, by design.
        let expected = if one.get_args().next() == Some("snapshot".as_ref()) {
            3
        } else {
            0
        };
        let run = run(&mut one);
        assert_eq!(run.exit, Some(expected), "{one:?} failed");
        if best.as_ref().is_none_or(|b| run.wall < b.wall) {
            best = Some(run);
        }
    }
    best.expect("RUNS > 0")
}

fn main() {
    let sizes: Vec<usize> = std::env::var("SKOOP_SCALE_NODES")
        .unwrap_or_else(|_| "500,1000,2500,5000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("SKOOP_SCALE_NODES: node counts"))
        .collect();
    let temporary = tempfile::tempdir().expect("a temporary directory");
    let base: PathBuf =
        std::env::var_os("SKOOP_SCALE_DIR").map_or_else(|| temporary.path().into(), PathBuf::from);
    let skoop = Path::new(env!("CARGO_BIN_EXE_skoop"));
    if std::env::var("SKOOP_SCALE_SHAPE").as_deref() == Ok("kubectl") {
        kubectl(&sizes, &base, skoop);
        return;
    }
    let before = std::env::var_os("SKOOP_SCALE_BEFORE").map(PathBuf::from);
    println!(
        "| nodes (pods / services / policies) | cluster/ | diagnose, files | snapshot check | snapshot cache (size) | diagnose, cache | diagnose --cni none, cache | python3 json.load | python / diagnose, cache |{}",
        if before.is_some() {
            " diagnose, before |"
        } else {
            ""
        }
    );
    println!(
        "|---|---|---|---|---|---|---|---|---|{}",
        if before.is_some() { "---|" } else { "" }
    );
    for nodes in sizes {
        let dir = base.join(nodes.to_string());
        let all = base.join(format!("{nodes}-all.json"));
        let generated = if dir.exists() {
            None
        } else {
            Some(cluster::generate_timed(
                nodes,
                cluster::Cni::FlannelVxlan,
                &dir,
                &all,
            ))
        };
        let run_with = |binary: &Path, args: &[&str]| {
            fastest(|| {
                let mut command = Command::new(binary);
                command.args(args).arg(&dir);
                if args[0] == "diagnose" {
                    command.args(["--from", "default/web-0", "--to", "svc/default/web"]);
                }
                command
            })
        };
        let skoop_run = |args: &[&str]| run_with(skoop, args);
        let cache = dir.join("cluster.cache");
        // Without the cache first: a kept directory may hold one.
        if cache.exists() {
            std::fs::remove_file(&cache).expect("the old cache is removed");
        }
        let from_files = skoop_run(&["diagnose", "--no-cache", "--snapshot"]);
        let check = skoop_run(&["snapshot", "check"]);
        let written = run(Command::new(skoop).args(["snapshot", "cache"]).arg(&dir));
        assert_eq!(written.exit, Some(0), "skoop snapshot cache failed");
        let cache_size = std::fs::metadata(&cache).expect("a cache").len();
        let from_cache = skoop_run(&["diagnose", "--snapshot"]);
        let no_cni = skoop_run(&["diagnose", "--cni", "none", "--snapshot"]);
        let python = fastest(|| {
            let mut command = Command::new("python3");
            command
                .arg("-c")
                .arg("import json, sys; json.load(open(sys.argv[1]))")
                .arg(&all);
            command
        });
        let what = generated.map_or_else(
            || "(kept)".to_owned(),
            |g| format!("{} / {} / {}", g.pods, g.services, g.policies),
        );
        let size = generated_size(&dir.join("cluster"));
        let before = before.as_deref().map_or_else(String::new, |binary| {
            format!(" {} |", run_with(binary, &["diagnose", "--snapshot"]))
        });
        println!(
            "| {nodes} ({what}) | {:.0} MiB | {from_files} | {check} | {written} ({:.1} MiB) | {from_cache} | {no_cni} | {python} | {:.1}x |{before}",
            mib(size),
            mib(cache_size),
            python.wall.as_secs_f64() / from_cache.wall.as_secs_f64(),
        );
    }
}

/// Bytes of the files directly in `dir`.
fn generated_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The kubectl-shaped clusters (`SKOOP_SCALE_SHAPE=kubectl`): the same
/// objects written as `kubectl get -o json` and as `kubectl get -o yaml`
/// write them by hand, one file per kind (every pod in one), each Pod
/// complete (`cluster::Written::Kubectl`). For each size: one flow from
/// the YAML files and from the JSON files (`--no-cache`), the first
/// diagnosis of the JSON snapshot without a cache (which writes it), the
/// second (which reads it), and Python's `json.load` and
/// `yaml.load(Loader=yaml.CSafeLoader)` of the same files, one after the
/// other in one process each (`SKOOP_SCALE_PYTHON_YAML=0`: not the latter).
fn kubectl(sizes: &[usize], base: &Path, skoop: &Path) {
    println!(
        "| nodes | cluster/ JSON / YAML (largest file) | diagnose, YAML files | diagnose, JSON files | YAML / JSON (wall) | first diagnose (writes the cache) | second diagnose (reads it) | python3 json.load | python3 yaml CSafeLoader |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &nodes in sizes {
        let dir = |syntax: &str| base.join(format!("{nodes}-kubectl-{syntax}"));
        let (json, yaml) = (dir("json"), dir("yaml"));
        for (path, syntax) in [
            (&json, cluster::Syntax::Json),
            (&yaml, cluster::Syntax::Yaml),
        ] {
            if !path.exists() {
                cluster::generate_written(
                    nodes,
                    cluster::Cni::FlannelVxlan,
                    cluster::Written::Kubectl(syntax),
                    path,
                    Path::new("/dev/null"),
                );
            }
        }
        let diagnose = |dir: &Path, extra: &[&str]| {
            let mut command = Command::new(skoop);
            command
                .arg("diagnose")
                .args(extra)
                .arg("--snapshot")
                .arg(dir)
                .args(["--from", "default/web-0", "--to", "svc/default/web"]);
            command
        };
        let from_yaml = fastest(|| diagnose(&yaml, &["--no-cache"]));
        let from_json = fastest(|| diagnose(&json, &["--no-cache"]));
        let cache = json.join("cluster.cache");
        if cache.exists() {
            std::fs::remove_file(&cache).expect("the old cache is removed");
        }
        let first = run(&mut diagnose(&json, &[]));
        assert!(cache.exists(), "the first diagnosis wrote no cache");
        let second = fastest(|| diagnose(&json, &[]));
        let python = |module: &str, load: &str, dir: &Path| {
            let files = cluster_files(&dir.join("cluster"));
            let mut command = Command::new("python3");
            command
                .arg("-c")
                .arg(format!(
                    "import {module}, sys\nfor f in sys.argv[1:]:\n    {load}"
                ))
                .args(files);
            run(&mut command)
        };
        let json_load = python("json", "json.load(open(f))", &json);
        // libyaml's tree of a 5,000-node cluster takes about 20 GiB:
        // `SKOOP_SCALE_PYTHON_YAML=0` leaves it out where memory is short.
        let yaml_load = (std::env::var("SKOOP_SCALE_PYTHON_YAML").as_deref() != Ok("0"))
            .then(|| python("yaml", "yaml.load(open(f), Loader=yaml.CSafeLoader)", &yaml))
            .map_or_else(|| "(not run)".to_owned(), |run| run.to_string());
        let largest = |dir: &Path| {
            cluster_files(&dir.join("cluster"))
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .max()
                .unwrap_or(0)
        };
        println!(
            "| {nodes} | {:.0} / {:.0} MiB ({:.0} / {:.0} MiB) | {from_yaml} | {from_json} | {:.1}x | {first} | {second} | {json_load} | {yaml_load} |",
            mib(generated_size(&json.join("cluster"))),
            mib(generated_size(&yaml.join("cluster"))),
            mib(largest(&json)),
            mib(largest(&yaml)),
            from_yaml.wall.as_secs_f64() / from_json.wall.as_secs_f64(),
        );
    }
}

/// The files directly in `dir`, sorted.
fn cluster_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}
