//! `baseline_drift`: with desired manifests configured (`rules.baselineDir`, as kept in Git), the
//! live object differs from its manifest after normalization: only fields the manifest sets are
//! compared (server-set metadata, status and Knative's defaults are not), ConfigMap data key by
//! key, minus configured ignore paths. See [`crate::baseline`].

use serde_json::{json, Value};

use super::*;
use crate::classify::baseline::compare;
use crate::classify::evidence::hint::revert_patch;
use crate::manifest::ManifestKey;

/// The class.
pub(crate) struct BaselineDrift;

/// The live object in manifest shape, for comparison.
pub(crate) fn live_json(object: &ObjectState) -> Value {
    let mut live = json!({
        "apiVersion": object.api_version,
        "kind": object.kind,
        "metadata": {"name": object.name, "namespace": object.namespace,
                     "labels": object.labels, "annotations": object.annotations},
        "spec": object.spec.value(),
    });
    if let Some(data) = &object.data {
        live["data"] = json!(data);
    }
    live
}

impl DriftClass for BaselineDrift {
    fn id(&self) -> &'static str {
        "baseline_drift"
    }

    fn names(&self) -> ClassNames {
        ClassNames {
            en: "Baseline drift",
            zh: "偏离基线",
        }
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            severity: Severity::Warning,
            grace: secs(300),
            grace_follows_default: true,
        }
    }

    fn reassessable(&self) -> bool {
        // The condition is read off the current state alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let baseline = context.rules.baseline();
        if baseline.is_empty() || object.is_going_away() {
            return Vec::new();
        }
        let key = ManifestKey {
            group: object.group().to_string(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        };
        let Some(desired) = baseline.get(&key) else {
            return Vec::new();
        };
        let rules = context.rules;
        let changes = compare(desired, &live_json(object), &|path| {
            rules.is_ignored_path(&object.kind, path)
        });
        if changes.is_empty() {
            return vec![Assessment::clear(object, "matches the baseline manifest")];
        }
        let paths: Vec<&str> = changes.iter().map(|change| change.path.as_str()).collect();
        let mut found = evidence(format!(
            "{} differs from its baseline manifest at {}",
            object.reference(),
            paths.join(", ")
        ));
        if let Some(actor) = changes.iter().find_map(|change| {
            crate::classify::evidence::attribute(
                &change.path,
                context.object,
                context.before,
                rules,
            )
        }) {
            found.actor = Some(actor);
        }
        found.hint = if object.is_kind("", "Secret") {
            Some("Re-apply the Secret from its source of truth".to_string())
        } else {
            revert_patch(
                &object.api_version,
                &object.kind,
                &object.namespace,
                &object.name,
                &changes,
            )
            .map(|command| format!("{command}  # or re-apply the manifest from Git"))
        };
        found.changes = changes;
        vec![Assessment::holds(object, found)]
    }
}
