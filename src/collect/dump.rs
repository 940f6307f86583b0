//! One network namespace's dump files (DESIGN §3), written by running each
//! command of [`DumpFile`] inside that namespace through a [`NodeShell`]:
//! on this machine, through `--node-exec`, or in a collector pod.
//!
//! **Invariant:** collecting only reads. A tool whose mere running changes
//! the kernel is not run unless that change has already happened:
//!
//! - `ipvsadm` autoloads the `ip_vs` module, which hooks into netfilter and
//!   conntrack for every namespace. It runs only when `/proc/net/ip_vs`
//!   exists in the namespace (the module is already there); otherwise its
//!   file is skipped with [`SkipReason::IpvsNotInUse`].
//! - `iptables-save` and `ip6tables-save` (nf_tables backend), `ipset save` and `ss` may autoload
//!   `nf_tables`, `ip_set` and the `*_diag` modules on a modular kernel. These
//!   register no packet hooks and create no tables or sets (checked: after
//!   `iptables-save` in a fresh namespace `nft list ruleset` is still empty),
//!   so the packet path is unchanged and they run as they are. `ss -S` never
//!   loads `sctp` itself, which would change how the kernel answers SCTP
//!   packets: the kernel requests a protocol's diag module only once the
//!   protocol is registered (`sock_load_diag_module`), so without SCTP `ss`
//!   just lists no SCTP socket.
//! - `ip`, `bridge` and `sysctl` only read.
//!
//! What the tools print in a fresh, empty namespace (iproute2 6.1, iptables
//! 1.8.9 nf_tables, ipset 7, procps 4): `iptables-save`, `ipset save` and
//! `ss -H` print nothing, and that empty file is a valid dump meaning "no
//! rules, no sets, no listeners"; the `ip -j` commands print `[]` or the
//! loopback device; `ip rule` prints the three default rules.
//!
//! Three things are added to the plain commands: every tool runs with
//! `LC_ALL=C` so its output does not depend on the collector's locale,
//! `sysctl.txt` keeps only the `net.*` lines of `sysctl -a` (see
//! [`net_sysctls`]), and `iptables-save.txt` and `ip6tables-save.txt` hold
//! the rules of the backend in use (see [`busiest_iptables_backend`]).

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::command::{CommandOutput, RunError};
use super::shell::{COMMAND_TIMEOUT, NodeShell};
use crate::packs::Datapath;
use crate::snapshot::netns::{DumpFile, bpf, datapath};

/// Exists in a namespace exactly when the `ip_vs` module is loaded.
pub(super) const IPVS_PROC_FILE: &str = "/proc/net/ip_vs";

/// What one collection did with each dump file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectReport {
    /// The directory the files were written to.
    pub out: PathBuf,
    /// The network namespace collected, in words (`network namespace
    /// cni-1234`, `pod default/web-0 on node node-1`).
    pub namespace: String,
    pub written: Vec<Written>,
    pub skipped: Vec<Skipped>,
}

impl CollectReport {
    /// Whether some command ran and failed, as opposed to every missing file
    /// having a known, harmless reason (tool not installed, IPVS not in use).
    pub fn has_failures(&self) -> bool {
        self.skipped
            .iter()
            .any(|s| matches!(s.reason, SkipReason::CommandFailed { .. }))
    }
}

/// A dump file that was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// In the namespace's directory (`datapath/NAME.json` for a datapath's).
    pub file: String,
    /// What the tool printed on stderr although it succeeded (e.g. `sysctl`
    /// naming keys it was not allowed to read): the file may be incomplete.
    pub stderr: String,
    /// Where the file holds another command's output than the contract's
    /// (iptables rules from the backend that has them), in words.
    pub note: Option<String>,
}

/// A dump file that was not written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub file: String,
    pub reason: SkipReason,
    /// A file of that name from an earlier collection was removed, so that
    /// the directory never mixes two collections.
    pub removed_stale: bool,
}

/// Why a dump file was not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The tool is not installed: not found on `PATH` nor in the sbin directories.
    ToolMissing { tool: String },
    /// `/proc/net/ip_vs` does not exist in the namespace, so no IPVS service
    /// can exist there, and running `ipvsadm` would load the `ip_vs` module.
    IpvsNotInUse,
    /// The command could not be started, or exited unsuccessfully.
    CommandFailed {
        command: String,
        status: String,
        stderr: String,
    },
}

