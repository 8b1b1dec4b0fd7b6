//! The one exact Kubernetes request of each action (`../shared/reference/kubernetes-writes.md`
//! has the facts and their sources):
//!
//! * `revert`: `PATCH` with a JSON merge patch (`application/merge-patch+json`) carrying
//!   `metadata.resourceVersion`, the version the drift was judged on: the API server answers
//!   `409 Conflict` when the object moved on. The patch holds exactly the drifted fields: a field
//!   reached through objects only is set to its value before the edit (`null` removes it); a list
//!   is atomic in a merge patch (and in Knative's schemas), so a change inside one sends the whole
//!   list, as it was before the edit. Every changed field must still hold the edited value in the
//!   state the plan reads, or there is no plan (the finding is stale).
//! * `rollback`: `PATCH` of a Service's `spec.traffic` alone, pinned to its last Ready Revision
//!   (`[{revisionName: R, percent: 100}]`, as `kn service update --traffic R=100` leaves a Service
//!   without tags); tagged targets are kept at 0 %, so their URLs keep working. Same precondition.
//! * `restore`: `POST` of the object's restorable manifest (server-set fields stripped:
//!   [`crate::classify::restorable`]) to its collection.
//! * `deleteOrphan`: `DELETE` with `preconditions.uid` in the body: the API server answers `409`
//!   when the name now belongs to another object.
//!
//! Every path carries `?fieldManager=drift-sentinel` on writes that take one (not `DELETE`).

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::{json, Map, Value};

use drift_model::pointer::pointer_segments;
use drift_model::{Drift, FieldChange, MAX_CHANGES};

use super::{Action, Subject, FIELD_MANAGER};
use crate::classify::evidence::hint::plural;
use crate::classify::restorable;
use crate::classify::ObjectState;

/// `application/merge-patch+json`.
pub const MERGE_PATCH: &str = "application/merge-patch+json";
/// `application/json`.
pub const JSON: &str = "application/json";

/// What is escaped in a path segment: everything but unreserved characters (RFC 3986).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'&')
    .add(b'+')
    .add(b';')
    .add(b'=');

/// One request to the Kubernetes API, exactly as it is sent (and as a dry run records it).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `PATCH`, `POST` or `DELETE`.
    pub method: &'static str,
    /// The path and query, e.g.
    /// `/apis/serving.knative.dev/v1/namespaces/web/services/hello?fieldManager=drift-sentinel`.
    pub path: String,
    /// The body's content type.
    pub content_type: &'static str,
    /// The body.
    pub body: Value,
    /// The `resourceVersion` the request is conditioned on (none for a create or a delete, which
    /// is conditioned on the uid).
    pub resource_version: Option<String>,
}

impl Request {
    /// The request as an attempt records it and the cluster client sends it (the body as
    /// JSON text).
    pub fn planned(&self) -> drift_model::remediation::PlannedRequest {
        drift_model::remediation::PlannedRequest {
            method: self.method.to_string(),
            path: self.path.clone(),
            content_type: self.content_type.to_string(),
            body: self.body.to_string(),
        }
    }
}

/// Why an action has no exact request for a drift.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPlan {
    /// The finding names no changed field.
    #[error("the finding names no changed field to put back")]
    NoChanges,
    /// The finding holds as many changes as a finding keeps: some may be missing.
    #[error("the finding holds {MAX_CHANGES} changes, as many as a finding keeps: others may be missing, so a revert could be partial")]
    TooManyChanges,
    /// A field no longer holds the edited value in the state the plan reads.
    #[error("{0} no longer holds the value the finding names: the object moved on")]
    Stale(String),
    /// A field drift-sentinel keeps only as a hash, or a path it does not write.
    #[error("{0} cannot be written back: drift-sentinel does not keep its value")]
    NotKept(String),
    /// Rollback without a Ready Revision to pin.
    #[error("no Revision of this Service has been seen Ready: nothing to roll back to")]
    NoReadyRevision,
    /// Rollback of a `not_ready` Service whose latest Revision did not fail.
    #[error(
        "the Service is not ready for another reason than a failed Revision: a pin would not help"
    )]
    LatestNotFailed,
    /// Rollback of something other than a Knative Service.
    #[error("rollback pins a Knative Service's traffic; this is a {0}")]
    NotAService(String),
    /// Restore of an object the state cannot give back.
    #[error("cannot be re-created: {0}")]
    NotRestorable(#[from] restorable::NotRestorable),
    /// Restore of an object that is not deleted.
    #[error("the object is not deleted")]
    NotDeleted,
    /// Revert of an `invariant` drift whose rule names no `revertFields`.
    #[error("the rule names no revertFields: nothing it may put back")]
    NoRevertFields,
}

