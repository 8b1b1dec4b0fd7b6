//! A policy as the two Kubernetes objects `admission export` writes: the
//! ValidatingAdmissionPolicy and its ValidatingAdmissionPolicyBinding
//! (`admissionregistration.k8s.io/v1`).

use serde_json::{json, Map, Value};

use super::{Action, Policy, MANAGED_BY, RULE_ANNOTATION};

/// The policy and its binding, in that order.
pub fn manifests(policy: &Policy, action: Action) -> [Value; 2] {
    let metadata = |name: &str| {
        let mut annotations = Map::new();
        annotations.insert(RULE_ANNOTATION.to_string(), json!(policy.rule));
        if !policy.description.is_empty() {
            annotations.insert(
                "drift-sentinel.dev/description".to_string(),
                json!(policy.description),
            );
        }
        json!({
            "name": name,
            "labels": {MANAGED_BY.0: MANAGED_BY.1},
            "annotations": annotations,
        })
    };
    let mut constraints = Map::new();
    constraints.insert(
        "resourceRules".to_string(),
        Value::Array(
            policy
                .resource_rules
                .iter()
                .map(|rule| {
                    let mut entry = json!({
                        "apiGroups": rule.groups,
                        "apiVersions": rule.versions,
                        "resources": rule.resources,
                        "operations": rule.operations,
                    });
                    if let Some(scope) = rule.scope {
                        entry["scope"] = json!(scope);
                    }
                    entry
                })
                .collect(),
        ),
    );
    let mut namespace_requirements = Vec::new();
    if !policy.namespaces.is_empty() {
        namespace_requirements.push(json!({
            "key": "kubernetes.io/metadata.name", "operator": "In", "values": policy.namespaces,
        }));
    }
    if !policy.excluded_namespaces.is_empty() {
        namespace_requirements.push(json!({
            "key": "kubernetes.io/metadata.name", "operator": "NotIn",
            "values": policy.excluded_namespaces,
        }));
    }
    if !namespace_requirements.is_empty() {
        constraints.insert(
            "namespaceSelector".to_string(),
            json!({"matchExpressions": namespace_requirements}),
        );
    }
    if !policy.object_labels.is_empty() {
        constraints.insert(
            "objectSelector".to_string(),
            json!({"matchLabels": policy.object_labels}),
        );
    }
    let mut validation = Map::new();
    validation.insert("expression".to_string(), json!(policy.expression));
    if let Some(message) = &policy.message {
        validation.insert("message".to_string(), json!(message));
    }
    if let Some(message) = &policy.message_expression {
        validation.insert("messageExpression".to_string(), json!(message));
    }
    validation.insert("reason".to_string(), json!("Invalid"));
    let named = |list: &[super::Named]| {
        Value::Array(
            list.iter()
                .map(|named| json!({"name": named.name, "expression": named.expression}))
                .collect(),
        )
    };
    let mut spec = Map::new();
    // An expression that fails (a field of an unexpected type) lets the request through, as
    // the sink lets a failed evaluation neither hold nor break.
    spec.insert("failurePolicy".to_string(), json!("Ignore"));
    spec.insert("matchConstraints".to_string(), Value::Object(constraints));
    if !policy.match_conditions.is_empty() {
        spec.insert(
            "matchConditions".to_string(),
            named(&policy.match_conditions),
        );
    }
    if !policy.variables.is_empty() {
        spec.insert("variables".to_string(), named(&policy.variables));
    }
    spec.insert(
        "validations".to_string(),
        Value::Array(vec![Value::Object(validation)]),
    );
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": metadata(&policy.name),
            "spec": spec,
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": metadata(&policy.name),
            "spec": {
                "policyName": policy.name,
                "validationActions": action.validation_actions(),
            },
        }),
    ]
}
