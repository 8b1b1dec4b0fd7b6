//! The round's remediation step, at the end of the engine's evaluation (before its changes are
//! taken, so a fight it finds opens `remediation_fight` in the same round): the drifts that
//! fired this round go to the remediator (`drift_core::remediate`), and its attempts are
//! committed with the round that fired them, so a drift's history never shows a firing without
//! the attempt a rule made of it (or the reverse). Nothing is sent from here: a `dryRun` attempt
//! is final as recorded, a `planned` one waits for the sender.

use super::{Approval, ApprovalOutcome, ApprovalReply, Round, Writer};
use super::{SenderAnswer, SenderReply, SenderStep};
use drift_core::remediate::{Action, Approved};
use drift_model::remediation::{Attempt, Outcome};
use drift_model::DriftState;

impl Writer {
    pub(super) fn remediate(&mut self, round: &mut Round) {
        let transitions = self.engine.journaled_transitions();
        if round.store_failure.is_some() || transitions.is_empty() {
            return;
        }
        let transitions = transitions.to_vec();
        let decided = self
            .remediator
            .on_transitions(&transitions, self.engine.graph(), round.now);
        for change in decided.fights {
            round
                .fights
                .get_or_insert_with(|| self.engine.fights().clone());
            self.engine
                .set_fight(&change.key, change.manager, round.now);
        }
        round.batch.remediations.extend(decided.attempts);
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

    /// The sender's steps: a claim is checked against what the writer saw since the judgement
    /// (the drift still firing, no newer change of the object) and marked `sending`, or ended
    /// as a conflict without a request; an outcome is kept.
    pub(super) fn apply_sender_steps(
        &mut self,
        round: &mut Round,
        steps: Vec<(SenderStep, SenderReply)>,
    ) {
        for (step, reply) in steps {
            let answer = match step {
                SenderStep::Claim { seq, attempt } => {
                    let mut attempt = *attempt;
                    match self.moved_on(&attempt) {
                        Some(why) => {
                            attempt.outcome = Outcome::Conflict;
                            attempt.reason = Some("moved_on".to_string());
                            attempt.detail = Some(why);
                            round
                                .batch
                                .settled_remediations
                                .push((seq, attempt.clone()));
                            SenderAnswer::Ended(Box::new(attempt))
                        }
                        None => {
                            attempt.outcome = Outcome::Sending;
                            round
                                .batch
                                .settled_remediations
                                .push((seq, attempt.clone()));
                            SenderAnswer::Send(Box::new(attempt))
                        }
                    }
                }
                SenderStep::Settle { seq, attempt } => {
                    round.batch.settled_remediations.push((seq, *attempt));
                    SenderAnswer::Settled
                }
            };
            round.sender_replies.push((answer, reply));
        }
    }

    /// Why `attempt` must not be sent any more, if it must not: its drift is no longer firing,
    /// or the object changed since the judgement (for a restore: it exists again).
    fn moved_on(&self, attempt: &Attempt) -> Option<String> {
        let Some(drift) = self
            .engine
            .open_drifts()
            .find(|drift| drift.id == attempt.drift_id)
        else {
            return Some("the drift resolved before the request was sent".to_string());
        };
        if drift.state != DriftState::Firing {
            return Some(format!(
                "the drift is {} again: only a firing drift is remediated",
                drift.state.as_str()
            ));
        }
        let graph = self.engine.graph();
        let object = graph.by_uid(&drift.cluster, &drift.uid)?;
        if Action::parse(&attempt.action) == Some(Action::Restore) {
            let again = drift_core::remediate::live_namesake(graph, object);
            return again.then(|| "the object exists again".to_string());
        }
        let judged = attempt.resource_version.as_deref();
        (judged != Some(object.resource_version.as_str())).then(|| {
            format!(
                "a newer change (resourceVersion {}) was seen before the request was sent",
                object.resource_version
            )
        })
    }

    /// Counts a committed round's attempts (new ones, and those whose outcome is final now).
    pub(super) fn count_remediations(&self, round: &Round) {
        let settled = round
            .batch
            .settled_remediations
            .iter()
            .map(|(_, attempt)| attempt)
            .filter(|attempt| attempt.outcome != Outcome::Sending);
        if round
            .batch
            .remediations
            .iter()
            .any(|attempt| attempt.outcome == Outcome::Planned)
        {
            self.health.remediation_planned.notify_one();
        }
        for attempt in round.batch.remediations.iter().chain(settled) {
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
