//! ApiServerSource events: a [`CloudEvent`] of a `dev.knative.apiserver.*` type → [`ApiServerEvent`].
//!
//! Resource mode (`dev.knative.apiserver.resource.{add,update,delete}`) carries the whole object;
//! Reference mode (`dev.knative.apiserver.ref.*`) carries only `{kind, namespace, name, apiVersion}`
//! and is kept for visibility although it cannot be classified (no `uid`, no `resourceVersion`).
//! Any other CloudEvent type is [`Decoded::Ignored`]: Knative expects a `2xx` for it.
//!
//! The cluster an event came from is, in order: the `cluster` extension (set per cluster through
//! the ApiServerSource's `spec.ceOverrides.extensions`), the configured `clusters` map from
//! `source`, the configured default. `source` alone cannot tell clusters apart: most clusters use
//! the in-cluster address `https://10.96.0.1:443`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::cloudevent::CloudEvent;
use super::object::{type_name, KubeObject};
use super::shape::parse_object_text;
use super::Error;

/// How cluster names are resolved.
#[derive(Debug, Clone, Default)]
pub struct ClusterNames {
    /// Name used when nothing else names the cluster.
    pub default: String,
    /// `source` URL → cluster name.
    pub by_source: BTreeMap<String, String>,
}

impl ClusterNames {
    /// Resolves the cluster of an event.
    pub fn resolve(&self, event: &CloudEvent) -> String {
        if let Some(name) = event
            .extensions
            .get("cluster")
            .filter(|name| !name.is_empty())
        {
            return name.clone();
        }
        if let Some(name) = self.by_source.get(&event.source) {
            return name.clone();
        }
        self.default.clone()
    }
}

/// What happened to the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// `add`: created, or first seen by a new watch.
    Add,
    /// `update`: any change, status-only included.
    Update,
    /// `delete`: carries the last state the watch saw.
    Delete,
}

impl Action {
    /// The lower-case name used in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Add => "add",
            Action::Update => "update",
            Action::Delete => "delete",
        }
    }
}

/// The ApiServerSource mode of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Whole object in `data`.
    Resource,
    /// Object reference only.
    Reference,
}

impl Mode {
    /// The lower-case name used in logs and metrics: the ApiServerSource's `spec.mode`
    /// (`Resource`, `Reference`) lower-cased.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Resource => "resource",
            Mode::Reference => "reference",
        }
    }
}

/// An ApiServerSource event, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiServerEvent {
    /// CloudEvent `source`; with `id` the de-duplication key.
    pub source: String,
    /// CloudEvent `id`.
    pub id: String,
    /// CloudEvent `type`.
    pub ce_type: String,
    /// CloudEvent `time` as sent (the adapter's send time, not the change time).
    pub time: Option<String>,
    /// The cluster name (see module docs).
    pub cluster: String,
    /// add / update / delete.
    pub action: Action,
    /// Resource or Reference mode.
    pub mode: Mode,
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The object's `kind`.
    pub kind: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The object (Resource mode only).
    pub object: Option<KubeObject>,
}

impl ApiServerEvent {
    /// When the sender sent the event: its `time` in milliseconds since the epoch, 0 when it
    /// has none or one that is not an RFC 3339 time. With `source` and `id` the event's
    /// de-duplication key: a sender stamps `time` once, and every redelivery carries it as sent.
    pub fn sent_at(&self) -> drift_model::Millis {
        self.time
            .as_deref()
            .and_then(drift_model::time::parse_time)
            .unwrap_or(0)
    }

    /// A Resource-mode event for `object`, as the ApiServerSource would send it: what resync
    /// makes of a listed object, and the engine of an object that vanished from a list.
    pub fn for_object(
        source: String,
        id: String,
        cluster: &str,
        action: Action,
        object: KubeObject,
    ) -> ApiServerEvent {
        ApiServerEvent {
            source,
            id,
            ce_type: format!("dev.knative.apiserver.resource.{}", action.as_str()),
            time: None,
            cluster: cluster.to_string(),
            action,
            mode: Mode::Resource,
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            object: Some(object),
        }
    }
}

