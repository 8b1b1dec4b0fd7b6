//! The resync control: how the API asks the resync loop for a pass now, and how the loop shows
//! what it is doing (the pass running, its progress, the last pass's outcome).
//!
//! It lives here, below both, because `api` and `cluster` sit on the same layer and neither may
//! import the other: the loop (`cluster::resync`) holds one end and the API the other. It does
//! no I/O and reads no clock (times come in as arguments); it is a mutex over a status snapshot
//! and a [`Notify`] that wakes the loop.
//!
//! Invariant: at most one pass runs. [`ResyncControl::request`] claims the pass at once, under
//! the same lock the loop takes to begin one, so a second request before the first pass has
//! finished is refused ([`StartError::Running`]) however soon it comes, and the loop never runs a
//! scheduled pass beside a requested one: a pass the API claimed is the next pass the loop runs.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use drift_model::Millis;

/// What started a pass. A bounded metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResyncTrigger {
    /// The loop's own: at start, then every `resync.interval` (sooner after a failure).
    Schedule,
    /// `POST /api/v1/resync` or the dashboard's button.
    Api,
}

impl ResyncTrigger {
    /// `schedule` or `api`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResyncTrigger::Schedule => "schedule",
            ResyncTrigger::Api => "api",
        }
    }
}

/// How a pass ended. A bounded metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassOutcome {
    /// Every resource listed completely.
    Complete,
    /// Some resource could not be listed (nothing was deleted; the loop retries with backoff).
    Incomplete,
    /// The writer could not take the pass's work (a store failure, or shutting down).
    Failed,
}

impl PassOutcome {
    /// `complete`, `incomplete` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            PassOutcome::Complete => "complete",
            PassOutcome::Incomplete => "incomplete",
            PassOutcome::Failed => "failed",
        }
    }
}

/// The pass running now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningPass {
    /// What started it.
    pub trigger: ResyncTrigger,
    /// When it was started (for an API pass: when it was requested).
    pub started_at: Millis,
    /// Resources it lists (0 until the loop has begun it).
    pub resources: usize,
    /// Resources listed so far, completely or not.
    pub resources_done: usize,
    /// Objects listed so far.
    pub listed: usize,
}

/// A pass that ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedPass {
    /// What started it.
    pub trigger: ResyncTrigger,
    /// When it started.
    pub started_at: Millis,
    /// When it ended.
    pub finished_at: Millis,
    /// How it ended.
    pub outcome: PassOutcome,
    /// Objects listed (in resources that listed completely).
    pub listed: usize,
    /// Listed objects whose state no event had delivered.
    pub missed: usize,
    /// Objects deleted because a complete list no longer contained them.
    pub deleted: usize,
    /// Drifts the pass opened, by class id.
    pub drifts_found: BTreeMap<String, usize>,
    /// Items the decoder rejected.
    pub rejected: usize,
    /// Listed objects not filed because events track them under another cluster name.
    pub conflicts: usize,
    /// Error kinds of the resources that could not be listed, or of the writer's failure, with
    /// how often each occurred.
    pub errors: BTreeMap<String, usize>,
    /// The first error's message (which resource, and what the API server or the connection
    /// said), so the reason is visible without the log.
    pub first_error: Option<String>,
}

impl FinishedPass {
    /// Drifts the pass opened, every class together.
    pub(crate) fn drifts_found_total(&self) -> usize {
        self.drifts_found.values().sum()
    }
}

/// What the control knows: a snapshot for the API and the dashboard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResyncStatus {
    /// True while a resync loop runs (resync is configured and reached a cluster).
    pub enabled: bool,
    /// The pass running now, or claimed by the API and about to run.
    pub running: Option<RunningPass>,
    /// The last pass that ended.
    pub last: Option<FinishedPass>,
    /// When the loop's next scheduled pass is due (absent while one runs).
    pub next_at: Option<Millis>,
    /// True once a loop that ran has stopped, so a refusal can say so rather than claim resync
    /// was never configured.
    pub stopped: bool,
}

