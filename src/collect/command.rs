//! What running one command gives: its output, or why it did not run to
//! its end; a process of this machine run with a time limit and a bound on
//! what it may print, and the tools found where they are installed. Every
//! way of reaching a node (`shell`'s, a collector pod's `pods/exec`)
//! answers in these terms.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// The most one dump command may print on stdout: the largest file a
/// snapshot reads (a ruleset dump, `docs/limits.md`); more is an error,
/// not a truncated file.
pub const MAX_STDOUT: usize = 256 << 20;

/// The most of a command's stderr that is kept.
const MAX_STDERR: usize = 64 << 10;

/// Searched after `PATH`: most of the tools live in sbin, which a non-root
/// user's `PATH` often lacks even though `ip` and `sysctl` work unprivileged.
const SBIN_DIRS: &[&str] = &["/usr/local/sbin", "/usr/sbin", "/sbin"];

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The exit code; `None` when the command ended by a signal or the
    /// remote side did not say.
    pub code: Option<i32>,
    /// How it ended, in words (`exit status: 3`).
    pub status: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Why a command did not run to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("`{tool}` is not installed (not found on PATH)")]
    ToolMissing { tool: String },
    #[error("could not start: {0}")]
    CouldNotStart(String),
    #[error("killed after {} s without finishing", .0.as_secs())]
    TimedOut(Duration),
    #[error("printed more than {} MiB; stopped", .0 >> 20)]
    OutputTooLarge(usize),
    #[error(
        "exited, but a process it started outside its process group kept its output open past {} s",
        PIPES_AFTER_EXIT.as_secs()
    )]
    PipesHeldOpen,
    #[error("pods/exec failed: {0}")]
    Exec(String),
    /// kube-apiserver could not connect to the node's kubelet, through
    /// which every `pods/exec` goes ("error dialing backend").
    #[error(
        "the API server cannot reach the node's kubelet, which `pods/exec` goes through: its port \
         (10250 unless the kubelet is configured otherwise) must be open to the control plane ({0})"
    )]
    KubeletUnreachable(String),
    /// The collector pod is gone (deleted, evicted) or its container has
    /// ended (OOM-killed): no command on the node can run any more.
    #[error("the collector pod {pod} is gone mid-collection: {why}")]
    CollectorGone { pod: String, why: String },
}

/// How long the output of a command that has exited may still take to
/// reach its end: its process group is killed at its exit, so only a
/// process that left the group (`setsid`) can hold the pipes open longer.
const PIPES_AFTER_EXIT: Duration = Duration::from_secs(2);

/// Runs `command` (for `tool`, as errors name it) on this machine, in the C
/// locale, `stdin` fed to it, within `timeout`, its output bounded.
///
/// The command runs in a process group of its own, which is killed when it
/// exits, when it times out and when the run is dropped (Ctrl-C): a tool
/// that leaves a background child neither keeps collection waiting on its
/// pipes nor outlives it.
pub(super) async fn run_process(
    mut command: Command,
    tool: &str,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> Result<CommandOutput, RunError> {
    command
        .env("LC_ALL", "C")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| RunError::CouldNotStart(format!("{tool}: {e}")))?;
    let mut group = ProcessGroup(child.id());
    let mut input = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let stdin = stdin.map(<[u8]>::to_vec);
    let work = async {
        let feed = async {
            if let (Some(pipe), Some(bytes)) = (input.as_mut(), stdin) {
                // A command that does not read its input is not an error.
                let _ = pipe.write_all(&bytes).await;
            }
            drop(input.take());
        };
        let reading = async {
            let (_, out, err) = tokio::join!(
                feed,
                read_bounded(stdout, MAX_STDOUT),
                read_bounded(stderr, MAX_STDERR)
            );
            (out, err)
        };
        tokio::pin!(reading);
        let mut read = None;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                done = &mut reading, if read.is_none() => read = Some(done),
            }
        };
        let status = status.map_err(|e| RunError::CouldNotStart(e.to_string()))?;
        // Its background children go with it, and the pipes they held close.
        group.kill();
        let (out, err) = match read {
            Some(done) => done,
            None => tokio::time::timeout(PIPES_AFTER_EXIT, reading)
                .await
                .map_err(|_| RunError::PipesHeldOpen)?,
        };
        let stdout = out.ok_or(RunError::OutputTooLarge(MAX_STDOUT))?;
        Ok(CommandOutput {
            code: status.code(),
            status: status.to_string(),
            stdout,
            stderr: err.unwrap_or_default(),
        })
    };
    // On timeout the future is dropped: the group is killed, then the child.
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| RunError::TimedOut(timeout))?
}

/// A command's process group (its id is the command's process id), killed
/// on drop: whatever the command started goes with it.
struct ProcessGroup(Option<u32>);

impl ProcessGroup {
    /// Kills the group, once.
    fn kill(&mut self) {
        if let Some(id) = self.0.take().and_then(|id| libc::pid_t::try_from(id).ok()) {
            // SAFETY: kill(2) with a negative id signals that process group
            // only. A group whose processes have all ended is ESRCH, which
            // is fine; its id is not given to another group while any of
            // its processes lives, so only in the instant between reaping a
            // command that left nothing behind and this call could it be.
            unsafe { libc::kill(-id, libc::SIGKILL) };
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads `reader` to its end; `None` when it holds more than `limit`
/// bytes (for stderr, the first `limit` bytes are kept instead).
pub(super) async fn read_bounded(
    reader: Option<impl AsyncRead + Unpin>,
    limit: usize,
) -> Option<Vec<u8>> {
    let mut reader = reader?;
    let mut bytes = Vec::new();
    let mut chunk = vec![0; 64 << 10];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return Some(bytes),
            Ok(n) => {
                if bytes.len() + n > limit {
                    if limit < MAX_STDOUT {
                        bytes.extend_from_slice(&chunk[..limit - bytes.len()]);
                        return Some(bytes);
                    }
                    return None;
                }
                bytes.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// Finds an executable named `tool` on `PATH`, then in the sbin directories.
pub(super) fn find_tool(tool: &str) -> Option<PathBuf> {
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Runs `future` to its end on a runtime of its own.
    pub(in crate::collect) fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(future)
    }

    // Issue 36 item 12: a tool that started a background child kept
    // `collect local` waiting 60 s on its pipes, and the child ran on.
    #[test]
    fn a_tool_that_leaves_a_child_behind_is_reaped_at_once_and_its_child_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("sleep 30 & echo $! > \"$0\"; echo done")
            .arg(&pid_file);
        let started = std::time::Instant::now();
        let output = block_on(run_process(command, "sh", None, Duration::from_secs(20))).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(output.stdout, b"done\n");
        let child = std::fs::read_to_string(&pid_file).unwrap();
        let proc_dir = Path::new("/proc").join(child.trim());
        let gone = |dir: &Path| {
            std::fs::read_to_string(dir.join("stat")).map_or(true, |stat| {
                stat.rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z'))
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !gone(&proc_dir) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            gone(&proc_dir),
            "the background child {} still runs",
            child.trim()
        );
    }

    #[test]
    fn stdout_past_the_bound_is_an_error_not_a_truncated_file() {
        let bytes = block_on(read_bounded(Some(&[7u8; 1000][..]), 999));
        assert_eq!(
            bytes.map(|b| b.len()),
            Some(999),
            "stderr-sized limits keep a prefix"
        );
        let over = block_on(read_bounded(
            Some(&vec![7u8; MAX_STDOUT + 1][..]),
            MAX_STDOUT,
        ));
        assert_eq!(over, None);
    }
}
