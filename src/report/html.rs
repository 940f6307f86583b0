//! `skoop diagnose -o html`: one self-contained page (no network: its style
//! and script are inline, and its Content-Security-Policy lets nothing else
//! load or run) that opens from disk. The verdict first, then the findings
//! with their evidence and what was expected, the SVG picture, each hop's
//! steps, shown when the hop is clicked (in the picture or a path) or named
//! by the page's fragment (`#hop=3`), and the paths as lists of hops. Every text
//! from the snapshot is escaped ([`escape`]); the script only shows and
//! hides what the page already holds.

use std::fmt::Write as _;

use super::json::{FindingOut, Report, StepKindOut};
use super::markup::escape;
use super::picture::{Outcome, Picture, assumed_mark};
use super::svg;

/// The page's whole script. The Content-Security-Policy allows this script
/// and no other, by its hash, [`SCRIPT_HASH`].
pub const SCRIPT: &str = r#"(function () {
  'use strict';
  function show(hop) {
    var found = false;
    document.querySelectorAll('.hop-detail').forEach(function (detail) {
      var on = detail.id === 'hop-' + hop;
      detail.hidden = !on;
      found = found || on;
    });
    document.getElementById('hop-hint').hidden = found;
    document.querySelectorAll('[data-hop]').forEach(function (element) {
      element.classList.toggle('selected', element.getAttribute('data-hop') === String(hop));
    });
    return found;
  }
  function choose(element) {
    var hop = element.getAttribute('data-hop');
    if (!show(hop)) {
      return;
    }
    if (location.hash !== '#hop=' + hop) {
      location.hash = 'hop=' + hop;
    }
    document.getElementById('hop-' + hop).scrollIntoView({ block: 'nearest' });
  }
  document.addEventListener('click', function (event) {
    var element = event.target.closest('[data-hop]');
    if (element) {
      event.preventDefault();
      choose(element);
    }
  });
  document.addEventListener('keydown', function (event) {
    var element = event.target.closest && event.target.closest('[data-hop]');
    if (element && (event.key === 'Enter' || event.key === ' ')) {
      event.preventDefault();
      choose(element);
    }
  });
  function fromFragment() {
    var match = /^#hop=(\d+)$/.exec(location.hash);
    if (match) {
      show(match[1]);
    }
  }
  window.addEventListener('hashchange', fromFragment);
  fromFragment();
})();
"#;

/// `sha256-` and the base64 of [`SCRIPT`]'s SHA-256, for the page's
/// Content-Security-Policy (a unit test keeps it right).
pub const SCRIPT_HASH: &str = "sha256-oD7OHDLX5ssmoWUExelkAqSYtXcCHTSg96IYfoPCfC8=";

