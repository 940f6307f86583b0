use proptest::prelude::*;
use serde_json::Value as Json;

use super::*;

/// What serde_json makes of the value at the start of `text`, and where
/// it ends.
fn serde_json_reads(text: &str) -> Option<(Json, usize)> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Json>();
    let value = stream.next()?.ok()?;
    Some((value, stream.byte_offset()))
}

/// A text this reader takes, serde_json takes too, with the same value
/// ending at the same offset (compared bit for bit: `-0` is a float).
fn agrees(text: &str) -> Option<Json> {
    let (fitted, end) = value_end::<Json>(text, 0)?;
    let (general, general_end) = serde_json_reads(text)
        .unwrap_or_else(|| panic!("taken here, refused by serde_json: {text:?}"));
    assert_eq!(
        format!("{fitted:?}"),
        format!("{general:?}"),
        "read apart: {text:?}"
    );
    assert_eq!(end, general_end, "ends apart: {text:?}");
    Some(fitted)
}

#[test]
fn json_as_kubectl_writes_it_is_taken_with_serde_jsons_values() {
    let pod = r#"{
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n",
            "note": "\u003cb\u003e caf\u00e9 \ud83d\ude00 \/ \\ \b\f\r\t"
        },
        "labels": {
            "app": "web"
        },
        "name": "web-0"
    },
    "spec": {
        "containers": [
            {
                "name": "web",
                "ports": [
                    {
                        "containerPort": 8080,
                        "protocol": "TCP"
                    }
                ],
                "resources": {},
                "args": []
            }
        ],
        "hostNetwork": false,
        "priority": -2147483648,
        "nodeName": null
    },
    "status": {
        "score": 0.25,
        "big": 18446744073709551616,
        "max": 18446744073709551615,
        "min": -9223372036854775808,
        "below": -9223372036854775809,
        "zero": -0,
        "exp": 1E+3
    }
}"#;
    let value = agrees(pod).expect("a kubectl pod is taken");
    assert_eq!(
        value["metadata"]["annotations"]["note"],
        "<b> café 😀 / \\ \u{8}\u{c}\r\t"
    );
    assert!(
        value["status"]["zero"].is_f64(),
        "-0 is a float, as for serde_json"
    );
    assert!(value["status"]["big"].is_f64());
    assert!(value["status"]["max"].is_u64());
    assert!(value["status"]["min"].is_i64());
    for text in [
        "[0]",
        "[-1]",
        "[1.5e-3]",
        "\"\"",
        "[]",
        "{}",
        "[[], {}]",
        "[null, true, false]",
        " \n\t\r{ }",
        "{\"a\":1}{\"b\":2}",
        "\"\\u0000\"",
        "\"\\uD83D\\uDE00\"",
    ] {
        agrees(text).unwrap_or_else(|| panic!("{text:?} is taken"));
    }
}

#[test]
fn what_serde_json_refuses_and_what_is_left_to_it_are_refused() {
    for text in [
        "",
        "   ",
        "[1,]",
        "[1 2]",
        "{\"a\":1,}",
        "{,}",
        "[,1]",
        "{\"a\" 1}",
        "{1:2}",
        "1",
        "null",
        "true",
        "[01]",
        "[-]",
        "[1.]",
        "[.5]",
        "[1e]",
        "[1e+]",
        "[1e400]",
        "[-1e400]",
        "[+1]",
        "[1x]",
        "tru",
        "nul",
        "\"a",
        "\"a\tb\"",
        "\"a\nb\"",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\uD83D\"",
        "\"\\uDE00\\uD83D\"",
        "\"\\uD83D\\u0041\"",
        "[1",
        "{\"a\":1",
        "// comment\n{}",
        "'a'",
    ] {
        assert!(
            value_end::<Json>(text, 0).is_none(),
            "{text:?} taken as {:?}",
            value_end::<Json>(text, 0)
        );
    }
    // Deeper than serde_json would take is refused here; as deep as this
    // reader takes is read.
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(agrees(&nested(MAX_DEPTH)).is_some());
    assert!(value_end::<Json>(&nested(MAX_DEPTH + 1), 0).is_none());
    assert!(value_end::<Json>(&nested(200), 0).is_none());
}

#[test]
fn whitespace_and_string_stops_are_found_across_words() {
    for spaces in 0..20 {
        let text = format!(
            "{}\"{}\\\"{}\"",
            " ".repeat(spaces),
            "x".repeat(spaces),
            "é".repeat(spaces)
        );
        let (read, end) = value_end::<String>(&text, 0).unwrap();
        assert_eq!(
            read,
            format!("{}\"{}", "x".repeat(spaces), "é".repeat(spaces))
        );
        assert_eq!(end, text.len());
        assert_eq!(skip_whitespace(text.as_bytes(), 0), spaces);
        let control = format!("\"{}\u{1f}\"", "y".repeat(spaces));
        assert!(value_end::<String>(&control, 0).is_none(), "{control:?}");
    }
}

/// Any JSON value, as the lean types meet them.
fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Json::from),
        "[a-z\"\\\\/\u{0}-\u{1f}é😀\u{2028}]{0,12}".prop_map(Json::from),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Json::Array),
            prop::collection::btree_map("[a-z\"\\\\]{0,6}", inner, 0..8)
                .prop_map(|map| Json::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    /// serde_json's own output, compact or pretty, is taken and read as
    /// serde_json reads it.
    #[test]
    fn serde_jsons_output_is_taken_as_serde_json_reads_it(value in json(), pretty in any::<bool>()) {
        // A scalar alone is left to serde_json (see `value_end`): it is
        // read in a sequence.
        let value = if value.is_array() || value.is_object() || value.is_string() {
            value
        } else {
            Json::Array(vec![value])
        };
        let text = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            serde_json::to_string(&value).unwrap()
        };
        prop_assert!(agrees(&text).is_some(), "{}", text);
    }

    /// A text changed at random is never taken where serde_json would
    /// refuse it, nor read otherwise.
    #[test]
    fn a_text_changed_at_random_is_taken_only_as_serde_json_takes_it(
        value in json(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), "[ -~\t\n\u{0}é]"), 1..4),
    ) {
        let mut text = serde_json::to_string_pretty(&value).unwrap();
        for (at, insert) in edits {
            let mut at = at.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.insert_str(at, &insert);
        }
        agrees(&text);
    }
}
