//! The resync loop's work, applied by the writer: listed objects go through the engine as
//! events do (without event keys: a listed state is idempotent by its `resourceVersion`), and a
//! complete list's absentees are deleted.

use std::collections::HashSet;

use crate::metrics::Metrics;
use drift_core::classify::{Engine, ListContext, Outcome};
use drift_core::decode::{Action, ApiServerEvent};
use drift_model::{Millis, ObjectKey};

/// Work from the resync source (`cluster::resync`), committed like events but without event
/// keys: a listed state is idempotent by its `resourceVersion` (an unchanged object is stale).
pub enum ResyncWork {
    /// Listed objects, applied as `add` (unknown to the engine) or `update` events.
    Listed {
        /// The objects of one page (or part of one), as `add`/`update` events.
        events: Vec<ApiServerEvent>,
        /// The list's snapshot `resourceVersion` (the API server's own).
        list_version: String,
        /// When the list started.
        listed_at: Millis,
    },
    /// A complete list of one kind ended: tracked objects of that kind it did not contain are
    /// deleted (see [`drift_core::classify::Engine::vanished`]).
    Sweep(Sweep),
    /// A complete pass over every listed resource of a cluster ended, having found `missed`
    /// changes and deletions the events had not delivered (see
    /// [`drift_core::classify::Engine::resync_pass_done`]: is the source blind?).
    PassDone {
        /// The cluster listed.
        cluster: String,
        /// Changes and deletions the pass found.
        missed: usize,
    },
}

/// The end of a complete list of one kind (owned form of [`drift_core::classify::Sweep`]).
pub struct Sweep {
    /// The cluster listed.
    pub cluster: String,
    /// The listed `apiVersion`.
    pub api_version: String,
    /// The listed kind.
    pub kind: String,
    /// Uids the list contained.
    pub seen: HashSet<String>,
    /// The list's `resourceVersion`.
    pub list_version: String,
    /// When the list started.
    pub listed_at: Millis,
    /// True for labels the list's selector covers.
    pub selects: Box<drift_core::classify::LabelMatcher>,
}

/// What one piece of resync work found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResyncOutcome {
    /// Listed objects the engine did not know, or knew in an older state: changes the events
    /// had not delivered.
    pub missed: usize,
    /// Listed objects whose state the engine already had.
    pub unchanged: usize,
    /// Objects deleted because the list no longer contained them.
    pub deleted: usize,
    /// Class ids of the drifts this work opened.
    pub drifts_found: Vec<String>,
    /// Listed objects not filed because events track them under another cluster name that
    /// resync's name is not known to be (see `Engine::apply_listed`): resync's name may be wrong.
    pub conflicts: usize,
}

/// Most pairs of names remembered for logging once (the names come from senders: a flood of
/// forged ones must not grow memory); past it, mix-ups are still counted, not logged.
const MAX_LOGGED_PAIRS: usize = 1000;

/// Cluster-name conflicts (two senders, or resync and the events, naming one uid's cluster
/// differently), counted every time and logged once per pair of names.
#[derive(Default)]
pub(super) struct Misnamed {
    /// (tracked name, other name) pairs already logged.
    logged: HashSet<(String, String)>,
}

impl Misnamed {
    /// True the first time a pair is seen (and there is room to remember it).
    fn first_time(&mut self, pair: (String, String)) -> bool {
        self.logged.len() < MAX_LOGGED_PAIRS && self.logged.insert(pair)
    }

    /// Reports an event the engine did not apply because its object is tracked under another
    /// cluster name (an event never moves an object between names).
    pub(super) fn conflict(&mut self, engine: &Engine, metrics: &Metrics, event: &ApiServerEvent) {
        metrics.cluster_conflicts.inc();
        let Some(object) = &event.object else {
            return;
        };
        let Some(tracked_as) = engine.other_cluster_of(&event.cluster, &object.uid) else {
            return;
        };
        let listed = engine
            .graph()
            .by_uid(&tracked_as, &object.uid)
            .is_some_and(|copy| copy.listed);
        if !self.first_time((tracked_as.clone(), event.cluster.clone())) {
            return;
        }
        if listed {
            tracing::error!(
                message = "An event names another cluster than the one resync filed its object under; it is not applied. If the event's name is this cluster's, set resync.cluster (or defaultCluster) to it and restart: resync then moves its objects to that name.",
                resync_cluster = %tracked_as,
                event_cluster = %event.cluster,
                kind = %event.kind,
                namespace = %event.namespace,
                name = %event.name,
            );
        } else {
            tracing::error!(
                message = "An event names another cluster than the one its object's events carry; it is not applied. Two senders disagree on the cluster of one uid: check the ApiServerSources' ceOverrides.extensions.cluster, and who else posts to this sink.",
                tracked_as = %tracked_as,
                event_cluster = %event.cluster,
                kind = %event.kind,
                namespace = %event.namespace,
                name = %event.name,
            );
        }
    }

