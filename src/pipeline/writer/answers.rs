//! Answers after durability: the thread that syncs the store after the writer's commits and only
//! then sends the rounds' answers, in order.
//!
//! With a store that hands its sync over (`Store::take_syncer`: SQLite), a commit returns before
//! its fsync; the writer goes on to the next round while this thread syncs, and one fsync covers
//! every round committed before it. Every answer goes through here in the order the writer made
//! it, early ones included (an event that changed nothing durable may rest on a state an earlier
//! round committed and not yet synced; an early answer is only given while its own round has
//! written nothing, `apply.rs`), so no request hears `202` before what it rests on is on disk:
//! the guarantee `synchronous=FULL` gave. The first sync comes with the first answers whatever
//! they are (a duplicate found in the store may rest on a commit of a process that crashed before
//! its fsync) and the last when the writer stops (its record of pending drifts). A failed sync
//! fails every answer still waiting and every later one (after a failed fsync the kernel may have
//! dropped the pages: a later success proves nothing); the writer gives its role up and
//! `/healthz` fails, so the pod is restarted and loads what is on disk. The queue is bounded: a
//! stalled disk stops the writer, and the request queue in front of it answers `503` when full,
//! as when the writer synced itself. Without a syncer (PostgreSQL, a test store) answers are sent
//! at once, on the writer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use super::super::{ApprovalOutcome, ApprovalReply, SilenceOutcome, SilenceReply};
use super::super::{Error, EventResult, Health, Reply, ResyncOutcome, ResyncReply};
use super::super::{SenderAnswer, SenderReply};
use crate::metrics::Metrics;
use drift_core::decode::Decoded;
use drift_store::Syncer;

/// One answer the writer made.
pub(super) enum Answer {
    Events(Reply, Result<Vec<EventResult>, Error>),
    Resync(ResyncReply, Result<ResyncOutcome, Error>),
    Silence(SilenceReply, Result<SilenceOutcome, Error>),
    Approval(ApprovalReply, Result<ApprovalOutcome, Error>),
    Sender(SenderReply, Result<SenderAnswer, Error>),
}

impl Answer {
    fn send(self) {
        // A requester that went away needs no answer.
        match self {
            Answer::Events(reply, result) => drop(reply.send(result)),
            Answer::Resync(reply, result) => drop(reply.send(result)),
            Answer::Silence(reply, result) => drop(reply.send(result)),
            Answer::Approval(reply, result) => drop(reply.send(result)),
            Answer::Sender(reply, result) => drop(reply.send(result)),
        }
    }

    fn fail(self, error: &Error) {
        match self {
            Answer::Events(reply, _) => drop(reply.send(Err(error.clone()))),
            Answer::Resync(reply, _) => drop(reply.send(Err(error.clone()))),
            Answer::Silence(reply, _) => drop(reply.send(Err(error.clone()))),
            Answer::Approval(reply, _) => drop(reply.send(Err(error.clone()))),
            Answer::Sender(reply, _) => drop(reply.send(Err(error.clone()))),
        }
    }
}

/// Answers of one round (or one early answer), in the order they were made.
pub(super) struct Answers {
    pub answers: Vec<Answer>,
    /// The round committed something that must be synced before these answers.
    pub wrote: bool,
    /// The round queued notifications: the relays are woken after the sync.
    pub notify_outbox: bool,
    /// The round's decoded events, freed by the sync thread once it answered and no other
    /// answers wait (see [`Answerer::send`]).
    pub spent: Vec<Vec<Decoded>>,
}

/// Answers waiting for a sync at most (a round's, or one early answer each): enough for several
/// full rounds of early answers, few enough that a stalled disk stops the writer soon.
const WAITING: usize = 2048;

/// Decoded events the sync thread may hold to free at most: a few syncs' worth at the sink's
/// maximum rate. Past it (a slow disk) the writer's own freeing thread takes them, so a stalled
/// disk does not also hold every event the waiting rounds applied.
const SPENT_IN_FLIGHT: usize = 1024;

