#!/usr/bin/env python3
"""Writes the Calico pack's test cases (run from the repository root).

healthy-vxlan and healthy-bgp point at the lab's examples. Every other case
is a copy of one of them - its cluster/ and node-1's host namespace,
sysctl.txt trimmed to the keys the packs read - edited as its expect.yaml's
description says; the addresses, blocks and MACs edited are read from the
example itself. The IPIP cases are hand-built on the BGP example, since this
machine's kernel has no ipip module."""
import json
import os
import re
import shutil

import yaml

ROOT = 'plugins/calico/tests'
BASES = {'vxlan': 'examples/calico-vxlan', 'bgp': 'examples/calico-bgp'}
IDS = ['calico.mode'] + [l.split()[2] for l in open('plugins/calico/pack.yaml') if l.startswith('  - id:')]


def items(base, kind):
    """The objects of cluster/KIND.yaml (a List or one object)."""
    doc = yaml.safe_load(open(f'{base}/cluster/{kind}.yaml'))
    return doc['items'] if doc.get('kind') == 'List' else [doc]


def facts(base):
    """What the edits name, as the snapshot has it."""
    blocks = {b['spec']['node']: b['spec']['cidr'] for b in items(base, 'blockaffinities')}
    nodes = {n['metadata']['name']: n['metadata'].get('annotations', {}) for n in items(base, 'nodes')}
    pods = {p['metadata']['name']: p['status']['podIP'] for p in items(base, 'pods')}
    calico = lambda node, key: nodes[node].get('projectcalico.org/' + key)
    return {
        'own_block': blocks['node-1'], 'peer_block': blocks['node-2'],
        'own_address': calico('node-1', 'IPv4Address'), 'peer_address': calico('node-2', 'IPv4Address'),
        'peer_ip': calico('node-2', 'IPv4Address').split('/')[0],
        'own_mac': calico('node-1', 'VXLANTunnelMACAddr'), 'peer_mac': calico('node-2', 'VXLANTunnelMACAddr'),
        'peer_vtep': calico('node-2', 'IPv4VXLANTunnelAddr'),
        'web0': pods['web-0'], 'veth0': 'cali0d7763386da',  # cali + sha1("default.web-0")[:11]
    }


F = {mode: facts(base) for mode, base in BASES.items()}


# The pods whose dumps a case with flows keeps, so that the path is the kernel's on node-1.
WEB = ['web-0', 'web-1']
DROPPED = ['daemonsets.yaml', 'endpointslices.yaml', 'services.yaml', 'networkpolicies.yaml']


def case(name, base, desc, findings, edit, pods=(), flows=''):
    d = f'{ROOT}/{name}'
    shutil.rmtree(d, ignore_errors=True)
    src, snap = BASES[base], f'{d}/snapshot'
    # The objects the pack reads (the Node, Pod and Calico objects).
    shutil.copytree(f'{src}/cluster', f'{snap}/cluster', ignore=shutil.ignore_patterns(*DROPPED))
    shutil.copytree(f'{src}/nodes/node-1/host', f'{snap}/nodes/node-1/host')
    for p in pods:
        shutil.copytree(f'{src}/nodes/node-1/pods/default/{p}', f'{snap}/nodes/node-1/pods/default/{p}')
    for ns in [f'{snap}/nodes/node-1/host'] + [f'{snap}/nodes/node-1/pods/default/{p}' for p in pods]:
        keep = [l for l in open(f'{ns}/sysctl.txt')
                if re.match(r'net\.ipv4\.(ip_forward|conf\.[^.]+\.(rp_filter|proxy_arp|forwarding)) ', l)]
        open(f'{ns}/sysctl.txt', 'w').write(''.join(keep))
        if os.path.exists(f'{ns}/ip-route6.json'):
            os.remove(f'{ns}/ip-route6.json')
    edit(snap)
    absent = [i for i in IDS if i not in findings]
    with open(f'{d}/expect.yaml', 'w') as f:
        f.write('description: ' + (json.dumps(desc) if ': ' in desc else desc) + '\n')
        f.write('findings: [' + ', '.join(findings) + ']\n')
        f.write('absent: [' + ', '.join(absent) + ']\n')
        f.write(flows)


