//! `not_ready`: the happy condition (`Ready`, or `Succeeded`) of any Knative object is `False` or
//! `Unknown` past grace: Serving's Services, Configurations, Routes, Revisions and
//! DomainMappings, Eventing's Brokers, Triggers, Channels, Subscriptions, Sequences, Parallels and
//! Sources, the networking and autoscaling internals, the operator's CRs. The evidence names the
//! first failing condition with its reason and message (e.g. `ContainerHealthy=False
//! ContainerMissing`), because `Ready` alone only says "something below failed", and the chain
//! of failing conditions below it (Service → Route → KIngress → Certificate). Conditions of
//! severity `Info`/`Warning` (such as a scaled-to-zero Revision's `Active=False NoTraffic`) do
//! not affect readiness and are never blamed.
//!
//! Not reported here, so that one failure is one alert: Knative working as designed (a
//! PodAutoscaler or ServerlessService at zero), an internal object whose tracked owner reports
//! it (a Service's Route and Configuration count: the Service copies their `Ready`), a broken delivery path (`event_delivery_broken`), an operator upgrade in progress
//! (`operator_upgrade_stuck`). A not-ready object on Eventing's delivery path loses events and
//! is critical.

use super::*;
use crate::classify::evidence::hint::describe;
use crate::classify::kinds;

/// The class.
pub(crate) struct NotReady;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "not_ready",
    english: "Not ready",
    chinese: "未就绪",
    severity: Severity::Critical,
};

impl DriftClass for NotReady {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
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
        if !object.is_knative() || object.is_going_away() {
            return Vec::new();
        }
        // A Revision no Route sends traffic to (routingState reserve) waits for garbage
        // collection; its old failure is history, not an outage.
        if object.is_kind(SERVING, "Revision")
            && object.label("serving.knative.dev/routingState") == Some("reserve")
        {
            return vec![Assessment::clear(object, "Revision no longer routed")];
        }
        // drift-sentinel's own ApiServerSource, Broker and Trigger are `pipeline_broken`'s.
        if context.rules.class(super::pipeline_broken::ID).enabled
            && context.rules.own_pipeline().part_of(object).is_some()
        {
            return vec![Assessment::clear(object, "reported as pipeline_broken")];
        }
        let conditions = object.conditions();
        let Some(ready) = kinds::happy_condition(&conditions) else {
            // No status yet: the controller has not looked at it. generation_lag covers that.
            return Vec::new();
        };
        if ready.status == "True" {
            return vec![Assessment::clear(
                object,
                format!("{}=True", ready.condition_type),
            )];
        }
        // During a gradual rollout Knative holds IngressReady (and so Ready) at Unknown with
        // reason RolloutInProgress for the whole rollout duration: that is the rollout working.
        if ready.status == "Unknown"
            && conditions.iter().any(|condition| {
                condition.status == "Unknown" && condition.reason == "RolloutInProgress"
            })
        {
            return vec![Assessment::clear(object, "gradual rollout in progress")];
        }
        let culprit = kinds::culprit(&conditions, ready);
        if let Some(why) = kinds::benign_not_ready(object, culprit) {
            return vec![Assessment::clear(object, why)];
        }
        // An internal object whose owner is tracked shows up on the owner's conditions: the
        // owner's finding carries it in its condition chain, so it is not a second alert.
        if kinds::reporting_owner(context.graph, object).is_some() {
            return vec![Assessment::clear(object, "reported on its owner")];
        }
        // A broken delivery path (unresolvable subscriber, Broker, sink or dead-letter sink) is
        // `event_delivery_broken`'s, which says what cannot be reached.
        if context.rules.class("event_delivery_broken").enabled
            && super::event_delivery_broken::is_delivery_condition(object, culprit)
        {
            return vec![Assessment::clear(
                object,
                "reported as event_delivery_broken",
            )];
        }
        // An upgrade (or the first install) in progress is `operator_upgrade_stuck`'s, with a
        // grace long enough for one.
        if context.rules.class("operator_upgrade_stuck").enabled
            && object.group() == kinds::OPERATOR
            && matches!(object.kind.as_str(), "KnativeServing" | "KnativeEventing")
        {
            return vec![Assessment::clear(
                object,
                "reported as operator_upgrade_stuck",
            )];
        }
        // A PodAutoscaler short of replicas is `scale_unreachable`'s, which says by how many.
        if context.rules.class("scale_unreachable").enabled
            && super::scale_unreachable::short_of(object).is_some()
        {
            return vec![Assessment::clear(object, "reported as scale_unreachable")];
        }
        let linked = kinds::chain_objects(context.graph, object);
        // The plumbing below this object that it reports: its own not-ready episodes (opened
        // before this owner's status caught up) end here.
        let mut verdicts: Vec<Assessment> = linked
            .iter()
            .skip(1)
            .filter(|(child, _)| kinds::reporting_owner(context.graph, child).is_some())
            .filter(|(child, _)| context.open_drift(child, self.id()).is_some())
            .map(|(child, _)| {
                Assessment::clear(
                    child,
                    format!("reported on its owner {}", object.reference()),
                )
            })
            .collect();
        let chain = kinds::links_with_mesh(context.graph, linked);
        let mut summary = format!(
            "{} is not ready: {}",
            object.reference(),
            culprit.describe()
        );
        if chain.len() > 1 {
            summary.push_str(&format!("; chain: {}", kinds::chain_text(&chain)));
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
        if let Some(chain) = kinds::chain_fact(&chain) {
            found
                .facts
                .insert(drift_model::CONDITION_CHAIN_FACT.into(), chain);
        }
        found.severity = kinds::not_ready_severity(object.group(), &object.kind);
        found.hint = Some(describe(
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.name,
        ));
        verdicts.push(Assessment::holds(object, found));
        verdicts
    }
}
