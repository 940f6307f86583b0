//! The Kubernetes API, as kubectl reaches it: the connection (kubeconfig,
//! context, `KUBECONFIG`, in-cluster, exec plugins, certificates, tokens),
//! errors that say what to do, and the cluster's objects written into a
//! snapshot's `cluster/` directory.
//!
//! **Invariant:** every call has a time limit, and every failure becomes a
//! [`LiveError`] naming the server, and for a refusal the verb, the
//! resource and the rule of `deploy/rbac.yaml` that grants it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::{Value, json};

use crate::packs::LoadedPacks;
use crate::snapshot::input::{Limit, read_text};

/// How long the API server has to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one API call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest kubeconfig read.
const KUBECONFIG_FILE: Limit = Limit {
    bytes: 16 << 20,
    what: "a kubeconfig",
};
/// Objects asked for per page of a list.
const PAGE_SIZE: u32 = 500;

/// Where the API server is and who skoop is there: `--kubeconfig`,
/// `--context`, else `KUBECONFIG` or `~/.kube/config`, else the pod's own
/// service account (in-cluster).
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// A client of one API server.
#[derive(Clone)]
pub struct Connection {
    pub client: Client,
    /// The server's URL, for messages.
    pub server: String,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Connection({})", self.server)
    }
}

/// An API request, for messages: `list pods`, `create pods/exec in skoop`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub verb: &'static str,
    pub resource: String,
    pub namespace: Option<String>,
}

impl Request {
    pub fn new(verb: &'static str, resource: impl Into<String>, namespace: Option<&str>) -> Self {
        Request {
            verb,
            resource: resource.into(),
            namespace: namespace.map(str::to_string),
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        match &self.namespace {
            Some(namespace) => write!(f, " in namespace {namespace}"),
            None => Ok(()),
        }
    }
}

/// Why talking to the cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("kubeconfig: {0}")]
    Config(String),
    #[error(
        "cannot reach the API server at {server}: {reason} (is the address in the kubeconfig right, and is the server up?)"
    )]
    Unreachable { server: String, reason: String },
    #[error(
        "TLS with the API server at {server} failed: {reason} (check the cluster's certificate-authority in the kubeconfig)"
    )]
    Tls { server: String, reason: String },
    #[error(
        "the API server at {server} refused skoop's credentials (401 Unauthorized: the token or client certificate is invalid or expired; log in again or renew it)"
    )]
    Unauthorized { server: String },
    #[error("forbidden: cannot {request} ({message}); {grant}")]
    Forbidden {
        request: Request,
        message: String,
        grant: String,
    },
    #[error("the API server at {server} did not answer `{request}` within {} s", timeout.as_secs())]
    Timeout {
        server: String,
        request: Request,
        timeout: Duration,
    },
    #[error("{request}: {message}")]
    Api {
        request: Request,
        code: u16,
        message: String,
    },
    #[error("collector pod {pod} not Running on node {node} after {} s: {why}", waited.as_secs())]
    CollectorNotRunning {
        pod: String,
        node: String,
        waited: Duration,
        why: String,
    },
    #[error("{}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl LiveError {
    /// The HTTP status the API server answered with, where it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            LiveError::Unauthorized { .. } => Some(401),
            LiveError::Forbidden { .. } => Some(403),
            LiveError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Connects as kubectl would, and checks within seconds that the server
/// answers and accepts the credentials.
pub async fn connect(options: &ConnectOptions) -> Result<Connection, LiveError> {
    let mut config = load_config(options).await?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(CALL_TIMEOUT);
    config.write_timeout = Some(CALL_TIMEOUT);
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let client = Client::try_from(config).map_err(|e| LiveError::Config(chain(&e)))?;
    let connection = Connection { client, server };
    // /version is open to anyone who authenticates: it proves the address,
    // the CA and the credentials in one call.
    let request = Request::new("get", "/version", None);
    connection
        .call(request, connection.client.apiserver_version())
        .await?;
    Ok(connection)
}

async fn load_config(options: &ConnectOptions) -> Result<Config, LiveError> {
    let kube_options = KubeConfigOptions {
        context: options.context.clone(),
        ..KubeConfigOptions::default()
    };
    if let Some(path) = &options.kubeconfig {
        let problem = |what: String| LiveError::Config(format!("{}: {what}", path.display()));
        // A regular file of a sane size only: a FIFO or a device would hang or flood.
        let text = match read_text(path, KUBECONFIG_FILE) {
            Ok(Some(text)) => text,
            Ok(None) => return Err(problem("no such file".into())),
            Err(refused) => return Err(LiveError::Config(refused.to_string())),
        };
        let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|e| problem(chain(&e)))?;
        return Config::from_custom_kubeconfig(kubeconfig, &kube_options)
            .await
            .map_err(|e| LiveError::Config(format!("{}: {}", path.display(), chain(&e))));
    }
    if options.context.is_some() {
        return Config::from_kubeconfig(&kube_options)
            .await
            .map_err(|e| LiveError::Config(chain(&e)));
    }
    Config::infer().await.map_err(|e| {
        LiveError::Config(format!(
            "{} (give --kubeconfig, set KUBECONFIG, or run in a pod)",
            chain(&e)
        ))
    })
}

