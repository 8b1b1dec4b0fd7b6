//! The writer thread and its round. One OS thread owns the engine and the store; each round
//! takes everything queued, applies it, evaluates the timers, routes the transitions, commits
//! once and answers (see the module docs of `pipeline` for the invariants). This file is the
//! thread and the round's steps in order; the steps that apply queued work are `apply.rs`, the
//! timers between rounds (heartbeat, pruning, the shards' silences and notifications, the
//! record before stopping) `housekeeping.rs`, a commit whose outcome was lost `recovery.rs`,
//! the transitions to outbox rows `routing.rs`, and what a round tells the metrics and the log
//! `observe.rs`.

mod answers;
mod apply;
mod housekeeping;
mod observe;
mod recovery;
mod remediate;
mod routing;

pub use routing::outbox_rows;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use super::resync::{self, Misnamed};
use super::{
    Approval, ApprovalOutcome, ApprovalReply, Command, Error, EventResult, Health, Reply,
    ResyncOutcome, ResyncReply, ResyncWork, SenderAnswer, SenderReply, SenderStep, Settings,
    SilenceOutcome, SilenceReply, SilenceRequest,
};
use crate::metrics::Metrics;
use answers::{Answer, Answers};
use drift_core::classify::{Engine, Outcome};
use drift_core::decode::Decoded;
use drift_core::route::Silences;
use drift_model::time::Clock;
use drift_model::{DriftState, Millis, Transition};
use drift_store::{Batch, EventKey, SilenceChange, Store, StoredSilence};

/// Most requests taken into one transaction.
const MAX_ROUND: usize = 512;
/// How long timers wait after a failed commit before the writer tries again.
const STORE_RETRY_MS: Millis = 1_000;
/// How often old event keys are pruned.
const PRUNE_INTERVAL_MS: Millis = 10 * 60 * 1000;
/// How long one round may spend judging the live objects again after a start or a reload
/// (past one object: each slice judges at least one): the rest waits for the next rounds, so
/// events queued meanwhile are answered between slices.
const REJUDGE_SLICE: Duration = Duration::from_millis(20);

/// What one round took from the queue.
#[derive(Default)]
struct Work {
    submissions: Vec<(Vec<Decoded>, Reply)>,
    resyncs: Vec<(ResyncWork, ResyncReply)>,
    silences: Vec<(SilenceRequest, SilenceReply)>,
    approvals: Vec<(Approval, ApprovalReply)>,
    sender_steps: Vec<(SenderStep, SenderReply)>,
    traffic: Vec<drift_core::classify::traffic::Observation>,
}

