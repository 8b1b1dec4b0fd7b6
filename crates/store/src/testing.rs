//! A store for tests (feature `testing`): the SQLite store in a temporary file, which a test can
//! tell to fail, to block its commits, or to lose their answers, so it can prove that a store
//! failure becomes a `503` and loses nothing. Every role ([`Store`], [`Outbox`], [`AuditRead`]) is
//! the SQLite store's own, so what the tests see is what the service does; only the faults are
//! this module's. Its commits skip the fsync (the file need not outlive a power loss, only the
//! test).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use rusqlite::Connection;

use crate::sql::{decode, Row};
use crate::sqlite::{collect, AuditReader, SqliteOutbox, SqliteStore};
use crate::{
    AuditRead, Batch, Cursor, DayMoves, DeliveryView, DriftFilter, Due, Error, EventKey,
    FiringCount, FollowUp, HistoryEntry, Lease, ObjectLoader, ObjectRecord, Outbox, OutboxRow,
    OutboxState, OutboxStats, Settlement, Snapshot, Store, StoredSilence,
};
use drift_model::{Drift, DriftState, Millis};

/// The store's file in its directory.
const FILE: &str = "store.db";

/// The test store: clones share one store (one file, its connections and its switches), so a
/// test keeps a clone to steer and inspect what the service's parts hold.
#[derive(Clone)]
pub struct TestStore {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TestStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TestStore")
            .field("path", &self.shared.directory.path())
            .field("commits", &self.commit_count())
            .finish_non_exhaustive()
    }
}

struct Shared {
    writer: Mutex<SqliteStore>,
    outbox: Mutex<SqliteOutbox>,
    audit: AuditReader,
    /// What the inspection methods read through.
    inspect: Mutex<Connection>,
    failing: AtomicBool,
    /// What the next commits answer although they landed (`Some(true)`) or did not
    /// (`Some(false)`): a commit whose answer was lost.
    lost_answers: Mutex<Option<bool>>,
    gate: (Mutex<Gate>, Condvar),
    commits: AtomicUsize,
    /// Last: removed once every connection above is closed.
    directory: tempfile::TempDir,
}

/// The file of an empty store at the latest schema version, made once per process: a new test
/// store starts as a copy of it (a store created and migrated from nothing takes some 20 ms, a
/// copy well under one, and the router tests make hundreds).
fn template() -> Result<&'static [u8], Error> {
    static TEMPLATE: OnceLock<Vec<u8>> = OnceLock::new();
    if let Some(bytes) = TEMPLATE.get() {
        return Ok(bytes);
    }
    let directory = tempfile::Builder::new().prefix("ds-store").tempdir()?;
    let path = directory.path().join(FILE);
    // Closing its only connection checkpoints the write-ahead log into the file.
    drop(SqliteStore::open_without_fsync(&path)?);
    let bytes = std::fs::read(&path)?;
    Ok(TEMPLATE.get_or_init(|| bytes))
}

/// When `commit` waits.
#[derive(Debug, Default)]
struct Gate {
    /// Every commit waits.
    blocked: bool,
    /// Commits wait once this many have succeeded.
    block_at: Option<usize>,
}

