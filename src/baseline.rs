//! Desired state, as kept in Git: multi-document YAML manifests, and the normalized comparison of
//! a live object against them (used by the `baseline_drift` class and by `check`).
//!
//! Comparison is "desired fields only", as `kubectl apply` sees it: every field the manifest sets
//! must have that value live; fields the manifest leaves out (server-set metadata, status,
//! defaults Knative adds such as `containerConcurrency`, `readinessProbe` or `timeoutSeconds`) are
//! not compared. Lists must have the same length and are compared item by item. Numbers compare by
//! value (`100` equals `100.0`). ConfigMap `data` is compared key by key in both directions, except
//! `_example` (documentation that Knative ignores). Configured ignore paths are dropped.
//!
//! Parsing and comparing are pure; only [`load_dir`] reads files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::enrich::diff::push_pointer;
use crate::model::FieldChange;

/// Why manifests could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid YAML.
    #[error("{path}: not valid YAML: {message}")]
    Syntax {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// A document is not a Kubernetes object.
    #[error("{path} document {index}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// Document index (0-based).
        index: usize,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// A stable, bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Read { .. } => "read",
            Error::Syntax { .. } => "syntax",
            Error::Invalid { .. } => "invalid",
        }
    }
}

/// The identity of a desired object: (group, kind, namespace, name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManifestKey {
    /// API group (empty for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty when unset or cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ManifestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

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

    /// Adds the documents of one YAML file (`List` kinds are flattened).
    pub fn add_yaml(&mut self, path: &str, text: &str) -> Result<(), Error> {
        let documents: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|error| Error::Syntax {
                path: path.to_string(),
                message: error.to_string(),
            })?;
        for (index, document) in documents.into_iter().enumerate() {
            self.add_document(path, index, document)?;
        }
        Ok(())
    }

    fn add_document(&mut self, path: &str, index: usize, document: Value) -> Result<(), Error> {
        if document.is_null() {
            return Ok(());
        }
        let invalid = |message: String| Error::Invalid {
            path: path.to_string(),
            index,
            message,
        };
        let kind = document
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if kind == "List" || kind.ends_with("List") {
            if let Some(Value::Array(items)) = document.get("items") {
                for item in items.clone() {
                    self.add_document(path, index, item)?;
                }
                return Ok(());
            }
        }
        let key = manifest_key(&document)
            .ok_or_else(|| invalid("needs apiVersion, kind and metadata.name".to_string()))?;
        self.objects.insert(key, document);
        Ok(())
    }
}

/// The key of a manifest or live object.
pub fn manifest_key(object: &Value) -> Option<ManifestKey> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let name = object.pointer("/metadata/name")?.as_str()?;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(ManifestKey {
        group: crate::decode::object::api_group(api_version).to_string(),
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

/// Reads every `.yaml`/`.yml`/`.json` file under `dir` (recursively, sorted) into a baseline.
pub fn load_dir(dir: &Path) -> Result<Baseline, Error> {
    let mut files = Vec::new();
    collect_files(dir, &mut files)?;
    files.sort();
    let mut baseline = Baseline::default();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Read {
            path: file.clone(),
            source,
        })?;
        baseline.add_yaml(&file.display().to_string(), &text)?;
    }
    Ok(baseline)
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let read_error = |source| Error::Read {
        path: path.to_path_buf(),
        source,
    };
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(path).map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        let child = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            // Kubernetes ConfigMap volumes keep `..data` and timestamped directories; the
            // visible names are symlinks into them.
            continue;
        }
        if child.is_dir() {
            collect_files(&child, out)?;
        } else if name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json") {
            out.push(child);
        }
    }
    Ok(())
}

/// Differences between a desired manifest and a live object (both as JSON), desired fields only.
/// `before` of each change is the desired value, `after` the live one.
pub fn compare(desired: &Value, live: &Value, ignored: &dyn Fn(&str) -> bool) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    if let Some(spec) = desired.get("spec") {
        subset("/spec", spec, live.get("spec"), &mut changes);
    }
    for field in ["labels", "annotations"] {
        if let Some(Value::Object(wanted)) = desired.pointer(&format!("/metadata/{field}")) {
            for (key, value) in wanted {
                let live_value = live
                    .pointer(&format!("/metadata/{field}"))
                    .and_then(|map| map.get(key));
                subset(
                    &push_pointer(&format!("/metadata/{field}"), key),
                    value,
                    live_value,
                    &mut changes,
                );
            }
        }
    }
    let is_config_map = desired.get("kind").and_then(Value::as_str) == Some("ConfigMap");
    if is_config_map {
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
                changes.push(FieldChange {
                    path: push_pointer("/data", key),
                    before: want.cloned(),
                    after: have.cloned(),
                });
            }
        }
    }
    changes.retain(|change| !ignored(&change.path));
    changes.truncate(crate::enrich::diff::MAX_CHANGES);
    changes
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

    #[test]
    fn defaults_added_by_knative_are_not_drift() {
        let desired = json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "a"},
            "spec": {"template": {"spec": {"containers": [{"image": "img:1"}]}}}});
        let live = json!({"spec": {"template": {"spec": {"containerConcurrency": 0, "timeoutSeconds": 300,
            "containers": [{"image": "img:1", "name": "user-container", "resources": {}}]}},
            "traffic": [{"latestRevision": true, "percent": 100}]}});
        assert!(compare(&desired, &live, &|_| false).is_empty());
    }

    #[test]
    fn a_changed_desired_field_is_drift() {
        let desired = json!({"kind": "Service", "spec": {"traffic": [{"latestRevision": true, "percent": 100}]}});
        let live = json!({"spec": {"traffic": [{"latestRevision": true, "percent": 100.0}]}});
        assert!(compare(&desired, &live, &|_| false).is_empty());
        let live = json!({"spec": {"traffic": [{"revisionName": "a-00001", "percent": 100}]}});
        let changes = compare(&desired, &live, &|_| false);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/spec/traffic/0/latestRevision");
    }

    #[test]
    fn config_map_data_compares_both_ways_but_not_example() {
        let desired = json!({"kind": "ConfigMap", "data": {"min-scale": "1", "_example": "docs"}});
        let live = json!({"data": {"min-scale": "1", "max-scale": "5", "_example": "other docs"}});
        let changes = compare(&desired, &live, &|_| false);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/data/max-scale");
        assert_eq!(changes[0].before, None);
    }

    #[test]
    fn lists_and_multi_documents_load() {
        let mut baseline = Baseline::default();
        baseline
            .add_yaml(
                "x.yaml",
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: n}\n---\napiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: s, namespace: n}\n---\n",
            )
            .unwrap();
        assert_eq!(baseline.len(), 2);
        let error = Baseline::default()
            .add_yaml("bad.yaml", "kind: Service\n")
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "bad.yaml document 0: needs apiVersion, kind and metadata.name"
        );
    }
}
