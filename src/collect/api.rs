//! The Kubernetes API, as kubectl reaches it: the connection (kubeconfig,
//! context, `KUBECONFIG`, in-cluster, exec plugins, certificates, tokens),
//! and errors that say what to do. What is read through it, and written
//! into a snapshot, is `objects`'s, above this module.
//!
//! **Invariant:** every call has a time limit, and every failure becomes a
//! [`LiveError`] naming the server, and for a refusal the verb, the
//! resource and the rule of `deploy/rbac.yaml` that grants it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use kube::api::{DynamicObject, ListParams, ObjectList};
use kube::client::{ClientBuilder, DynBody};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, Resource};
use kube::{Client, Config};
use serde_json::{Value, json};
use tower::BoxError;
use tower::util::MapResponseLayer;

use super::credential::{ExecPluginError, context_of, run_exec_plugin};
use super::rbac::{Request, grant};
use crate::snapshot::input::{Limit, MIB, read_bytes_into, read_text};

/// How long the API server has to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one API call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest kubeconfig read.
const KUBECONFIG_FILE: Limit = Limit {
    bytes: 16 * MIB,
    what: "a kubeconfig",
};
/// Objects asked for per page of a list.
const PAGE_SIZE: u32 = 500;

/// Where the API server is and who skoop is there: `--kubeconfig`,
/// `--context`, else `KUBECONFIG` or `~/.kube/config`, else the pod's own
/// service account (in-cluster); how long the kubeconfig's exec credential
/// plugin may take; and how much the server may send.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub exec_timeout: Duration,
    pub caps: ResponseCaps,
}

/// The most the API server's answers may hold, in bytes: one response (a
/// page of a list, a discovery document), and all of one run's together.
/// Each is checked as the bytes arrive, so memory stays bounded whatever a
/// server streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseCaps {
    pub response: u64,
    pub run: u64,
}

/// `--max-api-response`'s default, in MiB: a page of 500 objects is a few
/// MiB; a server that ignores paging sends a whole list in one answer.
pub const DEFAULT_RESPONSE_MIB: u64 = 256;
/// `--max-api-total`'s default, in MiB: a 5,000-node cluster's objects are
/// about 540 MiB of JSON.
pub const DEFAULT_RUN_MIB: u64 = 4096;

impl Default for ResponseCaps {
    fn default() -> ResponseCaps {
        ResponseCaps {
            response: DEFAULT_RESPONSE_MIB * MIB,
            run: DEFAULT_RUN_MIB * MIB,
        }
    }
}

/// Which cap an answer of the API server passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Oversized {
    #[error(
        "its answer passed {} MiB, the cap on one response (--max-api-response MIB raises it)",
        .0 / MIB
    )]
    Response(u64),
    #[error(
        "its answers passed {} MiB in all, the cap on one run (--max-api-total MIB raises it)",
        .0 / MIB
    )]
    Run(u64),
}

/// A response body that counts its bytes as they arrive, against the cap
/// on one response and on the run (`read`, shared by every response of a
/// connection), and fails at the frame that passes either.
struct CappedBody {
    inner: Box<DynBody>,
    caps: ResponseCaps,
    /// Bytes of this response so far.
    this: u64,
    /// Bytes of every response of the run so far.
    read: Arc<AtomicU64>,
}

