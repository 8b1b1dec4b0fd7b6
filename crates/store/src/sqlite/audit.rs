//! The audit side of the SQLite store: read-only queries for the drift API, the dashboard and the
//! report, on its own connection (WAL lets it read while the writer commits). It never writes:
//! silences go through the single writer like every other write.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, params_from_iter, Connection};

use super::{collect, read_silences, SQL};
use crate::audit::dense_days;
use crate::sql::{decode, drifts, queries, Arg, Statement};
use crate::{
    AuditRead, Cursor, DayMoves, DeliveryView, DriftFilter, Error, FiringCount, HistoryEntry,
    OutboxState, StoredSilence, DAY_MILLIS,
};
use drift_model::{Drift, Millis};

/// Queries for the API.
pub(crate) struct AuditReader {
    connection: Mutex<Connection>,
}

impl AuditReader {
    /// Opens a connection to an existing store file (see [`super::open`]).
    pub(crate) fn open(path: &Path) -> Result<AuditReader, Error> {
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

    /// The drift bodies `statement` selects.
    fn bodies(&self, statement: &Statement) -> Result<Vec<String>, Error> {
        let values = statement.args.iter().map(|arg| match arg {
            Arg::Text(text) => rusqlite::types::Value::Text(text.clone()),
            Arg::Int(value) => rusqlite::types::Value::Integer(*value),
        });
        let connection = self.lock();
        let mut prepared = connection.prepare(&statement.sql)?;
        collect(&mut prepared, params_from_iter(values), |row| {
            Ok(row.get::<_, String>(0)?)
        })
    }
}

impl AuditRead for AuditReader {
    fn drifts(&self, filter: &DriftFilter) -> Result<(Vec<Drift>, Option<Cursor>), Error> {
        let bodies = self.bodies(&drifts::select(SQL, filter))?;
        drifts::page(&bodies, drifts::page_size(filter))
    }

    fn drift(&self, id: &str) -> Result<Option<Drift>, Error> {
        let connection = self.lock();
        let mut statement = connection.prepare(queries::DRIFT.text(SQL))?;
        let found = collect(&mut statement, params![id], |row| decode::drift(row, 0))?;
        Ok(found.into_iter().next())
    }

    fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error> {
        let connection = self.lock();
        let mut statement = connection.prepare(queries::HISTORY.text(SQL))?;
        collect(&mut statement, params![id], |row| {
            decode::history_entry(row)
        })
    }

    fn remediations(&self, id: &str) -> Result<Vec<drift_model::remediation::Attempt>, Error> {
        let connection = self.lock();
        let mut statement = connection.prepare(queries::REMEDIATIONS.text(SQL))?;
        collect(&mut statement, params![id], |row| decode::remediation(row))
    }

    fn remediations_by_outcome(
        &self,
        outcome: drift_model::remediation::Outcome,
        cluster: &str,
        limit: usize,
    ) -> Result<Vec<(i64, drift_model::remediation::Attempt)>, Error> {
        let connection = self.lock();
        let mut statement = connection.prepare(queries::REMEDIATIONS_BY_OUTCOME.text(SQL))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        collect(
            &mut statement,
            params![outcome.as_str(), limit, cluster],
            |row| decode::numbered_remediation(row),
        )
    }

    fn deliveries_of(&self, drift_id: &str) -> Result<Vec<DeliveryView>, Error> {
        let connection = self.lock();
        let mut statement = connection.prepare(queries::DELIVERIES_OF.text(SQL))?;
        let mut deliveries = collect(&mut statement, params![drift_id], |row| {
            decode::delivery(row)
        })?;
        let mut statement = connection.prepare(queries::ATTEMPTS_OF.text(SQL))?;
        let attempts = collect(&mut statement, params![drift_id], |row| {
            decode::attempt(row)
        })?;
        decode::attach_attempts(&mut deliveries, attempts);
        Ok(deliveries)
    }

    fn deliveries(
        &self,
        state: Option<OutboxState>,
        channel: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryView>, Error> {
        let limit = i64::try_from(limit.clamp(1, 1000)).unwrap_or(100);
        let connection = self.lock();
        let mut statement = connection.prepare(queries::DELIVERIES.text(SQL))?;
        collect(
            &mut statement,
            params![state.map(OutboxState::as_str), channel, limit],
            |row| decode::delivery(row),
        )
    }

    fn silences(&self) -> Result<Vec<StoredSilence>, Error> {
        read_silences(&self.lock())
    }

    fn silences_page(
        &self,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<StoredSilence>, Option<Cursor>), Error> {
        let (since, id) = crate::audit::silence_cursor(after);
        let limit = limit.clamp(1, 1000);
        let fetch = i64::try_from(limit + 1).unwrap_or(101);
        let connection = self.lock();
        let mut statement = connection.prepare(queries::SILENCES_PAGE.text(SQL))?;
        let rows = collect(&mut statement, params![since, id, fetch], |row| {
            decode::silence(row)
        })?;
        Ok(crate::audit::silence_page(rows, limit))
    }

    fn resolved_since(
        &self,
        since: Millis,
        groups: Option<&[String]>,
    ) -> Result<Vec<Drift>, Error> {
        let bodies = self.bodies(&drifts::resolved_since(SQL, since, groups))?;
        bodies
            .iter()
            .map(|body| crate::rows::decode_drift(body))
            .collect()
    }

    fn firing_counts(&self) -> Result<Vec<FiringCount>, Error> {
        let connection = self.lock();
        let mut statement = connection.prepare(queries::FIRING_COUNTS.text(SQL))?;
        collect(&mut statement, [], |row| decode::firing_count(row))
    }

    /// Counted by SQLite over the days' history (the `drift_history_at` index).
    fn moves_per_day(&self, start: Millis, days: usize) -> Result<Vec<DayMoves>, Error> {
        let end = start.saturating_add(DAY_MILLIS.saturating_mul(days as i64));
        let connection = self.lock();
        let mut statement = connection.prepare(queries::MOVES_PER_DAY.text(SQL))?;
        let counted = collect(&mut statement, params![start, end, DAY_MILLIS], |row| {
            decode::day_moves(row)
        })?;
        Ok(dense_days(start, days, counted))
    }
}
