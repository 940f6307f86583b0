//! `skoop matrix -o html`: the matrix as a heat map, one self-contained page
//! (no script at all: its Content-Security-Policy allows only its inline
//! style). Sources are rows, destinations columns; each cell is a flow,
//! coloured and marked by its verdict (the mark reads without colour), its
//! title naming the disposition and the finding, and linking to that flow's
//! own report (`diagnose -o html`) where one was written. Above it, the
//! counts and the causes table: which finding stops how many flows. Every
//! text from the snapshot is escaped ([`escape`]).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use super::html;
use super::markup::escape;
use super::matrix::{FlowOut, FlowVerdict, MatrixReport};

const STYLE: &str = r#"
body { font-family: sans-serif; margin: 1.5em; color: #1b1b1b; }
h1 { font-size: 1.3em; }
table { border-collapse: collapse; }
.causes td, .causes th { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
.heatmap th { font-weight: normal; font-family: monospace; font-size: 0.8em; padding: 0 0.4em; white-space: nowrap; }
.heatmap thead th { writing-mode: vertical-rl; transform: rotate(180deg); text-align: left; }
.heatmap tbody th { text-align: right; }
.heatmap td { width: 1.4em; height: 1.4em; padding: 0; border: 1px solid #fff; text-align: center; font-size: 0.8em; }
.heatmap td a, .heatmap td span { display: block; width: 100%; height: 100%; color: inherit; text-decoration: none; line-height: 1.4em; }
.heatmap td a:focus, .heatmap td a:hover { outline: 2px solid #1b1b1b; }
.succeeds { background: #3a9a4a; color: #fff; }
.delivered_with_severe_findings { background: #e0a526; color: #1b1b1b; }
.not_delivered { background: #c8322d; color: #fff; }
.error { background: #777; color: #fff; }
.none { background: #f3f3f3; }
.key span { display: inline-block; padding: 0 0.5em; margin-right: 0.5em; }
"#;

/// The mark a cell shows for a verdict, so that it reads in grey too.
fn mark(verdict: FlowVerdict) -> &'static str {
    match verdict {
        FlowVerdict::Succeeds => "✓",
        FlowVerdict::DeliveredWithSevereFindings => "!",
        FlowVerdict::NotDelivered => "✗",
        FlowVerdict::Error => "?",
    }
}

/// The page for `matrix`; `link(i)` is where flow `i`'s report is, if any.
pub fn render(matrix: &MatrixReport, link: impl Fn(usize) -> Option<String>) -> String {
    let mut html = String::new();
    let counts = &matrix.counts;
    let title = format!(
        "skoop matrix: {} flows on {}: {} succeed",
        counts.flows, matrix.snapshot, counts.succeed
    );
    let policy = "default-src 'none'; style-src 'unsafe-inline'";
    html::write_head(&mut html, &title, policy, STYLE);
    let _ = writeln!(html, "<h1>{}</h1>", escape(&title));
    let _ = writeln!(html, "<p class=\"key\">");
    for (verdict, count) in [
        (FlowVerdict::Succeeds, counts.succeed),
        (FlowVerdict::NotDelivered, counts.not_delivered),
        (
            FlowVerdict::DeliveredWithSevereFindings,
            counts.delivered_with_severe_findings,
        ),
        (FlowVerdict::Error, counts.errors),
    ] {
        let _ = writeln!(
            html,
            "<span class=\"{0}\">{1} {0}: {count}</span>",
            verdict.as_str(),
            mark(verdict)
        );
    }
    let _ = writeln!(html, "</p>");
    if !matrix.causes.is_empty() {
        let _ = writeln!(
            html,
            "<h2>Causes</h2>\n<table class=\"causes\">\n<tr><th>flows</th><th>severity</th><th>finding</th><th>at</th><th>message (of the first)</th></tr>"
        );
        for cause in &matrix.causes {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                cause.flows,
                escape(&cause.severity),
                escape(&cause.id),
                escape(&cause.hop),
                escape(&cause.message)
            );
        }
        let _ = writeln!(html, "</table>");
    }
    write_grid(&mut html, matrix, link);
    let _ = writeln!(html, "</body>\n</html>");
    html
}

/// The table: a row per source, a column per destination, protocol and
/// family.
fn write_grid(html: &mut String, matrix: &MatrixReport, link: impl Fn(usize) -> Option<String>) {
    // Rows and columns in the order the flows first name them; a column is
    // named by the flow that first names it.
    let mut sources: Vec<&str> = Vec::new();
    let mut destinations: Vec<&FlowOut> = Vec::new();
    let mut seen = (HashSet::new(), HashSet::new());
    for flow in &matrix.flows {
        if seen.0.insert(flow.from.as_str()) {
            sources.push(&flow.from);
        }
        let (_, to, protocol, family) = flow.key();
        if seen.1.insert((to, protocol, family)) {
            destinations.push(flow);
        }
    }
    // Each cell's flow, by source and destination.
    let cells: HashMap<_, usize> = matrix
        .flows
        .iter()
        .enumerate()
        .map(|(index, flow)| (flow.key(), index))
        .collect();
    let cell = |source: &str, column: &FlowOut| {
        let (_, to, protocol, family) = column.key();
        cells.get(&(source, to, protocol, family)).copied()
    };
    let _ = writeln!(
        html,
        "<h2>Flows</h2>\n<table class=\"heatmap\">\n<thead><tr><th>from \\ to</th>"
    );
    for column in &destinations {
        let _ = write!(
            html,
            "<th scope=\"col\">{} ({})</th>",
            escape(&column.to),
            escape(&column.carried())
        );
    }
    let _ = writeln!(html, "</tr></thead>\n<tbody>");
    for source in &sources {
        let _ = write!(html, "<tr><th scope=\"row\">{}</th>", escape(source));
        for destination in &destinations {
            let Some(index) = cell(source, destination) else {
                let _ = write!(html, "<td class=\"none\"></td>");
                continue;
            };
            let flow = &matrix.flows[index];
            let verdict = flow.verdict;
            let mut about = format!(
                "{} -> {} ({}): {}",
                flow.from,
                flow.to,
                flow.carried(),
                flow.disposition.as_deref().unwrap_or(verdict.as_str())
            );
            if let Some(finding) = &flow.finding {
                let _ = write!(
                    about,
                    "; {} {} at {}: {}",
                    finding.severity, finding.id, finding.hop, finding.message
                );
            }
            if let Some(error) = &flow.error {
                let _ = write!(about, "; {error}");
            }
            let inner = match link(index) {
                Some(href) => format!(
                    "<a href=\"{}\" title=\"{}\">{}</a>",
                    escape(&href),
                    escape(&about),
                    mark(verdict)
                ),
                None => format!(
                    "<span title=\"{}\">{}</span>",
                    escape(&about),
                    mark(verdict)
                ),
            };
            let _ = write!(
                html,
                "<td class=\"{}\" data-flow=\"{index}\">{inner}</td>",
                verdict.as_str()
            );
        }
        let _ = writeln!(html, "</tr>");
    }
    let _ = writeln!(html, "</tbody>\n</table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::matrix::{CauseOut, FlowOut};

    fn flow(from: &str, to: &str, verdict: FlowVerdict, message: &str) -> FlowOut {
        FlowOut {
            from: from.into(),
            to: to.into(),
            protocol: "tcp".into(),
            family: Some("IPv4".into()),
            verdict,
            disposition: Some("no_route".into()),
            assumed: false,
            paths: 1,
            failing_paths: 1,
            finding: Some(CauseOut {
                id: crate::engine::codes::KERNEL_ROUTE_NONE.to_string(),
                severity: "fatal".into(),
                hop: "node-1".into(),
                message: message.into(),
                evidence: String::new(),
            }),
            error: None,
            confirmation: None,
        }
    }

    #[test]
    fn snapshot_text_in_the_heat_map_is_only_text() {
        let payload = "<script>alert(1)</script>";
        let matrix = MatrixReport::new(
            "snap\"><img src=x>".into(),
            vec![
                flow(
                    &format!("default/{payload}"),
                    "node/n\"1",
                    FlowVerdict::NotDelivered,
                    payload,
                ),
                flow(
                    "default/web-0",
                    "node/n\"1",
                    FlowVerdict::NotDelivered,
                    "ok",
                ),
            ],
        );
        let page = render(&matrix, |index| Some(format!("flows/{index}.html\"x")));
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("href=\"flows/0.html&quot;x\""));
    }

    #[test]
    fn a_cell_without_a_flow_is_empty_and_a_cell_without_a_report_has_no_link() {
        let matrix = MatrixReport::new(
            "snap".into(),
            vec![
                flow("a", "x", FlowVerdict::NotDelivered, "m"),
                flow("b", "y", FlowVerdict::Succeeds, "m"),
            ],
        );
        let page = render(&matrix, |_| None);
        // Two sources by two destinations: two flows and two empty cells.
        assert_eq!(page.matches("<td class=\"none\"></td>").count(), 2);
        assert_eq!(page.matches("data-flow=").count(), 2);
        assert!(!page.contains("<a href"));
        assert!(
            page.contains("<td class=\"succeeds\" data-flow=\"1\"><span title=\"b -&gt; y (tcp)")
        );
    }
}
