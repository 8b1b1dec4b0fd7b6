//! The engine: applies events to the object graph, runs the classes and settles their verdicts
//! into drift episodes (see the module docs of `classify` for the lifecycle).
//!
//! This file holds the engine's state, its start from the store, rules reloads and what others
//! read of it; the rest is split by what it does: `objects.rs` applies events and listed
//! objects, `assess.rs` runs the classes, `settle.rs` settles their verdicts into drift
//! episodes, `recording.rs` journals a round's changes and records drifts, `timers.rs` is the
//! clock-driven work of [`Engine::tick`], `pipeline_watch.rs` the own event path,
//! `rule_errors.rs` the invariants that failed to evaluate, `traffic.rs` the observations of
//! served traffic, and `fleet.rs` the thin calls into the fleet evaluator (`classify::fleet`),
//! which judges fleet drifts beside the engine.

use std::collections::HashMap;
use std::sync::Arc;

mod assess;
mod fleet;
mod judge_again;
mod objects;
mod pipeline_watch;
mod recording;
mod rule_errors;
mod settle;
#[cfg(test)]
mod timer_reference;
mod timers;
mod traffic;

pub(super) use rule_errors::RuleFailure;

use super::journal::Journal;
pub use super::ordering::ListContext;
use super::ordering::{accepts, sent_after, Frontiers};
use super::{
    classes, resource_version, Capacity, Changes, Graph, ObjectState, Outcome, Rules, Staged,
    Sweep, RECHECK_PER_TICK, RECORD_PENDING_AFTER_MS, TOMBSTONE_RETENTION_MS,
    TOMBSTONE_SWEEP_STEP_MS,
};
use crate::decode::{Action, ApiServerEvent, Mode};
use drift_model::{Drift, DriftSlot, DriftState, Millis, ObjectKey, Transition};

/// Most (cluster, uid) conflicts remembered for resync to settle.
const MAX_CONFLICTED: usize = 10_000;

/// The drift engine.
pub struct Engine {
    sequence: (Millis, usize),
    rules: Arc<Rules>,
    graph: Graph,
    drifts: HashMap<DriftSlot, Drift>,
    /// The slots of `drifts` whose drift is pending, each with the time it is filed under in
    /// `deadlines` (`None`: not filed, it will neither fire nor be recorded).
    pending: HashMap<DriftSlot, Option<Millis>>,
    /// The pending drifts by the time the timers next have work on them (fire, or be
    /// recorded), earliest first; every change of a pending drift, of what is recorded or of
    /// the rules files it again (`note_pending`, `rebuild_pending`). The timers take out only
    /// what is due, so a round's cost does not grow with the drifts pending (a busy
    /// cluster keeps hundreds pending, and one came due every few rounds: scanning all of them
    /// then was 2.7 % of the writer at half the sink's maximum rate).
    deadlines: std::collections::BTreeSet<(Millis, DriftSlot)>,
    /// Ids of the open drifts whose row is in the store (or in the round being committed).
    recorded: std::collections::HashSet<String>,
    /// Restored objects still to re-assess (see the module docs), popped from the end.
    recheck: Vec<ObjectKey>,
    /// How many objects the re-judge under way (after a start or a reload) queued in all.
    recheck_total: usize,
    journal: Journal,
    /// Per cluster, the newest plausible `resourceVersion` seen (events and resync lists).
    frontiers: Frontiers,
    /// (cluster, uid) pairs an event named while the uid was tracked under another cluster name.
    conflicted: std::collections::HashSet<ObjectKey>,
    /// Events applied with an implausible `resourceVersion` (a count for metrics).
    implausible: u64,
    /// How much state may be kept.
    capacity: Capacity,
    /// New objects not tracked for lack of capacity (a count for metrics).
    refused: u64,
    /// The own event path: parts' readiness and the source's blindness.
    pipeline_watch: pipeline_watch::PipelineWatch,
    /// Rules that failed to evaluate: counts, and what is still to be logged.
    rule_errors: rule_errors::RuleErrors,
    /// Objects remediation stopped acting on for a fight, with the other field manager
    /// (`remediation_fight`; set by the service's remediator, see [`Engine::set_fight`]).
    fights: HashMap<ObjectKey, String>,
    /// The latest observation of served traffic per Route (`traffic.rs`; not journaled).
    traffic: super::traffic::TrafficBook,
    /// When classes that judge by the clock judge an object again with no event.
    agenda: judge_again::Agenda,
    /// The field managers' names every state's stamps share (`names::Names`).
    names: super::state::Names,
    /// The cutoff of the last tick's tombstone expiry: the tombstones last seen before it that
    /// are still kept are held by a drift (`classes::keeps_tombstone`), and
    /// [`Engine::next_deadline`] looks past them. `Millis::MIN` (every tombstone counts again)
    /// after a holding drift resolves and at a start; a rollback puts back its value at
    /// [`Engine::begin`] (`swept_at_begin`), as the journal puts back the tombstones.
    tombstones_swept: Millis,
    swept_at_begin: Millis,
}

