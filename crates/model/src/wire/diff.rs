//! One entry of a public diff: a JSON pointer, what happened to it, and the values around it.

use serde::Serialize;
use serde_json::Value;

use crate::FieldChange;

/// What happened to a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffOp {
    /// The field was absent before.
    Add,
    /// The field is absent after.
    Remove,
    /// The field had another value before.
    Replace,
}

/// One changed field. `before` is `null` for an added field and `after` for a removed one; a
/// field that was `null` before has `op: replace` (a consumer can tell the two apart).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffEntry {
    /// JSON pointer, e.g. `/spec/traffic/0/percent`.
    pub path: String,
    /// `add`, `remove` or `replace`.
    pub op: DiffOp,
    /// The value before (`null` when absent).
    pub before: Value,
    /// The value after (`null` when absent).
    pub after: Value,
}

impl From<&FieldChange> for DiffEntry {
    fn from(change: &FieldChange) -> DiffEntry {
        let op = match (&change.before, &change.after) {
            (None, Some(_)) => DiffOp::Add,
            (Some(_), None) => DiffOp::Remove,
            _ => DiffOp::Replace,
        };
        DiffEntry {
            path: change.path.clone(),
            op,
            before: change.before.clone().unwrap_or(Value::Null),
            after: change.after.clone().unwrap_or(Value::Null),
        }
    }
}

/// The public diff of a list of changes.
pub fn entries(changes: &[FieldChange]) -> Vec<DiffEntry> {
    changes.iter().map(DiffEntry::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_entry_says_what_happened_with_explicit_values() {
        let change = |before: Option<Value>, after: Option<Value>| FieldChange {
            path: "/data/x".into(),
            before,
            after,
        };
        let json = |change: FieldChange| serde_json::to_value(DiffEntry::from(&change)).unwrap();
        assert_eq!(
            json(change(None, Some(json!("1")))),
            json!({"path": "/data/x", "op": "add", "before": null, "after": "1"})
        );
        assert_eq!(
            json(change(Some(json!("1")), None)),
            json!({"path": "/data/x", "op": "remove", "before": "1", "after": null})
        );
        assert_eq!(
            json(change(Some(Value::Null), Some(json!(2)))),
            json!({"path": "/data/x", "op": "replace", "before": null, "after": 2})
        );
    }
}
