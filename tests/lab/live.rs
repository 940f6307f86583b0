//! Live collection against a real kube-apiserver holding the lab's
//! objects, with the lab's namespaces as nodes (`--node-exec 'ip netns
//! exec PREFIX-{node}'`): the snapshot it collects must diagnose exactly
//! as the one `collect local` assembled; connection failures, RBAC and
//! collector pods are checked against the same server.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use skoop::engine::{self, Diagnosis, Endpoint, Protocol, Request};
use skoop::packs::{LoadedPacks, builtin_sources};
use skoop::snapshot::cluster::cache;
use skoop::snapshot::input::Boundary;
use skoop::snapshot::{ClusterFrom, Snapshot};

use crate::apiserver::{self, ApiServer, block_on};
use crate::cluster::{Cluster, Topology};
use crate::lab::{Availability, Lab, availability};
use crate::snapshot;

fn skoop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args(args)
        .output()
        .expect("run skoop")
}

/// `skoop collect cluster --kubeconfig KUBECONFIG --out OUT ARGS...`.
fn collect_cluster(kubeconfig: &str, out: &str, args: &[&str]) -> Output {
    let mut argv = vec![
        "collect",
        "cluster",
        "--kubeconfig",
        kubeconfig,
        "--out",
        out,
    ];
    argv.extend_from_slice(args);
    skoop(&argv)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `ip netns exec <the lab's prefix>-{node}`: the lab's node namespaces.
pub fn node_exec(cluster: &Cluster) -> String {
    let node = &cluster.nodes[0];
    let prefix = node
        .ns
        .name
        .strip_suffix(&format!("-{}", node.name))
        .expect("node namespaces are <prefix>-<node>");
    format!("ip netns exec {prefix}-{{node}}")
}

/// Starts an API server holding the objects of the offline snapshot at
/// `offline`, and gives each lab pod a pause process in the cgroup of its
/// new UID, as a kubelet would.
pub fn serve_lab(lab: &mut Lab, cluster: &Cluster, offline: &Path) -> ApiServer {
    let server = ApiServer::start();
    let mut objects = apiserver::snapshot_objects(&offline.join("cluster"));
    if objects.iter().any(|o| {
        o["apiVersion"]
            .as_str()
            .is_some_and(|v| v.contains("projectcalico"))
    }) {
        objects.splice(0..0, apiserver::calico_crds());
    }
    let created = block_on(async {
        let client = server.admin().await;
        apiserver::create_objects(&client, &objects).await
    });
    let uids: BTreeMap<(String, String), String> = created
        .iter()
        .filter(|o| o["kind"] == "Pod")
        .map(|o| {
            let meta = &o["metadata"];
            (
                (
                    meta["namespace"].as_str().unwrap_or_default().to_string(),
                    meta["name"].as_str().unwrap_or_default().to_string(),
                ),
                meta["uid"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    for pod in cluster.pods() {
        let uid = &uids[&(pod.namespace.clone(), pod.name.clone())];
        lab.pause_in_pod_cgroup(&pod.ns, uid);
    }
    server
}

/// `skoop collect cluster --all-nodes` of the lab through `server`.
pub fn collect_live(server: &ApiServer, cluster: &Cluster, out: &Path) {
    collect_through(server, &node_exec(cluster), out);
}

/// `skoop collect cluster --all-nodes --node-exec TEMPLATE` through `server`.
pub fn collect_through(server: &ApiServer, template: &str, out: &Path) {
    collect_all_nodes(server, out, &["--node-exec", template], &[]);
}

/// `collect_through` where a fault leaves `uncollected` files (a component
/// stopped cannot answer): collection must warn of those and no other, and
/// exit 1, as a user sees it.
pub fn collect_through_without(
    server: &ApiServer,
    template: &str,
    out: &Path,
    uncollected: &[&str],
) {
    collect_all_nodes(server, out, &["--node-exec", template], uncollected);
}

/// `skoop collect cluster --all-nodes ARGS...` as the administrator, which
/// must succeed, but for warnings of the `uncollected` files (each named,
/// and then exit 1), and leave a snapshot whose cache is current.
fn collect_all_nodes(server: &ApiServer, out: &Path, args: &[&str], uncollected: &[&str]) {
    let kubeconfig = server.kubeconfig.to_str().expect("utf-8 path");
    let out = out.to_str().expect("utf-8 path");
    let mut argv = vec!["--all-nodes"];
    argv.extend_from_slice(args);
    let output = collect_cluster(kubeconfig, out, &argv);
    let said = text(&output);
    if uncollected.is_empty() {
        assert!(output.status.success(), "collect cluster failed:\n{said}");
    } else {
        assert_eq!(output.status.code(), Some(1), "collect cluster:\n{said}");
        let warned: Vec<&str> = said
            .lines()
            .filter(|line| line.starts_with("warning:") && line.contains(" not collected: "))
            .collect();
        for file in uncollected {
            assert!(
                warned
                    .iter()
                    .any(|line| line.contains(&format!(" {file} not collected: "))),
                "no warning of {file}:\n{said}"
            );
        }
        let others: Vec<&&str> = (warned.iter())
            .filter(|line| {
                !uncollected
                    .iter()
                    .any(|file| line.contains(&format!(" {file} not collected: ")))
            })
            .collect();
        assert!(
            others.is_empty(),
            "collect cluster warned of more: {others:#?}"
        );
    }
    // The collector keeps the objects' model beside them, and it is theirs:
    // what a load of the files gives (the diagnoses below read the cache).
    let boundary = Boundary::new(out.as_ref());
    let (files, problems) =
        Snapshot::load_with(out.as_ref(), &boundary, ClusterFrom::Files).expect("a snapshot");
    let verdict = cache::verify(out.as_ref(), &boundary, &files.cluster, &problems);
    assert!(matches!(verdict, cache::Verdict::Current), "{verdict:?}");
}

/// A diagnosis as a comparable text: the verdict, each path's verdict and
/// hops, and every finding's id, severity and hop (evidence names files,
/// which differ between two snapshots).
pub fn outline(diagnosis: &Diagnosis) -> String {
    let mut lines = vec![format!("{}", diagnosis.disposition())];
    for path in &diagnosis.paths {
        let hops: Vec<String> = path
            .hops
            .iter()
            .map(|&i| diagnosis.hop(i).id.to_string())
            .collect();
        lines.push(format!("path {} {}", path.disposition, hops.join(" > ")));
    }
    let mut findings: Vec<String> = diagnosis
        .findings
        .iter()
        .map(|f| format!("finding {} {:?} {}", f.id, f.severity, f.about.hop))
        .collect();
    findings.sort();
    lines.extend(findings);
    lines.join("\n")
}

/// A snapshot that loads without problems.
pub fn load(dir: &Path) -> Arc<Snapshot> {
    let (snapshot, problems) = Snapshot::load(dir).expect("a snapshot");
    assert!(problems.is_empty(), "{}: {problems:#?}", dir.display());
    Arc::new(snapshot)
}

fn packs() -> LoadedPacks {
    let (packs, problems) = LoadedPacks::load(builtin_sources(), &[]);
    assert!(problems.is_empty(), "{problems:?}");
    packs
}

/// Asserts that `request` diagnoses the same on the live snapshot at
/// `live` as `offline` did.
pub fn assert_same_diagnosis(offline: &Diagnosis, live: &Path, request: &Request, case: &str) {
    let live = engine::diagnose(&load(live), request, &packs()).expect("the request resolves");
    assert_eq!(
        outline(&live),
        outline(offline),
        "{case}: the live-collected snapshot diagnoses differently"
    );
}

/// A lab cluster, the snapshot `collect local` assembled of it, and a real
/// API server holding its objects (dropped in this order).
pub struct ServedLab {
    pub server: ApiServer,
    pub offline: tempfile::TempDir,
    pub cluster: Cluster,
    pub lab: Lab,
}

/// `None` where the lab is skipped.
pub fn served_lab(cni: &dyn crate::cluster::Cni, nodes: u8) -> Option<ServedLab> {
    let Availability::Run = availability() else {
        return None;
    };
    let mut lab = Lab::new();
    let topology = Topology {
        nodes,
        pods_per_node: 2,
        across_router: false,
        dual_stack: false,
    };
    let cluster = Cluster::build(&mut lab, &topology, cni);
    let offline = tempfile::tempdir().expect("temp dir");
    snapshot::collect(&cluster, cni, offline.path());
    let server = serve_lab(&mut lab, &cluster, offline.path());
    Some(ServedLab {
        server,
        offline,
        cluster,
        lab,
    })
}

fn pod(namespace: &str, name: &str) -> Endpoint {
    Endpoint::Pod {
        namespace: namespace.into(),
        name: name.into(),
        port: None,
    }
}

fn healthy_lab_collected_live_diagnoses_as_offline(cni: &dyn crate::cluster::Cni) {
    let Some(ServedLab {
        server,
        offline,
        cluster,
        lab: _lab,
    }) = served_lab(cni, 2)
    else {
        return;
    };
    let live = tempfile::tempdir().expect("temp dir");
    collect_live(&server, &cluster, live.path());

    let offline_snapshot = load(offline.path());
    let packs = packs();
    let pods: Vec<_> = cluster.pods().collect();
    let mut requests = Vec::new();
    for from in &pods {
        for to in &pods {
            requests.push(Request {
                from: pod(&from.namespace, &from.name),
                to: pod(&to.namespace, &to.name),
                port: Some(crate::cluster::POD_PORT),
                protocol: Protocol::Tcp,
                size: None,
                via: None,
                family: None,
            });
        }
        requests.push(Request {
            from: pod(&from.namespace, &from.name),
            to: Endpoint::Service {
                namespace: cluster.service.namespace.clone(),
                name: cluster.service.name.clone(),
                port: None,
            },
            port: None,
            protocol: Protocol::Tcp,
            size: None,
            via: None,
            family: None,
        });
    }
    requests.push(Request {
        from: Endpoint::Node {
            name: cluster.nodes[0].name.clone(),
            port: None,
        },
        to: pod(&pods[3].namespace, &pods[3].name),
        port: None,
        protocol: Protocol::Icmp,
        size: None,
        via: None,
        family: None,
    });
    for request in &requests {
        let offline = engine::diagnose(&offline_snapshot, request, &packs).expect("resolves");
        assert_same_diagnosis(&offline, live.path(), request, cni.topology_name());
    }
}

#[test]
fn flannel_vxlan_lab_collected_through_the_api_diagnoses_as_offline() {
    healthy_lab_collected_live_diagnoses_as_offline(&crate::flannel::Flannel::VXLAN);
}

#[test]
fn calico_vxlan_lab_collected_through_the_api_diagnoses_as_offline() {
    healthy_lab_collected_live_diagnoses_as_offline(&crate::calico::Calico::VXLAN);
}

#[test]
fn live_diagnose_collects_only_what_the_flow_needs_and_answers_as_offline() {
    let Some(ServedLab {
        server,
        offline,
        cluster,
        lab: _lab,
    }) = served_lab(&crate::flannel::Flannel::VXLAN, 3)
    else {
        return;
    };
    let saved = tempfile::tempdir().expect("temp dir");
    let saved_dir = saved.path().join("ticket");
    let (from, to) = (&cluster.nodes[0].pods[0], &cluster.nodes[1].pods[1]);
    let to_arg = format!("{}/{}:{}", to.namespace, to.name, crate::cluster::POD_PORT);
    let from_arg = format!("{}/{}", from.namespace, from.name);
    let started = Instant::now();
    let output = skoop(&[
        "diagnose",
        "--kubeconfig",
        server.kubeconfig.to_str().unwrap(),
        "--context",
        "skoop-test",
        "--node-exec",
        &node_exec(&cluster),
        "--from",
        &from_arg,
        "--to",
        &to_arg,
        "--save-snapshot",
        saved_dir.to_str().unwrap(),
    ]);
    eprintln!(
        "live diagnose took {:?}:\n{}",
        started.elapsed(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    // The two pods and their two nodes, of 3 nodes and 6 pods.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("and 4 of 4 network namespaces"), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let headline = stdout.lines().next().unwrap_or_default();
    assert!(headline.ends_with(": delivered"), "{stdout}");
    // Only the two nodes on the way and the two pods: not node-3.
    let nodes: Vec<String> = std::fs::read_dir(saved_dir.join("nodes"))
        .expect("nodes/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!nodes.contains(&cluster.nodes[2].name), "{nodes:?}");
    // The saved snapshot replays offline to the same report, from its cache.
    assert!(saved_dir.join("cluster.cache").is_file());
    let replay = skoop(&[
        "diagnose",
        "--snapshot",
        saved_dir.to_str().unwrap(),
        "--from",
        &from_arg,
        "--to",
        &to_arg,
    ]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout),
        String::from_utf8_lossy(&output.stdout)
    );
    let request = Request {
        from: pod(&from.namespace, &from.name),
        to: pod(&to.namespace, &to.name),
        port: Some(crate::cluster::POD_PORT),
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: None,
    };
    let offline = engine::diagnose(&load(offline.path()), &request, &packs()).expect("resolves");
    assert_same_diagnosis(&offline, &saved_dir, &request, "live diagnose");
}

/// A kubeconfig like the admin's, with `edit` applied to its single user,
/// cluster and context.
fn kubeconfig_variant(server: &ApiServer, dir: &Path, edit: impl FnOnce(&mut Value)) -> String {
    let text = std::fs::read_to_string(&server.kubeconfig).expect("kubeconfig");
    let mut config: Value = serde_saphyr::from_str(&text).expect("yaml");
    edit(&mut config);
    let path = dir.join(format!("kubeconfig-{}", rand_suffix()));
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).expect("write");
    path.to_string_lossy().into_owned()
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn assert_fails_fast(kubeconfig: &str, says: &str) {
    let started = Instant::now();
    let output = collect_cluster(
        kubeconfig,
        "/nonexistent-skoop-out",
        &["--all-nodes", "--node-exec", "false"],
    );
    let elapsed = started.elapsed();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        elapsed < Duration::from_secs(15),
        "took {elapsed:?}: {stderr}"
    );
}

#[test]
fn a_closed_port_a_wrong_ca_and_a_bad_token_each_fail_fast_with_a_clear_error() {
    let Availability::Run = availability() else {
        return;
    };
    let server = ApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let closed = kubeconfig_variant(&server, dir.path(), |c| {
        // Port 9 (discard) has nothing listening on loopback here.
        c["clusters"][0]["cluster"]["server"] = json!("https://127.0.0.1:9");
    });
    assert_fails_fast(
        &closed,
        "cannot reach the API server at https://127.0.0.1:9",
    );

    // Another CA: the admin's own client certificate, which no CA signed
    // for serving, stands in as one.
    let wrong_ca = kubeconfig_variant(&server, dir.path(), |c| {
        let other = c["users"][0]["user"]["client-certificate-data"].clone();
        c["clusters"][0]["cluster"]["certificate-authority-data"] = other;
    });
    assert_fails_fast(&wrong_ca, "TLS with the API server");

    let bad_token = kubeconfig_variant(&server, dir.path(), |c| {
        c["users"][0]["user"] = json!({"token": "not-a-valid-token"});
    });
    assert_fails_fast(&bad_token, "refused skoop's credentials");
}

/// Applies every document of deploy/rbac.yaml.
pub async fn apply_rbac(client: &kube::Client) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml"))
        .expect("deploy/rbac.yaml");
    for document in text.split("\n---\n") {
        let object: Value = serde_saphyr::from_str(document).expect("a YAML object");
        apiserver::create(client, &object).await;
    }
}

/// A kubeconfig for ServiceAccount `namespace/name`, with a token from the
/// TokenRequest API.
pub async fn service_account_kubeconfig(
    server: &ApiServer,
    client: &kube::Client,
    dir: &Path,
    (namespace, name): (&str, &str),
) -> String {
    let api: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), namespace);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}});
    // The API serves tokens from its cache of ServiceAccounts, which a
    // ServiceAccount just created may not have reached yet.
    let mut attempts = 0;
    let token: Value = loop {
        match api
            .create_subresource("token", name, &PostParams::default(), &request)
            .await
        {
            Ok(token) => break token,
            Err(kube::Error::Api(status)) if status.code == 404 && attempts < 50 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("TokenRequest for {namespace}/{name}: {e}"),
        }
    };
    let token = token["status"]["token"]
        .as_str()
        .expect("a token")
        .to_string();
    kubeconfig_variant(server, dir, |c| {
        c["users"][0]["user"] = json!({"token": token});
    })
}

