//! The judging of fleet drifts, beside the engine: the verdicts a member's change brings (the
//! `fleet_divergence` class delegates here), open fleet drifts judged again when the members
//! change without an event (`Engine::rejudge_fleet` calls [`rejudge`]), and how a finding that
//! holds settles into the group's drift ([`settle`]). Functions of the graph, the rules and the
//! open drifts the engine passes in: this module imports neither the engine nor the classes,
//! which call into it.
//!
//! A member lacks an object only with evidence: it reported the object deleted (it holds the
//! tombstone), or an open drift already names it missing (fact `missing`) and it has not
//! reported the object since, so that a real deletion keeps firing after the tombstone expires.
//! A member that never reported the object is unknown, not missing.

use std::collections::{BTreeMap, HashMap};

use super::compare::{comparable, compare, evidenced, Divergence, Held};
use super::hint::{hint, summary, values_fact};
use super::{made_by_knative_runtime, FleetGroup, FleetObject, CLASS, WHOLE_OBJECT};
use crate::classify::graph::Graph;
use crate::classify::state::ObjectState;
use drift_model::{Drift, DriftSlot, DriftState, Evidence, FieldChange, Millis, ObjectKey};

/// What judging fleet drifts reads of the rules in force. The rules hold the groups
/// (`Rules::fleet_groups`), so they import this module; it reads them through this trait
/// (implemented for `Rules` beside the `fleet_divergence` class), never by importing them.
pub(crate) trait FleetRules {
    /// The fleet groups, in config order.
    fn groups(&self) -> &[FleetGroup];
    /// The fleet group with this name.
    fn group(&self, name: &str) -> Option<&FleetGroup>;
    /// True when a label or annotation key is compared across a fleet besides the version label
    /// (`Rules::is_fleet_compared_key`).
    fn is_compared_key(&self, key: &str) -> bool;
    /// True when a label or annotation key is bookkeeping (`Rules::is_bookkeeping_key`).
    fn is_bookkeeping_key(&self, key: &str) -> bool;
}

/// A group's verdict about one compared object: what the `fleet_divergence` class turns into
/// its assessment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    /// The drift's subject: (`fleet:<group>`, the object's fleet key).
    pub(crate) subject: ObjectKey,
    /// The group's name: the drift's rule.
    pub(crate) group: String,
    /// Whether the members diverge.
    pub(crate) finding: Finding,
}

/// Whether the members of a group diverge about one object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Finding {
    /// They do, with the evidence.
    Holds(Box<Evidence>),
    /// They do not, or cannot be compared: the reason an open drift resolves with.
    Clear(String),
}

/// The verdicts about a member's changed object (`object`, `before` it changed): one per group
/// that compares it and has its cluster for a member. Status churn of a compared object, and
/// every change of an object no group compares, cost a few comparisons and say nothing.
pub(crate) fn judge_change(
    graph: &Graph,
    rules: &dyn FleetRules,
    drifts: &HashMap<DriftSlot, Drift>,
    before: Option<&ObjectState>,
    object: &ObjectState,
) -> Vec<Verdict> {
    let groups = rules.groups();
    if groups.is_empty() {
        return Vec::new();
    }
    // Status churn leaves everything compared as it was: nothing to say.
    if let Some(before) = before {
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
                graph,
                rules,
                drifts,
                group,
                &FleetObject::of(object),
            ));
        }
    }
    verdicts
}

/// The members of `group` among the clusters the graph tracks, sorted by name.
pub(super) fn members<'a>(graph: &'a Graph, group: &FleetGroup) -> Vec<&'a str> {
    let mut members: Vec<&str> = graph
        .clusters()
        .filter(|cluster| group.has_member(cluster))
        .collect();
    members.sort_unstable();
    members
}

/// Every object `group` compares that a member holds (live), once each, sorted.
pub(super) fn compared_objects(graph: &Graph, group: &FleetGroup) -> Vec<FleetObject> {
    let mut seen = BTreeMap::new();
    for object in graph.iter() {
        if !object.deleted && group.selects(object) && group.has_member(&object.cluster) {
            let compared = FleetObject::of(object);
            seen.entry(compared.key()).or_insert(compared);
        }
    }
    seen.into_values().collect()
}

