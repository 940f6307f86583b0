//! One network namespace's dump: the plain output of the standard tools
//! (DESIGN §3), parsed into typed models.
//!
//! Every file is optional. `None` means "not collected", unreadable, or read
//! with problems; a conclusion that needs it must be reported as
//! insufficient information by whoever asks ([`NetnsDump::state`] says which).

pub mod addr;
pub mod bpf;
pub mod datapath;
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

use super::input::{Boundary, Limit, MIB, Text};
use super::problem::{ParseIssue, Parsed, Problem};

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
    /// The proxy neighbour entries (`ip neigh add proxy`): `ip neigh show`
    /// leaves them out.
    IpNeighProxy,
    BridgeFdb,
    IptablesSave,
    Ip6tablesSave,
    NftRuleset,
    IpsetSave,
    Ipvsadm,
    Sysctl,
    Ss,
    BpfNet,
}

impl DumpFile {
    /// Every dump file, in the contract's order.
    pub const ALL: [DumpFile; 17] = [
        DumpFile::IpLink,
        DumpFile::IpAddr,
        DumpFile::IpRoute,
        DumpFile::IpRoute6,
        DumpFile::IpRule,
        DumpFile::IpRule6,
        DumpFile::IpNeigh,
        DumpFile::IpNeighProxy,
        DumpFile::BridgeFdb,
        DumpFile::IptablesSave,
        DumpFile::Ip6tablesSave,
        DumpFile::NftRuleset,
        DumpFile::IpsetSave,
        DumpFile::Ipvsadm,
        DumpFile::Sysctl,
        DumpFile::Ss,
        DumpFile::BpfNet,
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
            DumpFile::IpNeighProxy => "ip-neigh-proxy.json",
            DumpFile::BridgeFdb => "bridge-fdb.json",
            DumpFile::IptablesSave => "iptables-save.txt",
            DumpFile::Ip6tablesSave => "ip6tables-save.txt",
            DumpFile::NftRuleset => "nft-ruleset.json",
            DumpFile::IpsetSave => "ipset-save.txt",
            DumpFile::Ipvsadm => "ipvsadm.txt",
            DumpFile::Sysctl => "sysctl.txt",
            DumpFile::Ss => "ss.txt",
            DumpFile::BpfNet => "bpf-net.json",
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
            DumpFile::IpNeighProxy => &["ip", "-j", "neigh", "show", "proxy"],
            DumpFile::BridgeFdb => &["bridge", "-j", "fdb", "show"],
            DumpFile::IptablesSave => &["iptables-save"],
            DumpFile::Ip6tablesSave => &["ip6tables-save"],
            DumpFile::NftRuleset => &["nft", "-j", "list", "ruleset"],
            DumpFile::IpsetSave => &["ipset", "save"],
            DumpFile::Ipvsadm => &["ipvsadm", "-Sn"],
            DumpFile::Sysctl => &["sysctl", "-a"],
            DumpFile::Ss => &["ss", "-H", "-tulnS"],
            DumpFile::BpfNet => &["bpftool", "-j", "net", "show"],
        }
    }

    /// The routes of `family` (`ip-route.json`, `ip-route6.json`).
    pub fn routes(family: crate::net::Family) -> DumpFile {
        match family {
            crate::net::Family::Ipv4 => DumpFile::IpRoute,
            crate::net::Family::Ipv6 => DumpFile::IpRoute6,
        }
    }

    /// The file of this name, if it is a dump file.
    pub fn from_name(name: &str) -> Option<DumpFile> {
        DumpFile::ALL.into_iter().find(|file| file.name() == name)
    }

    /// Whether the file is the tool's plain text, a line per thing (the
    /// others are JSON).
    pub fn is_text(self) -> bool {
        matches!(
            self,
            DumpFile::IptablesSave
                | DumpFile::IpsetSave
                | DumpFile::Ipvsadm
                | DumpFile::Sysctl
                | DumpFile::Ss
        )
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

/// How much of `iptables-save.txt` and `ip6tables-save.txt` a load reads.
/// A kube-proxy node's dump is tens of megabytes, of which a packet meets a
/// few chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rulesets {
    /// Every rule and every problem in them (`snapshot check`): a file with
    /// a problem anywhere is read with problems, as any other file.
    Whole,
    /// The structure (tables, chains, which chain each rule line is in);
    /// each chain's rules when first asked for (a diagnosis). A problem in
    /// the structure makes the file read with problems; a problem in a rule
    /// is its chain's ([`iptables::Chain::rules`]), met by whoever reads
    /// that chain.
    #[default]
    AsNeeded,
}

