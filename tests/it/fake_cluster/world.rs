//! The world the drill kit installs (`k8s/drills/*.yaml`) and the catalog
//! `examples/drills/knative.yaml` acts on, as a cluster would hold it once Knative has
//! reconciled it: the kit's manifests with what Knative's webhooks default, and statuses shaped
//! after real objects in `tests/fixtures/knative` (the rguske Revision, the katacoda Service,
//! the vscode-knative Broker and Trigger, `config-autoscaler` as shipped), renamed into
//! namespace `drills`. Every object carries `managedFields` as a `kubectl apply` of the kit and
//! the controllers would leave them, so the sink can attribute what changes next.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::fields;
use crate::support::fixture_yaml;

const NAMESPACE_UID: &str = "5b0c1e44-8d2f-4a51-9c6e-1f2a3b4c5d01";
const SERVING_NAMESPACE_UID: &str = "5b0c1e44-8d2f-4a51-9c6e-1f2a3b4c5d02";
const SERVICE_UID: &str = "0c2ac867-693d-4acc-80a2-df9db8d18201";
const CONFIGURATION_UID: &str = "748fc5d8-79b3-47fa-8311-37d1e60ef101";
const REVISION_UID: &str = "41ae1fe0-86e5-4281-8bc5-f1f31b91fc01";
const DEPLOYMENT_UID: &str = "9d2f6c1e-3b7a-4c0e-8f11-00000000d101";
const BROKER_UID: &str = "98a47794-d263-4a0f-9aa3-f90f0c5c1701";
const TRIGGER_UID: &str = "4d47e9c6-4fa1-4773-b8b3-dd8cd9578901";
const CONFIG_MAP_UID: &str = "2e9f7a10-6c3d-4b8e-a5f4-0c1d2e3f4a01";

/// When the kit was applied, and when the controllers had reconciled it.
const APPLIED: &str = "2026-09-01T09:00:00Z";
const RECONCILED: &str = "2026-09-01T09:00:30Z";
/// Who applied it (`kubectl apply -k k8s/drills/`).
const ADMIN: &str = "kubernetes-admin";
const APPLY: &str = "kubectl-client-side-apply";

/// The digest Knative resolved `ghcr.io/knative/helloworld-go:latest` to (made up: no digest
/// of that image is recorded in the fixtures).
pub(crate) const DIGEST: &str = "ghcr.io/knative/helloworld-go@sha256:5ea96ba4b872685ff4ddb5cd8d1a97ec18c18fae79ee8df0d29f446c5efe5f50";
const QUEUE: &str = "gcr.io/knative-releases/knative.dev/serving/cmd/queue@sha256:0f0c4e8d5b7a3c2e1f9d8b6a4c2e0f1d3b5a7c9e1f3d5b7a9c1e3f5d7b9a1c3e";

/// The drill world, in the order a cluster would have announced it: the `drills` Namespace,
/// Service `hello`, its Revision `hello-00001` and that Revision's Deployment, Broker
/// `default`, Trigger `hello`, then the `knative-serving` Namespace and its
/// `config-autoscaler` (both namespaces labelled `drift-sentinel.dev/drills: "allowed"`).
pub(crate) fn drill_world() -> Vec<Value> {
    let kit_namespace = kit("namespace.yaml").remove(0);
    let mut eventing = kit("eventing.yaml");
    let (broker, trigger) = (eventing.remove(0), eventing.remove(0));
    vec![
        namespace(kit_namespace, NAMESPACE_UID),
        service(kit("hello.yaml").remove(0)),
        revision(),
        deployment(),
        broker_object(broker),
        trigger_object(trigger),
        namespace(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "knative-serving",
                   "labels": {"app.kubernetes.io/name": "knative-serving",
                              "drift-sentinel.dev/drills": "allowed"}}}),
            SERVING_NAMESPACE_UID,
        ),
        config_autoscaler(),
    ]
}

/// The manifests of one file of the drill kit.
fn kit(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("k8s/drills")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("drill kit file");
    serde_saphyr::from_multiple(&text).expect("drill kit YAML")
}

