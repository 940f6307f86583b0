//! `parse_json(text)`: Rhai's own, parsed once per text and thread.
//!
//! Packs read JSON out of the cluster's objects on every hook call (Flannel's
//! `net-conf.json` and its nodes' `backend-data` annotations), and Rhai's
//! `parse_json` runs its script parser over the text each time: a profile of
//! `skoop matrix` on 1,000 nodes spent 8% of its CPU there. The texts are
//! few and never change within a run, so each is parsed once and its value
//! handed out again. The answer is Rhai's: an object map, with integers as
//! `INT`, other numbers as `FLOAT` and `null` as `()`; anything but a JSON
//! object is an error the script may catch.

use std::cell::RefCell;
use std::collections::HashMap;

use rhai::{Array, Dynamic, Engine, EvalAltResult, Map, Position};

/// Texts kept per thread, and their bytes in all, before the cache starts
/// over: a script's texts are at most 64 KiB each, so it stays small.
const MAX_KEPT: usize = 256;
const MAX_KEPT_BYTES: usize = 1 << 20;

thread_local! {
    static PARSED: RefCell<(HashMap<String, Dynamic>, usize)> = RefCell::new((HashMap::new(), 0));
}

pub(super) fn register(engine: &mut Engine) {
    engine.register_fn("parse_json", parse_json);
}

fn parse_json(text: &str) -> Result<Dynamic, Box<EvalAltResult>> {
    if let Some(value) = PARSED.with(|parsed| parsed.borrow().0.get(text).cloned()) {
        return Ok(value);
    }
    let value = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(object)) => Dynamic::from_map(map(object)),
        Ok(_) => return Err(error("not a JSON object".into())),
        Err(e) => return Err(error(e.to_string())),
    };
    PARSED.with(|parsed| {
        let (kept, bytes) = &mut *parsed.borrow_mut();
        if kept.len() >= MAX_KEPT || *bytes + text.len() > MAX_KEPT_BYTES {
            kept.clear();
            *bytes = 0;
        }
        *bytes += text.len();
        kept.insert(text.to_owned(), value.clone());
    });
    Ok(value)
}

fn error(message: String) -> Box<EvalAltResult> {
    EvalAltResult::ErrorRuntime(format!("parse_json: {message}").into(), Position::NONE).into()
}

fn map(object: serde_json::Map<String, serde_json::Value>) -> Map {
    (object.into_iter())
        .map(|(key, value)| (key.into(), dynamic(value)))
        .collect()
}

fn dynamic(value: serde_json::Value) -> Dynamic {
    match value {
        serde_json::Value::Null => Dynamic::UNIT,
        serde_json::Value::Bool(b) => b.into(),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or(f64::NAN).into(),
        },
        serde_json::Value::String(s) => s.into(),
        serde_json::Value::Array(items) => {
            Dynamic::from_array(items.into_iter().map(dynamic).collect::<Array>())
        }
        serde_json::Value::Object(object) => Dynamic::from_map(map(object)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(script: &str) -> Result<Dynamic, Box<EvalAltResult>> {
        crate::packs::sandbox::engine().eval::<Dynamic>(script)
    }

    #[test]
    fn reads_what_rhai_reads_and_each_text_once() {
        let text = r#"{"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan", "VNI": 1}, "x": [1, 2.5, null, true]}"#;
        let script = format!(
            "let c = parse_json(`{text}`); [c.Network, c.Backend.VNI, c.x[1], c.x[2], c.x[3]]"
        );
        for _ in 0..2 {
            let got: Array = eval(&script).unwrap().cast();
            assert_eq!(got[0].clone().cast::<String>(), "10.244.0.0/16");
            assert_eq!(got[1].as_int().unwrap(), 1);
            assert_eq!(got[2].as_float().unwrap(), 2.5);
            assert!(got[3].is_unit());
            assert!(got[4].as_bool().unwrap());
        }
        assert!(PARSED.with(|parsed| parsed.borrow().0.contains_key(text)));
    }

    #[test]
    fn what_is_no_json_object_is_an_error_a_script_catches() {
        for text in ["null", "[1, 2]", "{\"a\": ", "\"text\""] {
            let caught = eval(&format!(
                "let caught = false; try {{ parse_json(`{text}`); }} catch {{ caught = true; }} caught"
            ));
            assert!(caught.unwrap().as_bool().unwrap(), "{text}");
        }
    }

    #[test]
    fn the_kept_texts_are_bounded() {
        for i in 0..MAX_KEPT + 10 {
            let map = parse_json(&format!("{{\"n\": {i}}}")).unwrap();
            assert!(map.is_map());
        }
        PARSED.with(|parsed| assert!(parsed.borrow().0.len() <= MAX_KEPT));
    }
}
