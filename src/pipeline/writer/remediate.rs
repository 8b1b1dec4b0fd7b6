//! The round's remediation step, between the engine's evaluation and routing: the drifts that
//! fired this round go to the remediator (`drift_core::remediate`), and its attempts are
//! committed with the round that fired them, so a drift's history never shows a firing without
//! the attempt a rule made of it (or the reverse). Nothing is sent from here: a `dryRun` attempt
//! is final as recorded, a `planned` one waits for the sender.

use super::{Approval, ApprovalOutcome, ApprovalReply, Round, Writer};
use drift_core::remediate::Approved;
use drift_model::DriftState;

impl Writer {
    pub(super) fn remediate(&mut self, round: &mut Round) {
        if round.store_failure.is_some() || round.transitions.is_empty() {
            return;
        }
        let attempts =
            self.remediator
                .on_transitions(&round.transitions, self.engine.graph(), round.now);
        round.batch.remediations.extend(attempts);
    }

    /// Decides the round's approvals (`POST /api/v1/drifts/{id}/remediate`) on the drifts as the
    /// round left them; each answer waits for the commit of its attempt.
    pub(super) fn apply_approvals(
        &mut self,
        round: &mut Round,
        approvals: Vec<(Approval, ApprovalReply)>,
    ) {
        for (approval, reply) in approvals {
            let drift = self
                .engine
                .open_drifts()
                .find(|drift| drift.id == approval.drift_id)
                .cloned();
            let outcome = match drift {
                None => ApprovalOutcome::Unknown,
                Some(drift) if drift.state != DriftState::Firing => {
                    ApprovalOutcome::MovedOn(drift.state.as_str())
                }
                Some(drift) => match self.remediator.approve(
                    &drift,
                    approval.action,
                    &approval.approved_by,
                    self.engine.graph(),
                    round.now,
                ) {
                    Approved::NotAllowed(why) => ApprovalOutcome::NotAllowed(why),
                    Approved::Attempt(attempt) => {
                        round.batch.remediations.push((*attempt).clone());
                        ApprovalOutcome::Recorded(attempt)
                    }
                },
            };
            round.approval_replies.push((outcome, reply));
        }
    }

    /// Counts a committed round's attempts.
    pub(super) fn count_remediations(&self, round: &Round) {
        for attempt in &round.batch.remediations {
            self.metrics
                .remediations
                .get_or_create(&crate::metrics::RemediationLabel {
                    action: attempt.action.clone(),
                    outcome: attempt.outcome.as_str().to_string(),
                })
                .inc();
        }
    }
}
