//! The relay: one task per channel endpoint that moves due outbox rows to the destination.
//!
//! Each round takes the endpoint's due rows (oldest first), drops what can no longer be sent
//! (past the age cap: `expired`; a reminder for a drift that stopped firing: `expired`), groups
//! rows by their route's group key, and sends one message per group (a digest when a group holds
//! several drifts) within the endpoint's rate limits. When more groups are due than the limit
//! allows, the whole backlog is merged into one digest, so a burst becomes one message instead of
//! a ten-minute lock-out. Every attempt is settled in the store before the next one: delivered,
//! rejected, expired (attempt cap), or pending again at a later `next_attempt_at` with exponential
//! backoff and jitter (at least the destination's `Retry-After`). A throttled endpoint pauses
//! entirely. A delivered firing notice queues its reminder (`repeatInterval`, or Alertmanager's
//! `resendInterval`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::ratelimit::RateLimiter;
use super::{Channel, Message, Outcome};
use crate::metrics::{ChannelLabel, Metrics};
use drift_model::time::Clock;
use drift_model::{DriftState, Millis};
use drift_model::{Notice, NoticeKind};
use drift_store::{Lease, Outbox, OutboxRow, OutboxState, Settlement};

/// Delivery limits of one channel.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Attempts before a row expires.
    pub max_attempts: u32,
    /// Age before a row expires.
    pub max_age: Duration,
    /// First retry delay.
    pub min_backoff: Duration,
    /// Longest retry delay.
    pub max_backoff: Duration,
}

/// Longest idle wait between outbox checks: the writer wakes the relays only for rows due
/// sooner (a row due later is found by a check before its time).
pub const POLL: Duration = Duration::from_secs(2);
/// How long the rows of a message stay claimed beyond the send's own timeout. A relay claims a
/// message's rows just before sending it and settles them right after, so only a relay that
/// stopped mid-send leaves a claim to lapse; another process then sends the rows again under the
/// same idempotency keys.
pub const CLAIM_MARGIN: Duration = Duration::from_secs(60);

/// A send's timeout when the relay is not told its channel's (`with_claims`).
const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The shared outbox handle.
pub type SharedOutbox = Arc<Mutex<Box<dyn Outbox>>>;

/// One endpoint's relay.
pub struct Relay {
    channel: Arc<dyn Channel>,
    limits: Limits,
    outbox: SharedOutbox,
    clock: Clock,
    metrics: Arc<Metrics>,
    wake: Arc<Notify>,
    limiter: RateLimiter,
    paused_until: Millis,
    /// Whose claims this relay's are: unique among running processes
    /// (`{instance}/{pid}/{start}/{channel}`; see `app::instance_identity`).
    owner: String,
    /// How long a claim lasts: the send's timeout plus [`CLAIM_MARGIN`].
    lease: Duration,
}

fn millis(duration: Duration) -> Millis {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Backoff before attempt `attempt + 1`: `min × 2^attempt`, capped, with deterministic jitter
/// (50–100 %) derived from the row id so retries of many rows spread out.
pub fn backoff(limits: &Limits, attempt: u32, seed: &str) -> Duration {
    let base = limits
        .min_backoff
        .saturating_mul(2u32.saturating_pow(attempt.min(20)))
        .min(limits.max_backoff);
    let digest = Sha256::digest(format!("{seed}/{attempt}").as_bytes());
    let fraction = 0.5 + f64::from(digest[0]) / 510.0;
    base.mul_f64(fraction)
}

async fn with_outbox<T: Send + 'static>(
    outbox: &SharedOutbox,
    call: impl FnOnce(&mut dyn Outbox) -> Result<T, drift_store::Error> + Send + 'static,
) -> Result<T, drift_store::Error> {
    let outbox = Arc::clone(outbox);
    tokio::task::spawn_blocking(move || {
        let mut guard = outbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        call(guard.as_mut())
    })
    .await
    .unwrap_or_else(|error| {
        Err(drift_store::Error::Unavailable(format!(
            "outbox task failed: {error}"
        )))
    })
}

impl Relay {
    /// A relay for one endpoint.
    pub fn new(
        channel: Arc<dyn Channel>,
        limits: Limits,
        outbox: SharedOutbox,
        clock: Clock,
        metrics: Arc<Metrics>,
        wake: Arc<Notify>,
    ) -> Relay {
        let limiter = RateLimiter::new(channel.rate_limits());
        let owner = format!("local/{}/{}", std::process::id(), channel.name());
        Relay {
            channel,
            limits,
            outbox,
            clock,
            metrics,
            wake,
            limiter,
            paused_until: 0,
            owner,
            lease: DEFAULT_SEND_TIMEOUT + CLAIM_MARGIN,
        }
    }

