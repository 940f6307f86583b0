//! Collector pods: one short-lived privileged pod per node, on the host's
//! network and PIDs, in which the dump commands run through `pods/exec`.
//!
//! **Invariant:** a collector pod never outlives the run that made it. Each
//! carries the run's label; the run deletes its pods on success, error,
//! timeout and Ctrl-C, `activeDeadlineSeconds` ends one the run could not
//! delete, and `skoop collect cleanup` removes leftovers by label.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status as ExecStatus;
use kube::api::{Api, AttachParams, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::api::{Connection, LiveError};
use super::command::{CommandOutput, MAX_STDOUT, RunError, read_bounded};
use super::rbac::Request;

/// The image collector pods run unless `--collector-image` says otherwise:
/// skoop's own, built from Debian's packages by `deploy/collector/build.sh`
/// (iproute2, iptables nft and legacy, ipset, ipvsadm, nft, ss, sysctl,
/// conntrack and nsenter), tagged with this skoop's version.
pub const DEFAULT_IMAGE: &str = concat!("skoop.io/collector:", env!("CARGO_PKG_VERSION"));
/// Labels every collector pod carries.
pub const TOOL_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "skoop");
pub const RUN_LABEL: &str = "skoop.io/run";
/// The collector's container.
const CONTAINER: &str = "collector";
/// The backstop: the kubelet ends a collector pod after this long, even
/// if nobody deletes it.
const ACTIVE_DEADLINE_SECONDS: i64 = 900;
/// The collector container's memory limit: the largest dump's output
/// (256 MiB at most) and the tools' own memory.
const MEMORY_LIMIT: &str = "512Mi";

/// What collector pods are made of and where.
#[derive(Debug, Clone)]
pub struct CollectorOptions {
    pub namespace: String,
    pub image: String,
    /// How long a pod may take to be Running.
    pub start_timeout: Duration,
    /// This run's id: the value of [`RUN_LABEL`].
    pub run: String,
    /// Whether this run has asked for a collector pod yet (shared by the
    /// options' clones): a run that has not has none to delete, and does not
    /// wait on a server that failed it to say so.
    pub asked: Arc<AtomicBool>,
}

/// A Running collector pod on one node.
pub struct CollectorPod {
    api: Api<Pod>,
    name: String,
    namespace: String,
}

/// The collector pod for `node`, as created (golden-tested).
pub fn pod_manifest(node: &str, options: &CollectorOptions) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "skoop-collect-",
            "namespace": options.namespace,
            "labels": {
                TOOL_LABEL.0: TOOL_LABEL.1,
                "app.kubernetes.io/component": "collector",
                RUN_LABEL: options.run,
            },
        },
        "spec": {
            "nodeName": node,
            "hostNetwork": true,
            "hostPID": true,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "restartPolicy": "Never",
            "activeDeadlineSeconds": ACTIVE_DEADLINE_SECONDS,
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"operator": "Exists"}],
            "priorityClassName": "system-node-critical",
            "containers": [{
                "name": CONTAINER,
                "image": options.image,
                "imagePullPolicy": "IfNotPresent",
                // Idle until deleted; the deadline above is the backstop.
                "command": ["sleep", ACTIVE_DEADLINE_SECONDS.to_string()],
                "securityContext": {"privileged": true},
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                              "limits": {"memory": MEMORY_LIMIT}},
            }],
        },
    })
}

/// Creates the collector namespace when it does not exist, with the Pod
/// Security label privileged pods need.
pub async fn ensure_namespace(
    connection: &Connection,
    options: &CollectorOptions,
) -> Result<(), LiveError> {
    let api: Api<Namespace> = Api::all(connection.client.clone());
    let get = Request::new("get", "namespaces", None);
    if connection
        .call(get, api.get_opt(&options.namespace))
        .await?
        .is_some()
    {
        return Ok(());
    }
    let namespace: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": options.namespace,
                     "labels": {"pod-security.kubernetes.io/enforce": "privileged"}},
    }))
    .expect("a valid Namespace");
    let create = Request::new("create", "namespaces", None);
    match connection
        .call(create, api.create(&PostParams::default(), &namespace))
        .await
    {
        Err(e) if e.code() == Some(409) => Ok(()),
        other => other.map(drop),
    }
}

