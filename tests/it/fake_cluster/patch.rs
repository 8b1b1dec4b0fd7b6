//! The two patch formats the fake API server applies, as the API server does for custom
//! resources: RFC 7386 JSON merge patch (objects merge, `null` removes a key, anything else,
//! lists included, is replaced whole) and RFC 6902 JSON patch (ordered `add`, `remove`,
//! `replace`, `move`, `copy`, `test`; array indices and `-`). A JSON patch that cannot be read
//! is the caller's `400`; one that cannot be applied (a failed `test`, a missing path) is its
//! `422`, whose text the API server drops.

use serde_json::Value;

/// Why a JSON patch was refused.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Not a list of operations (the API server's `400 BadRequest`).
    Malformed(String),
    /// An operation could not be applied (`422 Invalid`: the API server keeps no detail).
    Unapplicable,
}

/// Applies an RFC 7386 merge patch to `target`.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let object = target.as_object_mut().expect("made an object above");
    for (key, value) in members {
        if value.is_null() {
            object.remove(key);
        } else {
            merge(object.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Applies an RFC 6902 patch to `document`; on refusal `document` is left as it was.
pub(crate) fn apply(document: &mut Value, patch: &Value) -> Result<(), Refused> {
    let Value::Array(operations) = patch else {
        return Err(Refused::Malformed("a JSON patch is a list".to_string()));
    };
    let mut patched = document.clone();
    for operation in operations {
        let text = |key: &str| -> Result<&str, Refused> {
            operation.get(key).and_then(Value::as_str).ok_or_else(|| {
                Refused::Malformed(format!("operation {operation} has no string {key:?}"))
            })
        };
        let value = || -> Result<Value, Refused> {
            operation
                .get("value")
                .cloned()
                .ok_or_else(|| Refused::Malformed(format!("operation {operation} has no value")))
        };
        let path = segments(text("path")?)?;
        match text("op")? {
            "add" => add(&mut patched, &path, value()?)?,
            "remove" => {
                remove(&mut patched, &path)?;
            }
            "replace" => {
                remove(&mut patched, &path)?;
                add(&mut patched, &path, value()?)?;
            }
            "move" => {
                let moved = remove(&mut patched, &segments(text("from")?)?)?;
                add(&mut patched, &path, moved)?;
            }
            "copy" => {
                let copied = get(&patched, &segments(text("from")?)?)?.clone();
                add(&mut patched, &path, copied)?;
            }
            "test" => {
                if *get(&patched, &path)? != value()? {
                    return Err(Refused::Unapplicable);
                }
            }
            _ => return Err(Refused::Unapplicable),
        }
    }
    *document = patched;
    Ok(())
}

/// The unescaped segments of a JSON pointer (`""` is the whole document).
fn segments(pointer: &str) -> Result<Vec<String>, Refused> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(Refused::Malformed(format!(
            "{pointer:?} is not a JSON pointer"
        )));
    };
    Ok(rest
        .split('/')
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn get<'a>(document: &'a Value, path: &[String]) -> Result<&'a Value, Refused> {
    let mut node = document;
    for segment in path {
        node = match node {
            Value::Object(members) => members.get(segment),
            Value::Array(items) => segment
                .parse::<usize>()
                .ok()
                .and_then(|index| items.get(index)),
            _ => None,
        }
        .ok_or(Refused::Unapplicable)?;
    }
    Ok(node)
}

fn parent_mut<'a>(document: &'a mut Value, path: &[String]) -> Result<&'a mut Value, Refused> {
    let mut node = document;
    for segment in &path[..path.len() - 1] {
        node = match node {
            Value::Object(members) => members.get_mut(segment),
            Value::Array(items) => segment
                .parse::<usize>()
                .ok()
                .and_then(|index| items.get_mut(index)),
            _ => None,
        }
        .ok_or(Refused::Unapplicable)?;
    }
    Ok(node)
}

fn add(document: &mut Value, path: &[String], value: Value) -> Result<(), Refused> {
    let Some(last) = path.last() else {
        *document = value;
        return Ok(());
    };
    match parent_mut(document, path)? {
        Value::Object(members) => {
            members.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|index| *index <= items.len())
                    .ok_or(Refused::Unapplicable)?
            };
            items.insert(index, value);
            Ok(())
        }
        _ => Err(Refused::Unapplicable),
    }
}

fn remove(document: &mut Value, path: &[String]) -> Result<Value, Refused> {
    let Some(last) = path.last() else {
        return Err(Refused::Unapplicable);
    };
    match parent_mut(document, path)? {
        Value::Object(members) => members.remove(last).ok_or(Refused::Unapplicable),
        Value::Array(items) => last
            .parse::<usize>()
            .ok()
            .filter(|index| *index < items.len())
            .map(|index| items.remove(index))
            .ok_or(Refused::Unapplicable),
        _ => Err(Refused::Unapplicable),
    }
}
