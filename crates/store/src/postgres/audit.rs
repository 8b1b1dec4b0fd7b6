//! The audit side of the PostgreSQL store: read-only queries for the drift API, the dashboard and
//! the report, on its own connection. The statements are the shared ones (`sql/`); the contract
//! suite holds both backends to the same answers.

use std::sync::Mutex;

use tokio_postgres::types::ToSql;

use super::conn::{wait, Conn, Target};
use super::{collect, SQL};
use crate::audit::dense_days;
use crate::sql::{decode, drifts, queries, Arg, Row, Statement};
use crate::{
    AuditRead, Cursor, DayMoves, DeliveryView, DriftFilter, Error, FiringCount, HistoryEntry,
    OutboxState, StoredSilence, DAY_MILLIS,
};
use drift_model::{Drift, Millis};

/// Queries for the API.
pub(crate) struct PostgresAudit {
    conn: Mutex<Conn>,
}

/// The values of a statement built at run time, as parameters.
fn params(statement: &Statement) -> Vec<&(dyn ToSql + Sync)> {
    statement
        .args
        .iter()
        .map(|arg| match arg {
            Arg::Text(text) => text as &(dyn ToSql + Sync),
            Arg::Int(value) => value,
        })
        .collect()
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
        let statement = drifts::select(SQL, filter);
        let rows = self.query(&statement.sql, &params(&statement))?;
        let bodies = rows
            .iter()
            .map(|row| row.text(0))
            .collect::<Result<Vec<&str>, Error>>()?;
        drifts::page(&bodies, drifts::page_size(filter))
    }

    fn drift(&self, id: &str) -> Result<Option<Drift>, Error> {
        let rows = self.query(queries::DRIFT.text(SQL), &[&id])?;
        rows.first().map(|row| decode::drift(row, 0)).transpose()
    }

    fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error> {
        let rows = self.query(queries::HISTORY.text(SQL), &[&id])?;
        collect(&rows, decode::history_entry)
    }

    fn remediations(&self, id: &str) -> Result<Vec<drift_model::remediation::Attempt>, Error> {
        let rows = self.query(queries::REMEDIATIONS.text(SQL), &[&id])?;
        collect(&rows, decode::remediation)
    }

    fn remediations_by_outcome(
        &self,
        outcome: drift_model::remediation::Outcome,
        cluster: &str,
        limit: usize,
    ) -> Result<Vec<(i64, drift_model::remediation::Attempt)>, Error> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.query(
            queries::REMEDIATIONS_BY_OUTCOME.text(SQL),
            &[&outcome.as_str(), &limit, &cluster],
        )?;
        collect(&rows, decode::numbered_remediation)
    }

    fn deliveries_of(&self, drift_id: &str) -> Result<Vec<DeliveryView>, Error> {
        let rows = self.query(queries::DELIVERIES_OF.text(SQL), &[&drift_id])?;
        let mut deliveries = collect(&rows, decode::delivery)?;
        let attempts = self.query(queries::ATTEMPTS_OF.text(SQL), &[&drift_id])?;
        decode::attach_attempts(&mut deliveries, collect(&attempts, decode::attempt)?);
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
        let rows = self.query(queries::DELIVERIES.text(SQL), &[&state, &channel, &limit])?;
        collect(&rows, decode::delivery)
    }

    fn silences(&self) -> Result<Vec<StoredSilence>, Error> {
        let rows = self.query(queries::SILENCES.text(SQL), &[])?;
        collect(&rows, decode::silence)
    }

    fn silences_page(
        &self,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<StoredSilence>, Option<Cursor>), Error> {
        let (since, id) = crate::audit::silence_cursor(after);
        let limit = limit.clamp(1, 1000);
        let fetch = i64::try_from(limit + 1).unwrap_or(101);
        let rows = self.query(queries::SILENCES_PAGE.text(SQL), &[&since, &id, &fetch])?;
        Ok(crate::audit::silence_page(
            collect(&rows, decode::silence)?,
            limit,
        ))
    }

    fn resolved_since(
        &self,
        since: Millis,
        groups: Option<&[String]>,
    ) -> Result<Vec<Drift>, Error> {
        let statement = drifts::resolved_since(SQL, since, groups);
        let rows = self.query(&statement.sql, &params(&statement))?;
        collect(&rows, |row| decode::drift(row, 0))
    }

    fn firing_counts(&self) -> Result<Vec<FiringCount>, Error> {
        let rows = self.query(queries::FIRING_COUNTS.text(SQL), &[])?;
        collect(&rows, decode::firing_count)
    }

    fn moves_per_day(&self, start: Millis, days: usize) -> Result<Vec<DayMoves>, Error> {
        let end = start.saturating_add(DAY_MILLIS.saturating_mul(days as i64));
        let rows = self.query(
            queries::MOVES_PER_DAY.text(SQL),
            &[&start, &end, &DAY_MILLIS],
        )?;
        Ok(dense_days(start, days, collect(&rows, decode::day_moves)?))
    }
}
