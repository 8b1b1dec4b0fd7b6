//! The delivery side of the store: queued notifications (the outbox), their claims, attempts and
//! terminal states. Backend-neutral types and the [`Outbox`] trait every backend implements.
//!
//! Architecture invariant: a row is sent only under a claim ([`Outbox::claim`]): a lease with an
//! owner and an expiry. Another process cannot take a row while its claim holds, and a settlement
//! only lands on rows its owner still holds, so two relay processes never send the same row
//! twice; a dead process's claim expires and the row is sent again under the same idempotency key.

use super::Error;
use crate::model::{DriftState, Millis};

/// A notification to deliver, as queued.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutbox {
    /// Stable id: the idempotency key sent to channels that support one.
    pub id: String,
    /// Channel endpoint.
    pub channel: String,
    /// The drift it is about.
    pub drift_id: String,
    /// `firing`, `resolved` or `repeat`.
    pub kind: String,
    /// Rows with the same key, due together, become one message.
    pub group_key: String,
    /// The notice as JSON.
    pub payload: String,
    /// When it was queued.
    pub created_at: Millis,
    /// Earliest send time.
    pub not_before: Millis,
    /// Reminder interval while firing, in milliseconds.
    pub repeat_after_ms: Option<i64>,
}

/// Terminal and non-terminal states of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxState {
    /// Waiting for its time or a retry.
    Pending,
    /// Accepted by the destination.
    Delivered,
    /// Refused permanently by the destination (or unsendable).
    Rejected,
    /// Gave up: attempt or age cap reached, or no longer relevant.
    Expired,
}

impl OutboxState {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxState::Pending => "pending",
            OutboxState::Delivered => "delivered",
            OutboxState::Rejected => "rejected",
            OutboxState::Expired => "expired",
        }
    }

    /// Parses [`OutboxState::as_str`] output.
    pub fn parse(text: &str) -> Option<OutboxState> {
        match text {
            "pending" => Some(OutboxState::Pending),
            "delivered" => Some(OutboxState::Delivered),
            "rejected" => Some(OutboxState::Rejected),
            "expired" => Some(OutboxState::Expired),
            _ => None,
        }
    }
}

/// A queued notification with its delivery state.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    /// What was queued.
    pub queued: NewOutbox,
    /// Attempts made so far.
    pub attempts: u32,
    /// Next attempt time.
    pub next_attempt_at: Millis,
    /// Current state.
    pub state: OutboxState,
    /// Last error, if any.
    pub last_error: Option<String>,
    /// When it reached a terminal state.
    pub finished_at: Option<Millis>,
    /// The message it was first sent in: a retry sends the same message under the same
    /// idempotency key, never a regrouped one.
    pub message_id: Option<String>,
}

/// The result of one delivery attempt for a set of rows (one message).
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    /// Rows the message carried.
    pub ids: Vec<String>,
    /// New state (`Pending` = retry at `next_attempt_at`).
    pub state: OutboxState,
    /// Next attempt time for retries.
    pub next_attempt_at: Millis,
    /// When the attempt happened.
    pub at: Millis,
    /// Outcome detail for the audit trail (never a URL or secret).
    pub detail: String,
    /// How long the attempt took.
    pub duration_ms: i64,
    /// Whether this settlement counts as an attempt (false for expiries decided without sending).
    pub attempted: bool,
    /// The message the rows were sent in (kept for retries).
    pub message_id: Option<String>,
    /// The claim the rows were taken under: only rows still claimed by this owner (or not
    /// claimed at all) are settled, so a relay whose claim expired and was taken over cannot
    /// overwrite the new holder's outcome. `None` settles without a claim (expiries decided at
    /// start, before any relay runs).
    pub owner: Option<String>,
}

/// Outbox figures for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxStats {
    /// Rows waiting.
    pub pending: i64,
    /// Creation time of the oldest pending row.
    pub oldest_pending: Option<Millis>,
    /// Rows rejected.
    pub rejected: i64,
    /// Rows expired.
    pub expired: i64,
}

/// A claim on due rows: who takes them, and until when no one else may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The claiming process (and role): unique per running relay set.
    pub owner: String,
    /// When the claim lapses if it is not settled or renewed.
    pub until: Millis,
}

/// The delivery side of the store: its own connection, shared by the channel relays.
pub trait Outbox: Send {
    /// Claims the pending rows of a channel due at `now`, oldest first: rows nobody holds, rows
    /// `lease.owner` already holds (renewed), and rows whose claim lapsed. Claimed rows are held
    /// for `lease.owner` until `lease.until`.
    fn claim(
        &mut self,
        channel: &str,
        now: Millis,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<OutboxRow>, Error>;
    /// When the channel's next pending row becomes due.
    fn next_due(&mut self, channel: &str) -> Result<Option<Millis>, Error>;
    /// Records an attempt's outcome and queues follow-ups (reminders) in one transaction. Rows
    /// held by another owner than the settlement's are left as they are; the claim of every
    /// settled row ends.
    fn settle(&mut self, settlement: &Settlement, follow_ups: &[NewOutbox]) -> Result<(), Error>;
    /// Records the message pending rows are about to be sent in, before the send: after a crash
    /// between the send and its settlement they go out again as that message, under the same
    /// idempotency key, never regrouped under another. Rows that already have one keep it.
    fn assign_message(&mut self, ids: &[String], message_id: &str) -> Result<(), Error>;
    /// True when a firing notice of the drift, queued before `created_at`, is still pending on
    /// the channel.
    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error>;
    /// Expires pending notifications of channels that are no longer configured.
    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error>;
    /// Withdraws pending reminders of a drift on one channel (its resolve went out).
    fn cancel_reminders(&mut self, drift_id: &str, channel: &str) -> Result<usize, Error>;
    /// The current state of a drift (to drop reminders for resolved drifts).
    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error>;
    /// Figures for metrics.
    fn stats(&mut self) -> Result<OutboxStats, Error>;
    /// Rows in a state (newest first), for the API and tests.
    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error>;
}
