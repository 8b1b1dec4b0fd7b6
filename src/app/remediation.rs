//! The remediation sender (`remediation.mode: apply`): it sends each `planned` attempt the writer
//! stored, exactly as planned, through the Kubernetes client resync uses (`cluster::write`), and
//! has the writer keep the outcome. It runs with the writer role only (never on a standby), and
//! each attempt is first claimed through the writer (a fenced commit that also checks the drift
//! still fires and no newer change of the object was seen), so a replica that lost its lease
//! claims nothing. A request without an answer (or a `429`/`5xx`) is tried again, the same
//! request with the same precondition, at most [`TRIES`] times. A `409` on the
//! `resourceVersion` precondition is judged again by the writer ([`SenderStep::Reclaim`]): when
//! only a newer status was seen, the same request goes again on that version (at most
//! [`RECLAIMS`] times); every other answer is final. A stop during a send leaves the attempt
//! `sending`: the next start ends it as `failed` (its outcome is unknown) and never sends it
//! again.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cluster::write::Sent;
use crate::cluster::Cluster;
use crate::pipeline::{Pipeline, SenderAnswer, SenderStep};
use drift_model::remediation::{Attempt, Outcome, PlannedRequest};
use drift_store::AuditRead;

/// How often the sender looks for work without being woken.
const POLL: Duration = Duration::from_secs(10);
/// Most sends of one request (the first and the repeats after no answer, `429` or `5xx`).
const TRIES: u32 = 3;
/// The wait before a repeat, times the number of tries so far.
const BACKOFF: Duration = Duration::from_secs(1);
/// Sends again after a `409` on the `resourceVersion` precondition, each on the newer version
/// the writer has seen by then (a controller writes a Knative object's status right after each
/// change of it, so the version an attempt was planned on is often gone when it is sent).
const RECLAIMS: u32 = 3;
/// How long the sender waits for the writer to see that newer version, in all, per reclaim.
const RECLAIM_WAIT: Duration = Duration::from_secs(5);

/// The sender of one writer role.
pub(super) struct Sender {
    pub(super) cluster: Cluster,
    /// The cluster's name (the one resync reaches): only its attempts are this sender's.
    pub(super) cluster_name: String,
    pub(super) pipeline: Pipeline,
    pub(super) audit: Arc<dyn AuditRead>,
    pub(super) stop: CancellationToken,
}

