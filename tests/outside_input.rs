//! Names and bytes from outside (issue 36): what a tool prints, a pod's
//! name in a CSV, an API server's names and answers, kubeconfig files and
//! signals neither drive the terminal, escape the snapshot, run as code,
//! exhaust memory, hang nor leave anything behind. Each test is named after
//! the bug it pins; the hostile API servers run on loopback, inside the test.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn skoop_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("skoop runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An executable shell script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `PATH` with `dir` first.
fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

// Item 10: `collect local` copied a tool's stderr to the terminal raw.
#[test]
fn a_tools_stderr_is_escaped_like_the_text_output() {
    let tools = tempfile::tempdir().unwrap();
    script(
        tools.path(),
        "iptables-save",
        r"printf '\033[2J\033]0;PWN\007\nsecond\n' >&2; exit 1",
    );
    let out = tempfile::tempdir().unwrap();
    let path = path_with(tools.path());
    let output = skoop_with(
        &["collect", "local", "--out", out.path().to_str().unwrap()],
        &[("PATH", &path)],
    );
    let stderr = text(&output.stderr);
    assert!(
        !stderr.contains(['\u{1b}', '\u{7}']),
        "raw control characters reached the terminal: {stderr:?}"
    );
    assert!(
        stderr.contains(r"\u{1b}[2J\u{1b}]0;PWN\u{7}"),
        "the tool's words are shown escaped: {stderr}"
    );
    assert!(stderr.contains("\n  second\n"), "{stderr}");
}

// Item 11: `matrix -o csv` printed raw control characters from a name.
#[test]
fn csv_fields_are_escaped_like_the_text_output() {
    let snap = common::copy_snapshot("examples/flannel-vxlan");
    std::fs::write(
        snap.path().join("cluster/evil.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: \"evil\\e]0;pwned\\a\\e[2J\", namespace: default}\nspec: {clusterIP: 10.96.0.9, ports: [{port: 80}]}\n",
    )
    .unwrap();
    let output = skoop_with(
        &[
            "matrix",
            "--snapshot",
            snap.path().to_str().unwrap(),
            "--from-nodes",
            "--to-services",
            "-o",
            "csv",
        ],
        &[],
    );
    let csv = text(&output.stdout);
    assert!(csv.contains("svc/default/evil"), "{csv}");
    assert!(!csv.contains(['\u{1b}', '\u{7}']), "{csv:?}");
    assert!(
        csv.contains(r"svc/default/evil\u{1b}]0;pwned\u{7}\u{1b}[2J"),
        "{csv}"
    );
}

/// `skoop ARGS` with `env` (and `KUBECONFIG` unset unless `env` sets it),
/// killed and the test failed if it runs longer than `limit`.
fn skoop_within(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .env_remove("KUBECONFIG")
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("skoop runs");
    finish_within(child, limit)
}

/// Waits for `child`, killing it (and failing) past `limit`.
fn finish_within(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    while child.try_wait().expect("waits").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("skoop still runs after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// A live diagnosis (no --snapshot): what reads a kubeconfig.
const LIVE_DIAGNOSIS: &[&str] = &[
    "diagnose",
    "--from",
    "default/web-0",
    "--to",
    "svc/default/web",
];

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

// Item 5: only --kubeconfig went through the bounded reader; KUBECONFIG
// and ~/.kube/config were read whole, a FIFO there hung skoop for ever.
#[test]
fn every_kubeconfig_source_is_read_bounded_and_a_fifo_or_device_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let sparse = dir.path().join("sparse");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let missing = dir.path().join("missing");
    let listed = |paths: &[&Path]| std::env::join_paths(paths).unwrap().into_string().unwrap();
    let cases = [
        (
            listed(&[Path::new("/dev/zero")]),
            "/dev/zero: a character device, not a regular file",
        ),
        (
            listed(&[&missing, &fifo]),
            "fifo: a FIFO, not a regular file",
        ),
        (
            listed(&[&sparse]),
            "sparse: 1073741824 bytes: larger than the 16 MiB that a kubeconfig may hold",
        ),
    ];
    for (kubeconfig, expected) in &cases {
        let output = skoop_within(
            LIVE_DIAGNOSIS,
            &[("KUBECONFIG", kubeconfig)],
            Duration::from_secs(20),
        );
        let stderr = text(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "KUBECONFIG={kubeconfig}: {stderr}"
        );
        assert!(
            stderr.contains(expected),
            "KUBECONFIG={kubeconfig}: {stderr}"
        );
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".kube")).unwrap();
    mkfifo(&home.path().join(".kube/config"));
    let output = skoop_within(
        LIVE_DIAGNOSIS,
        &[("HOME", home.path().to_str().unwrap())],
        Duration::from_secs(20),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(".kube/config: a FIFO, not a regular file"),
        "{stderr}"
    );
}

/// Waits until `path` exists (what a child writes once it has started).
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn send(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: signals the child this test started, by its id.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

/// The entries of `dir`.
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

// Item 12: SIGTERM while the kubeconfig was read exited 143 and left an
// empty skoop-snapshot-XXXX in the temporary directory.
#[test]
fn a_signal_while_connecting_exits_130_and_removes_the_temporary_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let started = dir.path().join("started");
    // An exec credential plugin that takes its time: kube runs it while
    // skoop connects.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:9'}}}}]\n\
             users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, \
             args: ['-c', 'touch {}; sleep 10'], interactiveMode: Never}}}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n",
            started.display()
        ),
    )
    .unwrap();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let _ = std::fs::remove_file(&started);
        let mut args = LIVE_DIAGNOSIS.to_vec();
        args.extend(["--kubeconfig", kubeconfig.to_str().unwrap()]);
        let child = Command::new(env!("CARGO_BIN_EXE_skoop"))
            .args(&args)
            .env("TMPDIR", &tmp)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for(&started);
        assert!(
            entries(&tmp)
                .iter()
                .any(|e| e.starts_with("skoop-snapshot-")),
            "{:?}",
            entries(&tmp)
        );
        send(&child, signal);
        let output = finish_within(child, Duration::from_secs(5));
        assert_eq!(output.status.code(), Some(130), "{}", text(&output.stderr));
        assert_eq!(entries(&tmp), Vec::<String>::new(), "left behind");
    }
}

