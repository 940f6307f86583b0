//! One network namespace's dump: the plain output of the standard tools
//! (DESIGN §3), parsed into typed models.
//!
//! Every file is optional. `None` means "not collected" (or unreadable as a
//! whole); a conclusion that needs it must be reported as insufficient
//! information by whoever asks.

pub mod addr;
pub mod fdb;
pub mod ipset;
pub mod iptables;
pub mod ipvs;
mod json;
mod keyword;
pub mod link;
pub mod neigh;
pub mod route;
pub mod rule;
pub mod sockets;
pub mod sysctl;

use std::path::Path;

use super::problem::{Parsed, Problem, read_text};

/// The files of one namespace dump, with the command that writes each.
/// This table is the snapshot contract; `collect` runs exactly these commands
/// (keeping only the `net.*` lines of `sysctl -a`, which is all DESIGN §3 needs).
pub const DUMP_FILES: &[DumpFile] = &[
    DumpFile {
        name: "ip-link.json",
        command: &["ip", "-j", "-d", "link", "show"],
    },
    DumpFile {
        name: "ip-addr.json",
        command: &["ip", "-j", "addr", "show"],
    },
    DumpFile {
        name: "ip-route.json",
        command: &["ip", "-j", "-d", "route", "show", "table", "all"],
    },
    DumpFile {
        name: "ip-route6.json",
        command: &["ip", "-6", "-j", "-d", "route", "show", "table", "all"],
    },
    DumpFile {
        name: "ip-rule.json",
        command: &["ip", "-j", "rule", "show"],
    },
    DumpFile {
        name: "ip-neigh.json",
        command: &["ip", "-j", "neigh", "show"],
    },
    DumpFile {
        name: "bridge-fdb.json",
        command: &["bridge", "-j", "fdb", "show"],
    },
    DumpFile {
        name: "iptables-save.txt",
        command: &["iptables-save"],
    },
    DumpFile {
        name: "ipset-save.txt",
        command: &["ipset", "save"],
    },
    DumpFile {
        name: "ipvsadm.txt",
        command: &["ipvsadm", "-Sn"],
    },
    DumpFile {
        name: "sysctl.txt",
        command: &["sysctl", "-a"],
    },
    DumpFile {
        name: "ss.txt",
        command: &["ss", "-H", "-tuln"],
    },
];

/// A file of the namespace dump and the command whose output it holds.
#[derive(Debug, Clone, Copy)]
pub struct DumpFile {
    pub name: &'static str,
    pub command: &'static [&'static str],
}

/// A parsed namespace dump.
#[derive(Debug, Default, Clone)]
pub struct NetnsDump {
    pub links: Option<Vec<link::Link>>,
    pub addrs: Option<Vec<addr::InterfaceAddrs>>,
    pub routes: Option<Vec<route::Route>>,
    pub routes6: Option<Vec<route::Route>>,
    pub rules: Option<Vec<rule::PolicyRule>>,
    pub neighbours: Option<Vec<neigh::Neighbour>>,
    pub fdb: Option<Vec<fdb::FdbEntry>>,
    pub iptables: Option<iptables::Ruleset>,
    pub ipsets: Option<ipset::IpSets>,
    pub ipvs: Option<ipvs::IpvsConfig>,
    pub sysctls: Option<sysctl::Sysctls>,
    pub sockets: Option<Vec<sockets::ListeningSocket>>,
}

impl NetnsDump {
    /// Reads every dump file present in `dir`. Problems in one file never stop
    /// the others from loading.
    pub fn load(dir: &Path) -> (NetnsDump, Vec<Problem>) {
        let mut problems = Vec::new();
        let p = &mut problems;
        let dump = NetnsDump {
            links: load_file(dir, "ip-link.json", link::parse, p),
            addrs: load_file(dir, "ip-addr.json", addr::parse, p),
            routes: load_file(dir, "ip-route.json", route::parse, p),
            routes6: load_file(dir, "ip-route6.json", route::parse, p),
            rules: load_file(dir, "ip-rule.json", rule::parse, p),
            neighbours: load_file(dir, "ip-neigh.json", neigh::parse, p),
            fdb: load_file(dir, "bridge-fdb.json", fdb::parse, p),
            iptables: load_file(dir, "iptables-save.txt", iptables::parse, p),
            ipsets: load_file(dir, "ipset-save.txt", ipset::parse, p),
            ipvs: load_file(dir, "ipvsadm.txt", ipvs::parse, p),
            sysctls: load_file(dir, "sysctl.txt", sysctl::parse, p),
            sockets: load_file(dir, "ss.txt", sockets::parse, p),
        };
        (dump, problems)
    }

    /// The dump files that were present and readable, in contract order.
    pub fn files_present(&self) -> Vec<&'static str> {
        let present = [
            self.links.is_some(),
            self.addrs.is_some(),
            self.routes.is_some(),
            self.routes6.is_some(),
            self.rules.is_some(),
            self.neighbours.is_some(),
            self.fdb.is_some(),
            self.iptables.is_some(),
            self.ipsets.is_some(),
            self.ipvs.is_some(),
            self.sysctls.is_some(),
            self.sockets.is_some(),
        ];
        DUMP_FILES
            .iter()
            .zip(present)
            .filter(|(_, p)| *p)
            .map(|(f, _)| f.name)
            .collect()
    }
}

/// Reads and parses one dump file. A missing file is simply not collected; an
/// unreadable one, or one that is not UTF-8, is a problem.
fn load_file<T>(
    dir: &Path,
    name: &str,
    parse: fn(&str) -> Parsed<T>,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let path = dir.join(name);
    let text = match read_text(&path) {
        Ok(Some(text)) => text,
        Ok(None) => return None,
        Err(problem) => {
            problems.push(problem);
            return None;
        }
    };
    let (value, issues) = parse(&text);
    problems.extend(
        issues
            .into_iter()
            .map(|issue| Problem::from_issue(&path, issue)),
    );
    value
}

/// Runs every dump parser over the same text and returns all their issues.
/// For fuzzing and property tests: whatever the input, no parser may panic
/// and every issue must point inside the input.
pub fn parse_any_dump(text: &str) -> Vec<super::problem::ParseIssue> {
    let mut issues = Vec::new();
    issues.extend(link::parse(text).1);
    issues.extend(addr::parse(text).1);
    issues.extend(route::parse(text).1);
    issues.extend(rule::parse(text).1);
    issues.extend(neigh::parse(text).1);
    issues.extend(fdb::parse(text).1);
    issues.extend(iptables::parse(text).1);
    issues.extend(ipset::parse(text).1);
    issues.extend(ipvs::parse(text).1);
    issues.extend(sysctl::parse(text).1);
    issues.extend(sockets::parse(text).1);
    issues
}
