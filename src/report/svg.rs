//! `skoop diagnose -o svg`: the picture drawn by skoop itself, no Graphviz
//! needed: the legend (the question, the verdict, the key findings) above
//! the path tree that [`Layout`] places. Every hop is a group with its
//! index (`data-hop`), which the HTML report's script uses to show its
//! steps. All text from the snapshot is escaped ([`escape`]).

use std::fmt::Write as _;

use super::layout::{
    Edge, FONT, LINE, Layout, LegendStyle, PADDING, Placed, SMALL_FONT, SMALL_LINE,
};
use super::markup::escape;
use super::picture::{Outcome, Picture};

/// The stroke, fill and dash pattern an outcome is drawn with: the width
/// and dashes tell them apart in grey as the colours do in colour.
fn colours(outcome: Outcome) -> (&'static str, &'static str, &'static str, f64) {
    match outcome {
        Outcome::Delivered => ("#1b7f3b", "#e8f5e9", "none", 1.5),
        Outcome::Leaves => ("#1565c0", "#e3f2fd", "8 4", 1.5),
        Outcome::Unknown => ("#8d6e00", "#fff8e1", "2 3", 2.0),
        Outcome::Stopped => ("#c62828", "#ffebee", "none", 3.5),
    }
}

/// The picture as a standalone SVG document.
pub fn render(picture: &Picture) -> String {
    let layout = Layout::new(picture);
    let mut svg = String::new();
    let (width, height) = (layout.width, layout.height);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{FONT}" role="img">"#
    );
    let _ = writeln!(
        svg,
        "<title>{}</title>",
        escape(&format!("{}: {}", picture.request, picture.verdict))
    );
    let _ = writeln!(
        svg,
        r##"<defs><marker id="skoop-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555555"/></marker></defs>"##
    );
    let _ = writeln!(
        svg,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    for (style, y, line) in &layout.legend {
        let attributes = match style {
            LegendStyle::Request => r##"font-size="13" fill="#222222""##.to_string(),
            LegendStyle::Verdict => {
                let (stroke, _, _, _) = colours(picture.outcome);
                format!(r#"font-size="16" font-weight="bold" fill="{stroke}""#)
            }
            LegendStyle::Finding => r##"fill="#333333""##.to_string(),
            LegendStyle::Key => format!(r##"font-size="{SMALL_FONT}" fill="#555555""##),
        };
        let _ = writeln!(
            svg,
            r#"<text x="20" y="{y:.1}" {attributes}>{}</text>"#,
            escape(line)
        );
    }
    for edge in &layout.end_links {
        write_edge(&mut svg, edge, r#"stroke-dasharray="3 3""#);
    }
    for edge in &layout.links {
        write_edge(&mut svg, edge, r#"marker-end="url(#skoop-arrow)""#);
    }
    for (index, (hop, placed)) in picture.hops.iter().zip(&layout.hops).enumerate() {
        let (stroke, fill, dashes, stroke_width) = match hop.stop {
            Some(outcome) => colours(outcome),
            None if hop.assumed => ("#555555", "#f5f5f5", "6 4", 1.5),
            None => ("#555555", "#f7f9fc", "none", 1.5),
        };
        let mut tooltip = vec![hop.title.clone(), hop.what.clone()];
        tooltip.extend(hop.notes.iter().cloned());
        let _ = writeln!(
            svg,
            r#"<g class="hop" data-hop="{index}" tabindex="0" cursor="pointer"><title>{}</title>"#,
            escape(&tooltip.join("\n"))
        );
        write_box(&mut svg, placed, stroke, fill, dashes, stroke_width);
        let _ = writeln!(svg, "</g>");
    }
    for (end, placed) in picture.ends.iter().zip(&layout.ends) {
        let (stroke, fill, dashes, stroke_width) = colours(end.outcome);
        let _ = writeln!(
            svg,
            r#"<g class="end {}" data-path="{}">"#,
            end.outcome.name(),
            end.path
        );
        write_box(&mut svg, placed, stroke, fill, dashes, stroke_width);
        let _ = writeln!(svg, "</g>");
    }
    let _ = writeln!(svg, "</svg>");
    svg
}

/// A rounded box and its lines, the first in bold.
fn write_box(
    svg: &mut String,
    placed: &Placed,
    stroke: &str,
    fill: &str,
    dashes: &str,
    stroke_width: f64,
) {
    let rect = placed.rect;
    let _ = writeln!(
        svg,
        r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="6" fill="{fill}" stroke="{stroke}" stroke-width="{stroke_width}" stroke-dasharray="{dashes}"/>"#,
        rect.x, rect.y, rect.width, rect.height
    );
    for (number, line) in placed.lines.iter().enumerate() {
        let weight = if number == 0 {
            r#" font-weight="bold""#
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" fill="#111111"{weight}>{}</text>"##,
            rect.x + PADDING,
            rect.y + PADDING + LINE * (number as f64 + 1.0) - 3.0,
            escape(line)
        );
    }
}

fn write_edge(svg: &mut String, edge: &Edge, attributes: &str) {
    let points: Vec<String> = edge
        .points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = writeln!(
        svg,
        r##"<polyline points="{}" fill="none" stroke="#555555" stroke-width="1.5" {attributes}/>"##,
        points.join(" ")
    );
    if edge.lines.is_empty() {
        return;
    }
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" font-size="{SMALL_FONT}" fill="#333333">"##,
        edge.label_x, edge.label_y
    );
    for (number, line) in edge.lines.iter().enumerate() {
        let dy = if number == 0 { 0.0 } else { SMALL_LINE };
        let _ = write!(
            svg,
            r#"<tspan x="{:.1}" dy="{dy}">{}</tspan>"#,
            edge.label_x,
            escape(line)
        );
    }
    let _ = writeln!(svg, "</text>");
}
