//! The embedded store: one SQLite file in WAL mode with `synchronous=FULL`, so a committed batch
//! survives a process crash and a power loss. Group commit (many events per transaction, done by
//! the pipeline's single writer) keeps the fsync cost per event small.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use super::{
    Batch, Error, EventKey, NewOutbox, Outbox, OutboxRow, OutboxState, OutboxStats, Settlement,
    Snapshot, Store, StoredSilence,
};
use crate::classify::ObjectState;
use crate::model::{Drift, DriftState, Millis};

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS events (
    source TEXT NOT NULL,
    id TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    PRIMARY KEY (source, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_received ON events (received_at);
CREATE TABLE IF NOT EXISTS objects (
    cluster TEXT NOT NULL,
    uid TEXT NOT NULL,
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (cluster, uid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS drifts (
    id TEXT PRIMARY KEY,
    class TEXT NOT NULL,
    state TEXT NOT NULL,
    severity TEXT NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    uid TEXT NOT NULL,
    since INTEGER NOT NULL,
    fired_at INTEGER,
    resolved_at INTEGER,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS drifts_state ON drifts (state);
CREATE TABLE IF NOT EXISTS drift_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    drift_id TEXT NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    at INTEGER NOT NULL,
    evidence TEXT
);
CREATE TABLE IF NOT EXISTS silences (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS drift_history_drift ON drift_history (drift_id);
CREATE TABLE IF NOT EXISTS outbox (
    id TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    drift_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    group_key TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    not_before INTEGER NOT NULL,
    repeat_after_ms INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    last_error TEXT,
    finished_at INTEGER,
    message_id TEXT
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (channel, state, next_attempt_at);
CREATE INDEX IF NOT EXISTS outbox_state ON outbox (state);
CREATE INDEX IF NOT EXISTS outbox_drift ON outbox (drift_id);
CREATE TABLE IF NOT EXISTS delivery_attempts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    outbox_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL,
    duration_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS delivery_attempts_outbox ON delivery_attempts (outbox_id);
CREATE TABLE IF NOT EXISTS heartbeat (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL
);
"#;

/// The SQLite store.
pub struct SqliteStore {
    connection: Connection,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file.
    pub fn open(path: &Path) -> Result<SqliteStore, Error> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)?;
            }
        }
        let mut connection = Connection::open(path)?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        wait_briefly_when_busy(&mut connection)?;
        connection.pragma_update(None, "foreign_keys", "ON")?;
        // 32 MiB of page cache for the writer (SQLite's default is 2 MiB): the duplicate check
        // and the inserts touch the `events` and `objects` B-trees at random keys, which would
        // otherwise be read back from the OS on every commit.
        connection.pragma_update(None, "cache_size", -32768)?;
        // Checkpoints run on their own thread ([`Checkpointer`]), so a commit never waits for
        // one; this high threshold only makes the writer checkpoint itself if that thread
        // falls far behind (SQLite's default is 1,000 pages).
        connection.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT_PAGES)?;
        // After a checkpoint the WAL file is cut back to this size instead of staying at its
        // largest.
        connection.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT_BYTES)?;
        connection.execute_batch(SCHEMA)?;
        Ok(SqliteStore { connection })
    }

    /// Counts rows of a table (diagnostics and tests).
    pub fn count(&self, table: &str) -> Result<i64, Error> {
        let allowed = [
            "events",
            "objects",
            "drifts",
            "drift_history",
            "outbox",
            "delivery_attempts",
        ];
        if !allowed.contains(&table) {
            return Err(Error::Unavailable(format!("unknown table {table}")));
        }
        Ok(self
            .connection
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
                row.get(0)
            })?)
    }
}

fn to_json<T: serde::Serialize>(value: &T, table: &'static str) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|source| Error::Corrupt { table, source })
}

impl Store for SqliteStore {
    fn load(&mut self) -> Result<Snapshot, Error> {
        let mut snapshot = Snapshot::default();
        let mut statement = self.connection.prepare("SELECT body FROM objects")?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        for row in rows {
            let body = row?;
            let object: ObjectState =
                serde_json::from_str(&body).map_err(|source| Error::Corrupt {
                    table: "objects",
                    source,
                })?;
            snapshot.objects.push(object);
        }
        snapshot.silences = read_silences(&self.connection)?;
        let mut statement = self
            .connection
            .prepare("SELECT body FROM drifts WHERE state != 'resolved'")?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        for row in rows {
            let body = row?;
            let drift: Drift = serde_json::from_str(&body).map_err(|source| Error::Corrupt {
                table: "drifts",
                source,
            })?;
            snapshot.drifts.push(drift);
        }
        Ok(snapshot)
    }