impl http_body::Body for CappedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &frame
            && let Some(data) = frame.data_ref()
        {
            let bytes = data.len() as u64;
            self.this += bytes;
            let run = self.read.fetch_add(bytes, Ordering::Relaxed) + bytes;
            if self.this > self.caps.response {
                return Poll::Ready(Some(Err(Oversized::Response(self.caps.response).into())));
            }
            if run > self.caps.run {
                return Poll::Ready(Some(Err(Oversized::Run(self.caps.run).into())));
            }
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
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

/// Why talking to the cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("kubeconfig: {0}")]
    Config(String),
    #[error("kubeconfig: {0}")]
    ExecPlugin(#[from] ExecPluginError),
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
    #[error("the API server at {server} sent too much for `{request}`: {cap}")]
    Oversized {
        server: String,
        request: Request,
        cap: Oversized,
    },
    #[error("the API server at {server} did not answer `{request}` within {} s", timeout.as_secs())]
    Timeout {
        server: String,
        request: Request,
        timeout: Duration,
    },
    #[error("{request}: the API server's answer is not a list: {reason}")]
    NotAList { request: Request, reason: String },
    #[error("{request}: {message}")]
    Api {
        request: Request,
        code: u16,
        message: String,
    },
    /// Pod Security admission refused the collector pod: the namespace
    /// enforces a level that forbids privileged, host-network pods.
    #[error(
        "namespace {namespace} enforces Pod Security, which refuses skoop's privileged collector \
         pods: label it `pod-security.kubernetes.io/enforce=privileged` (kubectl label namespace \
         {namespace} pod-security.kubernetes.io/enforce=privileged --overwrite), or give \
         --collector-namespace one that is ({message})"
    )]
    PodSecurity { namespace: String, message: String },
    /// The node's kubelet does not post a Ready status: it would never run
    /// a collector pod, so none is created.
    #[error(
        "node {node} is not Ready ({why}): its kubelet cannot run a collector pod; collect it \
         through --node-exec, or leave it out of the question"
    )]
    NodeNotReady { node: String, why: String },
    #[error("collector pod {pod} not Running on node {node} after {} s: {why}", waited.as_secs())]
    CollectorNotRunning {
        pod: String,
        node: String,
        waited: Duration,
        why: String,
    },
    #[error("the API server answered with a name skoop will not write: {0}")]
    BadName(#[from] crate::snapshot::name::BadName),
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
            LiveError::Forbidden { .. } | LiveError::PodSecurity { .. } => Some(403),
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
    let caps = options.caps;
    let read = Arc::new(AtomicU64::new(0));
    let capped = MapResponseLayer::new(move |response: http::Response<Box<DynBody>>| {
        let read = Arc::clone(&read);
        response.map(|inner| CappedBody {
            inner,
            caps,
            this: 0,
            read,
        })
    });
    let client = ClientBuilder::try_from(config)
        .map_err(|e| LiveError::Config(chain(&e)))?
        .with_layer(&capped)
        .build();
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
    let files = read_kubeconfigs(options)?;
    if files.is_empty() {
        if options.context.is_some() {
            return Err(LiveError::Config(
                "--context needs a kubeconfig, and there is none (give --kubeconfig or set KUBECONFIG)"
                    .into(),
            ));
        }
        return Config::incluster().map_err(|e| {
            LiveError::Config(format!(
                "no kubeconfig and not in a pod: {} (give --kubeconfig, set KUBECONFIG, or run in a pod)",
                chain(&e)
            ))
        });
    }
    let sources: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
    let mut kubeconfig = merge_kubeconfigs(&files)?;
    check_named_files(&kubeconfig, options.context.as_deref())?;
    run_exec_plugin(
        &mut kubeconfig,
        options.context.as_deref(),
        options.exec_timeout,
    )
    .await?;
    Config::from_custom_kubeconfig(kubeconfig, &kube_options)
        .await
        .map_err(|e| LiveError::Config(format!("{}: {}", sources.join(":"), chain(&e))))
}

/// The most a file a kubeconfig names (a certificate, a key, a token) may
/// hold.
const KUBECONFIG_NAMED_FILE: Limit = Limit {
    bytes: MIB,
    what: "a file a kubeconfig names (a certificate, a key, a token)",
};

/// Checks the files the context in use names (its cluster's CA, its user's
/// certificate, key and token file) as the bounded reader reads a file, a
/// FIFO or a device refused, before kube reads them whole; one missing is
/// left to kube to say.
fn check_named_files(kubeconfig: &Kubeconfig, context: Option<&str>) -> Result<(), LiveError> {
    let Some(context) = context_of(kubeconfig, context) else {
        return Ok(());
    };
    let cluster = kubeconfig
        .clusters
        .iter()
        .filter(|c| c.name == context.cluster)
        .filter_map(|c| c.cluster.as_ref())
        .flat_map(|c| &c.certificate_authority);
    let user = kubeconfig
        .auth_infos
        .iter()
        .filter(|a| Some(&a.name) == context.user.as_ref())
        .filter_map(|a| a.auth_info.as_ref())
        .flat_map(|a| [&a.client_certificate, &a.client_key, &a.token_file])
        .flatten();
    for file in cluster.chain(user) {
        if let Err(refused) = read_bytes_into(Path::new(file), KUBECONFIG_NAMED_FILE, Vec::new()) {
            return Err(LiveError::Config(refused.to_string()));
        }
    }
    Ok(())
}

