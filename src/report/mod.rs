//! Data out: what a diagnosis, a matrix or a diff is shown as, returned as
//! values (types to encode, strings, lines) for the command line to write.
//! The JSON contract of `skoop diagnose -o json` (`docs/json.md`) is a set
//! of plain output types here, built from the engine's
//! [`Diagnosis`](crate::engine::Diagnosis), so that the engine can change
//! shape without changing what users' scripts read. The pictures (DOT, SVG,
//! HTML) are drawn from those same types, so that they never disagree with
//! the JSON report; the text reports (`text`) are lines, not yet escaped
//! for a terminal.

pub mod csv;
pub mod dot;
#[cfg(test)]
mod fixture;
pub mod heatmap;
pub mod html;
pub mod json;
pub mod layout;
pub mod markup;
pub mod matrix;
pub mod picture;
pub mod svg;
pub mod text;
