//! The packs' own tests: loading, expressions calling `lib/`, the
//! declarative kinds on the bundled examples, modes, evidence, and the
//! Flannel pack's walker hooks.

use super::*;
use crate::net::Protocol;
use crate::snapshot::netns::DumpFile;

/// A pack of kind rules (it always applies) from its manifest and one script.
fn inline_pack(manifest: &str, script: &str) -> LoadedPacks {
    load_inline(manifest, &[("checks.rhai", script)]).expect("loads")
}

/// A rules pack from its manifest and its `lib/` modules, as loaded:
/// the packs, or every problem as `file:line:col: message`.
fn pack_with_lib(manifest: &str, lib: &[(&str, &str)]) -> Result<LoadedPacks, Vec<String>> {
    let files: Vec<(String, &str)> = lib
        .iter()
        .map(|(name, text)| (format!("lib/{name}.rhai"), *text))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (f.as_str(), *t)).collect();
    load_inline(manifest, &files)
}

/// A pack from its manifest and other files (by path in the pack).
fn load_inline(manifest: &str, files: &[(&str, &str)]) -> Result<LoadedPacks, Vec<String>> {
    let files = std::iter::once((MANIFEST, manifest))
        .chain(files.iter().copied())
        .map(|(file, text)| (file.to_owned(), text.to_owned()))
        .collect();
    let source = PackSource {
        dir: "inline".into(),
        builtin: false,
        files,
    };
    let (loaded, problems) = LoadedPacks::load(vec![source], &[]);
    if problems.is_empty() {
        Ok(loaded)
    } else {
        Err(problems.iter().map(ToString::to_string).collect())
    }
}

/// A pack whose one check compares ip_forward with `expect`.
fn forwarding_expected(expect: &str) -> String {
    format!(
        r#"name: derived
version: 0.1.0
description: ip_forward as a lib function derives it.
engine: ">=0.1.0"
kind: rules
parameters:
  on: {{type: bool, default: true, doc: Forwarding is on.}}
checks:
  - id: derived.node.forwarding
    severity: warning
    scope: node
    kind: sysctl
    key: net.ipv4.ip_forward
    expect: "{expect}"
    message: "${{subject}}: ${{actual}}"
"#
    )
}

const FORWARDING_LIB: &str =
    "fn wanted(params) { if params.on { 1 } else { 0 } }\nfn spin() { loop { } }";

#[test]
fn an_expression_calls_a_lib_function() {
    let snapshot = example();
    let manifest = forwarding_expected("${forwarding::wanted(params)}");
    let loaded = pack_with_lib(&manifest, &[("forwarding", FORWARDING_LIB)]).expect("loads");
    assert!(
        loaded.evaluate_snapshot(&snapshot).is_empty(),
        "1 is wanted and found"
    );

    // The parameter reaches the function: with it off, every node fails.
    let source = PackSource {
        dir: "inline".into(),
        builtin: false,
        files: [
            (MANIFEST.to_owned(), manifest),
            ("lib/forwarding.rhai".to_owned(), FORWARDING_LIB.to_owned()),
        ]
        .into_iter()
        .collect(),
    };
    let off = Override::parse("derived.on=false").expect("an override");
    let (loaded, problems) = LoadedPacks::load(vec![source], &[off]);
    assert!(problems.is_empty(), "{problems:?}");
    let findings = loaded.evaluate_snapshot(&snapshot);
    let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "node/node-1: net.ipv4.ip_forward = 1",
            "node/node-2: net.ipv4.ip_forward = 1"
        ]
    );
}

#[test]
fn a_lib_function_in_an_expression_keeps_the_sandbox_limits() {
    let manifest = forwarding_expected("${forwarding::spin()}");
    let loaded = pack_with_lib(&manifest, &[("forwarding", FORWARDING_LIB)]).expect("loads");
    let findings = loaded.evaluate_snapshot(&example());
    assert_eq!(findings.len(), 2, "{findings:?}");
    for finding in findings {
        assert_eq!(finding.status, FindingStatus::ScriptError);
        assert_eq!(
            finding.about.error_kind,
            Some(sandbox::ScriptErrorKind::TooManyOperations),
            "{}",
            finding.message
        );
    }
}

/// The problems of loading the pack whose check expects `expect`.
fn expression_problems(expect: &str, lib: &str) -> Vec<String> {
    match pack_with_lib(&forwarding_expected(expect), &[("forwarding", lib)]) {
        Ok(_) => Vec::new(),
        Err(problems) => problems,
    }
}

#[test]
fn a_misspelt_lib_function_is_a_load_problem_at_its_position() {
    assert_eq!(
        expression_problems("${forwarding::wantd(params)}", FORWARDING_LIB),
        ["inline/pack.yaml:14:16: in ${forwarding::wantd(params)}: \
              lib/forwarding.rhai has no function wantd (it has: spin, wanted)"]
    );
    assert_eq!(
        expression_problems("${1 + forwarding::wanted()}", FORWARDING_LIB),
        ["inline/pack.yaml:14:20: in ${1 + forwarding::wanted()}: \
              forwarding::wanted takes 1 argument(s), not 0"]
    );
    assert_eq!(
        expression_problems("${forwardin::wanted(params)}", FORWARDING_LIB),
        ["inline/pack.yaml:14:16: in ${forwardin::wanted(params)}: \
              forwardin::wanted: the pack has no lib/forwardin.rhai (its modules: forwarding)"]
    );
    // A private function is not the module's to give.
    assert_eq!(
        expression_problems(
            "${forwarding::wanted(params)}",
            "private fn wanted(params) { 1 }"
        ),
        ["inline/pack.yaml:14:16: in ${forwarding::wanted(params)}: \
              lib/forwarding.rhai has no function wanted (it has: none)"]
    );
}

#[test]
fn a_misspelt_parameter_is_a_load_problem_at_its_position() {
    assert_eq!(
        expression_problems("${if params.onn { 1 } else { 0 }}", FORWARDING_LIB),
        [
            "inline/pack.yaml:14:26: in ${if params.onn { 1 } else { 0 }}: \
              params.onn: the pack has no parameter onn (its parameters: on)"
        ]
    );
    // A declared one, alone or at the head of a chain, is fine.
    for fine in [
        "${if params.on { 1 } else { 0 }}",
        "${params.on.to_string()}",
    ] {
        assert_eq!(
            expression_problems(fine, FORWARDING_LIB),
            Vec::<String>::new(),
            "{fine}"
        );
    }
}

