//! The pipeline's single writer: decoded events in, durable state and drift transitions out.
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
//! (`source`, `id`) keys are committed. A request whose events changed nothing durable writes
//! nothing, not even its keys (applying them again changes nothing either), and is answered as
//! soon as they are applied, before the round's commit. If the commit fails, the engine rolls back to the last
//! committed state and every request in the round gets [`Error::Store`]; the Broker retries.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::classify::{Engine, Outcome, Rules};
use crate::decode::{Action, ApiServerEvent, Decoded};
use crate::metrics::Metrics;
use crate::model::Silence;
use crate::model::{Millis, Transition};
use crate::route::Silences;
use crate::route::{notification_id, Router};
use crate::store::{Batch, EventKey, NewOutbox, SilenceChange, Store, StoredSilence};
use crate::time::Clock;

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
    /// Its (`source`, `id`) was already committed.
    Duplicate,
    /// A valid CloudEvent of a type this service does not handle.
    Ignored,
    /// A Reference-mode ApiServerSource event (nothing to classify).
    Reference,
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
}

type Reply = oneshot::Sender<Result<Vec<EventResult>, Error>>;
type ResyncReply = oneshot::Sender<Result<ResyncOutcome, Error>>;
type SilenceReply = oneshot::Sender<Result<SilenceOutcome, Error>>;

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
}

/// Work from the resync source (`cluster::resync`), committed like events but without event
/// keys: a listed state is idempotent by its `resourceVersion` (an unchanged object is stale).
pub enum ResyncWork {
    /// Listed objects, applied as `add` (unknown to the engine) or `update` events.
    Listed(Vec<ApiServerEvent>),
    /// A complete list of one kind ended: tracked objects of that kind it did not contain are
    /// deleted (see [`crate::classify::Engine::vanished`]).
    Sweep(Sweep),
}

/// The end of a complete list of one kind (owned form of [`crate::classify::Sweep`]).
pub struct Sweep {
    /// The cluster listed.
    pub cluster: String,
    /// The listed `apiVersion`.
    pub api_version: String,
    /// The listed kind.
    pub kind: String,
    /// Uids the list contained.
    pub seen: HashSet<String>,
    /// The list's `resourceVersion`.
    pub list_version: String,
    /// When the list started.
    pub listed_at: Millis,
    /// True for labels the list's selector covers.
    pub selects: Box<crate::classify::LabelMatcher>,
}

/// What one piece of resync work found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResyncOutcome {
    /// Listed objects the engine did not know, or knew in an older state: changes the events
    /// had not delivered.
    pub missed: usize,
    /// Listed objects whose state the engine already had.
    pub unchanged: usize,
    /// Objects deleted because the list no longer contained them.
    pub deleted: usize,
    /// Class ids of the drifts this work opened.
    pub drifts_found: Vec<String>,
    /// Set when a listed object is already tracked under another cluster name: events from this
    /// cluster carry that name, so resync's name is wrong and nothing was applied (the same
    /// objects under two names would alert twice).
    pub cluster_mismatch: Option<String>,
}

enum Command {
    Submit {
        events: Vec<Decoded>,
        reply: Reply,
    },
    Resync {
        work: ResyncWork,
        reply: ResyncReply,
    },
    SetRules(Arc<Rules>),
    Silence {
        request: SilenceRequest,
        reply: SilenceReply,
    },
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
}

/// A handle to the writer; cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    sender: SyncSender<Command>,
    health: Arc<Health>,
    rules: Arc<std::sync::RwLock<Arc<Rules>>>,
    thread: Arc<std::sync::Mutex<Option<JoinHandle<()>>>>,
}

