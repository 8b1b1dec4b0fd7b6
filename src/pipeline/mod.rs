//! The pipeline's single writer: decoded events in, durable state and drift transitions out.
//!
//! This file is the handle ([`Pipeline`]) and the vocabulary of its queue; `writer.rs` is the
//! writer thread and its round, step by step; `resync.rs` applies the work of the resync loop;
//! `resync_control.rs` is how the API starts a resync pass and sees its status (shared by the
//! resync loop and the API, which may not import each other). Observations of served traffic
//! (the `traffic` poller's) come through the same queue, without a reply.
//!
//! One OS thread owns the [`Engine`] and the [`Store`]. Ingest hands it decoded events through a
//! bounded queue and waits for the answer; the writer takes everything queued (up to a cap),
//! applies it to the engine, and commits it in **one** transaction (group commit), then answers
//! every waiting request. A full queue is refused at once ([`Error::Overloaded`], a `503`), so
//! memory stays bounded under overload. The same thread fires pending drifts when their grace
//! runs out (it sleeps until the next deadline, not until the next event), proves the store is
//! writable when idle, and forgets old event keys.
//!
//! Architecture invariant: a request is answered `Ok` only after its events' effects and their
//! (`time`, `source`, `id`) keys are committed. A request whose events changed nothing durable
//! writes nothing, not even its keys (applying them again changes nothing either), and is
//! answered as soon as they are applied, before the round's commit. If the commit fails, the
//! engine rolls back to the last committed state and every request in the round gets
//! [`Error::Store`]; the Broker retries.

pub mod fleet_view;
mod remediation;
mod resync;
mod resync_control;
mod writer;

pub use writer::outbox_rows;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

pub use remediation::{Approval, ApprovalOutcome, SenderAnswer, SenderStep};
pub use resync::{ResyncOutcome, ResyncWork, Sweep};
pub use resync_control::{
    FinishedPass, PassOutcome, ResyncControl, ResyncStatus, ResyncTrigger, RunningPass, StartError,
};
pub use writer::ORPHANED_AFTER_MS;

use crate::metrics::Metrics;
use drift_core::classify::{Capacity, Engine, Rules};
use drift_core::decode::Decoded;
use drift_model::Silence;

use drift_core::route::{Router, Silences};
use drift_model::time::Clock;
use drift_store::{Store, StoredSilence};

/// The writer thread's stack (reserved address space; only what is used is committed).
const WRITER_STACK_BYTES: usize = 64 << 20;

/// Why a submission was not accepted.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The queue is full.
    #[error("overloaded: the event queue is full")]
    Overloaded,
    /// The store could not commit.
    #[error("store failed to commit: {0}")]
    Store(&'static str),
    /// The writer has stopped.
    #[error("shutting down")]
    Stopped,
}

impl Error {
    /// A stable, bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Overloaded => "overloaded",
            Error::Store(_) => "store",
            Error::Stopped => "stopped",
        }
    }
}

/// What became of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventResult {
    /// Applied to the engine and committed.
    Applied,
    /// Older than (or equal to) the newest state of its object.
    Stale,
    /// Its (`time`, `source`, `id`) was already committed.
    Duplicate,
    /// A valid CloudEvent of a type this service does not handle.
    Ignored,
    /// A Reference-mode ApiServerSource event (nothing to classify).
    Reference,
    /// Its object is tracked under another cluster name that events carry: not applied.
    Conflict,
    /// A new object beyond the configured capacity (`limits:`): not tracked.
    OverCapacity,
}

impl EventResult {
    /// Lower-case label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            EventResult::Applied => "applied",
            EventResult::Stale => "stale",
            EventResult::Duplicate => "duplicate",
            EventResult::Ignored => "ignored",
            EventResult::Reference => "reference",
            EventResult::Conflict => "conflict",
            EventResult::OverCapacity => "over_capacity",
        }
    }
}

