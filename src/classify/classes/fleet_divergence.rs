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
//! annotations), appears or is deleted, and for every compared object when a member is seen
//! for the first time (it holds none of them yet, so each is pending until its events arrive:
//! a new member that sends its objects within grace never fires). Status churn of a compared
//! object, and every event of an object no group compares, costs a few comparisons.

use super::*;
use crate::classify::fleet::{self, FleetGroup, FleetObject};

/// The class id.
pub const ID: &str = "fleet_divergence";

/// The class.
pub(crate) struct FleetDivergence;

impl DriftClass for FleetDivergence {
    fn id(&self) -> &'static str {
        ID
    }

    fn names(&self) -> ClassNames {
        ClassNames {
            en: "Fleet divergence",
            zh: "集群间配置不一致",
        }
    }

    fn defaults(&self) -> ClassDefaults {
        // Severity and grace are each group's own (`fleet.groups[].severity`, `.grace`).
        ClassDefaults {
            enabled: true,
            severity: Severity::Warning,
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
        // The cluster's first object: it just became a member of its groups.
        let new_member = context.before.is_none()
            && !object.deleted
            && context.graph.count_in(&object.cluster) == 1;
        let mut verdicts = Vec::new();
        for group in groups {
            if new_member {
                if group.has_member(&object.cluster) {
                    for compared in compared_objects(context.graph, group) {
                        verdicts.push(assess_object(context, group, &compared));
                    }
                }
                continue;
            }
            if group.compares(
                &object.api_version,
                &object.kind,
                &object.namespace,
                &object.name,
            ) && group.has_member(&object.cluster)
            {
                verdicts.push(assess_object(context, group, &FleetObject::of(object)));
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
        if !object.deleted
            && group.compares(
                &object.api_version,
                &object.kind,
                &object.namespace,
                &object.name,
            )
            && group.has_member(&object.cluster)
        {
            let compared = FleetObject::of(object);
            seen.entry(compared.key()).or_insert(compared);
        }
    }
    seen.into_values().collect()
}

/// Each member with its copy's compared view (`None`: it holds no live copy).
pub(crate) fn member_views(
    graph: &Graph,
    rules: &Rules,
    group: &FleetGroup,
    object: &FleetObject,
) -> Vec<(String, Option<serde_json::Value>)> {
    let compared_key = |key: &str| rules.is_fleet_compared_key(key);
    members(graph, group)
        .into_iter()
        .map(|cluster| {
            let copy = graph.live_by_name(
                cluster,
                object.group(),
                &object.kind,
                &object.namespace,
                &object.name,
            );
            (
                cluster.to_string(),
                copy.map(|copy| fleet::comparable(copy, &compared_key)),
            )
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

/// The verdict about one compared object in one group, over every member's copy.
fn assess_object(context: &Context<'_>, group: &FleetGroup, object: &FleetObject) -> Assessment {
    let views = member_views(context.graph, context.rules, group, object);
    let divergences = fleet::compare(&views, &group.ignore_paths);
    let finding = if divergences.is_empty() {
        Finding::Clear("every member holds the same desired state".to_string())
    } else {
        Finding::Holds(Box::new(divergent(group, object, &views, &divergences)))
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
    views: &[(String, Option<serde_json::Value>)],
    divergences: &[fleet::Divergence],
) -> Evidence {
    let mut found = evidence(fleet::summary(object, &group.name, divergences));
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
            crate::model::FieldChange {
                path: divergence.path.clone(),
                before: majority,
                after: other,
            }
        })
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
    facts.insert("values".to_string(), fleet::values_fact(divergences));
    found
}