impl NoPlan {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            NoPlan::NoChanges => "no_changes",
            NoPlan::TooManyChanges => "too_many_changes",
            NoPlan::Stale(_) => "stale",
            NoPlan::NotKept(_) => "not_kept",
            NoPlan::NoReadyRevision => "no_ready_revision",
            NoPlan::LatestNotFailed => "latest_not_failed",
            NoPlan::NotAService(_) => "not_a_service",
            NoPlan::NotRestorable(_) => "not_restorable",
            NoPlan::NotDeleted => "not_deleted",
            NoPlan::NoRevertFields => "no_revert_fields",
        }
    }
}

/// The request of `action` for `drift`.
pub(super) fn request(
    action: Action,
    drift: &Drift,
    subject: Subject<'_>,
) -> Result<Request, NoPlan> {
    let object = subject.object;
    match action {
        // A finding at the cap may lack the change a rule names: never a partial revert.
        Action::Revert if drift.evidence.changes.len() >= MAX_CHANGES => {
            Err(NoPlan::TooManyChanges)
        }
        Action::Revert => match super::revertible(drift) {
            Some(changes) => revert(object, &changes),
            None => Err(NoPlan::NoRevertFields),
        },
        Action::Rollback => rollback(object, subject.last_ready_revision),
        Action::Restore => restore(object),
        Action::DeleteOrphan => Ok(delete(object)),
    }
}

/// The API path of an object (`name` set) or of its collection.
pub fn resource_path(api_version: &str, kind: &str, namespace: &str, name: Option<&str>) -> String {
    let mut path = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    if !namespace.is_empty() {
        path.push_str("/namespaces/");
        path.extend(utf8_percent_encode(namespace, SEGMENT));
    }
    path.push('/');
    path.push_str(&plural(kind));
    if let Some(name) = name {
        path.push('/');
        path.extend(utf8_percent_encode(name, SEGMENT));
    }
    path
}

fn object_path(object: &ObjectState) -> String {
    resource_path(
        &object.api_version,
        &object.kind,
        &object.namespace,
        Some(&object.name),
    )
}

