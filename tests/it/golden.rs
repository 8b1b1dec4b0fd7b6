//! The golden replay: a recorded, real-shaped event stream (`tests/fixtures/golden/`: the engine
//! scenarios' events, the benchmark's world, the recorded ApiServerSource events of
//! `tests/fixtures/knative/events/`) replayed through the library as `drift-sentinel replay
//! --format json` does, and every transition compared byte for byte with what the code gave when
//! the golden was made: findings, states, times, diffs, actors, hints, owner chains, facts
//! (`expected.jsonl`, the command's own lines) and what those lines leave out (`records.jsonl`:
//! uid, apiVersion, labels, the drift's times, the class's severity).
//!
//! A change of engine internals (decoding, the per-object state) must leave both files as they
//! are. A deliberate change of findings regenerates them: `DRIFT_SENTINEL_BLESS_GOLDEN=1 cargo test
//! --test it golden`, then review the diff (the README beside the files says more).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use drift_core::decode::ClusterNames;
use drift_model::time::format_time;
use drift_model::Transition;
use drift_sentinel::replay::{parse_file, replay, transition_json, Recorded};
use serde_json::{json, Value};

/// After the last event the clock moves on by an hour, as `replay`'s default `--settle` does.
const SETTLE_MILLIS: i64 = 3_600_000;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
}

/// Every event of the corpus in replay order: the recorded ApiServerSource events (2019–2025),
/// then the delta-encoded files of `corpus/` in name order (the scenarios from 2026-01-01, the
/// bench world on 2026-11-29), so that the clock never goes back.
fn corpus() -> Vec<Recorded> {
    let mut events = Vec::new();
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/knative/events");
    for path in files(&recorded, |name| {
        name.ends_with(".ce.json") || name.ends_with(".ce.jsonl")
    }) {
        let text = std::fs::read_to_string(&path).expect("recorded events");
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        events.extend(parse_file(&name, &text).expect("recorded events parse"));
    }
    for path in files(&golden_dir().join("corpus"), |name| {
        name.ends_with(".delta")
    }) {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).expect("corpus file");
        events.extend(
            expand(&name, &text)
                .into_iter()
                .enumerate()
                .map(|(index, event)| Recorded {
                    origin: format!("{name}:{}", index + 1),
                    event,
                }),
        );
    }
    events
}

/// The files of `dir` whose names pass `keep`, in name order.
fn files(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| keep(&path.file_name().unwrap().to_string_lossy()))
        .collect();
    paths.sort();
    paths
}

/// Expands a delta-encoded file (`make_corpus.py`): a line is a whole event, or
/// `{"base": N, "ops": [...]}`, the event of line N (0-based) with each op applied in order:
/// `[path, value]` sets the member or element at `path`, `[path]` removes a member.
fn expand(name: &str, text: &str) -> Vec<Value> {
    let mut events: Vec<Value> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let at = format!("{name}:{}", number + 1);
        let line: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{at}: {e}"));
        let event = match (line.get("base"), line.get("ops"), line.get("specversion")) {
            (Some(base), Some(Value::Array(ops)), None) => {
                let base = base
                    .as_u64()
                    .and_then(|base| events.get(base as usize))
                    .unwrap_or_else(|| panic!("{at}: base {base} is not an earlier line"));
                let mut event = base.clone();
                for op in ops {
                    apply(&mut event, op).unwrap_or_else(|e| panic!("{at}: {op}: {e}"));
                }
                event
            }
            _ => line,
        };
        events.push(event);
    }
    events
}

