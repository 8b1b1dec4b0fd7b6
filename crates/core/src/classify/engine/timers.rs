//! The engine's clock-driven work: [`Engine::tick`] fires pending drifts whose grace ran out,
//! records pending drifts that lasted, judges again what classes that judge by the clock asked
//! for (`judge_again.rs`), re-assesses restored objects a chunk at a time and forgets old
//! tombstones; [`Engine::next_deadline`] says when it next has work.

use super::*;

impl Engine {
    /// Fires pending drifts whose grace has run out, re-assesses up to [`RECHECK_PER_TICK`]
    /// queued objects and forgets old tombstones.
    pub fn tick(&mut self, now: Millis) {
        self.tick_within(now, &mut || true);
    }

    /// [`Engine::tick`], with a slice of the re-judge (after a start or a reload) that ends
    /// when `go_on` says so, asked after each object: the caller bounds the slice (the writer
    /// by its clock; this crate reads none), and at least one object is judged per call, so
    /// the re-judge always ends.
    pub fn tick_within(&mut self, now: Millis, go_on: &mut dyn FnMut() -> bool) {
        if self.deadlines.first().is_some_and(|(at, _)| *at <= now) {
            self.fire_and_record(now);
        }
        debug_assert!(self.pending_index_holds());
        // Before the re-judge's slice: a verdict that changed with time is due now, and a
        // drift it opens with no grace fires in this round.
        if self.agenda.first().is_some_and(|at| at <= now) {
            self.judge_due(now, go_on);
        }
        for _ in 0..RECHECK_PER_TICK {
            let Some(key) = self.recheck.pop() else {
                // Done: give back what the restored keys took.
                self.recheck.shrink_to_fit();
                break;
            };
            self.reassess(&key, now);
            self.journal.rechecked(key);
            if !go_on() {
                break;
            }
        }
        let cutoff = now - TOMBSTONE_RETENTION_MS;
        let expired: Vec<ObjectKey> = self.graph.tombstones_before(cutoff);
        // What is still kept below the cutoff after this loop is held by a drift:
        // `next_deadline` looks past it (a holding drift that resolves resets this). The
        // cutoff as it is, even below the last one (a clock set back): nothing unheld is left
        // below it, and a tombstone newer than an earlier, later cutoff is not skipped.
        self.tombstones_swept = cutoff;
        let mut forgot_any = false;
        for key in expired {
            // A drift that outlives the deletion it is about keeps its tombstone (its verdict is
            // judged against it) until it resolves.
            if self.drifts.keys().any(|slot| {
                slot.cluster == key.cluster
                    && slot.uid == key.uid
                    && classes::keeps_tombstone(&slot.class)
            }) {
                continue;
            }
            // Drifts about a deletion end when the deleted object is forgotten: a Service
            // deleted on purpose must not fire (and remind) forever.
            // A part of the own event path that is gone stays broken until it is created again
            // (`pipeline_broken` resolves the old uid's drift by name then).
            let open: Vec<DriftSlot> = self
                .drifts
                .keys()
                .filter(|slot| slot.cluster == key.cluster && slot.uid == key.uid)
                .filter(|slot| slot.class != classes::PIPELINE_BROKEN)
                // A drift about a group is never about an object tracked under its key (a
                // forged event could name cluster `fleet:<group>`).
                .filter(|slot| !classes::about_a_group(&slot.class))
                .cloned()
                .collect();
            for slot in open {
                self.clear(&slot, "deleted object no longer tracked", now);
            }
            // Fleet drifts change only when a compared object's tombstone goes (its evidence of
            // absence) or a cluster's last object does (its membership): not on every expiry of
            // a busy fleet's Revisions and Pods.
            let fleet_relevant = self.fleet_compares(&key);
            self.remove_object(&key);
            forgot_any |= fleet_relevant || self.graph.count_in(&key.cluster) == 0;
        }
        if forgot_any && !self.rules.fleet_groups().is_empty() {
            self.rejudge_fleet(now);
        }
    }

