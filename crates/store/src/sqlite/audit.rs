//! The audit side of the SQLite store: read-only queries for the drift API, the dashboard and the
//! report, on its own connection (WAL lets it read while the writer commits). It never writes:
//! silences go through the single writer like every other write.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use crate::audit::dense_days;
use crate::rows::{DriftRow, EvidenceRow, SilenceRow};
use crate::{
    AttemptView, AuditRead, Cursor, DayMoves, DeliveryView, DriftFilter, Error, FiringCount,
    HistoryEntry, OutboxState, StoredSilence, DAY_MILLIS,
};
use drift_model::{Drift, Evidence, Millis};

fn sql_open(sql: &mut String) {
    sql.push_str(" AND state IN ('pending', 'firing')");
}

/// ` AND api_group IN (…)` with one numbered parameter per group (none: nothing matches).
fn sql_groups(sql: &mut String, values: &mut Vec<rusqlite::types::Value>, groups: &[String]) {
    let mut placeholders = Vec::with_capacity(groups.len());
    for group in groups {
        values.push(group.clone().into());
        placeholders.push(format!("?{}", values.len()));
    }
    if placeholders.is_empty() {
        sql.push_str(" AND 0");
    } else {
        sql.push_str(&format!(" AND api_group IN ({})", placeholders.join(", ")));
    }
}

/// Queries for the API.
pub struct AuditReader {
    connection: Mutex<Connection>,
}

fn corrupt(table: &'static str) -> impl Fn(serde_json::Error) -> Error {
    move |source| Error::Corrupt { table, source }
}

fn decode_drift(body: &str) -> Result<Drift, Error> {
    serde_json::from_str::<DriftRow>(body)
        .map(Drift::from)
        .map_err(corrupt("drifts"))
}

impl AuditReader {
    /// Opens a connection to an existing store file (see [`super::open`]).
    pub(super) fn open(path: &Path) -> Result<AuditReader, Error> {
        let connection = Connection::open(path)?;
        connection.pragma_update(None, "busy_timeout", 5000)?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        // Read-only by construction, not only by convention: every write goes through the writer.
        connection.pragma_update(None, "query_only", true)?;
        Ok(AuditReader {
            connection: Mutex::new(connection),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
}

impl AuditRead for AuditReader {
    /// A page of drifts, newest first, and the cursor of the next page.
    fn drifts(&self, filter: &DriftFilter) -> Result<(Vec<Drift>, Option<Cursor>), Error> {
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
        if let Some(groups) = &filter.groups {
            sql_groups(&mut sql, &mut values, groups);
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
            drifts.push(decode_drift(&body)?);
        }
        Ok((drifts, next))
    }

    /// One drift.
    fn drift(&self, id: &str) -> Result<Option<Drift>, Error> {
        let connection = self.lock();
        let body: Option<String> = connection
            .query_row(
                "SELECT body FROM drifts WHERE id = ?1",
                params![id],
                |row| row.get(0),
            )
            .optional()?;
        body.map(|body| decode_drift(&body)).transpose()
    }

    /// A drift's state changes, oldest first.
    fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error> {
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
                .map(|text| {
                    serde_json::from_str::<EvidenceRow>(&text)
                        .map(Evidence::from)
                        .map_err(corrupt("drift_history"))
                })
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

    /// Deliveries of one drift, with their attempts.
    fn deliveries_of(&self, drift_id: &str) -> Result<Vec<DeliveryView>, Error> {
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
    fn deliveries(
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
    fn silences(&self) -> Result<Vec<StoredSilence>, Error> {
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

    /// Drifts that fired and resolved at or after `since`, of objects in `groups` when given.
    fn resolved_since(
        &self,
        since: Millis,
        groups: Option<&[String]>,
    ) -> Result<Vec<Drift>, Error> {
        let mut sql = String::from(
            "SELECT body FROM drifts WHERE state = 'resolved' AND fired_at IS NOT NULL AND resolved_at >= ?1",
        );
        let mut values: Vec<rusqlite::types::Value> = vec![since.into()];
        if let Some(groups) = groups {
            sql_groups(&mut sql, &mut values, groups);
        }
        sql.push_str(" ORDER BY resolved_at DESC, id LIMIT 5000");
        let connection = self.lock();
        let mut statement = connection.prepare(&sql)?;
        let rows = statement.query_map(params_from_iter(values.iter()), |row| {
            row.get::<_, String>(0)
        })?;
        let mut drifts = Vec::new();
        for row in rows {
            drifts.push(decode_drift(&row?)?);
        }
        Ok(drifts)
    }

    /// Firing drifts counted by severity, API group and namespace.
    fn firing_counts(&self) -> Result<Vec<FiringCount>, Error> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT severity, api_group, namespace, COUNT(*) FROM drifts WHERE state = 'firing'
             GROUP BY severity, api_group, namespace ORDER BY severity, api_group, namespace",
        )?;
        let rows = statement.query_map([], |row| {
            Ok(FiringCount {
                severity: row.get(0)?,
                group: row.get(1)?,
                namespace: row.get(2)?,
                count: row.get::<_, i64>(3)?.max(0).unsigned_abs(),
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Fired and resolved-after-firing moves per day, counted by SQLite over the days' history
    /// (the `drift_history_at` index).
    fn moves_per_day(&self, start: Millis, days: usize) -> Result<Vec<DayMoves>, Error> {
        let end = start.saturating_add(DAY_MILLIS.saturating_mul(days as i64));
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT (at - ?1) / ?3 AS day,
                    SUM(to_state = 'firing' AND from_state IS NOT 'firing'),
                    SUM(to_state = 'resolved' AND from_state IS 'firing')
             FROM drift_history WHERE at >= ?1 AND at < ?2 GROUP BY day",
        )?;
        let rows = statement.query_map(params![start, end, DAY_MILLIS], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?.max(0).unsigned_abs(),
                row.get::<_, i64>(2)?.max(0).unsigned_abs(),
            ))
        })?;
        let counted = rows.collect::<Result<Vec<_>, _>>()?;
        Ok(dense_days(start, days, counted))
    }
}
