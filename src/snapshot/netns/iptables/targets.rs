//! What a rule does when it matches (`-j`/`-g`), with its values read.

use std::sync::Arc;

use super::matches::CtDirection;
use super::rule::{Extension, OptionArgs, WordIssue, extensions, text};
use super::values::{AddressRange, BadValue, PortRange, bad, ip_addr, number};

/// A rule's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Accept,
    Drop,
    /// Back to the calling chain (at a built-in chain: its policy).
    Return,
    /// `-j CHAIN`: evaluate the chain, then continue after this rule.
    Jump(ChainRef),
    /// `-g CHAIN`: evaluate the chain; a RETURN there returns past this rule's chain.
    Goto(ChainRef),
    Reject(RejectWith),
    /// Rewrites the destination (nat PREROUTING/OUTPUT).
    Dnat(NatTarget),
    /// Rewrites the source (nat POSTROUTING/INPUT).
    Snat(NatTarget),
    /// SNAT to the address of the outgoing interface.
    Masquerade(MasqueradeTarget),
    /// DNAT to the receiving interface's address.
    Redirect(RedirectTarget),
    /// Sets the packet mark; not terminating.
    Mark(XMark),
    /// Changes the connection mark or copies between marks; not terminating.
    ConnMark(ConnMarkAction),
    /// The packet is not tracked (raw table).
    NoTrack,
    /// Sets conntrack parameters (raw table); not terminating.
    Ct(CtTarget),
    /// Logs the packet; not terminating.
    Log(LogTarget),
    /// Logs the packet through nfnetlink; not terminating.
    NfLog(NfLogTarget),
    /// Traces the packet through the rules; not terminating.
    Trace,
    /// A target this parser does not understand, with its text as written.
    Unsupported {
        name: String,
        raw: String,
    },
}

impl Target {
    /// The name it is written with after `-j` or `-g` (a chain's own name).
    pub fn name(&self) -> &str {
        match self {
            Target::Accept => "ACCEPT",
            Target::Drop => "DROP",
            Target::Return => "RETURN",
            Target::Jump(chain) | Target::Goto(chain) => &chain.name,
            Target::Reject(_) => "REJECT",
            Target::Dnat(_) => "DNAT",
            Target::Snat(_) => "SNAT",
            Target::Masquerade(_) => "MASQUERADE",
            Target::Redirect(_) => "REDIRECT",
            Target::Mark(_) => "MARK",
            Target::ConnMark(_) => "CONNMARK",
            Target::NoTrack => "NOTRACK",
            Target::Ct(_) => "CT",
            Target::Log(_) => "LOG",
            Target::NfLog(_) => "NFLOG",
            Target::Trace => "TRACE",
            Target::Unsupported { name, .. } => name,
        }
    }
}

/// A user-defined chain of the same table, by its position in
/// [`Table::chains`](super::Table::chains) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainRef {
    pub index: usize,
    pub name: Arc<str>,
}

/// What `REJECT` answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectWith {
    IcmpNetUnreachable,
    IcmpHostUnreachable,
    IcmpPortUnreachable,
    IcmpProtoUnreachable,
    IcmpNetProhibited,
    IcmpHostProhibited,
    IcmpAdminProhibited,
    TcpReset,
}

impl RejectWith {
    /// Reads iptables' names and ip6tables' (`icmp6-…`), each mapped to the
    /// ICMP or ICMPv6 error of the same meaning.
    fn parse(text: &str) -> Result<RejectWith, BadValue> {
        use RejectWith::*;
        Ok(match text {
            "icmp6-no-route" | "no-route" => IcmpNetUnreachable,
            "icmp6-adm-prohibited" | "adm-prohibited" => IcmpAdminProhibited,
            "icmp6-addr-unreachable" | "addr-unreach" => IcmpHostUnreachable,
            "icmp6-port-unreachable" => IcmpPortUnreachable,
            "icmp-net-unreachable" | "net-unreach" => IcmpNetUnreachable,
            "icmp-host-unreachable" | "host-unreach" => IcmpHostUnreachable,
            "icmp-port-unreachable" | "port-unreach" => IcmpPortUnreachable,
            "icmp-proto-unreachable" | "proto-unreach" => IcmpProtoUnreachable,
            "icmp-net-prohibited" | "net-prohib" => IcmpNetProhibited,
            "icmp-host-prohibited" | "host-prohib" => IcmpHostProhibited,
            "icmp-admin-prohibited" | "admin-prohib" => IcmpAdminProhibited,
            "tcp-reset" | "tcp-rst" => TcpReset,
            _ => return bad(format!("`{text}` is not a REJECT type")),
        })
    }
}

