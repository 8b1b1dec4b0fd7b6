//! A ConfigMap's `data` kept as text (BENCHMARKS.md, issue 28): an update that repeats the text
//! keeps the state's values (not parsed again), the same values written another way are no
//! change, and a changed value still gets its exact before and after.

use std::sync::Arc;

use drift_core::classify::{Engine, ObjectState};
use drift_core::decode::{self, ApiServerEvent, ClusterNames, Decoded};
use drift_model::{Millis, ObjectKey};
use serde_json::{json, Value};

use crate::scenario::{config_autoscaler, written_by, T0};

/// One binary-mode request (the Broker's) whose body is `text` as given.
fn event(id: u64, text: &str) -> ApiServerEvent {
    let mut headers = http::HeaderMap::new();
    for (name, value) in [
        ("ce-specversion", "1.0".to_string()),
        ("ce-id", format!("event-{id}")),
        ("ce-source", "https://10.96.0.1:443".to_string()),
        (
            "ce-type",
            "dev.knative.apiserver.resource.update".to_string(),
        ),
        ("content-type", "application/json".to_string()),
    ] {
        headers.insert(name, http::HeaderValue::from_str(&value).unwrap());
    }
    let clusters = ClusterNames {
        default: "prod".into(),
        by_source: Default::default(),
    };
    match decode::decode_request(&headers, text.as_bytes(), &clusters)
        .unwrap_or_else(|error| panic!("{error}"))
        .remove(0)
    {
        Decoded::ApiServer(event) => *event,
        other => panic!("{other:?}"),
    }
}

struct World {
    engine: Engine,
    now: Millis,
    next: u64,
}

impl World {
    fn new() -> World {
        World::with_config("")
    }

    fn with_config(yaml: &str) -> World {
        let config = drift_core::config::load_str(yaml, &|_| None).unwrap();
        World {
            engine: Engine::new(Arc::new(config.rules.compile())),
            now: T0,
            next: 0,
        }
    }

    /// Applies the object `text`; the states written (content changes) and the transitions.
    fn send(&mut self, text: &str) -> (usize, Vec<String>) {
        self.next += 1;
        self.now += 1000;
        let event = event(self.next, text);
        self.engine.begin();
        self.engine.tick(self.now);
        self.engine.apply(&event, self.now);
        let changes = self.engine.changes();
        let moves = changes
            .transitions
            .iter()
            .map(|transition| {
                format!(
                    "{} {}",
                    transition.drift.class,
                    transition.drift.state.as_str()
                )
            })
            .collect();
        (changes.objects.len(), moves)
    }

    fn data(&self) -> Arc<decode::DataMap> {
        self.data_of("cm-autoscaler-uid")
    }

    fn data_of(&self, uid: &str) -> Arc<decode::DataMap> {
        let state = self.state(uid);
        Arc::clone(state.data.as_ref().expect("a ConfigMap keeps its data"))
    }

    /// The state of the object `uid` of cluster `prod`.
    fn state(&self, uid: &str) -> &ObjectState {
        let key = ObjectKey {
            cluster: "prod".into(),
            uid: uid.into(),
        };
        self.engine.graph().get(&key).expect("tracked")
    }
}

/// `object` as text with its `resourceVersion` set and Argo-like churn: only a write time moves.
fn text(object: &Value, version: u64, time: &str) -> String {
    let mut object = object.clone();
    object["metadata"]["resourceVersion"] = json!(version.to_string());
    object["metadata"]["managedFields"][0]["time"] = json!(time);
    serde_json::to_string(&object).unwrap()
}

/// The same object with its `data` written another way: members in reverse order, `/` escaped.
fn rewritten(text: &str, object: &Value) -> String {
    let data = serde_json::to_string(&object["data"]).unwrap();
    let members: Vec<String> = object["data"]
        .as_object()
        .unwrap()
        .iter()
        .rev()
        .map(|(key, value)| {
            format!(
                "{}:{}",
                serde_json::to_string(key).unwrap(),
                serde_json::to_string(value).unwrap().replace('/', "\\/")
            )
        })
        .collect();
    let other = format!("{{{}}}", members.join(","));
    assert_ne!(other, data);
    assert!(text.contains(&data));
    text.replace(&data, &other)
}

