//! A pack's parameters: declared with a type, a default and optionally
//! the values or range allowed, with `--set` overrides folded in.

use std::path::PathBuf;

use rhai::{Dynamic, Map};

use super::{Loader, keyword};
use crate::packs::model::{IntRange, ParamType, ParamValue, Parameter};
use crate::packs::yaml::{self, Fields, Issues, Node, Pos};
use crate::snapshot::problem::Problem;

/// `--set PACK.PARAM=VALUE`, or a `set:` entry of a pack test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub pack: String,
    pub param: String,
    pub value: String,
    /// Where it was written: a file position, or `None` for the command line.
    pub origin: Option<(PathBuf, Pos)>,
}

impl Override {
    /// Parses `PACK.PARAM=VALUE`.
    pub fn parse(text: &str) -> Result<Override, String> {
        let (target, value) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?} is not PACK.PARAM=VALUE"))?;
        let (pack, param) = target
            .split_once('.')
            .filter(|(pack, param)| !pack.is_empty() && !param.is_empty())
            .ok_or_else(|| format!("{text:?} is not PACK.PARAM=VALUE"))?;
        Ok(Override {
            pack: pack.to_owned(),
            param: param.to_owned(),
            value: value.to_owned(),
            origin: None,
        })
    }

    pub fn problem(&self, message: impl Into<String>) -> Problem {
        let message = message.into();
        match &self.origin {
            Some((file, pos)) => Problem::from_issue(file, pos.issue(message)),
            None => Problem {
                file: PathBuf::from(format!("--set {}.{}={}", self.pack, self.param, self.value)),
                line: None,
                column: None,
                message,
            },
        }
    }
}

impl Loader<'_> {
    pub(super) fn parameters(
        &mut self,
        node: &Node,
        pack: &str,
        overrides: &[Override],
    ) -> Vec<Parameter> {
        let issues = &mut self.issues;
        let Some(mut fields) = Fields::of(node, "parameters", issues) else {
            return Vec::new();
        };
        let mut parameters = Vec::new();
        // Every parameter declared with a valid type, for checking overrides
        // even when its default is wrong.
        let mut declared: Vec<(String, ParamType, Vec<ParamValue>, IntRange)> = Vec::new();
        for (key, value) in fields.all() {
            let what = format!("parameter {}", key.name);
            let Some(mut f) = Fields::of(value, &what, issues) else {
                continue;
            };
            let param_type = f
                .required_string("type", issues)
                .and_then(|t| keyword(&t, &ParamType::ALL, "type", issues));
            let default = f.require("default", issues);
            let doc = f
                .required_string("doc", issues)
                .map(|d| d.value)
                .unwrap_or_default();
            let allowed_node = f.take("allowed");
            let bounds = [f.take("min"), f.take("max")];
            f.finish(issues);
            let Some(param_type) = param_type else {
                continue;
            };
            let [min, max] = bounds.map(|bound| {
                let bound = bound?;
                match (&bound.value, param_type) {
                    (yaml::Value::Int(n), ParamType::Int) => Some(*n),
                    (_, ParamType::Int) => {
                        issues.push(bound.pos.issue(format!(
                            "parameter {}: a bound is an integer, not {}",
                            key.name,
                            bound.value.kind()
                        )));
                        None
                    }
                    _ => {
                        issues.push(bound.pos.issue(format!(
                            "parameter {}: min and max bound int parameters only",
                            key.name
                        )));
                        None
                    }
                }
            });
            let range = IntRange { min, max };
            let typed = |node: &Node, issues: &mut Issues| -> Option<ParamValue> {
                let result = match (&node.value, param_type) {
                    (yaml::Value::Int(i), ParamType::Int) => Ok(ParamValue::Int(*i)),
                    (yaml::Value::Bool(b), ParamType::Bool) => Ok(ParamValue::Bool(*b)),
                    (
                        yaml::Value::String(s),
                        ParamType::String | ParamType::Ip | ParamType::Cidr,
                    ) => param_type.parse(s),
                    (other, _) => Err(format!(
                        "{} is not of type {}",
                        other.kind(),
                        param_type.as_str()
                    )),
                };
                result
                    .map_err(|message| {
                        issues.push(node.pos.issue(format!("parameter {}: {message}", key.name)))
                    })
                    .ok()
            };
            let allowed: Vec<ParamValue> = allowed_node
                .map(|list| {
                    yaml::seq(list, "allowed", issues)
                        .iter()
                        .filter_map(|item| typed(item, issues))
                        .collect()
                })
                .unwrap_or_default();
            declared.push((key.name.clone(), param_type, allowed.clone(), range));
            let Some(default) = default.and_then(|d| {
                let value = typed(d, issues)?;
                check_allowed(&value, &allowed, range)
                    .map_err(|m| issues.push(d.pos.issue(format!("parameter {}: {m}", key.name))))
                    .ok()?;
                Some(value)
            }) else {
                continue;
            };
            parameters.push(Parameter {
                name: key.name.clone(),
                param_type,
                value: default.clone(),
                default,
                doc,
                allowed,
                range,
            });
        }
        for o in overrides.iter().filter(|o| o.pack == pack) {
            let Some((_, param_type, allowed, range)) =
                declared.iter().find(|(name, ..)| *name == o.param)
            else {
                let known: Vec<&str> = declared.iter().map(|(name, ..)| name.as_str()).collect();
                self.problems.push(o.problem(format!(
                    "pack {pack} has no parameter {} (it has: {})",
                    o.param,
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
                continue;
            };
            match param_type
                .parse(&o.value)
                .and_then(|v| check_allowed(&v, allowed, *range).map(|()| v))
            {
                Ok(value) => {
                    if let Some(parameter) = parameters.iter_mut().find(|p| p.name == o.param) {
                        parameter.value = value;
                    }
                }
                Err(message) => self
                    .problems
                    .push(o.problem(format!("parameter {pack}.{}: {message}", o.param))),
            }
        }
        parameters
    }
}

fn check_allowed(
    value: &ParamValue,
    allowed: &[ParamValue],
    range: IntRange,
) -> Result<(), String> {
    range.check(value)?;
    if allowed.is_empty() || allowed.contains(value) {
        return Ok(());
    }
    let names: Vec<String> = allowed.iter().map(ToString::to_string).collect();
    Err(format!(
        "{value} is not allowed (allowed: {})",
        names.join(", ")
    ))
}

pub(super) fn params_map(parameters: &[Parameter]) -> Dynamic {
    let map: Map = parameters
        .iter()
        .map(|p| (p.name.as_str().into(), p.value.to_dynamic()))
        .collect();
    Dynamic::from_map(map)
}
