//! What a round changed and what is recorded: the journal the store persists or rolls back
//! ([`Engine::begin`], [`Engine::staged`], [`Engine::rollback`]), every drift change written
//! through it ([`Engine::put_drift`]), and which open drifts have their row in the store (a
//! drift is recorded once it fires, at once for a class about a change, or once it has been
//! pending for `RECORD_PENDING_AFTER_MS`).

use super::*;

impl Engine {
    /// Records every pending drift not recorded yet (before a graceful stop, so a restart keeps
    /// their `since` and grace instead of finding them again from scratch).
    pub fn record_pending(&mut self) {
        self.record_opened_by(Millis::MAX);
    }

    /// Records the unrecorded pending drifts that opened at or before `opened_by`, writing
    /// their rows with the round's changes.
    pub(super) fn record_opened_by(&mut self, opened_by: Millis) {
        let unrecorded: Vec<DriftSlot> = self
            .pending_drifts()
            .filter(|(_, drift)| drift.since <= opened_by && !self.recorded.contains(&drift.id))
            .map(|(slot, _)| slot.clone())
            .collect();
        self.record_slots(unrecorded);
    }

    /// Records the drifts in `slots` (pending, not recorded yet), in slot order.
    pub(super) fn record_slots(&mut self, mut slots: Vec<DriftSlot>) {
        slots.sort();
        for slot in slots {
            if let Some(drift) = self.drifts.get(&slot).cloned() {
                self.record(&drift, true);
                self.journal.touch_drift(slot.clone());
                // Its next deadline is later now (it only fires): filed again.
                self.note_pending(&slot);
            }
        }
    }

    /// Opens, updates (`Some`) or closes (`None`) the drift in `slot`. A drift is recorded once
    /// it fires, or at once when its class is not reassessable (its episode could not be found
    /// again after a restart); an unrecorded drift's changes are kept in memory only.
    pub(super) fn put_drift(&mut self, slot: DriftSlot, drift: Option<Drift>) {
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
        if old.is_some()
            && !self.drifts.contains_key(&slot)
            && classes::keeps_tombstone(&slot.class)
        {
            // The tombstone it held may be past its retention: due at the next tick.
            self.tombstones_swept = Millis::MIN;
        }
        self.note_pending(&slot);
        self.journal.drift(slot, old, written);
    }

    /// Starts journaling changes.
    pub fn begin(&mut self) {
        self.journal = Journal::started();
        self.swept_at_begin = self.tombstones_swept;
    }

    /// Ends journaling: the changes are durable and can no longer be rolled back.
    pub fn commit(&mut self) {
        self.journal = Journal::default();
    }

    /// What changed since [`Engine::begin`], for the store to persist. The journal stays, so a
    /// failed store commit can still be rolled back.
    pub fn changes(&self) -> Changes {
        self.staged().to_changes()
    }

    /// What changed since [`Engine::begin`], borrowed (see [`Staged`]).
    pub fn staged(&self) -> Staged<'_> {
        self.journal
            .staged(&self.graph, &self.drifts, &self.recorded)
    }

    /// Undoes everything since [`Engine::begin`].
    pub fn rollback(&mut self) {
        for (key, class, old) in self.journal.take_judge_again() {
            self.agenda.set(&key, class, old);
        }
        std::mem::take(&mut self.journal).undo(
            &mut self.graph,
            &mut self.drifts,
            &mut self.recorded,
            &mut self.recheck,
        );
        self.rebuild_pending();
        // The tick's expiry is undone with the rest: the tombstones it forgot are back, and
        // what was held at `begin` is held again.
        self.tombstones_swept = self.swept_at_begin;
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
    pub(super) fn record(&mut self, drift: &Drift, backdate: bool) {
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

    pub(super) fn push_transition(&mut self, drift: Drift, from: Option<DriftState>, at: Millis) {
        if self.journal.is_active() {
            let recorded = self.recorded.contains(&drift.id);
            self.journal
                .transition(Transition { drift, from, at }, recorded);
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
        self.journal.object(key, old, durable);
    }

    pub(super) fn remove_object(&mut self, key: &ObjectKey) {
        for (class, at) in self.agenda.forget(key) {
            self.journal.judge_again(key, class, Some(at));
        }
        if let Some(old) = self.graph.remove(key) {
            self.journal.removed(key, old);
        }
    }
}
