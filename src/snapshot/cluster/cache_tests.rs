use std::time::{Duration, SystemTime};

use super::*;
use crate::snapshot::cluster::load;

/// Two pods, a node, and a third pod defined again in another file: a
/// problem whose message cites the first definition's place.
const PODS: &str = "\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: web-0, namespace: default, labels: {app: web}}
  spec: {nodeName: node-1, containers: [{name: web, ports: [{containerPort: 8080}]}]}
  status: {phase: Running, podIP: 10.244.1.2, podIPs: [{ip: 10.244.1.2}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-1, namespace: default}
  spec: {nodeName: node-1}
  status: {phase: Running, podIP: 10.244.1.3, podIPs: [{ip: 10.244.1.3}]}
";
const NODES: &str = "\
apiVersion: v1
kind: Node
metadata: {name: node-1}
spec: {podCIDR: 10.244.1.0/24, podCIDRs: [10.244.1.0/24]}
status: {addresses: [{type: InternalIP, address: 172.18.0.11}]}
";
const AGAIN: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default}
spec: {nodeName: node-1}
";

/// A snapshot of `files` under `<root>/<name>/cluster/`.
fn snapshot(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("cluster")).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join("cluster").join(file), text).unwrap();
    }
    dir
}

fn example(root: &Path) -> PathBuf {
    snapshot(
        root,
        "snap",
        &[
            ("pods.yaml", PODS),
            ("nodes.yaml", NODES),
            ("again.yaml", AGAIN),
        ],
    )
}

fn from_files(dir: &Path) -> (Cluster, Vec<Problem>) {
    load(&dir.join("cluster"), &Boundary::new(dir))
}

fn from_cache(dir: &Path) -> Result<Option<(Cluster, Vec<Problem>)>, Problem> {
    read(dir, &Boundary::new(dir))
}

fn write_cache(dir: &Path) -> Written {
    write(dir, &Boundary::new(dir), Budget::default()).expect("the cache is written")
}

fn encoded((cluster, problems): &(Cluster, Vec<Problem>)) -> Vec<u8> {
    let problems: Vec<StoredProblem> = problems.iter().cloned().map(stored).collect();
    postcard::to_stdvec(&(cluster, problems)).unwrap()
}

/// Why the cache of `dir` was passed over.
fn passed_over(dir: &Path) -> String {
    match from_cache(dir) {
        Err(problem) => problem.message,
        Ok(cached) => panic!("the cache was used: {}", cached.is_some()),
    }
}

#[test]
fn a_cache_reads_as_its_files_with_the_same_problems() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    let written = write_cache(&dir);
    let files = from_files(&dir);
    assert_eq!(written.objects, 3);
    assert_eq!(written.files, 3);
    assert_eq!(written.problems, files.1);
    assert!(
        files.1[0].message.contains("is defined twice"),
        "{:?}",
        files.1
    );
    let cached = from_cache(&dir).unwrap().expect("a cache");
    assert_eq!(encoded(&cached), encoded(&files));
    assert!(matches!(
        verify(&dir, &Boundary::new(&dir), &files.0, &files.1),
        Verdict::Current
    ));
    // Without a cache there is nothing to say.
    std::fs::remove_file(dir.join(FILE_NAME)).unwrap();
    assert!(from_cache(&dir).unwrap().is_none());
}

#[test]
fn a_moved_snapshot_cites_where_it_is_now() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    let moved = root.path().join("elsewhere").join("moved");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&dir, &moved).unwrap();
    let cached = from_cache(&moved).unwrap().expect("a cache");
    assert_eq!(encoded(&cached), encoded(&from_files(&moved)));
    let pod = cached.0.pod("default", "web-0").unwrap();
    assert_eq!(pod.meta.source.file, moved.join("cluster/pods.yaml"));
    // The duplicate's message cites the first definition (again.yaml is
    // read first) from the snapshot's root, as a load of the files does.
    let problem = &cached.1[0];
    assert_eq!(problem.file, moved.join("cluster/pods.yaml"));
    assert!(
        problem
            .message
            .contains("is defined twice (first at cluster/again.yaml:1)"),
        "{problem}"
    );
    // Another spelling of the same path is kept as spelled, as the files'
    // load keeps it.
    let spelled = moved.join(".");
    assert_eq!(
        encoded(&from_cache(&spelled).unwrap().expect("a cache")),
        encoded(&from_files(&spelled))
    );
}