/// Whether the kubeconfig's user may do `verb` on `resource`, as
/// `kubectl auth can-i` asks the API.
async fn can_i(kubeconfig: &str, verb: &str, resource: &str, namespace: Option<&str>) -> bool {
    let client = apiserver::client(Path::new(kubeconfig)).await;
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    let group = match resource {
        "endpointslices" => "discovery.k8s.io",
        _ => "",
    };
    let review: SelfSubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "group": group,
                 "subresource": subresource, "namespace": namespace.unwrap_or_default()}}
    }))
    .unwrap();
    let api: Api<SelfSubjectAccessReview> = Api::all(client);
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .expect("SelfSubjectAccessReview");
    answer.status.is_some_and(|s| s.allowed)
}

#[test]
fn a_service_account_bound_to_deploy_rbac_collects_and_cannot_read_secrets() {
    let Some(ServedLab {
        server,
        offline,
        cluster,
        lab: _lab,
    }) = served_lab(&crate::flannel::Flannel::VXLAN, 2)
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (unbound, kubeconfig) = block_on(async {
        let client = server.admin().await;
        let unbound =
            service_account_kubeconfig(&server, &client, dir.path(), ("default", "default")).await;
        apply_rbac(&client).await;
        let bound =
            service_account_kubeconfig(&server, &client, dir.path(), ("skoop", "skoop")).await;
        (unbound, bound)
    });
    // The same token from an exec credential plugin, as cloud logins give
    // theirs: kubectl's ExecCredential protocol.
    let token_of = |kubeconfig: &str| -> String {
        let text = std::fs::read_to_string(kubeconfig).unwrap();
        let config: Value = serde_json::from_str(&text).unwrap();
        config["users"][0]["user"]["token"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let credential = json!({"apiVersion": "client.authentication.k8s.io/v1",
                            "kind": "ExecCredential", "status": {"token": token_of(&unbound)}});
    let by_plugin = kubeconfig_variant(&server, dir.path(), |c| {
        c["users"][0]["user"] = json!({"exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "sh",
            "args": ["-c", "printf '%s' \"$0\"", credential.to_string()],
            "interactiveMode": "Never",
        }});
    });
    // Without deploy/rbac.yaml: refused, and told which rule grants it.
    for kubeconfig in [&unbound, &by_plugin] {
        let output = collect_cluster(
            kubeconfig,
            dir.path().join("x").to_str().unwrap(),
            &["--all-nodes", "--node-exec", &node_exec(&cluster)],
        );
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("forbidden: cannot list nodes")
                && stderr.contains("deploy/rbac.yaml grants it in ClusterRole skoop-reader"),
            "{stderr}"
        );
    }
    let allowed = [
        ("list", "nodes", None),
        ("list", "pods", None),
        ("list", "endpointslices", None),
        ("create", "pods", Some("skoop")),
        ("delete", "pods", Some("skoop")),
        ("create", "pods/exec", Some("skoop")),
        ("get", "pods/exec", Some("skoop")),
    ];
    let denied = [
        ("get", "secrets", Some("default")),
        ("list", "secrets", None),
        ("create", "pods", Some("default")),
        ("delete", "pods", Some("default")),
        ("create", "pods/exec", Some("default")),
        ("update", "nodes", None),
        ("list", "configmaps", None),
    ];
    block_on(async {
        for (verb, resource, namespace) in allowed {
            assert!(
                can_i(&kubeconfig, verb, resource, namespace).await,
                "{verb} {resource} {namespace:?} should be allowed"
            );
        }
        for (verb, resource, namespace) in denied {
            assert!(
                !can_i(&kubeconfig, verb, resource, namespace).await,
                "{verb} {resource} {namespace:?} should be denied"
            );
        }
    });
    // And it collects a snapshot that diagnoses as the offline one.
    let live = tempfile::tempdir().unwrap();
    let output = collect_cluster(
        &kubeconfig,
        live.path().to_str().unwrap(),
        &["--all-nodes", "--node-exec", &node_exec(&cluster)],
    );
    assert!(output.status.success(), "{}", text(&output));
    let (from, to) = (&cluster.nodes[0].pods[0], &cluster.nodes[1].pods[0]);
    let request = Request {
        from: pod(&from.namespace, &from.name),
        to: Endpoint::Service {
            namespace: cluster.service.namespace.clone(),
            name: cluster.service.name.clone(),
            port: None,
        },
        port: None,
        protocol: Protocol::Tcp,
        size: None,
        via: None,
        family: None,
    };
    let _ = to;
    let offline_diagnosis =
        engine::diagnose(&load(offline.path()), &request, &packs()).expect("resolves");
    assert_same_diagnosis(&offline_diagnosis, live.path(), &request, "service account");
}

