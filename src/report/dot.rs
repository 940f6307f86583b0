//! `skoop diagnose -o dot`: the path graph in Graphviz's DOT language. Hops
//! are boxes grouped by the node they are on (a cluster each), links are
//! edges labelled with their kind, interfaces, the packet on the wire and
//! the paths through them, and each path ends in a node of its own saying
//! how it ended; the graph's label is the verdict and the key findings.

use std::fmt::Write as _;

use super::markup::hidden;
use super::picture::{Outcome, Picture};

/// Colours by outcome; the shape, border and the words in each label say the
/// same thing without colour.
fn style(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Delivered => {
            r##"shape=box, style="rounded,filled", color="#1b7f3b", fillcolor="#e8f5e9""##
        }
        Outcome::Leaves => {
            r##"shape=cds, style="filled,dashed", color="#1565c0", fillcolor="#e3f2fd""##
        }
        Outcome::Unknown => {
            r##"shape=note, style="filled,dotted", color="#8d6e00", fillcolor="#fff8e1""##
        }
        Outcome::Stopped => {
            r##"shape=octagon, style="filled,bold", color="#c62828", fillcolor="#ffebee", penwidth=3"##
        }
    }
}

/// The picture as a DOT digraph.
pub fn render(picture: &Picture) -> String {
    let mut dot = String::new();
    let mut legend = vec![
        picture.request.clone(),
        format!("verdict: {}", picture.verdict),
    ];
    legend.extend(picture.other_families.iter().cloned());
    legend.extend(picture.key_findings.iter().cloned());
    legend.extend(picture.more_findings.clone());
    legend.extend(picture.off_path.clone());
    let _ = writeln!(dot, "digraph skoop {{");
    let _ = writeln!(
        dot,
        "  graph [rankdir=TB, labelloc=t, labeljust=l, fontname=\"monospace\", label={}];",
        quoted(&legend.join("\n"), "\\l")
    );
    let _ = writeln!(
        dot,
        "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#fafafa\", fontname=\"monospace\", fontsize=11];"
    );
    let _ = writeln!(dot, "  edge [fontname=\"monospace\", fontsize=9];");
    // One cluster per node, in the order the nodes first appear.
    let nodes: Vec<Option<&str>> = picture.hops.iter().map(|h| h.node.as_deref()).collect();
    let mut clusters: Vec<&str> = Vec::new();
    for node in nodes.iter().flatten() {
        if !clusters.contains(node) {
            clusters.push(node);
        }
    }
    for (number, cluster) in clusters.iter().enumerate() {
        let _ = writeln!(dot, "  subgraph cluster_{number} {{");
        let _ = writeln!(
            dot,
            "    label={}; style=\"rounded,dashed\"; color=\"#777777\";",
            quoted(&format!("node {cluster}"), "\\n")
        );
        for (index, _) in nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| **node == Some(*cluster))
        {
            write_hop(&mut dot, picture, index, "    ");
        }
        let _ = writeln!(dot, "  }}");
    }
    for (index, _) in nodes.iter().enumerate().filter(|(_, node)| node.is_none()) {
        write_hop(&mut dot, picture, index, "  ");
    }
    for link in &picture.links {
        let _ = writeln!(
            dot,
            "  h{} -> h{} [label={}];",
            link.from,
            link.to,
            quoted(&link.lines.join("\n"), "\\l")
        );
    }
    for end in &picture.ends {
        let _ = writeln!(
            dot,
            "  end{} [{}, label={}];",
            end.path,
            style(end.outcome),
            quoted(&format!("{}\n{}", end.title, end.verdict), "\\n")
        );
        let _ = writeln!(
            dot,
            "  h{} -> end{} [style=dashed, arrowhead=none];",
            end.hop, end.path
        );
    }
    let _ = writeln!(dot, "}}");
    dot
}

fn write_hop(dot: &mut String, picture: &Picture, index: usize, indent: &str) {
    let hop = &picture.hops[index];
    let mut lines = vec![hop.title.clone(), hop.what.clone()];
    lines.extend(hop.notes.iter().cloned());
    let mut attributes = String::new();
    if let Some(stop) = hop.stop {
        attributes.push_str(style(stop));
        attributes.push_str(", ");
    } else if hop.assumed {
        attributes.push_str("style=\"rounded,filled,dashed\", ");
    }
    let _ = writeln!(
        dot,
        "{indent}h{index} [{attributes}label={}];",
        quoted(&lines.join("\n"), "\\l")
    );
}

/// A DOT quoted string: backslashes and quotes escaped, control characters
/// and bidirectional overrides ([`hidden`]) written visibly, and each line ended by `line_end` (`\l` left-justifies
/// it, `\n` centres it).
fn quoted(text: &str, line_end: &str) -> String {
    let mut out = String::from("\"");
    for (number, line) in text.split('\n').enumerate() {
        if number > 0 {
            out.push_str(line_end);
        }
        for c in line.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                c if hidden(c) => {
                    for e in c.escape_default() {
                        if e == '\\' {
                            out.push_str("\\\\");
                        } else {
                            out.push(e);
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }
    if line_end == "\\l" {
        out.push_str("\\l");
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_strings_cannot_end_early_or_inject_escapes() {
        assert_eq!(quoted("a\"b\\N\u{7}", "\\n"), r#""a\"b\\N\\u{7}""#);
        assert_eq!(quoted("one\ntwo", "\\l"), r#""one\ltwo\l""#);
    }
}
