//! What a script check returns, read into failures and their evidence.

use std::path::Path;

use rhai::Dynamic;

use super::{Evaluator, Failure, Outcome, Stop};
use crate::diagnostic::Evidence;
use crate::packs::host::display;
use crate::packs::model::ScriptFunction;
use crate::packs::sandbox::{ScriptError, function_position};
use crate::snapshot::netns::DumpFile;

/// Where a script check's evidence may point: the subject's dump, and the
/// snapshot's cluster objects.
pub(super) struct Places<'p> {
    pub(super) dump_dir: Option<&'p Path>,
    pub(super) cluster_dir: &'p Path,
}

/// A script check returns `()` or `true` (pass), `false`, a message, a map
/// `#{actual, expected}`, or an array of messages or maps (one failure each).
/// A map may name its evidence in the subject's dump, `file` (`ip-neigh.json`)
/// and optionally `find` (text to locate there), as declarative checks do;
/// and the cluster objects it rests on, `objects` (their `source`s).
pub(super) fn script_failures(
    result: Dynamic,
    function: &ScriptFunction,
    places: Places<'_>,
    evaluator: &Evaluator<'_>,
) -> Outcome {
    let script_error = |message: String| {
        let script = evaluator.pack.scripts.get(function.script);
        let position = script.and_then(|s| function_position(&s.source, &function.name));
        Stop::Error(ScriptError {
            kind: crate::packs::sandbox::ScriptErrorKind::Runtime,
            file: evaluator
                .pack
                .dir
                .join(script.map_or("", |s| s.file.as_str())),
            line: position.map(|p| p.0),
            column: position.map(|p| p.1),
            message,
        })
    };
    let one = |item: Dynamic| -> Result<Option<Failure>, Stop> {
        if item.is_unit() || item.as_bool() == Ok(true) {
            return Ok(None);
        }
        if item.as_bool() == Ok(false) {
            return Ok(Some(Failure {
                actual: format!("{} returned false", function.name),
                expected: String::new(),
                evidence: Vec::new(),
            }));
        }
        if item.is_string() {
            return Ok(Some(Failure {
                actual: item.to_string(),
                expected: String::new(),
                evidence: Vec::new(),
            }));
        }
        if let Some(map) = item.clone().try_cast::<rhai::Map>() {
            let field = |k: &str| map.get(k).map(display).unwrap_or_default();
            let mut evidence = Vec::new();
            if let Some(name) = map.get("file").map(display) {
                // Only the dump's own files: a script never reaches anything else.
                let Some(file) = DumpFile::from_name(&name) else {
                    let names: Vec<&str> = DumpFile::ALL.iter().map(|f| f.name()).collect();
                    return Err(script_error(format!(
                        "{} names evidence file {name:?}, which is not a dump file ({})",
                        function.name,
                        names.join(", ")
                    )));
                };
                // A place the script knows (`line`, `column`: a stopping
                // rule's, say) is taken as it is; else text to `find`.
                let number = |key: &str| {
                    map.get(key)
                        .and_then(|v| v.as_int().ok())
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|n| *n > 0)
                };
                if let Some(dir) = places.dump_dir {
                    evidence.push(match (number("line"), map.get("find")) {
                        (Some(line), _) => Evidence {
                            column: number("column"),
                            ..Evidence::line(dir.join(file.name()), line)
                        },
                        (None, Some(needle)) => Evidence::locate(dir, file, &display(needle)),
                        (None, None) => Evidence::file(dir.join(file.name())),
                    });
                }
            }
            if let Some(objects) = map.get("objects") {
                let Some(sources) = objects.clone().try_cast::<rhai::Array>() else {
                    return Err(script_error(format!(
                        "{}'s objects is {}; it is an array of the objects' `source`s",
                        function.name,
                        objects.type_name()
                    )));
                };
                for source in sources {
                    let source = display(&source);
                    // Only where an object of the snapshot was read from.
                    let place = source
                        .rsplit_once(':')
                        .and_then(|(file, line)| Some((Path::new(file), line.parse().ok()?)))
                        .filter(|(file, _)| file.starts_with(places.cluster_dir));
                    let Some((file, line)) = place else {
                        return Err(script_error(format!(
                            "{} names evidence {source:?}, which is no object's `source` in the snapshot",
                            function.name
                        )));
                    };
                    evidence.push(Evidence::line(file, line));
                }
            }
            return Ok(Some(Failure {
                actual: field("actual"),
                expected: field("expected"),
                evidence,
            }));
        }
        Err(script_error(format!(
            "{} returned {}; a check returns (), a bool, a message, #{{actual, expected}} or an array of those",
            function.name,
            item.type_name()
        )))
    };
    match result.clone().try_cast::<rhai::Array>() {
        Some(items) => items
            .into_iter()
            .filter_map(|i| one(i).transpose())
            .collect(),
        None => one(result).map(|f| f.into_iter().collect()),
    }
}
