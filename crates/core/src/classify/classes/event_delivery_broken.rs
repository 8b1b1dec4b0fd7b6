//! `event_delivery_broken`: an object on Eventing's delivery path cannot reach where its events
//! must go, past grace. Events are being dropped, retried into the dead-letter sink, or never
//! sent, so this is critical. What counts:
//!
//! * a Trigger whose Broker cannot be found or is not ready (`BrokerReady`), whose subscriber
//!   cannot be resolved (`SubscriberResolved`: a renamed or deleted Service), or whose
//!   dead-letter sink cannot be resolved (`DeadLetterSinkResolved`);
//! * a Broker or Channel whose configured dead-letter sink cannot be resolved;
//! * a Source (any kind of `sources.knative.dev`, and extensions' sources) or SinkBinding whose
//!   sink cannot be resolved (`SinkProvided`);
//! * a Subscription whose channel, subscriber, reply or dead-letter sink cannot be resolved
//!   (`ReferencesResolved`) or which is not added to its channel (`AddedToChannel`).
//!
//! The evidence names the condition, its reason and message in the kind's own words, and the
//! target the spec points at (`subscriber Service payments/orders-svc`), with a command to check
//! it. A Trigger whose tracked Broker is itself not ready is reported on the Broker (one failure,
//! one alert); a Subscription a tracked Trigger owns is reported on the Trigger.

use serde_json::Value;

use super::*;
use crate::classify::evidence::hint::{describe, namespace_flag, resource_name, shell_quote};
use crate::classify::kinds::{self, EVENTING};
use crate::classify::state::Condition;

/// The class.
pub(crate) struct EventDeliveryBroken;

/// The conditions of `object`'s kind that say whether its events can be delivered.
fn delivery_conditions(object: &ObjectState) -> &'static [&'static str] {
    let group = object.group();
    match (group, object.kind.as_str()) {
        (EVENTING, "Trigger") => &[
            "BrokerReady",
            "SubscriberResolved",
            "DeadLetterSinkResolved",
        ],
        (EVENTING, "Broker") => &["DeadLetterSinkResolved"],
        ("messaging.knative.dev", "Subscription") => &["ReferencesResolved", "AddedToChannel"],
        (_, kind) if kind.ends_with("Channel") && kinds::on_event_path(group, kind) => {
            &["DeadLetterSinkResolved"]
        }
        (_, "SinkBinding") => &["SinkProvided"],
        // A ContainerSource delivers through the SinkBinding it owns.
        (kinds::SOURCES, "ContainerSource") => &["SinkProvided", "SinkBindingReady"],
        (group, _) if group == kinds::SOURCES || group.ends_with(".sources.knative.dev") => {
            &["SinkProvided"]
        }
        // Extensions' sources live in their own groups but keep the `*Source` kind name.
        (group, kind) if kinds::is_knative_group(group) && kind.ends_with("Source") => {
            &["SinkProvided"]
        }
        _ => &[],
    }
}

/// True when `condition` is one of the delivery conditions of `object`'s kind (so `not_ready`
/// leaves the finding to this class).
pub(crate) fn is_delivery_condition(object: &ObjectState, condition: &Condition) -> bool {
    delivery_conditions(object).contains(&condition.condition_type.as_str())
}

/// A `ref` (or `uri`) destination as words: `Service payments/orders-svc`, or the URI.
fn destination_text(destination: &Value, default_namespace: &str) -> Option<String> {
    if let Some(reference) = destination.get("ref") {
        let kind = reference
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("object");
        let name = reference.get("name").and_then(Value::as_str)?;
        let namespace = reference
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|namespace| !namespace.is_empty())
            .unwrap_or(default_namespace);
        return Some(format!("{kind} {namespace}/{name}"));
    }
    destination
        .get("uri")
        .and_then(Value::as_str)
        .map(|uri| format!("URI {uri}"))
}

/// A command that shows the destination (`kubectl -n ns get services.serving.knative.dev x`).
fn destination_check(destination: &Value, default_namespace: &str) -> Option<String> {
    let reference = destination.get("ref")?;
    let kind = reference.get("kind").and_then(Value::as_str)?;
    let name = reference.get("name").and_then(Value::as_str)?;
    let api_version = reference
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let namespace = reference
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|namespace| !namespace.is_empty())
        .unwrap_or(default_namespace);
    Some(format!(
        "kubectl{} get {} {}",
        namespace_flag(namespace),
        resource_name(api_version, kind),
        shell_quote(name)
    ))
}

