//! PLACEHOLDER: replaced by the parser for this dump file.
use crate::snapshot::problem::Parsed;

#[derive(Debug, Clone)]
pub struct Route;

pub fn parse(_text: &str) -> Parsed<Vec<Route>> {
    (None, Vec::new())
}