    /// When [`Engine::tick`] next has work: no later than the earliest pending `fire_at` or
    /// time to record a pending drift (it may be earlier: a lower bound, which the round it wakes
    /// makes exact) or time a class asked to judge an object again, or at once while restored
    /// objects wait to be re-assessed; and within [`TOMBSTONE_SWEEP_STEP_MS`] after the oldest
    /// tombstone passes its retention, so the drifts about a deleted object end on time on an
    /// idle cluster too (a tombstone a drift holds is not waited for again until that drift
    /// resolves).
    pub fn next_deadline(&self) -> Option<Millis> {
        if !self.recheck.is_empty() {
            return Some(Millis::MIN);
        }
        // The earliest filed time: the round it wakes fires or records that drift and files
        // it again.
        let pending = self.deadlines.first().map(|(at, _)| *at);
        let earliest = match (pending, self.agenda.first()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (earliest, self.tombstone_expiry()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When the oldest tombstone not held by a drift is past its retention (a tick forgets a
    /// tombstone last seen strictly before `now - TOMBSTONE_RETENTION_MS`), rounded up to the
    /// next [`TOMBSTONE_SWEEP_STEP_MS`].
    fn tombstone_expiry(&self) -> Option<Millis> {
        let seen = self.graph.first_tombstone_from(self.tombstones_swept)?;
        let expires = seen.saturating_add(TOMBSTONE_RETENTION_MS + 1);
        let step = TOMBSTONE_SWEEP_STEP_MS;
        // Never before `expires`: a round woken early would leave it and wake again at once.
        let rounded = expires.saturating_add(step - 1).div_euclid(step) * step;
        Some(rounded.max(expires))
    }

    /// Fires the pending drifts whose grace ran out and records those that lasted: those filed
    /// in `deadlines` at `now` or before, which are then filed again (or not, once firing).
    fn fire_and_record(&mut self, now: Millis) {
        let mut due: Vec<DriftSlot> = Vec::new();
        while let Some(entry) = self.deadlines.first() {
            if entry.0 > now {
                break;
            }
            if let Some((_, slot)) = self.deadlines.pop_first() {
                // Taken out: filed again below.
                self.pending.insert(slot.clone(), None);
                due.push(slot);
            }
        }
        due.sort();
        let fire: Vec<DriftSlot> = (due.iter())
            .filter(|slot| {
                self.drifts.get(*slot).is_some_and(|drift| {
                    drift.state == DriftState::Pending
                        && drift.fire_at <= now
                        && self.rules.class(&drift.class).enabled
                })
            })
            .cloned()
            .collect();
        for slot in fire {
            if let Some(mut drift) = self.drifts.get(&slot).cloned() {
                drift.state = DriftState::Firing;
                drift.fired_at = Some(now);
                self.put_drift(slot, Some(drift.clone()));
                self.push_transition(drift, Some(DriftState::Pending), now);
            }
        }
        // Pending episodes that lasted are recorded (see `RECORD_PENDING_AFTER_MS`).
        let opened_by = now.saturating_sub(RECORD_PENDING_AFTER_MS);
        let lasted: Vec<DriftSlot> = (due.iter())
            .filter(|slot| {
                self.drifts.get(*slot).is_some_and(|drift| {
                    drift.state == DriftState::Pending
                        && drift.since <= opened_by
                        && !self.recorded.contains(&drift.id)
                })
            })
            .cloned()
            .collect();
        self.record_slots(lasted);
        for slot in &due {
            self.note_pending(slot);
        }
    }

    /// When the timers next have work on the pending `drift`: it fires (its class switched
    /// on) or is recorded (not yet); `None` when neither will happen.
    pub(super) fn pending_deadline(&self, drift: &Drift) -> Option<Millis> {
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
    }
}
