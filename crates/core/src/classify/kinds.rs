//! What the classes know about Knative's kinds beyond their shape: which component reconciles
//! each, what breaks when one is not ready, which not-ready states are Knative working as
//! designed, and where a failing condition leads (the condition chain).
//!
//! Every Knative resource follows the same duck type (`status.observedGeneration`,
//! `status.conditions` with a `Ready` or `Succeeded` happy condition), so the condition classes
//! work on any kind of a `*.knative.dev` group; this table only adds the words and exceptions
//! the duck type cannot carry. A kind missing here still gets the generic treatment.

use serde_json::Value;

use super::graph::Graph;
use super::state::{Condition, ObjectState};
use drift_model::Severity;

/// Knative Serving's public group.
pub const SERVING: &str = "serving.knative.dev";
/// Knative's networking internals (KIngress, Certificate, ServerlessService).
pub(crate) const NETWORKING_INTERNAL: &str = "networking.internal.knative.dev";
/// Knative's autoscaling internals (PodAutoscaler, Metric).
pub(crate) const AUTOSCALING_INTERNAL: &str = "autoscaling.internal.knative.dev";
/// The Knative Operator's group.
pub(crate) const OPERATOR: &str = "operator.knative.dev";
/// Eventing's core group (Broker, Trigger, EventType).
pub(crate) const EVENTING: &str = "eventing.knative.dev";
/// Eventing's sources.
pub(crate) const SOURCES: &str = "sources.knative.dev";

pub(crate) use crate::decode::object::is_knative_group;

/// True for a kind on Eventing's delivery path: when one of these is not ready, events are
/// being lost (or piling up in retries), so its findings are critical.
pub(crate) fn on_event_path(group: &str, kind: &str) -> bool {
    match group {
        EVENTING => matches!(kind, "Broker" | "Trigger"),
        "messaging.knative.dev" => true,
        "flows.knative.dev" => true,
        SOURCES | "sinks.knative.dev" => true,
        // Extensions: KafkaSource (sources.knative.dev), KafkaChannel
        // (messaging.knative.dev), RabbitmqBroker-backed objects (eventing.knative.dev).
        other => other.ends_with(".eventing.knative.dev"),
    }
}

/// True for an object Knative makes for another one (a Route's KIngress and Certificate, a
/// Revision's PodAutoscaler and ServerlessService, a Trigger's Subscription, a Broker's trigger
/// Channel, a Service's Route and Configuration) whose failure shows on its owner's conditions
/// (a Service copies its Route's and Configuration's `Ready` into `RoutesReady` and
/// `ConfigurationsReady`, reason and message included).
pub(crate) fn is_plumbing(object: &ObjectState) -> bool {
    let group = object.group();
    let internal = group == NETWORKING_INTERNAL || group == AUTOSCALING_INTERNAL;
    if group == SERVING && matches!(object.kind.as_str(), "Route" | "Configuration") {
        return object.controller_owner().is_some_and(|owner| {
            owner.kind == "Service"
                && crate::decode::object::api_group(&owner.api_version) == SERVING
        });
    }
    // A Trigger's Subscription, a Broker's or Sequence's Channel, a ContainerSource's
    // SinkBinding.
    let plumbing = matches!(
        (group, object.kind.as_str()),
        ("messaging.knative.dev", "Subscription") | (SOURCES, "SinkBinding")
    ) || (is_knative_group(group) && object.kind.ends_with("Channel"));
    (internal || plumbing)
        && object.controller_owner().is_some_and(|owner| {
            is_knative_group(crate::decode::object::api_group(&owner.api_version))
        })
}

/// The tracked owner that reports `object`'s failure, if one does: `object` is plumbing (see
/// [`is_plumbing`]) and its controller owner is tracked and not ready itself. The owner's finding
/// then carries `object` in its condition chain, so one failure is one alert. An owner that still
/// says it is ready does not hide its child's failure.
pub(crate) fn reporting_owner<'a>(
    graph: &'a Graph,
    object: &ObjectState,
) -> Option<&'a ObjectState> {
    if !is_plumbing(object) {
        return None;
    }
    let owner = object.controller_owner()?;
    let owner = graph.by_uid(&object.cluster, &owner.uid)?;
    if owner.is_going_away() {
        return None;
    }
    // Owner references that lead back to the object (made by hand, or forged) would hide every
    // object of the cycle behind another.
    let mut above = owner;
    for _ in 0..MAX_CHAIN {
        let Some(next) = above
            .controller_owner()
            .and_then(|reference| graph.by_uid(&object.cluster, &reference.uid))
        else {
            break;
        };
        if next.uid == object.uid {
            return None;
        }
        above = next;
    }
    let conditions = owner.conditions();
    let happy = happy_condition(&conditions).filter(|happy| happy.status != "True")?;
    // An owner not ready for a reason that is no failure (a PodAutoscaler at zero) reports
    // nothing, so it cannot report its plumbing either.
    if benign_not_ready(owner, culprit(&conditions, happy)).is_some() {
        return None;
    }
    Some(owner)
}

