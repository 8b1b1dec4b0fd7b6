//! Restorable manifests: an object's last seen state as a body the API server takes on create
//! (`kubectl apply`, `export --last-good`, a restore), with what the server sets left out.
//!
//! Kept: `apiVersion`, `kind`, `metadata.name` and `namespace`, the labels, the annotations
//! (less those below), `spec` and a ConfigMap's `data`. Left out: `uid`, `resourceVersion`,
//! `generation`, `creationTimestamp`, `deletionTimestamp`, `managedFields` and `status`, which the
//! server sets or refuses on create (`resourceVersion` is answered with a 500); the
//! `ownerReferences`, whose uids name owners that a restore does not bring back (the garbage
//! collector would delete the object again); `kubectl.kubernetes.io/last-applied-configuration`,
//! which the state keeps as a hash only; and Knative's `<group>/creator` and `/lastModifier`,
//! which Knative's webhook sets to whoever creates the object; and a template's
//! `creationTimestamp: null` (Go's zero time, which the Knative schemas do not list).
//!
//! Not restorable: a Secret (its values are kept as hashes, and never leave the process), a
//! ConfigMap with `binaryData` (those values are kept as hashes too), a Pod
//! (its spec is kept trimmed to containers' names and images) and an object a controller owns
//! (its owner re-creates it; a copy applied beside it would be a second, unowned one), and a
//! deleted object whose tombstone kept nothing to restore (past `limits.maxStateBytes`).

use crate::decode::object::is_knative_group;
use serde_json::{Map, Value};

use super::state::ObjectState;

/// The annotation whose value the state keeps as a hash.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Why an object has no restorable manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRestorable {
    /// A Secret: its values are kept as hashes.
    #[error("a Secret's values are kept as hashes only")]
    Secret,
    /// A Pod: its spec is kept trimmed.
    #[error("a Pod's spec is kept trimmed to its containers")]
    Pod,
    /// A ConfigMap with `binaryData`: those values are kept as hashes.
    #[error("a ConfigMap's binaryData values are kept as hashes only")]
    BinaryData,
    /// A deleted object whose tombstone kept no spec or data (the state was past its byte cap).
    #[error("its tombstone kept no spec or data")]
    Trimmed,
    /// An object a controller owns: the owner re-creates it.
    #[error("owned by {kind} {name}, which re-creates it")]
    Owned {
        /// The controller's kind.
        kind: String,
        /// The controller's name.
        name: String,
    },
}

impl NotRestorable {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            NotRestorable::Secret => "secret",
            NotRestorable::Pod => "pod",
            NotRestorable::Trimmed => "trimmed",
            NotRestorable::BinaryData => "binary_data",
            NotRestorable::Owned { .. } => "owned",
        }
    }
}

/// The body that re-creates `object` as it was last seen.
pub fn manifest(object: &ObjectState) -> Result<Value, NotRestorable> {
    if object.is_kind("", "Secret") {
        return Err(NotRestorable::Secret);
    }
    if object.is_kind("", "Pod") {
        return Err(NotRestorable::Pod);
    }
    if object.binary_data {
        return Err(NotRestorable::BinaryData);
    }
    if object.deleted && object.spec.is_null() && object.data.is_none() {
        return Err(NotRestorable::Trimmed);
    }
    if let Some(owner) = object.owners.iter().find(|owner| owner.controller) {
        return Err(NotRestorable::Owned {
            kind: owner.kind.clone(),
            name: owner.name.clone(),
        });
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(object.name.clone()));
    if !object.namespace.is_empty() {
        metadata.insert("namespace".into(), Value::String(object.namespace.clone()));
    }
    let pairs = |pairs: &mut dyn Iterator<Item = (&str, &str)>| -> Map<String, Value> {
        pairs
            .map(|(key, value)| (key.to_string(), Value::String(value.to_string())))
            .collect()
    };
    let labels = pairs(&mut object.labels.iter());
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    let annotations = pairs(
        &mut object
            .annotations
            .iter()
            .filter(|(key, _)| !set_by_the_server(key)),
    );
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(annotations));
    }
    let mut body = Map::new();
    body.insert(
        "apiVersion".into(),
        Value::String(object.api_version.clone()),
    );
    body.insert("kind".into(), Value::String(object.kind.clone()));
    body.insert("metadata".into(), Value::Object(metadata));
    if !object.spec.is_null() {
        let mut spec = object.spec.value();
        drop_null_creation_times(&mut spec);
        body.insert("spec".into(), spec);
    }
    if let Some(data) = &object.data {
        body.insert(
            "data".into(),
            Value::Object(
                data.iter()
                    .map(|(key, value)| (key.clone(), Value::String(value.clone())))
                    .collect(),
            ),
        );
    }
    Ok(Value::Object(body))
}

/// Removes `creationTimestamp: null` from every `metadata` below `value` (the templates'):
/// Go prints a zero time that way, and a schema that lists no such field refuses it.
fn drop_null_creation_times(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
                if metadata.get("creationTimestamp") == Some(&Value::Null) {
                    metadata.remove("creationTimestamp");
                }
            }
            for child in map.values_mut() {
                drop_null_creation_times(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_creation_times),
        _ => {}
    }
}

/// A manifest as a YAML document (what `export --last-good` writes).
pub fn to_yaml(manifest: &Value) -> Result<String, String> {
    serde_saphyr::to_string(manifest).map_err(|error| error.to_string())
}

/// True for an annotation a restore must not carry: the hashed last-applied configuration,
/// and the users Knative's webhook stamps.
fn set_by_the_server(key: &str) -> bool {
    if key == LAST_APPLIED {
        return true;
    }
    match key.split_once('/') {
        Some((group, name)) => {
            is_knative_group(group) && matches!(name, "creator" | "lastModifier")
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_webhooks_stamps_and_the_hashed_last_applied_are_set_by_the_server() {
        assert!(set_by_the_server(LAST_APPLIED));
        assert!(set_by_the_server("serving.knative.dev/creator"));
        assert!(set_by_the_server("eventing.knative.dev/lastModifier"));
        assert!(!set_by_the_server("serving.knative.dev/rolloutDuration"));
        assert!(!set_by_the_server("example.com/creator"));
        assert!(!set_by_the_server("creator"));
    }
}
