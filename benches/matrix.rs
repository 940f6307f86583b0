//! `skoop matrix` on a large generated cluster (`cargo bench --bench
//! matrix`): 1,000 nodes (30 pods per node, 2 services per node with 4
//! endpoints each; `common/cluster.rs` says what is generated), to every
//! Service port (`--to-services`), with the built-in packs, from
//! - `pod-per-node`: one pod on each node with a full dump
//!   (`--from-pod-per-node --from-dumped-only`: the generator dumps the two
//!   nodes of the bundled example, so web-0 on node-1 and web-2 on node-2),
//!   4,002 flows; target at most 10 s on 2 cores;
//! - `every-pod`: every pod of the two dumped nodes (`--from-pods '*'
//!   --from-dumped-nodes`: the example's four, whose namespaces are dumped,
//!   and the 56 the generator adds beside them, whose are not), about
//!   120,000 flows; target at most 60 s on 2 cores;
//! - `replicas`: the 28 replicas of a client Deployment that the bench adds
//!   on each dumped node (`--from-pods default/app=client`; alike in all but
//!   their names and addresses, without dumps of their own: twins,
//!   `docs/matrix.md`), about 112,000 flows, in a copy of the snapshot
//!   whose files are hard links but for the replicas' own file.
//!
//! Before its cases, each snapshot's cluster cache is written (`skoop
//! snapshot cache`, untimed), so that every run reads its objects alike.
//!
//! The release `skoop matrix` runs as a fresh process: it loads the
//! snapshot once, diagnoses every flow on its worker threads, and writes the
//! JSON report, whose counts are printed beside the time. Timed by wall
//! clock, its CPU time and peak memory read from the kernel (`wait4`'s
//! rusage); one run per row, as each takes tens of seconds. The load
//! average is printed before each run (the machine may be shared).
//!
//! Each case runs twice, side by side: as `skoop matrix` answers by default
//! (`twins`: a source's twins, pods nothing in the snapshot tells apart from
//! it, answered by its diagnoses; `docs/matrix.md`, "Twins"), and with
//! `--each-flow` (`each-flow`: every flow diagnosed on its own, as before
//! twins), the two reports' flows compared: they must be equal.
//!
//! `SKOOP_MATRIX_NODES=1000` picks the sizes; `SKOOP_MATRIX_JOBS=1,2` the
//! worker counts; `SKOOP_MATRIX_CASES=pod-per-node,every-pod` the sources;
//! `SKOOP_MATRIX_SHAPES=collector,kubectl` how the objects are written (as
//! the collector writes them, or complete as `kubectl get -o json` prints
//! them, `cluster::Written::Kubectl`); `SKOOP_SCALE_DIR=DIR` keeps the
//! generated snapshots there (`DIR/<nodes>/` and `DIR/<nodes>-kubectl-json/`,
//! shared with `cargo bench --bench scale`) instead of a temporary
//! directory.

#[path = "common/cluster.rs"]
mod cluster;
#[path = "common/process.rs"]
mod process;

use std::path::{Path, PathBuf};
use std::process::Command;

fn list(variable: &str, default: &str) -> Vec<usize> {
    std::env::var(variable)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|n| n.trim().parse().expect("a comma-separated list of numbers"))
        .collect()
}

fn words(variable: &str, default: &str) -> Vec<String> {
    std::env::var(variable)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|word| word.trim().to_owned())
        .collect()
}

/// How a run answers, as `skoop matrix` is told it.
fn answering(mode: &str) -> &'static [&'static str] {
    match mode {
        "twins" => &[],
        "each-flow" => &["--each-flow"],
        _ => panic!("SKOOP_MATRIX_ANSWERING: {mode:?} is neither twins nor each-flow"),
    }
}