#[test]
fn a_file_of_another_size_passes_the_cache_over() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    std::fs::write(
        dir.join("cluster/again.yaml"),
        AGAIN.replace("web-1", "web-22"),
    )
    .unwrap();
    assert_eq!(
        passed_over(&dir),
        "cluster/again.yaml changed since it was written (its size); cluster/ was read \
         instead (`skoop snapshot cache` writes it anew)"
    );
    // A load takes the files, and says why.
    let (snapshot, problems) = crate::snapshot::Snapshot::load(&dir).unwrap();
    assert!(snapshot.cluster.pod("default", "web-22").is_some());
    let last = problems.last().unwrap();
    assert_eq!(last.file, dir.join(FILE_NAME));
    assert!(last.message.contains("(its size)"), "{last}");
}

#[test]
fn a_file_of_the_same_size_and_another_content_passes_the_cache_over() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    let path = dir.join("cluster/again.yaml");
    std::fs::write(&path, AGAIN.replace("web-1", "web-2")).unwrap();
    set_modified(
        &path,
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
    );
    assert!(
        passed_over(&dir)
            .starts_with("cluster/again.yaml changed since it was written (its content)")
    );
}

#[test]
fn a_copy_with_new_times_reads_from_the_cache() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    for file in ["pods.yaml", "nodes.yaml", "again.yaml"] {
        set_modified(
            &dir.join("cluster").join(file),
            SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000),
        );
    }
    let cached = from_cache(&dir).unwrap().expect("the content is the same");
    assert_eq!(encoded(&cached), encoded(&from_files(&dir)));
}

#[test]
fn a_new_or_a_gone_file_passes_the_cache_over() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    std::fs::write(
        dir.join("cluster/more.yaml"),
        NODES.replace("node-1", "node-2"),
    )
    .unwrap();
    assert!(passed_over(&dir).starts_with("cluster/more.yaml is new since it was written"));
    std::fs::remove_file(dir.join("cluster/more.yaml")).unwrap();
    std::fs::remove_file(dir.join("cluster/nodes.yaml")).unwrap();
    assert!(passed_over(&dir).starts_with("cluster/nodes.yaml is gone since it was written"));
    // A file skoop does not read changes what loading says.
    std::fs::write(dir.join("cluster/nodes.yaml"), NODES).unwrap();
    std::fs::write(dir.join("cluster/notes.txt"), "kept by hand").unwrap();
    assert!(passed_over(&dir).starts_with("cluster/ is listed otherwise"));
}

#[test]
fn a_cache_of_another_build_is_passed_over() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    // Whatever follows: a later build may store it otherwise.
    forge(
        &dir,
        |header| header.snapshot_code = "0.0.0-0000000000000000".into(),
        b"\xff\xff\xff\xff\xff\xff",
    );
    assert!(
        passed_over(&dir).starts_with(&format!(
            "written by another build of skoop (0.0.0-0000000000000000, this is {SNAPSHOT_CODE})"
        )),
        "{}",
        passed_over(&dir)
    );
}

