//! An in-memory [`Store`] for tests: same contract as SQLite, and a switch that makes every write
//! fail so tests can prove that a store failure becomes a `503` and loses nothing. It answers the
//! audit queries ([`AuditRead`]) as SQLite does (`tests/it/store_contract.rs` holds them to the
//! same answers), except that it keeps no delivery attempt log.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::audit::dense_days;
use super::{
    AuditRead, Batch, Cursor, DayMoves, DeliveryView, DriftFilter, Error, EventKey, FiringCount,
    FollowUp, HistoryEntry, Lease, NewOutbox, ObjectLoader, ObjectRecord, Outbox, OutboxRow,
    OutboxState, OutboxStats, Settlement, SilenceChange, Snapshot, Store, StoredSilence,
    DAY_MILLIS,
};
use drift_model::group::api_group;
use drift_model::{Drift, DriftState, Millis, ObjectKey};

/// The in-memory store.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    inner: Arc<std::sync::Mutex<Inner>>,
    failing: Arc<AtomicBool>,
    /// What the next commits answer although they landed (`Some(true)`) or did not
    /// (`Some(false)`): a commit whose answer was lost.
    lost_answers: Arc<std::sync::Mutex<Option<bool>>>,
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
    objects: HashMap<ObjectKey, ObjectRecord>,
    drifts: HashMap<String, Drift>,
    /// Every recorded move: (drift id, the move), in commit order.
    history: Vec<(String, HistoryEntry)>,
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
        claimed_by: None,
    }
}

