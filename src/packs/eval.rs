//! Evaluating a pack's checks: in snapshot scope (every node, pod and
//! object of a snapshot) and, for the walker, at one hop of a path.
//!
//! A check passes, fails, or cannot be decided: the last is an *unknown*
//! finding with the reason (a dump not collected), never a pass. A script
//! that fails is a finding too, positioned in the script.

use std::path::Path;
use std::sync::Arc;

use rhai::{CallFnOptions, Dynamic, Engine, EvalAltResult, Scope};

use super::host::{
    Insufficient, config_map_map, daemon_set_map, display, json_to_dynamic, link_is_up, link_kind,
    lladdr_text, service_map,
};
use super::model::*;
use super::sandbox::{ScriptError, function_position};
use super::scope::{Context, HopScope, NetnsRef, NodeRef, PodRef, Subject};
use crate::diagnostic::{Evidence, FindingId, FindingStatus};
use crate::netstack::routing::table_name;
use crate::snapshot::cluster::{GenericObject, Node, ObjectMeta, Pod, Service};
use crate::snapshot::input::Boundary;
use crate::snapshot::netns::iptables::{self, Target};
use crate::snapshot::netns::link::{Link, LinkKind};
use crate::snapshot::netns::neigh::NeighbourState;
use crate::snapshot::netns::nft;
use crate::snapshot::netns::route::Destination;
use crate::snapshot::netns::route::RouteFlag;
use crate::snapshot::netns::sockets::{self as ss, SocketProtocol};
use crate::snapshot::netns::{DumpFile, Lacking};
use crate::snapshot::problem::line_col;
use crate::snapshot::{NetnsId, Snapshot};

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
    /// Why the script stopped, for `script-error` findings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<super::sandbox::ScriptErrorKind>,
}

/// A failure before the check could conclude.
pub enum Stop {
    Unknown(String),
    Error(ScriptError),
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

