//! Store: the durable record behind every `202`. Only this crate knows SQL.
//!
//! Three roles, each behind a trait, so a backend is one module behind [`open`]: the [`Store`]
//! (the single writer's transactions), the [`Outbox`] (the relays' claims and settlements) and the
//! [`AuditRead`]er (read-only queries for the API). Backends: [`sqlite`] (the embedded default,
//! one SQLite file in WAL mode, schema versions and ordered migrations in `sqlite/schema.rs`) and
//! [`postgres`] (`store.url`: the same tables and versions in a PostgreSQL database). Both run
//! the same statements, written once in `sql/` with a dialect for what the two spell
//! differently, and decode their rows alike; each keeps only what is its own. Behind feature
//! `testing`, `testing::TestStore` is a SQLite store in a temporary file that tests can tell to
//! fail or block. The stored JSON has shapes of its own ([`rows`]), apart from the model's types;
//! an object's state is the engine's, so it arrives encoded ([`ObjectRecord`]) and is handed
//! back as text to decode. The store knows neither the engine nor the config: it is opened from
//! [`Options`]. Errors are backend-neutral ([`Error`]).
//!
//! Architecture invariant: a [`Batch`] is committed atomically: the CloudEvent keys
//! ([`EventKey`]) that make redeliveries no-ops, the object states, the drift rows and their
//! history, the outbox rows and the silence changes all land together or not at all.

pub mod audit;
pub mod migrate;
mod outbox;
pub mod postgres;
pub mod rows;
mod sql;
pub mod sqlite;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::sync::Arc;

pub use audit::{
    AttemptView, AuditRead, Cursor, DayMoves, DeliveryView, DriftFilter, FiringCount, HistoryEntry,
    DAY_MILLIS,
};
pub use outbox::{
    Due, FollowUp, Lease, NewOutbox, Outbox, OutboxRow, OutboxState, OutboxStats, Settlement,
    Unreadable,
};
pub use postgres::WriterLease;

use std::path::PathBuf;

use drift_model::{Drift, Millis, ObjectKey, Silence, Transition};

/// Why the store failed. Backend-neutral: the backend's own error rides along as the source.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database reported an error.
    #[error("{backend}: {source}")]
    Backend {
        /// The backend (`sqlite`, `postgres`), also the metric label.
        backend: &'static str,
        /// The database's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stored row could not be decoded.
    #[error("corrupt row in {table}: {source}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// The store was written by a newer binary: opening it could damage it.
    #[error("the store has schema version {found}, newer than this binary knows ({supported}): run the drift-sentinel version that wrote it (or a newer one), or point store.path or store.url at a new store")]
    Schema {
        /// The store's version.
        found: i64,
        /// The newest version this binary knows.
        supported: i64,
    },
    /// The store was told to fail (tests) or is closed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// This writer's lease was taken over by another replica (or never was this holder's): the
    /// transaction was rolled back, nothing of it written. Only a store that acquired a writer
    /// lease (PostgreSQL, `postgres::lease`) fails so.
    #[error("writer lease of shard {shard} lost by {holder} (epoch {epoch}): another replica is the writer")]
    LeaseLost {
        /// The shard.
        shard: String,
        /// This replica's name.
        holder: String,
        /// The epoch it held.
        epoch: i64,
    },
    /// The connection failed after a commit was sent: it may or may not have landed.
    #[error("commit outcome unknown: {0}")]
    CommitUnknown(String),
    /// The database directory could not be created.
    #[error("cannot create store directory: {0}")]
    Io(#[from] std::io::Error),
    /// A read-only look ([`read_objects`]) found no store file at the path: nothing was created.
    #[error("no store file there (missing, or not a file)")]
    Missing,
}

impl Error {
    /// A stable, bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Backend { backend, .. } => backend,
            Error::Corrupt { .. } => "corrupt",
            Error::Schema { .. } => "schema",
            Error::Unavailable(_) => "unavailable",
            Error::LeaseLost { .. } => "lease_lost",
            Error::CommitUnknown(_) => "commit_unknown",
            Error::Io(_) => "io",
            Error::Missing => "missing",
        }
    }
}

/// Notifications a shard took over ([`Store::adopt_notifications`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Adopted {
    /// Of shards without a live writer: (shard, how many), by shard.
    pub orphaned: Vec<(String, usize)>,
    /// Without a shard, of drifts in this shard's clusters.
    pub unsharded: usize,
    /// Of shards without a writer for twice `orphaned_after_ms`, left because their drift is
    /// not in this shard's clusters (or no longer stored): no shard took them when it could.
    pub stranded: usize,
}

