//! A pack's checks: the fields every check has, and those of its kind,
//! one function each.

use rhai::Engine;

use super::expressions::ExpressionCompiler;
use super::{Loader, keyword, object_kind};
use crate::net::Family;
use crate::packs::model::*;
use crate::packs::yaml::{self, At, Fields, Node};

/// What every check of a pack is compiled against.
pub(super) struct CheckContext<'a> {
    pub(super) engine: &'a Engine,
    pub(super) compiler: &'a ExpressionCompiler,
    pub(super) pack: &'a str,
    pub(super) modes: &'a [String],
    pub(super) scripts: &'a [Script],
}

impl Loader<'_> {
    pub(super) fn checks(&mut self, node: &Node, cx: &CheckContext<'_>) -> Vec<Check> {
        let mut checks: Vec<Check> = Vec::new();
        let items = yaml::seq(node, "checks", &mut self.issues);
        for item in items {
            let Some(check) = self.check(item, cx) else {
                continue;
            };
            if let Some(first) = checks.iter().find(|c| c.id == check.id) {
                self.issues.push(check.pos.issue(format!(
                    "check id {} is used twice (first at line {})",
                    check.id, first.pos.line
                )));
                continue;
            }
            checks.push(check);
        }
        checks
    }

    fn check(&mut self, node: &Node, cx: &CheckContext<'_>) -> Option<Check> {
        let mut f = Fields::of(node, "a check", &mut self.issues)?;
        let engine = cx.engine;
        let compiler = cx.compiler;
        let id = f.required_string("id", &mut self.issues);
        if let Some(id) = &id {
            let prefix = format!("{}.", cx.pack);
            let valid = id.value.starts_with(&prefix)
                && id.value.len() > prefix.len()
                && id
                    .value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
            if !valid {
                self.issues.push(id.pos.issue(format!(
                    "check id {:?} must start with {prefix:?} and use lowercase letters, digits, dashes and dots",
                    id.value
                )));
            }
        }
        let severity = f
            .required_string("severity", &mut self.issues)
            .and_then(|s| keyword(&s, &Severity::ALL, "severity", &mut self.issues));
        let scope_at = f.required_string("scope", &mut self.issues);
        let scope = scope_at
            .as_ref()
            .and_then(|s| keyword(s, &CheckScope::ALL, "scope", &mut self.issues));
        let kind_at = f.required_string("kind", &mut self.issues);
        let object = f
            .take("object")
            .and_then(|n| object_kind(n, "object", &mut self.issues));
        let modes = self.mode_list(&mut f, cx.modes);
        let for_each = f
            .string("for_each", &mut self.issues)
            .and_then(|s| keyword(&s, &ForEach::ALL, "for_each", &mut self.issues));
        let family = f
            .string("ip_family", &mut self.issues)
            .and_then(|s| keyword(&s, &Family::NAMES, "ip_family", &mut self.issues));
        let on_at = f.string("on", &mut self.issues);
        let on_node = on_at
            .as_ref()
            .and_then(|on| keyword(on, &[("node", true)], "on", &mut self.issues))
            .unwrap_or(false);
        let when = f
            .take("when")
            .and_then(|n| self.value(n, "when", engine, compiler));
        let expected_node = f.take("expected");
        let expected = expected_node.and_then(|n| self.value(n, "expected", engine, compiler));
        let message = f
            .require("message", &mut self.issues)
            .and_then(|n| self.value(n, "message", engine, compiler));
        let remediation = f
            .take("remediation")
            .and_then(|n| self.remediation(n, engine, compiler));
        let references = f
            .strings("references", &mut self.issues)
            .into_iter()
            .map(|r| r.value)
            .collect();
        let doc = f
            .string("doc", &mut self.issues)
            .map(|d| d.value)
            .unwrap_or_default();
        // A kind missing a field it needs drops the check here, before its
        // other fields are judged.
        let kind = match kind_at.as_ref().map(|k| k.value.as_str()) {
            Some("sysctl") => Some(self.sysctl_check(&mut f, cx)?),
            Some("device") => Some(self.device_check(&mut f, cx)?),
            Some("route") => Some(self.route_check(&mut f, cx)?),
            Some("neighbour") => Some(self.neighbour_check(&mut f, cx)?),
            Some("fdb") => Some(self.fdb_check(&mut f, cx)?),
            Some("listener") => Some(self.listener_check(&mut f, cx)?),
            Some("jump") => self.jump_check(&mut f, cx),
            Some("rule") => self.rule_check(&mut f, cx, family),
            Some(
                name @ ("annotation" | "ready_pod" | "within" | "datapath_entry" | "masquerade"),
            ) => Some(self.valued_check(name, &mut f, cx)?),
            Some("condition") => Some(self.condition_check(&mut f, kind_at.as_ref(), scope)?),
            Some("script") => {
                let function = f.required_string("function", &mut self.issues)?;
                let found = self.function(&function, 1, cx.scripts, "script check")?;
                Some(CheckKind::Script {
                    function: found.name,
                })
            }
            Some(other) => {
                if let Some(at) = &kind_at {
                    self.issues.push(at.pos.issue(format!(
                        "check kind {other:?} is not one of sysctl, device, route, neighbour, fdb, listener, jump, rule, masquerade, datapath_entry, within, ready_pod, annotation, condition, script"
                    )));
                }
                None
            }
            None => None,
        };
        f.finish(&mut self.issues);

        if let (Some(node), Some(CheckKind::Script { .. } | CheckKind::Condition { .. })) =
            (expected_node, &kind)
        {
            self.issues.push(
                node.pos.issue(
                    "`expected` is for the declarative kinds; a script check returns its own",
                ),
            );
        }
        let (scope, kind) = (scope?, kind?);
        if let Some(at) = &scope_at {
            if scope == CheckScope::Object && object.is_none() {
                self.issues
                    .push(at.pos.issue("an object check needs `object: {kind: ...}`"));
            }
            let fits = match for_each {
                None => true,
                Some(ForEach::RemoteNodes | ForEach::LocalPods) => scope == CheckScope::Node,
                Some(ForEach::ContainerPorts) => scope == CheckScope::Pod,
            };
            if !fits {
                self.issues.push(at.pos.issue(
                    "for_each remote_nodes and local_pods need `scope: node`, container_ports `scope: pod`",
                ));
            }
        }
        if let Some(on) = &on_at
            && scope != CheckScope::Pod
        {
            self.issues
                .push(on.pos.issue("`on: node` is for a pod check"));
        }
        Some(Check {
            id: id?.value,
            severity: severity?,
            scope,
            kind,
            object,
            modes,
            for_each,
            family,
            on_node,
            when,
            expected,
            message: message?,
            remediation,
            references,
            doc,
            pos: node.pos,
        })
    }

    /// `remediation`: what to do about what the check found wrong, as a
    /// value or by status, `{failed: VALUE}`. It is offered for `failed`
    /// only: a check that cannot tell (`unknown`) is told by skoop which
    /// dump file to collect, and one whose script failed (`script-error`) is
    /// the pack's to fix, so a remediation for either is a problem.
    fn remediation(
        &mut self,
        node: &Node,
        engine: &Engine,
        compiler: &ExpressionCompiler,
    ) -> Option<Value> {
        if !matches!(node.value, yaml::Value::Map(_)) {
            return self.value(node, "remediation", engine, compiler);
        }
        let mut by_status = Fields::of(node, "remediation", &mut self.issues)?;
        for (status, why) in [
            (
                "unknown",
                "a check that cannot tell is told which dump file to collect, never a remedy for what is not known",
            ),
            (
                "script-error",
                "a check whose script failed is the pack's to fix",
            ),
        ] {
            if let Some(offered) = by_status.take(status) {
                self.issues.push(offered.pos.issue(format!(
                    "remediation for `{status}`: {why}; give one for `failed` only"
                )));
            }
        }
        let failed = by_status.require("failed", &mut self.issues);
        by_status.finish(&mut self.issues);
        failed.and_then(|n| self.value(n, "remediation", engine, compiler))
    }

    /// The kinds whose fields are all values: `annotation`, `ready_pod`,
    /// `within`, `datapath_entry` and `masquerade`.
    fn valued_check(
        &mut self,
        name: &str,
        f: &mut Fields<'_>,
        cx: &CheckContext<'_>,
    ) -> Option<CheckKind> {
        match name {
            "annotation" => {
                let key = self.field_value(f, "key", true, cx);
                let expect = self.field_value(f, "expect", false, cx);
                Some(CheckKind::Annotation { key: key?, expect })
            }
            "ready_pod" => {
                let label = self.field_value(f, "label", true, cx);
                Some(CheckKind::ReadyPod { label: label? })
            }
            "within" => {
                let value = self.field_value(f, "value", true, cx);
                let networks = self.field_value(f, "networks", true, cx);
                Some(CheckKind::Within {
                    value: value?,
                    networks: networks?,
                })
            }
            "datapath_entry" => {
                let file = self.field_value(f, "file", true, cx);
                let key = self.field_value(f, "key", false, cx);
                let field = self.field_value(f, "field", false, cx);
                let expect = self.field_value(f, "expect", false, cx);
                let contains = self.field_value(f, "contains", false, cx);
                Some(CheckKind::DatapathEntry {
                    file: file?,
                    key,
                    field,
                    expect,
                    contains,
                })
            }
            "masquerade" => {
                let from = self.field_value(f, "from", true, cx);
                let masqueraded = self.field_value(f, "masqueraded", false, cx);
                let kept = self.field_value(f, "kept", false, cx);
                Some(CheckKind::Masquerade {
                    from: from?,
                    masqueraded,
                    kept,
                })
            }
            _ => None,
        }
    }

    fn sysctl_check(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<CheckKind> {
        let key = self.field_value(f, "key", true, cx);
        let expect = self.field_value(f, "expect", true, cx);
        Some(CheckKind::Sysctl {
            key: key?,
            expect: expect?,
        })
    }

    fn device_check(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<CheckKind> {
        let name = self.field_value(f, "name", true, cx);
        let kind = self.field_value(f, "device_kind", false, cx);
        let mtu = self.field_value(f, "mtu", false, cx);
        let min_mtu = self.field_value(f, "min_mtu", false, cx);
        let master = self.field_value(f, "master", false, cx);
        let address = self.field_value(f, "address", false, cx);
        let mac = self.field_value(f, "mac", false, cx);
        let vni = self.field_value(f, "vni", false, cx);
        let port = self.field_value(f, "port", false, cx);
        let local = self.field_value(f, "local", false, cx);
        let hairpin = self.field_value(f, "hairpin", false, cx);
        let learning = self.field_value(f, "learning", false, cx);
        let isolated = self.field_value(f, "isolated", false, cx);
        let state = f.string("state", &mut self.issues).and_then(|s| {
            keyword(
                &s,
                &[("up", DeviceState::Up), ("down", DeviceState::Down)],
                "state",
                &mut self.issues,
            )
        });
        Some(CheckKind::Device(Box::new(DeviceCheck {
            name: name?,
            kind,
            mtu,
            min_mtu,
            state,
            master,
            address,
            mac,
            vni,
            port,
            local,
            hairpin,
            learning,
            isolated,
        })))
    }

    fn route_check(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<CheckKind> {
        let dst = self.field_value(f, "dst", true, cx);
        let via = self.field_value(f, "via", false, cx);
        let dev = self.field_value(f, "dev", false, cx);
        let table = self.field_value(f, "table", false, cx);
        let onlink = self.field_value(f, "onlink", false, cx);
        let protocol = self.field_value(f, "protocol", false, cx);
        let route_type = self.field_value(f, "route_type", false, cx);
        Some(CheckKind::Route {
            dst: dst?,
            via,
            dev,
            table,
            onlink,
            protocol,
            route_type,
        })
    }

    fn neighbour_check(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<CheckKind> {
        let dst = self.field_value(f, "dst", true, cx);
        let dev = self.field_value(f, "dev", false, cx);
        let lladdr = self.field_value(f, "lladdr", false, cx);
        Some(CheckKind::Neighbour {
            dst: dst?,
            dev,
            lladdr,
        })
    }

    fn fdb_check(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<CheckKind> {
        let dev = self.field_value(f, "dev", true, cx);
        let mac = self.field_value(f, "mac", false, cx);
        let dst = self.field_value(f, "dst", false, cx);
        Some(CheckKind::Fdb {
            dev: dev?,
            mac,
            dst,
        })
    }

    fn listener_check(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<CheckKind> {
        let port = self.field_value(f, "port", true, cx);
        let protocol = self.field_value(f, "protocol", false, cx);
        Some(CheckKind::Listener {
            port: port?,
            protocol,
        })
    }

    /// One jump (`family`, `table`, `chain`, `target`), or several (`jumps`).
    fn jump_check(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<CheckKind> {
        let jumps = self.one_or_list(f, ("jumps", "a jump"), cx, Self::jump);
        (!jumps.is_empty()).then_some(CheckKind::Jump { jumps })
    }

    /// What `read` reads from the check's own fields, or from each map of
    /// the list under `key` (each `what`) when there is one.
    fn one_or_list<T>(
        &mut self,
        f: &mut Fields<'_>,
        (key, what): (&str, &str),
        cx: &CheckContext<'_>,
        read: fn(&mut Self, &mut Fields<'_>, &CheckContext<'_>) -> Option<T>,
    ) -> Vec<T> {
        let Some(list) = f.take(key) else {
            return read(self, f, cx).into_iter().collect();
        };
        let mut items = Vec::new();
        for item in yaml::seq(list, key, &mut self.issues) {
            if let Some(mut fields) = Fields::of(item, what, &mut self.issues) {
                let read = read(self, &mut fields, cx);
                fields.finish(&mut self.issues);
                items.extend(read);
            }
        }
        items
    }

    /// One rule, or several (`rules`).
    fn rule_check(
        &mut self,
        f: &mut Fields<'_>,
        cx: &CheckContext<'_>,
        family: Option<Family>,
    ) -> Option<CheckKind> {
        let rules = self.one_or_list(f, ("rules", "a rule"), cx, Self::rule);
        (!rules.is_empty()).then(|| {
            CheckKind::Rule(Box::new(RuleCheck {
                rules,
                family: family.unwrap_or(Family::Ipv4),
            }))
        })
    }

    /// The `table`, `chain`, `target`, `holding`, `destination` and
    /// `position` of a rule.
    fn rule(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<Rule> {
        let table = self.field_value(f, "table", true, cx);
        let chain = self.field_value(f, "chain", true, cx);
        let target = self.field_value(f, "target", true, cx);
        let holding = self.field_value(f, "holding", false, cx);
        let destination = self.field_value(f, "destination", false, cx);
        let position = self.field_value(f, "position", false, cx);
        Some(Rule {
            table: table?,
            chain: chain?,
            target: target?,
            holding,
            destination,
            position,
        })
    }

    fn condition_check(
        &mut self,
        f: &mut Fields<'_>,
        kind_at: Option<&At<String>>,
        scope: Option<CheckScope>,
    ) -> Option<CheckKind> {
        let condition = f.required_string("condition", &mut self.issues);
        let expect = f.bool("expect", &mut self.issues).unwrap_or(true);
        if scope != Some(CheckScope::Object)
            && let Some(at) = kind_at
        {
            self.issues
                .push(at.pos.issue("a condition check needs `scope: object`"));
        }
        Some(CheckKind::Condition {
            condition: condition?.value,
            expect,
        })
    }

    /// The `family` (optional), `table`, `chain` and `target` of a jump.
    fn jump(&mut self, f: &mut Fields<'_>, cx: &CheckContext<'_>) -> Option<Jump> {
        let family = self.field_value(f, "family", false, cx);
        let table = self.field_value(f, "table", true, cx);
        let chain = self.field_value(f, "chain", true, cx);
        let target = self.field_value(f, "target", true, cx);
        Some(Jump {
            family,
            table: table?,
            chain: chain?,
            target: target?,
        })
    }

    /// A check's field `key` compiled as a value; a required one that is
    /// absent is an issue.
    fn field_value(
        &mut self,
        f: &mut Fields<'_>,
        key: &str,
        required: bool,
        cx: &CheckContext<'_>,
    ) -> Option<Value> {
        let node = if required {
            f.require(key, &mut self.issues)
        } else {
            f.take(key)
        };
        node.and_then(|n| self.value(n, key, cx.engine, cx.compiler))
    }
}