/// Why a pass was not started on request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// No resync loop runs: resync is off, or it found no cluster configuration.
    #[error(
        "resync is off: no cluster access is configured (resync.enabled: true, or auto with \
         resync.kubeconfig or in a pod; the start-up log says why)"
    )]
    Off,
    /// The resync loop ran and has stopped (the service is shutting down, or the loop ended).
    #[error(
        "resync has stopped: the service is shutting down or its resync loop ended (see the log)"
    )]
    Stopped,
    /// A pass is running (or claimed and about to run).
    #[error("a resync pass is already running (started by {}); see GET /api/v1/resync", .0.trigger.as_str())]
    Running(RunningPass),
}

impl StartError {
    /// A stable, bounded code: `resync_off` or `resync_running`.
    pub fn kind(&self) -> &'static str {
        match self {
            StartError::Off | StartError::Stopped => "resync_off",
            StartError::Running(_) => "resync_running",
        }
    }
}

/// The shared handle between the resync loop and the API.
#[derive(Debug, Default)]
pub struct ResyncControl {
    status: Mutex<ResyncStatus>,
    wake: Notify,
}

impl ResyncControl {
    /// A control no loop has attached to: requests answer [`StartError::Off`].
    pub fn new() -> ResyncControl {
        ResyncControl::default()
    }

    fn lock(&self) -> MutexGuard<'_, ResyncStatus> {
        // The status is plain data, consistent after every statement: a panic elsewhere while
        // holding the lock leaves nothing half-written worth refusing to read.
        self.status
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A snapshot of the status.
    pub fn status(&self) -> ResyncStatus {
        self.lock().clone()
    }

    /// A resync loop takes requests from now on.
    pub fn attach(&self) {
        self.lock().enabled = true;
    }

    /// The loop has stopped: requests are refused, and no pass is shown as running.
    pub(crate) fn detach(&self) {
        let mut status = self.lock();
        status.enabled = false;
        status.stopped = true;
        status.running = None;
        status.next_at = None;
    }

    /// Claims a pass for the API at `now` and wakes the loop to run it; refused while resync is
    /// off or a pass runs.
    pub fn request(&self, now: Millis) -> Result<RunningPass, StartError> {
        let mut status = self.lock();
        if !status.enabled {
            return Err(if status.stopped {
                StartError::Stopped
            } else {
                StartError::Off
            });
        }
        if let Some(running) = &status.running {
            return Err(StartError::Running(running.clone()));
        }
        let pass = RunningPass {
            trigger: ResyncTrigger::Api,
            started_at: now,
            resources: 0,
            resources_done: 0,
            listed: 0,
        };
        status.running = Some(pass.clone());
        status.next_at = None;
        drop(status);
        // `notify_one` keeps a permit when the loop is not waiting yet (it is finishing the
        // previous pass's bookkeeping, or has not started): the wake is never lost.
        self.wake.notify_one();
        Ok(pass)
    }

    /// The loop begins a pass of `resources` at `now`: the one the API claimed, else a scheduled
    /// one. Returns the pass as begun.
    pub fn begin(&self, now: Millis, resources: usize) -> RunningPass {
        let mut status = self.lock();
        let pass = match status.running.take() {
            Some(claimed) => RunningPass {
                resources,
                ..claimed
            },
            None => RunningPass {
                trigger: ResyncTrigger::Schedule,
                started_at: now,
                resources,
                resources_done: 0,
                listed: 0,
            },
        };
        status.running = Some(pass.clone());
        status.next_at = None;
        pass
    }

    /// One more resource of the running pass is done, with `listed` objects in it.
    pub fn resource_done(&self, listed: usize) {
        if let Some(running) = self.lock().running.as_mut() {
            running.resources_done = running.resources_done.saturating_add(1);
            running.listed = running.listed.saturating_add(listed);
        }
    }

    /// The running pass ended as `pass`; the next scheduled one is due at `next_at`.
    pub fn finish(&self, pass: FinishedPass, next_at: Option<Millis>) {
        let mut status = self.lock();
        status.running = None;
        status.last = Some(pass);
        status.next_at = next_at;
    }

    /// True when the API has claimed a pass the loop has not begun.
    pub fn claimed(&self) -> bool {
        self.lock().running.is_some()
    }