/// The slot of the drift about `object` in `group`: (`fleet:<group>`, the object's fleet key,
/// the class, the group's name), whichever member changed.
pub(super) fn slot(group: &FleetGroup, object: &FleetObject) -> DriftSlot {
    let subject = subject(group, object);
    DriftSlot {
        cluster: subject.cluster,
        uid: subject.uid,
        class: CLASS.to_string(),
        rule: Some(group.name.clone()),
    }
}

/// The key of the drift about `object` in `group`.
fn subject(group: &FleetGroup, object: &FleetObject) -> ObjectKey {
    ObjectKey {
        cluster: FleetObject::drift_cluster(&group.name),
        uid: object.key(),
    }
}

/// The members an open drift about `object` in `group` names missing (its `missing` fact, a
/// JSON list of cluster names).
fn named_missing(
    drifts: &HashMap<DriftSlot, Drift>,
    group: &FleetGroup,
    object: &FleetObject,
) -> Vec<String> {
    drifts
        .get(&slot(group, object))
        .and_then(|drift| drift.evidence.facts.get("missing"))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Each member with what it holds of `object`: its copy's compared view, evidence that it
/// lacks the object (a tombstone, or an open drift naming it missing while it reported the
/// object no more since), or nothing known.
pub(super) fn member_views(
    graph: &Graph,
    rules: &dyn FleetRules,
    drifts: &HashMap<DriftSlot, Drift>,
    group: &FleetGroup,
    object: &FleetObject,
) -> Vec<(String, Held)> {
    let compared_key = |key: &str| rules.is_compared_key(key);
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
                Some(copy) if !copy.deleted && made_by_knative_runtime(copy) => Held::NotReported,
                Some(copy) if !copy.deleted => {
                    Held::Copy(comparable(copy, &compared_key, &bookkeeping))
                }
                Some(_) => Held::Missing,
                None if named.iter().any(|name| name == cluster) => Held::Missing,
                None => Held::NotReported,
            };
            (cluster.to_string(), held)
        })
        .collect()
}

/// The verdict about one compared object in one group, over every member's copy: what an
/// event of a member finds, and what [`rejudge`] finds for an open drift when the members
/// changed without one.
fn assess_object(
    graph: &Graph,
    rules: &dyn FleetRules,
    drifts: &HashMap<DriftSlot, Drift>,
    group: &FleetGroup,
    object: &FleetObject,
) -> Verdict {
    let views = member_views(graph, rules, drifts, group, object);
    let evidenced = evidenced(&views);
    let divergences = compare(&evidenced, &group.ignore_paths);
    let finding = if !divergences.is_empty() {
        Finding::Holds(Box::new(divergent(group, object, &views, &divergences)))
    } else if evidenced.len() < 2 {
        Finding::Clear("fewer than two members report the object".to_string())
    } else if evidenced.iter().all(|(_, view)| view.is_none()) {
        Finding::Clear("no member holds the object".to_string())
    } else {
        Finding::Clear("every member holds the same desired state".to_string())
    };
    Verdict {
        subject: subject(group, object),
        group: group.name.clone(),
        finding,
    }
}

/// The evidence: which paths differ and which clusters hold which value, and how to align them.
fn divergent(
    group: &FleetGroup,
    object: &FleetObject,
    views: &[(String, Held)],
    divergences: &[Divergence],
) -> Evidence {
    let mut found = Evidence {
        summary: summary(object, &format!("fleet group {}", group.name), divergences),
        ..Evidence::default()
    };
    found.severity = Some(group.severity);
    found.hint = hint(object, divergences);
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
            FieldChange {
                path: divergence.path.clone(),
                before: majority,
                after: other,
            }
        })
        .collect();
    let missing: Vec<&str> = divergences
        .first()
        .filter(|first| first.path == WHOLE_OBJECT)
        .map(Divergence::missing)
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
    facts.insert("values".to_string(), values_fact(divergences));
    found
}

/// The slots of the open fleet drifts, sorted: what [`rejudge`] judges again, one by one.
pub(crate) fn open_drifts(drifts: &HashMap<DriftSlot, Drift>) -> Vec<DriftSlot> {
    let mut open: Vec<DriftSlot> = drifts
        .keys()
        .filter(|slot| slot.class == CLASS)
        .cloned()
        .collect();
    open.sort();
    open
}

