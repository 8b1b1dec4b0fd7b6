//! What the cluster's controllers do after a write, each reaction a write of its own (with its
//! own event), until nothing is left to do:
//!
//! * Eventing's MT broker reconcilers (`knative/eventing` `pkg/reconciler/broker/broker.go`
//!   and `broker/trigger/trigger.go`), as `mtchannel-broker`: a Broker's
//!   `DeadLetterSinkResolved`; a Trigger's `BrokerReady` (its Broker's `Ready`), then
//!   `SubscriberResolved`, then `DeadLetterSinkResolved` (its own sink, else the Broker's),
//!   stopping at the first failure as the reconciler returns; reasons and messages as Knative
//!   writes them, `Ready` summarising the condition set, `subscriberUri`/`deadLetterSinkUri`,
//!   `observedGeneration`. A destination resolves when the object its `ref` names exists (a
//!   core `v1` Service always does, as Knative special-cases it) and has `status.address.url`.
//! * Serving's controller gives a Service created again (a create drops `status`) the status
//!   of a ready first Revision, with its addresses, so what names it resolves again.
//! * Every other object whose status has `observedGeneration` gets it caught up after a spec
//!   change (Knative's `controller`, `kube-controller-manager` for built-in kinds).
//! * When on ([`super::FakeCluster::repair_deployments`]), Serving's reconciler: a Deployment
//!   controlled by a Revision whose first container's image another manager changed gets its
//!   previous image back after the delay, written by `controller`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::store::{group, now, path_of, plural, Part, State};

/// The condition sets `Ready` summarises, in Knative's order.
const BROKER_CONDITIONS: &[&str] = &[
    "IngressReady",
    "TriggerChannelReady",
    "FilterReady",
    "Addressable",
    "DeadLetterSinkResolved",
    "EventPoliciesReady",
];
const TRIGGER_CONDITIONS: &[&str] = &[
    "BrokerReady",
    "SubscriptionReady",
    "DependencyReady",
    "SubscriberResolved",
    "DeadLetterSinkResolved",
    "OIDCIdentityCreated",
];
const EVENTING: &str = "eventing.knative.dev";

/// The manager a controller writes `object`'s status as.
pub(crate) fn status_manager(object: &Value) -> &'static str {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    match (group(api_version), object["kind"].as_str()) {
        (EVENTING, Some("Broker" | "Trigger")) => "mtchannel-broker",
        (group, _) if !group.contains('.') => "kube-controller-manager",
        _ => "controller",
    }
}

/// Runs the reactions to a write of `path` (from `before` to `after`, by `manager`).
pub(crate) fn react(
    shared: &Arc<Mutex<State>>,
    state: &mut State,
    path: &str,
    before: Option<&Value>,
    after: Option<&Value>,
    manager: &str,
) {
    schedule_repair(shared, state, path, before, after, manager);
    let mut written = vec![path.to_string()];
    for _round in 0..32 {
        let mut next: Vec<String> = written
            .iter()
            .filter_map(|path| {
                reconcile_service(state, path).or_else(|| observe_generation(state, path))
            })
            .collect();
        next.extend(reconcile_eventing(state));
        if next.is_empty() {
            return;
        }
        written = next;
    }
    panic!("the fake cluster's controllers do not settle");
}

/// Reconciles every Broker, then every Trigger: the paths written.
pub(crate) fn reconcile_eventing(state: &mut State) -> Vec<String> {
    let of_kind = |state: &State, kind: &str| -> Vec<String> {
        let prefix = format!("/apis/{EVENTING}/");
        let suffix = format!("/{}/", plural(kind));
        state
            .objects
            .keys()
            .filter(|path| path.starts_with(&prefix) && path.contains(&suffix))
            .cloned()
            .collect()
    };
    let mut written = Vec::new();
    for path in of_kind(state, "Broker") {
        written.extend(reconcile_broker(state, &path));
    }
    for path in of_kind(state, "Trigger") {
        written.extend(reconcile_trigger(state, &path));
    }
    written
}