/// Where the writer sends its answers.
pub(super) struct Answerer {
    mode: Mode,
    /// Set when a sync failed.
    failed: Arc<AtomicBool>,
    /// Rounds that wrote and are not yet synced and answered, plus one until the first sync:
    /// while none is, an answer that wrote nothing rests only on what is on disk and leaves at
    /// once, on the writer (status churn is mostly such answers; a trip through the sync
    /// thread would cost each of them two thread switches).
    unsynced: Arc<AtomicUsize>,
    outbox_notify: Arc<tokio::sync::Notify>,
    /// Decoded events handed to the sync thread and not yet freed.
    spent: Arc<AtomicUsize>,
}

enum Mode {
    /// No syncer: every commit was durable when it returned.
    Direct,
    /// The sync thread.
    Thread(mpsc::SyncSender<Answers>, std::thread::JoinHandle<()>),
    /// The thread could not start: the writer syncs and answers itself.
    Inline(Worker),
}

impl Answerer {
    /// Answers sent after `syncer`'s sync, on a thread of its own; at once when there is no
    /// syncer.
    pub(super) fn start(
        syncer: Option<Box<dyn Syncer>>,
        outbox_notify: Arc<tokio::sync::Notify>,
        health: Arc<Health>,
        metrics: Arc<Metrics>,
    ) -> Answerer {
        let failed = Arc::new(AtomicBool::new(false));
        let unsynced = Arc::new(AtomicUsize::new(1));
        let spent = Arc::new(AtomicUsize::new(0));
        let mode = match syncer {
            None => Mode::Direct,
            Some(syncer) => {
                let worker = Worker {
                    syncer,
                    synced_once: false,
                    unsynced: Arc::clone(&unsynced),
                    spent: Arc::clone(&spent),
                    to_free: Vec::new(),
                    failed: Arc::clone(&failed),
                    outbox_notify: Arc::clone(&outbox_notify),
                    health,
                    metrics,
                };
                // A thread that cannot start drops its closure: the worker is kept outside it
                // and taken back.
                let slot = Arc::new(std::sync::Mutex::new(Some(worker)));
                let taken = Arc::clone(&slot);
                let (sender, receiver) = mpsc::sync_channel::<Answers>(WAITING);
                let spawned = std::thread::Builder::new()
                    .name("drift-sync".to_string())
                    .spawn(move || {
                        let worker = taken.lock().ok().and_then(|mut worker| worker.take());
                        if let Some(worker) = worker {
                            worker.run(receiver);
                        }
                    });
                match spawned {
                    Ok(handle) => Mode::Thread(sender, handle),
                    Err(_) => match slot.lock().ok().and_then(|mut worker| worker.take()) {
                        Some(worker) => Mode::Inline(worker),
                        // The thread started after all and took it.
                        None => Mode::Direct,
                    },
                }
            }
        };
        Answerer {
            mode,
            failed,
            unsynced,
            outbox_notify,
            spent,
        }
    }

    /// Sends `answers` now, or after the next sync. The sync thread also frees the round's
    /// decoded events after answering (when no answers wait for a sync): it is woken for the round anyway, and waking the
    /// writer's freeing thread too cost the writer a second wake-up per round (2.5 % of it at
    /// half the sink's maximum rate). What it does not take is given back, for that thread.
    pub(super) fn send(&mut self, mut answers: Answers) -> Vec<Vec<Decoded>> {
        let direct = !answers.wrote && self.unsynced.load(Ordering::Acquire) == 0 && !self.failed();
        let events: usize = answers.spent.iter().map(Vec::len).sum();
        let to_thread = matches!(self.mode, Mode::Thread(..))
            && !direct
            && self.spent.load(Ordering::Acquire) + events <= SPENT_IN_FLIGHT;
        let given_back = if to_thread {
            self.spent.fetch_add(events, Ordering::AcqRel);
            Vec::new()
        } else {
            std::mem::take(&mut answers.spent)
        };
        if answers.wrote && !matches!(self.mode, Mode::Direct) {
            self.unsynced.fetch_add(1, Ordering::AcqRel);
        }
        match &mut self.mode {
            Mode::Thread(..) if direct => {
                // Every commit before it is synced (the writer alone adds to `unsynced`).
                for answer in answers.answers {
                    answer.send();
                }
                if answers.notify_outbox {
                    wake(&self.outbox_notify);
                }
            }
            Mode::Thread(sender, _) => {
                if let Err(mpsc::SendError(answers)) = sender.send(answers) {
                    if to_thread {
                        self.spent.fetch_sub(events, Ordering::AcqRel);
                    }
                    // The thread is gone (it only stops when the writer stops): nothing more
                    // becomes durable.
                    tracing::error!(message = "The thread that syncs the store stopped; every request is refused until a restart.");
                    self.failed.store(true, Ordering::SeqCst);
                    let error = Error::Store("io");
                    for answer in answers.answers {
                        answer.fail(&error);
                    }
                }
            }
            Mode::Inline(worker) => {
                worker.settle(vec![answers]);
                worker.free();
            }
            Mode::Direct => {
                for answer in answers.answers {
                    answer.send();
                }
                if answers.notify_outbox {
                    wake(&self.outbox_notify);
                }
            }
        }
        given_back
    }