/// An opened store: one handle per role, each on its own connection.
pub struct Opened {
    /// The single writer's handle.
    pub writer: Box<dyn Store>,
    /// The relays' handle.
    pub outbox: Box<dyn Outbox>,
    /// Read-only queries for the API, dashboard and report.
    pub audit: Arc<dyn AuditRead>,
    /// Background work of the backend (SQLite's checkpoints); it stops when dropped, after the
    /// writer has stopped.
    pub background: Box<dyn Send>,
    /// The writer leases, on a connection of their own: `Some` for a store several replicas may
    /// share (PostgreSQL), `None` for one pod's file.
    pub leases: Option<Box<dyn Leases>>,
}

impl Opened {
    /// Makes the writer and the relays `shard`'s: the notifications they queue are the shard's,
    /// and the relays send, count and expire only the shard's (and those queued before
    /// notifications had shards), so each shard delivers its own drifts through its own
    /// channels and rate limits.
    pub fn assign_shard(&mut self, shard: &str) -> Result<(), Error> {
        self.writer.assign_shard(shard)?;
        self.outbox.assign_shard(shard)
    }
}

/// Who holds a shard's writer lease, as the database says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    /// The holder's name (`{instance}/{pid}/{start}`).
    pub holder: String,
    /// Its epoch.
    pub epoch: i64,
    /// Until when it holds (milliseconds since the epoch); past it, anyone may take it.
    pub expires_at: Millis,
}

/// The writer leases of a shared store: per shard, one replica is the writer at a time (see
/// `postgres::lease` for why a lease row with a fencing epoch). Used by the replica's lease
/// keeper on a connection of its own, so renewals do not wait behind the writer's rounds.
pub trait Leases: Send {
    /// Takes the lease of `shard` for `holder` when it is free or expired at `now`, bumping its
    /// epoch; `None` while another holder's lease runs.
    fn acquire(
        &mut self,
        shard: &str,
        holder: &str,
        now: Millis,
        ttl_ms: Millis,
    ) -> Result<Option<WriterLease>, Error>;
    /// Extends `lease` to `now + ttl`; [`Error::LeaseLost`] when another replica took it.
    fn renew(&mut self, lease: &WriterLease, now: Millis) -> Result<Millis, Error>;
    /// Gives `lease` up at once (a graceful stop); [`Error::LeaseLost`] when it was taken.
    fn release(&mut self, lease: &WriterLease) -> Result<(), Error>;
    /// Who holds the lease of `shard` now, if anyone ever did.
    fn holder(&mut self, shard: &str) -> Result<Option<LeaseHolder>, Error>;
}

/// Where the store is: what [`open`] needs, and nothing else of the service's config.
#[derive(Clone)]
pub enum Options {
    /// One SQLite file (created if missing; WAL mode): one pod's store.
    Sqlite {
        /// The file.
        path: PathBuf,
    },
    /// A PostgreSQL database, which several replicas may share.
    Postgres {
        /// The connection URL (`postgres://user@host:5432/db?sslmode=require`); it may hold a
        /// password, so [`Options`]' `Debug` never shows it.
        url: String,
        /// The password, when kept out of the URL; it wins over one in the URL.
        password: Option<String>,
        /// A PEM bundle of CA certificates trusted for the server's certificate, besides the
        /// Mozilla roots.
        ca_file: Option<PathBuf>,
    },
}

impl std::fmt::Debug for Options {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Options::Sqlite { path } => formatter
                .debug_struct("Sqlite")
                .field("path", path)
                .finish(),
            Options::Postgres { ca_file, .. } => formatter
                .debug_struct("Postgres")
                .field("url", &"<redacted>")
                .field("ca_file", ca_file)
                .finish_non_exhaustive(),
        }
    }
}

/// Opens (creating and migrating if needed) the store `options` name.
pub fn open(options: &Options) -> Result<Opened, Error> {
    match options {
        Options::Postgres {
            url,
            password,
            ca_file,
        } => postgres::open(&postgres::Target::new(
            url,
            password.as_deref(),
            ca_file.as_deref(),
        )?),
        Options::Sqlite { path } => sqlite::open(path),
    }
}

