//! The audit side of the SQLite store: read queries for the drift API, the dashboard and the
//! report, and the silences the API creates. Its own connection (WAL lets it read while the
//! writer commits).

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde::Serialize;

use super::rows::SilenceRow;
use super::sqlite::SqliteStore;
use super::{Error, OutboxState, StoredSilence};
use crate::model::Silence;
use crate::model::{Drift, Evidence, Millis};

/// Filters of `GET /api/v1/drifts`.
#[derive(Debug, Clone, Default)]
pub struct DriftFilter {
    /// `pending`, `firing`, `resolved`, or `open` (pending or firing).
    pub state: Option<String>,
    /// Class id.
    pub class: Option<String>,
    /// Severity.
    pub severity: Option<String>,
    /// Cluster.
    pub cluster: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Only drifts whose state changed at or after this time.
    pub since: Option<Millis>,
    /// Page size.
    pub limit: usize,
    /// Continue after this cursor (from the previous page).
    pub cursor: Option<Cursor>,
}

/// Where the next page starts: (since, id) of the last drift returned.
pub type Cursor = (Millis, String);

/// One state change of a drift.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// State before.
    pub from: Option<String>,
    /// State after.
    pub to: String,
    /// When.
    pub at: Millis,
    /// Evidence at that moment (diff, actor, hint).
    pub evidence: Option<Evidence>,
}

/// One delivery attempt.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    /// When.
    pub at: Millis,
    /// State after the attempt.
    pub state: String,
    /// What happened.
    pub detail: String,
    /// How long it took.
    pub duration_ms: i64,
}

/// A notification and its delivery.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    /// Notification id (the idempotency key).
    pub id: String,
    /// Channel endpoint.
    pub channel: String,
    /// Drift id.
    pub drift_id: String,
    /// firing, resolved, repeat.
    pub kind: String,
    /// pending, delivered, rejected, expired.
    pub state: String,
    /// Attempts made.
    pub attempts: u32,
    /// Last error.
    pub last_error: Option<String>,
    /// Queued at.
    pub created_at: Millis,
    /// Next attempt (pending rows).
    pub next_attempt_at: Millis,
    /// Ended at.
    pub finished_at: Option<Millis>,
    /// Every attempt, oldest first (detail views only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attempt_log: Vec<AttemptView>,
}

fn sql_open(sql: &mut String) {
    sql.push_str(" AND state IN ('pending', 'firing')");
}

/// Queries for the API.
pub struct AuditReader {
    connection: Mutex<Connection>,
}

fn corrupt(table: &'static str) -> impl Fn(serde_json::Error) -> Error {
    move |source| Error::Corrupt { table, source }
}

impl AuditReader {
    /// Opens a connection to the store file.
    pub fn open(path: &Path) -> Result<AuditReader, Error> {
        drop(SqliteStore::open(path)?);
        let connection = Connection::open(path)?;
        connection.pragma_update(None, "busy_timeout", 5000)?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        Ok(AuditReader {
            connection: Mutex::new(connection),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A page of drifts, newest first, and the cursor of the next page.
    pub fn drifts(&self, filter: &DriftFilter) -> Result<(Vec<Drift>, Option<Cursor>), Error> {
        let mut sql = String::from("SELECT body, since, id FROM drifts WHERE 1 = 1");
        if filter.state.as_deref() == Some("open") {
            sql_open(&mut sql);
        }
        let mut values: Vec<rusqlite::types::Value> = Vec::new();
        let mut push = |clause: &str, value: rusqlite::types::Value| {
            values.push(value);
            sql.push_str(&clause.replace('?', &format!("?{}", values.len())));
        };
        match filter.state.as_deref() {
            Some("open") => {}
            Some(state) => push(" AND state = ?", state.to_string().into()),
            None => {}
        }
        for (column, value) in [
            ("class", &filter.class),
            ("severity", &filter.severity),
            ("cluster", &filter.cluster),
            ("namespace", &filter.namespace),
        ] {
            if let Some(value) = value {
                push(&format!(" AND {column} = ?"), value.clone().into());
            }
        }
        if let Some(since) = filter.since {
            push(
                " AND MAX(since, COALESCE(fired_at, 0), COALESCE(resolved_at, 0)) >= ?",
                since.into(),
            );
        }
        if let Some((since, id)) = &filter.cursor {
            values.push((*since).into());
            values.push(id.clone().into());
            let (a, b) = (values.len() - 1, values.len());
            sql.push_str(&format!(
                " AND (since < ?{a} OR (since = ?{a} AND id > ?{b}))"
            ));
        }
        let limit = filter.limit.clamp(1, 500);
        sql.push_str(&format!(" ORDER BY since DESC, id ASC LIMIT {}", limit + 1));
        let connection = self.lock();
        let mut statement = connection.prepare(&sql)?;
        let rows = statement.query_map(params_from_iter(values.iter()), |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, Millis>(1)?,
                row.get::<_, String>(2)?,
            ))
        })?;
        let mut drifts = Vec::new();
        let mut next = None;
        for (index, row) in rows.enumerate() {
            let (body, _since, _id) = row?;
            if index == limit {
                next = drifts
                    .last()
                    .map(|drift: &Drift| (drift.since, drift.id.clone()));
                break;
            }
            drifts.push(serde_json::from_str(&body).map_err(corrupt("drifts"))?);
        }
        Ok((drifts, next))
    }

