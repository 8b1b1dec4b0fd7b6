//! The API server's ValidatingAdmissionPolicy step, for the policies `admission export` writes
//! (installed with `FakeCluster::install_policies`): each policy judged by
//! `drift_core::admission::evaluate` on the request as the API server builds it, after the
//! webhooks; a refusal bound with `Deny` is the API server's `422` (`reason: Invalid`) and
//! message, one bound with `Warn` a `Warning` header on the answer (`validating/dispatcher.go`).
//! Writes by the fake's own controllers do not pass here (they are Knative's, which the policies
//! let through).

use std::collections::BTreeMap;

use drift_core::admission::{evaluate, Action, Decision, Policy, Request};
use serde_json::Value;

use super::store::USER;

/// What a write is, for the policies.
pub(super) struct Write<'a> {
    pub operation: &'a str,
    pub api_version: &'a str,
    pub plural: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub object: &'a Value,
    pub old_object: Option<&'a Value>,
}

/// The warnings to send with the answer, or the refusal's message.
pub(super) fn admit(
    policies: &[(Policy, Action)],
    write: &Write<'_>,
) -> Result<Vec<String>, String> {
    let (group, version) = write
        .api_version
        .split_once('/')
        .unwrap_or(("", write.api_version));
    let request = Request {
        operation: write.operation.to_string(),
        group: group.to_string(),
        version: version.to_string(),
        resource: write.plural.to_string(),
        kind: write.object["kind"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        sub_resource: String::new(),
        name: write.name.to_string(),
        namespace: write.namespace.to_string(),
        namespace_labels: BTreeMap::from([(
            "kubernetes.io/metadata.name".to_string(),
            write.namespace.to_string(),
        )]),
        username: USER.to_string(),
        groups: vec![
            "system:serviceaccounts".to_string(),
            "system:serviceaccounts:drills".to_string(),
            "system:authenticated".to_string(),
        ],
        object: Some(write.object.clone()),
        old_object: write.old_object.cloned(),
    };
    let resource = match group {
        "" => write.plural.to_string(),
        group => format!("{}.{group}", write.plural),
    };
    let mut warnings = Vec::new();
    for (policy, action) in policies {
        if let Decision::Refused(message) = evaluate(policy, &request) {
            let name = &policy.name;
            match action {
                Action::Deny => {
                    return Err(format!(
                        "{resource} \"{}\" is forbidden: ValidatingAdmissionPolicy '{name}' with \
                         binding '{name}' denied request: {message}",
                        write.name
                    ))
                }
                Action::Warn => warnings.push(format!(
                    "299 - \"Validation failed for ValidatingAdmissionPolicy '{name}' with binding \
                     '{name}': {message}\""
                )),
                Action::Audit => {}
            }
        }
    }
    Ok(warnings)
}