impl Work {
    fn is_empty(&self) -> bool {
        self.submissions.is_empty()
            && self.resyncs.is_empty()
            && self.silences.is_empty()
            && self.approvals.is_empty()
            && self.sender_steps.is_empty()
            && self.traffic.is_empty()
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
    approval_replies: Vec<(ApprovalOutcome, ApprovalReply)>,
    sender_replies: Vec<(SenderAnswer, SenderReply)>,
    /// A store error met while applying (a duplicate check that failed): the round is refused.
    store_failure: Option<drift_store::Error>,
    /// The remediation rails' memory before the round, put back when its commit fails.
    ledger: Option<drift_core::remediate::Ledger>,
    /// The engine's fights before the round changed one, put back when its commit fails.
    fights: Option<std::collections::HashMap<drift_model::ObjectKey, String>>,
    /// Attempts claimed in this round: claimable again when its commit fails.
    claimed_now: Vec<i64>,
}

impl Round {
    /// Whether the round changed a drift: a move, or a drift row (an open drift updated in
    /// place). A firing drift changes no other way.
    fn changed_drifts(&self) -> bool {
        !self.batch.drifts.is_empty() || !self.transitions.is_empty()
    }
}

/// How often a shard's writer looks for notifications without a live owner to take over.
const ADOPT_EVERY_MS: Millis = 60_000;
/// How soon a look that failed is tried again.
const ADOPT_RETRY_MS: Millis = 5_000;
/// How long a shard may have no writer before its pending notifications are another shard's to
/// send: longer than a restart or a takeover, so a shard's own notifications normally go out
/// through its own channels; short enough that a renamed or removed shard loses none.
pub const ORPHANED_AFTER_MS: Millis = 600_000;

pub(super) struct Writer {
    engine: Engine,
    /// Decides what remediation does about the drifts that fire (`remediate.rs`).
    remediator: drift_core::remediate::Remediator,
    /// Attempts this writer claimed for the sender: each is claimed once (never two requests).
    /// Kept for the process's life (a few bytes per attempt, and attempts are bounded by the
    /// budget): a stale read of a row settled since must not be claimed again.
    claimed: HashSet<i64>,
    store: Box<dyn Store>,
    clock: Clock,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    settings: Settings,
    /// The silences created through the API (committed).
    silences: Silences,
    /// When each group's next message goes (`groupWait`, `groupInterval`); a round's times are
    /// taken back with the engine's when its commit fails.
    pacer: drift_core::route::Pacer,
    /// Set when the rules changed: the next round retires the drifts of classes they disable.
    rules_changed: bool,
    /// Open drifts a silence created through another shard covers: their pending reminders are
    /// withdrawn in the next round.
    reminders_to_cancel: Vec<String>,
    /// Set when a commit's outcome could not be told: nothing is committed any more (the
    /// engine may differ from the store), until the replica loads the state again.
    gave_up: bool,
    /// Sends the rounds' answers after the store's sync (`answers.rs`).
    answers: answers::Answerer,
    /// The thread that frees applied events (see [`Writer::discard`]).
    dropper: Option<SyncSender<Vec<Vec<Decoded>>>>,
    /// When the timers between rounds last ran.
    timers: Timers,
    /// What was already reported to the metrics and the log, so each is reported once.
    reported: Reported,
    /// Why the live objects are being judged again (`start` or `reload`), while they are.
    rejudge_cause: &'static str,
    /// How long a round may spend on that re-judge ([`REJUDGE_SLICE`]; tests shorten it).
    rejudge_slice: Duration,
    /// Publishes the fleet view readers get (`fleet_view`).
    fleet: super::fleet_view::Publisher,
}

/// When the writer's timers last ran (milliseconds since the epoch; 0: never).
#[derive(Debug, Default)]
struct Timers {
    /// After a failed commit, timers wait until then.
    store_backoff_until: Millis,
    /// The last write that reached the store (a commit or a heartbeat).
    last_write: Millis,
    /// The last pruning of event keys and the audit trail.
    last_prune: Millis,
    /// When the silences were last read back from a store other shards write too.
    last_silence_sync: Millis,
    /// When notifications without a live owner were last looked for (shards only).
    last_adoption: Millis,
}

/// What the writer already told the metrics and the log.
#[derive(Default)]
struct Reported {
    /// What the firing gauge shows: each firing drift's series and each series' count.
    firing: observe::Firing,
    /// Whether the firing gauge must be counted from every open drift: at the start (the
    /// drifts restored fire; a rolled-back round that had changed a drift counts it at once,
    /// `answer`). Other rounds follow the drifts they changed (a firing drift changes only by a
    /// move or a drift row the round records): counting every open drift after each such round
    /// was 4–6 % of the writer at half the sink's maximum rate, and more with more drifts open.
    firing_recount: bool,
    /// Cluster-name mix-ups already logged.
    misnamed: Misnamed,
    /// The engine's count of implausible versions already reported.
    implausible_seen: u64,
    /// The engine's count of refused objects already reported.
    refused_seen: u64,
    /// When a refusal at a cap was last logged (at most one line a minute).
    refusal_logged: Option<std::time::Instant>,
    /// How many notifications of shards without a writer the last look left (said when it
    /// changes).
    last_stranded: usize,
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
        fleet: super::fleet_view::Publisher,
    ) -> Writer {
        let mut store = store;
        let mut remediator =
            drift_core::remediate::Remediator::new(Arc::clone(&settings.remediation));
        remediator.restore_fights(engine.fights(), engine.graph());
        let answers = answers::Answerer::start(
            store.take_syncer(),
            Arc::clone(&settings.outbox_notify),
            Arc::clone(&health),
            Arc::clone(&metrics),
        );
        Writer {
            engine,
            remediator,
            claimed: HashSet::new(),
            store,
            answers,
            clock,
            metrics,
            health,
            settings,
            silences,
            pacer: drift_core::route::Pacer::new(),
            // Rules may have changed while the process was down: retire drifts of classes that
            // are now disabled in the first round.
            rules_changed: true,
            reminders_to_cancel: Vec::new(),
            gave_up: false,
            dropper: spawn_dropper(),
            timers: Timers::default(),
            reported: Reported {
                firing_recount: true,
                ..Reported::default()
            },
            rejudge_cause: "start",
            rejudge_slice: REJUDGE_SLICE,
            fleet,
        }
        .publishing_rejudge()
    }

    /// New rules (a reload): the next round retires what they disable, and the live objects are
    /// judged again a slice per round.
    fn set_rules(&mut self, rules: Arc<drift_core::classify::Rules>) {
        self.engine.set_rules(rules);
        self.rules_changed = true;
        self.rejudge_cause = "reload";
        self.publish_rejudge();
    }

