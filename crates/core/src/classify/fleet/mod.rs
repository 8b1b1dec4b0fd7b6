//! Fleet drift: clusters of one group (`fleet.groups`) that should hold the same desired state
//! for the objects they compare, and where they do not.
//!
//! One implementation serves the engine's `fleet_divergence` class (members are the clusters it
//! tracks) and the `compare` command (members are snapshots): [`comparable`] cuts an object down
//! to what is compared, [`compare()`] lines the members' copies up and names each path whose
//! value differs, with the value every member holds there (`None`: absent). Pure: no I/O, no
//! clock.
//!
//! A member lacks an object only with evidence ([`Held::Missing`]); one that never reported it
//! is unknown ([`Held::NotReported`]) and takes no part: the engine hears of an object through
//! its changes, so silence is no evidence of absence. Snapshots (`compare`) are complete: there
//! an object a snapshot does not hold is missing from it.
//!
//! What is compared, both ways: a ConfigMap's `data` key by key (`_example` is documentation,
//! never configuration), the `spec` down to its leaves (arrays by index; under
//! `spec.template.metadata` only its name and keys that are not bookkeeping; a core Service without the
//! fields the API server allocates), the labels and annotations whose hand edit changes
//! behaviour (`Rules::is_behavioural_key`) and the `app.kubernetes.io/version` label (the
//! Knative release a component runs). Resource quantities compare by value (`quantity.rs`).
//! Not compared: the status, server-set metadata (uid, resourceVersion, generation,
//! timestamps, managers, owners), bookkeeping keys, objects Knative's runtime made (not the
//! Operator's: see [`made_by_knative_runtime`]), and a group's
//! `ignorePaths` (JSON pointers, each a prefix).
//!
//! The files: this one the group model (groups, what they compare, the identity of a compared
//! object and of its drift); `compare.rs` the comparison; `hint.rs` the words and commands a
//! divergence is reported with (summary, `kubectl` hint, the `values` fact); `table.rs` the
//! cluster-by-cluster table of one object; `evaluator.rs` the judging of fleet drifts beside the
//! engine (an event's verdicts, open drifts judged again when members change, how a finding
//! settles), from the graph, rules and drifts the engine passes in; `view.rs` the fleet view
//! the API shows. Nothing here imports the engine or the classes: they call in, never the other
//! way.

use std::time::Duration;

use super::state::ObjectState;
use drift_model::glob::glob_match;
use drift_model::Severity;

mod compare;
mod evaluator;
mod hint;
mod table;
#[cfg(test)]
mod tests;
mod view;

#[cfg(test)]
use compare::evidenced;
pub use compare::{comparable, compare, value_text, Divergence, Held};
pub(crate) use evaluator::{
    compared_by_any, judge_change, open_drifts, rejudge, settle, Finding, FleetRules, Rejudged,
    Settled, Verdict,
};
#[cfg(test)]
use hint::values_fact;
pub use hint::{hint, summary};
pub use table::{rows, Cell, Row};
pub(crate) use view::view;
pub use view::{GroupView, MemberView, ObjectView, MAX_VIEW_OBJECTS};

/// The id of the drift class of fleet groups' differences (`classes::FLEET_DIVERGENCE`): defined
/// here, with the rest of a fleet drift's identity, since this module judges those drifts and
/// never imports the classes.
pub(crate) const CLASS: &str = "fleet_divergence";

/// The label that names the Knative release a component (and its ConfigMaps) belongs to.
pub(crate) const VERSION_LABEL: &str = "app.kubernetes.io/version";

/// The prefix of the cluster field of a fleet drift: a drift about a group, not one cluster.
/// Ingest refuses it in an event's cluster name (`decode::cluster_name`), so no cluster can pass
/// for a group.
pub const CLUSTER_PREFIX: &str = crate::decode::cluster_name::RESERVED_PREFIX;

/// Most divergent paths reported for one object (one huge difference cannot make a huge alert).
pub(crate) const MAX_DIVERGENCES: usize = 50;

/// The path a missing object is reported at: the object as a whole.
pub const WHOLE_OBJECT: &str = "";

/// The value a member that holds the object shows at [`WHOLE_OBJECT`].
pub(crate) const PRESENT: &str = "present";

/// A glob, with the common exact and match-all patterns checked without the general matcher:
/// membership is tested on every event that changes a compared-looking object.
fn matches(pattern: &str, text: &str) -> bool {
    if pattern == "*" {
        true
    } else if pattern.contains(['*', '?']) {
        glob_match(pattern, text)
    } else {
        pattern == text
    }
}

