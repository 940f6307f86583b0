//! Names the snapshot has, offered for a name it lacks.

use std::fmt;

use crate::snapshot::Snapshot;

/// What a snapshot has instead of a name it lacks: the closest of its
/// names by edit distance, else a few of them, so that a typo is one
/// command away from fixed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Candidates {
    /// The names closest to the one asked for, if any is close.
    pub closest: Vec<String>,
    /// Otherwise, the first names the snapshot has, sorted.
    pub listed: Vec<String>,
    /// How many more it has than `listed` shows.
    pub more: usize,
}

/// How many names an error lists at most.
const LISTED: usize = 8;

impl Candidates {
    /// `names` as candidates for `wanted`: the closest, if at most a third
    /// of its length away (at least one edit), else a few of them.
    pub fn new<I: IntoIterator<Item = String>>(wanted: &str, names: I) -> Candidates {
        let mut names: Vec<String> = names.into_iter().collect();
        names.sort();
        names.dedup();
        let within = 2 * (wanted.chars().count() / 3).max(1);
        let distances: Vec<usize> = names.iter().map(|n| edit_distance(wanted, n)).collect();
        if let Some(&nearest) = distances.iter().filter(|&&d| d <= within).min() {
            let closest = names
                .iter()
                .zip(&distances)
                .filter(|(_, d)| **d == nearest)
                .map(|(name, _)| name.clone())
                .take(3)
                .collect();
            return Candidates {
                closest,
                ..Candidates::default()
            };
        }
        let more = names.len().saturating_sub(LISTED);
        names.truncate(LISTED);
        Candidates {
            closest: Vec::new(),
            listed: names,
            more,
        }
    }
}

/// `; did you mean a?`, `; it has: a, b (and 3 more)`, or `; it has none`.
impl fmt::Display for Candidates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.closest.is_empty() {
            return write!(f, "; did you mean {}?", self.closest.join(" or "));
        }
        if self.listed.is_empty() {
            return f.write_str("; it has none");
        }
        write!(f, "; it has: {}", self.listed.join(", "))?;
        if self.more > 0 {
            write!(f, " (and {} more)", self.more)?;
        }
        Ok(())
    }
}

/// The edit distance between two names, in half edits: inserting,
/// deleting or replacing a character is 2, replacing one by a character
/// that looks like it (`O` and `0`, `l` and `1`) or by itself in the other
/// case is 1, so that `web-O` is closer to `web-0` than to `web-1`.
fn edit_distance(a: &str, b: &str) -> usize {
    let replace = |x: char, y: char| {
        let look_alike = |c: char| match c.to_ascii_lowercase() {
            'o' => '0',
            'l' | 'i' => '1',
            c => c,
        };
        if x == y {
            0
        } else if look_alike(x) == look_alike(y) {
            1
        } else {
            2
        }
    };
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).map(|j| 2 * j).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = 2 * (i + 1);
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 2).min(row[j] + 2).min(diagonal + replace(ca, cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// What a `--from`/`--to` that is none of the forms may have meant: a bare
/// name is compared with the snapshot's nodes, pods and services, and the
/// closest named in its form (`node1` -> `node/node-1`); `None` when none
/// is close.
pub fn suggest_endpoint(snapshot: &Snapshot, text: &str) -> Option<Candidates> {
    let cluster = &snapshot.cluster;
    // (the name as written bare, the endpoint that names it)
    let mut names: Vec<(String, String)> = Vec::new();
    for node in cluster.nodes() {
        names.push((node.meta.name.clone(), format!("node/{}", node.meta.name)));
    }
    for pod in cluster.pods() {
        let full = format!("{}/{}", pod.meta.namespace, pod.meta.name);
        names.push((pod.meta.name.clone(), full.clone()));
        names.push((full.clone(), full));
    }
    for service in cluster.services() {
        let full = format!("{}/{}", service.meta.namespace, service.meta.name);
        names.push((service.meta.name.clone(), format!("svc/{full}")));
        names.push((full.clone(), format!("svc/{full}")));
    }
    let close = Candidates::new(text, names.iter().map(|(bare, _)| bare.clone()));
    let mut closest: Vec<String> = Vec::new();
    for bare in &close.closest {
        for (name, endpoint) in &names {
            if name == bare && !closest.contains(endpoint) {
                closest.push(endpoint.clone());
            }
        }
    }
    (!closest.is_empty()).then(|| Candidates {
        closest,
        ..Candidates::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_suggest_the_closest_or_list_a_few() {
        let names = || ["default/web-0", "default/web-1", "kube-system/dns"].map(String::from);
        assert_eq!(
            Candidates::new("default/web-O", names()).to_string(),
            "; did you mean default/web-0?"
        );
        assert_eq!(
            Candidates::new("default/web-7", names()).to_string(),
            "; did you mean default/web-0 or default/web-1?"
        );
        assert_eq!(
            Candidates::new("prod/api", names()).to_string(),
            "; it has: default/web-0, default/web-1, kube-system/dns"
        );
        let many = (0..20).map(|i| format!("pod-{i:02}"));
        assert_eq!(
            Candidates::new("something-else", many).to_string(),
            "; it has: pod-00, pod-01, pod-02, pod-03, pod-04, pod-05, pod-06, pod-07 (and 12 more)"
        );
        assert_eq!(Candidates::new("x", []).to_string(), "; it has none");
    }

    #[test]
    fn edit_distance_counts_look_alike_characters_as_half_an_edit() {
        assert_eq!(edit_distance("web-0", "web-0"), 0);
        assert_eq!(edit_distance("web-O", "web-0"), 1);
        assert_eq!(edit_distance("web-O", "web-1"), 2);
        assert_eq!(edit_distance("node1", "node-1"), 2);
        assert_eq!(edit_distance("", "abc"), 6);
    }
}