impl Engine {
    /// A new engine with no state.
    pub fn new(rules: Arc<Rules>) -> Engine {
        Engine {
            sequence: (Millis::MIN, 0),
            rules,
            graph: Graph::default(),
            drifts: HashMap::new(),
            pending: HashMap::new(),
            deadlines: std::collections::BTreeSet::new(),
            recorded: std::collections::HashSet::new(),
            recheck: Vec::new(),
            recheck_total: 0,
            journal: Journal::default(),
            frontiers: Frontiers::default(),
            conflicted: std::collections::HashSet::new(),
            implausible: 0,
            capacity: Capacity::default(),
            refused: 0,
            pipeline_watch: pipeline_watch::PipelineWatch::default(),
            rule_errors: rule_errors::RuleErrors::default(),
            fights: HashMap::new(),
            traffic: super::traffic::TrafficBook::default(),
            agenda: judge_again::Agenda::default(),
            names: super::state::Names::default(),
            tombstones_swept: Millis::MIN,
            swept_at_begin: Millis::MIN,
        }
    }

    /// Restores committed state (objects and open drifts) after a restart.
    /// Live objects are queued for re-assessment by [`Engine::tick`]: a pending episode that
    /// was not recorded before the restart opens again if its condition still holds.
    pub fn restore(&mut self, objects: Vec<ObjectState>, drifts: Vec<Drift>) {
        // Restored tombstones may be past their retention already (the service was down).
        self.tombstones_swept = Millis::MIN;
        for object in objects {
            if !object.deleted {
                self.recheck.push(object.key());
            }
            if object.confirmed_resource_version.is_none() {
                let (cluster, version) = (object.cluster.clone(), object.resource_version.clone());
                self.frontiers.advance(&cluster, &version, object.last_seen);
            }
            // Restored stamps share the engine's names like those built from events.
            let mut object = object;
            for stamp in &mut object.managers {
                stamp.manager = self.names.get(&stamp.manager);
                stamp.operation = self.names.get(&stamp.operation);
                stamp.subresource = self.names.get(&stamp.subresource);
            }
            let key = object.key();
            self.graph.insert(object);
            self.note_pipeline_part(&key);
        }
        // Popped from the end: reversed so objects are re-assessed in key order.
        self.recheck.sort_by(|a, b| b.cmp(a));
        self.recheck_total = self.recheck.len();
        for drift in drifts {
            if drift.state != DriftState::Resolved && drift.class == classes::REMEDIATION_FIGHT {
                // A fight outlives a restart: the finding stays until its object is released.
                if let Some(manager) = drift.evidence.facts.get(classes::FIGHT_MANAGER_FACT) {
                    self.fights.insert(
                        ObjectKey {
                            cluster: drift.cluster.clone(),
                            uid: drift.uid.clone(),
                        },
                        manager.clone(),
                    );
                }
            }
            if drift.state != DriftState::Resolved {
                self.recorded.insert(drift.id.clone());
                self.drifts.insert(drift.slot(), drift);
            }
        }
        self.rebuild_pending();
    }

