//! NetworkPolicy semantics, one rule of the API per test, on a small
//! cluster written as kubectl would.

use std::path::Path;

use super::*;
use crate::snapshot::cluster::load::load_file_text;

/// Namespaces `default`, `team-a` (team=a), `team-b` (team=b) and pods in
/// them; `ghost` has a pod but no Namespace object; `hostnet` runs on the
/// host network.
const CLUSTER: &str = "
apiVersion: v1
kind: Namespace
metadata: {name: default}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {team: b}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  containers:
  - name: web
    ports:
    - {name: http, containerPort: 8080}
    - {name: dns, containerPort: 53, protocol: UDP}
    - {name: ngap, containerPort: 38412, protocol: SCTP}
status: {phase: Running, podIP: 10.0.1.1}
---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default, labels: {app: db, role: primary}}
spec:
  containers:
  - name: db
    ports:
    - {name: pg, containerPort: 5432}
status: {phase: Running, podIP: 10.0.1.2}
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: team-a, labels: {app: client}}
spec: {containers: [{name: c}]}
status: {phase: Running, podIP: 10.0.2.1}
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: team-a, labels: {app: other}}
spec: {containers: [{name: c}]}
status: {phase: Running, podIP: 10.0.2.2}
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: team-b, labels: {app: client}}
spec: {containers: [{name: c}]}
status: {phase: Running, podIP: 10.0.3.1}
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: ghost, labels: {app: client}}
spec: {containers: [{name: c}]}
status: {phase: Running, podIP: 10.0.4.1}
---
apiVersion: v1
kind: Pod
metadata: {name: hostnet, namespace: default, labels: {app: web}}
spec: {hostNetwork: true, containers: [{name: c}]}
status: {phase: Running, podIP: 172.18.0.11}
";

const WEB: &str = "10.0.1.1";
const DB: &str = "10.0.1.2";
const A_CLIENT: &str = "10.0.2.1";
const A_OTHER: &str = "10.0.2.2";
const B_CLIENT: &str = "10.0.3.1";
const GHOST_CLIENT: &str = "10.0.4.1";
const HOSTNET: &str = "172.18.0.11";
const OUTSIDE: &str = "203.0.113.7";

/// The cluster above plus `policies` (YAML documents, `---` separated).
fn cluster(policies: &str) -> Cluster {
    let text = format!("{CLUSTER}---\n{policies}");
    let (cluster, problems) = load_file_text(Path::new("cluster.yaml"), &text);
    assert!(problems.is_empty(), "{problems:#?}");
    cluster
}

fn policy(name: &str, namespace: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n{spec}\n---\n"
    )
}

fn tcp(src: &str, dst: &str, port: u16) -> PolicyFlow {
    PolicyFlow {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        transport: Some((Protocol::Tcp, port)),
        from_destination_node: false,
    }
}

fn ingress(cluster: &Cluster, flow: PolicyFlow) -> DirectionVerdict {
    cluster.network_policy(&flow).ingress
}

fn egress(cluster: &Cluster, flow: PolicyFlow) -> DirectionVerdict {
    cluster.network_policy(&flow).egress
}

/// Ingress to `default/web` on 8080 from `src`.
fn to_web(cluster: &Cluster, src: &str) -> Verdict {
    ingress(cluster, tcp(src, WEB, 8080)).verdict
}

#[test]
fn a_pod_no_policy_selects_admits_everything() {
    let c = cluster(&policy(
        "db-only",
        "default",
        "  podSelector: {matchLabels: {app: db}}",
    ));
    let web = ingress(&c, tcp(A_CLIENT, WEB, 8080));
    assert_eq!(web.verdict, Verdict::NotIsolated);
    assert_eq!(web.pod.as_deref(), Some("default/web"));
    assert!(web.policies.is_empty());
    // The db is isolated by the policy (no rules: nothing admitted).
    assert_eq!(
        ingress(&c, tcp(A_CLIENT, DB, 5432)).verdict,
        Verdict::Denied
    );
}

#[test]
fn an_empty_pod_selector_isolates_every_pod_of_its_namespace_only() {
    let c = cluster(&policy("deny-all", "default", "  podSelector: {}"));
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Denied);
    assert_eq!(ingress(&c, tcp(WEB, DB, 5432)).verdict, Verdict::Denied);
    // team-a's pods are not in the policy's namespace.
    assert_eq!(
        ingress(&c, tcp(WEB, A_CLIENT, 80)).verdict,
        Verdict::NotIsolated
    );
    let denied = ingress(&c, tcp(A_CLIENT, WEB, 8080));
    assert_eq!(denied.policies[0].policy, "default/deny-all");
    assert_eq!(
        denied.summary(),
        "default/web is isolated for ingress by default/deny-all; no rule admits it: default/deny-all: it has no ingress rule, so it admits no ingress traffic"
    );
}

