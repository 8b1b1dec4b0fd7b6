//! The delivery side of the store: queued notifications (the outbox), their claims, attempts and
//! terminal states. Backend-neutral types and the [`Outbox`] trait every backend implements.
//!
//! Architecture invariant: a row is sent only under a claim ([`Outbox::claim`], taken just
//! before its message is sent): a lease with an owner unique to one running relay and an expiry
//! past the send's timeout. Another process cannot take a row while its claim holds, and a
//! settlement only lands on rows its owner still holds, so two relay processes never send the
//! same row twice; a dead process's claim lapses (or is released at the next start on the same
//! host) and the row is sent again under the same idempotency key.

use super::Error;
use drift_model::{DriftState, Millis, Notice, NoticeKind};

/// A notification to deliver, as queued.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutbox {
    /// Stable id: the idempotency key sent to channels that support one.
    pub id: String,
    /// Channel endpoint.
    pub channel: String,
    /// The drift it is about.
    pub drift_id: String,
    /// Rows with the same key, due together, become one message.
    pub group_key: String,
    /// What it says: the store keeps it in its stored shape (`rows::NoticeRow`) and its kind
    /// in a column of its own ([`NewOutbox::kind`]).
    pub notice: Notice,
    /// When it was queued.
    pub created_at: Millis,
    /// Earliest send time.
    pub not_before: Millis,
    /// Reminder interval while firing, in milliseconds.
    pub repeat_after_ms: Option<i64>,
}

impl NewOutbox {
    /// `firing`, `resolved` or `repeat`: the notice's kind.
    pub fn kind(&self) -> NoticeKind {
        self.notice.kind
    }
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
    /// Who holds (or held, until it lapsed) the row's unsettled claim: a due row claimed by
    /// another process is a claim that lapsed (that process died or stalled mid-send).
    pub claimed_by: Option<String>,
}

/// A due row whose stored notice cannot be read (written by hand, or damaged): it cannot be
/// sent, and it is kept apart so it holds up none of the rows due with it.
#[derive(Debug)]
pub struct Unreadable {
    /// The row's id.
    pub id: String,
    /// When it was queued.
    pub created_at: Millis,
    /// Why its payload cannot be read.
    pub error: serde_json::Error,
}

/// What [`Outbox::due`] finds: the rows to send, oldest first, and those whose notice cannot be
/// read.
#[derive(Debug, Default)]
pub struct Due {
    /// Rows whose notice was read.
    pub rows: Vec<OutboxRow>,
    /// Rows whose notice cannot be read.
    pub unreadable: Vec<Unreadable>,
}

impl Due {
    /// True when nothing is due.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.unreadable.is_empty()
    }
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
    /// The relay settling: an attempt lands only on rows it still holds, so a relay whose claim
    /// lapsed and was taken over cannot overwrite the new holder's outcome. `None`: a decision of
    /// no relay (expiries at start), for rows nobody holds.
    pub owner: Option<String>,
}

impl Settlement {
    /// Rows whose channel endpoint is no longer configured, expired at `now` without an
    /// attempt and held by no relay (every backend's `expire_orphans` decides this the same way).
    pub(crate) fn orphans_expired(ids: Vec<String>, now: Millis) -> Settlement {
        Settlement {
            ids,
            state: OutboxState::Expired,
            next_attempt_at: now,
            at: now,
            detail: ORPHANED.to_string(),
            duration_ms: 0,
            attempted: false,
            message_id: None,
            owner: None,
        }
    }
}

/// Why an orphaned row expired, in its audit trail.
pub(crate) const ORPHANED: &str = "channel no longer configured";

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

/// A notification to queue once the row it follows is settled (a reminder, a resolve's resend).
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUp {
    /// The id of the row it follows: queued only if that row is settled.
    pub of: String,
    /// What to queue.
    pub queued: NewOutbox,
}

/// A claim on rows: who takes them, and until when no one else may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The claiming relay: unique among running processes (`{instance}/{pid}/{start}/{channel}`).
    pub owner: String,
    /// When the claim lapses if it is not settled or renewed.
    pub until: Millis,
}

