//! The fake cluster (`fake_cluster.rs`) keeps the API server's contract as kube-rs, the client
//! drift-sentinel uses, sees it: merge and JSON patches with their preconditions, deletes with
//! `DeleteOptions` preconditions, creates, `managedFields` naming the field manager, `Status`
//! failures; its controllers react; and its Broker delivers each write, in order and in binary
//! mode, to a recording receiver here and to the real sink, which attributes a drill's edit to
//! the drill and a controller's write to the controller.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, Status};
use serde_json::{json, Value};

use crate::fake_cluster::{drill_world, FakeCluster, DIGEST};
use crate::resync_api::until;

mod sink;

const SERVICE: &str = "/apis/serving.knative.dev/v1/namespaces/drills/services/hello";
const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/drills/deployments/hello-00001-deployment";
const TRIGGER: &str = "/apis/eventing.knative.dev/v1/namespaces/drills/triggers/hello";
const BROKER: &str = "/apis/eventing.knative.dev/v1/namespaces/drills/brokers/default";
const DRILL: &str = "drift-sentinel-drill";

/// One delivery the receiver saw: its `ce-*` headers and content type, and its body.
#[derive(Debug, Clone)]
struct Received {
    headers: std::collections::BTreeMap<String, String>,
    body: Value,
}

/// A sink on loopback that records every delivery and answers from a script (then `202`).
struct Receiver {
    base: String,
    seen: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    async fn start(script: Vec<u16>) -> Receiver {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(VecDeque::from(script)));
        let recorded = Arc::clone(&seen);
        let app = axum::Router::new().fallback(move |request: Request<Body>| {
            let (seen, answers) = (Arc::clone(&recorded), Arc::clone(&answers));
            async move {
                let (parts, body) = request.into_parts();
                let bytes = axum::body::to_bytes(body, 4 << 20).await.unwrap();
                let headers = parts
                    .headers
                    .iter()
                    .filter(|(name, _)| {
                        name.as_str().starts_with("ce-") || name.as_str() == "content-type"
                    })
                    .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_string()))
                    .collect();
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                seen.lock().unwrap().push(Received { headers, body });
                let status = answers.lock().unwrap().pop_front().unwrap_or(202);
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { base, seen, task }
    }

    fn seen(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }
}

/// A kube-rs client from the kubeconfig the fake writes.
async fn client(cluster: &FakeCluster, dir: &Path) -> kube::Client {
    let path = cluster.kubeconfig(dir, "fake-ctx");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let options = kube::config::KubeConfigOptions {
        context: Some("fake-ctx".to_string()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn api(client: &kube::Client, group: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind));
    Api::namespaced_with(client.clone(), "drills", &resource)
}

fn as_json(object: DynamicObject) -> Value {
    serde_json::to_value(object).unwrap()
}

/// The API's refusal, or a failure naming what came instead.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API refusal, got {other:?}"),
    }
}

fn as_manager(manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(manager.to_string()),
        ..PatchParams::default()
    }
}