/// A poisoned lock only means a test thread panicked; what it guards is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl TestStore {
    /// A new, empty store in a temporary directory of its own (removed with the last clone).
    pub fn new() -> TestStore {
        TestStore::open().unwrap_or_else(|error| panic!("the test store opens: {error}"))
    }

    fn open() -> Result<TestStore, Error> {
        let directory = tempfile::Builder::new().prefix("ds-store").tempdir()?;
        let path = directory.path().join(FILE);
        std::fs::write(&path, template()?)?;
        let writer = SqliteStore::open_without_fsync(&path)?;
        let outbox = SqliteOutbox::open(&path)?;
        outbox.skip_fsync()?;
        let audit = AuditReader::open(&path)?;
        let inspect = Connection::open(&path)?;
        inspect.pragma_update(None, "query_only", true)?;
        Ok(TestStore {
            shared: Arc::new(Shared {
                writer: Mutex::new(writer),
                outbox: Mutex::new(outbox),
                audit,
                inspect: Mutex::new(inspect),
                failing: AtomicBool::new(false),
                lost_answers: Mutex::new(None),
                gate: (Mutex::new(Gate::default()), Condvar::new()),
                commits: AtomicUsize::new(0),
                directory,
            }),
        })
    }

    /// Makes every later commit answer "outcome unknown": `Some(true)` after landing,
    /// `Some(false)` without landing; `None` answers truly again.
    pub fn set_lost_commit_answers(&self, landed: Option<bool>) {
        *lock(&self.shared.lost_answers) = landed;
    }

    /// Makes every later call fail (or succeed again).
    pub fn set_failing(&self, failing: bool) {
        self.shared.failing.store(failing, Ordering::SeqCst);
    }

    /// While blocked, `commit` waits: tests use it to fill the writer's queue.
    pub fn set_blocked(&self, blocked: bool) {
        let (gate, condvar) = &self.shared.gate;
        lock(gate).blocked = blocked;
        condvar.notify_all();
    }

    /// Commits wait once `count` commits have succeeded (`None`: no such limit), so a test can
    /// hold one particular round in its commit.
    pub fn set_block_at(&self, count: Option<usize>) {
        let (gate, condvar) = &self.shared.gate;
        lock(gate).block_at = count;
        condvar.notify_all();
    }

    /// The store's file (tests that tamper with it).
    pub fn path(&self) -> std::path::PathBuf {
        self.shared.directory.path().join(FILE)
    }

    /// Number of committed event keys.
    pub fn event_count(&self) -> usize {
        let count = self.inspect(|connection| {
            Ok(
                connection.query_row("SELECT COUNT(*) FROM events", [], |row| {
                    row.get::<_, i64>(0)
                })?,
            )
        });
        usize::try_from(count).unwrap_or(0)
    }

    /// Number of successful commits.
    pub fn commit_count(&self) -> usize {
        self.shared.commits.load(Ordering::SeqCst)
    }

    /// Committed objects.
    pub fn objects(&self) -> Vec<ObjectRecord> {
        self.inspect(|connection| {
            let mut statement = connection
                .prepare("SELECT cluster, uid, kind, namespace, name, body FROM objects")?;
            collect(&mut statement, [], |row| {
                Ok(ObjectRecord {
                    cluster: row.text(0)?.to_string(),
                    uid: row.text(1)?.to_string(),
                    kind: row.text(2)?.to_string(),
                    namespace: row.text(3)?.to_string(),
                    name: row.text(4)?.to_string(),
                    body: row.text(5)?.to_string(),
                })
            })
        })
    }

    /// Committed drifts (all states).
    pub fn drifts(&self) -> Vec<Drift> {
        self.inspect(|connection| {
            let mut statement = connection.prepare("SELECT body FROM drifts")?;
            collect(&mut statement, [], |row| decode::drift(row, 0))
        })
    }

    /// What `read` answers on the inspection connection; a test whose store cannot answer
    /// fails.
    fn inspect<T>(&self, read: impl FnOnce(&Connection) -> Result<T, Error>) -> T {
        read(&lock(&self.shared.inspect))
            .unwrap_or_else(|error| panic!("the test store answers: {error}"))
    }

    fn check(&self) -> Result<(), Error> {
        if self.shared.failing.load(Ordering::SeqCst) {
            Err(Error::Unavailable("test store set to fail".to_string()))
        } else {
            Ok(())
        }
    }

    /// The writer's store, when the store is not set to fail.
    fn writer(&self) -> Result<MutexGuard<'_, SqliteStore>, Error> {
        self.check()?;
        Ok(lock(&self.shared.writer))
    }

    /// The relays' outbox, when the store is not set to fail.
    fn outbox(&self) -> Result<MutexGuard<'_, SqliteOutbox>, Error> {
        self.check()?;
        Ok(lock(&self.shared.outbox))
    }

    /// The audit reader, when the store is not set to fail.
    fn audit(&self) -> Result<&AuditReader, Error> {
        self.check()?;
        Ok(&self.shared.audit)
    }

    /// Waits while commits are blocked.
    fn pass_gate(&self) {
        let (gate, condvar) = &self.shared.gate;
        let mut gate = lock(gate);
        while gate.blocked
            || gate
                .block_at
                .is_some_and(|count| self.commit_count() >= count)
        {
            gate = condvar
                .wait(gate)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl Default for TestStore {
    fn default() -> TestStore {
        TestStore::new()
    }
}

impl Store for TestStore {
    fn load(&mut self, objects: &mut ObjectLoader<'_>) -> Result<Snapshot, Error> {
        self.writer()?.load(objects)
    }

    fn silences(&mut self) -> Result<Vec<StoredSilence>, Error> {
        self.writer()?.silences()
    }

    fn remediation_outcome(
        &mut self,
        seq: i64,
    ) -> Result<Option<drift_model::remediation::Outcome>, Error> {
        self.writer()?.remediation_outcome(seq)
    }

    fn is_duplicate(&mut self, key: &EventKey) -> Result<bool, Error> {
        self.writer()?.is_duplicate(key)
    }

    fn duplicates(&mut self, keys: &[EventKey]) -> Result<HashSet<EventKey>, Error> {
        self.writer()?.duplicates(keys)
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        self.pass_gate();
        let mut writer = self.writer()?;
        let lost = *lock(&self.shared.lost_answers);
        if lost == Some(false) {
            return Err(Error::CommitUnknown(
                "the answer was lost (test)".to_string(),
            ));
        }
        writer.commit(batch)?;
        self.shared.commits.fetch_add(1, Ordering::SeqCst);
        if lost == Some(true) {
            return Err(Error::CommitUnknown(
                "the answer was lost (test)".to_string(),
            ));
        }
        Ok(())
    }

    fn heartbeat(&mut self, now: Millis) -> Result<(), Error> {
        self.writer()?.heartbeat(now)
    }

    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, Error> {
        self.writer()?.prune_events(cutoff)
    }

    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, Error> {
        self.writer()?.prune_audit(cutoff)
    }
}

impl Outbox for TestStore {
    fn due(&mut self, channel: &str, now: Millis, limit: usize, owner: &str) -> Result<Due, Error> {
        self.outbox()?.due(channel, now, limit, owner)
    }

    fn next_due(&mut self, channel: &str, owner: &str) -> Result<Option<Millis>, Error> {
        self.outbox()?.next_due(channel, owner)
    }

    fn claim(
        &mut self,
        ids: &[String],
        message_id: &str,
        lease: &Lease,
        now: Millis,
    ) -> Result<Vec<String>, Error> {
        self.outbox()?.claim(ids, message_id, lease, now)
    }

    fn settle(&mut self, settlement: &Settlement, follow_ups: &[FollowUp]) -> Result<(), Error> {
        self.outbox()?.settle(settlement, follow_ups)
    }

    fn release(&mut self, owner: &str) -> Result<usize, Error> {
        self.outbox()?.release(owner)
    }

    fn claim_owners(&mut self) -> Result<Vec<String>, Error> {
        self.outbox()?.claim_owners()
    }

    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error> {
        self.outbox()?
            .firing_pending_before(drift_id, channel, created_at)
    }

    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error> {
        self.outbox()?.expire_unknown_channels(known, now)
    }

    fn cancel_reminders(
        &mut self,
        drift_id: &str,
        channel: &str,
        owner: &str,
        now: Millis,
        sending: Option<&str>,
    ) -> Result<usize, Error> {
        self.outbox()?
            .cancel_reminders(drift_id, channel, owner, now, sending)
    }

    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error> {
        self.outbox()?.drift_state(drift_id)
    }

    fn stats(&mut self) -> Result<OutboxStats, Error> {
        self.outbox()?.stats()
    }

    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error> {
        self.outbox()?.rows(state, limit)
    }
}

impl AuditRead for TestStore {
    fn drifts(&self, filter: &DriftFilter) -> Result<(Vec<Drift>, Option<Cursor>), Error> {
        self.audit()?.drifts(filter)
    }

    fn drift(&self, id: &str) -> Result<Option<Drift>, Error> {
        self.audit()?.drift(id)
    }

    fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error> {
        self.audit()?.history(id)
    }

    fn remediations(&self, id: &str) -> Result<Vec<drift_model::remediation::Attempt>, Error> {
        self.audit()?.remediations(id)
    }

    fn remediations_by_outcome(
        &self,
        outcome: drift_model::remediation::Outcome,
        cluster: &str,
        limit: usize,
    ) -> Result<Vec<(i64, drift_model::remediation::Attempt)>, Error> {
        self.audit()?
            .remediations_by_outcome(outcome, cluster, limit)
    }

    fn deliveries_of(&self, drift_id: &str) -> Result<Vec<DeliveryView>, Error> {
        self.audit()?.deliveries_of(drift_id)
    }

    fn deliveries(
        &self,
        state: Option<OutboxState>,
        channel: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryView>, Error> {
        self.audit()?.deliveries(state, channel, limit)
    }

    fn silences(&self) -> Result<Vec<StoredSilence>, Error> {
        self.audit()?.silences()
    }

    fn silences_page(
        &self,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<StoredSilence>, Option<Cursor>), Error> {
        self.audit()?.silences_page(after, limit)
    }

    fn resolved_since(
        &self,
        since: Millis,
        groups: Option<&[String]>,
    ) -> Result<Vec<Drift>, Error> {
        self.audit()?.resolved_since(since, groups)
    }

    fn firing_counts(&self) -> Result<Vec<FiringCount>, Error> {
        self.audit()?.firing_counts()
    }

    fn moves_per_day(&self, start: Millis, days: usize) -> Result<Vec<DayMoves>, Error> {
        self.audit()?.moves_per_day(start, days)
    }

    fn open_drifts(&self, groups: Option<&[String]>) -> Result<Vec<Drift>, Error> {
        self.audit()?.open_drifts(groups)
    }
}

#[cfg(test)]
mod tests;