#[test]
fn an_unreadable_policy_makes_its_namespaces_verdicts_unknown_unless_another_admits() {
    let unreadable = policy(
        "typo",
        "default",
        "  podSelector: {}\n  policyTypes: [Ingres]",
    );
    let load = |policies: &str| {
        let text = format!("{CLUSTER}---\n{policies}");
        let (cluster, problems) = load_file_text(Path::new("cluster.yaml"), &text);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0].message.contains("policy unreadable"),
            "{problems:#?}"
        );
        cluster
    };
    let c = load(&unreadable);
    let web = ingress(&c, tcp(A_CLIENT, WEB, 8080));
    assert_eq!(web.verdict, Verdict::Unknown);
    assert_eq!(web.policies[0].policy, "default/typo");
    assert_eq!(web.policies[0].source.file, Path::new("cluster.yaml"));
    assert!(
        web.summary()
            .contains(r#"spec.policyTypes[0]: "Ingres" is not one of Ingress, Egress"#),
        "{}",
        web.summary()
    );
    assert_eq!(egress(&c, tcp(WEB, OUTSIDE, 443)).verdict, Verdict::Unknown);
    // Another namespace's pods are not selected by it.
    assert_eq!(
        ingress(&c, tcp(WEB, A_CLIENT, 80)).verdict,
        Verdict::NotIsolated
    );
    // Policies are a union: a readable policy admitting the flow decides.
    let c = load(&format!(
        "{unreadable}{}",
        policy(
            "allow-all",
            "default",
            "  podSelector: {}\n  ingress:\n  - {}"
        )
    ));
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Admitted);
}

#[test]
fn policy_types_decide_the_isolated_direction() {
    // No policyTypes and no egress rules: Ingress only, egress stays open.
    let c = cluster(&policy("p", "default", "  podSelector: {}"));
    assert_eq!(
        egress(&c, tcp(WEB, OUTSIDE, 443)).verdict,
        Verdict::NotIsolated
    );
    // Egress rules make it Egress too.
    let c = cluster(&policy(
        "p",
        "default",
        "  podSelector: {}\n  egress:\n  - ports: [{port: 53, protocol: UDP}]",
    ));
    assert_eq!(egress(&c, tcp(WEB, OUTSIDE, 443)).verdict, Verdict::Denied);
    // policyTypes [Egress] alone leaves ingress open.
    let c = cluster(&policy(
        "p",
        "default",
        "  podSelector: {}\n  policyTypes: [Egress]",
    ));
    assert_eq!(to_web(&c, A_CLIENT), Verdict::NotIsolated);
    assert_eq!(egress(&c, tcp(WEB, A_CLIENT, 80)).verdict, Verdict::Denied);
}

#[test]
fn an_empty_rule_admits_everything_but_an_empty_rule_list_admits_nothing() {
    // `ingress: [{}]`: one rule with every peer and every port.
    let c = cluster(&policy(
        "allow-all",
        "default",
        "  podSelector: {}\n  ingress:\n  - {}",
    ));
    let admitted = ingress(&c, tcp(OUTSIDE, WEB, 1));
    assert_eq!(admitted.verdict, Verdict::Admitted);
    assert_eq!(
        admitted.summary(),
        "default/web is isolated for ingress by default/allow-all; admitted by default/allow-all (spec.ingress[0] (every source), every port)"
    );
    // `ingress: []` is no rule at all.
    let c = cluster(&policy(
        "deny-all",
        "default",
        "  podSelector: {}\n  ingress: []",
    ));
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Denied);
    // `from: []` is every source, like an absent `from`.
    let c = cluster(&policy(
        "p",
        "default",
        "  podSelector: {}\n  ingress:\n  - from: []\n    ports: [{port: 8080}]",
    ));
    assert_eq!(to_web(&c, OUTSIDE), Verdict::Admitted);
}

