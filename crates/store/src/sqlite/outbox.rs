//! The delivery side of the SQLite store: claims, settlements and attempts of queued
//! notifications, on its own connection.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{collect, wait_briefly_when_busy, SQL, WRITER_AUTOCHECKPOINT_PAGES};
use crate::rows::notice_payload;
use crate::sql::{decode, queries, Row};
use crate::{
    Due, Error, FollowUp, Lease, NewOutbox, Outbox, OutboxRow, OutboxState, OutboxStats, Settlement,
};
use drift_model::{DriftState, Millis};

/// The delivery side of the SQLite store, on its own connection (WAL lets it read while the
/// writer commits; SQLite serializes the two writers with `busy_timeout`).
pub(crate) struct SqliteOutbox {
    connection: Connection,
}

impl SqliteOutbox {
    /// Opens the outbox on an existing store file. The store must exist (see [`super::open`], which opens the writer first).
    pub(crate) fn open(path: &Path) -> Result<SqliteOutbox, Error> {
        let mut connection = Connection::open(path)?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        wait_briefly_when_busy(&mut connection)?;
        connection.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT_PAGES)?;
        Ok(SqliteOutbox { connection })
    }

    /// Commits without waiting for the disk (see `SqliteStore::open_without_fsync`).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn skip_fsync(&self) -> Result<(), Error> {
        Ok(self.connection.pragma_update(None, "synchronous", "OFF")?)
    }
}

impl Outbox for SqliteOutbox {
    fn due(&mut self, channel: &str, now: Millis, limit: usize, owner: &str) -> Result<Due, Error> {
        let mut statement = self.connection.prepare_cached(queries::DUE.text(SQL))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut due = Due::default();
        for row in collect(&mut statement, params![channel, now, owner, limit], |row| {
            decode::outbox_row(row)
        })? {
            match row {
                Ok(row) => due.rows.push(row),
                Err(unreadable) => due.unreadable.push(unreadable),
            }
        }
        Ok(due)
    }

    fn next_due(&mut self, channel: &str, owner: &str) -> Result<Option<Millis>, Error> {
        // The relay's every-round queries are prepared once per connection (`prepare_cached`):
        // parsing the SQL was a visible share of the relay's time under load.
        Ok(self
            .connection
            .prepare_cached(queries::NEXT_DUE.text(SQL))?
            .query_row(params![channel, owner], |row| row.get(0))?)
    }

    fn claim(
        &mut self,
        ids: &[String],
        message_id: &str,
        lease: &Lease,
        now: Millis,
    ) -> Result<Vec<String>, Error> {
        // One write transaction: the check and the claim cannot interleave with another
        // process's claim of the same rows.
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut held = Vec::with_capacity(ids.len());
        {
            let mut update = transaction.prepare_cached(queries::CLAIM.text(SQL))?;
            for id in ids {
                if update.execute(params![id, lease.owner, lease.until, message_id, now])? == 1 {
                    held.push(id.clone());
                }
            }
        }
        transaction.commit()?;
        Ok(held)
    }

    fn settle(&mut self, settlement: &Settlement, follow_ups: &[FollowUp]) -> Result<(), Error> {
        let transaction = self.connection.transaction()?;
        {
            let finished = (settlement.state != OutboxState::Pending).then_some(settlement.at);
            // An attempt settles only rows its owner holds; a decision taken without sending,
            // only rows no one else holds now.
            let mut update = transaction.prepare_cached(queries::SETTLE.text(SQL))?;
            let mut attempt = transaction.prepare_cached(queries::INSERT_ATTEMPT.text(SQL))?;
            let error =
                (settlement.state != OutboxState::Delivered).then_some(settlement.detail.as_str());
            let mut settled = std::collections::HashSet::new();
            for id in &settlement.ids {
                let changed = update.execute(params![
                    id,
                    settlement.state.as_str(),
                    settlement.next_attempt_at,
                    settlement.attempted,
                    error,
                    finished,
                    settlement.message_id,
                    settlement.owner,
                    settlement.at
                ])?;
                if changed == 0 {
                    // Not this settlement's to record: another relay holds it, or it ended.
                    continue;
                }
                settled.insert(id.as_str());
                attempt.execute(params![
                    id,
                    settlement.at,
                    settlement.state.as_str(),
                    settlement.detail,
                    settlement.duration_ms
                ])?;
            }
            // Follow-ups (reminders) belong to the rows that were settled here.
            let follow_ups: Vec<NewOutbox> = follow_ups
                .iter()
                .filter(|follow| settled.contains(follow.of.as_str()))
                .map(|follow| follow.queued.clone())
                .collect();
            insert_outbox(&transaction, &follow_ups)?;
        }
        transaction.commit()?;
        Ok(())
    }

