//! The embedded store: one SQLite file in WAL mode with `synchronous=FULL`, so a committed batch
//! survives a process crash and a power loss; the pipeline's writer takes the WAL's fsync over
//! (`take_syncer`, `sync.rs`: `NORMAL` commits, then one fsync for every round before it, on a
//! thread of its own, before the answers). Group commit (many events per transaction, done by
//! the single writer) keeps the fsync cost per event small.
//!
//! Each role has its own connection: the writer (`SqliteStore`), the relays (`outbox`), the
//! audit reader (`audit`) and the checkpoint thread (`checkpoint`); WAL lets them read while
//! the writer commits. [`schema`] versions the layout and migrates it when the writer opens it.
//! The statements are the shared ones (`sql/`); what is SQLite's own is here: the pragmas, the
//! busy handling and the checkpoints.

mod audit;
mod checkpoint;
mod outbox;
pub(crate) mod read;
pub mod schema;
mod sync;

use std::path::Path;
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

pub(crate) use audit::AuditReader;
pub(crate) use checkpoint::{Checkpointer, WriterTurn};
pub(crate) use outbox::SqliteOutbox;

use crate::rows::{drift_body, evidence_text, silence_body};
use crate::sql::{decode, queries, Dialect, Row};
use crate::{
    Batch, Error, EventKey, ObjectLoader, Opened, SilenceChange, Snapshot, Store, StoredSilence,
};
use drift_model::Millis;

/// The statements' dialect.
const SQL: Dialect = Dialect::Sqlite;

impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Error {
        Error::Backend {
            backend: "sqlite",
            source: Box::new(error),
        }
    }
}

impl Row for rusqlite::Row<'_> {
    fn text(&self, index: usize) -> Result<&str, Error> {
        Ok(self
            .get_ref(index)?
            .as_str()
            .map_err(rusqlite::Error::from)?)
    }

    fn opt_text(&self, index: usize) -> Result<Option<&str>, Error> {
        Ok(self
            .get_ref(index)?
            .as_str_or_null()
            .map_err(rusqlite::Error::from)?)
    }

    fn int(&self, index: usize) -> Result<i64, Error> {
        Ok(self.get(index)?)
    }

    fn opt_int(&self, index: usize) -> Result<Option<i64>, Error> {
        Ok(self.get(index)?)
    }
}

/// Runs `statement` with `params` and decodes each row.
pub(crate) fn collect<T>(
    statement: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    mut decode: impl FnMut(&rusqlite::Row<'_>) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    let mut rows = statement.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode(row)?);
    }
    Ok(out)
}

/// Opens the store at `path` for every role: the writer first (it creates and migrates the
/// schema), then the outbox, the audit reader and the checkpoint thread.
pub(crate) fn open(path: &Path) -> Result<Opened, Error> {
    let writer = SqliteStore::open(path)?;
    let outbox = SqliteOutbox::open(path)?;
    let audit = AuditReader::open(path)?;
    let checkpointer = Checkpointer::start(path, writer.turn.clone())?;
    Ok(Opened {
        writer: Box::new(writer),
        outbox: Box::new(outbox),
        audit: Arc::new(audit),
        background: Box::new(checkpointer),
        leases: None,
    })
}

/// The SQLite store.
pub(crate) struct SqliteStore {
    connection: Connection,
    /// The database file (its WAL is beside it).
    path: std::path::PathBuf,
    /// `synchronous` as opened (`FULL`, or `OFF` for a test store).
    synchronous: &'static str,
    /// Set by the background checkpointer when the writer should finish a checkpoint.
    turn: WriterTurn,
    /// Whether the writer's last checkpoint failed (told once).
    checkpoint_failing: bool,
}

impl SqliteStore {
    /// Opens (creating and migrating if needed) the database file.
    pub(crate) fn open(path: &Path) -> Result<SqliteStore, Error> {
        SqliteStore::open_with(path, "FULL")
    }

