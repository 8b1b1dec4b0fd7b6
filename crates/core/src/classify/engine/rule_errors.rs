//! Invariants whose expression failed on an object: counted per rule and kind (for
//! `drift_sentinel_invariant_errors_total`), and reported once per object and rule until the
//! rule evaluates again on that object, so a rule that fails on every event logs once, not on
//! every event. Bounded: past the caps, failures are still counted but not remembered.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::classify::Rules;
use drift_model::ObjectKey;

/// Most (object, rule) pairs remembered as failing.
const MAX_FAILING: usize = 10_000;
/// Most failures waiting to be reported.
const MAX_REPORTS: usize = 1_000;

/// One rule that failed on one object, to be logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFailure {
    /// The rule's name.
    pub rule: String,
    /// `evaluation` or `budget`.
    pub kind: &'static str,
    /// The object.
    pub subject: ObjectKey,
    /// The object as people name it (`Service prod/shop`).
    pub object: String,
    /// What failed.
    pub error: String,
}

#[derive(Debug, Default)]
pub(super) struct RuleErrors {
    counts: BTreeMap<(String, &'static str), u64>,
    failing: HashMap<ObjectKey, BTreeSet<String>>,
    failing_pairs: usize,
    reports: Vec<RuleFailure>,
}

impl RuleErrors {
    pub(super) fn failed(
        &mut self,
        subject: &ObjectKey,
        rule: &str,
        kind: &'static str,
        error: &str,
        object: impl FnOnce() -> String,
    ) {
        *self.counts.entry((rule.to_string(), kind)).or_default() += 1;
        let known = self
            .failing
            .get(subject)
            .is_some_and(|rules| rules.contains(rule));
        if known || self.failing_pairs >= MAX_FAILING {
            return;
        }
        self.failing
            .entry(subject.clone())
            .or_default()
            .insert(rule.to_string());
        self.failing_pairs += 1;
        if self.reports.len() < MAX_REPORTS {
            self.reports.push(RuleFailure {
                rule: rule.to_string(),
                kind,
                subject: subject.clone(),
                object: object(),
                error: error.to_string(),
            });
        }
    }

    /// The rule evaluated on the object: a later failure is reported again.
    pub(super) fn recovered(&mut self, subject: &ObjectKey, rule: &str) {
        if self.failing.is_empty() {
            return;
        }
        if let Some(rules) = self.failing.get_mut(subject) {
            if rules.remove(rule) {
                self.failing_pairs -= 1;
            }
            if rules.is_empty() {
                self.failing.remove(subject);
            }
        }
    }

    /// Forgets an object that is gone.
    pub(super) fn forget_object(&mut self, subject: &ObjectKey) {
        if let Some(rules) = self.failing.remove(subject) {
            self.failing_pairs -= rules.len();
        }
    }

    /// Forgets failures of rules the rules no longer have.
    pub(super) fn forget_removed(&mut self, rules: &Rules) {
        for names in self.failing.values_mut() {
            let before = names.len();
            names.retain(|name| rules.invariant(name).is_some());
            self.failing_pairs -= before - names.len();
        }
        self.failing.retain(|_, names| !names.is_empty());
    }

    pub(super) fn take_counts(&mut self) -> BTreeMap<(String, &'static str), u64> {
        std::mem::take(&mut self.counts)
    }

    pub(super) fn take_reports(&mut self) -> Vec<RuleFailure> {
        std::mem::take(&mut self.reports)
    }
}
