//! Where the SVG picture puts things. A diagnosis is a tree rooted at the
//! source: the paths share their first hops and fan out where a service
//! picks a backend or routing a nexthop. Each path gets a column, in the
//! report's order; a hop stands at its depth along its paths (a layer) and
//! over the middle of the columns of the paths through it, so a shared hop
//! is centred over its branches. Text is in a monospace font, so its width
//! is known without a font engine: labels are wrapped or shortened to fit.

use super::markup::shortened;
use super::picture::Picture;

/// Font sizes and the width of one character of the monospace font (0.6 em).
pub const FONT: f64 = 12.0;
pub const SMALL_FONT: f64 = 11.0;
pub const CHAR_WIDTH: f64 = FONT * 0.6;
pub const SMALL_CHAR_WIDTH: f64 = SMALL_FONT * 0.6;
pub const LINE: f64 = 15.0;
pub const SMALL_LINE: f64 = 13.0;
pub const PADDING: f64 = 8.0;

const MARGIN: f64 = 20.0;
const COLUMN: f64 = 360.0;
const HOP_WIDTH: f64 = 330.0;
const END_WIDTH: f64 = 230.0;
/// Lines of one note (a translation, why the hop stops) before it is cut.
const NOTE_LINES: usize = 3;
/// Lines of one finding in the legend before it is cut.
const FINDING_LINES: usize = 4;
/// Below a parent, the elbow of its edges; then the edge's label.
const ELBOW: f64 = 10.0;
const MIN_WIDTH: f64 = 780.0;

/// A box: its top left corner and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

impl Rect {
    pub fn centre_x(&self) -> f64 {
        self.x + self.width / 2.0
    }
    pub fn bottom(&self) -> f64 {
        self.y + self.height
    }
}

/// A box and the lines of text in it.
#[derive(Debug)]
pub struct Placed {
    pub rect: Rect,
    pub lines: Vec<String>,
}

/// An edge: its polyline and its label's lines, from `label_x`, `label_y`.
#[derive(Debug)]
pub struct Edge {
    pub points: Vec<(f64, f64)>,
    pub label_x: f64,
    pub label_y: f64,
    pub lines: Vec<String>,
}

/// The legend's lines, each with how it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegendStyle {
    Request,
    Verdict,
    Finding,
    Key,
}

#[derive(Debug)]
pub struct Layout {
    pub width: f64,
    pub height: f64,
    /// Each line with its style and baseline.
    pub legend: Vec<(LegendStyle, f64, String)>,
    pub hops: Vec<Placed>,
    pub links: Vec<Edge>,
    pub ends: Vec<Placed>,
    pub end_links: Vec<Edge>,
}

impl Layout {
    pub fn new(picture: &Picture) -> Layout {
        let columns = picture.paths.len().max(1);
        let placement = place(picture);
        let orphans = placement.iter().filter(|p| p.is_none()).count();
        // The last column's edge labels reach half a column beyond it.
        let width = (MARGIN * 2.0 + COLUMN * ((columns + orphans) as f64 + 0.5)).max(MIN_WIDTH);

        let (legend, top) = legend(picture, width);

        let slots = slots(&placement, columns);
        let layers = slots
            .iter()
            .map(|&(_, layer)| layer + 1)
            .chain(picture.ends.iter().map(|end| slots[end.hop].1 + 2))
            .max()
            .unwrap_or(0);
        let hop_lines = hop_lines(picture);
        let link_lines = link_lines(picture);

        let (tops, heights, y) = layer_tops(picture, &slots, &hop_lines, &link_lines, layers, top);
        let height = y + MARGIN;
        let bottom = |layer: usize| tops[layer] + heights[layer];
        let column_x = |column: f64| MARGIN + COLUMN * column + COLUMN / 2.0;

        let hops: Vec<Placed> = hop_lines
            .into_iter()
            .enumerate()
            .map(|(index, lines)| {
                let (column, layer) = slots[index];
                Placed {
                    rect: Rect {
                        x: column_x(column) - HOP_WIDTH / 2.0,
                        y: tops[layer],
                        width: HOP_WIDTH,
                        height: box_height(lines.len()),
                    },
                    lines,
                }
            })
            .collect();
        let links = picture
            .links
            .iter()
            .zip(link_lines)
            .map(|(link, lines)| {
                let (from, to) = (hops[link.from].rect, hops[link.to].rect);
                elbow(from, bottom(slots[link.from].1), to, lines)
            })
            .collect();
        let ends: Vec<Placed> = picture
            .ends
            .iter()
            .map(|end| Placed {
                rect: Rect {
                    x: column_x(end.path as f64) - END_WIDTH / 2.0,
                    y: tops[slots[end.hop].1 + 1],
                    width: END_WIDTH,
                    height: box_height(2),
                },
                lines: vec![end.title.clone(), end.verdict.clone()],
            })
            .collect();
        let end_links = picture
            .ends
            .iter()
            .zip(&ends)
            .map(|(end, placed)| {
                elbow(
                    hops[end.hop].rect,
                    bottom(slots[end.hop].1),
                    placed.rect,
                    Vec::new(),
                )
            })
            .collect();
        Layout {
            width,
            height,
            legend,
            hops,
            links,
            ends,
            end_links,
        }
    }
}