    /// Reports a listed object resync did not file because events track it under another name.
    fn listed_conflict(&mut self, engine: &Engine, metrics: &Metrics, event: &ApiServerEvent) {
        metrics.cluster_conflicts.inc();
        let Some(object) = &event.object else {
            return;
        };
        let Some(tracked_as) = engine.other_cluster_of(&event.cluster, &object.uid) else {
            return;
        };
        if self.first_time((tracked_as.clone(), event.cluster.clone())) {
            tracing::error!(
                message = "Resync lists an object that events track under another cluster name, and no event has used resync's name: it is not filed under resync's name. If the events' name is this cluster's, set resync.cluster to it.",
                resync_cluster = %event.cluster,
                events_cluster = %tracked_as,
                kind = %event.kind,
                namespace = %event.namespace,
                name = %event.name,
            );
        }
    }
}

/// Applies one piece of resync work to the engine (inside the round's journal).
pub(super) fn apply(
    engine: &mut Engine,
    misnamed: &mut Misnamed,
    metrics: &Metrics,
    work: ResyncWork,
    now: Millis,
) -> ResyncOutcome {
    let mut outcome = ResyncOutcome::default();
    let opened_since = |engine: &Engine, start: usize, outcome: &mut ResyncOutcome| {
        for transition in &engine.journaled_transitions()[start..] {
            if transition.from.is_none() {
                outcome.drifts_found.push(transition.drift.class.clone());
            }
        }
    };
    match work {
        ResyncWork::Listed {
            events,
            list_version,
            listed_at,
        } => {
            let list = ListContext {
                version: &list_version,
                started_at: listed_at,
            };
            for mut event in events {
                if let Some(object) = &event.object {
                    let key = ObjectKey {
                        cluster: event.cluster.clone(),
                        uid: object.uid.clone(),
                    };
                    event.action = if engine.is_tracked(&key) {
                        Action::Update
                    } else {
                        Action::Add
                    };
                }
                let start = engine.journaled_transitions().len();
                let writes = engine.journaled_writes();
                // Applied with nothing to write is the same content under a newer
                // resourceVersion (memory runs ahead of the store after a restart): nothing
                // an event had missed.
                match engine.apply_listed(&event, list, now) {
                    Outcome::Applied if engine.journaled_writes() != writes => outcome.missed += 1,
                    Outcome::Conflict => {
                        outcome.conflicts += 1;
                        misnamed.listed_conflict(engine, metrics, &event);
                    }
                    Outcome::Applied
                    | Outcome::Stale
                    | Outcome::Reference
                    | Outcome::OverCapacity => outcome.unchanged += 1,
                }
                opened_since(engine, start, &mut outcome);
            }
        }
        ResyncWork::Sweep(sweep) => {
            let vanished = engine.vanished(&drift_core::classify::Sweep {
                cluster: &sweep.cluster,
                api_version: &sweep.api_version,
                kind: &sweep.kind,
                seen: &sweep.seen,
                list_version: &sweep.list_version,
                listed_at: sweep.listed_at,
                selects: sweep.selects.as_ref(),
            });
            for key in vanished {
                let start = engine.journaled_transitions().len();
                if engine.forget(&key, now) == Outcome::Applied {
                    outcome.deleted += 1;
                }
                opened_since(engine, start, &mut outcome);
            }
        }
        ResyncWork::PassDone { cluster, missed } => {
            let start = engine.journaled_transitions().len();
            engine.resync_pass_done(&cluster, missed, now);
            opened_since(engine, start, &mut outcome);
        }
    }
    outcome
}
