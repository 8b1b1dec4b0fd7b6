//! The delivery side of the SQLite store: claims, settlements and attempts of queued
//! notifications, on its own connection.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{wait_briefly_when_busy, WRITER_AUTOCHECKPOINT_PAGES};
use crate::{
    Error, FollowUp, Lease, NewOutbox, Outbox, OutboxRow, OutboxState, OutboxStats, Settlement,
};
use drift_model::{DriftState, Millis};

/// The delivery side of the SQLite store, on its own connection (WAL lets it read while the
/// writer commits; SQLite serializes the two writers with `busy_timeout`).
pub struct SqliteOutbox {
    connection: Connection,
}

impl SqliteOutbox {
    /// Opens the outbox on an existing store file. The store must exist (see [`super::open`], which opens the writer first).
    pub(super) fn open(path: &Path) -> Result<SqliteOutbox, Error> {
        let mut connection = Connection::open(path)?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        wait_briefly_when_busy(&mut connection)?;
        connection.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT_PAGES)?;
        Ok(SqliteOutbox { connection })
    }
}

impl Outbox for SqliteOutbox {
    fn due(
        &mut self,
        channel: &str,
        now: Millis,
        limit: usize,
        owner: &str,
    ) -> Result<Vec<OutboxRow>, Error> {
        let mut statement = self.connection.prepare_cached(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE channel = ?1 AND state = 'pending'
             AND next_attempt_at <= ?2
             AND (claimed_by IS NULL OR claimed_by = ?3 OR claimed_until <= ?2)
             ORDER BY created_at, id LIMIT ?4"
        ))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = statement.query_map(params![channel, now, owner, limit], outbox_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn next_due(&mut self, channel: &str, owner: &str) -> Result<Option<Millis>, Error> {
        // A row another relay holds is due for this one only once that claim lapses.
        Ok(self.connection.query_row(
            "SELECT MIN(CASE WHEN claimed_by IS NOT NULL AND claimed_by != ?2
                             AND claimed_until > next_attempt_at
                        THEN claimed_until ELSE next_attempt_at END)
             FROM outbox WHERE channel = ?1 AND state = 'pending'",
            params![channel, owner],
            |row| row.get(0),
        )?)
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
            let mut update = transaction.prepare_cached(
                "UPDATE outbox SET claimed_by = ?2, claimed_until = ?3,
                 message_id = COALESCE(message_id, ?4)
                 WHERE id = ?1 AND state = 'pending'
                 AND (claimed_by IS NULL OR claimed_by = ?2 OR claimed_until <= ?5)",
            )?;
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
            let mut update = transaction.prepare_cached(
                "UPDATE outbox SET state = ?2, next_attempt_at = ?3, attempts = attempts + ?4,
                 last_error = ?5, finished_at = ?6, message_id = COALESCE(message_id, ?7),
                 claimed_by = NULL, claimed_until = NULL
                 WHERE id = ?1 AND state = 'pending'
                 AND CASE WHEN ?4 = 1 THEN claimed_by IS NOT NULL AND claimed_by = ?8
                     ELSE claimed_by IS NULL OR claimed_until <= ?9
                          OR (?8 IS NOT NULL AND claimed_by = ?8) END",
            )?;
            let mut attempt = transaction.prepare_cached(
                "INSERT INTO delivery_attempts (outbox_id, at, state, detail, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let error =
                (settlement.state != OutboxState::Delivered).then_some(settlement.detail.as_str());
            let mut settled = std::collections::HashSet::new();
            for id in &settlement.ids {
                let changed = update.execute(params![
                    id,
                    settlement.state.as_str(),
                    settlement.next_attempt_at,
                    u32::from(settlement.attempted),
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
        Ok(self.connection.execute(
            "UPDATE outbox SET claimed_by = NULL, claimed_until = NULL
             WHERE claimed_by = ?1 AND state = 'pending'",
            params![owner],
        )?)
    }

    fn claim_owners(&mut self) -> Result<Vec<String>, Error> {
        let mut statement = self.connection.prepare(
            "SELECT DISTINCT claimed_by FROM outbox WHERE claimed_by IS NOT NULL AND state = 'pending'
             ORDER BY claimed_by",
        )?;
        let owners = statement.query_map([], |row| row.get::<_, String>(0))?;
        Ok(owners.collect::<Result<Vec<_>, _>>()?)
    }

    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error> {
        Ok(self
            .connection
            .query_row(
                "SELECT 1 FROM outbox WHERE drift_id = ?1 AND channel = ?2 AND kind = 'firing'
                 AND state = 'pending' AND created_at < ?3 LIMIT 1",
                params![drift_id, channel, created_at],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error> {
        let pending: Vec<(String, String)> = {
            let mut statement = self
                .connection
                .prepare("SELECT id, channel FROM outbox WHERE state = 'pending'")?;
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
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
    ) -> Result<usize, Error> {
        // Nearly always there is nothing to withdraw (the writer deletes a resolved drift's
        // reminders in the resolve's own commit): look first, so the common case takes no write
        // lock and no commit away from the writer.
        let any: Option<i64> = self
            .connection
            .prepare_cached(
                "SELECT 1 FROM outbox WHERE drift_id = ?1 AND channel = ?2 AND kind = 'repeat' AND state = 'pending'
                 AND (claimed_by IS NULL OR claimed_by = ?3 OR claimed_until <= ?4) LIMIT 1",
            )?
            .query_row(params![drift_id, channel, owner, now], |row| row.get(0))
            .optional()?;
        if any.is_none() {
            return Ok(0);
        }
        Ok(self.connection.execute(
            "DELETE FROM outbox WHERE drift_id = ?1 AND channel = ?2 AND kind = 'repeat' AND state = 'pending'
             AND (claimed_by IS NULL OR claimed_by = ?3 OR claimed_until <= ?4)",
            params![drift_id, channel, owner, now],
        )?)
    }

    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error> {
        let state: Option<String> = self
            .connection
            .query_row(
                "SELECT state FROM drifts WHERE id = ?1",
                params![drift_id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(state.and_then(|state| match state.as_str() {
            "pending" => Some(DriftState::Pending),
            "firing" => Some(DriftState::Firing),
            "resolved" => Some(DriftState::Resolved),
            _ => None,
        }))
    }

    fn stats(&mut self) -> Result<OutboxStats, Error> {
        let (pending, oldest): (i64, Option<Millis>) = self.connection.query_row(
            "SELECT COUNT(*), MIN(created_at) FROM outbox WHERE state = 'pending'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        let count = |state: &str| -> Result<i64, Error> {
            Ok(self.connection.query_row(
                "SELECT COUNT(*) FROM outbox WHERE state = ?1",
                params![state],
                |row| row.get(0),
            )?)
        };
        Ok(OutboxStats {
            pending,
            oldest_pending: oldest,
            rejected: count("rejected")?,
            expired: count("expired")?,
        })
    }

    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error> {
        let mut statement = self.connection.prepare(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE (?1 IS NULL OR state = ?1) ORDER BY created_at DESC, id LIMIT ?2"
        ))?;
        let rows =
            statement.query_map(params![state.map(|s| s.as_str()), limit as i64], outbox_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

pub(super) fn insert_outbox(connection: &Connection, rows: &[NewOutbox]) -> Result<(), Error> {
    let mut insert = connection.prepare_cached(
        "INSERT OR IGNORE INTO outbox (id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, next_attempt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?8)",
    )?;
    for row in rows {
        insert.execute(params![
            row.id,
            row.channel,
            row.drift_id,
            row.kind,
            row.group_key,
            row.payload,
            row.created_at,
            row.not_before,
            row.repeat_after_ms
        ])?;
    }
    Ok(())
}

const OUTBOX_COLUMNS: &str = "id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, attempts, next_attempt_at, state, last_error, finished_at, message_id, claimed_by";

fn outbox_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    let state: String = row.get(11)?;
    Ok(OutboxRow {
        queued: NewOutbox {
            id: row.get(0)?,
            channel: row.get(1)?,
            drift_id: row.get(2)?,
            kind: row.get(3)?,
            group_key: row.get(4)?,
            payload: row.get(5)?,
            created_at: row.get(6)?,
            not_before: row.get(7)?,
            repeat_after_ms: row.get(8)?,
        },
        attempts: row.get(9)?,
        next_attempt_at: row.get(10)?,
        state: OutboxState::parse(&state).unwrap_or(OutboxState::Pending),
        last_error: row.get(12)?,
        finished_at: row.get(13)?,
        message_id: row.get(14)?,
        claimed_by: row.get(15)?,
    })
}
