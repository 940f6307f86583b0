//! The cluster cache (`skoop snapshot cache`, `<snapshot>/cluster.cache`)
//! as a user meets it: every example reads from its cache exactly as from
//! its files, a diagnosis answers the same with it, and a cache that is no
//! longer its files' own is passed over with a warning.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use skoop::snapshot::cluster::cache;
use skoop::snapshot::input::Boundary;
use skoop::snapshot::{ClusterFrom, Snapshot};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .output()
        .expect("skoop runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The model and problems of `dir`'s load from `from`, as comparable text.
fn loaded(dir: &Path, from: ClusterFrom) -> String {
    let (snapshot, problems) = Snapshot::load_with(dir, &Boundary::new(dir), from).unwrap();
    format!("{:#?}\n{problems:#?}", snapshot.cluster)
}

#[test]
fn every_example_reads_from_its_cache_as_from_its_files() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| examples.join(name).join("cluster").is_dir())
        .collect();
    names.sort();
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        let copy = common::copy_snapshot(&format!("examples/{name}"));
        let dir = copy.path();
        let output = run(&["snapshot", "cache", dir.to_str().unwrap()]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{name}: {}",
            text(&output.stderr)
        );
        let cached = cache::read(dir, &Boundary::new(dir)).expect("{name}: the cache is used");
        assert!(cached.is_some(), "{name}");
        assert_eq!(
            loaded(dir, ClusterFrom::CacheWhenCurrent),
            loaded(dir, ClusterFrom::Files),
            "{name}"
        );
    }
}

#[test]
fn a_diagnosis_answers_the_same_from_the_cache() {
    let copy = common::copy_snapshot("examples/flannel-vxlan-broken");
    let dir = copy.path().to_str().unwrap();
    let diagnose = [
        "diagnose",
        "--snapshot",
        dir,
        "--from",
        "default/web-0",
        "--to",
        "default/web-3:8080",
        "-o",
        "json",
    ];
    let from_files = run(&diagnose);
    let written = run(&["snapshot", "cache", dir]);
    let stdout = text(&written.stdout);
    // 13 as `snapshot check` counts them: 2 Nodes, 4 Pods, 3 Namespaces, a
    // Service, its EndpointSlice, Flannel's ConfigMap and DaemonSet.
    assert!(
        stdout.starts_with(&format!(
            "wrote {dir}/cluster.cache: 13 objects from 7 files, "
        )),
        "{stdout}"
    );
    let from_cache = run(&diagnose);
    assert_eq!(text(&from_cache.stdout), text(&from_files.stdout));
    assert_eq!(text(&from_cache.stderr), text(&from_files.stderr));
    assert_eq!(from_cache.status.code(), from_files.status.code());
    // The answer is one with findings, not a trivial one.
    assert_eq!(
        from_cache.status.code(),
        Some(1),
        "{}",
        text(&from_cache.stdout)
    );
}