    /// The same relay claiming rows as `identity` (this process: `{instance}/{pid}/{start}`),
    /// with sends that time out after `send_timeout`: two processes sharing one store never send
    /// the same row.
    pub fn with_claims(mut self, identity: &str, send_timeout: Duration) -> Relay {
        self.owner = format!("{identity}/{}", self.channel.name());
        self.lease = send_timeout.saturating_add(CLAIM_MARGIN);
        self
    }

    /// Ends this relay's claims (a graceful stop: another process may send them at once).
    pub async fn release(&self) -> Result<usize, drift_store::Error> {
        let owner = self.owner.clone();
        with_outbox(&self.outbox, move |outbox| outbox.release(&owner)).await
    }

    /// Runs until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            let now = (self.clock)();
            let wait = match self.round(now).await {
                Ok(Some(next)) => {
                    Duration::from_millis(u64::try_from((next - now).max(0)).unwrap_or(0)).min(POLL)
                }
                Ok(None) => Duration::ZERO,
                Err(error) => {
                    tracing::warn!(message = "Outbox read failed; retrying.", channel = %self.channel.name(), %error);
                    POLL
                }
            };
            if wait.is_zero() {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.wake.notified() => {}
                _ = shutdown.cancelled() => {}
            }
        }
        // Whatever this relay still holds (nothing, unless a store error cut a send short) may
        // go out from another process at once.
        if let Err(error) = self.release().await {
            tracing::warn!(message = "Could not release outbox claims on stop.", channel = %self.channel.name(), %error);
        }
    }

    /// One round. `Ok(None)`: more work is due now; `Ok(Some(t))`: nothing before `t`.
    pub async fn round(&mut self, now: Millis) -> Result<Option<Millis>, drift_store::Error> {
        if self.paused_until > now {
            return Ok(Some(self.paused_until));
        }
        let name = self.channel.name().to_string();
        let due = {
            let (name, owner) = (name.clone(), self.owner.clone());
            with_outbox(&self.outbox, move |outbox| {
                outbox.due(&name, now, 500, &owner)
            })
            .await?
        };
        if due.is_empty() {
            let (name, owner) = (name.clone(), self.owner.clone());
            let next =
                with_outbox(&self.outbox, move |outbox| outbox.next_due(&name, &owner)).await?;
            return Ok(Some(next.unwrap_or(now + millis(POLL)).max(now + 10)));
        }
        // Decide what can still be sent. A row whose notice cannot be read is never sendable.
        for unreadable in due.unreadable {
            let (state, detail) = if now - unreadable.created_at > millis(self.limits.max_age) {
                (
                    OutboxState::Expired,
                    "age cap reached before delivery".to_string(),
                )
            } else {
                (
                    OutboxState::Rejected,
                    format!("unreadable notification: {}", unreadable.error),
                )
            };
            self.finish_ids(vec![unreadable.id], state, now, detail, false)
                .await?;
        }
        // Sized up front: a round holds up to 500 rows of a few hundred bytes each, and growing
        // such vectors one doubling at a time was a visible share of the relay's time.
        let mut live: Vec<OutboxRow> = Vec::with_capacity(due.rows.len());
        let stale = |row: &OutboxRow| now - row.queued.created_at > millis(self.limits.max_age);
        for row in due.rows {
            // A reminder past the age cap is judged first: one of a drift that stopped firing
            // is withdrawn, not counted as a lost alert.
            if stale(&row) && row.queued.notice.kind != NoticeKind::Repeat {
                self.finish(
                    &[row],
                    OutboxState::Expired,
                    now,
                    "age cap reached before delivery".to_string(),
                    false,
                )
                .await?;
                continue;
            }
            live.push(row);
        }
        // What each reminder's drift is now and whether each resolve waits for its firing
        // notice: read in one blocking task per chunk of rows, not one per row, each drift's
        // state once; the chunks keep the outbox (shared by every relay of the process) free
        // between them.
        let checks = checks::of(&live);
        let mut verdicts = Vec::with_capacity(checks.len());
        for chunk in checks.chunks(checks::PER_TASK) {
            let chunk = chunk.to_vec();
            let owner = self.owner.clone();
            let judged = with_outbox(&self.outbox, move |outbox| {
                checks::judge(outbox, chunk, &owner, now)
            })
            .await?;
            verdicts.extend(judged);
        }
        let mut sendable: Vec<OutboxRow> = Vec::with_capacity(live.len());
        let mut held = false;
        let mut expired = Vec::new();
        for (row, verdict) in live.into_iter().zip(verdicts) {
            match verdict {
                checks::Check::Withdrawn => {}
                _ if stale(&row) => expired.push(row),
                checks::Check::Send => sendable.push(row),
                checks::Check::Held => held = true,
            }
        }
        if !expired.is_empty() {
            self.finish(
                &expired,
                OutboxState::Expired,
                now,
                "age cap reached before delivery".to_string(),
                false,
            )
            .await?;
        }
        if sendable.is_empty() {
            // Everything due is waiting for an earlier notice: look again shortly.
            return Ok(if held { Some(now + 1_000) } else { None });
        }
        let budget = self.limiter.available(now);
        if budget == 0 {
            return Ok(Some(self.limiter.next_slot(now)));
        }
        let max_notices = self.channel.max_notices().max(1);
        let mut groups: BTreeMap<String, Vec<OutboxRow>> = BTreeMap::new();
        let mut order = Vec::new();
        // Rows already sent once go out again exactly as they went the first time, under the same
        // idempotency key, so a destination that got the first attempt can drop the repeat.
        let mut resends: BTreeMap<String, Vec<OutboxRow>> = BTreeMap::new();
        for row in sendable {
            if let Some(message_id) = row.message_id.clone() {
                resends.entry(message_id).or_default().push(row);
                continue;
            }
            let key = row.queued.group_key.clone();
            if !groups.contains_key(&key) {
                order.push(key.clone());
            }
            groups.entry(key).or_default().push(row);
        }
        let mut batches: Vec<Vec<OutboxRow>> = resends.into_values().collect();
        let group_count = order.len() + batches.len();
        if group_count > budget && max_notices > 1 && !order.is_empty() {
            // Backlog beyond the rate limit: merge everything into digests.
            let mut all: Vec<OutboxRow> = order
                .iter()
                .flat_map(|key| groups.remove(key).unwrap_or_default())
                .collect();
            all.sort_by(|left, right| {
                (left.queued.created_at, &left.queued.id)
                    .cmp(&(right.queued.created_at, &right.queued.id))
            });
            batches.push(all);
        } else {
            for key in order {
                batches.push(groups.remove(&key).unwrap_or_default());
            }
        }
        for batch in batches.into_iter().take(budget) {
            if self.paused_until > (self.clock)() {
                // Throttled mid-round: the rest waits for the pause to end.
                break;
            }
            let mut batch = batch;
            let fresh = batch.iter().all(|row| row.message_id.is_none());
            let mut omitted_rows: Vec<OutboxRow> = if fresh && batch.len() > max_notices {
                batch.split_off(max_notices)
            } else {
                Vec::new()
            };
            let mut notices = None;
            if fresh && batch.len() > 1 {
                // Only as many notices as the destination can show whole; the rest stays
                // pending for the next message rather than being cut off and marked delivered.
                let mut probe = Message {
                    id: String::new(),
                    notices: batch.iter().map(|row| row.queued.notice.clone()).collect(),
                    now,
                    omitted: 0,
                };
                let fits = self.channel.fit(&probe).clamp(1, batch.len());
                let mut rest = batch.split_off(fits);
                rest.append(&mut omitted_rows);
                omitted_rows = rest;
                // The probe's notices are the message's: not copied a second time.
                probe.notices.truncate(fits);
                notices = Some(probe.notices);
            }
            // Rows left out stay pending and go in the next message; only the count is shown.
            self.send(batch, notices, omitted_rows.len(), now).await?;
        }
        Ok(None)
    }

    /// Sends `batch` as one message (its `notices` when the caller has them already, in the
    /// batch's order), claimed first and settled after.
    async fn send(
        &mut self,
        batch: Vec<OutboxRow>,
        notices: Option<Vec<Notice>>,
        omitted: usize,
        now: Millis,
    ) -> Result<(), drift_store::Error> {
        let ids: Vec<String> = batch.iter().map(|row| row.queued.id.clone()).collect();
        let existing = batch.first().and_then(|row| row.message_id.clone());
        let message_id = if let Some(existing) = existing {
            existing
        } else if ids.len() == 1 {
            ids[0].clone()
        } else {
            let digest = Sha256::digest(ids.join(",").as_bytes());
            format!(
                "dig_{}",
                digest[..10]
                    .iter()
                    .map(|byte| format!("{byte:02x}"))
                    .collect::<String>()
            )
        };
        // Claimed just before the send, for exactly the rows it carries: those without a message
        // get this one (recorded before the send, so after a crash between the send and its
        // settlement they go out again as this message, under the same idempotency key). Rows
        // another relay took meanwhile are left to it.
        let held = {
            let claimed_at = (self.clock)();
            let lease = Lease {
                owner: self.owner.clone(),
                until: claimed_at.saturating_add(millis(self.lease)),
            };
            let (wanted, id) = (ids.clone(), message_id.clone());
            with_outbox(&self.outbox, move |outbox| {
                outbox.claim(&wanted, &id, &lease, claimed_at)
            })
            .await?
        };
        if held.is_empty() {
            return Ok(());
        }
        let mut notices =
            notices.unwrap_or_else(|| batch.iter().map(|row| row.queued.notice.clone()).collect());
        let mut batch = batch;
        if held.len() < batch.len() {
            (batch, notices) = batch
                .into_iter()
                .zip(notices)
                .filter(|(row, _)| held.contains(&row.queued.id))
                .unzip();
        }
        // Rows another process had claimed, taken now because that claim lapsed: it died or
        // stalled mid-send, and this is the resend under the same idempotency key.
        let lapsed = batch
            .iter()
            .filter(|row| row.claimed_by.as_deref().is_some_and(|by| by != self.owner))
            .count();
        if lapsed > 0 {
            self.metrics
                .outbox_claim_expiries
                .get_or_create(&crate::metrics::ChannelLabel {
                    channel: self.channel.name().to_string(),
                })
                .inc_by(lapsed as u64);
            tracing::info!(
                message = "Took over notifications whose claim by another process lapsed; resending them under the same idempotency key.",
                channel = %self.channel.name(),
                count = lapsed,
            );
        }
        let ids = held;
        let message = Message {
            id: message_id,
            notices,
            now,
            omitted,
        };
        // The send time, not the round's start: a round's sends can take seconds each.
        self.limiter.record((self.clock)());
        let started = std::time::Instant::now();
        let outcome = self.channel.send(&message).await;
        let duration_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let channel = self.channel.name().to_string();
        // A resolve on its way ends the drift's reminders on this channel, whatever happens to
        // the resolve itself (a reminder queued by a racing firing delivery included). So does
        // an escalation's firing notice: its own reminders, at the new severity, replace them.
        // A reminder in this very message stays: it went out, and its settlement records it.
        for row in &batch {
            let notice = &row.queued.notice;
            if notice.kind == NoticeKind::Resolved || notice.is_escalation() {
                let (drift_id, endpoint) =
                    (row.queued.drift_id.clone(), row.queued.channel.clone());
                let (owner, at, sending) = (self.owner.clone(), (self.clock)(), message.id.clone());
                with_outbox(&self.outbox, move |outbox| {
                    outbox.cancel_reminders(&drift_id, &endpoint, &owner, at, Some(&sending))
                })
                .await?;
            }
        }
        let attempts = batch.iter().map(|row| row.attempts).max().unwrap_or(0);
        let done = (self.clock)();
        match outcome {
            Outcome::Delivered => {
                let mut follow_ups = Vec::new();
                let resend = self.channel.resend_interval().map(millis);
                for follow in follow_ups::follow_ups(&batch, resend, done) {
                    // A reminder only for a drift that still fires (it may have resolved while
                    // this message was on its way).
                    if follow.queued.kind() == NoticeKind::Repeat {
                        let drift_id = follow.queued.drift_id.clone();
                        let state =
                            with_outbox(&self.outbox, move |outbox| outbox.drift_state(&drift_id))
                                .await?;
                        if state != Some(DriftState::Firing) {
                            continue;
                        }
                    }
                    follow_ups.push(follow);
                }
                let settlement = Settlement {
                    ids,
                    state: OutboxState::Delivered,
                    next_attempt_at: done,
                    at: done,
                    detail: format!("delivered as {}", message.id),
                    duration_ms,
                    attempted: true,
                    message_id: Some(message.id.clone()),
                    owner: Some(self.owner.clone()),
                };
                let queued_follow_ups = follow_ups.clone();
                with_outbox(&self.outbox, move |outbox| {
                    outbox.settle(&settlement, &queued_follow_ups)
                })
                .await?;
                for row in &batch {
                    let seconds = (done - row.queued.created_at).max(0) as f64 / 1000.0;
                    self.metrics
                        .delivery_latency
                        .get_or_create(&ChannelLabel {
                            channel: channel.clone(),
                        })
                        .observe(seconds);
                }
                self.metrics.record_delivery(&channel, "delivered");
                tracing::info!(message = "Notification delivered.", channel = %channel, notification_id = %message.id, notices = message.notices.len());
            }
            Outcome::Retry { after, detail } => {
                if attempts + 1 >= self.limits.max_attempts {
                    self.finish(
                        &batch,
                        OutboxState::Expired,
                        done,
                        format!("attempt cap reached; last error: {detail}"),
                        true,
                    )
                    .await?;
                    return Ok(());
                }
                let seed = batch
                    .first()
                    .map(|row| row.queued.id.clone())
                    .unwrap_or_default();
                let wait = backoff(&self.limits, attempts, &seed).max(after.unwrap_or_default());
                self.retry(
                    &batch,
                    &message.id,
                    done + millis(wait),
                    done,
                    detail,
                    duration_ms,
                )
                .await?;
            }
            Outcome::Throttled { pause, detail } => {
                self.paused_until = done + millis(pause);
                tracing::warn!(message = "Destination is rate-limiting; pausing the endpoint.", channel = %channel, pause_seconds = pause.as_secs(), detail = %detail);
                self.metrics.record_delivery(&channel, "throttled");
                let settlement = Settlement {
                    ids,
                    state: OutboxState::Pending,
                    next_attempt_at: self.paused_until,
                    at: done,
                    detail,
                    duration_ms,
                    attempted: false,
                    message_id: Some(message.id.clone()),
                    owner: Some(self.owner.clone()),
                };
                with_outbox(&self.outbox, move |outbox| outbox.settle(&settlement, &[])).await?;
            }
            Outcome::Rejected { detail } => {
                tracing::error!(message = "Notification rejected by its destination; it will not be retried.", channel = %channel, notification_id = %message.id, detail = %detail);
                self.finish(&batch, OutboxState::Rejected, done, detail, true)
                    .await?;
            }
        }
        Ok(())
    }

    async fn retry(
        &self,
        rows: &[OutboxRow],
        message_id: &str,
        next: Millis,
        at: Millis,
        detail: String,
        duration_ms: i64,
    ) -> Result<(), drift_store::Error> {
        self.metrics.record_delivery(self.channel.name(), "retried");
        tracing::warn!(message = "Delivery failed; will retry.", channel = %self.channel.name(), detail = %detail, retry_in_ms = next - at);
        let settlement = Settlement {
            ids: rows.iter().map(|row| row.queued.id.clone()).collect(),
            state: OutboxState::Pending,
            next_attempt_at: next,
            at,
            detail,
            duration_ms,
            attempted: true,
            message_id: Some(message_id.to_string()),
            owner: Some(self.owner.clone()),
        };
        with_outbox(&self.outbox, move |outbox| outbox.settle(&settlement, &[])).await
    }

    async fn finish(
        &self,
        rows: &[OutboxRow],
        state: OutboxState,
        at: Millis,
        detail: String,
        attempted: bool,
    ) -> Result<(), drift_store::Error> {
        let ids = rows.iter().map(|row| row.queued.id.clone()).collect();
        self.finish_ids(ids, state, at, detail, attempted).await
    }

    async fn finish_ids(
        &self,
        ids: Vec<String>,
        state: OutboxState,
        at: Millis,
        detail: String,
        attempted: bool,
    ) -> Result<(), drift_store::Error> {
        self.metrics
            .record_delivery(self.channel.name(), state.as_str());
        if state == OutboxState::Expired {
            tracing::warn!(message = "Notification expired.", channel = %self.channel.name(), detail = %detail);
        }
        let settlement = Settlement {
            ids,
            state,
            next_attempt_at: at,
            at,
            detail,
            duration_ms: 0,
            attempted,
            message_id: None,
            owner: Some(self.owner.clone()),
        };
        with_outbox(&self.outbox, move |outbox| outbox.settle(&settlement, &[])).await
    }
}

/// Updates the outbox gauges every few seconds until `shutdown`.
pub(crate) async fn watch_outbox(
    outbox: SharedOutbox,
    clock: Clock,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    while !shutdown.is_cancelled() {
        if let Ok(stats) = with_outbox(&outbox, |outbox| outbox.stats()).await {
            metrics.outbox_pending.set(stats.pending);
            let age = stats
                .oldest_pending
                .map(|oldest| ((clock)() - oldest).max(0) / 1000)
                .unwrap_or(0);
            metrics.outbox_oldest_age_seconds.set(age);
            metrics
                .outbox_dead
                .get_or_create(&crate::metrics::StateLabel {
                    state: "rejected".into(),
                })
                .set(stats.rejected);
            metrics
                .outbox_dead
                .get_or_create(&crate::metrics::StateLabel {
                    state: "expired".into(),
                })
                .set(stats.expired);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            _ = shutdown.cancelled() => {}
        }
    }
}

mod checks;
mod follow_ups;
#[cfg(test)]
mod tests;
