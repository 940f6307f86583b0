//! A rule as `nft list ruleset` prints it, for traces and findings.

use std::fmt::Write;

use super::{Element, Expr, Nat, NatKind, Op, Rule, Statement, Verdict};

pub(super) fn rule(rule: &Rule) -> String {
    let mut out = String::new();
    for statement in &rule.statements {
        if !out.is_empty() {
            out.push(' ');
        }
        write_statement(&mut out, statement);
    }
    if let Some(comment) = &rule.comment {
        let _ = write!(out, " comment {comment:?}");
    }
    out
}

pub(super) fn expr(expr: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, expr, false);
    out
}

fn write_statement(out: &mut String, statement: &Statement) {
    match statement {
        Statement::Match { op, left, right } => {
            let hex = is_mark(left);
            write_expr(out, left, hex);
            match op {
                Op::Eq | Op::In => {}
                other => {
                    out.push(' ');
                    out.push_str(other.as_str());
                }
            }
            out.push(' ');
            let quoted = matches!(left, Expr::Meta(key) if key.ends_with("ifname"));
            match right {
                Expr::Symbol(name) if quoted => {
                    let _ = write!(out, "{name:?}");
                }
                Expr::List(items) => write_joined(out, items, ",", hex),
                right => write_expr(out, right, hex),
            }
        }
        Statement::Verdict(verdict) => write_verdict(out, verdict),
        Statement::Vmap { key, data } => {
            write_expr(out, key, false);
            out.push_str(" vmap ");
            write_expr(out, data, false);
        }
        Statement::Nat(nat) => write_nat(out, nat),
        Statement::Mangle { key, value } => {
            write_expr(out, key, false);
            out.push_str(" set ");
            write_expr(out, value, is_mark(key));
        }
        Statement::Reject(reject) => {
            out.push_str("reject");
            match (&reject.kind, &reject.code) {
                (Some(kind), Some(code)) => {
                    let _ = write!(out, " with {kind} {code}");
                }
                (Some(kind), None) => {
                    let _ = write!(out, " with {kind}");
                }
                _ => {}
            }
        }
        Statement::Notrack => out.push_str("notrack"),
        Statement::Passive(text) | Statement::Limit(text) => out.push_str(text),
        Statement::Unknown { name, json } => {
            let _ = write!(out, "{name} {json}");
        }
    }
}

fn write_nat(out: &mut String, nat: &Nat) {
    out.push_str(nat.kind.as_str());
    if nat.addr.is_none() && nat.port.is_none() {
        return;
    }
    if let (Some(family), NatKind::Dnat | NatKind::Snat) = (nat.family, nat.kind) {
        let _ = write!(out, " {family}");
    }
    out.push_str(" to ");
    if let Some(addr) = &nat.addr {
        write_expr(out, addr, false);
    }
    if let Some(port) = &nat.port {
        out.push(':');
        write_expr(out, port, false);
    }
}

fn write_verdict(out: &mut String, verdict: &Verdict) {
    match verdict {
        Verdict::Accept => out.push_str("accept"),
        Verdict::Drop => out.push_str("drop"),
        Verdict::Continue => out.push_str("continue"),
        Verdict::Return => out.push_str("return"),
        Verdict::Queue => out.push_str("queue"),
        Verdict::Jump(chain) => {
            let _ = write!(out, "jump {chain}");
        }
        Verdict::Goto(chain) => {
            let _ = write!(out, "goto {chain}");
        }
    }
}

/// Whether numbers beside this expression are marks, which nft prints in hex.
fn is_mark(expr: &Expr) -> bool {
    match expr {
        Expr::Meta(key) | Expr::Ct { key, .. } => key == "mark",
        Expr::Binary { left, .. } => is_mark(left),
        _ => false,
    }
}

/// Meta keys nft prints without `meta`.
const BARE_META: &[&str] = &[
    "iif",
    "oif",
    "iifname",
    "oifname",
    "iiftype",
    "oiftype",
    "skuid",
    "skgid",
    "nftrace",
    "rtclassid",
    "ibriport",
    "obriport",
    "pkttype",
    "cpu",
    "iifgroup",
    "oifgroup",
    "cgroup",
    "mark",
];

fn write_expr(out: &mut String, expr: &Expr, hex: bool) {
    match expr {
        Expr::Number(n) if hex => {
            let _ = write!(out, "{n:#010x}");
        }
        Expr::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Expr::Address(addr) => {
            let _ = write!(out, "{addr}");
        }
        Expr::Symbol(name) => out.push_str(name),
        Expr::List(items) => write_joined(out, items, ",", hex),
        Expr::Payload { protocol, field } => {
            let _ = write!(out, "{protocol} {field}");
        }
        Expr::Meta(key) if key == "mark" => out.push_str("meta mark"),
        Expr::Meta(key) if BARE_META.contains(&key.as_str()) => out.push_str(key),
        Expr::Meta(key) => {
            let _ = write!(out, "meta {key}");
        }
        Expr::Ct {
            key,
            dir: Some(dir),
        } => {
            let _ = write!(out, "ct {dir} {key}");
        }
        Expr::Ct { key, dir: None } => {
            let _ = write!(out, "ct {key}");
        }
        Expr::Fib { result, flags } => {
            let _ = write!(out, "fib {} {result}", flags.join(" . "));
        }
        Expr::Numgen {
            mode,
            modulus,
            offset,
        } => {
            let _ = write!(out, "numgen {mode} mod {modulus}");
            if *offset != 0 {
                let _ = write!(out, " offset {offset}");
            }
        }
        Expr::Prefix { addr, len } => {
            let _ = write!(out, "{addr}/{len}");
        }
        Expr::Range(low, high) => {
            write_expr(out, low, hex);
            out.push('-');
            write_expr(out, high, hex);
        }
        Expr::Set(elements) => {
            out.push_str("{ ");
            for (i, element) in elements.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_element(out, element, hex);
            }
            out.push_str(" }");
        }
        Expr::SetRef(name) => {
            let _ = write!(out, "@{name}");
        }
        Expr::Concat(parts) => write_joined(out, parts, " . ", hex),
        Expr::Map { key, data } => {
            write_expr(out, key, hex);
            out.push_str(" map ");
            write_expr(out, data, hex);
        }
        Expr::Binary { op, left, right } => {
            write_expr(out, left, hex);
            let _ = write!(out, " {} ", op.as_str());
            write_expr(out, right, hex);
        }
        Expr::Verdict(verdict) => write_verdict(out, verdict),
        Expr::Unknown(json) => out.push_str(json),
    }
}

fn write_element(out: &mut String, element: &Element, hex: bool) {
    write_expr(out, &element.key, hex);
    if let Some(value) = &element.value {
        out.push_str(" : ");
        write_expr(out, value, hex);
    }
}

fn write_joined(out: &mut String, items: &[Expr], separator: &str, hex: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(separator);
        }
        write_expr(out, item, hex);
    }
}
