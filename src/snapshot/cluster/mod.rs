//! PLACEHOLDER: replaced by the cluster object loader and model.
use std::path::Path;

use super::problem::Problem;

#[derive(Debug, Default, Clone)]
pub struct Cluster;

pub fn load(_dir: &Path) -> (Cluster, Vec<Problem>) {
    (Cluster, Vec::new())
}
