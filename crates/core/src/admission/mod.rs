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
//! Facts and sources: `docs/admission.md`'s sources are the shared reference on
//! ValidatingAdmissionPolicy (Kubernetes' `admissionregistration/v1/types.go`, the VAP plugin).

mod functions;
mod manifest;
mod protect;
mod simulate;

use std::collections::BTreeMap;

use crate::classify::evidence::hint::plural;
use crate::classify::invariants::{Invariant, Message};
use drift_cel::admission::analyze;

/// What the export reads of an expression (the CEL layer's; re-exported for the fuzz targets).
pub use drift_cel::admission as expression;
pub use functions::{unavailable, OLDEST_MINOR};
pub use manifest::manifests;
pub use protect::{protect_managed, DEFAULT_ALLOWED_USERS};
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
    /// Why.
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
                        reason: "it selects clusters by name; give --cluster to export it for \
                                 the cluster the policy is installed in"
                            .to_string(),
                    });
                    continue;
                }
            }
        }
        match policy(rule, options) {
            Ok(policy) => export.policies.push(policy),
            Err(reason) => export.refused.push(Refusal {
                rule: rule.name.clone(),
                reason,
            }),
        }
    }
    export
}

/// The label and annotation maps an exported expression reads through `variables`.
const METADATA_MAPS: &[(&str, &str, &str)] = &[
    ("object", "labels", "objectLabels"),
    ("object", "annotations", "objectAnnotations"),
    ("oldObject", "labels", "oldObjectLabels"),
    ("oldObject", "annotations", "oldObjectAnnotations"),
];

fn policy(rule: &Invariant, options: &Options) -> Result<Policy, String> {
    let resource_rules = resource_rules(rule)?;
    for pattern in rule
        .selector
        .namespaces
        .iter()
        .chain(&rule.selector.exclude_namespaces)
    {
        if pattern.contains(['*', '?', '[']) {
            return Err(format!(
                "its namespace pattern {pattern:?} is a glob; a namespace selector can only \
                 name namespaces"
            ));
        }
    }
    let reads_old = rule.names_old_object();
    let mut sources = vec![("expression", rule.condition.source().to_string())];
    if let Message::Expression(message) = &rule.message {
        sources.push(("messageExpression", message.source().to_string()));
    }
    // Whether the rule may select objects of a kind (its apiVersion and kind globs alone).
    let selects = |kind: &str, api_version: &str| {
        let any = |patterns: &[String], text: &str| {
            patterns.is_empty()
                || patterns
                    .iter()
                    .any(|pattern| drift_model::glob::glob_match(pattern, text))
        };
        any(&rule.selector.api_versions, api_version) && any(&rule.selector.kinds, kind)
    };
    let mut rewritten = Vec::new();
    let mut used = Vec::new();
    let mut total_cost = 0u64;
    for (field, source) in sources {
        let mut text = source.clone();
        for (variable, map, name) in METADATA_MAPS {
            let renamed = drift_cel::admission::rename_path(
                &text,
                &[variable, "metadata", map],
                &format!("variables.{name}"),
            );
            if renamed != text && !used.contains(name) {
                used.push(*name);
            }
            text = renamed;
        }
        let analysis = analyze(&text).map_err(|error| format!("{field}: {error}"))?;
        if let Some(name) = analysis
            .bound
            .iter()
            .find(|name| ["object", "oldObject", "variables", "request"].contains(&name.as_str()))
        {
            return Err(format!(
                "{field} binds {name:?} in a macro; the API server's variable of that name \
                 would be hidden"
            ));
        }
        if let Some(name) = analysis
            .functions
            .iter()
            .find_map(|name| unavailable(name, options.minor))
        {
            return Err(format!("{field} calls {name}"));
        }
        for (variable, fields) in [
            ("object", &analysis.object),
            ("oldObject", &analysis.old_object),
        ] {
            if let Some(reason) = unexportable_read(variable, fields, &selects) {
                return Err(format!("{field} {reason}"));
            }
        }
        if analysis.cost > PER_EXPRESSION_LIMIT {
            return Err(format!(
                "{field}'s estimated cost, {} units, is over the API server's limit of \
                 {PER_EXPRESSION_LIMIT} per expression (it would fail requests at run time)",
                analysis.cost
            ));
        }
        total_cost = total_cost.saturating_add(analysis.cost);
        rewritten.push(text);
    }
    if total_cost > PER_POLICY_LIMIT {
        return Err(format!(
            "its expressions' estimated cost, {total_cost} units, is over the API server's \
             budget of {PER_POLICY_LIMIT} per policy"
        ));
    }
    let mut match_conditions = Vec::new();
    if reads_old {
        // The sink judges a rule that reads oldObject on updates only.
        match_conditions.push(Named {
            name: "update-only".to_string(),
            expression: "oldObject != null".to_string(),
        });
    }
    if !rule.selector.match_labels.is_empty() {
        // The object selector also matches when only the old object carries the labels; the
        // sink selects on the object as it is now.
        let tests: Vec<String> = rule
            .selector
            .match_labels
            .iter()
            .map(|(key, value)| {
                format!(
                    "object.metadata.labels[{}] == {}",
                    cel_string(key),
                    cel_string(value)
                )
            })
            .collect();
        match_conditions.push(Named {
            name: "labels-on-the-object".to_string(),
            expression: format!(
                "has(object.metadata.labels) && {}",
                rule.selector
                    .match_labels
                    .keys()
                    .map(|key| format!("{} in object.metadata.labels", cel_string(key)))
                    .chain(tests)
                    .collect::<Vec<_>>()
                    .join(" && ")
            ),
        });
    }
    let variables = METADATA_MAPS
        .iter()
        .filter(|(_, _, name)| used.contains(name))
        .map(|(variable, map, name)| Named {
            name: (*name).to_string(),
            expression: format!(
                "{variable} != null && has({variable}.metadata.{map}) ? \
                 {variable}.metadata.{map} : {{}}"
            ),
        })
        .collect();
    let mut rewritten = rewritten.into_iter();
    let expression = rewritten.next().unwrap_or_default();
    let message_expression = rewritten.next();
    let message = match &rule.message {
        Message::Text(text) if !text.is_empty() => Some(one_line(text)),
        // The sink's words for a rule without a message.
        _ => Some(one_line(&format!(
            "breaks the rule: {}",
            if rule.description.is_empty() {
                &rule.name
            } else {
                &rule.description
            }
        ))),
    };
    Ok(Policy {
        name: policy_name(&rule.name),
        rule: rule.name.clone(),
        description: rule.description.clone(),
        resource_rules,
        namespaces: rule.selector.namespaces.clone(),
        excluded_namespaces: rule.selector.exclude_namespaces.clone(),
        object_labels: rule.selector.match_labels.clone(),
        match_conditions,
        variables,
        expression,
        message,
        message_expression,
    })
}

