//! Feeds arbitrary text to the kubeconfig reader: up to four files split at
//! NUL bytes, merged as `KUBECONFIG`'s list is. It may be refused, but must
//! never panic, hang or run out of memory, and a refusal names its file.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use skoop::collect::api::merge_kubeconfigs;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let files: Vec<(PathBuf, String)> = text
        .split('\0')
        .take(4)
        .enumerate()
        .map(|(i, text)| (PathBuf::from(format!("/fuzz/{i}/config")), text.to_string()))
        .collect();
    if let Err(refused) = merge_kubeconfigs(&files) {
        assert!(refused.to_string().contains("/fuzz/"), "{refused}");
    }
});