/// `manifest` as `kubectl apply` sends it: with its `last-applied-configuration`.
fn applied(mut manifest: Value) -> Value {
    let last = format!("{}\n", serde_json::to_string(&manifest).expect("json"));
    manifest["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!(last);
    manifest
}

/// `object` as created by `manager` (everything but status), with `status` then written by
/// `status_manager`.
fn created(mut object: Value, uid: &str, manager: &str, status: Option<(&str, Value)>) -> Value {
    object["metadata"]["uid"] = json!(uid);
    object["metadata"]["creationTimestamp"] = json!(APPLIED);
    fields::record(None, &mut object, manager, false, APPLIED);
    if let Some((status_manager, status)) = status {
        let before = object.clone();
        object["status"] = status;
        fields::record(Some(&before), &mut object, status_manager, true, RECONCILED);
    }
    object
}

/// Conditions, all `True`, sorted by type as Knative keeps them.
fn ready(types: &[&str]) -> Value {
    let mut types = types.to_vec();
    types.sort_unstable();
    types
        .iter()
        .map(|kind| json!({"type": kind, "status": "True", "lastTransitionTime": RECONCILED}))
        .collect()
}

fn namespace(manifest: Value, uid: &str) -> Value {
    let mut object = applied(manifest);
    let name = object["metadata"]["name"].clone();
    object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
    object["spec"] = json!({"finalizers": ["kubernetes"]});
    created(
        object,
        uid,
        APPLY,
        Some(("kube-controller-manager", json!({"phase": "Active"}))),
    )
}

/// The kit's `hello` with what Serving's webhook defaults, ready, as the katacoda Service.
fn service(manifest: Value) -> Value {
    let mut object = applied(manifest);
    let metadata = &mut object["metadata"];
    metadata["generation"] = json!(1);
    metadata["annotations"]["serving.knative.dev/creator"] = json!(ADMIN);
    metadata["annotations"]["serving.knative.dev/lastModifier"] = json!(ADMIN);
    let template = &mut object["spec"]["template"]["spec"];
    template["containers"][0]["name"] = json!("user-container");
    template["containers"][0]["readinessProbe"] =
        json!({"successThreshold": 1, "tcpSocket": {"port": 0}});
    template["containers"][0]["resources"] = json!({});
    template["containerConcurrency"] = json!(0);
    template["enableServiceLinks"] = json!(false);
    template["timeoutSeconds"] = json!(300);
    object["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 100}]);
    let mut status = fixture_yaml(
        "serving/openshift-labs-learn-katacoda__serverless-05-knative-client__ksvc-greeter.yaml",
    )["status"]
        .clone();
    status["address"]["url"] = json!("http://hello.drills.svc.cluster.local");
    status["url"] = json!("http://hello.drills.example.com");
    status["conditions"] = ready(&["ConfigurationsReady", "Ready", "RoutesReady"]);
    status["latestCreatedRevisionName"] = json!("hello-00001");
    status["latestReadyRevisionName"] = json!("hello-00001");
    status["observedGeneration"] = json!(1);
    status["traffic"][0]["revisionName"] = json!("hello-00001");
    created(object, SERVICE_UID, APPLY, Some(("controller", status)))
}

/// The labels Serving puts on a Revision and its Deployment.
fn revision_labels() -> Value {
    json!({
        "serving.knative.dev/configuration": "hello",
        "serving.knative.dev/configurationGeneration": "1",
        "serving.knative.dev/configurationUID": CONFIGURATION_UID,
        "serving.knative.dev/service": "hello",
        "serving.knative.dev/serviceUID": SERVICE_UID,
    })
}

/// The container of the Service's template, as the Revision and the Deployment carry it.
fn container(image: &str) -> Value {
    json!({"name": "user-container", "image": image, "env": [{"name": "TARGET", "value": "drills"}],
           "readinessProbe": {"successThreshold": 1, "tcpSocket": {"port": 0}}, "resources": {}})
}

/// `hello-00001`: the rguske Revision renamed, scaled to zero and ready, its image resolved
/// to [`DIGEST`].
fn revision() -> Value {
    let fixture = crate::support::revision();
    let mut labels = revision_labels();
    labels["serving.knative.dev/routingState"] = json!("active");
    let object = json!({
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Revision",
        "metadata": {
            "name": "hello-00001", "namespace": "drills", "generation": 1, "labels": labels,
            "annotations": {
                "serving.knative.dev/creator": ADMIN,
                "serving.knative.dev/routes": "hello",
                "serving.knative.dev/routingStateModified": RECONCILED,
            },
            "ownerReferences": [{"apiVersion": "serving.knative.dev/v1", "kind": "Configuration",
                                 "name": "hello", "uid": CONFIGURATION_UID,
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"containerConcurrency": 0, "containers": [container("ghcr.io/knative/helloworld-go:latest")],
                 "enableServiceLinks": false, "timeoutSeconds": 300},
    });
    let mut status = fixture["status"].clone();
    for condition in status["conditions"].as_array_mut().expect("conditions") {
        condition["lastTransitionTime"] = json!(RECONCILED);
    }
    status["containerStatuses"][0]["imageDigest"] = json!(DIGEST);
    created(
        object,
        REVISION_UID,
        "controller",
        Some(("controller", status)),
    )
}

/// The Revision's Deployment as Serving's reconciler makes it (scaled to zero).
fn deployment() -> Value {
    let mut labels = revision_labels();
    labels["app"] = json!("hello-00001");
    labels["serving.knative.dev/revision"] = json!("hello-00001");
    labels["serving.knative.dev/revisionUID"] = json!(REVISION_UID);
    let object = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "hello-00001-deployment", "namespace": "drills", "generation": 1,
            "labels": labels.clone(),
            "ownerReferences": [{"apiVersion": "serving.knative.dev/v1", "kind": "Revision",
                                 "name": "hello-00001", "uid": REVISION_UID,
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"serving.knative.dev/revisionUID": REVISION_UID}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                container(DIGEST),
                {"name": "queue-proxy", "image": QUEUE},
            ]}},
        },
    });
    let status = json!({"observedGeneration": 1, "replicas": 0});
    created(
        object,
        DEPLOYMENT_UID,
        "controller",
        Some(("kube-controller-manager", status)),
    )
}

