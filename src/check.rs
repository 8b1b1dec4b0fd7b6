//! `drift-sentinel check`: the CI/CD regression gate. It compares a live snapshot (the output of
//! `kubectl get ksvc,configurations,routes,revisions,configmaps -A -o yaml`) with the desired
//! manifests kept in Git and reports, per object, what differs and what is unhealthy.
//!
//! What is reported (`class` of a [`Finding`]):
//!
//! * `missing`: in the baseline, not live. `critical` for a Knative Service, else `warning`.
//! * `extra`: live, not in the baseline, and something a person deploys: a Knative Service, or a
//!   `serving.knative.dev` object (Configuration, Route, DomainMapping, ...) with no Knative
//!   controller owner (`warning`); a ConfigMap that `config_drift` watches (`info`: Knative's
//!   install creates them, so leaving them out of Git is a choice, not drift). Never extra: what
//!   Knative creates itself (Revisions, and the Configuration and Route of a Knative Service,
//!   which are checked through their Service) and every other kind (a cluster dump holds many
//!   objects the baseline does not manage).
//! * `spec_drift`: the live object differs from its manifest, desired fields only
//!   ([`crate::classify::evidence::baseline::compare`]: status, server-set metadata and the defaults Knative adds are
//!   not compared; `rules.ignorePaths` apply). `warning`.
//! * `config_drift`: a ConfigMap's `data` differs from its manifest, key by key both ways,
//!   `_example` ignored. Severity and `enabled` from `rules.classes.config_drift`.
//! * `not_ready`, `revision_not_ready`, `traffic_drift`, `generation_lag`, `revision_pileup`:
//!   the state-based classes of the engine, run for real: every live object is applied to a
//!   [`crate::classify::Engine`] as a Resource-mode `add` event at one instant, the clock then
//!   jumps past every grace period, and the drifts that fire are reported with the engine's own
//!   severity, summary and hint. A snapshot cannot tell how long a condition has held, so it is
//!   treated as held past its grace. Change-based classes (`manual_edit`, `image_drift`,
//!   `unexpected_delete`, `orphan`) need a history and do not apply.
//!
//! Invariants: [`check`] and the renderers are pure (no I/O, no clock) and deterministic (the same
//! inputs give byte-identical output); only [`load`] and [`run`] read files. Nothing here panics
//! on input: every bad input is an [`Error`] naming the file and document. Secret values are never
//! output: live objects go through [`crate::decode::object::parse_object`], which hashes them,
//! and a Secret manifest's values are hashed the same way before comparison. Input is bounded:
//! [`MAX_FILE_BYTES`] per file, [`MAX_TOTAL_BYTES`] in all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::classify::evidence::baseline::compare;
use crate::classify::evidence::hint::{namespace_flag, resource_name, revert_patch, shell_quote};
use crate::classify::{classes, Engine, ObjectState, Rules};
use crate::decode::object::{api_group, hash_value, parse_object};
use crate::decode::{Action, ApiServerEvent, KubeObject, Mode};
use crate::manifest::{self, manifest_key, Document, ManifestKey, Manifests, Origin};
use crate::model::{Drift, Severity};
use crate::model::{DriftState, FieldChange, Millis};

/// Class id: in the baseline, not live.
pub const MISSING: &str = "missing";
/// Class id: live, not in the baseline.
pub const EXTRA: &str = "extra";
/// Class id: the live object differs from its manifest.
pub const SPEC_DRIFT: &str = "spec_drift";
/// Class id: a ConfigMap's data differs from its manifest.
pub const CONFIG_DRIFT: &str = "config_drift";

/// The instant every live object is applied at; the clock then moves to [`Millis::MAX`].
const SNAPSHOT_TIME: Millis = 0;
/// The cluster name given to the live objects inside the engine.
const CLUSTER: &str = "live";