/// Whatever a damaged cache holds, reading it ends: with a model (a flip in
/// a value), or a problem; never a panic.
#[test]
fn a_damaged_cache_is_read_or_passed_over_never_a_panic() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    let good = std::fs::read(dir.join(FILE_NAME)).unwrap();
    for at in 0..good.len() {
        // Cut short: never the files' own.
        std::fs::write(dir.join(FILE_NAME), &good[..at]).unwrap();
        assert!(from_cache(&dir).is_err(), "cut at {at}");
        // A byte changed: a model, or a problem.
        let mut flipped = good.clone();
        flipped[at] ^= 0xa5;
        std::fs::write(dir.join(FILE_NAME), &flipped).unwrap();
        let _ = from_cache(&dir);
    }
    assert_eq!(
        passed_over_message(&[]),
        "not a cluster cache of this version of skoop; cluster/ was read instead \
         (`skoop snapshot cache` writes it anew)"
    );
}

fn passed_over_message(bytes: &[u8]) -> String {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    std::fs::write(dir.join(FILE_NAME), bytes).unwrap();
    passed_over(&dir)
}

#[test]
fn a_fifo_named_like_the_cache_is_passed_over_unread() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    mkfifo(&dir.join(FILE_NAME));
    assert!(
        passed_over(&dir)
            .starts_with("a FIFO, not a regular file; not read; cluster/ was read instead")
    );
}

/// Files the load cannot read are problems it keeps; they do not keep the
/// cache from being written, nor from being used while they stay as they
/// were.
#[test]
fn files_the_load_cannot_read_are_kept_as_problems() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    mkfifo(&dir.join("cluster/fifo.json"));
    let outside = root.path().join("outside.yaml");
    std::fs::write(&outside, NODES.replace("node-1", "node-9")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("cluster/out.yaml")).unwrap();
    let written = write_cache(&dir);
    let files = from_files(&dir);
    let messages: Vec<&str> = files.1.iter().map(|p| p.message.as_str()).collect();
    assert!(
        messages.contains(&"a FIFO, not a regular file; not read"),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("symbolic link leading outside")),
        "{messages:?}"
    );
    assert_eq!(written.problems, files.1);
    let cached = from_cache(&dir).unwrap().expect("a cache");
    assert_eq!(encoded(&cached), encoded(&files));
    // Moved, the snapshot's problems name where it is now: those of files
    // the load cannot read are made anew.
    let moved = root.path().join("moved");
    std::fs::rename(&dir, &moved).unwrap();
    let cached = from_cache(&moved).unwrap().expect("a cache");
    assert_eq!(encoded(&cached), encoded(&from_files(&moved)));
    assert!(
        cached.1.iter().any(|p| p.message.starts_with(&format!(
            "symbolic link leading outside {}",
            moved.display()
        ))),
        "{:?}",
        cached.1
    );
    // The link leads into the snapshot now: the cache is not the files' own.
    std::fs::remove_file(moved.join("cluster/out.yaml")).unwrap();
    std::os::unix::fs::symlink("pods.yaml", moved.join("cluster/out.yaml")).unwrap();
    assert_eq!(
        passed_over(&moved),
        "cluster/out.yaml can be read now; cluster/ was read instead \
         (`skoop snapshot cache` writes it anew)"
    );
}

/// A custom resource's numbers come back from the cache as the very
/// doubles the files hold.
#[test]
fn a_custom_resources_numbers_come_back_exactly() {
    let root = tempfile::tempdir().unwrap();
    let dir = snapshot(
        root.path(),
        "snap",
        &[(
            "pools.json",
            r#"{"apiVersion": "example.com/v1", "kind": "Pool", "metadata": {"name": "p"},
                "spec": {"a": 985.6906946328695, "b": 212.91890726713459, "c": 1.0715660391465826e-75,
                         "d": 18446744073709551615, "e": -9223372036854775808}}"#,
        )],
    );
    write_cache(&dir);
    let cached = from_cache(&dir).unwrap().expect("a cache");
    let files = from_files(&dir);
    assert_eq!(encoded(&cached), encoded(&files));
    let pool = cached.0.others().next().unwrap();
    assert_eq!(pool.value["spec"]["a"].as_f64(), Some(985.6906946328695));
    assert_eq!(pool.value["spec"]["d"].as_u64(), Some(u64::MAX));
}

