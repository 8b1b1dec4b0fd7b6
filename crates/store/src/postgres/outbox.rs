//! The delivery side of the PostgreSQL store: claims, settlements and attempts of queued
//! notifications, on its own connection. The statements are the shared ones (`sql/queries.rs`)
//! with the outbox's shards; the contract suite holds both backends to the same answers.

use tokio_postgres::types::ToSql;

use super::conn::{wait, Conn, Target};
use super::{collect, encode_all, pipelined, SQL};
use crate::rows::notice_payload;
use crate::sql::{decode, queries, Row};
use crate::{
    Due, Error, FollowUp, Lease, NewOutbox, Outbox, OutboxRow, OutboxState, OutboxStats, Settlement,
};
use drift_model::{DriftState, Millis};

/// The delivery side of the PostgreSQL store.
pub(crate) struct PostgresOutbox {
    conn: Conn,
    /// The shard whose notifications this handle serves (`None`: every row, one deployment).
    shard: Option<String>,
}

impl PostgresOutbox {
    /// Opens the outbox's connection (the schema is the writer's to create: see `open`).
    pub(crate) fn open(target: &Target) -> Result<PostgresOutbox, Error> {
        Ok(PostgresOutbox {
            conn: Conn::open(target)?,
            shard: None,
        })
    }
}

/// Each of `rows` with its payload, or the first whose notice cannot be encoded (as `Corrupt`).
pub(super) fn encode(rows: &[NewOutbox]) -> Result<Vec<(&NewOutbox, String)>, Error> {
    encode_all(rows, |row| notice_payload(&row.notice))
}

/// Queues rows (with their payloads, [`encode`]) as `shard`'s; a row whose id is already
/// queued is left as it is.
pub(super) async fn insert_outbox(
    client: &impl tokio_postgres::GenericClient,
    rows: &[(&NewOutbox, String)],
    shard: Option<&str>,
) -> Result<(), Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let insert = client.prepare(queries::INSERT_OUTBOX.text(SQL)).await?;
    let kinds: Vec<&str> = rows.iter().map(|(row, _)| row.kind().as_str()).collect();
    pipelined(rows.iter().zip(&kinds).map(|((row, payload), kind)| {
        client.execute_raw(
            &insert,
            [
                &row.id as &(dyn ToSql + Sync),
                &row.channel,
                &row.drift_id,
                kind,
                &row.group_key,
                payload,
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
    fn due(&mut self, channel: &str, now: Millis, limit: usize, owner: &str) -> Result<Due, Error> {
        let client = self.conn.client()?;
        let rows = wait(client.query(
            queries::DUE.text(SQL),
            &[&channel, &now, &owner, &limit_of(limit), &self.shard],
        ))?;
        let mut due = Due::default();
        for row in collect(&rows, decode::outbox_row)? {
            match row {
                Ok(row) => due.rows.push(row),
                Err(unreadable) => due.unreadable.push(unreadable),
            }
        }
        Ok(due)
    }

    fn next_due(&mut self, channel: &str, owner: &str) -> Result<Option<Millis>, Error> {
        // A row another relay holds is due for this one only once that claim lapses.
        let client = self.conn.client()?;
        let row = wait(client.query_one(
            queries::NEXT_DUE.text(SQL),
            &[&channel, &owner, &self.shard],
        ))?;
        row.opt_int(0)
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
            let update = transaction.prepare(queries::CLAIM.text(SQL)).await?;
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
        // Encoded first: a follow-up that cannot be encoded fails the settlement before it begins.
        let follow_ups: Vec<(&FollowUp, String)> =
            encode_all(follow_ups, |follow| notice_payload(&follow.queued.notice))?;
        let client = self.conn.client()?;
        wait(async {
            let transaction = client.transaction().await?;
            let finished = (settlement.state != OutboxState::Pending).then_some(settlement.at);
            // An attempt settles only rows its owner holds; a decision taken without sending,
            // only rows no one else holds now.
            let update = transaction.prepare(queries::SETTLE.text(SQL)).await?;
            let attempt = transaction
                .prepare(queries::INSERT_ATTEMPT.text(SQL))
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
                settled.insert(id.as_str(), row.opt_text(0)?.map(str::to_string));
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
            let mut by_shard =
                std::collections::BTreeMap::<Option<&str>, Vec<(&NewOutbox, String)>>::new();
            for (follow, payload) in follow_ups {
                if let Some(shard) = settled.get(follow.of.as_str()) {
                    by_shard
                        .entry(shard.as_deref())
                        .or_default()
                        .push((&follow.queued, payload));
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
        let changed = wait(client.execute(queries::RELEASE.text(SQL), &[&owner]))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    fn claim_owners(&mut self) -> Result<Vec<String>, Error> {
        let client = self.conn.client()?;
        let rows = wait(client.query(queries::CLAIM_OWNERS.text(SQL), &[]))?;
        collect(&rows, |row| Ok(row.text(0)?.to_string()))
    }

    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error> {
        let client = self.conn.client()?;
        Ok(wait(client.query_opt(
            queries::FIRING_PENDING_BEFORE.text(SQL),
            &[&drift_id, &channel, &created_at],
        ))?
        .is_some())
    }

    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error> {
        let client = self.conn.client()?;
        // A shard ends only its own rows: another shard's channels are not this one's to know,
        // and rows without a shard may be any shard's.
        let pending = wait(client.query(queries::PENDING_CHANNELS.text(SQL), &[&self.shard]))?;
        let mut orphaned = Vec::new();
        for row in &pending {
            let channel = row.text(1)?;
            if !known.iter().any(|known| known == channel) {
                orphaned.push(row.text(0)?.to_string());
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
        sending: Option<&str>,
    ) -> Result<usize, Error> {
        let client = self.conn.client()?;
        let changed = wait(client.execute(
            queries::CANCEL_CHANNEL_REMINDERS.text(SQL),
            &[&drift_id, &channel, &owner, &now, &sending],
        ))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error> {
        let client = self.conn.client()?;
        let row = wait(client.query_opt(queries::DRIFT_STATE.text(SQL), &[&drift_id]))?;
        Ok(match &row {
            Some(row) => decode::drift_state(row.text(0)?),
            None => None,
        })
    }

    fn stats(&mut self) -> Result<OutboxStats, Error> {
        let client = self.conn.client()?;
        // Three statements pipelined: about one round trip.
        let shard: &(dyn ToSql + Sync) = &self.shard;
        let pending: [&(dyn ToSql + Sync); 1] = [shard];
        let rejected: [&(dyn ToSql + Sync); 2] = [&"rejected", shard];
        let expired: [&(dyn ToSql + Sync); 2] = [&"expired", shard];
        let (pending, rejected, expired) = wait(async {
            futures_util::try_join!(
                client.query_one(queries::PENDING_STATS.text(SQL), &pending),
                client.query_one(queries::COUNT_IN_STATE.text(SQL), &rejected),
                client.query_one(queries::COUNT_IN_STATE.text(SQL), &expired),
            )
        })?;
        decode::stats(&pending, rejected.int(0)?, expired.int(0)?)
    }

    fn assign_shard(&mut self, shard: &str) -> Result<(), Error> {
        self.shard = Some(shard.to_string());
        Ok(())
    }

    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error> {
        let client = self.conn.client()?;
        let state = state.map(OutboxState::as_str);
        let rows = wait(client.query(queries::ROWS.text(SQL), &[&state, &limit_of(limit)]))?;
        collect(&rows, decode::readable_outbox_row)
    }
}