/// The kubeconfig files kubectl would read, each read through the bounded
/// reader (a regular file of at most [`KUBECONFIG_FILE`]: a FIFO, a device
/// or `/dev/zero` is refused unread), with their paths: `--kubeconfig`
/// (which must exist), else every file `KUBECONFIG` lists (`:`-separated,
/// in order; empty entries and missing files passed over, as kubectl does),
/// else `~/.kube/config` when it exists. None: in-cluster.
fn read_kubeconfigs(options: &ConnectOptions) -> Result<Vec<(PathBuf, String)>, LiveError> {
    let read = |path: &Path| match read_text(path, KUBECONFIG_FILE) {
        Ok(text) => Ok(text),
        Err(refused) => Err(LiveError::Config(refused.to_string())),
    };
    if let Some(path) = &options.kubeconfig {
        return match read(path)? {
            Some(text) => Ok(vec![(path.clone(), text)]),
            None => Err(LiveError::Config(format!(
                "{}: no such file",
                path.display()
            ))),
        };
    }
    let paths: Vec<PathBuf> = match std::env::var_os("KUBECONFIG") {
        Some(list) if !list.is_empty() => std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        _ => std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".kube").join("config"))
            .into_iter()
            .collect(),
    };
    let mut files = Vec::new();
    for path in paths {
        if let Some(text) = read(&path)? {
            files.push((path, text));
        }
    }
    Ok(files)
}

/// Kubeconfig files (their paths and texts, in `KUBECONFIG`'s order) as one
/// kubeconfig, merged as kubectl merges them (the first to set a value
/// wins), each file's relative paths (certificates, keys, token files, an
/// exec plugin's command with a `/`) taken from its own directory.
pub fn merge_kubeconfigs(files: &[(PathBuf, String)]) -> Result<Kubeconfig, LiveError> {
    let mut merged = Kubeconfig::default();
    for (path, text) in files {
        let problem = |e: &dyn std::error::Error| {
            LiveError::Config(format!("{}: {}", path.display(), chain(e)))
        };
        let mut kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| problem(&e))?;
        if let Some(dir) = path.parent() {
            in_directory(&mut kubeconfig, dir);
        }
        merged = merged.merge(kubeconfig).map_err(|e| problem(&e))?;
    }
    Ok(merged)
}

/// Makes a kubeconfig's relative file names relative to `dir`, the
/// directory of the file it was read from, as kubectl reads them.
fn in_directory(kubeconfig: &mut Kubeconfig, dir: &Path) {
    let absolute = |file: &mut Option<String>| {
        if let Some(name) = file.as_mut()
            && Path::new(name.as_str()).is_relative()
            && let Some(joined) = dir.join(name.as_str()).to_str()
        {
            *name = joined.to_string();
        }
    };
    for cluster in kubeconfig
        .clusters
        .iter_mut()
        .filter_map(|c| c.cluster.as_mut())
    {
        absolute(&mut cluster.certificate_authority);
    }
    for auth in kubeconfig
        .auth_infos
        .iter_mut()
        .filter_map(|a| a.auth_info.as_mut())
    {
        absolute(&mut auth.client_certificate);
        absolute(&mut auth.client_key);
        absolute(&mut auth.token_file);
        // A bare command (`aws`) is looked up on PATH, as client-go does.
        if let Some(exec) = auth.exec.as_mut()
            && exec.command.as_deref().is_some_and(|c| c.contains('/'))
        {
            absolute(&mut exec.command);
        }
    }
}