/// Why a rule's reads of `variable` cannot be judged by the API server as the sink judges
/// them; `selects(kind, apiVersion)` says whether the rule may select such an object.
fn unexportable_read(
    variable: &str,
    fields: &drift_cel::Fields,
    selects: &dyn Fn(&str, &str) -> bool,
) -> Option<String> {
    if fields.is_empty() {
        return None;
    }
    if fields.is_whole() {
        return Some(format!(
            "reads {variable} whole (or by index), which the sink binds only in part"
        ));
    }
    if fields.reads("status") {
        return Some(format!(
            "reads {variable}.status, which a user never writes through the main resource (the \
             API server has none on CREATE and the stored one on UPDATE) and which the sink \
             keeps only in part"
        ));
    }
    if let Some(metadata) = fields.child("metadata") {
        if metadata.is_whole() {
            return Some(format!("reads {variable}.metadata whole"));
        }
        if let Some(key) = metadata
            .names()
            .find(|key| !["name", "namespace"].contains(key))
        {
            return Some(format!(
                "reads {variable}.metadata.{key}, which the sink does not bind as the API server \
                 does"
            ));
        }
    }
    if let Some(key) = fields
        .names()
        .find(|key| !["apiVersion", "kind", "metadata", "spec", "data"].contains(key))
    {
        return Some(format!(
            "reads {variable}.{key}, which the sink does not bind"
        ));
    }
    if fields.reads("spec") && selects("Pod", "v1") {
        return Some(format!(
            "reads {variable}.spec of Pods, of which the sink keeps only the containers' names \
             and images"
        ));
    }
    if fields.reads("data") && selects("Secret", "v1") {
        return Some(format!(
            "reads {variable}.data of Secrets, whose values the sink holds only as hashes"
        ));
    }
    None
}

/// The `resourceRules` of a rule's `match`.
fn resource_rules(rule: &Invariant) -> Result<Vec<ResourceRule>, String> {
    let api_versions = if rule.selector.api_versions.is_empty() {
        vec!["*/*".to_string()]
    } else {
        rule.selector.api_versions.clone()
    };
    let mut rules = Vec::new();
    for api_version in &api_versions {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let glob = |text: &str| text.contains(['*', '?', '[']);
        if glob(group) && group != "*" {
            return Err(format!(
                "its apiVersion {api_version:?} is a glob over groups; an admission rule names \
                 its groups"
            ));
        }
        if glob(version) && version != "*" {
            return Err(format!(
                "its apiVersion {api_version:?} is a glob over versions other than *"
            ));
        }
        let resources = if rule.selector.kinds.is_empty() {
            vec!["*".to_string()]
        } else {
            let mut resources = Vec::new();
            for kind in &rule.selector.kinds {
                if glob(kind) {
                    return Err(format!(
                        "its kind {kind:?} is a glob; an admission rule names its resources"
                    ));
                }
                resources.push(plural(kind));
            }
            resources
        };
        rules.push(ResourceRule {
            groups: vec![group.to_string()],
            versions: vec![version.to_string()],
            resources,
            operations: vec!["CREATE".to_string(), "UPDATE".to_string()],
        });
    }
    Ok(rules)
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