    /// One drift.
    pub fn drift(&self, id: &str) -> Result<Option<Drift>, Error> {
        let connection = self.lock();
        let body: Option<String> = connection
            .query_row(
                "SELECT body FROM drifts WHERE id = ?1",
                params![id],
                |row| row.get(0),
            )
            .optional()?;
        body.map(|body| serde_json::from_str(&body).map_err(corrupt("drifts")))
            .transpose()
    }

    /// A drift's state changes, oldest first.
    pub fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error> {
        let connection = self.lock();
        let mut statement = connection
            .prepare("SELECT from_state, to_state, at, evidence FROM drift_history WHERE drift_id = ?1 ORDER BY seq")?;
        let rows = statement.query_map(params![id], |row| {
            Ok((
                row.get::<_, Option<String>>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Millis>(2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })?;
        let mut entries = Vec::new();
        for row in rows {
            let (from, to, at, evidence) = row?;
            let evidence = evidence
                .map(|text| serde_json::from_str(&text).map_err(corrupt("drift_history")))
                .transpose()?;
            entries.push(HistoryEntry {
                from,
                to,
                at,
                evidence,
            });
        }
        Ok(entries)
    }

    fn delivery_rows(
        connection: &Connection,
        sql: &str,
        values: Vec<rusqlite::types::Value>,
    ) -> Result<Vec<DeliveryView>, Error> {
        let mut statement = connection.prepare(sql)?;
        let rows = statement.query_map(params_from_iter(values.iter()), |row| {
            Ok(DeliveryView {
                id: row.get(0)?,
                channel: row.get(1)?,
                drift_id: row.get(2)?,
                kind: row.get(3)?,
                state: row.get(4)?,
                attempts: row.get(5)?,
                last_error: row.get(6)?,
                created_at: row.get(7)?,
                next_attempt_at: row.get(8)?,
                finished_at: row.get(9)?,
                attempt_log: Vec::new(),
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Deliveries of one drift, with their attempts.
    pub fn deliveries_of(&self, drift_id: &str) -> Result<Vec<DeliveryView>, Error> {
        let connection = self.lock();
        let mut deliveries = Self::delivery_rows(
            &connection,
            "SELECT id, channel, drift_id, kind, state, attempts, last_error, created_at, next_attempt_at, finished_at
             FROM outbox WHERE drift_id = ?1 ORDER BY created_at, id",
            vec![drift_id.to_string().into()],
        )?;
        let mut statement = connection
            .prepare("SELECT at, state, detail, duration_ms FROM delivery_attempts WHERE outbox_id = ?1 ORDER BY seq")?;
        for delivery in &mut deliveries {
            let attempts = statement.query_map(params![delivery.id], |row| {
                Ok(AttemptView {
                    at: row.get(0)?,
                    state: row.get(1)?,
                    detail: row.get(2)?,
                    duration_ms: row.get(3)?,
                })
            })?;
            delivery.attempt_log = attempts.collect::<Result<Vec<_>, _>>()?;
        }
        Ok(deliveries)
    }

    /// Deliveries in a state (newest first), optionally of one channel.
    pub fn deliveries(
        &self,
        state: Option<OutboxState>,
        channel: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryView>, Error> {
        let connection = self.lock();
        Self::delivery_rows(
            &connection,
            "SELECT id, channel, drift_id, kind, state, attempts, last_error, created_at, next_attempt_at, finished_at
             FROM outbox WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR channel = ?2)
             ORDER BY created_at DESC, id LIMIT ?3",
            vec![
                state.map(|state| state.as_str().to_string()).into(),
                channel.map(str::to_string).into(),
                i64::try_from(limit.clamp(1, 1000)).unwrap_or(100).into(),
            ],
        )
    }

    /// Silences created through the API.
    pub fn silences(&self) -> Result<Vec<StoredSilence>, Error> {
        let connection = self.lock();
        let mut statement = connection
            .prepare("SELECT id, body, created_at FROM silences ORDER BY created_at, id")?;
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
            let row: SilenceRow = serde_json::from_str(&body).map_err(corrupt("silences"))?;
            silences.push(StoredSilence {
                id,
                silence: row.into(),
                created_at,
            });
        }
        Ok(silences)
    }

    /// Stores a silence.
    pub fn add_silence(&self, silence: &Silence, now: Millis) -> Result<StoredSilence, Error> {
        let id = format!("sil_{}", uuid::Uuid::new_v4().simple());
        let body =
            serde_json::to_string(&SilenceRow::from(silence)).map_err(corrupt("silences"))?;
        self.lock().execute(
            "INSERT INTO silences (id, body, created_at) VALUES (?1, ?2, ?3)",
            params![id, body, now],
        )?;
        Ok(StoredSilence {
            id,
            silence: silence.clone(),
            created_at: now,
        })
    }

    /// Withdraws pending reminders of open drifts a new silence covers; returns how many.
    pub fn withdraw_silenced_reminders(
        &self,
        silence: &Silence,
        now: Millis,
    ) -> Result<usize, Error> {
        let silenced: Vec<String> = self
            .open_drifts()?
            .into_iter()
            .filter(|drift| silence.matches(drift, now))
            .map(|drift| drift.id)
            .collect();
        let connection = self.lock();
        let mut removed = 0;
        for drift_id in silenced {
            removed += connection.execute(
                "DELETE FROM outbox WHERE drift_id = ?1 AND kind = 'repeat' AND state = 'pending'",
                params![drift_id],
            )?;
        }
        Ok(removed)
    }

    /// Removes a silence; false when it did not exist.
    pub fn remove_silence(&self, id: &str) -> Result<bool, Error> {
        Ok(self
            .lock()
            .execute("DELETE FROM silences WHERE id = ?1", params![id])?
            > 0)
    }

    /// Open drifts (pending or firing), newest first.
    pub fn open_drifts(&self) -> Result<Vec<Drift>, Error> {
        let (drifts, _) = self.drifts(&DriftFilter {
            state: Some("open".into()),
            limit: 500,
            ..DriftFilter::default()
        })?;
        Ok(drifts)
    }

    /// Drifts that fired and resolved at or after `since`.
    pub fn resolved_since(&self, since: Millis) -> Result<Vec<Drift>, Error> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT body FROM drifts WHERE state = 'resolved' AND fired_at IS NOT NULL AND resolved_at >= ?1 ORDER BY resolved_at DESC LIMIT 5000",
        )?;
        let rows = statement.query_map(params![since], |row| row.get::<_, String>(0))?;
        let mut drifts = Vec::new();
        for row in rows {
            drifts.push(serde_json::from_str(&row?).map_err(corrupt("drifts"))?);
        }
        Ok(drifts)
    }
}
