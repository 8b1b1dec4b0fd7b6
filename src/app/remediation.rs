//! The remediation sender (`remediation.mode: apply`): it sends each `planned` attempt the writer
//! stored, exactly as planned, through the Kubernetes client resync uses (`cluster::write`), and
//! has the writer keep the outcome. It runs with the writer role only (never on a standby), and
//! each attempt is first claimed through the writer (a fenced commit that also checks the drift
//! still fires and no newer change of the object was seen), so a replica that lost its lease
//! claims nothing. A request without an answer (or a `429`/`5xx`) is tried again, the same
//! request with the same precondition, at most [`TRIES`] times; every other answer is final. A
//! stop during a send leaves the attempt `sending`: the next start ends it as `failed` (its
//! outcome is unknown) and never sends it again.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cluster::write::Sent;
use crate::cluster::Cluster;
use crate::pipeline::{Pipeline, SenderAnswer, SenderStep};
use drift_model::remediation::{Attempt, Outcome};
use drift_store::AuditRead;

/// Most attempts read at once.
const BATCH: usize = 20;
/// How often the sender looks for work without being woken.
const POLL: Duration = Duration::from_secs(10);
/// Most sends of one request (the first and the repeats after no answer, `429` or `5xx`).
const TRIES: u32 = 3;
/// The wait before a repeat, times the number of tries so far.
const BACKOFF: Duration = Duration::from_secs(1);

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
        for (seq, attempt) in self.read(Outcome::Sending).await {
            self.end_unknown(seq, attempt).await;
        }
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

    /// Stored attempts with `outcome`, oldest first (none when the store cannot answer: the
    /// next look tries again).
    async fn read(&self, outcome: Outcome) -> Vec<(i64, Attempt)> {
        let audit = Arc::clone(&self.audit);
        let cluster = self.cluster_name.clone();
        match tokio::task::spawn_blocking(move || {
            audit.remediations_by_outcome(outcome, &cluster, BATCH)
        })
        .await
        {
            Ok(Ok(rows)) => rows,
            Ok(Err(error)) => {
                tracing::warn!(message = "Could not read the remediation attempts to send.", %error);
                Vec::new()
            }
            Err(_) => Vec::new(),
        }
    }

    /// Commits a step through the writer (`None` when it could not: the store or the role).
    async fn step(&self, step: SenderStep) -> Option<SenderAnswer> {
        let pipeline = self.pipeline.clone();
        let queued = tokio::task::spawn_blocking(move || pipeline.sender_step(step)).await;
        let answer = match queued {
            Ok(Ok(receiver)) => receiver.await.ok(),
            _ => None,
        };
        match answer {
            Some(Ok(answer)) => Some(answer),
            Some(Err(error)) => {
                tracing::warn!(message = "The writer could not commit a remediation step.", %error);
                None
            }
            None => None,
        }
    }

    /// Ends an attempt a stop left `sending`.
    async fn end_unknown(&self, seq: i64, mut attempt: Attempt) {
        attempt.outcome = Outcome::Failed;
        attempt.reason = Some("unknown".to_string());
        attempt.detail = Some(
            "the process stopped while the request was in flight: its outcome is unknown (check \
             the object); it is never sent again"
                .to_string(),
        );
        self.step(SenderStep::Settle {
            seq,
            attempt: Box::new(attempt),
        })
        .await;
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
        // The namespace's opt-out, read just before the write: Namespaces are not among the
        // watched kinds, so only the API server can tell (and a namespace it cannot be read for
        // is not written to).
        if let Some(namespace) = namespace_of(&request.path) {
            let refusal = match self.cluster.namespace_opted_out(&namespace).await {
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
            };
            if let Some((outcome, reason, detail)) = refusal {
                let mut ended = claimed;
                ended.outcome = outcome;
                ended.reason = Some(reason.to_string());
                ended.detail = Some(detail);
                self.settle(seq, ended).await;
                return;
            }
        }
        let mut tries = 0;
        let sent = loop {
            tries += 1;
            let sent = self.cluster.send_planned(&request).await;
            match sent {
                Sent::Retry { .. } if tries < TRIES && !self.stop.is_cancelled() => {
                    tokio::time::sleep(BACKOFF * tries).await;
                }
                other => break other,
            }
        };
        self.settle(seq, outcome(claimed, sent, tries)).await;
    }

    /// Keeps an outcome, trying the writer a few times (a store that cannot commit now leaves
    /// the attempt `sending`, which the next start ends as unknown).
    async fn settle(&self, seq: i64, attempt: Attempt) {
        for wait in [0, 1, 2, 4, 8] {
            tokio::time::sleep(Duration::from_secs(wait)).await;
            let step = SenderStep::Settle {
                seq,
                attempt: Box::new(attempt.clone()),
            };
            if self.step(step).await.is_some() {
                return;
            }
        }
        tracing::error!(
            message = "A remediation's outcome could not be kept; it stays `sending` and ends as unknown at the next start.",
            drift = %attempt.drift_id,
        );
    }
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
fn outcome(mut attempt: Attempt, sent: Sent, tries: u32) -> Attempt {
    // After a try without an answer, a conflict may be the first try's own write: the outcome
    // is unknown, not a conflict.
    let sent = match sent {
        Sent::Conflict { status, message } if tries > 1 => {
            attempt.outcome = Outcome::Failed;
            attempt.status = Some(status);
            attempt.reason = Some("unknown".to_string());
            attempt.detail = Some(format!(
                "an earlier try got no answer and may have been applied; the repeat was answered: {message}"
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
        let first = outcome(sent_attempt(), conflict(), 1);
        assert_eq!(
            (first.outcome, first.reason.as_deref()),
            (Outcome::Conflict, Some("conflict"))
        );
        let repeat = outcome(sent_attempt(), conflict(), 2);
        assert_eq!(
            (repeat.outcome, repeat.reason.as_deref()),
            (Outcome::Failed, Some("unknown"))
        );
        let gone = outcome(
            sent_attempt(),
            Sent::Conflict {
                status: 404,
                message: "not found".into(),
            },
            1,
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