    /// True once a sync failed: nothing committed since the last good sync is known durable.
    pub(super) fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Syncs a last time, sends what is still waiting and stops the thread.
    pub(super) fn close(&mut self) {
        let last = || Answers {
            answers: Vec::new(),
            wrote: true,
            notify_outbox: false,
            spent: Vec::new(),
        };
        if !matches!(self.mode, Mode::Direct) {
            // Counted as every batch that wrote is (the thread takes it off when settled).
            self.unsynced.fetch_add(1, Ordering::AcqRel);
        }
        match std::mem::replace(&mut self.mode, Mode::Direct) {
            Mode::Thread(sender, handle) => {
                let _ = sender.send(last());
                drop(sender);
                let _ = handle.join();
            }
            Mode::Inline(mut worker) => worker.settle(vec![last()]),
            Mode::Direct => {}
        }
    }
}

impl Drop for Answerer {
    fn drop(&mut self) {
        self.close();
    }
}

fn wake(notify: &tokio::sync::Notify) {
    notify.notify_waiters();
    notify.notify_one();
}

/// The thread's side.
struct Worker {
    syncer: Box<dyn Syncer>,
    /// The first answers are synced for whatever they are.
    synced_once: bool,
    /// See [`Answerer`]'s.
    unsynced: Arc<AtomicUsize>,
    /// See [`Answerer`]'s.
    spent: Arc<AtomicUsize>,
    /// Decoded events of answered rounds, freed when no answers wait (`Worker::run`).
    to_free: Vec<Vec<Vec<Decoded>>>,
    failed: Arc<AtomicBool>,
    outbox_notify: Arc<tokio::sync::Notify>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

impl Worker {
    fn run(mut self, receiver: mpsc::Receiver<Answers>) {
        let mut next = None;
        loop {
            let first = match next.take() {
                Some(first) => first,
                None => {
                    // Nothing waits: the answered rounds' events are freed now. Freeing them
                    // while answers wait would put it before their sync.
                    self.free();
                    match receiver.recv() {
                        Ok(first) => first,
                        Err(_) => break,
                    }
                }
            };
            let mut waiting = vec![first];
            waiting.extend(receiver.try_iter());
            self.settle(waiting);
            next = receiver.try_recv().ok();
        }
        self.free();
    }

    /// Frees the decoded events of the rounds answered so far.
    fn free(&mut self) {
        let events: usize = self.to_free.iter().flatten().map(Vec::len).sum();
        self.to_free.clear();
        self.spent.fetch_sub(events, Ordering::AcqRel);
    }

