//! `generation_lag`: `metadata.generation > status.observedGeneration` past grace, for every
//! Knative kind (the duck type all of them share) and Deployments. A lag is normal for a moment after every spec change (the
//! controller has not reconciled yet); it is drift only when it lasts.

use super::*;
use crate::classify::evidence::hint::describe;
use crate::classify::kinds;

/// The class.
pub(crate) struct GenerationLag;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "generation_lag",
    english: "Generation lag",
    chinese: "版本未同步",
    severity: Severity::Warning,
};

impl DriftClass for GenerationLag {
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
        // The condition is read off the current state alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let watched = object.is_knative() || object.is_kind("apps", "Deployment");
        if !watched || object.is_going_away() {
            return Vec::new();
        }
        let Some(generation) = object.generation else {
            return Vec::new();
        };
        let observed = match object.observed_generation() {
            Some(observed) => observed,
            // A status with conditions but no observedGeneration comes from a controller that
            // does not report it (the v1alpha1 operator did not): nothing to compare.
            None if !object.is_knative_serving() && !object.conditions().is_empty() => {
                return Vec::new();
            }
            // No status at all: the controller has not looked at the object yet.
            None => 0,
        };
        if generation <= observed {
            return vec![Assessment::clear(object, "observedGeneration caught up")];
        }
        let controller = kinds::controller_of(object.group(), &object.kind);
        let mut found = evidence(format!(
            "{} has generation {generation} but status.observedGeneration is {observed}: {controller} has not reconciled the latest spec",
            object.reference()
        ));
        found
            .facts
            .insert("generation".into(), generation.to_string());
        found
            .facts
            .insert("observedGeneration".into(), observed.to_string());
        found.hint = Some(describe(
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.name,
        ));
        vec![Assessment::holds(object, found)]
    }
}