/// Whatever its header says, a cache's model is not decoded when it is
/// larger than its files could make, nor used with bytes after it.
#[test]
fn a_model_too_large_or_with_bytes_after_it_is_passed_over() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    let good = std::fs::read(dir.join(FILE_NAME)).unwrap();
    // A byte after the model, the checksum made anew (as a forger would).
    let mut longer_body = good[FRAME..].to_vec();
    longer_body.push(0);
    std::fs::write(dir.join(FILE_NAME), framed(&longer_body)).unwrap();
    assert!(
        passed_over(&dir).starts_with("not a cluster cache (1 bytes after its model)"),
        "{}",
        passed_over(&dir)
    );
    // Longer than a cache of these files could be: not even read.
    let mut longer = good.clone();
    longer.resize(good.len() + 1024 * 1024, 0);
    std::fs::write(dir.join(FILE_NAME), &longer).unwrap();
    assert!(
        passed_over(&dir)
            .contains("bytes that a cluster cache of cluster/'s files may hold; not read"),
        "{}",
        passed_over(&dir)
    );
}

#[test]
fn a_cache_holding_another_model_differs() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    // The header of the real cache, followed by an empty cluster.
    let empty = encode(&super::super::Model::default(), &[]).unwrap();
    forge(&dir, |_| {}, &empty);
    let (cluster, problems) = from_files(&dir);
    match verify(&dir, &Boundary::new(&dir), &cluster, &problems) {
        Verdict::Differs(problem) => {
            assert!(
                problem
                    .message
                    .starts_with("does not hold what cluster/ loads into")
            );
        }
        other => panic!("{other:?}"),
    }
}

/// What a header claims of its files' sizes makes no room for a model:
/// only sizes checked against the files do, an unreadable file's none (here
/// one over its cap, which a cache of cluster/ could otherwise be as large
/// as), summed without overflow.
#[test]
fn a_header_claiming_larger_files_makes_no_room_for_its_model() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    let over_cap = std::fs::File::create(dir.join("cluster/big.json")).unwrap();
    over_cap.set_len(input::CLUSTER_FILE.bytes + 1).unwrap();
    write_cache(&dir);
    let model = vec![0; 1024 * 1024];
    forge(
        &dir,
        |header| {
            for stamp in &mut header.files {
                if stamp.sha256.is_none() {
                    stamp.len = u64::MAX;
                }
            }
        },
        &model,
    );
    let why = passed_over(&dir);
    assert!(
        why.starts_with("its model is 1048576 bytes, more than its files"),
        "{why}"
    );
    forge(&dir, |header| header.files[0].len = u64::MAX, &model);
    assert!(
        passed_over(&dir).starts_with("cluster/again.yaml changed since it was written (its size)"),
        "{}",
        passed_over(&dir)
    );
}

/// A header is decoded no further than a header of `cluster/` as it is
/// could go: not for many more files than it lists, nor longer than they
/// could make.
#[test]
fn a_header_larger_than_the_listing_could_make_is_not_decoded() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    let more_files = |count: usize, path_len: usize| {
        move |header: &mut Header| {
            let stamp = header.files[0].clone();
            header.files.extend((0..count).map(|at| Stamp {
                path: format!("{}{at}.yaml", "x".repeat(path_len)).into(),
                ..stamp.clone()
            }));
        }
    };
    forge(&dir, more_files(100, 1), &[]);
    assert_eq!(
        passed_over(&dir),
        "written for 103 files and 0 listing problems, and cluster/ has 3 and 0; cluster/ \
         was read instead (`skoop snapshot cache` writes it anew)"
    );
    write_cache(&dir);
    forge(&dir, more_files(1, 200_000), &[]);
    let why = passed_over(&dir);
    assert!(
        why.starts_with("its header is more than the ")
            && why.contains(" bytes cluster/'s files could make;"),
        "{why}"
    );
}

