//! Feeds arbitrary text to the Kubernetes object loader, as YAML and as
//! JSON: it may report problems but must never panic, hang or run out of
//! memory, and every problem must point inside the input.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use skoop::snapshot::cluster::load_file_text;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count().max(1);
    for name in ["fuzz.yaml", "fuzz.json"] {
        let (_, problems) = load_file_text(Path::new(name), text);
        for problem in problems {
            if let Some(line) = problem.line {
                assert!(line >= 1 && line <= lines + 1, "problem outside the input: {problem}");
            }
        }
    }
});