def flows(*items):
    """A flows: section, each item (from, to, disposition, findings)."""
    text = 'flows:\n'
    for source, target, disposition, findings in items:
        text += f'  - {{from: {source}, to: "{target}", disposition: {disposition}, findings: [{", ".join(findings)}]}}\n'
    return text


def healthy(mode, flows):
    """A case on the example itself: no finding of the pack, and flows."""
    d = f'{ROOT}/healthy-{mode}'
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(f'{d}/expect.yaml', 'w') as f:
        f.write(f'description: The lab\'s {mode} example (real kernel output), where every pod reaches every other on TCP 8080.\n')
        f.write(f'snapshot: ../../../../{BASES[mode]}\n')
        f.write('absent: [' + ', '.join(IDS) + ']\n')
        f.write(flows)


def host(s): return f'{s}/nodes/node-1/host'
def jl(path): return json.load(open(path))
def jw(path, v): open(path, 'w').write(json.dumps(v, separators=(',', ':')))


def edit_json(s, file, fn):
    p = f'{host(s)}/{file}'
    jw(p, fn(jl(p)))


def without(file, keep):
    return lambda s: edit_json(s, file, lambda entries: [e for e in entries if keep(e)])


def set_fields(file, match, **fields):
    def fn(entries):
        for e in entries:
            if match(e):
                e.update(fields)
        return entries
    return lambda s: edit_json(s, file, fn)


def text(path, old, new):
    t = open(path).read()
    assert old in t, (path, old)
    open(path, 'w').write(t.replace(old, new, 1))


def sub(path, pattern, new):
    t = open(path).read()
    t2 = re.sub(pattern, new, t, count=1, flags=re.M)
    assert t != t2, (path, pattern)
    open(path, 'w').write(t2)


def pool(old, new): return lambda s: text(f'{s}/cluster/ippools.yaml', old, new)


# --- vxlan --------------------------------------------------------------------
v = F['vxlan']
case('vxlan-route-missing', 'vxlan',
     f"node-1 lost its route to node-2's block ({v['peer_block']} via {v['peer_vtep']} dev vxlan.calico onlink deleted)",
     ['calico.route.remote-block'], without('ip-route.json', lambda r: r.get('dst') != v['peer_block']), pods=WEB,
     flows=flows(('default/web-0', 'default/web-3:8080', 'exits_cluster', ['kernel.route.leaves-cluster', 'calico.route.remote-block'])))
case('vxlan-neighbour-missing', 'vxlan',
     f"node-1 lost its permanent neighbour {v['peer_vtep']} lladdr {v['peer_mac']} (node-2's VTEP) on vxlan.calico",
     ['calico.vxlan.neighbour'], without('ip-neigh.json', lambda n: n['dst'] != v['peer_vtep']), pods=WEB,
     flows=flows(('default/web-0', 'default/web-3:8080', 'neighbor_failed', ['kernel.neighbour.missing', 'calico.vxlan.neighbour'])))
case('vxlan-fdb-missing', 'vxlan',
     f"node-1 lost its FDB entry {v['peer_mac']} dev vxlan.calico dst {v['peer_ip']}",
     ['calico.vxlan.fdb'], without('bridge-fdb.json', lambda e: e['mac'] != v['peer_mac']), pods=WEB,
     flows=flows(('default/web-0', 'default/web-3:8080', 'neighbor_failed', ['kernel.fdb.missing', 'calico.vxlan.fdb'])))