/// The `fieldsV1` of `manager`'s entry on the main resource.
fn owned_by(object: &Value, manager: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["manager"] == manager && entry.get("subresource").is_none())
        .map(|entry| entry["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

fn condition(object: &Value, kind: &str) -> Value {
    object["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|condition| condition["type"] == kind)
        .cloned()
        .unwrap_or(Value::Null)
}

fn no_log(dir: &Path) -> PathBuf {
    dir.join("no-log")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_world_is_announced_in_order_in_binary_mode_and_a_5xx_is_retried_with_the_same_id() {
    let receiver = Receiver::start(vec![503]).await;
    let world = drill_world();
    let cluster = FakeCluster::start(&receiver.base, world.clone()).await;
    assert_eq!(
        cluster.writes(),
        0,
        "the drill world is consistent: no reaction"
    );
    assert_eq!(cluster.events_sent(), world.len());
    assert_eq!(cluster.refused(), Vec::<String>::new());
    let seen = receiver.seen();
    assert_eq!(seen.len(), world.len() + 1, "the first one twice");
    assert_eq!(seen[0].headers["ce-id"], seen[1].headers["ce-id"]);
    let delivered = &seen[1..];
    let mut last_version = 0;
    for (received, seed) in delivered.iter().zip(&world) {
        let headers = &received.headers;
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(headers["ce-specversion"], "1.0");
        assert_eq!(headers["ce-type"], "dev.knative.apiserver.resource.add");
        assert_eq!(headers["ce-source"], "https://10.96.0.1:443");
        assert_eq!(headers["ce-kind"], seed["kind"]);
        assert_eq!(headers["ce-apiversion"], seed["apiVersion"]);
        assert_eq!(headers["ce-name"], seed["metadata"]["name"]);
        assert!(headers.contains_key("ce-time") && headers.contains_key("ce-knativearrivaltime"));
        assert_eq!(received.body["metadata"]["uid"], seed["metadata"]["uid"]);
        let version: u64 = received.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(version > last_version, "resourceVersions increase");
        last_version = version;
    }
    assert_eq!(
        delivered[1].headers["ce-subject"],
        "/apis/serving.knative.dev/v1/namespaces/drills/services/hello"
    );
    assert_eq!(
        delivered[0].headers["ce-subject"], "/apis/v1/namespaces//namespaces/drills",
        "a cluster-scoped object's subject has an empty namespace"
    );
    // A change the watch never saw: stored with a new resourceVersion, no event, no write.
    let mut unseen = cluster.object(SERVICE).unwrap();
    unseen["metadata"]["labels"]["unseen"] = json!("yes");
    let stored = cluster.put(unseen);
    assert_eq!(cluster.object(SERVICE).unwrap(), stored);
    assert!(
        stored["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > last_version
    );
    cluster.settled().await;
    assert_eq!((cluster.events_sent(), cluster.writes()), (world.len(), 0));

    // Without the token nothing is answered, but the request is recorded.
    let response = reqwest::get(format!("{}{SERVICE}", cluster.base()))
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(
        cluster.requests(),
        vec![("GET".to_string(), SERVICE.to_string())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_patch_applies_names_its_manager_and_a_stale_resource_version_is_a_409() {
    let receiver = Receiver::start(Vec::new()).await;
    let cluster = FakeCluster::start(&receiver.base, drill_world()).await;
    let dir = tempfile::tempdir().unwrap();
    let services = api(
        &client(&cluster, dir.path()).await,
        "serving.knative.dev",
        "Service",
    );
    let seeded = cluster.object(SERVICE).unwrap();
    let version = seeded["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let traffic = json!([{"latestRevision": true, "percent": 80}, {"latestRevision": true, "percent": 20, "tag": "drill"}]);
    let patched = as_json(
        services
            .patch(
                "hello",
                &as_manager(DRILL),
                &Patch::Merge(json!({
                "metadata": {"resourceVersion": version}, "spec": {"traffic": traffic}})),
            )
            .await
            .unwrap(),
    );
    assert_eq!(patched["spec"]["traffic"], traffic);
    assert_eq!(patched["metadata"]["generation"], 2);
    assert_ne!(patched["metadata"]["resourceVersion"], json!(version));
    // Serving's webhook stamps lastModifier inside the same request: the writer owns it too.
    assert_eq!(
        owned_by(&patched, DRILL),
        json!({"f:metadata": {"f:annotations": {"f:serving.knative.dev/lastModifier": {}}},
               "f:spec": {"f:traffic": {}}})
    );
    assert_eq!(
        owned_by(&patched, "kubectl-client-side-apply")["f:spec"].get("f:traffic"),
        None,
        "the field moved to the drill"
    );
    assert_eq!(
        patched["metadata"]["annotations"]["serving.knative.dev/lastModifier"],
        crate::fake_cluster::USER
    );

    // The same precondition again is stale now: 409, and nothing changes.
    let status = refusal(
        services
            .patch(
                "hello",
                &as_manager(DRILL),
                &Patch::Merge(json!({
                "metadata": {"resourceVersion": version}, "spec": {"traffic": null}})),
            )
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Operation cannot be fulfilled on services.serving.knative.dev \"hello\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("hello", "services")
    );
    cluster.settled().await;
    let stored = cluster.object(SERVICE).unwrap();
    assert_eq!(stored["spec"]["traffic"], traffic);
    // The controller caught up observedGeneration in a write of its own, on /status.
    assert_eq!(stored["status"]["observedGeneration"], 2);
    assert_eq!(
        cluster.writes(),
        2,
        "the patch and the controller's status write"
    );
    let updates: Vec<Value> = receiver.seen()[drill_world().len()..]
        .iter()
        .map(|received| received.body.clone())
        .collect();
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0]["spec"]["traffic"], traffic);
    assert_eq!(updates[1]["status"]["observedGeneration"], 2);
    assert_eq!(
        updates[1]["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );

    // A patch that changes nothing is no write.
    services
        .patch(
            "hello",
            &as_manager(DRILL),
            &Patch::Merge(json!({"spec": {"traffic": traffic}})),
        )
        .await
        .unwrap();
    assert_eq!(cluster.writes(), 2);
    assert_eq!(cluster.object(SERVICE).unwrap(), stored);
}

/// Sends a JSON patch as kube-rs's raw request: the status code and the body.
async fn json_patch(
    client: &kube::Client,
    path: &str,
    content_type: &str,
    patch: Value,
) -> (u16, Value) {
    let request = http::Request::patch(format!("{path}?fieldManager={DRILL}"))
        .header("content-type", content_type)
        .body(serde_json::to_vec(&patch).unwrap())
        .unwrap();
    match client.request::<Value>(request).await {
        Ok(object) => (200, object),
        Err(kube::Error::Api(status)) => (status.code, serde_json::to_value(*status).unwrap()),
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_patch_whose_test_fails_is_a_422_and_one_that_holds_is_applied() {
    let receiver = Receiver::start(Vec::new()).await;
    let cluster = FakeCluster::start(&receiver.base, drill_world()).await;
    let dir = tempfile::tempdir().unwrap();
    let client = client(&cluster, dir.path()).await;
    let before = cluster.object(DEPLOYMENT).unwrap();
    let version = before["metadata"]["resourceVersion"].clone();
    let image = "/spec/template/spec/containers/0/image";
    const JSON_PATCH: &str = "application/json-patch+json";

    let (code, body) = json_patch(
        &client,
        DEPLOYMENT,
        JSON_PATCH,
        json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "replace", "path": image, "value": "ghcr.io/knative/helloworld-go:drill"}]),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(
        body["message"],
        "the server rejected our request due to an error in our request"
    );
    let (code, _) = json_patch(
        &client,
        DEPLOYMENT,
        JSON_PATCH,
        json!([
        {"op": "replace", "path": "/spec/template/spec/containers/5/image", "value": "x"}]),
    )
    .await;
    assert_eq!(code, 422, "a path that does not exist");
    let (code, body) = json_patch(
        &client,
        DEPLOYMENT,
        "application/strategic-merge-patch+json",
        json!({}),
    )
    .await;
    assert_eq!(
        (code, &body["reason"]),
        (415, &json!("UnsupportedMediaType"))
    );
    assert_eq!(
        cluster.object(DEPLOYMENT).unwrap(),
        before,
        "nothing was written"
    );
    assert_eq!(cluster.writes(), 0);

    let (code, patched) = json_patch(&client, DEPLOYMENT, JSON_PATCH, json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "replace", "path": image, "value": "ghcr.io/knative/helloworld-go:drill"},
        {"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {"name": "DRILL", "value": "1"}}])).await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        patched.pointer(image).unwrap(),
        "ghcr.io/knative/helloworld-go:drill"
    );
    assert_eq!(
        patched["spec"]["template"]["spec"]["containers"][0]["env"][1]["name"],
        "DRILL"
    );
    // A built-in kind's containers are keyed by name; the image moved to the drill.
    let user_container = "k:{\"name\":\"user-container\"}";
    let mine = &owned_by(&patched, DRILL)["f:spec"]["f:template"]["f:spec"]["f:containers"]
        [user_container];
    assert_eq!(mine["f:image"], json!({}), "{patched}");
    let controllers = &owned_by(&patched, "controller")["f:spec"]["f:template"]["f:spec"]
        ["f:containers"][user_container];
    assert_eq!(controllers.get("f:image"), None);
    assert_eq!(controllers["f:name"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_with_a_wrong_uid_is_a_409_and_with_the_right_one_the_object_is_gone() {
    let receiver = Receiver::start(Vec::new()).await;
    let cluster = FakeCluster::start(&receiver.base, drill_world()).await;
    let dir = tempfile::tempdir().unwrap();
    let services = api(
        &client(&cluster, dir.path()).await,
        "serving.knative.dev",
        "Service",
    );
    let seeded = cluster.object(SERVICE).unwrap();
    let uid = seeded["metadata"]["uid"].as_str().unwrap().to_string();
    let guarded = |uid: &str| DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };

    let status = refusal(services.delete("hello", &guarded("not-the-uid")).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.ends_with(&format!(
            "Precondition failed: UID in precondition: not-the-uid, UID in object meta: {uid}"
        )),
        "{}",
        status.message
    );
    assert!(cluster.object(SERVICE).is_some());

    let gone = services.delete("hello", &guarded(&uid)).await.unwrap();
    let status = gone
        .right()
        .expect("a custom resource's delete answers a Status");
    let details = status.details.unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str(),
            details.uid.as_str()
        ),
        ("hello", "serving.knative.dev", "services", uid.as_str())
    );
    let status = refusal(services.get("hello").await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        status.message,
        "services.serving.knative.dev \"hello\" not found"
    );

    // The Broker and the Trigger lose their sink and subscriber, as Eventing reports it.
    cluster.settled().await;
    let trigger = cluster.object(TRIGGER).unwrap();
    let broker = cluster.object(BROKER).unwrap();
    assert_eq!(
        condition(&broker, "DeadLetterSinkResolved")["status"],
        "False"
    );
    assert_eq!(
        condition(&trigger, "BrokerReady")["status"],
        "False",
        "{trigger}"
    );
    assert_eq!(condition(&trigger, "Ready")["status"], "False");
    let events: Vec<Received> = receiver.seen()[drill_world().len()..].to_vec();
    assert_eq!(
        events[0].headers["ce-type"],
        "dev.knative.apiserver.resource.delete"
    );
    assert_eq!(
        events[0].body["metadata"]["uid"],
        json!(uid),
        "the last object"
    );
    assert!(
        events[0].body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > seeded["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
    );
    assert!(events[1..]
        .iter()
        .all(|event| event.headers["ce-type"] == "dev.knative.apiserver.resource.update"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_is_a_201_with_server_fields_and_a_second_is_a_409_already_exists() {
    let receiver = Receiver::start(Vec::new()).await;
    let cluster = FakeCluster::start(&receiver.base, drill_world()).await;
    let dir = tempfile::tempdir().unwrap();
    let services = api(
        &client(&cluster, dir.path()).await,
        "serving.knative.dev",
        "Service",
    );
    let manifest: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "serving.knative.dev/v1", "kind": "Service",
        "metadata": {"name": "hello-two", "uid": "from-the-client"},
        "spec": {"template": {"spec": {"containers": [{"image": "ghcr.io/knative/helloworld-go:latest"}]}}},
        "status": {"url": "http://made.up"}}))
    .unwrap();
    let params = PostParams {
        field_manager: Some(DRILL.to_string()),
        ..PostParams::default()
    };
    let created = as_json(services.create(&params, &manifest).await.unwrap());
    let metadata = &created["metadata"];
    assert_ne!(metadata["uid"], "from-the-client");
    assert_eq!(metadata["uid"].as_str().unwrap().len(), 36, "{created}");
    assert_eq!(metadata["generation"], 1);
    assert!(metadata["creationTimestamp"].is_string() && metadata["resourceVersion"].is_string());
    assert_eq!(metadata["namespace"], "drills");
    assert_eq!(created.get("status"), None, "status is dropped on create");
    let fields = owned_by(&created, DRILL);
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"],
        json!({}),
        "{fields}"
    );
    assert_eq!(fields["f:spec"]["."], json!({}));
    let path = "/apis/serving.knative.dev/v1/namespaces/drills/services/hello-two";
    let stored = cluster.object(path).unwrap();
    assert_eq!(stored["metadata"]["uid"], created["metadata"]["uid"]);
    // Serving's controller then writes the new Service's status (a newer version).
    let version = |object: &serde_json::Value| {
        object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(version(&stored) > version(&created), "{stored}");
    assert_eq!(
        stored["status"]["conditions"][1]["type"], "Ready",
        "{stored}"
    );
    assert_eq!(
        stored["status"]["address"]["url"],
        "http://hello-two.drills.svc.cluster.local"
    );

    let status = refusal(services.create(&params, &manifest).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(
        status.message,
        "services.serving.knative.dev \"hello-two\" already exists"
    );
    cluster.settled().await;
    let seen = receiver.seen();
    let adds: Vec<&Received> = seen[drill_world().len()..]
        .iter()
        .filter(|event| event.headers["ce-type"] == "dev.knative.apiserver.resource.add")
        .collect();
    assert_eq!(adds.len(), 1);
    assert_eq!(adds[0].body["metadata"]["uid"], created["metadata"]["uid"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_resolve_a_trigger_subscriber_and_repair_a_deployment_image() {
    let receiver = Receiver::start(Vec::new()).await;
    let cluster = FakeCluster::start(&receiver.base, drill_world()).await;
    cluster.repair_deployments(Duration::from_millis(200));
    let dir = tempfile::tempdir().unwrap();
    let client = client(&cluster, dir.path()).await;
    let triggers = api(&client, "eventing.knative.dev", "Trigger");
    let gone = json!({"spec": {"subscriber": {"ref": {"name": "no-such-service"}}}});
    triggers
        .patch("hello", &as_manager(DRILL), &Patch::Merge(gone))
        .await
        .unwrap();
    let trigger = cluster.object(TRIGGER).unwrap();
    let resolved = condition(&trigger, "SubscriberResolved");
    assert_eq!(resolved["status"], "False");
    assert_eq!(resolved["reason"], "Unable to get the Subscriber's URI");
    assert_eq!(
        resolved["message"],
        "failed to get object drills/no-such-service: services.serving.knative.dev \"no-such-service\" not found"
    );
    assert_eq!(
        condition(&trigger, "Ready")["reason"],
        "Unable to get the Subscriber's URI"
    );
    assert_eq!(trigger["status"].get("subscriberUri"), None);
    assert_eq!(trigger["status"]["observedGeneration"], 2);
    let back = json!({"spec": {"subscriber": {"ref": {"name": "hello"}}}});
    triggers
        .patch("hello", &as_manager(DRILL), &Patch::Merge(back))
        .await
        .unwrap();
    let trigger = cluster.object(TRIGGER).unwrap();
    assert_eq!(condition(&trigger, "SubscriberResolved")["status"], "True");
    assert_eq!(condition(&trigger, "Ready")["status"], "True");

    // A status-only change: the Broker's ingress goes down, its Ready and the Trigger follow.
    let mut conditions = cluster.object(BROKER).unwrap()["status"]["conditions"].clone();
    for condition in conditions.as_array_mut().unwrap() {
        if condition["type"] == "IngressReady" {
            *condition = json!({"type": "IngressReady", "status": "False", "reason": "EndpointsUnavailable",
                                "message": "Endpoints \"broker-ingress\" are unavailable."});
        }
    }
    let broker = cluster
        .set_status(BROKER, json!({"conditions": conditions}))
        .unwrap();
    assert_eq!(
        broker["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(
                |entry| entry["manager"] == "mtchannel-broker" && entry["subresource"] == "status"
            )
            .count(),
        1
    );
    assert_eq!(
        condition(&cluster.object(BROKER).unwrap(), "Ready")["reason"],
        "EndpointsUnavailable"
    );
    let trigger = cluster.object(TRIGGER).unwrap();
    assert_eq!(condition(&trigger, "BrokerReady")["status"], "False");
    assert_eq!(
        condition(&trigger, "BrokerReady")["reason"],
        "EndpointsUnavailable"
    );

    // Knative puts a hand-changed image back on the Revision's Deployment, as `controller`.
    let (code, edited) = json_patch(&client, DEPLOYMENT, "application/json-patch+json", json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "ghcr.io/knative/helloworld-go:drill"}])).await;
    assert_eq!(code, 200, "{edited}");
    let repaired = until("the Deployment's repair", &no_log(dir.path()), || {
        let object = cluster.object(DEPLOYMENT);
        async move {
            object.filter(|object| {
                object["spec"]["template"]["spec"]["containers"][0]["image"] == DIGEST
            })
        }
    })
    .await;
    let containers =
        &owned_by(&repaired, "controller")["f:spec"]["f:template"]["f:spec"]["f:containers"];
    assert_eq!(
        containers["k:{\"name\":\"user-container\"}"]["f:image"],
        json!({}),
        "{repaired}"
    );
}
