//! The embedded store: one SQLite file in WAL mode with `synchronous=FULL`, so a committed batch
//! survives a process crash and a power loss. Group commit (many events per transaction, done by
//! the pipeline's single writer) keeps the fsync cost per event small.
//!
//! Each role has its own connection: the writer ([`SqliteStore`]), the relays ([`outbox`]), the
//! audit reader ([`audit`]) and the checkpoint thread ([`checkpoint`]); WAL lets them read while
//! the writer commits. [`schema`] versions the layout and migrates it when the writer opens it.

pub mod audit;
pub mod checkpoint;
pub mod outbox;
pub mod schema;

use std::path::Path;
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

pub use audit::AuditReader;
pub use checkpoint::Checkpointer;
pub use outbox::SqliteOutbox;

use super::rows::{DriftRow, SilenceRow};
use super::{
    Batch, Error, EventKey, ObjectLoader, Opened, SilenceChange, Snapshot, Store, StoredSilence,
};
use drift_model::{Drift, Millis};

impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Error {
        Error::Backend {
            backend: "sqlite",
            source: Box::new(error),
        }
    }
}

/// Opens the store at `path` for every role: the writer first (it creates and migrates the
/// schema), then the outbox, the audit reader and the checkpoint thread.
pub fn open(path: &Path) -> Result<Opened, Error> {
    let writer = SqliteStore::open(path)?;
    let outbox = SqliteOutbox::open(path)?;
    let audit = AuditReader::open(path)?;
    let checkpointer = Checkpointer::start(path)?;
    Ok(Opened {
        writer: Box::new(writer),
        outbox: Box::new(outbox),
        audit: Arc::new(audit),
        background: Box::new(checkpointer),
        leases: None,
    })
}

/// The SQLite store.
pub struct SqliteStore {
    connection: Connection,
}

impl SqliteStore {
    /// Opens (creating and migrating if needed) the database file.
    pub fn open(path: &Path) -> Result<SqliteStore, Error> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)?;
            }
        }
        let mut connection = Connection::open(path)?;
        // A store from a newer binary is refused before the pragmas below touch its file.
        schema::check_not_newer(&connection)?;
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
        schema::migrate(&mut connection)?;
        Ok(SqliteStore { connection })
    }

    /// Counts rows of a table (the unit tests below).
    #[cfg(test)]
    fn count(&self, table: &str) -> Result<i64, Error> {
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
    fn load(&mut self, objects: &mut ObjectLoader<'_>) -> Result<Snapshot, Error> {
        let mut snapshot = Snapshot::default();
        let mut statement = self
            .connection
            .prepare("SELECT cluster, body FROM objects")?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            let cluster = row.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
            let body = row.get_ref(1)?.as_str().map_err(rusqlite::Error::from)?;
            objects(cluster, body).map_err(|source| Error::Corrupt {
                table: "objects",
                source,
            })?;
        }
        snapshot.silences = read_silences(&self.connection)?;
        let mut statement = self
            .connection
            .prepare("SELECT body FROM drifts WHERE state != 'resolved'")?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        for row in rows {
            let body = row?;
            let drift: DriftRow = serde_json::from_str(&body).map_err(|source| Error::Corrupt {
                table: "drifts",
                source,
            })?;
            snapshot.drifts.push(Drift::from(drift));
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

    fn silences(&mut self) -> Result<Vec<StoredSilence>, Error> {
        read_silences(&self.connection)
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
            for object in &batch.objects {
                upsert_object.execute(params![
                    object.cluster,
                    object.uid,
                    object.kind,
                    object.namespace,
                    object.name,
                    object.body,
                ])?;
            }
            let mut delete_object = transaction
                .prepare_cached("DELETE FROM objects WHERE cluster = ?1 AND uid = ?2")?;
            for key in &batch.removed_objects {
                delete_object.execute(params![key.cluster, key.uid])?;
            }
            let mut upsert_drift = transaction.prepare_cached(
                "INSERT INTO drifts (id, class, state, severity, cluster, namespace, kind, name, uid, since, fired_at, resolved_at, body, api_group)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, severity = excluded.severity,
                 fired_at = excluded.fired_at, resolved_at = excluded.resolved_at, body = excluded.body",
            )?;
            for drift in &batch.drifts {
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
                    super::rows::encode_drift(drift).map_err(|source| Error::Corrupt {
                        table: "drifts",
                        source,
                    })?,
                    drift_model::group::api_group(&drift.api_version),
                ])?;
            }
            let mut insert_history = transaction.prepare_cached(
                "INSERT INTO drift_history (drift_id, from_state, to_state, at, evidence) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for transition in &batch.history {
                insert_history.execute(params![
                    transition.drift.id,
                    transition.from.map(|state| state.as_str()),
                    transition.drift.state.as_str(),
                    transition.at,
                    to_json(
                        &super::rows::EvidenceRowRef::from(&transition.drift.evidence),
                        "drift_history"
                    )?
                ])?;
            }
            outbox::insert_outbox(&transaction, &batch.outbox)?;
            let mut cancel = transaction.prepare_cached(
                "DELETE FROM outbox WHERE drift_id = ?1 AND kind = 'repeat' AND state = 'pending'",
            )?;
            for drift_id in &batch.cancel_reminders {
                cancel.execute(params![drift_id])?;
            }
            for change in &batch.silences {
                match change {
                    SilenceChange::Add(stored) => {
                        transaction.execute(
                            "INSERT INTO silences (id, body, created_at) VALUES (?1, ?2, ?3)",
                            params![
                                stored.id,
                                to_json(&SilenceRow::from(&stored.silence), "silences")?,
                                stored.created_at
                            ],
                        )?;
                    }
                    SilenceChange::Remove(id) => {
                        transaction.execute("DELETE FROM silences WHERE id = ?1", params![id])?;
                    }
                }
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
        let row: SilenceRow = serde_json::from_str(&body).map_err(|source| Error::Corrupt {
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

/// How long a connection waits for another one's write lock before giving up.
const BUSY_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long it sleeps between two tries.
const BUSY_STEP: std::time::Duration = std::time::Duration::from_micros(100);

/// Makes `connection` retry every 100 µs while another connection holds the write lock (the
/// writer and the relays take turns), for up to five seconds. SQLite's `busy_timeout` sleeps 1,
/// 2, 5, 10, 15, 20, 25 ms and more between tries, so the writer, waiting for a relay's
/// sub-millisecond settlement, often slept ten times longer than the wait, and that put tens of
/// milliseconds into the answer of every request in the round.
pub(super) fn wait_briefly_when_busy(connection: &mut Connection) -> Result<(), Error> {
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
pub(super) const WRITER_AUTOCHECKPOINT_PAGES: i64 = 16_384;
/// Size the WAL file is truncated to after a checkpoint.
const WAL_SIZE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::{DriftState, Evidence, OwnerChain, Severity, Transition};

    fn drift(id: &str, state: DriftState, resolved_at: Option<Millis>) -> Drift {
        Drift {
            id: id.into(),
            class: "not_ready".into(),
            rule: None,
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
                drifts,
                history: transitions,
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
