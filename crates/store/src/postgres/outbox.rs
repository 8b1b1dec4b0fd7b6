//! The delivery side of the PostgreSQL store: claims, settlements and attempts of queued
//! notifications, on its own connection. The statements are SQLite's (`sqlite/outbox.rs`) in
//! PostgreSQL's words; the contract suite holds both to the same answers.

use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::conn::{wait, Conn, Target};
use crate::{
    Error, FollowUp, Lease, NewOutbox, Outbox, OutboxRow, OutboxState, OutboxStats, Settlement,
};
use drift_model::{DriftState, Millis};

/// The delivery side of the PostgreSQL store.
pub struct PostgresOutbox {
    conn: Conn,
    /// The shard whose notifications this handle serves (`None`: every row, one deployment).
    shard: Option<String>,
}

impl PostgresOutbox {
    /// Opens the outbox's connection (the schema is the writer's to create: see `open`).
    pub(super) fn open(target: &Target) -> Result<PostgresOutbox, Error> {
        Ok(PostgresOutbox {
            conn: Conn::open(target)?,
            shard: None,
        })
    }
}

/// The rows a relay of `$shard` may send: its shard's and those without one. A bound NULL
/// (no shard assigned) sees every row.
const SERVED_BY: &str = "($SHARD::text IS NULL OR shard = $SHARD::text OR shard IS NULL)";

/// [`SERVED_BY`] with the shard as parameter `$n`.
fn served_by(n: usize) -> String {
    SERVED_BY.replace("$SHARD", &format!("${n}"))
}

pub(super) const OUTBOX_COLUMNS: &str = "id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, attempts, next_attempt_at, state, last_error, finished_at, message_id, claimed_by";

pub(super) fn outbox_row(row: &Row) -> Result<OutboxRow, Error> {
    let state: String = row.try_get(11)?;
    let attempts: i64 = row.try_get(9)?;
    Ok(OutboxRow {
        queued: NewOutbox {
            id: row.try_get(0)?,
            channel: row.try_get(1)?,
            drift_id: row.try_get(2)?,
            kind: row.try_get(3)?,
            group_key: row.try_get(4)?,
            payload: row.try_get(5)?,
            created_at: row.try_get(6)?,
            not_before: row.try_get(7)?,
            repeat_after_ms: row.try_get(8)?,
        },
        attempts: u32::try_from(attempts.max(0)).unwrap_or(u32::MAX),
        next_attempt_at: row.try_get(10)?,
        state: OutboxState::parse(&state).unwrap_or(OutboxState::Pending),
        last_error: row.try_get(12)?,
        finished_at: row.try_get(13)?,
        message_id: row.try_get(14)?,
        claimed_by: row.try_get(15)?,
    })
}

/// Queues rows as `shard`'s; a row whose id is already queued is left as it is (SQLite's
/// `INSERT OR IGNORE`).
pub(super) async fn insert_outbox(
    client: &impl tokio_postgres::GenericClient,
    rows: &[NewOutbox],
    shard: Option<&str>,
) -> Result<(), Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let insert = client
        .prepare(
            "INSERT INTO outbox (id, channel, drift_id, kind, group_key, payload, created_at, not_before, repeat_after_ms, next_attempt_at, shard)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $8, $10) ON CONFLICT DO NOTHING",
        )
        .await?;
    super::pipelined(rows.iter().map(|row| {
        client.execute_raw(
            &insert,
            [
                &row.id as &(dyn tokio_postgres::types::ToSql + Sync),
                &row.channel,
                &row.drift_id,
                &row.kind,
                &row.group_key,
                &row.payload,
                &row.created_at,
                &row.not_before,
                &row.repeat_after_ms,
                &shard,
            ],
        )
    }))
    .await?;
    Ok(())
}

fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl Outbox for PostgresOutbox {
    fn due(
        &mut self,
        channel: &str,
        now: Millis,
        limit: usize,
        owner: &str,
    ) -> Result<Vec<OutboxRow>, Error> {
        let client = self.conn.client()?;
        let rows = wait(client.query(
            &format!(
                "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE channel = $1 AND state = 'pending'
                 AND next_attempt_at <= $2
                 AND (claimed_by IS NULL OR claimed_by = $3 OR claimed_until <= $2)
                 AND {}
                 ORDER BY created_at, id LIMIT $4",
                served_by(5)
            ),
            &[&channel, &now, &owner, &limit_of(limit), &self.shard],
        ))?;
        rows.iter().map(outbox_row).collect()
    }

    fn next_due(&mut self, channel: &str, owner: &str) -> Result<Option<Millis>, Error> {
        // A row another relay holds is due for this one only once that claim lapses.
        let client = self.conn.client()?;
        let row = wait(client.query_one(
            &format!(
                "SELECT MIN(CASE WHEN claimed_by IS NOT NULL AND claimed_by != $2
                                 AND claimed_until > next_attempt_at
                            THEN claimed_until ELSE next_attempt_at END)
                 FROM outbox WHERE channel = $1 AND state = 'pending' AND {}",
                served_by(3)
            ),
            &[&channel, &owner, &self.shard],
        ))?;
        Ok(row.try_get(0)?)
    }

    fn claim(
        &mut self,
        ids: &[String],
        message_id: &str,
        lease: &Lease,
        now: Millis,
    ) -> Result<Vec<String>, Error> {
        // One transaction, each row's check and claim one UPDATE: a concurrent claim of the same
        // row waits for the row lock and then re-checks the condition, so one of them gets it.
        let client = self.conn.client()?;
        wait(async {
            let transaction = client.transaction().await?;
            let update = transaction
                .prepare(
                    "UPDATE outbox SET claimed_by = $2, claimed_until = $3,
                     message_id = COALESCE(message_id, $4)
                     WHERE id = $1 AND state = 'pending'
                     AND (claimed_by IS NULL OR claimed_by = $2 OR claimed_until <= $5)",
                )
                .await?;
            let mut held = Vec::with_capacity(ids.len());
            for id in ids {
                let changed = transaction
                    .execute(
                        &update,
                        &[id, &lease.owner, &lease.until, &message_id, &now],
                    )
                    .await?;
                if changed == 1 {
                    held.push(id.clone());
                }
            }
            transaction.commit().await?;
            Ok(held)
        })
    }

    fn settle(&mut self, settlement: &Settlement, follow_ups: &[FollowUp]) -> Result<(), Error> {
        // A receiver's words (an error body, a message id) may hold a NUL, which PostgreSQL text
        // cannot: replaced, or the settlement would fail at every attempt and the row be sent
        // forever (SQLite stores it as it is).
        let clean = |text: &str| text.replace('\0', "\u{FFFD}");
        let settlement = &Settlement {
            detail: clean(&settlement.detail),
            message_id: settlement.message_id.as_deref().map(clean),
            ..settlement.clone()
        };
        let client = self.conn.client()?;
        wait(async {
            let transaction = client.transaction().await?;
            let finished = (settlement.state != OutboxState::Pending).then_some(settlement.at);
            // An attempt settles only rows its owner holds; a decision taken without sending,
            // only rows no one else holds now.
            let update = transaction
                .prepare(
                    "UPDATE outbox SET state = $2, next_attempt_at = $3,
                     attempts = attempts + CASE WHEN $4::boolean THEN 1 ELSE 0 END,
                     last_error = $5, finished_at = $6, message_id = COALESCE(message_id, $7),
                     claimed_by = NULL, claimed_until = NULL
                     WHERE id = $1 AND state = 'pending'
                     AND CASE WHEN $4::boolean THEN claimed_by IS NOT NULL AND claimed_by = $8::text
                         ELSE claimed_by IS NULL OR claimed_until <= $9
                              OR ($8::text IS NOT NULL AND claimed_by = $8::text) END
                     RETURNING shard",
                )
                .await?;
            let attempt = transaction
                .prepare(
                    "INSERT INTO delivery_attempts (outbox_id, at, state, detail, duration_ms)
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .await?;
            let error =
                (settlement.state != OutboxState::Delivered).then_some(settlement.detail.as_str());
            let state = settlement.state.as_str();
            // Each settled row's shard: its reminders are that shard's too.
            let mut settled = std::collections::HashMap::<&str, Option<String>>::new();
            for id in &settlement.ids {
                let params: [&(dyn ToSql + Sync); 9] = [
                    id,
                    &state,
                    &settlement.next_attempt_at,
                    &settlement.attempted,
                    &error,
                    &finished,
                    &settlement.message_id,
                    &settlement.owner,
                    &settlement.at,
                ];
                let Some(row) = transaction.query_opt(&update, &params).await? else {
                    // Not this settlement's to record: another relay holds it, or it ended.
                    continue;
                };
                settled.insert(id.as_str(), row.try_get(0)?);
                transaction
                    .execute(
                        &attempt,
                        &[
                            id,
                            &settlement.at,
                            &state,
                            &settlement.detail,
                            &settlement.duration_ms,
                        ],
                    )
                    .await?;
            }
            // Follow-ups (reminders) belong to the rows that were settled here, and to their
            // shards (a row without one, sent by whichever shard claimed it, keeps none).
            let mut by_shard = std::collections::BTreeMap::<Option<&str>, Vec<NewOutbox>>::new();
            for follow in follow_ups {
                if let Some(shard) = settled.get(follow.of.as_str()) {
                    by_shard
                        .entry(shard.as_deref())
                        .or_default()
                        .push(follow.queued.clone());
                }
            }
            for (shard, rows) in &by_shard {
                insert_outbox(&transaction, rows, *shard).await?;
            }
            transaction.commit().await?;
            Ok(())
        })
    }

    fn release(&mut self, owner: &str) -> Result<usize, Error> {
        let client = self.conn.client()?;
        let changed = wait(client.execute(
            "UPDATE outbox SET claimed_by = NULL, claimed_until = NULL
             WHERE claimed_by = $1 AND state = 'pending'",
            &[&owner],
        ))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    fn claim_owners(&mut self) -> Result<Vec<String>, Error> {
        let client = self.conn.client()?;
        let rows = wait(client.query(
            "SELECT DISTINCT claimed_by FROM outbox WHERE claimed_by IS NOT NULL AND state = 'pending'
             ORDER BY claimed_by",
            &[],
        ))?;
        Ok(rows
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()?)
    }

    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error> {
        let client = self.conn.client()?;
        Ok(wait(client.query_opt(
            "SELECT 1 FROM outbox WHERE drift_id = $1 AND channel = $2 AND kind = 'firing'
             AND state = 'pending' AND created_at < $3 LIMIT 1",
            &[&drift_id, &channel, &created_at],
        ))?
        .is_some())
    }

    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error> {
        let client = self.conn.client()?;
        // A shard ends only its own rows: another shard's channels are not this one's to know,
        // and rows without a shard may be any shard's.
        let pending = wait(client.query(
            "SELECT id, channel FROM outbox WHERE state = 'pending'
             AND ($1::text IS NULL OR shard = $1::text)",
            &[&self.shard],
        ))?;
        let mut orphaned = Vec::new();
        for row in &pending {
            let channel: String = row.try_get(1)?;
            if !known.contains(&channel) {
                orphaned.push(row.try_get::<_, String>(0)?);
            }
        }
        if orphaned.is_empty() {
            return Ok(0);
        }
        let count = orphaned.len();
        let settlement = Settlement::orphans_expired(orphaned, now);
        self.settle(&settlement, &[])?;
        Ok(count)
    }

    fn cancel_reminders(
        &mut self,
        drift_id: &str,
        channel: &str,
        owner: &str,
        now: Millis,
    ) -> Result<usize, Error> {
        let client = self.conn.client()?;
        let changed = wait(client.execute(
            "DELETE FROM outbox WHERE drift_id = $1 AND channel = $2 AND kind = 'repeat' AND state = 'pending'
             AND (claimed_by IS NULL OR claimed_by = $3 OR claimed_until <= $4)",
            &[&drift_id, &channel, &owner, &now],
        ))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error> {
        let client = self.conn.client()?;
        let row = wait(client.query_opt("SELECT state FROM drifts WHERE id = $1", &[&drift_id]))?;
        let state: Option<String> = row.map(|row| row.try_get(0)).transpose()?;
        Ok(state.and_then(|state| match state.as_str() {
            "pending" => Some(DriftState::Pending),
            "firing" => Some(DriftState::Firing),
            "resolved" => Some(DriftState::Resolved),
            _ => None,
        }))
    }

    fn stats(&mut self) -> Result<OutboxStats, Error> {
        let client = self.conn.client()?;
        let row = wait(client.query_one(
            &format!(
                "SELECT COUNT(*) FILTER (WHERE state = 'pending'),
                    MIN(created_at) FILTER (WHERE state = 'pending'),
                    COUNT(*) FILTER (WHERE state = 'rejected'),
                    COUNT(*) FILTER (WHERE state = 'expired')
             FROM outbox WHERE {}",
                served_by(1)
            ),
            &[&self.shard],
        ))?;
        Ok(OutboxStats {
            pending: row.try_get(0)?,
            oldest_pending: row.try_get(1)?,
            rejected: row.try_get(2)?,
            expired: row.try_get(3)?,
        })
    }

    fn assign_shard(&mut self, shard: &str) -> Result<(), Error> {
        self.shard = Some(shard.to_string());
        Ok(())
    }

    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error> {
        let client = self.conn.client()?;
        let state = state.map(OutboxState::as_str);
        let rows = wait(client.query(
            &format!(
                "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE ($1::text IS NULL OR state = $1::text)
                 ORDER BY created_at DESC, id LIMIT $2"
            ),
            &[&state, &limit_of(limit)],
        ))?;
        rows.iter().map(outbox_row).collect()
    }
}
