//! The engine: applies events to the object graph, runs the classes and settles their verdicts
//! into drift episodes (see the module docs of `classify` for the lifecycle).

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::journal::Journal;
use super::{
    classes, resource_version, Capacity, Changes, Graph, ObjectState, Outcome, Rules, Sweep,
    RECHECK_PER_TICK, RECORD_PENDING_AFTER_MS, TOMBSTONE_RETENTION_MS,
};
use crate::decode::{Action, ApiServerEvent, Mode};
use crate::model::{Drift, DriftSlot, DriftState, Millis, ObjectKey, Transition};

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
    frontiers: HashMap<String, Frontier>,
    /// Cluster names under which events (not only resync) have filed objects: names that a real
    /// event stream uses (see `Engine::apply_listed`).
    event_clusters: std::collections::HashSet<String>,
    /// Events applied with an implausible `resourceVersion` (a count for metrics).
    implausible: u64,
    /// How much state may be kept.
    capacity: Capacity,
    /// New objects not tracked for lack of capacity (a count for metrics).
    refused: u64,
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
            frontiers: HashMap::new(),
            event_clusters: std::collections::HashSet::new(),
            implausible: 0,
            capacity: Capacity::default(),
            refused: 0,
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
                self.advance_frontier(&cluster, &version, object.last_seen);
            }
            if !object.listed && !self.event_clusters.contains(&object.cluster) {
                self.event_clusters.insert(object.cluster.clone());
            }
            self.graph.insert(object);
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

    /// Resolves open drifts of classes the rules no longer enable (after a hot reload), so a
    /// disabled class leaves nothing firing forever.
    pub fn retire_disabled(&mut self, now: Millis) {
        let mut disabled: Vec<DriftSlot> = self
            .drifts
            .keys()
            .filter(|slot| !self.rules.class(&slot.class).enabled)
            .cloned()
            .collect();
        disabled.sort();
        for slot in disabled {
            self.clear(&slot, "class disabled in the rules", now);
        }
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

    /// Applies one ApiServerSource event at `now`.
    pub fn apply(&mut self, event: &ApiServerEvent, now: Millis) -> Outcome {
        self.apply_from(event, None, now)
    }

    /// Applies one object of a resync list (trusted: the API server's own view; see
    /// `resource_version.rs` for what it corrects). The cluster name is resync's: an object that
    /// is tracked under another name moves to it when resync filed that copy itself (under an
    /// earlier name), or when events filed it there although events also use resync's name (a
    /// copy the API server contradicts); otherwise it is `Outcome::Conflict` (events may carry
    /// another name for this cluster than resync is configured with).
    pub fn apply_listed(
        &mut self,
        event: &ApiServerEvent,
        list: ListContext,
        now: Millis,
    ) -> Outcome {
        self.lower_frontier(&event.cluster, list);
        self.advance_frontier(&event.cluster, list.version, now);
        self.apply_from(event, Some(list), now)
    }

    fn apply_from(
        &mut self,
        event: &ApiServerEvent,
        list: Option<ListContext>,
        now: Millis,
    ) -> Outcome {
        if event.mode == Mode::Reference {
            return Outcome::Reference;
        }
        let Some(object) = event.object.as_ref() else {
            return Outcome::Reference;
        };
        let key = ObjectKey {
            cluster: event.cluster.clone(),
            uid: object.uid.clone(),
        };
        if self.graph.get(&key).is_none() {
            if let Some(other) = self.other_cluster_of(&key.cluster, &key.uid) {
                // An event never moves an object between names: two senders that disagree on a
                // uid's cluster (one of them forged or misconfigured) are a conflict. A list
                // moves resync's own copy, and a copy the API server contradicts while events
                // also use resync's name.
                let Some(_) = list else {
                    return Outcome::Conflict;
                };
                let copy_listed = self
                    .graph
                    .by_uid(&other, &key.uid)
                    .is_some_and(|copy| copy.listed);
                if !copy_listed && !self.event_clusters.contains(&key.cluster) {
                    return Outcome::Conflict;
                }
                let reason = format!(
                    "the Kubernetes API lists the object under cluster {} (resync)",
                    key.cluster
                );
                self.rehome(&key, &reason, now);
            }
        }
        if self.graph.get(&key).is_none() && !self.has_room_in(&event.cluster) {
            self.refused += 1;
            return Outcome::OverCapacity;
        }
        let previous = self.graph.get(&key);
        let plausible = self.is_plausible(&event.cluster, &object.resource_version);
        if let Some(previous) = previous {
            if !accepts(previous, &object.resource_version, event.action, list)
                && !sent_after(previous, event)
            {
                return Outcome::Stale;
            }
            // A delete is final and resolves the object's drifts: one whose version no real
            // write can have reached yet is not taken (a forged delete would end real drifts).
            // A real one after a very long quiet spell is rare, counted, and resync's sweep
            // still deletes the object.
            if !plausible && event.action == Action::Delete && !previous.deleted {
                self.implausible += 1;
                return Outcome::Stale;
            }
        }
        let mut after = ObjectState::from_object(&event.cluster, object, now);
        if event.action == Action::Delete {
            after.deleted = true;
        } else {
            // Growing the state past its byte cap is refused like a new object at a cap (a
            // delete never is: its tombstone is pruned later).
            let weight = after.weight();
            let previous_weight = previous.map_or(0, ObjectState::weight);
            if weight > previous_weight
                && self.graph.bytes().saturating_sub(previous_weight) + weight > self.capacity.bytes
            {
                self.refused += 1;
                return Outcome::OverCapacity;
            }
        }
        // Provenance: a list creates a listed object and leaves an existing one's as it was; any
        // event makes it the events' (see `ObjectState::listed`).
        after.listed = match (list, previous) {
            (None, _) => false,
            (Some(_), Some(previous)) if !previous.deleted => previous.listed,
            (Some(_), _) => true,
        };
        if !plausible {
            self.implausible += 1;
            // Ordered against the last plausible version, so the next real event replaces it.
            after.confirmed_resource_version = Some(match previous {
                Some(previous) if !previous.deleted => previous.ordering_version().to_string(),
                _ => "0".to_string(),
            });
        }
        let mut durable = true;
        if let Some(previous) = previous {
            if !previous.deleted {
                after.first_seen = previous.first_seen;
                // Most events are status churn that leaves the compact state as it was, apart
                // from its resourceVersion and write times: such a state is not written again
                // (see `ObjectState::same_content` for why that is safe).
                durable = !after.same_content(previous);
            }
        }
        // The previous state moves out of the graph (no copy) and into the journal once the
        // classes have seen it; `after` is read in place from the graph.
        let before = self.graph.insert(after);
        if plausible {
            self.advance_frontier(&event.cluster, &object.resource_version, now);
        }
        if list.is_none() && !self.event_clusters.contains(&event.cluster) {
            self.event_clusters.insert(event.cluster.clone());
        }
        let context_before = before.as_ref().filter(|previous| !previous.deleted);
        self.evaluate(&key, context_before, event.action, object, now);
        self.journal_object(key, before, durable);
        Outcome::Applied
    }

    /// Sets how much state may be kept (objects already tracked beyond it stay).
    pub fn set_capacity(&mut self, capacity: Capacity) {
        self.capacity = capacity;
    }

    /// How much state may be kept.
    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// How many new objects were not tracked for lack of capacity so far.
    pub fn refused_objects(&self) -> u64 {
        self.refused
    }

    /// True when one more object may be tracked in `cluster`.
    fn has_room_in(&self, cluster: &str) -> bool {
        if self.graph.len() >= self.capacity.objects {
            return false;
        }
        let tracked = self.graph.count_in(cluster);
        if tracked == 0 && self.graph.cluster_count() >= self.capacity.clusters {
            return false;
        }
        tracked < self.capacity.objects_per_cluster
    }

    /// How many events were applied with an implausible `resourceVersion` so far.
    pub fn implausible_versions(&self) -> u64 {
        self.implausible
    }

    /// True when `version` is not implausibly far ahead of the versions seen in `cluster` (see
    /// `resource_version::plausible`); a cluster not heard from yet cannot judge.
    fn is_plausible(&self, cluster: &str, version: &str) -> bool {
        self.frontiers
            .get(cluster)
            .is_none_or(|frontier| resource_version::plausible(version, &frontier.version))
    }

    /// Raises `cluster`'s frontier (the newest plausible version seen) to `version`, seen at
    /// `now`.
    fn advance_frontier(&mut self, cluster: &str, version: &str, now: Millis) {
        match self.frontiers.get_mut(cluster) {
            Some(frontier) => {
                if resource_version::compare(version, &frontier.version)
                    == Some(std::cmp::Ordering::Greater)
                {
                    frontier.version = version.to_string();
                    frontier.set_at = now;
                }
            }
            None => {
                if resource_version::compare(version, version).is_some() {
                    self.frontiers.insert(
                        cluster.to_string(),
                        Frontier {
                            version: version.to_string(),
                            set_at: now,
                        },
                    );
                }
            }
        }
    }

    /// Lowers `cluster`'s frontier to a list's snapshot version when the frontier was set before
    /// the list started and is newer than its snapshot: no real version can be (events walked
    /// it there, each within the jump the plausibility check allows).
    fn lower_frontier(&mut self, cluster: &str, list: ListContext) {
        if let Some(frontier) = self.frontiers.get_mut(cluster) {
            if frontier.set_at < list.started_at
                && resource_version::compare(&frontier.version, list.version)
                    == Some(std::cmp::Ordering::Greater)
            {
                frontier.version = list.version.to_string();
                frontier.set_at = list.started_at;
            }
        }
    }

    /// Live objects of one kind in `cluster` that a complete list did not contain and that
    /// were last seen before the list started: they disappeared while no delete event reached
    /// this service. `selects` limits the sweep to objects the list's label selector covers (an
    /// object outside it was not listed, not deleted). An object whose `resourceVersion` is
    /// newer than the list's changed after the list's snapshot and is left alone.
    pub fn vanished(&self, sweep: &Sweep<'_>) -> Vec<ObjectKey> {
        let mut keys: Vec<ObjectKey> = self
            .graph
            .iter()
            .filter(|object| {
                !object.deleted
                    && object.cluster == sweep.cluster
                    && object.kind == sweep.kind
                    && object.group() == crate::decode::object::api_group(sweep.api_version)
                    && !sweep.seen.contains(&object.uid)
                    && object.last_seen < sweep.listed_at
                    && resource_version::compare(object.ordering_version(), sweep.list_version)
                        != Some(std::cmp::Ordering::Greater)
                    && (sweep.selects)(&object.labels)
            })
            .map(ObjectState::key)
            .collect();
        keys.sort();
        keys
    }

    /// Applies the deletion of an object that disappeared without a delete event (see
    /// [`Engine::vanished`]): its last known state is applied as a `delete`, so the classes see
    /// exactly what a delete event would have shown them.
    pub fn forget(&mut self, key: &ObjectKey, now: Millis) -> Outcome {
        let Some(state) = self.graph.get(key).filter(|state| !state.deleted) else {
            return Outcome::Stale;
        };
        let object = state.to_object();
        let event = ApiServerEvent::for_object(
            String::new(),
            String::new(),
            &key.cluster,
            Action::Delete,
            object,
        );
        self.apply(&event, now)
    }

    /// Another cluster name under which `uid` is tracked, if any. A uid names one object in one
    /// cluster, so this means two names for one cluster (resync's and the events').
    pub fn other_cluster_of(&self, cluster: &str, uid: &str) -> Option<String> {
        self.graph
            .clusters()
            .filter(|other| *other != cluster)
            .find(|other| self.graph.by_uid(other, uid).is_some())
            .map(str::to_string)
    }

    /// Forgets copies of `key`'s object filed under other cluster names, with their open drifts
    /// (see [`Engine::other_cluster_of`]): one object under two names would alert twice. The
    /// name `key` carries wins; resync refuses to file under a name events do not use.
    fn rehome(&mut self, key: &ObjectKey, reason: &str, now: Millis) {
        while let Some(cluster) = self.other_cluster_of(&key.cluster, &key.uid) {
            let stale = ObjectKey {
                cluster,
                uid: key.uid.clone(),
            };
            let mut open: Vec<DriftSlot> = self
                .drifts
                .keys()
                .filter(|slot| slot.cluster == stale.cluster && slot.uid == stale.uid)
                .cloned()
                .collect();
            open.sort();
            for slot in open {
                self.clear(&slot, reason, now);
            }
            self.remove_object(&stale);
        }
    }

    /// True when the engine holds a live (not deleted) state for `key`.
    pub fn is_tracked(&self, key: &ObjectKey) -> bool {
        self.graph.get(key).is_some_and(|state| !state.deleted)
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
        for key in expired {
            // Drifts about a deletion end when the deleted object is forgotten: a Service
            // deleted on purpose must not fire (and remind) forever.
            let open: Vec<DriftSlot> = self
                .drifts
                .keys()
                .filter(|slot| slot.cluster == key.cluster && slot.uid == key.uid)
                .cloned()
                .collect();
            for slot in open {
                self.clear(&slot, "deleted object no longer tracked", now);
            }
            self.remove_object(&key);
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
    fn reassess(&mut self, key: &ObjectKey, now: Millis) {
        let Some((assessments, false)) = self.assess(key, None, Action::Update, None, now) else {
            return;
        };
        for (class_id, assessment) in assessments {
            if !matches!(assessment.finding, classes::Finding::Holds(_)) {
                continue;
            }
            let slot = DriftSlot {
                cluster: assessment.subject.cluster.clone(),
                uid: assessment.subject.uid.clone(),
                class: class_id.to_string(),
            };
            if !self.drifts.contains_key(&slot) {
                self.settle(class_id, assessment, now);
            }
        }
    }

    /// Every enabled class's verdicts on `key`'s object as it is in the graph, with whether it
    /// is deleted (`None` when it is not tracked). `object` is the event's decoded object, or
    /// `None` to render one from the state.
    fn assess(
        &self,
        key: &ObjectKey,
        before: Option<&ObjectState>,
        action: Action,
        object: Option<&crate::decode::KubeObject>,
        now: Millis,
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
            now,
        };
        let mut assessments = Vec::new();
        for class in classes::REGISTRY {
            if !self.rules.class(class.id()).enabled {
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
        let Some((assessments, deleted)) = self.assess(key, before, action, Some(object), now)
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
        }
    }

    fn settle(&mut self, class_id: &'static str, assessment: classes::Assessment, now: Millis) {
        let classes::Assessment { subject, finding } = assessment;
        let slot = DriftSlot {
            cluster: subject.cluster.clone(),
            uid: subject.uid.clone(),
            class: class_id.to_string(),
        };
        match finding {
            classes::Finding::Clear(reason) => self.clear(&slot, &reason, now),
            classes::Finding::Holds(evidence) => {
                let evidence = *evidence;
                // Borrowed, not cloned: this runs for every finding that still holds.
                let Some(target) = self.graph.get(&subject) else {
                    return;
                };
                if !self.rules.in_scope(target) {
                    return;
                }
                let settings = self.rules.class(class_id);
                let severity = evidence.severity.unwrap_or(settings.severity);
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
                let grace_ms = i64::try_from(settings.grace.as_millis()).unwrap_or(i64::MAX);
                let fire_at = now.saturating_add(grace_ms);
                let drift = Drift {
                    id: drift_id(&slot, now, self.next_sequence(now)),
                    class: class_id.to_string(),
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
/// What a resync list tells about the objects it lists.
#[derive(Debug, Clone, Copy)]
pub struct ListContext<'a> {
    /// The list's snapshot `resourceVersion` (the API server's own).
    pub version: &'a str,
    /// When the list started (before its first page was requested).
    pub started_at: Millis,
}

/// A cluster's frontier: its newest plausible `resourceVersion`, and when it was seen.
#[derive(Debug, Clone)]
struct Frontier {
    version: String,
    set_at: Millis,
}

/// How long after a state arrived an event sent by the source must be to prove the state wrong
/// (clock skew between the source's node and this one, with room to spare).
const SENT_AFTER_MS: Millis = 30_000;

/// True when `event` was sent (its CloudEvent `time`, which the ApiServerSource adapter sets when
/// it sends) well after `previous` arrived. The adapter sends one object's events in the order of
/// its watch, and a retried event keeps its time, so a real event older than `previous` was sent
/// before `previous` arrived: an event sent well after it is newer, whatever `previous`'s version
/// says. This is what lets the next real event replace a forged state whose version is beyond
/// anything real (or a forged delete), instead of the object staying frozen.
fn sent_after(previous: &ObjectState, event: &ApiServerEvent) -> bool {
    event
        .time
        .as_deref()
        .and_then(crate::time::parse_time)
        .is_some_and(|sent| sent > previous.last_seen.saturating_add(SENT_AFTER_MS))
}

fn accepts(
    previous: &ObjectState,
    incoming: &str,
    action: Action,
    list: Option<ListContext>,
) -> bool {
    use std::cmp::Ordering;
    // A state that arrived before a list started and that the list contradicts cannot be real:
    // a tombstone of an object the list still holds (a uid is never re-created), or a version
    // newer than the list's own snapshot. A state that arrived after the list started may be a
    // real change the snapshot predates, and is kept.
    if let Some(list) = list {
        if previous.last_seen < list.started_at {
            if previous.deleted {
                return true;
            }
            if resource_version::compare(&previous.resource_version, list.version)
                == Some(Ordering::Greater)
                && resource_version::compare(incoming, list.version) != Some(Ordering::Greater)
            {
                return true;
            }
        }
    }
    // A uid names one lifetime of an object: nothing follows its delete.
    if previous.deleted {
        return false;
    }
    let base = previous.ordering_version();
    match action {
        // A delete carries the final state and may repeat the last update's version.
        Action::Delete => resource_version::compare(incoming, base) != Some(Ordering::Less),
        Action::Add | Action::Update => resource_version::is_newer(incoming, base),
    }
}

fn drift_id(slot: &DriftSlot, since: Millis, sequence: usize) -> String {
    let mut hasher = Sha256::new();
    for part in [&slot.cluster, &slot.uid, &slot.class] {
        hasher.update(part.as_bytes());
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
