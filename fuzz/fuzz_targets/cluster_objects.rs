//! Feeds arbitrary text to the Kubernetes object loader, as YAML and as
//! JSON: it may report problems but must never panic, hang or run out of
//! memory, and every problem must point inside the input. JSON read
//! directly into the typed kinds, and YAML read by the reader fitted to
//! kubectl's (`snapshot/cluster/yaml.rs`), give what the positioned path
//! gives.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use skoop::snapshot::cluster::{Reading, load_file_text, load_file_text_as};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count().max(1);
    for name in ["fuzz.yaml", "fuzz.json"] {
        let (cluster, problems) = load_file_text(Path::new(name), text);
        let positioned = load_file_text_as(Path::new(name), text, Reading::Positioned);
        assert_eq!(
            format!("{:?}", (&cluster, &problems)),
            format!("{positioned:?}"),
            "the direct path differs from the positioned one"
        );
        for problem in problems {
            if let Some(line) = problem.line {
                assert!(line >= 1 && line <= lines + 1, "problem outside the input: {problem}");
            }
        }
    }
});