    fn release(&mut self, owner: &str) -> Result<usize, Error> {
        Ok(self
            .connection
            .execute(queries::RELEASE.text(SQL), params![owner])?)
    }

    fn claim_owners(&mut self) -> Result<Vec<String>, Error> {
        let mut statement = self.connection.prepare(queries::CLAIM_OWNERS.text(SQL))?;
        collect(&mut statement, [], |row| Ok(row.text(0)?.to_string()))
    }

    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error> {
        Ok(self
            .connection
            .prepare_cached(queries::FIRING_PENDING_BEFORE.text(SQL))?
            .query_row(params![drift_id, channel, created_at], |_| Ok(()))
            .optional()?
            .is_some())
    }

    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error> {
        let pending: Vec<(String, String)> = {
            let mut statement = self
                .connection
                .prepare(queries::PENDING_CHANNELS.text(SQL))?;
            collect(&mut statement, [], |row| {
                Ok((row.text(0)?.to_string(), row.text(1)?.to_string()))
            })?
        };
        let orphaned: Vec<String> = pending
            .into_iter()
            .filter(|(_, channel)| !known.contains(channel))
            .map(|(id, _)| id)
            .collect();
        if orphaned.is_empty() {
            return Ok(0);
        }
        let settlement = Settlement::orphans_expired(orphaned.clone(), now);
        self.settle(&settlement, &[])?;
        Ok(orphaned.len())
    }

    fn cancel_reminders(
        &mut self,
        drift_id: &str,
        channel: &str,
        owner: &str,
        now: Millis,
        sending: Option<&str>,
    ) -> Result<usize, Error> {
        // Nearly always there is nothing to withdraw (the writer deletes a resolved drift's
        // reminders in the resolve's own commit): look first, so the common case takes no write
        // lock and no commit away from the writer.
        let any: Option<i64> = self
            .connection
            .prepare_cached(queries::CHANNEL_REMINDER_PENDING.text(SQL))?
            .query_row(params![drift_id, channel, owner, now, sending], |row| {
                row.get(0)
            })
            .optional()?;
        if any.is_none() {
            return Ok(0);
        }
        Ok(self.connection.execute(
            queries::CANCEL_CHANNEL_REMINDERS.text(SQL),
            params![drift_id, channel, owner, now, sending],
        )?)
    }

    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error> {
        let state: Option<String> = self
            .connection
            .prepare_cached(queries::DRIFT_STATE.text(SQL))?
            .query_row(params![drift_id], |row| row.get(0))
            .optional()?;
        Ok(state.as_deref().and_then(decode::drift_state))
    }

    fn stats(&mut self) -> Result<OutboxStats, Error> {
        let count = |state: &str| -> Result<i64, Error> {
            Ok(self.connection.query_row(
                queries::COUNT_IN_STATE.text(SQL),
                params![state],
                |row| row.get(0),
            )?)
        };
        let (rejected, expired) = (count("rejected")?, count("expired")?);
        let mut statement = self.connection.prepare(queries::PENDING_STATS.text(SQL))?;
        let mut rows = statement.query([])?;
        let pending = rows.next()?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
        decode::stats(pending, rejected, expired)
    }

    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error> {
        let mut statement = self.connection.prepare(queries::ROWS.text(SQL))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        collect(
            &mut statement,
            params![state.map(OutboxState::as_str), limit],
            |row| decode::readable_outbox_row(row),
        )
    }
}

/// Queues `rows` (SQLite's outbox has no shards); a row whose id is already queued is left as
/// it is.
pub(super) fn insert_outbox(connection: &Connection, rows: &[NewOutbox]) -> Result<(), Error> {
    let mut insert = connection.prepare_cached(queries::INSERT_OUTBOX.text(SQL))?;
    for row in rows {
        insert.execute(params![
            row.id,
            row.channel,
            row.drift_id,
            row.kind().as_str(),
            row.group_key,
            notice_payload(&row.notice)?,
            row.created_at,
            row.not_before,
            row.repeat_after_ms
        ])?;
    }
    Ok(())
}
