//! The engine's finding ids: one constant per id, with the severity it is
//! reported with and what it means. A stage names its finding by constant,
//! so a misspelt id is a compile error; `docs/findings.md` is generated from
//! this list ([`markdown`]), and `tests/finding_catalogue.rs` holds the page
//! to it. The packs' ids are their own (each pack's README lists them).
//!
//! A stop's severity is the id's: `fatal`, or `warning` for the ids that end
//! a path as `insufficient_info` (the snapshot cannot tell).

use crate::diagnostic::{FindingCode, Severity};

/// Declares the catalogue: a `FindingCode` constant per entry, and [`ALL`]
/// in the order given, sections by the ids' first word.
macro_rules! catalogue {
    ($($name:ident = $id:literal, $severity:ident, $summary:literal;)*) => {
        $(
            #[doc = $summary]
            pub const $name: FindingCode = FindingCode {
                id: $id,
                severity: Severity::$severity,
                summary: $summary,
            };
        )*
        /// Every id of the catalogue, in the documentation's order.
        pub const ALL: &[FindingCode] = &[$($name),*];
    };
}

catalogue! {
    // kernel.*: what the namespace's kernel does
    KERNEL_ROUTE_NONE = "kernel.route.none", Fatal,
        "no route to the destination (`no_route`)";
    KERNEL_ROUTE_MARTIAN = "kernel.route.martian", Fatal,
        "the packet's source is martian to input routing (`no_route`)";
    KERNEL_ROUTE_NO_SOURCE = "kernel.route.no-source", Fatal,
        "routed, but the namespace has no address to send from by that device (`no_route`)";
    KERNEL_ROUTE_UNREACHABLE = "kernel.route.unreachable", Fatal,
        "an `unreachable` route or rule (`unreachable_route`)";
    KERNEL_ROUTE_PROHIBIT = "kernel.route.prohibit", Fatal,
        "a `prohibit` route or rule (`unreachable_route`)";
    KERNEL_ROUTE_BLACKHOLE = "kernel.route.blackhole", Fatal,
        "a `blackhole` route or rule (`unreachable_route`)";
    KERNEL_ROUTE_UNKNOWN = "kernel.route.unknown", Warning,
        "the route lookup cannot be concluded from the dump (`insufficient_info`)";
    KERNEL_ROUTE_LEAVES_CLUSTER = "kernel.route.leaves-cluster", Fatal,
        "the packet for a pod or node of the cluster leaves by a device to a next hop no node or pod holds (for a pod's address sent to a router, the CNI pack says why the routers do not carry it, or that nobody says whether they do: then beside `engine.underlay.pod-routes-unknown`)";
    KERNEL_NETFILTER_DENIED = "kernel.netfilter.denied", Fatal,
        "a rule or chain policy drops or rejects the packet (`denied_by_netfilter`), with its line";
    KERNEL_NETFILTER_UNKNOWN = "kernel.netfilter.unknown", Warning,
        "a rule's match or target cannot be evaluated, or a chain the packet meets holds a rule line that could not be read, cited at its line (`insufficient_info`)";
    KERNEL_NETFILTER_SERVICE_UNTRANSLATED = "kernel.netfilter.service-untranslated", Fatal,
        "the packet for a service address leaves untranslated: no rule DNATed it";
    KERNEL_IPVS_NO_REAL_SERVER = "kernel.ipvs.no-real-server", Fatal,
        "an IPVS virtual service without a real server with a weight (`no_listener`)";
    KERNEL_IPVS_UNKNOWN = "kernel.ipvs.unknown", Warning,
        "IPVS's choice cannot be concluded (`insufficient_info`)";
    KERNEL_SYSCTL_FORWARDING = "kernel.sysctl.forwarding", Fatal,
        "forwarding is off on the interface the packet came in by (`forwarding_disabled`)";
    KERNEL_SYSCTL_RP_FILTER = "kernel.sysctl.rp_filter", Fatal,
        "reverse-path filtering drops the packet (`rp_filter`)";
    KERNEL_SYSCTL_ICMP_ECHO_IGNORE_ALL = "kernel.sysctl.icmp_echo_ignore_all", Fatal,
        "the kernel ignores echo requests (`no_listener`)";
    KERNEL_SOCKET_NO_LISTENER = "kernel.socket.no-listener", Fatal,
        "nothing listens on the port (`no_listener`)";
    KERNEL_SOCKET_UNKNOWN = "kernel.socket.unknown", Warning,
        "`ss.txt` cannot tell whether anything listens on the SCTP port: it lists no SCTP socket at all (a dump of `ss -H -tuln` never does), or an SCTP endpoint on the port shows another of its addresses (`insufficient_info`)";
    KERNEL_DEVICE_DOWN = "kernel.device.down", Fatal,
        "a device the packet must cross is down or without carrier (`neighbor_failed`)";
    KERNEL_NEIGHBOUR_MISSING = "kernel.neighbour.missing", Fatal,
        "no usable neighbour entry for a VXLAN next hop (`neighbor_failed`)";
    KERNEL_NEIGHBOUR_UNANSWERED = "kernel.neighbour.unanswered", Fatal,
        "nobody answers ARP for the next hop, by proxy or not: the holder is not on the link, or stays silent under `arp_ignore`, `arp_filter` or rp_filter (`neighbor_failed`)";
    KERNEL_NEIGHBOUR_UNKNOWN = "kernel.neighbour.unknown", Warning,
        "whether a neighbour answers by proxy depends on what the dump does not hold: IPv6 proxy entries (`ip -j neigh show proxy`, `ip-neigh-proxy.json`) under `proxy_ndp` (`insufficient_info`)";
    KERNEL_NEIGHBOUR_PERMANENT = "kernel.neighbour.permanent", Fatal,
        "a permanent neighbour entry sends the frame to a MAC address no interface on the segment has (`neighbor_failed`)";
    KERNEL_FDB_MISSING = "kernel.fdb.missing", Fatal,
        "no FDB entry gives the remote VTEP of a MAC (`neighbor_failed`)";
    KERNEL_VXLAN_NO_DEVICE = "kernel.vxlan.no-device", Fatal,
        "no VXLAN device that is up takes the VNI and UDP port at the VTEP (`no_listener`)";
    KERNEL_VXLAN_MAC_MISMATCH = "kernel.vxlan.mac-mismatch", Fatal,
        "the tunnelled frame is for another MAC than the receiving VXLAN device's (`neighbor_failed`)";
    KERNEL_VXLAN_UNKNOWN = "kernel.vxlan.unknown", Warning,
        "a VXLAN device's `df` is a word skoop does not know (`insufficient_info`)";
    KERNEL_IPIP_NO_DEVICE = "kernel.ipip.no-device", Fatal,
        "no IPIP device that is up takes the tunnelled packet (`no_listener`)";
    KERNEL_MTU_EXCEEDED = "kernel.mtu.exceeded", Fatal,
        "a packet with DF larger than a device it must leave by (`mtu_exceeded`)";
    KERNEL_MTU_FRAME_DROPPED = "kernel.mtu.frame-dropped", Fatal,
        "a frame longer than a veth or bridge port takes (`mtu_exceeded`)";
    KERNEL_MTU_FRAGMENTED = "kernel.mtu.fragmented", Warning,
        "a packet without DF is fragmented to leave by a device";
    KERNEL_MTU_PATH = "kernel.mtu.path", Warning,
        "full-size packets do not fit the path, and the sender is told (or may be)";
    KERNEL_MTU_BLACK_HOLE = "kernel.mtu.black-hole", Critical,
        "full-size packets vanish on the path, and nothing tells the sender";
    // engine.*: what the walker itself concludes
    ENGINE_LOOP = "engine.loop", Fatal,
        "the packet comes back to a namespace as it was (`loop`)";
    ENGINE_TOO_MANY_PATHS = "engine.too-many-paths", Warning,
        "the diagnosis followed 4,096 paths (its bound, `docs/limits.md`) and stops the rest where they meet netfilter (`insufficient_info`)";
    ENGINE_REPLY_MISDELIVERED = "engine.reply.misdelivered", Fatal,
        "the reply reaches another socket or comes from another address than the connection's (`no_listener`)";
    ENGINE_ROUTE_MISSING = "engine.route.missing", Warning,
        "netfilter reported no routing decision for the packet (`insufficient_info`)";
    ENGINE_BRIDGE_BRANCHES = "engine.bridge.branches", Warning,
        "bridged traffic splits into several netfilter branches, which is not modelled (`insufficient_info`)";
    // datapath.*: programs attached to devices
    DATAPATH_DROP = "datapath.drop", Fatal,
        "a BPF program attached to a device drops the packet, as the pack that claims it says why (`dropped_by_program`)";
    DATAPATH_UNCLAIMED = "datapath.unclaimed", Warning,
        "a BPF program attached to a device sees the packet and no pack claims it: what it does is unknown (`insufficient_info`)";
    DATAPATH_UNKNOWN = "datapath.unknown", Warning,
        "which programs see the packet, or where a program sends it, cannot be told from the snapshot (`insufficient_info`)";
    ENGINE_HOOK_UNDECIDED = "engine.hook.undecided", Warning,
        "a CNI pack's hook failed or answered outside its contract at an assumed hop, or its `underlay` hook at a node sending to a router (`insufficient_info`)";
    ENGINE_INTENT_UNREACHABLE = "engine.intent.unreachable", Warning,
        "the CNI's intent sends the packet to something not reached directly from an assumed hop (`insufficient_info`)";
    ENGINE_TUNNEL_UNMODELLED = "engine.tunnel.unmodelled", Warning,
        "the CNI's intent tunnels in a way the walker does not follow (`insufficient_info`)";
    ENGINE_UNDERLAY_ROUTED = "engine.underlay.routed", Info,
        "a node sends the packet to a gateway nothing in the snapshot holds, and the routers beyond it are assumed to carry it to the node holding its destination (an `underlay_routed` link): their TTL decrements and the path MTU beyond the gateway are not known (`docs/diagnose.md`, \"Nodes behind routers\")";
    ENGINE_UNDERLAY_POD_ROUTES_UNKNOWN = "engine.underlay.pod-routes-unknown", Warning,
        "a node sends a pod's address unencapsulated to such a gateway, and no CNI pack says whether the routers route pod addresses (`insufficient_info`, with the route's `kernel.route.leaves-cluster`); where the pack says they do not, the packet leaves the cluster (`kernel.route.leaves-cluster`, with the pack's reason)";
    // snapshot.*: what the snapshot holds or lacks
    SNAPSHOT_MISSING = "snapshot.missing", Warning,
        "a dump file, a namespace's dump, or an answer only a dump could give is missing (`insufficient_info`)";
    SNAPSHOT_UNREADABLE = "snapshot.unreadable", Warning,
        "a dump file the walk needs is in the snapshot but could not be read or parsed, was read with problems (none of it is used), or says what no kernel reports (a veth that is its own peer); the message says why (`insufficient_info`)";
    SNAPSHOT_ASSUMED = "snapshot.assumed", Info,
        "a namespace the snapshot lacks is stepped over with the CNI pack's intent, named";
    // kubernetes.*: what the cluster's objects say
    KUBERNETES_SERVICE_NO_BACKEND = "kubernetes.service.no-backend", Fatal,
        "at an assumed node, the service proxy's intent has no backend for the service (`no_listener`)";
}

