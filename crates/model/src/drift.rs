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
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
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

/// A drift slot's parts, owned ([`DriftSlot`]) or borrowed ([`SlotRef`]): a map keyed by
/// `DriftSlot` is asked about a `SlotRef` without building a slot (`map.get(&slot_ref as &dyn
/// SlotKey)`). Most verdicts the classes give are clear ones about objects with nothing open,
/// and building a slot for each (three strings) was a visible share of an event (BENCHMARKS.md,
/// issue 28). Both hash and compare as their parts, so the two forms of one slot agree.
pub trait SlotKey {
    /// Cluster, object uid, class id and rule.
    fn parts(&self) -> (&str, &str, &str, Option<&str>);
}

/// A drift slot named by borrowed parts (see [`SlotKey`]).
#[derive(Debug, Clone, Copy)]
pub struct SlotRef<'a> {
    /// Cluster.
    pub cluster: &'a str,
    /// Object uid.
    pub uid: &'a str,
    /// Class id.
    pub class: &'a str,
    /// The rule within the class, if any.
    pub rule: Option<&'a str>,
}

impl SlotKey for DriftSlot {
    fn parts(&self) -> (&str, &str, &str, Option<&str>) {
        (&self.cluster, &self.uid, &self.class, self.rule.as_deref())
    }
}

impl SlotKey for SlotRef<'_> {
    fn parts(&self) -> (&str, &str, &str, Option<&str>) {
        (self.cluster, self.uid, self.class, self.rule)
    }
}

// Hashed as its parts, as the borrowed form is (`Borrow` requires the two hashes to agree).
impl std::hash::Hash for DriftSlot {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl<'a> std::borrow::Borrow<dyn SlotKey + 'a> for DriftSlot {
    fn borrow(&self) -> &(dyn SlotKey + 'a) {
        self
    }
}

impl std::hash::Hash for dyn SlotKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn SlotKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn SlotKey + '_ {}

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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn slot(class: &str, rule: Option<&str>) -> DriftSlot {
        DriftSlot {
            cluster: "prod".into(),
            uid: "u-1".into(),
            class: class.into(),
            rule: rule.map(str::to_string),
        }
    }

    #[test]
    fn a_borrowed_slot_finds_what_its_owned_form_keys() {
        let mut open = HashMap::new();
        open.insert(slot("manual_edit", None), 1);
        open.insert(slot("invariant", Some("min-scale")), 2);
        let find = |cluster: &str, uid: &str, class: &str, rule: Option<&str>| {
            let key = SlotRef {
                cluster,
                uid,
                class,
                rule,
            };
            open.get(&key as &dyn SlotKey).copied()
        };
        assert_eq!(find("prod", "u-1", "manual_edit", None), Some(1));
        assert_eq!(find("prod", "u-1", "invariant", Some("min-scale")), Some(2));
        // Every part counts, the rule's absence too.
        assert_eq!(find("prod", "u-1", "invariant", None), None);
        assert_eq!(find("prod", "u-1", "manual_edit", Some("")), None);
        assert_eq!(find("prod", "u-2", "manual_edit", None), None);
        assert_eq!(find("staging", "u-1", "manual_edit", None), None);
        // Parts that concatenate alike are still other slots.
        assert_eq!(find("produ", "-1", "manual_edit", None), None);
    }

    /// Every key hashes alike, so only equality tells slots apart.
    #[derive(Default)]
    struct Constant;

    impl std::hash::BuildHasher for Constant {
        type Hasher = ConstantHasher;
        fn build_hasher(&self) -> ConstantHasher {
            ConstantHasher
        }
    }

    struct ConstantHasher;

    impl std::hash::Hasher for ConstantHasher {
        fn finish(&self) -> u64 {
            7
        }
        fn write(&mut self, _: &[u8]) {}
    }

    #[test]
    fn the_two_forms_of_a_slot_hash_and_compare_alike() {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        let owned = slot("invariant", Some("min-scale"));
        let borrowed = SlotRef {
            cluster: "prod",
            uid: "u-1",
            class: "invariant",
            rule: Some("min-scale"),
        };
        assert_eq!(
            state.hash_one(&owned),
            state.hash_one(&borrowed as &dyn SlotKey)
        );
        // With every hash equal, each lookup is decided by equality alone.
        let mut open: HashMap<DriftSlot, u8, Constant> = HashMap::default();
        open.insert(slot("manual_edit", None), 1);
        open.insert(owned, 2);
        let get = |key: SlotRef<'_>| open.get(&key as &dyn SlotKey).copied();
        assert_eq!(get(borrowed), Some(2));
        for other in [
            SlotRef {
                rule: None,
                ..borrowed
            },
            SlotRef {
                rule: Some(""),
                ..borrowed
            },
            SlotRef {
                uid: "u-2",
                ..borrowed
            },
            SlotRef {
                cluster: "staging",
                ..borrowed
            },
            SlotRef {
                class: "manual_edit",
                ..borrowed
            },
        ] {
            assert_eq!(get(other), None, "{other:?}");
        }
        let plain = SlotRef {
            class: "manual_edit",
            rule: None,
            ..borrowed
        };
        assert_eq!(get(plain), Some(1));
    }
}
