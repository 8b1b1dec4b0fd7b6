//! Schema versions and ordered migrations of the SQLite store.
//!
//! The `schema_version` table holds one row: the version the file's layout has. Opening a store
//! applies, in one transaction, every migration newer than its version and records the newest. A
//! store without the table was written before versions were recorded: its layout is version 1.
//! A store whose version is newer than this binary knows is refused before anything is written
//! ([`Error::Schema`]): an older binary never touches a layout it does not understand.
//!
//! Adding a migration: append one entry to [`MIGRATIONS`] (the next version, its SQL), never edit
//! a published one, and say in `store/rows.rs` which stored shapes it changes.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::store::Error;

/// Version 1: the layout of every store written before schema versions were recorded.
const V1: &str = r#"
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

/// Version 2: outbox claims (a relay holds due rows under a lease, so two processes never send
/// the same row).
const V2: &str = r#"
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claimed_until INTEGER;
"#;

/// Every migration, oldest first: (the version it produces, its SQL).
const MIGRATIONS: &[(i64, &str)] = &[(1, V1), (2, V2)];

/// The newest schema version this binary knows.
pub const LATEST: i64 = 2;

/// Brings the store at `connection` to [`LATEST`], or refuses a newer one.
pub(super) fn migrate(connection: &mut Connection) -> Result<i64, Error> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             version INTEGER NOT NULL
         );",
    )?;
    let recorded: Option<i64> = transaction
        .query_row(
            "SELECT version FROM schema_version WHERE id = 1",
            [],
            |row| row.get(0),
        )
        .optional()?;
    let current = match recorded {
        Some(version) => version,
        None => {
            // Tables but no version: a store from before versions were recorded (version 1).
            let has_objects: Option<i64> = transaction
                .query_row(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'objects'",
                    [],
                    |row| row.get(0),
                )
                .optional()?;
            if has_objects.is_some() {
                1
            } else {
                0
            }
        }
    };
    if current > LATEST {
        return Err(Error::Schema {
            found: current,
            supported: LATEST,
        });
    }
    for (version, sql) in MIGRATIONS {
        if *version > current {
            transaction.execute_batch(sql)?;
        }
    }
    transaction.execute(
        "INSERT INTO schema_version (id, version) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        params![LATEST],
    )?;
    transaction.commit()?;
    Ok(LATEST)
}

/// The version recorded in the store at `connection` (`None` before any was recorded).
pub fn recorded_version(connection: &Connection) -> Result<Option<i64>, Error> {
    let has_table: Option<i64> = connection
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    if has_table.is_none() {
        return Ok(None);
    }
    Ok(connection
        .query_row(
            "SELECT version FROM schema_version WHERE id = 1",
            [],
            |row| row.get(0),
        )
        .optional()?)
}