    /// An error of a manifest expression: positioned at the value in pack.yaml.
    fn manifest_stop(&self, error: &EvalAltResult, value: &Value) -> Stop {
        if let Some(reason) = Insufficient::in_error(error) {
            return Stop::Unknown(reason);
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
            Some(reason) => Stop::Unknown(reason),
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
        let applies = match &check.when {
            None => Ok(true),
            Some(when) => self.condition(when, ctx),
        };
        let outcome = match applies {
            Ok(false) => return Vec::new(),
            Ok(true) => self.outcome(check, ctx),
            Err(stop) => Err(stop),
        };
        match outcome {
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
        }
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

    /// A finding about the pack itself (`PACK.WHAT`): its mode selection or
    /// a hook failed or could not decide.
    pub fn pack_finding(&self, ctx: &Context, what: &str, stop: Stop) -> Finding {
        let (status, message, evidence, error_kind) = match stop {
            Stop::Unknown(reason) => (FindingStatus::Unknown, reason, unknown_evidence(ctx), None),
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
            Err(Stop::Unknown(reason)) => format!("{} (cannot tell: {reason})", failure.actual),
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
        let remediation = check
            .remediation
            .as_ref()
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
            kind => {
                let netns = ctx.netns.as_ref().ok_or_else(|| {
                    Stop::Unknown(format!("{} has no namespace dump", ctx.subject))
                })?;
                let entry = netns
                    .entry()
                    .ok_or_else(|| Stop::Unknown(format!("no dump of {}", netns.id)))?;
                self.dump_outcome(kind, ctx, &entry.dir, entry.dump())
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

    fn dump_outcome(
        &self,
        kind: &CheckKind,
        ctx: &Context,
        dir: &Path,
        dump: &crate::snapshot::netns::NetnsDump,
    ) -> Outcome {
        let not_collected = |file: DumpFile| {
            let lacking = dump.lacking(file).unwrap_or(Lacking {
                file,
                unreadable: None,
            });
            Stop::Unknown(lacking.of(&ctx.subject))
        };
        let fail = |actual: String, expected: String, evidence: Evidence| {
            Ok(vec![Failure {
                actual,
                expected,
                evidence: vec![evidence],
            }])
        };
        match kind {
            CheckKind::Sysctl { key, expect } => {
                let key = self.required_text(key, ctx)?;
                let expect = self.required_text(expect, ctx)?;
                let sysctls = dump
                    .sysctls
                    .as_ref()
                    .ok_or_else(|| not_collected(DumpFile::Sysctl))?;
                let evidence = Evidence::locate(dir, DumpFile::Sysctl, &format!("{key} = "));
                match sysctls.get(&key) {
                    Some(actual) if actual.trim() == expect.trim() => Ok(Vec::new()),
                    Some(actual) => fail(
                        format!("{key} = {}", actual.trim()),
                        format!("{key} = {expect}"),
                        evidence,
                    ),
                    None => fail(
                        format!("{key} is not set"),
                        format!("{key} = {expect}"),
                        evidence,
                    ),
                }
            }
            CheckKind::Device(device) => {
                let DeviceCheck {
                    name,
                    kind,
                    mtu,
                    state,
                    master,
                    address,
                    mac,
                    vni,
                    port,
                    local,
                } = &**device;
                let name = self.required_text(name, ctx)?;
                let kind = self.optional_text(kind.as_ref(), ctx)?;
                let mtu = self.optional_text(mtu.as_ref(), ctx)?;
                let master = self.optional_text(master.as_ref(), ctx)?;
                let address = self.optional_text(address.as_ref(), ctx)?;
                let mac = self.optional_text(mac.as_ref(), ctx)?;
                let vxlan = VxlanWanted {
                    vni: self.optional_text(vni.as_ref(), ctx)?,
                    port: self.optional_text(port.as_ref(), ctx)?,
                    local: self.optional_text(local.as_ref(), ctx)?,
                };
                let links = dump
                    .links
                    .as_ref()
                    .ok_or_else(|| not_collected(DumpFile::IpLink))?;
                let addrs = match address {
                    Some(_) => Some(
                        dump.addrs
                            .as_ref()
                            .ok_or_else(|| not_collected(DumpFile::IpAddr))?,
                    ),
                    None => None,
                };
                let pattern = name.contains('*');
                let matching: Vec<_> = links.iter().filter(|l| glob(&name, &l.ifname)).collect();
                // What every matching device must be, whichever it is.
                let mut expected = Vec::new();
                if let Some(kind) = &kind {
                    expected.push(format!("kind {kind}"));
                }
                if let Some(mtu) = &mtu {
                    expected.push(format!("mtu {mtu}"));
                }
                if let Some(state) = state {
                    expected.push(
                        if *state == DeviceState::Up {
                            "up"
                        } else {
                            "down"
                        }
                        .to_owned(),
                    );
                }
                if let Some(master) = &master {
                    expected.push(format!("master {master}"));
                }
                vxlan.describe(&mut expected);
                if let Some(mac) = &mac {
                    expected.push(format!("MAC {mac}"));
                }
                if let Some(address) = &address {
                    expected.push(format!("address {address}"));
                }
                let described = |ifname: &str| {
                    if expected.is_empty() {
                        format!("device {ifname}")
                    } else {
                        format!("{ifname}: {}", expected.join(", "))
                    }
                };
                if matching.is_empty() && !pattern {
                    return fail(
                        format!("no device {name}"),
                        described(&name),
                        Evidence::file(dir.join(DumpFile::IpLink.name())),
                    );
                }
                let mut failures = Vec::new();
                for link in matching {
                    let mut wrong = Vec::new();
                    if let Some(kind) = &kind
                        && link_kind(link) != kind
                    {
                        wrong.push(format!("kind {}", or_none(link_kind(link))));
                    }
                    if let Some(mtu) = &mtu
                        && link.mtu.to_string() != *mtu
                    {
                        wrong.push(format!("mtu {}", link.mtu));
                    }
                    if let Some(state) = state {
                        let want_up = *state == DeviceState::Up;
                        if link_is_up(link) != want_up {
                            wrong.push(format!("state {}", link.operstate));
                        }
                    }
                    if let Some(master) = &master
                        && link.master.as_deref() != Some(master.as_str())
                    {
                        wrong.push(format!(
                            "master {}",
                            link.master.as_deref().unwrap_or("none")
                        ));
                    }
                    vxlan.compare(link, &mut wrong);
                    if let Some(mac) = &mac {
                        let own = link.address.as_ref().map(lladdr_text);
                        if !own
                            .as_deref()
                            .is_some_and(|own| own.eq_ignore_ascii_case(mac))
                        {
                            wrong.push(format!("MAC {}", own.as_deref().unwrap_or("none")));
                        }
                    }
                    if let (Some(address), Some(addrs)) = (&address, addrs) {
                        let held: Vec<String> = addrs
                            .iter()
                            .filter(|a| a.ifname == link.ifname)
                            .flat_map(|a| &a.addresses)
                            .map(|a| format!("{}/{}", a.local, a.network.prefix_len()))
                            .collect();
                        // `IP/LEN` wants that prefix length too, `IP` any.
                        let holds = held.iter().any(|h| {
                            h == address
                                || (!address.contains('/') && h.split('/').next() == Some(address))
                        });
                        if !holds {
                            wrong.push(if held.is_empty() {
                                "no address".to_owned()
                            } else {
                                format!("address {}", held.join(", "))
                            });
                        }
                    }
                    if !wrong.is_empty() {
                        failures.push(Failure {
                            actual: format!("{}: {}", link.ifname, wrong.join(", ")),
                            expected: described(&link.ifname),
                            evidence: vec![Evidence::locate(
                                dir,
                                DumpFile::IpLink,
                                &format!("\"ifname\":\"{}\"", link.ifname),
                            )],
                        });
                    }
                }
                Ok(failures)
            }
            CheckKind::Route {
                dst,
                via,
                dev,
                table,
                onlink,
            } => {
                let dst = self.required_text(dst, ctx)?;
                let via = self.optional_text(via.as_ref(), ctx)?;
                let dev = self.optional_text(dev.as_ref(), ctx)?;
                let onlink = self.optional_bool(onlink.as_ref(), ctx)?.unwrap_or(false);
                let table = self
                    .optional_text(table.as_ref(), ctx)?
                    .unwrap_or_else(|| "main".into());
                let routes = dump
                    .routes
                    .as_ref()
                    .ok_or_else(|| not_collected(DumpFile::IpRoute))?;
                let wanted = (dst != "default")
                    .then(|| dst.parse::<ipnet::IpNet>())
                    .transpose()
                    .map_err(|_| {
                        Stop::Unknown(format!("route dst {dst:?} is neither default nor a prefix"))
                    })?;
                let candidates: Vec<_> = routes
                    .iter()
                    .filter(|r| table_name(&r.table) == table)
                    .filter(|r| match (&r.dst, wanted) {
                        (Destination::Default, None) => true,
                        (Destination::Prefix(p), Some(w)) => p.trunc() == w.trunc(),
                        _ => false,
                    })
                    .collect();
                let mut expected = dst.clone();
                if let Some(via) = &via {
                    expected.push_str(&format!(" via {via}"));
                }
                if let Some(dev) = &dev {
                    expected.push_str(&format!(" dev {dev}"));
                }
                if onlink {
                    expected.push_str(" onlink");
                }
                expected.push_str(&format!(" (table {table})"));
                let fits = candidates.iter().any(|r| {
                    via.as_ref()
                        .is_none_or(|v| r.gateway.map(|g| g.to_string()).as_deref() == Some(v))
                        && dev
                            .as_ref()
                            .is_none_or(|d| r.dev.as_deref() == Some(d.as_str()))
                        && (!onlink || r.has_flag(&RouteFlag::Onlink))
                });
                if fits {
                    return Ok(Vec::new());
                }
                let actual = match candidates.first() {
                    None => format!("no route to {dst} in table {table}"),
                    Some(r) => crate::netstack::routing::describe_route(r),
                };
                let needle = if dst == "default" {
                    "\"dst\":\"default\"".to_owned()
                } else {
                    format!("\"dst\":\"{dst}\"")
                };
                fail(
                    actual,
                    expected,
                    Evidence::locate(dir, DumpFile::IpRoute, &needle),
                )
            }
            CheckKind::Neighbour { dst, dev, lladdr } => {
                let dst = self.required_text(dst, ctx)?;
                let dev = self.optional_text(dev.as_ref(), ctx)?;
                let lladdr = self.optional_text(lladdr.as_ref(), ctx)?;
                let neighbours = dump
                    .neighbours
                    .as_ref()
                    .ok_or_else(|| not_collected(DumpFile::IpNeigh))?;
                let entries: Vec<_> = neighbours
                    .iter()
                    .filter(|n| {
                        n.dst.to_string() == dst && dev.as_ref().is_none_or(|d| n.dev == *d)
                    })
                    .collect();
                let usable = entries.iter().any(|n| {
                    lladdr.as_ref().is_none_or(|l| {
                        n.lladdr
                            .as_ref()
                            .is_some_and(|own| lladdr_text(own).eq_ignore_ascii_case(l))
                    }) && !n.has_state(&NeighbourState::Failed)
                        && !n.has_state(&NeighbourState::Incomplete)
                });
                if usable {
                    return Ok(Vec::new());
                }
                let on = dev.as_ref().map(|d| format!(" on {d}")).unwrap_or_default();
                let actual = match entries.first() {
                    None => format!("no neighbour entry for {dst}{on}"),
                    Some(n) => {
                        let states: Vec<String> = n.state.iter().map(ToString::to_string).collect();
                        format!(
                            "neighbour {dst}{on} has lladdr {} ({})",
                            n.lladdr.as_ref().map_or("none".to_owned(), lladdr_text),
                            states.join(", ")
                        )
                    }
                };
                let expected = format!(
                    "neighbour {dst}{}{}",
                    dev.map(|d| format!(" dev {d}")).unwrap_or_default(),
                    lladdr.map(|l| format!(" lladdr {l}")).unwrap_or_default()
                );
                fail(
                    actual,
                    expected,
                    Evidence::locate(dir, DumpFile::IpNeigh, &format!("\"dst\":\"{dst}\"")),
                )
            }
            CheckKind::Fdb { dev, mac, dst } => {
                let dev = self.required_text(dev, ctx)?;
                let mac = self.optional_text(mac.as_ref(), ctx)?;
                let dst = self.optional_text(dst.as_ref(), ctx)?;
                let fdb = dump
                    .fdb
                    .as_ref()
                    .ok_or_else(|| not_collected(DumpFile::BridgeFdb))?;
                let entries: Vec<_> = fdb
                    .iter()
                    .filter(|e| {
                        e.ifname == dev
                            && mac
                                .as_ref()
                                .is_none_or(|m| e.mac.to_string().eq_ignore_ascii_case(m))
                    })
                    .collect();
                let remote =
                    |e: &crate::snapshot::netns::fdb::FdbEntry| e.dst.map(|x| x.to_string());
                if entries.iter().any(|e| {
                    dst.as_ref()
                        .is_none_or(|d| remote(e).as_deref() == Some(d.as_str()))
                }) {
                    return Ok(Vec::new());
                }
                // Per remote node, an entry sending a MAC to an address is
                // that node's VTEP.
                let entry = match (&mac, &ctx.peer, &dst) {
                    (Some(mac), Some(peer), Some(_)) => format!("{}'s VTEP {mac}", peer.name),
                    (Some(mac), ..) => mac.clone(),
                    (None, ..) => String::new(),
                };
                let actual = match entries.first() {
                    None if entry.is_empty() => format!("no FDB entry on {dev}"),
                    None => format!("no FDB entry for {entry} on {dev}"),
                    Some(e) => format!(
                        "the FDB entry for {} on {dev} sends to {}",
                        mac.as_deref().unwrap_or("it"),
                        remote(e).as_deref().unwrap_or("no remote")
                    ),
                };
                let expected = format!(
                    "fdb {}dev {dev}{}",
                    mac.as_ref().map(|m| format!("{m} ")).unwrap_or_default(),
                    dst.map(|d| format!(" dst {d}")).unwrap_or_default()
                );
                let evidence = match &mac {
                    Some(mac) => Evidence::locate(dir, DumpFile::BridgeFdb, mac),
                    None => Evidence::file(dir.join(DumpFile::BridgeFdb.name())),
                };
                fail(actual, expected, evidence)
            }
            CheckKind::Listener { port, protocol } => {
                let port_text = self.required_text(port, ctx)?;
                let protocol = self
                    .optional_text(protocol.as_ref(), ctx)?
                    .unwrap_or_else(|| "tcp".into())
                    .to_lowercase();
                let sockets = dump
                    .sockets
                    .as_ref()
                    .ok_or_else(|| not_collected(DumpFile::Ss))?;
                let listening = sockets
                    .iter()
                    .any(|s| s.port.to_string() == port_text && s.protocol.as_str() == protocol);
                if listening {
                    return Ok(Vec::new());
                }
                if protocol == SocketProtocol::Sctp.as_str()
                    && !ss::lists(sockets, SocketProtocol::Sctp)
                {
                    return Err(Stop::Unknown(format!(
                        "{}: {}",
                        ctx.subject,
                        ss::SCTP_UNLISTED
                    )));
                }
                fail(
                    format!("nothing listens on {protocol} port {port_text}"),
                    format!("a {protocol} socket on port {port_text}"),
                    Evidence::file(dir.join(DumpFile::Ss.name())),
                )
            }
            CheckKind::Jump { jumps } => {
                let mut failures = Vec::new();
                for jump in jumps {
                    let family = self.optional_text(jump.family.as_ref(), ctx)?;
                    let table = self.required_text(&jump.table, ctx)?;
                    let chain = self.required_text(&jump.chain, ctx)?;
                    let target = self.required_text(&jump.target, ctx)?;
                    let wanted = JumpWanted {
                        table: &table,
                        chain: &chain,
                        target: &target,
                    };
                    let failure = match &family {
                        None => wanted.in_iptables(
                            dir,
                            dump.iptables
                                .as_ref()
                                .ok_or_else(|| not_collected(DumpFile::IptablesSave))?,
                        ),
                        Some(family) => wanted.in_nftables(
                            dir,
                            family,
                            dump.nftables
                                .as_ref()
                                .ok_or_else(|| not_collected(DumpFile::NftRuleset))?,
                        ),
                    };
                    failures.extend(failure);
                }
                Ok(failures)
            }
            CheckKind::Condition { .. } | CheckKind::Script { .. } => Ok(Vec::new()),
        }
    }
}

/// What a device check wants of a VXLAN device; `None` is not checked.
struct VxlanWanted {
    vni: Option<String>,
    port: Option<String>,
    local: Option<String>,
}

impl VxlanWanted {
    /// What is wanted, for the finding's `expected`.
    fn describe(&self, expected: &mut Vec<String>) {
        if let Some(vni) = &self.vni {
            expected.push(format!("VNI {vni}"));
        }
        if let Some(port) = &self.port {
            expected.push(format!("UDP port {port}"));
        }
        if let Some(local) = &self.local {
            expected.push(format!("local {local}"));
        }
    }

    /// Adds what `link` has wrong to `wrong`. A port the dump does not show
    /// (older iproute2) is not held against it.
    fn compare(&self, link: &Link, wrong: &mut Vec<String>) {
        if self.vni.is_none() && self.port.is_none() && self.local.is_none() {
            return;
        }
        let Some(LinkKind::Vxlan(vxlan)) = link.kind() else {
            wrong.push("no VXLAN settings (not a vxlan device)".to_owned());
            return;
        };
        if let Some(vni) = &self.vni
            && vxlan.id.to_string() != *vni
        {
            wrong.push(format!("VNI {}", vxlan.id));
        }
        if let (Some(port), Some(found)) = (&self.port, vxlan.port)
            && found.to_string() != *port
        {
            wrong.push(format!("UDP port {found}"));
        }
        if let Some(local) = &self.local {
            let found = vxlan.local.map(|l| l.to_string());
            if found.as_deref() != Some(local.as_str()) {
                wrong.push(format!("local {}", found.as_deref().unwrap_or("unset")));
            }
        }
    }
}

/// A jump a check wants: `chain` of `table` sends packets on to `target`.
struct JumpWanted<'a> {
    table: &'a str,
    chain: &'a str,
    target: &'a str,
}

impl JumpWanted<'_> {
    fn in_iptables(&self, dir: &Path, ruleset: &iptables::Ruleset) -> Option<Failure> {
        let file = dir.join(DumpFile::IptablesSave.name());
        let at = |line: usize| Evidence {
            column: Some(1),
            ..Evidence::line(file.clone(), line)
        };
        let expected = format!(
            "-A {} -j {} in the {} table",
            self.chain, self.target, self.table
        );
        let table = ruleset
            .tables
            .iter()
            .find(|t| t.name.as_str() == self.table);
        let missing = |chain: &str| Failure {
            actual: format!("no {chain} chain in the {} table", self.table),
            expected: expected.clone(),
            evidence: vec![table.map_or_else(|| Evidence::file(file.clone()), |t| at(t.line))],
        };
        let Some(from) = table.and_then(|t| t.chain(self.chain)) else {
            return Some(missing(self.chain));
        };
        if table.and_then(|t| t.chain(self.target)).is_none() {
            return Some(missing(self.target));
        }
        let jumps = from.rules.iter().any(|rule| {
            matches!(&rule.target, Some(Target::Jump(c) | Target::Goto(c)) if &*c.name == self.target)
        });
        (!jumps).then(|| Failure {
            actual: format!(
                "{} {} does not jump to {}",
                self.table, self.chain, self.target
            ),
            expected,
            evidence: vec![at(from.line)],
        })
    }

    fn in_nftables(&self, dir: &Path, family: &str, ruleset: &nft::Ruleset) -> Option<Failure> {
        let file = dir.join(DumpFile::NftRuleset.name());
        let at = |(line, column): (usize, usize)| Evidence {
            column: Some(column),
            ..Evidence::line(file.clone(), line)
        };
        let table_name = format!("{family} {}", self.table);
        let expected = format!(
            "a rule of chain {} in table {table_name} that jumps or goes to {}",
            self.chain, self.target
        );
        let table = ruleset
            .tables
            .iter()
            .find(|t| t.family.as_str() == family && t.name == self.table);
        let missing = |chain: &str| Failure {
            actual: match table {
                None => format!("no table {table_name}"),
                Some(_) => format!("no chain {chain} in table {table_name}"),
            },
            expected: expected.clone(),
            evidence: vec![Evidence::file(file.clone())],
        };
        let Some(from) = table.and_then(|t| t.chain(self.chain)) else {
            return Some(missing(self.chain));
        };
        if table.and_then(|t| t.chain(self.target)).is_none() {
            return Some(missing(self.target));
        }
        let jumps = from
            .rules
            .iter()
            .any(|rule| rule.chain_targets().contains(&self.target));
        (!jumps).then(|| Failure {
            actual: format!(
                "chain {} of table {table_name} does not jump to {}",
                self.chain, self.target
            ),
            expected,
            evidence: vec![at(from.position)],
        })
    }
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "none" } else { text }
}

/// `*` matches any run of characters; everything else itself.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            let Some(tail) = name.strip_prefix(prefix) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}

/// Where a script check's evidence may point: the subject's dump, and the
/// snapshot's cluster objects.
struct Places<'p> {
    dump_dir: Option<&'p Path>,
    cluster_dir: &'p Path,
}

/// A script check returns `()` or `true` (pass), `false`, a message, a map
/// `#{actual, expected}`, or an array of messages or maps (one failure each).
/// A map may name its evidence in the subject's dump, `file` (`ip-neigh.json`)
/// and optionally `find` (text to locate there), as declarative checks do;
/// and the cluster objects it rests on, `objects` (their `source`s).
fn script_failures(
    result: Dynamic,
    function: &ScriptFunction,
    places: Places<'_>,
    evaluator: &Evaluator<'_>,
) -> Outcome {
    let script_error = |message: String| {
        let script = evaluator.pack.scripts.get(function.script);
        let position = script.and_then(|s| function_position(&s.source, &function.name));
        Stop::Error(ScriptError {
            kind: super::sandbox::ScriptErrorKind::Runtime,
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
                if let Some(dir) = places.dump_dir {
                    evidence.push(match map.get("find") {
                        Some(needle) => Evidence::locate(dir, file, &display(needle)),
                        None => Evidence::file(dir.join(file.name())),
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

fn condition_outcome(ctx: &Context, condition: &str, expect: bool) -> Outcome {
    let snapshot = &ctx.snapshot;
    let (status, source): (Option<bool>, Option<Evidence>) =
        if let Some(pod) = ctx.pod.as_ref().and_then(PodRef::get) {
            let status = match condition {
                "Ready" => pod.ready,
                "ContainersReady" => pod.containers_ready,
                other => {
                    return Err(Stop::Unknown(format!(
                        "the model keeps only Ready and ContainersReady of a Pod, not {other}"
                    )));
                }
            };
            (status, Some(pod.meta.source.evidence()))
        } else if let Some(node) = ctx.node.as_ref().and_then(NodeRef::get) {
            if condition != "Ready" {
                return Err(Stop::Unknown(format!(
                    "the model keeps only Ready of a Node, not {condition}"
                )));
            }
            (node.ready, Some(node.meta.source.evidence()))
        } else if let Some(object) = &ctx.object {
            let status = object
                .clone()
                .try_cast::<rhai::Map>()
                .and_then(|m| m.get("status")?.clone().try_cast::<rhai::Map>())
                .and_then(|s| s.get("conditions")?.clone().try_cast::<rhai::Array>())
                .and_then(|conditions| {
                    conditions.into_iter().find_map(|c| {
                        let c = c.try_cast::<rhai::Map>()?;
                        (c.get("type")?.to_string() == condition)
                            .then(|| c.get("status").map(|s| s.to_string()))?
                    })
                })
                .and_then(|s| match s.as_str() {
                    "True" => Some(true),
                    "False" => Some(false),
                    _ => None,
                });
            (status, None)
        } else {
            let _ = snapshot;
            return Err(Stop::Unknown(format!(
                "{} is not an object with conditions",
                ctx.subject
            )));
        };
    match status {
        Some(actual) if actual == expect => Ok(Vec::new()),
        Some(actual) => Ok(vec![Failure {
            actual: format!("{condition} is {}", if actual { "True" } else { "False" }),
            expected: format!("{condition} is {}", if expect { "True" } else { "False" }),
            evidence: source.into_iter().collect(),
        }]),
        None => Err(Stop::Unknown(format!(
            "{} reports no {condition} condition (or Unknown)",
            ctx.subject
        ))),
    }
}

/// Every subject of a scope in a snapshot that `about` accepts, as contexts;
/// the peers of a check made per remote node are the nodes it accepts as
/// peers.
pub fn subjects(
    check: &Check,
    params: &Dynamic,
    snapshot: &Arc<Snapshot>,
    about: &super::About<'_>,
) -> Vec<Context> {
    let (peer, objects) = (about.peer, about.objects);
    let about = about.subject;
    let base = |subject: Subject| Context::new(params.clone(), snapshot.clone(), subject);
    let mut contexts = Vec::new();
    match check.scope {
        CheckScope::Node => {
            for id in snapshot.namespaces.keys() {
                let NetnsId::Host { node } = id else { continue };
                let subject = Subject::Node { name: node.clone() };
                if !about(&subject) {
                    continue;
                }
                let mut ctx = base(subject);
                ctx.node = NodeRef::new(snapshot, node);
                ctx.netns = Some(NetnsRef {
                    snapshot: snapshot.clone(),
                    id: id.clone(),
                });
                match check.for_each {
                    Some(ForEach::RemoteNodes) => {
                        let peers = snapshot.cluster.nodes().filter(|n| {
                            n.meta.name != *node
                                && peer(&Subject::Node {
                                    name: n.meta.name.clone(),
                                })
                        });
                        for peer in peers {
                            let mut ctx = ctx.clone();
                            ctx.peer = NodeRef::new(snapshot, &peer.meta.name);
                            contexts.push(ctx);
                        }
                    }
                    _ => contexts.push(ctx),
                }
            }
        }
        CheckScope::Pod => {
            for id in snapshot.namespaces.keys() {
                let NetnsId::Pod {
                    node,
                    namespace,
                    name,
                } = id
                else {
                    continue;
                };
                let subject = Subject::Pod {
                    namespace: namespace.clone(),
                    name: name.clone(),
                };
                if !about(&subject) {
                    continue;
                }
                let mut ctx = base(subject);
                ctx.node = NodeRef::new(snapshot, node);
                ctx.pod = PodRef::new(snapshot, namespace, name);
                ctx.netns = Some(NetnsRef {
                    snapshot: snapshot.clone(),
                    id: id.clone(),
                });
                match check.for_each {
                    Some(ForEach::ContainerPorts) => {
                        let ports: Vec<Dynamic> = ctx
                            .pod
                            .as_ref()
                            .and_then(PodRef::get)
                            .map(container_ports)
                            .unwrap_or_default();
                        for port in ports {
                            let mut ctx = ctx.clone();
                            ctx.port = Some(port);
                            contexts.push(ctx);
                        }
                    }
                    _ => contexts.push(ctx),
                }
            }
        }
        CheckScope::Object => {
            let Some(kind) = &check.object else {
                return contexts;
            };
            let version_fits = |v: &str| kind.api_version.as_deref().is_none_or(|want| want == v);
            // One subject refilled per object: asking about each of a large
            // cluster's 150,000 pods must not allocate three strings for each.
            let asked = std::cell::RefCell::new(Subject::Object {
                kind: kind.kind.clone(),
                namespace: String::new(),
                name: String::new(),
            });
            let wanted = |meta: &ObjectMeta| {
                let mut subject = asked.borrow_mut();
                if let Subject::Object {
                    namespace, name, ..
                } = &mut *subject
                {
                    namespace.clone_from(&meta.namespace);
                    name.clone_from(&meta.name);
                }
                about(&subject)
            };
            // With `objects`, only the objects named: looked up, not scanned for.
            let listed: Option<Vec<(&str, &str)>> = objects.map(|listed| {
                listed
                    .iter()
                    .filter_map(|subject| match subject {
                        Subject::Object {
                            kind: k,
                            namespace,
                            name,
                        } if *k == kind.kind => Some((namespace.as_str(), name.as_str())),
                        _ => None,
                    })
                    .collect()
            });
            let cluster = &snapshot.cluster;
            match kind.kind.as_str() {
                "Node" if version_fits("v1") => {
                    let nodes = named_or_all(&listed, cluster.nodes(), |_, n| cluster.node(n));
                    for node in nodes.into_iter().filter(|n| wanted(&n.meta)) {
                        contexts.push(node_object(node, params, snapshot));
                    }
                }
                "Pod" if version_fits("v1") => {
                    let pods = named_or_all(&listed, cluster.pods(), |ns, n| cluster.pod(ns, n));
                    for pod in pods.into_iter().filter(|p| wanted(&p.meta)) {
                        contexts.push(pod_object(pod, params, snapshot));
                    }
                }
                "Service" if version_fits("v1") => {
                    let services =
                        named_or_all(&listed, cluster.services(), |ns, n| cluster.service(ns, n));
                    for service in services.into_iter().filter(|s| wanted(&s.meta)) {
                        contexts.push(service_object(service, params, snapshot));
                    }
                }
                "DaemonSet" if version_fits("apps/v1") => {
                    let daemon_sets = named_or_all(&listed, cluster.daemon_sets(), |ns, n| {
                        cluster.daemon_set(ns, n)
                    });
                    for ds in daemon_sets.into_iter().filter(|d| wanted(&d.meta)) {
                        let mut ctx = object_context("DaemonSet", &ds.meta, params, snapshot);
                        ctx.object = Some(daemon_set_map(ds));
                        contexts.push(ctx);
                    }
                }
                "ConfigMap" if version_fits("v1") => {
                    let config_maps = named_or_all(&listed, cluster.config_maps(), |ns, n| {
                        cluster.config_map(ns, n)
                    });
                    for cm in config_maps.into_iter().filter(|c| wanted(&c.meta)) {
                        let mut ctx = object_context("ConfigMap", &cm.meta, params, snapshot);
                        ctx.object = Some(config_map_map(cm));
                        contexts.push(ctx);
                    }
                }
                _ => {
                    // Objects as written are not indexed by name: the named
                    // ones are found among those of their kind.
                    let named = |meta: &ObjectMeta| {
                        listed.as_ref().is_none_or(|names| {
                            names.contains(&(meta.namespace.as_str(), meta.name.as_str()))
                        })
                    };
                    for object in cluster.others().filter(|o| {
                        o.kind == kind.kind
                            && version_fits(&o.api_version)
                            && named(&o.meta)
                            && wanted(&o.meta)
                    }) {
                        contexts.push(generic_object(object, params, snapshot));
                    }
                }
            }
        }
        CheckScope::Hop => {}
    }
    contexts
}

/// The objects `lookup` finds by the `(namespace, name)`s `listed`, or,
/// with no list, every one of `all`.
fn named_or_all<'c, T: 'c>(
    listed: &Option<Vec<(&str, &str)>>,
    all: impl Iterator<Item = &'c T>,
    lookup: impl Fn(&str, &str) -> Option<&'c T>,
) -> Vec<&'c T> {
    match listed {
        Some(names) => names.iter().filter_map(|&(ns, n)| lookup(ns, n)).collect(),
        None => all.collect(),
    }
}

fn object_subject(kind: &str, meta: &ObjectMeta) -> Subject {
    Subject::Object {
        kind: kind.into(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
    }
}

/// The context of an object check about the object `meta` names.
fn object_context(
    kind: &str,
    meta: &ObjectMeta,
    params: &Dynamic,
    snapshot: &Arc<Snapshot>,
) -> Context {
    Context::new(params.clone(), snapshot.clone(), object_subject(kind, meta))
}

fn node_object(node: &Node, params: &Dynamic, snapshot: &Arc<Snapshot>) -> Context {
    let mut ctx = object_context("Node", &node.meta, params, snapshot);
    ctx.node = NodeRef::new(snapshot, &node.meta.name);
    ctx.object = ctx.node.clone().map(Dynamic::from);
    ctx
}

fn pod_object(pod: &Pod, params: &Dynamic, snapshot: &Arc<Snapshot>) -> Context {
    let mut ctx = object_context("Pod", &pod.meta, params, snapshot);
    ctx.pod = PodRef::new(snapshot, &pod.meta.namespace, &pod.meta.name);
    ctx.object = ctx.pod.clone().map(Dynamic::from);
    ctx
}

fn service_object(service: &Service, params: &Dynamic, snapshot: &Arc<Snapshot>) -> Context {
    let mut ctx = object_context("Service", &service.meta, params, snapshot);
    ctx.object = Some(service_map(service));
    ctx
}

fn generic_object(object: &GenericObject, params: &Dynamic, snapshot: &Arc<Snapshot>) -> Context {
    let mut ctx = object_context(&object.kind, &object.meta, params, snapshot);
    ctx.object = Some(json_to_dynamic(&object.value));
    ctx
}

fn container_ports(pod: &Pod) -> Vec<Dynamic> {
    pod.containers
        .iter()
        .flat_map(|c| {
            c.ports.iter().map(move |p| {
                let map: rhai::Map = [
                    ("container".into(), Dynamic::from(c.name.clone())),
                    ("port".into(), Dynamic::from(i64::from(p.container_port))),
                    (
                        "protocol".into(),
                        Dynamic::from(p.protocol.as_str().to_lowercase()),
                    ),
                ]
                .into_iter()
                .collect();
                Dynamic::from_map(map)
            })
        })
        .collect()
}

/// The context of a hop-scoped check or hook.
pub fn hop_context(params: &Dynamic, hop: &Arc<HopScope>) -> Context {
    let snapshot = &hop.snapshot;
    let mut ctx = Context::new(
        params.clone(),
        snapshot.clone(),
        Subject::Hop {
            netns: hop.netns.to_string(),
        },
    );
    ctx.node = NodeRef::new(snapshot, hop.netns.node());
    if let NetnsId::Pod {
        namespace, name, ..
    } = &hop.netns
    {
        ctx.pod = PodRef::new(snapshot, namespace, name);
    }
    ctx.netns = Some(NetnsRef {
        snapshot: snapshot.clone(),
        id: hop.netns.clone(),
    });
    ctx.hop = Some(hop.clone());
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_star_matches_any_run() {
        assert!(glob("*", "eth0"));
        assert!(glob("veth*", "veth53842afe"));
        assert!(glob("cali*x", "cali1234x"));
        assert!(!glob("veth*", "eth0"));
        assert!(glob("eth0", "eth0"));
    }
}