/// `revert`: the merge patch that puts every changed field back (module docs).
pub fn revert(object: &ObjectState, changes: &[FieldChange]) -> Result<Request, NoPlan> {
    if changes.is_empty() {
        return Err(NoPlan::NoChanges);
    }
    if changes.len() >= MAX_CHANGES {
        return Err(NoPlan::TooManyChanges);
    }
    // The live object in the shape the paths name, as the drift was judged on.
    let mut live = json!({
        "metadata": {"labels": object.labels, "annotations": object.annotations},
        "spec": object.spec.value(),
    });
    if let Some(data) = &object.data {
        live["data"] = json!(**data);
    }
    let mut patch = json!({"metadata": {"resourceVersion": object.resource_version}});
    // Lists touched, by the pointer of the list: restored whole once every change is applied.
    let mut lists: Vec<(Vec<String>, Value)> = Vec::new();
    for change in changes {
        let segments = pointer_segments(&change.path);
        let writable = match segments.first().map(String::as_str) {
            // A Pod's spec is kept trimmed to its containers' names and images.
            Some("spec") => segments.len() > 1 && !object.is_kind("", "Pod"),
            // With `binaryData`, `data` holds those values' hashes too.
            Some("data") => segments.len() == 2 && !object.binary_data,
            Some("metadata") => {
                segments.len() == 3
                    && matches!(segments[1].as_str(), "labels" | "annotations")
                    && segments[2] != "kubectl.kubernetes.io/last-applied-configuration"
            }
            _ => false,
        };
        if !writable {
            return Err(NoPlan::NotKept(change.path.clone()));
        }
        if !same(live.pointer(&change.path), change.after.as_ref()) {
            return Err(NoPlan::Stale(change.path.clone()));
        }
        // The first list on the way down, if any.
        let mut node = &live;
        let mut list_at = None;
        for (depth, segment) in segments.iter().enumerate() {
            if node.is_array() {
                list_at = Some(depth);
                break;
            }
            match node.get(segment.as_str()) {
                Some(next) => node = next,
                None => break,
            }
        }
        match list_at {
            None => set_in(&mut patch, &segments, change.before.clone()),
            Some(depth) => {
                let list_path = segments[..depth].to_vec();
                if !lists.iter().any(|(path, _)| *path == list_path) {
                    let current = live.pointer(&to_pointer(&list_path)).cloned();
                    lists.push((list_path.clone(), current.unwrap_or(Value::Null)));
                }
            }
        }
    }
    // Each touched list, as it was before the edit, rebuilt from the live list and every
    // change under it (nested lists included).
    for (list_path, list) in lists {
        let prefix = to_pointer(&list_path);
        let inside: Vec<&FieldChange> = changes
            .iter()
            .filter(|change| under(&change.path, &prefix))
            .collect();
        let before = rebuild(Some(&list), &prefix, &inside);
        set_in(&mut patch, &list_path, before);
    }
    Ok(Request {
        method: "PATCH",
        path: format!("{}?fieldManager={FIELD_MANAGER}", object_path(object)),
        content_type: MERGE_PATCH,
        body: patch,
        resource_version: Some(object.resource_version.clone()),
    })
}

/// `null` and absent are one value for a Kubernetes field.
fn same(live: Option<&Value>, wanted: Option<&Value>) -> bool {
    let live = live.filter(|value| !value.is_null());
    let wanted = wanted.filter(|value| !value.is_null());
    live == wanted
}

fn to_pointer(segments: &[String]) -> String {
    let mut pointer = String::new();
    for segment in segments {
        pointer = drift_model::pointer::push_pointer(&pointer, segment);
    }
    pointer
}

/// True when `path` is `prefix` or below it.
fn under(path: &str, prefix: &str) -> bool {
    path == prefix || (path.starts_with(prefix) && path[prefix.len()..].starts_with('/'))
}