#[test]
fn snapshot_check_says_how_the_cache_stands() {
    let copy = common::copy_snapshot("examples/flannel-vxlan");
    let dir = copy.path().to_str().unwrap();
    assert_eq!(run(&["snapshot", "cache", dir]).status.code(), Some(0));
    let check = run(&["snapshot", "check", dir]);
    assert_eq!(check.status.code(), Some(0));
    assert!(
        text(&check.stdout)
            .contains("\ncluster.cache: holds what cluster/ loads into: diagnoses read it\n"),
        "{}",
        text(&check.stdout)
    );

    // A pod added by hand: the cache is passed over, with a warning, and
    // the pod is there.
    add_pods(copy.path());
    let check = run(&["snapshot", "check", dir, "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(report["cache"]["state"], "passed-over");
    assert_eq!(
        report["cache"]["message"],
        "cluster/more-pods.yaml is new since it was written; cluster/ was read instead \
         (`skoop snapshot cache` writes it anew)"
    );
    let diagnose = run(&[
        "diagnose",
        "--snapshot",
        dir,
        "--from",
        "default/web-0",
        "--to",
        "default/web-9:8080",
    ]);
    assert!(
        text(&diagnose.stderr).contains(&format!(
            "warning: {dir}/cluster.cache: cluster/more-pods.yaml is new since it was written"
        )),
        "{}",
        text(&diagnose.stderr)
    );
    assert!(
        text(&diagnose.stdout).contains("default/web-9"),
        "{}",
        text(&diagnose.stdout)
    );
}

/// `--no-cache` (or `SKOOP_NO_CACHE=1`) reads the files without looking
/// at the cache: no word of it, not even that it is out of date; for
/// diagnose, matrix, diff and packs eval alike.
#[test]
fn no_cache_reads_the_files_without_looking_at_the_cache() {
    let copy = common::copy_snapshot("examples/flannel-vxlan");
    let dir = copy.path().to_str().unwrap();
    assert_eq!(run(&["snapshot", "cache", dir]).status.code(), Some(0));
    add_pods(copy.path());
    let diagnose = |extra: &[&str], env: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skoop"));
        command.args([
            "diagnose",
            "--snapshot",
            dir,
            "--from",
            "default/web-0",
            "--to",
            "default/web-9:8080",
        ]);
        command.args(extra);
        if let Some(value) = env {
            command.env("SKOOP_NO_CACHE", value);
        }
        command.output().expect("skoop runs")
    };
    let with_cache = diagnose(&[], None);
    assert!(text(&with_cache.stderr).contains("cluster.cache: cluster/more-pods.yaml is new"));
    for output in [
        diagnose(&["--no-cache"], None),
        diagnose(&[], Some("1")),
        diagnose(&[], Some("true")),
    ] {
        assert!(
            !text(&output.stderr).contains("cluster.cache"),
            "{}",
            text(&output.stderr)
        );
        assert_eq!(text(&output.stdout), text(&with_cache.stdout));
    }
    // Every command that reads a snapshot to diagnose it takes the flag.
    let flows = ["--from", "default/web-0", "--to", "default/web-9:8080"];
    let commands: [Vec<&str>; 3] = [
        [&["matrix", "-s", dir][..], &flows].concat(),
        [&["diff", dir, dir][..], &flows].concat(),
        vec![
            "packs",
            "eval",
            "plugins/flannel",
            "--snapshot",
            dir,
            "--node",
            "node-1",
        ],
    ];
    for command in commands {
        let with_cache = run(&command);
        assert!(
            text(&with_cache.stderr).contains("cluster.cache: cluster/more-pods.yaml is new"),
            "{command:?}: {}",
            text(&with_cache.stderr)
        );
        let without = run(&[&command[..], &["--no-cache"]].concat());
        assert!(
            !text(&without.stderr).contains("cluster.cache"),
            "{command:?}: {}",
            text(&without.stderr)
        );
        assert_eq!(
            without.status.code(),
            with_cache.status.code(),
            "{command:?}"
        );
        assert_eq!(
            text(&without.stdout),
            text(&with_cache.stdout),
            "{command:?}"
        );
    }
}

/// `packs test` diagnoses its cases' snapshots, packs' own: a cache in one
/// that cannot be used fails the case (its snapshot has a problem), and
/// `--no-cache` reads the files.
#[test]
fn packs_test_takes_no_cache_too() {
    let copy = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .args(["-r", "plugins/kindnet"])
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let pack = copy.path().join("kindnet");
    std::fs::write(
        pack.join("tests/healthy/snapshot/cluster.cache"),
        "not a cache",
    )
    .unwrap();
    let pack = pack.to_str().unwrap();
    let with_cache = run(&["packs", "test", pack]);
    assert_eq!(
        with_cache.status.code(),
        Some(1),
        "{}",
        text(&with_cache.stdout)
    );
    assert!(
        text(&with_cache.stdout).contains("cluster.cache: not a cluster cache of this version"),
        "{}",
        text(&with_cache.stdout)
    );
    let without = run(&["packs", "test", pack, "--no-cache"]);
    assert_eq!(without.status.code(), Some(0), "{}", text(&without.stdout));
}

/// A file of pods added by hand, after the cache was written: the
/// example's pods again, web-3 renamed web-9 (the others are defined twice).
fn add_pods(snapshot: &Path) {
    let pods = std::fs::read_to_string(snapshot.join("cluster/pods.yaml")).unwrap();
    std::fs::write(
        snapshot.join("cluster/more-pods.yaml"),
        pods.replace("web-3", "web-9"),
    )
    .unwrap();
}

#[test]
fn caching_a_directory_without_cluster_objects_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(&["snapshot", "cache", dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr),
        format!(
            "error: {}: no cluster/ directory in it: nothing to cache\n",
            dir.path().display()
        )
    );
    assert!(!dir.path().join("cluster.cache").exists());
    let missing = dir.path().join("missing");
    let output = run(&["snapshot", "cache", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr),
        format!("error: {}: no such directory\n", missing.display())
    );
}

