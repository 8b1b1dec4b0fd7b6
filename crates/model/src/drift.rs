//! The drift vocabulary: what a drift is, its lifecycle, its evidence (field changes, the actor,
//! the owner chain) and the transitions between its states.
//!
//! These are core types; the public JSON and the stored rows are built from them.

use std::collections::BTreeMap;

use super::{Millis, Severity};

/// The lifecycle state of a drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DriftState {
    /// Condition seen, still within its grace period.
    Pending,
    /// Condition held past its grace period.
    Firing,
    /// Condition cleared (or the object went away).
    Resolved,
}

impl DriftState {
    /// Lower-case name for logs, metrics and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftState::Pending => "pending",
            DriftState::Firing => "firing",
            DriftState::Resolved => "resolved",
        }
    }
}

/// Most changes kept in one diff: one huge edit cannot make a huge alert or row.
pub const MAX_CHANGES: usize = 50;

/// One changed field: a JSON pointer with the value before and after (absent = `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldChange {
    /// JSON pointer, e.g. `/spec/traffic/0/percent`.
    pub path: String,
    /// Value before the change.
    pub before: Option<serde_json::Value>,
    /// Value after the change.
    pub after: Option<serde_json::Value>,
}

/// Who made a change, from `managedFields` and Knative's `lastModifier`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// Field manager (`kubectl-edit`, `kn`, `controller`, ...).
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// Subresource written, if any.
    pub subresource: String,
    /// When the manager wrote (RFC 3339).
    pub time: Option<String>,
    /// `serving.knative.dev/lastModifier`: the Kubernetes user behind the last spec change.
    pub user: Option<String>,
    /// True when the manager is in `trustedManagers`.
    pub trusted: bool,
}

/// The Knative owner chain of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerChain {
    /// Knative Service name.
    pub service: Option<String>,
    /// Configuration name.
    pub configuration: Option<String>,
    /// Revision name.
    pub revision: Option<String>,
}

/// What a class found: enough for a person to understand and fix the drift.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// One sentence: what is wrong.
    pub summary: String,
    /// The field diff behind the finding.
    pub changes: Vec<FieldChange>,
    /// Who changed it.
    pub actor: Option<Actor>,
    /// A command or step that fixes it.
    pub hint: Option<String>,
    /// Severity chosen by the class for this finding (else the configured one).
    pub severity: Option<Severity>,
    /// Structured facts (condition reason, expected/actual values, ...).
    pub facts: BTreeMap<String, String>,
}

/// The key of [`Evidence::facts`] that holds the failing condition chain, when a class knows
/// it: a JSON array (as a string) of links `{"kind", "namespace", "name", "condition", "status",
/// "reason", "message"}`, from the drift's object to the one whose condition fails first
/// (Service → Route → Ingress → Certificate; Trigger → Broker → subscriber).
pub const CONDITION_CHAIN_FACT: &str = "conditionChain";

/// A drift: one (object, class, rule) episode from pending to resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    /// Stable id of this episode.
    pub id: String,
    /// Public class id.
    pub class: String,
    /// The rule, for a class whose findings are per rule (`invariant`): part of the identity,
    /// so two rules broken on one object are two drifts.
    pub rule: Option<String>,
    /// Severity.
    pub severity: Severity,
    /// Current state.
    pub state: DriftState,
    /// Cluster name.
    pub cluster: String,
    /// Object uid.
    pub uid: String,
    /// Object `apiVersion`.
    pub api_version: String,
    /// Object kind.
    pub kind: String,
    /// Object namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// Object labels (for routing and silences).
    pub labels: BTreeMap<String, String>,
    /// Knative owner chain.
    pub owner: OwnerChain,
    /// What was found.
    pub evidence: Evidence,
    /// When the condition was first seen.
    pub since: Millis,
    /// When the drift fires if the condition holds.
    pub fire_at: Millis,
    /// When it fired.
    pub fired_at: Option<Millis>,
    /// When it resolved.
    pub resolved_at: Option<Millis>,
    /// Why it resolved.
    pub resolution: Option<String>,
}

impl Drift {
    /// The (object, class) slot this drift occupies.
    pub fn slot(&self) -> DriftSlot {
        DriftSlot {
            cluster: self.cluster.clone(),
            uid: self.uid.clone(),
            class: self.class.clone(),
            rule: self.rule.clone(),
        }
    }
}

/// The identity of an open drift: one per (object, class, rule).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriftSlot {
    /// Cluster.
    pub cluster: String,
    /// Object uid.
    pub uid: String,
    /// Class id.
    pub class: String,
    /// The rule within the class (`invariant`), if the class has rules.
    pub rule: Option<String>,
}

/// A drift moved from one state to another.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The drift after the move.
    pub drift: Drift,
    /// The state before (`None` when it just opened).
    pub from: Option<DriftState>,
    /// When.
    pub at: Millis,
}

impl Transition {
    /// True for a move from firing to firing: a firing drift's severity rose (a certificate's
    /// warning became critical). People hear it; it is no new fire (no remediation, no count
    /// of findings).
    pub fn is_escalation(&self) -> bool {
        self.drift.state == DriftState::Firing && self.from == Some(DriftState::Firing)
    }

    /// True when people should hear about it: it fired, it escalated (see
    /// [`Transition::is_escalation`]), or it resolved after firing.
    pub fn is_notifiable(&self) -> bool {
        match self.drift.state {
            DriftState::Firing => true,
            DriftState::Resolved => self.from == Some(DriftState::Firing),
            DriftState::Pending => false,
        }
    }
}