fn apply(event: &mut Value, op: &Value) -> Result<(), String> {
    let (path, value) = match op.as_array().map(Vec::as_slice) {
        Some([Value::Array(path)]) => (path, None),
        Some([Value::Array(path), value]) => (path, Some(value.clone())),
        _ => return Err("an op is [path] or [path, value]".into()),
    };
    let Some((last, parents)) = path.split_last() else {
        return Err("empty path".into());
    };
    let mut target = event;
    for step in parents {
        target = match step {
            Value::String(key) => target.get_mut(key.as_str()),
            Value::Number(index) => index
                .as_u64()
                .and_then(|index| target.get_mut(index as usize)),
            _ => None,
        }
        .ok_or_else(|| format!("no {step} on the path"))?;
    }
    match (target, last, value) {
        (Value::Object(map), Value::String(key), Some(value)) => {
            map.insert(key.clone(), value);
        }
        (Value::Object(map), Value::String(key), None) => {
            map.remove(key)
                .ok_or_else(|| format!("no member {key} to remove"))?;
        }
        (Value::Array(items), Value::Number(index), Some(value)) => {
            let slot = index
                .as_u64()
                .and_then(|index| items.get_mut(index as usize))
                .ok_or_else(|| format!("no element {index}"))?;
            *slot = value;
        }
        _ => return Err("the path's end is neither a member nor an element".into()),
    }
    Ok(())
}

/// The replay of the whole corpus with the golden config, as `replay --config` does it.
fn transitions() -> Vec<Transition> {
    let mut config = drift_core::config::load_file(&golden_dir().join("config.yaml"))
        .expect("the golden config loads");
    // The config names the baseline relative to the repository root; the test may run elsewhere.
    if let Some(dir) = config.rules.baseline_dir.as_mut() {
        *dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(&*dir);
    }
    let rules = drift_sentinel::reload::load_rules(&config).expect("the golden baseline loads");
    let clusters = ClusterNames {
        default: config.default_cluster.clone(),
        by_source: config.clusters.clone(),
    };
    replay(&corpus(), Arc::new(rules), &clusters, SETTLE_MILLIS).expect("the corpus replays")
}

/// What a transition's `replay` line leaves out of its drift.
fn record(transition: &Transition) -> Value {
    let drift = &transition.drift;
    json!({
        "driftId": drift.id,
        "state": drift.state.as_str(),
        "uid": drift.uid,
        "apiVersion": drift.api_version,
        "labels": drift.labels,
        "since": format_time(drift.since),
        "fireAt": format_time(drift.fire_at),
        "firedAt": drift.fired_at.map(format_time),
        "resolvedAt": drift.resolved_at.map(format_time),
        "evidenceSeverity": drift.evidence.severity.map(|severity| severity.as_str()),
    })
}

fn lines(transitions: &[Transition], render: fn(&Transition) -> Value) -> String {
    transitions
        .iter()
        .map(|transition| format!("{}\n", render(transition)))
        .collect()
}

/// Fails with the first line that differs, and within it the first JSON member that differs.
#[track_caller]
fn assert_same(file: &str, expected: &str, actual: &str) {
    if expected == actual {
        return;
    }
    let (expected_lines, actual_lines): (Vec<&str>, Vec<&str>) =
        (expected.lines().collect(), actual.lines().collect());
    let line = expected_lines
        .iter()
        .zip(&actual_lines)
        .position(|(expected, actual)| expected != actual)
        .unwrap_or(expected_lines.len().min(actual_lines.len()));
    let at = |lines: &[&str]| -> String {
        lines
            .get(line)
            .map(|text| text.chars().take(3000).collect())
            .unwrap_or_else(|| "(no such line)".into())
    };
    let member = match (
        expected_lines
            .get(line)
            .map(|text| serde_json::from_str(text)),
        actual_lines
            .get(line)
            .map(|text| serde_json::from_str(text)),
    ) {
        (Some(Ok(expected)), Some(Ok(actual))) => first_difference(&expected, &actual, ""),
        _ => None,
    };
    panic!(
        "tests/fixtures/golden/{file} differs from this replay at line {} \
         ({} lines expected, {} replayed)\n\
         first differing member: {}\n\
         expected: {}\n\
         actual:   {}\n\
         If the change of findings is deliberate, regenerate with DRIFT_SENTINEL_BLESS_GOLDEN=1 \
         (tests/fixtures/golden/README.md) and review the diff.",
        line + 1,
        expected_lines.len(),
        actual_lines.len(),
        member.unwrap_or_else(|| "(whole line)".into()),
        at(&expected_lines),
        at(&actual_lines),
    );
}

