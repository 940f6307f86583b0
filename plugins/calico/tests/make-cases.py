#!/usr/bin/env python3
"""Writes the pack's fault cases: each a copy of a healthy snapshot (cluster/
and node-1's host, trimmed to the sysctls the packs read), edited as its
expect.yaml's description says. Run from the repository root after
make-snapshot.sh; the IPIP cases are hand-built on the BGP snapshot, since
this machine's kernel has no ipip module."""
import json, os, re, shutil
ROOT='plugins/calico/tests'
IDS=['calico.mode']+[l.split()[2] for l in open('plugins/calico/pack.yaml') if l.startswith('  - id:')]
VETH0='cali0d7763386da'  # default/web-0
def jl(path): return json.load(open(path))
def jw(path, v): open(path,'w').write(json.dumps(v, separators=(',',':')))
def case(name, base, desc, findings, edit, pods=()):
    d=f'{ROOT}/{name}'; shutil.rmtree(d, ignore_errors=True)
    src=f'{ROOT}/healthy-{base}/snapshot'; snap=f'{d}/snapshot'
    shutil.copytree(f'{src}/cluster', f'{snap}/cluster')
    shutil.copytree(f'{src}/nodes/node-1/host', f'{snap}/nodes/node-1/host')
    for p in pods: shutil.copytree(f'{src}/nodes/node-1/pods/default/{p}', f'{snap}/nodes/node-1/pods/default/{p}')
    for ns in [f'{snap}/nodes/node-1/host'] + [f'{snap}/nodes/node-1/pods/default/{p}' for p in pods]:
        # Trimmed: the sysctls the packs read.
        keep=[l for l in open(f'{ns}/sysctl.txt') if re.match(r'net\.ipv4\.(ip_forward|conf\.[^.]+\.(rp_filter|proxy_arp|forwarding)) ', l)]
        open(f'{ns}/sysctl.txt','w').write(''.join(keep))
        os.remove(f"{ns}/ip-route6.json")
    edit(snap)
    absent=[i for i in IDS if i not in findings]
    with open(f'{d}/expect.yaml','w') as f:
        f.write('description: ' + (json.dumps(desc) if ': ' in desc else desc) + '\n')
        f.write('findings: [' + ', '.join(findings) + ']\n')
        f.write('absent: [' + ', '.join(absent) + ']\n')
host=lambda s: f'{s}/nodes/node-1/host'
def routes(s, fn):
    p=f'{host(s)}/ip-route.json'; jw(p, fn(jl(p)))
def links(s, fn):
    p=f'{host(s)}/ip-link.json'; jw(p, fn(jl(p)))
def link_set(name, **kv):
    def f(ls):
        for l in ls:
            if l['ifname']==name: l.update(kv)
        return ls
    return f
def text(path, old, new, count=1):
    t=open(path).read(); assert old in t, (path, old); open(path,'w').write(t.replace(old,new,count))
def sub(path, pattern, new):
    t=open(path).read(); t2=re.sub(pattern,new,t,flags=re.M); assert t!=t2,(path,pattern); open(path,'w').write(t2)

# --- vxlan --------------------------------------------------------------------
case('vxlan-route-missing','vxlan',
 "node-1 lost its route to node-2's block (10.244.2.0/26 via 10.244.2.0 dev vxlan.calico onlink deleted)",
 ['calico.route.remote-block'],
 lambda s: routes(s, lambda rs: [r for r in rs if r.get('dst')!='10.244.2.0/26']))
case('vxlan-neighbour-missing','vxlan',
 "node-1 lost its permanent neighbour 10.244.2.0 lladdr 66:2e:4a:02:00:02 (node-2's VTEP) on vxlan.calico",
 ['calico.vxlan.neighbour'],
 lambda s: jw(f'{host(s)}/ip-neigh.json', [n for n in jl(f'{host(s)}/ip-neigh.json') if n['dst']!='10.244.2.0']))
case('vxlan-fdb-missing','vxlan',
 "node-1 lost its FDB entry 66:2e:4a:02:00:02 dev vxlan.calico dst 172.18.0.12",
 ['calico.vxlan.fdb'],
 lambda s: jw(f'{host(s)}/bridge-fdb.json', [e for e in jl(f'{host(s)}/bridge-fdb.json') if e['mac']!='66:2e:4a:02:00:02']))
