//! What a diff's values look like in a message: long strings cut, so one huge edit cannot
//! produce a huge alert. The engine keeps values whole (they are compared later and written into
//! patches); everything that shows them (the renderers, the fleet view) cuts them here.

use serde_json::Value;

/// Longest string value shown (characters).
pub(crate) const MAX_VALUE_CHARS: usize = 300;

/// A value with long strings cut, for messages.
pub fn bounded(value: &Value) -> Value {
    match value {
        Value::String(text) if text.chars().count() > MAX_VALUE_CHARS => {
            let cut: String = text.chars().take(MAX_VALUE_CHARS).collect();
            Value::String(format!("{cut}… ({} characters)", text.chars().count()))
        }
        Value::Array(items) => Value::Array(items.iter().map(bounded).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), bounded(v))).collect())
        }
        other => other.clone(),
    }
}