/// What the failing condition's target is, from the spec: (words, check command).
fn target(object: &ObjectState, condition: &str) -> (Option<String>, Option<String>) {
    let spec = object.spec.value();
    let (label, destination) = match condition {
        "SubscriberResolved" => ("subscriber", spec.get("subscriber")),
        "DeadLetterSinkResolved" => ("dead-letter sink", spec.pointer("/delivery/deadLetterSink")),
        "SinkProvided" | "SinkBindingReady" => ("sink", spec.get("sink")),
        "BrokerReady" => {
            let broker = spec.get("broker").and_then(Value::as_str);
            return (
                broker.map(|broker| format!("Broker {}/{broker}", object.namespace)),
                broker.map(|broker| {
                    format!(
                        "kubectl{} get brokers.eventing.knative.dev {}",
                        namespace_flag(&object.namespace),
                        shell_quote(broker)
                    )
                }),
            );
        }
        "ReferencesResolved" | "AddedToChannel" => ("channel", spec.get("channel")),
        _ => return (None, None),
    };
    let Some(destination) = destination else {
        return (None, None);
    };
    // A Subscription's channel is a bare reference, not a destination with `ref`.
    let wrapped;
    let destination = if destination.get("ref").is_none() && destination.get("name").is_some() {
        wrapped = serde_json::json!({ "ref": destination });
        &wrapped
    } else {
        destination
    };
    (
        destination_text(destination, &object.namespace).map(|text| format!("{label} {text}")),
        destination_check(destination, &object.namespace),
    )
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "event_delivery_broken",
    english: "Event delivery broken",
    chinese: "事件投递中断",
    severity: Severity::Critical,
};

impl DriftClass for EventDeliveryBroken {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            grace: secs(120),
            grace_follows_default: true,
        }
    }

    fn reassessable(&self) -> bool {
        // Read off the current conditions alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        let watched = delivery_conditions(object);
        if watched.is_empty() || object.is_going_away() {
            return Vec::new();
        }
        // drift-sentinel's own ApiServerSource, Broker and Trigger are `pipeline_broken`'s.
        if context.rules.class(super::pipeline_broken::ID).enabled
            && context.rules.own_pipeline().part_of(object).is_some()
        {
            return vec![Assessment::clear(object, "reported as pipeline_broken")];
        }
        let conditions = object.conditions();
        // In the order the kind's list gives (the Broker before the subscriber), not status order.
        let Some(failing) = watched.iter().find_map(|wanted| {
            conditions
                .iter()
                .find(|condition| condition.condition_type == *wanted && condition.status != "True")
        }) else {
            return vec![Assessment::clear(object, "delivery path resolved")];
        };
        // A Broker without a dead-letter sink reports the condition as not configured; only a
        // configured one can fail to resolve.
        if object.is_kind(EVENTING, "Broker")
            && object.spec.pointer("/delivery/deadLetterSink").is_none()
        {
            return vec![Assessment::clear(object, "no dead-letter sink configured")];
        }
        if kinds::reporting_owner(context.graph, object).is_some() {
            return vec![Assessment::clear(object, "reported on its owner")];
        }
        if object.is_kind(EVENTING, "Trigger") && failing.condition_type == "BrokerReady" {
            let broker = object
                .spec
                .pointer("/broker")
                .and_then(|broker| broker.as_str().map(str::to_string));
            let broker_not_ready = broker.as_deref().and_then(|broker| {
                context.graph.live_by_name(
                    &object.cluster,
                    EVENTING,
                    "Broker",
                    &object.namespace,
                    broker,
                )
            });
            if broker_not_ready.is_some_and(|broker| {
                let conditions = broker.conditions();
                kinds::happy_condition(&conditions).is_some_and(|ready| ready.status != "True")
            }) {
                return vec![Assessment::clear(object, "reported on its Broker")];
            }
        }
        let (what, check) = target(object, &failing.condition_type);
        let mut summary = format!(
            "{} cannot deliver events: {}",
            object.reference(),
            failing.describe()
        );
        if let Some(what) = &what {
            summary.push_str(&format!("; {what}"));
        }
        let mut found = evidence(summary);
        found
            .facts
            .insert("condition".into(), failing.condition_type.clone());
        found.facts.insert("status".into(), failing.status.clone());
        found.facts.insert("reason".into(), failing.reason.clone());
        found
            .facts
            .insert("message".into(), failing.message.clone());
        if let Some(what) = what {
            found.facts.insert("target".into(), what);
        }
        let chain = kinds::condition_chain(context.graph, object);
        if let Some(chain) = kinds::chain_fact(&chain) {
            found
                .facts
                .insert(drift_model::CONDITION_CHAIN_FACT.into(), chain);
        }
        found.hint = Some(match check {
            Some(command) => format!(
                "{command}  # it must exist and be addressable; or point {} at the right one",
                match failing.condition_type.as_str() {
                    "SubscriberResolved" => "spec.subscriber",
                    "DeadLetterSinkResolved" => "spec.delivery.deadLetterSink",
                    "SinkProvided" | "SinkBindingReady" => "spec.sink",
                    "BrokerReady" => "spec.broker",
                    _ => "the reference",
                }
            ),
            None => describe(
                &object.api_version,
                &object.kind,
                &object.namespace,
                &object.name,
            ),
        });
        vec![Assessment::holds(object, found)]
    }
}
