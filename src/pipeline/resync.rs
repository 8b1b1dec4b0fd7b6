//! The resync loop's work, applied by the writer: listed objects go through the engine as
//! events do (without event keys: a listed state is idempotent by its `resourceVersion`), and a
//! complete list's absentees are deleted.

use std::collections::HashSet;

use crate::classify::{Engine, Outcome};
use crate::decode::{Action, ApiServerEvent};
use crate::metrics::Metrics;
use crate::model::{Millis, ObjectKey};

/// Work from the resync source (`cluster::resync`), committed like events but without event
/// keys: a listed state is idempotent by its `resourceVersion` (an unchanged object is stale).
pub enum ResyncWork {
    /// Listed objects, applied as `add` (unknown to the engine) or `update` events.
    Listed {
        /// The objects of one page (or part of one), as `add`/`update` events.
        events: Vec<ApiServerEvent>,
        /// The list's snapshot `resourceVersion` (the API server's own).
        list_version: String,
    },
    /// A complete list of one kind ended: tracked objects of that kind it did not contain are
    /// deleted (see [`crate::classify::Engine::vanished`]).
    Sweep(Sweep),
}

/// The end of a complete list of one kind (owned form of [`crate::classify::Sweep`]).
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
    pub selects: Box<crate::classify::LabelMatcher>,
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
    /// Set when a listed object is already tracked under another cluster name: events from this
    /// cluster carry that name, so resync's name is wrong and nothing was applied (the same
    /// objects under two names would alert twice).
    pub cluster_mismatch: Option<String>,
}

/// Most pairs of names remembered for logging once (the names come from senders: a flood of
/// forged ones must not grow memory); past it, mix-ups are still counted, not logged.
const MAX_LOGGED_PAIRS: usize = 1000;

/// Cluster-name mix-ups between resync and the events, each logged once.
#[derive(Default)]
pub(super) struct Misnamed {
    /// (resync's name, events' name) pairs already logged.
    logged: HashSet<(String, String)>,
}

impl Misnamed {
    /// Reports an event whose object resync filed under another cluster name (the engine then
    /// moves it to the event's name, see `Engine::apply`).
    pub(super) fn check(&mut self, engine: &Engine, metrics: &Metrics, event: &ApiServerEvent) {
        // Without objects under another name (the usual case) there is nothing to look for.
        if !engine
            .graph()
            .clusters()
            .any(|cluster| cluster != event.cluster)
        {
            return;
        }
        let Some(object) = &event.object else {
            return;
        };
        let key = ObjectKey {
            cluster: event.cluster.clone(),
            uid: object.uid.clone(),
        };
        if engine.graph().get(&key).is_some() {
            return;
        }
        let Some(other) = engine.other_cluster_of(&event.cluster, &object.uid) else {
            return;
        };
        // Only a copy resync filed is moved; another event stream's copy is a conflict
        // (`Misnamed::conflict`), and resync is not to blame for it.
        if !engine
            .graph()
            .by_uid(&other, &object.uid)
            .is_some_and(|copy| copy.listed)
        {
            return;
        }
        metrics
            .resync_errors
            .get_or_create(&crate::metrics::KindLabel::new("cluster_mismatch"))
            .inc();
        if self.first_time((other.clone(), event.cluster.clone())) {
            tracing::error!(
                message = "The same objects were filed under two cluster names: resync's and the events'. They are moved to the events' name; set resync.cluster to it.",
                resync_cluster = %other,
                events_cluster = %event.cluster,
            );
        }
    }

    /// True the first time a pair is seen (and there is room to remember it).
    fn first_time(&mut self, pair: (String, String)) -> bool {
        self.logged.len() < MAX_LOGGED_PAIRS && self.logged.insert(pair)
    }

    /// Reports an event the engine did not apply because its object is tracked under another
    /// cluster name that events carry: two event streams name one uid differently (a forged or
    /// misconfigured `cluster` extension). Counted every time, logged once per pair of names.
    pub(super) fn conflict(&mut self, engine: &Engine, metrics: &Metrics, event: &ApiServerEvent) {
        metrics.cluster_conflicts.inc();
        let Some(object) = &event.object else {
            return;
        };
        let tracked_as = engine
            .other_cluster_of(&event.cluster, &object.uid)
            .unwrap_or_default();
        if self.first_time((tracked_as.clone(), format!("conflict:{}", event.cluster))) {
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
}

/// Another cluster name under which one of `events`' objects is already tracked, if any.
fn tracked_elsewhere(engine: &Engine, events: &[ApiServerEvent]) -> Option<String> {
    events.iter().find_map(|event| {
        let object = event.object.as_ref()?;
        engine.other_cluster_of(&event.cluster, &object.uid)
    })
}

/// Applies one piece of resync work to the engine (inside the round's journal).
pub(super) fn apply(engine: &mut Engine, work: ResyncWork, now: Millis) -> ResyncOutcome {
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
        } => {
            if let Some(other) = tracked_elsewhere(engine, &events) {
                outcome.cluster_mismatch = Some(other);
                return outcome;
            }
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
                match engine.apply_listed(&event, &list_version, now) {
                    Outcome::Applied if engine.journaled_writes() != writes => outcome.missed += 1,
                    Outcome::Applied
                    | Outcome::Stale
                    | Outcome::Reference
                    | Outcome::Conflict
                    | Outcome::OverCapacity => outcome.unchanged += 1,
                }
                opened_since(engine, start, &mut outcome);
            }
        }
        ResyncWork::Sweep(sweep) => {
            let vanished = engine.vanished(&crate::classify::Sweep {
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
    }
    outcome
}
