//! The cluster's objects, read through the API and written into a
//! snapshot's `cluster/` directory: a List per kind, in files the loader
//! takes whatever the cluster's size, with credentials-bearing fields
//! redacted.

use std::path::Path;

use kube::core::ApiResource;
use serde_json::Value;

use super::api::{Connection, LiveError};
use super::dump::{create_dirs_under, write_atomically};
use super::rbac::{Request, contract_kinds, pack_kinds};
use crate::packs::LoadedPacks;
use crate::snapshot::name::{NameKind, check_name};

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
    let cluster =
        create_dirs_under(dir, Path::new("cluster")).map_err(|source| LiveError::Write {
            path: dir.join("cluster"),
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

/// The most one `cluster/` file the collector writes holds: a kind's List
/// is split into files of about this size (`pods.core.json`,
/// `pods.core.2.json`, ...), well under the loader's cap per file
/// (`snapshot::input::CLUSTER_FILE`), so that a cluster of any size loads.
const LIST_FILE_BYTES: usize = 64 * 1024 * 1024;

fn write_list(
    cluster: &Path,
    resource: &ApiResource,
    name: Option<&str>,
    items: Vec<Value>,
    report: &mut ObjectsReport,
) -> Result<(), LiveError> {
    write_list_in_parts(cluster, resource, name, items, LIST_FILE_BYTES, report)
}

/// Writes `items` as Lists of at most `part_bytes` each (an item bigger than
/// that alone in its file), at least one file even for no items.
fn write_list_in_parts(
    cluster: &Path,
    resource: &ApiResource,
    name: Option<&str>,
    mut items: Vec<Value>,
    part_bytes: usize,
    report: &mut ObjectsReport,
) -> Result<(), LiveError> {
    for item in &mut items {
        redact(item);
    }
    // The file's name is made of names a server's discovery gave: each
    // checked, so that it stays one file in `cluster/`.
    check_name(NameKind::Resource, &resource.plural)?;
    let group = if resource.group.is_empty() {
        "core".to_string()
    } else {
        check_name(NameKind::Group, &resource.group)?;
        resource.group.clone()
    };
    if let Some(name) = name {
        check_name(NameKind::ConfigMap, name)?;
    }
    let stem = match name {
        Some(name) => format!("{}.{group}.{name}", resource.plural),
        None => format!("{}.{group}", resource.plural),
    };
    // Each item pretty-printed once; a List's own lines around them.
    const HEAD: &[u8] = b"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n";
    const TAIL: &[u8] = b"\n  ]\n}\n";
    let mut parts: Vec<(Vec<u8>, usize)> = vec![(HEAD.to_vec(), 0)];
    for item in &items {
        let text = serde_json::to_vec_pretty(item).unwrap_or_default();
        let full = parts.last().is_some_and(|(part, count)| {
            *count > 0 && part.len() + text.len() + TAIL.len() > part_bytes
        });
        if full {
            parts.push((HEAD.to_vec(), 0));
        }
        let (part, count) = parts.last_mut().expect("one part at least");
        if *count > 0 {
            part.extend_from_slice(b",\n");
        }
        part.extend_from_slice(&text);
        *count += 1;
    }
    for (index, (mut text, count)) in parts.into_iter().enumerate() {
        text.extend_from_slice(TAIL);
        let file = match index {
            0 => format!("{stem}.json"),
            _ => format!("{stem}.{}.json", index + 1),
        };
        let path = cluster.join(&file);
        write_atomically(&path, &text).map_err(|source| LiveError::Write { path, source })?;
        report.written.push((file, count));
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// 150,000 pods as kubectl writes them are a 504 MB List, over the
    /// loader's cap per file: the collector splits a List into parts.
    #[test]
    fn a_long_list_is_written_in_parts_that_load_as_the_same_objects() {
        let dir = tempfile::tempdir().unwrap();
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let items: Vec<Value> = (0..50)
            .map(|i| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": format!("cm-{i}"), "namespace": "default"},
                       "data": {"k": "v".repeat(100)}})
            })
            .collect();
        let mut report = ObjectsReport::default();
        write_list_in_parts(dir.path(), &resource, None, items, 2048, &mut report).unwrap();
        let files: Vec<&str> = report.written.iter().map(|(f, _)| f.as_str()).collect();
        assert!(files.len() > 5, "{files:?}");
        assert_eq!(files[0], "configmaps.core.json");
        assert_eq!(files[1], "configmaps.core.2.json");
        assert_eq!(report.written.iter().map(|(_, n)| n).sum::<usize>(), 50);
        for file in &files {
            let size = std::fs::metadata(dir.path().join(file)).unwrap().len();
            assert!(size <= 2048, "{file}: {size} bytes");
        }
        let (cluster, problems) = crate::snapshot::cluster::load(
            dir.path(),
            &crate::snapshot::input::Boundary::new(dir.path()),
        );
        assert!(problems.is_empty(), "{problems:?}");
        let names: Vec<&str> = cluster
            .config_maps()
            .map(|c| c.meta.name.as_str())
            .collect();
        assert_eq!(names.len(), 50);
        assert!(names.contains(&"cm-0") && names.contains(&"cm-49"));
    }

    // Issue 36 item 3: a file's name is made of what discovery answered.
    #[test]
    fn a_resource_discovery_names_outside_kubernetes_names_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let cluster = dir.path().join("cluster");
        std::fs::create_dir(&cluster).unwrap();
        let mut resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        resource.plural = "../../escaped".into();
        let mut report = ObjectsReport::default();
        let err = write_list_in_parts(&cluster, &resource, None, Vec::new(), 2048, &mut report)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("\"../../escaped\" is not a Kubernetes resource name"),
            "{err}"
        );
        assert!(report.written.is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_empty_list_is_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let mut report = ObjectsReport::default();
        write_list_in_parts(dir.path(), &resource, None, Vec::new(), 2048, &mut report).unwrap();
        assert_eq!(report.written, vec![("configmaps.core.json".to_owned(), 0)]);
        let text = std::fs::read_to_string(dir.path().join("configmaps.core.json")).unwrap();
        let list: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(list["items"], json!([]));
    }

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
}