/// Custom resources can be most of a cluster's bytes (Calico's IPAM
/// blocks); their fields are kept as JSON text, about as long as the
/// files, and their cache is written and used. Files so large, just
/// written, are stamped again once their times can tell.
#[test]
fn a_cluster_mostly_custom_resources_keeps_its_cache() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    let block = |at: usize| {
        let allocations = vec!["null"; 256].join(",");
        format!(
            r#"{{"apiVersion":"crd.projectcalico.org/v1","kind":"IPAMBlock","metadata":{{"name":"block-{at}"}},"spec":{{"cidr":"10.{}.{}.0/24","affinity":"host:node-{at}","allocations":[{allocations}],"attributes":[{{"handle_id":"k8s-pod-network.{at:064}","secondary":{{"namespace":"default","node":"node-{at}","pod":"web-{at}"}}}}]}}}}"#,
            at / 256,
            at % 256
        )
    };
    let items: Vec<String> = (0..22_000).map(block).collect();
    let list = format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
        items.join(",")
    );
    assert!(list.len() > 34 * 1024 * 1024, "{}", list.len());
    std::fs::write(dir.join("cluster/ipamblocks.json"), list).unwrap();
    let written = write_cache(&dir);
    assert_eq!(written.objects, 22_000 + 3);
    let cached = from_cache(&dir).unwrap().expect("the cache is used");
    assert_eq!(cached.0.others().count(), 22_000);
    let stamps = header(&dir).files;
    assert!(stamps.iter().all(|stamp| stamp.times_tell), "{stamps:?}");
}

