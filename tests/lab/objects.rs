//! The Kubernetes objects of a built lab cluster, written the way
//! `kubectl get <kind> -A -o yaml > <kinds>.yaml` writes them: one
//! `kind: List` per kind, keys sorted, status included.
//!
//! Names, uids, resource versions and timestamps are fixed by the objects'
//! identities, so that the example snapshot only changes when the lab does.

use std::collections::BTreeMap;
use std::fs;
use std::net::IpAddr;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::cluster::{Cluster, Cni, Node, POD_PORT, Pod, hex_digest};

/// When every lab object claims to have been created.
const CREATED: &str = "2025-06-02T09:00:00Z";
/// When every lab pod claims to have started.
const STARTED: &str = "2025-06-02T09:00:10Z";
const KUBERNETES_VERSION: &str = "v1.31.4";
const POD_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

/// Writes every object of `cluster` into `dir` (created if missing).
pub fn write(cluster: &Cluster, cni: &dyn Cni, dir: &Path) {
    let mut objects = vec![
        namespace("default", json!({})),
        namespace("kube-system", json!({})),
    ];
    objects.extend(cluster.nodes.iter().map(|n| node(n, cni)));
    objects.extend(cluster.endpoints().into_iter().map(|(n, p)| pod(n, p, cni)));
    objects.push(service(cluster));
    objects.push(endpoint_slice(cluster, "IPv4"));
    if cluster.service.cluster_ip6.is_some() {
        objects.push(endpoint_slice(cluster, "IPv6"));
    }
    objects.extend(cni.objects(&cluster.nodes));

    let mut by_kind: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for object in objects {
        let kind = object["kind"]
            .as_str()
            .expect("object has a kind")
            .to_string();
        by_kind.entry(kind).or_default().push(object);
    }
    fs::create_dir_all(dir).expect("create cluster/");
    for (kind, items) in by_kind {
        let list = json!({
            "apiVersion": "v1",
            "items": items,
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        });
        let yaml = serde_saphyr::to_string(&list).expect("objects serialise as YAML");
        let file = dir.join(format!("{}.yaml", plural(&kind.to_lowercase())));
        fs::write(&file, yaml).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
    }
}

/// The plural of a lower-case kind, as `kubectl api-resources` names it
/// (`networkpolicies`, `ippools`).
fn plural(kind: &str) -> String {
    match kind.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{kind}s"),
    }
}

/// Object metadata as the API server fills it in.
pub fn metadata(kind: &str, namespace: Option<&str>, name: &str, labels: Value) -> Value {
    let identity = format!("{kind}/{}/{name}", namespace.unwrap_or_default());
    let mut metadata = json!({
        "creationTimestamp": CREATED,
        "name": name,
        "resourceVersion": resource_version(&identity),
        "uid": uid(&identity),
    });
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        metadata["labels"] = labels;
    }
    if let Some(namespace) = namespace {
        metadata["namespace"] = namespace.into();
    }
    metadata
}

/// The status of a DaemonSet running and ready on all `nodes` nodes.
pub fn daemon_set_status(nodes: usize) -> Value {
    json!({
        "currentNumberScheduled": nodes,
        "desiredNumberScheduled": nodes,
        "numberAvailable": nodes,
        "numberMisscheduled": 0,
        "numberReady": nodes,
        "observedGeneration": 1,
        "updatedNumberScheduled": nodes,
    })
}

