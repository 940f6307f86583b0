//! A real kube-apiserver (and etcd) on loopback, for the live-collection
//! tests: built from the Go module in `tests/k8s` by its `build.sh` and
//! started through its `skoop-testcluster` launcher (`tests/k8s/README.md`).
//! No mock stands in for it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::{Value, json};

/// Where the built binaries are: `SKOOP_K8S_BIN`, else the cache build.sh uses.
pub fn bin_dir() -> PathBuf {
    match std::env::var_os("SKOOP_K8S_BIN") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/skoop/k8s-bin")
        }
    }
}

/// Builds the binaries once per test run, the real-components lab's too
/// (`--all`; quick when build.sh finds them up to date). Panics with
/// build.sh's output when it fails.
pub fn built() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = bin_dir();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/k8s/build.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg("--all")
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "building the real Kubernetes components failed (it needs Go; see tests/k8s/README.md, \
             or SKOOP_LAB=skip):\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        dir
    })
}

/// A running kube-apiserver; stopped (and its etcd with it) when dropped.
pub struct ApiServer {
    child: Child,
    stdin: Option<ChildStdin>,
    pub kubeconfig: PathBuf,
    /// Holds the CA, keys, etcd's data and the logs; removed when dropped.
    dir: tempfile::TempDir,
}

impl ApiServer {
    pub fn start() -> ApiServer {
        ApiServer::start_with(|_| Vec::new())
    }

    /// [`ApiServer::start`] with kube-apiserver flags (`--flag=value`) made
    /// from the launcher's directory, where its certificates will be.
    pub fn start_with(flags: impl FnOnce(&Path) -> Vec<String>) -> ApiServer {
        let bin = built();
        let dir = tempfile::Builder::new()
            .prefix("skoop-apiserver-")
            .tempdir()
            .expect("temp dir");
        let mut child = Command::new(bin.join("skoop-testcluster"))
            .arg("--dir")
            .arg(dir.path())
            .arg("--bin")
            .arg(bin)
            .args(
                flags(dir.path())
                    .iter()
                    .map(|flag| format!("--apiserver-arg={flag}")),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skoop-testcluster");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let mut words = line.split_whitespace();
        let (Some("READY"), Some(kubeconfig), Some(_url)) =
            (words.next(), words.next(), words.next())
        else {
            let _ = child.kill();
            let output = child.wait_with_output().expect("launcher output");
            panic!(
                "kube-apiserver did not start: {line:?}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        // The launcher's stderr is not read again: keep it from blocking.
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || std::io::copy(&mut { stderr }, &mut std::io::sink()));
        }
        ApiServer {
            kubeconfig: PathBuf::from(kubeconfig),
            child,
            stdin,
            dir,
        }
    }

    /// The launcher's directory: the cluster's CA (`ca.crt`), the
    /// administrator's certificate and key, the logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A client as the cluster's administrator.
    pub async fn admin(&self) -> Client {
        client(&self.kubeconfig).await
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        // EOF on its stdin stops the launcher, which stops kube-apiserver.
        drop(self.stdin.take());
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn client(kubeconfig: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    Client::try_from(config).expect("client")
}

/// Runs `future` to completion on a runtime of its own.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// The CustomResourceDefinitions of the Calico kinds the lab's objects use,
/// as Calico's manifests define them (their schemas kept open).
pub fn calico_crds() -> Vec<Value> {
    ["IPPool", "BlockAffinity", "IPAMBlock", "FelixConfiguration"]
        .iter()
        .map(|kind| {
            let plural =
                ApiResource::from_gvk(&GroupVersionKind::gvk("crd.projectcalico.org", "v1", kind))
                    .plural;
            json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.crd.projectcalico.org")},
                "spec": {
                    "group": "crd.projectcalico.org",
                    "names": {"kind": kind, "listKind": format!("{kind}List"),
                              "plural": plural, "singular": kind.to_lowercase()},
                    "scope": "Cluster",
                    "versions": [{"name": "v1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": true}}}],
                },
            })
        })
        .collect()
}

/// Creates `objects` as they are (their status written through the status
/// subresource, as the kubelet and controllers would), after their
/// namespaces and a `default` ServiceAccount in each. Returns the objects
/// as created (with the server's UIDs).
pub async fn create_objects(client: &Client, objects: &[Value]) -> Vec<Value> {
    let mut namespaces: Vec<String> = objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    namespaces.sort();
    namespaces.dedup();
    for namespace in &namespaces {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        create(client, &ns).await;
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "default", "namespace": namespace}});
        create(client, &sa).await;
    }
    // CRDs first, and established before their objects.
    let (crds, rest): (Vec<&Value>, Vec<&Value>) = objects
        .iter()
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    for crd in crds {
        create(client, crd).await;
    }
    let mut created = Vec::new();
    for object in rest {
        if let Some(object) = create(client, object).await {
            created.push(object);
        }
    }
    created
}

/// Creates one object (already there: left as is, `None`), then writes its
/// status.
pub async fn create(client: &Client, object: &Value) -> Option<Value> {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let mut resource = None;
    for _ in 0..50 {
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((found, _)) => {
                resource = Some(found);
                break;
            }
            // A CRD just created takes a moment to be served.
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let resource = resource.unwrap_or_else(|| panic!("{api_version} {kind} is not served"));
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let mut body = object.clone();
    if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            metadata.remove(field);
        }
    }
    // The API server drops the status of what is created, except a Node's,
    // which a kubelet registers with its addresses: an agent that learns of
    // nodes as they are added (kube-router peers with them then) sees them.
    let status = match kind {
        "Node" => body.get("status").cloned(),
        _ => body.as_object_mut().and_then(|o| o.remove("status")),
    };
    let dynamic: DynamicObject = serde_json::from_value(body).expect("an object");
    let created = match api.create(&PostParams::default(), &dynamic).await {
        Ok(created) => created,
        Err(kube::Error::Api(status)) if status.code == 409 => return None,
        Err(e) => panic!("create {kind} {:?}: {e}", object["metadata"]["name"]),
    };
    let mut created = serde_json::to_value(created).expect("json");
    if let Some(status) = status {
        let name = created["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_string();
        // A merge patch, not a replace: a controller may have changed the
        // object since it was created (node IPAM gives a Node its pod CIDR).
        let patch = Patch::Merge(json!({ "status": status }));
        match api
            .patch_status(&name, &PatchParams::default(), &patch)
            .await
        {
            Ok(updated) => created = serde_json::to_value(updated).expect("json"),
            // Kinds without a status subresource took it on create.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => panic!("write the status of {kind} {name}: {e}"),
        }
    }
    created["apiVersion"] = api_version.into();
    created["kind"] = kind.into();
    Some(created)
}

/// Every object of a snapshot's `cluster/` directory, as the lab wrote them.
pub fn snapshot_objects(cluster_dir: &Path) -> Vec<Value> {
    let mut objects = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(cluster_dir)
        .expect("cluster/")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let list: Value = serde_saphyr::from_str(&text).expect("a List");
        match list["kind"].as_str() {
            Some("List") => objects.extend(list["items"].as_array().cloned().unwrap_or_default()),
            _ => objects.push(list),
        }
    }
    objects
}