impl SkipReason {
    /// A note rather than a warning: nothing was lost.
    pub fn is_note(&self) -> bool {
        matches!(self, SkipReason::IpvsNotInUse)
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::ToolMissing { tool } => {
                write!(f, "`{tool}` is not installed (not found on PATH)")
            }
            SkipReason::IpvsNotInUse => write!(
                f,
                "IPVS not in use ({IPVS_PROC_FILE} does not exist; running ipvsadm would load the ip_vs module)"
            ),
            SkipReason::CommandFailed {
                command,
                status,
                stderr,
            } => {
                write!(f, "`{command}` failed ({status})")?;
                let stderr = stderr.trim();
                if !stderr.is_empty() {
                    write!(f, ": {stderr}")?;
                }
                Ok(())
            }
        }
    }
}

/// Why nothing could be collected at all.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("no network namespace named {name:?} (`ip netns list` shows the known ones)")]
    NoSuchNetns { name: String },
    #[error("`ip` (iproute2) is needed to enter a network namespace but is not installed")]
    IpMissing,
    #[error("cannot enter network namespace {name:?} (entering one needs root): {stderr}")]
    CannotEnterNetns { name: String, stderr: String },
    #[error("cannot find pod {pod}'s network namespace on node {node}: {reason}")]
    PodNetnsNotFound {
        pod: String,
        node: String,
        reason: String,
    },
    #[error("{0}: stopped")]
    Stopped(&'static str),
    /// Every command would fail alike: nothing of the namespace is collected.
    #[error("{0}")]
    Unreachable(RunError),
    #[error(transparent)]
    BadName(#[from] crate::snapshot::name::BadName),
    #[error("{}: cannot create the output directory: {source}", dir.display())]
    CreateOutDir { dir: PathBuf, source: io::Error },
    #[error("{}: cannot write in the output directory: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// Writes the dump files of one network namespace flat into `out`, creating
/// it if missing. Each command runs through `shell` after `enter`, the
/// words that enter the namespace (`ip netns exec NAME`, `nsenter
/// --net=PATH`; none for the shell's own namespace). `namespace` says in
/// words which one it is, for the report.
///
/// `Err` only when nothing can be written; a tool that is missing, fails,
/// hangs or floods skips its own file, as the report says.
pub async fn collect_namespace(
    shell: &NodeShell,
    enter: &[String],
    namespace: String,
    out: &Path,
    datapaths: &[Datapath],
) -> Result<CollectReport, CollectError> {
    prepare_out_dir(out)?;
    let mut report = CollectReport {
        out: out.to_path_buf(),
        namespace,
        written: Vec::new(),
        skipped: Vec::new(),
    };
    for file in DumpFile::ALL {
        let command = DumpCommand {
            name: file.name(),
            command: file.command(),
        };
        collect_file(shell, enter, &command, out, &mut report).await?;
    }
    collect_datapaths(shell, enter, out, datapaths, &mut report).await?;
    Ok(report)
}

/// The state of each programmable datapath whose programs `bpf-net.json`
/// shows attached here, as its pack names it (`datapath: collect:`), into
/// `datapath/NAME.json`. A file an earlier collection left there that this
/// one does not write is removed, so that the directory never mixes two.
async fn collect_datapaths(
    shell: &NodeShell,
    enter: &[String],
    out: &Path,
    datapaths: &[Datapath],
    report: &mut CollectReport,
) -> Result<(), CollectError> {
    let attached = attached_programs(out);
    let dir = out.join(datapath::DIR);
    let mut wanted = Vec::new();
    for datapath in datapaths {
        if !attached.iter().any(|name| datapath.claims(name)) {
            continue;
        }
        for command in &datapath.collect {
            let name = datapath::relative_path(&command.file);
            if wanted.contains(&name) {
                continue;
            }
            fs::create_dir_all(&dir).map_err(|source| CollectError::CreateOutDir {
                dir: dir.clone(),
                source,
            })?;
            let argv: Vec<&str> = command.command.iter().map(String::as_str).collect();
            let file = DumpCommand {
                name: &name,
                command: &argv,
            };
            collect_file(shell, enter, &file, out, report).await?;
            wanted.push(name);
        }
    }
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(());
    };
    for entry in entries.filter_map(Result::ok) {
        let name = format!("{}/{}", datapath::DIR, entry.file_name().to_string_lossy());
        if !wanted.contains(&name) && name.ends_with(".json") {
            fs::remove_file(entry.path()).map_err(|source| CollectError::Write {
                path: entry.path(),
                source,
            })?;
        }
    }
    Ok(())
}

/// The names of the programs the `bpf-net.json` just written lists.
fn attached_programs(out: &Path) -> Vec<String> {
    let Ok(text) = fs::read_to_string(out.join(DumpFile::BpfNet.name())) else {
        return Vec::new();
    };
    bpf::parse(&text)
        .0
        .unwrap_or_default()
        .into_iter()
        .map(|(attachment, _)| attachment.name)
        .collect()
}

/// Creates `out` and checks that files can be created in it, so that an
/// unwritable directory is reported before any tool runs. The probe file
/// has an unpredictable name and is created exclusively.
fn prepare_out_dir(out: &Path) -> Result<(), CollectError> {
    fs::create_dir_all(out).map_err(|source| CollectError::CreateOutDir {
        dir: out.to_path_buf(),
        source,
    })?;
    tempfile::Builder::new()
        .prefix(".skoop-collect-probe.")
        .tempfile_in(out)
        .map(drop)
        .map_err(|source| CollectError::Write {
            path: out.to_path_buf(),
            source,
        })
}

/// A file to write and the command whose output it holds: a [`DumpFile`]'s,
/// or a datapath's state file a pack names.
struct DumpCommand<'a> {
    name: &'a str,
    command: &'a [&'a str],
}

