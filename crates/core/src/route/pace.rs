//! Pace: when a group's next message may go out, as Alertmanager paces a group (`group_wait`
//! for its first message, `group_interval` between its messages). Pure: time comes in.
//!
//! Each notification is due at its transition time plus its route's `groupWait`. The pacer
//! moves that time so a group's notifications go out together:
//! - one that comes while its group's next message is still waiting joins that message (the
//!   wait gathers the group, as `groupWait`'s doc says);
//! - one that comes after that message's time waits until `groupInterval` has passed since it,
//!   and the ones after it join it.
//!
//! The relay sends the rows of one group that are due together as one message, so the pacer's
//! times are the group's messages. It is the writer's (the one place that queues
//! notifications) and lives in memory: after a restart, a group's first notification waits only
//! its `groupWait`, as Alertmanager's does after its own.

use std::collections::HashMap;
use std::time::Duration;

use drift_model::{Millis, NoticeKind};

use super::Queued;

/// The fewest groups the pacer keeps before it drops the ones no longer holding anything back.
const PRUNE_FLOOR: usize = 256;

/// The next message time of every group that may still hold a notification back.
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    /// By channel endpoint and group key: the time of the group's latest message, and the
    /// interval after it during which the group's next notifications wait.
    groups: HashMap<(String, String), (Millis, Millis)>,
    /// By channel endpoint and drift id: when the drift's latest firing notice goes, while that
    /// is still to come. A resolve is never due before it: the relay holds a resolve back until
    /// its firing notice went, and re-reading held rows on every commit was the cost of pacing.
    firing: HashMap<(String, String), Millis>,
    /// Prune when the map reaches this size (doubles with what survives a prune, so pruning
    /// stays amortized).
    prune_at: usize,
}

impl Pacer {
    /// A pacer that holds nothing back yet.
    pub fn new() -> Pacer {
        Pacer::default()
    }

    /// The time `queued` (a notification of a transition at `at`) goes out: its own due time,
    /// or its group's next message time.
    pub fn pace(&mut self, queued: &Queued, at: Millis) -> Millis {
        let due = queued.not_before;
        let interval = millis(queued.group_interval);
        if due <= at && interval == 0 {
            // Due at once and nothing to wait for between messages: no group to remember.
            return due;
        }
        if self.len() >= self.prune_at.max(PRUNE_FLOOR) {
            self.prune(at);
        }
        let key = (queued.channel.clone(), queued.group_key.clone());
        let mut scheduled = match self.groups.get(&key) {
            // The group's message is still to go: this one joins it.
            Some(&(next, _)) if next > at => next,
            Some(&(last, _)) => due.max(last.saturating_add(interval)),
            None => due,
        };
        let drift = || (queued.channel.clone(), queued.notice.drift.id.clone());
        match queued.notice.kind {
            NoticeKind::Firing if scheduled > at => {
                self.firing.insert(drift(), scheduled);
            }
            NoticeKind::Resolved => {
                if let Some(&firing) = self.firing.get(&drift()) {
                    // Its firing notice is still to go: the resolve (and the rest of its
                    // group's message) goes with or after it, not held in between.
                    scheduled = scheduled.max(firing);
                }
            }
            _ => {}
        }
        self.groups.insert(key, (scheduled, interval));
        scheduled
    }

    /// How many groups and drifts it remembers (for tests and the memory bound).
    pub fn len(&self) -> usize {
        self.groups.len() + self.firing.len()
    }

    /// Whether it remembers nothing.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.firing.is_empty()
    }

    /// Forgets the groups whose interval ended by `at` (a notification of theirs would be due
    /// at its own time anyway) and the firing notices due by then.
    fn prune(&mut self, at: Millis) {
        self.groups
            .retain(|_, &mut (last, interval)| last.saturating_add(interval) > at);
        self.firing.retain(|_, &mut next| next > at);
        self.prune_at = (self.len() * 2).max(PRUNE_FLOOR);
    }
}