#[test]
fn an_expression_is_one_expression_and_a_broken_module_one_problem() {
    let statements = expression_problems("${let x = 1; x}", FORWARDING_LIB);
    assert_eq!(statements.len(), 1, "{statements:?}");
    assert!(
        statements[0].starts_with("inline/pack.yaml:14:16: in ${let x = 1; x}:"),
        "{statements:?}"
    );
    // A variable the scope lacks is refused though a module is imported.
    let undefined = expression_problems("${forwarding::wanted(parms)}", FORWARDING_LIB);
    assert_eq!(
        undefined,
        ["inline/pack.yaml:14:35: in ${forwarding::wanted(parms)}: Undefined variable: parms"]
    );
    // The module's syntax error is the one problem, not one per caller.
    let broken = expression_problems("${forwarding::wanted(params)}", "fn wanted(params) { 1 +");
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(
        broken[0].starts_with("inline/lib/forwarding.rhai:"),
        "{broken:?}"
    );
}

/// The findings of one check, `check` (its scope and kind with their
/// fields), of a rules pack on the example at `snapshot`.
fn one_check_findings(snapshot: &str, check: &str) -> Vec<Finding> {
    let manifest = format!(
        r#"name: kinds
version: 0.1.0
description: One check.
engine: ">=0.1.0"
kind: rules
checks:
  - id: kinds.one.check
    severity: warning
{check}
"#
    );
    let (snapshot, problems) = Snapshot::load(Path::new(snapshot)).expect("the example loads");
    assert!(problems.is_empty(), "{problems:?}");
    inline_pack(&manifest, "").evaluate_snapshot(&Arc::new(snapshot))
}

/// The findings of one node check, `kind` and its fields, on node-1 of
/// the example at `snapshot`, as `STATUS: MESSAGE; expected EXPECTED @ EVIDENCE`.
fn node_1_findings(snapshot: &str, kind: &str) -> Vec<String> {
    let check = format!(
        "    scope: node\n    when: ${{netns.node == \"node-1\"}}\n{kind}\n    message: \"${{actual}}\""
    );
    one_check_findings(snapshot, &check)
        .into_iter()
        .map(|f| {
            let evidence: Vec<String> = f
                .evidence
                .iter()
                .map(|e| {
                    let file = e.file.file_name().map(|n| n.to_string_lossy().into_owned());
                    format!("{}:{:?}:{:?}", file.unwrap_or_default(), e.line, e.column)
                })
                .collect();
            format!(
                "{}: {}; expected {} @ {}",
                f.status,
                f.message,
                f.expected.unwrap_or_default(),
                evidence.join(" ")
            )
        })
        .collect()
}

const VXLAN: &str = "examples/flannel-vxlan";
const NFTABLES: &str = "examples/flannel-vxlan-nftables-real";

#[test]
fn a_jump_kind_finds_the_iptables_jump_and_points_at_the_chain() {
    let kind = |table: &str, chain: &str, target: &str| {
        format!("    kind: jump\n    table: {table}\n    chain: {chain}\n    target: {target}")
    };
    assert!(node_1_findings(VXLAN, &kind("nat", "POSTROUTING", "FLANNEL-POSTRTG")).is_empty());
    let line_of = |needle: &str| {
        let text = std::fs::read_to_string(format!("{VXLAN}/nodes/node-1/host/iptables-save.txt"))
            .expect("the dump");
        text.lines()
            .position(|l| l.starts_with(needle))
            .expect("in the dump")
            + 1
    };
    assert_eq!(
        node_1_findings(VXLAN, &kind("nat", "PREROUTING", "FLANNEL-POSTRTG")),
        [format!(
            "failed: nat PREROUTING does not jump to FLANNEL-POSTRTG; \
                 expected -A PREROUTING -j FLANNEL-POSTRTG in the nat table @ iptables-save.txt:Some({}):Some(1)",
            line_of(":PREROUTING")
        )]
    );
    assert_eq!(
        node_1_findings(VXLAN, &kind("filter", "FORWARD", "CALI-FORWARD")),
        [format!(
            "failed: no CALI-FORWARD chain in the filter table; \
                 expected -A FORWARD -j CALI-FORWARD in the filter table @ iptables-save.txt:Some({}):Some(1)",
            line_of("*filter")
        )]
    );
    // Several jumps, one failure each.
    let both = "    kind: jump\n    jumps:\n      - {table: nat, chain: OUTPUT, target: FLANNEL-POSTRTG}\n      - {table: filter, chain: FORWARD, target: FLANNEL-FWD}";
    let found = node_1_findings(VXLAN, both);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("failed: nat OUTPUT does not jump to FLANNEL-POSTRTG"),
        "{found:?}"
    );
}

#[test]
fn a_jump_kind_with_a_family_reads_the_nftables_ruleset() {
    let kind = |chain: &str, target: &str| {
        format!(
            "    kind: jump\n    family: ip\n    table: kube-proxy\n    chain: {chain}\n    target: {target}"
        )
    };
    assert!(node_1_findings(NFTABLES, &kind("nat-prerouting", "services")).is_empty());
    // A goto in a verdict map written in the rule is a jump too.
    assert!(
        node_1_findings(
            NFTABLES,
            &kind(
                "service-37MS2T3Z-default/web-affinity/tcp/http",
                "endpoint-OCJASRAS-default/web-affinity/tcp/http__10.244.0.3/8080"
            )
        )
        .is_empty()
    );
    let found = node_1_findings(NFTABLES, &kind("nat-output", "masquerading"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
            found[0].starts_with(
                "failed: chain nat-output of table ip kube-proxy does not jump to masquerading; \
                 expected a rule of chain nat-output in table ip kube-proxy that jumps or goes to masquerading @ nft-ruleset.json:Some(1):Some("
            ),
            "{found:?}"
        );
    assert_eq!(
        node_1_findings(NFTABLES, &kind("nat-output", "no-such-chain")),
        [
            "failed: no chain no-such-chain in table ip kube-proxy; expected a rule of chain \
              nat-output in table ip kube-proxy that jumps or goes to no-such-chain @ nft-ruleset.json:None:None"
        ]
    );
    // Without nft-ruleset.json: cannot tell, never a pass.
    let unknown = node_1_findings(VXLAN, &kind("nat-prerouting", "services"));
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(
        unknown[0].starts_with("cannot tell: nft-ruleset.json of node/node-1 was not collected"),
        "{unknown:?}"
    );
}

#[test]
fn a_device_kind_checks_a_vxlan_devices_vni_port_local_address_and_mac() {
    let device = |fields: &str| format!("    kind: device\n    name: flannel.1\n{fields}");
    let right = "    vni: 1\n    port: 8472\n    local: 172.18.0.11\n    address: 10.244.1.0/32\n    mac: F2:50:C6:F2:EF:FD";
    assert!(
        node_1_findings(VXLAN, &device(right)).is_empty(),
        "flannel.1 as the lab made it"
    );
    let wrong = "    vni: 4096\n    port: 4789\n    local: 172.18.0.12\n    address: 10.244.1.0/24\n    mac: 52:04:a1:8d:72:13";
    let found = node_1_findings(VXLAN, &device(wrong));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
            found[0].starts_with(
                "failed: flannel.1: VNI 1, UDP port 8472, local 172.18.0.11, MAC f2:50:c6:f2:ef:fd, \
                 address 10.244.1.0/32; \
                 expected flannel.1: VNI 4096, UDP port 4789, local 172.18.0.12, MAC 52:04:a1:8d:72:13, address 10.244.1.0/24 @ ip-link.json:Some(1):Some("
            ),
            "{found:?}"
        );
    assert!(found[0].contains(" ip-addr.json:Some("), "{found:?}");
    // An address alone is ip-addr.json's, and the IPv6 link-local address
    // the kernel gives the device is shown only when asked for.
    let address = node_1_findings(VXLAN, &device("    address: 10.244.1.0/24"));
    assert_eq!(address.len(), 1, "{address:?}");
    assert!(
        address[0].starts_with(
            "failed: flannel.1: address 10.244.1.0/32; expected flannel.1: address 10.244.1.0/24 @ ip-addr.json:Some("
        ),
        "{address:?}"
    );
    assert!(
        node_1_findings(VXLAN, &device("    address: fe80::f050:c6ff:fef2:effd/64")).is_empty()
    );
    let link_local = node_1_findings(VXLAN, &device("    address: fe80::1"));
    assert!(
        link_local[0]
            .starts_with("failed: flannel.1: address 10.244.1.0/32, fe80::f050:c6ff:fef2:effd/64;"),
        "{link_local:?}"
    );
    // A field that is () where it is evaluated is not checked.
    assert!(node_1_findings(VXLAN, &device("    vni: ${()}\n    mtu: 1450")).is_empty());
    // A missing device says what it should have been.
    let missing = node_1_findings(
        VXLAN,
        "    kind: device\n    name: flannel.4096\n    device_kind: vxlan\n    vni: 4096",
    );
    assert_eq!(
        missing,
        [
            "failed: no device flannel.4096; expected flannel.4096: kind vxlan, VNI 4096 @ ip-link.json:None:None"
        ]
    );
}

