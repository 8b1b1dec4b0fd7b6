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
            for tokens in restore_points(&touched(inject), kept) {
                let at_kept = walk(kept, &tokens);
                let at_current = walk(current, &tokens);
                set_at(&mut body, &tokens, diff(at_current, at_kept));
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

/// A JSON pointer's tokens, unescaped (RFC 6901).
fn tokens_of(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Where the restore writes, for the touched pointers: each cut where `kept` stops being an
/// object (at a list, a scalar, or the first member it lacks: that member is put back, or
/// removed, whole), and none below another (the ancestor's value covers it).
fn restore_points(pointers: &[String], kept: &Value) -> Vec<Vec<String>> {
    let mut points: Vec<Vec<String>> = Vec::new();
    for pointer in pointers {
        let tokens = tokens_of(pointer);
        let mut cut = tokens.len();
        let mut node = Some(kept);
        for (index, token) in tokens.iter().enumerate() {
            match node {
                Some(Value::Object(members)) => match members.get(token) {
                    Some(child) => node = Some(child),
                    // The object's own labels and annotations are kept by key: the API server
                    // drops an empty map there, so removing the drill's keys is exact, and a
                    // key someone added since is not the drill's to remove.
                    None if index == 1
                        && tokens[0] == "metadata"
                        && (token == "labels" || token == "annotations")
                        && tokens.len() > 2 =>
                    {
                        cut = 3;
                        break;
                    }
                    None => {
                        cut = index + 1;
                        break;
                    }
                },
                // A list (or a scalar) is put back whole.
                _ => {
                    cut = index;
                    break;
                }
            }
        }
        if cut > 0 {
            points.push(tokens[..cut].to_vec());
        }
    }
    points.sort();
    points.dedup();
    let mut kept_points: Vec<Vec<String>> = Vec::new();
    for point in points {
        // Sorted: an ancestor comes before its descendants.
        if !kept_points
            .iter()
            .any(|ancestor| point.starts_with(ancestor.as_slice()))
        {
            kept_points.push(point);
        }
    }
    kept_points
}

/// The value at `tokens` in `value`, if any.
fn walk<'v>(value: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    tokens
        .iter()
        .try_fold(value, |node, token| node.as_object()?.get(token))
}

/// The merge patch (RFC 7386) that turns `current` into `kept`: members only in `current` become
/// `null`, members that differ are set (maps member by member), a missing `kept` is `null`.
fn diff(current: Option<&Value>, kept: Option<&Value>) -> Value {
    match (current, kept) {
        (Some(Value::Object(now)), Some(Value::Object(was))) => {
            let mut patch = Map::new();
            for (key, value) in now {
                match was.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(old) if old != value => {
                        patch.insert(key.clone(), diff(Some(value), Some(old)));
                    }
                    Some(_) => {}
                }
            }
            for (key, old) in was {
                if !now.contains_key(key) {
                    patch.insert(key.clone(), old.clone());
                }
            }
            Value::Object(patch)
        }
        (_, Some(kept)) => kept.clone(),
        (_, None) => Value::Null,
    }
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

/// Where the object, at what the injection touched, now differs from both the object as the
/// injection left it (`injected`, the API server's answer) and as kept: someone else changed
/// it after the drill, and a restore would write over their change. JSON pointers; empty when a
/// restore only undoes the drill. For a create, a `current` of another uid than the one created
/// (someone deleted it and made their own) is such a change (`/metadata/uid`).
pub fn foreign_changes(
    inject: &Inject,
    kept: Option<&Value>,
    injected: &Value,
    current: Option<&Value>,
) -> Vec<String> {
    match inject {
        Inject::MergePatch(_) | Inject::JsonPatch(_) => {
            let (Some(kept), Some(current)) = (kept, current) else {
                return Vec::new();
            };
            restore_points(&touched(inject), kept)
                .into_iter()
                .filter(|tokens| {
                    let now = present(walk(current, tokens));
                    now != present(walk(injected, tokens)) && now != present(walk(kept, tokens))
                })
                .map(|tokens| pointer_of(&tokens))
                .collect()
        }
        Inject::Create(_) => {
            let uid = |object: &Value| object.pointer("/metadata/uid").cloned();
            match current {
                Some(current) if uid(current) != uid(injected) => vec!["/metadata/uid".into()],
                _ => Vec::new(),
            }
        }
        Inject::Delete => Vec::new(),
    }
}

/// Whether `current` is the object as kept again where the injection touched it (someone
/// else repaired it: remediation, Knative, GitOps): the touched fields equal the kept ones; a
/// deleted object exists again; a created one is gone.
pub fn repaired(inject: &Inject, kept: Option<&Value>, current: Option<&Value>) -> bool {
    match inject {
        Inject::MergePatch(_) | Inject::JsonPatch(_) => match (kept, current) {
            (Some(kept), Some(current)) => restore_points(&touched(inject), kept)
                .iter()
                .all(|tokens| present(walk(current, tokens)) == present(walk(kept, tokens))),
            _ => false,
        },
        // Made again: another object (a new uid) that is not itself on its way out. The kept
        // one still there (a finalizer holds it, `deletionTimestamp` set) is not a repair.
        Inject::Delete => current.is_some_and(|current| {
            current.pointer("/metadata/uid") != kept.and_then(|kept| kept.pointer("/metadata/uid"))
                && current.pointer("/metadata/deletionTimestamp").is_none()
        }),
        Inject::Create(_) => current.is_none(),
    }
}

/// The object as `inject` would leave `kept`, worked out here (RFC 7386; RFC 6902's `add`,
/// `remove`, `replace` and `test`): what the drill compares the object with when the API
/// server's answer is unknown (a run killed mid-request, an answer lost), and what the dry run
/// restores from. `None` when it cannot be told (a `move` or `copy`, a path that does not
/// resolve, a failed `test`: the API server would have refused it too).
pub fn injected_locally(inject: &Inject, kept: &Value) -> Option<Value> {
    let mut object = kept.clone();
    match inject {
        Inject::MergePatch(patch) => {
            merge(&mut object, patch);
            Some(object)
        }
        Inject::JsonPatch(ops) => {
            for op in ops {
                json_patch_op(&mut object, op)?;
            }
            Some(object)
        }
        Inject::Delete => None,
        Inject::Create(created) => Some(created.clone()),
    }
}

/// RFC 7386.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in members {
            if value.is_null() {
                map.remove(key);
            } else {
                merge(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// One RFC 6902 operation of those drills use; `None` when it does not apply.
fn json_patch_op(object: &mut Value, op: &Value) -> Option<()> {
    let path = op.get("path")?.as_str()?;
    let tokens = tokens_of(path);
    let (last, parent_tokens) = tokens.split_last()?;
    let value = op.get("value");
    match op.get("op")?.as_str()? {
        "test" => (object.pointer(path)? == value?).then_some(()),
        "replace" => {
            *object.pointer_mut(path)? = value?.clone();
            Some(())
        }
        "add" => {
            let parent = parent_tokens
                .iter()
                .try_fold(object, |node, token| match node {
                    Value::Object(members) => members.get_mut(token),
                    Value::Array(items) => items.get_mut(token.parse::<usize>().ok()?),
                    _ => None,
                })?;
            match parent {
                Value::Object(members) => {
                    members.insert(last.clone(), value?.clone());
                }
                Value::Array(items) if last == "-" => items.push(value?.clone()),
                Value::Array(items) => {
                    let index = last
                        .parse::<usize>()
                        .ok()
                        .filter(|index| *index <= items.len())?;
                    items.insert(index, value?.clone());
                }
                _ => return None,
            }
            Some(())
        }
        "remove" => {
            let parent_pointer = pointer_of(parent_tokens);
            match object.pointer_mut(&parent_pointer)? {
                Value::Object(members) => members.remove(last).map(|_| ()),
                Value::Array(items) => {
                    let index = last
                        .parse::<usize>()
                        .ok()
                        .filter(|index| *index < items.len())?;
                    items.remove(index);
                    Some(())
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// A value as Kubernetes keeps it: an empty map or a `null` is no value (the API server leaves
/// out `labels: {}`).
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|value| {
        !value.is_null() && !value.as_object().is_some_and(serde_json::Map::is_empty)
    })
}

/// The JSON pointer of `tokens`, escaped (RFC 6901).
fn pointer_of(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|token| format!("/{}", token.replace('~', "~0").replace('/', "~1")))
        .collect()
}
