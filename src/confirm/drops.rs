//! The kernel's own word on where packets were dropped during the probe:
//! the `skb:kfree_skb` tracepoint, whose reason (Linux 5.17 and later) says
//! why (`NETFILTER_DROP`, `NO_SOCKET`, `IP_INADDRERRORS`, …) and whose
//! location says in which kernel function.
//!
//! Tracing is the kernel's, not a namespace's: one tracefs instance of its
//! own is armed on each kernel the paths cross (nodes that share a kernel,
//! as the lab's do, by their `boot_id`) before the probe, and read and
//! removed after it. tracefs is mounted in a private mount namespace
//! (`unshare -m`), so nothing is left mounted; the instance is all that
//! exists while the probe runs, with a small buffer. The event carries no
//! addresses: its filter keeps the flow's family, drops with a reason, and
//! (where the kernel has `rx_sk`) packets that never reached a socket, and
//! a drop is said to be the probe's own where it happened in the probe
//! tool's process (`nc`, `ping`), which on a path of veths and bridges is
//! where the whole way runs. Others' drops on a busy node count too.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::counters;
use crate::collect::shell::NodeShell;
use crate::engine::HopId;
use crate::net::Family;

/// Arms the instance `$1` for the family's ethertype `$2`: mounts tracefs
/// privately, makes the instance with a 32 KiB buffer a CPU, filters and
/// enables `skb:kfree_skb`. Says on stderr why not.
const ARM: &str = r#"d=$(mktemp -d) || exit 1
unshare -m sh -c '
mount -t tracefs nodev "$1" 2>/dev/null || { echo "tracefs cannot be mounted (not root, or no CAP_SYS_ADMIN)" >&2; exit 1; }
e="$1/events/skb/kfree_skb"
grep -q "field:enum skb_drop_reason reason" "$e/format" 2>/dev/null || { echo "this kernel has no skb:kfree_skb tracepoint with a drop reason (Linux 5.17 and later have one)" >&2; exit 1; }
i="$1/instances/$2"
mkdir "$i" || exit 1
e="$i/events/skb/kfree_skb"
echo 32 > "$i/buffer_size_kb"
if ! echo "protocol == $3 && reason != 2 && rx_sk == 0" > "$e/filter" 2>/dev/null; then
  echo "protocol == $3 && reason != 2" > "$e/filter" || { rmdir "$i"; exit 1; }
fi
echo 1 > "$e/enable" || { rmdir "$i"; exit 1; }
' sh "$d" "$1" "$2"
r=$?
rmdir "$d"
exit $r"#;

/// Prints the instance `$1`'s events and removes it.
const READ: &str = r#"d=$(mktemp -d) || exit 1
unshare -m sh -c '
mount -t tracefs nodev "$1" || exit 1
i="$1/instances/$2"
grep -v "^#" "$i/trace"
rmdir "$i"
' sh "$d" "$1"
r=$?
rmdir "$d"
exit $r"#;

/// A kernel's tracing, armed: the nodes that share it, and how to reach it.
pub struct Armed {
    nodes: Vec<String>,
    shell: Arc<NodeShell>,
    instance: String,
}

/// Drops of one reason at one kernel function, seen on a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropsSeen {
    /// The nodes whose kernel it is.
    pub nodes: Vec<String>,
    /// The kernel's `enum skb_drop_reason` name: `NETFILTER_DROP`.
    pub reason: String,
    /// The function that freed the packets: `nft_do_chain`, `tcp_v4_rcv`.
    pub function: String,
    pub packets: u64,
    /// How many of them were freed in the probe tool's own process.
    pub in_probe: u64,
}

impl DropsSeen {
    /// `the kernel of node-2 dropped 2 IPv4 packets at nft_do_chain:
    /// NETFILTER_DROP (2 in the probe's own process)`.
    pub fn describe(&self) -> String {
        let plural = if self.packets == 1 { "" } else { "s" };
        let by_probe = match self.in_probe {
            0 => "none in the probe's own process".to_string(),
            n if n == self.packets => "all in the probe's own process".to_string(),
            n => format!("{n} in the probe's own process"),
        };
        format!(
            "the kernel of {} dropped {} packet{plural} at {}: {} ({by_probe})",
            self.nodes.join(", "),
            self.packets,
            self.function,
            self.reason
        )
    }
}

/// Arms tracing on each kernel of `nodes` (each with its shell) for
/// `family`'s packets; the kernels that could not be armed, and why, by
/// node. A kernel is told by its `boot_id`: nodes sharing one share it.
pub async fn arm(
    nodes: &[(String, Arc<NodeShell>)],
    family: Family,
    instance: &str,
) -> (Vec<Armed>, Vec<(HopId, String)>) {
    let mut kernels: Vec<(Option<String>, Vec<String>, Arc<NodeShell>)> = Vec::new();
    for (node, shell) in nodes {
        let boot_id = run(shell, &["cat", "/proc/sys/kernel/random/boot_id"])
            .await
            .ok()
            .map(|id| id.trim().to_string());
        match kernels
            .iter_mut()
            .find(|(id, ..)| id.is_some() && *id == boot_id)
        {
            Some((_, sharing, _)) => sharing.push(node.clone()),
            None => kernels.push((boot_id, vec![node.clone()], shell.clone())),
        }
    }
    let ethertype = match family {
        Family::Ipv4 => "2048",
        Family::Ipv6 => "34525",
    };
    let mut armed = Vec::new();
    let mut failed = Vec::new();
    for (_, nodes, shell) in kernels {
        match run(&shell, &["sh", "-c", ARM, "sh", instance, ethertype]).await {
            Ok(_) => armed.push(Armed {
                nodes,
                shell,
                instance: instance.to_string(),
            }),
            Err(why) => failed.extend(untraced(nodes, &why)),
        }
    }
    (armed, failed)
}

