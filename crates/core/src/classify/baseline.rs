//! Desired state, as kept in Git (manifests loaded by [`crate::manifest`]), and the normalized
//! comparison of a live object against them: one implementation for the sink's
//! `baseline_drift` class and for `check`.
//!
//! Every field the manifest sets must have that value live. A field it leaves out must hold the
//! value Knative would have given it, for the fields whose default can be told from Knative's
//! ConfigMaps ([`super::defaults`]): a Service's traffic, a revision template's timeouts,
//! concurrency, service links, container resources and security context, a Broker's class, a
//! Trigger's filters and delivery; Knative's built-in default is accepted too, since an object
//! keeps the default it was created with. Behavioural label and annotation keys
//! (`rules.metadataKeys.behavioural`) are compared even when the manifest does not mention them; other
//! keys (bookkeeping, tools' own) only when it does. Server-set metadata and `status` are never
//! compared. Lists must have the same length and are compared item by item; numbers compare by
//! value (`100` equals `100.0`). ConfigMap `data` is compared key by key in both directions,
//! except `_example` (documentation that Knative ignores). Configured ignore paths are dropped.
//!
//! Pure: the manifests and the ConfigMaps are looked up by the caller.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::defaults::Expected;
pub use super::defaults::KnativeDefaults;
use super::quantity::{is_quantity_path, same_quantity};
use crate::manifest::{ManifestKey, Manifests};
use drift_model::pointer::{get as get_pointer, push_pointer};
use drift_model::FieldChange;
use drift_model::MAX_CHANGES;

/// A set of desired manifests.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    objects: BTreeMap<ManifestKey, Value>,
}

impl Baseline {
    /// True when no manifest is loaded.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Number of manifests.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// The desired manifest of an object.
    pub fn get(&self, key: &ManifestKey) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Every manifest.
    pub fn iter(&self) -> impl Iterator<Item = (&ManifestKey, &Value)> {
        self.objects.iter()
    }

    /// The desired manifests of a loaded set. When a set defines one object twice, the later
    /// definition wins (`check` refuses such a baseline; the sink keeps running on it).
    pub fn from_manifests(manifests: &Manifests) -> Baseline {
        Baseline {
            objects: manifests
                .iter()
                .map(|(key, document)| (key.clone(), document.value.clone()))
                .collect(),
        }
    }
}

/// How a live object is compared with its manifest: Knative's defaults in the object's cluster,
/// which label and annotation keys change behaviour, and which paths are ignored.
pub struct Normalization<'a> {
    /// Knative's defaults for the fields a manifest leaves out.
    pub defaults: &'a KnativeDefaults,
    /// True for a label or annotation key whose value changes behaviour.
    pub behavioural: &'a dyn Fn(&str) -> bool,
    /// True for a path the rules ignore.
    pub ignored: &'a dyn Fn(&str) -> bool,
}

/// The differences between a manifest and a live object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    /// `before` of each change is the desired value, `after` the live one.
    pub changes: Vec<FieldChange>,
    /// For a change at a path the manifest leaves out: where its desired value came from.
    pub notes: BTreeMap<String, String>,
}

impl Comparison {
    /// True when the object matches its manifest.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Where the desired value of a change came from, when the manifest does not set it.
    pub fn note(&self, path: &str) -> Option<&str> {
        self.notes.get(path).map(String::as_str)
    }

    /// What to say after a patch that restores `changes`, beside re-applying `manifest`:
    /// re-applying restores only fields the manifest sets (neither client-side nor server-side
    /// apply removes or resets a field the manifest leaves out).
    pub fn reapply_advice(&self, changes: &[FieldChange], reapply: &str) -> String {
        if changes
            .iter()
            .all(|change| self.note(&change.path).is_none())
        {
            return format!("or: {reapply}");
        }
        "the manifest leaves these fields to Knative, so re-applying it does not restore them: \
         patch them, set them in Git, or ignore them (rules.ignorePaths)"
            .to_string()
    }
}

