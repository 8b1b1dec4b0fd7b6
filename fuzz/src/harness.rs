//! The bodies of the fuzz targets, one function per target.
//!
//! Shared by the cargo-fuzz binaries in `fuzz/fuzz_targets/` and by the seed-corpus replay test
//! in the main crate (`tests/it/fuzz_seeds.rs` includes this file with `#[path]`), so the inputs
//! CI replays go through exactly the code libFuzzer exercises. Each function must return
//! normally for every input: a panic, an abort (stack overflow) or a hang is a bug.

use std::sync::Arc;

use drift_core::classify::evidence as enrich;
use drift_core::classify::{Engine, Rules};
use drift_core::decode::{self, ClusterNames, Decoded};
use drift_model::FieldChange;
use serde_json::Value;

/// The fuzz targets, by name (the file names under `fuzz/fuzz_targets/` and `fuzz/seeds/`).
pub const TARGETS: [&str; 6] = [
    "decode_request",
    "parse_object",
    "managed_fields",
    "diff",
    "config",
    "cel",
];

/// Runs the target called `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "decode_request" => decode_request(data),
        "parse_object" => parse_object(data),
        "managed_fields" => managed_fields(data),
        "diff" => diff(data),
        "config" => config(data),
        "cel" => cel(data),
        other => panic!("unknown fuzz target {other}"),
    }
}

/// CloudEvents over HTTP, every content mode, then the engine.
///
/// Input: the first byte picks the mode (`0` binary, `1` structured, `2` batch, anything else: the
/// raw headers decide). In binary mode the bytes up to the first blank line are headers, one
/// `name: value` per line (values may be any bytes, as on the wire); the rest is the body.
/// Whatever decodes is applied to a fresh engine and its timers run, as the writer would.
pub fn decode_request(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut headers = http::HeaderMap::new();
    let body = match mode % 4 {
        1 => {
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/cloudevents+json"),
            );
            rest
        }
        2 => {
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/cloudevents-batch+json"),
            );
            rest
        }
        _ => {
            let (head, body) = split_head(rest);
            for line in head.split(|byte| *byte == b'\n') {
                let Some(colon) = line.iter().position(|byte| *byte == b':') else {
                    continue;
                };
                let name = http::HeaderName::from_bytes(trim(&line[..colon]));
                let value = http::HeaderValue::from_bytes(trim(&line[colon + 1..]));
                if let (Ok(name), Ok(value)) = (name, value) {
                    headers.append(name, value);
                }
            }
            body
        }
    };
    let clusters = ClusterNames {
        default: "fuzz".into(),
        by_source: [("https://10.96.0.1:443".to_string(), "prod".to_string())].into(),
    };
    let Ok(decoded) = decode::decode_request(&headers, body, &clusters) else {
        return;
    };
    let mut engine = Engine::new(Arc::new(Rules::default()));
    let mut now = 1_700_000_000_000;
    for item in &decoded {
        if let Decoded::ApiServer(event) = item {
            engine.apply(event, now);
            now += 1_000;
        }
    }
    engine.tick(now + 24 * 3_600_000);
}

/// An ApiServerSource object (any JSON) through `decode::parse_object`.
pub fn parse_object(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(object) = decode::parse_object(value) {
        // Secret values must never survive decoding, whatever the shape of the object.
        if object.is_secret() {
            for hashed in object.data.iter().flat_map(|data| data.values()) {
                assert!(hashed.starts_with("sha256:"), "unhashed Secret value");
            }
        }
    }
}