/// The legend's lines (the question, the verdict, the key findings, the
/// key), each with its style and baseline, and where the graph starts below
/// it.
fn legend(picture: &Picture, width: f64) -> (Vec<(LegendStyle, f64, String)>, f64) {
    let chars = ((width - MARGIN * 2.0) / CHAR_WIDTH) as usize;
    let mut legend = Vec::new();
    let mut y = MARGIN;
    for line in wrap(&picture.request, chars, 2) {
        y += LINE;
        legend.push((LegendStyle::Request, y, line));
    }
    y += LINE + 8.0;
    legend.push((
        LegendStyle::Verdict,
        y,
        format!("verdict: {}", picture.verdict),
    ));
    for other in &picture.other_families {
        y += LINE;
        legend.push((LegendStyle::Finding, y, other.clone()));
    }
    y += 4.0;
    for finding in &picture.key_findings {
        for line in wrap(finding, chars, FINDING_LINES) {
            y += LINE;
            legend.push((LegendStyle::Finding, y, line));
        }
    }
    for more in picture.more_findings.iter().chain(&picture.off_path) {
        for line in wrap(more, chars, FINDING_LINES) {
            y += LINE;
            legend.push((LegendStyle::Finding, y, line));
        }
    }
    y += 4.0;
    let key = "✔ delivered · ✖ stopped (thick red border) · ? cannot tell (dotted) · → leaves the cluster (dashed) · grey dashed box: assumed";
    for line in wrap(
        key,
        (chars as f64 * CHAR_WIDTH / SMALL_CHAR_WIDTH) as usize,
        3,
    ) {
        y += LINE;
        legend.push((LegendStyle::Key, y, line));
    }
    (legend, y + 24.0)
}

/// Each hop's (column, layer); a hop on no path gets a column of its own,
/// after the paths' `columns`.
fn slots(placement: &[Option<(f64, usize)>], columns: usize) -> Vec<(f64, usize)> {
    let mut orphan = columns;
    placement
        .iter()
        .map(|slot| {
            slot.unwrap_or_else(|| {
                orphan += 1;
                ((orphan - 1) as f64, 0)
            })
        })
        .collect()
}

/// Each hop box's lines: its title, what it is, its notes.
fn hop_lines(picture: &Picture) -> Vec<Vec<String>> {
    picture
        .hops
        .iter()
        .map(|hop| {
            let chars = ((HOP_WIDTH - PADDING * 2.0) / CHAR_WIDTH) as usize;
            let mut lines = vec![shortened(&hop.title, chars), shortened(&hop.what, chars)];
            for note in &hop.notes {
                lines.extend(wrap(note, chars, NOTE_LINES));
            }
            lines
        })
        .collect()
}

/// Each link's label lines, shortened to a column.
fn link_lines(picture: &Picture) -> Vec<Vec<String>> {
    let label_chars = ((COLUMN - 24.0) / SMALL_CHAR_WIDTH) as usize;
    picture
        .links
        .iter()
        .map(|link| {
            link.lines
                .iter()
                .map(|l| shortened(l, label_chars))
                .collect()
        })
        .collect()
}

/// Each layer's top and height (as tall as its tallest box, with room above
/// it for the labels of the edges coming into it), and where the last ends.
fn layer_tops(
    picture: &Picture,
    slots: &[(f64, usize)],
    hop_lines: &[Vec<String>],
    link_lines: &[Vec<String>],
    layers: usize,
    top: f64,
) -> (Vec<f64>, Vec<f64>, f64) {
    let mut heights = vec![0.0f64; layers];
    let mut label_room = vec![0usize; layers];
    for (index, lines) in hop_lines.iter().enumerate() {
        let layer = slots[index].1;
        heights[layer] = heights[layer].max(box_height(lines.len()));
    }
    for end in &picture.ends {
        let layer = slots[end.hop].1 + 1;
        heights[layer] = heights[layer].max(box_height(2));
    }
    for (link, lines) in picture.links.iter().zip(link_lines) {
        let layer = slots[link.to].1;
        label_room[layer] = label_room[layer].max(lines.len());
    }
    let mut tops = Vec::with_capacity(layers);
    let mut y = top;
    for layer in 0..layers {
        if layer > 0 {
            y += ELBOW + 12.0 + SMALL_LINE * label_room[layer].max(1) as f64;
        }
        tops.push(y);
        y += heights[layer];
    }
    (tops, heights, y)
}