fn reconcile_broker(state: &mut State, path: &str) -> Option<String> {
    let broker = state.objects.get(path)?.clone();
    let namespace = broker["metadata"]["namespace"].as_str().unwrap_or_default();
    let mut status = broker.get("status").cloned().unwrap_or(json!({}));
    match broker["spec"]["delivery"]
        .get("deadLetterSink")
        .filter(|sink| !sink.is_null())
    {
        Some(sink) => match resolve(state, sink, namespace) {
            Ok(url) => {
                status["deadLetterSinkUri"] = json!(url);
                set_condition(&mut status, "DeadLetterSinkResolved", "True", "", "");
            }
            Err(error) => {
                remove(&mut status, "deadLetterSinkUri");
                let reason = "Unable to get the dead letter sink's URI";
                set_condition(
                    &mut status,
                    "DeadLetterSinkResolved",
                    "False",
                    reason,
                    &error,
                );
            }
        },
        None => not_configured(&mut status),
    }
    finish(state, path, broker, status, BROKER_CONDITIONS)
}

fn reconcile_trigger(state: &mut State, path: &str) -> Option<String> {
    let trigger = state.objects.get(path)?.clone();
    let namespace = trigger["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let spec = &trigger["spec"];
    let mut status = trigger.get("status").cloned().unwrap_or(json!({}));
    let broker_name = spec["broker"].as_str().unwrap_or_default();
    let broker_path = path_of(&format!("{EVENTING}/v1"), "Broker", namespace, broker_name);
    'reconcile: {
        let Some(broker) = state.objects.get(&broker_path) else {
            let message = format!("Broker {broker_name:?} does not exist");
            set_condition(
                &mut status,
                "BrokerReady",
                "False",
                "BrokerDoesNotExist",
                &message,
            );
            break 'reconcile;
        };
        let ready = condition(broker, "Ready");
        let text = |key: &str| ready[key].as_str().unwrap_or_default().to_string();
        match text("status").as_str() {
            "True" => set_condition(&mut status, "BrokerReady", "True", "", ""),
            other => {
                let other = if other == "False" { "False" } else { "Unknown" };
                set_condition(
                    &mut status,
                    "BrokerReady",
                    other,
                    &text("reason"),
                    &text("message"),
                );
                break 'reconcile;
            }
        }
        match resolve(state, &spec["subscriber"], namespace) {
            Ok(url) => {
                status["subscriberUri"] = json!(url);
                set_condition(&mut status, "SubscriberResolved", "True", "", "");
            }
            Err(error) => {
                remove(&mut status, "subscriberUri");
                let reason = "Unable to get the Subscriber's URI";
                set_condition(&mut status, "SubscriberResolved", "False", reason, &error);
                break 'reconcile;
            }
        }
        let own_sink = spec["delivery"]
            .get("deadLetterSink")
            .filter(|sink| !sink.is_null());
        let broker_sink = broker["spec"]["delivery"]
            .get("deadLetterSink")
            .filter(|sink| !sink.is_null());
        let resolved = match (own_sink, broker_sink) {
            (Some(sink), _) => resolve(state, sink, namespace).map_err(|error| {
                (
                    "Unable to get the dead letter sink's URI".to_string(),
                    error,
                )
            }),
            (None, Some(_)) => broker["status"]["deadLetterSinkUri"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| {
                    let reason =
                        format!("Broker {broker_name} didn't set status.deadLetterSinkURI");
                    (reason, String::new())
                }),
            (None, None) => {
                not_configured(&mut status);
                break 'reconcile;
            }
        };
        match resolved {
            Ok(url) => {
                status["deadLetterSinkUri"] = json!(url);
                set_condition(&mut status, "DeadLetterSinkResolved", "True", "", "");
            }
            Err((reason, error)) => {
                remove(&mut status, "deadLetterSinkUri");
                set_condition(
                    &mut status,
                    "DeadLetterSinkResolved",
                    "False",
                    &reason,
                    &error,
                );
            }
        }
    }
    finish(state, path, trigger, status, TRIGGER_CONDITIONS)
}

