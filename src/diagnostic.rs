//! What skoop finds, in one shape: a [`Finding`] of the path walker and of
//! a rule pack's check alike, with its severity, whether it was concluded
//! or could not be ([`FindingStatus`]), the places in the snapshot it rests
//! on ([`Evidence`]), what was expected and what to do — each its own field,
//! so that nothing is folded into a message or glued into a string on the
//! way to the report.
//!
//! **Architecture Invariant:** this module is below the engine and the
//! packs: it knows neither.

use std::borrow::Cow;
use std::fmt;
use std::path::PathBuf;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; nothing is broken by it.
    Info,
    /// May break some traffic or break later.
    Warning,
    /// Breaks traffic that the path needs.
    Critical,
    /// Breaks all traffic of the subject.
    Fatal,
}

impl Severity {
    pub const ALL: [(&'static str, Severity); 4] = [
        ("info", Severity::Info),
        ("warning", Severity::Warning),
        ("critical", Severity::Critical),
        ("fatal", Severity::Fatal),
    ];

    pub fn as_str(self) -> &'static str {
        Severity::ALL
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("info", |(name, _)| name)
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was concluded about the finding's subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingStatus {
    /// The subject is not as it should be.
    Failed,
    /// The snapshot cannot tell (a dump not collected, say).
    Unknown,
    /// A pack's script or expression failed; nothing was concluded.
    ScriptError,
}

impl FindingStatus {
    /// How the text report introduces a finding of this status: nothing for
    /// a failure, else that nothing was concluded.
    pub fn prefix(self) -> &'static str {
        match self {
            FindingStatus::Failed => "",
            FindingStatus::Unknown => "cannot tell: ",
            FindingStatus::ScriptError => "check failed to run: ",
        }
    }
}

impl fmt::Display for FindingStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FindingStatus::Failed => "failed",
            FindingStatus::Unknown => "cannot tell",
            FindingStatus::ScriptError => "script error",
        })
    }
}

/// One place a finding rests on: a snapshot file (a line and column in it
/// where that is known: an iptables rule, a Kubernetes object's source, a
/// script's error), a dump directory, or a pack's directory; and, where the
/// place alone does not say it, what is there (`eth0 mtu 1450`, `not
/// collected`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Evidence {
    pub file: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Evidence {
    /// A whole file or directory.
    pub fn file(file: impl Into<PathBuf>) -> Evidence {
        Evidence {
            file: file.into(),
            line: None,
            column: None,
            note: None,
        }
    }

    /// A line of a file.
    pub fn line(file: impl Into<PathBuf>, line: usize) -> Evidence {
        Evidence {
            line: Some(line),
            ..Evidence::file(file)
        }
    }

    /// With what is at the place.
    pub fn noting(self, note: impl Into<String>) -> Evidence {
        Evidence {
            note: Some(note.into()),
            ..self
        }
    }
}

/// `FILE[:LINE[:COLUMN]]`, the way compilers and editors name a place.
pub fn write_place(
    f: &mut fmt::Formatter<'_>,
    file: &std::path::Path,
    line: Option<usize>,
    column: Option<usize>,
) -> fmt::Result {
    write!(f, "{}", file.display())?;
    if let Some(line) = line {
        write!(f, ":{line}")?;
        if let Some(column) = column {
            write!(f, ":{column}")?;
        }
    }
    Ok(())
}

impl fmt::Display for Evidence {
    /// `FILE[:LINE[:COLUMN]][: NOTE]`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_place(f, &self.file, self.line, self.column)?;
        if let Some(note) = &self.note {
            write!(f, ": {note}")?;
        }
        Ok(())
    }
}

/// The evidence of a finding as one line of text: its places, `; `
/// between them.
pub fn evidence_text(evidence: &[Evidence]) -> String {
    let places: Vec<String> = evidence.iter().map(ToString::to_string).collect();
    places.join("; ")
}

/// One entry of a catalogue of finding ids (the engine's is
/// `engine::codes`): the id, the severity it is reported with, and what it
/// means. `docs/findings.md` is generated from the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindingCode {
    pub id: &'static str,
    pub severity: Severity,
    /// What it means, for the documentation: a line of Markdown.
    pub summary: &'static str,
}

/// A finding's stable id (`kernel.route.none`, `flannel.vxlan.fdb`): an
/// entry of a catalogue ([`FindingCode`]), or a pack check's own, as its
/// manifest names it. Code compares ids with the catalogue's constants,
/// never with a string it spells again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FindingId(Cow<'static, str>);

impl FindingId {
    /// The id a pack's manifest gives a check.
    pub fn pack(id: impl Into<String>) -> FindingId {
        FindingId(Cow::Owned(id.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<FindingCode> for FindingId {
    fn from(code: FindingCode) -> FindingId {
        FindingId(Cow::Borrowed(code.id))
    }
}

impl fmt::Display for FindingCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id)
    }
}

impl PartialEq<FindingCode> for FindingId {
    fn eq(&self, code: &FindingCode) -> bool {
        self.0 == code.id
    }
}

impl fmt::Display for FindingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for FindingId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// What skoop found, and `about` what: where on the path (the walker's
/// findings, `engine::AtHop`) or which check of which pack about which
/// subject (`packs::FromCheck`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding<A> {
    /// Stable id: `kernel.route.none`, `flannel.vxlan.fdb`.
    pub id: FindingId,
    pub severity: Severity,
    pub status: FindingStatus,
    pub message: String,
    /// The places it rests on, in the order they matter.
    pub evidence: Vec<Evidence>,
    /// What the cluster should have had instead, where that is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What to do about it, where the pack says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
    /// Further reading the pack names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<String>,
    #[serde(flatten)]
    pub about: A,
}

impl<A> Finding<A> {
    /// The same finding, about something else.
    pub fn about<B>(self, about: B) -> Finding<B> {
        Finding {
            id: self.id,
            severity: self.severity,
            status: self.status,
            message: self.message,
            evidence: self.evidence,
            expected: self.expected,
            remediation: self.remediation,
            references: self.references,
            about,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_reads_as_file_line_column_and_what_is_there() {
        let rule =
            Evidence::line("nodes/n1/host/iptables-save.txt", 57).noting("-A FORWARD -j DROP");
        assert_eq!(
            rule.to_string(),
            "nodes/n1/host/iptables-save.txt:57: -A FORWARD -j DROP"
        );
        let object = Evidence {
            column: Some(3),
            ..Evidence::line("cluster/nodes.yaml", 12)
        };
        assert_eq!(object.to_string(), "cluster/nodes.yaml:12:3");
        assert_eq!(
            evidence_text(&[
                Evidence::file("a.json"),
                Evidence::file("dir").noting("not collected")
            ]),
            "a.json; dir: not collected"
        );
        assert_eq!(evidence_text(&[]), "");
    }

    #[test]
    fn a_finding_keeps_every_field_when_it_changes_what_it_is_about() {
        let finding = Finding {
            id: FindingId::pack("flannel.vxlan.fdb"),
            severity: Severity::Critical,
            status: FindingStatus::Unknown,
            message: "no FDB entry".to_string(),
            evidence: vec![Evidence::file("a-file")],
            expected: Some("an entry".to_string()),
            remediation: Some("restart flanneld".to_string()),
            references: vec!["https://example.org".to_string()],
            about: "node-1",
        };
        let moved = finding.clone().about(7_usize);
        assert_eq!(moved.about, 7);
        assert_eq!(moved.about("node-1"), finding);
    }
}
