//! Resync: the safety net under the ApiServerSource. At start and then every `resync.interval`,
//! every watched kind is listed through the Kubernetes API and each object goes to the writer as
//! if an `add`/`update` event had brought it; tracked objects a complete list no longer contains
//! are deleted. One code path classifies both, so a drift that existed before drift-sentinel
//! started is reported by the first resync, and the same state seen twice changes nothing.
//!
//! Invariants: a listed state the engine already has is stale by its `resourceVersion`, so
//! resync never opens a drift twice or restarts a grace timer. Deletions come only from a list
//! that completed with every item decoded (a failed or partial list deletes nothing), only for
//! objects its label selector covers, and only for objects last seen before the list started.
//! A failing API server never stops the service: resync logs, counts, and tries again with
//! backoff while events keep flowing.
//!
//! The loop also runs a pass when the API asks for one ([`ResyncControl::request`]): between
//! passes it waits for the interval (or backoff) or for such a request, whichever comes first,
//! and it shows each pass on the control (running, progress, outcome) and counts it in
//! `resync_passes_total{trigger,outcome}`.

use std::collections::HashSet;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Cluster, Error, Resource};
use drift_core::decode::{Action, ApiServerEvent};

use crate::metrics::{ClassLabel, KindLabel, Metrics, ResyncPassLabel};
use crate::pipeline::{
    self, FinishedPass, PassOutcome, Pipeline, ResyncControl, ResyncOutcome, ResyncWork,
    RunningPass, Sweep,
};
use drift_model::time::Clock;
use std::sync::Arc;

/// The CloudEvent `source` given to listed objects (they carry no event key).
pub const SOURCE: &str = "drift-sentinel/resync";
/// First wait after a failed resync; doubles per failure up to [`MAX_BACKOFF`] or the interval.
pub(crate) const MIN_BACKOFF: Duration = Duration::from_secs(5);
/// Longest wait after failures.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Most listed objects handed to the writer at once.
const MAX_EVENTS_PER_ROUND: usize = 500;
/// How long to wait for room in the writer's queue before trying again.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(50);

/// What resync lists and how often.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Time between complete resyncs.
    pub interval: Duration,
    /// Items per list request.
    pub page_size: u32,
    /// The cluster name listed objects are filed under.
    pub cluster: String,
    /// The kinds to list.
    pub resources: Vec<Resource>,
    /// First wait after a failed resync ([`MIN_BACKOFF`]; tests shorten it).
    pub min_backoff: Duration,
}

/// The result of one resync.
#[derive(Debug, Default)]
pub struct Report {
    /// Objects listed (in resources that listed completely).
    pub listed: usize,
    /// Listed objects whose state no event had delivered.
    pub missed: usize,
    /// Objects deleted because a complete list no longer contained them.
    pub deleted: usize,
    /// Class ids of the drifts resync opened.
    pub drifts_found: Vec<String>,
    /// Items the decoder rejected (their resource was not swept).
    pub rejected: usize,
    /// Listed objects not filed because events track them under another cluster name.
    pub conflicts: usize,
    /// Resources that could not be listed.
    pub failed: Vec<Error>,
}

impl Report {
    /// True when every resource listed completely.
    pub fn complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// The resync loop for one cluster.
pub struct Resync {
    cluster: Cluster,
    pipeline: Pipeline,
    metrics: Arc<Metrics>,
    clock: Clock,
    settings: Settings,
    control: Arc<ResyncControl>,
}

impl Resync {
    /// A resync of `cluster` into `pipeline`.
    pub fn new(
        cluster: Cluster,
        pipeline: Pipeline,
        metrics: Arc<Metrics>,
        clock: Clock,
        settings: Settings,
    ) -> Resync {
        let control = Arc::new(ResyncControl::new());
        control.attach();
        Resync {
            cluster,
            pipeline,
            metrics,
            clock,
            settings,
            control,
        }
    }