case('vxlan-mtu-wrong', 'vxlan',
     "node-1 vxlan.calico at MTU 1500, the host interface's, with no room for 50 bytes of VXLAN",
     ['calico.vxlan.mtu'], set_fields('ip-link.json', lambda l: l['ifname'] == 'vxlan.calico', mtu=1500))


def vni(s):
    def fn(links):
        for link in links:
            if link['ifname'] == 'vxlan.calico':
                link['linkinfo']['info_data']['id'] = 1
        return links
    edit_json(s, 'ip-link.json', fn)


case('vxlan-wrong-vni', 'vxlan', "node-1 vxlan.calico with VNI 1 instead of Calico's 4096", ['calico.vxlan.device'], vni)
case('vxlan-mac-mismatch', 'vxlan',
     f"node-1's projectcalico.org/VXLANTunnelMACAddr annotation edited to 66:2e:4a:01:00:99; vxlan.calico has {v['own_mac']}",
     ['calico.vxlan.mac'], lambda s: text(f'{s}/cluster/nodes.yaml', v['own_mac'], '66:2e:4a:01:00:99'))
case('vxlan-cross-subnet-same-subnet', 'vxlan',
     f"The IPPool edited to vxlanMode CrossSubnet: node-2 ({v['peer_address']}) is on node-1's subnet, so felix routes it directly, not through vxlan.calico",
     ['calico.route.pool-mode'], pool('vxlanMode: Always', 'vxlanMode: CrossSubnet'))


def other_subnet(s):
    pool('vxlanMode: Always', 'vxlanMode: CrossSubnet')(s)
    own = v['own_address'].split('/')[0]
    text(f'{s}/cluster/nodes.yaml', f"projectcalico.org/IPv4Address: {v['own_address']}", f'projectcalico.org/IPv4Address: {own}/30')


case('vxlan-cross-subnet-other-subnet', 'vxlan',
     f"The IPPool edited to vxlanMode CrossSubnet and node-1's IPv4Address annotation to a /30 that leaves node-2 ({v['peer_ip']}) on another subnet - the VXLAN routes are then right",
     [], other_subnet)
case('vxlan-pool-says-bgp', 'vxlan',
     "The IPPool edited to vxlanMode Never (BGP) while node-1 still routes node-2's block through vxlan.calico and its pods keep VXLAN's MTU 1450",
     ['calico.route.pool-mode', 'calico.pod.mtu'], pool('vxlanMode: Always', 'vxlanMode: Never'))
case('vxlan-annotations-missing', 'vxlan',
     "node-2's projectcalico.org/VXLANTunnelMACAddr annotation removed - nobody can program its VTEP",
     ['calico.node.annotations'],
     lambda s: sub(f'{s}/cluster/nodes.yaml', r'^ *projectcalico.org/VXLANTunnelMACAddr: ' + re.escape(v['peer_mac']) + r'\n', ''))

# --- each local pod -----------------------------------------------------------
veth0 = v['veth0']
case('host-veth-down', 'vxlan', f"node-1 {veth0} (web-0's host veth) down - flags without UP, operstate DOWN",
     ['calico.pod.host-veth-down'],
     set_fields('ip-link.json', lambda l: l['ifname'] == veth0, flags=['BROADCAST', 'MULTICAST'], operstate='DOWN'), pods=WEB,
     flows=flows(('default/web-3', 'default/web-0:8080', 'neighbor_failed', ['kernel.device.down', 'calico.pod.host-veth-down'])))


def rename(s):
    for f in ['ip-link.json', 'ip-route.json', 'ip-neigh.json', 'bridge-fdb.json', 'ip-addr.json', 'sysctl.txt']:
        p = f'{host(s)}/{f}'
        renamed = open(p).read().replace(veth0, 'cali1234567890a')
        open(p, 'w').write(renamed)


case('host-veth-misnamed', 'vxlan',
     f"node-1 web-0's host veth renamed {veth0} -> cali1234567890a everywhere in its dump (link, route, sysctls), as a CNI with another naming would leave it",
     ['calico.pod.host-veth', 'calico.pod.route'], rename)
