//! Reading an `iptables-save` dump in two passes: the structure first
//! (tables, chain declarations, COMMIT, and which chain each rule line is
//! in), then each chain's rule lines, which are most of the work. A
//! diagnosis reads a chain's rules the first time it is evaluated
//! ([`super::Chain::rules`]): a kube-proxy node holds tens of thousands of
//! chains and a packet meets a few. Reading the dump whole ([`read`])
//! reads every chain, a large dump's on several threads; the result never
//! depends on how many threads read it, or on which chains were read first.
//!
//! A rule may only name chains declared before it (as `iptables-restore`
//! requires): each rule line remembers how many chains its table had then.

use std::sync::Arc;

use super::rule::RuleReader;
use super::words::split_words_upto;
use super::{
    Chain, ChainIndex, ChainRules, Counters, DumpLine, Policy, Rule, RuleLine, Ruleset, Table,
    TableName, TableText,
};
use super::{Word, column, split_words};
use crate::snapshot::input::{RELEASE_EVERY, Text};
use crate::snapshot::problem::{ParseIssue, Parsed};

/// Below this many rule lines one thread reads them all: starting threads
/// costs more than it saves.
const RULES_PER_THREAD: usize = 20_000;

/// At most this many threads read one dump.
const MAX_THREADS: usize = 8;

/// Reads `text` whole, every chain's rules with at most `threads` threads.
pub(super) fn read(text: Text, threads: usize) -> Parsed<Ruleset> {
    let (sections, order, mut issues) = structure(text);
    let chains: Vec<&Chain> = sections.iter().flat_map(|t| &t.chains).collect();
    read_chains(&chains, threads);
    // Every section's, also of a table given again: its lines are read as
    // `iptables-restore` would read them.
    issues.extend(
        chains
            .iter()
            .flat_map(|chain| chain.read().issues.iter().cloned()),
    );
    issues.sort_by_key(|issue| issue.line);
    assemble(sections, order, issues)
}

/// Reads the structure of `text`; each chain's rules are read when asked for.
pub(super) fn scan(text: Text) -> Parsed<Ruleset> {
    let (sections, order, issues) = structure(text);
    assemble(sections, order, issues)
}

/// The ruleset of the sections in `order`.
fn assemble(sections: Vec<Table>, order: Vec<usize>, issues: Vec<ParseIssue>) -> Parsed<Ruleset> {
    let mut sections: Vec<Option<Table>> = sections.into_iter().map(Some).collect();
    let tables: Vec<Table> = order
        .into_iter()
        .filter_map(|i| sections.get_mut(i).and_then(Option::take))
        .collect();
    if tables.is_empty() && !issues.is_empty() {
        return (None, issues);
    }
    (Some(Ruleset { tables }), issues)
}

/// The first pass over `text`: every `*table` section, the ones that make
/// the ruleset (in order), and the problems of the structure. What it has
/// gone through of a mapped text is released as it goes: the chains a flow
/// reads later bring back their few pages.
fn structure(text: Text) -> (Vec<Table>, Vec<usize>, Vec<ParseIssue>) {
    // A rule line's place is kept in 32 bits (`RuleLine`); dumps are read
    // within a far smaller cap (`DumpFile::limit`).
    if u32::try_from(text.len()).is_err() {
        let message = "a dump of 4 GiB or more, which this reader does not read";
        return (
            Vec::new(),
            Vec::new(),
            vec![ParseIssue::at_line(1, message)],
        );
    }
    let dump = Arc::new(text);
    let mut structure = Structure {
        // A NUL anywhere is looked for line by line; mostly there is none.
        nul: dump.contains('\0'),
        ..Structure::default()
    };
    let mut words = Vec::new();
    let (mut start, mut released) = (0, 0);
    // Lines as `str::lines` splits them, with where each starts.
    for (index, chunk) in dump.split_inclusive('\n').enumerate() {
        let line = chunk
            .strip_suffix('\n')
            .map_or(chunk, |line| line.strip_suffix('\r').unwrap_or(line));
        structure.line(index + 1, start, line, &mut words);
        start += chunk.len();
        if start - released >= RELEASE_EVERY {
            dump.release(released..start);
            released = start;
        }
    }
    dump.release(released..start);
    structure.finish();
    let Structure {
        tables,
        order,
        issues,
        ..
    } = structure;
    let tables = tables
        .into_iter()
        .map(|section| section.into_table(&dump))
        .collect();
    (tables, order, issues)
}