/// Health flags read by `/readyz` and metrics.
#[derive(Debug, Default)]
pub struct Health {
    /// The last write to the store succeeded.
    pub store_writable: AtomicBool,
    /// Time of the last successful commit or heartbeat.
    pub last_store_ok: AtomicU64,
    /// A commit or heartbeat was fenced: another replica took the writer lease.
    pub lease_lost: AtomicBool,
    /// The writer gave its role up: a commit's outcome could not be told, so it commits nothing
    /// more and the replica must load the state again.
    pub gave_up: AtomicBool,
    /// A sync of the store failed (or the thread that syncs stopped): what was answered may not
    /// be on disk, and only a restart, which loads what is, recovers. `/healthz` fails from
    /// then on, so Kubernetes restarts the pod.
    pub must_restart: AtomicBool,
    /// The re-judge of the live objects under way after a start or a reload (`/readyz` says
    /// so); `None` when there is none.
    pub rejudging: std::sync::Mutex<Option<Rejudging>>,
    /// Woken after a commit that stored `planned` remediation attempts.
    pub remediation_planned: tokio::sync::Notify,
}

/// A re-judge of the live objects under way: the writer judges them again a slice at a time
/// between rounds of events, after a start (the rules may have changed while it was down) or a
/// rules reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Rejudging {
    /// `start` or `reload`.
    pub cause: &'static str,
    /// Objects judged again so far.
    pub done: usize,
    /// Objects to judge again in all.
    pub total: usize,
}