#[test]
fn a_pod_selector_alone_means_pods_of_the_policy_namespace() {
    let c = cluster(&policy(
        "from-db",
        "default",
        "  podSelector: {matchLabels: {app: web}}\n  ingress:\n  - from:\n    - podSelector: {matchLabels: {app: db}}",
    ));
    assert_eq!(to_web(&c, DB), Verdict::Admitted);
    // An app=client pod in another namespace does not match, nor does an address.
    let c = cluster(&policy(
        "from-client",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - podSelector: {matchLabels: {app: client}}",
    ));
    let other_namespace = ingress(&c, tcp(A_CLIENT, WEB, 8080));
    assert_eq!(other_namespace.verdict, Verdict::Denied);
    assert_eq!(
        other_namespace.reasons(),
        "default/from-client: spec.ingress[0]: pod team-a/client is not in the policy's namespace default"
    );
    assert_eq!(
        ingress(&c, tcp(OUTSIDE, WEB, 8080)).reasons(),
        "default/from-client: spec.ingress[0]: 203.0.113.7 is no pod's address"
    );
    let wrong_label = ingress(&c, tcp(DB, WEB, 8080));
    assert_eq!(
        wrong_label.reasons(),
        "default/from-client: spec.ingress[0]: pod default/db has label app=db, not app=client"
    );
}

#[test]
fn a_namespace_selector_alone_means_every_pod_of_matching_namespaces() {
    let c = cluster(&policy(
        "from-team-a",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - namespaceSelector: {matchLabels: {team: a}}",
    ));
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Admitted);
    assert_eq!(to_web(&c, A_OTHER), Verdict::Admitted);
    let b = ingress(&c, tcp(B_CLIENT, WEB, 8080));
    assert_eq!(b.verdict, Verdict::Denied);
    assert_eq!(
        b.reasons(),
        "default/from-team-a: spec.ingress[0]: namespace team-b has label team=b, not team=a"
    );
    assert_eq!(
        ingress(&c, tcp(DB, WEB, 8080)).reasons(),
        "default/from-team-a: spec.ingress[0]: namespace default lacks label team=a"
    );
}

#[test]
fn both_selectors_in_one_peer_are_and_but_two_peers_are_or() {
    let and = cluster(&policy(
        "and",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - namespaceSelector: {matchLabels: {team: a}}\n      podSelector: {matchLabels: {app: client}}",
    ));
    assert_eq!(to_web(&and, A_CLIENT), Verdict::Admitted);
    // team-a but not app=client; app=client but not team-a.
    assert_eq!(to_web(&and, A_OTHER), Verdict::Denied);
    assert_eq!(to_web(&and, B_CLIENT), Verdict::Denied);
    assert_eq!(
        ingress(&and, tcp(A_OTHER, WEB, 8080)).reasons(),
        "default/and: spec.ingress[0]: pod team-a/other has label app=other, not app=client"
    );

    let or = cluster(&policy(
        "or",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - namespaceSelector: {matchLabels: {team: a}}\n    - podSelector: {matchLabels: {app: client}}",
    ));
    assert_eq!(
        to_web(&or, A_OTHER),
        Verdict::Admitted,
        "team-a alone is enough"
    );
    // app=client alone means app=client in the policy's namespace: team-b's is not.
    assert_eq!(to_web(&or, B_CLIENT), Verdict::Denied);
    let admitted = ingress(&or, tcp(A_OTHER, WEB, 8080));
    assert_eq!(
        admitted.policies[0].outcome,
        PolicyOutcome::Admits(RuleMatch {
            direction: Direction::Ingress,
            rule: 0,
            peer: Some(0),
            port: None
        })
    );
}

#[test]
fn namespaces_are_selected_by_their_name_label() {
    let c = cluster(&policy(
        "by-name",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-b}}",
    ));
    assert_eq!(to_web(&c, B_CLIENT), Verdict::Admitted);
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Denied);
    // Without a Namespace object the name label is still known...
    assert_eq!(to_web(&c, GHOST_CLIENT), Verdict::Denied);
    // ...but any other label is not.
    let c = cluster(&policy(
        "by-team",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - namespaceSelector: {matchLabels: {team: a}}",
    ));
    let ghost = ingress(&c, tcp(GHOST_CLIENT, WEB, 8080));
    assert_eq!(ghost.verdict, Verdict::Unknown);
    // In one peer with a podSelector the pod's labels can still decide (AND).
    let c_and = cluster(&policy(
        "by-team-and-app",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - namespaceSelector: {matchLabels: {team: a}}\n      podSelector: {matchLabels: {app: other}}",
    ));
    assert_eq!(to_web(&c_and, GHOST_CLIENT), Verdict::Denied);
    assert!(
        ghost.summary().contains(
            "the snapshot has no Namespace object ghost, so whether it has label team is unknown"
        ),
        "{}",
        ghost.summary()
    );
}

