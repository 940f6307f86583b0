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

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use super::input::{Boundary, Limit, MIB};
use super::problem::{Parsed, Problem};

/// A file of a namespace dump (DESIGN §3): the snapshot contract's table
/// of file names and the commands that write them; `collect` runs exactly
/// these commands (keeping only the `net.*` lines of `sysctl -a`, which is
/// all DESIGN §3 needs). Code names a dump file by its variant, never by a
/// string of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DumpFile {
    IpLink,
    IpAddr,
    IpRoute,
    IpRoute6,
    IpRule,
    IpRule6,
    IpNeigh,
    BridgeFdb,
    IptablesSave,
    Ip6tablesSave,
    NftRuleset,
    IpsetSave,
    Ipvsadm,
    Sysctl,
    Ss,
}

impl DumpFile {
    /// Every dump file, in the contract's order.
    pub const ALL: [DumpFile; 15] = [
        DumpFile::IpLink,
        DumpFile::IpAddr,
        DumpFile::IpRoute,
        DumpFile::IpRoute6,
        DumpFile::IpRule,
        DumpFile::IpRule6,
        DumpFile::IpNeigh,
        DumpFile::BridgeFdb,
        DumpFile::IptablesSave,
        DumpFile::Ip6tablesSave,
        DumpFile::NftRuleset,
        DumpFile::IpsetSave,
        DumpFile::Ipvsadm,
        DumpFile::Sysctl,
        DumpFile::Ss,
    ];

    /// The file's name in a namespace directory.
    pub fn name(self) -> &'static str {
        match self {
            DumpFile::IpLink => "ip-link.json",
            DumpFile::IpAddr => "ip-addr.json",
            DumpFile::IpRoute => "ip-route.json",
            DumpFile::IpRoute6 => "ip-route6.json",
            DumpFile::IpRule => "ip-rule.json",
            DumpFile::IpRule6 => "ip-rule6.json",
            DumpFile::IpNeigh => "ip-neigh.json",
            DumpFile::BridgeFdb => "bridge-fdb.json",
            DumpFile::IptablesSave => "iptables-save.txt",
            DumpFile::Ip6tablesSave => "ip6tables-save.txt",
            DumpFile::NftRuleset => "nft-ruleset.json",
            DumpFile::IpsetSave => "ipset-save.txt",
            DumpFile::Ipvsadm => "ipvsadm.txt",
            DumpFile::Sysctl => "sysctl.txt",
            DumpFile::Ss => "ss.txt",
        }
    }

    /// The command whose output the file holds.
    pub fn command(self) -> &'static [&'static str] {
        match self {
            DumpFile::IpLink => &["ip", "-j", "-d", "link", "show"],
            DumpFile::IpAddr => &["ip", "-j", "addr", "show"],
            DumpFile::IpRoute => &["ip", "-j", "-d", "route", "show", "table", "all"],
            DumpFile::IpRoute6 => &["ip", "-6", "-j", "-d", "route", "show", "table", "all"],
            DumpFile::IpRule => &["ip", "-j", "rule", "show"],
            DumpFile::IpRule6 => &["ip", "-6", "-j", "rule", "show"],
            DumpFile::IpNeigh => &["ip", "-j", "neigh", "show"],
            DumpFile::BridgeFdb => &["bridge", "-j", "fdb", "show"],
            DumpFile::IptablesSave => &["iptables-save"],
            DumpFile::Ip6tablesSave => &["ip6tables-save"],
            DumpFile::NftRuleset => &["nft", "-j", "list", "ruleset"],
            DumpFile::IpsetSave => &["ipset", "save"],
            DumpFile::Ipvsadm => &["ipvsadm", "-Sn"],
            DumpFile::Sysctl => &["sysctl", "-a"],
            DumpFile::Ss => &["ss", "-H", "-tulnS"],
        }
    }

    /// The file of this name, if it is a dump file.
    pub fn from_name(name: &str) -> Option<DumpFile> {
        DumpFile::ALL.into_iter().find(|file| file.name() == name)
    }

    /// How large the file may be (`docs/limits.md`): the rulesets of big
    /// clusters (kube-proxy with tens of thousands of services, Calico's
    /// ipsets) are far bigger than routes or sockets.
    pub fn limit(self) -> Limit {
        match self {
            DumpFile::IptablesSave
            | DumpFile::Ip6tablesSave
            | DumpFile::IpsetSave
            | DumpFile::NftRuleset => Limit {
                bytes: 256 * MIB,
                what: "a ruleset dump (iptables-save.txt, ip6tables-save.txt, ipset-save.txt, nft-ruleset.json)",
            },
            DumpFile::Sysctl => Limit {
                bytes: 16 * MIB,
                what: "sysctl.txt",
            },
            _ => Limit {
                bytes: 64 * MIB,
                what: "a namespace dump file",
            },
        }
    }
}

