//! Running a command on a node: this machine, a `--node-exec` template (SSH,
//! `ip netns exec` in the lab), or a collector pod through `pods/exec`.
//!
//! Every run has a time limit and a bound on what it may print, so that a
//! tool that hangs or floods cannot hang collection or exhaust memory.

use std::fmt;
use std::time::Duration;

use tokio::process::Command;

use super::collector::CollectorPod;
use super::command::{CommandOutput, RunError, find_tool, run_process};

/// How long one dump command may take before it is killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a node's commands run.
pub enum NodeShell {
    /// On this machine, as skoop runs (`collect local`).
    Local,
    /// `TEMPLATE COMMAND...` run by `sh` on this machine, `{node}` and
    /// `{address}` already substituted (`--node-exec 'ssh {node} sudo'`).
    Template { node: String, command: String },
    /// In a collector pod on the node (`pods/exec`).
    Pod(Box<CollectorPod>),
}

impl fmt::Debug for NodeShell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeShell::Local => f.write_str("Local"),
            NodeShell::Template { node, command } => {
                write!(f, "Template({node}: {command})")
            }
            NodeShell::Pod(pod) => write!(f, "Pod({})", pod.name()),
        }
    }
}

impl NodeShell {
    /// A `--node-exec` template for `node` (whose first InternalIP is
    /// `address`). `{node}` and `{address}` are replaced by the shell-quoted
    /// values; the command follows the template as separate arguments.
    pub fn template(template: &str, node: &str, address: Option<&str>) -> NodeShell {
        let command = template
            .replace("{node}", &shell_quote(node))
            .replace("{address}", &shell_quote(address.unwrap_or(node)));
        NodeShell::Template {
            node: node.to_string(),
            command,
        }
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
            NodeShell::Template { command, .. } => {
                // `exec` so that killing the shell on timeout kills the
                // template's program (ssh, ip netns exec) too.
                let mut process = Command::new("sh");
                process
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
                if output.code == Some(127) {
                    return Err(RunError::ToolMissing { tool: tool.clone() });
                }
                Ok(output)
            }
        }
    }
}

/// `text` quoted for `sh`: in single quotes, each `'` written as `'\''`.
pub fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@=+,".contains(c))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::command::tests::block_on;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("node-1"), "node-1");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(reboot)"), "'$(reboot)'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn template_substitutes_quoted_node_and_address() {
        let shell = NodeShell::template("ssh {address} sudo -n # {node}", "n;1", Some("10.0.0.1"));
        let NodeShell::Template { command, .. } = shell else {
            panic!()
        };
        assert_eq!(command, "ssh 10.0.0.1 sudo -n # 'n;1'");
    }

    #[test]
    fn template_runs_the_command_after_the_template_as_separate_words() {
        let shell = NodeShell::template("env SKOOP_NODE={node}", "node 1", None);
        let output = block_on(shell.run(
            &[],
            &words(&["sh", "-c", "printf '%s|' \"$SKOOP_NODE\" \"$0\"", "a b"]),
            None,
            Duration::from_secs(10),
        ))
        .unwrap();
        assert!(output.success(), "{output:?}");
        assert_eq!(output.stdout, b"node 1|a b|");
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
        let template = NodeShell::template("env", "n", None);
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
