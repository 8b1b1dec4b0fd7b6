//! The engine's journal: every change made between `Engine::begin` and `Engine::commit`, so the
//! writer can hand the store exactly what changed ([`Journal::staged`]) and undo it all
//! ([`Journal::undo`]) when the store fails to commit, keeping memory equal to what is durable.
//! The journal only records; the engine owns the state it records about and hands it in.

use std::collections::{HashMap, HashSet};

use super::{Graph, ObjectState, Staged};
use drift_model::{Drift, DriftSlot, DriftState, ObjectKey, Transition};

/// What changed since the round began (empty and inactive outside a round).
#[derive(Debug, Default)]
pub(super) struct Journal {
    active: bool,
    objects: Vec<(ObjectKey, Option<ObjectState>)>,
    drifts: Vec<(DriftSlot, Option<Drift>)>,
    touched_objects: Vec<ObjectKey>,
    removed_objects: Vec<ObjectKey>,
    touched_drifts: Vec<DriftSlot>,
    transitions: Vec<Transition>,
    history: Vec<Transition>,
    /// Changes to the engine's recorded set: (drift id, inserted), undone in reverse.
    recorded: Vec<(String, bool)>,
    /// Keys taken from the engine's re-check queue (put back on rollback).
    rechecked: Vec<ObjectKey>,
    /// Changes to the times classes asked to judge an object again: (object, class, the time
    /// before), put back in reverse on rollback.
    judge_again: Vec<(ObjectKey, &'static str, Option<drift_model::Millis>)>,
}

impl Journal {
    /// A journal that records (a round has begun).
    pub(super) fn started() -> Journal {
        Journal {
            active: true,
            ..Journal::default()
        }
    }

    /// True while a round is being journaled.
    pub(super) fn is_active(&self) -> bool {
        self.active
    }

    /// How many writes the journal holds for the store (objects, removals, drift rows,
    /// transitions of recorded drifts).
    pub(super) fn writes(&self) -> usize {
        self.touched_objects.len()
            + self.removed_objects.len()
            + self.touched_drifts.len()
            + self.history.len()
    }

    /// Every transition, in order.
    pub(super) fn transitions(&self) -> &[Transition] {
        &self.transitions
    }

    /// An object changed in the graph: `old` comes back on undo; the new state is written only
    /// when `durable`.
    pub(super) fn object(&mut self, key: ObjectKey, old: Option<ObjectState>, durable: bool) {
        if self.active {
            if durable {
                self.touched_objects.push(key.clone());
            }
            self.objects.push((key, old));
        }
    }

    /// An object left the graph (its tombstone expired or it moved to another cluster name).
    pub(super) fn removed(&mut self, key: &ObjectKey, old: ObjectState) {
        if self.active {
            self.objects.push((key.clone(), Some(old)));
            self.removed_objects.push(key.clone());
        }
    }

    /// An open drift changed (`old` comes back on undo); `written` when its row must be written.
    pub(super) fn drift(&mut self, slot: DriftSlot, old: Option<Drift>, written: bool) {
        if self.active {
            self.drifts.push((slot.clone(), old));
            if written {
                self.touched_drifts.push(slot);
            }
        }
    }

    /// A recorded drift's row must be written with the round.
    pub(super) fn touch_drift(&mut self, slot: DriftSlot) {
        if self.active {
            self.touched_drifts.push(slot);
        }
    }

    /// A drift became recorded (`inserted`) or stopped being (`!inserted`).
    pub(super) fn recorded(&mut self, id: String, inserted: bool) {
        if self.active {
            self.recorded.push((id, inserted));
        }
    }

    /// A move of a drift; `recorded` drifts' moves go to the history too.
    pub(super) fn transition(&mut self, transition: Transition, recorded: bool) {
        if self.active {
            if recorded {
                self.history.push(transition.clone());
            }
            self.transitions.push(transition);
        }
    }

    /// A move for the history only (the backdated opening move of a drift recorded late).
    pub(super) fn history(&mut self, transition: Transition) {
        if self.active {
            self.history.push(transition);
        }
    }

    /// The time `class` asked to judge `key`'s object again changed; it was `old`.
    pub(super) fn judge_again(
        &mut self,
        key: &ObjectKey,
        class: &'static str,
        old: Option<drift_model::Millis>,
    ) {
        if self.active {
            self.judge_again.push((key.clone(), class, old));
        }
    }

    /// The judge-again changes to undo, newest first (taken before [`Journal::undo`]).
    pub(super) fn take_judge_again(
        &mut self,
    ) -> Vec<(ObjectKey, &'static str, Option<drift_model::Millis>)> {
        let mut changes = std::mem::take(&mut self.judge_again);
        changes.reverse();
        changes
    }

    /// An object taken from the re-check queue.
    pub(super) fn rechecked(&mut self, key: ObjectKey) {
        if self.active {
            self.rechecked.push(key);
        }
    }

    /// What changed, for the store to persist: the touched objects and recorded drifts as they
    /// are now, in the graph and the open drifts, borrowed.
    pub(super) fn staged<'a>(
        &'a self,
        graph: &'a Graph,
        drifts: &'a HashMap<DriftSlot, Drift>,
        recorded: &HashSet<String>,
    ) -> Staged<'a> {
        let mut objects = Vec::with_capacity(self.touched_objects.len());
        let mut seen_objects = HashSet::with_capacity(self.touched_objects.len());
        for key in self.touched_objects.iter().rev() {
            if seen_objects.insert(key) {
                if let Some(object) = graph.get(key) {
                    objects.push(object);
                }
            }
        }
        objects.reverse();
        // A resolved episode is no longer open but its final row must still be written (when it
        // was recorded). Resolved rows go first: if a slot resolves and reopens within one
        // batch, the open row is last.
        let mut changed_drifts: Vec<&Drift> = self
            .history
            .iter()
            .filter(|transition| transition.drift.state == DriftState::Resolved)
            .map(|transition| &transition.drift)
            .collect();
        let mut seen_drifts = HashSet::with_capacity(self.touched_drifts.len());
        for slot in self.touched_drifts.iter() {
            if seen_drifts.insert(slot) {
                if let Some(drift) = drifts.get(slot) {
                    if recorded.contains(&drift.id) {
                        changed_drifts.push(drift);
                    }
                }
            }
        }
        Staged {
            objects,
            removed_objects: &self.removed_objects,
            drifts: changed_drifts,
            transitions: &self.transitions,
            history: &self.history,
        }
    }

    /// Undoes everything journaled, in reverse order, on the engine's state.
    pub(super) fn undo(
        self,
        graph: &mut Graph,
        drifts: &mut HashMap<DriftSlot, Drift>,
        recorded: &mut HashSet<String>,
        recheck: &mut Vec<ObjectKey>,
    ) {
        for (id, inserted) in self.recorded.into_iter().rev() {
            if inserted {
                recorded.remove(&id);
            } else {
                recorded.insert(id);
            }
        }
        recheck.extend(self.rechecked.into_iter().rev());
        for (slot, old) in self.drifts.into_iter().rev() {
            match old {
                Some(drift) => {
                    drifts.insert(slot, drift);
                }
                None => {
                    drifts.remove(&slot);
                }
            }
        }
        for (key, old) in self.objects.into_iter().rev() {
            match old {
                Some(object) => {
                    graph.insert(object);
                }
                None => {
                    graph.remove(&key);
                }
            }
        }
    }
}
