//! The writer thread and its round. One OS thread owns the engine and the store; each round
//! takes everything queued, applies it, evaluates the timers, routes the transitions, commits
//! once and answers (see the module docs of `pipeline` for the invariants).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use super::resync::{self, Misnamed};
use super::{
    Command, Error, EventResult, Health, Reply, ResyncOutcome, ResyncReply, ResyncWork, Settings,
    SilenceOutcome, SilenceReply, SilenceRequest,
};
use crate::metrics::Metrics;
use drift_core::classify::{Engine, Outcome};
use drift_core::decode::Decoded;
use drift_core::route::{notification_id, Silences};
use drift_model::time::Clock;
use drift_model::{DriftState, Millis, Transition};
use drift_store::{Batch, EventKey, NewOutbox, SilenceChange, Store, StoredSilence};

/// Most requests taken into one transaction.
const MAX_ROUND: usize = 512;
/// How long timers wait after a failed commit before the writer tries again.
const STORE_RETRY_MS: Millis = 1_000;
/// How often old event keys are pruned.
const PRUNE_INTERVAL_MS: Millis = 10 * 60 * 1000;

/// What one round took from the queue.
#[derive(Default)]
struct Work {
    submissions: Vec<(Vec<Decoded>, Reply)>,
    resyncs: Vec<(ResyncWork, ResyncReply)>,
    silences: Vec<(SilenceRequest, SilenceReply)>,
}

impl Work {
    fn is_empty(&self) -> bool {
        self.submissions.is_empty() && self.resyncs.is_empty() && self.silences.is_empty()
    }
}

/// One round in progress: its time, the batch it will commit, and who waits for an answer.
struct Round {
    now: Millis,
    /// The round retires the drifts of classes a rules change disabled.
    retiring: bool,
    batch: Batch,
    /// Every state move of the round, in order (the recorded ones are also in the batch's
    /// history): routed to notifications, counted and logged after the commit.
    transitions: Vec<Transition>,
    /// Submitted events with their reply; `None` once answered early.
    submissions: Vec<(Vec<Decoded>, Option<Reply>)>,
    results: Vec<Result<Vec<EventResult>, Error>>,
    resync_replies: Vec<(ResyncOutcome, ResyncReply)>,
    silence_replies: Vec<(SilenceOutcome, SilenceReply)>,
    /// A store error met while applying (a duplicate check that failed): the round is refused.
    store_failure: Option<drift_store::Error>,
}

/// How often a shard's writer reads back the silences all shards share.
const SILENCE_SYNC_MS: Millis = 5_000;
/// How often a shard's writer looks for notifications without a live owner to take over.
const ADOPT_EVERY_MS: Millis = 60_000;
/// How soon a look that failed is tried again.
const ADOPT_RETRY_MS: Millis = 5_000;
/// How long a shard may have no writer before its pending notifications are another shard's to
/// send: longer than a restart or a takeover, so a shard's own notifications normally go out
/// through its own channels; short enough that a renamed or removed shard loses none.
pub const ORPHANED_AFTER_MS: Millis = 600_000;

pub(super) struct Writer {
    pub(super) engine: Engine,
    pub(super) store: Box<dyn Store>,
    pub(super) clock: Clock,
    pub(super) metrics: Arc<Metrics>,
    pub(super) health: Arc<Health>,
    pub(super) settings: Settings,
    /// The silences created through the API (committed).
    pub(super) silences: Silences,
    pub(super) firing_series: std::collections::HashSet<crate::metrics::FiringLabel>,
    pub(super) rules_changed: bool,
    pub(super) store_backoff_until: Millis,
    pub(super) last_write: Millis,
    pub(super) last_prune: Millis,
    /// When the silences were last read back from a store other shards write too.
    pub(super) last_silence_sync: Millis,
    /// When notifications without a live owner were last looked for (shards only).
    pub(super) last_adoption: Millis,
    /// How many notifications of shards without a writer the last look left (said when it
    /// changes).
    pub(super) last_stranded: usize,
    /// Open drifts a silence created through another shard covers: their pending reminders are
    /// withdrawn in the next round.
    pub(super) reminders_to_cancel: Vec<String>,
    /// Set when a commit's outcome could not be told: nothing is committed any more (the
    /// engine may differ from the store), until the replica loads the state again.
    pub(super) gave_up: bool,
    pub(super) dropper: Option<SyncSender<Vec<Vec<Decoded>>>>,
    /// Cluster-name mix-ups already logged.
    pub(super) misnamed: Misnamed,
    /// The engine's count of implausible versions already reported.
    pub(super) implausible_seen: u64,
    /// The engine's count of refused objects already reported.
    pub(super) refused_seen: u64,
    /// When a refusal at a cap was last logged (at most one line a minute).
    pub(super) refusal_logged: Option<std::time::Instant>,
}

