//! Netfilter at kube-proxy scale: a generated `iptables-save` of a node with
//! 10,000 services (about 150,000 rules), parsed whole side by side with
//! `iptables-restore --test`, then read as a diagnosis reads it (the
//! structure, then the chains one packet meets), then packets evaluated
//! through it, with the memory the parsed and indexed rules take counted by
//! the allocator.
//!
//! Run with `cargo bench --bench netfilter` (as root, for the
//! `iptables-restore` comparison; without it that line says why it is missing).
//! Figures are reported in docs/performance.md.

#[path = "common/rulesets.rs"]
mod rulesets;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rulesets::{RUNS, best, mib};

use skoop::netstack::netfilter::{Context, Netfilter, Packet, PacketPath, Verdict};
use skoop::snapshot::netns::iptables::{self, Protocol, generate::kube_proxy_dump};

/// Counts the bytes live on the heap, and the most there ever were.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes straight to the system allocator; the counters
// only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SERVICES: usize = 10_000;
const ENDPOINTS: usize = 4;

/// `iptables-restore --test` on the file, in a namespace of its own so that
/// nothing on this machine is touched; `Err` says why it could not run.
fn iptables_restore_test(path: &std::path::Path) -> Result<Duration, String> {
    let mut fastest = Duration::MAX;
    for _ in 0..RUNS {
        let start = Instant::now();
        let output = Command::new("unshare")
            .args(["--net", "iptables-restore", "--test"])
            .arg(path)
            .output()
            .map_err(|e| format!("cannot run unshare/iptables-restore: {e}"))?;
        let elapsed = start.elapsed();
        if !output.status.success() {
            return Err(format!(
                "iptables-restore --test failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        fastest = fastest.min(elapsed);
    }
    Ok(fastest)
}

/// The ClusterIP and port of service `index`, as the generator assigns them.
fn service(index: usize) -> (IpAddr, Protocol, u16) {
    let ip = Ipv4Addr::from(0x0a60_0000 + index as u32 + 1);
    if index % 10 == 9 {
        (ip.into(), Protocol::Udp, 53)
    } else {
        (ip.into(), Protocol::Tcp, 80)
    }
}

fn main() {
    let text = kube_proxy_dump(SERVICES, ENDPOINTS);
    let rules = text.lines().filter(|l| l.starts_with("-A ")).count();
    println!(
        "generated dump: {SERVICES} services x {ENDPOINTS} endpoints, {rules} rules, {:.1} MiB",
        mib(text.len())
    );
    let dir = std::env::temp_dir().join(format!("skoop-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    let path = dir.join("iptables-save.txt");
    std::fs::write(&path, &text).expect("write dump");

    // Parsing, side by side.
    let (parse_time, (ruleset, issues)) = best(|| iptables::parse(&text));
    let ruleset = ruleset.expect("the generated dump parses");
    assert!(issues.is_empty(), "generated dump has issues: {issues:?}");
    println!(
        "skoop parse:                 {:>9.1} ms",
        parse_time.as_secs_f64() * 1e3
    );
    match iptables_restore_test(&path) {
        Ok(restore) => println!(
            "iptables-restore --test:     {:>9.1} ms  (skoop is {:.1}x faster)",
            restore.as_secs_f64() * 1e3,
            restore.as_secs_f64() / parse_time.as_secs_f64()
        ),
        Err(why) => println!("iptables-restore --test:     not measured: {why}"),
    }
    drop(ruleset);
    let _ = std::fs::remove_dir_all(&dir);

    // As a diagnosis reads it: the structure, then one ClusterIP packet,
    // which reads the chains it meets. Each run has its own copy of the
    // text, made before the clock starts (a diagnosis reads the file into it).
    let node: IpAddr = Ipv4Addr::new(172, 18, 0, 11).into();
    let locals = [node];
    let context = Context {
        local_addresses: &locals,
        ..Context::default()
    };
    let client: IpAddr = Ipv4Addr::new(192, 168, 1, 10).into();
    let packet_to = |dst: IpAddr, proto: Protocol, dport: u16| {
        let mut packet = Packet::new(client, dst, proto);
        packet.ip.dport = Some(dport);
        packet.in_iface = Some("eth0".into());
        packet.out_iface = Some("cni0".into());
        packet
    };
    let (first_ip, first_proto, first_port) = service(4242);
    let (mut structure, mut first_packet) = (Duration::MAX, Duration::MAX);
    for _ in 0..RUNS {
        let own = text.clone();
        let start = Instant::now();
        let (ruleset, issues) = iptables::parse_structure(own.into());
        structure = structure.min(start.elapsed());
        assert!(issues.is_empty(), "generated dump has issues: {issues:?}");
        let ruleset = ruleset.expect("the generated dump parses");
        let start = Instant::now();
        let netfilter = Netfilter::new(&ruleset, None);
        let packet = packet_to(first_ip, first_proto, first_port);
        let outcomes = netfilter.traverse(PacketPath::Received, packet, &context);
        first_packet = first_packet.min(start.elapsed());
        assert_eq!(outcomes.len(), ENDPOINTS);
    }
    println!(
        "skoop structure only:        {:>9.1} ms",
        structure.as_secs_f64() * 1e3
    );
    println!(
        "then the first packet:       {:>9.1} ms  (reads and indexes the chains it meets)",
        first_packet.as_secs_f64() * 1e3
    );
    let own = text.clone();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let (ruleset, _) = iptables::parse_structure(own.into());
    let ruleset = ruleset.expect("the generated dump parses");
    let scanned = LIVE.load(Ordering::Relaxed) - before;
    let netfilter = Netfilter::new(&ruleset, None);
    let packet = packet_to(first_ip, first_proto, first_port);
    black_box(netfilter.traverse(PacketPath::Received, packet, &context));
    let met = LIVE.load(Ordering::Relaxed) - before;
    println!(
        "memory: structure beside the text {:.1} MiB ({:.2}x the file), after the first packet {:.1} MiB ({:.2}x)",
        mib(scanned),
        scanned as f64 / text.len() as f64,
        mib(met),
        met as f64 / text.len() as f64
    );
    drop(netfilter);
    drop(ruleset);

    // Memory: what the whole parsed ruleset and its indexes keep (each
    // chain's built as a packet meets it: here by every packet below), and
    // the peak while building them.
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let (ruleset, _) = iptables::parse(&text);
    let ruleset = ruleset.expect("the generated dump parses");
    let parsed = LIVE.load(Ordering::Relaxed) - before;
    let netfilter = Netfilter::new(&ruleset, None);

    // Evaluation: a received packet from outside the cluster to a ClusterIP,
    // through PREROUTING, the routing decision, FORWARD and POSTROUTING.
    let packets: Vec<Packet> = (0..SERVICES)
        .map(|i| {
            let (ip, proto, port) = service((i * 7919) % SERVICES);
            packet_to(ip, proto, port)
        })
        .collect();
    // Check the work is real: every service packet is DNATed to an endpoint.
    let outcomes = netfilter.traverse(PacketPath::Received, packets[0].clone(), &context);
    assert_eq!(outcomes.len(), ENDPOINTS);
    assert!(
        outcomes
            .iter()
            .all(|o| o.verdict == Verdict::Accept && o.dnat().is_some() && o.masquerade())
    );

    let report = |name: &str, packets: &[Packet]| {
        let (time, _) = best(|| {
            for packet in packets {
                black_box(netfilter.traverse(PacketPath::Received, packet.clone(), &context));
            }
        });
        println!(
            "evaluate {name:<34} {:>7.2} µs per packet",
            time.as_secs_f64() * 1e6 / packets.len() as f64
        );
    };
    report("ClusterIP (4 endpoint branches):", &packets);
    let node_ports: Vec<Packet> = (0..2768)
        .map(|i| packet_to(node, Protocol::Tcp, 30000 + i as u16))
        .collect();
    report("NodePort on the node address:", &node_ports);
    let misses: Vec<Packet> = (0..1000)
        .map(|i| {
            packet_to(
                Ipv4Addr::new(10, 200, 0, i as u8).into(),
                Protocol::Tcp,
                443,
            )
        })
        .collect();
    report("no service (passes every chain):", &misses);
    let indexed = LIVE.load(Ordering::Relaxed) - before;
    let peak = PEAK.load(Ordering::Relaxed) - before;
    println!(
        "memory: whole ruleset {:.1} MiB, with the indexes of every chain met {:.1} MiB ({:.2}x the file), peak {:.1} MiB ({:.2}x)",
        mib(parsed),
        mib(indexed),
        indexed as f64 / text.len() as f64,
        mib(peak),
        peak as f64 / text.len() as f64
    );
}
