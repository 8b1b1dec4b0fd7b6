//! Running one drill against a cluster and the sink watching it: read and keep the target,
//! journal it, inject (as field manager `drift-sentinel-drill`, on the version read), poll the
//! sink's drift API until the expected drift fires on that object, then put the object back
//! (only what was injected, on the version current then, never over someone else's later change)
//! or wait for someone else to repair it, and wait for the drift to resolve. A stop (a signal)
//! cuts the waits short, never the restore.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use drift_core::drill::{plan, Drill, Inject, Then};

use super::journal::{Entry, Journal};
use super::report::{End, Outcome};
use super::restore::{object_path, restore};
use super::sink::{Seen, Sink};
use crate::cluster::write::Sent;
use crate::cluster::Cluster;

/// How far back a drift's time may be and still count, for the two clocks (the runner's and
/// the sink's) and the sink's grace before a pending drift is listed.
pub(crate) const CLOCK_SLACK: Duration = Duration::from_secs(120);
/// Tries of an injection that meets a conflict (the object moved on since it was read).
const INJECT_TRIES: u32 = 3;

/// What every drill of a run shares.
pub(crate) struct Runner {
    pub cluster: Cluster,
    pub sink: Sink,
    pub journal: Mutex<Journal>,
    /// How often the sink and the object are polled.
    pub poll: Duration,
    /// Cancelled by a signal: waits end, restores go on.
    pub stop: CancellationToken,
    pub start: Instant,
    /// The sink's cluster name for this cluster, when given (`--cluster`).
    pub cluster_name: Option<String>,
    /// The wall clock (the sink's `since` is a time of day).
    pub clock: drift_model::time::Clock,
}

fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Whether `seen` is the drift `drill` expects, on its object.
fn expected(drill: &Drill, seen: &Seen, cluster: Option<&str>) -> bool {
    let target = &drill.target;
    seen.namespace == target.namespace
        && seen.kind == target.kind
        && seen.name == target.name
        && group(&seen.api_version) == group(&target.api_version)
        && seen.class == drill.expect.class
        && seen.rule == drill.expect.rule
        && cluster.is_none_or(|cluster| seen.cluster == cluster)
}