/// Who reconciles a kind, with the command that shows its log: named in `generation_lag`.
pub(crate) fn controller_of(group: &str, kind: &str) -> &'static str {
    match group {
        SERVING if kind == "DomainMapping" => {
            "the Knative Serving controller (kubectl -n knative-serving logs deploy/controller)"
        }
        SERVING => {
            "the Knative Serving controller (kubectl -n knative-serving logs deploy/controller)"
        }
        AUTOSCALING_INTERNAL => {
            "the Knative autoscaler (kubectl -n knative-serving logs deploy/autoscaler)"
        }
        NETWORKING_INTERNAL if kind == "ServerlessService" => {
            "the Knative Serving controller (kubectl -n knative-serving logs deploy/controller)"
        }
        NETWORKING_INTERNAL if kind == "Certificate" => {
            "the certificate controller (kubectl -n knative-serving logs deploy/net-certmanager-controller)"
        }
        NETWORKING_INTERNAL => {
            "the networking layer's controller (kubectl -n knative-serving logs deploy/net-kourier-controller, or net-istio-controller)"
        }
        OPERATOR => {
            "the Knative Operator (kubectl -n knative-operator logs deploy/knative-operator)"
        }
        SOURCES if kind == "PingSource" => {
            "the Eventing controller (kubectl -n knative-eventing logs deploy/eventing-controller; the pings come from deploy/pingsource-mt-adapter)"
        }
        "apps" | "" => "kube-controller-manager",
        group if is_knative_group(group) && on_event_path(group, kind) => {
            "the Eventing controller (kubectl -n knative-eventing logs deploy/eventing-controller)"
        }
        _ => "its controller",
    }
}

/// The condition whose status is the object's overall health: `Ready` for living resources,
/// `Succeeded` for batch-like ones.
pub(crate) fn happy_condition(conditions: &[Condition]) -> Option<&Condition> {
    conditions
        .iter()
        .find(|condition| condition.condition_type == "Ready")
        .or_else(|| {
            conditions
                .iter()
                .find(|condition| condition.condition_type == "Succeeded")
        })
}

/// The condition that explains a not-ready object: among the other conditions of error
/// severity that are not `True`, the one whose reason the happy condition carries (Knative's
/// happy condition copies the failing dependent's reason), else the first with a reason, else
/// the first; the happy condition itself when none fails. Conditions of severity
/// `Info`/`Warning` never make an object not ready, so they are never blamed.
pub(crate) fn culprit<'a>(conditions: &'a [Condition], happy: &'a Condition) -> &'a Condition {
    let failing: Vec<&Condition> = conditions
        .iter()
        .filter(|condition| {
            condition.condition_type != happy.condition_type
                && condition.status != "True"
                && condition.severity.is_empty()
        })
        .collect();
    failing
        .iter()
        .find(|condition| !happy.reason.is_empty() && condition.reason == happy.reason)
        .or_else(|| {
            failing
                .iter()
                .find(|condition| !condition.reason.is_empty())
        })
        .or_else(|| failing.first())
        .copied()
        .unwrap_or(happy)
}

/// Why a not-ready object is Knative working as designed, if it is.
pub(crate) fn benign_not_ready(object: &ObjectState, culprit: &Condition) -> Option<&'static str> {
    match (object.group(), object.kind.as_str()) {
        // A PodAutoscaler's Ready follows its Active condition alone (podCondSet in
        // knative/serving pa_lifecycle.go): a Revision scaled to zero has Active=False NoTraffic.
        (AUTOSCALING_INTERNAL, "PodAutoscaler")
            if culprit.condition_type == "Active"
                && culprit.status == "False"
                && culprit.reason == "NoTraffic" =>
        {
            Some("scaled to zero (Active=False NoTraffic)")
        }
        // In Proxy mode the activator takes the traffic and the Revision's own endpoints may be
        // empty: a ServerlessService of a Revision at zero waits with NoHealthyBackends.
        (NETWORKING_INTERNAL, "ServerlessService")
            if culprit.condition_type == "EndpointsPopulated"
                && culprit.reason == "NoHealthyBackends"
                && object
                    .spec
                    .pointer("/mode")
                    .as_ref()
                    .and_then(Value::as_str)
                    == Some("Proxy") =>
        {
            Some("scaled to zero behind the activator (Proxy mode)")
        }
        _ => None,
    }
}

/// The default severity of a not-ready finding on this kind, when it is not the class's own.
pub(crate) fn not_ready_severity(group: &str, kind: &str) -> Option<Severity> {
    if on_event_path(group, kind) {
        // Events are being dropped or dead-lettered.
        return Some(Severity::Critical);
    }
    match (group, kind) {
        // A registry entry and an image cache: nothing stops working.
        (EVENTING, "EventType") | ("caching.internal.knative.dev", _) => Some(Severity::Info),
        _ => None,
    }
}

/// One link of a condition chain: an object and the condition that explains it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct ChainLink {
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The failing condition's type.
    pub condition: String,
    /// Its status.
    pub status: String,
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
}

