//! Schema versions and ordered migrations of the SQLite store.
//!
//! The `schema_version` table holds one row: the version the file's layout has. Opening a store
//! applies, in one transaction, every migration newer than its version and records the newest.
//! A store without the table (a new file, or one written before versions were recorded) is
//! version 0; version 1 is that layout with outbox claims, version 2 adds the drifts' API group
//! (and indexes for the dashboard's overview), version 3 an index of pending outbox rows,
//! version 4 keeps the objects in a rowid table, version 5 adds remediation attempts, version 6
//! orders the event keys by send time. Migration 1 is safe on both: it creates what is missing
//! (`IF NOT EXISTS`) and adds the outbox claim columns. A store whose version is newer
//! than this binary knows is refused before anything is written ([`Error::Schema`]): an older
//! binary never touches a layout it does not understand.
//!
//! Adding a migration: append one entry to `MIGRATIONS` (the next version, its SQL), never edit
//! a published one, and say in `store/rows.rs` which stored shapes it changes.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::Error;

/// Version 1, part one: the layout of every store written before schema versions were recorded
/// (every table and index, created only when missing).
const V1_TABLES: &str = r#"
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

/// Version 1, part two: outbox claims (a relay holds a message's rows under a lease while it
/// sends them, so two processes never send the same row).
const V1_CLAIMS: &str = r#"
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE outbox ADD COLUMN claimed_until INTEGER;
"#;

/// Version 2: the drift's API group as a column (the `group` filter in the query, without
/// reading bodies), filled in from the stored bodies' `apiVersion`; and the history by time (the
/// overview's moves per day read only the days they count).
const V2_GROUPS_AND_DAYS: &str = r#"
ALTER TABLE drifts ADD COLUMN api_group TEXT NOT NULL DEFAULT '';
UPDATE drifts SET api_group = COALESCE(
    substr(json_extract(body, '$.apiVersion'), 1, instr(json_extract(body, '$.apiVersion'), '/') - 1),
    '')
WHERE json_valid(body) AND instr(json_extract(body, '$.apiVersion'), '/') > 0;
CREATE INDEX IF NOT EXISTS drifts_api_group ON drifts (api_group);
CREATE INDEX IF NOT EXISTS drift_history_at ON drift_history (at);
"#;

/// Version 3: a drift's pending outbox rows by kind and channel. The relay asks, for each message
/// it sends, whether the drift has a pending reminder or an older pending firing on that channel,
/// and the writer withdraws a resolved drift's reminders; with only `outbox_drift` each question
/// read every row the drift ever had (one per notice, delivered ones included), so its cost grew
/// with the drift's history (BENCHMARKS.md, issue 28). Partial: only pending rows are indexed.
pub(crate) const V3_PENDING_BY_DRIFT: &str = r#"
CREATE INDEX IF NOT EXISTS outbox_drift_pending ON outbox (drift_id, kind, channel)
WHERE state = 'pending';
"#;

/// Version 4: the objects in a rowid table (the key a unique index). A `WITHOUT ROWID` table
/// keeps its rows in an index B-tree, whose cells hold at most about 1 KB of a row in the leaf
/// page (with 4 KiB pages): an object's 3–5 KB body spilled into overflow pages, and every
/// change of an object (most events) freed and re-allocated them, three or four page writes
/// per object. A rowid table's leaf holds up to 4,061 bytes of a row in place. Rows, bodies and
/// the `(cluster, uid)` key are as before; only the layout changes (BENCHMARKS.md, issue 28).
const V4_OBJECTS_BY_ROWID: &str = r#"
CREATE TABLE objects_v4 (
    cluster TEXT NOT NULL,
    uid TEXT NOT NULL,
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (cluster, uid)
);
INSERT INTO objects_v4 (cluster, uid, kind, namespace, name, body)
    SELECT cluster, uid, kind, namespace, name, body FROM objects ORDER BY cluster, uid;
DROP TABLE objects;
ALTER TABLE objects_v4 RENAME TO objects;
"#;

