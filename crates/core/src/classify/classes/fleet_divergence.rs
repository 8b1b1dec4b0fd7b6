//! `fleet_divergence`: the members of a fleet group (`fleet.groups`) do not hold the same
//! desired state for an object the group compares: a ConfigMap key, a spec field, a behavioural
//! label or annotation, the Knative release (`app.kubernetes.io/version`) differs, or the object
//! is missing from some members. The comparison is `classify::fleet`'s, shared with `compare`.
//!
//! The drift is about the group, not one cluster's copy: its cluster field is `fleet:<group>`,
//! its uid the object's fleet key (`Kind.group/namespace/name`), its rule the group's name, so a
//! group and object have one drift whichever member changed. The object's names are in the
//! evidence facts (`apiVersion`, `kind`, `namespace`, `name`), from which the engine fills the
//! drift's object fields. The members are the clusters the engine tracks objects for whose
//! name matches the group's globs: a cluster is a member from its first event on.
//!
//! It is assessed when a member's copy changes what is compared (spec, data, labels,
//! annotations), appears or is deleted. A member that never reported an object is unknown, not
//! missing (the engine hears of objects through their changes): an object is missing from a
//! member only when the member reported it deleted (it holds the tombstone), or when an open
//! drift already names the member missing (fact `missing`) and it has not reported the object
//! since, so that a real deletion keeps firing after the tombstone expires. Open drifts are
//! also judged again when members change without an event (a reload, tombstone expiry): see
//! `Engine::rejudge_fleet`. Status churn of a compared object, and every event of an object no
//! group compares, costs a few comparisons.

use super::*;
use crate::classify::fleet::{self, FleetGroup, FleetObject, Held};

/// The class id.
pub const ID: &str = "fleet_divergence";

/// The class.
pub(crate) struct FleetDivergence;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: ID,
    english: "Fleet divergence",
    chinese: "集群间配置不一致",
    severity: Severity::Warning,
};

impl DriftClass for FleetDivergence {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        // Severity and grace are each group's own (`fleet.groups[].severity`, `.grace`).
        ClassDefaults {
            enabled: true,
            grace: secs(300),
            grace_follows_default: false,
        }
    }

    fn reassessable(&self) -> bool {
        // The members' current copies are all it reads.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let groups = context.rules.fleet_groups();
        if groups.is_empty() {
            return Vec::new();
        }
        let object = context.after;
        // Status churn leaves everything compared as it was: nothing to say.
        if let Some(before) = context.before {
            if !object.deleted
                && before.spec == object.spec
                && before.data == object.data
                && before.labels == object.labels
                && before.annotations == object.annotations
            {
                return Vec::new();
            }
        }
        let mut verdicts = Vec::new();
        for group in groups {
            if group.selects(object) && group.has_member(&object.cluster) {
                verdicts.push(assess_object(
                    context.graph,
                    context.rules,
                    context.drifts,
                    group,
                    &FleetObject::of(object),
                ));
            }
        }
        verdicts
    }
}

/// The members of `group` among the clusters the graph tracks, sorted by name.
pub(crate) fn members<'a>(graph: &'a Graph, group: &FleetGroup) -> Vec<&'a str> {
    let mut members: Vec<&str> = graph
        .clusters()
        .filter(|cluster| group.has_member(cluster))
        .collect();
    members.sort_unstable();
    members
}

/// Every object `group` compares that a member holds (live), once each, sorted.
pub(crate) fn compared_objects(graph: &Graph, group: &FleetGroup) -> Vec<FleetObject> {
    let mut seen = std::collections::BTreeMap::new();
    for object in graph.iter() {
        if !object.deleted && group.selects(object) && group.has_member(&object.cluster) {
            let compared = FleetObject::of(object);
            seen.entry(compared.key()).or_insert(compared);
        }
    }
    seen.into_values().collect()
}

