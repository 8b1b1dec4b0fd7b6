//! An in-memory [`Store`] for tests: same contract as SQLite, and a switch that makes every write
//! fail so tests can prove that a store failure becomes a `503` and loses nothing.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{
    Batch, Error, EventKey, Lease, NewOutbox, Outbox, OutboxRow, OutboxState, OutboxStats,
    Settlement, SilenceChange, Snapshot, Store, StoredSilence,
};
use crate::classify::ObjectState;
use crate::model::{Drift, DriftState, Millis, ObjectKey};

/// The in-memory store.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    inner: Arc<std::sync::Mutex<Inner>>,
    failing: Arc<AtomicBool>,
    gate: Arc<(std::sync::Mutex<Gate>, std::sync::Condvar)>,
}

/// When `commit` waits.
#[derive(Debug, Default)]
struct Gate {
    /// Every commit waits.
    blocked: bool,
    /// Commits wait once this many have succeeded.
    block_at: Option<usize>,
}

#[derive(Debug, Default)]
struct Inner {
    events: HashMap<EventKey, Millis>,
    objects: HashMap<ObjectKey, ObjectState>,
    drifts: HashMap<String, Drift>,
    outbox: std::collections::BTreeMap<String, OutboxRow>,
    /// Claims of outbox rows: row id → (owner, until).
    claims: HashMap<String, (String, Millis)>,
    silences: Vec<StoredSilence>,
    commits: usize,
}

fn pending_row(queued: &NewOutbox) -> OutboxRow {
    OutboxRow {
        queued: queued.clone(),
        attempts: 0,
        next_attempt_at: queued.not_before,
        state: OutboxState::Pending,
        last_error: None,
        finished_at: None,
        message_id: None,
    }
}

impl MemoryStore {
    /// A new, empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Makes every later call fail (or succeed again).
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// While blocked, `commit` waits: tests use it to fill the writer's queue.
    pub fn set_blocked(&self, blocked: bool) {
        let (lock, condvar) = &*self.gate;
        lock.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .blocked = blocked;
        condvar.notify_all();
    }

    /// Commits wait once `count` commits have succeeded (`None`: no such limit), so a test can
    /// hold one particular round in its commit.
    pub fn set_block_at(&self, count: Option<usize>) {
        let (lock, condvar) = &*self.gate;
        lock.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .block_at = count;
        condvar.notify_all();
    }

    /// Number of committed event keys.
    pub fn event_count(&self) -> usize {
        self.lock().events.len()
    }

    /// Number of successful commits.
    pub fn commit_count(&self) -> usize {
        self.lock().commits
    }

    /// Committed objects.
    pub fn objects(&self) -> Vec<ObjectState> {
        self.lock().objects.values().cloned().collect()
    }

    /// Committed drifts (all states).
    pub fn drifts(&self) -> Vec<Drift> {
        self.lock().drifts.values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means a test thread panicked; the data is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check(&self) -> Result<(), Error> {
        if self.failing.load(Ordering::SeqCst) {
            Err(Error::Unavailable("memory store set to fail".to_string()))
        } else {
            Ok(())
        }
    }
}

impl Store for MemoryStore {
    fn load(&mut self) -> Result<Snapshot, Error> {
        self.check()?;
        let inner = self.lock();
        Ok(Snapshot {
            silences: inner.silences.clone(),
            objects: inner.objects.values().cloned().collect(),
            drifts: inner
                .drifts
                .values()
                .filter(|drift| drift.state != DriftState::Resolved)
                .cloned()
                .collect(),
        })
    }

