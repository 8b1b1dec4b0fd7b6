//! The audit side of the PostgreSQL store: read-only queries for the drift API, the dashboard and
//! the report, on its own connection. The statements are SQLite's (`sqlite/audit.rs`) in
//! PostgreSQL's words; the contract suite holds both to the same answers.

use std::sync::Mutex;

use tokio_postgres::types::ToSql;

use super::conn::{wait, Conn, Target};
use crate::audit::dense_days;
use crate::rows::{DriftRow, EvidenceRow};
use crate::{
    AttemptView, AuditRead, Cursor, DayMoves, DeliveryView, DriftFilter, Error, FiringCount,
    HistoryEntry, OutboxState, StoredSilence, DAY_MILLIS,
};
use drift_model::{Drift, Evidence, Millis};

type Param = Box<dyn ToSql + Sync + Send>;

/// Queries for the API.
pub struct PostgresAudit {
    conn: Mutex<Conn>,
}

fn corrupt(table: &'static str) -> impl Fn(serde_json::Error) -> Error {
    move |source| Error::Corrupt { table, source }
}

fn decode_drift(body: &str) -> Result<Drift, Error> {
    serde_json::from_str::<DriftRow>(body)
        .map(Drift::from)
        .map_err(corrupt("drifts"))
}

/// ` AND api_group IN (…)` with one numbered parameter per group (none: nothing matches).
fn sql_groups(sql: &mut String, values: &mut Vec<Param>, groups: &[String]) {
    let mut placeholders = Vec::with_capacity(groups.len());
    for group in groups {
        values.push(Box::new(group.clone()));
        placeholders.push(format!("${}", values.len()));
    }
    if placeholders.is_empty() {
        sql.push_str(" AND FALSE");
    } else {
        sql.push_str(&format!(" AND api_group IN ({})", placeholders.join(", ")));
    }
}

