//! What one script call may spend beyond its operations: wall-clock time
//! and memory; and what all the calls of one run may spend together.
//!
//! Rhai bounds operations, call depth and the size of the values it checks,
//! but one operation may be slow (`sha1_hex` of 32 KB, sorting 10,000 items),
//! and it does not check every value it grows: `m[key] = value` checks the
//! entry, never the map, so a map of 64 KB strings reached 3.7 GB within the
//! operation budget. So each call also has a deadline and a memory budget,
//! both checked from rhai's progress callback every [`CHECK_EVERY`]
//! operations. Memory is counted by skoop's global allocator, per thread
//! (a call runs on one thread): bytes allocated minus bytes freed since the
//! call began, whatever allocated them. The `skoop` binary installs
//! [`CountingAllocator`]; a program embedding the library installs it too
//! for the memory budget (without it, the deadline and rhai's own limits
//! still hold, and memory is not counted).
//!
//! Each call is bounded, but their sum is not: a pack of thousands of
//! checks, each running to its own limit, kept a diagnosis busy for
//! minutes. So a run (the `skoop` binary sets it with [`limit_run`]) has a
//! budget of script time shared by every call of every pack: once spent,
//! every further call stops at its first operation. A run is one thread's
//! work (a diagnosis runs its scripts on one thread) until [`start_run`]
//! starts another: `skoop matrix` starts one for each flow, so that each
//! flow has the budget `diagnose` would give it alone, however many flows
//! came before it on its worker.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Wall-clock time one script call may take.
pub const MAX_CALL_TIME: Duration = Duration::from_secs(1);
/// Memory one script call may hold (net of what it freed).
pub const MAX_CALL_MEMORY: u64 = 256 * 1024 * 1024;
/// Operations between two checks: a few milliseconds at most.
pub const CHECK_EVERY: u64 = 64;

/// Why the progress callback stopped a call; the token of rhai's
/// `ErrorTerminated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverBudget {
    Time,
    Memory,
    /// The run's shared budget of script time is spent.
    RunTime,
}

/// The script time a run may spend in all, in nanoseconds; 0: no limit (a
/// program embedding the library that does not set one).
static RUN_LIMIT: AtomicU64 = AtomicU64::new(0);

/// Gives the calls of each run `total` of script time to share, and starts
/// one on this thread.
pub fn limit_run(total: Duration) {
    let nanos = u64::try_from(total.as_nanos()).unwrap_or(u64::MAX).max(1);
    RUN_LIMIT.store(nanos, Ordering::Relaxed);
    start_run();
}

/// Starts a new run on this thread: the calls made on it from now share a
/// fresh budget of the run's script time.
pub fn start_run() {
    let _ = RUN_SPENT.try_with(|spent| spent.set(0));
}

/// The run's shared budget, where one is set.
pub fn run_limit() -> Option<Duration> {
    match RUN_LIMIT.load(Ordering::Relaxed) {
        0 => None,
        nanos => Some(Duration::from_nanos(nanos)),
    }
}

/// Adds `spent` to the run's script time; whether the budget is now spent.
fn spend(spent: Duration) -> bool {
    let limit = RUN_LIMIT.load(Ordering::Relaxed);
    let nanos = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
    let total = RUN_SPENT
        .try_with(|run| {
            let total = run.get().saturating_add(nanos);
            run.set(total);
            total
        })
        .unwrap_or(0);
    limit != 0 && total >= limit
}

thread_local! {
    /// The script time this thread's run has spent so far, in nanoseconds.
    static RUN_SPENT: Cell<u64> = const { Cell::new(0) };
    /// Net bytes allocated by this thread since it started.
    static ALLOCATED: Cell<i64> = const { Cell::new(0) };
    /// When this thread's current call began, what it had allocated then,
    /// and when its time was last added to the run's.
    static CALL: Cell<Option<(Instant, i64, Instant)>> = const { Cell::new(None) };
}

fn allocated() -> i64 {
    ALLOCATED.try_with(Cell::get).unwrap_or(0)
}

/// The progress callback: `ops` is the call's operation count so far, 1 at
/// its first operation (each call starts from 0).
pub fn progress(ops: u64) -> Option<OverBudget> {
    if ops <= 1 {
        let now = Instant::now();
        let _ = CALL.try_with(|call| call.set(Some((now, allocated(), now))));
        return spend(Duration::ZERO).then_some(OverBudget::RunTime);
    }
    if !ops.is_multiple_of(CHECK_EVERY) {
        return None;
    }
    let (started, baseline, counted) = CALL.try_with(Cell::get).ok().flatten()?;
    let now = Instant::now();
    let _ = CALL.try_with(|call| call.set(Some((started, baseline, now))));
    if spend(now.duration_since(counted)) {
        return Some(OverBudget::RunTime);
    }
    if started.elapsed() > MAX_CALL_TIME {
        return Some(OverBudget::Time);
    }
    if allocated().saturating_sub(baseline) > MAX_CALL_MEMORY as i64 {
        return Some(OverBudget::Memory);
    }
    None
}

/// The system allocator, counting each thread's net allocation for
/// [`progress`]: `#[global_allocator] static A: CountingAllocator =
/// CountingAllocator;` (as `src/main.rs` does).
pub struct CountingAllocator;

fn count(delta: i64) {
    let _ = ALLOCATED.try_with(|allocated| allocated.set(allocated.get().wrapping_add(delta)));
}

fn size(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

// SAFETY: every method hands the request to `System` unchanged; counting
// touches only a const-initialised thread-local `Cell`, which never
// allocates and is never destroyed.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(size(layout.size()));
        // SAFETY: the caller's contract for `alloc` is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(size(layout.size()));
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-size(layout.size()));
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(size(new_size) - size(layout.size()));
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_held_past_the_budget_stops_the_call() {
        assert_eq!(progress(1), None);
        let held = vec![0u8; (MAX_CALL_MEMORY + 1024 * 1024) as usize];
        assert_eq!(progress(CHECK_EVERY), Some(OverBudget::Memory));
        drop(held);
        assert_eq!(progress(2 * CHECK_EVERY), None);
    }

    #[test]
    fn memory_freed_again_does_not_count() {
        assert_eq!(progress(1), None);
        for _ in 0..8 {
            let passing = vec![0u8; (MAX_CALL_MEMORY / 2) as usize];
            drop(passing);
        }
        assert_eq!(progress(CHECK_EVERY), None);
    }

    #[test]
    fn a_call_past_its_deadline_stops_at_the_next_check() {
        assert_eq!(progress(1), None);
        assert_eq!(progress(CHECK_EVERY - 1), None);
        std::thread::sleep(MAX_CALL_TIME + Duration::from_millis(50));
        assert_eq!(
            progress(CHECK_EVERY - 1),
            None,
            "checked every {CHECK_EVERY} only"
        );
        assert_eq!(progress(CHECK_EVERY), Some(OverBudget::Time));
        // The next call starts afresh.
        assert_eq!(progress(1), None);
        assert_eq!(progress(CHECK_EVERY), None);
    }
}
