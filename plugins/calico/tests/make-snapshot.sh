#!/usr/bin/env bash
# Builds a two-node Calico cluster out of network namespaces, checks with
# ping that pods reach each other, and collects its snapshot with
# `skoop collect local` into OUT (real tool output for the pack's tests).
#
#   plugins/calico/tests/make-snapshot.sh vxlan|bgp OUT     (as root, from the repository root)
#
# What calico-node and the Calico CNI plugin would program, by hand:
# pods on cali+sha1(NS.NAME)[:11] veths with proxy_arp, a /32 route per
# local pod, 169.254.1.1 as the pods' gateway; blocks 10.244.1.0/26 (node-1)
# and 10.244.2.0/26 (node-2) of the pool 10.244.0.0/16 (natOutgoing), each
# node's own block blackholed; vxlan: vxlan.calico (VNI 4096, UDP 4789, MTU
# 1450, the block's first address) with a permanent neighbour and FDB entry
# per remote VTEP and routes via the VTEP onlink (proto 80, as felix); bgp:
# routes via the peer's address on eth0, proto bird. felix's cali-FORWARD and
# cali-nat-outgoing (ipsets cali40masq-ipam-pools, cali40all-ipam-pools), and
# kube-proxy's rules for default/web copied from examples/flannel-vxlan, whose
# pods, service and endpoint slices (same names and addresses) are reused.
#
# Namespaces are named skcal-<6 hex digits>-<role> and always deleted on exit.
set -euo pipefail

mode=${1:?vxlan or bgp}
out=${2:?output directory}
case $mode in vxlan|bgp) ;; *) echo "mode must be vxlan or bgp" >&2; exit 2 ;; esac
skoop=${SKOOP:-target/debug/skoop}
example=examples/flannel-vxlan
prefix=skcal-$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')