/// The sections of the page, by the ids' first word, each with its heading.
const SECTIONS: [(&str, &str); 5] = [
    ("kernel", "what the namespace's kernel does"),
    (
        "datapath",
        "what a BPF program attached to a device does, as the pack that claims it says",
    ),
    ("engine", "what the walker itself concludes"),
    ("snapshot", "what the snapshot holds or lacks"),
    ("kubernetes", "what the cluster's objects say"),
];

const PREAMBLE: &str = "\
# The engine's findings

<!-- Generated from src/engine/codes.rs by `SKOOP_BLESS=1 cargo test --test finding_catalogue`: edit that file, not this page. -->

`skoop diagnose` reports two kinds of findings: those of the rule packs (`flannel.*`,
`calico.*`, `core.*`, `kube-proxy.*`, `networkpolicy.*`, listed in each pack's README) and the
engine's own, listed here. An id is stable: scripts may match on it. Each id is a constant of
`src/engine/codes.rs`, the one list the engine names its findings from and this page is
generated from.

Severities: a stop is `fatal` (or `warning` when the path ends as `insufficient_info`: the
snapshot cannot tell); what does not stop the path is `info`, `warning` or `critical` as given.
";

/// `docs/findings.md`: every id of the catalogue, by section, with its
/// severity and meaning; each row anchored by its id
/// (`docs/findings.md#kernel.route.none`).
pub fn markdown() -> String {
    let mut page = PREAMBLE.to_owned();
    for (prefix, heading) in SECTIONS {
        page.push_str(&format!(
            "\n## `{prefix}.*` — {heading}\n\n| id | severity | what |\n|---|---|---|\n"
        ));
        for code in ALL
            .iter()
            .filter(|code| code.id.split('.').next() == Some(prefix))
        {
            page.push_str(&format!(
                "| <a id=\"{id}\"></a>`{id}` | {} | {} |\n",
                code.severity,
                code.summary,
                id = code.id
            ));
        }
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_each_in_a_section() {
        let mut ids: Vec<&str> = ALL.iter().map(|code| code.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ALL.len(), "an id is declared twice");
        for code in ALL {
            let prefix = code.id.split('.').next();
            assert!(
                SECTIONS.iter().any(|(section, _)| Some(*section) == prefix),
                "{} is in no section",
                code.id
            );
        }
    }
}