/// A model over the bound a read holds it to is not written, and a cache
/// written before goes with it (it would be passed over, saying to write it
/// anew). YAML's `~` is JSON's `null`: a list of them is 2.5 times longer
/// as the JSON text a custom resource's fields are kept as.
#[test]
fn a_model_a_read_would_refuse_is_not_written() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    let nulls = vec!["~"; 1024 * 1024].join(",");
    std::fs::write(
        dir.join("cluster/nulls.yaml"),
        format!("apiVersion: example.com/v1\nkind: Nulls\nmetadata: {{name: nulls}}\nspec: {{a: [{nulls}]}}\n"),
    )
    .unwrap();
    match write(&dir, &Boundary::new(&dir), Budget::default()) {
        Err(error @ WriteError::TooLarge(..)) => assert!(
            error
                .to_string()
                .contains("no cache written (diagnoses read the files)"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(!dir.join(FILE_NAME).exists());
}

/// A link retargeted to another file of the same size and times is another
/// file: its inode tells, without reading it.
#[test]
fn a_link_retargeted_to_a_file_of_the_same_size_and_times_passes_the_cache_over() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    for (sub, node) in [("a", "node-1"), ("b", "node-2")] {
        std::fs::create_dir(dir.join(sub)).unwrap();
        let path = dir.join(sub).join("node.yaml");
        std::fs::write(&path, NODES.replace("node-1", node)).unwrap();
        set_modified(&path, old);
    }
    let link = dir.join("cluster/node.yaml");
    std::os::unix::fs::symlink("../a/node.yaml", &link).unwrap();
    write_restamping(&dir, &Boundary::new(&dir), Budget::default(), 0)
        .expect("the cache is written");
    assert!(header(&dir).files.iter().all(|stamp| stamp.times_tell));
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("../b/node.yaml", &link).unwrap();
    assert!(
        passed_over(&dir).starts_with("cluster/node.yaml changed since it was written"),
        "{}",
        passed_over(&dir)
    );
}

/// The header of `dir`'s cache.
fn header(dir: &Path) -> Header {
    let bytes = std::fs::read(dir.join(FILE_NAME)).unwrap();
    let listing = list(&dir.join("cluster"));
    decode_header(&bytes[FRAME..], &listing).unwrap().0
}

/// Rewrites `dir`'s cache: its header as `change` makes it, then `model`.
fn forge(dir: &Path, change: impl FnOnce(&mut Header), model: &[u8]) {
    let mut header = header(dir);
    change(&mut header);
    let mut body = encode_header(&header).unwrap();
    body.extend_from_slice(model);
    std::fs::write(dir.join(FILE_NAME), framed(&body)).unwrap();
}

fn set_modified(path: &Path, time: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

fn mkfifo(path: &Path) {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
}

/// A load writes the cache of its own accord, beside `cluster/`, or where
/// that cannot be written to, in the user's cache directory, which a load
/// then reads as it would read the one beside the files.
#[test]
fn a_load_writes_its_cache_beside_the_files_else_in_the_user_cache() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    let files = from_files(&dir);
    let loaded = load_writing_into(&dir, &Boundary::new(&dir), Budget::default(), 0, None);
    assert_eq!(format!("{loaded:?}"), format!("{files:?}"));
    let cached = from_cache(&dir)
        .unwrap()
        .expect("the cache beside the files");
    assert_eq!(format!("{cached:?}"), format!("{files:?}"));
    // Below the size worth a cache, none is written.
    std::fs::remove_file(dir.join(FILE_NAME)).unwrap();
    load_writing_into(
        &dir,
        &Boundary::new(&dir),
        Budget::default(),
        u64::MAX,
        None,
    );
    assert!(!dir.join(FILE_NAME).exists());
    // The snapshot's own place taken (a directory a cache cannot replace,
    // as a read-only snapshot would refuse it).
    std::fs::create_dir(dir.join(FILE_NAME)).unwrap();
    let user = root.path().join("user-cache/skoop/snap.cache");
    let loaded = load_writing_into(
        &dir,
        &Boundary::new(&dir),
        Budget::default(),
        0,
        Some(user.clone()),
    );
    assert_eq!(format!("{loaded:?}"), format!("{files:?}"));
    let cached = read_from(
        &dir,
        &Boundary::new(&dir),
        &user,
        &Boundary::new(Path::new("/")),
    )
    .unwrap()
    .expect("the cache in the user's directory");
    assert_eq!(format!("{cached:?}"), format!("{files:?}"));
}

/// The user's cache directory keeps the caches used last, within its bound.
#[test]
fn the_least_recently_used_caches_are_evicted_first() {
    let dir = tempfile::tempdir().unwrap();
    let now = SystemTime::now();
    let mut paths = Vec::new();
    for (name, age) in [("old", 300), ("mid", 200), ("new", 100), ("kept", 400)] {
        let path = dir.path().join(format!("{name}.cache"));
        std::fs::write(&path, vec![0; 1000]).unwrap();
        let file = std::fs::File::options().append(true).open(&path).unwrap();
        file.set_modified(now - Duration::from_secs(age)).unwrap();
        paths.push(path);
    }
    std::fs::write(dir.path().join("other.txt"), vec![0; 5000]).unwrap();
    evict(dir.path(), &paths[3], 2500);
    let left: Vec<bool> = paths.iter().map(|path| path.exists()).collect();
    // "kept" is the one just written: it stays whatever its age; "old" and
    // "mid" go, and then the rest fit.
    assert_eq!(left, [false, false, true, true]);
    assert!(dir.path().join("other.txt").exists());
}

/// Every lookup a flow makes answers from the cache's indexes what it
/// answers from the files, in the same order, over an example with every
/// kind (Calico's: custom resources, a NetworkPolicy, EndpointSlices), and
/// decodes no more than it is asked for.
#[test]
fn lookups_from_the_cache_are_those_of_the_files() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("snap");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/calico-vxlan/cluster");
    std::fs::create_dir_all(dir.join("cluster")).unwrap();
    for entry in std::fs::read_dir(example).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join("cluster").join(entry.file_name())).unwrap();
    }
    write_cache(&dir);
    let (files, _) = from_files(&dir);
    let (cached, _) = from_cache(&dir).unwrap().expect("a cache");
    assert!(matches!(cached.store, super::super::Store::Indexed(_)));
    let names = |pods: Vec<&super::super::Pod>| -> Vec<String> {
        pods.iter()
            .map(|p| format!("{}/{}", p.meta.namespace, p.meta.name))
            .collect()
    };
    // Asking for one pod decodes that pod alone.
    let first = files.pods().next().expect("pods");
    let (namespace, name) = (&first.meta.namespace, &first.meta.name);
    assert_eq!(cached.pod(namespace, name), Some(first));
    let super::super::Store::Indexed(indexed) = &cached.store else {
        unreachable!()
    };
    assert_eq!(indexed.decoded_pods(), 1);
    assert_eq!(cached.pod(namespace, "no-such-pod"), None);
    // The nodes' names and pod CIDRs, read from the keys and the records.
    assert_eq!(
        cached.node_names().collect::<Vec<_>>(),
        files.node_names().collect::<Vec<_>>()
    );
    assert_eq!(
        cached.node_pod_cidrs().collect::<Vec<_>>(),
        files.node_pod_cidrs().collect::<Vec<_>>()
    );
    assert!(files.node_pod_cidrs().any(|(_, cidrs)| !cidrs.is_empty()));
    for node in files.nodes() {
        let name = &node.meta.name;
        assert_eq!(cached.node(name), Some(node));
        assert_eq!(
            names(cached.pods_on(name).collect()),
            names(files.pods_on(name).collect())
        );
        for ip in node
            .addresses
            .iter()
            .filter_map(super::super::NodeAddress::ip)
        {
            assert_eq!(cached.by_ip(ip), files.by_ip(ip), "{ip}");
        }
        for key in node.meta.annotations.keys() {
            assert_eq!(cached.node_annotated(key), files.node_annotated(key));
        }
        for cidr in &node.pod_cidrs {
            let address = cidr.network();
            // A CIDR, and an address that is none (an error naming the node).
            let holding = ["projectcalico.org/IPv4Address".to_owned()];
            let no_cidr = ["projectcalico.org/IPv4VXLANTunnelAddr".to_owned()];
            for annotations in [&[][..], &holding[..], &no_cidr[..]] {
                assert_eq!(
                    cached.nodes_with_pod_cidr(address, annotations),
                    files.nodes_with_pod_cidr(address, annotations)
                );
            }
            assert_eq!(names(cached.pods_in(*cidr)), names(files.pods_in(*cidr)));
        }
    }
    for pod in files.pods() {
        for ip in &pod.ips {
            assert_eq!(cached.by_ip(*ip), files.by_ip(*ip), "{ip}");
            assert_eq!(cached.pod_at(*ip), files.pod_at(*ip), "{ip}");
        }
        for (key, value) in &pod.meta.labels {
            assert_eq!(
                names(cached.pods_labelled(key, value)),
                names(files.pods_labelled(key, value))
            );
        }
    }
    for service in files.services() {
        let (namespace, name) = (&service.meta.namespace, &service.meta.name);
        assert_eq!(cached.service(namespace, name), Some(service));
        assert_eq!(
            cached.endpoint_slices_for(service).collect::<Vec<_>>(),
            files.endpoint_slices_for(service).collect::<Vec<_>>()
        );
        assert_eq!(cached.endpoints_for(service), files.endpoints_for(service));
        if let Some(selector) = &service.selector {
            assert_eq!(
                names(cached.pods_matching(namespace, selector).collect()),
                names(files.pods_matching(namespace, selector).collect())
            );
        }
        for port in &service.ports {
            if let Some(node_port) = port.node_port {
                assert_eq!(
                    cached.service_by_node_port(port.protocol, node_port),
                    files.service_by_node_port(port.protocol, node_port)
                );
            }
        }
    }
    let empty = super::super::LabelSelector::default();
    for namespace in files.namespaces() {
        let name = &namespace.meta.name;
        assert_eq!(cached.namespace(name), Some(namespace));
        assert_eq!(
            cached.network_policies_in(name).collect::<Vec<_>>(),
            files.network_policies_in(name).collect::<Vec<_>>()
        );
        assert_eq!(
            names(cached.pods_matching(name, &empty).collect()),
            names(files.pods_matching(name, &empty).collect())
        );
    }
    assert!(files.has_network_policies());
    assert_eq!(cached.has_network_policies(), files.has_network_policies());
    let mut kinds = 0;
    for object in files.others() {
        let (version, kind) = (&object.api_version, &object.kind);
        assert_eq!(
            cached.objects(version, kind).collect::<Vec<_>>(),
            files.objects(version, kind).collect::<Vec<_>>()
        );
        assert!(cached.has_objects_of(kind, None));
        assert!(cached.has_objects_of(kind, Some(version)));
        kinds += 1;
    }
    assert!(kinds > 0);
    assert!(!cached.has_objects_of("IPPool", Some("v0")));
    assert_eq!(cached.object_count(), files.object_count());
}

