//! Reading libnftables' JSON into the model: objects one by one, each
//! positioned, then assembled into tables.

use std::collections::HashMap;

use serde_json::Value;
use serde_json::value::RawValue;

use super::{
    BaseChain, BinOp, Chain, ChainHook, ChainType, Element, Expr, Family, Nat, NatKind, Op, Policy,
    Reject, Rule, Ruleset, Set, Statement, Table, Verdict,
};
use crate::snapshot::problem::{LineCursor, ParseIssue, Parsed};

/// Most levels of nested expressions read; deeper is refused (a guard
/// against a hostile dump exhausting the stack).
const MAX_DEPTH: usize = 32;

#[derive(serde::Deserialize)]
struct Document<'a> {
    #[serde(borrow)]
    nftables: Vec<&'a RawValue>,
}

/// Reads `nft -j list ruleset` output.
pub fn parse(text: &str) -> Parsed<Ruleset> {
    if text.trim().is_empty() {
        return (
            None,
            vec![ParseIssue::at_line(
                1,
                "empty file (an empty ruleset is {\"nftables\": [...]} with its metainfo)",
            )],
        );
    }
    let document: Document = match serde_json::from_str(text) {
        Ok(document) => document,
        Err(error) => {
            let (line, column) = (error.line().max(1), error.column().max(1));
            return (
                None,
                vec![ParseIssue::at(
                    line,
                    column,
                    format!(
                        "not `nft -j list ruleset` output (an object with an array \"nftables\"): {error}"
                    ),
                )],
            );
        }
    };
    let mut reader = Reader {
        text,
        cursor: LineCursor::default(),
        issues: Vec::new(),
        tables: Vec::new(),
        chains: HashMap::new(),
        rules: Vec::new(),
    };
    for object in document.nftables {
        reader.object(object);
    }
    let ruleset = reader.assemble();
    (Some(ruleset), reader.issues)
}

/// Objects read so far, before chains and rules are put in their tables.
struct Reader<'t> {
    text: &'t str,
    cursor: LineCursor,
    issues: Vec<ParseIssue>,
    tables: Vec<Table>,
    /// (family, table, chain) -> (table index, chain index).
    chains: HashMap<(Family, String, String), (usize, usize)>,
    /// Rules with their (family, table, chain), in dump order.
    rules: Vec<(Family, String, String, Rule)>,
}

/// Why one object could not be read.
type Failure = String;