    fn is_duplicate(&mut self, key: &EventKey) -> Result<bool, Error> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT 1 FROM events WHERE source = ?1 AND id = ?2")?;
        Ok(statement
            .query_row(params![key.source, key.id], |_| Ok(()))
            .optional()?
            .is_some())
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        let transaction = self.connection.transaction()?;
        {
            let mut insert_event = transaction.prepare_cached(
                "INSERT OR IGNORE INTO events (source, id, received_at) VALUES (?1, ?2, ?3)",
            )?;
            for (key, received_at) in &batch.events {
                insert_event.execute(params![key.source, key.id, received_at])?;
            }
            let mut upsert_object = transaction.prepare_cached(
                "INSERT INTO objects (cluster, uid, kind, namespace, name, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (cluster, uid) DO UPDATE SET kind = excluded.kind, namespace = excluded.namespace,
                 name = excluded.name, body = excluded.body",
            )?;
            for object in &batch.changes.objects {
                upsert_object.execute(params![
                    object.cluster,
                    object.uid,
                    object.kind,
                    object.namespace,
                    object.name,
                    to_json(object, "objects")?
                ])?;
            }
            let mut delete_object = transaction
                .prepare_cached("DELETE FROM objects WHERE cluster = ?1 AND uid = ?2")?;
            for key in &batch.changes.removed_objects {
                delete_object.execute(params![key.cluster, key.uid])?;
            }
            let mut upsert_drift = transaction.prepare_cached(
                "INSERT INTO drifts (id, class, state, severity, cluster, namespace, kind, name, uid, since, fired_at, resolved_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, severity = excluded.severity,
                 fired_at = excluded.fired_at, resolved_at = excluded.resolved_at, body = excluded.body",
            )?;
            for drift in &batch.changes.drifts {
                upsert_drift.execute(params![
                    drift.id,
                    drift.class,
                    drift.state.as_str(),
                    drift.severity.as_str(),
                    drift.cluster,
                    drift.namespace,
                    drift.kind,
                    drift.name,
                    drift.uid,
                    drift.since,
                    drift.fired_at,
                    drift.resolved_at,
                    to_json(drift, "drifts")?
                ])?;
            }
            let mut insert_history = transaction.prepare_cached(
                "INSERT INTO drift_history (drift_id, from_state, to_state, at, evidence) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for transition in &batch.changes.history {
                insert_history.execute(params![
                    transition.drift.id,
                    transition.from.map(|state| state.as_str()),
                    transition.drift.state.as_str(),
                    transition.at,
                    to_json(&transition.drift.evidence, "drift_history")?
                ])?;
            }
            insert_outbox(&transaction, &batch.outbox)?;
            let mut cancel = transaction.prepare_cached(
                "DELETE FROM outbox WHERE drift_id = ?1 AND kind = 'repeat' AND state = 'pending'",
            )?;
            for drift_id in &batch.cancel_reminders {
                cancel.execute(params![drift_id])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    fn heartbeat(&mut self, now: Millis) -> Result<(), Error> {
        self.connection.execute(
            "INSERT INTO heartbeat (id, at) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET at = excluded.at",
            params![now],
        )?;
        Ok(())
    }

    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, Error> {
        Ok(self
            .connection
            .execute("DELETE FROM events WHERE received_at < ?1", params![cutoff])?)
    }

    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, Error> {
        let transaction = self.connection.transaction()?;
        let mut removed = transaction.execute(
            "DELETE FROM drift_history WHERE drift_id IN (SELECT id FROM drifts WHERE state = 'resolved' AND resolved_at < ?1)",
            params![cutoff],
        )?;
        removed += transaction.execute(
            "DELETE FROM drifts WHERE state = 'resolved' AND resolved_at < ?1",
            params![cutoff],
        )?;
        removed += transaction.execute(
            "DELETE FROM delivery_attempts WHERE outbox_id IN (SELECT id FROM outbox WHERE state != 'pending' AND finished_at < ?1)",
            params![cutoff],
        )?;
        removed += transaction.execute(
            "DELETE FROM outbox WHERE state != 'pending' AND finished_at < ?1",
            params![cutoff],
        )?;
        transaction.commit()?;
        Ok(removed)
    }
}

fn read_silences(connection: &Connection) -> Result<Vec<StoredSilence>, Error> {
    let mut statement =
        connection.prepare("SELECT id, body, created_at FROM silences ORDER BY created_at, id")?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, Millis>(2)?,
        ))
    })?;
    let mut silences = Vec::new();
    for row in rows {
        let (id, body, created_at) = row?;
        let row: super::rows::SilenceRow =
            serde_json::from_str(&body).map_err(|source| Error::Corrupt {
                table: "silences",
                source,
            })?;
        silences.push(StoredSilence {
            id,
            silence: row.into(),
            created_at,
        });
    }
    Ok(silences)
}

