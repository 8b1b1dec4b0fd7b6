//! The engine's side of fleet drifts: thin calls into `classify::fleet`, whose evaluator judges
//! them from the graph, the rules and the open drifts passed in. The engine only applies what it
//! finds (resolving, settling, opening a drift with the engine's id), as it does every class's.

use super::settle::drift_id;
use super::*;
use crate::classify::fleet::{self, GroupView, Rejudged, Settled};

impl Engine {
    /// Judges every open fleet drift again from its group and object over the current members
    /// ([`fleet::rejudge`]): members can change without any event about the object (a reload,
    /// tombstone expiry). Each is resolved or settled in turn, in slot order.
    pub(super) fn rejudge_fleet(&mut self, now: Millis) {
        if !self.rules.class(classes::FLEET_DIVERGENCE).enabled {
            return;
        }
        for slot in fleet::open_drifts(&self.drifts) {
            match fleet::rejudge(&self.graph, &*self.rules, &self.drifts, &slot) {
                None => {}
                Some(Rejudged::Resolve(reason)) => self.clear(&slot, reason, now),
                Some(Rejudged::Verdict(verdict)) => {
                    self.settle(classes::FLEET_DIVERGENCE, verdict.into(), now)
                }
            }
        }
    }

    /// Settles a fleet group's finding that holds about one compared object ([`fleet::settle`]):
    /// the drift is about the group, not a tracked object.
    pub(super) fn settle_fleet(
        &mut self,
        slot: DriftSlot,
        evidence: drift_model::Evidence,
        now: Millis,
    ) {
        match fleet::settle(&*self.rules, self.drifts.get(&slot), &slot, evidence, now) {
            Settled::Nothing => {}
            Settled::Update(drift) => self.put_drift(slot, Some(drift)),
            Settled::Open(drift) => {
                let id = drift_id(&slot, now, self.next_sequence(now));
                self.open(slot, Drift { id, ..drift }, now);
            }
        }
    }

    /// True when forgetting `key`'s object (a tombstone past retention) can change a fleet drift
    /// ([`fleet::compared_by_any`]).
    pub(super) fn fleet_compares(&self, key: &ObjectKey) -> bool {
        fleet::compared_by_any(&*self.rules, self.graph.get(key))
    }

    /// Every fleet group as it stands now, or only the group named `only` (`fleet::view`).
    /// Each group shows at most [`fleet::MAX_VIEW_OBJECTS`] objects, the divergent ones first: a
    /// group comparing every ConfigMap of many clusters would otherwise make an answer too large
    /// to read.
    pub fn fleet_view(&self, only: Option<&str>) -> Vec<GroupView> {
        fleet::view(&self.graph, &*self.rules, &self.drifts, only, &|cluster| {
            self.pipeline_watch.last_event(cluster)
        })
    }
}
