//! Team invariants (`rules.invariants`): rules in CEL that every matching object must keep.
//!
//! An invariant selects objects (API version, kind, namespaces, labels, clusters) and holds a
//! condition that is true when the object is fine. The `invariant` class turns a broken rule
//! into a drift whose identity includes the rule's name; `check` and `invariants test` judge
//! snapshots with the same code. Evaluating never fails the caller: an expression that errors
//! on an object, or spends its budget, is a [`Verdict::Failed`], which is neither held nor
//! broken (the `drift-cel` crate has the bounds).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::classify::state::ObjectState;
use crate::decode::DataMap;
use drift_model::glob::glob_match;
use drift_model::{Pairs, Severity};

/// The wall-clock backstop of every evaluation on the calling thread (the service's writer
/// gives its monotonic clock; the commands give none and stay deterministic).
pub use drift_cel::{set_backstop_clock, BACKSTOP_MICROS};
pub use drift_cel::{Bindings, CompileError, EvalError, Expression, Fields, ObjectView, Returns};

/// Which objects a rule applies to. Empty lists select everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    /// `apiVersion` globs (`serving.knative.dev/*`).
    pub api_versions: Vec<String>,
    /// Kind globs.
    pub kinds: Vec<String>,
    /// Namespace globs.
    pub namespaces: Vec<String>,
    /// Namespace globs left out.
    pub exclude_namespaces: Vec<String>,
    /// Labels an object must carry (exact values).
    pub match_labels: BTreeMap<String, String>,
    /// Cluster name globs.
    pub clusters: Vec<String>,
}

impl Selector {
    /// True when the rule applies to an object with these coordinates.
    pub fn selects(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: &str,
        labels: &Pairs,
    ) -> bool {
        let any = |patterns: &[String], text: &str| {
            patterns.is_empty() || patterns.iter().any(|pattern| glob_match(pattern, text))
        };
        any(&self.api_versions, api_version)
            && any(&self.kinds, kind)
            && any(&self.namespaces, namespace)
            && any(&self.clusters, cluster)
            && !self
                .exclude_namespaces
                .iter()
                .any(|pattern| glob_match(pattern, namespace))
            && self
                .match_labels
                .iter()
                .all(|(key, value)| labels.get(key) == Some(value.as_str()))
    }
}

/// What a finding says when a rule is broken.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Fixed text.
    Text(String),
    /// A CEL string expression (`messageExpression`).
    Expression(Expression),
}

/// One compiled invariant.
#[derive(Debug, Clone, PartialEq)]
pub struct Invariant {
    /// The rule's name: part of its drifts' identity, a metric label.
    pub name: String,
    /// Why the rule exists (shown with its findings).
    pub description: String,
    /// Which objects it applies to.
    pub selector: Selector,
    /// True when the object is fine.
    pub condition: Expression,
    /// What a finding says.
    pub message: Message,
    /// Severity of its drifts.
    pub severity: Severity,
    /// How long it must stay broken before its drift fires.
    pub grace: Duration,
    /// The fields a remediation `revert` of its drifts may put back (JSON pointers).
    pub revert_fields: Vec<String>,
}

/// A rule's verdict on one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The rule holds.
    Held,
    /// The rule is broken; the message says how.
    Broken(String),
    /// The rule could not be evaluated on this object.
    Failed(EvalError),
}

impl Invariant {
    /// True when the rule applies to this object.
    pub fn selects(&self, object: &ObjectState) -> bool {
        self.selector.selects(
            &object.cluster,
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.labels,
        )
    }

    /// The rule's verdict on the bound object.
    pub fn judge(&self, bindings: &Bindings<'_>) -> Verdict {
        match self.condition.holds(bindings) {
            Ok(true) => Verdict::Held,
            Ok(false) => Verdict::Broken(match &self.message {
                Message::Text(text) if !text.is_empty() => text.clone(),
                Message::Text(_) => format!("breaks the rule: {}", self.description_or_name()),
                // A message that fails to evaluate must not hide the broken rule.
                Message::Expression(message) => message.text(bindings).unwrap_or_else(|error| {
                    format!(
                        "breaks the rule: {} (its message failed: {error})",
                        self.description_or_name()
                    )
                }),
            }),
            Err(error) => Verdict::Failed(error),
        }
    }

    /// True when the condition or the message names `oldObject`.
    pub fn names_old_object(&self) -> bool {
        self.condition.names_old_object()
            || matches!(&self.message, Message::Expression(message) if message.names_old_object())
    }

    /// Adds to `object` and `old` what the condition and the message read of `object` and
    /// `oldObject`.
    pub(crate) fn read_fields(&self, object: &mut Fields, old: &mut Fields) {
        let mut add = |expression: &Expression| {
            let (reads, reads_old) = expression.fields();
            object.merge(reads);
            old.merge(reads_old);
        };
        add(&self.condition);
        if let Message::Expression(message) = &self.message {
            add(message);
        }
    }

    fn description_or_name(&self) -> &str {
        if self.description.is_empty() {
            &self.name
        } else {
            &self.description
        }
    }
}

/// The parsed parts of an object state that a view borrows.
pub struct Parsed {
    /// `spec`.
    pub spec: serde_json::Value,
    /// The kept `status`.
    pub status: serde_json::Value,
}

impl Parsed {
    /// Parses a state's spec and kept status.
    pub fn of(state: &ObjectState) -> Parsed {
        Parsed {
            spec: state.spec.value(),
            status: state.status.value(),
        }
    }
}

/// An object state as rules see it. `spec` may be borrowed from elsewhere (the event's own
/// parsed spec) to save parsing it again; a ConfigMap's values are bound only when `data` is
/// read (a rule that selects ConfigMaps for their labels does not parse them).
pub fn view<'v>(
    state: &'v ObjectState,
    spec: &'v serde_json::Value,
    status: &'v serde_json::Value,
    data: bool,
) -> ObjectView<'v> {
    ObjectView {
        api_version: &state.api_version,
        kind: &state.kind,
        name: &state.name,
        namespace: &state.namespace,
        uid: &state.uid,
        resource_version: &state.resource_version,
        generation: state.generation,
        creation_timestamp: state.creation_timestamp.as_deref(),
        deletion_timestamp: state.deletion_timestamp.as_deref(),
        labels: &state.labels,
        annotations: &state.annotations,
        owners: &state.owners,
        spec,
        status,
        data: state.data.as_deref().filter(|_| data).map(DataMap::map),
    }
}

/// A rule's verdict on one object as the service judges it (the object reduced to what the
/// service keeps of it, so a rule behaves the same in `check`, `invariants test` and the sink);
/// `None` when the rule does not select the object, or names `oldObject` (judged on updates
/// only, and a snapshot has no update).
pub fn judge_object(
    rule: &Invariant,
    cluster: &str,
    object: &crate::decode::KubeObject,
) -> Option<Verdict> {
    let state = ObjectState::from_object(cluster, object, 0);
    if rule.names_old_object() || !rule.selects(&state) {
        return None;
    }
    let parsed = Parsed::of(&state);
    let object = view(&state, &parsed.spec, &parsed.status, true);
    let (mut reads, mut reads_old) = (Fields::default(), Fields::default());
    rule.read_fields(&mut reads, &mut reads_old);
    let bindings = Bindings::new(&object, None, &reads, &reads_old);
    Some(rule.judge(&bindings))
}
