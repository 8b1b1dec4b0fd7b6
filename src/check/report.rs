//! The result of a check: every object checked, with its findings, each with the changed fields
//! and a fix. Plain data, no I/O. As [`super::check`] builds it, objects are sorted by namespace,
//! kind, name and group and each object's findings come in a stable order, which is what makes
//! rendering deterministic.

use serde_json::Value;

use drift_core::classify::defaults::DefaultsSource;
use drift_model::{FieldChange, Severity};

/// One changed field: desired (baseline) and live value; `None` when absent.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffEntry {
    /// JSON pointer.
    pub path: String,
    /// The desired value.
    pub desired: Option<Value>,
    /// The live value.
    pub live: Option<Value>,
    /// Where the desired value came from when the manifest leaves the field out (Knative's
    /// default and its ConfigMap, or a behavioural key that must be absent).
    pub desired_from: Option<String>,
    /// `compare` only: every cluster's value, in the order the snapshots were given (`desired`
    /// is then the value most of them hold, `live` the first other value). Empty for `check`.
    pub clusters: Vec<(String, Option<Value>)>,
}

impl From<&FieldChange> for DiffEntry {
    fn from(change: &FieldChange) -> DiffEntry {
        DiffEntry {
            path: change.path.clone(),
            desired: change.before.clone(),
            live: change.after.clone(),
            desired_from: None,
            clusters: Vec::new(),
        }
    }
}

/// One thing wrong with one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// `missing`, `extra`, `spec_drift`, `config_drift`, or an engine class id.
    pub class: String,
    /// The team invariant of an `invariant` finding.
    pub rule: Option<String>,
    /// Severity.
    pub severity: Severity,
    /// One sentence.
    pub message: String,
    /// Changed fields, if any.
    pub diff: Vec<DiffEntry>,
    /// A command or step that fixes it.
    pub hint: Option<String>,
}

/// One object checked and what was found.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectReport {
    /// API group (empty for core).
    pub group: String,
    /// `apiVersion`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty when cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Findings, in a stable order.
    pub findings: Vec<Finding>,
}

impl ObjectReport {
    /// `Kind.group/namespace/name` (`Kind/namespace/name` for the core group): unambiguous, a
    /// Knative Service is never confused with a core Service.
    pub fn reference(&self) -> String {
        drift_core::manifest::format_reference(&self.group, &self.kind, &self.namespace, &self.name)
    }
}

/// What one team invariant found in the snapshot. Its broken objects are `invariant` findings
/// of those objects; evaluation errors are listed here and do not fail the check.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleOutcome {
    /// The rule's name.
    pub name: String,
    /// Why the rule exists.
    pub description: String,
    /// The severity of its findings.
    pub severity: Severity,
    /// True for a rule about a transition (it names `oldObject`): judged on updates only, so
    /// not on a snapshot.
    pub transition: bool,
    /// Live objects the rule selects.
    pub selected: usize,
    /// Objects that break it.
    pub broken: usize,
    /// Objects it could not be evaluated on: (object, error).
    pub errors: Vec<(String, String)>,
}

/// The result of a check.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Every object checked, sorted by namespace, kind, name, group.
    pub objects: Vec<ObjectReport>,
    /// What each team invariant found, in config order (empty without invariants).
    pub rules: Vec<RuleOutcome>,
    /// Where Knative's defaults came from: each ConfigMap found in the snapshot, or built-in.
    pub defaults: Vec<DefaultsSource>,
    /// Findings at or above this severity fail the check.
    pub fail_on: Severity,
    /// The command that made the report (`check`, `compare`): the Markdown heading and the
    /// JUnit suite name say which gate spoke.
    pub command: &'static str,
}

impl Report {
    /// Every finding with its object.
    pub fn findings(&self) -> impl Iterator<Item = (&ObjectReport, &Finding)> {
        self.objects
            .iter()
            .flat_map(|object| object.findings.iter().map(move |finding| (object, finding)))
    }

    /// Number of findings of one severity.
    pub(crate) fn count(&self, severity: Severity) -> usize {
        self.findings()
            .filter(|(_, finding)| finding.severity == severity)
            .count()
    }

    /// Number of findings at or above `fail_on`.
    pub(crate) fn failing(&self) -> usize {
        self.findings()
            .filter(|(_, finding)| finding.severity >= self.fail_on)
            .count()
    }

    /// True when the check fails (exit code 1).
    pub fn failed(&self) -> bool {
        self.failing() > 0
    }
}
