//! Reading the part of a rule line after `-A CHAIN`: which words belong to
//! which match module or target, and with what negation.
//!
//! Options are routed the way iptables routes them: an option belongs to the
//! last `-m` module that has it, else to an earlier one, else to the module
//! `-p` implies (`-p tcp --dport 80`), else the module or target it follows
//! is one this parser does not know and is kept as `Unsupported` with its
//! raw text, together with every word up to the next `-m`/`-j`/built-in
//! option. `!` negates the option after it (`! --dport 80`) or, in the old
//! form, the value after it (`--dport ! 80`).

use std::sync::Arc;

use super::matches::{Match, PendingMatch};
use super::read::parse_counter;
use super::targets::{ChainRef, PendingTarget, Target};
use super::values::{BadValue, Interface, Invertible, ip_net, protocol};
use super::words::Word;
use super::{ChainIndex, Counters, DumpLine, DumpText};
use crate::net::Protocol;

/// A problem with one word of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WordIssue {
    pub word: usize,
    pub message: String,
}

impl WordIssue {
    pub fn new(word: usize, message: impl Into<String>) -> Self {
        WordIssue {
            word,
            message: message.into(),
        }
    }
}

/// A match module or target whose options are read one at a time.
pub(super) trait Extension: Default {
    type Output;

    /// Reads option `name` and its arguments from `args`, or returns `None`
    /// without reading anything when the extension has no such option.
    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>>;

    /// The finished extension; `word` names it in the rule (`-m tcp`), for
    /// problems that belong to no single option.
    fn finish(self, word: usize) -> Result<Self::Output, WordIssue>;
}

/// Large extension states are boxed, so that the parts of every rule stay
/// small while they are read.
impl<T: Extension> Extension for Box<T> {
    type Output = T::Output;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        (**self).option(name, args)
    }

    fn finish(self, word: usize) -> Result<Self::Output, WordIssue> {
        (*self).finish(word)
    }
}

/// Declares the extensions one enum dispatches to, by the name `-m`/`-j` use.
macro_rules! extensions {
    ($(#[$doc:meta])* $pending:ident -> $output:ty { $($name:literal => $variant:ident($state:ty),)* }) => {
        $(#[$doc])*
        pub(super) enum $pending {
            $($variant($state),)*
        }

        impl $pending {
            pub(super) fn open(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(Self::$variant(<$state>::default())),)*
                    _ => None,
                }
            }

            pub(super) fn option(&mut self, name: &str, args: &mut $crate::snapshot::netns::iptables::rule::OptionArgs<'_, '_>)
                -> Option<Result<(), $crate::snapshot::netns::iptables::rule::WordIssue>> {
                use $crate::snapshot::netns::iptables::rule::Extension;
                match self {
                    $(Self::$variant(state) => state.option(name, args),)*
                }
            }

            pub(super) fn finish(self, word: usize) -> Result<$output, $crate::snapshot::netns::iptables::rule::WordIssue> {
                use $crate::snapshot::netns::iptables::rule::Extension;
                match self {
                    $(Self::$variant(state) => state.finish(word),)*
                }
            }
        }
    };
}
pub(super) use extensions;

/// The arguments of one option, taken by the extension that owns it.
pub(super) struct OptionArgs<'r, 'a> {
    line: DumpLine<'r>,
    words: &'r [Word<'a>],
    option: usize,
    next: usize,
    invert: bool,
}