/// The collector pods left in namespace skoop.
async fn collector_pods(client: &kube::Client) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "skoop");
    api.list(&ListParams::default().labels("app.kubernetes.io/managed-by=skoop"))
        .await
        .map(|list| {
            list.items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect()
        })
        .unwrap_or_default()
}

/// Node `node-1` as its kubelet last posted it, Ready, with no kubelet
/// behind it now: skoop creates its collector pod there (a node that is not
/// Ready is refused before any pod is made), and nothing ever runs the pod.
fn ready_node_without_a_kubelet() -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
           "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}],
                      "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                      "message": "kubelet is posting ready status"}]}})
}

#[test]
fn a_collector_pod_that_never_runs_is_named_and_no_collector_pod_is_left() {
    let Availability::Run = availability() else {
        return;
    };
    let server = ApiServer::start();
    let node = ready_node_without_a_kubelet();
    block_on(async {
        let client = server.admin().await;
        apiserver::create(&client, &node).await;
    });
    let kubeconfig = server.kubeconfig.to_str().unwrap();
    let out = tempfile::tempdir().unwrap();
    // No kubelet runs the pod: it stays Pending until the time limit.
    let output = collect_cluster(
        kubeconfig,
        out.path().to_str().unwrap(),
        &["--nodes", "node-1", "--collector-timeout", "3"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("collector pod skoop/skoop-collect-")
            && stderr.contains("not Running on node node-1 after 3 s")
            && stderr.contains("phase Pending"),
        "{stderr}"
    );
    block_on(async {
        let client = server.admin().await;
        assert_eq!(collector_pods(&client).await, Vec::<String>::new());
    });

    // A node the cluster does not have is said to be so; the run goes on.
    let output = collect_cluster(
        kubeconfig,
        out.path().to_str().unwrap(),
        &["--nodes", "no-such-node", "--node-exec", "false"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("node/no-such-node not collected: the cluster has no such node"),
        "{}",
        text(&output)
    );

    // Interrupted while waiting: SIGINT still removes the pod.
    let mut child = Command::new(env!("CARGO_BIN_EXE_skoop"))
        .args([
            "collect",
            "cluster",
            "--kubeconfig",
            kubeconfig,
            "--out",
            out.path().to_str().unwrap(),
            "--nodes",
            "node-1",
            "--collector-timeout",
            "120",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start skoop");
    block_on(async {
        let client = server.admin().await;
        let started = Instant::now();
        while collector_pods(&client).await.is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no collector pod was created"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    block_on(async {
        let client = server.admin().await;
        assert_eq!(collector_pods(&client).await, Vec::<String>::new());
    });
}

// Issue 31: Pod Security admission refusing the collector pod was shown as
// an RBAC denial, with the RBAC rule to grant.
#[test]
fn a_collector_namespace_enforcing_restricted_pod_security_is_named_with_the_label_to_set() {
    let Availability::Run = availability() else {
        return;
    };
    let server = ApiServer::start();
    let node = ready_node_without_a_kubelet();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "skoop",
                                        "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    block_on(async {
        let client = server.admin().await;
        apiserver::create(&client, &node).await;
        apiserver::create(&client, &namespace).await;
    });
    let out = tempfile::tempdir().unwrap();
    let output = collect_cluster(
        server.kubeconfig.to_str().unwrap(),
        out.path().to_str().unwrap(),
        &["--nodes", "node-1", "--collector-timeout", "3"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("namespace skoop enforces Pod Security")
            && stderr.contains("pod-security.kubernetes.io/enforce=privileged")
            && stderr.contains("violates PodSecurity \"restricted"),
        "{stderr}"
    );
    assert!(!stderr.contains("deploy/rbac.yaml grants"), "{stderr}");
    block_on(async {
        let client = server.admin().await;
        assert_eq!(collector_pods(&client).await, Vec::<String>::new());
    });
}
