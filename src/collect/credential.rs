//! A kubeconfig's exec credential plugin (client-go's `users[].user.exec`),
//! run by skoop within a time limit. kube runs the plugin itself, blocking
//! and without a limit, when it builds its client: a plugin that never
//! answers would hang the run. Here it runs as every command of collection
//! does (`command::run_process`: its own process group, killed at the
//! limit), without a terminal, and the credential it prints — a token, or
//! a client certificate and key — takes its place in the kubeconfig handed
//! to kube, which then runs nothing. The credential is taken once per run,
//! and not renewed when it expires.

use std::time::Duration;

use base64::Engine;
use kube::config::{AuthInfo, Context, ExecAuthCluster, ExecConfig, Kubeconfig};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use tokio::process::Command;

use super::command::{RunError, run_process};

/// How long an exec credential plugin may take, by default: as long as one
/// API call.
pub const DEFAULT_EXEC_PLUGIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the exec plugin gave no credential.
#[derive(Debug, thiserror::Error)]
#[error("the exec credential plugin `{command}` of user {user}: {failure}")]
pub struct ExecPluginError {
    pub user: String,
    /// The plugin's command and arguments, as the kubeconfig gives them.
    pub command: String,
    pub failure: ExecFailure,
}

/// What went wrong with the plugin.
#[derive(Debug, thiserror::Error)]
pub enum ExecFailure {
    /// It did not run to its end: not found, killed at the time limit, too
    /// much output.
    #[error("{}", ran(.0, .1))]
    Run(RunError, Option<String>),
    /// It exited with an error.
    #[error("{status}{}", last_line(.stderr))]
    Failed { status: String, stderr: String },
    /// What it printed is not an `ExecCredential`.
    #[error("its answer is not an ExecCredential: {0}")]
    Unreadable(String),
    /// Its `ExecCredential` has no credential in it.
    #[error("its ExecCredential holds no token, nor a client certificate and key")]
    Empty,
    /// `provideClusterInfo` asks for the cluster, which could not be read.
    #[error("provideClusterInfo: {0}")]
    ClusterInfo(String),
}

/// Why the plugin did not run to its end, with how to raise its time
/// limit when that was it, and the kubeconfig's install hint.
fn ran(error: &RunError, install_hint: &Option<String>) -> String {
    let raise = match error {
        RunError::TimedOut(_) => " (--exec-plugin-timeout SECONDS raises the limit)",
        _ => "",
    };
    let hint = install_hint
        .as_ref()
        .map(|hint| format!("; {}", hint.trim()))
        .unwrap_or_default();
    format!("{error}{raise}{hint}")
}

fn last_line(stderr: &str) -> String {
    stderr
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .map(|line| format!(": {}", line.trim()))
        .unwrap_or_default()
}

/// The context skoop uses: the one named, else the current one.
pub fn context_of<'k>(kubeconfig: &'k Kubeconfig, name: Option<&str>) -> Option<&'k Context> {
    let name = name.or(kubeconfig.current_context.as_deref())?;
    kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.as_ref())
}

/// Runs the exec plugin of the user of `context` (else of the current
/// context) within `timeout`, where kube would run it (the user has no
/// auth-provider, username and password, token or token file), and puts
/// the credential it prints in its place.
pub async fn run_exec_plugin(
    kubeconfig: &mut Kubeconfig,
    context: Option<&str>,
    timeout: Duration,
) -> Result<(), ExecPluginError> {
    let Some(context) = context_of(kubeconfig, context).cloned() else {
        return Ok(());
    };
    let Some(index) = kubeconfig
        .auth_infos
        .iter()
        .position(|a| Some(&a.name) == context.user.as_ref())
    else {
        return Ok(());
    };
    let named = &kubeconfig.auth_infos[index];
    let user = named.name.clone();
    let Some(exec) = named
        .auth_info
        .as_ref()
        .filter(|auth| runs_exec(auth))
        .and_then(|auth| auth.exec.clone())
    else {
        return Ok(());
    };
    let fail = |failure| ExecPluginError {
        user: user.clone(),
        command: command_line(&exec),
        failure,
    };
    let cluster = match exec.provide_cluster_info {
        true => Some(cluster_info(kubeconfig, &context).map_err(&fail)?),
        false => None,
    };
    let status = credential(&exec, cluster, timeout).await.map_err(&fail)?;
    if let Some(auth) = kubeconfig.auth_infos[index].auth_info.as_mut() {
        put_in_place(auth, status).map_err(fail)?;
    }
    Ok(())
}

/// The cluster of `context`, as `provideClusterInfo` hands it to the plugin.
fn cluster_info(
    kubeconfig: &Kubeconfig,
    context: &Context,
) -> Result<ExecAuthCluster, ExecFailure> {
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| {
            ExecFailure::ClusterInfo("the context's cluster is not in the kubeconfig".into())
        })?;
    ExecAuthCluster::try_from(cluster).map_err(|e| ExecFailure::ClusterInfo(e.to_string()))
}

/// Whether kube would run the user's exec plugin: only when nothing it
/// tries first is there.
fn runs_exec(auth: &AuthInfo) -> bool {
    auth.auth_provider.is_none()
        && !(auth.username.is_some() && auth.password.is_some())
        && auth.token.is_none()
        && auth.token_file.is_none()
}