case('pod-route-missing', 'vxlan', f"node-1 lost the route {v['web0']} dev {veth0} scope link (web-0)",
     ['calico.pod.route'], without('ip-route.json', lambda r: r.get('dst') != v['web0']), pods=WEB,
     flows=flows(('default/web-3', 'default/web-0:8080', 'unreachable_route', ['kernel.route.blackhole', 'calico.pod.route'])))
case('proxy-arp-off', 'vxlan', f"node-1 net.ipv4.conf.{veth0}.proxy_arp = 0 (web-0's veth)",
     ['calico.pod.proxy-arp'],
     lambda s: text(f'{host(s)}/sysctl.txt', f'net.ipv4.conf.{veth0}.proxy_arp = 1', f'net.ipv4.conf.{veth0}.proxy_arp = 0'), pods=WEB,
     flows=flows(('default/web-0', 'default/web-3:8080', 'neighbor_failed', ['kernel.neighbour.unanswered']),
                    ('default/web-3', 'default/web-0:8080', 'neighbor_failed', ['kernel.neighbour.unanswered', 'calico.pod.proxy-arp'])))


def proxy_arp_all(s):
    path = f'{host(s)}/sysctl.txt'
    text(path, f'net.ipv4.conf.{veth0}.proxy_arp = 1', f'net.ipv4.conf.{veth0}.proxy_arp = 0')
    text(path, 'net.ipv4.conf.all.proxy_arp = 0', 'net.ipv4.conf.all.proxy_arp = 1')


case('proxy-arp-on-for-all', 'vxlan',
     f"node-1 net.ipv4.conf.{veth0}.proxy_arp = 0 but net.ipv4.conf.all.proxy_arp = 1 - the kernel ORs them, web-0 still gets its answer",
     [], proxy_arp_all, pods=WEB,
     flows=flows(('default/web-0', 'default/web-3:8080', 'delivered', [])))
case('pod-mtu-wrong', 'vxlan', f"node-1 {veth0} (web-0) at MTU 1500 while vxlan.calico is at 1450",
     ['calico.pod.mtu'], set_fields('ip-link.json', lambda l: l['ifname'] == veth0, mtu=1500))


def gateway(s):
    p = f'{s}/nodes/node-1/pods/default/web-0/ip-route.json'
    routes = jl(p)
    for r in routes:
        if r.get('dst') == 'default':
            r['gateway'] = '169.254.1.2'
    jw(p, routes)


case('pod-gateway-wrong', 'vxlan',
     "web-0's default route edited to via 169.254.1.2 dev eth0 - not Calico's gateway, but proxy ARP answers it too",
     ['calico.pod.gateway'], gateway, pods=WEB,
     flows=flows(('default/web-0', 'default/web-3:8080', 'delivered', ['calico.pod.gateway'])))
case('blackhole-missing', 'vxlan', f"node-1 lost blackhole {v['own_block']} proto 80 (its own block)",
     ['calico.route.blackhole'], without('ip-route.json', lambda r: r.get('type') != 'blackhole'))
def forwarding_off(s):
    # Writing ip_forward sets every interface's forwarding too, as the kernel does.
    sub(f'{host(s)}/sysctl.txt', r'^net\.ipv4\.ip_forward = 1$', 'net.ipv4.ip_forward = 0')
    path = f'{host(s)}/sysctl.txt'
    every = re.sub(r'^(net\.ipv4\.conf\.[^.]+\.forwarding) = 1$', r'\1 = 0', open(path).read(), flags=re.M)
    open(path, 'w').write(every)


case('ip-forward-off', 'vxlan', "node-1 net.ipv4.ip_forward = 0 (and so every net.ipv4.conf.*.forwarding, as writing it does)",
     ['calico.sysctl.ip-forward'], forwarding_off, pods=WEB,
     flows=flows(('default/web-3', 'default/web-0:8080', 'forwarding_disabled', ['kernel.sysctl.forwarding', 'calico.sysctl.ip-forward'])))