impl Pipeline {
    /// Loads state from the store and starts the writer thread.
    pub fn start(
        mut store: Box<dyn Store>,
        rules: Arc<Rules>,
        settings: Settings,
        clock: Clock,
        metrics: Arc<Metrics>,
    ) -> Result<Pipeline, crate::store::Error> {
        let snapshot = store.load()?;
        let current_rules = Arc::new(std::sync::RwLock::new(Arc::clone(&rules)));
        let mut engine = Engine::new(rules);
        engine.restore(snapshot.objects, snapshot.drifts);
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
        let writer = Writer {
            engine,
            store,
            clock,
            metrics,
            health: Arc::clone(&health),
            settings,
            silences,
            firing_series: std::collections::HashSet::new(),
            // Rules may have changed while the process was down: retire drifts of classes that
            // are now disabled in the first round.
            rules_changed: true,
            store_backoff_until: 0,
            last_write: 0,
            last_prune: 0,
            dropper: spawn_dropper(),
            misnamed: HashSet::new(),
        };
        let thread = std::thread::Builder::new()
            .name("drift-writer".to_string())
            .spawn(move || writer.run(receiver))
            .map_err(crate::store::Error::Io)?;
        Ok(Pipeline {
            sender,
            health,
            rules: current_rules,
            thread: Arc::new(std::sync::Mutex::new(Some(thread))),
        })
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
            _ => Err((Error::Stopped, ResyncWork::Listed(Vec::new()))),
        }
    }

    /// Creates or removes a silence through the writer; the receiver yields once it is
    /// committed. A new silence also withdraws the pending reminders of the open drifts it covers.
    pub fn silence(
        &self,
        request: SilenceRequest,
    ) -> Result<oneshot::Receiver<Result<SilenceOutcome, Error>>, Error> {
        let (reply, receiver) = oneshot::channel();
        match self.sender.try_send(Command::Silence { request, reply }) {
            Ok(()) => Ok(receiver),
            Err(TrySendError::Full(_)) => Err(Error::Overloaded),
            Err(TrySendError::Disconnected(_)) => Err(Error::Stopped),
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

/// Starts the thread that frees applied events (see `Writer::discard`); `None` if it cannot
/// start, and events are then freed on the writer.
fn spawn_dropper() -> Option<SyncSender<Vec<Vec<Decoded>>>> {
    // A few rounds of slack; beyond that `try_send` fails and the writer frees them itself.
    let (sender, receiver) = mpsc::sync_channel::<Vec<Vec<Decoded>>>(8);
    std::thread::Builder::new()
        .name("drift-dropper".to_string())
        .spawn(move || {
            for events in receiver {
                drop(events);
            }
        })
        .ok()?;
    Some(sender)
}

/// Most requests taken into one transaction.
const MAX_ROUND: usize = 512;
/// How long timers wait after a failed commit before the writer tries again.
const STORE_RETRY_MS: Millis = 1_000;
/// How often old event keys are pruned.
const PRUNE_INTERVAL_MS: Millis = 10 * 60 * 1000;

struct Writer {
    engine: Engine,
    store: Box<dyn Store>,
    clock: Clock,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    settings: Settings,
    /// The silences created through the API (committed).
    silences: Silences,
    firing_series: std::collections::HashSet<crate::metrics::FiringLabel>,
    rules_changed: bool,
    store_backoff_until: Millis,
    last_write: Millis,
    last_prune: Millis,
    dropper: Option<SyncSender<Vec<Vec<Decoded>>>>,
    /// (resync's name, events' name) pairs already logged.
    misnamed: HashSet<(String, String)>,
}

impl Writer {
    fn run(mut self, receiver: mpsc::Receiver<Command>) {
        loop {
            let now = (self.clock)();
            let heartbeat_ms =
                i64::try_from(self.settings.heartbeat_interval.as_millis()).unwrap_or(5000);
            let mut wake_at = self.last_write + heartbeat_ms;
            if let Some(deadline) = self.engine.next_deadline() {
                // After a failed commit, timers wait for the backoff: a store that keeps failing
                // must not spin the writer.
                wake_at = wake_at.min(deadline.max(self.store_backoff_until));
            }
            let wait = Duration::from_millis(u64::try_from((wake_at - now).max(1)).unwrap_or(1));
            let mut round = Vec::new();
            let mut stop = false;
            match receiver.recv_timeout(wait) {
                Ok(command) => {
                    round.push(command);
                    while round.len() < MAX_ROUND {
                        match receiver.try_recv() {
                            Ok(command) => round.push(command),
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stop = true,
            }
            let mut submissions = Vec::new();
            let mut resyncs = Vec::new();
            let mut silence_requests = Vec::new();
            for command in round {
                match command {
                    Command::Submit { events, reply } => submissions.push((events, reply)),
                    Command::Resync { work, reply } => resyncs.push((work, reply)),
                    Command::SetRules(rules) => {
                        self.engine.set_rules(rules);
                        self.rules_changed = true;
                    }
                    Command::Silence { request, reply } => silence_requests.push((request, reply)),
                    Command::Shutdown => stop = true,
                }
            }
            self.round(submissions, resyncs, silence_requests);
            if stop {
                // Drain whatever arrived meanwhile so every queued request gets an answer
                // (resync work is dropped: its sender sees the writer stopped).
                let rest: Vec<_> = receiver
                    .try_iter()
                    .filter_map(|command| match command {
                        Command::Submit { events, reply } => Some((events, reply)),
                        _ => None,
                    })
                    .collect();
                self.round(rest, Vec::new(), Vec::new());
                self.record_pending_before_stop();
                return;
            }
        }
    }

    /// Writes the pending drifts that live in memory only, so a restart restores them with
    /// their `since` (and grace) instead of finding them again from scratch. A failure here loses
    /// nothing that was acknowledged: the next start re-assesses every object.
    fn record_pending_before_stop(&mut self) {
        self.engine.begin();
        self.engine.record_pending();
        let changes = self.engine.changes();
        if changes.is_empty() {
            self.engine.commit();
            return;
        }
        let recorded = changes.drifts.len();
        let batch = Batch {
            changes,
            ..Batch::default()
        };
        match self.store.commit(&batch) {
            Ok(()) => {
                self.engine.commit();
                tracing::info!(
                    message = "Pending drifts recorded before stopping.",
                    recorded
                );
            }
            Err(error) => {
                self.engine.rollback();
                tracing::warn!(message = "Could not record pending drifts before stopping; the next start finds them again.", %error);
            }
        }
    }

    /// Applies one round of submissions plus due timers, commits, answers.
    fn round(
        &mut self,
        submissions: Vec<(Vec<Decoded>, Reply)>,
        resyncs: Vec<(ResyncWork, ResyncReply)>,
        silence_requests: Vec<(SilenceRequest, SilenceReply)>,
    ) {
        let now = (self.clock)();
        let timers_due = now >= self.store_backoff_until
            && self
                .engine
                .next_deadline()
                .is_some_and(|deadline| deadline <= now);
        let heartbeat_ms =
            i64::try_from(self.settings.heartbeat_interval.as_millis()).unwrap_or(5000);
        if submissions.is_empty()
            && resyncs.is_empty()
            && silence_requests.is_empty()
            && !timers_due
            && !self.rules_changed
        {
            if now - self.last_write >= heartbeat_ms {
                self.heartbeat(now);
            }
            return;
        }
        let round_started = std::time::Instant::now();
        self.engine.begin();
        let retiring = std::mem::take(&mut self.rules_changed);
        if retiring {
            self.engine.retire_disabled(now);
        }
        let mut batch = Batch::default();
        let mut keys_in_round = HashSet::new();
        // `None` once answered: a request whose events changed nothing durable is answered as
        // soon as they are applied (nothing of it waits in the commit; if the commit fails, the
        // rollback takes back only what it never needed to write).
        let mut submissions: Vec<(Vec<Decoded>, Option<Reply>)> = submissions
            .into_iter()
            .map(|(events, reply)| (events, Some(reply)))
            .collect();
        let mut results: Vec<Result<Vec<EventResult>, Error>> =
            Vec::with_capacity(submissions.len());
        let mut store_failure = None;
        for (events, reply) in &mut submissions {
            let writes_before = self.engine.journaled_writes();
            let mut event_results = Vec::with_capacity(events.len());
            for event in events {
                let result = match event {
                    Decoded::Ignored { .. } => EventResult::Ignored,
                    Decoded::ApiServer(event) => {
                        let key = EventKey {
                            source: event.source.clone(),
                            id: event.id.clone(),
                        };
                        let duplicate = if keys_in_round.contains(&key) {
                            true
                        } else {
                            match self.store.is_duplicate(&key) {
                                Ok(seen) => seen,
                                Err(error) => {
                                    store_failure.get_or_insert(error);
                                    false
                                }
                            }
                        };
                        if duplicate {
                            EventResult::Duplicate
                        } else {
                            self.check_cluster_name(event);
                            let writes = self.engine.journaled_writes();
                            match self.engine.apply(event, now) {
                                Outcome::Applied => {
                                    keys_in_round.insert(key.clone());
                                    // An event that changed nothing durable (status churn
                                    // with the same compact content) needs no key and no
                                    // disk write: a redelivery applies the same content
                                    // again, which changes nothing either.
                                    if self.engine.journaled_writes() != writes {
                                        batch.events.push((key, now));
                                    }
                                    EventResult::Applied
                                }
                                Outcome::Stale => EventResult::Stale,
                                Outcome::Reference => EventResult::Reference,
                            }
                        }
                    }
                };
                event_results.push(result);
            }
            if store_failure.is_none() && self.engine.journaled_writes() == writes_before {
                if let Some(reply) = reply.take() {
                    let _ = reply.send(Ok(event_results.clone()));
                }
            }
            results.push(Ok(event_results));
        }
        let mut resync_replies = Vec::with_capacity(resyncs.len());
        for (work, reply) in resyncs {
            resync_replies.push((self.apply_resync(work, now), reply));
        }
        let silence_replies = self.apply_silences(silence_requests, &mut batch, now);
        self.engine.tick(now);
        batch.changes = self.engine.changes();
        batch.outbox = self.queue_notifications(&batch.changes.transitions);
        batch.cancel_reminders.extend(
            batch
                .changes
                .transitions
                .iter()
                // Only a drift that fired has reminders.
                .filter(|transition| {
                    transition.drift.state == crate::model::DriftState::Resolved
                        && transition.drift.fired_at.is_some()
                })
                .map(|transition| transition.drift.id.clone()),
        );
        let writes =
            !(batch.events.is_empty() && batch.changes.is_empty() && batch.silences.is_empty());
        let committed = match store_failure {
            Some(error) => Err(error),
            None if !writes => Ok(()),
            None => {
                let started = std::time::Instant::now();
                let result = self.store.commit(&batch);
                self.metrics
                    .store_commit_seconds
                    .observe(started.elapsed().as_secs_f64());
                result
            }
        };
        match committed {
            Ok(()) => {
                self.engine.commit();
                if writes {
                    self.mark_store(true, now);
                    self.metrics.store_commits.inc();
                } else if now - self.last_write >= heartbeat_ms {
                    // A busy writer whose rounds write nothing still proves the store writable.
                    self.heartbeat(now);
                }
                self.after_commit(&batch.changes.transitions);
                if !batch.outbox.is_empty() {
                    self.settings.outbox_notify.notify_waiters();
                    self.settings.outbox_notify.notify_one();
                }
                let mut applied = Vec::with_capacity(submissions.len());
                for ((events, reply), result) in submissions.into_iter().zip(results) {
                    if let Some(reply) = reply {
                        let _ = reply.send(result);
                    }
                    applied.push(events);
                }
                for (outcome, reply) in resync_replies {
                    let _ = reply.send(Ok(outcome));
                }
                for change in &batch.silences {
                    match change {
                        SilenceChange::Add(stored) => {
                            self.silences.add(stored.id.clone(), stored.silence.clone())
                        }
                        SilenceChange::Remove(id) => {
                            self.silences.remove(id);
                        }
                    }
                }
                for (outcome, reply) in silence_replies {
                    let _ = reply.send(Ok(outcome));
                }
                self.discard(applied);
            }
            Err(error) => {
                self.engine.rollback();
                self.store_backoff_until = now + STORE_RETRY_MS;
                // The retirement was rolled back with the rest; do it again next round.
                self.rules_changed |= retiring;
                self.mark_store(false, now);
                self.metrics
                    .store_errors
                    .get_or_create(&crate::metrics::KindLabel::new(error.kind()))
                    .inc();
                tracing::error!(message = "Store commit failed; the round is refused and will be retried by the sender.", %error);
                for (_, reply) in submissions {
                    if let Some(reply) = reply {
                        let _ = reply.send(Err(Error::Store(error.kind())));
                    }
                }
                for (_, reply) in resync_replies {
                    let _ = reply.send(Err(Error::Store(error.kind())));
                }
                for (_, reply) in silence_replies {
                    let _ = reply.send(Err(Error::Store(error.kind())));
                }
            }
        }
        self.metrics
            .tracked_objects
            .set(i64::try_from(self.engine.object_count()).unwrap_or(i64::MAX));
        self.update_firing_gauge();
        self.metrics
            .writer_round_seconds
            .observe(round_started.elapsed().as_secs_f64());
        if now - self.last_prune >= PRUNE_INTERVAL_MS {
            self.last_prune = now;
            let retention =
                i64::try_from(self.settings.dedup_retention.as_millis()).unwrap_or(i64::MAX);
            if let Err(error) = self.store.prune_events(now.saturating_sub(retention)) {
                tracing::warn!(message = "Pruning old event keys failed.", %error);
            }
            let audit =
                i64::try_from(self.settings.audit_retention.as_millis()).unwrap_or(i64::MAX);
            if let Err(error) = self.store.prune_audit(now.saturating_sub(audit)) {
                tracing::warn!(message = "Pruning the audit trail failed.", %error);
            }
        }
    }

    /// Puts the round's silence requests into the batch: a new silence gets its id and time
    /// here, and withdraws the pending reminders of the open drifts it covers (new notices are
    /// muted by routing once it is committed).
    fn apply_silences(
        &mut self,
        requests: Vec<(SilenceRequest, SilenceReply)>,
        batch: &mut Batch,
        now: Millis,
    ) -> Vec<(SilenceOutcome, SilenceReply)> {
        let mut replies = Vec::with_capacity(requests.len());
        for (request, reply) in requests {
            let outcome = match request {
                SilenceRequest::Add(silence) => {
                    let stored = StoredSilence {
                        id: format!("sil_{}", uuid::Uuid::new_v4().simple()),
                        silence,
                        created_at: now,
                    };
                    batch.cancel_reminders.extend(
                        self.engine
                            .open_drifts()
                            .filter(|drift| stored.silence.matches(drift, now))
                            .map(|drift| drift.id.clone()),
                    );
                    batch.silences.push(SilenceChange::Add(stored.clone()));
                    SilenceOutcome::Added(stored)
                }
                SilenceRequest::Remove(id) => {
                    let removed = self.silences.contains(&id);
                    if removed {
                        batch.silences.push(SilenceChange::Remove(id));
                    }
                    SilenceOutcome::Removed(removed)
                }
            };
            replies.push((outcome, reply));
        }
        replies
    }

    /// Frees a round's decoded events on the dropper thread: freeing their JSON trees is a good
    /// part of the single writer's time per event. Inline when that thread is busy.
    fn discard(&self, events: Vec<Vec<Decoded>>) {
        if let Some(dropper) = &self.dropper {
            let _ = dropper.try_send(events);
        }
    }

    /// Reports an event whose object resync filed under another cluster name (the engine then
    /// moves it to the event's name, see `Engine::apply`).
    fn check_cluster_name(&mut self, event: &ApiServerEvent) {
        // Without objects under another name (the usual case) there is nothing to look for.
        if !self
            .engine
            .graph()
            .clusters()
            .any(|cluster| cluster != event.cluster)
        {
            return;
        }
        let Some(object) = &event.object else {
            return;
        };
        let key = crate::model::ObjectKey {
            cluster: event.cluster.clone(),
            uid: object.uid.clone(),
        };
        if self.engine.graph().get(&key).is_some() {
            return;
        }
        let Some(other) = self.engine.other_cluster_of(&event.cluster, &object.uid) else {
            return;
        };
        self.metrics
            .resync_errors
            .get_or_create(&crate::metrics::KindLabel::new("cluster_mismatch"))
            .inc();
        if self.misnamed.insert((other.clone(), event.cluster.clone())) {
            tracing::error!(
                message = "The same objects were filed under two cluster names: resync's and the events'. They are moved to the events' name; set resync.cluster to it.",
                resync_cluster = %other,
                events_cluster = %event.cluster,
            );
        }
    }

    /// Another cluster name under which one of `events`' objects is already tracked, if any.
    fn tracked_elsewhere(&self, events: &[ApiServerEvent]) -> Option<String> {
        events.iter().find_map(|event| {
            let object = event.object.as_ref()?;
            self.engine.other_cluster_of(&event.cluster, &object.uid)
        })
    }

    /// Applies one piece of resync work to the engine (inside the round's journal).
    fn apply_resync(&mut self, work: ResyncWork, now: Millis) -> ResyncOutcome {
        let mut outcome = ResyncOutcome::default();
        let opened_since = |engine: &Engine, start: usize, outcome: &mut ResyncOutcome| {
            for transition in &engine.journaled_transitions()[start..] {
                if transition.from.is_none() {
                    outcome.drifts_found.push(transition.drift.class.clone());
                }
            }
        };
        match work {
            ResyncWork::Listed(events) => {
                if let Some(other) = self.tracked_elsewhere(&events) {
                    outcome.cluster_mismatch = Some(other);
                    return outcome;
                }
                for mut event in events {
                    if let Some(object) = &event.object {
                        let key = crate::model::ObjectKey {
                            cluster: event.cluster.clone(),
                            uid: object.uid.clone(),
                        };
                        event.action = if self.engine.is_tracked(&key) {
                            Action::Update
                        } else {
                            Action::Add
                        };
                    }
                    let start = self.engine.journaled_transitions().len();
                    let writes = self.engine.journaled_writes();
                    // Applied with nothing to write is the same content under a newer
                    // resourceVersion (memory runs ahead of the store after a restart): nothing
                    // an event had missed.
                    match self.engine.apply(&event, now) {
                        Outcome::Applied if self.engine.journaled_writes() != writes => {
                            outcome.missed += 1
                        }
                        Outcome::Applied | Outcome::Stale | Outcome::Reference => {
                            outcome.unchanged += 1
                        }
                    }
                    opened_since(&self.engine, start, &mut outcome);
                }
            }
            ResyncWork::Sweep(sweep) => {
                let vanished = self.engine.vanished(&crate::classify::Sweep {
                    cluster: &sweep.cluster,
                    api_version: &sweep.api_version,
                    kind: &sweep.kind,
                    seen: &sweep.seen,
                    list_version: &sweep.list_version,
                    listed_at: sweep.listed_at,
                    selects: sweep.selects.as_ref(),
                });
                for key in vanished {
                    let start = self.engine.journaled_transitions().len();
                    if self.engine.forget(&key, now) == Outcome::Applied {
                        outcome.deleted += 1;
                    }
                    opened_since(&self.engine, start, &mut outcome);
                }
            }
        }
        outcome
    }

    /// Routes transitions to outbox rows (written in the same transaction as the transitions).
    fn queue_notifications(&self, transitions: &[Transition]) -> Vec<NewOutbox> {
        let rules = Arc::clone(self.engine.rules());
        let mut rows = Vec::new();
        for transition in transitions {
            for queued in
                self.settings
                    .router
                    .route(transition, &rules, &self.silences, transition.at)
            {
                let payload = match crate::store::rows::encode_notice(&queued.notice) {
                    Ok(payload) => payload,
                    Err(error) => {
                        tracing::error!(message = "Could not serialize a notification; it is not queued.", %error);
                        continue;
                    }
                };
                self.metrics
                    .notifications_queued
                    .get_or_create(&crate::metrics::ChannelLabel {
                        channel: queued.channel.clone(),
                    })
                    .inc();
                rows.push(NewOutbox {
                    id: notification_id(
                        &transition.drift.id,
                        &queued.channel,
                        queued.notice.kind.as_str(),
                        transition.at,
                    ),
                    channel: queued.channel,
                    drift_id: transition.drift.id.clone(),
                    kind: queued.notice.kind.as_str().to_string(),
                    group_key: queued.group_key,
                    payload,
                    created_at: transition.at,
                    not_before: queued.not_before,
                    repeat_after_ms: queued
                        .repeat_after
                        .map(|interval| i64::try_from(interval.as_millis()).unwrap_or(i64::MAX)),
                });
            }
        }
        rows
    }

    fn update_firing_gauge(&mut self) {
        let mut counts: std::collections::HashMap<crate::metrics::FiringLabel, i64> =
            std::collections::HashMap::new();
        for drift in self.engine.open_drifts() {
            if drift.state == crate::model::DriftState::Firing {
                let label = crate::metrics::FiringLabel {
                    class: drift.class.clone(),
                    severity: drift.severity.as_str().to_string(),
                    namespace: self.metrics.namespace_label(&drift.namespace),
                };
                *counts.entry(label).or_default() += 1;
            }
        }
        // Series that stopped firing are set to 0, not left stale.
        for label in std::mem::take(&mut self.firing_series) {
            if !counts.contains_key(&label) {
                self.metrics.drifts_firing.get_or_create(&label).set(0);
            }
        }
        for (label, value) in counts {
            self.metrics.drifts_firing.get_or_create(&label).set(value);
            self.firing_series.insert(label);
        }
    }

    fn heartbeat(&mut self, now: Millis) {
        match self.store.heartbeat(now) {
            Ok(()) => self.mark_store(true, now),
            Err(error) => {
                if self.health.store_writable.load(Ordering::SeqCst) {
                    tracing::error!(message = "Store is not writable.", %error);
                }
                self.mark_store(false, now);
            }
        }
    }

    fn mark_store(&mut self, ok: bool, now: Millis) {
        self.last_write = now;
        self.health.store_writable.store(ok, Ordering::SeqCst);
        if ok {
            self.health
                .last_store_ok
                .store(u64::try_from(now).unwrap_or(0), Ordering::SeqCst);
        }
    }

    fn after_commit(&self, transitions: &[Transition]) {
        for transition in transitions {
            let drift = &transition.drift;
            self.metrics
                .record_transition(&drift.class, drift.state.as_str());
            let fired = drift.state == crate::model::DriftState::Firing
                && transition.from != Some(crate::model::DriftState::Firing);
            if fired {
                self.metrics
                    .findings
                    .get_or_create(&crate::metrics::ClassSeverityLabel {
                        class: drift.class.clone(),
                        severity: drift.severity.as_str().to_string(),
                    })
                    .inc();
            }
            if transition.is_notifiable() {
                tracing::info!(
                    message = "Drift state changed.",
                    drift_id = %drift.id,
                    class = %drift.class,
                    state = drift.state.as_str(),
                    severity = drift.severity.as_str(),
                    cluster = %drift.cluster,
                    kind = %drift.kind,
                    namespace = %drift.namespace,
                    name = %drift.name,
                    summary = %drift.evidence.summary,
                );
            }
        }
    }
}