impl fmt::Display for DumpFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What became of one file of a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState<'a> {
    Read,
    /// Not in the namespace's directory.
    NotCollected,
    /// There, but it could not be read or parsed: its first problem.
    Unreadable(&'a str),
}

/// A file a dump lacks, said one way wherever it is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lacking<'a> {
    pub file: DumpFile,
    /// Its first problem, for a file that is there but unreadable.
    pub unreadable: Option<&'a str>,
}

impl Lacking<'_> {
    /// `FILE of WHOSE was not collected`, `FILE of WHOSE is in the snapshot
    /// but unreadable (WHY)`.
    pub fn of(&self, whose: impl fmt::Display) -> String {
        format!("{} of {whose} {}", self.file, self.what())
    }

    fn what(&self) -> String {
        match self.unreadable {
            Some(why) => format!("is in the snapshot but unreadable ({why})"),
            None => "was not collected".to_owned(),
        }
    }
}

impl fmt::Display for Lacking<'_> {
    /// `FILE was not collected`, `FILE is in the snapshot but unreadable (WHY)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.file, self.what())
    }
}

/// A parsed namespace dump.
#[derive(Debug, Default, Clone)]
pub struct NetnsDump {
    pub links: Option<Vec<link::Link>>,
    pub addrs: Option<Vec<addr::InterfaceAddrs>>,
    pub routes: Option<Vec<route::Route>>,
    pub routes6: Option<Vec<route::Route>>,
    pub rules: Option<Vec<rule::PolicyRule>>,
    /// The IPv6 policy rules (`ip -6 rule`): IPv6 has its own.
    pub rules6: Option<Vec<rule::PolicyRule>>,
    pub neighbours: Option<Vec<neigh::Neighbour>>,
    pub fdb: Option<Vec<fdb::FdbEntry>>,
    pub iptables: Option<iptables::Ruleset>,
    /// The IPv6 rules (`ip6tables-save`): iptables keeps them apart.
    pub ip6tables: Option<iptables::Ruleset>,
    pub nftables: Option<nft::Ruleset>,
    pub ipsets: Option<ipset::IpSets>,
    pub ipvs: Option<ipvs::IpvsConfig>,
    pub sysctls: Option<sysctl::Sysctls>,
    pub sockets: Option<Vec<sockets::ListeningSocket>>,
    /// Dump files that are there but could not be read or parsed, by name,
    /// with the first problem (`FILE:LINE:COLUMN: what`): not the same as
    /// not collected, and said so.
    pub unreadable: BTreeMap<DumpFile, String>,
    /// Where each element of a JSON dump file starts in it (line, column),
    /// in the order of its list above: the place evidence points at.
    pub places: BTreeMap<DumpFile, Vec<(usize, usize)>>,
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
            places: Default::default(),
        };
        let mut dump = NetnsDump {
            links: files.load_placed(DumpFile::IpLink),
            addrs: files.load_placed(DumpFile::IpAddr),
            routes: files.load_placed(DumpFile::IpRoute),
            routes6: files.load_placed(DumpFile::IpRoute6),
            rules: files.load_placed(DumpFile::IpRule),
            rules6: files.load_placed(DumpFile::IpRule6),
            neighbours: files.load_placed(DumpFile::IpNeigh),
            fdb: files.load_placed(DumpFile::BridgeFdb),
            iptables: files.load(DumpFile::IptablesSave, iptables::parse),
            ip6tables: files.load(DumpFile::Ip6tablesSave, iptables::parse),
            nftables: files.load(DumpFile::NftRuleset, nft::parse),
            ipsets: files.load(DumpFile::IpsetSave, ipset::parse),
            ipvs: files.load(DumpFile::Ipvsadm, ipvs::parse),
            sysctls: files.load(DumpFile::Sysctl, sysctl::parse),
            sockets: files.load(DumpFile::Ss, sockets::parse),
            unreadable: Default::default(),
            places: Default::default(),
        };
        dump.unreadable = files.unreadable;
        dump.places = files.places;
        (dump, files.problems)
    }

    /// Whether `file` was read, not collected, or is there but unreadable.
    pub fn state(&self, file: DumpFile) -> FileState<'_> {
        let read = match file {
            DumpFile::IpLink => self.links.is_some(),
            DumpFile::IpAddr => self.addrs.is_some(),
            DumpFile::IpRoute => self.routes.is_some(),
            DumpFile::IpRoute6 => self.routes6.is_some(),
            DumpFile::IpRule => self.rules.is_some(),
            DumpFile::IpRule6 => self.rules6.is_some(),
            DumpFile::IpNeigh => self.neighbours.is_some(),
            DumpFile::BridgeFdb => self.fdb.is_some(),
            DumpFile::IptablesSave => self.iptables.is_some(),
            DumpFile::Ip6tablesSave => self.ip6tables.is_some(),
            DumpFile::NftRuleset => self.nftables.is_some(),
            DumpFile::IpsetSave => self.ipsets.is_some(),
            DumpFile::Ipvsadm => self.ipvs.is_some(),
            DumpFile::Sysctl => self.sysctls.is_some(),
            DumpFile::Ss => self.sockets.is_some(),
        };
        match self.unreadable.get(&file) {
            _ if read => FileState::Read,
            Some(why) => FileState::Unreadable(why),
            None => FileState::NotCollected,
        }
    }

    /// Where `element`, one of `list` as read from the JSON dump `file`,
    /// starts in it (line, column); `None` where that is not known (an
    /// element the dump was not read with).
    pub fn place_of<T>(&self, file: DumpFile, list: &[T], element: &T) -> Option<(usize, usize)> {
        let index = list.iter().position(|item| std::ptr::eq(item, element))?;
        self.places.get(&file)?.get(index).copied()
    }

    /// `file`, unless it was read: why the dump lacks it.
    pub fn lacking(&self, file: DumpFile) -> Option<Lacking<'_>> {
        (self.state(file) != FileState::Read).then(|| self.missing(file))
    }

    /// Why what a reader wanted of `file` is not in the dump: the file is
    /// unreadable (with its first problem), else it was not collected.
    pub fn missing(&self, file: DumpFile) -> Lacking<'_> {
        Lacking {
            file,
            unreadable: self.unreadable.get(&file).map(String::as_str),
        }
    }

    /// The dump files that were present and readable, in contract order.
    pub fn files_present(&self) -> Vec<DumpFile> {
        DumpFile::ALL
            .into_iter()
            .filter(|file| self.state(*file) == FileState::Read)
            .collect()
    }
}