impl Connection {
    /// Runs one API call within [`CALL_TIMEOUT`], its error made plain.
    pub async fn call<T>(
        &self,
        request: Request,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, LiveError> {
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Err(_) => Err(LiveError::Timeout {
                server: self.server.clone(),
                request,
                timeout: CALL_TIMEOUT,
            }),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.classify(e, request)),
        }
    }

    fn classify(&self, error: kube::Error, request: Request) -> LiveError {
        let server = self.server.clone();
        if let kube::Error::Api(status) = &error {
            return match status.code {
                401 => LiveError::Unauthorized { server },
                403 => {
                    let grant = crate::collect::rbac::grant(&request);
                    LiveError::Forbidden {
                        request,
                        message: status.message.clone(),
                        grant,
                    }
                }
                code => LiveError::Api {
                    request,
                    code,
                    message: status.message.clone(),
                },
            };
        }
        let reason = chain(&error);
        let lower = reason.to_ascii_lowercase();
        if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
            LiveError::Tls { server, reason }
        } else if lower.contains("timed out") || lower.contains("elapsed") {
            LiveError::Timeout {
                server,
                request,
                timeout: CONNECT_TIMEOUT,
            }
        } else {
            LiveError::Unreachable { server, reason }
        }
    }

    /// Every object of `resource`, page by page; `namespace` `None` lists
    /// all namespaces. Each object gets its `apiVersion` and `kind`, as
    /// `kubectl get -o json` writes them.
    pub async fn list_all(
        &self,
        resource: &ApiResource,
        field_selector: Option<&str>,
    ) -> Result<Vec<Value>, LiveError> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let mut items = Vec::new();
        let mut params = ListParams::default().limit(PAGE_SIZE);
        if let Some(selector) = field_selector {
            params = params.fields(selector);
        }
        loop {
            let request = Request::new("list", resource.plural.clone(), None);
            let page = self.call(request, api.list(&params)).await?;
            for object in page.items {
                let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
                if let Some(map) = value.as_object_mut() {
                    map.insert("apiVersion".into(), json!(resource.api_version));
                    map.insert("kind".into(), json!(resource.kind));
                }
                items.push(value);
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return Ok(items),
            }
        }
    }
}

/// The built-in kinds of the snapshot contract (DESIGN §3). Secrets never.
pub fn contract_kinds() -> Vec<ApiResource> {
    use k8s_openapi::api::{apps, core, discovery, networking};
    vec![
        ApiResource::erase::<core::v1::Node>(&()),
        ApiResource::erase::<core::v1::Namespace>(&()),
        ApiResource::erase::<core::v1::Pod>(&()),
        ApiResource::erase::<core::v1::Service>(&()),
        ApiResource::erase::<discovery::v1::EndpointSlice>(&()),
        ApiResource::erase::<apps::v1::DaemonSet>(&()),
        ApiResource::erase::<networking::v1::NetworkPolicy>(&()),
    ]
}

/// What the loaded packs read: their custom resources (by apiVersion and
/// kind) and the ConfigMaps they detect (by name).
pub fn pack_kinds(packs: &LoadedPacks) -> (Vec<GroupVersionKind>, Vec<String>) {
    let mut kinds = Vec::new();
    let mut config_maps = Vec::new();
    for pack in packs.packs() {
        for crd in &pack.detect.crds {
            // A kind without an apiVersion cannot be found by discovery.
            let Some(api_version) = &crd.api_version else {
                continue;
            };
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(group, version, &crd.kind);
            if !kinds.contains(&gvk) {
                kinds.push(gvk);
            }
        }
        for signal in &pack.detect.config_maps {
            if !config_maps.contains(&signal.object.name) {
                config_maps.push(signal.object.name.clone());
            }
        }
    }
    (kinds, config_maps)
}

/// What collecting the objects did.
#[derive(Debug, Default)]
pub struct ObjectsReport {
    /// `(file, objects)` for every list written.
    pub written: Vec<(String, usize)>,
    /// Kinds the packs read that this API server does not serve.
    pub not_served: Vec<String>,
}

