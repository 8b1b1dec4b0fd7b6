//! The stored shape of an object's state (`objects.body`). The store keeps it as text it never
//! reads (the writer puts [`encode`]'s text in the store's object rows), so the shape belongs
//! to the engine whose state it is. Changing it is a schema change of the store (a new version
//! and a migration there); decoding is lenient where older rows may lack a field
//! (`#[serde(default)]`). One shape serves both ways: written borrowed from the engine's state
//! (writing copies nothing of it but a ConfigMap's values, see [`encode`]), read owned.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::state::{ManagerStamp, Name, ObjectState, Serialized, Spec};
use crate::decode::DataMap;
use drift_model::{Millis, OwnerReference, Pairs};

/// The stored text of an object's state (`objects.body`).
pub fn encode(object: &ObjectState) -> Result<String, serde_json::Error> {
    serde_json::to_string(&ObjectRow::of(object)?)
}

/// The state of an object's stored text.
pub fn decode(body: &str) -> Result<ObjectState, serde_json::Error> {
    let mut row = serde_json::from_str::<ObjectRow<'_>>(body)?;
    // Checked here, where an error can be returned: an object of strings.
    let data = row
        .data
        .take()
        .map(|raw| DataMap::from_raw(&raw))
        .transpose()?;
    let mut object = ObjectState::from(row);
    object.data = data.map(std::sync::Arc::new);
    Ok(object)
}

/// One owner reference of an object.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerReferenceRow<'a> {
    api_version: Cow<'a, str>,
    kind: Cow<'a, str>,
    name: Cow<'a, str>,
    uid: Cow<'a, str>,
    #[serde(default)]
    controller: bool,
}

/// A field manager and its last write.
#[derive(Debug, Serialize, Deserialize)]
struct ManagerRow<'a> {
    manager: Cow<'a, str>,
    operation: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "str::is_empty")]
    subresource: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time: Option<Cow<'a, str>>,
}

/// `objects.body`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRow<'a> {
    cluster: Cow<'a, str>,
    uid: Cow<'a, str>,
    api_version: Cow<'a, str>,
    kind: Cow<'a, str>,
    namespace: Cow<'a, str>,
    name: Cow<'a, str>,
    resource_version: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deletion_timestamp: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "is_empty")]
    labels: Cow<'a, Pairs>,
    #[serde(default, skip_serializing_if = "is_empty")]
    annotations: Cow<'a, Pairs>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    owners: Vec<OwnerReferenceRow<'a>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    managers: Vec<ManagerRow<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<Cow<'a, RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<Cow<'a, RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<Cow<'a, RawValue>>,
    /// Written only when true (a ConfigMap with `binaryData`): every other row is as before.
    #[serde(
        default,
        rename = "binaryDataHashed",
        skip_serializing_if = "std::ops::Not::not"
    )]
    binary_data: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    listed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    confirmed_resource_version: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sent_at: Option<Millis>,
    first_seen: Millis,
    last_seen: Millis,
}

// serde's `skip_serializing_if` hands over a reference to the field as it is typed.
#[allow(clippy::ptr_arg)]
fn is_empty(map: &Cow<'_, Pairs>) -> bool {
    map.is_empty()
}

