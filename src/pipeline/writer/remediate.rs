//! The round's remediation step, between the engine's evaluation and routing: the drifts that
//! fired this round go to the remediator (`drift_core::remediate`), and its attempts are
//! committed with the round that fired them, so a drift's history never shows a firing without
//! the attempt a rule made of it (or the reverse). Nothing is sent from here: a `dryRun` attempt
//! is final as recorded, a `planned` one waits for the sender.

use super::{Round, Writer};

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