# --- natOutgoing and felix's chains -------------------------------------------
case('nat-outgoing-rule-missing', 'vxlan',
     "node-1 nat table without cali-nat-outgoing's MASQUERADE rule, while the IPPool says natOutgoing true",
     ['calico.nat-outgoing.missing'],
     lambda s: sub(f'{host(s)}/iptables-save.txt', r'^-A cali-nat-outgoing .*-j MASQUERADE.*\n', ''))
case('nat-outgoing-off-in-pool', 'vxlan',
     "The IPPool edited to natOutgoing false while node-1 keeps felix's cali-nat-outgoing rule",
     ['calico.nat-outgoing.unexpected'], pool('natOutgoing: true', 'natOutgoing: false'))
case('felix-chains-missing', 'vxlan', "node-1 filter FORWARD without its jump to cali-FORWARD",
     ['calico.felix.chains'], lambda s: sub(f'{host(s)}/iptables-save.txt', r'^-A FORWARD .*-j cali-FORWARD\n', ''))

# --- the cluster's objects ----------------------------------------------------
case('pool-invalid', 'vxlan', "The IPPool edited to ipipMode Always beside vxlanMode Always, which Calico refuses",
     ['calico.pool.config'], pool('ipipMode: Never', 'ipipMode: Always'))


def stray_block(s):
    p = f'{s}/cluster/blockaffinities.yaml'
    doc = yaml.safe_load(open(p))
    doc['items'].append({'apiVersion': 'crd.projectcalico.org/v1', 'kind': 'BlockAffinity',
                         'metadata': {'name': 'node-2-10-245-0-0-26'},
                         'spec': {'cidr': '10.245.0.0/26', 'deleted': 'false', 'node': 'node-2', 'state': 'confirmed'}})
    yaml.safe_dump(doc, open(p, 'w'))


case('block-outside-pool', 'vxlan', "A BlockAffinity 10.245.0.0/26 of node-2 added, outside the pool 10.244.0.0/16",
     ['calico.block.outside-pool'], stray_block)


def calico_node_pods(s):
    p = f'{s}/cluster/pods.yaml'
    doc = yaml.safe_load(open(p))
    for node, ip, ready in [('node-1', '172.18.0.11', 'True'), ('node-2', v['peer_ip'], 'False')]:
        doc['items'].append({
            'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': f'calico-node-{node[-1]}', 'namespace': 'kube-system', 'labels': {'k8s-app': 'calico-node'}},
            'spec': {'nodeName': node, 'hostNetwork': True, 'containers': [{'name': 'calico-node', 'image': 'docker.io/calico/node:v3.29.1'}]},
            'status': {'phase': 'Running', 'hostIP': ip, 'podIP': ip, 'podIPs': [{'ip': ip}],
                       'conditions': [{'type': 'Ready', 'status': ready}, {'type': 'ContainersReady', 'status': ready}]}})
    yaml.safe_dump(doc, open(p, 'w'))


case('calico-node-not-ready', 'vxlan',
     "calico-node pods added to pods.yaml (hostNetwork, k8s-app calico-node) - ready on node-1, not ready on node-2",
     ['calico.node.calico-node'], calico_node_pods)
case('blocks-from-ipamblocks', 'vxlan',
     "blockaffinities.yaml removed - the blocks are read from the IPAMBlocks' affinities, and every check still holds",
     [], lambda s: os.remove(f'{s}/cluster/blockaffinities.yaml'))
case('blocks-from-pods', 'vxlan',
     "blockaffinities.yaml and ipamblocks.yaml removed - the blocks are derived from the pods' IPs and the pool's blockSize, and every check still holds",
     [], lambda s: [os.remove(f'{s}/cluster/{kind}.yaml') for kind in ('blockaffinities', 'ipamblocks')])