    /// Tells `/readyz` where the re-judge of the live objects stands.
    fn publishing_rejudge(self) -> Writer {
        self.publish_rejudge();
        self
    }

    fn publish_rejudge(&self) {
        let progress = self
            .engine
            .rejudge_progress()
            .map(|(done, total)| super::Rejudging {
                cause: self.rejudge_cause,
                done,
                total,
            });
        *self
            .health
            .rejudging
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = progress;
    }

    pub(super) fn run(mut self, receiver: mpsc::Receiver<Command>) {
        // Every rule evaluation on this thread gets a wall-clock backstop besides its cost
        // budget: a cost the model prices too low still cannot hold the writer.
        drift_core::classify::invariants::set_backstop_clock(Some(monotonic_micros));
        loop {
            let now = (self.clock)();
            let mut wait =
                Duration::from_millis(u64::try_from((self.wake_at() - now).max(1)).unwrap_or(1));
            if let Some(due) = self.fleet.due_in() {
                // A reader waits for a newer fleet view.
                wait = wait.min(due.max(Duration::from_millis(1)));
            }
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
                    Command::SetRules(rules) => self.set_rules(rules),
                    Command::Silence { request, reply } => work.silences.push((request, reply)),
                    Command::Approve { approval, reply } => work.approvals.push((approval, reply)),
                    Command::Sender { step, reply } => work.sender_steps.push((step, reply)),
                    Command::Traffic(observation) => work.traffic.push(*observation),
                    // The flag it wakes the writer for is read after the round.
                    Command::FleetWanted => {}
                    Command::Shutdown => stop = true,
                }
            }
            self.round(work);
            let engine = &self.engine;
            self.fleet.publish_if_wanted(|| engine.fleet_view(None));
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
                // Whatever waits for its sync is synced and answered before the writer stops.
                self.answers.close();
                return;
            }
        }
    }

    /// When the writer has something to do without a request: its next heartbeat, in a shard
    /// its next read-back of the shared silences, and the engine's next deadline (not before
    /// the backoff after a failed commit).
    fn wake_at(&self) -> Millis {
        let mut wake_at = self.timers.last_write + self.heartbeat_ms();
        if self.settings.shard.set {
            // A shard reads the shared silences back on time, not at its next heartbeat.
            wake_at = wake_at.min(self.timers.last_silence_sync + self.silence_sync_ms());
        }
        if let Some(deadline) = self.engine.next_deadline() {
            // After a failed commit, timers wait for the backoff: a store that keeps failing
            // must not spin the writer.
            wake_at = wake_at.min(deadline.max(self.timers.store_backoff_until));
        }
        wake_at
    }

    /// One round: everything taken from the queue, plus due timers, in one transaction. The
    /// steps, in order: apply the events, the resync work and the silence writes; evaluate the
    /// timers; route the transitions to outbox rows; commit; observe; answer; prune.
    fn round(&mut self, work: Work) {
        let now = (self.clock)();
        if self.answers.failed() && !self.gave_up {
            // The state may hold rounds the store lost: commit nothing more from it, and have
            // the process restarted to load what is on disk (`/healthz`).
            self.gave_up = true;
            self.health.gave_up.store(true, Ordering::SeqCst);
            self.health.must_restart.store(true, Ordering::SeqCst);
        }
        self.sync_silences(now);
        if now - self.timers.last_adoption >= ADOPT_EVERY_MS {
            // Again every minute after the first, when the writer started.
            self.adopt_notifications(now);
        }
        if work.is_empty()
            && !self.timers_due(now)
            && !self.rules_changed
            && self.reminders_to_cancel.is_empty()
        {
            if now - self.timers.last_write >= self.heartbeat_ms() {
                self.heartbeat(now);
            }
            return;
        }
        // Before anything is answered: a reader after this round's answers waits for a fleet
        // view that shows it.
        self.fleet.changed();
        let started = std::time::Instant::now();
        let mut round = self.begin(now);
        round
            .batch
            .cancel_reminders
            .append(&mut self.reminders_to_cancel);
        self.apply_events(&mut round, work.submissions);
        self.apply_resyncs(&mut round, work.resyncs);
        self.apply_silences(&mut round, work.silences);
        for observation in &work.traffic {
            self.engine.observe_traffic(observation, now);
        }
        self.evaluate(&mut round);
        self.apply_approvals(&mut round, work.approvals);
        self.apply_sender_steps(&mut round, work.sender_steps);
        self.route(&mut round);
        let committed = self.commit(&mut round);
        let committed = self.settle_unknown(&round, committed);
        // Observed before answering, so a caller that has its answer also sees the counters of
        // its own events.
        self.follow_firing(&round);
        self.observe(started);
        self.answer(round, committed);
        self.publish_rejudge();
        self.prune(now);
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
            approval_replies: Vec::new(),
            sender_replies: Vec::new(),
            store_failure: None,
            ledger: self.remediator.checkpoint(),
            fights: None,
            claimed_now: Vec::new(),
        }
    }

    /// Fires pending drifts whose grace ran out (and the engine's other timed work, with a
    /// slice of the re-judge after a start or a reload, bounded by [`REJUDGE_SLICE`]), and takes
    /// what the round changed from the engine's journal.
    fn evaluate(&mut self, round: &mut Round) {
        let slice_started = std::time::Instant::now();
        let slice = self.rejudge_slice;
        self.engine
            .tick_within(round.now, &mut || slice_started.elapsed() < slice);
        // Before the changes are taken: a fight it finds opens its drift in this round.
        self.remediate(round);
        match super::take_changes(self.engine.staged(), &mut round.batch) {
            Ok(transitions) => round.transitions = transitions,
            Err(error) => {
                round.store_failure.get_or_insert(error);
            }
        }
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
                self.pacer.commit();
                if wrote {
                    self.mark_store(true, now);
                    self.metrics.store_commits.inc();
                } else if now - self.timers.last_write >= self.heartbeat_ms() {
                    // A busy writer whose rounds write nothing still proves the store writable.
                    self.heartbeat(now);
                }
                self.after_commit(&round.transitions);
                self.count_remediations(&round);
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
                let mut answers = Vec::with_capacity(round.submissions.len());
                for ((events, reply), result) in round.submissions.into_iter().zip(round.results) {
                    if let Some(reply) = reply {
                        answers.push(Answer::Events(reply, result));
                    }
                    applied.push(events);
                }
                for (outcome, reply) in round.resync_replies {
                    answers.push(Answer::Resync(reply, Ok(outcome)));
                }
                for (outcome, reply) in round.silence_replies {
                    answers.push(Answer::Silence(reply, Ok(outcome)));
                }
                for (outcome, reply) in round.approval_replies {
                    answers.push(Answer::Approval(reply, Ok(outcome)));
                }
                for (outcome, reply) in round.sender_replies {
                    answers.push(Answer::Sender(reply, Ok(outcome)));
                }
                // Sent once the round is durable (at once when the commit was).
                let given_back =
                    self.answers.send(Answers {
                        answers,
                        wrote,
                        // Only for rows due before the relays' next look of their own: waking
                        // them for rows paced into the future had them read the outbox on every
                        // commit, to find nothing due.
                        notify_outbox: round.batch.outbox.iter().any(|row| {
                            row.not_before < now.saturating_add(routing::relay_poll_ms())
                        }),
                        spent: applied,
                    });
                self.discard(given_back);
            }
            Err(error) => {
                self.engine.rollback();
                // The gauge counted the round's drifts, which the rollback took back: counted
                // again now, not left wrong until the next round that does work.
                if round.changed_drifts() {
                    self.recount_firing();
                }
                self.pacer.rollback();
                self.remediator.restore(round.ledger.take());
                if let Some(fights) = round.fights.take() {
                    self.engine.restore_fights(fights);
                }
                for seq in round.claimed_now.drain(..) {
                    self.claimed.remove(&seq);
                }
                if matches!(error, drift_store::Error::LeaseLost { .. }) {
                    // Fenced: another replica is the writer. The lease keeper sees this flag and
                    // stops this replica; until then every round fails the same way.
                    self.health.lease_lost.store(true, Ordering::SeqCst);
                }
                self.timers.store_backoff_until = now + STORE_RETRY_MS;
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
                for (_, reply) in round.approval_replies {
                    let _ = reply.send(Err(refused.clone()));
                }
                for (_, reply) in round.sender_replies {
                    let _ = reply.send(Err(refused.clone()));
                }
            }
        }
    }

    /// Frees a round's decoded events on the dropper thread: freeing their JSON trees is a good
    /// part of the single writer's time per event. Inline when that thread is busy.
    fn discard(&self, events: Vec<Vec<Decoded>>) {
        if events.is_empty() {
            return;
        }
        if let Some(dropper) = &self.dropper {
            let _ = dropper.try_send(events);
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

/// Microseconds on a monotonic clock since its first reading: the backstop clock of rule
/// evaluations on the writer thread.
fn monotonic_micros() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX)
}
