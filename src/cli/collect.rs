//! `skoop collect local`: one network namespace's dump files, from this machine.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use skoop::collect::{CollectReport, collect_local};
use skoop::snapshot::netns::DUMP_FILES;

use super::EXIT_USAGE;

#[derive(Debug, Subcommand)]
pub enum CollectCommand {
    /// Write one network namespace's dump files into a directory.
    ///
    /// Runs the standard tools (iproute2, iptables-save, ipset, ipvsadm,
    /// sysctl, ss) inside network namespace NAME (`ip netns exec NAME`), or in
    /// the namespace skoop runs in when --netns is not given, and writes each
    /// one's output to its file in DIR, flat. In a snapshot, DIR is
    /// `nodes/<node>/host` for a node's root namespace and
    /// `nodes/<node>/pods/<namespace>/<pod>` for a pod's.
    ///
    /// Collecting only reads: ipvsadm runs only when /proc/net/ip_vs exists
    /// (running it would otherwise load the ip_vs kernel module). Every tool
    /// runs with LC_ALL=C; sysctl.txt keeps the net.* lines of `sysctl -a`.
    /// An empty file is a valid dump (e.g. no iptables rules at all).
    ///
    /// A tool that is not installed skips its file with a warning; so does a
    /// command that fails, quoting its stderr. Files are written atomically,
    /// and a skipped file left in DIR by an earlier collection is removed.
    ///
    /// Exit status: 0 when every file was written or skipped for a harmless
    /// reason (tool not installed, IPVS not in use); 1 when some command
    /// failed; 2 when nothing could be collected (unknown namespace, DIR not
    /// writable, namespace not enterable).
    #[command(after_long_help = by_hand_help())]
    Local(LocalArgs),
}

#[derive(Debug, Args)]
pub struct LocalArgs {
    /// The network namespace to collect, by its `ip netns list` name
    /// (default: the one skoop runs in). Entering one needs root.
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// The directory to write the files into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// The same collection as a shell script, from the contract's own table.
fn by_hand_help() -> String {
    let mut help = String::from(
        "Collecting by hand (e.g. on a node without skoop), as root, inside the namespace \
         (prefix each command with `ip netns exec NAME`):\n\n  cd DIR\n",
    );
    for file in DUMP_FILES {
        help.push_str(&format!("  {} > {}\n", file.command.join(" "), file.name));
    }
    help.push_str(
        "\nOmit a file whose command is missing or fails: a missing file means \"not collected\". \
         A full `sysctl -a` is fine too (skoop keeps only net.*).",
    );
    help
}

pub fn run(command: CollectCommand) -> ExitCode {
    match command {
        CollectCommand::Local(args) => local(args),
    }
}

fn local(args: LocalArgs) -> ExitCode {
    match collect_local(args.netns.as_deref(), &args.out) {
        Ok(report) => {
            print_report(&report);
            if report.has_failures() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Quoted stderr is cut to this many lines; the rest is counted.
const STDERR_LINES: usize = 3;

fn print_report(report: &CollectReport) {
    for written in &report.written {
        if !written.stderr.is_empty() {
            eprintln!(
                "warning: {} may be incomplete; its command said: {}",
                written.file,
                excerpt(&written.stderr)
            );
        }
    }
    for skipped in &report.skipped {
        let kind = if skipped.reason.is_note() {
            "note"
        } else {
            "warning"
        };
        let reason = excerpt(&skipped.reason.to_string());
        eprintln!("{kind}: {} not collected: {reason}", skipped.file);
        if skipped.removed_stale {
            eprintln!(
                "{kind}: removed {} left by an earlier collection",
                report.out.join(skipped.file).display()
            );
        }
    }
    let namespace = match &report.netns {
        Some(name) => format!("network namespace {name}"),
        None => "the current network namespace".to_string(),
    };
    out!(
        "collected {} of {} files from {namespace} into {}",
        report.written.len(),
        DUMP_FILES.len(),
        report.out.display()
    );
    if !report.skipped.is_empty() {
        let skipped: Vec<&str> = report.skipped.iter().map(|s| s.file).collect();
        out!("not collected: {}", skipped.join(", "));
    }
}

/// The first lines of a multi-line message, saying how many were left out.
fn excerpt(text: &str) -> String {
    let mut excerpt = text
        .lines()
        .take(STDERR_LINES)
        .collect::<Vec<_>>()
        .join("\n  ");
    let more = text.lines().count().saturating_sub(STDERR_LINES);
    if more > 0 {
        excerpt.push_str(&format!("\n  ({more} more lines)"));
    }
    excerpt
}