/// The sources of a case, as `skoop matrix` takes them.
fn sources(case: &str) -> &'static [&'static str] {
    match case {
        "pod-per-node" => &["--from-pod-per-node", "--from-dumped-only"],
        "every-pod" => &["--from-pods", "*", "--from-dumped-nodes"],
        "replicas" => &["--from-pods", "default/app=client"],
        _ => panic!("SKOOP_MATRIX_CASES: {case:?} is neither pod-per-node, every-pod nor replicas"),
    }
}

fn main() {
    let temporary = tempfile::tempdir().expect("a temporary directory");
    let base: PathBuf =
        std::env::var_os("SKOOP_SCALE_DIR").map_or_else(|| temporary.path().into(), PathBuf::from);
    let skoop = Path::new(env!("CARGO_BIN_EXE_skoop"));
    println!(
        "| nodes (pods / services / policies), objects | sources | answering | -j | flows (succeed / not delivered / with severe findings / refused) | flows answered by twins | skoop matrix: wall (CPU) / peak | CPU per flow | load average before |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for nodes in list("SKOOP_MATRIX_NODES", "1000") {
        for shape in words("SKOOP_MATRIX_SHAPES", "collector") {
            let kubectl = match shape.as_str() {
                "collector" => false,
                "kubectl" => true,
                _ => panic!("SKOOP_MATRIX_SHAPES: {shape:?} is neither collector nor kubectl"),
            };
            let dir = match kubectl {
                false => base.join(nodes.to_string()),
                true => base.join(format!("{nodes}-kubectl-json")),
            };
            let what = if dir.exists() {
                "(kept)".to_owned()
            } else {
                let all = base.join(format!("{nodes}-{shape}-all.json"));
                let cni = cluster::Cni::FlannelVxlan;
                let generated = match kubectl {
                    false => cluster::generate_timed(nodes, cni, &dir, &all),
                    true => {
                        let written = cluster::Written::Kubectl(cluster::Syntax::Json);
                        cluster::generate_written(nodes, cni, written, &dir, &all)
                    }
                };
                format!(
                    "{} / {} / {}",
                    generated.pods, generated.services, generated.policies
                )
            };
            let with_replicas = replicas_beside(&dir);
            cache(skoop, &dir);
            cache(skoop, &with_replicas);
            for case in words("SKOOP_MATRIX_CASES", "pod-per-node,every-pod,replicas") {
                let dir = match case.as_str() {
                    "replicas" => &with_replicas,
                    _ => &dir,
                };
                for jobs in list("SKOOP_MATRIX_JOBS", "2") {
                    let mut reports: Vec<serde_json::Value> = Vec::new();
                    for mode in words("SKOOP_MATRIX_ANSWERING", "twins,each-flow") {
                        let report = run_case(skoop, dir, temporary.path(), &case, &mode, jobs);
                        let counts = &report.report["counts"];
                        let flows = counts["flows"].as_u64().expect("a count");
                        let twins: u64 = report.report["twins"].as_array().map_or(0, |classes| {
                            classes.iter().filter_map(|c| c["flows"].as_u64()).sum()
                        });
                        let run = &report.run;
                        println!(
                            "| {nodes} ({what}), {shape} | {case} | {mode} | {jobs} | {flows} ({} / {} / {} / {}) | {twins} | {:.1} s ({:.1}) / {:.0} MiB | {:.2} ms | {} |",
                            counts["succeed"],
                            counts["not_delivered"],
                            counts["delivered_with_severe_findings"],
                            counts["errors"],
                            run.wall.as_secs_f64(),
                            run.cpu.as_secs_f64(),
                            process::mib(run.peak_bytes),
                            run.cpu.as_secs_f64() * 1000.0 / flows.max(1) as f64,
                            report.load,
                        );
                        reports.push(report.report);
                    }
                    // Twins or not, every flow has the same answer.
                    for other in reports.iter().skip(1) {
                        assert_eq!(
                            other["flows"], reports[0]["flows"],
                            "the answering modes disagree on a flow"
                        );
                    }
                }
            }
        }
    }
}