/// Version 5: remediation attempts (issue 29), part of their drift's history: the body is the
/// whole attempt (`rows::AttemptRow`); `cluster` and `outcome` repeat its cluster and outcome so
/// a sender finds its cluster's planned (and in-flight) attempts without reading bodies (a
/// partial index: a store keeps few of them at once; shards share a PostgreSQL store, and each
/// sends only to the one cluster its client reaches).
const V5_REMEDIATIONS: &str = r#"
CREATE TABLE IF NOT EXISTS remediations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    drift_id TEXT NOT NULL,
    cluster TEXT NOT NULL,
    at INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS remediations_drift ON remediations (drift_id);
CREATE INDEX IF NOT EXISTS remediations_at ON remediations (at);
CREATE INDEX IF NOT EXISTS remediations_open ON remediations (cluster, outcome, seq)
WHERE outcome IN ('planned', 'sending');
"#;

/// Version 6: the event keys by the event's send time first (`EventKey::sent_at`, its CloudEvent
/// `time` in milliseconds). Keyed by (`source`, `id`) alone, with random `id`s, each commit's
/// keys went to random leaves of the table's B-tree, each a page written to the log and then to
/// the file; in send order they go to its last leaves, a few pages per commit (BENCHMARKS.md,
/// issue 28). The keys already stored do not know their `time`: they get 0, which a lookup
/// matches for any time (`queries::IS_DUPLICATE`), until they pass the de-duplication
/// retention and are pruned.
const V6_EVENTS_BY_SEND_TIME: &str = r#"
CREATE TABLE events_v6 (
    sent_at INTEGER NOT NULL,
    source TEXT NOT NULL,
    id TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    PRIMARY KEY (sent_at, source, id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO events_v6 (sent_at, source, id, received_at)
    SELECT 0, source, id, received_at FROM events;
DROP TABLE events;
ALTER TABLE events_v6 RENAME TO events;
CREATE INDEX IF NOT EXISTS events_received ON events (received_at);
"#;

/// Every migration, oldest first: (the version it produces, its SQL, run in order).
const MIGRATIONS: &[(i64, &[&str])] = &[
    (1, &[V1_TABLES, V1_CLAIMS]),
    (2, &[V2_GROUPS_AND_DAYS]),
    (3, &[V3_PENDING_BY_DRIFT]),
    (4, &[V4_OBJECTS_BY_ROWID]),
    (5, &[V5_REMEDIATIONS]),
    (6, &[V6_EVENTS_BY_SEND_TIME]),
];

/// The newest schema version this binary knows.
pub const LATEST: i64 = 6;

/// Refuses a store written by a newer binary, before anything (not even a pragma) is written.
pub(super) fn check_not_newer(connection: &Connection) -> Result<(), Error> {
    match recorded_version(connection)? {
        Some(found) if found > LATEST => Err(Error::Schema {
            found,
            supported: LATEST,
        }),
        _ => Ok(()),
    }
}

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
    // No version: a new file, or a store from before versions were recorded (version 0).
    let current = recorded.unwrap_or(0);
    if current > LATEST {
        return Err(Error::Schema {
            found: current,
            supported: LATEST,
        });
    }
    for (version, steps) in MIGRATIONS {
        if *version > current && !already_applied(&transaction, *version)? {
            for sql in *steps {
                transaction.execute_batch(sql)?;
            }
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

/// Whether the layout already has what migration `version` makes, when its SQL cannot tell by
/// itself: version 6 copies the event keys with time 0 (the older layout has none), so run
/// again on a store already keyed by time (its version recorded as older by hand, as to go
/// back to an older binary) it would drop every key's time and merge keys that differ only in
/// it.
fn already_applied(connection: &Connection, version: i64) -> Result<bool, Error> {
    if version != 6 {
        return Ok(false);
    }
    let found: Option<i64> = connection
        .query_row(
            "SELECT 1 FROM pragma_table_info('events') WHERE name = 'sent_at'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    Ok(found.is_some())
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
