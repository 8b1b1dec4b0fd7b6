//! `manual_edit`: a change to an object's spec, labels or annotations (or a ConfigMap's or
//! Secret's data), on any watched kind, whose changed
//! fields are owned, per `metadata.managedFields`, by a field manager not in `trustedManagers`:
//! `kubectl-edit`, `kubectl-patch`, `kn`, ... are people. More severe on a Knative-managed child
//! (a Deployment, a Route or Configuration under a Service, ...), whose edits the controller
//! fights.
//!
//! The drift holds while edited fields keep a value a person set: it resolves when every edited
//! field is back to its value before the edit (the controller or someone reverted it) or when a
//! trusted manager writes it again (Argo CD or Flux re-applied, adopting or undoing it). Objects
//! without `managedFields` cannot be attributed and are never reported (no guessing). Watched
//! ConfigMaps are `config_drift`'s.
//!
//! Istio's objects count only when Knative made them (net-istio's VirtualServices and
//! DestinationRules, owned by a KIngress or a ServerlessService), with net-istio's `controller`
//! as the expected manager; a team's own Istio objects are left to a baseline.
//!
//! Labels and annotations: keys that tools and controllers stamp on every write
//! (`rules.metadataKeys.bookkeeping`: `last-applied-configuration`, Knative's
//! `creator`/`lastModifier`/`routes`, Argo CD and Flux tracking, ...) are never edits. A hand edit
//! of a key that changes behaviour (`rules.metadataKeys.behavioural`:
//! `networking.knative.dev/visibility`, `autoscaling.knative.dev/*`, ...) has the class's
//! severity, at least `warning`; an edit of any other label or annotation alone is `info`.

use serde_json::Value;

use super::*;
use crate::classify::evidence::hint::revert_patch;
use drift_model::{Actor, FieldChange};

/// The class.
pub(crate) struct ManualEdit;

/// Outcome of tracking edits on one object.
pub(super) struct Tracked {
    /// Edited fields still holding a person's value (with the value before the edit).
    pub changes: Vec<FieldChange>,
    /// Who made the newest of those edits.
    pub actor: Option<Actor>,
    /// Why tracking ended, when `changes` is empty.
    pub reason: String,
}

/// The current value at a diff path (`/spec/...` or `/data/<key>`); `spec` is the object's spec,
/// read by the caller once for all paths.
pub(super) fn current_value(
    object: &ObjectState,
    spec: &SpecValues<'_>,
    path: &str,
) -> Option<Value> {
    if let Some(rest) = path.strip_prefix("/spec") {
        return spec.at(rest).filter(|value| !value.is_null());
    }
    if let Some((map, key)) = metadata_key(path) {
        let map = if map == "labels" {
            &object.labels
        } else {
            &object.annotations
        };
        return map.get(&key).map(|value| Value::String(value.to_string()));
    }
    if let Some(key) = path.strip_prefix("/data/") {
        let key = key.replace("~1", "/").replace("~0", "~");
        return object
            .data
            .as_ref()?
            .get(&key)
            .map(|value| Value::String(value.clone()));
    }
    None
}

/// The map (`labels` or `annotations`) and the key a `/metadata/...` diff path names.
pub(super) fn metadata_key(path: &str) -> Option<(&'static str, String)> {
    let unescape = |key: &str| key.replace("~1", "/").replace("~0", "~");
    if let Some(key) = path.strip_prefix("/metadata/labels/") {
        return Some(("labels", unescape(key)));
    }
    path.strip_prefix("/metadata/annotations/")
        .map(|key| ("annotations", unescape(key)))
}

/// Folds this event's changes into the edits an open drift already tracks.
pub(super) fn track(
    context: &Context<'_>,
    class: &str,
    changes: &[FieldChange],
    unknown_is_untrusted: bool,
) -> Tracked {
    let subject = context.after;
    let open = context.open_drift(subject, class);
    let mut tracked: Vec<FieldChange> = open
        .map(|drift| drift.evidence.changes.clone())
        .unwrap_or_default();
    let mut actor = open.and_then(|drift| drift.evidence.actor.clone());
    let mut reason = String::from("edits reverted");
    for change in changes {
        let who = context.attribute(&change.path);
        let trusted = match &who {
            Some(actor) => actor.trusted,
            None => !unknown_is_untrusted,
        };
        if let Some(position) = tracked
            .iter()
            .position(|existing| existing.path == change.path)
        {
            if trusted {
                tracked.remove(position);
                if let Some(who) = &who {
                    reason = format!("field written again by trusted manager {}", who.manager);
                }
            } else {
                tracked[position].after = change.after.clone();
                actor = who.or(actor);
            }
        } else if !trusted {
            tracked.push(change.clone());
            actor = who.or(actor);
        }
    }
    if !tracked.is_empty() {
        let spec = context.after_spec_values();
        tracked.retain(|change| current_value(subject, &spec, &change.path) != change.before);
    }
    tracked.truncate(drift_model::MAX_CHANGES);
    Tracked {
        changes: tracked,
        actor,
        reason,
    }
}

