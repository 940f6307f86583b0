//! Evaluating a pack's checks: in snapshot scope (every node, pod and
//! object of a snapshot) and, for the walker, at one hop of a path.
//!
//! A check passes, fails, or cannot be decided: the last is an *unknown*
//! finding with the reason (a dump not collected), never a pass. A script
//! that fails is a finding too, positioned in the script.

//!
//! Its rooms: `kinds` the declarative kinds against the subject's namespace
//! dump (`device` and `jump` the larger of them), `condition` a status
//! condition, `script` what a script check returns, `subjects` what a check
//! is run about.

mod condition;
mod datapath_entry;
mod device;
mod jump;
mod kinds;
mod masquerade;
mod objects;
mod rule;
mod script;
mod subjects;

use std::path::Path;

use rhai::{CallFnOptions, Dynamic, Engine, EvalAltResult, Scope};

use super::MANIFEST;
use super::host::{Insufficient, display};
use super::model::*;
use super::sandbox::{ScriptError, ScriptErrorKind, function_position};
use super::scope::{Context, NetnsRef, Subject};
use crate::diagnostic::{Evidence, FindingId, FindingStatus};
use crate::snapshot::NetnsId;
use crate::snapshot::input::Boundary;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::problem::line_col;
use condition::condition_outcome;
use script::{Places, script_failures};
pub use subjects::{hop_context, subjects};

impl Evidence {
    /// The first place `needle` occurs in a dump file, or the file alone.
    fn locate(dir: &Path, dump_file: DumpFile, needle: &str) -> Evidence {
        let file = dir.join(dump_file.name());
        let found = Boundary::new(dir)
            .read_text(&file, dump_file.limit())
            .ok()
            .flatten()
            .and_then(|text| text.find(needle).map(|offset| line_col(&text, offset)));
        match found {
            Some((line, column)) => Evidence {
                column: Some(column),
                ..Evidence::line(file, line)
            },
            None => Evidence::file(file),
        }
    }
}

/// Where a check that cannot tell looked: the subject's namespace dump,
/// whose files are missing or unreadable (an object's check has none).
fn unknown_evidence(ctx: &Context) -> Vec<Evidence> {
    let entry = ctx.netns.as_ref().and_then(|netns| netns.entry());
    entry
        .map(|entry| vec![Evidence::file(entry.dir.clone())])
        .unwrap_or_default()
}

/// One finding of a check about one subject.
pub type Finding = crate::diagnostic::Finding<FromCheck>;

/// Which check of which pack a finding comes from, and what it is about.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FromCheck {
    pub pack: String,
    pub subject: Subject,
    /// The other node of a check made per remote node (`for_each:
    /// remote_nodes`): a diagnosis tells by it whether the finding is about
    /// its path or only about a node the path crosses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// The address family the check is about (its `ip_family:`), where it
    /// says one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<crate::net::Family>,
    /// Why the script stopped, for `script-error` findings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<super::sandbox::ScriptErrorKind>,
}

/// A failure before the check could conclude.
pub enum Stop {
    Unknown(String),
    /// Unknown for want of a dump file (not collected, or unreadable): the
    /// finding says to collect it.
    Lacking {
        reason: String,
        file: DumpFile,
    },
    Error(ScriptError),
}

impl Stop {
    /// A host query's error where a declarative kind asked it (not a
    /// script): what the snapshot cannot tell, else what went wrong.
    fn of_query(error: &EvalAltResult) -> Stop {
        match Insufficient::in_error(error) {
            Some(insufficient) => insufficient.into(),
            None => Stop::Unknown(error.to_string()),
        }
    }
}

impl From<Insufficient> for Stop {
    fn from(insufficient: Insufficient) -> Stop {
        match insufficient.lacking {
            Some(file) => Stop::Lacking {
                reason: insufficient.reason,
                file,
            },
            None => Stop::Unknown(insufficient.reason),
        }
    }
}

/// What to do about a check that cannot tell for want of `file` in the
/// namespace of `subject`: collect it (a component's restart is advice for
/// what is known to be wrong, never for what is not known).
fn collect_advice(file: DumpFile, subject: &Subject) -> String {
    format!(
        "collect {file} in the namespace of {subject} (`{}`) and run again",
        file.command().join(" ")
    )
}

/// One way the subject differs from what the check expects.
struct Failure {
    actual: String,
    expected: String,
    evidence: Vec<Evidence>,
}

type Outcome = Result<Vec<Failure>, Stop>;

/// Evaluates the checks of one pack.
pub struct Evaluator<'a> {
    pub engine: &'a Engine,
    pub pack: &'a Pack,
}

