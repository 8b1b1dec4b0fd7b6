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
/// window, which errs towards acting again after at least one restart's time). Objects are
/// keyed by what names them, not by uid: a restored object gets a new uid and must not get a new
/// cooldown with it.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Object → when it was last acted on.
    last: BTreeMap<Key, Millis>,
    /// Every action's time, oldest first.
    recent: VecDeque<Millis>,
    /// Object → its last revert: when, and the fields it put back.
    reverts: BTreeMap<Key, (Millis, Vec<String>)>,
    /// Object → the set-backs counted: when, and by which manager (one per revert at most).
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

fn key(cluster: &str, object: &str) -> Key {
    (cluster.to_string(), object.to_string())
}

impl Ledger {
    /// Counts an action on an object at `now`; `reverted` names the fields a revert put back
    /// (empty for the other actions), which later set-backs are compared with.
    pub fn record(&mut self, cluster: &str, object: &str, reverted: &[String], now: Millis) {
        let key = key(cluster, object);
        self.last.insert(key.clone(), now);
        self.recent.push_back(now);
        if !reverted.is_empty() {
            self.reverts.insert(key, (now, reverted.to_vec()));
        }
    }

    /// Notes that a revert of `fields` on an object was applied at `now`: later set-backs of
    /// those fields count towards a fight.
    pub fn reverted(&mut self, cluster: &str, object: &str, fields: &[String], now: Millis) {
        if !fields.is_empty() {
            self.reverts
                .insert(key(cluster, object), (now, fields.to_vec()));
        }
    }

    /// When the cooldown of an object last acted on ends, if it was acted on.
    pub fn cooldown_until(
        &self,
        cluster: &str,
        object: &str,
        cooldown: Duration,
    ) -> Option<Millis> {
        self.last
            .get(&key(cluster, object))
            .map(|at| at.saturating_add(millis(cooldown)))
    }

    /// True while fewer than `budget.actions` actions fall in the window ending at `now`.
    pub fn within_budget(&self, budget: Budget, now: Millis) -> bool {
        let since = now.saturating_sub(millis(budget.per));
        let in_window = self.recent.iter().filter(|at| **at > since).count();
        in_window < budget.actions as usize
    }

    /// The other manager, when the object is stopped for a fight.
    pub fn fighting(&self, cluster: &str, object: &str) -> Option<&str> {
        self.stopped.get(&key(cluster, object)).map(String::as_str)
    }

    /// Notes that `manager` set fields of an object back at `now` (`fields`: the paths its edit
    /// changed). Counts only when a revert of the object within `fight.within` put back one of
    /// those fields, and once per revert (the edit coming back after each revert); returns the
    /// fight when this is the `fight.times`-th such set-back by the same manager within the
    /// window (the object is stopped from then on).
    pub fn set_back(
        &mut self,
        cluster: &str,
        object: &str,
        manager: &str,
        fields: &[String],
        fight: Fight,
        now: Millis,
    ) -> Option<FightStarted> {
        let key = key(cluster, object);
        let since = now.saturating_sub(millis(fight.within));
        let (reverted_at, reverted) = self.reverts.get(&key)?;
        let same_fields = fields.iter().any(|field| reverted.contains(field));
        if *reverted_at <= since || !same_fields || self.stopped.contains_key(&key) {
            return None;
        }
        let reverted_at = *reverted_at;
        let seen = self.set_backs.entry(key.clone()).or_default();
        // One set-back per revert: a second edit before the next revert is the same fight round.
        // Strictly after: the remediator counts a round's set-back before it decides that
        // round's revert, so both may carry the same time.
        if seen.last().is_some_and(|(at, _)| *at > reverted_at) {
            return None;
        }
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

    /// Stops an object for a fight with `manager` (a fight found before a restart).
    pub fn stop(&mut self, cluster: &str, object: &str, manager: &str) {
        self.stopped
            .insert(key(cluster, object), manager.to_string());
    }

    /// Lets an object be acted on again (its fight finding resolved, or it was deleted).
    pub fn release(&mut self, cluster: &str, object: &str) {
        let key = key(cluster, object);
        self.stopped.remove(&key);
        self.set_backs.remove(&key);
        self.reverts.remove(&key);
    }

    /// Forgets what no rail reads any more: actions and set-backs older than `keep` (the longest
    /// of the budget's window, the fight window and every rule's cooldown). Stopped objects stay
    /// stopped until released.
    pub fn prune(&mut self, keep: Duration, now: Millis) {
        let since = now.saturating_sub(millis(keep));
        self.last.retain(|_, at| *at > since);
        self.reverts.retain(|_, (at, _)| *at > since);
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
        self.last.len() + self.reverts.len() + self.set_backs.len() + self.stopped.len()
    }

    /// True when it remembers nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