/// Differences between a desired manifest and a live object (both as JSON).
///
/// * Every field the manifest sets must have that value live (lists item by item, numbers by
///   value).
/// * A field it leaves out that Knative defaults must hold Knative's default
///   ([`KnativeDefaults::expectations`]) when the live object has it.
/// * A behavioural label or annotation key the manifest does not set must be absent live (on
///   the object and on a revision template), unless Knative defaults it.
/// * ConfigMap `data` key by key in both directions, except `_example`.
pub fn compare(desired: &Value, live: &Value, how: &Normalization<'_>) -> Comparison {
    let mut out = Comparison::default();
    let desired = &*left_to_knative(desired);
    if let Some(spec) = desired.get("spec") {
        subset("/spec", spec, live.get("spec"), &mut out.changes);
    }
    let kind = desired.get("kind").and_then(Value::as_str).unwrap_or("");
    let mut defaulted: BTreeSet<String> = BTreeSet::new();
    for expectation in how.defaults.expectations(desired) {
        if get_pointer(desired, &expectation.path).is_some() {
            // The manifest decides; `subset` compared it.
            continue;
        }
        defaulted.insert(expectation.path.clone());
        let have = get_pointer(live, &expectation.path).filter(|value| !is_empty(value));
        let path = &expectation.path;
        let equal = |want: &Value, have: &Value| same_at(path, want, have);
        let differs = match (&expectation.expected, have) {
            (Expected::Unknown, _) => false,
            // The live object lacks the field: a Knative release that does not set it.
            (_, None) => false,
            (Expected::Value(want), Some(have)) => !equal(want, have),
            (Expected::Unset, Some(_)) => true,
        } && !expectation
            .also
            .as_ref()
            .zip(have)
            .is_some_and(|(also, have)| equal(also, have));
        if differs {
            out.notes.insert(expectation.path.clone(), expectation.why);
            out.changes.push(FieldChange {
                path: expectation.path,
                before: expectation.expected.value().cloned(),
                after: have.cloned(),
            });
        }
    }
    let mut metadata = vec!["/metadata/labels", "/metadata/annotations"];
    if get_pointer(live, "/spec/template/metadata").is_some() {
        metadata.extend([
            "/spec/template/metadata/labels",
            "/spec/template/metadata/annotations",
        ]);
    }
    for field in metadata {
        let wanted = get_pointer(desired, field).and_then(Value::as_object);
        let actual = get_pointer(live, field).and_then(Value::as_object);
        if field.starts_with("/metadata/") {
            for (key, value) in wanted.into_iter().flatten() {
                subset(
                    &push_pointer(field, key),
                    value,
                    actual.and_then(|map| map.get(key)),
                    &mut out.changes,
                );
            }
        }
        // ConfigMaps and Secrets are compared by their data; their labels are bookkeeping.
        if matches!(kind, "ConfigMap" | "Secret") {
            continue;
        }
        for (key, value) in actual.into_iter().flatten() {
            let path = push_pointer(field, key);
            let set = wanted.is_some_and(|map| map.contains_key(key));
            if set || defaulted.contains(&path) || !(how.behavioural)(key) {
                continue;
            }
            let what = if field.ends_with("labels") {
                "label"
            } else {
                "annotation"
            };
            out.notes.insert(
                path.clone(),
                format!("a behavioural {what} the manifest does not set: it must be absent"),
            );
            out.changes.push(FieldChange {
                path,
                before: None,
                after: Some(value.clone()),
            });
        }
    }
    if kind == "ConfigMap" {
        let empty = serde_json::Map::new();
        let wanted = desired
            .get("data")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let actual = live
            .get("data")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut keys: Vec<&String> = wanted
            .keys()
            .chain(actual.keys())
            .filter(|key| *key != "_example")
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let (want, have) = (wanted.get(key), actual.get(key));
            if want != have {
                out.changes.push(FieldChange {
                    path: push_pointer("/data", key),
                    before: want.cloned(),
                    after: have.cloned(),
                });
            }
        }
    }
    out.changes.retain(|change| !(how.ignored)(&change.path));
    out.changes.truncate(MAX_CHANGES);
    let kept: BTreeSet<&str> = out.changes.iter().map(|c| c.path.as_str()).collect();
    out.notes.retain(|path, _| kept.contains(path.as_str()));
    out
}