    /// Keeps `pending` and `deadlines` in step with the drift in `slot`.
    fn note_pending(&mut self, slot: &DriftSlot) {
        let deadline = match self.drifts.get(slot) {
            Some(drift) if drift.state == DriftState::Pending => Some(self.pending_deadline(drift)),
            _ => None,
        };
        // An update of a drift already pending replaces its time in place: no slot copied.
        let filed = match (deadline, self.pending.get_mut(slot)) {
            (Some(deadline), Some(filed)) => Some(std::mem::replace(filed, deadline)),
            (Some(deadline), None) => self.pending.insert(slot.clone(), deadline),
            (None, _) => self.pending.remove(slot),
        };
        if filed.flatten() == deadline.flatten() {
            return;
        }
        if let Some(at) = filed.flatten() {
            self.deadlines.remove(&(at, slot.clone()));
        }
        if let Some(at) = deadline.flatten() {
            self.deadlines.insert((at, slot.clone()));
        }
    }

    /// `pending` and `deadlines` from `drifts` (after a restore, a rollback or a rules change).
    fn rebuild_pending(&mut self) {
        self.pending.clear();
        self.deadlines.clear();
        let pending: Vec<(DriftSlot, Option<Millis>)> = (self.drifts.iter())
            .filter(|(_, drift)| drift.state == DriftState::Pending)
            .map(|(slot, drift)| (slot.clone(), self.pending_deadline(drift)))
            .collect();
        for (slot, deadline) in pending {
            if let Some(at) = deadline {
                self.deadlines.insert((at, slot.clone()));
            }
            self.pending.insert(slot, deadline);
        }
    }

    /// The pending drifts, in no order.
    fn pending_drifts(&self) -> impl Iterator<Item = (&DriftSlot, &Drift)> {
        // The tests check the index against the map it stands for, at every use.
        debug_assert!(self.pending_index_holds());
        self.pending
            .keys()
            .filter_map(|slot| self.drifts.get_key_value(slot))
    }

    /// Whether `pending` holds exactly the pending drifts, and `deadlines` each one's filed
    /// time: the time the timers next have work on it.
    fn pending_index_holds(&self) -> bool {
        let pending = (self.drifts.values())
            .filter(|drift| drift.state == DriftState::Pending)
            .count();
        let filed_exactly = self.pending.iter().all(|(slot, filed)| {
            self.drifts.get(slot).is_some_and(|drift| {
                drift.state == DriftState::Pending && *filed == self.pending_deadline(drift)
            })
        });
        let entries_filed =
            (self.deadlines.iter()).all(|(at, slot)| self.pending.get(slot) == Some(&Some(*at)));
        let filed = self
            .pending
            .values()
            .filter(|filed| filed.is_some())
            .count();
        pending == self.pending.len()
            && filed_exactly
            && entries_filed
            && filed == self.deadlines.len()
    }

    /// Replaces the rules (hot reload). Open drifts keep their state; every live object is
    /// queued for re-assessment ([`Engine::tick`]), so a condition that a class just enabled or
    /// a scope just widened can see opens without waiting for the object's next change.
    pub fn set_rules(&mut self, rules: Arc<Rules>) {
        self.rules = rules;
        // A class switched on or off moves its pending drifts' fire times.
        self.rebuild_pending();
        self.recheck = self
            .graph
            .iter()
            .filter(|object| !object.deleted)
            .map(ObjectState::key)
            .collect();
        self.recheck.sort_by(|a, b| b.cmp(a));
        self.recheck_total = self.recheck.len();
    }

