//! Feeds arbitrary text to the live client's reading of a list page, as an
//! API server (hostile or broken) may answer it: the first byte picks the
//! kind listed, the rest is the answer. It may be refused, but must never
//! panic, hang or run out of memory; every object read carries the list's
//! kind, and redacting it (what collection does next) must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skoop::collect::api::list_page;
use skoop::collect::objects::redact;
use skoop::collect::rbac::contract_kinds;

fuzz_target!(|data: &[u8]| {
    let Some((&which, answer)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(answer) else {
        return;
    };
    let kinds = contract_kinds();
    let resource = &kinds[usize::from(which) % kinds.len()];
    let Ok(page) = list_page(resource, text) else {
        return;
    };
    assert!(
        page.next.as_deref() != Some(""),
        "an empty token is no next page"
    );
    for mut item in page.items {
        assert_eq!(item["kind"], resource.kind.as_str());
        redact(&mut item);
    }
});