/// What became of one file of a dump: the one place every reader asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState<'a> {
    /// Read whole.
    Read,
    /// Not in the namespace's directory.
    NotCollected,
    /// There, but it could not be read or parsed at all: its first problem.
    Unreadable(&'a Problem),
    /// Read, but with problems (its first): an element, line or object that
    /// could not be read is missing from what was, and which conclusions it
    /// would change cannot be told, so none of the file is used (its value
    /// is `None`), as if it were unreadable.
    ReadWithProblems(&'a Problem),
}

impl FileState<'_> {
    /// There, but not to be used: unreadable, or read with problems.
    pub fn is_damaged(self) -> bool {
        matches!(
            self,
            FileState::Unreadable(_) | FileState::ReadWithProblems(_)
        )
    }
}

/// A file a dump lacks, said one way wherever it is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lacking<'a> {
    pub file: DumpFile,
    /// Never [`FileState::Read`].
    pub state: FileState<'a>,
}

impl Lacking<'_> {
    /// `FILE of WHOSE was not collected`, `FILE of WHOSE is in the snapshot
    /// but unreadable (WHY)`, `FILE of WHOSE was read with problems (WHY), ...`.
    pub fn of(&self, whose: impl fmt::Display) -> String {
        format!("{} of {whose} {}", self.file, self.what())
    }

    /// The first problem of a file that is there but not used.
    pub fn problem(&self) -> Option<&Problem> {
        match self.state {
            FileState::Unreadable(problem) | FileState::ReadWithProblems(problem) => Some(problem),
            FileState::Read | FileState::NotCollected => None,
        }
    }

    fn what(&self) -> String {
        match self.state {
            FileState::Unreadable(why) => format!("is in the snapshot but unreadable ({why})"),
            FileState::ReadWithProblems(why) => {
                format!("was read with problems ({why}), so what it holds is not known whole")
            }
            FileState::Read | FileState::NotCollected => "was not collected".to_owned(),
        }
    }
}

impl fmt::Display for Lacking<'_> {
    /// `FILE was not collected`, `FILE is in the snapshot but unreadable
    /// (WHY)`, `FILE was read with problems (WHY), ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.file, self.what())
    }
}

/// An element of a JSON dump and where it starts in the file (line, column).
type Placed<T> = (T, (usize, usize));

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
    /// The proxy entries (`ip neigh show proxy`): the addresses answered
    /// by proxy (IPv6's under `proxy_ndp`).
    pub proxy_neighbours: Option<Vec<neigh::Neighbour>>,
    pub fdb: Option<Vec<fdb::FdbEntry>>,
    pub iptables: Option<iptables::Ruleset>,
    /// The IPv6 rules (`ip6tables-save`): iptables keeps them apart.
    pub ip6tables: Option<iptables::Ruleset>,
    pub nftables: Option<nft::Ruleset>,
    pub ipsets: Option<ipset::IpSets>,
    pub ipvs: Option<ipvs::IpvsConfig>,
    pub sysctls: Option<sysctl::Sysctls>,
    pub sockets: Option<Vec<sockets::ListeningSocket>>,
    /// The BPF programs attached to the devices (`bpf-net.json`).
    pub programs: Option<Vec<bpf::Attachment>>,
    /// What a programmable datapath's own tools print about its state
    /// (`datapath/NAME.json`), by NAME, for the packs that read it.
    pub datapath: datapath::DatapathFiles,
    /// Dump files that are there but could not be read or parsed, by name,
    /// with the first problem (`FILE:LINE:COLUMN: what`): not the same as
    /// not collected, and said so.
    pub unreadable: BTreeMap<DumpFile, Problem>,
    /// Dump files read with problems, with the first: their values are
    /// `None` ([`FileState::ReadWithProblems`]).
    pub read_with_problems: BTreeMap<DumpFile, Problem>,
    /// Where each element of a JSON dump file starts in it (line, column),
    /// in the order of its list above: the place evidence points at.
    pub places: BTreeMap<DumpFile, Vec<(usize, usize)>>,
}

