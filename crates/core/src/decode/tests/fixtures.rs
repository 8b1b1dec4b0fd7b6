//! Test data: the texts of the JSON files under the repository's `tests/fixtures/` (real
//! Knative, Istio and certificate objects and events), for tests that check a reader against
//! the parser on every one of them.

/// Every `.json` file's text under `tests/fixtures/`, in no particular order.
pub(crate) fn json_texts() -> Vec<String> {
    let mut texts = Vec::new();
    let mut stack =
        vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "json") {
                if let Ok(text) = std::fs::read_to_string(&path) {
                    texts.push(text);
                }
            }
        }
    }
    texts
}

/// Every object and list anywhere in the JSON fixtures, the documents themselves included.
pub(crate) fn nested_values() -> Vec<serde_json::Value> {
    use serde_json::Value;
    let mut found = Vec::new();
    let mut values: Vec<Value> = json_texts()
        .iter()
        .filter_map(|text| serde_json::from_str(text).ok())
        .collect();
    while let Some(value) = values.pop() {
        match &value {
            Value::Object(map) => values.extend(map.values().cloned()),
            Value::Array(items) => values.extend(items.iter().cloned()),
            _ => continue,
        }
        found.push(value);
    }
    found
}
