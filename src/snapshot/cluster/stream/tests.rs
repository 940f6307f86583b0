use std::io::Write as _;
use std::path::Path;

use super::*;
use crate::snapshot::cluster::load::{Piece, Reading, read_text};
use crate::snapshot::cluster::{Cluster, load_file_text};

/// A pod as kubectl writes it in a List, as JSON.
fn pod(i: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i}"), "namespace": "default",
            "labels": {"app": "web"}, "creationTimestamp": "2024-05-02T09:14:03Z",
            "annotations": {"note": "line 1\nline 2\n"}},
        "spec": {"nodeName": format!("node-{}", i % 7), "containers": [{"name": "web",
            "image": "nginx:1.25", "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "resources": {}}], "tolerations": []},
        "status": {"phase": "Running", "podIP": format!("10.244.{}.{}", i / 200, i % 200 + 2),
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null}]}
    })
}

fn config_map(i: usize) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i}"), "namespace": "default"},
        "data": {"k": "v"}})
}

fn items(count: usize) -> Vec<serde_json::Value> {
    (0..count)
        .map(|i| if i % 50 == 7 { config_map(i) } else { pod(i) })
        .collect()
}

/// `items` as `kubectl get -o json` writes a List: four-space indents.
fn json_list(items: &[serde_json::Value]) -> String {
    let list = serde_json::json!({"apiVersion": "v1", "items": items, "kind": "List",
        "metadata": {"resourceVersion": ""}});
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(&list, &mut serializer).unwrap();
    String::from_utf8(out).unwrap()
}

/// `items` as `kubectl get -o yaml` writes a List (block style, keys
/// sorted, sequences at their key's indentation).
fn yaml_list(items: &[serde_json::Value]) -> String {
    fn scalar(value: &serde_json::Value) -> String {
        match value {
            serde_json::Value::String(s) if s.contains('\n') => unreachable!(),
            serde_json::Value::String(s)
                if s.starts_with(|c: char| c.is_ascii_lowercase())
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-/.:".contains(c))
                    && !["true", "false", "yes", "no", "on", "off", "null", "y", "n"]
                        .contains(&s.as_str()) =>
            {
                s.clone()
            }
            other => other.to_string(),
        }
    }
    fn node(value: &serde_json::Value, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match value {
            serde_json::Value::Object(map) if !map.is_empty() => {
                for (key, value) in map {
                    match value {
                        serde_json::Value::String(s) if s.contains('\n') => {
                            out.push_str(&format!("{pad}{key}: |\n"));
                            for line in s.lines() {
                                out.push_str(&format!("{pad}  {line}\n"));
                            }
                        }
                        serde_json::Value::Object(m) if !m.is_empty() => {
                            out.push_str(&format!("{pad}{key}:\n"));
                            node(value, indent + 2, out);
                        }
                        serde_json::Value::Array(a) if !a.is_empty() => {
                            out.push_str(&format!("{pad}{key}:\n"));
                            node(value, indent, out);
                        }
                        _ => out.push_str(&format!("{pad}{key}: {}\n", inline(value))),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    let mut text = String::new();
                    node(item, indent + 2, &mut text);
                    out.push_str(&format!("{pad}- {}", &text[indent + 2..]));
                }
            }
            other => out.push_str(&format!("{pad}{}\n", inline(other))),
        }
    }
    fn inline(value: &serde_json::Value) -> String {
        match value {
            serde_json::Value::Object(_) => "{}".into(),
            serde_json::Value::Array(_) => "[]".into(),
            other => scalar(other),
        }
    }
    let list = serde_json::json!({"apiVersion": "v1", "items": items, "kind": "List",
        "metadata": {"resourceVersion": ""}});
    let mut out = String::new();
    node(&list, 0, &mut out);
    out
}

/// `text` read a part at a time (parts of about `part_bytes`), as the
/// load reads a large file.
fn streamed(name: &str, text: &str, part_bytes: usize) -> (Cluster, Vec<String>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let format = if name.ends_with(".json") {
        Format::Json
    } else {
        Format::Yaml
    };
    let file = File::open(&path).unwrap();
    let mut parts = 0;
    let mut cluster = Cluster::default();
    let mut problems = Vec::new();
    let (digest, problem) = read_in_parts_of(
        &path,
        file,
        text.len() as u64,
        format,
        true,
        part_bytes,
        || None,
        |part| {
            parts += 1;
            for piece in read_text(&path, &part.text, format, Reading::DirectFirst) {
                match piece.moved(part.lines) {
                    Piece::Object(object, _) => cluster.insert(object).unwrap(),
                    Piece::Problem(problem) => problems.push(problem),
                }
            }
        },
    );
    // The file's own digest once anything of it was read; none when it is
    // refused before.
    let read = parts > 0;
    assert_eq!(digest, read.then(|| Sha256::digest(text.as_bytes()).into()));
    problems.extend(problem);
    let problems = problems
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.file = Path::new(name).to_path_buf();
            p.to_string()
        })
        .collect();
    // The sources name the temporary file: the tests compare them by name.
    cluster.model_mut().rebase(dir.path(), Path::new(""));
    (cluster, problems, parts)
}