#[test]
fn a_device_kind_checks_a_bridge_ports_hairpin_learning_and_isolation() {
    let ports =
        |fields: &str| format!("    kind: device\n    name: veth*\n    master: cni0\n{fields}");
    assert!(
        node_1_findings(
            VXLAN,
            &ports("    hairpin: true\n    learning: true\n    isolated: false")
        )
        .is_empty(),
        "the bridge plugin's ports: hairpin on, learning on, not isolated"
    );
    let found = node_1_findings(VXLAN, &ports("    hairpin: false"));
    assert_eq!(found.len(), 2, "one per port: {found:?}");
    assert!(
        found[0].starts_with("failed: veth53842afe: hairpin on; expected veth53842afe: master cni0, hairpin off @ ip-link.json:Some("),
        "{found:?}"
    );
    let not_a_port = node_1_findings(
        VXLAN,
        "    kind: device\n    name: eth0\n    isolated: false",
    );
    assert!(
        not_a_port[0].starts_with("failed: eth0: not a bridge port;"),
        "{not_a_port:?}"
    );
}

#[test]
fn a_rule_kind_checks_a_rules_target_text_and_place_in_its_chain() {
    let rule = |fields: &str| format!("    kind: rule\n    table: nat\n{fields}");
    let masquerade = "    chain: FLANNEL-POSTRTG\n    target: MASQUERADE\n    holding: \"! -s 10.244.0.0/16 -d 10.244.0.0/16\"";
    assert!(node_1_findings(VXLAN, &rule(&format!("{masquerade}\n    position: last"))).is_empty());
    assert!(node_1_findings(VXLAN, &rule(&format!("{masquerade}\n    position: 6"))).is_empty());
    assert_eq!(
        node_1_findings(VXLAN, &rule(&format!("{masquerade}\n    position: 1"))),
        [
            "failed: nat FLANNEL-POSTRTG's rule 6 of 6 is `-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.0.0/16 -m comment --comment \"flanneld masq\" -j MASQUERADE --random-fully`; \
             expected -A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.0.0/16 -j MASQUERADE in the nat table, rule 1 of the chain @ iptables-save.txt:Some(54):Some(1)"
        ]
    );
    let jump = "    chain: POSTROUTING\n    target: FLANNEL-POSTRTG";
    assert!(node_1_findings(VXLAN, &rule(&format!("{jump}\n    position: 2"))).is_empty());
    assert_eq!(
        node_1_findings(
            VXLAN,
            &rule(&format!("{jump}\n    holding: \"! --dst-type LOCAL\""))
        ),
        [
            "failed: nat POSTROUTING sends to FLANNEL-POSTRTG only by `-A POSTROUTING -m comment --comment \"flanneld masq\" -j FLANNEL-POSTRTG`; \
             expected -A POSTROUTING ! --dst-type LOCAL -j FLANNEL-POSTRTG in the nat table @ iptables-save.txt:Some(48):Some(1)"
        ]
    );
    assert_eq!(
        node_1_findings(
            VXLAN,
            &rule("    chain: POSTROUTING\n    target: KIND-MASQ-AGENT")
        ),
        ["failed: nat POSTROUTING has no rule -j KIND-MASQ-AGENT; \
             expected -A POSTROUTING -j KIND-MASQ-AGENT in the nat table @ iptables-save.txt:Some(34):Some(1)"]
    );
}

#[test]
fn a_masquerade_kind_asks_nat_postrouting_of_each_source_and_destination() {
    let masquerade = |fields: &str| format!("    kind: masquerade\n    from: 10.244.1.2\n{fields}");
    assert!(
        node_1_findings(
            VXLAN,
            &masquerade("    kept: ${[\"10.244.2.2\"]}\n    masqueraded: 203.0.113.1")
        )
        .is_empty(),
        "flanneld's rules: the cluster network kept, the internet masqueraded"
    );
    assert_eq!(
        node_1_findings(
            VXLAN,
            &masquerade("    kept: 203.0.113.1\n    masqueraded: 10.244.2.2")
        ),
        [
            "failed: traffic from 10.244.1.2 to 10.244.2.2 keeps its source address; expected traffic from 10.244.1.2 to 10.244.2.2 is masqueraded @ iptables-save.txt:Some(34):Some(1)",
            "failed: traffic from 10.244.1.2 to 203.0.113.1 is masqueraded; expected traffic from 10.244.1.2 to 203.0.113.1 keeps its source address @ iptables-save.txt:Some(34):Some(1)",
        ]
    );
    // No source (`()`): nothing to ask.
    assert!(
        node_1_findings(
            VXLAN,
            "    kind: masquerade\n    from: ${()}\n    kept: 203.0.113.1"
        )
        .is_empty()
    );
}

