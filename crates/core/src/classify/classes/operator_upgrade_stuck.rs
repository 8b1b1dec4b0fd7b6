//! `operator_upgrade_stuck`: a Knative Operator `KnativeServing` or `KnativeEventing` has asked
//! for a version (`spec.version`) that it has not reached (`status.version`) past grace. The
//! operator installs one minor version at a time and an upgrade takes minutes; one that lasts
//! longer is stuck (a failed Deployment, a webhook that does not start, a skipped minor
//! version), and the cluster runs a mix of versions meanwhile. The evidence names the versions
//! and the failing condition (`InstallSucceeded=False ...`).
//!
//! Many installs leave `spec.version` unset: upgrading the operator then upgrades Knative, and
//! the CR is simply not ready while it does (`DeploymentsAvailable=False`, a first install's
//! `InstallSucceeded=Unknown`). So a `KnativeServing`/`KnativeEventing` that is not ready is this
//! class's too, with the same grace, and `not_ready` leaves the operator's CRs to it: an install
//! or upgrade of a few minutes is no alert, one that does not finish is.

use super::*;
use crate::classify::evidence::hint::describe;
use crate::classify::kinds::{self, OPERATOR};

/// The class.
pub(crate) struct OperatorUpgradeStuck;

/// True when an installed `status` version satisfies the requested `spec` one: equal, ignoring
/// a leading `v`; a request for a minor version (`1.15`) is satisfied by any of its patches
/// (`1.15.2`), which is how the operator resolves it.
fn satisfies(installed: &str, requested: &str) -> bool {
    let installed = installed.trim_start_matches('v');
    let requested = requested.trim_start_matches('v');
    installed == requested
        || (requested.matches('.').count() == 1
            && installed
                .strip_prefix(requested)
                .is_some_and(|rest| rest.starts_with('.')))
}

/// `(requested, installed)` when `object` is an operator CR that has not reached the version
/// it asks for; `installed` is empty before the first install finished.
pub(crate) fn upgrading(object: &ObjectState) -> Option<(String, String)> {
    if object.group() != OPERATOR
        || !matches!(object.kind.as_str(), "KnativeServing" | "KnativeEventing")
    {
        return None;
    }
    let requested = object.spec.pointer("/version")?;
    let requested = requested.as_str().filter(|version| !version.is_empty())?;
    let installed = object
        .status_field("version")
        .and_then(|version| version.as_str().map(str::to_string))
        .unwrap_or_default();
    if satisfies(&installed, requested) {
        return None;
    }
    Some((requested.to_string(), installed))
}

/// The finding for an operator CR that is not ready without a pinned version it has not reached.
fn not_ready_evidence(
    object: &ObjectState,
    conditions: &[crate::classify::state::Condition],
    installed: &str,
) -> drift_model::Evidence {
    let mut summary = format!("{} has not become ready", object.reference());
    if !installed.is_empty() {
        summary.push_str(&format!(" (installed version {installed})"));
    }
    let mut found = evidence(String::new());
    if let Some(ready) = kinds::happy_condition(conditions) {
        let culprit = kinds::culprit(conditions, ready);
        summary.push_str(&format!(": {}", culprit.describe()));
        found
            .facts
            .insert("condition".into(), culprit.condition_type.clone());
        found.facts.insert("reason".into(), culprit.reason.clone());
        found
            .facts
            .insert("message".into(), culprit.message.clone());
    }
    found.summary = summary;
    found
        .facts
        .insert("installedVersion".into(), installed.to_string());
    found.hint = Some(format!(
        "{}; kubectl -n knative-operator logs deploy/knative-operator",
        describe(
            &object.api_version,
            &object.kind,
            &object.namespace,
            &object.name
        )
    ));
    found
}

/// The class's catalogue entry.
static INFO: ClassInfo = ClassInfo {
    id: "operator_upgrade_stuck",
    english: "Operator upgrade stuck",
    chinese: "Operator 升级卡住",
    severity: Severity::Critical,
};

impl DriftClass for OperatorUpgradeStuck {
    fn info(&self) -> &'static ClassInfo {
        &INFO
    }

    fn applies_to_snapshot(&self) -> bool {
        true
    }

    fn defaults(&self) -> ClassDefaults {
        ClassDefaults {
            enabled: true,
            // An upgrade rolls every Knative Deployment; fifteen minutes is several times what
            // a healthy one takes.
            grace: secs(900),
            grace_follows_default: false,
        }
    }

    fn reassessable(&self) -> bool {
        // Read off the current spec and status alone.
        true
    }

    fn assess(&self, context: &Context<'_>) -> Vec<Assessment> {
        let object = context.after;
        if object.group() != OPERATOR || object.is_going_away() {
            return Vec::new();
        }
        if !matches!(object.kind.as_str(), "KnativeServing" | "KnativeEventing") {
            return Vec::new();
        }
        let conditions = object.conditions();
        let not_ready =
            kinds::happy_condition(&conditions).is_some_and(|ready| ready.status != "True");
        let Some((requested, installed)) = upgrading(object) else {
            if !not_ready {
                return vec![Assessment::clear(
                    object,
                    "requested version installed and ready",
                )];
            }
            let installed = object
                .status_field("version")
                .and_then(|version| version.as_str().map(str::to_string))
                .unwrap_or_default();
            return vec![Assessment::holds(
                object,
                not_ready_evidence(object, &conditions, &installed),
            )];
        };
        let mut summary = if installed.is_empty() {
            format!(
                "{} has not finished installing version {requested}",
                object.reference()
            )
        } else {
            format!(
                "{} is stuck upgrading from {installed} to {requested}",
                object.reference()
            )
        };
        let mut found = evidence(String::new());
        if let Some(ready) = kinds::happy_condition(&conditions) {
            if ready.status != "True" {
                let culprit = kinds::culprit(&conditions, ready);
                summary.push_str(&format!(": {}", culprit.describe()));
                found
                    .facts
                    .insert("condition".into(), culprit.condition_type.clone());
                found.facts.insert("reason".into(), culprit.reason.clone());
                found
                    .facts
                    .insert("message".into(), culprit.message.clone());
            }
        }
        found.summary = summary;
        found.facts.insert("requestedVersion".into(), requested);
        found.facts.insert("installedVersion".into(), installed);
        found.hint = Some(format!(
            "{}; kubectl -n knative-operator logs deploy/knative-operator  # the operator upgrades one minor version at a time",
            describe(
                &object.api_version,
                &object.kind,
                &object.namespace,
                &object.name
            )
        ));
        vec![Assessment::holds(object, found)]
    }
}

#[cfg(test)]
mod tests {
    use super::satisfies;

    #[test]
    fn a_minor_request_is_met_by_its_patches_only() {
        assert!(satisfies("1.15.2", "1.15"));
        assert!(satisfies("v1.15.2", "1.15.2"));
        assert!(!satisfies("1.14.9", "1.15"));
        assert!(!satisfies("1.150.0", "1.15"));
        assert!(!satisfies("", "1.15"));
        assert!(!satisfies("1.15.3", "1.15.2"));
    }
}
