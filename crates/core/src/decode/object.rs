//! Kubernetes objects as the pipeline needs them: typed metadata, `managedFields`, and the rest as
//! JSON, with Secret values replaced by hashes.
//!
//! Parsing is lenient where Kubernetes is lenient (absent labels, annotations, owner references or
//! `managedFields` are empty) and strict where the pipeline cannot work without a value (`uid`,
//! `resourceVersion`, `kind`, `apiVersion`, `name`): a missing one is an [`Error::InvalidObject`]
//! that names the JSON path.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::cloudevent::short;
use super::kept::{Serialized, KEPT_STATUS};
use super::raw::{self, Members};
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
    pub fields: FieldsV1,
}

/// A `fieldsV1` trie as its JSON text (an object, or `null`). Tries are a third of an event's
/// bytes and are read only to attribute a change ([`FieldsV1::value`]), so they are not parsed
/// into a tree when the event is decoded.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct FieldsV1(Box<RawValue>);

impl FieldsV1 {
    /// The trie, parsed.
    pub fn value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The trie of a parsed value (tests, and entries built from values).
    pub fn from_value(value: &Value) -> FieldsV1 {
        serde_json::value::to_raw_value(value).map_or_else(|_| FieldsV1::default(), FieldsV1)
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        self.0.get()
    }

    /// A trie from its JSON text (an object or `null`).
    pub(crate) fn from_raw(raw: Box<RawValue>) -> FieldsV1 {
        FieldsV1(raw)
    }
}

impl Default for FieldsV1 {
    fn default() -> FieldsV1 {
        FieldsV1(RawValue::NULL.to_owned())
    }
}

impl PartialEq for FieldsV1 {
    fn eq(&self, other: &FieldsV1) -> bool {
        self.text() == other.text()
    }
}

impl std::fmt::Debug for FieldsV1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

/// An object's `spec` as JSON text, parsed into a tree only when something reads it as a value.
///
/// Most events leave the spec as it was (status churn): the state compares its text with the
/// event's and never needs the tree, so the HTTP worker does not build it. The text is the
/// event's own when the event is compact JSON (what the API server writes), else the text
/// serde_json writes for it. Two specs are equal when their texts are, or else their values
/// (texts of one value can differ: key order, escapes such as Go's `\u003c`).
pub struct ObjectSpec {
    /// Valid JSON, within the depth bound: read so by the decoder, or written by serde_json.
    text: Box<str>,
    parsed: std::sync::OnceLock<Value>,
    /// What the shape check reads of it (`shape::spec_view`: traffic, replicas, the containers'
    /// names and images): made by the decoder's one pass as it reads the spec (or by the shape
    /// check for a Pod's spec read another way), so that neither the check nor the writer's
    /// state of a Pod (which keeps only those names and images) reads the spec again.
    view: std::sync::OnceLock<Value>,
}

impl ObjectSpec {
    /// A spec from its JSON text (valid JSON, within the depth bound).
    pub(crate) fn from_raw(text: Box<RawValue>) -> ObjectSpec {
        ObjectSpec {
            text: text.into(),
            parsed: std::sync::OnceLock::new(),
            view: std::sync::OnceLock::new(),
        }
    }

    /// A spec from a part of a text the decoder has read as JSON (one whole value, within the
    /// depth bound): copied, not checked again.
    pub(crate) fn from_read_text(text: &str) -> ObjectSpec {
        ObjectSpec {
            text: text.into(),
            parsed: std::sync::OnceLock::new(),
            view: std::sync::OnceLock::new(),
        }
    }

    /// A spec from a parsed value.
    pub fn from_value(value: Value) -> ObjectSpec {
        let text = serde_json::value::to_raw_value(&value)
            .unwrap_or_else(|_| RawValue::NULL.to_owned())
            .into();
        let parsed = std::sync::OnceLock::new();
        let _ = parsed.set(value);
        ObjectSpec {
            text,
            parsed,
            view: std::sync::OnceLock::new(),
        }
    }

