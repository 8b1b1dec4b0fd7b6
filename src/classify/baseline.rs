//! Desired state, as kept in Git (manifests loaded by [`crate::manifest`]), and the normalized
//! comparison of a live object against them (used by the `baseline_drift` class and by `check`).
//!
//! Comparison is "desired fields only", as `kubectl apply` sees it: every field the manifest sets
//! must have that value live; fields the manifest leaves out (server-set metadata, status,
//! defaults Knative adds such as `containerConcurrency`, `readinessProbe` or `timeoutSeconds`) are
//! not compared. Lists must have the same length and are compared item by item. Numbers compare by
//! value (`100` equals `100.0`). ConfigMap `data` is compared key by key in both directions, except
//! `_example` (documentation that Knative ignores). Configured ignore paths are dropped.
//!
//! Pure: the manifests are loaded by the caller.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::manifest::{ManifestKey, Manifests};
use crate::model::pointer::push_pointer;
use crate::model::FieldChange;
use crate::model::MAX_CHANGES;

/// A set of desired manifests.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    objects: BTreeMap<ManifestKey, Value>,
}

impl Baseline {
    /// True when no manifest is loaded.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Number of manifests.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// The desired manifest of an object.
    pub fn get(&self, key: &ManifestKey) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Every manifest.
    pub fn iter(&self) -> impl Iterator<Item = (&ManifestKey, &Value)> {
        self.objects.iter()
    }

    /// The desired manifests of a loaded set. When a set defines one object twice, the later
    /// definition wins (`check` refuses such a baseline; the sink keeps running on it).
    pub fn from_manifests(manifests: &Manifests) -> Baseline {
        Baseline {
            objects: manifests
                .iter()
                .map(|(key, document)| (key.clone(), document.value.clone()))
                .collect(),
        }
    }
}

/// Differences between a desired manifest and a live object (both as JSON), desired fields only.
/// `before` of each change is the desired value, `after` the live one.
pub(crate) fn compare(
    desired: &Value,
    live: &Value,
    ignored: &dyn Fn(&str) -> bool,
) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    if let Some(spec) = desired.get("spec") {
        subset("/spec", spec, live.get("spec"), &mut changes);
    }
    for field in ["labels", "annotations"] {
        if let Some(Value::Object(wanted)) = desired.pointer(&format!("/metadata/{field}")) {
            for (key, value) in wanted {
                let live_value = live
                    .pointer(&format!("/metadata/{field}"))
                    .and_then(|map| map.get(key));
                subset(
                    &push_pointer(&format!("/metadata/{field}"), key),
                    value,
                    live_value,
                    &mut changes,
                );
            }
        }
    }
    let is_config_map = desired.get("kind").and_then(Value::as_str) == Some("ConfigMap");
    if is_config_map {
        let empty = serde_json::Map::new();
        let wanted = desired
            .get("data")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let actual = live
            .get("data")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut keys: Vec<&String> = wanted
            .keys()
            .chain(actual.keys())
            .filter(|key| *key != "_example")
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let (want, have) = (wanted.get(key), actual.get(key));
            if want != have {
                changes.push(FieldChange {
                    path: push_pointer("/data", key),
                    before: want.cloned(),
                    after: have.cloned(),
                });
            }
        }
    }
    changes.retain(|change| !ignored(&change.path));
    changes.truncate(MAX_CHANGES);
    changes
}

fn subset(path: &str, desired: &Value, live: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (desired, live) {
        (Value::Object(wanted), Some(Value::Object(actual))) => {
            for (key, value) in wanted {
                subset(&push_pointer(path, key), value, actual.get(key), out);
            }
        }
        (Value::Object(wanted), None | Some(Value::Null)) if wanted.is_empty() => {}
        (Value::Array(wanted), Some(Value::Array(actual))) if wanted.len() == actual.len() => {
            for (index, (want, have)) in wanted.iter().zip(actual).enumerate() {
                subset(
                    &push_pointer(path, &index.to_string()),
                    want,
                    Some(have),
                    out,
                );
            }
        }
        (Value::Null, None | Some(Value::Null)) => {}
        (Value::Number(want), Some(Value::Number(have))) if want.as_f64() == have.as_f64() => {}
        (want, Some(have)) if want == have => {}
        (want, have) => out.push(FieldChange {
            path: path.to_string(),
            before: Some(want.clone()),
            after: have.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_added_by_knative_are_not_drift() {
        let desired = json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "a"},
            "spec": {"template": {"spec": {"containers": [{"image": "img:1"}]}}}});
        let live = json!({"spec": {"template": {"spec": {"containerConcurrency": 0, "timeoutSeconds": 300,
            "containers": [{"image": "img:1", "name": "user-container", "resources": {}}]}},
            "traffic": [{"latestRevision": true, "percent": 100}]}});
        assert!(compare(&desired, &live, &|_| false).is_empty());
    }

    #[test]
    fn a_changed_desired_field_is_drift() {
        let desired = json!({"kind": "Service", "spec": {"traffic": [{"latestRevision": true, "percent": 100}]}});
        let live = json!({"spec": {"traffic": [{"latestRevision": true, "percent": 100.0}]}});
        assert!(compare(&desired, &live, &|_| false).is_empty());
        let live = json!({"spec": {"traffic": [{"revisionName": "a-00001", "percent": 100}]}});
        let changes = compare(&desired, &live, &|_| false);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/spec/traffic/0/latestRevision");
    }

    #[test]
    fn config_map_data_compares_both_ways_but_not_example() {
        let desired = json!({"kind": "ConfigMap", "data": {"min-scale": "1", "_example": "docs"}});
        let live = json!({"data": {"min-scale": "1", "max-scale": "5", "_example": "other docs"}});
        let changes = compare(&desired, &live, &|_| false);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/data/max-scale");
        assert_eq!(changes[0].before, None);
    }

    #[test]
    fn lists_and_multi_documents_load() {
        let mut manifests = Manifests::default();
        manifests
            .add_yaml(
                "x.yaml",
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: ns}\n---\napiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: s, namespace: ns}\n---\n",
            )
            .unwrap();
        assert_eq!(Baseline::from_manifests(&manifests).len(), 2);
        let error = Manifests::default()
            .add_yaml("bad.yaml", "kind: Service\n")
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "bad.yaml document 1 (line 1): not a Kubernetes object: missing apiVersion, metadata.name (needs apiVersion, kind and metadata.name)"
        );
    }
}
