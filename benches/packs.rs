//! Pack engine figures (`cargo bench --bench packs`): loading every built-in
//! pack, one hook call, and how long the sandbox takes to stop hostile
//! scripts. Targets: load at most 50 ms, a hook call at most 5 µs, every
//! hostile script stopped within one second.

mod common;

use common::median;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rhai::Dynamic;
use skoop::net::Protocol;
use skoop::packs::{HopScope, LoadedPacks, PackSource, Packet, builtin_sources};
use skoop::snapshot::{NetnsId, Snapshot};

fn main() {
    let load = median(21, || {
        let (loaded, problems) = LoadedPacks::load(builtin_sources(), &[]);
        assert!(problems.is_empty() && !loaded.packs().is_empty());
    });
    println!(
        "load all built-in packs ({}): {load:?} (median of 21)",
        builtin_sources().len()
    );

    let (snapshot, _) =
        Snapshot::load(Path::new("examples/flannel-vxlan")).expect("example snapshot");
    let snapshot = Arc::new(snapshot);
    let source = PackSource::read(Path::new("tests/fixtures/packs/hooks")).expect("hooks pack");
    let (hooks, problems) = LoadedPacks::load(vec![source], &[]);
    assert!(problems.is_empty(), "{problems:?}");
    let hop = Arc::new(HopScope {
        in_iface: Some("cni0".into()),
        out_iface: Some("flannel.1".into()),
        forwarding: true,
        ..HopScope::new(
            snapshot.clone(),
            NetnsId::Host {
                node: "node-1".into(),
            },
            Packet {
                src: "10.244.1.2".parse().expect("ip"),
                dst: "10.244.2.3".parse().expect("ip"),
                protocol: Protocol::Tcp,
                sport: Some(40000),
                dport: Some(8080),
                mark: 0,
                length: 1400,
            },
        )
    });
    let packet = Dynamic::from(hop.packet.clone());
    const CALLS: u32 = 100_000;
    for hook in ["masquerade", "next_hop"] {
        let total = median(5, || {
            for _ in 0..CALLS {
                let answer = hooks.call_hook("hooks", hook, &hop, packet.clone());
                assert!(answer.is_ok());
            }
        });
        println!(
            "one {hook} hook call: {:?} (median of 5 x {CALLS})",
            total / CALLS
        );
    }

    let (core, _) = LoadedPacks::load(builtin_sources(), &[]);
    let snapshot_checks = median(11, || {
        core.evaluate_snapshot(&snapshot);
    });
    println!("core checks over the example snapshot: {snapshot_checks:?} (median of 11)");
    let hop_checks = median(101, || {
        core.evaluate_hop(&hop);
    });
    println!("core hop checks at one hop: {hop_checks:?} (median of 101)");

    let source = PackSource::read(Path::new("tests/fixtures/packs/hostile")).expect("hostile pack");
    let (hostile, _) = LoadedPacks::load(vec![source], &[]);
    let start = Instant::now();
    let findings = hostile.evaluate_snapshot(&snapshot);
    println!(
        "4 hostile scripts x 2 nodes stopped: {:?} in all ({} findings)",
        start.elapsed(),
        findings.len()
    );
}
