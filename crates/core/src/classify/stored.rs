//! The stored shape of an object's state (`objects.body`). The store keeps it as text it never
//! reads (the writer puts [`encode`]'s text in the store's object rows), so the shape belongs
//! to the engine whose state it is. Changing it is a schema change of the store (a new version
//! and a migration there); decoding is lenient where older rows may lack a field
//! (`#[serde(default)]`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::state::{ManagerStamp, ObjectState, Serialized};
use drift_model::{Millis, OwnerReference};

/// The stored text of an object's state (`objects.body`).
pub fn encode(object: &ObjectState) -> Result<String, serde_json::Error> {
    serde_json::to_string(&ObjectRowRef::from(object))
}

/// The state of an object's stored text.
pub fn decode(body: &str) -> Result<ObjectState, serde_json::Error> {
    serde_json::from_str::<ObjectRow>(body).map(ObjectState::from)
}

/// One owner reference of an object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerReferenceRow {
    /// Owner `apiVersion`.
    pub api_version: String,
    /// Owner kind.
    pub kind: String,
    /// Owner name.
    pub name: String,
    /// Owner uid.
    pub uid: String,
    /// The managing controller.
    #[serde(default)]
    pub controller: bool,
}

/// A field manager and its last write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ManagerRow {
    /// Field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// Subresource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// Last write time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// [`OwnerReferenceRow`], as written (borrowed).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct OwnerReferenceRowRef<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
    controller: bool,
}

/// [`ManagerRow`], as written (borrowed).
#[derive(Debug, Serialize)]
struct ManagerRowRef<'a> {
    manager: &'a str,
    operation: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    subresource: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    time: Option<&'a str>,
}

/// `objects.body`, as read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRow {
    cluster: String,
    uid: String,
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
    resource_version: String,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    creation_timestamp: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    owners: Vec<OwnerReferenceRow>,
    #[serde(default)]
    managers: Vec<ManagerRow>,
    #[serde(default)]
    spec: Option<Box<RawValue>>,
    #[serde(default)]
    status: Option<Box<RawValue>>,
    #[serde(default)]
    data: Option<BTreeMap<String, String>>,
    #[serde(default)]
    deleted: bool,
    #[serde(default)]
    listed: bool,
    #[serde(default)]
    confirmed_resource_version: Option<String>,
    #[serde(default)]
    sent_at: Option<Millis>,
    first_seen: Millis,
    last_seen: Millis,
}

/// `objects.body`, as written: borrowed from the engine's state, so writing a changed object
/// copies nothing but its owner and manager lists.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRowRef<'a> {
    cluster: &'a str,
    uid: &'a str,
    api_version: &'a str,
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    resource_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deletion_timestamp: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    owners: Vec<OwnerReferenceRowRef<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    managers: Vec<ManagerRowRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    listed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    confirmed_resource_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sent_at: Option<Millis>,
    first_seen: Millis,
    last_seen: Millis,
}

impl<'a> From<&'a ObjectState> for ObjectRowRef<'a> {
    fn from(object: &'a ObjectState) -> ObjectRowRef<'a> {
        let raw = |value: &'a Serialized| (!value.is_null()).then(|| value.raw());
        ObjectRowRef {
            cluster: &object.cluster,
            uid: &object.uid,
            api_version: &object.api_version,
            kind: &object.kind,
            namespace: &object.namespace,
            name: &object.name,
            resource_version: &object.resource_version,
            generation: object.generation,
            creation_timestamp: object.creation_timestamp.as_deref(),
            deletion_timestamp: object.deletion_timestamp.as_deref(),
            labels: &object.labels,
            annotations: &object.annotations,
            owners: object
                .owners
                .iter()
                .map(|owner| OwnerReferenceRowRef {
                    api_version: &owner.api_version,
                    kind: &owner.kind,
                    name: &owner.name,
                    uid: &owner.uid,
                    controller: owner.controller,
                })
                .collect(),
            managers: object
                .managers
                .iter()
                .map(|stamp| ManagerRowRef {
                    manager: &stamp.manager,
                    operation: &stamp.operation,
                    subresource: &stamp.subresource,
                    time: stamp.time.as_deref(),
                })
                .collect(),
            spec: raw(&object.spec),
            status: raw(&object.status),
            data: object.data.as_ref(),
            deleted: object.deleted,
            listed: object.listed,
            confirmed_resource_version: object.confirmed_resource_version.as_deref(),
            sent_at: object.sent_at,
            first_seen: object.first_seen,
            last_seen: object.last_seen,
        }
    }
}

impl From<ObjectRow> for ObjectState {
    fn from(row: ObjectRow) -> ObjectState {
        let serialized =
            |raw: Option<Box<RawValue>>| raw.map(Serialized::from_raw).unwrap_or_default();
        ObjectState {
            cluster: row.cluster,
            uid: row.uid,
            api_version: row.api_version,
            kind: row.kind,
            namespace: row.namespace,
            name: row.name,
            resource_version: row.resource_version,
            generation: row.generation,
            creation_timestamp: row.creation_timestamp,
            deletion_timestamp: row.deletion_timestamp,
            labels: row.labels,
            annotations: row.annotations,
            owners: row
                .owners
                .into_iter()
                .map(|owner| OwnerReference {
                    api_version: owner.api_version,
                    kind: owner.kind,
                    name: owner.name,
                    uid: owner.uid,
                    controller: owner.controller,
                })
                .collect(),
            managers: row
                .managers
                .into_iter()
                .map(|stamp| ManagerStamp {
                    manager: stamp.manager,
                    operation: stamp.operation,
                    subresource: stamp.subresource,
                    time: stamp.time,
                })
                .collect(),
            spec: serialized(row.spec),
            status: serialized(row.status),
            data: row.data,
            deleted: row.deleted,
            listed: row.listed,
            confirmed_resource_version: row.confirmed_resource_version,
            sent_at: row.sent_at,
            first_seen: row.first_seen,
            last_seen: row.last_seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_written_reads_back_whole() {
        let object = ObjectState {
            cluster: "c".into(),
            uid: "u".into(),
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: "n".into(),
            name: "d".into(),
            resource_version: "7".into(),
            generation: Some(3),
            creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
            deletion_timestamp: None,
            labels: BTreeMap::from([("a".into(), "b".into())]),
            annotations: BTreeMap::new(),
            owners: vec![OwnerReference {
                api_version: "serving.knative.dev/v1".into(),
                kind: "Revision".into(),
                name: "r".into(),
                uid: "ru".into(),
                controller: true,
            }],
            managers: vec![ManagerStamp {
                manager: "controller".into(),
                operation: "Update".into(),
                subresource: "status".into(),
                time: None,
            }],
            spec: Serialized::from_value(&json!({"replicas": 1})),
            status: Serialized::default(),
            data: None,
            deleted: true,
            listed: true,
            confirmed_resource_version: Some("5".into()),
            sent_at: Some(4),
            first_seen: 5,
            last_seen: 6,
        };
        let written = encode(&object).unwrap();
        let row: ObjectRow = serde_json::from_str(&written).unwrap();
        assert_eq!(ObjectState::from(row), object);
    }
}