// Item 12: a tool run by `collect local` ran on after skoop was stopped.
#[test]
fn a_signal_during_collect_local_exits_130_and_kills_the_running_tool() {
    let tools = tempfile::tempdir().unwrap();
    let pid_file = tools.path().join("pid");
    script(
        tools.path(),
        "ip",
        &format!("echo $$ > {}; exec sleep 30", pid_file.display()),
    );
    let out = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["collect", "local", "--out", out.path().to_str().unwrap()])
        .env("PATH", path_with(tools.path()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&pid_file);
    send(&child, libc::SIGINT);
    let output = finish_within(child, Duration::from_secs(5));
    assert_eq!(output.status.code(), Some(130), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("interrupted: stopped"));
    let tool = std::fs::read_to_string(&pid_file).unwrap();
    let proc_dir = Path::new("/proc").join(tool.trim());
    let deadline = Instant::now() + Duration::from_secs(5);
    while proc_dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!proc_dir.exists(), "the tool {} still runs", tool.trim());
    assert!(
        entries(out.path())
            .iter()
            .all(|e| !e.starts_with(".skoop-")),
        "{:?}",
        entries(out.path())
    );
}

/// How the hostile API server answers.
#[derive(Clone, Copy)]
enum Hostile {
    /// Lists a node named `../../../escaped-node` and one named `a/b`.
    EscapingNodeNames,
    /// Answers the list of nodes with an endless chunked stream.
    EndlessNodeList,
    /// Pads `/version` to 2 MiB.
    LargeVersion,
    /// Answers `/version`, then never answers a list.
    SilentLists,
}

/// A hostile Kubernetes API server on loopback, serving plain HTTP on a
/// thread of the test until the test ends; its kubeconfig's path.
fn hostile_api_server(how: Hostile, dir: &Path) -> std::path::PathBuf {
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(how, stream));
        }
    });
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n"
        ),
    )
    .unwrap();
    kubeconfig
}

/// Answers the requests of one connection (HTTP/1.1, kept alive).
fn serve(how: Hostile, stream: std::net::TcpStream) {
    use std::io::{BufRead, BufReader, Write};
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request).unwrap_or(0) == 0 {
            return;
        }
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 2 {
            line.clear();
        }
        let path = request.split(' ').nth(1).unwrap_or("/").to_string();
        let path = path.split('?').next().unwrap_or("/");
        let body = match (how, path) {
            (Hostile::LargeVersion, "/version") => format!(
                r#"{{"major":"1","minor":"33","gitVersion":"v1.33.0","padding":"{}"}}"#,
                "x".repeat(2 << 20)
            ),
            (_, "/version") => r#"{"major":"1","minor":"33","gitVersion":"v1.33.0"}"#.into(),
            (Hostile::SilentLists, _) => {
                std::thread::sleep(Duration::from_secs(600));
                return;
            }
            (Hostile::EndlessNodeList, "/api/v1/nodes") => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let chunk = format!("{:x}\r\n{}\r\n", 64 << 10, " ".repeat(64 << 10));
                let _ = stream.write_all(b"6\r\n{\"a\":[\r\n");
                while stream.write_all(chunk.as_bytes()).is_ok() {}
                return;
            }
            (Hostile::EscapingNodeNames, "/api/v1/nodes") => {
                let node = |name: &str| {
                    format!(
                        r#"{{"metadata":{{"name":"{name}","uid":"u-{}"}},"status":{{"addresses":[{{"type":"InternalIP","address":"127.0.0.1"}}]}}}}"#,
                        name.len()
                    )
                };
                format!(
                    r#"{{"apiVersion":"v1","kind":"NodeList","metadata":{{}},"items":[{},{}]}}"#,
                    node("../../../escaped-node"),
                    node("a/b")
                )
            }
            // A list: /api/v1/PLURAL or /apis/GROUP/VERSION/PLURAL.
            (_, path)
                if path.starts_with("/api/v1/")
                    || (path.starts_with("/apis/") && path.split('/').count() >= 5) =>
            {
                r#"{"apiVersion":"v1","kind":"List","metadata":{},"items":[]}"#.into()
            }
            _ => {
                let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;
                let reply = format!(
                    "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{status}",
                    status.len()
                );
                if stream.write_all(reply.as_bytes()).is_err() {
                    return;
                }
                continue;
            }
        };
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