impl Reader<'_> {
    fn position(&mut self, raw: &RawValue) -> (usize, usize) {
        let offset = (raw.get().as_ptr() as usize)
            .checked_sub(self.text.as_ptr() as usize)
            .filter(|offset| *offset <= self.text.len())
            .unwrap_or(0);
        self.cursor.advance(self.text, offset)
    }

    fn object(&mut self, raw: &RawValue) {
        let position = self.position(raw);
        let value: Value = match serde_json::from_str(raw.get()) {
            Ok(value) => value,
            Err(error) => {
                self.issue(position, format!("not JSON: {error}"));
                return;
            }
        };
        let Some((kind, body)) = single(&value) else {
            self.issue(
                position,
                "an object with one key (table, chain, rule, set, ...) expected".to_string(),
            );
            return;
        };
        let result = match kind {
            "table" => self.table(body),
            "chain" => self.chain(body, position),
            "rule" => self.rule(body, position),
            "set" | "map" => self.set(body, kind == "map", position),
            // Stateful objects, flowtables and the dump's metadata do not
            // decide a packet's way through the rules by themselves.
            _ => Ok(()),
        };
        if let Err(why) = result {
            self.issue(position, format!("{kind}: {why}"));
        }
    }

    fn issue(&mut self, (line, column): (usize, usize), message: String) {
        self.issues.push(ParseIssue::at(line, column, message));
    }

    fn table(&mut self, body: &Value) -> Result<(), Failure> {
        let family = family(body)?;
        let name = string(body, "name")?;
        if self.table_index(family, &name).is_some() {
            return Err(format!("table {family} {name} is listed twice"));
        }
        self.tables.push(Table {
            family,
            name,
            handle: body.get("handle").and_then(Value::as_u64),
            chains: Vec::new(),
            sets: Vec::new(),
        });
        Ok(())
    }

    fn table_index(&self, family: Family, name: &str) -> Option<usize> {
        self.tables
            .iter()
            .position(|t| t.family == family && t.name == name)
    }

    /// The table an object belongs to, which must have been listed before it.
    fn owner(&self, body: &Value) -> Result<(Family, String, usize), Failure> {
        let family = family(body)?;
        let table = string(body, "table")?;
        let index = self
            .table_index(family, &table)
            .ok_or_else(|| format!("table {family} {table} is not listed before it"))?;
        Ok((family, table, index))
    }

    fn chain(&mut self, body: &Value, position: (usize, usize)) -> Result<(), Failure> {
        let (family, table, index) = self.owner(body)?;
        let name = string(body, "name")?;
        let base = match body.get("hook") {
            None => None,
            Some(_) => Some(base_chain(body)?),
        };
        let key = (family, table, name.clone());
        if self.chains.contains_key(&key) {
            return Err(format!("chain {name} is listed twice"));
        }
        let chains = &mut self.tables[index].chains;
        self.chains.insert(key, (index, chains.len()));
        chains.push(Chain {
            name,
            handle: body.get("handle").and_then(Value::as_u64),
            base,
            rules: Vec::new(),
            position,
        });
        Ok(())
    }

    fn rule(&mut self, body: &Value, position: (usize, usize)) -> Result<(), Failure> {
        let family = family(body)?;
        let table = string(body, "table")?;
        let chain = string(body, "chain")?;
        let expressions = body
            .get("expr")
            .and_then(Value::as_array)
            .ok_or("no \"expr\" array")?;
        let statements = expressions
            .iter()
            .map(statement)
            .collect::<Result<Vec<_>, _>>()?;
        let rule = Rule {
            handle: body.get("handle").and_then(Value::as_u64),
            comment: body
                .get("comment")
                .and_then(Value::as_str)
                .map(str::to_string),
            statements,
            packets: expressions
                .iter()
                .find_map(|e| e.get("counter")?.get("packets")?.as_u64()),
            position,
        };
        self.rules.push((family, table, chain, rule));
        Ok(())
    }

    fn set(&mut self, body: &Value, is_map: bool, position: (usize, usize)) -> Result<(), Failure> {
        let (_, _, index) = self.owner(body)?;
        let name = string(body, "name")?;
        let key_type = match body.get("type") {
            Some(Value::String(one)) => vec![one.clone()],
            Some(Value::Array(parts)) => parts
                .iter()
                .map(|p| {
                    p.as_str()
                        .map(str::to_string)
                        .ok_or("a key type is not a string")
                })
                .collect::<Result<_, _>>()?,
            // `typeof` sets: the type is an expression.
            Some(other) => vec![other.to_string()],
            None => return Err("no \"type\"".to_string()),
        };
        let map = if is_map {
            Some(match body.get("map") {
                Some(Value::String(data)) => data.clone(),
                Some(other) => other.to_string(),
                None => return Err("a map without its value type \"map\"".to_string()),
            })
        } else {
            None
        };
        let flags = words(body.get("flags"));
        let elements = match body.get("elem") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| element(item, 0))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("\"elem\" is not an array".to_string()),
        };
        let sets = &mut self.tables[index].sets;
        if sets.iter().any(|s| s.name == name) {
            return Err(format!("set {name} is listed twice"));
        }
        sets.push(Set {
            name,
            handle: body.get("handle").and_then(Value::as_u64),
            key_type,
            map,
            flags,
            elements,
            position,
        });
        Ok(())
    }

    /// Puts every rule into its chain.
    fn assemble(&mut self) -> Ruleset {
        for (family, table, chain, rule) in std::mem::take(&mut self.rules) {
            let key = (family, table, chain);
            match self.chains.get(&key) {
                Some(&(t, c)) => self.tables[t].chains[c].rules.push(rule),
                None => {
                    let (family, table, chain) = key;
                    self.issue(
                        rule.position,
                        format!("rule: chain {chain} of table {family} {table} is not listed"),
                    );
                }
            }
        }
        Ruleset {
            tables: std::mem::take(&mut self.tables),
        }
    }
}

/// The one key of an object such as `{"rule": {...}}`, and its value.
fn single(value: &Value) -> Option<(&str, &Value)> {
    let object = value.as_object()?;
    if object.len() != 1 {
        return None;
    }
    object.iter().next().map(|(k, v)| (k.as_str(), v))
}

