//! Kubernetes objects as the pipeline needs them: typed metadata, `managedFields`, and the rest as
//! JSON, with Secret values replaced by hashes.
//!
//! Parsing is lenient where Kubernetes is lenient (absent labels, annotations, owner references or
//! `managedFields` are empty) and strict where the pipeline cannot work without a value (`uid`,
//! `resourceVersion`, `kind`, `apiVersion`, `name`): a missing one is an [`Error::InvalidObject`]
//! that names the JSON path.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::Error;
pub use drift_model::OwnerReference;

/// One `metadata.managedFields[]` entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedFieldsEntry {
    /// The field manager (`kubectl-edit`, `controller`, ...).
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// `status`, `scale`, or empty for the main resource.
    #[serde(default)]
    pub subresource: String,
    /// When the manager last changed a field it owns (RFC 3339), if given.
    #[serde(default)]
    pub time: Option<String>,
    /// The `fieldsV1` trie of owned fields.
    #[serde(default)]
    pub fields: Value,
}

/// An object's `spec` serialized (keys sorted, as serde_json writes a map).
#[derive(Debug, Clone)]
pub struct SpecText(pub Box<serde_json::value::RawValue>);

impl PartialEq for SpecText {
    fn eq(&self, other: &SpecText) -> bool {
        self.0.get() == other.0.get()
    }
}