impl Runner {
    /// `slack` before now, as the sink's API takes a time.
    fn now_minus(&self, slack: Duration) -> String {
        drift_model::time::format_time((self.clock)() - drift_model::time::millis(slack))
    }

    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Waits `duration`; true when the run was stopped meanwhile.
    async fn pause(&self, duration: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(duration) => self.stop.is_cancelled(),
            _ = self.stop.cancelled() => true,
        }
    }

    fn journal(
        &self,
        change: impl FnOnce(&mut Journal) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut journal = self
            .journal
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        change(&mut journal)
    }

    /// Runs `drill` (its `run`-th time) and says what happened.
    pub(crate) async fn run(&self, drill: &Drill, run: usize) -> Outcome {
        let mut outcome = Outcome {
            name: drill.name.clone(),
            affects: drill.affects.clone(),
            run,
            target: drill.target.clone(),
            class: drill.expect.class.clone(),
            rule: drill.expect.rule.clone(),
            then: match drill.then {
                Then::Restore => "restore",
                Then::ExpectRepaired(_) => "expectRepaired",
                Then::Keep => "keep",
            },
            injected_at: None,
            detected_after: None,
            drift: None,
            repaired: None,
            resolved: None,
            end: End::NotInjected,
            ended_at: Duration::ZERO,
            failures: Vec::new(),
        };
        self.drive(drill, run, &mut outcome).await;
        outcome.ended_at = self.elapsed();
        outcome
    }

    async fn drive(&self, drill: &Drill, run: usize, outcome: &mut Outcome) {
        let target = &drill.target;
        let object = format!("{} {}/{}", target.kind, target.namespace, target.name);
        // Again before each drill: a long chaos run must notice a label taken away.
        match super::namespace_allows(&self.cluster, &target.namespace).await {
            Ok(true) => {}
            Ok(false) => {
                return outcome.failures.push(format!(
                    "namespace {} no longer allows drills ({}: \"allowed\"): nothing was changed",
                    target.namespace,
                    drift_core::drill::ALLOW_LABEL
                ))
            }
            Err(error) => return outcome.failures.push(error),
        }
        let creates = matches!(drill.inject, Inject::Create(_));
        let Some(kept) = self
            .target_as_needed(drill, &object, creates, outcome)
            .await
        else {
            return;
        };
        // Drifts of the kind expected that the sink knows already: one open means the drill
        // could not tell its own from it; recently resolved ones must not count as seen.
        let before = match self.before(drill).await {
            Ok(before) => before,
            Err(error) => return outcome.failures.push(error),
        };
        let mut kept = kept;
        let label = if run == 0 {
            drill.name.clone()
        } else {
            format!("{}#{run}", drill.name)
        };
        let mut attempt = 0;
        let (entry, landed, injected_at, since) = loop {
            attempt += 1;
            if self.stop.is_cancelled() {
                return outcome
                    .failures
                    .push("stopped by a signal before the injection: nothing was changed".into());
            }
            let request = plan::injection(target, &drill.inject, kept.as_ref());
            let mut entry = Entry::new(
                &label,
                &self.cluster.server,
                target,
                &drill.inject,
                kept.as_ref(),
            );
            if let Err(error) = self.journal(|journal| journal.put(entry.clone())) {
                return outcome
                    .failures
                    .push(format!("the journal (nothing was injected): {error}"));
            }
            let injected_at = self.elapsed();
            let since = self.now_minus(CLOCK_SLACK);
            let (sent, answer) = self.cluster.send_for_answer(&request.planned()).await;
            match sent {
                Sent::Applied { .. } => {
                    // An answer that is not the object (unreadable) leaves `injected` unknown:
                    // the restore then works out what the injection made (never trusts a blank).
                    // A delete's answer is a Status: that it was accepted is what counts.
                    entry.injected = if matches!(drill.inject, Inject::Delete) {
                        Some(answer.unwrap_or_else(|| serde_json::json!({})))
                    } else {
                        answer.filter(|answer| answer.get("metadata").is_some())
                    };
                    if let Err(error) = self.journal(|journal| journal.put(entry.clone())) {
                        outcome.failures.push(format!("the journal: {error}"));
                    }
                    break (entry, true, injected_at, since);
                }
                // The object moved on since it was read (a controller's status write): nothing
                // was changed; read it again and inject on the new version.
                Sent::Conflict { status, .. }
                    if (status == 409 || status == 422) && attempt < INJECT_TRIES && !creates =>
                {
                    let _ = self.journal(|journal| journal.remove(&entry));
                    match self.cluster.get_json(&object_path(target)).await {
                        Ok(Some(now)) => kept = Some(now),
                        Ok(None) => {
                            return outcome
                                .failures
                                .push(format!("{object} was deleted before the injection"))
                        }
                        Err(error) => {
                            return outcome.failures.push(format!("reading {object}: {error}"))
                        }
                    }
                }
                Sent::Conflict { status, message } | Sent::Refused { status, message } => {
                    let _ = self.journal(|journal| journal.remove(&entry));
                    return outcome.failures.push(format!(
                        "the API server refused the injection ({status}: {message}); nothing was changed"
                    ));
                }
                Sent::Retry { status, message } => {
                    outcome.failures.push(format!(
                        "the injection got no clear answer ({}: {message}): it may have landed; restoring",
                        status.map_or("no answer".to_string(), |status| status.to_string())
                    ));
                    break (entry, false, injected_at, since);
                }
            }
        };
        outcome.injected_at = Some(injected_at);
        if landed {
            self.detect(drill, &before, &since, injected_at, outcome)
                .await;
        }
        let stopped = self.stop.is_cancelled();
        if stopped {
            outcome.failures.push("stopped by a signal".into());
        }
        let injected = entry.injected.clone();
        let repaired = match drill.then {
            Then::ExpectRepaired(within) if !stopped && landed => {
                self.await_repair(drill, kept.as_ref(), within, outcome)
                    .await
            }
            _ => false,
        };
        outcome.end = if matches!(drill.then, Then::Keep) && outcome.passed() && !stopped {
            End::Kept
        } else if repaired {
            End::Repaired
        } else {
            restore(
                &self.cluster,
                target,
                &drill.inject,
                kept.as_ref(),
                injected.as_ref(),
            )
            .await
        };
        if let End::NotRestored(by_hand) = &outcome.end {
            outcome
                .failures
                .push(format!("{object} was not put back: {by_hand}"));
        } else if let Err(error) = self.journal(|journal| journal.remove(&entry)) {
            outcome.failures.push(format!("the journal: {error}"));
        }
        if matches!(outcome.end, End::Restored | End::Repaired) && !self.stop.is_cancelled() {
            if let Some(id) = outcome.drift.as_ref().map(|drift| drift.id.clone()) {
                self.await_resolve(&id, drill.expect.within, outcome).await;
            }
        }
    }

    /// The target as the drill needs it (`Some(None)`: absent, for a create), or `None` with
    /// the failure said. A target that does not exist is waited for, up to the drill's
    /// `within`: Knative makes children again after another drill (a Revision's Deployment
    /// after its Service was deleted and restored).
    async fn target_as_needed(
        &self,
        drill: &Drill,
        object: &str,
        creates: bool,
        outcome: &mut Outcome,
    ) -> Option<Option<Value>> {
        let deadline = Instant::now() + drill.expect.within;
        loop {
            let kept = match self.cluster.get_json(&object_path(&drill.target)).await {
                Ok(kept) => kept,
                Err(error) => {
                    outcome.failures.push(format!("reading {object}: {error}"));
                    return None;
                }
            };
            if creates {
                if kept.is_some() {
                    outcome.failures.push(format!(
                        "{object} exists already: a create drill needs it absent"
                    ));
                    return None;
                }
                return Some(None);
            }
            // One on its way out is not there to drill.
            let live = kept.filter(|kept| kept.pointer("/metadata/deletionTimestamp").is_none());
            if live.is_some() {
                return Some(live);
            }
            if Instant::now() >= deadline || self.pause(self.poll).await {
                outcome.failures.push(format!(
                    "{object} does not exist{}",
                    if self.stop.is_cancelled() {
                        " (stopped by a signal while waiting for it)"
                    } else {
                        ""
                    }
                ));
                return None;
            }
        }
    }

    /// The drifts of the kind expected that the sink knows on the object already. One still
    /// open after the drill's `within` (another drill's effect clears meanwhile: a deleted
    /// Service's Trigger) means the drill could not tell its own from it.
    async fn before(&self, drill: &Drill) -> Result<BTreeSet<String>, String> {
        let cluster = self.cluster_name.as_deref();
        let deadline = Instant::now() + drill.expect.within;
        loop {
            let open = self
                .sink
                .drifts(&drill.target.namespace, None, Some("open"))
                .await?;
            let Some(open) = open.iter().find(|seen| expected(drill, seen, cluster)) else {
                break;
            };
            if self.stop.is_cancelled() {
                return Err("stopped by a signal before the injection: nothing was changed".into());
            }
            if Instant::now() >= deadline || self.pause(self.poll).await {
                if self.stop.is_cancelled() {
                    return Err(
                        "stopped by a signal before the injection: nothing was changed".into(),
                    );
                }
                return Err(format!(
                    "a {} drift is already {} on {} {}/{} (drift {}): the drill could not tell \
                     its own from it; resolve it first",
                    open.class, open.state, open.kind, open.namespace, open.name, open.id
                ));
            }
        }
        let recent = self
            .sink
            .drifts(
                &drill.target.namespace,
                Some(&self.now_minus(CLOCK_SLACK)),
                None,
            )
            .await?;
        Ok(recent.into_iter().map(|seen| seen.id).collect())
    }

    async fn detect(
        &self,
        drill: &Drill,
        before: &BTreeSet<String>,
        since: &str,
        injected_at: Duration,
        outcome: &mut Outcome,
    ) {
        let deadline = Instant::now() + drill.expect.within;
        let mut last_error: Option<String>;
        loop {
            match self
                .sink
                .drifts(&drill.target.namespace, Some(since), None)
                .await
            {
                Ok(seen) => {
                    let found = seen.into_iter().find(|seen| {
                        expected(drill, seen, self.cluster_name.as_deref())
                            && seen.fired_at.is_some()
                            && !before.contains(&seen.id)
                    });
                    if let Some(found) = found {
                        outcome.detected_after = Some(self.elapsed().saturating_sub(injected_at));
                        if let Some(severity) = &drill.expect.severity {
                            if *severity != found.severity {
                                outcome.failures.push(format!(
                                    "drift {} fired as {}, not {severity}",
                                    found.id, found.severity
                                ));
                            }
                        }
                        outcome.drift = Some(found);
                        return;
                    }
                    last_error = None;
                }
                Err(error) => last_error = Some(error),
            }
            if Instant::now() >= deadline {
                let what = match &drill.expect.rule {
                    Some(rule) => format!("invariant {rule}"),
                    None => drill.expect.class.clone(),
                };
                let target = &drill.target;
                outcome.failures.push(format!(
                    "no {what} drift fired on {} {}/{} within {}s{}",
                    target.kind,
                    target.namespace,
                    target.name,
                    drill.expect.within.as_secs(),
                    last_error
                        .map(|error| format!(" (last error: {error})"))
                        .unwrap_or_default()
                ));
                return;
            }
            if self.pause(self.poll).await {
                return;
            }
        }
    }

    /// Waits for someone else to put the object back and the drift to resolve; false (a
    /// failure said) when not within `within`.
    async fn await_repair(
        &self,
        drill: &Drill,
        kept: Option<&Value>,
        within: Duration,
        outcome: &mut Outcome,
    ) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let current = self.cluster.get_json(&object_path(&drill.target)).await;
            if let Ok(current) = current {
                if plan::repaired(&drill.inject, kept, current.as_ref()) {
                    outcome.repaired = Some(true);
                    return true;
                }
            }
            if Instant::now() >= deadline || self.pause(self.poll).await {
                outcome.repaired = Some(false);
                if self.stop.is_cancelled() {
                    // The stop is the failure said; the drill puts it back.
                    return false;
                }
                outcome.failures.push(format!(
                    "not repaired within {}s (expectRepaired): the drill put it back itself",
                    within.as_secs()
                ));
                return false;
            }
        }
    }

    async fn await_resolve(&self, id: &str, within: Duration, outcome: &mut Outcome) {
        let deadline = Instant::now() + within;
        let mut last: Option<String>;
        loop {
            match self.sink.state(id).await {
                Ok(Some(state)) if state == "resolved" => {
                    outcome.resolved = Some(true);
                    return;
                }
                Ok(state) => last = state,
                Err(error) => last = Some(error),
            }
            if Instant::now() >= deadline || self.pause(self.poll).await {
                outcome.resolved = Some(false);
                if self.stop.is_cancelled() {
                    // The stop itself is the failure said; the object is back.
                    return;
                }
                outcome.failures.push(format!(
                    "drift {id} did not resolve within {}s after the object was put back (last: {})",
                    within.as_secs(),
                    last.unwrap_or_else(|| "not found".into())
                ));
                return;
            }
        }
    }
}