/// A list of words, which nft writes as an array, or as a string when it
/// has one (`"flags": "interval"`).
fn words(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(words)) => words
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(Value::String(word)) => vec![word.clone()],
        _ => Vec::new(),
    }
}

fn string(body: &Value, key: &str) -> Result<String, Failure> {
    body.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("no string \"{key}\""))
}

fn family(body: &Value) -> Result<Family, Failure> {
    let name = string(body, "family")?;
    Family::from_name(&name).ok_or_else(|| format!("unknown family {name:?}"))
}

fn base_chain(body: &Value) -> Result<BaseChain, Failure> {
    let kind = match string(body, "type")?.as_str() {
        "filter" => ChainType::Filter,
        "nat" => ChainType::Nat,
        "route" => ChainType::Route,
        other => ChainType::Other(other.to_string()),
    };
    let hook = match string(body, "hook")?.as_str() {
        "prerouting" => ChainHook::Prerouting,
        "input" => ChainHook::Input,
        "forward" => ChainHook::Forward,
        "output" => ChainHook::Output,
        "postrouting" => ChainHook::Postrouting,
        "ingress" => ChainHook::Ingress,
        "egress" => ChainHook::Egress,
        other => return Err(format!("unknown hook {other:?}")),
    };
    let priority = match body.get("prio") {
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("priority {n} is out of range"))?,
        Some(Value::String(name)) => {
            named_priority(name).ok_or_else(|| format!("unknown priority {name:?}"))?
        }
        _ => return Err("a base chain without \"prio\"".to_string()),
    };
    let policy = match body.get("policy").and_then(Value::as_str) {
        None | Some("accept") => Policy::Accept,
        Some("drop") => Policy::Drop,
        Some(other) => return Err(format!("unknown policy {other:?}")),
    };
    Ok(BaseChain {
        kind,
        hook,
        priority,
        policy,
        device: body.get("dev").and_then(Value::as_str).map(str::to_string),
    })
}

/// `raw`, `mangle`, `dstnat`, `filter`, `security`, `srcnat`, optionally
/// `+ N` or `- N`: the priorities of the ip/ip6/inet families.
pub(super) fn named_priority(text: &str) -> Option<i32> {
    let mut words = text.split_whitespace();
    let base = match words.next()? {
        "raw" => -300,
        "mangle" => -150,
        "dstnat" => -100,
        "filter" => 0,
        "security" => 50,
        "srcnat" => 100,
        number => number.parse().ok()?,
    };
    match (words.next(), words.next(), words.next()) {
        (None, _, _) => Some(base),
        (Some("+"), Some(n), None) => base.checked_add(n.parse().ok()?),
        (Some("-"), Some(n), None) => base.checked_sub(n.parse().ok()?),
        _ => None,
    }
}

fn statement(value: &Value) -> Result<Statement, Failure> {
    let (name, body) = single(value).ok_or("a statement is not an object with one key")?;
    if let Some(verdict) = verdict(name, body)? {
        return Ok(Statement::Verdict(verdict));
    }
    Ok(match name {
        "match" => Statement::Match {
            op: op(body.get("op").and_then(Value::as_str).unwrap_or("=="))?,
            left: expr(body.get("left").ok_or("a match without \"left\"")?, 0)?,
            right: expr(body.get("right").ok_or("a match without \"right\"")?, 0)?,
        },
        "vmap" => Statement::Vmap {
            key: expr(body.get("key").ok_or("a vmap without \"key\"")?, 0)?,
            data: expr(body.get("data").ok_or("a vmap without \"data\"")?, 0)?,
        },
        "dnat" | "snat" | "masquerade" | "redirect" => Statement::Nat(nat(name, body)?),
        "mangle" => Statement::Mangle {
            key: expr(body.get("key").ok_or("a mangle without \"key\"")?, 0)?,
            value: expr(body.get("value").ok_or("a mangle without \"value\"")?, 0)?,
        },
        "reject" => Statement::Reject(Reject {
            kind: body.get("type").and_then(Value::as_str).map(str::to_string),
            code: body.get("expr").and_then(Value::as_str).map(str::to_string),
        }),
        "notrack" => Statement::Notrack,
        "counter" => Statement::Passive("counter".to_string()),
        "log" => Statement::Passive(match body.get("prefix").and_then(Value::as_str) {
            Some(prefix) => format!("log prefix {prefix:?}"),
            None => "log".to_string(),
        }),
        "limit" => Statement::Limit(limit(body)),
        // A dynamic set's update (session affinity) changes later packets'
        // lookups, not this packet's way.
        "set"
            if matches!(
                body.get("op").and_then(Value::as_str),
                Some("add" | "update")
            ) =>
        {
            Statement::Passive(format!(
                "{} {}",
                body.get("op").and_then(Value::as_str).unwrap_or("update"),
                body.get("set").and_then(Value::as_str).unwrap_or("a set")
            ))
        }
        // iptables-nft's `-m comment`, as nft shows an xtables match it
        // cannot translate: a comment matches every packet.
        "xt" if body.get("name").and_then(Value::as_str) == Some("comment") => {
            Statement::Passive("xt match comment".to_string())
        }
        _ => Statement::Unknown {
            name: name.to_string(),
            json: value.to_string(),
        },
    })
}

