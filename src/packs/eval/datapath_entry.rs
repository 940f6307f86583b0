//! The datapath_entry kind: an entry of a file of a programmable
//! datapath's state (`datapath/NAME.json`, what its own tools print about
//! its maps), and a field of it.

use super::kinds::NamespaceDump;
use super::{Evaluator, Failure, Outcome, Stop};
use crate::diagnostic::Evidence;
use crate::packs::host::{datapath_file, display};
use crate::packs::model::Value;
use crate::snapshot::netns::datapath::relative_path;

impl Evaluator<'_> {
    pub(super) fn datapath_entry(
        &self,
        file: &Value,
        key: Option<&Value>,
        (field, expect, contains): (Option<&Value>, Option<&Value>, Option<&Value>),
        at: &NamespaceDump<'_>,
    ) -> Outcome {
        let &NamespaceDump {
            ctx, netns, dir, ..
        } = at;
        let name = self.required_text(file, ctx)?;
        let field = self.optional_text(field, ctx)?;
        let expect = self.optional_text(expect, ctx)?;
        let contains = self.optional_text(contains, ctx)?;
        let document = datapath_file(netns, &name).map_err(|error| Stop::of_query(&error))?;
        let path = relative_path(&name);
        let evidence = |place: Option<(usize, usize)>| match place {
            Some((line, column)) => Evidence {
                column: Some(column),
                ..Evidence::line(dir.join(&path), line)
            },
            None => Evidence::file(dir.join(&path)),
        };
        // Each key, or the document itself.
        let keys = match key {
            Some(key) => self
                .required_texts(key, ctx)?
                .into_iter()
                .map(Some)
                .collect(),
            None => vec![None],
        };
        let mut failures = Vec::new();
        for key in keys {
            let (entry, place, what) = match &key {
                Some(key) => {
                    let member = document.value.as_object().and_then(|m| m.get(key));
                    let Some(member) = member else {
                        failures.push(Failure {
                            actual: format!("{path} has no entry {key}"),
                            expected: format!("an entry {key} in {path}"),
                            evidence: vec![evidence(None)],
                        });
                        continue;
                    };
                    (
                        member,
                        document.place_of(key),
                        format!("entry {key} of {path}"),
                    )
                }
                None => (&document.value, None, path.clone()),
            };
            // The member itself holds the text where no field is named.
            if field.is_none()
                && let Some(contains) = &contains
            {
                if !holds_text(entry, contains) {
                    failures.push(Failure {
                        actual: format!("{what} is {}", as_text(entry)),
                        expected: format!("{what} holding {contains:?}"),
                        evidence: vec![evidence(place)],
                    });
                }
                continue;
            }
            let Some(field) = &field else { continue };
            let wanted = match (&expect, &contains) {
                (Some(expect), Some(contains)) => {
                    format!("{field} {expect} (holding {contains:?}) in {what}")
                }
                (Some(expect), None) => format!("{field} {expect} in {what}"),
                (None, Some(contains)) => format!("{field} holding {contains:?} in {what}"),
                (None, None) => format!("{field} in {what}"),
            };
            let found = field
                .split('.')
                .try_fold(entry, |value, part| value.get(part));
            let actual = match found {
                None => format!("{what} says nothing of {field}"),
                Some(found) => {
                    let expected = expect.as_ref().is_none_or(|e| as_text(found) == *e);
                    let holds = contains.as_ref().is_none_or(|c| holds_text(found, c));
                    if expected && holds {
                        continue;
                    }
                    format!("{field} is {} in {what}", as_text(found))
                }
            };
            failures.push(Failure {
                actual,
                expected: wanted,
                evidence: vec![evidence(place)],
            });
        }
        Ok(failures)
    }
}

/// A value as text: a string as it is, anything else as a script shows it.
fn as_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => display(&crate::packs::host::json_to_dynamic(other)),
    }
}

/// Whether `value` holds `text`: a string containing it, or a list one of
/// whose strings does.
fn holds_text(value: &serde_json::Value, text: &str) -> bool {
    match value {
        serde_json::Value::String(own) => own.contains(text),
        serde_json::Value::Array(items) => items.iter().any(|item| holds_text(item, text)),
        _ => false,
    }
}
