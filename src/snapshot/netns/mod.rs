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
pub mod nft;
pub mod route;
pub mod rule;
pub mod sockets;
pub mod sysctl;

use std::path::Path;

use super::input::{self, Boundary};
use super::problem::{Parsed, Problem};

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
        name: "nft-ruleset.json",
        command: &["nft", "-j", "list", "ruleset"],
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
        command: &["ss", "-H", "-tulnS"],
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
    pub nftables: Option<nft::Ruleset>,
    pub ipsets: Option<ipset::IpSets>,
    pub ipvs: Option<ipvs::IpvsConfig>,
    pub sysctls: Option<sysctl::Sysctls>,
    pub sockets: Option<Vec<sockets::ListeningSocket>>,
    /// Dump files that are there but could not be read or parsed, by name,
    /// with the first problem (`FILE:LINE:COLUMN: what`): not the same as
    /// not collected, and said so.
    pub unreadable: std::collections::BTreeMap<&'static str, String>,
}

impl NetnsDump {
    /// Reads every dump file present in `dir`. Problems in one file never stop
    /// the others from loading. Links out of `dir` are not followed.
    pub fn load(dir: &Path) -> (NetnsDump, Vec<Problem>) {
        NetnsDump::load_inside(dir, &Boundary::new(dir))
    }

    /// [`NetnsDump::load`] of a directory inside a snapshot: its files may
    /// link anywhere inside `boundary`, never out of it.
    pub fn load_inside(dir: &Path, boundary: &Boundary) -> (NetnsDump, Vec<Problem>) {
        let mut files = DumpReader {
            dir,
            boundary,
            problems: Vec::new(),
            unreadable: Default::default(),
        };
        let mut dump = NetnsDump {
            links: files.load("ip-link.json", link::parse),
            addrs: files.load("ip-addr.json", addr::parse),
            routes: files.load("ip-route.json", route::parse),
            routes6: files.load("ip-route6.json", route::parse),
            rules: files.load("ip-rule.json", rule::parse),
            neighbours: files.load("ip-neigh.json", neigh::parse),
            fdb: files.load("bridge-fdb.json", fdb::parse),
            iptables: files.load("iptables-save.txt", iptables::parse),
            nftables: files.load("nft-ruleset.json", nft::parse),
            ipsets: files.load("ipset-save.txt", ipset::parse),
            ipvs: files.load("ipvsadm.txt", ipvs::parse),
            sysctls: files.load("sysctl.txt", sysctl::parse),
            sockets: files.load("ss.txt", sockets::parse),
            unreadable: Default::default(),
        };
        dump.unreadable = files.unreadable;
        (dump, files.problems)
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
            self.nftables.is_some(),
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

/// The files of one namespace directory, and the problems met reading them.
struct DumpReader<'a> {
    dir: &'a Path,
    boundary: &'a Boundary,
    problems: Vec<Problem>,
    unreadable: std::collections::BTreeMap<&'static str, String>,
}

impl DumpReader<'_> {
    /// Reads and parses one dump file. A missing file is simply not
    /// collected; an unreadable one, one over its size cap, one that is not
    /// a regular file inside the boundary, or not UTF-8, is a problem.
    fn load<T>(&mut self, name: &'static str, parse: fn(&str) -> Parsed<T>) -> Option<T> {
        let path = self.dir.join(name);
        let text = match self.boundary.read_text(&path, input::dump_file(name)) {
            Ok(Some(text)) => text,
            Ok(None) => return None,
            Err(problem) => {
                self.unreadable.insert(name, problem.to_string());
                self.problems.push(problem);
                return None;
            }
        };
        let (value, issues) = parse(&text);
        let problems: Vec<Problem> = issues
            .into_iter()
            .map(|issue| Problem::from_issue(&path, issue))
            .collect();
        if value.is_none() {
            let why = problems.first().map_or_else(
                || format!("{}: not parsed", path.display()),
                Problem::to_string,
            );
            self.unreadable.insert(name, why);
        }
        self.problems.extend(problems);
        value
    }
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
    issues.extend(nft::parse(text).1);
    issues.extend(ipset::parse(text).1);
    issues.extend(ipvs::parse(text).1);
    issues.extend(sysctl::parse(text).1);
    issues.extend(sockets::parse(text).1);
    issues
}