// Item 3: an API server naming a node `../../../escaped-node` made skoop
// write `escaped-node/host/*.json` three levels above the snapshot.
#[test]
fn node_names_from_the_api_server_never_leave_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = hostile_api_server(Hostile::EscapingNodeNames, dir.path());
    let snapshot = dir.path().join("a/b/c/snap");
    let output = skoop_within(
        &[
            "collect",
            "cluster",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--out",
            snapshot.to_str().unwrap(),
            "--all-nodes",
            "--node-exec",
            "env",
        ],
        &[],
        Duration::from_secs(60),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    for node in ["../../../escaped-node", "a/b"] {
        assert!(
            stderr.contains(&format!(
                "warning: node/{node} not collected: node {node} not reached: \"{node}\" is not a Kubernetes node name"
            )),
            "{stderr}"
        );
    }
    let mut everything = Vec::new();
    let mut dirs = vec![dir.path().to_path_buf()];
    while let Some(at) = dirs.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            }
            everything.push(entry.path());
        }
    }
    assert!(
        everything
            .iter()
            .all(|p| p.starts_with(&snapshot) || snapshot.starts_with(p) || *p == kubeconfig),
        "written outside the snapshot: {everything:?}"
    );
    assert!(!snapshot.join("nodes").exists(), "{everything:?}");
}

/// The largest resident size of any child this test process has waited for.
fn children_peak_rss_mib() -> i64 {
    // SAFETY: getrusage writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    usage.ru_maxrss / 1024
}

// Item 4: a server that streamed an endless NodeList took skoop to 7.4 GB.
#[test]
fn an_endless_answer_stops_at_the_response_cap_naming_it_and_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = hostile_api_server(Hostile::EndlessNodeList, dir.path());
    let started = Instant::now();
    let output = skoop_within(
        &[
            "collect",
            "cluster",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--out",
            dir.path().join("snap").to_str().unwrap(),
            "--all-nodes",
        ],
        &[],
        Duration::from_secs(60),
    );
    let elapsed = started.elapsed();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sent too much for `list nodes`: its answer passed 256 MiB, the cap on one response (--max-api-response MIB raises it)"),
        "{stderr}"
    );
    let peak = children_peak_rss_mib();
    eprintln!("stopped after {elapsed:?}, peak RSS of the children {peak} MiB");
    assert!(peak < 1024, "{peak} MiB");
}

// Item 4: the cap on one run, over all its answers.
#[test]
fn answers_past_the_run_cap_stop_the_run_naming_it_and_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = hostile_api_server(Hostile::LargeVersion, dir.path());
    let output = skoop_within(
        &[
            "collect",
            "cluster",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--out",
            dir.path().join("snap").to_str().unwrap(),
            "--all-nodes",
            "--max-api-total",
            "1",
        ],
        &[],
        Duration::from_secs(60),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sent too much for `get /version`: its answers passed 1 MiB in all, the cap on one run (--max-api-total MIB raises it)"),
        "{stderr}"
    );
}

// Smaller point: a failed live run waited 30 s for its list, then 30 s more
// to delete collector pods it never created, though the docs say nothing
// waits over 30 s.
#[test]
fn a_run_that_fails_before_asking_for_a_collector_pod_waits_once() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = hostile_api_server(Hostile::SilentLists, dir.path());
    let started = Instant::now();
    let output = skoop_within(
        &[
            "collect",
            "cluster",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--out",
            dir.path().join("snap").to_str().unwrap(),
            "--all-nodes",
        ],
        &[],
        Duration::from_secs(90),
    );
    let elapsed = started.elapsed();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("did not answer `list nodes` within 30 s"),
        "{stderr}"
    );
    assert!(elapsed < Duration::from_secs(40), "waited {elapsed:?}");
}