/// The members an open drift about `object` in `group` names missing (its `missing` fact, a
/// JSON list of cluster names).
fn named_missing(
    drifts: &HashMap<DriftSlot, Drift>,
    group: &FleetGroup,
    object: &FleetObject,
) -> Vec<String> {
    let subject = subject(group, object);
    let slot = DriftSlot {
        cluster: subject.cluster,
        uid: subject.uid,
        class: ID.to_string(),
        rule: Some(group.name.clone()),
    };
    drifts
        .get(&slot)
        .and_then(|drift| drift.evidence.facts.get("missing"))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Each member with what it holds of `object`: its copy's compared view, evidence that it
/// lacks the object (a tombstone, or an open drift naming it missing while it reported the
/// object no more since), or nothing known.
pub(crate) fn member_views(
    graph: &Graph,
    rules: &Rules,
    drifts: &HashMap<DriftSlot, Drift>,
    group: &FleetGroup,
    object: &FleetObject,
) -> Vec<(String, Held)> {
    let compared_key = |key: &str| rules.is_fleet_compared_key(key);
    let bookkeeping = |key: &str| rules.is_bookkeeping_key(key);
    let named = named_missing(drifts, group, object);
    members(graph, group)
        .into_iter()
        .map(|cluster| {
            let newest = graph.by_name(
                cluster,
                object.group(),
                &object.kind,
                &object.namespace,
                &object.name,
            );
            let held = match newest {
                // A copy Knative's runtime made is not what the group compares (see `selects`).
                Some(copy) if !copy.deleted && fleet::made_by_knative_runtime(copy) => {
                    Held::NotReported
                }
                Some(copy) if !copy.deleted => {
                    Held::Copy(fleet::comparable(copy, &compared_key, &bookkeeping))
                }
                Some(_) => Held::Missing,
                None if named.iter().any(|name| name == cluster) => Held::Missing,
                None => Held::NotReported,
            };
            (cluster.to_string(), held)
        })
        .collect()
}

/// The key of the drift about `object` in `group`.
pub(crate) fn subject(group: &FleetGroup, object: &FleetObject) -> ObjectKey {
    ObjectKey {
        cluster: FleetObject::drift_cluster(&group.name),
        uid: object.key(),
    }
}

/// The verdict about one compared object in one group, over every member's copy: what an
/// event of a member finds, and what `Engine::rejudge_fleet` finds for an open drift when the
/// members changed without one.
pub(crate) fn assess_object(
    graph: &Graph,
    rules: &Rules,
    drifts: &HashMap<DriftSlot, Drift>,
    group: &FleetGroup,
    object: &FleetObject,
) -> Assessment {
    let views = member_views(graph, rules, drifts, group, object);
    let evidenced = fleet::evidenced(&views);
    let divergences = fleet::compare(&evidenced, &group.ignore_paths);
    let finding = if !divergences.is_empty() {
        Finding::Holds(Box::new(divergent(group, object, &views, &divergences)))
    } else if evidenced.len() < 2 {
        Finding::Clear("fewer than two members report the object".to_string())
    } else if evidenced.iter().all(|(_, view)| view.is_none()) {
        Finding::Clear("no member holds the object".to_string())
    } else {
        Finding::Clear("every member holds the same desired state".to_string())
    };
    Assessment {
        subject: subject(group, object),
        rule: Some(group.name.clone()),
        finding,
    }
}

/// The evidence: which paths differ and which clusters hold which value, and how to align them.
fn divergent(
    group: &FleetGroup,
    object: &FleetObject,
    views: &[(String, Held)],
    divergences: &[fleet::Divergence],
) -> Evidence {
    let mut found = evidence(fleet::summary(
        object,
        &format!("fleet group {}", group.name),
        divergences,
    ));
    found.severity = Some(group.severity);
    found.hint = fleet::hint(object, divergences);
    // Each path as a change from the value most members hold to the first other value, so the
    // diff every renderer shows reads "from what most hold to what differs"; the facts have
    // every cluster's value.
    found.changes = divergences
        .iter()
        .map(|divergence| {
            let majority = divergence.majority().cloned();
            let other = divergence
                .values
                .iter()
                .map(|(_, value)| value)
                .find(|value| **value != majority)
                .cloned()
                .flatten();
            drift_model::FieldChange {
                path: divergence.path.clone(),
                before: majority,
                after: other,
            }
        })
        .collect();
    let missing: Vec<&str> = divergences
        .first()
        .filter(|first| first.path == fleet::WHOLE_OBJECT)
        .map(fleet::Divergence::missing)
        .unwrap_or_default();
    let not_reported: Vec<&str> = views
        .iter()
        .filter(|(_, held)| *held == Held::NotReported)
        .map(|(cluster, _)| cluster.as_str())
        .collect();
    let facts = &mut found.facts;
    facts.insert("group".to_string(), group.name.clone());
    facts.insert("apiVersion".to_string(), object.api_version.clone());
    facts.insert("kind".to_string(), object.kind.clone());
    facts.insert("namespace".to_string(), object.namespace.clone());
    facts.insert("name".to_string(), object.name.clone());
    facts.insert(
        "members".to_string(),
        views
            .iter()
            .map(|(cluster, _)| cluster.as_str())
            .collect::<Vec<_>>()
            .join(","),
    );
    // Read back by `member_views`: a member named here stays missing after its tombstone
    // expires, until it reports the object again.
    if !missing.is_empty() {
        facts.insert(
            "missing".to_string(),
            serde_json::to_string(&missing).unwrap_or_default(),
        );
    }
    if !not_reported.is_empty() {
        facts.insert("notReported".to_string(), not_reported.join(","));
    }
    facts.insert("values".to_string(), fleet::values_fact(divergences));
    found
}
