//! PLACEHOLDER: replaced by the parser for this dump file.
use crate::snapshot::problem::Parsed;

#[derive(Debug, Clone)]
pub struct ListeningSocket;

pub fn parse(_text: &str) -> Parsed<Vec<ListeningSocket>> {
    (None, Vec::new())
}