def second_pool(s):
    p = f'{s}/cluster/ippools.yaml'
    doc = yaml.safe_load(open(p))
    doc['items'].append({'apiVersion': 'crd.projectcalico.org/v1', 'kind': 'IPPool', 'metadata': {'name': 'bgp-pool'},
                         'spec': {'blockSize': 26, 'cidr': '10.245.0.0/16', 'ipipMode': 'Never', 'natOutgoing': False,
                                  'nodeSelector': 'all()', 'vxlanMode': 'Never'}})
    yaml.safe_dump(doc, open(p, 'w'))


case('pools-mixed', 'vxlan',
     "A second, empty IPPool 10.245.0.0/16 in BGP mode added - the pack's mode is mixed, and the blocks of the VXLAN pool are still checked as VXLAN",
     [], second_pool)
case('pool-v3', 'vxlan', "The IPPool written as projectcalico.org/v3 (as calicoctl shows it) - the same pool, every check holds",
     [], pool('apiVersion: crd.projectcalico.org/v1', 'apiVersion: projectcalico.org/v3'))

# --- bgp ----------------------------------------------------------------------
b = F['bgp']
is_peer_route = lambda r: r.get('dst') == b['peer_block']
case('bgp-route-missing', 'bgp', f"node-1 lost its BGP route {b['peer_block']} via {b['peer_ip']} dev eth0 proto bird",
     ['calico.route.remote-block'], without('ip-route.json', lambda r: not is_peer_route(r)), pods=WEB,
     flows=flows(('default/web-0', 'default/web-3:8080', 'exits_cluster', ['kernel.route.leaves-cluster', 'calico.route.remote-block'])))
case('bgp-route-not-bird', 'bgp', "node-1's route to node-2's block edited to proto static - right next hop, but not bird's",
     ['calico.route.protocol'], set_fields('ip-route.json', is_peer_route, protocol='static'))
case('bgp-next-hop-wrong', 'bgp', "node-1's BGP route to node-2's block edited to via 172.18.0.13, no node's address",
     ['calico.route.next-hop'], set_fields('ip-route.json', is_peer_route, gateway='172.18.0.13'), pods=WEB,
     flows=flows(('default/web-0', 'default/web-3:8080', 'exits_cluster', ['kernel.route.leaves-cluster', 'calico.route.next-hop'])))
case('bgp-masquerade-everything', 'bgp',
     "node-1 nat POSTROUTING with a MASQUERADE of everything leaving eth0 ahead of felix's chain, so pod-to-pod traffic across nodes loses its source",
     ['calico.nat-outgoing.inside-pools'],
     lambda s: sub(f'{host(s)}/iptables-save.txt', r'^(-A POSTROUTING .*-j cali-POSTROUTING)$', r'-A POSTROUTING -o eth0 -j MASQUERADE\n\1'))

# --- ipip (hand-built: this kernel has no ipip module) ---------------------------
TUNL0 = {"ifindex": 99, "ifname": "tunl0", "flags": ["NOARP", "UP", "LOWER_UP"], "mtu": 1480, "qdisc": "noqueue",
         "operstate": "UNKNOWN", "linkmode": "DEFAULT", "group": "default", "txqlen": 1000, "link_type": "ipip",
         "address": "0.0.0.0", "broadcast": "0.0.0.0", "promiscuity": 0, "allmulti": 0, "min_mtu": 0, "max_mtu": 0,
         "linkinfo": {"info_kind": "ipip", "info_data": {"proto": "ipip", "remote": "any", "local": "any", "ttl": 0, "pmtudisc": True}}}
own_tunnel = b['own_block'].split('/')[0]
peer_tunnel = b['peer_block'].split('/')[0]