#[test]
fn match_expressions_say_which_requirement_fails() {
    let c = cluster(&policy(
        "exprs",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - podSelector:\n        matchExpressions:\n        - {key: role, operator: In, values: [primary, replica]}\n        - {key: app, operator: NotIn, values: [web]}",
    ));
    assert_eq!(to_web(&c, DB), Verdict::Admitted);
    assert_eq!(
        ingress(&c, tcp(HOSTNET, DB, 5432)).reasons(),
        "default/exprs: spec.ingress[0]: 172.18.0.11 is no pod's address"
    );
    assert_eq!(
        ingress(&c, tcp(WEB, DB, 5432)).reasons(),
        "default/exprs: spec.ingress[0]: pod default/web lacks label role (wanted one of primary, replica)"
    );
}

#[test]
fn ip_block_admits_its_cidr_minus_except_and_matches_pod_ips() {
    let c = cluster(&policy(
        "block",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - ipBlock: {cidr: 10.0.0.0/16, except: [10.0.3.0/24]}",
    ));
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Admitted, "a pod IP matches");
    let excepted = ingress(&c, tcp(B_CLIENT, WEB, 8080));
    assert_eq!(excepted.verdict, Verdict::Denied);
    assert_eq!(
        excepted.reasons(),
        "default/block: spec.ingress[0]: 10.0.3.1 is in except 10.0.3.0/24 of 10.0.0.0/16"
    );
    assert_eq!(
        ingress(&c, tcp(OUTSIDE, WEB, 8080)).reasons(),
        "default/block: spec.ingress[0]: 203.0.113.7 is not in 10.0.0.0/16"
    );
    // A host-network pod is its node's address: only an ipBlock can match it.
    let c = cluster(&policy(
        "nodes",
        "default",
        "  podSelector: {}\n  ingress:\n  - from:\n    - ipBlock: {cidr: 172.18.0.0/24}\n    - podSelector: {}",
    ));
    assert_eq!(to_web(&c, HOSTNET), Verdict::Admitted);
    // And it is not selected by policies itself.
    assert_eq!(
        ingress(&c, tcp(WEB, HOSTNET, 22)).verdict,
        Verdict::NotIsolated
    );
}

#[test]
fn ports_match_protocol_number_and_end_port_ranges() {
    let c = cluster(&policy(
        "ports",
        "default",
        "  podSelector: {}\n  ingress:\n  - ports:\n    - {port: 80}\n    - {port: 9000, endPort: 9100}\n    - {port: 53, protocol: UDP}",
    ));
    assert_eq!(
        ingress(&c, tcp(A_CLIENT, WEB, 80)).verdict,
        Verdict::Admitted
    );
    assert_eq!(
        ingress(&c, tcp(A_CLIENT, WEB, 9000)).verdict,
        Verdict::Admitted
    );
    assert_eq!(
        ingress(&c, tcp(A_CLIENT, WEB, 9100)).verdict,
        Verdict::Admitted
    );
    let missed = ingress(&c, tcp(A_CLIENT, WEB, 8080));
    assert_eq!(
        missed.reasons(),
        "default/ports: spec.ingress[0]: port 8080/TCP not in [80/TCP, 9000-9100/TCP, 53/UDP]"
    );
    // TCP 53 is not UDP 53: the protocol defaults to TCP and must agree.
    assert_eq!(ingress(&c, tcp(A_CLIENT, WEB, 53)).verdict, Verdict::Denied);
    let udp = PolicyFlow {
        transport: Some((Protocol::Udp, 53)),
        ..tcp(A_CLIENT, WEB, 53)
    };
    assert_eq!(ingress(&c, udp).verdict, Verdict::Admitted);
    // ICMP has no port: only a rule without ports admits it.
    let ping = PolicyFlow {
        transport: None,
        ..tcp(A_CLIENT, WEB, 0)
    };
    assert!(
        ingress(&c, ping)
            .reasons()
            .ends_with("traffic without ports (ICMP) not in [80/TCP, 9000-9100/TCP, 53/UDP]")
    );
    // A port entry with a protocol and no number is every port of it.
    let c = cluster(&policy(
        "udp",
        "default",
        "  podSelector: {}\n  ingress:\n  - ports: [{protocol: UDP}]",
    ));
    assert_eq!(ingress(&c, udp).verdict, Verdict::Admitted);
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Denied);
}

