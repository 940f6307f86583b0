//! A benchmark's child process timed as a whole: wall clock, CPU time and
//! peak memory, read from the kernel (`wait4`'s rusage).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A finished child process: its wall time, peak resident memory and
/// exit status.
pub struct Run {
    pub wall: Duration,
    /// User and system time, which a loaded machine stretches less.
    pub cpu: Duration,
    pub peak_bytes: u64,
    /// `None` when a signal ended it.
    pub exit: Option<i32>,
}

#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which gives its peak memory too"
)]
pub fn run(command: &mut Command) -> Run {
    let start = Instant::now();
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the command starts");
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value, which wait4 overwrites.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (its `Child` is never
    // waited on); `status` and `usage` are valid for writing.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Run {
        wall,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        peak_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        exit: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
    }
}

/// `wall ms (CPU ms) / peak MiB`.
impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.0} ms ({:.0}) / {:.0} MiB",
            self.wall.as_secs_f64() * 1000.0,
            self.cpu.as_secs_f64() * 1000.0,
            mib(self.peak_bytes)
        )
    }
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
