//! `metadata.managedFields` as the API server keeps them for non-apply writes: one `Update`
//! entry per (manager, subresource) with the `fieldsV1` trie of the fields it owns. A write
//! gives its manager the fields whose value it changed and takes them from every other entry;
//! a removed field is nobody's; an entry left owning nothing is dropped (a write that only
//! removes fields leaves no trace of its manager, as in Kubernetes).
//!
//! Tries use Kubernetes' keys: `f:<field>`, `.` for a map the writer created, and on built-in
//! kinds (`v1`, `apps/v1`, ...) `k:{"name":…}` for the items of lists keyed by `name`
//! (containers, env, volumes). Every other list is atomic (`f:traffic: {}`), as Knative's CRDs
//! declare theirs.

use serde_json::{json, Map, Value};

/// Records a write by `manager` to the main resource (`status == false`: everything but status
/// and the server's metadata) or to `/status`, from `before` (`None`: a create) to `after`, at
/// `time`. False when the write changed nothing it tracks.
pub(crate) fn record(
    before: Option<&Value>,
    after: &mut Value,
    manager: &str,
    status: bool,
    time: &str,
) -> bool {
    let empty = json!({"metadata": {}});
    let old = before.map_or(empty.clone(), |object| view(object, status));
    let new = view(after, status);
    let keyed = !after["apiVersion"].as_str().unwrap_or("").contains('.');
    let (mut set, mut removed) = (Vec::new(), Vec::new());
    diff(
        Some(&old),
        Some(&new),
        keyed,
        &mut Vec::new(),
        &mut set,
        &mut removed,
    );
    if set.is_empty() && removed.is_empty() {
        return false;
    }
    let subresource = if status { "status" } else { "" };
    let mut entries: Vec<Value> = before
        .and_then(|object| object["metadata"]["managedFields"].as_array().cloned())
        .unwrap_or_default();
    let mine = |entry: &Value| {
        entry["manager"] == manager
            && entry["operation"] == "Update"
            && entry["subresource"].as_str().unwrap_or("") == subresource
    };
    if !entries.iter().any(mine) && !set.is_empty() {
        let mut entry = json!({"manager": manager, "operation": "Update", "fieldsV1": {}});
        if status {
            entry["subresource"] = json!("status");
        }
        entries.push(entry);
    }
    for entry in &mut entries {
        let owner = mine(entry);
        let trie = &mut entry["fieldsV1"];
        for path in &removed {
            take(trie, path);
        }
        if owner {
            for path in &set {
                give(trie, path);
            }
            entry["apiVersion"] = after["apiVersion"].clone();
            entry["time"] = json!(time);
            entry["fieldsType"] = json!("FieldsV1");
        } else {
            for path in &set {
                take(trie, path);
            }
        }
    }
    entries.retain(|entry| {
        entry["fieldsV1"]
            .as_object()
            .is_some_and(|trie| !trie.is_empty())
    });
    after["metadata"]["managedFields"] = Value::Array(entries);
    true
}

/// The part of `object` a write to the main resource or to `/status` owns.
fn view(object: &Value, status: bool) -> Value {
    let mut view = Map::new();
    if status {
        if let Some(status) = object.get("status") {
            view.insert("status".to_string(), status.clone());
        }
        return Value::Object(view);
    }
    for (key, value) in object.as_object().into_iter().flatten() {
        match key.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                let mut metadata = Map::new();
                for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
                    if let Some(value) = value.get(field) {
                        metadata.insert(field.to_string(), value.clone());
                    }
                }
                view.insert(key.clone(), Value::Object(metadata));
            }
            _ => {
                view.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(view)
}

/// The names of a list keyed by `name` (every item an object with a distinct string `name`).
fn names(list: &[Value]) -> Option<Vec<&str>> {
    let names: Option<Vec<&str>> = list.iter().map(|item| item["name"].as_str()).collect();
    let names = names.filter(|names| !names.is_empty())?;
    let distinct: std::collections::BTreeSet<&&str> = names.iter().collect();
    (distinct.len() == names.len()).then_some(names)
}

fn item_key(name: &str) -> String {
    format!("k:{}", json!({ "name": name }))
}

/// Collects the trie paths `after` sets (changed or added leaves, `.` for created maps) and
/// the paths it removes, relative to `before`.
fn diff(
    before: Option<&Value>,
    after: Option<&Value>,
    keyed: bool,
    path: &mut Vec<String>,
    set: &mut Vec<Vec<String>>,
    removed: &mut Vec<Vec<String>>,
) {
    match (before, after) {
        (None, None) => {}
        (Some(_), None) => removed.push(path.clone()),
        (Some(old), Some(new)) if old == new => {}
        (Some(Value::Object(old)), Some(Value::Object(new))) => {
            let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
            for key in keys {
                descend(
                    keyed,
                    set,
                    removed,
                    format!("f:{key}"),
                    old.get(key),
                    new.get(key),
                    path,
                );
            }
        }
        (Some(Value::Array(old)), Some(Value::Array(new)))
            if keyed && names(old).is_some() && names(new).is_some() =>
        {
            let by_name = |list: &[Value], name: &str| -> Option<Value> {
                list.iter().find(|item| item["name"] == name).cloned()
            };
            let all: std::collections::BTreeSet<&str> =
                names(old).into_iter().chain(names(new)).flatten().collect();
            for name in all {
                descend(
                    keyed,
                    set,
                    removed,
                    item_key(name),
                    by_name(old, name).as_ref(),
                    by_name(new, name).as_ref(),
                    path,
                );
            }
        }
        (None, Some(Value::Object(new))) if !new.is_empty() => {
            set.push([path.clone(), vec![".".to_string()]].concat());
            for (key, value) in new {
                descend(
                    keyed,
                    set,
                    removed,
                    format!("f:{key}"),
                    None,
                    Some(value),
                    path,
                );
            }
        }
        (None, Some(Value::Array(new))) if keyed && names(new).is_some() => {
            for item in new {
                let name = item["name"].as_str().unwrap_or_default();
                descend(keyed, set, removed, item_key(name), None, Some(item), path);
            }
        }
        (_, Some(_)) => set.push(path.clone()),
    }
}

/// [`diff`] one level down, under `key`.
fn descend(
    keyed: bool,
    set: &mut Vec<Vec<String>>,
    removed: &mut Vec<Vec<String>>,
    key: String,
    before: Option<&Value>,
    after: Option<&Value>,
    path: &mut Vec<String>,
) {
    path.push(key);
    diff(before, after, keyed, path, set, removed);
    path.pop();
}

/// Makes `trie` own `path`.
fn give(trie: &mut Value, path: &[String]) {
    let mut node = trie;
    for segment in path {
        if !node.is_object() {
            *node = json!({});
        }
        node = node
            .as_object_mut()
            .expect("made an object above")
            .entry(segment.clone())
            .or_insert_with(|| json!({}));
    }
}

/// Takes `path` (and what is under it) from `trie`, dropping nodes left empty.
fn take(trie: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(members) = trie.as_object_mut() else {
        return;
    };
    if rest.is_empty() {
        members.remove(first);
        return;
    }
    if let Some(child) = members.get_mut(first) {
        if child.as_object().is_some_and(|child| child.is_empty()) {
            // A leaf above the path owns its whole subtree; the write takes only part of it.
            return;
        }
        take(child, rest);
        if child.as_object().is_some_and(|child| child.is_empty()) {
            members.remove(first);
        }
    }
}
