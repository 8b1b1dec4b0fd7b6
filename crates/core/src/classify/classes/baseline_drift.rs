//! `baseline_drift`: with desired manifests configured (`rules.baselineDir`, as kept in Git), the
//! live object differs from its manifest after normalization: the fields the manifest sets, the
//! fields it leaves to Knative against Knative's defaults (from the cluster's tracked
//! `config-defaults`, `config-features` and `config-br-defaults`, else built-in), behavioural
//! labels and annotations, ConfigMap data key by key, minus configured ignore paths. The same
//! comparison as `check`'s: [`crate::classify::baseline::compare`].

use serde_json::{json, Value};

use super::*;
use crate::classify::baseline::{compare, KnativeDefaults, Normalization};
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
        live["data"] = json!(**data);
    }
    live
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "baseline_drift",
    english: "Baseline drift",
    chinese: "偏离基线",
    severity: Severity::Warning,
};

impl DriftClass for BaselineDrift {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(300),
            grace_follows_default: true,
        }
    }

    fn reassessable(&self) -> bool {
        // The condition is read off the current state alone.
        true
    }

    fn rejudged_both_ways(&self) -> bool {
        // The comparison reads the kept spec, labels, annotations and data, the rules'
        // manifests and normalization, and the cluster's tracked defaults ConfigMaps: a
        // re-judge after a reload knows all of it, so a manifest fixed in Git resolves its
        // drift then. Only the actor is not found again; `assess` carries it over.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let baseline = context.rules.baseline();
        if baseline.is_empty() || object.is_going_away() {
            return Vec::new();
        }
        // An event that left everything the comparison reads as it was (status churn, most of
        // a busy cluster's events) cannot change the verdict, open or not: the manifests and
        // Knative's defaults judge every object again themselves, both ways, when they change
        // (`Engine::set_rules` and `reassess`, `reevaluate_baseline`; `rejudged_both_ways`
        // below). An open drift keeps the evidence of the event that last changed it. Asked
        // first: it costs less than finding the object's manifest (a key of four strings).
        if let Some(before) = context.before {
            if before.spec.same_text(&object.spec)
                && before.labels == object.labels
                && before.annotations == object.annotations
                && before.data == object.data
                && before.is_going_away() == object.is_going_away()
            {
                return Vec::new();
            }
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
        // Knative's defaults as this cluster has them: its ConfigMaps are tracked like any
        // watched object.
        let defaults = KnativeDefaults::from_config_maps(|namespace, name| {
            context
                .graph
                .live_by_name(&object.cluster, "", "ConfigMap", namespace, name)
                .map(|config_map| {
                    config_map
                        .data
                        .as_deref()
                        .map_or(&crate::classify::defaults::NO_DATA, |data| data.map())
                })
        });
        let comparison = compare(
            desired,
            &live_json(object),
            &Normalization {
                defaults: &defaults,
                behavioural: &|key| rules.is_behavioural_key(key),
                ignored: &|path| rules.is_ignored_path(&object.kind, path),
            },
        );
        let changes = comparison.changes.clone();
        if changes.is_empty() {
            return vec![Assessment::clear(object, "matches the baseline manifest")];
        }
        let paths: Vec<&str> = changes.iter().map(|change| change.path.as_str()).collect();
        let mut summary = format!(
            "{} differs from its baseline manifest at {}",
            object.reference(),
            paths.join(", ")
        );
        for change in &changes {
            if let Some(note) = comparison.note(&change.path) {
                summary.push_str(&format!(
                    "; {} is left out of the manifest ({note})",
                    change.path
                ));
            }
        }
        let mut found = evidence(summary);
        if let Some(actor) = changes
            .iter()
            .find_map(|change| context.attribute(&change.path))
        {
            found.actor = Some(actor);
        }
        // A re-judge without an event (a reload, a restart, a defaults ConfigMap changed) sees
        // the kept object, whose `managedFields` have no field sets: who made the change is
        // not found again, so the open drift keeps the actor its event gave it (as
        // `invariant`'s drifts do).
        if context.before.is_none() && found.actor.is_none() {
            if let Some(open) = context.open_drift(object, INFO.id) {
                found.actor = open.evidence.actor.clone();
            }
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
            .map(|command| {
                format!(
                    "{command}  # {}",
                    comparison.reapply_advice(&changes, "re-apply the manifest from Git")
                )
            })
        };
        found.changes = changes;
        vec![Assessment::holds(object, found)]
    }
}
