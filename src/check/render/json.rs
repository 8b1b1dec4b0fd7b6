//! The JSON structure documented in `docs/check.md` (`schemaVersion` 1). Scripts read it, so
//! fields are only ever added: renaming or removing one needs a new `schemaVersion`.

use serde_json::{json, Value};

use crate::check::Report;
use drift_model::Severity;

/// The JSON structure: `{schemaVersion, summary: {objects, findings, bySeverity, failOn,
/// failing, result}, findings: [{object, group, apiVersion, kind, namespace, name, class, rule,
/// severity, failing, message, diff: [{path, desired, desiredFrom, live, clusters?}], hint}],
/// defaults: [{configMap, found, notes}], rules: [{name, description, severity, selected,
/// broken, errors: [{object, error}]}]}`. Absent values are `null`.
pub(crate) fn render_json(report: &Report) -> Value {
    let findings: Vec<Value> = report
        .findings()
        .map(|(object, finding)| {
            json!({
                "object": object.reference(),
                "group": object.group,
                "apiVersion": object.api_version,
                "kind": object.kind,
                "namespace": object.namespace,
                "name": object.name,
                "class": finding.class,
                "rule": finding.rule,
                "severity": finding.severity.as_str(),
                "failing": finding.severity >= report.fail_on,
                "message": finding.message,
                "diff": finding.diff.iter().map(|change| {
                    let mut entry = json!({
                        "path": change.path,
                        "desired": change.desired,
                        "desiredFrom": change.desired_from,
                        "live": change.live,
                    });
                    // `compare` only: every cluster's value (absent: null).
                    if !change.clusters.is_empty() {
                        entry["clusters"] = Value::Object(change.clusters.iter().map(|(cluster, value)| {
                            (cluster.clone(), value.clone().unwrap_or(Value::Null))
                        }).collect());
                    }
                    entry
                }).collect::<Vec<_>>(),
                "hint": finding.hint,
            })
        })
        .collect();
    json!({
        "schemaVersion": 1,
        "summary": {
            "objects": report.objects.len(),
            "findings": findings.len(),
            "bySeverity": {
                "critical": report.count(Severity::Critical),
                "warning": report.count(Severity::Warning),
                "info": report.count(Severity::Info),
            },
            "failOn": report.fail_on.as_str(),
            "failing": report.failing(),
            "result": if report.failed() { "fail" } else { "pass" },
        },
        "findings": findings,
        "defaults": report.defaults.iter().map(|source| json!({
            "configMap": source.config_map,
            "found": source.found,
            "notes": source.notes,
        })).collect::<Vec<_>>(),
        "rules": report.rules.iter().map(|rule| json!({
            "name": rule.name,
            "description": rule.description,
            "severity": rule.severity.as_str(),
            "transition": rule.transition,
            "selected": rule.selected,
            "broken": rule.broken,
            "errors": rule.errors.iter().map(|(object, error)| json!({
                "object": object,
                "error": error,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
