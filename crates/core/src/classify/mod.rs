//! Classify: (event, prior state, now) → state changes and drift transitions. Pure: no I/O, no
//! clock, no panics on input.
//!
//! The [`Engine`] keeps compact per-object state keyed by (cluster, uid), indexes the Knative
//! object graph (owners, `serving.knative.dev/*` labels), and runs every enabled drift class (one
//! file each under `classes/`, listed once in [`classes::REGISTRY`]) on each applied event.
//!
//! Drift is state, not an event: each (object, class) moves `pending` (condition seen, within its
//! grace) → `firing` (held past grace) → `resolved` (condition cleared). A pending drift fires
//! from [`Engine::tick`] when its grace runs out, with no further event needed; the caller asks
//! [`Engine::next_deadline`] when to call it. Replaying the same events with the same clock
//! gives the same transitions.
//!
//! Benign churn leaves no trace on disk: a pending drift of a class whose condition can be found
//! again from the objects' current state ([`classes::reassessable`]) lives in memory until it
//! fires or has been pending for [`RECORD_PENDING_AFTER_MS`]; an episode that opens and resolves
//! within that time is counted (transitions) but never recorded (no drift row, no history). After
//! a restart such an episode is found again: restored objects are re-assessed ([`Engine::tick`],
//! a chunk per round) and a condition that still holds opens pending anew.
//!
//! Events are applied in `resourceVersion` order per object: an older or equal version is stale
//! and changes nothing, so redelivered and reordered events never roll state back. Every change
//! the engine makes is journaled between [`Engine::begin`] and [`Engine::commit`] so the caller can
//! [`Engine::rollback`] when the store fails to commit, keeping memory equal to what is durable.

pub mod baseline;
pub mod classes;
pub mod defaults;
pub mod evidence;
pub mod fleet;
pub(crate) mod graph;
pub mod invariants;
pub(crate) mod kinds;
pub(crate) mod mesh;
pub(crate) mod names;
mod quantity;
pub mod resource_version;
pub mod restorable;
pub(crate) mod rules;
pub(crate) mod state;
pub mod stored;
pub mod traffic;

mod engine;
mod journal;
mod ordering;
mod spec;

use drift_model::{Drift, Millis, ObjectKey, Transition};
pub use engine::{Engine, ListContext};
pub use graph::Graph;
pub use rules::Certificates;
pub use rules::Rules;
pub use state::{ManagerStamp, Name, ObjectState};

/// What applying one event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// New state applied.
    Applied,
    /// The same or an older `resourceVersion` than the newest seen: nothing changed.
    Stale,
    /// A Reference-mode event: no object to classify.
    Reference,
    /// The object is tracked under another cluster name that events carry: two event streams
    /// name one uid differently. Nothing is applied (a forged `cluster` extension must not move
    /// or resolve anything); the writer counts and logs it.
    Conflict,
    /// A new object beyond [`Capacity::objects`] or [`Capacity::bytes`] (or a change that would
    /// grow the state beyond the bytes), in a cluster already at
    /// [`Capacity::objects_per_cluster`], or in one cluster more than [`Capacity::clusters`]: not
    /// tracked (objects already tracked keep working).
    OverCapacity,
}

/// How much state the engine keeps: bounds that a flood of junk objects or cluster names cannot
/// push past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Most bytes of tracked state ([`ObjectState::weight`] summed): what bounds memory.
    pub bytes: usize,
    /// Most objects (tombstones included) tracked in all clusters together.
    pub objects: usize,
    /// Most objects (tombstones included) tracked in one cluster.
    pub objects_per_cluster: usize,
    /// Most cluster names tracked.
    pub clusters: usize,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity {
            bytes: 512 * 1024 * 1024,
            objects: 100_000,
            objects_per_cluster: 50_000,
            clusters: 100,
        }
    }
}

impl Outcome {
    /// Lower-case name for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Stale => "stale",
            Outcome::Reference => "reference",
            Outcome::Conflict => "conflict",
            Outcome::OverCapacity => "over_capacity",
        }
    }
}

