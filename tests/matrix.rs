//! `skoop matrix` and `skoop diff` (`docs/matrix.md`): a matrix's answers
//! are `skoop diagnose`'s, flow by flow; `diff` names exactly the flows an
//! injected fault breaks; the text, JSON and CSV reports pinned against
//! `tests/golden/matrix/` (`SKOOP_BLESS=1` rewrites them); the heat map's
//! structure, its links to each flow's report, and (where Chromium is
//! installed, see `common::browser`) the page opened and a cell clicked.
//! `docs/matrix.md`'s commands are run by `tests/docs_examples.rs`.

mod common;

#[path = "../benches/common/cluster.rs"]
#[allow(
    dead_code,
    reason = "the benchmarks' generator, of which these tests use one cluster"
)]
mod cluster;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::browser::{Browser, tool};
use common::golden::Goldens;
use serde_json::{Value, json};
use skoop::snapshot::Snapshot;

/// Every source and destination kind on the small examples.
const EVERY_KIND: &[&str] = &[
    "--from-nodes",
    "--from-pods",
    "default",
    "--to-services",
    "--to-pods",
    "default",
    "--to-nodes",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn skoop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("run skoop")
}

/// A command's stdout, which must end with exit status `code` and say
/// nothing on stderr.
fn stdout(args: &[&str], code: i32) -> String {
    let output = skoop(args);
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// `skoop matrix -o json` of every kind of flow on `snapshot`.
fn matrix_json(snapshot: &str, code: i32) -> Value {
    let mut args = vec!["matrix", "--snapshot", snapshot, "-o", "json"];
    args.extend(EVERY_KIND);
    serde_json::from_str(&stdout(&args, code)).expect("JSON")
}

fn flows(matrix: &Value) -> &Vec<Value> {
    matrix["flows"].as_array().expect("flows")
}

/// Whether a path of `diagnose -o json` ends as intended (as the engine's
/// `PathResult::succeeds` says, read from the report).
fn path_succeeds(path: &Value) -> bool {
    path["disposition"] == "delivered"
        || (path["disposition"] == "exits_cluster" && path["exit"]["answerable"] == true)
}

#[test]
fn matrix_answers_equal_diagnose_on_a_sample_of_50_flows() {
    // 42 flows each on three examples: a fault the kernel made, a
    // NetworkPolicy, a snapshot missing a node's dumps (assumed hops).
    let mut all: Vec<(&str, Value)> = Vec::new();
    for (snapshot, code) in [
        ("examples/flannel-vxlan-broken", 1),
        ("examples/calico-vxlan", 1),
        ("examples/flannel-vxlan-partial", 1),
    ] {
        let matrix = matrix_json(snapshot, code);
        all.extend(flows(&matrix).iter().map(|f| (snapshot, f.clone())));
    }
    assert_eq!(all.len(), 126);
    // 50 flows spread evenly over the three.
    let sample: Vec<&(&str, Value)> = (0..50).map(|i| &all[i * all.len() / 50]).collect();
    let mut verdicts = BTreeSet::new();
    for (snapshot, flow) in sample {
        verdicts.insert(diagnose_says(Path::new(snapshot), flow, &[]));
    }
    assert_eq!(
        verdicts.len(),
        3,
        "the sample holds every verdict: {verdicts:?}"
    );
}

/// Diagnoses a matrix's flow on its own (`skoop diagnose --from FROM --to
/// TO --protocol P --family F -o json`) and holds the matrix's answer to
/// it, field for field; the verdict.
fn diagnose_says(snapshot: &Path, flow: &Value, more: &[&str]) -> &'static str {
    let (from, to, protocol) = (
        flow["from"].as_str().unwrap(),
        flow["to"].as_str().unwrap(),
        flow["protocol"].as_str().unwrap(),
    );
    let snapshot_arg = snapshot.to_str().expect("a UTF-8 path");
    let mut args = vec![
        "diagnose",
        "--snapshot",
        snapshot_arg,
        "--from",
        from,
        "--to",
        to,
        "--protocol",
        protocol,
        "-o",
        "json",
    ];
    // The matrix writes the family as the reports name it (`IPv4`), the
    // flag takes it as written on a command line (`ipv4`).
    let family = flow["family"].as_str().map(str::to_ascii_lowercase);
    if let Some(family) = &family {
        args.extend(["--family", family]);
    }
    args.extend(more);
    let output = skoop(&args);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: a JSON report: {e}: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let context = format!("{}: {from} -> {to} ({protocol})", snapshot.display());
    let verdict = match output.status.code() {
        Some(0) => "succeeds",
        Some(1) => "not_delivered",
        Some(3) => "delivered_with_severe_findings",
        other => panic!("{context}: diagnose exits {other:?}"),
    };
    assert_eq!(flow["verdict"], verdict, "{context}");
    assert_eq!(flow["disposition"], report["disposition"], "{context}");
    assert_eq!(flow["assumed"], report["assumed"], "{context}");
    let paths = report["paths"].as_array().unwrap();
    assert_eq!(flow["paths"], json!(paths.len()), "{context}");
    let failing = paths.iter().filter(|p| !path_succeeds(p)).count();
    assert_eq!(flow["failing_paths"], json!(failing), "{context}");
    // The flow's finding is one of diagnose's, field for field.
    match flow["finding"].as_object() {
        None => assert_eq!(
            verdict, "succeeds",
            "{context}: a failing flow names a finding"
        ),
        Some(finding) => {
            let found = report["findings"].as_array().unwrap().iter().any(|f| {
                ["id", "severity", "hop", "message", "evidence"]
                    .iter()
                    .all(|key| f[key] == finding[*key])
            });
            assert!(found, "{context}: {finding:?} is not diagnose's");
        }
    }
    verdict
}

