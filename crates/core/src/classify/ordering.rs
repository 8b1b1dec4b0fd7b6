//! Which state of an object wins: the ordering of its `resourceVersion`s (see
//! `resource_version.rs` for the rules and why), the per-cluster frontiers that judge whether a
//! version is plausible, and the evidence of an event's send time. Pure: times are passed in.

use std::collections::HashMap;

use super::{resource_version, ObjectState};
use crate::decode::Action;
use drift_model::Millis;

/// What a resync list tells about the objects it lists.
#[derive(Debug, Clone, Copy)]
pub struct ListContext<'a> {
    /// The list's snapshot `resourceVersion` (the API server's own).
    pub version: &'a str,
    /// When the list started (before its first page was requested).
    pub started_at: Millis,
}

/// A cluster's frontier: its newest plausible `resourceVersion`, and when it was seen.
#[derive(Debug, Clone)]
struct Frontier {
    version: String,
    set_at: Millis,
}

/// How much later than the state's own event an event must have been sent to prove the state
/// wrong. Both times come from the source's clock, so this is not clock skew: it covers a source
/// that sends one object's events slightly out of order (a retry inside the adapter).
const SENT_AFTER_MS: Millis = 30_000;

/// How far ahead of its arrival a state's send time is believed. A forged event may claim any
/// time; capped so, it freezes the object for at most this long (a sender that keeps forging
/// keeps it frozen: only authentication stops that). A source whose clock runs further ahead of
/// this process than this (its tokens would fail too) loses the send-time rule's protection
/// against reordering, not the ordering by versions.
const MAX_SENT_AHEAD_MS: Millis = 2 * 60 * 1000;

/// True when an event sent at `sent` (its CloudEvent `time`, which the ApiServerSource adapter
/// sets when it sends) was sent well after the event that made `previous`. The adapter sends one
/// object's events in the order of its watch, and a retried event keeps its time, so a real event
/// older than `previous` was sent before it: an event sent well after it is newer, whatever
/// `previous`'s version says. This is what lets the next real event replace a forged state
/// whose version is beyond anything real (or a forged delete), instead of the object staying
/// frozen. A listed state (no send time) came from the API server and is never overruled so;
/// an event without `time` counts as sent when it arrived.
pub(super) fn sent_after(previous: &ObjectState, sent: Option<Millis>) -> bool {
    let (Some(sent), Some(previous_sent)) = (sent, previous.sent_at) else {
        return false;
    };
    let believed = previous_sent.min(previous.last_seen.saturating_add(MAX_SENT_AHEAD_MS));
    sent > believed.saturating_add(SENT_AFTER_MS)
}

pub(super) fn accepts(
    previous: &ObjectState,
    incoming: &str,
    action: Action,
    list: Option<ListContext>,
) -> bool {
    use std::cmp::Ordering;
    // A state that arrived before a list started and that the list contradicts cannot be real:
    // a tombstone of an object the list still holds (a uid is never re-created), or a version
    // newer than the list's own snapshot. A state that arrived after the list started may be a
    // real change the snapshot predates, and is kept.
    if let Some(list) = list {
        if previous.last_seen < list.started_at {
            if previous.deleted {
                return true;
            }
            if resource_version::compare(&previous.resource_version, list.version)
                == Some(Ordering::Greater)
                && resource_version::compare(incoming, list.version) != Some(Ordering::Greater)
            {
                return true;
            }
        }
    }
    // A uid names one lifetime of an object: nothing follows its delete.
    if previous.deleted {
        return false;
    }
    let base = previous.ordering_version();
    match action {
        // A delete carries the final state and may repeat the last update's version.
        Action::Delete => resource_version::compare(incoming, base) != Some(Ordering::Less),
        Action::Add | Action::Update => resource_version::is_newer(incoming, base),
    }
}

/// Per cluster, the newest plausible `resourceVersion` seen (events and resync lists).
#[derive(Debug, Default)]
pub(super) struct Frontiers {
    by_cluster: HashMap<String, Frontier>,
}

impl Frontiers {
    /// True when `version` is not implausibly far ahead of the versions seen in `cluster` (see
    /// `resource_version::plausible`); a cluster not heard from yet cannot judge.
    pub(super) fn plausible(&self, cluster: &str, version: &str) -> bool {
        self.by_cluster
            .get(cluster)
            .is_none_or(|frontier| resource_version::plausible(version, &frontier.version))
    }

    /// Raises `cluster`'s frontier (the newest plausible version seen) to `version`, seen at
    /// `now`.
    pub(super) fn advance(&mut self, cluster: &str, version: &str, now: Millis) {
        match self.by_cluster.get_mut(cluster) {
            Some(frontier) => {
                if resource_version::compare(version, &frontier.version)
                    == Some(std::cmp::Ordering::Greater)
                {
                    frontier.version = version.to_string();
                    frontier.set_at = now;
                }
            }
            None => {
                if resource_version::compare(version, version).is_some() {
                    self.by_cluster.insert(
                        cluster.to_string(),
                        Frontier {
                            version: version.to_string(),
                            set_at: now,
                        },
                    );
                }
            }
        }
    }

    /// Lowers `cluster`'s frontier to a list's snapshot version when the frontier was set before
    /// the list started and is newer than its snapshot: no real version can be (events walked
    /// it there, each within the jump the plausibility check allows).
    pub(super) fn lower(&mut self, cluster: &str, list: ListContext) {
        if let Some(frontier) = self.by_cluster.get_mut(cluster) {
            if frontier.set_at < list.started_at
                && resource_version::compare(&frontier.version, list.version)
                    == Some(std::cmp::Ordering::Greater)
            {
                frontier.version = list.version.to_string();
                frontier.set_at = list.started_at;
            }
        }
    }
}