/// The manifest with the values Knative replaces by its default taken out, as if the manifest
/// left them out: a `timeoutSeconds` of 0 and a Service's empty `traffic`.
fn left_to_knative(desired: &Value) -> std::borrow::Cow<'_, Value> {
    let zero_timeout = get_pointer(desired, "/spec/template/spec/timeoutSeconds")
        .and_then(Value::as_f64)
        == Some(0.0);
    let no_traffic = get_pointer(desired, "/spec/traffic")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty);
    if !(zero_timeout || no_traffic) {
        return std::borrow::Cow::Borrowed(desired);
    }
    let mut copy = desired.clone();
    if zero_timeout {
        if let Some(Value::Object(spec)) = copy.pointer_mut("/spec/template/spec") {
            spec.remove("timeoutSeconds");
        }
    }
    if no_traffic {
        if let Some(Value::Object(spec)) = copy.pointer_mut("/spec") {
            spec.remove("traffic");
        }
    }
    std::borrow::Cow::Owned(copy)
}

/// Equality at a path: quantities by value under `resources`, else [`same`].
fn same_at(path: &str, want: &Value, have: &Value) -> bool {
    same(want, have) || (is_quantity_path(path) && same_quantity(want, have))
}

/// Null, `{}`, `[]` and `""`: what Knative leaves out and what it writes as empty are the same.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::String(text) => text.is_empty(),
        _ => false,
    }
}

/// Deep equality with numbers by value (`100` equals `100.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, value)| y.get(key).is_some_and(|other| same(value, other)))
        }
        _ => a == b,
    }
}

