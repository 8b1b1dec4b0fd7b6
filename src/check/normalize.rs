//! Each side put in the shape that is compared: live objects decoded as the sink decodes them,
//! a manifest's compact state for scope decisions, the live object back in manifest shape, and a
//! Secret manifest with its values hashed as the decoder hashes live ones. Invariant: a Secret
//! value never leaves this file unhashed, on either side, so no report can show one.

use serde_json::{json, Map, Value};

use drift_core::classify::ObjectState;
use drift_core::decode::object::hash_value;
use drift_core::decode::parse_object;
use drift_core::decode::KubeObject;
use drift_core::manifest::Origin;
use drift_core::manifest::{manifest_key, ManifestKey};
use drift_model::Millis;

/// The instant every live object is applied at; the clock then moves to [`Millis::MAX`].
pub(crate) const SNAPSHOT_TIME: Millis = 0;
/// The cluster name given to the live objects inside the engine.
pub(crate) const CLUSTER: &str = "live";

/// A live object decoded, its compact state, and where it was read.
pub(crate) struct Live {
    pub(crate) object: KubeObject,
    pub(crate) state: ObjectState,
    pub(crate) origin: Origin,
}

/// Decodes a live object as the sink would, hashing Secret values. Objects written by hand may
/// lack `uid` and `resourceVersion`; they get stand-ins derived from their key. The error is the
/// decoder's; [`reason`] says it as a snapshot's reader needs it.
pub(crate) fn decode_live(
    key: &ManifestKey,
    value: &Value,
) -> Result<KubeObject, drift_core::decode::Error> {
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
    parse_object(value)
}

/// What is wrong with a live object the decoder rejects, said of the object itself: without the
/// decoder's "invalid ApiServerSource data" and the `data.` its paths start with inside an event.
pub(crate) fn reason(error: &drift_core::decode::Error) -> std::borrow::Cow<'_, str> {
    match error {
        drift_core::decode::Error::InvalidObject(message) => {
            message.strip_prefix("data.").unwrap_or(message).into()
        }
        other => other.to_string().into(),
    }
}

/// The compact state of a manifest, for scope decisions about objects that are not live.
pub(crate) fn desired_state(value: &Value) -> Option<ObjectState> {
    let key = manifest_key(value)?;
    let object = decode_live(&key, value).ok()?;
    Some(ObjectState::from_object(CLUSTER, &object, SNAPSHOT_TIME))
}

/// The live object in manifest shape, from the decoded (Secret-hashed) object.
pub(crate) fn live_manifest(object: &KubeObject) -> Value {
    let mut live = json!({
        "apiVersion": object.api_version,
        "kind": object.kind,
        "metadata": {"name": object.name, "namespace": object.namespace,
                     "labels": object.labels, "annotations": object.annotations},
        "spec": object.spec.value(),
    });
    if let Some(data) = &object.data {
        live["data"] = json!(**data);
    }
    live
}

/// A Secret manifest with its values hashed as the decoder hashes live ones: `data` values as
/// written (base64), `stringData` values base64-encoded first, as the API server stores them.
pub(crate) fn hashed_secret(desired: &Value) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_manifests_are_hashed_like_live_secrets() {
        let desired = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "aGVsbG8="}, "stringData": {"b": "hello"}});
        let hashed = hashed_secret(&desired);
        assert_eq!(hashed["data"]["a"], json!(hash_value("aGVsbG8=")));
        assert_eq!(hashed["data"]["b"], json!(hash_value("aGVsbG8=")));
        assert!(hashed.get("stringData").is_none());
    }

    #[test]
    fn a_rejected_live_object_is_the_decoders_error_said_of_the_object() {
        let value = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "generation": "2"}});
        let key = manifest_key(&value).unwrap();
        let error = decode_live(&key, &value).unwrap_err();
        assert_eq!(error.kind(), "invalid_object");
        assert_eq!(
            reason(&error),
            "metadata.generation: expected an integer, got a string"
        );
        let origin = Origin {
            file: "live.yaml".into(),
            document: 1,
            line: 1,
            item: None,
        };
        let error = crate::check::Error::Invalid {
            origin,
            source: error,
        };
        assert_eq!(error.kind(), "invalid");
        assert_eq!(
            error.to_string(),
            "live.yaml document 1 (line 1): metadata.generation: expected an integer, got a string"
        );
    }
}