fn refs(values: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    values
        .iter()
        .map(|value| value.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

const DELIVERY_COLUMNS: &str = "id, channel, drift_id, kind, state, attempts, last_error, created_at, next_attempt_at, finished_at";

fn delivery(row: &tokio_postgres::Row) -> Result<DeliveryView, Error> {
    let attempts: i64 = row.try_get(5)?;
    Ok(DeliveryView {
        id: row.try_get(0)?,
        channel: row.try_get(1)?,
        drift_id: row.try_get(2)?,
        kind: row.try_get(3)?,
        state: row.try_get(4)?,
        attempts: u32::try_from(attempts.max(0)).unwrap_or(u32::MAX),
        last_error: row.try_get(6)?,
        created_at: row.try_get(7)?,
        next_attempt_at: row.try_get(8)?,
        finished_at: row.try_get(9)?,
        attempt_log: Vec::new(),
    })
}

fn count(value: i64) -> u64 {
    value.max(0).unsigned_abs()
}

impl PostgresAudit {
    /// Opens the reader's connection; every query runs read-only (see [`PostgresAudit::query`]).
    pub(super) fn open(target: &Target) -> Result<PostgresAudit, Error> {
        Ok(PostgresAudit {
            conn: Mutex::new(Conn::open(target)?),
        })
    }

    /// Runs one query in a read-only transaction: read-only by construction, not only by
    /// convention (every write goes through the writer), as SQLite's `query_only` does.
    fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let client = conn.client()?;
        wait(async {
            let transaction = client.build_transaction().read_only(true).start().await?;
            let rows = transaction.query(sql, params).await?;
            transaction.commit().await?;
            Ok(rows)
        })
    }
}

impl AuditRead for PostgresAudit {
    fn drifts(&self, filter: &DriftFilter) -> Result<(Vec<Drift>, Option<Cursor>), Error> {
        let mut sql = String::from("SELECT body FROM drifts WHERE TRUE");
        let mut values: Vec<Param> = Vec::new();
        match filter.state.as_deref() {
            Some("open") => sql.push_str(" AND state IN ('pending', 'firing')"),
            Some(state) => {
                values.push(Box::new(state.to_string()));
                sql.push_str(&format!(" AND state = ${}", values.len()));
            }
            None => {}
        }
        for (column, value) in [
            ("class", &filter.class),
            ("severity", &filter.severity),
            ("cluster", &filter.cluster),
            ("namespace", &filter.namespace),
        ] {
            if let Some(value) = value {
                values.push(Box::new(value.clone()));
                sql.push_str(&format!(" AND {column} = ${}", values.len()));
            }
        }
        if let Some(since) = filter.since {
            values.push(Box::new(since));
            sql.push_str(&format!(
                " AND GREATEST(since, COALESCE(fired_at, 0), COALESCE(resolved_at, 0)) >= ${}",
                values.len()
            ));
        }
        if let Some(groups) = &filter.groups {
            sql_groups(&mut sql, &mut values, groups);
        }
        if let Some((since, id)) = &filter.cursor {
            values.push(Box::new(*since));
            values.push(Box::new(id.clone()));
            let (a, b) = (values.len() - 1, values.len());
            sql.push_str(&format!(
                " AND (since < ${a} OR (since = ${a} AND id > ${b}))"
            ));
        }
        let limit = filter.limit.clamp(1, 500);
        sql.push_str(&format!(" ORDER BY since DESC, id ASC LIMIT {}", limit + 1));
        let rows = self.query(&sql, &refs(&values))?;
        let mut drifts = Vec::new();
        let mut next = None;
        for (index, row) in rows.iter().enumerate() {
            if index == limit {
                next = drifts
                    .last()
                    .map(|drift: &Drift| (drift.since, drift.id.clone()));
                break;
            }
            drifts.push(decode_drift(row.try_get(0)?)?);
        }
        Ok((drifts, next))
    }

    fn drift(&self, id: &str) -> Result<Option<Drift>, Error> {
        let rows = self.query("SELECT body FROM drifts WHERE id = $1", &[&id])?;
        rows.first()
            .map(|row| decode_drift(row.try_get(0)?))
            .transpose()
    }

    fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error> {
        let rows = self.query(
            "SELECT from_state, to_state, at, evidence FROM drift_history WHERE drift_id = $1 ORDER BY seq",
            &[&id],
        )?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in &rows {
            let evidence: Option<String> = row.try_get(3)?;
            let evidence = evidence
                .map(|text| {
                    serde_json::from_str::<EvidenceRow>(&text)
                        .map(Evidence::from)
                        .map_err(corrupt("drift_history"))
                })
                .transpose()?;
            entries.push(HistoryEntry {
                from: row.try_get(0)?,
                to: row.try_get(1)?,
                at: row.try_get(2)?,
                evidence,
            });
        }
        Ok(entries)
    }

    fn deliveries_of(&self, drift_id: &str) -> Result<Vec<DeliveryView>, Error> {
        let rows = self.query(
            &format!(
                "SELECT {DELIVERY_COLUMNS} FROM outbox WHERE drift_id = $1 ORDER BY created_at, id"
            ),
            &[&drift_id],
        )?;
        let mut deliveries = rows.iter().map(delivery).collect::<Result<Vec<_>, _>>()?;
        // All attempts of the drift's deliveries in one query, in each delivery's order.
        let attempts = self.query(
            "SELECT a.outbox_id, a.at, a.state, a.detail, a.duration_ms FROM delivery_attempts a
             JOIN outbox o ON o.id = a.outbox_id WHERE o.drift_id = $1 ORDER BY a.seq",
            &[&drift_id],
        )?;
        for row in &attempts {
            let outbox_id: String = row.try_get(0)?;
            if let Some(delivery) = deliveries.iter_mut().find(|d| d.id == outbox_id) {
                delivery.attempt_log.push(AttemptView {
                    at: row.try_get(1)?,
                    state: row.try_get(2)?,
                    detail: row.try_get(3)?,
                    duration_ms: row.try_get(4)?,
                });
            }
        }
        Ok(deliveries)
    }

    fn deliveries(
        &self,
        state: Option<OutboxState>,
        channel: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryView>, Error> {
        let state = state.map(OutboxState::as_str);
        let limit = i64::try_from(limit.clamp(1, 1000)).unwrap_or(100);
        let rows = self.query(
            &format!(
                "SELECT {DELIVERY_COLUMNS} FROM outbox
                 WHERE ($1::text IS NULL OR state = $1::text) AND ($2::text IS NULL OR channel = $2::text)
                 ORDER BY created_at DESC, id LIMIT $3"
            ),
            &[&state, &channel, &limit],
        )?;
        rows.iter().map(delivery).collect()
    }

    fn silences(&self) -> Result<Vec<StoredSilence>, Error> {
        let rows = self.query(
            "SELECT id, body, created_at FROM silences ORDER BY created_at, id",
            &[],
        )?;
        super::decode_silences(&rows)
    }

    fn resolved_since(
        &self,
        since: Millis,
        groups: Option<&[String]>,
    ) -> Result<Vec<Drift>, Error> {
        let mut sql = String::from(
            "SELECT body FROM drifts WHERE state = 'resolved' AND fired_at IS NOT NULL AND resolved_at >= $1",
        );
        let mut values: Vec<Param> = vec![Box::new(since)];
        if let Some(groups) = groups {
            sql_groups(&mut sql, &mut values, groups);
        }
        sql.push_str(" ORDER BY resolved_at DESC, id LIMIT 5000");
        let rows = self.query(&sql, &refs(&values))?;
        rows.iter()
            .map(|row| decode_drift(row.try_get(0)?))
            .collect()
    }

    fn firing_counts(&self) -> Result<Vec<FiringCount>, Error> {
        let rows = self.query(
            "SELECT severity, api_group, namespace, COUNT(*) FROM drifts WHERE state = 'firing'
             GROUP BY severity, api_group, namespace ORDER BY severity, api_group, namespace",
            &[],
        )?;
        rows.iter()
            .map(|row| {
                Ok(FiringCount {
                    severity: row.try_get(0)?,
                    group: row.try_get(1)?,
                    namespace: row.try_get(2)?,
                    count: count(row.try_get(3)?),
                })
            })
            .collect()
    }

    fn moves_per_day(&self, start: Millis, days: usize) -> Result<Vec<DayMoves>, Error> {
        let end = start.saturating_add(DAY_MILLIS.saturating_mul(days as i64));
        let rows = self.query(
            "SELECT (at - $1) / $3 AS day,
                    COUNT(*) FILTER (WHERE to_state = 'firing' AND from_state IS DISTINCT FROM 'firing'),
                    COUNT(*) FILTER (WHERE to_state = 'resolved' AND from_state IS NOT DISTINCT FROM 'firing')
             FROM drift_history WHERE at >= $1 AND at < $2 GROUP BY day",
            &[&start, &end, &DAY_MILLIS],
        )?;
        let counted = rows
            .iter()
            .map(|row| {
                Ok((
                    row.try_get::<_, i64>(0)?,
                    count(row.try_get(1)?),
                    count(row.try_get(2)?),
                ))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(dense_days(start, days, counted))
    }
}