/// One `compare` entry of a group: which objects its members must hold alike (globs each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compared {
    /// `apiVersion` glob (`v1`, `serving.knative.dev/*`).
    pub api_version: String,
    /// Kind glob.
    pub kind: String,
    /// Namespace glob.
    pub namespace: String,
    /// Name glob.
    pub name: String,
}

impl Compared {
    /// True when this entry can select objects of this `apiVersion` and kind (some namespace
    /// and name).
    pub fn may_select(&self, api_version: &str, kind: &str) -> bool {
        matches(&self.kind, kind) && matches(&self.api_version, api_version)
    }

    /// True when this entry selects the object.
    pub fn selects(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> bool {
        // Kind first: it tells most objects apart with a string comparison.
        matches(&self.kind, kind)
            && matches(&self.api_version, api_version)
            && matches(&self.namespace, namespace)
            && matches(&self.name, name)
    }
}

/// A fleet group, compiled from `fleet.groups[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetGroup {
    /// Unique name (part of each drift's identity).
    pub name: String,
    /// Cluster name globs: the members are the clusters seen that match one.
    pub clusters: Vec<String>,
    /// The objects compared.
    pub compare: Vec<Compared>,
    /// JSON pointers (prefixes) left out of the comparison, e.g. `/data/logging.enable-probe`.
    pub ignore_paths: Vec<String>,
    /// Severity of its drifts.
    pub severity: Severity,
    /// How long a difference may last (a rollout reaching every member) before it fires.
    pub grace: Duration,
}

impl FleetGroup {
    /// True when `cluster` is (or would be, once seen) a member. A fleet drift's own cluster
    /// field (`fleet:<group>`) is never a member.
    pub fn has_member(&self, cluster: &str) -> bool {
        !cluster.starts_with(CLUSTER_PREFIX)
            && self
                .clusters
                .iter()
                .any(|pattern| matches(pattern, cluster))
    }

    /// True when the group compares this tracked object: it names the object, and Knative's
    /// runtime did not make it (an object whose controller `ownerReference` is a Serving or
    /// Eventing object, such as a Revision or a Service's Route, holds names and content that
    /// are each cluster's own). What the Knative Operator installs (its ConfigMaps are owned by
    /// the `KnativeServing`), and what other controllers make (a KServe `InferenceService`'s
    /// Knative Service), is desired state and compared.
    pub fn selects(&self, object: &ObjectState) -> bool {
        self.compares(
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.name,
        ) && !made_by_knative_runtime(object)
    }

    /// True when the group compares this object.
    pub fn compares(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> bool {
        self.compare
            .iter()
            .any(|entry| entry.selects(api_version, kind, namespace, name))
    }
}

/// True when a Knative runtime controller (not the Operator) made the object.
pub fn made_by_knative_runtime(object: &ObjectState) -> bool {
    object.controller_owner().is_some_and(|owner| {
        let group = owner
            .api_version
            .split_once('/')
            .map_or("", |(group, _)| group);
        group.ends_with("knative.dev") && group != "operator.knative.dev"
    })
}

/// The identity of a compared object across clusters: the same group, kind, namespace and name
/// in every member (the uid differs per cluster; the served version may too).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FleetObject {
    /// `apiVersion` as a member holds it (not part of the identity's comparison below).
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty when cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl FleetObject {
    /// The fleet identity of a tracked object.
    pub fn of(object: &ObjectState) -> FleetObject {
        FleetObject {
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        }
    }

    /// The API group (empty for core).
    pub fn group(&self) -> &str {
        crate::decode::object::api_group(&self.api_version)
    }

    /// The stable key of the object within a group, the `uid` of its fleet drift:
    /// `Kind.group/namespace/name` (`Kind/namespace/name` for the core group), without the
    /// version so that a member serving another version is the same object.
    pub fn key(&self) -> String {
        let kind = match self.group() {
            "" => self.kind.clone(),
            group => format!("{}.{group}", self.kind),
        };
        if self.namespace.is_empty() {
            format!("{kind}/{}", self.name)
        } else {
            format!("{kind}/{}/{}", self.namespace, self.name)
        }
    }

    /// The cluster field of this object's drift in `group`.
    pub(crate) fn drift_cluster(group: &str) -> String {
        format!("{CLUSTER_PREFIX}{group}")
    }
}
