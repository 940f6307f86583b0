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
//!   120,000 flows; target at most 60 s on 2 cores.
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
        _ => panic!("SKOOP_MATRIX_CASES: {case:?} is neither pod-per-node nor every-pod"),
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
            for case in words("SKOOP_MATRIX_CASES", "pod-per-node,every-pod") {
                for jobs in list("SKOOP_MATRIX_JOBS", "2") {
                    let mut reports: Vec<serde_json::Value> = Vec::new();
                    for mode in words("SKOOP_MATRIX_ANSWERING", "twins,each-flow") {
                        let report = run_case(skoop, &dir, temporary.path(), &case, &mode, jobs);
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
