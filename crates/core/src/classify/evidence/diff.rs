//! Field diffs between two observed versions of an object, as JSON pointers with before/after.
//!
//! Noise never reaches a diff: `resourceVersion`, `managedFields`, `generation` and condition
//! timestamps are not in the compact state at all, and configured ignore paths are dropped here.
//! Diffs are bounded to at most [`MAX_CHANGES`] entries. Values are kept whole, because they are
//! compared later (has an edit been reverted?) and written into remediation patches; renderers
//! cut long values for display with `drift_model::diff::bounded`, so one huge edit cannot
//! produce a huge alert.

use serde_json::Value;

use crate::classify::state::ObjectState;
use crate::classify::Rules;
use drift_model::pointer::push_pointer;
use drift_model::{FieldChange, MAX_CHANGES};

pub use drift_model::diff::bounded;

/// Diffs two JSON values under `base`, appending to `out`.
pub fn diff_values(
    base: &str,
    before: Option<&Value>,
    after: Option<&Value>,
    out: &mut Vec<FieldChange>,
) {
    match (before, after) {
        // Equal subtrees (most of a spec, on most events) are compared, not walked: no pointer
        // strings are built for them.
        (Some(left), Some(right)) if left == right => {}
        (Some(Value::Object(left)), Some(Value::Object(right))) => {
            let mut keys: Vec<&String> = left.keys().chain(right.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                diff_values(&push_pointer(base, key), left.get(key), right.get(key), out);
            }
        }
        (Some(Value::Array(left)), Some(Value::Array(right))) => {
            for index in 0..left.len().max(right.len()) {
                diff_values(
                    &push_pointer(base, &index.to_string()),
                    left.get(index),
                    right.get(index),
                    out,
                );
            }
        }
        (left, right) if left == right => {}
        // `null` and absent mean the same thing for Kubernetes fields.
        (None, Some(Value::Null)) | (Some(Value::Null), None) => {}
        (left, right) => out.push(FieldChange {
            path: base.to_string(),
            before: left.cloned(),
            after: right.cloned(),
        }),
    }
}

/// The spec diff (and, for ConfigMaps and Secrets, the data diff) between two versions.
pub fn spec_diff(before: &ObjectState, after: &ObjectState, rules: &Rules) -> Vec<FieldChange> {
    spec_diff_parsed(before, after, None, rules)
}

/// [`spec_diff`] with the after spec already parsed (`after_spec` must be `after.spec`'s
/// value): a changed spec is then parsed once, not twice.
pub(crate) fn spec_diff_parsed(
    before: &ObjectState,
    after: &ObjectState,
    after_spec: Option<&Value>,
    rules: &Rules,
) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    // Most updates leave the spec as it was: equal serialized text, nothing to parse. Texts that
    // differ with equal values (another sender's key order) diff to nothing.
    if !before.spec.same_text(&after.spec) {
        let spec_before = before.spec.value();
        let parsed;
        let spec_after = match after_spec {
            Some(spec) => spec,
            None => {
                parsed = after.spec.value();
                &parsed
            }
        };
        diff_values(
            "/spec",
            non_null(&spec_before),
            non_null(spec_after),
            &mut changes,
        );
    }
    // Most updates of a ConfigMap repeat its values (the same shared values, or the same text):
    // nothing to build or walk.
    if before.data != after.data {
        let data_before = before.data.as_deref().map(|data| map_value(data));
        let data_after = after.data.as_deref().map(|data| map_value(data));
        diff_values(
            "/data",
            data_before.as_ref(),
            data_after.as_ref(),
            &mut changes,
        );
    }
    finish(changes, &after.kind, rules)
}

/// The label and annotation diff between two versions.
pub(crate) fn metadata_diff(
    before: &ObjectState,
    after: &ObjectState,
    rules: &Rules,
) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    diff_values(
        "/metadata/labels",
        Some(&pairs_value(&before.labels)),
        Some(&pairs_value(&after.labels)),
        &mut changes,
    );
    diff_values(
        "/metadata/annotations",
        Some(&pairs_value(&before.annotations)),
        Some(&pairs_value(&after.annotations)),
        &mut changes,
    );
    finish(changes, &after.kind, rules)
}

fn finish(mut changes: Vec<FieldChange>, kind: &str, rules: &Rules) -> Vec<FieldChange> {
    changes.retain(|change| !rules.is_ignored_path(kind, &change.path));
    changes.truncate(MAX_CHANGES);
    changes
}

fn non_null(value: &Value) -> Option<&Value> {
    if value.is_null() {
        None
    } else {
        Some(value)
    }
}

fn pairs_value(pairs: &drift_model::Pairs) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), Value::String(value.to_string())))
            .collect(),
    )
}

fn map_value(map: &std::collections::BTreeMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(key, value)| (key.clone(), Value::String(value.clone())))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::pointer::pointer_segments;
    use serde_json::json;

    #[test]
    fn diffs_nested_objects_and_lists() {
        let mut out = Vec::new();
        diff_values(
            "/spec",
            Some(&json!({"traffic": [{"percent": 100, "revisionName": "a"}], "x": 1})),
            Some(
                &json!({"traffic": [{"percent": 50, "revisionName": "a"}, {"percent": 50, "revisionName": "b"}], "x": 1}),
            ),
            &mut out,
        );
        let paths: Vec<&str> = out.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["/spec/traffic/0/percent", "/spec/traffic/1"]);
        assert_eq!(out[0].before, Some(json!(100)));
        assert_eq!(out[0].after, Some(json!(50)));
    }

    #[test]
    fn escapes_pointer_segments() {
        assert_eq!(
            push_pointer("/metadata/annotations", "serving.knative.dev/creator"),
            "/metadata/annotations/serving.knative.dev~1creator"
        );
        assert_eq!(pointer_segments("/a~1b/c~0d"), ["a/b", "c~d"]);
    }

    #[test]
    fn long_values_are_cut() {
        let value = bounded(&json!("x".repeat(1000)));
        assert!(value.as_str().unwrap().len() < 400);
    }
}