case('vxlan-mtu-wrong','vxlan',
 "node-1 vxlan.calico at MTU 1500, the host interface's, with no room for 50 bytes of VXLAN",
 ['calico.vxlan.mtu'], lambda s: links(s, link_set('vxlan.calico', mtu=1500)))
def vni(s):
    def f(ls):
        for l in ls:
            if l['ifname']=='vxlan.calico': l['linkinfo']['info_data']['id']=1
        return ls
    links(s, f)
case('vxlan-wrong-vni','vxlan', "node-1 vxlan.calico with VNI 1 instead of Calico's 4096",
 ['calico.vxlan.device'], vni)
case('vxlan-mac-mismatch','vxlan',
 "node-1's projectcalico.org/VXLANTunnelMACAddr annotation says 66:2e:4a:01:00:99, vxlan.calico has 66:2e:4a:01:00:01",
 ['calico.vxlan.mac'], lambda s: text(f'{s}/cluster/nodes.yaml','66:2e:4a:01:00:01','66:2e:4a:01:00:99'))
case('vxlan-cross-subnet-same-subnet','vxlan',
 "The IPPool edited to vxlanMode CrossSubnet: node-2 is on node-1's subnet (172.18.0.0/24), so felix routes it directly, not through vxlan.calico",
 ['calico.route.pool-mode'], lambda s: text(f'{s}/cluster/ippools.yaml','vxlanMode: Always','vxlanMode: CrossSubnet'))
case('vxlan-annotations-missing','vxlan',
 "node-2's projectcalico.org/VXLANTunnelMACAddr annotation removed - nobody can program its VTEP",
 ['calico.node.annotations'], lambda s: text(f'{s}/cluster/nodes.yaml','      projectcalico.org/VXLANTunnelMACAddr: 66:2e:4a:02:00:02\n',''))
# --- each local pod -----------------------------------------------------------
case('host-veth-down','vxlan', f"node-1 {VETH0} (web-0's host veth) down: flags without UP, operstate DOWN",
 ['calico.pod.host-veth-down'],
 lambda s: links(s, link_set(VETH0, flags=['BROADCAST','MULTICAST'], operstate='DOWN')))
def rename(s):
    for f in ['ip-link.json','ip-route.json','ip-neigh.json','bridge-fdb.json','ip-addr.json','sysctl.txt']:
        p=f'{host(s)}/{f}'; t=open(p).read(); open(p,'w').write(t.replace(VETH0,'cali1234567890a'))
case('host-veth-misnamed','vxlan',
 f"node-1 web-0's host veth renamed {VETH0} -> cali1234567890a everywhere in its dump (link, route, sysctls), as a CNI with another naming would leave it",
 ['calico.pod.host-veth','calico.pod.route'], rename)
case('pod-route-missing','vxlan', "node-1 lost the route 10.244.1.2 dev cali0d7763386da scope link (web-0)",
 ['calico.pod.route'], lambda s: routes(s, lambda rs: [r for r in rs if r.get('dst')!='10.244.1.2']))
case('proxy-arp-off','vxlan', f"node-1 net.ipv4.conf.{VETH0}.proxy_arp = 0 (web-0's veth)",
 ['calico.pod.proxy-arp'], lambda s: text(f'{host(s)}/sysctl.txt',f'net.ipv4.conf.{VETH0}.proxy_arp = 1',f'net.ipv4.conf.{VETH0}.proxy_arp = 0'))
case('pod-mtu-wrong','vxlan', f"node-1 {VETH0} (web-0) at MTU 1500 while vxlan.calico is at 1450",
 ['calico.pod.mtu'], lambda s: links(s, link_set(VETH0, mtu=1500)))
def gateway(s):
    p=f'{s}/nodes/node-1/pods/default/web-0/ip-route.json'
    rs=jl(p)
    for r in rs:
        if r.get('dst')=='default': r['gateway']='169.254.1.2'
    jw(p, rs)
case('pod-gateway-wrong','vxlan', "web-0's default route edited to via 169.254.1.2 dev eth0",
 ['calico.pod.gateway'], gateway, pods=['web-0'])
case('blackhole-missing','vxlan', "node-1 lost blackhole 10.244.1.0/26 proto 80 (its own block)",
 ['calico.route.blackhole'], lambda s: routes(s, lambda rs: [r for r in rs if r.get('type')!='blackhole']))
case('ip-forward-off','vxlan', "node-1 net.ipv4.ip_forward = 0",
 ['calico.sysctl.ip-forward'], lambda s: text(f'{host(s)}/sysctl.txt','net.ipv4.ip_forward = 1','net.ipv4.ip_forward = 0'))
