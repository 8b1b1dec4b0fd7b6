//! Remediation attempts nobody will send: rows a stop left `sending` (their outcome is unknown:
//! ended as `failed`, never sent again), and, when this start's mode is not `apply`, rows left
//! `planned` (ended as `refused`, reason `mode`, through the writer's claim). Also the two
//! writer-facing helpers the sender shares: reading a cluster's attempts, committing a step.

use std::sync::Arc;

use crate::pipeline::{Pipeline, SenderAnswer, SenderStep};
use drift_model::remediation::{Attempt, Outcome};
use drift_store::AuditRead;

/// Most attempts read at once.
pub(super) const BATCH: usize = 20;

/// Ends what no sender of this start will send (see the module docs): `sending` rows always,
/// `planned` ones too when `planned_too` (the mode is not `apply`).
pub(super) async fn end_stranded(
    pipeline: Pipeline,
    audit: Arc<dyn AuditRead>,
    cluster: String,
    planned_too: bool,
) {
    let mut outcomes = vec![Outcome::Sending];
    if planned_too {
        outcomes.push(Outcome::Planned);
    }
    for outcome in outcomes {
        // A batch at a time, until none is left (each step moves its row on, or the store or
        // the role failed: then the next start tries again).
        loop {
            let rows = read(&audit, outcome, &cluster).await;
            if rows.is_empty() {
                break;
            }
            let mut moved = false;
            for (seq, attempt) in rows {
                let step = match outcome {
                    Outcome::Sending => SenderStep::Settle {
                        seq,
                        attempt: Box::new(unknown(attempt)),
                    },
                    _ => SenderStep::Claim {
                        seq,
                        attempt: Box::new(attempt),
                    },
                };
                moved |= step_through(&pipeline, step).await.is_some();
            }
            if !moved {
                break;
            }
        }
    }
}

/// `attempt`, a stop having left it in flight.
pub(super) fn unknown(mut attempt: Attempt) -> Attempt {
    attempt.outcome = Outcome::Failed;
    attempt.reason = Some("unknown".to_string());
    attempt.detail = Some(
        "the process stopped while the request was in flight: its outcome is unknown (check the \
         object); it is never sent again"
            .to_string(),
    );
    attempt
}

/// `cluster`'s stored attempts with `outcome`, oldest first (none when the store cannot answer:
/// the next look tries again).
pub(super) async fn read(
    audit: &Arc<dyn AuditRead>,
    outcome: Outcome,
    cluster: &str,
) -> Vec<(i64, Attempt)> {
    let audit = Arc::clone(audit);
    let cluster = cluster.to_string();
    match tokio::task::spawn_blocking(move || {
        audit.remediations_by_outcome(outcome, &cluster, BATCH)
    })
    .await
    {
        Ok(Ok(rows)) => rows,
        Ok(Err(error)) => {
            tracing::warn!(message = "Could not read the stored remediation attempts.", %error);
            Vec::new()
        }
        Err(_) => Vec::new(),
    }
}

/// Commits a step through the writer (`None` when it could not: the store or the role).
pub(super) async fn step_through(pipeline: &Pipeline, step: SenderStep) -> Option<SenderAnswer> {
    let pipeline = pipeline.clone();
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