impl<'r> OptionArgs<'r, '_> {
    /// The option's name as written (`--dport`).
    pub fn name(&self) -> &'r str {
        &self.words[self.option].text
    }

    /// Whether `!` negates this option.
    pub fn invert(&self) -> bool {
        self.invert
    }

    /// Fails if the option is negated: it cannot be.
    pub fn plain(&self) -> Result<(), WordIssue> {
        if self.invert {
            return Err(WordIssue::new(
                self.option,
                format!("`{}` cannot be negated", self.name()),
            ));
        }
        Ok(())
    }

    /// Reads the next argument with `parse`.
    pub fn arg<T>(
        &mut self,
        parse: impl FnOnce(&str) -> Result<T, BadValue>,
    ) -> Result<T, WordIssue> {
        let Some(word) = self.words.get(self.next) else {
            return Err(WordIssue::new(
                self.option,
                format!("`{}` needs a value", self.name()),
            ));
        };
        let index = self.next;
        self.next += 1;
        parse(&word.text).map_err(|BadValue(message)| WordIssue::new(index, message))
    }

    /// Reads the next argument, which cannot be negated, as text of the dump.
    pub fn dump_text(&mut self) -> Result<DumpText, WordIssue> {
        self.plain()?;
        let Some(word) = self.words.get(self.next) else {
            return Err(WordIssue::new(
                self.option,
                format!("`{}` needs a value", self.name()),
            ));
        };
        self.next += 1;
        Ok(match word.span(self.line.text) {
            Some(span) => self.line.slice(span),
            None => DumpText::from(&*word.text),
        })
    }

    /// Reads the next argument of an option that cannot be negated.
    pub fn value<T>(
        &mut self,
        parse: impl FnOnce(&str) -> Result<T, BadValue>,
    ) -> Result<T, WordIssue> {
        self.plain()?;
        self.arg(parse)
    }

    /// Reads the next argument of an option that `!` may negate.
    pub fn invertible<T>(
        &mut self,
        parse: impl FnOnce(&str) -> Result<T, BadValue>,
    ) -> Result<Invertible<T>, WordIssue> {
        Ok(Invertible {
            invert: self.invert,
            value: self.arg(parse)?,
        })
    }

    /// Stores what `read` reads into `slot`, which must still be empty: an
    /// option given twice is an error in iptables too.
    pub fn once<T>(
        &mut self,
        slot: &mut Option<T>,
        read: impl FnOnce(&mut Self) -> Result<T, WordIssue>,
    ) -> Result<(), WordIssue> {
        if slot.is_some() {
            return Err(WordIssue::new(
                self.option,
                format!("`{}` is given twice", self.name()),
            ));
        }
        *slot = Some(read(self)?);
        Ok(())
    }
}

/// Reads any argument as text.
pub(super) fn text(text: &str) -> Result<String, BadValue> {
    Ok(text.to_owned())
}

/// What a rule says after `-A CHAIN`.
#[derive(Debug, Default)]
pub(super) struct RuleSpec {
    pub matches: Vec<Match>,
    pub target: Option<Target>,
    pub counters: Option<Counters>,
}

/// The options `iptables` itself reads, before any module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Builtin {
    Source,
    Destination,
    InInterface,
    OutInterface,
    Protocol,
    Fragment,
}

fn builtin(word: &str) -> Option<Builtin> {
    Some(match word {
        "-s" | "--source" | "--src" => Builtin::Source,
        "-d" | "--destination" | "--dst" => Builtin::Destination,
        "-i" | "--in-interface" => Builtin::InInterface,
        "-o" | "--out-interface" => Builtin::OutInterface,
        "-p" | "--protocol" => Builtin::Protocol,
        "-f" | "--fragment" => Builtin::Fragment,
        _ => return None,
    })
}

/// Words that always start something new: an unknown option's arguments end there.
fn starts_part(word: &str) -> bool {
    matches!(
        word,
        "-m" | "--match" | "-j" | "--jump" | "-g" | "--goto" | "-c" | "--set-counters"
    ) || builtin(word).is_some()
}

/// The module `-p` loads for options no other module has.
fn protocol_module(protocol: Protocol) -> Option<&'static str> {
    match protocol {
        Protocol::Tcp => Some("tcp"),
        Protocol::Udp => Some("udp"),
        Protocol::Sctp => Some("sctp"),
        Protocol::Icmp => Some("icmp"),
        Protocol::Icmpv6 => Some("icmp6"),
        _ => None,
    }
}