/// A run of `skoop matrix`: its report, and how it ran.
struct CaseRun {
    report: serde_json::Value,
    run: process::Run,
    /// The load average before it.
    load: String,
}

/// `skoop matrix` on `dir` from `case`'s sources to every Service port,
/// answering as `mode` says, on `jobs` workers, its JSON report written
/// under `scratch`.
fn run_case(
    skoop: &Path,
    dir: &Path,
    scratch: &Path,
    case: &str,
    mode: &str,
    jobs: usize,
) -> CaseRun {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let report = scratch.join(format!("matrix-{case}-{mode}-{jobs}.json"));
    let run = process::run(
        Command::new(skoop)
            .args(["matrix", "--snapshot"])
            .arg(dir)
            .args(sources(case))
            .args(answering(mode))
            .args(["--to-services", "--jobs", &jobs.to_string(), "--output"])
            .arg(&report),
    );
    // 0, 1 or 3: a report was written (2 would be an error).
    assert!(
        matches!(run.exit, Some(0 | 1 | 3)),
        "skoop matrix failed: {:?}",
        run.exit
    );
    let text = std::fs::read_to_string(&report).expect("the report");
    CaseRun {
        report: serde_json::from_str(&text).expect("JSON"),
        run,
        load: load.join(" "),
    }
}

/// Writes `dir`'s cluster cache, so that the runs after read it alike.
fn cache(skoop: &Path, dir: &Path) {
    let written = process::run(Command::new(skoop).args(["snapshot", "cache"]).arg(dir));
    assert_eq!(written.exit, Some(0), "skoop snapshot cache failed");
}

/// The replicas of a client Deployment the `replicas` case adds on each
/// dumped node of the bundled example (its name, address, and pod subnet's
/// first three octets); their addresses are past the generator's pods.
const REPLICAS: usize = 28;
const DUMPED: [(&str, &str, &str); 2] = [
    ("node-1", "172.18.0.11", "10.244.1"),
    ("node-2", "172.18.0.12", "10.244.2"),
];

/// A copy of the snapshot `dir` (`DIR-replicas`, kept beside it), its files
/// hard links, with the client Deployment's replicas in
/// `cluster/replicas.json`.
fn replicas_beside(dir: &Path) -> PathBuf {
    let copy = dir.with_file_name(format!(
        "{}-replicas",
        dir.file_name().and_then(|n| n.to_str()).expect("a name")
    ));
    if copy.exists() {
        return copy;
    }
    link_tree(dir, &copy);
    let mut items = Vec::new();
    for (node, host, subnet) in DUMPED {
        for i in 0..REPLICAS {
            let name = format!("client-7c5ddbdf54-{node}-{i}");
            let ip = format!("{subnet}.{}", 100 + i);
            items.push(serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "uid": format!("3f1b7c2e-0000-4000-8000-{:012}", items.len()),
                    "labels": {"app": "client", "pod-template-hash": "7c5ddbdf54"},
                },
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "client", "image": "busybox"}],
                },
                "status": {
                    "phase": "Running",
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        {"type": "ContainersReady", "status": "True"},
                    ],
                    "containerStatuses": [{"name": "client", "ready": true}],
                    "hostIP": host,
                    "podIP": ip,
                    "podIPs": [{"ip": ip}],
                },
            }));
        }
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(
        copy.join("cluster").join("replicas.json"),
        serde_json::to_string_pretty(&list).expect("JSON"),
    )
    .expect("the replicas' file");
    copy
}

/// `from`'s tree again at `to`, each file a hard link (its cluster cache
/// left out: the copy's objects are not the same).
fn link_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a directory");
    for entry in std::fs::read_dir(from).expect("the snapshot").flatten() {
        let (path, target) = (entry.path(), to.join(entry.file_name()));
        if path.is_dir() {
            link_tree(&path, &target);
        } else if entry.file_name() != "cluster.cache" {
            std::fs::hard_link(&path, &target).expect("a hard link");
        }
    }
}