/// `DNAT --to-destination` or `SNAT --to-source`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NatTarget {
    pub to: Option<NatRange>,
    pub random: bool,
    pub random_fully: bool,
    pub persistent: bool,
}

/// `addr[-addr][:port[-port]]`; either part may be absent (`:8000`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatRange {
    pub addresses: Option<AddressRange>,
    pub ports: Option<PortRange>,
}

impl NatRange {
    /// Reads `10.0.0.1`, `10.0.0.1-10.0.0.5:80-90`, `:8000`,
    /// `[fd00::1]:80`, `[fd00::1]-[fd00::2]:80`, or `fd00::1` without port.
    fn parse(text: &str) -> Result<NatRange, BadValue> {
        let (addresses, ports) = if text.starts_with('[') {
            text.rsplit_once("]:")
                .map_or((text, None), |(addresses, ports)| (addresses, Some(ports)))
        } else if text.bytes().filter(|&b| b == b':').count() > 1 {
            (text, None)
        } else {
            text.split_once(':')
                .map_or((text, None), |(addresses, ports)| (addresses, Some(ports)))
        };
        let unbracket = |address: &str| {
            let address = address.strip_prefix('[').unwrap_or(address);
            ip_addr(address.strip_suffix(']').unwrap_or(address))
        };
        let addresses = match addresses {
            "" => None,
            // IPv6 addresses have no `-`.
            _ => Some(match addresses.split_once('-') {
                None => AddressRange::new(unbracket(addresses)?, unbracket(addresses)?),
                Some((first, last)) => AddressRange::new(unbracket(first)?, unbracket(last)?),
            }?),
        };
        let range = NatRange {
            addresses,
            ports: ports.map(|p| PortRange::parse(p, '-')).transpose()?,
        };
        if range.addresses.is_none() && range.ports.is_none() {
            return bad(format!("`{text}` has neither address nor port"));
        }
        Ok(range)
    }
}

/// `MASQUERADE`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MasqueradeTarget {
    pub ports: Option<PortRange>,
    pub random: bool,
    pub random_fully: bool,
}

/// `REDIRECT`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedirectTarget {
    pub ports: Option<PortRange>,
    pub random: bool,
}

/// A mark change as the kernel applies it: `mark = (mark & !mask) ^ value`.
/// Every MARK spelling comes down to this (`--set-mark v/m` is `v` with
/// mask `m|v`, `--or-mark v` is `v/v`, `--and-mark v` is `0/!v`,
/// `--xor-mark v` is `v/0`); the rule text keeps the spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XMark {
    pub value: u32,
    pub mask: u32,
}

impl XMark {
    pub fn apply(self, mark: u32) -> u32 {
        (mark & !self.mask) ^ self.value
    }

    /// Reads one of the MARK/CONNMARK options that set a mark.
    fn option(name: &str, args: &mut OptionArgs<'_, '_>) -> Option<Result<XMark, WordIssue>> {
        let with_mask = |a: &mut OptionArgs<'_, '_>| a.value(super::values::MarkMask::parse);
        let plain = |a: &mut OptionArgs<'_, '_>| a.value(number::<u32>);
        Some(match name {
            "--set-xmark" => with_mask(args).map(|m| XMark {
                value: m.value,
                mask: m.mask,
            }),
            "--set-mark" => with_mask(args).map(|m| XMark {
                value: m.value,
                mask: m.mask | m.value,
            }),
            "--and-mark" => plain(args).map(|v| XMark { value: 0, mask: !v }),
            "--or-mark" => plain(args).map(|v| XMark { value: v, mask: v }),
            "--xor-mark" => plain(args).map(|v| XMark { value: v, mask: 0 }),
            _ => return None,
        })
    }
}

/// What `CONNMARK` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnMarkAction {
    /// Changes the connection mark.
    Set(XMark),
    /// `--save-mark`: `ctmark = (ctmark & !ctmask) ^ (mark & nfmask)`.
    Save { nfmask: u32, ctmask: u32 },
    /// `--restore-mark`: `mark = (mark & !nfmask) ^ (ctmark & ctmask)`.
    Restore { nfmask: u32, ctmask: u32 },
}

/// `CT`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CtTarget {
    pub notrack: bool,
    pub zone: Option<CtZone>,
    pub helper: Option<String>,
}

/// A conntrack zone, for both directions unless `direction` says one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtZone {
    pub id: u16,
    pub direction: Option<CtDirection>,
}

