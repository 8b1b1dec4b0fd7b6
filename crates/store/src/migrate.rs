//! `drift-sentinel store migrate`: copies a SQLite store into an empty PostgreSQL database, every
//! table in one PostgreSQL transaction, and checks the counts before committing.
//!
//! Both stores are first brought to the latest schema version by their own `open`, so the copy
//! knows one layout: `TABLES`, the tables and columns of that version. Rows are copied as
//! they are, `seq` numbers included (the history and attempts keep their order), and the
//! identity sequences are moved past them so the service's next rows follow.

use std::path::Path;

use tokio_postgres::types::ToSql;

use super::postgres::conn::{wait, Conn};
use super::postgres::Target;
use super::Error;

/// A column's kind in both layouts.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Int,
}

use Kind::{Int, Text};

/// Every table of the latest schema version with its columns, parents before children.
const TABLES: &[(&str, &[(&str, Kind)])] = &[
    (
        "events",
        &[
            ("sent_at", Int),
            ("source", Text),
            ("id", Text),
            ("received_at", Int),
        ],
    ),
    (
        "objects",
        &[
            ("cluster", Text),
            ("uid", Text),
            ("kind", Text),
            ("namespace", Text),
            ("name", Text),
            ("body", Text),
        ],
    ),
    (
        "drifts",
        &[
            ("id", Text),
            ("class", Text),
            ("state", Text),
            ("severity", Text),
            ("cluster", Text),
            ("namespace", Text),
            ("kind", Text),
            ("name", Text),
            ("uid", Text),
            ("since", Int),
            ("fired_at", Int),
            ("resolved_at", Int),
            ("body", Text),
            ("api_group", Text),
        ],
    ),
    (
        "drift_history",
        &[
            ("seq", Int),
            ("drift_id", Text),
            ("from_state", Text),
            ("to_state", Text),
            ("at", Int),
            ("evidence", Text),
        ],
    ),
    (
        "silences",
        &[("id", Text), ("body", Text), ("created_at", Int)],
    ),
    (
        "outbox",
        &[
            ("id", Text),
            ("channel", Text),
            ("drift_id", Text),
            ("kind", Text),
            ("group_key", Text),
            ("payload", Text),
            ("created_at", Int),
            ("not_before", Int),
            ("repeat_after_ms", Int),
            ("attempts", Int),
            ("next_attempt_at", Int),
            ("state", Text),
            ("last_error", Text),
            ("finished_at", Int),
            ("message_id", Text),
            ("claimed_by", Text),
            ("claimed_until", Int),
        ],
    ),
    (
        "delivery_attempts",
        &[
            ("seq", Int),
            ("outbox_id", Text),
            ("at", Int),
            ("state", Text),
            ("detail", Text),
            ("duration_ms", Int),
        ],
    ),
    (
        "remediations",
        &[
            ("seq", Int),
            ("drift_id", Text),
            ("cluster", Text),
            ("at", Int),
            ("outcome", Text),
            ("body", Text),
        ],
    ),
    ("heartbeat", &[("id", Int), ("at", Int)]),
];

/// The tables whose `seq` is an identity in PostgreSQL.
const SEQUENCED: &[&str] = &["drift_history", "delivery_attempts", "remediations"];

/// One value of a row, as both databases hold it.
enum Value {
    Text(Option<String>),
    Int(Option<i64>),
}

impl Value {
    fn as_sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            Value::Text(value) => value,
            Value::Int(value) => value,
        }
    }
}

/// What was copied: rows per table, in `TABLES` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The schema version both stores have.
    pub version: i64,
    /// (table, rows copied).
    pub tables: Vec<(&'static str, u64)>,
}

fn sqlite_error(error: rusqlite::Error) -> Error {
    Error::from(error)
}

