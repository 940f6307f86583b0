//! Which namespace dump `route lookup` and `netfilter trace` read: a dump
//! directory (`--netns DIR`), or one of a snapshot's, by the node or pod it
//! belongs to (`--snapshot DIR --node NAME | --pod NS/NAME`).

use std::path::{Path, PathBuf};

use clap::Args;
use skoop::engine::Candidates;
use skoop::snapshot::netns::{DumpFile, NetnsDump};

#[derive(Debug, Args)]
pub struct NamespaceArgs {
    /// A namespace dump directory (as `skoop collect local` writes one).
    #[arg(long, value_name = "DIR")]
    netns: Option<PathBuf>,
    /// A snapshot, whose dump --node or --pod picks (ignored with --netns).
    #[arg(short, long, value_name = "DIR", env = "SKOOP_SNAPSHOT")]
    snapshot: Option<PathBuf>,
    /// The node whose host namespace to read, in --snapshot.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pod", "netns"])]
    node: Option<String>,
    /// The pod whose namespace to read, in --snapshot.
    #[arg(long, value_name = "NS/NAME", conflicts_with = "netns")]
    pod: Option<String>,
}

impl NamespaceArgs {
    /// The dump directory the arguments name; `Err` says why there is none,
    /// with the names the snapshot has where one was misspelt.
    pub fn dir(&self) -> Result<PathBuf, String> {
        if let Some(dir) = &self.netns {
            return match dir.is_dir() {
                true => Ok(dir.clone()),
                false => Err(format!(
                    "{}: no such namespace dump directory",
                    dir.display()
                )),
            };
        }
        let Some(snapshot) = &self.snapshot else {
            return Err(
                "give --netns DIR, or --snapshot DIR (or SKOOP_SNAPSHOT) with --node NAME or --pod NS/NAME"
                    .into(),
            );
        };
        let nodes = snapshot.join("nodes");
        if !nodes.is_dir() {
            return Err(format!(
                "--snapshot {}: no nodes/ directory, so no namespace dumps",
                snapshot.display()
            ));
        }
        match (&self.node, &self.pod) {
            (Some(node), _) => {
                let hosts: Vec<String> = subdirs(&nodes)
                    .into_iter()
                    .filter(|name| nodes.join(name).join("host").is_dir())
                    .collect();
                if hosts.contains(node) {
                    return Ok(nodes.join(node).join("host"));
                }
                Err(format!(
                    "--node {node}: {} has no dump of that node's host namespace{}",
                    snapshot.display(),
                    Candidates::new(node, hosts)
                ))
            }
            (None, Some(pod)) => {
                // (NS/NAME, the node whose pods/ holds it)
                let mut dumps: Vec<(String, String)> = Vec::new();
                for node in subdirs(&nodes) {
                    let pods = nodes.join(&node).join("pods");
                    for namespace in subdirs(&pods) {
                        for name in subdirs(&pods.join(&namespace)) {
                            dumps.push((format!("{namespace}/{name}"), node.clone()));
                        }
                    }
                }
                let on: Vec<&str> = dumps
                    .iter()
                    .filter(|(name, _)| name == pod)
                    .map(|(_, node)| node.as_str())
                    .collect();
                match on.as_slice() {
                    [node] => Ok(nodes.join(node).join("pods").join(pod)),
                    [] => Err(format!(
                        "--pod {pod}: {} has no dump of that pod{}",
                        snapshot.display(),
                        Candidates::new(pod, dumps.into_iter().map(|(name, _)| name))
                    )),
                    several => Err(format!(
                        "--pod {pod}: {} has dumps of it on {}: give the one with --netns DIR",
                        snapshot.display(),
                        several.join(" and ")
                    )),
                }
            }
            (None, None) => Err(format!(
                "--snapshot {}: give --node NAME or --pod NS/NAME to pick its dump",
                snapshot.display()
            )),
        }
    }
}

/// The names of the directories in `dir`, sorted; none where it cannot be read.
fn subdirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// What a dump lacks of `files`, each said
/// as unreadable (with its first problem) or not collected; `None` when it
/// lacks none. A command that cannot work without them says this, not that
/// the files are all missing.
pub fn lacking_files(dump: &NetnsDump, files: &[DumpFile]) -> Option<String> {
    let lacking: Vec<String> = files
        .iter()
        .filter_map(|file| dump.lacking(*file))
        .map(|lacking| lacking.to_string())
        .collect();
    (!lacking.is_empty()).then(|| lacking.join("; "))
}