/// Reads every one of `chains`, on up to `threads` threads when they hold
/// many rules, each thread a run of chains of about equal rule lines.
fn read_chains(chains: &[&Chain], threads: usize) {
    let total: usize = chains.iter().map(|c| c.rule_lines()).sum();
    let threads = threads
        .clamp(1, MAX_THREADS)
        .min(total / RULES_PER_THREAD)
        .max(1);
    let share = total.div_ceil(threads).max(1);
    let mut runs: Vec<&[&Chain]> = Vec::with_capacity(threads);
    let (mut first, mut lines) = (0, 0);
    for (i, chain) in chains.iter().enumerate() {
        lines += chain.rule_lines();
        if lines >= share {
            runs.push(chains.get(first..=i).unwrap_or_default());
            (first, lines) = (i + 1, 0);
        }
    }
    runs.push(chains.get(first..).unwrap_or_default());
    let read = |run: &[&Chain]| {
        for chain in run {
            chain.read();
        }
    };
    let Some((first, rest)) = runs.split_first() else {
        return;
    };
    std::thread::scope(|scope| {
        let spawned: Vec<_> = rest
            .iter()
            .map(|&run| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || read(run))
                    .map_err(|_| run)
            })
            .collect();
        read(first);
        for thread in spawned {
            match thread {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                // The thread could not start: read its run here.
                Err(run) => read(run),
            }
        }
    });
}

/// A `*table` section as the first pass reads it.
struct Section {
    name: TableName,
    line: usize,
    committed: bool,
    /// Declared chains, in order.
    chains: Vec<Declared>,
    by_name: ChainIndex,
    /// Each rule line, with the chain it is in (in `chains`), in line order.
    lines: Vec<(usize, RuleLine)>,
    /// The chain of the last rule line kept.
    last_chain: Option<usize>,
}

/// A `:CHAIN POLICY [packets:bytes]` line.
struct Declared {
    name: Arc<str>,
    policy: Option<Policy>,
    counters: Option<Counters>,
    line: usize,
}

impl Section {
    fn new(name: TableName, line: usize) -> Section {
        Section {
            name,
            line,
            committed: false,
            chains: Vec::new(),
            by_name: ChainIndex::default(),
            lines: Vec::new(),
            last_chain: None,
        }
    }

    /// The table, its rule lines grouped by chain (each chain's in line order).
    fn into_table(self, dump: &Arc<Text>) -> Table {
        let Section {
            name,
            line,
            committed,
            chains,
            by_name,
            lines,
            last_chain: _,
        } = self;
        // Each chain's lines together, in line order: counted, then placed
        // where they are not already (iptables-save writes a chain's rules
        // together, the chains in declaration order).
        let mut ranges = vec![0..0; chains.len()];
        for &(chain, _) in &lines {
            if let Some(range) = ranges.get_mut(chain) {
                range.end += 1;
            }
        }
        let mut at = 0;
        for range in &mut ranges {
            *range = at..at + range.end;
            at = range.end;
        }
        let grouped = if lines.is_sorted_by_key(|&(chain, _)| chain) {
            lines.into_iter().map(|(_, line)| line).collect()
        } else {
            let mut next: Vec<usize> = ranges.iter().map(|range| range.start).collect();
            let mut grouped = vec![RuleLine::default(); lines.len()];
            for (chain, line) in lines {
                if let Some(next) = next.get_mut(chain)
                    && let Some(slot) = grouped.get_mut(*next)
                {
                    *slot = line;
                    *next += 1;
                }
            }
            grouped
        };
        let text = Arc::new(TableText {
            dump: Arc::clone(dump),
            table: name,
            by_name,
            lines: grouped,
        });
        let chains = chains
            .into_iter()
            .zip(ranges)
            .map(|(declared, lines)| Chain {
                name: declared.name,
                policy: declared.policy,
                counters: declared.counters,
                line: declared.line,
                lines,
                text: Arc::clone(&text),
                read: Default::default(),
            })
            .collect();
        Table {
            name,
            line,
            committed,
            chains,
            text,
        }
    }
}