# --- natOutgoing and felix's chains -------------------------------------------
case('nat-outgoing-rule-missing','vxlan', "node-1 nat table without cali-nat-outgoing's MASQUERADE rule, while the IPPool says natOutgoing: true",
 ['calico.nat-outgoing.missing'], lambda s: sub(f'{host(s)}/iptables-save.txt', r'^-A cali-nat-outgoing .*\n', ''))
case('nat-outgoing-off-in-pool','vxlan', "The IPPool edited to natOutgoing: false while node-1 keeps felix's cali-nat-outgoing rule",
 ['calico.nat-outgoing.unexpected'], lambda s: text(f'{s}/cluster/ippools.yaml','natOutgoing: true','natOutgoing: false'))
case('felix-chains-missing','vxlan', "node-1 filter FORWARD without its jump to cali-FORWARD",
 ['calico.felix.chains'], lambda s: sub(f'{host(s)}/iptables-save.txt', r'^-A FORWARD .*-j cali-FORWARD\n', ''))
# --- the cluster's objects ----------------------------------------------------
case('pool-invalid','vxlan', "The IPPool edited to ipipMode Always beside vxlanMode Always, which Calico refuses",
 ['calico.pool.config'], lambda s: text(f'{s}/cluster/ippools.yaml','ipipMode: Never','ipipMode: Always'),
 )
def stray_block(s):
    p=f'{s}/cluster/blockaffinities.yaml'
    t=open(p).read()
    extra='''- apiVersion: crd.projectcalico.org/v1
  kind: BlockAffinity
  metadata:
    creationTimestamp: "2025-06-02T09:00:00Z"
    name: node-2-10-245-0-0-26
  spec:
    cidr: 10.245.0.0/26
    deleted: "false"
    node: node-2
    state: confirmed
kind: List'''
    open(p,'w').write(t.replace('kind: List', extra, 1) if t.count('kind: List')==1 else t)
case('block-outside-pool','vxlan', "A BlockAffinity 10.245.0.0/26 of node-2 added, outside the pool 10.244.0.0/16",
 ['calico.block.outside-pool'], stray_block)
case('vxlan-pool-says-bgp','vxlan',
 "The IPPool edited to vxlanMode Never (BGP) while node-1 still routes node-2's block through vxlan.calico and its pods keep VXLAN's MTU 1450",
 ['calico.route.pool-mode','calico.pod.mtu'], lambda s: text(f'{s}/cluster/ippools.yaml','vxlanMode: Always','vxlanMode: Never'))
# --- bgp ----------------------------------------------------------------------
case('bgp-route-missing','bgp', "node-1 lost its BGP route 10.244.2.0/26 via 172.18.0.12 dev eth0 proto bird",
 ['calico.route.remote-block'], lambda s: routes(s, lambda rs: [r for r in rs if r.get('dst')!='10.244.2.0/26']))
def not_bird(rs):
    for r in rs:
        if r.get('dst')=='10.244.2.0/26': r['protocol']='static'
    return rs
case('bgp-route-not-bird','bgp', "node-1's route to node-2's block edited to proto static - right next hop, but not bird's",
 ['calico.route.protocol'], lambda s: routes(s, not_bird))
def wrong_peer(rs):
    for r in rs:
        if r.get('dst')=='10.244.2.0/26': r['gateway']='172.18.0.13'
    return rs
case('bgp-next-hop-wrong','bgp', "node-1's BGP route to node-2's block edited to via 172.18.0.13, no node's address",
 ['calico.route.next-hop'], lambda s: routes(s, wrong_peer))
case('bgp-masquerade-everything','bgp', "node-1 nat POSTROUTING with a MASQUERADE of everything leaving eth0 ahead of felix's chain, so pod-to-pod traffic across nodes loses its source",
 ['calico.nat-outgoing.inside-pools'],
 lambda s: text(f'{host(s)}/iptables-save.txt','-A POSTROUTING -m comment --comment "cali:O3lYWMrLQYEMJtB5" -j cali-POSTROUTING','-A POSTROUTING -o eth0 -j MASQUERADE\n-A POSTROUTING -m comment --comment "cali:O3lYWMrLQYEMJtB5" -j cali-POSTROUTING'))
# --- where blocks and pools come from ------------------------------------------
case('blocks-from-pods','vxlan', "blockaffinities.yaml removed - the blocks are derived from the pods' IPs and the pool's blockSize, and every check still holds",
 [], lambda s: os.remove(f'{s}/cluster/blockaffinities.yaml'))