/// A team's own ConfigMap in `team-a` (the Knative fixture renamed: its managers and shape).
fn team_config_map(name: &str, uid: &str, data: Value) -> Value {
    let mut object = config_autoscaler();
    object["metadata"]["name"] = json!(name);
    object["metadata"]["namespace"] = json!("team-a");
    object["metadata"]["uid"] = json!(uid);
    object["data"] = data;
    object
}

#[test]
fn a_repeated_data_text_keeps_the_values_and_other_spellings_are_no_change() {
    let mut world = World::new();
    let mut shipped = config_autoscaler();
    // Keys set as a team sets them (the fixture ships only `_example`).
    shipped["data"]["enable-scale-to-zero"] = json!("true");
    shipped["data"]["stable-window"] = json!("60s");
    let (written, moves) = world.send(&text(&shipped, 1000, "2023-10-01T00:00:00Z"));
    assert_eq!((written, moves.len()), (1, 0));
    // Read by a class or not, the values are the first event's from here on.
    let first = world.data();
    let _ = first.map();

    // Only a write time moved: no content change, and the state holds the same values.
    let (written, moves) = world.send(&text(&shipped, 1001, "2023-10-01T00:01:00Z"));
    assert_eq!((written, moves), (0, Vec::<String>::new()));
    assert!(Arc::ptr_eq(&first, &world.data()), "values kept");

    // The same values, spelled another way: still no content change, nothing fires.
    let again = text(&shipped, 1002, "2023-10-01T00:02:00Z");
    let (written, moves) = world.send(&rewritten(&again, &shipped));
    assert_eq!((written, moves), (0, Vec::<String>::new()));
    assert_eq!(*world.data(), *first);

    // A real change by hand: a content change, the exact key and values.
    let mut edited = shipped.clone();
    edited["data"]["min-scale"] = json!("1");
    written_by(
        &mut edited,
        "kubectl-edit",
        "Update",
        json!({"f:data": {"f:min-scale": {}}}),
        "2023-10-09T22:00:00Z",
    );
    let (written, moves) = world.send(&text(&edited, 1003, "2023-10-01T00:02:00Z"));
    assert_eq!(written, 1);
    assert!(
        moves.contains(&"config_drift firing".to_string()),
        "{moves:?}"
    );
    assert_eq!(world.data().get("min-scale").map(String::as_str), Some("1"));
    let drift = world
        .engine
        .open_drifts()
        .find(|drift| drift.class == "config_drift")
        .unwrap();
    assert!(
        drift.evidence.summary.contains("min-scale added (1)")
            && drift.evidence.summary.contains("kubectl-edit"),
        "{}",
        drift.evidence.summary
    );
}

