//! The invariant library: the ten rules of `examples/invariants/knative.yaml` (shipped commented
//! out in `config/drift-sentinel.yaml`) on Knative objects from `tests/fixtures/knative`.
//!
//! * For every rule, objects that hold it and objects that break it, with the exact verdict
//!   (and the message where it names something). The objects are the verbatim captures
//!   (`serving/`, `eventing/`, `configmaps/`), the objects written from Knative's sources
//!   (`derived/`), and, where no capture breaks (or keeps) a rule, a capture with a documented
//!   edit (`derived/edited/`, see `derived/README.md`).
//! * Every rule on every fixture object it selects gives a verdict, never an evaluation error: a
//!   rule that fails on real objects would be a bad library rule.
//! * The edited fixtures are their sources plus the documented edit, and nothing else.
//! * The sample config's commented block, uncommented, is the library.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drift_core::classify::invariants::{judge_object, Invariant, Verdict};
use drift_core::config::load_rules_file;
use drift_core::decode::{parse_object, KubeObject};
use serde_json::{json, Value};

use crate::support::fixture_path;

const LIBRARY: &str = "examples/invariants/knative.yaml";
const SAMPLE_CONFIG: &str = "config/drift-sentinel.yaml";

// Verbatim captures (tests/fixtures/knative/README.md says where each comes from).
const TRIGGERS: &str = "eventing/redhat-developer-vscode-knative__test-eventingTree-trigger.json";
const BROKERS: &str =
    "eventing/redhat-developer-vscode-knative__test-eventingTree-broker__BrokerList.yaml";
const SOURCES: &str = "eventing/redhat-developer-vscode-knative__test-eventingTree-sourceList__SourceList-PingSource-MinimumReplicasUnavailable.yaml";
const SINK_NOT_FOUND: &str = "eventing/redhat-developer-intellij-knative__src-test-resources-kn-sourcesList__ApiServerSource-SinkNotFound.yaml";
const RGUSKE_REVISION: &str =
    "serving/rguske-github-io__knative-serving-unwrapped__revision-knative-webapp-00001.yaml";
const GREETER: &str =
    "serving/openshift-labs-learn-katacoda__serverless-05-knative-client__ksvc-greeter.yaml";
const GREETER_REVISION: &str = "serving/openshift-labs-learn-katacoda__serverless-05-knative-client__revision-greeter-7cqzq-legacy-imageDigest.yaml";
const FAILED_REVISION: &str = "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceFailedRevisionRevisionList.yaml";
const SERVICES: &str =
    "serving/redhat-developer-vscode-knative__test-servingTree-multipleServiceServicesList.yaml";
const CONFIG_AUTOSCALER: &str =
    "configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml";
const CONFIG_DEFAULTS: &str =
    "configmaps/knative-serving__config-core-configmaps__config-defaults.yaml";
const EVENTING_FEATURES: &str =
    "configmaps/knative-eventing__config-core-configmaps__config-features.yaml";

