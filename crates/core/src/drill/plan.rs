//! The requests of a drill, exact like remediation's (`remediate::plan::Request`): the
//! injection, sent as field manager [`FIELD_MANAGER`] on the object as the drill read it (a
//! precondition on its `resourceVersion`, or on its uid for a delete), and the restore, which
//! puts back only what the injection touched, from the object as it was kept before, on the
//! object's version when restoring (a change by someone else in between makes it fail rather
//! than be overwritten).

use serde_json::{json, Map, Value};

use super::{Inject, Target, FIELD_MANAGER};
use crate::remediate::plan::{resource_path, Request};

const MERGE_PATCH: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const JSON: &str = "application/json";

fn object_path(target: &Target) -> String {
    resource_path(
        &target.api_version,
        &target.kind,
        &target.namespace,
        Some(&target.name),
    )
}

/// A `POST` of `body` to the target's collection.
fn create(target: &Target, body: Value) -> Request {
    Request {
        method: "POST",
        path: format!(
            "{}?fieldManager={FIELD_MANAGER}",
            resource_path(&target.api_version, &target.kind, &target.namespace, None)
        ),
        content_type: JSON,
        body,
        resource_version: None,
    }
}

fn version_of(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The injection of `inject` on `target`, as the drill read it (`kept`; `None` for a create,
/// whose target does not exist yet).
pub fn injection(target: &Target, inject: &Inject, kept: Option<&Value>) -> Request {
    let version = kept.and_then(version_of);
    match inject {
        Inject::MergePatch(patch) => {
            let mut body = patch.clone();
            if let (Some(version), Some(members)) = (&version, body.as_object_mut()) {
                let metadata = members
                    .entry("metadata")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(metadata) = metadata.as_object_mut() {
                    metadata.insert("resourceVersion".into(), Value::String(version.clone()));
                }
            }
            Request {
                method: "PATCH",
                path: format!("{}?fieldManager={FIELD_MANAGER}", object_path(target)),
                content_type: MERGE_PATCH,
                body,
                resource_version: version,
            }
        }
        Inject::JsonPatch(ops) => {
            // The first operation tests the version read (answered 422 when it moved on).
            let mut body: Vec<Value> = version
                .iter()
                .map(|version| {
                    json!({"op": "test", "path": "/metadata/resourceVersion", "value": version})
                })
                .collect();
            body.extend(ops.iter().cloned());
            Request {
                method: "PATCH",
                path: format!("{}?fieldManager={FIELD_MANAGER}", object_path(target)),
                content_type: JSON_PATCH,
                body: Value::Array(body),
                resource_version: version,
            }
        }
        Inject::Delete => {
            let uid = kept
                .and_then(|object| object.pointer("/metadata/uid"))
                .cloned()
                .unwrap_or(Value::Null);
            let mut preconditions = json!({"uid": uid});
            if let Some(version) = &version {
                preconditions["resourceVersion"] = json!(version);
            }
            Request {
                method: "DELETE",
                path: object_path(target),
                content_type: JSON,
                body: json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}),
                resource_version: version,
            }
        }
        Inject::Create(object) => {
            let mut body = object.clone();
            body["metadata"]["namespace"] = json!(target.namespace);
            create(target, body)
        }
    }
}

/// The restore after `inject`: `kept` is the object as the drill read it before injecting
/// (`None` for a create), `current` as it is now (`None` once deleted). `None` when there is
/// nothing to restore (a created object already gone).
pub fn restore(
    target: &Target,
    inject: &Inject,
    kept: Option<&Value>,
    current: Option<&Value>,
) -> Option<Request> {
    match inject {
        Inject::MergePatch(_) | Inject::JsonPatch(_) => {
            let current = current?;
            let kept = kept?;
            let mut body = Value::Object(Map::new());
            for pointer in touched(inject) {
                put_back(&mut body, kept, &pointer);
            }
            let version = version_of(current);
            if let Some(version) = &version {
                body["metadata"]["resourceVersion"] = json!(version);
            }
            Some(Request {
                method: "PATCH",
                path: format!("{}?fieldManager={FIELD_MANAGER}", object_path(target)),
                content_type: MERGE_PATCH,
                body,
                resource_version: version,
            })
        }
        Inject::Delete => {
            // Re-created as the drill read it, without what the server sets.
            let mut body = kept?.clone();
            if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                for key in [
                    "uid",
                    "resourceVersion",
                    "generation",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "managedFields",
                    "selfLink",
                ] {
                    metadata.remove(key);
                }
            }
            if let Some(members) = body.as_object_mut() {
                members.remove("status");
            }
            Some(create(target, body))
        }
        Inject::Create(_) => {
            let current = current?;
            Some(Request {
                method: "DELETE",
                path: object_path(target),
                content_type: JSON,
                body: json!({"apiVersion": "v1", "kind": "DeleteOptions",
                             "preconditions": {"uid": current.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)}}),
                resource_version: None,
            })
        }
    }
}

/// The JSON pointers an injection touched, down to the object members a merge patch can put
/// back (a list, or a path through a list, is put back whole at its list).
fn touched(inject: &Inject) -> Vec<String> {
    let mut pointers = Vec::new();
    match inject {
        Inject::MergePatch(patch) => leaves(patch, String::new(), &mut pointers),
        Inject::JsonPatch(ops) => {
            for op in ops {
                if op.get("op").and_then(Value::as_str) == Some("test") {
                    continue;
                }
                if let Some(pointer) = op.get("path").and_then(Value::as_str) {
                    pointers.push(pointer.to_string());
                }
            }
        }
        _ => {}
    }
    pointers
}

fn leaves(value: &Value, at: String, out: &mut Vec<String>) {
    match value.as_object() {
        Some(members) if !members.is_empty() => {
            for (key, member) in members {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                leaves(member, format!("{at}/{escaped}"), out);
            }
        }
        _ => out.push(at),
    }
}

/// Sets, in the merge patch `body`, the value `kept` has at `pointer` (`null` when it has
/// none), cut at the first list on the way (a merge patch replaces lists whole).
fn put_back(body: &mut Value, kept: &Value, pointer: &str) {
    let tokens: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect();
    let mut cut = tokens.len();
    let mut walk = Some(kept);
    for (index, token) in tokens.iter().enumerate() {
        match walk {
            Some(Value::Array(_)) => {
                cut = index;
                break;
            }
            Some(Value::Object(members)) => walk = members.get(token),
            _ => walk = None,
        }
    }
    // A path whose list is in the injected object but not the kept one: cut at the first
    // numeric token (an index) instead.
    if let Some(first_index) = tokens
        .iter()
        .position(|token| token.parse::<usize>().is_ok())
    {
        cut = cut.min(first_index);
    }
    let tokens = &tokens[..cut];
    if tokens.is_empty() {
        return;
    }
    let mut kept_value = Some(kept);
    for token in tokens {
        kept_value = kept_value.and_then(|value| value.get(token));
    }
    set_at(body, tokens, kept_value.cloned().unwrap_or(Value::Null));
}

/// Sets `value` at `tokens` in `body`, making the objects on the way.
fn set_at(body: &mut Value, tokens: &[String], value: Value) {
    if !body.is_object() {
        *body = Value::Object(Map::new());
    }
    let Value::Object(members) = body else {
        return;
    };
    match tokens {
        [] => {}
        [last] => {
            members.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let child = members
                .entry(first.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            set_at(child, rest, value);
        }
    }
}
