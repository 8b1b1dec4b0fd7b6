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
//! times are the group's messages, but for a notice held behind its drift's firing notice, which
//! goes at that time as a message of its own. It is the writer's (the one place that queues
//! notifications) and lives in memory: after a restart, a group's first notification waits only
//! its `groupWait`, as Alertmanager's does after its own.

use std::collections::HashMap;
use std::time::Duration;

use drift_model::{Millis, NoticeKind};

use super::Queued;

/// The fewest entries the pacer keeps before it drops the ones no longer holding anything back.
const PRUNE_FLOOR: usize = 256;

/// A group: its channel endpoint, its route (by index: routes that share an endpoint are paced
/// apart, as Alertmanager's are) and its group key.
type GroupKey = (String, usize, String);
/// A drift on a channel endpoint.
type DriftKey = (String, String);

/// What a round changed, to put back when its commit fails.
#[derive(Debug, Clone)]
enum Undo {
    Group(GroupKey, Option<Entry>),
    Firing(DriftKey, Option<Entry>),
}

/// A time the pacer keeps, with the transition time it was set at: one set at a later time than
/// a notification's was set before the clock stepped back, and holds nothing back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// The group's latest message, or the drift's firing notice.
    time: Millis,
    /// The group's interval after its message (zero for a firing notice).
    interval: Millis,
    /// The transition time it was set at.
    set_at: Millis,
}

/// The next message time of every group that may still hold a notification back.
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    /// By group: the time of its latest message, and the interval after it during which its
    /// next notifications wait.
    groups: HashMap<GroupKey, Entry>,
    /// By drift and endpoint: when the drift's firing notice goes, while that is still to come.
    /// Its escalation, resolve and remediation notices go no earlier: the relay holds a resolve
    /// back until its firing notice went (re-reading held rows was the cost of pacing), and a
    /// remediation or an escalation must not be read before the alert it follows. Such a
    /// notice goes at that time without moving its own group's times.
    firing: HashMap<DriftKey, Entry>,
    /// The changes since the last [`Pacer::commit`].
    journal: Vec<Undo>,
    /// Prune when it holds this many entries (doubles with what survives a prune, so pruning
    /// stays amortized).
    prune_at: usize,
}

impl Pacer {
    /// A pacer that holds nothing back yet.
    pub fn new() -> Pacer {
        Pacer::default()
    }

    /// The time `queued` (a notification of a transition at `at`) goes out: its own due time,
    /// its group's next message time, and no earlier than its drift's firing notice.
    pub fn pace(&mut self, queued: &Queued, at: Millis) -> Millis {
        let due = queued.not_before;
        let interval = millis(queued.group_interval);
        let kind = queued.notice.kind;
        // Only a drift with a firing notice still to come is looked up (no key built otherwise).
        let follows = match kind {
            NoticeKind::Firing | NoticeKind::Resolved | NoticeKind::Remediation
                if !self.firing.is_empty() =>
            {
                self.firing
                    .get(&(queued.channel.clone(), queued.notice.drift.id.clone()))
                    // Kept through a clock step back: the firing row waits for this very
                    // time whatever the clock says, so what follows it waits as long.
                    .filter(|firing| firing.time > at)
                    .map(|firing| firing.time)
            }
            _ => None,
        };
        if due <= at && interval == 0 && follows.is_none() {
            // Due at once, nothing to wait for between messages or before: nothing to remember.
            return due;
        }
        if self.groups.len() + self.firing.len() >= self.prune_at.max(PRUNE_FLOOR) {
            self.prune(at);
        }
        let group: GroupKey = (
            queued.channel.clone(),
            queued.route,
            queued.group_key.clone(),
        );
        let scheduled = match self.groups.get(&group) {
            Some(entry) if entry.set_at > at => due,
            // The group's message is still to go: this one joins it.
            Some(entry) if entry.time > at => entry.time,
            Some(entry) => due.max(entry.time.saturating_add(interval)),
            None => due,
        };
        let held = follows.map_or(scheduled, |firing| scheduled.max(firing));
        if held == scheduled {
            // It goes with its group's message. One held past it goes alone, and the group's
            // times stay as they were for the others.
            let entry = Entry {
                time: scheduled,
                interval,
                set_at: at,
            };
            let previous = self.groups.insert(group.clone(), entry);
            self.journal.push(Undo::Group(group, previous));
        }
        if kind == NoticeKind::Firing && held > at {
            // The latest of the drift's firing notices (an escalation queued meanwhile goes
            // with or after the first).
            let drift: DriftKey = (queued.channel.clone(), queued.notice.drift.id.clone());
            let firing = Entry {
                time: held,
                interval: 0,
                set_at: at,
            };
            let previous = self.firing.insert(drift.clone(), firing);
            self.journal.push(Undo::Firing(drift, previous));
        }
        held
    }

    /// The round whose notifications it paced since the last commit was committed.
    pub fn commit(&mut self) {
        self.journal.clear();
    }