impl NetnsDump {
    /// Reads every dump file present in `dir`, whole. Problems in one file
    /// never stop the others from loading. Links out of `dir` are not followed.
    pub fn load(dir: &Path) -> (NetnsDump, Vec<Problem>) {
        NetnsDump::load_inside(dir, &Boundary::new(dir), Rulesets::Whole)
    }

    /// [`NetnsDump::load`] of a directory inside a snapshot: its files may
    /// link anywhere inside `boundary`, never out of it; its iptables rules
    /// read as `rulesets` says.
    pub fn load_inside(
        dir: &Path,
        boundary: &Boundary,
        rulesets: Rulesets,
    ) -> (NetnsDump, Vec<Problem>) {
        let iptables: fn(Text) -> Parsed<iptables::Ruleset> = match rulesets {
            Rulesets::Whole => |text| iptables::parse(&text),
            Rulesets::AsNeeded => iptables::parse_structure,
        };
        let mut files = DumpReader {
            dir,
            boundary,
            problems: Vec::new(),
            unreadable: Default::default(),
            read_with_problems: Default::default(),
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
            proxy_neighbours: files.load_placed(DumpFile::IpNeighProxy),
            fdb: files.load_placed(DumpFile::BridgeFdb),
            iptables: files.load_owned(DumpFile::IptablesSave, iptables),
            ip6tables: files.load_owned(DumpFile::Ip6tablesSave, iptables),
            nftables: files.load(DumpFile::NftRuleset, nft::parse),
            ipsets: files.load(DumpFile::IpsetSave, ipset::parse),
            ipvs: files.load(DumpFile::Ipvsadm, ipvs::parse),
            sysctls: files.load(DumpFile::Sysctl, sysctl::parse),
            sockets: files.load(DumpFile::Ss, sockets::parse),
            programs: files.load_placed_with(DumpFile::BpfNet, bpf::parse),
            datapath: datapath::DatapathFiles::load(dir, boundary, &mut files.problems),
            unreadable: Default::default(),
            read_with_problems: Default::default(),
            places: Default::default(),
        };
        dump.unreadable = files.unreadable;
        dump.read_with_problems = files.read_with_problems;
        dump.places = files.places;
        (dump, files.problems)
    }

    /// Whether `file` was read whole, not collected, is there but
    /// unreadable, or was read with problems.
    pub fn state(&self, file: DumpFile) -> FileState<'_> {
        let read = match file {
            DumpFile::IpLink => self.links.is_some(),
            DumpFile::IpAddr => self.addrs.is_some(),
            DumpFile::IpRoute => self.routes.is_some(),
            DumpFile::IpRoute6 => self.routes6.is_some(),
            DumpFile::IpRule => self.rules.is_some(),
            DumpFile::IpRule6 => self.rules6.is_some(),
            DumpFile::IpNeigh => self.neighbours.is_some(),
            DumpFile::IpNeighProxy => self.proxy_neighbours.is_some(),
            DumpFile::BridgeFdb => self.fdb.is_some(),
            DumpFile::IptablesSave => self.iptables.is_some(),
            DumpFile::Ip6tablesSave => self.ip6tables.is_some(),
            DumpFile::NftRuleset => self.nftables.is_some(),
            DumpFile::IpsetSave => self.ipsets.is_some(),
            DumpFile::Ipvsadm => self.ipvs.is_some(),
            DumpFile::Sysctl => self.sysctls.is_some(),
            DumpFile::Ss => self.sockets.is_some(),
            DumpFile::BpfNet => self.programs.is_some(),
        };
        if read {
            return FileState::Read;
        }
        match (
            self.unreadable.get(&file),
            self.read_with_problems.get(&file),
        ) {
            (Some(why), _) => FileState::Unreadable(why),
            (None, Some(why)) => FileState::ReadWithProblems(why),
            (None, None) => FileState::NotCollected,
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
    /// unreadable or was read with problems (with its first problem), else
    /// it was not collected (also when it was read, but lacks the part
    /// wanted).
    pub fn missing(&self, file: DumpFile) -> Lacking<'_> {
        let state = match self.state(file) {
            FileState::Read => FileState::NotCollected,
            state => state,
        };
        Lacking { file, state }
    }

