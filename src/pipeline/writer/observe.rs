//! What a round tells the metrics and the log: tracked objects and state bytes against their
//! caps, firing drifts by class, severity, namespace and API group, refusals, invariant
//! failures, and every committed transition.

use super::*;
use crate::metrics::FiringLabel;
use drift_model::{Drift, DriftSlot};
use std::collections::HashMap;

impl Writer {
    /// Publishes the engine's counts of implausible versions and refused objects (before any
    /// answer, so a caller that has its answer sees the counts of its own events).
    pub(super) fn count_refusals(&mut self) {
        if let Some(parts) = self.engine.take_pipeline_readiness() {
            for (cluster, part, ready) in parts {
                self.metrics
                    .pipeline_ready
                    .get_or_create(&crate::metrics::PipelinePartLabel {
                        cluster,
                        part: part.to_string(),
                    })
                    .set(i64::from(ready));
            }
        }
        for ((rule, kind), count) in self.engine.take_invariant_errors() {
            self.metrics
                .invariant_errors
                .get_or_create(&crate::metrics::RuleErrorLabel {
                    rule,
                    kind: kind.to_string(),
                })
                .inc_by(count);
        }
        for failure in self.engine.take_invariant_failures() {
            tracing::warn!(
                message = "An invariant could not be evaluated on an object: it is neither held nor broken there (logged once per object and rule until it evaluates again; drift_sentinel_invariant_errors_total counts every failure).",
                rule = %failure.rule,
                kind = failure.kind,
                cluster = %failure.subject.cluster,
                object = %failure.object,
                error = %failure.error,
            );
        }
        let implausible = self.engine.implausible_versions();
        self.metrics
            .implausible_versions
            .inc_by(implausible.saturating_sub(self.reported.implausible_seen));
        self.reported.implausible_seen = implausible;
        let refused = self.engine.refused_objects();
        self.metrics
            .objects_refused
            .inc_by(refused.saturating_sub(self.reported.refused_seen));
        if refused > self.reported.refused_seen
            && self
                .reported
                .refusal_logged
                .is_none_or(|logged| logged.elapsed() >= std::time::Duration::from_secs(60))
        {
            self.reported.refusal_logged = Some(std::time::Instant::now());
            let capacity = self.engine.capacity();
            tracing::warn!(
                message = "Objects are not tracked, or not updated, because a cap in the limits section is reached (drift_sentinel_objects_refused_total counts them; logged at most once a minute).",
                refused_so_far = refused,
                objects = self.engine.object_count(),
                max_objects = capacity.objects,
                state_bytes = self.engine.graph().bytes(),
                max_state_bytes = capacity.bytes,
                max_objects_per_cluster = capacity.objects_per_cluster,
                max_clusters = capacity.clusters,
            );
        }
        self.reported.refused_seen = refused;
    }

    /// Gauges that follow every round: tracked objects, firing drifts, round time.
    pub(super) fn observe(&mut self, started: std::time::Instant) {
        self.count_refusals();
        let capacity = self.engine.capacity();
        self.metrics
            .cluster_objects_max
            .set(i64::try_from(self.engine.graph().largest_cluster()).unwrap_or(i64::MAX));
        self.metrics
            .cluster_objects_limit
            .set(i64::try_from(capacity.objects_per_cluster).unwrap_or(i64::MAX));
        self.metrics
            .objects_limit
            .set(i64::try_from(capacity.objects).unwrap_or(i64::MAX));
        self.metrics
            .state_bytes
            .set(i64::try_from(self.engine.graph().bytes()).unwrap_or(i64::MAX));
        self.metrics
            .state_bytes_limit
            .set(i64::try_from(capacity.bytes).unwrap_or(i64::MAX));
        self.metrics
            .tracked_objects
            .set(i64::try_from(self.engine.object_count()).unwrap_or(i64::MAX));
        self.metrics
            .writer_round_seconds
            .observe(started.elapsed().as_secs_f64());
    }