impl Connection {
    /// Runs one API call within [`CALL_TIMEOUT`], its error made plain.
    pub async fn call<T>(
        &self,
        request: Request,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, LiveError> {
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Err(_) => Err(LiveError::Timeout {
                server: self.server.clone(),
                request,
                timeout: CALL_TIMEOUT,
            }),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.classify(e, request, started.elapsed())),
        }
    }

    /// What a failed call means; `waited` is how long it took, which is
    /// what a timeout of the client's own (connecting: 5 s, reading: 30 s)
    /// says it waited.
    fn classify(&self, error: kube::Error, request: Request, waited: Duration) -> LiveError {
        let server = self.server.clone();
        if let kube::Error::Api(status) = &error {
            return match status.code {
                401 => LiveError::Unauthorized { server },
                403 if status.message.contains("violates PodSecurity") => LiveError::PodSecurity {
                    namespace: request.namespace.unwrap_or_default(),
                    message: status.message.clone(),
                },
                403 => {
                    let grant = grant(&request);
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
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(error) = cause {
            if let Some(cap) = error.downcast_ref::<Oversized>() {
                return LiveError::Oversized {
                    server,
                    request,
                    cap: *cap,
                };
            }
            cause = error.source();
        }
        let reason = chain(&error);
        let lower = reason.to_ascii_lowercase();
        if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
            LiveError::Tls { server, reason }
        } else if lower.contains("timed out") || lower.contains("elapsed") {
            LiveError::Timeout {
                server,
                request,
                timeout: Duration::from_secs(waited.as_secs_f64().round() as u64),
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
        let url = DynamicObject::url_path(resource, None);
        let mut items = Vec::new();
        let mut params = ListParams::default().limit(PAGE_SIZE);
        if let Some(selector) = field_selector {
            params = params.fields(selector);
        }
        loop {
            let request = Request::new("list", resource.plural.clone(), None);
            let answer = async {
                let list = kube::core::Request::new(&url)
                    .list(&params)
                    .map_err(kube::Error::BuildRequest)?;
                self.client.request_text(list).await
            };
            let text = self.call(request.clone(), answer).await?;
            let page = list_page(resource, &text)
                .map_err(|reason| LiveError::NotAList { request, reason })?;
            items.extend(page.items);
            match page.next {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(items),
            }
        }
    }
}

/// One page of a list, as [`list_page`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    /// The objects, each with its `apiVersion` and `kind`.
    pub items: Vec<Value>,
    /// The token of the next page; `None` on the last.
    pub next: Option<String>,
}

/// One page of a list of `resource` as the API server answered it (the
/// text of its JSON, within the cap on one response): the objects, each
/// given the list's `apiVersion` and `kind` as `kubectl get -o json` writes
/// them, and the continue token. `Err` says why the answer is no list.
pub fn list_page(resource: &ApiResource, text: &str) -> Result<ListPage, String> {
    let list: ObjectList<DynamicObject> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut items = Vec::with_capacity(list.items.len());
    for object in list.items {
        let mut value = serde_json::to_value(object).map_err(|e| e.to_string())?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), json!(resource.api_version));
            map.insert("kind".into(), json!(resource.kind));
        }
        items.push(value);
    }
    let next = list.metadata.continue_.filter(|token| !token.is_empty());
    Ok(ListPage { items, next })
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

    fn nodes() -> ApiResource {
        ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&())
    }

    #[test]
    fn a_page_gives_its_objects_their_kind_and_the_next_pages_token() {
        let page = list_page(
            &nodes(),
            r#"{"kind":"NodeList","apiVersion":"v1","metadata":{"continue":"abc"},
                "items":[{"metadata":{"name":"node-1"}}]}"#,
        )
        .unwrap();
        assert_eq!(
            page.items,
            vec![json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})]
        );
        assert_eq!(page.next.as_deref(), Some("abc"));
        let last = list_page(&nodes(), r#"{"metadata":{"continue":""},"items":[]}"#).unwrap();
        assert_eq!(
            last,
            ListPage {
                items: Vec::new(),
                next: None
            }
        );
    }

    #[test]
    fn an_answer_that_is_no_list_says_why() {
        for text in [
            "",
            "[]",
            r#"{"items": 3}"#,
            r#"{"items":[{"metadata":{"name":7}}]}"#,
        ] {
            let reason = list_page(&nodes(), text).unwrap_err();
            assert!(!reason.is_empty(), "{text}");
        }
    }

    #[test]
    fn kubeconfigs_merge_the_first_value_winning_and_relative_paths_from_their_directory() {
        let first = "apiVersion: v1\nkind: Config\ncurrent-context: a\n\
                     clusters: [{name: a, cluster: {server: 'https://a', certificate-authority: ca.crt}}]\n";
        let second = "apiVersion: v1\nkind: Config\ncurrent-context: b\n\
                      clusters: [{name: a, cluster: {server: 'https://other'}}, {name: b, cluster: {server: 'https://b'}}]\n";
        let merged = merge_kubeconfigs(&[
            (PathBuf::from("/home/u/.kube/one"), first.into()),
            (PathBuf::from("/etc/two"), second.into()),
        ])
        .unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("a"));
        let servers: Vec<_> = merged
            .clusters
            .iter()
            .filter_map(|c| c.cluster.as_ref()?.server.clone())
            .collect();
        assert_eq!(servers, ["https://a", "https://b"]);
        let ca = merged.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(
            ca.certificate_authority.as_deref(),
            Some("/home/u/.kube/ca.crt")
        );
        let bad = merge_kubeconfigs(&[(PathBuf::from("/k"), "clusters: 3".into())]).unwrap_err();
        assert!(bad.to_string().starts_with("kubeconfig: /k: "), "{bad}");
    }
}