/// Reads every stored object (each handed to `objects` as it is read: the caller keeps what it
/// needs, not the whole store) and the open drifts, from one snapshot, writing nothing: the file
/// or database is neither created nor migrated, so a command may read it beside the running
/// service. A store written by a newer binary is refused ([`Error::Schema`]).
pub fn read_objects(
    options: &Options,
    objects: &mut ObjectLoader<'_>,
) -> Result<Vec<drift_model::Drift>, Error> {
    match options {
        Options::Postgres {
            url,
            password,
            ca_file,
        } => postgres::read::read_objects(
            &postgres::Target::new(url, password.as_deref(), ca_file.as_deref())?,
            objects,
        ),
        Options::Sqlite { path } => sqlite::read::read_objects(path, objects),
    }
}

/// An object's stored row: the columns the store indexes and the engine's state of the object
/// as JSON text, which the store keeps and hands back without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    /// Cluster name.
    pub cluster: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The engine's state as JSON.
    pub body: String,
}

/// What [`Store::load`] hands each stored object to: its cluster and its body. The loader
/// decodes the body (or skips a cluster it does not own before decoding it); a body it cannot
/// decode fails the load as [`Error::Corrupt`].
pub type ObjectLoader<'a> = dyn FnMut(&str, &str) -> Result<(), serde_json::Error> + 'a;

/// A CloudEvent identity, remembered so a redelivery takes effect once.
///
/// `sent_at` leads the stored key: a sender stamps `time` once and every redelivery carries it
/// unchanged (the SDK sets it only when unset; the Broker and the adapter retry the same
/// event), so a redelivery finds its key, and keys stored in send order land at the end of the
/// store's index instead of at random places in it, which wrote fewer pages per commit
/// (BENCHMARKS.md, issue 28). The same `source` and `id` with another `time` is not a
/// redelivery of this event: the engine judges it as any other event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// CloudEvent `time` in milliseconds since the epoch; 0 when absent or not an RFC 3339 time.
    /// A stored 0 (no time known: keys stored before version 6, events sent without a time)
    /// matches a key of any `sent_at`; within a round, and in replay, keys compare whole.
    pub sent_at: Millis,
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
    /// Objects to upsert.
    pub objects: Vec<ObjectRecord>,
    /// Objects to forget (tombstones past retention).
    pub removed_objects: Vec<ObjectKey>,
    /// Drift rows to upsert (open and just-resolved).
    pub drifts: Vec<Drift>,
    /// The moves of recorded drifts, for the drift history.
    pub history: Vec<Transition>,
    /// Notifications to deliver.
    pub outbox: Vec<NewOutbox>,
    /// Drifts that a new silence covers: every pending reminder of theirs is withdrawn, one a
    /// relay has claimed too (a reminder never sent is not a failed delivery; relays do not read
    /// silences, so one claimed by a process that died must not go out once its claim lapses).
    pub cancel_reminders: Vec<String>,
    /// Drifts that resolved: their pending reminders that no relay has claimed are withdrawn. A
    /// claimed one is on its way in a message: it is settled and recorded as the message is,
    /// and a relay that comes to send it again first sees that its drift stopped firing.
    pub resolved_reminders: Vec<String>,
    /// Silences created or removed through the API.
    pub silences: Vec<SilenceChange>,
    /// Remediation attempts decided this round (part of their drifts' history).
    pub remediations: Vec<drift_model::remediation::Attempt>,
    /// Stored attempts (by `seq`) whose outcome moved on (claimed, sent, ended), each with the
    /// outcome it moves from (a row that no longer has it is left as it is).
    pub settled_remediations: Vec<(
        i64,
        drift_model::remediation::Outcome,
        drift_model::remediation::Attempt,
    )>,
}

impl Batch {
    /// True when committing it would write nothing.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.objects.is_empty()
            && self.removed_objects.is_empty()
            && self.drifts.is_empty()
            && self.history.is_empty()
            && self.outbox.is_empty()
            && self.cancel_reminders.is_empty()
            && self.resolved_reminders.is_empty()
            && self.silences.is_empty()
            && self.remediations.is_empty()
            && self.settled_remediations.is_empty()
    }
}

/// A change to the silences created through the API.
#[derive(Debug, Clone, PartialEq)]
pub enum SilenceChange {
    /// A new silence.
    Add(StoredSilence),
    /// The silence with this id is removed.
    Remove(String),
}

/// State restored at start, besides the objects (which [`Store::load`] hands to its loader).
#[derive(Debug, Default)]
pub struct Snapshot {
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
    pub silence: Silence,
    /// When it was created.
    pub created_at: Millis,
}

/// Makes every commit that returned before the call durable (see [`Store::take_syncer`]).
pub trait Syncer: Send {
    /// Syncs; an error means the commits since the last success may be lost.
    fn sync(&mut self) -> Result<(), Error>;
}

