//! `not_ready`: the `Ready` condition of a Knative Service, Configuration, Route or Revision is
//! `False` or `Unknown` past grace. The evidence names the first failing condition with its reason
//! and message (e.g. `ContainerHealthy=False ContainerMissing`), because `Ready` alone only says
//! "something below failed". Conditions of severity `Info`/`Warning` (such as a scaled-to-zero
//! Revision's `Active=False NoTraffic`) do not affect readiness and are never blamed.

use super::*;
use crate::classify::evidence::hint::describe;

/// The class.
pub(crate) struct NotReady;

impl DriftClass for NotReady {
    fn id(&self) -> &'static str {
        "not_ready"
    }

    fn names(&self) -> ClassNames {
        ClassNames {
            en: "Not ready",
            zh: "未就绪",
        }
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            severity: Severity::Critical,
            grace: secs(180),
            grace_follows_default: true,
        }
    }

    fn reassessable(&self) -> bool {
        // The condition is read off the current state alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let watched = object.is_knative_serving()
            && matches!(
                object.kind.as_str(),
                "Service" | "Configuration" | "Route" | "Revision"
            );
        if !watched || object.is_going_away() {
            return Vec::new();
        }
        // A Revision no Route sends traffic to (routingState reserve) waits for garbage
        // collection; its old failure is history, not an outage.
        if object.kind == "Revision"
            && object.label("serving.knative.dev/routingState") == Some("reserve")
        {
            return vec![Assessment::clear(object, "Revision no longer routed")];
        }
        let Some(ready) = object.condition("Ready") else {
            // No status yet: the controller has not looked at it. generation_lag covers that.
            return Vec::new();
        };
        if ready.status == "True" {
            return vec![Assessment::clear(object, "Ready=True")];
        }
        let conditions = object.conditions();
        // During a gradual rollout Knative holds IngressReady (and so Ready) at Unknown with
        // reason RolloutInProgress for the whole rollout duration: that is the rollout working.
        if ready.status == "Unknown"
            && conditions.iter().any(|condition| {
                condition.status == "Unknown" && condition.reason == "RolloutInProgress"
            })
        {
            return vec![Assessment::clear(object, "gradual rollout in progress")];
        }
        let culprit = conditions
            .iter()
            .find(|condition| {
                condition.condition_type != "Ready"
                    && condition.status != "True"
                    && condition.severity.is_empty()
            })
            .unwrap_or(&ready);
        let mut summary = format!(
            "{} is not ready: {}={}",
            object.reference(),
            culprit.condition_type,
            culprit.status
        );
        if !culprit.reason.is_empty() {
            summary.push_str(&format!(" ({})", culprit.reason));
        }
        if !culprit.message.is_empty() {
            summary.push_str(&format!(": {}", culprit.message));
        }
        let mut found = evidence(summary);
        found
            .facts
            .insert("readyStatus".into(), ready.status.clone());
        found
            .facts
            .insert("condition".into(), culprit.condition_type.clone());
        found.facts.insert("reason".into(), culprit.reason.clone());
        found
            .facts
            .insert("message".into(), culprit.message.clone());
        found.hint = Some(describe(
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.name,
        ));
        vec![Assessment::holds(object, found)]
    }
}