def ipip(s, pool_mode='Always', via_tunnel=True, mtu=1480):
    pool('ipipMode: Never', f'ipipMode: {pool_mode}')(s)
    for address, tunnel in [(b['own_address'], own_tunnel), (b['peer_address'], peer_tunnel)]:
        sub(f'{s}/cluster/nodes.yaml', r'^( *)projectcalico.org/IPv4Address: ' + re.escape(address) + '$',
            r'\g<0>\n\1projectcalico.org/IPv4IPIPTunnelAddr: ' + tunnel)
    tunl0 = dict(TUNL0, mtu=mtu)

    def links(entries):
        for link in entries:
            if link['ifname'].startswith('cali'):
                link['mtu'] = 1480
        return entries + [tunl0]
    edit_json(s, 'ip-link.json', links)
    address = {k: x for k, x in tunl0.items() if k not in ('linkmode', 'promiscuity', 'allmulti', 'min_mtu', 'max_mtu', 'linkinfo')}
    address['addr_info'] = [{"family": "inet", "local": own_tunnel, "prefixlen": 32, "scope": "global", "label": "tunl0",
                             "valid_life_time": 4294967295, "preferred_life_time": 4294967295}]
    edit_json(s, 'ip-addr.json', lambda entries: entries + [address])

    def routes(entries):
        for r in entries:
            if is_peer_route(r) and via_tunnel:
                r.update(dev='tunl0', flags=['onlink'])
        return entries + [{"type": "local", "dst": own_tunnel, "dev": "tunl0", "table": "local", "protocol": "kernel",
                           "scope": "host", "prefsrc": own_tunnel, "flags": []}]
    edit_json(s, 'ip-route.json', routes)


IPIP_EDIT = ("the BGP snapshot with the IPPool's ipipMode {mode}, IPv4IPIPTunnelAddr annotations (each block's first address), "
             "a tunl0 link (kind ipip, MTU {mtu}, " + own_tunnel + "/32), {route}, and the pods' veths at MTU 1480")
case('ipip-healthy', 'bgp', "Hand-built IPIP (no ipip module here) - " + IPIP_EDIT.format(
    mode='Always', mtu=1480, route=f"{b['peer_block']} via {b['peer_ip']} dev tunl0 proto bird onlink"), [], ipip)
case('ipip-mtu-wrong', 'bgp', "Hand-built IPIP as in ipip-healthy, but tunl0 at MTU 1500 - no room for the 20-byte outer header",
     ['calico.ipip.mtu'], lambda s: ipip(s, mtu=1500))
case('ipip-cross-subnet', 'bgp', "Hand-built IPIP CrossSubnet - " + IPIP_EDIT.format(
    mode='CrossSubnet', mtu=1480, route=f"{b['peer_block']} via {b['peer_ip']} dev eth0 proto bird kept (node-2 is on the same subnet)"),
    [], lambda s: ipip(s, pool_mode='CrossSubnet', via_tunnel=False))
case('ipip-routes-bgp', 'bgp',
     f"Hand-built IPIP as in ipip-healthy, but the route to node-2's block still goes via {b['peer_ip']} dev eth0 (BGP) while the pool says ipipMode Always",
     ['calico.route.pool-mode'], lambda s: ipip(s, via_tunnel=False))

# --- the examples themselves ----------------------------------------------------
HEALTHY_FLOWS = """flows:
  - {from: default/web-0, to: "default/web-3:8080", disposition: delivered}
  - {from: default/web-2, to: "default/web-0:8080", disposition: delivered}
  - {from: default/web-0, to: "svc/default/web:80", disposition: delivered}
  - {from: default/web-0, to: "8.8.8.8:53", protocol: udp, disposition: exits_cluster}
  - from: default/web-0
    to: default/web-3
    protocol: icmp
    disposition: denied_by_netfilter
    findings: [kernel.netfilter.denied, networkpolicy.ingress.denied]
"""
healthy('vxlan', HEALTHY_FLOWS)
healthy('bgp', HEALTHY_FLOWS)