/// Why `check` could not run: bad input, with the file and document it is in.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A side could not be loaded (unreadable, too large, not YAML, not an object).
    #[error(transparent)]
    Manifest(#[from] manifest::Error),
    /// A live object the decoder rejects.
    #[error("{origin}: {message}")]
    Invalid {
        /// Where.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
    /// The baseline defines one object twice.
    #[error("{second}: {object} is already defined at {first}")]
    Duplicate {
        /// The object.
        object: String,
        /// The first definition.
        first: Box<Origin>,
        /// The second definition.
        second: Box<Origin>,
    },
}

impl Error {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Manifest(error) => error.kind(),
            Error::Invalid { .. } => "invalid",
            Error::Duplicate { .. } => "duplicate",
        }
    }
}

// ---- The report -------------------------------------------------------------------------------

/// One changed field: desired (baseline) and live value; `None` when absent.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffEntry {
    /// JSON pointer.
    pub path: String,
    /// The desired value.
    pub desired: Option<Value>,
    /// The live value.
    pub live: Option<Value>,
}

impl From<&FieldChange> for DiffEntry {
    fn from(change: &FieldChange) -> DiffEntry {
        DiffEntry {
            path: change.path.clone(),
            desired: change.before.clone(),
            live: change.after.clone(),
        }
    }
}

/// One thing wrong with one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// `missing`, `extra`, `spec_drift`, `config_drift`, or an engine class id.
    pub class: String,
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
        crate::manifest::format_reference(&self.group, &self.kind, &self.namespace, &self.name)
    }
}

/// The result of a check.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Every object checked, sorted by namespace, kind, name, group.
    pub objects: Vec<ObjectReport>,
    /// Findings at or above this severity fail the check.
    pub fail_on: Severity,
}

impl Report {
    /// Every finding with its object.
    pub fn findings(&self) -> impl Iterator<Item = (&ObjectReport, &Finding)> {
        self.objects
            .iter()
            .flat_map(|object| object.findings.iter().map(move |finding| (object, finding)))
    }

    /// Number of findings of one severity.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings()
            .filter(|(_, finding)| finding.severity == severity)
            .count()
    }

    /// Number of findings at or above `fail_on`.
    pub fn failing(&self) -> usize {
        self.findings()
            .filter(|(_, finding)| finding.severity >= self.fail_on)
            .count()
    }

    /// True when the check fails (exit code 1).
    pub fn failed(&self) -> bool {
        self.failing() > 0
    }
}

// ---- The check --------------------------------------------------------------------------------

struct Live {
    object: KubeObject,
    state: ObjectState,
    origin: Origin,
}