/// The sentence naming who edited.
pub(super) fn by_whom(actor: &Option<Actor>) -> String {
    match actor {
        Some(actor) => {
            let mut text = format!("by {} ({})", actor.manager, actor.operation);
            if let Some(user) = &actor.user {
                text.push_str(&format!(", user {user}"));
            }
            if let Some(time) = &actor.time {
                text.push_str(&format!(" at {time}"));
            }
            text
        }
        None => "by an unknown writer".to_string(),
    }
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "manual_edit",
    english: "Manual edit",
    chinese: "人工修改",
    severity: Severity::Warning,
};

impl DriftClass for ManualEdit {
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
        let Some(before) = context.before else {
            return Vec::new();
        };
        if object.deleted || context.object.managed_fields.is_empty() {
            return Vec::new();
        }
        // Istio's objects are Knative's business only when Knative made them (net-istio's
        // VirtualServices under a KIngress, its DestinationRules under a ServerlessService);
        // a team's own are theirs (a baseline covers them, `mesh_security_drift` their mTLS).
        if crate::classify::mesh::is_istio(object) && !is_knative_child(object) {
            return Vec::new();
        }
        // Namespaces are watched for their sidecar injection labels (`mesh_security_drift`);
        // people label them by design and no controller fights it.
        if object.is_kind("", "Namespace") {
            return Vec::new();
        }
        if object.is_kind("", "ConfigMap")
            && context
                .rules
                .is_watched_config_map(&object.namespace, &object.name)
        {
            return Vec::new();
        }
        // Read only when the spec changed (a Pod's would otherwise be unpacked on every event).
        // Texts are compared, not values: texts that differ with equal values diff to nothing.
        let after_text = (!before.spec.same_text(&object.spec)).then(|| context.after_spec_text());
        let mut changes = crate::classify::evidence::diff::spec_diff_with(
            before,
            object,
            after_text.as_deref(),
            context.rules,
        );
        // Labels and annotations are intent too (`networking.knative.dev/visibility`,
        // `autoscaling.knative.dev/*`), except the keys tools and controllers stamp on every
        // write.
        if before.labels != object.labels || before.annotations != object.annotations {
            let mut metadata =
                crate::classify::evidence::diff::metadata_diff(before, object, context.rules);
            metadata.retain(|change| {
                metadata_key(&change.path)
                    .is_none_or(|(_, key)| !context.rules.is_bookkeeping_key(&key))
            });
            changes.extend(metadata);
            changes.truncate(drift_model::MAX_CHANGES);
        }
        if changes.is_empty() && context.open_drift(object, self.id()).is_none() {
            return Vec::new();
        }
        let tracked = track(context, self.id(), &changes, false);
        if tracked.changes.is_empty() {
            return vec![Assessment::clear(object, tracked.reason)];
        }
        let child = is_knative_child(object);
        let paths: Vec<&str> = tracked
            .changes
            .iter()
            .map(|change| change.path.as_str())
            .collect();
        let mut found = evidence(format!(
            "{} was edited {}{}: {}",
            object.reference(),
            by_whom(&tracked.actor),
            if child {
                "; it is managed by Knative, which will fight the edit"
            } else {
                ""
            },
            paths.join(", ")
        ));
        found.hint = if object.is_kind("", "Secret") {
            // Secret values are hashes here; a patch made of hashes would break the Secret.
            Some(
                "Restore the Secret from its source of truth (values are never shown here)"
                    .to_string(),
            )
        } else {
            revert_patch(
                &object.api_version,
                &object.kind,
                &object.namespace,
                &object.name,
                &tracked.changes,
            )
            .map(|command| {
                format!(
                    "{command}  # restores the previous values; or re-apply the manifest from Git"
                )
            })
        };
        // An edit of the spec, the data or a behavioural key is worth the class's severity
        // (at least a warning); an edit of other labels and annotations is `info`.
        let behavioural = tracked.changes.iter().any(|change| {
            metadata_key(&change.path).is_none_or(|(_, key)| context.rules.is_behavioural_key(&key))
        });
        found.changes = tracked.changes;
        found.actor = tracked.actor;
        if context.rules.own_pipeline().part_of(object).is_some() {
            // An edit of drift-sentinel's own event path may blind it: always critical.
            found.severity = Some(Severity::Critical);
        } else if !behavioural {
            found.severity = Some(Severity::Info);
        } else if child {
            found.severity = Some(Severity::Critical);
        } else if context.rules.class(self.id()).severity < Severity::Warning {
            found.severity = Some(Severity::Warning);
        }
        vec![Assessment::holds(object, found)]
    }
}
