//! `skoop netfilter trace`: one packet through one namespace's iptables and
//! nftables rules, as the kernel would run them, with every rule visited.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use skoop::net::Family;
use skoop::netstack::Tri;
use skoop::netstack::netfilter::{
    Context, CtState, Netfilter, Outcome, Packet, PacketPath, RouteChoice, Step, Translation,
    Verdict,
};
use skoop::netstack::routing::Fib;
use skoop::snapshot::Problem;
use skoop::snapshot::input::read_text;
use skoop::snapshot::netns::iptables::{self, Protocol, TcpFlagBits};
use skoop::snapshot::netns::nft;
use skoop::snapshot::netns::{DumpFile, FileState, NetnsDump};

use super::args::{parse_mark, parse_port, protocol_parser};
use super::namespace::{NamespaceArgs, lacking_files};
use super::{EXIT_USAGE, OutputFormat, print_json, report_problems};

#[derive(Debug, Subcommand)]
pub enum NetfilterCommand {
    /// What the iptables and nftables rules of one namespace do with a packet,
    /// rule by rule.
    ///
    /// The packet goes through the hooks of its path; at each hook the
    /// iptables tables (raw, mangle, nat, filter) and the nftables base
    /// chains in the kernel's priority order, with jumps, gotos, returns and
    /// policies; NAT and marks rewrite it for the rules after them. A
    /// `statistic` rule, an nftables `numgen` or a multipath route splits the
    /// result into outcomes, each with its
    /// probability. A rule the model cannot evaluate makes its outcome
    /// `unknown`, naming the rule.
    ///
    /// Exit status: 0 when every outcome accepts, 1 when some drop, reject or
    /// are unknown, 2 for bad arguments or an unreadable dump.
    ///
    /// Examples: skoop netfilter trace --netns snap/nodes/node-1/host
    /// --src 10.244.1.2 --dst 10.96.0.100 --protocol tcp --port 80 --in-iface cni0;
    /// skoop netfilter trace --snapshot snap --node node-1 (the same dump).
    Trace(TraceArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["netns", "node", "pod", "rules"])))]