/// The outcome of decoding one CloudEvent.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// An ApiServerSource event.
    ApiServer(Box<ApiServerEvent>),
    /// A valid CloudEvent of a type this service does not handle.
    Ignored {
        /// CloudEvent `source`.
        source: String,
        /// CloudEvent `id`.
        id: String,
        /// CloudEvent `type`.
        ce_type: String,
    },
}

const RESOURCE_PREFIX: &str = "dev.knative.apiserver.resource.";

/// Longest CloudEvent `id` and `source` (kept with the `time` for `store.dedupRetention` to
/// drop redeliveries). The ApiServerSource sends a UUID and the API server's URL.
pub(crate) const MAX_ID_BYTES: usize = 1024;
/// Refuses an `id` or `source` longer than its bound, and a `cluster` extension that is not a
/// valid cluster name ([`super::cluster_name`]: printable, visible, one script, not `fleet:`).
fn check_attributes(event: &CloudEvent) -> Result<(), Error> {
    let over = |what: &str, bytes: usize, limit: usize| {
        Error::InvalidObject(format!(
            "{what}: {bytes} bytes, more than the limit of {limit}"
        ))
    };
    if event.id.len() > MAX_ID_BYTES {
        return Err(over("id", event.id.len(), MAX_ID_BYTES));
    }
    if event.source.len() > MAX_ID_BYTES {
        return Err(over("source", event.source.len(), MAX_ID_BYTES));
    }
    if let Some(cluster) = event.extensions.get("cluster") {
        // An empty extension is no name: the event's cluster comes from the configuration. The
        // length is the name check's first rule.
        if !cluster.is_empty() {
            super::cluster_name::check(cluster).map_err(|error| {
                Error::InvalidEvent(format!("attribute cluster (extension): {error}"))
            })?;
        }
    }
    Ok(())
}
const REFERENCE_PREFIX: &str = "dev.knative.apiserver.ref.";

