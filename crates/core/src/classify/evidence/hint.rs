//! Remediation hints: commands a person can paste. They name objects exactly and quote values for
//! a POSIX shell, so a hint is runnable as printed.

use serde_json::{json, Value};

use drift_model::FieldChange;

pub use drift_model::text::shell_quote;

/// The kubectl resource name of a kind (Knative kinds by their full resource name, so they never
/// collide with core kinds: `services.serving.knative.dev`, not `service`).
pub fn resource_name(api_version: &str, kind: &str) -> String {
    let group = api_version
        .split_once('/')
        .map(|(group, _)| group)
        .unwrap_or("");
    let plural = plural(kind);
    if group.is_empty() || group == "apps" {
        plural
    } else {
        format!("{plural}.{group}")
    }
}

/// The resource (plural, lower case) of a kind: Kubernetes' plurals of the kinds watched here,
/// `ingresses`, `eventpolicies`, `endpoints` (a kind already plural), else `-s`.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s') && !lower.ends_with("ss") {
        lower
    } else if lower.ends_with("ss") {
        format!("{lower}es")
    } else if let Some(stem) = lower
        .strip_suffix('y')
        .filter(|stem| !stem.ends_with(['a', 'e', 'i', 'o', 'u']))
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// `kubectl -n NS patch RESOURCE NAME --type=json -p '...'` undoing `changes`.
pub fn revert_patch(
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    changes: &[FieldChange],
) -> Option<String> {
    if changes.is_empty() {
        return None;
    }
    let operations: Vec<Value> = changes
        .iter()
        .map(|change| match (&change.before, &change.after) {
            (Some(before), Some(_)) => {
                json!({"op": "replace", "path": change.path, "value": before})
            }
            (Some(before), None) => json!({"op": "add", "path": change.path, "value": before}),
            (None, _) => json!({"op": "remove", "path": change.path}),
        })
        .collect();
    let patch = Value::Array(operations).to_string();
    Some(format!(
        "kubectl{} patch {} {} --type=json -p {}",
        namespace_flag(namespace),
        resource_name(api_version, kind),
        shell_quote(name),
        shell_quote(&patch)
    ))
}

/// ` -n NS`, or nothing for cluster-scoped objects.
pub fn namespace_flag(namespace: &str) -> String {
    if namespace.is_empty() {
        String::new()
    } else {
        format!(" -n {}", shell_quote(namespace))
    }
}

/// `kubectl -n NS describe RESOURCE NAME`.
pub fn describe(api_version: &str, kind: &str, namespace: &str, name: &str) -> String {
    format!(
        "kubectl{} describe {} {}",
        namespace_flag(namespace),
        resource_name(api_version, kind),
        shell_quote(name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(shell_quote("knative-webapp"), "knative-webapp");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn revert_patch_undoes_each_change() {
        let changes = vec![
            FieldChange {
                path: "/spec/traffic/0/percent".into(),
                before: Some(json!(100)),
                after: Some(json!(50)),
            },
            FieldChange {
                path: "/spec/traffic/1".into(),
                before: None,
                after: Some(json!({"percent": 50})),
            },
        ];
        let command = revert_patch(
            "serving.knative.dev/v1",
            "Service",
            "myapp",
            "web",
            &changes,
        )
        .unwrap();
        assert_eq!(
            command,
            "kubectl -n myapp patch services.serving.knative.dev web --type=json -p '[{\"op\":\"replace\",\"path\":\"/spec/traffic/0/percent\",\"value\":100},{\"op\":\"remove\",\"path\":\"/spec/traffic/1\"}]'"
        );
    }
}
