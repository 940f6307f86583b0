//! Live collection: one network namespace's dump files (DESIGN §3), written by
//! running each command of [`DUMP_FILES`] inside that namespace.
//!
//! **Invariant:** collecting only reads. A tool whose mere running changes
//! the kernel is not run unless that change has already happened:
//!
//! - `ipvsadm` autoloads the `ip_vs` module, which hooks into netfilter and
//!   conntrack for every namespace. It runs only when `/proc/net/ip_vs`
//!   exists in the namespace (the module is already there); otherwise its
//!   file is skipped with [`SkipReason::IpvsNotInUse`].
//! - `iptables-save` (nf_tables backend), `ipset save` and `ss` may autoload
//!   `nf_tables`, `ip_set` and the `*_diag` modules on a modular kernel. These
//!   register no packet hooks and create no tables or sets (checked: after
//!   `iptables-save` in a fresh namespace `nft list ruleset` is still empty),
//!   so the packet path is unchanged and they run as they are.
//! - `ip`, `bridge` and `sysctl` only read.
//!
//! What the tools print in a fresh, empty namespace (iproute2 6.1, iptables
//! 1.8.9 nf_tables, ipset 7, procps 4): `iptables-save`, `ipset save` and
//! `ss -H` print nothing, and that empty file is a valid dump meaning "no
//! rules, no sets, no listeners"; the `ip -j` commands print `[]` or the
//! loopback device; `ip rule` prints the three default rules.
//!
//! Two things are added to the plain commands: every tool runs with
//! `LC_ALL=C` so its output does not depend on the collector's locale, and
//! `sysctl.txt` keeps only the `net.*` lines of `sysctl -a` (see
//! [`net_sysctls`]).

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::snapshot::netns::{DUMP_FILES, DumpFile};

/// Where `ip netns add` puts named network namespaces and `ip netns exec`
/// looks for them.
const NETNS_RUN_DIR: &str = "/run/netns";

/// Searched after `PATH`: most of the tools live in sbin, which a non-root
/// user's `PATH` often lacks even though `ip` and `sysctl` work unprivileged.
const SBIN_DIRS: &[&str] = &["/usr/local/sbin", "/usr/sbin", "/sbin"];

/// Exists in a namespace exactly when the `ip_vs` module is loaded.
const IPVS_PROC_FILE: &str = "/proc/net/ip_vs";

/// What one collection did with each dump file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectReport {
    /// The directory the files were written to.
    pub out: PathBuf,
    /// The network namespace collected; `None` for the collector's own.
    pub netns: Option<String>,
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
    pub file: &'static str,
    /// What the tool printed on stderr although it succeeded (e.g. `sysctl`
    /// naming keys it was not allowed to read): the file may be incomplete.
    pub stderr: String,
}

/// A dump file that was not written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub file: &'static str,
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
    #[error("{}: cannot create the output directory: {source}", dir.display())]
    CreateOutDir { dir: PathBuf, source: io::Error },
    #[error("{}: cannot write in the output directory: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// Writes the dump files of network namespace `netns` (by its `ip netns`
/// name; `None`: the namespace this process runs in) flat into `out`,
/// creating it if missing.
///
/// `Err` only when nothing can be collected (unknown namespace, `out` not
/// writable); a tool that is missing or fails skips its own file, as the
/// report says.
pub fn collect_local(netns: Option<&str>, out: &Path) -> Result<CollectReport, CollectError> {
    let target = match netns {
        Some(name) => Target::netns(name)?,
        None => Target::Current,
    };
    prepare_out_dir(out)?;
    let mut report = CollectReport {
        out: out.to_path_buf(),
        netns: netns.map(str::to_string),
        written: Vec::new(),
        skipped: Vec::new(),
    };
    for file in DUMP_FILES {
        collect_file(&target, file, out, &mut report)?;
    }
    Ok(report)
}

/// The network namespace the tools run in.
#[derive(Debug, Clone)]
enum Target {
    /// The collector's own namespace.
    Current,
    /// A named namespace, entered with `ip netns exec NAME` (`ip` at `ip`).
    Netns { name: String, ip: PathBuf },
}

