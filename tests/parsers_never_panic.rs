//! Property test: arbitrary input never makes a dump parser panic, and every
//! issue a parser reports points at a line that exists in its input.

use proptest::prelude::*;
use skoop::snapshot::netns::parse_any_dump;

/// Fragments of the real formats, so that generated inputs get past the first
/// token and exercise the deeper paths of each parser.
const FRAGMENTS: &[&str] = &[
    "*filter",
    "*nat",
    ":INPUT ACCEPT [0:0]",
    ":KUBE-SVC-X - [0:0]",
    "-A",
    "-j",
    "-m",
    "!",
    "--dport",
    "tcp",
    "-s",
    "10.0.0.0/8",
    "\"",
    "\\",
    "COMMIT",
    "[1:2]",
    "create",
    "add",
    "hash:ip,port",
    "-t",
    "10.96.0.1:443",
    "-r",
    "-m",
    "-w",
    "=",
    "net.ipv4.ip_forward",
    "LISTEN",
    "*:8080",
    "[::]:53",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "\"ifname\"",
    "\"dst\"",
    "\"nexthops\"",
    "\"mtu\"",
    "1450",
    "{\"nftables\": [",
    "{\"table\": {\"family\": \"ip\", \"name\": \"t\"}}",
    "{\"chain\": {\"family\": \"ip\", \"table\": \"t\", \"name\": \"c\", \"hook\": \"input\", \"type\": \"filter\", \"prio\": 0}}",
    "{\"rule\": {\"family\": \"ip\", \"table\": \"t\", \"chain\": \"c\", \"expr\": [",
    "{\"match\": {\"op\": \"==\", \"left\":",
    "{\"payload\": {\"protocol\": \"ip\", \"field\": \"daddr\"}}",
    "\"right\":",
    "{\"prefix\": {\"addr\": \"10.0.0.0\", \"len\": 99}}",
    "{\"set\": [",
    "{\"concat\": [",
    "{\"map\": {\"key\":",
    "{\"numgen\": {\"mode\": \"random\", \"mod\": 0}}",
    "{\"elem\": {\"val\":",
    "\"@s\"",
    "null",
    "true",
    "-1",
    "1e400",
    "\n",
    " ",
];

fn fragment_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..64).prop_map(|parts| parts.join(" "))
}

fn assert_issues_inside(text: &str) {
    let lines = text.lines().count().max(1);
    for issue in parse_any_dump(text) {
        assert!(
            issue.line >= 1 && issue.line <= lines + 1,
            "issue at line {} of a {lines}-line input: {issue:?}",
            issue.line
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        assert_issues_inside(&text);
    }

    #[test]
    fn format_fragments_never_panic(text in fragment_text()) {
        assert_issues_inside(&text);
    }
}