impl MemoryStore {
    /// A new, empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Makes every later commit answer "outcome unknown": `Some(true)` after landing,
    /// `Some(false)` without landing; `None` answers truly again.
    pub fn set_lost_commit_answers(&self, landed: Option<bool>) {
        *self
            .lost_answers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = landed;
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
    pub fn objects(&self) -> Vec<ObjectRecord> {
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
    fn load(&mut self, objects: &mut ObjectLoader<'_>) -> Result<Snapshot, Error> {
        self.check()?;
        let inner = self.lock();
        for object in inner.objects.values() {
            objects(&object.cluster, &object.body).map_err(|source| Error::Corrupt {
                table: "objects",
                source,
            })?;
        }
        Ok(Snapshot {
            silences: inner.silences.clone(),
            drifts: inner
                .drifts
                .values()
                .filter(|drift| drift.state != DriftState::Resolved)
                .cloned()
                .collect(),
        })
    }

    fn silences(&mut self) -> Result<Vec<StoredSilence>, Error> {
        self.check()?;
        Ok(self.lock().silences.clone())
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
        let lost = *self
            .lost_answers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if lost == Some(false) {
            return Err(Error::CommitUnknown(
                "the answer was lost (test)".to_string(),
            ));
        }
        let mut inner = self.lock();
        let mut seen = HashSet::new();
        for (key, at) in &batch.events {
            if seen.insert(key.clone()) {
                inner.events.entry(key.clone()).or_insert(*at);
            }
        }
        for object in &batch.objects {
            let key = ObjectKey {
                cluster: object.cluster.clone(),
                uid: object.uid.clone(),
            };
            inner.objects.insert(key, object.clone());
        }
        for key in &batch.removed_objects {
            inner.objects.remove(key);
        }
        for drift in &batch.drifts {
            inner.drifts.insert(drift.id.clone(), drift.clone());
        }
        for transition in &batch.history {
            inner.history.push((
                transition.drift.id.clone(),
                HistoryEntry {
                    from: transition.from.map(|state| state.as_str().to_string()),
                    to: transition.drift.state.as_str().to_string(),
                    at: transition.at,
                    evidence: Some(transition.drift.evidence.clone()),
                },
            ));
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
        if lost == Some(true) {
            return Err(Error::CommitUnknown(
                "the answer was lost (test)".to_string(),
            ));
        }
        Ok(())
    }

    fn heartbeat(&mut self, _now: Millis) -> Result<(), Error> {
        self.check()
    }

    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, Error> {
        self.check()?;
        let mut inner = self.lock();
        let before = inner.drifts.len() + inner.history.len() + inner.outbox.len();
        // Resolved drifts past retention go with their history.
        let gone: HashSet<String> = inner
            .drifts
            .values()
            .filter(|drift| {
                drift.state == DriftState::Resolved
                    && drift.resolved_at.is_some_and(|at| at < cutoff)
            })
            .map(|drift| drift.id.clone())
            .collect();
        inner.drifts.retain(|id, _| !gone.contains(id));
        inner
            .history
            .retain(|(drift_id, _)| !gone.contains(drift_id));
        inner.outbox.retain(|_, row| {
            !(row.state != OutboxState::Pending && row.finished_at.is_some_and(|at| at < cutoff))
        });
        let removed = before - inner.drifts.len() - inner.history.len() - inner.outbox.len();
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
            .map(|row| OutboxRow {
                claimed_by: inner.claims.get(&row.queued.id).map(|(by, _)| by.clone()),
                ..row.clone()
            })
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
                row.last_error = Some(super::outbox::ORPHANED.to_string());
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

/// True when `drift` passes `filter` (all but the page), as SQLite's query decides.
fn matches(drift: &Drift, filter: &DriftFilter) -> bool {
    let state = drift.state.as_str();
    let state_ok = match filter.state.as_deref() {
        None => true,
        Some("open") => state == "pending" || state == "firing",
        Some(wanted) => state == wanted,
    };
    let equal = |wanted: &Option<String>, value: &str| wanted.as_deref().is_none_or(|w| w == value);
    state_ok
        && equal(&filter.class, &drift.class)
        && equal(&filter.severity, drift.severity.as_str())
        && equal(&filter.cluster, &drift.cluster)
        && equal(&filter.namespace, &drift.namespace)
        && filter.groups.as_ref().is_none_or(|groups| {
            groups
                .iter()
                .any(|group| group == api_group(&drift.api_version))
        })
        && filter.since.is_none_or(|since| {
            drift
                .since
                .max(drift.fired_at.unwrap_or(0))
                .max(drift.resolved_at.unwrap_or(0))
                >= since
        })
        && filter.cursor.as_ref().is_none_or(|(since, id)| {
            drift.since < *since || (drift.since == *since && drift.id > *id)
        })
}

fn delivery_view(row: &OutboxRow) -> DeliveryView {
    DeliveryView {
        id: row.queued.id.clone(),
        channel: row.queued.channel.clone(),
        drift_id: row.queued.drift_id.clone(),
        kind: row.queued.kind.clone(),
        state: row.state.as_str().to_string(),
        attempts: row.attempts,
        last_error: row.last_error.clone(),
        created_at: row.queued.created_at,
        next_attempt_at: row.next_attempt_at,
        finished_at: row.finished_at,
        // Attempts are not kept in memory.
        attempt_log: Vec::new(),
    }
}

impl AuditRead for MemoryStore {
    fn drifts(&self, filter: &DriftFilter) -> Result<(Vec<Drift>, Option<Cursor>), Error> {
        self.check()?;
        let inner = self.lock();
        let mut found: Vec<&Drift> = inner
            .drifts
            .values()
            .filter(|drift| matches(drift, filter))
            .collect();
        found.sort_by(|a, b| b.since.cmp(&a.since).then_with(|| a.id.cmp(&b.id)));
        let limit = filter.limit.clamp(1, 500);
        let next =
            (found.len() > limit).then(|| (found[limit - 1].since, found[limit - 1].id.clone()));
        Ok((found.into_iter().take(limit).cloned().collect(), next))
    }

    fn drift(&self, id: &str) -> Result<Option<Drift>, Error> {
        self.check()?;
        Ok(self.lock().drifts.get(id).cloned())
    }

    fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error> {
        self.check()?;
        Ok(self
            .lock()
            .history
            .iter()
            .filter(|(drift_id, _)| drift_id == id)
            .map(|(_, entry)| entry.clone())
            .collect())
    }

    fn deliveries_of(&self, drift_id: &str) -> Result<Vec<DeliveryView>, Error> {
        self.check()?;
        let inner = self.lock();
        let mut rows: Vec<&OutboxRow> = inner
            .outbox
            .values()
            .filter(|row| row.queued.drift_id == drift_id)
            .collect();
        rows.sort_by(|a, b| {
            (a.queued.created_at, &a.queued.id).cmp(&(b.queued.created_at, &b.queued.id))
        });
        Ok(rows.into_iter().map(delivery_view).collect())
    }

    fn deliveries(
        &self,
        state: Option<OutboxState>,
        channel: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryView>, Error> {
        self.check()?;
        let inner = self.lock();
        let mut rows: Vec<&OutboxRow> = inner
            .outbox
            .values()
            .filter(|row| state.is_none_or(|wanted| row.state == wanted))
            .filter(|row| channel.is_none_or(|wanted| row.queued.channel == wanted))
            .collect();
        rows.sort_by(|a, b| {
            b.queued
                .created_at
                .cmp(&a.queued.created_at)
                .then_with(|| a.queued.id.cmp(&b.queued.id))
        });
        rows.truncate(limit.clamp(1, 1000));
        Ok(rows.into_iter().map(delivery_view).collect())
    }

    fn silences(&self) -> Result<Vec<StoredSilence>, Error> {
        self.check()?;
        let mut silences = self.lock().silences.clone();
        silences.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(silences)
    }

    fn resolved_since(
        &self,
        since: Millis,
        groups: Option<&[String]>,
    ) -> Result<Vec<Drift>, Error> {
        self.check()?;
        let inner = self.lock();
        let mut found: Vec<&Drift> = inner
            .drifts
            .values()
            .filter(|drift| {
                drift.state == DriftState::Resolved
                    && drift.fired_at.is_some()
                    && drift.resolved_at.is_some_and(|at| at >= since)
                    && groups.is_none_or(|groups| {
                        groups
                            .iter()
                            .any(|group| group == api_group(&drift.api_version))
                    })
            })
            .collect();
        found.sort_by(|a, b| {
            b.resolved_at
                .cmp(&a.resolved_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(found.into_iter().take(5000).cloned().collect())
    }

    fn firing_counts(&self) -> Result<Vec<FiringCount>, Error> {
        self.check()?;
        let inner = self.lock();
        let mut counts: std::collections::BTreeMap<(String, String, String), u64> =
            std::collections::BTreeMap::new();
        for drift in inner.drifts.values() {
            if drift.state == DriftState::Firing {
                *counts
                    .entry((
                        drift.severity.as_str().to_string(),
                        api_group(&drift.api_version).to_string(),
                        drift.namespace.clone(),
                    ))
                    .or_insert(0) += 1;
            }
        }
        Ok(counts
            .into_iter()
            .map(|((severity, group, namespace), count)| FiringCount {
                severity,
                group,
                namespace,
                count,
            })
            .collect())
    }

    fn moves_per_day(&self, start: Millis, days: usize) -> Result<Vec<DayMoves>, Error> {
        self.check()?;
        let inner = self.lock();
        let counted = inner.history.iter().filter_map(|(_, entry)| {
            let fired = entry.to == "firing" && entry.from.as_deref() != Some("firing");
            let resolved = entry.to == "resolved" && entry.from.as_deref() == Some("firing");
            (entry.at >= start && (fired || resolved)).then(|| {
                (
                    (entry.at - start) / DAY_MILLIS,
                    u64::from(fired),
                    u64::from(resolved),
                )
            })
        });
        Ok(dense_days(start, days, counted))
    }
}