    /// Completes when [`ResyncControl::request`] may have claimed a pass (check
    /// [`ResyncControl::claimed`]: a wake can be left over from a pass already run).
    pub async fn requested(&self) {
        self.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    fn finished(trigger: ResyncTrigger, started_at: Millis) -> FinishedPass {
        FinishedPass {
            trigger,
            started_at,
            finished_at: started_at + 10,
            outcome: PassOutcome::Complete,
            listed: 3,
            missed: 1,
            deleted: 1,
            drifts_found: [("not_ready".to_string(), 2)].into(),
            rejected: 0,
            conflicts: 0,
            errors: BTreeMap::new(),
            first_error: None,
        }
    }

    #[test]
    fn a_request_is_refused_while_no_loop_is_attached_or_after_it_stopped() {
        let control = ResyncControl::new();
        assert_eq!(control.request(1), Err(StartError::Off));
        assert_eq!(StartError::Off.kind(), "resync_off");
        control.attach();
        assert!(control.request(2).is_ok());
        control.detach();
        let status = control.status();
        assert!(!status.enabled);
        assert_eq!(status.running, None, "a stopped loop runs nothing");
        assert_eq!(control.request(3), Err(StartError::Stopped));
        assert_eq!(StartError::Stopped.kind(), "resync_off");
    }

    #[test]
    fn a_second_request_is_refused_until_the_claimed_pass_has_finished() {
        let control = ResyncControl::new();
        control.attach();
        let claimed = control.request(100).unwrap();
        assert_eq!(claimed.trigger, ResyncTrigger::Api);
        // Before the loop has begun it, and while it runs.
        let refused = control.request(101).unwrap_err();
        assert_eq!(refused.kind(), "resync_running");
        let begun = control.begin(105, 4);
        assert_eq!(
            (begun.trigger, begun.started_at, begun.resources),
            (ResyncTrigger::Api, 100, 4),
            "the loop runs the claimed pass, started when it was requested"
        );
        assert!(matches!(
            control.request(106),
            Err(StartError::Running(RunningPass {
                trigger: ResyncTrigger::Api,
                ..
            }))
        ));
        control.finish(finished(ResyncTrigger::Api, 100), Some(5000));
        let status = control.status();
        assert_eq!(status.running, None);
        assert_eq!(status.next_at, Some(5000));
        assert_eq!(status.last.as_ref().unwrap().drifts_found_total(), 2);
        assert!(control.request(200).is_ok(), "free again once it ended");
    }

    #[test]
    fn a_scheduled_pass_refuses_requests_and_shows_its_progress() {
        let control = ResyncControl::new();
        control.attach();
        let begun = control.begin(50, 2);
        assert_eq!(begun.trigger, ResyncTrigger::Schedule);
        assert!(matches!(
            control.request(51),
            Err(StartError::Running(RunningPass {
                trigger: ResyncTrigger::Schedule,
                ..
            }))
        ));
        control.resource_done(7);
        control.resource_done(3);
        let running = control.status().running.unwrap();
        assert_eq!((running.resources_done, running.listed), (2, 10));
        // Shutdown in the middle of it: it is no longer shown, and it is no record.
        control.detach();
        assert_eq!(control.status().running, None);
        assert!(
            control.status().last.is_none(),
            "a cancelled pass is no record"
        );
    }

    #[test]
    fn progress_without_a_running_pass_changes_nothing() {
        let control = ResyncControl::new();
        control.resource_done(5);
        assert_eq!(control.status(), ResyncStatus::default());
    }

    /// Whether `requested()` is ready at the first poll (without waiting for anything).
    fn woken_at_once(control: &ResyncControl) -> bool {
        let mut waiting = std::pin::pin!(control.requested());
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        waiting.as_mut().poll(&mut context).is_ready()
    }

    #[test]
    fn a_request_wakes_the_loop_even_when_it_was_not_waiting_yet() {
        let control = ResyncControl::new();
        control.attach();
        assert!(!woken_at_once(&control), "nothing requested yet");
        // The request comes first; the loop waits afterwards and is woken by the kept permit.
        control.request(1).unwrap();
        assert!(woken_at_once(&control));
        assert!(control.claimed());
        // One request, one wake.
        assert!(!woken_at_once(&control));
    }
}