/// How a part of the rule is named: by one of its words, or implicitly by `-p`.
#[derive(Debug, Clone, Copy)]
enum Name {
    Word(usize),
    Implied(&'static str),
}

pub(super) enum State {
    Match(PendingMatch),
    Target(PendingTarget),
    Built(Match),
    Verdict(Target),
    /// Not understood (unknown module, target or option, or a bad value):
    /// kept as `Unsupported` with the words it owns.
    Unsupported,
}

/// One `-m` module, the target, one built-in option, or words nobody
/// understands, with the word that names it.
struct Part {
    state: State,
    name: Name,
    /// Where problems of the part as a whole are reported.
    word: usize,
    is_target: bool,
    /// Whether a problem was already reported for this part.
    reported: bool,
}

impl Part {
    fn new(state: State, name: Name, word: usize, is_target: bool) -> Part {
        Part {
            state,
            name,
            word,
            is_target,
            reported: false,
        }
    }
}

/// Reads rule specs, reusing its scratch space from one rule to the next.
#[derive(Default)]
pub(super) struct RuleReader {
    parts: Vec<Part>,
    /// Which part each word belongs to.
    owner: Vec<Option<usize>>,
}

impl RuleReader {
    /// Reads `words[first..]` of `line`. `-j`/`-g` may name the first
    /// `visible` of the table's `chains`: those declared before the rule.
    /// Problems go to `issues`.
    pub fn read(
        &mut self,
        line: DumpLine<'_>,
        words: &[Word<'_>],
        first: usize,
        chains: &ChainIndex,
        visible: usize,
        issues: &mut Vec<WordIssue>,
    ) -> RuleSpec {
        self.parts.clear();
        self.owner.clear();
        self.owner.resize(words.len(), None);
        let mut walk = Walk {
            line,
            words,
            chains,
            visible,
            issues,
            parts: &mut self.parts,
            owner: &mut self.owner,
            current: None,
            protocol: None,
            counters: None,
        };
        let mut i = first;
        while i < words.len() {
            i = walk.step(i);
        }
        walk.finish()
    }
}

/// The state of reading one rule.
struct Walk<'r, 'a> {
    line: DumpLine<'r>,
    words: &'r [Word<'a>],
    chains: &'r ChainIndex,
    /// How many of `chains` were declared before the rule.
    visible: usize,
    issues: &'r mut Vec<WordIssue>,
    parts: &'r mut Vec<Part>,
    owner: &'r mut Vec<Option<usize>>,
    /// The part options go to first: the last `-m` module or the target.
    current: Option<usize>,
    /// The protocol `-p` names, whose module options may imply.
    protocol: Option<Protocol>,
    counters: Option<Counters>,
}

impl<'r, 'a> Walk<'r, 'a> {
    fn word(&self, index: usize) -> Option<&'r str> {
        self.words.get(index).map(|w| &*w.text)
    }

    fn issue(&mut self, word: usize, message: impl Into<String>) {
        self.issues.push(WordIssue::new(word, message));
    }

    /// Reads what starts at word `i` and returns where the next thing starts.
    fn step(&mut self, i: usize) -> usize {
        let negated = self.word(i) == Some("!");
        let at = if negated { i + 1 } else { i };
        let Some(word) = self.word(at) else {
            self.issue(i, "`!` at the end of the rule negates nothing");
            return self.words.len();
        };
        // Words after something not understood belong to it, up to the next part.
        if let Some(part) = self.current
            && matches!(self.parts[part].state, State::Unsupported)
            && !starts_part(word)
        {
            return self.swallow(i, part);
        }
        match word {
            "-m" | "--match" | "-j" | "--jump" | "-g" | "--goto" => {
                if negated {
                    self.issue(i, format!("`!` cannot negate `{word}`"));
                }
                let Some(name) = self.word(at + 1) else {
                    self.issue(at, format!("`{word}` needs a name"));
                    return self.words.len();
                };
                let part = match word {
                    "-m" | "--match" => {
                        let state =
                            PendingMatch::open(name).map_or(State::Unsupported, State::Match);
                        self.push(Part::new(state, Name::Word(at + 1), at, false))
                    }
                    _ => self.open_target(at, name, matches!(word, "-g" | "--goto")),
                };
                self.own(i..at + 2, part);
                self.current = Some(part);
                at + 2
            }
            "-c" | "--set-counters" => {
                let packets = self.word(at + 1).and_then(parse_counter);
                let bytes = self.word(at + 2).and_then(parse_counter);
                match (packets, bytes) {
                    (Some(packets), Some(bytes)) => {
                        self.counters = Some(Counters { packets, bytes })
                    }
                    _ => self.issue(at, format!("`{word}` needs two numbers")),
                }
                (at + 3).min(self.words.len())
            }
            _ => match builtin(word) {
                Some(kind) => self.builtin(i, at, negated, kind),
                None if word.starts_with('-') => self.route(i, at, negated),
                None => {
                    self.issue(at, format!("unexpected word `{word}`"));
                    let mut part = Part::new(State::Unsupported, Name::Word(at), at, false);
                    part.reported = true;
                    let part = self.push(part);
                    self.current = Some(part);
                    self.swallow(i, part)
                }
            },
        }
    }

    fn push(&mut self, part: Part) -> usize {
        self.parts.push(part);
        self.parts.len() - 1
    }

    fn own(&mut self, words: std::ops::Range<usize>, part: usize) {
        let end = words.end.min(self.owner.len());
        for owner in &mut self.owner[words.start.min(end)..end] {
            *owner = Some(part);
        }
    }