    /// Takes requests for a pass from `control` (the API's end) instead of a control of its own.
    /// The control counts as attached from here on, before [`Resync::run`] is first polled, so a
    /// request that comes before the loop starts is run, not refused.
    pub fn with_control(mut self, control: Arc<ResyncControl>) -> Resync {
        control.attach();
        self.control = control;
        self
    }

    /// Resyncs now and then every interval (sooner, with backoff, after a failure, and at once
    /// when the API asks) until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        // However the loop ends, requests are refused from then on.
        struct Detach<'a>(&'a ResyncControl);
        impl Drop for Detach<'_> {
            fn drop(&mut self) {
                self.0.detach();
            }
        }
        let _detach = Detach(&self.control);
        let mut failures: u32 = 0;
        loop {
            let pass = self
                .control
                .begin((self.clock)(), self.settings.resources.len());
            let result = tokio::select! {
                // The pass is dropped half done; `_detach` clears it from the status.
                _ = stop.cancelled() => return,
                result = self.run_once() => result,
            };
            let stopped = matches!(result, Err(pipeline::Error::Stopped));
            let wait = match &result {
                Ok(report) if report.complete() => {
                    failures = 0;
                    self.settings.interval
                }
                _ => {
                    failures = failures.saturating_add(1);
                    backoff(failures, self.settings.min_backoff, self.settings.interval)
                }
            };
            let finished = finished_pass(pass, (self.clock)(), &result);
            self.metrics
                .resync_passes
                .get_or_create(&ResyncPassLabel {
                    trigger: finished.trigger.as_str().to_string(),
                    outcome: finished.outcome.as_str().to_string(),
                })
                .inc();
            let next_at = (!stopped).then(|| {
                (self.clock)().saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX))
            });
            self.control.finish(finished, next_at);
            if stopped {
                return;
            }
            if !self.wait(wait, &stop).await {
                return;
            }
        }
    }

    /// Waits `wait`, or less when the API claims a pass. False when `stop` came first.
    async fn wait(&self, wait: Duration, stop: &CancellationToken) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep_until(deadline) => return true,
                _ = self.control.requested() => {
                    // A wake without a claim is left over from a request whose pass has run
                    // already (it came before the loop waited): keep waiting.
                    if self.control.claimed() {
                        return true;
                    }
                }
            }
        }
    }

    /// Lists every resource once. Fails only when the writer has stopped.
    pub async fn run_once(&self) -> Result<Report, pipeline::Error> {
        let started = std::time::Instant::now();
        let mut report = Report::default();
        let mut sweeps = Vec::new();
        for resource in &self.settings.resources {
            let listed_before = report.listed;
            if let Some(sweep) = self.resync_resource(resource, &mut report).await? {
                sweeps.push((sweep, resource.resync_only()));
            }
            self.control
                .resource_done(report.listed.saturating_sub(listed_before));
        }
        // Deletions only from a pass in which every kind listed completely: a child whose
        // owner's list failed would look deleted while its owner still exists.
        if report.complete() {
            for (sweep, resync_only) in sweeps {
                let mut outcome = self.submit(ResyncWork::Sweep(sweep)).await?;
                if resync_only {
                    // No event could have told of it: not a sign the source is blind.
                    outcome.deleted = 0;
                }
                merge(&mut report, outcome);
            }
        } else if !sweeps.is_empty() {
            tracing::warn!(
                message = "Resync did not look for deleted objects: not every resource listed.",
            );
        }
        for error in &report.failed {
            self.metrics
                .resync_errors
                .get_or_create(&KindLabel::new(error.kind()))
                .inc();
        }
        self.metrics
            .resync_missed_changes
            .inc_by(u64::try_from(report.missed + report.deleted).unwrap_or(u64::MAX));
        for class in &report.drifts_found {
            self.metrics
                .resync_drifts_found
                .get_or_create(&ClassLabel {
                    class: class.clone(),
                })
                .inc();
        }
        if report.complete() {
            let pass = ResyncWork::PassDone {
                cluster: self.settings.cluster.clone(),
                missed: report.missed + report.deleted,
            };
            let outcome = self.submit(pass).await?;
            merge(&mut report, outcome);
            self.metrics.resync_last_success.set((self.clock)() / 1000);
            self.metrics
                .resync_objects_listed
                .set(i64::try_from(report.listed).unwrap_or(i64::MAX));
            tracing::info!(
                message = "Resync finished.",
                cluster = %self.settings.cluster,
                listed = report.listed,
                missed = report.missed,
                deleted = report.deleted,
                drifts_found = report.drifts_found.len(),
                took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            );
        } else {
            tracing::warn!(
                message = "Resync incomplete; it will be retried with backoff.",
                cluster = %self.settings.cluster,
                failed = report.failed.len(),
                listed = report.listed,
                missed = report.missed,
            );
        }
        Ok(report)
    }

    /// Lists one resource and applies what it lists; returns the sweep for its absentees when
    /// the list completed with every item decoded.
    async fn resync_resource(
        &self,
        resource: &Resource,
        report: &mut Report,
    ) -> Result<Option<Sweep>, pipeline::Error> {
        let listed_at = (self.clock)();
        let mut lister = resource.list(&self.cluster, None, self.settings.page_size);
        let mut seen: HashSet<String> = HashSet::new();
        let mut list_version = String::new();
        let mut rejected = 0usize;
        let mut first = true;
        loop {
            let page = match lister.next_page().await {
                Ok(Some(page)) => page,
                Ok(None) => break,
                Err(error) => {
                    let hint = if error.kind() == "forbidden" {
                        " (grant `list` on it to drift-sentinel's ServiceAccount: k8s/rbac.yaml)"
                    } else {
                        ""
                    };
                    tracing::warn!(message = format!("Resync could not list a resource{hint}."), %error);
                    report.failed.push(error);
                    return Ok(None);
                }
            };
            if page.restarted {
                // The earlier pages belonged to a snapshot that is gone.
                seen.clear();
                rejected = 0;
                first = true;
            }
            if first {
                list_version = page.list_version.clone();
                first = false;
            }
            let mut events = Vec::with_capacity(page.items.len());
            for item in page.items {
                match super::decode_item(item) {
                    Ok(object) => {
                        seen.insert(object.uid.clone());
                        events.push(listed_event(&self.settings.cluster, object));
                    }
                    Err(reason) => {
                        rejected += 1;
                        tracing::warn!(
                            message = "Resync skipped an object the decoder rejected.",
                            resource = %resource.name(),
                            object = %reason,
                        );
                    }
                }
            }
            // At most one writer round's worth at a time, so events never wait behind a large
            // page.
            while !events.is_empty() {
                let rest = events.split_off(events.len().min(MAX_EVENTS_PER_ROUND));
                let chunk = std::mem::replace(&mut events, rest);
                let mut outcome = self
                    .submit(ResyncWork::Listed {
                        events: chunk,
                        list_version: list_version.clone(),
                        listed_at,
                    })
                    .await?;
                if resource.resync_only() {
                    // Changes of a kind the source does not watch are resync's to find.
                    outcome.missed = 0;
                }
                merge(report, outcome);
            }
        }
        report.listed += seen.len();
        report.rejected += rejected;
        if rejected > 0 {
            // An object the decoder rejected is not in `seen`: sweeping would delete it.
            tracing::warn!(
                message = "Resync did not look for deleted objects of a resource whose list had rejected items.",
                resource = %resource.name(),
                rejected,
            );
            return Ok(None);
        }
        Ok(Some(Sweep {
            cluster: self.settings.cluster.clone(),
            api_version: resource.api_version().to_string(),
            kind: resource.kind().to_string(),
            seen,
            list_version,
            listed_at,
            selects: Box::new(resource.selector_fn()),
        }))
    }

    /// Hands work to the writer, waiting for queue room (events go first) and for the commit.
    /// A failed commit is retried: the engine rolled back, so the work is simply done again.
    async fn submit(&self, mut work: ResyncWork) -> Result<ResyncOutcome, pipeline::Error> {
        loop {
            match self.pipeline.resync(work) {
                Ok(receiver) => match receiver.await {
                    Ok(Ok(outcome)) => return Ok(outcome),
                    Ok(Err(pipeline::Error::Store(kind))) => {
                        tracing::warn!(
                            message = "Resync work not committed; the list will be retried.",
                            kind
                        );
                        return Err(pipeline::Error::Store(kind));
                    }
                    Ok(Err(error)) => return Err(error),
                    Err(_) => return Err(pipeline::Error::Stopped),
                },
                Err((pipeline::Error::Overloaded, returned)) => {
                    work = returned;
                    tokio::time::sleep(QUEUE_FULL_WAIT).await;
                }
                Err((error, _)) => return Err(error),
            }
        }
    }
}

