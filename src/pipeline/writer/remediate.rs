//! The round's remediation step, at the end of the engine's evaluation (before its changes are
//! taken, so a fight it finds opens `remediation_fight` in the same round): the drifts that
//! fired this round go to the remediator (`drift_core::remediate`), and its attempts are
//! committed with the round that fired them, so a drift's history never shows a firing without
//! the attempt a rule made of it (or the reverse). Nothing is sent from here: a `dryRun` attempt
//! is final as recorded, a `planned` one waits for the sender.

use super::{Approval, ApprovalOutcome, ApprovalReply, Round, Writer};
use super::{SenderAnswer, SenderReply, SenderStep};
use drift_core::remediate::{Action, Approved, Mode, Replan};
use drift_model::remediation::{Attempt, Outcome};
use drift_model::{DriftState, Millis};

/// How old a `planned` attempt may be when the sender claims it: older ones (a writer that was
/// down, a store that could not commit) are not sent on a judgement that old.
const MAX_PLANNED_AGE_MS: Millis = 15 * 60 * 1000;

impl Writer {
    pub(super) fn remediate(&mut self, round: &mut Round) {
        if self.remediator.policy().mode == Mode::Off && !self.engine.fights().is_empty() {
            // Fights restored from the store while remediation is now off: nothing acts on
            // those objects any more, so nothing is stopped either.
            let keys: Vec<_> = self.engine.fights().keys().cloned().collect();
            round
                .fights
                .get_or_insert_with(|| self.engine.fights().clone());
            for key in keys {
                self.engine.set_fight(&key, None, round.now);
            }
        }
        // Off (the default install): nothing more, not even a look at the round's moves.
        if self.remediator.policy().mode == Mode::Off || round.store_failure.is_some() {
            return;
        }
        let transitions = self.engine.journaled_transitions();
        if transitions.is_empty() {
            return;
        }
        let decided = self
            .remediator
            .on_transitions(transitions, self.engine.graph(), round.now);
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
    /// and re-planned on the object as it is ([`claim`](Self::claim)), and marked `sending` or
    /// ended without a request; an outcome is kept (and an applied revert counts for fight
    /// detection from then on).
    pub(super) fn apply_sender_steps(
        &mut self,
        round: &mut Round,
        steps: Vec<(SenderStep, SenderReply)>,
    ) {
        for (step, reply) in steps {
            // The row must still have the outcome this step moves it from: a repeated step (an
            // answer lost after its commit) changes nothing and is told nothing twice.
            let (seq, from) = match &step {
                SenderStep::Claim { seq, .. } => (*seq, Outcome::Planned),
                SenderStep::Reclaim { seq, .. } | SenderStep::Settle { seq, .. } => {
                    (*seq, Outcome::Sending)
                }
            };
            let stored = match self.store.remediation_outcome(seq) {
                Ok(stored) => stored,
                Err(error) => {
                    round.store_failure.get_or_insert(error);
                    None
                }
            };
            if stored != Some(from) {
                let answer = match step {
                    SenderStep::Claim { attempt, .. } => {
                        let mut attempt = *attempt;
                        attempt.outcome = stored.unwrap_or(Outcome::Conflict);
                        SenderAnswer::Ended(Box::new(attempt))
                    }
                    SenderStep::Reclaim { attempt, .. } => {
                        let mut attempt = *attempt;
                        attempt.outcome = stored.unwrap_or(Outcome::Conflict);
                        SenderAnswer::Ended(Box::new(attempt))
                    }
                    SenderStep::Settle { .. } => SenderAnswer::Settled,
                };
                round.sender_replies.push((answer, reply));
                continue;
            }
            let answer = match step {
                SenderStep::Claim { seq, attempt } => {
                    let mut attempt = *attempt;
                    if !self.claimed.insert(seq) {
                        // Claimed before by this writer: never a second request for one attempt.
                        attempt.outcome = Outcome::Sending;
                        SenderAnswer::Ended(Box::new(attempt))
                    } else {
                        round.claimed_now.push(seq);
                        match self.claim(&attempt, round.now) {
                            Ok(request) => {
                                attempt.outcome = Outcome::Sending;
                                attempt.resource_version = request
                                    .resource_version
                                    .clone()
                                    .or(attempt.resource_version);
                                attempt.request = Some(request.planned());
                                round.batch.settled_remediations.push((
                                    seq,
                                    Outcome::Planned,
                                    attempt.clone(),
                                ));
                                SenderAnswer::Send(Box::new(attempt))
                            }
                            Err((outcome, reason, detail)) => {
                                attempt.outcome = outcome;
                                attempt.reason = Some(reason.to_string());
                                attempt.detail = Some(detail);
                                round.batch.settled_remediations.push((
                                    seq,
                                    Outcome::Planned,
                                    attempt.clone(),
                                ));
                                SenderAnswer::Ended(Box::new(attempt))
                            }
                        }
                    }
                }
                SenderStep::Reclaim { seq, attempt } => {
                    let mut attempt = *attempt;
                    match self.claim(&attempt, round.now) {
                        // The writer knows no newer version than the one answered 409: its
                        // event has not arrived yet.
                        Ok(request)
                            if request.resource_version.is_none()
                                || request.resource_version == attempt.resource_version =>
                        {
                            SenderAnswer::NotYet
                        }
                        Ok(request) => {
                            attempt.resource_version = request.resource_version.clone();
                            attempt.request = Some(request.planned());
                            round.batch.settled_remediations.push((
                                seq,
                                Outcome::Sending,
                                attempt.clone(),
                            ));
                            SenderAnswer::Send(Box::new(attempt))
                        }
                        Err((outcome, reason, detail)) => {
                            attempt.outcome = outcome;
                            attempt.status = Some(409);
                            attempt.reason = Some(reason.to_string());
                            attempt.detail = Some(format!("answered 409 Conflict, then: {detail}"));
                            round.batch.settled_remediations.push((
                                seq,
                                Outcome::Sending,
                                attempt.clone(),
                            ));
                            SenderAnswer::Ended(Box::new(attempt))
                        }
                    }
                }
                SenderStep::Settle { seq, attempt } => {
                    if attempt.outcome == Outcome::Applied {
                        self.remediator.applied(&attempt, round.now);
                    }
                    round
                        .batch
                        .settled_remediations
                        .push((seq, Outcome::Sending, *attempt));
                    SenderAnswer::Settled
                }
            };
            round.sender_replies.push((answer, reply));
        }
    }

    /// The request to send for a claimed attempt, or how it ends without one: remediation is
    /// still `apply`, the attempt is recent, its drift still fires, and re-planned on the
    /// object as it is now the request writes what it did at the judgement (only the
    /// `resourceVersion` precondition may be newer: a status write in between does not end it).
    fn claim(
        &self,
        attempt: &Attempt,
        now: Millis,
    ) -> Result<drift_core::remediate::Request, (Outcome, &'static str, String)> {
        let moved_on = |why: String| (Outcome::Conflict, "moved_on", why);
        if self.remediator.policy().mode != Mode::Apply {
            return Err((
                Outcome::Refused,
                "mode",
                "remediation.mode is no longer apply".to_string(),
            ));
        }
        if now.saturating_sub(attempt.at) > MAX_PLANNED_AGE_MS {
            return Err((
                Outcome::Conflict,
                "expired",
                "planned more than 15 minutes ago and not sent since: judged again by the next \
                 change instead"
                    .to_string(),
            ));
        }
        let Some(drift) = self
            .engine
            .open_drifts()
            .find(|drift| drift.id == attempt.drift_id)
        else {
            return Err(moved_on(
                "the drift resolved before the request was sent".to_string(),
            ));
        };
        if drift.state != DriftState::Firing {
            return Err(moved_on(format!(
                "the drift is {} again: only a firing drift is remediated",
                drift.state.as_str()
            )));
        }
        let Some(action) = Action::parse(&attempt.action) else {
            return Err((
                Outcome::Failed,
                "no_request",
                format!("unknown action {:?}", attempt.action),
            ));
        };
        // The rules may have changed since the decision (a restart with another section): only
        // the rule that decided, still offering this action, lets it through.
        let allowed = self
            .remediator
            .policy()
            .rule_for(drift)
            .is_some_and(|rule| {
                rule.name == attempt.rule
                    && rule.action == action
                    && (attempt.approved_by.is_some()
                        || rule.approval == drift_core::remediate::Approval::Auto)
            });
        if !allowed {
            return Err((
                Outcome::Refused,
                "no_rule",
                format!(
                    "rule {} no longer asks for this {} (the remediation section changed)",
                    attempt.rule, attempt.action
                ),
            ));
        }
        let graph = self.engine.graph();
        if action == Action::Restore {
            if let Some(object) = graph.by_uid(&drift.cluster, &drift.uid) {
                if drift_core::remediate::live_namesake(graph, object) {
                    return Err(moved_on("the object exists again".to_string()));
                }
            }
        }
        let planned: serde_json::Value = attempt
            .request
            .as_ref()
            .and_then(|request| serde_json::from_str(&request.body).ok())
            .unwrap_or_default();
        self.remediator
            .replan(drift, action, &planned, attempt.judged.as_deref(), graph)
            .map_err(|replan| match replan {
                Replan::Gone => moved_on("the object is no longer tracked".to_string()),
                Replan::Changed(why) => moved_on(why),
                Replan::Refused(refusal) => (Outcome::Refused, refusal.kind(), refusal.to_string()),
            })
    }

    /// Notifications of the round's attempts that ended (new ones with a final outcome, stored
    /// ones settled now), on their drifts' routes, committed with them. An attempt whose drift
    /// is no longer open (it resolved and left the writer's state) is told in its history only.
    pub(super) fn remediation_notifications(
        &mut self,
        round: &Round,
    ) -> Vec<drift_store::NewOutbox> {
        let ended = round
            .batch
            .remediations
            .iter()
            .chain(
                round
                    .batch
                    .settled_remediations
                    .iter()
                    .map(|(_, _, attempt)| attempt),
            )
            .filter(|attempt| !matches!(attempt.outcome, Outcome::Planned | Outcome::Sending));
        let rules = self.engine.rules();
        let mut rows = Vec::new();
        for (index, attempt) in ended.enumerate() {
            let drift = self
                .engine
                .open_drifts()
                .find(|drift| drift.id == attempt.drift_id)
                .or_else(|| {
                    round
                        .transitions
                        .iter()
                        .map(|transition| &transition.drift)
                        .find(|drift| drift.id == attempt.drift_id)
                });
            let Some(drift) = drift else {
                continue;
            };
            // Two attempts on one drift may end in one round (a retried approval): each is its
            // own notification.
            let kind = format!(
                "remediation/{}/{}/{index}",
                attempt.at,
                attempt.outcome.as_str()
            );
            for queued in self.settings.router.route_remediation(
                drift,
                attempt,
                round.now,
                rules,
                &self.silences,
            ) {
                self.metrics
                    .notifications_queued
                    .get_or_create(&crate::metrics::ChannelLabel {
                        channel: queued.channel.clone(),
                    })
                    .inc();
                let not_before = self.pacer.pace(&queued, round.now);
                rows.push(drift_store::NewOutbox {
                    id: drift_core::route::notification_id(
                        &drift.id,
                        &queued.channel,
                        &kind,
                        round.now,
                    ),
                    channel: queued.channel,
                    drift_id: drift.id.clone(),
                    group_key: queued.group_key,
                    notice: queued.notice,
                    created_at: round.now,
                    not_before,
                    repeat_after_ms: None,
                });
            }
        }
        rows
    }

    /// Counts a committed round's attempts whose outcome is final (new ones, and stored ones
    /// that ended now), and wakes the sender when it has new work.
    pub(super) fn count_remediations(&self, round: &Round) {
        let settled = round
            .batch
            .settled_remediations
            .iter()
            .map(|(_, _, attempt)| attempt);
        if round
            .batch
            .remediations
            .iter()
            .any(|attempt| attempt.outcome == Outcome::Planned)
        {
            self.health.remediation_planned.notify_one();
        }
        // Final outcomes only: an `apply` attempt counts once, when it ends.
        let ended = round
            .batch
            .remediations
            .iter()
            .chain(settled)
            .filter(|attempt| !matches!(attempt.outcome, Outcome::Planned | Outcome::Sending));
        for attempt in ended {
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
