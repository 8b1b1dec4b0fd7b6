//! The engine's object side: applying events and listed objects (ordering, cluster names,
//! capacity), and forgetting objects a list no longer holds.

use super::*;

impl Engine {
    /// Applies one ApiServerSource event at `now`.
    pub fn apply(&mut self, event: &ApiServerEvent, now: Millis) -> Outcome {
        let outcome = self.apply_from(event, None, now);
        // Events that reached the engine for a cluster whose objects it tracks: its source
        // sees (a conflicting or refused sender's events say nothing about it).
        if matches!(outcome, Outcome::Applied | Outcome::Stale) {
            self.note_event(&event.cluster, now);
        }
        outcome
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
        self.frontiers.lower(&event.cluster, list);
        self.frontiers.advance(&event.cluster, list.version, now);
        let outcome = self.apply_from(event, Some(list), now);
        // An object the list found unchanged is judged again by the classes that judge it by
        // the clock (a changed one was just judged whole); nothing for any other object.
        if outcome == Outcome::Stale && self.agenda.len() > 0 {
            if let Some(object) = event.object.as_ref() {
                let key = ObjectKey {
                    cluster: event.cluster.clone(),
                    uid: object.uid.clone(),
                };
                self.judge_listed(&key, now);
            }
        }
        outcome
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
                // uid's cluster (one of them forged or misconfigured) are a conflict, and the
                // event's name is remembered for this uid. A list moves resync's own copy, and an
                // events' copy when events for this very uid came under the list's name too (the
                // API server and an event stream agree against the copy: a renamed cluster, or
                // a forged first event).
                let Some(_) = list else {
                    self.note_conflict(&key);
                    return Outcome::Conflict;
                };
                let copy_listed = self
                    .graph
                    .by_uid(&other, &key.uid)
                    .is_some_and(|copy| copy.listed);
                if !copy_listed && !self.conflicted.remove(&key) {
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
        // The source's send time (CloudEvent `time`; its arrival when an event has none, since the
        // attribute is optional). A listed object has none: it is the API server's own state.
        let sent = match list {
            Some(_) => None,
            None => Some(
                event
                    .time
                    .as_deref()
                    .and_then(drift_model::time::parse_time)
                    .unwrap_or(now),
            ),
        };
        let previous = self.graph.get(&key);
        let plausible = self
            .frontiers
            .plausible(&event.cluster, &object.resource_version);
        if let Some(previous) = previous {
            if !accepts(previous, &object.resource_version, event.action, list)
                && !sent_after(previous, sent)
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
        let mut after =
            ObjectState::from_object_after(&event.cluster, object, now, previous, &mut self.names);
        // A ConfigMap's `data` that repeats the previous state's text keeps that state's values
        // (parsed once, when a class first read them): comparing the state, weighing it and the
        // classes then neither parse nor compare the values again.
        if let (Some(previous), Some(data)) = (
            previous.and_then(|previous| previous.data.as_ref()),
            &after.data,
        ) {
            if data.same_text(previous) {
                after.data = Some(std::sync::Arc::clone(previous));
            }
        }
        after.deleted = event.action == Action::Delete;
        after.sent_at = sent;
        // Growing the state past its byte cap is refused like a new object at a cap. A delete of
        // a tracked object is always taken: past the cap its tombstone drops what no class reads
        // of a deleted object (spec, status, data, managers), keeping the delete's own labels,
        // annotations and owners, which `unexpected_delete` judges.
        let previous_weight = previous.map_or(0, ObjectState::weight);
        let over = |after: &ObjectState, graph: &Graph| {
            let weight = after.weight();
            weight > previous_weight
                && graph.bytes().saturating_sub(previous_weight) + weight > self.capacity.bytes
        };
        if over(&after, &self.graph) {
            if after.deleted && previous.is_some_and(|previous| !previous.deleted) {
                after.spec = Default::default();
                after.status = Default::default();
                after.data = None;
                after.managers.clear();
            } else {
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
            self.frontiers
                .advance(&event.cluster, &object.resource_version, now);
        }
        let context_before = before.as_ref().filter(|previous| !previous.deleted);
        self.evaluate(&key, context_before, event.action, object, now);
        // Health is read from the status (parsed) only when the kept status or the deletion
        // changed: most events are status churn whose kept status is unchanged.
        let health_changed = match (before.as_ref(), self.graph.get(&key)) {
            (Some(previous), Some(current)) => {
                (previous.status != current.status
                    || previous.is_going_away() != current.is_going_away())
                    && !classes::same_health(previous, current)
            }
            _ => true,
        };
        if health_changed {
            self.reevaluate_dependents(&key, now);
        }
        let defaults_changed = match (before.as_ref(), self.graph.get(&key)) {
            (previous, Some(current)) => {
                crate::classify::defaults::is_defaults_config_map(
                    current.group(),
                    &current.kind,
                    &current.namespace,
                    &current.name,
                ) && previous.map(|p| (&p.data, p.deleted))
                    != Some((&current.data, current.deleted))
            }
            _ => false,
        };
        if defaults_changed {
            self.reevaluate_baseline(&key.cluster, now);
        }
        self.note_pipeline_part(&key);
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
        // Not `apply`: a deletion resync inferred is no event that arrived.
        self.apply_from(&event, None, now)
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
                .filter(|slot| !classes::about_a_group(&slot.class))
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

    /// Remembers that an event named `key`'s cluster for a uid tracked under another name (see
    /// `apply_listed`). Bounded: past `MAX_CONFLICTED`, new ones are not remembered.
    fn note_conflict(&mut self, key: &ObjectKey) {
        if self.conflicted.len() < MAX_CONFLICTED && !self.conflicted.contains(key) {
            self.conflicted.insert(key.clone());
        }
    }
}