/// The files of one namespace directory, and the problems met reading them.
struct DumpReader<'a> {
    dir: &'a Path,
    boundary: &'a Boundary,
    problems: Vec<Problem>,
    unreadable: BTreeMap<DumpFile, String>,
    places: BTreeMap<DumpFile, Vec<(usize, usize)>>,
}

impl DumpReader<'_> {
    /// Reads and parses one dump file. A missing file is simply not
    /// collected; an unreadable one, one over its size cap, one that is not
    /// a regular file inside the boundary, or not UTF-8, is a problem.
    fn load<T>(&mut self, file: DumpFile, parse: fn(&str) -> Parsed<T>) -> Option<T> {
        let path = self.dir.join(file.name());
        let text = match self.boundary.read_text(&path, file.limit()) {
            Ok(Some(text)) => text,
            Ok(None) => return None,
            Err(problem) => {
                self.unreadable.insert(file, problem.to_string());
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
            self.unreadable.insert(file, why);
        }
        self.problems.extend(problems);
        value
    }
}

impl DumpReader<'_> {
    /// [`DumpReader::load`] of one of iproute2's JSON arrays, keeping where
    /// each element starts.
    fn load_placed<T: serde::de::DeserializeOwned>(&mut self, file: DumpFile) -> Option<Vec<T>> {
        let placed = self.load(file, json::parse_placed::<T>)?;
        let (values, places) = placed.into_iter().unzip();
        self.places.insert(file, places);
        Some(values)
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
