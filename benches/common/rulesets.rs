//! What the ruleset benchmarks (`netfilter`, `nftables`) share: the fastest
//! of a few runs, and sizes in MiB.

use std::time::{Duration, Instant};

/// How many times each timing is taken; the fastest is reported.
pub const RUNS: usize = 5;

pub fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The fastest of `RUNS` runs of `f`, and the value of the last.
pub fn best<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut fastest = Duration::MAX;
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let value = f();
        fastest = fastest.min(start.elapsed());
        last = Some(value);
    }
    (fastest, last.expect("RUNS > 0"))
}
