//! `pipeline_broken`: drift-sentinel's own delivery path (its ApiServerSource → Broker →
//! Trigger, `rules.ownPipeline`) is broken, so drift-sentinel is going blind. Holds when a part
//! is not ready, is being deleted or is gone, points somewhere else (the ApiServerSource's sink is
//! not the Broker, the Trigger's Broker or subscriber is not this sink), or when the source is
//! blind: a resync pass found changes the events never delivered while no event arrived since
//! the pass before (`Context::source_blind`). Always critical, and routed to every channel
//! whatever the routes say: the events that would report anything else have stopped first.
//! `drift_sentinel_pipeline_ready{part}` exports the same readiness per part.

use serde_json::Value;

use super::*;
use crate::classify::evidence::hint::describe;
use crate::classify::kinds;
use crate::classify::rules::{OwnPipeline, PipelinePart};

/// The class.
pub(crate) struct PipelineBroken;

/// The class id (the router sends it to every channel).
pub const ID: &str = "pipeline_broken";

/// Why a part of the own path is broken, if it is: read off its state alone.
pub(crate) fn part_problem(
    pipeline: &OwnPipeline,
    part: PipelinePart,
    object: &ObjectState,
) -> Option<String> {
    if object.is_going_away() {
        return Some(if object.deleted {
            "it was deleted".to_string()
        } else {
            "it is being deleted".to_string()
        });
    }
    let spec = object.spec.value();
    let text = |pointer: &str| {
        spec.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match part {
        PipelinePart::Source => {
            let kind = text("/sink/ref/kind");
            let name = text("/sink/ref/name");
            // An unset namespace means the source's own.
            let elsewhere = text("/sink/ref/namespace")
                .filter(|namespace| !namespace.is_empty())
                .is_some_and(|namespace| namespace != pipeline.namespace);
            if kind.as_deref() != Some("Broker")
                || name.as_deref() != Some(pipeline.broker.as_str())
                || elsewhere
            {
                return Some(format!(
                    "its sink is {} instead of Broker {}",
                    match (kind, name, text("/sink/uri")) {
                        (Some(kind), Some(name), _) => format!(
                            "{kind} {}/{name}",
                            text("/sink/ref/namespace")
                                .filter(|namespace| !namespace.is_empty())
                                .unwrap_or_else(|| object.namespace.clone())
                        ),
                        (_, _, Some(uri)) => format!("URI {uri}"),
                        _ => "unset".to_string(),
                    },
                    pipeline.broker
                ));
            }
            if text("/mode").as_deref() != Some("Resource") {
                return Some(
                    "its mode is not Resource (Reference-mode events carry no object to classify)"
                        .to_string(),
                );
            }
        }
        PipelinePart::Trigger => {
            if text("/broker").as_deref() != Some(pipeline.broker.as_str()) {
                return Some(format!(
                    "it subscribes to Broker {} instead of {}",
                    text("/broker").unwrap_or_default(),
                    pipeline.broker
                ));
            }
            let subscriber = text("/subscriber/ref/name");
            // A Kubernetes Service, or a Knative Service when the sink runs as one.
            let kind_ok = text("/subscriber/ref/kind").as_deref() == Some("Service");
            let namespace_ok = text("/subscriber/ref/namespace")
                .filter(|namespace| !namespace.is_empty())
                .is_none_or(|namespace| namespace == pipeline.namespace);
            if subscriber.as_deref() != Some(pipeline.service.as_str()) || !kind_ok || !namespace_ok
            {
                return Some(format!(
                    "its subscriber is {} instead of Service {}",
                    subscriber
                        .or_else(|| text("/subscriber/uri"))
                        .unwrap_or_else(|| "unset".to_string()),
                    pipeline.service
                ));
            }
        }
        PipelinePart::Broker => {}
    }
    let conditions = object.conditions();
    let ready = kinds::happy_condition(&conditions)?;
    if ready.status == "True" {
        return None;
    }
    let culprit = kinds::culprit(&conditions, ready);
    Some(format!("it is not ready: {}", culprit.describe()))
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: ID,
    english: "drift-sentinel's event path broken",
    chinese: "漂移监测事件链路中断",
    severity: Severity::Critical,
};

impl DriftClass for PipelineBroken {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn applies_to_snapshot(&self) -> bool {
        // Read off the objects' state; `check` reports a broken own path it finds in a dump.
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            // A Broker or Trigger is not ready for a few seconds after every reconcile.
            grace: secs(60),
            grace_follows_default: false,
        }
    }

    fn reassessable(&self) -> bool {
        // Read off the current state (and the engine's blindness record) alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let pipeline = context.rules.own_pipeline();
        let Some(part) = pipeline.part_of(object) else {
            return Vec::new();
        };
        let mut problem = part_problem(pipeline, part, object);
        if part == PipelinePart::Source && problem.is_none() {
            if let Some(blind) = context.source_blind {
                problem = Some(format!(
                    "no event has arrived since {} while resync found {} change(s) the events never delivered: the source is blind",
                    drift_model::time::format_time(blind.quiet_since),
                    blind.missed
                ));
            }
        }
        // The own Trigger not ready because the own Broker is not: the Broker carries it.
        if part == PipelinePart::Trigger && problem.is_some() {
            let conditions = object.conditions();
            let broker_only = kinds::happy_condition(&conditions).is_some_and(|ready| {
                kinds::culprit(&conditions, ready).condition_type == "BrokerReady"
            });
            let (group, kind) = PipelinePart::Broker.kind();
            let broker_broken = context
                .graph
                .live_by_name(
                    &object.cluster,
                    group,
                    kind,
                    &pipeline.namespace,
                    &pipeline.broker,
                )
                .is_some_and(|broker| {
                    part_problem(pipeline, PipelinePart::Broker, broker).is_some()
                });
            if broker_only && broker_broken {
                return vec![Assessment::clear(object, "reported on the Broker")];
            }
        }
        let Some(problem) = problem else {
            let mut verdicts = vec![Assessment::clear(object, "own event path healthy")];
            // A part deleted and created again is a new uid: the old one's drift resolves.
            for drift in context.drifts.values() {
                if drift.class == ID
                    && drift.cluster == object.cluster
                    && drift.uid != object.uid
                    && drift.kind == object.kind
                    && drift.namespace == object.namespace
                    && drift.name == object.name
                {
                    verdicts.push(Assessment {
                        subject: drift_model::ObjectKey {
                            cluster: drift.cluster.clone(),
                            uid: drift.uid.clone(),
                        },
                        rule: None,
                        finding: Finding::Clear("re-created".into()),
                        judge_again: JudgeAgain::Untimed,
                    });
                }
            }
            return verdicts;
        };
        let mut found = evidence(format!(
            "drift-sentinel's own event path is broken at {}: {problem}. Until it is repaired, drift-sentinel receives no events and reports nothing else",
            object.reference()
        ));
        found.facts.insert("part".into(), part.as_str().to_string());
        found.facts.insert("problem".into(), problem);
        let chain = kinds::condition_chain(context.graph, object);
        if let Some(chain) = kinds::chain_fact(&chain) {
            found
                .facts
                .insert(drift_model::CONDITION_CHAIN_FACT.into(), chain);
        }
        found.hint = Some(format!(
            "{}; kubectl apply -k k8s/  # restores the shipped ApiServerSource, Broker and Trigger",
            describe(
                &object.api_version,
                &object.kind,
                &object.namespace,
                &object.name
            )
        ));
        vec![Assessment::holds(object, found)]
    }
}