/// Reads and removes each armed kernel's tracing: the drops seen, counted
/// by reason and function; `tool` is the probe's program.
pub async fn read(armed: Vec<Armed>, tool: &str) -> (Vec<DropsSeen>, Vec<(HopId, String)>) {
    let mut seen = Vec::new();
    let mut failed = Vec::new();
    for kernel in armed {
        let argv = ["sh", "-c", READ, "sh", kernel.instance.as_str()];
        match run(&kernel.shell, &argv).await {
            Ok(trace) => seen.extend(drops(&trace, tool).into_iter().map(
                |((reason, function), (packets, in_probe))| DropsSeen {
                    nodes: kernel.nodes.clone(),
                    reason,
                    function,
                    packets,
                    in_probe,
                },
            )),
            Err(why) => failed.extend(untraced(kernel.nodes, &why)),
        }
    }
    (seen, failed)
}

/// The nodes of a kernel that could not be traced, and why, as a
/// confirmation's `unread`.
fn untraced(nodes: Vec<String>, why: &str) -> impl Iterator<Item = (HopId, String)> {
    nodes
        .into_iter()
        .map(move |node| (HopId::node(node), why.to_string()))
}

/// `argv` run on the node's kernel (no namespace entered); its output, or
/// why there is none.
async fn run(shell: &NodeShell, argv: &[&str]) -> Result<String, String> {
    (counters::run(shell, &[], argv).await).map_err(|why| format!("drop tracing: {why}"))
}

/// The trace's `kfree_skb` events counted by (reason, function): how many,
/// and how many in `tool`'s process. A line reads `nc-589 [001] ..s1.
/// 64061.670518: kfree_skb: skbaddr=… protocol=2048
/// location=tcp_v4_rcv+0x99/0x1400 reason: NO_SOCKET`.
fn drops(trace: &str, tool: &str) -> BTreeMap<(String, String), (u64, u64)> {
    let mut counted: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for line in trace.lines() {
        let Some((task, event)) = line.split_once(": kfree_skb: ") else {
            continue;
        };
        let Some((fields, reason)) = event.rsplit_once(" reason: ") else {
            continue;
        };
        let Some(location) = fields
            .split_whitespace()
            .find_map(|field| field.strip_prefix("location="))
        else {
            continue;
        };
        let function = location.split('+').next().unwrap_or(location);
        // The task is `COMM-PID` before the CPU, and COMM may hold spaces
        // and dashes.
        let comm = task
            .trim_start()
            .split(" [")
            .next()
            .and_then(|task| task.rsplit_once('-'))
            .map(|(comm, _pid)| comm.trim());
        let entry = counted
            .entry((reason.trim().to_string(), function.to_string()))
            .or_default();
        entry.0 += 1;
        if comm == Some(tool) {
            entry.1 += 1;
        }
    }
    counted
}

#[cfg(test)]
mod tests {
    use super::*;

    // As Linux 6.18 prints them (a lab run: a DROP rule, then a connect to
    // a closed port, among others' traffic).
    const TRACE: &str = "            ping-583     [001] ..... 64060.666819: kfree_skb: skbaddr=000000001465d1f3 rx_sk=0000000000000000 protocol=2048 location=nft_do_chain+0x46f/0x690 reason: NETFILTER_DROP
            ping-583     [001] ..s1. 64060.866819: kfree_skb: skbaddr=000000001465d1f4 rx_sk=0000000000000000 protocol=2048 location=nft_do_chain+0x46f/0x690 reason: NETFILTER_DROP
 kube-apiserver-32266   [000] ..s1. 64053.695467: kfree_skb: skbaddr=00000000c61d174e rx_sk=0000000000000000 protocol=2048 location=nft_do_chain+0x46f/0x690 reason: NETFILTER_DROP
              nc-589     [001] ..s1. 64061.670518: kfree_skb: skbaddr=0000000016393fc8 rx_sk=0000000000000000 protocol=2048 location=tcp_v4_rcv+0x99/0x1400 reason: NO_SOCKET
";

    #[test]
    fn drops_are_counted_by_reason_and_function_and_told_apart_by_process() {
        let counted = drops(TRACE, "ping");
        let key = |reason: &str, function: &str| (reason.to_string(), function.to_string());
        assert_eq!(
            counted.get(&key("NETFILTER_DROP", "nft_do_chain")),
            Some(&(3, 2))
        );
        assert_eq!(counted.get(&key("NO_SOCKET", "tcp_v4_rcv")), Some(&(1, 0)));
        assert_eq!(counted.len(), 2);
        assert_eq!(drops("# tracer: nop\n#\n", "nc"), BTreeMap::new());
    }

    #[test]
    fn a_drop_says_where_whose_and_why() {
        let seen = DropsSeen {
            nodes: vec!["node-1".into(), "node-2".into()],
            reason: "NETFILTER_DROP".into(),
            function: "nft_do_chain".into(),
            packets: 3,
            in_probe: 2,
        };
        assert_eq!(
            seen.describe(),
            "the kernel of node-1, node-2 dropped 3 packets at nft_do_chain: NETFILTER_DROP (2 in the probe's own process)"
        );
    }
}