/// A team's own ConfigMap, which no class reads values of unless they change: its values are
/// never parsed, not to store the state either (the row keeps the text as received), and a
/// restore from that row gives the same values.
#[test]
fn an_ordinary_config_map_is_never_parsed_while_its_data_repeats() {
    let mut world = World::new();
    let settings = team_config_map(
        "app-settings",
        "cm-settings-uid",
        json!({"url": "https://config.example.com/a?b=c", "tier": "standard"}),
    );
    let (written, _) = world.send(&text(&settings, 1000, "2023-10-01T00:00:00Z"));
    assert_eq!(written, 1);
    for step in 1..5u64 {
        let (written, moves) = world.send(&text(
            &settings,
            1000 + step,
            &format!("2023-10-01T00:0{step}:00Z"),
        ));
        assert_eq!((written, moves), (0, Vec::<String>::new()));
    }
    let data = world.data_of("cm-settings-uid");
    assert!(!data.is_parsed(), "nothing read the values");
    // The stored row holds the text; reading it back gives the values.
    let state = world.state("cm-settings-uid").clone();
    let row = drift_core::classify::stored::encode(&state).unwrap();
    assert!(!data.is_parsed(), "written without parsing");
    let restored = drift_core::classify::stored::decode(&row).unwrap();
    assert_eq!(
        restored.data.unwrap().map(),
        &serde_json::from_value::<std::collections::BTreeMap<String, String>>(
            settings["data"].clone()
        )
        .unwrap()
    );
    // A row whose data is not an object of strings is refused, not read as empty.
    let bad = row.replace(r#""tier":"standard""#, r#""tier":7"#);
    assert_ne!(bad, row);
    let error = drift_core::classify::stored::decode(&bad).unwrap_err();
    assert!(error.to_string().contains("expected a string"), "{error}");
}

/// A state weighs what it holds: the data's text as received (Go's encoder writes `<` as
/// `\u003c`, six bytes for one) and its values once parsed; a repeated key's earlier values are
/// not held at all.
#[test]
fn a_config_map_weighs_its_text_and_holds_no_repeated_key() {
    let mut world = World::new();
    let page = team_config_map(
        "landing-page",
        "cm-page-uid",
        json!({"index.html": "<".repeat(1000)}),
    );
    let escaped = text(&page, 1000, "2023-10-01T00:00:00Z")
        .replace(&"<".repeat(1000), &"\\u003c".repeat(1000));
    assert_eq!(world.send(&escaped).0, 1);
    let state = world.state("cm-page-uid");
    let held = state.data.as_ref().unwrap();
    assert_eq!(held.text().len(), 6000 + r#"{"index.html":""}"#.len());
    assert!(
        state.weight() >= held.text().len() + 1000,
        "{}",
        state.weight()
    );
    assert_eq!(held.map()["index.html"], "<".repeat(1000));

    // The same key twice: only the last value is held (the text is the map's).
    let big = "x".repeat(100_000);
    let repeated = text(&page, 1001, "2023-10-01T00:01:00Z").replace(
        &format!(r#""index.html":"{}""#, "<".repeat(1000)),
        &format!(r#""index.html":"{big}","index.html":"small""#),
    );
    assert!(repeated.contains(&big));
    world.send(&repeated);
    let state = world.state("cm-page-uid");
    assert_eq!(
        state.data.as_ref().unwrap().text(),
        r#"{"index.html":"small"}"#
    );
    assert!(state.weight() < 10_000, "{}", state.weight());
}

/// A team invariant on ConfigMaps that reads their labels, not their values, does not parse the
/// values; one that reads them judges them.
#[test]
fn an_invariant_parses_a_config_maps_values_only_when_it_reads_them() {
    let rules = |expression: &str| {
        format!(
            "rules:\n  invariants:\n    - name: owned\n      match: {{apiVersion: v1, kind: ConfigMap}}\n      expression: \"{expression}\"\n      message: broken\n"
        )
    };
    let mut settings = team_config_map(
        "app-settings",
        "cm-settings-uid",
        json!({"tier": "standard"}),
    );
    settings["metadata"]["labels"] = json!({"team": "a"});

    let mut labels_only = World::with_config(&rules("has(object.metadata.labels.team)"));
    labels_only.send(&text(&settings, 1000, "2023-10-01T00:00:00Z"));
    labels_only.send(&text(&settings, 1001, "2023-10-01T00:01:00Z"));
    assert!(!labels_only.data_of("cm-settings-uid").is_parsed());

    let mut values = World::with_config(&rules("object.data.tier == 'premium'"));
    let (_, moves) = values.send(&text(&settings, 1000, "2023-10-01T00:00:00Z"));
    assert!(values.data_of("cm-settings-uid").is_parsed());
    assert!(
        moves.iter().any(|line| line.starts_with("invariant ")),
        "{moves:?}"
    );
}
