//! Data out: what a diagnosis is shown as. The JSON contract of
//! `skoop diagnose -o json` (`docs/json.md`) is a set of plain output types
//! here, built from the engine's [`Diagnosis`](crate::engine::Diagnosis), so
//! that the engine can change shape without changing what users' scripts
//! read. The pictures (DOT, SVG, HTML) are drawn from those same types, so
//! that they never disagree with the JSON report.

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
