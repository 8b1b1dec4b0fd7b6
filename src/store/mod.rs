//! Store: the durable record behind every `202`. Only this module knows SQL.
//!
//! One [`Store`] trait with two implementations: [`sqlite::SqliteStore`] (the embedded default,
//! one SQLite file in WAL mode) and [`memory::MemoryStore`] (tests; it can be told to fail). The
//! trait is shaped for a single writer that commits many events in one transaction, so a shared
//! PostgreSQL store for several replicas can implement the same calls later.
//!
//! Architecture invariant: a [`Batch`] is committed atomically: the CloudEvent keys
//! (`source`, `id`) that make redeliveries no-ops, the object states, the drift rows and their
//! history all land together or not at all.

pub mod audit;
pub mod memory;
pub mod rows;
pub mod sqlite;

use crate::classify::{Changes, ObjectState};
use crate::model::{Drift, DriftState, Millis};

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite reported an error.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored row could not be decoded.
    #[error("corrupt row in {table}: {source}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// The store was told to fail (tests) or is closed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The database directory could not be created.
    #[error("cannot create store directory: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// A stable, bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Sqlite(_) => "sqlite",
            Error::Corrupt { .. } => "corrupt",
            Error::Unavailable(_) => "unavailable",
            Error::Io(_) => "io",
        }
    }
}

/// A CloudEvent identity, remembered so a redelivery takes effect once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// CloudEvent `source`.
    pub source: String,
    /// CloudEvent `id`.
    pub id: String,
}

/// Everything one writer round commits in one transaction.
#[derive(Debug, Default)]
pub struct Batch {
    /// Events accepted in this round, with their receive time.
    pub events: Vec<(EventKey, Millis)>,
    /// What the engine changed.
    pub changes: Changes,
    /// Notifications to deliver.
    pub outbox: Vec<NewOutbox>,
    /// Drifts that resolved: their pending reminders are withdrawn (a reminder never sent is
    /// not a failed delivery).
    pub cancel_reminders: Vec<String>,
}

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

/// The delivery side of the store: its own connection, shared by the channel relays.
pub trait Outbox: Send {
    /// Pending rows of a channel due at `now`, oldest first.
    fn due(&mut self, channel: &str, now: Millis, limit: usize) -> Result<Vec<OutboxRow>, Error>;
    /// When the channel's next pending row becomes due.
    fn next_due(&mut self, channel: &str) -> Result<Option<Millis>, Error>;
    /// Records an attempt's outcome and queues follow-ups (reminders) in one transaction.
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

/// State restored at start.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Objects, tombstones included.
    pub objects: Vec<ObjectState>,
    /// Open drifts.
    pub drifts: Vec<Drift>,
    /// Silences created through the API.
    pub silences: Vec<StoredSilence>,
}

/// A silence created through the API.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSilence {
    /// Its id.
    pub id: String,
    /// Matchers, expiry and comment.
    pub silence: crate::model::Silence,
    /// When it was created.
    pub created_at: Millis,
}

/// The durable store, owned by the single writer.
pub trait Store: Send {
    /// Loads the engine state.
    fn load(&mut self) -> Result<Snapshot, Error>;
    /// True when the event was already committed.
    fn is_duplicate(&mut self, key: &EventKey) -> Result<bool, Error>;
    /// Commits a batch atomically.
    fn commit(&mut self, batch: &Batch) -> Result<(), Error>;
    /// Proves the store is writable (a tiny write).
    fn heartbeat(&mut self, now: Millis) -> Result<(), Error>;
    /// Forgets event keys received before `cutoff`; returns how many.
    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, Error>;
    /// Forgets drifts resolved, and deliveries finished, before `cutoff` (audit retention).
    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, Error>;
}