    /// The re-judge of the live objects under way after a start or a reload ([`Engine::tick`]
    /// does it a slice at a time): how many objects are judged again, out of how many; `None`
    /// once it is done.
    pub fn rejudge_progress(&self) -> Option<(usize, usize)> {
        if self.recheck.is_empty() {
            return None;
        }
        let total = self.recheck_total.max(self.recheck.len());
        Some((total - self.recheck.len(), total))
    }

    /// Resolves open drifts of classes the rules no longer enable, and of invariants the rules
    /// no longer have (after a hot reload), so a disabled class or a removed rule leaves nothing
    /// firing forever.
    pub fn retire_disabled(&mut self, now: Millis) {
        let mut disabled: Vec<(DriftSlot, &'static str)> = self
            .drifts
            .keys()
            .filter_map(|slot| {
                if !self.rules.class(&slot.class).enabled {
                    return Some((slot.clone(), "class disabled in the rules"));
                }
                if slot.class == classes::TRAFFIC_SHARE_DRIFT && !self.traffic_observed() {
                    return Some((slot.clone(), "served traffic not observed"));
                }
                let rule = slot.rule.as_deref()?;
                if classes::about_a_group(&slot.class) {
                    // Judged again below, over the members the new rules name.
                    return None;
                }
                match self.rules.invariant(rule) {
                    None => Some((slot.clone(), "rule removed from the rules")),
                    // A reload can narrow what a rule selects (its kinds, namespaces, clusters).
                    Some(rule) => {
                        let key = ObjectKey {
                            cluster: slot.cluster.clone(),
                            uid: slot.uid.clone(),
                        };
                        let selected = self
                            .graph
                            .get(&key)
                            .is_some_and(|object| rule.selects(object));
                        (!selected).then(|| (slot.clone(), "the rule no longer selects the object"))
                    }
                }
            })
            .collect();
        disabled.sort();
        for (slot, reason) in disabled {
            self.clear(&slot, reason, now);
        }
        self.rejudge_fleet(now);
        self.rule_errors.forget_removed(&self.rules);
    }

    /// How often each invariant failed to evaluate since the last call, by rule and kind
    /// (`evaluation`, `budget`).
    pub fn take_invariant_errors(
        &mut self,
    ) -> std::collections::BTreeMap<(String, &'static str), u64> {
        self.rule_errors.take_counts()
    }

    /// Invariant failures not yet reported (each (object, rule) once until it evaluates again).
    pub fn take_invariant_failures(&mut self) -> Vec<RuleFailure> {
        self.rule_errors.take_reports()
    }

    /// Marks an object as stopped for a remediation fight with `manager` (or releases it with
    /// `None`) and judges it again at once, so its `remediation_fight` drift opens (or resolves)
    /// in this round. Not journaled: the caller puts back [`Engine::fights`] when the round is
    /// rolled back.
    pub fn set_fight(&mut self, key: &ObjectKey, manager: Option<String>, now: Millis) {
        match manager {
            Some(manager) => self.fights.insert(key.clone(), manager),
            None => self.fights.remove(key),
        };
        self.reevaluate(key, now);
    }

    /// The objects stopped for a fight, with the other manager.
    pub fn fights(&self) -> &HashMap<ObjectKey, String> {
        &self.fights
    }

    /// Puts back the fights of a rolled-back round.
    pub fn restore_fights(&mut self, fights: HashMap<ObjectKey, String>) {
        self.fights = fights;
    }

    /// The rules in force.
    pub fn rules(&self) -> &Arc<Rules> {
        &self.rules
    }

    /// The object graph (read-only).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Open (pending or firing) drifts.
    pub fn open_drifts(&self) -> impl Iterator<Item = &Drift> {
        self.drifts.values()
    }

    /// The open drift in `slot`, if any.
    pub fn open_drift(&self, slot: &DriftSlot) -> Option<&Drift> {
        self.drifts.get(slot)
    }

    /// Number of tracked objects, tombstones included.
    pub fn object_count(&self) -> usize {
        self.graph.len()
    }
}