    fn is_duplicate(&mut self, key: &EventKey) -> Result<bool, Error> {
        self.check()?;
        Ok(self.lock().events.contains_key(key))
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        {
            let (lock, condvar) = &*self.gate;
            let mut gate = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            while gate.blocked
                || gate
                    .block_at
                    .is_some_and(|count| self.lock().commits >= count)
            {
                gate = condvar
                    .wait(gate)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
        self.check()?;
        let mut inner = self.lock();
        let mut seen = HashSet::new();
        for (key, at) in &batch.events {
            if seen.insert(key.clone()) {
                inner.events.entry(key.clone()).or_insert(*at);
            }
        }
        for object in &batch.changes.objects {
            inner.objects.insert(object.key(), object.clone());
        }
        for key in &batch.changes.removed_objects {
            inner.objects.remove(key);
        }
        for drift in &batch.changes.drifts {
            inner.drifts.insert(drift.id.clone(), drift.clone());
        }
        for queued in &batch.outbox {
            inner
                .outbox
                .entry(queued.id.clone())
                .or_insert_with(|| pending_row(queued));
        }
        for drift_id in &batch.cancel_reminders {
            inner.outbox.retain(|_, row| {
                !(row.queued.drift_id == *drift_id
                    && row.queued.kind == "repeat"
                    && row.state == OutboxState::Pending)
            });
        }
        for change in &batch.silences {
            match change {
                SilenceChange::Add(stored) => inner.silences.push(stored.clone()),
                SilenceChange::Remove(id) => inner.silences.retain(|stored| stored.id != *id),
            }
        }
        inner.commits += 1;
        Ok(())
    }

    fn heartbeat(&mut self, _now: Millis) -> Result<(), Error> {
        self.check()
    }

    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, Error> {
        self.check()?;
        let mut inner = self.lock();
        let before = inner.drifts.len() + inner.outbox.len();
        inner.drifts.retain(|_, drift| {
            !(drift.state == DriftState::Resolved
                && drift.resolved_at.is_some_and(|at| at < cutoff))
        });
        inner.outbox.retain(|_, row| {
            !(row.state != OutboxState::Pending && row.finished_at.is_some_and(|at| at < cutoff))
        });
        Ok(before - inner.drifts.len() - inner.outbox.len())
    }

    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, Error> {
        self.check()?;
        let mut inner = self.lock();
        let before = inner.events.len();
        inner.events.retain(|_, at| *at >= cutoff);
        Ok(before - inner.events.len())
    }
}

impl Outbox for MemoryStore {
    fn claim(
        &mut self,
        channel: &str,
        now: Millis,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<OutboxRow>, Error> {
        self.check()?;
        let mut inner = self.lock();
        let claimable = |claims: &HashMap<String, (String, Millis)>, id: &str| match claims.get(id)
        {
            None => true,
            Some((owner, until)) => *owner == lease.owner || *until <= now,
        };
        let mut rows: Vec<OutboxRow> = inner
            .outbox
            .values()
            .filter(|row| {
                row.queued.channel == channel
                    && row.state == OutboxState::Pending
                    && row.next_attempt_at <= now
                    && claimable(&inner.claims, &row.queued.id)
            })
            .cloned()
            .collect();
        rows.sort_by(|a, b| {
            (a.queued.created_at, &a.queued.id).cmp(&(b.queued.created_at, &b.queued.id))
        });
        rows.truncate(limit);
        for row in &rows {
            inner
                .claims
                .insert(row.queued.id.clone(), (lease.owner.clone(), lease.until));
        }
        Ok(rows)
    }

    fn next_due(&mut self, channel: &str) -> Result<Option<Millis>, Error> {
        self.check()?;
        Ok(self
            .lock()
            .outbox
            .values()
            .filter(|row| row.queued.channel == channel && row.state == OutboxState::Pending)
            .map(|row| row.next_attempt_at)
            .min())
    }

    fn settle(&mut self, settlement: &Settlement, follow_ups: &[NewOutbox]) -> Result<(), Error> {
        self.check()?;
        let mut inner = self.lock();
        for id in &settlement.ids {
            let held_by_other = match (&settlement.owner, inner.claims.get(id)) {
                (Some(owner), Some((holder, _))) => holder != owner,
                _ => false,
            };
            if held_by_other {
                continue;
            }
            let settled = match inner.outbox.get_mut(id) {
                Some(row) if row.state == OutboxState::Pending => row,
                _ => continue,
            };
            {
                let row = settled;
                row.state = settlement.state;
                row.next_attempt_at = settlement.next_attempt_at;
                row.attempts += u32::from(settlement.attempted);
                row.last_error =
                    (settlement.state != OutboxState::Delivered).then(|| settlement.detail.clone());
                row.finished_at =
                    (settlement.state != OutboxState::Pending).then_some(settlement.at);
                if row.message_id.is_none() {
                    row.message_id = settlement.message_id.clone();
                }
            }
            inner.claims.remove(id);
        }
        for queued in follow_ups {
            inner
                .outbox
                .entry(queued.id.clone())
                .or_insert_with(|| pending_row(queued));
        }
        Ok(())
    }

    fn assign_message(&mut self, ids: &[String], message_id: &str) -> Result<(), Error> {
        self.check()?;
        let mut inner = self.lock();
        for id in ids {
            if let Some(row) = inner.outbox.get_mut(id) {
                if row.state == OutboxState::Pending && row.message_id.is_none() {
                    row.message_id = Some(message_id.to_string());
                }
            }
        }
        Ok(())
    }

    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error> {
        self.check()?;
        Ok(self.lock().outbox.values().any(|row| {
            row.queued.drift_id == drift_id
                && row.queued.channel == channel
                && row.queued.kind == "firing"
                && row.state == OutboxState::Pending
                && row.queued.created_at < created_at
        }))
    }

    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error> {
        self.check()?;
        let mut inner = self.lock();
        let mut count = 0;
        for row in inner.outbox.values_mut() {
            if row.state == OutboxState::Pending && !known.contains(&row.queued.channel) {
                row.state = OutboxState::Expired;
                row.finished_at = Some(now);
                row.last_error = Some("channel no longer configured".to_string());
                count += 1;
            }
        }
        Ok(count)
    }

    fn cancel_reminders(&mut self, drift_id: &str, channel: &str) -> Result<usize, Error> {
        self.check()?;
        let mut inner = self.lock();
        let before = inner.outbox.len();
        inner.outbox.retain(|_, row| {
            !(row.queued.drift_id == drift_id
                && row.queued.channel == channel
                && row.queued.kind == "repeat"
                && row.state == OutboxState::Pending)
        });
        Ok(before - inner.outbox.len())
    }

    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error> {
        self.check()?;
        Ok(self.lock().drifts.get(drift_id).map(|drift| drift.state))
    }

    fn stats(&mut self) -> Result<OutboxStats, Error> {
        self.check()?;
        let inner = self.lock();
        let mut stats = OutboxStats::default();
        for row in inner.outbox.values() {
            match row.state {
                OutboxState::Pending => {
                    stats.pending += 1;
                    stats.oldest_pending = Some(
                        stats
                            .oldest_pending
                            .map_or(row.queued.created_at, |oldest| {
                                oldest.min(row.queued.created_at)
                            }),
                    );
                }
                OutboxState::Rejected => stats.rejected += 1,
                OutboxState::Expired => stats.expired += 1,
                OutboxState::Delivered => {}
            }
        }
        Ok(stats)
    }

    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error> {
        self.check()?;
        let mut rows: Vec<OutboxRow> = self
            .lock()
            .outbox
            .values()
            .filter(|row| state.is_none_or(|wanted| row.state == wanted))
            .cloned()
            .collect();
        rows.sort_by_key(|row| std::cmp::Reverse(row.queued.created_at));
        rows.truncate(limit);
        Ok(rows)
    }
}
