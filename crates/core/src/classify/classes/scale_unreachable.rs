//! `scale_unreachable`: a Knative PodAutoscaler wants more replicas than it has
//! (`status.desiredScale > status.actualScale`) past grace. The autoscaler decided the Revision
//! needs them and they do not come: a quota, a node pool at its limit, an image that no longer
//! pulls, a crashing container. With no replica at all the requests wait in the activator and
//! time out, so that case is critical. The evidence names the Revision and the autoscaler's own
//! failing condition. Scaling up takes a moment on every load change (the grace absorbs it);
//! scaling down and scale to zero (`desiredScale` 0) are never reported. The Revision's
//! `replica_drift` leaves a shortfall its tracked PodAutoscaler reports to this class.

use serde_json::Value;

use super::*;
use crate::classify::evidence::hint::{namespace_flag, shell_quote};
use crate::classify::kinds::{self, AUTOSCALING_INTERNAL};

/// The class.
pub(crate) struct ScaleUnreachable;

/// `(desired, actual)` when a PodAutoscaler has fewer replicas than it wants.
pub(crate) fn short_of(autoscaler: &ObjectState) -> Option<(i64, i64)> {
    if !autoscaler.is_kind(AUTOSCALING_INTERNAL, "PodAutoscaler") {
        return None;
    }
    // Two numbers of the status, read alone, not the whole status parsed for them.
    let number = |key: &str| {
        autoscaler
            .status_field(key)
            .as_ref()
            .and_then(Value::as_i64)
    };
    let (desired, actual) = (number("desiredScale")?, number("actualScale")?);
    (desired >= 1 && actual < desired).then_some((desired, actual))
}

/// The PodAutoscaler Knative made for a Revision (same name, same namespace).
pub(crate) fn autoscaler_of<'a>(
    graph: &'a Graph,
    revision: &ObjectState,
) -> Option<&'a ObjectState> {
    graph.live_by_name(
        &revision.cluster,
        AUTOSCALING_INTERNAL,
        "PodAutoscaler",
        &revision.namespace,
        &revision.name,
    )
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "scale_unreachable",
    english: "Scale not reached",
    chinese: "无法扩容到期望副本数",
    severity: Severity::Warning,
};

impl DriftClass for ScaleUnreachable {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(300),
            grace_follows_default: true,
        }
    }

    fn reassessable(&self) -> bool {
        // Read off the current status alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let autoscaler = context.after;
        if !autoscaler.is_kind(AUTOSCALING_INTERNAL, "PodAutoscaler") || autoscaler.is_going_away()
        {
            return Vec::new();
        }
        let Some((desired, actual)) = short_of(autoscaler) else {
            return vec![Assessment::clear(autoscaler, "scale reached")];
        };
        let revision = autoscaler
            .controller_owner()
            .filter(|owner| owner.kind == "Revision")
            .map(|owner| owner.name.clone())
            .or_else(|| {
                autoscaler
                    .label("serving.knative.dev/revision")
                    .map(str::to_string)
            })
            .unwrap_or_else(|| autoscaler.name.clone());
        let mut summary = format!(
            "{} wants {desired} replicas of Revision {}/{revision} but has {actual}",
            autoscaler.reference(),
            autoscaler.namespace
        );
        let conditions = autoscaler.conditions();
        let mut found = evidence(String::new());
        if let Some(failing) = conditions
            .iter()
            .find(|condition| condition.status != "True" && condition.severity.is_empty())
        {
            summary.push_str(&format!(": {}", failing.describe()));
            found
                .facts
                .insert("condition".into(), failing.condition_type.clone());
            found.facts.insert("reason".into(), failing.reason.clone());
        }
        if actual == 0 {
            summary.push_str("; no replica serves: requests wait in the activator");
            found.severity = Some(Severity::Critical);
        }
        found.summary = summary;
        found
            .facts
            .insert("desiredScale".into(), desired.to_string());
        found.facts.insert("actualScale".into(), actual.to_string());
        found.facts.insert("revision".into(), revision.clone());
        let chain = kinds::condition_chain(context.graph, autoscaler);
        if let Some(chain) = kinds::chain_fact(&chain) {
            found
                .facts
                .insert(drift_model::CONDITION_CHAIN_FACT.into(), chain);
        }
        found.hint = Some(format!(
            "kubectl{ns} describe deployment {}; kubectl{ns} get pods -l serving.knative.dev/revision={}  # look for FailedCreate, quota, scheduling or image pull events",
            shell_quote(&format!("{revision}-deployment")),
            shell_quote(&revision),
            ns = namespace_flag(&autoscaler.namespace),
        ));
        vec![Assessment::holds(autoscaler, found)]
    }
}