/// `MarkDeadLetterSinkNotConfigured`.
fn not_configured(status: &mut Value) {
    remove(status, "deadLetterSinkUri");
    let (reason, message) = (
        "DeadLetterSinkNotConfigured",
        "No dead letter sink is configured.",
    );
    set_condition(status, "DeadLetterSinkResolved", "True", reason, message);
}

/// Summarises `Ready`, catches up `observedGeneration` and writes the status if it changed.
fn finish(
    state: &mut State,
    path: &str,
    mut object: Value,
    mut status: Value,
    dependents: &[&str],
) -> Option<String> {
    let present: Vec<Value> = dependents
        .iter()
        .map(|kind| condition_in(&status, kind))
        .filter(|condition| !condition.is_null())
        .collect();
    let failing = present
        .iter()
        .find(|condition| condition["status"] == "False")
        .or_else(|| {
            present
                .iter()
                .find(|condition| condition["status"] != "True")
        })
        .cloned();
    let text =
        |condition: &Value, key: &str| condition[key].as_str().unwrap_or_default().to_string();
    match failing {
        Some(failing) => set_condition(
            &mut status,
            "Ready",
            &text(&failing, "status"),
            &text(&failing, "reason"),
            &text(&failing, "message"),
        ),
        None => set_condition(&mut status, "Ready", "True", "", ""),
    }
    status["observedGeneration"] = object["metadata"]["generation"].clone();
    if object.get("status") == Some(&status) {
        return None;
    }
    let manager = status_manager(&object);
    object["status"] = status;
    state.commit(path, Some(object), manager, Part::Status)?;
    Some(path.to_string())
}

/// Serving's reconcile of a Service created again (no status yet: a create drops it): its
/// first Revision ready and routed, and its addresses, as `controller` writes them; the
/// Broker and Trigger that name it as a destination resolve again.
fn reconcile_service(state: &mut State, path: &str) -> Option<String> {
    let object = state.objects.get(path)?;
    if group(object["apiVersion"].as_str().unwrap_or_default()) != "serving.knative.dev"
        || object["kind"] != "Service"
        || object.get("status").is_some_and(|status| !status.is_null())
    {
        return None;
    }
    let name = object["metadata"]["name"].as_str()?.to_string();
    let namespace = object["metadata"]["namespace"].as_str()?.to_string();
    let revision = format!("{name}-00001");
    let at = now();
    let mut reconciled = object.clone();
    reconciled["status"] = json!({
        "observedGeneration": object["metadata"]["generation"],
        "conditions": [
            {"type": "ConfigurationsReady", "status": "True", "lastTransitionTime": at},
            {"type": "Ready", "status": "True", "lastTransitionTime": at},
            {"type": "RoutesReady", "status": "True", "lastTransitionTime": at},
        ],
        "latestCreatedRevisionName": revision,
        "latestReadyRevisionName": revision,
        "traffic": [{"latestRevision": true, "percent": 100, "revisionName": revision}],
        "url": format!("http://{name}.{namespace}.example.com"),
        "address": {"url": format!("http://{name}.{namespace}.svc.cluster.local")},
    });
    state.commit(path, Some(reconciled), "controller", Part::Status)?;
    Some(path.to_string())
}

/// Catches up `status.observedGeneration` of the object at `path` (not a Broker or Trigger,
/// whose reconcilers do it).
fn observe_generation(state: &mut State, path: &str) -> Option<String> {
    let object = state.objects.get(path)?;
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    if group(api_version) == EVENTING
        && matches!(object["kind"].as_str(), Some("Broker" | "Trigger"))
    {
        return None;
    }
    let observed = object["status"].get("observedGeneration")?;
    let generation = &object["metadata"]["generation"];
    if generation.is_null() || observed == generation {
        return None;
    }
    let mut caught_up = object.clone();
    caught_up["status"]["observedGeneration"] = generation.clone();
    let manager = status_manager(object);
    state.commit(path, Some(caught_up), manager, Part::Status)?;
    Some(path.to_string())
}