/// Reads every row of `table` from the SQLite store.
fn read_table(
    connection: &rusqlite::Connection,
    table: &str,
    columns: &[(&str, Kind)],
) -> Result<Vec<Vec<Value>>, Error> {
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    // The order rows were written (`seq`, else `rowid`); the events (a WITHOUT ROWID table) and
    // the objects (by rowid since version 4, by key before) by key.
    let order = match table {
        "events" => "sent_at, source, id",
        "objects" => "cluster, uid",
        _ if SEQUENCED.contains(&table) => "seq",
        _ => "rowid",
    };
    let mut statement = connection
        .prepare(&format!(
            "SELECT {} FROM {table} ORDER BY {order}",
            names.join(", ")
        ))
        .map_err(sqlite_error)?;
    let rows = statement
        .query_map([], |row| {
            columns
                .iter()
                .enumerate()
                .map(|(index, (_, kind))| {
                    Ok(match kind {
                        Text => Value::Text(row.get(index)?),
                        Int => Value::Int(row.get(index)?),
                    })
                })
                .collect::<rusqlite::Result<Vec<Value>>>()
        })
        .map_err(sqlite_error)?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sqlite_error)
}

/// Copies the SQLite store at `path` into the PostgreSQL database of `target`, which must hold
/// no store rows yet (its schema is created if missing). Nothing is written to PostgreSQL unless
/// every table was copied and its count checked.
pub fn sqlite_to_postgres(path: &Path, target: &Target) -> Result<Summary, Error> {
    if !path.is_file() {
        return Err(Error::Unavailable(format!(
            "no SQLite store at {}",
            path.display()
        )));
    }
    // Opening brings the source to the latest version (as the service would at start).
    drop(super::sqlite::SqliteStore::open(path)?);
    let source = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite_error)?;
    // One read transaction: the copy is of one moment even if something writes meanwhile.
    source.execute_batch("BEGIN").map_err(sqlite_error)?;
    let version = super::sqlite::schema::recorded_version(&source)?.unwrap_or(0);

    drop(super::postgres::PostgresStore::open(target)?);
    let mut conn = Conn::open(target)?;
    let client = conn.client()?;
    let mut tables = Vec::with_capacity(TABLES.len());
    wait(async {
        let transaction = client.transaction().await?;
        // The copy waits inside its transaction while it reads each SQLite table.
        transaction
            .execute("SET LOCAL idle_in_transaction_session_timeout = 0", &[])
            .await?;
        let mut occupied = Vec::new();
        for (table, _) in TABLES {
            // The heartbeat row is the one write of a service that started on the database and
            // stopped without receiving anything: it holds no data, and the copy replaces it.
            if *table == "heartbeat" {
                continue;
            }
            let rows: i64 = transaction
                .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
                .await?
                .try_get(0)?;
            if rows > 0 {
                occupied.push(format!("{table}: {rows} rows"));
            }
        }
        if !occupied.is_empty() {
            return Err(Error::Unavailable(format!(
                "the target database already holds drift-sentinel data ({}), probably from a service that ran on it: migrate into a new, empty database (or drop and recreate this one) before any replica starts on it",
                occupied.join(", ")
            )));
        }
        transaction.execute("DELETE FROM heartbeat", &[]).await?;
        for (table, columns) in TABLES {
            let rows = read_table(&source, table, columns)?;
            let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
            let placeholders: Vec<String> = (1..=columns.len())
                .map(|index| format!("${index}"))
                .collect();
            let insert = transaction
                .prepare(&format!(
                    "INSERT INTO {table} ({}) VALUES ({})",
                    names.join(", "),
                    placeholders.join(", ")
                ))
                .await?;
            for row in &rows {
                let params: Vec<&(dyn ToSql + Sync)> = row.iter().map(Value::as_sql).collect();
                transaction.execute(&insert, &params).await?;
            }
            let copied: i64 = transaction
                .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
                .await?
                .try_get(0)?;
            if u64::try_from(copied).ok() != Some(rows.len() as u64) {
                return Err(Error::Unavailable(format!(
                    "{table}: {} rows read, {copied} in PostgreSQL; nothing was committed",
                    rows.len()
                )));
            }
            tables.push((*table, rows.len() as u64));
        }
        for table in SEQUENCED {
            // The next identity follows the copied numbers.
            transaction
                .query_one(
                    &format!(
                        "SELECT setval(pg_get_serial_sequence('{table}', 'seq'),
                                       COALESCE(MAX(seq), 1), MAX(seq) IS NOT NULL) FROM {table}"
                    ),
                    &[],
                )
                .await?;
        }
        transaction.commit().await?;
        Ok::<(), Error>(())
    })?;
    Ok(Summary { version, tables })
}