/// The table lines go to.
enum Open {
    None,
    /// Position in [`Structure::tables`].
    Table(usize),
    /// A table this parser does not know: its lines are skipped until COMMIT.
    Unknown,
}

/// What the first pass finds.
struct Structure {
    /// Every `*table` section, in file order.
    tables: Vec<Section>,
    /// The sections that make the ruleset: a table given twice replaces the
    /// earlier section, as `iptables-restore` flushes a table before
    /// restoring it.
    order: Vec<usize>,
    open: Open,
    issues: Vec<ParseIssue>,
    /// Whether the dump holds a NUL byte at all.
    nul: bool,
}

impl Default for Structure {
    fn default() -> Self {
        Structure {
            tables: Vec::new(),
            order: Vec::new(),
            open: Open::None,
            issues: Vec::new(),
            nul: false,
        }
    }
}

/// Reads a decimal counter.
pub(super) fn parse_counter(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Reads `[packets:bytes]`.
fn parse_counters(text: &str) -> Option<Counters> {
    let inside = text.strip_prefix('[')?.strip_suffix(']')?;
    // A byte search: every rule line of a dump saved with counters has them.
    let colon = inside.bytes().position(|b| b == b':')?;
    let (packets, bytes) = (inside.get(..colon)?, inside.get(colon + 1..)?);
    Some(Counters {
        packets: parse_counter(packets)?,
        bytes: parse_counter(bytes)?,
    })
}

fn issue_at(
    issues: &mut Vec<ParseIssue>,
    number: usize,
    line: &str,
    offset: usize,
    message: impl Into<String>,
) {
    issues.push(ParseIssue::at(number, column(line, offset), message));
}

impl Structure {
    /// Reads line `number`, which starts at byte `start` of the dump.
    fn line<'a>(&mut self, number: usize, start: usize, line: &'a str, words: &mut Vec<Word<'a>>) {
        // iptables-save writes text: a NUL is damage, which could have
        // changed a match or a comment into another that reads as well.
        if self.nul
            && let Some(at) = line.find('\0')
        {
            let message = "a NUL byte, which iptables-save never writes: the line is damaged";
            issue_at(&mut self.issues, number, line, at, message);
            return;
        }
        let content = line.trim_start();
        let offset = line.len() - content.len();
        if content.is_empty() || content.starts_with('#') {
            return;
        }
        if let Some(name) = content.strip_prefix('*') {
            self.table_header(number, line, offset, name.trim_end());
            return;
        }
        if content.trim_end() == "COMMIT" {
            self.commit(number, line, offset);
            return;
        }
        let kind = match content.as_bytes().first() {
            Some(b':') => "chain",
            Some(b'[' | b'-') => "rule",
            _ => {
                let message = "expected `*table`, `:CHAIN POLICY`, a rule or `COMMIT`";
                issue_at(&mut self.issues, number, line, offset, message);
                return;
            }
        };
        let table = match self.open {
            Open::Table(table) => table,
            Open::Unknown => return,
            Open::None => {
                let message = format!("{kind} outside of a table (no `*table` line before it)");
                issue_at(&mut self.issues, number, line, offset, message);
                return;
            }
        };
        if kind == "rule" {
            if let Some(table) = self.tables.get_mut(table) {
                rule_line(table, number, start, line, words, &mut self.issues);
            }
            return;
        }
        if let Err(unclosed) = split_words(line, words) {
            issue_at(
                &mut self.issues,
                number,
                line,
                unclosed.start,
                unclosed.to_string(),
            );
            return;
        }
        if let Some(table) = self.tables.get_mut(table) {
            declare_chain(table, number, line, words, &mut self.issues);
        }
    }

    fn table_header(&mut self, number: usize, line: &str, offset: usize, name: &str) {
        if let Open::Table(open) = self.open {
            if let Some(table) = self.tables.get(open) {
                let message = format!(
                    "table `{}` (line {}) has no COMMIT before this table starts",
                    table.name, table.line
                );
                issue_at(&mut self.issues, number, line, offset, message);
            }
            self.close(open);
        }
        self.open = match TableName::parse(name) {
            Some(name) => {
                self.tables.push(Section::new(name, number));
                Open::Table(self.tables.len() - 1)
            }
            None => {
                let message = format!(
                    "unknown table `{name}` (expected raw, mangle, nat, filter or security); its lines are skipped"
                );
                issue_at(&mut self.issues, number, line, offset + 1, message);
                Open::Unknown
            }
        };
    }

    fn commit(&mut self, number: usize, line: &str, offset: usize) {
        match std::mem::replace(&mut self.open, Open::None) {
            Open::Table(table) => {
                if let Some(table) = self.tables.get_mut(table) {
                    table.committed = true;
                }
                self.close(table);
            }
            Open::Unknown => {}
            Open::None => issue_at(
                &mut self.issues,
                number,
                line,
                offset,
                "COMMIT outside of a table",
            ),
        }
    }

    /// Ends section `closed`; a table given again replaces the earlier one.
    fn close(&mut self, closed: usize) {
        self.open = Open::None;
        let Some(table) = self.tables.get(closed) else {
            return;
        };
        let earlier = self
            .order
            .iter_mut()
            .find(|i| self.tables.get(**i).is_some_and(|t| t.name == table.name));
        match earlier {
            Some(earlier) => {
                let first = self.tables.get(*earlier).map_or(0, |t| t.line);
                self.issues.push(ParseIssue::at_line(
                    table.line,
                    format!(
                        "table `{}` appears again (first at line {first}); this one replaces it",
                        table.name
                    ),
                ));
                *earlier = closed;
            }
            None => self.order.push(closed),
        }
    }

    fn finish(&mut self) {
        if let Open::Table(open) = self.open {
            if let Some(table) = self.tables.get(open) {
                self.issues.push(ParseIssue::at_line(
                    table.line,
                    format!(
                        "table `{}` has no COMMIT: the file ends first, so it may be missing rules",
                        table.name
                    ),
                ));
            }
            self.close(open);
        }
    }
}

