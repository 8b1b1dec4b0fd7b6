//! What the rails remember: when each object was last acted on (cooldown), the times of recent
//! actions (budget), the set-backs after a revert (fight detection) and the objects stopped for a
//! fight. Bounded: [`Ledger::prune`] forgets what no rail can read any more.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use drift_model::time::millis;
use drift_model::Millis;

use super::{Budget, Fight};

type Key = (String, String);

/// The rails' memory. One per engine; not persisted (a restart forgets cooldowns and the budget's
/// window, which errs towards acting again after at least one restart's time).
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Object → when it was last acted on.
    last: BTreeMap<Key, Millis>,
    /// Every action's time, oldest first.
    recent: VecDeque<Millis>,
    /// Object → the set-backs seen after a revert: when, and by which manager.
    set_backs: BTreeMap<Key, Vec<(Millis, String)>>,
    /// Objects stopped for a fight → the other manager.
    stopped: BTreeMap<Key, String>,
}

/// A fight that has just started: the caller opens a `remediation_fight` finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FightStarted {
    /// The other field manager.
    pub manager: String,
    /// How often it set the fields back within the window.
    pub times: u32,
}

fn key(cluster: &str, uid: &str) -> Key {
    (cluster.to_string(), uid.to_string())
}

impl Ledger {
    /// Counts an action on an object at `now`.
    pub fn record(&mut self, cluster: &str, uid: &str, now: Millis) {
        self.last.insert(key(cluster, uid), now);
        self.recent.push_back(now);
    }

    /// When the cooldown of an object last acted on ends, if it was acted on.
    pub fn cooldown_until(&self, cluster: &str, uid: &str, cooldown: Duration) -> Option<Millis> {
        self.last
            .get(&key(cluster, uid))
            .map(|at| at.saturating_add(millis(cooldown)))
    }

    /// True while fewer than `budget.actions` actions fall in the window ending at `now`.
    pub fn within_budget(&self, budget: Budget, now: Millis) -> bool {
        let since = now.saturating_sub(millis(budget.per));
        let in_window = self.recent.iter().filter(|at| **at > since).count();
        in_window < budget.actions as usize
    }

    /// The other manager, when the object is stopped for a fight.
    pub fn fighting(&self, cluster: &str, uid: &str) -> Option<&str> {
        self.stopped.get(&key(cluster, uid)).map(String::as_str)
    }

    /// Notes that `manager` set an object's fields back at `now`. Counts only when the object
    /// was acted on within `fight.within`; returns the fight when this set-back is the
    /// `fight.times`-th by the same manager within the window (the object is stopped from then
    /// on).
    pub fn set_back(
        &mut self,
        cluster: &str,
        uid: &str,
        manager: &str,
        fight: Fight,
        now: Millis,
    ) -> Option<FightStarted> {
        let key = key(cluster, uid);
        let since = now.saturating_sub(millis(fight.within));
        let acted = self.last.get(&key).is_some_and(|at| *at > since);
        if !acted || self.stopped.contains_key(&key) {
            return None;
        }
        let seen = self.set_backs.entry(key.clone()).or_default();
        seen.retain(|(at, _)| *at > since);
        seen.push((now, manager.to_string()));
        let times = seen.iter().filter(|(_, who)| who == manager).count();
        if times < fight.times as usize {
            return None;
        }
        self.stopped.insert(key, manager.to_string());
        Some(FightStarted {
            manager: manager.to_string(),
            times: u32::try_from(times).unwrap_or(u32::MAX),
        })
    }

    /// Lets an object be acted on again (its fight finding resolved, or it was deleted).
    pub fn release(&mut self, cluster: &str, uid: &str) {
        let key = key(cluster, uid);
        self.stopped.remove(&key);
        self.set_backs.remove(&key);
    }

    /// Forgets what no rail reads any more: actions and set-backs older than `keep` (the longest
    /// of the budget's window, the fight window and every rule's cooldown). Stopped objects stay
    /// stopped until released.
    pub fn prune(&mut self, keep: Duration, now: Millis) {
        let since = now.saturating_sub(millis(keep));
        self.last.retain(|_, at| *at > since);
        while self.recent.front().is_some_and(|at| *at <= since) {
            self.recent.pop_front();
        }
        self.set_backs.retain(|_, seen| {
            seen.retain(|(at, _)| *at > since);
            !seen.is_empty()
        });
    }

    /// How many objects the ledger remembers anything of (for bounds and tests).
    pub fn len(&self) -> usize {
        self.last.len() + self.set_backs.len() + self.stopped.len()
    }

    /// True when it remembers nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