impl Evaluator<'_> {
    /// Evaluates a manifest value in `ctx`, with `extra` variables.
    fn value(
        &self,
        value: &Value,
        ctx: &Context,
        extra: &[(&str, Dynamic)],
    ) -> Result<Dynamic, Stop> {
        let eval = |ast: &rhai::AST| -> Result<Dynamic, Stop> {
            let mut scope = Scope::new();
            for (name, v) in ctx.variables() {
                scope.push_dynamic(name, v);
            }
            for (name, v) in extra {
                scope.push_dynamic(*name, v.clone());
            }
            for name in ["actual", "expected"] {
                if !extra.iter().any(|(n, _)| *n == name) {
                    scope.push_dynamic(name, Dynamic::UNIT);
                }
            }
            self.engine
                .eval_ast_with_scope::<Dynamic>(&mut scope, ast)
                .map_err(|error| self.manifest_stop(&error, value))
        };
        match &value.template {
            Template::Literal(v) => Ok(v.clone()),
            Template::Expression(ast) => eval(ast),
            Template::Interpolated(parts) => {
                let mut text = String::new();
                for part in parts {
                    match part {
                        TemplatePart::Text(t) => text.push_str(t),
                        TemplatePart::Expression(ast) => text.push_str(&display(&eval(ast)?)),
                    }
                }
                Ok(text.into())
            }
        }
    }

    fn text(&self, value: &Value, ctx: &Context) -> Result<String, Stop> {
        self.value(value, ctx, &[]).map(|v| display(&v))
    }

    /// A field a kind needs: `()` there means the check cannot be decided
    /// for this subject.
    fn required_text(&self, value: &Value, ctx: &Context) -> Result<String, Stop> {
        let found = self.value(value, ctx, &[])?;
        if found.is_unit() {
            return Err(Stop::Unknown(format!(
                "{:?} (pack.yaml:{}) is () for {}",
                value.source, value.pos.line, ctx.subject
            )));
        }
        Ok(display(&found))
    }

    /// A field that may be a list: each of its items, its one value, or
    /// nothing for `()` (`()` items left out too).
    fn items(&self, value: &Value, ctx: &Context) -> Result<Vec<Dynamic>, Stop> {
        let found = self.value(value, ctx, &[])?;
        let items = if found.is_array() {
            found.into_array().unwrap_or_default()
        } else {
            vec![found]
        };
        Ok(items.into_iter().filter(|item| !item.is_unit()).collect())
    }

    /// A required field that may be a list: each of its items (`()` items
    /// left out), or its one value.
    fn required_texts(&self, value: &Value, ctx: &Context) -> Result<Vec<String>, Stop> {
        let found = self.value(value, ctx, &[])?;
        match found.into_array() {
            Ok(items) => Ok(items
                .iter()
                .filter(|item| !item.is_unit())
                .map(display)
                .collect()),
            Err(_) => Ok(vec![self.required_text(value, ctx)?]),
        }
    }

    /// An optional field: absent, or `()` where it is evaluated, is not checked.
    fn optional_text(&self, value: Option<&Value>, ctx: &Context) -> Result<Option<String>, Stop> {
        let Some(value) = value else {
            return Ok(None);
        };
        let found = self.value(value, ctx, &[])?;
        Ok((!found.is_unit()).then(|| display(&found)))
    }

    /// An optional `true`/`false` field; `()` is not checked.
    fn optional_bool(&self, value: Option<&Value>, ctx: &Context) -> Result<Option<bool>, Stop> {
        let Some(value) = value else {
            return Ok(None);
        };
        let found = self.value(value, ctx, &[])?;
        if found.is_unit() {
            return Ok(None);
        }
        found.as_bool().map(Some).map_err(|kind| {
            self.manifest_error(
                value,
                format!("{:?} must be true or false, it is {kind}", value.source),
            )
        })
    }

    /// An optional whole number of at most 32 bits (an MTU); `()` is not
    /// checked.
    fn optional_number(&self, value: Option<&Value>, ctx: &Context) -> Result<Option<u32>, Stop> {
        let Some(value) = value else {
            return Ok(None);
        };
        let found = self.value(value, ctx, &[])?;
        if found.is_unit() {
            return Ok(None);
        }
        let number = match found.as_int() {
            Ok(int) => u32::try_from(int).ok(),
            Err(_) => display(&found).trim().parse().ok(),
        };
        number.map(Some).ok_or_else(|| {
            self.manifest_error(
                value,
                format!(
                    "{:?} must be a whole number from 0 to {}, it is {}",
                    value.source,
                    u32::MAX,
                    display(&found)
                ),
            )
        })
    }

    /// An error of a manifest expression: positioned at the value in pack.yaml.
    fn manifest_stop(&self, error: &EvalAltResult, value: &Value) -> Stop {
        if let Some(insufficient) = Insufficient::in_error(error) {
            return insufficient.into();
        }
        let mut script = ScriptError::from_rhai(error, &self.pack.dir, super::load::MANIFEST, None);
        script.line = Some(value.pos.line);
        script.column = Some(value.pos.column);
        script.message = format!("in {:?}: {}", value.source, script.message);
        Stop::Error(script)
    }

    /// Calls `fn name(args...)` of the pack's scripts.
    pub fn call(&self, function: &ScriptFunction, args: Vec<Dynamic>) -> Result<Dynamic, Stop> {
        let Some(script) = self.pack.scripts.get(function.script) else {
            return Err(Stop::Unknown(format!("no script for {}", function.name)));
        };
        let result = self.engine.call_fn_with_options::<Dynamic>(
            CallFnOptions::new(),
            &mut Scope::new(),
            &script.ast,
            &function.name,
            args,
        );
        result.map_err(|error| match Insufficient::in_error(&error) {
            Some(insufficient) => insufficient.into(),
            None => Stop::Error(ScriptError::from_rhai(
                &error,
                &self.pack.dir,
                &script.file,
                function_position(&script.source, &function.name),
            )),
        })
    }

    /// The findings of `check` about the subject of `ctx`.
    pub fn run(&self, check: &Check, ctx: &Context) -> Vec<Finding> {
        self.run_unless_skipped(check, ctx).unwrap_or_default()
    }

    /// [`Evaluator::run`], or `None` where the check's `when:` is false for
    /// the subject, so that it was not checked at all.
    pub fn run_unless_skipped(&self, check: &Check, ctx: &Context) -> Option<Vec<Finding>> {
        let applies = match &check.when {
            None => Ok(true),
            Some(when) => self.condition(when, ctx),
        };
        let outcome = match applies {
            Ok(false) => return None,
            Ok(true) => self.outcome(check, ctx),
            Err(stop) => Err(stop),
        };
        Some(match outcome {
            Ok(failures) => failures
                .into_iter()
                .map(|failure| self.failed(check, ctx, failure))
                .collect(),
            Err(Stop::Unknown(reason)) => vec![self.finding(
                check,
                ctx,
                FindingStatus::Unknown,
                reason,
                unknown_evidence(ctx),
                None,
            )],
            Err(Stop::Lacking { reason, file }) => {
                let mut finding = self.finding(
                    check,
                    ctx,
                    FindingStatus::Unknown,
                    reason,
                    unknown_evidence(ctx),
                    None,
                );
                finding.remediation = Some(collect_advice(file, &ctx.subject));
                vec![finding]
            }
            Err(Stop::Error(error)) => {
                let evidence = vec![Evidence {
                    file: error.file.clone(),
                    line: error.line,
                    column: error.column,
                    note: None,
                }];
                let mut finding = self.finding(
                    check,
                    ctx,
                    FindingStatus::ScriptError,
                    error.to_string(),
                    evidence,
                    None,
                );
                finding.about.error_kind = Some(error.kind);
                vec![finding]
            }
        })
    }

    /// Evaluates a `when`: it must be true or false.
    pub fn condition(&self, when: &Value, ctx: &Context) -> Result<bool, Stop> {
        self.value(when, ctx, &[])?.as_bool().map_err(|kind| {
            self.manifest_error(when, format!("`when` must be true or false, it is {kind}"))
        })
    }

    /// A manifest value that evaluated to the wrong type, as a script error
    /// at its place in pack.yaml.
    fn manifest_error(&self, value: &Value, message: String) -> Stop {
        Stop::Error(ScriptError {
            kind: super::sandbox::ScriptErrorKind::Runtime,
            file: self.pack.dir.join(super::load::MANIFEST),
            line: Some(value.pos.line),
            column: Some(value.pos.column),
            message,
        })
    }

    /// The pack's finding (`PACK.HOOK`) that its own hook (`mode`,
    /// `detect`) answered what the engine cannot use: a script error at its
    /// manifest, which names the hook.
    pub fn unusable_answer(&self, ctx: &Context, hook: &str, message: String) -> Finding {
        let stop = Stop::Error(ScriptError {
            kind: ScriptErrorKind::Runtime,
            file: self.pack.dir.join(MANIFEST),
            line: None,
            column: None,
            message,
        });
        self.pack_finding(ctx, hook, stop)
    }

    /// A finding about the pack itself (`PACK.WHAT`): its mode selection or
    /// a hook failed or could not decide.
    pub fn pack_finding(&self, ctx: &Context, what: &str, stop: Stop) -> Finding {
        let (status, message, evidence, error_kind) = match stop {
            Stop::Unknown(reason) | Stop::Lacking { reason, .. } => {
                (FindingStatus::Unknown, reason, unknown_evidence(ctx), None)
            }
            Stop::Error(error) => {
                let evidence = vec![Evidence {
                    file: error.file.clone(),
                    line: error.line,
                    column: error.column,
                    note: None,
                }];
                (
                    FindingStatus::ScriptError,
                    error.to_string(),
                    evidence,
                    Some(error.kind),
                )
            }
        };
        Finding {
            id: FindingId::pack(format!("{}.{what}", self.pack.name)),
            severity: Severity::Critical,
            status,
            message,
            evidence,
            expected: None,
            remediation: None,
            references: Vec::new(),
            about: FromCheck {
                pack: self.pack.name.clone(),
                subject: ctx.subject.clone(),
                peer: ctx.peer.as_ref().map(|peer| peer.name.clone()),
                family: None,
                error_kind,
            },
        }
    }

    fn failed(&self, check: &Check, ctx: &Context, failure: Failure) -> Finding {
        // The pack's words for what it wanted, where it gives them.
        let failure = match check.expected.as_ref().map(|e| self.text(e, ctx)) {
            Some(Ok(expected)) => Failure {
                expected,
                ..failure
            },
            _ => failure,
        };
        let extra = [
            ("actual", Dynamic::from(failure.actual.clone())),
            ("expected", Dynamic::from(failure.expected.clone())),
        ];
        let message = match self.value(&check.message, ctx, &extra) {
            Ok(message) => display(&message),
            Err(Stop::Unknown(reason) | Stop::Lacking { reason, .. }) => {
                format!("{} (cannot tell: {reason})", failure.actual)
            }
            Err(Stop::Error(error)) => {
                format!("{} (message template failed: {error})", failure.actual)
            }
        };
        let expected = (!failure.expected.is_empty()).then_some(failure.expected);
        self.finding(
            check,
            ctx,
            FindingStatus::Failed,
            message,
            failure.evidence,
            expected,
        )
    }

    fn finding(
        &self,
        check: &Check,
        ctx: &Context,
        status: FindingStatus,
        message: String,
        evidence: Vec<Evidence>,
        expected: Option<String>,
    ) -> Finding {
        // A check's remediation is for what it found wrong: what it could
        // not tell, or failed to run, is not known to need it.
        let remediation = check
            .remediation
            .as_ref()
            .filter(|_| status == FindingStatus::Failed)
            .and_then(|r| self.text(r, ctx).ok());
        Finding {
            id: FindingId::pack(check.id.clone()),
            severity: check.severity,
            status,
            message,
            evidence,
            expected,
            remediation,
            references: check.references.clone(),
            about: FromCheck {
                pack: self.pack.name.clone(),
                subject: ctx.subject.clone(),
                peer: ctx.peer.as_ref().map(|peer| peer.name.clone()),
                family: check.family,
                error_kind: None,
            },
        }
    }

    fn outcome(&self, check: &Check, ctx: &Context) -> Outcome {
        match &check.kind {
            CheckKind::Script { function } => {
                let function = ScriptFunction {
                    script: self.script_of(function).unwrap_or(usize::MAX),
                    name: function.clone(),
                };
                let result = self.call(&function, vec![Dynamic::from(ctx.clone())])?;
                let dump_dir = ctx
                    .netns
                    .as_ref()
                    .and_then(NetnsRef::entry)
                    .map(|entry| entry.dir.clone());
                let places = Places {
                    dump_dir: dump_dir.as_deref(),
                    cluster_dir: &ctx.snapshot.root.join("cluster"),
                };
                script_failures(result, &function, places, self)
            }
            CheckKind::Condition { condition, expect } => {
                condition_outcome(ctx, condition, *expect)
            }
            CheckKind::Within { value, networks } => self.within(value, networks, ctx),
            CheckKind::ReadyPod { label } => self.ready_pod(label, ctx),
            CheckKind::Annotation { key, expect } => self.annotation(key, expect.as_ref(), ctx),
            kind => {
                let own = ctx.netns.as_ref().ok_or_else(|| {
                    Stop::Unknown(format!("{} has no namespace dump", ctx.subject))
                })?;
                // `on: node`: the dump of the pod's node.
                let node = check.on_node.then(|| NetnsRef {
                    snapshot: own.snapshot.clone(),
                    id: NetnsId::Host {
                        node: own.id.node().to_owned(),
                    },
                });
                let netns = node.as_ref().unwrap_or(own);
                let entry = netns
                    .entry()
                    .ok_or_else(|| Stop::Unknown(format!("no dump of {}", netns.id)))?;
                self.dump_outcome(kind, ctx, netns, entry)
            }
        }
    }

    fn script_of(&self, function: &str) -> Option<usize> {
        self.pack.scripts.iter().position(|s| {
            s.ast
                .iter_functions()
                .any(|f| f.name == function && f.params.len() == 1)
        })
    }
}