/// `LOG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTarget {
    /// Syslog level, 0 (emerg) to 7 (debug); 4 (warning) by default.
    pub level: u8,
    pub prefix: Option<String>,
    pub tcp_sequence: bool,
    pub tcp_options: bool,
    pub ip_options: bool,
    pub uid: bool,
    pub macdecode: bool,
}

/// `NFLOG`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NfLogTarget {
    pub group: u16,
    pub prefix: Option<String>,
    pub size: Option<u32>,
    pub threshold: Option<u16>,
}

extensions! {
    /// A target with options, whose options are being read.
    PendingTarget -> Target {
        "REJECT" => Reject(RejectState),
        "DNAT" => Dnat(DnatState),
        "SNAT" => Snat(SnatState),
        "MASQUERADE" => Masquerade(MasqueradeTarget),
        "REDIRECT" => Redirect(RedirectTarget),
        "MARK" => Mark(MarkState),
        "CONNMARK" => ConnMark(ConnMarkState),
        "CT" => Ct(CtTarget),
        "LOG" => Log(LogState),
        "NFLOG" => NfLog(NfLogTarget),
    }
}

/// Reads an option without value that cannot be negated into `flag`.
fn flag(args: &mut OptionArgs<'_, '_>, flag: &mut bool) -> Result<(), WordIssue> {
    args.plain()?;
    *flag = true;
    Ok(())
}

#[derive(Default)]
pub(super) struct RejectState(Option<RejectWith>);

impl Extension for RejectState {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--reject-with" => args.once(&mut self.0, |a| a.value(RejectWith::parse)),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Target, WordIssue> {
        Ok(Target::Reject(
            self.0.unwrap_or(RejectWith::IcmpPortUnreachable),
        ))
    }
}

/// Reads the options DNAT and SNAT share; `to` is `--to-destination` or `--to-source`.
fn nat_option(
    nat: &mut NatTarget,
    to: &str,
    name: &str,
    args: &mut OptionArgs<'_, '_>,
) -> Option<Result<(), WordIssue>> {
    Some(match name {
        "--random" => flag(args, &mut nat.random),
        "--random-fully" => flag(args, &mut nat.random_fully),
        "--persistent" => flag(args, &mut nat.persistent),
        _ if name == to => args.once(&mut nat.to, |a| a.value(NatRange::parse)),
        _ => return None,
    })
}

#[derive(Default)]
pub(super) struct DnatState(NatTarget);

impl Extension for DnatState {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        nat_option(&mut self.0, "--to-destination", name, args)
    }

    fn finish(self, _word: usize) -> Result<Target, WordIssue> {
        Ok(Target::Dnat(self.0))
    }
}

#[derive(Default)]
pub(super) struct SnatState(NatTarget);

impl Extension for SnatState {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        nat_option(&mut self.0, "--to-source", name, args)
    }

    fn finish(self, _word: usize) -> Result<Target, WordIssue> {
        Ok(Target::Snat(self.0))
    }
}

fn nat_ports(text: &str) -> Result<PortRange, BadValue> {
    PortRange::parse(text, '-')
}

impl Extension for MasqueradeTarget {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--to-ports" => args.once(&mut self.ports, |a| a.value(nat_ports)),
            "--random" => flag(args, &mut self.random),
            "--random-fully" => flag(args, &mut self.random_fully),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Target, WordIssue> {
        Ok(Target::Masquerade(self))
    }
}

impl Extension for RedirectTarget {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--to-ports" => args.once(&mut self.ports, |a| a.value(nat_ports)),
            "--random" => flag(args, &mut self.random),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Target, WordIssue> {
        Ok(Target::Redirect(self))
    }
}

#[derive(Default)]
pub(super) struct MarkState(Option<XMark>);

impl Extension for MarkState {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let mark = XMark::option(name, args)?;
        Some(mark.and_then(|mark| args.once(&mut self.0, |_| Ok(mark))))
    }

    fn finish(self, word: usize) -> Result<Target, WordIssue> {
        self.0.map(Target::Mark).ok_or_else(|| {
            WordIssue::new(
                word,
                "MARK needs `--set-xmark`, `--set-mark`, `--and-mark`, `--or-mark` or `--xor-mark`",
            )
        })
    }
}

/// Which CONNMARK mode an option chose.
#[derive(Clone, Copy)]
enum ConnMarkMode {
    Set(XMark),
    Save,
    Restore,
}

#[derive(Default)]
pub(super) struct ConnMarkState {
    mode: Option<ConnMarkMode>,
    nfmask: Option<u32>,
    ctmask: Option<u32>,
    mask: Option<u32>,
}

