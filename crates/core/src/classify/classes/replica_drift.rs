//! `replica_drift`: a Revision's `status.actualReplicas` differs from `status.desiredReplicas`, or
//! is below its `autoscaling.knative.dev/min-scale` (or the deprecated `minScale`), past grace.
//! Scaling moves replicas for a moment on every load change; the grace absorbs that. Scale to
//! zero (both 0) is normal. `min-scale` only binds Revisions that receive traffic, so Revisions in
//! `routingState: reserve` are not held to it.

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};

/// The class.
pub(crate) struct ReplicaDrift;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "replica_drift",
    english: "Replica drift",
    chinese: "副本数偏差",
    severity: Severity::Warning,
};

impl DriftClass for ReplicaDrift {
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

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let revision = context.after;
        if !revision.is_kind(SERVING, "Revision") || revision.is_going_away() {
            return Vec::new();
        }
        // Two numbers of the status, read alone (a Revision's status churns on most events;
        // parsing all of it for them was most of this class's cost).
        let number = |key: &str| {
            revision
                .status_field(key)
                .as_ref()
                .and_then(serde_json::Value::as_i64)
        };
        let (Some(actual), Some(desired)) = (number("actualReplicas"), number("desiredReplicas"))
        else {
            return Vec::new();
        };
        let min_scale = [
            "autoscaling.knative.dev/min-scale",
            "autoscaling.knative.dev/minScale",
        ]
        .iter()
        .find_map(|key| revision.annotation(key))
        .and_then(|value| value.trim().parse::<i64>().ok())
        .filter(|_| revision.label("serving.knative.dev/routingState") != Some("reserve"));
        let mut problems = Vec::new();
        // A shortfall its tracked PodAutoscaler reports is `scale_unreachable`'s, which can say
        // why (one failure, one alert).
        let reported_on_autoscaler = actual < desired
            && context.rules.class("scale_unreachable").enabled
            && super::scale_unreachable::autoscaler_of(context.graph, revision)
                .is_some_and(|autoscaler| super::scale_unreachable::short_of(autoscaler).is_some());
        if actual != desired && !reported_on_autoscaler {
            problems.push(format!(
                "{actual} of {desired} desired replicas are running"
            ));
        }
        if let Some(min_scale) = min_scale {
            if actual < min_scale {
                problems.push(format!(
                    "{actual} replicas running, below min-scale {min_scale}"
                ));
            }
        }
        if problems.is_empty() {
            return vec![Assessment::clear(revision, "replicas as desired")];
        }
        let mut found = evidence(format!("{}: {}", revision.reference(), problems.join("; ")));
        found
            .facts
            .insert("actualReplicas".into(), actual.to_string());
        found
            .facts
            .insert("desiredReplicas".into(), desired.to_string());
        if let Some(min_scale) = min_scale {
            found.facts.insert("minScale".into(), min_scale.to_string());
        }
        found.hint = Some(format!(
            "kubectl{} describe deployment {}  # look for FailedCreate, quota or scheduling events",
            namespace_flag(&revision.namespace),
            shell_quote(&format!("{}-deployment", revision.name))
        ));
        vec![Assessment::holds(revision, found)]
    }
}