/// The benchmarks' generated cluster (`benches/common/cluster.rs`) at
/// `nodes` nodes, written into `dir`.
fn generated_cluster(nodes: usize, dir: &Path) -> PathBuf {
    let snapshot = dir.join("snapshot");
    let all = dir.join("all-objects.json");
    let generated = cluster::generate_timed(nodes, cluster::Cni::FlannelVxlan, &snapshot, &all);
    assert_eq!(generated.pods, nodes * 30, "30 pods on every node");
    assert_eq!(generated.services, nodes * 2 + 1);
    assert_eq!(generated.policies, nodes * 2 / 10);
    snapshot
}

#[test]
fn a_whole_cluster_matrix_equals_diagnose_on_200_sampled_flows() {
    // Every pod of the two dumped nodes (the example's four with dumps of
    // their own, 56 without) to every Service port of a 10-node cluster
    // (21 Services, 2 NetworkPolicies): 1,260 flows, answered as the matrix
    // answers a whole cluster, and 200 of them, spread evenly, diagnosed
    // each on its own.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let snapshot = generated_cluster(10, dir.path());
    let output = skoop(&[
        "matrix",
        "--snapshot",
        snapshot.to_str().expect("a UTF-8 path"),
        "--from-pods",
        "*",
        "--from-dumped-nodes",
        "--to-services",
        "-o",
        "json",
    ]);
    assert!(
        matches!(output.status.code(), Some(0 | 1 | 3)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let matrix: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let all = flows(&matrix);
    assert_eq!(all.len(), 60 * 21);
    // The 28 pods each node's generator adds, each in a namespace and with
    // an app label of its own, are twins: the sample holds flows they
    // answered for each other.
    let twins = matrix["twins"].as_array().expect("classes of twins");
    let namespaces: BTreeSet<&str> = twins
        .iter()
        .flat_map(|class| class["sources"].as_array().unwrap())
        .filter_map(|source| source.as_str()?.split_once('/').map(|(ns, _)| ns))
        .collect();
    assert_eq!(twins.len(), 2, "{twins:?}");
    assert!(namespaces.len() > 20, "{namespaces:?}");
    let sample: Vec<&Value> = (0..200).map(|i| &all[i * all.len() / 200]).collect();
    let sources: BTreeSet<&str> = sample.iter().filter_map(|f| f["from"].as_str()).collect();
    assert_eq!(sources.len(), 60, "every source is sampled");
    // Two at a time, each diagnosis a process of its own.
    let halves: Vec<&[&Value]> = sample.chunks(100).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = halves
            .iter()
            .map(|half| {
                scope.spawn(|| {
                    for flow in *half {
                        diagnose_says(&snapshot, flow, &[]);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().expect("every sampled flow is diagnose's");
        }
    });
}

/// The node a source or destination of the examples' flows is on, from the
/// cluster's objects: `node/NAME` is NAME, a pod its `spec.nodeName`.
fn node_of(snapshot: &Snapshot, endpoint: &str) -> String {
    if let Some(node) = endpoint.strip_prefix("node/") {
        return node.to_owned();
    }
    let (namespace, rest) = endpoint.split_once('/').unwrap();
    let name = rest.split(':').next().unwrap();
    let pod = snapshot.cluster.pod(namespace, name).unwrap();
    pod.node_name.clone().unwrap()
}

#[test]
fn diff_reports_exactly_the_flows_the_missing_fdb_entry_breaks() {
    // The fault (examples/flannel-vxlan-broken/README.md): node-1 lost the
    // FDB entry of node-2's VTEP, so that no VXLAN packet goes from node-1 to
    // node-2. Flannel sends pod-network traffic between two nodes by VXLAN
    // both ways, and node-to-node traffic over the underlay; so, by the
    // cluster's objects alone, a flow breaks exactly when it joins a node or
    // pod on one node to a pod (or a service's backend pod) on the other:
    // its request or its reply then needs the missing entry.
    let (snapshot, _) = Snapshot::load(&root().join("examples/flannel-vxlan-broken")).unwrap();
    let backends = |service: &str| -> BTreeSet<String> {
        let (namespace, name) = service.split_once('/').unwrap();
        let service = snapshot.cluster.service(namespace, name).unwrap();
        let endpoints = snapshot.cluster.endpoint_slices_for(service);
        endpoints
            .flat_map(|slice| &slice.endpoints)
            .filter_map(|endpoint| endpoint.node_name.clone())
            .collect()
    };
    let mut args = vec![
        "diff",
        "examples/flannel-vxlan",
        "examples/flannel-vxlan-broken",
        "-o",
        "json",
    ];
    args.extend(EVERY_KIND);
    let report: Value = serde_json::from_str(&stdout(&args, 1)).unwrap();
    let after = matrix_json("examples/flannel-vxlan-broken", 1);
    let mut expected = BTreeSet::new();
    for flow in flows(&after) {
        let (from, to) = (flow["from"].as_str().unwrap(), flow["to"].as_str().unwrap());
        let source = node_of(&snapshot, from);
        let far: BTreeSet<String> = match to.strip_prefix("svc/") {
            Some(service) => backends(service.split(':').next().unwrap()),
            None if to.starts_with("node/") => BTreeSet::new(),
            None => BTreeSet::from([node_of(&snapshot, to)]),
        };
        if far.iter().any(|node| *node != source) {
            expected.insert((from.to_owned(), to.to_owned()));
        }
    }
    assert_eq!(expected.len(), 18, "{expected:#?}");
    let changed = report["changed"].as_array().unwrap();
    let broke: BTreeSet<(String, String)> = changed
        .iter()
        .filter(|c| c["change"] == "broke")
        .map(|c| {
            let cause = &c["cause"];
            assert_eq!(cause["id"], "kernel.fdb.missing", "{c}");
            assert_eq!(cause["hop"], "node-1", "{c}");
            assert!(
                cause["evidence"]
                    .as_str()
                    .unwrap()
                    .ends_with("nodes/node-1/host/bridge-fdb.json"),
                "{c}"
            );
            (
                c["from"].as_str().unwrap().to_owned(),
                c["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(broke, expected);
    // Nothing else changed but flows still delivered, now flagged by the
    // flannel pack's finding about that same entry.
    for change in changed.iter().filter(|c| c["change"] != "broke") {
        assert_eq!(change["change"], "flagged", "{change}");
        assert_eq!(change["after"]["disposition"], "delivered", "{change}");
        assert_eq!(change["cause"]["id"], "flannel.vxlan.fdb", "{change}");
        assert_eq!(change["cause"]["hop"], "node-1", "{change}");
    }
    assert_eq!(report["only_before"], json!([]));
    assert_eq!(report["only_after"], json!([]));
    assert_eq!(
        report["unchanged"],
        json!(flows(&after).len() - changed.len())
    );
}

#[test]
fn diff_of_a_saved_matrix_with_itself_or_its_snapshot_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("vxlan.json");
    let mut args = vec![
        "matrix",
        "--snapshot",
        "examples/flannel-vxlan",
        "--output",
        saved.to_str().unwrap(),
    ];
    args.extend(EVERY_KIND);
    stdout(&args, 0);
    let saved = saved.to_str().unwrap();
    let text = stdout(&["diff", saved, saved], 0);
    assert!(text.contains("0 flows changed, 42 unchanged"), "{text}");
    // The saved matrix's flows asked again of the snapshot.
    let text = stdout(&["diff", saved, "examples/flannel-vxlan"], 0);
    assert!(text.contains("0 flows changed, 42 unchanged"), "{text}");
    let text = stdout(&["diff", saved, "examples/flannel-vxlan-broken"], 1);
    // node-1's missing tunnel to node-2 changes no flow that stays on
    // node-1 (issue 32: a finding off a flow's paths is not its verdict).
    assert!(text.contains("24 flows changed, 18 unchanged"), "{text}");
}

#[test]
fn diff_refuses_what_is_neither_a_snapshot_nor_a_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    fs::write(&bad, "{\"schema_version\": 1,\n \"flows\": 3}").unwrap();
    let output = skoop(&["diff", bad.to_str().unwrap(), "examples/flannel-vxlan"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.json:2:") && stderr.contains("not a snapshot directory"),
        "{stderr}"
    );
    let output = skoop(&[
        "diff",
        "examples/flannel-vxlan",
        "examples/flannel-vxlan-broken",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("give the flows"));
}

#[test]
fn exit_status_is_the_worst_flows_as_diagnose_would_exit() {
    let run = |snapshot: &str, flows: &[&str]| {
        let mut args = vec!["matrix", "--snapshot", snapshot];
        args.extend(flows);
        skoop(&args)
    };
    let ok = run(
        "examples/flannel-vxlan",
        &["--from-pods", "default", "--to-services"],
    );
    assert_eq!(ok.status.code(), Some(0));
    let broken = run(
        "examples/flannel-vxlan-broken",
        &["--from-pods", "default", "--to-services"],
    );
    assert_eq!(broken.status.code(), Some(1));
    // Delivered on node-1: the flannel pack's critical finding about
    // node-1's tunnel to node-2 is off this flow's path.
    let beside = run(
        "examples/flannel-vxlan-broken",
        &["--from", "default/web-0", "--to", "default/web-1:8080"],
    );
    assert_eq!(beside.status.code(), Some(0));
    // Delivered, with a critical finding about a hop of the path.
    let marred = run(
        "examples/flannel-vxlan",
        &[
            "--from",
            "default/web-0",
            "--to",
            "default/web-3:8080",
            "--set",
            "flannel.pod_mtu=1400",
        ],
    );
    assert_eq!(marred.status.code(), Some(3));
    let refused = run(
        "examples/flannel-vxlan",
        &["--from-pods", "default", "--to", "default/web-9:8080"],
    );
    assert_eq!(refused.status.code(), Some(2));
    let text = String::from_utf8_lossy(&refused.stdout);
    assert!(
        text.contains("4 refused") && text.contains("error: no pod default/web-9"),
        "{text}"
    );
    let nothing = run(
        "examples/flannel-vxlan",
        &["--from-pods", "nowhere", "--to-services"],
    );
    assert_eq!(nothing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("gives no flow"));
    let no_destination = run("examples/flannel-vxlan", &["--from-nodes"]);
    assert_eq!(no_destination.status.code(), Some(2));
}

#[test]
fn reports_match_the_goldens() {
    let golden = root().join("tests/golden/matrix");
    let mut goldens = Goldens::new();
    let matrix = |format: &str| {
        let mut args = vec![
            "matrix",
            "--snapshot",
            "examples/flannel-vxlan-broken",
            "-o",
            format,
        ];
        args.extend(EVERY_KIND);
        stdout(&args, 1)
    };
    let diff = |format: &str| {
        let mut args = vec![
            "diff",
            "examples/flannel-vxlan",
            "examples/flannel-vxlan-broken",
            "-o",
            format,
        ];
        args.extend(EVERY_KIND);
        stdout(&args, 1)
    };
    let reports = [
        ("flannel-vxlan-broken.txt", matrix("text")),
        ("flannel-vxlan-broken.json", matrix("json")),
        ("flannel-vxlan-broken.csv", matrix("csv")),
        ("diff.txt", diff("text")),
        ("diff.json", diff("json")),
    ];
    for (name, report) in reports {
        goldens.check(&golden.join(name), &report);
    }
    goldens.assert_none_differ();
}

/// The heat map of every kind of flow on the broken example, written into
/// a new directory; the directory and the JSON matrix of the same flows.
fn heat_map() -> (tempfile::TempDir, PathBuf, Value) {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("matrix");
    let mut args = vec![
        "matrix",
        "--snapshot",
        "examples/flannel-vxlan-broken",
        "-o",
        "html",
        "--output",
        site.to_str().unwrap(),
    ];
    args.extend(EVERY_KIND);
    assert_eq!(stdout(&args, 1), "", "the report goes to the directory");
    (dir, site, matrix_json("examples/flannel-vxlan-broken", 1))
}

#[test]
fn the_heat_map_links_every_cell_to_that_flows_own_report() {
    let (_dir, site, matrix) = heat_map();
    let page = fs::read_to_string(site.join("index.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("content=\"default-src 'none'; style-src 'unsafe-inline'\""));
    let flows = flows(&matrix);
    // 6 sources (rows) by 7 destinations (columns), a cell per flow.
    assert_eq!(page.matches("<th scope=\"row\">").count(), 6);
    assert_eq!(page.matches("<th scope=\"col\">").count(), 7);
    assert_eq!(page.matches("<td class=").count(), flows.len());
    for (index, flow) in flows.iter().enumerate() {
        let cell = format!(
            "<td class=\"{}\" data-flow=\"{index}\"><a href=\"flows/{index}.html\"",
            flow["verdict"].as_str().unwrap()
        );
        assert!(page.contains(&cell), "{cell}");
        let report = site.join(format!("flows/{index}.html"));
        assert!(report.is_file(), "{}", report.display());
    }
    // A flow's page is diagnose's own report of it, byte for byte.
    for index in [0, 1, flows.len() - 1] {
        let flow = &flows[index];
        let diagnosed = skoop(&[
            "diagnose",
            "--snapshot",
            "examples/flannel-vxlan-broken",
            "--from",
            flow["from"].as_str().unwrap(),
            "--to",
            flow["to"].as_str().unwrap(),
            "--protocol",
            flow["protocol"].as_str().unwrap(),
            "-o",
            "html",
        ]);
        let written = fs::read(site.join(format!("flows/{index}.html"))).unwrap();
        assert!(written == diagnosed.stdout, "flow {index}: {flow}");
    }
    // The causes table counts the flows each finding stops.
    for cause in matrix["causes"].as_array().unwrap() {
        let row = format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td>",
            cause["flows"],
            cause["severity"].as_str().unwrap(),
            cause["id"].as_str().unwrap()
        );
        assert!(page.contains(&row), "{row}");
    }
}

#[test]
fn html_needs_a_new_or_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("keep.txt"), "mine").unwrap();
    let output = skoop(&[
        "matrix",
        "--snapshot",
        "examples/flannel-vxlan",
        "--from-nodes",
        "--to-nodes",
        "-o",
        "html",
        "--output",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not empty"));
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    let output = skoop(&[
        "matrix",
        "--snapshot",
        "examples/flannel-vxlan",
        "--from-nodes",
        "--to-nodes",
        "-o",
        "html",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--output DIR"));
}

#[test]
fn the_heat_map_opens_in_chromium_and_a_click_opens_the_flows_report() {
    let Some(chromium) = tool("chromium", "chromium") else {
        return;
    };
    let (_dir, site, matrix) = heat_map();
    let mut browser = Browser::start(&chromium);
    browser.open(&format!("file://{}", site.join("index.html").display()));
    let cells = browser.eval("document.querySelectorAll('table.heatmap td a').length");
    assert_eq!(cells, json!(flows(&matrix).len()));
    let problems = browser.problems();
    assert!(problems.is_empty(), "{problems:#?}");
    let artefacts = root().join("target/test-artefacts/matrix");
    fs::create_dir_all(&artefacts).unwrap();
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"));
    fs::write(artefacts.join("heatmap.png"), png).unwrap();
    // A real click on the first failing flow's cell opens its report.
    let (index, failing) = flows(&matrix)
        .iter()
        .enumerate()
        .find(|(_, f)| f["verdict"] == "not_delivered")
        .unwrap();
    browser.click(&format!("td[data-flow='{index}'] a"));
    // The report's own load: an evaluation sent while the navigation is
    // under way may be refused ("Inspected target navigated or closed").
    browser.wait_for("Page.loadEventFired");
    let verdict = browser.eval("document.getElementById('verdict').textContent");
    let location = browser.eval("location.pathname");
    assert!(
        location
            .as_str()
            .unwrap()
            .ends_with(&format!("/flows/{index}.html")),
        "{location}"
    );
    let disposition = failing["disposition"].as_str().unwrap();
    assert!(
        verdict.as_str().unwrap().contains(disposition),
        "{verdict} names {disposition}"
    );
}

#[test]
fn the_answers_do_not_depend_on_how_many_workers_make_them() {
    let run = |jobs: &str| {
        let mut args = vec![
            "matrix",
            "--snapshot",
            "examples/flannel-vxlan-broken",
            "-o",
            "json",
            "--jobs",
            jobs,
        ];
        args.extend(EVERY_KIND);
        stdout(&args, 1)
    };
    let one = run("1");
    assert_eq!(one, run("3"));
    assert_eq!(one, run("64"), "more workers than flows");
}

/// Issue 37: `matrix --confirm` sends packets, so it is refused where it
/// cannot run before any flow is diagnosed: without `--node-exec`, for a
/// format that cannot show it, for a sample of no flow, and for a rate of
/// none.
#[test]
fn confirm_is_refused_where_it_cannot_run() {
    let flows: Vec<&str> =
        "matrix --snapshot examples/flannel-vxlan --from default/web-0 --to-pods default --port 8080"
            .split(' ')
            .collect();
    for (args, expected) in [
        (&["--confirm", "2"][..], "through --node-exec TEMPLATE"),
        (
            &["--confirm", "all", "--node-exec", "true", "-o", "csv"][..],
            "use -o text or -o json",
        ),
        (
            &["--confirm", "0", "--node-exec", "true"][..],
            "give a number of flows",
        ),
        (&["--node-exec", "true"][..], "--confirm <N|all>"),
        (
            &[
                "--confirm",
                "2",
                "--node-exec",
                "true",
                "--confirm-rate",
                "0",
            ][..],
            "more than 0 and at most 1000",
        ),
        (&["--confirm-rate", "1"][..], "--confirm <N|all>"),
    ] {
        let output = skoop(&[&flows[..], args].concat());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

/// A pod of `app` at `ips` on `node` (whose address is `host`), with no
/// dump of its own: what a replica of a Deployment looks like to skoop.
fn replica(name: &str, app: &str, ips: &[&str], node: &str, host: &str) -> String {
    let pod_ips: String = ips
        .iter()
        .map(|ip| format!("\n    - ip: \"{ip}\""))
        .collect();
    format!(
        r#"- apiVersion: v1
  kind: Pod
  metadata:
    labels:
      app: {app}
    name: {name}
    namespace: default
    uid: 7f0c3e2a-{name}
  spec:
    containers:
    - name: client
      image: busybox
    nodeName: {node}
  status:
    conditions:
    - status: "True"
      type: Ready
    - status: "True"
      type: ContainersReady
    containerStatuses:
    - name: client
      ready: true
    hostIP: "{host}"
    phase: Running
    podIP: "{}"
    podIPs:{pod_ips}
"#,
        ips[0]
    )
}

/// A replica: its name, `app` label, addresses, and its node's name and
/// address.
type Replica<'a> = (&'a str, &'a str, &'a [&'a str], (&'a str, &'a str));

/// A copy of `example` with `replicas` beside its pods (and `more`, a file
/// of other objects, when given).
fn with_replicas(example: &str, replicas: &[Replica], more: Option<&str>) -> tempfile::TempDir {
    let dir = common::copy_snapshot(example);
    let items: String = replicas
        .iter()
        .map(|(name, app, ips, (node, host))| replica(name, app, ips, node, host))
        .collect();
    let cluster = dir.path().join("cluster");
    let list = format!("apiVersion: v1\nkind: List\nitems:\n{items}");
    fs::write(cluster.join("replicas.yaml"), list).unwrap();
    if let Some(more) = more {
        fs::write(cluster.join("more.yaml"), more).unwrap();
    }
    dir
}

/// `skoop matrix -o json` with `args` on `dir`, with twins and with
/// `--each-flow`: every flow's answer is the same byte for byte, and each
/// flow a twin answered is what `diagnose` says of it alone (both with
/// `packs`, the packs' own flags). The classes of twins, how many flows
/// they answered, and the verdicts of those flows.
fn twins_hold(
    dir: &Path,
    args: &[&str],
    packs: &[&str],
    code: i32,
) -> (Vec<Vec<String>>, u64, BTreeSet<&'static str>) {
    let snapshot = dir.to_str().expect("a UTF-8 path");
    let args = [
        &["matrix", "--snapshot", snapshot, "-o", "json"][..],
        args,
        packs,
    ]
    .concat();
    let twins: Value = serde_json::from_str(&stdout(&args, code)).expect("JSON");
    let each: Value =
        serde_json::from_str(&stdout(&[&args[..], &["--each-flow"]].concat(), code)).expect("JSON");
    assert_eq!(each.get("twins"), None, "--each-flow diagnoses every flow");
    assert_eq!(flows(&twins).len(), flows(&each).len());
    for (twin, alone) in flows(&twins).iter().zip(flows(&each)) {
        assert_eq!(twin.to_string(), alone.to_string());
    }
    let classes: Vec<Vec<String>> = twins["twins"]
        .as_array()
        .map(|classes| {
            classes
                .iter()
                .map(|class| {
                    let sources = class["sources"].as_array().unwrap();
                    sources
                        .iter()
                        .map(|s| s.as_str().unwrap().to_owned())
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    let stood_for: u64 = twins["twins"].as_array().map_or(0, |c| {
        c.iter().map(|class| class["flows"].as_u64().unwrap()).sum()
    });
    let mut verdicts = BTreeSet::new();
    for flow in flows(&twins) {
        let from = flow["from"].as_str().unwrap().to_owned();
        if classes.iter().any(|class| class[1..].contains(&from)) {
            verdicts.insert(diagnose_says(dir, flow, packs));
        }
    }
    (classes, stood_for, verdicts)
}

#[test]
fn twins_answer_each_flow_as_diagnose_answers_it_alone() {
    // examples/flannel-vxlan with replicas beside its web pods: four alike
    // on node-1, one labelled otherwise, one in another namespace, one
    // whose address a NetworkPolicy's ipBlock names, two alike on node-2.
    // A second policy admits app=client pods of default to the web pods,
    // and a pack of the test's says, without naming the source, where the
    // destination's policies deny it: flows to the web pods tell other-e
    // (labels) and team/client-n (namespace) from client-a, through what
    // the policies read, and are diagnosed on their own; their other flows
    // are answered by client-a's.
    let (one, two) = (("node-1", "172.18.0.11"), ("node-2", "172.18.0.12"));
    let replicas: &[Replica] = &[
        ("client-a", "client", &["10.244.1.20"], one),
        ("client-b", "client", &["10.244.1.21"], one),
        ("client-c", "client", &["10.244.1.22"], one),
        ("client-d", "client", &["10.244.1.40"], one),
        ("other-e", "other", &["10.244.1.23"], one),
        ("client-f", "client", &["10.244.1.30"], one),
        ("client-g", "client", &["10.244.2.20"], two),
        ("client-h", "client", &["10.244.2.21"], two),
    ];
    let elsewhere = replica("client-n", "client", &["10.244.1.24"], one.0, one.1)
        .replace("namespace: default", "namespace: team");
    let more = format!(
        "apiVersion: v1\nkind: List\nitems:\n{elsewhere}{}{}",
        policy("web", "[{ipBlock: {cidr: 10.244.1.30/32}}]"),
        policy(
            "web-from-clients",
            "[{podSelector: {matchLabels: {app: client}}}]"
        ),
    );
    let dir = with_replicas("examples/flannel-vxlan", replicas, Some(&more));
    // Every kind of destination, and a port nothing listens on: answers
    // that fail as well as succeed.
    let args = [
        "--from-pods",
        "default",
        "--from-pods",
        "team",
        "--to-services",
        "--to-pods",
        "default",
        "--to",
        "default/web-2:9999",
    ];
    let pack = tempfile::tempdir().unwrap();
    fs::write(pack.path().join("pack.yaml"), POLICY_SAYS_PACK).unwrap();
    fs::write(pack.path().join("checks.rhai"), POLICY_SAYS_CHECK).unwrap();
    let pack_path = pack.path().to_str().expect("a UTF-8 path");
    let (classes, stood_for, verdicts) =
        twins_hold(dir.path(), &args, &["--pack-path", pack_path], 1);
    assert_eq!(verdicts.len(), 3, "{verdicts:?}");
    assert_eq!(
        classes,
        [
            vec![
                "default/client-a",
                "default/client-b",
                "default/client-c",
                "default/client-d",
                "default/other-e",
                "team/client-n",
            ],
            vec!["default/client-g", "default/client-h"],
        ],
        "client-f's address tells it apart; other-e's labels and client-n's namespace only where a policy reads them"
    );
    assert!(stood_for > 30, "{stood_for} flows answered by twins");
}

/// A rules pack whose hop check fails where the destination's ingress
/// policies deny the packet's source, in words that do not name it.
const POLICY_SAYS_PACK: &str = "name: policy-says
version: 0.1.0
description: What the destination's policies say of the source.
engine: \">=0.1.0\"
contract: 2
kind: rules
checks:
  - id: policy-says.denied
    doc: The destination's ingress policies deny the source.
    severity: critical
    scope: hop
    kind: script
    function: denied
    message: \"${actual}\"
";
const POLICY_SAYS_CHECK: &str = r#"
fn denied(ctx) {
    let packet = ctx.hop.packet;
    if ctx.hop.reply || packet.dst_port == () { return (); }
    let verdict = ctx.cluster.network_policy(packet.src, packet.dst, packet.dst_port, packet.protocol);
    if verdict.ingress.verdict != "denied" { return (); }
    #{actual: "the destination's ingress policies deny this source", expected: "admitted"}
}
"#;

/// A NetworkPolicy `name` in default isolating the web pods for ingress,
/// admitting `from`, as an item of a List.
fn policy(name: &str, from: &str) -> String {
    format!(
        "- apiVersion: networking.k8s.io/v1\n  kind: NetworkPolicy\n  metadata: {{name: {name}, namespace: default}}\n  spec:\n    podSelector: {{matchLabels: {{app: web}}}}\n    policyTypes: [Ingress]\n    ingress: [{{from: {from}}}]\n"
    )
}

#[test]
fn dual_stack_twins_answer_both_families_as_diagnose_does() {
    let one = ("node-1", "172.18.0.11");
    let replicas: &[Replica] = &[
        (
            "client-a",
            "client",
            &["10.244.0.20", "fd00:10:244::20"],
            one,
        ),
        (
            "client-b",
            "client",
            &["10.244.0.21", "fd00:10:244::21"],
            one,
        ),
        (
            "client-c",
            "client",
            &["10.244.0.22", "fd00:10:244::22"],
            one,
        ),
    ];
    let dir = with_replicas("examples/flannel-dualstack", replicas, None);
    let args = [
        "--from-pods",
        "default/app=client",
        "--to-services",
        "--to-pods",
        "default",
    ];
    // Services without endpoints are refused by kube-proxy's rules.
    let (classes, stood_for, verdicts) = twins_hold(dir.path(), &args, &[], 1);
    assert_eq!(verdicts.len(), 2, "{verdicts:?}");
    assert_eq!(
        classes,
        [vec![
            "default/client-a",
            "default/client-b",
            "default/client-c"
        ]]
    );
    assert!(stood_for > 30, "{stood_for} flows answered by twins");
}
