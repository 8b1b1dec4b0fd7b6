//! The built-in defaults against what Knative really does: the field managers recorded in real
//! Knative objects are trusted (people's tools are not), and the shipped configs watch the
//! ConfigMaps the defaults watch.

use std::collections::BTreeSet;
use std::path::Path;

use drift_core::config::{default_trusted_managers, RulesConfig};
use serde_json::Value;

/// Field managers of people's tools: `kn` and kubectl's (`kubectl`, `kubectl-edit`,
/// `kubectl-client-side-apply`, ...).
fn is_a_persons_tool(manager: &str) -> bool {
    manager == "kn" || manager == "kubectl" || manager.starts_with("kubectl-")
}

fn managers_in(value: &Value, found: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(entries)) = map.get("managedFields") {
                for entry in entries {
                    if let Some(manager) = entry["manager"].as_str() {
                        found.insert(manager.to_string());
                    }
                }
            }
            for child in map.values() {
                managers_in(child, found);
            }
        }
        Value::Array(items) => {
            for item in items {
                managers_in(item, found);
            }
        }
        _ => {}
    }
}

/// Every field manager in the recorded Knative objects of `tests/fixtures/knative` (files that do
/// not parse as JSON or YAML, such as event_display text, are skipped).
fn recorded_managers() -> BTreeSet<String> {
    fn walk(directory: &Path, found: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let parsed: Option<Vec<Value>> = match path.extension().and_then(|e| e.to_str()) {
                Some("json") => serde_json::from_str(&text).ok().map(|value| vec![value]),
                Some("jsonl") => text
                    .lines()
                    .filter(|line| !line.trim().is_empty())
                    .map(|line| serde_json::from_str(line).ok())
                    .collect(),
                Some("yaml") | Some("yml") => serde_saphyr::from_multiple(&text).ok(),
                _ => None,
            };
            for document in parsed.unwrap_or_default() {
                managers_in(&document, found);
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/knative"),
        &mut found,
    );
    found
}

#[test]
fn the_knative_controllers_recorded_in_real_objects_are_trusted_and_people_are_not() {
    let trusted: BTreeSet<String> = default_trusted_managers().into_iter().collect();
    let recorded = recorded_managers();
    // Serving's and Eventing's controllers as recorded (mtchannel-broker writes Trigger and
    // Broker status), and people's tools.
    for expected in ["controller", "webhook", "mtchannel-broker", "kn", "kubectl"] {
        assert!(
            recorded.contains(expected),
            "{expected} not recorded: {recorded:?}"
        );
    }
    for manager in &recorded {
        if is_a_persons_tool(manager) {
            assert!(
                !trusted.contains(manager),
                "{manager} is a person's tool, yet trusted"
            );
        } else {
            assert!(
                trusted.contains(manager),
                "{manager} writes real Knative objects (tests/fixtures/knative) and is not a \
                 default trusted manager"
            );
        }
    }
    // The binaries of Eventing's, the in-memory channel's, the networking layers' and the
    // operator's controllers (client-go records a binary's base name): knative/eventing
    // cmd/mtchannel_broker, cmd/in_memory/channel_controller, cmd/in_memory/channel_dispatcher;
    // knative-extensions/net-kourier cmd/kourier; net-istio, net-contour, net-gateway-api and
    // net-certmanager cmd/controller; knative/serving cmd/autoscaler-hpa, cmd/default-domain;
    // knative/operator cmd/operator.
    for binary in [
        "mtchannel_broker",
        "channel_controller",
        "channel_dispatcher",
        "kourier",
        "controller",
        "autoscaler-hpa",
        "default-domain",
        "operator",
    ] {
        assert!(trusted.contains(binary), "{binary} is not trusted");
    }
    assert!(!trusted.iter().any(|manager| is_a_persons_tool(manager)));
}

#[test]
fn the_shipped_configs_watch_the_default_config_maps() {
    let defaults = RulesConfig::default().watched_config_maps;
    for pattern in [
        "knative-serving/config-*",
        "knative-eventing/config-*",
        "knative-eventing/default-ch-webhook",
    ] {
        assert!(
            defaults.iter().any(|default| default == pattern),
            "{pattern}"
        );
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sample: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root.join("config/drift-sentinel.yaml")).unwrap(),
    )
    .unwrap();
    let k8s_documents: Vec<Value> = serde_saphyr::from_multiple(
        &std::fs::read_to_string(root.join("k8s/config.yaml")).unwrap(),
    )
    .unwrap();
    let shipped = k8s_documents
        .iter()
        .find(|document| document["kind"] == "ConfigMap")
        .unwrap();
    let k8s: Value =
        serde_saphyr::from_str(shipped["data"]["config.yaml"].as_str().unwrap()).unwrap();
    for (file, config) in [
        ("config/drift-sentinel.yaml", &sample),
        ("k8s/config.yaml", &k8s),
    ] {
        let listed: Vec<String> =
            serde_json::from_value(config["rules"]["watchedConfigMaps"].clone()).unwrap();
        assert_eq!(listed, defaults, "{file}: rules.watchedConfigMaps");
    }
}