/// A cache of the layout before the model was read in place (`skoop-c3`:
/// one postcard value) is passed over by its version, never read as the
/// tables it does not hold, and the next load that writes caches writes it
/// anew in this layout.
#[test]
fn a_cache_of_an_older_layout_is_passed_over_and_written_anew() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    let mut old = std::fs::read(dir.join(FILE_NAME)).unwrap();
    old[..MAGIC.len()].copy_from_slice(b"skoop-c3");
    std::fs::write(dir.join(FILE_NAME), &old).unwrap();
    assert!(
        passed_over(&dir).starts_with("not a cluster cache of this version of skoop;"),
        "{}",
        passed_over(&dir)
    );
    let files = from_files(&dir);
    let loaded = load_writing_into(&dir, &Boundary::new(&dir), Budget::default(), 0, None);
    assert_eq!(format!("{loaded:?}"), format!("{files:?}"));
    let written = std::fs::read(dir.join(FILE_NAME)).unwrap();
    assert_eq!(&written[..MAGIC.len()], MAGIC);
    let cached = from_cache(&dir).unwrap().expect("the cache written anew");
    assert_eq!(encoded(&cached), encoded(&files));
}

/// A forger's cache: each byte of the body changed and the checksum made
/// anew, so that the tables behind it are what is tested. Whatever is read
/// answers every lookup and decodes whole without a panic.
#[test]
fn a_forged_cache_answers_every_lookup_without_a_panic() {
    let root = tempfile::tempdir().unwrap();
    let dir = example(root.path());
    write_cache(&dir);
    let good = std::fs::read(dir.join(FILE_NAME)).unwrap();
    let body = &good[FRAME..];
    let mut read = 0;
    for at in 0..body.len() {
        let mut forged = body.to_vec();
        forged[at] ^= 0x5a;
        std::fs::write(dir.join(FILE_NAME), framed(&forged)).unwrap();
        let Ok(Some((cluster, _))) = from_cache(&dir) else {
            continue;
        };
        read += 1;
        let address = "10.244.1.2".parse().unwrap();
        let _ = cluster.pod("default", "web-0");
        let _ = cluster.node("node-1");
        let _ = cluster.pod_at(address);
        let _ = cluster.pods_on("node-1").count();
        let _ = cluster.pods_in("10.244.0.0/16".parse().unwrap());
        let _ = cluster.pods_labelled("app", "web");
        let _ = cluster.nodes_with_pod_cidr(address, &["a".into()]);
        let _ = cluster.has_objects_of("Pod", None);
        let _ = cluster.ip_conflicts();
        let _ = cluster.object_count();
        let _ = format!("{cluster:?}");
    }
    // Many changes leave a cache that still reads: its records are tried.
    assert!(read > body.len() / 4, "{read} of {} read", body.len());
}
