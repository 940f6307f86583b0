//! The hooks the engine calls: the interface between the engine and a CNI
//! pack's scripts.
//!
//! Each hook is a Rhai function of the pack, named in `hooks:` of its
//! manifest. `detect` and `mode` take `(ctx)` with the pack's own context
//! (`ctx.params`, `ctx.cluster`): `detect` tells a CNI that runs from one
//! that only left its signs, and `mode` picks the active mode before
//! anything is evaluated;
//! the walker's hooks take `(ctx, ARG)`, where `ctx` is the hop's [`Context`]
//! (with `ctx.hop`, `ctx.params`, `ctx.cluster`). Existence and arity are
//! checked when the pack loads.
//!
//! [`Context`]: super::scope::Context

/// A hook the engine calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookSpec {
    pub name: &'static str,
    /// Parameter names, `ctx` first; the arity is their count.
    pub params: &'static [&'static str],
    /// What the hook returns, for `skoop packs show` and the docs.
    pub returns: &'static str,
    pub doc: &'static str,
}

impl HookSpec {
    pub fn arity(&self) -> usize {
        self.params.len()
    }

    pub fn find(name: &str) -> Option<&'static HookSpec> {
        HOOKS.iter().find(|hook| hook.name == name)
    }
}

/// Every hook: the pack's own (`detect`, `mode`) first, then the walker's
/// in the order it meets them at a hop.
pub const HOOKS: &[HookSpec] = &[
    HookSpec {
        name: "detect",
        params: &["ctx"],
        returns: "() or true when the CNI the signs name runs; false, or a String saying why, when it does not (the pack then does not apply)",
        doc: "Asked only where the manifest's detect: signs are found: whether the CNI they name is the one running, read from its own configuration (a k3s server started with --flannel-backend none runs another CNI beside k3s's annotations).",
    },
    HookSpec {
        name: "mode",
        params: &["ctx"],
        returns: "the name of one of the pack's modes, or () to leave the choice to the modes' `when`",
        doc: "The active mode, read from the CNI's own configuration in the cluster (a ConfigMap, annotations).",
    },
    HookSpec {
        name: "next_hop",
        params: &["ctx", "packet"],
        returns: "() for no opinion, or #{kind: \"node-routes\"} (the node's own routes take it), #{kind: \"peer-node\", node: String, dev: String or (), via: Ip or () (the peer's InternalIP)}, #{kind: \"device\", dev: String or () (when only the namespace's own dump could name it), via: Ip or ()} or #{kind: \"encapsulated\", dev: String or ()} (the encapsulation hook says how); the older #{dev, via} without kind is a device",
        doc: "Where the CNI intends the packet to go from this hop.",
    },
    HookSpec {
        name: "encapsulation",
        params: &["ctx", "packet"],
        returns: "() when not encapsulated, or #{kind: \"vxlan\"|\"ipip\", dev: String, outer_src: Ip, outer_dst: Ip, port: int or (), vni: int or (), overhead: int, mac: String or () (the remote tunnel device's MAC)}",
        doc: "Whether and how the CNI encapsulates the packet leaving this hop.",
    },
    HookSpec {
        name: "service",
        params: &["ctx", "packet"],
        returns: "() when the destination is no service address; else #{service: \"NS/NAME\", port: String or (), backends: [#{ip: Ip, port: int, pod: \"NS/NAME\" or (), node: String or (), masquerade: bool or ()}], why: String}",
        doc: "The service translation a proxy intends for the packet at this hop, for hops without netfilter rules in the snapshot; no backends means the proxy rejects or drops it, `why` says which.",
    },
    HookSpec {
        name: "masquerade",
        params: &["ctx", "packet"],
        returns: "bool: the CNI source-NATs this packet to the node's address",
        doc: "The CNI's masquerade decision for the packet at this hop.",
    },
    HookSpec {
        name: "underlay",
        params: &["ctx", "packet"],
        returns: "() for no opinion, or #{routes_pods: bool, why: String}",
        doc: "Whether the routers beyond a node's gateway (not in the snapshot) route the packet's pod address to the pod's node, as a node sends it unencapsulated.",
    },
    HookSpec {
        name: "datapath",
        params: &["ctx", "program"],
        returns: "() when the pack does not claim the program; else #{verdict: \"pass\" (to the kernel's stack), \"drop\", \"redirect\", \"encapsulate\" or \"translate\", why: String, evidence: [#{file: String (in the namespace's dump: `datapath/NAME.json`), key: String or () (the entry: its place is cited), note: String or ()}] or ()}; drop adds id: String (the pack's reason id); redirect adds dev: String and to: \"egress\" (sent by dev), \"peer\" (into the ingress of dev's veth peer) or \"ingress\" (into dev's own ingress); encapsulate adds dev: String (a collect-metadata tunnel device), remote: Ip, vni: int or (); translate adds service: String and backends: [#{ip: Ip, port: int, snat: Ip or () (the source it gives the packet: a pod reaching itself)}], after which the program is asked again with each backend's packet",
        doc: "What a BPF program attached to a device (`program`: #{dev, ifindex, hook, direction, name, id}, as `Netns.programs()` lists it) does with the packet (`ctx.hop.packet`) there. The engine asks every pack with this hook in load order; the first that does not answer () claims the program.",
    },
    HookSpec {
        name: "pod_interface",
        params: &["ctx", "pod"],
        returns: "#{kind: \"routed\"|\"bridged\", bridge: String (bridged only), host_veth: String or (), pod_dev: String or (), mtu: int or ()}; a field () where the CNI cannot tell (a veth named at random)",
        doc: "The veth pair and MTU the CNI gives a pod, and how the node's end is attached: routed (a route to the pod on the veth itself, no bridge) or a port of a bridge.",
    },
];