impl Writer {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        engine: Engine,
        store: Box<dyn Store>,
        clock: Clock,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
        settings: Settings,
        silences: Silences,
    ) -> Writer {
        Writer {
            engine,
            store,
            clock,
            metrics,
            health,
            settings,
            silences,
            firing_series: HashSet::new(),
            // Rules may have changed while the process was down: retire drifts of classes that
            // are now disabled in the first round.
            rules_changed: true,
            store_backoff_until: 0,
            last_write: 0,
            last_prune: 0,
            last_silence_sync: 0,
            last_adoption: 0,
            last_stranded: 0,
            reminders_to_cancel: Vec::new(),
            gave_up: false,
            dropper: spawn_dropper(),
            misnamed: Misnamed::default(),
            implausible_seen: 0,
            refused_seen: 0,
            refusal_logged: None,
        }
    }

    pub(super) fn run(mut self, receiver: mpsc::Receiver<Command>) {
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
            let mut work = Work::default();
            for command in round {
                match command {
                    Command::Submit { events, reply } => work.submissions.push((events, reply)),
                    Command::Resync {
                        work: listed,
                        reply,
                    } => work.resyncs.push((listed, reply)),
                    Command::SetRules(rules) => {
                        self.engine.set_rules(rules);
                        self.rules_changed = true;
                    }
                    Command::Silence { request, reply } => work.silences.push((request, reply)),
                    // A read: answered from the engine as it stands, before this round's work.
                    Command::Fleet { group, reply } => {
                        let _ = reply.send(self.engine.fleet_view(group.as_deref()));
                    }
                    Command::Shutdown => stop = true,
                }
            }
            self.round(work);
            if stop {
                // Drain whatever arrived meanwhile so every queued request gets an answer
                // (resync work is dropped: its sender sees the writer stopped).
                let rest = Work {
                    submissions: receiver
                        .try_iter()
                        .filter_map(|command| match command {
                            Command::Submit { events, reply } => Some((events, reply)),
                            _ => None,
                        })
                        .collect(),
                    ..Work::default()
                };
                self.round(rest);
                self.record_pending_before_stop();
                return;
            }
        }
    }

    /// Writes the pending drifts that live in memory only, so a restart restores them with
    /// their `since` (and grace) instead of finding them again from scratch. A failure here loses
    /// nothing that was acknowledged: the next start re-assesses every object.
    fn record_pending_before_stop(&mut self) {
        if self.gave_up {
            return;
        }
        self.engine.begin();
        self.engine.record_pending();
        let changes = self.engine.changes();
        if changes.is_empty() {
            self.engine.commit();
            return;
        }
        let recorded = changes.drifts.len();
        let mut batch = Batch::default();
        let committed = super::take_changes(changes, &mut batch)
            .and_then(|_transitions| self.store.commit(&batch));
        match committed {
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

    /// One round: everything taken from the queue, plus due timers, in one transaction. The
    /// steps, in order: apply the events, the resync work and the silence writes; evaluate the
    /// timers; route the transitions to outbox rows; commit; observe; answer; prune.
    fn round(&mut self, work: Work) {
        let now = (self.clock)();
        self.sync_silences(now);
        if now - self.last_adoption >= ADOPT_EVERY_MS {
            // Again every minute after the first, when the writer started.
            self.adopt_notifications(now);
        }
        if work.is_empty()
            && !self.timers_due(now)
            && !self.rules_changed
            && self.reminders_to_cancel.is_empty()
        {
            if now - self.last_write >= self.heartbeat_ms() {
                self.heartbeat(now);
            }
            return;
        }
        let started = std::time::Instant::now();
        let mut round = self.begin(now);
        round
            .batch
            .cancel_reminders
            .append(&mut self.reminders_to_cancel);
        self.apply_events(&mut round, work.submissions);
        self.apply_resyncs(&mut round, work.resyncs);
        self.apply_silences(&mut round, work.silences);
        self.evaluate(&mut round);
        self.route(&mut round);
        let committed = self.commit(&mut round);
        let committed = self.settle_unknown(&round, committed);
        // Observed before answering, so a caller that has its answer also sees the counters of
        // its own events.
        self.observe(started);
        self.answer(round, committed);
        self.prune(now);
    }

    fn heartbeat_ms(&self) -> Millis {
        i64::try_from(self.settings.heartbeat_interval.as_millis()).unwrap_or(5000)
    }

    /// True when a drift deadline has come (and the store is not backing off after a failure).
    fn timers_due(&self, now: Millis) -> bool {
        now >= self.store_backoff_until
            && self
                .engine
                .next_deadline()
                .is_some_and(|deadline| deadline <= now)
    }

    /// Starts the engine's journal; after a rules change, retires the drifts of classes the new
    /// rules disable.
    fn begin(&mut self, now: Millis) -> Round {
        self.engine.begin();
        let retiring = std::mem::take(&mut self.rules_changed);
        if retiring {
            self.engine.retire_disabled(now);
        }
        Round {
            now,
            retiring,
            batch: Batch::default(),
            transitions: Vec::new(),
            submissions: Vec::new(),
            results: Vec::new(),
            resync_replies: Vec::new(),
            silence_replies: Vec::new(),
            store_failure: None,
        }
    }

    /// Applies the submitted events: duplicates by (`source`, `id`) are dropped, the rest go to
    /// the engine. A request whose events changed nothing durable is answered at once (nothing
    /// of it waits in the commit; if the commit fails, the rollback takes back only what it never
    /// needed to write).
    fn apply_events(&mut self, round: &mut Round, submissions: Vec<(Vec<Decoded>, Reply)>) {
        let now = round.now;
        let mut keys_in_round = HashSet::new();
        round.results.reserve(submissions.len());
        // Which of the round's events the store has seen, asked once for the whole round (one
        // query on PostgreSQL, instead of one round trip per event).
        let keys: Vec<EventKey> = submissions
            .iter()
            .flat_map(|(events, _)| events.iter())
            .filter_map(|event| match event {
                Decoded::ApiServer(event) => Some(EventKey {
                    source: event.source.clone(),
                    id: event.id.clone(),
                }),
                Decoded::Ignored { .. } => None,
            })
            .collect();
        let seen = match self.store.duplicates(&keys) {
            Ok(seen) => seen,
            Err(error) => {
                round.store_failure.get_or_insert(error);
                HashSet::new()
            }
        };
        for (mut events, reply) in submissions {
            let mut reply = Some(reply);
            let writes_before = self.engine.journaled_writes();
            let mut event_results = Vec::with_capacity(events.len());
            for event in &mut events {
                let result = match event {
                    Decoded::Ignored { .. } => EventResult::Ignored,
                    Decoded::ApiServer(event) => {
                        let key = EventKey {
                            source: event.source.clone(),
                            id: event.id.clone(),
                        };
                        let duplicate = keys_in_round.contains(&key) || seen.contains(&key);
                        if duplicate {
                            EventResult::Duplicate
                        } else {
                            let writes = self.engine.journaled_writes();
                            match self.engine.apply(event, now) {
                                Outcome::Applied => {
                                    keys_in_round.insert(key.clone());
                                    // An event that changed nothing durable (status churn with
                                    // the same compact content) needs no key and no disk write:
                                    // a redelivery applies the same content again, which changes
                                    // nothing either.
                                    if self.engine.journaled_writes() != writes {
                                        round.batch.events.push((key, now));
                                    }
                                    EventResult::Applied
                                }
                                Outcome::Stale => EventResult::Stale,
                                Outcome::Reference => EventResult::Reference,
                                Outcome::Conflict => {
                                    self.misnamed.conflict(&self.engine, &self.metrics, event);
                                    EventResult::Conflict
                                }
                                Outcome::OverCapacity => EventResult::OverCapacity,
                            }
                        }
                    }
                };
                event_results.push(result);
            }
            if round.store_failure.is_none() && self.engine.journaled_writes() == writes_before {
                if let Some(reply) = reply.take() {
                    self.count_refusals();
                    let _ = reply.send(Ok(event_results.clone()));
                }
            }
            round.submissions.push((events, reply));
            round.results.push(Ok(event_results));
        }
    }

    /// Applies the resync loop's work (listed objects, complete lists' absentees).
    fn apply_resyncs(&mut self, round: &mut Round, resyncs: Vec<(ResyncWork, ResyncReply)>) {
        for (work, reply) in resyncs {
            let outcome = resync::apply(
                &mut self.engine,
                &mut self.misnamed,
                &self.metrics,
                work,
                round.now,
            );
            round.resync_replies.push((outcome, reply));
        }
    }

    /// Puts the round's silence requests into the batch: a new silence gets its id and time
    /// here, and withdraws the pending reminders of the open drifts it covers (new notices are
    /// muted by routing once it is committed).
    fn apply_silences(&mut self, round: &mut Round, requests: Vec<(SilenceRequest, SilenceReply)>) {
        let (now, batch) = (round.now, &mut round.batch);
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
                    // Removed already in this round: a second removal finds nothing, as it
                    // would one round later.
                    let removed_now = batch
                        .silences
                        .iter()
                        .any(|change| *change == SilenceChange::Remove(id.clone()));
                    let removed = self.silences.contains(&id) && !removed_now;
                    if removed {
                        batch.silences.push(SilenceChange::Remove(id));
                    }
                    SilenceOutcome::Removed(removed)
                }
            };
            round.silence_replies.push((outcome, reply));
        }
    }

    /// Fires pending drifts whose grace ran out (and the engine's other timed work), and takes
    /// what the round changed from the engine's journal.
    fn evaluate(&mut self, round: &mut Round) {
        self.engine.tick(round.now);
        match super::take_changes(self.engine.changes(), &mut round.batch) {
            Ok(transitions) => round.transitions = transitions,
            Err(error) => {
                round.store_failure.get_or_insert(error);
            }
        }
    }

    /// Routes the round's transitions to outbox rows (committed with them), and withdraws the
    /// reminders of drifts that resolved.
    fn route(&mut self, round: &mut Round) {
        let batch = &mut round.batch;
        batch.outbox = self.queue_notifications(&round.transitions);
        batch.cancel_reminders.extend(
            round
                .transitions
                .iter()
                // Only a drift that fired has reminders.
                .filter(|transition| {
                    transition.drift.state == DriftState::Resolved
                        && transition.drift.fired_at.is_some()
                })
                .map(|transition| transition.drift.id.clone()),
        );
    }

    /// Commits the round in one transaction; a round that changed nothing durable writes
    /// nothing.
    fn commit(&mut self, round: &mut Round) -> Result<bool, drift_store::Error> {
        if let Some(error) = round.store_failure.take() {
            return Err(error);
        }
        if self.gave_up {
            return Err(drift_store::Error::Unavailable(
                "the writer gave its role up after a commit of unknown outcome".to_string(),
            ));
        }
        let batch = &round.batch;
        if batch.is_empty() {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        let result = self.store.commit(batch);
        self.metrics
            .store_commit_seconds
            .observe(started.elapsed().as_secs_f64());
        result.map(|()| true)
    }

    /// Ends the round: on success the engine keeps its changes, the silences in force follow
    /// the committed writes and every waiting request gets its answer; on failure the engine
    /// rolls back to the committed state and every request gets [`Error::Store`].
    fn answer(&mut self, mut round: Round, committed: Result<bool, drift_store::Error>) {
        let now = round.now;
        match committed {
            Ok(wrote) => {
                self.engine.commit();
                if wrote {
                    self.mark_store(true, now);
                    self.metrics.store_commits.inc();
                } else if now - self.last_write >= self.heartbeat_ms() {
                    // A busy writer whose rounds write nothing still proves the store writable.
                    self.heartbeat(now);
                }
                self.after_commit(&round.transitions);
                if !round.batch.outbox.is_empty() {
                    self.settings.outbox_notify.notify_waiters();
                    self.settings.outbox_notify.notify_one();
                }
                for change in &round.batch.silences {
                    match change {
                        SilenceChange::Add(stored) => {
                            self.silences.add(stored.id.clone(), stored.silence.clone())
                        }
                        SilenceChange::Remove(id) => {
                            self.silences.remove(id);
                        }
                    }
                }
                let mut applied = Vec::with_capacity(round.submissions.len());
                for ((events, reply), result) in round.submissions.into_iter().zip(round.results) {
                    if let Some(reply) = reply {
                        let _ = reply.send(result);
                    }
                    applied.push(events);
                }
                for (outcome, reply) in round.resync_replies {
                    let _ = reply.send(Ok(outcome));
                }
                for (outcome, reply) in round.silence_replies {
                    let _ = reply.send(Ok(outcome));
                }
                self.discard(applied);
            }
            Err(error) => {
                self.engine.rollback();
                if matches!(error, drift_store::Error::LeaseLost { .. }) {
                    // Fenced: another replica is the writer. The lease keeper sees this flag and
                    // stops this replica; until then every round fails the same way.
                    self.health.lease_lost.store(true, Ordering::SeqCst);
                }
                self.store_backoff_until = now + STORE_RETRY_MS;
                // The retirement was rolled back with the rest; do it again next round.
                self.rules_changed |= round.retiring;
                self.mark_store(false, now);
                self.metrics
                    .store_errors
                    .get_or_create(&crate::metrics::KindLabel::new(error.kind()))
                    .inc();
                tracing::error!(message = "Store commit failed; the round is refused and will be retried by the sender.", %error);
                // Withdrawals read back from other shards' silences are asked again next round.
                self.reminders_to_cancel
                    .append(&mut round.batch.cancel_reminders);
                let refused = Error::Store(error.kind());
                for (_, reply) in round.submissions {
                    if let Some(reply) = reply {
                        let _ = reply.send(Err(refused.clone()));
                    }
                }
                for (_, reply) in round.resync_replies {
                    let _ = reply.send(Err(refused.clone()));
                }
                for (_, reply) in round.silence_replies {
                    let _ = reply.send(Err(refused.clone()));
                }
            }
        }
    }

    /// Publishes the engine's counts of implausible versions and refused objects (before any
    /// answer, so a caller that has its answer sees the counts of its own events).
    fn count_refusals(&mut self) {
        if let Some(parts) = self.engine.take_pipeline_readiness() {
            for (cluster, part, ready) in parts {
                self.metrics
                    .pipeline_ready
                    .get_or_create(&crate::metrics::PipelinePartLabel {
                        cluster,
                        part: part.to_string(),
                    })
                    .set(i64::from(ready));
            }
        }
        for ((rule, kind), count) in self.engine.take_invariant_errors() {
            self.metrics
                .invariant_errors
                .get_or_create(&crate::metrics::RuleErrorLabel {
                    rule,
                    kind: kind.to_string(),
                })
                .inc_by(count);
        }
        for failure in self.engine.take_invariant_failures() {
            tracing::warn!(
                message = "An invariant could not be evaluated on an object: it is neither held nor broken there (logged once per object and rule until it evaluates again; drift_sentinel_invariant_errors_total counts every failure).",
                rule = %failure.rule,
                kind = failure.kind,
                cluster = %failure.subject.cluster,
                object = %failure.object,
                error = %failure.error,
            );
        }
        let implausible = self.engine.implausible_versions();
        self.metrics
            .implausible_versions
            .inc_by(implausible.saturating_sub(self.implausible_seen));
        self.implausible_seen = implausible;
        let refused = self.engine.refused_objects();
        self.metrics
            .objects_refused
            .inc_by(refused.saturating_sub(self.refused_seen));
        if refused > self.refused_seen
            && self
                .refusal_logged
                .is_none_or(|logged| logged.elapsed() >= std::time::Duration::from_secs(60))
        {
            self.refusal_logged = Some(std::time::Instant::now());
            let capacity = self.engine.capacity();
            tracing::warn!(
                message = "Objects are not tracked, or not updated, because a cap in the limits section is reached (drift_sentinel_objects_refused_total counts them; logged at most once a minute).",
                refused_so_far = refused,
                objects = self.engine.object_count(),
                max_objects = capacity.objects,
                state_bytes = self.engine.graph().bytes(),
                max_state_bytes = capacity.bytes,
                max_objects_per_cluster = capacity.objects_per_cluster,
                max_clusters = capacity.clusters,
            );
        }
        self.refused_seen = refused;
    }

    /// Gauges that follow every round: tracked objects, firing drifts, round time.
    fn observe(&mut self, started: std::time::Instant) {
        self.count_refusals();
        let capacity = self.engine.capacity();
        self.metrics
            .cluster_objects_max
            .set(i64::try_from(self.engine.graph().largest_cluster()).unwrap_or(i64::MAX));
        self.metrics
            .cluster_objects_limit
            .set(i64::try_from(capacity.objects_per_cluster).unwrap_or(i64::MAX));
        self.metrics
            .objects_limit
            .set(i64::try_from(capacity.objects).unwrap_or(i64::MAX));
        self.metrics
            .state_bytes
            .set(i64::try_from(self.engine.graph().bytes()).unwrap_or(i64::MAX));
        self.metrics
            .state_bytes_limit
            .set(i64::try_from(capacity.bytes).unwrap_or(i64::MAX));
        self.metrics
            .tracked_objects
            .set(i64::try_from(self.engine.object_count()).unwrap_or(i64::MAX));
        self.update_firing_gauge();
        self.metrics
            .writer_round_seconds
            .observe(started.elapsed().as_secs_f64());
    }

    /// Every [`PRUNE_INTERVAL_MS`]: forgets old event keys and the audit trail past retention.
    fn prune(&mut self, now: Millis) {
        if self.gave_up || now - self.last_prune < PRUNE_INTERVAL_MS {
            return;
        }
        self.last_prune = now;
        let retention = drift_model::time::millis(self.settings.dedup_retention);
        if let Err(error) = self.store.prune_events(now.saturating_sub(retention)) {
            tracing::warn!(message = "Pruning old event keys failed.", %error);
        }
        let audit = drift_model::time::millis(self.settings.audit_retention);
        if let Err(error) = self.store.prune_audit(now.saturating_sub(audit)) {
            tracing::warn!(message = "Pruning the audit trail failed.", %error);
        }
    }

    /// Frees a round's decoded events on the dropper thread: freeing their JSON trees is a good
    /// part of the single writer's time per event. Inline when that thread is busy.
    fn discard(&self, events: Vec<Vec<Decoded>>) {
        if let Some(dropper) = &self.dropper {
            let _ = dropper.try_send(events);
        }
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
                    group_key: queued.group_key,
                    notice: queued.notice,
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
            if drift.state == DriftState::Firing {
                let label = crate::metrics::FiringLabel {
                    class: drift.class.clone(),
                    severity: drift.severity.as_str().to_string(),
                    namespace: self.metrics.namespace_label(&drift.namespace),
                    group: drift_model::group::family_of(drift_model::group::api_group(
                        &drift.api_version,
                    ))
                    .map_or("other", |family| family.id)
                    .to_string(),
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

    /// A commit whose outcome is unknown (the connection dropped after COMMIT was sent) is
    /// settled by asking the store whether the round's event keys are there: all of them, it
    /// landed; none, it did not. Without events to ask by, or without an answer, the state is
    /// uncertain: the round fails and the writer gives its role up (`lease_lost`), so the
    /// replica loads the state again from the store instead of going on from a guess.
    fn settle_unknown(
        &mut self,
        round: &Round,
        committed: Result<bool, drift_store::Error>,
    ) -> Result<bool, drift_store::Error> {
        let Err(drift_store::Error::CommitUnknown(detail)) = committed else {
            return committed;
        };
        let keys: Vec<EventKey> = round
            .batch
            .events
            .iter()
            .map(|(key, _)| key.clone())
            .collect();
        let found = if keys.is_empty() {
            None
        } else {
            self.store.committed_keys(&keys).ok().map(|seen| seen.len())
        };
        match found {
            Some(count) if count == keys.len() => {
                tracing::warn!(
                    message = "A commit whose answer was lost had landed; going on.",
                    keys = count
                );
                Ok(true)
            }
            Some(0) => Err(drift_store::Error::CommitUnknown(detail)),
            _ => {
                tracing::error!(message = "A commit's outcome is unknown; giving the writer role up to reload the state.", %detail);
                // From here nothing is committed (every later round fails), so nothing is
                // written from a state that may differ from the store's.
                self.gave_up = true;
                self.health.gave_up.store(true, Ordering::SeqCst);
                Err(drift_store::Error::CommitUnknown(detail))
            }
        }
    }

    /// In a sharded deployment the other shards' writers create and remove silences through
    /// their APIs in the same store: read them back every few seconds, so every shard enforces
    /// every silence (a notification queued in between is not withdrawn).
    fn sync_silences(&mut self, now: Millis) {
        if !self.settings.shard.set || now - self.last_silence_sync < SILENCE_SYNC_MS {
            return;
        }
        // The first read-back after loading treats every silence as new: one created through
        // another shard while this shard had no writer withdraws its reminders too (withdrawing
        // twice is harmless).
        let first = self.last_silence_sync == 0;
        self.last_silence_sync = now;
        match self.store.silences() {
            Ok(stored) => {
                // A silence another shard created withdraws the reminders of this shard's open
                // drifts it covers, as the creating shard did for its own.
                for new in stored
                    .iter()
                    .filter(|stored| first || !self.silences.contains(&stored.id))
                {
                    self.reminders_to_cancel.extend(
                        self.engine
                            .open_drifts()
                            .filter(|drift| new.silence.matches(drift, now))
                            .map(|drift| drift.id.clone()),
                    );
                }
                self.silences =
                    Silences::new(stored.into_iter().map(|stored| (stored.id, stored.silence)));
            }
            Err(error) => {
                tracing::warn!(message = "Could not read the silences of the other shards.", %error)
            }
        }
    }

    /// In a sharded deployment, takes over the pending notifications of this shard's clusters
    /// that no live shard will send (of a shard renamed, removed, or without a writer for
    /// [`ORPHANED_AFTER_MS`]) and those without a shard: once after loading, before the relays
    /// start (so a notification queued before shards goes out through its own shard's channel),
    /// then every [`ADOPT_EVERY_MS`].
    pub(super) fn adopt_notifications(&mut self, now: Millis) {
        if !self.settings.shard.set || self.gave_up {
            return;
        }
        let shard = std::sync::Arc::clone(&self.settings.shard);
        let rules = std::sync::Arc::clone(self.engine.rules());
        match self
            .store
            .adopt_notifications(now, ORPHANED_AFTER_MS, &|cluster| {
                super::owns_drift_cluster(&shard, &rules, cluster)
            }) {
            Ok(adopted) => {
                self.last_adoption = now;
                for (from, count) in &adopted.orphaned {
                    tracing::warn!(
                        message = "Took over the pending notifications of a shard without a writer.",
                        shard = %shard.name,
                        from = %from,
                        count,
                    );
                }
                if adopted.stranded != self.last_stranded && adopted.stranded > 0 {
                    tracing::warn!(
                        message = "Pending notifications of shards without a writer for 20 minutes are of clusters this shard does not own, and no shard took them: they stay pending until a shard owns their cluster.",
                        shard = %shard.name,
                        count = adopted.stranded,
                    );
                }
                self.last_stranded = adopted.stranded;
                if adopted.unsharded > 0 {
                    tracing::info!(
                        message = "Took over pending notifications queued before shards, of this shard's clusters.",
                        shard = %shard.name,
                        count = adopted.unsharded,
                    );
                }
            }
            Err(error) => {
                // Looked at again in a few seconds, not at once (the store may be down) nor a
                // minute later (the relays already run).
                self.last_adoption = now - ADOPT_EVERY_MS + ADOPT_RETRY_MS;
                if matches!(error, drift_store::Error::LeaseLost { .. }) {
                    self.health.lease_lost.store(true, Ordering::SeqCst);
                }
                tracing::warn!(message = "Could not look for notifications without a live shard.", %error);
            }
        }
    }

    fn heartbeat(&mut self, now: Millis) {
        if self.gave_up {
            return;
        }
        match self.store.heartbeat(now) {
            Ok(()) => self.mark_store(true, now),
            Err(error) => {
                if matches!(error, drift_store::Error::LeaseLost { .. }) {
                    self.health.lease_lost.store(true, Ordering::SeqCst);
                }
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
            let fired =
                drift.state == DriftState::Firing && transition.from != Some(DriftState::Firing);
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