#[test]
fn a_datapath_entry_kind_checks_entries_and_fields_of_a_datapath_file() {
    const CILIUM: &str = "examples/cilium-vxlan";
    let entry = |fields: &str| format!("    kind: datapath_entry\n{fields}");
    assert!(
        node_1_findings(
            CILIUM,
            &entry("    file: ipcache\n    key: ${[\"10.244.0.59/32\", \"0.0.0.0/0\"]}")
        )
        .is_empty()
    );
    assert!(
        node_1_findings(
            CILIUM,
            &entry("    file: status\n    field: cilium.state\n    expect: Ok")
        )
        .is_empty()
    );
    assert_eq!(
        node_1_findings(CILIUM, &entry("    file: ipcache\n    key: 10.244.9.9/32")),
        [
            "failed: datapath/ipcache.json has no entry 10.244.9.9/32; expected an entry 10.244.9.9/32 in datapath/ipcache.json @ ipcache.json:None:None"
        ]
    );
    assert_eq!(
        node_1_findings(
            CILIUM,
            &entry("    file: status\n    field: cilium.state\n    expect: Failure")
        ),
        [
            "failed: cilium.state is Ok in datapath/status.json; expected cilium.state Failure in datapath/status.json @ status.json:None:None"
        ]
    );
    assert_eq!(
        node_1_findings(CILIUM, &entry("    file: status\n    field: cilium.mood")),
        [
            "failed: datapath/status.json says nothing of cilium.mood; expected cilium.mood in datapath/status.json @ status.json:None:None"
        ]
    );
    // A file the dump does not hold: cannot tell, never a pass.
    let unknown = node_1_findings(CILIUM, &entry("    file: no-such-map"));
    assert!(
        unknown[0].starts_with("cannot tell: datapath/no-such-map.json of"),
        "{unknown:?}"
    );
}

/// What an object check of `kind` about `object` objects says on the VXLAN
/// example, as `status: message; expected …`.
fn object_findings(object: &str, kind: &str) -> Vec<String> {
    let check = format!(
        "    scope: object\n    object: {{kind: {object}}}\n{kind}\n    message: \"${{subject}}: ${{actual}}\""
    );
    let mut found: Vec<String> = one_check_findings(VXLAN, &check)
        .into_iter()
        .map(|f| {
            format!(
                "{}: {}; expected {}",
                f.status,
                f.message,
                f.expected.unwrap_or_default()
            )
        })
        .collect();
    found.sort();
    found
}

#[test]
fn a_within_kind_checks_an_address_or_network_lies_in_one_of_networks() {
    let within = |networks: &str| {
        format!("    kind: within\n    value: ${{pod.ip}}\n    networks: {networks}")
    };
    assert!(object_findings("Pod", &within("10.244.0.0/16")).is_empty());
    assert!(
        object_findings("Pod", &within("${()}")).is_empty(),
        "no networks: nothing to check"
    );
    assert_eq!(
        object_findings("Pod", &within("${[\"10.0.0.0/16\", \"10.244.2.0/24\"]}")),
        [
            "failed: Pod default/web-0: 10.244.1.2 is in none of 10.0.0.0/16, 10.244.2.0/24; expected 10.244.1.2 within 10.0.0.0/16 or 10.244.2.0/24",
            "failed: Pod default/web-1: 10.244.1.3 is in none of 10.0.0.0/16, 10.244.2.0/24; expected 10.244.1.3 within 10.0.0.0/16 or 10.244.2.0/24",
        ]
    );
}

#[test]
fn an_annotation_kind_wants_the_annotation_with_its_value() {
    let key = "    kind: annotation\n    key: flannel.alpha.coreos.com/backend-type";
    assert!(object_findings("Node", &format!("{key}\n    expect: vxlan")).is_empty());
    assert!(object_findings("Node", &format!("{key}\n    expect: ${{()}}")).is_empty());
    assert_eq!(
        object_findings("Node", &format!("{key}\n    expect: host-gw"))[0],
        "failed: Node node-1: annotation flannel.alpha.coreos.com/backend-type: vxlan; expected annotation flannel.alpha.coreos.com/backend-type: host-gw"
    );
    assert_eq!(
        object_findings("Node", "    kind: annotation\n    key: example.org/missing")[0],
        "failed: Node node-1: no annotation example.org/missing; expected annotation example.org/missing"
    );
}

#[test]
fn a_ready_pod_kind_wants_a_ready_pod_with_the_label_on_the_node() {
    assert!(object_findings("Node", "    kind: ready_pod\n    label: app=web").is_empty());
    assert_eq!(
        object_findings("Node", "    kind: ready_pod\n    label: app=agent"),
        [
            "failed: Node node-1: no pod labelled app=agent runs on node-1; expected a Ready pod labelled app=agent on node-1",
            "failed: Node node-2: no pod labelled app=agent runs on node-2; expected a Ready pod labelled app=agent on node-2",
        ]
    );
}

#[test]
fn neighbour_and_fdb_kinds_name_the_entry_found_instead() {
    assert!(node_1_findings(VXLAN, "    kind: neighbour\n    dst: 10.244.2.0\n    dev: flannel.1\n    lladdr: 52:04:A1:8D:72:13").is_empty());
    let neighbour = node_1_findings(
        VXLAN,
        "    kind: neighbour\n    dst: 10.244.2.0\n    dev: flannel.1\n    lladdr: 52:04:a1:8d:72:14",
    );
    assert_eq!(neighbour.len(), 1, "{neighbour:?}");
    assert!(
            neighbour[0].starts_with("failed: neighbour 10.244.2.0 on flannel.1 has lladdr 52:04:a1:8d:72:13 (PERMANENT); \
                 expected neighbour 10.244.2.0 dev flannel.1 lladdr 52:04:a1:8d:72:14 @ ip-neigh.json:Some(1):Some("),
            "{neighbour:?}"
        );
    let fdb = node_1_findings(
        VXLAN,
        "    kind: fdb\n    dev: flannel.1\n    mac: 52:04:a1:8d:72:13\n    dst: 172.18.0.13",
    );
    assert_eq!(fdb.len(), 1, "{fdb:?}");
    assert!(
            fdb[0].starts_with("failed: the FDB entry for 52:04:a1:8d:72:13 on flannel.1 sends to 172.18.0.12; \
                 expected fdb 52:04:a1:8d:72:13 dev flannel.1 dst 172.18.0.13 @ bridge-fdb.json:Some(1):Some("),
            "{fdb:?}"
        );
    let route = node_1_findings(
        VXLAN,
        "    kind: route\n    dst: 10.244.2.0/24\n    via: 10.244.2.0\n    onlink: ${false}",
    );
    assert!(route.is_empty(), "{route:?}");
    let not_onlink = node_1_findings(
        VXLAN,
        "    kind: route\n    dst: 10.244.9.0/24\n    via: 10.244.9.0\n    onlink: true",
    );
    assert_eq!(
        not_onlink,
        [
            "failed: no route to 10.244.9.0/24 in table main; expected 10.244.9.0/24 via 10.244.9.0 onlink (table main) @ ip-route.json:None:None"
        ]
    );
}