fn subset(path: &str, desired: &Value, live: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (desired, live) {
        (Value::Object(wanted), Some(Value::Object(actual))) => {
            for (key, value) in wanted {
                subset(&push_pointer(path, key), value, actual.get(key), out);
            }
        }
        (Value::Object(wanted), None | Some(Value::Null)) if wanted.is_empty() => {}
        (Value::Array(wanted), Some(Value::Array(actual))) if wanted.len() == actual.len() => {
            for (index, (want, have)) in wanted.iter().zip(actual).enumerate() {
                subset(
                    &push_pointer(path, &index.to_string()),
                    want,
                    Some(have),
                    out,
                );
            }
        }
        (Value::Null, None | Some(Value::Null)) => {}
        (Value::Number(want), Some(Value::Number(have))) if want.as_f64() == have.as_f64() => {}
        (want, Some(have)) if want == have => {}
        (want, Some(have)) if is_quantity_path(path) && same_quantity(want, have) => {}
        (want, have) => out.push(FieldChange {
            path: path.to_string(),
            before: Some(want.clone()),
            after: have.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `compare` with built-in defaults, the default behavioural keys and no ignore paths.
    fn compare_plain(desired: &Value, live: &Value) -> Vec<FieldChange> {
        compare_with(desired, live, &KnativeDefaults::default()).changes
    }

    fn compare_with(desired: &Value, live: &Value, defaults: &KnativeDefaults) -> Comparison {
        let rules = crate::classify::Rules::new(crate::classify::rules::RuleSet::with_classes(
            Default::default(),
        ));
        let behavioural = |key: &str| rules.is_behavioural_key(key);
        compare(
            desired,
            live,
            &Normalization {
                defaults,
                behavioural: &behavioural,
                ignored: &|_| false,
            },
        )
    }

    #[test]
    fn defaults_added_by_knative_are_not_drift() {
        let desired = json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "a"},
            "spec": {"template": {"spec": {"containers": [{"image": "img:1"}]}}}});
        let live = json!({"spec": {"template": {"spec": {"containerConcurrency": 0, "timeoutSeconds": 300,
            "containers": [{"image": "img:1", "name": "user-container", "resources": {}}]}},
            "traffic": [{"latestRevision": true, "percent": 100}]}});
        assert!(compare_plain(&desired, &live).is_empty());
    }

    #[test]
    fn a_changed_desired_field_is_drift() {
        let desired = json!({"kind": "Service", "spec": {"traffic": [{"latestRevision": true, "percent": 100}]}});
        let live = json!({"spec": {"traffic": [{"latestRevision": true, "percent": 100.0}]}});
        assert!(compare_plain(&desired, &live).is_empty());
        let live = json!({"spec": {"traffic": [{"revisionName": "a-00001", "percent": 100}]}});
        let changes = compare_plain(&desired, &live);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/spec/traffic/0/latestRevision");
    }

    #[test]
    fn config_map_data_compares_both_ways_but_not_example() {
        let desired = json!({"kind": "ConfigMap", "data": {"min-scale": "1", "_example": "docs"}});
        let live = json!({"data": {"min-scale": "1", "max-scale": "5", "_example": "other docs"}});
        let changes = compare_plain(&desired, &live);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/data/max-scale");
        assert_eq!(changes[0].before, None);
    }

    #[test]
    fn lists_and_multi_documents_load() {
        let mut manifests = Manifests::default();
        manifests
            .add_yaml(
                "x.yaml",
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: ns}\n---\napiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: s, namespace: ns}\n---\n",
            )
            .unwrap();
        assert_eq!(Baseline::from_manifests(&manifests).len(), 2);
        let error = Manifests::default()
            .add_yaml("bad.yaml", "kind: Service\n")
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "bad.yaml document 1 (line 1): not a Kubernetes object: missing apiVersion, metadata.name (needs apiVersion, kind and metadata.name)"
        );
    }

    /// The Service of the issue: its manifest leaves traffic, timeouts, concurrency and the
    /// visibility to Knative.
    fn service_manifest() -> Value {
        json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service",
            "metadata": {"name": "a", "namespace": "n", "labels": {"app": "a"}},
            "spec": {"template": {"spec": {"containers": [{"image": "img:1"}]}}}})
    }

    /// That Service as Knative defaulted it.
    fn service_live() -> Value {
        json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service",
            "metadata": {"name": "a", "namespace": "n", "labels": {"app": "a"},
                "annotations": {"serving.knative.dev/creator": "admin"}},
            "spec": {"template": {"metadata": {"creationTimestamp": null},
                "spec": {"containerConcurrency": 0, "timeoutSeconds": 300, "enableServiceLinks": false,
                "containers": [{"image": "img:1", "name": "user-container", "resources": {},
                    "readinessProbe": {"successThreshold": 1, "tcpSocket": {"port": 0}}}]}},
            "traffic": [{"latestRevision": true, "percent": 100}]}})
    }

    fn paths(changes: &[FieldChange]) -> Vec<&str> {
        changes.iter().map(|change| change.path.as_str()).collect()
    }

    #[test]
    fn fields_left_to_knative_must_hold_its_defaults() {
        assert!(compare_plain(&service_manifest(), &service_live()).is_empty());
        let mut live = service_live();
        live["spec"]["traffic"] = json!([{"revisionName": "a-00001", "percent": 80},
            {"latestRevision": true, "percent": 20}]);
        live["spec"]["template"]["spec"]["timeoutSeconds"] = json!(900);
        live["spec"]["template"]["spec"]["containerConcurrency"] = json!(5);
        live["metadata"]["labels"]["networking.knative.dev/visibility"] = json!("cluster-local");
        live["spec"]["template"]["metadata"]["annotations"] = json!({"autoscaling.knative.dev/min-scale": "3", "client.knative.dev/user-image": "img:1"});
        let comparison = compare_with(&service_manifest(), &live, &KnativeDefaults::default());
        assert_eq!(
            paths(&comparison.changes),
            [
                "/spec/template/spec/timeoutSeconds",
                "/spec/template/spec/containerConcurrency",
                "/spec/traffic",
                "/metadata/labels/networking.knative.dev~1visibility",
                "/spec/template/metadata/annotations/autoscaling.knative.dev~1min-scale",
            ]
        );
        assert_eq!(comparison.changes[0].before, Some(json!(300)));
        assert_eq!(
            comparison.note("/spec/template/spec/timeoutSeconds"),
            Some("Knative's built-in default for revision-timeout-seconds: knative-serving/config-defaults not found")
        );
        assert_eq!(comparison.changes[3].before, None);
        assert!(comparison
            .note("/metadata/labels/networking.knative.dev~1visibility")
            .unwrap()
            .starts_with("a behavioural label"));
    }

    #[test]
    fn the_manifest_decides_what_it_sets_and_config_defaults_move_the_default() {
        let mut manifest = service_manifest();
        manifest["spec"]["template"]["spec"]["timeoutSeconds"] = json!(900);
        let mut live = service_live();
        live["spec"]["template"]["spec"]["timeoutSeconds"] = json!(900);
        assert!(compare_plain(&manifest, &live).is_empty());
        // A cluster whose config-defaults says 900 defaults to 900.
        let data: BTreeMap<String, String> =
            [("revision-timeout-seconds".to_string(), "900".to_string())].into();
        let defaults = KnativeDefaults::from_config_maps(|_, name| {
            (name == "config-defaults").then_some(&data)
        });
        assert!(compare_with(&service_manifest(), &live, &defaults).is_empty());
        assert_eq!(
            paths(&compare_plain(&service_manifest(), &live)),
            ["/spec/template/spec/timeoutSeconds"]
        );
    }

    #[test]
    fn a_live_object_without_a_defaulted_field_is_not_drift() {
        // An older Knative that does not write enableServiceLinks.
        let mut live = service_live();
        live["spec"]["template"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("enableServiceLinks");
        assert!(compare_plain(&service_manifest(), &live).is_empty());
    }

    #[test]
    fn broker_class_is_compared_with_config_br_defaults() {
        let manifest = json!({"apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
            "metadata": {"name": "default", "namespace": "n"}});
        let mut live = manifest.clone();
        live["metadata"]["annotations"] =
            json!({"eventing.knative.dev/broker.class": "MTChannelBasedBroker"});
        let config: BTreeMap<String, String> = [(
            "default-br-config".to_string(),
            "clusterDefault:\n  brokerClass: MTChannelBasedBroker\n".to_string(),
        )]
        .into();
        let defaults = KnativeDefaults::from_config_maps(|_, name| {
            (name == "config-br-defaults").then_some(&config)
        });
        assert!(compare_with(&manifest, &live, &defaults).is_empty());
        live["metadata"]["annotations"]["eventing.knative.dev/broker.class"] = json!("Kafka");
        let changes = compare_with(&manifest, &live, &defaults).changes;
        assert_eq!(
            paths(&changes),
            ["/metadata/annotations/eventing.knative.dev~1broker.class"]
        );
        assert_eq!(changes[0].before, Some(json!("MTChannelBasedBroker")));
        // Without config-br-defaults the cluster's default class cannot be told: no difference,
        // and the behavioural-key rule does not claim it must be absent.
        assert!(compare_plain(&manifest, &live).is_empty());
    }

    #[test]
    fn quantities_compare_by_value_and_zero_timeout_is_left_to_knative() {
        let mut manifest = service_manifest();
        manifest["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"limits": {"cpu": "1000m", "memory": "1024Mi"}});
        manifest["spec"]["template"]["spec"]["timeoutSeconds"] = json!(0);
        manifest["spec"]["traffic"] = json!([]);
        let mut live = service_live();
        live["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}});
        // The cluster defaults the CPU request to 0.5 CPU.
        let data: BTreeMap<String, String> =
            [("revision-cpu-request".to_string(), "0.5".to_string())].into();
        let defaults = KnativeDefaults::from_config_maps(|_, name| {
            (name == "config-defaults").then_some(&data)
        });
        assert!(compare_with(&manifest, &live, &defaults).is_empty());
        live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
            json!("2");
        assert_eq!(
            paths(&compare_with(&manifest, &live, &defaults).changes),
            ["/spec/template/spec/containers/0/resources/limits/cpu"]
        );
    }

    #[test]
    fn an_object_created_under_the_built_in_default_keeps_it() {
        // The cluster raised revision-timeout-seconds to 600 after this Service was created:
        // Knative does not rewrite a field it defaulted, so 300 stays and is not drift.
        let data: BTreeMap<String, String> =
            [("revision-timeout-seconds".to_string(), "600".to_string())].into();
        let defaults = KnativeDefaults::from_config_maps(|_, name| {
            (name == "config-defaults").then_some(&data)
        });
        assert!(compare_with(&service_manifest(), &service_live(), &defaults).is_empty());
        let mut live = service_live();
        live["spec"]["template"]["spec"]["timeoutSeconds"] = json!(450);
        assert_eq!(
            paths(&compare_with(&service_manifest(), &live, &defaults).changes),
            ["/spec/template/spec/timeoutSeconds"]
        );
    }

    #[test]
    fn a_trigger_filter_added_by_hand_is_drift() {
        let manifest = json!({"apiVersion": "eventing.knative.dev/v1", "kind": "Trigger",
            "metadata": {"name": "t", "namespace": "n"},
            "spec": {"broker": "default", "subscriber": {"ref": {"apiVersion": "v1", "kind": "Service", "name": "s"}}}});
        let mut live = manifest.clone();
        live["spec"]["filter"] = json!({});
        assert!(compare_plain(&manifest, &live).is_empty());
        live["spec"]["filter"] = json!({"attributes": {"type": "dev.example"}});
        assert_eq!(
            paths(&compare_plain(&manifest, &live)),
            ["/spec/filter/attributes"]
        );
    }
}
