//! Team invariants as Kubernetes ValidatingAdmissionPolicies (`admission export`): the same
//! rules, judged by the API server before a change is stored, with the verdicts the sink would
//! give (pure: rules in, policies and refusals out).
//!
//! Where the sink's `object` and the API server's differ, the export rewrites the rule or
//! refuses it, so that a policy never refuses what the sink would let pass (or the reverse):
//!
//! * absent labels or annotations are absent in the API server (the sink binds an empty map):
//!   the expression reads them through `variables.objectLabels` (and the like), bound to an
//!   empty map when the object has none;
//! * the API server's object selector matches when the object *or* the old object carries the
//!   labels; the sink selects on the new object: a match condition reads the new object's;
//! * `oldObject` is null on CREATE; the sink judges a rule that reads it on updates only: a
//!   match condition skips CREATE for such a rule;
//! * `status` is never what a user writes through the main resource (none on CREATE, the stored
//!   one on UPDATE), the sink keeps only part of it, a Pod's spec is kept in part, a Secret's
//!   values are hashed, and of `metadata` the sink binds only some fields: a rule that reads
//!   any of those is refused, with the reason;
//! * functions: only those the API server's CEL offers at the targeted Kubernetes version
//!   ([`functions`]); cost: estimated in the API server's units ([`drift_cel::admission`]) and
//!   refused over its limits, which the API server enforces only at run time, by failing
//!   requests.
//!
//! Facts and sources: Kubernetes' `admissionregistration/v1/types.go` (the API), `k8s.io/apiserver`
//! `pkg/admission/plugin/policy/validating` and `pkg/admission/plugin/cel` (how a policy is
//! matched and evaluated, its variables), `pkg/cel/environment` (the libraries by version) and
//! `pkg/apis/cel/config.go` (the cost limits).

mod functions;
mod manifest;
mod protect;
mod rule;
mod simulate;

use std::collections::BTreeMap;

use crate::classify::invariants::Invariant;

/// What the export reads of an expression (the CEL layer's; re-exported for the fuzz targets).
pub use drift_cel::admission as expression;
pub use functions::{unavailable, OLDEST_MINOR};
pub use manifest::manifests;
pub use protect::{protect_managed, ALLOWED_GROUPS, DEFAULT_ALLOWED_USERS};
pub use simulate::{evaluate, Decision, Request};

/// The API server's cost limit for one expression (`PerCallLimit`).
pub const PER_EXPRESSION_LIMIT: u64 = 1_000_000;
/// The API server's cost budget for one policy's evaluation (`RuntimeCELCostBudget`).
pub const PER_POLICY_LIMIT: u64 = 10_000_000;
/// The label every written object carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "drift-sentinel");
/// The annotation naming the rule a policy was made from.
pub const RULE_ANNOTATION: &str = "drift-sentinel.dev/rule";

/// What a binding does with a failed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Action {
    /// A warning to the client and an audit annotation (`[Warn, Audit]`).
    #[default]
    Warn,
    /// An audit annotation only.
    Audit,
    /// The request refused, and an audit annotation (`[Deny, Audit]`).
    Deny,
}

impl Action {
    /// The binding's `validationActions` (Kubernetes refuses `Deny` with `Warn`).
    pub fn validation_actions(self) -> &'static [&'static str] {
        match self {
            Action::Warn => &["Warn", "Audit"],
            Action::Audit => &["Audit"],
            Action::Deny => &["Deny", "Audit"],
        }
    }
}

/// How to export.
#[derive(Debug, Clone)]
pub struct Options {
    /// What the bindings do.
    pub action: Action,
    /// The Kubernetes minor version the API server runs (1.`minor`): which functions a new
    /// policy's expressions may use.
    pub minor: u32,
    /// The cluster the policies are for: rules that select clusters are exported only when it
    /// is one of theirs.
    pub cluster: Option<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            action: Action::Warn,
            minor: OLDEST_MINOR,
            cluster: None,
        }
    }
}

/// One `resourceRules` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRule {
    /// `Namespaced` for a rule that names namespaces (a namespace selector matches every
    /// cluster-scoped object, which the sink's rule never selects); `None`: any scope.
    pub scope: Option<&'static str>,
    /// API groups (`""` is the core group).
    pub groups: Vec<String>,
    /// Versions.
    pub versions: Vec<String>,
    /// Resources (plural, lower case; `*`: every one, never a subresource).
    pub resources: Vec<String>,
    /// Operations.
    pub operations: Vec<String>,
}

