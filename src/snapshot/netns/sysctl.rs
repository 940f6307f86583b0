//! `sysctl -a`: the kernel settings, one `key = value` line each.
//!
//! Values stay as printed (some hold several numbers separated by tabs, a
//! few several lines);
//! the typed accessors read them when asked. Interface names containing a dot
//! appear with a slash in keys (`net.ipv4.conf.flannel/1.rp_filter`), as
//! sysctl prints them; [`Sysctls::interface_key`] builds such keys.

use std::collections::BTreeMap;

use crate::net::Family;
use crate::snapshot::problem::{ParseIssue, Parsed};

/// Every setting of a namespace dump, by its dotted key, with the line it
/// was read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sysctls {
    values: BTreeMap<String, Setting>,
}

/// One setting's value as printed, and its (first) line in the dump.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Setting {
    value: String,
    line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sysctl {key} = {value:?} is not an integer")]
pub struct NotAnInteger {
    pub key: String,
    pub value: String,
}

impl Sysctls {
    /// The value as printed; `None` when the dump does not have the key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(|setting| setting.value.as_str())
    }

    /// The line of `sysctl.txt` the key was read from, for evidence.
    pub fn line(&self, key: &str) -> Option<usize> {
        self.values.get(key).map(|setting| setting.line)
    }

    /// The value as an integer; `Ok(None)` when the dump does not have the key.
    pub fn get_i64(&self, key: &str) -> Result<Option<i64>, NotAnInteger> {
        self.get(key)
            .map(|value| {
                value.trim().parse().map_err(|_| NotAnInteger {
                    key: key.to_owned(),
                    value: value.to_owned(),
                })
            })
            .transpose()
    }

    /// The key of a per-interface setting:
    /// `interface_key(Family::Ipv4, "flannel.1", "rp_filter")` is
    /// `net.ipv4.conf.flannel/1.rp_filter`. `all` and `default` work as
    /// interface names too.
    pub fn interface_key(family: Family, ifname: &str, setting: &str) -> String {
        let family = match family {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        };
        format!("net.{family}.conf.{}.{setting}", ifname.replace('.', "/"))
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values
            .iter()
            .map(|(key, setting)| (key.as_str(), setting.value.as_str()))
    }
}