/// A Kubernetes object from a Resource-mode ApiServerSource event.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeObject {
    /// `apiVersion`, e.g. `serving.knative.dev/v1`.
    pub api_version: String,
    /// `kind`, e.g. `Revision`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`; empty for cluster-scoped objects.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.generation`, when the kind has one.
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<String>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations` (for Secrets, `last-applied-configuration` is hashed).
    pub annotations: BTreeMap<String, String>,
    /// `metadata.ownerReferences`.
    pub owner_references: Vec<OwnerReference>,
    /// `metadata.managedFields`.
    pub managed_fields: Vec<ManagedFieldsEntry>,
    /// `spec`, or `Null`.
    pub spec: Value,
    /// `spec` as the JSON text the state keeps (written once here, on the HTTP worker, and
    /// reused by the engine); `None` when the object was not decoded from JSON.
    pub spec_text: Option<SpecText>,
    /// `status`, or `Null`.
    pub status: Value,
    /// `data` of a ConfigMap (values) or Secret (hashes); `binaryData` values are hashed.
    pub data: Option<BTreeMap<String, String>>,
}

impl KubeObject {
    /// True for the `v1` `Secret` kind, whose values are hashed.
    pub fn is_secret(&self) -> bool {
        self.api_version == "v1" && self.kind == "Secret"
    }

    /// The API group (`serving.knative.dev`), empty for the core group.
    pub fn group(&self) -> &str {
        api_group(&self.api_version)
    }
}

pub use drift_model::group::api_group;

/// True for a group of Knative's own (`serving.knative.dev`, `eventing.knative.dev`, the
/// internals, the operator, and extensions' groups such as `kafka.eventing.knative.dev`).
pub(crate) fn is_knative_group(group: &str) -> bool {
    group == "knative.dev" || group.ends_with(".knative.dev")
}

/// A short, stable hash of a secret value: enough to tell "changed" from "unchanged", useless
/// for recovering the value.
pub fn hash_value(value: &str) -> String {
    let digest = Sha256::digest(value.as_bytes());
    let mut hex = String::with_capacity(16);
    for byte in &digest[..6] {
        hex.push_str(&format!("{byte:02x}"));
    }
    format!("sha256:{hex}")
}

/// Parses a Kubernetes object, hashing Secret values, without the shape checks and bounds of
/// [`super::shape::parse_object`] (which every caller outside `decode` uses).
pub(super) fn parse_unchecked(value: Value) -> Result<KubeObject, Error> {
    let Value::Object(mut root) = value else {
        return Err(Error::InvalidObject(format!(
            "data must be a JSON object, got {}",
            type_name(&value)
        )));
    };
    let api_version = required_str(&root, "apiVersion", "data.apiVersion")?;
    let kind = required_str(&root, "kind", "data.kind")?;
    let Some(Value::Object(mut metadata)) = root.remove("metadata") else {
        return Err(Error::InvalidObject(
            "data.metadata: missing or not an object".to_string(),
        ));
    };
    let name = required_str(&metadata, "name", "data.metadata.name")?;
    let uid = required_str(&metadata, "uid", "data.metadata.uid")?;
    let resource_version = required_str(
        &metadata,
        "resourceVersion",
        "data.metadata.resourceVersion",
    )?;
    // A decimal integer, as every API server writes it (and Kubernetes documents since 1.35):
    // anything else cannot be ordered, and an unorderable version would replace any state.
    if !resource_version.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(Error::InvalidObject(
            "data.metadata.resourceVersion: must be a decimal integer, as the API server writes it"
                .to_string(),
        ));
    }
    let namespace =
        optional_str(&metadata, "namespace", "data.metadata.namespace")?.unwrap_or_default();
    let generation = match metadata.get("generation") {
        None | Some(Value::Null) => None,
        Some(Value::Number(number)) => Some(number.as_i64().ok_or_else(|| {
            Error::InvalidObject("data.metadata.generation: not an integer".to_string())
        })?),
        Some(other) => {
            return Err(Error::InvalidObject(format!(
                "data.metadata.generation: expected an integer, got {}",
                type_name(other)
            )))
        }
    };
    let creation_timestamp = optional_str(
        &metadata,
        "creationTimestamp",
        "data.metadata.creationTimestamp",
    )?;
    let deletion_timestamp = optional_str(
        &metadata,
        "deletionTimestamp",
        "data.metadata.deletionTimestamp",
    )?;
    let labels = string_map(metadata.remove("labels"), "data.metadata.labels")?;
    let mut annotations = string_map(metadata.remove("annotations"), "data.metadata.annotations")?;
    let owner_references = match metadata.remove("ownerReferences") {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => serde_json::from_value(value).map_err(|error| {
            Error::InvalidObject(format!("data.metadata.ownerReferences: {error}"))
        })?,
    };
    let managed_fields = parse_managed_fields(metadata.remove("managedFields"))?;
    let spec = root.remove("spec").unwrap_or(Value::Null);
    let status = root.remove("status").unwrap_or(Value::Null);
    let is_secret = api_version == "v1" && kind == "Secret";
    let is_config_map = api_version == "v1" && kind == "ConfigMap";
    let data = if is_secret {
        if let Some(applied) =
            annotations.get_mut("kubectl.kubernetes.io/last-applied-configuration")
        {
            *applied = hash_value(applied);
        }
        let mut hashed = BTreeMap::new();
        for field in ["data", "stringData"] {
            if let Some(Value::Object(map)) = root.remove(field) {
                for (key, value) in map {
                    let text = match value {
                        Value::String(text) => text,
                        other => other.to_string(),
                    };
                    hashed.insert(key, hash_value(&text));
                }
            }
        }
        Some(hashed)
    } else if is_config_map {
        let mut values = string_map(root.remove("data"), "data.data")?;
        if let Some(Value::Object(binary)) = root.remove("binaryData") {
            for (key, value) in binary {
                values.insert(key, hash_value(&value.to_string()));
            }
        }
        Some(values)
    } else {
        None
    };
    let object = KubeObject {
        api_version,
        kind,
        name,
        namespace,
        uid,
        resource_version,
        generation,
        creation_timestamp,
        deletion_timestamp,
        labels,
        annotations,
        owner_references,
        managed_fields,
        spec,
        status,
        data,
        spec_text: None,
    };
    Ok(object)
}

/// Parses `metadata.managedFields`; entries that are not objects are an error with their index.
pub fn parse_managed_fields(value: Option<Value>) -> Result<Vec<ManagedFieldsEntry>, Error> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(Error::InvalidObject(format!(
                "data.metadata.managedFields: expected an array, got {}",
                type_name(&other)
            )))
        }
    };
    let mut entries = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let path = format!("data.metadata.managedFields[{index}]");
        let Value::Object(mut map) = item else {
            return Err(Error::InvalidObject(format!("{path}: expected an object")));
        };
        let manager =
            optional_str(&map, "manager", &format!("{path}.manager"))?.unwrap_or_default();
        let operation =
            optional_str(&map, "operation", &format!("{path}.operation"))?.unwrap_or_default();
        let subresource =
            optional_str(&map, "subresource", &format!("{path}.subresource"))?.unwrap_or_default();
        let time = optional_str(&map, "time", &format!("{path}.time"))?;
        let fields = map.remove("fieldsV1").unwrap_or(Value::Null);
        if !(fields.is_object() || fields.is_null()) {
            return Err(Error::InvalidObject(format!(
                "{path}.fieldsV1: expected an object"
            )));
        }
        entries.push(ManagedFieldsEntry {
            manager,
            operation,
            subresource,
            time,
            fields,
        });
    }
    Ok(entries)
}

fn required_str(map: &Map<String, Value>, key: &str, path: &str) -> Result<String, Error> {
    match optional_str(map, key, path)? {
        Some(text) if !text.is_empty() => Ok(text),
        _ => Err(Error::InvalidObject(format!("{path}: missing"))),
    }
}

fn optional_str(map: &Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, Error> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(Error::InvalidObject(format!(
            "{path}: expected a string, got {}",
            type_name(other)
        ))),
    }
}

fn string_map(value: Option<Value>, path: &str) -> Result<BTreeMap<String, String>, Error> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => {
            let mut out = BTreeMap::new();
            for (key, value) in map {
                match value {
                    Value::String(text) => {
                        out.insert(key, text);
                    }
                    other => {
                        return Err(Error::InvalidObject(format!(
                            "{path}.{key}: expected a string, got {}",
                            type_name(&other)
                        )))
                    }
                }
            }
            Ok(out)
        }
        Some(other) => Err(Error::InvalidObject(format!(
            "{path}: expected an object, got {}",
            type_name(&other)
        ))),
    }
}

/// The JSON type of a value, for error messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_values_are_hashed() {
        let object = super::super::shape::parse_object(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "n", "uid": "u", "resourceVersion": "1",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"token\":\"c2VjcmV0\"}}"}},
            "data": {"token": "c2VjcmV0"},
            "stringData": {"password": "hunter2"}
        }))
        .unwrap();
        let data = object.data.unwrap();
        assert_eq!(data["token"], hash_value("c2VjcmV0"));
        assert_eq!(data["password"], hash_value("hunter2"));
        let applied = &object.annotations["kubectl.kubernetes.io/last-applied-configuration"];
        assert!(applied.starts_with("sha256:"));
        assert!(!format!("{data:?}{applied}").contains("c2VjcmV0"));
    }

    #[test]
    fn missing_uid_names_path() {
        let error = super::super::shape::parse_object(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "resourceVersion": "1"}}))
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid ApiServerSource data: data.metadata.uid: missing"
        );
    }

    #[test]
    fn wrong_label_type_names_path() {
        let error = super::super::shape::parse_object(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u", "resourceVersion": "1", "labels": {"a": 1}}}))
        .unwrap_err();
        assert!(error
            .to_string()
            .contains("data.metadata.labels.a: expected a string"));
    }
}
