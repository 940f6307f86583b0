//! Feeds an arbitrary pack to the pack loader: `pack.yaml`, a script and a
//! `lib/` module, split at NUL bytes (the seed corpus joins real packs'
//! files so). Loading may report problems but must never panic, hang or
//! run out of memory; scripts run at load (a module's top level) stay
//! inside the sandbox's limits.
#![no_main]

use std::collections::BTreeMap;
use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use skoop::packs::{CountingAllocator, LoadedPacks, PackSource};

// As the skoop binary does: a script's memory is counted for its budget.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\0');
    let mut files = BTreeMap::new();
    for name in ["pack.yaml", "checks.rhai", "lib/util.rhai"] {
        if let Some(part) = parts.next() {
            files.insert(name.to_owned(), part.to_owned());
        }
    }
    let source = PackSource {
        dir: PathBuf::from("fuzz"),
        builtin: false,
        files,
    };
    let _ = LoadedPacks::load(vec![source], &[]);
});