// Smaller point: a pack test's `snapshot/` linked outside the pack was
// followed; one the test names outside the pack is still read on its own.
#[test]
fn a_pack_tests_snapshot_linked_outside_the_pack_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    common::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/flannel-vxlan"),
        &outside,
    );
    let pack = dir.path().join("leaky");
    let linked = pack.join("tests/linked");
    let named = pack.join("tests/named");
    std::fs::create_dir_all(&linked).unwrap();
    std::fs::create_dir_all(&named).unwrap();
    std::fs::write(
        pack.join("pack.yaml"),
        "name: leaky\nversion: 0.1.0\ndescription: d\nengine: \">=0.1.0\"\nkind: rules\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, linked.join("snapshot")).unwrap();
    std::fs::write(linked.join("expect.yaml"), "findings: []\n").unwrap();
    std::fs::write(
        named.join("expect.yaml"),
        "snapshot: ../../../outside\nfindings: []\n",
    )
    .unwrap();
    let output = skoop_with(&["packs", "test", pack.to_str().unwrap()], &[]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(
        all.contains(&format!(
            "snapshot: {}: symbolic link leading outside {} (to {}); not followed",
            linked.join("snapshot").display(),
            pack.display(),
            outside.canonicalize().unwrap().display()
        )),
        "{all}"
    );
    assert!(
        all.contains(&format!("test {} ... ok", named.display())),
        "{all}"
    );
}

// Item 12: a signal in any phase, here while diagnosing offline (a pack's
// scripts that take their whole time budget keep it busy), exits 130 and
// leaves no temporary report file beside --output.
#[test]
fn a_signal_while_diagnosing_exits_130_and_removes_the_unfinished_report() {
    let out = tempfile::tempdir().unwrap();
    let report = out.path().join("report.txt");
    let child = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["diagnose", "--snapshot", "examples/flannel-vxlan"])
        .args(["--from", "default/web-0", "--to", "default/web-3:8080"])
        .args(["--pack-path", "tests/fixtures/packs/hostile-budget"])
        .args(["--output", report.to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while entries(out.path()).is_empty() {
        assert!(Instant::now() < deadline, "no temporary report appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    send(&child, libc::SIGTERM);
    let output = finish_within(child, Duration::from_secs(5));
    assert_eq!(output.status.code(), Some(130), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("terminated: stopped"));
    assert_eq!(entries(out.path()), Vec::<String>::new(), "left behind");
}

// Item 5, further: the certificate, key or token file a kubeconfig names
// was read whole by kube, a FIFO there hung skoop as the kubeconfig did.
#[test]
fn the_files_a_kubeconfig_names_are_read_bounded_too() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("ca.crt"));
    let kubeconfig = dir.path().join("config");
    for (user, named) in [
        ("{token: t}", "ca.crt: a FIFO, not a regular file"),
        (
            "{tokenFile: /dev/zero}",
            "/dev/zero: a character device, not a regular file",
        ),
    ] {
        let ca = if named.starts_with("ca.crt") {
            "certificate-authority: ca.crt"
        } else {
            "insecure-skip-tls-verify: true"
        };
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                 clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:9', {ca}}}}}]\n\
                 users: [{{name: u, user: {user}}}]\n\
                 contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n"
            ),
        )
        .unwrap();
        let mut args = LIVE_DIAGNOSIS.to_vec();
        args.extend(["--kubeconfig", kubeconfig.to_str().unwrap()]);
        let output = skoop_within(&args, &[], Duration::from_secs(20));
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(named), "{stderr}");
    }
}

// Issue 36, further: kube ran the kubeconfig's exec credential plugin
// blocking and without a limit, so a plugin that never answered hung skoop
// for ever. It is killed at its limit, and the run stops naming it.
#[test]
fn an_exec_plugin_that_never_answers_is_killed_at_its_limit_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "login", "exec sleep 600");
    let plugin = dir.path().join("login");
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:9'}}}}]\n\
             users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, \
             command: {}, args: [--cluster, c]}}}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n",
            plugin.display()
        ),
    )
    .unwrap();
    let mut args = LIVE_DIAGNOSIS.to_vec();
    args.extend(["--kubeconfig", kubeconfig.to_str().unwrap()]);
    args.extend(["--exec-plugin-timeout", "2"]);
    let started = Instant::now();
    let output = skoop_within(&args, &[], Duration::from_secs(20));
    let took = started.elapsed();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: kubeconfig: the exec credential plugin `{} --cluster c` of user u: killed after 2 s \
             without finishing (--exec-plugin-timeout SECONDS raises the limit)",
            plugin.display()
        )
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    // Without the flag, the limit is 30 s, like one API call's.
    let help = skoop_with(&["diagnose", "--help"], &[]);
    assert!(
        text(&help.stdout).contains("[default: 30]"),
        "{}",
        text(&help.stdout)
    );
}