const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #111; background: #fff; }
code, .mono, table.steps td { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.9em; }
header.verdict { border-left-width: 0.5rem; border-left-style: solid; padding: 0.5rem 1rem; margin-bottom: 1rem; }
header h1 { margin: 0 0 0.25rem 0; font-size: 1.6rem; }
.delivered { border-color: #1b7f3b; } .delivered h1 { color: #1b7f3b; }
.stopped { border-color: #c62828; } .stopped h1 { color: #c62828; }
.unknown { border-color: #8d6e00; } .unknown h1 { color: #8d6e00; }
.leaves { border-color: #1565c0; } .leaves h1 { color: #1565c0; }
header.verdict.unknown, ol.paths > li.unknown { border-left-style: dotted; }
header.verdict.leaves, ol.paths > li.leaves { border-left-style: dashed; }
header.verdict.stopped, ol.paths > li.stopped { border-left-style: double; border-left-width: 0.6rem; }
section { margin: 1.25rem 0; }
ol.findings li { margin-bottom: 0.6rem; }
.severity { font-weight: bold; text-transform: uppercase; font-size: 0.8em; }
.severity.fatal, .severity.critical { color: #c62828; }
.evidence, .expected, .remediation { margin-left: 1.5rem; color: #333; }
.evidence, .expected, .remediation, table.steps td { overflow-wrap: anywhere; }
.picture { overflow-x: auto; border: 1px solid #ddd; }
.picture svg { max-width: 100%; height: auto; }
.picture g.hop:hover rect, .picture g.hop.selected rect { stroke: #000; stroke-width: 3; }
ol.paths > li { margin-bottom: 0.75rem; padding-left: 0.5rem; border-left-width: 0.3rem; border-left-style: solid; }
ol.chain { list-style: none; padding: 0; margin: 0.3rem 0 0 0; display: flex; flex-wrap: wrap; gap: 0.3rem; }
ol.chain li:not(:first-child)::before { content: "→ "; color: #777; }
button[data-hop] { font: inherit; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; cursor: pointer; background: #f7f9fc; border: 1px solid #999; border-radius: 4px; }
button[data-hop].selected { background: #222; color: #fff; }
table.steps { border-collapse: collapse; width: 100%; }
table.steps th, table.steps td { text-align: left; vertical-align: top; border-bottom: 1px solid #eee; padding: 0.25rem 0.5rem; }
table.steps th { width: 8rem; }
.field { color: #666; }
.assumed { font-style: italic; color: #666; }
"#;

/// A self-contained page up to the start of its body: its character set,
/// its Content-Security-Policy (`policy`), the viewport, its title and its
/// only style.
pub(super) fn write_head(html: &mut String, title: &str, policy: &str, style: &str) {
    let _ = writeln!(html, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>");
    let _ = writeln!(html, "<meta charset=\"utf-8\">");
    let _ = writeln!(
        html,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">"
    );
    let _ = writeln!(
        html,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    );
    let _ = writeln!(html, "<title>{}</title>", escape(title));
    let _ = writeln!(html, "<style>{style}</style>\n</head>\n<body>");
}

/// The report as one HTML page.
pub fn render(report: &Report) -> String {
    let picture = Picture::new(report);
    let mut html = String::new();
    let title = format!("skoop: {}: {}", picture.request, picture.verdict);
    let policy =
        format!("default-src 'none'; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'");
    write_head(&mut html, &title, &policy, STYLE);

    write_verdict(&mut html, report, &picture);
    write_findings(&mut html, report);
    let _ = writeln!(
        html,
        "<section id=\"picture\">\n<h2>The path</h2>\n<div class=\"picture\">\n{}</div>\n</section>",
        svg::render(&picture)
    );
    write_hops(&mut html, report, &picture);
    write_paths(&mut html, report, &picture);
    let _ = writeln!(
        html,
        "<footer><p>The same diagnosis as <code>skoop diagnose -o json</code> reports.</p></footer>"
    );
    let _ = writeln!(html, "<script>{SCRIPT}</script>\n</body>\n</html>");
    html
}

/// The verdict, the question, and where the packet stops (each place once:
/// paths that stop alike say it alike).
fn write_verdict(html: &mut String, report: &Report, picture: &Picture) {
    let _ = writeln!(
        html,
        "<header class=\"verdict {}\" id=\"verdict\">\n<h1>{}</h1>\n<p class=\"mono\">{}</p>",
        picture.outcome.name(),
        escape(&picture.verdict),
        escape(&picture.request)
    );
    for other in &picture.other_families {
        let _ = writeln!(html, "<p>{}</p>", escape(other));
    }
    if !report.packs.is_empty() {
        let _ = writeln!(html, "<p>packs: {}</p>", escape(&report.packs.join(", ")));
    }
    let mut stops: Vec<(&str, &str)> = Vec::new();
    for finding in report.findings.iter().filter(|f| f.severity == "fatal") {
        let stop = (finding.hop.as_str(), finding.message.as_str());
        if !stops.contains(&stop) {
            stops.push(stop);
        }
    }
    for (hop, message) in stops {
        let _ = writeln!(
            html,
            "<p>stops at <strong>{}</strong>: {}</p>",
            escape(hop),
            escape(message)
        );
    }
    let _ = writeln!(html, "</header>");
}

/// Every finding, with its evidence, what was expected, and a link to its
/// hop; then those about the nodes the flow crosses but not its hops.
fn write_findings(html: &mut String, report: &Report) {
    // The hop each finding is about, for a link to its steps.
    let mut hop_of = vec![None; report.findings.len()];
    for (hop, out) in report.hops.iter().enumerate() {
        for &finding in &out.findings {
            if let Some(slot) = hop_of.get_mut(finding) {
                slot.get_or_insert(hop);
            }
        }
    }
    write_finding_list(html, "findings", "Findings", &report.findings, &hop_of);
    write_finding_list(
        html,
        "off-path",
        "Also on these nodes (not about this flow's paths)",
        &report.off_path,
        &[],
    );
}

/// A section of findings, each linked to its hop where `hop_of` has it.
fn write_finding_list(
    html: &mut String,
    id: &str,
    heading: &str,
    findings: &[FindingOut],
    hop_of: &[Option<usize>],
) {
    if findings.is_empty() {
        return;
    }
    let _ = writeln!(
        html,
        "<section id=\"{id}\">\n<h2>{heading}</h2>\n<ol class=\"findings\">"
    );
    for (index, finding) in findings.iter().enumerate() {
        let at = match hop_of.get(index).copied().flatten() {
            Some(hop) => format!(
                "<a href=\"#hop={hop}\" data-hop=\"{hop}\">{}</a>",
                escape(&finding.hop)
            ),
            None => escape(&finding.hop),
        };
        let _ = writeln!(
            html,
            "<li><span class=\"severity {0}\">{0}</span> <code>{1}</code> at {at}: {2}{3}",
            escape(finding.severity),
            escape(&finding.id),
            finding.status.prefix(),
            escape(&finding.message),
        );
        // An object's check that cannot tell has no file to point at.
        if !finding.evidence.is_empty() {
            let _ = writeln!(
                html,
                "<div class=\"evidence\">evidence: <code>{}</code></div>",
                escape(&finding.evidence)
            );
        }
        if let Some(expected) = &finding.expected {
            let _ = writeln!(
                html,
                "<div class=\"expected\">expected: {}</div>",
                escape(expected)
            );
        }
        if let Some(remediation) = &finding.remediation {
            let _ = writeln!(
                html,
                "<div class=\"remediation\">remediation: {}</div>",
                escape(remediation)
            );
        }
        let _ = writeln!(html, "</li>");
    }
    let _ = writeln!(html, "</ol>\n</section>");
}

/// Each hop's steps and findings, hidden until the hop is chosen; the hop
/// where the verdict's path stops is shown at first.
fn write_hops(html: &mut String, report: &Report, picture: &Picture) {
    let first = picture
        .ends
        .iter()
        .find(|end| end.outcome != Outcome::Delivered)
        .map(|end| end.hop);
    let _ = writeln!(html, "<section id=\"hops\">\n<h2>Hop</h2>");
    let _ = writeln!(
        html,
        "<p id=\"hop-hint\"{}>Click a hop, in the picture or in a path, to see its steps.</p>",
        if first.is_some() { " hidden" } else { "" }
    );
    for (index, hop) in report.hops.iter().enumerate() {
        let hidden = if first == Some(index) { "" } else { " hidden" };
        let what = &picture.hops[index].what;
        let _ = writeln!(
            html,
            "<article class=\"hop-detail\" id=\"hop-{index}\"{hidden}>\n<h3><code>{}</code>: {}</h3>\n<table class=\"steps\">",
            escape(&hop.id),
            escape(what)
        );
        for step in &hop.steps {
            let (kind, fields) = step_fields(&step.step);
            let _ = write!(html, "<tr><th>{kind}</th><td>");
            for (number, (name, value)) in fields.iter().enumerate() {
                if number > 0 {
                    let _ = write!(html, "<br>");
                }
                let _ = write!(
                    html,
                    "<span class=\"field\">{name}:</span> {}",
                    escape(value)
                );
            }
            if step.assumed {
                let _ = write!(
                    html,
                    " <span class=\"assumed\">{}</span>",
                    assumed_mark(true)
                );
            }
            let _ = writeln!(html, "</td></tr>");
        }
        let _ = writeln!(html, "</table>");
        for &finding in &hop.findings {
            if let Some(finding) = report.findings.get(finding) {
                let _ = writeln!(
                    html,
                    "<p><span class=\"severity {0}\">{0}</span> <code>{1}</code>: {2}</p>",
                    escape(finding.severity),
                    escape(&finding.id),
                    escape(&finding.message)
                );
            }
        }
        let _ = writeln!(html, "</article>");
    }
    let _ = writeln!(html, "</section>");
}

/// The paths as lists of their hops, each a button that shows its steps.
fn write_paths(html: &mut String, report: &Report, picture: &Picture) {
    let _ = writeln!(
        html,
        "<section id=\"paths\">\n<h2>Paths</h2>\n<ol class=\"paths\">"
    );
    for end in &picture.ends {
        let path = &report.paths[end.path];
        let _ = writeln!(
            html,
            "<li class=\"{}\"><strong>{}</strong>: {}\n<ol class=\"chain\">",
            end.outcome.name(),
            escape(&end.title),
            escape(&end.verdict)
        );
        for &hop in &path.hops {
            let id = report.hops.get(hop).map_or("?", |h| h.id.as_str());
            let _ = writeln!(
                html,
                "<li><button type=\"button\" data-hop=\"{hop}\">{}</button></li>",
                escape(id)
            );
        }
        let _ = writeln!(html, "</ol></li>");
    }
    let _ = writeln!(html, "</ol>\n</section>");
}

/// A step's kind and its fields by name, in the contract's order
/// (`docs/json.md`, "Steps").
fn step_fields(step: &StepKindOut) -> (&'static str, Vec<(&'static str, String)>) {
    match step {
        StepKindOut::Sent { packet } => ("sent", vec![("packet", packet.clone())]),
        StepKindOut::Received { interface, packet } => (
            "received",
            vec![("interface", interface.clone()), ("packet", packet.clone())],
        ),
        StepKindOut::Route {
            rule,
            route,
            result,
        } => (
            "route",
            vec![
                ("result", result.clone()),
                ("route", route.clone()),
                ("rule", rule.clone()),
            ],
        ),
        StepKindOut::Translated {
            hook,
            table,
            translation,
        } => (
            "translated",
            vec![
                ("translation", translation.clone()),
                ("hook", hook.clone()),
                ("table", table.clone()),
            ],
        ),
        StepKindOut::Netfilter {
            decision,
            table,
            chain,
            rule,
            line,
            ..
        } => {
            let mut fields = vec![
                ("decision", decision.clone()),
                ("table", table.clone()),
                ("chain", chain.clone()),
                ("rule", rule.clone()),
            ];
            if let Some(line) = line {
                fields.push(("dump line", line.to_string()));
            }
            ("netfilter", fields)
        }
        StepKindOut::Neighbour {
            address,
            interface,
            result,
        } => (
            "neighbour",
            vec![
                ("address", address.clone()),
                ("interface", interface.clone()),
                ("result", result.clone()),
            ],
        ),
        StepKindOut::Program {
            device,
            hook,
            program,
            verdict,
            why,
        } => (
            "program",
            vec![
                ("program", program.clone()),
                ("device", device.clone()),
                ("hook", hook.clone()),
                ("verdict", verdict.clone()),
                ("why", why.clone()),
            ],
        ),
        StepKindOut::Bridged { bridge, port } => (
            "bridged",
            vec![("bridge", bridge.clone()), ("port", port.clone())],
        ),
        StepKindOut::Encapsulated { device, outer } => (
            "encapsulated",
            vec![("device", device.clone()), ("outer", outer.clone())],
        ),
        StepKindOut::Decapsulated { device, inner } => (
            "decapsulated",
            vec![("device", device.clone()), ("inner", inner.clone())],
        ),
        StepKindOut::Delivered { socket } => ("delivered", vec![("socket", socket.clone())]),
        StepKindOut::Stopped {
            disposition,
            reason,
        } => (
            "stopped",
            vec![
                ("disposition", disposition.to_string()),
                ("reason", reason.clone()),
            ],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::fanned_out;
    use sha2::{Digest, Sha256};

    fn base64(bytes: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut text = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    text.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
                } else {
                    text.push('=');
                }
            }
        }
        text
    }

    #[test]
    fn a_diagnosis_at_the_bound_on_paths_is_drawn_in_linear_time() {
        // The walker's bound on paths, each of eight hops.
        let report = fanned_out(4096, 7);
        let started = std::time::Instant::now();
        let page = render(&report);
        let elapsed = started.elapsed();
        assert!(page.contains("hop-4095-6"));
        assert!(
            page.contains("and 4090 more findings"),
            "the legend names six"
        );
        // Unoptimised, on a shared machine: quadratic work over 28,673 hops
        // and 4,096 paths would take minutes.
        assert!(elapsed.as_secs() < 20, "{elapsed:?}");
    }

    #[test]
    fn the_content_security_policy_allows_exactly_the_pages_script() {
        let digest = Sha256::digest(SCRIPT.as_bytes());
        assert_eq!(SCRIPT_HASH, format!("sha256-{}", base64(&digest)));
    }
}