/// Runs one dump file's command and writes or skips its file.
async fn collect_file(
    shell: &NodeShell,
    enter: &[String],
    file: &DumpCommand<'_>,
    out: &Path,
    report: &mut CollectReport,
) -> Result<(), CollectError> {
    let argv: Vec<String> = file.command.iter().map(|w| w.to_string()).collect();
    let tool = file.command.first().copied().unwrap_or_default();
    let outcome = if tool == "ipvsadm" && !sees(shell, enter, IPVS_PROC_FILE).await {
        Err(SkipReason::IpvsNotInUse)
    } else {
        match shell.run(enter, &argv, None, COMMAND_TIMEOUT).await {
            Ok(output) if output.success() => Ok(output),
            Ok(output) => Err(SkipReason::CommandFailed {
                command: file.command.join(" "),
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            }),
            Err(RunError::ToolMissing { tool }) => Err(SkipReason::ToolMissing { tool }),
            Err(e @ (RunError::KubeletUnreachable(_) | RunError::CollectorGone { .. })) => {
                return Err(CollectError::Unreachable(e));
            }
            Err(e) => Err(SkipReason::CommandFailed {
                command: file.command.join(" "),
                status: e.to_string(),
                stderr: String::new(),
            }),
        }
    };
    let path = out.join(file.name);
    match outcome {
        Ok(CommandOutput { stdout, stderr, .. }) => {
            let (stdout, note) = if tool == "sysctl" {
                (net_sysctls(&stdout), None)
            } else if let Some(family) = IptablesFamily::of_tool(tool) {
                busiest_iptables_backend(shell, enter, family, stdout).await
            } else {
                (stdout, None)
            };
            write_atomically(&path, &stdout).map_err(|source| CollectError::Write {
                path: path.clone(),
                source,
            })?;
            report.written.push(Written {
                file: file.name.to_string(),
                stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
                note,
            });
        }
        Err(reason) => {
            let removed_stale = remove_stale(&path)?;
            report.skipped.push(Skipped {
                file: file.name.to_string(),
                reason,
                removed_stale,
            });
        }
    }
    Ok(())
}

/// The tools of one family's iptables rules: `iptables-save` and its
/// backends for IPv4, `ip6tables-save` and its for IPv6.
struct IptablesFamily {
    save: &'static str,
    nft_save: &'static str,
    legacy_save: &'static str,
    /// The tables the legacy backend has in use.
    legacy_tables: &'static str,
}

impl IptablesFamily {
    const ALL: [IptablesFamily; 2] = [
        IptablesFamily {
            save: "iptables-save",
            nft_save: "iptables-nft-save",
            legacy_save: "iptables-legacy-save",
            legacy_tables: "/proc/net/ip_tables_names",
        },
        IptablesFamily {
            save: "ip6tables-save",
            nft_save: "ip6tables-nft-save",
            legacy_save: "ip6tables-legacy-save",
            legacy_tables: "/proc/net/ip6_tables_names",
        },
    ];

    fn of_tool(tool: &str) -> Option<&'static IptablesFamily> {
        IptablesFamily::ALL
            .iter()
            .find(|family| family.save == tool)
    }
}

