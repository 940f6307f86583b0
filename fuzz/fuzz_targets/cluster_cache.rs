//! Damages a valid cluster cache and reads it back: reading may give a
//! model (a value changed) or say why the cache was passed over, but must
//! never panic, hang or run out of memory. A model read is read in place,
//! its objects decoded when asked for: every lookup a flow makes is asked
//! of it, then every object (its `Debug`, which decodes the whole).
//!
//! A cache is only read past its header when its stamps match `cluster/`,
//! which random bytes never do; so the input edits a real cache instead,
//! written once for a small snapshot of the repository's example objects:
//! its first 4 bytes say where the cache is cut (little-endian; past its
//! end, it is whole), the next 4 where the rest of the input is XORed into
//! it. The cache's checksum (after its version, `cache::framed`) is then
//! made anew over the damaged rest, as a forger would, so that the header
//! and model decoders behind it are fuzzed; a stale checksum is caught
//! before them (tests/cluster_cache.rs flips every byte). The snapshot is
//! kept under fuzz/target/, made anew by each run.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use skoop::snapshot::cluster::{Budget, cache};
use skoop::snapshot::input::Boundary;

/// The snapshot, and its cache as written.
fn snapshot() -> &'static (PathBuf, Vec<u8>) {
    static SNAPSHOT: OnceLock<(PathBuf, Vec<u8>)> = OnceLock::new();
    SNAPSHOT.get_or_init(|| {
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/cluster_cache"));
        let cluster = root.join("cluster");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&cluster).expect("the snapshot's directory");
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/calico-vxlan/cluster");
        for entry in std::fs::read_dir(example).expect("the example's objects") {
            let entry = entry.expect("an entry");
            std::fs::copy(entry.path(), cluster.join(entry.file_name())).expect("a copy");
        }
        cache::write(&root, &Boundary::new(&root), Budget::default()).expect("the cache is written");
        let bytes = std::fs::read(root.join(cache::FILE_NAME)).expect("the cache");
        (root, bytes)
    })
}

fn word(bytes: &[u8]) -> usize {
    let mut word = [0; 4];
    word[..bytes.len()].copy_from_slice(bytes);
    u32::from_le_bytes(word) as usize
}

fuzz_target!(|data: &[u8]| {
    let (root, good) = snapshot();
    let body = &good[cache::FRAME..];
    let cut = word(&data[..data.len().min(4)]).min(body.len());
    let at = word(&data[data.len().min(4)..data.len().min(8)]);
    let mut damaged = body[..cut].to_vec();
    for (i, byte) in data.iter().skip(8).enumerate() {
        if let Some(target) = damaged.get_mut((at + i) % cut.max(1)) {
            *target ^= byte;
        }
    }
    let framed = cache::framed(&damaged);
    std::fs::write(root.join(cache::FILE_NAME), framed).expect("the cache is written");
    let Ok(Some((cluster, _))) = cache::read(root, &Boundary::new(root)) else {
        return;
    };
    let address = "10.244.60.64".parse().expect("an address");
    let _ = cluster.pod("default", "web-0");
    let _ = cluster.node("node-1");
    let _ = cluster.pod_at(address);
    let _ = cluster.pods_on("node-1").count();
    let _ = cluster.pods_in("10.244.0.0/16".parse().expect("a CIDR"));
    let _ = cluster.pods_labelled("app", "web");
    let _ = cluster.nodes_with_pod_cidr(address, &["projectcalico.org/IPv4Address".into()]);
    let _ = cluster.node_annotated("projectcalico.org/IPv4Address");
    let _ = cluster.objects("crd.projectcalico.org/v1", "IPAMBlock").count();
    let _ = cluster.has_objects_of("IPPool", None);
    let _ = cluster.ip_conflicts();
    if let Some(service) = cluster.service("default", "web") {
        let _ = cluster.endpoint_slices_for(service).count();
        if let Some(selector) = &service.selector {
            let _ = cluster.pods_matching("default", selector).count();
        }
    }
    let _ = cluster.network_policies_in("default").count();
    let _ = format!("{cluster:?}");
});
