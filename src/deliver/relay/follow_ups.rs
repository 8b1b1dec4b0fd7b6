//! What a delivered message queues after it: a firing notice's reminder, a reminder's next one,
//! an Alertmanager resolve's repeats. A drift escalated in the message keeps only the
//! escalation's reminders (see [`follow_ups`]).

use std::collections::HashSet;

use drift_core::route::notification_id;
use drift_model::{Millis, Notice, NoticeKind};
use drift_store::{FollowUp, NewOutbox, OutboxRow};

/// How many times an Alertmanager resolve is repeated after its first delivery.
pub(super) const RESOLVE_RESENDS: u32 = 3;

/// The follow-ups of a delivered `batch`, due from `now`; `resend` is the channel's own resend
/// interval (Alertmanager's `resendInterval`).
pub(super) fn follow_ups(
    batch: &[OutboxRow],
    resend: Option<Millis>,
    now: Millis,
) -> Vec<FollowUp> {
    // A drift escalated in this message: the send withdrew its queued reminders (at the old
    // severity), and a reminder of the old severity in the same message must not start them
    // again; the escalation's own follow-up carries on, at the new severity, alone.
    let escalated: HashSet<(&str, &str)> = batch
        .iter()
        .filter(|row| row.queued.notice.is_escalation())
        .map(|row| (row.queued.drift_id.as_str(), row.queued.channel.as_str()))
        .collect();
    let mut follow_ups = Vec::new();
    for row in batch {
        let notice = &row.queued.notice;
        let next = match notice.kind {
            NoticeKind::Repeat
                if escalated
                    .contains(&(row.queued.drift_id.as_str(), row.queued.channel.as_str())) =>
            {
                None
            }
            NoticeKind::Firing | NoticeKind::Repeat => {
                let repeat = row.queued.repeat_after_ms;
                let interval = match (repeat, resend) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                interval.map(|interval| (NoticeKind::Repeat, interval, 0))
            }
            NoticeKind::Resolved => match resend {
                Some(interval) if notice.resend < RESOLVE_RESENDS => {
                    Some((NoticeKind::Resolved, interval, notice.resend + 1))
                }
                _ => None,
            },
            // An attempt is told once.
            NoticeKind::Remediation => None,
        };
        let Some((kind, interval, resend_count)) = next else {
            continue;
        };
        let due = now + interval.max(1);
        let follow = Notice {
            kind,
            drift: notice.drift.clone(),
            at: notice.at,
            resend: resend_count,
            remediation: None,
        };
        follow_ups.push(FollowUp {
            of: row.queued.id.clone(),
            queued: NewOutbox {
                id: notification_id(
                    &row.queued.drift_id,
                    &row.queued.channel,
                    kind.as_str(),
                    due,
                ),
                channel: row.queued.channel.clone(),
                drift_id: row.queued.drift_id.clone(),
                group_key: row.queued.group_key.clone(),
                notice: follow,
                created_at: due,
                not_before: due,
                repeat_after_ms: row.queued.repeat_after_ms,
            },
        });
    }
    follow_ups
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::Severity;
    use drift_store::OutboxState;

    const HOUR: Millis = 3_600_000;

    fn row(id: &str, notice: Notice, repeat_after_ms: Millis) -> OutboxRow {
        let at = notice.at;
        let queued = NewOutbox {
            id: id.into(),
            channel: "hook".into(),
            drift_id: notice.drift.id.clone(),
            group_key: "g".into(),
            created_at: at,
            notice,
            not_before: at,
            repeat_after_ms: Some(repeat_after_ms),
        };
        OutboxRow {
            queued,
            attempts: 0,
            next_attempt_at: at,
            state: OutboxState::Pending,
            last_error: None,
            finished_at: None,
            message_id: None,
            claimed_by: None,
        }
    }

    /// The warning's due reminder, sent in one message with the escalation: only the
    /// escalation queues a reminder (at its severity and interval), whatever their order.
    #[test]
    fn an_escalation_in_the_batch_ends_the_old_reminders_chain() {
        let mut reminder = crate::deliver::render::tests::notice();
        reminder.kind = NoticeKind::Repeat;
        reminder.drift.severity = Severity::Warning;
        reminder.at = HOUR;
        let mut escalation = reminder.clone();
        escalation.kind = NoticeKind::Firing;
        escalation.drift.severity = Severity::Critical;
        escalation.at = HOUR + 1_000;
        assert!(escalation.is_escalation());
        let batch = [
            row("reminder", reminder.clone(), HOUR),
            row("escalation", escalation, HOUR / 2),
        ];
        let queued = follow_ups(&batch, None, 2 * HOUR);
        let kept: Vec<(&str, NoticeKind, Severity, Millis)> = queued
            .iter()
            .map(|follow| {
                (
                    follow.of.as_str(),
                    follow.queued.kind(),
                    follow.queued.notice.drift.severity,
                    follow.queued.not_before,
                )
            })
            .collect();
        assert_eq!(
            kept,
            [(
                "escalation",
                NoticeKind::Repeat,
                Severity::Critical,
                2 * HOUR + HOUR / 2
            )]
        );
        // With no escalation, a reminder queues the next one.
        let alone = follow_ups(&[row("reminder", reminder, HOUR)], None, 2 * HOUR);
        assert_eq!(alone.len(), 1);
        assert_eq!(alone[0].queued.notice.drift.severity, Severity::Warning);
    }
}