    /// Syncs once for everything taken (when any of it wrote), then answers it in order.
    fn settle(&mut self, waiting: Vec<Answers>) {
        let mut error = self
            .failed
            .load(Ordering::SeqCst)
            .then_some(Error::Store("io"));
        let wrote = waiting.iter().filter(|answers| answers.wrote).count();
        // What this settles of `unsynced`, taken off once the answers are sent.
        let settled = wrote + usize::from(!self.synced_once);
        if error.is_none() && (!self.synced_once || wrote > 0) {
            self.synced_once = true;
            let started = std::time::Instant::now();
            let synced = self.syncer.sync();
            self.metrics
                .store_sync_seconds
                .observe(started.elapsed().as_secs_f64());
            if let Err(failure) = synced {
                tracing::error!(
                    message = "The store's sync failed; what was committed since the last one may be lost. Every waiting request is refused and the writer gives its role up.",
                    error = %failure
                );
                self.failed.store(true, Ordering::SeqCst);
                self.health.gave_up.store(true, Ordering::SeqCst);
                self.health.must_restart.store(true, Ordering::SeqCst);
                error = Some(Error::Store(failure.kind()));
            }
        }
        let mut notify = false;
        for answers in waiting {
            notify |= answers.notify_outbox;
            for answer in answers.answers {
                match &error {
                    None => answer.send(),
                    Some(error) => answer.fail(error),
                }
            }
            if !answers.spent.is_empty() {
                self.to_free.push(answers.spent);
            }
        }
        if notify && error.is_none() {
            wake(&self.outbox_notify);
        }
        self.synced_once = true;
        self.unsynced.fetch_sub(settled, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::{Receiver, SyncSender};
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    /// A syncer that reports each call and waits for the test to let it finish with a result.
    struct Gate {
        called: SyncSender<()>,
        results: Receiver<Result<(), drift_store::Error>>,
    }

    impl Syncer for Gate {
        fn sync(&mut self) -> Result<(), drift_store::Error> {
            let _ = self.called.send(());
            self.results
                .recv()
                .unwrap_or_else(|_| Err(std::io::Error::other("test ended").into()))
        }
    }

    struct Setup {
        answerer: Answerer,
        called: Receiver<()>,
        release: SyncSender<Result<(), drift_store::Error>>,
        health: Arc<Health>,
    }

    fn setup() -> Setup {
        let (called_tx, called) = mpsc::sync_channel(16);
        let (release, results) = mpsc::sync_channel(16);
        let health = Arc::new(Health::default());
        let answerer = Answerer::start(
            Some(Box::new(Gate {
                called: called_tx,
                results,
            })),
            Arc::new(tokio::sync::Notify::new()),
            Arc::clone(&health),
            Arc::new(Metrics::new()),
        );
        Setup {
            answerer,
            called,
            release,
            health,
        }
    }

    fn round(wrote: bool) -> (Answers, oneshot::Receiver<Result<Vec<EventResult>, Error>>) {
        let (reply, answer) = oneshot::channel();
        let answers = Answers {
            answers: vec![Answer::Events(reply, Ok(vec![EventResult::Applied]))],
            wrote,
            notify_outbox: false,
            spent: Vec::new(),
        };
        (answers, answer)
    }

    const WAIT: Duration = Duration::from_secs(10);

    #[test]
    fn no_answer_leaves_before_the_sync_after_its_commit_and_early_ones_wait_in_line() {
        let mut setup = setup();
        let (first, mut first_answer) = round(true);
        setup.answerer.send(first);
        setup
            .called
            .recv_timeout(WAIT)
            .expect("the first round is synced");
        // While that sync runs: a round that wrote and an early answer that wrote nothing.
        let (second, mut second_answer) = round(true);
        let (early, mut early_answer) = round(false);
        setup.answerer.send(second);
        setup.answerer.send(early);
        std::thread::sleep(Duration::from_millis(50));
        assert!(first_answer.try_recv().is_err(), "answered before its sync");
        setup.release.send(Ok(())).unwrap();
        // The first round is answered; the second and the early answer wait for one more sync
        // that covers both.
        setup
            .called
            .recv_timeout(WAIT)
            .expect("the second round is synced");
        assert!(matches!(first_answer.try_recv(), Ok(Ok(_))));
        assert!(second_answer.try_recv().is_err());
        assert!(
            early_answer.try_recv().is_err(),
            "the early answer overtook a sync"
        );
        setup.release.send(Ok(())).unwrap();
        // The writer stops: one last sync, after the two that covered three answers.
        setup.release.send(Ok(())).unwrap();
        setup.answerer.close();
        assert!(matches!(second_answer.try_recv(), Ok(Ok(_))));
        assert!(matches!(early_answer.try_recv(), Ok(Ok(_))));
        assert!(!setup.answerer.failed());
        assert!(setup.called.try_recv().is_ok(), "no last sync");
        assert!(setup.called.try_recv().is_err());
    }

    #[test]
    fn a_failed_sync_refuses_what_waits_and_everything_after_it() {
        let mut setup = setup();
        let (first, mut first_answer) = round(true);
        setup.answerer.send(first);
        setup.called.recv_timeout(WAIT).unwrap();
        setup
            .release
            .send(Err(std::io::Error::other("EIO").into()))
            .unwrap();
        // A later round that wrote nothing is refused too, without another sync.
        let (later, mut later_answer) = round(false);
        let deadline = std::time::Instant::now() + WAIT;
        while !setup.answerer.failed() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(setup.answerer.failed());
        assert!(setup.health.gave_up.load(Ordering::SeqCst));
        assert!(setup.health.must_restart.load(Ordering::SeqCst));
        setup.answerer.send(later);
        setup.answerer.close();
        assert!(matches!(
            first_answer.try_recv(),
            Ok(Err(Error::Store("io")))
        ));
        assert!(matches!(
            later_answer.try_recv(),
            Ok(Err(Error::Store("io")))
        ));
        assert!(setup.called.try_recv().is_err());
    }

    #[test]
    fn the_first_answers_are_synced_even_when_their_round_wrote_nothing() {
        let mut setup = setup();
        let (early, mut early_answer) = round(false);
        setup.answerer.send(early);
        setup
            .called
            .recv_timeout(WAIT)
            .expect("the first answers are synced");
        assert!(early_answer.try_recv().is_err());
        setup.release.send(Ok(())).unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        while setup.answerer.unsynced.load(Ordering::Acquire) != 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the first sync never settled"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(matches!(early_answer.try_recv(), Ok(Ok(_))));
        // With nothing unsynced, an answer that wrote nothing leaves at once, on the writer.
        let (later, mut later_answer) = round(false);
        setup.answerer.send(later);
        assert!(matches!(later_answer.try_recv(), Ok(Ok(_))));
        // One that wrote waits for its sync again.
        let (wrote, mut wrote_answer) = round(true);
        setup.answerer.send(wrote);
        setup
            .called
            .recv_timeout(WAIT)
            .expect("a round that wrote is synced");
        let (early, mut early_again) = round(false);
        setup.answerer.send(early);
        assert!(wrote_answer.try_recv().is_err());
        assert!(
            early_again.try_recv().is_err(),
            "left before the sync it rests on"
        );
        setup.release.send(Ok(())).unwrap();
        setup.release.send(Ok(())).unwrap();
        setup.answerer.close();
        assert!(matches!(wrote_answer.try_recv(), Ok(Ok(_))));
        assert!(matches!(early_again.try_recv(), Ok(Ok(_))));
        assert_eq!(setup.answerer.unsynced.load(Ordering::Acquire), 0);
        // Then the last one, when the writer stopped.
        assert!(setup.called.try_recv().is_ok());
        assert!(setup.called.try_recv().is_err());
    }

    #[test]
    fn without_a_syncer_answers_leave_at_once() {
        let mut answerer = Answerer::start(
            None,
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(Health::default()),
            Arc::new(Metrics::new()),
        );
        let (answers, mut answer) = round(true);
        answerer.send(answers);
        assert!(matches!(answer.try_recv(), Ok(Ok(_))));
    }

    /// A request's decoded events: the certificate of the fixtures, as one structured CloudEvent.
    fn decoded() -> Vec<Decoded> {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/knative/derived/certificate-ready.yaml"
        ))
        .expect("fixture");
        let object: serde_json::Value = serde_saphyr::from_str(&text).expect("fixture parses");
        let body = serde_json::json!({
            "specversion": "1.0", "id": "e-1", "source": "https://10.96.0.1:443",
            "type": "dev.knative.apiserver.resource.update", "datacontenttype": "application/json",
            "data": object,
        });
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/cloudevents+json"),
        );
        let clusters = drift_core::decode::ClusterNames {
            default: "test".into(),
            by_source: Default::default(),
        };
        drift_core::decode::decode_request(&headers, body.to_string().as_bytes(), &clusters)
            .expect("decodes")
    }

