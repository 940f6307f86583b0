//! `skoop collect local` against real namespaces: the contract's exit codes,
//! and what the tools leave in a fresh, empty namespace.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use skoop::snapshot::netns::DumpFile;

use crate::lab::{Availability, Lab, availability};

fn skoop_collect(netns: &str, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(["collect", "local", "--netns", netns, "--out"])
        .arg(out)
        .output()
        .expect("run skoop")
}

#[test]
fn empty_namespace_gives_valid_empty_dumps_and_stays_empty() {
    let Availability::Run = availability() else {
        return;
    };
    let mut lab = Lab::new();
    let ns = lab.netns("empty");
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("host");

    let output = skoop_collect(&ns.name, &out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");

    // No rules, no sets, no listeners: empty files, not missing ones.
    for empty in ["iptables-save.txt", "ipset-save.txt", "ss.txt"] {
        assert_eq!(fs::read_to_string(out.join(empty)).expect(empty), "");
    }
    assert_eq!(
        fs::read_to_string(out.join("ip-neigh.json")).expect("neighbours"),
        "[]\n"
    );
    let ipvs_in_use = Path::new("/proc/net/ip_vs").exists();
    assert_eq!(out.join("ipvsadm.txt").exists(), ipvs_in_use);
    if !ipvs_in_use {
        assert!(
            stderr.contains("note: ipvsadm.txt not collected: IPVS not in use"),
            "{stderr}"
        );
    }
    let written = DumpFile::ALL
        .iter()
        .filter(|f| out.join(f.name()).exists())
        .count();
    let summary = format!("collected {written} of {} files", DumpFile::ALL.len());
    assert!(String::from_utf8_lossy(&output.stdout).contains(&summary));

    // Collecting created nothing: iptables-save did not make the tables it
    // found missing, and ipvsadm did not load ip_vs.
    assert_eq!(ns.run(&["iptables-save"]), "");
    assert_eq!(
        ns.exec(&["test", "-e", "/proc/net/ip_vs"]).status.success(),
        ipvs_in_use
    );
}

#[test]
fn unknown_namespace_is_a_usage_error() {
    let Availability::Run = availability() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let output = skoop_collect("sklab-no-such-namespace", &out);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no network namespace named \"sklab-no-such-namespace\""),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn unwritable_output_directory_is_a_usage_error() {
    let Availability::Run = availability() else {
        return;
    };
    let mut lab = Lab::new();
    let ns = lab.netns("unwritable");
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("a-file");
    fs::write(&file, "").expect("write a file");
    let output = skoop_collect(&ns.name, &file.join("out"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot create the output directory"),
        "{stderr}"
    );
}

#[test]
fn rules_in_the_legacy_iptables_backend_are_collected_from_it_and_said_so() {
    let Availability::Run = availability() else {
        return;
    };
    let mut lab = Lab::new();
    let ns = lab.netns("legacy");
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("host");
    // Only legacy rules: `iptables-save` (nf_tables here) shows none.
    let added = Command::new("ip")
        .args(["netns", "exec", &ns.name, "iptables-legacy", "-A", "INPUT"])
        .args(["-s", "192.0.2.7", "-j", "DROP"])
        .status()
        .expect("run iptables-legacy");
    assert!(
        added.success(),
        "iptables-legacy is needed (package iptables)"
    );

    let output = skoop_collect(&ns.name, &out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let rules = fs::read_to_string(out.join("iptables-save.txt")).expect("iptables-save.txt");
    assert!(
        rules.contains("-A INPUT -s 192.0.2.7/32 -j DROP"),
        "{rules}"
    );
    assert!(
        stderr.contains("rules from iptables-legacy-save: the backend this node uses"),
        "{stderr}"
    );

    // Rules in both: the busier backend is read, and the other one named.
    for source in ["192.0.2.8", "192.0.2.9"] {
        let added = Command::new("ip")
            .args(["netns", "exec", &ns.name, "iptables-nft", "-A", "INPUT"])
            .args(["-s", source, "-j", "DROP"])
            .status()
            .expect("run iptables-nft");
        assert!(added.success());
    }
    let output = skoop_collect(&ns.name, &out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let rules = fs::read_to_string(out.join("iptables-save.txt")).expect("iptables-save.txt");
    assert!(
        rules.contains("192.0.2.9") && !rules.contains("192.0.2.7"),
        "{rules}"
    );
    assert!(
        stderr.contains("iptables-legacy-save shows 1 rules skoop did not read"),
        "{stderr}"
    );
}