/// The JSON pointer of the first difference between two values, with both sides.
fn first_difference(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(left), Value::Object(right)) => {
            let mut keys: Vec<&String> = left.keys().chain(right.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let (left, right) = (left.get(key), right.get(key));
                let path = format!("{path}/{key}");
                match (left, right) {
                    (Some(left), Some(right)) => first_difference(left, right, &path),
                    _ => {
                        let shown = |value: Option<&Value>| {
                            value.map_or_else(|| "(absent)".to_string(), Value::to_string)
                        };
                        Some(format!(
                            "{path}: expected {}, actual {}",
                            shown(left),
                            shown(right)
                        ))
                    }
                }
            })
        }
        (Value::Array(left), Value::Array(right)) if left.len() == right.len() => left
            .iter()
            .zip(right)
            .enumerate()
            .find_map(|(index, (left, right))| {
                first_difference(left, right, &format!("{path}/{index}"))
            }),
        _ if expected == actual => None,
        _ => Some(format!("{path}: expected {expected}, actual {actual}")),
    }
}

#[test]
fn golden_replay_gives_the_recorded_findings_byte_for_byte() {
    let transitions = transitions();
    let replayed = lines(&transitions, transition_json);
    let records = lines(&transitions, record);
    let dir = golden_dir();
    if std::env::var_os("DRIFT_SENTINEL_BLESS_GOLDEN").is_some() {
        std::fs::write(dir.join("expected.jsonl"), &replayed).expect("write expected.jsonl");
        std::fs::write(dir.join("records.jsonl"), &records).expect("write records.jsonl");
        eprintln!("golden: wrote {} transitions", transitions.len());
    }
    let read = |file: &str| {
        std::fs::read_to_string(dir.join(file)).unwrap_or_else(|error| panic!("{file}: {error}"))
    };
    assert_same("expected.jsonl", &read("expected.jsonl"), &replayed);
    assert_same("records.jsonl", &read("records.jsonl"), &records);
    // The corpus keeps every class at work: a regenerated golden in which one never fires
    // protects nothing of that class.
    for class in drift_core::classify::classes::ids() {
        if class == drift_core::classify::classes::REMEDIATION_FIGHT {
            // Found by the service's remediator only, which replay never runs (`replay` never
            // remediates); `remediation_fight.rs` tests it through the pipeline.
            continue;
        }
        if class == drift_core::classify::classes::TRAFFIC_SHARE_DRIFT {
            // Judged on Prometheus' observations, which recorded events do not hold;
            // `traffic.rs` tests it on the engine and against a real Prometheus.
            continue;
        }
        assert!(
            transitions
                .iter()
                .any(|transition| transition.drift.class == class
                    && transition.drift.state == drift_model::DriftState::Firing),
            "no {class} drift fires in the golden replay"
        );
    }
}

#[test]
fn a_delta_line_is_its_base_with_the_ops_applied() {
    let text = concat!(
        r#"{"specversion":"1.0","id":"a","data":{"metadata":{"name":"x","labels":{"k":"v"}},"list":[1,2]}}"#,
        "\n",
        r#"{"base":0,"ops":[[["id"],"b"],[["data","list",1],3],[["data","metadata","labels"]],[["data","new"],{"n":1}]]}"#,
        "\n"
    );
    let events = expand("test", text);
    assert_eq!(
        events[1],
        json!({"specversion": "1.0", "id": "b",
               "data": {"metadata": {"name": "x"}, "list": [1, 3], "new": {"n": 1}}})
    );
    assert_eq!(events[0]["id"], "a", "the base is left as it was");
}