fn millis(duration: Duration) -> Millis {
    Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::{Notice, Severity};

    fn queued(channel: &str, group: &str, at: Millis, wait: Millis, interval: u64) -> Queued {
        Queued {
            channel: channel.into(),
            group_key: group.into(),
            not_before: at + wait,
            group_interval: Duration::from_millis(interval),
            repeat_after: None,
            notice: Notice {
                kind: NoticeKind::Firing,
                drift: super::super::tests::drift("manual_edit", Severity::Warning, "shop"),
                at,
                resend: 0,
                remediation: None,
            },
        }
    }

    fn pace(pacer: &mut Pacer, group: &str, at: Millis, wait: Millis, interval: u64) -> Millis {
        pacer.pace(&queued("hook", group, at, wait, interval), at)
    }

    #[test]
    fn a_notification_during_its_groups_wait_joins_the_groups_message() {
        let mut pacer = Pacer::new();
        assert_eq!(pace(&mut pacer, "g", 1_000, 10_000, 0), 11_000);
        // Its own wait would end at 14 s; the group's message goes at 11 s and takes it.
        assert_eq!(pace(&mut pacer, "g", 4_000, 10_000, 0), 11_000);
        // After the message, without an interval, the next one waits only its own wait.
        assert_eq!(pace(&mut pacer, "g", 12_000, 10_000, 0), 22_000);
        // Another group is not held by this one.
        assert_eq!(pace(&mut pacer, "other", 4_000, 10_000, 0), 14_000);
    }

    #[test]
    fn after_a_message_the_group_waits_its_interval_and_then_goes_as_one() {
        let mut pacer = Pacer::new();
        // First of the group: at once (groupWait 0s).
        assert_eq!(pace(&mut pacer, "g", 1_000, 0, 60_000), 1_000);
        // The next ones wait for the interval after that message, together.
        assert_eq!(pace(&mut pacer, "g", 2_000, 0, 60_000), 61_000);
        assert_eq!(pace(&mut pacer, "g", 30_000, 0, 60_000), 61_000);
        // After that message, the interval runs from it.
        assert_eq!(pace(&mut pacer, "g", 61_500, 0, 60_000), 121_000);
        // A quiet group's next notification goes at its own time.
        assert_eq!(pace(&mut pacer, "g", 500_000, 0, 60_000), 500_000);
        // Each endpoint is paced on its own.
        assert_eq!(
            pacer.pace(&queued("other-hook", "g", 2_000, 0, 60_000), 2_000),
            2_000
        );
    }

    #[test]
    fn without_wait_or_interval_nothing_is_moved_or_remembered() {
        let mut pacer = Pacer::new();
        for at in [1_000, 1_000, 1_001, 5_000] {
            assert_eq!(pace(&mut pacer, "g", at, 0, 0), at);
        }
        assert!(pacer.is_empty());
    }

    #[test]
    fn groups_whose_interval_ended_are_forgotten() {
        let mut pacer = Pacer::new();
        for group in 0..PRUNE_FLOOR {
            pace(&mut pacer, &format!("g{group}"), 1_000, 0, 60_000);
        }
        assert_eq!(pacer.len(), PRUNE_FLOOR);
        // A minute later every one of them is free again: the next notification prunes them.
        assert_eq!(pace(&mut pacer, "late", 61_000, 0, 60_000), 61_000);
        assert_eq!(pacer.len(), 1);
        // A group still in its interval is kept through a prune.
        let mut pacer = Pacer::new();
        pace(&mut pacer, "held", 50_000, 0, 60_000);
        for group in 1..PRUNE_FLOOR {
            pace(&mut pacer, &format!("g{group}"), 1_000, 0, 1_000);
        }
        assert_eq!(pace(&mut pacer, "late", 61_000, 0, 60_000), 61_000);
        assert_eq!(pacer.len(), 2, "the held group and the new one");
        assert_eq!(pace(&mut pacer, "held", 61_000, 0, 60_000), 110_000);
    }

    #[test]
    fn a_resolve_never_goes_before_its_drifts_firing_notice() {
        let mut pacer = Pacer::new();
        let notice = |kind: NoticeKind, group: &str, name: &str, at: Millis| {
            let mut queued = queued("hook", group, at, 0, 60_000);
            queued.notice.kind = kind;
            queued.notice.drift.id = name.to_string();
            queued
        };
        // Two firing messages of the group: the second waits for the interval (61 s).
        assert_eq!(
            pacer.pace(&notice(NoticeKind::Firing, "f", "a", 1_000), 1_000),
            1_000
        );
        assert_eq!(
            pacer.pace(&notice(NoticeKind::Firing, "f", "b", 2_000), 2_000),
            61_000
        );
        // `b` resolves at 5 s: its resolve waits for its firing notice; `a`'s does not.
        assert_eq!(
            pacer.pace(&notice(NoticeKind::Resolved, "r", "b", 5_000), 5_000),
            61_000
        );
        assert_eq!(
            pacer.pace(&notice(NoticeKind::Resolved, "r2", "a", 5_000), 5_000),
            5_000
        );
        // Once the firing notice's time is past, nothing holds a later resolve of `b`.
        assert_eq!(
            pacer.pace(&notice(NoticeKind::Resolved, "r3", "b", 70_000), 70_000),
            70_000
        );
    }
}
