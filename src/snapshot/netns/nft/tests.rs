use super::*;

/// A small ruleset in kube-proxy's nftables shape, as `nft -j list ruleset`
/// prints it (one line; split here for reading).
const KUBE_PROXY: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
{"table": {"family": "ip", "name": "kube-proxy", "handle": 1, "comment": "rules for kube-proxy"}},
{"chain": {"family": "ip", "table": "kube-proxy", "name": "nat-prerouting", "handle": 2, "type": "nat", "hook": "prerouting", "prio": -100, "policy": "accept"}},
{"chain": {"family": "ip", "table": "kube-proxy", "name": "services", "handle": 3}},
{"chain": {"family": "ip", "table": "kube-proxy", "name": "service-ABC-default/web/tcp/http", "handle": 4}},
{"map": {"family": "ip", "name": "service-ips", "table": "kube-proxy", "type": ["ipv4_addr", "inet_proto", "inet_service"], "handle": 5, "map": "verdict", "elem": [[{"concat": ["10.96.0.10", "tcp", 80]}, {"goto": {"target": "service-ABC-default/web/tcp/http"}}]]}},
{"rule": {"family": "ip", "table": "kube-proxy", "chain": "nat-prerouting", "handle": 6, "expr": [{"jump": {"target": "services"}}]}},
{"rule": {"family": "ip", "table": "kube-proxy", "chain": "services", "handle": 7, "expr": [{"vmap": {"key": {"concat": [{"payload": {"protocol": "ip", "field": "daddr"}}, {"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "data": "@service-ips"}}]}},
{"rule": {"family": "ip", "table": "kube-proxy", "chain": "services", "handle": 8, "expr": [{"match": {"op": "==", "left": {"fib": {"result": "type", "flags": ["daddr"]}}, "right": "local"}}, {"counter": {"packets": 0, "bytes": 0}}, {"jump": {"target": "nodeports"}}]}},
{"rule": {"family": "ip", "table": "kube-proxy", "chain": "service-ABC-default/web/tcp/http", "handle": 9, "comment": "default/web:http", "expr": [{"match": {"op": "!=", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": {"prefix": {"addr": "10.244.0.0", "len": 16}}}}, {"mangle": {"key": {"meta": {"key": "mark"}}, "value": {"|": [{"meta": {"key": "mark"}}, 16384]}}}, {"dnat": {"family": "ip", "addr": {"map": {"key": {"numgen": {"mode": "random", "mod": 2, "offset": 0}}, "data": {"set": [[0, {"concat": ["10.244.1.2", 8080]}], [1, {"concat": ["10.244.2.2", 8080]}]]}}}}}]}},
{"rule": {"family": "ip", "table": "kube-proxy", "chain": "services", "handle": 10, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}}, {"reject": {"type": "icmp", "expr": "port-unreachable"}}, {"xt": {"type": "match", "name": "u32"}}]}}
]}"#;

#[test]
fn kube_proxys_tables_chains_maps_and_rules_are_read() {
    let (ruleset, issues) = parse(KUBE_PROXY);
    assert!(issues.is_empty(), "{issues:?}");
    let ruleset = ruleset.expect("a ruleset");
    let table = ruleset.table(Family::Ip, "kube-proxy").expect("table");
    assert_eq!(table.chains.len(), 3);
    let prerouting = table.chain("nat-prerouting").expect("chain");
    let base = prerouting.base.as_ref().expect("a base chain");
    assert_eq!(
        (base.kind.clone(), base.hook, base.priority, base.policy),
        (ChainType::Nat, ChainHook::Prerouting, -100, Policy::Accept)
    );
    assert_eq!(prerouting.position.0, 3);
    let map = table.set("service-ips").expect("map");
    assert_eq!(map.map.as_deref(), Some("verdict"));
    assert_eq!(map.key_type, ["ipv4_addr", "inet_proto", "inet_service"]);
    assert_eq!(
        map.elements[0].value,
        Some(Expr::Verdict(Verdict::Goto(
            "service-ABC-default/web/tcp/http".into()
        )))
    );
    let services = table.chain("services").expect("services");
    let texts: Vec<String> = services.rules.iter().map(Rule::text).collect();
    assert_eq!(
        texts,
        [
            "ip daddr . meta l4proto . th dport vmap @service-ips",
            "fib daddr type local counter jump nodeports",
            "ct state established,related reject with icmp port-unreachable xt {\"xt\":{\"name\":\"u32\",\"type\":\"match\"}}",
        ]
    );
    let web = &table
        .chain("service-ABC-default/web/tcp/http")
        .unwrap()
        .rules[0];
    assert_eq!(
        web.text(),
        "ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000 dnat ip to numgen random mod 2 map { 0 : 10.244.1.2 . 8080, 1 : 10.244.2.2 . 8080 } comment \"default/web:http\""
    );
}

#[test]
fn one_malformed_object_is_one_positioned_issue_and_the_rest_is_kept() {
    let text = KUBE_PROXY.replace(r#""handle": 7, "expr""#, r#""handle": 7, "exp""#);
    let (ruleset, issues) = parse(&text);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].line, 8);
    assert_eq!(issues[0].column, Some(1));
    assert!(
        issues[0].message.contains("no \"expr\" array"),
        "{issues:?}"
    );
    let table = ruleset.unwrap();
    assert_eq!(table.tables[0].chain("services").unwrap().rules.len(), 2);
}

#[test]
fn a_rule_of_a_chain_never_listed_is_an_issue() {
    let text = KUBE_PROXY.replace(
        r#""chain": "nat-prerouting", "handle": 6"#,
        r#""chain": "nope", "handle": 6"#,
    );
    let (_, issues) = parse(&text);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].line, 7);
    assert!(
        issues[0]
            .message
            .contains("chain nope of table ip kube-proxy is not listed")
    );
}

#[test]
fn what_is_not_nft_json_is_refused_with_its_position() {
    for text in [
        "",
        "[]",
        "{\"nftables\": 3}",
        "{\"nftables\": [\n{\"table\": ",
    ] {
        let (ruleset, issues) = parse(text);
        assert!(ruleset.is_none(), "{text}");
        assert_eq!(issues.len(), 1, "{text}: {issues:?}");
    }
}

#[test]
fn expressions_nested_without_end_are_refused_not_overflowing_the_stack() {
    let mut deep = String::from("1");
    for _ in 0..40 {
        deep = format!("{{\"&\": [{deep}, 1]}}");
    }
    let text = format!(
        r#"{{"nftables": [{{"table": {{"family": "ip", "name": "t"}}}}, {{"chain": {{"family": "ip", "table": "t", "name": "c"}}}}, {{"rule": {{"family": "ip", "table": "t", "chain": "c", "expr": [{{"match": {{"op": "==", "left": {deep}, "right": 1}}}}]}}}}]}}"#
    );
    let (ruleset, issues) = parse(&text);
    assert!(ruleset.is_some());
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert!(issues[0].message.contains("nested more than"), "{issues:?}");
}

#[test]
fn named_priorities_are_the_kernels_numbers() {
    assert_eq!(read::named_priority("dstnat"), Some(-100));
    assert_eq!(read::named_priority("srcnat + 10"), Some(110));
    assert_eq!(read::named_priority("filter - 5"), Some(-5));
    assert_eq!(read::named_priority("mangle +"), None);
}

#[test]
fn positions_found_from_the_last_object_are_those_counted_from_the_start() {
    // One object per line, then many on one line after a multi-byte comment.
    let text = KUBE_PROXY.replace("{\"metainfo\"", "{\"metainfo\": {\"é\": \"ü\"}}, {\"x\"");
    let one_line = text.replace('\n', " ");
    for text in [text, one_line] {
        let (ruleset, _) = parse(&text);
        let table = &ruleset.expect("a ruleset").tables[0];
        for chain in &table.chains {
            let at = text.find(&format!("\"name\": \"{}\"", chain.name)).unwrap();
            let start = text[..at].rfind("{\"chain\"").unwrap();
            assert_eq!(
                chain.position,
                crate::snapshot::problem::line_col(&text, start),
                "{}",
                chain.name
            );
        }
    }
}