fn repo(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn library() -> Vec<Invariant> {
    load_rules_file(&repo(LIBRARY)).expect("the library compiles")
}

fn rule(name: &str) -> Invariant {
    library()
        .into_iter()
        .find(|rule| rule.name == name)
        .unwrap_or_else(|| panic!("no rule {name} in the library"))
}

/// The documents of a fixture file as written: a List's items one by one; the InMemoryChannel
/// README block gets the `annotations:` line it lacks (see the fixtures README).
fn documents_in(path: &Path) -> Vec<Value> {
    let mut text = std::fs::read_to_string(path).expect("fixture exists");
    if path.to_string_lossy().contains("InMemoryChannel-demo") {
        text = text.replacen("metadata:\n", "metadata:\n  annotations:\n", 1);
    }
    let document: Value = if path.extension().is_some_and(|ext| ext == "json") {
        serde_json::from_str(&text).expect("fixture is JSON")
    } else {
        serde_saphyr::from_str(&text).expect("fixture is YAML")
    };
    match document.get("items") {
        Some(Value::Array(items)) => items.clone(),
        _ => vec![document],
    }
}

/// The objects of a fixture file as the API server returns them: a manifest as shipped (the
/// default ConfigMaps) gets the `uid` and `resourceVersion` every stored object has.
pub(crate) fn objects_in(path: &Path) -> Vec<Value> {
    let mut objects = documents_in(path);
    for object in &mut objects {
        let metadata = &mut object["metadata"];
        if metadata.get("uid").is_none() {
            let name = metadata["name"].as_str().unwrap_or_default().to_string();
            metadata["uid"] = json!(format!("uid-of-{name}"));
            metadata["resourceVersion"] = json!("1");
        }
    }
    objects
}

/// The one object of `kind` named `name` in a fixture file.
fn fixture(file: &str, kind: &str, name: &str) -> Value {
    let mut found: Vec<Value> = objects_in(&fixture_path(file))
        .into_iter()
        .filter(|object| object["kind"] == kind && object["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "{file}: {kind}/{name}");
    found.remove(0)
}

fn decoded(object: Value) -> KubeObject {
    parse_object(object).expect("a valid Kubernetes object")
}

/// What the rule `name` says about an object (None: it does not select it).
fn judge(name: &str, object: Value) -> Option<Verdict> {
    judge_object(&rule(name), "default", &decoded(object))
}

fn held() -> Option<Verdict> {
    Some(Verdict::Held)
}

fn broken(message: &str) -> Option<Verdict> {
    Some(Verdict::Broken(message.to_string()))
}

/// A rule, a fixture object (file, kind, name) and the rule's verdict on it.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<Verdict>,
);

/// Every rule is held and broken by fixture objects.
fn cases() -> Vec<Case> {
    vec![
        // Triggers and Brokers: the 2021 captures set no delivery; no capture sets a dead-letter
        // sink, so the holding ones are the current-shape objects of drift-sentinel's own path
        // (k8s/), written from Knative's sources (derived/).
        (
            "trigger-dead-letter-sink",
            TRIGGERS,
            "Trigger",
            "example-trigger0",
            broken("the Trigger sets no spec.delivery.deadLetterSink"),
        ),
        (
            "trigger-dead-letter-sink",
            "derived/trigger-ready.yaml",
            "Trigger",
            "drift-sentinel",
            held(),
        ),
        (
            "broker-dead-letter-sink",
            BROKERS,
            "Broker",
            "example-broker0",
            broken("the Broker sets no spec.delivery.deadLetterSink"),
        ),
        (
            "broker-dead-letter-sink",
            "derived/broker-ready.yaml",
            "Broker",
            "drift-sentinel",
            held(),
        ),
        // The spec names a sink that does not resolve: the rule holds (the spec is what it
        // reads); event_delivery_broken reports the unresolved sink.
        (
            "broker-dead-letter-sink",
            "derived/broker-dead-letter-sink-unresolved.yaml",
            "Broker",
            "drift-sentinel",
            held(),
        ),
        // Images: a version tag (`:v1`, `:quarkus`) holds; `quay.io/rhdevelopers` has no tag,
        // which Knative resolves as `:latest` (the capture's own error message says so).
        (
            "no-mutable-image-tags",
            RGUSKE_REVISION,
            "Revision",
            "knative-webapp-00001",
            held(),
        ),
        (
            "no-mutable-image-tags",
            GREETER_REVISION,
            "Revision",
            "greeter-7cqzq",
            held(),
        ),
        (
            "no-mutable-image-tags",
            FAILED_REVISION,
            "Revision",
            "example-2fvz4",
            broken("untagged or :latest image in user-container (quay.io/rhdevelopers)"),
        ),
        // Every captured Revision runs with Knative's default containerConcurrency 0.
        (
            "container-concurrency-bounded",
            RGUSKE_REVISION,
            "Revision",
            "knative-webapp-00001",
            broken("containerConcurrency is 0 (unlimited), not 1 to 1000"),
        ),
        (
            "container-concurrency-bounded",
            GREETER_REVISION,
            "Revision",
            "greeter-7cqzq",
            broken("containerConcurrency is not set (unlimited)"),
        ),
        (
            "container-concurrency-bounded",
            "derived/edited/revision-knative-webapp-00001-container-concurrency-100.yaml",
            "Revision",
            "knative-webapp-00001",
            held(),
        ),
        // Scale bounds: no captured Service sets them.
        ("scale-bounds-sane", GREETER, "Service", "greeter", held()),
        (
            "scale-bounds-sane",
            "derived/edited/service-greeter-critical-min-scale-1.yaml",
            "Service",
            "greeter",
            held(),
        ),
        (
            "scale-bounds-sane",
            "derived/edited/service-greeter-scale-bounds-inverted.yaml",
            "Service",
            "greeter",
            broken("min-scale 5 is above max-scale 2"),
        ),
        (
            "critical-services-keep-warm",
            GREETER,
            "Service",
            "greeter",
            None,
        ),
        (
            "critical-services-keep-warm",
            "derived/edited/service-greeter-critical-min-scale-1.yaml",
            "Service",
            "greeter",
            held(),
        ),
        (
            "critical-services-keep-warm",
            "derived/edited/service-greeter-critical.yaml",
            "Service",
            "greeter",
            broken("may scale to zero: set autoscaling.knative.dev/min-scale to 1 or more"),
        ),
        // Every captured Service is public over plain http.
        (
            "public-services-use-tls",
            GREETER,
            "Service",
            "greeter",
            broken("public URL http://greeter.knativetutorial.example.com is not https"),
        ),
        (
            "public-services-use-tls",
            SERVICES,
            "Service",
            "aaa",
            broken(
                "public URL http://aaa-a-serverless-example.apps.devcluster.openshift.com is not \
                 https",
            ),
        ),
        (
            "public-services-use-tls",
            "derived/edited/service-greeter-https.yaml",
            "Service",
            "greeter",
            held(),
        ),
        (
            "public-services-use-tls",
            "derived/edited/service-greeter-cluster-local.yaml",
            "Service",
            "greeter",
            held(),
        ),
        (
            "broker-class-approved",
            BROKERS,
            "Broker",
            "example-broker0",
            held(),
        ),
        (
            "broker-class-approved",
            "derived/broker-ready.yaml",
            "Broker",
            "drift-sentinel",
            held(),
        ),
        (
            "broker-class-approved",
            "derived/edited/broker-example-broker0-class-rabbitmq.yaml",
            "Broker",
            "example-broker0",
            broken("broker class RabbitMQBroker is not approved"),
        ),
        // Sources of every kind with their sink resolved; the intellij capture's sink Service
        // never existed, so it has no sinkUri.
        (
            "sources-have-resolved-sink",
            SOURCES,
            "ApiServerSource",
            "example-source-apiserver0",
            held(),
        ),
        (
            "sources-have-resolved-sink",
            SOURCES,
            "PingSource",
            "example-source-ping0",
            held(),
        ),
        (
            "sources-have-resolved-sink",
            SOURCES,
            "SinkBinding",
            "example-source-binding0",
            held(),
        ),
        (
            "sources-have-resolved-sink",
            SINK_NOT_FOUND,
            "ApiServerSource",
            "example-source-apiserver0",
            broken("the source has no status.sinkUri: its sink has not resolved"),
        ),
        // A sink lost later keeps its last sinkUri (MarkNoSink does not clear it): the rule
        // holds, event_delivery_broken reports SinkProvided=False.
        (
            "sources-have-resolved-sink",
            "derived/pingsource-sink-not-found.yaml",
            "PingSource",
            "test-ping-source",
            held(),
        ),
        // config-autoscaler as shipped: only `_example`, so scale to zero is on by default.
        (
            "scale-to-zero-stays-enabled",
            CONFIG_AUTOSCALER,
            "ConfigMap",
            "config-autoscaler",
            held(),
        ),
        (
            "scale-to-zero-stays-enabled",
            CONFIG_DEFAULTS,
            "ConfigMap",
            "config-defaults",
            held(),
        ),
        (
            "scale-to-zero-stays-enabled",
            EVENTING_FEATURES,
            "ConfigMap",
            "config-features",
            None,
        ),
        (
            "scale-to-zero-stays-enabled",
            "derived/edited/configmap-config-autoscaler-scale-to-zero-disabled.yaml",
            "ConfigMap",
            "config-autoscaler",
            broken("config-autoscaler turns enable-scale-to-zero off: no Revision scales to zero"),
        ),
    ]
}

#[test]
fn every_rule_holds_and_breaks_on_fixture_objects_with_the_exact_verdict() {
    let mut seen: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for (name, file, kind, object, expected) in cases() {
        let verdict = judge(name, fixture(file, kind, object));
        assert_eq!(verdict, expected, "{name} on {kind}/{object} in {file}");
        let entry = seen.entry(name.to_string()).or_default();
        entry.0 |= verdict == held();
        entry.1 |= matches!(verdict, Some(Verdict::Broken(_)));
    }
    let names: Vec<String> = library().into_iter().map(|rule| rule.name).collect();
    assert_eq!(names.len(), 10);
    for name in names {
        assert_eq!(
            seen.get(&name),
            Some(&(true, true)),
            "{name}: held and broken"
        );
    }
}

/// Every fixture file holding Kubernetes objects (not the CloudEvents in `events/`).
fn fixture_files() -> Vec<PathBuf> {
    fn walk(directory: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("events") {
                    walk(&path, files);
                }
            } else if path
                .extension()
                .is_some_and(|ext| ext == "yaml" || ext == "json")
            {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&fixture_path(""), &mut files);
    files.sort();
    files
}

#[test]
fn no_rule_fails_on_any_fixture_object_it_selects() {
    let rules = library();
    let mut failures = Vec::new();
    let mut verdicts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let files = fixture_files();
    assert!(files.len() > 80, "{} fixture files", files.len());
    for path in &files {
        for object in objects_in(path) {
            let what = format!(
                "{}/{} in {}",
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default(),
                path.strip_prefix(fixture_path("")).unwrap().display()
            );
            let object = parse_object(object).unwrap_or_else(|error| panic!("{what}: {error}"));
            for rule in &rules {
                let counts = verdicts.entry(rule.name.as_str()).or_default();
                match judge_object(rule, "default", &object) {
                    None => {}
                    Some(Verdict::Held) => counts.0 += 1,
                    Some(Verdict::Broken(_)) => counts.1 += 1,
                    Some(Verdict::Failed(error)) => {
                        failures.push(format!("{} on {what}: {error}", rule.name));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    for rule in &rules {
        let (held, broken) = verdicts[rule.name.as_str()];
        assert!(
            held > 0 && broken > 0,
            "{}: {held} held, {broken} broken",
            rule.name
        );
    }
}

/// The cases the fixtures lack, each a fixture with one edit.
#[test]
fn the_rules_mean_what_knative_means() {
    let revision = || fixture(RGUSKE_REVISION, "Revision", "knative-webapp-00001");
    let with_image = |image: &str| {
        let mut object = revision();
        object["spec"]["containers"][0]["image"] = json!(image);
        object
    };
    let registry = "projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp";
    assert_eq!(
        judge(
            "no-mutable-image-tags",
            with_image(&format!("{registry}:latest"))
        ),
        broken(&format!(
            "untagged or :latest image in user-container ({registry}:latest)"
        ))
    );
    // A registry's port is not a tag.
    assert_eq!(
        judge(
            "no-mutable-image-tags",
            with_image("registry.example.com:5000/shop/cart")
        ),
        broken("untagged or :latest image in user-container (registry.example.com:5000/shop/cart)")
    );
    for pinned in [
        "registry.example.com:5000/shop/cart:1.4.2".to_string(),
        // The digest Knative resolved the rguske Revision's `:v1` to.
        format!("{registry}@sha256:fd918309bb55c5a0d8877aa3c2786da5cd12e30408accadddcc0b778d43b4019"),
        format!("{registry}:latest@sha256:fd918309bb55c5a0d8877aa3c2786da5cd12e30408accadddcc0b778d43b4019"),
    ] {
        assert_eq!(judge("no-mutable-image-tags", with_image(&pinned)), held(), "{pinned}");
    }
    // The message names the offending containers only.
    let mut sidecar = revision();
    sidecar["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "envoy", "image": "docker.io/envoyproxy/envoy"}));
    assert_eq!(
        judge("no-mutable-image-tags", sidecar),
        broken("untagged or :latest image in envoy (docker.io/envoyproxy/envoy)")
    );

    for (concurrency, expected) in [
        (1, held()),
        (1000, held()),
        (1001, broken("containerConcurrency is 1001, not 1 to 1000")),
    ] {
        let mut object = revision();
        object["spec"]["containerConcurrency"] = json!(concurrency);
        assert_eq!(judge("container-concurrency-bounded", object), expected);
    }

    let greeter = || fixture(GREETER, "Service", "greeter");
    let scaled = |annotations: Value, labels: Value| {
        let mut object = greeter();
        object["spec"]["template"]["metadata"]["annotations"] = annotations;
        object["metadata"]["labels"] = labels;
        object
    };
    let critical = json!({"tier": "critical"});
    for (annotations, expected) in [
        // max-scale 0 is unlimited.
        (
            json!({"autoscaling.knative.dev/min-scale": "3", "autoscaling.knative.dev/max-scale": "0"}),
            held(),
        ),
        (
            json!({"autoscaling.knative.dev/min-scale": "2", "autoscaling.knative.dev/max-scale": "2"}),
            held(),
        ),
        (json!({"autoscaling.knative.dev/min-scale": "3"}), held()),
        (json!({"autoscaling.knative.dev/max-scale": "3"}), held()),
        (
            json!({"autoscaling.knative.dev/min-scale": "10", "autoscaling.knative.dev/max-scale": "9"}),
            broken("min-scale 10 is above max-scale 9"),
        ),
    ] {
        assert_eq!(
            judge("scale-bounds-sane", scaled(annotations.clone(), json!({}))),
            expected,
            "{annotations}"
        );
    }
    assert_eq!(
        judge(
            "critical-services-keep-warm",
            scaled(
                json!({"autoscaling.knative.dev/min-scale": "0"}),
                critical.clone()
            )
        ),
        broken("may scale to zero: set autoscaling.knative.dev/min-scale to 1 or more")
    );
    assert_eq!(
        judge(
            "critical-services-keep-warm",
            scaled(json!({"autoscaling.knative.dev/min-scale": "2"}), critical)
        ),
        held()
    );

    // Cluster-local as Knative reconciles it: the label, and the Service's URL the internal one.
    let mut local = greeter();
    local["metadata"]["labels"] = json!({"networking.knative.dev/visibility": "cluster-local"});
    local["status"]["url"] = json!("http://greeter.knativetutorial.svc.cluster.local");
    assert_eq!(judge("public-services-use-tls", local), held());
    // Not reconciled yet: no URL to judge.
    let mut created = greeter();
    created.as_object_mut().unwrap().remove("status");
    assert_eq!(judge("public-services-use-tls", created), held());

    let broker = || fixture(BROKERS, "Broker", "example-broker0");
    let mut kafka = broker();
    kafka["metadata"]["annotations"]["eventing.knative.dev/broker.class"] = json!("Kafka");
    assert_eq!(judge("broker-class-approved", kafka), held());
    let mut unclassed = broker();
    unclassed["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("eventing.knative.dev/broker.class");
    assert_eq!(
        judge("broker-class-approved", unclassed),
        broken("no eventing.knative.dev/broker.class annotation")
    );

    // A Trigger with its own delivery but no dead-letter sink.
    let mut retries = fixture(TRIGGERS, "Trigger", "example-trigger0");
    retries["spec"]["delivery"] = json!({"retry": 5, "backoffPolicy": "exponential"});
    assert_eq!(
        judge("trigger-dead-letter-sink", retries),
        broken("the Trigger sets no spec.delivery.deadLetterSink")
    );

    let mut empty = fixture(SOURCES, "PingSource", "example-source-ping0");
    empty["status"]["sinkUri"] = json!("");
    assert_eq!(
        judge("sources-have-resolved-sink", empty),
        broken("the source has no status.sinkUri: its sink has not resolved")
    );

    // Knative reads enable-scale-to-zero with Go's strconv.ParseBool (knative.dev/pkg configmap
    // AsBool), which takes these spellings of false.
    for (value, expected) in [
        ("false", false),
        ("False", false),
        ("FALSE", false),
        ("f", false),
        ("0", false),
        ("true", true),
        ("TRUE", true),
        ("1", true),
    ] {
        let mut config = fixture(CONFIG_AUTOSCALER, "ConfigMap", "config-autoscaler");
        config["data"]["enable-scale-to-zero"] = json!(value);
        let verdict = judge("scale-to-zero-stays-enabled", config);
        assert_eq!(verdict == held(), expected, "{value}: {verdict:?}");
    }
    // The key means something in config-autoscaler only.
    let mut other = fixture(CONFIG_DEFAULTS, "ConfigMap", "config-defaults");
    other["data"]["enable-scale-to-zero"] = json!("false");
    assert_eq!(judge("scale-to-zero-stays-enabled", other), held());
}

/// One edited fixture: its file, its source (file, kind, name) and the edit.
type Edit = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    fn(&mut Value),
);

/// `derived/edited/`: each file is its source with the edit `derived/README.md` documents.
fn edits() -> Vec<Edit> {
    vec![
        (
            "service-greeter-https.yaml",
            GREETER,
            "Service",
            "greeter",
            |object| {
                object["metadata"]["resourceVersion"] = json!("35301");
                object["status"]["url"] = json!("https://greeter.knativetutorial.example.com");
            },
        ),
        (
            "service-greeter-cluster-local.yaml",
            GREETER,
            "Service",
            "greeter",
            |object| {
                object["metadata"]["resourceVersion"] = json!("35302");
                object["metadata"]["labels"] =
                    json!({"networking.knative.dev/visibility": "cluster-local"});
            },
        ),
        (
            "service-greeter-critical.yaml",
            GREETER,
            "Service",
            "greeter",
            |object| {
                object["metadata"]["resourceVersion"] = json!("35303");
                object["metadata"]["labels"] = json!({"tier": "critical"});
            },
        ),
        (
            "service-greeter-critical-min-scale-1.yaml",
            GREETER,
            "Service",
            "greeter",
            |object| {
                object["metadata"]["resourceVersion"] = json!("35304");
                object["metadata"]["generation"] = json!(3);
                object["metadata"]["labels"] = json!({"tier": "critical"});
                object["spec"]["template"]["metadata"]["annotations"] = json!({
                    "autoscaling.knative.dev/max-scale": "3",
                    "autoscaling.knative.dev/min-scale": "1"
                });
            },
        ),
        (
            "service-greeter-scale-bounds-inverted.yaml",
            GREETER,
            "Service",
            "greeter",
            |object| {
                object["metadata"]["resourceVersion"] = json!("35305");
                object["metadata"]["generation"] = json!(3);
                object["spec"]["template"]["metadata"]["annotations"] = json!({
                    "autoscaling.knative.dev/max-scale": "2",
                    "autoscaling.knative.dev/min-scale": "5"
                });
            },
        ),
        (
            "revision-knative-webapp-00001-container-concurrency-100.yaml",
            RGUSKE_REVISION,
            "Revision",
            "knative-webapp-00001",
            |object| object["spec"]["containerConcurrency"] = json!(100),
        ),
        (
            "broker-example-broker0-class-rabbitmq.yaml",
            BROKERS,
            "Broker",
            "example-broker0",
            |object| {
                object["metadata"]["annotations"]["eventing.knative.dev/broker.class"] =
                    json!("RabbitMQBroker");
            },
        ),
        (
            "configmap-config-autoscaler-scale-to-zero-disabled.yaml",
            CONFIG_AUTOSCALER,
            "ConfigMap",
            "config-autoscaler",
            |object| {
                object["metadata"]["uid"] = json!("6a7bb2ef-037e-583b-bef7-0bec9fc9f2e8");
                object["metadata"]["resourceVersion"] = json!("1052");
                object["data"]["enable-scale-to-zero"] = json!("false");
            },
        ),
    ]
}

#[test]
fn edited_fixtures_are_their_sources_with_the_documented_edit() {
    let edits = edits();
    for (file, source, kind, name, edit) in &edits {
        let mut expected: Vec<Value> = documents_in(&fixture_path(source))
            .into_iter()
            .filter(|object| object["kind"] == *kind && object["metadata"]["name"] == *name)
            .collect();
        assert_eq!(expected.len(), 1, "{source}: {kind}/{name}");
        edit(&mut expected[0]);
        let written = documents_in(&fixture_path(&format!("derived/edited/{file}")));
        assert_eq!(written.len(), 1, "derived/edited/{file}: one object");
        if let Some(difference) = first_difference(&written[0], &expected[0], "") {
            panic!("derived/edited/{file} is not {source} with the documented edit: {difference}");
        }
    }
    // Every file there is listed above (and in derived/README.md).
    let mut files: Vec<String> = std::fs::read_dir(fixture_path("derived/edited"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut listed: Vec<String> = edits.iter().map(|edit| edit.0.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed);
    let readme = std::fs::read_to_string(fixture_path("derived/README.md")).unwrap();
    for file in &listed {
        assert!(
            readme.contains(&format!("`edited/{file}`")),
            "{file} in derived/README.md"
        );
    }
}

/// Where two JSON values first differ, as a JSON pointer with both values.
fn first_difference(written: &Value, expected: &Value, at: &str) -> Option<String> {
    match (written, expected) {
        (Value::Object(written), Value::Object(expected)) => {
            let mut keys: Vec<&String> = written.keys().chain(expected.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let (left, right) = (written.get(key), expected.get(key));
                match (left, right) {
                    (Some(left), Some(right)) => {
                        first_difference(left, right, &format!("{at}/{key}"))
                    }
                    _ => Some(format!(
                        "{at}/{key}: the file has {left:?}, the edit gives {right:?}"
                    )),
                }
            })
        }
        (Value::Array(written), Value::Array(expected)) if written.len() == expected.len() => {
            written
                .iter()
                .zip(expected)
                .enumerate()
                .find_map(|(index, (left, right))| {
                    first_difference(left, right, &format!("{at}/{index}"))
                })
        }
        _ if written == expected => None,
        _ => Some(format!(
            "{at}: the file has {written}, the edit gives {expected}"
        )),
    }
}

/// The fields in which two compiled rules differ.
fn differences(left: &Invariant, right: &Invariant) -> Vec<&'static str> {
    let mut fields = Vec::new();
    let checks = [
        ("name", left.name == right.name),
        ("description", left.description == right.description),
        ("match", left.selector == right.selector),
        ("expression", left.condition == right.condition),
        ("message", left.message == right.message),
        ("severity", left.severity == right.severity),
        ("grace", left.grace == right.grace),
    ];
    for (field, same) in checks {
        if !same {
            fields.push(field);
        }
    }
    fields
}

/// The sample config's `# invariants:` block with its comment marks taken off (`  # x` is
/// `  x`, a bare `  #` an empty line), the way a user uncomments it.
fn uncomment_invariants(config: &str) -> String {
    let lines: Vec<&str> = config.lines().collect();
    let start = lines
        .iter()
        .position(|line| *line == "  # invariants:")
        .expect("the sample config has a commented invariants block");
    let mut out: Vec<String> = lines[..start].iter().map(|line| line.to_string()).collect();
    let mut index = start;
    while index < lines.len() && lines[index].starts_with("  #") {
        let line = lines[index];
        out.push(match line.strip_prefix("  # ") {
            Some(rest) => format!("  {rest}"),
            None => String::new(),
        });
        index += 1;
    }
    out.extend(lines[index..].iter().map(|line| line.to_string()));
    out.join("\n")
}

#[test]
fn the_sample_config_ships_the_library_commented_out() {
    let text = std::fs::read_to_string(repo(SAMPLE_CONFIG)).unwrap();
    let shipped = drift_core::config::load_str(&text, &|_| None).expect("the sample loads");
    assert!(shipped.rules.compile().invariants().is_empty());

    let uncommented = uncomment_invariants(&text);
    assert_ne!(uncommented, text);
    let config = drift_core::config::load_str(&uncommented, &|_| None)
        .unwrap_or_else(|error| panic!("the uncommented sample loads: {error}"));
    let rules = config.rules.compile();
    let library = library();
    let names = |rules: &[Invariant]| {
        rules
            .iter()
            .map(|rule| rule.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(rules.invariants()), names(&library));
    assert_eq!(library.len(), 10);
    for (configured, shipped) in rules.invariants().iter().zip(&library) {
        assert!(
            configured == shipped,
            "{}: the sample config and {LIBRARY} differ in {:?}",
            shipped.name,
            differences(configured, shipped)
        );
    }
}