impl Health {
    /// The re-judge under way, if any.
    pub fn rejudging(&self) -> Option<Rejudging> {
        *self
            .rejudging
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub(super) type Reply = oneshot::Sender<Result<Vec<EventResult>, Error>>;
pub(super) type ResyncReply = oneshot::Sender<Result<ResyncOutcome, Error>>;
pub(super) type SilenceReply = oneshot::Sender<Result<SilenceOutcome, Error>>;
pub(super) type ApprovalReply = oneshot::Sender<Result<ApprovalOutcome, Error>>;
pub(super) type SenderReply = oneshot::Sender<Result<SenderAnswer, Error>>;

/// A write to the silences created through the API: committed by the writer like every other
/// write, so the store has one writer.
#[derive(Debug, Clone, PartialEq)]
pub enum SilenceRequest {
    /// Create this silence (validated by the caller).
    Add(Silence),
    /// Remove the silence with this id.
    Remove(String),
}

/// What a [`SilenceRequest`] did, once committed.
#[derive(Debug, Clone, PartialEq)]
pub enum SilenceOutcome {
    /// The silence was created with this id and time.
    Added(StoredSilence),
    /// The silence was removed (`true`) or there was none with that id (`false`).
    Removed(bool),
    /// Not created: this many silences are active already (`limits.maxActiveSilences`).
    Refused {
        /// The cap.
        max_active: usize,
    },
}

pub(super) enum Command {
    Submit {
        events: Vec<Decoded>,
        reply: Reply,
    },
    Resync {
        work: ResyncWork,
        reply: ResyncReply,
    },
    SetRules(Arc<Rules>),
    /// A reader wants a fleet view newer than the published one (`fleet_view`): wakes an idle
    /// writer. At most one is queued at a time, however many readers wait.
    FleetWanted,
    Silence {
        request: SilenceRequest,
        reply: SilenceReply,
    },
    Approve {
        approval: Approval,
        reply: ApprovalReply,
    },
    Sender {
        step: SenderStep,
        reply: SenderReply,
    },
    /// An answer of Prometheus (`src/traffic/`): filed by the engine, no reply.
    Traffic(Box<drift_core::classify::traffic::Observation>),
    Shutdown,
}

/// Settings of the writer.
#[derive(Clone)]
pub struct Settings {
    /// Routes and channel endpoints.
    pub router: Router,
    /// Woken after a commit that queued notifications.
    pub outbox_notify: Arc<tokio::sync::Notify>,
    /// Queue capacity (requests).
    pub queue_capacity: usize,
    /// How long event keys are remembered.
    pub dedup_retention: Duration,
    /// How long resolved drifts and finished deliveries are kept.
    pub audit_retention: Duration,
    /// Idle interval between heartbeat writes.
    pub heartbeat_interval: Duration,
    /// How much state the engine may keep.
    pub capacity: Capacity,
    /// Most silences created through the API active at once (`limits.maxActiveSilences`).
    pub max_active_silences: usize,
    /// The clusters of this writer's shard: only their objects and drifts are loaded (the
    /// other shards' writers own the rest of the store).
    pub shard: Arc<drift_core::config::ShardConfig>,
    /// The compiled `remediation:` section (in force until a restart, like the channels).
    pub remediation: Arc<drift_core::remediate::Policy>,
    /// True when the served-traffic poller runs (`traffic.prometheus.url`): off, open
    /// `traffic_share_drift`s are resolved in the first round (nothing would judge them).
    pub traffic_observed: bool,
}

/// A handle to the writer; cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    sender: SyncSender<Command>,
    health: Arc<Health>,
    rules: Arc<std::sync::RwLock<Arc<Rules>>>,
    thread: Arc<std::sync::Mutex<Option<JoinHandle<()>>>>,
    /// The fleet view the writer publishes for readers.
    fleet: Arc<fleet_view::Shared>,
    /// Objects loaded from the store at start (tombstones included).
    loaded: usize,
    /// The `remediation:` section in force (the dashboard offers a `manual` rule's action).
    remediation: Arc<drift_core::remediate::Policy>,
}

/// True when a drift filed under `cluster` is this shard's: a member cluster's by the shard's
/// globs; a fleet drift, filed under `fleet:<group>` rather than a member cluster, by the shard
/// whose config has the group (a group's clusters live in one shard).
pub(crate) fn owns_drift_cluster(
    shard: &drift_core::config::ShardConfig,
    rules: &Rules,
    cluster: &str,
) -> bool {
    match cluster.strip_prefix(drift_core::classify::fleet::CLUSTER_PREFIX) {
        Some(group) => rules
            .fleet_groups()
            .iter()
            .any(|configured| configured.name == group),
        None => shard.owns(cluster),
    }
}

impl Pipeline {
    /// Loads state from the store and starts the writer thread.
    pub fn start(
        mut store: Box<dyn Store>,
        rules: Arc<Rules>,
        settings: Settings,
        clock: Clock,
        metrics: Arc<Metrics>,
    ) -> Result<Pipeline, drift_store::Error> {
        let shard = &settings.shard;
        // A shard's writer decodes only its own clusters' objects.
        let mut objects = Vec::new();
        let mut snapshot = store.load(&mut |cluster, body| {
            if shard.owns(cluster) {
                objects.push(drift_core::classify::stored::decode(body)?);
            }
            Ok(())
        })?;
        snapshot
            .drifts
            .retain(|drift| owns_drift_cluster(shard, &rules, &drift.cluster));
        let current_rules = Arc::new(std::sync::RwLock::new(Arc::clone(&rules)));
        let mut engine = Engine::new(rules);
        engine.set_capacity(settings.capacity);
        engine.restore(objects, snapshot.drifts);
        engine.set_traffic_observed(settings.traffic_observed);
        let loaded = engine.object_count();
        // The first fleet view, before the writer starts: readers never wait for one to exist.
        let fleet = fleet_view::Shared::new(engine.fleet_view(None));
        let capacity = settings.capacity;
        if engine.graph().bytes() > capacity.bytes || engine.object_count() > capacity.objects {
            // Restored whole (dropping objects would lose their drifts); new objects are refused
            // until the state is back under the caps.
            tracing::warn!(
                message = "The stored state is larger than the limits section allows; it was restored whole, and new objects are refused until it shrinks below them.",
                objects = engine.object_count(),
                max_objects = capacity.objects,
                state_bytes = engine.graph().bytes(),
                max_state_bytes = capacity.bytes,
            );
        }
        let silences = Silences::new(
            snapshot
                .silences
                .into_iter()
                .map(|stored| (stored.id, stored.silence)),
        );
        let health = Arc::new(Health::default());
        let writable = store.heartbeat(clock()).is_ok();
        health.store_writable.store(writable, Ordering::SeqCst);
        let (sender, receiver) = mpsc::sync_channel(settings.queue_capacity.max(1));
        let remediation = Arc::clone(&settings.remediation);
        let now = clock();
        let mut writer = writer::Writer::new(
            engine,
            store,
            clock,
            metrics,
            Arc::clone(&health),
            settings,
            silences,
            fleet_view::Publisher::new(Arc::clone(&fleet)),
        );
        // Before the relays start (they start when this returns).
        writer.adopt_notifications(now);
        let thread = std::thread::Builder::new()
            .name("drift-writer".to_string())
            // Team invariants are evaluated here by a recursive interpreter: their depth is
            // bounded when they compile, and this leaves a wide margin (reserved, not used).
            .stack_size(WRITER_STACK_BYTES)
            .spawn(move || writer.run(receiver))
            .map_err(drift_store::Error::Io)?;
        Ok(Pipeline {
            sender,
            health,
            rules: current_rules,
            thread: Arc::new(std::sync::Mutex::new(Some(thread))),
            fleet,
            loaded,
            remediation,
        })
    }