/// An Eventing object of the kit with what Eventing's webhook defaults.
fn eventing_defaults(manifest: Value) -> Value {
    let mut object = applied(manifest);
    object["metadata"]["generation"] = json!(1);
    object["metadata"]["annotations"]["eventing.knative.dev/creator"] = json!(ADMIN);
    object["metadata"]["annotations"]["eventing.knative.dev/lastModifier"] = json!(ADMIN);
    object
}

/// Broker `default`, ready, its dead-letter sink resolved (status as the vscode-knative one).
fn broker_object(manifest: Value) -> Value {
    let mut object = eventing_defaults(manifest);
    object["metadata"]["annotations"]["eventing.knative.dev/broker.class"] =
        json!("MTChannelBasedBroker");
    object["spec"]["config"] = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "name": "config-br-default-channel", "namespace": "knative-eventing"});
    object["spec"]["delivery"]["deadLetterSink"]["ref"]["namespace"] = json!("drills");
    let list = fixture_yaml(
        "eventing/redhat-developer-vscode-knative__test-eventingTree-broker__BrokerList.yaml",
    );
    let mut status = list["items"][0]["status"].clone();
    status["address"]["url"] =
        json!("http://broker-ingress.knative-eventing.svc.cluster.local/drills/default");
    status["annotations"] = json!({
        "knative.dev/channelAPIVersion": "messaging.knative.dev/v1",
        "knative.dev/channelAddress": "http://default-kne-trigger-kn-channel.drills.svc.cluster.local",
        "knative.dev/channelKind": "InMemoryChannel",
        "knative.dev/channelName": "default-kne-trigger",
    });
    status["conditions"] = ready(&[
        "Addressable",
        "DeadLetterSinkResolved",
        "FilterReady",
        "IngressReady",
        "Ready",
        "TriggerChannelReady",
    ]);
    status["deadLetterSinkUri"] = json!("http://hello.drills.svc.cluster.local");
    status["observedGeneration"] = json!(1);
    created(
        object,
        BROKER_UID,
        APPLY,
        Some(("mtchannel-broker", status)),
    )
}

/// Trigger `hello`, ready (status as the vscode-knative one, in `v1`'s condition set).
fn trigger_object(manifest: Value) -> Value {
    let mut object = eventing_defaults(manifest);
    object["metadata"]["labels"]["eventing.knative.dev/broker"] = json!("default");
    object["spec"]["filter"] = json!({});
    object["spec"]["subscriber"]["ref"]["namespace"] = json!("drills");
    object["spec"]["delivery"]["deadLetterSink"]["ref"]["namespace"] = json!("drills");
    let list =
        fixture_yaml("eventing/redhat-developer-vscode-knative__test-eventingTree-trigger.json");
    let mut status = list["items"][0]["status"].clone();
    let mut conditions = ready(&[
        "BrokerReady",
        "DeadLetterSinkResolved",
        "DependencyReady",
        "OIDCIdentityCreated",
        "Ready",
        "SubscriberResolved",
        "SubscriptionReady",
    ]);
    for condition in conditions.as_array_mut().expect("conditions") {
        if condition["type"] == "OIDCIdentityCreated" {
            condition["reason"] = json!("authentication-oidc feature disabled");
        }
    }
    status["conditions"] = conditions;
    status["subscriberUri"] = json!("http://hello.drills.svc.cluster.local");
    status["deadLetterSinkUri"] = json!("http://hello.drills.svc.cluster.local");
    status["observedGeneration"] = json!(1);
    created(
        object,
        TRIGGER_UID,
        APPLY,
        Some(("mtchannel-broker", status)),
    )
}

/// `config-autoscaler` as shipped in `knative-serving`.
fn config_autoscaler() -> Value {
    let object = applied(fixture_yaml(
        "configmaps/knative-serving__config-core-configmaps__config-autoscaler.yaml",
    ));
    created(object, CONFIG_MAP_UID, APPLY, None)
}