/// Lists the contract's kinds, the packs' custom resources (found through
/// discovery; a kind the server does not serve is noted, not an error) and
/// the packs' ConfigMaps into `dir/cluster/`, one `List` file per kind.
/// `seen` is shown each list before it is written, for what the caller
/// needs of it at once (the pods and nodes live collection works with).
pub async fn collect_objects(
    connection: &Connection,
    packs: &LoadedPacks,
    dir: &Path,
    mut seen: impl FnMut(&ApiResource, &[Value]),
) -> Result<ObjectsReport, LiveError> {
    let cluster = dir.join("cluster");
    std::fs::create_dir_all(&cluster).map_err(|source| LiveError::Write {
        path: cluster.clone(),
        source,
    })?;
    let mut report = ObjectsReport::default();
    for resource in contract_kinds() {
        let items = connection.list_all(&resource, None).await?;
        seen(&resource, &items);
        write_list(&cluster, &resource, None, items, &mut report)?;
    }
    let (custom, config_maps) = pack_kinds(packs);
    let config_map = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    for name in &config_maps {
        let selector = format!("metadata.name={name}");
        let items = connection.list_all(&config_map, Some(&selector)).await?;
        write_list(&cluster, &config_map, Some(name), items, &mut report)?;
    }
    for gvk in custom {
        let request = Request::new("get", format!("/apis/{}/{}", gvk.group, gvk.version), None);
        // A group the server does not serve is a 404; a kind missing from a
        // group it serves (a CNI installed without one of its CRDs) is
        // discovery's MissingKind. Neither stops the collection.
        let discover = async {
            match kube::discovery::pinned_kind(&connection.client, &gvk).await {
                Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingKind(_))) => {
                    Ok(None)
                }
                found => found.map(|(resource, _)| Some(resource)),
            }
        };
        let served = match connection.call(request, discover).await {
            Ok(served) => served,
            Err(e) if e.code() == Some(404) => None,
            Err(e) => return Err(e),
        };
        let Some(resource) = served else {
            report
                .not_served
                .push(format!("{}/{} {}", gvk.group, gvk.version, gvk.kind));
            continue;
        };
        let items = connection.list_all(&resource, None).await?;
        write_list(&cluster, &resource, None, items, &mut report)?;
    }
    Ok(report)
}

fn write_list(
    cluster: &Path,
    resource: &ApiResource,
    name: Option<&str>,
    mut items: Vec<Value>,
    report: &mut ObjectsReport,
) -> Result<(), LiveError> {
    for item in &mut items {
        redact(item);
    }
    let group = if resource.group.is_empty() {
        "core".to_string()
    } else {
        resource.group.clone()
    };
    let file = match name {
        Some(name) => format!("{}.{group}.{name}.json", resource.plural),
        None => format!("{}.{group}.json", resource.plural),
    };
    let count = items.len();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let path = cluster.join(&file);
    let text = serde_json::to_vec_pretty(&list).unwrap_or_default();
    super::dump::write_atomically(&path, &text)
        .map_err(|source| LiveError::Write { path, source })?;
    report.written.push((file, count));
    Ok(())
}

/// The annotation `kubectl apply` keeps a copy of the whole object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what can carry credentials and what skoop never reads, from Pods
/// and pod templates: containers' `env` values, `command` and `args`; from
/// every object `managedFields` and kubectl's last-applied copy
/// (docs/live.md lists the same).
pub fn redact(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.remove(LAST_APPLIED);
        }
    }
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let pod_spec = match kind {
        "Pod" => object.pointer_mut("/spec"),
        "DaemonSet" | "Deployment" | "StatefulSet" | "ReplicaSet" | "Job" => {
            object.pointer_mut("/spec/template/spec")
        }
        _ => None,
    };
    let Some(spec) = pod_spec else { return };
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            container.remove("command");
            container.remove("args");
            if let Some(env) = container.get_mut("env").and_then(Value::as_array_mut) {
                for var in env.iter_mut().filter_map(Value::as_object_mut) {
                    var.remove("value");
                }
            }
        }
    }
}

/// An error and its sources, as one line.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_drops_env_values_command_args_and_managed_fields_from_pods() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "managedFields": [{}],
                         "annotations": {LAST_APPLIED: "{...}", "keep": "yes"}},
            "spec": {"containers": [{"name": "c", "image": "i", "command": ["sh"],
                                     "args": ["--token=hunter2"],
                                     "env": [{"name": "PASSWORD", "value": "hunter2"},
                                             {"name": "FROM", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                                     "ports": [{"containerPort": 8080}]}],
                     "initContainers": [{"name": "i", "env": [{"name": "X", "value": "secret"}]}]}
        });
        redact(&mut pod);
        let text = pod.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("secret\""), "{text}");
        assert!(!text.contains("managedFields"), "{text}");
        assert!(!text.contains(LAST_APPLIED), "{text}");
        assert_eq!(pod["metadata"]["annotations"]["keep"], "yes");
        assert_eq!(
            pod["spec"]["containers"][0]["env"][0],
            json!({"name": "PASSWORD"})
        );
        assert_eq!(
            pod["spec"]["containers"][0]["ports"][0]["containerPort"],
            8080
        );
        assert_eq!(pod["spec"]["containers"][0]["image"], "i");
    }

    #[test]
    fn redact_reaches_the_pod_template_of_a_daemonset() {
        let mut ds = json!({"kind": "DaemonSet", "spec": {"template": {"spec": {"containers": [
            {"name": "flannel", "args": ["--kube-subnet-mgr"], "env": [{"name": "T", "value": "v"}]}]}}}});
        redact(&mut ds);
        assert_eq!(
            ds["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "flannel", "env": [{"name": "T"}]})
        );
    }

    #[test]
    fn requests_read_as_rbac_would_say_them() {
        assert_eq!(
            Request::new("create", "pods/exec", Some("skoop")).to_string(),
            "create pods/exec in namespace skoop"
        );
        assert_eq!(
            Request::new("list", "nodes", None).to_string(),
            "list nodes"
        );
    }
}
