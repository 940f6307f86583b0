use std::path::Path;

use super::*;
use crate::snapshot::cluster::document::parse_yaml;
use crate::snapshot::cluster::{Reading, load_file_text_as};

/// What the general reader makes of `text`'s first document, as JSON.
fn general(text: &str) -> serde_json::Value {
    let (documents, issues) = parse_yaml(text);
    assert!(issues.is_empty(), "{issues:?}");
    documents[0].to_json()
}

/// Both readers give the same value for `text`, or this one refuses it.
fn same_or_refused(text: &str) -> bool {
    match value_of::<serde_json::Value>(text) {
        Ok(value) => {
            assert_eq!(value, general(text), "{text:?}");
            true
        }
        Err(Refused) => false,
    }
}

#[test]
fn plain_scalars_resolve_as_the_general_reader_resolves_them() {
    let taken = [
        "web-0",
        "10.244.1.5",
        "fd00:10:244::5",
        "2001:db8::1",
        "10.244.0.0/16",
        "100m",
        "10Gi",
        "80",
        "0",
        "-1",
        "true",
        "false",
        "null",
        "~",
        "IfNotPresent",
        "a:b",
        "k8s.gcr.io/pause:3.9",
        "a, b [c] {d}",
        "2024-05-02T09:14:03Z",
        "Running",
    ];
    for scalar in taken {
        let text = format!("a: {scalar}\n");
        assert!(same_or_refused(&text), "refused {scalar:?}");
    }
    let refused = [
        "yes", "No", "on", "OFF", "y", "True", "NULL", "1.5", "1e3", ".inf", "-.Inf", ".nan",
        "0x1F", "0o17", "017", "1_000", "1:30", "+1", "a #b", "&a x", "*a", "!t x", "[1]",
        "{a: 1}", "'a", "\"a", "|x", ">", "@x", "`x", "%x", "? x",
    ];
    for scalar in refused {
        let text = format!("a: {scalar}\n");
        assert!(!same_or_refused(&text), "took {scalar:?}");
    }
}

#[test]
fn quoted_and_literal_scalars_read_as_the_general_reader_reads_them() {
    for text in [
        "a: \"x \\\" \\\\ \\n \\t \\u00e9 \\x41 \\/\"\n",
        "a: 'it''s'\n",
        "a: \"\"\n",
        "a: ''\n",
        "a: |\n  line 1\n  line 2\n",
        "a: |-\n  line 1\n\n  line 3\n\nb: 1\n",
        "a: |+\n  x\n\n\nb: 1\n",
        "a: |2\n     indented\n  x\n",
        "a: |\n    {\"json\": true}\nb: x\n",
        "a:\n- |\n  in a list\n- x\n",
        "a: |\nb: 1\n",
        "\"quoted key\": 1\n'single': 2\n",
    ] {
        assert!(same_or_refused(text), "refused {text:?}");
    }
    for text in [
        "a: \"two\n  lines\"\n",
        "a: plain\n  continued\n",
        "a: >\n  folded\n",
        "a: 1 # comment\n",
        "# comment\na: 1\n",
        "a:\n\t- x\n",
        "a: |\n  no final line break",
    ] {
        assert!(!same_or_refused(text), "took {text:?}");
    }
}

#[test]
fn block_collections_read_as_the_general_reader_reads_them() {
    for text in [
        "a:\n  b:\n    c: 1\n  d: [ ]\n",
        "a:\n- 1\n- x: 1\n  q:\n  - 2\n  z: 3\n- - 4\n",
        "a:\n- x: 1\n  q:\n  - 2\n  z: {}\nb: []\n",
        "a:\n  - 1\n  -\n  - x\nb:\n",
        "a:\n-\n  x: 1\n",
    ] {
        same_or_refused(text);
    }
    for text in [
        "a:\n- x: 1\n  q:\n  - 2\n  z: {}\nb: []\n",
        "a:\n  - 1\n  -\n  - x\nb:\n",
        "a:\n-\n  x: 1\n",
    ] {
        assert!(same_or_refused(text), "refused {text:?}");
    }
    // A key where an entry is expected, indentation that goes nowhere.
    for text in ["a:\n  b: 1\n c: 2\n", "a: 1\n  b: 2\n", "a:\n- 1\n  - 2\n"] {
        assert!(value_of::<serde_json::Value>(text).is_err(), "{text:?}");
    }
}

#[test]
fn deep_nesting_is_left_to_the_general_reader() {
    let mut text = String::new();
    for depth in 0..200 {
        text.push_str(&" ".repeat(depth * 2));
        text.push_str("a:\n");
    }
    assert!(value_of::<serde_json::Value>(&text).is_err());
}

/// The objects of `text` as this reader takes it, and as the general
/// reader gives them (the same, problems and all).
fn assert_taken(text: &str) {
    let path = Path::new("k.yaml");
    assert!(read(path, text).is_some(), "refused:\n{text}");
    let fast = crate::snapshot::cluster::load_file_text(path, text);
    let positioned = load_file_text_as(path, text, Reading::Positioned);
    assert_eq!(format!("{fast:?}"), format!("{positioned:?}"));
}