/// Compares `live` with `baseline` under `rules` (ignore paths, class settings, thresholds,
/// scope, watched ConfigMaps). Pure. Fails only on bad input: a baseline object defined twice, or
/// a live object the decoder rejects.
pub fn check(
    baseline: &Manifests,
    live: &Manifests,
    rules: Arc<Rules>,
    fail_on: Severity,
) -> Result<Report, Error> {
    if let Some((key, first, second)) = baseline.duplicates().first() {
        return Err(Error::Duplicate {
            object: key.reference(),
            first: Box::new(first.clone()),
            second: Box::new(second.clone()),
        });
    }
    let mut parsed: BTreeMap<ManifestKey, Live> = BTreeMap::new();
    for (key, document) in live.iter() {
        let object = decode_live(key, &document.value).map_err(|message| Error::Invalid {
            origin: document.origin.clone(),
            message,
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
                report
                    .findings
                    .extend(differences(key, &api_version, document, found, &rules));
            }
        }
        reports.insert(key.clone(), report);
    }

    // The live side: extra objects, and the Knative objects and watched ConfigMaps checked for
    // their state even when the baseline does not name them.
    for (key, found) in &parsed {
        if baseline.get(key).is_some() || !rules.in_scope(&found.state) {
            continue;
        }
        let state = &found.state;
        let watched_config_map = state.is_kind("", "ConfigMap")
            && rules.is_watched_config_map(&state.namespace, &state.name);
        let knative = state.is_knative_serving();
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
    for drift in snapshot_drifts(&parsed, rules) {
        let key = ManifestKey {
            group: api_group(&drift.api_version).to_string(),
            kind: drift.kind.clone(),
            namespace: drift.namespace.clone(),
            name: drift.name.clone(),
        };
        let report = reports
            .entry(key.clone())
            .or_insert_with(|| new_report(&key, &drift.api_version));
        report.findings.push(Finding {
            class: drift.class.clone(),
            severity: drift.severity,
            message: drift.evidence.summary.clone(),
            diff: drift.evidence.changes.iter().map(DiffEntry::from).collect(),
            hint: drift.evidence.hint.clone(),
        });
    }

    let mut objects: Vec<ObjectReport> = reports.into_values().collect();
    objects.sort_by(|a, b| {
        (&a.namespace, &a.kind, &a.name, &a.group).cmp(&(&b.namespace, &b.kind, &b.name, &b.group))
    });
    Ok(Report { objects, fail_on })
}

/// Decodes a live object as the sink would, hashing Secret values. Objects written by hand may
/// lack `uid` and `resourceVersion`; they get stand-ins derived from their key.
fn decode_live(key: &ManifestKey, value: &Value) -> Result<KubeObject, String> {
    let mut value = value.clone();
    if let Some(Value::Object(metadata)) = value.get_mut("metadata") {
        let blank = |entry: Option<&Value>| entry.is_none_or(|v| v.is_null() || v == "");
        if blank(metadata.get("uid")) {
            metadata.insert("uid".into(), json!(format!("check:{key}:{}", key.group)));
        }
        if blank(metadata.get("resourceVersion")) {
            metadata.insert("resourceVersion".into(), json!("1"));
        }
    }
    parse_object(value).map_err(|error| match error {
        crate::decode::Error::InvalidObject(message) => message
            .strip_prefix("data.")
            .map(str::to_string)
            .unwrap_or(message),
        other => other.to_string(),
    })
}

/// The compact state of a manifest, for scope decisions about objects that are not live.
fn desired_state(value: &Value) -> Option<ObjectState> {
    let key = manifest_key(value)?;
    let object = decode_live(&key, value).ok()?;
    Some(ObjectState::from_object(CLUSTER, &object, SNAPSHOT_TIME))
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
        || (matches!(state.kind.as_str(), "Configuration" | "Route")
            && state.label("serving.knative.dev/service").is_some());
    if made_by_knative {
        return None;
    }
    Some(Finding {
        class: EXTRA.to_string(),
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
    let mut changes = compare(&desired, &live, &ignored);
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
                .map(|patch| format!("{patch}  # or: {reapply}"))
        };
        findings.push(Finding {
            class: SPEC_DRIFT.to_string(),
            severity: Severity::Warning,
            message: format!(
                "differs from the baseline at {}; manifest: {}",
                paths.join(", "),
                document.origin
            ),
            diff: spec.iter().map(DiffEntry::from).collect(),
            hint,
        });
    }
    let settings = rules.class(CONFIG_DRIFT);
    if !data.is_empty() && settings.enabled {
        let keys: Vec<String> = data.iter().map(describe_data_change).collect();
        findings.push(Finding {
            class: CONFIG_DRIFT.to_string(),
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

/// The live object in manifest shape, from the decoded (Secret-hashed) object.
fn live_manifest(object: &KubeObject) -> Value {
    let mut live = json!({
        "apiVersion": object.api_version,
        "kind": object.kind,
        "metadata": {"name": object.name, "namespace": object.namespace,
                     "labels": object.labels, "annotations": object.annotations},
        "spec": object.spec,
    });
    if let Some(data) = &object.data {
        live["data"] = json!(data);
    }
    live
}

/// A Secret manifest with its values hashed as the decoder hashes live ones: `data` values as
/// written (base64), `stringData` values base64-encoded first, as the API server stores them.
fn hashed_secret(desired: &Value) -> Value {
    use base64::Engine as _;
    let mut copy = desired.clone();
    let mut hashed = Map::new();
    if let Some(Value::Object(data)) = desired.get("data") {
        for (key, value) in data {
            let text = value
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            hashed.insert(key.clone(), json!(hash_value(&text)));
        }
    }
    if let Some(Value::Object(data)) = desired.get("stringData") {
        for (key, value) in data {
            let text = value
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            hashed.insert(key.clone(), json!(hash_value(&encoded)));
        }
    }
    if let Value::Object(map) = &mut copy {
        map.remove("stringData");
        map.insert("data".into(), Value::Object(hashed));
        if let Some(Value::Object(annotations)) = map
            .get_mut("metadata")
            .and_then(|metadata| metadata.get_mut("annotations"))
        {
            if let Some(Value::String(applied)) =
                annotations.get_mut("kubectl.kubernetes.io/last-applied-configuration")
            {
                *applied = hash_value(applied);
            }
        }
    }
    copy
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
            path: crate::classify::evidence::diff::push_pointer("/data", key),
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

/// The engine classes that apply to a snapshot (state-based), in registry order.
pub fn snapshot_classes() -> Vec<&'static str> {
    classes::REGISTRY
        .iter()
        .filter(|class| class.applies_to_snapshot())
        .map(|class| class.id())
        .collect()
}

/// Applies every live object to a fresh engine at one instant, fires everything past its grace,
/// and returns the firing drifts of the snapshot classes, in a stable order.
fn snapshot_drifts(live: &BTreeMap<ManifestKey, Live>, rules: Arc<Rules>) -> Vec<Drift> {
    let snapshot_classes = snapshot_classes();
    let mut engine = Engine::new(rules);
    // Children before owners, so that an owner's classes see its whole family when it is
    // applied: Revisions, then Configurations, Routes, Services (a Service's assessment covers
    // its Route too).
    let rank = |object: &KubeObject| match (object.group(), object.kind.as_str()) {
        (classes::SERVING, "Revision") => 1,
        (classes::SERVING, "Configuration") => 2,
        (classes::SERVING, "Route") => 3,
        (classes::SERVING, "Service") => 4,
        _ => 0,
    };
    let mut ordered: Vec<(&ManifestKey, &Live)> = live.iter().collect();
    ordered.sort_by_key(|(key, found)| (rank(&found.object), *key));
    for (index, (_, found)) in ordered.into_iter().enumerate() {
        let object = &found.object;
        let event = ApiServerEvent {
            source: "drift-sentinel-check".to_string(),
            id: index.to_string(),
            ce_type: "dev.knative.apiserver.resource.add".to_string(),
            time: None,
            cluster: CLUSTER.to_string(),
            action: Action::Add,
            mode: Mode::Resource,
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            object: Some(object.clone()),
        };
        engine.apply(&event, SNAPSHOT_TIME);
    }
    engine.tick(Millis::MAX);
    let mut drifts: Vec<Drift> = engine
        .open_drifts()
        .filter(|drift| drift.state == DriftState::Firing)
        .filter(|drift| snapshot_classes.contains(&drift.class.as_str()))
        .cloned()
        .collect();
    let order = |class: &str| {
        snapshot_classes
            .iter()
            .position(|known| *known == class)
            .unwrap_or(usize::MAX)
    };
    drifts.sort_by(|a, b| {
        (&a.namespace, &a.kind, &a.name, order(&a.class)).cmp(&(
            &b.namespace,
            &b.kind,
            &b.name,
            order(&b.class),
        ))
    });
    drifts
}

// ---- Input ------------------------------------------------------------------------------------

/// Loads both sides and checks them: the whole command minus output.
pub fn run(
    baseline_path: &Path,
    live_path: &Path,
    rules: Arc<Rules>,
    fail_on: Severity,
) -> Result<Report, Error> {
    let baseline = manifest::load(baseline_path)?;
    let live = manifest::load(live_path)?;
    check(&baseline, &live, rules, fail_on)
}

// ---- Output -----------------------------------------------------------------------------------

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One line per finding (with indented diff and fix lines), then a summary line.
    Text,
    /// A Markdown table for a pull-request comment.
    Markdown,
    /// The documented JSON structure.
    Json,
    /// JUnit XML: one test case per object, a failure per finding at or above `fail_on`.
    Junit,
}

/// Renders a report.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Text => render_text(report),
        Format::Markdown => render_markdown(report),
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&render_json(report))
                .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
            text.push('\n');
            text
        }
        Format::Junit => render_junit(report),
    }
}