    /// Gives `part` every word from `from` up to the next one that starts a
    /// new part, and returns where that is.
    fn swallow(&mut self, from: usize, part: usize) -> usize {
        let mut end = from + 1;
        while let Some(word) = self.word(end) {
            let next_starts = self.word(end + 1).is_some_and(starts_part);
            if starts_part(word) || (word == "!" && next_starts) {
                break;
            }
            end += 1;
        }
        self.own(from..end, part);
        end
    }

    /// Whether the option at `at` uses the old form `--dport ! 80`.
    fn old_form(&self, at: usize) -> bool {
        self.word(at + 1) == Some("!") && self.word(at + 2).is_some_and(|w| !w.starts_with('-'))
    }

    fn args(&self, at: usize, negated: bool) -> OptionArgs<'r, 'a> {
        let old_form = self.old_form(at);
        OptionArgs {
            line: self.line,
            words: self.words,
            option: at,
            next: if old_form { at + 2 } else { at + 1 },
            invert: negated || old_form,
        }
    }

    fn builtin(&mut self, from: usize, at: usize, negated: bool, kind: Builtin) -> usize {
        let mut args = self.args(at, negated);
        let read = read_builtin(kind, &mut args);
        if let Ok(Match::Protocol(p)) = &read {
            self.protocol = (!p.invert).then_some(p.value);
        }
        let part = self.push(Part::new(State::Unsupported, Name::Word(at), at, false));
        self.settle(part, read.map(State::Built));
        self.own(from..args.next, part);
        args.next.min(self.words.len())
    }

    fn open_target(&mut self, at: usize, name: &str, goto: bool) -> usize {
        let chain = self
            .chains
            .get_key_value(name)
            .filter(|(_, index)| **index < self.visible)
            .map(|(name, &index)| ChainRef {
                index,
                name: Arc::clone(name),
            });
        let state = match (chain, goto) {
            (Some(chain), true) => State::Verdict(Target::Goto(chain)),
            (Some(chain), false) => State::Verdict(Target::Jump(chain)),
            (None, true) => State::Unsupported,
            (None, false) => match name {
                "ACCEPT" => State::Verdict(Target::Accept),
                "DROP" => State::Verdict(Target::Drop),
                "RETURN" => State::Verdict(Target::Return),
                "NOTRACK" => State::Verdict(Target::NoTrack),
                "TRACE" => State::Verdict(Target::Trace),
                _ => PendingTarget::open(name).map_or(State::Unsupported, State::Target),
            },
        };
        let mut part = Part::new(state, Name::Word(at + 1), at, true);
        if self.parts.iter().any(|p| p.is_target) {
            self.issue(at, "a rule has only one target");
            part.state = State::Unsupported;
            part.reported = true;
        } else if goto && matches!(part.state, State::Unsupported) {
            self.issue(
                at + 1,
                format!("`-g` needs a chain declared before this rule, and `{name}` is none"),
            );
            part.reported = true;
        }
        self.push(part)
    }

    /// Gives the option at `at` to the part that has it and returns where
    /// the next thing starts.
    fn route(&mut self, from: usize, at: usize, negated: bool) -> usize {
        if negated && self.old_form(at) {
            let name = self.word(at).unwrap_or_default();
            self.issue(at + 1, format!("`{name}` is negated twice"));
        } else {
            if let Some(next) = self
                .current
                .and_then(|part| self.offer(from, at, negated, part))
            {
                return next;
            }
            for part in (0..self.parts.len()).rev() {
                if Some(part) == self.current {
                    continue;
                }
                if let Some(next) = self.offer(from, at, negated, part) {
                    return next;
                }
            }
            if let Some(next) = self.offer_implied(from, at, negated) {
                return next;
            }
        }
        // Nobody has this option: the part it follows is not understood.
        let part = match self.current {
            Some(part) => part,
            None => {
                let part = self.push(Part::new(State::Unsupported, Name::Word(at), at, false));
                self.current = Some(part);
                part
            }
        };
        self.parts[part].state = State::Unsupported;
        self.swallow(from, part)
    }

    /// Offers the option at `at` to the module `-p` implies, as iptables
    /// loads it for an option no other module has.
    fn offer_implied(&mut self, from: usize, at: usize, negated: bool) -> Option<usize> {
        let module = self.protocol.and_then(protocol_module)?;
        let loaded = self.parts.iter().any(|p| match p.name {
            Name::Word(w) => !p.is_target && w != p.word && self.word(w) == Some(module),
            Name::Implied(m) => m == module,
        });
        if loaded {
            return None;
        }
        let pending = PendingMatch::open(module)?;
        let part = self.push(Part::new(
            State::Match(pending),
            Name::Implied(module),
            at,
            false,
        ));
        let next = self.offer(from, at, negated, part);
        if next.is_none() {
            self.parts.pop();
        }
        next
    }