const POD: &str = "- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      kubectl.kubernetes.io/last-applied-configuration: |
        {\"apiVersion\":\"v1\",\"kind\":\"Pod\"}
    creationTimestamp: \"2024-05-02T09:14:03Z\"
    labels:
      app: web
      pod-template-hash: \"12345\"
    name: web-NAME
    namespace: default
  spec:
    containers:
    - image: nginx:1.25
      imagePullPolicy: IfNotPresent
      name: web
      ports:
      - containerPort: 80
        name: http
        protocol: TCP
      resources: {}
    nodeName: node-1
    tolerations: []
  status:
    conditions:
    - lastProbeTime: null
      status: \"True\"
      type: Ready
    containerStatuses:
    - name: web
      ready: true
      restartCount: 0
    hostIP: 192.168.1.10
    phase: Running
    podIP: 10.244.1.NAME
    podIPs:
    - ip: 10.244.1.NAME
";

const CONFIG_MAP: &str = "- apiVersion: v1
  data:
    net-conf.json: |
      {
        \"Network\": \"10.244.0.0/16\"
      }
  kind: ConfigMap
  metadata:
    name: kube-flannel-cfg
    namespace: kube-flannel
";

fn kubectl_list(items: &[String]) -> String {
    format!(
        "apiVersion: v1\nitems:\n{}kind: List\nmetadata:\n  resourceVersion: \"\"\n",
        items.concat()
    )
}

#[test]
fn a_kubectl_list_is_taken_and_gives_what_the_general_reader_gives() {
    let pods: Vec<String> = (1..4)
        .map(|i| POD.replace("NAME", &i.to_string()))
        .collect();
    assert_taken(&kubectl_list(&pods));
    let mut mixed = pods.clone();
    mixed.insert(1, CONFIG_MAP.to_owned());
    assert_taken(&kubectl_list(&mixed));
    // A single object, several documents, a typed List whose items leave
    // out their kind.
    let single = POD.replace("NAME", "7");
    let single: String = single
        .lines()
        .map(|line| format!("{}\n", &line[2..]))
        .collect();
    assert_taken(&single);
    assert_taken(&format!("---\n{single}---\n{}", kubectl_list(&pods)));
    let typed = format!(
        "apiVersion: v1\nitems:\n{}kind: PodList\n",
        pods.concat()
            .replace("- apiVersion: v1\n  kind: Pod\n  metadata:", "- metadata:")
    );
    assert_taken(&typed);
    // A file without objects is the general reader's, to say so.
    assert!(read(Path::new("k.yaml"), &kubectl_list(&[])).is_none());
}

#[test]
fn a_problem_leaves_the_file_to_the_general_reader() {
    let pods: Vec<String> = (1..4)
        .map(|i| POD.replace("NAME", &i.to_string()))
        .collect();
    let duplicate =
        kubectl_list(&pods).replacen("      app: web\n", "      app: web\n      app: x\n", 1);
    let bad_port = kubectl_list(&pods).replacen("containerPort: 80", "containerPort: \"80\"", 1);
    let no_kind = kubectl_list(&pods).replacen("  kind: Pod\n", "", 1);
    for text in [duplicate, bad_port, no_kind] {
        let path = Path::new("k.yaml");
        assert!(read(path, &text).is_none());
        let fast = crate::snapshot::cluster::load_file_text(path, &text);
        assert!(!fast.1.is_empty());
    }
}

#[test]
fn items_keep_their_lines() {
    let pods: Vec<String> = (1..4)
        .map(|i| POD.replace("NAME", &i.to_string()))
        .collect();
    let text = kubectl_list(&pods);
    let objects = read(Path::new("k.yaml"), &text).unwrap();
    let starts: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| line.starts_with("- "))
        .map(|(i, _)| i + 1)
        .collect();
    let lines: Vec<usize> = objects.iter().map(|(_, at)| at.line).collect();
    assert_eq!(lines, starts);
    assert!(objects.iter().all(|(_, at)| at.column == 3));
}

// Found by the cluster_objects fuzzer: a NUL in a plain scalar, which the
// general reader refuses as a character YAML does not allow.
#[test]
fn characters_yaml_does_not_allow_are_the_general_readers_to_report() {
    for text in [
        "a: b\0c\n",
        "a: b\u{7f}\n",
        "a: b\u{85}c\u{9f}\n",
        "a: \u{feff}b\n",
    ] {
        assert!(read(Path::new("k.yaml"), text).is_none(), "{text:?}");
        let fast = crate::snapshot::cluster::load_file_text(Path::new("k.yaml"), text);
        let positioned = load_file_text_as(Path::new("k.yaml"), text, Reading::Positioned);
        assert_eq!(format!("{fast:?}"), format!("{positioned:?}"));
    }
    assert!(printable("é ü ☃ \u{85}\t\n"));
    let seed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds/cluster_objects/nul-in-a-plain-scalar.yaml");
    let text = String::from_utf8(std::fs::read(seed).unwrap()).unwrap();
    let fast = crate::snapshot::cluster::load_file_text(Path::new("k.yaml"), &text);
    let positioned = load_file_text_as(Path::new("k.yaml"), &text, Reading::Positioned);
    assert_eq!(format!("{fast:?}"), format!("{positioned:?}"));
}
