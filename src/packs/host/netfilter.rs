//! A namespace's netfilter rules as scripts see them: its iptables chains,
//! its ipsets, its nftables chains, sets and maps, and whether nat
//! POSTROUTING masquerades a connection.

use std::net::IpAddr;

use rhai::{Array, Dynamic, Engine};

use super::namespace::{dump_part, namespace_fib};
use super::{Fallible, Insufficient, as_ip, int, map, opt, text};
use crate::net::Family;
use crate::netstack::namespace::Modelled;
use crate::netstack::netfilter;
use crate::netstack::routing::{FlowKey, LookupOutcome};
use crate::packs::scope::NetnsRef;
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::iptables::{Protocol, Target};

/// The netfilter queries of `Netns`.
pub(super) fn register(engine: &mut Engine) {
    engine
        .register_fn("iptables_chain", iptables_chain)
        .register_fn("iptables_rules_with", iptables_rules_with)
        .register_fn("ip6tables_chain", ip6tables_chain)
        .register_fn("ip6tables_rules_with", ip6tables_rules_with)
        .register_fn("nft_chain", nft_chain)
        .register_fn("nft_map", nft_map)
        .register_fn("nft_map_element", nft_map_element)
        .register_fn("masquerades", masquerades)
        .register_fn("masquerades_each", masquerades_each)
        .register_fn("ipset", ipset)
        .register_fn("ipset_holds", ipset_holds);
}

/// The namespace's netfilter rules (its iptables-save, and its nftables
/// ruleset where collected), as the snapshot models them, or why there
/// are none.
fn namespace_netfilter(n: &NetnsRef) -> Fallible<&netfilter::Netfilter<'_>> {
    dump_part(n, DumpFile::IptablesSave, |d| d.iptables.as_ref())?;
    match n.entry().and_then(|e| e.model().netfilter.as_ref()) {
        Some(netfilter) => Ok(netfilter),
        // iptables-save is there, so the nftables ruleset is unreadable.
        None => {
            dump_part(n, DumpFile::NftRuleset, |d| d.nftables.as_ref())?;
            Insufficient::raise(format!(
                "the netfilter rules of {} cannot be modelled",
                n.id
            ))
        }
    }
}

/// `netns.iptables_chain(table, chain)`: the chain's rules in order, each
/// `#{number, line, text, target}` (`target` is the `-j`/`-g` name, a chain's
/// or a built-in's, or `()`), or `()` when the table has no such chain.
pub(super) fn iptables_chain(n: &mut NetnsRef, table: &str, chain: &str) -> Fallible<Dynamic> {
    iptables_rules(n, Family::Ipv4, (table, chain), |_| true)
}

/// `netns.ip6tables_chain(table, chain)`: `iptables_chain` of the IPv6
/// rules (ip6tables-save.txt).
fn ip6tables_chain(n: &mut NetnsRef, table: &str, chain: &str) -> Fallible<Dynamic> {
    iptables_rules(n, Family::Ipv6, (table, chain), |_| true)
}

/// `netns.iptables_rules_with(table, chain, text)`: the rules of the chain
/// whose text holds `text` (a comment, an address), as `iptables_chain`
/// gives them; `()` when the table has no such chain. A service proxy's
/// dispatch chain holds a rule per service: a check asks for one.
fn iptables_rules_with(
    n: &mut NetnsRef,
    table: &str,
    chain: &str,
    needle: &str,
) -> Fallible<Dynamic> {
    iptables_rules(n, Family::Ipv4, (table, chain), |text| {
        text.contains(needle)
    })
}

/// `netns.ip6tables_rules_with(table, chain, text)`: `iptables_rules_with`
/// of the IPv6 rules (ip6tables-save.txt).
fn ip6tables_rules_with(
    n: &mut NetnsRef,
    table: &str,
    chain: &str,
    needle: &str,
) -> Fallible<Dynamic> {
    iptables_rules(n, Family::Ipv6, (table, chain), |text| {
        text.contains(needle)
    })
}

