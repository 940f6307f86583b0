//! Ctrl-C and SIGTERM, in every phase of every command: the process exits
//! 130 and leaves no temporary behind.
//!
//! [`install`] blocks both signals in the main thread before any other
//! thread exists (every thread inherits the mask; a command skoop runs gets
//! an empty one, as the standard library sets it) and waits for them on a
//! thread of its own. What happens then depends on the phase:
//!
//! - a live run or `collect local` is [`signalled`]'s listener: it hears the
//!   signal, stops its work (its tools killed with their process groups),
//!   deletes its collector pods, and returns, and its caller exits 130;
//! - otherwise (reading packs or a kubeconfig, diagnosing, writing a
//!   report) the thread removes every path registered with [`Temporary`]
//!   and exits 130 at once. A second signal while a listener cleans up ends
//!   the process the same way.

use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use tokio::sync::watch;

/// Exit status after Ctrl-C or SIGTERM, as a shell reports SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The signal received, for the listeners; `None` until one comes.
static SIGNAL: LazyLock<watch::Sender<Option<&'static str>>> =
    LazyLock::new(|| watch::Sender::new(None));

/// Paths removed when a signal ends the process.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Takes SIGINT and SIGTERM from the default action (which would end the
/// process with 130 or 143 and leave temporaries) to the signal thread.
/// Called first in `main`, before any thread is started.
pub fn install() {
    // SAFETY: the sets are initialised by sigemptyset before use, and
    // pthread_sigmask only changes this thread's mask.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    let started = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || wait_for_signals(set));
    if started.is_err() {
        // Without the thread, the default actions are better than signals
        // nobody takes.
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    }
}

fn wait_for_signals(set: libc::sigset_t) {
    loop {
        let mut number = 0;
        // SAFETY: `set` is an initialised signal set; sigwait writes `number`.
        if unsafe { libc::sigwait(&set, &mut number) } != 0 {
            continue;
        }
        let name = if number == libc::SIGINT {
            "interrupted"
        } else {
            "terminated"
        };
        let heard_before = SIGNAL.borrow().is_some();
        if SIGNAL.receiver_count() > 0 && !heard_before {
            SIGNAL.send_replace(Some(name));
            continue;
        }
        remove_temporaries();
        err!("{name}: stopped");
        std::process::exit(i32::from(EXIT_INTERRUPTED));
    }
}

fn remove_temporaries() {
    let paths = match TEMPORARIES.lock() {
        Ok(paths) => paths.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    for path in paths {
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if let Err(e) = removed
            && e.kind() != std::io::ErrorKind::NotFound
        {
            err!("warning: could not remove {}: {e}", path.display());
        }
    }
}

/// Resolves when SIGINT or SIGTERM comes, with `interrupted` or
/// `terminated`; while it is awaited, the signal is left to the caller to
/// act on instead of ending the process.
pub async fn signalled() -> &'static str {
    let mut receiver = SIGNAL.subscribe();
    match receiver.wait_for(Option::is_some).await {
        Ok(signal) => signal.unwrap_or("interrupted"),
        // The sender is a static: never dropped.
        Err(_) => std::future::pending().await,
    }
}

/// A file or directory that a signal must not leave behind: registered
/// while this lives (the owner removes it otherwise, e.g. a `TempDir`).
pub struct Temporary(PathBuf);

impl Temporary {
    pub fn new(path: &Path) -> Temporary {
        let path = path.to_path_buf();
        if let Ok(mut paths) = TEMPORARIES.lock() {
            paths.push(path.clone());
        }
        Temporary(path)
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if let Ok(mut paths) = TEMPORARIES.lock()
            && let Some(at) = paths.iter().position(|p| *p == self.0)
        {
            paths.swap_remove(at);
        }
    }
}