/// iptables has two backends, and a node's rules are in one of them:
/// `iptables-save` shows only its own default's (and `ip6tables-save`
/// likewise for IPv6). As kube-proxy's iptables-wrapper decides which
/// backend a node uses, the one with more rules wins. The legacy backend
/// runs only where its tables are already in use (`/proc/net/ip_tables_names`
/// is not empty: running it would otherwise load a module); a backend that
/// is not installed is simply not asked. Returns the rules kept and, when
/// they are not the default tool's or the other backend has rules too, a
/// note saying so.
async fn busiest_iptables_backend(
    shell: &NodeShell,
    enter: &[String],
    family: &IptablesFamily,
    default: Vec<u8>,
) -> (Vec<u8>, Option<String>) {
    fn rules(dump: &[u8]) -> Vec<&[u8]> {
        dump.split(|&b| b == b'\n')
            .filter(|line| line.starts_with(b"-A "))
            .collect()
    }
    let mut best = (family.save, default);
    let mut others = Vec::new();
    for backend in [family.nft_save, family.legacy_save] {
        if backend == family.legacy_save {
            // procfs files have no size: read one line of it.
            let argv = ["grep", "-q", ".", family.legacy_tables].map(String::from);
            let in_use = shell.run(enter, &argv, None, COMMAND_TIMEOUT).await;
            if !in_use.is_ok_and(|output| output.success()) {
                continue;
            }
        }
        let output = shell
            .run(enter, &[backend.to_string()], None, COMMAND_TIMEOUT)
            .await;
        let Some(output) = output.ok().filter(CommandOutput::success) else {
            continue;
        };
        // `iptables-save` is one of the two backends: the same rules.
        if rules(&output.stdout) == rules(&best.1) {
            continue;
        }
        if rules(&output.stdout).len() > rules(&best.1).len() {
            let previous = std::mem::replace(&mut best, (backend, output.stdout));
            others.push((previous.0, rules(&previous.1).len()));
        } else {
            others.push((backend, rules(&output.stdout).len()));
        }
    }
    let others: Vec<String> = others
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(backend, count)| format!("{backend} shows {count} rules skoop did not read"))
        .collect();
    let note = match (best.0, others.is_empty()) {
        (chosen, true) if chosen == family.save => None,
        (chosen, true) => Some(format!("rules from {chosen}: the backend this node uses")),
        (chosen, false) => Some(format!(
            "rules from {chosen} ({} rules); {}",
            rules(&best.1).len(),
            others.join(", ")
        )),
    };
    (best.1, note)
}

/// Whether `path` exists as seen from inside the namespace (`/proc/net` is
/// the namespace's own).
async fn sees(shell: &NodeShell, enter: &[String], path: &str) -> bool {
    let argv = ["test".to_string(), "-e".to_string(), path.to_string()];
    shell
        .run(enter, &argv, None, COMMAND_TIMEOUT)
        .await
        .is_ok_and(|output| output.success())
}

/// Keeps the `net.*` lines of `sysctl -a` output, in the same format.
///
/// DESIGN §3 asks for at least `net.*`, and nothing else describes a network
/// namespace: the other keys are machine-wide, about three in ten of them
/// are counters or random ids (`fs.dentry-state`, `kernel.random.uuid`) that
/// differ on every run, and they would make every snapshot larger and noisier.
fn net_sysctls(output: &[u8]) -> Vec<u8> {
    output
        .split_inclusive(|&b| b == b'\n')
        .filter(|line| line.starts_with(b"net."))
        .flatten()
        .copied()
        .collect()
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename, so a reader never sees a half-written dump. The temporary
/// file is created exclusively under an unpredictable name, and the rename
/// replaces whatever `path` was (a planted symlink too) without following it.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".skoop-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

/// Creates `root/relative` a directory at a time, each one a real
/// directory: a symbolic link (or a file) planted on the way in a snapshot
/// being written is refused, never followed, so that what is written lands
/// under `root`. `root` itself is the user's, links and all.
pub(super) fn create_dirs_under(root: &Path, relative: &Path) -> io::Result<PathBuf> {
    let mut dir = root.to_path_buf();
    fs::create_dir_all(&dir)?;
    for component in relative.components() {
        let std::path::Component::Normal(name) = component else {
            return Err(io::Error::other(format!(
                "{}: not a plain path inside the snapshot",
                relative.display()
            )));
        };
        dir.push(name);
        if let Err(e) = fs::create_dir(&dir)
            && e.kind() != io::ErrorKind::AlreadyExists
        {
            return Err(e);
        }
        if !fs::symlink_metadata(&dir)?.is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a directory (a symbolic link or a file); not followed",
                dir.display()
            )));
        }
    }
    Ok(dir)
}