/// How many links a chain may have (Service → Route → KIngress → Certificate is four).
pub(crate) const MAX_CHAIN: usize = 5;

/// The chain of failing conditions below `object`: the object itself, then the related object
/// its failing condition points at, and so on (Service → Route → KIngress → Certificate;
/// Trigger → Broker → its Channel; Revision → PodAutoscaler). Related objects are children
/// (owner references) whose happy condition is not `True`, and for a Trigger its Broker.
pub(crate) fn condition_chain<'a>(graph: &'a Graph, object: &'a ObjectState) -> Vec<ChainLink> {
    links_with_mesh(graph, chain_objects(graph, object))
}

/// The links of a chain, each KIngress followed by the VirtualServices net-istio made for it
/// with the split each really sends (a link without a condition): where a Route says 90/10 and
/// the mesh says otherwise, the chain shows both. Nothing is added where the mesh is not watched.
pub(crate) fn links_with_mesh(
    graph: &Graph,
    linked: Vec<(&ObjectState, ChainLink)>,
) -> Vec<ChainLink> {
    let mut links = Vec::with_capacity(linked.len());
    for (object, link) in linked {
        let ingress = object.is_kind(NETWORKING_INTERNAL, "Ingress");
        links.push(link);
        if !ingress {
            continue;
        }
        for child in graph.children(&object.key()) {
            if child.deleted || !child.is_kind(super::mesh::ISTIO_NETWORKING, "VirtualService") {
                continue;
            }
            links.push(ChainLink {
                kind: child.kind.clone(),
                namespace: child.namespace.clone(),
                name: child.name.clone(),
                condition: String::new(),
                status: String::new(),
                reason: String::new(),
                message: super::mesh::served_split(&child.spec.value()),
            });
        }
    }
    links
}

/// [`condition_chain`] with each link's object.
pub(crate) fn chain_objects<'a>(
    graph: &'a Graph,
    object: &'a ObjectState,
) -> Vec<(&'a ObjectState, ChainLink)> {
    let mut chain: Vec<(&'a ObjectState, ChainLink)> = Vec::new();
    let mut current = Some(object);
    while let Some(subject) = current.take() {
        let conditions = subject.conditions();
        let Some(happy) = happy_condition(&conditions) else {
            break;
        };
        if happy.status == "True" && !chain.is_empty() {
            break;
        }
        let blamed = culprit(&conditions, happy);
        chain.push((
            subject,
            ChainLink {
                kind: subject.kind.clone(),
                namespace: subject.namespace.clone(),
                name: subject.name.clone(),
                condition: blamed.condition_type.clone(),
                status: blamed.status.clone(),
                reason: blamed.reason.clone(),
                message: blamed.message.clone(),
            },
        ));
        if chain.len() >= MAX_CHAIN {
            break;
        }
        current = next_in_chain(graph, subject, blamed);
        if let Some(next) = current {
            if chain.iter().any(|(seen, _)| seen.uid == next.uid) {
                break;
            }
        }
    }
    chain
}

fn next_in_chain<'a>(
    graph: &'a Graph,
    subject: &ObjectState,
    blamed: &Condition,
) -> Option<&'a ObjectState> {
    if subject.is_kind(EVENTING, "Trigger") && blamed.condition_type == "BrokerReady" {
        let broker = subject.spec.pointer("/broker")?;
        return graph.by_name(
            &subject.cluster,
            EVENTING,
            "Broker",
            &subject.namespace,
            broker.as_str()?,
        );
    }
    if subject.is_kind(SERVING, "Service") && blamed.condition_type == "ConfigurationsReady" {
        return graph.by_name(
            &subject.cluster,
            SERVING,
            "Configuration",
            &subject.namespace,
            &subject.name,
        );
    }
    if subject.is_kind(SERVING, "Configuration") {
        let status = subject.status.value();
        let latest = status.get("latestCreatedRevisionName")?.as_str()?;
        return graph.by_name(
            &subject.cluster,
            SERVING,
            "Revision",
            &subject.namespace,
            latest,
        );
    }
    graph
        .children(&subject.key())
        .into_iter()
        .filter(|child| !child.is_going_away() && is_knative_group(child.group()))
        .find(|child| {
            let conditions = child.conditions();
            happy_condition(&conditions).is_some_and(|happy| happy.status != "True")
        })
}

/// A chain as the JSON text kept in `evidence.facts["conditionChain"]` (the API returns it and
/// the dashboard's drift page renders it), or `None` when it says nothing beyond the object
/// itself.
pub(crate) fn chain_fact(chain: &[ChainLink]) -> Option<String> {
    if chain.len() < 2 {
        return None;
    }
    serde_json::to_string(chain).ok()
}

/// The chain as one line for messages: `Route default/x IngressReady=False → Ingress ...`.
pub(crate) fn chain_text(chain: &[ChainLink]) -> String {
    chain
        .iter()
        .filter(|link| !link.condition.is_empty())
        .map(|link| format!("{} {}={}", link.kind, link.condition, link.status))
        .collect::<Vec<_>>()
        .join(" → ")
}