    /// Whether no dump file was there at all (not even an unreadable one).
    pub fn is_empty(&self) -> bool {
        DumpFile::ALL
            .into_iter()
            .all(|file| self.state(file) == FileState::NotCollected)
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
    unreadable: BTreeMap<DumpFile, Problem>,
    read_with_problems: BTreeMap<DumpFile, Problem>,
    places: BTreeMap<DumpFile, Vec<(usize, usize)>>,
}

impl DumpReader<'_> {
    /// Reads and parses one dump file. A missing file is simply not
    /// collected; an unreadable one, one over its size cap, one that is not
    /// a regular file inside the boundary, or not UTF-8, is a problem. A
    /// file parsed with problems is read with problems, and not used: what
    /// could not be read (a route, a rule, a table's end) may be what a
    /// conclusion turns on.
    fn load<T>(&mut self, file: DumpFile, parse: fn(&str) -> Parsed<T>) -> Option<T> {
        self.load_owned(file, |text| parse(&text))
    }

    /// [`DumpReader::load`] with a parser that keeps the text (a large
    /// file's mapped, `input::Text`).
    fn load_owned<T>(
        &mut self,
        file: DumpFile,
        parse: impl FnOnce(Text) -> Parsed<T>,
    ) -> Option<T> {
        let path = self.dir.join(file.name());
        let text = match self.boundary.read_text_mapped(&path, file.limit()) {
            Ok(Some(text)) => text,
            Ok(None) => return None,
            Err(problem) => {
                self.unreadable.insert(file, problem.clone());
                self.problems.push(problem);
                return None;
            }
        };
        // Every tool ends its last line: a file that does not was cut
        // short, perhaps at a line boundary of its own that reads well.
        let cut_short = (file.is_text() && !text.is_empty() && !text.ends_with('\n'))
            .then(|| text.lines().count());
        let (value, mut issues) = parse(text);
        if let Some(lines) = cut_short {
            issues.push(ParseIssue::at_line(
                lines,
                "the last line has no newline: the file was cut short, and may lack lines after it",
            ));
        }
        let problems: Vec<Problem> = issues
            .into_iter()
            .map(|issue| Problem::from_issue(&path, issue))
            .collect();
        let first = problems.first().cloned();
        self.problems.extend(problems);
        match (value, first) {
            (value @ Some(_), None) => value,
            (Some(_), Some(first)) => {
                self.read_with_problems.insert(file, first);
                None
            }
            (None, first) => {
                let why = first.unwrap_or_else(|| Problem::in_file(&path, "not parsed"));
                self.unreadable.insert(file, why);
                None
            }
        }
    }
}

impl DumpReader<'_> {
    /// [`DumpReader::load`] of one of iproute2's JSON arrays, keeping where
    /// each element starts.
    fn load_placed<T: serde::de::DeserializeOwned>(&mut self, file: DumpFile) -> Option<Vec<T>> {
        self.load_placed_with(file, json::parse_placed::<T>)
    }

    /// [`DumpReader::load`] of a JSON file whose parser places each element.
    fn load_placed_with<T>(
        &mut self,
        file: DumpFile,
        parse: fn(&str) -> Parsed<Vec<Placed<T>>>,
    ) -> Option<Vec<T>> {
        let placed = self.load(file, parse)?;
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
    issues.extend(bpf::parse(text).1);
    issues.extend(datapath::parse(text).1);
    issues
}
