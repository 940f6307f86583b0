//! Reading a whole `iptables-save` dump, in two passes: the structure first
//! (tables, chain declarations, COMMIT), then the rule lines, which are most
//! of the work and independent of each other once the chains are known. A
//! large dump's rule lines are read in chunks on several threads; the rules
//! are then placed in line order, so that the result never depends on how
//! many threads read it.
//!
//! A rule may only name chains declared before it (as `iptables-restore`
//! requires): each rule line remembers how many chains its table had then.

use std::sync::Arc;

use super::rule::RuleReader;
use super::{Chain, Counters, DumpLine, Policy, Rule, Ruleset, Table, TableName};
use super::{Word, column, split_words};
use crate::snapshot::problem::{ParseIssue, Parsed};

/// Below this many rule lines one thread reads them all: starting threads
/// costs more than it saves.
const RULES_PER_THREAD: usize = 20_000;

/// At most this many threads read one dump.
const MAX_THREADS: usize = 8;

/// Reads `text` with at most `threads` threads.
pub(super) fn read(text: &str, threads: usize) -> Parsed<Ruleset> {
    let dump: Arc<str> = Arc::from(text);
    let mut structure = Structure::default();
    let mut words = Vec::new();
    let mut start = 0;
    // Lines as `str::lines` splits them, with where each starts.
    for (index, chunk) in dump.split_inclusive('\n').enumerate() {
        let line = chunk
            .strip_suffix('\n')
            .map_or(chunk, |line| line.strip_suffix('\r').unwrap_or(line));
        structure.line(index + 1, start, line, &mut words);
        start += chunk.len();
    }
    structure.finish();

    let threads = threads
        .clamp(1, MAX_THREADS)
        .min(structure.rules.len() / RULES_PER_THREAD)
        .max(1);
    let chunk_size = structure.rules.len().div_ceil(threads).max(1);
    let chunks: Vec<&[RuleLine]> = structure.rules.chunks(chunk_size).collect();
    let read = |chunk: &[RuleLine]| read_rules(&dump, &structure.tables, chunk);
    let outputs: Vec<ReadRules> = match chunks.split_first() {
        None => Vec::new(),
        Some((first, [])) => vec![read(first)],
        Some((first, rest)) => std::thread::scope(|scope| {
            let spawned: Vec<_> = rest
                .iter()
                .map(|&chunk| {
                    std::thread::Builder::new()
                        .spawn_scoped(scope, move || read(chunk))
                        .map_err(|_| chunk)
                })
                .collect();
            let mut outputs = vec![read(first)];
            for thread in spawned {
                outputs.push(match thread {
                    Ok(handle) => handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    // The thread could not start: read its chunk here.
                    Err(chunk) => read(chunk),
                });
            }
            outputs
        }),
    };

    let Structure {
        mut tables,
        order,
        mut issues,
        ..
    } = structure;
    for output in outputs {
        for (table, chain, mut rule) in output.rules {
            if let Some(rules) = tables
                .get_mut(table)
                .and_then(|t| t.chains.get_mut(chain))
                .map(|c| &mut c.rules)
            {
                rule.number = rules.len() + 1;
                rules.push(rule);
            }
        }
        issues.extend(output.issues);
    }
    issues.sort_by_key(|issue| issue.line);
    let mut tables: Vec<Option<Table>> = tables.into_iter().map(Some).collect();
    let tables: Vec<Table> = order
        .into_iter()
        .filter_map(|i| tables.get_mut(i).and_then(Option::take))
        .collect();
    if tables.is_empty() && !issues.is_empty() {
        return (None, issues);
    }
    (Some(Ruleset { tables }), issues)
}

/// A rule line found by the structure pass.
struct RuleLine {
    number: usize,
    /// Byte offsets of the line in the dump.
    start: usize,
    end: usize,
    /// The `*table` section it is in (in [`Structure::tables`]).
    table: usize,
    /// How many chains that table had declared before this line.
    visible: usize,
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
    tables: Vec<Table>,
    /// The sections that make the ruleset: a table given twice replaces the
    /// earlier section, as `iptables-restore` flushes a table before
    /// restoring it.
    order: Vec<usize>,
    open: Open,
    rules: Vec<RuleLine>,
    issues: Vec<ParseIssue>,
}

impl Default for Structure {
    fn default() -> Self {
        Structure {
            tables: Vec::new(),
            order: Vec::new(),
            open: Open::None,
            rules: Vec::new(),
            issues: Vec::new(),
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
    let (packets, bytes) = text.strip_prefix('[')?.strip_suffix(']')?.split_once(':')?;
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
        if let Some(at) = line.find('\0') {
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
            let visible = self.tables.get(table).map_or(0, |t| t.chains.len());
            self.rules.push(RuleLine {
                number,
                start,
                end: start + line.len(),
                table,
                visible,
            });
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
                self.tables.push(Table::new(name, number));
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
    table: &mut Table,
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
                table.chains.push(Chain {
                    name,
                    policy,
                    counters,
                    line: number,
                    rules: Vec::new(),
                });
            }
        }
    }
    for (offset, message) in issues {
        issue_at(all_issues, number, line, offset, message);
    }
}