/// What judging an open fleet drift again finds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rejudged {
    /// Resolve it, for this reason: its group, or the group's comparison of its object, is gone.
    Resolve(&'static str),
    /// The verdict over the current members, settled as an event's is.
    Verdict(Verdict),
}

/// Judges the open fleet drift in `slot` again from its group and object over the current
/// members (`None` when no drift is open there): members can change without any event about
/// the object (a reload changes a group's globs, what it compares or removes it; tombstone
/// expiry makes a cluster that holds nothing any more no member), and the re-assessment of live
/// objects a reload starts does not reach an object no member holds alive. Resolved when the
/// group or its comparison of the object is gone; otherwise the verdict resolves it when fewer
/// than two members report the object, when no member holds it, or when the members agree, and
/// its evidence follows when they still differ.
pub(crate) fn rejudge(
    graph: &Graph,
    rules: &dyn FleetRules,
    drifts: &HashMap<DriftSlot, Drift>,
    slot: &DriftSlot,
) -> Option<Rejudged> {
    let Some(group) = slot.rule.as_deref().and_then(|name| rules.group(name)) else {
        return Some(Rejudged::Resolve("fleet group removed from the config"));
    };
    let drift = drifts.get(slot)?;
    let object = FleetObject {
        api_version: drift.api_version.clone(),
        kind: drift.kind.clone(),
        namespace: drift.namespace.clone(),
        name: drift.name.clone(),
    };
    if !group.compares(
        &object.api_version,
        &object.kind,
        &object.namespace,
        &object.name,
    ) {
        return Some(Rejudged::Resolve(
            "the fleet group no longer compares the object",
        ));
    }
    Some(Rejudged::Verdict(assess_object(
        graph, rules, drifts, group, &object,
    )))
}

/// What a fleet finding that holds does to the group's drift.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Settled {
    /// Nothing: the open drift already says this (or the group is gone).
    Nothing,
    /// The open drift, with the finding's evidence and severity.
    Update(Drift),
    /// A new drift, pending until the group's grace runs out. Its `id` is left empty for the
    /// engine to give, as it gives every drift's (episodes opened in one millisecond are
    /// numbered).
    Open(Drift),
}

/// Settles a fleet group's finding about one compared object (`slot`, with its `open` drift).
/// Its drift is about the group, not a tracked object: the object's names come from the
/// evidence facts, severity and grace from the group, and the scope does not apply (the group
/// names what it compares).
pub(crate) fn settle(
    rules: &dyn FleetRules,
    open: Option<&Drift>,
    slot: &DriftSlot,
    evidence: Evidence,
    now: Millis,
) -> Settled {
    let Some(group) = slot.rule.as_deref().and_then(|name| rules.group(name)) else {
        return Settled::Nothing;
    };
    let severity = evidence.severity.unwrap_or(group.severity);
    let grace = group.grace;
    if let Some(existing) = open {
        let mut updated = existing.clone();
        updated.evidence = evidence;
        updated.severity = severity;
        return if updated != *existing {
            Settled::Update(updated)
        } else {
            Settled::Nothing
        };
    }
    let fact = |key: &str| evidence.facts.get(key).cloned().unwrap_or_default();
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let fire_at = now.saturating_add(grace_ms);
    Settled::Open(Drift {
        id: String::new(),
        class: CLASS.to_string(),
        rule: slot.rule.clone(),
        severity,
        state: DriftState::Pending,
        cluster: slot.cluster.clone(),
        uid: slot.uid.clone(),
        api_version: fact("apiVersion"),
        kind: fact("kind"),
        namespace: fact("namespace"),
        name: fact("name"),
        labels: Default::default(),
        owner: Default::default(),
        evidence,
        since: now,
        fire_at,
        fired_at: None,
        resolved_at: None,
        resolution: None,
    })
}

/// True when forgetting `object` (a tombstone past retention) can change a fleet drift: a
/// compared object's tombstone is a member's evidence of absence. Not on every expiry of a busy
/// fleet's Revisions and Pods. (A cluster's last object going ends its membership too: the
/// engine sees that in its graph.)
pub(crate) fn compared_by_any(rules: &dyn FleetRules, object: Option<&ObjectState>) -> bool {
    let groups = rules.groups();
    !groups.is_empty()
        && object.is_some_and(|object| groups.iter().any(|group| group.selects(object)))
}