/// Reads `sysctl -a` output. A value of several lines is printed as one
/// `key = line` per line and read back joined by newlines. A line that is
/// not `key = value` (an error message of sysctl's that got into the file,
/// say) is an issue, and so is a key seen again further on, which keeps its
/// first value.
pub fn parse(text: &str) -> Parsed<Sysctls> {
    if text.trim().is_empty() {
        return (
            None,
            vec![ParseIssue::at_line(
                1,
                "empty file (sysctl -a prints every setting)",
            )],
        );
    }
    let mut values: BTreeMap<String, Setting> = BTreeMap::new();
    let mut issues = Vec::new();
    let mut last_key = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let (key, value) = match line.split_once(" = ") {
            Some(pair) => pair,
            // `key = ` with an empty value, trailing space trimmed.
            None => match line.strip_suffix(" =") {
                Some(key) => (key, ""),
                None => {
                    issues.push(ParseIssue::at_line(
                        number,
                        format!("expected `key = value`, found {line:?}"),
                    ));
                    continue;
                }
            },
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            issues.push(ParseIssue::at_line(
                number,
                format!("{key:?} is not a sysctl key (dotted, without spaces)"),
            ));
            continue;
        }
        if let Some(previous) = values.get_mut(key) {
            if last_key == Some(key) {
                previous.value.push('\n');
                previous.value.push_str(value);
            } else {
                issues.push(ParseIssue::at_line(
                    number,
                    format!("{key} appears again; the first value is kept"),
                ));
            }
            continue;
        }
        values.insert(
            key.to_owned(),
            Setting {
                value: value.to_owned(),
                line: number,
            },
        );
        last_key = Some(key);
    }
    (Some(Sysctls { values }), issues)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = include_str!("../../../tests/fixtures/dumps/node/sysctl.txt");
    const POD: &str = include_str!("../../../tests/fixtures/dumps/pod/sysctl.txt");

    fn sysctls(text: &str) -> Sysctls {
        let (sysctls, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        sysctls.expect("the fixture has settings")
    }

    #[test]
    fn every_line_of_the_node_dump_is_a_setting_or_continues_one() {
        let node = sysctls(NODE);
        // kernel.core_modes is printed on three lines.
        assert_eq!(node.len(), NODE.lines().count() - 2);
        assert_eq!(node.get("kernel.core_modes"), Some("file\npipe\nsocket"));
        assert_eq!(node.get_i64("net.ipv4.ip_forward"), Ok(Some(1)));
        assert_eq!(node.get("net.ipv4.ip_forward"), Some("1"));
        assert_eq!(sysctls(POD).get_i64("net.ipv4.ip_forward"), Ok(Some(0)));
    }

    #[test]
    fn a_setting_keeps_the_line_it_was_read_from() {
        let read = sysctls(
            "net.core.somaxconn = 4096\nkernel.core_modes = file\nkernel.core_modes = pipe\nnet.ipv4.ip_forward = 1\n",
        );
        assert_eq!(read.line("net.core.somaxconn"), Some(1));
        // A value of several lines is where its first line is.
        assert_eq!(read.line("kernel.core_modes"), Some(2));
        assert_eq!(read.line("net.ipv4.ip_forward"), Some(4));
        assert_eq!(read.line("net.ipv4.conf.all.rp_filter"), None);
    }

    #[test]
    fn per_interface_settings_are_found_through_interface_key() {
        let node = sysctls(NODE);
        let rp_filter = Sysctls::interface_key(Family::Ipv4, "eth0", "rp_filter");
        assert_eq!(node.get_i64(&rp_filter), Ok(Some(2)));
        let proxy_arp = Sysctls::interface_key(Family::Ipv4, "cni0", "proxy_arp");
        assert_eq!(node.get_i64(&proxy_arp), Ok(Some(1)));
        let flannel = Sysctls::interface_key(Family::Ipv4, "flannel.1", "forwarding");
        assert_eq!(flannel, "net.ipv4.conf.flannel/1.forwarding");
        assert_eq!(node.get_i64(&flannel), Ok(Some(1)));
        let accept_dad = Sysctls::interface_key(Family::Ipv6, "default", "accept_dad");
        assert_eq!(node.get_i64(&accept_dad), Ok(Some(0)));
    }

    #[test]
    fn values_with_several_numbers_or_none_are_kept_as_printed() {
        let node = sysctls(NODE);
        let rmem = node.get("net.ipv4.tcp_rmem").expect("tcp_rmem in fixture");
        assert_eq!(rmem.split('\t').count(), 3);
        let error = node
            .get_i64("net.ipv4.tcp_rmem")
            .expect_err("three numbers");
        assert_eq!(error.key, "net.ipv4.tcp_rmem");
        assert_eq!(node.get("net.ipv4.ip_local_reserved_ports"), Some(""));
        assert_eq!(node.get_i64("net.ipv4.no_such_setting"), Ok(None));
    }

    #[test]
    fn garbage_lines_are_issues_and_the_settings_around_them_are_kept() {
        let text = "net.ipv4.ip_forward = 1\nsysctl: permission denied on key 'fs.protected_hardlinks'\n\
                    net.ipv4.conf.all.rp_filter = 0\nnot a key = 3\nnet.ipv4.ip_forward = 0\nnet.core.somaxconn =\n";
        let (sysctls, issues) = parse(text);
        let sysctls = sysctls.expect("settings");
        let kept: Vec<_> = sysctls.iter().collect();
        assert_eq!(
            kept,
            [
                ("net.core.somaxconn", ""),
                ("net.ipv4.conf.all.rp_filter", "0"),
                ("net.ipv4.ip_forward", "1"),
            ]
        );
        assert_eq!(
            issues,
            [
                ParseIssue::at_line(
                    2,
                    r#"expected `key = value`, found "sysctl: permission denied on key 'fs.protected_hardlinks'""#
                ),
                ParseIssue::at_line(
                    4,
                    r#""not a key" is not a sysctl key (dotted, without spaces)"#
                ),
                ParseIssue::at_line(
                    5,
                    "net.ipv4.ip_forward appears again; the first value is kept"
                ),
            ]
        );
    }

    #[test]
    fn empty_file_is_one_issue_and_no_value() {
        let (sysctls, issues) = parse("\n");
        assert_eq!(sysctls, None);
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].line, 1);
    }
}