/// The delivery side of the store: its own connection, shared by the channel relays.
///
/// A relay reads the due rows ([`Outbox::due`], no writes), decides what to send, and claims each
/// message's rows just before it sends it ([`Outbox::claim`]); it settles what it holds.
pub trait Outbox: Send {
    /// The pending rows of a channel due at `now`, oldest first (at most `limit`), that `owner`
    /// may claim: held by no one, by `owner`, or under a claim that lapsed. A row whose notice
    /// cannot be read comes apart ([`Due::unreadable`]), so the others still go out. Reads only.
    fn due(&mut self, channel: &str, now: Millis, limit: usize, owner: &str) -> Result<Due, Error>;
    /// When the channel's next pending row becomes due for `owner` (a row another relay holds
    /// counts from when its claim lapses).
    fn next_due(&mut self, channel: &str, owner: &str) -> Result<Option<Millis>, Error>;
    /// Claims rows for one message, just before it is sent: of `ids`, the rows still pending,
    /// claimable at `now` and either without a message or of message `message_id` become
    /// `lease.owner`'s until `lease.until`, and get `message_id` (after a crash between the send
    /// and its settlement they go out again as that message, under the same idempotency key). A
    /// row of another message is not claimed: it is resent as that message. Returns the ids now
    /// held: send only those.
    fn claim(
        &mut self,
        ids: &[String],
        message_id: &str,
        lease: &Lease,
        now: Millis,
    ) -> Result<Vec<String>, Error>;
    /// Records an attempt's outcome and queues follow-ups (reminders) in one transaction. An
    /// attempt (`attempted`) settles only the rows its owner holds; a decision taken without
    /// sending settles rows no one else holds at `at`. A row not settled gets no attempt record
    /// and no follow-up. The claim of every settled row ends.
    fn settle(&mut self, settlement: &Settlement, follow_ups: &[FollowUp]) -> Result<(), Error>;
    /// Ends every claim `owner` holds (a relay stopping, or a dead process's claims at start).
    fn release(&mut self, owner: &str) -> Result<usize, Error>;
    /// The owners that hold claims now.
    fn claim_owners(&mut self) -> Result<Vec<String>, Error>;
    /// True when a firing notice of the drift, queued before `created_at`, is still pending on
    /// the channel.
    fn firing_pending_before(
        &mut self,
        drift_id: &str,
        channel: &str,
        created_at: Millis,
    ) -> Result<bool, Error>;
    /// Expires pending notifications of channels that are no longer configured (rows held by a
    /// live claim are left to their holder).
    fn expire_unknown_channels(&mut self, known: &[String], now: Millis) -> Result<usize, Error>;
    /// Withdraws pending reminders of a drift on one channel (its resolve or escalation went
    /// out), except rows another relay than `owner` holds at `now` and the rows of message
    /// `sending` (`owner`'s message on its way, the resolve's own say, which settles them as
    /// sent).
    fn cancel_reminders(
        &mut self,
        drift_id: &str,
        channel: &str,
        owner: &str,
        now: Millis,
        sending: Option<&str>,
    ) -> Result<usize, Error>;
    /// The current state of a drift (to drop reminders for resolved drifts).
    fn drift_state(&mut self, drift_id: &str) -> Result<Option<DriftState>, Error>;
    /// Figures for metrics.
    fn stats(&mut self) -> Result<OutboxStats, Error>;
    /// Rows in a state (newest first), for the API and tests; a row whose notice cannot be read
    /// fails it ([`Error::Corrupt`]).
    fn rows(&mut self, state: Option<OutboxState>, limit: usize) -> Result<Vec<OutboxRow>, Error>;
    /// From now on, serves only `shard`'s notifications: [`Outbox::due`], [`Outbox::next_due`]
    /// and [`Outbox::stats`] see the rows the shard queued and those queued before rows had
    /// shards; [`Outbox::expire_unknown_channels`] ends only the shard's own; reminders queued
    /// by a settlement are the shard's. [`Outbox::rows`] still lists every shard's (the API).
    /// Stores of one pod have no shards and refuse.
    fn assign_shard(&mut self, shard: &str) -> Result<(), Error> {
        Err(Error::Unavailable(format!(
            "this store has no shards (shard {shard})"
        )))
    }
}
