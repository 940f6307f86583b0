//! `skoop packs new NAME --kind cni|rules`: a new pack whose own tests pass
//! at once, to be edited from there.

use std::path::{Path, PathBuf};

use super::{HOOKS, HookSpec, PackKind};

/// Why a pack could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{0:?} is not a pack name: lowercase letters, digits and dashes")]
    BadName(String),
    #[error("{0}: already exists")]
    Exists(PathBuf),
    #[error("{0}: cannot write: {1}")]
    Write(PathBuf, std::io::Error),
}

/// Writes a new pack named `name` into `dir` (which must not exist) and
/// returns the files written.
pub fn new_pack(dir: &Path, name: &str, kind: PackKind) -> Result<Vec<PathBuf>, ScaffoldError> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        return Err(ScaffoldError::BadName(name.to_owned()));
    }
    if dir.exists() {
        return Err(ScaffoldError::Exists(dir.to_path_buf()));
    }
    let mut files = vec![
        ("pack.yaml".to_owned(), manifest(name, kind)),
        ("checks.rhai".to_owned(), SCRIPT.to_owned()),
    ];
    if kind == PackKind::Cni {
        files.push(("hooks.rhai".to_owned(), hook_stubs()));
    }
    for (case, forwarding, expect) in [
        (
            "healthy",
            1,
            format!("absent: [{name}.node.ip-forward, {name}.node.loopback-up]\n"),
        ),
        (
            "forwarding-off",
            0,
            format!("findings: [{name}.node.ip-forward]\nabsent: [{name}.node.loopback-up]\n"),
        ),
    ] {
        let base = format!("tests/{case}");
        files.push((
            format!("{base}/expect.yaml"),
            format!("description: node-1 with net.ipv4.ip_forward = {forwarding}\n{expect}"),
        ));
        files.push((
            format!("{base}/snapshot/cluster/nodes.yaml"),
            NODE.to_owned(),
        ));
        if kind == PackKind::Cni {
            files.push((
                format!("{base}/snapshot/cluster/daemonset.yaml"),
                daemon_set(name),
            ));
        }
        let host = format!("{base}/snapshot/nodes/node-1/host");
        files.push((
            format!("{host}/sysctl.txt"),
            format!("net.ipv4.ip_forward = {forwarding}\n"),
        ));
        files.push((format!("{host}/ip-link.json"), LINKS.to_owned()));
    }
    let mut written = Vec::new();
    for (relative, text) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| ScaffoldError::Write(parent.to_path_buf(), e))?;
        }
        std::fs::write(&path, text).map_err(|e| ScaffoldError::Write(path.clone(), e))?;
        written.push(path);
    }
    Ok(written)
}

/// The walker's hooks a CNI pack implements (`mode` needs modes, `service`
/// is a service proxy's, `detect` only refines the manifest's signs).
fn scaffold_hooks() -> impl Iterator<Item = &'static HookSpec> {
    HOOKS
        .iter()
        .filter(|hook| !matches!(hook.name, "detect" | "mode" | "service"))
}

/// `hooks.rhai` of a new CNI pack: each hook's contract, and a body with
/// the plainest answer, to be replaced.
fn hook_stubs() -> String {
    let mut text = String::from(
        "// The walker's hooks: what the CNI does where the snapshot lacks a node's or\n\
         // a pod's dump. Each stub gives the plainest answer (no opinion, not\n\
         // encapsulated, not masqueraded); write what your CNI does, then name the\n\
         // function under `hooks:` in pack.yaml.\n",
    );
    for hook in scaffold_hooks() {
        let answer = match hook.name {
            "masquerade" => "false",
            _ => "()",
        };
        text.push_str(&format!(
            "\n// {}\n// Returns {}.\nfn {}({}) {{\n    {answer}\n}}\n",
            hook.doc,
            hook.returns,
            hook.name,
            hook.params.join(", ")
        ));
    }
    text
}

fn manifest(name: &str, kind: PackKind) -> String {
    let detect = match kind {
        PackKind::Cni => {
            let hooks: String = scaffold_hooks()
                .map(|hook| format!("#   {0}: {0}\n", hook.name))
                .collect();
            format!(
                "# How the CNI is recognised in a snapshot: any of these signals.\n\
                 detect:\n  daemonsets:\n    - {{namespace: kube-system, name: {name}}}\n\
                 # Name a hook of hooks.rhai here once it says what the CNI does\n\
                 # (docs/packs.md, Hooks):\n\
                 # hooks:\n{hooks}"
            )
        }
        PackKind::Rules => String::new(),
    };
    format!(
        "# A skoop pack: see docs/packs.md for every field.\n\
         name: {name}\n\
         version: 0.1.0\n\
         description: What {name} checks.\n\
         engine: \">=0.1.0\"\n\
         contract: {contract}\n\
         kind: {kind}\n\
         {detect}\
         parameters:\n  \
           forwarding:\n    \
             type: int\n    \
             default: 1\n    \
             doc: The value net.ipv4.ip_forward must have on nodes.\n    \
             allowed: [0, 1]\n\
         checks:\n  \
           - id: {name}.node.ip-forward\n    \
             severity: critical\n    \
             scope: node\n    \
             kind: sysctl\n    \
             key: net.ipv4.ip_forward\n    \
             expect: ${{params.forwarding}}\n    \
             message: \"${{subject}} has ${{actual}}; pods on it need ${{expected}}\"\n    \
             remediation: sysctl -w net.ipv4.ip_forward=1\n  \
           - id: {name}.node.loopback-up\n    \
             severity: warning\n    \
             scope: node\n    \
             kind: script\n    \
             function: loopback_up\n    \
             message: \"${{subject}}: ${{actual}}\"\n",
        kind = kind.as_str(),
        contract = super::contract::CONTRACT
    )
}

const SCRIPT: &str = r#"// Script checks take `ctx` and return () when all is well, or a message,
// #{actual, expected}, or an array of those: one finding each.
fn loopback_up(ctx) {
    let lo = ctx.netns.link("lo");
    if lo == () {
        return "no loopback device";
    }
    if !lo.up {
        return #{actual: "lo is " + lo.state, expected: "lo up"};
    }
}
"#;

const NODE: &str = "apiVersion: v1
kind: Node
metadata:
  name: node-1
spec:
  podCIDR: 10.244.1.0/24
status:
  addresses:
    - {type: InternalIP, address: 172.18.0.11}
  conditions:
    - {type: Ready, status: \"True\"}
";

const LINKS: &str = r#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"mtu":65536,"operstate":"UNKNOWN","link_type":"loopback","address":"00:00:00:00:00:00"}]
"#;

fn daemon_set(name: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
  namespace: kube-system
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: {name}
          image: example.org/{name}:latest
"
    )
}