    /// Opens the database file of a test store: its commits, and its creation, skip the fsync
    /// (the file need not outlive a power loss, only the test).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn open_without_fsync(path: &Path) -> Result<SqliteStore, Error> {
        SqliteStore::open_with(path, "OFF")
    }

    /// Opens the database file with `synchronous` set to `synchronous`.
    fn open_with(path: &Path, synchronous: &'static str) -> Result<SqliteStore, Error> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)?;
            }
        }
        let mut connection = Connection::open(path)?;
        // A store from a newer binary is refused before the pragmas below touch its file.
        schema::check_not_newer(&connection)?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", synchronous)?;
        wait_briefly_when_busy(&mut connection)?;
        connection.pragma_update(None, "foreign_keys", "ON")?;
        // 32 MiB of page cache for the writer (SQLite's default is 2 MiB): the duplicate check
        // and the inserts touch the `events` and `objects` B-trees at random keys, which would
        // otherwise be read back from the OS on every commit.
        connection.pragma_update(None, "cache_size", -32768)?;
        // Checkpoints run on their own thread ([`Checkpointer`]), which asks the writer only
        // to finish one (a few pages, [`WriterTurn`]); this high threshold only makes the
        // writer checkpoint all of it itself if that thread falls far behind (SQLite's default
        // is 1,000 pages).
        connection.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT_PAGES)?;
        // After a checkpoint the WAL file is cut back to this size instead of staying at its
        // largest.
        connection.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT_BYTES)?;
        schema::migrate(&mut connection)?;
        Ok(SqliteStore {
            connection,
            path: path.to_path_buf(),
            synchronous,
            turn: WriterTurn::default(),
            checkpoint_failing: false,
        })
    }

    /// Copies what the background checkpointer has not yet copied, so that the next write
    /// transaction starts the WAL over ([`WriterTurn`]). A failure leaves the WAL as it was
    /// (the next pass asks again; the writer's `wal_autocheckpoint` still bounds it), and the
    /// commit before it stands; it is told once until a checkpoint succeeds again.
    fn finish_checkpoint(&mut self) {
        match checkpoint::checkpoint(&self.connection) {
            Ok(_) => self.checkpoint_failing = false,
            Err(error) => {
                if !self.checkpoint_failing {
                    tracing::warn!(message = "The writer's checkpoint failed.", %error);
                }
                self.checkpoint_failing = true;
            }
        }
    }
}