#[test]
fn a_script_check_says_what_it_expected_itself() {
    let manifest = r#"name: said
version: 0.1.0
description: A script check with expected.
engine: ">=0.1.0"
kind: rules
checks:
  - id: said.node.check
    severity: warning
    scope: node
    kind: script
    function: check
    expected: the pack's words
    message: "${actual}"
"#;
    assert_eq!(
        load_inline(manifest, &[("checks.rhai", "fn check(ctx) { }")]).err(),
        Some(vec![
            "inline/pack.yaml:12:15: `expected` is for the declarative kinds; \
                 a script check returns its own"
                .to_owned()
        ])
    );
}

fn example() -> Arc<Snapshot> {
    let (snapshot, problems) =
        Snapshot::load(Path::new("examples/flannel-vxlan")).expect("the example loads");
    assert!(problems.is_empty(), "{problems:?}");
    Arc::new(snapshot)
}

/// A CNI pack that no cluster has (its DaemonSet is nowhere) and whose
/// one check fails on every node of the example.
const UNDETECTED_CNI: &str = r#"
name: ghost
version: 0.1.0
description: A CNI nobody runs.
engine: ">=0.1.0"
kind: cni
detect:
  daemonsets: [{namespace: kube-system, name: ghost-node}]
checks:
  - id: ghost.node.forwarding
    doc: Fails wherever ip_forward is 1.
    severity: warning
    scope: node
    kind: sysctl
    key: net.ipv4.ip_forward
    expect: 7
    message: "${subject}: ${actual}"
"#;

#[test]
fn a_cni_pack_chosen_by_hand_applies_though_not_detected() {
    let mut loaded = inline_pack(UNDETECTED_CNI, "");
    let snapshot = example();
    assert!(
        loaded.evaluate_snapshot(&snapshot).is_empty(),
        "not detected, not applied"
    );
    assert!(
        loaded
            .choose_cni("calico")
            .unwrap_err()
            .contains("CNI packs: ghost")
    );
    loaded.choose_cni("ghost").unwrap();
    let findings = loaded.evaluate_snapshot(&snapshot);
    assert_eq!(findings.len(), 2, "one per node: {findings:?}");
    assert!(
        findings
            .iter()
            .all(|f| f.id.as_str() == "ghost.node.forwarding")
    );
}

/// `UNDETECTED_CNI` found by the example's DaemonSet, with a `detect`
/// hook of body `hook_body`: the findings of its snapshot checks, and what
/// its detection found.
fn detected_by_hook(daemon_set: &str, hook_body: &str) -> (Vec<Finding>, Detected) {
    let manifest = UNDETECTED_CNI
        .replace(
            "daemonsets: [{namespace: kube-system, name: ghost-node}]",
            &format!("daemonsets: [{{name: {daemon_set}}}]"),
        )
        .replace("checks:", "hooks: {detect: detect}\nchecks:");
    let loaded = inline_pack(&manifest, &format!("fn detect(ctx) {{ {hook_body} }}"));
    let snapshot = example();
    let pack = loaded.get("ghost").expect("loaded");
    (
        loaded.evaluate_snapshot(&snapshot),
        loaded.detect(pack, &snapshot),
    )
}