    /// Follows the round's changes of drifts in the firing gauge: only the drifts it moved or
    /// wrote a row for, each looked up in the engine as the round left it (a drift can move
    /// twice in a round).
    pub(super) fn follow_firing(&mut self, round: &Round) {
        if std::mem::take(&mut self.reported.firing_recount) {
            self.recount_firing();
            return;
        }
        if !round.changed_drifts() {
            return;
        }
        let mut touched: Vec<DriftSlot> = (round.batch.drifts.iter())
            .chain(round.transitions.iter().map(|transition| &transition.drift))
            .map(Drift::slot)
            .collect();
        touched.sort_unstable();
        touched.dedup();
        let mut moved: Vec<FiringLabel> = Vec::new();
        for slot in touched {
            let now = (self.engine.open_drift(&slot))
                .filter(|drift| drift.state == DriftState::Firing)
                .map(|drift| firing_label(&self.metrics, drift));
            let firing = &mut self.reported.firing;
            let before = firing.by_slot.remove(&slot);
            if before == now {
                if let Some(label) = before {
                    firing.by_slot.insert(slot, label);
                }
                continue;
            }
            if let Some(label) = before {
                *firing.counts.entry(label.clone()).or_default() -= 1;
                moved.push(label);
            }
            if let Some(label) = now {
                *firing.counts.entry(label.clone()).or_default() += 1;
                firing.by_slot.insert(slot, label.clone());
                moved.push(label);
            }
        }
        // Each series once, with its final count (a reload retiring a class can move thousands
        // of drifts over hundreds of series).
        let set: std::collections::HashSet<&FiringLabel> = moved.iter().collect();
        for label in set {
            let count = self.reported.firing.counts.get(label).copied().unwrap_or(0);
            self.metrics.drifts_firing.get_or_create(label).set(count);
            // A series that stopped firing shows 0, not its last count.
            if count == 0 {
                self.reported.firing.counts.remove(label);
            }
        }
    }

    /// Counts the firing gauge from every open drift (see `Reported::firing_recount`).
    pub(super) fn recount_firing(&mut self) {
        let mut firing = Firing::default();
        for drift in self.engine.open_drifts() {
            if drift.state == DriftState::Firing {
                let label = firing_label(&self.metrics, drift);
                *firing.counts.entry(label.clone()).or_default() += 1;
                firing.by_slot.insert(drift.slot(), label);
            }
        }
        // Series that stopped firing are set to 0, not left stale.
        for label in self.reported.firing.counts.keys() {
            if !firing.counts.contains_key(label) {
                self.metrics.drifts_firing.get_or_create(label).set(0);
            }
        }
        for (label, count) in &firing.counts {
            self.metrics.drifts_firing.get_or_create(label).set(*count);
        }
        self.reported.firing = firing;
    }

    pub(super) fn after_commit(&self, transitions: &[Transition]) {
        for transition in transitions {
            let drift = &transition.drift;
            let fired =
                drift.state == DriftState::Firing && transition.from != Some(DriftState::Firing);
            let escalated =
                drift.state == DriftState::Firing && transition.from == Some(DriftState::Firing);
            // An escalation is no new fire: counted under a state of its own.
            self.metrics.record_transition(
                &drift.class,
                if escalated {
                    "escalated"
                } else {
                    drift.state.as_str()
                },
            );
            if fired {
                self.metrics
                    .findings
                    .get_or_create(&crate::metrics::ClassSeverityLabel {
                        class: drift.class.clone(),
                        severity: drift.severity.as_str().to_string(),
                    })
                    .inc();
            }
            if transition.is_notifiable() {
                tracing::info!(
                    message = "Drift state changed.",
                    drift_id = %drift.id,
                    class = %drift.class,
                    state = drift.state.as_str(),
                    severity = drift.severity.as_str(),
                    cluster = %drift.cluster,
                    kind = %drift.kind,
                    namespace = %drift.namespace,
                    name = %drift.name,
                    summary = %drift.evidence.summary,
                );
            }
        }
    }
}

/// What the firing gauge shows: the series of each firing drift, and the count of each series
/// that is not 0.
#[derive(Default)]
pub(super) struct Firing {
    by_slot: HashMap<DriftSlot, FiringLabel>,
    counts: HashMap<FiringLabel, i64>,
}

/// The firing gauge's series for `drift`.
fn firing_label(metrics: &Metrics, drift: &Drift) -> FiringLabel {
    FiringLabel {
        class: drift.class.clone(),
        severity: drift.severity.as_str().to_string(),
        namespace: metrics.namespace_label(&drift.namespace),
        group: drift_model::group::family_of(drift_model::group::api_group(&drift.api_version))
            .map_or("other", |family| family.id)
            .to_string(),
    }
}
