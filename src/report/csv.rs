//! `skoop matrix -o csv`: a row per flow of a [`MatrixReport`], the fields
//! of its JSON (`docs/matrix.md`), quoted as RFC 4180 has it.

use crate::report::markup::visible;
use crate::report::matrix::{CauseOut, MatrixReport};

/// The header, then a row per flow; each line ends in CR LF.
pub fn render(report: &MatrixReport) -> String {
    let mut csv = String::from(
        "from,to,protocol,verdict,disposition,assumed,paths,failing_paths,finding,severity,hop,message,evidence,error,family\r\n",
    );
    for flow in &report.flows {
        let finding = flow.finding.as_ref();
        let field = |f: fn(&CauseOut) -> &str| finding.map(f).unwrap_or_default().to_owned();
        let row = [
            flow.from.clone(),
            flow.to.clone(),
            flow.protocol.clone(),
            flow.verdict.as_str().to_owned(),
            flow.disposition.clone().unwrap_or_default(),
            flow.assumed.to_string(),
            flow.paths.to_string(),
            flow.failing_paths.to_string(),
            field(|c| &c.id),
            field(|c| &c.severity),
            field(|c| &c.hop),
            field(|c| &c.message),
            field(|c| &c.evidence),
            flow.error.clone().unwrap_or_default(),
            flow.family.clone().unwrap_or_default(),
        ];
        let quoted: Vec<String> = row.iter().map(|f| field_text(f)).collect();
        csv.push_str(&quoted.join(","));
        csv.push_str("\r\n");
    }
    csv
}

/// A CSV field: its control characters escaped as the text output escapes
/// them ([`visible`]: a pod name from a snapshot must not drive the terminal
/// the CSV is shown on), then quoted where it holds a comma or a quote (the
/// quotes doubled), as RFC 4180 has it.
fn field_text(text: &str) -> String {
    let text = visible(text);
    if text.contains([',', '"']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.into_owned()
    }
}
