//! Running a command on a node: this machine, a `--node-exec` template (SSH,
//! `ip netns exec` in the lab), or a collector pod through `pods/exec`.
//!
//! Every run has a time limit and a bound on what it may print, so that a
//! tool that hangs or floods cannot hang collection or exhaust memory.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use tokio::process::Command;

use super::collector::CollectorPod;
use super::command::{CommandOutput, RunError, find_tool, run_process};
use crate::snapshot::name::{BadName, NameKind, check_name};

/// How long one dump command may take before it is killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a node's commands run.
pub enum NodeShell {
    /// On this machine, as skoop runs (`collect local`).
    Local,
    /// `TEMPLATE COMMAND...` run by `sh` on this machine, `{node}` and
    /// `{address}` already substituted (`--node-exec 'ssh {node} sudo'`),
    /// the same values in `SKOOP_NODE` and `SKOOP_NODE_ADDRESS`.
    Template {
        node: String,
        address: String,
        command: String,
    },
    /// In a collector pod on the node (`pods/exec`).
    Pod(Box<CollectorPod>),
}

impl fmt::Debug for NodeShell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeShell::Local => f.write_str("Local"),
            NodeShell::Template { node, command, .. } => {
                write!(f, "Template({node}: {command})")
            }
            NodeShell::Pod(pod) => write!(f, "Pod({})", pod.name()),
        }
    }
}

impl NodeShell {
    /// A `--node-exec` template for `node` (whose first InternalIP is
    /// `address`; without one, its name stands in). The values are checked
    /// first, the name as a Kubernetes node name and the address as an IP
    /// address: neither can then hold a character any shell treats
    /// specially, so `{node}` and `{address}` are replaced as they are and
    /// stay inert in every quoting context (bare, in single or double
    /// quotes, and re-parsed by a remote shell after `ssh`), where quoting
    /// for one context would break in another (`"node={node}"`). They are
    /// also in the environment, `SKOOP_NODE` and `SKOOP_NODE_ADDRESS`. The
    /// command follows the template as separate arguments.
    pub fn template(
        template: &str,
        node: &str,
        address: Option<&str>,
    ) -> Result<NodeShell, TemplateError> {
        check_name(NameKind::Node, node)?;
        let address = match address {
            Some(address) => match address.parse::<IpAddr>() {
                Ok(ip) => ip.to_string(),
                Err(_) => {
                    return Err(TemplateError::Address {
                        node: node.to_string(),
                        address: address.to_string(),
                    });
                }
            },
            None => node.to_string(),
        };
        let command = template
            .replace("{node}", node)
            .replace("{address}", &address);
        Ok(NodeShell::Template {
            node: node.to_string(),
            address,
            command,
        })
    }