    /// The spec, parsed (once). The text was checked when the event was decoded, so it parses;
    /// `null` would stand for one that did not.
    pub fn value(&self) -> &Value {
        self.parsed
            .get_or_init(|| serde_json::from_str(&self.text).unwrap_or(Value::Null))
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The tree, when something has parsed it already.
    pub(crate) fn parsed(&self) -> Option<&Value> {
        self.parsed.get()
    }

    /// The shape check's view of it (see the field), when the decoder made one.
    pub(crate) fn view(&self) -> Option<&Value> {
        self.view.get().or_else(|| self.parsed())
    }

    /// Keeps the shape check's view.
    pub(crate) fn keep_view(&self, view: Value) {
        let _ = self.view.set(view);
    }

    /// True for an absent spec.
    pub fn is_null(&self) -> bool {
        &*self.text == "null"
    }
}

impl Default for ObjectSpec {
    fn default() -> ObjectSpec {
        ObjectSpec::from_raw(RawValue::NULL.to_owned())
    }
}

impl Clone for ObjectSpec {
    fn clone(&self) -> ObjectSpec {
        ObjectSpec {
            text: self.text.clone(),
            parsed: self.parsed.clone(),
            view: self.view.clone(),
        }
    }
}

impl PartialEq for ObjectSpec {
    fn eq(&self, other: &ObjectSpec) -> bool {
        self.text == other.text || self.value() == other.value()
    }
}

impl std::fmt::Debug for ObjectSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
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
    /// `spec` (`null` when absent), as text until read.
    pub spec: ObjectSpec,
    /// `status` cut to the members the classes read (`KEPT_STATUS`), or `Null`; a `status` that
    /// is not an object is kept whole, for the shape check to name. What the check reads on the
    /// general path (the fast path hands the check a tree borrowed from the text instead, and
    /// leaves this `Null`): the check keeps the tree's text in `kept_status` and empties this:
    /// past the check it is always `Null`, so it is not visible outside this crate, and only
    /// `decode` reads it.
    pub(crate) status: Value,
    /// The kept status's text (`null` when it keeps no member), as the state keeps it: written
    /// by the shape check (`shape::checked_with`), on the HTTP worker that decoded the event.
    pub kept_status: Serialized,
    /// The bytes of the `status` members not kept (names and JSON texts), for the status bound.
    pub status_skipped_bytes: usize,
    /// `data` of a ConfigMap (values) or Secret (hashes); `binaryData` values are hashed. Shared
    /// with the state made from it (a ConfigMap's values can be hundreds of KB: not copied).
    pub data: Option<std::sync::Arc<super::DataMap>>,
    /// A ConfigMap had `binaryData` values: `data` holds their hashes beside its own values.
    pub binary_data: bool,
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
    let text = value.to_string();
    parse_general(&text, scan_text(&text)?)
}

/// [`raw::scan`], its refusal as this request's JSON error.
pub(super) fn scan_text(text: &str) -> Result<raw::Scanned, Error> {
    raw::scan(text).map_err(|error| Error::InvalidJson(format!("data: {error}")))
}

