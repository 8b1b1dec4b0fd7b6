//! An in-memory [`Store`] for tests: same contract as SQLite, and a switch that makes every write
//! fail so tests can prove that a store failure becomes a `503` and loses nothing.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{
    Batch, Error, EventKey, FollowUp, Lease, NewOutbox, Outbox, OutboxRow, OutboxState,
    OutboxStats, Settlement, SilenceChange, Snapshot, Store, StoredSilence,
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

/// True when `owner` may claim the row `id` at `now`: nobody holds it, `owner` does, or the
/// claim lapsed.
fn claimable(
    claims: &HashMap<String, (String, Millis)>,
    id: &str,
    owner: &str,
    now: Millis,
) -> bool {
    match claims.get(id) {
        None => true,
        Some((holder, until)) => holder == owner || *until <= now,
    }
}

/// Drops the claims of rows that no longer exist.
fn forget_claims_of_gone_rows(inner: &mut Inner) {
    let Inner { outbox, claims, .. } = inner;
    claims.retain(|id, _| outbox.contains_key(id));
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
        forget_claims_of_gone_rows(&mut inner);
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
        let removed = before - inner.drifts.len() - inner.outbox.len();
        forget_claims_of_gone_rows(&mut inner);
        Ok(removed)
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
    fn due(
        &mut self,
        channel: &str,
        now: Millis,
        limit: usize,
        owner: &str,
    ) -> Result<Vec<OutboxRow>, Error> {
        self.check()?;
        let inner = self.lock();
        let mut rows: Vec<OutboxRow> = inner
            .outbox
            .values()
            .filter(|row| {
                row.queued.channel == channel
                    && row.state == OutboxState::Pending
                    && row.next_attempt_at <= now
                    && claimable(&inner.claims, &row.queued.id, owner, now)
            })
            .cloned()
            .collect();
        rows.sort_by(|a, b| {
            (a.queued.created_at, &a.queued.id).cmp(&(b.queued.created_at, &b.queued.id))
        });
        rows.truncate(limit);
        Ok(rows)
    }

    fn next_due(&mut self, channel: &str, owner: &str) -> Result<Option<Millis>, Error> {
        self.check()?;
        let inner = self.lock();
        Ok(inner
            .outbox
            .values()
            .filter(|row| row.queued.channel == channel && row.state == OutboxState::Pending)
            .map(|row| match inner.claims.get(&row.queued.id) {
                Some((holder, until)) if holder != owner => row.next_attempt_at.max(*until),
                _ => row.next_attempt_at,
            })
            .min())
    }

    fn claim(
        &mut self,
        ids: &[String],
        message_id: &str,
        lease: &Lease,
        now: Millis,
    ) -> Result<Vec<String>, Error> {
        self.check()?;
        let mut inner = self.lock();
        let mut held = Vec::new();
        for id in ids {
            let pending = inner
                .outbox
                .get(id)
                .is_some_and(|row| row.state == OutboxState::Pending);
            if !pending || !claimable(&inner.claims, id, &lease.owner, now) {
                continue;
            }
            inner
                .claims
                .insert(id.clone(), (lease.owner.clone(), lease.until));
            if let Some(row) = inner.outbox.get_mut(id) {
                if row.message_id.is_none() {
                    row.message_id = Some(message_id.to_string());
                }
            }
            held.push(id.clone());
        }
        Ok(held)
    }

    fn settle(&mut self, settlement: &Settlement, follow_ups: &[FollowUp]) -> Result<(), Error> {
        self.check()?;
        let mut inner = self.lock();
        let mut settled = HashSet::new();
        for id in &settlement.ids {
            // An attempt settles only rows its owner holds; a decision taken without sending,
            // only rows no one else holds now.
            let owner = settlement.owner.as_deref();
            let allowed = match inner.claims.get(id) {
                Some((holder, _)) if Some(holder.as_str()) == owner => true,
                _ if settlement.attempted => false,
                Some((_, until)) => *until <= settlement.at,
                None => true,
            };
            if !allowed {
                continue;
            }
            let Some(row) = inner.outbox.get_mut(id) else {
                continue;
            };
            if row.state != OutboxState::Pending {
                continue;
            }
            row.state = settlement.state;
            row.next_attempt_at = settlement.next_attempt_at;
            row.attempts += u32::from(settlement.attempted);
            row.last_error =
                (settlement.state != OutboxState::Delivered).then(|| settlement.detail.clone());
            row.finished_at = (settlement.state != OutboxState::Pending).then_some(settlement.at);
            if row.message_id.is_none() {
                row.message_id = settlement.message_id.clone();
            }
            inner.claims.remove(id);
            settled.insert(id.clone());
        }
        for follow in follow_ups {
            if settled.contains(&follow.of) {
                inner
                    .outbox
                    .entry(follow.queued.id.clone())
                    .or_insert_with(|| pending_row(&follow.queued));
            }
        }
        Ok(())
    }

    fn release(&mut self, owner: &str) -> Result<usize, Error> {
        self.check()?;
        let mut inner = self.lock();
        let before = inner.claims.len();
        inner.claims.retain(|_, (holder, _)| holder != owner);
        Ok(before - inner.claims.len())
    }

    fn claim_owners(&mut self) -> Result<Vec<String>, Error> {
        self.check()?;
        let inner = self.lock();
        let owners: std::collections::BTreeSet<String> = inner
            .claims
            .values()
            .map(|(holder, _)| holder.clone())
            .collect();
        Ok(owners.into_iter().collect())
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
        let Inner { outbox, claims, .. } = &mut *inner;
        for row in outbox.values_mut() {
            let held = claims
                .get(&row.queued.id)
                .is_some_and(|(_, until)| *until > now);
            if row.state == OutboxState::Pending && !known.contains(&row.queued.channel) && !held {
                row.state = OutboxState::Expired;
                row.finished_at = Some(now);
                row.last_error = Some("channel no longer configured".to_string());
                count += 1;
            }
        }
        Ok(count)
    }

    fn cancel_reminders(
        &mut self,
        drift_id: &str,
        channel: &str,
        owner: &str,
        now: Millis,
    ) -> Result<usize, Error> {
        self.check()?;
        let mut inner = self.lock();
        let before = inner.outbox.len();
        let Inner { outbox, claims, .. } = &mut *inner;
        outbox.retain(|id, row| {
            !(row.queued.drift_id == drift_id
                && row.queued.channel == channel
                && row.queued.kind == "repeat"
                && row.state == OutboxState::Pending
                && claimable(claims, id, owner, now))
        });
        let removed = before - inner.outbox.len();
        forget_claims_of_gone_rows(&mut inner);
        Ok(removed)
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