namespaces=()
listeners=()
cleanup() {
    for pid in "${listeners[@]}"; do kill "$pid" 2>/dev/null || true; done
    for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT

netns() { local ns=$prefix-$1; ip netns add "$ns"; namespaces+=("$ns"); ip -n "$ns" link set lo up; }
in_ns() { local ns=$prefix-$1; shift; ip netns exec "$ns" "$@"; }
veth_of() { printf 'cali%s' "$(printf '%s' "$1.$2" | sha1sum | cut -c1-11)"; }

host_mtu=1500
if [ "$mode" = vxlan ]; then pod_mtu=1450; proto=80; else pod_mtu=1500; proto=bird; fi

# --- the underlay -------------------------------------------------------------
netns underlay
ip -n "$prefix-underlay" link add br0 type bridge
ip -n "$prefix-underlay" addr add 172.18.0.1/24 dev br0
ip -n "$prefix-underlay" link set br0 up

declare -A node_ip=([node-1]=172.18.0.11 [node-2]=172.18.0.12)
declare -A node_block=([node-1]=10.244.1.0/26 [node-2]=10.244.2.0/26)
declare -A node_vtep=([node-1]=10.244.1.0 [node-2]=10.244.2.0)
declare -A node_mac=([node-1]=66:2e:4a:01:00:01 [node-2]=66:2e:4a:02:00:02)
declare -A pod_node=([web-0]=node-1 [web-1]=node-1 [web-2]=node-2 [web-3]=node-2)
declare -A pod_ip=([web-0]=10.244.1.2 [web-1]=10.244.1.3 [web-2]=10.244.2.2 [web-3]=10.244.2.3)

for node in node-1 node-2; do
    netns "$node"
    ns=$prefix-$node
    ip -n "$prefix-underlay" link add "$node" type veth peer name eth0 netns "$ns"
    ip -n "$prefix-underlay" link set "$node" master br0 up
    ip -n "$ns" addr add "${node_ip[$node]}/24" dev eth0
    ip -n "$ns" link set eth0 mtu $host_mtu up
    ip -n "$ns" route add default via 172.18.0.1 dev eth0
    in_ns "$node" sysctl -qw net.ipv4.ip_forward=1
    ip -n "$ns" route add blackhole "${node_block[$node]}" proto $proto
    if [ "$mode" = vxlan ]; then
        ip -n "$ns" link add vxlan.calico address "${node_mac[$node]}" type vxlan id 4096 \
            local "${node_ip[$node]}" dev eth0 dstport 4789 nolearning
        ip -n "$ns" link set vxlan.calico mtu $pod_mtu up
        ip -n "$ns" addr add "${node_vtep[$node]}/32" dev vxlan.calico
    fi
done

# --- each node's routes to the other's block ----------------------------------
for node in node-1 node-2; do
    ns=$prefix-$node
    for peer in node-1 node-2; do
        [ "$peer" = "$node" ] && continue
        if [ "$mode" = vxlan ]; then
            ip -n "$ns" neigh add "${node_vtep[$peer]}" lladdr "${node_mac[$peer]}" dev vxlan.calico nud permanent
            bridge -n "$ns" fdb append "${node_mac[$peer]}" dev vxlan.calico dst "${node_ip[$peer]}" self permanent
            ip -n "$ns" route add "${node_block[$peer]}" via "${node_vtep[$peer]}" dev vxlan.calico onlink proto 80
        else
            ip -n "$ns" route add "${node_block[$peer]}" via "${node_ip[$peer]}" dev eth0 proto bird
        fi
    done
done

# --- pods ---------------------------------------------------------------------
for pod in web-0 web-1 web-2 web-3; do
    node=${pod_node[$pod]}
    netns "$pod"
    veth=$(veth_of default "$pod")
    ip -n "$prefix-$node" link add "$veth" mtu $pod_mtu type veth peer name eth0 mtu $pod_mtu netns "$prefix-$pod"
    ip -n "$prefix-$node" link set "$veth" address ee:ee:ee:ee:ee:ee up
    in_ns "$node" sysctl -qw "net.ipv4.conf.$veth.proxy_arp=1" "net.ipv4.neigh.$veth.proxy_delay=0"
    ip -n "$prefix-$node" route add "${pod_ip[$pod]}" dev "$veth" scope link
    ip -n "$prefix-$pod" addr add "${pod_ip[$pod]}/32" dev eth0
    ip -n "$prefix-$pod" link set eth0 up
    ip -n "$prefix-$pod" route add 169.254.1.1 dev eth0 scope link
    ip -n "$prefix-$pod" route add default via 169.254.1.1 dev eth0
done

# --- iptables: felix's chains (as much as this cluster uses) and kube-proxy's ---
kube_rules() { # TABLE: the KUBE-* chains and jumps of the example's node-1
    awk -v table="*$1" '$0 == table { on = 1; next } on && /^COMMIT/ { on = 0 }
        on && (/^:KUBE-/ || /-j KUBE-/ || /^-A KUBE-/)' "$example/nodes/node-1/host/iptables-save.txt"
}
for node in node-1 node-2; do
    in_ns "$node" ipset restore <<EOF
create cali40all-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576
add cali40all-ipam-pools 10.244.0.0/16
create cali40masq-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576
add cali40masq-ipam-pools 10.244.0.0/16
EOF
    in_ns "$node" iptables-restore <<EOF
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:cali-FORWARD - [0:0]
:cali-from-wl-dispatch - [0:0]
:cali-to-wl-dispatch - [0:0]
$(kube_rules filter)
-A FORWARD -m comment --comment "cali:wUHhoiAYhphO9Mso" -j cali-FORWARD
-A cali-FORWARD -m comment --comment "cali:vjrMJCRpqwy5oRoX" -j MARK --set-xmark 0x0/0xe0000
-A cali-FORWARD -i cali+ -m comment --comment "cali:A_sPAO0mcxbT9mOV" -j cali-from-wl-dispatch
-A cali-FORWARD -o cali+ -m comment --comment "cali:8ZoYfO5HKXWbB3pk" -j cali-to-wl-dispatch
-A cali-FORWARD -i cali+ -m comment --comment "cali:jdEuaPBe14V2hutn" -j ACCEPT
-A cali-FORWARD -o cali+ -m comment --comment "cali:12bc6HljsMKsmfr-" -j ACCEPT
-A cali-from-wl-dispatch -m comment --comment "cali:zTj6P0TIgYvgz-md" -j RETURN
-A cali-to-wl-dispatch -m comment --comment "cali:7KNphB1nNHw80nIO" -j RETURN
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:cali-POSTROUTING - [0:0]
:cali-nat-outgoing - [0:0]
$(kube_rules nat)
-A POSTROUTING -m comment --comment "cali:O3lYWMrLQYEMJtB5" -j cali-POSTROUTING
-A cali-POSTROUTING -m comment --comment "cali:Z-c7XtVd2Bq7s_hA" -j cali-nat-outgoing
-A cali-nat-outgoing -m comment --comment "cali:flqWnvo8yq4ULQLa" -m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -j MASQUERADE --random-fully
COMMIT
EOF
done

# --- the kernel's verdict: every pod reaches every other ------------------------
for from in web-0 web-2; do
    for to in web-0 web-1 web-2 web-3; do
        [ "$from" = "$to" ] && continue
        in_ns "$from" ping -c1 -W2 "${pod_ip[$to]}" >/dev/null \
            || { echo "ping $from -> $to (${pod_ip[$to]}) failed" >&2; exit 1; }
    done
done

# --- collect --------------------------------------------------------------------
for pod in web-0 web-1 web-2 web-3; do
    in_ns "$pod" nc -lk 0.0.0.0 8080 </dev/null >/dev/null 2>&1 &
    listeners+=($!)
done
sleep 0.3
rm -rf "$out"
for node in node-1 node-2; do
    "$skoop" collect local --netns "$prefix-$node" --out "$out/nodes/$node/host" >/dev/null 2>&1
done
for pod in web-0 web-1 web-2 web-3; do
    "$skoop" collect local --netns "$prefix-$pod" --out "$out/nodes/${pod_node[$pod]}/pods/default/$pod" >/dev/null 2>&1
done

# --- the Kubernetes objects -----------------------------------------------------
mkdir -p "$out/cluster"
for kind in pods services endpointslices namespaces; do
    cp "$example/cluster/$kind.yaml" "$out/cluster/$kind.yaml"
done
if [ "$mode" = vxlan ]; then vxlan_mode=Always; backend=vxlan; else vxlan_mode=Never; backend=bird; fi
{
    echo "apiVersion: v1"
    echo "items:"
    for node in node-1 node-2; do
        cat <<EOF
- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      node.alpha.kubernetes.io/ttl: "0"
      projectcalico.org/IPv4Address: ${node_ip[$node]}/24
EOF
        if [ "$mode" = vxlan ]; then
            cat <<EOF
      projectcalico.org/IPv4VXLANTunnelAddr: ${node_vtep[$node]}
      projectcalico.org/VXLANTunnelMACAddr: ${node_mac[$node]}
EOF
        fi
        cat <<EOF
      volumes.kubernetes.io/controller-managed-attach-detach: "true"
    creationTimestamp: "2025-06-02T09:00:00Z"
    labels:
      kubernetes.io/hostname: $node
      kubernetes.io/os: linux
    name: $node
  spec:
    podCIDR: ${node_block[$node]%.*}.0/24
    podCIDRs:
    - ${node_block[$node]%.*}.0/24
  status:
    addresses:
    - address: "${node_ip[$node]}"
      type: InternalIP
    - address: $node
      type: Hostname
    conditions:
    - lastHeartbeatTime: "2025-06-02T09:00:10Z"
      lastTransitionTime: "2025-06-02T09:00:00Z"
      message: Calico is running on this node
      reason: CalicoIsUp
      status: "False"
      type: NetworkUnavailable
    - lastHeartbeatTime: "2025-06-02T09:00:10Z"
      lastTransitionTime: "2025-06-02T09:00:00Z"
      message: kubelet is posting ready status
      reason: KubeletReady
      status: "True"
      type: Ready
EOF
    done
    echo "kind: List"
    echo "metadata:"
    echo '  resourceVersion: ""'
} >"$out/cluster/nodes.yaml"

cat >"$out/cluster/ippools.yaml" <<EOF
apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata:
  creationTimestamp: "2025-06-02T09:00:00Z"
  name: default-ipv4-ippool
spec:
  allowedUses:
  - Workload
  - Tunnel
  blockSize: 26
  cidr: 10.244.0.0/16
  ipipMode: Never
  natOutgoing: true
  nodeSelector: all()
  vxlanMode: $vxlan_mode
EOF

{
    echo "apiVersion: v1"
    echo "items:"
    for node in node-1 node-2; do
        block=${node_block[$node]}
        cat <<EOF
- apiVersion: crd.projectcalico.org/v1
  kind: BlockAffinity
  metadata:
    creationTimestamp: "2025-06-02T09:00:00Z"
    name: $node-$(echo "$block" | tr './' '--')
  spec:
    cidr: $block
    deleted: "false"
    node: $node
    state: confirmed
EOF
    done
    echo "kind: List"
    echo "metadata:"
    echo '  resourceVersion: ""'
} >"$out/cluster/blockaffinities.yaml"

cat >"$out/cluster/configmaps.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  creationTimestamp: "2025-06-02T09:00:00Z"
  name: calico-config
  namespace: kube-system
data:
  calico_backend: $backend
  typha_service_name: none
  veth_mtu: "0"
EOF

cat >"$out/cluster/daemonsets.yaml" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata:
  creationTimestamp: "2025-06-02T09:00:00Z"
  labels:
    k8s-app: calico-node
  name: calico-node
  namespace: kube-system
spec:
  selector:
    matchLabels:
      k8s-app: calico-node
  template:
    metadata:
      labels:
        k8s-app: calico-node
    spec:
      containers:
      - env:
        - name: CALICO_NETWORKING_BACKEND
          valueFrom:
            configMapKeyRef:
              key: calico_backend
              name: calico-config
        - name: CLUSTER_TYPE
          value: k8s,bgp
        - name: IP
          value: autodetect
        - name: CALICO_IPV4POOL_VXLAN
          value: $vxlan_mode
        - name: CALICO_IPV4POOL_IPIP
          value: Never
        image: docker.io/calico/node:v3.29.1
        name: calico-node
      hostNetwork: true
EOF
echo "$mode snapshot in $out ($prefix)"