    /// Waits until the sync thread holds `events` decoded events to free.
    fn holds(setup: &Setup, events: usize) {
        let deadline = std::time::Instant::now() + WAIT;
        while setup.answerer.spent.load(Ordering::Acquire) != events {
            assert!(std::time::Instant::now() < deadline, "never held {events}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A round's decoded events go to the sync thread with its answers and are freed there once
    /// it has answered and no other answers wait for a sync; what would take it past its bound,
    /// and what is answered at once on the writer, is given back for the writer's freeing
    /// thread.
    #[test]
    fn the_sync_thread_frees_a_rounds_events_after_answering_and_takes_no_more_than_its_bound() {
        let mut setup = setup();
        let (mut first, mut first_answer) = round(true);
        first.spent = vec![decoded(), decoded(), decoded()];
        assert!(
            setup.answerer.send(first).is_empty(),
            "taken with the answers"
        );
        setup.called.recv_timeout(WAIT).expect("synced");
        // Held while its sync runs; a round past the bound is given back whole.
        holds(&setup, 3);
        let (mut big, mut big_answer) = round(true);
        big.spent = vec![decoded(); SPENT_IN_FLIGHT - 2];
        assert_eq!(setup.answerer.send(big).len(), SPENT_IN_FLIGHT - 2);
        assert!(first_answer.try_recv().is_err(), "answered before its sync");
        setup.release.send(Ok(())).unwrap();
        // The second round waited: it is synced before the first round's events are freed.
        setup
            .called
            .recv_timeout(WAIT)
            .expect("the second round is synced");
        assert!(matches!(first_answer.try_recv(), Ok(Ok(_))));
        assert_eq!(setup.answerer.spent.load(Ordering::Acquire), 3);
        setup.release.send(Ok(())).unwrap();
        // Nothing waits any more: freed.
        holds(&setup, 0);
        assert!(matches!(big_answer.try_recv(), Ok(Ok(_))));
        // An answer that leaves at once, on the writer, gives its events back.
        let (mut early, mut early_answer) = round(false);
        early.spent = vec![decoded()];
        assert_eq!(setup.answerer.send(early).len(), 1);
        assert!(matches!(early_answer.try_recv(), Ok(Ok(_))));
        // Within the bound again, a round's events are taken.
        let (mut last, mut last_answer) = round(true);
        last.spent = vec![decoded(); SPENT_IN_FLIGHT];
        assert!(setup.answerer.send(last).is_empty());
        setup.called.recv_timeout(WAIT).expect("synced");
        setup.release.send(Ok(())).unwrap();
        setup.release.send(Ok(())).unwrap();
        setup.answerer.close();
        assert!(matches!(last_answer.try_recv(), Ok(Ok(_))));
        assert_eq!(setup.answerer.spent.load(Ordering::Acquire), 0);
    }

    /// After a failed sync every later round goes to the thread to be refused; its events are
    /// still freed there (the count comes back to 0), close() leaves nothing held, and after it
    /// events are given back, never counted.
    #[test]
    fn a_failed_sync_leaves_no_events_held() {
        let mut setup = setup();
        let (mut first, mut first_answer) = round(true);
        first.spent = vec![decoded(), decoded()];
        assert!(setup.answerer.send(first).is_empty());
        setup.called.recv_timeout(WAIT).expect("synced");
        setup
            .release
            .send(Err(std::io::Error::other("disk").into()))
            .unwrap();
        holds(&setup, 0);
        assert!(matches!(first_answer.try_recv(), Ok(Err(_))));
        assert!(setup.answerer.failed());
        for wrote in [false, true, false] {
            let (mut later, mut later_answer) = round(wrote);
            later.spent = vec![decoded(); 5];
            // Not direct (the sync failed): the thread refuses it and frees its events.
            assert!(setup.answerer.send(later).is_empty());
            let deadline = std::time::Instant::now() + WAIT;
            loop {
                if let Ok(result) = later_answer.try_recv() {
                    assert!(result.is_err());
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "never answered");
                std::thread::sleep(Duration::from_millis(1));
            }
            holds(&setup, 0);
        }
        setup.answerer.close();
        assert_eq!(setup.answerer.spent.load(Ordering::Acquire), 0);
        let (mut after, _answer) = round(true);
        after.spent = vec![decoded()];
        assert_eq!(setup.answerer.send(after).len(), 1);
        assert_eq!(setup.answerer.spent.load(Ordering::Acquire), 0);
    }
}