    /// Offers the option at `at` to `part`; returns where the next thing
    /// starts if the part took it.
    fn offer(&mut self, from: usize, at: usize, negated: bool, part: usize) -> Option<usize> {
        let mut args = self.args(at, negated);
        let name = self.word(at)?;
        let read = match &mut self.parts[part].state {
            State::Match(pending) => pending.option(name, &mut args)?,
            State::Target(pending) => pending.option(name, &mut args)?,
            _ => return None,
        };
        let next = args.next.min(self.words.len());
        self.own(from..next, part);
        self.settle_option(part, read);
        Some(next)
    }

    fn settle_option(&mut self, part: usize, read: Result<(), WordIssue>) {
        if let Err(issue) = read {
            self.issues.push(issue);
            self.parts[part].state = State::Unsupported;
            self.parts[part].reported = true;
        }
    }

    /// Replaces the state of `part` with `read`, or marks it not understood.
    fn settle(&mut self, part: usize, read: Result<State, WordIssue>) {
        match read {
            Ok(state) => self.parts[part].state = state,
            Err(issue) => {
                self.issues.push(issue);
                self.parts[part].reported = true;
            }
        }
    }

    fn finish(mut self) -> RuleSpec {
        let targets = self.parts.iter().filter(|p| p.is_target).count();
        let mut spec = RuleSpec {
            matches: Vec::with_capacity(self.parts.len() - targets),
            target: None,
            counters: self.counters,
        };
        for index in 0..self.parts.len() {
            let word = self.parts[index].word;
            let finished = match std::mem::replace(&mut self.parts[index].state, State::Unsupported)
            {
                State::Match(pending) => pending.finish(word).map(State::Built),
                State::Target(pending) => pending.finish(word).map(State::Verdict),
                state => Ok(state),
            };
            match finished {
                Ok(State::Built(m)) => spec.matches.push(m),
                Ok(State::Verdict(t)) => spec.target = Some(t),
                Ok(_) => self.keep_unsupported(index, &mut spec),
                Err(issue) => {
                    self.issues.push(issue);
                    self.parts[index].reported = true;
                    self.keep_unsupported(index, &mut spec);
                }
            }
        }
        spec
    }

    /// Adds a part that is not understood to the rule, with its text.
    fn keep_unsupported(&mut self, index: usize, spec: &mut RuleSpec) {
        let (name, raw, words) = self.raw(index);
        let part = &self.parts[index];
        if part.is_target {
            if words == 2 && !part.reported {
                let at = part.word + 1;
                self.issue(
                    at,
                    format!(
                        "`{name}` is neither a chain declared before this rule nor a known target"
                    ),
                );
            }
            spec.target = Some(Target::Unsupported { name, raw });
        } else {
            spec.matches.push(Match::Unsupported { module: name, raw });
        }
    }

    /// The name and the text, as written, of a part this parser does not
    /// understand, and how many words that text has.
    fn raw(&self, part: usize) -> (String, String, usize) {
        let name = match self.parts[part].name {
            Name::Word(w) => self.word(w).unwrap_or_default().to_owned(),
            Name::Implied(module) => module.to_owned(),
        };
        let words: Vec<&str> = self
            .words
            .iter()
            .zip(self.owner.iter())
            .filter(|(_, owner)| **owner == Some(part))
            .filter_map(|(word, _)| self.line.text.get(word.start..word.end))
            .collect();
        (name, words.join(" "), words.len())
    }
}

/// Reads a built-in option (`-s`, `-p`, `-f`, ...).
fn read_builtin(kind: Builtin, args: &mut OptionArgs<'_, '_>) -> Result<Match, WordIssue> {
    Ok(match kind {
        Builtin::Source => Match::Source(args.invertible(ip_net)?),
        Builtin::Destination => Match::Destination(args.invertible(ip_net)?),
        Builtin::InInterface => Match::InInterface(args.invertible(Interface::parse)?),
        Builtin::OutInterface => Match::OutInterface(args.invertible(Interface::parse)?),
        Builtin::Protocol => Match::Protocol(args.invertible(protocol)?),
        Builtin::Fragment => Match::Fragment {
            invert: args.invert(),
        },
    })
}
