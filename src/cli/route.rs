//! `skoop route lookup`: the kernel's route lookup on one namespace dump, as
//! `ip route get` would answer it on the live namespace.

use std::net::IpAddr;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;
use skoop::net::Family;
use skoop::netstack::Tri;
use skoop::netstack::routing::{
    Fib, FlowKey, LookupOutcome, RouteLookup, RouteStep, TableResult, describe_route,
    describe_rule, describe_unspecified, table_name,
};
use skoop::snapshot::netns::NetnsDump;

use super::args::parse_mark;
use super::namespace::{NamespaceArgs, lacking_files};
use super::{EXIT_USAGE, OutputFormat, print_json, report_problems};

#[derive(Debug, Subcommand)]
pub enum RouteCommand {
    /// Which route the kernel picks for a destination, and the policy rule that led there.
    ///
    /// Answers like `ip route get` (`ip -6 route get` for an IPv6 destination)
    /// on the live namespace: the rules are tried in priority order, each
    /// selected table is searched longest prefix first, throw routes and
    /// suppressed results go on to the next rule. A multipath route prints
    /// every nexthop with its share of flows. IPv4 reads ip-rule.json and
    /// ip-route.json, IPv6 ip-rule6.json and ip-route6.json; both ip-addr.json.
    ///
    /// Exit status: 0 routed, 1 unroutable (no route, unreachable, prohibit,
    /// blackhole) or unknown, 2 bad arguments or unreadable dump.
    ///
    /// Examples:
    ///   skoop route lookup --netns snap/nodes/node-1/host --dst 10.244.1.5
    ///   skoop route lookup --snapshot snap --node node-1 --dst 10.244.1.5
    ///   skoop route lookup --snapshot snap --pod default/web-0 --dst 10.96.0.100
    ///   skoop route lookup --netns snap/nodes/node-1/host --dst fd00:10:244:1::5
    #[command(verbatim_doc_comment)]
    Lookup(LookupArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("dump").required(true).args(["netns", "node", "pod"])))]
pub struct LookupArgs {
    /// The namespace dump (it needs ip-route.json, ip-rule.json, ip-addr.json).
    #[command(flatten)]
    namespace: NamespaceArgs,
    /// Destination address.
    #[arg(long)]
    dst: IpAddr,
    /// Source address (as `ip route get ... from`).
    #[arg(long)]
    src: Option<IpAddr>,
    /// Interface the packet arrived on; without it the packet is locally generated.
    #[arg(long, value_name = "IF")]
    iif: Option<String>,
    /// Interface the sender is bound to.
    #[arg(long, value_name = "IF")]
    oif: Option<String>,
    /// Packet mark (fwmark), decimal or 0x-hex.
    #[arg(long, value_parser = parse_mark, default_value = "0")]
    mark: u32,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
}

pub fn run(command: RouteCommand) -> ExitCode {
    match command {
        RouteCommand::Lookup(args) => lookup(args),
    }
}

/// One path in `ip -j route get` field names, plus how it was chosen.
#[derive(Debug, Serialize)]
struct RoutedJson {
    #[serde(rename = "type")]
    route_type: String,
    dst: IpAddr,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dev: Option<String>,
    /// The table that held the route; none for `0.0.0.0`, which the kernel
    /// answers without reading a rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prefsrc: Option<IpAddr>,
    flags: Vec<&'static str>,
    /// The share of flows that take this path (several for multipath).
    probability: f64,
    /// The policy rule whose table held the route, in `ip rule` syntax.
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
    /// The route, in `ip route` syntax, or what stands for it.
    route: String,
}