/// A named CEL expression (a match condition or a variable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Its name.
    pub name: String,
    /// The expression.
    pub expression: String,
}

/// A policy and what its binding needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The object's name (`drift-sentinel-<rule>`).
    pub name: String,
    /// The rule it was made from (`protect-managed` for that policy).
    pub rule: String,
    /// What it is for.
    pub description: String,
    /// What it matches.
    pub resource_rules: Vec<ResourceRule>,
    /// Namespaces it applies to (`kubernetes.io/metadata.name` in), none: all.
    pub namespaces: Vec<String>,
    /// Namespaces it leaves out.
    pub excluded_namespaces: Vec<String>,
    /// Labels the object (or the old one) must carry.
    pub object_labels: BTreeMap<String, String>,
    /// Match conditions, in order.
    pub match_conditions: Vec<Named>,
    /// Variables, in order.
    pub variables: Vec<Named>,
    /// The validation's expression.
    pub expression: String,
    /// Its fixed message (one line).
    pub message: Option<String>,
    /// Its message expression.
    pub message_expression: Option<String>,
}

/// A rule that was not exported, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule's name.
    pub rule: String,
    /// A stable label of why: `name`, `cluster`, `selector`, `reads`, `function`, `binds`,
    /// `cost`, `syntax`.
    pub kind: &'static str,
    /// Why, in words.
    pub reason: String,
}

/// What an export gives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Export {
    /// The policies, in the rules' order.
    pub policies: Vec<Policy>,
    /// Rules that cannot run in the API server as the sink runs them.
    pub refused: Vec<Refusal>,
    /// Rules for other clusters (not an error).
    pub other_clusters: Vec<String>,
    /// What the user should check (a resource name guessed from a kind).
    pub notes: Vec<String>,
}

/// The name of the `--protect-managed` policy, which no rule's policy may take.
pub const PROTECT_MANAGED: &str = "drift-sentinel-protect-managed";

/// The policy name of a rule (`_` and `.` become `-`: a Kubernetes name has neither case nor
/// underscores).
pub fn policy_name(rule: &str) -> String {
    format!("drift-sentinel-{}", rule.replace(['_', '.'], "-"))
}

/// Exports `rules`. Two rules whose policy names would be the same (`a_b` and `a-b`, or one
/// rule given twice) are refused after the first: one would replace the other.
pub fn export(rules: &[Invariant], options: &Options) -> Export {
    let mut export = Export::default();
    let mut names: BTreeMap<String, String> =
        BTreeMap::from([(PROTECT_MANAGED.to_string(), "--protect-managed".to_string())]);
    for rule in rules {
        let name = policy_name(&rule.name);
        if let Some(first) = names.get(&name) {
            export.refused.push(Refusal {
                rule: rule.name.clone(),
                kind: "name",
                reason: format!(
                    "its policy would be named {name}, as {first}'s is; rename one of them"
                ),
            });
            continue;
        }
        names.insert(name, format!("rule {}", rule.name));
        if !rule.selector.clusters.is_empty() {
            match &options.cluster {
                Some(cluster)
                    if rule
                        .selector
                        .clusters
                        .iter()
                        .any(|pattern| drift_model::glob::glob_match(pattern, cluster)) => {}
                Some(_) => {
                    export.other_clusters.push(rule.name.clone());
                    continue;
                }
                None => {
                    export.refused.push(Refusal {
                        rule: rule.name.clone(),
                        kind: "cluster",
                        reason: "it selects clusters by name; give --cluster to export it for \
                                 the cluster the policy is installed in"
                            .to_string(),
                    });
                    continue;
                }
            }
        }
        match rule::policy(rule, options) {
            Ok((policy, notes)) => {
                export.policies.push(policy);
                export.notes.extend(notes);
            }
            Err((kind, reason)) => export.refused.push(Refusal {
                rule: rule.name.clone(),
                kind,
                reason,
            }),
        }
    }
    export
}

/// A CEL string literal of `text`.
fn cel_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}

/// A message on one line (Kubernetes refuses line breaks in `message`).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
