//! The pack contract's versions (`docs/packs.md`, "Contract versions"): a
//! pack frozen at each earlier contract (`tests/fixtures/contract/N/PACK`, a
//! copy of a pack as it was written for contract N) keeps passing its own
//! tests, `packs lint` warns of the meaning it keeps, and the same pack
//! stating the current contract gets the current meaning.

mod common;

use std::fs;
use std::path::Path;

use skoop::packs::contract::{CONTRACT, UNVERSIONED};

use common::{copy_dir, skoop};

const FROZEN: &str = "tests/fixtures/contract";

/// The packs frozen at `version`, as paths from the package root.
fn frozen_at(version: u32) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(FROZEN)
        .join(version.to_string());
    let mut packs: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            format!(
                "{FROZEN}/{version}/{}",
                entry.unwrap().file_name().to_string_lossy()
            )
        })
        .collect();
    packs.sort();
    packs
}

#[test]
fn a_pack_frozen_at_every_earlier_contract_passes_its_tests() {
    for version in UNVERSIONED..CONTRACT {
        let packs = frozen_at(version);
        assert!(!packs.is_empty(), "no pack frozen at contract {version}");
        for pack in packs {
            let (code, out) = skoop(&["packs", "test", &pack]);
            assert_eq!(code, Some(0), "{pack}: {out}");
            assert!(out.contains(" 0 failed"), "{out}");
        }
    }
}

#[test]
fn lint_warns_of_a_missing_hook_whose_meaning_changed_and_passes() {
    let pack = format!("{FROZEN}/1/kindnet");
    let (code, out) = skoop(&["packs", "lint", &pack]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [format!(
            "{pack}/pack.yaml:1:1: warning: written for contract 1, without an `underlay` hook, which keeps its meaning there: the routers route no pod address: a pod's packet a node sends to a router outside the snapshot leaves the cluster (exits_cluster); since contract 2 a missing `underlay` hook means no opinion: such a packet ends insufficient_info. To migrate, write the hook, then state `contract: 2` (docs/packs.md, \"Contract versions\")"
        )]
    );
    // The built-in packs are written for the current contract.
    let (code, out) = skoop(&["packs", "lint", "plugins", "rules"]);
    assert_eq!((code, out.as_str()), (Some(0), ""));
}

#[test]
fn the_frozen_pack_stating_the_current_contract_has_no_opinion_but_the_route_is_still_reported() {
    let frozen = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(FROZEN)
        .join("1/kindnet");
    let copy = tempfile::tempdir().unwrap();
    for part in ["pack.yaml", "checks.rhai", "lib", "tests/route-missing"] {
        let from = frozen.join(part);
        if from.is_dir() {
            copy_dir(&from, &copy.path().join(part));
        } else {
            fs::copy(&from, copy.path().join(part)).unwrap();
        }
    }
    let manifest = copy.path().join("pack.yaml");
    let text = fs::read_to_string(&manifest).unwrap();
    let text = text.replacen(
        "kind: cni\n",
        &format!("contract: {CONTRACT}\nkind: cni\n"),
        1,
    );
    fs::write(&manifest, text).unwrap();
    fs::write(
        copy.path().join("tests/route-missing/expect.yaml"),
        "flows:
  - from: default/web-0
    to: default/web-3:8080
    disposition: insufficient_info
    findings: [engine.underlay.pod-routes-unknown, kernel.route.leaves-cluster]
",
    )
    .unwrap();
    let dir = copy.path().to_string_lossy();
    let (code, out) = skoop(&["packs", "lint", &dir]);
    assert_eq!((code, out.as_str()), (Some(0), ""));
    let (code, out) = skoop(&["packs", "test", &dir]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.trim_end().ends_with("1 passed, 0 failed"), "{out}");
}

#[test]
fn a_contract_this_skoop_does_not_implement_is_a_load_problem() {
    let dir = tempfile::tempdir().unwrap();
    let pack = |contract: &str| {
        format!(
            "name: demo\nversion: 0.1.0\ndescription: d\nengine: \">=0.1.0\"\ncontract: {contract}\nkind: rules\n"
        )
    };
    let manifest = dir.path().join("pack.yaml");
    let path = dir.path().to_string_lossy();
    for (contract, problem) in [
        (
            (CONTRACT + 1).to_string(),
            format!(
                "the pack is written for contract {}, this skoop implements contracts 1 to {CONTRACT}",
                CONTRACT + 1
            ),
        ),
        (
            "0".to_string(),
            format!("contract must be a whole number from 1 to {CONTRACT}, found 0"),
        ),
        (
            "\"two\"".to_string(),
            format!("contract must be a whole number from 1 to {CONTRACT}, found a string"),
        ),
    ] {
        fs::write(&manifest, pack(&contract)).unwrap();
        let (code, out) = skoop(&["packs", "lint", &path]);
        assert_eq!(code, Some(1), "{out}");
        assert_eq!(out.trim_end(), format!("{path}/pack.yaml:5:11: {problem}"));
    }
}