def v3(s):
    p=f'{s}/cluster/ippools.yaml'
    text(p,'apiVersion: crd.projectcalico.org/v1','apiVersion: projectcalico.org/v3')
case('pool-v3','vxlan', "The IPPool written as projectcalico.org/v3 (as calicoctl shows it) - the same pool, every check holds",
 [], v3)
# --- ipip (hand-built: this kernel has no ipip module) ---------------------------
TUNL0 = {"ifindex":9,"ifname":"tunl0","flags":["NOARP","UP","LOWER_UP"],"mtu":1480,"qdisc":"noqueue","operstate":"UNKNOWN","linkmode":"DEFAULT","group":"default","txqlen":1000,"link_type":"ipip","address":"0.0.0.0","broadcast":"0.0.0.0","promiscuity":0,"allmulti":0,"min_mtu":0,"max_mtu":0,"linkinfo":{"info_kind":"ipip","info_data":{"proto":"ipip","remote":"any","local":"any","ttl":0,"pmtudisc":True}}}
def ipip(s, pool_mode='Always', via_tunnel=True, mtu=1480):
    text(f'{s}/cluster/ippools.yaml','ipipMode: Never',f'ipipMode: {pool_mode}')
    for node, addr in [('node-1','10.244.1.0'),('node-2','10.244.2.0')]:
        text(f'{s}/cluster/nodes.yaml',f'      projectcalico.org/IPv4Address: 172.18.0.{11 if node=="node-1" else 12}/24\n',
             f'      projectcalico.org/IPv4Address: 172.18.0.{11 if node=="node-1" else 12}/24\n      projectcalico.org/IPv4IPIPTunnelAddr: {addr}\n')
    tunl0=dict(TUNL0, mtu=mtu)
    def veths(ls):
        for l in ls:
            if l['ifname'].startswith('cali'): l['mtu']=1480
        return ls + [tunl0]
    links(s, veths)
    a=jl(f'{host(s)}/ip-addr.json')
    a.append({k:v for k,v in tunl0.items() if k not in ('linkmode','promiscuity','allmulti','min_mtu','max_mtu','linkinfo')} |
             {"addr_info":[{"family":"inet","local":"10.244.1.0","prefixlen":32,"scope":"global","label":"tunl0","valid_life_time":4294967295,"preferred_life_time":4294967295}]})
    jw(f'{host(s)}/ip-addr.json', a)
    def rs(rs):
        for r in rs:
            if r.get('dst')=='10.244.2.0/26' and via_tunnel:
                r.update(dev='tunl0', flags=['onlink'])
        return rs + [{"type":"local","dst":"10.244.1.0","dev":"tunl0","table":"local","protocol":"kernel","scope":"host","prefsrc":"10.244.1.0","flags":[]}]
    routes(s, rs)
IPIP_EDIT = ("the BGP snapshot with the IPPool's ipipMode {mode}, IPv4IPIPTunnelAddr annotations (10.244.N.0), "
             "a tunl0 link (kind ipip, MTU {mtu}, 10.244.1.0/32), {route}, and the pods' veths at MTU 1480")
case('ipip-healthy','bgp', "Hand-built IPIP (no ipip module here) - " + IPIP_EDIT.format(mode='Always', mtu=1480, route='10.244.2.0/26 via 172.18.0.12 dev tunl0 proto bird onlink'),
 [], lambda s: ipip(s))
case('ipip-mtu-wrong','bgp', "Hand-built IPIP as in ipip-healthy, but tunl0 at MTU 1500 - no room for the 20-byte outer header",
 ['calico.ipip.mtu'], lambda s: ipip(s, mtu=1500))
case('ipip-cross-subnet','bgp', "Hand-built IPIP CrossSubnet - " + IPIP_EDIT.format(mode='CrossSubnet', mtu=1480, route='10.244.2.0/26 via 172.18.0.12 dev eth0 proto bird kept (node-2 is on the same subnet)'),
 [], lambda s: ipip(s, pool_mode='CrossSubnet', via_tunnel=False))
case('ipip-routes-bgp','bgp', "Hand-built IPIP as in ipip-healthy, but the route to node-2's block still goes via 172.18.0.12 dev eth0 (BGP) while the pool says ipipMode Always",
 ['calico.route.pool-mode'], lambda s: ipip(s, via_tunnel=False))
