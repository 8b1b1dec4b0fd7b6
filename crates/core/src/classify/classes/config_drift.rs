//! `config_drift`: a data change to a watched ConfigMap (default: `config-*` in `knative-serving`
//! and `knative-eventing`), per key added, removed or changed, made by a field manager not in
//! `trustedManagers` (or by an unknown writer: a hand edit of `config-autoscaler` must never go
//! unreported for lack of `managedFields`).
//!
//! Knative ignores the `_example` key (it documents the defaults); an edit that touches only
//! `_example` changes nothing in the cluster and is reported as such, at `info`. The drift holds
//! until the data is back to what it was before the edit, or a trusted manager (Argo CD, Flux,
//! the Knative operator) writes those keys again.

use super::manual_edit::{by_whom, track};
use super::*;
use crate::classify::evidence::hint::revert_patch;
use crate::classify::evidence::spec_diff;

/// The class.
pub(crate) struct ConfigDrift;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "config_drift",
    english: "Config drift",
    chinese: "配置漂移",
    severity: Severity::Warning,
};

impl DriftClass for ConfigDrift {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(0),
            grace_follows_default: false,
        }
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        if !object.is_kind("", "ConfigMap")
            || object.deleted
            || !context
                .rules
                .is_watched_config_map(&object.namespace, &object.name)
        {
            return Vec::new();
        }
        let Some(before) = context.before else {
            return Vec::new();
        };
        let changes: Vec<_> = spec_diff(before, object, context.rules)
            .into_iter()
            .filter(|change| change.path.starts_with("/data/"))
            .collect();
        if changes.is_empty() && context.open_drift(object, self.id()).is_none() {
            return Vec::new();
        }
        let tracked = track(context, self.id(), &changes, true);
        if tracked.changes.is_empty() {
            return vec![Assessment::clear(object, tracked.reason)];
        }
        let describe_key = |change: &drift_model::FieldChange| {
            let key = change
                .path
                .trim_start_matches("/data/")
                .replace("~1", "/")
                .replace("~0", "~");
            match (&change.before, &change.after) {
                (None, Some(value)) => format!("{key} added ({})", short(value)),
                (Some(_), None) => format!("{key} removed"),
                (Some(was), Some(now)) => {
                    format!("{key} changed ({} → {})", short(was), short(now))
                }
                (None, None) => key,
            }
        };
        let example_only = tracked
            .changes
            .iter()
            .all(|change| change.path == "/data/_example");
        let keys: Vec<String> = tracked.changes.iter().map(describe_key).collect();
        let mut found = evidence(if example_only {
            format!(
                "{} _example was edited {}: Knative ignores _example, so this changes nothing; copy a setting to the top level of data to change it",
                object.reference(),
                by_whom(&tracked.actor)
            )
        } else {
            format!(
                "{} data changed {}: {}",
                object.reference(),
                by_whom(&tracked.actor),
                keys.join("; ")
            )
        });
        if example_only {
            found.severity = Some(Severity::Info);
        }
        for change in &tracked.changes {
            found.facts.insert(
                format!("key/{}", change.path.trim_start_matches("/data/")),
                match (&change.before, &change.after) {
                    (None, _) => "added".to_string(),
                    (_, None) => "removed".to_string(),
                    _ => "changed".to_string(),
                },
            );
        }
        found.hint = revert_patch(
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.name,
            &tracked.changes,
        )
        .map(|command| format!("{command}  # restores the previous data"));
        found.changes = tracked.changes;
        found.actor = tracked.actor;
        vec![Assessment::holds(object, found)]
    }
}

fn short(value: &serde_json::Value) -> String {
    let text = value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string());
    if text.chars().count() > 40 {
        format!("{}…", text.chars().take(40).collect::<String>())
    } else {
        text
    }
}