fn insert_outbox(connection: &Connection, rows: &[NewOutbox]) -> Result<(), Error> {
    let mut insert = connection.prepare_cached(
        "INSERT OR IGNORE INTO outbox (id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, next_attempt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?8)",
    )?;
    for row in rows {
        insert.execute(params![
            row.id,
            row.channel,
            row.drift_id,
            row.kind,
            row.group_key,
            row.payload,
            row.created_at,
            row.not_before,
            row.repeat_after_ms
        ])?;
    }
    Ok(())
}

const OUTBOX_COLUMNS: &str = "id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, attempts, next_attempt_at, state, last_error, finished_at, message_id";

fn outbox_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    let state: String = row.get(11)?;
    Ok(OutboxRow {
        queued: NewOutbox {
            id: row.get(0)?,
            channel: row.get(1)?,
            drift_id: row.get(2)?,
            kind: row.get(3)?,
            group_key: row.get(4)?,
            payload: row.get(5)?,
            created_at: row.get(6)?,
            not_before: row.get(7)?,
            repeat_after_ms: row.get(8)?,
        },
        attempts: row.get(9)?,
        next_attempt_at: row.get(10)?,
        state: OutboxState::parse(&state).unwrap_or(OutboxState::Pending),
        last_error: row.get(12)?,
        finished_at: row.get(13)?,
        message_id: row.get(14)?,
    })
}

/// How long a connection waits for another one's write lock before giving up.
const BUSY_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long it sleeps between two tries.
const BUSY_STEP: std::time::Duration = std::time::Duration::from_micros(100);

/// Makes `connection` retry every 100 µs while another connection holds the write lock (the
/// writer and the relays take turns), for up to five seconds. SQLite's `busy_timeout` sleeps 1,
/// 2, 5, 10, 15, 20, 25 ms and more between tries, so the writer, waiting for a relay's
/// sub-millisecond settlement, often slept ten times longer than the wait, and that put tens of
/// milliseconds into the answer of every request in the round.
fn wait_briefly_when_busy(connection: &mut Connection) -> Result<(), Error> {
    let tries = u32::try_from(BUSY_LIMIT.as_micros() / BUSY_STEP.as_micros()).unwrap_or(u32::MAX);
    connection.busy_handler(Some(move |count: i32| {
        if u32::try_from(count).unwrap_or(u32::MAX) >= tries {
            return false;
        }
        std::thread::sleep(BUSY_STEP);
        true
    }))?;
    Ok(())
}

