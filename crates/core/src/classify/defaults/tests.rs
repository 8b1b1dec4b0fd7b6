//! Unit tests of `defaults`.

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

fn service() -> Value {
    json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service",
        "metadata": {"name": "a", "namespace": "n"},
        "spec": {"template": {"spec": {"containers": [{"image": "img"}]}}}})
}

fn value_at<'a>(expectations: &'a [Expectation], path: &str) -> Option<&'a Value> {
    expectations
        .iter()
        .find(|expectation| expectation.path == path)
        .unwrap_or_else(|| panic!("no expectation at {path}"))
        .expected
        .value()
}

#[test]
fn built_in_defaults_without_config_maps() {
    let defaults = KnativeDefaults::default();
    assert!(defaults.sources().iter().all(|source| !source.found));
    let out = defaults.expectations(&service());
    assert_eq!(
        value_at(&out, "/spec/template/spec/timeoutSeconds"),
        Some(&json!(300))
    );
    assert_eq!(
        value_at(&out, "/spec/template/spec/containerConcurrency"),
        Some(&json!(0))
    );
    assert_eq!(
        value_at(&out, "/spec/template/spec/enableServiceLinks"),
        Some(&json!(false))
    );
    assert_eq!(
        value_at(
            &out,
            "/spec/template/spec/containers/0/resources/limits/memory"
        ),
        None
    );
    assert_eq!(
        value_at(&out, "/spec/template/spec/containers/0/securityContext"),
        None
    );
    assert_eq!(
        value_at(&out, "/spec/traffic"),
        Some(&json!([{"latestRevision": true, "percent": 100}]))
    );
    assert_eq!(
        out[0].why,
        "Knative's built-in default for revision-timeout-seconds: knative-serving/config-defaults not found"
    );
}

#[test]
fn config_maps_change_the_defaults() {
    let serving = map(&[
        ("revision-timeout-seconds", "600"),
        ("container-concurrency", "10"),
        ("revision-idle-timeout-seconds", "120"),
        ("revision-memory-limit", "200M"),
        ("enable-service-links", "default"),
    ]);
    // Knative's own spelling; flags are read case-insensitively.
    let features = map(&[("secure-pod-defaults", "Enabled")]);
    let defaults = KnativeDefaults::from_config_maps(|namespace, name| match (namespace, name) {
        ("knative-serving", "config-defaults") => Some(&serving),
        ("knative-serving", "config-features") => Some(&features),
        _ => None,
    });
    let out = defaults.expectations(&service());
    assert_eq!(
        value_at(&out, "/spec/template/spec/timeoutSeconds"),
        Some(&json!(600))
    );
    assert_eq!(
        value_at(&out, "/spec/template/spec/containerConcurrency"),
        Some(&json!(10))
    );
    assert_eq!(
        value_at(&out, "/spec/template/spec/idleTimeoutSeconds"),
        Some(&json!(120))
    );
    assert_eq!(
        value_at(&out, "/spec/template/spec/enableServiceLinks"),
        None
    );
    assert_eq!(
        value_at(
            &out,
            "/spec/template/spec/containers/0/resources/limits/memory"
        ),
        Some(&json!("200M"))
    );
    assert_eq!(
        value_at(&out, "/spec/template/spec/containers/0/securityContext"),
        Some(
            &json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
        )
    );
    assert_eq!(
        out[0].why,
        "Knative's default: revision-timeout-seconds in knative-serving/config-defaults; Knative's built-in 300 is accepted too"
    );
    assert_eq!(
        out[1].why,
        "Knative's default: container-concurrency in knative-serving/config-defaults; Knative's built-in 0 is accepted too"
    );
    // A key the ConfigMap leaves out is Knative's built-in default.
    assert_eq!(
        value_at(
            &out,
            "/spec/template/spec/containers/0/resources/limits/cpu"
        ),
        None
    );
    let cpu = out
        .iter()
        .find(|e| e.path == "/spec/template/spec/containers/0/resources/limits/cpu")
        .unwrap();
    assert_eq!(
        cpu.why,
        "Knative's built-in default: revision-cpu-limit is not set in knative-serving/config-defaults"
    );
}

#[test]
fn a_bad_value_falls_back_and_is_noted() {
    let serving = map(&[("revision-timeout-seconds", "five minutes")]);
    let defaults = KnativeDefaults::from_config_maps(|_, name| {
        (name == "config-defaults").then_some(&serving)
    });
    assert_eq!(
        value_at(
            &defaults.expectations(&service()),
            "/spec/template/spec/timeoutSeconds"
        ),
        Some(&json!(300))
    );
    assert_eq!(
        defaults.sources()[0].notes,
        ["revision-timeout-seconds: \"five minutes\" is not an integer; the built-in 300 is used"]
    );
}

#[test]
fn broker_class_comes_per_namespace_from_config_br_defaults() {
    let config = map(&[(
        "default-br-config",
        "clusterDefault:\n  brokerClass: MTChannelBasedBroker\n  delivery:\n    retry: 10\nnamespaceDefaults:\n  kafka-ns:\n    brokerClass: Kafka\n",
    )]);
    let defaults = KnativeDefaults::from_config_maps(|_, name| {
        (name == "config-br-defaults").then_some(&config)
    });
    let broker = |namespace: &str| {
        json!({"apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
            "metadata": {"name": "default", "namespace": namespace}})
    };
    let class = "/metadata/annotations/eventing.knative.dev~1broker.class";
    let out = defaults.expectations(&broker("apps"));
    assert_eq!(value_at(&out, class), Some(&json!("MTChannelBasedBroker")));
    // Delivery and config are not defaulted here (see `broker`).
    assert!(out.iter().all(|e| e.path == class), "{out:?}");
    let out = defaults.expectations(&broker("kafka-ns"));
    assert_eq!(value_at(&out, class), Some(&json!("Kafka")));
    // Without the ConfigMap the class cannot be told.
    let out = KnativeDefaults::default().expectations(&broker("apps"));
    assert_eq!(out[0].expected, Expected::Unknown);
}

#[test]
fn allow_root_bounded_and_odd_flags_are_read_as_knative_reads_them() {
    let features = map(&[("secure-pod-defaults", "allowrootbounded")]);
    let serving = map(&[("enable-service-links", "True")]);
    let defaults = KnativeDefaults::from_config_maps(|_, name| match name {
        "config-features" => Some(&features),
        "config-defaults" => Some(&serving),
        _ => None,
    });
    let mut service = service();
    service["spec"]["template"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}]);
    let out = defaults.expectations(&service);
    assert_eq!(
        value_at(&out, "/spec/template/spec/containers/0/securityContext"),
        Some(&json!({"allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            "seccompProfile": {"type": "RuntimeDefault"}}))
    );
    assert_eq!(
        value_at(&out, "/spec/template/spec/enableServiceLinks"),
        Some(&json!(true))
    );
    let features = map(&[("secure-pod-defaults", "sometimes")]);
    let defaults = KnativeDefaults::from_config_maps(|_, name| {
        (name == "config-features").then_some(&features)
    });
    assert_eq!(
        value_at(
            &defaults.expectations(&service),
            "/spec/template/spec/containers/0/securityContext"
        ),
        None
    );
    assert_eq!(defaults.sources()[1].notes.len(), 1);
}