fn value_text(value: &Option<Value>) -> String {
    match value {
        None => "(absent)".to_string(),
        Some(value) => value.to_string(),
    }
}

fn summary_line(report: &Report) -> String {
    let objects = report.objects.len();
    let total = report.findings().count();
    let counts = format!(
        "{} critical, {} warning, {} info",
        report.count(Severity::Critical),
        report.count(Severity::Warning),
        report.count(Severity::Info)
    );
    if total == 0 {
        return format!(
            "PASS: no findings in {objects} objects (fail-on {})",
            report.fail_on.as_str()
        );
    }
    format!(
        "{}: {} of {total} findings at or above {} in {objects} objects ({counts})",
        if report.failed() { "FAIL" } else { "PASS" },
        report.failing(),
        report.fail_on.as_str()
    )
}

/// Text for a terminal or a CI log.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for (object, finding) in report.findings() {
        out.push_str(&format!(
            "{:<9} {:<18} {}: {}\n",
            finding.severity.as_str().to_uppercase(),
            finding.class,
            object.reference(),
            one_line(&finding.message)
        ));
        for change in &finding.diff {
            out.push_str(&format!(
                "          {}: desired {}, live {}\n",
                change.path,
                value_text(&change.desired),
                value_text(&change.live)
            ));
        }
        if let Some(hint) = &finding.hint {
            out.push_str(&format!("          fix: {}\n", one_line(hint)));
        }
    }
    out.push_str(&summary_line(report));
    out.push('\n');
    out
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// The JSON structure: `{schemaVersion, summary: {objects, findings, bySeverity, failOn,
/// failing, result}, findings: [{object, group, apiVersion, kind, namespace, name, class,
/// severity, failing, message, diff: [{path, desired, live}], hint}]}`. Absent values are `null`.
pub fn render_json(report: &Report) -> Value {
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
                "severity": finding.severity.as_str(),
                "failing": finding.severity >= report.fail_on,
                "message": finding.message,
                "diff": finding.diff.iter().map(|change| json!({
                    "path": change.path,
                    "desired": change.desired,
                    "live": change.live,
                })).collect::<Vec<_>>(),
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
    })
}

