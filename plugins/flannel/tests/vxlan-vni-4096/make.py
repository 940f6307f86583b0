#!/usr/bin/env python3
"""Builds snapshot/ from examples/flannel-vxlan-partial as flanneld would have
left it with VNI 4096 in net-conf.json: the VXLAN device is flannel.4096
(VNI 4096) on node-1, node-2 (not collected) announces VNI 4096. Run from
anywhere; it rewrites snapshot/ beside this file."""
import json
import pathlib
import re
import shutil

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parents[3] / "examples" / "flannel-vxlan-partial"
OUT = HERE / "snapshot"

shutil.rmtree(OUT, ignore_errors=True)
shutil.copytree(SOURCE, OUT, ignore=shutil.ignore_patterns("README.md"))

configmaps = OUT / "cluster" / "configmaps.yaml"
text = configmaps.read_text()
old = '"Type": "vxlan"\n'
assert old in text
configmaps.write_text(text.replace(old, '"Type": "vxlan",\n          "VNI": 4096\n', 1))

nodes = OUT / "cluster" / "nodes.yaml"
text = nodes.read_text()
assert text.count('\\"VNI\\":1,') == 2
nodes.write_text(text.replace('\\"VNI\\":1,', '\\"VNI\\":4096,'))

host = OUT / "nodes" / "node-1" / "host"
for path in host.iterdir():
    text = path.read_text()
    text = text.replace('"flannel.1"', '"flannel.4096"').replace("flannel/1.", "flannel/4096.")
    path.write_text(text)

links = host / "ip-link.json"
data = json.loads(links.read_text())
for link in data:
    if link["ifname"] == "flannel.4096":
        assert link["linkinfo"]["info_data"]["id"] == 1
        link["linkinfo"]["info_data"]["id"] = 4096
links.write_text(json.dumps(data, separators=(",", ":")) + "\n")