pub fn namespace(name: &str, mut labels: Value) -> Value {
    labels["kubernetes.io/metadata.name"] = name.into();
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata("Namespace", None, name, labels),
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

/// A UUID-shaped uid fixed by the object's identity.
fn uid(identity: &str) -> String {
    let hex = hex_digest(identity);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn resource_version(identity: &str) -> String {
    let hex = hex_digest(identity);
    let number = u32::from_str_radix(&hex[..5], 16).expect("hex digits");
    number.to_string()
}

fn node(node: &Node, cni: &dyn Cni) -> Value {
    let labels = json!({
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
    });
    let mut metadata = metadata("Node", None, &node.name, labels);
    let mut annotations = cni.node_annotations(node);
    annotations.insert("node.alpha.kubernetes.io/ttl".into(), "0".into());
    annotations.insert(
        "volumes.kubernetes.io/controller-managed-attach-detach".into(),
        "true".into(),
    );
    metadata["annotations"] = annotations.into();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "lastHeartbeatTime": STARTED,
            "lastTransitionTime": CREATED,
            "message": message,
            "reason": reason,
            "status": status,
            "type": type_,
        })
    };
    let machine_id = &hex_digest(&format!("machine/{}", node.name))[..32];
    let network = cni
        .network_condition()
        .map(|(reason, message)| condition("NetworkUnavailable", "False", reason, message));
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": {
            "podCIDR": node.pod_cidr().to_string(),
            "podCIDRs": ([Some(node.pod_cidr().to_string()), node.pod_cidr6.map(|c| c.to_string())].into_iter().flatten().collect::<Vec<_>>()),
        },
        "status": {
            "addresses": ([
                Some(json!({"address": node.ip.to_string(), "type": "InternalIP"})),
                node.ip6.map(|ip6| json!({"address": ip6.to_string(), "type": "InternalIP"})),
                Some(json!({"address": node.name, "type": "Hostname"})),
            ].into_iter().flatten().collect::<Vec<_>>()),
            "allocatable": {"cpu": "2", "ephemeral-storage": "19316953466", "memory": "3917088Ki", "pods": "110"},
            "capacity": {"cpu": "2", "ephemeral-storage": "20959212Ki", "memory": "4019488Ki", "pods": "110"},
            "conditions": network.into_iter().chain([
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ]).collect::<Vec<Value>>(),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": uid(&format!("boot/{}", node.name)),
                "containerRuntimeVersion": "containerd://1.7.24",
                "kernelVersion": kernel_version(),
                "kubeProxyVersion": KUBERNETES_VERSION,
                "kubeletVersion": KUBERNETES_VERSION,
                "machineID": machine_id,
                "operatingSystem": "linux",
                "osImage": "skoop lab (Linux network namespaces)",
                "systemUUID": uid(&format!("system/{}", node.name)),
            },
        },
    })
}

/// The running kernel: the lab's nodes are namespaces of it.
fn kernel_version() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

fn pod(node: &Node, pod: &Pod, cni: &dyn Cni) -> Value {
    pod_with_annotations(node, pod, cni.pod_annotations(pod))
}

/// A lab pod on `node` as its kubelet reports it (Running, Ready), with
/// the annotations its CNI plugin wrote.
pub fn pod_with_annotations(node: &Node, pod: &Pod, annotations: Map<String, Value>) -> Value {
    // The pod's addresses, IPv4 first; a pod without an IPv4 one is in an
    // IPv6-only cluster, whose nodes Kubernetes knows by IPv6 alone.
    let pod_ips: Vec<String> = [pod.ipv4.map(IpAddr::from), pod.ip6.map(IpAddr::from)]
        .into_iter()
        .flatten()
        .map(|ip| ip.to_string())
        .collect();
    let host_ips: Vec<String> = [
        pod.ipv4.map(|_| IpAddr::from(node.ip)),
        node.ip6.map(IpAddr::from),
    ]
    .into_iter()
    .flatten()
    .map(|ip| ip.to_string())
    .collect();
    let mut metadata = metadata(
        "Pod",
        Some(&pod.namespace),
        &pod.name,
        json!({"app": "web"}),
    );
    if !annotations.is_empty() {
        metadata["annotations"] = annotations.into();
    }
    let container_id = hex_digest(&format!("container/{}/{}", pod.namespace, pod.name));
    let condition = |type_: &str| json!({"lastProbeTime": null, "lastTransitionTime": STARTED, "status": "True", "type": type_});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [{
                "args": ["netexec", format!("--http-port={POD_PORT}")],
                "image": POD_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "name": "web",
                "ports": [{"containerPort": POD_PORT, "name": "http", "protocol": "TCP"}],
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": true,
            "nodeName": node.name,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
        },
        "status": {
            "conditions": [
                condition("PodReadyToStartContainers"),
                condition("Initialized"),
                condition("Ready"),
                condition("ContainersReady"),
                condition("PodScheduled"),
            ],
            "containerStatuses": [{
                "containerID": format!("containerd://{container_id}"),
                "image": POD_IMAGE,
                "imageID": format!("{POD_IMAGE}@sha256:{}", hex_digest(POD_IMAGE)),
                "lastState": {},
                "name": "web",
                "ready": true,
                "restartCount": 0,
                "started": true,
                "state": {"running": {"startedAt": STARTED}},
            }],
            "hostIP": host_ips.first(),
            "hostIPs": host_ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
            "phase": "Running",
            "podIP": pod_ips.first(),
            "podIPs": pod_ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
            "qosClass": "BestEffort",
            "startTime": STARTED,
        },
    })
}

