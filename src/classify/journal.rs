//! The engine's journal: every change made between [`Engine::begin`] and [`Engine::commit`], so
//! the writer can hand the store exactly what changed ([`Engine::changes`]) and undo it all
//! ([`Engine::rollback`]) when the store fails to commit, keeping memory equal to what is durable.

use super::{Changes, Engine, ObjectState};
use crate::model::{Drift, DriftSlot, DriftState, Millis, ObjectKey, Transition};

#[derive(Debug, Default)]
pub(super) struct Journal {
    pub(super) active: bool,
    pub(super) objects: Vec<(ObjectKey, Option<ObjectState>)>,
    pub(super) drifts: Vec<(DriftSlot, Option<Drift>)>,
    pub(super) touched_objects: Vec<ObjectKey>,
    pub(super) removed_objects: Vec<ObjectKey>,
    pub(super) touched_drifts: Vec<DriftSlot>,
    pub(super) transitions: Vec<Transition>,
    pub(super) history: Vec<Transition>,
    /// Changes to `Engine::recorded`: (drift id, inserted), undone in reverse on rollback.
    pub(super) recorded: Vec<(String, bool)>,
    /// Keys taken from `Engine::recheck` (put back on rollback).
    pub(super) rechecked: Vec<ObjectKey>,
}

impl Engine {
    /// Starts journaling changes.
    pub fn begin(&mut self) {
        self.journal = Journal {
            active: true,
            ..Journal::default()
        };
    }

    /// Ends journaling: the changes are durable and can no longer be rolled back.
    pub fn commit(&mut self) {
        self.journal = Journal::default();
    }

    /// What changed since [`Engine::begin`], for the store to persist. The journal stays, so a
    /// failed store commit can still be rolled back.
    pub fn changes(&self) -> Changes {
        let journal = &self.journal;
        let mut changes = Changes::default();
        let mut seen_objects = std::collections::HashSet::new();
        for key in journal.touched_objects.iter().rev() {
            if seen_objects.insert(key.clone()) {
                if let Some(object) = self.graph.get(key) {
                    changes.objects.push(object.clone());
                }
            }
        }
        changes.objects.reverse();
        changes.removed_objects = journal.removed_objects.clone();
        // A resolved episode is no longer open but its final row must still be written (when it
        // was recorded). Resolved rows go first: if a slot resolves and reopens within one
        // batch, the open row is last.
        for transition in &journal.history {
            if transition.drift.state == DriftState::Resolved {
                changes.drifts.push(transition.drift.clone());
            }
        }
        let mut seen_drifts = std::collections::HashSet::new();
        for slot in journal.touched_drifts.iter() {
            if seen_drifts.insert(slot.clone()) {
                if let Some(drift) = self.drifts.get(slot) {
                    if self.recorded.contains(&drift.id) {
                        changes.drifts.push(drift.clone());
                    }
                }
            }
        }
        changes.transitions = journal.transitions.clone();
        changes.history = journal.history.clone();
        changes
    }

    /// Undoes everything since [`Engine::begin`].
    pub fn rollback(&mut self) {
        let journal = std::mem::take(&mut self.journal);
        for (id, inserted) in journal.recorded.into_iter().rev() {
            if inserted {
                self.recorded.remove(&id);
            } else {
                self.recorded.insert(id);
            }
        }
        self.recheck.extend(journal.rechecked.into_iter().rev());
        for (slot, old) in journal.drifts.into_iter().rev() {
            match old {
                Some(drift) => {
                    self.drifts.insert(slot, drift);
                }
                None => {
                    self.drifts.remove(&slot);
                }
            }
        }
        for (key, old) in journal.objects.into_iter().rev() {
            match old {
                Some(object) => {
                    self.graph.insert(object);
                }
                None => {
                    self.graph.remove(&key);
                }
            }
        }
    }

    /// How many writes the journal holds for the store (objects, removals, drift rows,
    /// transitions). An event that leaves it unchanged changed nothing durable: most status
    /// churn, whose compact state equals the previous one (see [`ObjectState::same_content`]).
    pub fn journaled_writes(&self) -> usize {
        let journal = &self.journal;
        journal.touched_objects.len()
            + journal.removed_objects.len()
            + journal.touched_drifts.len()
            + journal.history.len()
    }

    /// Transitions journaled since [`Engine::begin`], in order.
    pub fn journaled_transitions(&self) -> &[Transition] {
        &self.journal.transitions
    }

    /// Marks an open drift as recorded from now on. Its row is written with the round's
    /// changes (the caller touches its slot); with `backdate`, its opening move, which was not
    /// recorded, goes to the history dated when it opened.
    pub(super) fn record(&mut self, drift: &Drift, backdate: bool) {
        if !self.recorded.insert(drift.id.clone()) {
            return;
        }
        if self.journal.active {
            self.journal.recorded.push((drift.id.clone(), true));
        }
        if self.journal.active && backdate {
            let mut opened = drift.clone();
            opened.state = DriftState::Pending;
            opened.fired_at = None;
            self.journal.history.push(Transition {
                drift: opened,
                from: None,
                at: drift.since,
            });
        }
    }

    pub(super) fn push_transition(&mut self, drift: Drift, from: Option<DriftState>, at: Millis) {
        if self.journal.active {
            let transition = Transition { drift, from, at };
            if self.recorded.contains(&transition.drift.id) {
                self.journal.history.push(transition.clone());
            }
            self.journal.transitions.push(transition);
        }
    }

    /// Journals an object change made directly on the graph: `old` is restored on rollback, and
    /// the new state is written by the next commit only when `durable`.
    pub(super) fn journal_object(
        &mut self,
        key: ObjectKey,
        old: Option<ObjectState>,
        durable: bool,
    ) {
        if self.journal.active {
            if durable {
                self.journal.touched_objects.push(key.clone());
            }
            self.journal.objects.push((key, old));
        }
    }

    pub(super) fn remove_object(&mut self, key: &ObjectKey) {
        let old = self.graph.remove(key);
        if self.journal.active && old.is_some() {
            self.journal.objects.push((key.clone(), old));
            self.journal.removed_objects.push(key.clone());
        }
    }
}