/// The rules of `family`'s iptables `(table, chain)` that `keep` keeps.
fn iptables_rules(
    n: &NetnsRef,
    family: Family,
    (table, chain): (&str, &str),
    keep: impl Fn(&str) -> bool,
) -> Fallible<Dynamic> {
    let (file, ruleset) = match family {
        Family::Ipv4 => (
            DumpFile::IptablesSave,
            dump_part(n, DumpFile::IptablesSave, |d| d.iptables.as_ref())?,
        ),
        Family::Ipv6 => (
            DumpFile::Ip6tablesSave,
            dump_part(n, DumpFile::Ip6tablesSave, |d| d.ip6tables.as_ref())?,
        ),
    };
    let Some(chain) = ruleset
        .tables
        .iter()
        .find(|t| t.name.as_str() == table)
        .and_then(|t| t.chain(chain))
    else {
        return Ok(Dynamic::UNIT);
    };
    let rules = match chain.rules() {
        Ok(rules) => rules,
        Err(unread) => {
            let path = n
                .entry()
                .map(|e| e.dir.join(file.name()))
                .unwrap_or_default();
            return Insufficient::raise_lacking(unread.of(&path), file);
        }
    };
    let rules: Array = rules
        .iter()
        .filter(|rule| keep(rule.text.as_str()))
        .map(|rule| {
            map([
                (
                    "number",
                    int(i64::try_from(rule.number).unwrap_or(i64::MAX)),
                ),
                ("line", int(i64::try_from(rule.line).unwrap_or(i64::MAX))),
                ("text", text(rule.text.as_str())),
                ("target", opt(rule.target.as_ref().map(Target::name))),
            ])
        })
        .collect();
    Ok(Dynamic::from_array(rules))
}

/// `netns.ipset(name)`: the set as `ipset save` wrote it, `#{name, type,
/// family, line, members}` (`family` `inet`, `inet6` or `()`), each member `#{member, line, nomatch, comment}`
/// (`member` as ipset writes it); `()` when there is no such set. A
/// NetworkPolicy's set holds a member per selected pod: a check about one
/// address asks `ipset_holds`.
fn ipset(n: &mut NetnsRef, name: &str) -> Fallible<Dynamic> {
    let sets = dump_part(n, DumpFile::IpsetSave, |d| d.ipsets.as_ref())?;
    let Some(set) = sets.set(name) else {
        return Ok(Dynamic::UNIT);
    };
    let members: Array = set
        .entries
        .iter()
        .map(|entry| {
            map([
                ("member", text(entry.member.to_string())),
                ("line", int(i64::try_from(entry.line).unwrap_or(i64::MAX))),
                ("nomatch", Dynamic::from_bool(entry.nomatch)),
                ("comment", opt(entry.comment.clone())),
            ])
        })
        .collect();
    Ok(map([
        ("name", text(set.name.as_str())),
        ("type", text(set.kind.name())),
        (
            "family",
            opt(set.family.map(|family| match family {
                Family::Ipv4 => "inet",
                Family::Ipv6 => "inet6",
            })),
        ),
        ("line", int(i64::try_from(set.line).unwrap_or(i64::MAX))),
        ("members", Dynamic::from_array(members)),
    ]))
}

/// `netns.ipset_holds(name, address)`: whether the address is a member of
/// the set (`hash:ip`, `hash:net` or a `list:set` of them), as the kernel's
/// `--match-set NAME dst` decides; `false` when there is no such set. A set
/// the model cannot read raises insufficient information.
fn ipset_holds(n: &mut NetnsRef, name: &str, address: Dynamic) -> Fallible<bool> {
    let address = as_ip(&address)?;
    let sets = dump_part(n, DumpFile::IpsetSave, |d| d.ipsets.as_ref())?;
    if sets.set(name).is_none() {
        return Ok(false);
    }
    netfilter::sets::holds(sets, name, address).or_else(Insufficient::raise)
}

/// The nftables table `family name` of a namespace's ruleset, if any.
fn nft_table<'a>(
    n: &'a NetnsRef,
    family: &str,
    table: &str,
) -> Fallible<Option<&'a crate::snapshot::netns::nft::Table>> {
    let ruleset = dump_part(n, DumpFile::NftRuleset, |d| d.nftables.as_ref())?;
    Ok(ruleset
        .tables
        .iter()
        .find(|t| t.family.as_str() == family && t.name == table))
}

/// `netns.nft_chain(family, table, chain)`: the chain's rules in order, each
/// `#{handle, line, column, text, comment, targets, dnat}` (`targets`: the
/// chains it jumps or goes to; `dnat`: the `address:port`s it can translate
/// to); `()` when the table or chain does not exist.
fn nft_chain(n: &mut NetnsRef, family: &str, table: &str, chain: &str) -> Fallible<Dynamic> {
    let Some(chain) = nft_table(n, family, table)?.and_then(|t| t.chain(chain)) else {
        return Ok(Dynamic::UNIT);
    };
    let count = |value: usize| int(i64::try_from(value).unwrap_or(i64::MAX));
    let rules: Array = chain
        .rules
        .iter()
        .map(|rule| {
            let targets: Array = rule.chain_targets().into_iter().map(text).collect();
            let dnat: Array = rule.dnat_targets().into_iter().map(text).collect();
            map([
                (
                    "handle",
                    opt(rule.handle.map(|h| i64::try_from(h).unwrap_or(i64::MAX))),
                ),
                ("line", count(rule.position.0)),
                ("column", count(rule.position.1)),
                ("text", text(rule.text())),
                ("comment", opt(rule.comment.clone())),
                ("targets", Dynamic::from_array(targets)),
                ("dnat", Dynamic::from_array(dnat)),
            ])
        })
        .collect();
    Ok(Dynamic::from_array(rules))
}

