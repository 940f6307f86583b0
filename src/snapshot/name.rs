//! Kubernetes names as the API server validates them, checked before a name
//! from outside (an API server's answer, a snapshot's directory) becomes a
//! path component or shell text. A name that passes holds only lowercase
//! letters, digits, `-` and `.`, starts and ends with a letter or digit,
//! and is never `.` or `..`: it cannot leave a directory, start an option,
//! or mean anything to a shell in any quoting context.

use std::fmt;

/// What a name names, and so which of Kubernetes' rules it follows
/// (`k8s.io/apimachinery/pkg/util/validation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// A Node: a DNS-1123 subdomain.
    Node,
    /// A Namespace: a DNS-1123 label.
    Namespace,
    /// A Pod: a DNS-1123 subdomain.
    Pod,
    /// A ConfigMap: a DNS-1123 subdomain.
    ConfigMap,
    /// A resource's plural as discovery serves it (`pods`): a DNS-1123 label.
    Resource,
    /// An API group (`crd.projectcalico.org`): a DNS-1123 subdomain.
    Group,
}

impl NameKind {
    fn label_only(self) -> bool {
        matches!(self, NameKind::Namespace | NameKind::Resource)
    }

    fn rule(self) -> &'static str {
        if self.label_only() {
            "a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        } else {
            "a DNS-1123 subdomain: at most 253 characters, labels of lowercase letters, digits and '-' joined by '.', each starting and ending with a letter or digit"
        }
    }
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::Node => "node",
            NameKind::Namespace => "namespace",
            NameKind::Pod => "pod",
            NameKind::ConfigMap => "ConfigMap",
            NameKind::Resource => "resource",
            NameKind::Group => "API group",
        })
    }
}

/// A name that is not a Kubernetes name of its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a Kubernetes {kind} name ({})", kind.rule())]
pub struct BadName {
    pub kind: NameKind,
    pub name: String,
}

/// The longest DNS-1123 label and subdomain.
const LABEL_MAX: usize = 63;
const SUBDOMAIN_MAX: usize = 253;

/// `Ok` when `name` is a Kubernetes name of `kind`.
pub fn check_name(kind: NameKind, name: &str) -> Result<(), BadName> {
    let max = if kind.label_only() {
        LABEL_MAX
    } else {
        SUBDOMAIN_MAX
    };
    let label = |label: &str| {
        let bytes = label.as_bytes();
        let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        label.len() <= LABEL_MAX
            && bytes.first().is_some_and(edge)
            && bytes.last().is_some_and(edge)
            && bytes.iter().all(|b| edge(b) || *b == b'-')
    };
    let valid = name.len() <= max
        && if kind.label_only() {
            label(name)
        } else {
            name.split('.').all(label)
        };
    if valid {
        Ok(())
    } else {
        Err(BadName {
            kind,
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_names_pass() {
        for (kind, name) in [
            (NameKind::Node, "node-1"),
            (NameKind::Node, "ip-10-0-1-2.eu-west-1.compute.internal"),
            (NameKind::Pod, "web-0"),
            (NameKind::Pod, "coredns-5d78c9869d-4x8zq"),
            (NameKind::Namespace, "kube-system"),
            (NameKind::Group, "crd.projectcalico.org"),
            (NameKind::Resource, "ippools"),
            (NameKind::Node, "0"),
        ] {
            assert_eq!(check_name(kind, name), Ok(()), "{kind} {name}");
        }
        let longest = format!("{0}.{0}.{0}.{1}", "a".repeat(63), "b".repeat(61));
        assert_eq!(longest.len(), 253);
        assert_eq!(check_name(NameKind::Pod, &longest), Ok(()));
    }

    #[test]
    fn names_that_could_leave_a_directory_or_run_are_refused() {
        for name in [
            "",
            ".",
            "..",
            "../../../escaped-node",
            "a/b",
            "/etc",
            "n1$(touch PWNED)",
            "n1`id`",
            "a b",
            "Node-1",
            "-rf",
            "a..b",
            "a.",
            "x\ny",
            "é",
        ] {
            for kind in [NameKind::Node, NameKind::Namespace, NameKind::Pod] {
                let refused = check_name(kind, name).unwrap_err();
                assert_eq!(refused.name, name);
            }
        }
        let too_long = format!("{0}.{0}.{0}.{1}", "a".repeat(63), "b".repeat(62));
        assert!(check_name(NameKind::Pod, &too_long).is_err());
        assert!(check_name(NameKind::Pod, &"a".repeat(64)).is_err());
        assert!(check_name(NameKind::Namespace, &"a".repeat(64)).is_err());
        assert!(check_name(NameKind::Namespace, "a.b").is_err());
    }

    #[test]
    fn the_refusal_names_the_kind_the_name_and_the_rule() {
        let message = check_name(NameKind::Node, "../x").unwrap_err().to_string();
        assert_eq!(
            message,
            "\"../x\" is not a Kubernetes node name (a DNS-1123 subdomain: at most 253 characters, labels of lowercase letters, digits and '-' joined by '.', each starting and ending with a letter or digit)"
        );
    }
}