/// The rules one thread read: (table, chain, rule) in line order, with the
/// rules' numbers still to be given, and the issues of their lines.
#[derive(Default)]
struct ReadRules {
    rules: Vec<(usize, usize, Rule)>,
    issues: Vec<ParseIssue>,
}

/// Reads rule lines `[packets:bytes] -A CHAIN ...`.
fn read_rules(dump: &Arc<str>, tables: &[Table], lines: &[RuleLine]) -> ReadRules {
    let mut out = ReadRules {
        rules: Vec::with_capacity(lines.len()),
        issues: Vec::new(),
    };
    let mut words = Vec::new();
    let mut reader = RuleReader::default();
    let mut rule_issues = Vec::new();
    // The chain the last rule went to: rules of a chain come together.
    let mut last_chain: Option<(usize, &str, usize)> = None;
    for found in lines {
        let (Some(line), Some(table)) = (dump.get(found.start..found.end), tables.get(found.table))
        else {
            continue;
        };
        let number = found.number;
        if let Err(unclosed) = split_words(line, &mut words) {
            issue_at(
                &mut out.issues,
                number,
                line,
                unclosed.start,
                unclosed.to_string(),
            );
            continue;
        }
        let Some(first) = words.first() else {
            continue;
        };
        let (counters, command) = match parse_counters(&first.text) {
            Some(counters) => (Some(counters), 1),
            None if first.text.starts_with('[') => {
                let message = format!("`{}` is not `[packets:bytes]`", first.text);
                issue_at(&mut out.issues, number, line, first.start, message);
                continue;
            }
            None => (None, 0),
        };
        let Some(word) = words.get(command) else {
            issue_at(
                &mut out.issues,
                number,
                line,
                line.len(),
                "counters without a rule",
            );
            continue;
        };
        if !matches!(&*word.text, "-A" | "--append") {
            let message = format!(
                "`{}`: iptables-save writes only `-A` rules; this line is skipped",
                word.text
            );
            issue_at(&mut out.issues, number, line, word.start, message);
            continue;
        }
        let Some(chain_word) = words.get(command + 1) else {
            issue_at(
                &mut out.issues,
                number,
                line,
                word.end,
                "`-A` without a chain",
            );
            continue;
        };
        let chain_name = line
            .get(chain_word.start..chain_word.end)
            .unwrap_or_default();
        let chain = match last_chain {
            Some((last_table, last, index)) if last_table == found.table && last == chain_name => {
                Some(index)
            }
            _ => table.by_name.get(&*chain_word.text).copied(),
        };
        let Some(chain) = chain.filter(|&index| index < found.visible) else {
            let message = format!(
                "chain `{}` was never declared in table `{}`; the rule is skipped",
                chain_word.text, table.name
            );
            issue_at(&mut out.issues, number, line, chain_word.start, message);
            continue;
        };
        last_chain = Some((found.table, chain_name, chain));
        rule_issues.clear();
        let source = DumpLine {
            text: line,
            start: found.start,
            dump,
        };
        let spec = reader.read(
            source,
            &words,
            command + 2,
            &table.by_name,
            found.visible,
            &mut rule_issues,
        );
        out.rules.push((
            found.table,
            chain,
            Rule {
                line: number,
                number: 0,
                text: source.slice(word.start..line.trim_end().len()),
                counters: counters.or(spec.counters),
                matches: spec.matches,
                target: spec.target,
            },
        ));
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
        let one = read(&dump, 1);
        let four = read(&dump, 4);
        assert_eq!(one.1.len(), 3, "{:?}", one.1);
        assert!(one == four);
        let rules: usize = one
            .0
            .iter()
            .flat_map(|r| &r.tables)
            .flat_map(|t| &t.chains)
            .map(|c| c.rules.len())
            .sum();
        assert!(
            rules >= 2 * RULES_PER_THREAD,
            "{rules} rules are read by one thread"
        );
    }

    #[test]
    fn rule_may_not_name_a_chain_declared_after_it() {
        let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j LATE\n-A LATE -j RETURN\n:LATE - [0:0]\n-A LATE -j RETURN\nCOMMIT\n";
        let (ruleset, issues) = read(text, 1);
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
            ruleset.tables[0].chain("LATE").map(|c| c.rules.len()),
            Some(1)
        );
    }
}
