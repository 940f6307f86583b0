//! Edited copies of a snapshot, for what the lab kernel cannot build (no
//! ipip, no ip_vs) or what a test wants changed in one place; and the
//! blocks of commands of README.md and `docs/` pages (`console`).
// Every test crate that declares `mod common` compiles all of it and uses a part.
#![allow(dead_code)]

pub mod browser;
pub mod console;
pub mod golden;
pub mod source_tree;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use skoop::engine::{self, Diagnosis, PacketSize, Protocol, Request};
use skoop::packs::LoadedPacks;
use skoop::snapshot::Snapshot;

/// A copy of the snapshot at `from` (relative to the package root) in a
/// temporary directory, to edit; its symbolic links are copied as what they
/// lead to, since a snapshot's links may not lead out of it.
pub fn copy_snapshot(from: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(from),
        dir.path(),
    );
    dir
}

/// Copies a directory tree (a snapshot, a pack) into `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs the built `skoop` with `args` from the package root: its exit code
/// and stdout.
pub fn skoop(args: &[&str]) -> (Option<i32>, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("skoop runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// `skoop packs lint PACK` is clean and `skoop packs test PACK` passes
/// every one of `cases` (its `tests/` directories), and nothing else.
pub fn assert_pack_lints_clean_and_passes(pack: &str, cases: &[&str]) {
    let (code, out) = skoop(&["packs", "lint", pack]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = skoop(&["packs", "test", pack]);
    assert_eq!(code, Some(0), "{out}");
    for case in cases {
        assert!(
            out.contains(&format!("test {pack}/tests/{case} ... ok")),
            "{out}"
        );
    }
    let summary = format!("{} passed, 0 failed", cases.len());
    assert!(out.trim_end().ends_with(&summary), "{out}");
}

/// Rewrites a JSON array dump (`ip -j ...`) in place.
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut Vec<Value>)) {
    let mut items: Vec<Value> = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut items);
    fs::write(path, serde_json::to_string(&items).unwrap()).unwrap();
}

/// Rewrites a text file (a dump, a manifest) in place.
pub fn edit_text(path: &Path, edit: impl FnOnce(String) -> String) {
    let text = fs::read_to_string(path).unwrap();
    fs::write(path, edit(text)).unwrap();
}

/// The ids of a `diagnose -o json` report's `findings` (or `off_path`).
pub fn finding_ids(report: &Value, list: &str) -> Vec<String> {
    report[list]
        .as_array()
        .expect("a list of findings")
        .iter()
        .map(|f| f["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// Loads a snapshot that must have no problems.
pub fn load(dir: &Path) -> Arc<Snapshot> {
    let (snapshot, problems) = Snapshot::load(dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    Arc::new(snapshot)
}

/// Diagnoses `from` -> `to` with the built-in packs.
pub fn diagnose(
    snapshot: &Arc<Snapshot>,
    from: &str,
    to: &str,
    protocol: Protocol,
    size: Option<PacketSize>,
) -> Diagnosis {
    let request = Request {
        from: from.parse().unwrap(),
        to: to.parse().unwrap(),
        port: None,
        protocol,
        size,
        via: None,
        family: None,
    };
    let (packs, problems) = LoadedPacks::load(skoop::packs::builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    engine::diagnose(snapshot, &request, &packs).unwrap()
}

/// The lab's flow, web-0 (node-1) to web-3:8080 (node-2) over TCP, without
/// `--size`: a SYN, with a full-size probe beside it.
pub fn web_0_to_web_3(dir: &Path) -> Diagnosis {
    diagnose(
        &load(dir),
        "default/web-0",
        "default/web-3:8080",
        Protocol::Tcp,
        None,
    )
}

/// Gives `ifname` in the namespace directory `netns` (under `dir`) another
/// MTU, in both dumps that show it.
pub fn set_mtu(dir: &Path, netns: &str, ifname: &str, mtu: u32) {
    for file in ["ip-link.json", "ip-addr.json"] {
        edit_json(&dir.join(netns).join(file), |items| {
            let item = items
                .iter_mut()
                .find(|item| item["ifname"] == ifname)
                .unwrap_or_else(|| panic!("{netns}/{file} has no {ifname}"));
            item["mtu"] = mtu.into();
        });
    }
}

/// The findings of a diagnosis with `id`.
pub fn with_id<'d>(diagnosis: &'d Diagnosis, id: &str) -> Vec<&'d skoop::engine::Finding> {
    diagnosis
        .findings
        .iter()
        .filter(|f| f.id.as_str() == id)
        .collect()
}

/// A flow into node-2's pods that kube-router's firewall rejects for the
/// examples' NetworkPolicy `default/isolate-node-2` (examples/kube-router,
/// examples/k3s): denied at node-2, its one `kube-router.policy.denied`
/// naming the policy, the pod's firewall chain and the policy's ipset.
pub fn assert_kube_router_names_isolate_node_2(diagnosis: &Diagnosis) {
    assert_eq!(
        diagnosis.disposition(),
        skoop::engine::Disposition::DeniedByNetfilter
    );
    let denied = only(diagnosis, "kube-router.policy.denied");
    assert_eq!(denied.about.hop.to_string(), "node-2");
    for named in [
        "default/isolate-node-2",
        "KUBE-POD-FW-",
        // base32(sha256("default" + "isolate-node-2" + "IPv4"))[:16]
        "KUBE-DST-UWPDTGOQEN6CBJIY",
    ] {
        assert!(denied.message.contains(named), "{}", denied.message);
    }
}

/// The diagnosis's one finding `id`; there must be exactly one.
pub fn only<'d>(diagnosis: &'d Diagnosis, id: &str) -> &'d skoop::engine::Finding {
    let [finding] = with_id(diagnosis, id)[..] else {
        panic!("one {id}: {:#?}", diagnosis.findings)
    };
    finding
}