fn whole(name: &str, text: &str) -> (Cluster, Vec<String>) {
    let (cluster, problems) = load_file_text(Path::new(name), text);
    (cluster, problems.iter().map(ToString::to_string).collect())
}

#[test]
fn a_list_read_a_part_at_a_time_gives_what_reading_it_whole_gives() {
    let items = items(400);
    for (name, text) in [("l.json", json_list(&items)), ("l.yaml", yaml_list(&items))] {
        let (expected, problems) = whole(name, &text);
        assert!(problems.is_empty(), "{name}: {problems:?}");
        assert_eq!(expected.object_count(), 400);
        for part_bytes in [1, 4096, 50_000, 1 << 30] {
            let (cluster, problems, parts) = streamed(name, &text, part_bytes);
            assert!(problems.is_empty(), "{name}: {problems:?}");
            assert_eq!(format!("{cluster:?}"), format!("{expected:?}"), "{name}");
            if part_bytes == 4096 {
                assert!(parts > 20, "{name}: {parts} parts");
            }
        }
    }
}

/// A problem in an item is said where it is in the file, as reading the
/// file whole says it; a syntax error costs only its part.
#[test]
fn problems_in_parts_are_placed_in_the_file() {
    let items = items(300);
    let json = json_list(&items).replacen("\"containerPort\": 80", "\"containerPort\": \"x\"", 3);
    let yaml = yaml_list(&items).replacen("containerPort: 80", "containerPort: x", 3);
    for (name, text) in [("l.json", json), ("l.yaml", yaml)] {
        let (expected, expected_problems) = whole(name, &text);
        assert_eq!(expected_problems.len(), 3, "{expected_problems:?}");
        let (cluster, problems, _) = streamed(name, &text, 8192);
        assert_eq!(problems, expected_problems);
        assert_eq!(format!("{cluster:?}"), format!("{expected:?}"));
    }
    let broken = yaml_list(&items).replacen("  spec:\n", "  spec: [\n", 1);
    let (cluster, problems, _) = streamed("l.yaml", &broken, 8192);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(cluster.object_count() > 250, "{}", cluster.object_count());
}

/// Over the size read whole, only one List as kubectl writes it is read a
/// part at a time; anything else is refused, saying so.
#[test]
fn a_large_file_that_is_not_one_list_is_refused_naming_why() {
    let items = items(10);
    for (name, text) in [
        (
            "l.yaml",
            format!("{}---\n{}", yaml_list(&items), yaml_list(&items)),
        ),
        ("l.json", serde_json::to_string(&items).unwrap()),
        ("l.yaml", "a: 1\n".repeat(1000)),
    ] {
        let (cluster, problems, _) = streamed(name, &text, 4096);
        assert_eq!(cluster.object_count(), 0);
        assert!(problems[0].contains("which takes one List"), "{problems:?}");
    }
}