pub struct TraceArgs {
    /// The namespace dump (iptables-save.txt, or ip6tables-save.txt for
    /// IPv6, and nft-ruleset.json; ip-route.json, ip-rule.json, ip-addr.json
    /// (their IPv6 files for IPv6) for routing and local addresses;
    /// ipset-save.txt for sets).
    #[command(flatten)]
    namespace: NamespaceArgs,
    /// A ruleset file alone: iptables-save output (ip6tables-save's for IPv6
    /// addresses), or `nft -j list ruleset` (told apart by content). No
    /// routing: give --local-ip and --out-iface.
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// Source address.
    #[arg(long)]
    src: IpAddr,
    /// Destination address.
    #[arg(long)]
    dst: IpAddr,
    /// Protocol (`--proto` as older skoop read it).
    #[arg(long, alias = "proto", value_parser = protocol_parser())]
    protocol: Protocol,
    /// Source port (tcp, udp, sctp).
    #[arg(long, default_value_t = 40000, value_parser = parse_port)]
    sport: u16,
    /// Destination port (tcp, udp, sctp: required; icmp has none).
    /// `--dport` as older skoop read it.
    #[arg(long, alias = "dport", value_parser = parse_port)]
    port: Option<u16>,
    /// Which way the packet goes through the namespace.
    #[arg(long, value_enum, default_value_t = PathArg::Received)]
    path: PathArg,
    /// The interface the packet arrives on.
    #[arg(long, value_name = "IF")]
    in_iface: Option<String>,
    /// The interface the packet leaves by (otherwise the route decides).
    #[arg(long, value_name = "IF")]
    out_iface: Option<String>,
    /// An address of this namespace (for addrtype and the INPUT/FORWARD
    /// decision); may be repeated. Added to those of the dump.
    #[arg(long = "local-ip", value_name = "IP")]
    local_ip: Vec<IpAddr>,
    /// Packet mark, decimal or 0x-hex.
    #[arg(long, value_parser = parse_mark, default_value = "0")]
    mark: u32,
    /// The connection state to assume.
    #[arg(long, value_enum, default_value_t = CtArg::New)]
    ct_state: CtArg,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PathArg {
    /// Arrives on an interface; routing picks INPUT or FORWARD.
    Received,
    Forward,
    Input,
    /// Locally generated.
    Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CtArg {
    /// The first packet of a connection (nat rules apply).
    New,
    /// A packet of a connection that has seen replies (nat rules are skipped).
    Established,
}

pub fn run(command: NetfilterCommand) -> ExitCode {
    match command {
        NetfilterCommand::Trace(args) => trace(args),
    }
}

/// Reads the rules and, from a namespace dump, the rest. An iptables dump
/// given as `--rules` holds the rules of `family`'s packets (iptables-save
/// for IPv4, ip6tables-save for IPv6).
fn load(args: &TraceArgs, family: Family) -> Result<NetnsDump, ExitCode> {
    let usage = |message: String| {
        err!("error: {message}");
        ExitCode::from(EXIT_USAGE)
    };
    let Some(file) = &args.rules else {
        let dir = args.namespace.dir().map_err(usage)?;
        let (dump, problems) = NetnsDump::load(&dir);
        report_problems(&problems);
        let iptables = match family {
            Family::Ipv4 => DumpFile::IptablesSave,
            Family::Ipv6 => DumpFile::Ip6tablesSave,
        };
        if dump.state(iptables) != FileState::Read && dump.nftables.is_none() {
            let files = [iptables, DumpFile::NftRuleset];
            let lacking = lacking_files(&dump, &files).unwrap_or_default();
            return Err(usage(format!(
                "{}: a trace of an {family} packet needs {iptables} or nft-ruleset.json: {lacking}",
                dir.display()
            )));
        }
        return Ok(dump);
    };
    let text = match read_text(file, DumpFile::IptablesSave.limit()) {
        Ok(Some(text)) => text,
        Ok(None) => return Err(usage(format!("{}: no such file", file.display()))),
        Err(problem) => return Err(usage(problem.to_string())),
    };
    // `nft -j` writes one JSON object; iptables-save never starts with `{`.
    let is_nft = text.trim_start().starts_with('{');
    let mut dump = NetnsDump::default();
    let issues = if is_nft {
        let (ruleset, issues) = nft::parse(&text);
        dump.nftables = ruleset;
        issues
    } else {
        let (ruleset, issues) = iptables::parse(&text);
        match family {
            Family::Ipv4 => dump.iptables = ruleset,
            Family::Ipv6 => dump.ip6tables = ruleset,
        }
        issues
    };
    let problems: Vec<Problem> = issues
        .into_iter()
        .map(|issue| Problem::from_issue(file, issue))
        .collect();
    report_problems(&problems);
    if dump.iptables.is_none() && dump.ip6tables.is_none() && dump.nftables.is_none() {
        let what = if is_nft {
            "not `nft -j list ruleset` output"
        } else {
            "not an iptables-save dump"
        };
        return Err(usage(format!("{}: {what}", file.display())));
    }
    Ok(dump)
}

fn packet(args: &TraceArgs) -> Result<Packet, String> {
    let proto = args.protocol;
    if args.src.is_ipv4() != args.dst.is_ipv4() {
        return Err("--src and --dst must be of one address family".into());
    }
    let mut packet = Packet::new(args.src, args.dst, proto);
    let icmp = matches!(proto, Protocol::Icmp | Protocol::Icmpv6);
    if icmp && args.port.is_some() {
        return Err(format!("--protocol {proto} has no ports: drop --port"));
    }
    if !icmp {
        let Some(dport) = args.port else {
            return Err(format!("--protocol {proto} needs --port"));
        };
        packet.ip.sport = Some(args.sport);
        packet.ip.dport = Some(dport);
    }
    packet.ip.mark = args.mark;
    packet.in_iface = args.in_iface.clone();
    packet.out_iface = args.out_iface.clone();
    if args.ct_state == CtArg::Established {
        packet.ct_state = CtState::Established;
        packet.ct_mark = None;
        packet.tcp_flags = (proto == Protocol::Tcp).then_some(TcpFlagBits::ACK);
    }
    Ok(packet)
}

fn trace(args: TraceArgs) -> ExitCode {
    let packet = match packet(&args) {
        Ok(packet) => packet,
        Err(message) => {
            err!("error: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let dump = match load(&args, Family::of(args.dst)) {
        Ok(dump) => dump,
        Err(code) => return code,
    };
    let dump = &dump;
    let fib = Fib::from_dump(dump, Family::of(args.dst));
    let context = Context {
        fib: fib.as_ref(),
        interfaces: dump.addrs.as_deref().unwrap_or_default(),
        local_addresses: &args.local_ip,
        listeners: dump.sockets.as_deref(),
    };
    let Some(netfilter) = Netfilter::from_dump(dump) else {
        err!("error: no ruleset to trace");
        return ExitCode::from(EXIT_USAGE);
    };
    let path = match args.path {
        PathArg::Received => PacketPath::Received,
        PathArg::Forward => PacketPath::Forward,
        PathArg::Input => PacketPath::Input,
        PathArg::Output => PacketPath::Output,
    };
    let outcomes = netfilter.traverse(path, packet, &context);
    let all_accept = outcomes.iter().all(|o| o.verdict == Verdict::Accept);
    let json = TraceJson {
        outcomes: outcomes.iter().map(OutcomeJson::from).collect(),
    };
    match args.output {
        OutputFormat::Json => {
            if let Err(code) = print_json(&json) {
                return code;
            }
        }
        OutputFormat::Text => print_text(&json),
    }
    if all_accept {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[derive(Debug, Serialize)]
struct TraceJson {
    outcomes: Vec<OutcomeJson>,
}

#[derive(Debug, Serialize)]
struct OutcomeJson {
    probability: f64,
    verdict: &'static str,
    /// Why the verdict is what it is, when the verdict alone does not say
    /// (the reject type, the routing error, what is unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    packet: PacketJson,
    dnat: Option<String>,
    masquerade: bool,
    trace: Vec<StepJson>,
}

#[derive(Debug, Serialize)]
struct PacketJson {
    src: IpAddr,
    dst: IpAddr,
    sport: Option<u16>,
    dport: Option<u16>,
    proto: String,
    mark: String,
}

/// One trace step; `step` says which kind.
#[derive(Debug, Serialize)]
#[serde(tag = "step", rename_all = "lowercase")]
enum StepJson {
    Rule {
        hook: &'static str,
        table: &'static str,
        chain: String,
        rule: usize,
        line: usize,
        text: String,
        #[serde(rename = "match")]
        matched: Tri,
        #[serde(skip_serializing_if = "Option::is_none")]
        assumption: Option<String>,
    },
    Policy {
        hook: &'static str,
        table: &'static str,
        chain: String,
        policy: &'static str,
    },
    /// An nftables rule: `handle` and the rule's position in the JSON dump.
    #[serde(rename = "nft_rule")]
    NftRule {
        hook: &'static str,
        table: String,
        chain: String,
        handle: Option<u64>,
        line: usize,
        column: usize,
        text: String,
        #[serde(rename = "match")]
        matched: Tri,
        #[serde(skip_serializing_if = "Option::is_none")]
        assumption: Option<String>,
    },
    #[serde(rename = "nft_policy")]
    NftPolicy {
        hook: &'static str,
        table: String,
        chain: String,
        policy: &'static str,
    },
    Translation {
        hook: &'static str,
        table: String,
        kind: &'static str,
        before: String,
        after: String,
    },
    Route(RouteJson),
}

/// The routing decision between hooks.
#[derive(Debug, Serialize)]
struct RouteJson {
    destination: IpAddr,
    /// local, out, failed or unknown.
    decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dev: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    route: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl From<&Outcome<'_>> for OutcomeJson {
    fn from(outcome: &Outcome<'_>) -> OutcomeJson {
        let packet = &outcome.packet;
        let reason = match &outcome.verdict {
            Verdict::Accept | Verdict::Drop => None,
            Verdict::Reject { with } => Some(format!("reject with {with:?}")),
            Verdict::Unroutable { error } => Some(format!("routing: {error}")),
            Verdict::Unknown { reason } => Some(reason.clone()),
        };
        OutcomeJson {
            probability: outcome.probability,
            verdict: outcome.verdict.as_str(),
            reason,
            packet: PacketJson {
                src: packet.ip.src,
                dst: packet.ip.dst,
                sport: packet.ip.sport,
                dport: packet.ip.dport,
                proto: packet
                    .ip
                    .protocol
                    .name()
                    .map_or_else(|| packet.ip.protocol.number().to_string(), str::to_string),
                mark: format!("{:#x}", packet.ip.mark),
            },
            dnat: outcome.dnat().map(|endpoint| endpoint.to_string()),
            masquerade: outcome.masquerade(),
            trace: outcome.trace.iter().map(StepJson::from).collect(),
        }
    }
}

fn hook_name(hook: skoop::netstack::netfilter::Hook) -> &'static str {
    hook.chain()
}

fn mark(mark: Option<u32>) -> String {
    mark.map_or_else(|| "unknown".to_string(), |m| format!("{m:#x}"))
}

impl From<&Step<'_>> for StepJson {
    fn from(step: &Step<'_>) -> StepJson {
        match step {
            Step::Rule {
                hook,
                table,
                chain,
                rule,
                matched,
                assumption,
                ..
            } => StepJson::Rule {
                hook: hook_name(*hook),
                table: table.as_str(),
                chain: chain.to_string(),
                rule: rule.number,
                line: rule.line,
                text: rule.text.to_string(),
                matched: *matched,
                assumption: assumption.map(|a| a.to_string()),
            },
            Step::Policy {
                hook,
                table,
                chain,
                policy,
                ..
            } => StepJson::Policy {
                hook: hook_name(*hook),
                table: table.as_str(),
                chain: chain.to_string(),
                policy: match policy {
                    iptables::Policy::Accept => "ACCEPT",
                    iptables::Policy::Drop => "DROP",
                },
            },
            Step::NftRule {
                hook,
                table,
                chain,
                rule,
                matched,
                assumption,
            } => StepJson::NftRule {
                hook: hook_name(*hook),
                table: table.to_string(),
                chain: chain.to_string(),
                handle: rule.handle,
                line: rule.position.0,
                column: rule.position.1,
                text: rule.text(),
                matched: *matched,
                assumption: assumption.map(|a| a.to_string()),
            },
            Step::NftPolicy {
                hook,
                table,
                chain,
                policy,
            } => StepJson::NftPolicy {
                hook: hook_name(*hook),
                table: table.to_string(),
                chain: chain.to_string(),
                policy: match policy {
                    nft::Policy::Accept => "accept",
                    nft::Policy::Drop => "drop",
                },
            },
            Step::Translation {
                hook,
                table,
                translation,
            } => {
                let (kind, before, after) = translation_values(translation);
                StepJson::Translation {
                    hook: hook_name(*hook),
                    table: table.to_string(),
                    kind,
                    before,
                    after,
                }
            }
            Step::Route {
                destination,
                choice,
            } => StepJson::Route(route_json(*destination, choice.clone())),
        }
    }
}

/// A translation's kind, and what it changed from and to.
fn translation_values(translation: &Translation) -> (&'static str, String, String) {
    match translation {
        Translation::Dnat { before, after } => ("dnat", before.to_string(), after.to_string()),
        Translation::Redirect { before, after } => {
            ("redirect", before.to_string(), after.to_string())
        }
        Translation::Snat { before, after } => ("snat", before.to_string(), after.to_string()),
        Translation::Masquerade { before, after } => (
            "masquerade",
            before.to_string(),
            after.map_or_else(
                || "the outgoing device's address (not known)".to_string(),
                |a| a.to_string(),
            ),
        ),
        Translation::Mark { before, after } => ("mark", mark(Some(*before)), mark(Some(*after))),
        Translation::ConnMark { before, after } => ("connmark", mark(*before), mark(*after)),
        Translation::Untracked => ("notrack", "tracked".to_string(), "untracked".to_string()),
    }
}

/// A routing decision as `-o json` gives it.
fn route_json(destination: IpAddr, choice: RouteChoice) -> RouteJson {
    let none = || RouteJson {
        destination,
        decision: "unknown",
        dev: None,
        gateway: None,
        rule: None,
        route: None,
        reason: None,
    };
    match choice {
        RouteChoice::Local { rule, route } => RouteJson {
            decision: "local",
            rule,
            route,
            ..none()
        },
        RouteChoice::Out {
            dev,
            gateway,
            rule,
            route,
        } => RouteJson {
            decision: "out",
            dev,
            gateway,
            rule,
            route,
            ..none()
        },
        RouteChoice::Failed { error, rule, route } => RouteJson {
            decision: "failed",
            rule,
            route,
            reason: Some(error.to_string()),
            ..none()
        },
        RouteChoice::Unknown { reason } => RouteJson {
            reason: Some(reason),
            ..none()
        },
    }
}

fn print_text(json: &TraceJson) {
    let count = json.outcomes.len();
    for (index, outcome) in json.outcomes.iter().enumerate() {
        let packet = &outcome.packet;
        let endpoint = |addr: IpAddr, port: Option<u16>| match port {
            Some(port) => format!("{addr}:{port}"),
            None => addr.to_string(),
        };
        let mut line = format!(
            "{}: {} {} -> {} mark {}",
            outcome.verdict,
            packet.proto,
            endpoint(packet.src, packet.sport),
            endpoint(packet.dst, packet.dport),
            packet.mark
        );
        if count > 1 {
            line = format!(
                "outcome {} of {count} ({:.1}% of packets): {line}",
                index + 1,
                outcome.probability * 100.0
            );
        }
        out!("{line}");
        if let Some(reason) = &outcome.reason {
            out!("  reason: {reason}");
        }
        if let Some(dnat) = &outcome.dnat {
            out!("  dnat: {dnat}");
        }
        if outcome.masquerade {
            out!("  masquerade: source rewritten");
        }
        out!("  trace:");
        for step in &outcome.trace {
            out!("    {}", step_line(step));
        }
    }
}

fn matched_word(matched: Tri) -> &'static str {
    match matched {
        Tri::True => "match",
        Tri::False => "no match",
        Tri::Unknown => "UNKNOWN",
    }
}

fn step_line(step: &StepJson) -> String {
    match step {
        StepJson::Rule {
            hook,
            table,
            chain,
            rule,
            line,
            text,
            matched,
            assumption,
        } => {
            let matched = matched_word(*matched);
            let mut out =
                format!("{hook} {table} {chain} #{rule} (line {line}): {matched}: {text}");
            if let Some(assumption) = assumption {
                out.push_str(&format!(" [{assumption}]"));
            }
            out
        }
        StepJson::Policy {
            hook,
            table,
            chain,
            policy,
        } => format!("{hook} {table} {chain}: policy {policy}"),
        StepJson::NftRule {
            hook,
            table,
            chain,
            handle,
            line,
            column,
            text,
            matched,
            assumption,
        } => {
            let handle = handle.map_or_else(String::new, |h| format!(" handle {h}"));
            let mut out = format!(
                "{hook} {table} {chain}{handle} (line {line}:{column}): {}: {text}",
                matched_word(*matched)
            );
            if let Some(assumption) = assumption {
                out.push_str(&format!(" [{assumption}]"));
            }
            out
        }
        StepJson::NftPolicy {
            hook,
            table,
            chain,
            policy,
        } => format!("{hook} {table} {chain}: policy {policy}"),
        StepJson::Translation {
            hook,
            table,
            kind,
            before,
            after,
        } => format!("{hook} {table}: {kind} {before} -> {after}"),
        StepJson::Route(RouteJson {
            destination,
            decision,
            dev,
            gateway,
            route,
            reason,
            ..
        }) => {
            let mut out = format!("route {destination}: {decision}");
            if let Some(dev) = dev {
                out.push_str(&format!(" dev {dev}"));
            }
            if let Some(gateway) = gateway {
                out.push_str(&format!(" via {gateway}"));
            }
            if let Some(route) = route {
                out.push_str(&format!(" ({route})"));
            }
            if let Some(reason) = reason {
                out.push_str(&format!(": {reason}"));
            }
            out
        }
    }
}
