//! What the engine knows about drift-sentinel's own event path, per cluster: whether each part
//! (ApiServerSource, Broker, Trigger of `rules.ownPipeline`) is ready, and whether the source is
//! blind (a complete resync pass found changes the events never delivered while no event had
//! arrived since the pass before). Kept in memory: each part's readiness is rebuilt from the
//! restored objects at a start; the blindness record is not (a restart forgets it), so the first
//! event of a cluster after a start re-evaluates its source, which ends a blindness finding
//! restored from the store, and the next quiet passes find blindness again. A deletion resync
//! infers is no event that arrived. Bounded by the clusters the engine tracks objects for.

use std::collections::{BTreeMap, HashMap};

use super::Engine;
use crate::classify::classes::{self, SourceBlind};
use crate::classify::kinds;
use crate::classify::rules::PipelinePart;
use drift_model::{Millis, ObjectKey};

/// Per-cluster records of the own event path.
#[derive(Debug, Default)]
pub(super) struct PipelineWatch {
    /// When an event (not a resync list) for the cluster was last applied.
    last_event: HashMap<String, Millis>,
    /// When the cluster's last complete resync pass ended.
    last_pass: HashMap<String, Millis>,
    /// Clusters whose source is blind.
    blind: HashMap<String, SourceBlind>,
    /// Readiness of each part seen, per cluster (`false`: not ready, misdirected or gone).
    ready: BTreeMap<(String, PipelinePart), bool>,
    /// Set when `ready` changed since [`Engine::take_pipeline_readiness`].
    changed: bool,
}

impl PipelineWatch {
    /// When an event of `cluster` was last applied.
    pub(super) fn last_event(&self, cluster: &str) -> Option<Millis> {
        self.last_event.get(cluster).copied()
    }

    pub(super) fn blind(&self, cluster: &str) -> Option<&SourceBlind> {
        if self.blind.is_empty() {
            return None;
        }
        self.blind.get(cluster)
    }
}

impl Engine {
    /// Notes an event applied for `cluster`: a blind source sees again.
    pub(super) fn note_event(&mut self, cluster: &str, now: Millis) {
        let first = match self.pipeline_watch.last_event.get_mut(cluster) {
            Some(at) => {
                *at = now;
                false
            }
            None => {
                self.pipeline_watch
                    .last_event
                    .insert(cluster.to_string(), now);
                true
            }
        };
        // The first event since the start also ends a blindness finding restored from the
        // store (the record that said "blind" did not survive the restart).
        if self.pipeline_watch.blind.remove(cluster).is_some() || first {
            self.reevaluate_source(cluster, now);
        }
    }

    /// A complete resync pass of `cluster` ended at `now`, having found `missed` changes (and
    /// deletions) the events had not delivered. Blind when it found some and no event arrived
    /// since the previous pass ended (the first pass after a start is not judged: changes made
    /// while drift-sentinel was down are missed by design).
    pub fn resync_pass_done(&mut self, cluster: &str, missed: usize, now: Millis) {
        let previous = self
            .pipeline_watch
            .last_pass
            .insert(cluster.to_string(), now);
        let Some(previous) = previous else {
            return;
        };
        let last_event = self.pipeline_watch.last_event.get(cluster).copied();
        let quiet = last_event.is_none_or(|at| at < previous);
        if !quiet {
            if self.pipeline_watch.blind.remove(cluster).is_some() {
                self.reevaluate_source(cluster, now);
            }
            return;
        }
        // Quiet since the pass before: blind when this pass found changes; a blind source stays
        // blind through a pass that found none (only an event shows it sees again).
        let known = self.pipeline_watch.blind.get(cluster).copied();
        let record = match known {
            Some(blind) => SourceBlind {
                missed: blind.missed + missed,
                quiet_since: blind.quiet_since,
            },
            None if missed > 0 => SourceBlind {
                missed,
                quiet_since: last_event.unwrap_or(previous),
            },
            None => return,
        };
        self.pipeline_watch
            .blind
            .insert(cluster.to_string(), record);
        if known != Some(record) {
            self.reevaluate_source(cluster, now);
        }
    }

    /// The source's blindness record for `cluster`, if blind.
    pub(super) fn source_blind(&self, cluster: &str) -> Option<&SourceBlind> {
        self.pipeline_watch.blind(cluster)
    }

    /// Records whether `key`'s object, if it is a part of the own event path, is healthy.
    pub(super) fn note_pipeline_part(&mut self, key: &ObjectKey) {
        let Some(object) = self.graph.get(key) else {
            return;
        };
        let pipeline = self.rules.own_pipeline();
        if object.namespace != pipeline.namespace {
            return;
        }
        let Some(part) = pipeline.part_of(object) else {
            return;
        };
        let blind =
            part == PipelinePart::Source && self.pipeline_watch.blind(&object.cluster).is_some();
        let healthy = !blind && classes::pipeline_part_problem(pipeline, part, object).is_none();
        let slot = (object.cluster.clone(), part);
        if self.pipeline_watch.ready.get(&slot) != Some(&healthy) {
            self.pipeline_watch.ready.insert(slot, healthy);
            self.pipeline_watch.changed = true;
        }
    }

    /// Each part's readiness per cluster, when it changed since the last call (for
    /// `drift_sentinel_pipeline_ready`).
    pub fn take_pipeline_readiness(&mut self) -> Option<Vec<(String, &'static str, bool)>> {
        if !std::mem::take(&mut self.pipeline_watch.changed) {
            return None;
        }
        Some(
            self.pipeline_watch
                .ready
                .iter()
                .map(|((cluster, part), ready)| (cluster.clone(), part.as_str(), *ready))
                .collect(),
        )
    }

    fn reevaluate_source(&mut self, cluster: &str, now: Millis) {
        let pipeline = self.rules.own_pipeline().clone();
        let (group, kind) = PipelinePart::Source.kind();
        let Some(key) = self
            .graph
            .live_by_name(
                cluster,
                group,
                kind,
                &pipeline.namespace,
                &pipeline.api_server_source,
            )
            .map(|source| source.key())
        else {
            return;
        };
        debug_assert_eq!(group, kinds::SOURCES);
        self.reevaluate(&key, now);
        self.note_pipeline_part(&key);
    }
}
