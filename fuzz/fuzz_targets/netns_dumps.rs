//! Feeds arbitrary bytes to every namespace-dump parser. A parser may report
//! issues but must never panic, and every issue must point inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skoop::snapshot::netns::parse_any_dump;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let lines = text.lines().count().max(1);
        for issue in parse_any_dump(text) {
            assert!(issue.line >= 1 && issue.line <= lines + 1, "issue outside the input: {issue:?}");
        }
    }
});