    /// The round whose notifications it paced since the last commit was not committed: its
    /// times are taken back (its notifications, queued again, are paced as if first).
    pub fn rollback(&mut self) {
        while let Some(undo) = self.journal.pop() {
            match undo {
                Undo::Group(key, Some(value)) => {
                    self.groups.insert(key, value);
                }
                Undo::Group(key, None) => {
                    self.groups.remove(&key);
                }
                Undo::Firing(key, Some(value)) => {
                    self.firing.insert(key, value);
                }
                Undo::Firing(key, None) => {
                    self.firing.remove(&key);
                }
            }
        }
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
        self.groups.retain(|_, entry| {
            entry.time.saturating_add(entry.interval) > at && entry.set_at <= at
        });
        self.firing.retain(|_, entry| entry.time > at);
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
            route: 0,
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
        // A drift of its own each time: no notice here follows another's firing notice.
        let mut queued = queued("hook", group, at, wait, interval);
        queued.notice.drift.id = format!("{group}@{at}");
        pacer.pace(&queued, at)
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

    /// Paces a notice of `drift` (group `group`, route `route`, at `at`); its time.
    fn step(
        pacer: &mut Pacer,
        kind: NoticeKind,
        route: usize,
        group: &str,
        drift: &str,
        at: Millis,
    ) -> Millis {
        pacer.pace(&of(kind, route, group, drift, at), at)
    }

    fn of(kind: NoticeKind, route: usize, group: &str, drift: &str, at: Millis) -> Queued {
        let mut queued = queued("hook", group, at, 0, 60_000);
        queued.notice.kind = kind;
        queued.notice.drift.id = drift.to_string();
        queued.route = route;
        queued
    }

    #[test]
    fn a_remediation_or_an_escalation_never_goes_before_its_drifts_firing_notice() {
        let mut pacer = Pacer::new();
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "f", "a", 1_000),
            1_000
        );
        // b's firing waits for the group's interval; its remediation (a group of its own) and
        // its escalation (another group when severity groups) go with it, not before.
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "f", "b", 2_000),
            61_000
        );
        let remediation = of(NoticeKind::Remediation, 0, "m", "b", 3_000);
        assert_eq!(pacer.pace(&remediation, 3_000), 61_000);
        let escalation = of(NoticeKind::Firing, 0, "f-critical", "b", 4_000);
        assert_eq!(pacer.pace(&escalation, 4_000), 61_000);
        // The firing time kept is the latest: a resolve after both still waits for it.
        assert_eq!(
            step(&mut pacer, NoticeKind::Resolved, 0, "r", "b", 5_000),
            61_000
        );
        // A reminder is not held (the relay queues it after the firing notice went).
        assert_eq!(
            step(&mut pacer, NoticeKind::Repeat, 0, "p", "b", 5_000),
            5_000
        );
    }

    #[test]
    fn routes_that_share_an_endpoint_are_paced_apart() {
        let mut pacer = Pacer::new();
        let mut slow = of(NoticeKind::Firing, 1, "g", "a", 0);
        slow.not_before = 30_000;
        assert_eq!(pacer.pace(&slow, 0), 30_000);
        // The same group key by another route with no wait: not held by the slow route's.
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "g", "b", 2_000),
            2_000
        );
    }

    #[test]
    fn a_round_not_committed_leaves_no_time_behind() {
        let mut pacer = Pacer::new();
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "g", "a", 1_000),
            1_000
        );
        pacer.commit();
        // A round paces b into the interval, and its commit fails.
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "g", "b", 2_000),
            61_000
        );
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "h", "c", 2_000),
            2_000
        );
        pacer.rollback();
        // Queued again, b waits as before, and c (its group's first) goes at once again
        // instead of a minute later.
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "h", "c", 2_200),
            2_200
        );
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "g", "b", 2_200),
            61_000
        );
        pacer.rollback();
        assert_eq!(pacer.len(), 1, "only the committed group a is left");
    }

    #[test]
    fn times_set_before_the_clock_stepped_back_hold_nothing() {
        let mut pacer = Pacer::new();
        let hour = 3_600_000;
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "g", "a", hour),
            hour
        );
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "g", "b", hour + 1_000),
            hour + 60_000
        );
        // The clock steps back an hour: the group's times were set after "now" and hold
        // nothing; b's firing row still waits for its own time, and so does b's resolve.
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "g", "c", 5_000),
            5_000
        );
        assert_eq!(
            step(&mut pacer, NoticeKind::Resolved, 0, "r", "b", 6_000),
            hour + 60_000
        );
    }

    #[test]
    fn a_firing_notice_holds_its_drifts_later_notices_whatever_their_route() {
        let mut pacer = Pacer::new();
        // A warning on a slow route (groupWait 5 min); its escalation matches a fast route of
        // the same endpoint, and its remediation and resolve follow: none goes before it.
        let mut warning = of(NoticeKind::Firing, 1, "slow", "a", 0);
        warning.not_before = 300_000;
        assert_eq!(pacer.pace(&warning, 0), 300_000);
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "fast", "a", 60_000),
            300_000
        );
        let remediation = of(NoticeKind::Remediation, 0, "m", "a", 61_000);
        assert_eq!(pacer.pace(&remediation, 61_000), 300_000);
        assert_eq!(
            step(&mut pacer, NoticeKind::Resolved, 0, "r", "a", 62_000),
            300_000
        );
    }

    #[test]
    fn a_held_notice_leaves_its_groups_times_as_they_were() {
        let mut pacer = Pacer::new();
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "f", "a", 1_000),
            1_000
        );
        assert_eq!(
            step(&mut pacer, NoticeKind::Firing, 0, "f", "b", 2_000),
            61_000
        );
        // b's remediation waits for b's firing notice and goes alone; the group's own times
        // are as if it had not come: c's goes at once, d's the interval after c's.
        assert_eq!(
            step(&mut pacer, NoticeKind::Remediation, 0, "m", "b", 3_000),
            61_000
        );
        assert_eq!(
            step(&mut pacer, NoticeKind::Remediation, 0, "m", "c", 3_500),
            3_500
        );
        assert_eq!(
            step(&mut pacer, NoticeKind::Remediation, 0, "m", "d", 5_000),
            63_500
        );
    }
}