fn command_line(exec: &ExecConfig) -> String {
    std::iter::once(exec.command.clone().unwrap_or_default())
        .chain(exec.args.iter().flatten().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `ExecCredential` skoop hands the plugin in `KUBERNETES_EXEC_INFO`,
/// and the one it prints.
#[derive(Debug, Serialize, Deserialize)]
struct ExecCredential {
    #[serde(rename = "apiVersion", skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<Spec>,
    #[serde(skip_serializing)]
    status: Option<Status>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    interactive: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<ExecAuthCluster>,
}

#[derive(Debug, Deserialize)]
struct Status {
    token: Option<String>,
    #[serde(rename = "clientCertificateData")]
    client_certificate_data: Option<String>,
    #[serde(rename = "clientKeyData")]
    client_key_data: Option<String>,
}

/// Runs the plugin, as kube would but with no terminal (`interactive:
/// false`, no input) and within `timeout`, and reads what it prints.
async fn credential(
    exec: &ExecConfig,
    cluster: Option<ExecAuthCluster>,
    timeout: Duration,
) -> Result<Status, ExecFailure> {
    let program = exec.command.as_deref().unwrap_or_default();
    let mut command = Command::new(program);
    command.args(exec.args.iter().flatten());
    for pair in exec.env.iter().flatten() {
        if let (Some(name), Some(value)) = (pair.get("name"), pair.get("value")) {
            command.env(name, value);
        }
    }
    let info = ExecCredential {
        api_version: exec.api_version.clone(),
        kind: Some("ExecCredential".into()),
        spec: Some(Spec {
            interactive: false,
            cluster,
        }),
        status: None,
    };
    let info = serde_json::to_string(&info).map_err(|e| ExecFailure::Unreadable(e.to_string()))?;
    command.env("KUBERNETES_EXEC_INFO", info);
    let output = run_process(command, program, None, timeout)
        .await
        .map_err(|e| ExecFailure::Run(e, exec.install_hint.clone()))?;
    if !output.success() {
        return Err(ExecFailure::Failed {
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    // client-go reads the answer as YAML, of which JSON is a part.
    let answer: ExecCredential = serde_saphyr::from_slice(&output.stdout)
        .map_err(|e| ExecFailure::Unreadable(e.to_string()))?;
    answer.status.ok_or(ExecFailure::Empty)
}

/// The plugin's credential in its place: a token, or a client certificate
/// and key (as `client-certificate-data` and `client-key-data`, base64).
fn put_in_place(auth: &mut AuthInfo, status: Status) -> Result<(), ExecFailure> {
    match status {
        Status {
            client_certificate_data: Some(certificate),
            client_key_data: Some(key),
            ..
        } => {
            let base64 = base64::engine::general_purpose::STANDARD;
            auth.client_certificate_data = Some(base64.encode(certificate));
            auth.client_key_data = Some(SecretString::from(base64.encode(key)));
        }
        Status {
            token: Some(token), ..
        } => auth.token = Some(SecretString::from(token)),
        _ => return Err(ExecFailure::Empty),
    }
    auth.exec = None;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(user: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:9'}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n\
             users: [{{name: u, user: {user}}}]\n"
        ))
        .unwrap()
    }

    fn user(kubeconfig: &Kubeconfig) -> &AuthInfo {
        kubeconfig.auth_infos[0].auth_info.as_ref().unwrap()
    }

    fn run(kubeconfig: &mut Kubeconfig, timeout: Duration) -> Result<(), ExecPluginError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_exec_plugin(kubeconfig, None, timeout))
    }

    #[test]
    fn the_plugins_token_takes_its_place() {
        let mut config = kubeconfig(
            "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ['-c', \
             'echo \"{\\\"kind\\\":\\\"ExecCredential\\\",\\\"status\\\":{\\\"token\\\":\\\"t0ken\\\"}}\"']}}",
        );
        run(&mut config, Duration::from_secs(10)).unwrap();
        let auth = user(&config);
        assert!(auth.exec.is_none());
        use secrecy::ExposeSecret;
        assert_eq!(auth.token.as_ref().unwrap().expose_secret(), "t0ken");
    }

    #[test]
    fn a_plugin_that_never_answers_is_killed_at_the_limit_naming_itself() {
        let mut config = kubeconfig(
            "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ['-c', 'sleep 600'], \
             installHint: 'install it'}}",
        );
        let started = std::time::Instant::now();
        let error = run(&mut config, Duration::from_secs(1)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            error.to_string(),
            "the exec credential plugin `/bin/sh -c sleep 600` of user u: killed after 1 s without finishing \
             (--exec-plugin-timeout SECONDS raises the limit); install it"
        );
    }

    #[test]
    fn a_failing_plugin_says_its_status_and_last_words() {
        let mut config = kubeconfig(
            "{exec: {command: /bin/sh, args: ['-c', 'echo not logged in >&2; exit 3']}}",
        );
        let error = run(&mut config, Duration::from_secs(10)).unwrap_err();
        assert!(
            error.to_string().ends_with("exit status: 3: not logged in"),
            "{error}"
        );
    }

    #[test]
    fn a_user_with_a_token_runs_no_plugin() {
        let mut config = kubeconfig("{token: abc, exec: {command: /nonexistent-skoop-plugin}}");
        run(&mut config, Duration::from_secs(10)).unwrap();
        assert!(user(&config).exec.is_some());
    }
}