#[test]
fn a_detect_hook_rules_out_the_cni_its_signs_name_or_lets_them_stand() {
    let ids = |findings: &[Finding]| -> Vec<String> {
        findings.iter().map(|f| f.id.as_str().to_owned()).collect()
    };
    let both_nodes = ["ghost.node.forwarding", "ghost.node.forwarding"];
    for stands in ["()", "true", "ctx.cluster.nodes().len() > 1"] {
        let (findings, detected) = detected_by_hook("kube-flannel-ds", stands);
        assert_eq!(ids(&findings), both_nodes, "{stands}");
        assert_eq!(detected.signs, ["DaemonSet kube-flannel/kube-flannel-ds"]);
        assert!(detected.applies() && detected.problem.is_none(), "{stands}");
    }
    let (findings, detected) = detected_by_hook("kube-flannel-ds", "false");
    assert!(findings.is_empty(), "{findings:?}");
    assert!(!detected.applies());
    assert_eq!(
        detected.ruled_out.as_deref(),
        Some("its detect hook (detect) says its CNI does not run here")
    );
    let (findings, detected) = detected_by_hook("kube-flannel-ds", r#""another CNI runs here""#);
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(detected.ruled_out.as_deref(), Some("another CNI runs here"));
    // Without its signs the hook is not asked.
    let (findings, detected) = detected_by_hook("ghost-node", r#"throw "asked""#);
    assert!(
        findings.is_empty() && detected.signs.is_empty(),
        "{findings:?}"
    );
    assert!(detected.problem.is_none());
}

#[test]
fn a_detect_hook_that_fails_leaves_the_signs_to_decide_and_is_a_finding() {
    for (body, says) in [
        (r#"throw "no answer""#, "no answer"),
        ("42", "returned 42, not (), a bool or a string"),
    ] {
        let (findings, detected) = detected_by_hook("kube-flannel-ds", body);
        assert!(detected.applies(), "{body}");
        let problem = findings
            .iter()
            .find(|f| f.id.as_str() == "ghost.detect")
            .unwrap_or_else(|| panic!("{body}: {findings:?}"));
        assert_eq!(problem.status, FindingStatus::ScriptError);
        assert!(problem.message.contains(says), "{}", problem.message);
        let checked = findings
            .iter()
            .filter(|f| f.id.as_str() == "ghost.node.forwarding");
        assert_eq!(checked.count(), 2, "{body}: the checks run");
    }
}

const TWO_MODES: &str = r#"
name: two
version: 0.1.0
description: Two modes and a hook that picks one.
engine: ">=0.1.0"
kind: rules
modes:
  first: {doc: Chosen by its when., when: "${true}"}
  second: {doc: Never chosen by its when., when: "${false}"}
hooks: {mode: mode}
"#;

fn chosen(hook_body: &str) -> Result<Option<String>, Box<Finding>> {
    let loaded = inline_pack(TWO_MODES, &format!("fn mode(ctx) {{ {hook_body} }}"));
    let pack = loaded.get("two").expect("loaded");
    loaded.active_mode(pack, &example())
}

#[test]
fn mode_hook_overrules_the_modes_when() {
    assert_eq!(
        chosen(r#""second""#).ok().flatten().as_deref(),
        Some("second")
    );
}

#[test]
fn mode_hook_returning_unit_leaves_the_choice_to_when() {
    assert_eq!(chosen("()").ok().flatten().as_deref(), Some("first"));
}

#[test]
fn mode_hook_naming_no_mode_is_a_pack_finding() {
    let finding = chosen(r#""third""#).expect_err("not a mode");
    assert_eq!(finding.id.as_str(), "two.mode");
    assert_eq!(finding.status, FindingStatus::ScriptError);
    assert!(finding.message.contains("\"third\""), "{}", finding.message);
}

#[test]
fn an_older_packs_intent_section_loads_and_is_not_read() {
    let manifest = format!(
        "{TWO_MODES}intent:\n  encapsulation:\n    - {{kind: vxlan, device: flannel.1, overhead: 50}}\n  pod_mtu: 1450\n"
    );
    let loaded = inline_pack(&manifest, "fn mode(ctx) { () }");
    assert!(loaded.get("two").is_some());
}

fn evidence_of(file: &str) -> Finding {
    evidence_at(file, r#"find: `"dst":"10.244.2.0"`"#)
}

/// The finding of a script check that names `file` and, as the script
/// writes it, where in it (`find: ...`, `line: 1, column: 7`).
fn evidence_at(file: &str, place: &str) -> Finding {
    let manifest = r#"
name: ev
version: 0.1.0
description: One script check that names its evidence.
engine: ">=0.1.0"
kind: rules
checks:
  - id: ev.node.neighbour
    severity: warning
    scope: node
    kind: script
    function: neighbour
    message: "${actual}"
"#;
    let script = format!(
        r#"fn neighbour(ctx) {{
                if ctx.netns.node != "node-1" {{ return; }}
                #{{actual: "a", expected: "b", file: "{file}", {place}}}
            }}"#
    );
    let findings = inline_pack(manifest, &script).evaluate_snapshot(&example());
    assert_eq!(findings.len(), 1, "{findings:?}");
    findings.into_iter().next().expect("one finding")
}

#[test]
fn script_check_evidence_is_located_in_the_subjects_dump() {
    let finding = evidence_of(DumpFile::IpNeigh.name());
    assert_eq!(finding.status, FindingStatus::Failed);
    let [evidence] = finding.evidence.as_slice() else {
        panic!("one piece of evidence: {:?}", finding.evidence);
    };
    assert!(
        evidence
            .file
            .ends_with("examples/flannel-vxlan/nodes/node-1/host/ip-neigh.json"),
        "{evidence}"
    );
    assert_eq!((evidence.line, evidence.column), (Some(1), Some(3)));
}

#[test]
fn script_check_evidence_may_give_its_place_without_text_to_find() {
    let finding = evidence_at(DumpFile::IpNeigh.name(), "line: 1, column: 7");
    let [evidence] = finding.evidence.as_slice() else {
        panic!("one piece of evidence: {:?}", finding.evidence);
    };
    assert!(
        evidence.file.ends_with("node-1/host/ip-neigh.json"),
        "{evidence}"
    );
    assert_eq!((evidence.line, evidence.column), (Some(1), Some(7)));
}

#[test]
fn script_check_evidence_outside_the_dump_files_is_a_script_error() {
    let finding = evidence_of("../../../cluster/nodes.yaml");
    assert_eq!(finding.status, FindingStatus::ScriptError);
    assert!(
        finding.message.contains("not a dump file"),
        "{}",
        finding.message
    );
}

/// A Service check whose script names `objects` as its evidence.
fn object_evidence_of(objects: &str) -> Finding {
    let manifest = r#"
name: ev
version: 0.1.0
description: One object check that names the objects it rests on.
engine: ">=0.1.0"
kind: rules
checks:
  - id: ev.service.slices
    severity: warning
    scope: object
    object: {kind: Service}
    kind: script
    function: slices
    message: "${actual}"
"#;
    let script = format!(
        r#"fn slices(ctx) {{
                let svc = ctx.object;
                let slices = ctx.cluster.endpoint_slices(svc.namespace, svc.name);
                #{{actual: "a", objects: {objects}}}
            }}"#
    );
    let findings = inline_pack(manifest, &script).evaluate_snapshot(&example());
    assert_eq!(findings.len(), 1, "{findings:?}");
    findings.into_iter().next().expect("one finding")
}

#[test]
fn script_check_evidence_may_be_the_objects_it_rests_on() {
    let finding = object_evidence_of("slices.map(|s| s.source)");
    assert_eq!(finding.status, FindingStatus::Failed, "{finding:?}");
    let [evidence] = finding.evidence.as_slice() else {
        panic!("the service's one slice: {:?}", finding.evidence);
    };
    assert!(
        evidence
            .file
            .ends_with("examples/flannel-vxlan/cluster/endpointslices.yaml"),
        "{evidence}"
    );
    assert!(evidence.line.is_some_and(|line| line > 1), "{evidence}");
}

#[test]
fn script_check_objects_that_are_no_objects_source_are_a_script_error() {
    for objects in [
        r#"["/etc/passwd:1"]"#,
        r#"[`${ctx.cluster.service("default", "web").source}x`]"#,
        r#""not an array""#,
    ] {
        let finding = object_evidence_of(objects);
        assert_eq!(finding.status, FindingStatus::ScriptError, "{objects}");
        assert!(finding.message.contains("source"), "{}", finding.message);
    }
}

fn hop_on_node_1(dst: &str) -> Arc<HopScope> {
    hop_in(
        example(),
        crate::snapshot::NetnsId::Host {
            node: "node-1".into(),
        },
        dst,
    )
}

fn hop_in(snapshot: Arc<Snapshot>, netns: crate::snapshot::NetnsId, dst: &str) -> Arc<HopScope> {
    let packet = Packet {
        src: "10.244.1.2".parse().expect("ip"),
        dst: dst.parse().expect("ip"),
        protocol: Protocol::Tcp,
        sport: Some(40000),
        dport: Some(8080),
        mark: 0,
        length: 1400,
    };
    Arc::new(HopScope {
        in_iface: Some("cni0".into()),
        forwarding: true,
        ..HopScope::new(snapshot, netns, packet)
    })
}

/// The Flannel pack's walker hooks on the VXLAN example, whose
/// net-conf.json says vxlan and 10.244.0.0/16.
#[test]
fn flannel_hooks_encapsulate_to_the_peer_and_masquerade_what_leaves_the_network() {
    let source = PackSource::read(Path::new("plugins/flannel")).expect("readable");
    let (loaded, problems) = LoadedPacks::load(vec![source], &[]);
    assert!(problems.is_empty(), "{problems:?}");
    let call = |hook: &str, dst: &str| {
        let hop = hop_on_node_1(dst);
        let packet = Dynamic::from(hop.packet.clone());
        loaded
            .call_hook("flannel", hook, &hop, packet)
            .unwrap_or_else(|finding| panic!("{hook}: {}", finding.message))
    };
    let encap = call("encapsulation", "10.244.2.3")
        .try_cast::<rhai::Map>()
        .expect("remote pod traffic is encapsulated");
    let field = |name: &str| encap.get(name).map(host::display).unwrap_or_default();
    assert_eq!(field("kind"), "vxlan");
    assert_eq!(field("dev"), "flannel.1");
    assert_eq!(field("outer_src"), "172.18.0.11");
    assert_eq!(field("outer_dst"), "172.18.0.12");
    assert_eq!(
        (field("vni"), field("port"), field("overhead")),
        ("1".into(), "8472".into(), "50".into())
    );
    assert!(
        call("encapsulation", "10.244.1.3").is_unit(),
        "a local pod is not"
    );
    assert_eq!(call("masquerade", "10.244.2.3").as_bool(), Ok(false));
    assert_eq!(call("masquerade", "8.8.8.8").as_bool(), Ok(true));
}

/// Flannel's next_hop and pod_interface on node-2 of the partial VXLAN
/// example, whose dump is missing: the walker's stand-in for it. Each
/// backend routes another node's pod CIDR its own way; the host
/// interface cannot be named without the node's dump.
#[test]
fn flannel_next_hop_routes_each_pod_cidr_as_the_backend_does_without_the_nodes_dump() {
    let (snapshot, problems) =
        Snapshot::load(Path::new("examples/flannel-vxlan-partial")).expect("the example loads");
    assert!(problems.is_empty(), "{problems:?}");
    let snapshot = Arc::new(snapshot);
    let node_2 = crate::snapshot::NetnsId::Host {
        node: "node-2".into(),
    };
    let web_3 = crate::snapshot::NetnsId::Pod {
        node: "node-2".into(),
        namespace: "default".into(),
        name: "web-3".into(),
    };
    let next_hop = |backend: &str, netns: &crate::snapshot::NetnsId, dst: &str| {
        let source = PackSource::read(Path::new("plugins/flannel")).expect("readable");
        let set = Override::parse(&format!("flannel.backend={backend}")).expect("override");
        let (loaded, problems) = LoadedPacks::load(vec![source], &[set]);
        assert!(problems.is_empty(), "{problems:?}");
        let hop = hop_in(snapshot.clone(), netns.clone(), dst);
        let packet = Dynamic::from(hop.packet.clone());
        let answer = loaded
            .call_hook("flannel", "next_hop", &hop, packet)
            .unwrap_or_else(|finding| panic!("{backend}: {}", finding.message));
        if answer.is_unit() {
            return "()".to_string();
        }
        let map = answer.try_cast::<rhai::Map>().expect("a map");
        let field = |name: &str| map.get(name).map(host::display).unwrap_or_default();
        format!("dev {} via {}", field("dev"), field("via"))
    };
    assert_eq!(
        next_hop("vxlan", &node_2, "10.244.1.2"),
        "dev flannel.1 via 10.244.1.0"
    );
    assert_eq!(
        next_hop("ipip", &node_2, "10.244.1.2"),
        "dev flannel.ipip via 172.18.0.11"
    );
    assert_eq!(
        next_hop("host-gw", &node_2, "10.244.1.2"),
        "dev  via 172.18.0.11"
    );
    assert_eq!(next_hop("vxlan", &node_2, "10.244.2.2"), "dev cni0 via ");
    assert_eq!(
        next_hop("vxlan", &node_2, "8.8.8.8"),
        "()",
        "not flannel's to route"
    );
    assert_eq!(
        next_hop("vxlan", &web_3, "10.244.1.2"),
        "dev eth0 via 10.244.2.1"
    );

    let source = PackSource::read(Path::new("plugins/flannel")).expect("readable");
    let (loaded, _) = LoadedPacks::load(vec![source], &[]);
    let hop = hop_in(snapshot.clone(), node_2, "10.244.2.3");
    let pod = PodRef::new(&snapshot, "default", "web-3").expect("web-3");
    let interface = loaded
        .call_hook("flannel", "pod_interface", &hop, Dynamic::from(pod))
        .expect("answers")
        .try_cast::<rhai::Map>()
        .expect("a map");
    assert!(interface["host_veth"].is_unit(), "named at random");
    assert_eq!(host::display(&interface["pod_dev"]), "eth0");
    assert!(
        interface["mtu"].is_unit(),
        "no host MTU without the node's dump"
    );
}

/// A composed CNI pack over the example (Flannel VXLAN): it lends itself
/// Flannel's VXLAN checks and calls Flannel's `lib/` in its own check; it
/// applies where the example's ConfigMap `kube-flannel-cfg` is, as a
/// composition would be detected by its own marker.
const COMPOSED: &str = r#"
name: duo
version: 0.1.0
description: Flannel's routing with a check of its own.
engine: ">=0.1.0"
contract: 2
kind: cni
detect:
  configmaps: [{name: kube-flannel-cfg, key: net-conf.json}]
composes:
  - pack: flannel
    checks: [flannel.vxlan.*, flannel.sysctl.ip-forward]
parameters:
  vni: {type: int, default: 0, doc: flannel.<VNI>.}
checks:
  - id: duo.vxlan.named
    doc: flannel's device, named by flannel's lib.
    severity: warning
    scope: node
    kind: device
    name: ${flannel::vxlan_device(ctx)}
    message: "${subject}: ${actual}"
"#;

#[test]
fn a_composed_pack_takes_its_parts_checks_and_lib_and_the_parts_lend_only_those() {
    let mut sources = builtin_sources();
    sources.push(PackSource {
        dir: "inline".into(),
        builtin: false,
        files: [(MANIFEST.to_owned(), COMPOSED.to_owned())].into(),
    });
    let (loaded, problems) = LoadedPacks::load(sources, &[]);
    assert!(problems.is_empty(), "{problems:?}");
    let snapshot = example();
    let role = |name: &str| loaded.role(loaded.get(name).expect("loaded"), &snapshot);
    assert!(matches!(role("duo"), Some(Role::Whole)));
    assert!(matches!(role("flannel"), Some(Role::Part { of, .. }) if of.name == "duo"));
    assert!(role("calico").is_none());
    assert_eq!(loaded.cni(&snapshot).map(|p| p.name.as_str()), Some("duo"));
    let everything = |_: &Subject| true;
    let about = About {
        subject: &everything,
        peer: &everything,
        objects: None,
    };
    let ran: Vec<String> = loaded
        .run_snapshot_checks(&snapshot, &about, false)
        .iter()
        .filter_map(|run| run.check)
        .filter(|check| !check.id.starts_with("core.") && !check.id.starts_with("kube-proxy."))
        .filter(|check| !check.id.starts_with("networkpolicy."))
        .map(|check| check.id.clone())
        .collect();
    assert!(ran.contains(&"duo.vxlan.named".to_owned()), "{ran:?}");
    assert!(ran.contains(&"flannel.vxlan.fdb".to_owned()), "{ran:?}");
    assert!(
        ran.contains(&"flannel.sysctl.ip-forward".to_owned()),
        "{ran:?}"
    );
    // Flannel's other checks (its bridge, its routes) are not lent.
    assert!(!ran.contains(&"flannel.bridge.down".to_owned()), "{ran:?}");
    assert!(
        ran.iter()
            .all(|id| id.starts_with("duo.") || id.starts_with("flannel."))
    );
}

#[test]
fn a_composition_of_what_is_not_there_is_a_problem_at_its_place() {
    let bad = COMPOSED
        .replace("- pack: flannel", "- pack: weave")
        .replace("[flannel.vxlan.*, flannel.sysctl.ip-forward]", "[weave.*]");
    let problems = load_inline(&bad, &[]).expect_err("weave is no pack");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("pack.yaml:11:") && p.contains("no other pack named \"weave\"")),
        "{problems:?}"
    );
    let foreign = COMPOSED.replace("flannel.sysctl.ip-forward]", "calico.pod.route]");
    let problems = load_inline(&foreign, &[]).expect_err("not a check of flannel");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("\"calico.pod.route\" must be a check id of flannel")),
        "{problems:?}"
    );
    let rules = COMPOSED.replace("kind: cni", "kind: rules");
    let problems = load_inline(&rules, &[]).expect_err("a rules pack composes nothing");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("only a cni pack composes others")),
        "{problems:?}"
    );
}