fn limit(body: &Value) -> String {
    let rate = body.get("rate").map_or_else(String::new, Value::to_string);
    let per = body.get("per").and_then(Value::as_str).unwrap_or("second");
    format!("limit rate {rate}/{per}")
}

fn op(text: &str) -> Result<Op, Failure> {
    Ok(match text {
        "==" | "eq" => Op::Eq,
        "!=" | "ne" => Op::Ne,
        "<" | "lt" => Op::Lt,
        ">" | "gt" => Op::Gt,
        "<=" | "le" => Op::Le,
        ">=" | "ge" => Op::Ge,
        "in" => Op::In,
        other => return Err(format!("unknown operator {other:?}")),
    })
}

/// A verdict statement or value, if `name` is one.
fn verdict(name: &str, body: &Value) -> Result<Option<Verdict>, Failure> {
    let target = || {
        body.get("target")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("{name} without \"target\""))
    };
    Ok(Some(match name {
        "accept" => Verdict::Accept,
        "drop" => Verdict::Drop,
        "continue" => Verdict::Continue,
        "return" => Verdict::Return,
        "queue" => Verdict::Queue,
        "jump" => Verdict::Jump(target()?),
        "goto" => Verdict::Goto(target()?),
        _ => return Ok(None),
    }))
}

fn nat(name: &str, body: &Value) -> Result<Nat, Failure> {
    let kind = match name {
        "dnat" => NatKind::Dnat,
        "snat" => NatKind::Snat,
        "masquerade" => NatKind::Masquerade,
        _ => NatKind::Redirect,
    };
    let family = match body.get("family").and_then(Value::as_str) {
        Some(name) => {
            Some(Family::from_name(name).ok_or_else(|| format!("unknown family {name:?}"))?)
        }
        None => None,
    };
    let part = |key: &str| body.get(key).map(|v| expr(v, 0)).transpose();
    let flags = words(body.get("flags"));
    Ok(Nat {
        kind,
        family,
        addr: part("addr")?,
        port: part("port")?,
        flags,
    })
}