    /// The `remediation:` section in force.
    pub fn remediation(&self) -> &drift_core::remediate::Policy {
        &self.remediation
    }

    /// How many objects were loaded from the store at start (tombstones included).
    pub(crate) fn object_count(&self) -> usize {
        self.loaded
    }

    /// Queues events; the receiver yields once they are committed (or failed).
    pub fn submit(
        &self,
        events: Vec<Decoded>,
    ) -> Result<oneshot::Receiver<Result<Vec<EventResult>, Error>>, Error> {
        let (reply, receiver) = oneshot::channel();
        match self.sender.try_send(Command::Submit { events, reply }) {
            Ok(()) => Ok(receiver),
            Err(TrySendError::Full(_)) => Err(Error::Overloaded),
            Err(TrySendError::Disconnected(_)) => Err(Error::Stopped),
        }
    }

    /// Queues resync work; the receiver yields once it is committed (or failed). A full queue
    /// is [`Error::Overloaded`] and hands the work back: resync waits and tries again.
    #[allow(clippy::result_large_err)]
    pub fn resync(
        &self,
        work: ResyncWork,
    ) -> Result<oneshot::Receiver<Result<ResyncOutcome, Error>>, (Error, ResyncWork)> {
        let (reply, receiver) = oneshot::channel();
        let (error, command) = match self.sender.try_send(Command::Resync { work, reply }) {
            Ok(()) => return Ok(receiver),
            Err(TrySendError::Full(command)) => (Error::Overloaded, command),
            Err(TrySendError::Disconnected(command)) => (Error::Stopped, command),
        };
        match command {
            Command::Resync { work, .. } => Err((error, work)),
            // The command sent is the command handed back; nothing else can arrive here.
            _ => Err((
                Error::Stopped,
                ResyncWork::Listed {
                    events: Vec::new(),
                    list_version: String::new(),
                    listed_at: 0,
                },
            )),
        }
    }

    /// Creates or removes a silence through the writer; the receiver yields once it is
    /// committed. A new silence also withdraws the pending reminders of the open drifts it covers.
    /// A silence waits for room in a full queue instead of being refused: an operator silences
    /// things exactly when the cluster is loud. It blocks, so call it off the async runtime.
    pub fn silence(
        &self,
        request: SilenceRequest,
    ) -> Result<oneshot::Receiver<Result<SilenceOutcome, Error>>, Error> {
        let (reply, receiver) = oneshot::channel();
        match self.sender.send(Command::Silence { request, reply }) {
            Ok(()) => Ok(receiver),
            Err(_) => Err(Error::Stopped),
        }
    }

    /// Approves a `manual` rule's action for a drift through the writer; the receiver yields once
    /// the attempt is committed. Waits for room in a full queue, like a silence. It blocks, so
    /// call it off the async runtime.
    pub fn approve(
        &self,
        approval: Approval,
    ) -> Result<oneshot::Receiver<Result<ApprovalOutcome, Error>>, Error> {
        let (reply, receiver) = oneshot::channel();
        match self.sender.send(Command::Approve { approval, reply }) {
            Ok(()) => Ok(receiver),
            Err(_) => Err(Error::Stopped),
        }
    }