/// Issue 36, item 9: a byte of the cache flipped since it was written (14 of
/// 2,492 single flips changed a verdict without a word) is caught by its
/// checksum before anything is decoded; `cluster/` is read instead, and a
/// problem says why. Every byte past the version is tried.
#[test]
fn a_flipped_byte_anywhere_in_the_cache_is_caught_before_it_is_decoded() {
    let copy = common::copy_snapshot("examples/flannel-vxlan");
    let dir = copy.path();
    let output = run(&["snapshot", "cache", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let path = dir.join(cache::FILE_NAME);
    let written = std::fs::read(&path).unwrap();
    let boundary = Boundary::new(dir);
    for at in 8..written.len() {
        let mut flipped = written.clone();
        flipped[at] ^= 0x01;
        std::fs::write(&path, &flipped).unwrap();
        let problem = cache::read(dir, &boundary).expect_err("a flipped cache is passed over");
        assert!(
            problem
                .message
                .contains("its checksum does not match its content"),
            "byte {at}: {problem}"
        );
    }
}

/// A snapshot made by hand (`kubectl get pods -A -o yaml > pods.yaml`, here
/// 25,000 pods in one file of over 16 MiB) needs no command for its cache:
/// the first diagnosis writes it, the second reads it and answers the same,
/// and `--no-cache` neither reads nor writes one.
#[test]
fn the_second_diagnosis_of_a_hand_made_snapshot_reads_the_cache_the_first_wrote() {
    let copy = common::copy_snapshot("examples/flannel-vxlan");
    let dir = copy.path();
    let mut pods = String::from("apiVersion: v1\nitems:\n");
    for i in 0..25_000 {
        pods.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    creationTimestamp: \"2025-06-02T09:00:00Z\"\n    labels:\n      app: job-{}\n    name: job-{i}\n    namespace: ns-{}\n    uid: 0c6e3c4a-5b1d-4f7e-9a2b-{i:012}\n  spec:\n    containers:\n    - image: registry.k8s.io/pause:3.9\n      imagePullPolicy: IfNotPresent\n      name: pause\n      ports:\n      - containerPort: 8080\n        name: http\n        protocol: TCP\n      resources: {{}}\n    nodeName: node-{}\n  status:\n    conditions:\n    - lastProbeTime: null\n      lastTransitionTime: \"2025-06-02T09:00:10Z\"\n      status: \"True\"\n      type: Ready\n    hostIP: 172.20.{}.{}\n    phase: Running\n    podIP: 10.{}.{}.{}\n    qosClass: BestEffort\n",
            i % 100,
            i % 50,
            i % 1000 + 3,
            i / 250 % 250,
            i % 250 + 1,
            130 + i / 65536,
            i / 256 % 256,
            i % 256,
        ));
    }
    pods.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    assert!(pods.len() > 16 << 20, "{} bytes", pods.len());
    std::fs::write(dir.join("cluster/hand-made-pods.yaml"), pods).unwrap();
    let snapshot = dir.to_str().unwrap();
    let diagnose = |extra: &[&str]| {
        let mut args = vec!["diagnose", "--snapshot", snapshot];
        args.extend(extra);
        args.extend(["--from", "default/web-0", "--to", "svc/default/web"]);
        let output = run(&args);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let cache = dir.join("cluster.cache");
    let uncached = diagnose(&["--no-cache"]);
    assert!(!cache.exists(), "--no-cache wrote a cache");
    let first = diagnose(&[]);
    assert!(cache.exists(), "the first diagnosis wrote no cache");
    assert!(
        cache::read(dir, &Boundary::new(dir)).unwrap().is_some(),
        "the cache is not the files' own"
    );
    let written = std::fs::metadata(&cache).unwrap().modified().unwrap();
    let second = diagnose(&[]);
    assert_eq!(
        std::fs::metadata(&cache).unwrap().modified().unwrap(),
        written,
        "the second diagnosis wrote the cache again instead of reading it"
    );
    assert_eq!(first, uncached);
    assert_eq!(second, first);
    assert_eq!(
        loaded(dir, ClusterFrom::CacheWhenCurrent),
        loaded(dir, ClusterFrom::Files)
    );
}