/// `managedFields` parsing and path attribution.
///
/// Input: JSON `{"managedFields": [...], "object": {...}, "pointers": ["/spec/...", ...]}`;
/// when `pointers` is absent, every path the object's own diff against nothing names is asked.
pub fn managed_fields(data: &[u8]) {
    let Ok(Value::Object(mut input)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(entries) = decode::object::parse_managed_fields(input.remove("managedFields")) else {
        return;
    };
    let object = input.remove("object").unwrap_or(Value::Null);
    let mut pointers: Vec<String> = match input.remove("pointers") {
        Some(Value::Array(items)) => items
            .into_iter()
            .filter_map(|item| item.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(pointer)) => vec![pointer],
        _ => Vec::new(),
    };
    if pointers.is_empty() {
        let mut changes = Vec::new();
        enrich::diff::diff_values("", None, Some(&object), &mut changes);
        pointers.extend(changes.into_iter().map(|change| change.path));
    }
    for pointer in pointers.iter().take(64) {
        for entry in &entries {
            let _ = enrich::actor::owns(&entry.fields.value(), &object, pointer);
        }
    }
}

/// The field diff between two JSON values.
///
/// Input: a JSON array `[before, after]` (a missing side is "absent"); anything else is split
/// in two at the first NUL byte and each half parsed as JSON.
pub fn diff(data: &[u8]) {
    let (before, after) = match serde_json::from_slice::<Value>(data) {
        Ok(Value::Array(mut sides)) if sides.len() <= 2 => {
            let after = if sides.len() == 2 { sides.pop() } else { None };
            (sides.pop(), after)
        }
        _ => {
            let (left, right) = match data.iter().position(|byte| *byte == 0) {
                Some(nul) => (&data[..nul], &data[nul + 1..]),
                None => (data, &data[..0]),
            };
            (
                serde_json::from_slice::<Value>(left).ok(),
                serde_json::from_slice::<Value>(right).ok(),
            )
        }
    };
    let mut changes: Vec<FieldChange> = Vec::new();
    enrich::diff::diff_values("/spec", before.as_ref(), after.as_ref(), &mut changes);
    for change in &changes {
        // Every change names a pointer that splits back into segments, and values are bounded.
        let _ = drift_model::pointer::pointer_segments(&change.path);
        for value in change.before.iter().chain(change.after.iter()) {
            let _ = serde_json::to_string(&enrich::diff::bounded(value));
        }
    }
}

/// The YAML config through `config::load_str`, then compiled as the service would at start.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lookup = |name: &str| -> Option<String> {
        match name {
            "EMPTY" => Some(String::new()),
            "MISSING" => None,
            _ => Some(format!("value-of-{name}")),
        }
    };
    let Ok(config) = drift_core::config::load_str(text, &lookup) else {
        return;
    };
    let _ = config.rules.compile();
    let _ = config.router();
}

/// A team invariant's expression judged on an object as the service judges it: compiled with
/// its checks and budget rewrite (as a `bool` rule and as a message), then evaluated on the
/// object, with the object as `oldObject` too (an update). The work runs on a thread with the
/// stack the service compiles rules on (256 MiB): a stack overflow or an evaluation past its
/// budget is a bug either way.
///
/// Input: the expression's text, a NUL byte, then the object as JSON (anything that is not a
/// Kubernetes object is judged on an empty one).
pub fn cel(data: &[u8]) {
    let (source, object) = match data.iter().position(|byte| *byte == 0) {
        Some(nul) => (&data[..nul], &data[nul + 1..]),
        None => (data, &data[..0]),
    };
    let Ok(source) = std::str::from_utf8(source) else {
        return;
    };
    let source = source.to_string();
    let object = serde_json::from_slice::<Value>(object).unwrap_or(Value::Null);
    let judged = std::thread::Builder::new()
        .stack_size(256 * 1024 * 1024)
        .spawn(move || judge(&source, object))
        .expect("spawn");
    if let Err(panic) = judged.join() {
        std::panic::resume_unwind(panic);
    }
}

fn judge(source: &str, object: Value) {
    use drift_core::classify::invariants::{view, Bindings, Expression, Returns};
    use drift_core::classify::ObjectState;
    let object = decode::parse_object(object)
        .or_else(|_| decode::parse_object(serde_json::json!({"apiVersion": "v1", "kind": "Fuzz", "metadata": {"name": "fuzz", "uid": "fuzz", "resourceVersion": "1"}})));
    let Ok(object) = object else {
        return;
    };
    let state = ObjectState::from_object("fuzz", &object, 0);
    let (spec, status) = (state.spec.value(), state.status.value());
    let view = view(&state, &spec, &status, true);
    // What `admission export` reads of any source: never a panic.
    if let Ok(analysis) = drift_core::admission::expression::analyze(source) {
        drop(analysis);
        drop(drift_core::admission::expression::rename_path(
            source,
            &["object", "metadata", "labels"],
            "variables.objectLabels",
        ));
    }
    for returns in [Returns::Bool, Returns::String, Returns::Any] {
        let Ok(expression) = Expression::compile(source, returns) else {
            continue;
        };
        let (reads, reads_old) = expression.fields();
        for old in [None, Some(&view)] {
            let bindings = Bindings::new(&view, old, reads, reads_old);
            match returns {
                Returns::Bool => drop(expression.holds(&bindings)),
                Returns::String => drop(expression.text(&bindings)),
                Returns::Any => drop(expression.json(&bindings)),
            }
        }
    }
}

fn split_head(data: &[u8]) -> (&[u8], &[u8]) {
    match data.windows(2).position(|pair| pair == b"\n\n") {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &data[..0]),
    }
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|byte| !byte.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|byte| !byte.is_ascii_whitespace())
        .map_or(start, |at| at + 1);
    &bytes[start..end.max(start)]
}