/// Most rows a Markdown report lists (a pull-request comment holds 65,536 characters).
const MARKDOWN_ROWS: usize = 100;

/// A Markdown report for a pull-request comment.
pub fn render_markdown(report: &Report) -> String {
    let mut out = String::new();
    let verdict = if report.failed() { "failed" } else { "passed" };
    out.push_str(&format!("### drift-sentinel check {verdict}\n\n"));
    out.push_str(&format!("{}\n", md_text(&summary_line(report))));
    let total = report.findings().count();
    if total == 0 {
        return out;
    }
    out.push_str("\n| Severity | Object | Class | Finding | Fix |\n");
    out.push_str("|---|---|---|---|---|\n");
    for (object, finding) in report.findings().take(MARKDOWN_ROWS) {
        let severity = if finding.severity >= report.fail_on {
            format!("**{}**", finding.severity.as_str())
        } else {
            finding.severity.as_str().to_string()
        };
        let mut cell = md_text(&finding.message);
        for change in finding.diff.iter().take(5) {
            cell.push_str(&format!(
                "<br>{}: desired {}, live {}",
                md_code(&change.path),
                md_code(&value_text(&change.desired)),
                md_code(&value_text(&change.live))
            ));
        }
        if finding.diff.len() > 5 {
            cell.push_str(&format!("<br>… {} more", finding.diff.len() - 5));
        }
        out.push_str(&format!(
            "| {severity} | {} | {} | {cell} | {} |\n",
            md_code(&object.reference()),
            md_code(&finding.class),
            finding.hint.as_deref().map(md_code).unwrap_or_default()
        ));
    }
    if total > MARKDOWN_ROWS {
        out.push_str(&format!(
            "\n{} more findings: run `drift-sentinel check --format text` for all of them.\n",
            total - MARKDOWN_ROWS
        ));
    }
    out
}