    /// Runs `argv` (after `prefix`, the words that enter a namespace) with
    /// `stdin` as its standard input, within `timeout`.
    pub async fn run(
        &self,
        prefix: &[String],
        argv: &[String],
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<CommandOutput, RunError> {
        let (tool, args) = argv
            .split_first()
            .ok_or_else(|| RunError::CouldNotStart("empty command".into()))?;
        match self {
            NodeShell::Local => {
                let program =
                    find_tool(tool).ok_or_else(|| RunError::ToolMissing { tool: tool.clone() })?;
                let command = if let Some((first, rest)) = prefix.split_first() {
                    // The prefix's own program (`ip`, `nsenter`) is found the
                    // same way; the tool is passed by its full path.
                    let first = find_tool(first).ok_or_else(|| RunError::ToolMissing {
                        tool: first.clone(),
                    })?;
                    let mut command = Command::new(first);
                    command.args(rest).arg(&program).args(args);
                    command
                } else {
                    let mut command = Command::new(&program);
                    command.args(args);
                    command
                };
                run_process(command, tool, stdin, timeout).await
            }
            NodeShell::Template {
                node,
                address,
                command,
            } => {
                // `exec` so that killing the shell on timeout kills the
                // template's program (ssh, ip netns exec) too.
                let mut process = Command::new("sh");
                process
                    .env("SKOOP_NODE", node)
                    .env("SKOOP_NODE_ADDRESS", address)
                    .arg("-c")
                    .arg(format!("exec {command} \"$@\""))
                    .arg("skoop-node-exec")
                    .args(prefix)
                    .args(argv);
                let output = run_process(process, tool, stdin, timeout).await?;
                // 127: the shell (local or remote) did not find the tool.
                if output.code == Some(127) {
                    return Err(RunError::ToolMissing { tool: tool.clone() });
                }
                Ok(output)
            }
            NodeShell::Pod(pod) => {
                let words: Vec<String> = prefix.iter().chain(argv).cloned().collect();
                let output = pod.exec(&words, stdin, timeout).await?;
                // The runtime refuses to start a program the image lacks
                // (runc: `exec: "bpftool": executable file not found in
                // $PATH`, a failure status with no exit code); through a
                // prefix (nsenter) it exits 127.
                let not_in_image =
                    output.code.is_none() && output.status.contains("executable file not found");
                if not_in_image {
                    return Err(RunError::ToolMissing {
                        tool: words[0].clone(),
                    });
                }
                if output.code == Some(127) {
                    return Err(RunError::ToolMissing { tool: tool.clone() });
                }
                Ok(output)
            }
        }
    }
}

/// Why a `--node-exec` template is not run for a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error(transparent)]
    Name(#[from] BadName),
    #[error("node {node}'s InternalIP {address:?} is not an IP address; refused")]
    Address { node: String, address: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::command::tests::block_on;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn template_substitutes_node_and_address() {
        let shell =
            NodeShell::template("ssh {address} sudo -n # {node}", "n1", Some("10.0.0.1")).unwrap();
        let NodeShell::Template { command, .. } = shell else {
            panic!("a template")
        };
        assert_eq!(command, "ssh 10.0.0.1 sudo -n # n1");
    }

    // Issue 36 item 6: `{node}` inside double quotes ran a node named
    // `n1$(touch PWNED)`.
    #[test]
    fn a_node_name_or_address_that_could_run_as_code_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let pwned = dir.path().join("PWNED");
        let template = r#"echo "node={node} at {address}" >/dev/null; env"#;
        let node = format!("n1$(touch {})", pwned.display());
        let refused = NodeShell::template(template, &node, None).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("is not a Kubernetes node name"),
            "{refused}"
        );
        let address = format!("10.0.0.1$(touch {})", pwned.display());
        let refused = NodeShell::template(template, "n1", Some(&address)).unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!("node n1's InternalIP {address:?} is not an IP address; refused")
        );
        assert!(!pwned.exists());
    }

    #[test]
    fn the_node_and_its_address_are_in_the_environment_and_inert_in_double_quotes() {
        let shell = NodeShell::template(
            r#"env NODE="{node}" ADDR="{address}""#,
            "n1",
            Some("fd00::1"),
        )
        .unwrap();
        let output = block_on(shell.run(
            &[],
            &words(&[
                "sh",
                "-c",
                r#"printf '%s|' "$NODE" "$ADDR" "$SKOOP_NODE" "$SKOOP_NODE_ADDRESS" "$0""#,
                "a b",
            ]),
            None,
            Duration::from_secs(10),
        ))
        .unwrap();
        assert!(output.success(), "{output:?}");
        assert_eq!(output.stdout, b"n1|fd00::1|n1|fd00::1|a b|");
    }

    #[test]
    fn stdin_reaches_the_command() {
        let output = block_on(NodeShell::Local.run(
            &[],
            &words(&["sh", "-s", "--", "x"]),
            Some(b"echo got \"$1\"\n"),
            Duration::from_secs(10),
        ))
        .unwrap();
        assert_eq!(output.stdout, b"got x\n");
    }

    #[test]
    fn a_command_that_hangs_is_killed_at_its_time_limit() {
        let started = std::time::Instant::now();
        let err = block_on(NodeShell::Local.run(
            &[],
            &words(&["sleep", "30"]),
            None,
            Duration::from_millis(300),
        ))
        .unwrap_err();
        assert_eq!(err, RunError::TimedOut(Duration::from_millis(300)));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_missing_tool_is_named_locally_and_through_a_template() {
        let argv = words(&["skoop-no-such-tool", "-x"]);
        let local = block_on(NodeShell::Local.run(&[], &argv, None, Duration::from_secs(5)));
        let template = NodeShell::template("env", "n", None).unwrap();
        let remote = block_on(template.run(&[], &argv, None, Duration::from_secs(5)));
        for result in [local, remote] {
            assert_eq!(
                result.unwrap_err(),
                RunError::ToolMissing {
                    tool: "skoop-no-such-tool".into()
                }
            );
        }
    }
}
