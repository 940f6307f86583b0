//! `skoop diagnose` end to end on the bundled 2-node examples
//! (`cargo bench --bench diagnose`): loading the snapshot and the built-in
//! packs, and one diagnosis (every service backend, the replies, the pack
//! checks). Target: a 2-node example answers in well under a second.
//! `flannel-vxlan-partial` walks node-2 with the Flannel pack's hooks.

mod common;

use common::median;
use std::path::Path;
use std::sync::Arc;

use skoop::engine::{self, Endpoint, Protocol, Request};
use skoop::packs::{LoadedPacks, builtin_sources};
use skoop::snapshot::Snapshot;

fn request(to: &str) -> Request {
    Request {
        from: "default/web-0".parse::<Endpoint>().expect("source"),
        to: to.parse::<Endpoint>().expect("destination"),
        port: None,
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: None,
    }
}

fn main() {
    let runs = 21;
    for example in [
        "examples/flannel-vxlan",
        "examples/flannel-host-gw",
        "examples/flannel-vxlan-partial",
        "examples/calico-bgp",
        "examples/calico-vxlan",
    ] {
        let root = Path::new(example);
        let load = median(runs, || {
            let (snapshot, problems) = Snapshot::load(root).expect("example snapshot");
            assert!(problems.is_empty());
            drop(snapshot);
        });
        let (snapshot, _) = Snapshot::load(root).expect("example snapshot");
        let snapshot = Arc::new(snapshot);
        let (packs, problems) = LoadedPacks::load(builtin_sources(), &[]);
        assert!(problems.is_empty(), "{problems:?}");
        println!("{example}: load snapshot {load:?} (median of {runs})");
        for to in ["default/web-3:8080", "svc/default/web"] {
            let request = request(to);
            let walk = median(runs, || {
                let diagnosis = engine::diagnose(&snapshot, &request, &packs).expect("resolves");
                assert_eq!(diagnosis.disposition(), engine::Disposition::Delivered);
            });
            println!("{example}: diagnose default/web-0 -> {to}: {walk:?} (median of {runs})");
        }
        // What a user waits for: everything the command does, in one go.
        let whole = median(runs, || {
            let (packs, _) = LoadedPacks::load(builtin_sources(), &[]);
            let (snapshot, _) = Snapshot::load(root).expect("example snapshot");
            let snapshot = Arc::new(snapshot);
            engine::diagnose(&snapshot, &request("svc/default/web"), &packs).expect("resolves");
        });
        println!(
            "{example}: load packs + snapshot + diagnose the service: {whole:?} (median of {runs})"
        );
    }
}