/// Text for a Markdown table cell: no line breaks, pipes escaped, no raw HTML.
fn md_text(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace("\r\n", "<br>")
        .replace(['\n', '\r'], "<br>")
}

/// An inline code span for a table cell, fenced with enough backticks for its content.
fn md_code(text: &str) -> String {
    let text = one_line(text).replace('|', "\\|");
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

/// JUnit XML: test suite `drift-sentinel check`, one `<testcase>` per object checked, one
/// `<failure>` per finding at or above `fail_on`; findings below it go to `<system-out>`.
pub fn render_junit(report: &Report) -> String {
    let failed_objects = report
        .objects
        .iter()
        .filter(|object| {
            object
                .findings
                .iter()
                .any(|finding| finding.severity >= report.fail_on)
        })
        .count();
    let tests = report.objects.len();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"drift-sentinel check\" tests=\"{tests}\" failures=\"{failed_objects}\" errors=\"0\">\n"
    ));
    out.push_str(&format!(
        "  <testsuite name=\"drift-sentinel check\" tests=\"{tests}\" failures=\"{failed_objects}\" errors=\"0\" skipped=\"0\" time=\"0\">\n"
    ));
    for object in &report.objects {
        let classname = if object.group.is_empty() {
            object.kind.clone()
        } else {
            format!("{}.{}", object.kind, object.group)
        };
        let name = if object.namespace.is_empty() {
            object.name.clone()
        } else {
            format!("{}/{}", object.namespace, object.name)
        };
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"",
            xml_escape(&classname),
            xml_escape(&name)
        ));
        if object.findings.is_empty() {
            out.push_str("/>\n");
            continue;
        }
        out.push_str(">\n");
        let mut below = String::new();
        for finding in &object.findings {
            let mut body = format!("{}\n", finding.message);
            for change in &finding.diff {
                body.push_str(&format!(
                    "{}: desired {}, live {}\n",
                    change.path,
                    value_text(&change.desired),
                    value_text(&change.live)
                ));
            }
            if let Some(hint) = &finding.hint {
                body.push_str(&format!("fix: {hint}\n"));
            }
            if finding.severity >= report.fail_on {
                out.push_str(&format!(
                    "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                    xml_escape(&finding.class),
                    xml_escape(&format!(
                        "{} {}: {}",
                        finding.severity.as_str(),
                        finding.class,
                        one_line(&finding.message)
                    )),
                    xml_escape(&body)
                ));
            } else {
                below.push_str(&format!(
                    "{} {}: {}",
                    finding.severity.as_str(),
                    finding.class,
                    body
                ));
            }
        }
        if !below.is_empty() {
            out.push_str(&format!(
                "      <system-out>{}</system-out>\n",
                xml_escape(&below)
            ));
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Escapes text for XML content and attribute values; drops characters XML 1.0 forbids.
fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            xml_escape("a<b & \"c\" 'd'\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;\u{FFFD}"
        );
        assert_eq!(md_code("a|b"), "`a\\|b`");
        assert_eq!(md_code("a`b"), "`` a`b ``");
        assert_eq!(md_text("x|y\n<z>"), "x\\|y<br>&lt;z&gt;");
    }

    #[test]
    fn secret_manifests_are_hashed_like_live_secrets() {
        let desired = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "aGVsbG8="}, "stringData": {"b": "hello"}});
        let hashed = hashed_secret(&desired);
        assert_eq!(hashed["data"]["a"], json!(hash_value("aGVsbG8=")));
        assert_eq!(hashed["data"]["b"], json!(hash_value("aGVsbG8=")));
        assert!(hashed.get("stringData").is_none());
    }
}