impl CollectorPod {
    /// Creates the collector pod on `node` and waits until it is Running;
    /// when it does not get there in time, says why from its conditions,
    /// container states and events (and deletes it).
    pub async fn start(
        connection: &Connection,
        node: &str,
        options: &CollectorOptions,
    ) -> Result<CollectorPod, LiveError> {
        let nodes: Api<Node> = Api::all(connection.client.clone());
        let get = Request::new("get", "nodes", None);
        let found = connection.call(get, nodes.get(node)).await?;
        if let Some(why) = not_ready(&found) {
            return Err(LiveError::NodeNotReady {
                node: node.to_string(),
                why,
            });
        }
        let api: Api<Pod> = Api::namespaced(connection.client.clone(), &options.namespace);
        let manifest: Pod =
            serde_json::from_value(pod_manifest(node, options)).expect("a valid Pod");
        let create = Request::new("create", "pods", Some(&options.namespace));
        options.asked.store(true, Ordering::Relaxed);
        let created = connection
            .call(create, api.create(&PostParams::default(), &manifest))
            .await?;
        let pod = CollectorPod {
            api,
            name: created.metadata.name.unwrap_or_default(),
            namespace: options.namespace.clone(),
        };
        match pod
            .wait_running(connection, node, options.start_timeout)
            .await
        {
            Ok(()) => Ok(pod),
            Err(e) => {
                pod.delete(connection).await;
                Err(e)
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    async fn wait_running(
        &self,
        connection: &Connection,
        node: &str,
        timeout: Duration,
    ) -> Result<(), LiveError> {
        let started = Instant::now();
        let mut last = None;
        while started.elapsed() < timeout {
            let get = Request::new("get", "pods", Some(&self.namespace));
            let pod = match connection.call(get, self.api.get(&self.name)).await {
                Ok(pod) => pod,
                Err(LiveError::Api { code: 404, .. }) => {
                    return Err(LiveError::CollectorNotRunning {
                        pod: format!("{}/{}", self.namespace, self.name),
                        node: node.to_string(),
                        waited: started.elapsed(),
                        why: "it was deleted (evicted, or deleted by someone) before it ran"
                            .to_string(),
                    });
                }
                Err(e) => return Err(e),
            };
            let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
            match phase.as_deref() {
                Some("Running") => return Ok(()),
                Some("Failed" | "Succeeded") => break,
                _ => {}
            }
            last = Some(pod);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let why = match &last {
            Some(pod) => self.why_not_running(connection, pod).await,
            None => "it ended before it ran".to_string(),
        };
        Err(LiveError::CollectorNotRunning {
            pod: format!("{}/{}", self.namespace, self.name),
            node: node.to_string(),
            waited: timeout,
            why,
        })
    }

    /// What the pod's status and events say about why it is not Running.
    async fn why_not_running(&self, connection: &Connection, pod: &Pod) -> String {
        let mut reasons: Vec<String> = Vec::new();
        let status = pod.status.clone().unwrap_or_default();
        reasons.push(format!(
            "phase {}",
            status.phase.as_deref().unwrap_or("unknown")
        ));
        for condition in status.conditions.unwrap_or_default() {
            if condition.status != "True" {
                let detail = reason_and_message(&condition.reason, &condition.message);
                reasons.push(
                    format!("{} is {} {detail}", condition.type_, condition.status)
                        .trim()
                        .to_string(),
                );
            }
        }
        for container in status.container_statuses.unwrap_or_default() {
            if let Some(waiting) = container.state.and_then(|s| s.waiting) {
                let detail = reason_and_message(&waiting.reason, &waiting.message);
                reasons.push(format!("container waiting: {detail}"));
            }
        }
        let events: Api<Event> = Api::namespaced(connection.client.clone(), &self.namespace);
        let params = ListParams::default().fields(&format!("involvedObject.name={}", self.name));
        let list = Request::new("list", "events", Some(&self.namespace));
        if let Ok(list) = connection.call(list, events.list(&params)).await {
            for event in list.items.iter().rev().take(3) {
                let reason = event.reason.as_deref().unwrap_or("");
                let message = event.message.as_deref().unwrap_or("");
                reasons.push(format!("event {reason}: {message}"));
            }
        }
        if reasons.len() == 1 {
            reasons.push(
                "no condition or event reported: is a kubelet running on the node?".to_string(),
            );
        }
        reasons.join("; ")
    }

    /// Runs `argv` in the collector container through `pods/exec`.
    pub async fn exec(
        &self,
        argv: &[String],
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<CommandOutput, RunError> {
        let work = async {
            let params = AttachParams::default()
                .container(CONTAINER)
                .stdin(stdin.is_some())
                .stdout(true)
                .stderr(true);
            let mut process = match self.api.exec(&self.name, argv.to_vec(), &params).await {
                Ok(process) => process,
                Err(e) => return Err(self.gone().await.unwrap_or_else(|| exec_error(&e))),
            };
            let mut input = process.stdin();
            let stdout = process.stdout();
            let stderr = process.stderr();
            let status = process.take_status();
            let feed = async {
                if let (Some(pipe), Some(bytes)) = (input.as_mut(), stdin) {
                    let _ = pipe.write_all(bytes).await;
                    let _ = pipe.shutdown().await;
                }
                drop(input.take());
            };
            let (_, out, err) = tokio::join!(
                feed,
                read_bounded(stdout, MAX_STDOUT),
                read_bounded(stderr, 64 << 10)
            );
            let status = match status {
                Some(status) => status.await,
                None => None,
            };
            let _ = process.join().await;
            let stdout = out.ok_or(RunError::OutputTooLarge(MAX_STDOUT))?;
            let (code, words) = exit_code(status.as_ref());
            // A command killed with the container (OOM, eviction) ends
            // with SIGKILL's 137: say why where the pod says.
            if code.is_none_or(|code| code == 137)
                && let Some(gone) = self.gone().await
            {
                return Err(gone);
            }
            Ok(CommandOutput {
                code,
                status: words,
                stdout,
                stderr: err.unwrap_or_default(),
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| RunError::TimedOut(timeout))?
    }

    /// Why the pod can no longer run commands, where it cannot: deleted or
    /// being deleted (an eviction deletes it), failed (evicted by its
    /// kubelet), or its container ended (OOM-killed); `None` while it runs.
    async fn gone(&self) -> Option<RunError> {
        let pod = format!("{}/{}", self.namespace, self.name);
        let why = match self.api.get_opt(&self.name).await {
            Ok(None) => "it was deleted (evicted, or deleted by someone)".to_string(),
            Ok(Some(found)) => ended(&found)?,
            // The API server cannot say: the exec error stands.
            Err(_) => return None,
        };
        Some(RunError::CollectorGone { pod, why })
    }

    /// Deletes the pod now (no grace period); a failure is reported on
    /// stderr by the caller's cleanup, by label.
    pub async fn delete(&self, connection: &Connection) {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let delete = Request::new("delete", "pods", Some(&self.namespace));
        let _ = connection
            .call(delete, self.api.delete(&self.name, &params))
            .await;
    }
}

/// Why `pods/exec` could not start: kube-apiserver says "error dialing
/// backend" when it cannot connect to the kubelet (its own words, as
/// `kubectl exec` shows them), which is the same for every command on that
/// node; anything else as the error chain says it.
fn exec_error(error: &kube::Error) -> RunError {
    match error {
        kube::Error::Api(status) if status.message.starts_with("error dialing backend") => {
            RunError::KubeletUnreachable(status.message.clone())
        }
        _ => RunError::Exec(super::api::chain(error)),
    }
}

/// Why `node` is not Ready, from its `Ready` condition; `None` when it is.
fn not_ready(node: &Node) -> Option<String> {
    let conditions = node.status.as_ref()?.conditions.as_ref();
    let ready = conditions.and_then(|all| all.iter().find(|c| c.type_ == "Ready"));
    let Some(ready) = ready else {
        return Some("it has no Ready condition: no kubelet has registered it".to_string());
    };
    if ready.status == "True" {
        return None;
    }
    let since = (ready.last_transition_time.as_ref())
        .map(|time| format!(" since {}", time.0))
        .unwrap_or_default();
    let detail = reason_and_message(&ready.reason, &ready.message);
    Some(format!("Ready is {}{since}: {detail}", ready.status))
}

/// Why a collector pod that still exists can run no command: it is being
/// deleted, it has failed (an eviction by its kubelet), or its container
/// has terminated (OOM-killed); `None` while it runs.
fn ended(pod: &Pod) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Some("it is being deleted (evicted, or deleted by someone)".to_string());
    }
    let status = pod.status.as_ref()?;
    let terminated = (status.container_statuses.iter().flatten())
        .find_map(|c| c.state.as_ref()?.terminated.as_ref());
    if let Some(terminated) = terminated {
        let reason = terminated.reason.as_deref().unwrap_or("Terminated");
        let limit = match reason {
            "OOMKilled" => format!(" (the collector's memory limit is {MEMORY_LIMIT})"),
            _ => String::new(),
        };
        return Some(format!(
            "its container ended: {reason}, exit code {}{limit}",
            terminated.exit_code
        ));
    }
    match status.phase.as_deref() {
        Some("Failed" | "Succeeded") => Some(format!(
            "it is {} ({})",
            status.phase.as_deref().unwrap_or_default(),
            reason_and_message(&status.reason, &status.message)
        )),
        _ => None,
    }
}

/// A status's `reason: message`, as much of it as is there.
fn reason_and_message(reason: &Option<String>, message: &Option<String>) -> String {
    [reason.as_deref(), message.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(": ")
}

/// The exit code in a `pods/exec` status: `Success`, or `Failure` with
/// reason `NonZeroExitCode` and the code as the `ExitCode` cause.
fn exit_code(status: Option<&ExecStatus>) -> (Option<i32>, String) {
    let Some(status) = status else {
        return (None, "ended without an exit status".to_string());
    };
    if status.status.as_deref() == Some("Success") {
        return (Some(0), "exit status: 0".to_string());
    }
    let code = status
        .details
        .iter()
        .flat_map(|d| d.causes.iter().flatten())
        .find(|cause| cause.reason.as_deref() == Some("ExitCode"))
        .and_then(|cause| cause.message.as_deref()?.parse::<i32>().ok());
    match code {
        // SIGKILL's 128 + 9 in a container that still runs: the memory
        // cgroup's OOM killer takes the largest process, the command.
        Some(137) => (
            Some(137),
            format!(
                "exit status: 137 (SIGKILL: the OOM killer ends a command that outgrows the collector's memory limit, {MEMORY_LIMIT})"
            ),
        ),
        Some(code) => (Some(code), format!("exit status: {code}")),
        None => (
            None,
            format!(
                "failed: {}",
                status.message.as_deref().unwrap_or("no message")
            ),
        ),
    }
}

/// Deletes every collector pod with `labels` (a run's, or every skoop
/// pod's); returns the names deleted.
pub async fn delete_labelled(
    connection: &Connection,
    namespace: Option<&str>,
    labels: &BTreeMap<&str, &str>,
) -> Result<Vec<String>, LiveError> {
    let selector = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let api: Api<Pod> = match namespace {
        Some(namespace) => Api::namespaced(connection.client.clone(), namespace),
        None => Api::all(connection.client.clone()),
    };
    let list = Request::new("list", "pods", namespace);
    let pods = connection
        .call(list, api.list(&ListParams::default().labels(&selector)))
        .await?;
    let mut deleted = Vec::new();
    for pod in pods.items {
        let (Some(name), Some(ns)) = (pod.metadata.name, pod.metadata.namespace) else {
            continue;
        };
        let api: Api<Pod> = Api::namespaced(connection.client.clone(), &ns);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let delete = Request::new("delete", "pods", Some(&ns));
        match connection.call(delete, api.delete(&name, &params)).await {
            Ok(_) => deleted.push(format!("{ns}/{name}")),
            Err(e) if e.code() == Some(404) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_not_ready_says_its_condition() {
        let node = |conditions: serde_json::Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "node-2"},
                                          "status": {"conditions": conditions}}))
            .expect("a Node")
        };
        let ready = node(json!([{"type": "Ready", "status": "True"}]));
        assert_eq!(not_ready(&ready), None);
        let unknown = node(json!([
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
             "message": "Kubelet stopped posting node status.",
             "lastTransitionTime": "2026-12-06T11:02:13Z"},
        ]));
        assert_eq!(
            not_ready(&unknown).as_deref(),
            Some(
                "Ready is Unknown since 2026-12-06T11:02:13Z: NodeStatusUnknown: Kubelet stopped posting node status."
            )
        );
        assert!(not_ready(&node(json!([]))).is_some_and(|why| why.contains("no kubelet")));
    }

    #[test]
    fn a_collector_pod_that_cannot_run_commands_says_why() {
        let pod = |status: serde_json::Value, deleting: bool| -> Pod {
            let mut metadata = json!({"name": "skoop-collect-x"});
            if deleting {
                metadata["deletionTimestamp"] = json!("2026-12-06T11:00:00Z");
            }
            serde_json::from_value(json!({"metadata": metadata, "status": status})).expect("a Pod")
        };
        let running = json!({"phase": "Running", "containerStatuses": [{
            "name": "collector", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {}}}]});
        assert_eq!(ended(&pod(running.clone(), false)), None);
        assert!(ended(&pod(running, true)).is_some_and(|why| why.contains("being deleted")));
        let oom = json!({"phase": "Failed", "containerStatuses": [{
            "name": "collector", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]});
        assert_eq!(
            ended(&pod(oom, false)).as_deref(),
            Some(
                "its container ended: OOMKilled, exit code 137 (the collector's memory limit is 512Mi)"
            )
        );
        let evicted = json!({"phase": "Failed", "reason": "Evicted",
                             "message": "The node was low on resource: memory."});
        assert_eq!(
            ended(&pod(evicted, false)).as_deref(),
            Some("it is Failed (Evicted: The node was low on resource: memory.)")
        );
    }

    #[test]
    fn collector_pod_manifest_is_as_documented() {
        let options = CollectorOptions {
            asked: Arc::default(),
            namespace: "skoop".into(),
            image: "example.org/tools:1".into(),
            start_timeout: Duration::from_secs(60),
            run: "r1234".into(),
        };
        let golden = include_str!("../../tests/fixtures/collector-pod.json");
        let expected: serde_json::Value = serde_json::from_str(golden).unwrap();
        assert_eq!(pod_manifest("node-1", &options), expected);
        // It deserialises as a Pod, so the API server gets what we mean.
        let pod: Pod = serde_json::from_value(expected).unwrap();
        let spec = pod.spec.unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.host_network, Some(true));
    }

    // Issue 31: with the kubelet's port closed to the control plane, every
    // dump command of the node failed with the same long API error.
    #[test]
    fn an_api_server_that_cannot_dial_the_kubelet_is_named_as_such() {
        let status: kube::core::Status = serde_json::from_value(json!({
            "status": "Failure", "code": 500,
            "message": "error dialing backend: dial tcp 172.18.0.12:10250: connect: connection refused"
        }))
        .unwrap();
        let error = exec_error(&kube::Error::Api(Box::new(status)));
        assert!(matches!(error, RunError::KubeletUnreachable(_)));
        let message = error.to_string();
        assert!(
            message.contains("cannot reach the node's kubelet"),
            "{message}"
        );
        assert!(message.contains("connection refused"), "{message}");
        let other: kube::core::Status = serde_json::from_value(json!({
            "status": "Failure", "code": 404, "message": "pods \"x\" not found"
        }))
        .unwrap();
        assert!(matches!(
            exec_error(&kube::Error::Api(Box::new(other))),
            RunError::Exec(_)
        ));
    }

    #[test]
    fn exec_status_gives_the_exit_code() {
        let ok: ExecStatus = serde_json::from_value(json!({"status": "Success"})).unwrap();
        assert_eq!(exit_code(Some(&ok)).0, Some(0));
        let failed: ExecStatus = serde_json::from_value(json!({
            "status": "Failure", "reason": "NonZeroExitCode", "message": "command terminated with non-zero exit code",
            "details": {"causes": [{"reason": "ExitCode", "message": "127"}]}
        }))
        .unwrap();
        assert_eq!(
            exit_code(Some(&failed)),
            (Some(127), "exit status: 127".into())
        );
        assert_eq!(exit_code(None).0, None);
        let killed: ExecStatus = serde_json::from_value(json!({
            "status": "Failure", "reason": "NonZeroExitCode", "message": "command terminated with non-zero exit code",
            "details": {"causes": [{"reason": "ExitCode", "message": "137"}]}
        }))
        .unwrap();
        assert_eq!(
            exit_code(Some(&killed)),
            (Some(137), "exit status: 137 (SIGKILL: the OOM killer ends a command that outgrows the collector's memory limit, 512Mi)".into())
        );
    }
}