/// The URL a Knative destination (`ref` and/or `uri`) resolves to, or the resolver's error.
fn resolve(state: &State, destination: &Value, namespace: &str) -> Result<String, String> {
    let Some(reference) = destination
        .get("ref")
        .filter(|reference| !reference.is_null())
    else {
        return destination["uri"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| "destination missing Ref and URI, expected at least one".to_string());
    };
    let text = |key: &str| reference[key].as_str().unwrap_or_default();
    let namespace = Some(text("namespace"))
        .filter(|ns| !ns.is_empty())
        .unwrap_or(namespace);
    let (api_version, kind, name) = (text("apiVersion"), text("kind"), text("name"));
    if api_version == "v1" && kind == "Service" {
        return Ok(format!("http://{name}.{namespace}.svc.cluster.local"));
    }
    let Some(object) = state
        .objects
        .get(&path_of(api_version, kind, namespace, name))
    else {
        let mut resource = plural(kind);
        if !group(api_version).is_empty() {
            resource = format!("{resource}.{}", group(api_version));
        }
        return Err(format!(
            "failed to get object {namespace}/{name}: {resource} {name:?} not found"
        ));
    };
    object["status"]["address"]["url"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "address not set for &ObjectReference{{Kind:{kind},Namespace:{namespace},Name:{name},\
                 UID:,APIVersion:{api_version},ResourceVersion:,FieldPath:,}}"
            )
        })
}

fn condition(object: &Value, kind: &str) -> Value {
    condition_in(&object["status"], kind)
}

fn condition_in(status: &Value, kind: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|condition| condition["type"] == kind)
        })
        .cloned()
        .unwrap_or(Value::Null)
}

fn remove(status: &mut Value, key: &str) {
    if let Some(members) = status.as_object_mut() {
        members.remove(key);
    }
}

/// Sets a condition as Knative's `SetCondition` does: unchanged when only the time would
/// change, else with a new `lastTransitionTime`, the list sorted by type.
fn set_condition(status: &mut Value, kind: &str, value: &str, reason: &str, message: &str) {
    let mut wanted = json!({"type": kind, "status": value});
    if !reason.is_empty() {
        wanted["reason"] = json!(reason);
    }
    if !message.is_empty() {
        wanted["message"] = json!(message);
    }
    let mut current = condition_in(status, kind);
    if let Some(members) = current.as_object_mut() {
        members.remove("lastTransitionTime");
    }
    if current == wanted {
        return;
    }
    wanted["lastTransitionTime"] = json!(now());
    let mut conditions: Vec<Value> = status["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|condition| condition["type"] != kind)
        .chain([wanted])
        .collect();
    conditions.sort_by(|left, right| {
        left["type"]
            .as_str()
            .unwrap_or_default()
            .cmp(right["type"].as_str().unwrap_or_default())
    });
    status["conditions"] = Value::Array(conditions);
}

/// Schedules Serving's repair of a Revision's Deployment whose first container's image
/// `manager` changed, when repairs are on.
fn schedule_repair(
    shared: &Arc<Mutex<State>>,
    state: &mut State,
    path: &str,
    before: Option<&Value>,
    after: Option<&Value>,
    manager: &str,
) {
    let (Some(delay), Some(before), Some(after)) = (state.repair, before, after) else {
        return;
    };
    let controlled_by_revision = after["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|owner| owner["controller"] == true && owner["kind"] == "Revision");
    let image =
        |object: &Value| object["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    let previous = image(before);
    if manager == "controller"
        || after["kind"] != "Deployment"
        || !controlled_by_revision
        || previous.is_null()
        || previous == image(after)
    {
        return;
    }
    let shared_state = Arc::clone(shared);
    let path = path.to_string();
    let task = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut state = shared_state.lock().unwrap();
        let Some(current) = state.objects.get(&path).cloned() else {
            return;
        };
        let mut repaired = current.clone();
        repaired["spec"]["template"]["spec"]["containers"][0]["image"] = previous;
        if let Some(stored) = state.commit(&path, Some(repaired), "controller", Part::Main) {
            react(
                &shared_state,
                &mut state,
                &path,
                Some(&current),
                Some(&stored),
                "controller",
            );
        }
    });
    state.repairs.push(task.abort_handle());
}