/// Decodes one CloudEvent. `body` is the event's data not yet read as JSON, when the event does
/// not hold it: a binary-mode request's body, or a structured one's `data` member
/// ([`super::cloudevent::ParsedRequest::unread_data`]). Every way out reads all of it (the
/// object's parse, the reference's, or a check for an event of a type not handled), so data
/// that is not JSON is refused as before.
pub(crate) fn decode_event(
    event: CloudEvent,
    body: Option<&str>,
    clusters: &ClusterNames,
) -> Result<Decoded, Error> {
    check_attributes(&event)?;
    let ignored = |event: CloudEvent| -> Result<Decoded, Error> {
        if let Some(text) = body {
            // As strictly as the object's parse and the SDK's read it.
            super::shape::check_json(text)?;
        }
        Ok(Decoded::Ignored {
            source: event.source,
            id: event.id,
            ce_type: event.ty,
        })
    };
    let (mode, verb) = if let Some(verb) = event.ty.strip_prefix(RESOURCE_PREFIX) {
        (Mode::Resource, verb)
    } else if let Some(verb) = event.ty.strip_prefix(REFERENCE_PREFIX) {
        (Mode::Reference, verb)
    } else {
        return ignored(event);
    };
    let action = match verb {
        "add" => Action::Add,
        "update" => Action::Update,
        "delete" => Action::Delete,
        // An unknown verb under a known prefix is a type this service does not handle.
        _ => return ignored(event),
    };
    let cluster = clusters.resolve(&event);
    let CloudEvent {
        id,
        source,
        ty,
        time,
        extensions,
        data,
        ..
    } = event;
    let data = match (&data, body) {
        (Some(raw), _) => raw.get(),
        (None, Some(text)) => text,
        (None, None) => return Err(Error::InvalidObject(format!("{ty} event has no data"))),
    };
    let (api_version, kind, namespace, name, object) = match mode {
        Mode::Resource => {
            let object = parse_object_text(data)?;
            (
                object.api_version.clone(),
                object.kind.clone(),
                object.namespace.clone(),
                object.name.clone(),
                Some(object),
            )
        }
        Mode::Reference => {
            let data: Value = serde_json::from_str(data).map_err(|error| {
                Error::InvalidJson(format!(
                    "data: {}",
                    super::cloudevent::short(&error.to_string())
                ))
            })?;
            let Value::Object(reference) = data else {
                return Err(Error::InvalidObject(format!(
                    "reference data must be an object, got {}",
                    type_name(&data)
                )));
            };
            let field = |key: &str| -> Result<String, Error> {
                match reference.get(key) {
                    Some(Value::String(text)) => Ok(text.clone()),
                    None | Some(Value::Null) => Ok(String::new()),
                    Some(other) => Err(Error::InvalidObject(format!(
                        "data.{key}: expected a string, got {}",
                        type_name(other)
                    ))),
                }
            };
            let kind = field("kind")?;
            let name = field("name")?;
            if kind.is_empty() || name.is_empty() {
                return Err(Error::InvalidObject(
                    "reference data needs kind and name".to_string(),
                ));
            }
            (field("apiVersion")?, kind, field("namespace")?, name, None)
        }
    };
    // The extensions repeat what the object says; when both exist the object wins, but an
    // extension fills a gap (old adapters sent no `apiversion` in Reference mode data).
    let api_version = if api_version.is_empty() {
        extensions.get("apiversion").cloned().unwrap_or_default()
    } else {
        api_version
    };
    // These become keys and columns of the store. A NUL character cannot be stored in a
    // PostgreSQL text column (SQLite takes it): refused here, alike on both, instead of failing a
    // whole commit on one backend. (Inside the object's JSON a NUL is escaped and harmless.)
    for (what, value) in [
        ("id", &id),
        ("source", &source),
        ("cluster", &cluster),
        ("apiVersion", &api_version),
        ("kind", &kind),
        ("namespace", &namespace),
        ("name", &name),
    ] {
        if value.contains('\0') {
            return Err(Error::InvalidEvent(format!(
                "{what} contains a NUL character"
            )));
        }
    }
    if let Some(object) = &object {
        if object.uid.contains('\0') {
            return Err(Error::InvalidObject(
                "metadata.uid contains a NUL character".to_string(),
            ));
        }
    }
    Ok(Decoded::ApiServer(Box::new(ApiServerEvent {
        source,
        id,
        ce_type: ty,
        time,
        cluster,
        action,
        mode,
        api_version,
        kind,
        namespace,
        name,
        object,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_nul_in_a_stored_name_is_refused() {
        let ok = event(
            "dev.knative.apiserver.ref.add",
            &[("cluster", "prod")],
            json!({"kind": "Service", "name": "web", "namespace": "default", "apiVersion": "v1"}),
        );
        assert!(decode_event(ok.clone(), None, &names()).is_ok());
        let mut bad = ok.clone();
        bad.id = "id\u{0}1".into();
        let error = decode_event(bad, None, &names()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid CloudEvent: id contains a NUL character"
        );
        let bad = event(
            "dev.knative.apiserver.ref.add",
            &[("cluster", "pr\u{0}od")],
            json!({"kind": "Service", "name": "web", "namespace": "default", "apiVersion": "v1"}),
        );
        let error = decode_event(bad, None, &names()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid CloudEvent: attribute cluster (extension): holds U+0000, a control or whitespace character, at character 3: a name is printed characters only"
        );
    }

    /// The key's time is the CloudEvent `time` as sent, in milliseconds (an offset counts; finer
    /// digits are cut), and 0 for an event without one or with one that is not RFC 3339.
    #[test]
    fn sent_at_is_the_time_as_sent_in_milliseconds_or_zero() {
        let sent_at = |time: Option<&str>| {
            let mut sent = event(
                "dev.knative.apiserver.resource.add",
                &[("cluster", "prod")],
                revision(),
            );
            sent.time = time.map(str::to_string);
            let decoded = decode_event(sent, None, &names()).unwrap();
            let Decoded::ApiServer(event) = decoded else {
                panic!("not an ApiServerSource event: {decoded:?}");
            };
            event.sent_at()
        };
        assert_eq!(
            sent_at(Some("2026-11-29T10:00:00.123456789Z")),
            1_795_946_400_123
        );
        assert_eq!(
            sent_at(Some("2026-11-29T11:00:00.123+01:00")),
            1_795_946_400_123
        );
        assert_eq!(
            sent_at(Some("2026-11-29T10:00:00.1239Z")),
            1_795_946_400_123
        );
        assert_eq!(sent_at(Some("2023-10-09T21:40:37Z")), 1_696_887_637_000);
        assert_eq!(sent_at(Some("1969-12-31T23:59:59.5Z")), -500);
        assert_eq!(sent_at(None), 0);
        assert_eq!(sent_at(Some("yesterday")), 0);
    }

    fn event(ty: &str, extensions: &[(&str, &str)], data: Value) -> CloudEvent {
        CloudEvent {
            spec_version: "1.0".into(),
            id: "id-1".into(),
            source: "https://10.96.0.1:443".into(),
            ty: ty.into(),
            subject: None,
            time: None,
            extensions: extensions
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            data: Some(serde_json::value::to_raw_value(&data).unwrap()),
        }
    }

    fn names() -> ClusterNames {
        ClusterNames {
            default: "fallback".into(),
            by_source: [("https://10.8.0.1:443".to_string(), "staging".to_string())]
                .into_iter()
                .collect(),
        }
    }

    fn revision() -> Value {
        json!({"apiVersion": "serving.knative.dev/v1", "kind": "Revision",
            "metadata": {"name": "r-00001", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}})
    }

    #[test]
    fn cluster_extension_wins_then_source_then_default() {
        let clusters = names();
        let with_extension = event(
            "dev.knative.apiserver.resource.add",
            &[("cluster", "prod")],
            revision(),
        );
        assert_eq!(clusters.resolve(&with_extension), "prod");
        let mut by_source = event("dev.knative.apiserver.resource.add", &[], revision());
        by_source.source = "https://10.8.0.1:443".into();
        assert_eq!(clusters.resolve(&by_source), "staging");
        let plain = event("dev.knative.apiserver.resource.add", &[], revision());
        assert_eq!(clusters.resolve(&plain), "fallback");
    }

    #[test]
    fn resource_update_decodes_object() {
        let decoded = decode_event(
            event("dev.knative.apiserver.resource.update", &[], revision()),
            None,
            &names(),
        )
        .unwrap();
        let Decoded::ApiServer(event) = decoded else {
            panic!("not apiserver")
        };
        assert_eq!(event.action, Action::Update);
        assert_eq!(event.kind, "Revision");
        assert_eq!(event.object.unwrap().uid, "u1");
    }

    #[test]
    fn reference_mode_keeps_reference() {
        let data = json!({"kind": "Revision", "namespace": "default", "name": "helloworld-go-8kvz8", "apiVersion": "serving.knative.dev/v1alpha1"});
        let Decoded::ApiServer(event) = decode_event(
            event("dev.knative.apiserver.ref.update", &[], data),
            None,
            &names(),
        )
        .unwrap() else {
            panic!("not apiserver")
        };
        assert_eq!(event.mode, Mode::Reference);
        assert!(event.object.is_none());
        assert_eq!(event.name, "helloworld-go-8kvz8");
    }

    #[test]
    fn other_types_are_ignored() {
        let decoded =
            decode_event(event("com.example.ping", &[], json!({})), None, &names()).unwrap();
        assert!(matches!(decoded, Decoded::Ignored { .. }));
    }

    #[test]
    fn resource_event_without_data_is_invalid() {
        let mut without = event("dev.knative.apiserver.resource.add", &[], json!({}));
        without.data = None;
        assert_eq!(
            decode_event(without, None, &names()).unwrap_err().kind(),
            "invalid_object"
        );
    }
}
