//! The engine: applies events to the object graph, runs the classes and settles their verdicts
//! into drift episodes (see the module docs of `classify` for the lifecycle).

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

mod fleet_view;
mod objects;
mod pipeline_watch;
mod rule_errors;

pub(super) use rule_errors::RuleFailure;

use super::journal::Journal;
pub use super::ordering::ListContext;
use super::ordering::{accepts, sent_after, Frontiers};
use super::{
    classes, resource_version, Capacity, Changes, Graph, ObjectState, Outcome, Rules, Sweep,
    RECHECK_PER_TICK, RECORD_PENDING_AFTER_MS, TOMBSTONE_RETENTION_MS,
};
use crate::decode::{Action, ApiServerEvent, Mode};
use drift_model::{Drift, DriftSlot, DriftState, Millis, ObjectKey, Transition};

/// Most (cluster, uid) conflicts remembered for resync to settle.
const MAX_CONFLICTED: usize = 10_000;

/// The drift engine.
pub struct Engine {
    sequence: (Millis, usize),
    rules: Arc<Rules>,
    graph: Graph,
    drifts: HashMap<DriftSlot, Drift>,
    /// Ids of the open drifts whose row is in the store (or in the round being committed).
    recorded: std::collections::HashSet<String>,
    /// Restored objects still to re-assess (see the module docs), popped from the end.
    recheck: Vec<ObjectKey>,
    journal: Journal,
    /// Per cluster, the newest plausible `resourceVersion` seen (events and resync lists).
    frontiers: Frontiers,
    /// (cluster, uid) pairs an event named while the uid was tracked under another cluster name.
    conflicted: std::collections::HashSet<ObjectKey>,
    /// Events applied with an implausible `resourceVersion` (a count for metrics).
    implausible: u64,
    /// How much state may be kept.
    capacity: Capacity,
    /// New objects not tracked for lack of capacity (a count for metrics).
    refused: u64,
    /// The own event path: parts' readiness and the source's blindness.
    pipeline_watch: pipeline_watch::PipelineWatch,
    /// Rules that failed to evaluate: counts, and what is still to be logged.
    rule_errors: rule_errors::RuleErrors,
}

impl Engine {
    /// A new engine with no state.
    pub fn new(rules: Arc<Rules>) -> Engine {
        Engine {
            sequence: (Millis::MIN, 0),
            rules,
            graph: Graph::default(),
            drifts: HashMap::new(),
            recorded: std::collections::HashSet::new(),
            recheck: Vec::new(),
            journal: Journal::default(),
            frontiers: Frontiers::default(),
            conflicted: std::collections::HashSet::new(),
            implausible: 0,
            capacity: Capacity::default(),
            refused: 0,
            pipeline_watch: pipeline_watch::PipelineWatch::default(),
            rule_errors: rule_errors::RuleErrors::default(),
        }
    }

    /// Restores committed state (objects and open drifts) after a restart.
    /// Live objects are queued for re-assessment by [`Engine::tick`]: a pending episode that
    /// was not recorded before the restart opens again if its condition still holds.
    pub fn restore(&mut self, objects: Vec<ObjectState>, drifts: Vec<Drift>) {
        for object in objects {
            if !object.deleted {
                self.recheck.push(object.key());
            }
            if object.confirmed_resource_version.is_none() {
                let (cluster, version) = (object.cluster.clone(), object.resource_version.clone());
                self.frontiers.advance(&cluster, &version, object.last_seen);
            }
            let key = object.key();
            self.graph.insert(object);
            self.note_pipeline_part(&key);
        }
        // Popped from the end: reversed so objects are re-assessed in key order.
        self.recheck.sort_by(|a, b| b.cmp(a));
        for drift in drifts {
            if drift.state != DriftState::Resolved {
                self.recorded.insert(drift.id.clone());
                self.drifts.insert(drift.slot(), drift);
            }
        }
    }

    /// Replaces the rules (hot reload). Open drifts keep their state; every live object is
    /// queued for re-assessment ([`Engine::tick`]), so a condition that a class just enabled or
    /// a scope just widened can see opens without waiting for the object's next change.
    pub fn set_rules(&mut self, rules: Arc<Rules>) {
        self.rules = rules;
        self.recheck = self
            .graph
            .iter()
            .filter(|object| !object.deleted)
            .map(ObjectState::key)
            .collect();
        self.recheck.sort_by(|a, b| b.cmp(a));
    }