impl Target {
    /// Checks that namespace `name` exists and can be entered.
    fn netns(name: &str) -> Result<Target, CollectError> {
        // A name with a slash would make `ip netns exec` open it as a path.
        let known = !name.is_empty()
            && !name.contains('/')
            && name != "."
            && name != ".."
            && Path::new(NETNS_RUN_DIR).join(name).exists();
        if !known {
            return Err(CollectError::NoSuchNetns {
                name: name.to_string(),
            });
        }
        let ip = find_tool("ip").ok_or(CollectError::IpMissing)?;
        let target = Target::Netns {
            name: name.to_string(),
            ip,
        };
        match target.command(Path::new("true"), &[]).output() {
            Ok(output) if output.status.success() => Ok(target),
            Ok(output) => Err(CollectError::CannotEnterNetns {
                name: name.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            }),
            Err(e) => Err(CollectError::CannotEnterNetns {
                name: name.to_string(),
                stderr: e.to_string(),
            }),
        }
    }

    /// `program args...`, to be run in this namespace.
    fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut command = match self {
            Target::Current => Command::new(program),
            Target::Netns { name, ip } => {
                let mut command = Command::new(ip);
                command.args(["netns", "exec", name.as_str()]).arg(program);
                command
            }
        };
        command
            .args(args)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Whether `path` exists as seen from inside this namespace (`/proc/net`
    /// is the namespace's own).
    fn sees(&self, path: &str) -> bool {
        match self {
            Target::Current => Path::new(path).exists(),
            Target::Netns { .. } => self
                .command(Path::new("test"), &["-e", path])
                .output()
                .is_ok_and(|output| output.status.success()),
        }
    }
}

/// Creates `out` and checks that files can be created in it, so that an
/// unwritable directory is reported before any tool runs.
fn prepare_out_dir(out: &Path) -> Result<(), CollectError> {
    fs::create_dir_all(out).map_err(|source| CollectError::CreateOutDir {
        dir: out.to_path_buf(),
        source,
    })?;
    let probe = out.join(format!(".skoop-collect-probe.{}", std::process::id()));
    fs::File::create(&probe)
        .and_then(|_| fs::remove_file(&probe))
        .map_err(|source| CollectError::Write {
            path: probe.clone(),
            source,
        })
}

/// Runs one dump file's command and writes or skips its file.
fn collect_file(
    target: &Target,
    file: &DumpFile,
    out: &Path,
    report: &mut CollectReport,
) -> Result<(), CollectError> {
    let tool = file.command.first().copied().unwrap_or_default();
    let args = file.command.get(1..).unwrap_or_default();
    let outcome = if tool == "ipvsadm" && !target.sees(IPVS_PROC_FILE) {
        Err(SkipReason::IpvsNotInUse)
    } else {
        match find_tool(tool) {
            None => Err(SkipReason::ToolMissing {
                tool: tool.to_string(),
            }),
            Some(program) => run(target, &program, file.command, args),
        }
    };
    let path = out.join(file.name);
    match outcome {
        Ok(output) => {
            let stdout = if tool == "sysctl" {
                net_sysctls(&output.stdout)
            } else {
                output.stdout
            };
            write_atomically(&path, &stdout).map_err(|source| CollectError::Write {
                path: path.clone(),
                source,
            })?;
            report.written.push(Written {
                file: file.name,
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        Err(reason) => {
            let removed_stale = remove_stale(&path)?;
            report.skipped.push(Skipped {
                file: file.name,
                reason,
                removed_stale,
            });
        }
    }
    Ok(())
}

/// Runs `program args` in `target`; `Err` when it cannot start or fails.
fn run(
    target: &Target,
    program: &Path,
    command: &[&str],
    args: &[&str],
) -> Result<Output, SkipReason> {
    let failed = |status: String, stderr: String| SkipReason::CommandFailed {
        command: command.join(" "),
        status,
        stderr,
    };
    match target.command(program, args).output() {
        Ok(output) if output.status.success() => Ok(output),
        Ok(output) => Err(failed(
            output.status.to_string(),
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        )),
        Err(e) => Err(failed("could not start".into(), e.to_string())),
    }
}

/// Finds an executable named `tool` on `PATH`, then in the sbin directories.
fn find_tool(tool: &str) -> Option<PathBuf> {
    if tool.is_empty() || tool.contains('/') {
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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
/// and a rename, so a reader never sees a half-written dump.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| fs::rename(&tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
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
mod tests {
    use super::*;

    fn report_for(out: &Path) -> CollectReport {
        CollectReport {
            out: out.to_path_buf(),
            netns: None,
            written: Vec::new(),
            skipped: Vec::new(),
        }
    }

    fn collect_one(file: &DumpFile, out: &Path) -> CollectReport {
        let mut report = report_for(out);
        collect_file(&Target::Current, file, out, &mut report).unwrap();
        report
    }

    fn leftover_temp_files(dir: &Path) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn successful_command_writes_its_stdout_and_keeps_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let file = DumpFile {
            name: "out.txt",
            command: &["sh", "-c", "printf 'a\\nb\\n'; echo careful >&2"],
        };
        let report = collect_one(&file, dir.path());
        assert_eq!(fs::read(dir.path().join("out.txt")).unwrap(), b"a\nb\n");
        assert_eq!(
            report.written,
            vec![Written {
                file: "out.txt",
                stderr: "careful".into()
            }]
        );
        assert!(report.skipped.is_empty());
        assert!(leftover_temp_files(dir.path()).is_empty());
    }

    #[test]
    fn empty_output_is_a_valid_empty_dump() {
        let dir = tempfile::tempdir().unwrap();
        let file = DumpFile {
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
        let file = DumpFile {
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
        let file = DumpFile {
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
        let file = DumpFile {
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
        let file = DumpFile {
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
    fn unknown_netns_is_an_error_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        for name in ["skoop-no-such-netns", "", "..", "../etc"] {
            let err = collect_local(Some(name), &out).unwrap_err();
            assert!(
                matches!(err, CollectError::NoSuchNetns { .. }),
                "{name:?}: {err}"
            );
        }
        assert!(!out.exists());
    }

    #[test]
    fn output_directory_under_a_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        fs::write(&file, "").unwrap();
        let err = collect_local(None, &file.join("out")).unwrap_err();
        assert!(matches!(err, CollectError::CreateOutDir { .. }), "{err}");
        assert!(err.to_string().contains("a-file/out"), "{err}");
    }

    #[test]
    fn current_namespace_accounts_for_every_dump_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("new/dir");
        let report = collect_local(None, &out).unwrap();
        let mut accounted: Vec<&str> = report
            .written
            .iter()
            .map(|w| w.file)
            .chain(report.skipped.iter().map(|s| s.file))
            .collect();
        accounted.sort_unstable();
        let mut expected: Vec<&str> = DUMP_FILES.iter().map(|f| f.name).collect();
        expected.sort_unstable();
        assert_eq!(accounted, expected);
        for written in &report.written {
            assert!(out.join(written.file).is_file(), "{}", written.file);
        }
        for skipped in &report.skipped {
            assert!(!out.join(skipped.file).exists(), "{}", skipped.file);
        }
        assert!(leftover_temp_files(&out).is_empty());
        if report.written.iter().any(|w| w.file == "ip-link.json") {
            let links = fs::read_to_string(out.join("ip-link.json")).unwrap();
            assert!(links.contains("\"ifname\":\"lo\""), "{links}");
        }
    }

    #[test]
    fn ipvsadm_runs_only_where_ip_vs_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let report = collect_local(None, dir.path()).unwrap();
        let ipvs_skipped = report
            .skipped
            .iter()
            .any(|s| s.file == "ipvsadm.txt" && s.reason == SkipReason::IpvsNotInUse);
        assert_eq!(ipvs_skipped, !Path::new(IPVS_PROC_FILE).exists());
    }
}
