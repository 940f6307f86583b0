//! PLACEHOLDER: replaced by the parser for this dump file.
use crate::snapshot::problem::Parsed;

#[derive(Debug, Clone)]
pub struct IpSets;

pub fn parse(_text: &str) -> Parsed<IpSets> {
    (None, Vec::new())
}