/// `netns.nft_map(family, table, name)`: the elements of a named set or map,
/// each `#{key, value, comment}` as nft prints them (`value` is `()` in a
/// set); `()` when there is no such set.
fn nft_map(n: &mut NetnsRef, family: &str, table: &str, name: &str) -> Fallible<Dynamic> {
    let Some(set) = nft_table(n, family, table)?.and_then(|t| t.set(name)) else {
        return Ok(Dynamic::UNIT);
    };
    Ok(Dynamic::from_array(
        set.elements.iter().map(nft_element_map).collect(),
    ))
}

/// `netns.nft_map_element(family, table, name, key)`: the element of a named
/// set or map whose key nft prints as `key` (`10.96.0.100 . tcp . 80`), as
/// `nft_map` gives it; `()` when there is no such set or element.
fn nft_map_element(
    n: &mut NetnsRef,
    family: &str,
    table: &str,
    name: &str,
    key: &str,
) -> Fallible<Dynamic> {
    let Some(set) = nft_table(n, family, table)?.and_then(|t| t.set(name)) else {
        return Ok(Dynamic::UNIT);
    };
    Ok(opt(set
        .elements
        .iter()
        .find(|element| element.key.to_string() == key)
        .map(nft_element_map)))
}

fn nft_element_map(element: &crate::snapshot::netns::nft::Element) -> Dynamic {
    map([
        ("key", text(element.key.to_string())),
        (
            "value",
            opt(element.value.as_ref().map(ToString::to_string)),
        ),
        ("comment", opt(element.comment.clone())),
    ])
}

/// `netns.masquerades(src, dst)`: whether nat POSTROUTING source-NATs (SNAT
/// or MASQUERADE) a new TCP connection from `src` to `dst` that this
/// namespace forwards, arriving and leaving by the interfaces its routes to
/// `src` and `dst` name. True when any way the rules can send it is
/// translated; a rule the model cannot evaluate makes the answer unknown.
pub(super) fn masquerades(n: &mut NetnsRef, src: Dynamic, dst: Dynamic) -> Fallible<bool> {
    Ok(masquerade_decisions(n, as_ip(&src)?, &[as_ip(&dst)?])?[0])
}

/// [`masquerades`] for each of `dsts`, the namespace's models built once.
fn masquerades_each(n: &mut NetnsRef, src: Dynamic, dsts: Array) -> Fallible<Array> {
    let dsts = dsts.iter().map(as_ip).collect::<Fallible<Vec<IpAddr>>>()?;
    Ok(masquerade_decisions(n, as_ip(&src)?, &dsts)?
        .into_iter()
        .map(Dynamic::from)
        .collect())
}

/// Whether nat POSTROUTING of `n` source-NATs a new TCP connection from
/// `src` to each of `dsts` that it forwards (the masquerade kind's, and
/// `masquerades` for scripts).
pub(in crate::packs) fn masquerade_decisions(
    n: &NetnsRef,
    src: IpAddr,
    dsts: &[IpAddr],
) -> Fallible<Vec<bool>> {
    let netfilter = namespace_netfilter(n)?;
    let fib = namespace_fib(n, Family::of(src))?;
    let addrs = dump_part(n, DumpFile::IpAddr, |d| d.addrs.as_ref())?;
    let device_to = |ip: IpAddr| match fib.lookup(&FlowKey::to(ip)).outcome {
        LookupOutcome::Routed { paths, .. } => paths.first().and_then(|p| p.dev.clone()),
        _ => None,
    };
    let context = netfilter::Context {
        fib: Some(fib),
        interfaces: addrs,
        local_addresses: &[],
        listeners: n.entry().and_then(|e| e.dump().sockets.as_deref()),
    };
    let in_iface = device_to(src);
    let mut decisions = Vec::with_capacity(dsts.len());
    for &dst in dsts {
        let mut packet = netfilter::Packet::new(src, dst, Protocol::Tcp);
        packet.in_iface = in_iface.clone();
        packet.out_iface = device_to(dst);
        let outcomes = netfilter.hook(netfilter::Hook::Postrouting, packet, &context);
        if let Some(reason) = outcomes.iter().find_map(|o| match &o.verdict {
            netfilter::Verdict::Unknown { reason } => Some(reason.clone()),
            _ => None,
        }) {
            return Insufficient::raise(format!("nat POSTROUTING of {}: {reason}", n.id));
        }
        decisions.push(outcomes.iter().any(netfilter::Outcome::masquerade));
    }
    Ok(decisions)
}