/// Removes a dump file left by an earlier collection; true when there was one.
fn remove_stale(path: &Path) -> Result<bool, CollectError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(CollectError::Write {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn collect_one(file: &DumpCommand, out: &Path) -> CollectReport {
        let mut report = CollectReport {
            out: out.to_path_buf(),
            namespace: "test".into(),
            written: Vec::new(),
            skipped: Vec::new(),
        };
        let collected = collect_file(&NodeShell::Local, &[], file, out, &mut report);
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(collected)
            .unwrap();
        report
    }

    /// Files an interrupted write would leave: the temporaries' prefix.
    pub(crate) fn leftover_temp_files(dir: &Path) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".skoop-")
            })
            .collect()
    }

    #[test]
    fn successful_command_writes_its_stdout_and_keeps_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let file = DumpCommand {
            name: "out.txt",
            command: &["sh", "-c", "printf 'a\\nb\\n'; echo careful >&2"],
        };
        let report = collect_one(&file, dir.path());
        assert_eq!(fs::read(dir.path().join("out.txt")).unwrap(), b"a\nb\n");
        assert_eq!(
            report.written,
            vec![Written {
                file: "out.txt".into(),
                stderr: "careful".into(),
                note: None,
            }]
        );
        assert!(report.skipped.is_empty());
        assert!(leftover_temp_files(dir.path()).is_empty());
    }

    #[test]
    fn empty_output_is_a_valid_empty_dump() {
        let dir = tempfile::tempdir().unwrap();
        let file = DumpCommand {
            name: "empty.txt",
            command: &["true"],
        };
        let report = collect_one(&file, dir.path());
        assert_eq!(report.written.len(), 1);
        assert_eq!(fs::read(dir.path().join("empty.txt")).unwrap(), b"");
    }

    #[test]
    fn failing_command_skips_its_file_quoting_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let file = DumpCommand {
            name: "fails.txt",
            command: &["sh", "-c", "echo partial; echo 'no permission' >&2; exit 3"],
        };
        let report = collect_one(&file, dir.path());
        assert!(!dir.path().join("fails.txt").exists());
        assert!(report.has_failures());
        let [skipped] = report.skipped.as_slice() else {
            panic!("expected one skipped file: {report:?}");
        };
        let message = skipped.reason.to_string();
        assert!(message.contains("exit status: 3"), "{message}");
        assert!(message.ends_with(": no permission"), "{message}");
        assert!(!skipped.reason.is_note());
    }

    #[test]
    fn missing_tool_skips_its_file_naming_the_tool() {
        let dir = tempfile::tempdir().unwrap();
        let file = DumpCommand {
            name: "x.txt",
            command: &["skoop-no-such-tool", "--flag"],
        };
        let report = collect_one(&file, dir.path());
        assert_eq!(
            report.skipped[0].reason,
            SkipReason::ToolMissing {
                tool: "skoop-no-such-tool".into()
            }
        );
        assert!(
            report.skipped[0]
                .reason
                .to_string()
                .contains("`skoop-no-such-tool`")
        );
        assert!(!report.has_failures());
    }

    #[test]
    fn skipped_file_removes_the_stale_copy_of_an_earlier_collection() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("x.txt"), "old").unwrap();
        let file = DumpCommand {
            name: "x.txt",
            command: &["false"],
        };
        let report = collect_one(&file, dir.path());
        assert!(report.skipped[0].removed_stale);
        assert!(!dir.path().join("x.txt").exists());
    }

    #[test]
    fn rewritten_file_replaces_the_earlier_one() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("x.txt"), "old and longer").unwrap();
        let file = DumpCommand {
            name: "x.txt",
            command: &["echo", "new"],
        };
        collect_one(&file, dir.path());
        assert_eq!(
            fs::read_to_string(dir.path().join("x.txt")).unwrap(),
            "new\n"
        );
    }

    #[test]
    fn sysctl_output_keeps_only_net_keys_unchanged() {
        let output = b"kernel.pid_max = 4194304\nnet.core.somaxconn = 4096\nfs.file-nr = 1\t0\t9\nnet.ipv4.ip_local_port_range = 32768\t60999\nnetx = 1\n";
        assert_eq!(
            net_sysctls(output),
            b"net.core.somaxconn = 4096\nnet.ipv4.ip_local_port_range = 32768\t60999\n"
        );
    }

    #[test]
    fn sysctl_output_without_final_newline_keeps_its_last_net_line() {
        assert_eq!(net_sysctls(b"a.b = 1\nnet.x = 2"), b"net.x = 2");
    }

    #[test]
    fn writing_a_dump_replaces_a_planted_symlink_without_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious");
        fs::write(&target, "keep me").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("x.txt")).unwrap();
        let file = DumpCommand {
            name: "x.txt",
            command: &["echo", "dump"],
        };
        collect_one(&file, dir.path());
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep me");
        assert!(
            !fs::symlink_metadata(dir.path().join("x.txt"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("x.txt")).unwrap(),
            "dump\n"
        );
    }
}