#[test]
fn an_sctp_port_admits_sctp_only_and_a_tcp_port_no_sctp() {
    let sctp = |port| PolicyFlow {
        transport: Some((Protocol::Sctp, port)),
        ..tcp(A_CLIENT, WEB, port)
    };
    let c = cluster(&policy(
        "ngap",
        "default",
        "  podSelector: {}\n  ingress:\n  - ports: [{port: 38412, protocol: SCTP}, {port: 8080}]",
    ));
    assert_eq!(ingress(&c, sctp(38412)).verdict, Verdict::Admitted);
    assert_eq!(
        ingress(&c, tcp(A_CLIENT, WEB, 38412)).verdict,
        Verdict::Denied
    );
    let missed = ingress(&c, sctp(8080));
    assert_eq!(missed.verdict, Verdict::Denied);
    assert_eq!(
        missed.reasons(),
        "default/ngap: spec.ingress[0]: port 8080/SCTP not in [38412/SCTP, 8080/TCP]"
    );
    // A named SCTP port is the destination pod's container port of that
    // name and protocol.
    let c = cluster(&policy(
        "named",
        "default",
        "  podSelector: {}\n  ingress:\n  - ports: [{port: ngap, protocol: SCTP}]",
    ));
    assert_eq!(ingress(&c, sctp(38412)).verdict, Verdict::Admitted);
    assert_eq!(
        ingress(&c, tcp(A_CLIENT, WEB, 38412)).verdict,
        Verdict::Denied
    );
}

#[test]
fn named_ports_resolve_against_the_destination_pod() {
    let c = cluster(&policy(
        "named",
        "default",
        "  podSelector: {}\n  ingress:\n  - ports: [{port: http}, {port: pg}]",
    ));
    assert_eq!(
        to_web(&c, A_CLIENT),
        Verdict::Admitted,
        "web's http is 8080"
    );
    assert_eq!(
        ingress(&c, tcp(A_CLIENT, DB, 5432)).verdict,
        Verdict::Admitted
    );
    let wrong = ingress(&c, tcp(A_CLIENT, WEB, 5432));
    assert_eq!(
        wrong.reasons(),
        "default/named: spec.ingress[0]: port 5432/TCP not in [http/TCP (= 8080), pg/TCP (no such container port on default/web)]"
    );
    // A named port of the wrong protocol does not resolve.
    let c = cluster(&policy(
        "dns",
        "default",
        "  podSelector: {}\n  ingress:\n  - ports: [{port: dns}]",
    ));
    assert_eq!(ingress(&c, tcp(A_CLIENT, WEB, 53)).verdict, Verdict::Denied);

    // Egress: the name is the destination pod's port, not the source's.
    let c = cluster(&policy(
        "egress-named",
        "team-a",
        "  podSelector: {}\n  policyTypes: [Egress]\n  egress:\n  - ports: [{port: pg}]",
    ));
    assert_eq!(
        egress(&c, tcp(A_CLIENT, DB, 5432)).verdict,
        Verdict::Admitted
    );
    let outside = egress(&c, tcp(A_CLIENT, OUTSIDE, 5432));
    assert_eq!(outside.verdict, Verdict::Denied);
    assert_eq!(
        outside.reasons(),
        "team-a/egress-named: spec.egress[0]: port 5432/TCP not in [pg/TCP (the destination is no pod)]"
    );
}

#[test]
fn egress_is_judged_at_the_source_pod_against_the_destination() {
    let c = cluster(&policy(
        "to-db",
        "team-a",
        "  podSelector: {matchLabels: {app: client}}\n  egress:\n  - to:\n    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: default}}\n      podSelector: {matchLabels: {app: db}}\n    ports: [{port: 5432}]",
    ));
    let verdict = c.network_policy(&tcp(A_CLIENT, DB, 5432));
    assert_eq!(verdict.egress.verdict, Verdict::Admitted);
    assert_eq!(verdict.egress.pod.as_deref(), Some("team-a/client"));
    assert_eq!(verdict.ingress.verdict, Verdict::NotIsolated);
    let to_web = egress(&c, tcp(A_CLIENT, WEB, 5432));
    assert_eq!(
        to_web.summary(),
        "team-a/client is isolated for egress by team-a/to-db; no rule admits it: team-a/to-db: spec.egress[0]: pod default/web has label app=web, not app=db"
    );
    // team-a/other is not selected, so not isolated.
    assert_eq!(
        egress(&c, tcp(A_OTHER, WEB, 80)).verdict,
        Verdict::NotIsolated
    );
    // An address outside the cluster is no pod: egress from it is not judged.
    let from_outside = egress(&c, tcp(OUTSIDE, WEB, 80));
    assert_eq!(from_outside.pod, None);
    assert_eq!(
        from_outside.summary(),
        "egress: 203.0.113.7 is no pod's address, so no NetworkPolicy applies to it"
    );
}

