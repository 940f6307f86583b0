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