/// A rules pack whose one node check prints its subject each time it runs
/// and fails on every node.
const PRINTS_ITS_SUBJECT: &str = r#"
name: printing
version: 0.1.0
description: One script check that says when it runs.
engine: ">=0.1.0"
kind: rules
checks:
  - id: printing.node.ran
    severity: warning
    scope: node
    kind: script
    function: ran
    message: "${actual}"
"#;

#[test]
fn a_snapshot_check_runs_once_per_subject_of_one_snapshot() {
    let loaded = inline_pack(
        PRINTS_ITS_SUBJECT,
        r#"fn ran(ctx) { print(ctx.netns.node); #{actual: ctx.netns.node, expected: "none"} }"#,
    );
    let snapshot = example();
    let only_node_1 = |subject: &Subject| {
        *subject
            == Subject::Node {
                name: "node-1".into(),
            }
    };
    let about = About {
        subject: &only_node_1,
        peer: &only_node_1,
        objects: None,
    };
    let (first, printed) =
        sandbox::capturing_output(|| loaded.evaluate_snapshot_about(&snapshot, &about));
    assert_eq!(printed, ["print: node-1"]);
    // Node-1 again, with node-2 besides: only node-2 is new.
    let (everything, printed) = sandbox::capturing_output(|| loaded.evaluate_snapshot(&snapshot));
    assert_eq!(printed, ["print: node-2"]);
    let (again, printed) =
        sandbox::capturing_output(|| loaded.evaluate_snapshot_about(&snapshot, &about));
    assert!(printed.is_empty(), "{printed:?}");
    assert_eq!(first, again);
    let messages: Vec<&str> = everything.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(messages, ["node-1", "node-2"]);
    // Another snapshot, though of the same directory, is another question.
    let (_, printed) = sandbox::capturing_output(|| loaded.evaluate_snapshot(&example()));
    assert_eq!(printed, ["print: node-1", "print: node-2"]);
}