/// Each hop's (column, layer), `None` for a hop on no path. The column is
/// the mean of the columns of the paths through the hop; the layer its
/// position along the first of them.
fn place(picture: &Picture) -> Vec<Option<(f64, usize)>> {
    let mut columns: Vec<Vec<usize>> = vec![Vec::new(); picture.hops.len()];
    let mut layers: Vec<Option<usize>> = vec![None; picture.hops.len()];
    for (column, path) in picture.paths.iter().enumerate() {
        for (layer, &hop) in path.iter().enumerate() {
            if hop < columns.len() {
                columns[hop].push(column);
                layers[hop].get_or_insert(layer);
            }
        }
    }
    columns
        .iter()
        .zip(layers)
        .map(|(columns, layer)| {
            let layer = layer?;
            let mean = columns.iter().sum::<usize>() as f64 / columns.len() as f64;
            Some((mean, layer))
        })
        .collect()
}

fn box_height(lines: usize) -> f64 {
    PADDING * 2.0 + LINE * lines as f64
}

/// From the bottom of `from` down below its layer (`layer_bottom`), across,
/// and down to the top of `to`; the label beside the last leg, where no box
/// is.
fn elbow(from: Rect, layer_bottom: f64, to: Rect, lines: Vec<String>) -> Edge {
    let (x1, y1) = (from.centre_x(), from.bottom());
    let (x2, y2) = (to.centre_x(), to.y);
    let bend = layer_bottom + ELBOW;
    Edge {
        points: vec![(x1, y1), (x1, bend), (x2, bend), (x2, y2)],
        label_x: x2 + 6.0,
        label_y: bend + SMALL_LINE,
        lines,
    }
}

/// `text` in lines of at most `width` characters, broken at spaces (a
/// longer word is cut), at most `max_lines` of them, the last one marked
/// with `…` when text is left out.
pub fn wrap(text: &str, width: usize, max_lines: usize) -> Vec<String> {
    let width = width.max(2);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let mut word = word.to_string();
        loop {
            let used = line.chars().count();
            let length = word.chars().count();
            let gap = usize::from(used > 0);
            if used + gap + length <= width {
                if gap == 1 {
                    line.push(' ');
                }
                line.push_str(&word);
                break;
            }
            if used > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // A word longer than a line: cut it.
            let head: String = word.chars().take(width).collect();
            word = word.chars().skip(width).collect();
            lines.push(head);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    if lines.len() > max_lines {
        lines.truncate(max_lines);
        if let Some(last) = lines.last_mut() {
            let kept: String = last.chars().take(width - 1).collect();
            *last = kept + "…";
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::fanned_out;
    use crate::report::json::PathOut;

    #[test]
    fn hops_on_no_path_get_columns_of_their_own() {
        // Two paths; the second path's hops are left on none, and a report
        // with no path at all.
        let mut report = fanned_out(2, 3);
        report.paths.truncate(1);
        for report in [report, {
            let mut none = fanned_out(2, 3);
            none.paths.clear();
            none
        }] {
            let layout = Layout::new(&Picture::new(&report));
            assert_eq!(layout.hops.len(), report.hops.len());
            for placed in &layout.hops {
                let rect = placed.rect;
                assert!(
                    rect.x >= 0.0 && rect.x + rect.width <= layout.width,
                    "{rect:?}"
                );
                assert!(rect.y >= 0.0 && rect.bottom() <= layout.height, "{rect:?}");
            }
        }
    }

    #[test]
    fn a_fan_out_puts_each_path_in_its_column_under_the_shared_source() {
        let report = fanned_out(4, 2);
        let layout = Layout::new(&Picture::new(&report));
        let source = layout.hops[0].rect;
        let firsts: Vec<f64> = report
            .paths
            .iter()
            .map(|path: &PathOut| layout.hops[path.hops[1]].rect.centre_x())
            .collect();
        assert!(
            firsts.windows(2).all(|pair| pair[0] < pair[1]),
            "{firsts:?}"
        );
        let middle = (firsts[0] + firsts[3]) / 2.0;
        assert!((source.centre_x() - middle).abs() < 0.01);
        assert!(layout.hops[1].rect.y > source.bottom());
    }

    #[test]
    fn text_wraps_at_spaces_and_cuts_long_words() {
        assert_eq!(wrap("one two three", 7, 5), ["one two", "three"]);
        assert_eq!(wrap("abcdefghij", 4, 5), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 4, 5), [""]);
    }

    #[test]
    fn wrapped_text_beyond_its_lines_is_marked_as_cut() {
        let lines = wrap("aa bb cc dd ee", 5, 2);
        assert_eq!(lines.len(), 2);
        assert!(lines[1].ends_with('…'), "{lines:?}");
    }
}