/// `:NAME POLICY [packets:bytes]`
fn declare_chain(
    table: &mut Section,
    number: usize,
    line: &str,
    words: &[Word<'_>],
    all_issues: &mut Vec<ParseIssue>,
) {
    let mut issues = Vec::new();
    let first = words.first().map_or(0, |w| w.start);
    let name = words
        .first()
        .and_then(|w| w.text.get(1..))
        .unwrap_or_default();
    if name.is_empty() {
        issues.push((first, "chain declaration without a name".to_owned()));
    }
    let builtin = table.name.builtin_chains().contains(&name);
    let policy = match words.get(1).map(|w| (&*w.text, w.start)) {
        Some(("ACCEPT", _)) => Some(Policy::Accept),
        Some(("DROP", _)) => Some(Policy::Drop),
        Some(("-", at)) => {
            if builtin {
                issues.push((
                    at,
                    format!("built-in chain `{name}` needs a policy, ACCEPT or DROP"),
                ));
            }
            None
        }
        Some((other, at)) => {
            issues.push((
                at,
                format!(
                    "`{other}` is not a policy (ACCEPT, DROP, or `-` for a user-defined chain)"
                ),
            ));
            None
        }
        None => {
            issues.push((
                line.len(),
                "chain declaration without a policy (`-` for a user-defined chain)".to_owned(),
            ));
            None
        }
    };
    let policy = match (builtin, policy, words.get(1)) {
        (false, Some(_), Some(word)) => {
            issues.push((
                word.start,
                format!("user-defined chain `{name}` cannot have a policy"),
            ));
            None
        }
        (_, policy, _) => policy,
    };
    let counters = match words.get(2) {
        None => None,
        Some(word) => {
            let counters = parse_counters(&word.text);
            if counters.is_none() {
                issues.push((
                    word.start,
                    format!("`{}` is not `[packets:bytes]`", word.text),
                ));
            }
            counters
        }
    };
    if let Some(extra) = words.get(3) {
        issues.push((
            extra.start,
            format!("unexpected `{}` after the chain's counters", extra.text),
        ));
    }
    if !name.is_empty() {
        match table.by_name.get(name) {
            Some(&earlier) => {
                let first_line = table.chains.get(earlier).map_or(0, |c| c.line);
                issues.push((
                    first,
                    format!("chain `{name}` is declared twice (first at line {first_line})"),
                ));
            }
            None => {
                let name: Arc<str> = Arc::from(name);
                table.by_name.insert(Arc::clone(&name), table.chains.len());
                table.chains.push(Declared {
                    name,
                    policy,
                    counters,
                    line: number,
                });
            }
        }
    }
    for (offset, message) in issues {
        issue_at(all_issues, number, line, offset, message);
    }
}

/// What a rule line starts with: `[packets:bytes]` or not, then `-A
/// CHAIN`; `Err` with the offset in the line and what is wrong.
struct Head {
    counters: Option<Counters>,
    /// The word `-A` (in the line's words).
    command: usize,
}

impl Head {
    /// The chain word is `words[command + 1]`, which is there.
    fn read(line: &str, words: &[Word<'_>]) -> Result<Head, (usize, String)> {
        let Some(first) = words.first() else {
            return Err((line.len(), "counters without a rule".to_owned()));
        };
        let (counters, command) = match parse_counters(&first.text) {
            Some(counters) => (Some(counters), 1),
            None if first.text.starts_with('[') => {
                return Err((
                    first.start,
                    format!("`{}` is not `[packets:bytes]`", first.text),
                ));
            }
            None => (None, 0),
        };
        let Some(word) = words.get(command) else {
            return Err((line.len(), "counters without a rule".to_owned()));
        };
        if !matches!(&*word.text, "-A" | "--append") {
            return Err((
                word.start,
                format!(
                    "`{}`: iptables-save writes only `-A` rules; this line is skipped",
                    word.text
                ),
            ));
        }
        if words.get(command + 1).is_none() {
            return Err((word.end, "`-A` without a chain".to_owned()));
        }
        Ok(Head { counters, command })
    }
}

/// The first pass over a rule line `[packets:bytes] -A CHAIN ...`: it is
/// kept in its chain's lines, or is a problem when its chain cannot be told
/// (then no chain holds it, and the dump is read with problems).
fn rule_line<'a>(
    table: &mut Section,
    number: usize,
    start: usize,
    line: &'a str,
    words: &mut Vec<Word<'a>>,
    issues: &mut Vec<ParseIssue>,
) {
    // The counters, `-A` and the chain: the words after them are the
    // chain's to read. A quote left open further on is found then.
    let found = split_words_upto(line, 3, words)
        .map_err(|unclosed| (unclosed.start, unclosed.to_string()))
        .and_then(|()| match words.is_empty() {
            true => Ok(None),
            false => Head::read(line, words).map(Some),
        })
        .and_then(|head| {
            let Some(chain_word) = head.and_then(|head| words.get(head.command + 1)) else {
                return Ok(None);
            };
            // A chain declared after this line is not in `by_name` yet.
            // iptables-save writes a chain's rules together, the chains in
            // the order they are declared: the last line's chain is this
            // one's, or else mostly the next declared, without hashing its
            // name (a kube-proxy dump changes chain every two or three
            // lines, among tens of thousands).
            let named =
                |c: &usize| (table.chains.get(*c)).is_some_and(|d| *d.name == *chain_word.text);
            let last = table.last_chain.filter(named);
            let next = || Some(table.last_chain.map_or(0, |c| c + 1)).filter(named);
            match last
                .or_else(next)
                .or_else(|| table.by_name.get(&*chain_word.text).copied())
            {
                Some(chain) => Ok(Some(chain)),
                None => Err((
                    chain_word.start,
                    format!(
                        "chain `{}` was never declared in table `{}`; the rule is skipped",
                        chain_word.text, table.name
                    ),
                )),
            }
        });
    let chain = match found {
        Ok(Some(chain)) => chain,
        Ok(None) => return,
        Err((at, message)) => {
            // A quote left open anywhere in the line is what reading it
            // whole finds first.
            match split_words(line, words) {
                Err(unclosed) => {
                    issue_at(issues, number, line, unclosed.start, unclosed.to_string())
                }
                Ok(()) => issue_at(issues, number, line, at, message),
            }
            return;
        }
    };
    table.last_chain = Some(chain);
    table.lines.push((
        chain,
        RuleLine::new(number, start, start + line.len(), table.chains.len()),
    ));
}

/// Reads one chain's rule `lines`, those the first pass put in it.
pub(super) fn read_chain(text: &TableText, lines: &[RuleLine]) -> ChainRules {
    let mut out = ChainRules {
        rules: Vec::with_capacity(lines.len()),
        issues: Vec::new(),
    };
    let mut words = Vec::new();
    let mut reader = RuleReader::default();
    let mut rule_issues = Vec::new();
    for found in lines {
        let Some(line) = text.dump.get(found.span()) else {
            continue;
        };
        let number = found.number();
        if let Err(unclosed) = split_words(line, &mut words) {
            let message = unclosed.to_string();
            issue_at(&mut out.issues, number, line, unclosed.start, message);
            continue;
        }
        // The first pass read the same head, without a problem.
        let Ok(head) = Head::read(line, &words) else {
            continue;
        };
        let Some(word) = words.get(head.command) else {
            continue;
        };
        rule_issues.clear();
        let source = DumpLine {
            text: line,
            start: found.span().start,
            dump: &text.dump,
        };
        let spec = reader.read(
            source,
            &words,
            head.command + 2,
            &text.by_name,
            found.visible(),
            &mut rule_issues,
        );
        out.rules.push(Rule {
            line: number,
            number: out.rules.len() + 1,
            text: source.slice(word.start..line.trim_end().len()),
            counters: head.counters.or(spec.counters),
            matches: spec.matches,
            target: spec.target,
        });
        for issue in &rule_issues {
            let at = words.get(issue.word).map_or(line.len(), |w| w.start);
            issue_at(&mut out.issues, number, line, at, issue.message.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::netns::iptables::generate;

    #[test]
    fn threads_read_a_large_dump_exactly_as_one_does() {
        let mut lines: Vec<String> = generate::kube_proxy_dump(3_000, 4)
            .lines()
            .map(str::to_owned)
            .collect();
        // Problems in rule lines spread over the chunks.
        for at in [lines.len() / 10, lines.len() / 2, lines.len() * 9 / 10] {
            if let Some(line) = lines[at..].iter_mut().find(|l| l.starts_with("-A ")) {
                line.push_str(" bogus");
            }
        }
        let dump = lines.join("\n");
        let one = read(dump.clone().into(), 1);
        let four = read(dump.clone().into(), 4);
        assert_eq!(one.1.len(), 3, "{:?}", one.1);
        assert!(one == four);
        // Read as a diagnosis reads it, a chain at a time, it is the same.
        assert!(one.0 == scan(dump.into()).0);
        let rules: usize = one
            .0
            .iter()
            .flat_map(|r| &r.tables)
            .flat_map(|t| &t.chains)
            .map(|c| c.rules_read().len())
            .sum();
        assert!(
            rules >= 2 * RULES_PER_THREAD,
            "{rules} rules are read by one thread"
        );
    }

    #[test]
    fn a_mapped_dump_released_as_its_structure_is_read_is_the_dump_read() {
        let dump = generate::kube_proxy_dump(3_000, 4);
        assert!(dump.len() > RELEASE_EVERY, "{} bytes", dump.len());
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join(crate::snapshot::netns::DumpFile::IptablesSave.name());
        std::fs::write(&path, &dump).unwrap();
        let limit = crate::snapshot::input::CLUSTER_FILE;
        let mapped = crate::snapshot::input::read_text_mapped(&path, limit)
            .unwrap()
            .unwrap();
        // Every chain read again from the pages released.
        assert!(scan(mapped).0 == read(dump.into(), 1).0);
    }

    /// A dump with a problem in the structure and one in each of two
    /// chains' rules, as `structure` and `read` see it.
    const DAMAGED: &str = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n-A INPUT -j A\n-A A -p tcp --dport nope -j DROP\n-A A -j RETURN\n-A FORWARD -j B\n-A B -m comment --comment \"open -j ACCEPT\n-A B -j ACCEPT\n-A GONE -j DROP\nCOMMIT\n";

    #[test]
    fn reading_the_structure_leaves_a_rules_problem_to_its_chain() {
        let (ruleset, issues) = scan(DAMAGED.to_owned().into());
        // Only the rule whose chain cannot be told.
        assert_eq!(
            issues,
            [ParseIssue::at(
                12,
                4,
                "chain `GONE` was never declared in table `filter`; the rule is skipped"
            )]
        );
        let ruleset = ruleset.unwrap();
        let table = ruleset.table(TableName::Filter).unwrap();
        let rules = |name: &str| table.chain(name).unwrap().rules().map(<[Rule]>::len);
        assert_eq!(rules("INPUT").ok(), Some(1));
        assert_eq!(rules("FORWARD").ok(), Some(1));
        let unread = table.chain("A").unwrap().rules().unwrap_err();
        assert_eq!((unread.table, unread.chain), (TableName::Filter, "A"));
        assert_eq!(
            unread.issue,
            &ParseIssue::at(7, 21, "`nope` is not a port number")
        );
        assert_eq!(
            unread.of(std::path::Path::new(
                crate::snapshot::netns::DumpFile::IptablesSave.name()
            )),
            "filter A cannot be read whole (iptables-save.txt:7:21: `nope` is not a port number), so what it does is not known"
        );
        let unread = table.chain("B").unwrap().rules().unwrap_err();
        assert_eq!(
            unread.issue,
            &ParseIssue::at(10, 27, "quoted string is never closed")
        );
        // What could be read of a chain that cannot be read whole.
        assert_eq!(table.chain("A").unwrap().rules_read().len(), 2);
    }

    #[test]
    fn reading_whole_finds_what_the_structure_and_every_chain_find() {
        let (whole, issues) = read(DAMAGED.to_owned().into(), 1);
        assert_eq!(
            issues.iter().map(|i| i.line).collect::<Vec<_>>(),
            [7, 10, 12],
            "{issues:?}"
        );
        // The same ruleset, its chains read as asked for.
        assert!(whole == scan(DAMAGED.to_owned().into()).0);
    }

    #[test]
    fn a_line_whose_quote_never_closes_is_that_problem_wherever_its_chain_is() {
        // As reading the line whole finds first, though its chain is unknown too.
        let text = "*filter\n:INPUT ACCEPT [0:0]\n-A NOPE -m comment --comment \"x\nCOMMIT\n";
        let unclosed = [ParseIssue::at(3, 30, "quoted string is never closed")];
        assert_eq!(scan(text.to_owned().into()).1, unclosed);
        assert_eq!(read(text.to_owned().into(), 1).1, unclosed);
    }

    #[test]
    fn rule_may_not_name_a_chain_declared_after_it() {
        let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j LATE\n-A LATE -j RETURN\n:LATE - [0:0]\n-A LATE -j RETURN\nCOMMIT\n";
        let (ruleset, issues) = read(text.to_owned().into(), 1);
        assert_eq!(
            issues,
            [
                ParseIssue::at(
                    3,
                    13,
                    "`LATE` is neither a chain declared before this rule nor a known target"
                ),
                ParseIssue::at(
                    4,
                    4,
                    "chain `LATE` was never declared in table `filter`; the rule is skipped"
                ),
            ]
        );
        let ruleset = ruleset.unwrap();
        assert_eq!(
            ruleset.tables[0]
                .chain("LATE")
                .map(|c| c.rules_read().len()),
            Some(1)
        );
    }
}