impl Sender {
    pub(super) async fn run(self) {
        tracing::info!(message = "Remediation sender on.", cluster = %self.cluster.description);
        super::stranded::end_stranded(
            self.pipeline.clone(),
            Arc::clone(&self.audit),
            self.cluster_name.clone(),
            false,
        )
        .await;
        while !self.stop.is_cancelled() {
            for (seq, attempt) in self.read(Outcome::Planned).await {
                if self.stop.is_cancelled() {
                    return;
                }
                self.send(seq, attempt).await;
            }
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = self.pipeline.remediation_planned().notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    async fn read(&self, outcome: Outcome) -> Vec<(i64, Attempt)> {
        super::stranded::read(&self.audit, outcome, &self.cluster_name).await
    }

    async fn step(&self, step: SenderStep) -> Option<SenderAnswer> {
        super::stranded::step_through(&self.pipeline, step).await
    }

    /// Claims, sends and settles one attempt.
    async fn send(&self, seq: i64, attempt: Attempt) {
        let claimed = match self
            .step(SenderStep::Claim {
                seq,
                attempt: Box::new(attempt),
            })
            .await
        {
            Some(SenderAnswer::Send(claimed)) => *claimed,
            // Ended without a request (recorded by the writer), or not claimed now.
            _ => return,
        };
        let Some(request) = claimed.request.clone() else {
            let mut ended = claimed;
            ended.outcome = Outcome::Failed;
            ended.reason = Some("no_request".to_string());
            ended.detail = Some("the attempt holds no request".to_string());
            self.settle(seq, ended).await;
            return;
        };
        if let Some((outcome, reason, detail)) = self.opted_out(&request).await {
            let mut ended = claimed;
            ended.outcome = outcome;
            ended.reason = Some(reason.to_string());
            ended.detail = Some(detail);
            self.settle(seq, ended).await;
            return;
        }
        let mut claimed = claimed;
        let mut request = request;
        let mut reclaims = 0;
        loop {
            let mut tries = 0;
            // A try without an answer, or answered 5xx but `429`, may have been applied.
            let mut may_have_landed = false;
            let sent = loop {
                tries += 1;
                let sent = self.cluster.send_planned(&request).await;
                match sent {
                    Sent::Retry { status, .. } if tries < TRIES && !self.stop.is_cancelled() => {
                        may_have_landed |= status != Some(429);
                        tokio::time::sleep(BACKOFF * tries).await;
                    }
                    Sent::Retry { status, .. } => {
                        may_have_landed |= status != Some(429);
                        break sent;
                    }
                    other => break other,
                }
            };
            // Only a clear 409 on this send (nothing written) is judged again.
            let precondition_failed = matches!(sent, Sent::Conflict { status: 409, .. })
                && !may_have_landed
                && claimed.resource_version.is_some();
            if !precondition_failed || reclaims == RECLAIMS || self.stop.is_cancelled() {
                self.settle(seq, outcome(claimed, sent, tries, may_have_landed))
                    .await;
                return;
            }
            reclaims += 1;
            match self.reclaim(seq, &claimed).await {
                Reclaimed::Again(again) => match again.request.clone() {
                    // Read again before this write too: seconds may have passed.
                    Some(next) => {
                        if let Some((outcome, reason, detail)) = self.opted_out(&next).await {
                            let mut ended = *again;
                            ended.outcome = outcome;
                            ended.reason = Some(reason.to_string());
                            ended.detail = Some(detail);
                            self.settle(seq, ended).await;
                            return;
                        }
                        claimed = *again;
                        request = next;
                    }
                    None => {
                        self.settle(seq, outcome(claimed, sent, tries, may_have_landed))
                            .await;
                        return;
                    }
                },
                // Ended by the writer, recorded with why; or the role stops (left `sending`).
                Reclaimed::Ended => return,
                // No newer version seen in time: the 409 is the outcome.
                Reclaimed::NotSeen => {
                    self.settle(seq, outcome(claimed, sent, tries, may_have_landed))
                        .await;
                    return;
                }
            }
        }
    }

    /// The namespace's opt-out, read just before a write: Namespaces are not among the watched
    /// kinds, so only the API server can tell (and a namespace it cannot be read for is not
    /// written to). `None` when the write may go.
    async fn opted_out(&self, request: &PlannedRequest) -> Option<(Outcome, &'static str, String)> {
        let namespace = namespace_of(&request.path)?;
        match self.cluster.namespace_opted_out(&namespace).await {
            Ok(false) => None,
            Ok(true) => Some((
                Outcome::Refused,
                "opted_out",
                format!(
                    "namespace {namespace} is annotated {}: \"off\"",
                    drift_core::remediate::OPT_OUT
                ),
            )),
            Err(error) => Some((
                Outcome::Failed,
                "namespace_unreadable",
                format!("could not read namespace {namespace} to check its opt-out: {error}"),
            )),
        }
    }

    /// Asks the writer to judge `attempt` again after a `409`, waiting (at most
    /// [`RECLAIM_WAIT`]) until it has seen a newer version of the object.
    async fn reclaim(&self, seq: i64, attempt: &Attempt) -> Reclaimed {
        let deadline = tokio::time::Instant::now() + RECLAIM_WAIT;
        let mut wait = Duration::from_millis(100);
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return Reclaimed::Ended,
                () = tokio::time::sleep(wait) => {}
            }
            let step = SenderStep::Reclaim {
                seq,
                attempt: Box::new(attempt.clone()),
            };
            match self.step(step).await {
                Some(SenderAnswer::Send(again)) => return Reclaimed::Again(again),
                Some(SenderAnswer::NotYet) | None => {
                    if tokio::time::Instant::now() >= deadline {
                        return Reclaimed::NotSeen;
                    }
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
                Some(SenderAnswer::Ended(_) | SenderAnswer::Settled) => return Reclaimed::Ended,
            }
        }
    }

    /// Keeps an outcome, trying the writer until it commits (a store that cannot commit now, a
    /// failover) or the role stops: then the attempt stays `sending`, which the next start ends
    /// as unknown.
    async fn settle(&self, seq: i64, attempt: Attempt) {
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = tokio::time::sleep(wait) => {}
            }
            let step = SenderStep::Settle {
                seq,
                attempt: Box::new(attempt.clone()),
            };
            if self.step(step).await.is_some() {
                return;
            }
            wait = (wait * 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
        }
        tracing::error!(
            message = "A remediation's outcome could not be kept before the stop; it stays `sending` and ends as unknown at the next start.",
            drift = %attempt.drift_id,
        );
    }
}

/// What a reclaim came to.
enum Reclaimed {
    /// Send this (the same request on the newer version).
    Again(Box<Attempt>),
    /// Ended by the writer (recorded), or the role stops.
    Ended,
    /// The writer saw no newer version in time.
    NotSeen,
}

/// The namespace segment of an object or collection path (`/api/v1/namespaces/N/...`,
/// `/apis/G/V/namespaces/N/...`) as the planner encoded it, if the path has one.
fn namespace_of(path: &str) -> Option<String> {
    let path = path.split('?').next()?;
    let mut segments = path.split('/');
    segments.find(|segment| *segment == "namespaces")?;
    let namespace = segments.next()?;
    // A Namespace object's own path (`/api/v1/namespaces/N`) has nothing after the name.
    segments.next()?;
    Some(namespace.to_string())
}

