//! [`check`]: the comparison itself. The baseline side gives `missing`, `spec_drift` and
//! `config_drift`; the live side gives `extra`; the engine's state-based classes are added from
//! [`super::engine`]. Pure and deterministic: no I/O, no clock, and every map is ordered, so the
//! same inputs give the same report. Bad input is an [`Error`], never a panic.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::engine::snapshot_drifts;
use super::normalize::{
    decode_live, desired_state, hashed_secret, live_manifest, Live, CLUSTER, SNAPSHOT_TIME,
};
use super::report::{DiffEntry, Finding, ObjectReport, Report};
use super::Error;
use drift_core::classify::baseline::{compare, KnativeDefaults, Normalization};
use drift_core::classify::defaults::NO_DATA;
use drift_core::classify::evidence::hint::{
    namespace_flag, resource_name, revert_patch, shell_quote,
};
use drift_core::classify::{classes, ObjectState, Rules};
use drift_core::decode::object::api_group;
use drift_core::manifest::{Document, ManifestKey, Manifests};
use drift_model::{FieldChange, Severity};

/// Class id: in the baseline, not live.
const MISSING: &str = "missing";
/// Class id: live, not in the baseline.
const EXTRA: &str = "extra";
/// Class id: the live object differs from its manifest.
const SPEC_DRIFT: &str = "spec_drift";
/// Class id: a ConfigMap's data differs from its manifest.
const CONFIG_DRIFT: &str = "config_drift";
/// The engine's class whose hint re-applies the spec's traffic split.
const TRAFFIC_DRIFT: &str = "traffic_drift";