    /// Resolves open drifts of classes the rules no longer enable, and of invariants the rules
    /// no longer have (after a hot reload), so a disabled class or a removed rule leaves nothing
    /// firing forever.
    pub fn retire_disabled(&mut self, now: Millis) {
        let mut disabled: Vec<(DriftSlot, &'static str)> = self
            .drifts
            .keys()
            .filter_map(|slot| {
                if !self.rules.class(&slot.class).enabled {
                    return Some((slot.clone(), "class disabled in the rules"));
                }
                let rule = slot.rule.as_deref()?;
                if slot.class == classes::FLEET_DIVERGENCE {
                    // Judged again below, over the members the new rules name.
                    return None;
                }
                match self.rules.invariant(rule) {
                    None => Some((slot.clone(), "rule removed from the rules")),
                    // A reload can narrow what a rule selects (its kinds, namespaces, clusters).
                    Some(rule) => {
                        let key = ObjectKey {
                            cluster: slot.cluster.clone(),
                            uid: slot.uid.clone(),
                        };
                        let selected = self
                            .graph
                            .get(&key)
                            .is_some_and(|object| rule.selects(object));
                        (!selected).then(|| (slot.clone(), "the rule no longer selects the object"))
                    }
                }
            })
            .collect();
        disabled.sort();
        for (slot, reason) in disabled {
            self.clear(&slot, reason, now);
        }
        self.rejudge_fleet(now);
        self.rule_errors.forget_removed(&self.rules);
    }

    /// Judges every open fleet drift again from its group and object over the current members:
    /// members can change without any event about the object (a reload changes a group's
    /// globs, what it compares or removes it; tombstone expiry makes a cluster that holds
    /// nothing any more no member), and the re-assessment of live objects a reload starts does
    /// not reach an object no member holds alive. Resolved when the group or its comparison of
    /// the object is gone, when fewer than two members report the object, when no member holds
    /// it, or when the members agree; otherwise its evidence follows.
    pub(super) fn rejudge_fleet(&mut self, now: Millis) {
        if !self.rules.class(classes::FLEET_DIVERGENCE).enabled {
            return;
        }
        let mut open: Vec<DriftSlot> = self
            .drifts
            .keys()
            .filter(|slot| slot.class == classes::FLEET_DIVERGENCE)
            .cloned()
            .collect();
        open.sort();
        for slot in open {
            let rules = Arc::clone(&self.rules);
            let Some(group) = slot
                .rule
                .as_deref()
                .and_then(|name| rules.fleet_group(name))
            else {
                self.clear(&slot, "fleet group removed from the config", now);
                continue;
            };
            let Some(drift) = self.drifts.get(&slot) else {
                continue;
            };
            let object = super::fleet::FleetObject {
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
                self.clear(&slot, "the fleet group no longer compares the object", now);
                continue;
            }
            let assessment =
                classes::fleet_assess_object(&self.graph, &rules, &self.drifts, group, &object);
            self.settle(classes::FLEET_DIVERGENCE, assessment, now);
        }
    }

    /// How often each invariant failed to evaluate since the last call, by rule and kind
    /// (`evaluation`, `budget`).
    pub fn take_invariant_errors(
        &mut self,
    ) -> std::collections::BTreeMap<(String, &'static str), u64> {
        self.rule_errors.take_counts()
    }

    /// Invariant failures not yet reported (each (object, rule) once until it evaluates again).
    pub fn take_invariant_failures(&mut self) -> Vec<RuleFailure> {
        self.rule_errors.take_reports()
    }

    /// The rules in force.
    pub fn rules(&self) -> &Arc<Rules> {
        &self.rules
    }

    /// The object graph (read-only).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Open (pending or firing) drifts.
    pub fn open_drifts(&self) -> impl Iterator<Item = &Drift> {
        self.drifts.values()
    }

    /// Number of tracked objects, tombstones included.
    pub fn object_count(&self) -> usize {
        self.graph.len()
    }

    /// Fires pending drifts whose grace has run out and forgets old tombstones.
    pub fn tick(&mut self, now: Millis) {
        let mut due: Vec<DriftSlot> = self
            .drifts
            .iter()
            .filter(|(_, drift)| drift.state == DriftState::Pending && drift.fire_at <= now)
            .filter(|(slot, _)| self.rules.class(&slot.class).enabled)
            .map(|(slot, _)| slot.clone())
            .collect();
        due.sort();
        for slot in due {
            if let Some(mut drift) = self.drifts.get(&slot).cloned() {
                drift.state = DriftState::Firing;
                drift.fired_at = Some(now);
                self.put_drift(slot, Some(drift.clone()));
                self.push_transition(drift, Some(DriftState::Pending), now);
            }
        }
        // Pending episodes that lasted are recorded (see `RECORD_PENDING_AFTER_MS`).
        self.record_opened_by(now.saturating_sub(RECORD_PENDING_AFTER_MS));
        for _ in 0..RECHECK_PER_TICK {
            let Some(key) = self.recheck.pop() else {
                // Done: give back what the restored keys took.
                self.recheck.shrink_to_fit();
                break;
            };
            self.reassess(&key, now);
            self.journal.rechecked(key);
        }
        let expired: Vec<ObjectKey> = self.graph.tombstones_before(now - TOMBSTONE_RETENTION_MS);
        let mut forgot_any = false;
        for key in expired {
            // Drifts about a deletion end when the deleted object is forgotten: a Service
            // deleted on purpose must not fire (and remind) forever.
            // A part of the own event path that is gone stays broken until it is created again
            // (`pipeline_broken` resolves the old uid's drift by name then).
            let open: Vec<DriftSlot> = self
                .drifts
                .keys()
                .filter(|slot| slot.cluster == key.cluster && slot.uid == key.uid)
                .filter(|slot| slot.class != classes::PIPELINE_BROKEN)
                // A fleet drift is about a group, never about an object tracked under its key
                // (a forged event could name cluster `fleet:<group>`).
                .filter(|slot| slot.class != classes::FLEET_DIVERGENCE)
                .cloned()
                .collect();
            for slot in open {
                self.clear(&slot, "deleted object no longer tracked", now);
            }
            // Fleet drifts change only when a compared object's tombstone goes (its evidence of
            // absence) or a cluster's last object does (its membership): not on every expiry of
            // a busy fleet's Revisions and Pods.
            let fleet_relevant = !self.rules.fleet_groups().is_empty()
                && self.graph.get(&key).is_some_and(|object| {
                    self.rules
                        .fleet_groups()
                        .iter()
                        .any(|group| group.selects(object))
                });
            self.remove_object(&key);
            forgot_any |= fleet_relevant || self.graph.count_in(&key.cluster) == 0;
        }
        if forgot_any && !self.rules.fleet_groups().is_empty() {
            self.rejudge_fleet(now);
        }
    }

    /// Records every pending drift not recorded yet (before a graceful stop, so a restart keeps
    /// their `since` and grace instead of finding them again from scratch).
    pub fn record_pending(&mut self) {
        self.record_opened_by(Millis::MAX);
    }

    /// Records the unrecorded pending drifts that opened at or before `opened_by`, writing
    /// their rows with the round's changes.
    fn record_opened_by(&mut self, opened_by: Millis) {
        let mut unrecorded: Vec<DriftSlot> = self
            .drifts
            .iter()
            .filter(|(_, drift)| {
                drift.state == DriftState::Pending
                    && drift.since <= opened_by
                    && !self.recorded.contains(&drift.id)
            })
            .map(|(slot, _)| slot.clone())
            .collect();
        unrecorded.sort();
        for slot in unrecorded {
            if let Some(drift) = self.drifts.get(&slot).cloned() {
                self.record(&drift, true);
                self.journal.touch_drift(slot);
            }
        }
    }

    /// When [`Engine::tick`] next has work: the earliest pending `fire_at` or time to record a
    /// pending drift, or at once while restored objects wait to be re-assessed.
    pub fn next_deadline(&self) -> Option<Millis> {
        if !self.recheck.is_empty() {
            return Some(Millis::MIN);
        }
        self.drifts
            .values()
            .filter(|drift| drift.state == DriftState::Pending)
            .filter_map(|drift| {
                let fires = self
                    .rules
                    .class(&drift.class)
                    .enabled
                    .then_some(drift.fire_at);
                let records = (!self.recorded.contains(&drift.id))
                    .then(|| drift.since.saturating_add(RECORD_PENDING_AFTER_MS));
                match (fires, records) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .min()
    }

    /// Re-assesses an object as it is now, opening the drifts whose condition holds and that
    /// have no open drift: pending episodes that were not recorded before a restart, and
    /// conditions a rules change made visible. Open drifts are left as they are (their evidence
    /// came from events; the re-assessment sees only the stored state). Every enabled class
    /// runs: classes about a change find nothing without a `before` and an open drift, and the
    /// state-based part of `image_drift` (a workload running another image) is found again.
    /// Re-evaluates every tracked object as it is now (holds and clears both settled): what
    /// `check` does once a whole snapshot is applied, so that a verdict that depends on other
    /// objects (a Trigger whose Broker is not ready is reported on the Broker; an internal
    /// object whose owner is tracked is reported through it) does not depend on the order the
    /// snapshot's objects were applied in.
    pub fn reevaluate_all(&mut self, now: Millis) {
        let keys: Vec<ObjectKey> = self.graph.iter().map(ObjectState::key).collect();
        for key in keys {
            self.reevaluate(&key, now);
        }
    }

    /// Every enabled class's verdicts on `key`'s object as it is now, all settled (what an
    /// event would do, without one): for state the engine keeps beside the objects.
    fn reevaluate(&mut self, key: &ObjectKey, now: Millis) {
        let Some((assessments, _)) = self.assess(key, None, Action::Update, None, now, true) else {
            return;
        };
        // Only the classes about state: a class about a change needs the event's "before".
        for (class_id, assessment) in assessments {
            if classes::reassessable(class_id) {
                self.settle(class_id, assessment, now);
            }
        }
    }

    /// Re-evaluates the objects whose verdict depends on `key`'s object, after its health (its
    /// happy condition, a PodAutoscaler's shortfall, a deletion) changed: the plumbing it owns
    /// (reported through it while it is not ready), a Broker's Triggers (reported on the Broker
    /// while it is not ready), a PodAutoscaler's Revision (whose shortfall it reports). So a
    /// finding left to another object does not depend on which of the two events came first.
    pub(super) fn reevaluate_dependents(&mut self, key: &ObjectKey, now: Millis) {
        let Some(object) = self.graph.get(key) else {
            return;
        };
        let mut dependents: Vec<ObjectKey> = self
            .graph
            .children(key)
            .into_iter()
            .filter(|child| !child.deleted && crate::classify::kinds::is_plumbing(child))
            .map(ObjectState::key)
            .collect();
        if object.is_kind(crate::classify::kinds::EVENTING, "Broker") {
            dependents.extend(
                self.graph
                    .triggers_of(object)
                    .into_iter()
                    .filter(|trigger| !trigger.deleted)
                    .map(ObjectState::key),
            );
        }
        if object.is_kind(
            crate::classify::kinds::AUTOSCALING_INTERNAL,
            "PodAutoscaler",
        ) {
            if let Some(owner) = object.controller_owner() {
                if let Some(revision) = self.graph.by_uid(&object.cluster, &owner.uid) {
                    dependents.push(revision.key());
                }
            }
        }
        for dependent in dependents {
            self.reevaluate(&dependent, now);
        }
    }

    /// Re-evaluates the objects of one cluster that have a baseline manifest, after one of
    /// Knative's defaults ConfigMaps changed there: their comparison reads those defaults.
    pub(super) fn reevaluate_baseline(&mut self, cluster: &str, now: Millis) {
        let rules = self.rules.clone();
        let keys: Vec<ObjectKey> = rules
            .baseline()
            .iter()
            .filter_map(|(manifest, _)| {
                self.graph.live_by_name(
                    cluster,
                    &manifest.group,
                    &manifest.kind,
                    &manifest.namespace,
                    &manifest.name,
                )
            })
            .map(ObjectState::key)
            .collect();
        for key in keys {
            self.reevaluate(&key, now);
        }
    }

    fn reassess(&mut self, key: &ObjectKey, now: Millis) {
        let Some((assessments, false)) = self.assess(key, None, Action::Update, None, now, false)
        else {
            return;
        };
        for (class_id, assessment) in assessments {
            // A rule's verdict is about the object's state alone, so it is settled whatever it
            // is: a rule changed by a reload may now hold where it was broken.
            if assessment.rule.is_some() {
                self.settle(class_id, assessment, now);
                continue;
            }
            if !matches!(assessment.finding, classes::Finding::Holds(_)) {
                continue;
            }
            let slot = DriftSlot {
                cluster: assessment.subject.cluster.clone(),
                uid: assessment.subject.uid.clone(),
                class: class_id.to_string(),
                rule: None,
            };
            if !self.drifts.contains_key(&slot) {
                self.settle(class_id, assessment, now);
            }
        }
    }

    /// Every enabled class's verdicts on `key`'s object as it is in the graph, with whether it
    /// is deleted (`None` when it is not tracked). `object` is the event's decoded object, or
    /// `None` to render one from the state.
    /// `dependent`: the object is re-evaluated because another one's health changed; classes
    /// that read nothing but the object itself (team invariants) are not run again then.
    fn assess(
        &self,
        key: &ObjectKey,
        before: Option<&ObjectState>,
        action: Action,
        object: Option<&crate::decode::KubeObject>,
        now: Millis,
        dependent: bool,
    ) -> Option<(Vec<(&'static str, classes::Assessment)>, bool)> {
        let after = self.graph.get(key)?;
        let rendered;
        let object = match object {
            Some(object) => object,
            None => {
                rendered = after.to_object();
                &rendered
            }
        };
        let context = classes::Context {
            after,
            before,
            action,
            object,
            graph: &self.graph,
            rules: &self.rules,
            drifts: &self.drifts,
            source_blind: self.source_blind(&key.cluster),
            now,
        };
        let mut assessments = Vec::new();
        for class in classes::REGISTRY {
            if !self.rules.class(class.id()).enabled
                || (dependent && class.id() == classes::INVARIANT)
            {
                continue;
            }
            for assessment in class.assess(&context) {
                assessments.push((class.id(), assessment));
            }
        }
        Some((assessments, after.deleted))
    }

    fn evaluate(
        &mut self,
        key: &ObjectKey,
        before: Option<&ObjectState>,
        action: Action,
        object: &crate::decode::KubeObject,
        now: Millis,
    ) {
        let Some((assessments, deleted)) =
            self.assess(key, before, action, Some(object), now, false)
        else {
            return;
        };
        for (class_id, assessment) in assessments {
            self.settle(class_id, assessment, now);
        }
        // A deleted object can no longer be in any condition of its own, except the classes that
        // are about its disappearance.
        if deleted {
            let open: Vec<DriftSlot> = self
                .drifts
                .keys()
                .filter(|slot| slot.cluster == key.cluster && slot.uid == key.uid)
                .filter(|slot| !classes::survives_delete(&slot.class))
                .cloned()
                .collect();
            for slot in open {
                self.clear(&slot, "object deleted", now);
            }
            self.rule_errors.forget_object(key);
        }
    }

    fn settle(&mut self, class_id: &'static str, assessment: classes::Assessment, now: Millis) {
        let classes::Assessment {
            subject,
            rule,
            finding,
        } = assessment;
        let slot = DriftSlot {
            cluster: subject.cluster.clone(),
            uid: subject.uid.clone(),
            class: class_id.to_string(),
            rule,
        };
        match finding {
            classes::Finding::Clear(reason) => {
                if let Some(rule) = &slot.rule {
                    self.rule_errors.recovered(&subject, rule);
                }
                self.clear(&slot, &reason, now)
            }
            classes::Finding::Failed { kind, error } => {
                let rule = slot.rule.as_deref().unwrap_or(class_id);
                let graph = &self.graph;
                self.rule_errors.failed(&subject, rule, kind, &error, || {
                    graph.get(&subject).map_or_else(
                        || subject.uid.clone(),
                        |object| {
                            if object.namespace.is_empty() {
                                format!("{} {}", object.kind, object.name)
                            } else {
                                format!("{} {}/{}", object.kind, object.namespace, object.name)
                            }
                        },
                    )
                });
            }
            classes::Finding::Holds(evidence) if class_id == classes::FLEET_DIVERGENCE => {
                self.settle_fleet(slot, *evidence, now);
            }
            classes::Finding::Holds(evidence) => {
                let evidence = *evidence;
                // Borrowed, not cloned: this runs for every finding that still holds.
                let Some(target) = self.graph.get(&subject) else {
                    return;
                };
                // drift-sentinel's own event path is watched whatever the scope says.
                if class_id != classes::PIPELINE_BROKEN && !self.rules.in_scope(target) {
                    return;
                }
                if let Some(rule) = &slot.rule {
                    self.rule_errors.recovered(&subject, rule);
                }
                let settings = self.rules.class(class_id);
                // A rule of its own (an invariant) brings its severity and grace.
                let rule = slot
                    .rule
                    .as_deref()
                    .and_then(|name| self.rules.invariant(name));
                let (default_severity, grace) = match rule {
                    Some(rule) => (rule.severity, rule.grace),
                    None => (settings.severity, settings.grace),
                };
                let severity = evidence.severity.unwrap_or(default_severity);
                if let Some(existing) = self.drifts.get(&slot) {
                    let mut updated = existing.clone();
                    updated.evidence = evidence;
                    updated.severity = severity;
                    updated.labels = target.labels.clone();
                    if updated != *existing {
                        self.put_drift(slot, Some(updated));
                    }
                    return;
                }
                let target = target.clone();
                let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
                let fire_at = now.saturating_add(grace_ms);
                let drift = Drift {
                    id: drift_id(&slot, now, self.next_sequence(now)),
                    class: class_id.to_string(),
                    rule: slot.rule.clone(),
                    severity,
                    state: DriftState::Pending,
                    cluster: target.cluster.clone(),
                    uid: target.uid.clone(),
                    api_version: target.api_version.clone(),
                    kind: target.kind.clone(),
                    namespace: target.namespace.clone(),
                    name: target.name.clone(),
                    labels: target.labels.clone(),
                    owner: self.graph.owner_chain(&target),
                    evidence,
                    since: now,
                    fire_at,
                    fired_at: None,
                    resolved_at: None,
                    resolution: None,
                };
                self.open(slot, drift, now);
            }
        }
    }

    /// Settles a fleet group's finding about one compared object. Its drift is about the group,
    /// not a tracked object: the object's names come from the evidence facts, severity and
    /// grace from the group, and the scope does not apply (the group names what it compares).
    fn settle_fleet(&mut self, slot: DriftSlot, evidence: drift_model::Evidence, now: Millis) {
        let Some(group) = slot
            .rule
            .as_deref()
            .and_then(|name| self.rules.fleet_group(name))
        else {
            return;
        };
        let severity = evidence.severity.unwrap_or(group.severity);
        let grace = group.grace;
        if let Some(existing) = self.drifts.get(&slot) {
            let mut updated = existing.clone();
            updated.evidence = evidence;
            updated.severity = severity;
            if updated != *existing {
                self.put_drift(slot, Some(updated));
            }
            return;
        }
        let fact = |key: &str| evidence.facts.get(key).cloned().unwrap_or_default();
        let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        let fire_at = now.saturating_add(grace_ms);
        let drift = Drift {
            id: drift_id(&slot, now, self.next_sequence(now)),
            class: classes::FLEET_DIVERGENCE.to_string(),
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
        };
        self.open(slot, drift, now);
    }

    /// Opens a new drift (pending), and fires it at once when it has no grace.
    fn open(&mut self, slot: DriftSlot, drift: Drift, now: Millis) {
        let fire_at = drift.fire_at;
        self.put_drift(slot.clone(), Some(drift.clone()));
        self.push_transition(drift.clone(), None, now);
        if fire_at <= now {
            let mut firing = drift;
            firing.state = DriftState::Firing;
            firing.fired_at = Some(now);
            self.put_drift(slot, Some(firing.clone()));
            self.push_transition(firing, Some(DriftState::Pending), now);
        }
    }

    /// A number that tells apart episodes opened in the same millisecond (several can open in
    /// one writer round, or in rounds less than a millisecond apart). Deterministic for replay.
    fn next_sequence(&mut self, now: Millis) -> usize {
        if self.sequence.0 == now {
            self.sequence.1 += 1;
        } else {
            self.sequence = (now, 0);
        }
        self.sequence.1
    }

    fn clear(&mut self, slot: &DriftSlot, reason: &str, now: Millis) {
        let Some(open) = self.drifts.get(slot).cloned() else {
            return;
        };
        let from = open.state;
        let mut resolved = open;
        resolved.state = DriftState::Resolved;
        resolved.resolved_at = Some(now);
        resolved.resolution = Some(reason.to_string());
        self.put_drift(slot.clone(), None);
        // Its last move is recorded when the drift was; then it leaves the recorded set.
        let recorded = self.recorded.contains(&resolved.id);
        let id = resolved.id.clone();
        self.push_transition(resolved, Some(from), now);
        if recorded {
            self.recorded.remove(&id);
            self.journal.recorded(id, false);
        }
    }

    /// Opens, updates (`Some`) or closes (`None`) the drift in `slot`. A drift is recorded once
    /// it fires, or at once when its class is not reassessable (its episode could not be found
    /// again after a restart); an unrecorded drift's changes are kept in memory only.
    fn put_drift(&mut self, slot: DriftSlot, drift: Option<Drift>) {
        let written = match &drift {
            Some(drift) => {
                if drift.state == DriftState::Firing || !classes::reassessable(&drift.class) {
                    // A drift opening now gets its opening move from the caller.
                    let opening = self
                        .drifts
                        .get(&slot)
                        .is_none_or(|open| open.id != drift.id);
                    self.record(drift, !opening);
                }
                self.recorded.contains(&drift.id)
            }
            None => false,
        };
        let old = match drift {
            Some(drift) => self.drifts.insert(slot.clone(), drift),
            None => self.drifts.remove(&slot),
        };
        self.journal.drift(slot, old, written);
    }

    /// Starts journaling changes.
    pub fn begin(&mut self) {
        self.journal = Journal::started();
    }

    /// Ends journaling: the changes are durable and can no longer be rolled back.
    pub fn commit(&mut self) {
        self.journal = Journal::default();
    }

    /// What changed since [`Engine::begin`], for the store to persist. The journal stays, so a
    /// failed store commit can still be rolled back.
    pub fn changes(&self) -> Changes {
        self.journal
            .changes(&self.graph, &self.drifts, &self.recorded)
    }

    /// Undoes everything since [`Engine::begin`].
    pub fn rollback(&mut self) {
        std::mem::take(&mut self.journal).undo(
            &mut self.graph,
            &mut self.drifts,
            &mut self.recorded,
            &mut self.recheck,
        );
    }

    /// How many writes the journal holds for the store (objects, removals, drift rows,
    /// transitions). An event that leaves it unchanged changed nothing durable: most status
    /// churn, whose compact state equals the previous one (see [`ObjectState::same_content`]).
    pub fn journaled_writes(&self) -> usize {
        self.journal.writes()
    }

    /// Transitions journaled since [`Engine::begin`], in order.
    pub fn journaled_transitions(&self) -> &[Transition] {
        self.journal.transitions()
    }

    /// Marks an open drift as recorded from now on. Its row is written with the round's
    /// changes (the caller touches its slot); with `backdate`, its opening move, which was not
    /// recorded, goes to the history dated when it opened.
    fn record(&mut self, drift: &Drift, backdate: bool) {
        if !self.recorded.insert(drift.id.clone()) {
            return;
        }
        self.journal.recorded(drift.id.clone(), true);
        if backdate && self.journal.is_active() {
            let mut opened = drift.clone();
            opened.state = DriftState::Pending;
            opened.fired_at = None;
            self.journal.history(Transition {
                drift: opened,
                from: None,
                at: drift.since,
            });
        }
    }

    fn push_transition(&mut self, drift: Drift, from: Option<DriftState>, at: Millis) {
        if self.journal.is_active() {
            let recorded = self.recorded.contains(&drift.id);
            self.journal
                .transition(Transition { drift, from, at }, recorded);
        }
    }

    /// Journals an object change made directly on the graph: `old` is restored on rollback, and
    /// the new state is written by the next commit only when `durable`.
    fn journal_object(&mut self, key: ObjectKey, old: Option<ObjectState>, durable: bool) {
        self.journal.object(key, old, durable);
    }

    fn remove_object(&mut self, key: &ObjectKey) {
        if let Some(old) = self.graph.remove(key) {
            self.journal.removed(key, old);
        }
    }
}

/// True when an event's state (`incoming` version, `action`) replaces `previous` (see
/// `resource_version.rs` for the rules).
fn drift_id(slot: &DriftSlot, since: Millis, sequence: usize) -> String {
    let mut hasher = Sha256::new();
    for part in [&slot.cluster, &slot.uid, &slot.class] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    // Drifts of built-in classes keep the ids they always had.
    if let Some(rule) = &slot.rule {
        hasher.update(rule.as_bytes());
        hasher.update([0u8]);
    }
    hasher.update(since.to_be_bytes());
    // Episodes opened in the same millisecond are numbered; the first keeps the plain id.
    if sequence > 0 {
        hasher.update((sequence as u64).to_be_bytes());
    }
    let digest = hasher.finalize();
    digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