/// The attempt with what the API server answered after `tries` sends.
fn outcome(mut attempt: Attempt, sent: Sent, tries: u32, may_have_landed: bool) -> Attempt {
    // After a try that may have landed (no answer, a 5xx), anything but an acceptance may be
    // about that try's own write: the outcome is unknown, not a conflict or a failure.
    let sent = match sent {
        Sent::Applied { .. } => sent,
        other if may_have_landed => {
            let (status, message) = match other {
                Sent::Conflict { status, message } | Sent::Refused { status, message } => {
                    ((status != 0).then_some(status), message)
                }
                Sent::Retry { status, message } => (status, message),
                Sent::Applied { .. } => (None, String::new()),
            };
            attempt.outcome = Outcome::Failed;
            attempt.status = status;
            attempt.reason = Some("unknown".to_string());
            attempt.detail = Some(format!(
                "after {tries} tries, one of which got no answer (or a 5xx) and may have been \
                 applied: check the object; the last answer: {message}"
            ));
            return attempt;
        }
        other => other,
    };
    match sent {
        Sent::Applied {
            status,
            resource_version,
        } => {
            attempt.outcome = Outcome::Applied;
            attempt.status = Some(status);
            attempt.resource_version_after = resource_version;
        }
        Sent::Conflict { status, message } => {
            attempt.outcome = Outcome::Conflict;
            attempt.status = Some(status);
            attempt.reason = Some(
                match status {
                    404 => "not_found",
                    422 => "invalid",
                    _ => "conflict",
                }
                .to_string(),
            );
            attempt.detail = Some(message);
        }
        Sent::Refused { status, message } => {
            attempt.outcome = Outcome::Failed;
            attempt.status = (status != 0).then_some(status);
            attempt.reason = Some(
                match status {
                    401 => "unauthorized",
                    403 => "forbidden",
                    _ => "rejected",
                }
                .to_string(),
            );
            attempt.detail = Some(message);
        }
        Sent::Retry { status, message } => {
            attempt.outcome = Outcome::Failed;
            attempt.status = status;
            attempt.reason = Some("no_answer".to_string());
            attempt.detail = Some(format!("after {tries} tries: {message}"));
        }
    }
    attempt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent_attempt() -> Attempt {
        Attempt {
            drift_id: "d".into(),
            cluster: "prod".into(),
            object: "serving.knative.dev/v1/Service/n/s".into(),
            fields: vec!["/spec/traffic".into()],
            at: 0,
            mode: "apply".into(),
            action: "revert".into(),
            rule: "r".into(),
            approved_by: None,
            request: None,
            resource_version: Some("7".into()),
            judged: None,
            outcome: Outcome::Sending,
            status: None,
            resource_version_after: None,
            reason: None,
            detail: None,
        }
    }

    #[test]
    fn a_conflict_is_a_conflict_on_the_first_try_and_unknown_after_a_repeat() {
        let conflict = || Sent::Conflict {
            status: 409,
            message: "the object has been modified".into(),
        };
        let first = outcome(sent_attempt(), conflict(), 1, false);
        assert_eq!(
            (first.outcome, first.reason.as_deref()),
            (Outcome::Conflict, Some("conflict"))
        );
        // After a 429 (not processed) a conflict is a conflict; after no answer it is unknown.
        let after_throttle = outcome(sent_attempt(), conflict(), 2, false);
        assert_eq!(after_throttle.outcome, Outcome::Conflict);
        let repeat = outcome(sent_attempt(), conflict(), 2, true);
        assert_eq!(
            (repeat.outcome, repeat.reason.as_deref()),
            (Outcome::Failed, Some("unknown"))
        );
        let forbidden_after_timeout = outcome(
            sent_attempt(),
            Sent::Refused {
                status: 403,
                message: "forbidden".into(),
            },
            2,
            true,
        );
        assert_eq!(forbidden_after_timeout.reason.as_deref(), Some("unknown"));
        let applied_after_timeout = outcome(
            sent_attempt(),
            Sent::Applied {
                status: 200,
                resource_version: Some("9".into()),
            },
            2,
            true,
        );
        assert_eq!(applied_after_timeout.outcome, Outcome::Applied);
        let gone = outcome(
            sent_attempt(),
            Sent::Conflict {
                status: 404,
                message: "not found".into(),
            },
            1,
            false,
        );
        assert_eq!(gone.reason.as_deref(), Some("not_found"));
    }

    #[test]
    fn the_namespace_of_a_path_is_its_segment_after_namespaces() {
        assert_eq!(
            namespace_of("/apis/serving.knative.dev/v1/namespaces/my-app/services/web?fieldManager=drift-sentinel"),
            Some("my-app".to_string())
        );
        assert_eq!(
            namespace_of("/api/v1/namespaces/knative-serving/configmaps"),
            Some("knative-serving".to_string())
        );
        assert_eq!(namespace_of("/api/v1/namespaces/team-a"), None);
        assert_eq!(
            namespace_of("/apis/rbac.authorization.k8s.io/v1/clusterroles/x"),
            None
        );
    }
}
