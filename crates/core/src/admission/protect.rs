//! `--protect-managed`: a policy on updates of what Knative's controllers own (a Revision's
//! Deployment, a Route's KIngress and Kubernetes Services, a Broker's Channel, net-istio's
//! VirtualServices, ...) and of Knative's own ConfigMaps, by anyone but the controllers. A hand
//! edit of those is what `manual_edit` reports after the fact; the controller reverts it, or
//! fights it.
//!
//! Matched: the main resource only (`resources` never name `/status` or `/scale`, so the
//! controllers' status writes and an autoscaler's scale writes are never seen), UPDATE only
//! (creating and deleting are the controllers' and the garbage collector's), an object whose
//! stored version has a controller owner reference to a `*.knative.dev` kind, or a
//! `config-*` ConfigMap in `knative-serving` or `knative-eventing`. Let through: the users in
//! [`DEFAULT_ALLOWED_USERS`] and those given (`request.userInfo.username`), and every service
//! account of Knative's namespaces ([`ALLOWED_GROUPS`]).

use super::{Named, Policy, ResourceRule};

/// Who may update managed objects: Knative's controllers (Serving, net-istio, Eventing, the
/// Operator), the garbage collector and the namespace controller (as service accounts when
/// kube-controller-manager runs with `--use-service-account-credentials`, else as itself).
pub const DEFAULT_ALLOWED_USERS: &[&str] = &[
    "system:serviceaccount:knative-serving:controller",
    "system:serviceaccount:knative-serving:activator",
    "system:serviceaccount:knative-eventing:eventing-controller",
    "system:serviceaccount:knative-eventing:eventing-webhook",
    "system:serviceaccount:knative-eventing:imc-controller",
    "system:serviceaccount:knative-eventing:imc-dispatcher",
    "system:serviceaccount:knative-eventing:mt-broker-filter",
    "system:serviceaccount:knative-eventing:mt-broker-ingress",
    "system:serviceaccount:knative-eventing:pingsource-mt-adapter",
    "system:serviceaccount:knative-operator:knative-operator",
    "system:serviceaccount:knative-operator:operator-webhook",
    "system:serviceaccount:kube-system:generic-garbage-collector",
    // drift-sentinel's own repairs (`k8s/components/remediation/`) put Knative's values back.
    "system:serviceaccount:drift-sentinel:drift-sentinel",
    "system:serviceaccount:kube-system:namespace-controller",
    "system:kube-controller-manager",
];

/// The groups whose members may update managed objects: the service accounts of Knative's
/// namespaces.
pub const ALLOWED_GROUPS: &[&str] = &[
    "system:serviceaccounts:knative-serving",
    "system:serviceaccounts:knative-eventing",
    "system:serviceaccounts:knative-operator",
];

/// The kinds Knative's controllers create and own, as (group, resources).
const OWNED: &[(&str, &[&str])] = &[
    ("apps", &["deployments"]),
    ("", &["services", "configmaps", "endpoints"]),
    ("autoscaling", &["horizontalpodautoscalers"]),
    (
        "serving.knative.dev",
        &["routes", "configurations", "revisions"],
    ),
    (
        "networking.internal.knative.dev",
        &["ingresses", "certificates", "serverlessservices"],
    ),
    (
        "autoscaling.internal.knative.dev",
        &["podautoscalers", "metrics"],
    ),
    (
        "messaging.knative.dev",
        &["channels", "inmemorychannels", "subscriptions"],
    ),
    ("networking.istio.io", &["virtualservices", "gateways"]),
];

/// The policy; `allowed` are let through besides the defaults.
pub fn protect_managed(allowed: &[String]) -> Policy {
    let mut users: Vec<String> = DEFAULT_ALLOWED_USERS
        .iter()
        .map(|user| (*user).to_string())
        .collect();
    for user in allowed {
        if !users.contains(user) {
            users.push(user.clone());
        }
    }
    let users = users
        .iter()
        .map(|user| super::cel_string(user))
        .collect::<Vec<_>>()
        .join(", ");
    let groups = ALLOWED_GROUPS
        .iter()
        .map(|group| super::cel_string(group))
        .collect::<Vec<_>>()
        .join(", ");
    Policy {
        name: super::PROTECT_MANAGED.to_string(),
        rule: "protect-managed".to_string(),
        description: "Hand edits of what Knative's controllers own, and of Knative's ConfigMaps"
            .to_string(),
        resource_rules: OWNED
            .iter()
            .map(|(group, resources)| ResourceRule {
                scope: None,
                groups: vec![(*group).to_string()],
                versions: vec!["*".to_string()],
                resources: resources.iter().map(|name| (*name).to_string()).collect(),
                operations: vec!["UPDATE".to_string()],
            })
            .collect(),
        namespaces: Vec::new(),
        excluded_namespaces: Vec::new(),
        object_labels: Default::default(),
        match_conditions: vec![
            Named {
                name: "managed-by-knative".to_string(),
                expression: "(has(oldObject.metadata.ownerReferences) && \
                     oldObject.metadata.ownerReferences.exists(r, has(r.controller) && \
                     r.controller && (r.apiVersion.split('/')[0] == 'knative.dev' || \
                     r.apiVersion.split('/')[0].endsWith('.knative.dev')))) || \
                     (request.kind.group == '' && request.kind.kind == 'ConfigMap' && \
                     request.namespace in ['knative-serving', 'knative-eventing'] && \
                     request.name.startsWith('config-'))"
                    .to_string(),
            },
            Named {
                name: "not-a-controller".to_string(),
                // Every service account of Knative's namespaces is Knative's (its controllers,
                // and those of extensions installed there: Kafka, Kourier, ...).
                expression: format!(
                    "!(request.userInfo.username in [{users}]) && \
                     !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in \
                     [{groups}]))"
                ),
            },
        ],
        variables: Vec::new(),
        expression: "false".to_string(),
        message: Some(
            "this object is managed by Knative: its controller reverts hand edits; change the \
             object that owns it (or, for a ConfigMap, the KnativeServing/KnativeEventing \
             resource)"
                .to_string(),
        ),
        message_expression: Some(
            "request.kind.kind == 'ConfigMap' ? 'ConfigMap ' + request.namespace + '/' + \
             request.name + ' is Knative\\'s configuration, edited by ' + request.userInfo.username + \
             ': where the Knative Operator runs, it reverts this; change the KnativeServing or \
             KnativeEventing resource instead' : request.kind.kind + ' ' + request.namespace + \
             '/' + request.name + ' is managed by Knative: its controller reverts hand edits \
             by ' + request.userInfo.username + '; change the object that owns it instead'"
                .to_string(),
        ),
    }
}
