//! `invariant`: a team's own rule (`rules.invariants`, a CEL condition) is broken on an object.
//! One drift per (object, rule): the rule's name is part of the identity, so two rules broken
//! on one object are two drifts. Each rule brings its severity and grace.
//!
//! The rule sees the object as Kubernetes names its fields (`object.spec...`,
//! `object.metadata.labels`), as drift-sentinel keeps it: the whole spec (a Pod's trimmed),
//! labels, annotations, owners, a ConfigMap's data, and the status fields the classes read
//! (conditions, observedGeneration, url, address, traffic, sinkUri, ...). A rule that cannot be
//! evaluated on an object (a missing field, a type mismatch, its budget spent) is neither held
//! nor broken: the engine counts it and an open drift stays as it is.
//!
//! A drift opened by an update carries the update's diff and its writer (who broke the rule);
//! while it stays open it keeps them.

use super::*;
use crate::classify::evidence::diff::{metadata_diff, spec_diff_with};
use crate::classify::evidence::hint::describe;
use crate::classify::invariants::{view, Bindings, Fields, Invariant, Parsed, Verdict};

/// The class id.
pub const ID: &str = "invariant";

/// `facts` key of the fields a remediation revert of the drift may write: a JSON array of the
/// rule's `revertFields` pointers.
pub const REVERT_FIELDS_FACT: &str = "revertFields";

/// The class.
pub(crate) struct InvariantBroken;

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: ID,
    english: "Invariant broken",
    chinese: "团队规则被违反",
    severity: Severity::Warning,
};

impl DriftClass for InvariantBroken {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn defaults(&self) -> ClassDefaults {
        // Severity and grace are each rule's own (`rules.invariants[].severity`, `.grace`).
        ClassDefaults {
            enabled: true,
            grace: secs(120),
            grace_follows_default: false,
        }
    }

    fn reassessable(&self) -> bool {
        // A rule reads the object's current state.
        true
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let rules = context.rules.invariants();
        let object = context.after;
        if rules.is_empty() || object.deleted {
            return Vec::new();
        }
        let mut verdicts = Vec::new();
        let mut selected: Vec<&Invariant> = Vec::new();
        for rule in rules {
            // A rule about a transition (it names `oldObject`) is judged on updates only: without
            // the state before (an object's first sight, a re-assessment) it has nothing to say,
            // and must not resolve what an update found.
            if rule.names_old_object() && context.before.is_none() {
                continue;
            }
            if rule.selects(object) {
                selected.push(rule);
            } else if !rule.selector.match_labels.is_empty()
                && context
                    .open_rule_drift(object, ID, Some(&rule.name))
                    .is_some()
            {
                // Only labels can move an object out of a rule's selection (its kind, namespace
                // and cluster never change).
                verdicts.push(
                    Assessment::clear(object, "the rule no longer selects the object")
                        .for_rule(&rule.name),
                );
            }
        }
        if selected.is_empty() {
            return verdicts;
        }
        // Only what the selected rules read is bound (and the status parsed only if read).
        let (mut reads, mut reads_old) = (Fields::default(), Fields::default());
        for rule in &selected {
            rule.read_fields(&mut reads, &mut reads_old);
        }
        let spec = context.after_spec();
        let status = if reads.reads("status") {
            object.status.value()
        } else {
            serde_json::Value::Null
        };
        let after = view(object, &spec, &status, reads.reads("data"));
        let needs_old = !reads_old.is_empty();
        let old = context.before.filter(|_| needs_old).map(|before| {
            let parsed = Parsed::of(before);
            (before, parsed)
        });
        let old_view = old.as_ref().map(|(before, parsed)| {
            view(
                before,
                &parsed.spec,
                &parsed.status,
                reads_old.reads("data"),
            )
        });
        let bindings = Bindings::new(&after, old_view.as_ref(), &reads, &reads_old);
        for rule in selected {
            let verdict = match rule.judge(&bindings) {
                Verdict::Held => Assessment::clear(object, "the rule holds"),
                Verdict::Broken(message) => {
                    Assessment::holds(object, broken(context, rule, &message))
                }
                Verdict::Failed(error) => Assessment {
                    subject: object.key(),
                    rule: None,
                    finding: Finding::Failed {
                        kind: error.kind(),
                        error: error.to_string(),
                    },
                    judge_again: JudgeAgain::Untimed,
                },
            };
            verdicts.push(verdict.for_rule(&rule.name));
        }
        verdicts
    }
}

/// The evidence of a broken rule: its message, and what changed and who changed it when the
/// change that broke it is known.
fn broken(context: &Context<'_>, rule: &Invariant, message: &str) -> Evidence {
    let object = context.after;
    let mut found = evidence(format!("{}: {message}", rule.name));
    found.severity = Some(rule.severity);
    found.facts.insert("rule".to_string(), rule.name.clone());
    if !rule.revert_fields.is_empty() {
        // What a remediation revert of this drift may write (the rule's `revertFields`).
        found.facts.insert(
            REVERT_FIELDS_FACT.to_string(),
            serde_json::Value::from(rule.revert_fields.clone()).to_string(),
        );
    }
    if !rule.description.is_empty() {
        found
            .facts
            .insert("description".to_string(), rule.description.clone());
    }
    found.hint = Some(format!(
        "{}  # then bring it back within the rule, or change the rule `{}`",
        describe(
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.name
        ),
        rule.name
    ));
    match context.open_rule_drift(object, ID, Some(&rule.name)) {
        // The change that broke the rule stays the evidence while the drift is open.
        Some(open) => {
            found.changes = open.evidence.changes.clone();
            found.actor = open.evidence.actor.clone();
        }
        None => {
            if let Some(before) = context.before {
                let after_text =
                    (!before.spec.same_text(&object.spec)).then(|| context.after_spec_text());
                let mut changes =
                    spec_diff_with(before, object, after_text.as_deref(), context.rules);
                if before.labels != object.labels || before.annotations != object.annotations {
                    changes.extend(metadata_diff(before, object, context.rules));
                    changes.truncate(drift_model::MAX_CHANGES);
                }
                found.actor = changes
                    .first()
                    .and_then(|change| context.attribute(&change.path));
                found.changes = changes;
            }
        }
    }
    found
}