/// Compares `live` with `baseline` under `rules` (ignore paths, class settings, thresholds,
/// scope, watched ConfigMaps). Pure. Fails only on bad input: a baseline object defined twice, or
/// a live object the decoder rejects. Without a baseline (`check --invariants` alone) nothing is
/// `missing`, `extra` or different: only the state-based classes and the invariants are judged,
/// since no file says what should exist.
pub fn check(
    baseline: Option<&Manifests>,
    live: &Manifests,
    rules: Arc<Rules>,
    fail_on: Severity,
) -> Result<Report, Error> {
    let no_baseline = Manifests::default();
    let baseline_given = baseline.is_some();
    let baseline = baseline.unwrap_or(&no_baseline);
    if let Some((key, first, second)) = baseline.duplicates().first() {
        return Err(Error::Duplicate {
            object: key.reference(),
            first: Box::new(first.clone()),
            second: Box::new(second.clone()),
        });
    }
    let mut parsed: BTreeMap<ManifestKey, Live> = BTreeMap::new();
    for (key, document) in live.iter() {
        let object = decode_live(key, &document.value).map_err(|source| Error::Invalid {
            origin: document.origin.clone(),
            source,
        })?;
        let state = ObjectState::from_object(CLUSTER, &object, SNAPSHOT_TIME);
        parsed.insert(
            key.clone(),
            Live {
                object,
                state,
                origin: document.origin.clone(),
            },
        );
    }

    // Knative's defaults as the snapshot has them (its ConfigMaps), else the built-in ones.
    let defaults = KnativeDefaults::from_config_maps(|namespace, name| {
        let key = ManifestKey {
            group: String::new(),
            kind: "ConfigMap".to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        parsed.get(&key).map(|found| {
            found
                .object
                .data
                .as_deref()
                .map_or(&NO_DATA, |data| data.map())
        })
    });

    let mut reports: BTreeMap<ManifestKey, ObjectReport> = BTreeMap::new();

    // The baseline side: missing objects, spec and data differences.
    for (key, document) in baseline.iter() {
        let api_version = text_at(&document.value, "/apiVersion");
        let in_scope = match parsed.get(key) {
            Some(found) => rules.in_scope(&found.state),
            None => desired_state(&document.value).is_none_or(|state| rules.in_scope(&state)),
        };
        if !in_scope {
            continue;
        }
        let mut report = new_report(key, &api_version);
        match parsed.get(key) {
            None => report.findings.push(missing(key, document, &parsed)),
            Some(found) => {
                report.findings.extend(differences(
                    key,
                    &api_version,
                    document,
                    found,
                    &rules,
                    &defaults,
                ));
            }
        }
        reports.insert(key.clone(), report);
    }

    // The live side: extra objects, and the Knative objects and watched ConfigMaps checked for
    // their state even when the baseline does not name them.
    for (key, found) in &parsed {
        if !baseline_given || baseline.get(key).is_some() || !rules.in_scope(&found.state) {
            continue;
        }
        let state = &found.state;
        let watched_config_map = state.is_kind("", "ConfigMap")
            && rules.is_watched_config_map(&state.namespace, &state.name);
        let knative = state.is_knative();
        if !(knative || watched_config_map) {
            continue;
        }
        let mut report = new_report(key, &found.object.api_version);
        if let Some(finding) = extra(found, watched_config_map) {
            report.findings.push(finding);
        }
        reports.insert(key.clone(), report);
    }

    // The state-based classes, by the engine itself.
    let (drifts, rule_outcomes) = snapshot_drifts(&parsed, rules);
    // Knative Services whose spec traffic differs from the baseline.
    let traffic_edited: BTreeSet<(String, String)> = reports
        .iter()
        .filter(|(key, report)| {
            is_knative_service(&key.group, &key.kind)
                && report.findings.iter().any(|finding| {
                    finding.class == SPEC_DRIFT
                        && finding
                            .diff
                            .iter()
                            .any(|entry| entry.path.starts_with("/spec/traffic"))
                })
        })
        .map(|(key, _)| (key.namespace.clone(), key.name.clone()))
        .collect();
    for drift in drifts {
        let key = ManifestKey {
            group: api_group(&drift.api_version).to_string(),
            kind: drift.kind.clone(),
            namespace: drift.namespace.clone(),
            name: drift.name.clone(),
        };
        let report = reports
            .entry(key.clone())
            .or_insert_with(|| new_report(&key, &drift.api_version));
        // When a Service's traffic itself differs from the baseline, the split its Route and
        // status show is not the thing to restore: `traffic_drift`'s own hint (re-apply the
        // spec's split, or look at the Route) would work against the `spec_drift` fix. Point
        // at that fix instead, on the Service and on its Route (named after it).
        let spec_traffic_drifted = traffic_edited
            .contains(&(drift.namespace.clone(), drift.name.clone()))
            && matches!(drift.kind.as_str(), "Service" | "Route");
        let hint = if drift.class == TRAFFIC_DRIFT && spec_traffic_drifted {
            Some(
                "the spec's traffic itself differs from the baseline: apply the spec_drift fix \
                 first; the served split follows the restored spec"
                    .to_string(),
            )
        } else {
            drift.evidence.hint.clone()
        };
        report.findings.push(Finding {
            class: drift.class.clone(),
            rule: drift.rule.clone(),
            severity: drift.severity,
            message: drift.evidence.summary.clone(),
            diff: drift.evidence.changes.iter().map(DiffEntry::from).collect(),
            hint,
        });
    }

    let mut objects: Vec<ObjectReport> = reports.into_values().collect();
    objects.sort_by(|a, b| {
        (&a.namespace, &a.kind, &a.name, &a.group).cmp(&(&b.namespace, &b.kind, &b.name, &b.group))
    });
    Ok(Report {
        objects,
        rules: rule_outcomes,
        defaults: defaults.sources().to_vec(),
        fail_on,
        command: "check",
    })
}

fn new_report(key: &ManifestKey, api_version: &str) -> ObjectReport {
    ObjectReport {
        group: key.group.clone(),
        api_version: api_version.to_string(),
        kind: key.kind.clone(),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        findings: Vec::new(),
    }
}

fn text_at(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn is_knative_service(group: &str, kind: &str) -> bool {
    group == classes::SERVING && kind == "Service"
}

fn missing(key: &ManifestKey, document: &Document, live: &BTreeMap<ManifestKey, Live>) -> Finding {
    let severity = if is_knative_service(&key.group, &key.kind) {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut message = "in the baseline but not in the live snapshot".to_string();
    if key.namespace.is_empty() {
        let elsewhere: Vec<&str> = live
            .keys()
            .filter(|other| {
                other.group == key.group && other.kind == key.kind && other.name == key.name
            })
            .map(|other| other.namespace.as_str())
            .filter(|namespace| !namespace.is_empty())
            .collect();
        if !elsewhere.is_empty() {
            message.push_str(&format!(
                "; the manifest sets no metadata.namespace, and live has it in namespace {}: set metadata.namespace in the manifest",
                elsewhere.join(", ")
            ));
        }
    }
    message.push_str(&format!("; manifest: {}", document.origin));
    Finding {
        class: MISSING.to_string(),
        rule: None,
        severity,
        message,
        diff: Vec::new(),
        hint: Some(format!(
            "kubectl apply -f {}",
            shell_quote(&document.origin.file)
        )),
    }
}

fn extra(found: &Live, watched_config_map: bool) -> Option<Finding> {
    let state = &found.state;
    let object = &found.object;
    let delete = format!(
        "kubectl{} delete {} {}",
        namespace_flag(&object.namespace),
        resource_name(&object.api_version, &object.kind),
        shell_quote(&object.name)
    );
    if watched_config_map {
        return Some(Finding {
            class: EXTRA.to_string(),
            rule: None,
            severity: Severity::Info,
            message: format!(
                "watched ConfigMap not in the baseline, so its data is not checked; live object: {}",
                found.origin
            ),
            diff: Vec::new(),
            hint: Some(format!(
                "kubectl{} get configmap {} -o yaml  # add its desired data to the baseline",
                namespace_flag(&object.namespace),
                shell_quote(&object.name)
            )),
        });
    }
    let made_by_knative = state.is_kind(classes::SERVING, "Revision")
        || classes::is_knative_child(state)
        || state.group().ends_with(".internal.knative.dev")
        || (matches!(state.kind.as_str(), "Configuration" | "Route")
            && state.label("serving.knative.dev/service").is_some());
    if made_by_knative {
        return None;
    }
    Some(Finding {
        class: EXTRA.to_string(),
        rule: None,
        severity: Severity::Warning,
        message: format!(
            "in the live snapshot but not in the baseline: deployed outside Git, or removed from Git and not pruned; live object: {}",
            found.origin
        ),
        diff: Vec::new(),
        hint: Some(format!("add it to the baseline, or delete it: {delete}")),
    })
}

fn differences(
    key: &ManifestKey,
    api_version: &str,
    document: &Document,
    found: &Live,
    rules: &Rules,
    defaults: &KnativeDefaults,
) -> Vec<Finding> {
    let object = &found.object;
    let is_secret = object.is_secret();
    let desired = if is_secret {
        hashed_secret(&document.value)
    } else {
        document.value.clone()
    };
    let live = live_manifest(object);
    let ignored = |path: &str| rules.is_ignored_path(&key.kind, path);
    let comparison = compare(
        &desired,
        &live,
        &Normalization {
            defaults,
            behavioural: &|key| rules.is_behavioural_key(key),
            ignored: &ignored,
        },
    );
    let entry = |change: &FieldChange| {
        let mut entry = DiffEntry::from(change);
        entry.desired_from = comparison.note(&change.path).map(str::to_string);
        entry
    };
    let mut changes = comparison.changes.clone();
    if is_secret {
        changes.extend(
            data_changes(&desired, &live)
                .into_iter()
                .filter(|change| !ignored(&change.path)),
        );
    }
    let is_config_map = key.group.is_empty() && key.kind == "ConfigMap";
    let (data, spec): (Vec<FieldChange>, Vec<FieldChange>) = changes
        .into_iter()
        .partition(|change| is_config_map && change.path.starts_with("/data/"));
    let mut findings = Vec::new();
    let reapply = format!("kubectl apply -f {}", shell_quote(&document.origin.file));
    if !spec.is_empty() {
        let paths: Vec<&str> = spec.iter().map(|change| change.path.as_str()).collect();
        let hint = if is_secret {
            Some(format!("re-apply the Secret from its source: {reapply}"))
        } else {
            revert_patch(api_version, &key.kind, &key.namespace, &key.name, &spec)
                .map(|patch| format!("{patch}  # {}", comparison.reapply_advice(&spec, &reapply)))
        };
        findings.push(Finding {
            class: SPEC_DRIFT.to_string(),
            rule: None,
            severity: Severity::Warning,
            message: format!(
                "differs from the baseline at {}; manifest: {}",
                paths.join(", "),
                document.origin
            ),
            diff: spec.iter().map(entry).collect(),
            hint,
        });
    }
    let settings = rules.class(CONFIG_DRIFT);
    if !data.is_empty() && settings.enabled {
        let keys: Vec<String> = data.iter().map(describe_data_change).collect();
        findings.push(Finding {
            class: CONFIG_DRIFT.to_string(),
            rule: None,
            severity: settings.severity,
            message: format!(
                "data differs from the baseline: {}; manifest: {}",
                keys.join("; "),
                document.origin
            ),
            diff: data.iter().map(DiffEntry::from).collect(),
            hint: revert_patch(api_version, &key.kind, &key.namespace, &key.name, &data)
                .map(|patch| format!("{patch}  # restores the baseline data")),
        });
    }
    findings
}

/// `data` compared key by key both ways (for Secrets; ConfigMaps get this from `compare`).
fn data_changes(desired: &Value, live: &Value) -> Vec<FieldChange> {
    let empty = Map::new();
    let wanted = desired
        .get("data")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let actual = live
        .get("data")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let keys: BTreeSet<&String> = wanted.keys().chain(actual.keys()).collect();
    keys.into_iter()
        .filter(|key| wanted.get(*key) != actual.get(*key))
        .map(|key| FieldChange {
            path: drift_model::pointer::push_pointer("/data", key),
            before: wanted.get(key).cloned(),
            after: actual.get(key).cloned(),
        })
        .collect()
}

fn describe_data_change(change: &FieldChange) -> String {
    let key = change
        .path
        .trim_start_matches("/data/")
        .replace("~1", "/")
        .replace("~0", "~");
    match (&change.before, &change.after) {
        (None, Some(value)) => format!("{key} added ({})", short(value)),
        (Some(_), None) => format!("{key} removed"),
        (Some(was), Some(now)) => format!("{key} changed ({} → {})", short(was), short(now)),
        (None, None) => key,
    }
}

fn short(value: &Value) -> String {
    let text = value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string());
    if text.chars().count() > 40 {
        format!("{}…", text.chars().take(40).collect::<String>())
    } else {
        text
    }
}