impl<'a> ObjectRow<'a> {
    /// The row of `object`, borrowed from it but for a ConfigMap's values (below).
    fn of(object: &'a ObjectState) -> Result<ObjectRow<'a>, serde_json::Error> {
        let raw = |value: &'a Serialized| (!value.is_null()).then(|| Cow::Borrowed(value.raw()));
        Ok(ObjectRow {
            cluster: Cow::Borrowed(&object.cluster),
            uid: Cow::Borrowed(&object.uid),
            api_version: Cow::Borrowed(&object.api_version),
            kind: Cow::Borrowed(&object.kind),
            namespace: Cow::Borrowed(&object.namespace),
            name: Cow::Borrowed(&object.name),
            resource_version: Cow::Borrowed(&object.resource_version),
            generation: object.generation,
            creation_timestamp: object.creation_timestamp.as_deref().map(Cow::Borrowed),
            deletion_timestamp: object.deletion_timestamp.as_deref().map(Cow::Borrowed),
            labels: Cow::Borrowed(&object.labels),
            annotations: Cow::Borrowed(&object.annotations),
            owners: object
                .owners
                .iter()
                .map(|owner| OwnerReferenceRow {
                    api_version: Cow::Borrowed(&owner.api_version),
                    kind: Cow::Borrowed(&owner.kind),
                    name: Cow::Borrowed(&owner.name),
                    uid: Cow::Borrowed(&owner.uid),
                    controller: owner.controller,
                })
                .collect(),
            managers: object
                .managers
                .iter()
                .map(|stamp| ManagerRow {
                    manager: Cow::Borrowed(&*stamp.manager),
                    operation: Cow::Borrowed(&*stamp.operation),
                    subresource: Cow::Borrowed(&*stamp.subresource),
                    time: stamp.time.as_deref().map(Cow::Borrowed),
                })
                .collect(),
            // Unpacked for the row (the state keeps it packed: `Spec`).
            spec: (!object.spec.is_null()).then(|| Cow::Owned(object.spec.raw())),
            status: raw(&object.status),
            // As received: a ConfigMap whose values nothing read is not parsed into a map to
            // be written. The state keeps the text as a `str`, checked when it was read; the
            // row's `RawValue` is made here (a copy and a syntax check, on the writer), only
            // when the row is written: when the object's content changed, not on most events.
            data: object
                .data
                .as_deref()
                .map(|data| RawValue::from_string(data.text().to_owned()).map(Cow::Owned))
                .transpose()?,
            binary_data: object.binary_data,
            deleted: object.deleted,
            listed: object.listed,
            confirmed_resource_version: object
                .confirmed_resource_version
                .as_deref()
                .map(Cow::Borrowed),
            sent_at: object.sent_at,
            first_seen: object.first_seen,
            last_seen: object.last_seen,
        })
    }
}

impl From<ObjectRow<'_>> for ObjectState {
    fn from(row: ObjectRow<'_>) -> ObjectState {
        let serialized = |raw: Option<Cow<'_, RawValue>>| {
            raw.map(|raw| Serialized::from_raw(raw.into_owned()))
                .unwrap_or_default()
        };
        ObjectState {
            cluster: row.cluster.into_owned(),
            uid: row.uid.into_owned(),
            api_version: row.api_version.into_owned(),
            kind: row.kind.into_owned(),
            namespace: row.namespace.into_owned(),
            name: row.name.into_owned(),
            resource_version: row.resource_version.into_owned(),
            generation: row.generation,
            creation_timestamp: row.creation_timestamp.map(Cow::into_owned),
            deletion_timestamp: row.deletion_timestamp.map(Cow::into_owned),
            labels: row.labels.into_owned(),
            annotations: row.annotations.into_owned(),
            owners: row
                .owners
                .into_iter()
                .map(|owner| OwnerReference {
                    api_version: owner.api_version.into_owned(),
                    kind: owner.kind.into_owned(),
                    name: owner.name.into_owned(),
                    uid: owner.uid.into_owned(),
                    controller: owner.controller,
                })
                .collect(),
            managers: row
                .managers
                .into_iter()
                .map(|stamp| ManagerStamp {
                    manager: Name::from(&*stamp.manager),
                    operation: Name::from(&*stamp.operation),
                    subresource: Name::from(&*stamp.subresource),
                    time: stamp.time.map(Cow::into_owned),
                })
                .collect(),
            spec: row
                .spec
                .map(|raw| Spec::from_text(raw.get()))
                .unwrap_or_default(),
            status: serialized(row.status),
            // Read by `decode`, which can refuse a row whose data is not an object of strings.
            data: None,
            binary_data: row.binary_data,
            deleted: row.deleted,
            listed: row.listed,
            confirmed_resource_version: row.confirmed_resource_version.map(Cow::into_owned),
            sent_at: row.sent_at,
            first_seen: row.first_seen,
            last_seen: row.last_seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    /// An object with most parts present.
    fn object() -> ObjectState {
        ObjectState {
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
            labels: Pairs::from_iter([("a", "b")]),
            annotations: Pairs::new(),
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
            spec: Spec::from_value(&json!({"replicas": 1})),
            status: Serialized::default(),
            data: None,
            binary_data: false,
            deleted: true,
            listed: true,
            confirmed_resource_version: Some("5".into()),
            sent_at: Some(4),
            first_seen: 5,
            last_seen: 6,
        }
    }

    /// The same object with the parts the first leaves out, and without those it has.
    fn other_object() -> ObjectState {
        let mut object = object();
        object.annotations = Pairs::from_iter([("x", "y")]);
        object.data = Some(std::sync::Arc::new(DataMap::from_map(BTreeMap::from([(
            "k".into(),
            "v".into(),
        )]))));
        object.status = Serialized::from_value(&json!({"ready": true}));
        object.deletion_timestamp = Some("2026-01-02T00:00:00Z".into());
        object.generation = None;
        object.owners[0].controller = false;
        object.managers[0].time = Some("2026-01-01T00:00:01Z".into());
        object.managers[0].subresource = "".into();
        object.deleted = false;
        object.listed = false;
        object.confirmed_resource_version = None;
        object.sent_at = None;
        object
    }

    #[test]
    fn an_object_written_reads_back_whole() {
        for object in [object(), other_object()] {
            assert_eq!(decode(&encode(&object).unwrap()).unwrap(), object);
        }
        // A ConfigMap whose `binaryData` went into `data` as hashes says so in its row.
        let mut binary = other_object();
        binary.binary_data = true;
        let text = encode(&binary).unwrap();
        assert!(
            text.contains(r#""data":{"k":"v"},"binaryDataHashed":true,"#),
            "{text}"
        );
        assert_eq!(decode(&text).unwrap(), binary);
    }

    #[test]
    fn the_stored_text_is_what_every_earlier_binary_wrote() {
        // Written by the owned and borrowed row types of before they were one shape: a change
        // here is a schema change of the store.
        assert_eq!(
            encode(&object()).unwrap(),
            r#"{"cluster":"c","uid":"u","apiVersion":"apps/v1","kind":"Deployment","namespace":"n","name":"d","resourceVersion":"7","generation":3,"creationTimestamp":"2026-01-01T00:00:00Z","labels":{"a":"b"},"owners":[{"apiVersion":"serving.knative.dev/v1","kind":"Revision","name":"r","uid":"ru","controller":true}],"managers":[{"manager":"controller","operation":"Update","subresource":"status"}],"spec":{"replicas":1},"deleted":true,"listed":true,"confirmedResourceVersion":"5","sentAt":4,"firstSeen":5,"lastSeen":6}"#
        );
        assert_eq!(
            encode(&other_object()).unwrap(),
            r#"{"cluster":"c","uid":"u","apiVersion":"apps/v1","kind":"Deployment","namespace":"n","name":"d","resourceVersion":"7","creationTimestamp":"2026-01-01T00:00:00Z","deletionTimestamp":"2026-01-02T00:00:00Z","labels":{"a":"b"},"annotations":{"x":"y"},"owners":[{"apiVersion":"serving.knative.dev/v1","kind":"Revision","name":"r","uid":"ru","controller":false}],"managers":[{"manager":"controller","operation":"Update","time":"2026-01-01T00:00:01Z"}],"spec":{"replicas":1},"status":{"ready":true},"data":{"k":"v"},"firstSeen":5,"lastSeen":6}"#
        );
    }

    #[test]
    fn an_older_row_without_the_optional_parts_reads() {
        let object = decode(
            r#"{"cluster":"c","uid":"u","apiVersion":"v1","kind":"ConfigMap","namespace":"n","name":"m","resourceVersion":"1","firstSeen":1,"lastSeen":2}"#,
        )
        .unwrap();
        assert_eq!(object.name, "m");
        assert!(object.labels.is_empty() && object.owners.is_empty() && object.data.is_none());
        assert!(object.spec.is_null() && !object.deleted);
    }
}