fn service(cluster: &Cluster) -> Value {
    let service = &cluster.service;
    let cluster_ip = service.cluster_ip().to_string();
    let (cluster_ips, families, policy) = match service.cluster_ip6 {
        None => (vec![cluster_ip.clone()], vec!["IPv4"], "SingleStack"),
        Some(ip6) => (
            vec![cluster_ip.clone(), ip6.to_string()],
            vec!["IPv4", "IPv6"],
            "PreferDualStack",
        ),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata("Service", Some(&service.namespace), &service.name, json!({"app": "web"})),
        "spec": {
            "clusterIP": cluster_ip,
            "clusterIPs": cluster_ips,
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": families,
            "ipFamilyPolicy": policy,
            "ports": [{
                "name": service.port_name,
                "port": service.port,
                "protocol": "TCP",
                "targetPort": POD_PORT,
            }],
            "selector": {"app": "web"},
            "sessionAffinity": "None",
            "type": "ClusterIP",
        },
        "status": {"loadBalancer": {}},
    })
}

/// The EndpointSlice of `address_type` (`IPv4`, `IPv6`) the endpointslice
/// controller keeps for the service.
fn endpoint_slice(cluster: &Cluster, address_type: &str) -> Value {
    let service = &cluster.service;
    let identity = match address_type {
        "IPv4" => format!("slice/{}", service.name),
        _ => format!("slice/{}/{address_type}", service.name),
    };
    let suffix: String = hex_digest(&identity)
        .chars()
        .filter(char::is_ascii_lowercase)
        .chain("xxxxx".chars())
        .take(5)
        .collect();
    let name = format!("{}-{suffix}", service.name);
    let labels = json!({
        "app": "web",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
        "kubernetes.io/service-name": service.name,
    });
    let mut metadata = metadata("EndpointSlice", Some(&service.namespace), &name, labels);
    metadata["generateName"] = format!("{}-", service.name).into();
    metadata["annotations"] = json!({"endpoints.kubernetes.io/last-change-trigger-time": STARTED});
    metadata["ownerReferences"] = json!([{
        "apiVersion": "v1",
        "blockOwnerDeletion": true,
        "controller": true,
        "kind": "Service",
        "name": service.name,
        "uid": uid(&format!("Service/{}/{}", service.namespace, service.name)),
    }]);
    let endpoints: Vec<Value> = cluster
        .endpoints()
        .into_iter()
        .map(|(node, pod)| {
            let address = match address_type {
                "IPv4" => pod.ip().to_string(),
                _ => pod.ip6.expect("a dual-stack pod").to_string(),
            };
            json!({
                "addresses": [address],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": node.name,
                "targetRef": {
                    "kind": "Pod",
                    "name": pod.name,
                    "namespace": pod.namespace,
                    "uid": uid(&format!("Pod/{}/{}", pod.namespace, pod.name)),
                },
            })
        })
        .collect();
    json!({
        "addressType": address_type,
        "apiVersion": "discovery.k8s.io/v1",
        "endpoints": endpoints,
        "kind": "EndpointSlice",
        "metadata": metadata,
        "ports": [{"name": service.port_name, "port": POD_PORT, "protocol": "TCP"}],
    })
}