    /// The fleet view (each fleet group's members, compared objects and their drifts) from the
    /// snapshot the writer publishes, never through the writer's queue for the view itself: the
    /// latest snapshot when it shows every round answered so far, else one newer, waiting at
    /// most [`fleet_view::READ_WAIT`] (then the latest there is). See [`fleet_view`].
    pub async fn fleet_view(&self) -> Arc<fleet_view::FleetSnapshot> {
        match self.fleet.current() {
            Ok(snapshot) => snapshot,
            Err((generation, raised)) => {
                if raised {
                    // Wakes an idle writer; a full queue means it is busy, and it looks at the
                    // flag after its round anyway.
                    let _ = self.sender.try_send(Command::FleetWanted);
                }
                self.fleet.wait_for(generation, fleet_view::READ_WAIT).await
            }
        }
    }

    /// Swaps in new rules (hot reload).
    pub fn set_rules(&self, rules: Arc<Rules>) {
        *self
            .rules
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::clone(&rules);
        // Rules are rare and small; waiting for queue space is fine here.
        let _ = self.sender.send(Command::SetRules(rules));
    }

    /// Commits a step of the remediation sender (a claim before sending, an outcome after);
    /// the receiver yields once it is committed. It blocks, so call it off the async runtime.
    pub fn sender_step(
        &self,
        step: SenderStep,
    ) -> Result<oneshot::Receiver<Result<SenderAnswer, Error>>, Error> {
        let (reply, receiver) = oneshot::channel();
        match self.sender.send(Command::Sender { step, reply }) {
            Ok(()) => Ok(receiver),
            Err(_) => Err(Error::Stopped),
        }
    }

    /// Hands an observation of served traffic to the writer, never waiting: a full queue is
    /// [`Error::Overloaded`] and the poller skips this one (the next has the same window, a
    /// tick later), so the poller never holds the writer or waits behind events.
    pub fn observe_traffic(
        &self,
        observation: drift_core::classify::traffic::Observation,
    ) -> Result<(), Error> {
        match self
            .sender
            .try_send(Command::Traffic(Box::new(observation)))
        {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(Error::Overloaded),
            Err(TrySendError::Disconnected(_)) => Err(Error::Stopped),
        }
    }

    /// Woken after a commit that stored `planned` attempts (the sender's work).
    pub fn remediation_planned(&self) -> &tokio::sync::Notify {
        &self.health.remediation_planned
    }

    /// The rules in force (for the API's read-only view of configured silences).
    pub fn rules(&self) -> Arc<Rules> {
        Arc::clone(
            &self
                .rules
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Health flags.
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Stops the writer after it has committed everything queued, and waits for it.
    pub fn shutdown(&self) {
        let _ = self.sender.send(Command::Shutdown);
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

/// Puts what the engine changed into `batch` (each changed object encoded, in place, as the
/// store keeps it) and returns every transition of the round, which the store does not keep but
/// the writer routes. An object that cannot be encoded fails the round as a store error would:
/// nothing of it is committed.
fn take_changes(
    changes: drift_core::classify::Staged<'_>,
    batch: &mut drift_store::Batch,
) -> Result<Vec<drift_model::Transition>, drift_store::Error> {
    batch.objects = changes
        .objects
        .iter()
        .map(|object| {
            Ok(drift_store::ObjectRecord {
                cluster: object.cluster.clone(),
                uid: object.uid.clone(),
                kind: object.kind.clone(),
                namespace: object.namespace.clone(),
                name: object.name.clone(),
                body: drift_core::classify::stored::encode(object).map_err(|source| {
                    drift_store::Error::Corrupt {
                        table: "objects",
                        source,
                    }
                })?,
            })
        })
        .collect::<Result<_, drift_store::Error>>()?;
    batch.removed_objects = changes.removed_objects.to_vec();
    batch.drifts = changes.drifts.iter().map(|&drift| drift.clone()).collect();
    batch.history = changes.history.to_vec();
    Ok(changes.transitions.to_vec())
}