/// The durable store, owned by the single writer.
pub trait Store: Send {
    /// Loads the engine state: every stored object (tombstones included) goes to `objects` as
    /// it is read, and the open drifts and the silences come back.
    fn load(&mut self, objects: &mut ObjectLoader<'_>) -> Result<Snapshot, Error>;
    /// True when the event was already committed.
    fn is_duplicate(&mut self, key: &EventKey) -> Result<bool, Error>;
    /// Which of `keys` were already committed (the writer asks once per round). By default one
    /// [`Store::is_duplicate`] per key; a store across a network answers in one query.
    fn duplicates(
        &mut self,
        keys: &[EventKey],
    ) -> Result<std::collections::HashSet<EventKey>, Error> {
        let mut seen = std::collections::HashSet::new();
        for key in keys {
            if self.is_duplicate(key)? {
                seen.insert(key.clone());
            }
        }
        Ok(seen)
    }
    /// Commits a batch atomically.
    fn commit(&mut self, batch: &Batch) -> Result<(), Error>;
    /// Hands over what makes commits durable when the store leaves that to its caller: from
    /// then on a commit is atomic but may not survive a power loss until the [`Syncer`] has
    /// synced after it. The writer syncs on its own thread, so the fsync of one round overlaps
    /// the work of the next, and answers only after the sync (BENCHMARKS.md, issue 28). `None`
    /// (the default): every commit is durable when it returns.
    fn take_syncer(&mut self) -> Option<Box<dyn Syncer>> {
        None
    }
    /// Proves the store is writable (a tiny write).
    fn heartbeat(&mut self, now: Millis) -> Result<(), Error>;
    /// Forgets event keys received before `cutoff`; returns how many.
    fn prune_events(&mut self, cutoff: Millis) -> Result<usize, Error>;
    /// Forgets drifts resolved, and deliveries finished, before `cutoff` (audit retention).
    fn prune_audit(&mut self, cutoff: Millis) -> Result<usize, Error>;
    /// Which of `keys` are committed, asked after a commit whose answer was lost: a store that
    /// can still be committing it (PostgreSQL) waits for that transaction to end first. By
    /// default [`Store::duplicates`].
    fn committed_keys(
        &mut self,
        keys: &[EventKey],
    ) -> Result<std::collections::HashSet<EventKey>, Error> {
        self.duplicates(keys)
    }
    /// The silences created through the API, as stored (a sharded writer reads back what the
    /// other shards' APIs wrote).
    fn silences(&mut self) -> Result<Vec<StoredSilence>, Error>;
    /// The outcome the remediation attempt stored under `seq` has now (`None`: no such row),
    /// so the writer moves it only from the outcome it has (a repeated step changes nothing,
    /// and is told nothing twice). Stores without remediations refuse.
    fn remediation_outcome(
        &mut self,
        seq: i64,
    ) -> Result<Option<drift_model::remediation::Outcome>, Error> {
        let _ = seq;
        Err(Error::Unavailable(
            "this store keeps no remediation attempts".to_string(),
        ))
    }
    /// Fences every later writing transaction on `lease` (taken through [`Leases`]): each checks
    /// first that `lease` still holds and fails with [`Error::LeaseLost`] once another replica
    /// took over. Stores of one pod (SQLite) have no leases and refuse.
    fn fence(&mut self, lease: WriterLease) -> Result<(), Error> {
        Err(Error::Unavailable(format!(
            "this store has no writer leases (shard {})",
            lease.shard
        )))
    }
    /// Marks every notification this handle queues from now on as `shard`'s (a sharded
    /// deployment: see [`Outbox::assign_shard`]). Stores of one pod have no shards and refuse.
    fn assign_shard(&mut self, shard: &str) -> Result<(), Error> {
        Err(Error::Unavailable(format!(
            "this store has no shards (shard {shard})"
        )))
    }
    /// Makes pending notifications of this shard's clusters (`owns`, by their drift) without a
    /// live owner this shard's (the one assigned): those of a shard whose writer last renewed
    /// its lease more than `orphaned_after_ms` before `now` (a shard renamed, removed or down
    /// that long), and those without a shard (queued before shards, or by an unsharded
    /// replica). Returns what it took. Stores of one pod have no shards: nothing.
    fn adopt_notifications(
        &mut self,
        now: Millis,
        orphaned_after_ms: Millis,
        owns: &dyn Fn(&str) -> bool,
    ) -> Result<Adopted, Error> {
        let _ = (now, orphaned_after_ms, owns);
        Ok(Adopted::default())
    }
}