/// Parses an object from its JSON text (valid JSON, scanned by [`raw::scan`]) level by level:
/// every shape, every error worded. The HTTP workers try `fast::parse` first (one pass, the
/// common shape) and come here for anything else; both give the same object (tested there).
///
/// Only what the pipeline reads becomes a value: the top level and `metadata` are read one level
/// deep as texts ([`Members`]), `status` keeps the members the classes read ([`KEPT_STATUS`]),
/// `managedFields`' tries stay text ([`FieldsV1`]), and unknown members are skipped by the
/// scanner. Typed reads come first; a value of the wrong type falls back to the tree-based read,
/// so error messages are those of the tree-based parser.
pub(super) fn parse_general(text: &str, scanned: raw::Scanned) -> Result<KubeObject, Error> {
    let Some(root) = Members::of(text) else {
        let value: Value = serde_json::from_str(text)
            .map_err(|error| Error::InvalidJson(format!("data: {}", short(&error.to_string()))))?;
        return Err(Error::InvalidObject(format!(
            "data must be a JSON object, got {}",
            type_name(&value)
        )));
    };
    let api_version = required_raw(root.get("apiVersion"), "data.apiVersion")?;
    let kind = required_raw(root.get("kind"), "data.kind")?;
    let metadata = match root
        .get("metadata")
        .map(|raw| (raw, Members::of(raw.get())))
    {
        Some((_, Some(metadata))) => metadata,
        _ => {
            return Err(Error::InvalidObject(
                "data.metadata: missing or not an object".to_string(),
            ))
        }
    };
    let name = required_raw(metadata.get("name"), "data.metadata.name")?;
    let uid = required_raw(metadata.get("uid"), "data.metadata.uid")?;
    let resource_version = required_raw(
        metadata.get("resourceVersion"),
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
        optional_raw(metadata.get("namespace"), "data.metadata.namespace")?.unwrap_or_default();
    let generation = match metadata
        .get("generation")
        .map(|raw| json(raw, "data.metadata.generation"))
        .transpose()?
    {
        None | Some(Value::Null) => None,
        Some(Value::Number(number)) => Some(number.as_i64().ok_or_else(|| {
            Error::InvalidObject("data.metadata.generation: not an integer".to_string())
        })?),
        Some(other) => {
            return Err(Error::InvalidObject(format!(
                "data.metadata.generation: expected an integer, got {}",
                type_name(&other)
            )))
        }
    };
    let creation_timestamp = optional_raw(
        metadata.get("creationTimestamp"),
        "data.metadata.creationTimestamp",
    )?;
    let deletion_timestamp = optional_raw(
        metadata.get("deletionTimestamp"),
        "data.metadata.deletionTimestamp",
    )?;
    let labels = string_map_raw(metadata.get("labels"), "data.metadata.labels")?;
    let mut annotations = string_map_raw(metadata.get("annotations"), "data.metadata.annotations")?;
    let owner_references = match metadata.get("ownerReferences") {
        None => Vec::new(),
        Some(raw) if raw::is_null(raw) => Vec::new(),
        Some(raw) => match serde_json::from_str(raw.get()) {
            Ok(owners) => owners,
            // The tree-based read, for its message.
            Err(_) => serde_json::from_value(json(raw, "data.metadata.ownerReferences")?).map_err(
                |error| Error::InvalidObject(format!("data.metadata.ownerReferences: {error}")),
            )?,
        },
    };
    let managed_fields = parse_managed_fields_raw(metadata.get("managedFields"))?;
    let spec = match root.get("spec") {
        None => ObjectSpec::default(),
        // Kept as sent, parsed when read: compact text whose numbers all parse.
        Some(raw) if scanned.compact && scanned.plain_numbers => {
            ObjectSpec::from_raw(raw.to_owned())
        }
        // Parsed now: a number out of range is this request's error, and the text kept is the
        // compact one serde_json writes.
        Some(raw) => ObjectSpec::from_value(json(raw, "data.spec")?),
    };
    let (status, status_skipped_bytes) = kept_status(root.get("status"))?;
    let is_secret = api_version == "v1" && kind == "Secret";
    let is_config_map = api_version == "v1" && kind == "ConfigMap";
    let mut binary_data = false;
    let data = if is_secret {
        if let Some(applied) =
            annotations.get_mut("kubectl.kubernetes.io/last-applied-configuration")
        {
            *applied = hash_value(applied);
        }
        let mut hashed = BTreeMap::new();
        for field in ["data", "stringData"] {
            if let Some(Value::Object(map)) = root
                .get(field)
                .map(|raw| json(raw, &format!("data.{field}")))
                .transpose()?
            {
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
        let mut values = string_map_raw(root.get("data"), "data.data")?;
        if let Some(Value::Object(binary)) = root
            .get("binaryData")
            .map(|raw| json(raw, "data.binaryData"))
            .transpose()?
        {
            binary_data = !binary.is_empty();
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
        kept_status: Serialized::default(),
        status_skipped_bytes,
        data: data.map(|data| std::sync::Arc::new(super::DataMap::from_map(data))),
        binary_data,
    };
    Ok(object)
}

/// `status` as the state keeps it: the members in [`KEPT_STATUS`] as values, and the bytes of
/// the rest (their names and JSON texts). A status that is not an object is returned whole, for
/// the shape check to name.
fn kept_status(raw: Option<&RawValue>) -> Result<(Value, usize), Error> {
    let Some(raw) = raw else {
        return Ok((Value::Null, 0));
    };
    let Some(members) = Members::of(raw.get()) else {
        return Ok((json(raw, "data.status")?, 0));
    };
    let mut kept = Map::new();
    let mut skipped = 0usize;
    for (key, value) in &members.0 {
        if KEPT_STATUS.contains(&key.as_ref()) {
            // Last wins, as in a map built from the document.
            kept.insert(key.to_string(), json(value, &format!("data.status.{key}"))?);
        } else {
            skipped = skipped.saturating_add(key.len() + value.get().len());
        }
    }
    Ok((Value::Object(kept), skipped))
}

/// A member's JSON text parsed into a tree; a number out of range (or nesting past the limit)
/// is the request's JSON error, named by path.
pub(super) fn json(raw: &RawValue, path: &str) -> Result<Value, Error> {
    json_text(raw.get(), path)
}

/// [`json`] of a text.
pub(super) fn json_text(text: &str, path: &str) -> Result<Value, Error> {
    serde_json::from_str(text)
        .map_err(|error| Error::InvalidJson(format!("{path}: {}", short(&error.to_string()))))
}

/// Parses `metadata.managedFields`; entries that are not objects are an error with their index.
pub fn parse_managed_fields(value: Option<Value>) -> Result<Vec<ManagedFieldsEntry>, Error> {
    let text = value.map(|value| value.to_string());
    let raw = match text.as_deref().map(serde_json::from_str::<&RawValue>) {
        None => None,
        Some(Ok(raw)) => Some(raw),
        // A `Value` always serializes to valid JSON; this arm is unreachable.
        Some(Err(error)) => {
            return Err(Error::InvalidObject(format!(
                "data.metadata.managedFields: {error}"
            )))
        }
    };
    parse_managed_fields_raw(raw)
}

/// [`parse_managed_fields`] from the JSON text of `managedFields`: each entry's field trie is kept
/// as text ([`FieldsV1`]), never built into a tree here.
pub(crate) fn parse_managed_fields_raw(
    raw: Option<&RawValue>,
) -> Result<Vec<ManagedFieldsEntry>, Error> {
    let Some(raw) = raw.filter(|raw| !raw::is_null(raw)) else {
        return Ok(Vec::new());
    };
    let Some(items) = raw::elements(raw) else {
        return Err(Error::InvalidObject(format!(
            "data.metadata.managedFields: expected an array, got {}",
            type_name(&json(raw, "data.metadata.managedFields")?)
        )));
    };
    let mut entries = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let path = || format!("data.metadata.managedFields[{index}]");
        let Some(map) = Members::of(item.get()) else {
            return Err(Error::InvalidObject(format!(
                "{}: expected an object",
                path()
            )));
        };
        let string = |key: &str| -> Result<Option<String>, Error> {
            optional_raw_at(map.get(key), || format!("{}.{key}", path()))
        };
        let manager = string("manager")?.unwrap_or_default();
        let operation = string("operation")?.unwrap_or_default();
        let subresource = string("subresource")?.unwrap_or_default();
        let time = string("time")?;
        let fields = match map.get("fieldsV1") {
            None => FieldsV1::default(),
            Some(raw) if raw::is_null(raw) || raw.get().starts_with('{') => {
                FieldsV1(raw.to_owned())
            }
            Some(_) => {
                return Err(Error::InvalidObject(format!(
                    "{}.fieldsV1: expected an object",
                    path()
                )))
            }
        };
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

/// A required string member given as JSON text.
fn required_raw(raw: Option<&RawValue>, path: &str) -> Result<String, Error> {
    match optional_raw(raw, path)? {
        Some(text) if !text.is_empty() => Ok(text),
        _ => Err(Error::InvalidObject(format!("{path}: missing"))),
    }
}

/// An optional string member given as JSON text (`null` is absent).
fn optional_raw(raw: Option<&RawValue>, path: &str) -> Result<Option<String>, Error> {
    optional_raw_at(raw, || path.to_string())
}

/// [`optional_raw`] with the path written only for an error.
fn optional_raw_at(
    raw: Option<&RawValue>,
    path: impl FnOnce() -> String,
) -> Result<Option<String>, Error> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    match serde_json::from_str::<Option<String>>(raw.get()) {
        Ok(text) => Ok(text),
        Err(_) => {
            let path = path();
            let value = json(raw, &path)?;
            Err(Error::InvalidObject(format!(
                "{path}: expected a string, got {}",
                type_name(&value)
            )))
        }
    }
}

/// A map of strings (labels, annotations, a ConfigMap's data) given as JSON text: read typed,
/// and through the tree only to name a value of the wrong type.
fn string_map_raw(raw: Option<&RawValue>, path: &str) -> Result<BTreeMap<String, String>, Error> {
    let Some(raw) = raw else {
        return Ok(BTreeMap::new());
    };
    match serde_json::from_str::<Option<BTreeMap<String, String>>>(raw.get()) {
        Ok(map) => Ok(map.unwrap_or_default()),
        Err(_) => string_map(Some(json(raw, path)?), path),
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