/// WAL pages after which a committing connection checkpoints by itself (the safety valve).
const WRITER_AUTOCHECKPOINT_PAGES: i64 = 16_384;
/// Size the WAL file is truncated to after a checkpoint.
const WAL_SIZE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;
/// Time between background checkpoints.
const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Copies committed WAL pages into the database file on its own thread and connection
/// (`PRAGMA wal_checkpoint(PASSIVE)`, which never blocks the writer or readers). With SQLite's
/// default, the connection whose commit crosses 1,000 WAL pages does the checkpoint inside that
/// commit, which put tens of milliseconds into one request in every hundred or so under load.
/// Stops when dropped.
pub struct Checkpointer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path` (the store must exist).
    pub fn start(path: &Path) -> Result<Checkpointer, Error> {
        let connection = Connection::open(path)?;
        connection.pragma_update(None, "busy_timeout", 5000)?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("drift-checkpoint".to_string())
            .spawn(move || {
                let mut failing = false;
                while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(CHECKPOINT_INTERVAL);
                    let result =
                        connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                            row.get::<_, i64>(0)
                        });
                    match result {
                        Ok(_) => failing = false,
                        Err(error) => {
                            // The writer's own autocheckpoint still bounds the WAL meanwhile.
                            if !failing {
                                tracing::warn!(message = "Background checkpoint failed.", %error);
                            }
                            failing = true;
                        }
                    }
                }
            })?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The delivery side of the SQLite store, on its own connection (WAL lets it read while the
/// writer commits; SQLite serializes the two writers with `busy_timeout`).
pub struct SqliteOutbox {
    connection: Connection,
}

impl SqliteOutbox {
    /// Opens the outbox on an existing store file.
    pub fn open(path: &Path) -> Result<SqliteOutbox, Error> {
        // Opening the store first creates the schema if this runs before the writer.
        drop(SqliteStore::open(path)?);
        let mut connection = Connection::open(path)?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        wait_briefly_when_busy(&mut connection)?;
        connection.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT_PAGES)?;
        Ok(SqliteOutbox { connection })
    }
}

impl Outbox for SqliteOutbox {
    fn due(&mut self, channel: &str, now: Millis, limit: usize) -> Result<Vec<OutboxRow>, Error> {
        let mut statement = self.connection.prepare_cached(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE channel = ?1 AND state = 'pending'
             AND next_attempt_at <= ?2 ORDER BY created_at, id LIMIT ?3"
        ))?;
        let rows = statement.query_map(params![channel, now, limit as i64], outbox_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn next_due(&mut self, channel: &str) -> Result<Option<Millis>, Error> {
        Ok(self.connection.query_row(
            "SELECT MIN(next_attempt_at) FROM outbox WHERE channel = ?1 AND state = 'pending'",
            params![channel],
            |row| row.get(0),
        )?)
    }

    fn settle(&mut self, settlement: &Settlement, follow_ups: &[NewOutbox]) -> Result<(), Error> {
        let transaction = self.connection.transaction()?;
        {
            let finished = (settlement.state != OutboxState::Pending).then_some(settlement.at);
            let mut update = transaction.prepare_cached(
                "UPDATE outbox SET state = ?2, next_attempt_at = ?3, attempts = attempts + ?4,
                 last_error = ?5, finished_at = ?6, message_id = COALESCE(message_id, ?7)
                 WHERE id = ?1 AND state = 'pending'",
            )?;
            let mut attempt = transaction.prepare_cached(
                "INSERT INTO delivery_attempts (outbox_id, at, state, detail, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let error =
                (settlement.state != OutboxState::Delivered).then_some(settlement.detail.as_str());
            for id in &settlement.ids {
                update.execute(params![
                    id,
                    settlement.state.as_str(),
                    settlement.next_attempt_at,
                    u32::from(settlement.attempted),
                    error,
                    finished,
                    settlement.message_id
                ])?;
                attempt.execute(params![
                    id,
                    settlement.at,
                    settlement.state.as_str(),
                    settlement.detail,
                    settlement.duration_ms
                ])?;
            }
            insert_outbox(&transaction, follow_ups)?;
        }
        transaction.commit()?;
        Ok(())
    }

    fn assign_message(&mut self, ids: &[String], message_id: &str) -> Result<(), Error> {
        let transaction = self.connection.transaction()?;
        {
            let mut update = transaction.prepare_cached(
                "UPDATE outbox SET message_id = ?2
                 WHERE id = ?1 AND state = 'pending' AND message_id IS NULL",
            )?;
            for id in ids {
                update.execute(params![id, message_id])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error> {
        Ok(self
            .connection
            .query_row(
                "SELECT 1 FROM outbox WHERE drift_id = ?1 AND channel = ?2 AND kind = 'firing'
                 AND state = 'pending' AND created_at < ?3 LIMIT 1",
                params![drift_id, channel, created_at],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error> {
        let pending: Vec<(String, String)> = {
            let mut statement = self
                .connection
                .prepare("SELECT id, channel FROM outbox WHERE state = 'pending'")?;
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let orphaned: Vec<String> = pending
            .into_iter()
            .filter(|(_, channel)| !known.contains(channel))
            .map(|(id, _)| id)
            .collect();
        if orphaned.is_empty() {
            return Ok(0);
        }
        let settlement = Settlement {
            ids: orphaned.clone(),
            state: OutboxState::Expired,
            next_attempt_at: now,
            at: now,
            detail: "channel no longer configured".to_string(),
            duration_ms: 0,
            attempted: false,
            message_id: None,
        };
        self.settle(&settlement, &[])?;
        Ok(orphaned.len())
    }

    fn cancel_reminders(&mut self, drift_id: &str, channel: &str) -> Result<usize, Error> {
        // Nearly always there is nothing to withdraw (the writer deletes a resolved drift's
        // reminders in the resolve's own commit): look first, so the common case takes no write
        // lock and no commit away from the writer.
        let any: Option<i64> = self
            .connection
            .prepare_cached(
                "SELECT 1 FROM outbox WHERE drift_id = ?1 AND channel = ?2 AND kind = 'repeat' AND state = 'pending' LIMIT 1",
            )?
            .query_row(params![drift_id, channel], |row| row.get(0))
            .optional()?;
        if any.is_none() {
            return Ok(0);
        }
        Ok(self.connection.execute(
            "DELETE FROM outbox WHERE drift_id = ?1 AND channel = ?2 AND kind = 'repeat' AND state = 'pending'",
            params![drift_id, channel],
        )?)
    }

    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error> {
        let state: Option<String> = self
            .connection
            .query_row(
                "SELECT state FROM drifts WHERE id = ?1",
                params![drift_id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(state.and_then(|state| match state.as_str() {
            "pending" => Some(DriftState::Pending),
            "firing" => Some(DriftState::Firing),
            "resolved" => Some(DriftState::Resolved),
            _ => None,
        }))
    }

    fn stats(&mut self) -> Result<OutboxStats, Error> {
        let (pending, oldest): (i64, Option<Millis>) = self.connection.query_row(
            "SELECT COUNT(*), MIN(created_at) FROM outbox WHERE state = 'pending'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        let count = |state: &str| -> Result<i64, Error> {
            Ok(self.connection.query_row(
                "SELECT COUNT(*) FROM outbox WHERE state = ?1",
                params![state],
                |row| row.get(0),
            )?)
        };
        Ok(OutboxStats {
            pending,
            oldest_pending: oldest,
            rejected: count("rejected")?,
            expired: count("expired")?,
        })
    }

    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error> {
        let mut statement = self.connection.prepare(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE (?1 IS NULL OR state = ?1) ORDER BY created_at DESC, id LIMIT ?2"
        ))?;
        let rows =
            statement.query_map(params![state.map(|s| s.as_str()), limit as i64], outbox_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Changes;
    use crate::model::{DriftState, Evidence, OwnerChain, Severity, Transition};

    fn drift(id: &str, state: DriftState, resolved_at: Option<Millis>) -> Drift {
        Drift {
            id: id.into(),
            class: "not_ready".into(),
            severity: Severity::Critical,
            state,
            cluster: "c".into(),
            uid: format!("uid-{id}"),
            api_version: "serving.knative.dev/v1".into(),
            kind: "Revision".into(),
            namespace: "n".into(),
            name: id.into(),
            labels: Default::default(),
            owner: OwnerChain::default(),
            evidence: Evidence::default(),
            since: 0,
            fire_at: 0,
            fired_at: Some(0),
            resolved_at,
            resolution: None,
        }
    }

    #[test]
    fn audit_retention_forgets_only_old_resolved_drifts() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let drifts = vec![
            drift("old", DriftState::Resolved, Some(1_000)),
            drift("recent", DriftState::Resolved, Some(9_000)),
            drift("open", DriftState::Firing, None),
        ];
        let transitions = drifts
            .iter()
            .map(|drift| Transition {
                drift: drift.clone(),
                from: Some(DriftState::Firing),
                at: 500,
            })
            .collect();
        store
            .commit(&Batch {
                changes: Changes {
                    drifts,
                    history: transitions,
                    ..Default::default()
                },
                ..Default::default()
            })
            .unwrap();
        assert_eq!(store.count("drift_history").unwrap(), 3);
        store.prune_audit(5_000).unwrap();
        assert_eq!(store.count("drifts").unwrap(), 2);
        assert_eq!(store.count("drift_history").unwrap(), 2);
        let ids: Vec<String> = store
            .connection
            .prepare("SELECT id FROM drifts ORDER BY id")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(ids, ["open", "recent"]);
    }
}