/// The value at `pointer` before the edit (`None`: absent), from its value after the edit
/// (`after`) and the changes at or below it, as `diff_values` makes them: objects per key,
/// lists per index (a list that grew has changes with no `before` from its old length on; one
/// that shrank, changes with no `after`).
fn rebuild(after: Option<&Value>, pointer: &str, changes: &[&FieldChange]) -> Option<Value> {
    if let Some(exact) = changes.iter().find(|change| change.path == pointer) {
        return exact.before.clone();
    }
    let below: Vec<&FieldChange> = changes
        .iter()
        .copied()
        .filter(|change| under(&change.path, pointer))
        .collect();
    if below.is_empty() {
        return after.cloned();
    }
    let child = |key: &str| drift_model::pointer::push_pointer(pointer, key);
    match after {
        Some(Value::Array(items)) => {
            // The old length: where the appended elements began, else past the last element the
            // edit removed, else the length now.
            let direct = |change: &&FieldChange| {
                change.path[pointer.len() + 1..]
                    .split('/')
                    .next()
                    .and_then(|index| index.parse::<usize>().ok())
                    .filter(|_| !change.path[pointer.len() + 1..].contains('/'))
            };
            let appended = below
                .iter()
                .filter(|change| change.before.is_none())
                .filter_map(direct)
                .min();
            let removed = below
                .iter()
                .filter(|change| change.after.is_none())
                .filter_map(direct)
                .max();
            let length = appended
                .or(removed.map(|index| index + 1))
                .unwrap_or(items.len());
            let mut before = Vec::with_capacity(length);
            for index in 0..length {
                let pointer = child(&index.to_string());
                if let Some(value) = rebuild(items.get(index), &pointer, &below) {
                    before.push(value);
                }
            }
            Some(Value::Array(before))
        }
        Some(Value::Object(map)) => {
            let mut before = map.clone();
            let mut keys: Vec<String> = map.keys().cloned().collect();
            for change in &below {
                if let Some(key) = pointer_segments(&change.path[pointer.len()..]).first() {
                    keys.push(key.clone());
                }
            }
            keys.sort();
            keys.dedup();
            for key in keys {
                match rebuild(map.get(&key), &child(&key), &below) {
                    Some(value) => {
                        before.insert(key, value);
                    }
                    None => {
                        before.remove(&key);
                    }
                }
            }
            Some(Value::Object(before))
        }
        // A change below a value that is not a container cannot come from the diff.
        other => other.cloned(),
    }
}

/// Sets `value` (`None`: JSON `null`, which a merge patch reads as "remove") at `segments` in a
/// merge patch, creating the objects on the way.
fn set_in(patch: &mut Value, segments: &[String], value: Option<Value>) {
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut node = patch;
    for segment in parents {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(map) = node else {
            return;
        };
        node = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    if let Value::Object(map) = node {
        map.insert(last.clone(), value.unwrap_or(Value::Null));
    }
}

/// `rollback`: pin the Service's traffic to `revision` (module docs).
pub fn rollback(service: &ObjectState, revision: Option<&str>) -> Result<Request, NoPlan> {
    if !service.is_kind("serving.knative.dev", "Service") {
        return Err(NoPlan::NotAService(service.kind.clone()));
    }
    let revision = revision.ok_or(NoPlan::NoReadyRevision)?;
    let spec = service.spec.value();
    let mut traffic = vec![json!({"revisionName": revision, "percent": 100})];
    // Tagged targets stay, at 0 %: their URLs keep answering.
    for target in spec
        .get("traffic")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if target.get("tag").and_then(Value::as_str).is_some() {
            let mut kept = target.clone();
            kept["percent"] = json!(0);
            traffic.push(kept);
        }
    }
    Ok(Request {
        method: "PATCH",
        path: format!("{}?fieldManager={FIELD_MANAGER}", object_path(service)),
        content_type: MERGE_PATCH,
        body: json!({
            "metadata": {"resourceVersion": service.resource_version},
            "spec": {"traffic": traffic},
        }),
        resource_version: Some(service.resource_version.clone()),
    })
}

/// `restore`: create the object again from its tombstone.
pub fn restore(object: &ObjectState) -> Result<Request, NoPlan> {
    if !object.deleted {
        return Err(NoPlan::NotDeleted);
    }
    let manifest = restorable::manifest(object)?;
    Ok(Request {
        method: "POST",
        path: format!(
            "{}?fieldManager={FIELD_MANAGER}",
            resource_path(&object.api_version, &object.kind, &object.namespace, None)
        ),
        content_type: JSON,
        body: manifest,
        resource_version: None,
    })
}

/// `deleteOrphan`: delete the object, conditioned on its uid.
pub fn delete(object: &ObjectState) -> Request {
    Request {
        method: "DELETE",
        path: object_path(object),
        content_type: JSON,
        body: json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": object.uid},
            "propagationPolicy": "Background",
        }),
        resource_version: None,
    }
}