fn element(value: &Value, depth: usize) -> Result<Element, Failure> {
    // A map's element is [key, value]; a key with a comment or a timeout is
    // wrapped as {"elem": {"val": key, "comment": ...}}.
    let (key, data) = match value {
        Value::Array(pair) if pair.len() == 2 => (&pair[0], Some(&pair[1])),
        _ => (value, None),
    };
    let comment = key
        .get("elem")
        .and_then(|elem| elem.get("comment"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Element {
        key: expr(key, depth + 1)?,
        value: data.map(|d| expr(d, depth + 1)).transpose()?,
        comment,
    })
}

fn expr(value: &Value, depth: usize) -> Result<Expr, Failure> {
    if depth > MAX_DEPTH {
        return Err(format!("expressions nested more than {MAX_DEPTH} deep"));
    }
    let next = depth + 1;
    let unknown = || Expr::Unknown(value.to_string());
    Ok(match value {
        Value::Number(n) => n.as_u64().map_or_else(unknown, Expr::Number),
        Value::String(text) => literal(text),
        Value::Bool(b) => Expr::Symbol(b.to_string()),
        Value::Array(items) => Expr::List(
            items
                .iter()
                .map(|item| expr(item, next))
                .collect::<Result<_, _>>()?,
        ),
        Value::Null => unknown(),
        Value::Object(_) => {
            let Some((name, body)) = single(value) else {
                return Ok(unknown());
            };
            if let Some(verdict) = verdict(name, body)? {
                return Ok(Expr::Verdict(verdict));
            }
            let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_string);
            let pair = || -> Result<(Box<Expr>, Box<Expr>), Failure> {
                match body.as_array().map(Vec::as_slice) {
                    Some([a, b]) => Ok((Box::new(expr(a, next)?), Box::new(expr(b, next)?))),
                    _ => Err(format!("{name} does not have two operands")),
                }
            };
            match name {
                "payload" => match (text("protocol"), text("field")) {
                    (Some(protocol), Some(field)) => Expr::Payload { protocol, field },
                    _ => unknown(),
                },
                "meta" => text("key").map_or_else(unknown, Expr::Meta),
                "ct" => match text("key") {
                    Some(key) => Expr::Ct {
                        key,
                        dir: text("dir"),
                    },
                    None => unknown(),
                },
                "fib" => Expr::Fib {
                    result: text("result").ok_or("fib without \"result\"")?,
                    flags: words(body.get("flags")),
                },
                "numgen" => Expr::Numgen {
                    mode: text("mode").unwrap_or_else(|| "inc".to_string()),
                    modulus: body
                        .get("mod")
                        .and_then(Value::as_u64)
                        .and_then(|m| u32::try_from(m).ok())
                        .filter(|m| *m > 0)
                        .ok_or("numgen without a positive \"mod\"")?,
                    offset: body
                        .get("offset")
                        .and_then(Value::as_u64)
                        .and_then(|o| u32::try_from(o).ok())
                        .unwrap_or(0),
                },
                "prefix" => {
                    let addr = body
                        .get("addr")
                        .and_then(Value::as_str)
                        .and_then(|a| a.parse().ok())
                        .ok_or("prefix without an address \"addr\"")?;
                    let len = body
                        .get("len")
                        .and_then(Value::as_u64)
                        .and_then(|l| u8::try_from(l).ok())
                        .ok_or("prefix without a length \"len\"")?;
                    let max = if matches!(addr, std::net::IpAddr::V4(_)) {
                        32
                    } else {
                        128
                    };
                    if len > max {
                        return Err(format!("prefix length {len} is longer than {max}"));
                    }
                    Expr::Prefix { addr, len }
                }
                "range" => {
                    let (low, high) = pair()?;
                    Expr::Range(low, high)
                }
                "set" => match body {
                    Value::Array(items) => Expr::Set(
                        items
                            .iter()
                            .map(|item| element(item, next))
                            .collect::<Result<_, _>>()?,
                    ),
                    single_item => Expr::Set(vec![element(single_item, next)?]),
                },
                "elem" => expr(body.get("val").ok_or("elem without \"val\"")?, next)?,
                "concat" => Expr::Concat(
                    body.as_array()
                        .ok_or("concat is not an array")?
                        .iter()
                        .map(|item| expr(item, next))
                        .collect::<Result<_, _>>()?,
                ),
                "map" => Expr::Map {
                    key: Box::new(expr(body.get("key").ok_or("map without \"key\"")?, next)?),
                    data: Box::new(expr(body.get("data").ok_or("map without \"data\"")?, next)?),
                },
                "&" | "|" | "^" | "<<" | ">>" => {
                    let op = match name {
                        "&" => BinOp::And,
                        "|" => BinOp::Or,
                        "^" => BinOp::Xor,
                        "<<" => BinOp::Shl,
                        _ => BinOp::Shr,
                    };
                    let (left, right) = pair()?;
                    Expr::Binary { op, left, right }
                }
                _ => unknown(),
            }
        }
    })
}

/// A string literal: `@set`, an address, or a symbol.
fn literal(text: &str) -> Expr {
    if let Some(name) = text.strip_prefix('@') {
        return Expr::SetRef(name.to_string());
    }
    match text.parse() {
        Ok(address) => Expr::Address(address),
        Err(_) => Expr::Symbol(text.to_string()),
    }
}