#[test]
fn policies_are_a_union_any_admitting_rule_wins() {
    let deny_all = policy("deny-all", "default", "  podSelector: {}");
    let allow_team_a = policy(
        "allow-team-a",
        "default",
        "  podSelector: {matchLabels: {app: web}}\n  ingress:\n  - from:\n    - namespaceSelector: {matchLabels: {team: a}}",
    );
    let policies = format!("{deny_all}{allow_team_a}");
    let c = cluster(&policies);
    let admitted = ingress(&c, tcp(A_CLIENT, WEB, 8080));
    assert_eq!(admitted.verdict, Verdict::Admitted);
    assert_eq!(admitted.policies.len(), 2, "both isolate web");
    assert!(
        admitted
            .summary()
            .ends_with("admitted by default/allow-team-a (spec.ingress[0].from[0], every port)")
    );
    let denied = ingress(&c, tcp(B_CLIENT, WEB, 8080));
    assert_eq!(denied.verdict, Verdict::Denied);
    // Each isolating policy says why, in the order of their names.
    assert_eq!(
        denied.reasons(),
        "default/allow-team-a: spec.ingress[0]: namespace team-b has label team=b, not team=a; default/deny-all: it has no ingress rule, so it admits no ingress traffic"
    );
    // db is isolated only by deny-all.
    assert_eq!(
        ingress(&c, tcp(A_CLIENT, DB, 5432)).verdict,
        Verdict::Denied
    );
}

#[test]
fn a_peer_the_api_would_refuse_is_unknown_unless_another_rule_decides() {
    let text = "  podSelector: {}\n  ingress:\n  - from:\n    - {}\n  - from:\n    - ipBlock: {cidr: 10.0.2.0/24}";
    let (c, problems) = load_file_text(
        Path::new("cluster.yaml"),
        &format!("{CLUSTER}---\n{}", policy("odd", "default", text)),
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Admitted, "rule 1 admits");
    let unknown = ingress(&c, tcp(B_CLIENT, WEB, 8080));
    assert_eq!(unknown.verdict, Verdict::Unknown);
    assert_eq!(
        unknown.reasons(),
        "default/odd: spec.ingress[0]: a peer needs podSelector, namespaceSelector or ipBlock; default/odd: spec.ingress[1]: 10.0.3.1 is not in 10.0.2.0/24"
    );
    // A known miss of the port decides the rule whatever its peer is.
    let text = "  podSelector: {}\n  ingress:\n  - from:\n    - {}\n    ports: [{port: 80}]";
    let (c, _) = load_file_text(
        Path::new("cluster.yaml"),
        &format!("{CLUSTER}---\n{}", policy("odd", "default", text)),
    );
    assert_eq!(to_web(&c, A_CLIENT), Verdict::Denied);
}

#[test]
fn a_namespace_object_without_the_name_label_gets_it() {
    let c = cluster("");
    let team_a = c.namespace("team-a").unwrap();
    assert_eq!(
        team_a
            .meta
            .labels
            .get(NAMESPACE_NAME_LABEL)
            .map(String::as_str),
        Some("team-a")
    );
}

#[test]
fn traffic_from_the_pods_own_node_is_admitted_whatever_the_policies() {
    let c = cluster(&policy(
        "deny-all",
        "default",
        "  podSelector: {}\n  policyTypes: [Ingress]",
    ));
    let from_elsewhere = ingress(&c, tcp(A_CLIENT, WEB, 8080));
    assert_eq!(from_elsewhere.verdict, Verdict::Denied);
    let from_node = ingress(
        &c,
        PolicyFlow {
            from_destination_node: true,
            ..tcp(A_CLIENT, WEB, 8080)
        },
    );
    assert_eq!(from_node.verdict, Verdict::Admitted);
    assert!(
        from_node.summary().ends_with("own node is always admitted"),
        "{}",
        from_node.summary()
    );
}