#[test]
fn what_was_answered_about_one_snapshot_is_not_another_snapshots_answer() {
    let loaded = inline_pack(&forwarding_expected("1"), "");
    assert!(loaded.evaluate_snapshot(&example()).is_empty());
    // node-1 without its sysctls: its forwarding cannot be told.
    let (mut edited, _) = Snapshot::load(Path::new(VXLAN)).expect("the example loads");
    let node_1 = crate::snapshot::NetnsId::Host {
        node: "node-1".into(),
    };
    let entry = edited.namespaces.get_mut(&node_1).expect("node-1's dump");
    entry.dump_mut().sysctls = None;
    let findings = loaded.evaluate_snapshot(&Arc::new(edited));
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].status, FindingStatus::Unknown);
    assert_eq!(
        findings[0].about.subject,
        Subject::Node {
            name: "node-1".into()
        }
    );
}

/// Two hop checks that print when they run: one reads whether the hop is on
/// the way back (and its packet only to say that it is), one the packet's
/// destination.
const READS_THE_HOP: &str = r#"
name: hops
version: 0.1.0
description: Hop checks that read one fact each.
engine: ">=0.1.0"
kind: rules
checks:
  - id: hops.hop.reply
    severity: warning
    scope: hop
    kind: script
    function: reply
    message: "${actual}"
  - id: hops.hop.dst
    severity: warning
    scope: hop
    kind: script
    function: dst
    message: "${actual}"
"#;

#[test]
fn a_hop_check_runs_once_for_the_facts_of_the_hop_it_read() {
    let loaded = inline_pack(
        READS_THE_HOP,
        r#"fn reply(ctx) { print("reply"); if ctx.hop.reply { #{actual: "a reply", expected: "a request"} } }
           fn dst(ctx) { print("dst"); #{actual: `to ${ctx.hop.packet.dst}`, expected: "nowhere"} }"#,
    );
    let snapshot = example();
    let node_1 = || crate::snapshot::NetnsId::Host {
        node: "node-1".into(),
    };
    let at = |hop: &Arc<HopScope>| {
        let (findings, printed) = sandbox::capturing_output(|| loaded.evaluate_hop(hop));
        let messages: Vec<String> = findings.into_iter().map(|f| f.message).collect();
        (messages, printed)
    };
    let request = hop_in(snapshot.clone(), node_1(), "10.244.2.2");
    let (found, printed) = at(&request);
    assert_eq!(printed, ["print: reply", "print: dst"]);
    assert_eq!(found, ["to 10.244.2.2"]);
    // Another destination: the first check read only `reply`, the same.
    let elsewhere = hop_in(snapshot.clone(), node_1(), "10.244.2.3");
    let (found, printed) = at(&elsewhere);
    assert_eq!(printed, ["print: dst"]);
    assert_eq!(found, ["to 10.244.2.3"]);
    // The first hop again, on the way back: the second check read its
    // packet, the same.
    let reply = Arc::new(HopScope {
        reply: true,
        ..(*request).clone()
    });
    let (found, printed) = at(&reply);
    assert_eq!(printed, ["print: reply"]);
    assert_eq!(found, ["a reply", "to 10.244.2.2"]);
    // The same facts in another namespace are another hop's.
    let node_2 = crate::snapshot::NetnsId::Host {
        node: "node-2".into(),
    };
    let (found, printed) = at(&hop_in(snapshot, node_2, "10.244.2.2"));
    assert_eq!(printed, ["print: reply", "print: dst"]);
    assert_eq!(found, ["to 10.244.2.2"]);
}