/// The record of a pass that began as `pass` and ended at `now` with `result`.
fn finished_pass(
    pass: RunningPass,
    now: drift_model::Millis,
    result: &Result<Report, pipeline::Error>,
) -> FinishedPass {
    let mut finished = FinishedPass {
        trigger: pass.trigger,
        started_at: pass.started_at,
        finished_at: now,
        outcome: PassOutcome::Failed,
        listed: 0,
        missed: 0,
        deleted: 0,
        drifts_found: Default::default(),
        rejected: 0,
        conflicts: 0,
        errors: Default::default(),
        first_error: None,
    };
    match result {
        Ok(report) => {
            finished.outcome = if report.complete() {
                PassOutcome::Complete
            } else {
                PassOutcome::Incomplete
            };
            finished.listed = report.listed;
            finished.missed = report.missed;
            finished.deleted = report.deleted;
            finished.rejected = report.rejected;
            finished.conflicts = report.conflicts;
            for class in &report.drifts_found {
                *finished.drifts_found.entry(class.clone()).or_insert(0) += 1;
            }
            for error in &report.failed {
                *finished.errors.entry(error.kind().to_string()).or_insert(0) += 1;
            }
            finished.first_error = report.failed.first().map(ToString::to_string);
        }
        Err(error) => {
            finished.errors.insert(error.kind().to_string(), 1);
            finished.first_error = Some(error.to_string());
        }
    }
    finished
}