/// Everything the engine changed since [`Engine::begin`]: what the store must persist.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// Objects to upsert.
    pub objects: Vec<ObjectState>,
    /// Objects to forget (tombstones past retention).
    pub removed_objects: Vec<ObjectKey>,
    /// Drift rows to upsert (open and just-resolved).
    pub drifts: Vec<Drift>,
    /// State moves, in order (every move, for metrics and notifications).
    pub transitions: Vec<Transition>,
    /// The moves of recorded drifts, for the drift history: a drift recorded late (it fired, or
    /// was pending long enough) gets its opening move here too, dated when it opened.
    pub history: Vec<Transition>,
}

/// What the engine changed since [`Engine::begin`], borrowed from it: what the writer encodes
/// into its batch without copying every touched object's state first (a copy of each, encoded
/// and dropped, was a visible part of a round: BENCHMARKS.md, issue 28). [`Staged::to_changes`]
/// makes the owned [`Changes`].
#[derive(Debug)]
pub struct Staged<'a> {
    /// Objects to upsert, as they are now.
    pub objects: Vec<&'a ObjectState>,
    /// Objects to forget (tombstones past retention).
    pub removed_objects: &'a [ObjectKey],
    /// Drift rows to upsert (open and just-resolved).
    pub drifts: Vec<&'a Drift>,
    /// State moves, in order (every move, for metrics and notifications).
    pub transitions: &'a [Transition],
    /// The moves of recorded drifts, for the drift history: a drift recorded late gets its
    /// opening move here too, dated when it opened.
    pub history: &'a [Transition],
}

impl Staged<'_> {
    /// True when nothing needs persisting. Transitions alone are not persisted: a recorded
    /// drift's moves are in `history` and its rows in `drifts`.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
            && self.removed_objects.is_empty()
            && self.drifts.is_empty()
            && self.history.is_empty()
    }

    /// The owned copy.
    pub fn to_changes(&self) -> Changes {
        Changes {
            objects: self.objects.iter().map(|&object| object.clone()).collect(),
            removed_objects: self.removed_objects.to_vec(),
            drifts: self.drifts.iter().map(|&drift| drift.clone()).collect(),
            transitions: self.transitions.to_vec(),
            history: self.history.to_vec(),
        }
    }
}

/// True for the labels a label selector covers.
pub type LabelMatcher = dyn Fn(&drift_model::Pairs) -> bool + Send + Sync;

/// A complete list of one kind, for [`Engine::vanished`].
pub struct Sweep<'a> {
    /// The cluster listed.
    pub cluster: &'a str,
    /// The listed `apiVersion` (only its group is compared: versions of a kind are one object).
    pub api_version: &'a str,
    /// The listed kind.
    pub kind: &'a str,
    /// Uids the list contained.
    pub seen: &'a std::collections::HashSet<String>,
    /// The list's `resourceVersion` (its snapshot).
    pub list_version: &'a str,
    /// When the list started.
    pub listed_at: Millis,
    /// True for labels the list's selector covers.
    pub selects: &'a LabelMatcher,
}

/// How long a deleted object is remembered, to drop late updates and to detect orphans.
pub(crate) const TOMBSTONE_RETENTION_MS: Millis = 6 * 3600 * 1000;

/// The step on which tombstone expiries wake an idle writer: an expiry is due at the next
/// whole minute after it, so the deletions of one rollout (a Pod every few seconds) are forgotten
/// in a round or two, not in a round each, six hours later.
pub(crate) const TOMBSTONE_SWEEP_STEP_MS: Millis = 60 * 1000;

/// How long a pending drift of a reassessable class stays in memory only. Rollouts, scaling and
/// reconciles open and resolve such episodes within seconds, and writing each one (its row and
/// two history rows) was most of what a busy cluster made the store write; one that lasts longer
/// is recorded, so the API shows it and a restart keeps its `since`.
pub const RECORD_PENDING_AFTER_MS: Millis = 30_000;

/// Restored objects re-assessed per [`Engine::tick`], so the first events after a restart do
/// not wait for the whole graph.
pub(crate) const RECHECK_PER_TICK: usize = 1000;
