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

pub mod memory;
pub mod sqlite;

use crate::classify::{Changes, Drift, Millis, ObjectState};

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
}

/// State restored at start.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Objects, tombstones included.
    pub objects: Vec<ObjectState>,
    /// Open drifts.
    pub drifts: Vec<Drift>,
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
}