impl Store for SqliteStore {
    fn load(&mut self, objects: &mut ObjectLoader<'_>) -> Result<Snapshot, Error> {
        let mut statement = self.connection.prepare(queries::OBJECTS.text(SQL))?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            objects(row.text(0)?, row.text(1)?).map_err(crate::rows::corrupt("objects"))?;
        }
        let mut statement = self.connection.prepare(queries::OPEN_DRIFTS.text(SQL))?;
        Ok(Snapshot {
            silences: read_silences(&self.connection)?,
            drifts: collect(&mut statement, [], |row| decode::drift(row, 0))?,
        })
    }

    fn is_duplicate(&mut self, key: &EventKey) -> Result<bool, Error> {
        let mut statement = self
            .connection
            .prepare_cached(queries::IS_DUPLICATE.text(SQL))?;
        Ok(statement
            .query_row(params![key.sent_at, key.source, key.id], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// The round's keys in one read transaction: asked one by one, each key was its own
    /// transaction, which took and released SQLite's read locks (two `fcntl` calls on the
    /// shared-memory file) and re-read the log's header, about a third of the check's cost
    /// (BENCHMARKS.md, issue 28). A deferred transaction that only reads blocks no writer.
    fn duplicates(
        &mut self,
        keys: &[EventKey],
    ) -> Result<std::collections::HashSet<EventKey>, Error> {
        let mut seen = std::collections::HashSet::new();
        if keys.is_empty() {
            return Ok(seen);
        }
        let transaction = self
            .connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Deferred)?;
        {
            let mut statement = transaction.prepare_cached(queries::IS_DUPLICATE.text(SQL))?;
            for key in keys {
                if statement
                    .query_row(params![key.sent_at, key.source, key.id], |_| Ok(()))
                    .optional()?
                    .is_some()
                {
                    seen.insert(key.clone());
                }
            }
        }
        // Only read: ending it is releasing the read locks.
        transaction.commit()?;
        Ok(seen)
    }

    fn silences(&mut self) -> Result<Vec<StoredSilence>, Error> {
        read_silences(&self.connection)
    }

    fn remediation_outcome(
        &mut self,
        seq: i64,
    ) -> Result<Option<drift_model::remediation::Outcome>, Error> {
        let text: Option<String> = self
            .connection
            .query_row(
                queries::REMEDIATION_OUTCOME.text(SQL),
                params![seq],
                |row| row.get(0),
            )
            .optional()?;
        Ok(text.and_then(|text| drift_model::remediation::Outcome::parse(&text)))
    }

    fn take_syncer(&mut self) -> Option<Box<dyn crate::Syncer>> {
        if self.synchronous != "FULL" {
            // A test store never syncs.
            return None;
        }
        // Only a WAL's fsync is the commits' (in rollback mode `NORMAL` would be another
        // promise): the store keeps syncing each commit itself if the file is not in WAL mode.
        let mode: Option<String> = self
            .connection
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .ok();
        if !mode.is_some_and(|mode| mode.eq_ignore_ascii_case("wal")) {
            return None;
        }
        // From here a commit writes its WAL frames without an fsync (in WAL mode `NORMAL`
        // still syncs the WAL before each checkpoint and the database after it); the syncer's
        // fsync of the WAL file after a commit makes it as durable as `FULL` would have.
        if let Err(error) = self.connection.pragma_update(None, "synchronous", "NORMAL") {
            tracing::warn!(message = "The store keeps syncing each commit itself.", %error);
            return None;
        }
        self.synchronous = "NORMAL";
        Some(Box::new(sync::WalSyncer::new(self.path.clone())))
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        let transaction = self.connection.transaction()?;
        {
            let mut insert_event = transaction.prepare_cached(queries::INSERT_EVENT.text(SQL))?;
            for (key, received_at) in &batch.events {
                insert_event.execute(params![key.sent_at, key.source, key.id, received_at])?;
            }
            let mut upsert_object = transaction.prepare_cached(queries::UPSERT_OBJECT.text(SQL))?;
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
            let mut delete_object = transaction.prepare_cached(queries::DELETE_OBJECT.text(SQL))?;
            for key in &batch.removed_objects {
                delete_object.execute(params![key.cluster, key.uid])?;
            }
            let mut upsert_drift = transaction.prepare_cached(queries::UPSERT_DRIFT.text(SQL))?;
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
                    drift_body(drift)?,
                    drift_model::group::api_group(&drift.api_version),
                ])?;
            }
            let mut insert_history =
                transaction.prepare_cached(queries::INSERT_HISTORY.text(SQL))?;
            for transition in &batch.history {
                insert_history.execute(params![
                    transition.drift.id,
                    transition.from.map(|state| state.as_str()),
                    transition.drift.state.as_str(),
                    transition.at,
                    evidence_text(&transition.drift.evidence)?,
                ])?;
            }
            outbox::insert_outbox(&transaction, &batch.outbox)?;
            let mut insert_remediation =
                transaction.prepare_cached(queries::INSERT_REMEDIATION.text(SQL))?;
            for attempt in &batch.remediations {
                insert_remediation.execute(params![
                    attempt.drift_id,
                    attempt.cluster,
                    attempt.at,
                    attempt.outcome.as_str(),
                    crate::rows::attempt_body(attempt)?,
                ])?;
            }
            let mut settle_remediation =
                transaction.prepare_cached(queries::SETTLE_REMEDIATION.text(SQL))?;
            for (seq, from, attempt) in &batch.settled_remediations {
                settle_remediation.execute(params![
                    seq,
                    attempt.outcome.as_str(),
                    crate::rows::attempt_body(attempt)?,
                    from.as_str(),
                ])?;
            }
            let mut cancel = transaction.prepare_cached(queries::CANCEL_REMINDERS.text(SQL))?;
            for drift_id in &batch.cancel_reminders {
                cancel.execute(params![drift_id])?;
            }
            let mut withdraw =
                transaction.prepare_cached(queries::WITHDRAW_RESOLVED_REMINDERS.text(SQL))?;
            for drift_id in &batch.resolved_reminders {
                withdraw.execute(params![drift_id])?;
            }
            for change in &batch.silences {
                match change {
                    SilenceChange::Add(stored) => {
                        transaction.execute(
                            queries::INSERT_SILENCE.text(SQL),
                            params![stored.id, silence_body(&stored.silence)?, stored.created_at],
                        )?;
                    }
                    SilenceChange::Remove(id) => {
                        transaction.execute(queries::DELETE_SILENCE.text(SQL), params![id])?;
                    }
                }
            }
        }
        transaction.commit()?;
        if self.turn.take() {
            self.finish_checkpoint();
        }
        Ok(())
    }

    fn heartbeat(&mut self, now: Millis) -> Result<(), Error> {
        self.connection
            .execute(queries::HEARTBEAT.text(SQL), params![now])?;
        Ok(())
    }

    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, Error> {
        Ok(self
            .connection
            .execute(queries::PRUNE_EVENTS.text(SQL), params![cutoff])?)
    }

    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, Error> {
        let transaction = self.connection.transaction()?;
        let mut removed = 0;
        for query in &queries::PRUNE_AUDIT {
            removed += transaction.execute(query.text(SQL), params![cutoff])?;
        }
        transaction.commit()?;
        Ok(removed)
    }
}

/// The silences created through the API (the writer's and the audit reader's answer).
pub(crate) fn read_silences(connection: &Connection) -> Result<Vec<StoredSilence>, Error> {
    let mut statement = connection.prepare(queries::SILENCES.text(SQL))?;
    collect(&mut statement, [], |row| decode::silence(row))
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

#[cfg(test)]
mod tests;