fn merge(report: &mut Report, outcome: ResyncOutcome) {
    report.missed += outcome.missed;
    report.deleted += outcome.deleted;
    report.conflicts += outcome.conflicts;
    report.drifts_found.extend(outcome.drifts_found);
}

/// A listed object as the event an ApiServerSource would have sent for it. The writer decides
/// between `add` and `update` by whether it tracks the object.
pub(crate) fn listed_event(
    cluster: &str,
    object: drift_core::decode::KubeObject,
) -> ApiServerEvent {
    ApiServerEvent::for_object(
        SOURCE.to_string(),
        format!("{}/{}", object.uid, object.resource_version),
        cluster,
        Action::Update,
        object,
    )
}

/// The wait after `failures` failed resyncs in a row: `first`, doubling, at most five minutes
/// and at most the interval.
fn backoff(failures: u32, first: Duration, interval: Duration) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    let wait = first.saturating_mul(1u32 << exponent);
    wait.min(MAX_BACKOFF).min(interval.max(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped_by_the_interval_and_five_minutes() {
        let interval = Duration::from_secs(600);
        assert_eq!(backoff(1, MIN_BACKOFF, interval), Duration::from_secs(5));
        assert_eq!(backoff(2, MIN_BACKOFF, interval), Duration::from_secs(10));
        assert_eq!(backoff(4, MIN_BACKOFF, interval), Duration::from_secs(40));
        assert_eq!(backoff(30, MIN_BACKOFF, interval), Duration::from_secs(300));
        assert_eq!(
            backoff(30, MIN_BACKOFF, Duration::from_secs(60)),
            Duration::from_secs(60)
        );
    }
}