/// Why there is no route: the kernel's error kind, or `unknown`.
#[derive(Debug, Serialize)]
struct FailedJson {
    dst: IpAddr,
    error: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    route: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum LookupJson {
    Routed {
        routes: Vec<RoutedJson>,
        trace: Vec<String>,
    },
    Failed {
        #[serde(flatten)]
        failure: FailedJson,
        trace: Vec<String>,
    },
}

fn lookup(args: LookupArgs) -> ExitCode {
    if let Some(src) = args.src
        && src.is_ipv4() != args.dst.is_ipv4()
    {
        err!(
            "error: --src {src} and --dst {} must be of one address family",
            args.dst
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let dir = match args.namespace.dir() {
        Ok(dir) => dir,
        Err(e) => {
            err!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (dump, problems) = NetnsDump::load(&dir);
    report_problems(&problems);
    let family = Family::of(args.dst);
    let Some(fib) = Fib::from_dump(&dump, family) else {
        let files = Fib::files(family);
        let lacking = lacking_files(&dump, &files).unwrap_or_default();
        let [routes, rules, addrs] = files;
        err!(
            "error: {}: an {family} route lookup needs {routes}, {rules} and {addrs}: {lacking}",
            dir.display()
        );
        return ExitCode::from(EXIT_USAGE);
    };
    let flow = FlowKey {
        src: args.src,
        iif: args.iif.clone(),
        oif: args.oif.clone(),
        mark: args.mark,
        ..FlowKey::to(args.dst)
    };
    let result = fib.lookup(&flow);
    let trace = trace_lines(&fib, &result);
    let (json, routed) = match &result.outcome {
        LookupOutcome::Routed {
            rule,
            route,
            route_type,
            paths,
            dst,
        } => {
            let route_entry = route.and_then(|route| fib.routes.get(route));
            let routes = paths
                .iter()
                .map(|path| RoutedJson {
                    route_type: route_type.as_str().to_string(),
                    dst: args.dst,
                    gateway: path.gateway,
                    dev: path.dev.clone(),
                    table: route_entry.map(|route| table_name(&route.table)),
                    prefsrc: path.prefsrc,
                    flags: if path.onlink {
                        vec!["onlink"]
                    } else {
                        Vec::new()
                    },
                    probability: path.probability,
                    rule: fib.rule_text(*rule),
                    route: route_entry.map_or_else(|| describe_unspecified(*dst), describe_route),
                })
                .collect();
            (LookupJson::Routed { routes, trace }, true)
        }
        LookupOutcome::Failed { error, rule, route } => {
            let failure = FailedJson {
                dst: args.dst,
                error: error.as_str(),
                message: error.to_string(),
                rule: fib.rule_text(*rule),
                route: fib.route_text(*route),
            };
            (LookupJson::Failed { failure, trace }, false)
        }
        LookupOutcome::Unknown { reason } => {
            let failure = FailedJson {
                dst: args.dst,
                error: "unknown",
                message: format!("unknown: {reason}"),
                rule: None,
                route: None,
            };
            (LookupJson::Failed { failure, trace }, false)
        }
    };
    match args.output {
        OutputFormat::Json => {
            if let Err(code) = print_json(&json) {
                return code;
            }
        }
        OutputFormat::Text => print_text(&json),
    }
    if routed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn print_text(json: &LookupJson) {
    match json {
        LookupJson::Routed { routes, trace } => {
            for path in routes {
                let mut line = format!("{}", path.dst);
                if path.route_type != "unicast" {
                    line = format!("{} {line}", path.route_type);
                }
                if let Some(gateway) = path.gateway {
                    line.push_str(&format!(" via {gateway}"));
                }
                if let Some(dev) = &path.dev {
                    line.push_str(&format!(" dev {dev}"));
                }
                if let Some(table) = &path.table {
                    line.push_str(&format!(" table {table}"));
                }
                if let Some(src) = path.prefsrc {
                    line.push_str(&format!(" src {src}"));
                }
                if routes.len() > 1 {
                    line.push_str(&format!(
                        " (multipath, {:.0}% of flows)",
                        path.probability * 100.0
                    ));
                }
                out!("{line}");
            }
            if let Some(first) = routes.first() {
                out!("  route: {}", first.route);
                if let Some(rule) = &first.rule {
                    out!("  rule:  {rule}");
                }
            }
            print_trace(trace);
        }
        LookupJson::Failed { failure, trace } => {
            out!("{}: {}", failure.dst, failure.message);
            if let Some(route) = &failure.route {
                out!("  route: {route}");
            }
            if let Some(rule) = &failure.rule {
                out!("  rule:  {rule}");
            }
            print_trace(trace);
        }
    }
}

fn print_trace(trace: &[String]) {
    if trace.is_empty() {
        return;
    }
    out!("  trace:");
    for line in trace {
        out!("    {line}");
    }
}

/// The lookup's steps as readable lines.
fn trace_lines(fib: &Fib, lookup: &RouteLookup) -> Vec<String> {
    lookup
        .steps
        .iter()
        .map(|step| match step {
            RouteStep::Rule { rule, matched } => {
                let verdict = match matched {
                    Tri::True => "matches",
                    Tri::False => "does not match",
                    Tri::Unknown => "unknown",
                };
                format!("rule {}: {verdict}", describe_rule(fib.rules[*rule]))
            }
            RouteStep::Table { table, result, .. } => {
                let table = table_name(table);
                match result {
                    TableResult::NoMatch => format!("table {table}: no route matches"),
                    TableResult::Found(r) => {
                        format!("table {table}: {}", describe_route(&fib.routes[*r]))
                    }
                    TableResult::Throw(r) => {
                        format!(
                            "table {table}: {} -> next rule",
                            describe_route(&fib.routes[*r])
                        )
                    }
                    TableResult::Suppressed(r) => format!(
                        "table {table}: {} suppressed by suppress_prefixlength -> next rule",
                        describe_route(&fib.routes[*r])
                    ),
                }
            }
        })
        .collect()
}
