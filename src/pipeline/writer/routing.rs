//! The writer's routing: a round's transitions (and its ended remediations) to the outbox rows
//! committed with them, each due when the pacer says its group's message goes.

use std::sync::Arc;

use drift_core::route::{notification_id, Silences};
use drift_model::{DriftState, Millis, Transition};
use drift_store::NewOutbox;

use super::{Round, Writer};

impl Writer {
    /// Routes the round's transitions to outbox rows (committed with them), and withdraws the
    /// reminders of drifts that resolved (but those on their way in a message).
    pub(super) fn route(&mut self, round: &mut Round) {
        // The transitions first: a remediation that ended in the round its drift fired is
        // paced after that drift's firing notice.
        let mut outbox = self.queue_notifications(&round.transitions);
        outbox.extend(self.remediation_notifications(round));
        let batch = &mut round.batch;
        batch.outbox = outbox;
        batch.resolved_reminders.extend(
            round
                .transitions
                .iter()
                // Only a drift that fired has reminders.
                .filter(|transition| {
                    transition.drift.state == DriftState::Resolved
                        && transition.drift.fired_at.is_some()
                })
                .map(|transition| transition.drift.id.clone()),
        );
    }

    /// Routes transitions to outbox rows (written in the same transaction as the transitions).
    fn queue_notifications(&mut self, transitions: &[Transition]) -> Vec<NewOutbox> {
        let rules = Arc::clone(self.engine.rules());
        outbox_rows(
            &self.settings.router,
            &rules,
            &self.silences,
            &mut self.pacer,
            transitions,
            |channel| {
                self.metrics
                    .notifications_queued
                    .get_or_create(&crate::metrics::ChannelLabel {
                        channel: channel.to_string(),
                    })
                    .inc();
            },
        )
    }
}

/// The relays' longest wait between their own looks at the outbox, in milliseconds.
pub(super) fn relay_poll_ms() -> Millis {
    Millis::try_from(crate::deliver::relay::POLL.as_millis()).unwrap_or(Millis::MAX)
}

/// The router's notifications for `transitions`, as the outbox rows the writer commits with them
/// (stable ids, so a re-committed round queues nothing twice), each due when `pacer` says its
/// group's message goes; a drift with two firing moves in the batch (fired, then escalated) is
/// routed once, as the last one left it; `queued` is told each row's channel (the writer counts
/// them). Public for the benchmark of this stage
/// (`benches/pipeline`), which must measure the writer's own code.
pub fn outbox_rows(
    router: &drift_core::route::Router,
    rules: &drift_core::classify::Rules,
    silences: &Silences,
    pacer: &mut drift_core::route::Pacer,
    transitions: &[Transition],
    mut queued: impl FnMut(&str),
) -> Vec<NewOutbox> {
    let mut rows = Vec::new();
    // A drift that fires and escalates in one round (a timer and a re-judge in the same tick,
    // or two events of one object) is told once, as it ended the round: both notices had the
    // same id, and the escalation's row was the one dropped.
    let last_firing: std::collections::HashMap<&str, usize> =
        if transitions.iter().any(Transition::is_escalation) {
            transitions
                .iter()
                .enumerate()
                .filter(|(_, transition)| transition.drift.state == DriftState::Firing)
                .map(|(index, transition)| (transition.drift.id.as_str(), index))
                .collect()
        } else {
            std::collections::HashMap::new()
        };
    for (index, transition) in transitions.iter().enumerate() {
        if transition.drift.state == DriftState::Firing
            && last_firing
                .get(transition.drift.id.as_str())
                .is_some_and(|&last| last > index)
        {
            continue;
        }
        for notification in router.route(transition, rules, silences, transition.at) {
            queued(&notification.channel);
            let not_before = pacer.pace(&notification, transition.at);
            rows.push(NewOutbox {
                id: notification_id(
                    &transition.drift.id,
                    &notification.channel,
                    notification.notice.kind.as_str(),
                    transition.at,
                ),
                channel: notification.channel,
                drift_id: transition.drift.id.clone(),
                group_key: notification.group_key,
                notice: notification.notice,
                created_at: transition.at,
                not_before,
                repeat_after_ms: notification
                    .repeat_after
                    .map(|interval| i64::try_from(interval.as_millis()).unwrap_or(i64::MAX)),
            });
        }
    }
    rows
}
