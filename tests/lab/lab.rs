//! One run of the lab: the network namespaces and processes it creates, all
//! removed again when the [`Lab`] is dropped, on success, failure or panic.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What a test does when the lab cannot run here.
pub enum Availability {
    Run,
    /// `SKOOP_LAB=skip`: the test returns at once (and says so on stderr).
    Skip,
}

/// The lab's tools, and the Debian packages that install them.
const TOOLS: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("bridge", "iproute2"),
    ("ss", "iproute2"),
    ("iptables-restore", "iptables"),
    ("iptables-save", "iptables"),
    ("ipset", "ipset"),
    ("nft", "nftables"),
    ("sysctl", "procps"),
    ("nc", "netcat-openbsd"),
    ("ping", "iputils-ping"),
];

/// Decides whether the lab can run: it needs root and its tools. Otherwise a
/// test fails with a message saying what is missing and how to skip, rather
/// than silently passing.
pub fn availability() -> Availability {
    if std::env::var("SKOOP_LAB").is_ok_and(|v| v == "skip") {
        eprintln!("lab skipped: SKOOP_LAB=skip");
        return Availability::Skip;
    }
    let uid = Command::new("id").arg("-u").output().map(|o| o.stdout);
    if !uid.is_ok_and(|uid| uid == b"0\n") {
        panic!(
            "the lab builds network namespaces and needs root; run the tests as root, \
             or set SKOOP_LAB=skip to skip the lab tests"
        );
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing: Vec<String> = TOOLS
        .iter()
        .filter(|(tool, _)| !std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
        .map(|(tool, package)| format!("{tool} ({package})"))
        .collect();
    assert!(
        missing.is_empty(),
        "the lab needs {}; install them, or set SKOOP_LAB=skip to skip the lab tests",
        missing.join(", ")
    );
    Availability::Run
}

/// One lab run. Every namespace name starts with a prefix unique to the run
/// (`sklab-` and 6 random hex digits), so labs in parallel tests never meet.
pub struct Lab {
    prefix: String,
    namespaces: Vec<Netns>,
    /// Background processes, with the name of the namespace each runs in
    /// (empty: the root namespace) and the command line each runs.
    processes: Vec<(String, Vec<String>, Child)>,
    /// Control groups made for pods' processes, removed at cleanup.
    cgroups: Vec<PathBuf>,
    /// Control group trees handed to a kubelet (`cgroupRoot`), one path per
    /// v1 hierarchy: at cleanup every process in them is killed (the
    /// containers of the kubelet's pods) and they are removed, deepest first.
    cgroup_trees: Vec<PathBuf>,
}

impl Lab {
    pub fn new() -> Lab {
        let mut random = [0u8; 3];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut random))
            .expect("read /dev/urandom");
        let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
        Lab {
            prefix: format!("sklab-{hex}"),
            namespaces: Vec::new(),
            processes: Vec::new(),
            cgroups: Vec::new(),
            cgroup_trees: Vec::new(),
        }
    }

    /// Creates network namespace `<prefix>-<role>` with its loopback up.
    pub fn netns(&mut self, role: &str) -> Netns {
        let ns = Netns {
            name: format!("{}-{role}", self.prefix),
        };
        // Recorded before it exists, so that a half-made namespace is removed too.
        self.namespaces.push(ns.clone());
        command(&["ip", "netns", "add", &ns.name]);
        ns.ip("link set lo up");
        ns
    }

    /// Names the network namespace process `pid` is in `<prefix>-<role>`
    /// (`ip netns attach`), as the lab's own: a pod's that a container
    /// runtime made. Deleting the name at cleanup leaves the namespace to
    /// its processes.
    pub fn attach_netns(&mut self, role: &str, pid: u32) -> Netns {
        let ns = Netns {
            name: format!("{}-{role}", self.prefix),
        };
        command(&["ip", "netns", "attach", &ns.name, &pid.to_string()]);
        self.namespaces.push(ns.clone());
        ns
    }

    /// Makes control group `/<prefix>-<role>` in every cgroup hierarchy of
    /// this machine (the v1 ones, and the v2 one a hybrid layout mounts
    /// beside them, where runc makes its groups too), for a kubelet's
    /// `cgroupRoot`, and returns its path there. Everything under it is the
    /// lab's: killed and removed at cleanup.
    pub fn cgroup_root(&mut self, role: &str) -> String {
        let name = format!("{}-{role}", self.prefix);
        let mounts = std::fs::read_to_string("/proc/self/mounts").expect("read /proc/self/mounts");
        let mut v1 = false;
        for line in mounts.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if let [_, target, kind @ ("cgroup" | "cgroup2"), ..] = fields[..] {
                v1 |= kind == "cgroup";
                let dir = Path::new(target).join(&name);
                self.cgroup_trees.push(dir.clone());
                std::fs::create_dir_all(&dir)
                    .unwrap_or_else(|e| panic!("create cgroup {}: {e}", dir.display()));
            }
        }
        assert!(
            v1,
            "no cgroup v1 hierarchy is mounted (the kubelet lab is made for cgroup v1)"
        );
        format!("/{name}")
    }

    /// Starts `argv` in the background inside `ns`; it is killed at cleanup.
    pub fn spawn(&mut self, ns: &Netns, argv: &[&str]) {
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {argv:?} in {}: {e}", ns.name));
        self.processes.push((ns.name.clone(), words(argv), child));
    }

    /// Starts `argv` in the background, inside `ns` or (`None`) in the root
    /// namespace, with `env` added and its output appended to `log`; it is
    /// killed at cleanup. For the real components the lab runs. Returns the
    /// process id (the program's own: `ip netns exec` and `sh -c 'exec'`
    /// replace themselves with it).
    pub fn spawn_logged(
        &mut self,
        ns: Option<&Netns>,
        argv: &[&str],
        env: &[(&str, &str)],
        log: &Path,
    ) -> u32 {
        let file = std::fs::File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open {}: {e}", log.display()));
        let mut command = match ns {
            Some(ns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", &ns.name]).args(argv);
                command
            }
            None => {
                let mut command = Command::new(argv[0]);
                command.args(&argv[1..]);
                command
            }
        };
        let child = command
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {argv:?}: {e}"));
        let name = ns.map(|ns| ns.name.clone()).unwrap_or_default();
        let pid = child.id();
        self.processes.push((name, words(argv), child));
        pid
    }

    /// Runs a pod's "pause" process in `ns`, in a control group named as
    /// the kubelet names a pod's (`kubepods/pod<UID>`, here in the v1
    /// `pids` hierarchy under the lab's prefix), so that live collection
    /// finds the pod's namespace by its UID as on a real node.
    pub fn pause_in_pod_cgroup(&mut self, ns: &Netns, uid: &str) {
        let root = Path::new("/sys/fs/cgroup/pids").join(&self.prefix);
        let cgroup = root.join("kubepods").join(format!("pod{uid}"));
        std::fs::create_dir_all(&cgroup)
            .unwrap_or_else(|e| panic!("create cgroup {}: {e}", cgroup.display()));
        for dir in [&root, &root.join("kubepods"), &cgroup] {
            if !self.cgroups.contains(dir) {
                self.cgroups.push(dir.clone());
            }
        }
        self.spawn(ns, &["sleep", "infinity"]);
        let (_, _, child) = self.processes.last().expect("just spawned");
        // `ip netns exec` execs the command: the child's pid is sleep's.
        let pid = child.id();
        std::fs::write(cgroup.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("move the pause process into {}: {e}", cgroup.display()));
        // The sandbox is made once its process is in the namespace: until
        // `ip netns exec` has entered it, `ip netns pids` does not list it,
        // and a CNI plugin handed the namespace by `/proc/PID/ns/net` would
        // be handed none.
        let namespace = |path: &str| {
            use std::os::unix::fs::MetadataExt as _;
            std::fs::metadata(path).map(|m| (m.dev(), m.ino())).ok()
        };
        let wanted = namespace(&format!("/run/netns/{}", ns.name));
        let deadline = Instant::now() + Duration::from_secs(10);
        while namespace(&format!("/proc/{pid}/ns/net")) != wanted {
            assert!(
                wanted.is_some() && Instant::now() < deadline,
                "the pause process {pid} did not enter the namespace {}",
                ns.name
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills the processes started in `ns` whose command line has a word
    /// ending with `program` (`kube-proxy`, `flanneld`, `calico-node`, run
    /// through `sh` to bind its `/var/lib`), and waits for them.
    pub fn stop_program(&mut self, ns: &Netns, program: &str) {
        let (stopped, kept) =
            std::mem::take(&mut self.processes)
                .into_iter()
                .partition(|(name, argv, _)| {
                    *name == ns.name && argv.iter().any(|word| word.ends_with(program))
                });
        self.processes = kept;
        for (_, _, mut child) in stopped {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, _, child) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in self.namespaces.iter().rev() {
            // Anything else still running in the namespace would keep it alive.
            ns.kill_processes();
            let _ = Command::new("ip")
                .args(["netns", "del", &ns.name])
                .stderr(Stdio::null())
                .status();
        }
        // Deepest first; a cgroup can go once its processes are gone.
        for cgroup in self.cgroups.iter().rev() {
            let _ = std::fs::remove_dir(cgroup);
        }
        for tree in &self.cgroup_trees {
            remove_cgroup_tree(tree);
        }
    }
}

/// Kills every process in the control groups under `tree` until none is
/// left (a dying container's children may still arrive), then removes
/// them, deepest first.
fn remove_cgroup_tree(tree: &Path) {
    let mut groups = Vec::new();
    let mut pending = vec![tree.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        pending.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
        groups.push(dir);
    }
    for _ in 0..100 {
        let pids: Vec<String> = groups
            .iter()
            .filter_map(|g| std::fs::read_to_string(g.join("cgroup.procs")).ok())
            .flat_map(|procs| {
                procs
                    .split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for group in groups.iter().rev() {
        let _ = std::fs::remove_dir(group);
    }
}

/// A network namespace of the lab, by its `ip netns` name.
#[derive(Debug, Clone)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Kills every process in the namespace (`ip netns pids`), and waits a
    /// little until none is left.
    pub fn kill_processes(&self) {
        let pids = || -> Vec<String> {
            Command::new("ip")
                .args(["netns", "pids", &self.name])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .split_whitespace()
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        for _ in 0..40 {
            let left = pids();
            if left.is_empty() {
                return;
            }
            for pid in left {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid])
                    .stderr(Stdio::null())
                    .status();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `ip -n NAME <args>`, split on whitespace; panics if it fails.
    pub fn ip(&self, args: &str) {
        let mut argv = vec!["ip", "-n", &self.name];
        argv.extend(args.split_whitespace());
        command(&argv);
    }

    /// Runs `argv` inside the namespace and returns what happened.
    pub fn exec(&self, argv: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(argv)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {argv:?} in {}: {e}", self.name))
    }

    /// Runs `argv` inside the namespace; panics if it fails, else returns stdout.
    pub fn run(&self, argv: &[&str]) -> String {
        let output = self.exec(argv);
        if !output.status.success() {
            panic!(
                "{argv:?} in {} failed ({}): {}",
                self.name,
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Feeds `rules` to `iptables-restore --noflush`, adding to what is there.
    pub fn restore_iptables(&self, rules: &str) {
        self.restore("iptables-restore", rules);
    }

    /// Feeds `rules` to `ip6tables-restore --noflush`.
    pub fn restore_ip6tables(&self, rules: &str) {
        self.restore("ip6tables-restore", rules);
    }

    fn restore(&self, tool: &str, rules: &str) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, tool, "--noflush"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {tool}: {e}"));
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("iptables-restore stdin");
            stdin.write_all(rules.as_bytes()).expect("write rules");
        }
        let output = child.wait_with_output().expect("wait for iptables-restore");
        assert!(
            output.status.success(),
            "{tool} in {} failed: {}\n{rules}",
            self.name,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Waits up to `timeout` for `ready` to hold of `argv`'s output.
    pub fn wait_for(&self, argv: &[&str], timeout: Duration, ready: impl Fn(&str) -> bool) {
        let start = Instant::now();
        loop {
            let output = self.run(argv);
            if ready(&output) {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "{argv:?} in {} not ready after {timeout:?}; last output:\n{output}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn words(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|word| word.to_string()).collect()
}

/// Runs a command in the root namespace (only `ip netns` and `ip -n`, which
/// act on the lab's own namespaces); panics if it fails.
fn command(argv: &[&str]) {
    let output = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .unwrap_or_else(|e| panic!("run {argv:?}: {e}"));
    assert!(
        output.status.success(),
        "{argv:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