impl Extension for ConnMarkState {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        if let Some(mark) = XMark::option(name, args) {
            return Some(
                mark.and_then(|mark| args.once(&mut self.mode, |_| Ok(ConnMarkMode::Set(mark)))),
            );
        }
        let mask = |a: &mut OptionArgs<'_, '_>| a.value(number::<u32>);
        Some(match name {
            "--save-mark" => args.once(&mut self.mode, |a| a.plain().map(|()| ConnMarkMode::Save)),
            "--restore-mark" => args.once(&mut self.mode, |a| {
                a.plain().map(|()| ConnMarkMode::Restore)
            }),
            "--nfmask" => args.once(&mut self.nfmask, mask),
            "--ctmask" => args.once(&mut self.ctmask, mask),
            "--mask" => args.once(&mut self.mask, mask),
            _ => return None,
        })
    }

    fn finish(self, word: usize) -> Result<Target, WordIssue> {
        let nfmask = self.nfmask.or(self.mask).unwrap_or(u32::MAX);
        let ctmask = self.ctmask.or(self.mask).unwrap_or(u32::MAX);
        let action = match self.mode {
            Some(ConnMarkMode::Set(mark)) => ConnMarkAction::Set(mark),
            Some(ConnMarkMode::Save) => ConnMarkAction::Save { nfmask, ctmask },
            Some(ConnMarkMode::Restore) => ConnMarkAction::Restore { nfmask, ctmask },
            None => {
                return Err(WordIssue::new(
                    word,
                    "CONNMARK needs a mark to set, `--save-mark` or `--restore-mark`",
                ));
            }
        };
        Ok(Target::ConnMark(action))
    }
}

impl Extension for CtTarget {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        let direction = match name {
            "--zone" => None,
            "--zone-orig" => Some(CtDirection::Original),
            "--zone-reply" => Some(CtDirection::Reply),
            "--notrack" => return Some(flag(args, &mut self.notrack)),
            "--helper" => return Some(args.once(&mut self.helper, |a| a.value(text))),
            _ => return None,
        };
        Some(args.once(&mut self.zone, |a| {
            Ok(CtZone {
                id: a.value(number)?,
                direction,
            })
        }))
    }

    fn finish(self, _word: usize) -> Result<Target, WordIssue> {
        Ok(Target::Ct(self))
    }
}

#[derive(Default)]
pub(super) struct LogState {
    level: Option<u8>,
    prefix: Option<String>,
    tcp_sequence: bool,
    tcp_options: bool,
    ip_options: bool,
    uid: bool,
    macdecode: bool,
}

fn log_level(text: &str) -> Result<u8, BadValue> {
    let level = match text {
        "emerg" | "panic" => 0,
        "alert" => 1,
        "crit" => 2,
        "err" | "error" => 3,
        "warning" | "warn" => 4,
        "notice" => 5,
        "info" => 6,
        "debug" => 7,
        _ => number(text)?,
    };
    if level > 7 {
        return bad(format!("`{text}` is not a log level (0 to 7)"));
    }
    Ok(level)
}

impl Extension for LogState {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--log-level" => args.once(&mut self.level, |a| a.value(log_level)),
            "--log-prefix" => args.once(&mut self.prefix, |a| a.value(text)),
            "--log-tcp-sequence" => flag(args, &mut self.tcp_sequence),
            "--log-tcp-options" => flag(args, &mut self.tcp_options),
            "--log-ip-options" => flag(args, &mut self.ip_options),
            "--log-uid" => flag(args, &mut self.uid),
            "--log-macdecode" => flag(args, &mut self.macdecode),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Target, WordIssue> {
        Ok(Target::Log(LogTarget {
            level: self.level.unwrap_or(4),
            prefix: self.prefix,
            tcp_sequence: self.tcp_sequence,
            tcp_options: self.tcp_options,
            ip_options: self.ip_options,
            uid: self.uid,
            macdecode: self.macdecode,
        }))
    }
}

impl Extension for NfLogTarget {
    type Output = Target;

    fn option(
        &mut self,
        name: &str,
        args: &mut OptionArgs<'_, '_>,
    ) -> Option<Result<(), WordIssue>> {
        Some(match name {
            "--nflog-group" => args.value(number).map(|group| self.group = group),
            "--nflog-prefix" => args.once(&mut self.prefix, |a| a.value(text)),
            "--nflog-size" | "--nflog-range" => args.once(&mut self.size, |a| a.value(number)),
            "--nflog-threshold" => args.once(&mut self.threshold, |a| a.value(number)),
            _ => return None,
        })
    }

    fn finish(self, _word: usize) -> Result<Target, WordIssue> {
        Ok(Target::NfLog(self))
    }
}
